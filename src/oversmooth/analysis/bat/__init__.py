"""The BAT solver: which tokens a softmax bottleneck can zero (Finlayson et al.'s BAT; thesis §4.1.6, appendix D),
every answer proved to a tolerance (below). TBAT (`oversmooth.analysis.tbat`: all tokens at sampled positions) is
its caller.

For a model output p over V tokens (bytes, or the token track's 49,152) and the matrix W (V x k) that maps the
head's input to logits, token i is BAT-rejected iff some q exists with

    q_i = 0,  sum(q) = 1,  0 <= q <= u = p / (1 - threshold),  W^T q = W^T p,

and TBAT is the mass p puts on the rejected tokens. Floating point cannot decide min over the constraints of q_i = 0:
the solver, like the definition's LP (`reference.bat_reject_set`), decides min q_i <= zero_tol (1e-9, absolute), so
a token whose exact minimum lies in (0, zero_tol] is rejected. With A = [W^T; 1^T] the constraints are A q = A p,
0 <= q <= u: a polytope P that contains p. Q is an orthonormal basis of A's rows (r x V), Q_i its column i, and
c = threshold / (1 - threshold), so that u = p (1 + c). Facts the solver uses:

- rank(A) = V: q = p is the only point of P, so nothing with p_i > 0 is rejected (no LP at all).
- i can be rejected only if sum over j != i of u_j >= 1, i.e. p_i <= threshold.
- A point q of P with q_i = 0 proves i rejected (a witness, checked against the constraints to the LPs'
  tolerance; an LP's optimum rejects i where its q_i <= zero_tol). For any s in the row space of A, min over P of
  q_i >= L_i(s) = p.s - sum_l u_l max(s_l - [l = i], 0) (weak LP duality): L_i(s) > certificate_margin proves i
  accepted (a certificate: min q_i > 1e-9). Candidates for s: the least-squares direction K_(., i) / K_ii (the
  screen computes it), reweighted directions, and the dual solution of every LP solved.

The modules, one per part, in the order `solver.BATSolver.reject_set` runs them on the tokens still undecided:

- `settings`: the definition's threshold and tolerances (`TBATSettings`) and every tuning constant.
- `polytope`: P of one output (`Polytope`), A's row basis, the witness checks and the certificates (`dual_bounds`).
- `screen` (no LP): a move of every other token's mass in proportion to p (then p^1.5, p^2): a witness where it
  stays in the box, the least-squares direction a certificate. Rejects all but a few dozen tokens at k = 64, all
  but about 500 at k = 576.
- `repair` (no LP): the moves that left the box, with the tokens that crossed pinned at their bound.
- `projections`, `descent`, `polish` (no HiGHS; where A has more than DESCENT_ROWS rows): alternating projections
  between the plane A q = A p, q_i = 0 and the box; an accelerated descent on the smoothed dual; min q_i over parts
  of P by a dense interior-point method.
- `lp`: HiGHS's LPs, one per model over every token up to FULL_LP_COLUMNS tokens (the byte track), column
  generation above it; the interior-point method.
- `result`: the answer (`BATResult`); a solver failure marks the position failed (TBAT NaN), never accept or reject.
- `solver`: `BATSolver`, which runs them.
"""
