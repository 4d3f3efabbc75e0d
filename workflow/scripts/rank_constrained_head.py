"""Snakemake adapter: learned rank-r heads on the frozen source model against the SVD-imposed and from-scratch
heads (Godey et al. 2024; rule rank_constrained_head). Its figure is drawn by rule figure_godey_rank_loss."""

import pandas as pd
import torch

from oversmooth.analysis.headfit import HeadFitSettings, rank_loss_table
from oversmooth.core.io import write_csv
from oversmooth.core.job import workflow_job
from oversmooth.data.corpus import read_shard

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    torch.set_num_threads(smk.threads)
    head = smk.params.head
    settings = HeadFitSettings(iters=head["head_iters"], batch_size=head["head_batch_size"],
                               learning_rate=head["head_learning_rate"], eval_windows=head["head_eval_windows"],
                               seed=smk.params.seed)
    rows = rank_loss_table(
        smk.input.source,
        read_shard(smk.input.train),
        read_shard(smk.input.val),
        smk.params.ranks,
        dict(zip(smk.params.scratch, smk.input.scratch)),
        settings,
    )
    write_csv(pd.DataFrame(rows), smk.output[0])
