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

import numpy as np

from oversmooth.analysis.timing import per_position, seconds, time_vectorised, vectorised
from oversmooth.extraction.logit_tables import iter_aligned_logits


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
    m = min(args.reference_positions, len(logp_bn))
    p_bn, p_gt = np.exp(logp_bn[:m]).tolist(), np.exp(logp_gt[:m]).tolist()
    ours, ref = vectorised(args.tau), per_position(args.tau)
    print(f"{len(logp_bn)} positions (reference: {m}), NumPy float64")
    print(f"{'metric':<14}{'ours s/pos':>14}{'reference s/pos':>18}{'ratio':>10}")
    for name in ours:
        slow_fn = ref[name]
        fast = time_vectorised(ours[name], logp_bn, logp_gt, args.rounds).min()
        slow = min(seconds(lambda fn=slow_fn: [fn(a, b) for a, b in zip(p_bn, p_gt)]) for _ in range(args.rounds)) / m
        print(f"{name:<14}{fast:>14.2e}{slow:>18.2e}{slow / fast:>10.0f}")


if __name__ == "__main__":
    main()
