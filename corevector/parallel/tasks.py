"""Independent fits as separate tasks: on a running ``dask.distributed`` client, in threads, or in forked processes.

One-vs-one pairs, the folds of Platt's cross-validation and MMDA's one-vs-all problems are independent
core-set fits: when a distributed client is running (``distributed.Client(...)`` in the caller),
:func:`run_tasks` submits each as a task, with the arguments they share (the training rows) scattered once,
and gathers the results in their order; otherwise, on a worker already (no nested tasks), or for chunked
inputs (whose fits already run their scans beside the data), they run one after another here, as before.
The results are the same either way: every task gets the seed it would have had in the loop.
"""
from __future__ import annotations

import contextlib

from .. import chunked
from . import forked

__all__ = ["run_tasks", "submits_tasks"]


def _on_worker() -> bool:
    import sys
    mod = sys.modules.get("distributed")
    if mod is None:
        return False
    try:
        mod.get_worker()
        return True
    except ValueError:
        return False


def submits_tasks(n_tasks, shared=()) -> bool:
    """Whether :func:`run_tasks` sends ``n_tasks`` tasks sharing ``shared`` to a distributed client's workers
    (else it runs them here): a client is running, there is more than one task, this is not a worker
    already, and no shared input is chunked."""
    return (n_tasks > 1 and chunked.distributed_client() is not None and not _on_worker()
            and not any(chunked.needs_chunked(a) for a in shared))


def run_tasks(fn, tasks, shared=(), each=None, threads=1, processes=1):
    """``[fn(*shared, *args) for args in tasks]``, as separate tasks on a running distributed client when
    there is more than one (see the module docstring).  ``each(args)``: a context each call runs in here
    (e.g. the collection of its warnings); tasks on workers leave their warnings in the workers' logs.
    Without a client, ``threads`` > 1 runs that many tasks at once in threads of this process, each with one
    OpenMP thread (:func:`_in_threads`), and ``processes`` > 1 in this process and forked children
    (:func:`corevector.parallel.forked.in_processes`, where the platform can fork)."""
    tasks = [tuple(t) for t in tasks]
    if not submits_tasks(len(tasks), shared):
        local = len(tasks) > 1 and not any(chunked.needs_chunked(a) for a in shared)
        if threads > 1 and local:
            return _in_threads(fn, tasks, shared, each, threads)
        if processes > 1 and local:
            if forked.can_fork():
                return forked.in_processes(fn, tasks, shared, each, min(processes, len(tasks)))
        out = []
        for args in tasks:
            with (each(args) if each is not None else contextlib.nullcontext()):
                out.append(fn(*shared, *args))
        return out
    client = chunked.distributed_client()
    big = client.scatter(list(shared), broadcast=False, hash=False) if shared else []
    futures = [client.submit(fn, *big, *args, pure=False) for args in tasks]
    return client.gather(futures)


def _in_threads(fn, tasks, shared, each, threads):
    """The tasks ``threads`` at a time, each in a thread of its own with one OpenMP thread (the per-thread
    setting of libgomp, through threadpoolctl) and BLAS single-threaded for all of them: the engine releases
    the GIL in its kernel work, so two fits keep two cores busy where one fit with two threads leaves one
    idle through its serial parts (its QP, the driver).  Each task's result is what it computes alone."""
    from concurrent.futures import ThreadPoolExecutor

    from fastimpl._openmp import blas_single_threaded, openmp_single_threaded

    def one(args):
        with openmp_single_threaded():  # (threadpool_limits would list the loaded libraries again: 8 ms a pair)
            with (each(args) if each is not None else contextlib.nullcontext()):
                return fn(*shared, *args)
    with blas_single_threaded(), ThreadPoolExecutor(max_workers=threads, thread_name_prefix="corevector-fit") as pool:
        return list(pool.map(one, tasks))
