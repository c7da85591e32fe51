"""The estimators' ``X`` for chunked data: :class:`ChunkedRows`, the rows of a source (all of them, or a subset
in some order), never read whole.

Its shape and row subsets as views (``X[idx]``), a few rows on request (``take``), a function mapped over
its blocks beside the data (``map_blocks``), and the statistics of one pass (``stats``: what the input checks
and the kernel width need).  Every block is converted to float64 when it is computed on, one block at a
time: a float32 input stays float32 on disk and in transit.
"""
from __future__ import annotations

import numpy as np

from .dask_source import DaskSource, dask_from_zarr
from .detect import distributed_client, is_dask, is_zarr
from .local_source import LocalSource
from .source import as_float, phase
from .staged_rows import HeldRows, stage
from .stats import block_stats, merge_stats

__all__ = ["ChunkedRows", "source_of", "MATERIALIZE_BYTES", "SUB_ROWS"]

#: a view of at most this many bytes (as float64) is read into memory when asked for as an array (e.g.
#: support vectors); larger ones refuse, so that nothing is read whole by accident
MATERIALIZE_BYTES = 256 * 2**20
#: a block function sees at most this many rows at once (float64 temporaries stay small whatever the chunks)
SUB_ROWS = 1 << 16


def source_of(X):
    """The source that reads ``X``: its Dask array, zarr's chunks on a running cluster's workers, else this process."""
    if is_dask(X):
        return DaskSource(X)
    if is_zarr(X) and distributed_client() is not None:
        return DaskSource(dask_from_zarr(X))
    return LocalSource(X)


class ChunkedRows:
    """The estimators' ``X`` for chunked data: the rows of a source (all of them, or the subset ``rows``
    in that order), never read whole.  ``X[idx]`` is a view; ``take(idx)`` reads those rows as float64;
    ``map_blocks(fn, shared, extra)`` runs ``fn(block, shared, (pidx, pos, extra_b))`` beside every block
    that holds rows of the view (``pidx``: the view's indices of those rows, ``pos``: their positions in
    the block, None when the block is all of it) and returns the results in block order."""

    chunked_rows = True  # the marker refimpl.problem.MEBProblem recognises
    ndim = 2
    dtype = np.dtype(np.float64)

    def __init__(self, source, rows=None, stats=None):
        self.source = source
        self.rows = None if rows is None else np.asarray(rows, dtype=np.int64)
        m = source.shape[0] if self.rows is None else len(self.rows)
        self.shape = (int(m), int(source.shape[1]) if len(source.shape) > 1 else 0)
        self._stats = stats
        self._plan = None
        self._box = None

    @classmethod
    def of(cls, X):
        return X if isinstance(X, ChunkedRows) else cls(source_of(X))

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        return f"ChunkedRows(shape={self.shape}, source={type(self.source).__name__}, dtype={self.source.dtype})"

    @property
    def nbytes(self):
        return self.shape[0] * self.shape[1] * 8

    def source_rows(self, idx):
        """The source's rows of the view's rows ``idx`` (NumPy's negative indices; IndexError out of range),
        in idx's integer type (a stash's int32 rows stay int32)."""
        idx = np.asarray(idx)
        if idx.dtype.kind not in "iu":
            idx = idx.astype(np.int64)
        n = self.shape[0]
        lo = int(idx.min()) if idx.size else 0
        if lo < -n or (idx.size and int(idx.max()) >= n):
            raise IndexError(f"row index out of range for {n} rows")
        if lo < 0:
            idx = np.where(idx < 0, idx + n, idx)
        return idx if self.rows is None else self.rows[idx]

    def __getitem__(self, key):
        if isinstance(key, tuple):
            raise TypeError("ChunkedRows supports row selection only (X[rows])")
        if isinstance(key, slice):
            key = np.arange(self.shape[0])[key]
        key = np.asarray(key)
        if key.dtype == bool:
            key = np.flatnonzero(key)
        view = ChunkedRows(self.source, self.source_rows(key.astype(np.int64)))
        view._box = self.box if self._stats is not None or self._box is not None else None
        return view

    def take(self, idx, dtype=np.float64) -> np.ndarray:
        """The rows ``idx`` of the view as a float64 array (read from where they are; ``dtype``: the source's
        own keeps float32 rows in half the memory, exactly)."""
        src = self.source_rows(idx)
        if len(src) < 2 or bool((src[1:] > src[:-1]).all()):  # ascending, unique (a stash of draws): no copies
            return np.asarray(self.source.take(src), dtype=dtype)
        uniq, inv = np.unique(src, return_inverse=True)
        return np.ascontiguousarray(self.source.take(uniq), dtype=dtype)[inv.ravel()]

    def stage(self, idx, dtype):
        """The rows ``idx`` of the view (ascending source rows: a stash of draws) in ``dtype``, read by one
        pass and left where they were read until picked (:mod:`corevector.chunked.staged_rows`)."""
        src = self.source_rows(idx)
        if len(src) > 1 and not bool((src[1:] > src[:-1]).all()):
            return HeldRows(self.take(idx, dtype=dtype))
        return stage(self.source, src, dtype, self.source.take)

    def materialize(self) -> np.ndarray:
        if self.nbytes > MATERIALIZE_BYTES:
            raise TypeError(f"{self!r} would be read whole into memory ({self.nbytes / 2**20:.0f} MB as float64); "
                            f"corevector.chunked.rows.MATERIALIZE_BYTES is {MATERIALIZE_BYTES / 2**20:.0f} MB")
        return self.take(np.arange(self.shape[0]))

    def __array__(self, dtype=None, copy=None):
        out = self.materialize()
        return out if dtype is None else out.astype(dtype)

    # -- blocks
    def plan(self):
        """[(block, pidx, pos)] for the blocks holding rows of the view (pidx None: the whole block is rows
        bounds[b]..bounds[b+1] of the view, in order)."""
        if self._plan is None:
            bounds = self.source.bounds
            out = []
            if self.rows is None:
                out = [(b, None, None) for b in range(len(bounds) - 1) if bounds[b + 1] > bounds[b]]
            else:
                which = np.searchsorted(bounds, self.rows, side="right") - 1
                order = np.argsort(which, kind="stable")
                cuts = np.flatnonzero(np.diff(which[order])) + 1
                for part in np.split(order, cuts):
                    if len(part):
                        b = int(which[part[0]])
                        out.append((b, part.astype(np.int64), (self.rows[part] - bounds[b]).astype(np.int64)))
            self._plan = out
        return self._plan

    def block_starts(self):
        """The view index of each planned block's first row (whole blocks of an unsubset view)."""
        return [int(self.source.bounds[b]) if pidx is None else None for b, pidx, _ in self.plan()]

    def map_blocks(self, fn, shared, extra=None, combine=None):
        """(``combine(results, shared)``: one result from many, applied beside the data -- per block, then in
        a tree over the blocks -- so that a single result comes back, whatever the number of blocks.)"""
        plan = self.plan()
        extra = [None] * len(plan) if extra is None else extra
        per_block = [(int(self.source.bounds[b]) if pidx is None else None, pidx, pos, e)
                     for (b, pidx, pos), e in zip(plan, extra)]
        parts = self.source.map(_on_rows(fn, combine), shared, per_block, [b for b, _, _ in plan], combine)
        return [r for part in parts for r in part]

    def per_block(self, arrays):
        """Per-block slices of per-row arrays of the view (None entries stay None), scattered to the workers
        once when a distributed client runs: what a fit's block functions get as ``extra``."""
        out = []
        for b, pidx, _ in self.plan():
            if pidx is None:
                lo, hi = self.source.bounds[b], self.source.bounds[b + 1]
                out.append(tuple(None if a is None else a[lo:hi] for a in arrays))  # views: no copy here
            else:
                out.append(tuple(None if a is None else np.ascontiguousarray(a[pidx]) for a in arrays))
        return self.source.scatter(out)

    # -- statistics of one chunked pass
    @property
    def stats(self):
        if self._stats is None:
            with phase("validation"):
                parts = self.map_blocks(block_stats, None)
            self._stats = merge_stats(parts, self.shape[1])
        return self._stats

    @property
    def box(self):
        """(lowest, highest) value of every column: of the rows of the view, or of a view it was cut from
        (a box that holds them: what the engines' screens need, without another pass)."""
        if self._box is not None:
            return self._box
        return self.stats["min"], self.stats["max"]

    def kernel_diag(self, spec) -> np.ndarray:
        """k(x, x) of every row of the view (refimpl.kernels.kernel_diag), from one chunked pass; a constant
        array of no memory for the radial kernels."""
        if spec.radial:
            return np.broadcast_to(1.0, (self.shape[0],))
        out = np.empty(self.shape[0])
        with phase("validation"):
            parts = self.map_blocks(_block_kernel_diag, spec)
        for (pidx, vals) in parts:
            out[pidx] = vals
        return out


class _on_rows:
    """fn(block_rows_float64, shared, (pidx, extra)): the view's rows of a block, as float64, and their
    view indices (a picklable callable, so that it runs on a worker)."""

    def __init__(self, fn, combine=None):
        self.fn, self.combine = fn, combine

    def __call__(self, block, shared, pb):
        """fn on slices of at most SUB_ROWS rows (float64 one slice at a time): a list of results."""
        start, pidx, pos, extra = pb
        block = np.asarray(block)
        if pos is not None:
            block = block[pos]
        else:
            pidx = np.arange(start, start + block.shape[0], dtype=np.int64)
        out = []
        for a in range(0, max(block.shape[0], 1), SUB_ROWS):
            sl = slice(a, a + SUB_ROWS)
            ex = extra if extra is None else _slice_extra(extra, sl)
            out.append(self.fn(as_float(block[sl]), shared, (pidx[sl], ex)))
        return out if self.combine is None or len(out) < 2 else [self.combine(out, shared)]


def _slice_extra(extra, sl):
    """Per-row arrays of a block (tuples of arrays, None entries) cut to the slice ``sl`` of its rows."""
    if isinstance(extra, tuple):
        return tuple(_slice_extra(e, sl) for e in extra)
    if isinstance(extra, np.ndarray):
        return extra[sl]
    return extra


def _block_kernel_diag(X, spec, pb):
    from refimpl.kernels import kernel_diag
    return pb[0], kernel_diag(spec, X)
