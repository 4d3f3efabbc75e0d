"""Rank-k heads on a frozen token-level LM, on `tiny_token_lm` (conftest: a random Llama over 300 tokens, hidden
size 32, saved with `save_pretrained`)."""

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
import torch
from conftest import prompts_table

from oversmooth.analysis.decoding import Decoding
from oversmooth.analysis.headfit import HeadTraining
from oversmooth.analysis.metrics import oversmoothing, write_position_metrics
from oversmooth.analysis.tokenfit import build_head, learned_head, svd_head
from oversmooth.analysis.tokenheads import (
    TokenTrackError,
    head_loss,
    head_matrix,
    load_head,
    output_weight,
    read_states,
    sampled_state_rows,
    save_head,
    write_states,
)
from oversmooth.analysis.tokenmetrics import head_logprob_chunks, oversmoothing_against_full
from oversmooth.analysis.tokenstates import final_hidden_states, prompt_states, prompt_tokens, shard_states
from oversmooth.core.io import read_parquet
from oversmooth.extraction.logit_tables import sample_positions
from oversmooth.generation.sampling import TokenHeadStepper, UncachedStepper, generate, uniforms_for
from oversmooth.models.causallm import load_causal_lm


@pytest.fixture(scope="module")
def cached(tiny_token_lm):
    model, tokenizer = load_causal_lm(tiny_token_lm)
    ids = np.array(tokenizer("the cat sat on the mat. a caté, then tea. " * 12)["input_ids"])
    states, targets = final_hidden_states(model, ids, block=16, batch_size=3)
    return model, ids, states, targets


def test_cached_states_times_the_head_are_the_model_s_logits(cached):
    model, ids, states, targets = cached
    n_blocks = (len(ids) - 1) // 16
    assert states.shape == (n_blocks * 16, 32) and targets.tolist() == ids[1 : n_blocks * 16 + 1].tolist()
    with torch.no_grad():
        logits = model(torch.from_numpy(ids[16:32][None])).logits[0]  # block 1 reads tokens 16..31
    assert torch.allclose(torch.from_numpy(states[16:32]) @ output_weight(model).T, logits, atol=1e-4)
    with pytest.raises(ValueError, match="too few for one block of 16"):
        final_hidden_states(model, ids[:10], block=16, batch_size=1)


@pytest.mark.parametrize("rank", [1, 3, 8])
def test_the_svd_head_s_logits_have_rank_at_most_k_and_full_rank_is_the_head(cached, rank):
    model, _, states, _ = cached
    weight = output_weight(model)
    with torch.no_grad():
        logits = svd_head(weight, rank)(torch.from_numpy(states)).double()
    assert torch.linalg.matrix_rank(logits, rtol=1e-5).item() <= rank  # float32 logits: rounding noise aside
    with torch.no_grad():
        full = svd_head(weight, 32)(torch.from_numpy(states))
    assert torch.allclose(full, torch.from_numpy(states) @ weight.T, atol=1e-4)
    with pytest.raises(ValueError, match="rank 33 must lie in 1..32"):
        svd_head(weight, 33)


def test_the_learned_head_fits_its_data_better_than_the_svd_head_of_the_same_rank(cached):
    model, _, states, targets = cached
    weight = output_weight(model)
    settings = HeadTraining(iters=60, batch_size=64, learning_rate=3e-3, seed=0)
    for rank in (2, 4):
        learned = learned_head(weight, states, targets, rank, settings)
        assert head_loss(learned, states, targets) < head_loss(svd_head(weight, rank), states, targets)


def test_oversmoothing_against_the_full_head_is_zero_at_full_rank_and_grows_as_k_falls(cached):
    model, _, states, _ = cached
    weight = output_weight(model)
    full = oversmoothing_against_full(svd_head(weight, 32), weight, states, tau=0.9)
    assert np.abs(full["tto"]).max() < 1e-5 and np.abs(full["tv"]).max() < 1e-5
    low, mid = (oversmoothing_against_full(svd_head(weight, k), weight, states, tau=0.9) for k in (1, 8))
    assert low["tto"].mean() > mid["tto"].mean() > 0 and (low["nsmd"] <= low["tto"] + 1e-12).all()
    assert np.array_equal(oversmoothing_against_full(weight, weight, states, tau=0.9)["tv"], np.zeros(len(states)))


def test_prompt_states_are_the_model_s_own_states_at_each_window_token(cached, tiny_token_lm, tmp_path):
    """Each window token's state, read back from Parquet, times W is the model's logits predicting that token."""
    model, _ = cached[:2]
    _, tokenizer = load_causal_lm(tiny_token_lm)
    prompts = prompts_table(3, context_len=40, window_len=30, seed=1)
    columns, states = prompt_states(model, tokenizer, prompts)
    write_states(tmp_path / "eval.parquet", columns["prompt_id"], columns["position"], columns["target"], states)
    read_columns, read = read_states(tmp_path / "eval.parquet")
    assert np.array_equal(read, states) and all(np.array_equal(read_columns[c], columns[c]) for c in columns)
    weight = output_weight(model)
    for row in prompts.to_pylist():
        context, window = prompt_tokens(tokenizer, row["context"], row["window"])
        ours = columns["prompt_id"] == row["prompt_id"]
        assert columns["target"][ours].tolist() == window and columns["position"][ours].tolist() == list(range(len(window)))
        with torch.no_grad():
            logits = model(torch.tensor([context + window])).logits[0, len(context) - 1 : -1]
        assert torch.allclose(torch.from_numpy(states[ours]) @ weight.T, logits, atol=1e-4)


def test_shard_states_cover_the_first_tokens_in_blocks(cached, tiny_token_lm):
    model = cached[0]
    _, tokenizer = load_causal_lm(tiny_token_lm)
    shard = np.frombuffer(("the cat sat on the mat. " * 40).encode(), dtype=np.uint8)
    columns, states = shard_states(model, tokenizer, shard, n_tokens=65, block=16, batch_size=2)
    assert states.shape == (64, 32) and columns["prompt_id"].tolist() == [b for b in range(4) for _ in range(16)]
    assert columns["position"].tolist() == list(range(16)) * 4
    with pytest.raises(TokenTrackError, match="tokens.fit_tokens: the training shard has"):
        shard_states(model, tokenizer, shard[:50], n_tokens=65, block=16, batch_size=2)


def test_a_saved_head_gives_the_same_logits_and_a_rank_at_full_width_is_refused(cached, tmp_path):
    model, _, states, targets = cached
    write_states(tmp_path / "train.parquet", np.zeros(len(targets)), np.arange(len(targets)), targets, states)
    settings = {"kind": "learned", "rank": 3, "source": "tiny", "fit_iters": 5, "fit_batch_size": 16,
                "learning_rate": 1e-3, "seed": 0}
    head, meta = build_head(model, settings, tmp_path / "train.parquet")
    save_head(head, tmp_path / "head.pt", meta)
    loaded, loaded_meta = load_head(tmp_path / "head.pt")
    h = torch.from_numpy(states[:20])
    with torch.no_grad():
        assert torch.equal(loaded(h), head(h))
    assert loaded_meta == {**settings, "vocab_size": output_weight(model).size(0), "hidden_size": 32}
    with pytest.raises(TokenTrackError, match="tokens.ranks: 32 is not below the source's hidden size 32"):
        build_head(model, {"kind": "svd", "rank": 32}, None)
    with pytest.raises(TokenTrackError, match="needs the cached training states"):
        build_head(model, {**settings, "kind": "learned"}, None)


def test_token_metrics_rows_are_the_metrics_of_each_head_against_the_full_head(cached, tmp_path):
    """What the metrics job writes for a token head equals the formulas applied to h A B and h W, row by row."""
    model, _, states, _ = cached
    weight, head = output_weight(model), svd_head(output_weight(model), 2)
    n = 50
    columns = {"prompt_id": np.repeat([4, 9], 25), "position": np.tile(np.arange(25), 2), "target": np.arange(n) % 7}
    chunks = head_logprob_chunks(head, weight, columns, states[:n], batch_size=16)
    write_position_metrics(chunks, tmp_path / "m.parquet", [Decoding("pure"), Decoding("greedy")], 0.9, 1e-6)
    table = read_parquet(tmp_path / "m.parquet").to_pandas()
    assert len(table) == 2 * n and set(table["method"]) == {"pure", "greedy"}
    pure = table[table["method"] == "pure"].sort_values(["prompt_id", "position"])
    with torch.no_grad():
        h = torch.from_numpy(states[:n])
        expected = oversmoothing(torch.log_softmax(head(h).double(), -1).numpy(),
                                 torch.log_softmax((h @ weight.T).double(), -1).numpy(), 0.9)
    for name in ("tto", "nsmd", "tv", "kl", "kl_eps", "entropy_diff"):
        assert np.allclose(pure[name].to_numpy(), expected[name], atol=1e-12), name
    assert pure["target"].tolist() == columns["target"].tolist()


def test_tbat_reads_a_seeded_sample_of_states_with_the_head_s_distributions_and_its_rank_k_matrix(cached, tmp_path):
    """TBAT's inputs for a token head: the same rows as `sample_positions` for any head, the head's own
    log-probabilities there, and W (V x k) with logits = W (B h), so that W^T q = W^T p is the definition's
    constraint."""
    model, _, states, targets = cached
    n = len(targets)
    write_states(tmp_path / "eval.parquet", np.arange(n) // 10, np.arange(n) % 10, targets, states)
    head = svd_head(output_weight(model), 3)
    rows = sampled_state_rows(head, tmp_path / "eval.parquet", 7, seed=5)
    chosen = sample_positions(n, 7, 5)
    assert rows.prompt_id.tolist() == (chosen // 10).tolist() and rows.position.tolist() == (chosen % 10).tolist()
    with torch.no_grad():
        h = torch.from_numpy(states[chosen])
        assert np.allclose(rows.logprobs, torch.log_softmax(head(h).double(), -1).numpy(), atol=1e-12)
        code = head.down(h).double().numpy()
    W = head_matrix(head)
    assert W.shape == (output_weight(model).size(0), 3)
    assert np.allclose(code @ W.T, head(h).detach().double().numpy(), atol=1e-5)
    assert np.array_equal(sampled_state_rows(head, tmp_path / "eval.parquet", 7, seed=5).position, rows.position)


@pytest.mark.parametrize("method", ["pure", "greedy", "top_k", "top_p", "temperature"])
def test_cached_token_samples_equal_uncached_ones_token_for_token(cached, method):
    """Past the block (12 tokens), so the cache is also rebuilt from the last half block; a rank-3 head and the
    model's own head."""
    model, ids = cached[:2]
    prefixes = torch.from_numpy(np.stack([ids[:5], ids[7:12]]))
    uniforms = uniforms_for([3, 4], 20)
    decoding = Decoding(method, top_k=5)
    for head in (svd_head(output_weight(model), 3), model.get_output_embeddings()):
        fast = generate(TokenHeadStepper(model, head, block_size=12), prefixes, decoding, uniforms)
        slow = generate(UncachedStepper(TokenHeadStepper(model, head, block_size=12)), prefixes, decoding, uniforms)
        assert torch.equal(fast, slow) and fast.shape == (2, 20) and fast.max() < output_weight(model).size(0)


def token_prompts(ids: np.ndarray, starts) -> pa.Table:
    """Token prompts of 5 tokens from each of `starts` in `ids`, their next 4 tokens the human continuation."""
    from oversmooth.data.prompts import TOKEN_PROMPTS_SCHEMA

    return pa.Table.from_pylist(
        [{"prompt_id": i, "doc_id": "d", "source": "t", "offset": 0, "prefix_ids": ids[i : i + 5].tolist(),
          "continuation_ids": ids[i + 5 : i + 9].tolist(), "sample_prefix": b"", "human_continuation": b""}
         for i in starts], schema=TOKEN_PROMPTS_SCHEMA)


def test_token_samples_continue_the_prompt_tokens_reproducibly(cached, tiny_token_lm, tmp_path):
    """Each (method, prompt) continuation is the tokens `generate` draws from its own seed, decoded; a second run
    and a run in other batches give the same table."""
    from oversmooth.generation.samples import sample_seed, sample_token_model
    from oversmooth.models.causallm import load_tokenizer

    model, ids = cached[:2]
    tokenizer = load_tokenizer(tiny_token_lm)
    prompts = token_prompts(ids, (0, 3, 8))
    head = svd_head(output_weight(model), 3)
    methods = [Decoding("pure"), Decoding("top_p", top_p=0.9)]
    table = sample_token_model(model, tokenizer, head, "tok-svd-r3", prompts, methods, tmp_path / "a.parquet",
                               continuation_tokens=7, batch_size=2, seed=5)
    assert table.num_rows == 6 and read_parquet(tmp_path / "a.parquet").equals(table)
    again = sample_token_model(model, tokenizer, head, "tok-svd-r3", prompts, methods, tmp_path / "b.parquet",
                               continuation_tokens=7, batch_size=3, seed=5)
    assert again.equals(table)
    row = table.to_pylist()[4]  # top_p, prompt 3
    seed = sample_seed(5, "tok-svd-r3", "top_p", 3)
    expected = generate(TokenHeadStepper(model, head, 2048), torch.tensor([ids[3:8].tolist()]), methods[1],
                        uniforms_for([seed], 7))[0].tolist()
    assert row["seed"] == seed and row["continuation"] == tokenizer.decode(expected).encode()
    assert row["prefix"] == tokenizer.decode(ids[3:8].tolist()).encode() and row["text"] == row["continuation"].decode()


def test_a_token_sample_job_samples_its_head_with_the_decodings_its_script_makes_from_it(cached, tiny_token_lm,
                                                                                          tmp_path, monkeypatch):
    """Rules sample_direct's and sample_bat's job (`sample_token_rule`): a rank-k head's job samples its saved factors,
    tok-full's its source's output layer, each with the decodings its script makes from that head (BAT sampling binds
    the head's W, `token_head_matrix`), and writes the rows `sample_token_model` gives for that head."""
    from types import SimpleNamespace

    from oversmooth.analysis.tokenheads import token_head_matrix
    from oversmooth.core.io import write_parquet
    from oversmooth.generation.samples import sample_token_model
    from oversmooth.models.causallm import load_tokenizer
    from oversmooth.workflow.tokensampling import sample_token_rule

    model, ids = cached[:2]
    tokenizer = load_tokenizer(tiny_token_lm)
    prompts = token_prompts(ids, (0, 3, 8))
    write_parquet(prompts, tmp_path / "prompts.parquet")
    rank_3 = svd_head(output_weight(model), 3)
    save_head(rank_3, tmp_path / "head.pt", {"kind": "svd", "rank": 3})
    methods = [Decoding("pure"), Decoding("top_p", top_p=0.9)]
    matrices = {}

    def decodings_for(head):
        matrices[job.wildcards.model] = token_head_matrix(head)
        return methods

    # on the CPU, as the expected rows are (a GPU's products would draw other tokens)
    monkeypatch.setattr("oversmooth.workflow.tokensource.inference_device", lambda: torch.device("cpu"))
    threads = torch.get_num_threads()
    try:
        for name, head_input, head in (("tok-svd-r3", {"head": str(tmp_path / "head.pt")}, rank_3),
                                       ("tok-full", {}, model.get_output_embeddings())):
            job = SimpleNamespace(
                input=_Inputs(lm=str(tiny_token_lm / "config.json"), prompts=str(tmp_path / "prompts.parquet"),
                              **head_input),
                output=[str(tmp_path / f"{name}.parquet")], wildcards=SimpleNamespace(model=name), threads=1,
                params=SimpleNamespace(sampling={"continuation_tokens": 6, "batch_size": 2}, seed=5))
            sample_token_rule(job, decodings_for)
            expected = sample_token_model(model, tokenizer, head, name, prompts, methods, None, continuation_tokens=6,
                                          batch_size=2, seed=5)
            assert read_parquet(job.output[0]).equals(expected) and expected.num_rows == 6
    finally:
        torch.set_num_threads(threads)
    assert np.array_equal(matrices["tok-svd-r3"], head_matrix(rank_3)) and matrices["tok-svd-r3"].shape == (
        len(output_weight(model)), 3)
    assert np.array_equal(matrices["tok-full"], output_weight(model).double().numpy())


def test_the_unargmaxable_token_table_counts_the_corpus_tokens_a_head_can_never_predict(tiny_token_lm):
    from oversmooth.models.causallm import load_tokenizer
    from oversmooth.models.tokentext import token_text
    from oversmooth.reporting.argmax_report import unargmaxable_token_table

    tokenizer = load_tokenizer(tiny_token_lm)
    record = {"model": "tok-svd-r2", "k": 2, "n_rows": 8, "argmaxable": [0, 1, 2], "unargmaxable": [3, 4, 5, 6, 7],
              "duplicates": [6, 7], "failed": [], "seconds": 1.5}
    targets = np.array([0, 1, 4, 4, 4, 5, 3, 3, 0, 2])  # token 4 three times, 3 twice, 5 once; 6, 7 never
    row = unargmaxable_token_table([record], targets, token_text(tiny_token_lm), top_n=2).iloc[0]
    assert (row["kind"], row["k"], row["n_argmaxable"], row["n_unargmaxable"], row["n_duplicated"]) == ("svd", 2, 3, 5, 2)
    assert row["corpus_tokens"] == 10 and row["corpus_share_never_argmax"] == pytest.approx(0.6)
    assert row["most_frequent_never_argmax"] == f"{tokenizer.decode([4])!r}×3 {tokenizer.decode([3])!r}×2"


class _Inputs(dict):
    """A job's named inputs as a Snakemake script sees them (`smk.input.lm`, `smk.input.keys()`)."""

    __getattr__ = dict.__getitem__


def test_tok_full_is_analysed_through_its_source_s_own_head_a_saved_transformers_model(tiny_token_lm):
    """tok-full's job reads the source LM (its `lm` input, a file in the model's folder) and takes its LM head's W:
    the unargmaxable analysis runs on it and its Table B row says kind `full` and k = the hidden size."""
    from types import SimpleNamespace

    from transformers import AutoModelForCausalLM

    from oversmooth.analysis.argmax import linear_head_vertices, vertex_record
    from oversmooth.reporting.argmax_report import unargmaxable_token_table
    from oversmooth.workflow.tokensource import rule_token_head

    job = SimpleNamespace(input=_Inputs(lm=str(tiny_token_lm / "config.json")), threads=1)
    head, W, k = rule_token_head(job)
    expected = AutoModelForCausalLM.from_pretrained(tiny_token_lm).lm_head.weight.detach().double().numpy()
    assert k == 32 and W.dtype == np.float64 and np.array_equal(W, expected) and head.shape == W.shape
    report = linear_head_vertices(W, n_random=256)
    assert len(report.witnesses) + len(report.unargmaxable) == len(W) and not report.failed
    for i, z in list(report.witnesses.items())[:50]:
        assert int(np.argmax(W @ z)) == i
    row = unargmaxable_token_table([vertex_record("tok-full", report, k)], np.arange(len(W)), str).iloc[0]
    assert (row["model"], row["kind"], row["k"], row["vocabulary"]) == ("tok-full", "full", 32, len(W))


def test_tok_full_gets_tbat_through_its_source_s_own_head_and_its_table_row_says_full(tiny_token_lm):
    """tok-full's TBAT job: the distribution of the source's own head on states, and its W, give the definition's
    reject sets; Tables E.7 and E.8 name its bottleneck `full`."""
    from types import SimpleNamespace

    import pandas as pd

    from oversmooth.analysis.reference import bat_reject_set
    from oversmooth.analysis.bat.solver import BATSolver
    from oversmooth.analysis.tokenheads import head_logits
    from oversmooth.reporting.metrics_report import table_e_tbat
    from oversmooth.workflow.tokensource import rule_token_head

    head, W, k = rule_token_head(SimpleNamespace(input=_Inputs(lm=str(tiny_token_lm / "config.json")), threads=1))
    states = torch.randn(3, k, generator=torch.Generator().manual_seed(0))
    probs = torch.softmax(head_logits(head, states).double(), -1).numpy()
    for p in probs:
        result, (expected, failures) = BATSolver(W).reject_set(p), bat_reject_set(p, W)
        assert not result.failed and not failures and np.array_equal(result.rejected, expected)
    summaries = pd.DataFrame({"model": ["tok-svd-r4", "tok-full"], "method": "pure", "mean": [0.9, 0.1], "sd": 0.0,
                              "ci_low": 0.0, "ci_high": 1.0, "n_failed": 0, "n_positions": 8})
    table = table_e_tbat(summaries, ["tok-svd-r4", "tok-full"], ["pure"])
    assert table["bottleneck"].tolist() == [4, "full"] and table.iloc[1, 2] == 0.1


def test_token_text_reads_every_token_as_transformers_decodes_it_without_torch(tiny_token_lm, tmp_path):
    from oversmooth.models.causallm import load_tokenizer
    from oversmooth.models.tokentext import token_text

    tokenizer, text = load_tokenizer(tiny_token_lm), token_text(tiny_token_lm)
    assert tokenizer.bos_token_id is not None  # a special token, which the table shows as transformers does
    assert [text(t) for t in range(len(tokenizer))] == [tokenizer.decode([t]) for t in range(len(tokenizer))]
    probe = ("import sys\nfrom oversmooth.models.tokentext import token_text\n"
             f"print(repr(token_text({str(tiny_token_lm)!r})(0)), 'torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.strip() == f"{tokenizer.decode([0])!r} False"
    with pytest.raises(FileNotFoundError, match=r"tokens\.source"):
        token_text(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        token_text(tmp_path)

