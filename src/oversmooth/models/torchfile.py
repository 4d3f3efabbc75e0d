"""A trained model's tensors as NumPy arrays, read from its checkpoint without importing torch.

A file written by `torch.save` (its zip format, torch >= 1.6) is a pickle, `data.pkl`, whose tensors point at raw
storages, `data/<key>`, in the same archive. The CPU analysis jobs (TBAT, the metrics' timings) need one matrix of a
trained model; reading it this way spares each of them the second of importing torch. What our checkpoints hold is
read (dicts, tensors of the usual dtypes, numbers, strings: a subset of what `torch.load(..., weights_only=True)`
accepts); anything else is refused by name. `tests/test_torchfile.py` checks every array against `torch.load`.

Every torch file the pipeline reads (checkpoints, kept weights, resume and segment states, token heads) is first
checked against the CRC-32s its zip archive carries, here or in `load_torch`: `torch.load` itself accepts damaged
data, and a model would then be used silently.
"""

from __future__ import annotations

import collections
import io
import os
import pickle
import zipfile
from typing import TYPE_CHECKING, Any

import numpy as np

from oversmooth.core.io import atomic_path, check_zip_members
from oversmooth.core.recovery import restore_advice

if TYPE_CHECKING:
    import torch

STORAGE_DTYPES = {
    "FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16, "BFloat16Storage": np.uint16,
    "LongStorage": np.int64, "IntStorage": np.int32, "ShortStorage": np.int16, "CharStorage": np.int8,
    "ByteStorage": np.uint8, "BoolStorage": np.bool_,
}
OUTPUT_MATRIX = "head.out.weight"  # GPT.output_matrix(): W, (256 x k)


def save_torch(obj: object, path: str | os.PathLike) -> None:
    """`torch.save` atomically and byte-reproducibly: through a file object the archive's root folder is `archive`,
    not the temporary file's random name, so the same object gives the same bytes."""
    import torch

    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        torch.save(obj, handle)


def load_torch(
    path: str | os.PathLike, map_location: str | torch.device = "cpu", *, weights_only: bool = True,
    advice: str | None = None,
) -> Any:
    """What `torch.save` wrote to `path`, after checking the file's CRCs (a damaged file is named, with `advice` or
    the command that rebuilds it): every weight file the pipeline reads is read through here."""
    import torch  # only here: this module's readers run without torch

    check_zip_members(path, advice)
    return torch.load(path, map_location=map_location, weights_only=weights_only)


class CheckpointReadError(ValueError):
    """A checkpoint that this reader cannot read without torch (the message names the file and what it holds)."""


def read_output_matrix(path: str | os.PathLike) -> np.ndarray:
    """W of a trained model (`best.pt`), as `load_model(path).output_matrix()` gives it, in float64."""
    payload = read_checkpoint(path)
    weights = payload.get("model", {}) if isinstance(payload, dict) else {}
    if OUTPUT_MATRIX not in weights:
        raise CheckpointReadError(f"{path}: no '{OUTPUT_MATRIX}' among the model's weights; is it a trained GPT?")
    return weights[OUTPUT_MATRIX].astype(np.float64)


def read_checkpoint(path: str | os.PathLike) -> dict:
    """The object `torch.save` wrote to `path`, every tensor an ndarray (bfloat16 widened exactly to float32)."""
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile as error:  # the pipeline writes none but zip files: a truncated one, or another file
        raise CheckpointReadError(f"{path}: not a torch checkpoint in the zip format ({error}). "
                                  f"{restore_advice(path)}") from None
    with archive:
        check_zip_members(path)  # damaged data would be read without a word
        pickles = [name for name in archive.namelist() if name.endswith("/data.pkl")]
        if len(pickles) != 1:
            raise CheckpointReadError(f"{path}: expected one data.pkl in the archive, found {len(pickles)}")
        root = pickles[0][: -len("data.pkl")]
        if root + "byteorder" in archive.namelist() and archive.read(root + "byteorder") != b"little":
            raise CheckpointReadError(f"{path}: written on a big-endian machine")
        return _ArrayUnpickler(archive, root, path).load()


class _ArrayUnpickler(pickle.Unpickler):
    def __init__(self, archive: zipfile.ZipFile, root: str, path: str | os.PathLike):
        super().__init__(io.BytesIO(archive.read(root + "data.pkl")))
        self.archive, self.root, self.path = archive, root, path
        self.storages: dict[str, np.ndarray] = {}  # by key: the tensors that share one are read once

    def find_class(self, module: str, name: str):
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return self.rebuild_tensor
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if module == "torch" and name in STORAGE_DTYPES:
            return name  # a storage's type, resolved by persistent_load
        raise CheckpointReadError(f"{self.path}: holds {module}.{name}, which cannot be read without torch")

    def persistent_load(self, pid: tuple) -> np.ndarray:
        kind, storage_type, key, _location, numel = pid  # the location (a device) does not matter to NumPy
        if kind != "storage" or storage_type not in STORAGE_DTYPES:
            raise CheckpointReadError(f"{self.path}: unknown storage {pid[:2]}")
        if key not in self.storages:
            values = np.frombuffer(self.archive.read(f"{self.root}data/{key}"), dtype=STORAGE_DTYPES[storage_type])
            if storage_type == "BFloat16Storage":  # the top half of a float32's bits
                values = (values.astype(np.uint32) << 16).view(np.float32)
            if len(values) < numel:
                raise CheckpointReadError(f"{self.path}: storage {key} holds {len(values)} values, not {numel}")
            self.storages[key] = values[:numel]
        return self.storages[key]

    def rebuild_tensor(self, storage: np.ndarray, offset: int, size: tuple, stride: tuple, *_unused) -> np.ndarray:
        """A tensor's values: `size` elements of the storage from `offset`, `stride` elements apart, copied."""
        last = offset + sum((n - 1) * step for n, step in zip(size, stride))
        if 0 not in size and not 0 <= offset <= last < len(storage):
            raise CheckpointReadError(f"{self.path}: a tensor of size {tuple(size)} reaches past its storage")
        strides = [step * storage.itemsize for step in stride]
        return np.lib.stride_tricks.as_strided(storage[offset:], shape=size, strides=strides, writeable=False).copy()
