"""Sampling speed: our cached sampler against a no-cache loop that re-runs the whole context for every
new byte (as nanoGPT's `generate`), same model, prompts, decoding and random numbers, side by side:
    python benchmarks/sampling_speed.py [--checkpoint results/models/bn-16/best.pt] [--prompts 8 --bytes 500]
Prints bytes/s of each, the ratio (goal: >= 10x at 500-byte continuations on CPU) and whether the bytes agree.
"""

from __future__ import annotations

import argparse

import torch

from oversmooth.analysis.decoding import Decoding
from oversmooth.analysis.timing import seconds
from oversmooth.generation.sampling import GPTStepper, generate, generate_uncached, uniforms_for
from oversmooth.models.bytelm import GPTByteLM
from oversmooth.models.checkpoints import load_model
from oversmooth.models.model import GPT, GPTConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", help="a trained model (default: the CPU default's shape, k = 16, untrained)")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--prefix", type=int, default=100)
    parser.add_argument("--bytes", type=int, default=500)
    parser.add_argument("--method", default="pure")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = load_model(args.checkpoint) if args.checkpoint else GPT(GPTConfig(block_size=256, n_layer=2, n_head=4, n_embd=256, bottleneck=16)).eval()
    lm = GPTByteLM("model", model)
    prefixes = torch.randint(32, 127, (args.prompts, args.prefix))
    uniforms = uniforms_for(range(args.prompts), args.bytes)
    decoding = Decoding(args.method)
    generate(GPTStepper(lm), prefixes, decoding, uniforms[:, :8])  # warm-up
    cached, uncached = {}, {}
    t_cached = seconds(lambda: cached.setdefault("x", generate(GPTStepper(lm), prefixes, decoding, uniforms)))
    t_uncached = seconds(lambda: uncached.setdefault("x", generate_uncached(lm, prefixes, decoding, uniforms)))
    n = args.prompts * args.bytes
    print(f"model {model.config}, {args.prompts} prompts x {args.bytes} bytes, {args.method}, threads {args.threads}")
    print(f"cached    {n / t_cached:>10,.0f} bytes/s")
    print(f"no cache  {n / t_uncached:>10,.0f} bytes/s")
    print(f"ratio cached/no-cache: {t_uncached / t_cached:.1f}; identical bytes: {torch.equal(cached['x'], uncached['x'])}")


if __name__ == "__main__":
    main()
