"""Snakemake adapter: the token track's sampling prompts, cut at whole tokens of its source's tokenizer (rule
token_prompts)."""

from pathlib import Path

from oversmooth.core.io import write_parquet
from oversmooth.core.job import workflow_job
from oversmooth.data.prompts import select_token_prompts
from oversmooth.models.causallm import load_tokenizer

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    settings = smk.params.sampling
    tokenizer = load_tokenizer(Path(smk.input.lm).parent, config_key="tokens.source")
    prompts = select_token_prompts(
        smk.input.eval_docs, tokenizer, n_prompts=settings["n_prompts"], prefix_tokens=settings["prefix_tokens"],
        continuation_tokens=settings["continuation_tokens"], bytes_per_token=settings["bytes_per_token"],
        seed=smk.params.seed,
    )
    write_parquet(prompts, smk.output[0])
