# The kernel block of the scans on high-dimensional data (fastimpl._engine).
#
# From BLAS_MIN_D coordinates on a kernel evaluation is a d-long dot product, and a scan computes
# sum_t alpha_t s_t k(x_t, x) against the whole support for every candidate.  Profiled on Fashion-MNIST
# T-shirt/top vs shirt (10,000 x 784, CVMClassifier() defaults, 1 thread, 19 s of CPU): 86% of the fit
# in sampled scans -- a GEMM of 59 candidates against the packed support (~2,000 x 784 doubles, packed
# again after every solve), 123,000 candidates in all, 12 full scans' worth -- and 13% in adding core
# vectors one GEMV row at a time, each streaming the core store through memory.
#
# The block keeps k(x_p, c_t) for every input p and core vector t, in single precision, in panels of
# KB_PANEL core vectors (panel j: m rows of KB_PANEL floats, input p's values contiguous).  Core vectors
# enter it together: one GEMM of all inputs (tiles of KB_TILE rows, in parallel) against the new core
# vectors and cached squared norms -- level 3, and every core vector's column is computed once in the
# fit -- so that a candidate's sum then costs |S| multiply-adds read from memory instead of |S| d.  Core
# vectors that joined since the last extension (the tail) are summed exactly, in double, by GEMM of the
# candidates against the core store.
#
# The block's sums are a screen (_screens.pxi).  Each stored value k_f is within rho k_f of the value the
# exact path computes (kb_bound: the rounding to single precision, 2^-24 relative, and the difference of
# two double evaluations of the same value), so a candidate's screened sum is within rho sum_{t in block}
# |alpha_t s_t| k_f(x, c_t) (summed beside it, kb_decide) plus the sums' own rounding of the exact one.
# Every candidate whose screened d^2 may reach a decision of the scan -- the TIE band of the maximum, or
# d2_over -- is computed again in double (GEMM against the core store, kb_exact), so the scans return the
# exact path's maximum, first tied candidate, violators, top-k and certificate: the decisions, and
# fast == ref, are unchanged.  The GEMMs run in double: in single precision the bound on x'c grows to
# about d 2^-24 |x|'|c| (kb_bound), too coarse to decide.
#
# Used for the Gaussian kernel on dense input with d >= BLAS_MIN_D and no mirrored points (CVR keeps the
# support scans).  The block and the inputs' squared norms are charged to the row cache's budget
# (_cache.pxi: charge_block); the block stops growing when it would take more than KB_BUDGET_SHARE of
# cache_size, and the scans then sum the core vectors beyond it exactly (the tail).
#
# Keyed by rows (row_block, for a chunked fit's row buffer): _kbrows.pxi, included at the end of this file.

cdef extern from "_kblock.h":
    void cv_fdot2(const float* v, const double* w, const double* a, Py_ssize_t n, double* s) noexcept nogil
    void cv_panel_sums(const float* panel, Py_ssize_t ld, const Py_ssize_t* rows, Py_ssize_t n, const double* w,
                       const double* a, Py_ssize_t cols, double* s0, double* s1) noexcept nogil

#: core vectors per panel of the block
cdef Py_ssize_t KB_PANEL = 128
#: input rows per GEMM tile when the block is extended
cdef Py_ssize_t KB_TILE = 256
#: a sampled scan extends the block once this many core vectors are outside it, or once the scans since
#: the last extension have scanned m candidates (kb_scan_sample; a full scan: always)
cdef Py_ssize_t KB_EXTEND_MIN = 32
#: the block may hold at most this share of the cache budget
cdef double KB_BUDGET_SHARE = 0.75
#: a sampled scan leaves the d^2 of candidates certainly beyond d2_over screened while at most this many
#: may be (the driver adds at most MAX_ADD violators of a sample and ranks them by d^2 only beyond that)
cdef Py_ssize_t KB_SCREENED_OVER = 128
#: block extensions and full scans run in parallel from this much work (multiply-adds): smaller
#: regions are not worth waking a second thread, which on a busy machine can wait a time slice
cdef Py_ssize_t KB_PARALLEL_MIN_WORK = 20_000_000
#: policy 0 (the default) uses the block from this much of m d on: below it the SIMD rows of the exact
#: path cost less than the block's panels.  Measured (CVMClassifier() fit wall s, block / none, fresh
#: processes): one-vs-one pairs of letter (d = 16, 5,000 points: 0.58 / 0.48), pendigits (d = 16: 0.24 /
#: 0.14), optdigits (d = 64, ~800 a pair: 0.17 / 0.15; one-vs-rest 3,934: 0.025 / 0.019), satimage (d = 36:
#: even); Fashion-MNIST T-shirt/shirt pooled to d = 49 at 10,000 (0.90 / 1.70), at d = 784 from 2,000 points
#: (0.16 / 0.52) to 10,000 (2.3 / 18).
cdef Py_ssize_t KB_MIN_WORK = 400_000
#: a sampled scan sums its candidates through the block in parallel, in chunks of KB_SUM_CHUNK inputs (a
#: multiple of GEMM_BLOCK), from this many terms (candidates x core vectors) on: a wide sample of 3,776
#: candidates against 2,000 core vectors reads 30 MB of the block
cdef Py_ssize_t KB_SAMPLE_PARALLEL_MIN = 2_000_000
cdef Py_ssize_t KB_SUM_CHUNK = 256
#: when the scans use the block where it is allowed: 0 by default (from BLAS_MIN_D coordinates and
#: KB_MIN_WORK = m d on),
#: 1 also below (tests), -1 never (tests: the support scans)
cdef int KB_POLICY = 0


def _set_block_policy(int policy):
    """Set when the scans use the kernel block (0: from BLAS_MIN_D coordinates on, 1: whenever the kernel
    and input allow it, -1: never); returns the old policy (tests force both paths)."""
    global KB_POLICY
    old = KB_POLICY
    KB_POLICY = policy
    return old


def _set_block_min_work(Py_ssize_t work):
    """Set the m d from which policy 0 uses the block; returns the old one (tests use 0 to run the block on
    small problems)."""
    global KB_MIN_WORK
    old = KB_MIN_WORK
    KB_MIN_WORK = work
    return old


def _set_block_parallel_min_work(Py_ssize_t work):
    """Set the work from which the block's extensions and full scans run in parallel; returns the old one
    (tests use 0 to force the parallel paths on small problems)."""
    global KB_PARALLEL_MIN_WORK
    old = KB_PARALLEL_MIN_WORK
    KB_PARALLEL_MIN_WORK = work
    return old


def _set_sample_parallel_min(Py_ssize_t work):
    """Set the terms (candidates x core vectors) from which a sampled scan sums through the block in
    parallel; returns the old value (tests use 0 to force the parallel path on small problems)."""
    global KB_SAMPLE_PARALLEL_MIN
    old = KB_SAMPLE_PARALLEL_MIN
    KB_SAMPLE_PARALLEL_MIN = work
    return old


@cython.final
cdef class _KBlock:
    """k(x_p, c_t) for every input p and the core vectors t < filled, in single precision (panels)."""
    cdef float** panels             # panel j holds core vectors [j KB_PANEL, (j + 1) KB_PANEL)
    cdef Py_ssize_t npanel          # panels allocated (and entries of ``panels``)
    cdef Py_ssize_t filled          # core vectors [0, filled) are in the block
    cdef Py_ssize_t m
    cdef bint on                    # the scans use the block
    cdef bint full                  # it may not grow (budget)
    cdef double* xsq                # ||x_p||^2 of every input
    cdef double* coef               # alpha_t s_t over the core set (one entry per core vector)
    cdef double* cabsv              # |coef|
    cdef double csum, cabs          # sum coef, sum |coef|
    cdef double rho                 # |block value - exact path's value| <= rho * block value
    cdef Py_ssize_t tail_cands      # candidates scanned since the last extension (kb_scan_sample)
    cdef double* hv                 # while not NULL, an extension also harvests new Q rows (_kb_harvest)
    cdef Py_ssize_t hv_k0, hv_k1    # ... of the core vectors [hv_k0, hv_k1)
    cdef Py_ssize_t recomputed      # candidates the last scan computed again in double (tests)
    cdef long long n_again          # ... and all scans of the fit
    cdef long long n_support        # scans that took the support's path instead (FastMEBOps.scan)
    cdef double* scratch            # the serial scans' scratch (kept: a fresh large malloc per scan is
    cdef Py_ssize_t scap            #   fresh zeroed pages from the kernel every time)
    cdef bint rows                  # keyed by rows of a larger X (row_block): m is its rows, not the inputs
    cdef int* rfill                 # ... row r's entries cover the core vectors [0, rfill[r])
    cdef Py_ssize_t* srow           # ... the row each input (slot) holds
    cdef Py_ssize_t nslots          # ... inputs (xsq and srow have one entry each)
    cdef long long n_fill           # ... entries computed by kb_fill_rows (tests)
    cdef _Owned own

    def __cinit__(self):
        owned_add(&self.own, <void**> &self.xsq, 0)
        owned_add(&self.own, <void**> &self.coef, sizeof(double))
        owned_add(&self.own, <void**> &self.cabsv, sizeof(double))
        owned_add(&self.own, <void**> &self.panels, 0)
        owned_add(&self.own, <void**> &self.scratch, 0)
        owned_add(&self.own, <void**> &self.rfill, 0)
        owned_add(&self.own, <void**> &self.srow, 0)

    def __dealloc__(self):
        cdef Py_ssize_t j
        if self.panels != NULL:
            for j in range(self.npanel):
                free(self.panels[j])
        owned_free(&self.own)

    cdef inline Py_ssize_t nbytes(self) noexcept nogil:
        """Bytes of the block and the inputs' squared norms (charged to the cache's budget)."""
        if not self.on:
            return 0
        if self.rows:
            return self.npanel * self.m * KB_PANEL * sizeof(float) + self.m * sizeof(int) \
                + self.nslots * (sizeof(double) + sizeof(Py_ssize_t))
        return self.npanel * self.m * KB_PANEL * sizeof(float) + self.m * sizeof(double)

    cdef double* scratch_for(self, Py_ssize_t n) noexcept nogil:
        """At least n doubles of the serial scans' scratch (NULL when out of memory)."""
        cdef double* p
        if n > self.scap:
            p = <double*> realloc(self.scratch, n * sizeof(double))
            if p == NULL:
                return NULL
            self.scratch = p
            self.scap = n
        return self.scratch

    cdef bint sums(self, const Py_ssize_t* rows, Py_ssize_t n, double* s0, double* s1) noexcept nogil:
        """sum_row for the inputs rows[0:n], panel by panel (the next rows prefetched: cv_panel_sums); False
        when out of memory (keyed by rows: the inputs' rows of X)."""
        cdef Py_ssize_t i, j
        cdef Py_ssize_t* mapped = NULL
        if self.rows and n > 0:
            mapped = <Py_ssize_t*> malloc(n * sizeof(Py_ssize_t))
            if mapped == NULL:
                return False
            for i in range(n):
                mapped[i] = self.srow[rows[i]]
            rows = mapped
        for i in range(n):
            s0[i] = 0.0
            s1[i] = 0.0
        for j in range((self.filled + KB_PANEL - 1) // KB_PANEL):
            cv_panel_sums(self.panels[j], KB_PANEL, rows, n, &self.coef[j * KB_PANEL], &self.cabsv[j * KB_PANEL],
                          min(KB_PANEL, self.filled - j * KB_PANEL), s0, s1)
        free(mapped)
        return True

    cdef inline void sum_row(self, Py_ssize_t p, double* s) noexcept nogil:
        """s[0] = sum_{t < filled} coef_t k(x_p, c_t) and s[1] = sum_{t < filled} |coef_t| k(x_p, c_t) from
        the block (s[1] rho bounds the error of s[0])."""
        cdef Py_ssize_t j, w
        s[0] = 0.0
        s[1] = 0.0
        if self.rows:
            p = self.srow[p]
        for j in range((self.filled + KB_PANEL - 1) // KB_PANEL):
            w = min(KB_PANEL, self.filled - j * KB_PANEL)
            cv_fdot2(&self.panels[j][p * KB_PANEL], &self.coef[j * KB_PANEL], &self.cabsv[j * KB_PANEL], w, s)


cdef void kb_setup(FastMEBOps ops) except *:
    """Turn the block on where it applies (see the top of this file): the inputs' squared norms and the
    bound (kb_bound)."""
    cdef _KBlock kb = ops.kb
    cdef Py_ssize_t p
    cdef double mx = 0.0
    if ops.sparse or ops.mirror or not k_is_gaussian(&ops.K) or KB_POLICY < 0 or ops.m == 0:
        return
    if KB_POLICY == 0 and (ops.d < BLAS_MIN_D or ops.m * ops.d < KB_MIN_WORK):
        return
    if ops.m * KB_PANEL * sizeof(float) + ops.m * sizeof(double) > KB_BUDGET_SHARE * ops.cache.budget * sizeof(double):
        return
    kb.m = ops.m
    kb.xsq = <double*> malloc(ops.m * sizeof(double))
    if kb.xsq == NULL:
        raise MemoryError("kernel block")
    with nogil:
        for p in range(ops.m):
            kb.xsq[p] = point_sq(&ops.X[p, 0], ops.d)
            mx = max(mx, kb.xsq[p])
    kb_bound(ops, mx)
    kb.on = True
    ops.screens.fin_scale = _finish_scale(ops)


cdef void kb_bound(FastMEBOps ops, double M) noexcept nogil:
    """rho, the block's relative error; M = max ||x||^2 bounds |x'c| for every input x and core vector c.
    A kernel value is exp(-gamma r), r = ||x||^2 + ||c||^2 - 2 x'c, and an error |dr| in r is a relative
    error of at most expm1(gamma |dr|) in the value.  The block's GEMM and the exact path's differ only in
    the order of the d products of x'c (each within d eps |x|'|c| <= d eps M of the true value) and in
    three roundings of r: |dr| <= (4 d + 16) eps M.  Storing the value as a float adds u = 2^-24 relative,
    exp's roundings 8 eps.  (The GEMM itself in single precision would be off by up to 2.02 (d + 3) u M
    in r: measured on Fashion-MNIST T-shirt/shirt, 46% of the sampled candidates then fell within that
    bound of a decision and were computed again, and the fit took 2.4 times as long.)"""
    cdef double rho0 = expm1(ops.K.gamma * (4.0 * ops.d + 16.0) * DBL_EPSILON * M * 1.01) + 2.0 ** -24 \
        + 8.0 * DBL_EPSILON
    ops.kb.rho = 1.01 * rho0 / (1.0 - rho0)


cdef bint _kb_new_panel(FastMEBOps ops) noexcept nogil:
    """One more panel, if the budget's share allows it (evicting cached rows for it)."""
    cdef Py_ssize_t pbytes = ops.kb.m * KB_PANEL * sizeof(float)
    cdef float** pp
    cdef float* panel
    if ops.kb.full or ops.kb.nbytes() + pbytes > KB_BUDGET_SHARE * ops.cache.budget * sizeof(double):
        ops.kb.full = True
        return False
    pp = <float**> realloc(ops.kb.panels, (ops.kb.npanel + 1) * sizeof(float*))
    if pp == NULL:
        ops.kb.full = True
        return False
    ops.kb.panels = pp
    panel = <float*> malloc(pbytes)
    if panel == NULL:
        ops.kb.full = True
        return False
    ops.kb.panels[ops.kb.npanel] = panel
    ops.kb.npanel += 1
    ops.cache.charge_block()
    return True


cdef void _kb_fill_tile(FastMEBOps ops, Py_ssize_t p0, Py_ssize_t lo, Py_ssize_t hi, double* tmp) noexcept nogil:
    """Block entries of inputs [p0, p0 + KB_TILE) and core vectors [lo, hi): one GEMM against the core store
    (tmp: KB_TILE (hi - lo) doubles)."""
    cdef Py_ssize_t nb = min(KB_TILE, ops.kb.m - p0), w = hi - lo, b, t
    ops.core.block(&ops.X[p0, 0], nb, ops.d, &ops.kb.xsq[p0], &ops.kb.xsq[p0], lo, hi, tmp, w)
    for b in range(nb):
        for t in range(lo, hi):
            ops.kb.panels[t // KB_PANEL][(p0 + b) * KB_PANEL + t % KB_PANEL] = <float> tmp[b * w + t - lo]
    if ops.kb.hv != NULL:
        _kb_harvest(ops, p0, nb, lo, hi, tmp)


cdef void _kb_harvest(FastMEBOps ops, Py_ssize_t p0, Py_ssize_t nb, Py_ssize_t lo, Py_ssize_t hi,
                      const double* tmp) noexcept nogil:
    """The new core vectors' kernel rows from a tile of the extension (FastMEBOps._rows_from_block): the
    core vectors whose inputs lie in the tile (found in the sorted index czs; without mirrored points a
    core vector's augmented index is its input row) get hv[(t - hv_k0) hv_k1 + k] = k(x_{S[k]}, c_t) for
    the new core vectors t.  Each core vector lies in one tile, so the parallel tiles write apart."""
    cdef Py_ssize_t j = _lower_bound(ops.czs, ops.size, p0), k, t, b, w = hi - lo, t0 = max(lo, ops.kb.hv_k0)
    while j < ops.size and ops.czs[j] < p0 + nb:
        k = ops.czp[j]
        b = ops.czs[j] - p0
        for t in range(t0, hi):
            ops.kb.hv[(t - ops.kb.hv_k0) * ops.kb.hv_k1 + k] = tmp[b * w + t - lo]
        j += 1


cdef void kb_extend(FastMEBOps ops, Py_ssize_t upto) noexcept nogil:
    """Core vectors [filled, upto) into the block (as far as its budget allows): one GEMM per tile of
    inputs, the tiles in parallel where the work pays for a second thread."""
    cdef Py_ssize_t ntile = (ops.kb.m + KB_TILE - 1) // KB_TILE, c, lo = ops.kb.filled
    cdef double* tmp
    if ops.kb.rows:   # (keyed by rows: its rows are filled when drawn, kb_fill_rows)
        return
    while ops.kb.npanel * KB_PANEL < upto and _kb_new_panel(ops):
        pass
    upto = min(upto, ops.kb.npanel * KB_PANEL)
    if upto <= lo:
        return
    for c in prange(ntile, schedule="dynamic",
                    use_threads_if=ops.kb.m * (upto - lo) * ops.d >= KB_PARALLEL_MIN_WORK and ntile > 1):
        tmp = <double*> malloc(KB_TILE * (upto - lo) * sizeof(double))
        if tmp != NULL:
            _kb_fill_tile(ops, c * KB_TILE, lo, upto, tmp)
        free(tmp)
    ops.kb.filled = upto
    ops.kb.tail_cands = 0
    ops.n_eval += ops.kb.m * (upto - lo)


cdef void kb_weights(FastMEBOps ops) noexcept nogil:
    """coef = alpha s over the core set, its sums, and sum |coef| over the block's part."""
    cdef Py_ssize_t t
    ops.kb.csum = 0.0
    ops.kb.cabs = 0.0
    for t in range(ops.size):
        ops.kb.coef[t] = ops.alpha[t] * ops.Ss[t]
        ops.kb.csum += ops.kb.coef[t]
        ops.kb.cabs += fabs(ops.kb.coef[t])
        ops.kb.cabsv[t] = fabs(ops.kb.coef[t])
    ops.sup.csum = ops.kb.csum  # _finish_d2 reads the label bias's sum there


cdef inline Py_ssize_t _kb_bufsize(FastMEBOps ops) noexcept nogil:
    """Scratch of kb_exact: GEMM_BLOCK kernel rows over the core set and GEMM_BLOCK gathered inputs."""
    return rows_scratch(ops.core, &ops.Q, ops.size, GEMM_BLOCK)


cdef void kb_exact(FastMEBOps ops, const Py_ssize_t* rows, Py_ssize_t n, Py_ssize_t lo, double* out,
                   double* buf) noexcept nogil:
    """out[i] += sum_{lo <= t < size} coef_t k(x_q, c_t) in double for the inputs q = rows[i]: the core store's
    weighted rows from column lo (GEMM of GEMM_BLOCK gathered inputs at a time against the core store)."""
    cdef Queries Q = ops.Q
    if ops.size - lo <= 0:
        return
    Q.sq = ops.kb.xsq   # (the inputs' squared norms, kept by the block)
    weighted_rows(ops.core, &Q, rows, 0, n, lo, &ops.kb.coef[lo], True, False, out, GEMM_BLOCK, buf)


cdef bint _kb_screen_sums(FastMEBOps ops, const Py_ssize_t* rows, Py_ssize_t n, double* s0, double* s1,
                          double* buf, bint par) noexcept nogil:
    """s0[i] = the screened sum of input rows[i] (the block's core vectors, single precision) plus its
    tail's exact sum (the core vectors beyond the block, double), s1[i] = sum_{t in block} |coef_t| k_f:
    with ``par``, chunks of KB_SUM_CHUNK inputs in parallel once the sample is large enough to pay for a
    second thread (kb_scan_sample's wide samples: 3,776 candidates against ~3,000 core vectors).  Each
    input's sums are computed as the serial ones are, GEMM_BLOCK rows at a time from the same first row,
    so the values do not depend on the threads.  Returns False when out of memory."""
    cdef Py_ssize_t nchunk = (n + KB_SUM_CHUNK - 1) // KB_SUM_CHUNK, c, lo, hi
    cdef Py_ssize_t tail = ops.size - ops.kb.filled, bufsize = _kb_bufsize(ops)
    cdef double* b
    cdef bint failed = False
    if not par or nchunk < 2 or n * ops.size < KB_SAMPLE_PARALLEL_MIN:
        if not ops.kb.sums(rows, n, s0, s1):
            return False
        kb_exact(ops, rows, n, ops.kb.filled, s0, buf)
        return True
    for c in prange(nchunk, schedule="dynamic"):
        lo = c * KB_SUM_CHUNK
        hi = min(lo + KB_SUM_CHUNK, n)
        if not ops.kb.sums(&rows[lo], hi - lo, &s0[lo], &s1[lo]):
            failed = True
        if tail > 0:
            b = <double*> malloc(bufsize * sizeof(double))
            if b == NULL:
                failed = True
            else:
                kb_exact(ops, &rows[lo], hi - lo, ops.kb.filled, &s0[lo], b)
            free(b)
    return not failed


cdef Py_ssize_t kb_decide(FastMEBOps ops, const Py_ssize_t* rows, Py_ssize_t n, double marg, double fixed,
                          double over, bint all_over, double* vals, double* buf, Py_ssize_t* idx,
                          double* acc, bint par=False, bint count=True) noexcept nogil:
    """d^2 - c0 of the inputs rows[0:n] (no mirror: z = input) into vals: screened through the block (its
    core vectors) plus the tail in double, each within e_i = 2 rho sum_{t in block} |coef_t| k_f(x_i, c_t)
    + ``fixed`` (kb_fixed_err) of the exact value, then computed again in double wherever a decision may
    read it: where it may reach the TIE band of these candidates' exact maximum (>= max_i (v_i - e_i)),
    where it may lie on either side of ``over``, and beyond ``over`` when ``all_over`` or when more than
    KB_SCREENED_OVER candidates may lie beyond it (the driver then ranks them by d^2).  The others keep
    screened values: certainly below the band, and certainly below ``over`` or certainly beyond it.
    Scratch: ``buf`` (_kb_bufsize), ``idx`` (2 n entries), ``acc`` (2 n); ``par``: the sums may run in
    parallel (_kb_screen_sums; not from inside a parallel region); ``count``: add the double evaluations to
    ops.n_eval (not from inside a parallel region: the caller counts them).  Returns how many were computed
    again, -1 when out of memory."""
    cdef Py_ssize_t i, again = 0, nover = 0
    cdef double lo = -INFINITY, band, e
    cdef double* err = &acc[n]
    if not _kb_screen_sums(ops, rows, n, vals, err, buf, par):
        return -1
    for i in range(n):
        err[i] = 2.0 * ops.kb.rho * err[i] + fixed
    for i in range(n):
        vals[i] = _finish_d2(ops, rows[i], vals[i], marg)
        lo = max(lo, vals[i] - err[i])
        if not (vals[i] + err[i] < over):
            nover += 1
    band = lo - TIE * (fabs(lo) + fabs(ops.c0))   # at or below the TIE band of the exact maximum
    all_over = all_over or nover > KB_SCREENED_OVER
    for i in range(n):
        e = err[i]
        # (a NaN is computed again too)
        if not (vals[i] + e < band) or not (vals[i] + e < over or (vals[i] - e > over and not all_over)):
            idx[again] = i
            idx[n + again] = rows[i]
            acc[again] = 0.0
            again += 1
    kb_exact(ops, &idx[n], again, 0, acc, buf)
    for i in range(again):
        vals[idx[i]] = _finish_d2(ops, idx[n + i], acc[i], marg)
    if count:
        ops.n_eval += n * (ops.size - ops.kb.filled) + again * ops.size
    return again


cdef inline double kb_fixed_err(FastMEBOps ops, double marg) noexcept nogil:
    """The part of a screened d^2's bound that does not scale with the block's values: the roundings of
    both sums of |S| terms and of _finish_d2 (see _Screens.err)."""
    return (8.0 * DBL_EPSILON * (ops.size + 1) * ops.kb.cabs
            + 8.0 * DBL_EPSILON * (fabs(marg) + 2.0 * ops.kb.cabs * (1.0 + fabs(ops.label_bias)) + ops.screens.fin_scale))


cdef object kb_scan_sample(FastMEBOps ops, cnp.ndarray[Py_ssize_t, ndim=1, mode="c"] idx, double d2_over):
    """scan_sample (_scans.pxi) through the block: the same furthest candidate, maximum and d^2 values
    (exact wherever a decision may read them)."""
    cdef _KBlock kb = ops.kb
    cdef Py_ssize_t cnt = idx.shape[0], p, bufsize = _kb_bufsize(ops)
    cdef cnp.ndarray[double, ndim=1, mode="c"] d2 = np.empty(cnt)
    cdef double marg, err, best = -INFINITY, thr
    cdef double* buf
    cdef Py_ssize_t* ix
    cdef bint ok = False
    if cnt == 0:
        raise ValueError("an empty sample")
    with nogil:
        # the tail costs cnt (size - filled) d per scan, its extension m (size - filled) d once: extend
        # once KB_EXTEND_MIN core vectors are out, or once the scans since the last extension have paid
        # as much for a smaller tail as its extension costs (rent or buy: at most twice the cheaper one)
        # (keyed by rows: the candidates' rows are filled up to the core set, as far as the budget allows)
        ok = True
        if kb.rows:
            ok = kb_fill_rows(ops, &idx[0], cnt)
        elif ops.size - kb.filled >= KB_EXTEND_MIN or (ops.size > kb.filled and kb.tail_cands + cnt >= kb.m):
            kb_extend(ops, ops.size)
        if ops.size > kb.filled:
            kb.tail_cands += cnt
        kb_weights(ops)
        marg = ops.margin()
        err = kb_fixed_err(ops, marg)
        buf = kb.scratch_for(bufsize + 4 * cnt) if ok else NULL
        ok = buf != NULL
        if ok:
            ix = <Py_ssize_t*> &buf[bufsize + 2 * cnt]
            kb.recomputed = kb_decide(ops, &idx[0], cnt, marg, err, d2_over - ops.c0, False, &d2[0], buf, ix,
                                      &buf[bufsize], True)
            ok = kb.recomputed >= 0
            kb.n_again += kb.recomputed
            for p in range(cnt):
                best = max(best, d2[p])
    if not ok:
        raise MemoryError("scan buffers")
    ops.n_eval += cnt * kb.filled
    thr = best - TIE * (fabs(best) + fabs(ops.c0))
    for p in range(cnt):
        if d2[p] >= thr:
            break
    return Scan(int(idx[p]), best + ops.c0, sample_d2=d2 + ops.c0)


cdef Py_ssize_t kb_chunk(FastMEBOps ops, _FullScan* fs, Py_ssize_t c, double marg, double err, Py_ssize_t bufsize,
                         double* vals) noexcept nogil:
    """Chunk c of a full scan through the block (full_scan, _scans.pxi): its inputs' d^2 - c0 into vals (exact
    wherever they may reach the chunk's TIE band or fs.over), its maximum and top-k beyond fs.over.  Returns
    how many were computed again in double (fs.tc[c] = -1 when out of memory)."""
    cdef Py_ssize_t p, lo = c * SCAN_CHUNK, hi = min(lo + SCAN_CHUNK, ops.kb.m), again = 0
    cdef double* buf = <double*> malloc((bufsize + 2 * SCAN_CHUNK) * sizeof(double))
    cdef Py_ssize_t* rows = <Py_ssize_t*> malloc(3 * SCAN_CHUNK * sizeof(Py_ssize_t))
    fs.tc[c] = -1  # (out of memory)
    fs.cmax[c] = -INFINITY
    if buf != NULL and rows != NULL:
        for p in range(lo, hi):
            rows[p - lo] = p
        again = kb_decide(ops, rows, hi - lo, marg, err, fs.over if fs.k > 0 else INFINITY, True, &vals[lo], buf,
                          &rows[SCAN_CHUNK], &buf[bufsize], False, False)
        _chunk_top(fs, c, &vals[lo], 0, lo, hi)
    free(buf)
    free(rows)
    return again


include "_kbrows.pxi"   # the block keyed by rows: kb_fill_rows, _RowInstall, row_block
