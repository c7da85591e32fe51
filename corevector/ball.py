"""Balls: MEB (the minimum enclosing ball, hard-margin SVDD) and CVDD (the one-class L2-SVM), 001 Sec. 3."""
from __future__ import annotations

import numpy as np
from sklearn.base import OutlierMixin, _fit_context
from sklearn.utils.validation import check_is_fitted, validate_data

from refimpl import cvm
from refimpl.kernels import kernel_diag, lookup_test_diag

from ._base import CoreVectorBase, shared_doc, _drop_zero_weights, _point_weights
from ._validation import POSITIVE, store_params
from .chunked.methods import accepts_chunked

__all__ = ["MEB", "CVDD"]


@accepts_chunked
@shared_doc(eps="1e-6", gamma="scale", stop="radius", fit_diagnostics=True)
class MEB(OutlierMixin, CoreVectorBase):
    """Minimum enclosing ball in feature space, the hard-margin SVDD ([001] eqs. (1)-(3)).

    Finds the ball of smallest radius that encloses every training point after the kernel's feature
    map, by the core-set algorithm of [001]: the ball of a small core set is grown until every point
    lies within ``(1 + eps)`` of its radius.  ``predict`` returns +1 for points inside the fitted ball
    and -1 outside.  The ball used is the certified one: its radius ``certified_radius_`` (r_cert)
    comes from a full scan after the fit and encloses every training point.

    Parameters
    ----------
    %SHARED_PARAMETERS%

    Attributes
    ----------
    center_coef_ : ndarray of shape (n_SV,)
        Weights alpha of the support vectors, non-negative and summing to 1: the center is
        ``c = sum_i alpha_i phi(support_vectors_[i])``.
    support_ : ndarray of shape (n_SV,)
        Training indices of the core vectors with ``alpha > 0``, in training order.
    support_vectors_ : ndarray or CSR matrix of shape (n_SV, n_features)
        The support vectors' inputs.
    dual_coef_ : ndarray of shape (1, n_SV)
        ``center_coef_`` as a row (scikit-learn's layout).
    intercept_ : ndarray of shape (1,)
        0 (the ball has no bias term).
    rho_ : float
        ``||c||^2 = alpha' K alpha``, the squared norm of the center.
    dual_objective_ : float
        The optimal value of the dual (2) of [001] reached: ``R^2`` of the core-set ball.
    offset_ : float
        0; ``score_samples`` equals ``decision_function`` (scikit-learn's outlier-detector convention
        ``decision_function = score_samples - offset_``).
    radius_ : float
        R, the radius of the core-set ball, in feature space (under the linear kernel ``gamma x'y``,
        whose feature map is ``sqrt(gamma) x``, ``sqrt(kernel_spec_.gamma)`` times the radius in X's
        units; ``gamma=1.0`` gives the Euclidean ball of X).
    certified_radius_ : float
        r_cert, the largest distance of a training point to the center, from the final full scan
        (``radius_`` when ``certify=False``): the radius of the ball ``predict`` uses.
    certified_ratio_ : float
        ``(r_cert / R)^2``; at most ``(1 + eps)^2`` with ``sample_size=None`` ([001] Sec. 4); nan when
        ``certify=False``.
    kkt_gap_ : float
        The certified maximal-violation gap from the final scan, in the units of LIBSVM's tolerance.
    core_set_ : ndarray of shape (n_core,)
        Training indices of every core vector added during the fit (a superset of ``support_``).
    %FIT_DIAGNOSTICS%

    See Also
    --------
    CVDD : The one-class L2-SVM, the soft-margin ball that may leave outliers out.
    sklearn.svm.OneClassSVM : LIBSVM's one-class SVM.

    Notes
    -----
    ``decision_function(x) = r_cert^2 - ||c - phi(x)||^2``: positive inside the ball.  With the
    default ``stop='radius'`` and ``eps=1e-6`` the fit is the paper's algorithm; with
    ``sample_size=None`` the core-set radius R is within ``(1 + eps)`` of the minimum enclosing
    ball's ([001] Sec. 4).

    References
    ----------
    .. [001] I. W. Tsang, J. T. Kwok and P.-M. Cheung. Very Large SVM Training using Core Vector Machines.
       Proceedings of the 10th International Workshop on Artificial Intelligence and Statistics (AISTATS), 2005.

    Examples
    --------
    >>> import numpy as np
    >>> from corevector import MEB
    >>> X = np.random.default_rng(0).normal(size=(300, 2))
    >>> ball = MEB(kernel="linear", random_state=0).fit(X)
    >>> bool(np.all(ball.predict(X) == 1))  # the certified ball holds every training point
    True
    >>> ball.predict([[0.0, 0.0], [10.0, 10.0]])
    array([ 1, -1])
    >>> bool(ball.certified_ratio_ <= (1 + ball.eps) ** 2)
    True
    """

    #: the model in LIBSVM's terms (corevector._libsvm_layout)
    _libsvm_layout = "meb"

    def __init__(self, *, eps=1e-6, kernel="rbf", gamma="scale", degree=3, coef0=0.0, normalize=False,
                 sample_size=59, n_confirm=100, max_iter=100_000, tol=None, solver="auto", stop="radius",
                 cache_size=1000, certify=True, random_state=None, impl="fast", verbose=False):
        store_params(self, locals())

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Fit the minimum enclosing ball of X.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training points (at least 2); sparse input is used as CSR.
        y : None
            Ignored; present for scikit-learn's API.

        Returns
        -------
        MEB
            The fitted estimator (``self``).
        """
        return self._fit_ball(X)

    def _fit_ball(self, X, sample_weight=None):
        X = self._validated(X, dtype=np.float64, order="C", accept_sparse="csr", ensure_min_samples=2)
        self._check_fit_params(X.shape[0])
        w = _point_weights(X, sample_weight)
        kept = _drop_zero_weights(w)
        Xk, wk = (X, w) if kept is None else (X[kept], w[kept])
        if Xk.shape[0] < 2:
            raise ValueError(f"sample_weight is positive for {Xk.shape[0]} sample; {type(self).__name__} needs 2")
        self.kernel_spec_ = self._kernel_spec(Xk)
        if self.kernel_spec_.name == "precomputed" and not self.kernel_spec_.constant_diagonal:
            raise ValueError(f"{type(self).__name__} with kernel='precomputed' needs a Gram matrix of constant "
                             "diagonal k(x, x) (e.g. a Gaussian kernel's): its decision function holds k(x, x) of the "
                             "test points, which K(X_test, X_train) does not give.  Normalise the kernel, or pass it "
                             "as a callable")
        problem = self._problem(Xk, wk)
        result = self._run(problem)
        self._set_fitted(Xk, result, self._recover(problem, result))
        if kept is not None:  # indices into the training set as given
            self.support_, self.core_set_ = kept[self.support_], kept[self.core_set_]
        self._finish_lookup()
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
            + (lookup_test_diag(self.kernel_spec_, X) if self.kernel_spec_.lookup else kernel_diag(self.kernel_spec_, X))

    def decision_function(self, X):
        """Compute the signed squared distance to the ball's surface.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Points to evaluate.

        Returns
        -------
        ndarray of shape (n_samples,)
            ``r_cert^2 - ||c - phi(x)||^2``: positive inside the certified ball, negative outside.
        """
        check_is_fitted(self)
        self._check_predict_kernel(X)
        X = validate_data(self, X, dtype=np.float64, order="C", accept_sparse="csr", reset=False)
        return self.certified_radius_ ** 2 - self._dist2(X)

    def score_samples(self, X):
        """Compute the score of each point (here equal to :meth:`decision_function`).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Points to evaluate.

        Returns
        -------
        ndarray of shape (n_samples,)
            ``r_cert^2 - ||c - phi(x)||^2``; the larger, the deeper inside the ball.
        """
        return self.decision_function(X)

    #: relative slack on the squared radius when testing membership: prediction recomputes
    #: ||c - phi(x)||^2 with other arithmetic than the engine's certificate scan, so the furthest
    #: training point may land a few ulps outside the ball it defines
    MEMBERSHIP_RTOL = 1e-10

    def predict(self, X):
        """Tell whether each point lies inside the certified ball.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Points to classify.

        Returns
        -------
        ndarray of shape (n_samples,)
            +1 inside the ball (up to a relative ``MEMBERSHIP_RTOL`` of ``r_cert^2``, so every
            training point is inside), -1 outside: +1 where ``decision_function(x) + MEMBERSHIP_RTOL
            r_cert^2 > 0``, the rule of LIBSVM's one-class models (+1 where the decision value is
            positive) on the exported model, whose rho carries the same slack (``to_sklearn``).
        """
        dec = self.decision_function(X)
        return np.where(dec + self.MEMBERSHIP_RTOL * self.certified_radius_ ** 2 > 0, 1, -1)


@accepts_chunked
@shared_doc(eps="1e-4", gamma="scale", stop="margin", fit_diagnostics=True)
class CVDD(MEB):
    """Core Vector Data Description: one-class L2-SVM novelty detection ([001] Sec. 3.2.1, eq. (7)).

    Solves ``min ||w||^2 - 2 rho + C sum_i xi_i^2`` subject to ``w'phi(x_i) >= rho - xi_i`` as a
    minimum enclosing ball of the kernel ``k + delta_ij / C`` by core vectors.  ``predict`` returns +1
    for inliers (``w'phi(x) >= rho``) and -1 for outliers, as scikit-learn's ``OneClassSVM``.

    Parameters
    ----------
    C : float, default=1.0
        Penalty of the squared slacks; larger C leaves fewer training points outside.  With
        ``sample_weight`` point i gets ``C_i = C w_i``.
    %SHARED_PARAMETERS%

    Attributes
    ----------
    center_coef_ : ndarray of shape (n_SV,)
        Weights alpha of the support vectors (non-negative, summing to 1):
        ``w = sum_i alpha_i phi(support_vectors_[i])``.
    support_ : ndarray of shape (n_SV,)
        Training indices of the core vectors with ``alpha > 0``, in training order.
    support_vectors_ : ndarray or CSR matrix of shape (n_SV, n_features)
        The support vectors' inputs.
    dual_coef_ : ndarray of shape (1, n_SV)
        ``center_coef_`` as a row (scikit-learn's layout).
    intercept_ : ndarray of shape (1,)
        ``-rho``: ``decision_function(x) = sum_i alpha_i k(sv_i, x) + intercept_[0]``.
    rho_ : float
        The margin rho of eq. (7).
    offset_ : float
        ``rho``, as ``OneClassSVM.offset_``: ``decision_function = score_samples - offset_``.
    xi_ : ndarray of shape (n_SV,)
        Slacks ``xi_i = alpha_i / C_i`` of the support vectors.
    dual_objective_ : float
        ``-rho``, the optimal value of the dual of eq. (7) reached (``max -alpha' K~ alpha``).
    radius_ : float
        R, the radius of the core-set ball.
    certified_radius_ : float
        r_cert, the largest distance of a training point to the ball's center, from the final full
        scan (``radius_`` when ``certify=False``).
    certified_ratio_ : float
        ``(r_cert / R)^2``; at most ``(1 + eps)^2`` with ``sample_size=None``; nan when
        ``certify=False``.
    kkt_gap_ : float
        The certified maximal-violation gap from the final scan, relative to the margin (the units of
        LIBSVM's tolerance).
    core_set_ : ndarray of shape (n_core,)
        Training indices of every core vector added during the fit (a superset of ``support_``).
    %FIT_DIAGNOSTICS%

    See Also
    --------
    MEB : The hard minimum enclosing ball, which holds every training point.
    sklearn.svm.OneClassSVM : LIBSVM's one-class SVM (hinge loss).

    Notes
    -----
    Whether a point lies above rho is decided by rho itself, so the default solves to ``eps = 1e-4``
    of the margin (``stop='margin'``): looser fits move rho and with it the inlier rate (see the
    defaults page of the documentation).

    ``fit(X, sample_weight=w)`` gives point i the penalty ``C_i = C w_i`` (the ridge ``1 / C_i`` of the
    transformed kernel); points of weight 0 are left out, and an integer weight k is the point repeated
    k times (in the primal).

    References
    ----------
    .. [001] I. W. Tsang, J. T. Kwok and P.-M. Cheung. Very Large SVM Training using Core Vector Machines.
       Proceedings of the 10th International Workshop on Artificial Intelligence and Statistics (AISTATS), 2005.

    Examples
    --------
    >>> import numpy as np
    >>> from corevector import CVDD
    >>> X = np.random.default_rng(0).normal(size=(500, 2))
    >>> det = CVDD(C=10, random_state=0).fit(X)
    >>> det.predict([[0.0, 0.0], [6.0, 6.0]])  # the center is an inlier, a far point an outlier
    array([ 1, -1])
    >>> bool(0.5 < np.mean(det.predict(X) == 1) < 1.0)  # most training points are inliers
    True
    """

    #: the model in LIBSVM's terms (corevector._libsvm_layout)
    _libsvm_layout = "one_class"

    _parameter_constraints: dict = {**CoreVectorBase._parameter_constraints, "C": [POSITIVE]}

    def __init__(self, *, C=1.0, eps=1e-4, kernel="rbf", gamma="scale", degree=3, coef0=0.0, normalize=False,
                 sample_size=59, n_confirm=100, max_iter=100_000, tol=None, solver="auto", stop="margin",
                 cache_size=1000, certify=True, random_state=None, impl="fast", verbose=False):
        store_params(self, locals())

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, sample_weight=None):
        """Fit the one-class L2-SVM on X.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training points (at least 2); sparse input is used as CSR.
        y : None
            Ignored; present for scikit-learn's API.
        sample_weight : array-like of shape (n_samples,), default=None
            Per-point weights w_i: point i gets the slack penalty ``C_i = C w_i``.  Points of weight 0
            are left out of the fit.

        Returns
        -------
        CVDD
            The fitted estimator (``self``).
        """
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
        """Compute the signed distance to the separating hyperplane, ``w'phi(x) - rho``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Points to evaluate.

        Returns
        -------
        ndarray of shape (n_samples,)
            ``w'phi(x) - rho``: non-negative for inliers, negative for outliers.
        """
        check_is_fitted(self)
        self._check_predict_kernel(X)
        X = validate_data(self, X, dtype=np.float64, order="C", accept_sparse="csr", reset=False)
        return self._expansion(X, self.support_vectors_, self.center_coef_) + self.intercept_[0]

    def score_samples(self, X):
        """Compute the raw score ``w'phi(x)`` of each point.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Points to evaluate.

        Returns
        -------
        ndarray of shape (n_samples,)
            ``decision_function(X) + offset_``; the larger, the more typical the point.
        """
        return self.decision_function(X) + self.offset_

    def predict(self, X):
        """Tell inliers from outliers.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Points to classify.

        Returns
        -------
        ndarray of shape (n_samples,)
            +1 for inliers (``decision_function(x) > 0``, as LIBSVM's and OneClassSVM's one-class
            models), -1 for outliers.
        """
        return np.where(self.decision_function(X) > 0, 1, -1)

