# Lookup kernels in the engine (fastimpl._engine): where it reads a callable's columns, which _krows' _Lookup keeps
# in a store bounded by half of cache_size (fastimpl/_lookup.pxi: slots, least recently used evicted, a column
# computed again on a miss, always by itself).  A 'precomputed' Gram matrix is read in place: nothing here.
from libc.math cimport NAN
from refimpl import kernels as refkernels
#
# * a Q row of core vector i is the column of x_i at the core vectors' rows (k_lookup): lookup_row_ready makes it
#   resident before FastMEBOps._fill_row reads it, with the GIL on a miss (the solvers run without it);
# * a scan's sums sum_t alpha_t s_t k(x_t, x) over the support: lookup_sums, with the GIL before the scan, the
#   support's columns in the support's order (each sum adds the same terms in the same order whatever is
#   cached); _kalpha (_scans.pxi) reads them in place of the support store's rows;
# * the initial pair's search (furthest_point, _scans.pxi) reads the column of z.


cdef void lookup_setup(FastMEBOps ops, problem, Py_ssize_t cache_size) except *:
    """ops.lookup for a lookup kernel (K.lk pointed at it); a callable's column store reserves its budget in the row
    cache's (whose rows then never need evicting when a column is allocated: the store grows under nogil code)."""
    ops.lookup = lookup_of(problem, &ops.K, cache_size)
    if ops.lookup is not None:
        ops.cache.lkheld = &ops.lookup.budget   # (0 for a Gram matrix)


cdef inline bint lookup_row_ready(FastMEBOps ops, Py_ssize_t i, Py_ssize_t lo, Py_ssize_t hi,
                                  double* r) noexcept nogil:
    """The column of core vector i resident for its Q row's entries [lo, hi) (a callable; True at once for the
    other kernels).  False when the callable raised: the entries are NaN, the exception kept for lookup_raise."""
    cdef bint ok
    cdef Py_ssize_t t
    if ops.K.lk == NULL or ops.K.lk.gram != NULL:
        return True
    with gil:
        ok = ops.lookup.ready(<Py_ssize_t> ops.X[ops.pz(ops.S[i]), 0])
    if not ok:
        for t in range(lo, hi):
            r[t] = NAN
    return ok


cdef void lookup_raise(FastMEBOps ops) except *:
    """Raise what a callable raised while the solvers ran (lookup_row_ready)."""
    if ops.lookup is not None:
        ops.lookup.raise_error()


#: kernel values per call of a sampled scan's block kernel(X[candidates], X[support vectors])
cdef Py_ssize_t SAMPLE_BLOCK = 1 << 16


cdef void lookup_sums(FastMEBOps ops, idx) except *:
    """A callable's scan (FastMEBOps.scan): the sums sum_t alpha_t s_t k(x_t, x) over the packed support, which
    _kalpha reads in place of the support store's rows, each adding its terms in the support's order.  A full scan
    (idx None: every input row) goes column by column of the support: cached columns read, the others computed
    again (into slots the sweep has not read, else the scratch column: _Lookup.column).  A sampled scan (idx: the
    candidates, sums by position) calls the kernel on its candidates' rows against blocks of the support -- the
    same calls whatever the cache holds, so the sums do not depend on it -- rather than on whole columns."""
    cdef _Lookup lk = ops.lookup
    cdef cnp.ndarray[Py_ssize_t, ndim=1, mode="c"] a
    cdef const double[:, ::1] B
    cdef Py_ssize_t t, p, lo, nb, cnt = ops.m, nsv = ops.sup.n
    cdef long long fresh
    cdef const double* col
    cdef double w
    cdef double* out
    if lk is None or lk.L.gram != NULL:
        return
    out = lk.sums_buffer()
    if idx is not None:
        a = np.ascontiguousarray(np.asarray(idx, dtype=np.intp) % max(ops.m, 1))
        cnt = a.shape[0]
    for p in range(cnt):
        out[p] = 0.0
    if idx is not None and cnt > 0:
        cand = lk.xrows[a]
        sv = np.array([<Py_ssize_t> ops.sup.store.data[t] for t in range(nsv)], dtype=np.intp)
        nb = max(1, SAMPLE_BLOCK // cnt)
        for lo in range(0, nsv, nb):
            B = np.ascontiguousarray(refkernels.call_kernel(lk.source.function, cand, lk.source.data[sv[lo:lo + nb]]))
            lk.n_eval += B.shape[0] * B.shape[1]
            for t in range(B.shape[1]):
                w = ops.sup.coef[lo + t]
                for p in range(cnt):
                    out[p] += w * B[p, t]
    elif idx is None:
        fresh = lk.tick + 1
        for t in range(nsv):
            col = lk.column(<Py_ssize_t> ops.sup.store.data[t], fresh)
            w = ops.sup.coef[t]
            for p in range(cnt):
                out[p] += w * col[p]
    lk.L.sums = out


def lookup_column_state(FastMEBOps ops):
    """A callable's column store (_Lookup.column_state: columns cached, slots at most, doubles held, their peak, the
    budget in doubles, columns computed, kernel values computed), or None: for tests of its bound."""
    return ops.lookup.column_state() if ops.lookup is not None and ops.lookup.L.gram == NULL else None
