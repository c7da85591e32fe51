"""Data beyond one machine: CVMClassifier (gamma = 1, C = 1e4, the paper's checkerboard setting)
fitted from memory, a float32 memory map, a zarr store read here and the zarr store read by a LocalCluster of
two workers (a Dask array on a distributed client): time, peak memory, core-set size and test accuracy
against m.  The model is the same for every input (tests/test_chunked.py); the cost is what differs.
``reports/chunked.py`` measures the same in fresh processes with the traffic per iteration."""
import os
import tempfile
import warnings

import numpy as np

from .common import checkerboard

INPUTS = ["memory", "memmap", "zarr", "dask"]
M_CHUNKED = [10_000, 100_000, 1_000_000]
CHUNK_ROWS = 250_000


class ChunkedInputs:
    """time_fit, peakmem_fit, track_core_set_size, track_test_accuracy over (input, m)."""

    param_names = ["input", "m"]
    params = (INPUTS, M_CHUNKED)
    timeout = 1800
    number = 1
    repeat = (1, 3, 60.0)
    warmup_time = 0.0

    def setup_cache(self):
        """The data of every m, once: zarr (float64) and .npy (float32) files in asv's cache folder."""
        import zarr
        folder = os.path.abspath("chunked-data")
        os.makedirs(folder, exist_ok=True)
        for m in M_CHUNKED:
            X, y = checkerboard(m, 0)
            z = zarr.open_array(os.path.join(folder, f"x{m}.zarr"), mode="w", shape=X.shape,
                                chunks=(min(CHUNK_ROWS, m), 2), dtype="f8")
            z[:] = X
            np.save(os.path.join(folder, f"x{m}_f32.npy"), X.astype(np.float32))
            np.save(os.path.join(folder, f"y{m}.npy"), y)
        return folder

    def setup(self, folder, kind, m):
        import zarr
        self.client = None
        self.y = np.load(os.path.join(folder, f"y{m}.npy"))
        self.Xt, self.yt = checkerboard(2000, 1)
        zpath = os.path.join(folder, f"x{m}.zarr")
        if kind == "memory":
            self.X = np.asarray(zarr.open_array(zpath, mode="r")[:])
        elif kind == "memmap":
            self.X = np.load(os.path.join(folder, f"x{m}_f32.npy"), mmap_mode="r")
        else:
            self.X = zarr.open_array(zpath, mode="r")
            if kind == "dask":
                from distributed import Client, LocalCluster
                self.client = Client(LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="1GB",
                                                  dashboard_address=None, silence_logs=50,
                                                  local_directory=tempfile.mkdtemp()))
                # a running cluster has its libraries loaded (the caller imported zarr above, too)
                self.client.run(lambda: [__import__(mod) for mod in ("corevector.chunked.ops", "zarr")])
        self.model = None

    def teardown(self, folder, kind, m):
        if self.client is not None:
            cluster = self.client.cluster
            self.client.close()
            cluster.close()

    def fit(self):
        from corevector import CVMClassifier
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.model = CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(self.X, self.y)
        return self.model

    def time_fit(self, folder, kind, m):
        self.fit()

    def peakmem_fit(self, folder, kind, m):
        self.fit()

    def track_core_set_size(self, folder, kind, m):
        return int(self.fit().core_set_.size)

    track_core_set_size.unit = "vectors"

    def track_test_accuracy(self, folder, kind, m):
        return float(self.fit().score(self.Xt, self.yt))

    track_test_accuracy.unit = "accuracy"
