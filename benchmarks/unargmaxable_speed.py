"""Unargmaxable tokens of a token-track head: today's exact method against a git revision's, side by side.

    python benchmarks/unargmaxable_speed.py --head results/data/smollm2 [--baseline v0.2.0 --baseline-minutes 15]
    python benchmarks/unargmaxable_speed.py --head results/data/smollm2 --svd-rank 16
`--head` is a head (results/models/tok-*/head.pt) or a source LM's folder for its own full head (SmolLM2: 49,152
tokens, k = 576); `--svd-rank r` takes the rank-r truncated SVD head of it instead. Prints the seconds of each
(one core), the counts (argmaxable, unargmaxable, duplicated, failed) and whether the two give identical sets;
the baseline runs in a child process stopped after `--baseline-minutes` (v0.2.0 decides every token a search did
not by an LP over all the vertices found: at the full head hours).
"""

from __future__ import annotations

import argparse
import multiprocessing
import time

import numpy as np
from shared import module_at, token_head

from oversmooth.analysis.argmax import linear_head_vertices


def verdicts(report) -> dict[str, list[int]]:
    return {"argmaxable": sorted(report.witnesses), "unargmaxable": report.unargmaxable,
            "duplicates": report.duplicates, "failed": report.failed}


def timed_verdicts(find_vertices, W: np.ndarray, seed: int) -> tuple[float, dict[str, list[int]]]:
    start = time.perf_counter()
    report = find_vertices(W, seed=seed)
    return time.perf_counter() - start, verdicts(report)


def _baseline_child(revision: str, W: np.ndarray, seed: int, queue) -> None:
    queue.put(timed_verdicts(module_at(revision, "src/oversmooth/analysis/argmax.py").linear_head_vertices, W, seed))


def baseline(revision: str, W: np.ndarray, seed: int, minutes: float) -> tuple[float, dict] | None:
    """The revision's seconds and sets, or None if it did not finish in `minutes`."""
    queue = multiprocessing.get_context("fork").Queue()
    child = multiprocessing.get_context("fork").Process(target=_baseline_child, args=(revision, W, seed, queue))
    child.start()
    child.join(minutes * 60)
    if child.is_alive():
        child.terminate()
        return None
    return queue.get()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--head", required=True)
    parser.add_argument("--svd-rank", type=int, help="the rank-r truncated SVD of the head instead")
    parser.add_argument("--baseline", default="v0.2.0", help="git revision whose method runs beside today's")
    parser.add_argument("--baseline-minutes", type=float, default=15.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    W = token_head(args.head)[1]
    if args.svd_rank:
        u, s, _ = np.linalg.svd(W, full_matrices=False)
        W = u[:, : args.svd_rank] * s[: args.svd_rank]
    seconds, ours = timed_verdicts(linear_head_vertices, W, args.seed)
    print(f"{args.head}{f' (SVD rank {args.svd_rank})' if args.svd_rank else ''}: V = {W.shape[0]}, k = {W.shape[1]}")
    print(f"ours {seconds:.1f} s: " + ", ".join(f"{len(v)} {k}" for k, v in ours.items()))
    before = baseline(args.baseline, W, args.seed, args.baseline_minutes)
    if before is None:
        print(f"{args.baseline}: not finished in {args.baseline_minutes:g} minutes (ratio > "
              f"{args.baseline_minutes * 60 / seconds:.0f})")
        return
    old_seconds, old = before
    print(f"{args.baseline} {old_seconds:.1f} s: " + ", ".join(f"{len(v)} {k}" for k, v in old.items()) +
          f"; ratio {old_seconds / seconds:.1f}; identical sets: {old == ours}")


if __name__ == "__main__":
    main()
