"""The core-set loop on a real Dask cluster (issue 24): a LocalCluster of two worker processes with a memory
limit each.  Fits from persisted Dask arrays and zarr stores give the in-memory fit; independent fits run as
tasks give the same model; a worker killed mid-fit never gives a silently wrong model.  The store larger
than the workers' memory together is in tests/test_slow.py (marked slow)."""
from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from corevector import CVDD, CVR, CVMClassifier
from corevector import _chunked_ops, _local_source, chunked
from refimpl.datasets import checkerboard

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")
zarr = pytest.importorskip("zarr")

#: the memory limit of each worker of the test cluster
WORKER_LIMIT = 600 * 2**20


def _peak_rss():
    """The process's resident high-water mark (VmHWM: ru_maxrss would carry the parent's over exec)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=WORKER_LIMIT,
                                       dashboard_address=None, silence_logs=50)
    c = distributed.Client(cluster, set_as_default=False)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(autouse=True)
def small_windows(monkeypatch):
    monkeypatch.setattr(_local_source, "BLOCK_BYTES", 64 * 1024)
    monkeypatch.setattr(_local_source, "MIN_BLOCK_ROWS", 1)
    monkeypatch.setattr(chunked, "TASK_BYTES", 64 * 1024)
    monkeypatch.setattr(_chunked_ops, "WINDOW_START", 512)


def _data(m=6000):
    X, y = checkerboard(m, random_state=0)
    X = X.astype(np.float32)
    y3 = (X[:, 0] > 2).astype(int) + (X[:, 1] > 3)
    yr = np.sin(X[:, 0]) + X[:, 1] + 0.1 * np.random.default_rng(0).normal(size=m)
    return X, X.astype(np.float64), y, y3, yr


def test_cluster_fits_are_the_in_memory_fits(client, tmp_path, monkeypatch):
    X32, X, y, y3, yr = _data()
    ref = [CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(X, y),
           CVMClassifier(C=10, gamma=1.0, random_state=0).fit(X, y3),
           CVR(C=1.0, gamma=1.0, eps=0.1, stop="radius", random_state=0).fit(X, yr),
           CVDD(C=10, gamma=1.0, random_state=0).fit(X)]
    z = zarr.open_array(str(tmp_path / "x.zarr"), mode="w", shape=X32.shape, chunks=(1000, 2), dtype="f4")
    z[:] = X32
    with client.as_current():
        Xd = da.from_array(X32, chunks=(1500, 2)).persist()
        assert chunked._source(z).persisted   # small against the workers' memory: read once, kept there
        for Xc, share in ((Xd, chunked.PERSIST_SHARE), (z, chunked.PERSIST_SHARE), (z, 0.0)):
            # rows persisted on the workers; a store persisted for the fit; chunks read by the workers per pass
            monkeypatch.setattr(chunked, "PERSIST_SHARE", share)
            if share == 0.0:
                assert not chunked._source(z).persisted
            got = [CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(Xc, y),
                   CVMClassifier(C=10, gamma=1.0, random_state=0).fit(Xc, y3),
                   CVR(C=1.0, gamma=1.0, eps=0.1, stop="radius", random_state=0).fit(Xc, yr),
                   CVDD(C=10, gamma=1.0, random_state=0).fit(Xc)]
            for a, b in zip(ref, got):
                assert np.array_equal(a.core_set_, b.core_set_)
                assert np.array_equal(a.dual_coef_, b.dual_coef_)
                assert np.array_equal(np.asarray(a.certified_ratio_), np.asarray(b.certified_ratio_))
        pred = got[1].predict(Xd)
        assert isinstance(pred, da.Array)
        assert np.array_equal(pred.compute(), ref[1].predict(X))
        peaks = client.run(_peak_rss)
    assert all(p <= WORKER_LIMIT for p in peaks.values()), peaks


def test_the_caller_receives_the_rows_its_windows_install(client):
    """On a cluster the stashes of draws stay on the workers: the caller receives the rows that windows of
    draws install, and at most one window more (in flight when the fit ends), not every stash read ahead
    (held in the caller, the stashes sent a third more rows here)."""
    X32, X, y, _, _ = _data(20000)
    del _chunked_ops.STATS[:]
    with client.as_current():
        est = CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(da.from_array(X32, chunks=(5000, 2)).persist(), y)
    st = _chunked_ops.STATS[-1]
    row_bytes = 2 * 4
    window_max = min(_chunked_ops.WINDOW_MAX, len(X) // 4)
    assert st["stash_rounds"] > 1 and st["stash_rows"] * row_bytes > st["fetch_bytes"] + window_max * row_bytes
    assert st["fetch_bytes"] <= st["sent_bytes"] <= st["fetch_bytes"] + window_max * row_bytes
    ref = CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(X, y)
    assert np.array_equal(ref.core_set_, est.core_set_) and np.array_equal(ref.dual_coef_, est.dual_coef_)


def test_pairs_and_folds_as_tasks_give_the_same_model(client):
    """In-memory rows with a client running: one-vs-one pairs and Platt's folds run as separate tasks on the
    workers and give the model of the loop here."""
    _, X, _, y3, _ = _data(1500)
    opts = dict(C=10, gamma=1.0, probability=True, random_state=0)
    a = CVMClassifier(**opts).fit(X, y3)
    with client.as_current():
        b = CVMClassifier(**opts).fit(X, y3)
        assert chunked.distributed_client() is client
    assert np.array_equal(a.dual_coef_, b.dual_coef_) and np.array_equal(a.probA_, b.probA_)
    assert np.array_equal(a.predict_proba(X), b.predict_proba(X))


def test_mmda_one_vs_all_problems_as_tasks_give_the_same_directions(client):
    """In-memory rows with a client running: MMDA's one-vs-all problems run as separate tasks on the workers
    (one task each, seen in the task stream) and give the directions of the loop here, bit for bit."""
    from corevector import MMDA
    _, X, _, y3, _ = _data(900)
    opts = dict(n_components=2, gamma=1.0, random_state=0)
    a = MMDA(**opts).fit(X, y3)
    with client.as_current():
        with distributed.get_task_stream(client) as ts:
            b = MMDA(**opts).fit(X, y3)
    ran = [t for t in ts.data if str(t["key"]).startswith("binary-")]
    assert len(ran) == 3 and len({t["worker"] for t in ran}) >= 1
    for ca, cb in zip(a.expansion_coef_, b.expansion_coef_):
        assert np.array_equal(ca, cb)
    assert all(np.array_equal(p, q) for p, q in zip(a.expansion_index_, b.expansion_index_))
    assert np.array_equal(a.transform(X), b.transform(X)) and np.array_equal(a.n_iter_, b.n_iter_)


def test_worker_killed_mid_fit(client):
    """A worker process killed while the fit reads ahead: Dask recomputes its blocks, what was scattered to it
    is scattered again, and the fit completes with the in-memory model -- or stops with a clear error.  Never
    a silently wrong model."""
    X32, X, y, _, _ = _data(20000)
    ref = CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(X, y)
    del _chunked_ops.STATS[:]
    killed = []

    def kill_when_reading():
        t0 = time.time()
        while time.time() - t0 < 30:
            if _chunked_ops.STATS and _chunked_ops.STATS[-1]["fetch_rounds"] >= 1:
                pids = client.run(os.getpid)
                pid = sorted(pids.values())[0]
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.001)

    with client.as_current():
        Xd = da.from_array(X32, chunks=(1000, 2)).persist()
        thread = threading.Thread(target=kill_when_reading)
        thread.start()
        try:
            est = CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(Xd, y)
        except RuntimeError as exc:
            assert "lost workers" in str(exc)
            est = None
        thread.join()
        client.wait_for_workers(2, timeout=60)
    assert killed
    if est is not None:
        assert np.array_equal(ref.core_set_, est.core_set_) and np.array_equal(ref.dual_coef_, est.dual_coef_)


def test_pairs_in_threads_give_the_serial_model_and_warnings(monkeypatch):
    """One-vs-one pairs large enough for their kernel work run one per thread (CVMClassifier._pair_threads,
    distributed._in_threads): the model is the serial fit's bit for bit, and every warning is attributed to
    the pairs it arose in, as in the serial fit."""
    import warnings

    from sklearn.datasets import load_digits
    from threadpoolctl import threadpool_limits

    import corevector.classifier as classifier
    import corevector.distributed as distributed
    X, y = load_digits(return_X_y=True)
    X, y = X[:500], y[:500]
    threaded = []
    in_threads = distributed._in_threads
    monkeypatch.setattr(distributed, "_in_threads", lambda *a: threaded.append(a[-1]) or in_threads(*a))
    runs = []
    for work in (10**18, 0):
        monkeypatch.setattr(classifier, "PAIR_THREADS_MIN_WORK", work)
        with threadpool_limits(limits=2, user_api="openmp"), warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            est = CVMClassifier(stop="radius", C=1e4, random_state=0).fit(X, y)
        runs.append((est, sorted(str(x.message) for x in w)))
    assert threaded == [2]  # the second fit ran its pairs two at a time
    (a, wa), (b, wb) = runs
    np.testing.assert_array_equal(a.core_set_, b.core_set_)
    np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    assert wa == wb and any("of 45 pairs, first 0 vs 1]" in m for m in wa), wa
