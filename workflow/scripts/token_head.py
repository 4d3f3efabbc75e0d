"""Snakemake adapter: one rank-k head of the token track, its source's W truncated by SVD or A B fitted on the
cached training states (rule token_head)."""

from oversmooth.analysis.tokenfit import build_head
from oversmooth.analysis.tokenheads import save_head
from oversmooth.core.logs import log_to_file
from oversmooth.workflow.tokensource import rule_token_source

smk = snakemake  # noqa: F821  (injected by Snakemake)

with log_to_file(smk.log[0]):
    model, _ = rule_token_source(smk)
    settings = smk.params.settings
    head, meta = build_head(model, settings, smk.input.get("states"))
    save_head(head, smk.output[0], meta)
