# Rank and expressivity (thesis ch. 7; Godey et al. 2024): SVD-imposed bottlenecks, effective ranks, the n-gram
# rank of the data. CPU rules.


rule svd_model:
    input:
        checkpoint=model_path(svd_source(config), "best.pt"),
    output:
        checkpoint=model_path("svd-r{rank}", "best.pt"),
        record=model_path("svd-r{rank}", "svd.json"),
    wildcard_constraints:
        rank=r"\d+",
    params:
        **library_code("svd_model"),
        source=svd_source(config),
        rank=lambda w: int(w.rank),
    resources:
        **job_resources("cpu", side_by_side=True),
    log:
        log_path("svd", "svd-r{rank}"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/svd_model.py"


rule effective_rank:
    input:
        hidden=logits_path("{model}", "hidden"),
        checkpoint=model_path("{model}", "best.pt"),
    output:
        rank_path("{model}", "effective_rank"),
    wildcard_constraints:
        model=pattern("bottleneck", "ground_truth"),
    params:
        **library_code("effective_rank"),
        rank={k: config["rank"][k] for k in ("positions", "threshold")},
    resources:
        **job_resources("cpu", side_by_side=True),
    log:
        log_path("rank", "{model}"),
    benchmark:
        benchmark_path("rank", "{model}")
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/effective_rank.py"


rule ngram_rank:
    input:
        **shard_inputs(shards={"train": "train"}),
    output:
        output_files("table_godey_ngram_rank"),
    params:
        **library_code("ngram_rank"),
        rank={k: config["rank"][k] for k in ("ngram_n", "ngram_contexts", "ngram_alpha", "threshold", "energy_shares")},
    resources:
        **job_resources("cpu", side_by_side=True),
    log:
        log_path("rank", "ngram_rank"),
    benchmark:
        benchmark_path("rank", "ngram_rank")
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/ngram_rank.py"


rule anisotropy:
    input:
        prompts=data_path("prompts.parquet"),
        checkpoint=model_path("{model}", "best.pt"),
    output:
        rank_path("{model}", "anisotropy"),
    wildcard_constraints:
        model=pattern("bottleneck", "mos", "ground_truth"),
    params:
        **library_code("anisotropy"),
        positions=config["rank"]["positions"],
        seed=config["seed"],
    resources:
        **job_resources("cpu", side_by_side=True),
    log:
        log_path("rank", "{model}.anisotropy"),
    benchmark:
        benchmark_path("rank", "{model}.anisotropy")
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/anisotropy.py"


rule rank_constrained_head:
    input:
        unpack(rank_constrained_inputs),
    output:
        output_files("table_godey_rank_constrained"),
    params:
        **library_code("rank_constrained_head"),
        ranks=config["svd"]["ranks"],
        scratch=scratch_ranks(),
        head={k: config["rank"][k] for k in ("head_iters", "head_batch_size", "head_learning_rate", "head_eval_windows")},
        seed=config["seed"],
    threads: config["resources"]["inference_threads"]
    resources:
        **job_resources("head"),
    log:
        log_path("rank", "rank_constrained_head"),
    benchmark:
        benchmark_path("rank", "rank_constrained_head")
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/rank_constrained_head.py"
