"""The models of a config: bottlenecked family `bn-<k>` and ground truths `gt-<name>`, with their settings."""

from __future__ import annotations

from collections.abc import Mapping

from oversmooth.config import deep_update


def bottleneck_name(k: int) -> str:
    return f"bn-{k}"


def bottleneck_of(name: str) -> int:
    """k of a bottlenecked model `bn-<k>`."""
    if not name.startswith("bn-"):
        raise ValueError(f"{name!r} is not a bottlenecked model bn-<k>")
    return int(name.removeprefix("bn-"))


def ground_truth_name(gt: Mapping) -> str:
    return f"gt-{gt['name']}"


def bottleneck_models(config: Mapping) -> list[str]:
    return [bottleneck_name(k) for k in config["bottlenecks"]]


def extreme_bottlenecks(config: Mapping) -> list[str]:
    """The most and the least bottlenecked models (one model if the family has one member)."""
    ks = sorted(config["bottlenecks"])
    return [bottleneck_name(k) for k in dict.fromkeys((ks[0], ks[-1]))]


def ground_truth_models(config: Mapping) -> list[str]:
    return [ground_truth_name(gt) for gt in config["ground_truths"]]


def trained_models(config: Mapping) -> list[str]:
    """Models the pipeline trains: the family and the `nanogpt` ground truths."""
    return bottleneck_models(config) + [ground_truth_name(gt) for gt in config["ground_truths"] if gt["kind"] == "nanogpt"]


def all_models(config: Mapping) -> list[str]:
    return bottleneck_models(config) + ground_truth_models(config)


def ground_truth(config: Mapping, name: str) -> dict:
    for gt in config["ground_truths"]:
        if ground_truth_name(gt) == name:
            return dict(gt)
    raise KeyError(f"no ground truth {name!r} in config `ground_truths` (have {ground_truth_models(config)})")


def training_settings(config: Mapping, name: str) -> dict:
    """`{"model": ..., "train": ...}` for a trained model: the shared `model`/`train` sections, the
    ground truth's own sections, then `model_overrides[name]`; the seed comes from `seed`."""
    settings = {"model": dict(config["model"]), "train": dict(config["train"])}
    settings["train"]["seed"] = config["seed"]
    if name.startswith("bn-"):
        k = bottleneck_of(name)
        if k not in config["bottlenecks"]:
            raise KeyError(f"{name}: {k} is not in config `bottlenecks` {config['bottlenecks']}")
        settings["model"]["bottleneck"] = k
    else:
        gt = ground_truth(config, name)
        if gt["kind"] != "nanogpt":
            raise KeyError(f"{name} is a {gt['kind']} ground truth: it is loaded, not trained")
        deep_update(settings, {"model": gt.get("model", {}), "train": gt.get("train", {})})
        settings["model"]["bottleneck"] = None
    return deep_update(settings, config["model_overrides"].get(name, {}))
