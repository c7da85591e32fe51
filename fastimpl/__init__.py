"""corevector: core-set kernel machines, optimized (Cython) behind scikit-learn estimators.

Every estimator takes ``impl='fast'`` (default, the compiled engine) or ``impl='ref'``
(the readable NumPy reference in :mod:`refimpl`), with the same results.
"""
from . import _openmp  # noqa: F401  (first: bounds OpenMP spin-waiting before libgomp loads)
from .estimators import CVDD, CVR, MEB, CVMClassifier
from .mmda import MMDA  # 004: maximum margin discriminant features
from .sparse_svr import SparseSVR  # 002: SSVR-SRS sparse SVR in the primal
from .surface import ImplicitSurface  # 000 Sec. 4.2 (scikit-image/matplotlib imported only by mesh/render)

__all__ = ["CVDD", "CVR", "MEB", "CVMClassifier", "ImplicitSurface", "MMDA", "SparseSVR"]
__version__ = "0.1.0"
