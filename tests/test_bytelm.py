"""The `hf` ground-truth path with a real byte-level model saved and loaded by transformers (no mocks)."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from oversmooth.models.bytelm import GPTByteLM, load_hf_byte_lm
from oversmooth.models.evaluate import document_starts, heldout_metrics, heldout_pool
from oversmooth.models.model import GPT, GPTConfig

OFFSET, BOS, N_TOKENS = 3, 1, 3 + 256 + 5  # EvaByte-like: specials, then the 256 bytes, then more specials


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=N_TOKENS, n_positions=64, n_embd=32, n_layer=1, n_head=2))
    folder = tmp_path_factory.mktemp("tiny-byte-lm")
    model.save_pretrained(folder)
    return folder, model.eval()


def test_hf_loader_gives_256_byte_probabilities_summing_to_one(saved_model):
    folder, _ = saved_model
    lm = load_hf_byte_lm("gt-tiny", folder, byte_offset=OFFSET, bos_id=BOS)
    x = torch.tensor([list(b"Hello world."), list(b"A second row")])
    logprobs = lm.next_byte_logprobs(x)
    assert logprobs.shape == (2, 12, 256)
    assert torch.allclose(logprobs.exp().sum(-1), torch.ones(2, 12), atol=1e-5)
    assert lm.block_size == 63  # 64 positions less the BOS


def test_hf_loader_slices_bytes_and_shifts_past_bos(saved_model):
    folder, reference = saved_model
    lm = load_hf_byte_lm("gt-tiny", folder, byte_offset=OFFSET, bos_id=BOS)
    x = torch.tensor([list(b"abc")])
    with torch.no_grad():
        full = reference(input_ids=torch.tensor([[BOS, *(x[0] + OFFSET).tolist()]])).logits[0]
    expected = torch.log_softmax(full[1:, OFFSET : OFFSET + 256], dim=-1)  # outputs after a, b, c
    assert torch.allclose(lm.next_byte_logprobs(x)[0], expected, atol=1e-5)


def test_hf_loader_errors_name_the_culprit(saved_model, tmp_path):
    folder, _ = saved_model
    with pytest.raises(FileNotFoundError, match=r"ground truth 'gt-x': no model folder"):
        load_hf_byte_lm("gt-x", tmp_path / "missing")
    with pytest.raises(ValueError, match=r"byte_offset 10 \+ 256 exceeds the model's 264 outputs"):
        load_hf_byte_lm("gt-x", folder, byte_offset=10)


def test_heldout_metrics_hand_checked_on_a_gpt():
    model = GPT(GPTConfig(block_size=16, n_layer=1, n_head=1, n_embd=8, bottleneck=2)).eval()
    lm = GPTByteLM("bn-2", model)
    data = np.frombuffer(b"abcdefgh" * 50, dtype=np.uint8)
    result = heldout_metrics(lm, data, windows=5, block=16, batch_size=2, seed=0)
    assert result["bytes"] == 5 * 16
    assert result["heldout_loss"] == pytest.approx(np.log(256), abs=0.05)  # untrained: near uniform
    assert 0 <= result["accuracy_pct"] <= 100
    with pytest.raises(ValueError, match=r"evaluation.block \(32\) exceeds bn-2's block size \(16\)"):
        heldout_metrics(lm, data, windows=1, block=32, batch_size=1, seed=0)


def test_heldout_windows_from_document_starts_read_each_document_from_its_first_byte(tmp_path):
    docs = [b"\nab", b"\nabcdefgh", b"\nxyz", b"\n0123456789"]
    pool = tmp_path / "eval_docs.parquet"
    pq.write_table(pa.table({"doc_id": [f"d:{i}" for i in range(4)], "text": docs}), pool)
    data, documents = heldout_pool(pool, 10**6)
    assert data.tobytes() == b"".join(d + b"\n\n" for d in docs)
    assert documents.tolist() == [[0, 3], [5, 9], [16, 4], [22, 11]]
    assert document_starts(documents, block=8).tolist() == [5, 22]  # at least 9 bytes
    assert heldout_pool(pool, 19)[1].tolist() == [[0, 3], [5, 9], [16, 3]]  # the last one cut with the pool
    # a model that reads a document's first byte predicts it from its start: every window begins with "\n"
    seen = []
    lm = GPTByteLM("bn-2", GPT(GPTConfig(block_size=16, n_layer=1, n_head=1, n_embd=8, bottleneck=2)).eval())
    original = lm.next_byte_logprobs
    lm.next_byte_logprobs = lambda x: (seen.append(x.clone()), original(x))[1]
    result = heldout_metrics(lm, data, windows=2, block=8, batch_size=1, seed=0, starts=document_starts(documents, 8))
    assert result["bytes"] == 2 * 8
    assert sorted(bytes(w[0].tolist()) for w in seen) == [b"\n0123456", b"\nabcdefg"]
    with pytest.raises(ValueError, match=r"evaluation.windows \(3\) exceeds the 2 held-out documents of at least "
                                         r"evaluation.block \+ 1 = 9 bytes"):
        heldout_metrics(lm, data, windows=3, block=8, batch_size=1, seed=0, starts=document_starts(documents, 8))
