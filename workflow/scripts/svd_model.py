"""Snakemake adapter: an SVD-imposed bottleneck, the source model with its head truncated to rank r (rule svd_model)."""

import logging

from oversmooth.analysis.rank import svd_checkpoint
from oversmooth.core.catalog import svd_name
from oversmooth.core.io import write_json
from oversmooth.core.job import workflow_job

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    rank = smk.params.rank
    record = svd_checkpoint(smk.input.checkpoint, rank, smk.output.checkpoint, svd_name(rank))
    write_json(smk.output.record, record)
    logging.getLogger("oversmooth.analysis.rank").info(
        "%s: head of %s truncated to rank %d, %.4f of its energy kept", svd_name(rank), smk.params.source, rank,
        record["energy_kept"],
    )
