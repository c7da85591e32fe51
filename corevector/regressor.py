"""CVR: the L2-SVR as a center-constrained minimum enclosing ball (000)."""
from __future__ import annotations

import numpy as np
from sklearn.base import RegressorMixin, _fit_context
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from refimpl import cvr

from ._base import CoreVectorBase, _doc, _drop_zero_weights, _point_weights
from ._validation import POSITIVE, invalid_parameter, store_params

__all__ = ["CVR"]


class CVR(RegressorMixin, CoreVectorBase):
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

    _parameter_constraints: dict = {**CoreVectorBase._parameter_constraints,
                                    "C": [POSITIVE, StrOptions({"auto"})], "mu": [POSITIVE, StrOptions({"auto"})],
                                    "hybrid_cap": [POSITIVE]}
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
        X, y = self._validated(X, y, dtype=np.float64, order="C", accept_sparse="csr", ensure_min_samples=2,
                             y_numeric=True)
        w = _point_weights(X, sample_weight)
        kept = _drop_zero_weights(w)
        Xk, yk, wk = (X, y, w) if kept is None else (X[kept], y[kept], w[kept])
        if len(yk) < 2:
            raise ValueError(f"sample_weight is positive for {len(yk)} sample; CVR needs 2")
        if np.ptp(yk) == 0:
            where = "" if kept is None else " where sample_weight > 0"
            raise ValueError(f"y is constant ({yk[0]!r}){where}: nothing to regress (an implicit surface's one-set "
                             "targets are fitted by refimpl/corevector.surface, which expects them)")
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

