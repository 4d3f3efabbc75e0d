"""Snakemake adapter: a token-track model's samples, its direct sampling job's methods (rule sample_direct) joined
with those of its BAT-sampling jobs (rule sample_bat), in the order of the track's methods (rule join_samples)."""

from oversmooth.core.io import read_parquet, write_parquet
from oversmooth.core.job import workflow_job
from oversmooth.generation.sampletable import join_samples

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    parts = [read_parquet(path) for path in [*smk.input.direct, *smk.input.bat_samples]]
    write_parquet(join_samples(parts, smk.params.methods), smk.output[0])
