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

from . import style
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
    figures = plot(df, ctx.out / "ratios.png")
    n_bad = int((~df["ok"]).sum())
    notes = f"{len(df)} fits, {n_bad} violation(s) of R^2 <= r*^2 <= (1+eps)^2 R^2 (relative slack 1e-7)."
    headline = [dict(claim="001 Sec. 4.2 (000 Property 3 for CVR): a (1+ε)-approximate ball, R² ≤ r*² ≤ (1+ε)² R² "
                           "(full scans)",
                     ours=f"{len(df)} fits (m = {int(df['m'].max())}, ε = "
                          f"{', '.join(f'{e:g}' for e in sorted(set(df['eps'])))}),"
                          f" {n_bad} outside the bound", holds=n_bad == 0)]
    return ExperimentResult(outputs=["ratios.csv", *figures], headline=headline,
                            summary_md=notes + "\n\n" + to_markdown(summary, floatfmt=".9g"), notes=notes)


@style.styled
def plot(df, path):
    """The exact ratio (top) and the certified one (bottom) minus 1 against eps, one column per kernel: colour
    = formulation, filled circles = fast, open squares = ref, the (1+eps)^2 - 1 bound in black (max over
    seeds).  Returns the file names."""
    kernels = list(dict.fromkeys(df["kernel"]))
    forms = list(dict.fromkeys(df["formulation"]))
    fig, axes = style.figure(2, len(kernels), legend_rows=3, row_height=1.9, sharex=True, sharey=True)
    eps = np.array(sorted(df["eps"].unique()))
    for j, kernel in enumerate(kernels):
        d = df[df["kernel"] == kernel]
        for i, (col, what) in enumerate((("upper_ratio", "exact r*²/R²"), ("certified_ratio", "certified"))):
            ax = axes[i, j]
            ax.plot(eps, (1 + eps) ** 2 - 1, color=style.BLACK, lw=1.6, label="bound (1+ε)² − 1")
            for (form, impl), g in d.groupby(["formulation", "impl"], sort=False):
                agg = g.groupby("eps").max(numeric_only=True)
                c = style.CATEGORIES[forms.index(form) % len(style.CATEGORIES)]
                st = style.Style(c, "o" if impl == "fast" else "s", "-" if impl == "fast" else "--")
                style.series(ax, agg.index, (agg[col] - 1).clip(lower=1e-12), f"{form}, {impl}", st,
                             mfc=c if impl == "fast" else "none", ms=4 if impl == "fast" else 6)
            style.log_axis(ax)
            ax.set_title(f"{kernel} kernel, m = {int(d['m'].iloc[0])}: {what}")
            ax.set_ylabel(f"{what} − 1")
        axes[-1, j].set_xlabel("ε")
    style.legend(fig, ncol=5)
    return style.save(fig, path)
