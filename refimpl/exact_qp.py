"""The exact-QP baseline: the whole MEB dual solved by an independent interior-point solver.

The CVM papers compare against solving the full QP ([001], Sec. 4.2 and 5);
here it is the *independent* reference the tests, ``corevector verify`` and the report use to
check the (1+eps)^2 bound of eqs. (14)-(15).  It solves the MEB dual (001 eq. (2), with the
Delta offsets of [000] eq. (12) in the linear term)

    max_a  l'a - a'Q a    s.t.  a >= 0,  1'a = 1,

with cvxopt's interior-point QP (not our SMO), forming the n x n matrix Q = K~ on purpose: it is
meant for problems of a few hundred points.
"""
from __future__ import annotations

import numpy as np

#: beyond this many points the dense exact solve is refused (memory and cubic time)
MAX_EXACT_POINTS = 3000


def exact_meb(problem):
    """r*^2 of the exact MEB, bracketed: returns ``(lower, upper, alpha)`` with lower <= r*^2 <= upper.

    The solver's alpha is projected onto the simplex, so ``lower`` = l'a - a'Qa is the dual value
    of a feasible point (weak duality: a lower bound on r*^2) and ``upper`` = max_l of the squared
    distance of point l to the center c(a) (the radius of an enclosing ball: an upper bound).  The
    bracket lets a caller compare against r*^2 without trusting any solver tolerance; when the
    solver converged the two agree to ~1e-10 relative.
    """
    try:
        from cvxopt import matrix, solvers
    except ImportError as exc:  # pragma: no cover - cvxopt is a declared dependency
        raise ImportError("the exact QP baseline needs cvxopt (pip install cvxopt)") from exc
    n = problem.n
    if n > MAX_EXACT_POINTS:
        raise ValueError(f"the exact QP forms an n x n matrix; n = {n} exceeds {MAX_EXACT_POINTS}")
    idx = np.arange(n)
    Q = problem.block(idx, idx)
    Q = 0.5 * (Q + Q.T)
    lin = problem.linear_term(idx)
    opts = {"show_progress": False, "abstol": 1e-13, "reltol": 1e-13, "feastol": 1e-12, "maxiters": 200}
    sol = solvers.qp(matrix(2.0 * Q), matrix(-lin), matrix(-np.eye(n)), matrix(np.zeros(n)),
                     matrix(np.ones((1, n))), matrix(1.0), options=opts)
    a = np.clip(np.asarray(sol["x"]).ravel(), 0.0, None)
    a /= a.sum()
    Qa = Q @ a
    aQa = float(a @ Qa)
    lower = float(lin @ a) - aQa
    upper = float(np.max(lin - 2.0 * Qa)) + aQa
    return lower, max(upper, lower), a
