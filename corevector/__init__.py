"""corevector: core-set kernel machines with certified approximation ratios.

The Core Vector Machine family of Tsang, Kwok et al. as scikit-learn estimators:

* :class:`CVMClassifier` -- the two-class L2-SVM as a minimum enclosing ball ([001]); multi-class one-vs-one;
* :class:`CVDD` -- the one-class L2-SVM ([001]); :class:`MEB` -- the minimum enclosing ball (hard-margin SVDD);
* :class:`CVR` -- the L2-SVR as a center-constrained MEB ([000]); :class:`ImplicitSurface` ([000] Sec. 4.2);
* :class:`MMDA` -- maximum margin discriminant features ([004]);
* :class:`SparseSVR` -- SSVR-SRS, sparse SVR in the primal ([002]).

Every estimator takes ``impl='fast'`` (default: the compiled engine, :mod:`fastimpl`) or ``impl='ref'`` (the
readable NumPy reference, :mod:`refimpl`), with the same results.  The papers are :data:`REFERENCES`.

The package's rooms, top to bottom (a module imports only from its own room or the ones below):
:mod:`corevector.cli` (the command), :mod:`corevector.io` (model files, LIBSVM files, data files),
:mod:`corevector.registry` (the estimators, listed once), the estimator modules (``classifier``, ``ball``,
``regressor``, ``mmda``, ``sparse_svr``, ``surface`` over ``_base``), then :mod:`corevector.chunked` (data
that stay where they are) and :mod:`corevector.parallel` (independent fits side by side), and
:mod:`corevector.numerics`, the one switch to :mod:`fastimpl` or :mod:`refimpl`.
"""
import fastimpl as _fastimpl  # noqa: F401  (first: OpenMP settings and the fork handler, before libgomp loads)

from refimpl.references import REFERENCES

from ._version import __version__
from .ball import CVDD, MEB
from .classifier import CVMClassifier
from .io import load_libsvm_model, load_model, save_libsvm_model, save_model
from .mmda import MMDA
from .regressor import CVR
from .sparse_svr import SparseSVR
from .surface import ImplicitSurface

__all__ = ["CVDD", "CVR", "MEB", "CVMClassifier", "ImplicitSurface", "MMDA", "SparseSVR", "REFERENCES",
           "__version__", "save_model", "load_model", "save_libsvm_model", "load_libsvm_model"]
