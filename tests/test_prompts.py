import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from oversmooth.data.prompts import (
    DEFAULT_SENTENCE_MARKS,
    PROMPTS_SCHEMA,
    PromptError,
    PromptSpec,
    select_prompts,
    sentence_start_pattern,
    sentence_starts,
    write_prompts,
)

SPEC = PromptSpec(n_prompts=12, window=40, context_bytes=30, prompt_bytes=10, continuation_bytes=50)


def _eval_pool(path, texts, group_rows=3):
    table = pa.table(
        {"doc_id": [f"d:{i}" for i in range(len(texts))], "source": ["d"] * len(texts), "text": [t.encode() for t in texts]}
    )
    pq.write_table(table, path, row_group_size=group_rows)  # several row groups, like a large pool
    return path


@pytest.fixture
def pool(tmp_path):
    texts = [" ".join(f"Doc {d} line {i} ends here! Then? More.\nNext" for i in range(30)) for d in range(8)]
    return _eval_pool(tmp_path / "eval_docs.parquet", texts)


def test_sentence_starts_hand_made():
    text = b"One. Two!  Three? four\nFive.\n\nSix"
    starts = sentence_starts(text, sentence_start_pattern(DEFAULT_SENTENCE_MARKS))
    # after ". " -> "Two"; "!  " is followed by a space (no start); "? " -> "four"; "\n" -> "Five"; "\n\n" -> "Six"
    assert [text[s : s + 3] for s in starts] == [b"Two", b"fou", b"Fiv", b"Six"]


def test_every_prompt_starts_after_a_sentence_end(pool):
    table = select_prompts(pool, SPEC, seed=1)
    assert table.schema == PROMPTS_SCHEMA
    texts = dict(zip(pq.read_table(pool).column("doc_id").to_pylist(), pq.read_table(pool).column("text").to_pylist()))
    marks = [m.encode() for m in DEFAULT_SENTENCE_MARKS]
    for row in table.to_pylist():
        text, start = texts[row["doc_id"]], row["offset"]
        assert any(text[:start].endswith(m) for m in marks), row
        assert not row["window"][:1].isspace()
        assert row["window"] == text[start : start + SPEC.window]
        assert row["context"] == text[max(0, start - SPEC.context_bytes) : start]
        assert row["sample_prefix"] == text[start : start + SPEC.prompt_bytes]
        assert row["human_continuation"] == text[start + SPEC.prompt_bytes : start + SPEC.prompt_bytes + SPEC.continuation_bytes]
        assert len(row["human_continuation"]) == SPEC.continuation_bytes


def test_prompts_do_not_overlap_and_are_seeded(pool):
    table = select_prompts(pool, SPEC, seed=1)
    rows = table.to_pylist()
    assert [r["prompt_id"] for r in rows] == list(range(SPEC.n_prompts))
    for a in rows:
        for b in rows:
            if a is not b and a["doc_id"] == b["doc_id"]:
                assert abs(a["offset"] - b["offset"]) >= SPEC.span
    assert select_prompts(pool, SPEC, seed=1).equals(table)
    assert not select_prompts(pool, SPEC, seed=2).equals(table)


def test_too_few_prompts_is_an_error_with_the_numbers(tmp_path):
    small = _eval_pool(tmp_path / "small.parquet", ["Intro. " + "x" * 100, "Short. text."])
    with pytest.raises(PromptError, match=r"2 documents, .* 0 more documents skipped for bytes in eval.unspellable_bytes\) "
                       r"supplies only 1 non-overlapping prompts, but eval.n_prompts asks for 12"):
        select_prompts(small, SPEC, seed=0)


def test_write_prompts_is_atomic_and_readable(pool, tmp_path):
    out = tmp_path / "prompts.parquet"
    write_prompts(pool, out, SPEC, seed=4)
    assert pq.read_table(out).num_rows == SPEC.n_prompts
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval_docs.parquet", "prompts.parquet"]


def test_token_prompts_are_whole_tokens_of_spans_after_a_sentence_end(pool, tiny_token_lm):
    from oversmooth.data.prompts import TOKEN_PROMPTS_SCHEMA, select_token_prompts
    from oversmooth.models.causallm import load_tokenizer

    tokenizer = load_tokenizer(tiny_token_lm)
    table = select_token_prompts(pool, tokenizer, n_prompts=5, prefix_tokens=4, continuation_tokens=6,
                                 bytes_per_token=8, seed=3)
    assert table.schema == TOKEN_PROMPTS_SCHEMA and table.num_rows == 5
    texts = {i: t.as_py() for i, t in enumerate(pq.read_table(pool).column("text"))}
    for row in table.to_pylist():
        assert len(row["prefix_ids"]) == 4 and len(row["continuation_ids"]) == 6
        text = texts[int(row["doc_id"].removeprefix("d:"))]
        assert text[row["offset"] - 1 : row["offset"]] in (b" ", b"\n")  # right after a sentence mark
        whole = tokenizer(text[row["offset"] : row["offset"] + 80].decode(), add_special_tokens=False)["input_ids"]
        assert row["prefix_ids"] + row["continuation_ids"] == whole[:10]  # the span's own tokenisation, cut
        assert row["sample_prefix"] == tokenizer.decode(row["prefix_ids"]).encode()
        assert row["human_continuation"] == tokenizer.decode(row["continuation_ids"]).encode()
        assert text[row["offset"] :].startswith(row["sample_prefix"] + row["human_continuation"])
    again = select_token_prompts(pool, tokenizer, n_prompts=5, prefix_tokens=4, continuation_tokens=6,
                                 bytes_per_token=8, seed=3)
    assert again.equals(table)
    with pytest.raises(PromptError, match="tokens.sampling.bytes_per_token"):
        select_token_prompts(pool, tokenizer, n_prompts=5, prefix_tokens=4, continuation_tokens=6,
                             bytes_per_token=0.5, seed=3)


SMOLLM2_UNSPELLABLE = [0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xF1, 0xF2]  # some of the 21 bytes SmolLM2 cannot spell


def _pool_with_unspellable_bytes(tmp_path):
    """Eight documents; three of them hold a byte SmolLM2 cannot spell (a control character, a rare-plane UTF-8
    lead byte), somewhere a seeded prompt or window might land."""
    texts = [b" ".join(f"Doc {d} line {i} ends here! Then? More.\nNext".encode() for i in range(30)) for d in range(8)]
    texts[1] = texts[1][:300] + b"\x04" + texts[1][300:]
    texts[4] = texts[4][:40] + "\U00040000".encode() + texts[4][40:]  # 0xF1 0x80 0x80 0x80
    texts[6] = texts[6] + b"\x1d"
    table = pa.table({"doc_id": [f"d:{i}" for i in range(8)], "source": ["d"] * 8, "text": texts})
    pq.write_table(table, tmp_path / "eval_docs.parquet", row_group_size=3)
    return tmp_path / "eval_docs.parquet", texts


def test_prompts_skip_documents_a_token_level_ground_truth_cannot_spell(tmp_path, caplog):
    pool, texts = _pool_with_unspellable_bytes(tmp_path)
    spec = PromptSpec(n_prompts=20, window=40, context_bytes=30, prompt_bytes=10, continuation_bytes=50)
    with caplog.at_level("INFO", logger="oversmooth"):
        table = select_prompts(pool, spec, seed=1, unspellable=SMOLLM2_UNSPELLABLE)
    assert not {"d:1", "d:4", "d:6"} & set(table.column("doc_id").to_pylist())
    for row in table.to_pylist():
        assert not set(row["context"] + row["window"] + row["human_continuation"]) & set(SMOLLM2_UNSPELLABLE)
    assert "skipped 3 documents" in caplog.text and f"({sum(len(texts[i]) for i in (1, 4, 6))} bytes)" in caplog.text
    # without a token-level ground truth nothing is skipped, and some prompt lands in those documents
    assert {"d:1", "d:4", "d:6"} & set(select_prompts(pool, spec, seed=1).column("doc_id").to_pylist())


def test_held_out_windows_skip_documents_a_token_level_ground_truth_cannot_spell(tmp_path):
    from oversmooth.models.evaluate import heldout_bytes

    pool, texts = _pool_with_unspellable_bytes(tmp_path)
    data = heldout_bytes(pool, 10**6, unspellable=SMOLLM2_UNSPELLABLE).tobytes()
    assert data == b"".join(texts[i] + b"\n\n" for i in (0, 2, 3, 5, 7))
    assert not set(data) & set(SMOLLM2_UNSPELLABLE)
    assert len(heldout_bytes(pool, 10**6)) == sum(len(t) + 2 for t in texts)


def test_bytes_no_token_starts_with_are_unspellable(tiny_token_lm):
    from oversmooth.models.tokenmarginal import TokenVocabulary, bytes_starting_no_token, unspellable_bytes

    vocab = TokenVocabulary([bytes([b]) for b in range(256) if b not in (4, 0xF1)] + [b"\x04a", None])
    assert bytes_starting_no_token(vocab) == [0xF1]  # 0x04 starts the token "\x04a"
    assert unspellable_bytes("gt-tiny", tiny_token_lm) == []  # a byte-level BPE with all 256 base bytes


def test_a_token_level_ground_truth_that_cannot_spell_a_byte_the_prompts_may_hold_names_the_setting():
    from oversmooth.models.tokenmarginal import TokenModelError, TokenVocabulary, check_spelled_text

    vocab = TokenVocabulary([bytes([b]) for b in range(256) if b not in (4, 7)])
    check_spelled_text("gt-x", vocab, [4, 7, 9])
    with pytest.raises(TokenModelError, match=r"'gt-x' cannot spell bytes \[7\].*add them to config `eval.unspellable_bytes`"):
        check_spelled_text("gt-x", vocab, [4])
