"""Sample-quality metrics on hand-made texts; perplexity through a real saved transformers model, offline."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from oversmooth.data.prompts import human_samples
from oversmooth.generation.quality import (
    at_floor,
    average_word_length,
    bits_per_byte,
    byte_tv,
    continuation_nll,
    has_repetition,
    mauve_replicates,
    mauve_scores,
    perplexities,
    summarise_quality,
    valid_word_ratio,
    words,
)
from oversmooth.models.causallm import load_causal_lm
from oversmooth.reporting.figures import figure_token_quality, method_colors
from oversmooth.reporting.quality_report import quality_table, samples_markdown
from oversmooth.workflow.outputs import nearest_models


def test_words_strip_punctuation_digits_and_case():
    assert words("Don't stop-2day! Über café_x, 42.") == ["don't", "stop", "day", "über", "café", "x"]
    assert words("") == [] and words("123 !!") == []


def test_valid_words_use_both_lexicons_and_empty_samples_have_no_value():
    assert valid_word_ratio("The quick brown fox") == 1.0
    assert valid_word_ratio("the xqzvt fox jumped") == 0.75  # 'jumped' is an inflection: wordfreq knows it
    assert math.isnan(valid_word_ratio("12 34 !!"))


def test_average_word_length_and_empty_samples():
    assert average_word_length("ab, abcd!") == 3.0
    assert math.isnan(average_word_length(" ... "))


def test_repetition_is_a_repeated_word_n_gram():
    assert has_repetition("we shall fight, we shall fight on", 3)
    assert not has_repetition("we shall fight, we shall not fight", 3)
    assert not has_repetition("a b", 4)


def test_byte_tv_compares_two_separate_histograms():
    assert byte_tv([b"aabb"], [b"aabb"]) == 0.0
    assert byte_tv([b"aaaa"], [b"bbbb"]) == 1.0
    assert byte_tv([b"ab"], [b"aaab"]) == pytest.approx(0.25)  # model (.5, .5) vs human (.75, .25)


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    """A real GPT-2 with a word-level tokenizer, saved by transformers and loaded back from disk."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-lm")
    vocab = {w: i for i, w in enumerate(["[UNK]", "<s>", "the", "cat", "sat", "on", "mat", "a", "dog", "."])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]", bos_token="<s>").save_pretrained(folder)
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(vocab_size=len(vocab), n_positions=32, n_embd=16, n_layer=1, n_head=2)).save_pretrained(folder)
    return load_causal_lm(folder)


def test_perplexity_is_conditioned_on_the_prompt(tiny_lm):
    model, tokenizer = tiny_lm
    got = perplexities(model, tokenizer, ["the cat", "a dog"], ["sat on the mat", "sat ."], batch_size=2)
    ids = [1, 2, 3, 4, 5, 2, 6]  # <s> the cat | sat on the mat
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids])).logits[0], -1)
    expected = math.exp(-np.mean([logp[t - 1, ids[t]].item() for t in range(3, 7)]))
    assert got[0] == pytest.approx(expected, rel=1e-5)
    alone = perplexities(model, tokenizer, [""], ["sat on the mat"])[0]
    assert alone != pytest.approx(got[0])  # the prompt matters
    assert math.isnan(perplexities(model, tokenizer, ["the cat"], [""])[0])
    total, count = continuation_nll(model, tokenizer, ["the cat"], ["sat on the mat"])
    assert count[0] == 4 and total[0] == pytest.approx(4 * math.log(expected), rel=1e-5)
    bpb = bits_per_byte(total, [b"sat on the mat"])
    assert bpb[0] == pytest.approx(total[0] / math.log(2) / 14)
    assert math.isnan(bits_per_byte(np.zeros(1), [b""])[0])


def test_batches_sorted_by_length_give_each_pair_its_own_perplexity(tiny_lm):
    model, tokenizer = tiny_lm
    prompts, continuations = ["a", "the cat sat on", "dog", ""], ["dog .", "the mat . a dog sat", "sat", "the cat"]
    together = perplexities(model, tokenizer, prompts, continuations, batch_size=3)
    alone = [perplexities(model, tokenizer, [p], [c])[0] for p, c in zip(prompts, continuations)]
    assert together == pytest.approx(alone, rel=1e-5)
    assert len(set(np.round(alone, 6))) == 4


def test_load_causal_lm_names_a_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="quality.perplexity_model"):
        load_causal_lm(tmp_path / "nope")


def test_summary_counts_and_corpus_metrics():
    per_sample = pd.DataFrame(
        {"method": ["pure"] * 4, "perplexity": [10.0, 20.0, np.nan, 30.0], "bits_per_byte": [1.0, 2.0, np.nan, 3.0],
         "valid_word_ratio": [1, 0.5, np.nan, 0.5],
         "avg_word_length": [3.0, 4.0, np.nan, 5.0], "repeated": [True, False, False, False]}
    )
    continuations = {"pure": [b"aa", b"bb", b"", b"ab"]}
    summary = summarise_quality(per_sample, continuations, [b"ab"], {"pure": [0.9, 0.8]}, n_boot=200, confidence=0.95, seed=0)
    row = summary.iloc[0]
    assert row["perplexity_mean"] == 20.0 and row["perplexity_n"] == 3 and row["n_samples"] == 4
    assert row["bits_per_byte_mean"] == 2.0
    assert row["repetition"] == 0.25 and row["byte_tv"] == 0.0
    assert row["mauve_mean"] == pytest.approx(0.85) and row["mauve_seeds"] == 2 and row["mauve_seeds_at_floor"] == 0
    assert row["perplexity_ci_low"] <= 20.0 <= row["perplexity_ci_high"]
    assert row["repetition_ci_low"] == 0.0 and 0.25 < row["repetition_ci_high"] <= 1.0
    floor = summarise_quality(per_sample, continuations, [b"ab"], {"pure": [np.nan, np.nan]}, n_boot=200, confidence=0.95, seed=0)
    assert math.isnan(floor.iloc[0]["mauve_mean"]) and floor.iloc[0]["mauve_seeds_at_floor"] == 2
    assert math.isnan(row["mauve_ci_low"]) and row["mauve_replicates"] == 0  # no replicates: no interval
    replicated = summarise_quality(per_sample, continuations, [b"ab"], {"pure": [0.9, 0.8]},
                                   mauve_boot={"pure": np.array([0.1, 0.2, np.nan, 0.3, 0.4, 0.5])}, n_boot=200,
                                   confidence=0.5, seed=0).iloc[0]
    # the percentile interval of the finite replicates (floor ones left out): quartiles of 0.1..0.5
    assert (replicated["mauve_ci_low"], replicated["mauve_ci_high"]) == pytest.approx((0.2, 0.4))
    assert replicated["mauve_replicates"] == 6


def test_samples_a_truth_with_zeros_never_writes_are_counted_and_the_rest_scored():
    # a truncated truth (known support): a sample holding a byte it gives probability 0 scores +inf bits per byte
    bits = np.array([2.0, np.inf, 4.0, np.inf])
    per_sample = pd.DataFrame(
        {"method": ["pure"] * 4, "perplexity": [1.0] * 4, "bits_per_byte": [1.0] * 4, "valid_word_ratio": [1.0] * 4,
         "avg_word_length": [3.0] * 4, "repeated": [False] * 4, "truth_bits_per_byte": bits,
         "truth_zero": np.isposinf(bits)})
    row = summarise_quality(per_sample, {"pure": [b"a"] * 4}, [b"a"], {}, n_boot=200, confidence=0.95, seed=0).iloc[0]
    assert row["truth_zero_share"] == 0.5 and row["truth_zero_share_ci_low"] <= 0.5 <= row["truth_zero_share_ci_high"]
    assert row["truth_bits_per_byte_mean"] == 3.0 and row["truth_bits_per_byte_n"] == 2  # the rest
    assert row["n_samples"] == 4
    every = summarise_quality(per_sample.assign(truth_bits_per_byte=np.inf, truth_zero=True), {"pure": [b"a"] * 4},
                              [b"a"], {}, n_boot=200, confidence=0.95, seed=0).iloc[0]
    assert every["truth_zero_share"] == 1.0 and every["truth_bits_per_byte_mean"] == np.inf
    assert "truth_zero_share" not in summarise_quality(per_sample.drop(columns=["truth_bits_per_byte", "truth_zero"]),
                                                       {"pure": [b"a"] * 4}, [b"a"], {}, n_boot=20, confidence=0.95,
                                                       seed=0)  # no teacher, no column


def test_mauve_is_not_reported_at_its_floor():
    """Disjoint k-means buckets give MAUVE one constant value whatever the texts: NaN, not a number."""
    rng = np.random.default_rng(0)
    axis = np.eye(8, dtype=np.float32)
    human = (axis[0] + 0.1 * rng.normal(size=(40, 8))).astype(np.float32)
    gibberish = (axis[1] + 0.1 * rng.normal(size=(40, 8))).astype(np.float32)  # another direction entirely
    assert all(math.isnan(s) for s in mauve_scores(gibberish, human, seeds=[1, 2]))
    alike = mauve_scores((axis[0] + 0.1 * rng.normal(size=(40, 8))).astype(np.float32), human, seeds=[1, 2])
    assert all(0.1 < s <= 1.0 for s in alike)
    assert at_floor(np.array([0.5, 0.5, 0.0]), np.array([0.0, 0.0, 1.0]))
    assert not at_floor(np.array([0.5, 0.5, 0.0]), np.array([0.0, 0.1, 0.9]))


def test_mauve_replicates_resample_both_sides_and_separate_near_from_far_texts():
    rng = np.random.default_rng(1)
    human = rng.normal(size=(60, 8)).astype(np.float32)
    near = rng.normal(size=(60, 8)).astype(np.float32)  # the same distribution
    far = (rng.normal(size=(60, 8)) + 1.5 * np.eye(8)[0]).astype(np.float32)
    near_boot = mauve_replicates(near, human, seeds=[1, 2], n_boot=12, seed=0)
    far_boot = mauve_replicates(far, human, seeds=[1, 2], n_boot=12, seed=0)
    assert near_boot.shape == (12,) and np.all((near_boot > 0) & (near_boot <= 1))
    assert np.nanquantile(far_boot, 0.9) < np.nanquantile(near_boot, 0.1)
    assert len(set(np.round(near_boot, 12))) > 1  # resampled: not one value repeated
    assert np.array_equal(mauve_replicates(near, human, seeds=[1, 2], n_boot=12, seed=0), near_boot, equal_nan=True)


def test_token_quality_figure_has_a_line_per_method_and_kind_with_full_and_human_references():
    rows = []
    for model in ("tok-svd-r4", "tok-learned-r4", "tok-svd-r16", "tok-learned-r16", "tok-full"):
        for method in ("pure", "top_p"):
            rows.append({"model": model, "method": method, **{f"{m}_{s}": 0.5 for m in ("mauve", "bits_per_byte",
                         "valid_word_ratio") for s in ("mean", "ci_low", "ci_high")},
                         "repetition": 0.1, "repetition_ci_low": 0.0, "repetition_ci_high": 0.2})
    human = pd.DataFrame([{"model": "human", "method": "human", "mauve_mean": np.nan, "bits_per_byte_mean": 1.0,
                           "valid_word_ratio_mean": 0.9, "repetition": 0.0}])
    rows[0]["mauve_ci_low"] = 0.6  # MAUVE's bootstrap interval may lie beside its estimate: drawn as it is
    fig = figure_token_quality(pd.DataFrame(rows), human)
    mauve_axis, bpb_axis = fig.axes[:2]
    assert len(mauve_axis.collections) == 4  # an interval per (pure, top_p) x (svd, learned) line over k
    assert len(mauve_axis.lines) - 4 == 2  # full head per method; no human line where MAUVE has no human value
    assert len(bpb_axis.lines) - 4 == 3  # ... and the human line where it has one
    assert list(mauve_axis.lines[0].get_xdata()) == [4, 16]
    assert mauve_axis.collections[0].get_segments()[0].tolist() == [[4, 0.6], [4, 0.5]]


def test_quality_tables_and_sample_markdown():
    summaries = {
        m: pd.DataFrame({"method": meths, "perplexity_mean": range(len(meths)), "model": m})
        for m, meths in (("bn-4", ["pure", "greedy"]), ("bn-8", ["pure", "greedy"]), ("human", ["human"]))
    }
    table = quality_table(summaries, ["bn-4", "bn-8"], ["pure"])
    assert table["model"].tolist() == ["bn-4", "bn-8", "human"] and table["method"].tolist() == ["Pure", "Pure", "Human"]
    assert nearest_models(["bn-4", "bn-16", "bn-256"]) == ["bn-4", "bn-16"]
    prompts = pd.DataFrame({"prompt_id": [7], "sample_prefix": [b"Hello |"], "human_continuation": [b"world*"]})
    human = human_samples(prompts, None)
    samples = pd.DataFrame({"model": ["bn-4"], "method": ["pure"], "prompt_id": [7], "text": ["x\ny"]})
    md = samples_markdown(samples, human, ["bn-4"], ["pure"], 7, "T")
    assert "| Human | — | **Hello \\|**world\\* |" in md and "| bn-4 | Pure | **Hello \\|**x ⏎ y |" in md


def test_the_truncation_quality_table_and_appendix_g_show_ba_only_where_a_model_samples_it_and_mirostat():
    """BA-epsilon is sampled by bn-4 (one head matrix), not by mos-4; mirostat, a sampler-only method, has its label."""
    summaries = {
        m: pd.DataFrame({"method": meths, "perplexity_mean": [float(i) for i in range(len(meths))], "model": m})
        for m, meths in (("bn-4", ["pure", "epsilon", "mirostat", "ba_epsilon"]), ("mos-4", ["pure", "epsilon", "mirostat"]),
                         ("human", ["human"]))
    }
    table = quality_table(summaries, ["bn-4", "mos-4"], ["epsilon", "ba_epsilon", "mirostat"])  # config order
    assert list(zip(table["model"], table["method"], table["perplexity_mean"])) == [
        ("bn-4", "Epsilon", 1.0), ("bn-4", "BA-Epsilon", 3.0), ("bn-4", "Mirostat", 2.0), ("mos-4", "Epsilon", 1.0),
        ("mos-4", "Mirostat", 2.0), ("human", "Human", 0.0)]  # no BA-Epsilon row for mos-4, none made up
    prompts = pd.DataFrame({"prompt_id": [7], "sample_prefix": [b"Hi "], "human_continuation": [b"there"]})
    samples = pd.DataFrame({"model": ["bn-4", "bn-4", "mos-4"], "method": ["ba_epsilon", "mirostat", "mirostat"],
                            "prompt_id": [7, 7, 7], "text": ["a", "b", "c"]})
    md = samples_markdown(samples, human_samples(prompts, None), ["bn-4", "mos-4"], ["ba_epsilon", "mirostat"], 7, "G")
    rows = [line for line in md.splitlines() if line.startswith("| bn-") or line.startswith("| mos-")]
    assert rows == ["| bn-4 | BA-Epsilon | **Hi **a |", "| bn-4 | Mirostat | **Hi **b |", "| mos-4 | Mirostat | **Hi **c |"]


def test_the_token_quality_figure_gives_each_of_many_methods_its_own_colour():
    methods = ["pure", "greedy", "top_k", "top_p", "temperature", "epsilon", "eta", "typical", "min_p", "ba_epsilon",
               "ba_eta", "mirostat"]
    colours = method_colors(methods)
    assert len(set(map(str, colours.values()))) == 12 and set(colours) == set(methods)


def test_continuations_of_one_prompt_in_batches_give_each_pair_its_own_nll_against_a_whole_forward_pass(tiny_lm):
    """The sample jobs score several continuations a prompt: each pair's NLL is that of one forward pass over its
    own tokens, in batches smaller than their number, beside other prompts, an empty continuation and a pair longer
    than the model's 32 positions (its last 32 tokens, as alone)."""
    model, tokenizer = tiny_lm
    long = " ".join(["the cat sat on the mat ."] * 5)  # 35 tokens after <s> and the prompt
    prompts = ["the cat", "the cat", "a dog", "the cat", "the cat", ""]
    continuations = ["sat on the mat", "sat .", "sat", long, "", "the cat"]
    total, count = continuation_nll(model, tokenizer, prompts, continuations, batch_size=2)
    for i, (p, c) in enumerate(zip(prompts, continuations)):
        ids = [1] + tokenizer(p, add_special_tokens=False).input_ids + tokenizer(c, add_special_tokens=False).input_ids
        n_tail = len(tokenizer(c, add_special_tokens=False).input_ids)
        ids = ids[-32:]
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), -1)
        scored = range(len(ids) - min(n_tail, len(ids) - 1), len(ids))
        assert count[i] == len(scored) == min(n_tail, 31)
        assert total[i] == pytest.approx(-sum(logp[t - 1, ids[t]].item() for t in scored), rel=1e-5, abs=1e-9), i
