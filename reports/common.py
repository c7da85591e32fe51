"""Shared machinery of the report generator: the experiment registry, isolated measurements, info.

Adding an experiment
--------------------
Write a function ``f(ctx) -> ExperimentResult`` in a module of this package and register it::

    @experiment("cvr", "CVR on the Friedman data", sizes={"tiny": [...], "quick": [...], "full": [...]})
    def cvr(ctx):
        rows = [measure_fit(...) for m in ctx.sizes]
        ...
        return ExperimentResult(outputs=["cvr.csv", "cvr.png"], summary_md=table)

in a module of this package: ``reports/run.py`` imports every module of it (``EXPERIMENT_MODULES`` only
fixes the order of the first ones).  ``ctx.sizes`` is the list for
the chosen mode, ``ctx.out`` the output folder, ``ctx.mode`` one of 'tiny', 'quick', 'full'.
"""
from __future__ import annotations

import gc
import multiprocessing as mp
import os
import platform
import resource
import sys
import time
import traceback
import tracemalloc
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

MODES = ("tiny", "quick", "full")


@dataclass
class Experiment:
    name: str
    title: str
    func: Callable
    sizes: dict = field(default_factory=dict)


@dataclass
class Context:
    out: Path
    mode: str
    sizes: list
    seed: int = 0
    progress: bool = True


@dataclass
class ExperimentResult:
    outputs: list            # file names (relative to the output folder)
    summary_md: str = ""     # markdown pasted into REPORT.md under the experiment's title
    notes: str = ""
    #: the papers' headline claims this experiment re-measures, for REPORT.md's opening table:
    #: dicts with 'claim' (the paper's, with its source), 'ours' (what we measured) and 'holds' (True, False,
    #: or None: not measured at the claim's scale in this mode)
    headline: list = field(default_factory=list)


#: name -> Experiment, in registration order
REGISTRY: dict[str, Experiment] = {}


def experiment(name, title, sizes=None):
    """Decorator registering ``func(ctx) -> ExperimentResult`` as a report experiment."""
    def deco(func):
        REGISTRY[name] = Experiment(name, title, func, dict(sizes or {}))
        return func
    return deco


# ----------------------------------------------------------------------------------------------
# measurements
# ----------------------------------------------------------------------------------------------
def _maxrss_bytes():
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r if sys.platform == "darwin" else r * 1024  # Linux reports KiB, macOS bytes


def _proc_status_bytes(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    raise OSError(key)


def _fit_memory_start():
    """(baseline bytes, reader of the peak after the fit).  On Linux the resident high-water mark is reset
    first (/proc/self/clear_refs), so the delta is the fit's own peak even when preparing the data peaked
    higher (ru_maxrss can only grow: a data set built through a dense or COO intermediate hid the fit
    behind its own peak); elsewhere ru_maxrss before and after."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _proc_status_bytes("VmRSS:"), lambda: _proc_status_bytes("VmHWM:")
    except OSError:
        return _maxrss_bytes(), _maxrss_bytes


def _children_cpu():
    """CPU seconds of this process's children that have ended (a fit that forks waits for its children)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _child(queue, job, args, trace):
    try:
        prepared = job.prepare(*args)
        gc.collect()
        rss0, peak_rss = _fit_memory_start()
        t0 = time.perf_counter()
        cpu0 = time.process_time() + _children_cpu()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = job.fit(prepared)
        wall = time.perf_counter() - t0
        cpu = time.process_time() + _children_cpu() - cpu0  # (a fit's forked children: corevector.parallel.forked)
        rss1 = peak_rss()
        msgs = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
        out = dict(fit_time=wall, fit_cpu_time=cpu, maxrss_delta_mb=(rss1 - rss0) / 2**20,
                   n_warnings=len(caught), warnings=" | ".join(msgs))
        out.update(job.evaluate(model, prepared))
        if trace:
            # a second, traced fit: tracemalloc sees numpy's allocations but not the engine's malloc
            # and slows pure-Python code, so it is kept out of the timed run
            tracemalloc.start()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                job.fit(prepared)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            out["tracemalloc_peak_mb"] = peak / 2**20
        queue.put(("ok", out))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        queue.put(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"))


class FitJob:
    """What :func:`measure_fit` runs in a child process.  Subclass or pass callables.

    prepare(*args) -> data (not timed), fit(data) -> model (timed), evaluate(model, data) -> dict
    (not timed; keys ending in ``_time`` are timings it makes itself and are summarised over the
    runs like the fit's).  All three must be picklable (module-level functions): the child is a
    fresh process (see :func:`_process_context`).
    """

    def __init__(self, prepare, fit, evaluate):
        self.prepare, self.fit, self.evaluate = prepare, fit, evaluate


#: fresh processes per measurement (at least 3): every timing is their median, with _min and _max
REPEATS = 3
#: the repeats of the running report mode when it overrides REPEATS (reports.run sets 1 for --quick, a
#: first look, and for --tiny, the test suite's smoke run of the pipeline); None: REPEATS
MODE_REPEATS = None
#: result columns summarised over the runs (median under the plain name, plus _min and _max):
#: every key ending in ``_time`` (fit, CPU, predict, render, ... times) and these
SUMMARISED = ("maxrss_delta_mb",)


def _summarise_runs(runs):
    """One result from several runs of the same job: the first run's values (evaluation results,
    warnings, the traced memory peak), and for every timing the median over the runs under its own
    name, the extremes under ``<name>_min`` and ``<name>_max``; ``n_runs`` counts the runs."""
    out = dict(runs[0])
    for key, value in runs[0].items():
        if not (key.endswith("_time") or key in SUMMARISED):
            continue
        vals = [r.get(key) for r in runs]
        if not all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) for v in vals):
            continue
        vals = [float(v) for v in vals]
        out[key] = float(np.median(vals))
        out[f"{key}_min"], out[f"{key}_max"] = min(vals), max(vals)
    out["n_runs"] = len(runs)
    return out


def measure_fit(job: FitJob, *args, trace_memory=True, timeout=None, repeats=None):
    """Run one fit in ``repeats`` fresh processes (forked from a clean fork server) and return its measurements.

    Every run prepares its data, then times ``job.fit`` alone (no evaluation callback inside the
    timer), then evaluates the model.  Timings (``fit_time``, ``fit_cpu_time`` and any ``*_time``
    the evaluation reports) are the median over the runs, with ``<name>_min`` / ``<name>_max``;
    the other values come from the first run (see :func:`_summarise_runs`).

    The child's resident high-water mark is reset after the data are prepared (Linux; elsewhere
    ru_maxrss is read before) and read after the fit, so ``maxrss_delta_mb`` is the extra resident
    memory the fit needed on top of its data (all
    allocations, including the compiled engine's malloc); ``tracemalloc_peak_mb`` is the peak of
    Python/numpy allocations in a second, traced fit of the first run (``trace_memory``; skip it
    for pure-Python code, which tracemalloc slows several-fold).  Warnings raised by the timed fit
    are counted in ``n_warnings`` and listed in ``warnings``.  A failure (or a run beyond
    ``timeout`` seconds) ends the measurement: ``{'error': ...}``.
    """
    if repeats is None:
        repeats = MODE_REPEATS or REPEATS
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    runs = []
    for i in range(repeats):
        res = _measure_once(job, args, trace_memory and i == 0, timeout)
        if "error" in res:
            return res
        runs.append(res)
    return _summarise_runs(runs)


#: modules the fork server imports once, so that each measured child starts with them loaded (a spawned
#: interpreter spent 1.5-2 s of CPU and up to 10 s of wall time at load 9 importing them, per fit).  Never
#: fastimpl: its at-fork handler sets a forked child's OpenMP to one thread, and nothing that runs an
#: OpenMP parallel region may run in the server (GNU OpenMP hangs in a child forked after one)
FORKSERVER_PRELOAD = ["numpy", "scipy.linalg", "scipy.sparse", "sklearn.base", "sklearn.svm", "sklearn.utils",
                      "pandas", "reports.common"]


def _process_context():
    """Where measured fits run: children of a fork server that has imported :data:`FORKSERVER_PRELOAD`
    and nothing of corevector (each child is a fresh process that has run no fit, imports fastimpl
    itself and keeps its OpenMP threads); 'spawn' where there is no fork server (Windows).  Not plain
    'fork': GNU OpenMP, used by the compiled engine, hangs in a child forked once the parent has run a
    parallel region."""
    try:
        ctx = mp.get_context("forkserver")
    except ValueError:  # pragma: no cover - platforms without fork
        return mp.get_context("spawn")
    ctx.set_forkserver_preload(FORKSERVER_PRELOAD)
    return ctx


def _measure_once(job, args, trace_memory, timeout):
    """One fresh process: prepare, the timed fit, evaluate (see :func:`measure_fit`)."""
    ctx = _process_context()
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q, job, args, trace_memory))
    p.start()
    import queue as _queue

    deadline = None if timeout is None else time.monotonic() + timeout
    status, payload = None, None
    while status is None:
        try:
            status, payload = q.get(timeout=1.0)
        except _queue.Empty:
            if not p.is_alive():  # the child died without reporting (e.g. killed): don't wait for the timeout
                try:
                    status, payload = q.get(timeout=1.0)
                except _queue.Empty:
                    status, payload = "error", f"fit process exited with code {p.exitcode} without a result"
            elif deadline is not None and time.monotonic() > deadline:
                status, payload = "error", f"timeout after {timeout} s"
    p.join(5)
    if p.is_alive():
        p.terminate()
        p.join()
    return payload if status == "ok" else {"error": payload.splitlines()[0] if payload else "failed"}


# ----------------------------------------------------------------------------------------------
# environment description
# ----------------------------------------------------------------------------------------------
def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info():
    import numpy
    import scipy
    import sklearn

    from corevector._version import __version__ as cv_version
    try:
        from importlib.metadata import version
        cv_dist = version("corevector")
    except Exception:  # noqa: BLE001 -- a checkout on sys.path, not installed
        cv_dist = None
    try:
        n_affinity = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        n_affinity = None
    return {
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu": _cpu_name(),
        "cpu_count": os.cpu_count(),
        "usable_cpus": n_affinity,
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__,
        "corevector": cv_version + (f" (installed dist {cv_dist})" if cv_dist and cv_dist != cv_version else ""),
    }


def with_columns(df, columns):
    """df with every one of ``columns`` present (NaN where no fit reported it, e.g. all failed), so
    that tables and plots can select them whatever happened; returns df."""
    for col in columns:
        if col not in df:
            df[col] = float("nan")
    return df


def to_markdown(df, floatfmt=".4g"):
    """DataFrame -> markdown table (pandas' to_markdown needs tabulate; fall back to a plain writer)."""
    try:
        return df.to_markdown(index=False, floatfmt=floatfmt)
    except ImportError:
        cols = list(df.columns)

        def fmt(v):
            if isinstance(v, float):
                return "" if v != v else format(v, floatfmt)
            return str(v)
        lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "|".join("---" for _ in cols) + "|"]
        lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
        return "\n".join(lines)


def progress(iterable, desc, enabled=True, total=None):
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        return iterable
    return tqdm(iterable, desc=desc, total=total, disable=not enabled, file=sys.stderr, leave=True)
