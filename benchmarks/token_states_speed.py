"""Token track speed: the cached-state design against recomputing the body, and the nucleus over a large vocabulary.

    python benchmarks/token_states_speed.py [--model results/quality/smollm2 --shard results/data/train.bin
                                             --tokens 4096 --rank 16 --positions 256]
Prints, side by side in one process on one thread count:
- caching: tokens/s of the body's forward pass that caches the head's input states (done once per source);
- a head's logits over the whole vocabulary, per token: from the cache (h A B) against the baseline of a full
  forward pass with that head (what every head would cost without the cache), and the ratio;
- the nucleus mask (tau 0.9) of the source's full-vocabulary distributions: ours (sorted values, ties at the cut by
  index) against the definition by a full stable sort, and the ratio (the results are checked equal).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from oversmooth.causallm import load_causal_lm
from oversmooth.data import read_shard
from oversmooth.decoding import nucleus_mask
from oversmooth.tokenheads import final_hidden_states, output_weight, shard_token_ids, svd_head


def best_of(rounds: int, fn) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def sorted_nucleus(probs: torch.Tensor, tau: float) -> torch.Tensor:
    """The definition: a full stable sort, the mass before each entry, scattered back."""
    values, order = torch.sort(probs, dim=-1, descending=True, stable=True)
    inside = (torch.cumsum(values, -1) - values) < tau
    inside[..., 0] = True
    return torch.zeros_like(inside).scatter_(-1, order, inside)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="results/quality/smollm2")
    parser.add_argument("--shard", default="results/data/train.bin")
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--block", type=int, default=256)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--positions", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    model, tokenizer = load_causal_lm(args.model)
    ids = shard_token_ids(tokenizer, read_shard(args.shard), args.tokens + 1)
    weight = output_weight(model)
    head = svd_head(weight, args.rank)
    print(f"{args.tokens} tokens of {args.shard}, vocabulary {weight.size(0)}, hidden {weight.size(1)}, "
          f"threads {torch.get_num_threads()}")

    cache = best_of(args.rounds, lambda: final_hidden_states(model, ids, args.block, batch_size=4))
    states, _ = final_hidden_states(model, ids, args.block, batch_size=4)
    h = torch.from_numpy(states)

    @torch.no_grad()
    def from_cache():
        for start in range(0, len(h), 512):
            head(h[start : start + 512])

    @torch.no_grad()
    def full_forward():
        blocks = torch.from_numpy(ids[: len(h)]).reshape(-1, args.block)
        for start in range(0, len(blocks), 4):
            head(model.base_model(input_ids=blocks[start : start + 4]).last_hidden_state)

    cached, uncached = best_of(args.rounds, from_cache), best_of(args.rounds, full_forward)
    n = len(h)
    print(f"{'caching states (once)':<34}{n / cache:>12.0f} tokens/s")
    print(f"{'head logits':<34}{'cached s/token':>20}{'forward s/token':>20}{'ratio':>8}")
    print(f"{'  rank ' + str(args.rank) + ' head, whole vocabulary':<34}{cached / n:>20.2e}{uncached / n:>20.2e}"
          f"{uncached / cached:>8.1f}")

    probs = torch.softmax((h[: args.positions] @ weight.T).double(), -1)
    ours, definition = best_of(args.rounds, lambda: nucleus_mask(probs, 0.9)), best_of(
        args.rounds, lambda: sorted_nucleus(probs, 0.9))
    assert torch.equal(nucleus_mask(probs, 0.9), sorted_nucleus(probs, 0.9))
    print(f"{'nucleus mask':<34}{'ours s/position':>20}{'sorted s/position':>20}{'ratio':>8}")
    print(f"{'  tau 0.9, ' + str(args.positions) + ' positions':<34}{ours / args.positions:>20.2e}"
          f"{definition / args.positions:>20.2e}{definition / ours:>8.1f}")
    print(f"  median nucleus size {int(np.median(nucleus_mask(probs, 0.9).sum(-1).numpy()))} tokens")


if __name__ == "__main__":
    main()
