"""Exact epsilon-SVR and nu-SVR by SMO on the dual, after the SVR tutorial ([003]).

The tutorial's dual of the epsilon-SVR (its Sec. 1.2, "dual problem and quadratic programs")

    max  -1/2 sum_ij (a_i - a*_i)(a_j - a*_j) k(x_i, x_j) - eps sum_i (a_i + a*_i) + sum_i y_i (a_i - a*_i)
    s.t. sum_i (a_i - a*_i) = 0,  a_i, a*_i in [0, C],

gives w = sum (a_i - a*_i) phi(x_i) and f(x) = sum (a_i - a*_i) k(x_i, x) + b.  The nu-SVR (tutorial
Sec. "automatic tuning of the insensitivity tube") drops the eps term and adds the constraint
sum (a_i + a*_i) = C nu n (the scaling of LIBSVM, whose per-sample bound is C); eps becomes a
primal variable recovered from the KKT conditions.

We stack the 2n multipliers as LIBSVM does: z_t = +1 for a_t = a_i (t < n), z_t = -1 for
a_t = a*_i (t >= n), Q_ts = z_t z_s k(x_i(t), x_i(s)), and minimise f(a) = 1/2 a'Q a + p'a.  SMO
(the tutorial's Sec. "sequential minimal optimization"; Platt) changes two multipliers at a time
along the only feasible direction a_i += z_i t, a_j -= z_j t (which keeps sum z_t a_t, and for nu-SVR
also each sign's sum, fixed), with the analytic, clipped step and the second-order working-set
choice of Fan, Chen & Lin (2005), the rule of LIBSVM 2.82 used by 002.

b (and eps for nu-SVR) come from the KKT conditions: the average of the free multipliers' values,
or the midpoint of the bracket when no multiplier is free (tutorial "computing b").  The loop stops
when the duality gap (primal objective minus dual objective, both at the current point) relative to
|primal| + 1 is at most ``tol`` (the tutorial's stopping rule, Sec. "useful tricks").

The full n x n kernel matrix is formed: this is a readable reference for moderate n, not a
large-scale solver (scikit-learn's ``SVR`` / ``NuSVR`` are the LIBSVM reference).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..kernels import kernel_block

TAU = 1e-12  # curvature floor for non-positive-definite pairs (LIBSVM's TAU)


@dataclass
class SVRResult:
    coef: np.ndarray          # a - a*, length n (w = sum coef_i phi(x_i))
    intercept: float          # b
    epsilon: float            # the tube width (given for epsilon-SVR, recovered for nu-SVR)
    alpha: np.ndarray         # a (length n)
    alpha_star: np.ndarray    # a* (length n)
    dual_objective: float     # the tutorial's dual (a maximum) at the solution
    primal_objective: float
    gap: float                # primal - dual
    n_iter: int
    converged: bool

    @property
    def support(self):
        return np.flatnonzero(self.coef != 0)

    def predict(self, K_test_train):
        """f(x) for the rows of K_test_train = [k(x, x_i)]."""
        return K_test_train @ self.coef + self.intercept


def _check(K, y, C):
    K = np.asarray(K, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if K.ndim != 2 or K.shape[0] != K.shape[1] or K.shape[0] != y.shape[0]:
        raise ValueError(f"K must be n x n and y of length n, got K {K.shape}, y {y.shape}")
    if not (np.isfinite(C) and C > 0):
        raise ValueError(f"C must be positive and finite, got {C}")
    return K, y


def _kkt_level(a, z, G, C, members):
    """The KKT value r = z_t G_t shared by the free multipliers of ``members`` (their mean), or the
    midpoint of the interval the bound multipliers leave for it (LIBSVM's calculate_rho)."""
    zG = z * G
    free = members & (a > 0) & (a < C)
    if free.any():
        return float(zG[free].mean())
    at_upper = members & (a >= C)
    at_lower = members & (a <= 0)
    # r <= z G_t where decreasing the objective would need a_t to move up, r >= elsewhere
    ub_set = (at_upper & (z < 0)) | (at_lower & (z > 0))
    lb_set = (at_upper & (z > 0)) | (at_lower & (z < 0))
    ub = zG[ub_set].min() if ub_set.any() else np.inf
    lb = zG[lb_set].max() if lb_set.any() else -np.inf
    if not np.isfinite(ub):
        return float(lb)
    if not np.isfinite(lb):
        return float(ub)
    return 0.5 * (ub + lb)


def _smo(K, y, C, a, p, z, groups, tol, max_iter, gap_fn):
    """Minimise 1/2 a'Qa + p'a by SMO; ``groups`` are the index masks within which pairs are chosen
    (one group for epsilon-SVR, the two signs for nu-SVR)."""
    n = len(y)
    idx = np.concatenate([np.arange(n), np.arange(n)])
    delta = a[:n] - a[n:]
    G = z * (K @ delta)[idx] + p
    diagK = np.diag(K)[idx]
    it = 0
    converged = False
    while True:
        gap, primal, dual = gap_fn(a, G)
        if gap <= tol * (abs(primal) + 1.0):
            converged = True
            break
        if it >= max_iter:
            break
        v = -z * G
        up = ((z > 0) & (a < C)) | ((z < 0) & (a > 0))
        low = ((z > 0) & (a > 0)) | ((z < 0) & (a < C))
        best = None
        for g in groups:
            cand_i = np.flatnonzero(up & g)
            if len(cand_i) == 0:
                continue
            i = cand_i[np.argmax(v[cand_i])]
            cand_j = np.flatnonzero(low & g & (v < v[i]))
            if len(cand_j) == 0:
                continue
            b = v[i] - v[cand_j]
            eta = diagK[i] + diagK[cand_j] - 2.0 * K[idx[i], idx[cand_j]]
            eta = np.where(eta > 0, eta, TAU)
            k = int(np.argmax(b * b / eta))
            gain = b[k] * b[k] / eta[k]
            if best is None or gain > best[0]:
                best = (gain, i, cand_j[k], b[k], eta[k])
        if best is None or best[3] <= 1e-15 * max(1.0, np.abs(v).max()):
            converged = True   # no violating pair left: optimal to machine precision
            break
        _, i, j, b, eta = best
        # feasible direction a_i += z_i t, a_j -= z_j t, t >= 0; unconstrained minimiser t = b / eta
        t_max_i = (C - a[i]) if z[i] > 0 else a[i]
        t_max_j = a[j] if z[j] > 0 else (C - a[j])
        t = min(b / eta, t_max_i, t_max_j)
        a[i] += z[i] * t
        a[j] -= z[j] * t
        a[i] = min(max(a[i], 0.0), C)
        a[j] = min(max(a[j], 0.0), C)
        # G += Q[:, i] (z_i t) + Q[:, j] (-z_j t),  Q[:, s] = z z_s K[idx, idx_s]
        G += z * t * (K[idx, idx[i]] - K[idx, idx[j]])
        it += 1
    return a, G, it, converged


def epsilon_svr(K, y, C=1.0, epsilon=0.1, tol=1e-8, max_iter=100_000):
    """Exact epsilon-SVR on the kernel matrix K by SMO (see the module docstring)."""
    K, y = _check(K, y, C)
    if not (np.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"epsilon must be >= 0 and finite, got {epsilon}")
    n = len(y)
    z = np.concatenate([np.ones(n), -np.ones(n)])
    p = np.concatenate([epsilon - y, epsilon + y])
    everyone = np.ones(2 * n, dtype=bool)

    def state(a, G):
        delta = a[:n] - a[n:]
        Kd = G[:n] - epsilon + y                    # G_t = (K delta)_i + eps - y_i for t < n
        b = -_kkt_level(a, z, G, C, everyone)
        quad = 0.5 * delta @ Kd
        primal = quad + C * np.maximum(np.abs(Kd + b - y) - epsilon, 0.0).sum()
        dual = -quad - epsilon * a.sum() + y @ delta
        return primal - dual, primal, dual, b

    a, G, it, ok = _smo(K, y, C, np.zeros(2 * n), p, z, [everyone], tol, max_iter, lambda a, G: state(a, G)[:3])
    if not ok:
        warnings.warn(f"epsilon-SVR SMO stopped at max_iter={max_iter} before the duality gap reached tol",
                      ConvergenceWarning)
    gap, primal, dual, b = state(a, G)
    return SVRResult(coef=a[:n] - a[n:], intercept=b, epsilon=float(epsilon), alpha=a[:n].copy(),
                     alpha_star=a[n:].copy(), dual_objective=float(dual), primal_objective=float(primal),
                     gap=float(gap), n_iter=it, converged=ok)


def nu_svr(K, y, C=1.0, nu=0.5, tol=1e-8, max_iter=100_000):
    """Exact nu-SVR on the kernel matrix K by SMO: sum (a + a*) = C nu n (LIBSVM's scaling)."""
    K, y = _check(K, y, C)
    if not (0 < nu <= 1):
        raise ValueError(f"nu must be in (0, 1], got {nu}")
    n = len(y)
    z = np.concatenate([np.ones(n), -np.ones(n)])
    p = np.concatenate([-y, y])
    pos, neg = z > 0, z < 0
    # LIBSVM's start: fill a and a* with C up to C nu n / 2 each, in index order
    a = np.zeros(2 * n)
    half = C * nu * n / 2.0
    for i in range(n):
        a[i] = a[i + n] = min(half, C)
        half -= a[i]

    def state(a, G):
        delta = a[:n] - a[n:]
        Kd = G[:n] + y                              # G_t = (K delta)_i - y_i for t < n
        # per-sign KKT levels: G_t = r_g for the free multipliers of sign g, G_t >= r_g at 0,
        # G_t <= r_g at C.  Free a_i sit on f = y - eps, free a*_i on f = y + eps, whence
        # b = -(r1 - r2)/2 and eps = -(r1 + r2)/2 (LIBSVM's rho and r)
        ones = np.ones(2 * n)
        r1 = _kkt_level(a, ones, G, C, pos)
        r2 = _kkt_level(a, ones, G, C, neg)
        b, eps = -(r1 - r2) / 2.0, max(-(r1 + r2) / 2.0, 0.0)
        quad = 0.5 * delta @ Kd
        primal = quad + C * (nu * n * eps + np.maximum(np.abs(Kd + b - y) - eps, 0.0).sum())
        dual = -quad + y @ delta
        return primal - dual, primal, dual, b, eps

    a, G, it, ok = _smo(K, y, C, a, p, z, [pos, neg], tol, max_iter, lambda a, G: state(a, G)[:3])
    if not ok:
        warnings.warn(f"nu-SVR SMO stopped at max_iter={max_iter} before the duality gap reached tol",
                      ConvergenceWarning)
    gap, primal, dual, b, eps = state(a, G)
    return SVRResult(coef=a[:n] - a[n:], intercept=float(b), epsilon=float(eps), alpha=a[:n].copy(),
                     alpha_star=a[n:].copy(), dual_objective=float(dual), primal_objective=float(primal),
                     gap=float(gap), n_iter=it, converged=ok)


def fit_svr(X, y, spec, C=1.0, epsilon=0.1, nu=None, tol=1e-8, max_iter=100_000):
    """epsilon-SVR (``nu=None``) or nu-SVR on inputs X with kernel ``spec``; returns an SVRResult."""
    K = kernel_block(spec, X, X)
    if nu is None:
        return epsilon_svr(K, y, C, epsilon, tol, max_iter)
    return nu_svr(K, y, C, nu, tol, max_iter)
