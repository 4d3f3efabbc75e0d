"""Snakemake adapter: per-position oversmoothing metrics of one model against one ground truth (two logits files),
or of a token-track head against its source's full head (cached states), and their summary; a byte model's BA
methods at the positions of its decoded rows (rule bat_decode). Only a token-track
head's job imports torch (to run the head)."""

from oversmooth.analysis.decodedrows import read_decoded_rows
from oversmooth.analysis.decoding import decodings_from_config
from oversmooth.analysis.metrics import METRICS, logits_file_chunks, write_position_metrics
from oversmooth.analysis.summary import summarise_file
from oversmooth.core.allocator import keep_freed_memory
from oversmooth.core.io import write_csv
from oversmooth.core.job import workflow_job

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    keep_freed_memory()  # allocates and frees large arrays at every step (oversmooth.core.allocator)
    settings = smk.params.metrics
    if "head" in smk.input.keys():
        import torch

        from oversmooth.analysis.tokenheads import load_head, output_weight, read_states
        from oversmooth.analysis.tokenmetrics import head_logprob_chunks
        from oversmooth.workflow.tokensource import rule_token_source

        torch.set_num_threads(smk.threads)
        head, _ = load_head(smk.input.head)
        weight = output_weight(rule_token_source(smk)[0])
        chunks = head_logprob_chunks(head, weight, *read_states(smk.input.states), smk.params.chunk)
    else:
        chunks = logits_file_chunks(smk.input.model, smk.input.ground_truth)
    decoded = read_decoded_rows(smk.input.decoded) if "decoded" in smk.input.keys() else None  # BA's sampled rows
    write_position_metrics(
        chunks, smk.output.positions, decodings_from_config(smk.params.decoding), settings["tau"], settings["kl_epsilon"],
        decoded,
    )
    summary = summarise_file(
        smk.output.positions, n_boot=settings["bootstrap"], confidence=settings["confidence"], seed=smk.params.seed,
        metrics=METRICS,
    )
    write_csv(summary, smk.output.summary)
