"""TBAT speed: our exact solver against the thesis's method (one scipy linprog per byte), side by side.

Random heads W (256 x k) and outputs p = softmax(W z), or real positions of a trained model:
    python benchmarks/tbat_speed.py [--ks 4 8 16 32 256 --positions 40 --reference-positions 4]
    python benchmarks/tbat_speed.py --checkpoint results/models/bn-8/best.pt --logits results/logits/bn-8.parquet
Prints, per k, seconds per position of ours, of the solver at `--baseline` (a git revision, default the tag
v0.2.0: its src/oversmooth/analysis/tbat.py, or from the solver's split into a sub-package on, its
src/oversmooth/analysis/bat under a name of its own; `baseline_solver`) and of the thesis's method, the ratios, LP
solves per position, and whether the reject sets are identical (goal: >= 100x the thesis's method for every k <= 32,
and no LP at full rank). Every solver runs on one BLAS
thread, as a TBAT job of `threads: 1` does.

A token-track head over its whole vocabulary (49,152 tokens: one linprog per token would take hours per position,
so it runs on a subsample of tokens, every token our solver accepts and `--reference-tokens` it rejects, and its
time per position is the mean time per linprog times the tokens the thesis's method decides, p_i <= threshold):
    python benchmarks/tbat_speed.py --head results/models/tok-learned-r64/head.pt \
        --states results/tokens/eval.states.parquet --positions 8 --baseline-positions 2 --reference-tokens 10
`--head results/data/smollm2` takes the source LM's own full head (k = 576); there one linprog takes minutes, so
`--reference-accepted 2 --reference-tokens 2 --reference-method highs-ipm` checks a few tokens of each kind (HiGHS's
simplex took over 28 minutes on a rejected one), or `--reference-accepted 0 --reference-tokens 0` none;
`--temperature 0.8` takes the outputs at temperature 0.8. The baseline solver runs on the first
`--baseline-positions` positions (0: none; v0.2.0 needs about a minute per position at k = 64 and did not finish one
position of the full head in 15 minutes)."""

from __future__ import annotations

import argparse
import time

import numpy as np
from shared import bat_solver_at, token_head

from oversmooth.analysis.bat.settings import TBATSettings
from oversmooth.analysis.bat.solver import BATSolver
from oversmooth.analysis.reference import bat_reject_set
from oversmooth.analysis.tbat import one_blas_thread
from oversmooth.extraction.logit_tables import sampled_logit_rows


def random_outputs(k: int, n: int, seed: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(256, k))
    logits = scale * rng.normal(size=(n, k)) @ W.T / np.sqrt(k)
    p = np.exp(logits - logits.max(1, keepdims=True))
    return W, p / p.sum(1, keepdims=True)


def real_outputs(checkpoint: str, logits: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    from oversmooth.models.checkpoints import load_model

    W = load_model(checkpoint).output_matrix().detach().double().numpy()
    p = np.exp(sampled_logit_rows(logits, n, seed).logprobs.astype(np.float64))
    return W, p / p.sum(1, keepdims=True)


def compare(W: np.ndarray, probs: np.ndarray, n_reference: int, settings: TBATSettings, baseline) -> dict:
    """Seconds per position of our solver and of the baseline's (same positions, both warmed up), and of the
    definition on the first `n_reference`; whether all three give the same sets."""
    solver, old = BATSolver(W, settings), baseline(W, settings)
    solver.reject_set(probs[0])  # warm-up: the first solve builds HiGHS's data
    old.reject_set(probs[0])
    results, start = [], time.perf_counter()
    for p in probs:
        results.append(solver.reject_set(p))
    fast = (time.perf_counter() - start) / len(probs)
    start, same = time.perf_counter(), True
    for p, result in zip(probs, results):
        same &= np.array_equal(old.reject_set(p).rejected, result.rejected)
    slow = (time.perf_counter() - start) / len(probs)
    start, agree, reference_failures = time.perf_counter(), True, 0
    for p, result in zip(probs[:n_reference], results):
        rejected, failures = bat_reject_set(p, W, threshold=settings.threshold, zero_tol=settings.zero_tol)
        reference_failures += len(failures)
        ok = ~np.isin(np.arange(len(p)), failures)  # compare where the reference has an answer
        agree &= not result.failed and np.array_equal(rejected[ok], result.rejected[ok])
    reference = (time.perf_counter() - start) / n_reference
    return {
        "fast": fast, "slow": slow, "same": same, "reference": reference, "agree": agree,
        "reference_failures": reference_failures, "solves": np.mean([r.lp_solves for r in results]),
        "tbat": np.nanmean([r.tbat(p) for r, p in zip(results, probs)]),
    }


def token_outputs(head_path: str, states: str, n: int, seed: int,
                  temperature: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """A token-track head (results/models/tok-*/head.pt), or a source LM's folder for its own full head, and its
    outputs at n sampled positions, sharpened by `temperature` (1: pure sampling)."""
    from oversmooth.analysis.tokenheads import sampled_state_rows

    head, W = token_head(head_path)
    logits = sampled_state_rows(head, states, n, seed).logprobs / temperature
    p = np.exp(logits - logits.max(1, keepdims=True))
    return W, p / p.sum(1, keepdims=True)


def baseline_solver(revision: str):
    """The BATSolver class at a git revision (a tag such as v0.2.0), loaded beside today's: the sub-package
    src/oversmooth/analysis/bat at a revision that has it, copied to a temporary folder under a name of its own, or
    the single module src/oversmooth/analysis/tbat.py at an earlier one (`shared.bat_solver_at`)."""
    return bat_solver_at(revision)


def timed(solver, p: np.ndarray):
    start = time.perf_counter()
    result = solver.reject_set(p)
    return result, time.perf_counter() - start


def compare_on_tokens(W: np.ndarray, probs: np.ndarray, n_rejected: int, settings: TBATSettings, seed: int,
                      baseline, n_baseline: int, n_accepted: int | None = None, method: str = "highs") -> dict:
    """Our solver on every position, the baseline solver on the first `n_baseline`; the definition (linprog's
    `method`) on each position's accepted tokens (`n_accepted` random ones, default all) and `n_rejected` random
    rejected ones (with p_i above zero_tol), its time per position extrapolated from its time per linprog."""
    solver = BATSolver(W, settings)
    old = baseline(W, settings) if n_baseline else None
    rng, fast, slow, per_lp, failures, solves, tbat = np.random.default_rng(seed), [], [], [], 0, [], []
    checked = np.zeros(2, dtype=int)  # accepted, rejected tokens the definition decided
    agree, same = True, True
    for n, p in enumerate(probs):
        result, seconds = timed(solver, p)
        fast.append(seconds)
        solves.append(result.lp_solves)
        tbat.append(result.tbat(p))
        if n < n_baseline:
            before, seconds = timed(old, p)
            slow.append(seconds)
            same &= not before.failed and np.array_equal(before.rejected, result.rejected)
        rejected = np.flatnonzero(result.rejected & (p / (1 - settings.threshold) > settings.zero_tol))
        accepted = np.flatnonzero(~result.rejected)
        if n_accepted is not None:
            accepted = rng.choice(accepted, min(n_accepted, len(accepted)), replace=False)
        chosen = np.concatenate([accepted, rng.choice(rejected, min(n_rejected, len(rejected)), replace=False)])
        if not len(chosen):  # no token checked (--reference-accepted 0 --reference-tokens 0)
            continue
        start = time.perf_counter()
        expected, failed = bat_reject_set(p, W, threshold=settings.threshold, zero_tol=settings.zero_tol,
                                          tokens=chosen, method=method)
        decided = int((p <= settings.threshold).sum())  # the thesis's method: one linprog for each of these
        per_lp.append((time.perf_counter() - start) / len(chosen) * decided)
        failures += len(failed)
        ok = np.setdiff1d(chosen, failed)
        agree &= not result.failed and np.array_equal(expected[ok], result.rejected[ok])
        checked += [int((~result.rejected[ok]).sum()), int(result.rejected[ok].sum())]
    return {"fast": np.mean(fast), "slow": np.mean(slow) if slow else float("nan"), "same": same,
            "fast_on_baseline": np.mean(fast[: len(slow)]) if slow else float("nan"),
            "reference": np.mean(per_lp) if per_lp else float("nan"), "agree": agree, "reference_failures": failures,
            "solves": np.mean(solves), "tbat": np.nanmean(tbat), "worst": max(fast), "checked": checked,
            "each": (fast, slow)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", type=int, nargs="+", default=[4, 8, 16, 32, 256])
    parser.add_argument("--positions", type=int, default=40)
    parser.add_argument("--reference-positions", type=int, default=4)
    parser.add_argument("--scale", type=float, default=6.0, help="logit scale of the random outputs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint")
    parser.add_argument("--logits")
    parser.add_argument("--head", help="a token-track head (results/models/tok-*/head.pt), or the source LM's folder "
                        "(results/data/smollm2) for its own full head")
    parser.add_argument("--states", help="the token track's cached evaluation states")
    parser.add_argument("--reference-tokens", type=int, default=20, help="rejected tokens checked per position")
    parser.add_argument("--reference-accepted", type=int, help="accepted tokens checked per position (default: all)")
    parser.add_argument("--reference-method", default="highs", choices=["highs", "highs-ds", "highs-ipm"],
                        help="linprog's method for the definition (highs-ipm: minutes per token over the full head, "
                        "where the simplex took over 28 minutes)")
    parser.add_argument("--baseline", default="v0.2.0", help="git revision whose solver runs beside today's")
    parser.add_argument("--baseline-positions", type=int, help="positions the baseline solves (default: all)")
    parser.add_argument("--temperature", type=float, default=1.0, help="a token head's outputs sharpened by this "
                        "(1: pure sampling, the default)")
    args = parser.parse_args()
    one_blas_thread()  # one core, as a TBAT job of one thread runs
    settings = TBATSettings()
    if args.head:
        W, probs = token_outputs(args.head, args.states, args.positions, args.seed, args.temperature)
        n_baseline = len(probs) if args.baseline_positions is None else min(args.baseline_positions, len(probs))
        row = compare_on_tokens(W, probs, args.reference_tokens, settings, args.seed,
                                baseline_solver(args.baseline) if n_baseline else None, n_baseline,
                                args.reference_accepted, args.reference_method)
        print(f"{args.head}: V = {W.shape[0]}, k = {W.shape[1]}, {len(probs)} positions (temperature "
              f"{args.temperature:g})")
        print(f"ours {row['fast']:.2f} s/position (slowest {row['worst']:.2f}; {row['solves']:.1f} LPs), "
              f"{args.baseline} {row['slow']:.2f} s/position on the first {n_baseline} (ours there "
              f"{row['fast_on_baseline']:.2f}, ratio {row['slow'] / row['fast_on_baseline']:.2f}; identical reject "
              f"sets: {row['same']}), one linprog per token "
              f"{row['reference']:.0f} s/position (extrapolated, ratio {row['reference'] / row['fast']:.0f}); "
              f"mean TBAT {row['tbat']:.4f}; identical on the checked tokens ({row['checked'][0]} accepted, "
              f"{row['checked'][1]} rejected): {row['agree']} "
              f"({row['reference_failures']} linprog failures)")
        print("seconds per position, ours:", ", ".join(f"{t:.1f}" for t in row["each"][0]),
              f"| {args.baseline}:", ", ".join(f"{t:.1f}" for t in row["each"][1]))
        return
    if args.checkpoint:
        cases = [("real", real_outputs(args.checkpoint, args.logits, args.positions, args.seed))]
    else:
        cases = [(f"k={k}", random_outputs(k, args.positions, args.seed + k, args.scale)) for k in args.ks]
    baseline = baseline_solver(args.baseline)
    print(f"{'case':<8}{'ours s/pos':>12}{args.baseline + ' s/pos':>14}{'ratio':>7}{'thesis s/pos':>14}{'ratio':>8}"
          f"{'LPs/pos':>9}{'mean TBAT':>11}  identical to {args.baseline}, to the thesis (its LP failures)")
    for name, (W, probs) in cases:
        row = compare(W, probs, min(args.reference_positions, len(probs)), settings, baseline)
        print(f"{name:<8}{row['fast']:>12.2e}{row['slow']:>14.2e}{row['slow'] / row['fast']:>7.1f}"
              f"{row['reference']:>14.3f}{row['reference'] / row['fast']:>8.0f}{row['solves']:>9.1f}{row['tbat']:>11.4f}"
              f"  {row['same']}, {row['agree']} ({row['reference_failures']})")


if __name__ == "__main__":
    main()
