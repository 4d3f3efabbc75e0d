"""Snakemake adapter: seconds per position of every metric and TBAT for one model, ours and the reference (runs
without torch)."""

from oversmooth.analysis.bat.settings import TBATSettings
from oversmooth.analysis.timing import model_timings
from oversmooth.core.io import ParquetInput, write_csv
from oversmooth.core.job import workflow_job
from oversmooth.extraction.logit_tables import read_sampled_rows, sample_positions
from oversmooth.models.torchfile import read_output_matrix

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    settings = smk.params.timing
    rows = sample_positions(ParquetInput(smk.input.model).metadata.num_rows, settings["positions"], smk.params.seed)
    _, _, logp_bn = read_sampled_rows(smk.input.model, rows)
    _, _, logp_gt = read_sampled_rows(smk.input.ground_truth, rows)
    timings = model_timings(
        read_output_matrix(smk.input.checkpoint), logp_bn, logp_gt, tau=smk.params.tau, tbat=TBATSettings(**smk.params.tbat),
        reference_positions=settings["reference_positions"], tbat_reference_positions=settings["tbat_reference_positions"],
    )
    write_csv(timings, smk.output[0])
