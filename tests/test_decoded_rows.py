"""BA-epsilon and BA-eta in the metrics: the decoded rows of rule bat_decode (at TBAT's choice of positions) and the
metrics job's BA rows at those positions, aligned by (prompt_id, position)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from oversmooth.analysis.bat.sampler import BATDecoding, BATSampler, bat_decodings
from oversmooth.analysis.decodedrows import DecodedRows, read_decoded_rows, write_decoded_rows
from oversmooth.analysis.decoding import Decoding, decodings_from_config
from oversmooth.analysis.metrics import (
    METRICS,
    POSITION_SCHEMA,
    PositionChunk,
    oversmoothing_against,
    reference_terms,
    write_position_metrics,
)
from oversmooth.extraction.logit_tables import LOGITS_SCHEMA, sampled_logit_rows, sample_positions

V, K = 256, 4


def low_rank_logprobs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A head W (V x K) and n rows of its log-softmax at random inputs (rank K + 1, as a bottleneck's)."""
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(V, K))
    logits = 2.0 * rng.normal(size=(n, K)) @ W.T / np.sqrt(K)
    return W, logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)


def write_logits(path, prompt_id, position, logprobs):
    table = pa.table({"prompt_id": prompt_id.astype(np.int32), "position": position.astype(np.int32),
                      "target": np.zeros(len(position), dtype=np.uint8),
                      "logprobs": pa.FixedSizeListArray.from_arrays(pa.array(logprobs.astype(np.float32).ravel()), V)},
                     schema=LOGITS_SCHEMA)
    pq.write_table(table, path)


SETTINGS = {"methods": ["ba_epsilon", "ba_eta"], "epsilon": 0.005, "eta": 0.003}


def test_the_decoded_rows_are_bat_decoding_at_tbats_positions(tmp_path):
    W, logprobs = low_rank_logprobs(40, seed=3)
    prompt_id, position = np.repeat(np.arange(4), 10), np.tile(np.arange(10), 4)
    write_logits(tmp_path / "bn.parquet", prompt_id, position, logprobs)
    rows = sampled_logit_rows(tmp_path / "bn.parquet", 12, seed=5)
    chosen = sample_positions(40, 12, seed=5)  # TBAT's rows at tbat.positions 12, seed 5
    assert (rows.prompt_id == prompt_id[chosen]).all() and (rows.position == position[chosen]).all()

    write_decoded_rows(rows, bat_decodings(decodings_from_config(SETTINGS), W), tmp_path / "decoded.parquet")
    decoded = read_decoded_rows(tmp_path / "decoded.parquet")
    assert list(decoded.method) == ["ba_epsilon"] * 12 + ["ba_eta"] * 12
    for method, parameter in (("ba_epsilon", {"epsilon": 0.005}), ("ba_eta", {"eta": 0.003})):
        fresh = BATDecoding(Decoding(method, **parameter), BATSampler(W))  # its own solver
        expected = fresh(logprobs[chosen].astype(np.float32).astype(np.float64))
        got = decoded.logprobs[decoded.method == method]
        assert np.array_equal(got, expected)  # -inf at the same bytes, the same values elsewhere
        assert np.allclose(np.exp(got).sum(-1), 1.0)
    kept = np.isfinite(decoded.logprobs[:12])  # epsilon's kept bytes and some below it: the solver decided them
    epsilon = np.isfinite(Decoding("epsilon", epsilon=0.005)(logprobs[chosen].astype(np.float32).astype(np.float64)))
    assert (kept >= epsilon).all() and (kept.sum(-1) > epsilon.sum(-1)).all() and (kept.sum(-1) < V).all()


def chunks_of(logp_model, logp_gt, prompt_id, position, split):
    """The positions as two chunks, cut at `split`."""
    return [PositionChunk(prompt_id[s], position[s], position[s] % 7, logp_model[s], logp_gt[s])
            for s in (slice(0, split), slice(split, None))]


def test_ba_metrics_rows_are_the_metrics_of_the_decoded_rows_at_their_positions_across_chunks(tmp_path):
    _, logp_model = low_rank_logprobs(30, seed=1)
    _, logp_gt = low_rank_logprobs(30, seed=2)
    prompt_id, position = np.repeat(np.arange(3), 10), np.tile(np.arange(10), 3)
    at = np.array([2, 11, 17, 25])  # in both chunks (cut at 15), in the file's order by method
    ba = np.log(np.full((4, V), 1.0 / V))  # any distributions: the metrics take them as they are
    ba[:, ::2] = -np.inf
    ba = ba - np.logaddexp.reduce(ba, axis=-1, keepdims=True)
    decoded = DecodedRows(np.tile(prompt_id[at], 2), np.tile(position[at], 2), np.array(["ba_epsilon"] * 4 + ["ba_eta"] * 4,
                          dtype=object), np.concatenate([ba, logp_model[at]]), "decoded.parquet")
    out = tmp_path / "m.parquet"
    write_position_metrics(chunks_of(logp_model, logp_gt, prompt_id, position, 15), out,
                           [Decoding("pure")], 0.9, 1e-6, decoded)
    table = pq.read_table(out)
    assert table.schema.equals(POSITION_SCHEMA)
    frame = table.to_pandas()
    assert frame["method"].value_counts().to_dict() == {"pure": 30, "ba_epsilon": 4, "ba_eta": 4}
    reference = reference_terms(logp_gt[at], 0.9)
    for method, rows in (("ba_epsilon", ba), ("ba_eta", logp_model[at])):
        got = frame[frame["method"] == method].sort_values(["prompt_id", "position"])
        assert (got["prompt_id"].to_numpy() == prompt_id[at]).all() and (got["position"].to_numpy() == position[at]).all()
        assert (got["target"].to_numpy() == position[at] % 7).all()
        expected = oversmoothing_against(rows, reference, 1e-6)
        for name in METRICS:
            np.testing.assert_array_equal(got[name].to_numpy(), expected[name], err_msg=name)
        assert (got["nucleus_size"].to_numpy() == expected["nucleus_size"]).all()
    # ba_eta's rows are the model's own distribution: pure's rows at those positions
    pure = frame[frame["method"] == "pure"].set_index(["prompt_id", "position"])
    eta = frame[frame["method"] == "ba_eta"].set_index(["prompt_id", "position"])
    assert np.allclose(eta["tv"], pure.loc[eta.index, "tv"])


def test_a_decoded_row_at_a_position_the_logits_lack_is_an_error_naming_the_file_and_the_position(tmp_path):
    _, logp = low_rank_logprobs(20, seed=4)
    prompt_id, position = np.repeat(np.arange(2), 10), np.tile(np.arange(10), 2)
    decoded = DecodedRows(np.array([1, 5]), np.array([3, 9]), np.array(["ba_eta", "ba_eta"], dtype=object),
                          logp[:2], "results/decoded/bn-4.parquet")
    out = tmp_path / "m.parquet"
    with pytest.raises(ValueError, match=r"results/decoded/bn-4\.parquet: 1 decoded rows .* prompt_id 5, position 9"):
        write_position_metrics(chunks_of(logp, logp, prompt_id, position, 10), out, [Decoding("pure")], 0.9, 1e-6,
                               decoded)
    assert not out.exists()  # no half-made metrics file


def test_tbat_after_ba_at_the_decoded_rows_is_tbat_of_ba_decided_again_at_those_positions(tmp_path):
    """The TBAT job reads BA's rows from rule bat_decode instead of deciding its reject sets a second time: the same
    numbers as binding BA to the head in the job, at the decoded file's positions, beside the other methods' rows."""
    from oversmooth.analysis.bat.settings import TBATSettings
    from oversmooth.analysis.tbat import model_tbat

    W, logprobs = low_rank_logprobs(30, seed=7)
    prompt_id, position = np.repeat(np.arange(3), 10), np.tile(np.arange(10), 3)
    write_logits(tmp_path / "bn.parquet", prompt_id, position, logprobs)
    rows = sampled_logit_rows(tmp_path / "bn.parquet", 6, seed=2)
    write_decoded_rows(rows, bat_decodings(decodings_from_config(SETTINGS), W), tmp_path / "decoded.parquet")
    decoded = read_decoded_rows(tmp_path / "decoded.parquet")
    tbat_rows = sampled_logit_rows(tmp_path / "bn.parquet", 9, seed=4)  # tbat.positions need not be bat_positions
    read = model_tbat(W, tbat_rows, tmp_path / "read.parquet", [Decoding("pure")], TBATSettings(),
                      decoded=decoded).to_pandas()
    bound = model_tbat(W, rows, tmp_path / "bound.parquet", bat_decodings(decodings_from_config(SETTINGS), W),
                       TBATSettings()).to_pandas()
    assert read["method"].value_counts().to_dict() == {"pure": 9, "ba_epsilon": 6, "ba_eta": 6}
    ba = read[read["method"] != "pure"].reset_index(drop=True)
    assert ba[["prompt_id", "position", "method", "n_rejected"]].equals(
        bound[["prompt_id", "position", "method", "n_rejected"]])
    np.testing.assert_allclose(ba["tbat"], bound["tbat"], rtol=0, atol=1e-15)
    assert (ba.loc[ba["method"] == "ba_epsilon", "n_rejected"] > 0).any()  # something for the check to compare
