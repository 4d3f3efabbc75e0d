# The data stage's helpers (rules/data.smk): its input functions and the settings its rules pass on.
# Snakemake keeps functions and rules in separate files (snakemake --lint).


def corpus_sources(model=None):
    """The sources of the config's corpus (`data.sources`), or of a ground truth's own (`ground_truths[].corpus`)."""
    return config["data"]["sources"] if model is None else ground_truth(config, model)["corpus"]


def local_source_files(sources):
    """Local files read by `files` sources (folders expanded) and the documents of `teacher` sources, so that editing
    one of them reruns the data stage."""
    files = []
    for source in sources:
        if source["kind"] == "files":
            files += source_files(source)
        elif source["kind"] == "teacher":
            files.append(teacher_documents(source))
    return files


def teacher_documents(source):
    """The documents file of a `teacher` source: its ground truth's samples (rule teacher_corpus)."""
    return teacher_documents_path(f"gt-{source['teacher']}")


def sources_with_paths(sources):
    """`sources` as build_corpus reads them: a teacher source with the `path` of its documents filled in."""
    return [settings_without_threads({**source, "path": teacher_documents(source)}) if source["kind"] == "teacher"
            else source for source in sources]


def teacher_source(model):
    """The `teacher` source that `model` writes, for rule teacher_corpus."""
    sources = [s for s in config["data"]["sources"] if s["kind"] == "teacher" and f"gt-{s['teacher']}" == model]
    if not sources:
        raise ValueError(f"{model} is the teacher of no `teacher` source in config `data.sources`")
    return sources[0]


def corpus_settings():
    """Every setting of a corpus but its sources, the same for the config's corpus and a ground truth's own."""
    data = config["data"]
    return {
        "seed": config["seed"],
        "val_fraction": data["val_fraction"],
        "eval_fraction": data["eval_fraction"],
        "separator": data["separator"],
        "invalid_utf8": data["invalid_utf8"],
        "on_shortfall": data["on_shortfall"],
    }


def truth_model():
    """The ground truth whose text the config's corpus is (a `teacher` source's), or None: the truth that scores
    samples and against which the metrics are exact."""
    teachers = [f"gt-{s['teacher']}" for s in config["data"]["sources"] if s["kind"] == "teacher"]
    return teachers[0] if teachers else None


def truth_decoding():
    """The decoding the truth writes under (its `teacher` source's `decoding`), or None: no teacher, or a pure one
    (the truth is then the teacher's own distribution). What every job that reads the teacher as the truth depends
    on (`generation.decoded`)."""
    sources = [s for s in config["data"]["sources"] if s["kind"] == "teacher"]
    decoding = sources[0].get("decoding") if sources else None
    return None if decoding is None or decoding["method"] == "pure" else dict(decoding)


def truth_decoding_of(model):
    """`truth_decoding()` for a job of the truth `model`, None for any other model: the decoding applied to
    `model`'s distributions (so that changing it reruns the truth's jobs, not the other models')."""
    return truth_decoding() if model == truth_model() else None
