"""A trained model loaded for inference; the torch files it is read from are written and verified by `torchfile`."""

from __future__ import annotations

import os

import torch

from oversmooth.models.model import GPT, GPTConfig
from oversmooth.models.torchfile import load_torch, save_torch

__all__ = ["load_model", "load_torch", "save_torch"]


def load_model(path: str | os.PathLike, device: str | torch.device = "cpu") -> GPT:
    """A trained model from `best.pt` / `last.pt`, in eval mode."""
    payload = load_torch(path, device)
    model = GPT(GPTConfig(**payload["model_config"]))
    model.load_state_dict(payload["model"])
    return model.to(device).eval()
