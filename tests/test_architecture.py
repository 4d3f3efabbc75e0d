"""The library's layers (pyproject.toml's import-linter contracts; docs/architecture.md) hold: no module imports
from a later stage's sub-package, and no two modules or sub-packages import each other in a cycle; and every class
it defines is there for the pipeline, not for the tests alone."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(repo: Path, src: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--config", str(repo / "pyproject.toml")],
                          capture_output=True, text=True, timeout=300, env=env, check=False)


def test_the_library_keeps_its_layers_and_has_no_import_cycle(repo):
    result = lint_imports(repo, repo / "src")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 2 kept, 0 broken." in result.stdout


@pytest.mark.parametrize("module, statement, broken, summary", [
    # the shared layer reaching up into the reporting one: a layer breach, and a cycle of sub-packages
    ("core/catalog.py", "from oversmooth.reporting import metrics_report",
     "oversmooth.core.catalog -> oversmooth.reporting.metrics_report", "Contracts: 0 kept, 2 broken."),
    # two modules of one sub-package importing each other (io <- plotting already): a cycle, not a layer breach
    ("core/io.py", "from oversmooth.core import plotting", "no import cycles between modules BROKEN",
     "Contracts: 1 kept, 1 broken."),
])
def test_an_import_from_a_later_stage_or_a_cycle_breaks_a_contract(repo, tmp_path, module, statement, broken, summary):
    src = tmp_path / "src"
    shutil.copytree(repo / "src" / "oversmooth", src / "oversmooth")
    path = src / "oversmooth" / module
    path.write_text(path.read_text() + f"\n\ndef _late():\n    {statement}  # noqa\n")
    result = lint_imports(repo, src)
    assert result.returncode == 1 and summary in result.stdout, result.stdout
    assert broken in result.stdout


def _names_used(tree: ast.AST) -> set[str]:
    """The names and attributes a module reads, but in annotations (a type hint neither builds nor calls a class)."""
    hinted = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs, node.args.vararg,
                         node.args.kwarg]
            hints = [a.annotation for a in arguments if a is not None and a.annotation is not None] + [node.returns]
        else:
            hints = [node.annotation] if isinstance(node, ast.AnnAssign) else []
        hinted |= {id(part) for hint in hints if hint is not None for part in ast.walk(hint)}
    return {node.id if isinstance(node, ast.Name) else node.attr for node in ast.walk(tree)
            if isinstance(node, (ast.Name, ast.Attribute)) and id(node) not in hinted}


def test_every_class_of_the_library_is_used_by_the_pipeline(repo):
    """Each class the library defines (a Protocol aside: it types what others implement) is built, subclassed or
    read by the library, the workflow's scripts and rules, or the benchmarks, not by the tests alone (the sampler's
    first key/value cache stayed in models.model for a test after the sampler moved to kvcache.BlockKVCache)."""
    code = [*(repo / "src" / "oversmooth").rglob("*.py"), *(repo / "workflow").rglob("*.py"),
            *(repo / "benchmarks").rglob("*.py")]
    used = set().union(*(_names_used(ast.parse(path.read_text())) for path in code))
    rules = "\n".join(path.read_text() for path in [repo / "Snakefile", *(repo / "rules").rglob("*.smk")])
    unused = [f"{path.relative_to(repo)}: {node.name}" for path in (repo / "src" / "oversmooth").rglob("*.py")
              for node in ast.parse(path.read_text()).body if isinstance(node, ast.ClassDef)
              and not any(getattr(base, "id", None) == "Protocol" for base in node.bases)
              and node.name not in used and not re.search(rf"\b{node.name}\b", rules)]
    assert not unused, f"classes no pipeline code uses: {unused}"
