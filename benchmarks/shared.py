"""What the benchmarks share: a module or sub-package of the package as it was at a git revision, loaded beside
today's (their baselines; the BAT solver at a revision before or after it became a sub-package), a token-track head
by its path, and a config's sections without the schema (a GPU machine may lack jsonschema)."""

from __future__ import annotations

import atexit
import importlib
import re
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path


def git(*args: str) -> subprocess.CompletedProcess:
    """git in the repository's root (paths as from there)."""
    return subprocess.run(["git", *args], capture_output=True, text=True, check=False,
                          cwd=Path(__file__).resolve().parents[1])


def source_at(revision: str, path: str) -> str:
    """The text of `path` (relative to the repository's root) at `revision`."""
    shown = git("show", f"{revision}:{path}")
    if shown.returncode:
        raise FileNotFoundError(f"{path} at {revision}: {shown.stderr.strip()}")
    return shown.stdout


def module_at(revision: str, path: str) -> types.ModuleType:
    """`path` (e.g. src/oversmooth/analysis/tbat.py) at `revision` (a tag such as v0.2.0, or a commit), executed as
    a module named after both; its imports of the package get today's versions."""
    source = source_at(revision, path)
    name = f"{Path(path).stem}_{revision}".replace(".", "_")
    module = sys.modules[name] = types.ModuleType(name)  # its dataclasses look it up
    exec(compile(source, f"{revision}:{path}", "exec"), module.__dict__)
    return module


def package_at(revision: str, path: str) -> str:
    """The sub-package at `path` (e.g. src/oversmooth/analysis/bat) as it was at `revision`, importable beside
    today's: its files written to a temporary folder (on sys.path, removed at exit) as a top-level package named
    after both (bat_<revision>), its imports of itself (`oversmooth.analysis.bat...`) renamed to that; its imports of
    the rest of the package get today's versions. Returns the package's name."""
    name = f"{Path(path).name}_{revision}".replace(".", "_").replace("-", "_")
    if name in sys.modules:
        return name
    dotted = ".".join(Path(path).relative_to("src").parts)
    folder = Path(tempfile.mkdtemp(prefix="package_at_"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    for file in git("ls-tree", "-r", "--name-only", revision, f"{path}/").stdout.split():
        target = folder / name / Path(file).relative_to(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(re.sub(rf"\b{re.escape(dotted)}\b", name, source_at(revision, file)))
    sys.path.insert(0, str(folder))
    importlib.invalidate_caches()
    return name


def bat_solver_at(revision: str) -> type:
    """The BATSolver class at `revision`: from the sub-package src/oversmooth/analysis/bat (`package_at`) where the
    revision has it, else from the single module src/oversmooth/analysis/tbat.py it was split from (`module_at`)."""
    if git("cat-file", "-e", f"{revision}:src/oversmooth/analysis/bat/solver.py").returncode == 0:
        return importlib.import_module(package_at(revision, "src/oversmooth/analysis/bat") + ".solver").BATSolver
    return module_at(revision, "src/oversmooth/analysis/tbat.py").BATSolver


def config_sections(*paths: str | Path) -> dict:
    """config/config.yaml with `paths` over it, merged key by key as `--configfile` does, not validated."""
    import yaml

    from oversmooth.core.catalog import deep_update

    config: dict = {}
    for path in (Path(__file__).resolve().parents[1] / "config" / "config.yaml", *paths):
        deep_update(config, yaml.safe_load(Path(path).read_text()) or {})
    return config


def sotu_passage(index: int, n_bytes: int) -> bytes:
    """`n_bytes` from the middle of a paragraph of the `index`-th State of the Union address (the demo's corpus), in
    file-name order."""
    from oversmooth.data.corpus import package_corpus_dir

    return sorted(package_corpus_dir("sotu").rglob("*.txt"))[index].read_bytes()[5000 : 5000 + n_bytes]


def token_head(path: str):
    """(head, W) of a token-track head (results/models/tok-*/head.pt), or of a source LM's own full head (its
    folder, e.g. results/data/smollm2): the head as `sampled_state_rows` takes it, W (V x k) in float64."""
    import torch

    from oversmooth.analysis.tokenheads import head_matrix, load_head, output_weight
    from oversmooth.models.causallm import load_causal_lm

    torch.set_num_threads(1)
    if path.endswith(".pt"):
        head = load_head(path)[0]
        return head, head_matrix(head)
    head = output_weight(load_causal_lm(path)[0])
    return head, head.double().numpy()
