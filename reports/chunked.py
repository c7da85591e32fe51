"""Data beyond one machine: the same CVMClassifier fit from memory, a float32 memory map, a zarr
store read here, and the zarr store read by a LocalCluster's workers (a Dask array on a distributed client).

Data: the checkerboard (001 Sec. 5.1: gamma = 1, C = 1e4, the paper's setting) at m points, float64 (the
memory map float32), written once per m into ``<out>/chunked-data`` (zarr chunks of ``CHUNK_ROWS`` rows);
2,000 test points.  Every measurement runs in a fresh process (``python -m reports.chunked --one ...``),
``REPEATS`` times in full mode (once in the quick and tiny modes), and the table gives medians:

* ``fit_time`` / ``fit_cpu_time`` -- wall and CPU seconds of the fit (CPU: the caller plus, on a cluster, its
  workers), ``load`` the 1-minute load average when it started;
* ``rss_growth_mb`` -- growth of the caller's resident high-water mark during the fit (reset after the data
  were opened), next to ``x_mb``, X's bytes as float64; ``worker_peak_mb`` -- the largest worker's peak.
  The timed fit follows a warm-up fit of the same kind on the first ``WARM_ROWS`` rows, whose own growth is
  ``first_fit_growth_mb``: what a process's first fit costs whatever the data (modules imported on first
  use, threads and their allocator arenas), so that ``rss_growth_mb`` is what the data cost;
* ``core_set``, ``accuracy``, ``certified_ratio``;
* ``row_bytes_per_iter`` -- bytes of rows sent to the client per iteration of the loop (the draws read
  ahead, windows installed), ``bytes_per_iter`` -- every byte from the workers per iteration (every window's
  rows, also one the fit ended before using, and the full scans' results), ``positions_per_iter`` -- the
  driver's draws per iteration (the same in memory: what the loop asks for, not what the transport adds),
  ``scan_bytes_per_block`` -- bytes a full scan returns per block (one merged result per scan),
  ``fetch_rounds`` (windows of draws installed), ``stash_rounds`` (reads of the windows' rows: passes);
* ``scan_evals_per_s`` -- a full pass of ``decision_function`` over the training rows, in kernel
  evaluations per second (rows x support vectors / wall seconds): the throughput of the scans.

The model is the same for every input (tests/test_chunked.py checks it bit for bit); the columns say what
each input costs.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from .common import Context, ExperimentResult, experiment, to_markdown

#: 1 MB chunks (as float64): the caller holds a few decoded chunks at once (at 10^7, chunks of 10^6 rows
#: grew it by 159 MB, 104% of X; 2^17 rows by 38.6 MB, 2^16 by 36.3 MB), and a cluster's task reads 16
CHUNK_ROWS = 65_536
#: rows of the scan-throughput pass (decision_function over the training rows)
SCAN_ROWS = 10_000_000
REPEATS = 3
#: rows of the warm-up fit before the timed one
WARM_ROWS = 100_000
KINDS = ("memory", "memmap", "zarr", "dask")
WORKERS, WORKER_MEMORY = 2, "1GB"
TIMEOUT = {"tiny": 300, "quick": 900, "full": 3600}
COLUMNS = ["input", "m", "chunk_rows", "workers", "fit_time", "fit_cpu_time", "load", "rss_growth_mb", "first_fit_growth_mb", "x_mb", "worker_peak_mb", "core_set",
           "accuracy", "certified_ratio", "row_bytes_per_iter", "bytes_per_iter", "positions_per_iter",
           "scan_bytes_per_block", "fetch_rounds", "stash_rounds",
           "scan_evals_per_s"]


def data_files(folder: Path, m: int, chunk_rows=CHUNK_ROWS):
    """The checkerboard of m points as float64 zarr and float32 .npy (made once), and 2,000 test points."""
    from refimpl.datasets import checkerboard
    import zarr

    folder.mkdir(parents=True, exist_ok=True)
    zpath, npath = folder / f"cb{m}_c{chunk_rows}.zarr", folder / f"cb{m}_f32.npy"
    ypath = folder / f"cb{m}_y.npy"
    if not (zpath.exists() and npath.exists() and ypath.exists()):
        z = zarr.open_array(str(zpath), mode="w", shape=(m, 2), chunks=(min(chunk_rows, m), 2), dtype="f8")
        mm = np.lib.format.open_memmap(str(npath), mode="w+", dtype=np.float32, shape=(m, 2))
        ys = np.empty(m, dtype=np.int8)
        step = 5_000_000
        for k, s in enumerate(range(0, m, step)):
            Xb, yb = checkerboard(min(step, m - s), random_state=1000 + k)
            z[s:s + len(Xb)] = Xb
            mm[s:s + len(Xb)] = Xb
            ys[s:s + len(Xb)] = yb
        mm.flush()
        np.save(ypath, ys)
    return zpath, npath, ypath


def _rss(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    return 0


def _worker_usage():
    """(CPU seconds, resident high-water mark) of a worker process (VmHWM: ru_maxrss carries over exec)."""
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF)
    with open("/proc/self/status") as f:
        hwm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
    return r.ru_utime + r.ru_stime, hwm


def reset_peak():
    """Reset this process's resident high-water mark (VmHWM); returns its resident bytes now."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _rss("VmRSS:")


def timed_fit(est, X, y, client=None):
    """``est.fit(X, y)`` measured: (wall s, CPU s of this process plus the client's workers, growth of this
    process's resident high-water mark in bytes, the workers' (CPU, peak) after it)."""
    base = reset_peak()
    w0 = client.run(_worker_usage) if client else {}
    c0, t0 = time.process_time(), time.perf_counter()
    est.fit(X, y)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    growth = _rss("VmHWM:") - base
    w1 = client.run(_worker_usage) if client else {}
    return wall, cpu + sum(w1[k][0] - w0[k][0] for k in w1), growth, w1


def _head(X, kind, n):
    """The first n rows of X as the same kind of input (a warm-up fit's data)."""
    import zarr
    if kind in ("memory", "memmap"):
        return X[:n]  # (a memory map's rows stay a memory map)
    from corevector.chunked.zarr_chunks import chunk_reader
    reader = chunk_reader(X)
    # (by windows of rows where the fit reads so: zarr's X[:n] decodes a whole chunk, 64 MB in the largest,
    # whose freed buffers the timed fit would then reuse unseen)
    head = reader.read(0, min(n, X.shape[0])) if reader is not None else np.asarray(X[:n])
    if kind in ("dask", "dask-auto"):
        import dask.array as da
        return da.from_array(head, chunks=(max(n // 4, 1), head.shape[1]))
    return zarr.array(head, chunks=(max(n // 4, 1), head.shape[1]))


#: glibc's mmap threshold in the workers (docs/chunked.md): distributed starts them with MALLOC_TRIM_THRESHOLD_
#: set, which freezes glibc's adaptive threshold at 128 kB, so every block a task allocates (a 1,024-row chunk of
#: 784 float32 columns is 3.2 MB) is mapped afresh and page-faulted.  At 32 MB a worker reuses its heap: a
#: decision_function of 10^5 x 784 from zarr went 2.4 -> 3.0e7 kernel values a second (8 runs each)
WORKER_MMAP_THRESHOLD = 1 << 25


def chunked_fit_stats(kind):
    """The last chunked fit's counters (``corevector.chunked.ops.STATS``: bytes fetched and sent, scan blocks,
    the local engine's peak), or ``{}`` when ``kind`` fits in memory and so kept none."""
    from corevector.chunked import ops
    return ops.STATS[-1] if ops.STATS and kind not in ("memory", "official") else {}


def local_cluster(workers, memory_limit):
    """A client of a LocalCluster of ``workers`` one-thread worker processes with the libraries a fit uses
    loaded (a running cluster has them; the caller, too, imported zarr before the timing)."""
    import dask
    from distributed import Client, LocalCluster
    with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_": WORKER_MMAP_THRESHOLD}):
        client = Client(LocalCluster(n_workers=workers, threads_per_worker=1, memory_limit=memory_limit,
                                     dashboard_address=None, silence_logs=50))
    client.run(lambda: [__import__(mod) for mod in ("corevector.chunked.ops", "zarr")])
    return client


def _block_rows(kind, X):
    """The most rows of a block the fit reads X by (the store's chunks cut by the chunk reader, a cluster's
    tasks, Dask's own blocks cut by dask_source.split_rows); none for an in-memory X."""
    from corevector.chunked.dask_source import TASK_BYTES, split_rows
    from corevector.chunked.local_source import LocalSource, array_bounds
    if kind == "zarr":
        return int(np.max(np.diff(LocalSource(X).bounds)))
    if kind == "dask":
        return int(np.max(np.diff(array_bounds(X, TASK_BYTES))))
    if kind == "dask-auto":
        return int(max(split_rows(X.chunks[0], X.shape[1]) or X.chunks[0]))
    return 0


def run_one(kind, m, folder, chunk_rows=CHUNK_ROWS, workers=WORKERS, eps=None, scan_rows=SCAN_ROWS):
    """One measurement in this (fresh) process; returns a dict of the columns.  ``kind``: 'memory', 'memmap',
    'zarr' (read here), 'dask' (the store on a LocalCluster, ``dask_from_zarr``'s tasks) or 'dask-auto' (on
    the cluster too, ``da.from_zarr(store, chunks='auto')``: Dask's own blocks, up to its ``array.chunk-size``);
    ``eps`` the estimator's (None: its default); ``scan_rows``: the rows of the scan-throughput pass after the
    fit (0: none)."""
    import warnings

    from corevector import CVMClassifier
    from refimpl.datasets import checkerboard
    warnings.simplefilter("ignore")
    zpath, npath, ypath = data_files(Path(folder), m, chunk_rows)
    y = np.load(ypath)
    Xt, yt = checkerboard(2000, random_state=1)
    client = None
    import zarr
    if kind == "memory":
        X = np.asarray(zarr.open_array(str(zpath), mode="r")[:])
    elif kind == "memmap":
        X = np.load(npath, mmap_mode="r")
    else:
        X = zarr.open_array(str(zpath), mode="r")
        if kind in ("dask", "dask-auto"):
            client = local_cluster(workers, WORKER_MEMORY)
        if kind == "dask-auto":
            import dask.array as da
            X = da.from_zarr(X, chunks="auto")
    params = dict(C=1e4, gamma=1.0, random_state=0) | ({} if eps is None else dict(eps=eps))
    base = reset_peak()
    CVMClassifier(**params).fit(_head(X, kind, WARM_ROWS), y[:WARM_ROWS])
    first = _rss("VmHWM:") - base
    load = os.getloadavg()[0]
    est = CVMClassifier(**params)
    wall, cpu, growth, w1 = timed_fit(est, X, y, client)
    # the scan throughput on at most SCAN_ROWS rows (a prediction of every row returns 8 bytes a row)
    n_scan = min(m, scan_rows)
    Xs = X
    if n_scan < m:
        if kind == "dask":
            from corevector.chunked import dask_from_zarr
            Xs = dask_from_zarr(X)[:n_scan]  # (the tasks a fit reads the store by)
        elif kind == "dask-auto":
            Xs = X[:n_scan]
        elif kind in ("memory", "memmap"):
            Xs = X[:n_scan]
        else:
            Xs = None
    scan = float("nan")
    if Xs is not None and n_scan > 0:
        t1 = time.perf_counter()
        dec = est.decision_function(Xs)
        if hasattr(dec, "compute"):
            dec = dec.compute()
        scan = time.perf_counter() - t1
    n_iter = max(int(est.n_iter_), 1)
    # read after the scan pass: a window of draws still on its way when the fit ended has arrived (sent_bytes)
    st = chunked_fit_stats(kind)
    out = dict(input=kind, m=m, chunk_rows=chunk_rows, eps=float(est.eps),
               block_rows=_block_rows(kind, X),
               workers=workers if kind.startswith("dask") else 0, fit_time=wall, fit_cpu_time=cpu, load=load, rss_growth_mb=growth / 2**20,
               first_fit_growth_mb=first / 2**20,
               x_mb=m * 2 * 8 / 2**20, worker_peak_mb=max((v[1] for v in w1.values()), default=0) / 2**20,
               core_set=int(est.core_set_.size), accuracy=float(est.score(Xt, yt)),
               certified_ratio=float(est.certified_ratio_),
               row_bytes_per_iter=st.get("fetch_bytes", 0) / n_iter if st else 0.0,
               bytes_per_iter=(st.get("sent_bytes", st["fetch_bytes"]) + st["scan_bytes"]) / n_iter if st else 0.0,
               positions_per_iter=st.get("positions", 0) / n_iter,
               scan_bytes_per_block=st["scan_bytes"] / max(st["scan_blocks"], 1) if st else 0.0,
               fetch_rounds=st.get("fetch_rounds", 0), stash_rounds=st.get("stash_rounds", 0), scan_evals_per_s=n_scan * len(est.support_) / scan,
               positions=st.get("positions", 0), n_iter=int(est.n_iter_))
    if client is not None:
        cluster = client.cluster
        client.close()
        cluster.close()
    return out


def medians_of(module, args, kind, m, timeout, repeats, keys):
    """``python -m module --one kind m *args`` in ``repeats`` fresh processes: the medians of ``keys``, the
    other columns from the first run (a failed run: its error)."""
    runs = []
    for _ in range(repeats):
        cmd = [sys.executable, "-m", module, "--one", kind, str(m)] + [str(a) for a in args]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                             cwd=Path(__file__).resolve().parent.parent)
        line = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
        if res.returncode or not line:
            return dict(input=kind, m=m, error=(res.stderr or res.stdout)[-500:])
        runs.append(json.loads(line[-1]))
    out = dict(runs[0])
    for key in keys:
        out[key] = float(np.median([r[key] for r in runs]))
    return out


def measure(kind, m, folder, timeout, repeats=REPEATS, chunk_rows=CHUNK_ROWS, workers=WORKERS, eps=None,
            scan_rows=SCAN_ROWS):
    """Medians of ``repeats`` fresh processes (the other columns from the first)."""
    return medians_of("reports.chunked", (folder, chunk_rows, workers, eps, scan_rows), kind, m, timeout, repeats,
                      ("fit_time", "fit_cpu_time", "rss_growth_mb", "first_fit_growth_mb", "scan_evals_per_s",
                       "worker_peak_mb", "load"))


# (quick: 10^6 alone; at 10^5 each input's fit took 0.1-0.7 CPU seconds of a measurement's ~4, the rest the fresh
# process, its warm-up, its scan and its cluster)
@experiment("chunked", "Data beyond one machine: memory, memmap, zarr and a Dask cluster",
            sizes={"tiny": [20_000], "quick": [1_000_000], "full": [1_000_000, 10_000_000]})
def chunked(ctx: Context) -> ExperimentResult:
    import pandas as pd

    folder = ctx.out / "chunked-data"
    rows = []
    for m in ctx.sizes:
        data_files(folder, m)
        for kind in KINDS:
            # the quick and tiny modes time every fit once (as common.MODE_REPEATS), the full mode REPEATS times
            rows.append(measure(kind, m, folder, TIMEOUT[ctx.mode], repeats=REPEATS if ctx.mode == "full" else 1))
    df = pd.DataFrame(rows)
    df.to_csv(ctx.out / "chunked.csv", index=False)
    cols = [c for c in COLUMNS if c in df.columns] + (["error"] if "error" in df.columns else [])
    return ExperimentResult(outputs=["chunked.csv"], summary_md=to_markdown(df[cols]))


# ------------------------------------------------------------------ the grid: eps x chunks x Dask's own blocks
#: the grid's marks: at GRID_M rows (10^7 x 2, X 153 MB as float64) the caller's growth below MARK_GROWTH of X
#: and chunked fits within MARK_RATIO of the in-memory fit's time, for every eps and store chunking, zarr read
#: here and Dask's ``chunks='auto'`` on the cluster; and, in the full mode, the growth at GRID_M_PAIR's two m
#: at equal chunks (it must not grow with m)
GRID_M = {"tiny": 20_000, "quick": 10_000_000, "full": 10_000_000}
GRID_EPS = {"tiny": (1e-2,), "quick": (1e-2, 1e-6), "full": (1e-2, 1e-4, 1e-6)}
#: store chunks in bytes (rows of 16 bytes): 64 KB .. 64 MB
GRID_CHUNK_BYTES = {"tiny": (64 * 2**10, 64 * 2**20), "quick": (64 * 2**10, 64 * 2**20),
                    "full": (64 * 2**10, 2**20, 8 * 2**20, 64 * 2**20)}
GRID_M_PAIR = (1_000_000, 100_000_000)
MARK_GROWTH, MARK_RATIO = 0.25, 2.0
GRID_COLUMNS = ["m", "eps", "input", "chunk_mb", "block_mb", "fit_time", "fit_cpu_time", "time_ratio",
                "cpu_ratio", "load", "rss_growth_mb", "beyond_memory_mb", "growth_of_x", "x_mb", "growth_mark",
                "time_mark", "core_set", "stash_rounds", "worker_peak_mb"]


def _grid_cells(mode):
    """(m, eps, kind, chunk rows) of the grid's measurements, the in-memory fit first for each (m, eps)."""
    m = GRID_M[mode]
    rows = [c // 16 for c in GRID_CHUNK_BYTES[mode]]
    cells = []
    for eps in GRID_EPS[mode]:
        cells.append((m, eps, "memory", CHUNK_ROWS))
        cells += [(m, eps, "zarr", c) for c in rows]
        # Dask's own blocks over the 1 MB store (da.from_zarr(chunks='auto'): up to 128 MB), and the
        # fit's own tasks (dask_from_zarr; not in the tiny mode)
        cells += [(m, eps, "dask-auto", CHUNK_ROWS)] + ([(m, eps, "dask", CHUNK_ROWS)] if mode != "tiny" else [])
    if mode == "quick":  # (the fits of Dask's own blocks and of the fit's tasks differ little: the first)
        cells = [c for c in cells if c[2] != "dask"]
    if mode == "full":  # the growth at two m, equal chunks (1 MB and 64 MB), beside the in-memory fit's
        for mm in GRID_M_PAIR:
            cells += [(mm, 1e-2, "memory", CHUNK_ROWS)] + [(mm, 1e-2, "zarr", c) for c in (2**20 // 16, 64 * 2**20 // 16)]
            cells += [(mm, 1e-2, "dask", CHUNK_ROWS)]
    return cells


def grid_table(rows):
    """The grid's table: each chunked fit beside the in-memory fit of its m and eps (time and CPU ratios;
    the 10^6 / 10^8 pair has none: its growth alone), its growth as a share of X, and the marks (growth below
    MARK_GROWTH of X, time within MARK_RATIO)."""
    import pandas as pd
    df = pd.DataFrame(rows)
    if "error" not in df.columns:
        df["error"] = None
    ok = df["error"].isna()
    base = df[ok & (df["input"] == "memory")].set_index(["m", "eps"])
    key = list(zip(df["m"], df["eps"]))
    has = [k in base.index for k in key]
    df["time_ratio"] = [r / base.loc[k, "fit_time"] if h else np.nan for r, k, h in zip(df["fit_time"], key, has)]
    df["cpu_ratio"] = [r / base.loc[k, "fit_cpu_time"] if h else np.nan
                       for r, k, h in zip(df["fit_cpu_time"], key, has)]
    df["growth_of_x"] = df["rss_growth_mb"] / df["x_mb"]
    # (the growth beyond the in-memory fit's own: its labels' signs, one byte a row, and its engine)
    df["beyond_memory_mb"] = [g - base.loc[k, "rss_growth_mb"] if h else np.nan
                              for g, k, h in zip(df["rss_growth_mb"], key, has)]
    df["chunk_mb"] = df["chunk_rows"] * 16 / 2**20
    df["block_mb"] = df["block_rows"] * 16 / 2**20 if "block_rows" in df.columns else np.nan
    df["growth_mark"] = np.where(~ok, "-", np.where(df["growth_of_x"] < MARK_GROWTH, "yes", "NO"))
    df["time_mark"] = np.where(~ok | (df["input"] == "memory") | df["time_ratio"].isna(), "-",
                               np.where(df["time_ratio"] <= MARK_RATIO, "yes", "NO"))
    return df


@experiment("chunked_grid", "Chunked fits across eps, store chunks and Dask's own blocks: the caller's memory and time",
            sizes={"tiny": [GRID_M["tiny"]], "quick": [GRID_M["quick"]], "full": [GRID_M["full"]]})
def chunked_grid(ctx: Context) -> ExperimentResult:
    folder = ctx.out / "chunked-data"
    rows = []
    for m, eps, kind, c in _grid_cells(ctx.mode):
        data_files(folder, m, c)
        rows.append(measure(kind, m, folder, TIMEOUT[ctx.mode], repeats=REPEATS if ctx.mode == "full" else 1,
                            chunk_rows=c, eps=eps, scan_rows=0))
        rows[-1].setdefault("eps", eps)
        rows[-1].setdefault("chunk_rows", c)
    df = grid_table(rows)
    df.to_csv(ctx.out / "chunked_grid.csv", index=False)
    cols = [c for c in GRID_COLUMNS if c in df.columns] + (["error"] if df["error"].notna().any() else [])
    return ExperimentResult(outputs=["chunked_grid.csv"], summary_md=to_markdown(df[cols]))


def sweep(folder, m=1_000_000, chunks=(62_500, 250_000, 1_000_000), workers=(1, 2), repeats=1, timeout=900):
    """Chunk rows and workers against each other on the Dask path at one m (README's trade-offs)."""
    rows = []
    for c in chunks:
        data_files(Path(folder), m, c)
        for w in workers:
            rows.append(measure("dask", m, folder, timeout, repeats, c, w))
            print(json.dumps(rows[-1]), flush=True)
    return rows


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        args = sys.argv[2:]
        # KIND M FOLDER [CHUNK_ROWS [WORKERS [EPS|None [SCAN_ROWS]]]]
        ints, eps = args[3:5], (float(args[5]) if len(args) > 5 and args[5] != "None" else None)
        scan_rows = int(args[6]) if len(args) > 6 else SCAN_ROWS
        print(json.dumps(run_one(args[0], int(args[1]), args[2], *(int(a) for a in ints), eps=eps,
                                 scan_rows=scan_rows)), flush=True)
    elif sys.argv[1:2] == ["--sweep"]:
        sweep(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 1_000_000)
