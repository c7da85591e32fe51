"""The core-set engine at scale: the cost of a new core vector, and the cases where the papers' loop is slow.

Two parts, each fit in fresh processes (median of ``common.REPEATS`` runs, CPU and wall time):

* **Seconds per added core vector against core-set size** (``engine_per_cv.png``): the default engine
  (``solver='auto'``: every violator of a sample joins at once, the core-set QP solved to a fraction of
  the outer gap, one kernel row per new core vector kept in an LRU cache) beside the papers' loop
  (``solver='smo'``: one core vector per iteration, the QP re-solved to its final tolerance), read from
  ``history_`` on the two overlapping Gaussians and on the dense checkerboard (C = 100).
* **The cases** (``engine_cases.csv`` / ``.md``): the checkerboards at two widths, the dense checkerboard,
  the overlapping Gaussians, sparse rows stored dense, Fashion-MNIST T-shirt vs shirt, CVR on Friedman #1
  and the real sets, each with the defaults (``new``), the papers' loop at tight settings
  (``papers``: solver='smo', stop='margin', eps = 1e-6, gamma = 1/beta, the papers' width) where the case is about defaults,
  and the baselines (scikit-learn's SVC/SVR, i.e. LIBSVM, and Nystroem(500) + RidgeCV for CVR).  Fits that
  pass the time limit are reported so.

Sizes follow the mode: ``tiny`` (the test suite) and ``quick`` run scaled-down cases; ``full`` runs the
cases' own sizes (m = 1e6 checkerboards, 200k Gaussians, Friedman 100k), which takes an hour or more.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from . import style
from .common import Context, ExperimentResult, FitJob, experiment, measure_fit, progress, to_markdown, with_columns

#: the papers' settings (the library's defaults before the default engine), run through the papers' loop
PAPERS = dict(solver="smo", stop="margin", eps=1e-6, gamma="beta", n_confirm=30)
#: seconds per fit: a fit past it is reported as "timeout" (quick: a first look, so 30 s bounds every fit)
TIMEOUT = {"tiny": 120, "quick": 30, "full": 600}
N_TEST = 10_000


# ------------------------------------------------------------------------------------------------
# data
# ------------------------------------------------------------------------------------------------
def gaussians(m, random_state=0):
    """Two overlapping Gaussians (:func:`refimpl.datasets.overlapping_gaussians`)."""
    from refimpl.datasets import overlapping_gaussians
    return overlapping_gaussians(m, random_state)


def sparse_rows(m, d=5000, density=0.01, random_state=0):
    """Random sparse rows stored dense (the 500 x 5,000 case below): nonnegative entries at rate
    ``density``; rows of class 1 also switch on each of the first 100 features with probability 0.1, so
    the classes are separable by a kernel machine but not by a glance at one feature."""
    import scipy.sparse as sp

    rng = np.random.default_rng(random_state)
    y = rng.integers(0, 2, size=m)
    X = sp.random(m, d, density=density, random_state=rng, format="csr").toarray()
    extra = (rng.random((m, 100)) < 0.1) * rng.random((m, 100))
    X[:, :100] += extra * y[:, None]
    return X, y


def _real(name, m_max, seed, task):
    """A packaged real set: 70/30 stratified split, standardised on the training part; 'ovr' keeps the
    first class against the rest."""
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    from refimpl.datasets import load_dataset
    X, y = load_dataset(name)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=seed, stratify=y)
    if m_max is not None and len(Xtr) > m_max:
        Xtr, ytr = Xtr[:m_max], ytr[:m_max]
    sc = StandardScaler().fit(Xtr)
    Xtr, Xte = sc.transform(Xtr), sc.transform(Xte)
    if task == "ovr":
        c0 = np.unique(y)[0]
        ytr, yte = (ytr == c0).astype(int), (yte == c0).astype(int)
    return Xtr, ytr, Xte, yte


def _fashion(m, seed):
    """Fashion-MNIST T-shirt/top (0) against shirt (6): the first m training images, the test split's."""
    from refimpl.datasets import load_dataset

    from .mmda import ensure_fashion_mnist
    if not ensure_fashion_mnist():
        raise RuntimeError("Fashion-MNIST is not available (Debian package dataset-fashion-mnist)")
    X, y = load_dataset("fashion_mnist")
    tr, te = np.arange(60_000), np.arange(60_000, 70_000)
    tr, te = tr[np.isin(y[tr], [0, 6])][:m], te[np.isin(y[te], [0, 6])]
    return X[tr], y[tr], X[te], y[te]


def make_data(case, m, seed):
    """(X, y, X_test, y_test) of a case (see :data:`CASES`)."""
    from refimpl.datasets import checkerboard, friedman
    data = CASES[case]["data"]
    if data == "checkerboard":
        X, y = checkerboard(m, random_state=seed)
        return (X, y) + checkerboard(N_TEST, random_state=10_000 + seed)
    if data == "gaussians":
        return gaussians(m, seed) + gaussians(N_TEST, 10_000 + seed)
    if data == "sparse":
        X, y = sparse_rows(m + 1000, random_state=seed)
        return X[:m], y[:m], X[m:], y[m:]
    if data == "friedman":
        X, y = friedman(m, 1, random_state=seed)
        return (X, y) + friedman(5000, 1, random_state=10_000 + seed)
    if data == "fashion_mnist":
        return _fashion(m, seed)
    name, task = data.split(":")
    return _real(name, m, seed, task)


# ------------------------------------------------------------------------------------------------
# the cases: data, size per mode, CVM parameters of the case, variants and baselines
# ------------------------------------------------------------------------------------------------
def _cb(m_full, m_quick, m_tiny, **params):
    return dict(data="checkerboard", m={"full": m_full, "quick": m_quick, "tiny": m_tiny}, params=params)


#: quick mode only: the papers' loop (one core vector per iteration) at a smaller m than the defaults, so
#: that it finishes within the time limit and still shows its slope; full mode runs every variant at the case's m
#: (at m = 1e4 the papers' loop under stop='margin' passed 30 s on both checkerboards, load 8-10)
_PAPERS_QUICK = {"quick": {"papers": 3_000, "smo": 10_000}}


CASES = {
    "checkerboard gamma=1 C=1e4 eps=1e-6": dict(_cb(1_000_000, 100_000, None, gamma=1.0, C=1e4, eps=1e-6),
                                               variants=("new", "papers"), baselines=(), m_variant=_PAPERS_QUICK),
    "checkerboard gamma=1 C=1e4 eps=1e-6 stop=radius": dict(
        _cb(1_000_000, 100_000, None, gamma=1.0, C=1e4, eps=1e-6, stop="radius"), variants=("new", "smo"),
        baselines=(), m_variant=_PAPERS_QUICK),
    # quick: the papers' loop passes 120 s here even at m = 1,000, so its row only needs to say
    # "timeout": a 5 s limit says it without spending the quick job's 30 s on it
    "checkerboard gamma=1/beta C=1e6": dict(_cb(1_000_000, 100_000, None, gamma="beta", C=1e6),
                                            variants=("new", "papers"), baselines=(), m_variant=_PAPERS_QUICK,
                                            timeout={"quick": {"papers": 5}}),
    "dense checkerboard gamma=1 C=100 stop=radius": dict(
        _cb(1_000_000, 30_000, 5_000, gamma=1.0, C=100.0, eps=1e-6, stop="radius"), variants=("new", "smo"),
        baselines=()),
    "overlapping Gaussians": dict(data="gaussians", m={"full": [4_000, 20_000, 200_000], "quick": [4_000],
                                                     "tiny": [2_000]},
                                  params={}, variants=("new", "papers"), baselines=("svc",),
                                  m_variant={"quick": {"papers": 2_000}}),
    "sparse rows stored dense, 5,000 features": dict(data="sparse", m={"full": 500, "quick": 500, "tiny": 200},
                                                     params={}, variants=("new", "papers"), baselines=("svc",)),
    "Fashion-MNIST T-shirt vs shirt": dict(data="fashion_mnist", m={"full": 10_000, "quick": 2_000, "tiny": None},
                                           params={}, variants=("new",), baselines=("svc",)),
    "CVR() defaults, Friedman #1": dict(data="friedman", m={"full": 30_000, "quick": 5_000, "tiny": 2_000},
                                        params={}, variants=("new", "papers"), baselines=("svr", "nystroem"),
                                        papers=dict(C=1000.0, mu=0.1)),
    # SVR at 100k needs ~40 min (2,355 s, RMSE 1.020: docs/design.md); reports/cvr.py measures it in its full mode
    # (quick: not run; at 1e4 its margin variant passed the 30 s limit, load 8-10, and at 3,000 it was a copy of
    # the case above, its Nystroem fit 2-7 CPU seconds)
    "CVR Friedman #1, 100k": dict(data="friedman", m={"full": 100_000, "quick": 0, "tiny": None},
                                  params={}, variants=("new", "margin"), baselines=("nystroem",)),
}
#: (quick: optdigits, letter and magic; satimage and pendigits, sets of the same kind and size, in full mode)
for _name in ("optdigits", "satimage", "pendigits", "letter", "magic"):
    for _task in (("ovr", "multi") if _name != "magic" else ("binary",)):
        CASES[f"{_name} {_task}"] = dict(data=f"{_name}:{_task}",
                                         m={"full": None,
                                            "quick": {"letter": 5_000, "satimage": 0, "pendigits": 0}.get(_name),
                                            "tiny": 500 if _name == "optdigits" else None},
                                         params={}, variants=("new",), baselines=("svc",))


def _sizes(case, mode):
    """The case's sizes in ``mode`` (None: the whole set, except in the tiny mode; 0: not run)."""
    m = CASES[case]["m"][mode]
    if (m is None and mode == "tiny") or m == 0:
        return []
    return m if isinstance(m, list) else [m]


def _variant_m(case, m, variant, mode):
    """The m a variant runs at: the case's m, capped for the variants listed in its ``m_variant[mode]``."""
    cap = CASES[case].get("m_variant", {}).get(mode, {}).get(variant)
    return m if cap is None or m is None else min(m, cap)


# ------------------------------------------------------------------------------------------------
# the fit job (module-level functions: the child process unpickles them)
# ------------------------------------------------------------------------------------------------
def _prepare(case, m, variant, seed):
    data = (case, variant, seed) + tuple(make_data(case, m, seed))
    _estimator(case, variant, seed, data[3])  # imports the estimator's modules here, not inside the timed fit
    return data


def _estimator(case, variant, seed, X):
    c = CASES[case]
    if variant == "svc":
        from sklearn.svm import SVC
        params = {k: v for k, v in c["params"].items() if k in ("C",)}
        if c["params"].get("gamma") is not None:
            from refimpl.kernels import beta_heuristic
            g = c["params"]["gamma"]
            params["gamma"] = 1.0 / beta_heuristic(X) if g == "beta" else g
        return SVC(**params, cache_size=1000)
    if variant == "svr":
        from sklearn.svm import SVR
        return SVR(C=10.0, epsilon=0.5, cache_size=1000)
    if variant == "nystroem":
        from sklearn.kernel_approximation import Nystroem
        from sklearn.linear_model import RidgeCV
        from sklearn.pipeline import make_pipeline

        from refimpl.kernels import beta_heuristic
        return make_pipeline(Nystroem(n_components=500, gamma=1.0 / beta_heuristic(X), random_state=seed),
                             RidgeCV(alphas=np.logspace(-6, 2, 9)))
    params = dict(c["params"])
    if variant == "papers":
        params = {**PAPERS, **c.get("papers", {}), **{k: v for k, v in params.items() if k in ("C", "gamma")}}
    elif variant == "margin":
        params["stop"] = "margin"
    elif variant == "smo":
        params["solver"] = "smo"
    if c["data"] == "friedman":
        from corevector import CVR
        if variant == "papers":  # the paper's (C, mu) of 000 eq. (6), raw targets
            C, mu = params.pop("C"), params.pop("mu")
            return CVR.from_paper(C, mu, X.shape[0], random_state=seed, **params)
        return CVR(random_state=seed, **params)
    from corevector import CVMClassifier
    return CVMClassifier(random_state=seed, **params)


def _fit(data):
    case, variant, seed, X, y, _, _ = data
    return _estimator(case, variant, seed, X).fit(X, y)


def _evaluate(model, data):
    case, variant, seed, X, y, Xt, yt = data
    out = dict(m=len(X), d=X.shape[1])
    if CASES[case]["data"] == "friedman":
        out["test_rmse"] = float(np.sqrt(np.mean((model.predict(Xt) - yt) ** 2)))
    else:
        out["test_accuracy"] = 100.0 * float(np.mean(model.predict(Xt) == yt))
    core = getattr(model, "core_set_", None)
    out["core_set_size"] = int(len(core)) if core is not None else np.nan
    sv = getattr(model, "support_", None)
    out["n_sv"] = int(len(sv)) if sv is not None else np.nan
    out["n_iter"] = int(np.sum(getattr(model, "n_iter_", -1)))
    hist = getattr(model, "history_", None)
    if isinstance(hist, dict) and "elapsed" in hist:  # binary models: the per-iteration trace
        out["trace_core_set"] = list(map(int, hist["core_set_size"]))
        out["trace_elapsed"] = list(map(float, hist["elapsed"]))
    return out


JOB = FitJob(_prepare, _fit, _evaluate)


def _measure(ctx, case, m, variant):
    timeout = CASES[case].get("timeout", {}).get(ctx.mode, {}).get(variant, TIMEOUT[ctx.mode])
    res = measure_fit(JOB, case, m, variant, ctx.seed, trace_memory=False, timeout=timeout)
    return dict(case=case, variant=variant, m_requested=m, **res)


# ------------------------------------------------------------------------------------------------
# seconds per added core vector
# ------------------------------------------------------------------------------------------------
#: (the Gaussians at 4k: at 20k the papers' loop passes the full mode's 600 s limit and leaves no curve;
#: quick mode runs the papers' loop at the smaller m of the case's ``m_variant``)
PER_CV = {"overlapping Gaussians": {"tiny": 2_000, "quick": 4_000, "full": 4_000},
          "dense checkerboard gamma=1 C=100 stop=radius": {"tiny": 5_000, "quick": 30_000, "full": 1_000_000}}


def per_cv_curve(core_set, elapsed, n_bins=12):
    """Seconds per added core vector in log-spaced bins of core-set size: (size, s/CV) pairs, the
    slope of elapsed time against core-set size within each bin."""
    cs, t = np.asarray(core_set, float), np.asarray(elapsed, float)
    if len(cs) < 3 or cs[-1] <= cs[0]:
        return np.zeros(0), np.zeros(0)
    edges = np.unique(np.geomspace(max(cs[0], 1.0), cs[-1], n_bins + 1))
    sizes, rates = [], []
    for lo, hi in zip(edges[:-1], edges[1:]):
        i, j = np.searchsorted(cs, lo), np.searchsorted(cs, hi, side="right") - 1
        if j > i and cs[j] > cs[i]:
            sizes.append(np.sqrt(cs[i] * cs[j]))
            rates.append((t[j] - t[i]) / (cs[j] - cs[i]))
    return np.array(sizes), np.array(rates)


@style.styled
def plot_per_cv(rows, path):
    """Seconds per added core vector against the core-set size, a panel per case of :data:`PER_CV`.
    Returns the file names."""
    fig, axes = style.figure(1, len(PER_CV), legend_rows=2)
    labels = {"new": "default engine (solver='auto')", "papers": "papers' loop (solver='smo')",
              "smo": "papers' loop (solver='smo')"}
    for ax, case in zip(axes[0], PER_CV):
        sizes = []
        for r in rows:
            if r["case"] != case or "trace_core_set" not in r:
                continue
            s, v = per_cv_curve(r["trace_core_set"], r["trace_elapsed"])
            label = labels[r["variant"]]
            style.series(ax, s, v, label)
            who = "default" if r["variant"] == "new" else "papers' loop"
            sizes.append(f"{who} m = {r['m']:,}")
        if ax.has_data():
            style.log_axis(ax)
        ax.set_xlabel("core-set size")
        ax.set_ylabel("seconds per added core vector")
        ax.set_title(case + ("\n" + ", ".join(sizes) if sizes else ""))
    style.legend(fig, ncol=2)
    return style.save(fig, path)


COLUMNS = ["case", "variant", "m", "fit_time", "fit_cpu_time", "fit_time_min", "fit_time_max", "test_accuracy",
           "test_rmse", "core_set_size", "n_sv", "n_iter", "n_runs", "error"]


@experiment("engine", "Core-set engine at scale: seconds per core vector, and the cases where the papers' loop is slow",
            sizes={"tiny": [1], "quick": [1], "full": [1]})
def run(ctx: Context) -> ExperimentResult:
    tasks = [(case, _variant_m(case, m, v, ctx.mode), v) for case, c in CASES.items() for m in _sizes(case, ctx.mode)
             for v in c["variants"] + c["baselines"]]
    tasks = list(dict.fromkeys(tasks))  # a capped variant may repeat a size
    # the per-core-vector traces: the same cases at the sizes of PER_CV (reused when already in tasks)
    for case, sizes in PER_CV.items():
        for v in CASES[case]["variants"]:
            task = (case, _variant_m(case, sizes[ctx.mode], v, ctx.mode), v)
            if task not in tasks:
                tasks.append(task)
    rows = []
    for case, m, v in progress(tasks, "engine", ctx.progress):
        rows.append(_measure(ctx, case, m, v))
        # row by row, so that an interrupted full run keeps what it measured
        pd.DataFrame([{k: x for k, x in r.items() if not k.startswith("trace_")} for r in rows]).to_csv(
            ctx.out / "engine_partial.csv", index=False)
    traces = [r for r in rows if r["case"] in PER_CV
              and r["m_requested"] == _variant_m(r["case"], PER_CV[r["case"]][ctx.mode], r["variant"], ctx.mode)]
    figures = plot_per_cv(traces, ctx.out / "engine_per_cv.png")
    df = with_columns(pd.DataFrame([{k: v for k, v in r.items() if not k.startswith("trace_")} for r in rows]),
                      COLUMNS)
    df["m"] = df["m"].fillna(df["m_requested"])
    df.to_csv(ctx.out / "engine_cases.csv", index=False)
    table = to_markdown(df[COLUMNS].rename(columns={"fit_time": "wall_s", "fit_cpu_time": "cpu_s"}), floatfmt=".4g")
    import os
    load = os.getloadavg()
    summary = (f"new = the defaults; papers = solver='smo', stop='margin', eps=1e-6, gamma=1/beta (the papers' "
               f"loop at tight settings; CVR with C = 1000, mu = 0.1); smo = the case's settings with solver='smo'; "
               f"margin = the defaults with stop='margin'.  Times are medians over fresh "
               f"processes (wall and CPU seconds); load average at the end: {load[0]:.2f}, {load[1]:.2f}, "
               f"{load[2]:.2f}.\n\n" + table + "\n\n![seconds per core vector](engine_per_cv.png)")
    with open(ctx.out / "engine.md", "w") as f:
        f.write("# Core-set engine at scale\n\n" + __doc__.split("\n\n", 1)[1] + "\n\n" + summary + "\n")
    return ExperimentResult(outputs=["engine_cases.csv", "engine.md", *figures], summary_md=summary)
