"""Warm-started SMO for the core-set MEB dual ([001], Sec. 4.1.4).

On the core set S_t the engine solves the MEB dual (001 eq. (2); with the Delta term of
[000] eq. (12)), written here as a minimisation:

    min_alpha  f(alpha) = alpha' Q alpha - l' alpha    s.t.  alpha >= 0,  1' alpha = 1,

with Q = K~ restricted to S_t and l = diag(K~) + Delta.  The gradient is g = 2 Q alpha - l.

SMO moves mass between two coordinates: alpha_i += t, alpha_j -= t.  Since alpha has no
upper bound, any i may increase and only j with alpha_j > 0 may decrease.  The optimality
(KKT) condition is  max_{j: alpha_j > 0} g_j <= min_i g_i, so the stopping rule is the
maximal violation

    gap = max_{alpha_j > 0} g_j - min_i g_i <= tol.

Because ||c - phi~(z_l)||^2 + Delta_l = alpha'Q alpha - g_l, the gap is the spread of the
squared distances of the core vectors to the current center, the quantity the (1+eps) test
of 001 Sec. 4 compares against R^2: the engine therefore passes tol = eps * R^2.

Working-set selection is the second-order rule of Fan, Chen & Lin (JMLR 2005) as used by
LIBSVM (which the original CVM code adapts): i = argmin_t g_t, then
j = argmax_{alpha_t > 0, g_t > g_i} (g_t - g_i)^2 / a_it, a_it = Q_ii + Q_tt - 2 Q_it.
The step minimises f along e_i - e_j exactly: f changes by t (g_i - g_j) + t^2 a_ij.
"""
from __future__ import annotations

import numpy as np

TAU = 1e-12  # LIBSVM's floor on the curvature a_ij (avoids division by ~0 for duplicate points)
#: Relative width within which two candidates count as tied; ties go to the lowest index.
#: Symmetric configurations (e.g. the two initial points have equal gradients) produce exact ties
#: that a one-ulp difference in a kernel value would otherwise break differently in the ref and
#: fast implementations.
TIE = 1e-12
#: The active-set solver treats Q_FF as singular when a Cholesky pivot L_aa^2 falls below
#: PIVOT_RTOL * Q_aa (e.g. duplicate points, or a linear kernel with |F| > d + 1): the Newton
#: step would then be dominated by round-off, so that QP is left to SMO.
PIVOT_RTOL = 1e-12


def most_violating(grad, alpha, shift=0.0):
    """(i, gap): the coordinate that most wants to grow (lowest gradient; near-ties to the lowest
    index) and the KKT violation  gap = max_{alpha_j > 0} g_j - g_i  that both solvers stop on.

    ``shift`` is the constant c0 taken out of the linear term (refimpl.meb): the tie window stays
    relative to the size of the unshifted gradient, TIE * (max |g| + |c0|)."""
    i = int(np.flatnonzero(grad <= grad.min() + TIE * (np.abs(grad).max() + abs(shift)))[0])
    return i, grad[alpha > 0].max() - grad[i]


def smo_simplex(Q, l, alpha, grad, tol, max_iter, shift=0.0):
    """Run SMO from the warm start ``alpha`` (and its gradient ``grad = 2 Q alpha - l``).

    ``alpha`` and ``grad`` are updated in place.  Returns ``(n_steps, gap)``; the loop stops
    when gap <= tol or after ``max_iter`` steps (the caller decides whether to warn).
    """
    n_steps = 0
    while True:
        i, gap = most_violating(grad, alpha, shift)
        if gap <= tol or n_steps >= max_iter:
            return n_steps, gap
        active = alpha > 0
        # second-order choice of j among coordinates that may decrease (Fan, Chen & Lin 2005)
        diff = grad - grad[i]
        curv = Q[i, i] + np.diag(Q) - 2.0 * Q[i]
        curv = np.where(curv > TAU, curv, TAU)
        score = np.where(active & (diff > 0), diff * diff / curv, -np.inf)
        best = score.max()
        j = int(np.flatnonzero(score >= best - TIE * best)[0])
        a_ij = curv[j]
        step = diff[j] / (2.0 * a_ij)
        if step >= alpha[j]:          # the bound alpha_j >= 0 clips the step: alpha_j leaves S's support
            t = alpha[j]
            alpha[j] = 0.0
        else:
            t = step
            alpha[j] -= t
        alpha[i] += t
        grad += 2.0 * t * (Q[:, i] - Q[:, j])
        n_steps += 1


def active_set_simplex(Q, l, alpha, grad, tol, max_iter, free=None, shift=0.0):
    """Primal active-set (Newton) solver for the same core-set QP, warm-started.

    Beyond the papers (issue: a faster exact core-set solver).  SMO moves two coordinates at a
    time and converges slowly when K~ is ill-conditioned (large C: K~ = yy'(K + 1) + I/C); the
    active-set method instead solves the QP *exactly* on the free set F = {alpha > 0}:

        min_a  a'Q_FF a - l_F'a   s.t.  1'a = 1
        =>  2 Q_FF a - l_F = lam 1,   a = (u + lam v) / 2,   u = Q_FF^-1 l_F,  v = Q_FF^-1 1,
            lam = (2 - 1'u) / 1'v                                  (Cholesky of Q_FF)

    If that point has a negative entry, it steps as far as feasibility allows and drops the
    blocking coordinate; otherwise it checks the inactive coordinates (the MEB's "points outside
    the ball" of S) and lets the most violating one enter (i = argmin g, as SMO's first choice).
    It stops at the same gap rule as SMO:  max_{alpha>0} g - min g <= tol.

    ``alpha`` and ``grad`` are updated in place.  Returns ``(n_changes, gap)``, or ``None`` when
    Q_FF is not numerically positive definite (duplicate points under the hard MEB), in which
    case the caller falls back to SMO.  ``free`` (a list, updated in place) carries the free set
    from one call to the next in insertion order, as the fast engine keeps it together with an
    incrementally updated Cholesky factor; ``None`` starts from the support in ascending order.
    """
    from scipy.linalg import LinAlgError, cho_factor, cho_solve

    if free is None:
        free = [int(t) for t in np.flatnonzero(alpha > 0)]
    F = free
    n_changes = 0
    while True:
        # Newton step: the exact minimiser on the free set
        Q_FF = Q[np.ix_(F, F)]
        try:
            factor = cho_factor(Q_FF, lower=True)
        except LinAlgError:
            return None
        if np.any(np.diag(factor[0]) ** 2 <= PIVOT_RTOL * np.diag(Q_FF)):
            return None
        u = cho_solve(factor, l[F])
        v = cho_solve(factor, np.ones(len(F)))
        if not np.all(np.isfinite(u)) or v.sum() <= 0:
            return None
        lam = (2.0 - u.sum()) / v.sum()
        target = 0.5 * (u + lam * v)
        if abs(target.sum() - 1.0) > 1e-9:
            return None  # cancellation in lambda: the free-set system is too ill-conditioned
        target /= target.sum()  # remove the round-off left in 1'alpha = 1
        current = alpha[F]
        stationary = bool(np.all(target > 0))
        if stationary:
            alpha[F] = target
        else:
            # ratio test: the largest step s in [0, 1] that keeps alpha_F >= 0; the first blocking
            # coordinate (in free-set order) leaves F, and the Newton step is retried on the rest
            d = target - current
            shrinking = np.flatnonzero(d < 0)
            ratios = current[shrinking] / -d[shrinking]
            s = ratios.min()
            k = int(shrinking[np.flatnonzero(ratios <= s + TIE * s)[0]])
            alpha[F] = current + s * d
            alpha[F[k]] = 0.0
            del F[k]
        np.maximum(alpha, 0.0, out=alpha)
        grad[:] = 2.0 * Q[:, F] @ alpha[F] - l
        n_changes += 1
        i, gap = most_violating(grad, alpha, shift)
        if n_changes >= max_iter:
            return n_changes, gap
        if not stationary:
            continue
        # KKT check at the free-set optimum: is some inactive coordinate still violating?
        if gap <= tol:
            return n_changes, gap
        if alpha[i] > 0 or i in F:
            # the remaining gap lies within the free set, which was just solved exactly:
            # it is round-off, and another Newton step would reproduce it
            return n_changes, gap
        F.append(i)  # the most violating inactive coordinate enters with alpha_i = 0
