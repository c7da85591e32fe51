# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""SSVR-SRS / RSVM in Cython: :class:`FastSSVROps`, the numerics of the loop :func:`refimpl.ssvr.ssvr_srs`.

The loop itself -- draws, selection, dependency test, finite Newton iterations, stopping rules and
warnings -- is written once, in :mod:`refimpl.ssvr`; :func:`ssvr_srs` here runs it with
``ops_class=FastSSVROps``, which has the methods of :class:`refimpl.ssvr.SSVROps` and computes them
differently only in *how*:

* the inputs sit in a point store of the kernel-row layer (``_krows.pxd``): dense ones read in place,
  by BLAS GEMV/GEMM against cached squared norms from ``BLAS_MIN_D`` coordinates on, else by the scalar
  kernels (``k_row``); sparse (CSR) ones as CSR rows (sparse-dense products), never densified.  A basis
  column (:meth:`FastSSVROps.cholesky_row`) is one kernel row of that store; on the BLAS and CSR paths
  its own entry k(x_s, x_s) is set to the kernel's diagonal (the dot-product form leaves it a rounding
  away, which the Laplacian's root would make ~1e-8: see ``refimpl.ssvr.kernel_columns``);
* candidate scoring (eq. (16)) is the layer's full-scan skeleton (``kernel_rows``): each candidate's
  kernel row (on the BLAS path SCORE_BLOCK candidates a GEMM) reduced to the two dot products it needs,
  in parallel over chunks of candidates (OpenMP ``prange``); no n x |O| block is stored.  Below
  ``BLAS_MIN_D`` the Gaussian / Laplacian rows are fused with the sums instead (``cv_radial_sums`` of
  ``_simd.h`` on the inputs stored by coordinate);
* the gradient (22) is computed as in the reference, K_P'l'(r) + 2 lam K_PP beta (BLAS dgemv), so a
  Newton iteration makes two passes over the n x m block (this and u = K_P d).  (It was once
  H beta - 2 K_P'q with a maintained q = W y + eps s - (Delta - eps) s_bar, saving a pass: but H beta
  and 2 K_P'q are both ~ |H| |beta| and cancel to the gradient, an absolute error ~ 1e-16 |H| |beta|
  that on ill-conditioned bases (|beta| ~ 1e3, cond H ~ 1e14) left finite Newton 1e-7 relative
  above the minimum of (18) where the reference, whose gradient has no such cancellation, reached it);
* residuals, zones, the loss and the list of zone changes are updated in one fused O(n) loop;
* the exact line search first brackets the root of phi' by doubling from t = 1 and sorts only the
  breakpoints inside the bracket;
* H keeps its lower triangle only (BLAS dsyrk for W changes, LAPACK dpotrf for refactoring);
  rank-one up/downdates of L and the append of a basis row are plain C loops / BLAS dtrsv.

Since the random draws, the selection rule, the dependency test and the refactor rule are the
loop's, the same ``random_state`` selects the same basis as the reference.
"""
import numpy as np
import scipy.sparse as sp
cimport numpy as cnp
from cython.parallel cimport prange, parallel
from libc.math cimport exp, sqrt, fabs, INFINITY
from libc.stdlib cimport malloc, free, qsort
from scipy.linalg.cython_blas cimport dgemv, dtrsv, dsyrk, dsymv
from scipy.linalg.cython_lapack cimport dpotrf

from refimpl import ssvr as _loop
from refimpl.ssvr import JITTER_RTOL
from fastimpl._openmp import blas_single_threaded

cnp.import_array()

from fastimpl._krows cimport (
    BLAS_MIN_D, Kern, Queries, _PointStore, ROWS_BLAS, ROWS_CSR, ROWS_KROW, ROWS_SCALAR, make_kern, k_is_radial,
    k_is_laplacian, k_diag, csr_row_sq, csr_scatter, csr_clear, rawdiag_from_sq, dense_queries, rows_scratch,
    kernel_rows, cv_radial_sums_available, cv_radial_sums)

#: 1 when the candidate scoring of the radial kernels below BLAS_MIN_D coordinates runs cv_radial_sums of
#: _simd.h (AVX2 or AVX-512 with libmvec); 0: the layer's rows (score_candidates)
cdef int SIMD_OK = cv_radial_sums_available()

# rows gathered per dsyrk call when W changes
cdef Py_ssize_t GATHER = 256
# below this many kernel-coordinate operations the candidate scoring runs on one thread
cdef Py_ssize_t PARALLEL_MIN_WORK = 2_000_000
# candidates per GEMM of the scoring on the BLAS path (and per chunk of the threads), and at most this many
# doubles of kernel rows per thread (a block's rows are n values each)
cdef Py_ssize_t SCORE_BLOCK = 32
cdef Py_ssize_t SCORE_ROWS_MAX = 2 ** 21
cdef double C_JITTER_RTOL = JITTER_RTOL


cdef struct BP:
    double t
    double ds


cdef int _cmp_bp(const void* a, const void* b) noexcept nogil:
    cdef double ta = (<const BP*> a).t
    cdef double tb = (<const BP*> b).t
    return (ta > tb) - (ta < tb)


cdef inline double dmin(double a, double b) noexcept nogil:
    return a if a < b else b


cdef inline double dmax(double a, double b) noexcept nogil:
    return a if a > b else b


cdef inline double hder_bf(double z, double eps, double dme) noexcept nogil:
    """l'(z) of eq. (7), the g_i of eq. (15), with dme = Delta - eps, without branches:
    2 clamp(z - clamp(z, +-eps), +-dme), i.e. 0 on |z| <= eps, 2 (z -+ eps) inside, +-2 dme beyond Delta."""
    return 2.0 * dmin(dmax(z - dmax(dmin(z, eps), -eps), -dme), dme)


cdef inline double hloss_bf(double z, double eps, double delta) noexcept nogil:
    """l(z) of eq. (7) with selects instead of branches: 0 on |z| <= eps, (|z| - eps)^2 below Delta,
    (Delta - eps)(2|z| - Delta - eps) beyond."""
    cdef double a = fabs(z)
    cdef double e = a - eps
    cdef double lin = (delta - eps) * (2.0 * a - delta - eps)
    cdef double v = e * e if a < delta else lin
    return 0.0 if a <= eps else v


cdef inline signed char zone_bf(double r, double eps, double delta) noexcept nogil:
    """-2: r <= -Delta, -1: -Delta < r < -eps, 0: |r| <= eps, 1, 2 symmetric (eqs. (19)-(20)),
    without branches."""
    return <signed char> ((r > eps) + (r >= delta) - (r < -eps) - (r <= -delta))


include "_ssvr_scores.pxi"   # _Scoring, score_candidates (the layer's rows), score_candidates_simd (fused)


cdef class FastSSVROps:
    """:class:`refimpl.ssvr.SSVROps` in C: the state of SSVR-SRS in raw buffers (owned by NumPy arrays
    kept in ``keep``) and the same methods, which :func:`refimpl.ssvr.ssvr_srs` calls."""
    cdef Kern K
    cdef Py_ssize_t n, d, nb
    cdef readonly Py_ssize_t m       # basis functions so far
    cdef double lam, eps, delta, loss
    cdef int nthreads                # OpenMP threads of the candidate scoring
    cdef const double* X  # the dense inputs (NULL for CSR input)
    cdef const double* y
    cdef _PointStore rows # the inputs in the layer's store: BLAS (d >= BLAS_MIN_D), k_row (below) or CSR rows
    cdef _PointStore coords  # the inputs by coordinate, for the fused radial sums (score_candidates_simd), or None
    cdef Queries Q        # the inputs as candidates of kernel rows
    cdef double* xd       # a zeroed d-vector: the CSR row of cholesky_row's candidate, scattered
    cdef double* KP       # n x nb, column j (basis j) at KP + j n
    cdef double* KPP      # nb x nb column-major (full)
    cdef double* H        # nb x nb column-major, lower triangle
    cdef double* L        # nb x nb column-major, lower Cholesky factor of H
    cdef double* beta_
    cdef double* r
    cdef double* u
    cdef double* work     # n: w K_s (cholesky_row), l'(r) (newton_direction)
    cdef double* vm       # 4 nb scratch: [h or grad | l or d | rank-one x | K_PP d]
    cdef double* gather   # GATHER x nb
    cdef BP* bps          # 4 n breakpoints
    cdef Py_ssize_t* changed
    cdef Py_ssize_t nch   # points whose w_i changed in the last step (at changed[:nch])
    cdef signed char* zone
    cdef Py_ssize_t* P
    cdef object keep
    cdef object O         # the candidates of the current round
    # the candidate of the last cholesky_row: its index, k_ss, h_ss and pivot^2
    cdef Py_ssize_t new_s
    cdef double new_kss, new_hss, new_piv2

    def __init__(self, X, y, spec, Py_ssize_t nb, double lam, double eps, double delta, n_jobs=None):
        """X: dense, or CSR (scipy.sparse; read as CSR rows, never densified)."""
        cdef Py_ssize_t i, n
        self.n, self.d = X.shape[0], X.shape[1]
        self.nb, self.m = nb, 0
        self.lam, self.eps, self.delta = lam, eps, delta
        self.nthreads = _threads(n_jobs)
        self.K = make_kern(spec, self.d)
        yc = np.ascontiguousarray(y, dtype=np.float64)
        n = self.n
        arrays = dict(y=yc, KP=np.zeros(n * nb), KPP=np.zeros(nb * nb),
                      H=np.zeros(nb * nb), L=np.zeros(nb * nb), beta=np.zeros(nb),
                      r=-yc, u=np.zeros(n), work=np.zeros(n), vm=np.zeros(4 * nb + 4),
                      gather=np.zeros(GATHER * nb), bps=np.zeros(2 * (4 * n + 1)),
                      changed=np.zeros(n + 1, dtype=np.intp), zone=np.zeros(n, dtype=np.int8),
                      P=np.zeros(nb, dtype=np.intp), xd=np.zeros(max(self.d, 1)))
        self.keep = arrays
        self._store_inputs(X, arrays)
        self.y = <const double*> cnp.PyArray_DATA(yc)
        self.KP = <double*> cnp.PyArray_DATA(arrays["KP"])
        self.KPP = <double*> cnp.PyArray_DATA(arrays["KPP"])
        self.H = <double*> cnp.PyArray_DATA(arrays["H"])
        self.L = <double*> cnp.PyArray_DATA(arrays["L"])
        self.beta_ = <double*> cnp.PyArray_DATA(arrays["beta"])
        self.r = <double*> cnp.PyArray_DATA(arrays["r"])
        self.u = <double*> cnp.PyArray_DATA(arrays["u"])
        self.work = <double*> cnp.PyArray_DATA(arrays["work"])
        self.vm = <double*> cnp.PyArray_DATA(arrays["vm"])
        self.gather = <double*> cnp.PyArray_DATA(arrays["gather"])
        self.bps = <BP*> cnp.PyArray_DATA(arrays["bps"])
        self.changed = <Py_ssize_t*> cnp.PyArray_DATA(arrays["changed"])
        self.zone = <signed char*> cnp.PyArray_DATA(arrays["zone"])
        self.P = <Py_ssize_t*> cnp.PyArray_DATA(arrays["P"])
        self.xd = <double*> cnp.PyArray_DATA(arrays["xd"])
        self.nch = 0
        with nogil:
            self.loss = 0.0
            for i in range(n):
                self.zone[i] = zone_bf(self.r[i], eps, delta)
                self.loss += hloss_bf(self.r[i], eps, delta)

    cdef void _store_inputs(self, X, dict keep) except *:
        """The inputs in the layer's store (rows, Q) and, for the fused radial sums, by coordinate (coords)."""
        cdef Py_ssize_t i, n = self.n, d = self.d
        cdef const long long[::1] xp
        cdef const int[::1] xi
        cdef const double[::1] xv
        cdef double xsq
        self.rows = _PointStore()
        self.coords = None
        if sp.issparse(X):
            if d >= 2**31:
                raise ValueError("X: sparse input needs fewer than 2**31 columns")
            X = sp.csr_matrix(X)
            keep.update(indptr=np.ascontiguousarray(X.indptr, dtype=np.int64),
                        indices=np.ascontiguousarray(X.indices, dtype=np.int32),
                        data=np.ascontiguousarray(X.data, dtype=np.float64))
            xp, xi, xv = keep["indptr"], keep["indices"], keep["data"]
            self.X = NULL
            self.rows.setup_csr(self.K, n)
            self.Q = dense_queries(NULL, n, d)
            self.Q.ptr = &xp[0]
            if xi.shape[0] > 0:
                self.Q.ind = &xi[0]
                self.Q.val = &xv[0]
            for i in range(n):
                xsq = csr_row_sq(self.Q.val, xp[i], xp[i + 1])
                self.rows.put_csr(i, &self.Q.ind[xp[i]] if xi.shape[0] > 0 else NULL,
                                  &self.Q.val[xp[i]] if xi.shape[0] > 0 else NULL, xp[i + 1] - xp[i], xsq,
                                  rawdiag_from_sq(&self.K, xsq))
        else:
            Xc = np.ascontiguousarray(X, dtype=np.float64)
            keep["X"] = Xc
            self.X = <const double*> cnp.PyArray_DATA(Xc)
            self.rows.view(self.K, self.X, n, ROWS_BLAS if d >= BLAS_MIN_D else ROWS_SCALAR)
            self.Q = dense_queries(self.X, n, d)
            if SIMD_OK and k_is_radial(&self.K) and d < BLAS_MIN_D:
                self.coords = _PointStore()
                self.coords.setup_kind(self.K, n, ROWS_KROW)
                with nogil:
                    for i in range(n):
                        self.coords.put(i, &self.X[i * d])
        self.Q.sq = self.rows.sq
        self.Q.rd = self.rows.rd

    # ---------------------------------------------------------------- the state
    def loss_derivative(self):
        """g of eq. (15) at the current residuals."""
        g = np.empty(self.n)
        cdef double[::1] gv = g
        cdef Py_ssize_t i
        for i in range(self.n):
            gv[i] = hder_bf(self.r[i], self.eps, self.delta - self.eps)
        return g

    def beta(self):
        """A copy of beta_P."""
        return np.array(<double[:self.m]> self.beta_) if self.m else np.zeros(0)

    def objective(self):
        """L(beta_P) of eq. (18), from the loss kept up to date by :meth:`take_step`."""
        return self.loss + self.lam * self._quad(self.beta_, self.beta_)

    cdef double _quad(self, const double* a, const double* b) noexcept nogil:
        """a'K_PP b."""
        cdef Py_ssize_t i, j
        cdef double s = 0.0, t
        for j in range(self.m):
            t = 0.0
            for i in range(self.m):
                t += self.KPP[i + j * self.nb] * a[i]
            s += t * b[j]
        return s

    # ---------------------------------------------------------------- step 2: candidates, a new basis function
    def load_candidates(self, O):
        """Keep the round's candidates O; their kernel columns are computed by the scoring and by
        :meth:`cholesky_row`, not stored."""
        self.O = np.ascontiguousarray(O, dtype=np.intp)

    def criterion_terms(self, double[::1] g):
        """(g_bar'K_bar_j, |K_bar_j|^2) of eq. (16) for the loaded candidates."""
        return self.scores(self.O, g, self.nthreads)

    def scores(self, Py_ssize_t[::1] O, double[::1] g, int nthreads):
        """(g_bar'K_bar_j, |K_bar_j|^2) of eq. (16) for the candidates O, on ``nthreads`` threads."""
        cdef Py_ssize_t nO = O.shape[0], block = 1
        cdef int rc = 0
        cdef _Scoring ctx
        if nO * self.n * self.d < PARALLEL_MIN_WORK:
            nthreads = 1
        num = np.empty(nO)
        kn = np.empty(nO)
        cdef double[::1] numv = num, knv = kn
        if nO == 0:
            return num, kn
        if self.coords is not None:
            with nogil:
                score_candidates_simd(&self.K, self.X, self.coords.data, self.coords.cap, self.n, &O[0], nO, &g[0],
                                      self.beta_, self.KP, self.m, self.lam, &numv[0], &knv[0], nthreads)
            return num, kn
        if self.rows.blas:
            block = max(1, min(SCORE_BLOCK, SCORE_ROWS_MAX // max(self.n, 1)))
        ctx.g = &g[0]
        ctx.beta = self.beta_
        ctx.P = self.P
        ctx.O = &O[0]
        ctx.n = self.n
        ctx.m = self.m
        ctx.lam = self.lam
        ctx.num = &numv[0]
        ctx.knorm2 = &knv[0]
        ctx.K = &self.K
        ctx.rd = self.rows.rd
        ctx.fix_self = self.rows.kind == ROWS_BLAS or self.rows.kind == ROWS_CSR
        with nogil:
            rc = score_candidates(self.rows, &self.Q, nO, &ctx, block, nthreads)
        if rc != 0:
            raise MemoryError("SSVR candidate scoring: kernel rows")
        return num, kn

    def cholesky_row(self, Py_ssize_t j):
        """Candidate j's kernel column K_s (into column m of K_P), new Hessian column h, h_ss (O(n m)) and
        Cholesky row l (O(m^2)), kept for :meth:`append`; returns (pivot^2, h_ss)."""
        cdef Py_ssize_t s = self.O[j]
        cdef Py_ssize_t n = self.n, m = self.m, nb = self.nb, i, jj
        cdef double* k = &self.KP[m * n]
        cdef double* h = self.vm
        cdef double* l = &self.vm[nb]
        cdef double k_ss, h_ss = 0.0, piv2, lam = self.lam
        cdef int inc = 1, mi = <int> m, ni = <int> n, ldk = <int> n, ldl = <int> nb
        cdef double zero = 0.0, two = 2.0
        cdef char trans = b'T', uplo = b'L', notrans = b'N', diag = b'N'
        with nogil:
            self._column(s, k)
            k_ss = k_diag(&self.K, self.rows.rd[s])
            if self.rows.kind == ROWS_BLAS or self.rows.kind == ROWS_CSR:
                k[s] = k_ss
            for i in range(n):
                if self.zone[i] == 1 or self.zone[i] == -1:
                    self.work[i] = k[i]
                    h_ss += k[i] * k[i]
                else:
                    self.work[i] = 0.0
            h_ss = 2.0 * h_ss + 2.0 * lam * k_ss
            if m > 0:
                dgemv(&trans, &ni, &mi, &two, self.KP, &ldk, self.work, &inc, &zero, h, &inc)
                for jj in range(m):
                    h[jj] += 2.0 * lam * k[self.P[jj]]
                    l[jj] = h[jj]
                dtrsv(&uplo, &notrans, &diag, &mi, self.L, &ldl, l, &inc)
            piv2 = h_ss
            for jj in range(m):
                piv2 -= l[jj] * l[jj]
        self.new_s, self.new_kss, self.new_hss, self.new_piv2 = s, k_ss, h_ss, piv2
        return piv2, h_ss

    cdef void _column(self, Py_ssize_t s, double* k) noexcept nogil:
        """k[i] = k(x_i, x_s) for every input i: one kernel row of the store (a CSR row scattered first)."""
        if self.Q.ptr == NULL:
            self.rows.row(0, self.n, &self.X[s * self.d], self.rows.sq[s], self.rows.rd[s], k)
            return
        csr_scatter(self.xd, self.Q.ind, self.Q.val, self.Q.ptr[s], self.Q.ptr[s + 1])
        self.rows.row(0, self.n, self.xd, self.rows.sq[s], self.rows.rd[s], k)
        csr_clear(self.xd, self.Q.ind, self.Q.ptr[s], self.Q.ptr[s + 1])

    def append(self):
        """Grow K_PP, H, L and beta_P (= 0) by the candidate of the last :meth:`cholesky_row`."""
        cdef Py_ssize_t n = self.n, m = self.m, nb = self.nb, j
        cdef double* k = &self.KP[m * n]
        cdef double* h = self.vm
        cdef double* l = &self.vm[nb]
        with nogil:
            for j in range(m):
                self.KPP[j + m * nb] = k[self.P[j]]
                self.KPP[m + j * nb] = k[self.P[j]]
                self.H[m + j * nb] = h[j]
                self.H[j + m * nb] = h[j]
                self.L[m + j * nb] = l[j]
            self.KPP[m + m * nb] = self.new_kss
            self.H[m + m * nb] = self.new_hss
            self.L[m + m * nb] = sqrt(self.new_piv2)
            self.beta_[m] = 0.0
            self.P[m] = self.new_s
            self.m = m + 1

    # ---------------------------------------------------------------- finite Newton (18)-(24)
    cdef double dphi(self, double t, double a, double b) noexcept nogil:
        cdef Py_ssize_t i
        cdef double s = 0.0, eps = self.eps, dme = self.delta - self.eps
        cdef const double* r = self.r
        cdef const double* u = self.u
        # terms with u_i = 0 add exactly 0 (hder_bf is finite), so no test is needed
        for i in range(self.n):
            s += hder_bf(r[i] + t * u[i], eps, dme) * u[i]
        return s + 2.0 * self.lam * (a + t * b)

    cdef double line_search(self, double a, double b) noexcept nogil:
        """Exact minimiser of phi(t) = L(beta + t d) (see refimpl.ssvr.line_search): bracket the root
        of phi' by doubling from t = 1, then walk the sorted breakpoints inside the bracket."""
        cdef double lo = 0.0, hi = 1.0, dlo, dhi, t, z, az, slope, val, tprev, c, side
        cdef double eps = self.eps, delta = self.delta, ui, ri, zh, zlo, zhi, sl, cmax
        cdef Py_ssize_t i, nbp = 0, k, q
        cdef int it, nbound = 4 if delta < INFINITY else 2
        cdef bint outward, quad, is_eps
        # phi'(0) and phi'(1) in one pass (the same sums as two dphi calls)
        cdef double s0 = 0.0, s1 = 0.0, dme = delta - eps
        cdef const double* rr = self.r
        cdef const double* uu = self.u
        for i in range(self.n):
            ui = uu[i]
            s0 += hder_bf(rr[i], eps, dme) * ui
            s1 += hder_bf(rr[i] + ui, eps, dme) * ui
        dlo = s0 + 2.0 * self.lam * a
        if dlo >= 0.0:
            return 0.0
        for it in range(200):
            dhi = s1 + 2.0 * self.lam * (a + b) if it == 0 else self.dphi(hi, a, b)
            if dhi >= 0.0:
                break
            lo = hi
            dlo = dhi
            hi *= 2.0
        slope = 2.0 * self.lam * b
        cmax = delta if delta < INFINITY else eps
        for i in range(self.n):
            ui = self.u[i]
            if ui == 0.0:
                continue
            ri = self.r[i]
            z = ri + lo * ui
            az = fabs(z)
            # bitwise & | (no short-circuit branches): the same tests as refimpl.ssvr.line_search
            outward = (z * ui > 0) | (z == 0)
            quad = ((az > eps) & (az < delta)) | ((az == eps) & outward & (az < delta)) | ((az == delta) & (not outward))
            slope += (2.0 * ui * ui) * (<double> quad)     # a product, not a (mispredicted) branch
            # a breakpoint in (lo, hi) needs a boundary within the segment r + [lo, hi] u; the test below
            # is looser than that by far more than rounding (1e-12 relative), so it only skips the
            # divisions of points that cannot have one
            zh = ri + hi * ui
            zlo = dmin(z, zh)
            zhi = dmax(z, zh)
            sl = 1e-12 * (fabs(ri) + fabs(ui) * hi + cmax)
            zlo -= sl
            zhi += sl
            if not (((zlo <= eps) & (zhi >= eps)) | ((zlo <= -eps) & (zhi >= -eps))
                    | ((zlo <= delta) & (zhi >= delta)) | ((zlo <= -delta) & (zhi >= -delta))):
                continue
            for q in range(nbound):
                is_eps = q < 2
                side = -1.0 if (q % 2) == 0 else 1.0
                c = side * (eps if is_eps else delta)
                t = (c - ri) / ui
                if t > lo and t < hi:
                    outward = (ui > 0) == (side > 0)
                    self.bps[nbp].t = t
                    self.bps[nbp].ds = (2.0 if outward == is_eps else -2.0) * ui * ui
                    nbp += 1
        qsort(self.bps, nbp, sizeof(BP), _cmp_bp)
        tprev = lo
        for k in range(nbp):
            val = dlo + slope * (self.bps[k].t - tprev)
            if val >= 0.0:
                break
            dlo = val
            tprev = self.bps[k].t
            slope += self.bps[k].ds
        return tprev - dlo / slope

    cdef bint rank1(self, double* x, double sign) noexcept nogil:
        cdef Py_ssize_t m = self.m, nb = self.nb, k, i
        cdef double lkk, r2, rkk, c, s
        cdef double* Lk
        for k in range(m):
            Lk = &self.L[k * nb]
            lkk = Lk[k]
            r2 = lkk * lkk + sign * x[k] * x[k]
            if r2 <= 0.0:
                return False
            rkk = sqrt(r2)
            c = rkk / lkk
            s = x[k] / lkk
            Lk[k] = rkk
            for i in range(k + 1, m):
                Lk[i] = (Lk[i] + sign * s * x[i]) / c
                x[i] = c * x[i] - s * Lk[i]
        return True

    cdef int _update_factor(self, Py_ssize_t nch, bint rank_one) noexcept nogil:
        """W changed at self.changed[:nch] (their new zones are in self.zone): H += 2 sum +-k_i k_i'
        (dsyrk on gathered rows), then rank-one updates of L (with ``rank_one``) or a refactorisation.
        0 on success."""
        cdef Py_ssize_t m = self.m, nb = self.nb, n = self.n, c, i, j, cnt
        cdef double sgn
        cdef int mi = <int> m, ki, ldg, ldh = <int> nb, info = 0
        cdef double alpha, one = 1.0
        cdef char uplo = b'L', trans = b'T'
        cdef bint ok = True
        cdef double* x = &self.vm[2 * nb]
        cdef int pass_
        for pass_ in range(2):
            sgn = 1.0 if pass_ == 0 else -1.0
            cnt = 0
            for c in range(nch):
                i = self.changed[c]
                if (self.zone[i] == 1 or self.zone[i] == -1) != (sgn > 0):
                    continue
                for j in range(m):
                    self.gather[cnt + j * GATHER] = self.KP[i + j * n]
                cnt += 1
                if cnt == GATHER:
                    ki = <int> cnt
                    ldg = <int> GATHER
                    alpha = 2.0 * sgn
                    dsyrk(&uplo, &trans, &mi, &ki, &alpha, self.gather, &ldg, &one, self.H, &ldh)
                    cnt = 0
            if cnt > 0:
                ki = <int> cnt
                ldg = <int> GATHER
                alpha = 2.0 * sgn
                dsyrk(&uplo, &trans, &mi, &ki, &alpha, self.gather, &ldg, &one, self.H, &ldh)
        if rank_one:
            for c in range(nch):
                i = self.changed[c]
                sgn = 1.0 if (self.zone[i] == 1 or self.zone[i] == -1) else -1.0
                for j in range(m):
                    x[j] = sqrt(2.0) * self.KP[i + j * n]
                if not self.rank1(x, sgn):
                    ok = False
                    break
            if ok:
                return 0
        # refactor; on failure shift the diagonal as refimpl.ssvr.cholesky does
        cdef double tau = 0.0, scale = 0.0
        cdef int attempt
        for j in range(m):
            if self.H[j + j * nb] > scale:
                scale = self.H[j + j * nb]
        for attempt in range(12):
            for j in range(m):
                for i in range(j, m):
                    self.L[i + j * nb] = self.H[i + j * nb]
                self.L[j + j * nb] += tau
            dpotrf(&uplo, &mi, self.L, &ldh, &info)
            if info == 0:
                return 0
            tau = C_JITTER_RTOL * scale if tau == 0.0 else 10.0 * tau
        return info


    # ---------------------------------------------------------------- step 3: the finite Newton steps
    def newton_direction(self):
        """The Newton direction d = -H^{-1} grad (24) (into the scratch vm[nb:2 nb]) with the gradient
        (22) = K_P'v + 2 lam K_PP beta, v = l'(r) = 2 W r - 2 eps s + 2 (Delta - eps) s_bar (one pass
        over K_P; no cancellation: v is small near the optimum, unlike H beta); returns
        (decrement -grad'd, L)."""
        cdef Py_ssize_t m = self.m, nb = self.nb, n = self.n, i, j
        cdef double* grad = self.vm
        cdef double* d = &self.vm[nb]
        cdef double decrement, Lval, twolam = 2.0 * self.lam, dme = self.delta - self.eps
        cdef int inc = 1, mi = <int> m, ni = <int> n, ldk = <int> n, ldh = <int> nb
        cdef double one = 1.0, zero = 0.0
        cdef char uplo = b'L', notrans = b'N', trans = b'T', diag = b'N'
        with nogil:
            for i in range(n):
                self.work[i] = hder_bf(self.r[i], self.eps, dme)
            dsymv(&uplo, &mi, &twolam, self.KPP, &ldh, self.beta_, &inc, &zero, grad, &inc)
            dgemv(&trans, &ni, &mi, &one, self.KP, &ldk, self.work, &inc, &one, grad, &inc)
            for j in range(m):
                d[j] = -grad[j]
            dtrsv(&uplo, &notrans, &diag, &mi, self.L, &ldh, d, &inc)
            dtrsv(&uplo, &trans, &diag, &mi, self.L, &ldh, d, &inc)
            decrement = 0.0
            for j in range(m):
                decrement -= grad[j] * d[j]
            Lval = self.loss + self.lam * self._quad(self.beta_, self.beta_)
        return decrement, Lval

    def step_length(self):
        """u = K_P d (one pass over K_P) and the exact minimiser t >= 0 of L(beta + t d)."""
        cdef Py_ssize_t m = self.m, nb = self.nb, j
        cdef double* d = &self.vm[nb]
        cdef double* Kd = &self.vm[3 * nb]
        cdef double t, a = 0.0, b = 0.0
        cdef int inc = 1, mi = <int> m, ni = <int> self.n, ldk = <int> self.n, ldh = <int> nb
        cdef double one = 1.0, zero = 0.0
        cdef char uplo = b'L', notrans = b'N'
        with nogil:
            dgemv(&notrans, &ni, &mi, &one, self.KP, &ldk, d, &inc, &zero, self.u, &inc)
            dsymv(&uplo, &mi, &one, self.KPP, &ldh, d, &inc, &zero, Kd, &inc)
            for j in range(m):
                a += self.beta_[j] * Kd[j]
                b += d[j] * Kd[j]
            t = self.line_search(a, b)
        return t

    def take_step(self, double t):
        """beta += t d, r += t u and, in one fused pass, the loss and the zones (19)-(20); returns
        (whether a zone changed, the number of points whose w_i (21) changed)."""
        cdef Py_ssize_t m = self.m, n = self.n, i, j, nch, nzc
        cdef double* d = &self.vm[self.nb]
        cdef double loss, ri
        cdef signed char zn, zo
        with nogil:
            for j in range(m):
                self.beta_[j] += t * d[j]
            # fused pass: residuals, zones, loss and the list of zone changes
            loss = 0.0
            nzc = 0
            for i in range(n):
                ri = self.r[i] + t * self.u[i]
                self.r[i] = ri
                loss += hloss_bf(ri, self.eps, self.delta)
                zn = zone_bf(ri, self.eps, self.delta)
                self.changed[nzc] = i             # kept only when the zone changed
                nzc += (zn != self.zone[i])
            self.loss = loss
            # new zones; the changes of W are compacted
            nch = 0
            for j in range(nzc):
                i = self.changed[j]
                zo = self.zone[i]
                zn = zone_bf(self.r[i], self.eps, self.delta)
                self.zone[i] = zn
                if (zo == 1 or zo == -1) != (zn == 1 or zn == -1):
                    self.changed[nch] = i
                    nch += 1
            self.nch = nch
        return nzc > 0, nch

    def update_factor(self, bint rank_one):
        """Apply the last step's change of W to H (dsyrk) and to L (rank-one updates with ``rank_one``,
        else dpotrf)."""
        cdef int info
        with nogil:
            info = self._update_factor(self.nch, rank_one)
        if info != 0:
            raise np.linalg.LinAlgError("the generalized Hessian (23) is not numerically positive definite")


def ssvr_srs(X, y, spec, n_basis, lam=1e-2, epsilon=0.1, delta=0.3, n_candidates=100, selection="srs",
             tol=0.0, max_newton=50, random_state=None, callback=None, n_jobs=None):
    """:func:`refimpl.ssvr.ssvr_srs` (SSVR-SRS, 002 Table 1, or RSVM) with the numerics of :class:`FastSSVROps`.

    ``n_jobs``: OpenMP threads of the candidate scoring (None: ``OMP_NUM_THREADS`` if set, else all
    CPUs, or 1 when the 1-minute load average is already >= the CPU count; -1: all CPUs); the
    results do not depend on it (each candidate's sums run on one thread).  On a machine already
    busy with other work, 1 can be faster: threads waiting at the end of a parallel region spin on
    the cores the others need.

    BLAS runs single-threaded during the fit: its calls here are small (m x m) or memory-bound
    (one pass over K_P), and threaded BLAS next to the OpenMP candidate scoring oversubscribes
    the cores (measured: 10-25x slower Newton steps on a loaded 2-core machine).
    """
    with blas_single_threaded():
        return _loop.ssvr_srs(X, y, spec, n_basis, lam=lam, epsilon=epsilon, delta=delta,
                              n_candidates=n_candidates, selection=selection, tol=tol, max_newton=max_newton,
                              random_state=random_state, callback=callback, n_jobs=n_jobs,
                              ops_class=FastSSVROps)


def ssvr_auto(X, y, spec, n_basis="auto", lam="auto", epsilon=0.0, delta=np.inf, n_candidates=100,
              selection="srs", tol=0.0, max_newton=50, random_state=None, callback=None, n_jobs=None):
    """:func:`refimpl.ssvr.ssvr_auto` (``n_basis`` and/or ``lam`` chosen on a hold-out) with the numerics of
    :class:`FastSSVROps` for the growth and the refit; BLAS single-threaded as in :func:`ssvr_srs`."""
    with blas_single_threaded():
        return _loop.ssvr_auto(X, y, spec, n_basis=n_basis, lam=lam, epsilon=epsilon, delta=delta,
                               n_candidates=n_candidates, selection=selection, tol=tol, max_newton=max_newton,
                               random_state=random_state, callback=callback, n_jobs=n_jobs,
                               ops_class=FastSSVROps)


def _threads(n_jobs):
    import os
    if n_jobs is None:
        env = int(os.environ.get("OMP_NUM_THREADS", "0") or 0)
        if env:
            return env
        cpus = os.cpu_count() or 1
        # CPUs already saturated by other work: OpenMP's spin-waiting team members then take time
        # from the fit's own thread (measured on a 2-core machine at load 5: candidate scoring 3x
        # slower with 2 threads than with 1, and no gain with OMP_WAIT_POLICY=passive), so use one
        try:
            busy = os.getloadavg()[0] >= cpus
        except (AttributeError, OSError):
            busy = False
        return 1 if busy else cpus
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs == 0 or n_jobs < -1:
        raise ValueError(f"n_jobs must be None, -1 or a positive integer, got {n_jobs!r}")
    return (os.cpu_count() or 1) if n_jobs == -1 else int(n_jobs)
