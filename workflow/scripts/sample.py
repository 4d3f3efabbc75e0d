"""Snakemake adapter: continuations of the sampling prompts by one model: a byte-level model from its checkpoint
with every decoding method (rule sample); a token-track model (a rank-k head or tok-full) on its frozen source with
the track's methods but BAT sampling's (rule sample_direct) or with one BAT-sampling method (rule sample_bat), parts
that rule join_samples joins."""

from oversmooth.analysis.bat.sampler import bat_decodings
from oversmooth.analysis.bat.settings import solver_settings
from oversmooth.analysis.tokenheads import load_head
from oversmooth.core.catalog import is_token_model
from oversmooth.core.io import read_parquet
from oversmooth.core.job import workflow_job
from oversmooth.generation.mirostat import sampling_decodings
from oversmooth.generation.samples import (
    byte_head_matrix,
    sample_model,
    sample_token_model,
    token_head_matrix,
)
from oversmooth.workflow.rules import rule_byte_lm
from oversmooth.workflow.tokensource import rule_token_source

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    settings, decodings = smk.params.sampling, sampling_decodings(smk.params.decoding)
    solver = solver_settings(smk.params.bat)
    prompts = read_parquet(smk.input.prompts)
    if is_token_model(smk.wildcards.model):
        model, tokenizer = rule_token_source(smk)
        head = load_head(smk.input.head)[0] if "head" in smk.input.keys() else model.get_output_embeddings()
        decodings = bat_decodings(decodings, lambda: token_head_matrix(head), solver, model=smk.wildcards.model)
        sample_token_model(
            model, tokenizer, head.to(next(model.parameters()).device), smk.wildcards.model, prompts, decodings,
            smk.output[0], continuation_tokens=settings["continuation_tokens"], batch_size=settings["batch_size"],
            seed=smk.params.seed,
        )
    else:
        lm = rule_byte_lm(smk)
        decodings = bat_decodings(decodings, lambda: byte_head_matrix(lm), solver, model=lm.name)
        sample_model(
            lm, prompts, decodings, smk.output[0], continuation_bytes=settings["continuation_bytes"],
            batch_size=settings["batch_size"], seed=smk.params.seed, n_prompts=settings["n_prompts"],
            document_context=smk.params.document_context,
        )
