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

Everything is vectorised over positions in float64 (NumPy, so that the metrics jobs run without torch); no loop
per position.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from oversmooth.analysis.decodedrows import DecodedRows, position_keys
from oversmooth.analysis.decoding import Decoding, entropy, nucleus_mask
from oversmooth.core.io import atomic_path
from oversmooth.core.logs import get_logger
from oversmooth.extraction.logit_tables import iter_aligned_logits

log = get_logger("metrics")

METRICS = ("tto", "nsmd", "tv", "kl", "kl_eps", "entropy_diff")
POSITION_SCHEMA = pa.schema(
    [
        ("prompt_id", pa.int32()),
        ("position", pa.int32()),
        ("target", pa.int32()),  # a byte, or a token of the token track
        ("method", pa.string()),
        ("nucleus_size", pa.int32()),
        ("bn_argmax", pa.int32()),
        *((name, pa.float64()) for name in METRICS),
    ]
)


def kl_divergence(logp: np.ndarray, logq: np.ndarray, p: np.ndarray | None = None) -> np.ndarray:
    """KL(p || q) in nats along the last axis; +inf where q = 0 < p (`p`: exp(logp), if at hand)."""
    p = np.exp(logp) if p is None else p
    with np.errstate(invalid="ignore"):  # -inf - -inf where p = q = 0, left out by the mask
        terms = np.where(logp > -np.inf, p * (logp - logq), 0.0)
    return terms.sum(-1)


def mix_uniform(logp: np.ndarray, eps: float) -> np.ndarray:
    """log((1 - eps) p + eps / V): the distribution mixed with the uniform one at weight eps."""
    if not 0 < eps < 1:
        raise ValueError(f"metrics.kl_epsilon must be in (0, 1), got {eps}")
    return np.logaddexp(logp + math.log1p(-eps), math.log(eps / logp.shape[-1]))


def tail_token_overassignment(p_bn: np.ndarray, p_gt: np.ndarray, nucleus: np.ndarray) -> np.ndarray:
    """TTO (eq. 4.1): mass the model puts above the ground truth on bytes outside the nucleus."""
    return np.where(nucleus, 0.0, np.maximum(p_bn - p_gt, 0.0)).sum(-1)


def nucleus_set_mass_difference(p_bn: np.ndarray, p_gt: np.ndarray, nucleus: np.ndarray) -> np.ndarray:
    """NSMD (eq. 4.2): ground-truth nucleus mass minus the model's mass on the nucleus."""
    return np.where(nucleus, p_gt - p_bn, 0.0).sum(-1)


def total_variation(p_bn: np.ndarray, p_gt: np.ndarray) -> np.ndarray:
    """TV (eq. 4.3)."""
    return 0.5 * np.abs(p_bn - p_gt).sum(-1)


@dataclass(frozen=True)
class Reference:
    """What the metrics need of the ground truth's distributions, computed once for every decoding of the model."""

    logp: np.ndarray
    p: np.ndarray
    nucleus: np.ndarray
    entropy: np.ndarray

    def rows(self, index: np.ndarray) -> Reference:
        """The terms at some rows (positions) only."""
        return Reference(self.logp[index], self.p[index], self.nucleus[index], self.entropy[index])


def reference_terms(logp_gt: np.ndarray, tau: float, nucleus: np.ndarray | None = None) -> Reference:
    p_gt = np.exp(logp_gt)
    nucleus = nucleus_mask(p_gt, tau) if nucleus is None else nucleus
    return Reference(logp_gt, p_gt, nucleus, entropy(logp_gt, p_gt))


def oversmoothing_against(logp_bn: np.ndarray, reference: Reference, kl_epsilon: float = 1e-6) -> dict[str, np.ndarray]:
    """TTO, NSMD, TV, KL, KL_eps and the entropy difference for every row of (n, V) log-probabilities."""
    p_bn, p_gt, nucleus = np.exp(logp_bn), reference.p, reference.nucleus
    return {
        "tto": tail_token_overassignment(p_bn, p_gt, nucleus),
        "nsmd": nucleus_set_mass_difference(p_bn, p_gt, nucleus),
        "tv": total_variation(p_bn, p_gt),
        "kl": kl_divergence(reference.logp, logp_bn, p_gt),
        "kl_eps": kl_divergence(reference.logp, mix_uniform(logp_bn, kl_epsilon), p_gt),
        "entropy_diff": entropy(logp_bn, p_bn) - reference.entropy,
        "nucleus_size": nucleus.sum(-1),
    }


def oversmoothing(
    logp_bn: np.ndarray, logp_gt: np.ndarray, tau: float, kl_epsilon: float = 1e-6, nucleus: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """`oversmoothing_against` the ground truth `logp_gt` (its nucleus mask at tau may be passed in)."""
    return oversmoothing_against(logp_bn, reference_terms(logp_gt, tau, nucleus), kl_epsilon)


@dataclass(frozen=True)
class PositionChunk:
    """Consecutive positions with the model's and the reference's (ground truth's) log-probabilities (n, V)."""

    prompt_id: np.ndarray
    position: np.ndarray
    target: np.ndarray
    logp_model: np.ndarray  # float64
    logp_reference: np.ndarray  # float64


def logits_file_chunks(model_logits: str | os.PathLike, gt_logits: str | os.PathLike) -> Iterable[PositionChunk]:
    """Two logits files' aligned row groups as chunks (float64)."""
    for bn, gt in iter_aligned_logits(model_logits, gt_logits):
        yield PositionChunk(bn.prompt_id, bn.position, bn.target, bn.logprobs.astype(np.float64),
                            gt.logprobs.astype(np.float64))


def position_metrics(
    model_logits: str | os.PathLike,
    gt_logits: str | os.PathLike,
    out_path: str | os.PathLike,
    decodings: Sequence[Decoding],
    tau: float,
    kl_epsilon: float,
) -> int:
    """Per-position metrics of one model against one ground truth (two logits files), for each decoding, to Parquet."""
    return write_position_metrics(logits_file_chunks(model_logits, gt_logits), out_path, decodings, tau, kl_epsilon)


def write_position_metrics(
    chunks: Iterable[PositionChunk], out_path: str | os.PathLike, decodings: Sequence[Decoding], tau: float,
    kl_epsilon: float, decoded: DecodedRows | None = None,
) -> int:
    """Per-position metrics of the model against the reference in every chunk, for each decoding, to Parquet; and
    of each method of `decoded` (rows decoded at a sample of positions: BA-epsilon, BA-eta) at its positions alone,
    aligned to the chunks by (prompt_id, position): a decoded row at a position no chunk has is an error."""
    if not 0 < tau <= 1:
        raise ValueError(f"metrics.tau must be in (0, 1], got {tau}")
    started, rows = time.perf_counter(), 0
    seen = None if decoded is None else np.zeros(len(decoded.position), dtype=bool)
    with atomic_path(out_path) as tmp:
        writer = pq.ParquetWriter(tmp, POSITION_SCHEMA)
        for chunk in chunks:
            reference = reference_terms(chunk.logp_reference, tau)  # the same for every decoding
            for decoding in decodings:
                writer.write_table(metrics_table(chunk, slice(None), decoding.method, decoding(chunk.logp_model),
                                                 reference, kl_epsilon))
            if decoded is not None:
                seen |= np.isin(decoded.keys, position_keys(chunk.prompt_id, chunk.position))
                for method, index, logprobs in decoded.within(chunk.prompt_id, chunk.position):
                    writer.write_table(metrics_table(chunk, index, method, logprobs, reference.rows(index), kl_epsilon))
            rows += len(chunk.target)
            log.info("%d positions x %d decodings, %.1f s", rows, len(decodings), time.perf_counter() - started)
        writer.close()
        if decoded is not None:
            decoded.check_all_found(seen)  # before the file is in place
    log.info("%d positions x %d decodings in %.1f s%s", rows, len(decodings), time.perf_counter() - started,
             "" if decoded is None else f"; {len(decoded.position)} decoded rows ({decoded.path})")
    return rows


def metrics_table(chunk: PositionChunk, index: np.ndarray | slice, method: str, transformed: np.ndarray,
                  reference: Reference, kl_epsilon: float) -> pa.Table:
    """The metrics of one decoding's `transformed` log-probabilities at the chunk's rows `index`, against the
    reference's terms at those rows, as POSITION_SCHEMA rows."""
    values = oversmoothing_against(transformed, reference, kl_epsilon)
    target = chunk.target[index]
    return pa.Table.from_pydict({
        "prompt_id": chunk.prompt_id[index],
        "position": chunk.position[index],
        "target": target,
        "method": np.full(len(target), method),
        "nucleus_size": values.pop("nucleus_size"),
        "bn_argmax": transformed.argmax(-1),
        **{name: values[name] for name in METRICS},
    }, schema=POSITION_SCHEMA)
