"""Snakemake adapter: TBAT of one bottlenecked model at sampled positions, per decoding method (rule tbat)."""

import torch

from oversmooth.decoding import decodings_from_config
from oversmooth.logs import log_to_file
from oversmooth.metrics import summarise_file
from oversmooth.report import write_csv
from oversmooth.tbat import TBATSettings, model_tbat
from oversmooth.train import load_model

smk = snakemake  # noqa: F821  (injected by Snakemake)

with log_to_file(smk.log[0]):
    torch.set_num_threads(1)
    settings = smk.params.tbat
    W = load_model(smk.input.checkpoint).output_matrix().detach().double().numpy()
    model_tbat(
        W, smk.input.logits, smk.output.positions, decodings_from_config(smk.params.decoding),
        TBATSettings(**{k: settings[k] for k in ("threshold", "zero_tol", "certificate_margin", "feasibility_tol", "rank_tol")}),
        positions=settings["positions"], seed=smk.params.seed, workers=smk.threads,
    )
    boot = smk.params.bootstrap
    summary = summarise_file(
        smk.output.positions, n_boot=boot["bootstrap"], confidence=boot["confidence"], seed=smk.params.seed, metrics=["tbat"]
    )
    write_csv(summary.rename(columns={"n_infinite": "n_failed"}), smk.output.summary)
