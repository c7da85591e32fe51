# Prediction: kernel expansions f(x) = sum_t coef_t k(sv_t, x) over many x (fastimpl._engine), the same
# values as refimpl.kernels.kernel_expansion.  The support vectors go into a _PointStore (_rows.pxi) and each
# x's sum runs through its rows: SIMD on coordinates (radial kernels fused, no row written), BLAS GEMM in
# blocks of GEMM_BLOCK points from d = 16 on, sparse-dense products for CSR input; in parallel over x from
# PARALLEL_MIN_WORK kernel evaluations on.  Independent of the core-set loop (MMDA's transform uses it too).
# screened_expansion: the same sums through the scans' screens, within a stated bound (the chunked fits'
# block scans, corevector._chunked_scans).

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
    cdef Py_ssize_t nx = x.shape[0], ns = sv.shape[0], d = x.shape[1], i, t, blk, nblk, failed = 0
    cdef cnp.ndarray[double, ndim=1, mode="c"] out = np.zeros(nx)
    cdef double[::1] o = out
    cdef Kern K = make_kern(spec, d)
    cdef _PointStore store
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
            # one GEMM per block of test points.  Outside a fit BLAS threads by itself, so the blocks go one
            # at a time; inside one (fit_meb: BLAS single-threaded, e.g. a chunked fit's full scans of a block)
            # they are split over OpenMP threads -- the same sums, bit for bit.  (Threaded BLAS there ran one
            # small GEMM at a time on two threads that spin between calls.)
            for blk in prange(nblk, schedule="dynamic", use_threads_if=parallel and BLAS_SERIAL > 0):
                failed += _expansion_block(store, &x[0, 0], nx, d, blk, &K, &c[0], ns, &o[0])
    if failed:
        raise MemoryError("kernel_expansion: scratch of a block of rows")
    return out


cdef int _expansion_block(_PointStore store, const double* x, Py_ssize_t nx, Py_ssize_t d, Py_ssize_t blk,
                          Kern* K, const double* c, Py_ssize_t ns, double* o) noexcept nogil:
    """o[i] = sum_t c_t k(sv_t, x_i) for the rows i of block ``blk`` (GEMM_BLOCK rows): one GEMM.  Returns 1
    when out of memory, else 0."""
    cdef Py_ssize_t i, nb = min(GEMM_BLOCK, nx - blk * GEMM_BLOCK), r0 = blk * GEMM_BLOCK
    cdef double* buf = <double*> malloc((GEMM_BLOCK * ns + 2 * GEMM_BLOCK) * sizeof(double))
    cdef double* xsq
    cdef double* xrd
    if buf == NULL:
        return 1
    xsq = &buf[GEMM_BLOCK * ns]
    xrd = &xsq[GEMM_BLOCK]
    for i in range(nb):
        xsq[i] = point_sq(&x[(r0 + i) * d], d)
        xrd[i] = point_rawdiag(K, &x[(r0 + i) * d])
    store.block(&x[r0 * d], nb, d, xsq, xrd, 0, ns, buf, ns)
    for i in range(nb):
        o[r0 + i] = cv_dot4(c, &buf[i * ns], ns)
    free(buf)
    return 0


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


def screened_expansion(spec, SV, coef, X, lo=None, hi=None):
    """kernel_expansion's sums through the engine's screens, for a full scan that needs exact values only
    near its decisions (corevector._chunked_scans): returns (values, err) with every value within ``err``
    of kernel_expansion's for that row; ``err`` < 0 when no screen applies (the values are then
    kernel_expansion's own).

    The screens are the in-memory scans' (_screens.pxi): the Taylor expansion of the Gaussian kernel
    where it costs less than the sums it replaces, else the single-precision exp, both on the
    coordinate layout (d < 16) and centred on the box [lo, hi] (default: the bounding box of X and SV; a
    given box must hold every row of both).  ``err`` is the screen's
    bound per term times sum |coef|, plus the round-off of the exact path's sum of nsv terms
    (_Screens.err without its finishing terms, which the caller adds for its own arithmetic)."""
    cdef const double[:, ::1] sv = np.ascontiguousarray(SV, dtype=np.float64)
    cdef const double[::1] c = np.ascontiguousarray(coef, dtype=np.float64)
    cdef const double[:, ::1] x = np.ascontiguousarray(X, dtype=np.float64)
    cdef Py_ssize_t nx = x.shape[0], ns = sv.shape[0], d = x.shape[1], i, t
    cdef Kern K = make_kern(spec, d)
    cdef _PointStore store
    cdef double term, cabs = 0.0
    cdef _Screens screens = _Screens()
    cdef int screen
    if sp.issparse(X) or sp.issparse(SV) or nx == 0 or ns == 0 or d >= BLAS_MIN_D or not k_is_radial(&K):
        return kernel_expansion(spec, SV, coef, X), -1.0
    if lo is None or hi is None:
        lo = np.minimum(np.asarray(X).min(axis=0), np.asarray(SV).min(axis=0))
        hi = np.maximum(np.asarray(X).max(axis=0), np.asarray(SV).max(axis=0))
    cdef const double[::1] blo = np.ascontiguousarray(lo, dtype=np.float64)
    cdef const double[::1] bhi = np.ascontiguousarray(hi, dtype=np.float64)
    if blo.shape[0] != d or bhi.shape[0] != d:
        raise ValueError(f"the box has {blo.shape[0]} and {bhi.shape[0]} coordinates, X {d}")
    store = _PointStore()
    store.setup(K, ns)
    store.enable_f32(&blo[0], &bhi[0])
    store.enable_taylor(&blo[0], &bhi[0])
    for t in range(ns):
        store.put(t, &sv[t, 0])
        cabs += fabs(c[t])
    # the full scans' choice of screen (a fresh _Screens: this call's candidates are all it expects)
    screen = screens.choose(store, ns, nx, False)
    if screen == SCREEN_NONE:
        return kernel_expansion(spec, SV, coef, X), -1.0
    cdef cnp.ndarray[double, ndim=1, mode="c"] out = np.zeros(nx)
    cdef double[::1] o = out
    cdef bint parallel = nx * ns >= PARALLEL_MIN_WORK
    with nogil:
        screens.prepare(screen, store, &c[0])
        if screen == SCREEN_TAYLOR:
            store.taylor_sum(&x[0, 0], d, NULL, nx, &o[0])
            term = store.taylor_term_err()
        else:
            for i in prange(nx, schedule="static", use_threads_if=parallel):
                o[i] = store.weighted_screen(&x[i, 0], &c[0])
            term = store.screen_term_err()
    return out, cabs * (term + 4.0 * DBL_EPSILON * (ns + 1))
