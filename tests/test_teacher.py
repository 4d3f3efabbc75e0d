"""The teacher's corpus: its truth is exact (the pipeline's probability of a document is the product of the
conditionals that drew it), seeded per document, cached = uncached, and bad settings named. A truth with known
support: the teacher under a decoding D writes from D(teacher), and every reading of the truth (logits,
evaluation, scoring of samples) is D applied to the teacher's own distribution; a pure teacher writes what it wrote
before."""

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from workflow_helpers import module_at

from oversmooth.analysis.decoding import Decoding
from oversmooth.extraction.logit_tables import iter_logits
from oversmooth.extraction.logits import extract_logits
from oversmooth.generation.decoded import DecodedByteLM, DecodedStepper, decoded_truth, truth_decoding
from oversmooth.generation.sampling import GPTStepper, UncachedStepper, stepper_for, uniforms_for
from oversmooth.generation.teacher import (
    TEACHER_DOCUMENTS_SCHEMA,
    TeacherError,
    TeacherSpec,
    document_seed,
    iter_documents,
    sample_batch,
    write_teacher_documents,
)
from oversmooth.generation.truth import TruthError, continuation_bits
from oversmooth.models.evaluate import heldout_metrics
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



def test_a_token_teacher_under_a_truncation_writes_from_its_truncated_marginal(tiny_token_lm):
    # config/thesis-teacher.yaml: SmolLM2's marginal under epsilon. The stepper the teacher job takes
    # (stepper_for(DecodedByteLM)) draws from the truncated marginal, and every reading of the truth gives each
    # document's log-probability back, with no drawn byte outside the truth's support
    from oversmooth.models.tokenmarginal import load_token_byte_lm

    truth = DecodedByteLM(load_token_byte_lm("gt-tiny", tiny_token_lm), Decoding("epsilon", epsilon=0.01))
    stepper = stepper_for(truth)
    rows = list(iter_documents(stepper, TeacherSpec(documents=3, document_bytes=16, batch_size=2), "gt-tiny", 5))
    assert stepper.truncation()["share_with_zero"] > 0.5  # the truncation cut bytes at most drawn positions
    x = torch.tensor([list(r["text"]) for r in rows])
    logprobs = truth.next_byte_outputs(x[:, :-1], outputs_from=[0] * 3).logprobs.double()
    drawn = logprobs.gather(-1, x[:, 1:, None]).squeeze(-1)
    assert torch.isfinite(drawn).all() and bool(torch.isneginf(logprobs).any())
    assert drawn.sum(-1).tolist() == pytest.approx([r["logprob"] for r in rows], abs=1e-4)

# ---------------------------------------------------------------------------------------------------------------
# A truth with known support: the teacher under a decoding

EPSILON = Decoding("epsilon", epsilon=0.003)  # on the sharp teacher: ~112 of 256 bytes kept, ~23 % of the mass cut


@pytest.fixture(scope="module")
def sharp_teacher():
    """A random teacher whose rows are far from uniform (its head scaled by 8; the plain one's lie within 0.003 to
    0.005, where a truncation keeps all or one byte)."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=32, n_layer=2, n_head=2, n_embd=32)).eval()
    with torch.no_grad():
        model.head.out.weight.mul_(8)
    return GPTByteLM("gt-teacher", model)


class ThreeByteStepper(FixedStepper):
    """Every next byte: 0 with probability 0.1, 1 with 0.3, 2 with 0.6."""

    def _logprobs(self, rows):
        out = torch.full((rows, 256), float("-inf"))
        out[:, 0], out[:, 1], out[:, 2] = math.log(0.1), math.log(0.3), math.log(0.6)
        return out


def test_a_hand_computed_document_of_a_truncated_truth():
    # epsilon 0.2 sets byte 0 to 0: the truth is 1 w.p. 1/3, 2 w.p. 2/3 (cdf 0, 1/3, 1)
    stepper = DecodedStepper(ThreeByteStepper(), Decoding("epsilon", epsilon=0.2))
    text, logprob = sample_batch(stepper, 10, torch.tensor([[0.05, 0.5, 0.2]], dtype=torch.float64))
    assert text.tolist() == [[10, 1, 2, 1]]  # 0.05 is below 1/3: byte 1, where the teacher itself drew byte 0
    assert logprob.item() == pytest.approx(math.log(1 / 3 * 2 / 3 * 1 / 3), abs=1e-6)  # float32 conditionals
    # three rows drawn from, each with one byte (0) removed, of mass 0.1
    assert stepper.truncation() == pytest.approx({"rows": 3, "share_with_zero": 1.0, "zero_bytes": 1.0,
                                                  "cut_mass": 0.1})
    assert sample_batch(ThreeByteStepper(), 10, torch.tensor([[0.05]], dtype=torch.float64))[0].tolist() == [[10, 0]]


BEFORE_DECODED_TRUTHS = "fed6b3b"  # main's last revision before a teacher could write under a decoding


def test_a_pure_teacher_writes_the_documents_it_wrote_before(teacher):
    assert decoded_truth(teacher, {"method": "pure"}) is teacher and decoded_truth(teacher, None) is teacher
    assert truth_decoding({"method": "pure"}) is None
    assert isinstance(stepper_for(teacher), GPTStepper)  # no decoding in the way: the stepper of before
    spec = TeacherSpec(documents=5, document_bytes=32, batch_size=5)
    rows = list(iter_documents(stepper_for(decoded_truth(teacher, {"method": "pure"})), spec, "gt-teacher", 7))
    seeds = [document_seed(7, "gt-teacher", i) for i in range(5)]
    before = module_at(BEFORE_DECODED_TRUTHS, "src/oversmooth/generation/teacher.py")  # the oracle
    texts, logprobs = before.sample_batch(GPTStepper(teacher), 10, uniforms_for(seeds, 31))
    assert [r["text"] for r in rows] == [bytes(t) for t in texts.tolist()]
    assert [r["logprob"] for r in rows] == logprobs.tolist()  # exactly


def _epsilon_documents(teacher, documents=6, seed=7):
    truth = decoded_truth(teacher, {"method": "epsilon", "epsilon": EPSILON.epsilon})
    assert isinstance(truth, DecodedByteLM) and truth.decoding == EPSILON
    spec = TeacherSpec(documents=documents, document_bytes=32, start_byte=10, batch_size=4)
    return truth, list(iter_documents(stepper_for(truth), spec, "gt-teacher", seed=seed))


def test_a_truncated_truths_documents_have_the_probability_of_the_decoded_conditionals(sharp_teacher):
    truth, rows = _epsilon_documents(sharp_teacher)
    docs = torch.tensor([list(r["text"]) for r in rows])
    raw = sharp_teacher.next_byte_logprobs(docs)[:, :-1].double()
    decoded = torch.from_numpy(EPSILON(raw.numpy()))  # D applied to the teacher's own distribution, by hand
    assert torch.isneginf(decoded).any(-1).float().mean() > 0.5  # zeros at most positions: a truth with known support
    drawn = decoded.gather(-1, docs[:, 1:, None]).squeeze(-1)
    assert torch.isfinite(drawn).all()  # no document byte lies outside the truth's support
    assert drawn.sum(-1).tolist() == pytest.approx([r["logprob"] for r in rows], abs=1e-4)
    assert raw.gather(-1, docs[:, 1:, None]).squeeze(-1).sum(-1).tolist() != pytest.approx(
        [r["logprob"] for r in rows], abs=1e-2)  # the teacher's own probability of them is another
    pure = list(iter_documents(GPTStepper(sharp_teacher), TeacherSpec(documents=6, document_bytes=32, batch_size=4),
                               "gt-teacher", seed=7))
    assert [r["text"] for r in pure] != [r["text"] for r in rows]  # the same uniforms, another distribution
    # the uncached reading draws the same documents
    uncached = list(iter_documents(DecodedStepper(UncachedStepper(GPTStepper(sharp_teacher)), EPSILON),
                                   TeacherSpec(documents=6, document_bytes=32, batch_size=3), "gt-teacher", seed=7))
    assert [r["text"] for r in uncached] == [r["text"] for r in rows]


def test_the_truths_conditionals_are_the_decoding_of_the_teachers_own(sharp_teacher, tmp_path):
    truth, rows = _epsilon_documents(sharp_teacher, documents=4, seed=3)
    docs = torch.tensor([list(r["text"]) for r in rows])
    raw = sharp_teacher.next_byte_outputs(docs)
    out = truth.next_byte_outputs(docs)
    expected = EPSILON(raw.logprobs.double().numpy())
    np.testing.assert_allclose(out.logprobs.double().numpy(), expected, rtol=1e-6, atol=1e-6)
    assert (torch.isneginf(out.logprobs).numpy() == np.isneginf(expected)).all()  # the same zeros, exactly
    assert torch.equal(out.pre, raw.pre) and torch.equal(out.post, raw.post)  # the network's states, unchanged
    assert torch.equal(truth.next_byte_logprobs(docs), out.logprobs)
    # the logits Parquet the metrics compare every model against: windows of the documents, each after the document
    # before it as context
    prompts = pa.table({
        "prompt_id": pa.array(range(4), pa.int32()),
        "context": [r["text"][:12] for r in rows],
        "window": [r["text"][12:] for r in rows],
    })
    extract_logits(truth, prompts, tmp_path / "truth.parquet", tmp_path / "hidden.parquet", batch_size=2,
                   min_context=8, hidden_positions=4, seed=0)
    stored = np.concatenate([b.logprobs for b in iter_logits(tmp_path / "truth.parquet")])
    np.testing.assert_allclose(stored, expected[:, 11:31].reshape(-1, 256), rtol=1e-5, atol=1e-5)
    assert (np.isneginf(stored) == np.isneginf(expected[:, 11:31].reshape(-1, 256))).all()
    # held-out evaluation (Table 3.1) from each document's start: minus the mean decoded log-probability of its bytes
    data = np.frombuffer(b"".join(r["text"] for r in rows), dtype=np.uint8)
    result = heldout_metrics(truth, data, windows=4, block=31, batch_size=4, seed=0, starts=np.arange(4) * 32)
    assert result["heldout_loss"] == pytest.approx(-sum(r["logprob"] for r in rows) / (4 * 31), abs=1e-5)


def test_the_truth_is_read_in_float32_under_the_gpu_paths_bf16(sharp_teacher, tmp_path):
    # extract_logits's bf16 autocast (CUDA's default, asked for here on CPU) does not reach the truth: where it cuts
    # is the same in its documents (the stepper) and in every reading of it
    truth, rows = _epsilon_documents(sharp_teacher, documents=2, seed=4)
    prompts = pa.table({"prompt_id": pa.array(range(2), pa.int32()), "context": [r["text"][:8] for r in rows],
                        "window": [r["text"][8:] for r in rows]})
    kwargs = dict(batch_size=2, min_context=4, hidden_positions=2, seed=0)
    logits = {}
    for name, lm, bf16 in (("truth", truth, True), ("plain", truth, False), ("teacher", sharp_teacher, True)):
        extract_logits(lm, prompts, tmp_path / f"{name}.parquet", tmp_path / f"{name}.h.parquet", bf16=bf16, **kwargs)
        logits[name] = np.concatenate([b.logprobs for b in iter_logits(tmp_path / f"{name}.parquet")])
    np.testing.assert_array_equal(logits["truth"], logits["plain"])
    raw = np.concatenate([sharp_teacher.next_byte_logprobs(torch.tensor([list(r["text"])]))[0, 7:31].numpy() for r in rows])
    assert np.abs(logits["teacher"] - raw).max() > 1e-4  # the teacher itself under bf16: another distribution
    stepper = stepper_for(truth)
    assert isinstance(stepper, DecodedStepper) and stepper.inner.bf16 is False


def test_the_truth_scores_a_byte_outside_its_support_as_infinitely_surprising(sharp_teacher):
    truth, rows = _epsilon_documents(sharp_teacher, documents=2, seed=5)
    text = rows[0]["text"]
    bits = continuation_bits(truth, [text[:1]], [text[1:]])[0]
    assert bits == pytest.approx(-rows[0]["logprob"] / math.log(2) / 31, abs=1e-5)  # the truth's own text: finite
    raw = sharp_teacher.next_byte_logprobs(torch.tensor([list(text[:5])]))[0, -1].double().numpy()
    outside = int(np.flatnonzero(np.isneginf(EPSILON(raw)))[0])  # a byte the truth never writes after text[:5]
    scored = continuation_bits(truth, [text[:5], text[:5]], [bytes([outside]) + text[6:], text[5:]])
    assert scored[0] == math.inf and math.isfinite(scored[1])  # the pair beside it in the batch: finite
    assert math.isfinite(continuation_bits(sharp_teacher, [text[:5]], [bytes([outside]) + text[6:]])[0])  # not the teacher
