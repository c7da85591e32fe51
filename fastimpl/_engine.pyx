# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The numerics of the core-set loop in Cython: :class:`FastMEBOps` behind :func:`refimpl.driver.run_core_set_loop`.

``fit_meb`` here is :func:`refimpl.meb.fit_meb` with ``ops_class=FastMEBOps``: the same loop, the same
random draws, the same decisions (tie-breaking, stop rules, inner tolerances); only *how* the numbers are
computed differs from :class:`refimpl.meb.MEBOps`:

* kernel rows come from the kernel-row layer ``_krows.pxd`` (shared with ``_ssvr``, ``_mmda``): SIMD loops of
  ``_simd.h`` on coordinates, or from ``BLAS_MIN_D`` coordinates on BLAS GEMV/GEMM against cached squared norms;
  scans and expansions are its full-scan skeleton (``weighted_rows``: each candidate's kernel row and sum);
* rows of Q = K~[S, S] live in an LRU cache bounded by ``cache_size`` bytes (LIBSVM's design): a row is
  computed once, extended when the core set grows, and recomputed only after eviction; the active set's
  Cholesky factor and the stores of the core and support vectors (their coordinates, or CSR rows) are
  charged to the same budget (rows are evicted to make room for them), and a callable kernel's columns
  (``_lookup_ops.pxi``), so ``cache_size`` bounds all the memory the core set holds;
* the core-set QP (SMO with second-order working-set selection, or the active-set Newton method with an
  updated Cholesky factor) runs in C without the GIL;
* scans and certificates run under ``nogil`` with OpenMP ``prange`` over chunks of candidates, and a full
  scan of the 2m mirrored points of CVR computes each input's kernel row once for both signs;
* sparse (CSR) input stays CSR: input rows are read from its arrays (squared norms and k(x, x) cached once,
  O(nnz)), the core and support stores hold CSR rows, and a kernel row is a sparse-dense product against
  the query row scattered into a dense d-vector (``_krows.pyx``); nothing m x d is ever dense;
* nothing is O(n) in sampling mode: only the initial pair, the samples and the final certificate touch
  the data, and a full scan keeps only its top-k candidates, never n values (lookup kernels: training indices).

One concern per file, each ``include``d here (every call between them stays a C call):

* ``_engine.pyx``: FastMEBOps -- the problem, the core set, rows of Q over it (``qrow``), the driver's calls;
* ``_cache.pxi``: _RowCache -- the LRU cache of Q rows and the memory budget of the core set;
* ``_scans.pxi``: _Support and the scans -- initial pair, sampled and full scans, top-k, certificate;
* ``_kblock.pxi``: _KBlock -- the scans' kernel block at large d (float values, GEMM extensions; ``_kblock.h``);
* ``_screens.pxi``: _Screens -- the scans' single-precision and Taylor screens (``_taylor.h``), when each runs;
* ``_smo.pxi``, ``_active_set.pxi`` (_FreeSet): the two core-set QP solvers;
* ``_owned.pxi``: the allocation table every unit registers its buffers in; ``_tolerances.pxi``: TAU, TIE,
  PIVOT_RTOL of refimpl.simplex_qp; ``_search.pxi``: binary search in the core set's sorted index;
* ``_expansion.pxi``: kernel expansions (prediction); ``_hooks.pxi``: test hooks; ``_lookup_ops.pxi``: callables.

A unit with state is a cdef class that FastMEBOps holds and that owns its buffers (its functions take the engine).
"""
from collections import namedtuple

import numpy as np
import scipy.sparse as sp
cimport cython
cimport numpy as cnp
from cython.parallel cimport prange
cimport cython.parallel
from openmp cimport omp_get_max_threads, omp_get_num_threads
from libc.math cimport exp, expm1, sqrt, fabs, INFINITY, NAN, isnan
from libc.float cimport DBL_EPSILON
from libc.stdlib cimport malloc, calloc, free, realloc
from libc.string cimport memcpy, memset
from scipy.linalg.cython_lapack cimport dpotrf

from refimpl import meb as _ref_meb
from refimpl.driver import Ball, Scan
from refimpl.meb import smo_step_bound

from ._openmp import blas_single_threaded

cnp.import_array()

#: what FastMEBOps.memory_state returns, in bytes
MemoryState = namedtuple("MemoryState", "cache factor stores peak budget")

include "_tolerances.pxi"   # TAU, TIE, PIVOT_RTOL of refimpl.simplex_qp
# below this many kernel evaluations a scan runs serially: thread start-up would cost more
cdef Py_ssize_t PARALLEL_MIN_WORK = 20000
#: a sampled scan runs in parallel from this many kernel evaluations on.  Below it (59 candidates and
#: up to ~17,000 support vectors) one thread is faster: every parallel region waits for the other
#: thread, which on a busy machine can take a scheduler time slice (measured: 2.3 s serial against
#: 20-47 s with a parallel region per sample, checkerboard m = 2e4, load 5 on 2 cores)
cdef Py_ssize_t SCAN_PARALLEL_MIN_WORK = 1_000_000
#: a single Q row is split over threads from this many kernel-evaluation coordinates on
cdef Py_ssize_t ROW_PARALLEL_MIN_WORK = 1_000_000
#: candidates per chunk of a full scan (its top-k list and its maximum are kept per chunk)
cdef Py_ssize_t SCAN_CHUNK = 2048
#: candidates per GEMM block on the BLAS path
cdef Py_ssize_t GEMM_BLOCK = 64
#: fits running under fit_meb below, whose BLAS is single-threaded: while one runs, the support's scans on
#: the BLAS path (d >= BLAS_MIN_D) split their GEMM blocks over the engine's threads.  Elsewhere (the chunked
#: numerics, whose block scans leave BLAS its own threads) they run on one thread and BLAS threads itself
cdef int BLAS_SERIAL = 0
#: core vectors per column chunk of the new Q rows' GEMM (_new_rows; the chunks run in parallel)
cdef Py_ssize_t NEW_ROWS_STEP = 512
#: new core vectors per GEMM block of _new_rows on the BLAS path (its scratch: NEW_ROWS_BLOCK x |S| doubles)
cdef Py_ssize_t NEW_ROWS_BLOCK = 256


from fastimpl._krows cimport (
    BLAS_MIN_D, Kern, Queries, RowSink, _PointStore, _Lookup, lookup_of, make_kern, k_is_radial, k_is_gaussian,
    k_is_laplacian, k_is_dot, k_is_normalized, k_raw, k_eval, k_diag, point_sq, point_rawdiag, rawdiag_from_sq,
    csr_scatter, csr_clear, csr_dot_dense, csr_row_sq, dots_to_kernel, dense_queries, rows_scratch, kernel_rows,
    weighted_rows, cv_simd_level, cv_dot4, cv_radial_row, cv_radial_row_at, cv_radial_dot, cv_radial_dot_screen,
    cv_screen_available, CV_SCREEN_TERM_ERR, ROWS_SIMD)

SIMD_LEVEL = cv_simd_level()

include "_owned.pxi"


include "_search.pxi"      # _lower_bound, _bsearch: the sorted index of the core set


cdef const double* _kept_doubles(object a, list keep) except? NULL:
    """A pointer to ``a`` as contiguous float64 (the array appended to ``keep``, which must outlive the
    pointer), or NULL for None or an empty array."""
    cdef const double[::1] t
    if a is None:
        return NULL
    arr = np.ascontiguousarray(a, dtype=np.float64)
    if arr.shape[0] == 0:
        return NULL
    keep.append(arr)
    t = arr
    return &t[0]


# The units of the engine, one concern each.  Those with state are cdef classes that FastMEBOps holds
# (each owns its buffers through an allocation table, _owned.pxi); their functions take the engine
# (``FastMEBOps ops``) for what the units share: the problem, the core set, its rows of Q.
cdef class FastMEBOps
include "_cache.pxi"        # _RowCache: the LRU of Q rows and the core set's memory budget
include "_screens.pxi"      # _Screens: which screen a scan runs (float / Taylor), its bound; enable_screens
include "_scans.pxi"        # _Support; furthest_point, scan_sample, full_scan (distances, top-k, certificate)
include "_kblock.pxi"       # _KBlock: k(x_p, c_t) in single precision for the scans at large d; kb_scan_sample, kb_chunk
include "_smo.pxi"          # smo_solve: SMO with second-order working-set selection (two threads: _Duo)
include "_active_set.pxi"   # _FreeSet; active_set_solve: the active-set Newton method, updated Cholesky factor
include "_lookup_ops.pxi"   # lookup_setup, lookup_row_ready, lookup_sums: a callable kernel's columns
include "_qrows.pxi"        # new_rows: the Q rows of new core vectors; gradient_from_rows: a warm start's gradient


cdef class FastMEBOps:
    """The numerics interface of refimpl.driver for an ``MEBProblem`` (see refimpl.meb.MEBOps).

    It holds the problem (the inputs, dense or CSR, and the augmented points' signs, offsets and
    ridges), the core set (S, alpha, the gradient, the coordinates of its points) and Q's rows over it
    (``qrow``), and is composed of the units that compute with them: the row cache (``cache``), the
    packed support (``sup``) and the screens (``screens``) of the scans, and the active set's state
    (``fs``).  Its Python methods are the driver's calls (refimpl.meb.MEBOps has the same ones).

    ``kernel_block=False`` keeps the scans' kernel block (``_kblock.pxi``) off: the block holds every
    input's squared norm and kernel values against the core vectors, computed once, so inputs whose rows
    change after construction (the row buffer of corevector._chunked_ops, whose slots take new rows of
    draws) must not use it.  The block is a screen, so the decisions are the same either way."""
    cdef readonly object init_problem
    cdef readonly Py_ssize_t n
    cdef public long long n_eval
    cdef Kern K
    cdef const double[:, ::1] X
    cdef bint sparse                # CSR input: Xptr, Xind, Xval instead of X
    cdef const long long* Xptr
    cdef const int* Xind
    cdef const double* Xval
    cdef double* Xsq                # ||x_q||^2 of every input row (sparse input)
    cdef double* Xrd                # k_raw(x_q, x_q) of every input row (sparse input)
    cdef double* xd                 # a zeroed dense d-vector for serial scatters (sparse input)
    cdef Queries Q                  # the inputs as the candidates of kernel rows (_krows.pxd: kernel_rows)
    cdef Py_ssize_t m, d
    cdef bint mirror, signed_, lconst
    cdef bint defer_stats           # add_warm: the new rows' gradients are left to warm (see there)
    cdef int duo_skip, duo_backoff  # two-thread SMO after a stalled solve: solves left in one thread, the next wait
    cdef const signed char* sign
    cdef const double* offset
    cdef const double* pdiag        # per-input ridge c_i (MEBProblem.point_diag), or NULL: diag_add for all
    cdef object _keep               # arrays the raw pointers above point into
    cdef double label_bias, diag_add, c0
    cdef int has_delta
    cdef Py_ssize_t* czs            # the core set's augmented indices, sorted (in_core, the self term)
    cdef Py_ssize_t* czp            # their positions in the core set
    # core set (capacity cap)
    cdef Py_ssize_t size, cap
    cdef Py_ssize_t* S
    cdef double* Ss                 # signs s_z
    cdef double* l                  # shifted linear term l - c0
    cdef double* alpha
    cdef double* grad               # 2 Q alpha - (l - c0)
    cdef double* Qd                 # diag of Q
    cdef _PointStore core           # coordinates of the core vectors
    # the units
    cdef _RowCache cache            # rows of Q over the core set (_cache.pxi)
    cdef _Support sup               # the support packed for the scans (_scans.pxi)
    cdef _Screens screens           # the scans' screens (_screens.pxi)
    cdef _FreeSet fs                # the active set's free set and factor (_active_set.pxi)
    cdef _KBlock kb                 # the kernel block of the scans at large d (_kblock.pxi)
    cdef _Lookup lookup             # a lookup kernel's training kernel (K.lk points into it), or None
    # the allocation table (_owned.pxi): every raw buffer above is registered once in __cinit__; _grow
    # reallocates the ones that grow with the core set (element size > 0) and __dealloc__ frees them all
    cdef _Owned own

    def __cinit__(self):
        # (the object's memory starts zeroed: every pointer is NULL until it is allocated)
        # arrays of one entry per core vector, grown together by _grow
        owned_add(&self.own, <void**> &self.S, sizeof(Py_ssize_t))
        owned_add(&self.own, <void**> &self.Ss, sizeof(double))
        owned_add(&self.own, <void**> &self.l, sizeof(double))
        owned_add(&self.own, <void**> &self.alpha, sizeof(double))
        owned_add(&self.own, <void**> &self.grad, sizeof(double))
        owned_add(&self.own, <void**> &self.Qd, sizeof(double))
        owned_add(&self.own, <void**> &self.czs, sizeof(Py_ssize_t))
        owned_add(&self.own, <void**> &self.czp, sizeof(Py_ssize_t))
        # buffers sized elsewhere: the sparse input's norms and scatter vector
        owned_add(&self.own, <void**> &self.Xsq, 0)
        owned_add(&self.own, <void**> &self.Xrd, 0)
        owned_add(&self.own, <void**> &self.xd, 0)
        self.sparse = False
        self.size = 0
        self.cap = 0
        self.core = _PointStore()
        self.cache = _RowCache()
        self.sup = _Support()
        self.screens = _Screens()
        self.fs = _FreeSet()
        self.kb = _KBlock()

    def __dealloc__(self):
        owned_free(&self.own)   # the units free their own buffers

    def __init__(self, problem, Py_ssize_t cache_size=1000 * 2**20, bint kernel_block=True):
        cdef const signed char[::1] s
        self.init_problem = problem
        self.m = problem.X.shape[0]
        self.n = problem.n
        self.d = problem.X.shape[1]
        self.mirror = bool(problem.mirror)
        self.K = make_kern(problem.kernel, self.d)
        lookup_setup(self, problem, cache_size)   # precomputed / callable kernels (K.lk; _lookup_ops.pxi)
        keep = []
        self.sparse = sp.issparse(problem.X)
        if self.sparse:
            self._setup_csr(problem.X, keep)
        else:
            self.X = problem.X
            self.Q = dense_queries(&self.X[0, 0] if self.m > 0 else NULL, self.m, self.d)
        self.Q.wrap = self.m if self.mirror else 0
        self.sign = NULL
        if problem.sign is not None:
            arr = np.ascontiguousarray(problem.sign, dtype=np.int8)
            keep.append(arr)
            s = arr
            self.sign = &s[0]
        self.offset = _kept_doubles(problem.offset, keep)
        self.pdiag = _kept_doubles(problem.point_diag, keep)
        self._keep = keep
        self.signed_ = self.sign != NULL or self.mirror
        self.label_bias = problem.label_bias
        self.diag_add = problem.diag_add
        self.has_delta = 1 if problem.has_delta else 0
        self.c0 = problem.constant_term or 0.0
        self.lconst = (not problem.has_delta) and problem.kernel.constant_diagonal
        self.n_eval = 0
        self.cache.setup(cache_size, self.core, self.sup.store, self.kb)
        if self.sparse:
            self.core.setup_csr(self.K, 64)
            self.sup.store.setup_csr(self.K, 64)
        else:
            self.core.setup(self.K, 64)
            self.sup.store.setup(self.K, 64)
            enable_screens(self)
            if kernel_block:
                kb_setup(self)
        self._grow(64)

    cdef void _setup_csr(self, X, list keep) except *:
        """Sparse input: the CSR arrays as they are (int32 column indices, int64 row pointers: m + 1
        values), and each row's squared norm and k_raw(x, x), O(nnz)."""
        cdef const long long[::1] xp
        cdef const int[::1] xi
        cdef const double[::1] xv
        cdef Py_ssize_t q
        if X.shape[1] >= 2**31:
            raise ValueError("X: sparse input needs fewer than 2**31 columns")
        arrs = (np.ascontiguousarray(X.indptr, dtype=np.int64),
                np.ascontiguousarray(X.indices, dtype=np.int32),
                np.ascontiguousarray(X.data, dtype=np.float64))
        keep.extend(arrs)
        xp, xi, xv = arrs
        self.Xptr = &xp[0]
        self.Xind = &xi[0] if xi.shape[0] > 0 else NULL
        self.Xval = &xv[0] if xv.shape[0] > 0 else NULL
        self.Xsq = <double*> malloc(max(self.m, 1) * sizeof(double))
        self.Xrd = <double*> malloc(max(self.m, 1) * sizeof(double))
        self.xd = <double*> calloc(max(self.d, 1), sizeof(double))
        if self.Xsq == NULL or self.Xrd == NULL or self.xd == NULL:
            raise MemoryError("sparse input norms")
        with nogil:
            for q in range(self.m):
                self.Xsq[q] = csr_row_sq(self.Xval, self.Xptr[q], self.Xptr[q + 1])
                self.Xrd[q] = rawdiag_from_sq(&self.K, self.Xsq[q])
        self.Q.d = self.d
        self.Q.ptr = self.Xptr
        self.Q.ind = self.Xind
        self.Q.val = self.Xval
        self.Q.sq = self.Xsq
        self.Q.rd = self.Xrd

    cdef void _grow(self, Py_ssize_t newcap) except *:
        """Room for ``newcap`` core vectors: the core set's arrays, the cache's, the core store."""
        owned_grow(&self.own, newcap)
        owned_grow(&self.kb.own, newcap)
        self.cache.grow(newcap)
        self.core.reserve(newcap)
        self.cap = newcap

    # ------------------------------------------------------------ the augmented points (MEBProblem)
    cdef inline Py_ssize_t pz(self, Py_ssize_t z) noexcept nogil:
        """p(z): the input row of augmented point z (z mod m)."""
        return z - self.m if (self.mirror and z >= self.m) else z

    cdef inline double zsign(self, Py_ssize_t z) noexcept nogil:
        """s_z: the input's sign, negated for the mirrored half."""
        cdef double s = <double> self.sign[self.pz(z)] if self.sign != NULL else 1.0
        return -s if (self.mirror and z >= self.m) else s

    cdef inline double rawdiag(self, Py_ssize_t z) noexcept nogil:
        """k_raw(x, x) of z's input for the dot-product kernels, 1 for the radial ones."""
        if self.sparse:
            return self.Xrd[self.pz(z)]
        return point_rawdiag(&self.K, &self.X[self.pz(z), 0])

    cdef inline double cdiag(self, Py_ssize_t z) noexcept nogil:
        """c_z, the ridge of K~'s diagonal at z (MEBProblem.diag_term): the input's c_p(z) or diag_add."""
        return self.pdiag[self.pz(z)] if self.pdiag != NULL else self.diag_add

    cdef inline double point_ldiag(self, Py_ssize_t z, double daz) noexcept nogil:
        """shifted linear term l_z - c0 = k~(z, z) + Delta_z - c0 (MEBProblem.shifted_linear_term):
        s_z t_p(z) (CVR), 0 (generalized CVM, constant diagonal) or k~(z, z) (c0 = 0)."""
        if self.has_delta:
            if self.offset != NULL:
                return self.zsign(z) * self.offset[self.pz(z)]
            return 0.0
        if self.lconst:
            return 0.0
        return k_diag(&self.K, daz) + self.label_bias + self.cdiag(z)

    cdef inline void _put_input(self, _PointStore store, Py_ssize_t j, Py_ssize_t q) except *:
        """Input row q as point j of ``store`` (CSR rows for sparse input)."""
        if self.sparse:
            store.put_csr(j, &self.Xind[self.Xptr[q]], &self.Xval[self.Xptr[q]], self.Xptr[q + 1] - self.Xptr[q],
                          self.Xsq[q], self.Xrd[q])
        else:
            store.put(j, &self.X[q, 0])

    cdef inline const double* _dense_input(self, Py_ssize_t q, double* xd) noexcept nogil:
        """A dense pointer to input row q: the row of X, or (sparse input) row q scattered into the zeroed
        d-vector xd, which _release_input clears again."""
        if self.sparse:
            csr_scatter(xd, self.Xind, self.Xval, self.Xptr[q], self.Xptr[q + 1])
            return xd
        return &self.X[q, 0]

    cdef inline void _release_input(self, Py_ssize_t q, double* xd) noexcept nogil:
        if self.sparse:
            csr_clear(xd, self.Xind, self.Xptr[q], self.Xptr[q + 1])

    cdef inline double _input_sq(self, Py_ssize_t q, const double* x) noexcept nogil:
        return self.Xsq[q] if self.sparse else point_sq(x, self.d)
    # ------------------------------------------------------------ rows of Q over the core set
    cdef double* qrow(self, Py_ssize_t i, Py_ssize_t keep) noexcept nogil:
        """Row i of Q over the core set, from the cache (computing what it lacks), or NULL when no
        memory is left.  ``keep`` is a row that must not be evicted meanwhile (or -1)."""
        cdef Py_ssize_t lo
        cdef double* r = self.cache.slot(i, self.size, keep, &lo)
        if r == NULL or lo >= self.size:
            return r
        self._fill_row(i, lo, self.size, r)
        self.cache.rlen[i] = self.size
        return r

    cdef void _fill_row(self, Py_ssize_t i, Py_ssize_t lo, Py_ssize_t hi, double* r) noexcept nogil:
        """r[t] = Q[i, t] = s_i s_t (k(x_i, x_t) + beta_b) + delta_it c for t in [lo, hi)."""
        cdef Py_ssize_t c, nchunk, clo, chi, step, q = self.pz(self.S[i])
        cdef const double* x
        cdef double xsq = self.core.sq[i], xrd = self.core.rd[i]
        if hi <= lo or not lookup_row_ready(self, i, lo, hi, r):  # (a callable: the column of x_i)
            return
        x = self._dense_input(q, self.xd)
        if (hi - lo) * self.d < ROW_PARALLEL_MIN_WORK or self.core.blas or self.sparse:
            self.core.row(lo, hi, x, xsq, xrd, &r[lo])
        else:
            step = 4096
            nchunk = (hi - lo + step - 1) // step
            for c in prange(nchunk, schedule="static"):
                clo = lo + c * step
                chi = min(clo + step, hi)
                self.core.row(clo, chi, x, xsq, xrd, &r[clo])
        self._release_input(q, self.xd)
        finish_qrow(self, i, lo, hi, r)
        self.n_eval += hi - lo
    # ------------------------------------------------------------ the numerics interface
    def furthest_from(self, Py_ssize_t z, idx):
        """Initialisation: argmax over idx of ||phi~(z) - phi~(z_l)||^2 + Delta_l (refimpl.driver.initial_pair)."""
        return furthest_point(self, z, idx)

    def start(self, Py_ssize_t z_a, Py_ssize_t z_b):
        """S_0 = {z_a, z_b} with alpha = e_a (refimpl.meb.MEBOps.start)."""
        self.add([z_a])
        self.alpha[0] = 1.0
        self.grad[0] = 2.0 * self.Qd[0] - self.l[0]
        self.add([z_b])

    def add(self, zs):
        """Append the points zs with alpha = 0; each one's gradient 2 (K~ alpha)_z - l_z comes from its
        new Q row (which the cache keeps: the next solve starts with it).  On the BLAS path the new rows
        are one GEMM against the core store (_new_rows)."""
        cdef Py_ssize_t z, k, k0 = self.size
        cdef int rc
        for zz in zs:
            z = zz
            k = self.size
            if k == self.cap:
                self._grow(2 * self.cap)
            self.S[k] = z
            self.Ss[k] = self.zsign(z)
            self._put_input(self.core, k, self.pz(z))
            self.l[k] = self.point_ldiag(z, self.core.rd[k] if k_is_dot(&self.K) else 1.0)
            self.alpha[k] = 0.0
            self.size = k + 1
            self._index(z, k)
        with nogil:
            rc = new_rows(self, k0, self.size)
        lookup_raise(self)
        if rc != 0:
            raise MemoryError("core-set kernel cache")

    cdef void _index(self, Py_ssize_t z, Py_ssize_t k) noexcept nogil:
        """Insert z (core position k) into the sorted index of the core set (k core vectors before it)."""
        cdef Py_ssize_t p = k
        while p > 0 and self.czs[p - 1] > z:
            self.czs[p] = self.czs[p - 1]
            self.czp[p] = self.czp[p - 1]
            p -= 1
        self.czs[p] = z
        self.czp[p] = k

    def in_core(self, Py_ssize_t z):
        return _bsearch(self.czs, self.size, z) >= 0

    def n_core(self):
        return self.size

    def n_support(self):
        return self.count_support()

    def core_set(self):
        return np.array([self.S[t] for t in range(self.size)], dtype=np.intp)

    def prune(self, double d2_below, Py_ssize_t min_count):
        """Drop the core vectors of weight 0 whose squared distance to the center is below ``d2_below``, if
        there are at least ``min_count`` of them (refimpl.meb.MEBOps.prune).  The center, R^2 and
        every remaining gradient are unchanged (the dropped weights are 0); the cache keeps the remaining
        rows, their columns compacted in place.  Returns how many were dropped."""
        cdef Py_ssize_t t, j, nk = 0, old = self.size, cnt
        cdef double gthr = self.margin() + self.c0 - d2_below   # d_t^2 = margin + c0 - g_t
        cdef Py_ssize_t* newpos
        if self.kb.on:
            return 0   # the kernel block indexes core vectors by position (never on for CVR's mirrored problems)
        cnt = 0
        for t in range(old):
            if self.alpha[t] == 0.0 and self.grad[t] > gthr:
                cnt += 1
        if cnt == 0 or cnt < min_count:
            return 0
        newpos = <Py_ssize_t*> malloc(old * sizeof(Py_ssize_t))
        if newpos == NULL:
            raise MemoryError("prune")
        for t in range(old):
            if self.alpha[t] == 0.0 and self.grad[t] > gthr:
                newpos[t] = -1
            else:
                newpos[t] = nk
                nk += 1
        self.cache.compact(newpos, old)
        for t in range(old):
            j = newpos[t]
            if j >= 0 and j != t:
                self.S[j] = self.S[t]
                self.Ss[j] = self.Ss[t]
                self.l[j] = self.l[t]
                self.alpha[j] = self.alpha[t]
                self.grad[j] = self.grad[t]
                self.Qd[j] = self.Qd[t]
        self.size = nk
        # the core store and the sorted index, rebuilt from the kept points
        self.core.n = 0
        for j in range(nk):
            self._put_input(self.core, j, self.pz(self.S[j]))
        zs = np.array([self.S[j] for j in range(nk)], dtype=np.intp)
        srt = np.argsort(zs, kind="stable")
        for j in range(nk):
            self.czs[j] = zs[srt[j]]
            self.czp[j] = srt[j]
        # the free set is rebuilt from the support at the next active-set solve (fvalid), which marks only the
        # first ``size`` positions: positions freed here must not stay marked for the core vectors added next
        if self.fs.inF != NULL:
            for t in range(min(old, self.fs.fcap)):
                self.fs.inF[t] = 0
        self.fs.nf = 0
        self.fs.fvalid = False
        self.sup.dirty = True
        free(newpos)
        return old - nk

    def weights(self):
        return np.array([self.alpha[t] for t in range(self.size)], dtype=np.float64)

    def known_sums(self):
        """(inputs, sums): the inputs with a half in the core set and their sums sum_t alpha_t s_t k(x_t, x_p) over
        the support, from the core-set QP's gradient as a full scan takes them (known_sums, _scans.pxi); None
        where full scans compute every sum (problems that are not mirrored, lookup kernels).  For the chunked
        scans, which must finish these inputs as the in-memory scans do."""
        cdef cnp.ndarray[double, ndim=1, mode="c"] ka = np.empty(max(self.m, 1))
        if self.sup.dirty:
            pack_support(self)
        if not known_sums(self, &ka[0]):
            return None
        ka = ka[:self.m]
        rows = np.flatnonzero(~np.isnan(ka))
        return rows, ka[rows]

    def add_warm(self, zs, alpha):
        """add(zs), then warm(alpha) for the core set that results (alpha in core order, one weight per core
        vector after the addition): refimpl.meb.MEBOps.add_warm, with one pass over the new rows fewer.  add
        takes each new vector's gradient from its row, and warm then takes every gradient again from the rows;
        a row that the cache does not keep was computed twice.  Here, on the coordinate path of a radial kernel,
        a new row that _parallel_rows would only have computed for its Q_kk and gradient is not computed at
        all: its Q_kk is that of k(x, x) = 1, exactly the value the row gives (a distance of exact zeros,
        exp(0) = 1), and its gradient is warm's.  CASP's seed of 20,934 core vectors: 3.2 10^8 kernel values
        fewer."""
        zs = [int(z) for z in zs]
        a = _simplex_weights(alpha, self.size + len(zs))   # checked before the core set changes
        self.defer_stats = True
        try:
            self.add(zs)
        finally:
            self.defer_stats = False
        self.warm(a)

    def warm(self, alpha):
        """(Beyond the paper) alpha of the core set, in core order (refimpl.meb.MEBOps.warm): the weights are set,
        scaled to the simplex, and the gradient 2 Q alpha - l computed again from the Q rows (a warm start for
        the next solve; _qrows.pxi)."""
        cdef double[::1] a = _simplex_weights(alpha, self.size)
        cdef Py_ssize_t t
        cdef int rc
        for t in range(self.size):
            self.alpha[t] = a[t]
        with nogil:
            rc = gradient_from_rows(self)
        lookup_raise(self)
        if rc != 0:
            raise MemoryError("core-set kernel cache")
        self.fs.fvalid = False
        self.sup.dirty = True

    def step_bound(self):
        return smo_step_bound(self.size)

    def solve(self, double tol, method, Py_ssize_t bound):
        """Warm-started core-set QP to gap <= tol (refimpl.meb.MEBOps.solve): the active set (SMO when
        Q_FF is singular) or SMO.  Returns the steps made."""
        cdef Py_ssize_t steps = -1
        cdef bint active = method == "active_set"
        with nogil:
            if active:
                steps = active_set_solve(self, tol, bound)
            if steps == -1 or not active:
                steps = smo_solve(self, tol, bound)
                self.fs.fvalid = False  # SMO moved alpha: the free set is rebuilt from the support next time
        lookup_raise(self)
        if steps == -2:
            raise MemoryError("core-set kernel cache")
        self.sup.dirty = True
        return steps

    def ball(self):
        """R^2, the margin alpha'Q alpha and the core vectors' squared distances (refimpl.meb.MEBOps.ball)."""
        cdef double marg = self.margin(), lsum = 0.0, gmin = INFINITY, gmax = -INFINITY, g
        cdef Py_ssize_t t
        for t in range(self.size):
            lsum += self.alpha[t] * self.l[t]
            g = self.grad[t]
            if g < gmin:
                gmin = g
            if self.alpha[t] > 0 and g > gmax:
                gmax = g
        R2 = self.c0 + (lsum - marg)
        return Ball.make(R2, marg, self.init_problem.constant_term, marg + self.c0 - gmax, marg + self.c0 - gmin)

    cdef double margin(self) noexcept nogil:
        """alpha'Q alpha = alpha'(g + l) / 2."""
        cdef double s = 0.0
        cdef Py_ssize_t t
        for t in range(self.size):
            s += self.alpha[t] * (self.grad[t] + self.l[t])
        return 0.5 * s

    cdef Py_ssize_t count_support(self) noexcept nogil:
        cdef Py_ssize_t t, k = 0
        for t in range(self.size):
            if self.alpha[t] > 0:
                k += 1
        return k

    def scan(self, idx, Py_ssize_t k, double d2_over):
        """The furthest candidate (first within a relative TIE of the maximum) and, for a full scan
        (idx None), its top-k beyond d2_over (refimpl.meb.MEBOps.scan)."""
        # a block the budget stopped (kb.full) leaves the core vectors beyond it to exact sums over all of them;
        # once those outnumber the support, the support's scans cost less (10^6 x 784, the papers' stop rule: a
        # panel fit, the tail held 2,029, the support 657: in memory 60 s, from zarr on the support's scans 31 s)
        if self.kb.on:
            if not (self.kb.full and self.count_support() < self.size - self.kb.filled) \
                    and (idx is not None or not self.kb.rows):  # (keyed by rows: full scans on the support)
                if idx is not None:
                    return kb_scan_sample(self, np.ascontiguousarray(idx, dtype=np.intp), d2_over)
                return full_scan(self, k, d2_over, True)
            self.kb.n_support += 1
        if self.sup.dirty:
            pack_support(self)
        lookup_sums(self, idx)  # a callable's sums over the support's columns, which _kalpha reads
        if idx is not None:
            return scan_sample(self, np.ascontiguousarray(idx, dtype=np.intp), d2_over)
        return full_scan(self, k, d2_over, False)

    def memory_state(self):
        """MemoryState(cache, factor, stores, peak, budget) in bytes: the cache rows, the Cholesky factor, the
        core and support stores (and a callable's columns, whose reserve peak counts), the peak of the three and
        the budget; for tests of cache_size and the reports' split of a chunked fit's memory."""
        cdef Py_ssize_t b = sizeof(double), lk = self.lookup.held if self.lookup is not None else 0
        return MemoryState(int(self.cache.used * b), int(self.cache.fres * b),
                           int(self.core.nbytes() + self.sup.store.nbytes() + self.kb.nbytes() + lk * b),
                           int(max(self.cache.peak, self.cache.held()) * b), int(self.cache.budget * b))

    def block_state(self):
        """(the scans use the kernel block, core vectors in it, its bytes, candidates the last scan computed
        again in double, ... all scans of the fit): for tests of the block (_kblock.pxi)."""
        return (bool(self.kb.on), int(self.kb.filled), int(self.kb.nbytes()), int(self.kb.recomputed),
                int(self.kb.n_again))

    def support_scans(self):
        """Scans that took the support's path although the block is on (its budget stopped it and the support
        is smaller than the core vectors beyond it): for tests."""
        return int(self.kb.n_support)

    def screening_state(self):
        """(full scans still screen, sampled scans left without the float screen, ... without the Taylor
        screen, the last scan's screen: 'taylor', 'float' or None): for tests of the screens and their
        fallback."""
        return self.screens.state()


def fit_meb(problem, eps, **kwargs):
    """:func:`refimpl.meb.fit_meb` on the Cython numerics :class:`FastMEBOps` (same contract), with BLAS
    single-threaded: the engine's GEMMs run inside its own OpenMP regions, sized to their work
    (fastimpl._openmp.blas_single_threaded)."""
    global BLAS_SERIAL
    kwargs.setdefault("ops_class", FastMEBOps)
    with blas_single_threaded():
        BLAS_SERIAL += 1
        try:
            return _ref_meb.fit_meb(problem, eps, **kwargs)
        finally:
            BLAS_SERIAL -= 1


include "_expansion.pxi"    # kernel_expansion: prediction
include "_hooks.pxi"        # test hooks of the SIMD kernels and the screens; SCREEN_TERM_ERR
