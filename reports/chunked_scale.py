"""Defaults at any scale: ``CVMClassifier()`` on the generated Fashion-MNIST set (``corevector.infinite``, d = 784
float32, trouser against the rest) read from its zarr store, from 10^5 rows to 8·10^6 (25 GB, more than the
machine's memory), under the defaults (``stop='hybrid'``, ``eps=1e-2``, with the settle rule beyond
``SETTLE_MIN_ROWS`` rows: ``refimpl.driver.Settle``) and under the papers' rule (``PAPERS``: ``stop='radius'``,
``eps=1e-3``), each beside its test accuracy on the official test images, core set and certified ratio.

One fit per (m, rule) in a fresh process (``python -m reports.chunked_wide --one zarr M PATH --params JSON``,
after its warm-up fit on 5,000 rows), as :mod:`reports.chunked_wide` measures; the stores are that
experiment's (written once per m into ``<out>/chunked-wide``).  In the full mode the largest size is also fitted
by a 2-worker ``LocalCluster`` reading the store (``dask``).  Columns: ``rule``, ``input``, ``m``,
``fit_time`` / ``fit_cpu_time`` (caller and workers), ``load``, ``core_set``, ``n_iter``, ``settled`` (the
settle rule ended the loop), ``accuracy``, ``certified_ratio``, ``rss_growth_mb`` and ``worker_peak_mb``.
"""
from __future__ import annotations

import json

from . import style
from .chunked import medians_of
from .chunked_wide import TIMEOUT, store
from .common import Context, ExperimentResult, experiment, to_markdown

#: the papers' rule at these rows (docs/chunked.md): a flat core set (about 2,100 core vectors from 10^5 to
#: 8·10^6 rows) at some accuracy
PAPERS = {"stop": "radius", "eps": 1e-3}
RULES = {"defaults": {}, "papers": PAPERS}
#: a fit of 8·10^6 rows takes minutes to tens of minutes (the certificate's full scan alone reads 25 GB)
SCALE_TIMEOUT = {"tiny": 600, "quick": 1800, "full": 7200}
#: the full mode's largest size is also fitted by a cluster's workers reading the store
CLUSTER_KINDS = {"full": ("zarr", "dask")}
COLUMNS = ["rule", "input", "m", "fit_time", "fit_cpu_time", "load", "core_set", "n_iter", "settled", "accuracy",
           "certified_ratio", "rss_growth_mb", "worker_peak_mb"]


def _one(kind, m, path, params, timeout):
    return medians_of("reports.chunked_wide", (path, "--scan-rows", 1000, "--params", json.dumps(params)), kind, m,
                      timeout, 1, ())


@experiment("chunked_scale", "Defaults at any scale: generated Fashion-MNIST from zarr, 10^5 to 8·10^6 rows, "
            "the defaults beside the papers' rule",
            sizes={"tiny": [20_000], "quick": [20_000], "full": [100_000, 1_000_000, 8_000_000]})
def chunked_scale(ctx: Context) -> ExperimentResult:
    import pandas as pd

    from .mmda import ensure_fashion_mnist
    if not ensure_fashion_mnist():
        return ExperimentResult(outputs=[], summary_md="Fashion-MNIST is not available here (Debian package "
                                "dataset-fashion-mnist); not measured")
    rows = []
    top = max(ctx.sizes)
    for m in ctx.sizes:
        path = store(ctx.out / "chunked-wide", m)
        kinds = CLUSTER_KINDS.get(ctx.mode, ("zarr",)) if m == top else ("zarr",)
        for rule, params in RULES.items():
            for kind in kinds:
                row = _one(kind, m, path, params, max(SCALE_TIMEOUT[ctx.mode], TIMEOUT[ctx.mode]))
                rows.append(dict(rule=rule, **row))
    df = pd.DataFrame(rows)
    df.to_csv(ctx.out / "chunked_scale.csv", index=False)
    outputs = ["chunked_scale.csv"]
    files, note = plot(df, ctx.out / "chunked_scale.png", ctx.mode)
    outputs += files
    cols = [c for c in COLUMNS if c in df.columns] + (["error"] if "error" in df.columns else [])
    return ExperimentResult(outputs=outputs, summary_md=to_markdown(df[cols]), notes=note)


@style.styled
def plot(df, path, mode="full"):
    """Fit time, core set and test accuracy against m, one line per rule (zarr fits).  Returns (files, note)."""
    ok = df[df["error"].isna()] if "error" in df else df
    ok = ok[ok["input"] == "zarr"]
    if not style.enough_sizes(ok["m"], mode):
        return [], f"figure left out: {ok['m'].nunique()} size(s) of m, fewer than {style.MIN_SIZES}"
    fig, axes = style.figure(1, 3, legend_rows=1)
    panels = [("fit_time", "fit time (s)", True), ("core_set", "core vectors", True), ("accuracy", "test accuracy",
                                                                                       False)]
    for ax, (col, label, log_y) in zip(axes[0], panels):
        for i, (rule, g) in enumerate(ok.groupby("rule", sort=False)):
            name = "CVMClassifier() defaults" if rule == "defaults" else "stop='radius', eps=1e-3 (papers)"
            style.series(ax, g["m"], g[col], name, style=style.category_style(i))
        style.log_axis(ax, "both" if log_y else "x")
        ax.set_xlabel("training set size m")
        ax.set_ylabel(label)
    style.legend(fig)
    fig.suptitle("Generated Fashion-MNIST, trouser vs rest, d = 784, from zarr")
    return style.save(fig, path), ""
