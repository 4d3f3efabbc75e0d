"""Training throughput and MFU at a config's model shape: the pipeline's own training step (`train_step`, its
optimizer and runtime: bf16 autocast and fused AdamW on CUDA), compiled and eager, for the family's narrowest and
widest bottleneck, timed after warm-up:
    python benchmarks/train_mfu.py [--config config/thesis.yaml] [--steps 10 --warmup 3] [--out mfu.json]
    python benchmarks/train_mfu.py --variants --profile   # the narrowest k compiled, beside what could change
    python benchmarks/train_mfu.py --small     # a tiny shape: the same code path in seconds on a CPU
Prints bytes/s, achieved TFLOP/s and MFU against the device's dense bf16 peak (nanoGPT's count: 6 N + 12 L d T FLOPs
per trained byte, N without the position embeddings), and a large bf16 matrix product's rate beside it.
`--variants` measures, for the narrowest k compiled, the pipeline's step beside a step that reads its loss once
(not after every micro-batch) and beside 4x larger micro-batches (the same batch); `--profile` prints where a
compiled step's time goes (torch.profiler, the operations of most device time).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from shared import config_sections

from oversmooth.models.model import GPT, GPTConfig, sample_windows
from oversmooth.models.train import TrainConfig, make_optimizer, setup_runtime, train_step

REPO = Path(__file__).resolve().parents[1]
# Dense bf16 peaks by the vendors' datasheets (SXM parts; no sparsity), in FLOP/s: what MFU is measured against.
BF16_PEAK = {"H200": 989.4e12, "H100": 989.4e12, "A100": 312e12, "L40S": 362e12, "A10": 125e12}
SMALL = {"model": {"block_size": 64, "n_layer": 2, "n_head": 2, "n_embd": 64, "dropout": 0.1},
         "train": {"batch_size": 4, "grad_accum": 2}}


def bf16_peak(device: torch.device) -> float | None:
    """The device's dense bf16 peak, None where unknown (a CPU)."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peak for key, peak in BF16_PEAK.items() if key in name), None)


def flops_per_byte(model: GPT) -> float:
    """nanoGPT's `estimate_mfu` count per trained position: 6 N + 12 L d T, N without the position embeddings."""
    cfg = model.config
    n = model.num_parameters() - model.wpe.weight.numel()
    return 6 * n + 12 * cfg.n_layer * cfg.n_embd * cfg.block_size


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_rate(device: torch.device, n: int = 8192, repeats: int = 10) -> float | None:
    """FLOP/s of an n x n x n bf16 matrix product on random data (the ceiling the MFU's peak stands for)."""
    if device.type != "cuda":
        return None
    a, b = (torch.randn(n, n, device=device, dtype=torch.bfloat16) for _ in range(2))
    for _ in range(3):
        a @ b
    synchronize(device)
    started = time.perf_counter()
    for _ in range(repeats):
        a @ b
    synchronize(device)
    return 2 * n**3 * repeats / (time.perf_counter() - started)


def one_sync_step(forward, ddp_model, model: GPT, optimizer, x, y, cfg: TrainConfig, runtime) -> float:
    """`train_step` with the loss summed on the device and read once per step (a variant, for comparison)."""
    total = torch.zeros((), device=runtime.device)
    for micro in range(cfg.grad_accum):
        xb = x[micro * cfg.batch_size : (micro + 1) * cfg.batch_size].to(runtime.device, non_blocking=True)
        yb = y[micro * cfg.batch_size : (micro + 1) * cfg.batch_size].to(runtime.device, non_blocking=True)
        with runtime.autocast():
            _, loss = forward(xb, yb)
            (loss / cfg.grad_accum).backward()
        total += loss.detach().float()
    if cfg.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return total.item() / cfg.grad_accum


def settings_for(config: dict, k: int) -> dict:
    """The model and train sections of a bn-<k> run of `config`."""
    return {"model": {**config["model"], "bottleneck": k}, "train": dict(config["train"])}


def measure(settings: dict, compiled: bool, steps: int, warmup: int, runtime, step=train_step, label: str = "pipeline",
            profile: bool = False) -> dict:
    """Bytes/s and FLOP/s of `steps` training steps of one model after `warmup` (compilation included there)."""
    model_cfg = GPTConfig(**settings["model"])
    train = {k: v for k, v in settings["train"].items() if k in TrainConfig.__dataclass_fields__}
    cfg = TrainConfig(**{**train, "compile": compiled})
    torch.manual_seed(cfg.seed)
    model = GPT(model_cfg).to(runtime.device)
    optimizer = make_optimizer(model, cfg, runtime)
    forward = torch.compile(model) if compiled else model
    data = np.random.default_rng(0).integers(0, 256, size=4_000_000, dtype=np.uint8)
    rng = np.random.default_rng(1)
    batch = cfg.batch_size * cfg.grad_accum

    def run(n: int) -> float:
        synchronize(runtime.device)
        started = time.perf_counter()
        for _ in range(n):
            x, y = sample_windows(data, rng, batch, model_cfg.block_size)
            step(forward, model, model, optimizer, x, y, cfg, runtime)
        synchronize(runtime.device)
        return time.perf_counter() - started

    warm_seconds = run(warmup)
    seconds = run(steps)
    if profile:
        print_profile(lambda: run(2), runtime.device)
    bytes_per_s = steps * batch * model_cfg.block_size / seconds
    flops = flops_per_byte(model) * bytes_per_s
    return {"bottleneck": model_cfg.bottleneck, "compiled": compiled, "variant": label,
            "parameters": model.num_parameters(), "batch": f"{cfg.batch_size} x {cfg.grad_accum}",
            "warmup_s": round(warm_seconds, 2), "step_s": round(seconds / steps, 4), "bytes_per_s": round(bytes_per_s),
            "tflops": round(flops / 1e12, 2)}


def print_profile(fn, device: torch.device, rows: int = 25) -> None:
    """torch.profiler's table of `fn`'s operations, most device (else host) time first."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        fn()
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(prof.key_averages().table(sort_by=key, row_limit=rows, max_name_column_width=60), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(REPO / "config" / "thesis.yaml"), help="the shape's config file")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--small", action="store_true", help="a tiny shape (a CPU check of the same code path)")
    parser.add_argument("--eager-only", action="store_true")
    parser.add_argument("--variants", action="store_true", help="the narrowest k compiled, beside two variants")
    parser.add_argument("--profile", action="store_true", help="where a compiled step's time goes")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args()

    config = config_sections(args.config)
    runtime = setup_runtime(torch.get_num_threads())
    peak = bf16_peak(runtime.device)
    ks = (min(config["bottlenecks"]), max(config["bottlenecks"]))
    runs = [(k, compiled, train_step, "pipeline") for k in ks for compiled in (False, True)]
    if args.eager_only:
        runs = [run for run in runs if not run[1]]
    if args.variants:
        runs = [(ks[0], True, train_step, "pipeline"), (ks[0], True, one_sync_step, "one loss read a step"),
                (ks[0], True, train_step, "micro-batches 4x larger")]
    rows = []
    for k, compiled, step, label in runs:
        settings = settings_for(config, k)
        if args.small:
            settings = {part: {**settings[part], **SMALL[part]} for part in settings}
        if label.startswith("micro-batches"):
            train = settings["train"]
            settings["train"] = {**train, "batch_size": train["batch_size"] * 4,
                                 "grad_accum": max(1, train["grad_accum"] // 4)}
        row = measure(settings, compiled, args.steps, args.warmup, runtime, step, label,
                      profile=args.profile and compiled and label == "pipeline")
        row["mfu"] = round(row["tflops"] * 1e12 / peak, 4) if peak else None
        rows.append(row)
        print(json.dumps(row), flush=True)
    device = torch.cuda.get_device_name(runtime.device) if runtime.device.type == "cuda" else "cpu"
    ceiling = matmul_rate(runtime.device)
    result = {"device": device, "torch": torch.__version__, "config": Path(args.config).name, "small": args.small,
              "shape": {key: config["model"][key] for key in ("n_layer", "n_embd", "n_head", "block_size", "dropout")},
              "bf16_peak_tflops": peak and peak / 1e12, "matmul_8192_tflops": ceiling and round(ceiling / 1e12, 1),
              "rows": rows}
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"{device}, torch {torch.__version__}, dense bf16 peak {result['bf16_peak_tflops']} TFLOP/s, "
          f"8192^3 bf16 matmul {result['matmul_8192_tflops']} TFLOP/s")
    print(f"{'k':>5} {'compiled':>8} {'variant':>24} {'bytes/s':>12} {'TFLOP/s':>8} {'MFU':>6} {'step s':>7} "
          f"{'warm-up s':>9}")
    for row in rows:
        mfu = f"{row['mfu']:.1%}" if row["mfu"] is not None else "-"
        print(f"{row['bottleneck']:>5} {row['compiled']!s:>8} {row['variant']:>24} {row['bytes_per_s']:>12,} "
              f"{row['tflops']:>8.2f} {mfu:>6} {row['step_s']:>7.3f} {row['warmup_s']:>9.1f}")


if __name__ == "__main__":
    main()
