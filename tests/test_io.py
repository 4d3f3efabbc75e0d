import os

import pytest

from oversmooth.io import atomic_path, sha256_file, write_json


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
