"""scikit-learn estimators over the core-set MEB engine.

Thin Python classes in the style of ``sklearn/svm/_base.py``: validate (scikit-learn's
``_parameter_constraints``), build the MEB problem of the formulation (:mod:`refimpl.cvm`,
:mod:`refimpl.cvr`), run the core-set loop on the numerics of the chosen implementation
(:func:`fastimpl.numerics.numerics`: ``impl='fast'`` Cython, ``impl='ref'`` NumPy), and recover the
model.  Every fitted estimator reports what its fit achieved: ``core_set_``, ``n_iter_``, ``radius_``,
``rho_``, ``certified_ratio_`` (r_cert^2 / R_tau^2 from a full scan, see :mod:`refimpl.meb`),
``kkt_gap_`` and a per-iteration ``history_``.

Defaults were chosen by measurement (README, "Defaults"): the two-class CVM stops with the 'hybrid'
rule at eps = 1e-2 (the paper's ball test, never looser than "every sampled training point is
classified correctly"), the one-class CVDD with the 'margin' rule at eps = 1e-4, and all use
scikit-learn's ``gamma='scale'``; the papers' settings are one argument away (``stop='radius'``,
``eps=1e-6``, ``gamma='beta'``, ``solver='smo'``).
"""
from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, OutlierMixin, RegressorMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from refimpl import cvm, cvr
from refimpl.driver import HYBRID_NU, STOPS, make_rng
from refimpl.kernels import KERNELS, kernel_diag
from refimpl.meb import SOLVERS, validate_engine_params

from ._validation import EPS, POSITIVE, check_eps, checked_kernel_spec, invalid_parameter, store_params
from .numerics import IMPLS, numerics

__all__ = ["MEB", "CVDD", "CVMClassifier", "CVR"]


def _classes(y):
    """np.unique(y), through a bincount for integer labels of a small range (np.unique hashes every label:
    ~25 ms at m = 1e6, a tenth of a whole 1M-point fit; the bincount ~3 ms)."""
    if y.dtype.kind in "iu" and y.size:
        lo, hi = int(y.min()), int(y.max())
        if hi - lo < 1 << 16:
            return (np.flatnonzero(np.bincount((y - lo).astype(np.intp, copy=False))) + lo).astype(y.dtype)
    return np.unique(y)


def _signs(positive):
    """int8 signs: +1 where ``positive``, -1 elsewhere (no int64/float64 temporaries of length m)."""
    out = np.asarray(positive, dtype=bool).view(np.int8) * np.int8(2)  # 0/1 -> 0/2, one byte a point
    out -= 1
    return out


def _point_weights(X, sample_weight, factor=None):
    """w_i = factor_i * sample_weight_i (scikit-learn's C_i = C class_weight[y_i] sample_weight_i), checked
    as scikit-learn checks sample weights; None when no weight was given.  A ValueError names
    ``sample_weight`` (negative, non-finite, wrong length, all zero)."""
    if sample_weight is None and factor is None:
        return None
    try:
        w = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True, copy=True)
    except ValueError as exc:
        raise ValueError(exc.args[0] if "sample_weight" in str(exc) else f"sample_weight: {exc}") from None
    if factor is not None:
        w *= factor
    if not np.all(np.isfinite(w)):
        raise ValueError("sample_weight (times class_weight) must be finite")
    if not np.any(w > 0):
        raise ValueError("sample_weight (times class_weight) must be positive for at least one sample")
    return w


def _drop_zero_weights(w):
    """The rows of positive weight (None: all rows): a point of weight 0 has no slack penalty, and is
    left out of the fit as LIBSVM leaves it out -- the fit is exactly the fit without it."""
    if w is None or np.all(w > 0):
        return None
    return np.flatnonzero(w > 0)


def _take(members, local):
    """Training-set indices of a pair's local indices (``members`` None: the pair is the whole set)."""
    return local if members is None else members[local]


_POSITIVE = POSITIVE
_DOC = """
    eps : float, default={eps}
        Tolerance of the core-set loop's stop rule (001 Sec. 4): the paper's (1+eps) ball test under
        'radius' and 'hybrid', the fraction ((1+eps)^2 - 1) of the margin term under 'margin', LIBSVM's
        tolerance relative to the margin under 'gap'.  Must lie in (0, 1), and in (0, sqrt(3) - 1) under
        'margin', beyond which the test passes misclassified points (:data:`fastimpl._validation.EPS_MAX`).
    kernel : {{'rbf', 'laplacian', 'poly', 'linear'}}, default='rbf'
    gamma : float or {{'scale', 'beta', 'auto'}}, default='{gamma}'
        Kernel coefficient: 'scale' is scikit-learn's 1 / (d Var(X)); 'beta' is the papers' 1/beta with
        beta the mean squared pairwise distance (1/beta = 'scale' / 2 on standardised data).
    degree, coef0 : polynomial kernel options.
    normalize : bool, default=False
        Use k(x,y)/sqrt(k(x,x)k(y,y)), which gives any kernel a constant diagonal.
    sample_size : int or None, default=59
        Random candidates per iteration (the probabilistic speed-up, 001 Sec. 4.1.2); None scans all
        points, which is what the (1+eps)^2 guarantee needs.
    n_confirm : int, default=100
        (Beyond the paper) with sampling, stop only after 1 + n_confirm consecutive clean samples
        (about 6,000 draws: at most ~0.05% of the training points fail the test, at 95% confidence);
        0 is the paper's rule.  Once the draws would cover every point, one full scan replaces them.
    max_iter : int, default=100000
        Bound on the core-set loop's iterations; a ConvergenceWarning says when it stops the fit.
    tol : float or None, default=None
        Inner QP stopping gap; None follows the stop rule (:func:`refimpl.driver.inner_tolerance`).
    solver : {{'auto', 'active_set', 'smo'}}, default='auto'
        'auto': the batched loop (every violator of a sample joins the core set, the core-set QP solved
        as far as the outer gap asks, finished before the loop may stop), with the exact active-set
        method while the support is small and SMO beyond (:func:`refimpl.meb.auto_max_free`).  'smo'
        is the paper's algorithm (one core vector per iteration, warm-started SMO, 001 Sec. 4.1.4);
        'active_set' the same loop with the exact active-set Newton method.
    stop : {{'hybrid', 'margin', 'radius', 'gap'}}, default='{stop}'
        The test that ends the core-set loop (:data:`refimpl.driver.STOPS`): 'radius' is the paper's
        (1+eps) ball test; 'margin' measures eps against the margin term instead of the whole radius
        (Loosli & Canu 2007); 'gap' is LIBSVM's maximal-violating-pair test; 'hybrid' is the paper's test
        never looser than "the functional margin of every sampled point is at least 0" (for the two-class
        CVM: every sampled training point is classified correctly).  Every fit reports
        ``certified_ratio_`` and ``kkt_gap_`` whatever the rule.
    cache_size : float, default=200
        Megabytes for all the memory the core set holds (fast implementation): the cache of the core-set
        QP's kernel rows, the active set's Cholesky factor and the stores of the core and support
        vectors; the last two evict cached rows as they grow.
    certify : bool, default=True
        Run the final full scan that certifies the fit: ``certified_ratio_`` = (r_cert / R)^2.  It is
        the only O(m) step of a sampled fit; ``False`` skips it (``certified_ratio_`` is then nan).
    random_state : None, int, RandomState or Generator
    impl : {{'fast', 'ref'}}, default='fast'
        The Cython engine or the readable NumPy reference (same core set, same model).
    verbose : bool, default=False
        Show a progress bar during the fit.
"""


def _doc(**defaults):
    return _DOC.format(**defaults)


class _CoreVectorBase(BaseEstimator):
    """What every estimator over the core-set engine shares: its parameters and their checks, the
    engine call, the fitted diagnostics, and kernel expansions for prediction."""

    #: the cap of stop='hybrid' (refimpl.driver.d2_threshold): 1 for the L2-SVMs (a sampled point passes
    #: only if it is on the right side of the margin's half-way mark, i.e. classified correctly)
    HYBRID_NU = HYBRID_NU

    _parameter_constraints: dict = {
        "eps": [EPS],
        "kernel": [StrOptions(set(KERNELS))],
        "gamma": [StrOptions({"scale", "beta", "auto"}), _POSITIVE],
        "degree": [Interval(Integral, 1, None, closed="left")],
        "coef0": [Interval(Real, None, None, closed="neither")],
        "normalize": ["boolean"],
        "sample_size": [Interval(Integral, 1, None, closed="left"), None],
        "n_confirm": [Interval(Integral, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [_POSITIVE, None],
        "solver": [StrOptions(set(SOLVERS))],
        "stop": [StrOptions(set(STOPS))],
        "cache_size": [_POSITIVE],
        "certify": ["boolean"],
        "random_state": ["random_state", np.random.Generator],
        "impl": [StrOptions(set(IMPLS))],
        "verbose": ["verbose"],
    }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # CSR input for fit and predict (issue 15); other formats become CSR
        return tags

    def _check_fit_params(self, n_samples):
        check_eps(self, self.eps, self.stop)
        validate_engine_params(self.eps, self.sample_size, self.max_iter, self.tol, max(n_samples, 2),
                               self.n_confirm, self.solver, self.stop)

    def _kernel_spec(self, X):
        return checked_kernel_spec(X, self.kernel, self.gamma, self.degree, self.coef0, self.normalize)

    def _run(self, problem, random_state=None, label=None):
        """The core-set loop on ``problem`` with this estimator's options (one engine call for all)."""
        return numerics(self.impl).fit_meb(
            problem, float(self.eps), sample_size=self.sample_size, max_iter=self.max_iter, tol=self.tol,
            random_state=self.random_state if random_state is None else random_state,
            n_confirm=self.n_confirm, solver=self.solver, stop=self.stop, certify=self.certify,
            cache_size=int(self.cache_size * 2**20), verbose=self.verbose, hybrid_nu=self._hybrid_nu(),
            label=label or f"{type(self).__name__} ({self.impl})")

    def _hybrid_nu(self):
        return self.HYBRID_NU

    def _expansion(self, X, SV, coef):
        # the support vectors take the layout of X (they are few): CSR against CSR, dense against dense
        if sp.issparse(X) and not sp.issparse(SV):
            SV = sp.csr_matrix(SV)
        elif not sp.issparse(X) and sp.issparse(SV):
            SV = SV.toarray()
        return numerics(self.impl).kernel_expansion(self.kernel_spec_, SV, coef, X)

    @staticmethod
    def _diagnostics(result):
        return dict(core_set=result.core_set, n_iter=result.n_iter,
                    radius=float(np.sqrt(max(result.radius2, 0.0))), certified_ratio=result.certified_ratio,
                    history=result.history, converged=result.converged,
                    kernel_evaluations=result.kernel_evaluations, kkt_gap=result.kkt_gap,
                    margin_scale=result.margin_scale)

    def _set_diagnostics(self, result):
        """The fitted diagnostics of a single-ball estimator (core set, radius, certificate, history)."""
        diag = self._diagnostics(result)
        self.core_set_ = diag["core_set"]
        self.n_iter_ = diag["n_iter"]
        self.radius_ = diag["radius"]
        self.certified_ratio_ = diag["certified_ratio"]
        # r_cert covers every training point; it is the radius the fitted ball is used with
        self.certified_radius_ = float(np.sqrt(result.r_cert2)) if np.isfinite(result.r_cert2) else self.radius_
        self.history_ = diag["history"]
        self.converged_ = diag["converged"]
        self.kernel_evaluations_ = diag["kernel_evaluations"]
        self.kkt_gap_ = diag["kkt_gap"]


class MEB(OutlierMixin, _CoreVectorBase):
    """Minimum enclosing ball in feature space = hard-margin SVDD (001_1b97d3ee98da12aa.txt, eqs. (1)-(3)).

    ``predict`` returns +1 for points inside the fitted ball and -1 outside; the ball used is the
    certified one (radius ``certified_radius_`` = r_cert, which encloses every training point), and
    ``decision_function`` is r_cert^2 - ||c - phi(x)||^2.

    Parameters
    ----------""" + _doc(eps="1e-6", gamma="scale", stop="radius") + """
    Attributes
    ----------
    center_coef_ : weights alpha of the support vectors; center c = sum alpha_i phi(sv_i).
    support_, support_vectors_ : indices and coordinates of the core vectors with alpha > 0.
    radius_ : R_tau; certified_ratio_ : (r_cert / R_tau)^2; core_set_, n_iter_, history_.
    """

    def __init__(self, *, eps=1e-6, kernel="rbf", gamma="scale", degree=3, coef0=0.0, normalize=False,
                 sample_size=59, n_confirm=100, max_iter=100_000, tol=None, solver="auto", stop="radius",
                 cache_size=200, certify=True, random_state=None, impl="fast", verbose=False):
        store_params(self, locals())

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        return self._fit_ball(X)

    def _fit_ball(self, X, sample_weight=None):
        X = validate_data(self, X, dtype=np.float64, order="C", accept_sparse="csr", ensure_min_samples=2)
        self._check_fit_params(X.shape[0])
        w = _point_weights(X, sample_weight)
        kept = _drop_zero_weights(w)
        Xk, wk = (X, w) if kept is None else (X[kept], w[kept])
        if Xk.shape[0] < 2:
            raise ValueError(f"sample_weight is positive for {Xk.shape[0]} sample; {type(self).__name__} needs 2")
        self.kernel_spec_ = self._kernel_spec(Xk)
        problem = self._problem(Xk, wk)
        result = self._run(problem)
        self._set_fitted(Xk, result, self._recover(problem, result))
        if kept is not None:  # indices into the training set as given
            self.support_, self.core_set_ = kept[self.support_], kept[self.core_set_]
        return self

    def _problem(self, X, weights=None):
        return cvm.svdd_problem(X, self.kernel_spec_)

    def _recover(self, problem, result):
        return cvm.recover(problem, result, None, "meb")

    def _set_fitted(self, X, result, model):
        self._set_diagnostics(result)
        self.support_ = model.support
        self.support_vectors_ = X[model.support]
        self.center_coef_ = model.coef
        self.dual_coef_ = model.coef[None, :]
        self.intercept_ = np.array([model.intercept])
        self.rho_ = model.rho
        # the dual objective of 001 eq. (2): R^2
        self.dual_objective_ = float(result.radius2)
        self.offset_ = 0.0

    def _dist2(self, X):
        return self.rho_ - 2.0 * self._expansion(X, self.support_vectors_, self.center_coef_) \
            + kernel_diag(self.kernel_spec_, X)

    def decision_function(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, order="C", accept_sparse="csr", reset=False)
        return self.certified_radius_ ** 2 - self._dist2(X)

    def score_samples(self, X):
        return self.decision_function(X)

    #: relative slack on the squared radius when testing membership: prediction recomputes
    #: ||c - phi(x)||^2 with other arithmetic than the engine's certificate scan, so the furthest
    #: training point may land a few ulps outside the ball it defines
    MEMBERSHIP_RTOL = 1e-10

    def predict(self, X):
        dec = self.decision_function(X)
        return np.where(dec >= -self.MEMBERSHIP_RTOL * self.certified_radius_ ** 2, 1, -1)


class CVDD(MEB):
    """Core Vector Data Description: one-class L2-SVM novelty detection (001 Sec. 3.2.1, eq. (7)).

    Solves min ||w||^2 - 2 rho + C sum xi_i^2 s.t. w'phi(x_i) >= rho - xi_i as an MEB with
    k~ = k + delta_ij / C.  ``decision_function(x) = w'phi(x) - rho`` (negative: outlier).  Whether a
    point lies above rho is decided by rho itself, so the default solves to eps = 1e-4 of the margin:
    looser fits move rho and with it the inlier rate (README, "Defaults").

    ``fit(X, sample_weight=w)`` gives point i the penalty C_i = C w_i (the ridge 1/C_i of K~); points of
    weight 0 are left out, and an integer weight k is the point repeated k times (in the primal).

    Parameters
    ----------
    C : float, default=1.0""" + _doc(eps="1e-4", gamma="scale", stop="margin")

    _parameter_constraints: dict = {**_CoreVectorBase._parameter_constraints, "C": [_POSITIVE]}

    def __init__(self, *, C=1.0, eps=1e-4, kernel="rbf", gamma="scale", degree=3, coef0=0.0, normalize=False,
                 sample_size=59, n_confirm=100, max_iter=100_000, tol=None, solver="auto", stop="margin",
                 cache_size=200, certify=True, random_state=None, impl="fast", verbose=False):
        store_params(self, locals())

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, sample_weight=None):
        """Fit on X; ``sample_weight`` w_i gives point i the slack penalty C_i = C w_i (points of weight 0
        are left out)."""
        return self._fit_ball(X, sample_weight)

    def _problem(self, X, weights=None):
        return cvm.one_class_problem(X, self.kernel_spec_, float(self.C), weights)

    def _recover(self, problem, result):
        return cvm.recover(problem, result, float(self.C), "one_class")

    def _set_fitted(self, X, result, model):
        super()._set_fitted(X, result, model)
        self.xi_ = model.xi
        self.dual_objective_ = -model.rho  # the dual (7) of 001: max -alpha'K~alpha
        self.offset_ = -model.intercept  # = rho, as OneClassSVM's offset_

    def decision_function(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, order="C", accept_sparse="csr", reset=False)
        return self._expansion(X, self.support_vectors_, self.center_coef_) + self.intercept_[0]

    def score_samples(self, X):
        return self.decision_function(X) + self.offset_

    def predict(self, X):
        return np.where(self.decision_function(X) >= 0, 1, -1)


class CVMClassifier(ClassifierMixin, _CoreVectorBase):
    """Core Vector Machine: the two-class L2-SVM solved as an MEB (001_1b97d3ee98da12aa.txt, eqs. (8)-(11)).

    Multi-class problems are split one-vs-one as LIBSVM does; each pair is a separate CVM.

    Weights (scikit-learn's and LIBSVM's semantics): point i gets the slack penalty
    C_i = C * class_weight[y_i] * sample_weight_i in the primal min ||w||^2 + b^2 - 2 rho + sum C_i xi_i^2,
    i.e. the ridge 1/C on K~'s diagonal becomes 1/C_i (:mod:`refimpl.cvm`).  Points of weight 0 are left
    out of the fit, equal weights w are C w exactly, and since duplicated points share their slack at the
    optimum, an integer weight k is the point repeated k times (in the primal; the core-set fit reaches
    either to its eps).

    Probabilities (``probability=True``), as LIBSVM does: each pair's decision values are computed by a
    5-fold cross-validation of that pair's CVM (shuffled folds drawn from ``random_state``, weights kept),
    a sigmoid P(a | f) = 1 / (1 + exp(A f + B)) is fitted to them by Platt's method with Lin et al.'s
    targets (scikit-learn's ``sklearn.calibration._sigmoid_calibration``), and for more than two classes
    the pairwise probabilities are coupled as LIBSVM's ``multiclass_probability`` does (Wu, Lin & Weng
    2004, method 2), here by solving its linear system directly.  As in LIBSVM, ``predict`` still uses
    the decision values, so it can disagree with the argmax of ``predict_proba`` near ties.

    Parameters
    ----------
    C : float, default=1.0
    class_weight : dict, 'balanced' or None, default=None
        Multiplies C for the points of each class (scikit-learn's SVC); 'balanced' uses
        n_samples / (n_classes * np.bincount(y)).
    probability : bool, default=False
        Fit Platt's sigmoids on internal 5-fold cross-validation (5 extra fits per pair) for
        ``predict_proba``/``predict_log_proba``.""" + _doc(eps="1e-2", gamma="scale", stop="hybrid") + """
    Attributes
    ----------
    classes_ : class labels.
    support_, support_vectors_ : all support vectors (alpha > 0), indices in training order.
    dual_coef_ : (n_pairs, n_SV) alpha_i y_i per pair (zeros where a vector is not in the pair).
    intercept_ : (n_pairs,) b = sum alpha_i y_i of each pair (eq. (11)).
    rho_, radius_, certified_ratio_, n_iter_ : per pair (scalars for binary problems).
    dual_objective_ : -rho_, the optimal value of the dual (9) reached.
    core_set_ : indices of the core vectors (all pairs); history_ : per pair (a dict for binary).
    class_weight_ : (n_classes,) the class weights used (ones without ``class_weight``).
    probA_, probB_ : (n_pairs,) Platt's sigmoid per pair, P(first class of the pair | f) =
        1 / (1 + exp(probA_ f + probB_)) with f the pair's internal decision value (``probability=True``;
        empty arrays otherwise, as scikit-learn's SVC).
    """

    _parameter_constraints: dict = {**_CoreVectorBase._parameter_constraints, "C": [_POSITIVE],
                                    "class_weight": [dict, StrOptions({"balanced"}), None],
                                    "probability": ["boolean"]}
    #: folds of the cross-validation behind Platt's sigmoids (LIBSVM's svm_binary_svc_probability)
    PROBABILITY_FOLDS = 5
    #: pairwise probabilities are clipped to [MIN_PROB, 1 - MIN_PROB] before coupling (LIBSVM's min_prob)
    MIN_PROB = 1e-7

    def __init__(self, *, C=1.0, class_weight=None, probability=False, eps=1e-2, kernel="rbf", gamma="scale",
                 degree=3, coef0=0.0, normalize=False, sample_size=59, n_confirm=100, max_iter=100_000, tol=None,
                 solver="auto", stop="hybrid", cache_size=200, certify=True, random_state=None, impl="fast",
                 verbose=False):
        store_params(self, locals())

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit on (X, y); ``sample_weight`` w_i gives point i the slack penalty C_i = C class_weight[y_i] w_i
        (points of weight 0 are left out, as LIBSVM leaves them out)."""
        X, y = validate_data(self, X, y, dtype=np.float64, order="C", accept_sparse="csr", ensure_min_samples=2)
        if y.dtype.kind not in "biu":  # integer labels are classes by nature: spare a pass over m labels
            check_classification_targets(y)
        self._check_fit_params(X.shape[0])
        self.classes_ = _classes(y)
        if len(self.classes_) < 2:
            raise ValueError(f"y has only one class ({self.classes_[0]!r}); CVMClassifier needs at least 2")
        w, kept = self._weights(X, y, sample_weight)
        if kept is not None:
            X, y, w = X[kept], y[kept], w[kept]
        # The kernel width is resolved once on the whole training set so that every pair shares it.
        self.kernel_spec_ = self._kernel_spec(X)
        # one seed per pair, drawn from random_state, so that ref and fast see identical draws; the
        # cross-validation seeds of probability=True come after them, so the model does not depend on it
        rng = make_rng(self.random_state)
        pairs = [(a, b) for a in range(len(self.classes_)) for b in range(a + 1, len(self.classes_))]
        seeds = [int(rng.integers(0, 2**31 - 1)) for _ in pairs]
        fits = [self._fit_pair(X, y, w, a, b, seed) for (a, b), seed in zip(pairs, seeds)]
        self._set_fitted(X, fits, kept)
        self.probA_, self.probB_ = np.empty(0), np.empty(0)
        if self.probability:
            cv_seeds = [int(rng.integers(0, 2**31 - 1)) for _ in pairs]
            platt = [self._platt_pair(X, y, w, a, b, seed) for (a, b), seed in zip(pairs, cv_seeds)]
            self.probA_ = np.array([ab[0] for ab in platt])
            self.probB_ = np.array([ab[1] for ab in platt])
        return self

    def _weights(self, X, y, sample_weight):
        """(w, kept): the per-point weights class_weight[y_i] * sample_weight_i (None: all 1) and the rows
        of positive weight (None: all); sets ``class_weight_``."""
        from sklearn.utils.class_weight import compute_class_weight

        if self.class_weight is None:  # compute_class_weight would hash all m labels again (22 ms at 1M)
            self.class_weight_ = np.ones(len(self.classes_))
        else:
            self.class_weight_ = compute_class_weight(self.class_weight, classes=self.classes_, y=y)
        factor = None if self.class_weight is None else self.class_weight_[np.searchsorted(self.classes_, y)]
        w = _point_weights(X, sample_weight, factor)
        kept = _drop_zero_weights(w)
        if kept is not None:
            left = np.unique(y[kept])
            if len(left) < len(self.classes_):
                gone = [c for c in self.classes_ if c not in set(left.tolist())]
                raise ValueError(f"sample_weight (times class_weight) is 0 for every point of class(es) {gone!r}: "
                                 "CVMClassifier needs points of positive weight in every class")
        return w, kept

    def _pair_data(self, X, y, w, a, b):
        """(members, X_pair, y_pm, w_pair) of the pair a (positive, as in LIBSVM) against b."""
        if len(self.classes_) == 2:  # no subset copy of X and 1 byte a point: a fit's extra memory stays small
            return None, X, _signs(y == self.classes_[a]), w
        idx = np.flatnonzero((y == self.classes_[a]) | (y == self.classes_[b]))
        return idx, X[idx], _signs(y[idx] == self.classes_[a]), None if w is None else w[idx]

    def _fit_pair(self, X, y, w, a, b, seed):
        """The binary CVM of classes a (positive, as in LIBSVM) against b: (pair, members, result, model)."""
        idx, Xp, y_pm, wp = self._pair_data(X, y, w, a, b)
        label = f"CVMClassifier ({self.impl}) {self.classes_[a]!r} vs {self.classes_[b]!r}"
        return ((a, b), idx) + self._solve_binary(Xp, y_pm, wp, seed, label)

    def _solve_binary(self, X, y_pm, w, seed, label):
        """(result, model) of the two-class CVM on (X, y_pm) with weights w (None: all 1)."""
        problem = cvm.two_class_problem(X, y_pm, self.kernel_spec_, float(self.C), w)
        result = self._run(problem, seed, label=label)
        return result, cvm.recover(problem, result, float(self.C), "two_class")

    def _platt_pair(self, X, y, w, a, b, seed):
        """(A, B) of the pair's sigmoid P(a | f) = 1 / (1 + exp(A f + B)), fitted to decision values from a
        shuffled k-fold cross-validation of the pair's CVM (LIBSVM's svm_binary_svc_probability).  A
        training fold with one class only gives its test fold f = +1 or -1, as LIBSVM does."""
        from sklearn.calibration import _sigmoid_calibration
        from sklearn.model_selection import KFold

        _, Xp, y_pm, wp = self._pair_data(X, y, w, a, b)
        rng = make_rng(seed)
        folds = KFold(min(self.PROBABILITY_FOLDS, len(y_pm)), shuffle=True,
                      random_state=int(rng.integers(0, 2**31 - 1)))
        dec = np.empty(len(y_pm))
        for k, (train, test) in enumerate(folds.split(Xp)):
            fold_seed = int(rng.integers(0, 2**31 - 1))
            y_tr = y_pm[train]
            if np.all(y_tr == y_tr[0]):
                dec[test] = float(y_tr[0])
                continue
            label = f"CVMClassifier ({self.impl}) {self.classes_[a]!r} vs {self.classes_[b]!r} CV {k + 1}"
            _, model = self._solve_binary(Xp[train], y_tr, None if wp is None else wp[train], fold_seed, label)
            dec[test] = self._expansion(Xp[test], Xp[train[model.support]], model.coef) + model.intercept
        A, B = _sigmoid_calibration(dec, y_pm > 0)
        return float(A), float(B)

    def _set_fitted(self, X, fits, kept=None):
        pairs, members, results, models = (list(t) for t in zip(*fits))
        support = np.unique(np.concatenate([_take(m, mod.support) for m, mod in zip(members, models)]))
        pos = {s: k for k, s in enumerate(support)}
        dual = np.zeros((len(pairs), len(support)))
        for p, (m, mod) in enumerate(zip(members, models)):
            dual[p, [pos[s] for s in _take(m, mod.support)]] = mod.coef
        self.pairs_ = pairs
        self.support_ = support if kept is None else kept[support]  # indices into the training set as given
        self.support_vectors_ = X[support]
        self.dual_coef_ = dual
        self.intercept_ = np.array([mod.intercept for mod in models])
        self.core_set_ = np.unique(np.concatenate([_take(m, r.core_set) for m, r in zip(members, results)]))
        if kept is not None:
            self.core_set_ = kept[self.core_set_]
        binary = len(pairs) == 1
        diags = [self._diagnostics(r) for r in results]

        def per_pair(key):
            vals = [d[key] for d in diags]
            return vals[0] if binary else (vals if key == "history" else np.array(vals))

        for key in ("n_iter", "radius", "certified_ratio", "history", "converged", "kernel_evaluations", "kkt_gap"):
            setattr(self, key + "_", per_pair(key))
        self.rho_ = models[0].rho if binary else np.array([m.rho for m in models])
        self.dual_objective_ = -self.rho_  # the dual (9) of 001: max -alpha'K~alpha, per pair
        self.xi_ = models[0].xi if binary else [m.xi for m in models]

    def _pair_decisions(self, X):
        """(n, n_pairs) values f_ab(x) = sum alpha_i y_i k(x_i, x) + b; positive favours the first class."""
        out = np.empty((X.shape[0], len(self.pairs_)))
        for p in range(len(self.pairs_)):
            nz = np.flatnonzero(self.dual_coef_[p])
            out[:, p] = self._expansion(X, self.support_vectors_[nz], self.dual_coef_[p, nz]) + self.intercept_[p]
        return out

    def decision_function(self, X):
        """Binary: f(x), positive for ``classes_[1]`` (sklearn's convention). Multi-class: (n, n_classes)
        one-vs-one votes plus normalised confidences, as sklearn's SVC with decision_function_shape='ovr'."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, order="C", accept_sparse="csr", reset=False)
        dec = self._pair_decisions(X)
        if len(self.classes_) == 2:
            return -dec[:, 0]
        n_classes = len(self.classes_)
        votes = np.zeros((X.shape[0], n_classes))
        conf = np.zeros((X.shape[0], n_classes))
        for p, (a, b) in enumerate(self.pairs_):
            votes[:, a] += dec[:, p] > 0
            votes[:, b] += dec[:, p] <= 0
            conf[:, a] += dec[:, p]
            conf[:, b] -= dec[:, p]
        # confidences only break ties between equal vote counts (as sklearn's _ovr_decision_function)
        return votes + conf / (3.0 * (np.abs(conf) + 1.0))

    def predict(self, X):
        dec = self.decision_function(X)
        if len(self.classes_) == 2:
            return self.classes_[(dec > 0).astype(int)]
        return self.classes_[np.argmax(dec, axis=1)]

    def _check_proba(self):
        if not self.probability:
            raise AttributeError("predict_proba is not available when probability=False")
        return True

    @available_if(_check_proba)
    def predict_proba(self, X):
        """(n, n_classes) class probabilities from Platt's sigmoids (binary) coupled pairwise as LIBSVM
        does (multi-class); see the class docstring."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, order="C", accept_sparse="csr", reset=False)
        from scipy.special import expit

        r = expit(-(self._pair_decisions(X) * self.probA_ + self.probB_))  # P(first class of the pair)
        if len(self.classes_) == 2:
            return np.column_stack([r[:, 0], 1.0 - r[:, 0]])
        return pairwise_coupling(r, self.pairs_, len(self.classes_), self.MIN_PROB)

    @available_if(_check_proba)
    def predict_log_proba(self, X):
        """The logarithm of :meth:`predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))


def pairwise_coupling(r, pairs, k, min_prob=1e-7):
    """Class probabilities from pairwise ones (Wu, Lin & Weng, JMLR 2004, method 2; LIBSVM's
    ``multiclass_probability``): p minimises sum_{i<j} (r_ji p_i - r_ij p_j)^2 on sum p = 1, with
    r[:, q] = r_ab = P(a | a or b) for ``pairs[q] = (a, b)`` (clipped to [min_prob, 1 - min_prob]) and
    r_ba = 1 - r_ab.  The minimiser solves [[Q, 1], [1', 0]] [p; b] = [0; 1] with Q_tt = sum_{s != t} r_st^2,
    Q_ts = -r_st r_ts; it is non-negative (their Theorem 2), and LIBSVM reaches it iteratively.  Solved
    here directly, batched over the rows; tiny negative round-off is clipped and the rows renormalised."""
    r = np.clip(np.asarray(r, dtype=np.float64), min_prob, 1.0 - min_prob)
    n = r.shape[0]
    R = np.zeros((n, k, k))  # R[:, i, j] = r_ij = P(i | i or j)
    for q, (a, b) in enumerate(pairs):
        R[:, a, b] = r[:, q]
        R[:, b, a] = 1.0 - r[:, q]
    M = np.zeros((n, k + 1, k + 1))
    M[:, :k, :k] = -R.transpose(0, 2, 1) * R                     # Q_ts = -r_st r_ts (t != s)
    diag = np.einsum("nst,nst->nt", R, R)                         # sum_s r_st^2
    M[:, np.arange(k), np.arange(k)] = diag
    M[:, :k, k] = 1.0
    M[:, k, :k] = 1.0
    rhs = np.zeros((n, k + 1, 1))
    rhs[:, k, 0] = 1.0
    p = np.linalg.solve(M, rhs)[:, :k, 0]
    p = np.clip(p, 0.0, None)
    return p / p.sum(axis=1, keepdims=True)


class CVR(RegressorMixin, _CoreVectorBase):
    """Core Vector Regression: the L2-SVR solved as a center-constrained MEB (000_88c8f8810bf6206d.txt).

    Solves the primal (000 eq. (6))

        min ||w||^2 + b^2 + C/(mu m) sum (xi_i^2 + xi*_i^2) + 2 C epsbar

    (bias penalised, squared slacks, tube width epsbar learned) through its dual (7) as an MEB of
    2m augmented points (eqs. (8), (15)); see :mod:`refimpl.cvr`.  ``predict(x) = w'phi(x) + b``.

    Because b is penalised, targets far from 0 cost a larger b; that is the paper's model (and
    what makes the implicit-surface "one-set" f(x) = 1 well posed, Sec. 4.2).

    Parameters
    ----------
    C : float or "auto", default="auto"
        Weight of the tube width and the slacks against ||w||^2 + b^2 (eq. (6)).  Scaling the targets
        by s is the same as dividing the tube's weight by s, so C must grow with the targets' scale:
        "auto" sets C = C_RATIO max|y| (C_RATIO = 3000), LibCVM's rule C = s_ratio max|y| with the ratio
        chosen by measurement (README, "Defaults").  The paper tunes C and mu on a small subset
        (Sec. 4.1), as ``reports/cvr.py`` does.
    mu : float or "auto", default="auto"
        Expected error: mu = sum (xi_i + xi*_i) / m at the optimum (analogous to nu in nu-SVR), in the
        targets' units.  "auto": mu = C / (SLACK_WEIGHT m), SLACK_WEIGHT = 50, so that every point's
        squared slack weighs C / (mu m) = 50 against ||w||^2 + b^2, as LIBSVM's per-point C does: fixed
        as m grows, and independent of the targets' scale (chosen by measurement, README "Defaults";
        a mu proportional to max|y|, LibCVM's mu_ratio, was 24% worse than a tuned SVR on abalone).
    hybrid_cap : float > 0, default=1.0
        With stop='hybrid', a sampled point outside the core set passes only if |y - f(x)| <=
        (1 + hybrid_cap) epsbar (the cap nu of ``refimpl.driver.d2_threshold``; the radius test applies as
        well).  Smaller: a tighter fit with more core vectors.  Friedman #1, m = 1e5 (README, "Defaults"):
        1.0 gives RMSE 1.079 in ~11 s; 0.3 with mu = C / (30 m) 1.034 in ~100 s, where a tuned SVR has
        1.020 in 2,355 s.

    Targets of any scale: the MEB of eqs. (8), (15) depends on y only through y / C and mu m / C, and the
    model is C times its solution, so with C and mu "auto" the engine solves the problem of y / max|y|
    whatever the targets' units, and scaling y by s scales the predictions by s (eq. (6) is homogeneous:
    w, b, xi and epsbar scale with y when C and mu do).  A fit whose C = 3000 max|y|, (2/C) max|y| or
    fitted coefficients float64 cannot hold (max|y| above ~6e304, or subnormal targets below ~2.2e-308)
    is a ValueError: divide y by a constant and multiply the predictions by it.

    ``fit(X, y, sample_weight=w)`` weighs both slacks of point i by C w_i / (mu m) (the ridge mu m / C_i on
    both of its augmented points); points of weight 0 are left out (C and mu 'auto' are then resolved on
    the others), and with mu='auto' an integer weight k is the point repeated k times (in the primal).""" + _doc(
        eps="1e-2", gamma="beta", stop="hybrid") + """
    Attributes
    ----------
    support_, support_vectors_ : training rows with lambda_i != lambda*_i, and their inputs.
    dual_coef_ : (1, n_SV) beta_i = C (lambda_i - lambda*_i); w = sum beta_i phi(x_i) (eq. (9)).
    intercept_ : (1,) b = C sum (lambda_i - lambda*_i).
    C_, mu_ : the C and mu the fit used (resolved from "auto").
    epsilon_bar_ : the tube width of eq. (10).
    xi_, xi_star_ : slacks lambda_i mu m and lambda*_i mu m of the support rows (eq. (9)).
    eta_ : the constant of eq. (15); radius_^2 - eta_ is the dual objective (7) reached.
    core_set_ : indices of the core vectors among the 2m augmented points (i < m: lambda_i,
        i >= m: lambda*_{i-m}).
    radius_, certified_radius_, certified_ratio_, n_iter_, history_, converged_,
    kernel_evaluations_, dual_objective_ : as for :class:`CVMClassifier`.
    """

    _parameter_constraints: dict = {**_CoreVectorBase._parameter_constraints,
                                    "C": [_POSITIVE, StrOptions({"auto"})], "mu": [_POSITIVE, StrOptions({"auto"})],
                                    "hybrid_cap": [_POSITIVE]}
    #: C = "auto": C_RATIO max|y| (LibCVM's rule); mu = "auto": C / (SLACK_WEIGHT m) (README, "Defaults")
    C_RATIO = 3000.0
    SLACK_WEIGHT = 50.0

    def __init__(self, *, C="auto", mu="auto", hybrid_cap=1.0, eps=1e-2, kernel="rbf", gamma="beta", degree=3,
                 coef0=0.0, normalize=False, sample_size=59, n_confirm=100, max_iter=100_000, tol=None,
                 solver="auto", stop="hybrid", cache_size=200, certify=True, random_state=None, impl="fast",
                 verbose=False):
        store_params(self, locals())

    def _hybrid_nu(self):
        return float(self.hybrid_cap)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit on (X, y); ``sample_weight`` w_i gives both slacks of point i the weight C w_i / (mu m)
        instead of C / (mu m) (points of weight 0 are left out; with mu='auto', mu m = C / SLACK_WEIGHT
        whatever m, so an integer weight k is the point repeated k times, in the primal)."""
        X, y = validate_data(self, X, y, dtype=np.float64, order="C", accept_sparse="csr", ensure_min_samples=2,
                             y_numeric=True)
        w = _point_weights(X, sample_weight)
        kept = _drop_zero_weights(w)
        Xk, yk, wk = (X, y, w) if kept is None else (X[kept], y[kept], w[kept])
        if len(yk) < 2:
            raise ValueError(f"sample_weight is positive for {len(yk)} sample; CVR needs 2")
        if np.ptp(yk) == 0:
            where = "" if kept is None else " where sample_weight > 0"
            raise ValueError(f"y is constant ({yk[0]!r}){where}: nothing to regress (an implicit surface's one-set "
                             "targets are fitted by refimpl/fastimpl.surface, which expects them)")
        self._fit(Xk, yk, wk)
        if kept is not None:  # indices into the training set as given (core set: i < m lambda_i, i >= m lambda*_i)
            m, mk, z = X.shape[0], len(kept), self.core_set_
            self.support_ = kept[self.support_]
            self.core_set_ = np.where(z < mk, kept[z % mk], kept[z % mk] + m)
        return self

    def _fit(self, X, y, weights=None):
        """Fit on validated (X, y) with positive ``weights`` (None: all 1); constant targets allowed (the
        one-set of 000 Sec. 4.2)."""
        self._validate_params()
        self._check_fit_params(X.shape[0])
        self.n_features_in_ = X.shape[1]
        self.kernel_spec_ = self._kernel_spec(X)
        scale = float(np.max(np.abs(y))) or 1.0  # max|y| = 0 only for the all-zero one-set
        with np.errstate(over="ignore", under="ignore"):
            C = self.C_RATIO * scale if self.C == "auto" else float(self.C)
            mu = C / (self.SLACK_WEIGHT * X.shape[0]) if self.mu == "auto" else float(self.mu)
        self._check_target_scale(scale, C, mu, X.shape[0])
        self.C_, self.mu_ = C, mu
        problem = cvr.cvr_problem(X, y, self.kernel_spec_, C, mu, weights)
        result = self._run(problem)
        with np.errstate(over="ignore", invalid="ignore"):
            model = cvr.recover(problem, result, y, C)
        if not (np.all(np.isfinite(model.coef)) and np.isfinite(model.intercept)):
            raise ValueError(f"the fitted coefficients of CVR overflow float64 (max|y| = {scale:.3g}, C = {C:.3g}): "
                             "divide y by a constant and multiply the predictions by it")
        self._set_diagnostics(result)
        self.support_ = model.support
        self.support_vectors_ = X[model.support]
        self.dual_coef_ = model.coef[None, :]
        self.intercept_ = np.array([model.intercept])
        self.epsilon_bar_ = model.epsilon_bar
        self.xi_ = model.xi
        self.xi_star_ = model.xi_star
        self.eta_ = float(problem.eta)
        self.dual_objective_ = model.dual_objective
        return self

    def _check_target_scale(self, scale, C, mu, m):
        """ValueError for targets float64 cannot fit with this C and mu (see the class docstring): the
        engine's offsets (2/C) y and diagonal mu m / C, and C itself, must be normal floats."""
        tiny, big = np.finfo(np.float64).tiny, np.finfo(np.float64).max
        if scale < tiny:
            raise ValueError(f"y is of a scale float64 cannot hold: max|y| = {scale:.3g} is subnormal (below "
                             f"{tiny:.3g}), so the targets carry too few bits; multiply y by a constant and "
                             "divide the predictions by it")
        if not tiny <= C <= big:
            raise ValueError(f"y is of a scale float64 cannot hold for CVR: C = {self.C_RATIO:g} max|y| = {C:.3g} "
                             f"with max|y| = {scale:.3g}; divide y by a constant and multiply the predictions "
                             "by it (C and mu 'auto' scale with y, so the model is the same)")
        with np.errstate(over="ignore", under="ignore"):
            offset, diag = 2.0 * scale / C, mu * m / C
        if not tiny <= offset <= big:
            raise invalid_parameter(self, "C", f"such that 2 max|y| / C = {offset:.3g} is a normal float "
                                    f"(max|y| = {scale:.3g})", self.C)
        if not tiny <= diag <= big:
            raise invalid_parameter(self, "mu", f"such that mu m / C = {diag:.3g} is a normal float "
                                    f"(m = {m}, C = {C:.3g})", self.mu)

    def predict(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, order="C", accept_sparse="csr", reset=False)
        return self._expansion(X, self.support_vectors_, self.dual_coef_[0]) + self.intercept_[0]
