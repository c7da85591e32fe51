"""Bad input gets a clear error naming the parameter; same seed gives the same model.

Every estimator validates its parameters with scikit-learn's ``_parameter_constraints``: a bad
parameter, whatever its type, raises ``InvalidParameterError`` (a ValueError and a TypeError) whose
message names it; bad data raises ValueError."""
import pickle

import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError

from corevector import CVDD, CVR, MEB, MMDA, CVMClassifier, ImplicitSurface, SparseSVR

ESTIMATORS = [CVMClassifier, CVDD, MEB]
ALL_ESTIMATORS = [CVMClassifier, CVDD, MEB, CVR, MMDA, SparseSVR, ImplicitSurface]


def data(m=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, 2))
    y = (X[:, 0] > 0).astype(int)
    return X, y


def fit(est, X, y):
    return est.fit(X, y) if isinstance(est, CVMClassifier) else est.fit(X)


@pytest.mark.parametrize("Est", ESTIMATORS)
@pytest.mark.parametrize("impl", ["fast", "ref"])
@pytest.mark.parametrize("param,value", [
    ("eps", 0.0), ("eps", -1e-3), ("eps", np.nan), ("eps", "small"), ("kernel", "sigmoid"), ("gamma", 0.0),
    ("gamma", -2.0), ("gamma", "wide"), ("sample_size", 0), ("sample_size", 59.0), ("max_iter", 0),
    ("impl", "gpu"), ("degree", 0), ("n_confirm", -1), ("tol", -1.0), ("solver", "newton"),
    ("stop", "duality"), ("stop", None),
])
def test_bad_parameter_names_itself(Est, impl, param, value):
    X, y = data()
    with pytest.raises(InvalidParameterError, match=f"'{param}' parameter of {Est.__name__}"):
        fit(Est(**{"impl": impl, **{param: value}}), X, y)


@pytest.mark.parametrize("Est", [CVMClassifier, CVDD])
@pytest.mark.parametrize("C", [0.0, -1.0, np.inf, "1"])
def test_bad_C(Est, C):
    X, y = data()
    with pytest.raises(InvalidParameterError, match="'C' parameter"):
        fit(Est(C=C), X, y)


def fit_any(est):
    """Fit any estimator of corevector on small data of the kind it takes."""
    X, y = data()
    if isinstance(est, ImplicitSurface):
        return est.fit(np.c_[X, X[:, :1] * X[:, 1:]])
    if isinstance(est, (CVR, SparseSVR)):
        return est.fit(X, X[:, 0])
    return est.fit(X, y) if isinstance(est, (CVMClassifier, MMDA)) else est.fit(X)


@pytest.mark.parametrize("Est", ALL_ESTIMATORS)
def test_every_parameter_has_a_constraint(Est):
    assert set(Est().get_params()) == set(Est._parameter_constraints)


@pytest.mark.parametrize("Est,param", [(MEB, "eps"), (CVDD, "C"), (CVMClassifier, "C"), (CVR, "mu"), (MMDA, "C"),
                                       (SparseSVR, "lam"), (ImplicitSurface, "eps")])
@pytest.mark.parametrize("value", ["1.0", [1.0], object()])
def test_non_number_raises_the_same_error_everywhere(Est, param, value):
    """One error type per kind of mistake: a non-number is an InvalidParameterError in every estimator."""
    with pytest.raises(InvalidParameterError, match=f"'{param}' parameter of {Est.__name__}"):
        fit_any(Est(**{param: value}))


@pytest.mark.parametrize("Est", ESTIMATORS)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_input(Est, bad):
    X, y = data()
    X[3, 1] = bad
    with pytest.raises(ValueError, match="NaN|infinity"):
        fit(Est(), X, y)


@pytest.mark.parametrize("Est", ESTIMATORS)
def test_empty_and_single_sample(Est):
    X, y = data()
    with pytest.raises(ValueError, match="sample"):
        fit(Est(), X[:0], y[:0])
    with pytest.raises(ValueError, match="sample"):
        fit(Est(), X[:1], y[:1])


def test_one_class_only():
    X, _ = data()
    with pytest.raises(ValueError, match="one class"):
        CVMClassifier().fit(X, np.zeros(len(X)))


def test_mismatched_shapes():
    X, y = data()
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        CVMClassifier().fit(X, y[:-1])
    clf = CVMClassifier(random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        clf.predict(np.zeros((3, 5)))


def test_negative_coef0_poly_is_not_psd():
    X, y = data()
    with pytest.raises(ValueError, match="coef0"):
        CVMClassifier(kernel="poly", coef0=-1.0).fit(X, y)


@pytest.mark.parametrize("Est", ESTIMATORS)
@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_same_seed_same_model_and_pickle_round_trip(Est, impl):
    X, y = data(200, seed=1)
    a = fit(Est(C=10.0, random_state=7, impl=impl) if Est is not MEB else Est(random_state=7, impl=impl), X, y)
    b = fit(Est(C=10.0, random_state=7, impl=impl) if Est is not MEB else Est(random_state=7, impl=impl), X, y)
    np.testing.assert_array_equal(a.core_set_, b.core_set_)
    np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)
    c = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(c.decision_function(X), a.decision_function(X))


def test_max_iter_bound_warns():
    from sklearn.exceptions import ConvergenceWarning
    X, y = data(300, seed=2)
    with pytest.warns(ConvergenceWarning, match="max_iter"):
        clf = CVMClassifier(C=100.0, eps=1e-8, max_iter=2, sample_size=None, solver="smo", random_state=0).fit(X, y)
    assert clf.n_iter_ == 2
    assert clf.certified_ratio_ > 1.0


@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_inner_qp_step_bound_warns(impl):
    """An unreachable inner tolerance makes the final SMO stop at its step bound: that must be said."""
    from sklearn.exceptions import ConvergenceWarning
    from refimpl.datasets import checkerboard
    X, y = checkerboard(400, random_state=0)  # large C on the checkerboard: SMO converges slowly
    with pytest.warns(ConvergenceWarning, match="step bound"):
        clf = CVMClassifier(C=1e4, gamma=1.0, tol=1e-300, sample_size=None, solver="smo", random_state=0,
                            impl=impl).fit(X, y)
    assert clf.history_["inner_capped"][-1]


@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_certify_false_skips_only_the_certificate(impl):
    """certify=False leaves the fit itself unchanged and reports no certified ratio."""
    X, y = data(300, seed=5)
    a = CVMClassifier(C=10.0, random_state=3, impl=impl).fit(X, y)
    b = CVMClassifier(C=10.0, random_state=3, impl=impl, certify=False).fit(X, y)
    np.testing.assert_array_equal(a.core_set_, b.core_set_)
    np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)
    assert np.isfinite(a.certified_ratio_) and np.isnan(b.certified_ratio_)
