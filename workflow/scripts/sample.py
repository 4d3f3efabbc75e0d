"""Snakemake adapter: continuations of the sampling prompts by one model with every decoding method (rule sample):
a byte-level model from its checkpoint, or a token-track model (a rank-k head or tok-full) on its frozen source."""

from oversmooth.analysis.decoding import decodings_from_config
from oversmooth.analysis.tokenheads import load_head
from oversmooth.core.catalog import is_token_model
from oversmooth.core.io import read_parquet
from oversmooth.core.job import workflow_job
from oversmooth.generation.sampling import sample_token_model, write_samples
from oversmooth.generation.steppers import stepper_of
from oversmooth.workflow.rules import rule_byte_lm
from oversmooth.workflow.tokensource import rule_token_source

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    settings, decodings = smk.params.sampling, decodings_from_config(smk.params.decoding)
    prompts = read_parquet(smk.input.prompts)
    if is_token_model(smk.wildcards.model):
        model, tokenizer = rule_token_source(smk)
        head = load_head(smk.input.head)[0] if "head" in smk.input.keys() else model.get_output_embeddings()
        sample_token_model(
            model, tokenizer, head.to(next(model.parameters()).device), smk.wildcards.model, prompts, decodings,
            smk.output[0], continuation_tokens=settings["continuation_tokens"], batch_size=settings["batch_size"],
            seed=smk.params.seed,
        )
    else:  # sampling.sample_model, with a truth written under a decoding sampled from the decoded truth
        lm, n = rule_byte_lm(smk), settings["n_prompts"]
        write_samples(
            stepper_of(lm), lm.name, prompts.column("prompt_id").to_pylist()[:n],
            [list(p) for p in prompts.column("sample_prefix").to_pylist()[:n]], decodings, smk.output[0],
            n_new=settings["continuation_bytes"], batch_size=settings["batch_size"], seed=smk.params.seed,
            to_bytes=bytes,
        )
