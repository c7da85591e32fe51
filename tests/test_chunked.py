"""Chunked inputs (issue 24): memory maps, zarr, HDF5 and Dask arrays give the in-memory fit, on real
components (zarr and HDF5 files on disk, Dask's local scheduler; the LocalCluster tests are in
tests/test_distributed.py).

With a numeric gamma the fits are compared bit for bit: the same core set, the same alpha (dual_coef_),
whatever the chunking.  gamma='scale'/'beta' come from variances merged per block (last-bit differences),
so those fits are compared through the (1+eps)^2 bound of full scans instead.
"""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from corevector import CVDD, CVR, MEB, CVMClassifier
from corevector import chunked
from corevector.chunked import dask_source, local_source, ops as chunked_ops, rows as chunked_rows, scans as chunked_scans
from corevector.chunked import full_scans as chunked_full_scans
from corevector.numerics import numerics
from refimpl.datasets import checkerboard

from helpers import optional

# per dependency: a test skips when what it reads is missing, the others run
zarr, h5py, da = optional("zarr"), optional("h5py"), optional("dask.array")


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """Many blocks and small windows of draws ahead even on small data."""
    monkeypatch.setattr(local_source, "BLOCK_BYTES", 16 * 1024)
    monkeypatch.setattr(local_source, "MIN_BLOCK_ROWS", 1)
    monkeypatch.setattr(chunked_ops, "WINDOW_START", 256)
    # (small data keep every row, ops.RESIDENT_ROWS: the windows and stashes are what these tests read)
    monkeypatch.setattr(chunked_ops, "RESIDENT_ROWS", False)


def _data(m=3000, seed=0):
    X, y = checkerboard(m, random_state=seed)
    X = X.astype(np.float32).astype(np.float64)  # float32 on disk: the same values in memory
    rng = np.random.default_rng(seed)
    y3 = (X[:, 0] > 2).astype(int) + (X[:, 1] > 3)
    yr = np.sin(X[:, 0]) + X[:, 1] + 0.1 * rng.normal(size=len(X))
    w = rng.uniform(0.5, 2.0, size=len(X))
    return X, y, y3, yr, w


class _Stores(dict):
    """The stores built; a kind whose library is missing skips the test that asks for it."""

    def __missing__(self, kind):
        pytest.skip(f"no {kind} store: {self.missing[kind]}")


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    X, *_ = _data()
    tmp = tmp_path_factory.mktemp("stores")
    x32 = X.astype(np.float32)
    np.save(tmp / "x.npy", x32)
    out, h5 = _Stores(memmap=np.load(tmp / "x.npy", mmap_mode="r")), None
    out.missing = {}
    try:
        z = zarr.open_array(str(tmp / "x.zarr"), mode="w", shape=x32.shape, chunks=(700, 2), dtype="f4")
        z[:] = x32
        out["zarr"] = zarr.open_array(str(tmp / "x.zarr"), mode="r")
    except pytest.skip.Exception as exc:
        out.missing["zarr"] = str(exc)
    try:
        with h5py.File(tmp / "x.h5", "w") as f:
            f.create_dataset("X", data=x32, chunks=(500, 2))
        h5 = h5py.File(tmp / "x.h5", "r")
        out["h5py"] = h5["X"]
    except pytest.skip.Exception as exc:
        out.missing["h5py"] = str(exc)
    try:
        out["dask"] = da.from_array(x32, chunks=(900, 2))
    except pytest.skip.Exception as exc:
        out.missing["dask"] = str(exc)
    yield out
    if h5 is not None:
        h5.close()


def _same_fit(a, b):
    assert np.array_equal(a.core_set_, b.core_set_)
    assert np.array_equal(a.dual_coef_, b.dual_coef_)
    assert np.array_equal(a.intercept_, b.intercept_)
    assert np.array_equal(np.asarray(a.certified_ratio_), np.asarray(b.certified_ratio_))


def test_draws_are_one_stream():
    """The premise of drawing ahead: NumPy's Generator gives the same values for a stream of draws from
    [0, n) whether it is cut into one call or into the driver's calls (a scalar, samples, confirmation
    blocks)."""
    for n in (7, 3000, 10**8, 5 * 10**9):
        a, b = np.random.default_rng(3), np.random.default_rng(3)
        cut = [int(a.integers(0, n))] + list(a.integers(0, n, size=59)) + list(a.integers(0, n, size=118)) \
            + [int(a.integers(0, n))] + list(a.integers(0, n, size=4))
        assert cut == list(b.integers(0, n, size=len(cut)))


@pytest.mark.parametrize("kind", ["memmap", "zarr", "h5py", "dask"])
def test_binary_same_fit_and_predictions(stores, kind):
    X, y, *_ = _data()
    Xc = stores[kind]
    a = CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(X, y)
    b = CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(Xc, y)
    _same_fit(a, b)
    assert b.support_vectors_.dtype == np.float64 and isinstance(b.support_vectors_, np.ndarray)
    dec = b.decision_function(Xc)
    if kind == "dask":
        assert isinstance(dec, da.Array)  # a Dask array in, a Dask array out
        dec = dec.compute()
    assert np.array_equal(dec, a.decision_function(X))
    assert b.score(Xc, y) == a.score(X, y)


@pytest.mark.parametrize("resident", [False, True])
@pytest.mark.parametrize("impl", ["fast", "ref"])
def test_every_formulation_same_fit(stores, impl, resident, monkeypatch):
    """One-vs-one pairs (row subsets of the store), the one-class L2-SVM with per-point weights (a varying
    ridge: the generalized CVM's eta), the hard MEB with a polynomial kernel (a non-constant diagonal), and
    CVR (2m mirrored points, targets in the offsets): the in-memory fit's core set and alpha, from windows of
    draws read ahead and from a buffer holding every row (``resident``)."""
    monkeypatch.setattr(chunked_ops, "RESIDENT_ROWS", resident)
    X, y, y3, yr, w = _data()
    Xc = stores["zarr"]
    m = 3000 if impl == "fast" else 800
    if impl == "ref":
        Xc, X, y3, yr, w = da.from_zarr(Xc)[:m], X[:m], y3[:m], yr[:m], w[:m]
    opts = dict(random_state=0, impl=impl)
    cases = [(CVMClassifier(C=10, gamma=1.0, **opts), (y3,), {}),
             (CVDD(C=10, gamma=1.0, **opts), (), {"sample_weight": w}),
             (MEB(kernel="poly", gamma=0.5, eps=1e-3, **opts), (), {}),
             (CVR(C=1.0, gamma=1.0, eps=0.1, stop="radius", **opts), (yr,), {})]
    for est, args, kw in cases:
        a = est.fit(X, *args, **kw)
        a_attrs = (a.core_set_.copy(), a.dual_coef_.copy(), np.copy(a.intercept_))
        b = est.__class__(**est.get_params()).fit(Xc, *args, **kw)
        assert np.array_equal(a_attrs[0], b.core_set_), type(est).__name__
        if isinstance(est, MEB) and not isinstance(est, CVDD):
            # the polynomial diagonal of the full scans is NumPy's, the engine's is C's: last bits only
            np.testing.assert_allclose(b.dual_coef_, a_attrs[1], rtol=1e-9)
        else:
            assert np.array_equal(a_attrs[1], b.dual_coef_), type(est).__name__
            assert np.array_equal(a_attrs[2], b.intercept_), type(est).__name__
        # the per-row methods and score of one model (b) on the chunked rows and on X in memory: the same
        for name in ("predict", "decision_function", "score_samples"):
            if hasattr(b, name):
                got = getattr(b, name)(Xc)
                got = got.compute() if hasattr(got, "compute") else got
                np.testing.assert_allclose(got, getattr(b, name)(X), rtol=1e-12, atol=1e-12, err_msg=name)
        if args:
            assert np.isclose(b.score(Xc, *args), b.score(X, *args), rtol=1e-12), type(est).__name__


def _small_buffer(monkeypatch):
    """A row buffer of CORE_ROWS = 100 + three windows of 1,024 slots, and stashes of 1,024 positions."""
    monkeypatch.setattr(chunked_ops, "CORE_ROWS", 100)
    monkeypatch.setattr(chunked_ops, "STASH_POSITIONS", 1000)
    monkeypatch.setattr(chunked_ops, "WINDOW_MAX", 1024)


@pytest.mark.parametrize("kind", ["zarr", "dask"])
def test_small_data_keep_every_row_read_once(stores, kind, monkeypatch, tmp_path):
    """Where every row held takes no more than the windows would (small data: the slots and two stashes),
    one pass in order fills the buffer before the first draw: no stash is read, no row is installed twice,
    the full scans read the buffer (a zarr store is read twice in all: the validation pass and this one), and the model is
    the in-memory one (a Dask input: one pass on the workers, the validation); with a buffer smaller than X the
    windows of draws read ahead serve the fit."""
    X, y, *_ = _data()
    a = CVMClassifier(C=1e4, gamma=1.0, sample_size=None, random_state=0).fit(X, y)  # (full scans only)
    monkeypatch.setattr(chunked_ops, "RESIDENT_ROWS", True)
    reads, passes = [], []
    read, dmap = local_source.LocalSource.read, dask_source.DaskSource.map
    monkeypatch.setattr(local_source.LocalSource, "read",
                        lambda self, b: reads.append(not isinstance(self.arr, np.ndarray)) or read(self, b))
    monkeypatch.setattr(dask_source.DaskSource, "map", lambda self, *a, **k: passes.append(k) or dmap(self, *a, **k))
    del chunked_ops.STATS[:]
    _same_fit(a, CVMClassifier(C=1e4, gamma=1.0, sample_size=None, random_state=0).fit(stores[kind], y))
    st = chunked_ops.STATS[-1]
    assert st["stash_rounds"] == 0 and st["fetch_rounds"] == 1 and st["extra_fetch_rows"] == 0
    assert st["fetch_rows"] == len(X) and st["sent_bytes"] == len(X) * X.shape[1] * 4  # (float32 rows)
    assert st["scans"] > 3 and reads.count(False) >= st["scans"]  # (the buffer's blocks, a scan each)
    if kind == "zarr":
        assert reads.count(True) == 2 * (len(local_source.LocalSource(stores["zarr"]).bounds) - 1)
    else:  # a Dask input: the validation pass on the workers, then its rows cross once; no scan runs there
        assert len(passes) == 1
    # a buffer smaller than X (CORE_ROWS + three windows of 1,024 rows and two stashes of 1,024 < 6,000 rows):
    # windows, as before
    _small_buffer(monkeypatch)
    X, y, *_ = _data(6000)
    Xc = da.from_array(X.astype(np.float32), chunks=(900, 2)) if kind == "dask" else stores[kind]
    if kind == "zarr":
        Xc = zarr.open_array(str(tmp_path / "x.zarr"), mode="w", shape=X.shape, chunks=(700, 2), dtype="f4")
        Xc[:] = X
    del chunked_ops.STATS[:]
    _same_fit(CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(X, y),
              CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(Xc, y))
    assert chunked_ops.STATS[-1]["stash_rounds"] >= 1


def test_a_held_row_counts_its_bookkeeping(stores, monkeypatch):
    """The every-row rule weighs a held row's slot bookkeeping (RESIDENT_ROW_BYTES) beside its 8 d bytes:
    on narrow rows it outweighs the coordinates (10^6 x 2 held whole grew the caller by 115 MB for a 15 MB X).
    Here the slots and two stashes (3,172 + 2 x 1,024 float32 rows) hold 3,000 rows' coordinates but not their
    bookkeeping: the fit keeps its windows, and only without the bookkeeping would it hold every row."""
    X, y, *_ = _data()
    monkeypatch.setattr(chunked_ops, "RESIDENT_ROWS", True)
    _small_buffer(monkeypatch)
    a = CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(X, y)
    rounds = []
    for row_bytes in (chunked_ops.RESIDENT_ROW_BYTES, 0):
        monkeypatch.setattr(chunked_ops, "RESIDENT_ROW_BYTES", row_bytes)
        del chunked_ops.STATS[:]
        _same_fit(a, CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(stores["zarr"], y))
        rounds.append(chunked_ops.STATS[-1]["stash_rounds"])
    assert rounds[0] >= 1 and rounds[1] == 0


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_gamma_scale_within_the_bound(stores):
    """gamma='scale' from per-block variances: not bit for bit, but both fits under full scans are within
    the (1+eps)^2 bound of the same ball, and give the same predictions."""
    X, y, *_ = _data()
    eps = 1e-3
    opts = dict(C=100, gamma="scale", eps=eps, stop="radius", sample_size=None, random_state=0)
    a = CVMClassifier(**opts).fit(X, y)
    b = CVMClassifier(**opts).fit(stores["h5py"], y)
    assert b.kernel_spec_.gamma == pytest.approx(a.kernel_spec_.gamma, rel=1e-12)
    bound = (1 + eps) ** 2
    assert a.certified_ratio_ <= bound * (1 + 1e-7) and b.certified_ratio_ <= bound * (1 + 1e-7)
    # each fit's R^2 is a lower bound of r*^2 and its r_cert^2 an upper bound: they bracket each other
    Ra, Rb = a.radius_ ** 2, b.radius_ ** 2
    assert Rb <= bound * Ra * (1 + 1e-7) and Ra <= bound * Rb * (1 + 1e-7)
    assert np.mean(a.predict(X) == b.predict(stores["h5py"])) > 0.999


def test_float64_memmap_is_read_in_place(tmp_path):
    """A float64 C-ordered map takes the in-memory path: the engines read it where it is, without a copy."""
    X, y, *_ = _data(1000)
    np.save(tmp_path / "x.npy", X)
    Xm = np.load(tmp_path / "x.npy", mmap_mode="r")
    assert not chunked.needs_chunked(Xm) and chunked.needs_chunked(Xm.astype(np.float32))
    _same_fit(CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(X, y),
              CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(Xm, y))


def test_support_vectors_come_from_the_rows_the_fit_held(stores, monkeypatch):
    """The fit holds its core vectors' rows (the support vectors among them): reading the support vectors
    afterwards reads no block of the store, and gives the in-memory fit's rows."""
    X, y, *_ = _data()
    reads, during = [], []
    read, materialize = local_source.LocalSource.read, chunked.ChunkedRows.materialize
    monkeypatch.setattr(local_source.LocalSource, "read", lambda self, b: reads.append(b) or read(self, b))

    def counted(self):
        n0 = len(reads)
        out = materialize(self)
        during.append(len(reads) - n0)
        return out
    monkeypatch.setattr(chunked.ChunkedRows, "materialize", counted)
    b = CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(stores["zarr"], y)
    a = CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(X, y)
    assert reads and during == [0]
    assert np.array_equal(a.support_vectors_, b.support_vectors_)


def test_take_reads_only_the_rows_it_does_not_keep(stores, monkeypatch):
    """Rows kept on the source come from memory, the others from the store, in the order asked."""
    full = np.asarray(stores["zarr"][:], dtype=np.float64)
    Xc = chunked.ChunkedRows.of(stores["zarr"])
    Xc.source.remember([3, 10, 2999], full[[3, 10, 2999]])
    reads = []
    read = local_source.LocalSource.read
    monkeypatch.setattr(local_source.LocalSource, "read", lambda self, b: reads.append(b) or read(self, b))
    assert np.array_equal(Xc.take([10, 3, 2999]), full[[10, 3, 2999]]) and reads == []
    assert np.array_equal(Xc.take([2999, 1500, 3]), full[[2999, 1500, 3]]) and len(reads) == 1


def test_rows_fetched_per_draw_do_not_grow_with_m(tmp_path):
    """Draws are read ahead in windows, never one row a round trip, and the rows fetched are the draws': at
    most one row per drawn position plus the last window read ahead, and the bytes per drawn position at
    m = 20,000 are those at m = 2,000 (not a pass over the store per window).  (The draws per iteration are
    the driver's, the in-memory fit's: confirmations draw more of them at larger m.)"""
    per_draw = {}
    for m in (2000, 20000):
        X, y = checkerboard(m, random_state=1)
        z = zarr.open_array(str(tmp_path / f"x{m}.zarr"), mode="w", shape=X.shape, chunks=(1000, 2), dtype="f8")
        z[:] = X
        del chunked_ops.STATS[:]
        est = CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(z, y)
        st = chunked_ops.STATS[-1]
        window = max(1024, min(chunked_ops.WINDOW_MAX, m // 4))
        # one round trip serves many draws (the driver's calls), and no row is fetched alone
        assert 5 * st["fetch_rounds"] <= st["draws"] and st["extra_fetch_rows"] <= 64 * 4
        assert st["fetch_rows"] <= st["positions"] + window
        per_draw[m] = st["fetch_bytes"] / st["positions"]
        # bytes per block of a full scan: a few hundred, whatever the block's rows
        assert st["scan_bytes"] / max(st["scan_blocks"], 1) < 4096 and est.n_iter_ > 10
    assert per_draw[20000] <= 1.5 * per_draw[2000], per_draw


def test_scans_merged_beside_the_data(tmp_path, monkeypatch):
    """A full scan sends one result to the client, merged per slice and in a tree over the blocks; with
    every candidate tied three times and band lists of one (BAND_KEEP = 1), the merged lists are cut and
    the second pass finds the in-memory fit's furthest point: the same fit, full scans every iteration."""
    monkeypatch.setattr(chunked_scans, "BAND_KEEP", 1)
    monkeypatch.setattr(chunked_rows, "SUB_ROWS", 64)
    X, y = checkerboard(400, random_state=2)
    X, y = np.concatenate([X, X, X]), np.concatenate([y, y, y])
    z = zarr.open_array(str(tmp_path / "t.zarr"), mode="w", shape=X.shape, chunks=(150, 2), dtype="f8")
    z[:] = X
    for est in (CVMClassifier(C=100, gamma=1.0, sample_size=None, random_state=0),
                MEB(gamma=1.0, sample_size=None, eps=1e-3, random_state=0)):
        a = est.fit(X, y)
        a_attrs = (a.core_set_.copy(), a.dual_coef_.copy())
        for Xc in (z, da.from_array(X, chunks=250)):
            del chunked_ops.STATS[:]
            b = est.__class__(**est.get_params()).fit(Xc, y)
            assert np.array_equal(a_attrs[0], b.core_set_) and np.array_equal(a_attrs[1], b.dual_coef_)
            st = chunked_ops.STATS[-1]
            assert st["scans"] > 3 and st["scan_bytes"] / st["scans"] < 2048  # one small result per scan


def test_chunked_validation(tmp_path):
    X, y, *_ = _data(500)
    bad = X.copy()
    bad[123, 1] = np.nan
    z = zarr.open_array(str(tmp_path / "nan.zarr"), mode="w", shape=X.shape, chunks=(100, 2), dtype="f8")
    z[:] = bad
    with pytest.raises(ValueError, match="Input X contains NaN"):
        CVMClassifier().fit(z, y)
    bad[123, 1] = np.inf
    z[:] = bad
    with pytest.raises(ValueError, match="Input X contains infinity"):
        MEB().fit(z)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        CVMClassifier().fit(da.from_array(X, chunks=100), y[:-1])
    with pytest.raises(ValueError, match="minimum of 2 is required by CVDD"):
        CVDD().fit(da.from_array(X[:1], chunks=1))
    one = zarr.open_array(str(tmp_path / "one.zarr"), mode="w", shape=(500,), chunks=(100,), dtype="f8")
    with pytest.raises(ValueError, match="Expected 2D array"):
        MEB().fit(one)
    const = da.from_array(np.ones((50, 2)) * 1e-170, chunks=10)
    with pytest.raises(ValueError, match="gamma='scale' cannot be computed"):
        CVDD(gamma="scale").fit(const + da.from_array(np.arange(100.0).reshape(50, 2) * 1e-170, chunks=10))
    est = CVMClassifier(gamma=1.0, random_state=0).fit(da.from_array(X, chunks=100), y)
    with pytest.raises(ValueError, match="X has 3 features, but CVMClassifier is expecting 2"):
        est.predict(da.from_array(np.zeros((10, 3)), chunks=5))


def test_large_views_are_not_read_whole(stores, monkeypatch):
    monkeypatch.setattr(chunked_rows, "MATERIALIZE_BYTES", 1024)
    Xc = chunked.ChunkedRows.of(stores["zarr"])
    with pytest.raises(TypeError, match="would be read whole"):
        np.asarray(Xc)
    assert np.array_equal(Xc.take([5, 1, 5]), np.asarray(stores["zarr"])[[5, 1, 5]].astype(np.float64))


def test_generator_is_seeded_and_written_by_chunks(tmp_path):
    """corevector.infinite: rows depend on (seed, batch) only, labels are the source images' labels, pixels
    stay in [0, 1]."""
    from corevector import infinite
    try:
        images, labels = infinite.source_images()
    except ValueError:
        pytest.skip("Fashion-MNIST (Debian's dataset-fashion-mnist) is not available")
    root = infinite.write_zarr(tmp_path / "g.zarr", 300, seed=3, chunk_rows=50, shard_rows=100)
    X, y = np.asarray(root["X"]), np.asarray(root["y"])
    again, y2 = infinite.deformed(images, labels, 100, 100, 3)
    assert np.array_equal(X[100:200], again) and np.array_equal(y[100:200], y2)
    src = np.random.default_rng([3, 100]).integers(0, len(images), size=100)
    assert np.array_equal(y2, labels[src]) and X.dtype == np.float32 and 0 <= X.min() and X.max() <= 1
    assert not np.array_equal(X[100:200], images[src].reshape(100, 784))  # deformed, not copied


@pytest.mark.parametrize("d", [2, 40])
def test_validation_statistics_are_numpys(d):
    """The validation pass's statistics, merged over uneven blocks (one empty), are NumPy's on the whole
    array; the column sums that stand in for the finiteness test report neither NaN nor infinity for
    finite entries whose sum overflows, and name each kind when present."""
    from corevector.chunked.stats import block_stats, merge_stats
    X = np.random.default_rng(d).normal(size=(3000, d)) * 3.0 + np.arange(d)
    cuts = [0, 1, 700, 700, 2100, 3000]
    st = merge_stats([block_stats(X[a:b], None, None) for a, b in zip(cuts, cuts[1:])], d)
    assert st["n"] == len(X) and not st["nan"] and not st["inf"]
    np.testing.assert_allclose(st["col_var"], X.var(axis=0), rtol=1e-12)
    assert st["var"] == pytest.approx(X.var(), rel=1e-12)
    np.testing.assert_array_equal(st["min"], X.min(axis=0))
    np.testing.assert_array_equal(st["max"], X.max(axis=0))
    assert st["absmax"] == np.abs(X).max()
    assert st["sqmax"] == pytest.approx(np.einsum("ij,ij->i", X, X).max(), rel=1e-14)
    big = np.full((4, d), 1e308)
    assert not block_stats(big, None, None)["inf"] and not block_stats(big, None, None)["nan"]
    for bad, key in ((np.nan, "nan"), (np.inf, "inf"), (-np.inf, "inf")):
        Y = X.copy()
        Y[17, d - 1] = bad
        part = block_stats(Y, None, None)
        assert part[key] and not part["nan" if key == "inf" else "inf"]


@pytest.mark.parametrize("stash", [1000, 1 << 19])
def test_windows_come_from_stashes_read_ahead(stores, monkeypatch, stash):
    """The rows of many windows of draws come from one read (a stash): stashes of 1,024 positions (the
    smallest, a window's) or 1,500 (half the points) against windows of 256, 512, 1,024 positions, so that
    windows straddle two stashes and take their rows from both; the model is the in-memory one either way,
    and a stash larger than a window serves several."""
    monkeypatch.setattr(chunked_ops, "STASH_POSITIONS", stash)
    X, y, *_ = _data()
    a = CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(X, y)
    del chunked_ops.STATS[:]
    b = CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(stores["zarr"], y)
    _same_fit(a, b)
    st = chunked_ops.STATS[-1]
    size = 1024 if stash == 1000 else len(X) // 2
    assert st["fetch_rounds"] >= 3 and st["stash_rounds"] <= st["fetch_rounds"]
    if stash != 1000:  # stashes larger than a window serve several
        assert st["stash_rounds"] < st["fetch_rounds"]
    # as many reads as the positions drawn need, those of the window read ahead and of the one after it
    assert (st["stash_rounds"] - 3) * size < st["positions"] <= st["stash_rounds"] * size


def test_rows_out_of_range_raise():
    """A view's rows follow NumPy's indexing: negative indices count from the end, others out of range
    raise IndexError (never rows of uninitialised memory)."""
    X, *_ = _data(100)
    Xc = chunked.ChunkedRows.of(zarr.array(X, chunks=(30, 2)))
    np.testing.assert_array_equal(Xc.take([-1, 0]), X[[-1, 0]])
    np.testing.assert_array_equal(Xc[[0, 5, -1]].take([2, 0]), X[[99, 0]])
    for bad in ([100], [-101], [0, 100]):
        with pytest.raises(IndexError, match="out of range"):
            Xc.take(bad)
    with pytest.raises(IndexError, match="out of range"):
        Xc[[3, 100]]


def _resident_kb(path):
    """Resident kB of this process's mappings of ``path`` (/proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if head and "-" in head[0] and len(head) >= 5:  # a mapping's header line
                inside = line.rstrip().endswith(str(path))
            elif inside and line.startswith("Rss:"):
                total += int(head[1])
    return total


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/smaps"), reason="needs Linux's /proc/self/smaps")
def test_memory_map_pages_leave_the_resident_set(tmp_path, monkeypatch):
    """A pass over a read-only memory map (the validation statistics, the rows of a stash) leaves at most a
    block's pages resident, not the file; a copy-on-write map keeps its pages, and with them the caller's
    writes, which the pass reads."""
    monkeypatch.setattr(local_source, "BLOCK_BYTES", 1 << 20)
    X = np.random.default_rng(0).normal(size=(500_000, 2)).astype(np.float32)  # 4 MB
    path = tmp_path / "x.npy"
    np.save(path, X)
    ro = np.load(path, mmap_mode="r")
    np.asarray(ro).sum()  # every page resident
    assert _resident_kb(path) > 3500
    Xc = chunked.ChunkedRows.of(ro)
    st = Xc.stats
    assert _resident_kb(path) <= 1100  # at most a block (1 MB as float64) of them
    np.testing.assert_array_equal(st["max"], X.max(axis=0))
    rows = np.arange(0, 500_000, 7)
    np.testing.assert_array_equal(Xc.take(rows), X[rows].astype(np.float64))
    assert _resident_kb(path) <= 1100
    for wrap in (lambda a: a, np.asarray):  # the memmap itself, and a plain array over its pages
        cow = np.load(path, mmap_mode="c")
        cow[250_001, 1] = 1e3  # the caller's write, in a private page inside a block
        st = chunked.ChunkedRows.of(wrap(cow)).stats
        assert st["max"][1] == 1e3 and cow[250_001, 1] == 1e3


def test_a_failed_read_of_draws_raises_its_own_error(stores, monkeypatch):
    """A read of the draws' rows that fails in the background (a lost store, workers gone for good) stops
    the fit with that error, not with a later symptom of the rows missing."""
    def failing(self, idx, dtype):  # the stash's read
        raise OSError("the store went away")

    monkeypatch.setattr(chunked.ChunkedRows, "stage", failing)
    X, y, *_ = _data()
    with pytest.raises(OSError, match="the store went away"):
        CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(stores["zarr"], y)


@pytest.mark.parametrize("kind", ["memmap", "zarr"])
def test_high_dimensional_fits_are_the_in_memory_fits(tmp_path, kind):
    """From BLAS_MIN_D = 16 coordinates on, the in-memory engine screens its scans through a kernel block
    computed once per input; the chunked fit's row buffer takes new rows into its slots, so its engine must
    not keep values by slot (with the in-memory block it kept each slot's first values and stopped at 5
    iterations with 387 core vectors instead of 33 and 929, test accuracy 78% against 99.6%, on generated
    Fashion-MNIST): its block is keyed by X's rows (fastimpl row_block).  Same core set; alpha within BLAS's
    rounding (its blocks start elsewhere), the certificate within the bound."""
    rng = np.random.default_rng(3)
    m, d = 4000, 128   # m d above the block's threshold (fastimpl KB_MIN_WORK)
    y = np.where(rng.random(m) < 0.5, 1, -1)
    X = (rng.normal(size=(m, d)) + 0.35 * y[:, None] * rng.normal(size=d)).astype(np.float32)
    if kind == "memmap":
        np.save(tmp_path / "x.npy", X)
        Xc = np.load(tmp_path / "x.npy", mmap_mode="r")
    else:
        Xc = zarr.open_array(str(tmp_path / "x.zarr"), mode="w", shape=X.shape, chunks=(512, d), dtype="f4")
        Xc[:] = X
    a = CVMClassifier(random_state=0).fit(X.astype(np.float64), y)
    b = CVMClassifier(random_state=0).fit(Xc, y)
    assert a.n_iter_ > 5 and np.array_equal(a.core_set_, b.core_set_)
    np.testing.assert_allclose(b.dual_coef_, a.dual_coef_, rtol=1e-9, atol=1e-12 * np.abs(a.dual_coef_).max())
    assert b.certified_ratio_ <= (1 + 0.01) ** 2 and abs(b.certified_ratio_ - a.certified_ratio_) < 1e-9
    assert np.array_equal(a.predict(X), b.predict(Xc))
    a, b = CVDD(random_state=0).fit(X.astype(np.float64)), CVDD(random_state=0).fit(Xc)  # the one-class MEB
    assert a.n_iter_ > 5 and np.array_equal(a.core_set_, b.core_set_)


@pytest.mark.parametrize("chunk_rows, cache_mb, parallel",
                         [(512, 1000, False), (300, 1000, True), (300, 4, False), (300, 4, True)])
def test_wide_chunked_scans_run_through_a_block_keyed_by_rows(tmp_path, monkeypatch, chunk_rows, cache_mb, parallel):
    """The chunked fit's sampled scans at d >= 16 run through the kernel block keyed by X's rows: each row's
    value against each core vector is computed at most once in the fit, however often the row is drawn (the
    in-memory block's work; without it every draw paid the whole core set), and the decisions stay the exact
    scan's: the in-memory fit's core set.  Chunks of 512 rows and of 300 (the last one partial, the stashes'
    and windows' rows straddling them); the block's fills in parallel groups; a cache of 3 MB, whose block
    holds one panel of 128 core vectors and leaves the rest to the exact tail (summed in parallel chunks by
    the certificate too).  (Without the block the scans
    here paid about 8,900 draws x the core set.)"""
    from fastimpl._engine import _set_block_parallel_min_work
    rng = np.random.default_rng(5)
    m, d = 5000, 96   # m d above the block's threshold (fastimpl KB_MIN_WORK)
    y = np.where(rng.random(m) < 0.5, 1, -1)
    X = (rng.normal(size=(m, d)) + 0.15 * y[:, None] * rng.normal(size=d)).astype(np.float32)
    Xc = zarr.open_array(str(tmp_path / "x.zarr"), mode="w", shape=X.shape, chunks=(chunk_rows, d), dtype="f4")
    Xc[:] = X
    old = _set_block_parallel_min_work(0 if parallel else 2**62)
    try:
        a = CVMClassifier(cache_size=cache_mb, random_state=0).fit(X.astype(np.float64), y)
        del chunked_ops.STATS[:]
        b = CVMClassifier(cache_size=cache_mb, random_state=0).fit(Xc, y)
    finally:
        _set_block_parallel_min_work(old)
    st = chunked_ops.STATS[-1]
    n_core = len(b.core_set_)
    assert a.n_iter_ > 5 and np.array_equal(a.core_set_, b.core_set_)
    np.testing.assert_allclose(b.dual_coef_, a.dual_coef_, rtol=1e-9, atol=1e-12 * np.abs(a.dual_coef_).max())
    assert b.certified_ratio_ <= (1 + 0.01) ** 2 and abs(b.certified_ratio_ - a.certified_ratio_) < 1e-9
    # the draws visit rows again (more positions than rows), and each row's entries are computed once
    assert st["positions"] > m and n_core > 128
    held = min(n_core, 128) if cache_mb < 10 else n_core
    assert 0 < st["block_fills"] <= m * held
    # a 4 MB cache: 0.75 of it holds one panel of 5,000 x 128 floats (2.4 MB), not two
    assert (st["block_fills"] <= m * 128) == (cache_mb < 10)


def test_row_block_applies_where_the_in_memory_block_does():
    """row_block turns the block on for a Gaussian kernel on dense rows from BLAS_MIN_D coordinates on and
    gives None elsewhere (the reference has none): the support's scans then run, as in memory."""
    from refimpl.cvm import two_class_problem
    from refimpl.kernels import make_kernel_spec
    fast, ref = numerics("fast"), numerics("ref")
    assert ref.row_block is None
    rng = np.random.default_rng(0)
    for d, kernel, want in ((96, "rbf", True), (8, "rbf", False), (96, "linear", False)):
        X = rng.normal(size=(50, d))
        y = np.where(rng.random(50) < 0.5, 1, -1)
        p = two_class_problem(X, y, make_kernel_spec(X, kernel, gamma=0.01), C=1.0)
        ops = fast.meb_ops(p, 2**28, kernel_block=False)
        inst = fast.row_block(ops, 100_000, float((X ** 2).sum(axis=1).max()))
        assert (inst is not None) == want
        if want:
            assert ops.block_state()[0] and inst.fills == 0
            with pytest.raises(IndexError):
                inst([0], [100_000])


def _wide_two_class(seed, m=3000, d=40):
    """(rng, X, y, spec): overlapping classes in d = 40, the kernel block's territory."""
    from refimpl.kernels import make_kernel_spec
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(m) < 0.5, 1, -1)
    X = rng.normal(size=(m, d)) + 0.2 * y[:, None]
    return rng, X, y, make_kernel_spec(X, "rbf", gamma="scale")


def _row_block_ops(X, y, spec, cache):
    """(ops, the kernel block keyed by rows) of the fast engine on X's two-class problem, the block forced on
    (m d is below the threshold of policy 0)."""
    from fastimpl._engine import _set_block_min_work
    from refimpl.cvm import two_class_problem
    fast = numerics("fast")
    ops = fast.meb_ops(two_class_problem(X, y, spec, C=1.0), cache, kernel_block=False)
    old = _set_block_min_work(0)
    try:
        return ops, fast.row_block(ops, X.shape[0], float((X ** 2).sum(axis=1).max()))
    finally:
        _set_block_min_work(old)


def test_row_block_expansion_is_within_its_bound():
    """The full scans of blocks read in the caller screen through the fit's kernel block keyed by rows
    (row_block's ``expansion``): its sums are within their stated bound of kernel_expansion's exact sums
    over the support, row by row, with the block's budget holding every core vector or one panel of them
    (the rest summed in double); the rows' entries are filled from the coordinates given, each once: a
    second scan after more core vectors joined computes only theirs."""
    from fastimpl._engine import kernel_expansion
    rng, X, y, spec = _wide_two_class(2)
    m = X.shape[0]
    for cache in (2**28, int(2.5 * 2**20)):   # every core vector in the block, or one panel of 128
        ops, inst = _row_block_ops(X, y, spec, cache)
        inst(np.arange(m), np.arange(m))   # slot q holds row q
        ops.start(0, 1)
        sizes, fills = [], []
        for batch in (np.arange(2, 150), np.arange(150, 300)):
            ops.add(batch.tolist())
            ops.solve(1e-6, "smo", ops.step_bound())
            core, alpha = ops.core_set(), ops.weights()
            sv = alpha > 0
            coef = alpha[sv] * y[core[sv]]
            rows = rng.choice(m, 700, replace=False)
            ka, err = inst.expansion(X[rows], rows)
            exact = kernel_expansion(spec, X[core[sv]], coef, X[rows])
            assert 0 < err < 1e-6 * np.abs(coef).sum() and np.all(np.abs(ka - exact) <= err)
            sizes.append(len(core))
            fills.append(inst.fills)
        held = [min(n, 128) if cache < 2**26 else n for n in sizes]
        assert fills[0] == 700 * held[0]
        # the second scan's rows: 700 again, some of them filled already (up to the first core set)
        assert 700 * (held[1] - held[0]) <= fills[1] - fills[0] <= 700 * held[1]
        assert ops.block_state()[1] == held[1]


def test_block_sums_completed_beside_the_rows_are_within_their_bound():
    """The full scans of blocks scanned elsewhere (a cluster's workers) take each row's sum from the fit's
    kernel block keyed by rows as far as the row's entries reach (row_block's ``partial_sums``, no
    coordinates), and complete it beside the rows over the support vectors beyond (scans._block_and_tail):
    within the stated bound of kernel_expansion's exact sums, row by row, for rows never filled, filled up
    to an earlier core set and filled up to this one, with the block holding every core vector or one panel."""
    from fastimpl._engine import kernel_expansion
    from corevector.chunked.scans import _block_and_tail
    _, X, y, spec = _wide_two_class(4)
    m, max_sq = X.shape[0], float((X ** 2).sum(axis=1).max())
    for cache in (2**28, int(2.5 * 2**20)):
        ops, inst = _row_block_ops(X, y, spec, cache)
        inst(np.arange(m), np.arange(m))
        ops.start(0, 1)
        ops.add(list(range(2, 160)))
        ops.solve(1e-6, "smo", ops.step_bound())
        inst.expansion(X[:1000], np.arange(1000))          # rows 0..999 filled up to this core set
        ops.add(list(range(160, 320)))
        ops.solve(1e-6, "smo", ops.step_bound())
        inst.expansion(X[500:1000], np.arange(500, 1000))  # rows 500..999 up to the next one, 1000.. never
        core, alpha = ops.core_set(), ops.weights()
        sv = alpha > 0
        coef = alpha[sv] * y[core[sv]]
        rows = np.r_[0:700:7, 500:1000:5, 1000:3000:9]
        ka, s1, reach, rho, fixed = inst.partial_sums(rows)
        held = min(len(core), 128) if cache < 2**26 else len(core)
        assert set(np.unique(reach)) <= {0, min(158 + 2, held), held} and (reach == 0).any() and (reach == held).any()
        sh = dict(SV=X[core[sv]], svcoef=coef, spec=spec, sv_core=np.flatnonzero(sv), svsq=(X[core[sv]] ** 2).sum(axis=1), rho=rho, fixed=fixed,
                  max_sq=max_sq)
        got, err = _block_and_tail(X[rows], sh, (ka, s1, reach))
        exact = kernel_expansion(spec, X[core[sv]], coef, X[rows])
        assert 0 < err < 1e-6 * np.abs(coef).sum() and np.all(np.abs(got - exact) <= err)
        assert np.all(np.abs(ka[reach == 0]) == 0)  # (nothing from the block where no entry is)


@settings(max_examples=40, deadline=None)
@given(d=st.integers(1, 6), nsv=st.integers(1, 60), log_gamma=st.floats(-3, 1.5), scale=st.floats(0.1, 10.0),
       policy=st.sampled_from([-1, 0, 1]), seed=st.integers(0, 2**31 - 1))
def test_screened_expansion_within_its_bound(d, nsv, log_gamma, scale, policy, seed):
    """The block scans' screened sums (fastimpl screened_expansion: the float exp or the Taylor expansion of
    the in-memory scans) are within their stated bound of kernel_expansion's exact sums, row by row; where
    no screen applies, they are those sums."""
    from fastimpl._engine import _set_taylor_policy, kernel_expansion, screened_expansion
    from refimpl.kernels import make_kernel_spec
    rng = np.random.default_rng(seed)
    X = rng.uniform(-scale, scale, size=(300, d))
    SV = X[rng.choice(len(X), nsv)]
    coef = rng.normal(size=nsv)
    spec = make_kernel_spec(X, "rbf", gamma=10.0 ** log_gamma)
    old = _set_taylor_policy(policy)
    try:
        got, err = screened_expansion(spec, SV, coef, X)
        boxed, err_b = screened_expansion(spec, SV, coef, X, X.min(axis=0) - 1.0, X.max(axis=0) + 1.0)
    finally:
        _set_taylor_policy(old)
    exact = kernel_expansion(spec, SV, coef, X)
    for v, e in ((got, err), (boxed, err_b)):
        if e < 0:
            assert np.array_equal(v, exact)
        else:
            assert np.all(np.abs(v - exact) <= e)


def test_screened_block_scans_decide_as_the_exact_ones(tmp_path, monkeypatch):
    """Every full scan of a chunked fit run again, its block scans without their screen: the same maximum,
    band lists, cut value and violators, bit for bit (the screened values kept are below every decision).
    The fits cover one and two halves (CVR's mirrored points), weights (a ridge per point) and violators
    (k > 0); the screen must have run, and left rows out, for the check to mean something."""
    X, y, _, yr, w = _data(2000)
    z = zarr.open_array(str(tmp_path / "s.zarr"), mode="w", shape=X.shape, chunks=(300, 2), dtype="f8")
    z[:] = X
    calls, exact_rows = [], []
    scan_block = chunked_scans.scan_block

    def record(Xb, sh, pb):
        out = scan_block(Xb, sh, pb)
        calls.append((np.array(Xb), sh, pb, out))
        return out
    monkeypatch.setattr(chunked_full_scans, "scan_block", record)
    fast = numerics("fast")
    counting = dataclasses.replace(fast, kernel_expansion=lambda *a: exact_rows.append(len(a[3])) or
                                   fast.kernel_expansion(*a))
    monkeypatch.setattr(chunked_scans, "numerics", lambda impl: counting if impl == "fast" else numerics(impl))
    CVMClassifier(C=10, gamma=1.0, sample_size=None, random_state=0).fit(z, y, sample_weight=w)
    CVR(C=10.0, gamma=1.0, eps=0.1, random_state=0).fit(z, yr)
    unscreened = dataclasses.replace(fast, screened_expansion=lambda spec, SV, c, Xb, *box: (
        fast.kernel_expansion(spec, SV, c, Xb), -1.0))
    monkeypatch.setattr(chunked_scans, "numerics", lambda impl: unscreened if impl == "fast" else numerics(impl))
    assert sum(1 for c in calls if c[1]["k"] > 0) and sum(1 for c in calls if c[1]["mirror"])
    assert 0 < sum(exact_rows) < sum(len(c[0]) for c in calls if len(c[1]["svcoef"]))
    for Xb, sh, pb, out in calls:
        again = scan_block(Xb, sh, pb)
        assert again.keys() == out.keys()
        for key in out:
            assert np.array_equal(np.asarray(again[key]), np.asarray(out[key])), key


def test_unique_rows_of_a_stash():
    """A stash's rows: sorted and unique as np.unique gives them, sorted in place when the caller owns the
    draws, and int32 only where every row fits."""
    from corevector.chunked.row_slots import unique_rows
    rng = np.random.default_rng(0)
    for high in (10, 10**6, 2**40):
        draws = rng.integers(0, high, size=5000)
        want = np.unique(draws)
        got = unique_rows(draws.copy(), own=True)
        assert np.array_equal(got, want) and got.dtype == (np.int32 if high < 2**31 else np.int64)
        assert np.array_equal(unique_rows(draws), want) and unique_rows(draws).dtype == np.int64
    assert len(unique_rows(np.zeros(0, dtype=np.int64), own=True)) == 0


def test_wide_stashes_are_a_share_of_x(monkeypatch):
    """Wide rows: a stash holds at most 1/STASH_SHARE of X's rows' bytes (not under STASH_MIN_BYTES), so the
    stashes a caller holds stay a small part of X (at 10^6 x 784: 829 -> ~500 MB, docs/chunked.md).  The
    passes that costs read the same rows: the model is bit for bit the one of stashes of half the points."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6000, 64))
    y = np.where(X[:, 0] + X[:, 1] ** 2 + 0.5 * rng.normal(size=len(X)) > 1, 1, -1)
    Z = zarr.array(X, chunks=(500, 64))
    fits, rounds = {}, {}
    # stashes of half the points (3,000: the floor binds) and of a third of X's bytes (2,000 positions)
    for share, floor, size in ((40, 32 * 2**20, 3000), (3, 0, 2000)):
        monkeypatch.setattr(chunked_ops, "STASH_SHARE", share)
        monkeypatch.setattr(chunked_ops, "STASH_MIN_BYTES", floor)
        del chunked_ops.STATS[:]
        fits[share] = CVMClassifier(C=10.0, random_state=0).fit(Z, y)
        st = chunked_ops.STATS[-1]
        assert (st["stash_rounds"] - 3) * size < st["positions"] <= st["stash_rounds"] * size
        rounds[share] = st["stash_rounds"]
    assert rounds[3] > rounds[40]
    _same_fit(fits[40], fits[3])


def test_dask_predictions_send_the_model_once():
    """The per-block tasks of a prediction on a Dask array read the fitted model from one key of the graph,
    each task as serialised for a worker far smaller than the model (with the model inside every task's
    function, 977 tasks at 10^6 x 784 each carried 4 MB, and the workers, holding the queued tasks' copies,
    paused at their memory limit: the prediction never finished)."""
    import pickle
    X, y, *_ = _data(2000)
    Xd = da.from_array(X, chunks=(100, 2))
    est = CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(X, y)
    model_bytes = len(pickle.dumps(est))
    for method in ("decision_function", "predict"):
        out = getattr(est, method)(Xd)
        graph = dict(out.__dask_graph__())
        blocks = [v for k, v in graph.items() if str(k[0] if isinstance(k, tuple) else k).startswith("corevector-")]
        assert len(blocks) == Xd.numblocks[0]
        assert max(len(pickle.dumps(v)) for v in blocks) < model_bytes / 10
        np.testing.assert_array_equal(out.compute(), getattr(est, method)(X))


def test_dask_from_zarr_reads_whole_chunks_in_task_sized_blocks(stores, monkeypatch):
    """chunked.dask_from_zarr: a Dask array over a zarr store whose blocks are whole store chunks of about
    TASK_BYTES (as float64), the blocks a fit on a cluster reads; predictions on it are the in-memory ones,
    and anything but a zarr array is refused with a TypeError."""
    z = stores["zarr"]  # chunks of 700 rows x 2 columns
    X = np.asarray(z[:], dtype=np.float64)
    monkeypatch.setattr(dask_source, "TASK_BYTES", 3 * 700 * 2 * 8 + 5)
    Xd = chunked.dask_from_zarr(z)
    assert len(Xd.chunks[0]) > 1 and Xd.chunks[0][:-1] == (2100,) * (len(Xd.chunks[0]) - 1)
    assert sum(Xd.chunks[0]) == z.shape[0] and Xd.chunks[1] == (2,)
    monkeypatch.setattr(dask_source, "TASK_BYTES", 1)
    assert chunked.dask_from_zarr(z).chunks[0][0] == 700  # never less than a chunk
    est = CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(X[:1500], (X[:1500, 0] > 2).astype(int))
    np.testing.assert_array_equal(est.decision_function(Xd).compute(), est.decision_function(X))
    with pytest.raises(TypeError, match="zarr array"):
        chunked.dask_from_zarr(X)


def test_kernel_expansion_in_parallel_blocks_is_the_serial_one_bit_for_bit():
    """Inside a fit BLAS is single-threaded and kernel_expansion (a chunked fit's full scans of a block)
    splits its GEMM blocks over OpenMP threads; each row's sum is still its GEMM block's, so 1 and 2 threads
    give the values of one block at a time, bit for bit (a ragged last block included).  Threaded BLAS
    (outside a fit) splits a GEMM its own way: the same values within its rounding."""
    from threadpoolctl import threadpool_limits

    from fastimpl._engine import _set_blas_serial, kernel_expansion
    from fastimpl._openmp import blas_single_threaded
    from refimpl.kernels import make_kernel_spec
    rng = np.random.default_rng(5)
    X, SV, coef = rng.normal(size=(1000, 40)), rng.normal(size=(300, 40)), rng.normal(size=300)
    spec = make_kernel_spec(X, "rbf", gamma=0.02)
    outside = kernel_expansion(spec, SV, coef, X)
    with blas_single_threaded():
        serial = kernel_expansion(spec, SV, coef, X)  # one block at a time
        old = _set_blas_serial(1)
        try:
            blocks = []
            for t in (1, 2):
                with threadpool_limits(limits=t, user_api="openmp"):
                    blocks.append(kernel_expansion(spec, SV, coef, X))
        finally:
            _set_blas_serial(old)
    np.testing.assert_array_equal(blocks[0], serial)
    np.testing.assert_array_equal(blocks[1], serial)
    np.testing.assert_allclose(serial, outside, rtol=1e-12, atol=1e-14 * np.abs(coef).sum())


def test_chunked_fast_fits_scan_with_single_threaded_blas(tmp_path, monkeypatch):
    """A chunked fit's engine runs as an in-memory fast fit does (fastimpl._engine.fit_meb): BLAS
    single-threaded while it scans, its GEMM blocks split over its own threads.  Under the driver alone its
    sampled scans ran one small GEMM at a time on threaded BLAS (10^5 x 784, defaults, zarr: 40 s, 26 s
    now); this fails without it whenever BLAS may use two threads, which the fit below allows."""
    from threadpoolctl import threadpool_info, threadpool_limits

    rng = np.random.default_rng(3)
    m, d = 3000, 64
    y = np.where(rng.random(m) < 0.5, 1, -1)
    X = (rng.normal(size=(m, d)) + 0.4 * y[:, None] * rng.normal(size=d)).astype(np.float32)
    np.save(tmp_path / "x.npy", X)  # (float32: a float64 memory map is used in place, not by chunks)
    seen = []
    scan = chunked_ops.ChunkedMEBOps.scan

    def watched(self, idx, k, d2_over):
        seen.extend(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")
        return scan(self, idx, k, d2_over)
    monkeypatch.setattr(chunked_ops.ChunkedMEBOps, "scan", watched)
    def blas_threads():
        return [(i["filepath"], i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"]
    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        est = CVMClassifier(random_state=0).fit(np.load(tmp_path / "x.npy", mmap_mode="r"), y)
        assert blas_threads() == before  # restored after the fit
    assert est.n_iter_ > 3 and seen and set(seen) == {1}


def test_the_core_vectors_ridge_is_found_for_runs_and_for_scattered_candidates():
    """chunked.scans._ridge_of_core: alpha_z c_z at exactly the candidates that are core vectors, whether the
    candidates are a whole block's run of indices (one slice of the sorted core) or scattered rows (a
    lookup each), including the mirrored half (indices + m) and runs with no core vector."""
    from corevector.chunked.scans import _ridge_of_core
    rng = np.random.default_rng(3)
    m = 5000
    core = np.unique(rng.integers(0, 2 * m, size=300))
    sh = dict(core=core, core_alpha=rng.random(len(core)))
    for z in (np.arange(1000, 3000), np.arange(m + 200, m + 900), np.arange(0, 1),
              np.sort(rng.choice(2 * m, size=700, replace=False)), np.array([7, 3, 5000, 12]),
              np.arange(4000, 4000)):
        cdiag = rng.random(len(z))
        where, ridge = _ridge_of_core(z, sh, cdiag)
        expected = np.flatnonzero(np.isin(z, core))
        np.testing.assert_array_equal(np.sort(where), expected)
        alpha_of = dict(zip(core.tolist(), sh["core_alpha"].tolist()))
        for w, r in zip(where, ridge):
            assert r == alpha_of[int(z[w])] * cdiag[w]


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "poly", "linear"])
def test_data_widths_are_the_in_memory_ones_for_every_kernel(stores, kernel):
    """gamma='scale' and 'beta' of chunked rows go through the same rule as in memory (refimpl.kernels.width_gamma:
    1/sqrt of the spread for the Laplacian, 1/spread otherwise, the linear kernel included), from per-block
    statistics, so the widths agree to the last bits."""
    from refimpl.kernels import checked_kernel_spec

    X, *_ = _data()
    for gamma in ("scale", "beta"):
        want = checked_kernel_spec(X, kernel, gamma, 3, 1.0, False).gamma
        got = chunked.kernel_spec(chunked.ChunkedRows.of(stores["zarr"]), kernel, gamma, 3, 1.0, False).gamma
        assert got == pytest.approx(want, rel=1e-12), gamma


# ------------------------------------------------------------------------------------------------ damaged stores
def _damaged_zarr(tmp_path, X, chunk=3):
    """A zarr store of X in chunks of 500 rows, chunk ``chunk``'s bytes replaced by garbage (it fails to decode)."""
    z = zarr.open_array(str(tmp_path / "x.zarr"), mode="w", shape=X.shape, chunks=(500, 2), dtype="f4")
    z[:] = X
    key = tmp_path / "x.zarr" / "c" / str(chunk) / "0"
    assert key.is_file()
    key.write_bytes(b"not a zstd frame" * 4)
    return zarr.open_array(str(tmp_path / "x.zarr"), mode="r"), str(tmp_path / "x.zarr")


def _damaged_h5(tmp_path, X, chunk=3):
    """An HDF5 dataset of X in gzip chunks of 500 rows, chunk ``chunk``'s bytes replaced by garbage."""
    path = tmp_path / "x.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("group/X", data=X.astype(np.float32), chunks=(500, 2), compression="gzip")
        info = f["group/X"].id.get_chunk_info(chunk)
    raw = bytearray(path.read_bytes())
    raw[info.byte_offset:info.byte_offset + info.size] = b"x" * info.size
    path.write_bytes(bytes(raw))
    f = h5py.File(path, "r")
    return f["group/X"], str(path)


@pytest.mark.parametrize("kind", ["zarr", "h5py"])
def test_a_chunk_that_fails_to_decode_is_one_error_naming_the_store_array_and_rows(tmp_path, kind):
    """A fit, a prediction and a read of rows from a store with one damaged chunk (rows 1500-1999) each raise one
    DamagedStoreError (an OSError) naming the store's path, the array and the chunk's rows -- not the codec's
    bare error ("Zstd decompression error", "filter returned failure")."""
    X, y, *_ = _data()
    Xs, where = (_damaged_zarr if kind == "zarr" else _damaged_h5)(tmp_path, X)
    name = "/" if kind == "zarr" else "/group/X"
    expected = re.escape(f"{where}: array {name!r}: rows 1500-1999 cannot be read") + r" \(a damaged chunk\?\): \w+: .+$"
    est = CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(X[:1000], y[:1000])
    for call in (lambda: CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(Xs, y),
                 lambda: est.predict(Xs), lambda: chunked.ChunkedRows.of(Xs).take([5, 1700])):
        with pytest.raises(local_source.DamagedStoreError) as exc:
            call()
        assert isinstance(exc.value, OSError) and re.fullmatch(expected, str(exc.value)), str(exc.value)
        assert exc.value.__cause__ is None and exc.value.__suppress_context__  # one error, not a chain
    # the rows around it read as they are
    np.testing.assert_array_equal(chunked.ChunkedRows.of(Xs).take([5, 2000]), X[[5, 2000]].astype(np.float32))
    if kind == "zarr":  # and through dask_from_zarr's tasks (Dask's local scheduler here; workers: test_distributed)
        with pytest.raises(local_source.DamagedStoreError, match=expected):
            est.predict(chunked.dask_from_zarr(Xs)).compute()


# ------------------------------------------------------------------------- zarr stores read by windows of rows
def _zarr_store(path, X, chunk_rows, compressors="auto", fill_value=None, rows=None):
    """A zarr 3 store of X (its dtype) in chunks of ``chunk_rows`` rows; ``rows``: only those slices written
    (the chunks no slice touches are not written: zarr's fill value)."""
    z = zarr.create_array(store=str(path), shape=X.shape, chunks=(chunk_rows,) + X.shape[1:], dtype=X.dtype,
                          compressors=compressors, fill_value=fill_value, overwrite=True)
    for sl in rows or [slice(None)]:
        z[sl] = X[sl]
    return zarr.open_array(str(path), mode="r")


@pytest.mark.parametrize("compressors", ["auto", None], ids=["zstd", "uncompressed"])
@pytest.mark.parametrize("dtype", ["<f4", ">f8", "<i2"])
def test_the_chunk_reader_reads_the_rows_zarr_reads(tmp_path, compressors, dtype):
    """Any window of rows, read by byte ranges (uncompressed) or a zstd stream, is zarr's own read of it:
    windows in order through one cursor (a pass), windows in any order alone, into float64 or the store's
    dtype, chunks not written (zarr's fill value), the last chunk short."""
    from corevector.chunked.zarr_chunks import chunk_reader
    rng = np.random.default_rng(5)
    X = (rng.normal(size=(10_003, 3)) * 100).astype(dtype)
    z = _zarr_store(tmp_path / "x.zarr", X, 701, compressors, fill_value=7,
                    rows=[slice(0, 2000), slice(3600, 10_003)])
    want = z[:]
    assert (want[2200:2800] == 7).all()  # a chunk left unwritten reads as the fill value
    reader = chunk_reader(z)
    assert reader is not None
    cursor = reader.cursor()
    cuts = np.unique(np.r_[0, rng.integers(0, len(X), size=40), len(X)])
    got = np.concatenate([reader.read(a, b, cursor) for a, b in zip(cuts[:-1], cuts[1:])])
    assert got.dtype == want.dtype and np.array_equal(got, want)
    cursor.close()
    for _ in range(30):  # any window, alone or after one further on (the stream starts again)
        a = int(rng.integers(0, len(X)))
        b = int(rng.integers(a, min(len(X), a + 3000) + 1))
        np.testing.assert_array_equal(reader.read(a, b, cursor), want[a:b])
    out = np.empty((500, 3))
    reader.read(690, 1190, out=out)
    np.testing.assert_array_equal(out, want[690:1190].astype(np.float64))
    for lo, hi in ((0, len(X) + 1), (-1, 5), (9, 8)):  # (zarr would clamp a slice; the reader refuses)
        with pytest.raises(ValueError, match=rf"rows \[{lo}, {hi}\) are not rows of an array of 10003 rows"):
            reader.read(lo, hi)


def test_layouts_the_chunk_reader_does_not_read_go_through_zarr_and_warn_when_large(tmp_path, monkeypatch):
    """A store of other codecs (blosc), sharded or with chunks that split the columns is read by zarr's own
    API in whole chunks (the same rows), and its large chunks warn, naming their size; the reader's layouts do
    not warn, whatever their chunks."""
    from corevector.chunked.zarr_chunks import chunk_reader
    X = np.random.default_rng(0).normal(size=(3000, 4))
    monkeypatch.setattr(local_source, "LARGE_CHUNK_BYTES", 8 * 1024)
    others = {"blosc": dict(chunks=(1000, 4), compressors=zarr.codecs.BloscCodec()),
              "sharded": dict(chunks=(500, 4), shards=(1500, 4)),
              "columns": dict(chunks=(1000, 2))}
    for name, kw in others.items():
        z = zarr.create_array(store=str(tmp_path / f"{name}.zarr"), shape=X.shape, dtype="f8", **kw)
        z[:] = X
        z = zarr.open_array(str(tmp_path / f"{name}.zarr"), mode="r")
        assert chunk_reader(z) is None, name
        with pytest.warns(local_source.LargeChunkWarning, match=r"chunks of 0 MB \(\((1000|500), \d\)\)"):
            Xc = chunked.ChunkedRows.of(z)
        np.testing.assert_array_equal(Xc.take(np.arange(3000)), X)
        assert all(b % int(z.chunks[0]) == 0 for b in Xc.source.bounds[:-1])  # whole chunks
    z = _zarr_store(tmp_path / "zstd.zarr", X, 3000)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", local_source.LargeChunkWarning)
        Xc = chunked.ChunkedRows.of(z)
    assert len(Xc.source.bounds) > 2  # windows of rows within the store's one chunk


@pytest.mark.parametrize("compressors", ["auto", None], ids=["zstd", "uncompressed"])
def test_a_store_in_chunks_larger_than_blocks_gives_the_in_memory_fit(tmp_path, compressors):
    """Blocks of 1,024 rows within chunks of 2,500 (one of them short): the in-memory fit, bit for bit, its
    predictions, and the stash reads of rows at random within a chunk."""
    X, y, *_ = _data()
    z = _zarr_store(tmp_path / "x.zarr", X.astype(np.float32), 2500, compressors)
    src = chunked.ChunkedRows.of(z).source
    assert src._reader is not None and 2500 not in set(np.diff(src.bounds))
    a = CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(X, y)
    b = CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(z, y)
    _same_fit(a, b)
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(z))


def test_a_pass_over_a_store_holds_a_window_of_rows_not_its_chunks(tmp_path, monkeypatch):
    """A pass over a store in one 4 MB zstd chunk (2^18 rows x 2 float64) allocates a few blocks of rows and
    a request's compressed bytes at a time (64 KB blocks, 128 KB requests: under 1 MB traced), and decodes
    the chunk once (its compressed bytes are asked for once); read by zarr's own API in whole chunks (the
    layout the reader does not read), the same pass holds the chunk twice over."""
    import tracemalloc
    from corevector.chunked import zarr_chunks
    monkeypatch.setattr(local_source, "BLOCK_BYTES", 64 * 1024)
    monkeypatch.setattr(zarr_chunks, "READ_BYTES", 128 * 1024)
    X = np.random.default_rng(1).normal(size=(1 << 18, 2))
    z = _zarr_store(tmp_path / "x.zarr", X, 1 << 18)
    asked = []
    get = zarr_chunks.ChunkReader.get
    monkeypatch.setattr(zarr_chunks.ChunkReader, "get",
                        lambda self, key, start=None, end=None: asked.append(end - start) or get(self, key, start, end))

    def traced_pass():
        Xc = chunked.ChunkedRows.of(z)
        tracemalloc.start()
        try:
            stats = Xc.stats
            return tracemalloc.get_traced_memory()[1], stats
        finally:
            tracemalloc.stop()
    peak, stats = traced_pass()
    assert np.allclose(stats["max"], X.max(axis=0))
    assert peak < 2**20, peak
    compressed = (tmp_path / "x.zarr" / "c" / "0" / "0").stat().st_size
    assert compressed > 3 * 2**20 and sum(asked) < compressed + 2 * zarr_chunks.READ_BYTES  # one stream a pass
    monkeypatch.setattr(local_source, "chunk_reader", lambda arr: None)
    peak_zarr, _ = traced_pass()
    assert peak_zarr > 2 * X.nbytes, peak_zarr
    assert peak_zarr > 2 * X.nbytes, peak_zarr


def test_a_dask_array_of_large_blocks_is_fitted_in_parts_of_about_task_bytes(monkeypatch):
    """Dask's own chunks='auto' makes blocks of up to 128 MB: a block over SPLIT_SHARE x TASK_BYTES is cut
    into near-equal parts of about TASK_BYTES for the fit (here one block of 3,000 rows, parts of 400-ish),
    blocks under it stay as they are, and the fit is the in-memory fit."""
    X, y, *_ = _data()
    monkeypatch.setattr(dask_source, "TASK_BYTES", 400 * 2 * 8)
    one = da.from_array(X.astype(np.float32), chunks=(3000, 2))
    src = chunked.ChunkedRows.of(one).source
    sizes = np.diff(src.bounds)
    assert len(sizes) == 8 and sizes.sum() == 3000 and sizes.max() - sizes.min() <= 1
    small = da.from_array(X.astype(np.float32), chunks=(700, 2))
    assert np.array_equal(chunked.ChunkedRows.of(small).source.bounds, [0, 700, 1400, 2100, 2800, 3000])
    a = CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(X, y)
    _same_fit(a, CVMClassifier(C=1e4, gamma=1.0, random_state=0).fit(one, y))
