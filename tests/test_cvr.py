"""CVR ([000]): Property 3 against an independent primal solver, recovery, estimator.

The reference solution here is the *primal* L2-SVR (000 eq. (6)) solved by cvxopt's QP solver in an
explicit feature map (tests/oracles.py: scikit-learn's kernels, K = L L' by eigendecomposition or
the exact map of the linear and quadratic kernels), so it shares nothing with the engine's MEB
formulation: no K~, no Delta, no eta.  Strong duality gives p* = C^2 d*, and
Property 3 says R_tau^2 <= p*/C^2 + eta <= (1+eps)^2 R_tau^2.
"""
import numpy as np
import pytest

from helpers import engine, random_regression
from oracles import FeatureMap, l2svr
from corevector import CVR
from refimpl import cvr
from refimpl.kernels import kernel_block, make_kernel_spec

NUM_TOL = 1e-7  # relative; cvxopt's primal optimum is accurate to ~1e-9 at these tolerances
KERNELS = [("rbf", {"gamma": 0.5}), ("laplacian", {"gamma": 0.7}),
           ("poly", {"gamma": 0.3, "coef0": 1.0, "degree": 2}), ("linear", {"gamma": 0.5})]
EPSILONS = (1e-1, 1e-2, 1e-3, 1e-4)


def primal_l2svr(kernel, opts, X, y, C, mu):
    """000 eq. (6) solved directly by cvxopt in an explicit feature map (tests/oracles.py)."""
    return l2svr(FeatureMap(kernel, X, **opts)(X), y, C, mu)


def _problem(kernel, opts, m=100, seed=0, C=10.0, mu=0.5):
    X, y = random_regression(m, 3, seed)
    spec = make_kernel_spec(X, kernel, **opts)
    return X, y, spec, cvr.cvr_problem(X, y, spec, C, mu)


@pytest.fixture(scope="module")
def primal_cache():
    return {}


@pytest.mark.parametrize("kernel,opts", KERNELS, ids=[k for k, _ in KERNELS])
@pytest.mark.parametrize("eps", EPSILONS)
def test_property_3_against_primal(kernel, opts, eps, impl, primal_cache):
    """R_tau^2 <= p*/C^2 + eta <= (1+eps)^2 R_tau^2 (000 Property 3) under full-scan termination."""
    C, mu = 10.0, 0.5
    X, y, spec, problem = _problem(kernel, opts, m=120, seed=7, C=C, mu=mu)
    if kernel not in primal_cache:
        primal_cache[kernel] = primal_l2svr(kernel, opts, X, y, C, mu)
    p_star = primal_cache[kernel]["p"]
    res = engine(impl)(problem, eps, sample_size=None, random_state=0)
    target = p_star / C ** 2 + problem.eta
    assert res.converged
    assert res.radius2 <= target * (1 + NUM_TOL)
    assert target <= (1 + eps) ** 2 * res.radius2 * (1 + NUM_TOL)
    assert res.certified_ratio <= (1 + eps) ** 2 * (1 + NUM_TOL)


@pytest.mark.parametrize("kernel,opts", KERNELS, ids=[k for k, _ in KERNELS])
def test_small_eps_gives_the_exact_l2svr(kernel, opts, impl):
    """eps -> 0: the recovered w, b, epsbar, xi, xi* (eqs. (9)-(10)) are the primal optimum's."""
    C, mu = 10.0, 0.5
    X, y, spec, problem = _problem(kernel, opts, m=80, seed=11, C=C, mu=mu)
    ref = primal_l2svr(kernel, opts, X, y, C, mu)
    res = engine(impl)(problem, 1e-9, sample_size=None, random_state=0, tol=1e-14)
    model = cvr.recover(problem, res, y, C)
    f = kernel_block(spec, X, X[model.support]) @ model.coef + model.intercept
    scale = 1 + np.abs(y).max()
    np.testing.assert_allclose(f, ref["f_train"], atol=1e-4 * scale, rtol=0)
    assert abs(model.intercept - ref["b"]) <= 1e-4 * scale
    assert abs(model.epsilon_bar - ref["epsbar"]) <= 1e-4 * scale
    xi = np.zeros(len(y))
    xs = np.zeros(len(y))
    xi[model.support], xs[model.support] = model.xi, model.xi_star
    np.testing.assert_allclose(xi, ref["xi"], atol=1e-4 * scale)
    np.testing.assert_allclose(xs, ref["xi_star"], atol=1e-4 * scale)
    # mu is the mean slack (000 Sec. 3.1): sum (xi + xi*) / m = mu sum (lambda + lambda*) = mu
    assert abs((xi.sum() + xs.sum()) / len(y) - mu) <= 1e-9
    # and the dual objective reached is p*/C^2
    assert abs(model.dual_objective - ref["p"] / C ** 2) <= 1e-6 * abs(ref["p"] / C ** 2)


def test_estimator_matches_engine_and_predicts():
    X, y = random_regression(300, 3, 1)
    est = CVR(C=100.0, mu=0.1, gamma=0.5, eps=1e-6, sample_size=None, random_state=0).fit(X, y)
    assert est.certified_ratio_ <= (1 + 1e-6) ** 2 * (1 + 1e-9)
    # w'phi(x) + b computed from the fitted attributes, independently of predict()
    spec = make_kernel_spec(X, "rbf", gamma=0.5)
    f = kernel_block(spec, X, est.support_vectors_) @ est.dual_coef_[0] + est.intercept_[0]
    np.testing.assert_allclose(est.predict(X), f, atol=1e-9)
    # b, epsbar, xi and xi* themselves are checked against the primal of eq. (6) in test_oracles.py
    # a smooth target with noise 0.1 is fitted to about the noise level
    Xt, yt = random_regression(500, 3, 2)
    assert np.sqrt(np.mean((est.predict(Xt) - yt) ** 2)) < 0.3
    assert np.all(est.core_set_ < 2 * len(X)) and len(est.support_) <= len(est.core_set_)


@pytest.mark.parametrize("sample_size", [None, 30])
def test_estimator_fast_equals_ref(sample_size):
    X, y = random_regression(120, 4, 3)
    kw = dict(C=30.0, mu=0.2, kernel="laplacian", gamma=0.5, eps=1e-4, sample_size=sample_size, random_state=4)
    a, b = CVR(impl="ref", **kw).fit(X, y), CVR(impl="fast", **kw).fit(X, y)
    np.testing.assert_array_equal(a.core_set_, b.core_set_)
    np.testing.assert_array_equal(a.support_, b.support_)
    np.testing.assert_allclose(a.dual_coef_, b.dual_coef_, atol=1e-6 * kw["C"])
    Xt, _ = random_regression(100, 4, 5)
    np.testing.assert_allclose(a.predict(Xt), b.predict(Xt), atol=1e-6 * (1 + np.abs(y).max()))


@pytest.mark.parametrize("params,match", [
    ({"mu": 0.0}, "mu"), ({"mu": -1.0}, "mu"), ({"mu": np.nan}, "mu"), ({"C": 0.0}, "C"), ({"C": -2.0}, "C"),
    ({"eps": 0.0}, "eps"), ({"gamma": -1.0}, "gamma"), ({"sample_size": 0}, "sample_size"),
])
def test_bad_parameters(params, match):
    X, y = random_regression(20, 2, 0)
    with pytest.raises(ValueError, match=match):
        CVR(**params).fit(X, y)


def test_bad_data():
    X, y = random_regression(20, 2, 0)
    with pytest.raises(ValueError, match="constant"):
        CVR().fit(X, np.full(20, 3.0))
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        CVR().fit(Xn, y)
    yi = y.copy()
    yi[0] = np.inf
    with pytest.raises(ValueError, match="infinity|inf"):
        CVR().fit(X, yi)
    with pytest.raises(ValueError):
        CVR().fit(X, y[:-1])
    with pytest.raises(TypeError, match="mu"):
        CVR(mu="big").fit(X, y)


def test_metrics_follow_footnote_10():
    y = np.array([2.0, 4.0, 5.0])
    f = np.array([2.5, 3.0, 5.0])
    assert cvr.normalized_rmse(y, f) == pytest.approx(np.sqrt((0.25 + 1.0) / 3) / 5.0)
    assert cvr.mean_relative_error(y, f) == pytest.approx((0.25 + 0.25 + 0.0) / 3)
    with pytest.raises(ValueError, match="0"):
        cvr.mean_relative_error(np.array([0.0, 2.0]), np.array([1.0, 1.0]))
    assert cvr.mean_relative_error(np.array([1.0, 2.0]), np.array([1.5, 2.0])) == pytest.approx(0.25)  # y = 1 is fine
    # negative targets are fine: |(f - y) / y| = |f/y - 1|
    assert cvr.mean_relative_error(np.array([-2.0, 4.0]), np.array([-1.0, 4.0])) == pytest.approx(0.25)


@pytest.mark.parametrize("mu", [1e-6, 1e-3, 1e-2, 1.0])
def test_the_flat_fit_of_a_small_mu_is_the_primal_optimum(mu):
    """CVR(mu=1e-3) on make_regression(noise=5) fits a tube holding every point around a nearly flat function
    (it did so silently).  That is the optimum of the primal itself, not a fault of the engine or of mu's units: CVR's
    mu is in the targets' units, divided by their standard deviation under normalize_y, and its tube weight
    2 C mu M grows with M as the slack term does, so the normalised problem is eq. (6) with C_paper = 2 C mu' m
    and mu' = mu / std(y) -- which cvxopt, solving that primal directly, answers with the same flat function.
    A small mu makes the tube nearly free, and the fit warns naming mu (tests/test_cvr_targets.py)."""
    import warnings

    from sklearn.datasets import make_regression
    from sklearn.exceptions import ConvergenceWarning

    X, y = make_regression(200, 5, noise=5, random_state=0)
    loc, std = y.mean(), y.std()
    mun, C = mu / std, 25.0
    oracle = l2svr(X, (y - loc) / std, 2 * C * mun * len(y), mun)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = CVR(kernel="linear", gamma=1.0, mu=mu, C=C, eps=1e-8, stop="radius", sample_size=None,
                  random_state=0).fit(X, y)
    f_oracle = oracle["f_train"] * std + loc
    np.testing.assert_allclose(est.predict(X), f_oracle, atol=1e-5 * std)
    assert est.epsilon_bar_ == pytest.approx(oracle["epsbar"] * std, rel=1e-5, abs=1e-5 * std)
    r2 = 1 - np.mean((f_oracle - y) ** 2) / np.var(y)
    assert (r2 < 0.5) == (mu <= 1e-3)  # flat at a small mu, a fit of the data at a larger one
