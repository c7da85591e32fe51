"""Long checks of chunked inputs (issue 24), marked slow: run by ``bash run.sh report --full``.

A zarr store on disk three times larger than the memory limits of a LocalCluster's two workers together is
fitted, predicted and certified; every worker stays within its limit and the caller's resident peak grows by
less than a quarter of the store's bytes."""
from __future__ import annotations

import numpy as np
import pytest

from corevector import CVMClassifier
from refimpl.datasets import checkerboard

distributed = pytest.importorskip("distributed")
zarr = pytest.importorskip("zarr")

WORKER_LIMIT = 300 * 2**20
M = 3 * 2 * WORKER_LIMIT // 16   # float64 rows of d = 2: three times the workers' memory together


def _hwm():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


def _reset_hwm():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_store_larger_than_the_workers(tmp_path):
    z = zarr.open_array(str(tmp_path / "big.zarr"), mode="w", shape=(M, 2), chunks=(1_000_000, 2), dtype="f8")
    y = np.empty(M, dtype=np.int8)
    step = 5_000_000
    for k, s in enumerate(range(0, M, step)):
        Xb, yb = checkerboard(min(step, M - s), random_state=100 + k)
        z[s:s + len(Xb)] = Xb
        y[s:s + len(Xb)] = yb
    del Xb
    Xt, yt = checkerboard(5000, random_state=1)
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=WORKER_LIMIT,
                                       dashboard_address=None, silence_logs=50)
    with distributed.Client(cluster) as client:
        client.run(lambda: __import__("corevector.chunked.ops"))
        _reset_hwm()
        base = _hwm()
        est = CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(zarr.open_array(str(tmp_path / "big.zarr")), y)
        growth = _hwm() - base
        pred = est.predict(zarr.open_array(str(tmp_path / "big.zarr"))[:5000])
        peaks = client.run(_hwm)
    cluster.close()
    assert est.score(Xt, yt) >= 0.998
    assert np.isfinite(est.certified_ratio_) and est.certified_ratio_ < 1.01
    assert pred.shape == (5000,)
    assert all(p <= WORKER_LIMIT for p in peaks.values()), peaks
    assert growth < 0.25 * M * 16, growth
