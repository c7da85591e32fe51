# Test hooks of fastimpl._engine: the SIMD kernels of _simd.h and the support store's two screens
# (_krows.pyx, _screens.pxi) called directly on given points, so that tests/test_kernels.py can check their
# values and error bounds without a fit.  Nothing in the engine calls them.

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


def _radial_row_at(int level, double[:, ::1] C, double[::1] x, double gamma, bint laplace, Py_ssize_t lo=0):
    """Test hook: the row exp(-gamma r_j) of the stored points j in [lo, n) of C (d x n, coordinate-major), by the
    copy of cv_radial_row of ``level`` (0 portable, 1 AVX2, 2 AVX-512; one above SIMD_LEVEL runs the dispatcher's).
    A row must not depend on where it starts: the engine extends cached rows from their computed length."""
    cdef Py_ssize_t d = C.shape[0], n = C.shape[1]
    if x.shape[0] != d or not 0 <= lo <= n:
        raise ValueError("_radial_row_at: x must have C.shape[0] entries and 0 <= lo <= C.shape[1]")
    row = np.zeros(n - lo)
    cdef double[::1] out = row
    if n > lo:
        with nogil:
            cv_radial_row_at(level, &C[0, lo], n, n - lo, d, &x[0], -gamma, laplace, &out[0])
    return row


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


def _block_sums(FastMEBOps ops, rows):
    """Test hook for the kernel block (_kblock.pxi) at the current centre of a fitted ``ops``: for the
    input rows given, the block's screened sum_{t in block} alpha_t s_t k(x, c_t), its error scale
    sum_{t in block} |alpha_t s_t| k_f(x, c_t), the same sum in double (kb_exact) and rho, so that a test
    can check |screened - exact| <= rho * scale (None when the scans do not use the block)."""
    cdef cnp.ndarray[Py_ssize_t, ndim=1, mode="c"] r = np.ascontiguousarray(rows, dtype=np.intp)
    cdef Py_ssize_t n = r.shape[0], i, size = ops.size
    cdef double s2[2]
    if not ops.kb.on or n == 0:
        return None
    scr, scale, ext = np.empty(n), np.empty(n), np.zeros(n)
    cdef double[::1] a = scr, b = scale, c = ext
    cdef double* buf = <double*> malloc(_kb_bufsize(ops) * sizeof(double))
    if buf == NULL:
        raise MemoryError("scratch")
    with nogil:
        kb_extend(ops, size)
        kb_weights(ops)
        for i in range(n):
            ops.kb.sum_row(r[i], s2)
            a[i] = s2[0]
            b[i] = s2[1]
        ops.size = ops.kb.filled  # the exact sum over the block's core vectors only
        kb_exact(ops, &r[0], n, 0, &c[0], buf)
        ops.size = size
    free(buf)
    return scr, scale, ext, ops.kb.rho


def _set_blas_serial(int serial):
    """Set whether BLAS counts as single-threaded (what fit_meb sets while a fit runs: the scans and
    kernel_expansion then split their GEMM blocks over OpenMP threads); returns the old count (tests)."""
    global BLAS_SERIAL
    old = BLAS_SERIAL
    BLAS_SERIAL = serial
    return old


def _debug_state(FastMEBOps ops):
    """(S, alpha, grad, Qd, l, cached rows {t: row[:rlen]}) of ``ops``, for the tests of prune."""
    cdef Py_ssize_t t, j
    rows = {}
    for t in range(ops.size):
        if ops.cache.rows[t] != NULL:
            rows[t] = np.array([ops.cache.rows[t][j] for j in range(ops.cache.rlen[t])])
    return (np.array([ops.S[t] for t in range(ops.size)]), np.array([ops.alpha[t] for t in range(ops.size)]),
            np.array([ops.grad[t] for t in range(ops.size)]), np.array([ops.Qd[t] for t in range(ops.size)]),
            np.array([ops.l[t] for t in range(ops.size)]), rows)
