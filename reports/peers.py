"""CVMClassifier() beside the SVM trainers a user can install: scikit-learn's SVC (LIBSVM),
scikit-learn-intelex's SVC (oneDAL) and ThunderSVM's CPU build, idle and with one core busy.

Every estimator fits the same training set with the same C and the same gamma, a number (scikit-learn's
``'scale'`` value, 1 / (d Var X), computed once on the training set, or the case's own width), in fresh
processes (``common.measure_fit``: median of ``common.REPEATS``; each estimator's modules imported before
the timed fit), with 1 and 2 threads: OpenMP and BLAS
limited by threadpoolctl, oneDAL by ``daal4py.daalinit``, ThunderSVM by ``n_jobs`` (LIBSVM is serial).
Columns: wall and CPU seconds of ``fit``, test accuracy, support vectors, the fit's extra peak resident
memory, the load average at the start of the measurement.  ``busy`` runs the same fits while another
process, pinned to the last core at normal priority, spins (``while True: pass``): the reproducible load
of a laptop or a CI runner.  ``cvm_papers`` is the papers' loop (``solver='smo'``, ``stop='radius'``, the
rest default), measured beside the default engine.  Where a peer is not installed (no wheel for the
platform), its rows say so and the report goes on.

Modes: ``tiny`` (the test suite) fits optdigits one-vs-rest at 500 points, idle only; ``quick`` runs three
cases at a smaller size (Fashion-MNIST T-shirt/top against shirt at 2,000 training images, d = 784; the
checkerboard at 10,000, d = 2; optdigits' ten classes, a real multi-class set), each fit once, and only the
fits the targets read (``QUICK_FITS``: every trainer idle, at 2 threads where it has them; CVM also idle at 1
thread, and at 1 and 2 threads with a core busy); ``full`` runs every case at the full sizes, every trainer at
1 and 2 threads, idle and busy, every fit the median of 3.
``COREVECTOR_PEERS_CASES`` (comma-separated case names) restricts a run to some cases.

The targets are checked on the medians (``peers_targets.md``): on Fashion-MNIST, CVM's wall
time <= 0.5 x sklearnex's at accuracy >= SVC's - 0.5 pp; on the other sets, <= 0.5 x the fastest
peer within 0.5 pp of SVC; with a core busy, 2 threads <= 1.1 x 1 thread; idle, the CPU time of 2 threads
<= 1.3 x that of 1 thread.
"""
from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
import time

import numpy as np
import pandas as pd

from .common import Context, ExperimentResult, FitJob, experiment, measure_fit, progress, to_markdown, with_columns

ESTIMATORS = ("cvm", "cvm_papers", "svc", "sklearnex", "thundersvm")
PEERS = ("svc", "sklearnex", "thundersvm")
#: the importable module behind each peer (a missing one is reported, not fatal)
MODULES = {"sklearnex": "sklearnex", "thundersvm": "thundersvm"}
#: seconds per fit, past which the row says "timeout" (quick: 10 s; every other fit of the quick cases takes under
#: 3 s, and ThunderSVM's two threads, 1.7 s on optdigits' ten classes on the idle machine, passed 30 s there and on
#: Fashion-MNIST at load 3-5 and 120 s at load 4-5)
TIMEOUT = {"tiny": 120, "quick": 10, "full": 900}
#: quick mode: the (estimator, threads) measured per load, the ones the targets read: every trainer idle at 2
#: threads (LIBSVM at 1: it is serial), CVM also idle at 1 thread (the CPU target) and at 1 and 2 threads with a
#: core busy (the busy target).  The other modes measure every trainer at 1 and 2 threads per load.
QUICK_FITS = {"idle": {("cvm", 1), ("cvm", 2), ("cvm_papers", 2), ("svc", 1), ("sklearnex", 2), ("thundersvm", 2)},
              "busy": {("cvm", 1), ("cvm", 2)}}

#: case -> data (reports.engine.make_data's cases, or 'fashion10'), sizes per mode, C and gamma (None:
#: scikit-learn's 'scale' value as a number), the CVM parameters of the case
CASES = {
    "Fashion-MNIST T-shirt/top vs shirt": dict(data="Fashion-MNIST T-shirt vs shirt",
                                               m={"full": 10_000, "quick": 2_000}),
    # quick mode (the default main job) keeps three cases: every peer beside CVM on d = 784, d = 2 and a
    # real multi-class set, in about a minute; the rest of the sets run in full mode
    "Fashion-MNIST 10 classes": dict(data="fashion10", m={"full": 60_000, "quick": 0}),
    "overlapping Gaussians": dict(data="overlapping Gaussians", m={"full": [20_000, 200_000], "quick": 0}),
    # (quick: 10,000; at 20,000 ThunderSVM's fit took 10 CPU seconds, 16 s at load 7)
    "checkerboard gamma=1 C=1e4": dict(data="checkerboard gamma=1 C=1e4 eps=1e-6", m={"full": 100_000, "quick": 10_000},
                                       C=1e4, gamma=1.0, cvm=dict(eps=1e-6)),
}
for _name in ("optdigits", "satimage", "pendigits", "letter"):
    for _task in ("ovr", "multi"):
        # None: the whole training split; 0: the case does not run in that mode
        CASES[f"{_name} {_task}"] = dict(data=f"{_name} {_task}",
                                         m={"full": None,
                                            "quick": None if (_name, _task) == ("optdigits", "multi") else 0,
                                            "tiny": 500 if (_name, _task) == ("optdigits", "ovr") else 0})


def _sizes(case, mode):
    m = CASES[case]["m"].get(mode, 0)
    if m == 0:
        return []
    return m if isinstance(m, list) else [m]


# ------------------------------------------------------------------------------------------------
# the fit job (module level: the child process unpickles it)
# ------------------------------------------------------------------------------------------------
def _fashion10(m):
    """Fashion-MNIST, 10 classes: the first m of the 60,000 training images, the official 10,000 test ones."""
    from refimpl.datasets import load_dataset

    from .mmda import ensure_fashion_mnist
    if not ensure_fashion_mnist():
        raise RuntimeError("Fashion-MNIST is not available (Debian package dataset-fashion-mnist)")
    X, y = load_dataset("fashion_mnist")
    return X[:m], y[:m], X[60_000:], y[60_000:]


def _data(case, m, seed):
    c = CASES[case]
    if c["data"] == "fashion10":
        return _fashion10(m)
    from .engine import make_data
    return make_data(c["data"], m, seed)


def _prepare(case, m, estimator, threads, seed):
    # before fastimpl is imported in this fresh process: its libgomp reads the thread count when it loads
    os.environ["OMP_NUM_THREADS"] = str(threads)
    X, y, Xt, yt = _data(case, m, seed)
    if estimator == "thundersvm" and not np.issubdtype(np.asarray(y).dtype, np.number):
        # ThunderSVM takes numeric labels only (letter's are 'A'..'Z'): the same classes as codes, outside
        # the timed fit
        classes = np.unique(y)
        y, yt = np.searchsorted(classes, y).astype(np.float64), np.searchsorted(classes, yt).astype(np.float64)
    g = CASES[case].get("gamma")
    gamma = float(g) if g is not None else 1.0 / (X.shape[1] * X.var())
    d = dict(case=case, estimator=estimator, threads=threads, seed=seed, C=float(CASES[case].get("C", 1.0)),
             gamma=gamma, X=X, y=y, Xt=Xt, yt=yt)
    # every estimator's modules imported (and oneDAL's threads set) before the timed fit: the first import
    # of corevector or sklearnex costs 0.1-0.5 s, more than a small fit
    _make(d)
    # the threads of OpenMP and BLAS limited here, outside the timed fit, for the rest of this fresh process:
    # threadpool_limits lists the loaded libraries first, 20-50 ms that the fits of the small real sets
    # (0.13-0.3 s) were charged with
    from threadpoolctl import threadpool_limits
    d["limits"] = threadpool_limits(limits=threads)
    return d


def _make(d):
    est, C, g, t = d["estimator"], d["C"], d["gamma"], d["threads"]
    if est in ("cvm", "cvm_papers"):
        from corevector import CVMClassifier
        extra = dict(CASES[d["case"]].get("cvm", {}))
        if est == "cvm_papers":
            extra.update(solver="smo", stop="radius")
        return CVMClassifier(C=C, gamma=g, random_state=d["seed"], **extra)
    if est == "svc":
        from sklearn.svm import SVC
        return SVC(C=C, gamma=g, cache_size=1000)
    if est == "sklearnex":
        try:  # oneDAL's thread count (threadpoolctl does not reach its TBB pool)
            import daal4py
            daal4py.daalinit(t)
        except ImportError:  # pragma: no cover - daal4py ships with scikit-learn-intelex
            pass
        from sklearnex.svm import SVC
        return SVC(C=C, gamma=g, cache_size=1000)
    from thundersvm import SVC
    return SVC(C=C, gamma=g, n_jobs=t)


def _fit(d):
    return _make(d).fit(d["X"], d["y"])  # (with the thread limits _prepare set)


def _evaluate(model, d):
    n_sv = getattr(model, "support_", None)
    return dict(m=len(d["X"]), d=d["X"].shape[1], gamma=d["gamma"], C=d["C"],
                test_accuracy=float(np.mean(model.predict(d["Xt"]) == d["yt"])),  # a fraction, as in checkerboard.csv
                n_sv=int(len(n_sv)) if n_sv is not None else np.nan)


JOB = FitJob(_prepare, _fit, _evaluate)


# ------------------------------------------------------------------------------------------------
# the busy core, the measurements, the targets
# ------------------------------------------------------------------------------------------------
class BusyCore:
    """A process spinning at normal priority, pinned to the last core (where the platform pins)."""

    CODE = ("import os\ntry:\n    os.sched_setaffinity(0, {%d})\nexcept (AttributeError, OSError):\n    pass\n"
            "while True:\n    pass\n")

    def __enter__(self):
        core = (os.cpu_count() or 1) - 1
        self.proc = subprocess.Popen([sys.executable, "-c", self.CODE % core])
        time.sleep(0.5)
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()


@functools.lru_cache(maxsize=None)
def _missing(estimator):
    """Why a peer cannot run here (None when it can): its module is not installed, or it is installed but
    does not import (thundersvm-cpu's wheel claims every platform and ships a Linux x86-64 library).  The
    import is tried in a fresh interpreter, so that neither a crash nor sklearnex's patches reach this one."""
    mod = MODULES.get(estimator)
    if mod is None:
        return None
    import importlib.util
    if importlib.util.find_spec(mod) is None:
        return f"not installed: {mod} (no wheel for this platform?)"
    code = f"from {mod}.svm import SVC" if mod == "sklearnex" else f"from {mod} import SVC"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or [f"exit code {r.returncode}"])[-1]
        return f"not importable: {mod} ({last})"
    return None


def _measure(ctx, case, m, est, threads, load):
    base = dict(case=case, estimator=est, threads=threads, load=load, m_requested=m,
                loadavg=round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else np.nan)
    why = _missing(est)
    if why:
        return dict(base, error=why)
    return dict(base, **measure_fit(JOB, case, m, est, threads, ctx.seed, trace_memory=False,
                                    timeout=TIMEOUT[ctx.mode]))


def _met(value, bound):
    """value <= bound, or None where the value could not be measured (a missing peer, a mode without it)."""
    return None if pd.isna(value) else bool(value <= bound)


def _targets(df):
    """One row per (case, m): the targets' ratios from the medians, and whether each target is met (None where
    a term is missing: a peer not installed, a failed fit, or the tiny mode's idle-only run)."""
    rows = []
    for (case, m_req), g in df.groupby(["case", "m_requested"], dropna=False, sort=False):
        def t(est, threads=2, load="idle", col="fit_time"):
            s = g[(g.estimator == est) & (g.threads == threads) & (g.load == load)][col]
            return float(s.iloc[0]) if len(s) and pd.notna(s.iloc[0]) else np.nan

        def peer(p, col="fit_time"):  # LIBSVM is serial: its one-thread row stands beside the others' two
            return t(p, 1 if p == "svc" else 2, "idle", col)
        svc_acc = t("svc", 1, "idle", "test_accuracy")
        # the peers that count: measured, and within 0.5 pp of SVC's accuracy
        ok = [peer(p) for p in PEERS if not (peer(p, "test_accuracy") < svc_acc - 0.005)]
        ok = [v for v in ok if np.isfinite(v)]
        fastest = min(ok) if ok else np.nan
        ref = t("sklearnex") if case.startswith("Fashion") else fastest
        m = g["m"].dropna()
        r = dict(case=case, m=int(m.iloc[0]) if len(m) else m_req, cvm_wall=t("cvm"), cvm_papers_wall=t("cvm_papers"),
                 svc_wall=peer("svc"), sklearnex_wall=t("sklearnex"), thundersvm_wall=t("thundersvm"),
                 fastest_peer_wall=fastest, ratio=t("cvm") / ref,
                 acc_minus_svc_pp=100.0 * (t("cvm", 2, "idle", "test_accuracy") - svc_acc),
                 busy_2t_over_1t=t("cvm", 2, "busy") / t("cvm", 1, "busy"),
                 idle_cpu_2t_over_1t=t("cvm", 2, "idle", "fit_cpu_time") / t("cvm", 1, "idle", "fit_cpu_time"))
        r["speed_met"] = _met(r["ratio"], 0.5)
        r["accuracy_met"] = None if pd.isna(r["acc_minus_svc_pp"]) else bool(r["acc_minus_svc_pp"] >= -0.5)
        r["busy_met"] = _met(r["busy_2t_over_1t"], 1.1)
        r["cpu_met"] = _met(r["idle_cpu_2t_over_1t"], 1.3)
        rows.append(r)
    return with_columns(pd.DataFrame(rows), TARGET_COLUMNS)


TARGET_COLUMNS = ["case", "m", "cvm_wall", "cvm_papers_wall", "svc_wall", "sklearnex_wall", "thundersvm_wall",
                  "fastest_peer_wall", "ratio", "acc_minus_svc_pp", "busy_2t_over_1t", "idle_cpu_2t_over_1t",
                  "speed_met", "accuracy_met", "busy_met", "cpu_met"]
COLUMNS = ["case", "m", "estimator", "threads", "load", "fit_time", "fit_cpu_time", "fit_time_min", "fit_time_max",
           "test_accuracy", "n_sv", "maxrss_delta_mb", "loadavg", "n_runs", "error"]


def _measure_task(ctx, case, m, load):
    """Every estimator at 1 and 2 threads (LIBSVM at 1: it is serial) on one case, size and load (quick mode:
    the fits of ``QUICK_FITS``)."""
    rows = []
    with BusyCore() if load == "busy" else contextlib.nullcontext():
        for est in ESTIMATORS:
            for threads in (1, 2):
                if est == "svc" and threads == 2:
                    continue
                if ctx.mode == "quick" and (est, threads) not in QUICK_FITS[load]:
                    continue
                rows.append(_measure(ctx, case, m, est, threads, load))
    return rows


@experiment("peers", "CVMClassifier() beside SVC, scikit-learn-intelex's SVC and ThunderSVM, idle and with a core busy",
            sizes={"tiny": [1], "quick": [1], "full": [1]})
def run(ctx: Context) -> ExperimentResult:
    only = os.environ.get("COREVECTOR_PEERS_CASES")  # a subset of CASES, comma-separated (long full runs)
    cases = [c for c in CASES if not only or c in only.split(",")]
    loads = ("idle",) if ctx.mode == "tiny" else ("idle", "busy")
    tasks = [(c, m, load) for c in cases for m in _sizes(c, ctx.mode) for load in loads]
    rows = []
    for case, m, load in progress(tasks, "peers", ctx.progress):
        rows += _measure_task(ctx, case, m, load)
        pd.DataFrame(rows).to_csv(ctx.out / "peers_partial.csv", index=False)  # an interrupted run keeps its rows
    df = with_columns(pd.DataFrame(rows), COLUMNS + ["m_requested"])
    df["m"] = df["m"].fillna(df["m_requested"])
    df.to_csv(ctx.out / "peers.csv", index=False)
    targets = _targets(df)
    targets.to_csv(ctx.out / "peers_targets.csv", index=False)
    table = to_markdown(df[COLUMNS].rename(columns={"fit_time": "wall_s", "fit_cpu_time": "cpu_s",
                                                    "maxrss_delta_mb": "peak_mb"}), floatfmt=".4g")
    summary = ("Median of fresh processes per row (wall and CPU seconds of fit, test accuracy as a fraction, the "
               "fit's extra peak resident memory in MB); 'busy': another process spins on the last core at normal "
               "priority.\n\n" + table + "\n\nTargets (ratio: CVM's wall time over sklearnex's on "
               "Fashion-MNIST, over the fastest peer within 0.5 pp of SVC elsewhere; acc_minus_svc_pp: CVM's accuracy "
               "less SVC's, in percentage points; nan or empty: not measured in this run):\n\n"
               + to_markdown(targets[TARGET_COLUMNS], floatfmt=".3g"))
    with open(ctx.out / "peers.md", "w") as f:
        f.write("# CVM beside the SVM trainers\n\n" + __doc__.split("\n\n", 1)[1] + "\n\n" + summary + "\n")
    return ExperimentResult(outputs=["peers.csv", "peers_targets.csv", "peers.md"], summary_md=summary)
