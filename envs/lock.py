"""The locked environment. `make lock` runs this: uv compiles requirements.lock from pyproject.toml (its dependencies
and the `test` extra) and requirements-nodeps.txt, every package pinned with the hashes of all its files on PyPI;
then the rule environment of `snakemake --software-deployment-method conda` is written from the lock:
envs/oversmooth.yaml and envs/oversmooth.post-deploy.sh. tests/test_envs.py reads the lock with the functions here.

    python envs/lock.py [--uv PATH] [UV OPTION ...]   e.g. --upgrade-package scipy (uv keeps every other pin)
    python envs/lock.py --envs-only                   write envs/ from the lock as it is (no network)

torch stays out of the lock, with the packages it needs only on Linux (its CUDA stack): `make install` installs
torch by its pin after the lock, so that a machine gets the build its index offers for that pin (a CPU wheel where
one lies in pip's find-links, PyPI's CUDA build elsewhere) with the CUDA libraries that build pins exactly. Its
other dependencies (sympy, networkx, ...) are in the lock.

Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOCK = "requirements.lock"
NODEPS = "requirements-nodeps.txt"
ENV_FILE = "envs/oversmooth.yaml"
POST_DEPLOY = "envs/oversmooth.post-deploy.sh"
PYTHON_VERSION = "3.11"  # the lock's lowest Python (universal: its markers hold for every later one)
LOCKED_EXTRAS = ("test",)  # `bench` (cvxpy, one benchmark) stays outside the lock
TORCH = "torch"
# The variable through which the Snakefile names its own folder to the post-deploy script (the same name as
# oversmooth.workflow.source.SOURCE_VARIABLE; tests/test_envs.py checks).
SOURCE_VARIABLE = "OVERSMOOTH_SOURCE"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)\s*(?:;\s*(.+?))?\s*$")


def normalized(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Pin:
    """One package of the lock: its version, environment marker (None: everywhere), hashes and the packages (or
    inputs, like `oversmooth (pyproject.toml)`) that pull it in."""

    name: str
    version: str
    marker: str | None
    hashes: tuple[str, ...]
    parents: tuple[str, ...]

    def requirement(self) -> str:
        """`name==version` with its marker, as a requirements file or a conda env file's pip list takes it."""
        return f"{self.name}=={self.version}" + (f" ; {self.marker}" if self.marker else "")

    def hashed(self) -> str:
        """The requirement with its hashes, as pip's hash-checking mode reads it."""
        return " \\\n".join([self.requirement(), *(f"    --hash={h}" for h in self.hashes)])


def read_lock(text: str) -> dict[str, Pin]:
    """The packages of a lock that `uv pip compile --generate-hashes` wrote (with its `# via` annotations), by
    normalized name."""
    entries: list[dict] = []
    in_via = False
    for line in text.splitlines():
        stripped = line.strip().rstrip("\\").strip()
        if not stripped:
            continue
        if not line.startswith((" ", "#")):
            match = PIN.match(stripped)
            if not match:
                raise ValueError(f"{LOCK}: not a pinned requirement: {line!r}")
            entries.append({"name": match.group(1), "version": match.group(2), "marker": match.group(3),
                            "hashes": [], "parents": []})
            in_via = False
        elif stripped.startswith("--hash="):
            entries[-1]["hashes"].append(stripped.removeprefix("--hash="))
        elif stripped.startswith("# via") and entries:
            in_via = True
            if rest := stripped.removeprefix("# via").strip():
                entries[-1]["parents"].append(rest)
        elif in_via and stripped.startswith("#") and entries:
            entries[-1]["parents"].append(stripped.lstrip("#").strip())
    return {normalized(e["name"]): Pin(e["name"], e["version"], e["marker"], tuple(e["hashes"]), tuple(e["parents"]))
            for e in entries}


def pinned(requirements: Iterable[str], where: str) -> dict[str, str]:
    """{normalized name: version} of `name==version` requirements; anything else is an error naming `where`."""
    pins = {}
    for requirement in requirements:
        match = PIN.match(requirement.strip())
        if not match:
            raise ValueError(f"{where}: {requirement!r} is not pinned with ==")
        pins[normalized(match.group(1))] = match.group(2)
    return pins


def requirement_lines(path: Path) -> list[str]:
    """The requirements of a requirements file (comments and blank lines left out)."""
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def runtime_requirements(repo: Path = REPO) -> dict[str, str]:
    """pyproject.toml's dependencies: what `pip install .` installs, and every rule's environment."""
    return pinned(tomllib.loads((repo / "pyproject.toml").read_text())["project"]["dependencies"], "pyproject.toml")


def nodeps_requirements(repo: Path = REPO) -> dict[str, str]:
    """The packages installed without their declared dependencies (requirements-nodeps.txt)."""
    return pinned(requirement_lines(repo / NODEPS), NODEPS)


def direct_requirements(repo: Path = REPO) -> dict[str, str]:
    """Everything the lock is made from: the dependencies, the locked extras and the --no-deps packages."""
    extras = tomllib.loads((repo / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    locked = [requirement for extra in LOCKED_EXTRAS for requirement in extras[extra]]
    return runtime_requirements(repo) | pinned(locked, "pyproject.toml") | nodeps_requirements(repo)


def closure(pins: Mapping[str, Pin], roots: Iterable[str]) -> set[str]:
    """The normalized names of `roots` and of every package of the lock they pull in (through `# via`)."""
    children: dict[str, set[str]] = {}
    for name, pin in pins.items():
        for parent in pin.parents:
            children.setdefault(normalized(parent.split(" ")[0].split("[")[0]), set()).add(name)
    found, pending = set(), [normalized(root) for root in roots]
    while pending:
        name = pending.pop()
        if name not in found:
            found.add(name)
            pending.extend(children.get(name, ()))
    return found


def env_requirements(pins: Mapping[str, Pin], repo: Path = REPO) -> list[str]:
    """The pip part of the rule environment: pyproject's dependencies and everything the lock pulls in for them,
    at the lock's versions (the test tools and the --no-deps packages left out); torch by its own pin."""
    runtime = runtime_requirements(repo)
    names = closure(pins, runtime) - set(nodeps_requirements(repo))
    requirements = [pins[name].requirement() for name in sorted(names) if name in pins]
    return sorted(requirements + [f"{TORCH}=={runtime[TORCH]}"], key=str.lower)


def env_yaml(pins: Mapping[str, Pin], repo: Path = REPO) -> str:
    """envs/oversmooth.yaml: Python, pip, and the pinned pip packages (pins without hashes: see the comment)."""
    lines = [
        f"# Generated from {LOCK} by `make lock` (envs/lock.py): do not edit. Every rule's environment under",
        "# `snakemake --software-deployment-method conda`: the lock's packages but the test tools, at the lock's",
        "# versions, and torch by its pin (the build its index gives, with the CUDA libraries that build pins). No",
        "# hashes: pip checks them only when every requirement has them, and torch's depend on its build.",
        f"# Snakemake then runs {Path(POST_DEPLOY).name} in the new environment: it installs the --no-deps",
        "# packages (hashed) and the workflow's own package, editable, from the folder of the Snakefile.",
        "channels:",
        "  - conda-forge",
        "  - nodefaults",
        "dependencies:",
        f"  - python={PYTHON_VERSION}",
        "  - pip",
        "  - pip:",
        *(f"      - {requirement}" for requirement in env_requirements(pins, repo)),
    ]
    return "\n".join(lines) + "\n"


def post_deploy_script(pins: Mapping[str, Pin], repo: Path = REPO) -> str:
    """envs/oversmooth.post-deploy.sh: what conda's pip step cannot install (Snakemake runs it in the new
    environment, from the run's folder, with the controller's variables)."""
    nodeps = "\n".join(pins[name].hashed() for name in sorted(nodeps_requirements(repo)))
    return f"""#!/bin/sh
# Generated from {LOCK} by `make lock` (envs/lock.py): do not edit. Snakemake runs this post-deploy script
# in the environment of {Path(ENV_FILE).name} once conda has made it. It installs what conda's pip step cannot:
# the packages of {NODEPS} without their declared dependencies, with the lock's hashes; and the
# workflow's own package, editable from ${SOURCE_VARIABLE}, the folder of the Snakefile, which the Snakefile
# sets (Snakemake copies the env file to .snakemake/conda/ before conda reads it: no path relative to the env
# file names the repository).
set -eu
: "${{{SOURCE_VARIABLE}:?is not set: the Snakefile sets it; create this environment through snakemake}}"
requirements=$(mktemp)
trap 'rm -f "$requirements"' EXIT
cat > "$requirements" <<'EOF'
{nodeps}
EOF
python -m pip install --no-deps --require-hashes -r "$requirements"
python -m pip install --no-deps --no-build-isolation --editable "${SOURCE_VARIABLE}"
"""


def uv_compile(uv: str, sources: list[str], options: list[str], stdin: str | None = None) -> str:
    """Run `uv pip compile` universally for the lock's Python in the repository; its output."""
    command = [uv, "pip", "compile", *sources, "--universal", "--python-version", PYTHON_VERSION, *options]
    result = subprocess.run(command, cwd=REPO, input=stdin, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr}")
    return result.stdout


def torch_linux_packages(uv: str) -> list[str]:
    """The packages torch's pin pulls in only on Linux (its CUDA stack: nvidia-*, cuda-*, triton)."""
    out = uv_compile(uv, ["-"], ["--no-header", "--no-annotate"], stdin=f"{TORCH}=={runtime_requirements()[TORCH]}\n")
    pins = [PIN.match(line.strip()) for line in out.splitlines() if line.strip() and not line.startswith("#")]
    return sorted(p.group(1) for p in pins if p and p.group(3) and "sys_platform == 'linux'" in p.group(3))


def compile_lock(uv: str, options: list[str]) -> None:
    """requirements.lock from pyproject.toml (dependencies and LOCKED_EXTRAS) and requirements-nodeps.txt (their
    dependencies as pyproject.toml's [tool.uv] dependency-metadata declares them: none); uv keeps the pins of the
    lock as it is unless `options` upgrade them."""
    left_out = [TORCH, *torch_linux_packages(uv)]
    uv_compile(uv, ["pyproject.toml", NODEPS], [
        *(f"--extra={extra}" for extra in LOCKED_EXTRAS), "--generate-hashes", "--custom-compile-command=make lock",
        *(f"--no-emit-package={name}" for name in left_out), "--output-file", LOCK, *options])


def write_envs(repo: Path = REPO) -> None:
    """envs/oversmooth.yaml and its post-deploy script from the lock."""
    pins = read_lock((repo / LOCK).read_text())
    (repo / ENV_FILE).write_text(env_yaml(pins, repo))
    (repo / POST_DEPLOY).write_text(post_deploy_script(pins, repo))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--uv", default="uv", help="the uv executable")
    parser.add_argument("--envs-only", action="store_true", help="write envs/ from the lock as it is")
    args, uv_options = parser.parse_known_args(argv)
    if not args.envs_only:
        compile_lock(args.uv, uv_options)
    write_envs()
    print(f"wrote {'' if args.envs_only else LOCK + ', '}{ENV_FILE}, {POST_DEPLOY}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
