# The sampling stage's helpers (rules/sampling.smk): its input functions and the settings its rules pass on.
# Snakemake keeps functions and rules in separate files (snakemake --lint).


def sampling_decoding_for(model):
    """The decoding settings a model is sampled with: `byte_sampling_methods` (its metrics' methods, where its head
    is one softmax of a matrix `decoding.bat_methods`, and `decoding.sampler_methods`), or for the token track (which
    measures every method) `tokens.sampling.methods`; mirostat's tau per byte or per token
    (`sampler_decoding_settings`)."""
    token = is_token_model(model)
    methods = token_methods(config) if token else byte_sampling_methods(config, model)
    return sampler_decoding_settings(config["decoding"], methods, token=token)


def sample_inputs(wildcards):
    """A byte-level model's prompts and checkpoint; a token-track model's prompts, source LM and (for a rank-k head)
    its factors."""
    model = wildcards.model
    if not is_token_model(model):
        return logits_inputs(wildcards)
    head = {} if model == TOKEN_REFERENCE else {"head": token_head_path(model)}
    return {"prompts": token_prompts_path(), "lm": token_source_input(), **head}


def sampling_settings(model):
    """What a model's samples depend on: `sampling`, or for the token track `tokens.sampling` and its source."""
    if is_token_model(model):
        return {**config["tokens"]["sampling"], "source": config["tokens"]["source"]}
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
