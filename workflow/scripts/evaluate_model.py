"""Snakemake adapter: held-out loss and accuracy of one model (rule evaluate_model)."""

import torch

from oversmooth.bytelm import GPTByteLM, load_hf_byte_lm
from oversmooth.evaluate import heldout_bytes, heldout_metrics
from oversmooth.io import write_json
from oversmooth.logs import log_to_file
from oversmooth.train import load_model

smk = snakemake  # noqa: F821  (injected by Snakemake)

with log_to_file(smk.log[0]):
    torch.set_num_threads(smk.threads)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    settings, gt, name = smk.params.evaluation, smk.params.ground_truth, smk.wildcards.model
    if gt is None:
        lm = GPTByteLM(name, load_model(smk.input.checkpoint, device))
    else:
        options = {k: gt[k] for k in ("byte_offset", "bos_id", "dtype", "trust_remote_code")}
        lm = load_hf_byte_lm(name, gt["path"], device=device, **options)
    data = heldout_bytes(smk.input.eval_docs, settings["pool_bytes"])
    result = heldout_metrics(
        lm, data, windows=settings["windows"], block=settings["block"], batch_size=settings["batch_size"], seed=smk.params.seed
    )
    write_json(smk.output[0], result)
