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
from corevector import chunked
from corevector.chunked import dask_source, local_source, ops as chunked_ops, rows as chunked_rows
from corevector.parallel import pairs
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
    monkeypatch.setattr(local_source, "BLOCK_BYTES", 64 * 1024)
    monkeypatch.setattr(local_source, "MIN_BLOCK_ROWS", 1)
    monkeypatch.setattr(dask_source, "TASK_BYTES", 64 * 1024)
    monkeypatch.setattr(chunked_ops, "WINDOW_START", 512)


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
        assert chunked_rows.source_of(z).persisted   # small against the workers' memory: read once, kept there
        for Xc, share in ((Xd, dask_source.PERSIST_SHARE), (z, dask_source.PERSIST_SHARE), (z, 0.0)):
            # rows persisted on the workers; a store persisted for the fit; chunks read by the workers per pass
            monkeypatch.setattr(dask_source, "PERSIST_SHARE", share)
            if share == 0.0:
                assert not chunked_rows.source_of(z).persisted
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
    del chunked_ops.STATS[:]
    with client.as_current():
        est = CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(da.from_array(X32, chunks=(5000, 2)).persist(), y)
    st = chunked_ops.STATS[-1]
    row_bytes = 2 * 4
    window_max = min(chunked_ops.WINDOW_MAX, len(X) // 4)
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
    del chunked_ops.STATS[:]
    killed = []

    def kill_when_reading():
        t0 = time.time()
        while time.time() - t0 < 30:
            if chunked_ops.STATS and chunked_ops.STATS[-1]["fetch_rounds"] >= 1:
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
    """One-vs-one pairs large enough for their kernel work run one per thread (corevector.parallel.pairs,
    corevector.parallel.tasks._in_threads): the model is the serial fit's bit for bit, and every warning is attributed to
    the pairs it arose in, as in the serial fit."""
    import warnings

    from sklearn.datasets import load_digits
    from threadpoolctl import threadpool_limits

    import corevector.classifier as classifier
    import corevector.parallel.tasks as distributed
    X, y = load_digits(return_X_y=True)
    X, y = X[:500], y[:500]
    threaded = []
    in_threads = distributed._in_threads
    monkeypatch.setattr(distributed, "_in_threads", lambda *a: threaded.append(a[-1]) or in_threads(*a))
    runs = []
    for work in (10**18, 0):
        monkeypatch.setattr(pairs, "PAIR_THREADS_MIN_WORK", work)
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



def _letters(m=1500, seed=0):
    """Twelve classes of overlapping 8-dimensional Gaussians: 66 small one-vs-one pairs."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 12, size=m)
    X = rng.normal(size=(m, 8)) + 1.5 * rng.normal(size=(12, 8))[y]
    return X, y


def _fit_with_pairs_in(processes, X, y, monkeypatch, **params):
    """(model, sorted warning messages, {pid: pairs fitted there}) of the fit with its pairs in ``processes``
    processes (1: one after another)."""
    import warnings

    from threadpoolctl import threadpool_limits

    import corevector.classifier as classifier
    monkeypatch.setattr(pairs, "PAIR_PROCESSES_MIN_WORK", 0 if processes > 1 else 10**18)
    _all_cores_free(monkeypatch)
    fit_pair, set_fitted = classifier.CVMClassifier._fit_pair, classifier.CVMClassifier._set_fitted
    where = {}

    def traced(self, *args):
        return fit_pair(self, *args), os.getpid()

    def untrace(self, X, fits, kept=None):
        for _, pid in fits:
            where[pid] = where.get(pid, 0) + 1
        return set_fitted(self, X, [f for f, _ in fits], kept)

    with monkeypatch.context() as mp:
        mp.setattr(classifier.CVMClassifier, "_fit_pair", traced)
        mp.setattr(classifier.CVMClassifier, "_set_fitted", untrace)
        with threadpool_limits(limits=processes, user_api="openmp"), warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            est = CVMClassifier(random_state=0, **params).fit(X, y)
    return est, sorted(str(x.message) for x in w), where


def _all_cores_free(monkeypatch):
    """The pairs fork whatever else runs beside the test (a busy machine makes them run one after another:
    test_free_cores_leave_out_a_core_another_process_holds)."""
    from corevector.parallel import forked
    monkeypatch.setattr(forked, "free_cores", lambda: 2)


def test_free_cores_leave_out_a_core_another_process_holds():
    """A process spinning at normal priority holds a core: free_cores does not count it, so the pairs do not
    fork onto it; without it, free_cores counts at least one core and at most this process's."""
    _needs_fork()
    import subprocess
    import sys
    import time

    from corevector.parallel.forked import free_cores
    cpus = len(os.sched_getaffinity(0))
    assert 1 <= free_cores() <= cpus
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        assert free_cores() <= max(1, cpus - 1)
    finally:
        spinner.kill()
        spinner.wait()


def _same_model(a, b):
    for key in ("core_set_", "support_", "dual_coef_", "intercept_", "n_iter_", "certified_ratio_"):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key))


def _needs_fork():
    from corevector.parallel.forked import can_fork
    if not can_fork():
        pytest.skip("no fork on this platform: the pairs run one after another there")


def test_small_pairs_in_forked_processes_give_the_serial_model_and_warnings(monkeypatch):
    """Pairs too small for threads run in this process and a forked child (corevector.parallel.forked): the
    model and Platt's sigmoids are the serial fit's bit for bit, every warning a child raised is attributed
    to its pairs as in the serial fit, and the child really fitted some of the pairs."""
    _needs_fork()
    X, y = _letters()
    a, wa, where_a = _fit_with_pairs_in(1, X, y, monkeypatch, max_iter=3, probability=True)
    b, wb, where_b = _fit_with_pairs_in(2, X, y, monkeypatch, max_iter=3, probability=True)
    _same_model(a, b)
    np.testing.assert_array_equal(a.probA_, b.probA_)  # (Platt's folds ran as pairs in processes too)
    np.testing.assert_array_equal(a.probB_, b.probB_)
    assert where_a == {os.getpid(): 66}
    assert len(where_b) == 2 and os.getpid() in where_b and sum(where_b.values()) == 66, where_b
    assert wa == wb and any("max_iter=3" in m and "of 66 pairs" in m for m in wa), wa


def _fit_in_two_processes(monkeypatch, fit_pair):
    """CVMClassifier(random_state=0) fitted on _letters() with its pairs in two processes (this one and a
    forked child) and ``fit_pair`` in place of CVMClassifier._fit_pair."""
    import corevector.classifier as classifier
    from threadpoolctl import threadpool_limits
    monkeypatch.setattr(pairs, "PAIR_PROCESSES_MIN_WORK", 0)
    _all_cores_free(monkeypatch)
    monkeypatch.setattr(classifier.CVMClassifier, "_fit_pair", fit_pair)
    with threadpool_limits(limits=2, user_api="openmp"):
        return CVMClassifier(random_state=0).fit(*_letters())


def test_forked_pairs_raise_the_first_failing_pairs_error(monkeypatch):
    """An error in a pair, in whichever process fits it, is raised by the fit, and it is the error of the
    first failing pair in the serial order (the later one is fitted by the child, whichever is first)."""
    _needs_fork()
    import corevector.classifier as classifier
    fit_pair = classifier.CVMClassifier._fit_pair

    def failing(self, X, y, w, members, a, b, seed):
        if (a, b) in ((0, 5), (3, 4)):
            raise ValueError(f"pair {a} vs {b} failed")
        return fit_pair(self, X, y, w, members, a, b, seed)

    with pytest.raises(ValueError, match="pair 0 vs 5 failed"):
        _fit_in_two_processes(monkeypatch, failing)


def test_an_error_in_a_forked_child_reaches_the_caller(monkeypatch):
    """Every pair a child fits fails (the parent's succeed): the child's exception travels back and the fit
    raises it, with the pairs before it in the serial order fitted here."""
    _needs_fork()
    import corevector.classifier as classifier
    parent, fit_pair = os.getpid(), classifier.CVMClassifier._fit_pair

    def failing_in_child(self, X, y, w, members, a, b, seed):
        if os.getpid() != parent:
            raise ValueError(f"pair {a} vs {b} failed in a child")
        return fit_pair(self, X, y, w, members, a, b, seed)

    with pytest.raises(ValueError, match="failed in a child"):
        _fit_in_two_processes(monkeypatch, failing_in_child)


def test_pairs_of_a_killed_child_are_fitted_again_here(monkeypatch, tmp_path):
    """A forked child that dies mid-fit (killed: it sends nothing) loses no pair: the parent fits the pairs
    no process reported, and the model is the serial fit's."""
    _needs_fork()
    import corevector.classifier as classifier
    X, y = _letters()
    serial, _, _ = _fit_with_pairs_in(1, X, y, monkeypatch)
    parent, fit_pair = os.getpid(), classifier.CVMClassifier._fit_pair

    def dying(self, *args):
        if os.getpid() != parent and not (tmp_path / "killed").exists():
            (tmp_path / "killed").touch()
            os.kill(os.getpid(), signal.SIGKILL)
        return fit_pair(self, *args)

    est = _fit_in_two_processes(monkeypatch, dying)
    assert (tmp_path / "killed").exists()
    _same_model(serial, est)


def test_class_members_are_each_classes_rows_in_order():
    from corevector.classifier import _class_members
    codes = np.random.default_rng(1).integers(0, 7, size=1000)
    members = _class_members(codes, 8)  # (class 7 has no rows)
    for c in range(8):
        np.testing.assert_array_equal(members[c], np.flatnonzero(codes == c))


def test_blas_single_threaded_nests_and_restores_once(monkeypatch):
    """Nested blocks (a fit's pairs, each pair's engine, pairs in threads) set BLAS to one thread with one
    threadpoolctl call, and the caller's threads come back when the last block ends."""
    from threadpoolctl import ThreadpoolController, threadpool_info, threadpool_limits

    from fastimpl import _openmp

    def blas():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    calls = []

    class Counting(ThreadpoolController):
        def limit(self, **kwargs):
            calls.append(kwargs)
            return super().limit(**kwargs)

    monkeypatch.setattr(_openmp, "_CONTROLLER", Counting())
    seen = []

    def inner():
        with _openmp.blas_single_threaded():
            seen.append(set(blas()))

    with threadpool_limits(limits=2, user_api="blas"):
        before = blas()
        with _openmp.blas_single_threaded():
            with _openmp.blas_single_threaded():
                seen.append(set(blas()))
            thread = threading.Thread(target=inner)
            thread.start()
            thread.join()
            seen.append(set(blas()))
        after = blas()
    assert seen == [{1}] * 3 and after == before and calls == [dict(limits=1, user_api="blas")]
