"""The core-set loop on a real Dask cluster (issue 24): a LocalCluster of two worker processes with a memory
limit each.  Fits from persisted Dask arrays and zarr stores give the in-memory fit; independent fits run as
tasks give the same model; a worker killed in any phase of a fit or prediction gives the same model, workers
lost past the retry limit or a lost scheduler one clear error.  The store larger than the workers' memory
together is in tests/test_slow.py (marked slow)."""
from __future__ import annotations

import os
import re
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

from helpers import optional, quick_worker_starts

# per dependency: the cluster's tests skip without Dask, the stores' without zarr; the pairs' tests run anyway
dask, distributed, da, zarr = optional("dask"), optional("distributed"), optional("dask.array"), optional("zarr")

#: the memory limit of each worker of the test cluster
WORKER_LIMIT = 600 * 2**20


def _peak_rss():
    """The process's resident high-water mark (VmHWM: ru_maxrss would carry the parent's over exec)."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


@pytest.fixture(scope="module")
def client():
    dask.config  # (skipped without Dask)
    config = quick_worker_starts()  # a worker killed mid-fit is back in a fraction of the time
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=WORKER_LIMIT,
                                       dashboard_address=None, silence_logs=50)
    c = distributed.Client(cluster, set_as_default=False)
    yield c
    c.close()
    try:
        cluster.close()
    except KeyError:
        # distributed's SpecCluster._update_worker_status looks up a removed worker in scheduler_info, which a
        # worker restarted after the kill tests may already have left (dask/distributed#5407): the cluster's
        # processes are closed by then, only its status watcher raises
        pass
    config.__exit__(None, None, None)


@pytest.fixture(autouse=True)
def small_windows(monkeypatch):
    monkeypatch.setattr(local_source, "BLOCK_BYTES", 64 * 1024)
    monkeypatch.setattr(local_source, "MIN_BLOCK_ROWS", 1)
    monkeypatch.setattr(dask_source, "TASK_BYTES", 64 * 1024)
    monkeypatch.setattr(chunked_ops, "WINDOW_START", 512)
    # (small data keep every row, ops.RESIDENT_ROWS: the windows and stashes are what these tests read)
    monkeypatch.setattr(chunked_ops, "RESIDENT_ROWS", False)


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


def _reset_peak_rss():
    """Reset the process's resident high-water mark to its resident set now (Linux); that resident set."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def test_workers_hold_blocks_not_their_share_of_x(client, tmp_path, monkeypatch):
    """A prediction over a zarr store the workers read per pass (not persisted): each worker's resident
    high-water mark grows by a few blocks (2 MB as float64), their kernel values and its share of the results,
    not by its share of X (51 MB as float32, twice that as the float64 the engines compute on).  Measured:
    6-12 MB, whatever m (50,000 to 400,000 rows)."""
    if not os.path.exists("/proc/self/clear_refs"):
        pytest.skip("needs Linux's /proc/self/clear_refs")
    monkeypatch.setattr(dask_source, "PERSIST_SHARE", 0.0)
    monkeypatch.setattr(dask_source, "TASK_BYTES", 2**20)
    m, d, chunk = 200_000, 128, 2048
    z = zarr.open_array(str(tmp_path / "x.zarr"), mode="w", shape=(m, d), chunks=(chunk, d), dtype="f4")
    rows = np.random.default_rng(0).normal(size=(16, d)).astype(np.float32)
    for lo in range(0, m, 50_000):  # (rows that repeat: a store quick to write, as large once decoded)
        z[lo:lo + 50_000] = np.tile(rows, (50_000 // 16, 1)) + np.float32(lo / m)
    est = CVDD(C=10, gamma=0.01, random_state=0).fit(np.asarray(z[:48], dtype=np.float64))
    with client.as_current():
        est.decision_function(z)  # (once before: what the workers keep after a first prediction is not measured)
        before = client.run(_reset_peak_rss)
        got = est.decision_function(z)
        peaks = client.run(_peak_rss)
    growth = {w: peaks[w] - before[w] for w in before}
    share = m * d * 4 / len(before)
    assert max(growth.values()) < share / 3, (growth, share)
    # (at d >= 16 BLAS's blocks round a row as its block's size has it: equal to the last bits)
    np.testing.assert_allclose(got[::997], est.decision_function(np.asarray(z[::997], dtype=np.float64)), rtol=1e-12)


def test_wide_cluster_fits_take_the_scans_sums_from_the_kernel_block(client):
    """At d >= 16 the certificate's block scans on the workers take each row's sum from the caller's kernel
    block keyed by rows, as far as the row's entries reach, and compute only the rest beside the rows
    (scans._block_and_tail): the in-memory fit's core set, alpha within BLAS's rounding and the certificate
    within the bound, on the cluster and on Dask's local scheduler."""
    rng = np.random.default_rng(5)
    m, d = 5000, 96   # m d above the block's threshold (fastimpl KB_MIN_WORK)
    y = np.where(rng.random(m) < 0.5, 1, -1)
    X = (rng.normal(size=(m, d)) + 0.15 * y[:, None] * rng.normal(size=d)).astype(np.float32)
    a = CVMClassifier(random_state=0).fit(X.astype(np.float64), y)
    Xd = da.from_array(X, chunks=(700, d))
    for where in ("cluster", "local"):
        del chunked_ops.STATS[:]
        if where == "cluster":
            with client.as_current():
                b = CVMClassifier(random_state=0).fit(Xd.persist(), y)
        else:
            b = CVMClassifier(random_state=0).fit(Xd, y)
        st = chunked_ops.STATS[-1]
        assert a.n_iter_ > 5 and np.array_equal(a.core_set_, b.core_set_), where
        np.testing.assert_allclose(b.dual_coef_, a.dual_coef_, rtol=1e-9, atol=1e-12 * np.abs(a.dual_coef_).max())
        assert b.certified_ratio_ <= (1 + 0.01) ** 2 and abs(b.certified_ratio_ - a.certified_ratio_) < 1e-9
        # the certificate read most rows' sums from the block (the draws visit every row several times)
        assert st["scans"] >= 1 and st["scan_block_entries"] > 0.5 * m * min(len(a.core_set_), 128)


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
    assert len(ran) == 3 and {t["worker"] for t in ran} <= set(client.scheduler_info()["workers"])
    for ca, cb in zip(a.expansion_coef_, b.expansion_coef_):
        assert np.array_equal(ca, cb)
    assert all(np.array_equal(p, q) for p, q in zip(a.expansion_index_, b.expansion_index_))
    assert np.array_equal(a.transform(X), b.transform(X)) and np.array_equal(a.n_iter_, b.n_iter_)


# ------------------------------------------------------------------------------------------------ faults
#: worker kills per phase: in the default suite, and marked slow
KILLS, KILLS_SLOW = 2, 10
#: the phases a worker is killed in, and the fit each needs: the sampled fit reads ahead and ends with the
#: certificate; with confirmations that cover every point, the loop's confirmations are full scans
KILL_PHASES = ("read-ahead", "full scan", "certificate", "prediction")


class _Killer:
    """dask_source.CALL_HOOK that kills the worker ``pid`` during the ``k``-th call of ``phase``: ``delay``
    seconds into it or at its end, whichever comes first, while the call runs (under the source's lock, so
    that the call cannot end in between).  ``hit`` records the phase that was running at the kill."""

    def __init__(self, phase, k, delay, pid):
        self.phase, self.k, self.delay, self.pid = phase, k, delay, pid
        self.hit, self.sources = [], set()

    def _kill(self, src):
        assert src.running[self.phase] > 0 and src.calls[self.phase] == self.k
        os.kill(self.pid, signal.SIGKILL)
        self.hit.append(self.phase)

    def __call__(self, src, phase, event, attempt):
        self.sources.add(src)
        if phase != self.phase or self.hit or src.calls[phase] != self.k:
            return
        if event == "end":
            self._kill(src)
        elif attempt == 0:
            def later():
                time.sleep(self.delay)
                with src.lock:
                    if not self.hit and src.calls[self.phase] == self.k and src.running[self.phase] > 0:
                        self._kill(src)
            threading.Thread(target=later, daemon=True).start()

    @property
    def losses(self):
        return [loss for src in self.sources for loss in src.losses]


def _fault_data(m=6000):
    X32, X, y, _, _ = _data(m)
    return X32, X, y


@pytest.fixture(scope="module")
def fault_refs(tmp_path_factory):
    """The in-memory models and decision values the fits under kills must give, and a zarr store to predict on."""
    X32, X, y = _fault_data()
    sampled = dict(C=1e4, gamma=1.0, random_state=0)
    full = dict(sampled, n_confirm=len(X) // 59 + 1)   # every confirmation a full scan
    ref = {"sampled": CVMClassifier(**sampled).fit(X, y), "full": CVMClassifier(**full).fit(X, y)}
    z = zarr.open_array(str(tmp_path_factory.mktemp("faults") / "x.zarr"), mode="w", shape=X32.shape,
                        chunks=(500, 2), dtype="f4")
    z[:] = X32
    return dict(X32=X32, X=X, y=y, params={"sampled": sampled, "full": full}, ref=ref, zarr=z,
                decision=ref["sampled"].decision_function(X))


def _two_workers(client):
    """The process ids of the cluster's two workers, once both run (a worker just killed may still be listed)."""
    deadline = time.time() + 120
    while time.time() < deadline:
        client.wait_for_workers(2, timeout=120)
        pids = client.run(os.getpid, on_error="ignore")
        if len(pids) == 2:
            return sorted(pids.values())
        time.sleep(0.2)
    raise TimeoutError("the cluster did not get its two workers back")


def _kills_in_phase(client, refs, phase, kills, seed, monkeypatch):
    """``kills`` fits (or predictions), each with a worker killed during ``phase`` at a seeded random moment (which
    call of the phase, how far into it, which worker); every one gives the in-memory model (or decision values)
    bit for bit.  Returns the losses the sources noticed."""
    rng = np.random.default_rng([seed, KILL_PHASES.index(phase)])
    losses = []
    Xd = da.from_array(refs["X32"], chunks=(1000, 2)).persist()
    for _ in range(kills):
        pids = _two_workers(client)
        k = 1 if phase in ("certificate", "prediction") else int(rng.integers(1, 4))
        killer = _Killer(phase, k, float(rng.uniform(0.0, 0.1)), pids[int(rng.integers(2))])
        monkeypatch.setattr(dask_source, "CALL_HOOK", killer)
        kind = "full" if phase == "full scan" else "sampled"
        if phase == "prediction":
            got = refs["ref"][kind].decision_function(refs["zarr"])
            assert np.array_equal(got, refs["decision"])
        else:
            est = CVMClassifier(**refs["params"][kind]).fit(Xd, refs["y"])
            ref = refs["ref"][kind]
            assert np.array_equal(ref.core_set_, est.core_set_) and np.array_equal(ref.dual_coef_, est.dual_coef_)
            assert np.array_equal(ref.intercept_, est.intercept_)
        monkeypatch.setattr(dask_source, "CALL_HOOK", None)
        assert killer.hit == [phase]  # the kill (SIGKILL) landed while a call of this phase ran
        losses += killer.losses
    return losses


def _kill_every_phase(client, refs, kills, monkeypatch):
    """Kills in every phase; the lost labels were noticed and scattered again in some fit (the kills that a
    later pass notices are the ones the retry must repair: without its re-scatter those fits fail)."""
    noticed = []
    with client.as_current():
        for phase in KILL_PHASES:
            noticed += _kills_in_phase(client, refs, phase, kills, 0, monkeypatch)
        _two_workers(client)
    assert noticed, "no kill caused a failure the retry had to repair"
    assert {p for p, _ in noticed} <= set(KILL_PHASES) | {"row fetch", "initialisation", "validation"}


def test_a_worker_lost_in_every_phase_gives_the_in_memory_model(client, fault_refs, monkeypatch):
    """A worker process killed during the read-ahead, a full scan, the certificate and a prediction: Dask
    recomputes its blocks, what was scattered to it is scattered again, and every fit (prediction) gives the
    in-memory model (decision values) bit for bit.  The slow version kills 10 times per phase."""
    _kill_every_phase(client, fault_refs, KILLS, monkeypatch)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_worker_lost_in_every_phase_many_times(client, fault_refs, monkeypatch):
    _kill_every_phase(client, fault_refs, KILLS_SLOW, monkeypatch)


def test_workers_lost_past_the_retry_limit_give_one_clear_error(client, fault_refs, monkeypatch):
    """Every attempt of a full scan loses a worker (first one, then the other): after ATTEMPTS attempts the fit
    stops with one RuntimeError that says how many workers were lost, when, and in which pass."""
    monkeypatch.setattr(dask_source, "ATTEMPTS", 2)
    refs = fault_refs
    with client.as_current():
        pids = _two_workers(client)
        killed = []

        def hook(src, phase, event, attempt):
            if phase == "full scan" and event == "attempt" and len(killed) == attempt < 2:
                os.kill(pids[attempt], signal.SIGKILL)
                killed.append(attempt)

        monkeypatch.setattr(dask_source, "CALL_HOOK", hook)
        Xd = da.from_array(refs["X32"], chunks=(1000, 2)).persist()
        try:
            with pytest.raises(RuntimeError) as exc:
                CVMClassifier(**refs["params"]["full"]).fit(Xd, refs["y"])
        finally:
            monkeypatch.setattr(dask_source, "CALL_HOOK", None)
            _two_workers(client)
    text = str(exc.value)
    assert killed == [0, 1]
    assert re.search(r"the Dask cluster lost 2 workers \(tcp://\S+ at \d+\.\d s, tcp://\S+ at \d+\.\d s\)", text), text
    assert re.search(r"noticed by the full scan at \d+\.\d s, the full scan at \d+\.\d s", text), text
    assert "the full scan failed 2 times in a row" in text and "\n" not in text


@pytest.mark.timeout(180)
def test_a_lost_scheduler_ends_the_fit_with_a_clear_error(tmp_path, monkeypatch):
    """The scheduler (a process of its own, one worker beside it) killed during a full scan: the fit stops at
    once with a RuntimeError naming the lost scheduler and the pass, not after the client's reconnection
    timeout (30 s) and not with a bare connection error."""
    import subprocess
    import sys
    Client, from_array = distributed.Client, da.from_array  # (skipped without them)
    refs_X32, _, y = _fault_data(3000)
    file = tmp_path / "scheduler.json"
    py = [sys.executable, "-m"]
    quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sched = subprocess.Popen(py + ["distributed.cli.dask_scheduler", "--scheduler-file", str(file), "--host",
                                   "127.0.0.1", "--port", "0", "--no-dashboard"], **quiet)
    # (the worker waits for the scheduler's file)
    worker = subprocess.Popen(py + ["distributed.cli.dask_worker", "--scheduler-file", str(file), "--nthreads", "1",
                                    "--no-nanny", "--no-dashboard"], **quiet)
    try:
        deadline = time.time() + 60
        while not file.exists() and time.time() < deadline:
            time.sleep(0.1)
        c = Client(scheduler_file=str(file), set_as_default=False, timeout=60)
        c.wait_for_workers(1, timeout=60)
        killed = []

        def hook(src, phase, event, attempt):
            if phase == "full scan" and event == "attempt" and not killed:
                sched.kill()
                killed.append(time.time())

        monkeypatch.setattr(dask_source, "CALL_HOOK", hook)
        with c.as_current():
            Xd = from_array(refs_X32, chunks=(500, 2)).persist()
            with pytest.raises(RuntimeError) as exc:
                CVMClassifier(C=1e4, gamma=1.0, random_state=0, n_confirm=3000 // 59 + 1).fit(Xd, y)
        waited = time.time() - killed[0]
        monkeypatch.setattr(dask_source, "CALL_HOOK", None)
    finally:
        for proc in (sched, worker):
            proc.kill()
            proc.wait()  # (a Popen left unreaped warns when collected, inside another test's warning records)
    text = str(exc.value)
    assert re.fullmatch(r"the Dask client lost its scheduler \(tcp://127\.0\.0\.1:\d+\) during the full scan, "
                        r"\d+\.\d s from the start of the fit or prediction: .*start the scheduler again and run "
                        r"it again", text), text
    assert waited < 15, waited
    c.close(timeout=5)


def test_a_damaged_chunk_read_on_a_worker_is_one_error_naming_it(client, tmp_path):
    """A zarr store read by the workers (dask_from_zarr's tasks) with one chunk that fails to decode: the fit
    raises the workers' DamagedStoreError naming the store, the array and the chunk's rows, not retried as a
    lost worker."""
    X32, X, y, _, _ = _data(3000)
    z = zarr.open_array(str(tmp_path / "x.zarr"), mode="w", shape=X32.shape, chunks=(500, 2), dtype="f4")
    z[:] = X32
    (tmp_path / "x.zarr" / "c" / "2" / "0").write_bytes(b"not a zstd frame" * 4)
    with client.as_current():
        with pytest.raises(local_source.DamagedStoreError,
                           match=re.escape(f"{tmp_path / 'x.zarr'}: array '/': rows 1000-1499 cannot be read")):
            CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(zarr.open_array(str(tmp_path / "x.zarr"), mode="r"), y)


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
            warnings.simplefilter("ignore", ResourceWarning)  # (finalizers of other tests' objects)
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
        # (a pair at max_iter=3 takes well under a millisecond: the pause keeps this process from taking every
        # pair before a forked child, slow to start on a loaded machine, asks for one; the model is unchanged)
        if processes > 1:
            time.sleep(0.003)
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
            warnings.simplefilter("ignore", ResourceWarning)  # (finalizers of other tests' objects)
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
