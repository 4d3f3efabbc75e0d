"""Snakemake adapter: support recovery of one model against the truth with known support (rule support): per
position of a seeded sample, each decoding of the grid's false and lost support and whether the truth's support is a
threshold set of the model's distribution, and their summary. BA-epsilon and BA-eta are bound to the model's head W
(read from its checkpoint without torch)."""

from oversmooth.analysis.bat.sampler import bat_decodings
from oversmooth.analysis.bat.settings import solver_settings
from oversmooth.analysis.support import aligned_rows, grid_decodings, summarise_support, write_support
from oversmooth.core.io import read_parquet, write_csv
from oversmooth.core.job import workflow_job
from oversmooth.models.torchfile import read_output_matrix

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    settings, boot = smk.params.support, smk.params.bootstrap
    model, truth = aligned_rows(smk.input.model, smk.input.truth, settings["positions"], smk.params.seed)
    solver = solver_settings(settings["bat"])
    checkpoint = smk.input.get("checkpoint")
    decodings = bat_decodings(grid_decodings(settings["grid"]),
                              lambda: read_output_matrix(checkpoint) if checkpoint else None, solver,
                              model=smk.wildcards.model)
    write_support(model.prompt_id, model.position, model.logprobs, truth.logprobs, decodings, smk.output.positions)
    frame = read_parquet(smk.output.positions).to_pandas()
    summary = summarise_support(frame, n_boot=boot["bootstrap"], confidence=boot["confidence"], seed=smk.params.seed)
    write_csv(summary, smk.output.summary)
