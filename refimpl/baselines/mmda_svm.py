"""MMDA(SVM): the original MMDA, problem (3) solved exactly by a dense QP ([004], Sec. II, V).

Kocsor et al.'s MMDA solves, for each new direction, the dual (3)

    max  2 alpha'1 - alpha'K^alpha - 2 alpha'Y Phi'U gamma - gamma'U'U gamma    s.t. alpha >= 0

over all m training points.  Here it is solved by cvxopt's interior-point QP (an independent
solver: neither the core sets nor SOR of MMDA(CVM)) with the dense m x m matrix, so it is meant
for small and medium m (the paper's Table III shows its cubic cost).  gamma is eliminated
exactly (U'U = I): gamma = -U'Phi Y alpha, leaving

    min_alpha  1/2 alpha'(K^ - P P')alpha - 1'alpha,   alpha >= 0,   P = Y Phi'U = Phi~'U~ (eq. (30)),

whose matrix is the Schur complement of Lemma 2 (pd).  Two exact solvers are provided:

* ``'interior_point'``: cvxopt's interior-point QP (fully independent of MMDA(CVM)), polished on
  its support (the free coordinates solve H_FF alpha_F = 1 exactly by Cholesky), which gives the
  sparse, exact alpha that Table IV's counts need.  Its cost is cubic in m at every iteration.
* ``'active_set'`` (default): a primal active-set method on the same dense QP -- Newton steps
  H_FF alpha_F = 1 on the free set F with ratio tests, and the KKT violators g_i < -tol entering
  F -- started from a loose solution of SOR over all m points (Algorithm 2, no core sets).  It
  stops only when the KKT conditions of (3) hold to ``tol`` on all m points, so its solution is
  as exact as the interior point's, at a cost dominated by the m x m kernel matrix.

``exact_constrained_meb`` solves the constrained MEB dual (20)/(21) itself, also with cvxopt; it
is the independent p* of Theorem 2 in the tests and the report.
"""
from __future__ import annotations

import numpy as np

from ..constrained_meb import ConstrainedMEBProblem, ConstrainedOps
from ..mmda import Direction

#: beyond this many points the dense solve is refused (memory and cubic time)
MAX_DENSE_POINTS = 12_000


def _cvxopt():
    try:
        from cvxopt import matrix, solvers
    except ImportError as exc:  # pragma: no cover - cvxopt is a declared dependency
        raise ImportError("the MMDA(SVM) baseline needs cvxopt (pip install cvxopt)") from exc
    return matrix, solvers


def dense_G(problem: ConstrainedMEBProblem, ops_class=ConstrainedOps):
    """(K^, P) over all m points: K^ of eq. (6) and P = Phi~'U~ (eq. (30)); G of (24) is [[K^, P], [P', I]]."""
    n = problem.n
    if n > MAX_DENSE_POINTS:
        raise ValueError(f"the dense MMDA QP forms an m x m matrix; m = {n} exceeds {MAX_DENSE_POINTS}")
    ops = ops_class(problem)
    base = problem.base
    K = ops.dense_block(base.X, base.X)             # eq. (6): Y (K + 11' + I/C) Y
    K += base.label_bias
    s = ops.sign(np.arange(n))
    K *= s[:, None]
    K *= s[None, :]
    K[np.diag_indices(n)] += base.diag_add
    P = ops.proj_rows(np.arange(n))
    return K, P, ops.n_eval + n * n


SOLVERS = ("active_set", "interior_point")


def solve_mmda_qp(problem: ConstrainedMEBProblem, ops_class=ConstrainedOps, polish=True, solver="interior_point",
                  tol=1e-9):
    """Exact (alpha, gamma) of (3) over all m points.  Returns (alpha, gamma, kernel evaluations)."""
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    K, P, n_eval = dense_G(problem, ops_class)
    H = K
    H -= P @ P.T
    del K
    if solver == "active_set":
        alpha = active_set_nonneg(H, ops_class(problem), tol)
        return alpha, -P.T @ alpha, n_eval
    matrix, solvers = _cvxopt()
    H = 0.5 * (H + H.T)
    n = H.shape[0]
    opts = {"show_progress": False, "abstol": 1e-10, "reltol": 1e-10, "feastol": 1e-10, "maxiters": 200}
    sol = solvers.qp(matrix(H), matrix(-np.ones(n)), matrix(-np.eye(n)), matrix(np.zeros(n)), options=opts)
    alpha = np.clip(np.asarray(sol["x"]).ravel(), 0.0, None)
    if polish:
        alpha = _polish(H, alpha)
    gamma = -P.T @ alpha
    return alpha, gamma, n_eval


def _polish(H, alpha, rtol=1e-6):
    """Solve H_FF alpha_F = 1 on the interior point's support F; keep it if it is feasible and optimal."""
    from scipy.linalg import LinAlgError, cho_factor, cho_solve

    F = np.flatnonzero(alpha > rtol * alpha.max())
    try:
        aF = cho_solve(cho_factor(H[np.ix_(F, F)], lower=True), np.ones(len(F)))
    except LinAlgError:
        return alpha
    if np.any(aF <= 0):
        return alpha
    out = np.zeros_like(alpha)
    out[F] = aF
    g = H[:, F] @ aF - 1.0
    if g.min() < -1e-6 * max(1.0, np.abs(g).max()):   # a dropped coordinate still wants to grow
        return alpha
    return out


def active_set_nonneg(H, ops, tol=1e-9, max_changes=None):
    """min 1/2 a'H a - 1'a s.t. a >= 0 (H pd) by a primal active-set method; exact to KKT ``tol``.

    Warm start: SOR over all coordinates (``ops.sor``, Algorithm 2 with the largest-change rule)
    to a loose tolerance.  Then, on the free set F: the Newton point H_FF a_F = 1; if it has
    non-positive entries, step as far as a >= 0 allows and drop the blocking coordinate; else
    add every coordinate with g_i = (H a - 1)_i < -tol and repeat; stop when none is left.
    """
    from scipy.linalg import cho_factor, cho_solve

    m = H.shape[0]
    a = np.zeros(m)
    g = -np.ones(m)
    ops.sor(H, g, a, np.ones(m, dtype=bool), 1.0, 1e-2, 20 * m + 1000)
    F = list(np.flatnonzero(a > 0))
    max_changes = max_changes or 10 * m + 100
    for _ in range(max_changes):
        if F:
            target = cho_solve(cho_factor(H[np.ix_(F, F)], lower=True), np.ones(len(F)))
            cur = a[F]
            if np.any(target <= 0):
                d = target - cur
                neg = np.flatnonzero(d < 0)
                ratios = cur[neg] / -d[neg]
                step = ratios.min()
                blocking = set(int(j) for j in neg[ratios <= step])   # they reach 0 at the step
                a[F] = np.maximum(cur + step * d, 0.0)
                for j in blocking:
                    a[F[j]] = 0.0
                F = [f for j, f in enumerate(F) if j not in blocking]
                continue
            a[:] = 0.0
            a[F] = target
        g = H[:, F] @ a[F] - 1.0 if F else -np.ones(m)
        viol = np.flatnonzero((g < -tol) & (a == 0))
        if len(viol) == 0:
            return a
        F += [int(i) for i in viol]
    raise RuntimeError("the active-set MMDA(SVM) solver did not converge")


def solve_svm(ops_class=ConstrainedOps, solver="active_set"):
    """The MMDA(SVM) solver of (3) for ``refimpl.mmda.extract_binary``."""

    def solve(problem: ConstrainedMEBProblem, seed) -> Direction:
        alpha, gamma, n_eval = solve_mmda_qp(problem, ops_class, solver=solver)
        sv = np.flatnonzero(alpha > 0)
        ops = ops_class(problem)
        info = dict(core_set_size=problem.n, n_support=len(sv), n_iter=0, kernel_evaluations=n_eval,
                    certified_ratio=1.0, converged=True)
        return Direction(sv, alpha[sv], ops.proj_rows(sv), info)

    return solve


def exact_constrained_meb(problem: ConstrainedMEBProblem):
    """p* of (19) bracketed: ``(lower, upper, alpha~, gamma~)`` with lower <= p* <= upper.

    Solves (20) with cvxopt over [alpha~; gamma~] (dense G of (26), linear term diag K~ + Delta).
    ``lower`` is the dual value at the solver's alpha~ projected onto the simplex, with the best
    gamma~ = -U~'Phi~ alpha~ for it (weak duality); ``upper`` is the largest squared distance (23)
    of any point to that center (an enclosing ball of a feasible center).
    """
    matrix, solvers = _cvxopt()
    K, P, _ = dense_G(problem)
    n, s = P.shape
    G = np.block([[K, P], [P.T, np.eye(s)]])
    G = 0.5 * (G + G.T)
    lin = problem.base.linear_term(np.arange(n))
    q = np.concatenate([-lin, np.zeros(s)])
    Gi = np.hstack([-np.eye(n), np.zeros((n, s))])
    A = np.concatenate([np.ones(n), np.zeros(s)])[None, :]
    opts = {"show_progress": False, "abstol": 1e-12, "reltol": 1e-12, "feastol": 1e-12, "maxiters": 200}
    sol = solvers.qp(matrix(2.0 * G), matrix(q), matrix(Gi), matrix(np.zeros(n)), matrix(A), matrix(1.0),
                     options=opts)
    x = np.asarray(sol["x"]).ravel()
    a = np.clip(x[:n], 0.0, None)
    a /= a.sum()
    gam = -P.T @ a
    xt = np.concatenate([a, gam])
    Gx = G @ xt
    cc = float(xt @ Gx)
    lower = float(lin @ a) - cc
    upper = float(np.max(cc - 2.0 * Gx[:n] + lin))
    return lower, max(upper, lower), a, gam
