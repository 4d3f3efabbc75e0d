"""Oversmoothing metrics of a model against a ground truth, per position (thesis §4.1, appendix F).

With p_gt the ground truth's next-byte distribution, p_bn the model's (after a decoding transform)
and N the ground truth's nucleus set at tau:
- TTO  = sum over bytes outside N of max(0, p_bn - p_gt)      (eq. 4.1)
- NSMD = sum over bytes in N of (p_gt - p_bn)                  (eq. 4.2; = sum outside N of p_bn - p_gt)
- TV   = 1/2 sum over all bytes of |p_gt - p_bn|               (eq. 4.3)
- KL   = sum over bytes with p_gt > 0 of p_gt log(p_gt / p_bn) (eq. 4.4; +inf where p_bn = 0 < p_gt)
- KL_eps = KL(p_gt || (1 - eps) p_bn + eps / 256)              (a named, explicit smoothing)
- entropy_diff = H(p_bn) - H(p_gt)                             (Table F.1; > 0: the model is flatter)

KL itself is never smoothed. Greedy, top-k and top-p give zero mass to bytes that a softmax ground
truth always gives some mass, so their KL is +inf at every position: such positions are counted
(`n_infinite`) and KL's mean, sd and CI are over the finite positions only. KL_eps, the KL to the
model mixed with the uniform distribution at weight `metrics.kl_epsilon`, is finite everywhere and
is reported beside it under its own name (the thesis's finite greedy KL came from an unstated
epsilon of this kind).

Everything is vectorised over positions in float64 (torch); no loop per position.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from oversmooth.decoding import Decoding, nucleus_mask
from oversmooth.io import atomic_path, read_parquet
from oversmooth.logits import iter_aligned_logits
from oversmooth.logs import get_logger

log = get_logger("metrics")

METRICS = ("tto", "nsmd", "tv", "kl", "kl_eps", "entropy_diff")
METRIC_LABELS = {"tto": "TTO", "nsmd": "NSMD", "tv": "TV", "kl": "KL", "kl_eps": "KL_eps", "entropy_diff": "Entropy difference"}
POSITION_SCHEMA = pa.schema(
    [
        ("prompt_id", pa.int32()),
        ("position", pa.int32()),
        ("target", pa.uint8()),
        ("method", pa.string()),
        ("nucleus_size", pa.int16()),
        ("bn_argmax", pa.uint8()),
        *((name, pa.float64()) for name in METRICS),
    ]
)
SUMMARY_COLUMNS = ["method", "metric", "mean", "sd", "ci_low", "ci_high", "n_positions", "n_prompts", "n_infinite"]


def entropy(logprobs: torch.Tensor) -> torch.Tensor:
    """Shannon entropy in nats along the last axis, with 0 log 0 = 0."""
    return -torch.where(logprobs > float("-inf"), logprobs.exp() * logprobs, 0.0).sum(-1)


def kl_divergence(logp: torch.Tensor, logq: torch.Tensor) -> torch.Tensor:
    """KL(p || q) in nats along the last axis; +inf where q = 0 < p."""
    terms = torch.where(logp > float("-inf"), logp.exp() * (logp - logq), 0.0)
    return terms.sum(-1)


def mix_uniform(logp: torch.Tensor, eps: float) -> torch.Tensor:
    """log((1 - eps) p + eps / V): the distribution mixed with the uniform one at weight eps."""
    if not 0 < eps < 1:
        raise ValueError(f"metrics.kl_epsilon must be in (0, 1), got {eps}")
    uniform = torch.full_like(logp, math.log(eps / logp.size(-1)))
    return torch.logaddexp(logp + math.log1p(-eps), uniform)


def tail_token_overassignment(p_bn: torch.Tensor, p_gt: torch.Tensor, nucleus: torch.Tensor) -> torch.Tensor:
    """TTO (eq. 4.1): mass the model puts above the ground truth on bytes outside the nucleus."""
    return torch.where(nucleus, 0.0, (p_bn - p_gt).clamp_min(0.0)).sum(-1)


def nucleus_set_mass_difference(p_bn: torch.Tensor, p_gt: torch.Tensor, nucleus: torch.Tensor) -> torch.Tensor:
    """NSMD (eq. 4.2): ground-truth nucleus mass minus the model's mass on the nucleus."""
    return torch.where(nucleus, p_gt - p_bn, 0.0).sum(-1)


def total_variation(p_bn: torch.Tensor, p_gt: torch.Tensor) -> torch.Tensor:
    """TV (eq. 4.3)."""
    return 0.5 * (p_bn - p_gt).abs().sum(-1)


def oversmoothing(
    logp_bn: torch.Tensor, logp_gt: torch.Tensor, tau: float, kl_epsilon: float = 1e-6, nucleus: torch.Tensor | None = None
) -> dict[str, torch.Tensor]:
    """TTO, NSMD, TV, KL, KL_eps and the entropy difference for every row of (n, V) log-probabilities.

    `nucleus`, the ground truth's nucleus mask at tau, may be passed in when it is reused."""
    p_bn, p_gt = logp_bn.exp(), logp_gt.exp()
    nucleus = nucleus_mask(p_gt, tau) if nucleus is None else nucleus
    return {
        "tto": tail_token_overassignment(p_bn, p_gt, nucleus),
        "nsmd": nucleus_set_mass_difference(p_bn, p_gt, nucleus),
        "tv": total_variation(p_bn, p_gt),
        "kl": kl_divergence(logp_gt, logp_bn),
        "kl_eps": kl_divergence(logp_gt, mix_uniform(logp_bn, kl_epsilon)),
        "entropy_diff": entropy(logp_bn) - entropy(logp_gt),
        "nucleus_size": nucleus.sum(-1),
    }


def position_metrics(
    model_logits: str | os.PathLike,
    gt_logits: str | os.PathLike,
    out_path: str | os.PathLike,
    decodings: Sequence[Decoding],
    tau: float,
    kl_epsilon: float,
) -> int:
    """Per-position metrics of one model against one ground truth, for each decoding, to Parquet."""
    if not 0 < tau <= 1:
        raise ValueError(f"metrics.tau must be in (0, 1], got {tau}")
    started, rows = time.perf_counter(), 0
    with atomic_path(out_path) as tmp:
        writer = pq.ParquetWriter(tmp, POSITION_SCHEMA)
        for bn, gt in iter_aligned_logits(model_logits, gt_logits):
            logp_bn = torch.from_numpy(bn.logprobs.astype(np.float64))
            logp_gt = torch.from_numpy(gt.logprobs.astype(np.float64))
            nucleus = nucleus_mask(logp_gt.exp(), tau)  # the same for every decoding
            for decoding in decodings:
                transformed = decoding(logp_bn)
                values = oversmoothing(transformed, logp_gt, tau, kl_epsilon, nucleus)
                columns = {
                    "prompt_id": bn.prompt_id,
                    "position": bn.position,
                    "target": bn.target,
                    "method": np.full(len(bn.target), decoding.method),
                    "nucleus_size": values.pop("nucleus_size").numpy().astype(np.int16),
                    "bn_argmax": transformed.argmax(-1).numpy().astype(np.uint8),
                    **{name: values[name].numpy() for name in METRICS},
                }
                writer.write_table(pa.Table.from_pydict(columns, schema=POSITION_SCHEMA))
            rows += len(bn.target)
        writer.close()
    log.info("%d positions x %d decodings in %.1f s", rows, len(decodings), time.perf_counter() - started)
    return rows


def summarise(
    frame: pd.DataFrame, *, n_boot: int, confidence: float, seed: int, metrics: Sequence[str] = METRICS
) -> pd.DataFrame:
    """Mean, sd and a cluster-bootstrap CI of every metric per decoding method.

    Positions of one window are not independent, so the bootstrap resamples prompts (with all their
    positions), `n_boot` times, seeded; the CI is the percentile interval. Non-finite values (infinite
    KL, NaN for a TBAT solver failure) are left out of mean, sd and CI and counted in `n_infinite`.
    """
    rows = []
    for method, group in frame.groupby("method", sort=False):
        prompt_codes, prompts = pd.factorize(group["prompt_id"])
        weights = bootstrap_weights(len(prompts), n_boot, seed)
        for metric in metrics:
            values = group[metric].to_numpy()
            rows.append({"method": method, "metric": metric, **describe(values, prompt_codes, weights, confidence)})
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def bootstrap_weights(n_clusters: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n_clusters) counts: how often each cluster is drawn in each bootstrap replicate."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=n_boot)


def describe(values: np.ndarray, clusters: np.ndarray, weights: np.ndarray, confidence: float) -> dict:
    """Mean, sample sd and the percentile CI of the mean over the finite values, resampling clusters."""
    finite = np.isfinite(values)
    n_clusters = weights.shape[1]
    sums = np.bincount(clusters[finite], weights=values[finite], minlength=n_clusters)
    counts = np.bincount(clusters[finite], minlength=n_clusters).astype(float)
    kept = values[finite]
    mean = kept.mean() if kept.size else (np.inf if np.isposinf(values).any() else np.nan)  # all infinite: so is the mean
    sd = kept.std(ddof=1) if kept.size > 1 else np.nan
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = (weights @ sums) / (weights @ counts)
    low, high = percentile_interval(boot[np.isfinite(boot)], confidence)
    return {
        "mean": mean, "sd": sd, "ci_low": low, "ci_high": high,
        "n_positions": int(finite.sum()), "n_prompts": int(n_clusters), "n_infinite": int((~finite).sum()),
    }


def percentile_interval(replicates: np.ndarray, confidence: float) -> tuple[float, float]:
    """The bootstrap percentile interval of a statistic's replicates; NaNs when there are none."""
    if not replicates.size:
        return np.nan, np.nan
    alpha = (1 - confidence) / 2
    low, high = np.quantile(replicates, [alpha, 1 - alpha])
    return float(low), float(high)


def summarise_file(
    path: str | os.PathLike, *, n_boot: int, confidence: float, seed: int, metrics: Sequence[str] = METRICS
) -> pd.DataFrame:
    frame = read_parquet(path, columns=["prompt_id", "method", *metrics]).to_pandas()
    return summarise(frame, n_boot=n_boot, confidence=confidence, seed=seed, metrics=metrics)
