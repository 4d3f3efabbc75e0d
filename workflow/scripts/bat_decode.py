"""Snakemake adapter: a byte model's BA-epsilon and BA-eta (rule bat_decode) at a seeded sample of its evaluation
positions (TBAT's choice of rows), each row's decoded log-probabilities for its metrics jobs. The head W is read from
the checkpoint without torch."""

from oversmooth.analysis.bat.sampler import bat_decodings
from oversmooth.analysis.bat.settings import TBATSettings
from oversmooth.analysis.decodedrows import write_decoded_rows
from oversmooth.analysis.decoding import decodings_from_config
from oversmooth.core.job import workflow_job
from oversmooth.extraction.logit_tables import sampled_logit_rows
from oversmooth.models.torchfile import read_output_matrix

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    rows = sampled_logit_rows(smk.input.logits, smk.params.positions, smk.params.seed)
    decodings = bat_decodings(decodings_from_config(smk.params.decoding), lambda: read_output_matrix(smk.input.checkpoint),
                              TBATSettings(**smk.params.bat), model=smk.wildcards.model)
    write_decoded_rows(rows, decodings, smk.output[0])
