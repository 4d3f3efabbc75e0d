"""Teacher sampling throughput: a teacher's documents with its key/value cache, batched, against the same documents
drawn one at a time and against re-reading the whole document for every byte, same model and random numbers:
    python benchmarks/teacher_speed.py [--checkpoint results/models/gt-teacher/best.pt] [--documents 64 --bytes 256]
Prints bytes/s of each, the ratios to the batched cached sampler, and whether the documents agree.
"""

from __future__ import annotations

import argparse

import torch

from oversmooth.analysis.timing import seconds
from oversmooth.generation.sampling import GPTStepper, UncachedStepper
from oversmooth.generation.teacher import TeacherSpec, iter_documents
from oversmooth.models.bytelm import GPTByteLM
from oversmooth.models.checkpoints import load_model
from oversmooth.models.model import GPT, GPTConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", help="a trained model (default: the demo teacher's shape, untrained)")
    parser.add_argument("--documents", type=int, default=64)
    parser.add_argument("--bytes", type=int, default=256, help="document_bytes, the start byte included")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--uncached-documents", type=int, default=8, help="documents the slow samplers draw")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = load_model(args.checkpoint) if args.checkpoint else GPT(GPTConfig(block_size=256, n_layer=4, n_head=4, n_embd=256)).eval()
    lm = GPTByteLM("gt-teacher", model)

    def run(stepper, documents, batch_size):
        spec = TeacherSpec(documents, args.bytes, batch_size=batch_size)
        return [row["text"] for row in iter_documents(stepper, spec, lm.name, seed=0)]

    run(GPTStepper(lm), 2, 2)  # warm-up
    out: dict[str, list[bytes]] = {}
    few = args.uncached_documents
    timings = {
        f"cached, batches of {args.batch_size}": (args.documents, seconds(lambda: out.setdefault("batched", run(GPTStepper(lm), args.documents, args.batch_size)))),
        "cached, one at a time": (few, seconds(lambda: out.setdefault("single", run(GPTStepper(lm), few, 1)))),
        f"no cache, batches of {min(few, args.batch_size)}": (few, seconds(lambda: out.setdefault("uncached", run(UncachedStepper(GPTStepper(lm)), few, args.batch_size)))),
    }
    print(f"model {model.config}, {args.bytes}-byte documents, threads {args.threads}")
    base = None
    for name, (documents, t) in timings.items():
        rate = documents * (args.bytes - 1) / t
        base = base or rate
        print(f"{name:<28} {rate:>10,.0f} bytes/s  ({base / rate:.1f}x slower than batched)")
    agree = out["batched"][:few] == out["single"] == out["uncached"]
    print(f"the first {few} documents identical across the three: {agree}")


if __name__ == "__main__":
    main()
