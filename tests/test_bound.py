"""The (1+eps)^2 approximation bound of [001] eqs. (14)-(15), against an exact solver.

Under full-scan termination (sample_size=None), CVM must return R_tau with

    R_tau^2 <= r*^2 <= (1+eps)^2 R_tau^2,

where r* is the radius of the true MEB, computed here independently by cvxopt (conftest.exact_meb,
which brackets r*^2 between a feasible dual value and an enclosing radius).  NUM_TOL is the
relative numerical tolerance of the comparison: the bracket width of cvxopt on these problems is
below 1e-10 relative, and the engines' own arithmetic is exact to ~1e-14.
"""
import numpy as np
import pytest

from helpers import FORMULATIONS, engine, exact_meb, random_problem

# the bound tests run 'radius' at coarse eps on purpose; its accuracy warning is tested on its own below
pytestmark = pytest.mark.filterwarnings("ignore:stop='radius' with eps")

NUM_TOL = 1e-9
EPSILONS = (1e-1, 1e-2, 1e-3, 1e-4)
KERNELS = [("rbf", {"gamma": 0.5}), ("laplacian", {"gamma": 0.7}), ("poly", {"gamma": 0.5, "coef0": 1.0, "degree": 2})]


@pytest.fixture(scope="module")
def exact_case():
    """(problem, (lo, hi, alpha*)) of the shared 150-point problem of a formulation and kernel, solved
    exactly once per module."""
    cache = {}

    def get(formulation, kernel, opts):
        if (formulation, kernel) not in cache:
            problem = random_problem(formulation, kernel, m=150, seed=3, **opts)
            cache[formulation, kernel] = (problem, exact_meb(problem))
        return cache[formulation, kernel]
    return get


@pytest.mark.parametrize("formulation", FORMULATIONS)
@pytest.mark.parametrize("kernel,opts", KERNELS, ids=[k for k, _ in KERNELS])
@pytest.mark.parametrize("eps", EPSILONS)
@pytest.mark.parametrize("solver", ["smo", "active_set"])
def test_radius_within_one_plus_eps_squared(formulation, kernel, opts, eps, solver, impl, exact_case):
    problem, (lo, hi, _) = exact_case(formulation, kernel, opts)
    assert hi - lo <= 1e-10 * hi, "the exact solver did not converge; the test would be meaningless"
    res = engine(impl)(problem, eps, sample_size=None, random_state=0, solver=solver)
    R2 = res.radius2
    assert res.converged
    assert R2 <= hi * (1 + NUM_TOL), "R_tau^2 must be a lower bound on r*^2"
    assert lo <= (1 + eps) ** 2 * R2 * (1 + NUM_TOL), "r*^2 <= (1+eps)^2 R_tau^2 violated"
    # the certificate brackets r* as well, and under full scans it is within (1+eps)^2
    assert res.r_cert2 >= lo * (1 - NUM_TOL)
    assert res.certified_ratio <= (1 + eps) ** 2 * (1 + NUM_TOL)


@pytest.mark.parametrize("formulation", FORMULATIONS)
@pytest.mark.parametrize("kernel,opts", KERNELS[:2], ids=[k for k, _ in KERNELS[:2]])
@pytest.mark.parametrize("solver", ["smo", "active_set"])
def test_small_eps_recovers_exact_solution(formulation, kernel, opts, solver, impl):
    """As eps -> 0 the CVM center tends to the exact MEB center.

    For any center c with enclosing radius r_c, ||c - c*||^2 <= r_c^2 - r*^2 (a property of the
    MEB), so with eps = 1e-7 the center distance must be below ((1+eps)^2 - 1) R^2 + numerical slack.
    """
    problem = random_problem(formulation, kernel, m=100, seed=5, **opts)
    lo, hi, a_star = exact_meb(problem)
    eps = 1e-7
    res = engine(impl)(problem, eps, sample_size=None, random_state=1, solver=solver)
    n = problem.n
    a = np.zeros(n)
    a[res.core_set] = res.alpha
    diff = a - a_star
    center_dist2 = float(diff @ problem.block(np.arange(n), np.arange(n)) @ diff)
    assert center_dist2 <= ((1 + eps) ** 2 - 1) * res.radius2 + 1e-9 * hi
    assert abs(res.radius2 - lo) <= 3 * eps * lo + 1e-9 * hi


@pytest.mark.parametrize("formulation", FORMULATIONS)
@pytest.mark.parametrize("kernel,opts", KERNELS[:2], ids=[k for k, _ in KERNELS[:2]])
@pytest.mark.parametrize("eps", (1e-1, 1e-3))
@pytest.mark.parametrize("stop", ["margin", "gap"])
def test_margin_relative_rules(formulation, kernel, opts, eps, stop, impl, exact_case):
    """Under full scans the rules of refimpl.meb.STOPS hold for the whole set, against the exact r*:

    * 'margin': r*^2 - R^2 <= r_cert^2 - R^2 <= ((1+eps)^2 - 1) S, S the margin term |R^2 - c0|;
    * 'gap': the certified LIBSVM-style gap (max_{alpha>0} g - min g) / (2 S) <= eps, and the FW gap
      r_cert^2 - R^2 it bounds is at most 2 eps S.
    R_tau^2 <= r*^2 holds under every rule (weak duality).
    """
    problem, (lo, hi, _) = exact_case(formulation, kernel, opts)
    res = engine(impl)(problem, eps, sample_size=None, random_state=0, stop=stop)
    assert res.converged and res.stop == stop
    S = res.margin_scale
    c0 = problem.constant_term
    assert S == pytest.approx(abs(res.radius2 - c0) if c0 is not None else res.radius2, rel=1e-12)
    assert res.radius2 <= hi * (1 + NUM_TOL)
    slack = 1e-9 * hi  # the exact bracket's own width
    if stop == "margin":
        assert res.r_cert2 - res.radius2 <= ((1 + eps) ** 2 - 1) * S + slack
        assert lo - res.radius2 <= ((1 + eps) ** 2 - 1) * S + slack
    else:
        assert res.kkt_gap <= eps * (1 + 1e-9) + slack / S
        assert res.r_cert2 - res.radius2 <= 2 * eps * S + slack


def test_radius_rule_warns_when_eps_swamps_the_margin(impl):
    """Loosli & Canu: at large C the margin term is tiny against R^2 ~ kappa + 1 + 1/C; the 'radius'
    rule then says so, and the 'margin' rule (which measures eps against it) does not."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    problem = random_problem("two_class", "rbf", m=120, C=1e6, seed=2, gamma=0.2)
    with pytest.warns(ConvergenceWarning, match="margin term"):
        res = engine(impl)(problem, 1e-3, sample_size=None, random_state=0, stop="radius")
    assert ((1 + 1e-3) ** 2 - 1) * res.radius2 > 0.1 * res.margin_scale
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        res = engine(impl)(problem, 1e-3, sample_size=None, random_state=0, stop="margin")
    assert res.r_cert2 - res.radius2 <= ((1 + 1e-3) ** 2 - 1) * res.margin_scale * (1 + 1e-9)


@pytest.mark.parametrize("formulation", FORMULATIONS)
@pytest.mark.parametrize("kernel,opts", KERNELS[:2], ids=[k for k, _ in KERNELS[:2]])
@pytest.mark.parametrize("eps", (1e-1, 1e-3))
@pytest.mark.parametrize("solver", ["auto", "smo"])
def test_hybrid_rule_keeps_the_bound_and_its_cap(formulation, kernel, opts, eps, solver, impl, exact_case):
    """'hybrid' (the default of CVMClassifier) is at least as tight as 'radius', so under full scans the
    paper's bound R^2 <= r*^2 <= (1+eps)^2 R^2 holds, and the whole set also meets its functional-margin
    cap: r_cert^2 - R^2 <= 2 nu tau, tau = |R^2 - c0 - margin| / 2 (refimpl.driver.STOPS)."""
    from refimpl.driver import HYBRID_NU

    problem, (lo, hi, _) = exact_case(formulation, kernel, opts)
    res = engine(impl)(problem, eps, sample_size=None, random_state=0, stop="hybrid", solver=solver)
    assert res.converged and res.stop == "hybrid"
    assert res.radius2 <= hi * (1 + NUM_TOL)
    assert lo <= (1 + eps) ** 2 * res.radius2 * (1 + NUM_TOL)
    assert res.certified_ratio <= (1 + eps) ** 2 * (1 + NUM_TOL)
    c0 = problem.constant_term or 0.0
    tau = abs(res.radius2 - c0 - res.margin) / 2
    assert res.r_cert2 - res.radius2 <= 2 * HYBRID_NU * tau + 1e-9 * hi


def test_hybrid_two_class_classifies_every_training_point_outside_the_core_set(impl):
    """For the two-class L2-SVM the hybrid cap with nu = 1 reads y_z f(x_z) >= 0 for every point that is
    not a core vector (d_z^2 - R^2 = 2 (rho - y_z f(x_z)) and tau = rho), on overlapping classes, at an eps
    so coarse (0.3) that the radius part of the rule alone would accept almost anything.  f is evaluated
    here independently: f(x) = sum_i alpha_i y_i (k(x_i, x) + 1) (001 eq. (11)), k from scikit-learn."""
    from sklearn.metrics.pairwise import rbf_kernel

    problem = random_problem("two_class", "rbf", m=300, C=1.0, seed=11, gamma=0.5)
    res = engine(impl)(problem, 0.3, sample_size=None, random_state=0, stop="hybrid")
    X, y = problem.X, problem.sign
    coef = res.alpha * y[res.core_set]
    f = rbf_kernel(X, X[res.core_set], gamma=0.5) @ coef + coef.sum()
    outside = np.setdiff1d(np.arange(problem.n), res.core_set)
    assert np.all(y[outside] * f[outside] >= -1e-9 * res.margin)
    # and the test is not vacuous: the classes overlap, so some core vectors are misclassified
    assert np.any(y[res.core_set] * f[res.core_set] < 0)


@pytest.mark.parametrize("formulation", ["two_class", "cvr"])
@pytest.mark.parametrize("nu", [0.3, 0.05])
def test_hybrid_rule_with_a_tighter_cap_keeps_the_bound_and_that_cap(formulation, nu, impl, exact_case):
    """A cap nu < 1 (CVR's ``hybrid_cap``) only tightens 'hybrid': under full scans the paper's bound still
    holds and the whole set meets r_cert^2 - R^2 <= 2 nu tau, at an eps (0.1) where the cap binds."""
    problem, (lo, hi, _) = exact_case(formulation, "rbf", {"gamma": 0.5})
    res = engine(impl)(problem, 1e-1, sample_size=None, random_state=0, stop="hybrid", hybrid_nu=nu)
    assert res.converged
    assert res.radius2 <= hi * (1 + NUM_TOL)
    assert lo <= (1 + 1e-1) ** 2 * res.radius2 * (1 + NUM_TOL)
    c0 = problem.constant_term or 0.0
    tau = abs(res.radius2 - c0 - res.margin) / 2
    assert res.r_cert2 - res.radius2 <= 2 * nu * tau + 1e-9 * hi
    # the cap is what binds here: the radius part alone would allow a gap many times larger
    assert 2 * nu * tau < ((1 + 1e-1) ** 2 - 1) * res.radius2


@pytest.mark.parametrize("cap", [1.0, 0.3])
def test_cvr_hybrid_cap_bounds_every_residual_outside_the_core_set(cap, impl):
    """CVR's hybrid_cap reads |y - f(x)| <= (1 + cap) epsbar for every training point outside the core set
    (full scans); f(x) = sum_i beta_i k(x_i, x) + b evaluated here with scikit-learn's rbf_kernel.  A smaller
    cap fits tighter: its largest such residual is smaller."""
    from sklearn.metrics.pairwise import rbf_kernel

    from corevector import CVR
    from helpers import random_regression
    X, y = random_regression(300, 3, seed=4)
    # the paper's C = 100, mu = 0.05 on the raw targets (CVR's C is the paper's C / (2 mu m))
    reg = CVR(C=100.0 / (2 * 0.05 * len(X)), mu=0.05, normalize_y=False, gamma=0.5, hybrid_cap=cap, eps=0.1,
              sample_size=None, random_state=0, impl=impl).fit(X, y)
    f = rbf_kernel(X, reg.support_vectors_, gamma=0.5) @ reg.dual_coef_[0] + reg.intercept_[0]
    rows = np.unique(reg.core_set_ % len(X))
    outside = np.setdiff1d(np.arange(len(X)), rows)
    assert outside.size > 0
    resid = np.abs(y[outside] - f[outside])
    assert np.all(resid <= (1 + cap) * reg.epsilon_bar_ * (1 + 1e-7) + 1e-9)
    # not vacuous: some points outside the core set lie outside the tube, where the cap is what holds them
    assert resid.max() > reg.epsilon_bar_
