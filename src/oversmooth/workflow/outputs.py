"""The registry of the pipeline's outputs: one entry per table and figure a config plans.

Each entry names the file, the rule that builds it, its counterpart in the thesis (or the paper it reproduces), its
section of `snakemake --report` and caption, the models that form its rows (a table) or panels and lines (a
figure), the decoding methods it shows and the stages of `results/` it reads. `rule all`, the table and figure
rules' wildcards and models, and the docs' list of outputs all come from `planned_outputs(config)`; adding a table
is one entry here and one builder (a rule and its script).

The token track's versions of byte-track tables carry the track in the name (`table_4_1_tokens`) and are planned
only with a token track (its sample-quality versions only where it samples a method they show); the SVD heads'
outputs only with `svd.ranks`, the loss-matched ones only with `checkpoints.iterations`.

The methods a table shows come from the config: the metrics' tables from `measured_methods` (`decoding.methods`,
then `decoding.bat_methods`), the sample tables from what the catalog says each model samples
(`byte_sampling_methods`, `token_methods`). Beyond the thesis's five, the truncation samplers of its §2.3 (every
other method: epsilon, eta, typical, min_p, BA-epsilon, BA-eta, a sampler-only method such as mirostat) get their
own tables, `table_truncation_*`, planned only where the config measures or samples one of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from oversmooth.core.catalog import (
    TOKEN_REFERENCE,
    all_models,
    bottleneck_models,
    byte_sampling_methods,
    checkpoint_models,
    extreme_bottlenecks,
    family_models,
    ground_truth_models,
    linear_head_models,
    main_bottleneck_models,
    sampled_models,
    svd_models,
    token_head_models,
    token_head_parts,
    token_measured_methods,
    token_methods,
    token_sampled_models,
    trained_models,
    without_seed_runs,
)
from oversmooth.core.markdown import WIDTH, list_item

TABLE, FIGURE, SAMPLES = "table", "figure", "samples"  # results/tables/<n>.csv, figures/<n>.{png,pdf}, tables/<n>.md
PAGE = "page"  # results/tables/<n>.md: a page of text made from tables (the findings)
TOKEN_SUFFIX = "_tokens"  # the token track's tables: the byte track's names with the track in the name

# Sections of `snakemake --report`.
MODELS = "Models (ch. 3)"
OVERSMOOTHING = "Oversmoothing (ch. 4, 6; app. E, F)"
EXACT = "Exact analyses (app. B, I)"
QUALITY = "Samples and quality (ch. 5, 6)"
RANK = "Rank and expressivity (ch. 7; app. H; Godey et al. 2024)"
FINDINGS = "Findings (the thesis's claims as tests)"

# Thesis appendix E splits the decoding methods in two groups; E.7 and E.8 are TBAT's, per group. Every other method
# is a truncation sampler of the thesis's §2.3: the third group, in tables of its own (`table_truncation_*`).
METHOD_GROUPS = (("pure", "greedy", "temperature"), ("top_k", "top_p"))
THESIS_METHODS = tuple(m for group in METHOD_GROUPS for m in group)
SAMPLER_ONLY = ("mirostat",)  # stateful (its threshold follows the sample's own surprise): samples, no metrics
TRUNCATION = "table_truncation"  # the third group's tables: table_truncation_<ground truth>, _tbat, _quality
TBAT_TABLES = {"table_e_7": METHOD_GROUPS[0], "table_e_8": METHOD_GROUPS[1]}
QUALITY_TABLES = {"table_5_3": ("pure",), "table_6_2": ("pure", "greedy", "temperature"), "table_6_3": ("top_k", "top_p")}
SAMPLE_TABLES = {  # appendix G shows every method a model samples (`sampled_methods`, `token_methods`)
    "table_5_1": ("pure", "greedy"),
    "table_5_2": ("top_k", "top_p"),
    "samples_appendix_g": ("pure", "greedy", "top_k", "top_p", "temperature"),
}
SAMPLE_TITLES = {
    "table_5_1": "Table 5.1: continuations with pure and greedy decoding",
    "table_5_2": "Table 5.2: continuations with top-k and top-p decoding",
    "samples_appendix_g": "Appendix G: continuations of every model with every decoding method",
}
NEAREST_K = (4, 8, 32)  # Tables 5.1 and 5.2 show the bottlenecks nearest these k


# What each output shows (the byte track's; a token-track version shows the same for rank-k heads on the frozen
# source LM against its full head). The appendix E tables of the metrics share one line.
SHOWS = {
    "table_3_1": "held-out loss and accuracy per model",
    "figure_3_1": "training curves",
    "figure_godey_singular_entropy": "singular entropy of each head during training, beside the validation loss",
    "table_4_1": "TTO and NSMD per bottleneck against each ground truth, and TBAT",
    "table_4_2": "TV and KL (with its infinite-position count and KL_eps) against each ground truth",
    "table_6_1": "every metric per bottleneck and decoding method",
    "table_e": "TTO, NSMD, TV and KL against one ground truth, per decoding method",
    "table_e_7": "TBAT per decoding method",
    "table_e_8": "TBAT per decoding method",
    "table_truncation": "TTO, NSMD, TV and KL against one ground truth, per truncation sampler of the thesis's §2.3",
    "table_truncation_tbat": "TBAT per truncation sampler",
    "table_truncation_quality": "sample quality per truncation sampler",
    "table_f_1": "entropy difference per ground truth",
    "table_7_1": "TTO and NSMD of the SVD-imposed heads",
    "table_7_2": "TV and KL of the SVD-imposed heads",
    "table_b": "unargmaxable bytes (tokens) of each head, exact",
    "table_i_1": "seconds per position of each metric and of TBAT, beside the plain definitions",
    "table_5_3": "sample quality (MAUVE, perplexity, valid words, repetition, byte TV)",
    "table_6_2": "sample quality per decoding method",
    "table_6_3": "sample quality per decoding method",
    "table_h_1": "sample quality of the SVD-imposed heads",
    "table_5_1": "continuations of one prompt",
    "table_5_2": "continuations of one prompt",
    "samples_appendix_g": "continuations of every model",
    "table_7_3": "effective ranks of logits, probabilities, post- and pre-bottleneck states",
    "table_godey_ngram_rank": "rank of the data's n-gram log-probability matrix",
    "table_godey_anisotropy": "anisotropy of the representations per layer",
    "figure_godey_anisotropy": "anisotropy of the representations per layer",
    "table_godey_rank_constrained": "a learned rank-r head on the frozen model vs the SVD-imposed one vs from scratch",
    "figure_godey_rank_loss": "validation loss of learned and SVD-imposed rank-r heads against r",
    "table_loss_matched": "the family at matched validation loss, from its checkpoints",
    "table_findings": "each claim of the thesis as a test, per ground truth if it has one: estimate, CI, verdict",
    "findings": "the findings table as a page: each claim, its test, estimate, interval and verdict",
    "table_token_findings": "the token track's claims on a real LM's head as tests: estimate, CI, verdict",
    "token_findings": "the token track's findings table as a page",
    "figure_loss_matched": "oversmoothing against validation loss along training",
    "table_support": "support recovery against the truth with known support: false and lost support of each decoding "
                     "method over its grid, and the share of positions no threshold can separate",
    "figure_support": "false against lost support, a curve per decoding method, a panel per model",
    "figure_4_1": "every model's next-byte distribution at one position",
    "figure_4_2": "mean NSMD per target byte, most and least bottlenecked model",
    "figure_4_3": "argmax frequencies of each model's next-byte distributions",
    "figure_5_1": "byte frequencies of the samples against human text",
    "figure_7_1": "the SVD-imposed heads' next-byte distributions at one position",
    "figure_token_heads": "TTO, NSMD, TV and KL of the rank-k heads against k",
    "figure_token_quality": "sample quality of the rank-k heads against k",
    "figure_token_bottleneck": "BAT-rejected mass (pure, top-p) and unargmaxable share of the heads against k",
}


@dataclass(frozen=True)
class Output:
    """One table or figure: what it is, what builds it, what forms it."""
    name: str
    kind: str  # TABLE, FIGURE or SAMPLES
    rule: str  # the rule (and workflow/scripts/<rule>.py) that builds it
    thesis: str  # its counterpart: "Table 4.1", "Figure 7.1", "Godey et al. 2024", ...
    category: str  # its section of `snakemake --report`
    caption: str  # workflow/report/<caption>.rst
    reads: tuple[str, ...]  # the folders of results/ its inputs lie in
    rows: tuple[str, ...] = ()  # the models of its rows (a table) or panels and lines (a figure), in order
    methods: tuple[str, ...] = ()  # the decoding methods it shows, where it shows a choice of them
    planned: bool = True  # whether the config builds it (an SVD table without `svd.ranks` is not)

    @property
    def files(self) -> tuple[str, ...]:
        """Its files under results/."""
        if self.kind == FIGURE:
            return (f"figures/{self.name}.png", f"figures/{self.name}.pdf")
        return (f"tables/{self.name}.{'md' if self.kind in (SAMPLES, PAGE) else 'csv'}",)

    @property
    def shows(self) -> str:
        """What it shows, in a line."""
        base = self.name.removesuffix(TOKEN_SUFFIX)
        text = SHOWS[base if base in SHOWS else next(s for s in ("table_e", TRUNCATION) if base.startswith(s + "_"))]
        if base != self.name:
            text = f"{_display_name(base)}'s view of rank-k heads on the frozen source LM against its full head"
        return f"{text} ({', '.join(self.methods)})" if self.methods else text


def _chosen(methods: tuple[str, ...], allowed: list[str]) -> tuple[str, ...]:
    return tuple(m for m in methods if m in allowed)


def _thesis_name(name: str) -> str:
    """'table_e_7' -> 'Table E.7', 'figure_4_1' -> 'Figure 4.1'."""
    kind, _, number = name.partition("_")
    return f"{kind.capitalize()} {number.replace('_', '.').upper()}"


def _display_name(name: str) -> str:
    """A thesis table's name ('Table E.7'); the name itself for a table the thesis does not have."""
    if name.startswith(TRUNCATION):
        return f"`{name}`"
    return "Appendix G" if name == "samples_appendix_g" else _thesis_name(name)


def measured_methods(config: Mapping) -> list[str]:
    """The decoding methods the metrics and TBAT measure, in config order: `decoding.methods`, then
    `decoding.bat_methods` (BA-epsilon and BA-eta: only for models with one head matrix, at their own positions), less
    the sampler-only methods (`SAMPLER_ONLY`)."""
    decoding = config["decoding"]
    return [m for m in dict.fromkeys([*decoding["methods"], *decoding.get("bat_methods", [])]) if m not in SAMPLER_ONLY]


def sampled_methods(config: Mapping) -> list[str]:
    """The decoding methods any byte model samples with (the catalog's `byte_sampling_methods`, the SVD heads' left
    out: Table H.1's), in config order."""
    return list(dict.fromkeys(m for model in sampled_models(config) for m in byte_sampling_methods(config, model)))


def truncation_methods(methods: list[str] | tuple[str, ...]) -> list[str]:
    """The truncation samplers of the thesis's §2.3 among `methods`: every method outside the thesis's five."""
    return [m for m in methods if m not in THESIS_METHODS]


def truncation_table_names(ground_truths: list[str], methods: list[str]) -> dict[str, tuple[str, list[str]]]:
    """`table_truncation_<ground truth, less gt->` -> (ground truth, the truncation samplers among `methods`): the
    appendix-E layout for the third group, one table per ground truth; none where `methods` has no such sampler."""
    chosen = truncation_methods(methods)
    taken = [gt for gt in ground_truths if gt.removeprefix("gt-") in ("tbat", "quality")]
    if chosen and taken:
        raise ValueError(f"ground_truths: {taken[0]}'s table_truncation_{taken[0].removeprefix('gt-')} would be the "
                         "truncation samplers' TBAT or quality table; rename the ground truth")
    return {f"{TRUNCATION}_{gt.removeprefix('gt-')}": (gt, chosen) for gt in ground_truths} if chosen else {}


def e_table_names(ground_truths: list[str], methods: list[str]) -> dict[str, tuple[str, list[str]]]:
    """`table_e_<n>` -> (ground truth, methods): per ground truth in config order, one table for pure, greedy and
    temperature and one for top-k and top-p (thesis E.1-E.6 split the same way). E.7 and E.8 are TBAT's, so a
    fourth ground truth continues at E.9."""
    names = {}
    for g, gt in enumerate(ground_truths):
        first = 2 * g + 1 if g < 3 else 2 * g + 3
        for offset, group in enumerate(METHOD_GROUPS):
            chosen = [m for m in group if m in methods]
            if chosen:
                names[f"table_e_{first + offset}"] = (gt, chosen)
    return names


def tbat_table_names(methods: list[str]) -> dict[str, list[str]]:
    """`table_e_7` (pure, greedy, temperature), `table_e_8` (top-k, top-p) and `table_truncation_tbat` (the
    truncation samplers): TBAT per method, each where `methods` has one of its group."""
    groups = {**TBAT_TABLES, f"{TRUNCATION}_tbat": truncation_methods(methods)}
    chosen = {name: [m for m in group if m in methods] for name, group in groups.items()}
    return {name: group for name, group in chosen.items() if group}


def token_heads_at(config: Mapping, ranks_key: str) -> list[str]:
    """The token-track heads at the ranks `tokens.<ranks_key>` (those an exact analysis runs on), then tok-full
    where the list holds `full`."""
    wanted = set(config["tokens"][ranks_key])
    heads = [m for m in token_head_models(config) if token_head_parts(m)[1] in wanted]
    return heads + [TOKEN_REFERENCE] * ("full" in wanted and bool(config["tokens"]["ranks"]))


def token_tbat_positions(config: Mapping, model: str) -> int:
    """How many evaluation positions a token-track head's TBAT takes: `tokens.full_tbat_positions` for tok-full
    where it is set, else `tokens.tbat_positions`."""
    tokens = config["tokens"]
    full = tokens.get("full_tbat_positions")
    return int(full) if model == TOKEN_REFERENCE and full is not None else int(tokens["tbat_positions"])


def token_tbat_methods(config: Mapping, model: str) -> list[str]:
    """The decoding methods a token-track head's TBAT is computed after: `tokens.full_tbat_methods` for tok-full
    where it is set (in `decoding.methods`' order), else `decoding.methods`."""
    methods, full = token_measured_methods(config), config["tokens"].get("full_tbat_methods")
    return [m for m in methods if m in full] if model == TOKEN_REFERENCE and full is not None else list(methods)


def token_analysed_heads(config: Mapping) -> tuple[str, ...]:
    """The token-track heads an exact analysis runs on (TBAT or unargmaxable tokens), without repeats."""
    return tuple(dict.fromkeys(token_heads_at(config, "tbat_ranks") + token_heads_at(config, "unargmaxable_ranks")))


def nearest_models(models: list[str], wanted: tuple[int, ...] = NEAREST_K) -> list[str]:
    """The bottlenecked models nearest to k = 4, 8, 32 (the thesis's Tables 5.1, 5.2), without repeats."""
    ks = {int(m.removeprefix("bn-")): m for m in models if m.startswith("bn-")}
    chosen = [ks[min(ks, key=lambda k: (abs(k - w), k))] for w in wanted]
    return list(dict.fromkeys(chosen))


def token_sample_table_models(config: Mapping) -> list[str]:
    """The token track's Tables 5.1 and 5.2 show each kind of head at its lowest and highest rank, then the full
    head."""
    heads = token_head_models(config)
    ranks = sorted(config["tokens"]["ranks"])
    ends = {token_head_parts(m)[1] for m in heads} & {ranks[0], ranks[-1]}
    return [m for m in heads if token_head_parts(m)[1] in ends] + [TOKEN_REFERENCE]


def sample_table_title(config: Mapping, name: str) -> str:
    """The heading of a sample table, with the track for the token track's."""
    base = name.removesuffix(TOKEN_SUFFIX)
    title = SAMPLE_TITLES[base]
    return title if base == name else f"{title}, token track ({config['tokens']['source']} with rank-k heads)"


def _model_outputs(config: Mapping) -> list[Output]:
    trained = tuple(trained_models(config))
    return [
        Output("table_3_1", TABLE, "table_3_1", "Table 3.1", MODELS, "table_3_1", ("eval", "models"),
               tuple(all_models(config))),
        Output("figure_3_1", FIGURE, "training_figure", "Figure 3.1", MODELS, "training_figure", ("models",), trained),
        Output("figure_godey_singular_entropy", FIGURE, "training_figure", "Godey et al. 2024", MODELS,
               "training_figure", ("models",), trained),
    ]


def _metrics_outputs(config: Mapping) -> list[Output]:
    """Tables 4.1, 4.2, 6.1, E.1-E.8, F.1, 7.1, 7.2, the truncation samplers' appendix-E tables and the token track's
    versions (rule metrics_table)."""
    methods = measured_methods(config)
    family, bottlenecks = tuple(family_models(config)), tuple(bottleneck_models(config))
    heads, tbat_heads = tuple(token_head_models(config)), tuple(token_heads_at(config, "tbat_ranks"))
    pure = ("pure",)
    gts = ground_truth_models(config)

    def table(name: str, rows: tuple[str, ...], shown: tuple[str, ...], reads=("metrics",), thesis=None) -> Output:
        return Output(name, TABLE, "metrics_table", thesis or _thesis_name(name), OVERSMOOTHING, "metrics_table",
                      reads, rows, shown)

    tables = [table("table_4_1", family, pure, ("metrics", "tbat")), table("table_4_2", family, pure),
              table("table_6_1", family, tuple(methods))]
    tables += [table(name, family, tuple(chosen)) for name, (_, chosen) in e_table_names(gts, methods).items()]
    tables += [table(name, family, tuple(chosen), thesis=TRUNCATION_THESIS)
               for name, (_, chosen) in truncation_table_names(gts, methods).items()]
    tables += [table(name, bottlenecks, tuple(chosen), ("tbat",), _counterpart(name))
               for name, chosen in tbat_table_names(methods).items()]
    tables.append(table("table_f_1", family, pure))
    tables += [replace(table(name, tuple(svd_models(config)), pure), planned=bool(svd_models(config)))
               for name in ("table_7_1", "table_7_2")]
    token = token_measured_methods(config)  # the token track's (tokens.methods)
    tables += [replace(table(name + TOKEN_SUFFIX, heads, shown, ("metrics", "tbat") if name == "table_4_1" else
                             ("metrics",), thesis=_thesis_name(name) + ", token track"), planned=bool(heads))
               for name, shown in (("table_4_1", pure), ("table_4_2", pure), ("table_6_1", tuple(token)),
                                   ("table_f_1", pure))]
    tables += [replace(table(name + TOKEN_SUFFIX, tbat_heads, tuple(chosen), ("tbat",),
                             thesis=_counterpart(name) + ", token track"), planned=bool(tbat_heads))
               for name, chosen in tbat_table_names(token).items()]
    return tables


TRUNCATION_THESIS = "thesis §2.3; Hewitt et al. 2022; Finlayson et al. 2024"  # the third group's tables' sources


def _counterpart(name: str) -> str:
    """A table's counterpart: the thesis's table, or the sources of a truncation samplers' table."""
    return TRUNCATION_THESIS if name.startswith(TRUNCATION) else _thesis_name(name)


def _exact_outputs(config: Mapping) -> list[Output]:
    """Table B (unargmaxable bytes and tokens) and Table I.1 (timings)."""
    outputs = [Output("table_b", TABLE, "table_b", "Tables B.1, B.2", EXACT, "table_b", ("unargmaxable",),
                      tuple(bottleneck_models(config)))]
    heads = tuple(token_heads_at(config, "unargmaxable_ranks"))
    outputs.append(Output("table_b" + TOKEN_SUFFIX, TABLE, "table_b", "Tables B.1, B.2, token track", EXACT,
                          "table_b", ("unargmaxable", "tokens", "data"), heads, planned=bool(heads)))
    outputs.append(Output("table_i_1", TABLE, "table_i_1", "Table I.1", EXACT, "table_i_1", ("timing",),
                          tuple(main_bottleneck_models(config))))
    return outputs


def _quality_outputs(config: Mapping) -> list[Output]:
    """Tables 5.3, 6.2, 6.3, H.1, the truncation samplers' quality, the sample tables 5.1, 5.2 and appendix G, and
    their token versions. The methods are those the models sample (the catalog), so that a sampler-only method
    (mirostat) shows without another edit."""
    methods, token_chosen = sampled_methods(config), token_methods(config)
    sampled, token_sampled = tuple(sampled_models(config)), tuple(token_sampled_models(config))
    quality = {**QUALITY_TABLES, f"{TRUNCATION}_quality": tuple(truncation_methods(methods))}
    outputs = [Output(name, TABLE, "quality_table", _counterpart(name), QUALITY, "quality_table", ("quality",),
                      sampled, _chosen(shown, methods), bool(_chosen(shown, methods)) or not name.startswith(TRUNCATION))
                for name, shown in quality.items()]
    outputs.append(Output("table_h_1", TABLE, "quality_table", "Table H.1", QUALITY, "quality_table", ("quality",),
                          tuple(svd_models(config)), tuple(config["svd"]["decoding"]), bool(svd_models(config))))
    samples = {**SAMPLE_TABLES, "samples_appendix_g": tuple(methods)}
    outputs += [Output(name, SAMPLES, "sample_table", "Appendix G" if name.startswith("samples") else
                       _thesis_name(name), QUALITY, "sample_table", ("samples", "data"),
                       sampled if name.startswith("samples") else tuple(nearest_models(main_bottleneck_models(config))),
                       _chosen(shown, methods)) for name, shown in samples.items()]
    heads = bool(token_head_models(config))  # a token version is planned where the track samples a method it shows
    token_quality = {**QUALITY_TABLES, f"{TRUNCATION}_quality": tuple(truncation_methods(token_chosen))}
    outputs += [Output(name + TOKEN_SUFFIX, TABLE, "quality_table", _counterpart(name) + ", token track", QUALITY,
                       "quality_table", ("quality",), token_sampled, _chosen(shown, token_chosen),
                       heads and bool(_chosen(shown, token_chosen))) for name, shown in token_quality.items()]
    for name, shown in {**SAMPLE_TABLES, "samples_appendix_g": tuple(token_chosen)}.items():
        rows = token_sampled if name.startswith("samples") or not heads else tuple(token_sample_table_models(config))
        thesis = "Appendix G" if name.startswith("samples") else _thesis_name(name)
        outputs.append(Output(name + TOKEN_SUFFIX, SAMPLES, "sample_table", thesis + ", token track", QUALITY,
                              "sample_table", ("samples", "tokens"), rows, _chosen(shown, token_chosen),
                              heads and bool(_chosen(shown, token_chosen))))
    return outputs


def _rank_outputs(config: Mapping) -> list[Output]:
    """Table 7.3 and Godey et al.'s tables and figures."""
    outputs = [
        Output("table_7_3", TABLE, "table_7_3", "Table 7.3", RANK, "table_7_3", ("rank",),
               tuple(linear_head_models(config))),
        Output("table_godey_ngram_rank", TABLE, "ngram_rank", "Godey et al. 2024", RANK, "table_godey_ngram_rank",
               ("data",)),
        Output("table_godey_anisotropy", TABLE, "table_godey_anisotropy", "Godey et al. 2024", RANK,
               "table_godey_anisotropy", ("rank",), tuple(trained_models(config))),
        Output("figure_godey_anisotropy", FIGURE, "figure_godey_anisotropy", "Godey et al. 2024", RANK,
               "figure_godey_anisotropy", ("tables",), tuple(trained_models(config))),
    ]
    svd, thesis = tuple(svd_models(config)), "Godey et al. 2024; thesis ch. 7"
    outputs += [Output("table_godey_rank_constrained", TABLE, "rank_constrained_head", thesis, RANK,
                       "table_godey_rank_constrained", ("models", "data"), svd, planned=bool(svd)),
                Output("figure_godey_rank_loss", FIGURE, "figure_godey_rank_loss", thesis, RANK,
                       "figure_godey_rank_loss", ("tables",), svd, planned=bool(svd))]
    return outputs


def _training_outputs(config: Mapping) -> list[Output]:
    """The family at matched validation loss (thesis ch. 8), with checkpoints along training."""
    planned = bool(checkpoint_models(config))
    points = tuple(checkpoint_models(config) + main_bottleneck_models(config)) if planned else ()
    return [Output(name, kind, rule, "thesis ch. 8", OVERSMOOTHING, name, ("models", "metrics", "tbat"), points,
                   planned=planned)
            for name, kind, rule in (("table_loss_matched", TABLE, "loss_matched"),
                                     ("figure_loss_matched", FIGURE, "figure_loss_matched"))]


NOT_TRUNCATING = ("pure", "temperature")  # decodings that keep every byte: a truth under one has no zeros


def support_truth(config: Mapping) -> str | None:
    """The truth with known support: the ground truth of the first `teacher` source where that source
    writes under a truncating decoding (its conditionals then have exact zeros); None otherwise."""
    sources = [s for s in config["data"]["sources"] if s["kind"] == "teacher"]
    decoding = sources[0].get("decoding") if sources else None
    if decoding is None or decoding["method"] in NOT_TRUNCATING:
        return None
    return f"gt-{sources[0]['teacher']}"


def support_models(config: Mapping) -> list[str]:
    """The models whose support recovery is measured against that truth: the family (its MoS members included),
    then every other ground truth (the proxies); none without such a truth."""
    truth = support_truth(config)
    if truth is None:
        return []
    return family_models(config) + [gt for gt in ground_truth_models(config) if gt != truth]


def _support_outputs(config: Mapping) -> list[Output]:
    """Support recovery (Hewitt et al. 2022, Finlayson et al. 2024, thesis §2.3): only with a truth with
    known support (a teacher writing under a truncating decoding)."""
    models = tuple(support_models(config))
    return [Output(name, kind, name, "Hewitt et al. 2022; Finlayson et al. 2024; thesis §2.3", OVERSMOOTHING, name,
                   ("support",), models, planned=bool(models))
            for name, kind in (("table_support", TABLE), ("figure_support", FIGURE))]


def _figures(config: Mapping) -> list[Output]:
    """Figures 4.1-4.3, 5.1, 7.1 and the token track's."""
    gts, svd = ground_truth_models(config), svd_models(config)
    figures = [
        Output("figure_4_1", FIGURE, "position_figure", "Figure 4.1", OVERSMOOTHING, "position_figure",
               ("logits", "data"), tuple(without_seed_runs(all_models(config)))),
        Output("figure_4_2", FIGURE, "figure_4_2", "Figure 4.2", OVERSMOOTHING, "figure_4_2", ("metrics",),
               tuple(extreme_bottlenecks(config))),
        Output("figure_4_3", FIGURE, "figure_4_3", "Figure 4.3", OVERSMOOTHING, "figure_4_3", ("logits",),
               tuple(all_models(config))),
        Output("figure_5_1", FIGURE, "figure_5_1", "Figure 5.1", QUALITY, "figure_5_1", ("samples", "data"),
               tuple(sampled_models(config))),
    ]
    figures.append(Output("figure_7_1", FIGURE, "position_figure", "Figure 7.1", OVERSMOOTHING, "position_figure",
                          ("logits", "data"), tuple(svd + gts) if svd else (), planned=bool(svd)))
    heads = bool(token_head_models(config))
    figures += [
        Output("figure_token_heads", FIGURE, "figure_token_heads", "thesis ch. 8; Godey et al. 2024", RANK,
               "figure_token_heads", ("metrics",), tuple(token_head_models(config)), planned=heads),
        Output("figure_token_quality", FIGURE, "figure_token_quality", "thesis ch. 8", QUALITY,
               "figure_token_quality", ("quality",), tuple(token_sampled_models(config)), planned=heads),
    ]
    figures.append(Output("figure_token_bottleneck", FIGURE, "figure_token_bottleneck",
                          "Finlayson et al. 2024; Grivas et al. 2022", EXACT, "figure_token_bottleneck", ("tables",),
                          token_analysed_heads(config), planned=bool(token_heads_at(config, "tbat_ranks"))
                          and "pure" in config["decoding"]["methods"]))
    return figures


def _findings_outputs(config: Mapping) -> list[Output]:
    """The thesis's claims as tests, read from its tables (oversmooth.reporting.findings); the token track's apart,
    so that the byte track's findings never wait for its exact analyses."""
    outputs = [Output(name, kind, "findings", "the thesis's findings", FINDINGS, name, ("tables",),
                      tuple(main_bottleneck_models(config))) for name, kind in (("table_findings", TABLE),
                                                                                ("findings", PAGE))]
    heads = token_analysed_heads(config)
    return outputs + [Output(name, kind, "token_findings", "Finlayson et al. 2024; Grivas et al. 2022", FINDINGS,
                             name, ("tables",), heads, planned=bool(heads))
                      for name, kind in (("table_token_findings", TABLE), ("token_findings", PAGE))]


def registered_outputs(config: Mapping) -> list[Output]:
    """Every table and figure the pipeline knows, those `config` does not build included (`planned` False), tables
    first."""
    return [*_model_outputs(config), *_metrics_outputs(config), *_exact_outputs(config), *_quality_outputs(config),
            *_rank_outputs(config), *_training_outputs(config), *_support_outputs(config), *_findings_outputs(config),
            *_figures(config)]


TABLE_BEGIN = "<!-- outputs-table:begin (generated from oversmooth.workflow.outputs by `make docs`) -->"
TABLE_END = "<!-- outputs-table:end -->"
LIST_BEGIN = "<!-- outputs-list:begin (generated from oversmooth.workflow.outputs by `make docs`) -->"
LIST_END = "<!-- outputs-list:end -->"


def outputs_table(config: Mapping, width: int = WIDTH) -> str:
    """docs/outputs.md's list, wrapped to `width`: every output `config` plans (its path under `results/`), with its
    thesis counterpart, the rule that builds it and what it shows."""
    lines = [TABLE_BEGIN, "Under `results/`: each output (thesis counterpart; rule that builds it): what it shows."]
    for entry in planned_outputs(config):
        where = f"figures/{entry.name}.{{png,pdf}}" if entry.kind == FIGURE else entry.files[0]
        lines.append(list_item(f"`{where}` ({entry.thesis}; `{entry.rule}`): {entry.shows}", width))
    return "\n".join([*lines, TABLE_END])


def outputs_list(config: Mapping, width: int = WIDTH) -> str:
    """The README's list: the planned outputs under each section of the report, wrapped to `width`."""
    sections: dict[str, list[str]] = {}
    for entry in planned_outputs(config):
        sections.setdefault(entry.category, []).append(f"`{entry.name}`")
    lines = [list_item(f"**{section}**: {', '.join(names)}", width) for section, names in sections.items()]
    return "\n".join([LIST_BEGIN, *lines, LIST_END])


def planned_outputs(config: Mapping) -> list[Output]:
    """Every table and figure `config` builds."""
    return [o for o in registered_outputs(config) if o.planned]


def outputs_of(config: Mapping, rule: str) -> dict[str, Output]:
    """The planned outputs a rule builds, by name."""
    return {o.name: o for o in planned_outputs(config) if o.rule == rule}


def output(config: Mapping, name: str) -> Output:
    """The registered output `name` (planned or not); a KeyError naming the registered ones otherwise."""
    for o in registered_outputs(config):
        if o.name == name:
            return o
    raise KeyError(f"no table or figure {name!r} is registered in oversmooth.workflow.outputs (registered: "
                   f"{', '.join(o.name for o in registered_outputs(config))})")
