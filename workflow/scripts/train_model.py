"""Snakemake adapter: train one model (rule train_model), or one segment of a training longer than one job (rule
train_segment); torchrun + DDP when the job has several GPUs."""

import json
import subprocess
import sys
from pathlib import Path

from oversmooth.core.cluster import job_deadline
from oversmooth.core.logs import log_to_file
from oversmooth.models.train import TrainSpec, torchrun_command, train_model

smk = snakemake  # noqa: F821  (injected by Snakemake)

settings = smk.params.settings
segment = smk.rule == "train_segment"
gpus = int(smk.resources.get("gpu", 0))
with log_to_file(smk.log[0]):
    spec = TrainSpec(
        name=smk.wildcards.model,
        model=settings["model"],
        train={**settings["train"], "threads": smk.threads},
        train_bin=smk.input.train,
        val_bin=smk.input.val,
        out_dir=smk.params.out_dir,
        log_file=smk.log[0],
        until=int(smk.wildcards.iteration) if segment else None,
        state_out=smk.output.state if segment else None,
        resume_from=smk.input.get("previous"),
        stop_at=job_deadline(smk.config["resources"]["stop_margin_s"]),
    )
    if gpus <= 1:
        train_model(spec)
if gpus > 1:  # every process logs to the same file itself
    spec_file = Path(spec.out_dir) / "train_spec.json"
    spec_file.write_text(json.dumps(vars(spec), indent=2))
    sys.exit(subprocess.call(torchrun_command(gpus, spec_file)))
