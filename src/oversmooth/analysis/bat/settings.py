"""The BAT solver's settings, all in one place: the definition's threshold and tolerances (`TBATSettings`, the
config's `tbat` section) and the tuning constants of each way of deciding tokens, each with what it does and what
was measured of it.

The solver's modules read the constants when they run (`settings.REPAIR_ROUNDS`), so that a test can change one
for a run (pytest's monkeypatch on this module)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class TBATSettings:
    """The definition's threshold (e^delta = 1 / (1 - threshold); the thesis code used 0.2) and the
    numerical tolerances."""

    threshold: float = 0.2
    zero_tol: float = 1e-9  # q_i at or below this counts as 0
    certificate_margin: float = 1e-9  # a dual bound above this proves min q_i > 0
    feasibility_tol: float = 1e-9  # HiGHS primal/dual feasibility, and the witness check
    rank_tol: float = 1e-10  # singular values below rank_tol * largest count as 0

    def __post_init__(self):
        if not 0 < self.threshold < 1:
            raise ValueError(f"tbat.threshold must be in (0, 1), got {self.threshold}")


def solver_settings(tolerances: Mapping[str, float] | None) -> TBATSettings:
    """The settings of a BAT solver that a sampler or a decoding asks (it sets the threshold per question): the
    config's `tbat` tolerances a rule carries, or the defaults where the rule runs no BAT method (None)."""
    return TBATSettings(**tolerances) if tolerances else TBATSettings()


# The LPs (lp.py): HiGHS's column generation
FULL_LP_COLUMNS = 2048  # up to this vocabulary one LP over every token per model; above it, column generation
FREE_COLUMNS = 512  # a large vocabulary's LP frees its undecided tokens and at least this many most probable ones,
FREE_PER_ROW = 2  # and at least this many per row of A: with no more than rows, the free tokens alone cannot move q
ASKED_FREE_COLUMNS = 4096  # where a sampler asks about a few tokens, at least this many most probable: with 512, a
# k = 64 head's high-entropy position (0.99 of the mass below epsilon = 0.005) took 684 pricing rounds (13.7 s) for
# one token, and 1,000 did not settle another
MAX_PRICING_ROUNDS = 1000  # tail vertices added for one token before the position is marked failed
DENSE_PRICING_ROUNDS = 40  # the same where A has more than DESCENT_ROWS rows (3-7 s an LP at k = 576: ~4 minutes)

# Certificates (polytope.py)
MAX_DIRECTIONS = 256  # tokens given reweighted certificate directions (one LP over every token only)
DIRECTION_VALUES = 2**21  # a chunk of reweighted directions holds about this many values (r x V per token), 16 MB
WITNESS_BATCH = 64  # the screen's and the descent's candidate witnesses checked in one product (64 x V values)

# The screen (screen.py)
HEAVY_TOKENS = 1024  # the screen's first pass computes K_li for these l (largest K_ll), bounds the others
EXACT_SCREEN = 4096  # undecided tokens (most probable first) whose move and direction are computed over every token
SCREEN_VALUES = 2**23  # a block of K holds about this many values (64 MB)
SCREEN_POWERS = (1.0, 1.5, 2.0)  # the screen's moves in proportion to p^power, each for the tokens the last left
SCREEN_CONDITION = 1e8  # the screen inverts M on its eigenvalues above largest / this (K exact to ~1e-8 relative)
SCREEN_ERROR = 1e-7  # the screen's bound on K's rounding error, relative to sqrt(K_ll K_ii) (and on p_i K_ii)

# The repairs (repair.py)
REPAIR_POWERS = (1.0, 1.5)  # the repairs' moves, after every plain move, for the tokens those left
DENSE_POWERS = (1.0,)  # the moves and repairs where the descent follows (A has more than DESCENT_ROWS rows): at
# SmolLM2's head the others rejected 0-9 tokens at the demo's 4 positions for 3 s each, 188-391 at 6 of 8 others
REPAIR_FIXED = 256  # the repair gives up on a token once its move would pin more tokens than this at a bound
REPAIR_ROUNDS = 12  # rounds of pinning (each one product Z^T R over the tokens still in repair)

# The alternating projections (projections.py)
PROJECTION_ROUNDS = 40  # where the descent runs, the tokens the repairs left first get this many alternating
PROJECTION_MARGIN = 0.05  # projections between the plane (A q = A p, q_i = 0) and [m p, u - m p], m this;
PROJECTION_STALL = 5  # a token leaves them once its mass outside [0, u] has not halved in this many rounds

# The dual descent (descent.py)
DESCENT_ROWS = 100  # the dual descent runs (a large vocabulary, after the repairs) where A has more rows than this;
# with fewer, the LPs it would save take about as long as it does (k = 64: 0.05 s each)
DESCENT_ROUNDS = 1000  # its iterations at most
DESCENT_CHECK = 100  # its certificates and witnesses are checked every this many iterations (3 products of
# tokens x r x V each)
DESCENT_SMOOTHING = 0.2  # its smoothing width for token i: this times p_i (in units of s_i = 1)
DESCENT_TAIL = 1e-7  # its iterations take the tokens of smaller mass through a sample (its checks take every token)
DESCENT_TAIL_SAMPLE = 2048  # of this many of them, in proportion to mass (`mass_sample`)
DESCENT_STALL = 0.01  # a token leaves it once a check finds neither its certificate's nor its witness's bound (in
# units of p_i) this much better than at every earlier check
DESCENT_TOKENS = 256  # it takes the undecided tokens this many at a time, the most probable first,
DESCENT_FLOOR = 1e-6  # those of this mass or more: it settled none of 280 below (temperature 0.8), at 30 s a chunk
ASKED_POLISH_ONLY = True  # a sampler's asked tokens skip its iterations, straight to the polish with their
# least-squares directions: 32 drawn tokens of SmolLM2's head (eta <= 3e-4) 85 s instead of 105, the same verdicts

# The polish (polish.py) and its interior-point method (lp.py)
POLISH_KINKS = 1000  # a token the descent leaves gets an LP that frees these tokens nearest its direction's kinks,
POLISH_FLOOR = 1e-6  # among those of at least this mass (besides the free tokens of the column generation's LPs)
POLISH_ROUNDS = 6  # the polish's LPs per token at most, each freeing POLISH_KINKS more tokens
POLISH_ITERATIONS = 80  # the interior-point method's iterations at most
POLISH_STALL = 4  # and it stops once optimal but for a primal residual that has not halved in this many
ROW_RANK = 1e-12  # it makes A's rows orthonormal unless R's diagonal spans more than 1 / this
