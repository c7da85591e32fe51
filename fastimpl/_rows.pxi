# Kernel rows against a growable set of points, for fastimpl._engine (include after _kernels.pxi).
#
# Low-dimensional points are stored by coordinate (d x cap, "SoA") and a row runs through the SIMD
# loops of _simd.h: one vectorised pass per coordinate, then a vector exp.  From BLAS_MIN_D
# coordinates on, points are stored by row (cap x d) and a row is one BLAS GEMV (a block of rows one
# GEMM) against cached squared norms: a kernel evaluation then costs what a dot product costs.
#
# Sparse (CSR) input: the store keeps its points as CSR rows (``setup_csr``, ``put_csr``; memory in
# proportion to their nonzeros, never d per point), and a row against a query x is the sparse-dense product
# of each stored row with x scattered into a dense d-vector (``csr_scatter``: O(nnz(x)) to build and to
# clear), then the kernel from the dots and the cached squared norms, as on the BLAS path.
from scipy.linalg.cython_blas cimport dgemv, dgemm

cdef extern from "_simd.h":
    int cv_simd_level() noexcept nogil
    void cv_radial_row(const double* C, Py_ssize_t ld, Py_ssize_t n, Py_ssize_t d, const double* x,
                       double mg, int laplace, double* out) noexcept nogil
    void cv_dot_row(const double* C, Py_ssize_t ld, Py_ssize_t n, Py_ssize_t d, const double* x,
                    double* out) noexcept nogil
    void cv_radial_from_dots(double* out, Py_ssize_t n, double xsq, const double* csq, double mg,
                             int laplace) noexcept nogil
    double cv_dot4(const double* w, const double* v, Py_ssize_t n) noexcept nogil
    void cv_grad_update(double* g, const double* Qi, const double* Qj, const double* alpha, double two_t,
                        Py_ssize_t n, double* gmin, double* gmax, double* gabs) noexcept nogil
    Py_ssize_t cv_wss2(const double* g, const double* Qi, const double* Qd, const double* alpha, double gi,
                       double Qii, double tau, double tie, Py_ssize_t n, double* best_out) noexcept nogil
    Py_ssize_t cv_first_le(const double* g, Py_ssize_t n, double thr) noexcept nogil
    double cv_radial_dot(const double* C, Py_ssize_t ld, Py_ssize_t n, Py_ssize_t d, const double* x,
                         double mg, int laplace, const double* w) noexcept nogil
    double cv_radial_dot_screen(const double* C, Py_ssize_t ld, Py_ssize_t n, Py_ssize_t d, const double* x,
                                double mg, int laplace, const double* w) noexcept nogil
    int cv_screen_available() noexcept nogil
    double CV_SCREEN_TERM_ERR
    double cv_rbf_dot_screen_f32(const float* C, Py_ssize_t ld, Py_ssize_t n, Py_ssize_t d, const float* x,
                                 float mg, const double* w) noexcept nogil

cdef extern from "_taylor.h":
    Py_ssize_t cv_taylor_nterms(int d, int p) noexcept nogil
    Py_ssize_t cv_taylor_work(int d, int p) noexcept nogil
    void cv_taylor_build(const double* C, Py_ssize_t ld, Py_ssize_t n, int d, const double* mu, double gamma,
                         int p, const double* w, double* coef, double* work) noexcept nogil
    void cv_taylor_eval(const double* coef, int d, int p, double gamma, const double* mu, const double* X,
                        Py_ssize_t ldx, const Py_ssize_t* rows, Py_ssize_t n, double* out) noexcept nogil

#: from this many coordinates on, kernel rows go through BLAS (dot products against squared norms)
cdef Py_ssize_t BLAS_MIN_D = 16
#: the Taylor screen (_taylor.h) truncates where each term is off by at most this (2^-40, about the
#: rounding of a sum of a few thousand terms), in at most TAYLOR_MAX_NTERMS moments of degree <= TAYLOR_MAX_P
cdef double TAYLOR_TRUNC = 2.0 ** -40
cdef int TAYLOR_MAX_P = 48
cdef Py_ssize_t TAYLOR_MAX_NTERMS = 4096

SIMD_LEVEL = cv_simd_level()


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


cdef inline double point_rawdiag(const Kern* K, const double* x) noexcept nogil:
    """k_raw(x, x) for the dot-product kernels (what normalisation divides by); 1 for radial ones."""
    if k_is_radial(K):
        return 1.0
    return k_raw(K, x, x)


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


cdef class _PointStore:
    """A growable array of points in the layout its kernel rows want (see the top of this file)."""
    cdef Kern K
    cdef Py_ssize_t d, n, cap
    cdef bint blas
    cdef bint csr       # CSR rows (sparse input): ptr, ind, val instead of data
    cdef Py_ssize_t* ptr
    cdef int* ind
    cdef double* val
    cdef Py_ssize_t nzcap
    cdef double* data   # blas: cap x d by row; else d x cap by coordinate
    cdef double* sq     # squared norms (the BLAS path of radial kernels)
    cdef double* rd     # k_raw(c, c) (normalised dot-product kernels)
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
        self.n = 0
        self.cap = 0

    def __dealloc__(self):
        free(self.ptr)
        free(self.ind)
        free(self.val)
        free(self.data)
        free(self.sq)
        free(self.rd)
        free(self.fdata)
        free(self.tcoef)

    cdef void setup(self, Kern K, Py_ssize_t cap) except *:
        self.K = K
        self.d = K.d
        self.blas = K.d >= BLAS_MIN_D
        self.reserve(max(cap, 4))

    cdef void setup_csr(self, Kern K, Py_ssize_t cap) except *:
        """A store of CSR rows (sparse input); points are appended with put_csr."""
        self.K = K
        self.d = K.d
        self.blas = False
        self.csr = True
        self.reserve(max(cap, 4))
        self.ptr[0] = 0

    cdef inline Py_ssize_t nbytes(self) noexcept nogil:
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
            if self.blas:
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

    cdef inline void put(self, Py_ssize_t j, const double* x) noexcept nogil:
        """Store x as point j (j < cap; n becomes max(n, j + 1))."""
        cdef Py_ssize_t e, d = self.d
        if self.blas:
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
        elif k_is_radial(&self.K):
            cv_radial_row(&self.data[lo], self.cap, hi - lo, self.d, x, -self.K.gamma, k_is_laplacian(&self.K), out)
        else:
            cv_dot_row(&self.data[lo], self.cap, hi - lo, self.d, x, out)
            dots_to_kernel(&self.K, out, hi - lo, xsq, &self.sq[lo], xrd, &self.rd[lo])

    cdef double weighted(self, const double* x, double xsq, double xrd, const double* w,
                         double* buf) noexcept nogil:
        """sum_j w[j] k(x, c_j) over all stored points (``buf``: n values of scratch, used off the fused
        radial path)."""
        if not self.blas and not self.csr and k_is_radial(&self.K):
            return cv_radial_dot(self.data, self.cap, self.n, self.d, x, -self.K.gamma, k_is_laplacian(&self.K), w)
        self.row(0, self.n, x, xsq, xrd, buf)
        return cv_dot4(w, buf, self.n)

    cdef inline bint screens(self) noexcept nogil:
        """True when weighted_screen is a single-precision screening kernel (coordinate storage, radial
        kernel, a vector unit); its error is then within CV_SCREEN_TERM_ERR sum_j |w_j|."""
        return not self.blas and not self.csr and k_is_radial(&self.K) and cv_screen_available()

    cdef inline double weighted_screen(self, const double* x, const double* w) noexcept nogil:
        """weighted() with exp in single precision (only where screens()): for ruling candidates out;
        within ``screen_term_err()`` sum_j |w_j| of it."""
        cdef float xf[16]
        cdef Py_ssize_t e
        if self.fmode:
            for e in range(self.d):
                xf[e] = <float> (x[e] - self.fmu[e])
            return cv_rbf_dot_screen_f32(self.fdata, self.cap, self.n, self.d, xf, <float> -self.K.gamma, w)
        return cv_radial_dot_screen(self.data, self.cap, self.n, self.d, x, -self.K.gamma, k_is_laplacian(&self.K), w)

    cdef inline double screen_term_err(self) noexcept nogil:
        return self.ferr

    cdef void enable_f32(self, const double* lo, const double* hi) except *:
        """Screen with single-precision distances as well (before any point is stored): the Gaussian
        kernel on the coordinate layout, every point within the box [lo, hi], and a kernel width at which
        float distances stay within 1% of an e-fold (see cv_rbf_dot_screen_f32 in _simd.h for the bound)."""
        cdef Py_ssize_t e, d = self.d
        cdef double M = 0.0, u = 5.9604644775390625e-08, g = self.K.gamma
        if self.n > 0 or self.blas or not k_is_gaussian(&self.K) or not cv_screen_available() or d < 1 or d > 16:
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
        if self.n > 0 or self.blas or self.csr or not k_is_gaussian(&self.K) or d < 1 or d > 3:
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

    cdef inline void taylor_build(self, const double* w) noexcept nogil:
        """The moments of the stored points with the weights w (O(n C(p + d, d)))."""
        cv_taylor_build(self.data, self.cap, self.n, <int> self.d, self.tmu, self.tsig, self.tp, w,
                        self.tcoef, &self.tcoef[self.tnt])
        self.tvalid = True

    cdef inline void taylor_sum(self, const double* X, Py_ssize_t ldx, const Py_ssize_t* rows, Py_ssize_t n,
                                double* out) noexcept nogil:
        """out[i] ~ sum_j w_j k(x, c_j) for x = X[rows[i] * ldx :] (rows NULL: row i), within
        taylor_term_err() sum_j |w_j| (after taylor_build(w))."""
        cv_taylor_eval(self.tcoef, <int> self.d, self.tp, self.tsig, self.tmu, X, ldx, rows, n, out)

    cdef inline double taylor_term_err(self) noexcept nogil:
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
