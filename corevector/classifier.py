"""CVMClassifier: the two-class L2-SVM as a minimum enclosing ball (001), multi-class one-vs-one as LIBSVM."""
from __future__ import annotations

import contextlib

import numpy as np
from sklearn.base import ClassifierMixin, _fit_context
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from refimpl import cvm
from refimpl.driver import make_rng

from ._base import CoreVectorBase, WarningsOncePerFit, _classes, shared_doc, _drop_zero_weights, _point_weights, _signs, _signs_of, _take
from ._validation import POSITIVE, plain, store_params
from .chunked.methods import accepts_chunked
from .parallel.pairs import blas_once, pair_workers
from .parallel.tasks import run_tasks
from .probability import MIN_PROB, PROBABILITY_FOLDS, class_probabilities, cross_validated_sigmoid

__all__ = ["CVMClassifier"]


@accepts_chunked
@shared_doc(eps="1e-2", gamma="scale", stop="hybrid")
class CVMClassifier(ClassifierMixin, CoreVectorBase):
    """Core Vector Machine: the two-class L2-SVM solved as a minimum enclosing ball ([001] eqs. (8)-(11)).

    The L2-SVM ``min ||w||^2 + b^2 - 2 rho + C sum_i xi_i^2`` subject to
    ``y_i (w'phi(x_i) + b) >= rho - xi_i`` is the minimum enclosing ball of the points ``(y_i phi(x_i),
    y_i, e_i / sqrt(C))``; the core-set algorithm finds a ``(1 + eps)``-approximate ball from a small
    subset of the data, so the fit's cost grows with the core set rather than with m.  Multi-class
    problems are split one-vs-one as LIBSVM does; each pair is a separate CVM.

    Parameters
    ----------
    C : float, default=1.0
        Penalty of the squared slacks.  Point i gets ``C_i = C * class_weight[y_i] * sample_weight_i``.
    class_weight : dict, 'balanced' or None, default=None
        Multiplies C for the points of each class (scikit-learn's SVC); 'balanced' uses
        ``n_samples / (n_classes * np.bincount(y))``.
    settle : 'auto' or bool, default='auto'
        (Beyond the papers) also stop a pair's core-set loop once more core vectors no longer change its
        decisions: each time the core set has grown by 15% (from 1,000 core vectors on), the predicted
        classes of a probe of 16,384 training points drawn once are compared with the last check's, and the
        loop stops when at most 0.25% of them changed (``refimpl.driver.Settle``).  On overlapping classes
        ``stop='hybrid'`` alone keeps adding misclassified training points, so its core set grows with m.
        'auto' turns the rule on under ``stop='hybrid'`` for pairs of more than ``SETTLE_MIN_ROWS``
        (100,000) points, so that smaller fits are those of the stop rule alone.  ``settled_`` says where it
        ended a loop; ``certified_ratio_`` then reports the ratio reached, which may exceed ``(1 + eps)^2``.
    probability : bool, default=False
        Fit Platt's sigmoids on an internal 5-fold cross-validation (5 extra fits per pair), for
        ``predict_proba`` and ``predict_log_proba``.
    %SHARED_PARAMETERS%

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels.
    pairs_ : list of (int, int)
        The one-vs-one pairs ``(a, b)`` (indices into ``classes_``) in the order of the per-pair
        attributes; a single ``(0, 1)`` for two classes.
    support_ : ndarray of shape (n_SV,)
        Training indices of all support vectors (``alpha > 0`` in any pair), in training order.
    support_vectors_ : ndarray or CSR matrix of shape (n_SV, n_features)
        The support vectors' inputs.
    dual_coef_ : ndarray of shape (n_pairs, n_SV)
        ``alpha_i y_i`` per pair (0 where a vector is not in the pair), ``y_i = +1`` for the pair's
        first class.
    intercept_ : ndarray of shape (n_pairs,)
        ``b = sum_i alpha_i y_i`` of each pair (eq. (11)).
    rho_ : float or ndarray of shape (n_pairs,)
        The margin rho of each pair (a scalar for two classes).
    dual_objective_ : float or ndarray of shape (n_pairs,)
        ``-rho_``, the optimal value of the dual (9) reached.
    xi_ : ndarray or list of ndarray
        Slacks ``alpha_i / C_i`` of each pair's support vectors (one array for two classes).
    radius_ : float or ndarray of shape (n_pairs,)
        R, the radius of each pair's core-set ball.
    certified_ratio_ : float or ndarray of shape (n_pairs,)
        ``(r_cert / R)^2`` of each pair from the final full scan (at most ``(1 + eps)^2`` with
        ``sample_size=None``; nan when ``certify=False``).
    kkt_gap_ : float or ndarray of shape (n_pairs,)
        The certified maximal-violation gap of each pair, relative to its margin rho (the units of
        LIBSVM's tolerance: ``SVC``'s ``tol`` at ``rho = 1``).
    core_set_ : ndarray of shape (n_core,)
        Training indices of the core vectors of all pairs.
    n_iter_ : int or ndarray of shape (n_pairs,)
        Iterations of each pair's core-set loop.
    converged_ : bool or ndarray of shape (n_pairs,)
        Whether each pair's stop test ended its loop (False: ``max_iter`` or the settle rule did).
    settled_ : bool or ndarray of shape (n_pairs,)
        Whether the settle rule ended each pair's loop (``settle``).
    settle_checks_ : ndarray of shape (n_checks, 2), or list of them (one per pair)
        The settle rule's checks of each pair, in order: the core-set size and how many probe points changed
        side since the last check (-1 at the first; the rule stops the loop once at most 0.25% of the probe
        did). Empty where the rule was off.
    kernel_evaluations_ : int or ndarray of shape (n_pairs,)
        Base-kernel evaluations each pair's fit made.
    history_ : dict of lists, or list of dict
        Per iteration of each pair (a dict for two classes): ``'core_set_size'``, ``'radius'``,
        ``'elapsed'``, ``'inner_steps'``, ``'inner_capped'``.
    class_weight_ : ndarray of shape (n_classes,)
        The class weights used (ones without ``class_weight``).
    probA_ : ndarray of shape (n_pairs,)
        Slope A of Platt's sigmoid per pair, ``P(first class of the pair | f) = 1 / (1 + exp(A f + B))``
        with f the pair's internal decision value (``probability=True``; empty otherwise, as
        scikit-learn's SVC).
    probB_ : ndarray of shape (n_pairs,)
        Offset B of Platt's sigmoid per pair (``probability=True``; empty otherwise).
    kernel_spec_ : KernelSpec
        The resolved kernel (``gamma`` as a number), shared by every pair.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of the features seen during ``fit``; defined only when X has string column names
        (a pandas DataFrame).

    See Also
    --------
    CVDD : One-class L2-SVM novelty detection by core vectors.
    CVR : Regression by core vectors.
    sklearn.svm.SVC : LIBSVM's C-SVM (hinge loss), the usual baseline.

    Notes
    -----
    Weights follow scikit-learn's and LIBSVM's semantics: point i gets the slack penalty
    ``C_i = C * class_weight[y_i] * sample_weight_i`` in the primal
    ``min ||w||^2 + b^2 - 2 rho + sum_i C_i xi_i^2``, i.e. the ridge ``1 / C`` on the transformed
    kernel's diagonal becomes ``1 / C_i`` (``refimpl.cvm``).  Points of weight 0 are left out of the
    fit, equal weights w are ``C w`` exactly, and since duplicated points share their slack at the
    optimum, an integer weight k is the point repeated k times (in the primal; the core-set fit
    reaches either to its eps).

    Probabilities (``probability=True``) are computed as LIBSVM computes them: each pair's decision
    values come from a 5-fold cross-validation of that pair's CVM (shuffled folds drawn from
    ``random_state``, weights kept), a sigmoid ``P(a | f) = 1 / (1 + exp(A f + B))`` is fitted to them by
    Platt's method with Lin et al.'s targets (scikit-learn's
    ``sklearn.calibration._sigmoid_calibration``), and for more than two classes the pairwise
    probabilities are coupled as LIBSVM's ``multiclass_probability`` does (Wu, Lin and Weng 2004, method 2), here by
    solving its linear system directly.  As in LIBSVM, ``predict`` still uses the decision values, so it
    can disagree with the argmax of ``predict_proba`` near ties.

    The defaults (``stop='hybrid'``, ``eps=1e-2``, ``gamma='scale'``) were chosen by measurement; the
    papers' settings are ``CVMClassifier(eps=1e-6, stop='radius', solver='smo', gamma='beta')`` with
    their C (see the defaults page of the documentation).

    References
    ----------
    .. [001] I. W. Tsang, J. T. Kwok and P.-M. Cheung. Very Large SVM Training using Core Vector Machines.
       Proceedings of the 10th International Workshop on Artificial Intelligence and Statistics (AISTATS), 2005.

    Examples
    --------
    The paper's checkerboard ([001] Sec. 5.1), at its C and kernel width:

    >>> from corevector import CVMClassifier
    >>> from refimpl.datasets import checkerboard
    >>> X, y = checkerboard(2_000, random_state=0)
    >>> X_test, y_test = checkerboard(1_000, random_state=1)
    >>> clf = CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(X, y)
    >>> bool(clf.score(X_test, y_test) > 0.95)
    True
    >>> clf.predict(X_test[:4]).shape
    (4,)
    >>> bool(clf.converged_), bool(clf.support_.size < len(X))
    (True, True)
    """

    #: the model in LIBSVM's terms (corevector._libsvm_layout)
    _libsvm_layout = "c_svc"

    _parameter_constraints: dict = {**CoreVectorBase._parameter_constraints, "C": [POSITIVE],
                                    "class_weight": [dict, StrOptions({"balanced"}), None],
                                    "probability": ["boolean"], "settle": [StrOptions({"auto"}), "boolean"]}
    #: settle='auto' turns the settle rule on for pairs of more than this many points: below it the
    #: defaults' fits are fast and accurate by the stop rule alone (trouser against the rest at 10^5 rows:
    #: 13.7 s, 99.48%), and they stay as they were
    SETTLE_MIN_ROWS = 100_000
    #: folds of Platt's cross-validation and the clipping of pairwise probabilities (corevector.probability)
    PROBABILITY_FOLDS = PROBABILITY_FOLDS
    MIN_PROB = MIN_PROB

    def __init__(self, *, C=1.0, class_weight=None, settle="auto", probability=False, eps=1e-2, kernel="rbf",
                 gamma="scale",
                 degree=3, coef0=0.0, normalize=False, sample_size=59, n_confirm=100, max_iter=100_000, tol=None,
                 solver="auto", stop="hybrid", cache_size=1000, certify=True, random_state=None, impl="fast",
                 verbose=False):
        store_params(self, locals())

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit the classifier on (X, y).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training inputs; sparse input is used as CSR.
        y : array-like of shape (n_samples,)
            Class labels (at least two classes; any labels scikit-learn accepts, e.g. strings).
        sample_weight : array-like of shape (n_samples,), default=None
            Per-point weights w_i: point i gets the slack penalty ``C_i = C class_weight[y_i] w_i``.
            Points of weight 0 are left out, as LIBSVM leaves them out.

        Returns
        -------
        CVMClassifier
            The fitted estimator (``self``).
        """
        X, y = self._validated(X, y, dtype=np.float64, order="C", accept_sparse="csr", ensure_min_samples=2)
        if y.dtype.kind not in "biu":  # integer labels are classes by nature: spare a pass over m labels
            check_classification_targets(y)
        self._check_fit_params(X.shape[0])
        self.classes_ = _classes(y)
        if len(self.classes_) < 2:
            raise ValueError(f"y has only one class ({plain(self.classes_[0])!r}); CVMClassifier needs at least 2")
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
        collected = WarningsOncePerFit()
        # separate tasks on a running dask.distributed client, in threads or forked processes (corevector.parallel)
        def part(task):  # (ranked by the pair's place: pairs in threads finish in any order)
            return collected.part(self._pair_name(task[0], task[1]), rank=task[0] * len(self.classes_) + task[1])
        # more than two classes: the pairs select their points by class codes (integers), not by comparing
        # labels (strings compare as objects: 22 ms of letter's 325 pairs at 5,000 points)
        ys = y if len(self.classes_) == 2 else np.searchsorted(self.classes_, y)
        # the rows of each class, once: a pair's rows are two of them (not two comparisons of all m labels)
        members = None if len(self.classes_) == 2 else _class_members(ys, len(self.classes_))
        threads, processes = pair_workers(X, len(self.classes_), len(pairs), self.impl, self.verbose)

        def per_pair(fn, pair_seeds):
            with (collected.threaded() if threads > 1 else contextlib.nullcontext()), blas_once(self.impl):
                return run_tasks(fn, [(a, b, seed) for (a, b), seed in zip(pairs, pair_seeds)],
                                 shared=(X, ys, w, members), each=part, threads=threads, processes=processes)
        self._set_fitted(X, per_pair(self._fit_pair, seeds), kept)
        self.probA_, self.probB_ = np.empty(0), np.empty(0)
        if self.probability:
            platt = per_pair(self._platt_pair, [int(rng.integers(0, 2**31 - 1)) for _ in pairs])
            self.probA_ = np.array([ab[0] for ab in platt])
            self.probB_ = np.array([ab[1] for ab in platt])
        collected.emit(len(pairs))  # each kind of warning once per fit, with the pairs it arose in
        self._finish_lookup()
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
                gone = [plain(c) for c in self.classes_ if c not in set(left.tolist())]
                raise ValueError(f"sample_weight (times class_weight) is 0 for every point of class(es) {gone!r}: "
                                 "CVMClassifier needs points of positive weight in every class")
        return w, kept

    def _settle(self, problem):
        """The settle rule for this pair's problem: ``settle``, and for 'auto' whether stop='hybrid' samples
        a pair of more than SETTLE_MIN_ROWS points."""
        if self.settle == "auto":
            return self.stop == "hybrid" and self.sample_size is not None and problem.m > self.SETTLE_MIN_ROWS
        return bool(self.settle)

    def _pair_name(self, a, b):
        """'0 vs 1': the pair's classes as the user gave them (plain numbers and strings, no NumPy reprs)."""
        return f"{plain(self.classes_[a])!r} vs {plain(self.classes_[b])!r}"

    def _pair_data(self, X, y, w, members, a, b):
        """(members, X_pair, y_pm, w_pair) of the pair a (positive, as in LIBSVM) against b; y: the labels
        (two classes) or their codes, positions in ``classes_`` (more), whose rows ``members`` lists
        (:func:`_class_members`)."""
        if len(self.classes_) == 2:  # no subset copy of X and 1 byte a point: a fit's extra memory stays small
            return None, X, _signs_of(y, self.classes_[a]), w
        idx = np.concatenate((members[a], members[b]))
        idx.sort(kind="stable")  # (two sorted runs: a merge)
        return idx, X[idx], _signs(y[idx] == a), None if w is None else w[idx]

    def _fit_pair(self, X, y, w, members, a, b, seed):
        """The binary CVM of classes a (positive, as in LIBSVM) against b: (pair, members, result, model)."""
        idx, Xp, y_pm, wp = self._pair_data(X, y, w, members, a, b)
        label = f"CVMClassifier ({self.impl}) {self._pair_name(a, b)}"
        return ((a, b), idx) + self._solve_binary(Xp, y_pm, wp, seed, label)

    def _solve_binary(self, X, y_pm, w, seed, label):
        """(result, model) of the two-class CVM on (X, y_pm) with weights w (None: all 1)."""
        problem = cvm.two_class_problem(X, y_pm, self.kernel_spec_, float(self.C), w)
        result = self._run(problem, seed, label=label)
        return result, cvm.recover(problem, result, float(self.C), "two_class")

    def _platt_pair(self, X, y, w, members, a, b, seed):
        """(A, B) of the pair's sigmoid P(a | f) = 1 / (1 + exp(A f + B)), fitted to the decision values of a
        cross-validation of the pair's CVM (:func:`corevector.probability.cross_validated_sigmoid`)."""
        _, Xp, y_pm, wp = self._pair_data(X, y, w, members, a, b)

        def fold_decisions(train, test, fold_seed, k):
            label = f"CVMClassifier ({self.impl}) {self._pair_name(a, b)} CV {k + 1}"
            _, model = self._solve_binary(Xp[train], y_pm[train], None if wp is None else wp[train], fold_seed,
                                          label)
            return self._expansion(Xp[test], Xp[train[model.support]], model.coef) + model.intercept

        return cross_validated_sigmoid(fold_decisions, y_pm, seed, self.PROBABILITY_FOLDS)

    def _set_fitted(self, X, fits, kept=None):
        pairs, members, results, models = (list(t) for t in zip(*fits))
        support = np.unique(np.concatenate([_take(m, mod.support) for m, mod in zip(members, models)]))
        dual = np.zeros((len(pairs), len(support)))
        for p, (m, mod) in enumerate(zip(members, models)):
            dual[p, np.searchsorted(support, _take(m, mod.support))] = mod.coef
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
            return vals[0] if binary else (vals if key in ("history", "settle_checks") else np.array(vals))

        for key in ("n_iter", "radius", "certified_ratio", "history", "converged", "settled", "settle_checks",
                    "kernel_evaluations", "kkt_gap"):
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
        """Evaluate the decision function on X.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Points to evaluate.

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_classes)
            Two classes: ``f(x) = sum_i alpha_i y_i k(x_i, x) + b``, positive for ``classes_[1]``
            (scikit-learn's convention).  More classes: one-vs-one votes plus normalised confidences
            per class, as scikit-learn's SVC with ``decision_function_shape='ovr'``.
        """
        check_is_fitted(self)
        self._check_predict_kernel(X)
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
        """Predict the class of each point.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Points to classify.

        Returns
        -------
        ndarray of shape (n_samples,)
            The predicted labels (from ``classes_``): the sign of the decision function for two
            classes, the one-vs-one vote otherwise.
        """
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
        """Estimate the class probabilities (``probability=True`` only).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Points to evaluate.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Probabilities of the classes in the order of ``classes_``: Platt's sigmoid of the decision
            value (two classes), else the pairwise probabilities coupled as LIBSVM does (see Notes of
            the class).
        """
        check_is_fitted(self)
        self._check_predict_kernel(X)
        X = validate_data(self, X, dtype=np.float64, order="C", accept_sparse="csr", reset=False)
        return class_probabilities(self._pair_decisions(X), self.probA_, self.probB_, self.pairs_,
                                   len(self.classes_), self.MIN_PROB)

    @available_if(_check_proba)
    def predict_log_proba(self, X):
        """Estimate the logarithm of the class probabilities (``probability=True`` only).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Points to evaluate.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            ``log(predict_proba(X))``, columns in the order of ``classes_``.
        """
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))


def _class_members(codes, n_classes):
    """[rows of class c (ascending) for c in range(n_classes)], from the class codes (positions in
    ``classes_``): one stable sort of the m codes instead of two comparisons of them per pair (letter's
    325 pairs: 4% of the fit)."""
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(n_classes + 1))
    return [order[bounds[c]:bounds[c + 1]] for c in range(n_classes)]
