"""SSVR-SRS: sparse support vector regression built in the primal ([002]).

The model is f(x) = sum_{j in P} beta_j k(x, x_j) (002 eq. (10)) over a reduced set P of training
points, grown one basis function at a time (Table 1) to decrease the primal objective (8)

    L(beta) = sum_i l_{eps,Delta}(K_i beta - y_i) + lam beta' K beta

with the insensitive Huber loss (7).  :func:`ssvr_srs` is the loop of Table 1:

1. P = {}, Q = {1..n}, beta = 0;
2. select a new basis function s from Q (:func:`select_basis_function`): draw a random candidate
   subset O of Q (|O| = ``n_candidates``, 100 in the paper) and take the candidate with the largest
   normalised squared gradient (eqs. (14)-(17)); grow K_P, K_PP, the generalized Hessian H (23) and
   its Cholesky factor L by one row and column (Sec. 3.3: O(n m) for the new Hessian column, O(m^2)
   for the row of L);
3. re-solve the sub-problem (18) in beta_P by finite Newton (:func:`finite_newton`): sign vectors
   s, s_bar (19)-(20), active matrix W (21), gradient (22), Newton step (24) with an exact line search
   on the piecewise quadratic along the step; a change of W is applied to L as rank-one up/downdates
   (O(m^2) each) or by refactoring H;
4. stop at m = ``n_basis`` functions, else go to 2.

RSVM (Lee & Mangasarian, the paper's ref. [5]) is the same loop with ``selection='random'``: the
next basis function is a uniformly random unused point (the first of the random draw O that is not
numerically dependent on the basis) and the same primal solver refits beta_P.

No n x n matrix is formed: the state is the n x m block K_P of basis columns, K_PP, H and L.  Sparse
(CSR) inputs are kept sparse; only the candidates' kernel columns, KERNEL_BLOCK rows at a time, see
dense rows (:func:`kernel_columns`).

The loop and its numerics
-------------------------
The loop is written once, here.  Its numerics -- the kernel columns, the terms of the criterion
(16), the new rows of H and L, the Newton direction, the line search, the update of the residuals
and of L -- are the methods of an ops object (``ops_class``, as in the MEB engine): :class:`SSVROps`
in NumPy here, ``fastimpl._ssvr.FastSSVROps`` in C (fused SIMD candidate scoring, BLAS/LAPACK on
the factor).  Both hold the same state and follow the same rules, so the
same ``random_state`` selects the same basis in both:

* Random draws: :func:`draw_candidates` is the only consumer of the Generator (one ``rng.choice``
  per selection round, made by the loop).
* Ties: the selected candidate is the first one, in the order O was drawn, whose score is at least
  ``(1 - TIE_RTOL)`` times the best score; scores <= ``SCORE_FLOOR`` count as 0 (:func:`pick`).
* Dependency: a candidate whose new Cholesky pivot^2 is <= ``DEP_RTOL`` h_ss (it is numerically in
  the span of the current basis, e.g. a duplicate point) is discarded from Q for good and the next
  candidate of O is taken (:func:`pick_independent`); when all of O is dependent the loop stops
  (stop_reason 'no_candidates').
* W changes: rank-one updates of L while ``RANK1_RATIO c <= m`` (c changed points), else L is
  refactored from H, which is always maintained (:func:`finite_newton` decides, the ops apply).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.linalg import solve_triangular
from sklearn.exceptions import ConvergenceWarning

from .kernels import kernel_block, kernel_diag

#: near-ties in the selection criterion go to the first candidate in draw order
TIE_RTOL = 1e-10
#: normalised squared gradients (16) at or below this are rounding noise and count as 0
SCORE_FLOOR = 1e-12
#: a candidate with Cholesky pivot^2 <= DEP_RTOL * h_ss is numerically dependent on the basis
DEP_RTOL = 1e-12
#: first diagonal shift (relative to max diag H) when refactoring H fails to rounding
JITTER_RTOL = 1e-13
#: rank-one updates of L while RANK1_RATIO * (#changed points) <= m, else refactor from H
RANK1_RATIO = 16
#: finite Newton stops when the Newton decrement -grad'd is <= NEWTON_RTOL * max(L, 1)
NEWTON_RTOL = 1e-13
#: ... or when, on an unchanged piece of (18), a refinement step shrank the decrement by less than this
#: factor (the rounding floor of the gradient and of the factor L is reached)
REFINE_RATIO = 0.25
SELECTIONS = ("srs", "random")
#: ``delta='auto'`` (the estimator's default): Delta = epsilon + DELTA_SCALE * s, s = :func:`target_scale`
DELTA_SCALE = 3.0


def target_scale(y):
    """A robust scale s of the targets: 1.4826 MAD(y) (the standard deviation for Gaussian y), or the
    standard deviation when more than half of y is one value (MAD = 0).  Used by ``delta='auto'``.

    The loss (7) is measured in the targets' units, while lam multiplies beta'K beta, which scales as
    y^2 like the quadratic zone of the loss: with eps and Delta proportional to the scale of y, the
    problem (8) for c*y is c^2 times the problem for y, so beta (and f) scale with c and one lam serves
    every target scale.  002 Sec. 4 fixes Delta = 0.3 in absolute units (on [-1, 1]-scaled inputs),
    which is a tight Huber zone on targets of unit spread and a loose one on targets of spread 0.01.
    """
    y = np.asarray(y, dtype=np.float64)
    s = 1.4826 * float(np.median(np.abs(y - np.median(y))))
    return s if s > 0 else float(np.std(y))


def auto_delta(y, epsilon):
    """Delta of ``delta='auto'``: epsilon + DELTA_SCALE * :func:`target_scale` (always > epsilon, as (7) needs).

    With the default epsilon = 0 that is the Huber loss (002 eq. (7), case (1)) with its quadratic zone
    three robust standard deviations of y wide: quadratic (least squares, the best loss for the RMSE
    under Gaussian noise) on every point but gross outliers, whose influence stays bounded.
    """
    return float(epsilon) + DELTA_SCALE * target_scale(y)


# ----------------------------------------------------------------------------------------------
# the insensitive Huber loss (7) and the primal objective (8)
# ----------------------------------------------------------------------------------------------
def huber_loss(z, epsilon, delta):
    """l_{eps,Delta}(z) of 002 eq. (7), elementwise.

    0 for |z| <= eps, (|z| - eps)^2 for eps < |z| < Delta, (Delta - eps)(2|z| - Delta - eps) for
    |z| >= Delta.  ``delta`` may be ``inf`` (the insensitive quadratic loss).
    """
    a = np.abs(np.asarray(z, dtype=np.float64))
    out = np.zeros_like(a)
    quad = (a > epsilon) & (a < delta)
    out[quad] = (a[quad] - epsilon) ** 2
    lin = a >= delta
    out[lin] = (delta - epsilon) * (2.0 * a[lin] - delta - epsilon)
    return out


def huber_derivative(z, epsilon, delta):
    """d l_{eps,Delta}(z) / dz: the g_i of eq. (15) (sign(0) = 1 there; g = 0 at z = 0 anyway)."""
    z = np.asarray(z, dtype=np.float64)
    a = np.abs(z)
    sgn = np.where(z >= 0, 1.0, -1.0)
    out = np.zeros_like(z)
    quad = (a > epsilon) & (a < delta)
    out[quad] = 2.0 * sgn[quad] * (a[quad] - epsilon)
    lin = a >= delta
    out[lin] = 2.0 * sgn[lin] * (delta - epsilon)
    return out


def sign_vectors(r, epsilon, delta):
    """(s, s_bar, w): the sign vectors (19), (20) and the diagonal w_i = s_i^2 of the active matrix (21)."""
    s = np.where((r > epsilon) & (r < delta), 1.0, 0.0) - np.where((r < -epsilon) & (r > -delta), 1.0, 0.0)
    s_bar = np.where(r >= delta, 1.0, 0.0) - np.where(r <= -delta, 1.0, 0.0)
    return s, s_bar, s * s


def objective(r, beta, K_PP, lam, epsilon, delta):
    """L(beta_P) of eq. (18) (= (8) restricted to P) from the residuals r = K_P beta_P - y (eq. (12))."""
    return float(huber_loss(r, epsilon, delta).sum() + lam * (beta @ K_PP @ beta))


def gradient(K_P, K_PP, beta, r, lam, epsilon, delta):
    """Eq. (22): 2 K_P'W r - 2 eps K_P's + 2 (Delta - eps) K_P's_bar + 2 lam K_PP beta."""
    s, s_bar, w = sign_vectors(r, epsilon, delta)
    v = 2.0 * w * r - 2.0 * epsilon * s
    if np.isfinite(delta):
        v = v + 2.0 * (delta - epsilon) * s_bar
    return K_P.T @ v + 2.0 * lam * (K_PP @ beta)


def generalized_hessian(K_P, K_PP, r, lam, epsilon, delta):
    """Eq. (23): 2 K_P' W K_P + 2 lam K_PP."""
    _, _, w = sign_vectors(r, epsilon, delta)
    return 2.0 * (K_P.T * w) @ K_P + 2.0 * lam * K_PP


def primal_objective(K, beta, y, lam, epsilon, delta):
    """The full primal objective (8) for a (small) kernel matrix K: used by tests only."""
    return objective(K @ beta - y, beta, K, lam, epsilon, delta)


# ----------------------------------------------------------------------------------------------
# exact line search on the piecewise quadratic phi(t) = L(beta + t d)
# ----------------------------------------------------------------------------------------------
def line_search(r, u, a, b, lam, epsilon, delta):
    """argmin_t phi(t), phi(t) = sum_i l(r_i + t u_i) + lam (beta + t d)'K_PP(beta + t d), exactly.

    ``u = K_P d`` and ``a = beta'K_PP d``, ``b = d'K_PP d``.  phi'(t) = sum_i l'(r_i + t u_i) u_i +
    2 lam (a + t b) is continuous, non-decreasing and piecewise linear with breakpoints where
    r_i + t u_i crosses +-eps or +-Delta; its slope on a piece is 2 lam b + sum 2 u_i^2 over the points
    in the quadratic zone eps < |r_i + t u_i| < Delta.  Every boundary crossing toggles a point between
    a quadratic and a non-quadratic zone.  We sort the breakpoints t > 0 and walk them until phi'
    changes sign; the root on that piece is the exact minimiser (the step t of eq. (24)).
    """
    dphi = float(huber_derivative(r, epsilon, delta) @ u + 2.0 * lam * a)
    if dphi >= 0.0:
        return 0.0
    # zone just after t = 0 (a point sitting on a boundary is classified by its direction of motion)
    ar = np.abs(r)
    out = (r * u > 0) | ((r == 0) & (u != 0))          # moving away from the tube centre
    quad = ((ar > epsilon) & (ar < delta)) | ((ar == epsilon) & out & (ar < delta)) | \
        ((ar == delta) & ~out & (u != 0))
    slope = float(2.0 * (u[quad] ** 2).sum() + 2.0 * lam * b)
    # breakpoints: t = (c - r_i) / u_i for the boundaries c = -eps, +eps (side -1, +1) and -Delta,
    # +Delta.  Moving outwards (sign u_i = side) across an eps boundary enters the quadratic zone,
    # across a Delta boundary leaves it; inwards the opposite.  (With eps = 0 the two boundaries
    # -0 and +0 coincide and their changes cancel, as they should.)
    boundaries = [(-epsilon, -1.0, True), (epsilon, 1.0, True)]
    if np.isfinite(delta):
        boundaries += [(-delta, -1.0, False), (delta, 1.0, False)]
    nz = np.flatnonzero(u != 0)
    ts, dslope = [], []
    for c, side, is_eps in boundaries:
        t = (c - r[nz]) / u[nz]
        keep = t > 0
        i = nz[keep]
        outward = np.sign(u[i]) == side
        enters = outward if is_eps else ~outward
        ts.append(t[keep])
        dslope.append(np.where(enters, 2.0, -2.0) * u[i] ** 2)
    ts = np.concatenate(ts)
    dslope = np.concatenate(dslope)
    order = np.argsort(ts, kind="stable")
    t_prev = 0.0
    for t_k, ds in zip(ts[order], dslope[order]):
        val = dphi + slope * (t_k - t_prev)
        if val >= 0.0:
            break
        dphi, t_prev = val, t_k
        slope += ds
    return t_prev - dphi / slope


# ----------------------------------------------------------------------------------------------
# Cholesky factor maintenance (Sec. 3.3)
# ----------------------------------------------------------------------------------------------
def chol_append(L, h, h_ss):
    """Row appended to the lower Cholesky factor L (m x m) of H for H' = [[H, h], [h', h_ss]].

    Returns (l, pivot^2): l = L^{-1} h and pivot^2 = h_ss - l'l (O(m^2)).
    """
    if L.shape[0] == 0:
        return np.zeros(0), float(h_ss)
    l = solve_triangular(L, h, lower=True, check_finite=False)
    return l, float(h_ss - l @ l)


def chol_rank1(L, x, sign):
    """In place: L L' + sign x x' = L_new L_new' (sign +1 update, -1 downdate); False if the
    downdate loses positive definiteness (the caller then refactors)."""
    x = x.copy()
    m = L.shape[0]
    for k in range(m):
        lkk = L[k, k]
        r2 = lkk * lkk + sign * x[k] * x[k]
        if r2 <= 0.0:
            return False
        rkk = np.sqrt(r2)
        c, s = rkk / lkk, x[k] / lkk
        L[k, k] = rkk
        if k + 1 < m:
            L[k + 1:, k] = (L[k + 1:, k] + sign * s * x[k + 1:]) / c
            x[k + 1:] = c * x[k + 1:] - s * L[k + 1:, k]
    return True


def cholesky(H):
    """Lower Cholesky factor of the generalized Hessian (23).

    H >= 2 lam K_PP is positive definite in exact arithmetic, but after W loses most active points a
    nearly dependent basis can leave it singular to rounding.  Then L factors H + tau I with
    tau = JITTER_RTOL max diag(H), increased tenfold until it succeeds: the Newton direction is then
    that of a slightly damped model (still a descent direction; the exact line search keeps L
    monotone), and the objective itself is unchanged.
    """
    tau = 0.0
    scale = float(np.max(np.diag(H))) if H.size else 1.0
    for _ in range(12):
        try:
            return np.linalg.cholesky(H + tau * np.eye(H.shape[0]) if tau else H)
        except np.linalg.LinAlgError:
            tau = JITTER_RTOL * scale if tau == 0.0 else 10.0 * tau
    raise np.linalg.LinAlgError("the generalized Hessian (23) is not positive definite")


# ----------------------------------------------------------------------------------------------
# kernel columns
# ----------------------------------------------------------------------------------------------
#: input rows per dense block when the kernel columns of sparse (CSR) inputs are computed
KERNEL_BLOCK = 4096


def kernel_columns(spec, X, XO):
    """The n x |O| kernel columns [k(x_i, o_j)] of the candidates, with the distances of the Gaussian
    and Laplacian kernels summed from coordinate differences.  Sparse (CSR) X or XO: the same columns
    from dense blocks of KERNEL_BLOCK rows of X (so the values are the dense inputs' own).

    :func:`refimpl.kernels.kernel_block` expands ||a - b||^2 = ||a||^2 + ||b||^2 - 2 a'b, whose
    cancellation leaves an absolute error ~ 1e-16 (||a||^2 + ||b||^2) in the squared distance.  For
    the Gaussian that is a relative error of gamma times that in k, but the Laplacian takes its square
    root: at (or near) zero distance it becomes ~ 1e-8 -- k(x_s, x_s) came out as 1 - 2e-8 in column s
    while K_PP[s, s] = k(x_s, x_s) = 1 (:func:`kernel_diag`), so the reference solved a problem with a
    perturbed, inconsistent K_P and its objectives were off by ~1e-7 relative (the C ops compute the
    differences directly).  Summing (x_it - o_jt)^2 feature by feature is exact at zero distance,
    accurate to rounding elsewhere, and keeps memory at n x |O|.
    """
    if sp.issparse(XO):
        XO = XO.toarray()
    if sp.issparse(X):
        return np.vstack([kernel_columns(spec, X[i:i + KERNEL_BLOCK].toarray(), XO)
                          for i in range(0, X.shape[0], KERNEL_BLOCK)])
    if not spec.radial:          # (normalize is a no-op for the radial kernels)
        return kernel_block(spec, X, XO)
    sq = np.zeros((X.shape[0], XO.shape[0]))
    for t in range(X.shape[1]):
        diff = X[:, t, None] - XO[None, :, t]
        sq += diff * diff
    if spec.name == "laplacian":
        np.sqrt(sq, out=sq)
    sq *= -spec.gamma
    return np.exp(sq, out=sq)


# ----------------------------------------------------------------------------------------------
# basis selection (eqs. (14)-(17)) and the shared random draws
# ----------------------------------------------------------------------------------------------
def draw_candidates(rng, available, n_candidates):
    """The random subset O of Q (eq. (17)): ``n_candidates`` distinct unused points in draw order.

    ``available`` is the boolean mask of Q.  When |Q| <= n_candidates, O = Q in index order and no
    random number is used.
    """
    idx = np.flatnonzero(available)
    if len(idx) <= n_candidates:
        return idx
    return rng.choice(idx, size=n_candidates, replace=False)


def criterion_terms(g, beta, K_O, K_PO, lam):
    """(g_bar'K_bar_j, |K_bar_j|^2) of eq. (16) for every candidate column j of ``K_O``.

    g_bar = [g; 2 lam beta_P], K_bar_j = [K_j; K_Pj]; ``K_O`` is n x |O|, ``K_PO`` = K_O[P] (|P| x |O|).
    """
    num = g @ K_O + 2.0 * lam * (beta @ K_PO)
    return num, (K_O * K_O).sum(axis=0) + (K_PO * K_PO).sum(axis=0)


def srs_scores(num, knorm2, g, beta, lam):
    """The normalised squared gradient (16), (g_bar'K_bar_j)^2 / (|g_bar|^2 |K_bar_j|^2), from the
    terms of :func:`criterion_terms`; a zero denominator scores 0."""
    gg = float(g @ g + 4.0 * lam * lam * (beta @ beta))
    den = gg * knorm2
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num * num / np.where(den > 0, den, 1.0), 0.0)


def pick(scores, excluded):
    """Index into ``scores`` of the selected candidate: the first (in draw order) not ``excluded``
    with score >= (1 - TIE_RTOL) * the best remaining score; -1 when all are excluded.

    Scores <= SCORE_FLOOR (a cosine below 1e-6 between g_bar and K_bar_j: no descent direction beyond
    the solver's own tolerance, e.g. when beta_P is already optimal for (8)) count as 0, so that
    rounding noise does not decide: the first candidate in draw order is taken.
    """
    s = np.where(excluded, -np.inf, np.where(scores > SCORE_FLOOR, scores, 0.0))
    best = s.max() if len(s) else -np.inf
    if not np.isfinite(best):
        return -1
    return int(np.flatnonzero(s >= best * (1.0 - TIE_RTOL) if best > 0 else s >= best)[0])


def pick_independent(scores, O, available, pivot):
    """The candidates of O in the order of :func:`pick` until one is independent of the basis.

    Each candidate tried leaves Q (``available``) for good.  ``pivot(j)`` gives (pivot^2, scale) of
    candidate j's new Cholesky row; pivot^2 <= DEP_RTOL * scale (or scale <= 0) means numerically
    dependent: rejected, and the next one is tried.  Returns (j, number rejected), j = -1 when every
    candidate of O is dependent.  (Shared by SSVR-SRS and RSS, :mod:`refimpl.baselines.rss`.)
    """
    excluded = np.zeros(len(O), dtype=bool)
    rejected = 0
    while True:
        j = pick(scores, excluded)
        if j < 0:
            return -1, rejected
        available[O[j]] = False
        piv2, scale = pivot(j)
        if not (piv2 <= DEP_RTOL * scale or scale <= 0):
            return j, rejected
        excluded[j] = True
        rejected += 1


# ----------------------------------------------------------------------------------------------
# the numerics of the loop, in NumPy
# ----------------------------------------------------------------------------------------------
class SSVROps:
    """The state of SSVR-SRS and the numeric steps :func:`ssvr_srs` asks of it (NumPy reference).

    State: the m basis columns K_P (n x m), K_PP, the generalized Hessian H (23) and its lower
    Cholesky factor L, beta_P, the residuals r = K_P beta_P - y (12) and the sign vectors (19)-(21).
    ``fastimpl._ssvr.FastSSVROps`` has the same methods, in C.

    Selection (step 2): :meth:`load_candidates` (the candidates O of a round), :meth:`criterion_terms`
    (eq. (16)), :meth:`cholesky_row` (the new row of H and L of candidate j), :meth:`append`.
    Finite Newton (step 3): :meth:`newton_direction` (eqs. (22)-(24)), :meth:`step_length` (the exact
    line search), :meth:`take_step`, :meth:`update_factor` (W changes, Sec. 3.3).
    """

    def __init__(self, X, y, spec, n_basis, lam, epsilon, delta, n_jobs=None):
        """Empty basis, beta = 0 (Table 1, step 1), room for ``n_basis`` functions; ``n_jobs`` is part of
        the interface (the C ops' threads) and ignored here."""
        n = X.shape[0]
        self.X, self.y, self.spec = X, y, spec
        self.lam, self.epsilon, self.delta = lam, epsilon, delta
        self.m = 0
        self.basis = []
        self.K_P = np.zeros((n, n_basis), order="F")
        self.K_PP = np.zeros((n_basis, n_basis))
        self.H = np.zeros((n_basis, n_basis))
        self.L = np.zeros((n_basis, n_basis))
        self._beta = np.zeros(n_basis)
        self.r = -y.copy()                                   # residuals (12) at beta = 0
        self.s, self.s_bar, self.w = sign_vectors(self.r, epsilon, delta)
        # passed from one call to the next: the round's candidates O and their kernel columns, the
        # accepted candidate's new rows, the Newton direction d and u = K_P d, the points whose w changed
        self._O = self._K_O = self._new = self._d = self._u = None
        self._changed = np.zeros(0, dtype=np.intp)

    # -- the state
    def _views(self):
        m = self.m
        return self.K_P[:, :m], self.K_PP[:m, :m], self.H[:m, :m], self.L[:m, :m], self._beta[:m]

    def beta(self):
        """A copy of beta_P."""
        return self._beta[:self.m].copy()

    def objective(self):
        """L(beta_P) of eq. (18)."""
        _, K_PP, _, _, beta = self._views()
        return objective(self.r, beta, K_PP, self.lam, self.epsilon, self.delta)

    def loss_derivative(self):
        """g of eq. (15) at the current residuals."""
        return huber_derivative(self.r, self.epsilon, self.delta)

    # -- step 2: candidates and the new basis function
    def load_candidates(self, O):
        """The kernel columns K_O (n x |O|) of the round's candidates."""
        self._O = O
        self._K_O = kernel_columns(self.spec, self.X, self.X[O])

    def criterion_terms(self, g):
        """(g_bar'K_bar_j, |K_bar_j|^2) of eq. (16) for the loaded candidates."""
        return criterion_terms(g, self._beta[:self.m], self._K_O, self._K_O[self.basis], self.lam)

    def cholesky_row(self, j):
        """Candidate j's new Hessian column [h; h_ss] (O(n m)) and Cholesky row [l, pivot] (O(m^2)), kept
        for :meth:`append`; returns (pivot^2, h_ss)."""
        K_P, _, _, L, _ = self._views()
        cand = int(self._O[j])
        k = self._K_O[:, j]
        k_ss = float(kernel_diag(self.spec, self.X[cand:cand + 1])[0])
        h = 2.0 * (K_P.T @ (self.w * k)) + 2.0 * self.lam * k[self.basis]
        h_ss = 2.0 * float(self.w @ (k * k)) + 2.0 * self.lam * k_ss
        l, piv2 = chol_append(L, h, h_ss)
        self._new = (cand, k, k_ss, h, h_ss, l, piv2)
        return piv2, h_ss

    def append(self):
        """Grow K_P, K_PP, H and L by the candidate of the last :meth:`cholesky_row` (beta_s = 0)."""
        cand, k, k_ss, h, h_ss, l, piv2 = self._new
        m = self.m
        self.K_P[:, m] = k
        self.K_PP[:m, m] = self.K_PP[m, :m] = k[self.basis]
        self.K_PP[m, m] = k_ss
        self.H[:m, m] = self.H[m, :m] = h
        self.H[m, m] = h_ss
        self.L[m, :m] = l
        self.L[m, m] = np.sqrt(piv2)
        self.basis.append(cand)
        self.m = m + 1

    # -- step 3: finite Newton on the sub-problem (18)
    def newton_direction(self):
        """The Newton direction d = -H^{-1} grad (24) with the gradient (22); returns (decrement -grad'd, L)."""
        K_P, K_PP, _, L, beta = self._views()
        v = huber_derivative(self.r, self.epsilon, self.delta)   # = 2Wr - 2 eps s + 2 (Delta - eps) s_bar
        grad = K_P.T @ v + 2.0 * self.lam * (K_PP @ beta)        # eq. (22)
        z = solve_triangular(L, -grad, lower=True, check_finite=False)
        self._d = solve_triangular(L.T, z, lower=False, check_finite=False)
        return float(-(grad @ self._d)), self.objective()

    def step_length(self):
        """The exact minimiser t >= 0 of L(beta + t d) (:func:`line_search`)."""
        K_P, K_PP, _, _, beta = self._views()
        self._u = K_P @ self._d
        Kd = K_PP @ self._d
        return line_search(self.r, self._u, float(beta @ Kd), float(self._d @ Kd), self.lam, self.epsilon,
                           self.delta)

    def take_step(self, t):
        """beta += t d, r += t K_P d and the new sign vectors (19)-(21); returns (whether s or s_bar
        changed, the number of points whose w_i changed)."""
        self._beta[:self.m] += t * self._d
        self.r += t * self._u
        s_new, s_bar_new, w_new = sign_vectors(self.r, self.epsilon, self.delta)
        self._changed = np.flatnonzero(w_new != self.w)
        zones_changed = not (np.array_equal(s_new, self.s) and np.array_equal(s_bar_new, self.s_bar))
        self.s, self.s_bar, self.w = s_new, s_bar_new, w_new
        return zones_changed, len(self._changed)

    def update_factor(self, rank_one):
        """Apply the last step's change of W to H (always) and to L: rank-one up/downdates with
        ``rank_one`` (a refactorisation if one loses positive definiteness), else a refactorisation."""
        K_P, _, H, L, _ = self._views()
        changed = self._changed
        sign = np.where(self.w[changed] > 0, 1.0, -1.0)
        rows = K_P[changed]                                  # c x m
        H += 2.0 * (rows.T * sign) @ rows
        if rank_one and all(chol_rank1(L, np.sqrt(2.0) * x, sg) for x, sg in zip(rows, sign)):
            return
        L[:] = cholesky(H)


# ----------------------------------------------------------------------------------------------
# the SSVR-SRS / RSVM driver (Table 1)
# ----------------------------------------------------------------------------------------------
@dataclass
class SSVRResult:
    basis: np.ndarray                 # indices P of the basis functions, in order of selection
    beta: np.ndarray                  # beta_P
    objective_history: np.ndarray     # L(beta_P) after each basis function (eq. (18))
    newton_iterations: np.ndarray     # finite Newton iterations spent after each addition
    converged: bool = True            # every finite Newton solve met its stopping rule
    n_rejected: int = 0               # candidates discarded as numerically dependent
    stop_reason: str = "n_basis"
    info: dict = field(default_factory=dict)


def validate_ssvr_params(n, n_basis, lam, epsilon, delta, n_candidates, selection, tol, max_newton):
    import numbers

    def real(name, v):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"{name} must be a real number, got {type(v).__name__}")
        if np.isnan(v):
            raise ValueError(f"{name} must not be NaN")
        return float(v)

    def integer(name, v):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError(f"{name} must be an integer, got {type(v).__name__}")
        return int(v)

    n_basis = integer("n_basis", n_basis)
    if n_basis < 1 or n_basis > n:
        raise ValueError(f"n_basis must be in [1, n_samples={n}], got {n_basis}")
    lam = real("lam", lam)
    if not np.isfinite(lam) or lam <= 0:
        raise ValueError(f"lam must be positive and finite, got {lam}")
    epsilon = real("epsilon", epsilon)
    if not np.isfinite(epsilon) or epsilon < 0:
        raise ValueError(f"epsilon must be >= 0 and finite, got {epsilon}")
    delta = real("delta", delta)
    if delta <= epsilon:
        raise ValueError(f"delta must be > epsilon (the loss (7) needs Delta > eps), got delta={delta}, "
                         f"epsilon={epsilon}")
    n_candidates = integer("n_candidates", n_candidates)
    if n_candidates < 1:
        raise ValueError(f"n_candidates must be >= 1, got {n_candidates}")
    if selection not in SELECTIONS:
        raise ValueError(f"selection must be one of {SELECTIONS}, got {selection!r}")
    tol = real("tol", tol)
    if not np.isfinite(tol) or tol < 0:
        raise ValueError(f"tol must be >= 0 and finite, got {tol}")
    max_newton = integer("max_newton", max_newton)
    if max_newton < 1:
        raise ValueError(f"max_newton must be >= 1, got {max_newton}")
    return n_basis, lam, epsilon, delta, n_candidates, tol, max_newton


def ssvr_srs(X, y, spec, n_basis, lam=1e-2, epsilon=0.1, delta=0.3, n_candidates=100, selection="srs",
             tol=0.0, max_newton=50, random_state=None, callback=None, n_jobs=None, ops_class=SSVROps,
             warn_rank=True):
    """SSVR-SRS (002 Table 1) or RSVM (``selection='random'``) on (X, y) with kernel ``spec``.

    Parameters follow the paper: ``lam`` = lambda of (8), ``epsilon`` and ``delta`` = eps and Delta
    of the loss (7), ``n_candidates`` = |O| (17), ``n_basis`` = m.  The loop stops at ``n_basis``
    functions, when the relative decrease of L from the last function is <= ``tol``, when no
    usable candidate is left, or when ``callback(P, beta_P)``, called after every addition, returns
    True (stop_reason 'callback': how :class:`HoldoutRule` stops the growth of ``n_basis='auto'``).
    ``ops_class`` implements the numerics (:class:`SSVROps`, or ``fastimpl._ssvr.FastSSVROps``);
    ``n_jobs`` is passed to it (the NumPy ops ignore it).  X may be dense or sparse (kept CSR).
    ``warn_rank=False`` drops the warning of a stop at the kernel's numerical rank ('no_candidates'),
    which ends the growth of ``n_basis='auto'`` normally.
    """
    from .meb import make_rng

    X = sp.csr_matrix(X, dtype=np.float64) if sp.issparse(X) else np.ascontiguousarray(X, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    n = X.shape[0]
    n_basis, lam, epsilon, delta, n_candidates, tol, max_newton = validate_ssvr_params(
        n, n_basis, lam, epsilon, delta, n_candidates, selection, tol, max_newton)
    rng = make_rng(random_state)
    ops = ops_class(X, y, spec, n_basis, lam, epsilon, delta, n_jobs)          # step 1: P = {}, beta = 0
    available = np.ones(n, dtype=bool)                                         # Q
    basis, history, newton_its = [], [], []
    converged, n_rejected, stop = True, 0, "n_basis"
    L_prev = ops.objective()
    while len(basis) < n_basis:                                                # step 4
        g = ops.loss_derivative()                                              # eq. (15)
        if selection == "srs" and not (g.any() or ops.beta().any()):
            stop = "zero_gradient"                          # g_bar = 0: beta is optimal for (8)
            break
        s, rejected = select_basis_function(ops, rng, available, g, lam, n_candidates, selection)  # step 2
        n_rejected += rejected
        if s < 0:
            stop = "no_candidates"
            break
        basis.append(s)
        its, ok = finite_newton(ops, max_newton)                               # step 3
        converged &= ok
        newton_its.append(its)
        L_now = ops.objective()
        history.append(L_now)
        if callback is not None and callback(np.array(basis), ops.beta()) is True:
            stop = "callback"                               # the caller's rule (e.g. HoldoutRule) stops here
            break
        if tol > 0 and L_prev - L_now <= tol * L_prev:
            stop = "tol"
            break
        L_prev = L_now
    _warn_if_stopped_early(converged, max_newton, stop if warn_rank else "", len(basis), n_basis)
    return SSVRResult(basis=np.array(basis, dtype=np.intp), beta=ops.beta(), objective_history=np.array(history),
                      newton_iterations=np.array(newton_its, dtype=np.intp), converged=converged,
                      n_rejected=n_rejected, stop_reason=stop)


def select_basis_function(ops, rng, available, g, lam, n_candidates, selection):
    """Step 2 of Table 1: draw O from Q, pick by the criterion (16)-(17) (or the first draw for RSVM)
    the best candidate that is not numerically dependent on the basis, and append it to the basis.

    Returns (its index s, or -1 when every candidate of O is dependent, number of candidates rejected).
    """
    O = draw_candidates(rng, available, n_candidates)
    if not len(O):
        return -1, 0
    ops.load_candidates(O)
    if selection == "srs":
        num, knorm2 = ops.criterion_terms(g)
        scores = srs_scores(num, knorm2, g, ops.beta(), lam)
    else:
        scores = np.ones(len(O))
    j, rejected = pick_independent(scores, O, available, ops.cholesky_row)
    if j < 0:
        return -1, rejected
    ops.append()                                            # Sec. 3.3: K_s, the Hessian column, the row of L
    return int(O[j]), rejected


def finite_newton(ops, max_newton):
    """Step 3 of Table 1: finite Newton on the sub-problem (18), warm-started from the current beta_P.

    Each iteration takes the Newton step (24) with the exact step length, then applies the change of
    the active matrix W (21) to the Cholesky factor: rank-one updates while RANK1_RATIO c <= m (c
    changed points), else a refactorisation.  Stops when the Newton decrement -grad'd is
    <= NEWTON_RTOL max(L, 1).

    A step that leaves the sign vectors (19)-(20) unchanged ends on the piece where the quadratic
    model is exact: in exact arithmetic beta is then optimal (the finite termination of finite
    Newton).  In floating point the step solved with L L' = H + E, E the rounding of the appends and
    rank-one updates of L (and of H), is off by ~ cond(H) |E| / |H| relative: 0.1 at cond(H) ~ 1e14
    (small lam, many basis functions), which left L(beta) up to 1e-7 relative above the minimum
    of (18).  So the solve goes on from there as iterative refinement on the fixed piece (each step
    cuts the decrement by ~ (cond(H) |E| / |H|)^2) until the decrement test holds, or until a step on
    an unchanged piece shrinks the decrement by less than REFINE_RATIO: the rounding floor, where
    further steps cannot help and beta is optimal to rounding.  Returns (iterations, converged).
    """
    prev, same_piece = np.inf, False
    for it in range(1, max_newton + 1):
        decrement, L_val = ops.newton_direction()
        if decrement <= NEWTON_RTOL * max(L_val, 1.0) or (same_piece and decrement > REFINE_RATIO * prev):
            return it - 1, True
        zones_changed, n_changed = ops.take_step(ops.step_length())
        if n_changed:
            ops.update_factor(rank_one=RANK1_RATIO * n_changed <= ops.m)
        prev, same_piece = decrement, not zones_changed
    return max_newton, False


def _warn_if_stopped_early(converged, max_newton, stop, m, n_basis):
    if not converged:
        warnings.warn(f"finite Newton reached max_newton={max_newton} iterations before its stopping rule "
                      "in at least one sub-problem", ConvergenceWarning)
    if stop == "no_candidates":
        warnings.warn(f"SSVR-SRS stopped at {m} < n_basis={n_basis} basis functions: every candidate of the "
                      "last draw was numerically dependent on the basis (the kernel's numerical rank is "
                      "reached; a narrower kernel or fewer basis functions avoids this)", UserWarning)


# ----------------------------------------------------------------------------------------------
# n_basis='auto' / lam='auto': the hold-out rule (beyond the paper)
# ----------------------------------------------------------------------------------------------
#: the lam grid of ``lam='auto'``: 1e-4 .. 10 in half decades
AUTO_LAMS = tuple(10.0 ** (k / 2) for k in range(-8, 3))
#: lam of the growth on the fit part when ``lam='auto'`` (the selection depends on lam only weakly)
AUTO_LAM_GROW = 1e-2
#: the largest basis ``n_basis='auto'`` grows
AUTO_MAX_BASIS = 400
#: basis sizes at which the rule scores the lam path (and the last size grown)
AUTO_CHECKPOINTS = (25, 50, 75, 100, 150, 200, 300, 400)
#: the hold-out: this fraction of the rows, at most AUTO_HOLDOUT_MAX of them
AUTO_HOLDOUT, AUTO_HOLDOUT_MAX = 0.2, 2000
#: a checkpoint counts as better when its hold-out MSE is below the best by more than AUTO_TOL Var(y_V)
AUTO_TOL = 1e-3
#: growth stops at the first checkpoint m >= max(AUTO_MIN_BASIS, AUTO_PATIENCE m_best)
AUTO_PATIENCE, AUTO_MIN_BASIS = 2.0, 100
#: the dense alternative of ``n_basis='auto'`` (kernel ridge with every row a basis function,
#: :func:`kernel_ridge_mse`) is scored when the growth stopped on a flat hold-out curve and the set has at most
#: AUTO_DENSE_MAX_ROWS rows (its fit is one Cholesky factorisation of the n x n kernel matrix) ...
AUTO_DENSE_MAX_ROWS = 8192
#: ... and the grown basis leaves more than AUTO_DENSE_RESIDUAL of the kernel's trace on the fit rows unspanned
#: (:meth:`HoldoutRule.nystrom_residual`) ...
AUTO_DENSE_RESIDUAL = 0.1
#: ... and kept when its hold-out MSE is below the sparse basis's best by more than AUTO_DENSE_GAIN Var(y_V)
AUTO_DENSE_GAIN = 1e-2


@dataclass
class ValidationPath:
    """The hold-out scores of ``n_basis='auto'`` / ``lam='auto'`` (:func:`ssvr_auto`): ``mse[k, j]`` is the
    hold-out mean squared error of the least-squares fit of the first ``n_basis[k]`` functions at
    ``lam[j]``; when :func:`ssvr_auto` scored the dense alternative, a last row with ``n_basis[-1] = n_fit``
    holds kernel ridge on every fit row (inf at the lams not scored); ``n_fit`` and ``n_val`` rows fitted and
    held out.  Empty (no rows held out) for a fit with both given."""
    n_basis: np.ndarray
    lam: np.ndarray
    mse: np.ndarray
    n_fit: int
    n_val: int


def holdout_split(n, rng):
    """(fit rows F, hold-out rows V) of the auto rule: a random AUTO_HOLDOUT of the n rows (at least one,
    at most AUTO_HOLDOUT_MAX) from one ``rng.permutation``, each part in increasing row order."""
    n_val = min(max(int(round(AUTO_HOLDOUT * n)), 1), AUTO_HOLDOUT_MAX)
    perm = rng.permutation(n)
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


def ridge_path_mse(G, B, c, K_val, y_val, lams):
    """Hold-out MSEs of the least-squares fits ``beta(lam) = (G + lam B)^{-1} c`` for every lam, with
    G = K_FP'K_FP, B = K_PP and c = K_FP'y_F: the objective (8) with the quadratic loss on the basis P.

    One generalized eigendecomposition G v = mu B v (V'BV = I) gives every lam at O(m) more:
    beta(lam) = V (mu + lam)^{-1} V'c.  B is the Gram matrix of the basis, positive definite but possibly
    ill-conditioned: a diagonal shift of 1e-10 max diag(B) (raised tenfold while the factorisation fails)
    keeps the eigensolver's Cholesky factor of B defined.
    """
    from scipy.linalg import LinAlgError, eigh
    m = len(c)
    shift = 1e-10 * max(float(np.max(np.diag(B))), np.finfo(float).tiny)
    for _ in range(8):
        try:
            mu, V = eigh(G, B + shift * np.eye(m), check_finite=False)
            break
        except LinAlgError:
            shift *= 10.0
    else:
        raise np.linalg.LinAlgError("the basis Gram matrix K_PP is not positive definite")
    a = V.T @ c
    P = K_val @ V
    mu = np.maximum(mu, 0.0)
    return np.array([float(np.mean((y_val - P @ (a / (mu + lam))) ** 2)) for lam in lams])


def _dense_block(spec, A, B=None):
    """``kernel_block(spec, A, B)`` (B None: A's own block) for the dense alternative's n x n solves: the Gaussian
    kernel on dense rows by one product A B' (:func:`refimpl.kernels.radial_block_by_product`; its ~1e-16 |a|^2
    cancellation is nothing against the lam these solves add, where cdist's coordinate differences took 1.7 s
    of puma32h's 6.9 s fit, 6,553 x 32).  Other kernels (the Laplacian's square root would turn the
    cancellation into ~1e-8) and sparse rows: kernel_block."""
    from .kernels import radial_block_by_product
    if spec.name != "rbf" or spec.lookup or not (isinstance(A, np.ndarray) and (B is None or isinstance(B, np.ndarray))):
        return kernel_block(spec, A, A if B is None else B)
    return radial_block_by_product(spec, A, B)


def kernel_ridge_mse(spec, X_fit, y_fit, X_val, y_val, lam):
    """Hold-out MSE of kernel ridge on the fit rows: alpha = (K_FF + lam I)^{-1} y_F (:func:`kernel_ridge`),
    f(x) = k(x, X_F)'alpha.

    That is the least-squares fit of :func:`ridge_path_mse` with every fit row a basis function (P = F:
    (K_FF^2 + lam K_FF) beta = K_FF y_F gives beta = alpha), solved by one Cholesky factorisation of
    K_FF + lam I (|F|^3 / 3 flops, no K_FP'K_FP product).  inf when the factorisation fails.
    """
    from scipy.linalg import LinAlgError
    try:
        alpha = kernel_ridge(X_fit, y_fit, spec, lam)
    except LinAlgError:
        return np.inf
    return float(np.mean((y_val - _dense_block(spec, X_val, X_fit) @ alpha) ** 2))


def kernel_ridge(X, y, spec, lam):
    """beta = (K + lam I)^{-1} y on every row of X (the dense model of ``n_basis='auto'``): the minimiser of (8)
    with the quadratic loss over the basis of all rows, by one Cholesky factorisation (LinAlgError when
    K + lam I is not numerically positive definite)."""
    from scipy.linalg import cho_factor, cho_solve
    A = _dense_block(spec, X)
    A[np.diag_indices_from(A)] += lam
    return cho_solve(cho_factor(A, lower=True, overwrite_a=True, check_finite=False), y, check_finite=False)


class HoldoutRule:
    """The callback of :func:`ssvr_srs` that scores the growing basis on a hold-out and stops it.

    The growth runs on the fit rows F; after each addition the rule computes the new basis function's
    kernel columns on F and on the hold-out rows V (NumPy, :func:`kernel_columns`, so both
    implementations score the same numbers for the same basis).  At the checkpoints it scores every
    lam of ``lams`` by :func:`ridge_path_mse` on the current basis, and records the best
    (m, lam, MSE).  With ``stop`` (``n_basis='auto'``) it returns True -- the loop stops -- at the first
    checkpoint m >= max(AUTO_MIN_BASIS, AUTO_PATIENCE m_best), m_best the checkpoint with the best MSE,
    a checkpoint counting as better only when it lowers the best MSE by more than AUTO_TOL Var(y_V)
    (a hold-out of a few hundred rows moves by that much by chance; larger bases must earn their cost).
    """

    def __init__(self, spec, X_fit, y_fit, X_val, y_val, lams, checkpoints, stop):
        self.spec, self.X_fit, self.y_fit, self.X_val, self.y_val = spec, X_fit, y_fit, X_val, y_val
        self.lams = tuple(float(v) for v in lams)
        self.checkpoints = set(int(c) for c in checkpoints)
        self.stop = stop
        self.tol = AUTO_TOL * float(np.var(y_val))
        m_max = max(self.checkpoints)                 # the basis columns on F and on V, one per addition
        self._K_fit = np.empty((X_fit.shape[0], m_max), order="F")
        self._K_val = np.empty((X_val.shape[0], m_max), order="F")
        self.path = []                       # (m, hold-out MSE per lam)
        self.best = None                     # (mse, m, lam)
        self.stopped = False                 # whether the rule stopped the growth (a flat curve)

    def __call__(self, basis, beta):
        s, m = int(basis[-1]), len(basis)
        self._K_fit[:, m - 1] = kernel_columns(self.spec, self.X_fit, self.X_fit[s:s + 1])[:, 0]
        self._K_val[:, m - 1] = kernel_columns(self.spec, self.X_val, self.X_fit[s:s + 1])[:, 0]
        if m not in self.checkpoints:
            return False
        self.score(basis)
        self.stopped = self.stop and m >= max(AUTO_MIN_BASIS, AUTO_PATIENCE * self.best[1])
        return self.stopped

    def score(self, basis):
        """Score the lam path on the first len(basis) functions (once per size)."""
        m = len(basis)
        if self.path and self.path[-1][0] == m:
            return
        K_F, K_V = self._K_fit[:, :m], self._K_val[:, :m]
        mse = ridge_path_mse(K_F.T @ K_F, K_F[np.asarray(basis)], K_F.T @ self.y_fit, K_V, self.y_val, self.lams)
        self.path.append((m, mse))
        j = int(np.argmin(mse))
        if self.best is None or mse[j] < self.best[0] - self.tol:
            self.best = (float(mse[j]), m, self.lams[j])

    def nystrom_residual(self, basis):
        """The fraction of the kernel's trace on the fit rows that the first len(basis) functions leave out:
        sum_i (k(x_i, x_i) - k_P(x_i)'K_PP^{-1} k_P(x_i)) / sum_i k(x_i, x_i) over F, the trace of the residual
        of the Nystrom approximation K_FP K_PP^{-1} K_PF of K_FF (O(|F| m^2)).  Kernel ridge on every fit row
        differs from the least-squares fits of the basis only in those directions."""
        m = len(basis)
        K_F = self._K_fit[:, :m]
        Z = solve_triangular(cholesky(K_F[np.asarray(basis)]), K_F.T, lower=True, check_finite=False)
        diag = kernel_diag(self.spec, self.X_fit)
        total = float(diag.sum())
        return float((total - np.einsum("ij,ij->", Z, Z)) / total) if total > 0 else 0.0


def refit_basis(X, y, spec, basis, lam, epsilon, delta, max_newton=50, ops_class=None, n_jobs=None):
    """beta on the fixed basis ``basis`` (training indices into X), by finite Newton on (18) over all rows.

    The functions are appended in order with the ops' own rows of H and L (a function numerically
    dependent on those before it, pivot^2 <= DEP_RTOL h_ss, is left out), then one finite Newton solve
    from beta = 0.  Returns (kept basis, beta, L(beta), Newton iterations, converged).
    """
    ops_class = SSVROps if ops_class is None else ops_class
    ops = ops_class(X, y, spec, len(basis), lam, epsilon, delta, n_jobs)
    kept = []
    for s in basis:
        ops.load_candidates(np.array([s], dtype=np.intp))
        piv2, scale = ops.cholesky_row(0)
        if piv2 <= DEP_RTOL * scale or scale <= 0:
            continue
        ops.append()
        kept.append(int(s))
    its, ok = finite_newton(ops, max_newton)
    return np.array(kept, dtype=np.intp), ops.beta(), ops.objective(), its, ok


def _dense_alternative(rule, spec, X, y, F, V, grown):
    """Steps 3-4 of :func:`ssvr_auto`: where the rule stopped the growth (a flat curve) on at most
    AUTO_DENSE_MAX_ROWS rows, the best hold-out MSE is above AUTO_DENSE_GAIN Var(y_V) and the grown basis leaves
    more than AUTO_DENSE_RESIDUAL of the kernel's trace on F unspanned, score kernel ridge on every fit row at
    the smallest lam of the grid (a last row of ``rule.path``, inf at the other lams).  Returns that lam when
    the dense fit beats the basis's best by more than AUTO_DENSE_GAIN Var(y_V), else None."""
    best_mse = rule.best[0]
    gain = AUTO_DENSE_GAIN * float(np.var(y[V]))
    if not (rule.stopped and X.shape[0] <= AUTO_DENSE_MAX_ROWS and best_mse > gain
            and rule.nystrom_residual(grown) > AUTO_DENSE_RESIDUAL):
        return None
    lam_dense = min(rule.lams)
    row = np.full(len(rule.lams), np.inf)
    row[rule.lams.index(lam_dense)] = kernel_ridge_mse(spec, X[F], y[F], X[V], y[V], lam_dense)
    rule.path.append((len(F), row))
    return lam_dense if row.min() < best_mse - gain else None


def ssvr_auto(X, y, spec, n_basis="auto", lam="auto", epsilon=0.0, delta=np.inf, n_candidates=100,
              selection="srs", tol=0.0, max_newton=50, random_state=None, callback=None, n_jobs=None,
              ops_class=SSVROps):
    """SSVR-SRS with ``n_basis`` and/or ``lam`` chosen on a hold-out of the training rows.

    1. Split the rows (:func:`holdout_split`, the first use of the Generator of ``random_state``): a
       hold-out V (20%, at most 2,000 rows) and the fit rows F.
    2. Grow the basis on F by :func:`ssvr_srs` (the rest of the same Generator draws its candidates) at
       ``lam`` (AUTO_LAM_GROW for 'auto') up to ``n_basis`` functions (AUTO_MAX_BASIS, at most |F|, for
       'auto'), with :class:`HoldoutRule` as the callback: at AUTO_CHECKPOINTS (and the last size grown)
       it scores the least-squares fits of the basis for every lam of AUTO_LAMS (only ``lam`` when it is
       given) on V, and for ``n_basis='auto'`` stops the growth once the basis has doubled past its
       best size without a gain.
    3. The dense alternative (``n_basis='auto'`` only): when the rule stopped the growth (a flat curve), n <=
       AUTO_DENSE_MAX_ROWS, the best hold-out MSE is above AUTO_DENSE_GAIN Var(y_V) and the grown basis leaves
       more than AUTO_DENSE_RESIDUAL of the kernel's trace on F unspanned (:meth:`HoldoutRule.nystrom_residual`),
       score kernel ridge on every fit row at the smallest lam of the grid (:func:`kernel_ridge_mse`; a last
       row of the path, inf at the other lams).  Only the weakly regularised dense fit can hold what the
       basis misses: at a strong lam kernel ridge has few effective degrees of freedom, which the basis spans.
    4. If the dense fit's hold-out MSE is below the basis's best by more than AUTO_DENSE_GAIN Var(y_V), the
       model is kernel ridge on all rows at that lam (:func:`kernel_ridge`, the quadratic loss it was scored
       with; the basis is every row).  Else keep the first m functions and the lam of the best score (m = the
       basis grown when ``n_basis`` is given) and refit beta on all rows with the loss (7)
       (:func:`refit_basis`).

    Deterministic for an int ``random_state``; both implementations select the same basis and score it
    with the same NumPy code.  Returns an :class:`SSVRResult` whose histories are those of the growth on
    F, with ``info`` = {'lam': the lam chosen, 'n_basis': the size chosen, 'path': the
    :class:`ValidationPath`}.
    """
    from .meb import make_rng

    X = sp.csr_matrix(X, dtype=np.float64) if sp.issparse(X) else np.ascontiguousarray(X, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    n = X.shape[0]
    if n < 3:
        raise ValueError(f"n_basis='auto' and lam='auto' hold out part of the rows: they need at least 3 "
                         f"samples, got {n}")
    rng = make_rng(random_state)
    F, V = holdout_split(n, rng)
    auto_m, auto_lam = isinstance(n_basis, str), isinstance(lam, str)
    m_max = min(AUTO_MAX_BASIS, len(F)) if auto_m else n_basis
    if m_max > len(F):
        raise ValueError(f"n_basis={n_basis} exceeds the {len(F)} fit rows of the hold-out split (lam='auto' "
                         f"selects the basis on {len(F)} of the {n} rows)")
    lams = AUTO_LAMS if auto_lam else (lam,)
    rule = HoldoutRule(spec, X[F], y[F], X[V], y[V], lams,
                       [c for c in AUTO_CHECKPOINTS if c < m_max] + [m_max], stop=auto_m)

    def step(basis, beta):
        stop = rule(basis, beta)
        if callback is not None and callback(F[basis], beta) is True:
            return True
        return stop

    grown = ssvr_srs(X[F], y[F], spec, m_max, lam=AUTO_LAM_GROW if auto_lam else lam, epsilon=epsilon,
                     delta=delta, n_candidates=n_candidates, selection=selection, tol=tol, max_newton=max_newton,
                     random_state=rng, callback=step, n_jobs=n_jobs, ops_class=ops_class, warn_rank=not auto_m)
    if not len(grown.basis):                          # g = 0 at beta = 0: y_F = 0, nothing to fit
        return SSVRResult(basis=np.zeros(0, dtype=np.intp), beta=np.zeros(0), objective_history=np.zeros(0),
                          newton_iterations=np.zeros(0, dtype=np.intp), stop_reason=grown.stop_reason,
                          info=dict(lam=lams[0] if not auto_lam else AUTO_LAM_GROW, n_basis=0,
                                    path=ValidationPath(np.zeros(0, dtype=np.intp), np.array(lams),
                                                        np.zeros((0, len(lams))), len(F), len(V))))
    rule.score(grown.basis)                           # the last size grown (a stop by tol or the kernel's rank)
    _, m, lam_best = rule.best
    lam_dense = _dense_alternative(rule, spec, X, y, F, V, grown.basis) if auto_m else None
    if lam_dense is not None:                         # the dense model: every row a basis function
        basis, beta, ok = np.arange(n, dtype=np.intp), kernel_ridge(X, y, spec, lam_dense), True
        m, lam_best = n, lam_dense
    else:
        basis, beta, _, _, ok = refit_basis(X, y, spec, F[grown.basis[:m]], lam_best, epsilon, delta, max_newton,
                                            ops_class, n_jobs)
    _warn_if_stopped_early(ok, max_newton, "refit", len(basis), m)
    info = dict(lam=lam_best, n_basis=m, path=ValidationPath(
        np.array([p[0] for p in rule.path], dtype=np.intp), np.array(lams), np.array([p[1] for p in rule.path]),
        len(F), len(V)))
    return SSVRResult(basis=basis, beta=beta, objective_history=grown.objective_history,
                      newton_iterations=grown.newton_iterations, converged=grown.converged and ok,
                      n_rejected=grown.n_rejected, stop_reason=grown.stop_reason, info=info)
