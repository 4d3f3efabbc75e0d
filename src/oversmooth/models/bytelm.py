"""One interface for every model the pipeline compares: next-byte log-probabilities over 256 bytes.

`GPTByteLM` wraps our trained GPTs; `HFByteLM` wraps any causal byte-level model that
`transformers` loads from a local path (the thesis's EvaByte: 320 outputs, the 256 byte tokens a
contiguous slice starting at `byte_offset`, a BOS token prepended to every input).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import torch
import torch.nn.functional as F

from oversmooth.models.model import GPT, VOCAB_SIZE


class ByteLMOutput(NamedTuple):
    """Next-byte log-probabilities (B, T, 256) float32, and the representations that produced them:
    `pre` the final hidden state before the head (B, T, d), `post` the head's input after the
    bottleneck (B, T, k; the same as `pre` for a head without bottleneck)."""

    logprobs: torch.Tensor
    pre: torch.Tensor
    post: torch.Tensor


class ByteLM(Protocol):
    name: str
    block_size: int

    def next_byte_logprobs(self, x: torch.Tensor) -> torch.Tensor:
        """For bytes x (B, T), log p(x[:, t+1] | x[:, :t+1]) over all 256 bytes: shape (B, T, 256), float32."""
        ...

    def next_byte_outputs(self, x: torch.Tensor, outputs_from: Sequence[int] | None = None) -> ByteLMOutput:
        """`next_byte_logprobs` together with the hidden representations. Row i needs outputs only from position
        `outputs_from[i]` on: a model may leave earlier ones NaN (the byte-marginalised token LM does)."""
        ...


@dataclass
class GPTByteLM:
    name: str
    model: GPT

    @property
    def block_size(self) -> int:
        return self.model.config.block_size

    @torch.no_grad()
    def next_byte_logprobs(self, x: torch.Tensor) -> torch.Tensor:
        logits, _ = self.model(x.to(next(self.model.parameters()).device))
        return F.log_softmax(logits.float(), dim=-1)

    @torch.no_grad()
    def next_byte_outputs(self, x: torch.Tensor, outputs_from: Sequence[int] | None = None) -> ByteLMOutput:
        pre = self.model.features(x.to(next(self.model.parameters()).device))
        post = self.model.head.bottleneck(pre)  # a MoS head's K component inputs, concatenated
        return ByteLMOutput(F.log_softmax(self.model.head(pre).float(), dim=-1), pre, post)


@dataclass
class HFByteLM:
    name: str
    model: torch.nn.Module
    byte_offset: int
    bos_id: int | None
    block_size: int

    @torch.no_grad()
    def next_byte_logprobs(self, x: torch.Tensor) -> torch.Tensor:
        return self._run(x, hidden=False).logprobs

    @torch.no_grad()
    def next_byte_outputs(self, x: torch.Tensor, outputs_from: Sequence[int] | None = None) -> ByteLMOutput:
        return self._run(x, hidden=True)

    def _run(self, x: torch.Tensor, hidden: bool) -> ByteLMOutput:
        device = next(self.model.parameters()).device
        ids = x.to(device) + self.byte_offset
        if self.bos_id is not None:
            bos = torch.full((ids.size(0), 1), self.bos_id, dtype=ids.dtype, device=device)
            ids = torch.cat([bos, ids], dim=1)
        out = self.model(input_ids=ids, output_hidden_states=hidden)
        first = 0 if self.bos_id is None else 1  # the output after BOS predicts the first byte, which x does not ask for
        logits = out.logits.float()[:, first:, self.byte_offset : self.byte_offset + VOCAB_SIZE]
        pre = out.hidden_states[-1][:, first:] if hidden else logits[..., :0]
        return ByteLMOutput(F.log_softmax(logits, dim=-1), pre, pre)


def load_hf_byte_lm(
    name: str,
    path: str | os.PathLike,
    *,
    byte_offset: int = 0,
    bos_id: int | None = None,
    dtype: str = "float32",
    trust_remote_code: bool = False,
    block_size: int | None = None,
    device: str | torch.device = "cpu",
) -> HFByteLM:
    """Load a causal byte-level LM with `transformers` from a local folder (never from a hub)."""
    from transformers import AutoModelForCausalLM

    if not os.path.isdir(path):
        raise FileNotFoundError(f"ground truth {name!r}: no model folder at {path!r} (config `ground_truths[].path`)")
    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=getattr(torch, dtype), trust_remote_code=trust_remote_code, local_files_only=True
    )
    n_outputs = model.get_output_embeddings().weight.shape[0]
    if byte_offset < 0 or byte_offset + VOCAB_SIZE > n_outputs:
        raise ValueError(
            f"ground truth {name!r}: byte_offset {byte_offset} + 256 exceeds the model's {n_outputs} outputs"
        )
    limit = block_size or getattr(model.config, "max_position_embeddings", None) or 1024
    return HFByteLM(name, model.to(device).eval(), byte_offset, bos_id, int(limit) - (bos_id is not None))


def inference_device() -> torch.device:
    """CUDA when present, else CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
