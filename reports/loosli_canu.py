"""The Loosli-Canu experiment ("Comments on the Core Vector Machines", JMLR 2007), re-measured here.

4 x 4 checkerboard at the paper's kernel width gamma = 1/beta (beta = mean squared pairwise
distance, ``gamma='beta'``), C in {1e2, 1e4, 1e6}:

* the paper's stopping rule (``stop='radius'``) with eps swept from 1e-2 to 1e-10;
* the margin-relative rule (``stop='margin'``, the default, at the papers' eps = 1e-6) and LIBSVM's
  maximal-violating-pair rule (``stop='gap'``, eps = 1e-3);
* scikit-learn's SVC (LIBSVM, L1 loss) at tol = 1e-3, the KKT tolerance that ``stop='gap'`` with
  eps = 1e-3 matches.

Reported per fit: time, core-set size, #SV, test error (10,000 test points), certified ratio
(r_cert/R)^2 and the certified KKT gap (max_{alpha>0} g - min g) / (2 rho) over all points (see
``refimpl.meb.STOPS``).  A second table compares the core-set QP solvers on a large core set.
Every fit runs in a fresh process with a time limit; a fit that hits it is reported as such.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from . import style
from .common import Context, ExperimentResult, FitJob, experiment, measure_fit, progress, to_markdown, with_columns

CS = [1e2, 1e4, 1e6]
CS_MODE = {"tiny": [1e6], "quick": CS, "full": CS}
RADIUS_EPS = {"tiny": [1e-6], "quick": [1e-2, 1e-6, 1e-10],
              "full": [1e-2, 1e-4, 1e-6, 1e-8, 1e-10]}
SIZES = {"tiny": [300], "quick": [2000], "full": [10_000]}
TIMEOUT = {"tiny": 60, "quick": 30, "full": 900}
N_TEST = 10_000
#: solver comparison (table 2): a setting whose core set exceeds 2,000 vectors under stop='margin'
SOLVER_SETTING = {"tiny": (300, 1e2), "quick": (3000, 1e4), "full": (10_000, 1e4)}
#: the solver table's time limit: in quick mode SMO on this core set passes 30 s (and 60 s at m = 2,000),
#: so 5 s shows the gap to the active set (about 1 s) without spending the quick job's 30 s on it
SOLVER_TIMEOUT = {"tiny": 60, "quick": 5, "full": 900}
#: table 3, at scale: C = 1e6 as m grows.  The margin rule's eps trades accuracy for core-set size: at
#: this width eps <= 0.7 tracks the exact L2-SVM (support growing with m), eps >= 0.8 stops too early
#: (1-3% error); eps = 0.74 gave 0.25-0.34% error in 1.05-1.35 s at m = 1e6 over 4 seeds.  The eps
#: guard (eps < sqrt(3) - 1 ~ 0.732 under stop='margin', corevector._validation.EPS_MAX) rejects
#: 0.74; the largest eps it allows, 0.73, is on the exact side: 0.05-0.09% error with 1,539-1,788 core
#: vectors and 7-12 s CPU at m = 1e6 over 4 seeds (load 8-10).
SCALE_SIZES = {"tiny": [1000], "quick": [10_000, 30_000], "full": [10_000, 100_000, 1_000_000]}
SCALE_C = 1e6
SCALE_RULES = [("radius", 1e-6), ("margin", 0.73), ("margin", 1e-6)]
#: the exact-converging margin rule is not run above this m (its core set grows with m)
SCALE_EXACT_MAX = {"tiny": 1000, "quick": 10_000, "full": 100_000}


def _prepare(kind, m, C, stop, eps, solver, seed):
    from refimpl.datasets import checkerboard
    X, y = checkerboard(int(m), random_state=seed)
    Xt, yt = checkerboard(N_TEST, random_state=10_000 + seed)
    return kind, C, stop, eps, solver, seed, X, y, Xt, yt


def _fit(data):
    kind, C, stop, eps, solver, seed, X, y, _, _ = data
    if kind == "svc":
        from sklearn.svm import SVC

        from refimpl.kernels import beta_heuristic
        return SVC(C=C, gamma=1.0 / beta_heuristic(X), tol=eps, cache_size=1000).fit(X, y)
    from corevector import CVMClassifier
    return CVMClassifier(C=C, gamma="beta", eps=eps, stop=stop, solver=solver, random_state=seed).fit(X, y)


def _evaluate(model, data):
    *_, Xt, yt = data
    core = getattr(model, "core_set_", None)
    return dict(test_error=1.0 - float(model.score(Xt, yt)), n_sv=int(len(model.support_)),
                core_set_size=int(len(core)) if core is not None else np.nan,
                certified_ratio=float(getattr(model, "certified_ratio_", np.nan)),
                kkt_gap=float(getattr(model, "kkt_gap_", np.nan)),
                n_iter=int(np.sum(getattr(model, "n_iter_", -1))),
                kernel_evaluations=float(np.sum(getattr(model, "kernel_evaluations_", np.nan))))


JOB = FitJob(_prepare, _fit, _evaluate)


def _measure(ctx, kind, m, C, stop, eps, solver="auto", timeout=None):
    res = measure_fit(JOB, kind, m, C, stop, eps, solver, ctx.seed, trace_memory=False,
                      timeout=TIMEOUT[ctx.mode] if timeout is None else timeout)
    label = "SVC (LIBSVM)" if kind == "svc" else f"CVM stop={stop}"
    return dict(method=label, stop=stop if kind != "svc" else "libsvm", solver=solver, m=int(m), C=C, eps=eps, **res)


@experiment("loosli_canu", "Loosli-Canu: stopping rules vs. accuracy at the paper's kernel width", sizes=SIZES)
def run(ctx: Context) -> ExperimentResult:
    m = ctx.sizes[0]
    cs = CS_MODE[ctx.mode]
    tasks = [("cvm", C, "radius", e) for C in cs for e in RADIUS_EPS[ctx.mode]]
    tasks += [("cvm", C, "margin", 1e-6) for C in cs] + [("cvm", C, "gap", 1e-3) for C in cs]
    tasks += [("svc", C, "svc", 1e-3) for C in cs]
    rows = [_measure(ctx, kind, m, C, stop, eps) for kind, C, stop, eps in progress(tasks, "loosli_canu", ctx.progress)]
    df = _frame(rows)
    df.to_csv(ctx.out / "loosli_canu.csv", index=False)

    m_s, C_s = SOLVER_SETTING[ctx.mode]
    srows = [_measure(ctx, "cvm", m_s, C_s, "margin", 1e-6, solver, timeout=SOLVER_TIMEOUT[ctx.mode])
             for solver in ("active_set", "smo")]
    sdf = _frame(srows)
    sdf.to_csv(ctx.out / "loosli_canu_solvers.csv", index=False)

    scale_rows = []
    for m_ in SCALE_SIZES[ctx.mode]:
        for stop, eps in SCALE_RULES:
            if stop == "margin" and eps < 0.1 and m_ > SCALE_EXACT_MAX[ctx.mode]:
                continue
            scale_rows.append(_measure(ctx, "cvm", m_, SCALE_C, stop, eps))
    scdf = _frame(scale_rows)
    scdf.to_csv(ctx.out / "loosli_canu_scale.csv", index=False)

    table = _table(df)
    stable = _table(sdf, solver=True)
    sctable = _table(scdf, scale=True)
    notes = "".join(f"\n- {r.method} m={r.m} C={r.C:g} eps={r.eps:g} solver={r.solver}: {r.error}"
                    for r in pd.concat([df, sdf, scdf]).itertuples() if isinstance(r.error, str))
    summary = (f"Checkerboard, m = {m:,}, gamma = 1/beta, {N_TEST:,} test points, 59-point sampling.\n\n" + table
               + f"\n\nCore-set QP solvers under stop='margin' (m = {m_s:,}, C = {C_s:g}, gamma = 1/beta):\n\n" + stable
               + f"\n\nAt scale (C = {SCALE_C:g}, gamma = 1/beta): the radius rule, the margin rule at eps = 0.73 "
               "and the exact-converging margin rule at eps = 1e-6:\n\n" + sctable)
    with open(ctx.out / "loosli_canu.md", "w") as f:
        f.write("# Loosli-Canu experiment\n\n" + __doc__.split("\n\n", 1)[1] + "\n\n" + summary + "\n"
                + (("\nFits that failed or hit the time limit:" + notes + "\n") if notes else ""))
    figures = plot(df, ctx.out / "loosli_canu.png", m)
    return ExperimentResult(outputs=["loosli_canu.csv", "loosli_canu_solvers.csv", "loosli_canu_scale.csv",
                                     "loosli_canu.md", *figures],
                            summary_md=summary, notes=notes)


def _frame(rows):
    return with_columns(pd.DataFrame(rows), ("fit_time", "test_error", "n_sv", "core_set_size", "certified_ratio",
                                             "kkt_gap", "n_iter", "kernel_evaluations", "error"))


def _table(df, solver=False, scale=False):
    cols = ["method"] + (["solver"] if solver else []) + (["m"] if scale else []) + ["C", "eps", "fit_time",
                                                                                      "core_set_size", "n_sv",
                                                          "test_error", "certified_ratio", "kkt_gap"]
    if solver:
        cols.append("kernel_evaluations")
    show = df[cols].copy()
    show["certified_ratio"] = show["certified_ratio"] - 1.0
    # a fit stopped by the time limit shows the limit; the others their time, to 3 significant digits
    show["fit_time"] = [f"> {e.split('after ')[-1]} (limit)" if isinstance(e, str) and "timeout" in e
                        else ("failed" if isinstance(e, str) else f"{t:.3g}")
                        for t, e in zip(df["fit_time"], df["error"])]
    show = show.rename(columns={"fit_time": "fit time (s)", "core_set_size": "core set", "n_sv": "#SV",
                                "test_error": "test error", "certified_ratio": "cert. ratio - 1",
                                "kkt_gap": "KKT gap", "kernel_evaluations": "kernel evaluations"})
    return to_markdown(show, floatfmt=".3g")


#: the other stop rules, drawn as levels across the panel (line style, the marker at their right end)
RULE_STYLES = {"margin": ("margin (ε = 1e-6)", "--", "<"), "gap": ("gap (ε = 1e-3)", ":", ">"),
               "libsvm": ("SVC tol = 1e-3", "-.", "v")}


@style.styled
def plot(df, path, m):
    """Test error, fit time and core-set size against the radius rule's eps (colour: C); the margin and gap
    rules and SVC as levels of the same colour.  Returns the file names."""
    ok = df[df["error"].isna()]
    fig, axes = style.figure(1, 3, legend_rows=3)
    cs = sorted(set(ok["C"]))
    for i, C in enumerate(cs):
        st = style.category_style(CS.index(C) if C in CS else i)
        r = ok[(ok["C"] == C) & (ok["stop"] == "radius")]
        lo, hi = style.range_columns(r, "fit_time")
        style.series(axes[0, 0], r["eps"], r["test_error"].clip(lower=1e-4), f"radius, C = {style.power(C)}", st)
        style.series(axes[0, 1], r["eps"], r["fit_time"], f"radius, C = {style.power(C)}", st, lo=lo, hi=hi)
        style.series(axes[0, 2], r["eps"], r["core_set_size"], f"radius, C = {style.power(C)}", st)
    xs = np.array(sorted(set(ok.loc[ok["stop"] == "radius", "eps"]))) if (ok["stop"] == "radius").any() else \
        np.array([1e-6, 1e-2])
    x_ends = [xs.min(), xs.max()] if len(xs) > 1 else [xs[0] / 10, xs[0] * 10]
    for i, C in enumerate(cs):
        color = style.category_style(CS.index(C) if C in CS else i).color
        for stop, (lab, ls, marker) in RULE_STYLES.items():
            s = ok[(ok["C"] == C) & (ok["stop"] == stop)]
            if not len(s):
                continue
            for ax, col in ((axes[0, 0], "test_error"), (axes[0, 1], "fit_time")):
                v = max(float(s[col].iloc[0]), 1e-4)
                ax.plot(x_ends, [v, v], color=color, ls=ls, marker=marker, markevery=[0], label=f"{lab}, C = {style.power(C)}")
    for ax, lab in zip(axes[0], ("test error", "fit time (s)", "core-set size")):
        style.log_axis(ax)
        ax.set_xlabel("ε of stop='radius'")
        ax.set_ylabel(lab)
        ax.invert_xaxis()
    style.legend(fig, ncol=4)
    fig.suptitle(f"Checkerboard m = {m:,}, γ = 1/β: the radius rule against ε, and the margin and gap rules")
    return style.save(fig, path)
