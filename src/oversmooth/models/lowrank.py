"""A rank-r head on a frozen model's final states (Godey et al. 2024): logits = A · (B · h). Apart from `model`, so
that the trained models' code does not change when this head does."""

from __future__ import annotations

import torch
import torch.nn as nn


class LowRankHead(nn.Module):
    """logits = A · (B · h): rank at most r."""

    def __init__(self, n_embd: int, rank: int, vocab_size: int = 256):
        super().__init__()
        self.down = nn.Linear(n_embd, rank, bias=False)  # B
        self.up = nn.Linear(rank, vocab_size, bias=False)  # A
        for layer in (self.down, self.up):
            nn.init.normal_(layer.weight, std=0.02)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.up(self.down(h))
