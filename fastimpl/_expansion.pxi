# Prediction: kernel expansions f(x) = sum_t coef_t k(sv_t, x) over many x (fastimpl._engine), the same
# values as refimpl.kernels.kernel_expansion.  The support vectors go into a _PointStore and each x's sum is
# a weighted row of it (_krows.pyx: weighted_rows): SIMD on coordinates (radial kernels fused, no row
# written), BLAS GEMM in blocks of GEMM_BLOCK points from d = 16 on, sparse-dense products for CSR input; in
# parallel over blocks of x from PARALLEL_MIN_WORK kernel evaluations on.  Independent of the core-set loop
# (MMDA's transform and SparseSVR's predictions use it too).
# screened_expansion: the same sums through the scans' screens, within a stated bound (the chunked fits'
# block scans, corevector.chunked.scans).

cdef object _expand(_PointStore store, const Queries* Q, const double* c, Py_ssize_t nx, bint parallel):
    """f(x_i) = sum_t c_t k(sv_t, x_i) for the nx query rows, GEMM_BLOCK rows a chunk, split over OpenMP
    threads (``parallel``).  On the BLAS path BLAS runs single-threaded meanwhile (inside a fit it is
    already, fit_meb): a threaded BLAS would run one small GEMM at a time on two threads that spin between
    calls -- with another process on the second core, 10x the single-threaded time (a CVR fit's training R^2
    on 2,000 rows against 4,947 support vectors at d = 32: 0.50 s against 0.04 s).  The sums are the same
    either way, bit for bit: a chunk's GEMM is the same call on one thread or another."""
    global BLAS_SERIAL
    if store.blas and BLAS_SERIAL == 0:
        with blas_single_threaded():
            BLAS_SERIAL += 1
            try:
                return _expand(store, Q, c, nx, parallel)
            finally:
                BLAS_SERIAL -= 1
    cdef cnp.ndarray[double, ndim=1, mode="c"] out = np.zeros(nx)
    cdef double* o = &out[0] if nx > 0 else NULL
    cdef Py_ssize_t nchunk = (nx + GEMM_BLOCK - 1) // GEMM_BLOCK, ch, lo, hi, failed = 0
    cdef Py_ssize_t bufsize = rows_scratch(store, Q, store.n, GEMM_BLOCK)
    cdef double* buf
    with nogil:
        for ch in prange(nchunk, schedule="static", use_threads_if=parallel and (not store.blas or BLAS_SERIAL > 0)):
            lo = ch * GEMM_BLOCK
            hi = min(lo + GEMM_BLOCK, nx)
            buf = <double*> malloc(bufsize * sizeof(double))
            if buf == NULL:
                failed += 1
            else:
                weighted_rows(store, Q, NULL, lo, hi, 0, c, False, True, &o[lo], GEMM_BLOCK, buf)
            free(buf)
    if failed:
        raise MemoryError("kernel_expansion: scratch of a block of rows")
    return out


def kernel_expansion(spec, SV, coef, X, Py_ssize_t min_parallel_work=-1):
    """f(x) = sum_t coef_t k(sv_t, x) for each row of X (same as refimpl.kernels.kernel_expansion).

    Parallel over X only from ``min_parallel_work`` kernel evaluations on (default: the engine's
    PARALLEL_MIN_WORK); the result does not depend on it, each row's sum is formed the same way.
    Sparse X (CSR) goes through :func:`_kernel_expansion_csr` (SV then converted to CSR: it is small).  A lookup
    kernel's expansion is the reference's (refimpl.kernels.lookup_expansion: the user's kernel values, by blocks,
    times coef)."""
    if spec.lookup:
        from refimpl.kernels import lookup_expansion
        return lookup_expansion(spec, SV, coef, X)
    if sp.issparse(X) or sp.issparse(SV):
        return _kernel_expansion_csr(spec, sp.csr_matrix(SV), coef, sp.csr_matrix(X), min_parallel_work)
    cdef const double[:, ::1] sv = np.ascontiguousarray(SV, dtype=np.float64)
    cdef const double[::1] c = np.ascontiguousarray(coef, dtype=np.float64)
    cdef const double[:, ::1] x = np.ascontiguousarray(X, dtype=np.float64)
    cdef Py_ssize_t nx = x.shape[0], ns = sv.shape[0], d = x.shape[1], t
    cdef Kern K = make_kern(spec, d)
    cdef _PointStore store
    cdef Queries Q
    if nx == 0 or ns == 0:
        return np.zeros(nx)
    store = _PointStore()
    store.setup(K, ns)
    for t in range(ns):
        store.put(t, &sv[t, 0])
    Q = dense_queries(&x[0, 0], nx, d)
    # small expansions (e.g. a 59-point sample) run serially: starting threads would cost more,
    # and far more on a loaded machine, where spin-waiting threads compete for the cores
    return _expand(store, &Q, &c[0], nx,
                   nx * ns >= (PARALLEL_MIN_WORK if min_parallel_work < 0 else min_parallel_work))


def _kernel_expansion_csr(spec, SV, coef, X, Py_ssize_t min_parallel_work=-1):
    """kernel_expansion of CSR rows X against CSR support vectors: the support vectors in a CSR point
    store, each row of X scattered into a per-thread dense d-vector (_krows.pyx), in nogil loops."""
    if X.shape[1] != SV.shape[1]:
        raise ValueError(f"X has {X.shape[1]} features, the support vectors {SV.shape[1]}")
    cdef const long long[::1] sp_ = np.ascontiguousarray(SV.indptr, dtype=np.int64)
    cdef const int[::1] si = np.ascontiguousarray(SV.indices, dtype=np.int32)
    cdef const double[::1] sv_ = np.ascontiguousarray(SV.data, dtype=np.float64)
    cdef const long long[::1] xp = np.ascontiguousarray(X.indptr, dtype=np.int64)
    xi_a = np.ascontiguousarray(X.indices, dtype=np.int32)
    xv_a = np.ascontiguousarray(X.data, dtype=np.float64)
    cdef const int[::1] xi_m
    cdef const double[::1] xv_m
    cdef const double[::1] c = np.ascontiguousarray(coef, dtype=np.float64)
    cdef Py_ssize_t nx = X.shape[0], ns = SV.shape[0], d = X.shape[1], i, t
    cdef Kern K = make_kern(spec, d)
    cdef _PointStore store
    cdef double xsq
    cdef Queries Q
    if nx == 0 or ns == 0:
        return np.zeros(nx)
    store = _PointStore()
    store.setup_csr(K, ns)
    for t in range(ns):
        xsq = csr_row_sq(&sv_[0], sp_[t], sp_[t + 1]) if sv_.shape[0] > 0 else 0.0
        store.put_csr(t, &si[sp_[t]] if si.shape[0] > 0 else NULL, &sv_[sp_[t]] if sv_.shape[0] > 0 else NULL,
                      sp_[t + 1] - sp_[t], xsq, rawdiag_from_sq(&K, xsq))
    norms = np.empty((2, nx))
    cdef double[:, ::1] nv = norms
    memset(&Q, 0, sizeof(Queries))
    Q.d = d
    Q.ptr = &xp[0]
    if xi_a.shape[0] > 0:
        xi_m = xi_a
        xv_m = xv_a
        Q.ind = &xi_m[0]
        Q.val = &xv_m[0]
    with nogil:
        for i in range(nx):
            nv[0, i] = csr_row_sq(Q.val, xp[i], xp[i + 1])
            nv[1, i] = rawdiag_from_sq(&K, nv[0, i])
    Q.sq = &nv[0, 0]
    Q.rd = &nv[1, 0]
    return _expand(store, &Q, &c[0], nx, nx * ns >= (PARALLEL_MIN_WORK if min_parallel_work < 0 else min_parallel_work))


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
