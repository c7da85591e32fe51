# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The kernel-row layer of fastimpl (declared in ``_krows.pxd``, which the engine, ``_ssvr`` and ``_mmda``
``cimport``): kernel rows against a set of points, and the one loop that computes them for many candidates.

* :class:`_PointStore`: a growable set of points in the layout its kernel rows want, of one of five kinds
  (``RowKind`` in the .pxd).  The engine's stores: low-dimensional points by coordinate ("SoA", d x cap),
  a row through the SIMD loops of ``_simd.h`` (one vectorised pass per coordinate, then a vector exp);
  from ``BLAS_MIN_D`` coordinates on by row (cap x d), a row one BLAS GEMV (a block of rows one GEMM)
  against cached squared norms, so that a kernel evaluation costs what a dot product costs; sparse (CSR)
  input as CSR rows (memory in proportion to their nonzeros), a row the sparse-dense products of each
  stored row with the query scattered into a dense d-vector (O(nnz(x)) to build and to clear), then the
  kernel from the dots and the cached squared norms.  Two kinds keep the arithmetic of the scalar kernels
  (:func:`k_row`) for the results that follow it: by row (``ROWS_SCALAR``) and, for the radial kernels,
  by coordinate with the distances vectorised over the points (``ROWS_KROW``, MMDA).  A store may also
  read its points in place (``view``: SSVR's training inputs).
* :func:`kernel_rows`, the full-scan skeleton: for every candidate row, its kernel row against a store (the
  candidates' CSR rows scattered, blocks of them gathered for one GEMM on the BLAS path), handed to a
  reduction; :func:`weighted_rows` with the weighted sum as the reduction (fused with the row on the SIMD
  radial path: no row is written).  The engine's scans and kernel expansions, SSVR's candidate scoring and
  MMDA's (G x)_l scans are this loop with their own reductions, in parallel over chunks of candidates.
* the kernels point by point (``Kern``, ``k_raw``, ``k_eval``, inline in the .pxd) and :func:`k_row`.
"""
from libc.float cimport DBL_EPSILON
from libc.stdlib cimport malloc, calloc, free, realloc
from libc.string cimport memcpy, memset
from scipy.linalg.cython_blas cimport dgemv, dgemm
cimport numpy as cnp
import numpy as np
import scipy.sparse as sp

from refimpl import kernels as refkernels

cnp.import_array()

#: the Taylor screen (_taylor.h) truncates where each term is off by at most this (2^-40, about the
#: rounding of a sum of a few thousand terms), in at most TAYLOR_MAX_NTERMS moments of degree <= TAYLOR_MAX_P
cdef double TAYLOR_TRUNC = 2.0 ** -40
cdef int TAYLOR_MAX_P = 48
cdef Py_ssize_t TAYLOR_MAX_NTERMS = 4096


cdef Kern make_kern(spec, Py_ssize_t d):
    """The Kern of a KernelSpec; a lookup kernel's ``lk`` is set by its _Lookup's owner (NULL here)."""
    cdef Kern K
    K.lk = NULL
    K.code = spec.code
    K.gamma = spec.gamma
    K.degree = spec.degree
    K.coef0 = spec.coef0
    K.normalize = 1 if spec.normalize else 0
    K.d = d
    return K


cdef void k_row(const Kern* K, const double* SVX, const double* sda, Py_ssize_t ns,
                const double* x, double dax, double* out) noexcept nogil:
    """out[t] = k(sv_t, x) for the ns packed rows of SVX (sda: their k_raw(sv, sv), read by normalised kernels
    only); exp runs over the whole row at once (vectorised by _vexp.h)."""
    cdef Py_ssize_t t, e
    cdef double s, u
    cdef const double* a
    if k_is_radial(K):
        for t in range(ns):
            a = &SVX[t * K.d]
            s = 0.0
            for e in range(K.d):
                u = a[e] - x[e]
                s += u * u
            out[t] = -K.gamma * s if k_is_gaussian(K) else -K.gamma * sqrt(s)
        cv_vexp(out, ns)
        return
    for t in range(ns):
        out[t] = k_eval(K, &SVX[t * K.d], x, sda[t], dax)


cdef class _PointStore:
    """A growable array of points in the layout its kernel rows want (see the module docstring)."""

    def __cinit__(self):
        self.data = NULL
        self.sq = NULL
        self.rd = NULL
        self.fdata = NULL
        self.fmode = False
        self.ferr = CV_SCREEN_TERM_ERR
        self.tmode = False
        self.tvalid = False
        self.tcoef = NULL
        self.ptr = NULL
        self.ind = NULL
        self.val = NULL
        self.nzcap = 0
        self.csr = False
        self.bycoord = False
        self.borrowed = False
        self.n = 0
        self.cap = 0

    def __dealloc__(self):
        free(self.ptr)
        free(self.ind)
        free(self.val)
        if not self.borrowed:
            free(self.data)
        free(self.sq)
        free(self.rd)
        free(self.fdata)
        free(self.tcoef)

    cdef void setup(self, Kern K, Py_ssize_t cap) except *:
        """The engine's store: SIMD rows by coordinate below BLAS_MIN_D coordinates, BLAS rows from there on;
        a lookup kernel's training indices by row (k_row's lookups)."""
        if k_is_lookup(&K):
            self.setup_kind(K, cap, ROWS_SCALAR)
        else:
            self.setup_kind(K, cap, ROWS_BLAS if K.d >= BLAS_MIN_D else ROWS_SIMD)

    cdef void setup_csr(self, Kern K, Py_ssize_t cap) except *:
        """A store of CSR rows (sparse input); points are appended with put_csr."""
        self.setup_kind(K, cap, ROWS_CSR)
        self.ptr[0] = 0

    cdef void setup_kind(self, Kern K, Py_ssize_t cap, int kind) except *:
        """An empty store of rows of the given kind (RowKind; ROWS_KROW for the radial kernels only)."""
        if kind == ROWS_KROW and not k_is_radial(&K):
            raise ValueError("ROWS_KROW stores hold points of a radial kernel")
        self.K = K
        self.d = K.d
        self.kind = kind
        self.blas = kind == ROWS_BLAS
        self.csr = kind == ROWS_CSR
        self.bycoord = kind == ROWS_SIMD or kind == ROWS_KROW
        self.reserve(max(cap, 4))

    cdef void view(self, Kern K, const double* X, Py_ssize_t n, int kind) except *:
        """A full store of the n points X[j d : (j + 1) d] (by row: ROWS_BLAS or ROWS_SCALAR) read in place: the
        caller keeps X alive and unchanged while the store lives; only the norms are the store's."""
        cdef Py_ssize_t j
        if kind != ROWS_BLAS and kind != ROWS_SCALAR:
            raise ValueError("a store views points by row only (ROWS_BLAS, ROWS_SCALAR)")
        if self.cap > 0:
            raise ValueError("a store views points from the start")
        self.K = K
        self.d = K.d
        self.kind = kind
        self.blas = kind == ROWS_BLAS
        self.sq = <double*> malloc(max(n, 1) * sizeof(double))
        self.rd = <double*> malloc(max(n, 1) * sizeof(double))
        if self.sq == NULL or self.rd == NULL:
            raise MemoryError("kernel row store")
        self.data = <double*> X
        self.borrowed = True
        self.cap = n
        with nogil:
            for j in range(n):
                self.sq[j] = point_sq(&X[j * self.d], self.d)
                self.rd[j] = point_rawdiag(&self.K, &X[j * self.d])
        self.n = n

    cdef Py_ssize_t nbytes(self) noexcept nogil:
        """Bytes the store holds (its capacity): charged to the core-set cache's budget (_RowCache.held)."""
        cdef Py_ssize_t b = self.cap * 2 * sizeof(double)                     # sq, rd
        if self.csr:
            return b + (self.cap + 1) * sizeof(Py_ssize_t) + self.nzcap * (sizeof(int) + sizeof(double))
        b += self.cap * max(self.d, 1) * sizeof(double)
        if self.fmode:
            b += self.cap * self.d * sizeof(float)
        if self.tmode:
            b += (self.tnt + cv_taylor_work(<int> self.d, self.tp)) * sizeof(double)
        return b

    cdef void put_csr(self, Py_ssize_t j, const int* ind, const double* val, Py_ssize_t nnz, double sq,
                      double rd) except *:
        """Store the CSR row (ind, val)[:nnz] as point j: j == n (append), or j == 0 to restart the store."""
        cdef Py_ssize_t start, newcap
        if j != self.n and j != 0:
            raise ValueError("a CSR point store is filled in order")
        if j >= self.cap:
            self.reserve(max(2 * self.cap, j + 1))
        start = self.ptr[j]
        if start + nnz > self.nzcap:
            newcap = max(2 * self.nzcap, start + nnz, 256)
            self.ind = <int*> realloc(self.ind, newcap * sizeof(int))
            self.val = <double*> realloc(self.val, newcap * sizeof(double))
            if self.ind == NULL or self.val == NULL:
                raise MemoryError("kernel row store")
            self.nzcap = newcap
        memcpy(&self.ind[start], ind, nnz * sizeof(int))
        memcpy(&self.val[start], val, nnz * sizeof(double))
        self.ptr[j + 1] = start + nnz
        self.sq[j] = sq
        self.rd[j] = rd
        self.n = j + 1

    cdef void reserve(self, Py_ssize_t cap) except *:
        """Room for ``cap`` points, keeping the first n."""
        cdef Py_ssize_t e, d = self.d
        cdef double* nd
        cdef float* fd
        if cap <= self.cap:
            return
        if self.borrowed:
            raise ValueError("a store that views its points cannot grow")
        if self.csr:
            self.ptr = <Py_ssize_t*> realloc(self.ptr, (cap + 1) * sizeof(Py_ssize_t))
            self.sq = <double*> realloc(self.sq, cap * sizeof(double))
            self.rd = <double*> realloc(self.rd, cap * sizeof(double))
            if self.ptr == NULL or self.sq == NULL or self.rd == NULL:
                raise MemoryError("kernel row store")
            self.cap = cap
            return
        nd = <double*> malloc(cap * max(d, 1) * sizeof(double))
        if nd == NULL:
            raise MemoryError("kernel row store")
        if self.data != NULL:
            if not self.bycoord:
                memcpy(nd, self.data, self.n * d * sizeof(double))
            else:
                for e in range(d):
                    memcpy(&nd[e * cap], &self.data[e * self.cap], self.n * sizeof(double))
        free(self.data)
        self.data = nd
        self.sq = <double*> realloc(self.sq, cap * sizeof(double))
        self.rd = <double*> realloc(self.rd, cap * sizeof(double))
        if self.sq == NULL or self.rd == NULL:
            raise MemoryError("kernel row store")
        if self.fmode:
            fd = <float*> malloc(cap * d * sizeof(float))
            if fd == NULL:
                raise MemoryError("kernel row store")
            if self.fdata != NULL:
                for e in range(d):
                    memcpy(&fd[e * cap], &self.fdata[e * self.cap], self.n * sizeof(float))
            free(self.fdata)
            self.fdata = fd
        self.cap = cap

    cdef void put(self, Py_ssize_t j, const double* x) noexcept nogil:
        """Store x as point j (j < cap; n becomes max(n, j + 1))."""
        cdef Py_ssize_t e, d = self.d
        if not self.bycoord:
            memcpy(&self.data[j * d], x, d * sizeof(double))
        else:
            for e in range(d):
                self.data[e * self.cap + j] = x[e]
            if self.fmode:
                for e in range(d):
                    self.fdata[e * self.cap + j] = <float> (x[e] - self.fmu[e])
        self.sq[j] = point_sq(x, d)
        self.rd[j] = point_rawdiag(&self.K, x)
        self.tvalid = False
        if j >= self.n:
            self.n = j + 1

    cdef void row(self, Py_ssize_t lo, Py_ssize_t hi, const double* x, double xsq, double xrd,
                  double* out) noexcept nogil:
        """out[0 : hi - lo] = k(x, c_j) for the stored points j in [lo, hi)."""
        cdef int n_ = <int> (hi - lo), d_ = <int> self.d, inc = 1
        cdef double one = 1.0, zero = 0.0
        cdef char trans = b'T'
        cdef Py_ssize_t j
        if hi <= lo:
            return
        if self.csr:
            # x is dense (a scattered CSR row): one sparse-dense dot product per stored row
            for j in range(lo, hi):
                out[j - lo] = csr_dot_dense(x, self.ind, self.val, self.ptr[j], self.ptr[j + 1])
            dots_to_kernel(&self.K, out, hi - lo, xsq, &self.sq[lo], xrd, &self.rd[lo])
        elif self.blas:
            # row-major (hi - lo) x d is column-major d x (hi - lo): out = A' x
            dgemv(&trans, &d_, &n_, &one, &self.data[lo * self.d], &d_, <double*> x, &inc, &zero, out, &inc)
            dots_to_kernel(&self.K, out, hi - lo, xsq, &self.sq[lo], xrd, &self.rd[lo])
        elif self.kind == ROWS_SCALAR:
            k_row(&self.K, &self.data[lo * self.d], &self.rd[lo], hi - lo, x, xrd, out)
        elif self.kind == ROWS_KROW:
            cv_radial_row_krow(&self.data[lo], self.cap, hi - lo, self.d, x, -self.K.gamma, k_is_laplacian(&self.K),
                               out)
        elif k_is_radial(&self.K):
            cv_radial_row(&self.data[lo], self.cap, hi - lo, self.d, x, -self.K.gamma, k_is_laplacian(&self.K), out)
        else:
            cv_dot_row(&self.data[lo], self.cap, hi - lo, self.d, x, out)
            dots_to_kernel(&self.K, out, hi - lo, xsq, &self.sq[lo], xrd, &self.rd[lo])

    cdef double weighted(self, const double* x, double xsq, double xrd, const double* w,
                         double* buf) noexcept nogil:
        """sum_j w[j] k(x, c_j) over all stored points (``buf``: n values of scratch, used off the fused
        radial path)."""
        if self.kind == ROWS_SIMD and k_is_radial(&self.K):
            return cv_radial_dot(self.data, self.cap, self.n, self.d, x, -self.K.gamma, k_is_laplacian(&self.K), w)
        self.row(0, self.n, x, xsq, xrd, buf)
        return cv_dot4(w, buf, self.n)

    cdef bint screens(self) noexcept nogil:
        """True when weighted_screen is a single-precision screening kernel (coordinate storage, radial
        kernel, a vector unit); its error is then within CV_SCREEN_TERM_ERR sum_j |w_j|."""
        return self.kind == ROWS_SIMD and k_is_radial(&self.K) and cv_screen_available()

    cdef double weighted_screen(self, const double* x, const double* w) noexcept nogil:
        """weighted() with exp in single precision (only where screens()): for ruling candidates out;
        within ``screen_term_err()`` sum_j |w_j| of it."""
        cdef float xf[16]
        cdef Py_ssize_t e
        if self.fmode:
            for e in range(self.d):
                xf[e] = <float> (x[e] - self.fmu[e])
            return cv_rbf_dot_screen_f32(self.fdata, self.cap, self.n, self.d, xf, <float> -self.K.gamma, w)
        return cv_radial_dot_screen(self.data, self.cap, self.n, self.d, x, -self.K.gamma, k_is_laplacian(&self.K), w)

    cdef double screen_term_err(self) noexcept nogil:
        return self.ferr

    cdef void enable_f32(self, const double* lo, const double* hi) except *:
        """Screen with single-precision distances as well (before any point is stored): the Gaussian
        kernel on the coordinate layout, every point within the box [lo, hi], and a kernel width at which
        float distances stay within 1% of an e-fold (see cv_rbf_dot_screen_f32 in _simd.h for the bound)."""
        cdef Py_ssize_t e, d = self.d
        cdef double M = 0.0, u = 5.9604644775390625e-08, g = self.K.gamma
        if self.n > 0 or self.kind != ROWS_SIMD or not k_is_gaussian(&self.K) or not cv_screen_available() \
                or d < 1 or d > 16:
            return
        for e in range(d):
            self.fmu[e] = 0.5 * (lo[e] + hi[e])
            M = max(M, 0.5 * (hi[e] - lo[e]))
        # gamma |r_f - r| <= gamma u M^2 d (8 + 4 (d + 3)) over the box (r <= 4 d M^2); keep it <= 0.01, and
        # keep the float coordinates normal numbers
        if not (M < 1e18) or g * u * M * M * d * (8.0 + 4.0 * (d + 3)) > 0.01 or (M > 0 and M < 1e-30):
            return
        self.ferr = CV_SCREEN_TERM_ERR + 1.01 * (1.716 * u * M * sqrt(d * g) + 0.368 * (d + 3) * u)
        self.fmode = True
        self.fdata = <float*> malloc(self.cap * d * sizeof(float))
        if self.fdata == NULL:
            self.fmode = False
            self.ferr = CV_SCREEN_TERM_ERR
            raise MemoryError("kernel row store")

    cdef void enable_taylor(self, const double* lo, const double* hi) except *:
        """Allow the Taylor screen of _taylor.h (before any point is stored): the Gaussian kernel on the
        coordinate layout in d <= 3 dimensions, every point within the box [lo, hi], and a kernel wide
        enough against the box that degree p <= TAYLOR_MAX_P truncates within TAYLOR_TRUNC per term in
        at most TAYLOR_MAX_NTERMS moments.  With R the box's half-diagonal and t = 2 gamma R^2, the
        truncation of exp(s) at |s| <= t is off by at most t^(p+1)/(p+1)! per term (_taylor.h)."""
        cdef Py_ssize_t e, d = self.d
        cdef double R2 = 0.0, h, t, term
        cdef int p
        if self.n > 0 or self.kind != ROWS_SIMD or not k_is_gaussian(&self.K) or d < 1 or d > 3:
            return
        for e in range(d):
            # lo + (hi - lo)/2 cannot overflow where (lo + hi)/2 could; the half-width is taken from the
            # rounded centre to both ends and rounded up, so every coordinate of the box is within it
            self.tmu[e] = lo[e] + 0.5 * (hi[e] - lo[e])
            h = max(self.tmu[e] - lo[e], hi[e] - self.tmu[e]) * (1.0 + 4.0 * DBL_EPSILON)
            R2 += h * h
        R2 *= 1.0 + 4.0 * DBL_EPSILON * d
        t = 2.0 * self.K.gamma * R2
        if not (t < 1e3):   # also a box or width that is not finite
            return
        p = 0
        term = t  # t^(p+1) / (p+1)!
        while term > TAYLOR_TRUNC and p < TAYLOR_MAX_P:
            p += 1
            term *= t / (p + 1)
        if term > TAYLOR_TRUNC or cv_taylor_nterms(<int> d, p) > TAYLOR_MAX_NTERMS:
            return
        self.tp = p
        self.tsig = sqrt(2.0 * self.K.gamma)
        self.tnt = cv_taylor_nterms(<int> d, p)
        self.tgr2 = self.K.gamma * R2
        self.ttrunc = term
        self.tcoef = <double*> malloc((self.tnt + cv_taylor_work(<int> d, p)) * sizeof(double))
        if self.tcoef == NULL:
            raise MemoryError("kernel row store")
        self.tmode = True

    cdef void taylor_build(self, const double* w) noexcept nogil:
        """The moments of the stored points with the weights w (O(n C(p + d, d)))."""
        cv_taylor_build(self.data, self.cap, self.n, <int> self.d, self.tmu, self.tsig, self.tp, w,
                        self.tcoef, &self.tcoef[self.tnt])
        self.tvalid = True

    cdef void taylor_sum(self, const double* X, Py_ssize_t ldx, const Py_ssize_t* rows, Py_ssize_t n,
                                double* out) noexcept nogil:
        """out[i] ~ sum_j w_j k(x, c_j) for x = X[rows[i] * ldx :] (rows NULL: row i), within
        taylor_term_err() sum_j |w_j| (after taylor_build(w))."""
        cv_taylor_eval(self.tcoef, <int> self.d, self.tp, self.tsig, self.tmu, X, ldx, rows, n, out)

    cdef double taylor_term_err(self) noexcept nogil:
        """A bound per unit of sum |w| on |taylor_sum - weighted| (the exact path): the truncation, the
        roundings of the Taylor path (every one relative to sum |w|, _taylor.h: the n-term sums of the
        moments, 3 per degree in their powers and 2 per degree in the evaluation, the scaled distances to
        the centre and their exp's, amplified by |u'|^2 / 2 <= gamma R^2) and those of the exact path's terms
        (its distances of up to 4 R^2 into the exp; its sum is charged by the caller, _Screens.err in _screens.pxi)."""
        cdef double chain = self.n + 8.0 * self.tp + 6.0 * self.d + 4.0 * (self.d + 1) * self.tgr2 + 16.0
        return self.ttrunc + 1.1 * DBL_EPSILON * (chain + 8.0 * (self.d + 1) * self.tgr2 + 8.0)

    cdef void block(self, const double* xs, Py_ssize_t nb, Py_ssize_t ldx, const double* xsq, const double* xrd,
                    Py_ssize_t lo, Py_ssize_t hi, double* out, Py_ssize_t ldo) noexcept nogil:
        """out[b * ldo + (j - lo)] = k(x_b, c_j) for the nb points x_b = xs[b * ldx : b * ldx + d] and
        j in [lo, hi): one GEMM on the BLAS path, nb rows otherwise."""
        cdef int m_ = <int> (hi - lo), n_ = <int> nb, k_ = <int> self.d, lda = <int> self.d
        cdef int ldb = <int> ldx, ldc = <int> ldo
        cdef double one = 1.0, zero = 0.0
        cdef char ta = b'T', tb = b'N'
        cdef Py_ssize_t b
        if hi <= lo or nb == 0:
            return
        if self.blas:
            dgemm(&ta, &tb, &m_, &n_, &k_, &one, &self.data[lo * self.d], &lda, <double*> xs, &ldb, &zero,
                  out, &ldc)
            for b in range(nb):
                dots_to_kernel(&self.K, &out[b * ldo], hi - lo, xsq[b], &self.sq[lo], xrd[b], &self.rd[lo])
        else:
            for b in range(nb):
                self.row(lo, hi, &xs[b * ldx], xsq[b], xrd[b], &out[b * ldo])


# ---------------------------------------------------------------------------------- the full-scan skeleton
cdef Queries dense_queries(const double* X, Py_ssize_t n, Py_ssize_t d) noexcept nogil:
    """Queries over the n dense rows X[q d : (q + 1) d] (norms computed from the rows when needed)."""
    cdef Queries Q
    memset(&Q, 0, sizeof(Queries))
    Q.d = d
    Q.X = X
    Q.ld = d
    return Q


cdef inline Py_ssize_t _qrow(const Queries* Q, const Py_ssize_t* idx, Py_ssize_t p) noexcept nogil:
    """The query row of candidate p: idx[p] (idx NULL: p), a mirrored index mapped back by Q.wrap."""
    cdef Py_ssize_t z = idx[p] if idx != NULL else p
    return z - Q.wrap if (Q.wrap > 0 and z >= Q.wrap) else z


cdef Py_ssize_t rows_scratch(_PointStore store, const Queries* Q, Py_ssize_t ncols, Py_ssize_t block) noexcept nogil:
    """Doubles of scratch that kernel_rows and weighted_rows need for rows of ncols values (``block`` rows a
    GEMM): the rows, then the scattered CSR row or the gathered block of candidates and their norms."""
    if Q.ptr != NULL:
        return ncols + 1 + Q.d
    if store.blas:
        return block * ncols + block * (Q.d + 2) + 1
    return ncols + 1


cdef void kernel_rows(_PointStore store, const Queries* Q, const Py_ssize_t* idx, Py_ssize_t lo, Py_ssize_t hi,
                      Py_ssize_t c0, Py_ssize_t c1, Py_ssize_t block, RowSink sink, void* ctx,
                      double* buf) noexcept nogil:
    """For every candidate p in [lo, hi), its kernel row k(x_q, c_j) against the stored points j in [c0, c1)
    (q = idx[p], or p when idx is NULL; Q.wrap maps mirrored indices), handed to sink(ctx, p, row) in order.
    A CSR candidate is scattered into a zeroed d-vector and cleared after its row; on the BLAS path ``block``
    candidates are one GEMM (gathered first unless they are consecutive rows in place); otherwise one row at a
    time.  A row's values do not depend on the others in its block, so callers split candidates into
    chunks (threads) of whole blocks from a fixed first row.  ``buf``: rows_scratch(store, Q, c1 - c0, block)."""
    cdef Py_ssize_t p, q, b, nb, n = c1 - c0, d = Q.d
    cdef double* xd
    cdef double* xs
    cdef double* xsq
    cdef double* xrd
    cdef const double* x
    cdef bint gather
    if Q.ptr != NULL:
        xd = &buf[n + 1]
        memset(xd, 0, d * sizeof(double))
        for p in range(lo, hi):
            q = _qrow(Q, idx, p)
            csr_scatter(xd, Q.ind, Q.val, Q.ptr[q], Q.ptr[q + 1])
            store.row(c0, c1, xd, Q.sq[q], Q.rd[q], buf)
            sink(ctx, p, buf)
            csr_clear(xd, Q.ind, Q.ptr[q], Q.ptr[q + 1])
        return
    if store.blas:
        xs = &buf[block * n]
        xsq = &xs[block * d]
        xrd = &xsq[block]
        gather = idx != NULL or Q.wrap > 0 or Q.ld != d
        p = lo
        while p < hi:
            nb = min(block, hi - p)
            for b in range(nb):
                q = _qrow(Q, idx, p + b)
                x = &Q.X[q * Q.ld]
                if gather:
                    memcpy(&xs[b * d], x, d * sizeof(double))
                xsq[b] = Q.sq[q] if Q.sq != NULL else point_sq(x, d)
                xrd[b] = Q.rd[q] if Q.rd != NULL else point_rawdiag(&store.K, x)
            store.block(xs if gather else &Q.X[p * Q.ld], nb, d, xsq, xrd, c0, c1, buf, n)
            for b in range(nb):
                sink(ctx, p + b, &buf[b * n])
            p += nb
        return
    for p in range(lo, hi):
        q = _qrow(Q, idx, p)
        x = &Q.X[q * Q.ld]
        store.row(c0, c1, x, Q.sq[q] if Q.sq != NULL else (point_sq(x, d) if store.csr else 0.0),
                  Q.rd[q] if Q.rd != NULL else point_rawdiag(&store.K, x), buf)
        sink(ctx, p, buf)


cdef struct _Weighted:
    const double* w
    double* out
    Py_ssize_t lo, n
    bint add


cdef void _weighted_sink(void* ctx, Py_ssize_t p, double* row) noexcept nogil:
    cdef _Weighted* c = <_Weighted*> ctx
    cdef double v = cv_dot4(c.w, row, c.n)
    if c.add:
        c.out[p - c.lo] += v
    else:
        c.out[p - c.lo] = v


cdef void weighted_rows(_PointStore store, const Queries* Q, const Py_ssize_t* idx, Py_ssize_t lo, Py_ssize_t hi,
                        Py_ssize_t c0, const double* w, bint add, bint fuse, double* out, Py_ssize_t block,
                        double* buf) noexcept nogil:
    """out[p - lo] = sum_{c0 <= j < n} w[j - c0] k(x_q, c_j) for the candidates p in [lo, hi) (``add``: added to
    out[p - lo]): kernel_rows with the dot product cv_dot4 as its reduction, except, with ``fuse``, on the
    SIMD radial path from c0 = 0, where the row is fused into the sum (cv_radial_dot: no row written; its
    tiles sum in another order, so the values differ from the unfused ones by rounding)."""
    cdef _Weighted c
    cdef Py_ssize_t p
    cdef double v
    if fuse and store.kind == ROWS_SIMD and k_is_radial(&store.K) and Q.ptr == NULL and c0 == 0:
        for p in range(lo, hi):
            v = store.weighted(&Q.X[_qrow(Q, idx, p) * Q.ld], 0.0, 1.0, w, buf)
            if add:
                out[p - lo] += v
            else:
                out[p - lo] = v
        return
    c.w = w
    c.out = out
    c.lo = lo
    c.n = store.n - c0
    c.add = add
    kernel_rows(store, Q, idx, lo, hi, c0, store.n, block, _weighted_sink, &c, buf)


include "_lookup.pxi"    # lookup kernels: kernel='precomputed' and callables (_Lookup, lookup_of)
