# The LRU cache of Q rows and the memory budget of the core set (fastimpl._engine; LIBSVM's design).
#
# Rows of Q = K~[S, S], one per core vector, are kept up to ``budget`` doubles: a row is computed once,
# extended when the core set grows, and recomputed only after eviction (least recently used first).  The
# budget also covers what else the core set holds -- the active set's Cholesky factor (``charge_factor``)
# and the core and support stores (read from the stores) -- so ``cache_size`` bounds all of it.
#
# The cache holds memory, not kernels: FastMEBOps.qrow asks it for row i's buffer (``slot``), fills the
# entries the row lacks and records them in ``rlen``.  Rows are read in place by the solvers
# (``rows[t]``, valid for t's first ``rlen[t]`` core vectors).

@cython.final
cdef class _RowCache:
    cdef double** rows            # row t of Q over the core set, or NULL
    cdef Py_ssize_t* rlen         # its computed entries
    cdef Py_ssize_t* rcap         # its capacity
    cdef Py_ssize_t* lprev        # the LRU list, most recently used first
    cdef Py_ssize_t* lnext
    cdef Py_ssize_t lhead, ltail
    cdef Py_ssize_t cap           # entries of the arrays above (the core set's capacity)
    cdef Py_ssize_t used          # doubles held by rows
    cdef Py_ssize_t budget        # doubles allowed for rows, factor and stores together
    cdef Py_ssize_t fres          # doubles of the budget held by the active set's Cholesky factor
    cdef _KBlock kb               # the scans' kernel block (_kblock.pxi), charged too
    cdef Py_ssize_t peak          # the most doubles rows, factor and stores have held together (held)
    cdef _PointStore core         # the stores charged to the budget (their own coordinates or CSR rows)
    cdef _PointStore sv
    cdef const Py_ssize_t* lkheld # doubles a callable's column store reserves (_lookup.pxi), charged too, or NULL
    cdef _Owned own

    def __cinit__(self):
        owned_add(&self.own, <void**> &self.rows, sizeof(double*))
        owned_add(&self.own, <void**> &self.rlen, sizeof(Py_ssize_t))
        owned_add(&self.own, <void**> &self.rcap, sizeof(Py_ssize_t))
        owned_add(&self.own, <void**> &self.lprev, sizeof(Py_ssize_t))
        owned_add(&self.own, <void**> &self.lnext, sizeof(Py_ssize_t))
        self.lhead = -1
        self.ltail = -1

    def __dealloc__(self):
        cdef Py_ssize_t t
        if self.rows != NULL:
            for t in range(self.cap):
                free(self.rows[t])
        owned_free(&self.own)

    cdef void setup(self, Py_ssize_t cache_size, _PointStore core, _PointStore sv, _KBlock kb) except *:
        self.budget = max(cache_size, 0) // sizeof(double)
        self.core = core
        self.sv = sv
        self.kb = kb

    cdef void compact(self, const Py_ssize_t* newpos, Py_ssize_t old) except *:
        """Follow a pruning of the core set (FastMEBOps.prune): position t of ``old`` moves to newpos[t], or
        leaves (-1).  The dropped rows are freed, the kept rows' columns compacted in place (kept positions
        are increasing, so entry j moves to newpos[j] <= j) and moved to their new positions, in the same
        LRU order."""
        cdef Py_ssize_t t, a = 0, b, j
        cdef double* r
        cdef Py_ssize_t* order = <Py_ssize_t*> malloc(max(old, 1) * sizeof(Py_ssize_t))
        if order == NULL:
            raise MemoryError("prune")
        t = self.lhead   # the LRU order of the kept rows, most recent first (old positions)
        while t >= 0:
            if newpos[t] >= 0:
                order[a] = t
                a += 1
            t = self.lnext[t]
        for t in range(old):
            r = self.rows[t]
            if r == NULL:
                continue
            if newpos[t] < 0:
                self.used -= self.rcap[t]
                free(r)
                self.rows[t] = NULL
                self.rlen[t] = 0
                self.rcap[t] = 0
                continue
            b = 0
            for j in range(self.rlen[t]):
                if newpos[j] >= 0:
                    r[b] = r[j]
                    b += 1
            self.rlen[t] = b
        for t in range(old):
            j = newpos[t]
            if j >= 0 and j != t:
                self.rows[j] = self.rows[t]
                self.rlen[j] = self.rlen[t]
                self.rcap[j] = self.rcap[t]
                self.rows[t] = NULL
                self.rlen[t] = 0
                self.rcap[t] = 0
        for t in range(old):
            self.lprev[t] = -1
            self.lnext[t] = -1
        self.lhead = -1
        self.ltail = -1
        for b in range(a - 1, -1, -1):   # least recent first, each to the front
            self._front(newpos[order[b]])
        free(order)

    cdef void grow(self, Py_ssize_t newcap) except *:
        """Room for the rows of ``newcap`` core vectors (the new ones not cached)."""
        cdef Py_ssize_t t
        owned_grow(&self.own, newcap)
        for t in range(self.cap, newcap):
            self.rows[t] = NULL
            self.rlen[t] = 0
            self.rcap[t] = 0
            self.lprev[t] = -1
            self.lnext[t] = -1
        self.cap = newcap

    cdef inline bint cached(self, Py_ssize_t t, Py_ssize_t size) noexcept nogil:
        """Row t is held with its first ``size`` entries."""
        return self.rows[t] != NULL and self.rlen[t] >= size

    cdef inline void _unlink(self, Py_ssize_t t) noexcept nogil:
        if self.lprev[t] >= 0:
            self.lnext[self.lprev[t]] = self.lnext[t]
        else:
            self.lhead = self.lnext[t]
        if self.lnext[t] >= 0:
            self.lprev[self.lnext[t]] = self.lprev[t]
        else:
            self.ltail = self.lprev[t]
        self.lprev[t] = -1
        self.lnext[t] = -1

    cdef inline void _front(self, Py_ssize_t t) noexcept nogil:
        self.lprev[t] = -1
        self.lnext[t] = self.lhead
        if self.lhead >= 0:
            self.lprev[self.lhead] = t
        self.lhead = t
        if self.ltail < 0:
            self.ltail = t

    cdef inline Py_ssize_t held(self) noexcept nogil:
        """Doubles held against the budget: cached rows, the Cholesky factor, and the core and support
        stores (the core vectors' own coordinates or CSR rows), the scans' kernel block and a callable's columns."""
        return self.used + self.fres + (self.core.nbytes() + self.sv.nbytes() + self.kb.nbytes()) // sizeof(double) \
            + (self.lkheld[0] if self.lkheld != NULL else 0)

    cdef void evict_for(self, Py_ssize_t need, Py_ssize_t keep1, Py_ssize_t keep2) noexcept nogil:
        """Free least-recently used rows until ``need`` more doubles fit the budget (rows keep1/keep2
        stay: SMO holds two rows at once)."""
        self._evict(need, keep1, keep2, 0, NULL)

    cdef double* _evict(self, Py_ssize_t need, Py_ssize_t keep1, Py_ssize_t keep2, Py_ssize_t fits,
                        Py_ssize_t* reuse_cap) noexcept nogil:
        """evict_for, and with ``reuse_cap`` the buffer of the first evicted row that holds ``fits``
        doubles is kept (its capacity in reuse_cap[0], still counted in ``used``) and returned for the
        row the room is made for (NULL where none did).

        Why: a row's buffer is larger than glibc's mmap threshold (128 kB) from 16,000 core vectors, and
        a buffer freed and allocated again came back as fresh pages that the kernel first zeroes -- on
        CASP's fit (23,000 core vectors, most SMO steps evicting two rows) 22% of the fit's CPU time.
        An evicted buffer of the size needed is the row's new buffer as it stands."""
        cdef Py_ssize_t t = self.ltail, prev
        cdef Py_ssize_t over = self.held() + need - self.budget   # only ``used`` changes below
        cdef double* kept = NULL
        while over > 0 and t >= 0:
            prev = self.lprev[t]
            if t != keep1 and t != keep2:
                self._unlink(t)
                if reuse_cap != NULL and kept == NULL and self.rcap[t] >= fits:
                    kept = self.rows[t]          # its doubles stay in ``used``, now for the new row
                    reuse_cap[0] = self.rcap[t]
                    over -= need             # the room asked for is this buffer's
                else:
                    self.used -= self.rcap[t]
                    over -= self.rcap[t]
                    free(self.rows[t])
                self.rows[t] = NULL
                self.rlen[t] = 0
                self.rcap[t] = 0
            t = prev
        return kept

    cdef void charge_factor(self, Py_ssize_t doubles) noexcept nogil:
        """The Cholesky factor now holds ``doubles`` of the budget: evict rows to honour it."""
        self.fres = doubles
        self.evict_for(0, -1, -1)
        self.note_peak()

    cdef void charge_block(self) noexcept nogil:
        """The kernel block grew (it is read through held()): evict rows to honour the budget."""
        self.evict_for(0, -1, -1)
        self.note_peak()

    cdef inline void note_peak(self) noexcept nogil:
        cdef Py_ssize_t held = self.held()
        if held > self.peak:
            self.peak = held

    cdef inline Py_ssize_t row_cap(self, Py_ssize_t size) noexcept nogil:
        """The capacity a Q row gets when it is (re)allocated: room for a quarter more core vectors."""
        cdef Py_ssize_t newcap = max(size + size // 4, 16)
        return max(self.cap, size) if newcap > self.cap else newcap

    cdef inline bint has_room(self, Py_ssize_t t, Py_ssize_t size) noexcept nogil:
        """Row t is cached and holds ``size`` entries, or can grow to them (row_cap) within the budget
        without evicting another row."""
        return self.rows[t] != NULL and (self.rcap[t] >= size
                                         or self.held() + self.row_cap(size) - self.rcap[t] <= self.budget)

    cdef bint regrow(self, Py_ssize_t t, Py_ssize_t size) noexcept nogil:
        """Cached row t with room for ``size`` entries: grown in place where has_room allows it (nothing
        evicted, the LRU order unchanged, its entries kept); False where it does not, or out of memory."""
        cdef Py_ssize_t newcap
        cdef double* r
        if self.rcap[t] >= size:
            return True
        if not self.has_room(t, size):
            return False
        newcap = self.row_cap(size)
        r = <double*> realloc(self.rows[t], newcap * sizeof(double))
        if r == NULL:
            return False
        self.used += newcap - self.rcap[t]
        self.rows[t] = r
        self.rcap[t] = newcap
        self.note_peak()
        return True

    cdef double* slot(self, Py_ssize_t i, Py_ssize_t size, Py_ssize_t keep, Py_ssize_t* lo) noexcept nogil:
        """Row i's buffer with room for ``size`` entries, now the most recently used; ``lo[0]``: how many
        of its entries are computed (the caller fills the rest up to ``size`` and sets rlen[i]).  NULL
        when no memory is left.  ``keep`` is a row that must not be evicted meanwhile (or -1)."""
        cdef Py_ssize_t newcap, reuse_cap = 0
        cdef double* reused
        cdef double* r = self.rows[i]
        lo[0] = self.rlen[i]
        if r != NULL and lo[0] >= size:
            if self.lhead != i:
                self._unlink(i)
                self._front(i)
            return r
        if r == NULL:
            newcap = self.row_cap(size)
            reused = self._evict(newcap, i, keep, size, &reuse_cap)
            lo[0] = 0
            if reused != NULL:
                r = reused                       # already counted in ``used``
                newcap = reuse_cap
            else:
                r = <double*> malloc(newcap * sizeof(double))
                if r == NULL:
                    return NULL
                self.used += newcap
            self.note_peak()
            self.rows[i] = r
            self.rcap[i] = newcap
            self._front(i)
        elif self.rcap[i] < size:
            newcap = self.row_cap(size)
            self.evict_for(newcap - self.rcap[i], i, keep)
            r = <double*> realloc(r, newcap * sizeof(double))
            if r == NULL:
                return NULL
            self._unlink(i)
            self.used += newcap - self.rcap[i]
            self.note_peak()
            self.rows[i] = r
            self.rcap[i] = newcap
            self._front(i)
        elif self.lhead != i:
            self._unlink(i)
            self._front(i)
        return r
