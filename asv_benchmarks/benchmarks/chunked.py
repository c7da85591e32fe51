"""Data beyond one machine: CVMClassifier (gamma = 1, C = 1e4, the paper's checkerboard setting) fitted from
memory, a float32 memory map, a zarr store read here and the same store as a Dask array on a distributed
LocalCluster (``corevector.chunked.dask_from_zarr``): time, peak memory, core-set size and test accuracy
against m.  The model is the same for every input (tests/test_chunked.py); the cost is what differs.

The cluster's two workers (one thread each) and its scheduler run in the benchmark's process: its CPU time
then holds theirs, and nothing outlives the process (asv ends it with ``os._exit``, which runs no clean-up).
``reports/chunked.py`` measures worker processes, wall time and the traffic per iteration."""
import os
import time
import warnings

import numpy as np

from .common import (N_TEST, RADIUS_TOO_COARSE, REPEAT, ROUNDS, SEED, by_size, calls_per_sample, checkerboard,
                     cpu_seconds, forget, loaded, one_thread, set_number, warm_up)

INPUTS = ["memory", "memmap", "zarr", "dask"]
M_CHUNKED = by_size([10_000, 100_000], [10_000, 100_000, 1_000_000])
CHUNK_ROWS = 65_536


def write_inputs(folder, m):
    """The checkerboard of m points as a float64 zarr store, a float32 .npy and its labels."""
    import zarr
    X, y = checkerboard(m, SEED)
    z = zarr.open_array(os.path.join(folder, f"x{m}.zarr"), mode="w", shape=X.shape,
                        chunks=(min(CHUNK_ROWS, m), 2), dtype="f8")
    z[:] = X
    np.save(os.path.join(folder, f"x{m}_f32.npy"), X.astype(np.float32))
    np.save(os.path.join(folder, f"y{m}.npy"), y)


def open_input(folder, kind, m):
    """X of that kind (for 'dask', with the in-process cluster's client running)."""
    import zarr
    zpath = os.path.join(folder, f"x{m}.zarr")
    if kind == "memory":
        return np.asarray(zarr.open_array(zpath, mode="r")[:])
    if kind == "memmap":
        return np.load(os.path.join(folder, f"x{m}_f32.npy"), mmap_mode="r")
    X = zarr.open_array(zpath, mode="r")
    if kind == "dask":
        from corevector.chunked import dask_from_zarr
        loaded("client", start_client)
        return dask_from_zarr(X)
    return X


def start_client():
    """A client of a LocalCluster of two one-thread workers in this process."""
    from distributed import Client, LocalCluster
    return Client(LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None,
                               silence_logs=50))


def fit(X, y):
    from corevector import CVMClassifier
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=RADIUS_TOO_COARSE[1], category=RADIUS_TOO_COARSE[0])
        return CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(X, y)


class ChunkedInputs:
    """time_fit, peakmem_fit, track_core_set_size, track_test_accuracy, track_certified_ratio over (input, m)."""

    param_names = ["input", "m"]
    params = (INPUTS, M_CHUNKED)
    timeout = 1800
    timer = staticmethod(time.process_time)
    rounds = ROUNDS
    repeat = REPEAT
    warmup_time = 0.0

    def setup_cache(self):
        """The data of every m, once, and every (input, m) fitted once for the tracks."""
        one_thread()
        folder = os.path.abspath("chunked-data")
        os.makedirs(folder, exist_ok=True)
        Xt, yt = checkerboard(N_TEST, SEED + 10_000)
        tracks = {}
        try:
            for m in M_CHUNKED:
                write_inputs(folder, m)
                y = np.load(os.path.join(folder, f"y{m}.npy"))
                for kind in INPUTS:
                    X = open_input(folder, kind, m)
                    fit(X, y)  # (the first fit of a process pays for its imports)
                    t, model = cpu_seconds(lambda: fit(X, y))
                    tracks[(kind, m)] = (t, int(model.core_set_.size), float(model.score(Xt, yt)),
                                         float(np.max(model.certified_ratio_)))
        finally:
            client = forget("client")
            if client is not None:
                cluster = client.cluster
                client.close()
                cluster.close()
        return {"folder": folder, "tracks": tracks}

    def setup(self, cache, kind, m):
        one_thread()
        self.X = loaded((kind, m), lambda: open_input(cache["folder"], kind, m))
        self.y = loaded(m, lambda: np.load(os.path.join(cache["folder"], f"y{m}.npy")))
        # warm: a fit of the smallest m from the same kind of input
        m0 = M_CHUNKED[0]
        loaded("warm", lambda: warm_up(lambda: fit(open_input(cache["folder"], kind, m0),
                                                   np.load(os.path.join(cache["folder"], f"y{m0}.npy")))))
        set_number(self.time_fit, calls_per_sample(cache["tracks"][(kind, m)][0]))

    def time_fit(self, cache, kind, m):
        fit(self.X, self.y)

    def peakmem_fit(self, cache, kind, m):
        fit(self.X, self.y)

    def track_core_set_size(self, cache, kind, m):
        return cache["tracks"][(kind, m)][1]
    track_core_set_size.unit = "vectors"

    def track_test_accuracy(self, cache, kind, m):
        return cache["tracks"][(kind, m)][2]
    track_test_accuracy.unit = "accuracy"

    def track_certified_ratio(self, cache, kind, m):
        return cache["tracks"][(kind, m)][3]
    track_certified_ratio.unit = "ratio"
