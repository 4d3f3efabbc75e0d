"""Byte marginalisation speed: our search (tree-attention key/value cache, batched) against recomputing each
position from scratch (`reference.token_marginal_next_byte`: the same beam and pruning, one full forward pass per
hypothesis, no cache), same model, text and settings, side by side:
    python benchmarks/marginal_speed.py --model results/data/smollm2 [--context 64 --positions 24]
Prints next-byte positions per second of each, the ratio and the largest difference between their probabilities.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from shared import sotu_passage

from oversmooth.analysis import reference
from oversmooth.models.tokenmarginal import MarginalSettings, load_token_byte_lm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="results/data/smollm2", help="a local transformers causal LM folder")
    parser.add_argument("--context", type=int, default=64, help="bytes of context")
    parser.add_argument("--positions", type=int, default=24, help="next-byte positions compared")
    parser.add_argument("--beam", type=int, default=MarginalSettings.beam)
    parser.add_argument("--prune-ratio", type=float, default=MarginalSettings.prune_ratio)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    settings = MarginalSettings(beam=args.beam, prune_ratio=args.prune_ratio)
    lm = load_token_byte_lm("benchmark", args.model, settings)
    text = sotu_passage(-3, args.context + args.positions)
    first = args.context - 1
    lm.marginal_logprobs([text[: first + 2]], [first])  # warm-up: the first call pays for one-off set-up
    started = time.perf_counter()
    ours = np.exp(lm.marginal_logprobs([text], [first])[0][:-1])  # the last row predicts past the text
    t_ours = time.perf_counter() - started
    prefix, spelled = lm.split_context(text, first)
    started = time.perf_counter()
    naive = np.array([
        reference.token_marginal_next_byte(lm.model, lm.vocab.token_bytes, prefix, text[spelled : t + 1],
                                           beam=settings.beam, prune_ratio=settings.prune_ratio)
        for t in range(first, len(text) - 1)
    ])
    t_naive = time.perf_counter() - started
    n = len(naive)
    print(f"{n} positions after {args.context} context bytes, beam {settings.beam}, prune_ratio {settings.prune_ratio}, "
          f"{args.threads} threads; {lm.steps} LM steps in the search")
    print(f"ours  {n / t_ours:8.2f} positions/s ({t_ours:.1f} s)")
    print(f"naive {n / t_naive:8.2f} positions/s ({t_naive:.1f} s)")
    print(f"ratio {t_naive / t_ours:.1f}x; largest |p_ours - p_naive| = {np.abs(ours - naive).max():.2e}")


if __name__ == "__main__":
    main()
