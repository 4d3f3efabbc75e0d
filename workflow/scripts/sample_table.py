"""Snakemake adapter: Tables 5.1, 5.2 and appendix G, one prompt's continuations per model and method (markdown)."""

import pandas as pd

from oversmooth.core.io import read_parquet
from oversmooth.core.job import workflow_job
from oversmooth.data.prompts import human_samples
from oversmooth.reporting.quality_report import samples_markdown, write_text

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    samples = pd.concat([read_parquet(p).to_pandas() for p in smk.input.samples], ignore_index=True)
    human = human_samples(read_parquet(smk.input.prompts).to_pandas(), smk.params.n_prompts)
    prompt = int(human["prompt_id"].iloc[0]) if smk.params.prompt is None else smk.params.prompt
    text = samples_markdown(samples, human, smk.params.shown, smk.params.methods, prompt, smk.params.title)
    write_text(text, smk.output[0])
