"""Balls: MEB (the minimum enclosing ball, hard-margin SVDD) and CVDD (the one-class L2-SVM), 001 Sec. 3."""
from __future__ import annotations

import numpy as np
from sklearn.base import OutlierMixin, _fit_context
from sklearn.utils.validation import check_is_fitted, validate_data

from refimpl import cvm
from refimpl.kernels import kernel_diag

from ._base import CoreVectorBase, shared_doc, _drop_zero_weights, _point_weights
from ._validation import POSITIVE, store_params

__all__ = ["MEB", "CVDD"]


@shared_doc(eps="1e-6", gamma="scale", stop="radius")
class MEB(OutlierMixin, CoreVectorBase):
    """Minimum enclosing ball in feature space = hard-margin SVDD ([001], eqs. (1)-(3)).

    ``predict`` returns +1 for points inside the fitted ball and -1 outside; the ball used is the
    certified one (radius ``certified_radius_`` = r_cert, which encloses every training point), and
    ``decision_function`` is r_cert^2 - ||c - phi(x)||^2.

    Parameters
    ----------
    %SHARED_PARAMETERS%
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
        X = self._validated(X, dtype=np.float64, order="C", accept_sparse="csr", ensure_min_samples=2)
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


@shared_doc(eps="1e-4", gamma="scale", stop="margin")
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
    C : float, default=1.0
    %SHARED_PARAMETERS%
    """

    _parameter_constraints: dict = {**CoreVectorBase._parameter_constraints, "C": [POSITIVE]}

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

