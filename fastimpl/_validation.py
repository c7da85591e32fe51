"""Parameter validation shared by every estimator of fastimpl: one set of constraints, one error type.

Each estimator declares scikit-learn ``_parameter_constraints`` and decorates ``fit`` with
``@_fit_context(prefer_skip_nested_validation=True)``, so any bad parameter (a wrong type or a value
out of range) raises scikit-learn's ``InvalidParameterError`` (a ``ValueError`` and a ``TypeError``)
with a message that names the parameter.  The constraints of the options the estimators have in
common (kernel, core-set loop, implementation) are those of :class:`fastimpl.estimators._CoreVectorBase`;
:func:`shared_constraints` hands them out, and :func:`invalid_parameter` words the checks that need
the data or another parameter (e.g. ``n_components <= n_samples``) the way scikit-learn words its own.
"""
from __future__ import annotations

from sklearn.utils._param_validation import InvalidParameterError

from .estimators import _POSITIVE, _CoreVectorBase

__all__ = ["POSITIVE", "shared_constraints", "invalid_parameter"]

#: a real number in (0, inf): NaN and inf are rejected
POSITIVE = _POSITIVE


def shared_constraints(*names):
    """The constraints of the named options, as every core-set estimator declares them."""
    return {name: _CoreVectorBase._parameter_constraints[name] for name in names}


def invalid_parameter(estimator, name, must, value):
    """The InvalidParameterError of a check scikit-learn's constraints cannot express (it depends on the
    data or on another parameter), in scikit-learn's wording: "The 'name' parameter of Est must be ..."."""
    caller = estimator if isinstance(estimator, str) else type(estimator).__name__
    return InvalidParameterError(f"The {name!r} parameter of {caller} must be {must}. Got {value!r} instead.")
