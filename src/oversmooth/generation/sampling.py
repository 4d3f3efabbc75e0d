"""Sampling continuations with the decoding methods (thesis ch. 5, §6.2): the steppers and the draw.

A stepper gives a model's next-symbol log-probabilities with a key/value cache: one new byte costs one forward pass
over that byte only. A byte is drawn from the decoded distribution by inverting its CDF at a uniform number from the
row's own generator (`uniforms_for`). The sample jobs' side (prompts in, a Parquet of samples out, the seeds) is
`generation.samples`; the teacher's documents (`generation.teacher`) are drawn with these steppers too.

Context: while prefix + continuation fit in the model's block, every byte sees everything before it
(the thesis: 100 + 500 <= 1024). When the cache is full, it is rebuilt from the last `block // 2`
bytes, so every byte sees at least half a block (`generate_uncached` follows the same rule without a
cache: the test oracle and the speed baseline).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from oversmooth.analysis.decoding import Decoding
from oversmooth.generation.decoded import DecodedByteLM, DecodedStepper
from oversmooth.models.bytelm import ByteLM, GPTByteLM, HFByteLM
from oversmooth.models.kvcache import BlockKVCache
from oversmooth.models.model import VOCAB_SIZE, bf16_autocast

def draw(logprobs: torch.Tensor, decoding: Decoding, uniforms: torch.Tensor) -> torch.Tensor:
    """One byte (token) per row from the decoded distribution, by inverting its CDF at `uniforms` (B,) in [0, 1); a
    method that draws by itself (BAT sampling, `oversmooth.analysis.bat.sampler.BATDecoding`, bound to the head by
    the sampling job: this module does not import the solver, which the teacher's corpus never runs) decides the
    tokens it draws alone; a stateful one (mirostat) is told the drawn tokens (`observe`)."""
    if hasattr(decoding, "draw"):
        rows = logprobs.double().cpu().numpy()
        return torch.from_numpy(decoding.draw(rows, uniforms.double().numpy())).to(logprobs.device)
    rows = logprobs.double().cpu().numpy()
    decoded = decoding(rows)  # NumPy, on the host: the rows come back where they were
    probs = torch.from_numpy(decoded).to(logprobs.device).exp()
    cdf = probs.cumsum(-1)
    x = (uniforms.double() * cdf[:, -1]).unsqueeze(-1)
    drawn = torch.searchsorted(cdf, x, right=True).squeeze(-1).clamp_max(logprobs.size(-1) - 1)
    if hasattr(decoding, "observe"):  # a stateful method (mirostat) learns from what it drew
        decoding.observe(rows, drawn.cpu().numpy())
    return drawn


def restart(decoding: Decoding, rows: int) -> None:
    """A new generation of `rows` rows: a stateful method (`mirostat.Mirostat`) starts its state afresh."""
    if hasattr(decoding, "restart"):
        decoding.restart(rows)


def growing_cache_attention():
    """The attention backends for a step over a cache that grows by a position each step: PyTorch's but cuDNN's,
    which on CUDA sets itself up anew for each key length it has not seen (an H200 sampled 100 prompts' first 200
    bytes in 10.4 s with it, 1.3 s without; benchmarks/inference_speed.py). A CPU has no cuDNN attention: nothing
    changes there."""
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


class Stepper(Protocol):
    block_size: int

    def start(self, window: torch.Tensor) -> torch.Tensor:
        """Forget the cache, read `window` (B, T); log-probabilities (B, 256) of the next byte."""
        ...

    def step(self, byte: torch.Tensor) -> torch.Tensor:
        """Append one byte per row (B,); log-probabilities (B, 256) of the next byte."""
        ...

    def cached(self) -> int:
        """Bytes in the cache."""
        ...


class GPTStepper:
    """One of our GPTs with its key/value cache; `bf16` as in `model.bf16_autocast` (default: on CUDA only)."""

    def __init__(self, lm: GPTByteLM, bf16: bool | None = None):
        self.model, self.block_size, self.bf16 = lm.model, lm.block_size, bf16
        self.device = next(self.model.parameters()).device
        self.cache = BlockKVCache(self.block_size)

    def start(self, window: torch.Tensor) -> torch.Tensor:
        self.cache = BlockKVCache(self.block_size)
        return self._run(window)

    def step(self, byte: torch.Tensor) -> torch.Tensor:
        return self._run(byte[:, None])

    def cached(self) -> int:
        return self.cache.length

    @torch.no_grad()
    def _run(self, idx: torch.Tensor) -> torch.Tensor:
        with bf16_autocast(self.device, self.bf16), growing_cache_attention():
            logits = self.model.forward_cached(idx.to(self.device), self.cache)[:, -1]
        return F.log_softmax(logits.float(), dim=-1).cpu()


class HFStepper:
    """A `transformers` byte model with its own key/value cache (`past_key_values`)."""

    def __init__(self, lm: HFByteLM):
        self.lm, self.block_size = lm, lm.block_size
        self.device = next(lm.model.parameters()).device
        self.past, self.length = None, 0

    def start(self, window: torch.Tensor) -> torch.Tensor:
        ids = window.to(self.device) + self.lm.byte_offset
        if self.lm.bos_id is not None:
            ids = torch.cat([torch.full_like(ids[:, :1], self.lm.bos_id), ids], dim=1)
        self.past, self.length = None, window.size(1)
        return self._run(ids)

    def step(self, byte: torch.Tensor) -> torch.Tensor:
        self.length += 1
        return self._run(byte[:, None].to(self.device) + self.lm.byte_offset)

    def cached(self) -> int:
        return self.length

    @torch.no_grad()
    def _run(self, ids: torch.Tensor) -> torch.Tensor:
        with growing_cache_attention():
            out = self.lm.model(input_ids=ids, past_key_values=self.past, use_cache=True)
        self.past = out.past_key_values
        logits = out.logits[:, -1, self.lm.byte_offset : self.lm.byte_offset + VOCAB_SIZE]
        return F.log_softmax(logits.float(), dim=-1).cpu()


class TokenHeadStepper:
    """A frozen `transformers` causal LM whose next-token distribution comes from `head` (a rank-k head of the token
    track, or the model's own output layer) applied to the states its own head would read, with the model's key/value
    cache (`past_key_values`): the token track's sampler."""

    def __init__(self, model, head: torch.nn.Module, block_size: int):
        self.model, self.head, self.block_size = model, head, block_size
        self.device = next(model.parameters()).device
        self.past, self.length = None, 0

    def start(self, window: torch.Tensor) -> torch.Tensor:
        self.past, self.length = None, window.size(1)
        return self._run(window)

    def step(self, token: torch.Tensor) -> torch.Tensor:
        self.length += 1
        return self._run(token[:, None])

    def cached(self) -> int:
        return self.length

    @torch.no_grad()
    def _run(self, ids: torch.Tensor) -> torch.Tensor:
        with growing_cache_attention():
            out = self.model.base_model(input_ids=ids.to(self.device), past_key_values=self.past, use_cache=True)
        self.past = out.past_key_values
        return F.log_softmax(self.head(out.last_hidden_state[:, -1]).float(), dim=-1).cpu()


class UncachedStepper:
    """A stepper made to forget its cache: every step re-reads the whole window from the start (the oracle of the
    cached path, and the baseline of its speed)."""

    def __init__(self, stepper: Stepper):
        self.inner, self.block_size, self.window = stepper, stepper.block_size, None

    def start(self, window: torch.Tensor) -> torch.Tensor:
        self.window = window
        return self.inner.start(window)

    def step(self, token: torch.Tensor) -> torch.Tensor:
        self.window = torch.cat([self.window, token[:, None]], dim=1)
        return self.inner.start(self.window)

    def cached(self) -> int:
        return self.window.size(1)


def stepper_for(lm: ByteLM) -> Stepper:
    """The cached stepper of a byte model; for a decoded truth (`decoded.DecodedByteLM`) its teacher's
    stepper with the truth's decoding applied to every row (`DecodedStepper`), a GPT's without bf16 (the truth is read
    in float32 everywhere)."""
    from oversmooth.models.tokenmarginal import MarginalStepper, TokenMarginalByteLM

    if isinstance(lm, DecodedByteLM):
        inner = GPTStepper(lm.lm, bf16=False) if isinstance(lm.lm, GPTByteLM) else stepper_for(lm.lm)
        return DecodedStepper(inner, lm.decoding)
    if isinstance(lm, GPTByteLM):
        return GPTStepper(lm)
    if isinstance(lm, HFByteLM):
        return HFStepper(lm)
    if isinstance(lm, TokenMarginalByteLM):
        return MarginalStepper(lm)
    raise TypeError(f"no cached sampler for {type(lm).__name__}")


def generate(stepper: Stepper, prefixes: torch.Tensor, decoding: Decoding, uniforms: torch.Tensor) -> torch.Tensor:
    """Continue `prefixes` (B, P) by uniforms.shape[1] bytes with a key/value cache."""
    block, keep = stepper.block_size, stepper.block_size // 2
    text = prefixes
    restart(decoding, prefixes.size(0))
    logprobs = stepper.start(text[:, -block:])
    new = []
    for t in range(uniforms.size(1)):
        byte = draw(logprobs, decoding, uniforms[:, t])
        new.append(byte)
        text = torch.cat([text, byte[:, None]], dim=1)
        if t + 1 == uniforms.size(1):
            break
        if stepper.cached() >= block:  # full: rebuild from the last half block
            logprobs = stepper.start(text[:, -keep:])
        else:
            logprobs = stepper.step(byte)
    return torch.stack(new, dim=1)


def generate_uncached(lm: ByteLM, prefixes: torch.Tensor, decoding: Decoding, uniforms: torch.Tensor) -> torch.Tensor:
    """The same bytes as `generate`, re-running the whole context window for every new byte."""
    block, keep = lm.block_size, lm.block_size // 2
    text, start = prefixes, max(0, prefixes.size(1) - block)
    restart(decoding, prefixes.size(0))
    new = []
    for t in range(uniforms.size(1)):
        logprobs = lm.next_byte_logprobs(text[:, start:])[:, -1].cpu()
        byte = draw(logprobs, decoding, uniforms[:, t])
        new.append(byte)
        text = torch.cat([text, byte[:, None]], dim=1)
        if text.size(1) - start > block:
            start = text.size(1) - keep
    return torch.stack(new, dim=1)


def uniforms_for(seeds: Sequence[int], n: int) -> torch.Tensor:
    """(len(seeds), n) uniform numbers in [0, 1), row i from its own generator."""
    return torch.from_numpy(np.stack([np.random.default_rng(s).random(n) for s in seeds]))
