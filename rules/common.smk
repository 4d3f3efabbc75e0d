# Helpers shared by the rules: output locations and the list of final targets.

from oversmooth.catalog import (
    all_models,
    bottleneck_models,
    checkpoint_models,
    extreme_bottlenecks,
    family_models,
    ground_truth,
    ground_truth_models,
    is_token_model,
    linear_head_models,
    main_bottleneck_models,
    sampled_models,
    segment_ends,
    svd_models,
    svd_source,
    token_head_models,
    token_head_parts,
    token_methods,
    token_sampled_models,
    TOKEN_HUMAN,
    TOKEN_REFERENCE,
    trained_models,
    training_settings,
    without_seed_runs,
)
from oversmooth.cluster import SCHEDULING_KEYS
from oversmooth.cluster import job_resources as cluster_job_resources
from oversmooth.data import reads_the_hub, source_files
from oversmooth.provenance import library_params
from oversmooth.metrics_report import e_table_names, tbat_table_names
from oversmooth.quality_report import QUALITY_TABLES, SAMPLE_TABLES, SAMPLE_TITLES, nearest_models

RESULTS = "results"
BOTTLENECK_RUN = r"bn-\d+(?:-s\d+)?"  # a bottlenecked model (under the master seed or another)
BOTTLENECKED = rf"{BOTTLENECK_RUN}(?:@\d+)?"  # ... or one of its checkpoints
TOKEN_HEAD = r"tok-(?:svd|learned)-r\d+"  # a rank-k head of the token track
TOKEN_TABLE_SUFFIX = "_tokens"  # the token track's tables: the byte track's names with the track in the name

# Report categories (`snakemake --report`); captions live in workflow/report/.
REPORT_MODELS = "Models (ch. 3)"
REPORT_OVERSMOOTHING = "Oversmoothing (ch. 4, 6; app. E, F)"
REPORT_EXACT = "Exact analyses (app. B, I)"
REPORT_QUALITY = "Samples and quality (ch. 5, 6)"
REPORT_RANK = "Rank and expressivity (ch. 7; app. H; Godey et al. 2024)"


def library_code(script):
    """The params that tie a rule to the library code its script workflow/scripts/<script>.py runs, one per
    module (`code_<module>`), so that editing that code in src/oversmooth/ reruns the rule and the rerun's reason
    names the module (comments and docstrings do not count). Use as `**library_code("<script>")`."""
    return library_params(ROOT / "workflow" / "scripts" / f"{script}.py")


# Scheduling order (`priority:`): the jobs every metric waits on first. The ground truths are the longest trainings
# and logit extractions, and the metrics of every model against them cannot start before they end; the prompts
# (seconds) unblock every logit extraction and sample. Order only: no result depends on it.
PRIORITY_PROMPTS, PRIORITY_GROUND_TRUTH, PRIORITY_TRAINING = 100, 90, 50


def ground_truth_first(model, other=0):
    """The priority of a job of `model` where ground truths and other models share one rule (the ground truths'
    jobs go first)."""
    return PRIORITY_GROUND_TRUTH if model in ground_truth_models(config) else other


def settings_without_threads(settings):
    """A config section without the keys that only shape a job (`threads`, `iters_per_job`): how many CPU threads
    a job gets, or how many jobs a training takes, does not change its result."""
    return {k: v for k, v in settings.items() if k not in SCHEDULING_KEYS}


def training_params(model):
    """`params.settings` of a training job: its model and train settings, less those that decide only how it runs
    (threads, iterations per job)."""
    settings = training_settings(config, model)
    return {**settings, "train": settings_without_threads(settings["train"])}


def segment_path(model, iteration):
    """The state a segment of `model`'s training hands on at `iteration`."""
    return model_path(model, f"segments/{iteration}.pt")


def training_inputs(model, until=None):
    """A training job's inputs: the shards, and the state of the segment before it (none for the first job).
    `until`: the end of a segment job; None for the job that finishes the training."""
    ends = segment_ends(training_settings(config, model)["train"])
    before = [end for end in ends if until is None or end < until]
    if until is not None and until not in ends:
        raise ValueError(f"{model}: no training segment ends at iteration {until} (ends: {ends})")
    inputs = {"train": data_path("train.bin"), "val": data_path("val.bin")}
    return {**inputs, "previous": segment_path(model, before[-1])} if before else inputs


def data_path(name):
    """A file of the data stage."""
    return f"{RESULTS}/data/{name}"


def model_path(model, name):
    """A file of one model's folder."""
    return f"{RESULTS}/models/{model}/{name}"


def result_path(stage, name):
    """A file of one stage's folder under results/: `results/<stage>/<name>`."""
    return f"{RESULTS}/{stage}/{name}"


def eval_path(model):
    return result_path("eval", f"{model}.json")


def samples_path(model):
    return result_path("samples", f"{model}.parquet")


def quality_path(model, kind="per_sample"):
    """Per-sample quality of a model (or `human`), or its `.summary.csv`."""
    return result_path("quality", f"{model}.parquet" if kind == "per_sample" else f"{model}.summary.csv")


def unargmaxable_path(model):
    return result_path("unargmaxable", f"{model}.json")


def unargmaxable_inputs(wildcards):
    """A bottleneck's checkpoint, or a token-track head's factors."""
    if is_token_model(wildcards.model):
        return {"head": token_head_path(wildcards.model)}
    return {"checkpoint": model_path(wildcards.model, "best.pt")}


def token_heads_at(ranks_key):
    """The token-track heads at the ranks `tokens.<ranks_key>` (those an exact analysis runs on)."""
    wanted = set(config["tokens"][ranks_key])
    return [m for m in token_head_models(config) if token_head_parts(m)[1] in wanted]


def unargmaxable_token_heads():
    """The token-track heads whose unargmaxable tokens are analysed (`tokens.unargmaxable_ranks`)."""
    return token_heads_at("unargmaxable_ranks")


def unargmaxable_tables():
    """Table B, and with analysed token-track heads its token version."""
    return ["table_b", *token_tables(["table_b"])] if unargmaxable_token_heads() else ["table_b"]


def unargmaxable_table_inputs(wildcards):
    """Table B reads the bottlenecks' records; its token version the analysed heads', the training states (token
    frequencies) and the source (its tokenizer)."""
    if wildcards.unargmaxable_table == "table_b":
        return {"records": [unargmaxable_path(m) for m in bottleneck_models(config)]}
    return {"records": [unargmaxable_path(m) for m in unargmaxable_token_heads()], "states": token_states_path("train"),
            "lm": token_source_input()}


def timing_path(model):
    return result_path("timing", f"{model}.csv")


def rank_path(model, analysis):
    """A rank analysis of one model: `effective_rank` or `anisotropy`."""
    return result_path("rank", f"{model}.{analysis}.csv")


def table_path(name):
    return f"{RESULTS}/tables/{name}.csv"


def figure_path(name, ext):
    return f"{RESULTS}/figures/{name}.{ext}"


def loaded_ground_truth(model):
    """The config entry of a ground truth that is loaded (`hf` or `token`), None for models trained here."""
    if model.startswith("gt-"):
        gt = ground_truth(config, model)
        if gt["kind"] in ("hf", "token"):
            return gt
    return None


def token_model_input(gt):
    """The file that stands for a `token` ground truth's model folder: the converted SmolLM2, or the folder's
    config.json (a missing folder is then a missing input, named by Snakemake)."""
    return perplexity_model_path() if gt["path"] == "smollm2" else f"{gt['path']}/config.json"


def checkpoint_input(model):
    """The checkpoint of a model trained here; the model folder of a `token` ground truth; nothing for `hf`."""
    gt = loaded_ground_truth(model)
    if gt is None:
        return {"checkpoint": model_path(model, "best.pt")}
    return {"lm": token_model_input(gt)} if gt["kind"] == "token" else {}


def evaluation_inputs(wildcards):
    """The evaluation pool, and the checkpoint of a model trained here."""
    return {"eval_docs": data_path("eval_docs.parquet"), **checkpoint_input(wildcards.model)}


def logits_inputs(wildcards):
    """The evaluation prompts, and the checkpoint of a model trained here."""
    return {"prompts": data_path("prompts.parquet"), **checkpoint_input(wildcards.model)}


def logits_path(model, kind="logits"):
    """`results/logits/<model>.parquet`, or its `.hidden.parquet` companion."""
    suffix = "" if kind == "logits" else f".{kind}"
    return f"{RESULTS}/logits/{model}{suffix}.parquet"


def metrics_path(model, gt, kind="positions"):
    """Per-position metrics of a model against a ground truth, or their `.summary.csv`."""
    base = f"{RESULTS}/metrics/{model}__{gt}"
    return base + (".parquet" if kind == "positions" else ".summary.csv")


def references_of(model):
    """What a model is measured against: the ground truths, or for a token-track head its source's full head."""
    return [TOKEN_REFERENCE] if is_token_model(model) else ground_truth_models(config)


def metric_pairs(models=None):
    """Every (model, reference) pair the metrics compare: the family (with its MoS members), or `models`."""
    models = family_models(config) if models is None else models
    return [(m, gt) for m in models for gt in references_of(m)]


def metrics_inputs(wildcards):
    """Two logits files; for a token-track head, the cached evaluation states, its factors and the source LM."""
    if not is_token_model(wildcards.model):
        return {"model": logits_path(wildcards.model), "ground_truth": logits_path(wildcards.gt)}
    if wildcards.gt != TOKEN_REFERENCE:
        raise ValueError(f"{wildcards.model} is a token-track head: it is measured against {TOKEN_REFERENCE} only")
    return {"states": token_states_path("eval"), "head": token_head_path(wildcards.model), "lm": token_source_input()}


def token_source_input():
    """The file that stands for the token track's source model folder (`tokens.source`)."""
    source = config["tokens"]["source"]
    return perplexity_model_path() if source == "smollm2" else f"{source}/config.json"


def token_states_path(split):
    """Cached head inputs of the token track's source: `train` (fitting the learned heads) or `eval` (the prompts)."""
    return result_path("tokens", f"{split}.states.parquet")


def token_head_path(model):
    return model_path(model, "head.pt")


def token_states_inputs(wildcards):
    text = {"shard": data_path("train.bin")} if wildcards.split == "train" else {"prompts": data_path("prompts.parquet")}
    return {"lm": token_source_input(), **text}


def token_states_settings(wildcards):
    """What a states file depends on: the source, and for the training states how many tokens in which blocks."""
    tokens = config["tokens"]
    settings = {"source": tokens["source"]}
    if wildcards.split == "train":
        settings.update({k: tokens[k] for k in ("fit_tokens", "block", "batch_size")})
    return settings


def token_head_settings(wildcards):
    """What a head depends on: its kind and rank, the source, and for a learned head its fit and the seed."""
    kind, rank = token_head_parts(wildcards.model)
    tokens = config["tokens"]
    settings = {"kind": kind, "rank": rank, "source": tokens["source"]}
    if kind == "learned":
        settings.update({k: tokens[k] for k in ("fit_iters", "fit_batch_size", "learning_rate")}, seed=config["seed"])
    return settings


def token_head_inputs(wildcards):
    states = {"states": token_states_path("train")} if token_head_parts(wildcards.model)[0] == "learned" else {}
    return {"lm": token_source_input(), **states}


SVD_TABLES = ("table_7_1", "table_7_2")


def decoding_for(model):
    """The decoding settings a model is sampled and measured with: every method in `decoding.methods`, or for an
    SVD-imposed head only `svd.decoding` (thesis Tables 7.1, 7.2 and H.1 use pure sampling)."""
    if model.startswith("svd-r"):
        return {**config["decoding"], "methods": config["svd"]["decoding"]}
    return config["decoding"]


def sampling_decoding_for(model):
    """The decoding settings a model is sampled with: `decoding_for`, or for the token track (which measures every
    method) `tokens.sampling.methods`."""
    if is_token_model(model):
        return {**config["decoding"], "methods": token_methods(config)}
    return decoding_for(model)


def e_tables():
    """Appendix E tables: name -> (ground truth, decoding methods)."""
    return e_table_names(ground_truth_models(config), config["decoding"]["methods"])


def tbat_tables():
    """Appendix E's TBAT tables: name -> decoding methods."""
    return tbat_table_names(config["decoding"]["methods"])


def tbat_path(model, kind="positions"):
    return f"{RESULTS}/tbat/{model}" + (".parquet" if kind == "positions" else ".summary.csv")


def tbat_inputs(wildcards):
    """A bottleneck's logits and checkpoint, or a token-track head's evaluation states and factors."""
    if is_token_model(wildcards.model):
        return {"states": token_states_path("eval"), "head": token_head_path(wildcards.model)}
    return {"logits": logits_path(wildcards.model), "checkpoint": model_path(wildcards.model, "best.pt")}


def tbat_settings(wildcards):
    """`tbat` without its threads; a token-track head's positions are `tokens.tbat_positions`."""
    settings = settings_without_threads(config["tbat"])
    if is_token_model(wildcards.model):
        settings["positions"] = config["tokens"]["tbat_positions"]
    return settings


def tbat_models(table):
    """The models of a TBAT table (Table 4.1's columns, E.7, E.8): the bottlenecks, or for the token track's
    versions its heads at `tokens.tbat_ranks`."""
    return token_heads_at("tbat_ranks") if table.endswith(TOKEN_TABLE_SUFFIX) else bottleneck_models(config)


def token_tbat_tables():
    """The token track's E.7 and E.8 (none without heads at `tokens.tbat_ranks`)."""
    return token_tables(tbat_tables()) if token_heads_at("tbat_ranks") else []


TOKEN_METRICS_TABLES = ("table_4_1", "table_4_2", "table_6_1", "table_f_1")


def token_tables(names):
    """The token track's versions of the tables `names` (none without token-track heads)."""
    return [name + TOKEN_TABLE_SUFFIX for name in names] if token_head_models(config) else []


def metrics_tables():
    svd = list(SVD_TABLES) if svd_models(config) else []
    tokens = [*token_tables(TOKEN_METRICS_TABLES), *token_tbat_tables()]
    return ["table_4_1", "table_4_2", "table_6_1", *e_tables(), *tbat_tables(), "table_f_1", *svd, *tokens]


def metrics_table_models(wildcards):
    """The rows of a metrics table: the TBAT tables E.7 and E.8 take `tbat_models` (TBAT assumes one linear head),
    the SVD-imposed heads Tables 7.1 and 7.2, the token track's heads its other tables, the rest the family with
    its MoS members."""
    if wildcards.table.removesuffix(TOKEN_TABLE_SUFFIX) in tbat_tables():
        return tbat_models(wildcards.table)
    if wildcards.table.endswith(TOKEN_TABLE_SUFFIX):
        return token_head_models(config)
    return svd_models(config) if wildcards.table in SVD_TABLES else family_models(config)


def metrics_table_inputs(wildcards):
    """Every table reads the metric summaries it pivots; Table 4.1 and E.7/E.8 (and their token versions) read
    TBAT's, where there are any."""
    inputs = {}
    base = wildcards.table.removesuffix(TOKEN_TABLE_SUFFIX)
    if base not in tbat_tables():
        pairs = metric_pairs(metrics_table_models(wildcards))
        inputs["summaries"] = [metrics_path(m, gt, "summary") for m, gt in pairs]
    if (base == "table_4_1" or base in tbat_tables()) and tbat_models(wildcards.table):
        inputs["tbat"] = [tbat_path(m, "summary") for m in tbat_models(wildcards.table)]
    return inputs


def reported(path, caption, category):
    """`path` flagged for `snakemake --report`, captioned by workflow/report/<caption>.rst (Jinja on the job)."""
    return report(path, caption=f"../workflow/report/{caption}.rst", category=category)


def quality_tables():
    """Quality table name -> decoding methods (those of `decoding.methods`): Tables 5.3, 6.2, 6.3, with SVD models
    H.1, and with a token track its versions of 5.3, 6.2 and 6.3 (methods of `tokens.sampling.methods`; a table
    left without methods is left out)."""
    tables = with_token_versions(QUALITY_TABLES)
    if svd_models(config):
        tables["table_h_1"] = list(config["svd"]["decoding"])
    return tables


def with_token_versions(tables):
    """Table name -> its decoding methods of `decoding.methods`; with a token track, also each table's version
    `<name>_tokens` with its methods of `tokens.sampling.methods`, left out when none is."""
    out = {name: [m for m in methods if m in config["decoding"]["methods"]] for name, methods in tables.items()}
    if token_head_models(config):
        for name, methods in tables.items():
            chosen = [m for m in methods if m in token_methods(config)]
            if chosen:
                out[name + TOKEN_TABLE_SUFFIX] = chosen
    return out


def quality_table_models(wildcards):
    """The rows of a quality table (before Human): the SVD-imposed heads for Table H.1, the token track's heads and
    full head for its tables, else every sampled model."""
    if wildcards.quality_table.endswith(TOKEN_TABLE_SUFFIX):
        return token_sampled_models(config)
    return svd_models(config) if wildcards.quality_table == "table_h_1" else sampled_models(config)


def human_of(table):
    """The Human row of a quality or sample table: the token track's human continuations for its tables."""
    return TOKEN_HUMAN if table.endswith(TOKEN_TABLE_SUFFIX) else "human"


def sample_tables():
    """Sample table name -> decoding methods: Tables 5.1, 5.2, appendix G, and the token track's versions."""
    return with_token_versions(SAMPLE_TABLES)


def sample_table_models(wildcards):
    """Every sampled model of the table's track (the inputs of a sample table)."""
    return token_sampled_models(config) if wildcards.sample_table.endswith(TOKEN_TABLE_SUFFIX) else sampled_models(config)


def sample_table_shown(wildcards):
    """The models a sample table shows: every one in appendix G; in Tables 5.1 and 5.2 the bottlenecks nearest
    k = 4, 8, 32, or for the token track each kind of head at its lowest and highest rank, then the full head."""
    models = sample_table_models(wildcards)
    if wildcards.sample_table.startswith("samples_appendix_g"):
        return models
    if wildcards.sample_table.endswith(TOKEN_TABLE_SUFFIX):
        heads = token_head_models(config)
        ranks = sorted(config["tokens"]["ranks"])
        ends = {token_head_parts(m)[1] for m in heads} & {ranks[0], ranks[-1]}
        return [m for m in heads if token_head_parts(m)[1] in ends] + [TOKEN_REFERENCE]
    return nearest_models(main_bottleneck_models(config))


def sample_table_title(name):
    """The heading of a sample table, with the track for the token track's."""
    base = name.removesuffix(TOKEN_TABLE_SUFFIX)
    title = SAMPLE_TITLES[base]
    return title if base == name else f"{title}, token track ({config['tokens']['source']} with rank-k heads)"


def token_prompts_path():
    """The token track's sampling prompts (whole tokens of its source's tokenizer)."""
    return result_path("tokens", "prompts.parquet")


def prompts_of(model):
    """The prompts a model is sampled from and scored against: the token track's for its models."""
    return token_prompts_path() if is_token_model(model) else data_path("prompts.parquet")


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


def position_figure_models(wildcards):
    """The panels of Figure 4.1 (every model, seed runs aside) or 7.1 (the SVD-imposed heads), then the ground
    truths."""
    if wildcards.figure == "figure_7_1":
        return [*svd_models(config), *ground_truth_models(config)]
    return without_seed_runs(all_models(config))


def figure_outputs(name, category):
    """A figure's PNG (in the report, captioned by workflow/report/<name>.rst) and PDF."""
    return {"png": reported(figure_path(name, "png"), name, category), "pdf": figure_path(name, "pdf")}


def log_path(stage, name):
    return f"{RESULTS}/logs/{stage}/{name}.log"


def benchmark_path(stage, name):
    return f"{RESULTS}/benchmarks/{stage}/{name}.tsv"


def local_source_files(wildcards=None):
    """Local files read by `files` sources (folders expanded), so that editing one of them reruns the data stage."""
    return [path for source in config["data"]["sources"] if source["kind"] == "files" for path in source_files(source)]


def scratch_ranks():
    """The SVD ranks at which a bottleneck was also trained from scratch (`bn-<r>` in the family)."""
    return [k for k in config["svd"]["ranks"] if k in config["bottlenecks"]]


def rank_constrained_inputs(wildcards):
    """The source model, the shards, and each bottleneck trained from scratch at one of the SVD ranks."""
    return {
        "source": model_path(svd_source(config), "best.pt"),
        "train": data_path("train.bin"),
        "val": data_path("val.bin"),
        "scratch": [model_path(f"bn-{k}", "best.pt") for k in scratch_ranks()],
    }


def training_points_models():
    """The points of the analysis along training: every checkpoint of the family (master seed), then its best
    weights."""
    return checkpoint_models(config) + main_bottleneck_models(config)


def loss_matched_inputs(wildcards):
    """Each bottleneck's training log and summary (best iteration), and each point's metrics and TBAT summaries."""
    points = training_points_models()
    return {
        "logs": [model_path(m, "train_log.csv") for m in main_bottleneck_models(config)],
        "configs": [model_path(m, "config.json") for m in main_bottleneck_models(config)],
        "summaries": [metrics_path(m, gt, "summary") for m, gt in metric_pairs(points)],
        "tbat": [tbat_path(m, "summary") for m in points],
    }


def perplexity_model_path():
    """The packaged SmolLM2, converted once to a `transformers` folder (rule perplexity_model)."""
    return result_path("quality", "smollm2/config.json")


def quality_inputs(wildcards):
    inputs = {"prompts": prompts_of(wildcards.model)}
    if wildcards.model not in ("human", TOKEN_HUMAN):
        inputs["samples"] = samples_path(wildcards.model)
    if config["quality"]["perplexity_model"] == "smollm2":
        inputs["lm"] = perplexity_model_path()
    return inputs


def all_targets():
    """Everything the target `all` builds: each stage adds its final outputs here."""
    figures = ["figure_3_1", "figure_4_1", "figure_4_2", "figure_4_3", "figure_5_1"]
    figures += ["figure_godey_anisotropy", "figure_godey_singular_entropy"]
    if svd_models(config):
        figures += ["figure_7_1", "figure_godey_rank_loss"]
    if checkpoint_models(config):
        figures += ["figure_loss_matched"]
    if token_head_models(config):
        figures += ["figure_token_heads", "figure_token_quality"]
    return [
        data_path("manifest.json"),
        data_path("prompts.parquet"),
        table_path("table_3_1"),
        *(table_path(name) for name in metrics_tables()),
        *(table_path(name) for name in unargmaxable_tables()),
        table_path("table_i_1"),
        *(table_path(name) for name in quality_tables()),
        table_path("table_7_3"),
        table_path("table_godey_ngram_rank"),
        table_path("table_godey_anisotropy"),
        *([table_path("table_godey_rank_constrained")] if svd_models(config) else []),
        *(f"{RESULTS}/tables/{name}.md" for name in sample_tables()),
        *([table_path("table_loss_matched")] if checkpoint_models(config) else []),
        *(figure_path(name, ext) for name in figures for ext in ("png", "pdf")),
    ]


def job_resources(kind):
    """What a job of `kind` (train, head, inference or cpu) asks the scheduler for (cluster.job_resources)."""
    return cluster_job_resources(config["resources"], kind)
