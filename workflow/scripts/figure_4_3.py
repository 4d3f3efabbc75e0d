"""Snakemake adapter: Figure 4.3, relative frequency of every model's argmax bytes against the targets'."""

from oversmooth.core.job import workflow_job
from oversmooth.core.plotting import save_figure
from oversmooth.reporting.figures import figure_4_3
from oversmooth.reporting.metrics_report import argmax_counts

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    counts = {model: argmax_counts(path) for model, path in zip(smk.params.models, smk.input.logits)}
    targets = next(iter(counts.values()))[1]
    argmax = {model: counts for model, (counts, _) in counts.items()}
    save_figure(figure_4_3(argmax, targets), smk.output.png, smk.output.pdf)
