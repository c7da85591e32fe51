# The core-set QP by the exact active-set Newton method (fastimpl._engine; refimpl.simplex_qp.
# active_set_simplex): the free set F, the Cholesky factor L of Q_FF and the vectors yu = L^-1 l_F,
# yv = L^-1 1 persist between solves (_FreeSet) and are updated, not recomputed -- appending a coordinate
# or dropping one costs O(|F|^2), a Newton step two triangular solves -- and the gradient is refreshed
# from the free vectors' rows (or, when most of the core set is free, from the other rows).  The factor
# is charged to the row cache's budget (_cache.pxi: charge_factor).  Works on FastMEBOps' alpha and
# gradient, rows from FastMEBOps.qrow; the stopping gap is SMO's (_smo.pxi: grad_stats, most_violating).

#: the active set's gradient refresh runs in parallel from this many multiply-adds on
cdef Py_ssize_t GRAD_PARALLEL_MIN_WORK = 2_000_000


def _set_grad_parallel_min_work(Py_ssize_t work):
    """Set the active set's parallel threshold; returns the old one (tests use 0 to force the
    parallel gradient refresh on small problems)."""
    global GRAD_PARALLEL_MIN_WORK
    old = GRAD_PARALLEL_MIN_WORK
    GRAD_PARALLEL_MIN_WORK = work
    return old


cdef inline Py_ssize_t factor_doubles(Py_ssize_t nf, Py_ssize_t stride) noexcept nogil:
    """Resident doubles of the first nf rows of a row-major lower triangular factor at this stride: row r
    writes r + 1 doubles, so the pages behind them hold at most nf(nf+1)/2 doubles plus a page (512
    doubles) per row, and never more than the nf * stride doubles they span (plus the last page)."""
    return min(nf * stride + 512, nf * (nf + 1) // 2 + nf * 512)


@cython.final
cdef class _FreeSet:
    """The active set's state: free set, Cholesky factor of Q_FF (row-major, lower, stride fcap), work
    space.  fvalid is False until the factor is built from the support (and after SMO moved alpha)."""
    cdef Py_ssize_t* F              # the free coordinates (core positions), in free-set order
    cdef double* L                  # chol(Q_FF), row r at L[r * fcap]
    cdef double* rhs                # right-hand sides (2 fcap: the rank-one update's scratch too)
    cdef double* yu                 # L^-1 l_F
    cdef double* yv                 # L^-1 1
    cdef char* inF                  # inF[t]: core vector t is free
    cdef Py_ssize_t fcap, nf
    cdef Py_ssize_t fhw             # the most free coordinates its buffer has held (touched memory stays)
    cdef bint fvalid
    cdef _Owned own

    def __cinit__(self):
        owned_add(&self.own, <void**> &self.F, 0)
        owned_add(&self.own, <void**> &self.L, 0)
        owned_add(&self.own, <void**> &self.rhs, 0)
        owned_add(&self.own, <void**> &self.yu, 0)
        owned_add(&self.own, <void**> &self.yv, 0)
        owned_add(&self.own, <void**> &self.inF, 0)

    def __dealloc__(self):
        owned_free(&self.own)

    cdef void reserve(self, Py_ssize_t nf, Py_ssize_t extra, _RowCache cache) noexcept nogil:
        """Charge the factor (its buffer's high-water mark of nf rows), plus ``extra`` doubles, to the
        cache's budget and evict rows to honour it.  A factor of nf rows at stride fcap touches
        nf(nf+1)/2 doubles plus up to a page per row: the rest of each row's stride is never written, so
        it is never backed by memory, and rows once written stay resident until the buffer is freed."""
        if nf > self.fhw:
            self.fhw = nf
        cache.charge_factor(factor_doubles(self.fhw, self.fcap) + extra)

    cdef int ensure_capacity(self, Py_ssize_t k, _RowCache cache) noexcept nogil:
        """Room for k free coordinates (and k core vectors in inF), keeping F, L, yu, yv, inF intact."""
        cdef Py_ssize_t c = self.fcap, r
        cdef Py_ssize_t* F2
        cdef double* L2
        cdef double* b2
        cdef double* yu2
        cdef double* yv2
        cdef char* in2
        if k <= c:
            return 0
        while c < k:
            c = max(2 * c, 64)
        self.reserve(self.nf, factor_doubles(self.nf, c), cache)  # the old buffer and its copy, both alive
        F2 = <Py_ssize_t*> malloc(c * sizeof(Py_ssize_t))
        L2 = <double*> malloc(c * c * sizeof(double))
        b2 = <double*> malloc(2 * c * sizeof(double))
        yu2 = <double*> malloc(c * sizeof(double))
        yv2 = <double*> malloc(c * sizeof(double))
        in2 = <char*> malloc(c * sizeof(char))
        if F2 == NULL or L2 == NULL or b2 == NULL or yu2 == NULL or yv2 == NULL or in2 == NULL:
            free(F2); free(L2); free(b2); free(yu2); free(yv2); free(in2)
            return -1
        for r in range(c):
            in2[r] = 0
        if self.fcap > 0:
            memcpy(F2, self.F, self.nf * sizeof(Py_ssize_t))
            memcpy(yu2, self.yu, self.nf * sizeof(double))
            memcpy(yv2, self.yv, self.nf * sizeof(double))
            memcpy(in2, self.inF, self.fcap * sizeof(char))
            for r in range(self.nf):
                memcpy(&L2[r * c], &self.L[r * self.fcap], (r + 1) * sizeof(double))
        free(self.F); free(self.L); free(self.rhs); free(self.yu); free(self.yv); free(self.inF)
        self.F, self.L, self.rhs, self.fcap = F2, L2, b2, c
        self.yu, self.yv, self.inF = yu2, yv2, in2
        self.fhw = self.nf
        self.reserve(self.nf, 0, cache)
        return 0

    cdef void forward_vectors(self, Py_ssize_t start, const double* l) noexcept nogil:
        """yu = L^-1 l_F and yv = L^-1 1 from entry ``start`` on (earlier entries are unchanged)."""
        cdef Py_ssize_t a, ld = self.fcap
        cdef double* L = self.L
        cdef double au, av
        for a in range(start, self.nf):
            au = l[self.F[a]] - cv_dot4(&L[a * ld], self.yu, a)
            av = 1.0 - cv_dot4(&L[a * ld], self.yv, a)
            self.yu[a] = au / L[a * ld + a]
            self.yv[a] = av / L[a * ld + a]

    cdef void remove(self, Py_ssize_t k, const double* l) noexcept nogil:
        """F -= F[k]; the trailing block of L gets the rank-one update L33 L33' + l32 l32' (O(nf^2))."""
        cdef Py_ssize_t nf = self.nf, ld = self.fcap, i, j, n = nf - k - 1
        cdef double* L = self.L
        cdef double* x = self.rhs  # scratch: l32
        cdef double r, c, s_, Ljj, Lij
        for i in range(n):
            x[i] = L[(k + 1 + i) * ld + k]
        for j in range(n):
            Ljj = L[(k + 1 + j) * ld + (k + 1 + j)]
            r = sqrt(Ljj * Ljj + x[j] * x[j])
            c = r / Ljj
            s_ = x[j] / Ljj
            L[(k + 1 + j) * ld + (k + 1 + j)] = r
            for i in range(j + 1, n):
                Lij = (L[(k + 1 + i) * ld + (k + 1 + j)] + s_ * x[i]) / c
                L[(k + 1 + i) * ld + (k + 1 + j)] = Lij
                x[i] = c * x[i] - s_ * Lij
        # delete row k and column k
        self.inF[self.F[k]] = 0
        for i in range(k, nf - 1):
            self.F[i] = self.F[i + 1]
            for j in range(k):
                L[i * ld + j] = L[(i + 1) * ld + j]
            for j in range(k, i + 1):
                L[i * ld + j] = L[(i + 1) * ld + j + 1]
        self.nf = nf - 1
        self.forward_vectors(k, l)


cdef int _factor_free_set(FastMEBOps ops) noexcept nogil:
    """F := the support in ascending order (as np.flatnonzero) and L := chol(Q_FF) from scratch."""
    cdef Py_ssize_t t, a, b, nf = 0
    cdef double* row
    cdef int n_, info, ld
    cdef char upper = b'U'  # a row-major lower factor is a column-major upper one
    for t in range(ops.size):
        ops.fs.inF[t] = 0
        if ops.alpha[t] > 0:
            ops.fs.F[nf] = t
            ops.fs.inF[t] = 1
            nf += 1
    ops.fs.nf = nf
    ops.fs.reserve(nf, 0, ops.cache)
    for a in range(nf):
        row = ops.qrow(ops.fs.F[a], -1)
        if row == NULL:
            return -2
        for b in range(a + 1):
            ops.fs.L[a * ops.fs.fcap + b] = row[ops.fs.F[b]]
    n_ = <int> nf
    ld = <int> ops.fs.fcap
    dpotrf(&upper, &n_, ops.fs.L, &ld, &info)
    if info != 0:
        return -1
    for a in range(nf):
        if not (ops.fs.L[a * ops.fs.fcap + a] * ops.fs.L[a * ops.fs.fcap + a] > PIVOT_RTOL * ops.Qd[ops.fs.F[a]]):
            return -1
    ops.fs.forward_vectors(0, ops.l)
    return 0


cdef int _append_free(FastMEBOps ops, Py_ssize_t i) noexcept nogil:
    """F += [i]; L gains the row [w', delta] with L w = Q_Fi, delta^2 = Q_ii - w'w (O(nf^2))."""
    cdef Py_ssize_t a, nf = ops.fs.nf, ld
    cdef double* row
    cdef double* L
    cdef double d2 = ops.Qd[i]
    ops.fs.reserve(nf + 1, 0, ops.cache)   # before the row is fetched: eviction may not free it
    row = ops.qrow(i, -1)
    if row == NULL:
        return -2
    L = ops.fs.L
    ld = ops.fs.fcap
    for a in range(nf):
        L[nf * ld + a] = (row[ops.fs.F[a]] - cv_dot4(&L[a * ld], &L[nf * ld], a)) / L[a * ld + a]
        d2 -= L[nf * ld + a] * L[nf * ld + a]
    if not (d2 > PIVOT_RTOL * ops.Qd[i]):
        return -1  # Q_FF would not be numerically positive definite
    L[nf * ld + nf] = sqrt(d2)
    ops.fs.F[nf] = i
    ops.fs.inF[i] = 1
    ops.fs.nf = nf + 1
    ops.fs.forward_vectors(nf, ops.l)
    return 0


cdef inline double _own_row_gradient(FastMEBOps ops, Py_ssize_t t, const double* row) noexcept nogil:
    """g_t = 2 Q_t. alpha - l_t from row t of Q over the core set (_gradient_outside_free)."""
    return 2.0 * cv_dot4(row, ops.alpha, ops.size) - ops.l[t]


cdef int _gradient_outside_free(FastMEBOps ops, double lam) noexcept nogil:
    """At a free-set optimum: g_F = lambda exactly, and g_t = 2 Q_t. alpha - l_t for the core vectors
    outside F from their own rows (alpha is 0 off F, so the whole row's dot product is Q_tF alpha_F):
    (|S| - |F|) |S| multiply-adds in contiguous dot products, where the free rows cost |S| |F|; so only
    when |F| > |S| / 2 (most of the core set is free at large C), else returns -1 (the caller takes the
    free rows).  The choice depends on the sizes alone, and a row's values on the row alone (on
    AVX-512; AVX2 computes a fill's last n mod 4 entries with the scalar exp, so there they can
    differ by rounding with the range filled), so the fit does not depend on what the cache holds
    (cache_size).  Each g_t is one dot product in a fixed order, so the parallel pass over rows
    already cached gives the serial values.  Returns -2 when out of memory."""
    cdef Py_ssize_t size = ops.size, t, c, nchunk, lo, hi, step = 256
    cdef double* grad = ops.grad
    cdef double* row
    cdef double* scratch = NULL
    cdef char* inF = ops.fs.inF
    cdef double** rows = ops.cache.rows
    cdef bint all_cached = True
    if 2 * ops.fs.nf <= size:
        return -1
    for t in range(size):
        if not inF[t] and not ops.cache.cached(t, size):
            all_cached = False
            break
    if all_cached and (size - ops.fs.nf) * size >= GRAD_PARALLEL_MIN_WORK:
        nchunk = (size + step - 1) // step
        for c in prange(nchunk, schedule="static"):
            lo = c * step
            hi = min(lo + step, size)
            for t in range(lo, hi):
                grad[t] = lam if inF[t] else _own_row_gradient(ops, t, rows[t])
        return 0
    # serially, one row at a time: a cached row is completed in place (or regrown while the budget
    # has room); a row the cache does not hold is computed into scratch and not cached, so that under
    # a tight budget these rows do not evict the free rows the next steps need
    for t in range(size):
        if inF[t]:
            grad[t] = lam
            continue
        if ops.cache.has_room(t, size):
            row = ops.qrow(t, -1)
        else:
            if scratch == NULL:
                scratch = <double*> malloc(size * sizeof(double))
            row = scratch
            if row != NULL:
                ops._fill_row(t, 0, size, row)
        if row == NULL:
            free(scratch)
            return -2
        grad[t] = _own_row_gradient(ops, t, row)
    free(scratch)
    return 0


cdef int _gradient_from_free(FastMEBOps ops, double lam, bint at_optimum) noexcept nogil:
    """g_t = 2 Q_tF alpha_F - l_t for every core vector, from the rows of the free vectors (which the
    cache holds: they are the active ones); at a free-set optimum g_F = lambda exactly (and, when
    most of the core set is free, the others come from their own rows: _gradient_outside_free).  Each g_t
    sums over F in free-set order, so the chunked parallel pass gives the serial values bit for bit."""
    cdef Py_ssize_t size = ops.size, nf = ops.fs.nf, a, t, c, nchunk, lo, hi, step = 1024
    cdef double w
    cdef double* row
    cdef bint all_cached = True
    cdef double* grad = ops.grad
    if at_optimum:
        c = _gradient_outside_free(ops, lam)
        if c != -1:
            return c
    for a in range(nf):
        if not ops.cache.cached(ops.fs.F[a], size):
            all_cached = False
            break
    if all_cached and (size - nf) * nf >= GRAD_PARALLEL_MIN_WORK:
        nchunk = (size + step - 1) // step
        for c in prange(nchunk, schedule="static"):
            lo = c * step
            hi = min(lo + step, size)
            _gradient_chunk(ops, lo, hi)
    else:
        for t in range(size):
            grad[t] = -ops.l[t]
        for a in range(nf):
            row = ops.qrow(ops.fs.F[a], -1)
            if row == NULL:
                return -2
            w = 2.0 * ops.alpha[ops.fs.F[a]]
            for t in range(size):
                grad[t] += w * row[t]
    if at_optimum:
        for a in range(nf):
            grad[ops.fs.F[a]] = lam
    return 0


cdef void _gradient_chunk(FastMEBOps ops, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    cdef Py_ssize_t a, t
    cdef double w
    cdef const double* row
    for t in range(lo, hi):
        ops.grad[t] = -ops.l[t]
    for a in range(ops.fs.nf):
        row = ops.cache.rows[ops.fs.F[a]]
        w = 2.0 * ops.alpha[ops.fs.F[a]]
        for t in range(lo, hi):
            ops.grad[t] += w * row[t]


cdef int _newton_target(FastMEBOps ops, double* lam) noexcept nogil:
    """The Newton target of the free set in fs.rhs: with yu = L^-1 l_F and yv = L^-1 1 kept up to date,
    1'Q_FF^-1 l_F = yv'yu and 1'Q_FF^-1 1 = yv'yv, so lambda costs O(|F|) and the target
    (u + lambda v)/2 = L^-T (yu + lambda yv)/2 one backward substitution; then scaled to 1'alpha_F = 1.
    Returns 1 when every entry is positive, 0 when not, -1 when the free-set system is too
    ill-conditioned (non-finite, or cancellation in lambda)."""
    cdef Py_ssize_t a, k, nf = ops.fs.nf, ld = ops.fs.fcap
    cdef double* L = ops.fs.L
    cdef double* yu = ops.fs.yu
    cdef double* yv = ops.fs.yv
    cdef double* rhs = ops.fs.rhs
    cdef double su = 0.0, sv = 0.0, tg
    cdef bint allpos = True
    for a in range(nf):
        su += yv[a] * yu[a]
        sv += yv[a] * yv[a]
    if not (su == su and fabs(su) < INFINITY) or sv <= 0:
        return -1
    lam[0] = (2.0 - su) / sv
    for a in range(nf):
        rhs[a] = 0.5 * (yu[a] + lam[0] * yv[a])
    for a in range(nf - 1, -1, -1):
        rhs[a] /= L[a * ld + a]
        tg = rhs[a]
        for k in range(a):
            rhs[k] -= L[a * ld + k] * tg
    su = 0.0
    for a in range(nf):
        tg = rhs[a]
        su += tg
        if not (tg > 0):
            allpos = False
    if fabs(su - 1.0) > 1e-9:
        return -1  # cancellation in lambda: the free-set system is too ill-conditioned
    for a in range(nf):
        rhs[a] /= su  # remove the round-off left in 1'alpha = 1
    return 1 if allpos else 0


cdef void _blocking_step(FastMEBOps ops) noexcept nogil:
    """A target with entries <= 0: alpha_F moves toward it up to the first blocking coordinate (the ratio
    test along target - current, first in free-set order), which leaves the free set."""
    cdef Py_ssize_t a, t, kblock = -1, nf = ops.fs.nf
    cdef Py_ssize_t* F = ops.fs.F
    cdef double* rhs = ops.fs.rhs
    cdef double* alpha = ops.alpha
    cdef double s = INFINITY, r, d
    for a in range(nf):
        d = rhs[a] - alpha[F[a]]
        if d < 0:
            r = alpha[F[a]] / -d
            if r < s:
                s = r
    for a in range(nf):
        d = rhs[a] - alpha[F[a]]
        if d < 0 and alpha[F[a]] / -d <= s + TIE * s:
            kblock = a
            break
    for a in range(nf):
        t = F[a]
        alpha[t] = alpha[t] + s * (rhs[a] - alpha[t])
        if alpha[t] < 0:
            alpha[t] = 0.0
    alpha[F[kblock]] = 0.0
    ops.fs.remove(kblock, ops.l)


cdef Py_ssize_t active_set_solve(FastMEBOps ops, double tol, Py_ssize_t max_changes) noexcept nogil:
    """Exact active-set Newton solver for the core-set QP (refimpl.simplex_qp.active_set_simplex):
    same ratio test, entering rule and stopping gap.  Returns the number of Newton steps, -1 when Q_FF
    is not positive definite (the caller then runs SMO), -2 when out of memory."""
    cdef Py_ssize_t a, i, n_changes = 0, nf
    cdef double lam, gmin, gabs, gmax, gap
    cdef int rc, target
    if ops.fs.ensure_capacity(ops.size + 1, ops.cache) != 0:
        return -2
    if not ops.fs.fvalid:
        rc = _factor_free_set(ops)
        if rc != 0:
            return rc
        ops.fs.fvalid = True
    while True:
        nf = ops.fs.nf
        target = _newton_target(ops, &lam)
        if target < 0:
            ops.fs.fvalid = False
            return -1
        if target == 1:
            for a in range(nf):
                ops.alpha[ops.fs.F[a]] = ops.fs.rhs[a]
        else:
            _blocking_step(ops)
        n_changes += 1
        if target == 0:
            if n_changes >= max_changes:
                if _gradient_from_free(ops, 0.0, False) != 0:
                    return -2
                return n_changes
            continue
        if _gradient_from_free(ops, lam, True) != 0:
            return -2
        grad_stats(ops, &gmin, &gmax, &gabs)
        i = most_violating(ops, gmin, gabs)
        gap = gmax - ops.grad[i]
        if gap <= tol or n_changes >= max_changes:
            return n_changes
        if ops.alpha[i] > 0:
            return n_changes  # the gap is round-off within the exactly solved free set
        for a in range(nf):
            if ops.fs.F[a] == i:
                return n_changes
        rc = _append_free(ops, i)
        if rc != 0:
            ops.fs.fvalid = False
            return rc
