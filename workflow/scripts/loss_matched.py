"""Snakemake adapter: oversmoothing along training, the family at matched validation loss (rule loss_matched)."""

from oversmooth.core.io import write_csv
from oversmooth.core.job import workflow_job
from oversmooth.reporting.along_training import load_trajectory, loss_matched_table

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    trajectory = load_trajectory(smk.params.models, smk.input.logs, smk.input.configs, smk.params.points,
                                 smk.params.pairs, smk.input.summaries, smk.input.tbat)
    write_csv(loss_matched_table(trajectory, smk.params.loss_levels), smk.output[0])
