"""Data that stay where they are: Dask arrays, zarr arrays, HDF5 datasets and memory maps as inputs (issue 24).

The estimators ``MEB``, ``CVDD``, ``CVMClassifier`` and ``CVR`` accept, in ``fit``, ``predict``,
``decision_function``, ``score`` (and the other per-row methods):

* a ``dask.array.Array``, on a ``dask.distributed`` client or on the local scheduler;
* a zarr array or an h5py dataset, read by chunks (on the workers, through ``dask.array.from_zarr``,
  when a distributed client is running);
* an ``np.memmap`` (or a memory-mapped ``.npy``, ``np.load(..., mmap_mode='r')``).  A float64 C-ordered
  map is what the in-memory engines read anyway, in place and without a copy, so it takes the in-memory
  path; any other (float32, Fortran order) is read by chunks here, never converted whole.

None of them is read whole into the caller's memory.  This module is the data side: detecting such an
input (:func:`needs_chunked`), :class:`ChunkedRows` (rows of a source, or a subset of them, as the
estimators' ``X``: its shape, row subsets as views, a few rows on request, a function mapped over its
blocks beside the data), the chunked input checks (:func:`validate`: the same checks and messages as
scikit-learn's ``validate_data``, from one pass that also gathers what the kernel width needs), the kernel
resolution from those statistics (:func:`kernel_spec`, the checks of :func:`refimpl.kernels.checked_kernel_spec`),
and per-row methods applied per block (:mod:`corevector._chunked_methods`: a Dask array in, a Dask array out).
The numerics of the core-set loop over such rows are :mod:`corevector._chunked_ops`.

Every block is converted to float64 when it is computed on, one block at a time: a float32 input stays
float32 on disk and in transit.
"""
from __future__ import annotations

import math
import mmap
import sys
import uuid

import numpy as np

from ._chunk_stats import block_stats as _block_stats, merge_stats as _merge_stats
from ._staged_rows import HeldRows as _HeldRows, stage as _stage
from ._kept_rows import take_known as _take_known
from ._local_source import _Combined, _LocalSource, _array_bounds, _as_float
from ._row_slots import by_block as _by_block

__all__ = ["needs_chunked", "ChunkedRows", "dask_from_zarr", "validate", "kernel_spec", "EXTRA_MESSAGE"]

#: a view of at most this many bytes (as float64) is read into memory when asked for as an array (e.g.
#: support vectors); larger ones refuse, so that nothing is read whole by accident
MATERIALIZE_BYTES = 256 * 2**20
#: rows per task where a cluster's workers read a zarr store: larger, since a task costs the scheduler ~1 ms
TASK_BYTES = 16 * 2**20
#: a Dask input whose bytes are at most this share of the workers' combined memory limit is persisted on
#: them for the fit (read from its store once, not once per pass: at 10^7 x 2 a pass decoding the zarr
#: chunks cost the workers 0.4 s of the scan's 2.2 s); larger ones stay where they are, read per pass
PERSIST_SHARE = 0.25
#: a block function sees at most this many rows at once (float64 temporaries stay small whatever the chunks)
SUB_ROWS = 1 << 16

EXTRA_MESSAGE = ("Dask inputs need the optional dependencies of corevector's 'dask' extra: "
                 "pip install 'corevector[dask]' (dask, distributed, zarr, h5py)")


# ---------------------------------------------------------------------------------------- what is chunked
def _top_module(X) -> str:
    return type(X).__module__.split(".")[0]


def is_dask(X) -> bool:
    return _top_module(X) == "dask" and hasattr(X, "chunks") and hasattr(X, "dask")


def is_zarr(X) -> bool:
    return _top_module(X) == "zarr" and hasattr(X, "chunks") and hasattr(X, "shape")


def is_h5py(X) -> bool:
    return _top_module(X) == "h5py" and hasattr(X, "chunks") and hasattr(X, "shape")


def is_memmap(X) -> bool:
    if isinstance(X, np.memmap):
        return True
    base = getattr(X, "base", None)
    while base is not None:
        if isinstance(base, mmap.mmap):
            return True
        base = getattr(base, "base", None)
    return False


def needs_chunked(X) -> bool:
    """True for the inputs that this module reads by chunks (see the module docstring)."""
    if isinstance(X, ChunkedRows) or is_dask(X) or is_zarr(X) or is_h5py(X):
        return True
    if isinstance(X, np.ndarray) and is_memmap(X):
        return not (X.dtype == np.float64 and X.flags.c_contiguous)
    return False


def require_dask():
    """dask.array and distributed, or an ImportError naming the extra."""
    try:
        import dask  # noqa: F401
        import dask.array  # noqa: F401
        import distributed  # noqa: F401
    except ImportError as exc:
        raise ImportError(EXTRA_MESSAGE) from exc


def distributed_client():
    """The running ``dask.distributed`` client, or None (no client, or distributed not installed)."""
    mod = sys.modules.get("distributed")
    if mod is None:
        return None
    try:
        return mod.get_client()
    except ValueError:
        return None


# ---------------------------------------------------------------------------------------- sources
#: blocks' results combined per task of the tree that reduces a scan on the workers
FAN_IN = 8


def _take_block(block, local):
    return np.asarray(block)[local]


#: attempts of a scan or fetch whose workers were lost (Dask recomputes their blocks; what was scattered
#: to them is scattered again) before the fit stops with a RuntimeError
ATTEMPTS = 3


class _Ref:
    """An object scattered to the workers, kept here too, so that it can be scattered again when the
    worker holding it is lost."""

    def __init__(self, obj, future):
        self.obj, self.future = obj, future


def _resolve(x):
    if isinstance(x, _Ref):
        return x.future
    if isinstance(x, tuple):
        return tuple(_resolve(e) for e in x)
    return x


def _refs(x):
    if isinstance(x, _Ref):
        yield x
    elif isinstance(x, tuple):
        for e in x:
            yield from _refs(e)


def _lost_workers(exc) -> bool:
    """True for the failures a lost worker causes (cancelled futures, lost dependencies, killed workers)."""
    import asyncio
    import concurrent.futures
    if isinstance(exc, (asyncio.CancelledError, concurrent.futures.CancelledError)):
        return True
    return type(exc).__module__.split(".")[0] == "distributed"


class _DaskSource:
    """A Dask array: every block computed where its data are (persisted partitions, or chunks read from
    their store by the worker), on a distributed client when one runs, else on the local scheduler."""

    def __init__(self, darr):
        require_dask()
        if darr.ndim == 2 and darr.numblocks[1] > 1:
            darr = darr.rechunk({1: -1})
        self.darr = darr
        self.shape = tuple(int(s) for s in darr.shape)
        self.dtype = np.dtype(darr.dtype)
        self.bounds = np.r_[0, np.cumsum(darr.chunks[0])].astype(np.int64)
        self.blocks = darr.to_delayed().ravel() if darr.ndim == 2 else darr.to_delayed()
        self.is_dask = True
        self._refs = []
        # the client running now (threads the fit starts, e.g. its reads ahead, use it too)
        self.client = distributed_client()
        self.persisted = self._persist_if_small()

    def _persist_if_small(self) -> bool:
        """Persist the array on the workers when it takes at most PERSIST_SHARE of their combined memory
        limit (a limit each: workers without one are not counted).  Only on a distributed client: the
        local scheduler would hold it in this process.  Dask recomputes a lost worker's partitions from
        the graph, as before; the persisted blocks go when the fit drops this source."""
        if self.client is None:
            return False
        try:
            try:
                info = self.client.scheduler_info(n_workers=-1)  # every worker (some versions list five)
            except TypeError:
                info = self.client.scheduler_info()
            workers = info.get("workers", {}).values()
        except Exception:  # noqa: BLE001 -- no scheduler information: read per pass, as without persisting
            return False
        limit = sum(int(w.get("memory_limit") or 0) for w in workers)
        if limit <= 0 or self.darr.nbytes > PERSIST_SHARE * limit:
            return False
        self.darr = self.client.persist(self.darr)
        self.blocks = self.darr.to_delayed().ravel() if self.darr.ndim == 2 else self.darr.to_delayed()
        return True

    def _compute(self, build):
        """Compute the tasks ``build()`` makes (see :meth:`retry`)."""
        import dask
        return self.retry(lambda: list(dask.compute(*build(), **({} if self.client is None else {"scheduler": self.client}))))

    def retry(self, run):
        """``run()``; when workers are lost meanwhile, scatter what they held again and run it again (Dask
        recomputes lost blocks from their graph), then give up with a clear error."""
        for attempt in range(ATTEMPTS):
            try:
                return run()
            except Exception as exc:  # noqa: BLE001 -- only lost-worker failures are retried
                if not _lost_workers(exc):
                    raise
                if attempt == ATTEMPTS - 1:
                    raise RuntimeError(f"the Dask cluster lost workers during the fit and {ATTEMPTS} attempts to "
                                       "recompute the lost blocks failed; no model was fitted") from exc
                client = self.client
                for ref in self._refs:
                    if client is not None and ref.future.status != "finished":
                        ref.future = client.scatter([ref.obj], hash=False)[0]

    def read(self, b):
        return np.asarray(self.blocks[b].compute())

    def _direct(self):
        """Scatter straight to the workers when the scheduler runs in this process (a LocalCluster's): through
        it, every byte scattered would also pass through the caller's memory a second time (the labels: one
        byte a row).  Otherwise the client's own choice (``direct_to_workers``)."""
        from distributed import Scheduler
        return True if isinstance(getattr(self.client.cluster, "scheduler", None), Scheduler) else None

    def scatter(self, objs):
        """Per-block objects sent to the workers once (a fit's labels and weights), or kept as they are."""
        client = self.client
        if client is None:
            return objs
        refs = [_Ref(o, f) for o, f in zip(objs, client.scatter(list(objs), hash=False, direct=self._direct()))]
        self._refs.extend(refs)
        return refs

    def _shared(self, shared):
        import dask
        client = self.client
        if client is not None:  # sent once to every worker, whatever the number of blocks
            ref = _Ref(shared, client.scatter([shared], broadcast=True, hash=False)[0])
            self._refs.append(ref)
            return ref
        return dask.delayed(shared, name="corevector-shared-" + uuid.uuid4().hex, traverse=False)

    def take(self, rows):
        return _take_known(self, rows, self._take)

    def _take(self, rows):
        import dask
        if len(rows) == 0:
            return np.zeros((0,) + self.shape[1:], dtype=self.dtype)
        parts = _by_block(self.bounds, rows)
        return np.concatenate(self._compute(
            lambda: [dask.delayed(_take_block, pure=True)(self.blocks[b], loc) for b, loc in parts]))

    def map(self, fn, shared, per_block, blocks, combine=None):
        import dask
        sh = self._shared(shared)

        def build():
            tasks = [dask.delayed(fn, pure=False)(self.blocks[b], _resolve(sh), _resolve(pb))
                     for b, pb in zip(blocks, per_block)]
            while combine is not None and len(tasks) > 1:  # a tree on the workers: one result comes back
                tasks = [dask.delayed(_Combined(combine), pure=False)(_resolve(sh), *tasks[a:a + FAN_IN])
                         for a in range(0, len(tasks), FAN_IN)]
            return tasks
        try:
            return self._compute(build)
        finally:
            if isinstance(sh, _Ref):  # the scan's broadcast is done with
                self._refs.remove(sh)
                sh.future.release()


def dask_from_zarr(X):
    """A Dask array over the zarr array ``X`` in the tasks a fit on a cluster reads it by: whole chunks of
    the store, about ``TASK_BYTES`` as float64 each.

    ``dask.array.from_zarr(X)`` makes a task of every chunk of the store, and zarr's cost per read (its
    event loop's hand-offs and a copy, ~3 ms for a 3.2 MB chunk against 0.9 ms for the bytes themselves)
    then weighs on a prediction: ``decision_function`` of 10^5 x 784 float32 rows (1,024-row chunks) against
    682 support vectors on two workers took 2.1-2.4 s with a task a chunk, 1.7-1.9 s with tasks of 2,048 or
    4,096 rows (in memory: 1.8 s).  Tasks of a few whole chunks keep zarr's concurrent reads of a task's
    chunks without making tasks so large that a scan's last ones leave a worker idle.
    """
    if not is_zarr(X):
        raise TypeError(f"dask_from_zarr: X must be a zarr array, got {type(X).__name__}")
    require_dask()
    import dask.array as da
    # a task a zarr chunk would also be 15,625 tasks a pass over 10^6 rows of a store in chunks of 64 rows
    bounds = _array_bounds(X, TASK_BYTES)
    rows = int(bounds[1] - bounds[0]) if len(bounds) > 1 else max(int(X.shape[0]), 1)
    return da.from_zarr(X, chunks=(rows,) + tuple(X.shape[1:]))


def _source(X):
    if is_dask(X):
        return _DaskSource(X)
    if is_zarr(X) and distributed_client() is not None:
        return _DaskSource(dask_from_zarr(X))
    return _LocalSource(X)


# ---------------------------------------------------------------------------------------- the rows
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
        return X if isinstance(X, ChunkedRows) else cls(_source(X))

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        return f"ChunkedRows(shape={self.shape}, source={type(self.source).__name__}, dtype={self.source.dtype})"

    @property
    def nbytes(self):
        return self.shape[0] * self.shape[1] * 8

    def _source_rows(self, idx):
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
        view = ChunkedRows(self.source, self._source_rows(key.astype(np.int64)))
        view._box = self.box if self._stats is not None or self._box is not None else None
        return view

    def take(self, idx, dtype=np.float64) -> np.ndarray:
        """The rows ``idx`` of the view as a float64 array (read from where they are; ``dtype``: the source's
        own keeps float32 rows in half the memory, exactly)."""
        src = self._source_rows(idx)
        if len(src) < 2 or bool((src[1:] > src[:-1]).all()):  # ascending, unique (a stash of draws): no copies
            return np.asarray(self.source.take(src), dtype=dtype)
        uniq, inv = np.unique(src, return_inverse=True)
        return np.ascontiguousarray(self.source.take(uniq), dtype=dtype)[inv.ravel()]

    def stage(self, idx, dtype):
        """The rows ``idx`` of the view (ascending source rows: a stash of draws) in ``dtype``, read by one
        pass and left where they were read until picked (:mod:`corevector._staged_rows`)."""
        src = self._source_rows(idx)
        if len(src) > 1 and not bool((src[1:] > src[:-1]).all()):
            return _HeldRows(self.take(idx, dtype=dtype))
        return _stage(self.source, src, dtype, self.source.take)

    def materialize(self) -> np.ndarray:
        if self.nbytes > MATERIALIZE_BYTES:
            raise TypeError(f"{self!r} would be read whole into memory ({self.nbytes / 2**20:.0f} MB as float64); "
                            f"corevector.chunked.MATERIALIZE_BYTES is {MATERIALIZE_BYTES / 2**20:.0f} MB")
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
            parts = self.map_blocks(_block_stats, None)
            self._stats = _merge_stats(parts, self.shape[1])
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
        for (pidx, vals) in self.map_blocks(_block_kernel_diag, spec):
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
            out.append(self.fn(_as_float(block[sl]), shared, (pidx[sl], ex)))
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


# ---------------------------------------------------------------------------------------- checks
def _name(estimator):
    return type(estimator).__name__


def validate(estimator, X, y="no_validation", *, reset=True, ensure_min_samples=1, y_numeric=False, **_ignored):
    """scikit-learn's ``validate_data`` for a chunked X: the same checks and messages (2-D, numeric, at
    least ``ensure_min_samples`` rows and one feature, no NaN or infinity, y of matching length), from one
    chunked pass whose statistics (column ranges, variances) the kernel width reuses.  Returns the
    :class:`ChunkedRows` (and y as a NumPy array: labels and targets are 1 value a row, read whole)."""
    from sklearn.utils.validation import _check_y, check_consistent_length

    if is_dask(X):
        require_dask()
    Xc = ChunkedRows.of(X)
    src = Xc.source
    if len(src.shape) != 2:
        raise ValueError(f"Expected 2D array, got {len(src.shape)}D array instead: a chunked X of shape {src.shape}")
    if src.dtype.kind not in "biuf":
        raise ValueError(f"{_name(estimator)}: a chunked X must hold real numbers, got dtype {src.dtype}")
    m, d = Xc.shape
    if m < ensure_min_samples:
        raise ValueError(f"Found array with {m} sample(s) (shape={Xc.shape}) while a minimum of {ensure_min_samples} "
                         f"is required by {_name(estimator)}.")
    if d < 1:
        raise ValueError(f"Found array with 0 feature(s) (shape={Xc.shape}) while a minimum of 1 is required by "
                         f"{_name(estimator)}.")
    if not reset:
        _check_features(estimator, d)
    st = Xc.stats
    if st["nan"]:
        raise ValueError(f"Input X contains NaN.\n{_name(estimator)} does not accept missing values encoded as NaN "
                         "natively.")
    if st["inf"]:
        raise ValueError("Input X contains infinity or a value too large for dtype('float64').")
    if reset:
        estimator.n_features_in_ = d
        if hasattr(estimator, "feature_names_in_"):
            del estimator.feature_names_in_
    if isinstance(y, str) and y == "no_validation":
        return Xc
    if y is None:
        raise ValueError(f"{_name(estimator)} requires y to be passed, but the target y is None.")
    if is_dask(y):
        y = y.compute()
    y = _check_y(np.asarray(y), y_numeric=y_numeric, estimator=estimator)
    check_consistent_length(Xc, y)
    return Xc, y


def _check_features(estimator, d):
    n = getattr(estimator, "n_features_in_", None)
    if n is not None and d != n:
        raise ValueError(f"X has {d} features, but {_name(estimator)} is expecting {n} features as input.")


def kernel_spec(X, kernel, gamma, degree, coef0, normalize):
    """:func:`refimpl.kernels.checked_kernel_spec` from the statistics of the chunked pass: gamma='scale' is
    1 / (d Var X) over every entry, 'beta' 2 sum_f Var(X[:, f]) (both merged per block, so they can differ
    from NumPy's single-array sums in the last bits), the same refusals of widths and kernel values that
    float64 cannot hold, with the same messages."""
    from refimpl import kernels as K

    st, (m, d) = X.stats, X.shape
    g = gamma
    if isinstance(gamma, str) and gamma in ("beta", "scale") and kernel != "linear":
        if (gamma == "scale" and st["min"].min() == st["max"].max()) or \
                (gamma == "beta" and np.all(st["min"] == st["max"])):
            g = 1.0
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                if gamma == "beta":
                    what, value = "beta (mean squared pairwise distance)", float(2.0 * st["col_var"].sum())
                else:
                    what, value = "n_features * Var(X)", d * float(st["var"])
                g = 1.0 / value if value > 0 else np.inf
            if not (K._NORMAL[0] <= value <= K._NORMAL[1]) or not (0.0 < g < np.inf):
                raise ValueError(
                    f"gamma={gamma!r} cannot be computed for this X: {what} = {value:.3g} is outside the normal "
                    f"float64 range [{K._NORMAL[0]:.3g}, {K._NORMAL[1]:.3g}] (max|X| = {st['absmax']:.3g}), so gamma "
                    "and the kernel's squared distances would under- or overflow and every kernel value would be 0 "
                    "or 1.  Rescale X (e.g. sklearn.preprocessing.StandardScaler) or pass gamma as a number.")
    spec = K.make_kernel_spec(np.zeros((1, d)), kernel, g, degree, coef0, normalize)
    if m * d == 0:
        return spec
    tiny = np.finfo(np.float64).tiny
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        if spec.radial:
            value = float(np.sum((st["max"] - st["min"]) ** 2))
            what = "the largest squared distance between two rows of X"
            bad = not np.isfinite(value) or 0.0 < value < tiny
        else:
            value = float(st["sqmax"])
            if spec.name == "poly":
                value = float(np.power(spec.gamma * value + spec.coef0, float(spec.degree)))
            what = "the largest kernel value k(x, x) of X"
            bad = not value <= math.sqrt(np.finfo(np.float64).max) or 0.0 < value < tiny
    if bad:
        raise ValueError(f"X is of a scale float64 cannot hold for kernel={spec.name!r}: {what} is {value:.3g} "
                         f"(max|X| = {st['absmax']:.3g}), so the kernel values would over- or "
                         "underflow.  Rescale X (e.g. sklearn.preprocessing.StandardScaler).")
    return spec
