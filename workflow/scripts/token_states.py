"""Snakemake adapter: cached head inputs of the token track's source LM, for the evaluation prompts or the start of
the training shard (rule token_states)."""

from pathlib import Path

from oversmooth.analysis.tokenheads import write_states
from oversmooth.analysis.tokenstates import prompt_states, shard_states
from oversmooth.core.io import read_parquet
from oversmooth.core.job import workflow_job
from oversmooth.data.corpus import read_shard
from oversmooth.workflow.tokensource import rule_token_source

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    model, tokenizer = rule_token_source(smk)
    settings = smk.params.settings
    if smk.wildcards.split == "eval":
        columns, states = prompt_states(model, tokenizer, read_parquet(smk.input.prompts))
    else:
        columns, states = shard_states(model, tokenizer, read_shard(smk.input.shard), settings["fit_tokens"],
                                       settings["block"], settings["batch_size"])
    write_states(Path(smk.output[0]), columns["prompt_id"], columns["position"], columns["target"], states)
