"""sample_weight, class_weight and probability=True against scikit-learn's and LIBSVM's conventions.

Weights are a per-point C_i = C class_weight[y_i] sample_weight_i in the squared-slack term (the ridge
1/C_i of K~, refimpl.cvm / refimpl.cvr).  What holds exactly, and is checked here:

* weights of ones are no weights, and equal weights k are C k (the same MEB problem, bit for bit);
* a point of weight 0 is the point removed (it is left out of the problem, as LIBSVM leaves it out);
* class_weight is sample_weight by class, and 'balanced' is n / (k bincount(y));
* an integer weight k is the point repeated k times *in the primal*: repeated points share their slack
  at the optimum, so sum_copies C xi^2 = k C xi^2.  The core-set fits of the two problems draw
  different samples, so they agree to the (1+eps) guarantee, which is what is checked (tight eps, full
  scans, fixed kernel width: 'scale'/'beta' widths depend on the repetitions);
* the weighted primal itself is checked against cvxopt in tests/test_oracles.py.

Probabilities: Platt's sigmoid on 5-fold cross-validated decision values, pairwise coupling for more
than two classes (LIBSVM's method), compared with scikit-learn's SVC(probability=True) on held-out data.
"""
import numpy as np
import pytest
from sklearn.metrics import brier_score_loss, log_loss
from sklearn.svm import SVC

from corevector import CVDD, CVR, CVMClassifier
from corevector.probability import pairwise_coupling

TIGHT = dict(eps=1e-9, sample_size=None, stop="margin", random_state=0)


def _data(seed=0, m=80, d=2, n_classes=2):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, m)
    y[:n_classes] = np.arange(n_classes)
    X = rng.normal(size=(m, d)) + 1.2 * np.column_stack([np.cos(2 * y), np.sin(2 * y)])[:, :d]
    return X, y


def _reg(seed=0, m=80):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, 2))
    return X, np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=m)


def _int_weights(m, seed=1):
    w = np.random.default_rng(seed).integers(0, 4, m).astype(float)
    w[:4] = [1, 2, 3, 0]
    return w


ESTIMATORS = {
    "cvm": lambda **kw: CVMClassifier(C=3.0, gamma=0.5, **kw),
    "cvdd": lambda **kw: CVDD(C=3.0, gamma=0.5, **kw),
    "cvr": lambda **kw: CVR(C=5.0, mu="auto", gamma=0.5, **kw),
}


def _xy(name, seed=0, m=80):
    if name == "cvr":
        return _reg(seed, m)
    X, y = _data(seed, m)
    return X, (y if name == "cvm" else None)


def _outputs(est, X):
    out = [est.decision_function(X)] if hasattr(est, "decision_function") else [est.predict(X)]
    return np.concatenate([np.ravel(o) for o in out])


def _same_model(a, b):
    np.testing.assert_array_equal(a.support_, b.support_)
    np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)


# ------------------------------------------------------------------------------------------------ exact
@pytest.mark.parametrize("name", list(ESTIMATORS))
@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_unit_weights_are_no_weights(name, impl):
    X, y = _xy(name)
    a = ESTIMATORS[name](impl=impl, random_state=0).fit(X, y)
    b = ESTIMATORS[name](impl=impl, random_state=0).fit(X, y, sample_weight=np.ones(len(X)))
    _same_model(a, b)


@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_uniform_weights_are_c_rescaled(impl):
    """sample_weight = k everywhere is C k: the same MEB problem, so the same model bit for bit (the
    classifier and CVDD); for CVR too: its primal ||w||^2 + b^2 + C sum w_i (xi_i^2 + xi*_i^2) + 2 C mu M epsbar
    with M = sum w is that of C k when every w_i = k."""
    X, y = _data()
    for k in (0.25, 3.0):
        _same_model(CVMClassifier(C=2.0 * k, random_state=0, impl=impl).fit(X, y),
                    CVMClassifier(C=2.0, random_state=0, impl=impl).fit(X, y, sample_weight=np.full(len(X), k)))
        _same_model(CVDD(C=2.0 * k, random_state=0, impl=impl).fit(X),
                    CVDD(C=2.0, random_state=0, impl=impl).fit(X, sample_weight=np.full(len(X), k)))
        Xr, yr = _reg()
        a = CVR(C=5.0 * k, mu=0.4, random_state=0, impl=impl).fit(Xr, yr)
        b = CVR(C=5.0, mu=0.4, random_state=0, impl=impl).fit(Xr, yr, sample_weight=np.full(len(Xr), k))
        np.testing.assert_array_equal(a.support_, b.support_)
        np.testing.assert_allclose(a.predict(Xr), b.predict(Xr), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", list(ESTIMATORS))
@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_zero_weight_is_the_point_removed(name, impl):
    """Points of weight 0 are left out: the fit is the fit on the others (same seed, same model), and
    support_/core_set_ index the training set as given."""
    X, y = _xy(name)
    w = np.random.default_rng(3).uniform(0.5, 2.0, len(X))
    w[::3] = 0.0
    keep = w > 0
    a = ESTIMATORS[name](impl=impl, random_state=0).fit(X, y, sample_weight=w)
    b = ESTIMATORS[name](impl=impl, random_state=0).fit(X[keep], None if y is None else y[keep],
                                                        sample_weight=w[keep])
    np.testing.assert_array_equal(a.support_, np.flatnonzero(keep)[b.support_])
    assert np.all(w[a.support_] > 0)
    np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)
    np.testing.assert_array_equal(a.support_vectors_, b.support_vectors_)
    np.testing.assert_array_equal(_outputs(a, X), _outputs(b, X))


@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_class_weight_is_sample_weight_by_class(impl):
    X, y = _data(n_classes=3)
    cw = {0: 0.5, 1: 2.0, 2: 1.0}
    a = CVMClassifier(class_weight=cw, random_state=0, impl=impl).fit(X, y)
    b = CVMClassifier(random_state=0, impl=impl).fit(X, y, sample_weight=np.array([cw[c] for c in y]))
    _same_model(a, b)
    sw = np.random.default_rng(0).uniform(0.5, 2.0, len(y))
    c = CVMClassifier(class_weight=cw, random_state=0, impl=impl).fit(X, y, sample_weight=sw)
    d = CVMClassifier(random_state=0, impl=impl).fit(X, y, sample_weight=sw * np.array([cw[c] for c in y]))
    _same_model(c, d)
    bal = CVMClassifier(class_weight="balanced", random_state=0, impl=impl).fit(X, y)
    np.testing.assert_allclose(bal.class_weight_, len(y) / (3 * np.bincount(y)), rtol=1e-15)
    np.testing.assert_array_equal(a.class_weight_, [0.5, 2.0, 1.0])


def test_class_weight_moves_the_boundary():
    """A heavy class gets fewer training errors (C_i larger), a light one more."""
    X, y = _data(seed=2, m=300)
    X += 0.8 * np.random.default_rng(0).normal(size=X.shape)  # overlapping classes
    base = CVMClassifier(random_state=0).fit(X, y).predict(X)
    heavy = CVMClassifier(class_weight={0: 10.0, 1: 1.0}, random_state=0).fit(X, y).predict(X)
    err = lambda pred, c: np.mean(pred[y == c] != c)  # noqa: E731
    assert err(heavy, 0) < err(base, 0) and err(heavy, 1) > err(base, 1)


# ------------------------------------------------------------------------------------------------ repetition
@pytest.mark.parametrize("name", list(ESTIMATORS))
@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_integer_weights_are_repetitions_in_the_primal(name, impl):
    """Integer sample_weight == each point repeated w_i times (0: removed), scikit-learn's
    check_sample_weight_equivalence, to the (1+eps) accuracy of the two fits: at eps = 1e-9 the
    decision values are within 1e-6 of each other (their distance to the common optimum is bounded by
    sqrt(((1+eps)^2 - 1) rho (k(x,x) + 1)) ~ 1e-5 sqrt(rho), rho < 1 here)."""
    X, y = _xy(name, m=50)
    w = _int_weights(len(X))
    rep = np.repeat(np.arange(len(X)), w.astype(int))
    a = ESTIMATORS[name](impl=impl, **TIGHT).fit(X, y, sample_weight=w)
    b = ESTIMATORS[name](impl=impl, **TIGHT).fit(X[rep], None if y is None else y[rep])
    oa, ob = _outputs(a, X), _outputs(b, X)
    np.testing.assert_allclose(oa, ob, atol=2e-5 * (1 + np.abs(ob).max()), rtol=0)
    if name == "cvm":
        np.testing.assert_array_equal(a.predict(X)[np.abs(ob) > 1e-3], b.predict(X)[np.abs(ob) > 1e-3])


# ------------------------------------------------------------------------------------------------ bad weights
BAD = {"negative": lambda m: np.r_[-1.0, np.ones(m - 1)], "nan": lambda m: np.r_[np.nan, np.ones(m - 1)],
       "inf": lambda m: np.r_[np.inf, np.ones(m - 1)], "short": lambda m: np.ones(m - 1),
       "2d": lambda m: np.ones((m, 1)), "all_zero": lambda m: np.zeros(m)}


@pytest.mark.parametrize("name", list(ESTIMATORS))
@pytest.mark.parametrize("bad", list(BAD))
def test_bad_weights_name_sample_weight(name, bad):
    X, y = _xy(name, m=20)
    with pytest.raises(ValueError, match="sample_weight"):
        ESTIMATORS[name](random_state=0).fit(X, y, sample_weight=BAD[bad](len(X)))


def test_weights_leaving_one_point_or_class():
    X, y = _data(m=20)
    w = (y == 0).astype(float)
    with pytest.raises(ValueError, match=r"sample_weight.*\bclass"):
        CVMClassifier().fit(X, y, sample_weight=w)
    with pytest.raises(ValueError, match="sample_weight"):
        CVDD().fit(X, sample_weight=np.r_[1.0, np.zeros(19)])
    Xr, yr = _reg(m=20)
    with pytest.raises(ValueError, match="sample_weight"):
        CVR().fit(Xr, yr, sample_weight=np.r_[1.0, np.zeros(19)])


def test_bad_class_weight():
    X, y = _data(m=20)
    with pytest.raises(ValueError, match="class_weight"):
        CVMClassifier(class_weight="heavy").fit(X, y)
    with pytest.raises(ValueError):
        CVMClassifier(class_weight={0: 1.0, 7: 2.0}).fit(X, y)  # a label not in y (scikit-learn's check)


# ------------------------------------------------------------------------------------------------ probabilities
def test_pairwise_coupling_recovers_consistent_probabilities():
    """With r_ij = p_i / (p_i + p_j) the objective of Wu, Lin & Weng's method 2 is 0 at p: p comes back."""
    rng = np.random.default_rng(0)
    for k in (3, 4, 6):
        p = rng.dirichlet(np.ones(k), size=50)
        pairs = [(a, b) for a in range(k) for b in range(a + 1, k)]
        r = np.column_stack([p[:, a] / (p[:, a] + p[:, b]) for a, b in pairs])
        np.testing.assert_allclose(pairwise_coupling(r, pairs, k, min_prob=0.0), p, atol=1e-12)


def test_pairwise_coupling_is_the_constrained_minimiser():
    """Inconsistent pairwise estimates: the result minimises sum_{i<j} (r_ji p_i - r_ij p_j)^2 on the
    simplex (cvxopt on the same objective written out pair by pair), as LIBSVM's iteration does."""
    import cvxopt

    rng = np.random.default_rng(1)
    k = 4
    pairs = [(a, b) for a in range(k) for b in range(a + 1, k)]
    r = rng.uniform(0.05, 0.95, size=(20, len(pairs)))
    got = pairwise_coupling(r, pairs, k)
    for n in range(len(r)):
        Q = np.zeros((k, k))
        for q, (a, b) in enumerate(pairs):
            v = np.zeros(k)
            v[a], v[b] = 1.0 - r[n, q], -r[n, q]  # r_ba p_a - r_ab p_b
            Q += 2.0 * np.outer(v, v)            # both orders (i, j) and (j, i) of the double sum
        M = lambda a: cvxopt.matrix(np.asarray(a, dtype=np.float64))  # noqa: E731
        sol = cvxopt.solvers.qp(M(2 * Q), M(np.zeros(k)), M(-np.eye(k)), M(np.zeros(k)), M(np.ones((1, k))),
                                M([1.0]), options={"show_progress": False, "abstol": 1e-14, "reltol": 1e-14,
                                                   "feastol": 1e-14})
        np.testing.assert_allclose(got[n], np.array(sol["x"]).ravel(), atol=1e-6)


def _split(seed, n_classes, m=600):
    X, y = _data(seed, m + 400, n_classes=n_classes)
    X += 0.6 * np.random.default_rng(seed).normal(size=X.shape)
    return X[:m], y[:m], X[m:], y[m:]


@pytest.mark.parametrize("n_classes", [2, 3])
def test_probabilities_against_scikit_learns_calibration(n_classes):
    """Against scikit-learn's Platt scaling of the same model, CalibratedClassifierCV(CVMClassifier(),
    method='sigmoid', ensemble=False) (its 5 stratified folds, not ours): two classes give the same
    probabilities to within 0.03 (the folds differ), and for three classes LIBSVM's pairwise coupling
    is at least as good on held-out log-loss as scikit-learn's one-vs-rest normalisation.  Against
    LIBSVM's L1-SVM (SVC, calibrated the same way) the log-loss is within 0.05 (another model).
    Rows sum to 1; log-proba is the log of proba."""
    from sklearn.calibration import CalibratedClassifierCV

    X, y, Xt, yt = _split(0, n_classes)
    clf = CVMClassifier(C=1.0, gamma=0.5, probability=True, random_state=0).fit(X, y)
    cal = CalibratedClassifierCV(CVMClassifier(C=1.0, gamma=0.5, random_state=0), method="sigmoid",
                                 ensemble=False).fit(X, y)
    svc = CalibratedClassifierCV(SVC(C=1.0, gamma=0.5), method="sigmoid", ensemble=False).fit(X, y)
    P, Pc = clf.predict_proba(Xt), cal.predict_proba(Xt)
    assert P.shape == (len(Xt), n_classes) and np.all(P >= 0)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(clf.predict_log_proba(Xt), np.log(P), rtol=1e-12)
    if n_classes == 2:
        np.testing.assert_allclose(P, Pc, atol=0.03)
        assert abs(log_loss(yt, P) - log_loss(yt, Pc)) <= 0.01
    else:
        assert log_loss(yt, P) <= log_loss(yt, Pc) + 0.005
    assert log_loss(yt, P) <= log_loss(yt, svc.predict_proba(Xt)) + 0.05
    # the most probable class is the predicted one away from the decision boundaries
    agree = np.mean(P.argmax(axis=1) == np.searchsorted(clf.classes_, clf.predict(Xt)))
    assert agree >= 0.97


def test_binary_probability_is_monotone_in_the_decision_value():
    X, y, Xt, _ = _split(1, 2)
    clf = CVMClassifier(probability=True, random_state=0).fit(X, y)
    order = np.argsort(clf.decision_function(Xt))
    p1 = clf.predict_proba(Xt)[order, 1]
    assert np.all(np.diff(p1) >= -1e-15) and p1[0] < 0.2 and p1[-1] > 0.8
    assert brier_score_loss(y[:50], clf.predict_proba(X[:50])[:, 1]) < 0.25


def test_probability_leaves_the_model_alone_and_is_deterministic():
    X, y, Xt, _ = _split(2, 3, m=200)
    plain = CVMClassifier(random_state=0).fit(X, y)
    a = CVMClassifier(probability=True, random_state=0).fit(X, y)
    b = CVMClassifier(probability=True, random_state=0).fit(X, y)
    _same_model(plain, a)
    np.testing.assert_array_equal(a.predict_proba(Xt), b.predict_proba(Xt))
    c = CVMClassifier(probability=True, random_state=1).fit(X, y)
    assert not np.array_equal(a.probA_, c.probA_)  # the folds come from random_state
    assert not hasattr(plain, "predict_proba") and not hasattr(plain, "predict_log_proba")
    assert plain.probA_.shape == (0,)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_probabilities_fast_equals_ref(n_classes):
    X, y, Xt, _ = _split(3, n_classes, m=150)
    kw = dict(probability=True, random_state=0, eps=1e-4, sample_size=None)
    sw = np.random.default_rng(0).uniform(0.5, 2.0, len(y))
    a = CVMClassifier(impl="ref", **kw).fit(X, y, sample_weight=sw)
    b = CVMClassifier(impl="fast", **kw).fit(X, y, sample_weight=sw)
    np.testing.assert_allclose(a.probA_, b.probA_, rtol=1e-5)
    np.testing.assert_allclose(a.probB_, b.probB_, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(a.predict_proba(Xt), b.predict_proba(Xt), atol=1e-6)
