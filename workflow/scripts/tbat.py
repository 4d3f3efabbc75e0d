"""Snakemake adapter: TBAT of one bottlenecked model, or of one token-track head over its whole vocabulary, at
sampled positions, per decoding method (rule tbat); a byte model's BA-epsilon and BA-eta at the rows rule bat_decode
decoded. A bottlenecked model's job runs without torch."""

from oversmooth.analysis.bat.settings import TBATSettings
from oversmooth.analysis.decodedrows import read_decoded_rows
from oversmooth.analysis.decoding import decodings_from_config
from oversmooth.analysis.summary import summarise_file
from oversmooth.analysis.tbat import model_tbat
from oversmooth.core.catalog import is_token_model
from oversmooth.core.io import write_csv
from oversmooth.core.job import workflow_job
from oversmooth.extraction.logit_tables import sampled_logit_rows
from oversmooth.models.torchfile import read_output_matrix

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    settings, seed = smk.params.tbat, smk.params.seed
    if is_token_model(smk.wildcards.model):
        import torch  # a token-track head is a torch module (only these jobs import it)

        from oversmooth.analysis.tokenheads import sampled_state_rows
        from oversmooth.workflow.tokensource import rule_token_head

        head, W, _ = rule_token_head(smk)
        torch.set_num_threads(1)
        rows = sampled_state_rows(head, smk.input.states, settings["positions"], seed)
    else:
        W = read_output_matrix(smk.input.checkpoint)
        rows = sampled_logit_rows(smk.input.logits, settings["positions"], seed)
    tolerances = {k: settings[k] for k in ("zero_tol", "certificate_margin", "feasibility_tol", "rank_tol")}
    decoded = read_decoded_rows(smk.input.decoded) if "decoded" in smk.input.keys() else None  # BA's rows
    model_tbat(W, rows, smk.output.positions, decodings_from_config(smk.params.decoding),
               TBATSettings(threshold=settings["threshold"], **tolerances), workers=smk.threads, decoded=decoded)
    boot = smk.params.bootstrap
    summary = summarise_file(
        smk.output.positions, n_boot=boot["bootstrap"], confidence=boot["confidence"], seed=seed, metrics=["tbat"]
    )
    write_csv(summary.rename(columns={"n_infinite": "n_failed"}), smk.output.summary)
