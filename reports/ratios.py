"""Approximation ratio vs. eps on small problems, against an exact solver (cvxopt).

For each formulation (two-class L2-SVM, one-class L2-SVM, MEB, and CVR's L2-SVR, whose R^2 bracket is
Property 3 of 000), kernel (Gaussian, Laplacian),
random seed and eps, both engines are run with ``sample_size=None`` (full scans, the setting of
the (1+eps)^2 guarantee of 001 Sec. 4).  Two ratios are recorded:

* certified ratio = (r_cert / R)^2, computable without the exact solution (a full scan);
* exact ratio     = r*^2 / R^2 with r* from cvxopt (:func:`refimpl.verify.exact_meb`).

The problems, the exact solve and the checks are :mod:`refimpl.verify`'s, as in ``corevector verify``.
Nothing here is timed, and at m = 200 threads only wait for each other: the fits and cvxopt's BLAS run on one
thread (on a loaded 2-core machine the spinning OpenMP and BLAS threads took this experiment from 12 to 74
CPU seconds).

Both must lie in [1, (1+eps)^2]; the exact one is the true approximation ratio.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .common import Context, ExperimentResult, experiment, progress, to_markdown

EPS_GRID = (1e-1, 1e-2, 1e-3, 1e-4)
KERNELS = ("rbf", "laplacian")
FORMS = ("two_class", "one_class", "meb", "cvr")
#: mode -> (m, number of seeds)
SIZES = {"tiny": [(60, 1)], "quick": [(200, 3)], "full": [(200, 10)]}


@experiment("ratios", "Approximation ratio vs. eps (exact solver: cvxopt)", sizes=SIZES)
def run(ctx: Context) -> ExperimentResult:
    from corevector.numerics import numerics
    from refimpl.verify import check_problem, grid_problems, make_problem

    eps_grid = EPS_GRID if ctx.mode != "tiny" else (1e-1, 1e-3)
    engines = {impl: numerics(impl).fit_meb for impl in ("fast", "ref")}
    tasks = [t for (m, n_seeds) in ctx.sizes for t in grid_problems((m,), n_seeds, KERNELS, FORMS, ctx.seed)]
    rows = []
    import cvxopt  # noqa: F401 - loaded before the limits, so that they reach its BLAS too
    from threadpoolctl import threadpool_limits
    with threadpool_limits(limits=1):
        for form, kernel, m, seed in progress(tasks, "ratios", ctx.progress):
            case = dict(formulation=form, kernel=kernel, m=m, seed=seed)
            rows.extend(check_problem(make_problem(form, m, kernel, seed), case, engines, eps_grid))
    df = pd.DataFrame(rows)
    df.to_csv(ctx.out / "ratios.csv", index=False)
    summary = (df.groupby(["formulation", "kernel", "impl", "eps"], sort=False)
                 .agg(n=("ok", "size"), max_exact_ratio=("upper_ratio", "max"),
                      max_certified_ratio=("certified_ratio", "max"), bound=("bound", "first"),
                      violations=("ok", lambda s: int((~s).sum())))
                 .reset_index())
    plot(df, ctx.out / "ratios.png")
    n_bad = int((~df["ok"]).sum())
    notes = f"{len(df)} fits, {n_bad} violation(s) of R^2 <= r*^2 <= (1+eps)^2 R^2 (relative slack 1e-7)."
    return ExperimentResult(outputs=["ratios.csv", "ratios.png"],
                            summary_md=notes + "\n\n" + to_markdown(summary, floatfmt=".9g"), notes=notes)


def plot(df, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kernels = list(dict.fromkeys(df["kernel"]))
    fig, axes = plt.subplots(1, len(kernels), figsize=(6.5 * len(kernels), 4.5), sharey=True, squeeze=False)
    eps = np.array(sorted(df["eps"].unique()))
    markers = {"two_class": "o", "one_class": "s", "meb": "^"}
    colors = {"two_class": "tab:blue", "one_class": "tab:orange", "meb": "tab:green"}
    for ax, kernel in zip(axes[0], kernels):
        d = df[df["kernel"] == kernel]
        ax.loglog(eps, (1 + eps) ** 2 - 1, "k-", lw=2, label="bound (1+eps)^2 - 1")
        for (form, impl), g in d.groupby(["formulation", "impl"], sort=False):
            agg = g.groupby("eps").max(numeric_only=True)
            fill = "full" if impl == "fast" else "none"
            style = dict(marker=markers.get(form, "o"), color=colors.get(form), fillstyle=fill,
                         ms=7 if impl == "fast" else 10)
            ax.loglog(agg.index, (agg["upper_ratio"] - 1).clip(lower=1e-12), ls="-", **style,
                      label=f"exact r*²/R² - 1, {form}, {impl}")
            ax.loglog(agg.index, (agg["certified_ratio"] - 1).clip(lower=1e-12), ls=":", alpha=0.6, **style,
                      label=f"certified - 1, {form}, {impl}")
        ax.set_title(f"{kernel} kernel, m={int(d['m'].iloc[0])}, sample_size=None (max over seeds)")
        ax.set_xlabel("eps")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("ratio - 1")
    axes[0][-1].legend(fontsize=6, loc="lower right", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
