"""Parameter validation shared by every estimator of corevector: one set of constraints, one error type.

Each estimator declares scikit-learn ``_parameter_constraints`` and decorates ``fit`` with
``@_fit_context(prefer_skip_nested_validation=True)``, so any bad parameter (a wrong type or a value
out of range) raises scikit-learn's ``InvalidParameterError`` (a ``ValueError`` and a ``TypeError``)
with a message that names the parameter.  The constraints of the options the estimators have in
common (kernel, core-set loop, implementation) are :data:`CORE_CONSTRAINTS`, built from the lists of
kernels, stop rules, solvers and implementations where those are defined; :func:`shared_constraints`
hands them out, and :func:`invalid_parameter` words the checks that need
the data or another parameter (e.g. ``n_components <= n_samples``, :func:`check_eps`) the way
scikit-learn words its own.  The kernel of a fit is resolved, and data whose kernel values float64 cannot
hold refused, by :func:`refimpl.kernels.checked_kernel_spec` (next to the kernels it checks).  :func:`store_params` is every estimator's ``__init__``.

This module imports no estimator (the estimators import it).
"""
from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, InvalidParameterError, StrOptions

from refimpl.driver import STOPS
from refimpl.kernels import KERNELS, NOT_PSD, checked_kernel_spec  # noqa: F401  (re-exported: every estimator uses it)
from .engine_policy import SOLVERS

from .numerics import IMPLS

__all__ = ["POSITIVE", "EPS", "EPS_MAX", "CORE_CONSTRAINTS", "KERNEL", "is_lookup_kernel", "check_psd_kernel", "refuse_lookup_kernel", "plain", "shared_constraints", "invalid_parameter", "check_eps",
           "checked_kernel_spec"]

#: a real number in (0, inf): NaN and inf are rejected
POSITIVE = Interval(Real, 0, None, closed="neither")

#: The largest meaningful eps of each stop rule (refimpl.driver.STOPS), exclusive:
#:
#: * 'radius', 'hybrid': eps is the (1+eps) of the ball test (001 Sec. 4): the fit's radius is within
#:   (1+eps) of the minimum enclosing ball's.  At eps >= 1 the guarantee is "at most twice the radius",
#:   which says nothing about the model (measured when the default rule was 'margin':
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

class KernelOptions(StrOptions):
    """The kernels' names (:data:`refimpl.kernels.KERNELS` and 'precomputed'), as scikit-learn lists them in its
    message.  A name scikit-learn's SVC has but no enclosing ball can use (:data:`refimpl.kernels.NOT_PSD`:
    'sigmoid') passes, so that the fit refuses it with the reason (``make_kernel_spec``)."""

    def is_satisfied_by(self, val):
        return super().is_satisfied_by(val) or (isinstance(val, str) and val in NOT_PSD)


#: the ``kernel`` constraint: a built-in kernel, 'precomputed' (X is the Gram matrix) or a callable kernel(A, B)
KERNEL = [KernelOptions(set(KERNELS) | {"precomputed"}), callable]


def is_lookup_kernel(kernel) -> bool:
    """True for ``kernel='precomputed'`` and a callable kernel (refimpl.kernels.LOOKUP_KERNELS)."""
    return callable(kernel) or (isinstance(kernel, str) and kernel == "precomputed")


def check_psd_kernel(estimator):
    """scikit-learn's InvalidParameterError naming ``kernel`` for a kernel SVC has that is not positive semi-definite
    (refimpl.kernels.NOT_PSD: 'sigmoid'), with the reason."""
    kernel = estimator.kernel
    if isinstance(kernel, str) and kernel in NOT_PSD:
        raise invalid_parameter(estimator, "kernel", "positive semi-definite (one of " + ", ".join(
            repr(k) for k in KERNELS + ("precomputed",)) + " or a callable): " + NOT_PSD[kernel], kernel)


def refuse_lookup_kernel(estimator, why):
    """A ValueError naming ``kernel`` when the estimator cannot take a precomputed or callable kernel (``why``); the
    refusal of a kernel that is not PSD (:func:`check_psd_kernel`) first."""
    check_psd_kernel(estimator)
    kernel = estimator.kernel
    if is_lookup_kernel(kernel):
        shown = "'precomputed'" if isinstance(kernel, str) else "a callable"
        raise ValueError(f"{type(estimator).__name__} does not take kernel={shown}: {why}")


#: The constraints of the options every core-set estimator has (kernel, core-set loop, implementation):
#: the lists of kernels (refimpl.kernels.KERNELS), stop rules (refimpl.driver.STOPS), solvers
#: (corevector.engine_policy.SOLVERS) and implementations (corevector.numerics.IMPLS) are read, never repeated.
CORE_CONSTRAINTS = {
    "eps": [EPS],
    "kernel": KERNEL,
    "gamma": [StrOptions({"scale", "beta", "auto"}), POSITIVE],
    "degree": [Interval(Integral, 1, None, closed="left")],
    "coef0": [Interval(Real, None, None, closed="neither")],
    "normalize": ["boolean"],
    "sample_size": [Interval(Integral, 1, None, closed="left"), None],
    "n_confirm": [Interval(Integral, 0, None, closed="left")],
    "max_iter": [Interval(Integral, 1, None, closed="left")],
    "tol": [POSITIVE, None],
    "solver": [StrOptions(set(SOLVERS))],
    "stop": [StrOptions(set(STOPS))],
    "cache_size": [POSITIVE],
    "certify": ["boolean"],
    "random_state": ["random_state", np.random.Generator],
    "impl": [StrOptions(set(IMPLS))],
    "verbose": ["verbose"],
}



def store_params(estimator, params):
    """The body of every estimator's ``__init__`` (scikit-learn's convention: store each constructor
    argument under its own name, nothing else): ``params`` is that ``__init__``'s ``locals()``."""
    for name in estimator._get_param_names():
        setattr(estimator, name, params[name])

def shared_constraints(*names):
    """The constraints of the named options, as every core-set estimator declares them."""
    return {name: CORE_CONSTRAINTS[name] for name in names}


def plain(value):
    """``value`` for a message: NumPy scalars (and lists/tuples of them) as the Python numbers and strings they
    hold, so a message reads 1.0 and -1 rather than np.float64(1.0) and np.int64(-1) (NumPy >= 2 reprs)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return type(value)(plain(v) for v in value)
    return value


def invalid_parameter(estimator, name, must, value):
    """The InvalidParameterError of a check scikit-learn's constraints cannot express (it depends on the
    data or on another parameter), in scikit-learn's wording: "The 'name' parameter of Est must be ..."."""
    caller = estimator if isinstance(estimator, str) else type(estimator).__name__
    return InvalidParameterError(f"The {name!r} parameter of {caller} must be {must}. Got {plain(value)!r} instead.")


def check_eps(estimator, eps, stop):
    """eps within the range that makes sense for ``stop`` (:data:`EPS_MAX`); the constraint EPS has
    already checked 0 < eps < 1."""
    bound = EPS_MAX[stop]
    if not eps < bound:
        raise invalid_parameter(estimator, "eps", f"in the range (0, {bound:.6g}) with stop={stop!r}", eps)
