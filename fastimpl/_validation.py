"""Parameter validation shared by every estimator of fastimpl: one set of constraints, one error type.

Each estimator declares scikit-learn ``_parameter_constraints`` and decorates ``fit`` with
``@_fit_context(prefer_skip_nested_validation=True)``, so any bad parameter (a wrong type or a value
out of range) raises scikit-learn's ``InvalidParameterError`` (a ``ValueError`` and a ``TypeError``)
with a message that names the parameter.  The constraints of the options the estimators have in
common (kernel, core-set loop, implementation) are those of :class:`fastimpl.estimators._CoreVectorBase`;
:func:`shared_constraints` hands them out, and :func:`invalid_parameter` words the checks that need
the data or another parameter (e.g. ``n_components <= n_samples``, :func:`check_eps`) the way
scikit-learn words its own.  :func:`checked_kernel_spec` resolves the kernel of a fit and refuses data
whose kernel values float64 cannot hold.  :func:`store_params` is every estimator's ``__init__``.

This module imports no estimator at import time (the estimators import it).
"""
from __future__ import annotations

import math
from numbers import Real

import numpy as np
import scipy.sparse as sp
from sklearn.utils._param_validation import Interval, InvalidParameterError

from refimpl.kernels import make_kernel_spec, max_abs, row_sq_norms

__all__ = ["POSITIVE", "EPS", "EPS_MAX", "shared_constraints", "invalid_parameter", "check_eps",
           "checked_kernel_spec"]

#: a real number in (0, inf): NaN and inf are rejected
POSITIVE = Interval(Real, 0, None, closed="neither")

#: The largest meaningful eps of each stop rule (refimpl.driver.STOPS), exclusive:
#:
#: * 'radius', 'hybrid': eps is the (1+eps) of the ball test (001 Sec. 4): the fit's radius is within
#:   (1+eps) of the minimum enclosing ball's.  At eps >= 1 the guarantee is "at most twice the radius",
#:   which says nothing about the model (issue 15, on ed333d5 whose default rule was 'margin':
#:   CVMClassifier(eps=10) reached 55% accuracy, CVR(eps=10) R^2 = -6e6; the cap of today's 'hybrid' default
#:   hides it, 'radius' does not).
#: * 'gap': LIBSVM's tolerance, relative to the margin rho: a point passes with y f(x) >= (1 - eps) rho,
#:   so eps >= 1 lets misclassified points pass.
#: * 'margin': a point passes when d^2 - R^2 <= ((1+eps)^2 - 1) S; for the L2-SVMs d^2 - R^2 = 2 (rho - y f(x))
#:   and S = rho, i.e. y f(x) >= rho (1 - ((1+eps)^2 - 1) / 2), which is > 0 only for eps < sqrt(3) - 1
#:   (also the bound on the relative dual suboptimality, (1+eps)^2 - 1 < 2).  Measured, CVDD under 'margin'
#:   (2,000 points of make_classification): eps = 0.8 and 1 flag every training point as an outlier, 0.7
#:   97%, 0.5 57%, the default 1e-4 10% -- the bound keeps eps meaningful, a small eps keeps it accurate.
EPS_MAX = {"radius": 1.0, "hybrid": 1.0, "gap": 1.0, "margin": math.sqrt(3.0) - 1.0}
#: the constraint of ``eps`` alone (the largest bound of any rule); :func:`check_eps` adds the rule's own
EPS = Interval(Real, 0, 1, closed="neither")



def store_params(estimator, params):
    """The body of every estimator's ``__init__`` (scikit-learn's convention: store each constructor
    argument under its own name, nothing else): ``params`` is that ``__init__``'s ``locals()``."""
    for name in estimator._get_param_names():
        setattr(estimator, name, params[name])

def shared_constraints(*names):
    """The constraints of the named options, as every core-set estimator declares them."""
    from .estimators import _CoreVectorBase
    return {name: _CoreVectorBase._parameter_constraints[name] for name in names}


def invalid_parameter(estimator, name, must, value):
    """The InvalidParameterError of a check scikit-learn's constraints cannot express (it depends on the
    data or on another parameter), in scikit-learn's wording: "The 'name' parameter of Est must be ..."."""
    caller = estimator if isinstance(estimator, str) else type(estimator).__name__
    return InvalidParameterError(f"The {name!r} parameter of {caller} must be {must}. Got {value!r} instead.")


def check_eps(estimator, eps, stop):
    """eps within the range that makes sense for ``stop`` (:data:`EPS_MAX`); the constraint EPS has
    already checked 0 < eps < 1."""
    bound = EPS_MAX[stop]
    if not eps < bound:
        raise invalid_parameter(estimator, "eps", f"in the range (0, {bound:.6g}) with stop={stop!r}", eps)


def _column_spans(X):
    """max - min of every column of a 2-D float array.  A few columns are reduced one at a time: NumPy's
    axis-0 reduction of a C-ordered (m, 2) array runs an inner loop of length 2 per row and took ~50 ms
    at m = 1e6 (a quarter of a whole 1M-point fit), one strided pass per column ~2 ms."""
    if X.shape[1] <= 16:
        return np.array([np.ptp(X[:, j]) for j in range(X.shape[1])])
    return np.ptp(X, axis=0)


def checked_kernel_spec(X, kernel, gamma, degree, coef0, normalize):
    """:func:`refimpl.kernels.make_kernel_spec` (which refuses a gamma='scale'/'beta' that float64 cannot
    hold), then a ValueError when the kernel values of the training data would overflow (or, for the
    radial kernels, when every squared distance underflows), so a fit never runs on a kernel that is
    all 0, 1, inf or NaN: the largest squared distance (the bounding box's squared diagonal) must be
    finite for 'rbf' and 'laplacian', the largest k(x, x) (|k(x, y)| <= max k(x, x)) at most
    sqrt(largest float) ~ 1.3e154 for 'poly' and 'linear', where the engine multiplies kernel values
    (measured: a linear CVMClassifier on X * 1e100, k ~ 1e200, ran for more than a minute), and neither
    may be a nonzero subnormal number."""
    spec = make_kernel_spec(X, kernel, gamma, degree, coef0, normalize)
    if not sp.issparse(X):
        X = np.asarray(X, dtype=np.float64)
    if X.shape[0] * X.shape[1] == 0:
        return spec
    tiny = np.finfo(np.float64).tiny
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        if spec.name in ("rbf", "laplacian"):
            if sp.issparse(X):  # column ranges with the implicit zeros, in O(nnz + d)
                ptp = (X.max(axis=0) - X.min(axis=0)).toarray().ravel()
            else:
                ptp = _column_spans(X)
            value = float(np.sum(ptp ** 2))
            what = "the largest squared distance between two rows of X"
            bad = not np.isfinite(value) or 0.0 < value < tiny
        else:
            value = float(np.max(row_sq_norms(X) if sp.issparse(X) else np.einsum("ij,ij->i", X, X)))
            if spec.name == "poly":
                value = float(np.power(spec.gamma * value + spec.coef0, float(spec.degree)))
            what = "the largest kernel value k(x, x) of X"
            # the engine multiplies kernel values together (QP steps, squared distances): products of two
            # must stay finite, so k(x, x) <= sqrt(largest float) ~ 1.3e154
            bad = not value <= math.sqrt(np.finfo(np.float64).max) or 0.0 < value < tiny
    if bad:
        raise ValueError(f"X is of a scale float64 cannot hold for kernel={spec.name!r}: {what} is {value:.3g} "
                         f"(max|X| = {max_abs(X):.3g}), so the kernel values would over- or "
                         "underflow.  Rescale X (e.g. sklearn.preprocessing.StandardScaler).")
    return spec
