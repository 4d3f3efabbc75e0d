"""A checkpoint's tensors read without torch equal what torch.load gives."""

import re
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import RUN_OPTIONS

from oversmooth.models.checkpoints import load_model, save_torch
from oversmooth.models.model import GPT, GPTConfig
from oversmooth.core.io import UnreadableInputError
from oversmooth.models.torchfile import CheckpointReadError, load_torch, read_checkpoint, read_output_matrix


def test_the_output_matrix_is_the_loaded_model_s(tmp_path):
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=16, n_layer=1, n_head=2, n_embd=32, bottleneck=4)).eval()
    path = tmp_path / "best.pt"
    save_torch({"name": "bn-4", "model_config": model.config.to_dict(), "model": model.state_dict()}, path)
    W = read_output_matrix(path)
    assert W.dtype == np.float64 and W.shape == (256, 4)
    assert np.array_equal(W, load_model(path).output_matrix().detach().double().numpy())
    weights = read_checkpoint(path)["model"]
    for name, tensor in load_model(path).state_dict().items():  # every weight, not only W
        assert np.array_equal(weights[name], tensor.numpy()), name


def test_dtypes_views_offsets_and_shared_storages_come_back_as_torch_loads_them(tmp_path):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    payload = {
        "transposed": base.t(), "sliced": base[1:, 2:5], "base": base,  # views of one storage: strides, offsets
        "bf16": torch.tensor([1.5, -2.25, 3e-3, 1e30], dtype=torch.bfloat16),
        "half": torch.tensor([0.1, 2.0], dtype=torch.float16), "long": torch.tensor([2**40, -3]),
        "mask": torch.tensor([True, False]), "scalar": torch.tensor(7.5, dtype=torch.float64),
        "meta": {"name": "bn-4", "step": 3, "loss": 2.5},
    }
    save_torch(payload, tmp_path / "x.pt")
    ours, theirs = read_checkpoint(tmp_path / "x.pt"), torch.load(tmp_path / "x.pt", weights_only=True)
    for name in ("transposed", "sliced", "base", "half", "long", "mask", "scalar"):
        assert np.array_equal(ours[name], theirs[name].numpy()) and ours[name].dtype == theirs[name].numpy().dtype, name
    assert np.array_equal(ours["bf16"], theirs["bf16"].float().numpy())  # widened exactly
    assert ours["meta"] == payload["meta"]


def test_what_cannot_be_read_without_torch_is_named(tmp_path):
    save_torch({"device": torch.device("cpu")}, tmp_path / "device.pt")
    with pytest.raises(CheckpointReadError, match=r"device.pt: holds torch.device"):
        read_checkpoint(tmp_path / "device.pt")
    (tmp_path / "plain.pt").write_bytes(b"not a zip")
    with pytest.raises(CheckpointReadError, match="plain.pt: not a torch checkpoint"):
        read_checkpoint(tmp_path / "plain.pt")
    save_torch({"model": {"wte.weight": torch.zeros(2)}}, tmp_path / "headless.pt")
    with pytest.raises(CheckpointReadError, match="no 'head.out.weight'"):
        read_output_matrix(tmp_path / "headless.pt")


def test_a_truncated_storage_is_named_not_read_past(tmp_path):
    save_torch({"w": torch.arange(64, dtype=torch.float32)}, tmp_path / "whole.pt")
    with zipfile.ZipFile(tmp_path / "whole.pt") as whole, zipfile.ZipFile(tmp_path / "cut.pt", "w") as cut:
        for item in whole.infolist():
            data = whole.read(item)
            cut.writestr(item, data[: len(data) // 2] if item.filename.endswith("/data/0") else data)
    assert np.array_equal(read_checkpoint(tmp_path / "whole.pt")["w"], np.arange(64, dtype=np.float32))
    with pytest.raises(CheckpointReadError, match="cut.pt: storage 0 holds 32 values, not 64"):
        read_checkpoint(tmp_path / "cut.pt")


def saved_model(path):
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=16, n_layer=1, n_head=2, n_embd=32, bottleneck=4)).eval()
    save_torch({"name": "bn-4", "model_config": model.config.to_dict(), "model": model.state_dict()}, path)
    return path


def damage(path, offset: int, n: int = 64) -> None:
    """Overwrite `n` bytes at `offset` with random ones (what a bad disk or an interrupted copy leaves)."""
    data = bytearray(path.read_bytes())
    data[offset: offset + n] = np.random.default_rng(0).integers(0, 256, n, dtype=np.uint8).tobytes()
    path.write_bytes(bytes(data))


def test_a_checkpoint_damaged_in_its_data_is_named_by_every_reader_with_its_rebuild(in_a_run):
    path = Path("results/models/bn-4/best.pt")
    path.parent.mkdir(parents=True)
    saved_model(path)
    damage(path, path.stat().st_size // 2)
    torch.load(path, weights_only=True)  # torch itself reads it without a word: the reason for the check
    # its training alone, in the run's folder: typed from the repository, `snakemake all --forcerun <file>` planned
    # 53 demo jobs that retrained the repository's own model
    command = f"snakemake {path} --forcerun {path} {RUN_OPTIONS}"
    for read in (load_model, read_output_matrix, read_checkpoint, load_torch):
        with pytest.raises(UnreadableInputError, match=r"best.pt: damaged: its member .* fails its CRC-32 check"
                                                       rf".*{re.escape(f'`{command}`, typed in {in_a_run}')}") as error:
            read(path)
        assert str(path) in str(error.value), read.__name__
    path.write_bytes(path.read_bytes()[:1000])  # truncated (an interrupted copy): no zip any more
    with pytest.raises(CheckpointReadError, match=rf"best.pt: not a torch checkpoint in the zip format .*"
                                                  rf"{re.escape(f'`{command}`, typed in {in_a_run}')}"):
        read_output_matrix(path)


def test_a_damaged_source_file_is_to_be_replaced_not_rebuilt(in_a_run):
    path = saved_model(in_a_run / "elsewhere.pt")  # outside the run's results/: no job writes it
    damage(path, path.stat().st_size // 2)
    with pytest.raises(UnreadableInputError, match=r"damaged: .*replace it \(a source file") as error:
        load_torch(path)
    assert "snakemake" not in str(error.value)


def test_a_checkpoint_damaged_in_a_member_s_header_is_named(tmp_path):
    path = saved_model(tmp_path / "best.pt")
    with zipfile.ZipFile(path) as archive:
        member = next(i for i in archive.infolist() if i.filename.endswith("/data/0"))
    damage(path, member.header_offset, 8)  # the local header's signature: torch's error would name no file
    with pytest.raises(UnreadableInputError, match=r"best.pt: damaged: its member .*data/0 fails"):
        load_model(path)
    damage(path, path.stat().st_size - 30, 30)  # the end of the central directory: not a zip any more
    with pytest.raises(UnreadableInputError, match=r"best.pt: not a readable torch file"):
        load_model(path)



def test_the_same_object_is_saved_as_the_same_bytes(tmp_path):
    save_torch({"w": torch.arange(8.0), "name": "bn-4"}, tmp_path / "a.pt")
    save_torch({"w": torch.arange(8.0), "name": "bn-4"}, tmp_path / "b.pt")  # another temporary, another name
    assert (tmp_path / "a.pt").read_bytes() == (tmp_path / "b.pt").read_bytes()
