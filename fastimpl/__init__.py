"""fastimpl: the compiled (Cython) numerics of corevector.

The extensions ``_engine`` (``FastMEBOps``: the core-set loop's numerics), ``_mmda``
(``FastConstrainedOps``) and ``_ssvr`` (``FastSSVROps``) implement the interfaces of :mod:`refimpl`'s
NumPy numerics with the same results.  Users do not import this package: the estimators of
:mod:`corevector` reach it through :func:`corevector.numerics.numerics` when ``impl='fast'`` (default).

Fork safety: GNU OpenMP (libgomp) keeps the threads of its last parallel region in a pool that a
``fork`` does not copy, so a forked child that enters a parallel region waits for them for ever (a
``multiprocessing`` 'fork' pool, or joblib's 'multiprocessing' backend, after a fit in the parent).
Importing this package registers an ``os.register_at_fork`` handler that sets every loaded libgomp to
one thread in the child: fits in forked children run serially (same results) instead of hanging.
'spawn'/'forkserver' children and joblib's default 'loky' backend start fresh processes and keep
their threads.
"""
import os as _os

from ._openmp import spin_count_while_loading as _spin_count_while_loading

with _spin_count_while_loading():  # (first: bounds OpenMP spin-waiting before libgomp loads)
    from . import _engine  # noqa: F401  (links libgomp: its constructor reads the environment now)

#: True in a process forked from one that imported fastimpl (read by SparseSVR, whose OpenMP regions
#: name their thread count explicitly and so are not limited by omp_set_num_threads)
IN_FORKED_CHILD = False


def _after_fork_in_child():
    """One OpenMP thread for every libgomp of a forked child (see the module docstring)."""
    global IN_FORKED_CHILD
    IN_FORKED_CHILD = True
    try:
        from threadpoolctl import ThreadpoolController
        for lib in ThreadpoolController().select(user_api="openmp").lib_controllers:
            if getattr(lib, "prefix", "") == "libgomp":
                lib.set_num_threads(1)
    except Exception:  # pragma: no cover - never let a fork fail because of this
        pass


if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_after_fork_in_child)

# the thread controls' list of loaded libraries, taken once as the engine loads (threadpoolctl resolves the path
# of every loaded library: 8-30 ms, which the first fit of a process paid, a third of a small regression fit's)
from ._openmp import _controller as _thread_controller  # noqa: E402

_thread_controller()
