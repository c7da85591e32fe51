# The scans of the core-set loop (fastimpl._engine; 001 eq. (12)): distances from the ball's centre to
# candidates, and what the driver reads off them.
#
# * furthest_point: the initialisation's argmax of ||phi~(z) - phi~(z_l)||^2 + Delta_l over a sample;
# * scan_sample: d^2 of a sample of candidates and its furthest one (the sampled iterations);
# * full_scan: every augmented point in chunks of SCAN_CHUNK -- the furthest one, and the top-k beyond a
#   threshold (the violators of the confirmations and the certificate); CVR's mirrored halves share each
#   input's kernel row.  One skeleton for both paths: the support's rows below, the kernel block's
#   chunks (kb_chunk, _kblock.pxi) on high-dimensional data.
#
# A full scan of CVR's mirrored points takes the sums of the inputs that are in the core set from the core-set
# QP's gradient instead (known_sums): noisy regression sets end with half their inputs or more in the core set.
#
# Each candidate costs sum_t alpha_t s_t k(x_t, x) over the support, packed by pack_support into
# _Support (its store's weighted rows, _krows.pyx, compute the sums: SIMD on coordinates, BLAS GEMM in
# blocks of GEMM_BLOCK candidates from d = 16 on, sparse-dense for CSR input), then _finish_d2 turns it into
# d^2 - c0.  On the coordinate path the sums may run through a screen first (_screens.pxi).  Scans run
# under nogil, in parallel over chunks of candidates (OpenMP prange) where the work pays for the threads.

@cython.final
cdef class _Support:
    """The support (alpha > 0) packed for the scans: its points and their coefficients alpha_t s_t."""
    cdef _PointStore store          # coordinates (or CSR rows) of the support vectors
    cdef double* coef               # alpha_t s_t
    cdef Py_ssize_t n, cap
    cdef double csum                # sum_t alpha_t s_t
    cdef double cabs                # sum_t |alpha_t s_t| (the screening kernel's error scale)
    cdef bint dirty                 # alpha changed since the last pack
    cdef _Owned own

    def __cinit__(self):
        owned_add(&self.own, <void**> &self.coef, 0)
        self.store = _PointStore()
        self.dirty = True

    def __dealloc__(self):
        owned_free(&self.own)

    cdef void reserve(self, Py_ssize_t n) except *:
        cdef Py_ssize_t cap
        cdef double* p
        if n > self.cap:
            cap = max(2 * self.cap, n, 64)
            p = <double*> realloc(self.coef, cap * sizeof(double))
            if p == NULL:  # the old buffer stays owned (and freed by owned_free)
                raise MemoryError("support arrays")
            self.coef = p
            self.cap = cap
        self.store.reserve(n)


cdef inline void _topk_insert(double* vals, Py_ssize_t* keys, Py_ssize_t* cnt, Py_ssize_t k, double v,
                              Py_ssize_t z) noexcept nogil:
    """Keep the k largest (v, z) -- larger v first, ties to the lower z -- in vals/keys[0:cnt]."""
    cdef Py_ssize_t p = cnt[0]
    if p == k:
        if v < vals[k - 1] or (v == vals[k - 1] and z > keys[k - 1]):
            return
        p = k - 1
    else:
        cnt[0] = p + 1
    while p > 0 and (vals[p - 1] < v or (vals[p - 1] == v and keys[p - 1] > z)):
        vals[p] = vals[p - 1]
        keys[p] = keys[p - 1]
        p -= 1
    vals[p] = v
    keys[p] = z


cdef object furthest_point(FastMEBOps ops, Py_ssize_t z, idx):
    """Initialisation: argmax over idx of ||phi~(z) - phi~(z_l)||^2 + Delta_l (refimpl.driver.initial_pair)."""
    cdef cnp.ndarray[Py_ssize_t, ndim=1, mode="c"] a = np.ascontiguousarray(idx, dtype=np.intp)
    cdef Py_ssize_t cnt = a.shape[0], p, l, best = -1
    cdef double daz = ops.rawdiag(z), dal, v, best_v = -INFINITY, kzz, sz = ops.zsign(z), sl, kv
    cdef const double* xz = NULL
    cdef const double* colz = NULL
    cdef Py_ssize_t q
    if ops.K.lk != NULL and ops.K.lk.gram == NULL:  # a callable: the column of z, k(x_l, x_z) at l's row
        colz = ops.lookup.column(<Py_ssize_t> ops.X[ops.pz(z), 0], -1)
    with nogil:
        kzz = k_diag(&ops.K, daz) + ops.label_bias + ops.cdiag(z)
        if ops.sparse:
            xz = ops._dense_input(ops.pz(z), ops.xd)
        for p in range(cnt):
            l = a[p]
            dal = ops.rawdiag(l)
            sl = ops.zsign(l)
            if ops.sparse:
                q = ops.pz(l)
                kv = csr_dot_dense(xz, ops.Xind, ops.Xval, ops.Xptr[q], ops.Xptr[q + 1])
                dots_to_kernel(&ops.K, &kv, 1, ops.Xsq[ops.pz(z)], &ops.Xsq[q], daz, &dal)
            elif colz != NULL:
                kv = colz[ops.pz(l)]
            else:
                kv = k_eval(&ops.K, &ops.X[ops.pz(z), 0], &ops.X[ops.pz(l), 0], daz, dal)
            v = sz * sl * (kv + ops.label_bias)
            if l == z:
                v += ops.cdiag(z)
            v = kzz - 2.0 * v + (ops.point_ldiag(l, dal) + ops.c0)
            if v > best_v:
                best_v = v
                best = l
        if ops.sparse:
            ops._release_input(ops.pz(z), ops.xd)
    ops.n_eval += cnt
    return best


cdef void pack_support(FastMEBOps ops) except *:
    """The support (alpha > 0) packed for the scans: coordinates and alpha_t s_t."""
    cdef _Support sup = ops.sup
    cdef Py_ssize_t t, k = 0, nsv = ops.count_support()
    sup.reserve(nsv)
    sup.store.n = 0
    sup.csum = 0.0
    sup.cabs = 0.0
    for t in range(ops.size):
        if ops.alpha[t] > 0:
            ops._put_input(sup.store, k, ops.pz(ops.S[t]))
            sup.coef[k] = ops.alpha[t] * ops.Ss[t]
            sup.csum += sup.coef[k]
            sup.cabs += fabs(sup.coef[k])
            k += 1
    sup.n = nsv
    sup.dirty = False
    sup.store.tvalid = False  # new weights (the puts above cleared it too)
    ops.screens.new_support()


cdef inline double _finish_d2(FastMEBOps ops, Py_ssize_t z, double ka, double marg) noexcept nogil:
    """d^2(z) - c0 from ka = sum_t alpha_t s_t k(x_t, x_z): marg - 2 (K~alpha)_z + l_z - c0."""
    cdef double kal = ops.zsign(z) * (ka + ops.label_bias * ops.sup.csum)
    cdef Py_ssize_t p
    if ops.diag_add != 0.0 or ops.pdiag != NULL:
        p = _bsearch(ops.czs, ops.size, z)
        if p >= 0:
            kal += ops.alpha[ops.czp[p]] * ops.cdiag(z)
    return marg - 2.0 * kal + ops.point_ldiag(z, ops.rawdiag(z))


cdef inline void _kalpha(FastMEBOps ops, Py_ssize_t lo, Py_ssize_t hi, const Py_ssize_t* idx, double* out,
                         double* buf) noexcept nogil:
    """out[p - lo] = sum_t alpha_t s_t k(x_t, x_p(z)) for the candidates z = idx[p] (idx NULL: the
    input rows p themselves), p in [lo, hi): the support store's weighted rows (_krows.pyx: the SIMD rows
    fused with the sum, GEMM_BLOCK candidates a GEMM on the BLAS path, scattered CSR rows).  ``buf``:
    _bufsize(ops) doubles.  A callable's sums were computed before the scan (lookup_sums, by position or row p)."""
    cdef Py_ssize_t p
    if ops.K.lk != NULL and ops.K.lk.sums != NULL:
        for p in range(lo, hi):
            out[p - lo] = ops.K.lk.sums[p]
        return
    weighted_rows(ops.sup.store, &ops.Q, idx, lo, hi, 0, ops.sup.coef, False, True, out, GEMM_BLOCK, buf)


cdef inline void _kalpha_any(FastMEBOps ops, Py_ssize_t lo, Py_ssize_t hi, const Py_ssize_t* idx, double* out,
                             double* buf, int screen) noexcept nogil:
    """_kalpha, through the screen ``screen`` (SCREEN_*; the screens run on the coordinate path only)."""
    cdef Py_ssize_t p, b, nb
    cdef Py_ssize_t rows[64]
    if screen == SCREEN_NONE:
        _kalpha(ops, lo, hi, idx, out, buf)
    elif screen == SCREEN_FLOAT:
        for p in range(lo, hi):
            out[p - lo] = ops.sup.store.weighted_screen(&ops.X[ops.pz(idx[p]) if idx != NULL else p, 0],
                                                        ops.sup.coef)
    elif idx == NULL:
        ops.sup.store.taylor_sum(&ops.X[lo, 0], ops.d, NULL, hi - lo, out)
    else:
        p = lo
        while p < hi:
            nb = min(64, hi - p)
            for b in range(nb):
                rows[b] = ops.pz(idx[p + b])
            ops.sup.store.taylor_sum(&ops.X[0, 0], ops.d, rows, nb, &out[p - lo])
            p += nb


cdef inline double _exact_ka(FastMEBOps ops, Py_ssize_t q) noexcept nogil:
    """sum_t alpha_t s_t k(x_t, x_q) in double (the coordinate path: no scratch needed)."""
    cdef const double* x = &ops.X[q, 0]
    return ops.sup.store.weighted(x, 0.0, point_rawdiag(&ops.K, x), ops.sup.coef, NULL)


cdef inline Py_ssize_t _bufsize(FastMEBOps ops) noexcept nogil:
    return rows_scratch(ops.sup.store, &ops.Q, ops.sup.n, GEMM_BLOCK)


cdef object scan_sample(FastMEBOps ops, cnp.ndarray[Py_ssize_t, ndim=1, mode="c"] idx, double d2_over):
    """d^2 of the sampled candidates idx and the first within a relative TIE of their maximum."""
    cdef Py_ssize_t cnt = idx.shape[0], p, nchunk, c, lo, hi, chunk = 16
    cdef cnp.ndarray[double, ndim=1, mode="c"] d2 = np.empty(cnt)
    cdef int screen = ops.screens.choose(ops.sup.store, ops.sup.n, cnt, True)
    cdef double marg = ops.margin(), best = -INFINITY, thr, floor
    cdef double err = ops.screens.err(screen, marg, ops.sup.store, ops.sup.n, ops.sup.cabs, ops.label_bias)
    cdef double* buf
    cdef Py_ssize_t bufsize = _bufsize(ops)
    cdef const Py_ssize_t* ip = &idx[0] if cnt > 0 else NULL
    cdef double* out = &d2[0] if cnt > 0 else NULL
    cdef Py_ssize_t again = 0
    if ops.sup.store.blas:
        chunk = GEMM_BLOCK  # a thread's GEMM blocks are the serial path's: the same sums, bit for bit
    with nogil:
        ops.screens.count_off()
        ops.screens.prepare(screen, ops.sup.store, ops.sup.coef)
        nchunk = (cnt + chunk - 1) // chunk
        if cnt * (ops.sup.store.tnt if screen == SCREEN_TAYLOR else ops.sup.n) < SCAN_PARALLEL_MIN_WORK \
                or nchunk == 1 or (ops.sup.store.blas and BLAS_SERIAL == 0):
            buf = <double*> malloc(bufsize * sizeof(double))
            _kalpha_any(ops, 0, cnt, ip, out, buf, screen)
            free(buf)
        else:
            for c in prange(nchunk, schedule="dynamic"):
                lo = c * chunk
                hi = min(lo + chunk, cnt)
                buf = <double*> malloc(bufsize * sizeof(double))
                _kalpha_any(ops, lo, hi, ip, &out[lo], buf, screen)
                free(buf)
        for p in range(cnt):
            out[p] = _finish_d2(ops, ip[p], out[p], marg)
            if out[p] > best:
                best = out[p]
        if screen != SCREEN_NONE:
            # exact again wherever d^2 may reach the maximum's TIE band or d2_over (see _Screens.err)
            floor = ops.screens.floor(best, err, d2_over - ops.c0, ops.c0)
            best = -INFINITY
            for p in range(cnt):
                if not (out[p] < floor):  # (a screened NaN is computed again too)
                    out[p] = _finish_d2(ops, ip[p], _exact_ka(ops, ops.pz(ip[p])), marg)
                    again += 1
                    if out[p] > best:
                        best = out[p]
            if 2 * again > cnt:
                ops.screens.off[screen] = SCREEN_RETRY
    ops.n_eval += cnt * ops.sup.n
    thr = best - TIE * (fabs(best) + fabs(ops.c0))
    for p in range(cnt):
        if d2[p] >= thr:
            break
    return Scan(int(idx[p]), best + ops.c0, sample_d2=d2 + ops.c0)


cdef bint known_sums(FastMEBOps ops, double* ka) noexcept nogil:
    """ka[p] = sum_t alpha_t s_t k(x_t, x_p) for every input p with a half in the core set, from the gradient of
    the first such core vector t (core order): g_t = 2 (Q alpha)_t - l_t and (Q alpha)_t = s_t (ka_p + beta_b
    sum_j alpha_j s_j) + c_t alpha_t; NaN for the other inputs.  No kernel evaluation: a full scan then
    computes sums only for the inputs outside the core set (CVR's noisy sets keep half of them or more in it).
    The support must be packed (csum).  For mirrored problems with a kernel of their own rows (not a lookup
    kernel, whose sums are indexed by candidate); False, and nothing written, otherwise."""
    cdef Py_ssize_t t, p
    if not ops.mirror or ops.K.lk != NULL:
        return False
    for p in range(ops.m):
        ka[p] = NAN
    for t in range(ops.size):
        p = ops.pz(ops.S[t])
        if isnan(ka[p]):
            ka[p] = ops.Ss[t] * (0.5 * (ops.grad[t] + ops.l[t]) - ops.cdiag(ops.S[t]) * ops.alpha[t]) \
                - ops.label_bias * ops.sup.csum
    return True


cdef double* _known_or_null(FastMEBOps ops) except? NULL:
    """A full scan's known_sums (malloc'ed, the caller frees them), or NULL where they do not apply."""
    cdef double* known
    if not ops.mirror:
        return NULL
    known = <double*> malloc(ops.m * sizeof(double))
    if known == NULL:
        raise MemoryError("scan buffers")
    if not known_sums(ops, known):
        free(known)
        return NULL
    return known


cdef Py_ssize_t _unknown(const double* known, Py_ssize_t lo, Py_ssize_t hi, double* vals, Py_ssize_t* rows) noexcept nogil:
    """The inputs of [lo, hi) whose sums ``known`` lacks, into rows; the known ones' sums into vals[p - lo]."""
    cdef Py_ssize_t p, n = 0
    for p in range(lo, hi):
        if isnan(known[p]):
            rows[n] = p
            n += 1
        else:
            vals[p - lo] = known[p]
    return n


cdef void _input_sums(FastMEBOps ops, Py_ssize_t lo, Py_ssize_t hi, double* vals, double* buf, int screen,
                      const double* known) noexcept nogil:
    """vals[p - lo] = sum_t alpha_t s_t k(x_t, x_p) for the inputs p in [lo, hi), through the screen ``screen``
    (_kalpha_any).  With ``known`` (known_sums, or NULL) the inputs in the core set take theirs from it and only
    the others are computed, into vals[SCAN_CHUNK:] (the second half's space, free until the halves are
    finished) and then moved into place; without memory for their list, every input is computed and the known
    ones then set, the same values."""
    cdef Py_ssize_t p, j, n
    cdef Py_ssize_t* rows = NULL
    if known != NULL:
        rows = <Py_ssize_t*> malloc(SCAN_CHUNK * sizeof(Py_ssize_t))
    if rows == NULL:
        _kalpha_any(ops, lo, hi, NULL, vals, buf, screen)
        if known != NULL:
            for p in range(lo, hi):
                if not isnan(known[p]):
                    vals[p - lo] = known[p]
        return
    n = _unknown(known, lo, hi, vals, rows)
    if n > 0:
        _kalpha_any(ops, 0, n, rows, &vals[SCAN_CHUNK], buf, screen)
        for j in range(n):
            vals[rows[j] - lo] = vals[SCAN_CHUNK + j]
    free(rows)


cdef void _chunk_d2(FastMEBOps ops, Py_ssize_t c, double marg, double* vals, double* buf,
                    const double* known) noexcept nogil:
    """d^2 - c0 of the augmented points of chunk c of input rows, vals[h * SCAN_CHUNK + (p - lo)] for
    the half h (0: z = p; 1, mirrored: z = p + m): one kernel row per input serves both.  ``known``
    (known_sums, or NULL): the sums of the inputs in the core set, computed only for the others."""
    cdef Py_ssize_t lo = c * SCAN_CHUNK, hi = min(lo + SCAN_CHUNK, ops.m), p
    _input_sums(ops, lo, hi, vals, buf, SCREEN_NONE, known)
    if ops.mirror:
        for p in range(lo, hi):
            vals[SCAN_CHUNK + p - lo] = _finish_d2(ops, p + ops.m, vals[p - lo], marg)
    for p in range(lo, hi):
        vals[p - lo] = _finish_d2(ops, p, vals[p - lo], marg)


cdef Py_ssize_t _chunk_d2_screened(FastMEBOps ops, Py_ssize_t c, double marg, int screen, double err,
                                   double over, double* vals, const double* known) noexcept nogil:
    """_chunk_d2 through the screen ``screen``: every value that may reach its half's TIE band of the
    chunk's maximum, or ``over``, is exact; the others are screened values certainly below both, so
    the chunk's maximum, its first candidate within TIE and its candidates beyond ``over`` are the
    exact path's (``known``: as for _chunk_d2; those sums are exact already).  Returns how many
    candidates were computed again in double."""
    cdef Py_ssize_t lo = c * SCAN_CHUNK, hi = min(lo + SCAN_CHUNK, ops.m), p, h, again = 0
    cdef Py_ssize_t halves = 2 if ops.mirror else 1
    cdef double ka, vmax[2]
    cdef double floor[2]
    vmax[0] = -INFINITY
    vmax[1] = -INFINITY
    _input_sums(ops, lo, hi, vals, NULL, screen, known)
    for p in range(lo, hi):
        ka = vals[p - lo]
        vals[p - lo] = _finish_d2(ops, p, ka, marg)
        vmax[0] = max(vmax[0], vals[p - lo])
        if ops.mirror:
            vals[SCAN_CHUNK + p - lo] = _finish_d2(ops, p + ops.m, ka, marg)
            vmax[1] = max(vmax[1], vals[SCAN_CHUNK + p - lo])
    for h in range(halves):
        floor[h] = ops.screens.floor(vmax[h], err, over, ops.c0)
    if halves == 1:
        floor[1] = INFINITY
    for p in range(lo, hi):
        if known != NULL and not isnan(known[p]):
            continue
        if not (vals[p - lo] < floor[0]) or (ops.mirror and not (vals[SCAN_CHUNK + p - lo] < floor[1])):
            ka = _exact_ka(ops, p)
            vals[p - lo] = _finish_d2(ops, p, ka, marg)
            if ops.mirror:
                vals[SCAN_CHUNK + p - lo] = _finish_d2(ops, p + ops.m, ka, marg)
            again += 1
    return again


cdef struct _FullScan:
    # what every chunk of a full scan leaves: its maximum per half, its top-k beyond ``over``
    Py_ssize_t nchunk, halves, k, kk, m
    double over
    double* cmax                    # cmax[h * nchunk + c]
    double* tv                      # tv[c * kk : c * kk + tc[c]], tz likewise: the chunk's top-k
    Py_ssize_t* tz
    Py_ssize_t* tc                  # -1: the chunk ran out of memory
    double* known                   # known_sums of the inputs, or NULL


cdef void _chunk_top(_FullScan* fs, Py_ssize_t c, const double* vals, Py_ssize_t stride, Py_ssize_t lo,
                     Py_ssize_t hi) noexcept nogil:
    """Chunk c's maximum per half and its top-k beyond fs.over, from its d^2 - c0 (vals[h stride + p - lo],
    augmented point p + h m)."""
    cdef Py_ssize_t h, p
    cdef double v, x
    fs.tc[c] = 0
    for h in range(fs.halves):
        v = -INFINITY
        for p in range(lo, hi):
            x = vals[h * stride + p - lo]
            if x > v:
                v = x
            if fs.k > 0 and x > fs.over:
                _topk_insert(&fs.tv[c * fs.kk], &fs.tz[c * fs.kk], &fs.tc[c], fs.k, x, p + h * fs.m)
        fs.cmax[h * fs.nchunk + c] = v


cdef void _support_chunk(FastMEBOps ops, _FullScan* fs, Py_ssize_t c, double marg, int screen, double err,
                         Py_ssize_t bufsize) noexcept nogil:
    """A chunk of a full scan through the support's rows (screened first where a screen runs)."""
    cdef Py_ssize_t lo = c * SCAN_CHUNK, hi = min(lo + SCAN_CHUNK, ops.m)
    cdef double* vals = <double*> malloc((2 * SCAN_CHUNK + bufsize) * sizeof(double))
    if screen != SCREEN_NONE and ops.screens.full_on:
        if 2 * _chunk_d2_screened(ops, c, marg, screen, err, fs.over if fs.k > 0 else INFINITY, vals,
                                  fs.known) > hi - lo:
            ops.screens.full_on = 0
    else:
        _chunk_d2(ops, c, marg, vals, &vals[2 * SCAN_CHUNK], fs.known)
    _chunk_top(fs, c, vals, SCAN_CHUNK, lo, hi)
    free(vals)


cdef Py_ssize_t _scan_chunks(FastMEBOps ops, _FullScan* fs, bint block, double marg, int screen, double err,
                             Py_ssize_t bufsize, double* vals, bint par) noexcept nogil:
    """The chunks of a full scan, in parallel (``par``): through the kernel block (``block``: every input's
    d^2 - c0 into vals, kb_chunk) or the support's rows.  Returns the candidates the block's chunks computed
    again in double."""
    cdef Py_ssize_t c, again = 0
    for c in prange(fs.nchunk, schedule="dynamic", use_threads_if=par):
        if block:
            again += kb_chunk(ops, fs, c, marg, err, bufsize, vals)
        else:
            _support_chunk(ops, fs, c, marg, screen, err, bufsize)
    return again


cdef Py_ssize_t _first_within(FastMEBOps ops, Py_ssize_t nchunk, const double* cmax, double thr, double marg,
                              Py_ssize_t bufsize, const double* known) noexcept nogil:
    """The first augmented point (in index order: the first half, then the mirrored one) with d^2 - c0
    >= thr: the first chunk whose maximum reaches thr, computed again."""
    cdef Py_ssize_t c, h, p, lo, hi, first = -1, bc = -1, bh = 0, halves = 2 if ops.mirror else 1
    cdef double* vals
    for h in range(halves):
        for c in range(nchunk):
            if cmax[h * nchunk + c] >= thr and bc < 0:
                bc = c
                bh = h
    if bc < 0:
        bc = 0
    vals = <double*> malloc((2 * SCAN_CHUNK + bufsize) * sizeof(double))
    _chunk_d2(ops, bc, marg, vals, &vals[2 * SCAN_CHUNK], known)
    lo = bc * SCAN_CHUNK
    hi = min(lo + SCAN_CHUNK, ops.m)
    for p in range(lo, hi):
        if vals[bh * SCAN_CHUNK + p - lo] >= thr:
            first = p + bh * ops.m
            break
    free(vals)
    return first


cdef object full_scan(FastMEBOps ops, Py_ssize_t k, double d2_over, bint block):
    """A full scan, the one skeleton of both paths: the furthest augmented point (the first within a relative
    TIE of the maximum) and the top-k beyond d2_over (refimpl.meb.MEBOps.scan with idx None), every input in
    chunks of SCAN_CHUNK, in parallel where the work pays for the threads.  ``block``: through the kernel
    block (_kblock.pxi, first extended to the whole core set; no mirrored points), which keeps every
    input's value; else through the support's rows (its screens first where one runs), a mirrored input's
    kernel row serving both halves."""
    cdef _FullScan fs
    cdef Py_ssize_t c, p, first = -1, bufsize = 0
    cdef double marg = ops.margin(), best = -INFINITY, thr, err = 0.0
    cdef int screen = SCREEN_NONE
    cdef bint par, failed = False
    cdef double* vals = NULL
    fs.m = ops.m
    fs.nchunk = (ops.m + SCAN_CHUNK - 1) // SCAN_CHUNK
    fs.halves = 2 if ops.mirror else 1
    fs.k = k
    fs.kk = max(k, 1)
    fs.over = d2_over - ops.c0
    fs.known = NULL
    if not block:
        screen = ops.screens.choose(ops.sup.store, ops.sup.n, ops.m, False)
        err = ops.screens.err(screen, marg, ops.sup.store, ops.sup.n, ops.sup.cabs, ops.label_bias)
        bufsize = _bufsize(ops)
        ops.screens.full_on = 1  # every full scan tries screening again
        fs.known = _known_or_null(ops)
    else:
        vals = <double*> malloc(ops.m * sizeof(double))
    fs.cmax = <double*> malloc(fs.nchunk * fs.halves * sizeof(double))
    fs.tv = <double*> malloc(fs.nchunk * fs.kk * sizeof(double))
    fs.tz = <Py_ssize_t*> malloc(fs.nchunk * fs.kk * sizeof(Py_ssize_t))
    fs.tc = <Py_ssize_t*> malloc(fs.nchunk * sizeof(Py_ssize_t))
    if fs.cmax == NULL or fs.tv == NULL or fs.tz == NULL or fs.tc == NULL or (block and vals == NULL):
        free(vals); free(fs.cmax); free(fs.tv); free(fs.tz); free(fs.tc); free(fs.known)
        raise MemoryError("scan buffers")
    with nogil:
        if block:
            kb_extend(ops, ops.size)
            kb_weights(ops)
            marg = ops.margin()
            err = kb_fixed_err(ops, marg)
            bufsize = _kb_bufsize(ops)
            par = ops.kb.m * ops.size >= KB_PARALLEL_MIN_WORK and fs.nchunk > 1
        else:
            ops.screens.prepare(screen, ops.sup.store, ops.sup.coef)
            par = ops.m * ops.sup.n >= PARALLEL_MIN_WORK and fs.nchunk > 1 \
                and (not ops.sup.store.blas or BLAS_SERIAL > 0)
        c = _scan_chunks(ops, &fs, block, marg, screen, err, bufsize, vals, par)
        if block:
            ops.kb.recomputed = c
        for c in range(fs.nchunk * fs.halves):
            failed = failed or (c < fs.nchunk and fs.tc[c] < 0)
            if fs.cmax[c] > best:
                best = fs.cmax[c]
        thr = best - TIE * (fabs(best) + fabs(ops.c0))
        if block:
            first = 0
            for p in range(ops.m):
                if vals[p] >= thr:
                    first = p
                    break
        else:
            first = _first_within(ops, fs.nchunk, fs.cmax, thr, marg, bufsize, fs.known)
    # kernel evaluations: through the block, every input against the whole core set (the block's part and its
    # tail) and the candidates computed again in double -- counted here, not by the threads
    ops.n_eval += (ops.m + ops.kb.recomputed) * ops.size if block else \
        (ops.m - _count_known(fs.known, ops.m)) * ops.sup.n
    top_v, top_z = [], []
    for c in range(fs.nchunk if k > 0 else 0):
        for p in range(fs.tc[c]):
            top_v.append(fs.tv[c * fs.kk + p])
            top_z.append(fs.tz[c * fs.kk + p])
    free(vals); free(fs.cmax); free(fs.tv); free(fs.tz); free(fs.tc); free(fs.known)
    if failed:
        raise MemoryError("scan buffers")
    tz_a = np.asarray(top_z, dtype=np.intp)
    tv_a = np.asarray(top_v, dtype=np.float64)
    order = np.lexsort((tz_a, -tv_a))[:k]
    return Scan(int(first), best + ops.c0, top=tz_a[order], top_d2=tv_a[order] + ops.c0)


cdef Py_ssize_t _count_known(const double* known, Py_ssize_t m) noexcept nogil:
    cdef Py_ssize_t p, n = 0
    if known != NULL:
        for p in range(m):
            n += not isnan(known[p])
    return n


def _set_scan_parallel_min_work(Py_ssize_t work):
    """Set the kernel evaluations from which a sampled scan runs in parallel; returns the old value (tests
    use 0 to force the parallel path on small problems)."""
    global SCAN_PARALLEL_MIN_WORK
    old = SCAN_PARALLEL_MIN_WORK
    SCAN_PARALLEL_MIN_WORK = work
    return old
