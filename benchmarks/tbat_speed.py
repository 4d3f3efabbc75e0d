"""TBAT speed: our exact solver against the thesis's method (one scipy linprog per byte), side by side.

Random heads W (256 x k) and outputs p = softmax(W z), or real positions of a trained model:
    python benchmarks/tbat_speed.py [--ks 4 8 16 32 256 --positions 40 --reference-positions 4]
    python benchmarks/tbat_speed.py --checkpoint results/models/bn-8/best.pt --logits results/logits/bn-8.parquet
Prints, per k, seconds per position of each, the ratio, LP solves per position, and whether the reject
sets are identical (goal: >= 100x for every k <= 32, and no LP at full rank).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from oversmooth.reference import bat_reject_set
from oversmooth.tbat import BATSolver, TBATSettings, read_sampled_rows, sample_positions


def random_outputs(k: int, n: int, seed: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(256, k))
    logits = scale * rng.normal(size=(n, k)) @ W.T / np.sqrt(k)
    p = np.exp(logits - logits.max(1, keepdims=True))
    return W, p / p.sum(1, keepdims=True)


def real_outputs(checkpoint: str, logits: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    import pyarrow.parquet as pq

    from oversmooth.train import load_model

    W = load_model(checkpoint).output_matrix().detach().double().numpy()
    rows = sample_positions(pq.ParquetFile(logits).metadata.num_rows, n, seed)
    p = np.exp(read_sampled_rows(logits, rows)[2].astype(np.float64))
    return W, p / p.sum(1, keepdims=True)


def compare(W: np.ndarray, probs: np.ndarray, n_reference: int, settings: TBATSettings) -> dict:
    solver = BATSolver(W, settings)
    solver.reject_set(probs[0])  # warm-up: the first solve builds HiGHS's data
    results, start = [], time.perf_counter()
    for p in probs:
        results.append(solver.reject_set(p))
    fast = (time.perf_counter() - start) / len(probs)
    start, agree, reference_failures = time.perf_counter(), True, 0
    for p, result in zip(probs[:n_reference], results):
        rejected, failures = bat_reject_set(p, W, threshold=settings.threshold, zero_tol=settings.zero_tol)
        reference_failures += len(failures)
        ok = ~np.isin(np.arange(len(p)), failures)  # compare where the reference has an answer
        agree &= not result.failed and np.array_equal(rejected[ok], result.rejected[ok])
    reference = (time.perf_counter() - start) / n_reference
    return {
        "fast": fast, "reference": reference, "agree": agree, "reference_failures": reference_failures,
        "solves": np.mean([r.lp_solves for r in results]), "tbat": np.nanmean([r.tbat(p) for r, p in zip(results, probs)]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", type=int, nargs="+", default=[4, 8, 16, 32, 256])
    parser.add_argument("--positions", type=int, default=40)
    parser.add_argument("--reference-positions", type=int, default=4)
    parser.add_argument("--scale", type=float, default=6.0, help="logit scale of the random outputs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint")
    parser.add_argument("--logits")
    args = parser.parse_args()
    settings = TBATSettings()
    if args.checkpoint:
        cases = [("real", real_outputs(args.checkpoint, args.logits, args.positions, args.seed))]
    else:
        cases = [(f"k={k}", random_outputs(k, args.positions, args.seed + k, args.scale)) for k in args.ks]
    print(f"{'case':<8}{'ours s/pos':>12}{'thesis s/pos':>14}{'ratio':>8}{'LPs/pos':>9}{'mean TBAT':>11}  identical (thesis LP failures)")
    for name, (W, probs) in cases:
        row = compare(W, probs, min(args.reference_positions, len(probs)), settings)
        print(f"{name:<8}{row['fast']:>12.2e}{row['reference']:>14.3f}{row['reference'] / row['fast']:>8.0f}"
              f"{row['solves']:>9.1f}{row['tbat']:>11.4f}  {row['agree']} ({row['reference_failures']})")


if __name__ == "__main__":
    main()
