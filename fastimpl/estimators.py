"""scikit-learn estimators over the core-set MEB engine.

Thin Python classes in the style of ``sklearn/svm/_base.py``: validate, build the MEB problem
of the formulation (:mod:`refimpl.cvm`), run the engine of the chosen implementation
(``impl='fast'``: :mod:`fastimpl._engine`; ``impl='ref'``: :mod:`refimpl.meb`), and recover the
model.  Every fitted estimator reports what its fit achieved: ``core_set_``, ``n_iter_``,
``radius_``, ``rho_``, ``certified_ratio_`` (r_cert^2 / R_tau^2 from a full scan, see
:mod:`refimpl.meb`) and a per-iteration ``history_``.
"""
from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, OutlierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from refimpl import cvm, cvr
from refimpl.kernels import make_kernel_spec
from refimpl.meb import make_rng, validate_engine_params

IMPLS = ("fast", "ref")


def get_engine(impl):
    """(fit_meb, kernel_expansion) of the chosen implementation; both have the reference's signatures."""
    if impl == "fast":
        from . import _engine
        return _engine.fit_meb, _engine.kernel_expansion
    if impl == "ref":
        from refimpl.kernels import kernel_expansion
        from refimpl.meb import fit_meb
        return fit_meb, kernel_expansion
    raise ValueError(f"impl must be one of {IMPLS}, got {impl!r}")


def _signs(positive):
    """int8 signs: +1 where ``positive``, -1 elsewhere (no int64/float64 temporaries of length m)."""
    out = np.full(positive.shape, -1, dtype=np.int8)
    out[positive] = 1
    return out


def _take(members, local):
    """Training-set indices of a pair's local indices (``members`` None: the pair is the whole set)."""
    return local if members is None else members[local]


def _check_positive(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be positive and finite, got {value}")


class _MEBEstimatorMixin:
    """Parameter checks, engine dispatch and the fitted diagnostics shared by all estimators."""

    def _validate_params_common(self, n_samples):
        _check_positive("eps", self.eps)
        if self.cache_size is not None:
            _check_positive("cache_size", self.cache_size)
        validate_engine_params(self.eps, self.sample_size, self.max_iter, self.tol, max(n_samples, 2),
                               self.n_confirm, self.solver, self.stop)
        get_engine(self.impl)

    def _kernel_spec(self, X):
        return make_kernel_spec(X, self.kernel, self.gamma, self.degree, self.coef0, self.normalize)

    def _run(self, problem):
        fit_meb, _ = get_engine(self.impl)
        return fit_meb(problem, float(self.eps), sample_size=self.sample_size, max_iter=self.max_iter,
                       tol=self.tol, random_state=self.random_state, n_confirm=self.n_confirm,
                       solver=self.solver, stop=self.stop, certify=self.certify,
                       cache_size=int(self.cache_size * 2**20), verbose=self.verbose)

    def _expansion(self, X, SV, coef):
        _, kernel_expansion = get_engine(self.impl)
        return kernel_expansion(self.kernel_spec_, SV, coef, X)

    @staticmethod
    def _diagnostics(result):
        return dict(core_set=result.core_set, n_iter=result.n_iter, radius=float(np.sqrt(max(result.radius2, 0.0))),
                    certified_ratio=result.certified_ratio, history=result.history,
                    converged=result.converged, kernel_evaluations=result.kernel_evaluations,
                    kkt_gap=result.kkt_gap, margin_scale=result.margin_scale)

    def _set_diagnostics(self, result):
        """The fitted diagnostics every single-ball estimator reports (core set, radius, certificate,
        history, ...)."""
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


_COMMON_DOC = """
    eps : float, default=1e-6
        The (1+eps) tolerance of the core-set loop (001 Sec. 4; the papers use 1e-6).
    kernel : {'rbf', 'laplacian', 'poly', 'linear'}, default='rbf'
    gamma : float or {'beta', 'scale', 'auto'}, default='beta'
        Kernel coefficient; 'beta' is the papers' 1/beta with beta the mean squared pairwise distance.
    degree, coef0 : polynomial kernel options.
    normalize : bool, default=False
        Use k(x,y)/sqrt(k(x,x)k(y,y)), which gives any kernel a constant diagonal.
    sample_size : int or None, default=59
        Random candidates per iteration (the probabilistic speed-up, 001 Sec. 4.1.2); None scans all
        points, which is what the (1+eps)^2 guarantee needs.
    n_confirm : int, default=30
        (Beyond the paper) with sampling, stop only after 1 + n_confirm consecutive clean samples;
        0 is the paper's rule.  See :func:`refimpl.meb.fit_meb`.
    max_iter : int, default=10000
        Bound on core-set updates; a ConvergenceWarning says when it stops the fit.
    tol : float or None, default=None
        Inner QP stopping gap; None means eps * R^2 under stop='radius', eps * (margin term) otherwise.
    solver : {'auto', 'active_set', 'smo'}, default='auto'
        Core-set QP solver: the exact active-set Newton method (10-100x fewer operations than SMO at
        large C; see :func:`refimpl.simplex_qp.active_set_simplex`), the paper's warm-started
        second-order SMO (001 Sec. 4.1.4), or 'auto': active set while at most 1,000 (stop='radius')
        or 8,000 (stop='margin'/'gap') core vectors carry weight, SMO beyond (chosen by measurement,
        :func:`refimpl.meb.auto_max_free`).
    stop : {'margin', 'radius', 'gap'}, default='margin'
        The test that ends the core-set loop (:data:`refimpl.meb.STOPS`): the (1+eps) ball test with
        eps measured against the margin term instead of the whole radius ('margin', beyond the
        paper), the paper's own test ('radius', for reproduction), or LIBSVM's maximal-violating-pair
        gap with tolerance eps ('gap').  'margin' is the default because 'radius' accepts margin
        violators whenever eps R^2 is not small against the margin term (Loosli & Canu 2007): on the
        checkerboard at the paper's width and C=1e6 it leaves 12.5% test error where 'margin' leaves
        0.29% (README, Design notes).  Under 'radius' a ConvergenceWarning says when that happens.
    cache_size : float, default=200
        Megabytes for the core-set kernel cache (fast implementation).
    certify : bool, default=True
        Run the final full scan that certifies the fit: ``certified_ratio_`` = (r_cert / R)^2.  It is
        the only O(m) step of a sampled fit; ``False`` skips it (``certified_ratio_`` is then nan),
        e.g. to time the core-set loop alone, whose cost does not grow with m.
    random_state : None, int, RandomState or Generator
    impl : {'fast', 'ref'}, default='fast'
    verbose : bool, default=False
        Show a progress bar during the fit.
"""


class MEB(_MEBEstimatorMixin, OutlierMixin, BaseEstimator):
    """Minimum enclosing ball in feature space = hard-margin SVDD (001_1b97d3ee98da12aa.txt, eqs. (1)-(3)).

    ``predict`` returns +1 for points inside the fitted ball and -1 outside; the ball used is the
    certified one (radius ``certified_radius_`` = r_cert, which encloses every training point), and
    ``decision_function`` is r_cert^2 - ||c - phi(x)||^2.

    Parameters
    ----------""" + _COMMON_DOC + """
    Attributes
    ----------
    center_coef_ : weights alpha of the support vectors; center c = sum alpha_i phi(sv_i).
    support_, support_vectors_ : indices and coordinates of the core vectors with alpha > 0.
    radius_ : R_tau; certified_ratio_ : (r_cert / R_tau)^2; core_set_, n_iter_, history_.
    """

    def __init__(self, *, eps=1e-6, kernel="rbf", gamma="beta", degree=3, coef0=0.0, normalize=False,
                 sample_size=59, n_confirm=30, max_iter=10000, tol=None, solver="auto", stop="margin",
                 cache_size=200, certify=True, random_state=None, impl="fast", verbose=False):
        self.eps = eps
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.normalize = normalize
        self.sample_size = sample_size
        self.n_confirm = n_confirm
        self.max_iter = max_iter
        self.tol = tol
        self.solver = solver
        self.stop = stop
        self.cache_size = cache_size
        self.certify = certify
        self.random_state = random_state
        self.impl = impl
        self.verbose = verbose

    def fit(self, X, y=None):
        X = validate_data(self, X, dtype=np.float64, order="C", ensure_min_samples=2)
        self._validate_params_common(X.shape[0])
        self.kernel_spec_ = self._kernel_spec(X)
        problem = cvm.svdd_problem(X, self.kernel_spec_)
        result = self._run(problem)
        model = cvm.recover(problem, result, None, "meb")
        self._set_fitted(X, result, model)
        self.offset_ = 0.0
        return self

    def _set_fitted(self, X, result, model):
        self._set_diagnostics(result)
        self.support_ = model.support
        self.support_vectors_ = X[model.support]
        self.center_coef_ = model.coef
        self.dual_coef_ = model.coef[None, :]
        self.intercept_ = np.array([model.intercept])
        self.rho_ = model.rho
        # the dual objective of 001 eq. (2): R^2 (CVDD overrides it with its own dual)
        self.dual_objective_ = float(result.radius2)

    def _dist2(self, X):
        from refimpl.kernels import kernel_diag
        return self.rho_ - 2.0 * self._expansion(X, self.support_vectors_, self.center_coef_) \
            + kernel_diag(self.kernel_spec_, X)

    def decision_function(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, order="C", reset=False)
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
    k~ = k + delta_ij / C.  ``decision_function(x) = w'phi(x) - rho`` (negative: outlier).

    Parameters
    ----------
    C : float, default=1.0""" + _COMMON_DOC

    def __init__(self, *, C=1.0, eps=1e-6, kernel="rbf", gamma="beta", degree=3, coef0=0.0, normalize=False,
                 sample_size=59, n_confirm=30, max_iter=10000, tol=None, solver="auto", stop="margin",
                 cache_size=200, certify=True, random_state=None, impl="fast", verbose=False):
        super().__init__(eps=eps, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0, normalize=normalize,
                         sample_size=sample_size, n_confirm=n_confirm, max_iter=max_iter, tol=tol,
                         solver=solver, stop=stop, cache_size=cache_size, certify=certify,
                         random_state=random_state, impl=impl, verbose=verbose)
        self.C = C

    def fit(self, X, y=None):
        X = validate_data(self, X, dtype=np.float64, order="C", ensure_min_samples=2)
        _check_positive("C", self.C)
        self._validate_params_common(X.shape[0])
        self.kernel_spec_ = self._kernel_spec(X)
        problem = cvm.one_class_problem(X, self.kernel_spec_, float(self.C))
        result = self._run(problem)
        model = cvm.recover(problem, result, float(self.C), "one_class")
        self._set_fitted(X, result, model)
        self.xi_ = model.xi
        self.dual_objective_ = -model.rho  # the dual (7) of 001: max -alpha'K~alpha
        self.offset_ = -model.intercept  # = rho, as OneClassSVM's offset_
        return self

    def decision_function(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, order="C", reset=False)
        return self._expansion(X, self.support_vectors_, self.center_coef_) + self.intercept_[0]

    def score_samples(self, X):
        return self.decision_function(X) + self.offset_

    def predict(self, X):
        return np.where(self.decision_function(X) >= 0, 1, -1)


class CVMClassifier(_MEBEstimatorMixin, ClassifierMixin, BaseEstimator):
    """Core Vector Machine: the two-class L2-SVM solved as an MEB (001_1b97d3ee98da12aa.txt, eqs. (8)-(11)).

    Multi-class problems are split one-vs-one as LIBSVM does; each pair is a separate CVM.

    Parameters
    ----------
    C : float, default=1.0""" + _COMMON_DOC + """
    Attributes
    ----------
    classes_ : class labels.
    support_, support_vectors_ : all support vectors (alpha > 0), indices in training order.
    dual_coef_ : (n_pairs, n_SV) alpha_i y_i per pair (zeros where a vector is not in the pair).
    intercept_ : (n_pairs,) b = sum alpha_i y_i of each pair (eq. (11)).
    rho_, radius_, certified_ratio_, n_iter_ : per pair (scalars for binary problems).
    dual_objective_ : -rho_, the optimal value of the dual (9) reached.
    core_set_ : indices of the core vectors (all pairs); history_ : per pair (a dict for binary).
    """

    def __init__(self, *, C=1.0, eps=1e-6, kernel="rbf", gamma="beta", degree=3, coef0=0.0, normalize=False,
                 sample_size=59, n_confirm=30, max_iter=10000, tol=None, solver="auto", stop="margin",
                 cache_size=200, certify=True, random_state=None, impl="fast", verbose=False):
        self.C = C
        self.eps = eps
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.normalize = normalize
        self.sample_size = sample_size
        self.n_confirm = n_confirm
        self.max_iter = max_iter
        self.tol = tol
        self.solver = solver
        self.stop = stop
        self.cache_size = cache_size
        self.certify = certify
        self.random_state = random_state
        self.impl = impl
        self.verbose = verbose

    def fit(self, X, y):
        X, y = validate_data(self, X, y, dtype=np.float64, order="C", ensure_min_samples=2)
        check_classification_targets(y)
        _check_positive("C", self.C)
        self._validate_params_common(X.shape[0])
        self.classes_ = np.unique(y)
        if len(self.classes_) < 2:
            raise ValueError(f"y has only one class ({self.classes_[0]!r}); CVMClassifier needs at least 2")
        # The kernel width is resolved once on the whole training set so that every pair shares it.
        self.kernel_spec_ = self._kernel_spec(X)
        # one seed per pair, drawn from random_state, so that ref and fast see identical draws
        rng = make_rng(self.random_state)
        pairs, results, models, members = [], [], [], []
        binary = len(self.classes_) == 2
        for a in range(len(self.classes_)):
            for b in range(a + 1, len(self.classes_)):
                # signs y_i in {-1, +1} as int8, the first class positive as in LIBSVM
                if binary:  # no subset copy of X and 1 byte a point: a fit's extra memory stays small
                    idx = None
                    Xp, y_pm = X, _signs(y == self.classes_[a])
                else:
                    idx = np.flatnonzero((y == self.classes_[a]) | (y == self.classes_[b]))
                    Xp, y_pm = X[idx], _signs(y[idx] == self.classes_[a])
                problem = cvm.two_class_problem(Xp, y_pm, self.kernel_spec_, float(self.C))
                fit_meb, _ = get_engine(self.impl)
                result = fit_meb(problem, float(self.eps), sample_size=self.sample_size, max_iter=self.max_iter,
                                 tol=self.tol, random_state=int(rng.integers(0, 2**31 - 1)),
                                 n_confirm=self.n_confirm,
                                 solver=self.solver, stop=self.stop, certify=self.certify,
                                 cache_size=int(self.cache_size * 2**20), verbose=self.verbose)
                model = cvm.recover(problem, result, float(self.C), "two_class")
                pairs.append((a, b))
                results.append(result)
                models.append(model)
                members.append(idx)
        support = np.unique(np.concatenate([_take(m, mod.support) for m, mod in zip(members, models)]))
        pos = {s: k for k, s in enumerate(support)}
        dual = np.zeros((len(pairs), len(support)))
        for p, (m, mod) in enumerate(zip(members, models)):
            dual[p, [pos[s] for s in _take(m, mod.support)]] = mod.coef
        self.pairs_ = pairs
        self.support_ = support
        self.support_vectors_ = X[support]
        self.dual_coef_ = dual
        self.intercept_ = np.array([mod.intercept for mod in models])
        self.core_set_ = np.unique(np.concatenate([_take(m, r.core_set) for m, r in zip(members, results)]))
        diags = [self._diagnostics(r) for r in results]

        def per_pair(key):
            vals = [d[key] for d in diags]
            return vals[0] if binary else (vals if key == "history" else np.array(vals))

        self.n_iter_ = per_pair("n_iter")
        self.radius_ = per_pair("radius")
        self.certified_ratio_ = per_pair("certified_ratio")
        self.history_ = per_pair("history")
        self.converged_ = per_pair("converged")
        self.kernel_evaluations_ = per_pair("kernel_evaluations")
        self.kkt_gap_ = per_pair("kkt_gap")
        self.rho_ = models[0].rho if binary else np.array([m.rho for m in models])
        self.dual_objective_ = -self.rho_  # the dual (9) of 001: max -alpha'K~alpha, per pair
        self.xi_ = models[0].xi if binary else [m.xi for m in models]
        return self

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
        X = validate_data(self, X, dtype=np.float64, order="C", reset=False)
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


class CVR(_MEBEstimatorMixin, RegressorMixin, BaseEstimator):
    """Core Vector Regression: the L2-SVR solved as a center-constrained MEB (000_88c8f8810bf6206d.txt).

    Solves the primal (000 eq. (6))

        min ||w||^2 + b^2 + C/(mu m) sum (xi_i^2 + xi*_i^2) + 2 C epsbar

    (bias penalised, squared slacks, tube width epsbar learned) through its dual (7) as an MEB of
    2m augmented points (eqs. (8), (15)); see :mod:`refimpl.cvr`.  ``predict(x) = w'phi(x) + b``.

    Because b is penalised, targets far from 0 cost a larger b; that is the paper's model (and
    what makes the implicit-surface "one-set" f(x) = 1 well posed, Sec. 4.2).

    Parameters
    ----------
    C : float, default=1000.0
        Weight of the tube width and the slacks against ||w||^2 + b^2 (eq. (6)).  Scaling the targets
        by s is the same as dividing the tube's weight by s, so C must grow with the targets' scale;
        the paper tunes C and mu on a small subset (Sec. 4.1), as ``reports/cvr.py`` does.
    mu : float, default=0.1
        Expected error: mu = sum (xi_i + xi*_i) / m at the optimum (analogous to nu in nu-SVR).""" + _COMMON_DOC + """
    Attributes
    ----------
    support_, support_vectors_ : training rows with lambda_i != lambda*_i, and their inputs.
    dual_coef_ : (1, n_SV) beta_i = C (lambda_i - lambda*_i); w = sum beta_i phi(x_i) (eq. (9)).
    intercept_ : (1,) b = C sum (lambda_i - lambda*_i).
    epsilon_bar_ : the tube width of eq. (10).
    xi_, xi_star_ : slacks lambda_i mu m and lambda*_i mu m of the support rows (eq. (9)).
    eta_ : the constant of eq. (15); radius_^2 - eta_ is the dual objective (7) reached.
    core_set_ : indices of the core vectors among the 2m augmented points (i < m: lambda_i,
        i >= m: lambda*_{i-m}).
    radius_, certified_radius_, certified_ratio_, n_iter_, history_, converged_,
    kernel_evaluations_, dual_objective_ : as for :class:`CVMClassifier`.
    """

    def __init__(self, *, C=1000.0, mu=0.1, eps=1e-6, kernel="rbf", gamma="beta", degree=3, coef0=0.0,
                 normalize=False, sample_size=59, n_confirm=30, max_iter=10000, tol=None, solver="auto", stop="margin",
                 cache_size=200, certify=True, random_state=None, impl="fast", verbose=False):
        self.C = C
        self.mu = mu
        self.eps = eps
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.normalize = normalize
        self.sample_size = sample_size
        self.n_confirm = n_confirm
        self.max_iter = max_iter
        self.tol = tol
        self.solver = solver
        self.stop = stop
        self.cache_size = cache_size
        self.certify = certify
        self.random_state = random_state
        self.impl = impl
        self.verbose = verbose

    def fit(self, X, y):
        X, y = validate_data(self, X, y, dtype=np.float64, order="C", ensure_min_samples=2, y_numeric=True)
        if np.ptp(y) == 0:
            raise ValueError(f"y is constant ({y[0]!r}): nothing to regress (an implicit surface's one-set "
                             "targets are fitted by refimpl/fastimpl.surface, which expects them)")
        return self._fit(X, y)

    def _fit(self, X, y):
        """Fit on validated (X, y); constant targets allowed (the one-set of 000 Sec. 4.2)."""
        _check_positive("C", self.C)
        _check_positive("mu", self.mu)
        self._validate_params_common(X.shape[0])
        self.n_features_in_ = X.shape[1]
        self.kernel_spec_ = self._kernel_spec(X)
        C, mu = float(self.C), float(self.mu)
        problem = cvr.cvr_problem(X, y, self.kernel_spec_, C, mu)
        result = self._run(problem)
        model = cvr.recover(problem, result, y, C, mu)
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

    def predict(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, order="C", reset=False)
        return self._expansion(X, self.support_vectors_, self.dual_coef_[0]) + self.intercept_[0]
