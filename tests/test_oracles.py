"""Every formulation against an independent primal oracle (tests/oracles.py: explicit feature maps,
scikit-learn kernels, cvxopt), and the MEB problem's K~ against one written out here.

refimpl.exact_qp solves the MEB dual built from the same ``problem.block``/``linear_term`` as the
engines, so it checks the solver, not the formulation.  The oracles share nothing with refimpl but
the data: they solve the papers' *primal* problems (001 eqs. (1), (7), (8); 000 eq. (6); 004
eq. (2)), and the tests compare what the engines and estimators report with what the papers say
it equals:

* two-class / one-class L2-SVM: at the optimum rho = alpha'K~alpha = -p* (p* the primal optimum)
  and the MEB radius r*^2 = eta - rho* with eta = max_i k~(z_i, z_i) (001 eq. (6); 000 Sec. 3.2 for
  a non-constant diagonal);
* the hard MEB: r*^2 is the primal optimum itself;
* CVR: r*^2 = p*/C^2 + eta (000 Property 3);
* MMDA: with A = alpha'1 of (3) equal to the optimum p of (2), the constrained MEB has
  r*^2 = eta - 1/p (004 eqs. (35), (42)).

Tolerances come from the (1+eps) guarantee, not from our own output.  For any center c with
enclosing radius r_c, ||c - c*||^2 <= r_c^2 - r*^2 (a property of the MEB); under full scans the
engine stops with r_c^2 - r*^2 <= ((1+eps)^2 - 1) S (S: the margin term for stop='margin', see
refimpl.meb.STOPS).  The augmented center is c = [w; b; sqrt(C) xi] for the two-class L2-SVM, so
||w - w*||^2 + (b - b*)^2 + C ||xi - xi*||^2 <= D := ((1+eps)^2 - 1) S, and by Cauchy-Schwarz a
decision value is off by at most sqrt(D (k(x, x) + 1)).  The oracles' own error (cvxopt at
1e-12 tolerances) is covered by SLACK.  The mutants of issue 13 (1/C -> 0.5/C in either L2-SVM,
K~ without its 1/C diagonal) move these quantities by 1e-3 to 1e-1 relative; the tolerances here
are below 1e-6.
"""
import numpy as np
import pytest

from helpers import engine
from oracles import (FeatureMap, hard_meb, l2svr, mmda_directions, one_class_l2svm, sk_kernel,
                     two_class_l2svm)
from refimpl import cvm, cvr
from refimpl.kernels import make_kernel_spec

#: the engines' (1+eps): small, so that the bound D below is far under any mutant's effect.  The
#: Laplacian's kernel values carry round-off of ~1e-8 (see the block test), below which the
#: reference engine cannot certify: it gets 1e-7.
EPS = {"rbf": 1e-9, "laplacian": 1e-7, "poly": 1e-9, "linear": 1e-9}
SLACK = 1e-7          # relative: the oracle's (cvxopt) and the engines' floating point
KERNELS = {"rbf": dict(gamma=0.5), "laplacian": dict(gamma=0.7), "poly": dict(gamma=0.3, degree=2, coef0=1.0),
           "linear": dict(gamma=0.5)}
M, D_IN = 60, 3


def classification(seed=0, m=M, d=D_IN):
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(m) < 0.5, 1.0, -1.0)
    y[:2] = [1.0, -1.0]
    X = rng.normal(size=(m, d)) + 0.6 * y[:, None]
    X_new = 1.5 * rng.normal(size=(25, d))
    return X, y, X_new


def regression(seed=0, m=M, d=D_IN):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, d))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=m)
    return X, y, 1.5 * rng.normal(size=(25, d))


def fmap(kernel, X):
    return FeatureMap(kernel, X, **KERNELS[kernel])


def spec(kernel, X):
    return make_kernel_spec(X, kernel, **KERNELS[kernel])


def est_kwargs(kernel):
    return dict(kernel=kernel, eps=EPS[kernel], sample_size=None, stop="margin", random_state=0, **KERNELS[kernel])


_CACHE = {}


def cached(key, make):
    if key not in _CACHE:
        _CACHE[key] = make()
    return _CACHE[key]


# ------------------------------------------------------------------------------------------------
# K~ and the linear term, written out from scikit-learn's kernels (001 eqs. (7), (10); 000 eq. (8), (15))
# ------------------------------------------------------------------------------------------------
def written_out(formulation, kernel, X, y, C, mu=0.5):
    """(K~, linear term l = diag K~ + Delta) of a formulation, from the papers' definitions."""
    K = sk_kernel(kernel, X, X, **KERNELS[kernel])
    m = len(X)
    if formulation == "meb":                                   # 001 eq. (2)
        return K, np.diag(K).copy()
    if formulation == "one_class":                             # 001 eq. (7): K + I/C
        Kt = K + np.eye(m) / C
        return Kt, np.full(m, np.diag(Kt).max())               # generalized CVM: eta = max diag
    if formulation == "two_class":                             # 001 eq. (10): yy' (K + 1) + I/C
        Kt = np.outer(y, y) * (K + 1.0) + np.eye(m) / C
        return Kt, np.full(m, np.diag(Kt).max())
    # CVR, 000 eq. (8): [[K+11'+(mu m/C) I, -(K+11')], [-(K+11'), K+11'+(mu m/C) I]], l = eta + (2/C)[y; -y]
    B = K + 1.0
    Kt = np.block([[B + mu * m / C * np.eye(m), -B], [-B, B + mu * m / C * np.eye(m)]])
    t = (2.0 / C) * np.concatenate([y, -y])
    eta = np.max(np.diag(Kt) - t)                             # the smallest eta with Delta >= 0 (eq. (15))
    return Kt, eta + t


def build(formulation, kernel, X, y, C, mu=0.5):
    s = spec(kernel, X)
    if formulation == "meb":
        return cvm.svdd_problem(X, s)
    if formulation == "one_class":
        return cvm.one_class_problem(X, s, C)
    if formulation == "two_class":
        return cvm.two_class_problem(X, y, s, C)
    return cvr.cvr_problem(X, y, s, C, mu)


@pytest.mark.parametrize("formulation", ["meb", "one_class", "two_class", "cvr"])
@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("C", [0.5, 10.0])
def test_problem_block_and_linear_term_are_the_papers(formulation, kernel, C):
    X, y, _ = classification(seed=1, m=30)
    if formulation == "cvr":
        X, y, _ = regression(seed=1, m=30)
    Kt, lin = written_out(formulation, kernel, X, y, C)
    problem = build(formulation, kernel, X, y, C)
    n = problem.n
    assert n == len(lin)
    idx = np.arange(n)
    # refimpl forms ||a - b|| from ||a||^2 + ||b||^2 - 2a'b: at distance 0 its sqrt turns round-off of
    # 1e-16 into 1e-8 in the Laplacian's exponent
    tol = 1e-7 if kernel == "laplacian" else 1e-12
    np.testing.assert_allclose(problem.block(idx, idx), Kt, rtol=tol, atol=tol)
    np.testing.assert_allclose(problem.linear_term(idx), lin, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(problem.diag(idx), np.diag(Kt), rtol=1e-12, atol=1e-12)
    # any rows and columns, in any order, repeated, and overlapping only in part
    rng = np.random.default_rng(0)
    rows, cols = rng.integers(0, n, 17), np.concatenate([rng.permutation(n)[:11], [3, 3]])
    np.testing.assert_allclose(problem.block(rows, cols), Kt[np.ix_(rows, cols)], rtol=tol, atol=tol)
    np.testing.assert_allclose(problem.linear_term(rows), lin[rows], rtol=1e-12, atol=1e-12)
    # Delta >= 0 and the shifted term is l - c0 (c0 = eta where it is constant)
    assert np.all(problem.delta(idx) >= -1e-12)
    np.testing.assert_allclose(problem.delta(idx), lin - np.diag(Kt), atol=1e-12)
    c0 = problem.constant_term
    np.testing.assert_allclose(problem.shifted_linear_term(idx), lin - (c0 or 0.0), rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------------------------
# oracles, cached per problem
# ------------------------------------------------------------------------------------------------
C_SVM = (1.0, 10.0)


def two_class_oracle(kernel, C):
    def make():
        X, y, X_new = classification()
        fm = fmap(kernel, X)
        sol = two_class_l2svm(fm(X), y, C)
        eta = np.diag(sk_kernel(kernel, X, X, **KERNELS[kernel])).max() + 1.0 + 1.0 / C
        Z = np.vstack([X, X_new])
        f = fm(Z) @ sol["w"] + sol["b"]
        kzz = np.diag(sk_kernel(kernel, Z, Z, **KERNELS[kernel]))
        return dict(sol, X=X, y=y, Z=Z, f=f, kzz=kzz, eta=eta, r2=eta - sol["rho"])
    return cached(("two_class", kernel, C), make)


def one_class_oracle(kernel, C):
    def make():
        X, _, X_new = classification()
        fm = fmap(kernel, X)
        sol = one_class_l2svm(fm(X), C)
        eta = np.diag(sk_kernel(kernel, X, X, **KERNELS[kernel])).max() + 1.0 / C
        Z = np.vstack([X, X_new])
        f = fm(Z) @ sol["w"] - sol["rho"]
        kzz = np.diag(sk_kernel(kernel, Z, Z, **KERNELS[kernel]))
        return dict(sol, X=X, Z=Z, f=f, kzz=kzz, eta=eta, r2=eta - sol["rho"])
    return cached(("one_class", kernel, C), make)


def meb_oracle(kernel):
    def make():
        X, _, X_new = classification()
        fm = fmap(kernel, X)
        sol = hard_meb(fm(X))
        Z = np.vstack([X, X_new])
        Pz = fm(Z)
        kzz = np.diag(sk_kernel(kernel, Z, Z, **KERNELS[kernel]))
        dist2 = float(sol["c"] @ sol["c"]) - 2.0 * Pz @ sol["c"] + kzz
        return dict(sol, X=X, Z=Z, dist2=dist2, kzz=kzz, cc=float(sol["c"] @ sol["c"]))
    return cached(("meb", kernel), make)


def _margin_bound(S, kernel):
    """D = ((1+eps)^2 - 1) S: the bound on ||c - c*||^2 and on r*^2 - R^2 of the 'margin' rule."""
    return ((1 + EPS[kernel]) ** 2 - 1) * S


# ------------------------------------------------------------------------------------------------
# the engines: optimal value, rho and r*^2
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("C", C_SVM)
@pytest.mark.parametrize("formulation", ["two_class", "one_class"])
def test_engine_l2svm_matches_primal(formulation, kernel, C, impl):
    """rho = alpha'K~alpha = -p* and R^2 -> r*^2 = eta - rho* (001 eqs. (6)-(9))."""
    o = (two_class_oracle if formulation == "two_class" else one_class_oracle)(kernel, C)
    X, y = o["X"], classification()[1]
    problem = build(formulation, kernel, X, y, C)
    res = engine(impl)(problem, EPS[kernel], sample_size=None, random_state=0, stop="margin")
    assert res.converged
    rho = o["rho"]
    assert rho == pytest.approx(-o["p"], rel=1e-8)            # the oracle's own strong duality
    assert problem.eta == pytest.approx(o["eta"], rel=1e-12)
    slack = SLACK * o["r2"]
    assert res.radius2 <= o["r2"] + slack                      # weak duality
    assert o["r2"] - res.radius2 <= _margin_bound(rho, kernel) + slack
    assert abs(res.margin - rho) <= _margin_bound(rho, kernel) + slack
    assert res.r_cert2 >= o["r2"] - slack                      # the certificate encloses the exact ball


@pytest.mark.parametrize("kernel", list(KERNELS))
def test_engine_hard_meb_matches_primal(kernel, impl):
    """R^2 -> r*^2, the optimum of 001 eq. (1), and alpha'K alpha -> ||c*||^2."""
    o = meb_oracle(kernel)
    problem = build("meb", kernel, o["X"], None, None)
    res = engine(impl)(problem, EPS[kernel], sample_size=None, random_state=0, stop="margin")
    assert res.converged
    slack = SLACK * o["r2"]
    D = _margin_bound(max(o["r2"], o["cc"]), kernel)
    assert res.radius2 <= o["r2"] + slack
    assert o["r2"] - res.radius2 <= D + slack
    # ||c||^2 vs ||c*||^2: | ||c||^2 - ||c*||^2 | <= 2 ||c*|| sqrt(D') + D' with D' = ||c - c*||^2 <= D
    assert abs(res.margin - o["cc"]) <= 2 * np.sqrt(o["cc"] * (D + slack)) + D + slack


# ------------------------------------------------------------------------------------------------
# the estimators: rho, b, xi, decision values, dual objective and radius
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("C", C_SVM)
def test_cvm_classifier_matches_primal(kernel, C, impl):
    from corevector import CVMClassifier

    o = two_class_oracle(kernel, C)
    clf = CVMClassifier(C=C, impl=impl, **est_kwargs(kernel)).fit(o["X"], o["y"])
    rho = o["rho"]
    D = _margin_bound(rho, kernel) + SLACK * o["r2"]
    assert clf.rho_ == pytest.approx(rho, rel=1e-6)
    assert clf.dual_objective_ == pytest.approx(o["p"], rel=1e-6)      # the optimal value of (8)/(9)
    assert clf.radius_ ** 2 == pytest.approx(o["r2"], rel=1e-6)
    # classes_ = [-1, 1]: the first class is the positive side internally, so the internal b is -b*
    # for the labels y, and decision_function (positive for classes_[1] = +1) is f* itself
    assert list(clf.classes_) == [-1.0, 1.0]
    assert abs(-clf.intercept_[0] - o["b"]) <= np.sqrt(D)
    tol = np.sqrt(D * (o["kzz"] + 1.0)) + SLACK
    np.testing.assert_array_less(np.abs(clf.decision_function(o["Z"]) - o["f"]), tol)
    # xi of the support vectors and xi* elsewhere: C ||xi - xi*||^2 <= D
    xi = np.zeros(M)
    xi[clf.support_] = clf.xi_
    assert C * np.sum((xi - o["xi"]) ** 2) <= D
    # the support vectors are the points with y_i f(x_i) < rho (alpha_i = C xi_i > 0)
    assert np.all(o["y"][clf.support_] * o["f"][clf.support_] <= rho + np.sqrt(D * (o["kzz"][clf.support_] + 1)))


@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("C", C_SVM)
def test_cvdd_matches_primal(kernel, C, impl):
    from corevector import CVDD

    o = one_class_oracle(kernel, C)
    est = CVDD(C=C, impl=impl, **est_kwargs(kernel)).fit(o["X"])
    rho = o["rho"]
    D = _margin_bound(rho, kernel) + SLACK * o["r2"]
    assert est.rho_ == pytest.approx(rho, rel=1e-6)
    assert est.intercept_[0] == pytest.approx(-rho, rel=1e-6)
    assert est.dual_objective_ == pytest.approx(o["p"], rel=1e-6)
    assert est.radius_ ** 2 == pytest.approx(o["r2"], rel=1e-6)
    # f(x) = w'phi(x) - rho: |w - w*| <= sqrt(D), and |rho - rho*| <= D
    tol = np.sqrt(D * o["kzz"]) + D + SLACK
    np.testing.assert_array_less(np.abs(est.decision_function(o["Z"]) - o["f"]), tol)
    xi = np.zeros(M)
    xi[est.support_] = est.xi_
    assert C * np.sum((xi - o["xi"]) ** 2) <= D


@pytest.mark.parametrize("kernel", list(KERNELS))
def test_meb_estimator_matches_primal(kernel, impl):
    from corevector import MEB

    o = meb_oracle(kernel)
    est = MEB(impl=impl, **est_kwargs(kernel)).fit(o["X"])
    D = _margin_bound(max(o["r2"], o["cc"]), kernel) + SLACK * o["r2"]
    assert est.radius_ ** 2 == pytest.approx(o["r2"], rel=1e-6)
    assert abs(est.rho_ - o["cc"]) <= 2 * np.sqrt(o["cc"] * D) + D
    # squared distances to the center: |d^2 - d*^2| <= 2 sqrt(D) (||c*|| + ||phi(x)||) + D
    dist2 = est.certified_radius_ ** 2 - est.decision_function(o["Z"])
    tol = 2 * np.sqrt(D) * (np.sqrt(o["cc"]) + np.sqrt(o["kzz"])) + D + SLACK * o["r2"]
    np.testing.assert_array_less(np.abs(dist2 - o["dist2"]), tol)
    # the training points are inside the certified ball and the support lies on the exact sphere
    assert np.all(o["dist2"][:M] <= o["r2"] * (1 + 1e-6))
    np.testing.assert_allclose(o["dist2"][est.support_], o["r2"], atol=np.sqrt(D) * 10 + 1e-5 * o["r2"])


# ------------------------------------------------------------------------------------------------
# CVR (000 eq. (6)) and MMDA (004 eq. (2))
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", list(KERNELS))
def test_cvr_estimator_matches_primal(kernel, impl):
    from corevector import CVR

    C, mu = 10.0, 0.5
    X, y, X_new = regression(seed=2)
    o = cached(("cvr", kernel), lambda: l2svr(fmap(kernel, X)(X), y, C, mu))
    # the paper's (C, mu) of eq. (6) on the raw targets: CVR's C is C / (2 mu m), normalize_y=False
    est = CVR(C=C / (2 * mu * M), mu=mu, normalize_y=False, impl=impl, tol=1e-14, **est_kwargs(kernel)).fit(X, y)
    K = sk_kernel(kernel, X, X, **KERNELS[kernel])
    eta = np.max(np.diag(K) + 1.0 + mu * M / C + (2.0 / C) * np.abs(y))   # 000 eq. (15), written out
    r2 = o["p"] / C ** 2 + eta                                             # Property 3
    assert est.eta_ == pytest.approx(eta, rel=1e-12)
    assert est.tube_weight_ == pytest.approx(C, rel=1e-12)      # the paper's C, reported back
    assert est.radius_ ** 2 == pytest.approx(r2, rel=1e-6)
    assert est.dual_objective_ == pytest.approx(o["p"] / C ** 2, rel=1e-5)
    scale = 1 + np.abs(y).max()
    Z = np.vstack([X, X_new])
    f = fmap(kernel, X)(Z) @ o["w"] + o["b"]
    np.testing.assert_allclose(est.predict(Z), f, atol=1e-4 * scale, rtol=0)
    assert abs(est.intercept_[0] - o["b"]) <= 1e-4 * scale
    assert abs(est.epsilon_bar_ - o["epsbar"]) <= 1e-4 * scale
    xi, xs = np.zeros(M), np.zeros(M)
    xi[est.support_], xs[est.support_] = est.xi_, est.xi_star_
    np.testing.assert_allclose(xi, o["xi"], atol=1e-4 * scale)
    np.testing.assert_allclose(xs, o["xi_star"], atol=1e-4 * scale)


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "poly"])
@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_mmda_matches_primal(kernel, impl):
    """The MMDA features u_q'phi(x) against the directions of 004 eq. (2) solved one after another,
    and each direction's constrained-MEB radius against r*^2 = eta - 1/p_q (eqs. (35), (42))."""
    from corevector import MMDA

    C, n_comp = 1.0, 3
    X, y, X_new = classification(seed=3, m=50)
    fm = fmap(kernel, X)
    # two classes: the second (+1) is the positive one of the binary problem (refimpl.mmda.one_vs_all)
    U, p = cached(("mmda", kernel), lambda: mmda_directions(fm(X), y, C, n_comp))
    model = MMDA(n_components=n_comp, C=C, kernel=kernel, eps=1e-8, sample_size=None, impl=impl, random_state=0,
                 **KERNELS[kernel]).fit(X, y)
    Z = np.vstack([X, X_new])
    F_star = fm(Z) @ U
    F = model.transform(Z)
    np.testing.assert_allclose(F, F_star, atol=1e-4 * np.abs(F_star).max(), rtol=0)
    eta = np.diag(sk_kernel(kernel, X, X, **KERNELS[kernel])).max() + 1.0 + 1.0 / C
    r2 = eta - 1.0 / np.array(p)
    np.testing.assert_allclose(np.asarray(model.radius_) ** 2, r2, rtol=1e-6)


# ------------------------------------------------------------------------------------------------
# weighted fits (scikit-learn's sample_weight / class_weight): the primal with sum_i C_i xi_i^2
# ------------------------------------------------------------------------------------------------
def _weights(m, seed=5):
    return np.exp(np.random.default_rng(seed).uniform(np.log(0.2), np.log(5.0), m))


@pytest.mark.parametrize("formulation", ["one_class", "two_class", "cvr"])
@pytest.mark.parametrize("kernel", ["rbf", "poly"])
def test_weighted_problem_block_and_linear_term(formulation, kernel):
    """K~ with the ridge 1/C_i (mu m / C_i for both copies of a CVR point) on its diagonal, and the
    generalized CVM's constant linear term eta = max diag K~ (eta + (2/C)[y; -y] for CVR), written out."""
    C, mu = 2.0, 0.5
    X, y, _ = (regression if formulation == "cvr" else classification)(seed=4, m=30)
    w = _weights(30)
    K = sk_kernel(kernel, X, X, **KERNELS[kernel])
    s = spec(kernel, X)
    if formulation == "one_class":
        Kt = K + np.diag(1.0 / (C * w))
        lin = np.full(30, np.diag(Kt).max())
        problem = cvm.one_class_problem(X, s, C, w)
    elif formulation == "two_class":
        Kt = np.outer(y, y) * (K + 1.0) + np.diag(1.0 / (C * w))
        lin = np.full(30, np.diag(Kt).max())
        problem = cvm.two_class_problem(X, y, s, C, w)
    else:
        B = K + 1.0
        R = np.diag(mu * 30 / (C * w))
        Kt = np.block([[B + R, -B], [-B, B + R]])
        t = (2.0 / C) * np.concatenate([y, -y])
        lin = np.max(np.diag(Kt) - t) + t
        problem = cvr.cvr_problem(X, y, s, C, mu, w)
    idx = np.arange(problem.n)
    np.testing.assert_allclose(problem.block(idx, idx), Kt, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(problem.linear_term(idx), lin, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(problem.diag(idx), np.diag(Kt), rtol=1e-12, atol=1e-12)
    assert np.all(problem.delta(idx) >= -1e-12)
    np.testing.assert_allclose(problem.shifted_linear_term(idx), lin - problem.constant_term, atol=1e-12)


@pytest.mark.parametrize("kernel", ["rbf", "poly"])
def test_weighted_cvm_classifier_matches_primal(kernel, impl):
    """CVMClassifier(sample_weight=w) solves min ||w||^2 + b^2 - 2 rho + sum_i C w_i xi_i^2 (cvxopt)."""
    from corevector import CVMClassifier

    C = 2.0
    X, y, X_new = classification()
    w = _weights(M)
    o = cached(("two_class_w", kernel), lambda: two_class_l2svm(fmap(kernel, X)(X), y, C * w))
    clf = CVMClassifier(C=C, impl=impl, **est_kwargs(kernel)).fit(X, y, sample_weight=w)
    rho = o["rho"]
    eta = np.max(np.diag(sk_kernel(kernel, X, X, **KERNELS[kernel])) + 1.0 + 1.0 / (C * w))
    D = _margin_bound(rho, kernel) + SLACK * (eta - rho)
    assert rho == pytest.approx(-o["p"], rel=1e-8)
    assert clf.rho_ == pytest.approx(rho, rel=1e-6)
    assert clf.radius_ ** 2 == pytest.approx(eta - rho, rel=1e-6)
    Z = np.vstack([X, X_new])
    f = fmap(kernel, X)(Z) @ o["w"] + o["b"]
    kzz = np.diag(sk_kernel(kernel, Z, Z, **KERNELS[kernel]))
    np.testing.assert_array_less(np.abs(clf.decision_function(Z) - f), np.sqrt(D * (kzz + 1.0)) + SLACK)
    xi = np.zeros(M)
    xi[clf.support_] = clf.xi_
    assert np.sum(C * w * (xi - o["xi"]) ** 2) <= D          # the augmented center's slack part


@pytest.mark.parametrize("kernel", ["rbf", "poly"])
def test_weighted_cvdd_matches_primal(kernel, impl):
    from corevector import CVDD

    C = 2.0
    X, _, X_new = classification()
    w = _weights(M, seed=6)
    o = cached(("one_class_w", kernel), lambda: one_class_l2svm(fmap(kernel, X)(X), C * w))
    est = CVDD(C=C, impl=impl, **est_kwargs(kernel)).fit(X, sample_weight=w)
    rho = o["rho"]
    eta = np.max(np.diag(sk_kernel(kernel, X, X, **KERNELS[kernel])) + 1.0 / (C * w))
    D = _margin_bound(rho, kernel) + SLACK * (eta - rho)
    assert est.rho_ == pytest.approx(rho, rel=1e-6)
    assert est.dual_objective_ == pytest.approx(o["p"], rel=1e-6)
    Z = np.vstack([X, X_new])
    f = fmap(kernel, X)(Z) @ o["w"] - rho
    kzz = np.diag(sk_kernel(kernel, Z, Z, **KERNELS[kernel]))
    np.testing.assert_array_less(np.abs(est.decision_function(Z) - f), np.sqrt(D * kzz) + D + SLACK)
    xi = np.zeros(M)
    xi[est.support_] = est.xi_
    assert np.sum(C * w * (xi - o["xi"]) ** 2) <= D


@pytest.mark.parametrize("kernel", ["rbf", "poly"])
def test_weighted_cvr_matches_primal(kernel, impl):
    """CVR(sample_weight=w): both slacks of point i weigh C w_i / (mu m) (000 eq. (6) weighted, with the paper's
    C and mu: CVR's C is C / (2 mu m) and its paper's C 2 C' mu' M, M = sum w, so mu' = mu m / M)."""
    from corevector import CVR

    C, mu = 10.0, 0.5
    X, y, X_new = regression(seed=2)
    w = _weights(M, seed=7)
    o = cached(("cvr_w", kernel), lambda: l2svr(fmap(kernel, X)(X), y, C, mu, weights=w))
    est = CVR(C=C / (2 * mu * M), mu=mu * M / w.sum(), normalize_y=False, impl=impl, tol=1e-14,
              **est_kwargs(kernel)).fit(X, y, sample_weight=w)
    K = sk_kernel(kernel, X, X, **KERNELS[kernel])
    eta = np.max(np.diag(K) + 1.0 + mu * M / (C * w) + (2.0 / C) * np.abs(y))
    assert est.eta_ == pytest.approx(eta, rel=1e-12)
    assert est.radius_ ** 2 == pytest.approx(o["p"] / C ** 2 + eta, rel=1e-6)
    assert est.dual_objective_ == pytest.approx(o["p"] / C ** 2, rel=1e-5)
    scale = 1 + np.abs(y).max()
    Z = np.vstack([X, X_new])
    f = fmap(kernel, X)(Z) @ o["w"] + o["b"]
    np.testing.assert_allclose(est.predict(Z), f, atol=1e-4 * scale, rtol=0)
    assert abs(est.epsilon_bar_ - o["epsbar"]) <= 1e-4 * scale
    xi, xs = np.zeros(M), np.zeros(M)
    xi[est.support_], xs[est.support_] = est.xi_, est.xi_star_
    np.testing.assert_allclose(xi, o["xi"], atol=1e-4 * scale)
    np.testing.assert_allclose(xs, o["xi_star"], atol=1e-4 * scale)
