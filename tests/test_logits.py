"""Logit extraction: the pass plan, teacher forcing against one pass per position, the Parquet layout."""

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from conftest import prompts_table

from oversmooth.extraction.logit_tables import (
    LOGITS_SCHEMA,
    ROW_GROUP_ROWS,
    LogitsError,
    iter_aligned_logits,
    iter_logits,
)
from oversmooth.extraction.logits import extract_logits, hidden_subset, plan_passes
from oversmooth.models.bytelm import GPTByteLM, load_hf_byte_lm
from oversmooth.models.model import GPT, GPTConfig


def tiny_gpt(block=32, bottleneck=4, seed=0):
    torch.manual_seed(seed)
    return GPTByteLM(f"bn-{bottleneck}", GPT(GPTConfig(block_size=block, n_layer=1, n_head=2, n_embd=16, bottleneck=bottleneck)).eval())


@pytest.mark.parametrize("context,window,block,min_context", [(5, 10, 32, 16), (40, 50, 16, 8), (3, 30, 8, 1), (20, 7, 8, 8)])
def test_pass_plan_covers_each_position_once_with_real_left_context(context, window, block, min_context):
    text = bytes(range(context + window))
    passes = plan_passes(0, text[:context], text[context:], block, min_context)
    covered = [p.first + i for p in passes for i in range(p.count)]
    assert covered == list(range(window))
    for p in passes:
        assert 1 <= len(p.inputs) <= block
        for i in range(p.count):
            j = context + p.first + i  # index of the target in text
            seen = p.inputs[: p.out_start + i + 1]
            assert text[j - len(seen) : j] == seen  # the real bytes right before the target
            assert len(seen) >= min(min_context, j)


def test_pass_plan_errors_name_the_setting():
    with pytest.raises(LogitsError, match="no left context"):
        plan_passes(3, b"", b"abc", 8, 4)
    with pytest.raises(LogitsError, match=r"logits.min_context \(9\) must be between 1 and the block size \(8\)"):
        plan_passes(0, b"ab", b"cd", 8, 9)


def per_position_logprobs(lm, context, window, block):
    """The slow way: one forward pass per position over the last `block` bytes before it."""
    text = context + window
    out = []
    for t in range(len(window)):
        j = len(context) + t
        x = torch.tensor([list(text[max(0, j - block) : j])])
        out.append(lm.next_byte_logprobs(x)[0, -1].numpy())
    return np.stack(out)


def test_one_pass_per_window_equals_one_pass_per_position(tmp_path):
    lm = tiny_gpt(block=64)
    prompts = prompts_table(3, 20, 30)
    extract_logits(lm, prompts, tmp_path / "l.parquet", tmp_path / "h.parquet", batch_size=2, min_context=None, hidden_positions=10, seed=0)
    table = pq.read_table(tmp_path / "l.parquet")
    assert table.schema.equals(LOGITS_SCHEMA)
    assert table.num_rows == 90
    got = np.asarray(table.column("logprobs").to_pylist(), dtype=np.float32)
    for i in range(3):
        row = prompts.slice(i, 1).to_pylist()[0]
        expected = per_position_logprobs(lm, row["context"], row["window"], 64)
        np.testing.assert_allclose(got[30 * i : 30 * (i + 1)], expected, atol=1e-5)
        assert table.column("target").to_pylist()[30 * i : 30 * (i + 1)] == list(row["window"])
    assert table.column("position").to_pylist()[:30] == list(range(30))


def test_long_windows_use_strided_passes_with_at_least_min_context(tmp_path):
    lm = tiny_gpt(block=16)
    prompts = prompts_table(2, 12, 40)
    stats = extract_logits(lm, prompts, tmp_path / "l.parquet", tmp_path / "h.parquet", batch_size=3, min_context=8, hidden_positions=5, seed=0)
    assert stats["passes"] == 2 * 5  # stride 16 + 1 - 8 = 9 targets per pass
    got = np.asarray(pq.read_table(tmp_path / "l.parquet").column("logprobs").to_pylist(), dtype=np.float32)
    row = prompts.slice(1, 1).to_pylist()[0]
    text = row["context"] + row["window"]
    for t in (0, 8, 9, 39):  # first and last target of passes: context is what the plan gave them
        p = next(p for p in plan_passes(1, row["context"], row["window"], 16, 8) if p.first <= t < p.first + p.count)
        seen = p.inputs[: p.out_start + t - p.first + 1]
        expected = lm.next_byte_logprobs(torch.tensor([list(seen)]))[0, -1].numpy()
        np.testing.assert_allclose(got[40 + t], expected, atol=1e-5)
        assert len(seen) >= 8 and text[12 + t - len(seen) : 12 + t] == seen


def test_hidden_states_are_the_pre_and_post_bottleneck_features_of_a_shared_subset(tmp_path):
    lm = tiny_gpt(block=64, bottleneck=4)
    prompts = prompts_table(2, 10, 20)
    extract_logits(lm, prompts, tmp_path / "l.parquet", tmp_path / "h.parquet", batch_size=4, min_context=None, hidden_positions=7, seed=3)
    hidden = pq.read_table(tmp_path / "h.parquet")
    assert hidden.num_rows == 7
    pairs = list(zip(hidden.column("prompt_id").to_pylist(), hidden.column("position").to_pylist()))
    assert set(pairs) == hidden_subset(2, 20, 7, seed=3) and pairs == sorted(pairs)
    prompt, position = pairs[0]
    row = prompts.slice(prompt, 1).to_pylist()[0]
    x = torch.tensor([list((row["context"] + row["window"])[: 10 + position])])
    pre = lm.model.features(x)[0, -1]
    np.testing.assert_allclose(hidden.column("pre")[0].as_py(), pre.detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(hidden.column("post")[0].as_py(), lm.model.head.bottleneck(pre).detach().numpy(), atol=1e-5)
    assert len(hidden.column("post")[0].as_py()) == 4 and len(hidden.column("pre")[0].as_py()) == 16


def test_row_groups_line_up_across_models_and_batch_sizes(tmp_path):
    prompts = prompts_table(3, 40, ROW_GROUP_ROWS // 2 + 7)  # rows straddle row-group boundaries
    a, b = tiny_gpt(block=32, seed=0), tiny_gpt(block=64, bottleneck=8, seed=1)
    extract_logits(a, prompts, tmp_path / "a.parquet", tmp_path / "ah.parquet", batch_size=5, min_context=None, hidden_positions=0, seed=0)
    extract_logits(b, prompts, tmp_path / "b.parquet", tmp_path / "bh.parquet", batch_size=2, min_context=None, hidden_positions=0, seed=0)
    groups = list(iter_aligned_logits(tmp_path / "a.parquet", tmp_path / "b.parquet"))
    assert [len(x.target) for x, _ in groups] == [ROW_GROUP_ROWS, 3 * (ROW_GROUP_ROWS // 2 + 7) - ROW_GROUP_ROWS]
    first = next(iter_logits(tmp_path / "a.parquet"))
    assert first.logprobs.shape == (ROW_GROUP_ROWS, 256) and first.logprobs.dtype == np.float32
    np.testing.assert_allclose(np.exp(first.logprobs).sum(1), 1.0, atol=1e-4)
    extract_logits(a, prompts.slice(0, 2), tmp_path / "c.parquet", tmp_path / "ch.parquet", batch_size=5, min_context=None, hidden_positions=0, seed=0)
    with pytest.raises(LogitsError, match="hold different positions"):
        list(iter_aligned_logits(tmp_path / "a.parquet", tmp_path / "c.parquet"))


def test_hf_ground_truth_extracts_through_transformers(tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(vocab_size=3 + 256, n_positions=64, n_embd=32, n_layer=1, n_head=2)).save_pretrained(tmp_path / "gt")
    lm = load_hf_byte_lm("gt-tiny", tmp_path / "gt", byte_offset=3, bos_id=1)
    prompts = prompts_table(2, 30, 50)  # 79 input bytes > 63: strided passes
    extract_logits(lm, prompts, tmp_path / "l.parquet", tmp_path / "h.parquet", batch_size=4, min_context=None, hidden_positions=6, seed=0)
    table = pq.read_table(tmp_path / "l.parquet")
    assert table.num_rows == 100
    row = prompts.slice(0, 1).to_pylist()[0]
    expected = per_position_logprobs(lm, row["context"], row["window"], lm.block_size)
    got = np.asarray(table.column("logprobs").to_pylist()[:50], dtype=np.float32)
    np.testing.assert_allclose(got[:3], expected[:3], atol=1e-5)  # first pass: full context available
    hidden = pq.read_table(tmp_path / "h.parquet")
    assert hidden.num_rows == 6 and len(hidden.column("pre")[0].as_py()) == 32


def test_bf16_extraction_on_cpu_stays_near_float32(tmp_path):
    """The GPU path's bf16 autocast, run on CPU through the same extraction: every log-probability within 0.02
    nats of float32's (measured: 3.4e-3) and the same argmax almost everywhere (ties within bf16's rounding may swap)."""
    lm = tiny_gpt(block=64)
    prompts = prompts_table(4, 20, 30)
    for name, bf16 in (("fp32", None), ("bf16", True)):
        extract_logits(lm, prompts, tmp_path / f"{name}.parquet", tmp_path / f"{name}-h.parquet", batch_size=2,
                       min_context=None, hidden_positions=0, seed=0, bf16=bf16)
    fp32, bf16 = (np.asarray(pq.read_table(tmp_path / f"{n}.parquet").column("logprobs").to_pylist()) for n in ("fp32", "bf16"))
    difference = np.abs(bf16 - fp32)
    assert 0 < difference.max() <= 0.02
    assert (bf16.argmax(axis=1) == fp32.argmax(axis=1)).mean() >= 0.95
