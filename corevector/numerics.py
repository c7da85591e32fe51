"""The one place where ``impl`` ('fast' | 'ref') chooses the numerics of every algorithm.

The estimators never import an implementation module themselves: they ask :func:`numerics` for the
functions of the chosen implementation, all with the reference's signatures (refimpl never imports
fastimpl; the compiled modules are imported only when 'fast' is asked for).

* ``fit_meb(problem, eps, **options)`` -- the core-set loop of ``refimpl.driver`` on the MEB numerics
  (``refimpl.meb.MEBOps`` or ``fastimpl._engine.FastMEBOps``);
* ``kernel_expansion(spec, SV, coef, X)`` -- f(x) = sum_t coef_t k(sv_t, x) (prediction);
* ``constrained_ops`` -- the numerics class of MMDA's constrained MEB, and ``kernel_matrix(spec, A, B)``;
* ``ssvr_srs(X, y, spec, ...)`` -- SSVR-SRS (002 Table 1).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

IMPLS = ("fast", "ref")


@dataclass(frozen=True)
class Numerics:
    impl: str
    fit_meb: Callable
    kernel_expansion: Callable
    constrained_ops: type
    kernel_matrix: Callable
    ssvr_srs: Callable


@lru_cache(maxsize=None)
def numerics(impl: str) -> Numerics:
    """The functions of implementation ``impl``; a clear ValueError for anything else."""
    if impl == "fast":
        from fastimpl import _engine, _mmda, _ssvr
        return Numerics("fast", _engine.fit_meb, _engine.kernel_expansion, _mmda.FastConstrainedOps,
                        _mmda.kernel_matrix, _ssvr.ssvr_srs)
    if impl == "ref":
        from refimpl.constrained_meb import ConstrainedOps
        from refimpl.kernels import kernel_block, kernel_expansion
        from refimpl.meb import fit_meb
        from refimpl.ssvr import ssvr_srs
        return Numerics("ref", fit_meb, kernel_expansion, ConstrainedOps, kernel_block, ssvr_srs)
    raise ValueError(f"impl must be one of {IMPLS}, got {impl!r}")
