"""Snakemake adapter: Figure 5.1, byte frequencies of the models' pure samples against the human continuations."""

from oversmooth.core.io import read_parquet
from oversmooth.core.job import workflow_job
from oversmooth.core.plotting import save_figure
from oversmooth.data.prompts import human_samples
from oversmooth.reporting.figures import figure_5_1
from oversmooth.reporting.quality_report import sample_byte_frequencies

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    samples = {m: read_parquet(p).to_pandas() for m, p in zip(smk.params.models, smk.input.samples)}
    human = human_samples(read_parquet(smk.input.prompts).to_pandas(), smk.params.n_prompts)
    save_figure(figure_5_1(sample_byte_frequencies(samples, human)), smk.output.png, smk.output.pdf)
