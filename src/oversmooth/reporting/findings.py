"""The thesis's findings as stated tests: each claim, per ground truth, decided from the tables a run made.

Every claim is a difference `d` that the thesis says is positive, with its interval: from each term's bootstrap
interval, its standard error (half-width / z), combined as if the terms were independent. The terms are measured on
the same positions, whose errors are positively correlated, so this interval is wider than a paired one: a claim it
calls decided is decided. A claim on one term reads that term's own bootstrap interval (scaled by its weight), and a
difference of bounded terms (shares) keeps its interval within the values the difference can take. Verdicts: `holds`
(the interval lies above 0), `fails` (below 0), `undecided` (it holds 0).
Where a table has a bottleneck's across-seed mean row (`bn-4 (3 seeds: mean)`, `oversmooth.reporting.seeds`: its
interval counts the seeds' variance and the prompts'), the claims read that row; else the single run's. Column
`runs` says how many training runs of each compared model the interval covers: a verdict on one run is about that
run, not about another seed of the same model. No torch: it reads CSV tables (`docs/results.md` names each test).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from oversmooth.core.catalog import TOKEN_HEAD_KINDS, TOKEN_REFERENCE, bottleneck_of, is_token_model, token_head_parts
from oversmooth.core.labels import METHOD_LABELS
from oversmooth.data.bytenames import VOCAB_SIZE
from oversmooth.reporting.support_report import at_lost_support, common_levels, curve

HOLDS, FAILS, UNDECIDED = "holds", "fails", "undecided"
FINDINGS_COLUMNS = ["id", "claim", "ground_truth", "test", "runs", "estimate", "ci_low", "ci_high", "verdict",
                    "evidence"]
SEED_MEAN_ROW = re.compile(r"(?P<model>.+) \((?P<runs>\d+) seeds: mean\)")
# The full-rank model's oversmoothing, against the reference its ground truth gives: NSMD = its tail mass minus the
# ground truth's (the tail: outside the ground truth's nucleus) = its TTO minus the tail mass it under-assigns. TTO
# alone has no such reference: it is positive for any model that errs at all, leaking or not.
FULL_RANK_TEST = "NSMD({model}) > 0 (its tail mass above the ground truth's)"


@dataclass(frozen=True)
class Term:
    """One measured number with its interval, and the coefficient it enters the difference with."""

    label: str
    mean: float
    ci_low: float
    ci_high: float
    weight: float = 1.0
    runs: int = 1  # training runs (seeds) of the model its interval covers
    bounds: tuple[float, float] = (-math.inf, math.inf)  # the values the number can take: SHARE for a share

    def attainable(self) -> tuple[float, float]:
        """The values `weight * number` can take."""
        low, high = (self.weight * bound for bound in self.bounds)
        return min(low, high), max(low, high)


SHARE = (0.0, 1.0)  # a share of positions, samples or probability mass


def z_of(confidence: float) -> float:
    """The two-sided normal quantile of `confidence` (1.96 at 0.95)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + confidence / 2)


def difference(terms: Sequence[Term], confidence: float) -> tuple[float, float, float]:
    """sum(weight * mean), and its interval: one term's own bootstrap interval, scaled by its weight (a normal
    interval around its mean would leave a skewed interval's side, past a share's bound); for several, from the terms'
    standard errors, combined independently, clipped to the values the difference can take (the terms' bounds)."""
    estimate = sum(t.weight * t.mean for t in terms)
    if len(terms) == 1:
        (term,) = terms
        low, high = sorted((term.weight * term.ci_low, term.weight * term.ci_high))
        return estimate, low, high
    z = z_of(confidence)
    se = math.sqrt(sum((t.weight * (t.ci_high - t.ci_low) / (2 * z)) ** 2 for t in terms))
    least, most = (sum(ends) for ends in zip(*(t.attainable() for t in terms)))
    return estimate, max(estimate - z * se, least), min(estimate + z * se, most)


def verdict(ci_low: float, ci_high: float) -> str:
    if ci_low > 0:
        return HOLDS
    if ci_high < 0:
        return FAILS
    return UNDECIDED


def _row(fid: str, claim: str, gt: str, test: str, terms: Sequence[Term], confidence: float) -> dict:
    estimate, low, high = difference(terms, confidence)
    evidence = "; ".join(f"{t.label} {t.mean:.4g} [{t.ci_low:.4g}, {t.ci_high:.4g}]" for t in terms)
    return {"id": fid, "claim": claim, "ground_truth": gt, "test": test, "runs": min(t.runs for t in terms),
            "estimate": estimate, "ci_low": low,
            "ci_high": high, "verdict": verdict(low, high) if not math.isnan(estimate) else UNDECIDED,
            "evidence": evidence}


def _term(table: pd.DataFrame, model: str, prefix: str, suffix: str = "", weight: float = 1.0, label: str = "") -> Term:
    """The row `model` of a table whose columns are `<prefix> mean<suffix>`, `<prefix> ci_low<suffix>`, ..."""
    row = table.set_index("model").loc[model]
    return Term(label or model, float(row[f"{prefix}mean{suffix}"]), float(row[f"{prefix}ci_low{suffix}"]),
                float(row[f"{prefix}ci_high{suffix}"]), weight, runs_of(model))


def runs_of(row_label: str) -> int:
    """How many training runs a table row stands for: n for an across-seed mean row, else 1."""
    seeds = SEED_MEAN_ROW.fullmatch(str(row_label))
    return int(seeds["runs"]) if seeds else 1


def bottleneck_rows(table: pd.DataFrame) -> dict[int, str]:
    """k -> the row the claims read for `bn-<k>` in a table with a row per model: its across-seed mean row where the
    table has one, else the master seed's run (`bn-<k>`)."""
    labels = [str(m) for m in table["model"]]
    means = {seeds["model"]: label for label in labels if (seeds := SEED_MEAN_ROW.fullmatch(label))}
    return {int(m.removeprefix("bn-")): means.get(m, m) for m in labels if m.startswith("bn-") and m[3:].isdigit()}


def oversmoothing_findings(table_4_1: pd.DataFrame, ground_truths: Sequence[str], moderate_k: int,
                           confidence: float) -> list[dict]:
    """Claims on TTO against each ground truth (Table 4.1): it falls with k, levels off beyond a moderate k (with a
    k strictly between the narrowest and the widest); the full-rank model still oversmooths (where the widest k is
    full rank, >= 256), tested on its NSMD (`FULL_RANK_TEST`); NSMD <= TTO on every model's row; TBAT falls with k,
    and is 0 at full rank."""
    ks = bottleneck_rows(table_4_1)
    low, high, full_rank = ks[min(ks)], ks[max(ks)], max(ks) >= VOCAB_SIZE
    inner = [k for k in ks if min(ks) < k < max(ks)]
    mid = ks[min(inner, key=lambda k: (abs(k - moderate_k), k))] if inner else None
    models = table_4_1[~table_4_1["model"].str.contains(" ", regex=False)]  # not the across-seed rows
    rows = []
    for gt in ground_truths:
        def tto(model: str, w: float = 1.0, gt: str = gt) -> Term:
            return _term(table_4_1, model, "TTO ", f" ({gt})", w)

        def nsmd(model: str, gt: str = gt) -> Term:
            return _term(table_4_1, model, "NSMD ", f" ({gt})")

        rows.append(_row("tto_falls_with_k", "oversmoothing falls with k", gt,
                         f"TTO({low}) - TTO({high}) > 0", [tto(low), tto(high, -1.0)], confidence))
        if mid:
            rows.append(_row("tto_levels_off", f"it levels off beyond a moderate k ({mid})", gt,
                             f"[TTO({low}) - TTO({mid})] - [TTO({mid}) - TTO({high})] > 0",
                             [tto(low), tto(mid, -2.0), tto(high)], confidence))
        if full_rank:
            rows.append(_row("full_rank_oversmooths", "the full-rank model oversmooths", gt,
                             FULL_RANK_TEST.format(model=high), [nsmd(high)], confidence))
        gap = float((models[f"NSMD mean ({gt})"] - models[f"TTO mean ({gt})"]).max())
        rows.append({"id": "nsmd_below_tto", "claim": "NSMD <= TTO", "ground_truth": gt,
                     "test": "min over rows of TTO - NSMD >= 0 (an identity per position)", "runs": 1,
                     "estimate": -gap,
                     "ci_low": -gap, "ci_high": -gap, "verdict": HOLDS if gap <= 1e-9 else FAILS,
                     "evidence": f"largest NSMD - TTO {gap:.3g}"})
    if "TBAT mean" in table_4_1:
        def tbat(model: str, w: float = 1.0) -> Term:
            return _term(table_4_1, model, "TBAT ", "", w)

        claim, test = "TBAT falls with k", f"TBAT({low}) - TBAT({high}) > 0"
        if full_rank:
            claim, test = claim + " and is 0 at full rank", test + f" and TBAT({high}) = 0"
        row = _row("tbat_falls_with_k", claim, "-", test, [tbat(low), tbat(high, -1.0)], confidence)
        full = tbat(high)
        if full_rank and full.ci_low > 0:
            row["verdict"] = FAILS
        elif full_rank and full.mean != 0 and row["verdict"] == HOLDS:
            row["verdict"] = UNDECIDED
        rows.append(row)
    return rows


def ground_truth_findings(table_4_1: pd.DataFrame, kinds: Mapping[str, str], confidence: float) -> list[dict]:
    """A pretrained ground truth shows more oversmoothing of the full-rank model than an in-house one."""
    ks = bottleneck_rows(table_4_1)
    high = ks[max(ks)]
    pretrained = [gt for gt, kind in kinds.items() if kind in ("token", "hf")]
    in_house = [gt for gt, kind in kinds.items() if kind == "nanogpt"]
    return [_row("pretrained_shows_more", "a pretrained ground truth shows more than an in-house one",
                 f"{p} vs {h}", f"TTO({high} | {p}) - TTO({high} | {h}) > 0",
                 [_term(table_4_1, high, "TTO ", f" ({p})", 1.0, f"{high} | {p}"),
                  _term(table_4_1, high, "TTO ", f" ({h})", -1.0, f"{high} | {h}")], confidence)
            for p in pretrained for h in in_house]


def svd_findings(table_7_1: pd.DataFrame, ground_truths: Sequence[str], confidence: float) -> list[dict]:
    """SVD-imposed oversmoothing rises as the rank falls (Table 7.1)."""
    ranks = {int(m.removeprefix("svd-r")): m for m in table_7_1["model"] if m.startswith("svd-r")}
    if len(ranks) < 2:
        return []
    low, high = ranks[min(ranks)], ranks[max(ranks)]
    return [_row("svd_rises_as_rank_falls", "SVD-imposed oversmoothing rises as the rank falls", gt,
                 f"TTO({low}) - TTO({high}) > 0",
                 [_term(table_7_1, low, "TTO ", f" ({gt})"), _term(table_7_1, high, "TTO ", f" ({gt})", -1.0)],
                 confidence) for gt in ground_truths]


def quality_findings(table_5_3: pd.DataFrame, confidence: float, narrow_k: int = 8) -> list[dict]:
    """Sample quality collapses at k <= narrow_k: the most likely narrow model's pure samples are less likely than
    the least likely wide model's, under the judge (bits per byte) and, on a teacher's language, under the truth. A
    truth with zeros (a truth with known support) gives a sample holding a byte it never writes infinite bits: where any bottlenecked
    model's samples hold one, the truth's test is on the share of such samples (`truth_zero_share`) instead."""
    pure = table_5_3[table_5_3["n_samples"] > 0]
    ks = bottleneck_rows(pure)
    narrow, wide = [ks[k] for k in ks if k <= narrow_k], [ks[k] for k in ks if k > narrow_k]
    if not narrow or not wide:
        return []
    rows = []
    judges = [("bits_per_byte_", "the judge"), ("truth_bits_per_byte_", "the truth")]
    zeros = pure.set_index("model")["truth_zero_share"] if "truth_zero_share" in pure else None
    truth_zeros = zeros is not None and bool((zeros[narrow + wide] > 0).any())
    for prefix, who in judges:
        if f"{prefix}mean" not in pure:
            continue
        if who == "the truth" and truth_zeros:
            best_narrow = min(narrow, key=lambda m: zeros[m])
            worst_wide = max(wide, key=lambda m: zeros[m])
            rows.append(_row("quality_collapses", f"sample quality collapses at k <= {narrow_k}", who,
                             f"truth-zero share({best_narrow}) - truth-zero share({worst_wide}) > 0 (pure sampling)",
                             [_share_term(pure, best_narrow), _share_term(pure, worst_wide, -1.0)], confidence))
            continue
        best_narrow = min(narrow, key=lambda m: _term(pure, m, prefix).mean)
        worst_wide = max(wide, key=lambda m: _term(pure, m, prefix).mean)
        rows.append(_row("quality_collapses", f"sample quality collapses at k <= {narrow_k}", who,
                         f"bits/byte({best_narrow}) - bits/byte({worst_wide}) > 0 (pure sampling)",
                         [_term(pure, best_narrow, prefix), _term(pure, worst_wide, prefix, weight=-1.0)], confidence))
    return rows


def _share_term(table: pd.DataFrame, model: str, weight: float = 1.0) -> Term:
    """The share of `model`'s samples holding a byte the truth gives probability 0, with its interval."""
    row = table.set_index("model").loc[model]
    return Term(model, float(row["truth_zero_share"]), float(row["truth_zero_share_ci_low"]),
                float(row["truth_zero_share_ci_high"]), weight, runs_of(model), SHARE)


def least_favourable(rows: Sequence[dict], note: str) -> dict:
    """One claim tested on many pairs, as one row: it holds if every pair holds and fails if any pair fails; the
    row shown is the pair that decides that (the lowest interval's top if one fails, else the lowest bottom; a pair
    without an interval, NaN, is undecided and lowest)."""
    failed = [r for r in rows if r["verdict"] == FAILS]
    shown = (min(failed, key=lambda r: r["ci_high"]) if failed
             else min(rows, key=lambda r: -math.inf if math.isnan(r["ci_low"]) else r["ci_low"]))
    return shown | {"test": f"{shown['test']} ({note}: the least favourable of {len(rows)})"}


def _method_term(table: pd.DataFrame, model: str, metric: str, method: str, weight: float = 1.0) -> Term:
    row = table.loc[(model, metric)]
    label = METHOD_LABELS[method]
    return Term(f"{method} | {model}", float(row[f"{label} mean"]), float(row[f"{label} ci_low"]),
                float(row[f"{label} ci_high"]), weight, runs_of(model))


def greedy_findings(e_tables: Mapping[str, Sequence[pd.DataFrame]], confidence: float) -> list[dict]:
    """Greedy has the lowest NSMD and the highest KL (thesis §6.1; KL_eps, since greedy's KL is infinite wherever
    the ground truth gives two bytes mass) of every decoding method, at every bottleneck: per ground truth, from its
    appendix-E tables (`e_tables`: ground truth -> the tables of its method groups)."""
    rows = []
    for gt, tables in e_tables.items():
        merged = pd.concat([t.set_index(["model", "metric"]) for t in tables], axis=1)
        merged = merged.loc[:, ~merged.columns.duplicated()]
        methods = [m for m, label in METHOD_LABELS.items() if f"{label} mean" in merged]
        if "greedy" not in methods or len(methods) < 2:
            continue
        models = bottleneck_rows(merged.reset_index()).values()
        for fid, claim, metric, greedy_weight in (("greedy_lowest_nsmd", "greedy has the lowest NSMD", "NSMD", -1.0),
                                                  ("greedy_highest_kl", "greedy has the highest KL", "KL_eps", 1.0)):
            pairs = []
            for model in models:
                greedy = _method_term(merged, model, metric, "greedy", greedy_weight)
                for other in (m for m in methods if m != "greedy"):
                    rival = _method_term(merged, model, metric, other, -greedy_weight)
                    first, second = (rival, greedy) if greedy_weight < 0 else (greedy, rival)
                    pairs.append(_row(fid, claim, gt, f"{metric}({first.label}) - {metric}({second.label}) > 0",
                                      [first, second], confidence))
            rows.append(least_favourable(pairs, "every bottleneck and method"))
    return rows


def loss_matched_findings(table: pd.DataFrame, confidence: float, method: str = "pure") -> list[dict]:
    """At matched validation loss a narrower bottleneck has more TBAT (thesis ch. 8's question): at each validation
    loss two or more bottlenecks pass through (a row of the loss-matched table), the narrowest's TBAT minus the
    widest's, their intervals interpolated between each run's checkpoints; it holds if it holds at every such loss."""
    tbat = table[(table["metric"] == "TBAT") & (table["method"] == method) & (table["n_bottlenecks"] >= 2)]
    models = [c for c in table.columns if c.startswith("bn-") and " " not in c]
    pairs = []
    for _, level in tbat.iterrows():
        reached = sorted((m for m in models if pd.notna(level[m])), key=bottleneck_of)
        loss = f"at validation loss {level['val_loss']:.3f}"
        narrow, wide = (Term(f"{m} {loss}", float(level[m]), float(level[f"{m} ci_low"]),
                             float(level[f"{m} ci_high"]), w) for m, w in ((reached[0], 1.0), (reached[-1], -1.0)))
        pairs.append(_row("matched_loss_tbat", "at matched loss a narrower bottleneck has more TBAT", "-",
                          f"TBAT({reached[0]}) - TBAT({reached[-1]}) {loss} > 0", [narrow, wide], confidence))
    return [least_favourable(pairs, "every matched loss")] if pairs else []


def _support_term(table: pd.DataFrame, model: str, method: str, parameter: float, metric: str,
                  weight: float = 1.0) -> Term:
    """One row of the support table (`model`, `method` at `parameter`; NaN for pure) as a term."""
    rows = table[(table["model"] == model) & (table["method"] == method)]
    row = rows[rows["parameter"].isna()] if math.isnan(parameter) else rows[rows["parameter"] == parameter]
    row = row.iloc[0]
    label = f"{method}{'' if math.isnan(parameter) else f' {parameter:g}'} | {model}"
    return Term(label, float(row[f"{metric}_mean"]), float(row[f"{metric}_ci_low"]), float(row[f"{metric}_ci_high"]),
                weight, runs_of(model), SHARE)


def support_findings(table: pd.DataFrame, truth: str, confidence: float, n_levels: int = 5) -> list[dict]:
    """Support recovery against the truth with known support, from the support table, on the family's
    rows (bottlenecks, MoS):
    - every truncation method puts less mass on the truth's zeros than pure sampling (Hewitt et al. 2022): per
      method, false support(pure) - false support(method at v), the least favourable over the models and the grid's
      values v at which the method removes anything (a value that keeps every byte everywhere is pure);
    - the truth's support is not a threshold set of the model's distribution at a nonzero share of positions (the
      thesis's §2.3): the inseparable share of the widest bottleneck (the least favourable of the bottlenecks: the
      smallest share) > 0; and it grows as k shrinks: its narrowest bottleneck's minus its widest's;
    - at matched lost support BA-epsilon keeps less false support than epsilon, and BA-eta than eta (Finlayson et
      al. 2024), per bottleneck: false(epsilon) - false(BA-epsilon) at `n_levels` lost-support levels spread over
      the range both curves cover (each curve interpolated between its grid points), the least favourable level; no
      row for a bottleneck whose two curves share no range of lost support (widen the grids)."""
    family = [m for m in dict.fromkeys(table["model"]) if m.startswith(("bn-", "mos-"))]
    rows = []
    pure = table[table["method"] == "pure"].set_index("model")
    for method in [m for m in dict.fromkeys(table["method"]) if m != "pure"]:
        pairs = []
        for model in family:
            points = table[(table["model"] == model) & (table["method"] == method)]
            for parameter, lost, false in zip(points["parameter"], points["lost_support_mean"],
                                              points["false_support_mean"]):
                if lost == 0 and math.isclose(false, pure.loc[model, "false_support_mean"], rel_tol=1e-6):
                    continue  # keeps every byte at every position: pure itself (to float rounding)
                pairs.append(_row("truncation_cuts_false_support",
                                  f"{METHOD_LABELS[method]} puts less mass on the truth's zeros than pure sampling",
                                  truth, f"false({method} {parameter:g} | {model}) < false(pure | {model})",
                                  [_support_term(table, model, "pure", math.nan, "false_support"),
                                   _support_term(table, model, method, parameter, "false_support", -1.0)],
                                  confidence))
        if pairs:
            rows.append(least_favourable(pairs, "every model and grid value"))
    ks = {bottleneck_of(m): m for m in family if m.startswith("bn-") and m[3:].isdigit()}
    measured = {k: m for k, m in ks.items() if pd.notna(pure.loc[m, "inseparable_mean"])}
    if measured:
        shares = [_row("support_not_threshold_set", "the truth's support is not a threshold set of the model's "
                       "distribution at a nonzero share of positions", truth, f"inseparable share({m}) > 0",
                       [_support_term(table, m, "pure", math.nan, "inseparable")], confidence)
                  for m in measured.values()]
        rows.append(least_favourable(shares, "every bottleneck"))
        narrow, wide = measured[min(measured)], measured[max(measured)]
        if narrow != wide:
            rows.append(_row("inseparable_grows_as_k_shrinks", "the share grows as k shrinks", truth,
                             f"inseparable share({narrow}) - inseparable share({wide}) > 0",
                             [_support_term(table, narrow, "pure", math.nan, "inseparable"),
                              _support_term(table, wide, "pure", math.nan, "inseparable", -1.0)], confidence))
    for bat, plain in (("ba_epsilon", "epsilon"), ("ba_eta", "eta")):
        for k, model in sorted(ks.items()):
            plain_curve, bat_curve = curve(table, model, plain), curve(table, model, bat)
            if not (bat_curve["method"] == bat).any() or not (plain_curve["method"] == plain).any():
                continue
            levels = common_levels(plain_curve, bat_curve, n_levels)
            plain_at, bat_at = at_lost_support(plain_curve, levels), at_lost_support(bat_curve, levels)
            pairs = [_row("bat_keeps_less_false_support",
                          f"at matched lost support {METHOD_LABELS[bat]} keeps less false support than "
                          f"{METHOD_LABELS[plain]}", truth,
                          f"false({plain} | {model}) - false({bat} | {model}) at lost support {level:.3g} > 0",
                          [Term(f"{plain} | {model} at {level:.3g}", p.mean, p.ci_low, p.ci_high, 1.0, runs_of(model),
                                SHARE),
                           Term(f"{bat} | {model} at {level:.3g}", b.mean, b.ci_low, b.ci_high, -1.0,
                                runs_of(model), SHARE)], confidence)
                     for level, p, b in zip(levels, plain_at.itertuples(), bat_at.itertuples())]
            if pairs:  # none where the curves share no range of lost support (a grid too short to match them)
                rows.append(least_favourable(pairs, "every matched lost support"))
    return rows


def token_heads_by_kind(table: pd.DataFrame, column: str) -> dict[str, dict[int, str]]:
    """kind -> {k: head} of the token track's rank-k heads whose `column` is measured (not NaN) in `table`."""
    measured = table[table[column].notna()]["model"].astype(str)
    heads: dict[str, dict[int, str]] = {kind: {} for kind in TOKEN_HEAD_KINDS}
    for model in (m for m in measured if is_token_model(m) and m != TOKEN_REFERENCE):
        kind, k = token_head_parts(model)
        heads[kind][k] = model
    return {kind: ks for kind, ks in heads.items() if ks}


def token_findings(tbat_pure: pd.DataFrame | None, tbat_truncated: pd.DataFrame | None,
                   table_b: pd.DataFrame | None, confidence: float) -> list[dict]:
    """The token track's claims on a real LM's softmax bottleneck, from its Tables E.7, E.8 and B:
    TBAT (pure) falls with rank, per kind of head, from its narrowest head to the full head where it is analysed
    (else the kind's widest); top-p removes most of the widest head's BAT-rejected mass (Finlayson et al.'s
    hypothesis: TBAT(pure) - 2 TBAT(top-p) > 0); the full head has unargmaxable tokens other than its duplicated
    rows, which only a tie keeps from the argmax (Grivas et al.: rarely in practice; an exact count, so its interval
    is that count)."""
    rows = []
    pure = "Pure mean"
    if tbat_pure is not None and pure in tbat_pure:
        full = TOKEN_REFERENCE if TOKEN_REFERENCE in set(tbat_pure[tbat_pure[pure].notna()]["model"]) else None
        for kind, heads in token_heads_by_kind(tbat_pure, pure).items():
            narrow, wide = heads[min(heads)], full or heads[max(heads)]
            if narrow != wide:
                rows.append(_row("token_tbat_falls_with_rank", f"a real LM's TBAT falls with rank ({kind} heads)",
                                 "-", f"TBAT({narrow}) - TBAT({wide}) > 0 (pure)",
                                 [_term(tbat_pure, narrow, "Pure "), _term(tbat_pure, wide, "Pure ", weight=-1.0)],
                                 confidence))
        truncated = "Top-P mean"
        if tbat_truncated is not None and truncated in tbat_truncated:
            both = tbat_pure[["model", pure]].merge(tbat_truncated[["model", truncated]], on="model").dropna()
            widest = [TOKEN_REFERENCE] if TOKEN_REFERENCE in set(both["model"]) else \
                [heads[max(heads)] for heads in token_heads_by_kind(both, pure).values()]
            for model in widest:
                rows.append(_row("token_top_p_removes_tbat", "top-p removes most of the BAT-rejected mass", "-",
                                 f"TBAT({model}) - 2 TBAT(top-p | {model}) > 0 (pure against top-p)",
                                 [_term(tbat_pure, model, "Pure ", label=f"pure | {model}"),
                                  _term(tbat_truncated, model, "Top-P ", weight=-2.0, label=f"top-p | {model}")],
                                 confidence))
    if table_b is not None and (table_b["model"] == TOKEN_REFERENCE).any():
        row = table_b.set_index("model").loc[TOKEN_REFERENCE]
        duplicated, failed = int(row["n_duplicated"]), int(row["n_failed"])
        count = int(row["n_unargmaxable"]) - duplicated  # a row equal to another is never a strict argmax: a tie
        decided = HOLDS if count > 0 else (FAILS if failed == 0 else UNDECIDED)
        rows.append({"id": "full_head_unargmaxable", "claim": "the full head has unargmaxable tokens",
                     "ground_truth": "-", "test": f"n_unargmaxable({TOKEN_REFERENCE}) - n_duplicated > 0 (exact: "
                                                  "an LP proof each)",
                     "runs": 1, "estimate": float(count), "ci_low": float(count), "ci_high": float(count),
                     "verdict": decided, "evidence": f"{count} of {int(row['vocabulary'])} tokens unargmaxable "
                                                     f"besides {duplicated} duplicated rows, {failed} undecided by "
                                                     "a solver failure"})
    return rows


def findings_table(rows: Sequence[dict]) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=FINDINGS_COLUMNS)


def findings_markdown(table: pd.DataFrame) -> str:
    """A findings table as markdown: one line per claim and ground truth, its estimate, interval and verdict."""
    lines = ["| claim | against | test | runs | estimate [interval] | verdict |", "|---|---|---|---|---|---|"]
    for row in table.itertuples():
        lines.append(f"| {row.claim} | {row.ground_truth} | `{row.test}` | {row.runs} | {row.estimate:.3g} "
                     f"[{row.ci_low:.3g}, {row.ci_high:.3g}] | **{row.verdict}** |")
    return "\n".join(lines) + "\n"


def findings_page(table: pd.DataFrame, confidence: float, title: str = "The thesis's findings as tests") -> str:
    """The findings as a page (`results/tables/findings.md`, `token_findings.md`): how many claims hold, fail or are
    undecided, what the verdicts mean, and the table."""
    counts = table["verdict"].value_counts()
    tally = ", ".join(f"{int(counts.get(v, 0))} {v}" for v in (HOLDS, FAILS, UNDECIDED))
    intro = (f"{len(table)} tests: {tally}. Each is a difference the thesis says is positive, with its "
             f"{confidence:.0%} interval combined from the tables' bootstrap intervals. **holds**: the interval lies "
             "above 0; **fails**: below 0; **undecided**: it holds 0. `runs`: the training runs (seeds) of each "
             "compared model that the interval covers (across-seed means where the config trains several); a verdict "
             "on one run is about that run, not about another seed of the same model. Each test is defined in the "
             "project's docs/results.md.")
    return f"# {title}\n\n{intro}\n\n{findings_markdown(table)}"
