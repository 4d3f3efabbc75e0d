"""Snakemake adapter: Figure 4.2, mean NSMD per target byte for the most and least bottlenecked models."""

from oversmooth.logs import log_to_file
from oversmooth.metrics_report import figure_4_2, per_byte_mean, read_position_metrics
from oversmooth.report import save_figure

smk = snakemake  # noqa: F821  (injected by Snakemake)

with log_to_file(smk.log[0]):
    frames = {model: read_position_metrics(path) for model, path in zip(smk.params.models, smk.input.metrics)}
    save_figure(figure_4_2(per_byte_mean(frames, "nsmd"), smk.params.ground_truth), smk.output.png, smk.output.pdf)
