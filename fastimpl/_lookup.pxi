# Lookup kernels (fastimpl._krows): kernel='precomputed' and callable kernels, whose points are the training
# indices (refimpl.kernels.index_points; a problem's rows may be a subset of them: ``rows``).
#
# 'precomputed': the Gram matrix is read in place (C-contiguous float64, the estimator's input check).
#
# Callable: every value the engine reads comes from a *column*, k(x_r, x_j) over the problem's rows r for one
# training point j: a Q row of core vector i is the column of x_i at the core vectors' rows (k_lookup, the query's
# column, which FastMEBOps._fill_row makes resident), a scan's weighted sums run over the support's columns
# (_lookup_ops.pxi), the initial pair's search reads the column of z.  Columns are kept in at most ``slotcap``
# slots, which with a sweep's scratch column and the scans' sums stay within half of the fit's cache_size (the Q
# rows, the stores and the factor get the rest: the engine's _RowCache charges these doubles too); a miss computes
# the column again into a free slot or the least recently used one's.  No store is m x m: nothing here grows
# with the core set beyond the budget.
#
# A column is always computed by itself, ``kernel(X[rows[lo:hi]], X[j:j+1])`` on blocks of COLUMN_BLOCK rows (a
# block of rows, never a pair): its values then do not depend on which other columns were missing at the same
# time, so a fit's model is the same, bit for bit, with any cache_size (a kernel computed through BLAS can give
# the last bits of a value differently for blocks of different shapes).

#: rows per call of the callable for one column (its temporaries stay small beside the column itself)
cdef Py_ssize_t COLUMN_BLOCK = 1 << 16


cdef class _Lookup:
    """The training kernel of a lookup kernel (kernel='precomputed' or a callable) for one problem, whose points
    are the training indices ``rows``: the Gram matrix's pointer, or the callable's column store (see above)."""

    def __dealloc__(self):
        cdef Py_ssize_t p
        if self.cols_ != NULL:
            for p in range(self.nslots):
                free(self.cols_[p])
        free(self.cols_)
        free(self.colpos_)
        free(self.owner)
        free(self.used)
        free(self.scratch)
        free(self.sums_)

    def __init__(self, source, rows, Py_ssize_t cache_size):
        cdef const double[:, ::1] G
        cdef const double[::1] dg
        cdef Py_ssize_t j, m = source.m
        self.source = source
        self.rows = np.ascontiguousarray(rows, dtype=np.intp)
        self.nrows = len(self.rows)
        diag = np.ascontiguousarray(source.diag, dtype=np.float64)
        self.keep = [diag]
        dg = diag
        self.L.diag = &dg[0] if m > 0 else NULL
        if source.gram is not None:
            gram = source.gram
            if not (isinstance(gram, np.ndarray) and gram.dtype == np.float64 and gram.flags.c_contiguous):
                raise ValueError("kernel='precomputed': the engine reads the Gram matrix in place, as a C-contiguous "
                                 "float64 array")
            self.keep.append(gram)
            G = gram
            self.L.gram = &G[0, 0] if m > 0 else NULL
            self.L.ld = m
            return
        rowpos = np.full(max(m, 1), -1, dtype=np.intp)
        rowpos[self.rows] = np.arange(self.nrows, dtype=np.intp)
        self.keep.append(rowpos)
        self.L.rowpos = <const Py_ssize_t*> cnp.PyArray_DATA(rowpos)
        # the rows the callable is given: the training rows themselves when the problem has them all, in order
        whole = self.nrows == m and bool(np.array_equal(self.rows, np.arange(m)))
        self.xrows = source.data if whole else source.data[self.rows]
        # half of cache_size for the slots, the scratch column and the sums; no more slots than columns there are
        self.slotcap = max(1, min(self.nrows, (max(cache_size, 0) // 2 // sizeof(double)) // max(self.nrows, 1) - 2))
        self.budget = (self.slotcap + 2) * self.nrows
        self.colpos_ = <Py_ssize_t*> malloc(max(m, 1) * sizeof(Py_ssize_t))
        self.cols_ = <double**> calloc(self.slotcap, sizeof(double*))
        self.owner = <Py_ssize_t*> malloc(self.slotcap * sizeof(Py_ssize_t))
        self.used = <long long*> calloc(self.slotcap, sizeof(long long))
        if self.colpos_ == NULL or self.cols_ == NULL or self.owner == NULL or self.used == NULL:
            raise MemoryError("callable kernel's columns")
        for j in range(m):
            self.colpos_[j] = -1
        self.L.colpos = self.colpos_
        self.L.cols = self.cols_

    cdef void _charge(self, Py_ssize_t doubles):
        self.held += doubles
        if self.held > self.peak:
            self.peak = self.held

    cdef void _fill(self, Py_ssize_t j, double* dst) except *:
        """dst[r] = k(x_r, x_j) for the problem's rows r: the callable on blocks of COLUMN_BLOCK rows."""
        cdef Py_ssize_t lo
        if self.nrows == 0:
            return
        out = np.asarray(<double[:self.nrows]> dst)
        X = self.xrows
        xj = self.source.data[j:j + 1]
        for lo in range(0, self.nrows, COLUMN_BLOCK):
            out[lo:lo + COLUMN_BLOCK] = refkernels.call_kernel(self.source.function, X[lo:lo + COLUMN_BLOCK], xj)[:, 0]
        self.n_eval += self.nrows
        self.n_columns += 1

    cdef const double* column(self, Py_ssize_t j, long long fresh) except NULL:
        """The column of training point j, now the most recently used: from its slot, or computed into a free slot,
        else into the least recently used slot if it was last used before the tick ``fresh``, else into the scratch
        column (valid until the next such call).  A Q row passes -1 (plain LRU); a scan's sweep over the
        support passes the tick it started at, so that it evicts no column it read itself: the columns it keeps
        stay for the next sweep, which reads them in the same order, instead of each evicting the next one read."""
        cdef Py_ssize_t p = self.colpos_[j], q
        cdef double* dst
        self.tick += 1
        if p >= 0:
            self.used[p] = self.tick
            return self.cols_[p]
        if self.nslots < self.slotcap:
            p = self.nslots
            dst = <double*> malloc(max(self.nrows, 1) * sizeof(double))
            if dst == NULL:
                raise MemoryError("callable kernel's columns")
            self.cols_[p] = dst
            self.owner[p] = -1
            self.nslots += 1
            self._charge(self.nrows)
        else:
            p = 0
            for q in range(1, self.nslots):
                if self.used[q] < self.used[p]:
                    p = q
            if 0 <= fresh <= self.used[p]:
                p = -1
        if p >= 0 and self.owner[p] >= 0:
            self.colpos_[self.owner[p]] = -1
            self.owner[p] = -1
        if p < 0:
            if self.scratch == NULL:
                self.scratch = <double*> malloc(max(self.nrows, 1) * sizeof(double))
                if self.scratch == NULL:
                    raise MemoryError("callable kernel's columns")
                self._charge(self.nrows)
            self._fill(j, self.scratch)
            return self.scratch
        self._fill(j, self.cols_[p])
        self.owner[p] = j
        self.colpos_[j] = p
        self.used[p] = self.tick
        return self.cols_[p]

    cdef bint ready(self, Py_ssize_t j) noexcept:
        """column(j, -1) for callers that cannot propagate an exception (nogil code): False when the callable
        raised, the exception kept for raise_error."""
        try:
            self.column(j, -1)
            return True
        except BaseException as e:
            self.error = e
            return False

    cdef void raise_error(self) except *:
        """Raise what the callable raised under ready, if it did."""
        if self.error is not None:
            e, self.error = self.error, None
            raise e

    cdef double* sums_buffer(self) except NULL:
        """The scans' weighted sums, nrows doubles (allocated once)."""
        if self.sums_ == NULL:
            self.sums_ = <double*> malloc(max(self.nrows, 1) * sizeof(double))
            if self.sums_ == NULL:
                raise MemoryError("callable kernel's sums")
            self._charge(self.nrows)
        return self.sums_

    def column_state(self):
        """(columns cached, slots at most, doubles held, their peak, the budget in doubles, columns computed, kernel
        values computed): for tests of the bounded column store."""
        return (int(self.nslots), int(self.slotcap), int(self.held), int(self.peak), int(self.budget),
                int(self.n_columns), int(self.n_eval))


cdef _Lookup lookup_of(problem, Kern* K, Py_ssize_t cache_size):
    """The _Lookup of a lookup kernel's problem (its points the training indices, refimpl.kernels.index_points),
    with ``K.lk`` pointed at it; None for the other kernels.  A callable's columns get half of ``cache_size``."""
    cdef _Lookup lk
    if not k_is_lookup(K):
        return None
    if problem.kernel.source is None or sp.issparse(problem.X) or problem.X.shape[1] != 1:
        raise ValueError("a lookup kernel's problem has the index points of refimpl.kernels.index_points and a "
                         "KernelSpec holding its training kernel")
    lk = _Lookup(problem.kernel.source, refkernels.point_indices(problem.X), cache_size)
    K.lk = &lk.L
    return lk
