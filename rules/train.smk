# Training stage: the bottlenecked family bn-<k>, its Mixture-of-Softmaxes members mos-<k>, and nanogpt ground
# truths gt-<name> (thesis ch. 3). The token track's heads are rules/tokens.smk's.


wildcard_constraints:
    model=pattern("bottleneck", "checkpoint", "mos", "svd", "ground_truth", "token_head", "token_reference"),


TRAINED = pattern("bottleneck", "mos", "ground_truth")  # svd-r<r> models are made by rule svd_model, not trained


rule train_model:
    input:
        unpack(lambda w: training_inputs(w.model)),
    output:
        best=model_path("{model}", "best.pt"),
        last=model_path("{model}", "last.pt"),
        train_log=model_path("{model}", "train_log.csv"),
        config=model_path("{model}", "config.json"),
    wildcard_constraints:
        model=TRAINED,
    params:
        **library_code("train_model"),
        settings=lambda w: training_params(w.model),
        out_dir=lambda w: model_path(w.model, ""),
    threads: lambda w: training_settings(config, w.model)["train"]["threads"]
    priority: lambda w: ground_truth_first(w.model, PRIORITY_TRAINING)
    resources:
        **job_resources("train"),
    log:
        log_path("train", "{model}"),
    benchmark:
        benchmark_path("train", "{model}")
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/train_model.py"


# A training longer than one job (train.iters_per_job): segment jobs up to each iteration of segment_ends, each
# handing its state on to the next (temp: deleted once the next job has it); train_model runs the last segment.
use rule train_model as train_segment with:
    input:
        unpack(lambda w: training_inputs(w.model, int(w.iteration))),
    output:
        state=temp(segment_path("{model}", "{iteration}")),
    wildcard_constraints:
        model=TRAINED,
        iteration=r"\d+",
    log:
        log_path("train", "{model}.to-{iteration}"),
    benchmark:
        benchmark_path("train", "{model}.to-{iteration}")


rule evaluate_model:
    input:
        unpack(evaluation_inputs),
    output:
        eval_path("{model}"),
    params:
        **library_code("evaluate_model"),
        evaluation=config["evaluation"],
        unspellable_bytes=config["eval"]["unspellable_bytes"],
        ground_truth=lambda w: loaded_ground_truth(w.model),
        truth_decoding=lambda w: truth_decoding_of(w.model),
        seed=config["seed"],
    threads: 1
    resources:
        **job_resources("inference"),
    log:
        log_path("eval", "{model}"),
    benchmark:
        benchmark_path("eval", "{model}")
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/evaluate_model.py"


rule checkpoint_model:
    input:
        trained=model_path("{model}", "config.json"),
    output:
        model_path("{model}@{iteration}", "best.pt"),
    wildcard_constraints:
        model=pattern("bottleneck"),
        iteration=r"\d+",
    params:
        **library_code("checkpoint_model"),
    resources:
        **job_resources("cpu"),
    log:
        log_path("train", "{model}@{iteration}"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/checkpoint_model.py"
