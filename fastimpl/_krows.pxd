# cython: language_level=3
# The kernel-row layer of fastimpl: what the engine (_engine.pyx), SSVR (_ssvr.pyx) and MMDA (_mmda.pyx)
# ``cimport`` to compute kernel rows.  Implemented in _krows.pyx; the small kernel functions below are
# ``inline``, so each extension compiles its own copy of them (as it did of the old _kernels.pxi).
#
# * Kern and the kernels point by point (k_raw, k_eval, k_diag: refimpl.kernels in C);
# * _PointStore: a growable set of points in the layout its kernel rows want, one of five kinds (RowKind):
#   SIMD rows by coordinate (d < BLAS_MIN_D), BLAS GEMV/GEMM against cached squared norms (d >= BLAS_MIN_D),
#   CSR rows (sparse input), and two kinds with the scalar kernels' arithmetic (k_row) for the extensions
#   whose results follow it (MMDA, SSVR below BLAS_MIN_D);
# * Queries: the rows kernel rows are computed for (dense or CSR input, mirrored indices);
# * the one full-scan skeleton, kernel_rows: for every candidate row, its kernel row (a block of rows by one
#   GEMM on the BLAS path), handed to a reduction (RowSink); weighted_rows is kernel_rows with the weighted
#   sum sum_j w_j k(x, c_j) as the reduction (fused with the row on the SIMD radial path).
from libc.math cimport exp, sqrt, NAN

cdef extern from "_vexp.h":
    void cv_vexp(double* buf, Py_ssize_t n) noexcept nogil

cdef extern from "_simd.h":
    int cv_simd_level() noexcept nogil
    void cv_radial_row(const double* C, Py_ssize_t ld, Py_ssize_t n, Py_ssize_t d, const double* x,
                       double mg, int laplace, double* out) noexcept nogil
    void cv_radial_row_at(int level, const double* C, Py_ssize_t ld, Py_ssize_t n, Py_ssize_t d, const double* x,
                          double mg, int laplace, double* out) noexcept nogil
    void cv_dot_row(const double* C, Py_ssize_t ld, Py_ssize_t n, Py_ssize_t d, const double* x,
                    double* out) noexcept nogil
    void cv_radial_from_dots(double* out, Py_ssize_t n, double xsq, const double* csq, double mg,
                             int laplace) noexcept nogil
    # k_row's values of the Gaussian / Laplacian kernel, vectorised over points stored by coordinate
    void cv_radial_row_krow(const double* svT, Py_ssize_t ld, Py_ssize_t n, Py_ssize_t d, const double* x,
                            double mg, int laplace, double* buf) noexcept nogil
    double cv_dot4(const double* w, const double* v, Py_ssize_t n) noexcept nogil
    double cv_radial_dot(const double* C, Py_ssize_t ld, Py_ssize_t n, Py_ssize_t d, const double* x,
                         double mg, int laplace, const double* w) noexcept nogil
    double cv_radial_dot_screen(const double* C, Py_ssize_t ld, Py_ssize_t n, Py_ssize_t d, const double* x,
                                double mg, int laplace, const double* w) noexcept nogil
    int cv_screen_available() noexcept nogil
    double CV_SCREEN_TERM_ERR
    double cv_rbf_dot_screen_f32(const float* C, Py_ssize_t ld, Py_ssize_t n, Py_ssize_t d, const float* x,
                                 float mg, const double* w) noexcept nogil
    # sw = sum_i w_i k(x_i, x), sk = sum_i k(x_i, x)^2 for the Gaussian / Laplacian kernel (mg = -gamma),
    # the points stored by coordinate: one fused SIMD pass with glibc's vector exp (SSVR's scoring)
    int cv_radial_sums_available() noexcept nogil
    void cv_radial_sums(const double* C, Py_ssize_t ld, Py_ssize_t n, Py_ssize_t d, const double* x, double mg,
                        int laplace, const double* w, double* sw, double* sk) noexcept nogil

cdef extern from "_taylor.h":
    Py_ssize_t cv_taylor_nterms(int d, int p) noexcept nogil
    Py_ssize_t cv_taylor_work(int d, int p) noexcept nogil
    void cv_taylor_build(const double* C, Py_ssize_t ld, Py_ssize_t n, int d, const double* mu, double gamma,
                         int p, const double* w, double* coef, double* work) noexcept nogil
    void cv_taylor_eval(const double* coef, int d, int p, double gamma, const double* mu, const double* X,
                        Py_ssize_t ldx, const Py_ssize_t* rows, Py_ssize_t n, double* out) noexcept nogil

cdef enum:
    #: from this many coordinates on, the engine's kernel rows go through BLAS (dot products against norms)
    BLAS_MIN_D = 16

cdef enum RowKind:
    ROWS_SIMD = 0       # by coordinate (d x cap), the SIMD rows of _simd.h (vector exp, FMA)
    ROWS_BLAS = 1       # by row (cap x d), BLAS GEMV/GEMM against cached squared norms
    ROWS_CSR = 2        # CSR rows, sparse-dense products against cached squared norms
    ROWS_SCALAR = 3     # by row, k_row: the scalar kernels point by point, exp over the row at once
    ROWS_KROW = 4       # by coordinate, radial kernels only: k_row's sums vectorised over the points


cdef struct Lookup:
    # the training kernel of a lookup kernel (refimpl.kernels.LOOKUP_KERNELS: kernel='precomputed' or a callable);
    # the points are their training indices (refimpl.kernels.index_points: d = 1)
    const double* gram         # 'precomputed': the Gram matrix as given (row-major, leading dimension ld); else NULL
    Py_ssize_t ld
    const double* diag         # k(x_i, x_i) of every training point
    double** cols              # callable: cols[p][r] = k(x of the problem's row r, x_j) for the point j of slot p
    const Py_ssize_t* colpos   # training index j -> the slot p of its cached column, or -1 (_lookup.pxi: LRU)
    const Py_ssize_t* rowpos   # training index i -> the problem's row r
    const double* sums         # callable, during a scan: the candidates' weighted sums (_lookup.pxi), else NULL


cdef struct Kern:
    int code          # 0 rbf, 1 laplacian, 2 poly, 3 linear, 4 a lookup (refimpl.kernels.KERNEL_CODES)
    double gamma
    int degree
    double coef0
    int normalize
    Py_ssize_t d
    const Lookup* lk  # code 4: the training kernel (owned by a _Lookup); else NULL


# The kernel kinds by name, so that no site tests code ranges.  The radial kernels (Gaussian,
# Laplacian) depend on ||a - b|| only and have k(a, a) = 1; the dot-product kernels (polynomial,
# linear) depend on a'b only, and only they are changed by normalisation.
cdef inline bint k_is_radial(const Kern* K) noexcept nogil:
    return K.code <= 1


cdef inline bint k_is_gaussian(const Kern* K) noexcept nogil:
    return K.code == 0


cdef inline bint k_is_laplacian(const Kern* K) noexcept nogil:
    return K.code == 1


cdef inline bint k_is_dot(const Kern* K) noexcept nogil:
    return K.code >= 2


cdef inline bint k_is_poly(const Kern* K) noexcept nogil:
    return K.code == 2


cdef inline bint k_is_linear(const Kern* K) noexcept nogil:
    return K.code == 3


cdef inline bint k_is_lookup(const Kern* K) noexcept nogil:
    """A kernel given on the training points (precomputed or callable): k(a, b) is looked up by index."""
    return K.code == 4


cdef inline double k_lookup(const Lookup* L, const double* a, const double* b) noexcept nogil:
    """k(x_i, x_j) of the training indices i = a[0], j = b[0]: the Gram matrix's upper triangle (as
    refimpl.kernels.KernelSource.block reads it), or the callable's column of j -- in k_row, the query x, whose
    column the caller made resident (a Q row: FastMEBOps._fill_row), so that each value comes from one column
    whatever else the bounded column store holds."""
    cdef Py_ssize_t i = <Py_ssize_t> a[0], j = <Py_ssize_t> b[0], p
    if L.gram != NULL:
        if i > j:
            i, j = j, i
        return L.gram[i * L.ld + j]
    p = L.colpos[j]
    if p >= 0:
        return L.cols[p][L.rowpos[i]]
    return NAN   # (never: see above)


cdef inline bint k_is_normalized(const Kern* K) noexcept nogil:
    """True when k(a, b) is k_raw(a, b) / sqrt(k_raw(a, a) k_raw(b, b)) (normalize and a dot-product kernel)."""
    return K.normalize != 0 and k_is_dot(K)


cdef inline double ipow(double x, int k) noexcept nogil:
    cdef double r = 1.0
    while k > 0:
        if k & 1:
            r *= x
        x *= x
        k >>= 1
    return r


cdef inline double k_raw(const Kern* K, const double* a, const double* b) noexcept nogil:
    cdef Py_ssize_t t
    cdef double s = 0.0, u
    if k_is_lookup(K):
        return k_lookup(K.lk, a, b)
    if k_is_radial(K):
        for t in range(K.d):
            u = a[t] - b[t]
            s += u * u
        if k_is_gaussian(K):
            return exp(-K.gamma * s)
        return exp(-K.gamma * sqrt(s))
    for t in range(K.d):
        s += a[t] * b[t]
    if k_is_linear(K):
        return K.gamma * s
    return ipow(K.gamma * s + K.coef0, K.degree)


cdef inline double k_rawdiag(const Kern* K, const double* a) noexcept nogil:
    if k_is_lookup(K):
        return K.lk.diag[<Py_ssize_t> a[0]]
    if k_is_radial(K):
        return 1.0
    return k_raw(K, a, a)


cdef inline double k_eval(const Kern* K, const double* a, const double* b, double da, double db) noexcept nogil:
    """k(a, b); da, db are k_raw(a, a), k_raw(b, b), used only by normalized kernels."""
    cdef double v = k_raw(K, a, b)
    if k_is_normalized(K):
        if da > 0 and db > 0:
            return v / sqrt(da * db)
        return 0.0
    return v


cdef inline double k_diag(const Kern* K, double da) noexcept nogil:
    if K.normalize:
        return 1.0 if (k_is_radial(K) or da > 0) else 0.0
    return da


cdef inline double point_sq(const double* x, Py_ssize_t d) noexcept nogil:
    cdef Py_ssize_t e
    cdef double s = 0.0
    for e in range(d):
        s += x[e] * x[e]
    return s


cdef inline double rawdiag_from_sq(const Kern* K, double sq) noexcept nogil:
    """k_raw(x, x) from ||x||^2 (what normalisation divides by); 1 for the radial kernels."""
    if k_is_radial(K):
        return 1.0
    if k_is_linear(K):
        return K.gamma * sq
    return ipow(K.gamma * sq + K.coef0, K.degree)


cdef inline double point_rawdiag(const Kern* K, const double* x) noexcept nogil:
    """k_raw(x, x) for the dot-product kernels (what normalisation divides by); 1 for radial ones; the training
    kernel's diagonal for a lookup."""
    if k_is_lookup(K):
        return K.lk.diag[<Py_ssize_t> x[0]]
    if k_is_radial(K):
        return 1.0
    return k_raw(K, x, x)


cdef inline void csr_scatter(double* xd, const int* ind, const double* val, Py_ssize_t lo,
                             Py_ssize_t hi) noexcept nogil:
    """xd[ind[e]] = val[e] for e in [lo, hi): a CSR row into a zeroed dense vector."""
    cdef Py_ssize_t e
    for e in range(lo, hi):
        xd[ind[e]] = val[e]


cdef inline void csr_clear(double* xd, const int* ind, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    """Undo csr_scatter: the dense vector is zero again."""
    cdef Py_ssize_t e
    for e in range(lo, hi):
        xd[ind[e]] = 0.0


cdef inline double csr_dot_dense(const double* xd, const int* ind, const double* val, Py_ssize_t lo,
                                 Py_ssize_t hi) noexcept nogil:
    """sum_e val[e] xd[ind[e]] for e in [lo, hi): a CSR row against a dense (scattered) vector."""
    cdef Py_ssize_t e
    cdef double acc = 0.0
    for e in range(lo, hi):
        acc = acc + val[e] * xd[ind[e]]
    return acc


cdef inline double csr_row_sq(const double* val, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    cdef Py_ssize_t e
    cdef double s = 0.0
    for e in range(lo, hi):
        s += val[e] * val[e]
    return s


cdef inline void dots_to_kernel(const Kern* K, double* out, Py_ssize_t n, double xsq, const double* csq,
                                double xrd, const double* crd) noexcept nogil:
    """Turn dot products x'c_j (radial: with the squared norms) into kernel values k(x, c_j)."""
    cdef Py_ssize_t j
    cdef double v
    if k_is_radial(K):
        cv_radial_from_dots(out, n, xsq, csq, -K.gamma, k_is_laplacian(K))
        return
    for j in range(n):
        v = out[j]
        if k_is_poly(K):
            v = ipow(K.gamma * v + K.coef0, K.degree)
        else:
            v = K.gamma * v
        if K.normalize:
            v = v / sqrt(xrd * crd[j]) if (xrd > 0 and crd[j] > 0) else 0.0
        out[j] = v


cdef Kern make_kern(spec, Py_ssize_t d)


cdef class _Lookup:
    """Owns the Lookup of a lookup kernel for one problem (the Gram matrix's pointer, or the callable's columns
    over the problem's rows in slots bounded by a budget, least recently used evicted: _lookup.pxi)."""
    cdef Lookup L
    cdef object keep            # the arrays the pointers above point into
    cdef object source          # refimpl.kernels.KernelSource
    cdef object rows            # the problem's training indices (intp)
    cdef object xrows           # their rows of the training data (the callable's first argument, by blocks)
    cdef object error           # an exception the callable raised where it could not propagate (nogil callers)
    cdef Py_ssize_t nrows       # the problem's rows: doubles per column
    cdef Py_ssize_t nslots, slotcap   # column slots allocated, and at most (the budget)
    cdef Py_ssize_t* colpos_
    cdef double** cols_
    cdef Py_ssize_t* owner      # slot -> its column's training index, or -1
    cdef long long* used        # slot -> the tick of its last use (LRU)
    cdef long long tick
    cdef double* scratch        # a sweep's column that no slot is free for (not cached)
    cdef double* sums_          # the scans' weighted sums (nrows doubles)
    cdef public Py_ssize_t held          # doubles held: slots, scratch, sums
    cdef public Py_ssize_t peak          # the most doubles held
    cdef public Py_ssize_t budget        # doubles allowed (slots + scratch + sums)
    cdef public long long n_eval         # kernel values computed
    cdef public long long n_columns      # columns computed (again, after an eviction or in the scratch)
    cdef void _charge(self, Py_ssize_t doubles)
    cdef void _fill(self, Py_ssize_t j, double* dst) except *
    cdef const double* column(self, Py_ssize_t j, long long fresh) except NULL
    cdef bint ready(self, Py_ssize_t j) noexcept
    cdef double* sums_buffer(self) except NULL
    cdef void raise_error(self) except *


cdef _Lookup lookup_of(problem, Kern* K, Py_ssize_t cache_size)
cdef void k_row(const Kern* K, const double* SVX, const double* sda, Py_ssize_t ns,
                const double* x, double dax, double* out) noexcept nogil


cdef class _PointStore:
    """A growable array of points in the layout its kernel rows want (``kind``: RowKind)."""
    cdef Kern K
    cdef Py_ssize_t d, n, cap
    cdef int kind
    cdef bint blas       # kind == ROWS_BLAS
    cdef bint csr        # kind == ROWS_CSR: ptr, ind, val instead of data
    cdef bint bycoord    # data is d x cap by coordinate (ROWS_SIMD, ROWS_KROW), else cap x d by row
    cdef bint borrowed   # data points into an array the store does not own (view)
    cdef Py_ssize_t* ptr
    cdef int* ind
    cdef double* val
    cdef Py_ssize_t nzcap
    cdef double* data
    cdef double* sq      # squared norms (the BLAS and CSR rows of radial kernels)
    cdef double* rd      # k_raw(c, c) (normalised dot-product kernels)
    # (lookup kernels: points are training indices, by row, ROWS_SCALAR)
    # single-precision copy for the screening kernel (Gaussian kernel, coordinate layout): fl(c - fmu)
    cdef float* fdata
    cdef double fmu[16]      # the centre (d < BLAS_MIN_D = 16 on this layout)
    cdef bint fmode
    cdef double ferr         # the screening kernel's error bound per term (CV_SCREEN_TERM_ERR + its own)
    # Taylor screen (Gaussian kernel, d <= 3, a kernel wide against the data's box; _taylor.h): the moments
    # of the stored points with the weights last passed to taylor_build, valid until a point is stored
    cdef bint tmode
    cdef int tp                # degree p of the expansion
    cdef Py_ssize_t tnt        # its C(p + d, d) moments
    cdef double tmu[3]         # its centre (the box's)
    cdef double tsig           # sqrt(2 gamma): the expansion runs in coordinates scaled by it (_taylor.h)
    cdef double tgr2           # gamma R^2, R the box's half-diagonal (every point within R of tmu)
    cdef double ttrunc         # the truncation's bound per term, (2 gamma R^2)^(p+1) / (p+1)!
    cdef double* tcoef         # tnt moments, then cv_taylor_work doubles of work space
    cdef bint tvalid

    cdef void setup(self, Kern K, Py_ssize_t cap) except *
    cdef void setup_csr(self, Kern K, Py_ssize_t cap) except *
    cdef void setup_kind(self, Kern K, Py_ssize_t cap, int kind) except *
    cdef void view(self, Kern K, const double* X, Py_ssize_t n, int kind) except *
    cdef Py_ssize_t nbytes(self) noexcept nogil
    cdef void put_csr(self, Py_ssize_t j, const int* ind, const double* val, Py_ssize_t nnz, double sq,
                      double rd) except *
    cdef void reserve(self, Py_ssize_t cap) except *
    cdef void put(self, Py_ssize_t j, const double* x) noexcept nogil
    cdef void row(self, Py_ssize_t lo, Py_ssize_t hi, const double* x, double xsq, double xrd,
                  double* out) noexcept nogil
    cdef double weighted(self, const double* x, double xsq, double xrd, const double* w,
                         double* buf) noexcept nogil
    cdef bint screens(self) noexcept nogil
    cdef double weighted_screen(self, const double* x, const double* w) noexcept nogil
    cdef double screen_term_err(self) noexcept nogil
    cdef void enable_f32(self, const double* lo, const double* hi) except *
    cdef void enable_taylor(self, const double* lo, const double* hi) except *
    cdef void taylor_build(self, const double* w) noexcept nogil
    cdef void taylor_sum(self, const double* X, Py_ssize_t ldx, const Py_ssize_t* rows, Py_ssize_t n,
                         double* out) noexcept nogil
    cdef double taylor_term_err(self) noexcept nogil
    cdef void block(self, const double* xs, Py_ssize_t nb, Py_ssize_t ldx, const double* xsq, const double* xrd,
                    Py_ssize_t lo, Py_ssize_t hi, double* out, Py_ssize_t ldo) noexcept nogil


# ---------------------------------------------------------------------------------- the full-scan skeleton
cdef struct Queries:
    # the rows kernel rows are computed for: row q is X[q ld : q ld + d] (dense), or the CSR row
    # (ind, val)[ptr[q] : ptr[q + 1]] (ptr != NULL) with its squared norm sq[q] and k_raw rd[q]
    Py_ssize_t d
    const double* X
    Py_ssize_t ld
    const long long* ptr
    const int* ind
    const double* val
    const double* sq           # dense rows: NULL (computed from the row) or the rows' squared norms
    const double* rd
    Py_ssize_t wrap            # a candidate index z >= wrap names row z - wrap (CVR's mirrored points); 0: none

# reduce(ctx, p, row): the kernel row of candidate p (row[j - c0] = k(x_q, c_j)), valid during the call only
# (scratch: the reduction may overwrite it)
ctypedef void (*RowSink)(void* ctx, Py_ssize_t p, double* row) noexcept nogil

cdef Queries dense_queries(const double* X, Py_ssize_t n, Py_ssize_t d) noexcept nogil
cdef Py_ssize_t rows_scratch(_PointStore store, const Queries* Q, Py_ssize_t ncols, Py_ssize_t block) noexcept nogil
cdef void kernel_rows(_PointStore store, const Queries* Q, const Py_ssize_t* idx, Py_ssize_t lo, Py_ssize_t hi,
                      Py_ssize_t c0, Py_ssize_t c1, Py_ssize_t block, RowSink sink, void* ctx,
                      double* buf) noexcept nogil
cdef void weighted_rows(_PointStore store, const Queries* Q, const Py_ssize_t* idx, Py_ssize_t lo, Py_ssize_t hi,
                        Py_ssize_t c0, const double* w, bint add, bint fuse, double* out, Py_ssize_t block,
                        double* buf) noexcept nogil
