"""A Dask array as a chunked source (:class:`DaskSource`): every block computed where its data are, on a
distributed client's workers when one runs (persisted partitions, or chunks read from their store by the
worker), else by Dask's local scheduler; and :func:`dask_from_zarr`, the tasks a cluster reads a zarr store
by.  Workers lost during a pass are survived: what was scattered to them is scattered again and the pass is
retried (:data:`ATTEMPTS`)."""
from __future__ import annotations

import uuid

import numpy as np

from .detect import distributed_client, is_zarr, require_dask
from .local_source import array_bounds
from .row_slots import by_block
from .source import Combined, Source

__all__ = ["DaskSource", "dask_from_zarr", "ATTEMPTS", "FAN_IN", "PERSIST_SHARE", "TASK_BYTES"]

#: rows per task where a cluster's workers read a zarr store: larger, since a task costs the scheduler ~1 ms
TASK_BYTES = 16 * 2**20
#: a Dask input whose bytes are at most this share of the workers' combined memory limit is persisted on
#: them for the fit (read from its store once, not once per pass: at 10^7 x 2 a pass decoding the zarr
#: chunks cost the workers 0.4 s of the scan's 2.2 s); larger ones stay where they are, read per pass
PERSIST_SHARE = 0.25


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


class DaskSource(Source):
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

    def fetch(self, rows):
        import dask
        if len(rows) == 0:
            return np.zeros((0,) + self.shape[1:], dtype=self.dtype)
        parts = by_block(self.bounds, rows)
        return np.concatenate(self._compute(
            lambda: [dask.delayed(_take_block, pure=True)(self.blocks[b], loc) for b, loc in parts]))

    def map(self, fn, shared, per_block, blocks, combine=None):
        import dask
        sh = self._shared(shared)

        def build():
            tasks = [dask.delayed(fn, pure=False)(self.blocks[b], _resolve(sh), _resolve(pb))
                     for b, pb in zip(blocks, per_block)]
            while combine is not None and len(tasks) > 1:  # a tree on the workers: one result comes back
                tasks = [dask.delayed(Combined(combine), pure=False)(_resolve(sh), *tasks[a:a + FAN_IN])
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
    bounds = array_bounds(X, TASK_BYTES)
    rows = int(bounds[1] - bounds[0]) if len(bounds) > 1 else max(int(X.shape[0]), 1)
    return da.from_zarr(X, chunks=(rows,) + tuple(X.shape[1:]))
