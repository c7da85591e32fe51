# Prediction: kernel expansions f(x) = sum_t coef_t k(sv_t, x) over many x (fastimpl._engine), the same
# values as refimpl.kernels.kernel_expansion.  The support vectors go into a _PointStore (_rows.pxi) and each
# x's sum runs through its rows: SIMD on coordinates (radial kernels fused, no row written), BLAS GEMM in
# blocks of GEMM_BLOCK points from d = 16 on, sparse-dense products for CSR input; in parallel over x from
# PARALLEL_MIN_WORK kernel evaluations on.  Independent of the core-set loop (MMDA's transform uses it too).

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
