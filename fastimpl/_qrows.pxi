# The Q rows of new core vectors, and the gradient of a warm start (fastimpl._engine; FastMEBOps.add, .warm).
#
# A batch of new core vectors gets its rows over the whole core set at once: on the BLAS path (d >= BLAS_MIN_D)
# GEMMs of NEW_ROWS_BLOCK new points against the core store, on the coordinate path the rows in parallel where
# the cache holds the batch, or from the kernel block's extension where it computes them anyway; the cached
# rows of the old core vectors are extended by the new columns.  Each new vector's Q_kk and gradient come from
# its row (its weight is 0).  gradient_from_rows: 2 Q alpha - l again from the rows, after new weights.


cdef inline void row_stats(FastMEBOps ops, Py_ssize_t k, const double* r) noexcept nogil:
    """Q_kk and the gradient 2 Q_k. alpha - l_k of a new core vector k from its row."""
    cdef Py_ssize_t t
    cdef double ka = 0.0
    ops.Qd[k] = r[k]
    for t in range(k):
        ka += ops.alpha[t] * r[t]
    ops.grad[k] = 2.0 * ka - ops.l[k]


cdef inline void finish_qrow(FastMEBOps ops, Py_ssize_t k, Py_ssize_t lo, Py_ssize_t hi, double* r) noexcept nogil:
    """r[t] = Q[k, t] = s_k s_t (r[t] + beta_b) + delta_kt c for t in [lo, hi), r[t] holding k(x_k, x_t): the one
    finish of every path that computes Q rows (_fill_row, _cache_rows, _row_into)."""
    cdef Py_ssize_t t
    for t in range(lo, hi):
        r[t] = ops.Ss[k] * ops.Ss[t] * (r[t] + ops.label_bias)
    if lo <= k < hi:
        r[k] = r[k] + ops.cdiag(ops.S[k])


cdef int new_rows(FastMEBOps ops, Py_ssize_t k0, Py_ssize_t k1) noexcept nogil:
    """Q rows of the new core vectors [k0, k1) over the core set [0, k1): on the BLAS path GEMMs of the new
    points against the core store (level 3: the store is read once per block of NEW_ROWS_BLOCK new
    points, not once per row), the rows then cached; on the coordinate path the rows in parallel
    (_parallel_rows) where a batch is large (the rows the cache holds cached, the others only for their
    Q_kk and gradient), else one cached row at a time (qrow).
    Returns -2 when out of memory."""
    cdef Py_ssize_t k, nb = k1 - k0
    cdef double* tmp
    cdef double* r
    cdef int rc
    if not ops.core.blas or ops.sparse or nb < 2:
        rc = _parallel_rows(ops, k0, k1)
        if rc != 1:
            return rc
        for k in range(k0, k1):
            r = ops.qrow(k, -1)
            if r == NULL:
                return -2
            row_stats(ops, k, r)
        return 0
    if ops.kb.on and not ops.kb.full and not ops.kb.rows and k1 - ops.kb.filled >= KB_EXTEND_MIN:
        # the kernel block's extension computes the new rows' kernel values (_rows_from_block)
        tmp = <double*> malloc(nb * k1 * sizeof(double))
        if tmp == NULL:
            return -2
        if _rows_from_block(ops, k0, k1, tmp):
            _cache_rows(ops, k0, k1, k1, tmp)
            _extend_rows(ops, k0, k0, k1, k1, tmp)
            free(tmp)
            return 0
        free(tmp)
    return _blas_rows(ops, k0, k1)


cdef int _blas_rows(FastMEBOps ops, Py_ssize_t k0, Py_ssize_t k1) noexcept nogil:
    """The BLAS path of _new_rows, NEW_ROWS_BLOCK new points at a time: each block's kernel values against
    the whole core set in one scratch of NEW_ROWS_BLOCK x k1 doubles (a block's GEMM split over column
    chunks in parallel where the work pays for a second thread), its rows cached, and the cached rows of
    the old core vectors extended by the block's columns.  A scratch for the whole batch was as large as
    the rows themselves: seeding puma32h's 5,749 core vectors wrote 265 MB of fresh pages twice."""
    cdef Py_ssize_t b0, b1, nbb, c, nchunk, nmax = min(k1 - k0, NEW_ROWS_BLOCK)
    cdef double* tmp = <double*> malloc(nmax * k1 * sizeof(double))
    if tmp == NULL:
        return -2
    nchunk = (k1 + NEW_ROWS_STEP - 1) // NEW_ROWS_STEP
    b0 = k0
    while b0 < k1:
        b1 = min(b0 + NEW_ROWS_BLOCK, k1)
        nbb = b1 - b0
        # columns in chunks, in parallel where the work pays for a second thread (a batch of 128 core
        # vectors against 2,000 at d = 784 is 2e8 multiply-adds)
        for c in prange(nchunk, schedule="dynamic",
                        use_threads_if=nbb * k1 * ops.d >= KB_PARALLEL_MIN_WORK and nchunk > 1):
            ops.core.block(&ops.core.data[b0 * ops.d], nbb, ops.d, &ops.core.sq[b0], &ops.core.rd[b0],
                            c * NEW_ROWS_STEP, min((c + 1) * NEW_ROWS_STEP, k1), &tmp[c * NEW_ROWS_STEP], k1)
        _cache_rows(ops, b0, b1, k1, tmp)
        _extend_rows(ops, k0, b0, b1, k1, tmp)
        ops.n_eval += nbb * k1
        b0 = b1
    free(tmp)
    return 0


cdef void _cache_rows(FastMEBOps ops, Py_ssize_t b0, Py_ssize_t b1, Py_ssize_t k1, double* tmp) noexcept nogil:
    """The new core vectors [b0, b1) from their kernel values tmp[(k - b0) k1 + t] (t < k1): Q's entries, their
    Q_kk and gradient, and their rows cached."""
    cdef Py_ssize_t k, lo
    cdef double* row
    cdef double* r
    for k in range(b0, b1):
        row = &tmp[(k - b0) * k1]
        finish_qrow(ops, k, 0, k1, row)
        row_stats(ops, k, row)
        r = ops.cache.slot(k, k1, -1, &lo)
        if r != NULL:  # (else the row is computed again when a solve needs it)
            memcpy(r, row, k1 * sizeof(double))
            ops.cache.rlen[k] = k1


cdef inline void _row_into(FastMEBOps ops, Py_ssize_t k, Py_ssize_t lo, Py_ssize_t hi, double* r) noexcept nogil:
    """r[t] = Q[k, t] for lo <= t < hi on the coordinate path of dense inputs: the values _fill_row gives (the
    vector rows compute each value alone, wherever a row or its chunk starts; the two-thread SMO computes a
    row's halves by it)."""
    ops.core.row(lo, hi, &ops.X[ops.pz(ops.S[k]), 0], ops.core.sq[k], ops.core.rd[k], &r[lo])
    finish_qrow(ops, k, lo, hi, r)


cdef inline bint _rows_by_range(FastMEBOps ops) noexcept nogil:
    """_row_into gives the rows' values: dense inputs, a kernel of their own rows (a callable's columns need the
    GIL), the coordinate path (a range of a SIMD row computes each entry as the whole row does; BLAS's GEMV
    might not)."""
    return not (ops.sparse or ops.K.lk != NULL or ops.core.blas)


cdef inline bint _rows_by_thread(FastMEBOps ops, Py_ssize_t nrows, Py_ssize_t k1) noexcept nogil:
    """Rows of this batch may be computed in parallel, each in a thread of its own (_row_into): where
    _rows_by_range holds and there is enough work for a second thread."""
    return _rows_by_range(ops) and nrows * k1 * ops.d >= ROW_PARALLEL_MIN_WORK


cdef int _parallel_rows(FastMEBOps ops, Py_ssize_t k0, Py_ssize_t k1) noexcept nogil:
    """The coordinate path's rows of the new core vectors [k0, k1) over [0, k1), in parallel over the rows, each
    computed, finished and its gradient taken in a thread of its own.  Only for dense inputs of a kernel of
    their own rows; returns 1 where it does not apply (the caller computes the rows one at a time), 0 when
    done, -2 when out of memory.  CASP's pilot seeds 6,551 core vectors at d = 9: 43 M kernel values.

    The cache keeps the last rows of the batch that the budget holds beside what else it charges (older rows
    are evicted for them first, as one row at a time would): their slots are taken first (one thread), so that
    no thread's buffer is evicted meanwhile.  The batch's earlier rows, which it would evict again before any
    solve read them, are computed in a scratch row per thread and only their Q_kk and gradient kept: CASP's
    seed of 20,934 core vectors, where 1,000 MB holds about 6,000 rows, computed every row into the cache one
    at a time (its parallel chunks inside each row), and a budget of 3,000 MB also paid the page faults of
    3 GB written once."""
    cdef Py_ssize_t k, lo, nb = k1 - k0, per, room, nfit, kc, failed = 0
    cdef double** rows
    cdef double* buf = NULL
    if not _rows_by_thread(ops, nb, k1):
        return 1
    per = ops.cache.row_cap(k1)
    room = ops.cache.budget - (ops.cache.held() - ops.cache.used)   # the rows' share: older rows may go
    nfit = min(nb, max(room, 0) // per)
    kc = k1 - nfit
    if kc > k0 and ops.defer_stats and ops.core.kind == ROWS_SIMD and k_is_radial(&ops.K):
        # add_warm: warm takes every gradient from the rows next; Q_kk is finish_qrow's on k(x_k, x_k) = 1
        # (k_diag), the value the row's own entry holds on this path (a distance of exact zeros, exp(0) = 1)
        for k in range(k0, kc):
            ops.Qd[k] = ops.Ss[k] * ops.Ss[k] * (k_diag(&ops.K, ops.core.rd[k]) + ops.label_bias) \
                + ops.cdiag(ops.S[k])
            ops.grad[k] = 0.0
        nb = k1 - kc
    elif kc > k0:
        with cython.parallel.parallel():
            buf = <double*> malloc(k1 * sizeof(double))
            for k in prange(k0, kc, schedule="dynamic", chunksize=16):
                if buf == NULL:
                    failed += 1
                else:
                    _row_into(ops, k, 0, k1, buf)
                    row_stats(ops, k, buf)
            free(buf)
        if failed:
            return -2
    if nfit > 0:
        rows = <double**> malloc(nfit * sizeof(double*))
        if rows == NULL:
            return -2
        for k in range(kc, k1):
            rows[k - kc] = ops.cache.slot(k, k1, -1, &lo)
            if rows[k - kc] == NULL:
                free(rows)
                return -2
        for k in prange(kc, k1, schedule="dynamic", chunksize=16):
            _row_into(ops, k, 0, k1, rows[k - kc])
            row_stats(ops, k, rows[k - kc])
        for k in range(kc, k1):
            ops.cache.rlen[k] = k1
        free(rows)
    ops.n_eval += nb * k1
    return 0


cdef bint _rows_from_block(FastMEBOps ops, Py_ssize_t k0, Py_ssize_t k1, double* tmp) noexcept nogil:
    """The kernel values of the new core vectors' rows, tmp[(k - k0) k1 + t] = k(c_k, c_t), taken from
    the kernel block's extension by them (_kb_harvest): it computes k(x_p, c_k) for every input p, the
    core vectors' own inputs among them, so the GEMM of the new points against the core store is saved
    (Fashion-MNIST T-shirt/shirt: a tenth of the fit).  Only for a batch the next scan would extend the
    block for anyway (KB_EXTEND_MIN core vectors out of it); False when the extension did not reach
    them (the block's budget), and the caller computes the rows itself."""
    if not ops.kb.on or ops.kb.full or ops.kb.rows or k1 - ops.kb.filled < KB_EXTEND_MIN:
        return False
    ops.kb.hv = tmp
    ops.kb.hv_k0 = k0
    ops.kb.hv_k1 = k1
    kb_extend(ops, k1)
    ops.kb.hv = NULL
    return ops.kb.filled >= k1


cdef void _extend_rows(FastMEBOps ops, Py_ssize_t k0, Py_ssize_t b0, Py_ssize_t b1, Py_ssize_t k1,
                       const double* tmp) noexcept nogil:
    """The cached rows of the old core vectors t < k0 that end at b0, extended by the columns [b0, b1) of the
    new core vectors from their rows (Q is symmetric: Q[t, k] = tmp[(k - b0) k1 + t]) instead of one GEMV
    of the new points per row; the LRU order is left as it is.  A row without room for all k1 columns is
    regrown while the budget allows it without evicting: else the solver's next read of it would compute the
    missing columns one GEMV at a time, each streaming the core store through memory (profiled on
    Fashion-MNIST T-shirt/shirt: a fifth of the fit)."""
    cdef Py_ssize_t t, k
    cdef double* r
    for t in range(k0):
        if ops.cache.rows[t] == NULL or ops.cache.rlen[t] != b0 or not ops.cache.regrow(t, k1):
            continue
        r = ops.cache.rows[t]
        for k in range(b0, b1):
            r[k] = tmp[(k - b0) * k1 + t]
        ops.cache.rlen[t] = b1


cdef int gradient_from_rows(FastMEBOps ops) noexcept nogil:
    """grad_t = 2 (Q alpha)_t - l_t for every core vector, from its cached row (computed where it is not): after
    FastMEBOps.warm set new weights.  Returns -2 when out of memory.

    Where rows may be computed by thread (_rows_by_thread), in parallel over the core vectors, and a row the
    cache lacks is computed in a scratch row of the thread's and not cached: the pass reads every row once,
    and through an LRU cache smaller than the core set's rows each row computed into it would evict one that
    the pass reads later (CASP's warm start of 20,934 core vectors computed all of them again, one at a
    time).  The sums are the serial pass's, term by term in the same order."""
    cdef Py_ssize_t t, j, n = ops.size, failed = 0
    cdef double s
    cdef double* r
    cdef double* buf = NULL
    if not _rows_by_thread(ops, n, n):
        for t in range(n):
            r = ops.qrow(t, -1)
            if r == NULL:
                return -2
            s = 0.0
            for j in range(n):
                s += r[j] * ops.alpha[j]
            ops.grad[t] = 2.0 * s - ops.l[t]
        return 0
    with cython.parallel.parallel():
        buf = <double*> malloc(n * sizeof(double))
        for t in prange(n, schedule="dynamic", chunksize=16):
            if ops.cache.cached(t, n):
                r = ops.cache.rows[t]
            elif buf != NULL:
                _row_into(ops, t, 0, n, buf)
                r = buf
            else:
                r = NULL
            if r == NULL:
                failed += 1
            else:
                s = 0.0
                for j in range(n):
                    s = s + r[j] * ops.alpha[j]
                ops.grad[t] = 2.0 * s - ops.l[t]
        free(buf)
    ops.n_eval += n * n
    return -2 if failed else 0


def _simplex_weights(alpha, Py_ssize_t size):
    """alpha as float64 of length ``size``, finite, nonnegative, scaled to sum 1 (ValueError otherwise)."""
    a = np.array(alpha, dtype=np.float64, copy=True).reshape(-1)
    if a.shape[0] != size:
        raise ValueError(f"warm: {a.shape[0]} weights for a core set of {size}")
    if not np.all(np.isfinite(a)) or np.any(a < 0) or not a.sum() > 0:
        raise ValueError("warm: the weights must be finite, nonnegative and not all zero")
    return a / a.sum()
