"""Snakemake adapter: Figure 4.3, relative frequency of every model's argmax bytes against the targets'."""

from oversmooth.logs import log_to_file
from oversmooth.metrics_report import argmax_counts, argmax_frequencies, figure_4_3
from oversmooth.report import save_figure

smk = snakemake  # noqa: F821  (injected by Snakemake)

with log_to_file(smk.log[0]):
    counts = {model: argmax_counts(path) for model, path in zip(smk.params.models, smk.input.logits)}
    targets = next(iter(counts.values()))[1]
    freqs = argmax_frequencies({model: argmax for model, (argmax, _) in counts.items()}, targets)
    save_figure(figure_4_3(freqs), smk.output.png, smk.output.pdf)
