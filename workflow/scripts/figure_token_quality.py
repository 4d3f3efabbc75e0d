"""Snakemake adapter: the token track's sample quality against the rank of its heads, per decoding method."""

import pandas as pd

from oversmooth.core.job import workflow_job
from oversmooth.core.plotting import save_figure
from oversmooth.reporting.figures import figure_token_quality

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    summary = pd.concat([pd.read_csv(p) for p in smk.input.summaries], ignore_index=True)
    save_figure(figure_token_quality(summary, pd.read_csv(smk.input.human)), smk.output.png, smk.output.pdf)
