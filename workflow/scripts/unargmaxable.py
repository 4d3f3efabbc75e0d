"""Snakemake adapter: unargmaxable byte classes of one bottleneck head, approximate and exact (rule unargmaxable)."""

from oversmooth.argmax import report_record, unargmaxable_classes
from oversmooth.io import write_json
from oversmooth.logs import log_to_file
from oversmooth.train import load_model

smk = snakemake  # noqa: F821  (injected by Snakemake)

with log_to_file(smk.log[0]):
    head = load_model(smk.input.checkpoint).head
    settings = smk.params.settings
    report = unargmaxable_classes(head, patience=settings["patience"], seed=smk.params.seed, tol=settings["tol"])
    write_json(smk.output[0], report_record(smk.wildcards.model, report, head.out.weight.shape[1]))
