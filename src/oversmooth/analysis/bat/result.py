"""The solver's answer for one output: the rejected tokens, or a failure (never a guess)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class BATResult:
    rejected: np.ndarray  # bool (V,)
    failed: bool = False  # an LP failed or could not settle a token: the position has no answer (TBAT NaN)
    lp_solves: int = 0  # HiGHS solves (the polish's interior-point LPs are not counted)
    stats: dict = field(default_factory=dict)  # tokens each step settled, the LPs' status where they failed

    def tbat(self, p: np.ndarray) -> float:
        return float("nan") if self.failed else float(p[self.rejected].sum())
