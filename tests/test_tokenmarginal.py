"""Byte marginalisation of a token-level LM, against brute force over every tokenisation.

On `tiny_token_lm` (conftest): a byte-level BPE tokenizer trained by the test and a tiny random Llama, saved with
`save_pretrained` and loaded back the way the pipeline loads a ground truth.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from oversmooth.models.tokenmarginal import (
    GROUPED_ATTENTION,
    MarginalSettings,
    TokenModelError,
    TokenVocabulary,
    gpt2_byte_decoder,
    grouped_sdpa,
    growing_cache,
    load_token_byte_lm,
)

EXACT = MarginalSettings(beam=0, prune_ratio=0.0, context_backoff_tokens=1, batch_size=4)

def _tokenisations(vocab: TokenVocabulary, text: bytes) -> list[list[int]]:
    """Every sequence of tokens that spells `text` exactly."""
    if not text:
        return [[]]
    return [[token] + rest for token, n in vocab.spelled(text, 0) for rest in _tokenisations(vocab, text[n:])]


@torch.no_grad()
def _brute_force_next_byte(lm, prefix: list[int], text: bytes) -> np.ndarray:
    """p(b | text) over 256 bytes, summing P(cover) over every cover of text + b, one full forward per hypothesis."""
    mass = np.zeros(256)
    for j in range(len(text) + 1):
        for tokens in _tokenisations(lm.vocab, text[:j]):
            ids = torch.tensor([prefix + tokens])
            logprobs = torch.log_softmax(lm.model(input_ids=ids).logits[0].double(), -1)
            logp = sum(float(logprobs[len(prefix) - 1 + n, t]) for n, t in enumerate(tokens))
            final = logprobs[-1].exp().numpy()
            for v, spelling in enumerate(lm.vocab.token_bytes):
                if spelling and len(spelling) > len(text) - j and spelling.startswith(text[j:]):
                    mass[spelling[len(text) - j]] += math.exp(logp) * final[v]
    return mass


def test_next_byte_distributions_equal_the_sum_over_all_tokenisations(tiny_token_lm):
    lm = load_token_byte_lm("tiny", tiny_token_lm, EXACT)
    text = "the cat é".encode()  # ends inside nothing; é is two bytes, the last position predicts its second
    context_end = 3  # outputs from position 3: "the " is context
    ours = lm.marginal_logprobs([text], [context_end])[0]
    prefix, spelled = lm.split_context(text, context_end)
    assert ours.shape == (len(text) - context_end, 256)
    for t in range(context_end, len(text)):
        mass = _brute_force_next_byte(lm, prefix, text[spelled : t + 1])
        expected = mass / mass.sum()
        assert np.allclose(np.exp(ours[t - context_end]), expected, atol=1e-6), t
    assert np.allclose(np.exp(ours).sum(axis=1), 1.0, atol=1e-6)


def test_chain_rule_gives_the_prefix_probability_at_least_the_canonical_one(tiny_token_lm):
    lm = load_token_byte_lm("tiny", tiny_token_lm, EXACT)
    bos = lm.tokenizer.bos_token_id  # an LM that never emits its one special token: all its mass spells bytes
    lm.model.lm_head.register_forward_hook(lambda module, inputs, out: out.index_fill(-1, torch.tensor([bos]), -math.inf))
    text = b"the hat sat."
    ours = lm.marginal_logprobs([text], [0])[0]
    prefix, spelled = lm.split_context(text, 0)
    assert spelled == 0 and prefix == [lm.tokenizer.bos_token_id]
    chain = sum(float(ours[t, text[t + 1]]) for t in range(len(text) - 1))  # float32 outputs, summed in float64
    # P(text[1:] as a prefix | BOS, text[0]) by brute force: prefix mass of text over that of its first byte
    total = _brute_force_next_byte(lm, prefix, text[:-1])[text[-1]]
    first = _brute_force_next_byte(lm, prefix, b"")[text[0]]
    assert chain == pytest.approx(math.log(total / first), abs=1e-5)
    canonical = lm.tokenizer(text.decode(), add_special_tokens=False).input_ids
    with torch.no_grad():
        logprobs = torch.log_softmax(lm.model(input_ids=torch.tensor([prefix + canonical])).logits[0].double(), -1)
    canonical_logp = sum(float(logprobs[n, t]) for n, t in enumerate(canonical))
    assert math.log(total) >= canonical_logp


def test_batched_texts_of_different_lengths_match_one_at_a_time(tiny_token_lm):
    lm = load_token_byte_lm("tiny", tiny_token_lm, EXACT)
    texts, firsts = [b"the cat sat", b"that is the hat on a mat.", "caf\xc3".encode("latin-1")], [2, 9, 1]
    together = lm.marginal_logprobs(texts, firsts)
    for text, first, batched in zip(texts, firsts, together):
        alone = lm.marginal_logprobs([text], [first])[0]
        assert np.allclose(batched, alone, atol=1e-5)


def test_the_bytelm_interface_pads_with_nan_before_the_first_output(tiny_token_lm):
    lm = load_token_byte_lm("tiny", tiny_token_lm, EXACT)
    x = torch.tensor([list(b"the cat sat"), list(b"on the mat.")])
    out = lm.next_byte_outputs(x, outputs_from=[3, 5])
    assert out.logprobs.shape == (2, 11, 256) and out.pre.shape == (2, 11, 32) and out.post is out.pre
    assert torch.isnan(out.pre[0, :3]).all() and torch.isfinite(out.pre[0, 3:]).all()
    assert torch.isnan(out.logprobs[0, :3]).all() and torch.isfinite(out.logprobs[0, 3:]).all()
    assert torch.isnan(out.logprobs[1, :5]).all() and torch.isfinite(out.logprobs[1, 5:]).all()


def test_sampling_with_the_kept_search_draws_the_bytes_of_a_search_from_scratch_per_byte(tiny_token_lm):
    from oversmooth.analysis.decoding import Decoding
    from oversmooth.generation.sampling import draw, generate, stepper_for, uniforms_for

    lm = load_token_byte_lm("tiny", tiny_token_lm, MarginalSettings(beam=3, prune_ratio=1e-3, context_backoff_tokens=1))
    prefixes = torch.tensor([list(b"the cat "), list(b"on the m")])
    uniforms = uniforms_for([11, 12], 12)
    for decoding in (Decoding("pure"), Decoding("top_k", top_k=5)):
        cached = generate(stepper_for(lm), prefixes, decoding, uniforms)
        texts = [bytes(row) for row in prefixes.tolist()]
        for t in range(uniforms.size(1)):  # no cache: read each whole text again for every byte, same fixed prefix
            logprobs = torch.from_numpy(np.stack([r[-1] for r in lm.marginal_logprobs(texts, [7, 7])]))
            byte = draw(logprobs, decoding, uniforms[:, t])
            texts = [x + bytes([b]) for x, b in zip(texts, byte.tolist())]
        assert [x[8:] for x in texts] == [bytes(row) for row in cached.tolist()], decoding.method


def test_pruning_and_the_beam_stay_close_to_exact(tiny_token_lm):
    text = b"the cat sat on the hat, then"  # exact: 3 s here (" tea." added: 47 s); pruning moves up to 5e-4
    exact = load_token_byte_lm("tiny", tiny_token_lm, EXACT).marginal_logprobs([text], [4])[0]
    pruned_lm = load_token_byte_lm("tiny", tiny_token_lm, MarginalSettings(beam=4, prune_ratio=1e-4, context_backoff_tokens=1))
    pruned = pruned_lm.marginal_logprobs([text], [4])[0]
    tv = 0.5 * np.abs(np.exp(exact) - np.exp(pruned)).sum(axis=1)
    assert tv.max() < 1e-2


def test_the_from_scratch_reference_agrees_exactly_and_under_the_same_pruning(tiny_token_lm):
    """The benchmark's baseline (one full forward per hypothesis, no cache) against brute force and our search."""
    from oversmooth.analysis import reference

    text = b"the cat sat on"
    for settings in (EXACT, MarginalSettings(beam=2, prune_ratio=1e-2, context_backoff_tokens=1)):
        lm = load_token_byte_lm("tiny", tiny_token_lm, settings)
        ours = np.exp(lm.marginal_logprobs([text], [3])[0])
        prefix, spelled = lm.split_context(text, 3)
        for t in (3, 7, len(text) - 1):
            naive = reference.token_marginal_next_byte(lm.model, lm.vocab.token_bytes, prefix, text[spelled : t + 1],
                                                       beam=settings.beam, prune_ratio=settings.prune_ratio)
            assert np.allclose(ours[t - 3], naive, atol=1e-6), (settings, t)
            if settings is EXACT:
                mass = _brute_force_next_byte(lm, prefix, text[spelled : t + 1])
                assert np.allclose(naive, mass / mass.sum(), atol=1e-6)


def test_not_byte_level_bpe_and_missing_folders_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="ground truth 'smol': no model folder"):
        load_token_byte_lm("smol", tmp_path / "nowhere")

    class WordPiece:
        all_special_ids = [0]

        def __len__(self):
            return 3

        def convert_ids_to_tokens(self, ids):
            return ["[PAD]", "hello", "##ing"]

    with pytest.raises(TokenModelError, match="not byte-level BPE: it has no single-byte token for plain-text"):
        TokenVocabulary.from_tokenizer(WordPiece(), "wp")

    class Unicode(WordPiece):
        def convert_ids_to_tokens(self, ids):
            return ["[PAD]", "héllo", "ing"]  # é is not a character of the byte alphabet

    with pytest.raises(TokenModelError, match="not byte-level BPE"):
        TokenVocabulary.from_tokenizer(Unicode(), "uni")


def test_a_text_longer_than_the_model_window_is_an_error(tiny_token_lm):
    lm = load_token_byte_lm("tiny", tiny_token_lm, EXACT)
    with pytest.raises(TokenModelError, match="more than the model's window of 512"):
        lm.marginal_logprobs([b"x" * 600], [550])


def test_byte_alphabet_covers_every_byte_once():
    decoder = gpt2_byte_decoder()
    assert sorted(decoder.values()) == list(range(256)) and decoder["Ġ"] == ord(" ")


def test_logit_extraction_writes_the_marginal_distributions_and_hidden_states(tiny_token_lm, tmp_path):
    """The pipeline's extraction path: one pass per prompt, outputs only over the window."""
    from conftest import prompts_table

    from oversmooth.core.io import read_parquet
    from oversmooth.extraction.logit_tables import LOGITS_SCHEMA, list_to_numpy
    from oversmooth.extraction.logits import extract_logits

    lm = load_token_byte_lm("gt-tiny", tiny_token_lm, EXACT)
    prompts = prompts_table(3, context_len=12, window_len=6, seed=1)
    extract_logits(lm, prompts, tmp_path / "l.parquet", tmp_path / "h.parquet", batch_size=2, min_context=None,
                   hidden_positions=5, seed=0)
    table = read_parquet(tmp_path / "l.parquet")
    assert table.schema.equals(LOGITS_SCHEMA) and table.num_rows == 3 * 6
    written = list_to_numpy(table.column("logprobs"))
    for i in range(3):
        text = prompts.column("context")[i].as_py() + prompts.column("window")[i].as_py()
        expected = lm.marginal_logprobs([text[:-1]], [11])[0]
        assert np.allclose(written[6 * i : 6 * i + 6], expected, atol=1e-5)
    hidden = read_parquet(tmp_path / "h.parquet")
    assert hidden.num_rows == 5 and hidden.schema.field("pre").type.list_size == 32
    assert np.isfinite(list_to_numpy(hidden.column("pre"))).all()


def test_grouped_attention_equals_transformers_sdpa_with_repeated_heads():
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    module = torch.nn.Module()
    module.num_key_value_groups, module.is_causal = 3, False
    generator = torch.Generator().manual_seed(0)
    query = torch.randn(2, 6, 4, 8, generator=generator)  # 6 query heads over 2 key/value heads
    key, value = torch.randn(2, 2, 10, 8, generator=generator), torch.randn(2, 2, 10, 8, generator=generator)
    allowed = torch.rand(2, 1, 4, 10, generator=generator) > 0.4
    allowed[..., 0] = True
    mask = torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min)
    ours, _ = grouped_sdpa(module, query, key, value, mask, scaling=0.3)
    theirs, _ = sdpa_attention_forward(module, query, key, value, mask, scaling=0.3)
    assert ours.shape == theirs.shape == (2, 4, 6, 8)
    assert torch.allclose(ours, theirs, atol=1e-6)


def test_the_growing_cache_returns_what_concatenation_would():
    cache, generator = growing_cache(), torch.Generator().manual_seed(0)
    keys, values = [], []
    for added in (200, 1, 60, 3, 300):  # past the first buffer (256) and past a doubling
        keys.append(torch.randn(2, 3, added, 4, generator=generator))
        values.append(torch.randn(2, 3, added, 4, generator=generator))
        got_keys, got_values = cache.update(keys[-1], values[-1], 0)
        assert torch.equal(got_keys, torch.cat(keys, dim=-2)) and torch.equal(got_values, torch.cat(values, dim=-2))
    assert cache.get_seq_length() == 564


def test_a_search_past_the_first_cache_buffer_matches_transformers_dynamic_cache(tiny_token_lm, monkeypatch):
    import oversmooth.models.tokenmarginal as tokenmarginal

    text = b"the cat sat on the mat, that hat; the cat ate. " * 4
    lm = load_token_byte_lm("tiny", tiny_token_lm, MarginalSettings(beam=8, prune_ratio=0.0, context_backoff_tokens=1))
    ours = lm.marginal_logprobs([text, text[:100]], [5, 3])
    assert lm.steps > 300  # hypotheses, each a cache slot: the 256-slot buffer grew
    monkeypatch.setattr(tokenmarginal, "growing_cache", lambda: None)  # transformers' DynamicCache, by concatenation
    theirs = lm.marginal_logprobs([text, text[:100]], [5, 3])
    for a, b in zip(ours, theirs):
        assert np.allclose(a, b, atol=1e-5)


def test_the_search_gives_the_same_distributions_with_transformers_own_attention(tiny_token_lm):
    text = "the cat sat on the mat".encode()
    lm = load_token_byte_lm("tiny", tiny_token_lm, EXACT)
    assert lm.model.config._attn_implementation == GROUPED_ATTENTION
    ours = lm.marginal_logprobs([text, text[:9]], [3, 2])
    lm.model.set_attn_implementation("sdpa")
    theirs = lm.marginal_logprobs([text, text[:9]], [3, 2])
    for a, b in zip(ours, theirs):
        assert np.allclose(a, b, atol=1e-5)


def test_the_token_level_figure_is_the_own_tokenisation_and_bounds_the_marginal(tiny_token_lm):
    lm = load_token_byte_lm("tiny", tiny_token_lm, EXACT)
    text = "the cat sat on the mat".encode()
    ids = lm.tokenizer(text.decode(), add_special_tokens=False).input_ids
    assert lm.own_tokens(text) == ids
    with torch.no_grad():
        logprobs = torch.log_softmax(lm.model(input_ids=torch.tensor([lm.bos + ids])).logits[0].double(), -1)
    first = _brute_force_next_byte(lm, lm.bos, b"")
    expected = -sum(float(logprobs[n, t]) for n, t in enumerate(ids)) + math.log(first[text[0]] / first.sum())
    # float32 model, two computation paths (a cached search and one forward pass): equal to float32 rounding (they
    # agreed to 1e-9 on some runs and differed by 6e-9 on others, with the same tokenizer training)
    assert lm.canonical_nats([text]) == pytest.approx(expected, rel=1e-6)
    marginal = lm.marginal_logprobs([text], [0])[0]
    marginal_nats = -sum(float(marginal[t - 1, text[t]]) for t in range(1, len(text)))
    assert marginal_nats <= expected + 1e-9  # every tokenisation, its own among them
    cut = "é cat".encode()[1:]  # starts inside a character
    assert lm.own_tokens(cut)[0] == lm.vocab.token_of[cut[:1]]
    assert b"".join(lm.vocab.token_bytes[i] for i in lm.own_tokens(cut)) == cut


def test_a_bfloat16_model_gives_distributions_close_to_float32(tiny_token_lm):
    """GPU runs load the ground truth in bf16: the search's mask and outputs follow the model's dtype."""
    text = "the cat sat on the mat".encode()
    exact = load_token_byte_lm("tiny", tiny_token_lm, EXACT).marginal_logprobs([text], [3])[0]
    half = load_token_byte_lm("tiny", tiny_token_lm, EXACT, dtype="bfloat16").marginal_logprobs([text], [3])[0]
    assert np.allclose(np.exp(half).sum(axis=1), 1.0, atol=1e-5)
    assert np.abs(np.exp(half) - np.exp(exact)).sum(axis=1).max() < 0.1
