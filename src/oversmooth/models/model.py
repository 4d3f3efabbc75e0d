"""A byte-level GPT-2-style decoder with the thesis's softmax bottleneck before the head (Figure 2.1).

nanoGPT anatomy: learned positional embeddings, pre-LayerNorm blocks, causal
`scaled_dot_product_attention`, GELU MLP, dropout. The head is either the bottleneck
`Linear(n_embd, k) -> LayerNorm(k) -> Linear(k, 256, bias=False)` (so logits lie in a k-dimensional
space and log-probabilities have rank at most k + 1), or, with `bottleneck: null`, a plain
`Linear(n_embd, 256, bias=False)` (the ground-truth models).

`GPT.forward_cached` runs only new positions against a `KeyValueCache` of the keys and values of the positions
before them (the sampler's: `kvcache.BlockKVCache`): sampling costs one small forward pass per new byte.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Protocol

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from oversmooth.data.bytenames import VOCAB_SIZE


def bf16_autocast(device: torch.device, enabled: bool | None = None) -> torch.autocast:
    """bf16 autocast on `device`: on CUDA by default, on CPU when asked (`enabled=True`: the tests run the GPU
    path's mixed precision on CPU). Losses and log-softmaxes are taken in float32 either way."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda" if enabled is None else enabled)


@dataclass(frozen=True)
class GPTConfig:
    """Shape of a model. `bottleneck` is k, the head's input dimension; None for a plain head."""

    block_size: int = 256
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 256
    dropout: float = 0.0
    bias: bool = True
    bottleneck: int | None = None
    vocab_size: int = VOCAB_SIZE
    mos_components: int = 1  # > 1: a Mixture-of-Softmaxes head of that many k-dimensional components

    def __post_init__(self):
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})")
        if self.bottleneck is not None and self.bottleneck < 1:
            raise ValueError(f"bottleneck must be a positive dimension, got {self.bottleneck}")
        if self.mos_components < 1:
            raise ValueError(f"mos_components must be at least 1, got {self.mos_components}")
        if self.mos_components > 1 and self.bottleneck is None:
            raise ValueError("a Mixture-of-Softmaxes head needs a bottleneck k for its components")

    def to_dict(self) -> dict:
        return asdict(self)


class KeyValueCache(Protocol):
    """What `GPT.forward_cached` needs of a key/value cache (`kvcache.BlockKVCache` is the sampler's): the number of
    positions it holds, and per layer the new positions' keys and values appended to them."""

    length: int

    def extend(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the new positions' keys and values (B, n_head, T, head_size) of `layer`; return all of them."""
        ...


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.n_head = config.n_head
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = config.dropout
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, cache: KeyValueCache | None = None, layer: int = 0) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        past = 0 if cache is None else cache.length
        if cache is not None:
            k, v = cache.extend(layer, k, v)
        mask = None
        if past and T > 1:  # new positions see every cached one and the new ones up to themselves
            mask = torch.ones(T, past + T, dtype=torch.bool, device=x.device).tril(diagonal=past)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=past == 0 and T > 1, dropout_p=self.dropout if self.training else 0.0
        )
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor, cache: KeyValueCache | None = None, layer: int = 0) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), cache, layer)
        return x + self.mlp(self.ln_2(x))


class BottleneckHead(nn.Module):
    """`Linear(n_embd, k) -> LayerNorm(k) -> Linear(k, vocab, bias=False)`: the softmax bottleneck."""

    def __init__(self, n_embd: int, k: int, vocab_size: int):
        super().__init__()
        self.down = nn.Linear(n_embd, k)
        self.norm = nn.LayerNorm(k)
        self.out = nn.Linear(k, vocab_size, bias=False)

    def bottleneck(self, h: torch.Tensor) -> torch.Tensor:
        """The k-dimensional input of the output matrix (the post-bottleneck representation)."""
        return self.norm(self.down(h))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.out(self.bottleneck(h))


class MixtureOfSoftmaxesHead(nn.Module):
    """Yang et al. (2017)'s Mixture of Softmaxes with k-dimensional components: K projections to k dimensions
    (each LayerNorm-ed like the bottleneck head), one shared output matrix W (vocab x k), and a gating softmax;
    log p = logsumexp_j(log pi_j + log_softmax(W c_j)). Returns normalised log-probabilities, whose rank is not
    bounded by k + 1."""

    def __init__(self, n_embd: int, k: int, components: int, vocab_size: int):
        super().__init__()
        self.k, self.components = k, components
        self.down = nn.Linear(n_embd, components * k)
        self.norm = nn.LayerNorm(k)
        self.gate = nn.Linear(n_embd, components)
        self.out = nn.Linear(k, vocab_size, bias=False)

    def bottleneck(self, h: torch.Tensor) -> torch.Tensor:
        """The K component inputs of the output matrix, concatenated (..., K * k)."""
        c = self.norm(self.down(h).unflatten(-1, (self.components, self.k)))
        return c.flatten(-2)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        c = self.norm(self.down(h).unflatten(-1, (self.components, self.k)))  # (..., K, k)
        logits, gate = self.out(c), self.gate(h)
        dtype = torch.promote_types(logits.dtype, torch.float32)  # at least float32 under bf16 autocast
        log_components = F.log_softmax(logits.to(dtype), dim=-1)  # (..., K, vocab)
        log_gate = F.log_softmax(gate.to(dtype), dim=-1).unsqueeze(-1)  # (..., K, 1)
        return torch.logsumexp(log_gate + log_components, dim=-2)


class PlainHead(nn.Module):
    """`Linear(n_embd, vocab, bias=False)`: no bottleneck (full rank when n_embd >= vocab)."""

    def __init__(self, n_embd: int, vocab_size: int):
        super().__init__()
        self.out = nn.Linear(n_embd, vocab_size, bias=False)

    def bottleneck(self, h: torch.Tensor) -> torch.Tensor:
        return h

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.out(h)


class GPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd, bias=config.bias)
        if config.bottleneck is None:
            self.head: BottleneckHead | PlainHead | MixtureOfSoftmaxesHead = PlainHead(config.n_embd, config.vocab_size)
        elif config.mos_components > 1:
            self.head = MixtureOfSoftmaxesHead(config.n_embd, config.bottleneck, config.mos_components, config.vocab_size)
        else:
            self.head = BottleneckHead(config.n_embd, config.bottleneck, config.vocab_size)
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2's scaled init of residual projections
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def _embed(self, idx: torch.Tensor) -> torch.Tensor:
        """Token plus position embeddings of a (B, T) batch that fits the block."""
        T = idx.shape[1]
        if T > self.config.block_size:
            raise ValueError(f"sequence of {T} bytes exceeds block_size {self.config.block_size}")
        return self.drop(self.wte(idx) + self.wpe(torch.arange(T, device=idx.device)))

    def features(self, idx: torch.Tensor) -> torch.Tensor:
        """The final hidden states (after `ln_f`): the pre-bottleneck representation, shape (B, T, n_embd)."""
        x = self._embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x)

    def layer_states(self, idx: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
        """Every representation along the way, each (B, T, dim): the embeddings, each block's output, the final
        LayerNorm's output (pre-bottleneck) and the output matrix's input (post-bottleneck)."""
        x = self._embed(idx)
        states = [("embeddings", x)]
        for i, block in enumerate(self.blocks):
            x = block(x)
            states.append((f"block_{i + 1}", x))
        pre = self.ln_f(x)
        return [*states, ("pre_bottleneck", pre), ("post_bottleneck", self.head.bottleneck(pre))]

    def forward_cached(self, idx: torch.Tensor, cache: KeyValueCache) -> torch.Tensor:
        """Logits (B, T, 256) of T new positions that follow the `cache.length` positions in `cache`."""
        B, T = idx.shape
        if cache.length + T > self.config.block_size:
            raise ValueError(f"{cache.length} cached + {T} new bytes exceed block_size {self.config.block_size}")
        pos = torch.arange(cache.length, cache.length + T, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for layer, block in enumerate(self.blocks):
            x = block(x, cache, layer)
        cache.length += T
        return self.head(self.ln_f(x))

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Logits (B, T, 256) for every position and, given targets, the mean cross-entropy."""
        logits = self.head(self.features(idx))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss

    def output_matrix(self) -> torch.Tensor:
        """W, the (256 x k) matrix that maps the head's input to logits."""
        return self.head.out.weight


# ----------------------------------------------------------------------------------------------
# Batches


def sample_windows(data: np.ndarray, rng: np.random.Generator, n: int, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`n` random windows of `block_size + 1` bytes, as (inputs, next-byte targets) int64 tensors."""
    if len(data) <= block_size + 1:
        raise ValueError(f"a shard of {len(data)} bytes is too short for block_size {block_size}")
    return windows_at(data, rng.integers(0, len(data) - block_size - 1, size=n), block_size)


def windows_at(data: np.ndarray, starts: np.ndarray, block_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The windows of `block_size + 1` bytes of `data` at `starts`, as (inputs, next-byte targets) int64 tensors."""
    windows = torch.from_numpy(np.stack([np.asarray(data[s : s + block_size + 1], dtype=np.int64) for s in starts]))
    return windows[:, :-1], windows[:, 1:]
