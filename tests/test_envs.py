"""The conda env files repeat pyproject's pins; they must agree (and pin everything they list)."""

import re
import tomllib

import yaml

PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)$")


def _pins(lines):
    return {m.group(1).lower().replace("_", "-"): m.group(2) for line in lines if (m := PIN.match(line.strip()))}


def test_env_files_agree_with_pyproject(repo):
    project = tomllib.loads((repo / "pyproject.toml").read_text())["project"]
    declared = _pins(project["dependencies"] + sum(project["optional-dependencies"].values(), []))
    nodeps = [line for line in (repo / "requirements-nodeps.txt").read_text().splitlines() if line.strip() and not line.startswith("#")]
    declared |= _pins(nodeps)
    optional = sum(project["optional-dependencies"].values(), [])
    assert len(declared) == len(project["dependencies"]) + len(optional) + len(nodeps), (
        "every dependency must be pinned with ==")
    env_files = sorted((repo / "envs").glob("*.yaml"))
    assert env_files
    for env_file in env_files:
        env = yaml.safe_load(env_file.read_text())
        pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
        packages = [line for line in pip_section if not line.startswith("-")]
        pins = _pins(packages)
        assert len(pins) == len(packages), f"{env_file.name}: every package must be pinned with =="
        for name, version in pins.items():
            assert name in declared, f"{env_file.name}: {name} is not a dependency in pyproject.toml"
            assert version == declared[name], f"{env_file.name}: {name}=={version}, pyproject has {declared[name]}"
        assert "-e .." in pip_section, f"{env_file.name}: must install the oversmooth package itself"


def test_every_conda_directive_names_an_existing_env(repo):
    for smk in (repo / "rules").glob("*.smk"):
        for env in re.findall(r'conda:\s*\n\s*"([^"]+)"', smk.read_text()):
            assert (smk.parent / env).resolve().is_file(), f"{smk.name}: {env} does not exist"
