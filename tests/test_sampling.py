"""Sampling: the cached sampler equals the no-cache one, per-row seeds, the Parquet output, hf models."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from conftest import prompts_table

from oversmooth.analysis.decoding import Decoding
from oversmooth.data.prompts import PROMPTS_SCHEMA
from oversmooth.analysis.bat.sampler import bat_decodings
from oversmooth.generation.samples import (
    byte_head_matrix,
    equal_length_batches,
    sample_model,
    sample_seed,
)
from oversmooth.generation.sampletable import SAMPLES_SCHEMA, join_samples
from oversmooth.generation.sampling import (
    GPTStepper,
    HFStepper,
    TokenHeadStepper,
    draw,
    generate,
    generate_uncached,
    uniforms_for,
)
from oversmooth.models.bytelm import GPTByteLM, load_hf_byte_lm
from oversmooth.models.kvcache import BlockKVCache
from oversmooth.models.model import GPT, GPTConfig


@pytest.fixture(scope="module")
def lm():
    torch.manual_seed(0)
    return GPTByteLM("bn-4", GPT(GPTConfig(block_size=32, n_layer=2, n_head=2, n_embd=32, bottleneck=4)).double().eval())


def test_kv_cache_gives_the_full_forward_pass(lm):
    x = torch.randint(0, 256, (3, 30))
    full, _ = lm.model(x)
    cache = BlockKVCache(lm.model.config.block_size)
    parts = [lm.model.forward_cached(x[:, :12], cache), lm.model.forward_cached(x[:, 12:17], cache)]
    parts += [lm.model.forward_cached(x[:, t : t + 1], cache) for t in range(17, 30)]
    torch.testing.assert_close(torch.cat(parts, dim=1), full)
    with pytest.raises(ValueError, match="exceed block_size 32"):
        lm.model.forward_cached(x[:, :3], cache)


@pytest.mark.parametrize("method", ["greedy", "pure", "top_k", "top_p", "temperature"])
def test_cached_sampler_produces_exactly_the_no_cache_bytes(lm, method):
    x = torch.randint(0, 256, (3, 20))
    u = uniforms_for([11, 12, 13], 60)  # 20 + 60 bytes > block 32: the cache is rebuilt twice
    torch.testing.assert_close(generate(GPTStepper(lm), x, Decoding(method), u), generate_uncached(lm, x, Decoding(method), u))


def test_bf16_sampling_on_cpu_stays_near_float32():
    """The GPU path's bf16 autocast in the cached sampler, run on CPU: the next-byte log-probabilities along the same
    bytes within 0.02 nats of float32's at every step (measured: 2.7e-3), and pure sampling from the same uniforms gives the same bytes
    but for draws that fall between the two CDFs."""
    torch.manual_seed(0)
    lm = GPTByteLM("bn-4", GPT(GPTConfig(block_size=32, n_layer=2, n_head=2, n_embd=32, bottleneck=4)).eval())
    x = torch.randint(0, 256, (4, 20))
    fp32, bf16 = GPTStepper(lm), GPTStepper(lm, bf16=True)
    steps = [(fp32.start(x), bf16.start(x))]
    steps += [(fp32.step(x[:, t]), bf16.step(x[:, t])) for t in range(4)]
    difference = max((a - b).abs().max().item() for a, b in steps)
    assert 0 < difference <= 0.02
    u = uniforms_for([1, 2, 3, 4], 40)
    same = (generate(GPTStepper(lm), x, Decoding("pure"), u) == generate(GPTStepper(lm, bf16=True), x, Decoding("pure"), u))
    assert same[:, 0].all() and same.float().mean() >= 0.9


def test_draw_inverts_the_cdf_and_never_picks_a_removed_byte():
    logp = torch.tensor([[0.1, 0.2, 0.3, 0.4]]).log().repeat(4, 1)
    picks = draw(logp, Decoding("pure"), torch.tensor([0.05, 0.15, 0.45, 0.95]))
    assert picks.tolist() == [0, 1, 2, 3]
    top2 = draw(logp, Decoding("top_k", top_k=2), torch.tensor([0.0, 0.4, 0.5, 0.99]))
    assert set(top2.tolist()) <= {2, 3} and top2.tolist() == [2, 2, 3, 3]
    assert draw(logp, Decoding("greedy"), torch.rand(4)).tolist() == [3, 3, 3, 3]


def test_seeds_depend_only_on_model_method_and_prompt(lm, tmp_path):
    assert sample_seed(1, "bn-4", "pure", 3) == sample_seed(1, "bn-4", "pure", 3) != sample_seed(1, "bn-4", "pure", 4)
    prompts = prompts_table(5, 10, 10)
    a = sample_model(lm, prompts, [Decoding("pure")], tmp_path / "a.parquet", continuation_bytes=16, batch_size=2, seed=1)
    b = sample_model(lm, prompts.slice(2), [Decoding("pure")], tmp_path / "b.parquet", continuation_bytes=16, batch_size=3, seed=1)
    assert a.column("continuation").to_pylist()[2:] == b.column("continuation").to_pylist()  # batch and neighbours change nothing
    table = pq.read_table(tmp_path / "a.parquet")
    assert table.schema.equals(SAMPLES_SCHEMA) and table.num_rows == 5
    assert all(len(c) == 16 for c in table.column("continuation").to_pylist())
    assert table.column("text").to_pylist()[0] == table.column("continuation").to_pylist()[0].decode("utf-8", "replace")


def test_bat_samplings_rows_from_a_job_of_their_own_joined_to_the_others_are_one_jobs_rows(lm):
    """The token track samples BA-epsilon and BA-eta in CPU jobs of their own (rule sample_bat), and a job of its own
    (rule join_samples) joins their rows to the head's other methods': the same table, row for row, as one job
    sampling every method; a method missing or sampled twice is an error naming it."""
    prompts, methods = prompts_table(3, 6, 6), ["pure", "ba_eta", "top_p", "ba_epsilon"]
    decodings = {m: Decoding(m, eta=0.01) if m == "ba_eta" else Decoding(m, epsilon=0.01) if m == "ba_epsilon"
                 else Decoding(m, top_p=0.9) if m == "top_p" else Decoding(m) for m in methods}

    def sampled(chosen):
        bound = bat_decodings([decodings[m] for m in chosen], byte_head_matrix(lm))
        return sample_model(lm, prompts, bound, None, continuation_bytes=8, batch_size=2, seed=3)

    one = sampled(methods)
    parts = [sampled(["pure", "top_p"]), sampled(["ba_epsilon"]), sampled(["ba_eta"])]
    joined = join_samples(parts, methods)
    assert joined.equals(one) and joined.column("method").to_pylist() == [m for m in methods for _ in range(3)]
    with pytest.raises(ValueError, match=r"missing \['ba_eta'\]"):
        join_samples(parts[:2], methods)
    with pytest.raises(ValueError, match="two sample tables hold method 'ba_eta'"):
        join_samples([*parts, parts[2]], methods)


def test_hf_models_sample_with_their_own_cache(tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(vocab_size=3 + 256, n_positions=40, n_embd=32, n_layer=1, n_head=2)).save_pretrained(tmp_path)
    hf = load_hf_byte_lm("gt-tiny", tmp_path, byte_offset=3, bos_id=1)
    x = torch.randint(0, 256, (2, 10))
    u = uniforms_for([1, 2], 50)  # 10 + 50 > 39: rebuilt
    for method in ("greedy", "pure"):
        assert torch.equal(generate(HFStepper(hf), x, Decoding(method), u), generate_uncached(hf, x, Decoding(method), u))
    assert np.isfinite(HFStepper(hf).start(x).numpy()).all()


def test_each_sampling_step_attends_without_cudnn_and_restores_the_choice(lm, tmp_path, monkeypatch):
    """cuDNN's attention sets itself up anew for every key length on CUDA (the sampler's cache grows a position a
    step: 8x slower on an H200): every stepper's steps run without it, and leave PyTorch's choice as it was."""
    from transformers import GPT2Config, GPT2LMHeadModel

    seen = []
    attention = torch.nn.functional.scaled_dot_product_attention

    def recording(*args, **kwargs):
        seen.append(torch.backends.cuda.cudnn_sdp_enabled())
        return attention(*args, **kwargs)

    GPT2LMHeadModel(GPT2Config(vocab_size=3 + 256, n_positions=40, n_embd=32, n_layer=1, n_head=2,
                               attn_implementation="sdpa")).save_pretrained(tmp_path)
    hf = load_hf_byte_lm("gt-tiny", tmp_path, byte_offset=3, bos_id=1)
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recording)
    assert torch.backends.cuda.cudnn_sdp_enabled()
    x, u = torch.randint(0, 256, (2, 10)), uniforms_for([1, 2], 5)
    for stepper in (GPTStepper(lm), HFStepper(hf), TokenHeadStepper(hf.model, hf.model.lm_head, 40)):
        seen.clear()
        generate(stepper, x, Decoding("pure"), u)
        assert seen and not any(seen), type(stepper).__name__
    assert torch.backends.cuda.cudnn_sdp_enabled()


def test_sampling_in_the_document_continues_each_prompts_context_and_prefix_and_records_the_prefix(lm, tmp_path):
    """A teacher's truth scores a continuation after the document before its prompt, so the model samples there too
    (`document_context`): contexts of different lengths in batches of one length each, every row the continuation
    of its own context + prefix in the prompts' order, the row's prefix the prompt's alone."""
    prompts = prompts_table(5, 0, 8).to_pylist()
    rng = np.random.default_rng(3)
    for row, n in zip(prompts, (0, 3, 1, 3, 6)):  # document starts 0-6 bytes before the prompt
        row["context"] = bytes(rng.integers(32, 127, size=n, dtype=np.uint8))
    table = pa.Table.from_pylist(prompts, schema=PROMPTS_SCHEMA)
    decodings = [Decoding("pure"), Decoding("top_p", top_p=0.9)]
    got = sample_model(lm, table, decodings, tmp_path / "s.parquet", continuation_bytes=12, batch_size=2, seed=1,
                       document_context=True).to_pylist()
    assert [(r["method"], r["prompt_id"]) for r in got] == [(d.method, i) for d in decodings for i in range(5)]
    for r in got:
        prompt = prompts[r["prompt_id"]]
        x = torch.tensor([list(prompt["context"] + prompt["sample_prefix"])])
        alone = generate_uncached(lm, x, Decoding(r["method"], top_p=0.9), uniforms_for([r["seed"]], 12))
        assert r["continuation"] == bytes(alone[0].tolist()) and r["prefix"] == prompt["sample_prefix"]
    without = sample_model(lm, table, decodings[:1], tmp_path / "w.parquet", continuation_bytes=12, batch_size=2,
                           seed=1).to_pylist()
    assert without[0]["continuation"] == got[0]["continuation"]  # no context before prompt 0
    assert [r["continuation"] for r in without[1:]] != [r["continuation"] for r in got[1:5]]


def test_equal_length_batches_keep_each_length_together_in_order():
    assert equal_length_batches([[1], [1, 2], [3], [4], [5, 6], [7]], 2) == [[0, 2], [3, 5], [1, 4]]
