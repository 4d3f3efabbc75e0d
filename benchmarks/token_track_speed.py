"""Token track speed: cached states against recomputing the body, the nucleus over a large vocabulary, and the
key/value-cached sampler against one without the cache.

    python benchmarks/token_track_speed.py [--model results/data/smollm2 --shard results/data/train.bin
                                            --tokens 4096 --rank 16 --positions 256 --sample-tokens 64]
Prints, side by side in one process on one thread count:
- caching: tokens/s of the body's forward pass that caches the head's input states (done once per source);
- a head's logits over the whole vocabulary, per token: from the cache (h A B) against the baseline of a full
  forward pass with that head (what every head would cost without the cache), and the ratio;
- the nucleus mask (tau 0.9) of the source's full-vocabulary distributions: ours (sorted values, ties at the cut by
  index) against the definition by a full stable sort, and the ratio (the results are checked equal);
- sampling with the rank-k head (pure, 4 rows of 16-token prefixes): tokens/s with the model's key/value cache and
  without it (every step re-reads the window), and the ratio; then how far apart the two are on the same prefixes
  (float32 rounding, at most ~5e-5 in log-probability) and how many rows part after a flip (a draw within that
  rounding of a CDF boundary: about 2 in 4 x 64 draws are expected, so identical samples are not asserted).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from oversmooth.analysis.decoding import Decoding, nucleus_mask
from oversmooth.analysis.reference import nucleus_mask_by_sort
from oversmooth.analysis.timing import seconds
from oversmooth.analysis.tokenfit import svd_head
from oversmooth.analysis.tokenheads import output_weight
from oversmooth.analysis.tokenstates import final_hidden_states, shard_token_ids
from oversmooth.data.corpus import read_shard
from oversmooth.generation.sampling import TokenHeadStepper, UncachedStepper, generate, uniforms_for
from oversmooth.models.causallm import load_causal_lm


def best_of(rounds: int, fn) -> float:
    return min(seconds(fn) for _ in range(rounds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="results/data/smollm2")
    parser.add_argument("--shard", default="results/data/train.bin")
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--block", type=int, default=256)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--positions", type=int, default=256)
    parser.add_argument("--sample-tokens", type=int, default=64)
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

    chunks = [torch.softmax((h[start : start + 32] @ weight.T).double(), -1).numpy() for start in range(0, args.positions, 32)]
    ours = best_of(args.rounds, lambda: [nucleus_mask(probs, 0.9) for probs in chunks])  # as the metrics job:
    definition = best_of(args.rounds, lambda: [nucleus_mask_by_sort(probs, 0.9) for probs in chunks])  # 32 at a time
    assert all(np.array_equal(nucleus_mask(probs, 0.9), nucleus_mask_by_sort(probs, 0.9)) for probs in chunks)
    probs = np.concatenate(chunks)
    print(f"{'nucleus mask':<34}{'ours s/position':>20}{'sorted s/position':>20}{'ratio':>8}")
    print(f"{'  tau 0.9, ' + str(args.positions) + ' positions by 32':<34}{ours / args.positions:>20.2e}"
          f"{definition / args.positions:>20.2e}{definition / ours:>8.1f}")
    print(f"  median nucleus size {int(np.median(nucleus_mask(probs, 0.9).sum(-1)))} tokens")

    prefixes = torch.from_numpy(ids[: 4 * 16].reshape(4, 16))
    uniforms = uniforms_for(range(4), args.sample_tokens)
    samples = {}

    def sample(stepper, label):
        samples[label] = generate(stepper, prefixes, Decoding("pure"), uniforms)

    block = 4096
    fast = best_of(args.rounds, lambda: sample(TokenHeadStepper(model, head, block), "cached"))
    slow = best_of(args.rounds, lambda: sample(UncachedStepper(TokenHeadStepper(model, head, block)), "uncached"))
    n = prefixes.size(0) * args.sample_tokens
    print(f"{'sampling, rank ' + str(args.rank) + ' head':<34}{'cached tokens/s':>20}{'uncached tokens/s':>20}{'ratio':>8}")
    print(f"{'  4 x ' + str(args.sample_tokens) + ' tokens after 16':<34}{n / fast:>20.1f}{n / slow:>20.1f}"
          f"{slow / fast:>8.1f}")
    report_agreement(model, head, block, prefixes, samples)


@torch.no_grad()
def report_agreement(model, head, block: int, prefixes: torch.Tensor, samples: dict[str, torch.Tensor]) -> None:
    """How far the cached sampler is from the uncached one: both read the same prefixes (the cached sampler's
    own tokens, teacher-forced), so their log-probabilities differ by float32 rounding only; a sampled token can
    still differ where a uniform draw falls within that rounding of a CDF boundary (a flip), after which the two
    continuations part."""
    tokens = samples["cached"]  # the sampled tokens, without the prefixes
    cached, uncached = TokenHeadStepper(model, head, block), UncachedStepper(TokenHeadStepper(model, head, block))
    worst = max((a - b).abs().max().item() for a, b in zip(teacher_forced(cached, prefixes, tokens),
                                                            teacher_forced(uncached, prefixes, tokens)))
    differ = (samples["cached"] != samples["uncached"]).any(1)
    first = [int((row != other).nonzero()[0]) for row, other, d
             in zip(samples["cached"], samples["uncached"], differ) if d]
    print(f"  same prefixes: cached and uncached log-probabilities differ by at most {worst:.1e} (float32); "
          f"{int(differ.sum())} of {len(differ)} rows part after a flip (at step {first or '-'})")


def teacher_forced(stepper, prefixes: torch.Tensor, tokens: torch.Tensor) -> list[torch.Tensor]:
    """The stepper's log-probabilities after the prefixes and after each of `tokens` in turn."""
    out = [stepper.start(prefixes)]
    for step in range(tokens.size(1) - 1):
        out.append(stepper.step(tokens[:, step]))
    return out


if __name__ == "__main__":
    main()
