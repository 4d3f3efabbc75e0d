"""Snakemake adapter: sample quality of one model's continuations, or of the human ones (rule quality)."""

from pathlib import Path

import torch

from oversmooth.core.allocator import keep_freed_memory
from oversmooth.core.io import atomic_path, read_parquet, write_csv
from oversmooth.core.job import workflow_job
from oversmooth.data.prompts import human_samples
from oversmooth.generation.decoded import decoded_truth
from oversmooth.generation.quality import model_quality
from oversmooth.generation.truth import continuation_bits
from oversmooth.models.bytelm import inference_device
from oversmooth.workflow.rules import load_byte_lm

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    keep_freed_memory()  # the perplexity model's activations, allocated and freed batch after batch
    torch.set_num_threads(smk.threads)
    settings = smk.params.quality
    prompts = read_parquet(smk.input.prompts).to_pandas()
    human = human_samples(prompts, smk.params.n_prompts)
    samples = read_parquet(smk.input.samples).to_pandas() if "samples" in smk.input.keys() else human
    lm_path = Path(smk.input.lm).parent if "lm" in smk.input.keys() else settings["perplexity_model"]
    truth_bits = None
    if smk.params.truth:  # a teacher's language: each sample scored by the truth, its document before it
        context = prompts.set_index("prompt_id")["context"]
        contexts = [context[p] + prefix for p, prefix in zip(samples["prompt_id"], samples["prefix"])]
        teacher = load_byte_lm(smk.params.truth, checkpoint=smk.input.get("truth_checkpoint"),
                               ground_truth=smk.params.truth_ground_truth, device=inference_device())
        truth = decoded_truth(teacher, smk.params.truth_decoding)  # the teacher under its source's decoding
        truth_bits = continuation_bits(truth, contexts, samples["continuation"].tolist(), settings["batch_size"])
    per_sample, summary = model_quality(
        samples, human, lm_path, repetition_n=settings["repetition_n"], mauve_seeds=settings["mauve_seeds"],
        mauve_bootstrap=settings["mauve_bootstrap"],
        n_boot=smk.params.bootstrap["bootstrap"], confidence=smk.params.bootstrap["confidence"],
        seed=smk.params.seed, batch_size=settings["batch_size"], truth_bits=truth_bits,
    )
    with atomic_path(smk.output.per_sample) as tmp:
        per_sample.to_parquet(tmp, index=False)
    write_csv(summary, smk.output.summary)
