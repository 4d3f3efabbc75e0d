"""Which code a rule's result depends on: a digest of its workflow script and of each library module it runs.

Snakemake's own `code` trigger follows a script's time (a `git checkout` or a copy reruns it, an edit in a library
module the script calls does not), so the workflow profile turns it off. Each rule instead carries its script's
digest (`code_script`, valued `workflow/scripts/<name>.py <digest>`) and one param per `oversmooth` module its
script imports, directly or through other modules (`library_params`), valued `oversmooth.<module> <digest>`:
Snakemake reports a rerun's reason as the param values that changed, so the reason names the edited script or
module. Only code counts: a changed comment, docstring or layout leaves the digest as it is.
"""

from __future__ import annotations

import ast
import hashlib
import os
from functools import lru_cache
from pathlib import Path

PACKAGE = "oversmooth"
PACKAGE_DIR = Path(__file__).resolve().parents[1]


def module_file(module: str) -> Path | None:
    """The source file of `oversmooth.<name>` (or of the package itself); None for anything else."""
    parts = module.split(".")
    if parts[0] != PACKAGE:
        return None
    base = PACKAGE_DIR.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imported_modules(source: str | ast.AST) -> set[str]:
    """The `oversmooth` modules that `source` imports anywhere (top level or inside functions)."""
    found = set()
    tree = ast.parse(source) if isinstance(source, str) else source
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)  # `from oversmooth import x`
    return {name for name in found if module_file(name) is not None}


def module_closure(source: str) -> list[str]:
    """Every `oversmooth` module `source` depends on through imports, with the `__init__` of each package they lie
    in (importing `oversmooth.a.b` runs `oversmooth` and `oversmooth.a` first)."""
    pending, seen = imported_modules(source), set()
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        pending |= _parsed(module)[0] | set(_packages_of(module))
    return sorted(seen)


def _packages_of(module: str) -> list[str]:
    """The packages `module` lies in: `oversmooth.a.b` -> `oversmooth`, `oversmooth.a`."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


@lru_cache(maxsize=None)
def _parsed(module: str) -> tuple[frozenset[str], str]:
    """A library module's imports and code fingerprint, from one parse (Snakemake computes every rule's digest at
    each start, so each module is read once)."""
    tree = ast.parse(module_file(module).read_text())
    return frozenset(imported_modules(tree)), code_fingerprint(tree)


def code_fingerprint(source: str | ast.AST) -> str:
    """The code of a module without its docstrings, comments, layout and `__version__` (its AST, dumped): a release
    that changes no code reruns nothing."""
    tree = ast.parse(source) if isinstance(source, str) else source
    tree.body = [node for node in tree.body if not _sets_version(node)]
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=False)


def _sets_version(node: ast.stmt) -> bool:
    return isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets)


def fingerprint_digest(fingerprint: str) -> str:
    """A short digest of a code fingerprint (`code_fingerprint`)."""
    return hashlib.sha256(fingerprint.encode()).hexdigest()[:12]


def module_digest(module: str) -> str:
    """A short digest of one library module's code."""
    return fingerprint_digest(_parsed(module)[1])


SCRIPT_PARAM = "code_script"


def library_params(script: str | os.PathLike, root: str | os.PathLike | None = None) -> dict[str, str]:
    """The params that tie a rule to the code `script` runs: `code_script` -> `<script> <digest>` (the script's path
    relative to `root`, the repository, where given) for the script itself, and `code_<module>` ->
    `oversmooth.<module> <digest>` for every module of its closure (`code_oversmooth` for the package's `__init__`,
    `code_analysis` for a sub-package's; its module `oversmooth.analysis.tbat` as `code_analysis_tbat`)."""
    source, shown = Path(script).read_text(), Path(script)
    shown = shown.relative_to(root) if root is not None else shown
    own = {SCRIPT_PARAM: f"{shown.as_posix()} {fingerprint_digest(code_fingerprint(source))}"}
    return own | {"code_" + ("_".join(module.split(".")[1:]) or PACKAGE): f"{module} {module_digest(module)}"
                  for module in module_closure(source)}
