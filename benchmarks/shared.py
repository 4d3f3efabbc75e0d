"""What the benchmarks share: a module of the package as it was at a git revision, loaded beside today's (their
baselines), a token-track head by its path, and a config's sections without the schema (a GPU machine may lack
jsonschema)."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path


def module_at(revision: str, path: str) -> types.ModuleType:
    """`path` (e.g. src/oversmooth/analysis/tbat.py) at `revision` (a tag such as v0.2.0, or a commit), executed as
    a module named after both; its imports of the package get today's versions."""
    source = subprocess.run(["git", "show", f"{revision}:{path}"], capture_output=True, text=True, check=True,
                            cwd=Path(__file__).parent).stdout
    name = f"{Path(path).stem}_{revision}".replace(".", "_")
    module = sys.modules[name] = types.ModuleType(name)  # its dataclasses look it up
    exec(compile(source, f"{revision}:{path}", "exec"), module.__dict__)
    return module


def config_sections(*paths: str | Path) -> dict:
    """config/config.yaml with `paths` over it, merged key by key as `--configfile` does, not validated."""
    import yaml

    from oversmooth.core.catalog import deep_update

    config: dict = {}
    for path in (Path(__file__).resolve().parents[1] / "config" / "config.yaml", *paths):
        deep_update(config, yaml.safe_load(Path(path).read_text()) or {})
    return config


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
