"""SSVR-SRS ([002]): loss, derivatives, solver, fast == ref, estimator, baselines.

Tolerances
----------
* fast == ref: both make the same draws and apply the same selection, dependency and refactor
  rules, so they must select the same basis functions.  Their sums run in different orders (C
  loops and a maintained gradient vs NumPy/BLAS), so objective values are compared with relative
  tolerance OBJ_RTOL and fitted values with PRED_TOL (relative to max(1, |y|_inf)); beta itself is
  not compared (K_PP can be ill-conditioned, so beta is far less determined than K_P beta).
  OBJ_RTOL = 1e-8: both stop at Newton decrement <= 1e-13 max(L, 1) (objective within half that of
  the minimum of (18), covered by atol=1e-12 for L < 1), or on an unchanged piece at the rounding
  floor of the gradient, ~ n u |K_P| |beta| |l'| with u = 1.1e-16 -- with |beta| ~ 1e3 at cond(H)
  ~ 1e14 (lam = 1e-4, random bases) that is ~ 1e-9 relative, the largest seen in 2,100 random
  problems of ``problems`` below.  (1e-7 used to hide two bugs at 3e-8 .. 2e-7: a Laplacian K_P
  from the expanded ||a||^2 + ||b||^2 - 2a'b, and finite Newton stopping after one step with an
  inexact factor on ill-conditioned bases; see test_fast_equals_ref_regression.)  The
  dependency test (pivot^2 <= DEP_RTOL h_ss) is a threshold: a candidate whose pivot lands within
  rounding of it may be kept by one implementation and dropped by the other, so the strict
  comparison is made on problems where neither rejected a candidate (the rejection path is tested
  on duplicated points, where the pivot is 0 to rounding).
* independent solvers: cvxopt's interior point QP is accurate to ~1e-7 relative, so the full-basis
  SSVR solution is compared with it at 1e-5 (objective) and 1e-3 (fitted values, which are less
  well determined than the objective); sklearn's LIBSVM runs with tol=1e-10.
"""
import os
import warnings

import numpy as np
import scipy.sparse as sp
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar
from scipy.special import huber
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import SVR, NuSVR
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

from corevector import SparseSVR
from fastimpl import _ssvr as fast
from refimpl import ssvr as ref
from refimpl.baselines.exact_svr import epsilon_svr, fit_svr, nu_svr
from refimpl.baselines.rss import rss_from_svr
from refimpl.datasets import friedman
from refimpl.kernels import KERNELS, kernel_block, make_kernel_spec

OBJ_RTOL = 1e-8
OBJ_RTOL_ILL = 1e-6   # fast == ref objectives past a basis Gram condition number of 1e10
PRED_TOL = 1e-5
N_EXAMPLES = int(os.environ.get("COREVECTOR_HYPOTHESIS_EXAMPLES", 60))


def _problem(n=60, d=2, seed=0, gamma=3.0, kernel="rbf"):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    y = np.sin(3 * X[:, 0]) + X[:, -1] ** 2 + 0.1 * rng.normal(size=n)
    opts = {"gamma": gamma} if kernel != "linear" else {}
    if kernel == "poly":
        opts.update(degree=2, coef0=1.0)
    return X, y, make_kernel_spec(X, kernel, **opts)


# ------------------------------------------------------------------ the loss (7) and its special cases
zs = st.lists(st.floats(-50, 50, allow_nan=False), min_size=1, max_size=30).map(np.array)


@given(z=zs, delta=st.floats(0.01, 10))
def test_loss_case1_huber(z, delta):
    """(1) eps = 0: Huber's loss (twice scipy's huber(Delta, z))."""
    np.testing.assert_allclose(ref.huber_loss(z, 0.0, delta), 2 * huber(delta, z), rtol=1e-12, atol=1e-12)


@given(z=zs)
def test_loss_case2_quadratic(z):
    """(2) eps = 0, Delta = inf: the quadratic (Gaussian) loss z^2."""
    np.testing.assert_allclose(ref.huber_loss(z, 0.0, np.inf), z ** 2, rtol=1e-14)


@given(z=zs, eps=st.floats(0.0, 5.0), gap=st.floats(1e-9, 1e-3))
def test_loss_cases3_and_5_linear_limits(z, eps, gap):
    """(3) eps = 0, (5) eps > 0, Delta -> eps: l / (2 (Delta - eps)) -> max(|z| - eps, 0) (Laplace /
    insensitive linear loss); the error is at most (Delta - eps) / 2."""
    delta = eps + gap
    gap = delta - eps                       # the gap as represented
    scaled = ref.huber_loss(z, eps, delta) / (2 * gap)
    target = np.maximum(np.abs(z) - eps, 0)
    assert np.all(np.abs(scaled - target) <= gap / 2 + 1e-9 * (1 + np.abs(target)))


@given(z=zs, eps=st.floats(1e-3, 5.0))
def test_loss_case4_insensitive_quadratic(z, eps):
    """(4) 0 < eps, Delta = inf: max(|z| - eps, 0)^2."""
    np.testing.assert_allclose(ref.huber_loss(z, eps, np.inf), np.maximum(np.abs(z) - eps, 0) ** 2, rtol=1e-13)


@given(z=zs, eps=st.floats(0.0, 2.0), gap=st.floats(0.05, 3.0))
def test_loss_continuous_differentiable_and_convex(z, eps, gap):
    """l is C^1 (value and derivative continuous at |z| = eps and Delta) and its derivative is monotone."""
    delta = eps + gap
    for c in (eps, delta, -eps, -delta):
        lo, hi = ref.huber_loss(np.array([c - 1e-9, c + 1e-9]), eps, delta)
        assert abs(lo - hi) < 1e-7
        dlo, dhi = ref.huber_derivative(np.array([c - 1e-9, c + 1e-9]), eps, delta)
        assert abs(dlo - dhi) < 1e-7
    zz = np.sort(z)
    assert np.all(np.diff(ref.huber_derivative(zz, eps, delta)) >= -1e-12)


@pytest.mark.parametrize("eps,delta", [(0.0, 0.5), (0.1, 0.5), (0.25, np.inf)])
def test_sign_vectors_are_eqs_19_and_20_on_and_between_the_kinks(eps, delta):
    """(s, s_bar, w) of 002 eqs. (19)-(21) written out, at the kinks +-eps, +-Delta themselves (strict
    inequalities in (19), inclusive in (20)) and between them; the loss is even, so both are odd in r."""
    pts = [0.0, eps, delta, 0.5 * (eps + min(delta, 1.0)), 2.0, 1e-3]
    r = np.array(sorted({v for p in pts for v in (p, -p) if np.isfinite(v)}))
    s_ref = [1.0 if eps < v < delta else -1.0 if -delta < v < -eps else 0.0 for v in r]
    sbar_ref = [1.0 if v >= delta else -1.0 if v <= -delta else 0.0 for v in r]
    s, s_bar, w = ref.sign_vectors(r, eps, delta)
    np.testing.assert_array_equal(s, s_ref)
    np.testing.assert_array_equal(s_bar, sbar_ref)
    np.testing.assert_array_equal(w, np.square(s_ref))
    s_m, sbar_m, _ = ref.sign_vectors(-r, eps, delta)
    np.testing.assert_array_equal(s_m, -s)
    np.testing.assert_array_equal(sbar_m, -s_bar)


def _away_from_kinks(r, eps, delta, h):
    kinks = np.array([eps, delta, -eps, -delta])
    kinks = kinks[np.isfinite(kinks)]
    return np.min(np.abs(r[:, None] - kinks[None, :])) > 10 * h


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**16), eps=st.sampled_from([0.0, 0.05, 0.2]), delta=st.sampled_from([0.3, 1.0, np.inf]),
       lam=st.sampled_from([1e-3, 1e-1]), m=st.integers(1, 6))
def test_gradient_and_hessian_match_finite_differences(seed, eps, delta, lam, m):
    """Eqs. (22) and (23) against central differences of (18) and (22), away from the kinks."""
    X, y, spec = _problem(n=40, seed=seed)
    rng = np.random.default_rng(seed)
    P = rng.choice(40, m, replace=False)
    K_P = kernel_block(spec, X, X[P])
    K_PP = K_P[P]
    beta = rng.normal(size=m)
    h = 1e-6
    r = K_P @ beta - y
    if not _away_from_kinks(r, eps, delta, h * (1 + np.abs(K_P).sum(1).max())):
        return
    f = lambda b: ref.objective(K_P @ b - y, b, K_PP, lam, eps, delta)  # noqa: E731
    g = lambda b: ref.gradient(K_P, K_PP, b, K_P @ b - y, lam, eps, delta)  # noqa: E731
    I = np.eye(m)
    fd_grad = np.array([(f(beta + h * I[k]) - f(beta - h * I[k])) / (2 * h) for k in range(m)])
    np.testing.assert_allclose(g(beta), fd_grad, rtol=1e-5, atol=1e-5)
    fd_hess = np.array([(g(beta + h * I[k]) - g(beta - h * I[k])) / (2 * h) for k in range(m)])
    np.testing.assert_allclose(ref.generalized_hessian(K_P, K_PP, r, lam, eps, delta), fd_hess, rtol=1e-5, atol=1e-5)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**16), eps=st.sampled_from([0.0, 0.1, 0.4]), delta=st.sampled_from([0.5, 2.0, np.inf]),
       n=st.integers(1, 80))
def test_line_search_is_exact(seed, eps, delta, n):
    """The line search of (24) returns the minimiser of the 1-D piecewise quadratic (bounded scalar search)."""
    rng = np.random.default_rng(seed)
    r, u = rng.normal(size=n), rng.normal(size=n)
    lam, beta, d = 0.1, rng.normal(size=2), rng.normal(size=2)
    phi = lambda t: ref.huber_loss(r + t * u, eps, delta).sum() + lam * ((beta + t * d) ** 2).sum()  # noqa: E731
    t = ref.line_search(r, u, float(beta @ d), float(d @ d), lam, eps, delta)
    assert t >= 0
    best = minimize_scalar(phi, bounds=(0, max(10.0, 2 * t)), method="bounded", options={"xatol": 1e-12})
    assert phi(t) <= best.fun + 1e-10 * (1 + abs(best.fun))
    assert phi(t) <= phi(0.0) + 1e-12


@given(seed=st.integers(0, 2**16), m=st.integers(1, 12), sign=st.sampled_from([1.0, -1.0]))
def test_cholesky_rank_one_update_and_append(seed, m, sign):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(m + 1, 3 * m + 3))
    H = A @ A.T + np.eye(m + 1)
    L = np.linalg.cholesky(H[:m, :m])
    l, piv2 = ref.chol_append(L, H[:m, m], H[m, m])
    full = np.zeros((m + 1, m + 1))
    full[:m, :m], full[m, :m], full[m, m] = L, l, np.sqrt(piv2)
    np.testing.assert_allclose(full, np.linalg.cholesky(H), atol=1e-10)
    x = rng.normal(size=m) * (0.3 if sign < 0 else 1.0)
    target = H[:m, :m] + sign * np.outer(x, x)
    L2 = L.copy()
    ok = ref.chol_rank1(L2, x, sign)
    if np.all(np.linalg.eigvalsh(target) > 1e-8):
        assert ok
        np.testing.assert_allclose(L2 @ L2.T, target, atol=1e-9)


def test_pick_floors_scores_at_rounding_level_and_takes_the_first_in_draw_order():
    """Scores <= SCORE_FLOOR count as 0 (no descent direction beyond the solver's tolerance), so rounding
    noise does not choose between them: the first candidate in draw order is taken; above the floor the
    best score (within TIE_RTOL) wins; an excluded candidate is never taken."""
    tiny = ref.SCORE_FLOOR
    assert ref.pick(np.array([0.1 * tiny, 0.9 * tiny, 0.0]), np.zeros(3, bool)) == 0
    assert ref.pick(np.array([0.1 * tiny, 0.9 * tiny, 2.0 * tiny]), np.zeros(3, bool)) == 2
    assert ref.pick(np.array([0.5, 0.2, 0.5]), np.array([True, False, False])) == 2
    assert ref.pick(np.array([0.5, 0.2]), np.array([True, True])) == -1


def test_target_scale_is_the_robust_scale_or_the_std_when_the_mad_vanishes():
    """target_scale = 1.4826 MAD(y), the Gaussian-consistent robust scale; when more than half of the
    targets are equal the MAD is 0 and the standard deviation is used, so that auto_delta = eps + 3 s
    stays above eps as (7) needs."""
    rng = np.random.default_rng(0)
    y = rng.normal(3.0, 2.0, size=20001)
    assert ref.target_scale(y) == pytest.approx(2.0, rel=0.03)
    z = np.r_[np.zeros(6), [1.0, 2.0, 3.0]]
    assert ref.target_scale(z) == pytest.approx(np.std(z)) and np.std(z) > 0
    assert ref.auto_delta(z, 0.1) == pytest.approx(0.1 + ref.DELTA_SCALE * np.std(z))


def test_cholesky_of_a_singular_hessian_adds_the_smallest_jitter_that_works():
    """H singular to rounding (a repeated basis function): the factor is that of H + tau I with tau the
    first of JITTER_RTOL max diag(H) * 10^k that factors, a tiny positive shift, never a negative one."""
    a = np.array([1.0, 2.0, 0.5])
    H = np.outer(a, a) + np.diag([0.0, 1.0, 1.0])   # rank 3 in exact arithmetic, but column 0 ...
    H[:, 0] = H[:, 1] * 0.5                           # ... becomes half of column 1: singular
    H[0, :] = H[:, 0]
    H[0, 0] = 0.25 * H[1, 1]
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.cholesky(H)
    L = ref.cholesky(H)
    E = L @ L.T - H
    tau = E[0, 0]
    assert 0 < tau <= 1e-6 * np.max(np.diag(H))                    # a small positive jitter ...
    np.testing.assert_allclose(E, tau * np.eye(3), atol=1e-12)       # ... on the diagonal only
    assert tau >= ref.JITTER_RTOL * np.max(np.diag(H)) * (1 - 1e-12)


# ------------------------------------------------------------------ the SSVR-SRS solver
def test_full_basis_with_infinite_delta_equals_independent_qp_solution():
    """All n basis functions and Delta = inf: (8) is a QP; cvxopt solves it independently."""
    from cvxopt import matrix, solvers

    X, y, spec = _problem(n=30, seed=1, gamma=5.0)
    n, lam, eps = len(y), 1e-2, 0.05
    K = kernel_block(spec, X, X)
    # variables (beta, xi+, xi-): min lam beta'K beta + |xi+|^2 + |xi-|^2,  K beta - y - eps <= xi+,  y - K beta - eps <= xi-
    Pm = np.zeros((3 * n, 3 * n))
    Pm[:n, :n] = 2 * lam * K
    Pm[n:, n:] = 2 * np.eye(2 * n)
    I, Z = np.eye(n), np.zeros((n, n))
    G = np.block([[K, -I, Z], [-K, Z, -I]])
    h = np.concatenate([y + eps, eps - y])
    solvers.options.update(show_progress=False, abstol=1e-12, reltol=1e-12, feastol=1e-12)
    sol = solvers.qp(matrix(Pm), matrix(np.zeros(3 * n)), matrix(G), matrix(h))
    b_qp = np.array(sol["x"]).ravel()[:n]
    obj_qp = ref.primal_objective(K, b_qp, y, lam, eps, np.inf)
    for solver in (ref.ssvr_srs, fast.ssvr_srs):
        res = solver(X, y, spec, n, lam=lam, epsilon=eps, delta=np.inf, n_candidates=n, tol=0.0, random_state=0)
        assert len(res.basis) == n and res.stop_reason == "n_basis"
        beta = np.zeros(n)
        beta[res.basis] = res.beta
        obj = ref.primal_objective(K, beta, y, lam, eps, np.inf)
        assert abs(obj - obj_qp) <= 1e-5 * obj_qp
        np.testing.assert_allclose(K @ beta, K @ b_qp, atol=1e-3)
        assert res.objective_history[-1] == pytest.approx(obj, rel=1e-9)


@settings(max_examples=max(10, N_EXAMPLES // 3), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), eps=st.sampled_from([0.0, 0.05, 0.3]), gap=st.sampled_from([0.1, 0.5, np.inf]),
       lam=st.sampled_from([1e-5, 1e-3, 1e-1]), selection=st.sampled_from(["srs", "random"]),
       n_candidates=st.sampled_from([1, 7, 100]))
def test_objective_never_increases_as_bases_are_added(seed, eps, gap, lam, selection, n_candidates):
    X, y, spec = _problem(n=70, seed=seed)
    for solver in (ref.ssvr_srs, fast.ssvr_srs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            res = solver(X, y, spec, 25, lam=lam, epsilon=eps, delta=eps + gap, n_candidates=n_candidates,
                         selection=selection, random_state=seed)
        hist = np.concatenate([[ref.huber_loss(-y, eps, eps + gap).sum()], res.objective_history])
        assert np.all(np.diff(hist) <= 1e-12 * hist[:-1])
        assert len(set(res.basis.tolist())) == len(res.basis)


problems = st.fixed_dictionaries({
    "kernel": st.sampled_from(KERNELS),
    "n": st.integers(5, 120),
    "d": st.integers(2, 5),
    "seed": st.integers(0, 2**16),
    "eps": st.sampled_from([0.0, 0.05, 0.3]),
    "gap": st.sampled_from([0.05, 0.3, np.inf]),
    "lam": st.sampled_from([1e-4, 1e-2, 1.0]),
    "selection": st.sampled_from(["srs", "random"]),
    "n_candidates": st.sampled_from([1, 5, 100]),
    "frac": st.floats(0.05, 0.6),
})


@settings(max_examples=N_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(p=problems)
def test_fast_equals_ref(p):
    rng = np.random.default_rng(p["seed"])
    X = rng.normal(size=(p["n"], p["d"]))
    y = X @ rng.normal(size=p["d"]) + np.sin(X[:, 0]) + 0.1 * rng.normal(size=p["n"])
    opts = {"gamma": 0.5} if p["kernel"] != "linear" else {}
    if p["kernel"] == "poly":
        opts.update(degree=2, coef0=1.0)
    spec = make_kernel_spec(X, p["kernel"], **opts)
    m = max(1, int(p["frac"] * p["n"]))
    kw = dict(lam=p["lam"], epsilon=p["eps"], delta=p["eps"] + p["gap"], n_candidates=p["n_candidates"],
              selection=p["selection"], random_state=p["seed"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        a = ref.ssvr_srs(X, y, spec, m, **kw)
        b = fast.ssvr_srs(X, y, spec, m, **kw)
    assume(a.n_rejected == 0 and b.n_rejected == 0)
    np.testing.assert_array_equal(a.basis, b.basis)
    assert a.stop_reason == b.stop_reason and a.n_rejected == b.n_rejected
    # the objectives agree to OBJ_RTOL while the basis' Gram matrix is well conditioned; past cond 1e10 the two
    # summation orders drift apart with the conditioning (seed 349, rbf, 67 functions of 113 points: 1.7e-9 at
    # cond 1.2e13, 3.4e-8 at 1.3e14, predictions still within 7e-8), so there they are held to OBJ_RTOL_ILL
    ha, hb = np.asarray(a.objective_history), np.asarray(b.objective_history)
    well = _well_conditioned_prefix(spec, X[a.basis], len(ha))
    np.testing.assert_allclose(ha[well], hb[well], rtol=OBJ_RTOL, atol=1e-12)
    np.testing.assert_allclose(ha[~well], hb[~well], rtol=OBJ_RTOL_ILL, atol=1e-12)
    if len(a.basis):
        K = kernel_block(spec, X, X[a.basis])
        assert np.max(np.abs(K @ a.beta - K @ b.beta)) <= PRED_TOL * max(1.0, np.abs(y).max())


def _well_conditioned_prefix(spec, B, n_hist, cond_max=1e10):
    """Mask of the objective history's entries (entry k: the fit on the first k + 1 basis functions) whose
    basis Gram matrix has condition number <= cond_max; all True when the history is not one entry a function."""
    if n_hist != len(B):
        return np.ones(n_hist, dtype=bool)
    K = kernel_block(spec, B, B)
    return np.array([np.linalg.cond(K[:k + 1, :k + 1]) <= cond_max for k in range(n_hist)], dtype=bool)


def _hypothesis_problem(p):
    rng = np.random.default_rng(p["seed"])
    X = rng.normal(size=(p["n"], p["d"]))
    y = X @ rng.normal(size=p["d"]) + np.sin(X[:, 0]) + 0.1 * rng.normal(size=p["n"])
    spec = make_kernel_spec(X, p["kernel"], gamma=0.5)
    kw = dict(lam=p["lam"], epsilon=p["eps"], delta=p["eps"] + p["gap"], n_candidates=p["n_candidates"],
              selection=p["selection"], random_state=p["seed"])
    return X, y, spec, max(1, int(p["frac"] * p["n"])), kw


def _independent_objective(X, y, spec, P, lam, eps, delta):
    """(8) on the basis P and its gradient, written without refimpl: the Gaussian / Laplacian kernel
    from coordinate differences (scipy's cdist) and the loss (7) by its cases."""
    from scipy.spatial.distance import cdist

    D = cdist(X, X[P])
    K = np.exp(-spec.gamma * (D if spec.name == "laplacian" else D * D))
    K_PP = K[P]

    def f(beta):
        r = K @ beta - y
        a = np.abs(r)
        loss = np.where(a <= eps, 0.0, np.where(a < delta, (a - eps) ** 2, (delta - eps) * (2 * a - delta - eps)))
        dl = np.sign(r) * np.where(a <= eps, 0.0, 2 * np.minimum(a - eps, delta - eps))
        return loss.sum() + lam * beta @ K_PP @ beta, K.T @ dl + 2 * lam * K_PP @ beta

    return f


@pytest.mark.parametrize("p", [
    # Laplacian: kernel_block's ||a||^2 + ||b||^2 - 2a'b under the square root put a 2e-8 error on the
    # reference's K_P (k(x_s, x_s) = 1 - 2e-8 next to K_PP[s, s] = 1): objectives 2e-7 apart
    dict(seed=138, gap=np.inf, kernel="laplacian", selection="srs", frac=0.2872536876093389, n_candidates=100,
         lam=1e-4, n=63, d=2, eps=0.3),
    # cond(H) ~ 7e13: one Newton step with the rounded factor L left L(beta) 1e-7 above the minimum
    dict(seed=7142, gap=np.inf, kernel="rbf", selection="random", frac=0.5105900407124594, n_candidates=1,
         lam=1e-4, n=94, d=2, eps=0.3),
])
def test_fast_equals_ref_regression(p):
    """Two examples of test_fast_equals_ref that failed: both implementations must reach the minimum of
    (18) on their common basis, checked against an independent scipy minimisation of (8)."""
    from scipy.optimize import minimize

    X, y, spec, m, kw = _hypothesis_problem(p)
    a = ref.ssvr_srs(X, y, spec, m, **kw)
    b = fast.ssvr_srs(X, y, spec, m, **kw)
    assert a.converged and b.converged and a.n_rejected == b.n_rejected == 0
    np.testing.assert_array_equal(a.basis, b.basis)
    np.testing.assert_allclose(a.objective_history, b.objective_history, rtol=OBJ_RTOL, atol=1e-12)
    f = _independent_objective(X, y, spec, a.basis, kw["lam"], kw["epsilon"], kw["delta"])
    best = minimize(f, np.zeros(m), jac=True, method="BFGS", options=dict(gtol=1e-12, maxiter=20000))
    for res in (a, b):
        L_true = f(res.beta)[0]
        assert res.objective_history[-1] == pytest.approx(L_true, rel=1e-9, abs=1e-12)   # reported = (8) at beta
        assert L_true <= best.fun * (1 + 1e-9) + 1e-12                                   # and minimal
        if p["kernel"] == "laplacian":          # well conditioned (cond H < 1e3): BFGS finds the minimum
            assert L_true == pytest.approx(best.fun, rel=1e-12)


def test_random_state_determinism_and_rsvm_differs():
    X, y, spec = _problem(n=200, seed=3)
    a = fast.ssvr_srs(X, y, spec, 20, random_state=5)
    b = fast.ssvr_srs(X, y, spec, 20, random_state=5)
    np.testing.assert_array_equal(a.basis, b.basis)
    np.testing.assert_array_equal(a.beta, b.beta)
    c = fast.ssvr_srs(X, y, spec, 20, random_state=5, selection="random")
    assert not np.array_equal(a.basis, c.basis)


def test_srs_selects_the_best_candidate_of_the_criterion():
    """With |O| >= n every unused point is a candidate: the first pick maximises (16) over all points."""
    X, y, spec = _problem(n=50, seed=4)
    res = ref.ssvr_srs(X, y, spec, 1, n_candidates=50, epsilon=0.05, delta=0.3)
    K = kernel_block(spec, X, X)
    g = ref.huber_derivative(-y, 0.05, 0.3)
    crit = (g @ K) ** 2 / ((g @ g) * (K * K).sum(0))
    assert crit[res.basis[0]] == pytest.approx(crit.max(), rel=1e-9)


@pytest.mark.parametrize("scale", [1e-4, 1.0, 1e4])
def test_srs_scores_are_eq_16_at_any_scale_of_the_gradient(scale):
    """(16) is a normalised squared cosine, (g_bar'K_bar_j)^2 / (|g_bar|^2 |K_bar_j|^2), written out here: in
    [0, 1], the same when g and beta are scaled together (small scales give denominators below 1), and 0
    only for a zero denominator."""
    rng = np.random.default_rng(5)
    K_O, beta, g, lam = rng.normal(size=(30, 8)), rng.normal(size=3), rng.normal(size=30), 0.1
    K_O[:, 2] = 0.0                                   # a zero column: |K_bar_j|^2 = 0
    K_PO = K_O[:3]
    gb = np.concatenate([g, 2 * lam * beta]) * scale
    Kb = np.vstack([K_O, K_PO])
    with np.errstate(invalid="ignore"):
        expect = np.nan_to_num((gb @ Kb) ** 2 / ((gb @ gb) * (Kb * Kb).sum(0)))
    num, knorm2 = ref.criterion_terms(g * scale, beta * scale, K_O, K_PO, lam)
    scores = ref.srs_scores(num, knorm2, g * scale, beta * scale, lam)
    np.testing.assert_allclose(scores, expect, rtol=1e-12, atol=0)
    assert scores[2] == 0 and np.all((scores > 0) == ((Kb * Kb).sum(0) > 0)) and scores.max() <= 1


def test_newton_bound_warns():
    X, y, spec = _problem(n=80, seed=2)
    for solver in (ref.ssvr_srs, fast.ssvr_srs):
        with pytest.warns(ConvergenceWarning, match="max_newton"):
            solver(X, y, spec, 10, max_newton=1, epsilon=0.01, delta=0.05, random_state=0)


def test_max_newton_iterations_are_enough():
    """A bound of max_newton iterations allows that many: when every finite Newton solve took at most k
    steps (its stopping test then held at the start of iteration k + 1), max_newton = k + 1 gives the same
    fit without a warning, and max_newton = k stops some solve early (converged False, a warning)."""
    X, y, spec = _problem(n=80, seed=2)
    kw = dict(epsilon=0.01, delta=0.05, random_state=0)
    full = ref.ssvr_srs(X, y, spec, 10, **kw)
    k = int(full.newton_iterations.max())
    assert full.converged and k >= 2
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        just = ref.ssvr_srs(X, y, spec, 10, max_newton=k + 1, **kw)
    assert just.converged
    np.testing.assert_array_equal(just.basis, full.basis)
    np.testing.assert_array_equal(just.newton_iterations, full.newton_iterations)
    with pytest.warns(ConvergenceWarning, match="max_newton"):
        short = ref.ssvr_srs(X, y, spec, 10, max_newton=k, **kw)
    assert not short.converged


def test_newton_iterations_count_the_newton_steps_taken():
    """newton_iterations records, for each sub-problem, the Newton steps finite Newton took (the
    stopping test holds at the start of the next iteration): their sum is the number of steps."""
    X, y, spec = _problem(n=80, seed=2)
    steps = []

    class Counting(ref.SSVROps):
        def take_step(self, t):
            steps.append(t)
            return super().take_step(t)

    res = ref.ssvr_srs(X, y, spec, 10, epsilon=0.01, delta=0.05, random_state=0, ops_class=Counting)
    assert res.converged and res.newton_iterations.max() >= 2
    assert int(res.newton_iterations.sum()) == len(steps)


def test_no_n_by_n_matrix_and_duplicates_are_rejected():
    """Duplicated points give identical kernel columns: the dependency rule discards them."""
    X, y, spec = _problem(n=20, seed=6)
    X2, y2 = np.vstack([X, X]), np.concatenate([y, y])
    for solver in (ref.ssvr_srs, fast.ssvr_srs):
        with pytest.warns(UserWarning, match=r"stopped at \d+ < n_basis=40 .* numerically dependent"):
            res = solver(X2, y2, spec, 40, n_candidates=100, tol=0.0, random_state=0)
        assert len(res.basis) <= 20
        assert len(np.unique(X2[res.basis], axis=0)) == len(res.basis)
        assert res.stop_reason == "no_candidates" and res.n_rejected >= 20


# ------------------------------------------------------------------ the estimator
@parametrize_with_checks([SparseSVR(random_state=0), SparseSVR(random_state=0, impl="ref")])
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_estimator_fast_equals_ref_and_fits(impl):
    X, y = friedman(600, which=3, random_state=0)
    X = (X - X.min(0)) / (X.max(0) - X.min(0)) * 2 - 1
    est = SparseSVR(n_basis=30, lam=1e-3, epsilon=0.0, gamma=1.0, random_state=0, impl=impl).fit(X, y)
    other = SparseSVR(n_basis=30, lam=1e-3, epsilon=0.0, gamma=1.0, random_state=0,
                      impl="ref" if impl == "fast" else "fast").fit(X, y)
    np.testing.assert_array_equal(est.basis_indices_, other.basis_indices_)
    np.testing.assert_allclose(est.predict(X), other.predict(X), atol=PRED_TOL * np.abs(y).max())
    assert est.coef_.shape == (30,) and est.basis_vectors_.shape == (30, 4)
    assert np.all(np.diff(est.objective_history_) <= 0)
    assert est.score(X, y) > 0.5


@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_default_delta_is_the_robust_rule_and_scale_equivariant(impl):
    """delta='auto' (issue 15): Delta = epsilon + 3 * 1.4826 MAD(y) (scipy's normal-scaled MAD), so fitting
    c*y gives the same basis and c times the predictions (on main, Delta = 0.3 in absolute units was a
    different loss for every c); fast and ref agree on the defaults' path."""
    from scipy.stats import median_abs_deviation
    X, y = friedman(400, which=3, random_state=0)
    X = (X - X.min(0)) / (X.max(0) - X.min(0)) * 2 - 1
    fits = {c: SparseSVR(n_basis=15, random_state=0, impl=impl).fit(X, c * y) for c in (1.0, 1e3, 1e-3)}
    mad = median_abs_deviation(y, scale="normal")
    assert fits[1.0].delta_ == pytest.approx(3 * mad, rel=1e-3)    # scipy's 1/Phi^-1(3/4) vs 1.4826
    for c, est in fits.items():
        assert est.delta_ == pytest.approx(c * fits[1.0].delta_, rel=1e-12)
        np.testing.assert_array_equal(est.basis_indices_, fits[1.0].basis_indices_)
        np.testing.assert_allclose(est.predict(X), c * fits[1.0].predict(X), rtol=1e-7, atol=1e-9 * c)
    eps = SparseSVR(n_basis=5, epsilon=0.05, random_state=0, impl=impl).fit(X, y)
    assert eps.delta_ == pytest.approx(0.05 + 3 * mad, rel=1e-3)
    other = SparseSVR(n_basis=15, random_state=0, impl="ref" if impl == "fast" else "fast").fit(X, y)
    np.testing.assert_array_equal(other.basis_indices_, fits[1.0].basis_indices_)
    np.testing.assert_allclose(other.predict(X), fits[1.0].predict(X), atol=PRED_TOL * np.abs(y).max())


@pytest.mark.slow
def test_defaults_reach_a_tuned_svr_on_abalone():
    """Issue 15's target on abalone (3000 training / 1177 test points, inputs scaled to [-1, 1]): SparseSVR
    with its defaults and n_basis = 5% of the support vectors of an SVR tuned by grid search over
    (C, epsilon, gamma) on a held-out third (best: C=2048, epsilon=0.6 and gamma=0.05 on standardised
    targets, chosen from C in {0.5 .. 32768}, epsilon in {0.02 .. 0.9}, gamma in {0.0125 .. 1.6}) is within
    1% of that SVR's test RMSE.  Main's defaults (epsilon=0.1, Delta=0.3 in the targets' units) were 4.6%
    worse."""
    _, _, ratios = _defaults_vs_tuned_svr("abalone", "quick", C=2048.0, epsilon=0.6, gamma=0.05)
    assert np.median(ratios) <= 1.01


def _defaults_vs_tuned_svr(name, mode, **svr_params):
    """Issue 15's comparison on reports.ssvr's data set ``name`` in ``mode`` (seed 0): an SVR with the given
    (tuned) parameters on standardised targets, then SparseSVR with its loss defaults, lam = 1e-2 (the
    default of issue 15, before lam='auto') and n_basis = 5% of that SVR's support vectors for
    random_state 0, 1, 2.  Returns (n_basis, the fits, their test RMSEs over the
    SVR's)."""
    from reports.ssvr import load
    X, ys, Xt, yt, (mu, sd) = load(name, mode, 0)
    svr = SVR(cache_size=2000, **svr_params).fit(X, ys)
    rmse_svr = np.sqrt(np.mean((svr.predict(Xt) * sd + mu - yt) ** 2))
    m = len(svr.support_) // 20
    fits = [SparseSVR(n_basis=m, lam=1e-2, random_state=rs).fit(X, ys * sd + mu) for rs in range(3)]
    ratios = [np.sqrt(np.mean((f.predict(Xt) - yt) ** 2)) / rmse_svr for f in fits]
    return m, fits, ratios


@pytest.mark.slow
@pytest.mark.timeout(5400)
def test_defaults_reach_a_tuned_svr_on_friedman3_at_the_papers_size():
    """Issue 15's target at the paper's Friedman3 (002 Table 2: 30,000 training, 20,000 test points;
    reports.ssvr's full mode, seed 0): SparseSVR with its defaults and n_basis = 5% of a tuned SVR's
    support vectors is within 1% of that SVR's test RMSE (median of 3 random_states).  The SVR's
    hyper-parameters are the report's 5-fold CV choice on 2,000 of the points (C = 1000, gamma = 1/4,
    eps = 0.2, standardised targets).  The default tol=0 matters here: the basis grows until the
    Gaussian's numerical rank stops it (~650 functions), where tol=1e-6 stopped it at ~175 (2.9% worse).
    About 20 minutes, most of it the SVR."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)   # "stopped at k < n_basis: numerically dependent"
        m, fits, ratios = _defaults_vs_tuned_svr("friedman3", "full", C=1000.0, epsilon=0.2, gamma=0.25)
    assert np.median(ratios) <= 1.01
    assert all(f.n_basis_ <= m and f.stop_reason_ in ("n_basis", "no_candidates") for f in fits)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="at 3,000 points (reports.ssvr's quick size; the paper's is 30,000, above) "
                   "and 5% of the SVR's support vectors the sparse "
                   "Gaussian expansion is approximation-limited: 1.066x the SVR's RMSE with the defaults, and the best "
                   "setting found by trying lam in 1e-5..1e-1, widths 0.27-2x 'beta', Delta=inf, eps, |O|=400 and the "
                   "Laplacian kernel against the test set itself was 1.017x (gamma=0.15, lam=3e-4)")
def test_defaults_reach_a_tuned_svr_on_friedman3():
    """reports.ssvr's quick Friedman3 (3000 training / 3000 test points) and its tuned SVR (C=100, gamma=0.25,
    epsilon=0.2 on standardised targets, chosen by the report's CV over C in {0.1 .. 1000}, gamma in {1/16 .. 4},
    epsilon in {0.05, 0.2})."""
    _, _, ratios = _defaults_vs_tuned_svr("friedman3", "quick", C=100.0, epsilon=0.2, gamma=0.25)
    assert np.median(ratios) <= 1.01


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "poly"])
@pytest.mark.parametrize("n", [37, 203])
def test_fast_equals_ref_with_residuals_on_the_zone_boundaries(kernel, n):
    """Targets exactly at +-eps and +-Delta (residuals r = -y on the kinks of the loss at beta = 0) and
    an n that is not a multiple of the SIMD width: the SIMD candidate scoring, the branch-free zone
    and loss updates and the line search's breakpoint filter must keep fast == ref."""
    rng = np.random.default_rng(n)
    eps, delta = 0.1, 0.4
    X = rng.uniform(-1, 1, size=(n, 3))
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1]
    y[::3] = rng.choice([-delta, -eps, eps, delta, 0.0], size=len(y[::3]))
    opts = {"gamma": 1.5} if kernel != "poly" else {"gamma": 0.5, "degree": 2, "coef0": 1.0}
    spec = make_kernel_spec(X, kernel, **opts)
    kw = dict(lam=1e-3, epsilon=eps, delta=delta, n_candidates=20, random_state=n)
    m = 8 if kernel == "poly" else min(25, n // 2)      # degree-2 poly in 3 dimensions has rank 10
    a = ref.ssvr_srs(X, y, spec, m, **kw)
    b = fast.ssvr_srs(X, y, spec, m, n_jobs=1, **kw)
    assert a.n_rejected == 0 and b.n_rejected == 0
    np.testing.assert_array_equal(a.basis, b.basis)
    np.testing.assert_array_equal(a.newton_iterations, b.newton_iterations)
    np.testing.assert_allclose(a.objective_history, b.objective_history, rtol=OBJ_RTOL, atol=1e-12)


def _grow(ops, points, max_newton=50):
    """Add ``points`` to the basis of an ops object as the loop does (without the selection), refitting
    beta_P by finite Newton after each."""
    for s in points:
        ops.load_candidates(np.array([s], dtype=np.intp))
        piv2, h_ss = ops.cholesky_row(0)
        assert piv2 > ref.DEP_RTOL * h_ss > 0
        ops.append()
        ref.finite_newton(ops, max_newton)


@pytest.mark.parametrize("d, layout", [(4, "dense"), (20, "dense"), (20, "csr")])
def test_fast_scores_match_the_reference_criterion(d, layout):
    """The candidate scoring gives eq. (16)'s numerator and |K_bar_j|^2 to rounding on each of the kernel-row
    layer's paths: fused (SIMD) sums below d = 16, BLAS rows (GEMM blocks) from there on, CSR rows."""
    X, y, spec = _problem(n=301, d=d, seed=7, gamma=12.0 / d)
    Xin = sp.csr_matrix(X) if layout == "csr" else X
    fit = fast.FastSSVROps(Xin, y, spec, 10, 1e-2, 0.1, 0.3)
    _grow(fit, (5, 17, 40))
    g = fit.loss_derivative()
    beta = fit.beta()
    O = np.arange(0, 301, 7, dtype=np.intp)
    runs = [fit.scores(O, g, nthreads) for nthreads in (1, 2)]
    K_O = kernel_block(spec, X, X[O])
    K_PO = K_O[[5, 17, 40]]
    for num, kn in runs:
        np.testing.assert_allclose(num, g @ K_O + 2e-2 * (beta @ K_PO), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(kn, (K_O ** 2).sum(0) + (K_PO ** 2).sum(0), rtol=1e-12)
    assert all(np.array_equal(a, b) for a, b in zip(*runs))   # the threads change no bit


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "poly"])
def test_ops_classes_agree_step_by_step(kernel):
    """SSVROps (NumPy) and FastSSVROps (C) behind the one loop: every method gives the same values to
    rounding when both are driven through the same steps (selection terms, new Cholesky rows, Newton
    directions, step lengths, zone changes, factor updates).  Their sums run in different orders, so
    the states drift apart by rounding as the steps accumulate: values are compared at the tolerances
    of the whole-fit comparisons (OBJ_RTOL, PRED_TOL), zone changes exactly."""
    X, y, spec = _problem(n=157, d=3, seed=12, gamma=2.0, kernel=kernel)
    m = 8 if kernel == "poly" else 24                   # degree-2 poly in 3 dimensions has rank 10
    args = (X, y, spec, m, 1e-3, 0.05, 0.4)
    a, b = ref.SSVROps(*args), fast.FastSSVROps(*args, n_jobs=1)
    assert a.objective() == pytest.approx(b.objective(), rel=1e-13)
    rng = np.random.default_rng(0)
    updates = set()
    for step in range(m):
        np.testing.assert_allclose(a.loss_derivative(), b.loss_derivative(), rtol=0, atol=PRED_TOL)
        O = rng.choice(np.setdiff1d(np.arange(157), a.basis), 20, replace=False)
        a.load_candidates(O)
        b.load_candidates(O)
        g = a.loss_derivative()
        (num_a, kn_a), (num_b, kn_b) = a.criterion_terms(g), b.criterion_terms(g)
        g_bar = np.sqrt(g @ g + 4e-6 * (a.beta() @ a.beta()))
        np.testing.assert_allclose(num_b, num_a, rtol=0, atol=OBJ_RTOL * g_bar * np.sqrt(kn_a).max())
        np.testing.assert_allclose(kn_b, kn_a, rtol=OBJ_RTOL)
        j = int(np.argmax(ref.srs_scores(num_a, kn_a, g, a.beta(), 1e-3)))
        piv2, h_ss = a.cholesky_row(j)
        assert piv2 > ref.DEP_RTOL * h_ss
        np.testing.assert_allclose(b.cholesky_row(j), (piv2, h_ss), rtol=OBJ_RTOL)
        a.append()
        b.append()
        assert a.m == b.m == step + 1
        for _ in range(50):
            (dec_a, L_a), (dec_b, L_b) = a.newton_direction(), b.newton_direction()
            assert L_a == pytest.approx(L_b, rel=OBJ_RTOL)
            assert dec_a == pytest.approx(dec_b, rel=1e-6, abs=OBJ_RTOL * max(L_a, 1.0))
            if dec_a <= ref.NEWTON_RTOL * max(L_a, 1.0):
                break
            t = a.step_length()
            assert t == pytest.approx(b.step_length(), rel=1e-6)
            changes = a.take_step(t)
            assert b.take_step(t) == changes
            if changes[1]:
                rank_one = changes[1] * ref.RANK1_RATIO <= a.m
                a.update_factor(rank_one)
                b.update_factor(rank_one)
                updates.add(rank_one)
            if not changes[0]:
                break
        K = kernel_block(spec, X, X[a.basis])
        assert np.max(np.abs(K @ a.beta() - K @ b.beta())) <= PRED_TOL * max(1.0, np.abs(y).max())
        assert a.objective() == pytest.approx(b.objective(), rel=OBJ_RTOL)
    assert updates == ({False} if kernel == "poly" else {True, False})   # rank-one updates need m >= 16


def test_parallel_scoring_is_thread_count_independent():
    """Above the parallel threshold (|O| n d >= 2e6) the candidates are scored by several threads;
    each candidate's sums must stay private to its thread, so scores, basis and coefficients are
    the same bit for bit with one thread or two.  (A shared accumulator once changed the selected
    basis at n = 30k; short columns and many candidates make such a race show up within a few calls.)"""
    n, d = 600, 4
    X, y, spec = _problem(n=n, d=d, seed=11)
    fit = fast.FastSSVROps(X, y, spec, 4, 1e-2, 0.1, 0.3)
    _grow(fit, (3, 90, 450))
    g = fit.loss_derivative()
    O = np.tile(np.arange(n, dtype=np.intp), 6)
    assert len(O) * n * d >= 2_000_000
    ref_num, ref_kn = fit.scores(O, g, 1)
    K_O = kernel_block(spec, X, X[O])
    np.testing.assert_allclose(ref_num, g @ K_O + 2e-2 * (fit.beta() @ K_O[[3, 90, 450]]),
                               rtol=1e-10, atol=1e-10)
    for _ in range(20):
        num, kn = fit.scores(O, g, 2)
        np.testing.assert_array_equal(num, ref_num)
        np.testing.assert_array_equal(kn, ref_kn)
    n = 6000
    Xf, yf = friedman(n, which=3, random_state=2)
    Xf = 2 * (Xf - Xf.min(0)) / (Xf.max(0) - Xf.min(0)) - 1
    models = [SparseSVR(n_basis=12, lam=1e-3, epsilon=0.05, delta=0.3, gamma=1.0, n_candidates=100,
                        random_state=0, n_jobs=j).fit(Xf, yf) for j in (1, 2)]
    np.testing.assert_array_equal(models[0].basis_indices_, models[1].basis_indices_)
    np.testing.assert_array_equal(models[0].coef_, models[1].coef_)


@pytest.mark.parametrize("params, name", [
    (dict(n_basis=0), "n_basis"), (dict(n_basis=11), "n_basis"),    # more than n_samples
    (dict(n_basis=2.5), "n_basis"), (dict(lam=0.0), "lam"),
    (dict(lam=-1.0), "lam"), (dict(lam=np.nan), "lam"),
    (dict(epsilon=-0.1), "epsilon"), (dict(epsilon=np.inf), "epsilon"),
    (dict(epsilon=0.3, delta=0.3), "delta"), (dict(epsilon=0.5, delta=0.3), "delta"),
    (dict(n_candidates=0), "n_candidates"), (dict(selection="best"), "selection"),
    (dict(impl="gpu"), "impl"), (dict(tol=-1.0), "tol"),
    (dict(max_newton=0), "max_newton"), (dict(gamma=-1.0), "gamma"),
    (dict(kernel="sigmoid"), "kernel"), (dict(lam="big"), "lam"),
    (dict(fit_intercept="yes"), "fit_intercept"), (dict(n_jobs=0), "n_jobs"), (dict(delta="big"), "delta"),
])
def test_bad_parameters(params, name):
    """Every bad parameter, of any type, raises scikit-learn's InvalidParameterError naming it."""
    X, y, _ = _problem(n=10)
    with pytest.raises(InvalidParameterError, match=f"'{name}' parameter of SparseSVR"):
        SparseSVR(**params).fit(X, y)


@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_bad_data(impl):
    X, y, _ = _problem(n=10)
    for bad in (np.nan, np.inf):
        Xb = X.copy()
        Xb[0, 0] = bad
        with pytest.raises(ValueError, match="X"):
            SparseSVR(impl=impl).fit(Xb, y)
        yb = y.copy()
        yb[0] = bad
        with pytest.raises(ValueError, match="y|Input"):
            SparseSVR(impl=impl).fit(X, yb)
    with pytest.raises(ValueError, match="constant"):
        SparseSVR(impl=impl).fit(X, np.ones(10))
    with pytest.raises(ValueError, match="inconsistent|samples"):
        SparseSVR(impl=impl).fit(X, y[:-1])
    est = SparseSVR(impl=impl, n_basis=5).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        est.predict(X[:, :1])


# ------------------------------------------------------------------ baselines
@pytest.mark.parametrize("seed", range(4))
def test_exact_svr_matches_libsvm(seed):
    """The tutorial-style SMO epsilon-SVR and nu-SVR reach LIBSVM's dual objective and predictions."""
    rng = np.random.default_rng(seed)
    n, d = 70, 3
    X = rng.normal(size=(n, d))
    y = np.sin(X[:, 0]) + 0.3 * rng.normal(size=n)
    C = [0.5, 3.0, 10.0, 1.0][seed]
    spec = make_kernel_spec(X, "rbf", gamma=0.5)
    K = kernel_block(spec, X, X)
    ours = fit_svr(X, y, spec, C=C, epsilon=0.2)
    lib = SVR(C=C, epsilon=0.2, gamma=0.5, tol=1e-10).fit(X, y)
    dl = np.zeros(n)
    dl[lib.support_] = lib.dual_coef_[0]
    dual_lib = -0.5 * dl @ K @ dl - 0.2 * np.abs(dl).sum() + y @ dl
    assert ours.converged and ours.gap <= 1e-8 * (abs(ours.primal_objective) + 1)
    assert ours.dual_objective == pytest.approx(dual_lib, rel=1e-7, abs=1e-9)
    assert ours.dual_objective <= ours.primal_objective + 1e-12
    np.testing.assert_allclose(ours.predict(K), lib.predict(X), atol=1e-4)
    nu = [0.2, 0.5, 0.8, 0.4][seed]
    ours = nu_svr(K, y, C=C, nu=nu)
    lib = NuSVR(C=C, nu=nu, gamma=0.5, tol=1e-10).fit(X, y)
    dl = np.zeros(n)
    dl[lib.support_] = lib.dual_coef_[0]
    assert ours.converged
    assert ours.dual_objective == pytest.approx(-0.5 * dl @ K @ dl + y @ dl, rel=1e-7, abs=1e-9)
    assert abs(ours.alpha.sum() + ours.alpha_star.sum() - C * nu * n) <= 1e-8 * C * n
    np.testing.assert_allclose(ours.predict(K), lib.predict(X), atol=1e-4)
    # nu bounds the fraction of errors from above and of support vectors from below (tutorial Thm.)
    resid = np.abs(ours.predict(K) - y)
    assert np.mean(resid > ours.epsilon + 1e-6) <= nu + 1e-9
    assert np.mean(ours.coef != 0) >= nu - 1e-9


def test_exact_svr_rejects_bad_input_and_warns_at_bound():
    X, y, spec = _problem(n=20)
    K = kernel_block(spec, X, X)
    with pytest.raises(ValueError, match="C"):
        epsilon_svr(K, y, C=0.0)
    with pytest.raises(ValueError, match="epsilon"):
        epsilon_svr(K, y, epsilon=-1.0)
    with pytest.raises(ValueError, match="nu"):
        nu_svr(K, y, nu=1.5)
    with pytest.warns(ConvergenceWarning):
        epsilon_svr(K, y, C=100.0, epsilon=0.0, max_iter=3)


def test_rss_reaches_the_svr_when_all_support_vectors_are_selected():
    """(25) is a projection: once the reduced set spans w, RSS reproduces the SVR exactly."""
    X, y, spec = _problem(n=60, seed=0)
    svr = SVR(C=10.0, epsilon=0.05, gamma=3.0).fit(X, y)
    errors = []

    def cb(P, alpha):
        f = kernel_block(spec, X, X[P]) @ alpha + svr.intercept_[0]
        errors.append(np.abs(f - svr.predict(X)).max())

    res = rss_from_svr(svr, X, spec, 60, n_candidates=60, random_state=0, callback=cb)
    assert set(svr.support_) <= set(res.basis.tolist())
    assert errors[-1] < 1e-6
    assert np.all(np.diff(res.explained) >= -1e-9)    # (25) never increases as vectors are added


@pytest.mark.slow
def test_ssvr_close_to_svr_with_few_basis_functions():
    """Friedman3 (3:1 SNR) as in 002 Sec. 4: SSVR-SRS with m = 240 basis functions (Table 2; Table 3
    reports 203 used at lam = 1e-3 to match SVR's error with 9540 support vectors) gets within 3% of a
    full SVR's test RMSE, each with its kernel width chosen on held-out data (the paper tunes each
    method's free parameters by cross validation; Delta = 0.3 fixed).

    (With 100 basis functions at SVR's gamma this was 13% worse -- 0.1395 vs 0.1230: fast and ref agree
    and every sub-problem converged, so not a solver bug but more than the paper claims; at 4000
    training points 240 functions at gamma = 1 are 5% worse, 400 equal.)"""
    X, y = friedman(4000, which=3, random_state=0)
    Xv, yv = friedman(2000, which=3, random_state=2)
    Xt, yt = friedman(2000, which=3, random_state=1)
    lo, hi = X.min(0), X.max(0)
    X, Xv, Xt = [(A - lo) / (hi - lo) * 2 - 1 for A in (X, Xv, Xt)]

    def rmse(model, A, b):
        return np.sqrt(np.mean((model.predict(A) - b) ** 2))

    grid = (0.25, 0.5, 1.0, 2.0)
    svr = min((SVR(C=10.0, epsilon=0.05, gamma=g).fit(X, y) for g in grid), key=lambda e: rmse(e, Xv, yv))
    est = min((SparseSVR(n_basis=240, lam=1e-3, epsilon=0.05, gamma=g, random_state=0, tol=0.0).fit(X, y)
               for g in grid), key=lambda e: rmse(e, Xv, yv))
    assert est.converged_ and est.n_basis_ == 240
    assert rmse(est, Xt, yt) <= 1.03 * rmse(svr, Xt, yt)
    assert est.n_basis_ <= len(svr.support_) // 10


# ------------------------------------------------------------------ n_basis='auto', lam='auto'
def _smooth_and_noise(n=900, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    return X, np.sin(2 * X[:, 0]) * np.cos(X[:, 1]), rng.normal(size=n)


def test_auto_is_deterministic_and_fast_equals_ref():
    """The hold-out split and the candidate draws come from random_state alone, and both implementations
    score the same basis with the same NumPy code: the same seed gives the same basis, lam and size in
    repeated fits and in both implementations (fitted values to the solvers' rounding)."""
    X, y, _ = _smooth_and_noise()
    y = y + 0.1 * np.random.default_rng(1).normal(size=len(y))
    a, b = (SparseSVR(random_state=3).fit(X, y) for _ in range(2))
    r = SparseSVR(random_state=3, impl="ref").fit(X, y)
    for other in (b, r):
        np.testing.assert_array_equal(a.basis_indices_, other.basis_indices_)
        assert (a.lam_, a.n_basis_) == (other.lam_, other.n_basis_)
        np.testing.assert_array_equal(a.validation_path_.n_basis, other.validation_path_.n_basis)
        np.testing.assert_allclose(a.validation_path_.mse, other.validation_path_.mse, rtol=1e-6)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_allclose(a.predict(X), r.predict(X), atol=PRED_TOL * np.abs(y).max())
    vp = a.validation_path_
    assert vp.n_val == 180 and vp.n_fit == 720 and vp.mse.shape == (len(vp.n_basis), len(ref.AUTO_LAMS))
    # (the refit on all rows at the chosen lam leaves out functions numerically dependent there)
    assert a.lam_ in ref.AUTO_LAMS and 1 <= a.n_basis_ <= vp.n_basis.max() and a.score(X, y) > 0.95
    c = SparseSVR(random_state=4).fit(X, y)
    assert not np.array_equal(np.sort(c.basis_indices_[:10]), np.sort(a.basis_indices_[:10]))


def test_auto_regularises_noise_more_than_a_smooth_function():
    """Pure noise: the hold-out prefers the strongest lam and the smallest basis; a smooth function: a weak
    lam and a larger basis, fitted closely."""
    X, smooth, noise = _smooth_and_noise()
    fs = SparseSVR(random_state=0).fit(X, smooth)
    fn = SparseSVR(random_state=0).fit(X, noise)
    assert fn.lam_ >= 1.0 and fs.lam_ <= 1e-2 and fn.lam_ >= 100 * fs.lam_
    assert fn.n_basis_ <= fs.n_basis_ and fn.n_basis_ <= 50
    assert fs.score(X, smooth) > 0.99
    # the chosen lam is the hold-out's best at one of the sizes scored
    vp = fs.validation_path_
    assert any(vp.lam[np.argmin(row)] == fs.lam_ for row in vp.mse)


def test_auto_with_one_parameter_given():
    """n_basis given, lam='auto': the basis has that size and lam comes from the grid; lam given,
    n_basis='auto': lam is kept and the size chosen; both given: no hold-out (the fit of before)."""
    X, y, _ = _smooth_and_noise(400)
    e = SparseSVR(n_basis=30, random_state=0).fit(X, y)
    assert e.n_basis_ == 30 and e.lam_ in ref.AUTO_LAMS and list(e.validation_path_.n_basis) == [25, 30]
    e = SparseSVR(lam=0.5, random_state=0).fit(X, y)
    assert e.lam_ == 0.5 and e.validation_path_.mse.shape[1] == 1
    e = SparseSVR(n_basis=30, lam=1e-2, random_state=0).fit(X, y)
    direct = ref.ssvr_srs(X, y - y.mean(), e.kernel_spec_, 30, lam=1e-2, epsilon=0.0, delta=e.delta_,
                          random_state=0)
    np.testing.assert_array_equal(e.basis_indices_, direct.basis)
    assert e.validation_path_.n_val == 0 and e.validation_path_.n_basis.size == 0 and e.lam_ == 1e-2


def test_auto_refit_is_optimal_on_all_rows():
    """The refit solves (18) on all rows for the kept basis: the gradient (22) vanishes there."""
    X, y, _ = _smooth_and_noise(300)
    e = SparseSVR(random_state=0, impl="ref").fit(X, y)
    K_P = kernel_block(e.kernel_spec_, X, e.basis_vectors_)
    K_PP = kernel_block(e.kernel_spec_, e.basis_vectors_, e.basis_vectors_)
    r = K_P @ e.coef_ - (y - e.intercept_)
    g = ref.gradient(K_P, K_PP, e.coef_, r, e.lam_, 0.0, e.delta_)
    assert np.abs(g).max() <= 1e-6 * max(1.0, np.abs(K_P.T @ y).max())


def test_auto_errors_and_callback_stop():
    X, y, _ = _smooth_and_noise(50)
    with pytest.raises(ValueError, match="fit rows of the hold-out split"):
        SparseSVR(n_basis=45, random_state=0).fit(X, y)          # 45 > the 40 fit rows
    SparseSVR(n_basis=45, lam=1e-2, random_state=0).fit(X, y)    # no hold-out: fine
    with pytest.raises(ValueError, match="at least 3 samples"):
        SparseSVR().fit(X[:2], y[:2])
    with pytest.raises(InvalidParameterError, match="'n_basis' parameter"):
        SparseSVR(n_basis="many").fit(X, y)
    seen = []
    e = SparseSVR(n_basis=20, lam=1e-2, random_state=0).fit(X, y, callback=lambda P, b: seen.append(len(P)) or len(P) == 7)
    assert e.n_basis_ == 7 and e.stop_reason_ == "callback" and seen == list(range(1, 8))
    got = []
    SparseSVR(random_state=0).fit(X, y, callback=lambda P, b: got.append(P.copy()))
    assert all(np.all(P < len(X)) for P in got) and len(got) >= 1


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), m=st.integers(1, 12), n=st.integers(15, 40))
def test_ridge_path_is_the_direct_solve(seed, m, n):
    """ridge_path_mse's one eigendecomposition gives, for every lam, the hold-out MSE of the direct solve
    of (G + lam K_PP) beta = K_FP'y."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    spec = make_kernel_spec("rbf", gamma=0.7)
    P = rng.choice(n, size=min(m, n), replace=False)
    K_F = kernel_block(spec, X, X[P])
    Xv = rng.normal(size=(7, 2))
    K_V = kernel_block(spec, Xv, X[P])
    y, yv = rng.normal(size=n), rng.normal(size=7)
    B = K_F[P]
    assume(np.linalg.cond(B) < 1e8)
    lams = (1e-3, 0.1, 10.0)
    got = ref.ridge_path_mse(K_F.T @ K_F, B, K_F.T @ y, K_V, yv, lams)
    want = [np.mean((yv - K_V @ np.linalg.solve(K_F.T @ K_F + lam * B, K_F.T @ y)) ** 2) for lam in lams]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)


# ------------------------------------------------------------------ n_basis='auto': the dense alternative
def _interaction(n, d, order, seed):
    """Gaussian inputs in d dimensions and a product of ``order`` of them: with the isotropic 'beta' width the
    signal sits in many small kernel eigen-directions, which a few hundred basis functions do not span."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.prod(X[:, :order], axis=1) + 0.1 * rng.standard_normal(n)


def _sparse_only(monkeypatch, X, y, **kw):
    """The fit with the dense alternative switched off (no set is small enough for it)."""
    with monkeypatch.context() as mp:
        mp.setattr(ref, "AUTO_DENSE_MAX_ROWS", 0)
        return SparseSVR(random_state=0, **kw).fit(X, y)


def _holdout_split(n, seed=0):
    from refimpl.meb import make_rng
    return ref.holdout_split(n, make_rng(seed))


def test_kernel_ridge_mse_is_the_least_squares_fit_of_every_fit_row():
    """kernel_ridge_mse's (K_FF + lam I)^{-1} y_F is ridge_path_mse's fit with the basis P = F."""
    rng = np.random.default_rng(0)
    X, Xv = rng.normal(size=(40, 3)), rng.normal(size=(9, 3))
    y, yv = rng.normal(size=40), rng.normal(size=9)
    spec = make_kernel_spec("rbf", gamma=0.3)
    K, K_V = kernel_block(spec, X, X), kernel_block(spec, Xv, X)
    for lam in (1e-3, 0.1, 3.0):
        want = ref.ridge_path_mse(K @ K, K, K @ y, K_V, yv, (lam,))[0]
        np.testing.assert_allclose(ref.kernel_ridge_mse(spec, X, y, Xv, yv, lam), want, rtol=1e-6)


def test_nystrom_residual_is_the_trace_left_out_by_the_basis():
    """HoldoutRule.nystrom_residual = trace(K_FF - K_FP K_PP^{-1} K_PF) / trace(K_FF): 0 for the basis of every
    fit row, 1 > it > 0 for a few functions, and smaller for more of them."""
    rng = np.random.default_rng(1)
    X, Xv = rng.normal(size=(30, 2)), rng.normal(size=(5, 2))
    spec = make_kernel_spec("rbf", gamma=0.5)
    rule = ref.HoldoutRule(spec, X, rng.normal(size=30), Xv, rng.normal(size=5), (1.0,), [30], stop=False)
    order = rng.permutation(30)
    for m in range(1, 31):
        rule(order[:m], None)
    K = kernel_block(spec, X, X)
    got = [rule.nystrom_residual(order[:m]) for m in (3, 10, 30)]
    P = order[:3]
    want = np.trace(K - K[:, P] @ np.linalg.solve(K[np.ix_(P, P)], K[P])) / np.trace(K)
    np.testing.assert_allclose(got[0], want, rtol=1e-8)
    assert 1 > got[0] > got[1] > 0 and abs(got[2]) < 1e-6


@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_auto_keeps_the_dense_model_where_the_basis_cannot_follow(impl, monkeypatch):
    """A three-way product in 16 Gaussian inputs: the sparse basis's hold-out curve is flat and leaves much of
    the kernel unspanned, kernel ridge on every fit row wins on the hold-out by more than the margin, so the
    model is kernel ridge on all rows (its coefficients are the direct solve), and it predicts new data better
    than the sparse model the rule would have kept."""
    X, y = _interaction(1500, 16, 3, 0)
    Xt, yt = _interaction(2000, 16, 3, 1)
    e = SparseSVR(random_state=0, impl=impl).fit(X, y)
    vp = e.validation_path_
    F, V = _holdout_split(len(y))
    assert vp.n_basis[-1] == vp.n_fit == len(F)
    assert vp.mse[-1].min() < vp.mse[:-1].min() - ref.AUTO_DENSE_GAIN * np.var(y[V])
    assert e.n_basis_ == len(y) and np.array_equal(e.basis_indices_, np.arange(len(y)))
    assert e.lam_ == min(ref.AUTO_LAMS) and np.isfinite(vp.mse[-1]).sum() == 1
    K = kernel_block(e.kernel_spec_, X, X)
    np.testing.assert_allclose(e.coef_, np.linalg.solve(K + e.lam_ * np.eye(len(y)), y - e.intercept_),
                               rtol=1e-6, atol=1e-8 * np.abs(e.coef_).max())
    sparse = _sparse_only(monkeypatch, X, y, impl=impl)
    assert sparse.n_basis_ <= ref.AUTO_MAX_BASIS and e.score(Xt, yt) > sparse.score(Xt, yt) + 0.1


def test_dense_model_is_the_same_in_both_implementations_and_saved(tmp_path):
    """Both implementations choose the dense model from the same NumPy scores: the same basis and lam, the
    same coefficients to the rounding of the factorisation (BLAS may split it over threads differently), also
    from CSR input; the model file keeps the path's inf entries."""
    from corevector import load_model, save_model
    X, y = _interaction(1500, 16, 3, 0)
    a, b = (SparseSVR(random_state=0, impl=impl).fit(X, y) for impl in ("fast", "ref"))
    np.testing.assert_array_equal(a.basis_indices_, b.basis_indices_)
    assert a.lam_ == b.lam_
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-6, atol=1e-9 * np.abs(a.coef_).max())
    np.testing.assert_allclose(a.validation_path_.mse, b.validation_path_.mse, rtol=1e-6)
    np.testing.assert_allclose(a.predict(X[:50]), b.predict(X[:50]), atol=PRED_TOL * np.abs(y).max())
    c = SparseSVR(random_state=0).fit(sp.csr_matrix(X), y)          # CSR input: the same dense model
    np.testing.assert_array_equal(c.basis_indices_, a.basis_indices_)
    np.testing.assert_allclose(c.coef_, a.coef_, rtol=1e-6, atol=1e-9 * np.abs(a.coef_).max())
    save_model(a, tmp_path / "dense.cvm")
    c = load_model(tmp_path / "dense.cvm")
    np.testing.assert_array_equal(c.validation_path_.mse, a.validation_path_.mse)
    np.testing.assert_array_equal(c.predict(X[:50]), a.predict(X[:50]))


def test_auto_drops_the_dense_model_where_it_loses(monkeypatch):
    """A four-way product: the dense alternative is scored (flat curve, much of the kernel unspanned) but its
    hold-out MSE is not below the sparse basis's best by the margin, so the model is the sparse one, identical
    to the fit without the alternative."""
    X, y = _interaction(1500, 16, 4, 0)
    e = SparseSVR(random_state=0).fit(X, y)
    vp = e.validation_path_
    F, V = _holdout_split(len(y))
    assert vp.n_basis[-1] == len(F)
    assert not vp.mse[-1].min() < vp.mse[:-1].min() - ref.AUTO_DENSE_GAIN * np.var(y[V])
    s = _sparse_only(monkeypatch, X, y)
    np.testing.assert_array_equal(e.basis_indices_, s.basis_indices_)
    np.testing.assert_array_equal(e.coef_, s.coef_)
    assert e.lam_ == s.lam_ and e.n_basis_ < len(F)
    np.testing.assert_array_equal(vp.mse[:-1], s.validation_path_.mse)


def test_auto_does_not_score_the_dense_model_when_the_basis_spans_the_kernel():
    """Smooth targets in two dimensions: the basis spans the kernel on the fit rows (or the curve is not flat),
    so no dense row is scored."""
    X, smooth, noise = _smooth_and_noise()
    for y in (smooth, noise):
        vp = SparseSVR(random_state=0).fit(X, y).validation_path_
        assert vp.n_basis.max() <= ref.AUTO_MAX_BASIS and np.isfinite(vp.mse).all()
