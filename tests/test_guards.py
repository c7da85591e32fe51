"""Issue 15's guards: badly scaled input, eps out of range, progress bars, fork safety.

Each test is one "Why" item of issue 15 and failed on main before the fix:

* guarded numerics: gamma='scale'/'beta' of X * 1e-160 was inf (accuracy 0.445, no warning), of X * 1e300
  silently 1.0 (or 0); CVR on y * 1e300 predicted around 1932; MMDA on X * 1e300 ran for more than 40 s;
* eps >= 1 was accepted (on ed333d5: CVMClassifier(eps=10): accuracy 0.555, CVR(eps=10): R^2 = -6e6;
  CVDD(eps=1): every point an outlier);
* the verbose bar of CVR and CVDD said "CVM (fast)", and MMDA, SparseSVR and ImplicitSurface had none;
* a 'fork' process pool started after a fit hung (GNU OpenMP), as did joblib's 'multiprocessing' backend.
"""
import math
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression
from sklearn.svm import SVC
from sklearn.utils._param_validation import InvalidParameterError

from corevector import CVDD, CVR, MEB, MMDA, CVMClassifier, ImplicitSurface, SparseSVR
from corevector._validation import EPS_MAX
from refimpl.driver import Ball, d2_threshold
from refimpl.kernels import beta_heuristic, resolve_gamma

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def classification(m=120, seed=0, n_classes=2):
    return make_classification(m, 6, n_informative=4, n_classes=n_classes, random_state=seed)


def regression(m=120, seed=0):
    X, y = make_regression(m, 4, noise=1.0, random_state=seed)
    return X, y / np.abs(y).max()


def _sphere(m=200, seed=0):
    P = np.random.default_rng(seed).normal(size=(m, 3))
    return P / np.linalg.norm(P, axis=1, keepdims=True)


def fit(est, X, y):
    if isinstance(est, (CVDD, MEB)):
        return est.fit(X)
    return est.fit(X, y)


# ---------------------------------------------------------------------------------------------------------
# Guarded numerics
# ---------------------------------------------------------------------------------------------------------
WIDTH_ESTIMATORS = [lambda g: CVMClassifier(gamma=g), lambda g: CVDD(gamma=g), lambda g: CVR(gamma=g),
                    lambda g: MMDA(gamma=g), lambda g: SparseSVR(gamma=g, n_basis=10)]


@pytest.mark.parametrize("make", WIDTH_ESTIMATORS)
@pytest.mark.parametrize("gamma", ["scale", "beta"])
@pytest.mark.parametrize("scale", [1e-160, 1e300])
def test_data_width_float64_cannot_hold_is_an_error(make, gamma, scale):
    """1/(d Var X) and 1/beta of X * 1e-160 (squared distances ~1e-320, subnormal) and of X * 1e300 (squares
    overflow) are not float64 numbers: a ValueError naming gamma, before any fit (no gamma = inf, 0 or a
    silent 1.0)."""
    X, y = classification()
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=f"gamma='{gamma}' cannot be computed"):
        fit(make(gamma), X * scale, y)
    assert time.perf_counter() - t0 < 5.0  # MMDA on X * 1e300 ran for more than 40 s


@pytest.mark.parametrize("gamma", ["scale", "beta"])
def test_width_scales_exactly_within_float64(gamma):
    """Where float64 holds the spread (scale 2^-500 ~ 3e-151 and 2^495 ~ 1e149), the guard lets the fit run,
    and the radial kernel is scale-free: gamma scales as 1/s^2 (exactly, for a power of two) and the
    classifier's predictions are the same as on X."""
    X, y = classification()
    base = CVMClassifier(gamma=gamma, random_state=0).fit(X, y)
    for k in (-500, 495):
        s = 2.0 ** k
        assert resolve_gamma(gamma, X * s, "rbf") == resolve_gamma(gamma, X, "rbf") / s ** 2
        clf = CVMClassifier(gamma=gamma, random_state=0).fit(X * s, y)
        np.testing.assert_array_equal(clf.predict(X * s), base.predict(X))


def test_constant_data_keeps_scikit_learns_gamma():
    """Rows that are all the same (no spread at all) keep scikit-learn's gamma='scale' convention, 1.0."""
    X = np.full((10, 3), 7.0)
    y = np.arange(10) % 2
    assert resolve_gamma("scale", X, "rbf") == SVC(gamma="scale").fit(X, y)._gamma == 1.0
    assert resolve_gamma("beta", X, "rbf") == 1.0


def test_beta_is_translation_invariant_and_exact():
    """beta = (1/m^2) sum_ij ||x_i - x_j||^2 depends on differences only: far from the origin (X + 1e8) it is
    the brute-force double sum, not the cancellation of mean ||x||^2 - ||mean x||^2."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5))
    brute = np.mean(((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    assert beta_heuristic(X) == pytest.approx(brute, rel=1e-12)
    assert beta_heuristic(X + 1e8) == pytest.approx(brute, rel=1e-6)


@pytest.mark.parametrize("make,scale", [
    (lambda: CVMClassifier(gamma=0.5), 1e300),            # squared distances overflow
    (lambda: CVMClassifier(gamma=1e300), 1e-160),         # every squared distance is subnormal
    (lambda: MMDA(gamma=0.5), 1e300),
    (lambda: CVMClassifier(kernel="linear", gamma=1.0), 1e100),  # k(x, x) ~ 1e200: products of kernel values overflow
    (lambda: CVMClassifier(kernel="poly", gamma=1.0, coef0=1.0, degree=3), 1e60),
    (lambda: CVR(kernel="linear", gamma=1.0), 1e-160),
])
def test_kernel_values_float64_cannot_hold_are_an_error(make, scale):
    """With a numeric gamma, data whose kernel values over- or underflow is a ValueError naming X.  (The widths
    gamma='scale' and 'beta' follow X's scale, linear kernel included: tests/test_kernels.py.)"""
    X, y = classification()
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="X is of a scale float64 cannot hold"):
        fit(make(), X * scale, y)
    assert time.perf_counter() - t0 < 5.0


@pytest.mark.parametrize("k", [-1000, 995])
def test_cvr_predictions_scale_with_the_targets(k):
    """normalize_y fits (y - mean) / std, the same problem for y * s, and maps the model back: CVR on y * s
    predicts s times CVR on y -- bit for bit for s a power of two, here s = 2^-1000 ~ 1e-301 and 2^995 ~ 1e299
    (on y * 1e300 CVR used to predict around 1932)."""
    X, y = regression()
    base = CVR(random_state=0).fit(X, y).predict(X)
    s = 2.0 ** k
    pred = CVR(random_state=0).fit(X, y * s).predict(X)
    np.testing.assert_array_equal(pred, base * s)
    assert 1.0 - np.mean((pred / s - y) ** 2) / np.var(y) > 0.9


def test_cvr_targets_near_the_float64_limits():
    """y * 1e306: the normalised targets are those of y, so CVR either predicts 1e306 times its predictions on y
    (within rounding) or, where the coefficients in the targets' units overflow, says so; below ~2.2e-308 the
    targets are subnormal: a ValueError that says to rescale y (the run used to end at max_iter with NaN
    predictions)."""
    X, y = regression()
    base = CVR(random_state=0).fit(X, y).predict(X)
    try:
        pred = CVR(random_state=0).fit(X, y * 1e306).predict(X)
    except ValueError as exc:
        assert "float64 cannot hold" in str(exc)
    else:
        np.testing.assert_allclose(pred / 1e306, base, rtol=1e-9, atol=1e-9 * np.abs(base).max())
    with pytest.raises(ValueError, match="subnormal"):
        CVR(random_state=0).fit(X, y * 1e-320)


def test_cvr_explicit_C_that_overflows_the_engine_names_C():
    X, y = regression()
    with pytest.raises(InvalidParameterError, match="'C' parameter of CVR"):
        CVR(C=1e-300, random_state=0).fit(X, y * 1e10)


def test_implicit_surface_points_of_any_representable_scale():
    """ImplicitSurface fits the points scaled to a unit diagonal, so its model is the same at any scale whose
    diagonal float64 holds (bit for bit for a power of two), and an error beyond (points * 1e300 gave
    scale_ = inf and f = 0 everywhere; points * 1e-300 said "all points coincide")."""
    P = _sphere()
    base = ImplicitSurface(random_state=0).fit(P).decision_function(P)
    for k in (-500, 495):
        s = 2.0 ** k
        np.testing.assert_array_equal(ImplicitSurface(random_state=0).fit(P * s).decision_function(P * s), base)
    for scale in (1e300, 1e-300):
        with pytest.raises(ValueError, match="points are of a scale float64 cannot hold"):
            ImplicitSurface(random_state=0).fit(P * scale)


# ---------------------------------------------------------------------------------------------------------
# eps out of the range that makes sense for the stop rule
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("est", [CVMClassifier(eps=10), CVR(eps=10), CVDD(eps=1), MEB(eps=1.0),
                                 MMDA(eps=1.5), ImplicitSurface(eps=2.0)],
                         ids=lambda e: type(e).__name__)
def test_eps_of_one_or_more_is_an_error_naming_eps(est):
    """eps >= 1 makes the (1+eps) ball test say nothing ("within twice the radius"): InvalidParameterError."""
    X, y = classification()
    with pytest.raises(InvalidParameterError, match="'eps' parameter"):
        est.fit(X) if isinstance(est, (CVDD, MEB, ImplicitSurface)) else est.fit(X, y)


@pytest.mark.parametrize("stop", ["margin", "gap"])
def test_eps_bound_is_where_the_rule_starts_passing_misclassified_points(stop):
    """The bound of each relative rule is the eps at which its test (refimpl.driver.d2_threshold) first
    accepts a point with functional margin y f(x) = 0, i.e. d^2 - R^2 = 2 rho for the L2-SVM (S = tau = rho,
    the support on the margin): below it such a point fails the test, at it the point passes."""
    rho, R2 = 0.3, 5.0
    ball = Ball(R2=R2, margin=rho, S=rho, tau=rho, d2_sv_min=R2, d2_core_max=R2)
    misclassified = R2 + 2.0 * rho
    bound = EPS_MAX[stop]
    assert d2_threshold(stop, bound * (1 - 1e-9), ball) < misclassified
    assert d2_threshold(stop, bound * (1 + 1e-9), ball) >= misclassified * (1 - 1e-12)


def test_margin_rule_refuses_eps_beyond_its_bound_and_others_accept_it():
    X, y = classification()
    eps = 0.8  # in (sqrt(3) - 1, 1)
    with pytest.raises(InvalidParameterError, match=r"'eps' parameter of CVDD must be in the range \(0, 0.732"):
        CVDD(eps=eps, stop="margin").fit(X)
    with pytest.raises(InvalidParameterError, match="'eps' parameter of MMDA"):
        MMDA(eps=eps, stop="margin").fit(X, y)
    assert CVMClassifier(eps=eps, stop="hybrid", random_state=0).fit(X, y).score(X, y) > 0.8
    assert math.isclose(EPS_MAX["margin"], math.sqrt(3) - 1)


# ---------------------------------------------------------------------------------------------------------
# Progress bars, each labelled with its estimator
# ---------------------------------------------------------------------------------------------------------
BARS = [
    ("CVR (fast)", lambda v: CVR(verbose=v, random_state=0).fit(*regression())),
    ("CVDD (ref)", lambda v: CVDD(verbose=v, impl="ref", random_state=0).fit(classification(60)[0])),
    ("CVMClassifier (fast)", lambda v: CVMClassifier(verbose=v, random_state=0).fit(*classification())),
    ("MMDA (fast) directions", lambda v: MMDA(n_components=2, verbose=v, random_state=0).fit(
        *classification(n_classes=3))),
    ("SparseSVR (fast) basis", lambda v: SparseSVR(n_basis=8, verbose=v, random_state=0).fit(*regression())),
    ("ImplicitSurface (fast) levels", lambda v: ImplicitSurface(verbose=v, random_state=0).fit(_sphere())),
]


@pytest.mark.parametrize("label,run", BARS, ids=[b[0] for b in BARS])
def test_progress_bar_is_labelled_with_its_estimator(label, run, capsys):
    run(True)
    err = capsys.readouterr().err
    assert label in err
    assert "CVM (fast)" not in err
    run(False)
    assert capsys.readouterr().err == ""  # silent unless verbose


def test_progress_bars_count_directions_basis_and_levels(capsys):
    """One step per direction (3 classes x 2), per basis function, per level: the bars end at their totals."""
    MMDA(n_components=2, verbose=True, random_state=0).fit(*classification(n_classes=3))
    SparseSVR(n_basis=8, verbose=True, random_state=0).fit(*regression())
    ImplicitSurface(verbose=True, random_state=0).fit(_sphere())
    err = capsys.readouterr().err.replace("\r", "\n")
    assert "6/6" in err and "8/8" in err and "3/3" in err


# ---------------------------------------------------------------------------------------------------------
# Fork safety
# ---------------------------------------------------------------------------------------------------------
# ---------------------------------------------------------------------------------------------------------
# Fork safety (issue 15: "a fork-based process pool started after a fit hangs (GNU OpenMP), and so does
# joblib's 'multiprocessing' backend with cross_val_score")
# ---------------------------------------------------------------------------------------------------------
FORK_SCRIPT = r"""
import multiprocessing as mp
import numpy as np
from joblib import parallel_backend
from sklearn.datasets import make_classification, make_regression
from sklearn.model_selection import cross_val_score
from corevector import CVMClassifier, SparseSVR

X, y = make_classification(3000, 10, random_state=0)      # large enough for the engine's parallel scans
Xr, yr = make_regression(3000, 10, random_state=0)

def fit_cvm(seed):
    return CVMClassifier(random_state=seed).fit(X, y).score(X, y)

def fit_ssvr(seed):
    return SparseSVR(n_basis=20, n_jobs=2, random_state=seed).fit(Xr, yr).score(Xr, yr)

if __name__ == "__main__":
    parent = [fit_cvm(1), fit_ssvr(1)]                      # OpenMP teams now exist in the parent
    with mp.get_context("fork").Pool(2) as pool:
        child = pool.map(fit_cvm, [1, 2]) + pool.map(fit_ssvr, [1, 2])
    with parallel_backend("multiprocessing", n_jobs=2):
        cv = cross_val_score(CVMClassifier(random_state=0), X, y, cv=2)
    print("RESULT", parent[0], parent[1], child[0], child[2], len(cv))
"""


def _run_isolated(script, timeout):
    """Run ``script`` in a fresh interpreter in its own session; on timeout kill the whole group (forked
    children included) and return None, so a hang fails the test instead of hanging the suite."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "script.py")
        with open(path, "w") as f:
            f.write(script)
        # this tree's fastimpl first (the script's own folder, not the cwd, leads sys.path)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
        proc = subprocess.Popen([sys.executable, path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=ROOT, env=env, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return None
        return proc.returncode, out, err


def test_fork_after_fit_does_not_hang():
    """A 'fork' pool and joblib's 'multiprocessing' backend after fits in the parent finish, and the
    children fit the same models as the parent (one OpenMP thread there: same results, serially)."""
    res = _run_isolated(FORK_SCRIPT, timeout=120)
    assert res is not None, "fork after a fit hung (killed after 120 s)"
    rc, out, err = res
    assert rc == 0, err[-2000:]
    vals = [line for line in out.splitlines() if line.startswith("RESULT")][0].split()[1:]
    parent_cvm, parent_ssvr, child_cvm, child_ssvr, n_folds = map(float, vals)
    assert child_cvm == parent_cvm and child_ssvr == parent_ssvr  # same seed, same data: same model
    assert n_folds == 2


def test_pairs_warn_once_per_fit_with_plain_labels():
    """CVMClassifier(stop='radius', C=1e4) on the 10 digits raised 43 ConvergenceWarnings in one fit, one per
    pair (issue 27): each kind of warning now comes once, saying in how many pairs it arose, and labels read
    as the user gave them (0 vs 1, not np.int64(0) vs np.int64(1))."""
    import warnings

    from sklearn.datasets import load_digits
    from sklearn.exceptions import ConvergenceWarning
    X, y = load_digits(return_X_y=True)
    X, y = X[:500], y[:500]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        CVMClassifier(stop="radius", C=1e4, random_state=0, probability=True).fit(X, y)
    slack = [x for x in w if issubclass(x.category, ConvergenceWarning) and "slack" in str(x.message)]
    assert len(slack) == 1, [str(x.message) for x in w]
    assert "of 45 pairs, first 0 vs 1]" in str(slack[0].message)
    assert "np." not in str(slack[0].message)
    with pytest.raises(ValueError, match=r"only one class \(1\.0\)"):
        CVMClassifier().fit(X[:5], np.ones(5, dtype=np.float64))


def test_a_finalizers_warning_during_a_pair_is_shown_as_it_came():
    """A ResourceWarning raised while a sub-fit runs comes from a finalizer (an unreaped subprocess of an
    earlier test, collected during a pair: CI once saw "subprocess ... is still running [1 of 66 pairs, first
    7 vs 9]"), not from the sub-fit: the collector shows it unchanged, under the caller's filters, and
    still gathers the sub-fits' own warnings once per fit."""
    import warnings

    from corevector._base import WarningsOncePerFit
    collector = WarningsOncePerFit()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for k in range(3):
            with collector.part(f"{k} vs {k + 1}"):
                warnings.warn(f"slack {k}", UserWarning)
                if k == 1:
                    warnings.warn("subprocess 123 is still running", ResourceWarning)
        collector.emit(3)
    assert [(x.category, str(x.message)) for x in w] == [
        (ResourceWarning, "subprocess 123 is still running"),
        (UserWarning, "slack 0 [3 of 3 pairs, first 0 vs 1]")]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        warnings.simplefilter("ignore", ResourceWarning)
        with collector.part("0 vs 1"):
            warnings.warn("subprocess 123 is still running", ResourceWarning)
        collector.emit(1)
    assert w == []


def test_large_C_on_data_that_are_not_separable_stops_early_naming_C():
    """CVMClassifier(C=1e12) on overlapping Gaussians ran to max_iter (2,000 points: 10 s and 62% accuracy; 20,000:
    minutes): the margin shrinks as 1/C to float64's resolution and the loop stalls.  The stall is detected
    (refimpl.driver.Stall) and a ConvergenceWarning names C, after a bounded number of iterations: far below
    max_iter (the time bound itself is measured by the report, not here)."""
    from sklearn.exceptions import ConvergenceWarning

    from refimpl.datasets import overlapping_gaussians
    from refimpl.driver import STALL_ITERATIONS
    X, y = overlapping_gaussians(2000, random_state=0)
    with pytest.warns(ConvergenceWarning, match=r"stalled.*C=1e\+12 is likely too large.*lower C"):
        est = CVMClassifier(C=1e12, random_state=0).fit(X, y)
    assert not est.converged_
    assert est.n_iter_ < 5 * STALL_ITERATIONS
    assert est.score(X, y) > 0.5


@pytest.mark.parametrize("nu", [0.4, 1.0, 2.0, 5.0])
def test_hybrid_cap_of_a_negative_margin_never_exceeds_one(nu):
    """'hybrid' with a negative functional margin (CVR's epsbar < 0): a cap nu > 1 must not turn |2 tau| into
    room beyond R^2 -- with nu > 1 it would pass |y - f| <= (nu - 1) |epsbar|, every point of a core set that
    does not fit its targets.  Such a ball's threshold is that of nu = min(nu, 1); a positive margin keeps nu."""
    R2, two_tau, c0 = 2.0, -0.3, 1.0
    negative = Ball.make(R2, R2 - c0 - two_tau, c0, R2, R2)
    assert negative.negative and math.isclose(negative.tau, 0.15)
    assert d2_threshold("hybrid", 0.5, negative, nu) == d2_threshold("hybrid", 0.5, negative, min(nu, 1.0))
    positive = Ball.make(R2, R2 - c0 - 0.3, c0, R2, R2)
    assert not positive.negative
    assert math.isclose(d2_threshold("hybrid", 0.5, positive, nu), R2 + min(1.25 * R2, 0.3 * nu))
