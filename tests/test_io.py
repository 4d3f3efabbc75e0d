import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from oversmooth.core.io import ParquetInput, UnreadableInputError, atomic_path, read_parquet, sha256_file, write_json


def test_atomic_path_moves_into_place_on_success(tmp_path):
    target = tmp_path / "sub" / "out.txt"
    with atomic_path(target) as tmp:
        tmp.write_text("done")
        assert not target.exists()
    assert target.read_text() == "done"
    assert os.listdir(target.parent) == ["out.txt"]


def test_atomic_path_gives_normal_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        with atomic_path(tmp_path / "out.txt") as tmp:
            tmp.write_text("x")
    finally:
        os.umask(old)
    assert (tmp_path / "out.txt").stat().st_mode & 0o777 == 0o644


def test_atomic_path_leaves_previous_version_on_failure(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["out.txt"]


def test_write_json_and_sha256(tmp_path):
    write_json(tmp_path / "a.json", {"x": 1})
    assert (tmp_path / "a.json").read_text() == '{\n  "x": 1\n}\n'
    (tmp_path / "b.bin").write_bytes(b"abc")
    assert sha256_file(tmp_path / "b.bin") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_a_truncated_parquet_file_is_named_when_opened_or_read(tmp_path):
    good = tmp_path / "logits.parquet"
    pq.write_table(pa.table({"x": list(range(10_000))}), good, row_group_size=1000)
    truncated = tmp_path / "truncated.parquet"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    for read in (read_parquet, ParquetInput):
        with pytest.raises(UnreadableInputError, match=r"truncated\.parquet: not a readable Parquet file"):
            read(truncated)
    # a footer that survives with a damaged page: the error comes at read time, still naming the file
    damaged = tmp_path / "damaged.parquet"
    data = bytearray(good.read_bytes())
    data[100:4000] = b"\xff" * 3900
    damaged.write_bytes(bytes(data))
    with pytest.raises(UnreadableInputError, match=r"damaged\.parquet"):
        list(ParquetInput(damaged).iter_batches())
    assert read_parquet(good).num_rows == 10_000


def test_a_temporary_left_by_a_killed_write_is_removed_by_the_next_write_of_that_file(tmp_path):
    """SIGKILL inside atomic_path runs no `finally`: its hidden temporary stayed beside the output for ever."""
    import signal
    import subprocess
    import sys

    target = tmp_path / "out.parquet"
    killed = subprocess.Popen([sys.executable, "-c", (
        "import os, signal, sys\n"
        "from oversmooth.core.io import atomic_path\n"
        f"with atomic_path({str(target)!r}) as tmp:\n"
        "    tmp.write_text('half')\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n")])
    assert killed.wait(timeout=120) == -signal.SIGKILL
    stale = [p.name for p in tmp_path.iterdir()]
    assert len(stale) == 1 and stale[0].startswith(".out.parquet.") and stale[0].endswith(".tmp")
    (tmp_path / ".other.parquet.x.tmp").write_text("another output's temporary")  # not this output's: kept
    with atomic_path(target) as tmp:
        tmp.write_text("done")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.parquet.x.tmp", "out.parquet"]
