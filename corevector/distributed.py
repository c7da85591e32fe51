"""Independent fits as separate tasks on a running ``dask.distributed`` client (issue 24).

One-vs-one pairs and the folds of Platt's cross-validation are independent core-set fits: when a
distributed client is running (``distributed.Client(...)`` in the caller), :func:`run_tasks` submits each as
a task, with the arguments they share (the training rows) scattered once, and gathers the results in their
order; otherwise, on a worker already (no nested tasks), or for chunked inputs (whose fits already run their
scans beside the data), they run one after another here, as before.  The results are the same either way:
every task gets the seed it would have had in the loop.
"""
from __future__ import annotations

import contextlib

import corevector.chunked as chunked

__all__ = ["run_tasks"]


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


def run_tasks(fn, tasks, shared=(), each=None):
    """``[fn(*shared, *args) for args in tasks]``, as separate tasks on a running distributed client when
    there is more than one (see the module docstring).  ``each(args)``: a context each call runs in here
    (e.g. the collection of its warnings); tasks on workers leave their warnings in the workers' logs."""
    tasks = [tuple(t) for t in tasks]
    client = chunked.distributed_client()
    if client is None or len(tasks) < 2 or _on_worker() or any(chunked.needs_chunked(a) for a in shared):
        out = []
        for args in tasks:
            with (each(args) if each is not None else contextlib.nullcontext()):
                out.append(fn(*shared, *args))
        return out
    big = client.scatter(list(shared), broadcast=False, hash=False) if shared else []
    futures = [client.submit(fn, *big, *args, pure=False) for args in tasks]
    return client.gather(futures)
