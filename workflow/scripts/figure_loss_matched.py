"""Snakemake adapter: oversmoothing against validation loss along training, one line per bottleneck (rule
figure_loss_matched)."""

from oversmooth.core.job import workflow_job
from oversmooth.core.plotting import save_figure
from oversmooth.reporting.along_training import load_trajectory
from oversmooth.reporting.figures import figure_loss_matched

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    trajectory = load_trajectory(smk.params.models, smk.input.logs, smk.input.configs, smk.params.points,
                                 smk.params.pairs, smk.input.summaries, smk.input.tbat)
    save_figure(figure_loss_matched(trajectory), smk.output.png, smk.output.pdf)
