"""Data beyond one machine with wide rows: the generated Fashion-MNIST set (``corevector.infinite``,
784 float32 pixels a row) fitted from memory, from its zarr store read here, and from the store read by a
LocalCluster's workers (a Dask array on a distributed client), or from a float32 ``.npy`` copy of the store
mapped into memory (``memmap``: written once beside the store, :func:`npy_copy`); ``official`` fits the 60,000
official training images in memory (``OFFICIAL_ROWS``: all 60,000 in full mode, in quick mode the first 20,000,
as many as its generated set), the reference the generated sets are read against, and ``official_zarr`` /
``official_dask`` the same images from a zarr store of the generator's layout (:func:`official_store`).
``time_ratio`` and ``cpu_ratio`` are each chunked fit's time over the in-memory fit's of the same rows (the
generated set's ``memory`` row, or ``official``): what a chunked fit costs beyond the in-memory one.

The task: one class against the rest (``CLASS``, trouser), ``CVMClassifier()`` defaults (C = 1,
gamma='scale', eps = 0.01); the store is written once per m into ``<out>/chunked-wide`` (chunks of 1,024 rows
in shards of 16,384, uncompressed: the generator's layout).  Test accuracy on the official Fashion-MNIST
test images.  Each measurement runs in a fresh process (``python -m reports.chunked_wide --one KIND M
PATH``), after a warm-up fit of the same kind on ``WARM_ROWS`` rows; the table gives medians of ``REPEATS`` in full
mode (one process per measurement in the quick and tiny modes).
Columns as in :mod:`reports.chunked`: ``fit_time`` / ``fit_cpu_time`` (caller plus workers), ``load``,
``rss_growth_mb`` (the caller's resident high-water mark during the timed fit) against ``x_mb`` (X as
float32 on disk), ``engine_mb`` (of that growth, the peak of the local engine's own working memory -- its
Q-row cache, Cholesky factor and core-set stores, bounded by ``cache_size`` whatever m is -- in a chunked
fit) and ``data_held_mb`` (the rest: the row buffer, the stashes read ahead, the scans' blocks),
``worker_peak_mb``, ``core_set``, ``accuracy``, ``certified_ratio`` and ``scan_evals_per_s``
(``decision_function`` over ``SCAN_ROWS`` training rows, per mode: rows x support vectors per second).
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from .chunked import _head, chunked_fit_stats, local_cluster, medians_of, timed_fit
from .common import Context, ExperimentResult, experiment, to_markdown

CLASS = 1
WARM_ROWS = 5_000
#: training rows of the scan-throughput pass per mode (at most m): at 100,000 rows the scan took 40 of the 60 CPU
#: seconds of a quick measurement of the memory fit (2,139 support vectors, load 6); 5,000 rows still give the
#: rate (5,000 x the support vectors, 10^7 kernel values)
SCAN_ROWS = {"tiny": 100_000, "quick": 5_000, "full": 100_000}
REPEATS = 3
KINDS = ("memory", "zarr", "dask")  # (and "memmap", run by hand: a second copy of the set on disk, and "official")
#: the official images from memory, zarr and a cluster (quick and full modes)
OFFICIAL_KINDS = ("official", "official_zarr", "official_dask")
WORKERS, WORKER_MEMORY = 2, "2GB"
TIMEOUT = {"tiny": 300, "quick": 1800, "full": 5400}
#: the official training images of the reference fit per mode (the first ones; the tiny mode has none)
OFFICIAL_ROWS = {"quick": 20_000, "full": 60_000}
COLUMNS = ["input", "m", "workers", "fit_time", "fit_cpu_time", "time_ratio", "cpu_ratio", "load", "rss_growth_mb",
           "engine_mb", "data_held_mb", "x_mb", "worker_peak_mb", "core_set", "n_iter", "accuracy", "certified_ratio",
           "scan_evals_per_s"]


def store(folder: Path, m: int) -> Path:
    """The generated set of m rows (written once)."""
    from corevector.infinite import write_zarr
    path = Path(folder) / f"fashion{m}.zarr"
    if not (path / "done").exists():
        write_zarr(path, m, seed=0)
        (path / "done").touch()
    return path


def official_store(folder: Path, m: int) -> Path:
    """The first m official training images and their labels in a zarr group of the generator's layout
    (chunks of 1,024 rows in shards of 16,384, uncompressed; written once): ``official_zarr`` and
    ``official_dask`` read it."""
    from corevector.infinite import _zarr_arrays, source_images
    path = Path(folder) / f"official{m}.zarr"
    if not (path / "done").exists():
        images, labels = source_images("train")
        _, X, y = _zarr_arrays(path, m, 1024, 16384)
        X[:] = images[:m].reshape(m, -1)
        y[:] = labels[:m]
        (path / "done").touch()
    return path


def with_ratios(df):
    """``time_ratio`` and ``cpu_ratio``: each fit's ``fit_time`` and ``fit_cpu_time`` over those of the in-memory
    fit of the same rows and m (``memory`` for the generated set, ``official`` for the official images); NaN
    where there is none."""
    df = df.copy()
    ref = {("official" if str(r.input).startswith("official") else "generated", r.m): r for r in df.itertuples()
           if r.input in ("memory", "official")}
    for col, key in (("time_ratio", "fit_time"), ("cpu_ratio", "fit_cpu_time")):
        vals = []
        for r in df.itertuples():
            base = ref.get(("official" if str(r.input).startswith("official") else "generated", r.m))
            ok = base is not None and key in df.columns and getattr(base, key) and getattr(base, key) > 0
            vals.append(getattr(r, key) / getattr(base, key) if ok else float("nan"))
        df[col] = vals
    return df


def npy_copy(path) -> Path:
    """A float32 ``.npy`` copy of the store's rows beside it (``<store>.X.npy``), written once, block by block
    (never all in memory): what ``memmap`` maps.  A random row of a memory map costs its own pages, where a
    random row of the zarr store costs its chunk's decoding; the stash passes of a fit read ~85,000 random rows
    each."""
    import zarr
    path = Path(path)
    out = path.with_suffix(".X.npy")
    done = path.with_suffix(".X.done")
    if done.exists():
        return out
    X = zarr.open_group(str(path), mode="r")["X"]
    mm = np.lib.format.open_memmap(out, mode="w+", dtype=np.float32, shape=X.shape)
    step = 1 << 16
    for lo in range(0, X.shape[0], step):
        mm[lo:lo + step] = X[lo:lo + step]
    mm.flush()
    del mm
    done.touch()
    return out


def _labels(y):
    return np.where(np.asarray(y) == CLASS, 1, -1).astype(np.int8)


def run_one(kind, m, path, workers=WORKERS, params=None, scan_rows=SCAN_ROWS["full"]):
    """One measurement in this (fresh) process; returns a dict of the columns.  ``params``: the estimator's
    parameters beyond ``random_state`` (``CVMClassifier()`` defaults when None), e.g. the papers' stop rule
    for the 8M set (docs/chunked.md: under the defaults' stop rule the core set grows with m on these
    overlapping classes)."""
    import resource
    import warnings

    import zarr

    from corevector import CVMClassifier
    from corevector.infinite import source_images
    warnings.simplefilter("ignore")
    params = dict(params or {})
    Xt, yt = source_images("test")
    Xt, yt = Xt.reshape(len(Xt), -1), _labels(yt)
    if kind == "official":
        X, y = source_images("train")
        X, y = X.reshape(len(X), -1)[:m], _labels(y)[:m]
        m = len(X)
    elif kind in ("official_zarr", "official_dask"):
        root = zarr.open_group(str(official_store(Path(path).parent, m)), mode="r")
        X, y = root["X"], _labels(root["y"][:])
    else:
        root = zarr.open_group(str(path), mode="r")
        y = _labels(root["y"][:])
        X = (np.asarray(root["X"][:]) if kind == "memory" else
             np.load(npy_copy(path), mmap_mode="r") if kind == "memmap" else root["X"])
    base = {"official": "memory", "official_zarr": "zarr", "official_dask": "dask"}.get(kind, kind)
    client = local_cluster(workers, WORKER_MEMORY) if base == "dask" else None
    head = _head(X, base, WARM_ROWS)
    CVMClassifier(random_state=0, **params).fit(head, y[:WARM_ROWS])
    load = os.getloadavg()[0]
    est = CVMClassifier(random_state=0, **params)
    wall, cpu, growth, w1 = timed_fit(est, X, y, client)
    engine = chunked_fit_stats(kind).get("engine_peak_bytes", 0) / 2**20
    n_scan = min(m, scan_rows)
    if base in ("memory", "memmap"):
        Xs = X[:n_scan]
    elif base == "dask":
        from corevector.chunked import dask_from_zarr
        Xs = dask_from_zarr(X)[:n_scan]  # (the tasks a fit reads the store by)
    else:
        Xs = zarr.array(np.asarray(X[:n_scan]), chunks=(16384, X.shape[1]))
    t1 = time.perf_counter()
    dec = est.decision_function(Xs)
    if hasattr(dec, "compute"):
        dec.compute()
    scan = time.perf_counter() - t1
    out = dict(input=kind, m=m, workers=workers if base == "dask" else 0, fit_time=wall, fit_cpu_time=cpu,
               load=load, rss_growth_mb=growth / 2**20, engine_mb=engine, data_held_mb=growth / 2**20 - engine,
               x_mb=m * 784 * 4 / 2**20,
               worker_peak_mb=max((v[1] for v in w1.values()), default=0) / 2**20,
               core_set=int(est.core_set_.size), n_iter=int(est.n_iter_), settled=bool(np.all(est.settled_)),
               accuracy=float(est.score(Xt, yt)),
               certified_ratio=float(est.certified_ratio_), scan_evals_per_s=n_scan * len(est.support_) / scan,
               peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, params=json.dumps(params))
    if client is not None:
        cluster = client.cluster
        client.close()
        cluster.close()
    return out


def measure(kind, m, path, timeout, repeats=REPEATS, scan_rows=SCAN_ROWS["full"]):
    """Medians of ``repeats`` fresh processes (the other columns from the first)."""
    return medians_of("reports.chunked_wide", (path, "--scan-rows", scan_rows), kind, m, timeout, repeats,
                      ("fit_time", "fit_cpu_time", "rss_growth_mb", "engine_mb", "data_held_mb", "scan_evals_per_s",
                       "worker_peak_mb", "load"))


@experiment("chunked_wide", "Data beyond one machine, wide rows: generated Fashion-MNIST, d = 784 float32",
            sizes={"tiny": [20_000], "quick": [20_000], "full": [1_000_000]})
def chunked_wide(ctx: Context) -> ExperimentResult:
    import pandas as pd

    from .mmda import ensure_fashion_mnist
    if not ensure_fashion_mnist():  # (the measurements' processes inherit the location it sets)
        return ExperimentResult(outputs=[], summary_md="Fashion-MNIST is not available here (Debian package "
                                "dataset-fashion-mnist); not measured")
    rows = []
    repeats = REPEATS if ctx.mode == "full" else 1  # (the quick and tiny modes time every fit once)
    for m in ctx.sizes:
        path = store(ctx.out / "chunked-wide", m)
        for kind in KINDS:
            rows.append(measure(kind, m, path, TIMEOUT[ctx.mode], repeats=repeats, scan_rows=SCAN_ROWS[ctx.mode]))
    if ctx.mode in OFFICIAL_ROWS:  # the reference: the same task on the official training images
        for kind in OFFICIAL_KINDS:
            rows.append(measure(kind, OFFICIAL_ROWS[ctx.mode], path, TIMEOUT[ctx.mode], repeats=repeats,
                                scan_rows=SCAN_ROWS[ctx.mode]))
    df = with_ratios(pd.DataFrame(rows))
    df.to_csv(ctx.out / "chunked_wide.csv", index=False)
    cols = [c for c in COLUMNS if c in df.columns] + (["error"] if "error" in df.columns else [])
    return ExperimentResult(outputs=["chunked_wide.csv"], summary_md=to_markdown(df[cols]))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:  # --one KIND M PATH [WORKERS] [--params JSON] [--scan-rows N]
        a, extra, scan = sys.argv[2:], None, SCAN_ROWS["full"]
        if "--params" in a:
            i = a.index("--params")
            extra = json.loads(a[i + 1])
            del a[i:i + 2]
        if "--scan-rows" in a:
            i = a.index("--scan-rows")
            scan = int(a[i + 1])
            del a[i:i + 2]
        print(json.dumps(run_one(a[0], int(a[1]), a[2], *(int(v) for v in a[3:]), params=extra, scan_rows=scan)),
              flush=True)
