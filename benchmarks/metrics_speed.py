"""Metric speed: seconds per position of our vectorised metrics against the per-position definitions.

Both run in one process on the same distributions (random Dirichlet pairs, or the first positions of
two real logits files); ours runs over row groups of 4096 positions, as the pipeline reads them:
    python benchmarks/metrics_speed.py [--positions 20000 --reference-positions 300 --tau 0.9]
    python benchmarks/metrics_speed.py --logits results/logits/bn-4.parquet results/logits/gt-nanogpt.parquet
Prints, per metric, seconds per position of each and the ratio reference / ours (thesis Table I.1
measured 1e-5 to 2e-4 s per position per metric).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import torch

from oversmooth import reference
from oversmooth.decoding import nucleus_mask
from oversmooth.logits import ROW_GROUP_ROWS, iter_aligned_logits
from oversmooth.metrics import (
    entropy,
    kl_divergence,
    nucleus_set_mass_difference,
    tail_token_overassignment,
    total_variation,
)


def vectorised(tau: float) -> dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]:
    """Each metric from log-probabilities, as the pipeline computes it (exp and nucleus included)."""

    def with_nucleus(metric):
        def run(logp_bn, logp_gt):
            p_bn, p_gt = logp_bn.exp(), logp_gt.exp()
            return metric(p_bn, p_gt, nucleus_mask(p_gt, tau))

        return run

    return {
        "TTO": with_nucleus(tail_token_overassignment),
        "NSMD": with_nucleus(nucleus_set_mass_difference),
        "TV": lambda a, b: total_variation(a.exp(), b.exp()),
        "KL": lambda a, b: kl_divergence(b, a),
        "entropy diff": lambda a, b: entropy(a) - entropy(b),
    }


def per_position(tau: float) -> dict[str, Callable[[list, list], float]]:
    return {
        "TTO": lambda p, q: reference.tto(p, q, tau),
        "NSMD": lambda p, q: reference.nsmd(p, q, tau),
        "TV": reference.tv,
        "KL": reference.kl,
        "entropy diff": reference.entropy_diff,
    }


def load_pairs(args) -> tuple[np.ndarray, np.ndarray]:
    if args.logits:
        bn, gt = [], []
        for a, b in iter_aligned_logits(*args.logits):
            bn.append(a.logprobs), gt.append(b.logprobs)
            if sum(len(x) for x in bn) >= args.positions:
                break
        return np.concatenate(bn)[: args.positions].astype(np.float64), np.concatenate(gt)[: args.positions].astype(np.float64)
    rng = np.random.default_rng(0)
    return np.log(rng.dirichlet(np.full(256, 0.5), args.positions)), np.log(rng.dirichlet(np.full(256, 0.1), args.positions))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=20000)
    parser.add_argument("--reference-positions", type=int, default=300)
    parser.add_argument("--tau", type=float, default=0.9)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--logits", nargs=2, metavar=("MODEL", "GROUND_TRUTH"))
    args = parser.parse_args()

    logp_bn, logp_gt = load_pairs(args)
    t_bn, t_gt = torch.from_numpy(logp_bn), torch.from_numpy(logp_gt)
    m = min(args.reference_positions, len(logp_bn))
    p_bn, p_gt = np.exp(logp_bn[:m]).tolist(), np.exp(logp_gt[:m]).tolist()
    ours, ref = vectorised(args.tau), per_position(args.tau)
    print(f"{len(logp_bn)} positions (reference: {m}), threads {torch.get_num_threads()}")
    print(f"{'metric':<14}{'ours s/pos':>14}{'reference s/pos':>18}{'ratio':>10}")
    for name in ours:
        fast_fn, slow_fn = ours[name], ref[name]
        chunks = [(t_bn[i : i + ROW_GROUP_ROWS], t_gt[i : i + ROW_GROUP_ROWS]) for i in range(0, len(t_bn), ROW_GROUP_ROWS)]
        fast = min(_time(lambda: [fast_fn(a, b) for a, b in chunks]) for _ in range(args.rounds)) / len(logp_bn)
        slow = min(_time(lambda: [slow_fn(a, b) for a, b in zip(p_bn, p_gt)]) for _ in range(args.rounds)) / m
        print(f"{name:<14}{fast:>14.2e}{slow:>18.2e}{slow / fast:>10.0f}")


def _time(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
