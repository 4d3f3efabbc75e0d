"""Inference speed on each device: cached sampling of a byte model of a config's shape (bytes/s) and SmolLM2's
next-byte marginal (positions/s), the pipeline's own code on each device in turn, on the same inputs:
    python benchmarks/inference_speed.py --smollm2 results/data/smollm2 [--devices cuda cpu] [--out speed.json]
    python benchmarks/inference_speed.py --small --smollm2 results/data/smollm2 --devices cpu   # a quick CPU check
Sampling: `--prompts` prompts of `--prefix` bytes continued by `--bytes` bytes (pure sampling; bf16 on CUDA, as the
sample rule runs). Marginal: `--texts` texts of the demo's corpus, `--positions` positions each after 64 bytes of
context, searched together (the ground truth's `batch_size`), float32 as the pipeline loads it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from pathlib import Path

import torch

from shared import config_sections, sotu_passage
from train_mfu import print_profile, synchronize

from oversmooth.analysis.decoding import Decoding
from oversmooth.generation.sampling import GPTStepper, generate, uniforms_for
from oversmooth.models.bytelm import GPTByteLM
from oversmooth.models.model import GPT, GPTConfig
from oversmooth.models.tokenmarginal import load_token_byte_lm

REPO = Path(__file__).resolve().parents[1]
CONTEXT = 64


def timed(fn, device: torch.device) -> float:
    """Seconds `fn` takes, its device work included."""
    synchronize(device)
    started = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - started


def sampling_rate(shape: dict, device: torch.device, prompts: int, prefix: int, n_bytes: int, profile: bool = False,
                  sdpa: str = "default") -> dict:
    """Bytes/s of cached pure sampling of an untrained model of `shape` (the speed does not depend on its weights),
    a first pass and a second one over the same lengths (a backend may set up each new length once per process);
    `sdpa`: the attention backends allowed ("default": PyTorch's choice); `profile`: print where 16 bytes go."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.manual_seed(0)
    lm = GPTByteLM("benchmark", GPT(GPTConfig(**shape)).to(device).eval())
    prefixes = torch.randint(32, 127, (prompts, prefix))
    uniforms = uniforms_for(range(prompts), n_bytes)
    decoding = Decoding("pure")
    backends = None if sdpa == "default" else [getattr(SDPBackend, name.upper()) for name in sdpa.split(",")]
    with sdpa_kernel(backends) if backends else contextlib.nullcontext():
        generate(GPTStepper(lm), prefixes, decoding, uniforms[:, :4])  # warm-up
        first, second = (timed(lambda: generate(GPTStepper(lm), prefixes, decoding, uniforms), device) for _ in range(2))
        if profile:
            print_profile(lambda: generate(GPTStepper(lm), prefixes, decoding, uniforms[:, :16]), device)
    return {"prompts": prompts, "prefix": prefix, "bytes": n_bytes, "sdpa": sdpa, "seconds": round(first, 3),
            "bytes_per_s": round(prompts * n_bytes / first, 1), "second_pass_s": round(second, 3),
            "second_pass_bytes_per_s": round(prompts * n_bytes / second, 1)}


def marginal_rate(folder: str, device: torch.device, texts: int, positions: int) -> dict:
    """Positions/s of SmolLM2's next-byte marginal over `texts` texts read together."""
    lm = load_token_byte_lm("benchmark", folder, device=device)
    batch = [sotu_passage(i, CONTEXT + positions) for i in range(-texts, 0)]
    firsts = [CONTEXT - 1] * texts
    lm.marginal_logprobs([t[: CONTEXT + 1] for t in batch], firsts)  # warm-up
    seconds = timed(lambda: lm.marginal_logprobs(batch, firsts), device)
    return {"texts": texts, "positions": positions, "seconds": round(seconds, 3),
            "positions_per_s": round(texts * positions / seconds, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(REPO / "config" / "thesis.yaml"), help="the byte model's shape")
    parser.add_argument("--smollm2", help="SmolLM2's converted folder (results/data/smollm2); none: no marginal")
    parser.add_argument("--devices", nargs="+", default=["cuda", "cpu"])
    parser.add_argument("--prompts", type=int, default=100, help="sampled together (thesis sampling.batch_size)")
    parser.add_argument("--prefix", type=int, default=100)
    parser.add_argument("--bytes", type=int, default=200)
    parser.add_argument("--texts", type=int, default=8)
    parser.add_argument("--positions", type=int, default=64)
    parser.add_argument("--cpu-share", type=float, default=0.1, help="the CPU runs this share of the GPU's work")
    parser.add_argument("--small", action="store_true", help="a tiny shape and few positions (a CPU check)")
    parser.add_argument("--profile", action="store_true", help="where the sampler's time goes on each device")
    parser.add_argument("--sdpa", default="default", help="attention backends for sampling, e.g. flash_attention,"
                        "efficient_attention,math (default: PyTorch's choice)")
    parser.add_argument("--out")
    args = parser.parse_args()

    config = config_sections(args.config)
    shape = {**config["model"], "bottleneck": min(config["bottlenecks"])}
    if args.small:
        shape = {**shape, "n_layer": 2, "n_embd": 64, "n_head": 2, "block_size": 256}
        args.prompts, args.bytes, args.texts, args.positions = 4, 16, 2, 8
    result = {"torch": torch.__version__, "shape": shape, "threads": torch.get_num_threads(), "devices": {}}
    for name in args.devices:
        device = torch.device(name)
        if device.type == "cuda" and not torch.cuda.is_available():
            print("no CUDA device: skipped")
            continue
        share = 1.0 if device.type == "cuda" else args.cpu_share
        prompts = max(1, round(args.prompts * share))
        row = {"name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
               "sampling": sampling_rate(shape, device, prompts, args.prefix, args.bytes, args.profile,
                                                  args.sdpa)}
        print(name, "sampling", json.dumps(row["sampling"]), flush=True)
        if args.smollm2:
            texts = max(1, round(args.texts * share)) if device.type == "cpu" else args.texts
            row["marginal"] = marginal_rate(args.smollm2, device, texts, args.positions)
            print(name, "marginal", json.dumps(row["marginal"]), flush=True)
        result["devices"][name] = row
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps(result["devices"], indent=1))


if __name__ == "__main__":
    main()
