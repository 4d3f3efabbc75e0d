"""Snakemake adapter: Figure 4.2, mean NSMD per target byte for the most and least bottlenecked models, one panel
per ground truth."""

from oversmooth.core.job import workflow_job
from oversmooth.core.plotting import save_figure
from oversmooth.reporting.figures import figure_4_2
from oversmooth.reporting.metrics_report import per_byte_mean, read_position_metrics

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    paths = iter(smk.input.metrics)  # models within ground truths, the order of rule figure_4_2's input
    per_byte = {
        gt: per_byte_mean({model: read_position_metrics(next(paths)) for model in smk.params.models}, "nsmd")
        for gt in smk.params.ground_truths
    }
    save_figure(figure_4_2(per_byte), smk.output.png, smk.output.pdf)
