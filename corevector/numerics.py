"""The one place where ``impl`` ('fast' | 'ref') chooses the numerics of every algorithm.

Nothing in :mod:`corevector` imports an implementation module itself -- not the estimators, not the chunked
fits (:mod:`corevector.chunked`): they ask :func:`numerics` for the functions of the chosen implementation,
all with the reference's signatures (refimpl never imports fastimpl; the compiled modules are imported only
when 'fast' is asked for).

* ``fit_meb(problem, eps, **options)`` -- the core-set loop of ``refimpl.driver`` on the MEB numerics, with the
  estimators' ``solver`` ('auto' by default: :mod:`corevector.engine_policy`);
* ``meb_ops`` -- those numerics' class (``refimpl.meb.MEBOps`` or ``fastimpl._engine.FastMEBOps``), which a
  chunked fit runs in memory on the rows it holds;
* ``kernel_expansion(spec, SV, coef, X)`` -- f(x) = sum_t coef_t k(sv_t, x) (prediction, full scans);
* ``screened_expansion(spec, SV, coef, X, lo, hi)`` -- the same sums through the scans' screens, with their
  bound (fast only; None for 'ref', whose scans are exact);
* ``row_block(ops, m, max_sq)`` -- the scans' kernel block of a ``meb_ops`` whose inputs are slots holding
  rows of an X of m rows in turn (a chunked fit's row buffer): an installer ``install(slots, rows)`` (also
  ``expansion(X, rows)`` and ``partial_sums(rows)``, the full scans' sums through the block), or None where the
  block does not apply (fast only; None for 'ref', which has no block);
* ``constrained_ops`` -- the numerics class of MMDA's constrained MEB, and ``kernel_matrix(spec, A, B)``;
* ``ssvr_srs(X, y, spec, ...)`` -- SSVR-SRS (002 Table 1), and ``ssvr_auto(X, y, spec, ...)`` -- the same with
  ``n_basis`` and/or ``lam`` chosen on a hold-out (``refimpl.ssvr.ssvr_auto``).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from .engine_policy import with_policy

IMPLS = ("fast", "ref")


@dataclass(frozen=True)
class Numerics:
    impl: str
    fit_meb: Callable
    meb_ops: type
    kernel_expansion: Callable
    screened_expansion: Callable | None
    constrained_ops: type
    kernel_matrix: Callable
    ssvr_srs: Callable
    ssvr_auto: Callable
    row_block: Callable | None = None


@lru_cache(maxsize=None)
def numerics(impl: str) -> Numerics:
    """The functions of implementation ``impl``; a clear ValueError for anything else."""
    if impl == "fast":
        from fastimpl import _engine, _mmda, _ssvr
        return Numerics("fast", with_policy(_engine.fit_meb), _engine.FastMEBOps, _engine.kernel_expansion,
                        _engine.screened_expansion, _mmda.FastConstrainedOps, _mmda.kernel_matrix, _ssvr.ssvr_srs,
                        _ssvr.ssvr_auto, _engine.row_block)
    if impl == "ref":
        from refimpl.constrained_meb import ConstrainedOps
        from refimpl.kernels import kernel_block, kernel_expansion
        from refimpl.meb import MEBOps, fit_meb
        from refimpl.ssvr import ssvr_auto, ssvr_srs
        return Numerics("ref", with_policy(fit_meb), MEBOps, kernel_expansion, None, ConstrainedOps, kernel_block, ssvr_srs,
                        ssvr_auto)
    raise ValueError(f"impl must be one of {IMPLS}, got {impl!r}")
