"""Snakemake adapter: train one model (rule train_model); torchrun + DDP when the job has several GPUs."""

import json
import subprocess
import sys
from pathlib import Path

from oversmooth.logs import log_to_file
from oversmooth.train import TrainSpec, train_model

smk = snakemake  # noqa: F821  (injected by Snakemake)

settings = smk.params.settings
spec = TrainSpec(
    name=smk.wildcards.model,
    model=settings["model"],
    train={**settings["train"], "threads": smk.threads},
    train_bin=smk.input.train,
    val_bin=smk.input.val,
    out_dir=str(Path(smk.output.best).parent),
    log_file=smk.log[0],
)
gpus = int(smk.resources.get("gpu", 0))
if gpus > 1:
    spec_file = Path(spec.out_dir) / "train_spec.json"
    spec_file.write_text(json.dumps(vars(spec), indent=2))
    command = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={gpus}", "-m", "oversmooth.train", str(spec_file)]
    sys.exit(subprocess.call(command))
with log_to_file(smk.log[0]):
    train_model(spec)
