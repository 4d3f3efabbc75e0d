"""The cached stepper of any byte model of the pipeline, a decoded truth's included (issue 57): apart from
`teacher`, so that the sampling jobs reach the sampler and the truth's decoding, not the teacher's corpus code, and
apart from `decoded`, so that the jobs that only read the truth (logits, evaluation, quality) do not reach the
sampler."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oversmooth.generation.decoded import DecodedByteLM, DecodedStepper
from oversmooth.generation.sampling import GPTStepper, Stepper, stepper_for
from oversmooth.models.bytelm import GPTByteLM

if TYPE_CHECKING:
    from oversmooth.models.bytelm import ByteLM


def stepper_of(lm: ByteLM) -> Stepper:
    """`sampling.stepper_for(lm)`; for a decoded truth (`DecodedByteLM`), its teacher's stepper with the truth's
    decoding applied to every row (`DecodedStepper`), a GPT's without bf16 (the truth is read in float32 everywhere:
    `DecodedByteLM`)."""
    if isinstance(lm, DecodedByteLM):
        inner = GPTStepper(lm.lm, bf16=False) if isinstance(lm.lm, GPTByteLM) else stepper_for(lm.lm)
        return DecodedStepper(inner, lm.decoding)
    return stepper_for(lm)
