"""Training throughput: our training step against a plain nanoGPT-style loop, same model and batch.

Both run side by side in one process, alternating, on the same model shape, batch and data:
    python benchmarks/train_throughput.py [--block 256 --layers 2 --embd 256 --k 16 --batch 16 --steps 20]
Prints bytes/s of each and the ratio ours / baseline (goal: >= 1.0 on CPU).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from oversmooth.models.model import GPT, GPTConfig, sample_windows
from oversmooth.models.train import TrainConfig, make_optimizer, setup_runtime, train_step


def baseline_step(model: GPT, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> None:
    """nanoGPT's loop body: forward, backward, clip, step, zero."""
    _, loss = model(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--block", type=int, default=256)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--embd", type=int, default=256)
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()

    cfg = TrainConfig(batch_size=args.batch, threads=args.threads)
    runtime = setup_runtime(args.threads)
    shape = GPTConfig(block_size=args.block, n_layer=args.layers, n_head=4, n_embd=args.embd, bottleneck=args.k)
    data = np.random.default_rng(0).integers(0, 256, size=1_000_000, dtype=np.uint8)
    batches = [sample_windows(data, np.random.default_rng(i), args.batch, args.block) for i in range(args.steps)]

    torch.manual_seed(0)
    ours = GPT(shape).to(runtime.device)
    ours_opt = make_optimizer(ours, cfg, runtime)
    torch.manual_seed(0)
    base = GPT(shape).to(runtime.device)
    base_opt = torch.optim.AdamW(base.parameters(), lr=cfg.learning_rate, betas=(0.9, 0.95), weight_decay=0.1)

    def run_ours():
        for x, y in batches:
            train_step(ours, ours, ours, ours_opt, x, y, cfg, runtime)

    def run_base():
        for x, y in batches:
            baseline_step(base, base_opt, x.to(runtime.device), y.to(runtime.device))

    run_ours(), run_base()  # warm-up
    times = {"ours": [], "baseline": []}
    for _ in range(args.rounds):
        for name, fn in (("ours", run_ours), ("baseline", run_base)):
            if runtime.device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            fn()
            if runtime.device.type == "cuda":
                torch.cuda.synchronize()
            times[name].append(time.perf_counter() - start)
    bytes_per_run = args.steps * args.batch * args.block
    rate = {name: bytes_per_run / min(ts) for name, ts in times.items()}
    print(f"device {runtime.device}, threads {args.threads}, model {shape}")
    print(f"ours      {rate['ours']:>12,.0f} bytes/s")
    print(f"baseline  {rate['baseline']:>12,.0f} bytes/s")
    print(f"ratio ours/baseline: {rate['ours'] / rate['baseline']:.3f}")


if __name__ == "__main__":
    main()
