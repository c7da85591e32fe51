"""The kernel ridge pilot behind CVR's automatic settings, ``C='auto'`` and ``mu='auto'``.

The degenerate L2-SVR of [000] eq. (6) -- a tube of negative width, both slacks of every point active, so
that the loss ``C sum_i w_i (xi_i^2 + xi*_i^2)`` is ``2 C sum_i w_i r_i^2`` -- is kernel ridge regression
with the penalised bias, ``(K + 11' + I / (4 C w)) beta = y'``.  Solved directly on a few hundred random
points (a Cholesky factorisation, milliseconds), its residuals tell CVR, before the core-set loop runs:

* **which C generalises** (``C='auto'``), and under ``gamma='select'`` which width: the hold-out error of
  the pilot over a grid of C (and the widths 'scale' and 'beta').  The pilot's
  loss counts every point, CVR's only those outside its tube, so CVR's C is the pilot's times
  ``AUTO_C_FACTOR``, capped at ``AUTO_C_MAX`` (beyond it the core set grows and accuracy no longer does);
* **how wide to make the tube** (``mu='auto'``): ``mu = mean (|r| - q)_+`` with q the ``1 - p`` quantile of
  ``|r|``.  At the optimum mu is the mean slack ([000] eq. (9)), so the full fit's tube is near q and about
  a fraction p of the points lies outside it: its core set is ~p m.

A given C keeps the rule CVR has always had for its tube (``p = min(max(TUBE_OUTSIDE, TUBE_CP / C),
TUBE_MAX_OUTSIDE / M)`` from held-out residuals).  Under ``C='auto'`` p follows the noise the pilot measured:
``p = min(max(f, AUTO_TUBE_NOISE e, AUTO_TUBE_CP / C), AUTO_TUBE_NOISY, TUBE_MAX_OUTSIDE
max(1, AUTO_NOISY_MAX_OUTSIDE e) / M)`` with e the hold-out error relative to the targets' variance and the
floor ``f = min(AUTO_TUBE_OUTSIDE, max(AUTO_TUBE_CLEAN, AUTO_TUBE_CLEAN_SLOPE e_b))``, e_b the error of the
held-out residuals' bulk (:func:`_bulk_share`; e where they are near Gaussian, less where a few large misses
hold most of the mean square and the pilot's in-sample residuals lack that tail): nearly noiseless
targets fit well in a wide tube (their pilot's residuals are mostly its own misfit), while a squared loss
on noisy targets needs most points in it (wine quality, e ~ 0.65: R^2 0.357 at p = 0.8 against 0.321 at
p = 0.2), and their support grows with m.  The constants live on
:class:`corevector.CVR`, where the docs and the command line read them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

__all__ = ["TubeChoice", "auto_C_and_tube", "tube_for_C"]


@dataclass
class TubeChoice:
    """What the pilot chose: the C (``None`` when it was given) and the tube's mu, in normalised units, and the
    factor applied to the hybrid stop's cap (``nu_scale``, below 1 when the count bound widened the tube)."""
    C: float | None
    mu: float
    nu_scale: float
    info: dict = field(default_factory=dict)
    #: augmented points the pilot predicts outside the tube (i: above it, m + i: below), to start the core set
    #: from when they are most of it (None: grow it from the initial pair, as the papers)
    initial: np.ndarray | None = None
    #: their predicted slacks (|y - f| - q, the pilot's residual beyond the tube): the first solve's weights,
    #: since at the optimum xi_i = lambda_i mu m ([000] eq. (9))
    initial_weights: np.ndarray | None = None


def _dense_rows(X, a, b):
    """X[a], X[b] as arrays the kernel block takes: chunked sources read, CSR kept to its stored columns (a
    LIBSVM file may name column 2e9, and a product over all of them allocates per column)."""
    from refimpl.kernels import compact_columns

    Xa, Xb = X[a], X[b]
    if hasattr(Xa, "materialize"):
        Xa, Xb = Xa.materialize(), Xb.materialize()
    if sp.issparse(Xa):
        Xa, Xb = compact_columns(Xa, Xb)
    return Xa, Xb


def _gram(spec, A):
    """The symmetric block [k(a_i, a_j)]: for dense rows under a radial kernel from one product A A'
    (:func:`refimpl.kernels.radial_block_by_product`: its cancellation, ~1e-16 |a|^2, is nothing against a
    pilot's choice of C and mu), otherwise :func:`refimpl.kernels.kernel_block`."""
    from refimpl.kernels import kernel_block, radial_block_by_product

    if not (spec.radial and not spec.lookup and isinstance(A, np.ndarray) and A.ndim == 2):
        return kernel_block(spec, A, A)
    return radial_block_by_product(spec, A)


class _RidgeSplit:
    """The pilot on one split: kernel ridge fitted on rows ``f``, its residuals on ``f`` and on rows ``o``, for
    any C (the kernel blocks are computed once, or given: ``Kff``, ``Kof`` with the bias's 11' added)."""

    def __init__(self, spec, Xf, Xo, yf, yo, wf, Kff=None, Kof=None):
        from refimpl.kernels import kernel_block

        # + 11': the bias, penalised as in [000] eq. (6) (given blocks already hold it)
        self.Kff = kernel_block(spec, Xf, Xf) + 1.0 if Kff is None else Kff
        self.Kof = kernel_block(spec, Xo, Xf) + 1.0 if Kof is None else Kof
        self.yf, self.yo, self.wf = yf, yo, wf

    @classmethod
    def both_ways(cls, spec, Xa, Xb, ya, yb, wa, wb):
        """(split fitted on a, split fitted on b): the two halves' four blocks cut from one kernel matrix of
        a ∪ b, whose pairs are computed once."""
        h = Xa.shape[0]
        G = _gram(spec, sp.vstack([Xa, Xb], format="csr") if sp.issparse(Xa) else np.concatenate([Xa, Xb]))
        G += 1.0  # (the four blocks are views of it)
        return (cls(spec, None, None, ya, yb, wa, Kff=G[:h, :h], Kof=G[h:, :h]),
                cls(spec, None, None, yb, ya, wb, Kff=G[h:, h:], Kof=G[:h, h:]))

    def coef(self, C):
        """beta of the pilot of this C."""
        def shifted():
            K = np.array(self.Kff)  # (a copy: the factorisation overwrites it)
            K[np.diag_indices_from(K)] += 1.0 / (4.0 * C * self.wf)
            return K
        try:
            return _spd_solve(shifted(), self.yf)
        except np.linalg.LinAlgError:
            return np.linalg.lstsq(shifted(), self.yf, rcond=None)[0]

    def fit(self, C):
        """(beta, held-out residuals on o, in-sample residuals on f) of the pilot of this C."""
        beta = self.coef(C)
        return beta, self.yo - self.Kof @ beta, self.yf - self.Kff @ beta

    def residuals(self, C):
        """(held-out residuals on o, in-sample residuals on f) of the pilot of this C."""
        return self.fit(C)[1:]


def _tube(r, w, p_free, M, max_outside):
    """(mu, p, q, nu_scale) of the tube leaving a fraction p = min(p_free, max_outside / M) of the residuals r
    (weights w) outside.  The count bound widens the tube, not the violations the hybrid test lets pass: they
    stay within hybrid_cap times the tube the fit would have without it, ``|y - f| <= q + hybrid_cap q_free``
    (Friedman #1, 10^6 points, p = 0.01, q_free / q ~ 0.5: hybrid_cap 1 gave RMSE 1.079 with 4,265 support
    vectors in 12 s CPU, 0.5 gave 1.059 with 5,293 in 21 s)."""
    r = np.abs(r)
    p = min(p_free, max_outside / M)
    q = float(np.quantile(r, 1.0 - p, weights=w, method="inverted_cdf"))
    mu = float(np.average(np.maximum(r - q, 0.0), weights=w))
    q_free = float(np.quantile(r, 1.0 - p_free, weights=w, method="inverted_cdf")) if p < p_free else q
    nu_scale = min(1.0, q_free / q) if q > 0 else 1.0
    if not (np.isfinite(mu) and mu > 0):  # residuals all equal (a pilot that fits exactly): a small tube
        mu = max(float(np.mean(r)), 1e-6) * p
    return mu, p, q, nu_scale


def tube_for_C(est, X, yn, weights, C, M, seed):
    """mu='auto' at a given C: the pilot of that C on ``PILOT_SIZE`` random rows, the tube from its residuals on
    up to ``PILOT_SIZE`` others (on every row, in-sample, when ``M <= PILOT_SIZE``)."""
    m = X.shape[0]
    if M <= est.PILOT_SIZE:
        fit_rows = out_rows = np.arange(m)
    else:
        rng = np.random.default_rng(np.random.SeedSequence([seed, 49]))
        n_fit = min(est.PILOT_SIZE, m // 2)
        n_out = min(est.PILOT_SIZE, m - n_fit)
        idx = rng.choice(m, size=n_fit + n_out, replace=False)
        fit_rows, out_rows = np.sort(idx[:n_fit]), np.sort(idx[n_fit:])
    Xf, Xo = _dense_rows(X, fit_rows, out_rows)
    w = np.ones(m) if weights is None else weights
    with _blas_single_threaded():
        r, _ = _RidgeSplit(est.kernel_spec_, Xf, Xo, yn[fit_rows], yn[out_rows], w[fit_rows]).residuals(C)
    p_free = min(max(est.TUBE_OUTSIDE, est.TUBE_CP / C), 1.0)
    mu, p, q, nu_scale = _tube(r, w[out_rows], p_free, M, est.TUBE_MAX_OUTSIDE)
    info = dict(n_fit=len(fit_rows), n_out=len(out_rows), rms=float(np.sqrt(np.mean(r ** 2))), p=p, q=q, mu=mu,
                nu_scale=nu_scale)
    return TubeChoice(None, mu, nu_scale, info)


def _grid_search(err, start, top, up_first=False):
    """Index of the grid's C of least held-out error: from ``start`` downhill in one direction, never past
    ``top`` (a few evaluations: the hold-out error of kernel ridge is unimodal in log C in practice), the
    larger C tried first when ``up_first`` (the same index on a unimodal error, one evaluation fewer where it
    lies above ``start``)."""
    best = start
    for step in ((1, -1) if up_first else (-1, 1)):
        j = start + step
        while 0 <= j <= top and err(j) < err(best):
            best, j = j, j + step
        if best != start:
            break
    return best


def _best_C(splits, grid, est, w_out, var):
    """(index of the grid's C of least hold-out error, {index: (error, in-sample residuals, each split's
    (beta, held-out residuals, in-sample residuals))}) of these pilots.  The search tries the larger C first
    where the start's error relative to the held-out targets' variance ``var`` is below AUTO_SEARCH_UP_BELOW:
    there the least error mostly lies at a larger C (the panel's smooth sets pick the top of the grid)."""
    cache = {}

    def err(i):
        if i not in cache:
            fits = [s.fit(grid[i]) for s in splits]
            r_out = np.concatenate([o for _, o, _ in fits])
            cache[i] = (float(np.average(r_out ** 2, weights=w_out)), np.concatenate([f for _, _, f in fits]), fits)
        return cache[i][0]

    top = min(int(np.searchsorted(grid, est.AUTO_C_MAX / est.AUTO_C_FACTOR * (1 - 1e-12))), len(grid) - 1)
    start = min(int(np.argmin(np.abs(np.log(grid / est.AUTO_C_START)))), top)
    up_first = var > 0 and err(start) < est.AUTO_SEARCH_UP_BELOW * var
    return _grid_search(err, start, top, up_first), cache


def auto_C_and_tube(est, X, yn, weights, M, seed):
    """C='auto': the pilot's hold-out error over ``AUTO_C_GRID`` picks C; the tube (mu='auto') comes from the
    picked pilot's in-sample residuals, which resemble the full fit's training residuals.  Below
    ``AUTO_TWO_WAY`` rows the rows are split in halves and each half is held out once (every row counts);
    above, two disjoint draws of ``AUTO_PILOT_SIZE`` rows.  Under gamma='select' (from ``AUTO_SELECT_ROWS``
    rows) the pilots, on ``AUTO_SELECT_PILOT_SIZE`` rows, run at 'scale' and at 'beta', and the width of the
    smaller hold-out error becomes the estimator's ``kernel_spec_``."""
    m = X.shape[0]
    rng = np.random.default_rng(np.random.SeedSequence([seed, 49]))
    two_way = m <= est.AUTO_TWO_WAY
    select = isinstance(est.gamma, str) and est.gamma == "select" and m >= est.AUTO_SELECT_ROWS
    h = m // 2 if two_way else min(est.AUTO_SELECT_PILOT_SIZE if select else est.AUTO_PILOT_SIZE, m // 2)
    idx = rng.permutation(m) if two_way else rng.choice(m, size=2 * h, replace=False)
    a, b = np.sort(idx[:h]), np.sort(idx[h:])
    Xa, Xb = _dense_rows(X, a, b)
    w = np.ones(m) if weights is None else weights
    grid = np.asarray(est.AUTO_C_GRID, dtype=float)
    specs = [est.kernel_spec_] + ([est._kernel_spec(X, "beta")] if select else [])
    w_out = np.concatenate([w[b]] + ([w[a]] if two_way else []))
    w_in = np.concatenate([w[a]] + ([w[b]] if two_way else []))
    y_out = np.concatenate([yn[b]] + ([yn[a]] if two_way else []))
    var = float(np.average((y_out - np.average(y_out, weights=w_out)) ** 2, weights=w_out))
    picks = []
    with _blas_single_threaded():
        for spec in specs:  # (one width, or 'scale' then 'beta' under gamma='select')
            if two_way:
                splits = list(_RidgeSplit.both_ways(spec, Xa, Xb, yn[a], yn[b], w[a], w[b]))
            else:
                splits = [_RidgeSplit(spec, Xa, Xb, yn[a], yn[b], w[a])]
            best, cache = _best_C(splits, grid, est, w_out, var)
            picks.append((cache[best][0], best, cache, spec))
    # the width of the smaller hold-out error (the first, 'scale', on a tie)
    e, best, cache, spec = min(picks, key=lambda t: t[0])
    est.kernel_spec_ = spec
    # the tube from the picked pilot's in-sample residuals (those of the pilots of CVR's larger C, closer to the
    # full fit's, gave smaller tubes and lost 0.01-0.03 R^2 on puma32h, grid stability and Friedman #1)
    r_in = cache[best][1]
    C = min(est.AUTO_C_FACTOR * grid[best], est.AUTO_C_MAX)
    e_rel = e / var if var > 0 else 1.0
    # the floor comes down on nearly noiseless targets: there the pilot's residuals are its own misfit, a tube
    # at their upper quantile is still narrow against the targets, and the core set shrinks with p
    # e of the held-out residuals' bulk, not of a few large misses of the pilot (compactiv: a held-out kurtosis of
    # 23-32, its top 2% of residuals over 60% of the mean square, where a Gaussian's holds 14%) -- unless the
    # pilot's own residuals have that tail too: then the misses are gross errors in the targets, which a wider
    # tube leaves to fewer support vectors and weighs more (a smooth target with 1% of them: R^2 0.978 at a
    # lowered floor against 0.995)
    e_bulk = e_rel
    if _bulk_share(r_in, w_in, est.AUTO_TUBE_TRIM) >= est.AUTO_TUBE_TRIM_OWN:
        r_out = np.concatenate([o for _, o, _ in cache[best][2]])
        e_bulk *= min(1.0, _bulk_share(r_out, w_out, est.AUTO_TUBE_TRIM) / est.AUTO_TUBE_TRIM_GAUSSIAN)
    floor = min(est.AUTO_TUBE_OUTSIDE, max(est.AUTO_TUBE_CLEAN, est.AUTO_TUBE_CLEAN_SLOPE * e_bulk))
    p_free = min(max(floor, est.AUTO_TUBE_NOISE * e_rel, est.AUTO_TUBE_CP / C), est.AUTO_TUBE_NOISY)
    # the count bound grows with the noise: a noisy target needs its support vectors in proportion to m
    max_outside = est.TUBE_MAX_OUTSIDE * max(1.0, est.AUTO_NOISY_MAX_OUTSIDE * e_rel)
    mu, p, q, nu_scale = _tube(r_in, w_in, p_free, M, max_outside)
    info = dict(n_fit=len(a), n_out=len(b), two_way=two_way, C_pilot=float(grid[best]),
                n_eval=sum(len(t[2]) for t in picks), r2_pilot=1.0 - e_rel, e_bulk=e_bulk, p=p, q=q, mu=mu,
                nu_scale=nu_scale,
                gamma=float(spec.gamma), r2_pilot_widths=[1.0 - t[0] / var if var > 0 else 0.0 for t in picks])
    initial = weights = None
    # (one pass over the rows, wherever they are: the same start for every layout)
    if p >= est.SEED_MIN_OUTSIDE or m < est.SEED_ALL_BELOW:
        with _blas_single_threaded():
            initial, weights = _predicted_outside(spec, X, yn, a, b, cache[best][2][0], q, p)
        info["n_initial"] = len(initial)
    return TubeChoice(C, mu, nu_scale, info, initial, weights)


def _bulk_share(r, w, t):
    """The share of the mean square of the residuals r (weights w) below their (1 - t) quantile of |r|, over the
    same share for Gaussian residuals: near 1 where a squared error measures the residuals' typical size, below
    it where their largest fraction t holds more of it than a Gaussian tail would."""
    from scipy.stats import norm

    if not 0.0 < t < 1.0:
        return 1.0
    order = np.argsort(np.abs(r), kind="stable")
    sq, wt = (r[order] ** 2) * w[order], w[order]
    total = sq.sum()
    if not total > 0:
        return 1.0
    keep = np.cumsum(wt) <= (1.0 - t) * wt.sum()
    z = norm.ppf(1.0 - t / 2.0)
    gaussian = 1.0 - (t + 2.0 * z * norm.pdf(z))  # E[r^2; |r| <= z sigma] / sigma^2
    return float(sq[keep].sum() / total / gaussian)


def _predicted_outside(spec, X, yn, a, b, fit, q, p_out, block=4096):
    """(points, slacks): the augmented points the picked pilot (``fit``: its beta on the rows a and its
    residuals on b and a, as :meth:`_RidgeSplit.fit` gives them) puts outside the tube -- i
    where y_i - f(x_i) > t_i (lambda_i), m + i where it is below -t_i (lambda*_i), in increasing order -- and
    the residual of each beyond it, |y_i - f(x_i)| - t_i, a fraction p_out of the rows in all.  The
    half-width t (:func:`_thresholds`) is q on the rows a, whose in-sample residuals q came from, and the
    held-out residuals' own quantile on the others.  The rows outside a and b (none under the two-way
    split) are computed by blocks, read as the pilot's rows are (:func:`_dense_rows`), so that dense, CSR
    and chunked rows give one start; the pilot's rows are read once, except for CSR, whose blocks are
    compacted to their stored columns together with them."""
    from refimpl.kernels import kernel_block

    beta, r_b, r_a = fit
    m = X.shape[0]
    r = np.empty(m)
    r[a], r[b] = r_a, r_b
    rest = np.setdiff1d(np.arange(m), np.concatenate([a, b]), assume_unique=True)
    if rest.size:  # (none under the two-way split: every row's residual is in hand, nothing to read)
        Xa = None if sp.issparse(X) else _dense_rows(X, a, a[:0])[0]
        for s in range(0, rest.size, block):
            rows = rest[s:s + block]
            Xs, Xa_s = _dense_rows(X, rows, a) if Xa is None else (_dense_rows(X, rows, rows[:0])[0], Xa)
            r[rows] = yn[rows] - (kernel_block(spec, Xs, Xa_s) + 1.0) @ beta
    return _outside_of(r, _thresholds(r, a, q, p_out))


def _thresholds(r, a, q, p_out):
    """The tube's half-width row by row: q on the pilot's own rows a, whose in-sample residuals q came from,
    and on the others the 1 - p_out quantile of their residuals, which are held-out ones and run larger
    (q on every row put 68% of compactiv's rows outside against p_out = 40%, and the seed held 4,486 points
    where the grown fit ends with 2,574)."""
    out = np.ones(r.shape[0], dtype=bool)
    out[a] = False
    t = np.full(r.shape[0], q)
    t[out] = float(np.quantile(np.abs(r[out]), 1.0 - p_out, method="inverted_cdf"))
    return t


def _outside_of(r, q):
    """(points, slacks) of the residuals r: i where r_i > q, m + i where r_i < -q, in increasing order, and
    each one's |r_i| - q."""
    m = r.shape[0]
    q = np.broadcast_to(q, r.shape)
    above, below = np.flatnonzero(r > q), np.flatnonzero(r < -q)
    return np.concatenate([above, m + below]), np.concatenate([r[above] - q[above], -r[below] - q[below]])


def _blas_single_threaded():
    """One BLAS thread (a threaded Cholesky of 1,000 x 1,000 spun 0.25-1.3 s of CPU on a busy machine, 0.01 s
    alone): fastimpl's block, which nests with the engine's, or threadpoolctl's limit without fastimpl."""
    try:
        from fastimpl._openmp import blas_single_threaded
        return blas_single_threaded()
    except ImportError:  # pragma: no cover
        from threadpoolctl import threadpool_limits
        return threadpool_limits(1, user_api="blas")


def _spd_solve(A, b):
    """A^-1 b for a symmetric positive definite A (Cholesky; A is overwritten)."""
    from scipy.linalg import cho_factor, cho_solve
    return cho_solve(cho_factor(A, lower=True, overwrite_a=True, check_finite=False), b, check_finite=False)
