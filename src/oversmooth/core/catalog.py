"""The models of a config: bottlenecked family `bn-<k>` with its Mixture-of-Softmaxes members `mos-<k>`,
SVD-imposed heads `svd-r<r>` (thesis §7.1), ground truths `gt-<name>`, checkpoints `bn-<k>@<iteration>` (the
weights of `bn-<k>` after that many training iterations) and seed runs `bn-<k>-s<seed>` (`bn-<k>` trained again
under each `train.seeds` entry; `bn-<k>` itself is the run under the master `seed`), with their settings; and the
token track's rank-k heads `tok-<kind>-r<k>` on a frozen pretrained LM, measured against its full head `tok-full`. Also the merge of settings that configs and model overrides share
(`deep_update`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from oversmooth.core.names import KINDS


def bottleneck_name(k: int) -> str:
    return f"bn-{k}"


def bottleneck_of(name: str) -> int:
    """The constraint of a model's head: k of a bottlenecked model `bn-<k>` (or a seed run or checkpoint of it) or
    a Mixture-of-Softmaxes `mos-<k>`, r of an SVD-imposed `svd-r<r>`."""
    name = seed_parts(checkpoint_parts(name)[0])[0]
    if is_token_model(name):
        return token_head_parts(name)[1]
    for prefix in ("bn-", "mos-", "svd-r"):
        if name.startswith(prefix) and name.removeprefix(prefix).isdigit():
            return int(name.removeprefix(prefix))
    raise ValueError(f"{name!r} is not a constrained model bn-<k>, mos-<k> or svd-r<r>")


def checkpoint_name(model: str, iteration: int) -> str:
    return f"{model}@{iteration}"


def checkpoint_parts(name: str) -> tuple[str, int | None]:
    """(trained model, iteration) of a checkpoint `<model>@<iteration>`; (name, None) for any other model."""
    model, at, iteration = name.partition("@")
    if not at:
        return name, None
    if not iteration.isdigit():
        raise ValueError(f"{name!r} is not a checkpoint <model>@<iteration>")
    return model, int(iteration)


def seed_run_name(model: str, seed: int) -> str:
    return f"{model}-s{seed}"


def seed_parts(name: str) -> tuple[str, int | None]:
    """(model, seed) of a seed run `<model>-s<seed>`; (name, None) for any other model."""
    model, dash_s, seed = name.rpartition("-s")
    if dash_s and seed.isdigit() and model.startswith("bn-"):
        return model, int(seed)
    return name, None


def without_seed_runs(models: list[str]) -> list[str]:
    """`models` less the seed runs `bn-<k>-s<seed>` (a figure with a panel per model shows the master seed's)."""
    return [m for m in models if seed_parts(m)[1] is None]


def checkpoint_models(config: Mapping, model: str | None = None) -> list[str]:
    """The checkpoints of the bottlenecked family under the master seed (or of one `model`): one per
    `checkpoints.iterations` entry."""
    models = main_bottleneck_models(config) if model is None else [model]
    return [checkpoint_name(m, it) for m in models for it in config["checkpoints"]["iterations"]]


def mos_name(k: int) -> str:
    return f"mos-{k}"


def mos_models(config: Mapping) -> list[str]:
    """Mixture-of-Softmaxes members of the family (Yang et al. 2017), one per `mos.bottlenecks` entry."""
    return [mos_name(k) for k in config["mos"]["bottlenecks"]]


def family_models(config: Mapping) -> list[str]:
    """The rows of the oversmoothing and quality tables: the bottlenecked family, then its MoS members."""
    return bottleneck_models(config) + mos_models(config)


def svd_name(rank: int) -> str:
    return f"svd-r{rank}"


def svd_models(config: Mapping) -> list[str]:
    return [svd_name(r) for r in config["svd"]["ranks"]]


TOKEN_REFERENCE = "tok-full"  # the token track's source model with its own full head
TOKEN_HUMAN = "tok-human"  # the human continuations of the token track's prompts (its quality tables' Human row)
TOKEN_HEAD_KINDS = ("svd", "learned")


def is_token_model(name: str) -> bool:
    """A model (or the human continuations `tok-human`) of the token track."""
    return name.startswith("tok-")


def token_head_name(kind: str, k: int) -> str:
    return f"tok-{kind}-r{k}"


def token_head_parts(name: str) -> tuple[str, int]:
    """(kind, k) of a token-track head `tok-<kind>-r<k>`."""
    kind, _, rank = name.removeprefix("tok-").partition("-r")
    if not is_token_model(name) or kind not in TOKEN_HEAD_KINDS or not rank.isdigit():
        raise ValueError(f"{name!r} is not a token-track head tok-<kind>-r<k> with kind in {TOKEN_HEAD_KINDS}")
    return kind, int(rank)


def token_rank(name: str) -> int | None:
    """k of a token-track model: a head's rank, None for the full head `tok-full`."""
    return None if name == TOKEN_REFERENCE else token_head_parts(name)[1]


def token_head_models(config: Mapping) -> list[str]:
    """The token track's rank-k heads, by k, each kind of `tokens.heads` at each `tokens.ranks` entry."""
    tokens = config["tokens"]
    return [token_head_name(kind, k) for k in sorted(tokens["ranks"]) for kind in tokens["heads"]]


def token_sampled_models(config: Mapping) -> list[str]:
    """The token track's sampled models (the rows of its quality tables): its heads by k, then the full head."""
    heads = token_head_models(config)
    return [*heads, TOKEN_REFERENCE] if heads else []


def token_methods(config: Mapping) -> list[str]:
    """Decoding methods the token track samples with: `tokens.sampling.methods`, else every one of
    `decoding.methods`, `decoding.bat_methods` (every head is one softmax of a matrix) and `decoding.sampler_methods`."""
    decoding = config["decoding"]
    return config["tokens"]["sampling"]["methods"] or [
        *decoding["methods"], *decoding.get("bat_methods", []), *decoding.get("sampler_methods", [])]


def token_measured_methods(config: Mapping) -> list[str]:
    """Decoding methods after which the token track's heads are measured (metrics, TBAT): `tokens.methods`, else
    every one of `decoding.methods`."""
    return list(config["tokens"].get("methods") or config["decoding"]["methods"])


def byte_sampling_methods(config: Mapping, model: str) -> list[str]:
    """Decoding methods a byte model samples with (its BA methods are its metrics' and TBAT's too: `byte_bat_methods`):
    `svd.decoding` for an
    SVD-imposed head, else `decoding.methods`, and `decoding.bat_methods` where its head is one softmax of a matrix
    W read from its checkpoint: a bottlenecked run or a `nanogpt` ground truth, not a mixture of softmaxes, a ground
    truth loaded from a folder, or a teacher's truth, whose distribution is decoded; and `decoding.sampler_methods`
    (mirostat, any distribution; sampled, never measured). Not BA for a checkpoint along training
    (`bn-<k>@<iteration>`): an early checkpoint's flat distribution leaves every byte below the threshold to the
    solver (the smoke's bn-64@0: 24 positions in 31 s, against 4 s for a trained bottleneck), and no table shows a
    checkpoint's BA (the loss-matched analysis needs a method at several points of a run)."""
    if model.startswith("svd-r"):
        return list(config["svd"]["decoding"])
    methods = list(config["decoding"]["methods"])
    if has_one_head_matrix(config, model):
        methods += config["decoding"].get("bat_methods", [])
    return [*methods, *config["decoding"].get("sampler_methods", [])]


def has_one_head_matrix(config: Mapping, model: str) -> bool:
    """Whether `model` is a bottlenecked run or a `nanogpt` ground truth other than a teacher's truth (BAT sampling's
    models: one softmax of W h, W in its checkpoint)."""
    if re.fullmatch(KINDS["bottleneck"], model):
        return True
    truth = any(s["kind"] == "teacher" and f"gt-{s['teacher']}" == model for s in config["data"]["sources"])
    return model.startswith("gt-") and ground_truth(config, model)["kind"] == "nanogpt" and not truth


def byte_bat_methods(config: Mapping, model: str) -> list[str]:
    """The BAT sampling methods (`decoding.bat_methods`) of a byte model: those `byte_sampling_methods` gives it, for
    its samples, its metrics (rule bat_decode's rows) and its TBAT alike; none for the token track's heads, whose
    metrics would need a reject set over 49,152 tokens a position."""
    if is_token_model(model):
        return []
    bat = set(config["decoding"].get("bat_methods", []))
    return [m for m in byte_sampling_methods(config, model) if m in bat]


def svd_source(config: Mapping) -> str:
    """The model whose head the SVD models truncate: `svd.source`, else the widest bottleneck."""
    return config["svd"]["source"] or bottleneck_name(max(config["bottlenecks"]))


def head_width(config: Mapping, name: str) -> int:
    """Columns of a trained model's output matrix W (vocab x width): k, or n_embd for a plain head."""
    model = training_settings(config, name)["model"]
    return model["bottleneck"] or model["n_embd"]


def ground_truth_name(gt: Mapping) -> str:
    return f"gt-{gt['name']}"


def main_bottleneck_models(config: Mapping) -> list[str]:
    """The bottlenecked family trained under the master `seed`: one model per k."""
    return [bottleneck_name(k) for k in config["bottlenecks"]]


def bottleneck_models(config: Mapping) -> list[str]:
    """Every run of the bottlenecked family: per k, `bn-<k>` and its seed runs `bn-<k>-s<seed>`."""
    seeds = config["train"].get("seeds", [])
    return [run for k in config["bottlenecks"]
            for run in [bottleneck_name(k), *(seed_run_name(bottleneck_name(k), s) for s in seeds)]]


def extreme_bottlenecks(config: Mapping) -> list[str]:
    """The most and the least bottlenecked models (one model if the family has one member)."""
    ks = sorted(config["bottlenecks"])
    return [bottleneck_name(k) for k in dict.fromkeys((ks[0], ks[-1]))]


def ground_truth_models(config: Mapping) -> list[str]:
    return [ground_truth_name(gt) for gt in config["ground_truths"]]


def trained_models(config: Mapping) -> list[str]:
    """Models the pipeline trains: the family (with its MoS members) and the `nanogpt` ground truths."""
    return family_models(config) + [ground_truth_name(gt) for gt in config["ground_truths"] if gt["kind"] == "nanogpt"]


def linear_head_models(config: Mapping) -> list[str]:
    """Trained models whose logits are W times one head input (no MoS): what Table 7.3 can decompose."""
    return [m for m in trained_models(config) if not m.startswith("mos-")]


def all_models(config: Mapping) -> list[str]:
    return family_models(config) + ground_truth_models(config)


def sampled_models(config: Mapping) -> list[str]:
    """Models the pipeline samples from (the quality tables' rows): the family, and the ground truths with `sample`
    on (a judge such as SmolLM2, which also scores perplexity, is left out)."""
    return family_models(config) + [ground_truth_name(gt) for gt in config["ground_truths"] if gt.get("sample", True)]


def ground_truth(config: Mapping, name: str) -> dict:
    for gt in config["ground_truths"]:
        if ground_truth_name(gt) == name:
            return dict(gt)
    raise KeyError(f"no ground truth {name!r} in config `ground_truths` (have {ground_truth_models(config)})")


def segment_ends(train: Mapping) -> list[int]:
    """The iterations at which the jobs of a training split by `train.iters_per_job` hand their state on (each job's
    end but the last's, which writes the model); empty for a training in one job."""
    per_job, max_iters = train.get("iters_per_job"), train["max_iters"]
    return list(range(per_job, max_iters, per_job)) if per_job else []


def training_settings(config: Mapping, name: str) -> dict:
    """`{"model": ..., "train": ...}` for a trained model (a checkpoint: its model's): the shared `model`/`train`
    sections, the ground truth's own sections, then `model_overrides[name]` (a seed run: its model's, then its
    own); the seed comes from `seed`, a seed run's from its name (which must be in `train.seeds`)."""
    run = checkpoint_parts(name)[0]
    name, seed = seed_parts(run)
    settings = {"model": dict(config["model"]), "train": dict(config["train"])}
    seeds = settings["train"].pop("seeds", [])  # which other runs exist is no setting of this run
    settings["train"]["seed"] = config["seed"] if seed is None else seed
    if seed is not None and seed not in seeds:
        raise KeyError(f"{run}: seed {seed} is not in config `train.seeds` {seeds}")
    if name.startswith("bn-"):
        k = bottleneck_of(name)
        if k not in config["bottlenecks"]:
            raise KeyError(f"{name}: {k} is not in config `bottlenecks` {config['bottlenecks']}")
        settings["model"]["bottleneck"] = k
    elif name.startswith("mos-"):
        k = bottleneck_of(name)
        if k not in config["mos"]["bottlenecks"]:
            raise KeyError(f"{name}: {k} is not in config `mos.bottlenecks` {config['mos']['bottlenecks']}")
        settings["model"].update(bottleneck=k, mos_components=config["mos"]["components"])
    else:
        gt = ground_truth(config, name)
        if gt["kind"] != "nanogpt":
            raise KeyError(f"{name} is a {gt['kind']} ground truth: it is loaded, not trained")
        deep_update(settings, {"model": gt.get("model", {}), "train": gt.get("train", {})})
        settings["model"]["bottleneck"] = None
    deep_update(settings, config["model_overrides"].get(name, {}))
    return deep_update(settings, config["model_overrides"].get(run, {})) if run != name else settings


def plain_copy(value: Any) -> Any:
    """Deep copy of plain YAML data, so defaults are never shared between configs."""
    if isinstance(value, dict):
        return {k: plain_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_copy(v) for v in value]
    return value


def deep_update(base: dict, override: Mapping) -> dict:
    """Recursively merge `override` into `base` (dicts merge, everything else replaces)."""
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            deep_update(base[key], value)
        else:
            base[key] = plain_copy(value)
    return base
