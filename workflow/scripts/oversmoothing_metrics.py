"""Snakemake adapter: per-position oversmoothing metrics of one model against one ground truth, and their summary."""

import torch

from oversmooth.decoding import decodings_from_config
from oversmooth.logs import log_to_file
from oversmooth.metrics import position_metrics, summarise_file
from oversmooth.report import write_csv

smk = snakemake  # noqa: F821  (injected by Snakemake)

with log_to_file(smk.log[0]):
    torch.set_num_threads(smk.threads)
    settings = smk.params.metrics
    position_metrics(
        smk.input.model, smk.input.ground_truth, smk.output.positions,
        decodings_from_config(smk.params.decoding), settings["tau"], settings["kl_epsilon"],
    )
    summary = summarise_file(
        smk.output.positions, n_boot=settings["bootstrap"], confidence=settings["confidence"], seed=smk.params.seed
    )
    write_csv(summary, smk.output.summary)
