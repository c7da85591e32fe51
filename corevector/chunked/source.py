"""What every chunked data source is (:class:`Source`): rows in blocks, read where they are, and the rows it
keeps in memory after a fit.

Two kinds: :class:`~corevector.chunked.local_source.LocalSource` (a memory map, zarr array or HDF5 dataset
read by blocks in the calling process) and :class:`~corevector.chunked.dask_source.DaskSource` (a Dask array,
computed on a cluster's workers or by the local scheduler).  A source has ``shape``, ``dtype``, ``bounds``
(the rows where its blocks start, and m), ``read(b)`` (block b), ``fetch(rows)`` (rows in its own dtype),
``map(fn, shared, per_block, blocks, combine)`` (fn beside each block) and ``scatter(objs)``.

**Kept rows.**  A fit holds its core vectors' rows already; :meth:`Source.remember` keeps them on the source,
so that reading the model's support vectors afterwards (``ChunkedRows.materialize``) costs no pass over the
store (10^7 x 2 zarr: 0.23 s of a 4.3 s fit).  :meth:`Source.take` serves those from memory and fetches the
rest.

**Phases.**  What a pass is for -- ``'validation'``, ``'read-ahead'``, ``'full scan'``, ``'certificate'``,
``'prediction'`` ... -- is named by :func:`phase` around it, per thread (a fit reads ahead in a thread of its
own while its loop scans): the errors of a cluster that lost workers or its scheduler say which pass they
stopped (:mod:`~corevector.chunked.dask_source`).
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np

from .row_slots import positions_in

__all__ = ["Source", "Combined", "as_float", "phase", "current_phase"]

_PHASE = threading.local()


@contextlib.contextmanager
def phase(name):
    """The passes over a source in this block, in this thread, are ``name`` (blocks nest: the innermost names)."""
    old = getattr(_PHASE, "name", None)
    _PHASE.name = name
    try:
        yield
    finally:
        _PHASE.name = old


def current_phase() -> str:
    """The name :func:`phase` gave this thread's passes, or 'pass over the data'."""
    return getattr(_PHASE, "name", None) or "pass over the data"


def as_float(block) -> np.ndarray:
    """A block as the float64 C-ordered array the engines compute on (one block at a time)."""
    return np.ascontiguousarray(block, dtype=np.float64)


class Source:
    """The rows of a chunked input, in blocks (see the module docstring); subclasses read and map them."""

    #: the rows kept in memory, ``(rows, float64 values)`` with rows ascending (:meth:`remember`), or None
    known = None
    #: the distributed client whose workers read the blocks (None: they are read in this process)
    client = None
    is_dask = False

    def fetch(self, rows):
        """Rows (sorted, unique source indices) in the source's dtype, read from where they are."""
        raise NotImplementedError

    def remember(self, rows, values):
        """Keep ``values`` (float64) of the source rows ``rows`` in memory: a fit's core vectors, whose rows
        the fit held already.  The fitted model's support vectors are among them."""
        rows = np.asarray(rows, dtype=np.int64)
        values = np.asarray(values, dtype=np.float64).reshape(len(rows), -1)
        old = self.known
        if old is not None:
            rows, values = np.concatenate([old[0], rows]), np.concatenate([old[1], values])
        rows, first = np.unique(rows, return_index=True)
        self.known = (rows, values[first])

    def take(self, rows):
        """:meth:`fetch` for the rows the source does not keep (:meth:`remember`), the kept ones from memory
        (float64: exact for float32 and float64 sources alike)."""
        known = self.known
        if known is None or len(rows) == 0:
            return self.fetch(rows)
        krows, kvals = known
        pos, hit = positions_in(krows, rows)
        if not hit.any():
            return self.fetch(rows)
        out = np.empty((len(rows),) + tuple(self.shape[1:]), dtype=np.float64)
        out[hit] = kvals[pos[hit]]
        if not hit.all():
            out[~hit] = self.fetch(rows[~hit])
        return out


class Combined:
    """``combine(results, shared)`` over the lists of results of several blocks: a list of one."""

    def __init__(self, combine):
        self.combine = combine

    def __call__(self, shared, *parts):
        return [self.combine([r for p in parts for r in p], shared)]
