"""A Dask array as a chunked source (:class:`DaskSource`): every block computed where its data are, on a
distributed client's workers when one runs (persisted partitions, or chunks read from their store by the
worker), else by Dask's local scheduler; and :func:`dask_from_zarr`, the tasks a cluster reads a zarr store
by.

**Faults.**  Workers lost during a pass are survived: Dask recomputes their blocks, what was scattered to them
is scattered again and the pass is retried (:data:`ATTEMPTS`); past that, one ``RuntimeError`` says how many
workers the scheduler removed, when, and which passes noticed (:func:`corevector.chunked.source.phase`).  A
lost scheduler takes every block and future with it: the pass stops at once with a ``RuntimeError`` saying so,
rather than after the client's wait for a reconnection."""
from __future__ import annotations

import collections
import threading
import time
import uuid

import numpy as np

from .detect import distributed_client, is_zarr, require_dask
from .local_source import array_bounds, read_rows
from .row_slots import by_block
from .source import Combined, Source, current_phase

__all__ = ["DaskSource", "dask_from_zarr", "split_rows", "ATTEMPTS", "FAN_IN", "PERSIST_SHARE", "SPLIT_SHARE",
           "TASK_BYTES", "CALL_HOOK"]

#: rows per task where a cluster's workers read a zarr store: larger, since a task costs the scheduler ~1 ms
TASK_BYTES = 16 * 2**20
#: a Dask input whose bytes are at most this share of the workers' combined memory limit is persisted on
#: them for the fit (read from its store once, not once per pass: at 10^7 x 2 a pass decoding the zarr
#: chunks cost the workers 0.4 s of the scan's 2.2 s); larger ones stay where they are, read per pass
PERSIST_SHARE = 0.25


#: a Dask input's blocks of more than SPLIT_SHARE x TASK_BYTES (as float64) are cut, for the fit, into near-equal
#: blocks of about TASK_BYTES (:func:`split_rows`).  Dask's own ``chunks='auto'`` makes blocks of up to 128 MB
#: (its ``array.chunk-size``): at 10^7 x 2 two of them, of 8,388,608 and 1,611,392 rows, so a scan's two tasks
#: left one worker idle for most of the scan, and on the local scheduler the caller held a 128 MB block.  A
#: from_zarr block's pieces each read their own rows of the store (Dask fuses the slice into the read)
SPLIT_SHARE = 2

#: blocks' results combined per task of the tree that reduces a scan on the workers
FAN_IN = 8


def split_rows(chunks, d, nbytes=None):
    """The row chunks of a Dask array's blocks with every block over SPLIT_SHARE x ``nbytes`` (TASK_BYTES, as
    float64 rows of d columns) cut into near-equal parts of about ``nbytes``; None when no block is cut."""
    target = max(1, (nbytes or TASK_BYTES) // (8 * max(d, 1)))
    out, cut = [], False
    for rows in chunks:
        rows = int(rows)
        if rows > SPLIT_SHARE * target:
            k = -(-rows // target)
            out += [rows // k + (1 if i < rows % k else 0) for i in range(k)]
            cut = True
        else:
            out.append(rows)
    return tuple(out) if cut else None


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


#: None, or ``CALL_HOOK(source, phase, event, attempt)``, called under ``source.lock`` as each of a source's
#: calls on the cluster starts an attempt (``event`` 'attempt') and as it ends ('end'): tests choose the
#: moment they kill a worker by it (``source.running``, ``source.calls``: the calls of each phase running, made)
CALL_HOOK = None


def _removed_workers(client, since):
    """[(address, time)] of the workers the scheduler removed unexpectedly since the time ``since`` (its
    'remove-worker' events), or None when the scheduler does not say."""
    def removed(dask_scheduler, since):  # runs on the scheduler (shipped by value: no corevector needed there)
        # (the client's get_events fails on these events: they hold sets of task keys)
        return [(str(msg.get("worker")), float(t)) for t, msg in dask_scheduler.get_events("all")
                if isinstance(msg, dict) and msg.get("action") == "remove-worker" and not msg.get("expected")
                and t >= since]
    try:
        return client.run_on_scheduler(removed, since=since)
    except Exception:  # noqa: BLE001 -- no events (an old scheduler, a lost connection): the count is unknown
        return None


class DaskSource(Source):
    """A Dask array: every block computed where its data are (persisted partitions, or chunks read from
    their store by the worker), on a distributed client when one runs, else on the local scheduler."""

    def __init__(self, darr):
        require_dask()
        if darr.ndim == 2 and darr.numblocks[1] > 1:
            darr = darr.rechunk({1: -1})
        rows = split_rows(darr.chunks[0], darr.shape[1] if darr.ndim == 2 else 1)
        if rows is not None:  # (Dask's own large blocks: parts of about TASK_BYTES, see SPLIT_SHARE)
            darr = darr.rechunk({0: rows})
        self.darr = darr
        self.shape = tuple(int(s) for s in darr.shape)
        self.dtype = np.dtype(darr.dtype)
        self.bounds = np.r_[0, np.cumsum(darr.chunks[0])].astype(np.int64)
        self.blocks = darr.to_delayed().ravel() if darr.ndim == 2 else darr.to_delayed()
        self.is_dask = True
        self._refs = []
        # the calls of each phase running and made, and the failures lost workers caused (phase, seconds in)
        self.lock = threading.Lock()
        self.running, self.calls = collections.Counter(), collections.Counter()
        self.losses = []
        self.t0 = time.time()
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
        recomputes lost blocks from their graph), then give up with a clear error (:meth:`_give_up`).  A lost
        scheduler stops it at once (:meth:`_scheduler_lost`)."""
        name = current_phase()
        with self.lock:
            self.running[name] += 1
            self.calls[name] += 1
        try:
            for attempt in range(ATTEMPTS):
                if CALL_HOOK is not None:
                    with self.lock:
                        CALL_HOOK(self, name, "attempt", attempt)
                try:
                    return run()
                except Exception as exc:  # noqa: BLE001 -- only lost-worker failures are retried
                    if not _lost_workers(exc):
                        raise
                    self._scheduler_lost(name, exc)
                    self.losses.append((name, time.time() - self.t0))
                    if attempt == ATTEMPTS - 1:
                        raise self._give_up(name) from exc
                    self._scatter_again()
        finally:
            with self.lock:
                if CALL_HOOK is not None:
                    CALL_HOOK(self, name, "end", None)
                self.running[name] -= 1

    def _scatter_again(self):
        """Scatter again what lost workers held (the scattered objects whose futures are no longer there)."""
        client = self.client
        for ref in self._refs:
            if client is not None and ref.future.status != "finished":
                ref.future = client.scatter([ref.obj], hash=False)[0]

    def _scheduler_lost(self, name=None, exc=None):
        """Raise the error of a lost scheduler if the client has lost its connection (it waits for a scheduler
        to come back; one that does has forgotten every block and future).  Also before the calls that are not
        retried (scatters, stashes): a call to a lost scheduler would wait for the connection's timeout."""
        client = self.client
        if client is None or client.status == "running":
            return
        name = name or current_phase()
        address = getattr(getattr(client, "scheduler", None), "address", None) or "?"
        raise RuntimeError(f"the Dask client lost its scheduler ({address}) during the {name}, "
                           f"{time.time() - self.t0:.1f} s from the start of the fit or prediction: the "
                           f"scheduler held its blocks and tasks, so the {name} cannot finish; start the "
                           "scheduler again and run it again") from exc

    def _give_up(self, name):
        """The RuntimeError of a pass that lost workers :data:`ATTEMPTS` times: how many workers the
        scheduler removed and when, and the passes that noticed."""
        removed = _removed_workers(self.client, self.t0) if self.client is not None else None
        noticed = ", ".join(f"the {p} at {t:.1f} s" for p, t in self.losses)
        if removed:
            n = len(removed)
            what = (f"lost {n} worker{'s' if n > 1 else ''} ("
                    + ", ".join(f"{addr} at {t - self.t0:.1f} s" for addr, t in removed) + ")")
        else:
            what = "lost workers (the scheduler did not say which)"
        return RuntimeError(f"the Dask cluster {what}; the failures they caused were noticed by {noticed} "
                            f"(seconds from the start of the fit or prediction), and the {name} failed "
                            f"{ATTEMPTS} times in a row (corevector.chunked.dask_source.ATTEMPTS), so it "
                            "cannot finish")

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
        self._scheduler_lost()
        refs = [_Ref(o, f) for o, f in zip(objs, client.scatter(list(objs), hash=False, direct=self._direct()))]
        self._refs.extend(refs)
        return refs

    def _shared(self, shared):
        import dask
        client = self.client
        if client is not None:  # sent once to every worker, whatever the number of blocks
            self._scheduler_lost()
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


class _ZarrRows:
    """A zarr array as ``dask_from_zarr``'s tasks read it: rows whose chunk fails to decode raise one
    DamagedStoreError naming the store, the array and the rows (``local_source.read_rows``), on the worker."""

    def __init__(self, arr):
        self.arr, self.shape, self.dtype, self.ndim = arr, arr.shape, arr.dtype, arr.ndim

    def __getitem__(self, key):
        rows = key[0] if isinstance(key, tuple) else key
        if not (isinstance(rows, slice) and rows.step in (None, 1)):
            return self.arr[key]
        lo, hi, _ = rows.indices(int(self.shape[0]))
        block = read_rows(self.arr, lo, hi)
        return block[(slice(None),) + tuple(key[1:])] if isinstance(key, tuple) else block


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
    from dask.base import tokenize
    chunks = (rows,) + tuple(X.shape[1:])
    # (da.from_zarr's tasks, reading through _ZarrRows)
    return da.from_array(_ZarrRows(X), chunks=chunks, name="from-zarr-" + tokenize(X, chunks), asarray=True,
                         inline_array=False)
