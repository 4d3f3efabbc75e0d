"""A truth with known support: a teacher whose text is written under a decoding, so that the truth's
conditionals are the decoded (e.g. truncated) distributions of the teacher, with exact zeros.

A `teacher` source's `decoding` (`{method: epsilon, epsilon: 0.001}`; default `{method: pure}`, the teacher's own
distribution) is the decoding D of `oversmooth.analysis.decoding`, the one the metrics and the sampler use. The truth
is then D(teacher) at every position, and every job that reads the teacher as the truth reads it through
`DecodedByteLM` (its logits, its held-out evaluation, its own samples, the quality jobs' scoring of samples) or
`DecodedStepper` (the documents it writes, and its samples): one transform, applied to the teacher's log-probabilities
wherever they are computed. A byte outside the truth's support has log-probability -inf there.

The transforms are NumPy (float64); a row the model left NaN (a token LM's outputs before `outputs_from`) stays NaN.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from oversmooth.analysis.decoding import PARAMETER, Decoding

if TYPE_CHECKING:  # (the Stepper protocol is `generation.sampling`'s, which the jobs reading the truth do not reach)
    from oversmooth.models.bytelm import ByteLM, ByteLMOutput


def truth_decoding(settings: Mapping | None) -> Decoding | None:
    """The decoding a teacher source's `decoding` setting names (method and, but for pure and greedy, its
    parameter), or None for no setting or `pure`: the truth is then the teacher's own distribution."""
    if settings is None or settings["method"] == "pure":
        return None
    parameter = PARAMETER.get(settings["method"])
    return Decoding(settings["method"], **({parameter: settings[parameter]} if parameter else {}))


def decode_rows(logprobs: torch.Tensor, decoding: Decoding) -> torch.Tensor:
    """`decoding` applied to each row of next-byte log-probabilities (..., 256), in float64 on the host, returned
    float64 where the input was; rows holding a NaN are left as they are."""
    values = logprobs.detach().double().cpu().numpy()
    rows = values.reshape(-1, values.shape[-1])
    whole = ~np.isnan(rows).any(-1)
    out = rows.copy()
    if whole.any():
        out[whole] = decoding(rows[whole])
    return torch.from_numpy(out.reshape(values.shape)).to(logprobs.device)


class DecodedByteLM:
    """A ByteLM whose next-byte distributions are `decoding` applied to `lm`'s: the truth of a teacher that writes
    under that decoding. Hidden representations are `lm`'s (the network's, not the truth's). Computed in float32
    under any autocast (a job's bf16 on CUDA): where a truncation cuts is a threshold on the distribution, and every
    reading of the truth (its documents, logits, evaluation, scoring) must cut where the others do."""

    def __init__(self, lm: ByteLM, decoding: Decoding):
        self.lm, self.decoding = lm, decoding

    @property
    def name(self) -> str:
        return self.lm.name

    @property
    def block_size(self) -> int:
        return self.lm.block_size

    @property
    def model(self) -> torch.nn.Module | None:  # where extract_logits looks for the device
        return getattr(self.lm, "model", None)

    def next_byte_logprobs(self, x: torch.Tensor) -> torch.Tensor:
        with self._float32():
            return decode_rows(self.lm.next_byte_logprobs(x), self.decoding).float()

    def next_byte_outputs(self, x: torch.Tensor, outputs_from: Sequence[int] | None = None) -> ByteLMOutput:
        with self._float32():
            out = self.lm.next_byte_outputs(x, outputs_from)
        return out._replace(logprobs=decode_rows(out.logprobs, self.decoding).float())

    def _float32(self) -> torch.autocast:
        """No autocast on the device the model runs on."""
        model = self.model
        device = next(model.parameters()).device if model is not None else torch.device("cpu")
        return torch.autocast(device.type, enabled=False)


class DecodedStepper:
    """A Stepper (`oversmooth.generation.sampling`) whose next-byte log-probabilities are `decoding` applied to
    `inner`'s, float64: pure sampling from it draws from the decoded distribution, and a drawn byte's log-probability
    is read from the decoded row. Counts what the decoding removed (`truncation`)."""

    def __init__(self, inner, decoding: Decoding):
        self.inner, self.decoding, self.block_size = inner, decoding, inner.block_size
        self.rows = self.rows_with_zero = 0
        self.cut_mass = self.zero_bytes = 0.0

    def start(self, window: torch.Tensor) -> torch.Tensor:
        return self._decode(self.inner.start(window))

    def step(self, byte: torch.Tensor) -> torch.Tensor:
        return self._decode(self.inner.step(byte))

    def cached(self) -> int:
        return self.inner.cached()

    def _decode(self, logprobs: torch.Tensor) -> torch.Tensor:
        decoded = decode_rows(logprobs, self.decoding)
        removed = torch.isneginf(decoded) & ~torch.isneginf(logprobs)
        self.rows += decoded.size(0)
        self.rows_with_zero += int(removed.any(-1).sum())
        self.zero_bytes += float(removed.sum())
        self.cut_mass += float(torch.where(removed, logprobs.double().exp(), 0.0).sum())
        return decoded

    def truncation(self) -> dict[str, float]:
        """Per row drawn from so far: the share of rows the decoding set a byte of to 0, the mean number of such
        bytes, and the mean mass it removed (before renormalising)."""
        rows = max(self.rows, 1)
        return {"rows": self.rows, "share_with_zero": self.rows_with_zero / rows,
                "zero_bytes": self.zero_bytes / rows, "cut_mass": self.cut_mass / rows}


def decoded_truth(lm: ByteLM, settings: Mapping | None) -> ByteLM:
    """`lm` as the truth of a teacher writing under `settings` (a teacher source's `decoding`): `lm` itself when
    that is pure or absent, else a `DecodedByteLM`."""
    decoding = truth_decoding(settings)
    return lm if decoding is None else DecodedByteLM(lm, decoding)
