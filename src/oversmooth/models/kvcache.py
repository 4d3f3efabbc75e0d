"""A key/value cache for sampling one position at a time (`model.KeyValueCache`, what `GPT.forward_cached` reads):
buffers of a whole block, allocated at the first step and written in place. Appending with `torch.cat` instead copies
every cached position at every step: O(T^2) copies over a continuation, 60 % of a teacher's sampling time at 256
bytes (benchmarks/teacher_speed.py)."""

from __future__ import annotations

import torch


class BlockKVCache:
    """Per layer, buffers (B, n_head, block_size, head_size) of keys and values; the first `length` positions are
    filled. `GPT.forward_cached` advances `length` once all layers have extended."""

    def __init__(self, block_size: int):
        self.block_size = block_size
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.length = 0

    def extend(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the new positions' keys and values of `layer` after the cached ones; return all of them."""
        end = self.length + k.size(2)
        if end > self.block_size:
            raise ValueError(f"{self.length} cached + {k.size(2)} new positions exceed the cache's block of {self.block_size}")
        if layer == len(self.keys):
            shape = (*k.shape[:2], self.block_size, k.shape[3])
            self.keys.append(k.new_empty(shape))
            self.values.append(v.new_empty(shape))
        self.keys[layer][:, :, self.length : end] = k
        self.values[layer][:, :, self.length : end] = v
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]
