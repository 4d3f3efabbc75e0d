"""Snakemake adapter: Figure 4.1 (every model) or 7.1 (the SVD-imposed heads), next-byte distributions at one position."""

from oversmooth.core.job import workflow_job
from oversmooth.core.plotting import save_figure
from oversmooth.reporting.figures import figure_4_1
from oversmooth.reporting.metrics_report import position_view

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    fig_settings, metric_settings = smk.params.figures, smk.params.metrics
    distributions, target, titles, text = position_view(
        smk.input.prompts,
        dict(zip(smk.params.models, smk.input.logits)),
        smk.params.ground_truths,
        fig_settings["prompt"],
        fig_settings["position"],
        metric_settings["tau"],
        metric_settings["kl_epsilon"],
    )
    label = smk.wildcards.figure.replace("figure_", "Figure ").replace("_", ".")
    figure = figure_4_1(distributions, target, titles, text, fig_settings["top_bytes"], label)
    save_figure(figure, smk.output.png, smk.output.pdf)
