"""Where a chunked fit starts: :func:`fit_meb`, the core-set loop over rows that stay where they are.

An estimator's ``fit`` on a chunked X (:mod:`corevector._base`, ``CoreVectorBase``) takes these steps, each in
one module of this package:

1. :func:`corevector.chunked.checks.validate` -- the input checks, from one pass over the blocks
   (:mod:`~corevector.chunked.stats`), which also gathers what the kernel width needs
   (:func:`~corevector.chunked.checks.kernel_spec`);
2. the formulation's problem (``refimpl.cvm``, ``refimpl.cvr``) over a
   :class:`~corevector.chunked.rows.ChunkedRows`, the rows of a source
   (:class:`~corevector.chunked.local_source.LocalSource` read in this process, or
   :class:`~corevector.chunked.dask_source.DaskSource` on a cluster; both
   :class:`~corevector.chunked.source.Source`);
3. :func:`fit_meb` here: ``refimpl.driver``'s one core-set loop, the same as an in-memory fit's, on the
   numerics :class:`~corevector.chunked.ops.ChunkedMEBOps`.  Those hold the core vectors' and the drawn
   candidates' rows in a buffer (:mod:`~corevector.chunked.row_slots`), read ahead by passes over the source
   (:mod:`~corevector.chunked.staged_rows`) or, on small data, every row after one pass, and run the QP and
   the sampled scans with the in-memory engine of the chosen implementation
   (:func:`corevector.numerics.numerics`); full scans run beside each block
   (:mod:`~corevector.chunked.full_scans`, :mod:`~corevector.chunked.scans`);
4. the core vectors' rows stay on the source (:meth:`~corevector.chunked.source.Source.remember`), so the
   model's support vectors are read from memory, and the per-row methods (``predict`` ...) run per block
   (:mod:`~corevector.chunked.methods`).
"""
from __future__ import annotations

from ..numerics import numerics
from .ops import ops_class

__all__ = ["fit_meb"]


def fit_meb(impl):
    """``fit_meb(problem, eps, **options)`` (refimpl.meb.fit_meb's contract) on the chunked numerics of ``impl``.
    The core vectors' rows, held by the fit, stay with the data's source afterwards (Source.remember): the
    model's support vectors are read from there, not from the store."""
    def fit(problem, eps, **kwargs):
        cls, made = ops_class(impl), []

        def make(p, cache_size):
            made.append(cls(p, cache_size))
            return made[-1]
        make.__name__ = cls.__name__
        kwargs["ops_class"] = make
        # the fast local engine runs as an in-memory fast fit does (the compiled fit_meb: BLAS single-threaded,
        # the scans' GEMM blocks in its own OpenMP regions); under refimpl's driver alone its sampled scans ran
        # one 64-row GEMM at a time on threaded BLAS: at 10^5 x 784 (defaults, zarr) the fit took 40 s, against
        # 21 s for the in-memory fit without its kernel block
        result = numerics(impl).fit_meb(problem, eps, **kwargs)
        # the local engine's own working memory (its Q-row cache, factor and core-set stores), bounded by
        # cache_size whatever m is: the reports set it apart from what the caller holds of the data
        state = getattr(made[0].local, "memory_state", None)
        if state is not None:
            made[0].stats["engine_peak_bytes"] = int(state().peak)
        # the scans' kernel block keyed by X's rows (None: the scans ran on the support), its entries computed
        made[0].stats["block_fills"] = None if made[0]._install is None else made[0]._install.fills
        rows, values = made[0].core_rows()
        problem.X.source.remember(problem.X.source_rows(rows), values)
        return result
    return fit
