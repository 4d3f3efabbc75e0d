"""Snakemake adapter: build the byte shards, eval pool and manifest (rule prepare_corpus)."""

from oversmooth.core.logs import log_to_file
from oversmooth.core.recovery import noting_lost_outputs
from oversmooth.data.corpus import CorpusPaths, build_corpus

smk = snakemake  # noqa: F821  (injected by Snakemake)

with log_to_file(smk.log[0]), noting_lost_outputs(smk.output):  # a failure names what it cost and the way back
    out = smk.output
    build_corpus(
        smk.params.sources,
        CorpusPaths(out.train, out.val, out.eval_docs, out.documents, out.manifest, out.digests),
        seed=smk.params.seed,
        val_fraction=smk.params.val_fraction,
        eval_fraction=smk.params.eval_fraction,
        separator=smk.params.separator,
        invalid_utf8=smk.params.invalid_utf8,
        on_shortfall=smk.params.on_shortfall,
    )
