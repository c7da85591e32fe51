"""The numerics of the core-set loop over rows that stay where they are: :class:`ChunkedMEBOps`.

``refimpl.driver.run_core_set_loop`` drives it exactly as it drives ``MEBOps`` and ``FastMEBOps``: the
same loop, the same decisions, the same random draws.  The rows of X stay in their source
(:class:`corevector.chunked.ChunkedRows`: a Dask array's partitions on the workers, a zarr, HDF5 or
memory-mapped file's chunks on disk); the client holds only

* the rows of the core vectors and of the random candidates drawn ahead, in a row buffer that an
  in-memory engine of the chosen implementation (``FastMEBOps`` or ``MEBOps``: the *local* ops) treats as
  its X.  The core-set QP, the ball and every sampled scan run there, by the in-memory engine's own code, so
  their arithmetic, and with it every decision, is the in-memory fit's;
* per-point labels, weights and targets (one value a row), which go to the workers once per fit.

**Draws ahead.**  The driver's random candidates do not depend on the model: they are one stream of
``rng.integers(0, n)`` values, cut into calls of the driver's sizes (NumPy's Generator gives the same values
whether they are drawn in one call or many; ``tests/test_chunked.py`` checks it).  :meth:`ChunkedMEBOps.draws`
wraps the driver's generator (the one hook in ``refimpl/driver.py``): a copy of it predicts the stream, and
the rows of the next ``window`` draws are installed in the background before the driver asks for them
(windows of ``WINDOW_MAX`` positions, at most ``WINDOW_BYTES`` of rows), from a stash of the rows of many
windows' draws that one round trip -- one pass over the store -- read ahead (``STASH_POSITIONS``).  An
iteration never waits on a fetch of one row: the bytes fetched per iteration are the sample's rows,
whatever m.

**Full scans** (the certificate, confirmations that cover every point, initialisation without sampling) run
per block beside the data (:func:`corevector.chunked.scans.scan_block`): the support's rows and weights are sent once per scan
(scattered to every worker), and each block returns its largest squared distance, the candidates within the
tie band of it and its top-k violators -- a few hundred bytes, whatever the block's size.  The values are
formed by the in-memory engine's own kernel routine (the ``kernel_expansion`` of
:func:`corevector.numerics.numerics`, or ``refimpl.kernels.kernel_block``) and its finishing arithmetic, term by term, so they match the in-memory
scan's.

Why a chunked fit can differ from the in-memory one in the last bits (and is tested against the bound
instead): ``gamma='scale'``/``'beta'`` come from variances merged per block, not NumPy's one-array sums;
BLAS blocks (d >= 16) and the reference's ``kernel_block`` may round a row differently when the blocks
start elsewhere; the initial furthest point of a full scan (``sample_size=None``) is found with the
reference's kernel rows.  With a numeric gamma and d < 16 the fast implementation's fit is the same, bit
for bit, whatever the chunking.
"""
from __future__ import annotations

import copy
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from refimpl.driver import Scan
from refimpl.problem import MEBProblem

from ..numerics import numerics
from .full_scans import FullScans
from .local_source import LocalSource
from .rows import ChunkedRows
from .row_slots import RowSlots, positions_in, unique_rows
from .source import phase
from .staged_rows import held_in_caller

__all__ = ["ChunkedMEBOps", "ops_class", "STATS"]

#: the windows of draws installed ahead (stream positions), at most WINDOW_BYTES of float64 rows (and a
#: quarter of the points).  Their rows come from stashes (below), so a window costs no pass over the store
#: of its own; the row buffer has room for three windows, and every slot costs the caller bookkeeping
#: beside its row.  Measured (10^7 x 2 checkerboard, zarr chunks of 10^6 rows, 262,728 draws, stashes of
#: 2^19 positions): windows of 2^17, 3.2 s and the caller +201 MB; 2^15, 3.2 s and +160 MB (before the
#: stashes every window was a pass: 2^17, 3 windows and 3.9 s; 2^16 from the start, 5 and 5.0 s; 1.9 s in
#: memory).  At d = 784 WINDOW_BYTES holds a window to 10,700 rows
WINDOW_START = 1 << 15
WINDOW_MAX = 1 << 15
WINDOW_BYTES = 64 * 2**20
#: the rows of many windows' draws are read by one pass into a stash (the rows in the source's dtype, one
#: row index each: 24 bytes a position at d = 2), which the windows are then installed from: at most
#: STASH_POSITIONS positions, STASH_BYTES of rows and half the points (up to three are held at once: the one
#: in use, the next read ahead, an old one until the next window lands).  At 10^7 x 2 one stash of 2^19
#: positions serves the fit's nine windows (zarr: 3.9 -> 3.2 s; 2^20 positions, 0.1 s slower, +40 MB)
#: Wide rows read into the caller (a zarr, HDF5 or memory-mapped source): a stash is also at most 1/STASH_SHARE
#: of X's rows' bytes (not under STASH_MIN_BYTES), so that the stashes the caller holds stay a small part of
#: X: at 10^6 x 784 float32 (2,991 MB, zarr, stop='radius') stashes of 256 MB grew the caller by 829 MB (28% of
#: X), of 128 MB by 604 MB, of 64 MB by 493 MB, at the same fit time (41, 33, 34 s; two, three, five passes).
#: On a cluster the stashes stay on the workers (corevector.chunked.staged_rows), and a smaller one would only cost
#: passes (the same Dask fit: 36 s with stashes of 256 MB, 46 s with 75 MB).  At d = 2 STASH_POSITIONS binds
#: first (12.6 MB).  The floor is 128 MB: every stash pass decodes the whole store, and once the scans share the
#: kernel block (fastimpl row_block) those passes were the chunked fit's largest cost at 10^5 rows (generated
#: Fashion-MNIST, defaults, 487,400 draws, zarr: a floor of 32 MB, 48 passes and 23.1 s of CPU; 128 MB, 13
#: passes and 18.7 s; the in-memory fit 17 s; official 60,000 images: 28 passes and 8.5 s, 11 and 6.9 s,
#: in memory 5.0 s).  At 10^6 x 784 the floor puts stashes at 128 MB instead of 75 (above: +604 MB, 20% of X)
STASH_POSITIONS = 1 << 19
STASH_BYTES = 256 * 2**20
STASH_SHARE, STASH_MIN_BYTES = 40, 128 * 2**20
#: rows of the buffer kept for core vectors beyond the windows in flight
CORE_ROWS = 1 << 16
#: every row in the buffer where that holds no more than the windows would (the slots, CORE_ROWS + three
#: windows, as float64, and two stashes), a held row counted with RESIDENT_ROW_BYTES beside its coordinates:
#: at d = 784 about 140,000 rows, at d = 2 about 160,000.  One pass in order fills it before the first draw,
#: and the fit reads no stash and drops no row.  A default fit draws every row 4-5 times on overlapping
#: classes, so the windows installed each row three times over from about ten stash passes (official
#: Fashion-MNIST, 60,000 x 784, zarr: 11 passes, 193,933 rows installed); the slots are the ones the windows
#: would have claimed in turn, and the model is the same
RESIDENT_ROWS = True
#: what a held row costs the caller beyond its 8 d bytes in the buffer: the slots' map of it and the fill's
#: index temporaries over every row (10^6 x 2 held: a peak of 119 MB, 104 bytes a row beyond the buffer's
#: 16, where the windowed fit grows by 15-18 MB; counting the coordinates alone let such narrow sets be held)
RESIDENT_ROW_BYTES = 104
#: what each fit's chunked numerics measured (traffic, rounds, scans), for reports and benchmarks
STATS: list = []


def buffer_rows(n, d):
    """(window_max, slots): the largest window of draws from n points of d coordinates, and the row buffer's
    slots -- CORE_ROWS and three windows.  Never much more than the data: a window of draws from m rows holds
    at most m of them."""
    window_max = max(1024, min(WINDOW_BYTES // (8 * max(d, 1)), WINDOW_MAX, n // 4))
    return window_max, CORE_ROWS + 3 * window_max


class _Draws:
    """The driver's generator, as the driver sees it; every draw from [0, n) is reported to the ops, which
    have read its rows ahead."""

    def __init__(self, rng, ops):
        self._rng, self._ops = rng, ops

    def integers(self, low, high=None, size=None, **kwargs):
        out = self._rng.integers(low, high, size=size, **kwargs)
        if low == 0 and high == self._ops.n and not kwargs:
            self._ops._drawn(np.asarray(out, dtype=np.int64).ravel())
        return out

    def __getattr__(self, name):
        return getattr(self._rng, name)


class _InitView:
    """What ``refimpl.driver`` reads of the problem: n, the class labels (``initial_pair``) and whether its
    points are mirrored (a full scan's rows)."""

    def __init__(self, problem):
        self.n = problem.n
        self.labels = problem.labels
        self.mirror = problem.mirror


def _local_problem(problem, buf, sign, offset, pdiag):
    """The problem over the row buffer ``buf`` (slot q holds some row of X), with the global problem's
    constants (eta above all: the generalized CVM's and CVR's eta are maxima over every point).  Built
    without MEBProblem.__post_init__, whose O(rows) passes would read the whole (lazily allocated) buffer."""
    local = MEBProblem.__new__(MEBProblem)
    local.__dict__.update(X=buf, kernel=problem.kernel, sign=sign, label_bias=problem.label_bias,
                          diag_add=problem.diag_add, constant_linear_term=problem.constant_linear_term, labels=None,
                          mirror=problem.mirror, offset=offset, point_diag=pdiag, eta=problem.eta,
                          _rawdiag_all=None)
    return local


class ChunkedMEBOps(FullScans):
    """The numerics interface of ``refimpl.driver`` (see its docstring) over a :class:`MEBProblem` whose X
    is a :class:`corevector.chunked.ChunkedRows`; ``impl`` chooses the local engine and the scans'
    arithmetic ('fast': ``FastMEBOps``, 'ref': ``MEBOps``); the full scans are :mod:`.full_scans`."""

    impl = "fast"

    def __init__(self, problem, cache_size=1000 * 2**20):
        X = problem.X
        self.problem, self.X = problem, X
        self.init_problem = _InitView(problem)
        self.n, self.m = problem.n, problem.m
        self.d = d = X.shape[1]
        self.mirror = bool(problem.mirror)
        self.c0 = problem.constant_term or 0.0
        self.window_max, rows = buffer_rows(self.n, d)
        # a stash holds a float source's rows in its own dtype (exact, less memory), others' as float64, the
        # fit's values (an integer near 2^63 would not survive the round trip through a kept float64 row)
        src = np.dtype(X.source.dtype)
        self.sent_row = d * src.itemsize  # bytes of a row as its source sends it (the traffic counters)
        self.stash_dtype = src if src.kind == "f" and src.itemsize <= 8 else np.dtype(np.float64)
        self.stash_size = self._stash_positions(X)
        # every row held where that takes no more than the slots and the two stashes the windows would hold
        held = (rows * 8 + 2 * self.stash_size * self.stash_dtype.itemsize) * max(d, 1)
        self.resident = bool(RESIDENT_ROWS) and self.m * (8 * max(d, 1) + RESIDENT_ROW_BYTES) <= held
        self.cap = cap = int(self.m if self.resident else min(self.m, rows))
        # lazily allocated (untouched pages cost no memory): only the slots in use are ever written
        self.buf = np.zeros((cap, d))
        self.lsign = None if problem.sign is None else np.zeros(cap, dtype=np.int8)
        self.loffset = None if problem.offset is None else np.zeros(cap)
        self.lpdiag = None if problem.point_diag is None else np.zeros(cap)
        if d <= 16 and cap >= 2:
            # FastMEBOps centres its screens on the bounding box of its X, taken once, now: the box of every
            # input (the unused slots are zeros, so the box also holds 0; a larger box only loosens the
            # screens' bounds -- decisions stay the exact path's)
            self.buf[0], self.buf[1] = X.box
        if self.loffset is not None:  # its bound on the finishing round-off reads the largest |offset| now
            self.loffset[0] = float(np.max(np.abs(problem.offset)))
        if self.lpdiag is not None:
            self.lpdiag[0] = float(np.max(problem.point_diag))
        local = _local_problem(problem, self.buf, self.lsign, self.loffset, self.lpdiag)
        num = numerics(self.impl)
        if self.impl == "fast":
            # not the in-memory kernel block, which keeps each input's values from its first row (at d >= 16 the
            # scans read stale values of the rows installed in a slot later: 78% test accuracy instead of 99.6%
            # on generated Fashion-MNIST, 10^5 x 784), but the block keyed by X's rows: a slot's row is told
            # to it whenever the slot takes one (_alloc_many), and a row drawn again costs only the core
            # vectors added since its last draw, as an in-memory input does
            self.local = num.meb_ops(local, int(cache_size), kernel_block=False)
        else:
            self.local = num.meb_ops(local, int(cache_size))
        # (before the slots' maxima above are cleared: the block's finishing bound reads them)
        self._install = None if num.row_block is None else num.row_block(self.local, self.m, self._max_sq(X))
        self.buf[:2] = 0.0
        if self.loffset is not None:
            self.loffset[0] = 0.0
        if self.lpdiag is not None:
            self.lpdiag[0] = 0.0
        # which row each slot holds, the windows holding it, the core vectors' pins, the free slots
        self.slots = RowSlots(cap)
        self.row_of, self.refs, self.pinned = self.slots.row_of, self.slots.refs, self.slots.pinned
        self._n_eval = 0
        # the draws read ahead
        self.stream = None
        self.pos = 0            # stream positions the driver has drawn
        self.horizon = 0        # positions whose rows are held or being fetched
        self.windows = []       # [(start, end, rows)] installed, oldest first
        self.pending = None     # (start, end, future of (rows, values)) being fetched
        self.window = min(WINDOW_START, self.window_max)
        self.last_window = self.window
        self.stash_stream = None
        self.stash_horizon = 0  # positions whose stash is read or asked for
        # what the full scans read: X where it is, or (resident) the buffer that holds it, in this process
        self.scan_X, self.scan_extra = X, None
        # [(start, end, rows, values)] of stream positions read by one pass, oldest first (the pool's one
        # thread reads them and installs windows from them, in the order they were asked for)
        self.stashes = []
        self.pool = ThreadPoolExecutor(max_workers=1)
        self.extra = X.per_block((problem.sign, problem.offset, problem.point_diag))
        self.stats = dict(impl=self.impl, m=self.m, n=self.n, d=d, draws=0, positions=0, fetch_rounds=0, fetch_rows=0, fetch_bytes=0, sent_bytes=0,
                          stash_rounds=0, stash_rows=0,
                          sync_waits=0, extra_fetch_rows=0, scans=0, scan_blocks=0, scan_bytes=0,
                          scan_block_entries=0)
        self._count_lock = threading.Lock()
        STATS.append(self.stats)
        del STATS[:-100]

    def _stash_positions(self, X):
        """The stream positions a stash covers (STASH_POSITIONS, STASH_BYTES, STASH_SHARE above)."""
        row_cost = max(self.d, 1) * self.stash_dtype.itemsize + 8
        stash_bytes = STASH_BYTES
        if held_in_caller(X.source):
            stash_bytes = min(stash_bytes, max(STASH_MIN_BYTES, X.shape[0] * row_cost // STASH_SHARE))
        return max(self.window_max, min(STASH_POSITIONS, stash_bytes // row_cost, self.n // 2))

    @staticmethod
    def _max_sq(X):
        """A bound on every row's squared norm, from the box of the validation pass (the kernel block's error
        bound)."""
        if X.shape[1] == 0 or X.shape[0] == 0:
            return 0.0
        lo, hi = (np.asarray(b, dtype=np.float64) for b in X.box)
        return float(np.sum(np.maximum(lo * lo, hi * hi)))

    def __del__(self):
        pool = getattr(self, "pool", None)
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    # ---------------------------------------------------------------- rows of X on the client
    def _rows(self, zs):
        zs = np.asarray(zs, dtype=np.int64)
        return zs - self.m * (zs >= self.m) if self.mirror else zs

    def _alloc_many(self, rows, values):
        """Slots for the rows (unique, none held yet), filled with their values."""
        k = len(rows)
        if k > self.slots.n_free:
            raise RuntimeError(f"the core set and the draws read ahead need more than {self.cap} rows on the client "
                               "(corevector.chunked.ops.CORE_ROWS); the fit's core set is unusually large: "
                               "a smaller C or a larger eps keeps it smaller")
        qs = self.slots.claim(rows)
        if self._install is not None:  # (the block's installer copies the values and takes their norms)
            self._install(qs, rows, values)
        else:
            self.buf[qs] = values
        if self.lsign is not None:
            self.lsign[qs] = self.problem.sign[rows]
        if self.loffset is not None:
            self.loffset[qs] = self.problem.offset[rows]
        if self.lpdiag is not None:
            self.lpdiag[qs] = self.problem.point_diag[rows]
        return qs

    def _count(self, **add):
        """Add to the traffic counters: the pool's thread (stashes, windows' rows) and the loop both count, and
        ``stats[k] += v`` from two threads can lose an update."""
        with self._count_lock:
            for key, value in add.items():
                self.stats[key] += value

    def _fetch(self, rows):
        """Rows of X not held yet (e.g. a full scan's violators): one round trip, counted apart."""
        rows = unique_rows(rows)
        rows = rows[self.slots.lookup(rows) < 0]
        if len(rows):
            with phase("row fetch"):
                vals = self.X.take(rows)
            nbytes = len(rows) * self.sent_row
            self._count(extra_fetch_rows=len(rows), fetch_bytes=nbytes, sent_bytes=nbytes)
            self._alloc_many(rows, vals)

    def _local(self, zs, pin=False):
        """Local indices (slots, mirrored) of the augmented points zs; their rows are fetched if not held."""
        zs = np.asarray(zs, dtype=np.int64)
        rows = self._rows(zs)
        q = self.slots.lookup(rows)
        if (q < 0).any():
            self._fetch(rows[q < 0])
            q = self.slots.lookup(rows)
        if pin:
            self.pinned[q] = True
        return q + self.cap * (zs >= self.m) if self.mirror else q

    def _global(self, lz):
        lz = np.asarray(lz, dtype=np.int64)
        if self.mirror:
            half = lz >= self.cap
            return self.row_of[lz - self.cap * half] + self.m * half
        return self.row_of[lz]

    # ---------------------------------------------------------------- the draws read ahead
    def draws(self, rng):
        """The driver's hook: its generator, wrapped so that the rows of its draws are fetched ahead (or, with
        every row held, the generator itself)."""
        if self.resident:
            self._read_all()
            return rng
        self.stream = copy.deepcopy(rng)
        self.stash_stream = copy.deepcopy(rng)
        self.pos = self.horizon = self.stash_horizon = 0
        self._ahead()
        return _Draws(rng, self)

    def _read_all(self):
        """Every row into the buffer (``resident``), in order, by parts of at most a stash's bytes."""
        rows_left = np.flatnonzero(self.slots.lookup(np.arange(self.m)) < 0)
        step = max(1, STASH_MIN_BYTES // (max(self.d, 1) * self.stash_dtype.itemsize))
        with phase("resident rows"):
            for lo in range(0, len(rows_left), step):
                rows = rows_left[lo:lo + step]
                self._alloc_many(rows, self.X.take(rows, dtype=self.stash_dtype))
        nbytes = len(rows_left) * self.sent_row
        self._count(fetch_rounds=1, fetch_rows=len(rows_left), fetch_bytes=nbytes, sent_bytes=nbytes)
        if np.array_equal(self.row_of[:self.m], np.arange(self.m)):  # (slot q holds row q: the buffer is X)
            self.scan_X = ChunkedRows(LocalSource(self.buf))
            self.scan_extra = self.scan_X.per_block((self.problem.sign, self.problem.offset, self.problem.point_diag))

    def _ahead(self):
        """Start fetching the next window of draws (in the background) if none is on its way.  Rows held
        already are claimed for the window now, so that nothing releases them before it lands."""
        if self.pending is not None or self.stream is None:
            return
        size = self.window
        values = self.stream.integers(0, self.n, size=size)
        start, end = self.horizon, self.horizon + size
        self.horizon = end
        self.last_window = size
        self.window = min(2 * self.window, self.window_max)
        rows = unique_rows(self._rows(values))
        qs = self.slots.lookup(rows)
        self.refs[qs[qs >= 0]] += 1
        need = rows[qs < 0]
        while self.stash_horizon < end:  # (the pool's one thread reads the stash before it installs from it)
            self._ask_stash()
        fut = self.pool.submit(self._take, start, end, need) if len(need) else None
        self.pending = (start, end, rows, need, fut)
        if self.stash_horizon < end + self.window:  # the next window's stash is read while this one is used
            self._ask_stash()

    def _ask_stash(self):
        """Have the pool read the rows of the next ``stash_size`` stream positions, in one pass."""
        values = self.stash_stream.integers(0, self.n, size=self.stash_size)
        start, self.stash_horizon = self.stash_horizon, self.stash_horizon + self.stash_size
        self.pool.submit(self._read_stash, start, self.stash_horizon, unique_rows(self._rows(values), own=True))

    def _read_stash(self, start, end, rows):
        """One pass in the background reads the rows (``X.stage``: on a Dask cluster they stay on the workers
        until a window picks them).  ``sent_bytes`` counts the rows that reach the caller: a stash held here
        as it arrives, also the part the fit ends before using; a staged one as windows pick its rows
        (``fetch_bytes`` counts the windows installed)."""
        try:
            with phase("read-ahead"):
                staged = self.X.stage(rows, self.stash_dtype)
        except BaseException as exc:  # raised again by the window that needs these rows, not lost in the pool
            self.stashes.append((start, end, None, exc))
            return
        self._count(sent_bytes=0 if staged.remote else len(rows) * self.sent_row, stash_rounds=1,
                    stash_rows=len(rows))
        self.stashes.append((start, end, rows, staged))

    def _take(self, start, end, rows):
        """The rows of the window [start, end) not held yet, from the stashes that cover it (already read:
        the pool runs its tasks in order); stashes wholly before the window are done with."""
        while self.stashes and self.stashes[0][1] <= start:
            self.stashes.pop(0)
        # (in the stash's dtype: the one conversion to float64 is the copy into the row buffer, _alloc_many)
        out = None
        left = np.ones(len(rows), dtype=bool)
        for s0, s1, srows, svals in self.stashes:
            if s0 >= end or not left.any():
                break
            if srows is None:
                raise svals
            p, hit = positions_in(srows, rows)
            hit &= left
            if hit.all():  # one stash holds the whole window (the usual case): no masked copy
                with phase("read-ahead"):
                    out = svals.pick(p)
            elif hit.any():
                if out is None:
                    out = np.empty((len(rows), self.d), dtype=self.stash_dtype)
                with phase("read-ahead"):
                    out[hit] = svals.pick(p[hit])
            if hit.any() and svals.remote:
                self._count(sent_bytes=int(hit.sum()) * self.sent_row)
            left &= ~hit
        if left.any():
            raise RuntimeError("a window of draws was not covered by the rows read ahead (corevector.chunked.ops)")
        return out if out is not None else np.zeros((0, self.d), dtype=self.stash_dtype)

    def _land(self, wait):
        """Install the window on its way (waiting for it if ``wait``); True if one was installed."""
        if self.pending is None:
            return False
        start, end, rows, need, fut = self.pending
        if fut is not None and not wait and not fut.done():
            return False
        vals = fut.result() if fut is not None else np.zeros((0, self.d))
        self.pending = None
        self._count(fetch_rounds=1, fetch_rows=len(need), fetch_bytes=len(need) * self.sent_row)  # as sent
        # a row another path fetched meanwhile keeps its slot
        qs = self.slots.lookup(need)
        new = qs < 0
        if new.all():
            qs = self._alloc_many(need, vals)
        elif new.any():
            qs[new] = self._alloc_many(need[new], vals[new])
        self.refs[qs] += 1
        self.windows.append((start, end, rows))
        return True

    def _drawn(self, values):
        """The driver drew ``values`` (stream positions pos .. pos + len): their rows must be held now."""
        start = self.pos
        self.pos += len(values)
        self.stats["draws"] += 1
        self.stats["positions"] = self.pos
        # windows wholly before this draw are done with: their rows go (core vectors keep theirs)
        while self.windows and self.windows[0][1] <= start:
            _, _, rows = self.windows.pop(0)
            qs = self.slots.lookup(rows)
            self.refs[qs] -= 1
            self.slots.drop(qs[(self.refs[qs] == 0) & ~self.pinned[qs]])
        self._land(wait=False)
        while self._covered() < self.pos:
            if self.pending is None:
                self._ahead()
            self.stats["sync_waits"] += 1
            self._land(wait=True)
        # read the next window while this one is used: once less than a window's positions are left to draw,
        # i.e. as soon as the driver draws from the last window landed (a window's rows from a cluster's
        # workers take a round trip of tens of MB at d = 784; asked for at half a window, the loop waited
        # for them); the buffer holds three windows: the one done with until the next draw, this one, the next
        if self.pending is None and self._covered() - self.pos < self.last_window:
            self._ahead()

    def _covered(self):
        return self.windows[-1][1] if self.windows else 0

    # ---------------------------------------------------------------- the numerics interface
    @property
    def n_eval(self):
        return int(self.local.n_eval) + self._n_eval

    def furthest_from(self, z, idx):
        idx = np.asarray(idx, dtype=np.int64)
        if len(idx) <= self.window_max or self.scan_extra is not None:  # (a few rows, or all of them held)
            lz = self._local([z])[0]
            return int(self._global([self.local.furthest_from(int(lz), self._local(idx))])[0])
        return self._furthest_chunked(int(z), idx)

    def start(self, z_a, z_b):
        la, lb = self._local([z_a, z_b], pin=True)
        self.local.start(int(la), int(lb))

    def add(self, zs):
        self.local.add([int(v) for v in self._local(zs, pin=True)])

    def prune(self, d2_below, min_count):
        """refimpl.driver's pruning: the local engine's, so that a chunked fit keeps the in-memory fit's
        core set.  The pruned vectors' rows stay pinned here (a vector that violates again finds its row)."""
        return self.local.prune(d2_below, min_count) if hasattr(self.local, "prune") else 0

    #: slots pinned only for the settle rule's probe (``hold``); none unless the rule is on
    _held = np.zeros(0, dtype=np.int64)

    def _slots(self, lz):
        """The slots of local indices lz (a mirrored input's two halves share one)."""
        lz = np.asarray(lz, dtype=np.int64)
        return lz - self.cap * (lz >= self.cap) if self.mirror else lz

    def hold(self, zs):
        """Keep the rows of the augmented points zs for the rest of the fit: the settle rule's probe
        (``refimpl.driver.Settle``), scanned at every check; they were drawn from the stream, so a window holds
        them now, and pinned they outlive it."""
        before = self.pinned.copy()
        qs = np.unique(self._slots(self._local(zs, pin=True)))
        self._held = np.union1d(self._held, qs[~before[qs]])

    def core_rows(self):
        """(the view's row indices, float64 values) of the core vectors' inputs, as held here."""
        qs = np.flatnonzero(self.pinned)
        if self._held.size:  # a probe's row is a core vector's only if it joined the core set
            qs = qs[~np.isin(qs, self._held) | np.isin(qs, self._slots(self.local.core_set()))]
        return self.row_of[qs].copy(), self.buf[qs].copy()

    def in_core(self, z):
        r = int(self._rows([z])[0])
        q = self.slots.get(r)
        if q is None or not self.pinned[q]:
            return False
        lz = q + self.cap if (self.mirror and z >= self.m) else q
        return bool(self.local.in_core(int(lz)))

    def n_core(self):
        return self.local.n_core()

    def n_support(self):
        return self.local.n_support()

    def core_set(self):
        return self._global(self.local.core_set()).astype(np.intp)

    def weights(self):
        return self.local.weights()

    def warm(self, alpha):
        self.local.warm(alpha)

    def add_warm(self, zs, alpha):
        self.local.add_warm([int(v) for v in self._local(zs, pin=True)], alpha)

    def step_bound(self):
        return self.local.step_bound()

    def solve(self, tol, method, bound):
        return self.local.solve(tol, method, bound)

    def ball(self):
        return self.local.ball()

    def scan(self, idx, k, d2_over):
        if idx is not None:
            s = self.local.scan(self._local(idx), k, d2_over)
            return Scan(int(self._global([s.best])[0]), s.d2, sample_d2=s.sample_d2)
        return self._scan_all(int(k), float(d2_over))


# -------------------------------------------------------------------------------- one class per impl
_CLASSES = {}


def ops_class(impl):
    """ChunkedMEBOps with the local engine and the scans' arithmetic of ``impl``."""
    if impl not in _CLASSES:
        _CLASSES[impl] = type(f"ChunkedMEBOps_{impl}", (ChunkedMEBOps,), {"impl": impl})
    return _CLASSES[impl]
