"""CVR on real targets (issue 27): any location and scale, any C, never a degenerate tube, never worse than the
mean.  The reference is scikit-learn's SVR(C=10, epsilon=0.1) fitted on the standardised targets, mapped back.

Data: y = sin(x_0) + 0.1 N(0, 1) on 2-D inputs, the issue's case (shifted targets such as prices or
temperatures in kelvin are ordinary data); R^2 on held-out points.
"""
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import r2_score
from sklearn.svm import SVR

from corevector import CVR

M_TRAIN, M_TEST = 2000, 1000
#: the issue's bound: R^2 within 0.01 of SVR's
R2_SLACK = 0.01


def _data(m, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, (m, 2))
    return X, np.sin(X[:, 0]) + 0.1 * rng.standard_normal(m)


X, Y = _data(M_TRAIN, 0)
XT, YT = _data(M_TEST, 1)


def _svr_r2():
    mean, std = Y.mean(), Y.std()
    svr = SVR(C=10, epsilon=0.1).fit(X, (Y - mean) / std)
    return r2_score(YT, svr.predict(XT) * std + mean)


SVR_R2 = _svr_r2()


def _fit(shift=0.0, scale=1.0, **params):
    """CVR on y * scale + shift; (R^2 on the test targets in y's units, epsilon_bar in y's units, model)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # a degenerate tube would warn: it must not happen
        warnings.filterwarnings("ignore", "CVR: C=.*tube weight", ConvergenceWarning)  # the documented C cap
        est = CVR(random_state=0, **params).fit(X, Y * scale + shift)
    pred = (est.predict(XT) - shift) / scale
    return r2_score(YT, pred), est.epsilon_bar_ / scale, est


def test_svr_reference_fits():
    assert SVR_R2 > 0.97  # the data are easy; the bounds below are against a good fit


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shift=st.floats(-1e6, 1e6), log_scale=st.floats(-6, 6))
def test_defaults_on_shifted_and_scaled_targets(shift, log_scale):
    r2, ebar, _ = _fit(shift, 10.0 ** log_scale)
    assert r2 >= SVR_R2 - R2_SLACK
    assert ebar >= 0


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log_C=st.floats(0, 10))
def test_any_C_from_1_to_1e10_with_mu_auto(log_C):
    r2, ebar, est = _fit(C=10.0 ** log_C)
    assert r2 >= SVR_R2 - R2_SLACK
    assert ebar >= 0
    assert est.C_ <= 10.0 ** log_C * (1 + 1e-12)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log_C=st.floats(-3, 0), shift=st.floats(-1e3, 1e3))
def test_small_C_is_never_worse_than_the_mean(log_C, shift):
    """A heavily regularised fit shrinks towards the targets' mean, never past it (on y + 300 with C = 1e-2 the
    paper's model, whose bias is penalised, gave R^2 = -1.6e5)."""
    r2, ebar, _ = _fit(shift, C=10.0 ** log_C)
    mean_r2 = r2_score(YT, np.full(M_TEST, Y.mean()))  # predicting the training mean
    assert r2 >= mean_r2 - 1e-9
    assert ebar >= 0


@pytest.mark.parametrize("shift", [0.0, 10.0, 100.0, 1000.0])
def test_issue_table(shift):
    """The issue's table: y as is and shifted by 10, 100, 1000 (R^2 0.981, 0.980 with every point a support
    vector, 0.961 and -4.77 before), and C = 1e8 with mu 'auto' (R^2 -2,425, epsbar -502)."""
    r2, ebar, est = _fit(shift)
    assert r2 >= SVR_R2 - R2_SLACK and ebar >= 0
    assert est.support_.size < M_TRAIN  # not every point a support vector


def test_large_C_issue_case():
    r2, ebar, est = _fit(C=1e8)
    assert r2 >= SVR_R2 - R2_SLACK and ebar >= 0


def test_shift_and_scale_give_the_same_model():
    """normalize_y fits the same problem whatever the targets' location and scale: bit for bit for a power-of-two
    scale, and up to the rounding of the shifted targets themselves otherwise (y * 1e-3 + 1e5 keeps ~8 digits
    of y, so the core sets may differ; the functions agree to that rounding)."""
    _, _, a = _fit()
    _, _, b = _fit(scale=2.0 ** -20)
    np.testing.assert_array_equal(a.support_, b.support_)
    np.testing.assert_array_equal(b.predict(XT) / 2.0 ** -20, a.predict(XT))
    _, _, c = _fit(shift=1e5, scale=1e-3)
    np.testing.assert_allclose((c.predict(XT) - 1e5) / 1e-3, a.predict(XT), atol=1e-3 * np.std(Y))


def test_paper_model_is_one_argument_away():
    """normalize_y=False is the paper's model on the raw targets: far from 0 its penalised bias costs the fit
    (the failure the default avoids), which the fit now reports as a degenerate tube when it is one."""
    est = CVR(normalize_y=False, mu=5.0, random_state=0)
    with pytest.warns(ConvergenceWarning, match="degenerate tube.*lower mu"):
        est.fit(X, Y + 100.0)
    assert est.epsilon_bar_ < 0
    assert est.y_mean_ == 0.0 and est.y_scale_ == 1.0


def test_explicit_mu_that_degenerates_warns_naming_mu():
    with pytest.warns(ConvergenceWarning, match="mu=1.0 exceeds the fit's mean error"):
        est = CVR(mu=1.0, random_state=0).fit(X, Y)
    assert est.epsilon_bar_ < 0


def test_mu_auto_refits_a_degenerate_tube():
    """Low-noise targets: the first mu of 'auto' exceeds the fit's error (epsbar < 0); the fit lowers mu and
    refits until the tube has a positive width."""
    y = np.sin(X[:, 0]) + 1e-3 * np.random.default_rng(5).standard_normal(M_TRAIN)
    est = CVR(random_state=0).fit(X, y)
    assert est.n_mu_refits_ >= 1
    assert est.epsilon_bar_ >= 0
    assert r2_score(np.sin(XT[:, 0]), est.predict(XT)) > 0.998  # kernel ridge at the same C: 0.9997
