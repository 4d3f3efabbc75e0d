"""Rank and expressivity: SVD-imposed heads, effective rank, singular entropy, anisotropy, energy rank."""

import math
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from oversmooth.analysis.rank import rank_table, representations, svd_checkpoint, truncated_head
from oversmooth.core.spectra import (
    anisotropy,
    effective_rank,
    energy_rank,
    singular_entropy_gap,
    singular_values,
    threshold_rank,
)
from oversmooth.extraction.logit_tables import hidden_schema
from oversmooth.models.checkpoints import load_model, save_torch
from oversmooth.models.model import GPT, GPTConfig
from oversmooth.workflow.config import ConfigError, load_config


def saved_model(path, bottleneck=32, n_embd=48, seed=0):
    torch.manual_seed(seed)
    model = GPT(GPTConfig(block_size=16, n_layer=1, n_head=2, n_embd=n_embd, bottleneck=bottleneck)).eval()
    save_torch({"name": "bn-test", "model_config": model.config.to_dict(), "model": model.state_dict()}, path)
    return model


def logprob_matrix(model, n_windows=40, seed=1):
    """Log-probabilities of random windows, in float64 so that rank is not blurred by float32 rounding."""
    idx = torch.randint(0, 256, (n_windows, 16), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        logits, _ = model.double()(idx)
    return torch.log_softmax(logits, -1).reshape(-1, 256).numpy()


def float32_rank(matrix: np.ndarray) -> int:
    """Rank at float32 precision: the checkpoint stores W_r in float32, whose rounding (~1e-7) is not rank."""
    return threshold_rank(singular_values(matrix), 1e-5)


@pytest.mark.parametrize("rank", [1, 4, 12])
def test_svd_imposed_head_gives_log_probabilities_of_rank_at_most_r_plus_one(tmp_path, rank):
    source = saved_model(tmp_path / "source.pt")
    assert float32_rank(logprob_matrix(source)) > rank + 1  # the source head is wider
    record = svd_checkpoint(tmp_path / "source.pt", rank, tmp_path / "svd.pt", f"svd-r{rank}")
    truncated = load_model(tmp_path / "svd.pt")
    assert float32_rank(logprob_matrix(truncated)) <= rank + 1
    assert float32_rank(truncated.output_matrix().detach().double().numpy()) == rank
    s = singular_values(source.output_matrix())
    assert record["energy_kept"] == pytest.approx((s[:rank] ** 2).sum() / (s**2).sum())
    assert torch.load(tmp_path / "svd.pt", weights_only=True)["svd"]["rank"] == rank
    for name, value in source.state_dict().items():  # only the output matrix changes
        if name != "head.out.weight":
            assert torch.equal(truncated.state_dict()[name], value)


def test_truncation_is_the_best_approximation_and_full_rank_is_the_identity():
    w = torch.randn(256, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    s = singular_values(w)
    # Eckart–Young: the Frobenius error of the rank-r truncation is the norm of the dropped singular values
    assert torch.linalg.norm(w - truncated_head(w, 5)).item() == pytest.approx(math.sqrt((s[5:] ** 2).sum()))
    assert torch.allclose(truncated_head(w, 16), w)
    with pytest.raises(ValueError, match="rank 17 must lie in 1..16"):
        truncated_head(w, 17)


def test_svd_rank_wider_than_the_head_is_refused(tmp_path):
    saved_model(tmp_path / "source.pt", bottleneck=8)
    with pytest.raises(ValueError, match="svd.ranks: 9 exceeds the rank 8"):
        svd_checkpoint(tmp_path / "source.pt", 9, tmp_path / "svd.pt", "svd-r9")
    assert not (tmp_path / "svd.pt").exists()


def test_effective_rank_of_known_spectra():
    assert effective_rank(np.ones(4)) == pytest.approx(4.0)
    assert effective_rank(np.array([5.0, 0.0, 0.0])) == pytest.approx(1.0)
    # p = (1/2, 1/4, 1/4): H = 1.5 log 2, so exp(H) = 2^1.5
    assert effective_rank(np.array([2.0, 1.0, 1.0])) == pytest.approx(2**1.5)
    assert effective_rank(singular_values(np.diag([3.0, 3.0, 0.0]))) == pytest.approx(2.0)


def test_threshold_and_energy_ranks():
    s = np.array([3.0, 2.0, 1.0])  # energies 9, 4, 1 of 14
    assert threshold_rank(s, 0.5) == 2 and threshold_rank(s, 0.1) == 3 and threshold_rank(s, 0.99) == 1
    assert energy_rank(s, 0.5) == 1 and energy_rank(s, 0.9) == 2 and energy_rank(s, 13 / 14) == 2
    assert energy_rank(s, 1.0) == 3


def test_singular_entropy_gap_is_zero_for_a_flat_spectrum_and_log_n_for_rank_one():
    assert singular_entropy_gap(np.ones(64)) == pytest.approx(0.0, abs=1e-12)
    assert singular_entropy_gap(np.array([1.0, 0.0, 0.0, 0.0])) == pytest.approx(math.log(4))
    assert singular_entropy_gap(np.array([2.0, 1.0, 1.0])) == pytest.approx(math.log(3) - 1.5 * math.log(2))


def test_anisotropy_of_identical_orthogonal_and_isotropic_vectors():
    assert anisotropy(np.tile([[0.3, -1.0, 2.0]], (5, 1))) == pytest.approx(1.0)
    assert anisotropy(np.eye(3)) == pytest.approx(0.0)
    assert anisotropy(np.array([[1.0, 0.0], [1.0, 1.0]])) == pytest.approx(1 / math.sqrt(2))
    isotropic = np.random.default_rng(0).standard_normal((2000, 256))
    assert abs(anisotropy(isotropic)) < 0.005
    with pytest.raises(ValueError, match="zero vector"):
        anisotropy(np.array([[1.0, 0.0], [0.0, 0.0]]))


def test_representations_of_a_bottleneck_have_the_expected_ranks(tmp_path):
    k = 6
    model = saved_model(tmp_path / "model.pt", bottleneck=k)
    idx = torch.randint(0, 256, (8, 16), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        pre = model.features(idx).reshape(-1, 48)
        post = model.head.bottleneck(pre)
        expected_logits = model.head(pre).double()
    rows = [{"prompt_id": i // 16, "position": i % 16, "pre": pre[i].tolist(), "post": post[i].tolist()}
            for i in range(len(pre))]
    pq.write_table(pa.Table.from_pylist(rows, schema=hidden_schema(48, k)), tmp_path / "hidden.parquet")
    matrices = representations(tmp_path / "hidden.parquet", tmp_path / "model.pt", positions=100)
    assert np.allclose(matrices["logits"], expected_logits[:100].numpy(), atol=1e-5)
    assert np.allclose(matrices["probabilities"].sum(1), 1.0)
    table = {row["representation"]: row for row in rank_table(matrices, threshold=1e-6)}
    assert table["logits"]["threshold_rank"] <= k and table["post_bottleneck"]["dim"] == k
    assert table["pre_bottleneck"]["effective_rank"] > table["post_bottleneck"]["effective_rank"]
    with pytest.raises(ValueError, match="rank.positions asks for 500"):
        representations(tmp_path / "hidden.parquet", tmp_path / "model.pt", positions=500)


def test_config_refuses_svd_ranks_wider_than_the_source_and_too_many_rank_positions(tmp_path, repo):
    bad = tmp_path / "bad.yaml"
    bad.write_text("svd: {ranks: [4, 300]}\n")
    with pytest.raises(ConfigError, match=r"svd.ranks\[1\]: 300 is greater than the maximum of 256"):
        load_config(repo / "config" / "config.yaml", bad)
    bad.write_text("bottlenecks: [4, 16]\nsvd: {ranks: [4, 32]}\n")
    with pytest.raises(ConfigError, match=r"svd.ranks: \[32\] exceed the 16-wide head of bn-16"):
        load_config(repo / "config" / "config.yaml", bad)
    bad.write_text("rank: {positions: 2048}\n")
    with pytest.raises(ConfigError, match="rank.positions: 2048 exceeds logits.hidden_positions 1024"):
        load_config(repo / "config" / "config.yaml", bad)
    bad.write_text("svd: {decoding: [greedy]}\ndecoding: {methods: [pure]}\n")
    with pytest.raises(ConfigError, match=r"svd.decoding: \['greedy'\] are not in decoding.methods"):
        load_config(repo / "config" / "config.yaml", bad)


def brute_force_counts(data: bytes, order: int) -> Counter:
    return Counter((data[i : i + order - 1], data[i + order - 1]) for i in range(len(data) - order + 1))


@pytest.mark.parametrize("order", [2, 3, 5])
def test_ngram_counts_match_brute_force_across_chunk_boundaries(monkeypatch, order):
    from oversmooth.analysis import rank

    rng = np.random.default_rng(order)
    data = rng.choice(np.frombuffer(b"abcde ", np.uint8), size=5000)
    monkeypatch.setattr(rank, "NGRAM_CHUNK", 777)  # many chunks, n-grams straddling every boundary
    contexts, counts = rank.ngram_counts(data, order, n_contexts=10)
    expected = brute_force_counts(data.tobytes(), order)
    totals = Counter()
    for (context, _), c in expected.items():
        totals[context] += c
    top = sorted(totals, key=lambda c: (-totals[c], c))[:10]
    assert sorted(int.from_bytes(c, "big") for c in top) == contexts.tolist()
    for row, code in enumerate(contexts.tolist()):
        context = int(code).to_bytes(order - 1, "big")
        for byte in range(256):
            assert counts[row, byte] == expected.get((context, byte), 0)


def test_ngram_logprobs_of_an_alternating_text():
    from oversmooth.analysis import rank

    data = np.frombuffer(b"ab" * 50, np.uint8)
    contexts, counts = rank.ngram_counts(data, 2, n_contexts=5)
    assert contexts.tolist() == [ord("a"), ord("b")]
    assert counts[0, ord("b")] == 50 and counts[1, ord("a")] == 49 and counts.sum() == 99
    logprobs = rank.ngram_logprobs(counts, alpha=1.0)
    assert logprobs[0, ord("b")] == pytest.approx(math.log(51 / (50 + 256)))
    assert np.allclose(np.exp(logprobs).sum(axis=1), 1.0)
    rows = rank.ngram_rank_rows(data, 3, n_contexts=5, alpha=0.01, threshold=0.01, shares=[0.9])
    assert [row["n"] for row in rows] == [2, 3] and rows[0]["context_coverage"] == pytest.approx(1.0)
    assert 1 <= rows[0]["effective_rank"] <= 2 and rows[0]["energy_rank_0.9"] <= 2


def test_layer_states_and_anisotropy_of_a_saved_model(tmp_path):
    from conftest import prompts_table

    from oversmooth.analysis.rank import layer_anisotropy

    model = saved_model(tmp_path / "model.pt", bottleneck=8)
    idx = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(0))
    states = dict(model.layer_states(idx))
    assert list(states) == ["embeddings", "block_1", "pre_bottleneck", "post_bottleneck"]
    assert torch.allclose(states["pre_bottleneck"], model.features(idx))
    assert states["post_bottleneck"].shape == (2, 16, 8)
    prompts = prompts_table(6, context_len=10, window_len=12)
    rows = layer_anisotropy(tmp_path / "model.pt", prompts, n_vectors=50, seed=0)
    assert [r["representation"] for r in rows] == list(states)
    assert all(r["vectors"] == 50 and -1 <= r["anisotropy"] <= 1 for r in rows)
    assert rows == layer_anisotropy(tmp_path / "model.pt", prompts, n_vectors=50, seed=0)  # seeded


def test_table_7_3_labels_every_representation_rank_measures_in_its_order():
    from oversmooth.analysis.rank import REPRESENTATIONS
    from oversmooth.reporting.rank_report import REPRESENTATION_LABELS

    assert tuple(REPRESENTATION_LABELS) == REPRESENTATIONS
