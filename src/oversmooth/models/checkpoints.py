"""Model weights on disk: a torch object written atomically, and a trained model loaded for inference."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from oversmooth.core.io import atomic_path
from oversmooth.models.model import GPT, GPTConfig


def save_torch(obj: object, path: Path) -> None:
    with atomic_path(path) as tmp:
        torch.save(obj, tmp)


def load_model(path: str | os.PathLike, device: str | torch.device = "cpu") -> GPT:
    """A trained model from `best.pt` / `last.pt`, in eval mode."""
    payload = torch.load(path, map_location=device, weights_only=True)
    model = GPT(GPTConfig(**payload["model_config"]))
    model.load_state_dict(payload["model"])
    return model.to(device).eval()
