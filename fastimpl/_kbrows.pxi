# The kernel block keyed by rows (fastimpl._engine; included by _kblock.pxi).
#
# Keyed by rows (row_block; the chunked fit's row buffer, corevector.chunked.ops): the engine's inputs are
# slots that take a new row of a larger X with every window of draws, and only the drawn rows are ever in
# memory, so no extension can reach every input.  The block then has one entry per row of that X (rows
# installed in a slot by _RowInstall: the slot's row and squared norm), and each row remembers how many
# core vectors its entries cover (rfill); a sampled scan first fills its candidates' rows up to the core
# set (kb_fill_rows: the rows sorted by what they miss, one GEMM of GEMM_BLOCK gathered rows against the
# core store's missing columns).  A row drawn again costs only the core vectors added since its last draw,
# so the kernel work is the in-memory block's -- each row's value against each core vector computed once
# -- where without the block every draw paid |S| d again (the fit draws every row about 4-5 times at
# 10^5 x 784).  The screen, its bound and the exact recomputation are those of _kblock.pxi.


from libc.stdlib cimport qsort


cdef int _cmp_key(const void* a, const void* b) noexcept nogil:
    cdef long long x = (<const long long*> a)[0], y = (<const long long*> b)[0]
    return (x > y) - (x < y)


cdef inline Py_ssize_t _key_index(long long key) noexcept nogil:
    return <Py_ssize_t> (key - ((key >> 32) << 32))


cdef bint _kb_fill_group(FastMEBOps ops, const long long* key, Py_ssize_t a, Py_ssize_t b, const double* X,
                         const Py_ssize_t* xi, const double* xsq, const Py_ssize_t* br, Py_ssize_t F) noexcept nogil:
    """The entries of the rows of candidates key[a:b] (sorted by what they cover: key = rfill << 32 | i;
    candidate i: coordinates X[xi[i] d ...], squared norm xsq[xi[i]], block row br[i]) for the core vectors
    [rfill, F): one GEMM of the gathered rows against the core store's columns from the smallest rfill.
    False when out of memory."""
    cdef Py_ssize_t nb = b - a, lo = <Py_ssize_t> (key[a] >> 32), w = F - lo, d = ops.d, j, i, r, t, f0
    cdef double* xs = <double*> malloc((nb * d + nb + nb * w) * sizeof(double))
    cdef double* sq
    cdef double* tmp
    if xs == NULL:
        return False
    sq = &xs[nb * d]
    tmp = &sq[nb]
    for j in range(nb):
        i = _key_index(key[a + j])
        memcpy(&xs[j * d], &X[xi[i] * d], d * sizeof(double))
        sq[j] = xsq[xi[i]]
    ops.core.block(xs, nb, d, sq, sq, lo, F, tmp, w)
    for j in range(nb):
        r = br[_key_index(key[a + j])]
        f0 = <Py_ssize_t> (key[a + j] >> 32)
        for t in range(f0, F):
            ops.kb.panels[t // KB_PANEL][r * KB_PANEL + t % KB_PANEL] = <float> tmp[j * w + t - lo]
    free(xs)
    return True


cdef Py_ssize_t _kb_grow(FastMEBOps ops) noexcept nogil:
    """Keyed by rows: panels for the core set as far as the budget allows; the core vectors the block holds."""
    while ops.kb.npanel * KB_PANEL < ops.size and _kb_new_panel(ops):
        pass
    ops.kb.filled = min(ops.size, ops.kb.npanel * KB_PANEL)
    return ops.kb.filled


cdef bint _kb_fill(FastMEBOps ops, const double* X, const Py_ssize_t* xi, const double* xsq, const Py_ssize_t* br,
                   Py_ssize_t n) noexcept nogil:
    """Keyed by rows: the entries of block rows br[0:n] (coordinates and squared norms as _kb_fill_group reads
    them) for the core vectors [0, filled): each row from the core vector its entries reach, in groups of
    GEMM_BLOCK rows of similar reach, in parallel where the work pays for a second thread.  A row given twice
    is filled once.  False when out of memory."""
    cdef Py_ssize_t F = ops.kb.filled, i, k = 0, r, g, ng, nfail = 0
    cdef long long work = 0
    cdef long long* key
    if n == 0 or F == 0:
        return True
    key = <long long*> malloc(n * sizeof(long long))
    if key == NULL:
        return False
    for i in range(n):
        r = br[i]
        if ops.kb.rfill[r] < F:
            key[k] = ((<long long> ops.kb.rfill[r]) << 32) | i
            work += F - ops.kb.rfill[r]
            ops.kb.rfill[r] = <int> F   # (claimed: a row given twice is filled once)
            k += 1
    qsort(key, k, sizeof(long long), _cmp_key)
    ng = (k + GEMM_BLOCK - 1) // GEMM_BLOCK
    for g in prange(ng, schedule="dynamic", use_threads_if=work * ops.d >= KB_PARALLEL_MIN_WORK and ng > 1):
        if not _kb_fill_group(ops, key, g * GEMM_BLOCK, min(k, (g + 1) * GEMM_BLOCK), X, xi, xsq, br, F):
            nfail += 1
    free(key)
    ops.kb.n_fill += work
    ops.n_eval += work
    return nfail == 0


cdef bint kb_fill_rows(FastMEBOps ops, const Py_ssize_t* slots, Py_ssize_t n) noexcept nogil:
    """Keyed by rows: the rows the inputs slots[0:n] hold, filled up to the core set as far as the budget
    allows (_kb_fill).  False when out of memory."""
    cdef Py_ssize_t i
    cdef Py_ssize_t* br
    cdef bint ok
    _kb_grow(ops)
    if n == 0:
        return True
    br = <Py_ssize_t*> malloc(n * sizeof(Py_ssize_t))
    if br == NULL:
        return False
    for i in range(n):
        br[i] = ops.kb.srow[slots[i]]
    ok = _kb_fill(ops, &ops.X[0, 0], slots, ops.kb.xsq, br, n)
    free(br)
    return ok


cdef bint _kb_tail(FastMEBOps ops, const double* x, const double* sq, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t F,
                   double* ka, double* s1) noexcept nogil:
    """Add to ka and s1 of the rows [lo, hi) of x (at most GEMM_BLOCK) their sums over the core vectors F ..
    beyond the block: one GEMM against the core store in double (_RowInstall.expansion's tail, a chunk of
    it per thread).  False when its scratch cannot be had."""
    cdef Py_ssize_t w = ops.size - F, i, t, d = ops.d
    cdef double k
    cdef double* tmp = <double*> malloc((hi - lo) * w * sizeof(double))
    if tmp == NULL:
        return False
    ops.core.block(&x[lo * d], hi - lo, d, &sq[lo], &sq[lo], F, ops.size, tmp, w)
    for i in range(hi - lo):
        for t in range(w):
            k = tmp[i * w + t]
            ka[lo + i] += ops.kb.coef[F + t] * k
            s1[lo + i] += ops.kb.cabsv[F + t] * k
    free(tmp)
    return True


@cython.final
cdef class _RowInstall:
    """``install(slots, rows)``: the engine's inputs ``slots`` now hold these rows of X (their coordinates
    are in place): the block's row of each slot and its squared norm (row_block)."""
    cdef FastMEBOps ops

    @property
    def fills(self):
        """The block's entries computed so far (rows x core vectors; each at most once)."""
        return int(self.ops.kb.n_fill)

    def expansion(self, X, rows):
        """(ka, err) for the rows ``rows`` of X (their coordinates: X, float64): ka_i = sum_t alpha_t s_t
        k(x_i, c_t) over the core set, within err of kernel_expansion's sums over the support -- the screened
        expansion of a chunked fit's full scans in this process (corevector.chunked.scans.scan_block).  The
        rows' block entries are filled first from these coordinates (a certificate fills every row), the core
        vectors beyond the block are summed in double; err covers the block's values (rho, kb_bound), the
        tail's and the exact path's roundings of the kernel values (the same bound) and of both sums."""
        cdef FastMEBOps ops = self.ops
        cdef cnp.ndarray[double, ndim=2, mode="c"] x = np.ascontiguousarray(X, dtype=np.float64)
        cdef cnp.ndarray[Py_ssize_t, ndim=1, mode="c"] r = np.ascontiguousarray(rows, dtype=np.intp)
        cdef Py_ssize_t n = x.shape[0], i, t, F, c, nb, w, nfail = 0, d = ops.d
        cdef cnp.ndarray[double, ndim=1, mode="c"] ka = np.zeros(n)
        cdef cnp.ndarray[double, ndim=1, mode="c"] s1 = np.zeros(n)
        cdef cnp.ndarray[double, ndim=1, mode="c"] sq = np.empty(n)
        cdef cnp.ndarray[Py_ssize_t, ndim=1, mode="c"] xi = np.arange(n, dtype=np.intp)
        cdef double smax = 0.0
        if x.shape[1] != d or r.shape[0] != n:
            raise ValueError("rows of the engine's width, one index each")
        if n and (r.min() < 0 or r.max() >= ops.kb.m):
            raise IndexError("row out of range")
        if n == 0 or ops.size == 0:
            return ka, 0.0
        with nogil:
            F = _kb_grow(ops)
            kb_weights(ops)
            for i in range(n):
                sq[i] = point_sq(&x[i, 0], d)
            if not _kb_fill(ops, &x[0, 0], &xi[0], &sq[0], &r[0], n):
                nfail = 1
            for t in range((F + KB_PANEL - 1) // KB_PANEL):
                cv_panel_sums(ops.kb.panels[t], KB_PANEL, &r[0], n, &ops.kb.coef[t * KB_PANEL],
                              &ops.kb.cabsv[t * KB_PANEL], min(KB_PANEL, F - t * KB_PANEL), &ka[0], &s1[0])
            if ops.size > F:   # the tail, in double: GEMM_BLOCK rows at a time against the core store
                # (in parallel over the chunks, as the in-memory full scans are: at 10^6 x 784 with 7,939 core
                # vectors, 128 of them in the block, the tail is nearly all of a certificate; each row's sum is
                # formed in the same order on any thread)
                w = ops.size - F
                nb = (n + GEMM_BLOCK - 1) // GEMM_BLOCK
                for c in prange(nb, schedule="dynamic", use_threads_if=n * w * d >= KB_PARALLEL_MIN_WORK and nb > 1):
                    if not _kb_tail(ops, &x[0, 0], &sq[0], c * GEMM_BLOCK, min(n, (c + 1) * GEMM_BLOCK), F,
                                    &ka[0], &s1[0]):
                        nfail += 1
                ops.n_eval += n * w
            for i in range(n):
                smax = max(smax, s1[i])
        if nfail:
            raise MemoryError("kernel block")
        return ka, ops.kb.rho * smax + 8.0 * DBL_EPSILON * (ops.size + 1) * ops.kb.cabs

    def partial_sums(self, rows):
        """(ka, s1, reach, rho, fixed): the rows ``rows`` of X summed from the block alone, without their
        coordinates (a full scan whose rows are on a cluster's workers: corevector.chunked.scans).  Row i's
        entries cover the core vectors [0, reach[i]); ka_i = sum_{t < reach_i} alpha_t s_t k_f(x_i, c_t), s1_i
        the same with |alpha_t s_t|, each value within rho of the exact path's (kb_bound).  The rest of the
        row's sum, over the core vectors from reach_i on (core order; those of weight 0 add nothing), is the
        caller's; ``fixed`` bounds the roundings of both sums, as in ``expansion``."""
        cdef FastMEBOps ops = self.ops
        cdef cnp.ndarray[Py_ssize_t, ndim=1, mode="c"] r = np.ascontiguousarray(rows, dtype=np.intp)
        cdef Py_ssize_t n = r.shape[0], i, j, f, F = ops.kb.filled
        cdef cnp.ndarray[double, ndim=1, mode="c"] ka = np.zeros(n)
        cdef cnp.ndarray[double, ndim=1, mode="c"] s1 = np.zeros(n)
        cdef cnp.ndarray[int, ndim=1, mode="c"] reach = np.zeros(n, dtype=np.intc)
        cdef double s[2]
        if n and (r.min() < 0 or r.max() >= ops.kb.m):
            raise IndexError("row out of range")
        if n == 0 or ops.size == 0:
            return ka, s1, reach, ops.kb.rho, 0.0
        with nogil:
            kb_weights(ops)
            for i in range(n):
                f = min(<Py_ssize_t> ops.kb.rfill[r[i]], F)
                reach[i] = <int> f
                s[0] = 0.0
                s[1] = 0.0
                for j in range((f + KB_PANEL - 1) // KB_PANEL):
                    cv_fdot2(&ops.kb.panels[j][r[i] * KB_PANEL], &ops.kb.coef[j * KB_PANEL],
                             &ops.kb.cabsv[j * KB_PANEL], min(KB_PANEL, f - j * KB_PANEL), s)
                ka[i] = s[0]
                s1[i] = s[1]
        return ka, s1, reach, ops.kb.rho, 8.0 * DBL_EPSILON * (ops.size + 1) * ops.kb.cabs

    def __call__(self, slots, rows, values=None):
        """Slots ``slots`` now hold the rows ``rows``; ``values`` (float32 or float64, one row each): their
        coordinates, copied into the engine's X here (converted to float64 as NumPy would), else they are in
        place.  One pass over each row for the copy and its squared norm."""
        cdef cnp.ndarray[Py_ssize_t, ndim=1, mode="c"] q = np.ascontiguousarray(slots, dtype=np.intp)
        cdef cnp.ndarray[Py_ssize_t, ndim=1, mode="c"] r = np.ascontiguousarray(rows, dtype=np.intp)
        cdef FastMEBOps ops = self.ops
        cdef Py_ssize_t i, e, n = q.shape[0], d = ops.d
        cdef const float[:, ::1] v32
        cdef const double[:, ::1] v64
        cdef double* dst
        cdef int kind = 0
        if r.shape[0] != n:
            raise ValueError("one row for each slot")
        for i in range(n):
            if not (0 <= q[i] < ops.kb.nslots and 0 <= r[i] < ops.kb.m):
                raise IndexError(f"slot {q[i]} or row {r[i]} out of range")
        if values is not None:
            a = np.asarray(values)
            if a.dtype != np.float32:
                a = np.asarray(a, dtype=np.float64)
            a = np.ascontiguousarray(a)
            if a.ndim != 2 or a.shape[0] != n or a.shape[1] != d:
                raise ValueError("values: one row of the engine's width for each slot")
            if a.dtype == np.float32:
                v32 = a
                kind = 1
            else:
                v64 = a
                kind = 2
        with nogil:
            for i in range(n):
                dst = <double*> &ops.X[q[i], 0]   # (the engine's X is the caller's writable row buffer)
                if kind == 1:
                    for e in range(d):
                        dst[e] = v32[i, e]
                elif kind == 2:
                    memcpy(dst, &v64[i, 0], d * sizeof(double))
                ops.kb.srow[q[i]] = r[i]
                ops.kb.xsq[q[i]] = point_sq(dst, d)


def row_block(FastMEBOps ops, Py_ssize_t m, double max_sq):
    """Turn on the scans' kernel block keyed by the rows of an X of m rows that the engine's inputs (slots)
    hold in turn (see the top of this file): the chunked fit's row buffer.  ``max_sq`` bounds every row's
    squared norm (the block's error bound, kb_bound).  Returns the installer (_RowInstall) to call whenever
    slots take new rows, or None where the block does not apply (as kb_setup decides, for m rows)."""
    cdef _KBlock kb = ops.kb
    cdef _RowInstall inst
    if kb.on or ops.sparse or ops.mirror or not k_is_gaussian(&ops.K) or KB_POLICY < 0 or m <= 0 or ops.m == 0:
        return None
    if KB_POLICY == 0 and (ops.d < BLAS_MIN_D or m * ops.d < KB_MIN_WORK):
        return None
    if m * KB_PANEL * sizeof(float) + m * sizeof(int) + ops.m * (sizeof(double) + sizeof(Py_ssize_t)) \
            > KB_BUDGET_SHARE * ops.cache.budget * sizeof(double):
        return None
    kb.xsq = <double*> calloc(ops.m, sizeof(double))
    kb.srow = <Py_ssize_t*> calloc(ops.m, sizeof(Py_ssize_t))
    kb.rfill = <int*> calloc(m, sizeof(int))
    if kb.xsq == NULL or kb.srow == NULL or kb.rfill == NULL:
        raise MemoryError("kernel block")
    kb.m = m
    kb.nslots = ops.m
    kb.rows = True
    kb_bound(ops, max_sq)
    kb.on = True
    ops.screens.fin_scale = _finish_scale(ops)
    inst = _RowInstall()
    inst.ops = ops
    return inst
