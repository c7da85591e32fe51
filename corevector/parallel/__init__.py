"""Independent fits run side by side: one-vs-one pairs, the folds of Platt's cross-validation, MMDA's
one-vs-all problems.

Where the work starts: :func:`~corevector.parallel.tasks.run_tasks`, which runs a list of such fits as tasks
on a running ``dask.distributed`` client, in threads of this process, in forked processes
(:mod:`~corevector.parallel.forked`), or one after another -- the results are the same either way.
:mod:`~corevector.parallel.pairs` is the policy of a one-vs-one fit: which of those its pairs take.

(A single fit's own parallelism -- OpenMP in its scans, a chunked fit's scans on a cluster's workers -- is
the engine's and :mod:`corevector.chunked`'s.)
"""
from .tasks import run_tasks, submits_tasks

__all__ = ["run_tasks", "submits_tasks"]
