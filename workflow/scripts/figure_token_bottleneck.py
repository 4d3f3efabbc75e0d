"""Snakemake adapter: the token track's BAT-rejected mass and unargmaxable share against the rank of its heads, the
full head last, from its Tables E.7, E.8 and B."""

import pandas as pd

from oversmooth.core.job import workflow_job
from oversmooth.core.plotting import save_figure
from oversmooth.reporting.argmax_report import token_bottleneck_points
from oversmooth.reporting.figures import figure_token_bottleneck

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    tables = {key: pd.read_csv(path) for key, path in smk.input.items()}
    points = token_bottleneck_points(tables["table_e_7_tokens"], tables.get("table_e_8_tokens"),
                                     tables.get("table_b_tokens"))
    save_figure(figure_token_bottleneck(points), smk.output.png, smk.output.pdf)
