"""Snakemake adapter: the token track's oversmoothing of every rank-k head against the full head, over k."""

from oversmooth.core.job import workflow_job
from oversmooth.core.plotting import save_figure
from oversmooth.reporting.figures import figure_token_heads
from oversmooth.reporting.metrics_report import load_summaries

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    summary = load_summaries(dict(zip(map(tuple, smk.params.pairs), smk.input.summaries)))
    save_figure(figure_token_heads(summary, smk.params.models), smk.output.png, smk.output.pdf)
