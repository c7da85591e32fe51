"""Independent fits in forked processes: the one-vs-one pairs that are too small for threads.

A pair of letter (about 1,080 rows of 16 features) is a fit of a few milliseconds, and about half of it is
the core-set driver's Python: in two threads the pairs serialise on the GIL (1.34-1.45 s wall and 2.0 s of
CPU against 1.2 s one after another), in two processes they do not.  The processes are forked, not
spawned: a forked child has the training rows, the estimator and every imported module at once, where a
spawned interpreter spends about a second importing NumPy, SciPy and scikit-learn -- letter's whole fit.

What forking takes here:

* the parent works too (``processes - 1`` children); every process claims the next task from a shared
  counter, so a slow pair does not hold the others up;
* every process runs the engine with one OpenMP thread and BLAS single-threaded.  libgomp's thread pool
  does not survive a fork (a child that entered a parallel region of several threads would wait for
  threads that do not exist); a region of one thread never uses the pool;
* a child sends its results, each task's warnings and its first error through a pipe, in one message at
  its end, and leaves with ``os._exit`` (``multiprocessing``'s bootstrap: no atexit handlers; the parent
  flushes its own output buffers before forking, so that no child writes them again);
* the outcome is the serial loop's: results in the tasks' order, each task's warnings replayed inside its
  ``each`` context, and the error of the first failing task raised.  A task that no child reported (a child
  killed, or stopped by an error of a later task) is run here, in order.

Only on Linux, where ``fork`` is the default start method and the libraries the engine links are safe to
fork (macOS's system libraries are not); elsewhere the tasks run one after another.
"""
from __future__ import annotations

import contextlib
import sys
import warnings

__all__ = ["can_fork", "free_cores", "in_processes"]

#: snapshots of the other processes' runnable threads free_cores takes, FREE_CORES_GAP seconds apart (the
#: fewest counts): a busy process is runnable in all of them, a short-lived one (a kernel thread, a shell)
#: rarely is
FREE_CORES_SAMPLES, FREE_CORES_GAP = 3, 0.002


def can_fork() -> bool:
    """Whether :func:`in_processes` may fork here: Linux, ``fork`` available, and this process is not a
    daemonic one (``multiprocessing`` gives those no children: a Dask worker, or a child of ours)."""
    if not sys.platform.startswith("linux"):
        return False
    import multiprocessing
    return "fork" in multiprocessing.get_all_start_methods() and not multiprocessing.current_process().daemon


def _runnable_elsewhere():
    """Threads of other processes runnable right now: those whose state in /proc/PID/task/TID/stat is R.
    (Counted one by one: /proc/loadavg's running count less this process's runnable threads, read a moment
    apart, missed a spinning process whenever one of this process's threads woke between the two reads.)"""
    import os
    me, count = os.getpid(), 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        with contextlib.suppress(OSError):
            for tid in os.listdir(f"/proc/{pid}/task"):
                with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/stat") as f:
                    count += f.read().rpartition(")")[2].split()[0] == "R"
    return count


def free_cores() -> int:
    """The cores this process may use (its affinity) that no other process's runnable thread holds, at least
    1.  Forked pairs on a core another process keeps busy only share it, at the cost of the fork and of
    switching (letter with one core held: 1.03-1.30 s in two processes against 1.06 s in one); so they run
    one after another there."""
    import os
    import time
    cpus = len(os.sched_getaffinity(0))
    try:
        others = [_runnable_elsewhere()]
        while others[-1] > 0 and len(others) < FREE_CORES_SAMPLES:  # (none: no snapshot can show fewer)
            time.sleep(FREE_CORES_GAP)
            others.append(_runnable_elsewhere())
    except (OSError, ValueError, IndexError):  # no /proc: nothing known of the others
        return cpus
    return max(1, cpus - min(others))


@contextlib.contextmanager
def _single_threaded():
    from fastimpl._openmp import blas_single_threaded, openmp_single_threaded
    with openmp_single_threaded(), blas_single_threaded():
        yield


def _claim(counter, n):
    """The next task's index (n: none left)."""
    with counter.get_lock():
        i = counter.value
        if i < n:
            counter.value = i + 1
        return i


def _recorded(records):
    """Warnings as plain, picklable tuples (message, category, filename, lineno)."""
    return [(str(r.message), r.category, r.filename, r.lineno) for r in records]


def _child(fn, shared, tasks, counter, conn):
    """A forked child's loop (its arguments are the parent's objects, inherited through the fork, never
    pickled: the training rows are not copied)."""
    done, error = {}, None
    with _single_threaded():
        while error is None:
            i = _claim(counter, len(tasks))
            if i >= len(tasks):
                break
            with warnings.catch_warnings(record=True) as records:
                warnings.simplefilter("always")
                try:
                    done[i] = (fn(*shared, *tasks[i]), _recorded(records))
                except Exception as exc:  # noqa: BLE001 - raised again by the parent, at its place in order
                    error = (i, exc)
        if error is not None:
            with counter.get_lock():  # no one claims more: the parent runs what is left, in order
                counter.value = len(tasks)
    try:
        conn.send((done, error))
    except Exception as exc:  # noqa: BLE001 - an error that cannot be pickled is sent as text
        conn.send((done, None if error is None else (error[0], RuntimeError(f"{type(error[1]).__name__}: "
                                                                             f"{error[1]} ({exc})"))))
    conn.close()


def _start(ctx, k, *args):
    """k children running ``_child(*args, pipe)``, each with the read end of its own pipe."""
    children = []
    for _ in range(k):
        read, write = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=args + (write,), daemon=True)
        with warnings.catch_warnings():  # Python >= 3.12 warns of fork in a process with threads (OpenMP's)
            warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*fork.*")
            proc.start()
        write.close()
        children.append((proc, read))
    return children


def _collect(children):
    """{task: (result, warnings)} and the errors [(task, exception)] the children sent; a child that died
    without sending leaves its tasks to the parent."""
    done, errors = {}, []
    for proc, read in children:
        try:
            got, error = read.recv()
        except EOFError:  # the child died before it sent (killed): its tasks are missing from ``done``
            got, error = {}, None
        read.close()
        proc.join()
        done.update(got)
        if error is not None:
            errors.append(error)
    return done, errors


def in_processes(fn, tasks, shared, each, processes):
    """``[fn(*shared, *args) for args in tasks]`` in ``processes`` processes (this one and forked children),
    with the serial loop's results, warnings and errors (see the module docstring)."""
    import multiprocessing
    ctx = multiprocessing.get_context("fork")
    tasks = [tuple(t) for t in tasks]
    each = each if each is not None else (lambda args: contextlib.nullcontext())
    n = len(tasks)
    counter = ctx.Value("q", 0)
    here, failed = {}, None
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    children = []
    try:
        # single-threaded before the fork: the children inherit the limits and threadpoolctl's controller
        # (made once: listing the loaded libraries takes 8 ms, in every process that has none)
        with _single_threaded():
            children = _start(ctx, processes - 1, fn, shared, tasks, counter)
            while failed is None:
                i = _claim(counter, n)
                if i >= n:
                    break
                try:
                    with each(tasks[i]):
                        here[i] = fn(*shared, *tasks[i])
                except Exception as exc:  # noqa: BLE001 - raised below, after the tasks before it
                    failed = (i, exc)
                    with counter.get_lock():
                        counter.value = n
        done, errors = _collect(children)
    finally:
        for proc, _ in children:
            if proc.is_alive():
                proc.terminate()
                proc.join()
    errors = sorted(errors + ([failed] if failed is not None else []), key=lambda e: e[0])
    first_error = errors[0] if errors else (n, None)
    out = []
    for i, args in enumerate(tasks):
        if i == first_error[0]:
            raise first_error[1]
        if i in here:
            out.append(here[i])
            continue
        with each(args):
            if i in done:
                result, records = done[i]
                for message, category, filename, lineno in records:
                    warnings.warn_explicit(message, category, filename, lineno)
            else:  # no process reported it: run it here, in order
                with _single_threaded():
                    result = fn(*shared, *args)
        out.append(result)
    return out
