"""A token teacher's cost and the truth's search error: SmolLM2 (or any local token LM) writing documents by
sampling bytes from its next-byte marginal (`MarginalStepper`, as rule teacher_corpus does), then the same documents
read back by the logits path (`next_byte_outputs`), and their conditionals against a wider search:
    python benchmarks/token_teacher_speed.py --model results/data/smollm2 [--documents 8 --bytes 64 --wide-beam 8]
    python benchmarks/token_teacher_speed.py --model FOLDER --random   (a random model of the folder's config: the
                                                                        cost on a machine without the weights)
Prints bytes/s of the sampler and of the reading, the largest difference between the sampling conditionals and the
read ones (the truth's exactness), and the total variation between the beam's conditionals and the wider beam's on
the documents (how far the teacher's language is from the token LM's exact byte marginal: not part of the truth).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from oversmooth.generation.teacher import TeacherSpec, iter_documents
from oversmooth.models.tokenmarginal import MarginalSettings, MarginalStepper, TokenMarginalByteLM, load_token_byte_lm


def load(folder: str, settings: MarginalSettings, random: bool, dtype: str, device: str) -> TokenMarginalByteLM:
    if not random:
        return load_token_byte_lm("gt-teacher", folder, settings, dtype=dtype, device=device)
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(folder, local_files_only=True)
    config.quantization_config = None
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    return TokenMarginalByteLM("gt-teacher", model.to(device).eval(), tokenizer, settings)


def read_conditionals(lm: TokenMarginalByteLM, texts: list[bytes]) -> np.ndarray:
    """(documents, bytes - 1, 256) next-byte probabilities at every byte after the start byte, by the logits path."""
    x = torch.tensor([list(t) for t in texts])
    return lm.next_byte_outputs(x[:, :-1], outputs_from=[0] * len(texts)).logprobs.double().exp().numpy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="results/data/smollm2", help="a local transformers causal LM folder")
    parser.add_argument("--random", action="store_true", help="a random model of the folder's config and tokenizer")
    parser.add_argument("--documents", type=int, default=8)
    parser.add_argument("--bytes", type=int, default=64, help="document_bytes, the start byte included")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--beam", type=int, default=MarginalSettings.beam)
    parser.add_argument("--wide-beam", type=int, default=0, help="also read the documents with this beam (0: not)")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    settings = MarginalSettings(beam=args.beam, batch_size=args.batch_size)
    lm = load(args.model, settings, args.random, args.dtype, device)
    spec = TeacherSpec(args.documents, args.bytes, batch_size=args.batch_size)
    started = time.perf_counter()
    rows = list(iter_documents(MarginalStepper(lm), spec, lm.name, seed=0))
    sampling = time.perf_counter() - started
    texts = [r["text"] for r in rows]
    started = time.perf_counter()
    read = read_conditionals(lm, texts)
    reading = time.perf_counter() - started
    n = args.documents * (args.bytes - 1)
    logprob = np.log(np.take_along_axis(read, np.array([list(t[1:]) for t in texts])[..., None], -1)).sum((1, 2))
    print(f"{args.model}{' (random weights)' if args.random else ''}, {device}, {args.dtype}, beam {args.beam}, "
          f"{args.documents} documents of {args.bytes} bytes in batches of {args.batch_size}")
    print(f"sampling {n / sampling:,.1f} bytes/s; reading back {n / reading:,.1f} bytes/s")
    print(f"largest |log p(document)| difference, sampled vs read: "
          f"{np.abs(logprob - np.array([r['logprob'] for r in rows])).max():.2e} nats")
    print(f"entropy rate: {-np.array([r['logprob'] for r in rows]).sum() / n / np.log(2):.3f} bits per byte")
    if args.wide_beam:
        wide = load(args.model, MarginalSettings(beam=args.wide_beam, batch_size=args.batch_size), args.random,
                    args.dtype, device)
        tv = 0.5 * np.abs(read_conditionals(wide, texts) - read).sum(-1)
        print(f"beam {args.beam} vs {args.wide_beam} on the documents: total variation mean {tv.mean():.2e}, "
              f"95th percentile {np.quantile(tv, 0.95):.2e}, max {tv.max():.2e} over {tv.size} positions")


if __name__ == "__main__":
    main()
