"""How a one-vs-one fit runs its pairs (:func:`pair_workers`): in threads, in forked processes, or one after
another -- the policy; :func:`corevector.parallel.tasks.run_tasks` carries it out."""
from __future__ import annotations

import contextlib

from .. import chunked
from . import forked

__all__ = ["pair_workers", "blas_once", "PAIR_THREADS_MIN_WORK", "PAIR_PROCESSES_MIN_WORK"]

#: one-vs-one pairs run one per thread from this many rows x features a pair: Fashion-MNIST's 10 classes
#: (12,000 rows x 784 a pair at 60,000; 9.4e6) run two at once; the digits and letter sets (pairs of
#: 400-1,500 rows x 16-64: below 1e5), whose pairs are mostly Python, do not
PAIR_THREADS_MIN_WORK = 1_000_000
#: smaller pairs run in forked processes (corevector.parallel.forked) from this many rows x features over all
#: pairs ((classes - 1) m d for balanced classes), below it one after another: a fork and the results'
#: pipe cost 30-45 ms.  Measured, idle, 2 processes against 1 thread (medians of 3 fresh processes, wall /
#: CPU s): letter (5.6e6) 0.73 / 1.36 against 1.18 / 1.18; optdigits (2.2e6) 0.16 / 0.30 against 0.16 /
#: 0.16, no gain for twice the CPU; pendigits (1.1e6) 0.16 against 0.15-0.22, within the noise
PAIR_PROCESSES_MIN_WORK = 4_000_000


def pair_workers(X, n_classes, n_pairs, impl, verbose=False):
    """(threads, processes): how many one-vs-one pairs run at once (:func:`corevector.parallel.tasks.run_tasks`),
    as many as this thread's OpenMP threads, each pair on one thread.  In threads where the pairs are large
    enough for the engine's kernel work to dominate them (mean pair rows x features >=
    PAIR_THREADS_MIN_WORK); in forked processes where they are smaller, mostly the driver's Python, which the
    GIL would serialise, and there is enough of them (all pairs' rows x features >= PAIR_PROCESSES_MIN_WORK);
    else (1, 1), one pair after another, each with every thread."""
    if impl != "fast" or n_pairs < 2 or isinstance(X, chunked.ChunkedRows):
        return 1, 1
    pair_work = 2.0 * X.shape[0] / n_classes * X.shape[1]
    in_threads = pair_work >= PAIR_THREADS_MIN_WORK
    if not in_threads and (verbose or pair_work * n_pairs < PAIR_PROCESSES_MIN_WORK):
        return 1, 1  # (verbose: the progress bars of forked children would interleave)
    from fastimpl._openmp import openmp_threads
    k = max(1, min(openmp_threads(), n_pairs))
    if in_threads:
        return k, 1
    return 1, (min(k, forked.free_cores()) if k > 1 else 1)  # (no fork onto a core another process holds)


def blas_once(impl):
    """BLAS single-threaded around all the pairs of a fast fit: each pair's engine asks for it too, and the
    outermost request is the only one that calls threadpoolctl (fastimpl._openmp)."""
    if impl != "fast":
        return contextlib.nullcontext()
    from fastimpl._openmp import blas_single_threaded
    return blas_single_threaded()
