"""Snakemake adapter: oversmoothing along training, the loss-matched table and figure."""

import json

import pandas as pd

from oversmooth import along_training as at
from oversmooth import metrics_report as mr
from oversmooth.io import write_csv
from oversmooth.logs import log_to_file
from oversmooth.plotting import save_figure

smk = snakemake  # noqa: F821  (injected by Snakemake)

with log_to_file(smk.log[0]):
    models = smk.params.models
    logs = {m: pd.read_csv(path) for m, path in zip(models, smk.input.logs)}
    best = {m: json.loads(open(path).read())["best_iteration"] for m, path in zip(models, smk.input.configs)}
    points = at.training_points(logs, best, smk.params.points)
    summary = mr.load_summaries(dict(zip(map(tuple, smk.params.pairs), smk.input.summaries)))
    tbat = mr.load_tbat_summaries(dict(zip(smk.params.points, smk.input.tbat)))
    trajectory = at.trajectory(points, summary, tbat)
    write_csv(at.loss_matched_table(trajectory, smk.params.loss_levels), smk.output.table)
    save_figure(at.figure_loss_matched(trajectory), smk.output.png, smk.output.pdf)
