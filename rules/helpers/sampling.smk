# The sampling stage's helpers (rules/sampling.smk): its input functions and the settings its rules pass on.
# Snakemake keeps functions and rules in separate files (snakemake --lint).


def sampling_decoding_for(model, methods=None):
    """The decoding settings a model is sampled with (or with `methods`): `byte_sampling_methods` (its metrics'
    methods, where its head is one softmax of a matrix `decoding.bat_methods`, and `decoding.sampler_methods`), or
    for the token track `token_direct_methods`; mirostat's tau per byte or per token (`sampler_decoding_settings`)."""
    token = is_token_model(model)
    if methods is None:
        methods = token_direct_methods() if token else byte_sampling_methods(config, model)
    return sampler_decoding_settings(config["decoding"], methods, token=token)


def byte_sampling_params():
    """What a byte model's samples depend on but code and BAT sampling's solver (rules sample and sample_with_bat):
    its sampling and decoding settings, the seed, a loaded ground truth's entry, a truth's decoding, and whether it
    samples in the truth's document context."""
    return {
        "sampling": lambda w: sampling_settings(w.model),
        "decoding": lambda w: sampling_decoding_for(w.model),
        "seed": config["seed"],
        "ground_truth": lambda w: loaded_ground_truth(w.model),
        "truth_decoding": lambda w: truth_decoding_of(w.model),
        "document_context": lambda w: scored_by_truth(w.model),  # then sampled in the truth's context
    }


def bat_sampled_byte_models():
    """The byte models sampled with a BAT method (the wildcard constraint of rule sample_with_bat). Where
    `decoding.bat_methods` is set, every bottlenecked run and the `nanogpt` ground truths but a teacher's truth (those
    `byte_bat_methods` gives BAT methods), else a pattern that no name matches."""
    if not config["decoding"].get("bat_methods"):
        return "(?!)"
    truths = [m for m in ground_truth_models(config) if byte_bat_methods(config, m)]
    return "|".join([pattern("bottleneck"), *map(re.escape, truths)])


def token_bat_sampling_methods():
    """BAT sampling's methods among the token track's: each a CPU job of its own per head (rule sample_bat), since
    its solver runs on the CPU (tok-full ~0.3 s a token) while a sample job would hold a GPU."""
    return [m for m in token_methods(config) if m in HEAD_METHODS]


def token_direct_methods():
    """The token track's other methods, sampled by one job per head (rule sample_direct)."""
    return [m for m in token_methods(config) if m not in HEAD_METHODS]


def join_inputs(wildcards):
    """A token-track model's sample parts: its direct methods' (none where the track samples BAT methods alone) and
    each BAT-sampling method's."""
    direct = [direct_samples_path(wildcards.model)] if token_direct_methods() else []
    return {"direct": direct,
            "bat_samples": [bat_samples_path(wildcards.model, method) for method in token_bat_sampling_methods()]}


def token_sample_inputs(wildcards):
    """What a token-track model's sampling reads: the token prompts, its source LM and a rank-k head's factors."""
    head = {} if wildcards.model == TOKEN_REFERENCE else {"head": token_head_path(wildcards.model)}
    return {"prompts": token_prompts_path(), "lm": token_source_input(), **head}


def bat_sampling_resources():
    """A token head's BAT-sampling job (`sample_bat`), a CPU job whose runtime follows its estimate (`make
    plan`'s, `bat_sampling_runtime`), at least `resources.runtime_min.cpu`."""
    floor = config["resources"]["runtime_min"]["cpu"]
    return job_resources("cpu") | {"runtime": lambda wildcards, attempt: bat_sampling_runtime(
        token_bat_sampling_seconds(config["tokens"]["sampling"], token_rank(wildcards.model)), floor, attempt)}


def sampling_settings(model):
    """What a model's samples depend on: `sampling`, or for the token track `tokens.sampling` and its source."""
    if is_token_model(model):  # not its methods: each job carries those it samples (`sampling_decoding_for`)
        return {**{k: v for k, v in config["tokens"]["sampling"].items() if k != "methods"},
                "source": config["tokens"]["source"]}
    return config["sampling"]


def scored_by_truth(model):
    """Whether a teacher's truth scores `model`'s samples (a byte model on a teacher's language): it scores each in
    its document, so the model samples after the document before the prompt too."""
    return truth_model() is not None and not is_token_model(model)


def truth_entry():
    """The truth's ground-truth entry as `load_byte_lm` reads it (a `token` model's `path` the folder of its input),
    or None: no truth, or one trained here (its checkpoint is the input)."""
    gt = loaded_ground_truth(truth_model()) if truth_model() else None
    if gt is not None and gt["kind"] == "token":
        return {**gt, "path": str(Path(lm_folder_input(gt["path"])).parent)}
    return gt


def quality_inputs(wildcards):
    inputs = {"prompts": prompts_of(wildcards.model)}
    if wildcards.model not in ("human", TOKEN_HUMAN):
        inputs["samples"] = samples_path(wildcards.model)
    if config["quality"]["perplexity_model"] == "smollm2":
        inputs["lm"] = smollm2_path()
    if truth_model() and not is_token_model(wildcards.model):  # the truth's checkpoint, or its model folder
        inputs |= {f"truth_{name}": path for name, path in checkpoint_input(truth_model()).items()}
    return inputs
