"""corevector: core-set kernel machines, optimized (Cython) behind scikit-learn estimators.

Every estimator takes ``impl='fast'`` (default, the compiled engine) or ``impl='ref'``
(the readable NumPy reference in :mod:`refimpl`), with the same results.
"""
from .estimators import CVDD, CVR, MEB, CVMClassifier
from .sparse_svr import SparseSVR  # noqa: F401  (002: SSVR-SRS sparse SVR in the primal)
from .mmda import MMDA  # noqa: F401  (004: maximum margin discriminant features)

__all__ = ["CVDD", "CVR", "MEB", "CVMClassifier"]
__version__ = "0.1.0"
