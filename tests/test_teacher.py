"""The teacher's corpus: its truth is exact (the pipeline's probability of a document is the product of the
conditionals that drew it), seeded per document, cached = uncached, and bad settings named."""

import math

import pyarrow.parquet as pq
import pytest
import torch

from oversmooth.generation.sampling import GPTStepper, UncachedStepper
from oversmooth.generation.teacher import (
    TEACHER_DOCUMENTS_SCHEMA,
    TeacherError,
    TeacherSpec,
    iter_documents,
    sample_batch,
    write_teacher_documents,
)
from oversmooth.generation.truth import TruthError, continuation_bits
from oversmooth.models.bytelm import GPTByteLM
from oversmooth.models.model import GPT, GPTConfig


@pytest.fixture(scope="module")
def teacher():
    torch.manual_seed(0)
    return GPTByteLM("gt-teacher", GPT(GPTConfig(block_size=32, n_layer=2, n_head=2, n_embd=32)).eval())


class FixedStepper:
    """Every next byte: 0 with probability 1/4, 1 with 3/4 (a hand-computed case)."""

    block_size = 8

    def __init__(self):
        self.length = 0

    def _logprobs(self, rows):
        out = torch.full((rows, 256), float("-inf"))
        out[:, 0], out[:, 1] = math.log(0.25), math.log(0.75)
        return out

    def start(self, window):
        self.length = window.size(1)
        return self._logprobs(window.size(0))

    def step(self, byte):
        self.length += 1
        return self._logprobs(byte.size(0))

    def cached(self):
        return self.length


def test_a_hand_computed_document_and_its_probability():
    # uniforms 0.1 < 1/4 -> byte 0, 0.5 and 0.9 -> byte 1: p = 1/4 * 3/4 * 3/4
    text, logprob = sample_batch(FixedStepper(), 10, torch.tensor([[0.1, 0.5, 0.9]], dtype=torch.float64))
    assert text.tolist() == [[10, 0, 1, 1]]
    assert logprob.item() == pytest.approx(math.log(0.25 * 0.75 * 0.75), abs=1e-6)  # float32 conditionals


def test_the_pipelines_probability_of_a_document_is_the_product_of_the_conditionals_that_drew_it(teacher):
    spec = TeacherSpec(documents=6, document_bytes=32, start_byte=10, batch_size=4)
    rows = list(iter_documents(GPTStepper(teacher), spec, "gt-teacher", seed=7))
    assert [len(r["text"]) for r in rows] == [32] * 6 and all(r["text"][0] == 10 for r in rows)
    docs = torch.tensor([list(r["text"]) for r in rows])
    # what extract_logits computes for a window with the document before it as context: one forward pass
    logprobs = teacher.next_byte_logprobs(docs)[:, :-1].double()
    pipeline = logprobs.gather(-1, docs[:, 1:, None]).squeeze(-1).sum(-1)
    assert pipeline.tolist() == pytest.approx([r["logprob"] for r in rows], abs=1e-4)
    assert len({r["text"] for r in rows}) == 6  # six documents, not one six times


def test_documents_depend_on_the_seed_and_their_index_only(teacher):
    def docs(batch_size, documents=5, seed=7):
        spec = TeacherSpec(documents=documents, document_bytes=16, batch_size=batch_size)
        return [r["text"] for r in iter_documents(GPTStepper(teacher), spec, "gt-teacher", seed)]

    assert docs(1) == docs(5) == docs(2)
    assert docs(2, documents=3) == docs(2)[:3]
    assert docs(5, seed=8) != docs(5)


def test_the_cached_sampler_draws_what_rereading_the_whole_document_draws(teacher):
    spec = TeacherSpec(documents=3, document_bytes=32, batch_size=3)
    cached = list(iter_documents(GPTStepper(teacher), spec, "gt-teacher", 1))
    uncached = list(iter_documents(UncachedStepper(GPTStepper(teacher)), spec, "gt-teacher", 1))
    assert [r["text"] for r in cached] == [r["text"] for r in uncached]
    assert [r["logprob"] for r in cached] == pytest.approx([r["logprob"] for r in uncached], abs=1e-4)


def test_the_corpus_is_written_with_its_schema(teacher, tmp_path):
    out = tmp_path / "teacher.parquet"
    write_teacher_documents(GPTStepper(teacher), TeacherSpec(documents=3, document_bytes=8), "gt-teacher", 1, out)
    table = pq.read_table(out)
    assert table.schema == TEACHER_DOCUMENTS_SCHEMA
    assert table.column("doc_id").to_pylist() == ["gt-teacher:0", "gt-teacher:1", "gt-teacher:2"]


@pytest.mark.parametrize(("spec", "message"), [
    (TeacherSpec(documents=1, document_bytes=33), r"document_bytes 33 must lie in \[2, 32\]"),
    (TeacherSpec(documents=1, document_bytes=1), r"document_bytes 1 must lie in \[2, 32\]"),
    (TeacherSpec(documents=1, document_bytes=8, start_byte=256), r"start_byte 256 is no byte"),
])
def test_a_document_the_teacher_cannot_hold_is_named(teacher, spec, message):
    with pytest.raises(TeacherError, match=message):
        list(iter_documents(GPTStepper(teacher), spec, "gt-teacher", 1))


def test_a_continuation_is_scored_by_the_truth_in_bits_per_byte_given_its_whole_document(teacher):
    rows = list(iter_documents(GPTStepper(teacher), TeacherSpec(documents=4, document_bytes=32), "gt-teacher", 3))
    texts = [r["text"] for r in rows]
    cuts = [1, 5, 17, 31]  # contexts of different lengths, right-padded together in one batch
    bits = continuation_bits(teacher, [t[:c] for t, c in zip(texts, cuts)], [t[c:] for t, c in zip(texts, cuts)])
    alone = [continuation_bits(teacher, [t[:c]], [t[c:]])[0] for t, c in zip(texts, cuts)]
    assert bits.tolist() == pytest.approx(alone, abs=1e-9)
    # the whole document after its start byte: minus its stored log-probability, in bits per byte
    assert bits[0] == pytest.approx(-rows[0]["logprob"] / math.log(2) / 31, abs=1e-5)
    assert math.isnan(continuation_bits(teacher, [b"\n"], [b""])[0])


def test_a_text_longer_than_the_truths_block_or_without_context_is_named(teacher):
    with pytest.raises(TruthError, match=r"1 texts \(the first: pair 1, 34 bytes\) do not fit in the truth's block of 32"):
        continuation_bits(teacher, [b"\n", b"\n" * 10], [b"a", b"b" * 24])
    with pytest.raises(TruthError, match="an empty context"):
        continuation_bits(teacher, [b""], [b"abc"])


def test_a_token_teacher_writes_text_whose_truth_is_the_marginal_that_drew_it(tiny_token_lm):
    # a pretrained token LM as the teacher: bytes drawn from its next-byte marginal (over tokenisations), so that
    # the pipeline's reading of a document (the logits path, and the truth's scoring of samples) gives it back
    from oversmooth.models.tokenmarginal import MarginalStepper, load_token_byte_lm

    lm = load_token_byte_lm("gt-tiny", tiny_token_lm)
    rows = list(iter_documents(MarginalStepper(lm), TeacherSpec(documents=3, document_bytes=16, batch_size=2),
                               "gt-tiny", 5))
    texts = [r["text"] for r in rows]
    assert {len(t) for t in texts} == {16} and all(t[0] == 10 for t in texts) and len(set(texts)) == 3
    x = torch.tensor([list(t) for t in texts])
    logprobs = lm.next_byte_outputs(x[:, :-1], outputs_from=[0] * 3).logprobs.double()
    read = logprobs.gather(-1, x[:, 1:, None]).squeeze(-1).sum(-1)
    assert read.tolist() == pytest.approx([r["logprob"] for r in rows], abs=1e-4)
    bits = continuation_bits(lm, [t[:1] for t in texts], [t[1:] for t in texts])
    assert bits.tolist() == pytest.approx([-r["logprob"] / math.log(2) / 15 for r in rows], abs=1e-4)
