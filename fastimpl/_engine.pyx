# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The numerics of the core-set loop in Cython: :class:`FastMEBOps` behind :func:`refimpl.driver.run_core_set_loop`.

``fit_meb`` here is :func:`refimpl.meb.fit_meb` with ``ops_class=FastMEBOps``: the same loop, the same
random draws, the same decisions (tie-breaking, stop rules, inner tolerances); only *how* the numbers are
computed differs from :class:`refimpl.meb.MEBOps`:

* kernel rows run through the SIMD loops of ``_simd.h`` (points stored by coordinate) or, from
  ``BLAS_MIN_D`` coordinates on, through BLAS GEMV/GEMM against cached squared norms (``_rows.pxi``);
* rows of Q = K~[S, S] live in an LRU cache bounded by ``cache_size`` bytes (LIBSVM's design): a row is
  computed once, extended when the core set grows, and recomputed only after eviction; the active set's
  Cholesky factor and the stores of the core and support vectors (their coordinates, or CSR rows) are
  charged to the same budget (rows are evicted to make room for them), so ``cache_size`` bounds all
  the memory the core set holds;
* the core-set QP (SMO with second-order working-set selection, or the active-set Newton method with an
  updated Cholesky factor) runs in C without the GIL;
* scans and certificates run under ``nogil`` with OpenMP ``prange`` over chunks of candidates, and a full
  scan of the 2m mirrored points of CVR computes each input's kernel row once for both signs;
* sparse (CSR) input stays CSR: input rows are read from its arrays (squared norms and k(x, x) cached once,
  O(nnz)), the core and support stores hold CSR rows, and a kernel row is a sparse-dense product against
  the query row scattered into a dense d-vector (``_rows.pxi``); nothing m x d is ever dense;
* nothing is O(n) in sampling mode: only the initial pair, the samples and the final certificate touch
  the data, and a full scan keeps only its top-k candidates, never n values.
"""
import numpy as np
import scipy.sparse as sp
cimport numpy as cnp
from cython.parallel cimport prange
from libc.math cimport exp, sqrt, fabs, INFINITY
from libc.float cimport DBL_EPSILON
from libc.stdlib cimport malloc, calloc, free, realloc
from libc.string cimport memcpy, memset
from scipy.linalg.cython_lapack cimport dpotrf

from refimpl import meb as _ref_meb
from refimpl.driver import Ball, Scan
from refimpl.meb import smo_step_bound

cnp.import_array()

include "_tolerances.pxi"   # TAU, TIE, PIVOT_RTOL of refimpl.simplex_qp
# below this many kernel evaluations a scan runs serially: thread start-up would cost more
cdef Py_ssize_t PARALLEL_MIN_WORK = 20000


cdef inline Py_ssize_t factor_doubles(Py_ssize_t nf, Py_ssize_t stride) noexcept nogil:
    """Resident doubles of the first nf rows of a row-major lower triangular factor at this stride: row r
    writes r + 1 doubles, so the pages behind them hold at most nf(nf+1)/2 doubles plus a page (512
    doubles) per row, and never more than the nf * stride doubles they span (plus the last page)."""
    return min(nf * stride + 512, nf * (nf + 1) // 2 + nf * 512)
#: the active set's gradient refresh runs in parallel from this many multiply-adds on
cdef Py_ssize_t GRAD_PARALLEL_MIN_WORK = 2_000_000
#: a sampled scan runs in parallel from this many kernel evaluations on.  Below it (59 candidates and
#: up to ~17,000 support vectors) one thread is faster: every parallel region waits for the other
#: thread, which on a busy machine can take a scheduler time slice (measured: 2.3 s serial against
#: 20-47 s with a parallel region per sample, checkerboard m = 2e4, load 5 on 2 cores)
cdef Py_ssize_t SCAN_PARALLEL_MIN_WORK = 1_000_000
#: a single Q row is split over threads from this many kernel-evaluation coordinates on
cdef Py_ssize_t ROW_PARALLEL_MIN_WORK = 1_000_000
#: sampled scans run unscreened after one whose screening recomputed more than half its candidates
cdef Py_ssize_t SCREEN_RETRY = 16
#: the screens of a scan: none (every candidate in double), the single-precision exp of the support
#: store's weighted_screen, or the store's Taylor expansion (_taylor.h)
cdef enum:
    SCREEN_NONE = 0
    SCREEN_FLOAT = 1
    SCREEN_TAYLOR = 2
#: when the Taylor screen runs where the store allows it: 0 where it costs less than the kernel sums it
#: replaces (the costs below), 1 always, -1 never (tests set it with _set_taylor_policy)
cdef int TAYLOR_POLICY = 0
#: measured costs in ns (AVX-512, one core): a Gaussian term of a kernel sum in double at d <= 3; a
#: moment's term of the Taylor screen's build, per support vector; a moment's term of its evaluation, per
#: candidate
cdef double COST_KERNEL_TERM = 0.9
cdef double COST_TAYLOR_BUILD = 0.25
cdef double COST_TAYLOR_EVAL = 0.06
#: candidates per chunk of a full scan (its top-k list and its maximum are kept per chunk)
cdef Py_ssize_t SCAN_CHUNK = 2048
#: candidates per GEMM block on the BLAS path
cdef Py_ssize_t GEMM_BLOCK = 64
#: room in FastMEBOps' allocation table (it holds 23 buffers)
cdef enum:
    OWNED_MAX = 24


def _set_taylor_policy(int policy):
    """Set when the scans screen by Taylor expansion (0: by cost, 1: always where allowed, -1: never);
    returns the old policy (tests force both paths)."""
    global TAYLOR_POLICY
    old = TAYLOR_POLICY
    TAYLOR_POLICY = policy
    return old


def _set_grad_parallel_min_work(Py_ssize_t work):
    """Set the active set's parallel threshold; returns the old one (tests use 0 to force the
    parallel gradient refresh on small problems)."""
    global GRAD_PARALLEL_MIN_WORK
    old = GRAD_PARALLEL_MIN_WORK
    GRAD_PARALLEL_MIN_WORK = work
    return old


include "_kernels.pxi"
include "_rows.pxi"


cdef inline Py_ssize_t _bsearch(const Py_ssize_t* a, Py_ssize_t n, Py_ssize_t z) noexcept nogil:
    """Position of z in the sorted a[0:n], or -1."""
    cdef Py_ssize_t lo = 0, hi = n, mid
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] < z:
            lo = mid + 1
        else:
            hi = mid
    return lo if (lo < n and a[lo] == z) else -1


cdef inline void _topk_insert(double* vals, Py_ssize_t* keys, Py_ssize_t* cnt, Py_ssize_t k, double v,
                              Py_ssize_t z) noexcept nogil:
    """Keep the k largest (v, z) -- larger v first, ties to the lower z -- in vals/keys[0:cnt]."""
    cdef Py_ssize_t p = cnt[0]
    if p == k:
        if v < vals[k - 1] or (v == vals[k - 1] and z > keys[k - 1]):
            return
        p = k - 1
    else:
        cnt[0] = p + 1
    while p > 0 and (vals[p - 1] < v or (vals[p - 1] == v and keys[p - 1] > z)):
        vals[p] = vals[p - 1]
        keys[p] = keys[p - 1]
        p -= 1
    vals[p] = v
    keys[p] = z


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


cdef class FastMEBOps:
    """The numerics interface of refimpl.driver for an ``MEBProblem`` (see refimpl.meb.MEBOps)."""
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
    cdef Py_ssize_t m, d
    cdef bint mirror, signed_, lconst
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
    # LRU cache of Q rows
    cdef double** rows
    cdef Py_ssize_t* rlen
    cdef Py_ssize_t* rcap
    cdef Py_ssize_t* lprev
    cdef Py_ssize_t* lnext
    cdef Py_ssize_t lhead, ltail, used, budget
    cdef Py_ssize_t fres            # doubles of the budget held by the active set's Cholesky factor
    cdef Py_ssize_t fhw             # the most free coordinates its buffer has held (touched memory stays)
    cdef Py_ssize_t peak            # the most doubles rows, factor and stores have held together (_held)
    # SMO work space
    # support (alpha > 0) packed for the scans
    cdef _PointStore sv
    cdef double* svcoef             # alpha_t s_t
    cdef Py_ssize_t nsv, svcap
    cdef double svsum               # sum_t alpha_t s_t
    cdef double svabs               # sum_t |alpha_t s_t| (the screening kernel's error scale)
    cdef bint sv_dirty
    # Screening pays only where the screened values spread beyond their error bound (d^2 far below the
    # maximum).  When the margin is tiny against that bound (wide kernels at large C) nearly every
    # candidate is computed twice; a chunk or sample that recomputes more than half its candidates turns
    # screening off (for the rest of that full scan; for the next SCREEN_RETRY sampled scans).  Results
    # are the same either way: every value a decision reads is exact on both paths.
    cdef int full_screen_on         # written by any thread of a full scan (a benign race: 0 stays 0)
    cdef Py_ssize_t screen_off[3]   # sampled scans left to run without each screen (SCREEN_*)
    cdef double scanned             # candidates scanned since the support was last packed
    cdef double per_pack            # of them, over the last packs (the Taylor screen's amortisation)
    cdef int last_screen            # the screen of the last scan (SCREEN_*), for tests
    cdef double fin_scale           # bounds |l_z - c0| + 2 alpha_z c_z over the inputs (_screen_err)
    # active-set work space: free set, the Cholesky factor of Q_FF, right-hand sides
    cdef Py_ssize_t* F
    cdef double* QFF
    cdef double* rhs
    cdef double* yu                 # L^-1 l_F
    cdef double* yv                 # L^-1 1
    cdef char* inF
    cdef Py_ssize_t fcap, nf
    cdef bint fvalid
    # the allocation table: every raw buffer above is registered once in __cinit__; _grow reallocates the
    # ones that grow with the core set (element size > 0) and __dealloc__ frees them all
    cdef void** owned[OWNED_MAX]
    cdef size_t grow_elem[OWNED_MAX]
    cdef int n_owned

    cdef int _own(self, void** slot, size_t grow_elem) except -1:
        if self.n_owned >= OWNED_MAX:
            raise RuntimeError("FastMEBOps: the allocation table is full; raise OWNED_MAX")
        self.owned[self.n_owned] = slot
        self.grow_elem[self.n_owned] = grow_elem
        self.n_owned += 1
        return 0

    def __cinit__(self):
        # (the object's memory starts zeroed: every pointer is NULL until it is allocated)
        self.n_owned = 0
        # arrays of one entry per core vector, grown together by _grow
        self._own(<void**> &self.S, sizeof(Py_ssize_t))
        self._own(<void**> &self.Ss, sizeof(double))
        self._own(<void**> &self.l, sizeof(double))
        self._own(<void**> &self.alpha, sizeof(double))
        self._own(<void**> &self.grad, sizeof(double))
        self._own(<void**> &self.Qd, sizeof(double))
        self._own(<void**> &self.rows, sizeof(double*))
        self._own(<void**> &self.rlen, sizeof(Py_ssize_t))
        self._own(<void**> &self.rcap, sizeof(Py_ssize_t))
        self._own(<void**> &self.lprev, sizeof(Py_ssize_t))
        self._own(<void**> &self.lnext, sizeof(Py_ssize_t))
        self._own(<void**> &self.czs, sizeof(Py_ssize_t))
        self._own(<void**> &self.czp, sizeof(Py_ssize_t))
        # buffers sized elsewhere: the packed support, the sparse input's norms, the active set's work space
        self._own(<void**> &self.svcoef, 0)
        self._own(<void**> &self.Xsq, 0)
        self._own(<void**> &self.Xrd, 0)
        self._own(<void**> &self.xd, 0)
        self._own(<void**> &self.F, 0)
        self._own(<void**> &self.QFF, 0)
        self._own(<void**> &self.rhs, 0)
        self._own(<void**> &self.yu, 0)
        self._own(<void**> &self.yv, 0)
        self._own(<void**> &self.inF, 0)
        self.svcap = 0
        self.fcap = 0; self.nf = 0; self.fvalid = False
        self.sparse = False
        self.size = 0; self.cap = 0; self.used = 0; self.lhead = -1; self.ltail = -1; self.fres = 0; self.fhw = 0; self.peak = 0

    def __dealloc__(self):
        cdef Py_ssize_t t
        if self.rows != NULL:
            for t in range(self.size):
                free(self.rows[t])
        for t in range(self.n_owned):
            free(self.owned[t][0])
            self.owned[t][0] = NULL

    def __init__(self, problem, Py_ssize_t cache_size=200 * 2**20):
        cdef const signed char[::1] s
        cdef const long long[::1] xp
        cdef const int[::1] xi
        cdef const double[::1] xv
        cdef Py_ssize_t q
        self.init_problem = problem
        self.m = problem.X.shape[0]
        self.n = problem.n
        self.d = problem.X.shape[1]
        self.mirror = bool(problem.mirror)
        self.K = make_kern(problem.kernel, self.d)
        keep = []
        self.sparse = sp.issparse(problem.X)
        if self.sparse:
            # the CSR arrays as they are (int32 column indices, int64 row pointers: m + 1 values)
            if problem.X.shape[1] >= 2**31:
                raise ValueError("X: sparse input needs fewer than 2**31 columns")
            arrs = (np.ascontiguousarray(problem.X.indptr, dtype=np.int64),
                    np.ascontiguousarray(problem.X.indices, dtype=np.int32),
                    np.ascontiguousarray(problem.X.data, dtype=np.float64))
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
        else:
            self.X = problem.X
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
        self.budget = max(cache_size, 0) // sizeof(double)
        self.core = _PointStore()
        self.sv = _PointStore()
        if self.sparse:
            self.core.setup_csr(self.K, 64)
            self.sv.setup_csr(self.K, 64)
        else:
            self.core.setup(self.K, 64)
            self.sv.setup(self.K, 64)
            self._enable_screens()
        self.sv_dirty = True
        self.full_screen_on = 1
        self.screen_off[SCREEN_FLOAT] = 0
        self.screen_off[SCREEN_TAYLOR] = 0
        self.scanned = 0.0
        self.per_pack = 0.0
        self._grow(64)

    cdef void _enable_screens(self) except *:
        """Let the support's store screen with single-precision distances and by Taylor expansion, both
        centred on the bounding box of the inputs (every candidate and support vector lies in it; the store
        says whether the kernel and the box allow either)."""
        cdef double lo[16]
        cdef double hi[16]
        cdef Py_ssize_t i, e, d = self.d
        if d < 1 or d > 16 or self.m == 0:
            return
        with nogil:
            for e in range(d):
                lo[e] = self.X[0, e]
                hi[e] = self.X[0, e]
            for i in range(1, self.m):
                for e in range(d):
                    if self.X[i, e] < lo[e]:
                        lo[e] = self.X[i, e]
                    elif self.X[i, e] > hi[e]:
                        hi[e] = self.X[i, e]
        self.sv.enable_f32(lo, hi)
        self.sv.enable_taylor(lo, hi)
        self.fin_scale = self._finish_scale()

    cdef double _finish_scale(self) except? -1.0:
        """A bound on |l_z - c0| + 2 alpha_z c_z over every candidate z, for the rounding of _finish_d2 in
        _screen_err (radial kernels: k(x, x) = 1; alpha_z <= 1 on the simplex): one pass over the inputs'
        offsets (CVR's targets) and ridges (sample weights)."""
        cdef double cmax = fabs(self.diag_add), omax = 0.0
        cdef Py_ssize_t q
        with nogil:
            if self.pdiag != NULL:
                cmax = 0.0
                for q in range(self.m):
                    cmax = max(cmax, fabs(self.pdiag[q]))
            if self.offset != NULL:
                for q in range(self.m):
                    omax = max(omax, fabs(self.offset[q]))
        return omax + 1.0 + fabs(self.label_bias) + 3.0 * cmax + fabs(self.c0)

    cdef void _grow(self, Py_ssize_t newcap) except *:
        cdef Py_ssize_t t, old = self.cap
        cdef void* p
        for t in range(self.n_owned):
            if self.grow_elem[t] > 0:
                p = realloc(self.owned[t][0], newcap * self.grow_elem[t])
                if p == NULL:  # the old buffer is still owned (and freed by __dealloc__)
                    raise MemoryError("core-set arrays")
                self.owned[t][0] = p
        for t in range(old, newcap):
            self.rows[t] = NULL
            self.rlen[t] = 0
            self.rcap[t] = 0
            self.lprev[t] = -1
            self.lnext[t] = -1
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

    # ------------------------------------------------------------ the LRU cache of Q rows
    cdef inline void _lru_unlink(self, Py_ssize_t t) noexcept nogil:
        if self.lprev[t] >= 0:
            self.lnext[self.lprev[t]] = self.lnext[t]
        else:
            self.lhead = self.lnext[t]
        if self.lnext[t] >= 0:
            self.lprev[self.lnext[t]] = self.lprev[t]
        else:
            self.ltail = self.lprev[t]
        self.lprev[t] = -1
        self.lnext[t] = -1

    cdef inline void _lru_front(self, Py_ssize_t t) noexcept nogil:
        self.lprev[t] = -1
        self.lnext[t] = self.lhead
        if self.lhead >= 0:
            self.lprev[self.lhead] = t
        self.lhead = t
        if self.ltail < 0:
            self.ltail = t

    cdef inline Py_ssize_t _held(self) noexcept nogil:
        """Doubles held against the budget: cached rows, the Cholesky factor, and the core and support
        stores (the core vectors' own coordinates or CSR rows)."""
        return self.used + self.fres + (self.core.nbytes() + self.sv.nbytes()) // sizeof(double)

    cdef void _evict_for(self, Py_ssize_t need, Py_ssize_t keep1, Py_ssize_t keep2) noexcept nogil:
        """Free least-recently used rows until ``need`` more doubles fit the budget (rows keep1/keep2
        stay: SMO holds two rows at once)."""
        cdef Py_ssize_t t = self.ltail, prev
        cdef Py_ssize_t over = self._held() + need - self.budget   # only ``used`` changes below
        while over > 0 and t >= 0:
            prev = self.lprev[t]
            if t != keep1 and t != keep2:
                self._lru_unlink(t)
                self.used -= self.rcap[t]
                over -= self.rcap[t]
                free(self.rows[t])
                self.rows[t] = NULL
                self.rlen[t] = 0
                self.rcap[t] = 0
            t = prev

    cdef void _reserve_factor(self, Py_ssize_t nf, Py_ssize_t extra) noexcept nogil:
        """Charge the Cholesky factor (its buffer's high-water mark of nf rows), plus ``extra`` doubles, to
        the cache's budget and evict rows to honour it.  A factor of nf rows at stride fcap touches
        nf(nf+1)/2 doubles plus up to a page per row: the rest of each row's stride is never written, so
        it is never backed by memory, and rows once written stay resident until the buffer is freed."""
        if nf > self.fhw:
            self.fhw = nf
        self.fres = factor_doubles(self.fhw, self.fcap) + extra
        self._evict_for(0, -1, -1)
        self._note_peak()

    cdef inline void _note_peak(self) noexcept nogil:
        cdef Py_ssize_t held = self._held()
        if held > self.peak:
            self.peak = held

    cdef inline Py_ssize_t _row_cap(self) noexcept nogil:
        """The capacity a Q row gets when it is (re)allocated: room for a quarter more core vectors."""
        cdef Py_ssize_t newcap = max(self.size + self.size // 4, 16)
        return max(self.cap, self.size) if newcap > self.cap else newcap

    cdef double* qrow(self, Py_ssize_t i, Py_ssize_t keep) noexcept nogil:
        """Row i of Q over the core set, from the cache (computing what it lacks), or NULL when no
        memory is left.  ``keep`` is a row that must not be evicted meanwhile (or -1)."""
        cdef Py_ssize_t size = self.size, lo = self.rlen[i], newcap
        cdef double* r = self.rows[i]
        if r != NULL and lo >= size:
            if self.lhead != i:
                self._lru_unlink(i)
                self._lru_front(i)
            return r
        if r == NULL or self.rcap[i] < size:
            newcap = self._row_cap()
            self._evict_for(newcap - self.rcap[i], i, keep)
            r = <double*> realloc(r, newcap * sizeof(double))
            if r == NULL:
                return NULL
            if self.rows[i] == NULL:
                lo = 0
            else:
                self._lru_unlink(i)
            self.used += newcap - self.rcap[i]
            self._note_peak()
            self.rows[i] = r
            self.rcap[i] = newcap
            self._lru_front(i)
        elif self.lhead != i:
            self._lru_unlink(i)
            self._lru_front(i)
        self._fill_row(i, lo, size, r)
        self.rlen[i] = size
        return r

    cdef void _fill_row(self, Py_ssize_t i, Py_ssize_t lo, Py_ssize_t hi, double* r) noexcept nogil:
        """r[t] = Q[i, t] = s_i s_t (k(x_i, x_t) + beta_b) + delta_it c for t in [lo, hi)."""
        cdef Py_ssize_t t, c, nchunk, clo, chi, step, q = self.pz(self.S[i])
        cdef const double* x
        cdef double xsq = self.core.sq[i], xrd = self.core.rd[i], si = self.Ss[i]
        if hi <= lo:
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
        for t in range(lo, hi):
            r[t] = si * self.Ss[t] * (r[t] + self.label_bias)
        if lo <= i < hi:
            r[i] += self.cdiag(self.S[i])
        self.n_eval += hi - lo

    # ------------------------------------------------------------ the numerics interface
    def furthest_from(self, Py_ssize_t z, idx):
        """Initialisation: argmax over idx of ||phi~(z) - phi~(z_l)||^2 + Delta_l (refimpl.driver.initial_pair)."""
        cdef cnp.ndarray[Py_ssize_t, ndim=1, mode="c"] a = np.ascontiguousarray(idx, dtype=np.intp)
        cdef Py_ssize_t cnt = a.shape[0], p, l, best = -1
        cdef double daz = self.rawdiag(z), dal, v, best_v = -INFINITY, kzz, sz = self.zsign(z), sl, kv
        cdef const double* xz = NULL
        cdef Py_ssize_t q
        with nogil:
            kzz = k_diag(&self.K, daz) + self.label_bias + self.cdiag(z)
            if self.sparse:
                xz = self._dense_input(self.pz(z), self.xd)
            for p in range(cnt):
                l = a[p]
                dal = self.rawdiag(l)
                sl = self.zsign(l)
                if self.sparse:
                    q = self.pz(l)
                    kv = csr_dot_dense(xz, self.Xind, self.Xval, self.Xptr[q], self.Xptr[q + 1])
                    dots_to_kernel(&self.K, &kv, 1, self.Xsq[self.pz(z)], &self.Xsq[q], daz, &dal)
                else:
                    kv = k_eval(&self.K, &self.X[self.pz(z), 0], &self.X[self.pz(l), 0], daz, dal)
                v = sz * sl * (kv + self.label_bias)
                if l == z:
                    v += self.cdiag(z)
                v = kzz - 2.0 * v + (self.point_ldiag(l, dal) + self.c0)
                if v > best_v:
                    best_v = v
                    best = l
            if self.sparse:
                self._release_input(self.pz(z), self.xd)
        self.n_eval += cnt
        return best

    def start(self, Py_ssize_t z_a, Py_ssize_t z_b):
        """S_0 = {z_a, z_b} with alpha = e_a (refimpl.meb.MEBOps.start)."""
        self.add([z_a])
        self.alpha[0] = 1.0
        self.grad[0] = 2.0 * self.Qd[0] - self.l[0]
        self.add([z_b])

    def add(self, zs):
        """Append the points zs with alpha = 0; each one's gradient 2 (K~ alpha)_z - l_z comes from its
        new Q row (which the cache keeps: the next solve starts with it)."""
        cdef Py_ssize_t z, k, t
        cdef double ka
        cdef double* r
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
                r = self.qrow(k, -1)
            if r == NULL:
                raise MemoryError("core-set kernel cache")
            self.Qd[k] = r[k]
            ka = 0.0
            for t in range(k):
                ka += self.alpha[t] * r[t]
            self.grad[k] = 2.0 * ka - self.l[k]

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

    def weights(self):
        return np.array([self.alpha[t] for t in range(self.size)], dtype=np.float64)

    def step_bound(self):
        return smo_step_bound(self.size)

    def solve(self, double tol, method, Py_ssize_t bound):
        """Warm-started core-set QP to gap <= tol (refimpl.meb.MEBOps.solve): the active set (SMO when
        Q_FF is singular) or SMO.  Returns the steps made."""
        cdef Py_ssize_t steps = -1
        cdef bint active = method == "active_set"
        with nogil:
            if active:
                steps = self.active_set(tol, bound)
            if steps == -1 or not active:
                steps = self.smo(tol, bound)
                self.fvalid = False  # SMO moved alpha: the free set is rebuilt from the support next time
        if steps == -2:
            raise MemoryError("core-set kernel cache")
        self.sv_dirty = True
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

    # ------------------------------------------------------------ scans (001 eq. (12))
    cdef void _pack_support(self) except *:
        """The support (alpha > 0) packed for the scans: coordinates and alpha_t s_t."""
        cdef Py_ssize_t t, k = 0, nsv = self.count_support()
        if nsv > self.svcap:
            self.svcap = max(2 * self.svcap, nsv, 64)
            self.svcoef = <double*> realloc(self.svcoef, self.svcap * sizeof(double))
            if self.svcoef == NULL:
                raise MemoryError("support arrays")
        self.sv.reserve(nsv)
        self.sv.n = 0
        self.svsum = 0.0
        self.svabs = 0.0
        for t in range(self.size):
            if self.alpha[t] > 0:
                self._put_input(self.sv, k, self.pz(self.S[t]))
                self.svcoef[k] = self.alpha[t] * self.Ss[t]
                self.svsum += self.svcoef[k]
                self.svabs += fabs(self.svcoef[k])
                k += 1
        self.nsv = nsv
        self.sv_dirty = False
        self.sv.tvalid = False  # new weights (the puts above cleared it too)
        # what the scans at this support are expected to cover: the candidates of the last supports
        self.per_pack = 0.5 * (self.per_pack + self.scanned)
        self.scanned = 0.0

    cdef inline double _finish_d2(self, Py_ssize_t z, double ka, double marg) noexcept nogil:
        """d^2(z) - c0 from ka = sum_t alpha_t s_t k(x_t, x_z): marg - 2 (K~alpha)_z + l_z - c0."""
        cdef double kal = self.zsign(z) * (ka + self.label_bias * self.svsum)
        cdef Py_ssize_t p
        if self.diag_add != 0.0 or self.pdiag != NULL:
            p = _bsearch(self.czs, self.size, z)
            if p >= 0:
                kal += self.alpha[self.czp[p]] * self.cdiag(z)
        return marg - 2.0 * kal + self.point_ldiag(z, self.rawdiag(z))

    cdef void _kalpha(self, Py_ssize_t lo, Py_ssize_t hi, const Py_ssize_t* idx, double* out,
                      double* buf) noexcept nogil:
        """out[p - lo] = sum_t alpha_t s_t k(x_t, x_p(z)) for the candidates z = idx[p] (idx NULL: the
        input rows p themselves), p in [lo, hi).  ``buf`` holds GEMM_BLOCK x nsv (BLAS path) or nsv
        values, plus GEMM_BLOCK x (d + 2) for gathered candidates."""
        cdef Py_ssize_t p, q, b, nb, e, d = self.d, nsv = self.nsv
        cdef double* xs
        cdef double* xsq
        cdef double* xrd
        cdef const double* x
        cdef double* xd
        if self.sparse:
            # buf: nsv kernel values, then a d-vector for the candidates' scattered rows
            xd = &buf[nsv + 1]
            memset(xd, 0, d * sizeof(double))
            for p in range(lo, hi):
                q = self.pz(idx[p]) if idx != NULL else p
                x = self._dense_input(q, xd)
                self.sv.row(0, nsv, x, self.Xsq[q], self.Xrd[q], buf)
                out[p - lo] = cv_dot4(self.svcoef, buf, nsv)
                self._release_input(q, xd)
            return
        if self.sv.blas:
            xs = &buf[GEMM_BLOCK * nsv]
            xsq = &xs[GEMM_BLOCK * d]
            xrd = &xsq[GEMM_BLOCK]
            p = lo
            while p < hi:
                nb = min(GEMM_BLOCK, hi - p)
                for b in range(nb):
                    q = self.pz(idx[p + b]) if idx != NULL else p + b
                    memcpy(&xs[b * d], &self.X[q, 0], d * sizeof(double))
                    xsq[b] = point_sq(&xs[b * d], d)
                    xrd[b] = point_rawdiag(&self.K, &xs[b * d])
                self.sv.block(xs, nb, d, xsq, xrd, 0, nsv, buf, nsv)
                for b in range(nb):
                    out[p + b - lo] = cv_dot4(self.svcoef, &buf[b * nsv], nsv)
                p += nb
            return
        for p in range(lo, hi):
            q = self.pz(idx[p]) if idx != NULL else p
            x = &self.X[q, 0]
            out[p - lo] = self.sv.weighted(x, 0.0, point_rawdiag(&self.K, x), self.svcoef, buf)

    cdef inline void _kalpha_any(self, Py_ssize_t lo, Py_ssize_t hi, const Py_ssize_t* idx, double* out,
                                 double* buf, int screen) noexcept nogil:
        """_kalpha, through the screen ``screen`` (SCREEN_*; the screens run on the coordinate path only)."""
        cdef Py_ssize_t p, b, nb
        cdef Py_ssize_t rows[64]
        if screen == SCREEN_NONE:
            self._kalpha(lo, hi, idx, out, buf)
        elif screen == SCREEN_FLOAT:
            for p in range(lo, hi):
                out[p - lo] = self.sv.weighted_screen(&self.X[self.pz(idx[p]) if idx != NULL else p, 0],
                                                      self.svcoef)
        elif idx == NULL:
            self.sv.taylor_sum(&self.X[lo, 0], self.d, NULL, hi - lo, out)
        else:
            p = lo
            while p < hi:
                nb = min(64, hi - p)
                for b in range(nb):
                    rows[b] = self.pz(idx[p + b])
                self.sv.taylor_sum(&self.X[0, 0], self.d, rows, nb, &out[p - lo])
                p += nb

    cdef Py_ssize_t _bufsize(self) noexcept nogil:
        if self.sparse:
            return self.nsv + 1 + self.d
        if self.sv.blas:
            return GEMM_BLOCK * self.nsv + GEMM_BLOCK * (self.d + 2) + 1
        return self.nsv + 1

    # ------------------------------------------------------------ screening
    # A scan needs exact d^2 only where a decision is made: at the maximum (and the candidates within TIE
    # of it) and beyond d2_over.  On the coordinate path the scans first compute every candidate's d^2
    # through a screen -- the single-precision exp of cv_radial_dot_screen, or, for a Gaussian kernel
    # wide against the data in d <= 3, the Taylor expansion of _taylor.h -- then compute again, in
    # double, only the candidates whose d^2 may reach either; the others keep values that are certainly
    # below both.  Every decision, and every value it reads, is the exact path's, so results do not change.
    cdef int _screen_for(self, Py_ssize_t cnt, bint sampled) noexcept nogil:
        """The screen for a scan of ``cnt`` inputs: the Taylor expansion where the store allows it and it
        costs less than the kernel sums it replaces, else the single-precision exp where the store has it,
        else none.  The Taylor moments are built once per support and weights, so their cost is weighed
        against the candidates expected at this support: this scan's, or as many as the last supports saw.
        A sampled scan skips a screen that recomputed more than half of a recent sample (screen_off)."""
        cdef double nt, direct, taylor, expect = max(<double> cnt, self.per_pack)
        self.scanned += cnt
        if self.sv.tmode and TAYLOR_POLICY >= 0 and self.nsv > 0 and not (sampled and self.screen_off[SCREEN_TAYLOR]):
            nt = <double> self.sv.tnt
            direct = expect * self.nsv * COST_KERNEL_TERM
            taylor = expect * nt * COST_TAYLOR_EVAL + (0.0 if self.sv.tvalid else self.nsv * nt * COST_TAYLOR_BUILD)
            if TAYLOR_POLICY == 1 or taylor < direct:
                return SCREEN_TAYLOR
        if self.sv.screens() and not (sampled and self.screen_off[SCREEN_FLOAT]):
            return SCREEN_FLOAT
        return SCREEN_NONE

    cdef void _count_off(self) noexcept nogil:
        """One sampled scan less for each screen that is off."""
        if self.screen_off[SCREEN_FLOAT] > 0:
            self.screen_off[SCREEN_FLOAT] -= 1
        if self.screen_off[SCREEN_TAYLOR] > 0:
            self.screen_off[SCREEN_TAYLOR] -= 1

    cdef inline double _screen_err(self, int screen, double marg) noexcept nogil:
        """A bound on |d^2_screen - d^2| (d^2 = ... - 2 s_z sum_t alpha_t s_t k_tz, |s_z| = 1), or -1 for
        SCREEN_NONE: the screen's error per term times sum |alpha_t s_t|, doubled, plus the round-off of
        two sums of nsv terms, plus that of _finish_d2 on both values (a few ulps of its largest part:
        the margin ``marg`` = alpha'Q alpha, which the scan has at hand, 2 (K~alpha)_z, l_z - c0).  The
        last is negligible against the single-precision screen but not against the Taylor screen's ~1e-12
        when the targets of CVR are large."""
        cdef double term
        if screen == SCREEN_NONE:
            return -1.0
        term = self.sv.taylor_term_err() if screen == SCREEN_TAYLOR else self.sv.screen_term_err()
        return (2.0 * self.svabs * (term + 4.0 * DBL_EPSILON * (self.nsv + 1))
                + 8.0 * DBL_EPSILON * (fabs(marg) + 2.0 * self.svabs * (1.0 + fabs(self.label_bias))
                                       + self.fin_scale))

    cdef void _prepare_screen(self, int screen) noexcept nogil:
        """Build the Taylor screen's moments for the current support, if it is to run and they are stale."""
        if screen == SCREEN_TAYLOR and not self.sv.tvalid:
            self.sv.taylor_build(self.svcoef)
        self.last_screen = screen

    cdef inline double _exact_ka(self, Py_ssize_t q) noexcept nogil:
        """sum_t alpha_t s_t k(x_t, x_q) in double (the coordinate path: no scratch needed)."""
        cdef const double* x = &self.X[q, 0]
        return self.sv.weighted(x, 0.0, point_rawdiag(&self.K, x), self.svcoef, NULL)

    cdef inline double _screen_floor(self, double vmax, double err, double over) noexcept nogil:
        """Screened values v (d^2 - c0) below this are certainly below both the TIE band of the exact
        maximum (>= vmax - err, with vmax the screened maximum of the same candidates) and ``over``."""
        cdef double band = vmax - err - TIE * (fabs(vmax) + err + fabs(self.c0))
        return min(band, over) - err

    def memory_state(self):
        """(cache rows, Cholesky factor, core and support stores, peak of the three together, budget) in
        bytes: for tests of cache_size."""
        cdef Py_ssize_t b = sizeof(double)
        return (int(self.used * b), int(self.fres * b), int(self.core.nbytes() + self.sv.nbytes()),
                int(self.peak * b), int(self.budget * b))

    def screening_state(self):
        """(full scans still screen, sampled scans left without the float screen, ... without the Taylor
        screen, the last scan's screen: 'taylor', 'float' or None): for tests of the screens and their
        fallback."""
        return (bool(self.full_screen_on), int(self.screen_off[SCREEN_FLOAT]), int(self.screen_off[SCREEN_TAYLOR]),
                {SCREEN_TAYLOR: "taylor", SCREEN_FLOAT: "float"}.get(self.last_screen))

    def scan(self, idx, Py_ssize_t k, double d2_over):
        """The furthest candidate (first within a relative TIE of the maximum) and, for a full scan
        (idx None), its top-k beyond d2_over (refimpl.meb.MEBOps.scan)."""
        if self.sv_dirty:
            self._pack_support()
        if idx is not None:
            return self._scan_sample(np.ascontiguousarray(idx, dtype=np.intp), d2_over)
        return self._scan_all(k, d2_over)

    cdef object _scan_sample(self, cnp.ndarray[Py_ssize_t, ndim=1, mode="c"] idx, double d2_over):
        cdef Py_ssize_t cnt = idx.shape[0], p, nchunk, c, lo, hi, chunk = 16
        cdef cnp.ndarray[double, ndim=1, mode="c"] d2 = np.empty(cnt)
        cdef int screen = self._screen_for(cnt, True)
        cdef double marg = self.margin(), best = -INFINITY, thr, err = self._screen_err(screen, marg), floor
        cdef double* buf
        cdef Py_ssize_t bufsize = self._bufsize()
        cdef const Py_ssize_t* ip = &idx[0] if cnt > 0 else NULL
        cdef double* out = &d2[0] if cnt > 0 else NULL
        cdef Py_ssize_t again = 0
        with nogil:
            self._count_off()
            self._prepare_screen(screen)
            nchunk = (cnt + chunk - 1) // chunk
            if cnt * (self.sv.tnt if screen == SCREEN_TAYLOR else self.nsv) < SCAN_PARALLEL_MIN_WORK \
                    or nchunk == 1 or self.sv.blas:
                buf = <double*> malloc(bufsize * sizeof(double))
                self._kalpha_any(0, cnt, ip, out, buf, screen)
                free(buf)
            else:
                for c in prange(nchunk, schedule="dynamic"):
                    lo = c * chunk
                    hi = min(lo + chunk, cnt)
                    buf = <double*> malloc(bufsize * sizeof(double))
                    self._kalpha_any(lo, hi, ip, &out[lo], buf, screen)
                    free(buf)
            for p in range(cnt):
                out[p] = self._finish_d2(ip[p], out[p], marg)
                if out[p] > best:
                    best = out[p]
            if screen != SCREEN_NONE:
                # exact again wherever d^2 may reach the maximum's TIE band or d2_over (see _screen_err)
                floor = self._screen_floor(best, err, d2_over - self.c0)
                best = -INFINITY
                for p in range(cnt):
                    if not (out[p] < floor):  # (a screened NaN is computed again too)
                        out[p] = self._finish_d2(ip[p], self._exact_ka(self.pz(ip[p])), marg)
                        again += 1
                        if out[p] > best:
                            best = out[p]
                if 2 * again > cnt:
                    self.screen_off[screen] = SCREEN_RETRY
        self.n_eval += cnt * self.nsv
        thr = best - TIE * (fabs(best) + fabs(self.c0))
        for p in range(cnt):
            if d2[p] >= thr:
                break
        return Scan(int(idx[p]), best + self.c0, sample_d2=d2 + self.c0)

    cdef void _chunk_d2(self, Py_ssize_t c, double marg, double* vals, double* buf) noexcept nogil:
        """d^2 - c0 of the augmented points of chunk c of input rows, vals[h * SCAN_CHUNK + (p - lo)] for
        the half h (0: z = p; 1, mirrored: z = p + m): one kernel row per input serves both."""
        cdef Py_ssize_t lo = c * SCAN_CHUNK, hi = min(lo + SCAN_CHUNK, self.m), p
        self._kalpha(lo, hi, NULL, vals, buf)
        if self.mirror:
            for p in range(lo, hi):
                vals[SCAN_CHUNK + p - lo] = self._finish_d2(p + self.m, vals[p - lo], marg)
        for p in range(lo, hi):
            vals[p - lo] = self._finish_d2(p, vals[p - lo], marg)

    cdef Py_ssize_t _chunk_d2_screened(self, Py_ssize_t c, double marg, int screen, double err, double over,
                                       double* vals) noexcept nogil:
        """_chunk_d2 through the screen ``screen``: every value that may reach its half's TIE band of the
        chunk's maximum, or ``over``, is exact; the others are screened values certainly below both, so
        the chunk's maximum, its first candidate within TIE and its candidates beyond ``over`` are the
        exact path's.  Returns how many candidates were computed again in double."""
        cdef Py_ssize_t lo = c * SCAN_CHUNK, hi = min(lo + SCAN_CHUNK, self.m), p, h, again = 0
        cdef Py_ssize_t halves = 2 if self.mirror else 1
        cdef double ka, vmax[2]
        cdef double floor[2]
        vmax[0] = -INFINITY
        vmax[1] = -INFINITY
        self._kalpha_any(lo, hi, NULL, vals, NULL, screen)
        for p in range(lo, hi):
            ka = vals[p - lo]
            vals[p - lo] = self._finish_d2(p, ka, marg)
            vmax[0] = max(vmax[0], vals[p - lo])
            if self.mirror:
                vals[SCAN_CHUNK + p - lo] = self._finish_d2(p + self.m, ka, marg)
                vmax[1] = max(vmax[1], vals[SCAN_CHUNK + p - lo])
        for h in range(halves):
            floor[h] = self._screen_floor(vmax[h], err, over)
        if halves == 1:
            floor[1] = INFINITY
        for p in range(lo, hi):
            if not (vals[p - lo] < floor[0]) or (self.mirror and not (vals[SCAN_CHUNK + p - lo] < floor[1])):
                ka = self._exact_ka(p)
                vals[p - lo] = self._finish_d2(p, ka, marg)
                if self.mirror:
                    vals[SCAN_CHUNK + p - lo] = self._finish_d2(p + self.m, ka, marg)
                again += 1
        return again

    cdef object _scan_all(self, Py_ssize_t k, double d2_over):
        cdef Py_ssize_t nchunk = (self.m + SCAN_CHUNK - 1) // SCAN_CHUNK, halves = 2 if self.mirror else 1
        cdef Py_ssize_t c, h, p, lo, hi, kk = max(k, 1), nall, first = -1, bc = -1, bh = 0
        cdef double marg = self.margin(), best = -INFINITY, thr, over = d2_over - self.c0, v
        cdef int screen = self._screen_for(self.m, False)
        cdef double err = self._screen_err(screen, marg)
        cdef Py_ssize_t bufsize = self._bufsize()
        self.full_screen_on = 1  # every full scan tries screening again
        cdef double* cmax = <double*> malloc(nchunk * halves * sizeof(double))
        cdef double* tv = <double*> malloc(nchunk * kk * sizeof(double))
        cdef Py_ssize_t* tz = <Py_ssize_t*> malloc(nchunk * kk * sizeof(Py_ssize_t))
        cdef Py_ssize_t* tc = <Py_ssize_t*> malloc(nchunk * sizeof(Py_ssize_t))
        cdef double* vals
        cdef double* buf
        if cmax == NULL or tv == NULL or tz == NULL or tc == NULL:
            free(cmax); free(tv); free(tz); free(tc)
            raise MemoryError("scan buffers")
        with nogil:
            self._prepare_screen(screen)
            for c in prange(nchunk, schedule="dynamic",
                            use_threads_if=self.m * self.nsv >= PARALLEL_MIN_WORK and nchunk > 1 and not self.sv.blas):
                vals = <double*> malloc((2 * SCAN_CHUNK + bufsize) * sizeof(double))
                buf = &vals[2 * SCAN_CHUNK]
                lo = c * SCAN_CHUNK
                hi = min(lo + SCAN_CHUNK, self.m)
                if screen != SCREEN_NONE and self.full_screen_on:
                    if 2 * self._chunk_d2_screened(c, marg, screen, err, over if k > 0 else INFINITY, vals) > hi - lo:
                        self.full_screen_on = 0
                else:
                    self._chunk_d2(c, marg, vals, buf)
                tc[c] = 0
                for h in range(halves):
                    v = -INFINITY
                    for p in range(lo, hi):
                        if vals[h * SCAN_CHUNK + p - lo] > v:
                            v = vals[h * SCAN_CHUNK + p - lo]
                        if k > 0 and vals[h * SCAN_CHUNK + p - lo] > over:
                            _topk_insert(&tv[c * kk], &tz[c * kk], &tc[c], k, vals[h * SCAN_CHUNK + p - lo],
                                         p + h * self.m)
                    cmax[h * nchunk + c] = v
                free(vals)
            for c in range(nchunk * halves):
                if cmax[c] > best:
                    best = cmax[c]
            # the first candidate (in index order: the first half, then the mirrored one) within TIE
            thr = best - TIE * (fabs(best) + fabs(self.c0))
            for h in range(halves):
                for c in range(nchunk):
                    if cmax[h * nchunk + c] >= thr and bc < 0:
                        bc = c
                        bh = h
            if bc < 0:
                bc = 0
            vals = <double*> malloc((2 * SCAN_CHUNK + bufsize) * sizeof(double))
            self._chunk_d2(bc, marg, vals, &vals[2 * SCAN_CHUNK])
            lo = bc * SCAN_CHUNK
            hi = min(lo + SCAN_CHUNK, self.m)
            for p in range(lo, hi):
                if vals[bh * SCAN_CHUNK + p - lo] >= thr:
                    first = p + bh * self.m
                    break
            free(vals)
        self.n_eval += self.m * self.nsv
        top_v = []
        top_z = []
        if k > 0:
            for c in range(nchunk):
                for p in range(tc[c]):
                    top_v.append(tv[c * kk + p])
                    top_z.append(tz[c * kk + p])
        free(cmax); free(tv); free(tz); free(tc)
        tz_a = np.asarray(top_z, dtype=np.intp)
        tv_a = np.asarray(top_v, dtype=np.float64)
        order = np.lexsort((tz_a, -tv_a))[:k]
        return Scan(int(first), best + self.c0, top=tz_a[order], top_d2=tv_a[order] + self.c0)

    # ------------------------------------------------------------ the core-set QP: SMO
    cdef void grad_stats(self, double* gmin, double* gmax, double* gabs) noexcept nogil:
        """min g, max_{alpha>0} g and max |g| over the core set (SMO fuses this pass into its update)."""
        cdef Py_ssize_t t
        cdef double g
        gmin[0] = INFINITY
        gmax[0] = -INFINITY
        gabs[0] = 0.0
        for t in range(self.size):
            g = self.grad[t]
            if g < gmin[0]:
                gmin[0] = g
            if fabs(g) > gabs[0]:
                gabs[0] = fabs(g)
            if self.alpha[t] > 0 and g > gmax[0]:
                gmax[0] = g

    cdef Py_ssize_t most_violating(self, double gmin, double gabs) noexcept nogil:
        """refimpl.simplex_qp.most_violating: the first t with g_t within TIE of the minimum."""
        cdef Py_ssize_t t = cv_first_le(self.grad, self.size, gmin + TIE * (gabs + fabs(self.c0)))
        return t if t < self.size else 0

    cdef Py_ssize_t smo(self, double tol, Py_ssize_t max_steps) noexcept nogil:
        """Warm-started SMO with second-order working-set selection (refimpl.simplex_qp.smo_simplex).

        Same selections and the same arithmetic as the reference, organised for speed: the three O(|S|)
        passes of a step (the most violating i, the second-order j, the gradient update with the
        statistics of the next step) are the vectorised loops of _simd.h, and Q rows come from the LRU
        cache.  Returns the steps made (-2: out of memory)."""
        cdef Py_ssize_t steps = 0, t, i, j, size = self.size
        cdef double gmin = INFINITY, gmax = -INFINITY, gabs = 0.0, gi, best
        cdef double diff, curv, step, tstep, Qii, ai_old
        cdef double* Qi
        cdef double* Qj
        cdef double* grad = self.grad
        cdef double* alpha = self.alpha
        cdef double* Qd = self.Qd
        self.grad_stats(&gmin, &gmax, &gabs)
        while True:
            i = self.most_violating(gmin, gabs)
            gi = grad[i]
            if gmax - gi <= tol or steps >= max_steps:
                return steps
            Qi = self.qrow(i, -1)
            if Qi == NULL:
                return -2
            Qii = Qd[i]
            j = cv_wss2(grad, Qi, Qd, alpha, gi, Qii, TAU, TIE, size, &best)
            if j < 0:  # no coordinate may decrease against i (the first of the support, as the reference)
                j = 0
                while j < size - 1 and not (alpha[j] > 0):
                    j += 1
            diff = grad[j] - gi
            curv = Qii + Qd[j] - 2.0 * Qi[j]
            if curv <= TAU:
                curv = TAU
            step = diff / (2.0 * curv)
            if step >= alpha[j]:
                tstep = alpha[j]
                alpha[j] = 0.0
            else:
                tstep = step
                alpha[j] -= tstep
            ai_old = alpha[i]
            alpha[i] += tstep
            Qj = self.qrow(j, i)
            if Qj == NULL:
                return -2
            cv_grad_update(grad, Qi, Qj, alpha, 2.0 * tstep, size, &gmin, &gmax, &gabs)
            steps += 1

    # ------------------------------------------------------------ the core-set QP: active set
    cdef int _ensure_free_capacity(self, Py_ssize_t k) noexcept nogil:
        """Room for k free coordinates (and k core vectors in inF), keeping F, L, yu, yv, inF intact."""
        cdef Py_ssize_t c = self.fcap, r
        cdef Py_ssize_t* F2
        cdef double* L2
        cdef double* b2
        cdef double* yu2
        cdef double* yv2
        cdef char* in2
        if k <= c:
            return 0
        while c < k:
            c = max(2 * c, 64)
        self._reserve_factor(self.nf, factor_doubles(self.nf, c))  # the old buffer and its copy, both alive
        F2 = <Py_ssize_t*> malloc(c * sizeof(Py_ssize_t))
        L2 = <double*> malloc(c * c * sizeof(double))
        b2 = <double*> malloc(2 * c * sizeof(double))
        yu2 = <double*> malloc(c * sizeof(double))
        yv2 = <double*> malloc(c * sizeof(double))
        in2 = <char*> malloc(c * sizeof(char))
        if F2 == NULL or L2 == NULL or b2 == NULL or yu2 == NULL or yv2 == NULL or in2 == NULL:
            free(F2); free(L2); free(b2); free(yu2); free(yv2); free(in2)
            return -1
        for r in range(c):
            in2[r] = 0
        if self.fcap > 0:
            memcpy(F2, self.F, self.nf * sizeof(Py_ssize_t))
            memcpy(yu2, self.yu, self.nf * sizeof(double))
            memcpy(yv2, self.yv, self.nf * sizeof(double))
            memcpy(in2, self.inF, self.fcap * sizeof(char))
            for r in range(self.nf):
                memcpy(&L2[r * c], &self.QFF[r * self.fcap], (r + 1) * sizeof(double))
        free(self.F); free(self.QFF); free(self.rhs); free(self.yu); free(self.yv); free(self.inF)
        self.F, self.QFF, self.rhs, self.fcap = F2, L2, b2, c
        self.yu, self.yv, self.inF = yu2, yv2, in2
        self.fhw = self.nf
        self._reserve_factor(self.nf, 0)
        return 0

    cdef void _forward_vectors(self, Py_ssize_t start) noexcept nogil:
        """yu = L^-1 l_F and yv = L^-1 1 from entry ``start`` on (earlier entries are unchanged)."""
        cdef Py_ssize_t a, c, ld = self.fcap
        cdef double* L = self.QFF
        cdef double au, av
        for a in range(start, self.nf):
            au = self.l[self.F[a]] - cv_dot4(&L[a * ld], self.yu, a)
            av = 1.0 - cv_dot4(&L[a * ld], self.yv, a)
            self.yu[a] = au / L[a * ld + a]
            self.yv[a] = av / L[a * ld + a]

    cdef int _factor_free_set(self) noexcept nogil:
        """F := the support in ascending order (as np.flatnonzero) and L := chol(Q_FF) from scratch."""
        cdef Py_ssize_t t, a, b, nf = 0
        cdef double* row
        cdef int n_, info, ld
        cdef char upper = b'U'  # a row-major lower factor is a column-major upper one
        for t in range(self.size):
            self.inF[t] = 0
            if self.alpha[t] > 0:
                self.F[nf] = t
                self.inF[t] = 1
                nf += 1
        self.nf = nf
        self._reserve_factor(nf, 0)
        for a in range(nf):
            row = self.qrow(self.F[a], -1)
            if row == NULL:
                return -2
            for b in range(a + 1):
                self.QFF[a * self.fcap + b] = row[self.F[b]]
        n_ = <int> nf
        ld = <int> self.fcap
        dpotrf(&upper, &n_, self.QFF, &ld, &info)
        if info != 0:
            return -1
        for a in range(nf):
            if not (self.QFF[a * self.fcap + a] * self.QFF[a * self.fcap + a] > PIVOT_RTOL * self.Qd[self.F[a]]):
                return -1
        self._forward_vectors(0)
        return 0

    cdef int _append_free(self, Py_ssize_t i) noexcept nogil:
        """F += [i]; L gains the row [w', delta] with L w = Q_Fi, delta^2 = Q_ii - w'w (O(nf^2))."""
        cdef Py_ssize_t a, c, nf = self.nf, ld = self.fcap
        cdef double* row
        cdef double* L = self.QFF
        cdef double acc, d2 = self.Qd[i]
        self._reserve_factor(nf + 1, 0)   # before the row is fetched: eviction may not free it
        row = self.qrow(i, -1)
        if row == NULL:
            return -2
        for a in range(nf):
            L[nf * ld + a] = (row[self.F[a]] - cv_dot4(&L[a * ld], &L[nf * ld], a)) / L[a * ld + a]
            d2 -= L[nf * ld + a] * L[nf * ld + a]
        if not (d2 > PIVOT_RTOL * self.Qd[i]):
            return -1  # Q_FF would not be numerically positive definite
        L[nf * ld + nf] = sqrt(d2)
        self.F[nf] = i
        self.inF[i] = 1
        self.nf = nf + 1
        self._forward_vectors(nf)
        return 0

    cdef void _remove_free(self, Py_ssize_t k) noexcept nogil:
        """F -= F[k]; the trailing block of L gets the rank-one update L33 L33' + l32 l32' (O(nf^2))."""
        cdef Py_ssize_t nf = self.nf, ld = self.fcap, i, j, n = nf - k - 1
        cdef double* L = self.QFF
        cdef double* x = self.rhs  # scratch: l32
        cdef double r, c, s_, Ljj, Lij
        for i in range(n):
            x[i] = L[(k + 1 + i) * ld + k]
        for j in range(n):
            Ljj = L[(k + 1 + j) * ld + (k + 1 + j)]
            r = sqrt(Ljj * Ljj + x[j] * x[j])
            c = r / Ljj
            s_ = x[j] / Ljj
            L[(k + 1 + j) * ld + (k + 1 + j)] = r
            for i in range(j + 1, n):
                Lij = (L[(k + 1 + i) * ld + (k + 1 + j)] + s_ * x[i]) / c
                L[(k + 1 + i) * ld + (k + 1 + j)] = Lij
                x[i] = c * x[i] - s_ * Lij
        # delete row k and column k
        self.inF[self.F[k]] = 0
        for i in range(k, nf - 1):
            self.F[i] = self.F[i + 1]
            for j in range(k):
                L[i * ld + j] = L[(i + 1) * ld + j]
            for j in range(k, i + 1):
                L[i * ld + j] = L[(i + 1) * ld + j + 1]
        self.nf = nf - 1
        self._forward_vectors(k)

    cdef inline double _own_row_gradient(self, Py_ssize_t t, const double* row) noexcept nogil:
        """g_t = 2 Q_t. alpha - l_t from row t of Q over the core set (_gradient_outside_free)."""
        return 2.0 * cv_dot4(row, self.alpha, self.size) - self.l[t]

    cdef int _gradient_outside_free(self, double lam) noexcept nogil:
        """At a free-set optimum: g_F = lambda exactly, and g_t = 2 Q_t. alpha - l_t for the core vectors
        outside F from their own rows (alpha is 0 off F, so the whole row's dot product is Q_tF alpha_F):
        (|S| - |F|) |S| multiply-adds in contiguous dot products, where the free rows cost |S| |F|; so only
        when |F| > |S| / 2 (most of the core set is free at large C), else returns -1 (the caller takes the
        free rows).  The choice depends on the sizes alone, and a row's values on the row alone (on
        AVX-512; AVX2 computes a fill's last n mod 4 entries with the scalar exp, so there they can
        differ by rounding with the range filled), so the fit does not depend on what the cache holds
        (cache_size).  Each g_t is one dot product in a fixed order, so the parallel pass over rows
        already cached gives the serial values.  Returns -2 when out of memory."""
        cdef Py_ssize_t size = self.size, t, c, nchunk, lo, hi, step = 256
        cdef double* grad = self.grad
        cdef double* row
        cdef double* scratch = NULL
        cdef bint all_cached = True
        if 2 * self.nf <= size:
            return -1
        for t in range(size):
            if not self.inF[t] and (self.rows[t] == NULL or self.rlen[t] < size):
                all_cached = False
                break
        if all_cached and (size - self.nf) * size >= GRAD_PARALLEL_MIN_WORK:
            nchunk = (size + step - 1) // step
            for c in prange(nchunk, schedule="static"):
                lo = c * step
                hi = min(lo + step, size)
                for t in range(lo, hi):
                    grad[t] = lam if self.inF[t] else self._own_row_gradient(t, self.rows[t])
            return 0
        # serially, one row at a time: a cached row is completed in place (or regrown while the budget
        # has room); a row the cache does not hold is computed into scratch and not cached, so that under
        # a tight budget these rows do not evict the free rows the next steps need
        for t in range(size):
            if self.inF[t]:
                grad[t] = lam
                continue
            if self.rows[t] != NULL and (self.rcap[t] >= size
                                         or self._held() + self._row_cap() - self.rcap[t] <= self.budget):
                row = self.qrow(t, -1)
            else:
                if scratch == NULL:
                    scratch = <double*> malloc(size * sizeof(double))
                row = scratch
                if row != NULL:
                    self._fill_row(t, 0, size, row)
            if row == NULL:
                free(scratch)
                return -2
            grad[t] = self._own_row_gradient(t, row)
        free(scratch)
        return 0

    cdef int _gradient_from_free(self, double lam, bint at_optimum) noexcept nogil:
        """g_t = 2 Q_tF alpha_F - l_t for every core vector, from the rows of the free vectors (which the
        cache holds: they are the active ones); at a free-set optimum g_F = lambda exactly (and, when
        most of the core set is free, the others come from their own rows: _gradient_outside_free).  Each g_t sums
        over F in free-set order, so the chunked parallel pass gives the serial values bit for bit."""
        cdef Py_ssize_t size = self.size, nf = self.nf, a, t, c, nchunk, lo, hi, step = 1024
        cdef double w
        cdef double* row
        cdef bint all_cached = True
        cdef double* grad = self.grad
        if at_optimum:
            c = self._gradient_outside_free(lam)
            if c != -1:
                return c
        for a in range(nf):
            if self.rows[self.F[a]] == NULL or self.rlen[self.F[a]] < size:
                all_cached = False
                break
        if all_cached and (size - nf) * nf >= GRAD_PARALLEL_MIN_WORK:
            nchunk = (size + step - 1) // step
            for c in prange(nchunk, schedule="static"):
                lo = c * step
                hi = min(lo + step, size)
                self._gradient_chunk(lo, hi)
        else:
            for t in range(size):
                grad[t] = -self.l[t]
            for a in range(nf):
                row = self.qrow(self.F[a], -1)
                if row == NULL:
                    return -2
                w = 2.0 * self.alpha[self.F[a]]
                for t in range(size):
                    grad[t] += w * row[t]
        if at_optimum:
            for a in range(nf):
                grad[self.F[a]] = lam
        return 0

    cdef void _gradient_chunk(self, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
        cdef Py_ssize_t a, t
        cdef double w
        cdef const double* row
        for t in range(lo, hi):
            self.grad[t] = -self.l[t]
        for a in range(self.nf):
            row = self.rows[self.F[a]]
            w = 2.0 * self.alpha[self.F[a]]
            for t in range(lo, hi):
                self.grad[t] += w * row[t]

    cdef Py_ssize_t active_set(self, double tol, Py_ssize_t max_changes) noexcept nogil:
        """Exact active-set Newton solver for the core-set QP (refimpl.simplex_qp.active_set_simplex):
        same ratio test, entering rule and stopping gap.  The free set F and the Cholesky factor of
        Q_FF persist between calls and are updated, not recomputed: appending a coordinate or
        dropping one costs O(|F|^2), a Newton step two triangular solves, and the gradient is
        recomputed from the free vectors' rows.  Returns the number of Newton steps, -1 when Q_FF is
        not positive definite (the caller then runs SMO), -2 when out of memory."""
        cdef Py_ssize_t size = self.size, t, a, k, i, n_changes = 0, kblock, nf
        cdef double* alpha = self.alpha
        cdef double* grad = self.grad
        cdef double* rhs
        cdef double su, sv, lam, tg, s, r, d, gmin, gabs, gmax, gap
        cdef bint allpos
        cdef int rc
        if self._ensure_free_capacity(size + 1) != 0:
            return -2
        if not self.fvalid:
            rc = self._factor_free_set()
            if rc != 0:
                return rc
            self.fvalid = True
        rhs = self.rhs
        while True:
            nf = self.nf
            # Newton step: with yu = L^-1 l_F and yv = L^-1 1 kept up to date,
            # 1'Q_FF^-1 l_F = yv'yu and 1'Q_FF^-1 1 = yv'yv, so lambda costs O(|F|) and the target
            # (u + lambda v)/2 = L^-T (yu + lambda yv)/2 one backward substitution
            su = 0.0
            sv = 0.0
            for a in range(nf):
                su += self.yv[a] * self.yu[a]
                sv += self.yv[a] * self.yv[a]
            if not (su == su and fabs(su) < INFINITY) or sv <= 0:
                self.fvalid = False
                return -1
            lam = (2.0 - su) / sv
            for a in range(nf):
                rhs[a] = 0.5 * (self.yu[a] + lam * self.yv[a])
            for a in range(nf - 1, -1, -1):
                rhs[a] /= self.QFF[a * self.fcap + a]
                tg = rhs[a]
                for k in range(a):
                    rhs[k] -= self.QFF[a * self.fcap + k] * tg
            allpos = True
            su = 0.0
            for a in range(nf):
                tg = rhs[a]
                su += tg
                if not (tg > 0):
                    allpos = False
            if fabs(su - 1.0) > 1e-9:
                self.fvalid = False
                return -1  # cancellation in lambda: the free-set system is too ill-conditioned
            for a in range(nf):
                rhs[a] /= su  # remove the round-off left in 1'alpha = 1
            if allpos:
                for a in range(nf):
                    alpha[self.F[a]] = rhs[a]
            else:
                # ratio test along target - current, first blocking coordinate in free-set order
                s = INFINITY
                for a in range(nf):
                    d = rhs[a] - alpha[self.F[a]]
                    if d < 0:
                        r = alpha[self.F[a]] / -d
                        if r < s:
                            s = r
                kblock = -1
                for a in range(nf):
                    d = rhs[a] - alpha[self.F[a]]
                    if d < 0 and alpha[self.F[a]] / -d <= s + TIE * s:
                        kblock = a
                        break
                for a in range(nf):
                    t = self.F[a]
                    alpha[t] = alpha[t] + s * (rhs[a] - alpha[t])
                    if alpha[t] < 0:
                        alpha[t] = 0.0
                alpha[self.F[kblock]] = 0.0
                self._remove_free(kblock)
            n_changes += 1
            if not allpos:
                if n_changes >= max_changes:
                    if self._gradient_from_free(0.0, False) != 0:
                        return -2
                    return n_changes
                continue
            if self._gradient_from_free(lam, True) != 0:
                return -2
            self.grad_stats(&gmin, &gmax, &gabs)
            i = self.most_violating(gmin, gabs)
            gap = gmax - grad[i]
            if gap <= tol or n_changes >= max_changes:
                return n_changes
            if alpha[i] > 0:
                return n_changes  # the gap is round-off within the exactly solved free set
            for a in range(nf):
                if self.F[a] == i:
                    return n_changes
            rc = self._append_free(i)
            if rc != 0:
                self.fvalid = False
                return rc


def fit_meb(problem, eps, **kwargs):
    """:func:`refimpl.meb.fit_meb` on the Cython numerics :class:`FastMEBOps` (same contract)."""
    kwargs.setdefault("ops_class", FastMEBOps)
    return _ref_meb.fit_meb(problem, eps, **kwargs)


cdef double _expansion_row(_PointStore store, const double* x, const Kern* K, const double* c,
                           Py_ssize_t ns) noexcept nogil:
    """sum_t c_t k(sv_t, x) for a dot-product kernel on the coordinate layout (scratch row malloc'd)."""
    cdef double* buf = <double*> malloc(ns * sizeof(double))
    cdef double v = store.weighted(x, 0.0, point_rawdiag(K, x), c, buf)
    free(buf)
    return v


def kernel_expansion(spec, SV, coef, X, Py_ssize_t min_parallel_work=-1):
    """f(x) = sum_t coef_t k(sv_t, x) for each row of X (same as refimpl.kernels.kernel_expansion).

    Parallel over X only from ``min_parallel_work`` kernel evaluations on (default: the engine's
    PARALLEL_MIN_WORK); the result does not depend on it, each row's sum is formed the same way.
    Sparse X (CSR) goes through :func:`_kernel_expansion_csr` (SV then converted to CSR: it is small)."""
    if sp.issparse(X) or sp.issparse(SV):
        return _kernel_expansion_csr(spec, sp.csr_matrix(SV), coef, sp.csr_matrix(X), min_parallel_work)
    cdef const double[:, ::1] sv = np.ascontiguousarray(SV, dtype=np.float64)
    cdef const double[::1] c = np.ascontiguousarray(coef, dtype=np.float64)
    cdef const double[:, ::1] x = np.ascontiguousarray(X, dtype=np.float64)
    cdef Py_ssize_t nx = x.shape[0], ns = sv.shape[0], d = x.shape[1], i, t, nb, blk, nblk
    cdef cnp.ndarray[double, ndim=1, mode="c"] out = np.zeros(nx)
    cdef double[::1] o = out
    cdef Kern K = make_kern(spec, d)
    cdef _PointStore store
    cdef double* buf
    cdef double* xsq
    cdef double* xrd
    if nx == 0 or ns == 0:
        return out
    store = _PointStore()
    store.setup(K, ns)
    for t in range(ns):
        store.put(t, &sv[t, 0])
    # small expansions (e.g. a 59-point sample) run serially: starting threads would cost more,
    # and far more on a loaded machine, where spin-waiting threads compete for the cores
    cdef bint parallel = nx * ns >= (PARALLEL_MIN_WORK if min_parallel_work < 0 else min_parallel_work)
    nblk = (nx + GEMM_BLOCK - 1) // GEMM_BLOCK
    with nogil:
        if not store.blas:
            for i in prange(nx, schedule="static", use_threads_if=parallel):
                o[i] = store.weighted(&x[i, 0], 0.0, point_rawdiag(&K, &x[i, 0]), &c[0], NULL) \
                    if k_is_radial(&K) else _expansion_row(store, &x[i, 0], &K, &c[0], ns)
        else:
            for blk in range(nblk):
                # BLAS threads by itself: one GEMM per block of test points
                nb = min(GEMM_BLOCK, nx - blk * GEMM_BLOCK)
                buf = <double*> malloc((GEMM_BLOCK * ns + 2 * GEMM_BLOCK) * sizeof(double))
                xsq = &buf[GEMM_BLOCK * ns]
                xrd = &xsq[GEMM_BLOCK]
                for i in range(nb):
                    xsq[i] = point_sq(&x[blk * GEMM_BLOCK + i, 0], d)
                    xrd[i] = point_rawdiag(&K, &x[blk * GEMM_BLOCK + i, 0])
                store.block(&x[blk * GEMM_BLOCK, 0], nb, d, xsq, xrd, 0, ns, buf, ns)
                for i in range(nb):
                    o[blk * GEMM_BLOCK + i] = cv_dot4(&c[0], &buf[i * ns], ns)
                free(buf)
    return out


def _kernel_expansion_csr(spec, SV, coef, X, Py_ssize_t min_parallel_work=-1):
    """kernel_expansion of CSR rows X against CSR support vectors: the support vectors in a CSR point
    store, each row of X scattered into a per-thread dense d-vector (``_rows.pxi``), in nogil loops."""
    if X.shape[1] != SV.shape[1]:
        raise ValueError(f"X has {X.shape[1]} features, the support vectors {SV.shape[1]}")
    cdef const long long[::1] sp_ = np.ascontiguousarray(SV.indptr, dtype=np.int64)
    cdef const int[::1] si = np.ascontiguousarray(SV.indices, dtype=np.int32)
    cdef const double[::1] sv_ = np.ascontiguousarray(SV.data, dtype=np.float64)
    cdef const long long[::1] xp = np.ascontiguousarray(X.indptr, dtype=np.int64)
    xi_a = np.ascontiguousarray(X.indices, dtype=np.int32)
    xv_a = np.ascontiguousarray(X.data, dtype=np.float64)
    cdef const int* xi = NULL
    cdef const double* xv = NULL
    cdef const int[::1] xi_m
    cdef const double[::1] xv_m
    if xi_a.shape[0] > 0:
        xi_m = xi_a
        xv_m = xv_a
        xi = &xi_m[0]
        xv = &xv_m[0]
    cdef const double[::1] c = np.ascontiguousarray(coef, dtype=np.float64)
    cdef Py_ssize_t nx = X.shape[0], ns = SV.shape[0], d = X.shape[1], i, t, chunk = 64, nchunk, ch, lo, hi
    cdef cnp.ndarray[double, ndim=1, mode="c"] out = np.zeros(nx)
    cdef double[::1] o = out
    cdef Kern K = make_kern(spec, d)
    cdef _PointStore store
    cdef double* buf
    cdef double xsq
    if nx == 0 or ns == 0:
        return out
    store = _PointStore()
    store.setup_csr(K, ns)
    for t in range(ns):
        xsq = csr_row_sq(&sv_[0], sp_[t], sp_[t + 1]) if sv_.shape[0] > 0 else 0.0
        store.put_csr(t, &si[sp_[t]] if si.shape[0] > 0 else NULL, &sv_[sp_[t]] if sv_.shape[0] > 0 else NULL,
                      sp_[t + 1] - sp_[t], xsq, rawdiag_from_sq(&K, xsq))
    cdef bint parallel = nx * ns >= (PARALLEL_MIN_WORK if min_parallel_work < 0 else min_parallel_work)
    nchunk = (nx + chunk - 1) // chunk
    with nogil:
        for ch in prange(nchunk, schedule="static", use_threads_if=parallel):
            lo = ch * chunk
            hi = min(lo + chunk, nx)
            # ns kernel values, then a zeroed d-vector for the scattered rows
            buf = <double*> calloc(ns + d + 1, sizeof(double))
            for i in range(lo, hi):
                csr_scatter(&buf[ns + 1], xi, xv, xp[i], xp[i + 1])
                xsq = csr_row_sq(xv, xp[i], xp[i + 1])
                store.row(0, ns, &buf[ns + 1], xsq, rawdiag_from_sq(&K, xsq), buf)
                o[i] = cv_dot4(&c[0], buf, ns)
                csr_clear(&buf[ns + 1], xi, xp[i], xp[i + 1])
            free(buf)
    return out


def _radial_kernels(double[:, ::1] C, double[::1] x, double gamma, bint laplace, double[::1] w):
    """Test hook for the SIMD kernels of _simd.h on coordinate-major points C (d x n): returns the row
    exp(-gamma r_j) (cv_radial_row), the fused weighted sum sum_j w_j exp(-gamma r_j) (cv_radial_dot)
    and the same sum through the scans' screening kernel (cv_radial_dot_screen, exp in single
    precision where SCREEN_TERM_ERR is not None), r_j = ||C[:, j] - x||^2 (laplace: its root).
    ``SIMD_LEVEL`` says which vector width ran."""
    cdef Py_ssize_t d = C.shape[0], n = C.shape[1]
    if x.shape[0] != d or w.shape[0] != n:
        raise ValueError("_radial_kernels: x must have C.shape[0] entries and w C.shape[1]")
    row = np.empty(n)
    cdef double[::1] out = row
    cdef double s, s_screen
    with nogil:
        cv_radial_row(&C[0, 0], n, n, d, &x[0], -gamma, laplace, &out[0])
        s = cv_radial_dot(&C[0, 0], n, n, d, &x[0], -gamma, laplace, &w[0])
        s_screen = cv_radial_dot_screen(&C[0, 0], n, n, d, &x[0], -gamma, laplace, &w[0])
    return row, s, s_screen


cdef tuple _hook_store(str name, spec, double[:, ::1] P, double[:, ::1] X, double[::1] w, box):
    """For the screening test hooks: the shapes checked, an empty support store for P's kernel and room
    for P, and the box (lo, hi) its screens centre on: ``box``, or the bounding box of P and X."""
    if X.shape[1] != P.shape[1] or w.shape[0] != P.shape[0]:
        raise ValueError(f"{name}: X must have P's columns and w P's rows")
    cdef _PointStore st = _PointStore()
    st.setup(make_kern(spec, P.shape[1]), max(P.shape[0], 1))
    both = np.vstack([np.asarray(P), np.asarray(X)])
    lo = np.ascontiguousarray(both.min(axis=0) if box is None else box[0], dtype=np.float64)
    hi = np.ascontiguousarray(both.max(axis=0) if box is None else box[1], dtype=np.float64)
    return st, lo, hi


def _store_screen(spec, double[:, ::1] P, double[:, ::1] X, double[::1] w, bint allow_f32=True,
                  bint exact=True):
    """Test hook for the support store's screening as the scans use it: P (n x d) stored as the support
    (centred on the bounding box of P and X, single-precision distances where the store allows them),
    then for every row x of X the screened sum_j w_j k(p_j, x), the exact one (cv_radial_dot in double),
    whether float distances were used, and the bound per term (|screened - exact| <= bound sum |w|)."""
    cdef Py_ssize_t n = P.shape[0], i
    cdef _PointStore st
    cdef double[::1] lo, hi
    st, lo, hi = _hook_store("_store_screen", spec, P, X, w, None)
    if allow_f32:
        st.enable_f32(&lo[0], &hi[0])
    for i in range(n):
        st.put(i, &P[i, 0])
    scr = np.empty(X.shape[0])
    ext = np.empty(X.shape[0])
    for i in range(X.shape[0]):
        scr[i] = st.weighted_screen(&X[i, 0], &w[0])
        ext[i] = st.weighted(&X[i, 0], 0.0, 0.0, &w[0], NULL) if exact else np.nan
    return scr, ext, bool(st.fmode), st.screen_term_err()


def _store_taylor(spec, double[:, ::1] P, double[:, ::1] X, double[::1] w, bint exact=True, box=None):
    """Test hook for the support store's Taylor screen as the scans use it: P (n x d) stored as the support,
    the expansion centred on ``box`` = (lo, hi) (default: the bounding box of P and X), its moments built
    with the weights w, then for every row x of X the expanded sum_j w_j k(p_j, x) and the exact one
    (cv_radial_dot in double; NaN unless ``exact``).  Returns (expanded, exact, bound per term, degree p,
    number of moments), or None when the store does not allow the expansion (kernel, d or width); the
    bound is per unit of sum |w|: |expanded - exact| <= bound sum |w|."""
    cdef Py_ssize_t n = P.shape[0], d = P.shape[1], i
    cdef _PointStore st
    cdef double[::1] lo, hi
    st, lo, hi = _hook_store("_store_taylor", spec, P, X, w, box)
    st.enable_taylor(&lo[0], &hi[0])
    if not st.tmode:
        return None
    for i in range(n):
        st.put(i, &P[i, 0])
    tay = np.empty(X.shape[0])
    ext = np.full(X.shape[0], np.nan)
    cdef double[::1] t = tay, e = ext
    with nogil:
        st.taylor_build(&w[0])
        if X.shape[0] > 0:
            st.taylor_sum(&X[0, 0], d, NULL, X.shape[0], &t[0])
        if exact:
            for i in range(X.shape[0]):
                e[i] = st.weighted(&X[i, 0], 0.0, 0.0, &w[0], NULL)
    return tay, ext, st.taylor_term_err(), st.tp, st.tnt


#: the screening kernel's bound on each term's absolute error (None: the scans do not screen)
SCREEN_TERM_ERR = CV_SCREEN_TERM_ERR if cv_screen_available() else None
