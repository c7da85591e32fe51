# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""MMDA(CVM) numerics in C: SOR on the core-set sub-problem, the distance scans and kernel blocks.

* :func:`sor_solve` is Algorithm 3 of [004] (``refimpl.sor.sor_solve``) with
  the same arithmetic in the same order and the same tie rule, so its steps match the reference;
* :func:`constrained_gx` and :func:`constrained_furthest` are the (G x)_l scans of eqs. (23), (40)
  (``ConstrainedOps.gx`` / ``furthest``) in one pass over the candidates: the weighted rows of the
  kernel-row layer (``_krows.pxd``: ``weighted_rows``) against the support in a store with the scalar
  kernels' arithmetic (Gaussian/Laplacian: by coordinate, the rows vectorised over the support vectors,
  ``ROWS_KROW``; others: by row, ``ROWS_SCALAR``), rows of X read in place, the projection term from the
  per-fit table ``ConstrainedOps.proj_table``;
* :func:`kernel_matrix` fills |A| x |B| kernel blocks row by row under ``nogil`` with OpenMP
  ``prange`` (the dense matrices of the baselines and the ``transform`` of new data), from the same
  stores of B;
* :func:`kernel_expansion` is the engine's expansion with this module's parallel threshold;
* :class:`FastConstrainedOps` plugs them (and SOR) into the constrained core-set loop of
  ``refimpl.constrained_meb`` (the loop itself is shared, so both implementations make the same
  random draws and decisions; G_t's entries come from the same NumPy code in both).
"""
import numpy as np
cimport numpy as cnp
from cython.parallel cimport prange
from libc.math cimport exp, sqrt, fabs
from libc.stdlib cimport malloc, free

from refimpl.constrained_meb import ConstrainedOps

from fastimpl import _engine

cnp.import_array()

include "_tolerances.pxi"   # TIE (and TAU, PIVOT_RTOL) of refimpl.simplex_qp
# below this many kernel evaluations a block is filled serially
cdef Py_ssize_t PARALLEL_MIN_WORK = 1000000
# columns per packed block of kernel_matrix's radial rows (16 coordinates: 128 KB)
cdef Py_ssize_t RADIAL_BLOCK = 1024

from fastimpl._krows cimport (Kern, Queries, _PointStore, ROWS_KROW, ROWS_SCALAR, make_kern, k_is_radial,
                              k_is_normalized, k_raw, dense_queries, rows_scratch, weighted_rows, cv_simd_level)

#: 1 when the radial kernel rows run the AVX2 copy (see cv_radial_row_krow in _simd.h)
RADIAL_AVX2 = 1 if cv_simd_level() > 0 else 0


def sor_solve(double[:, :] G, double[::1] g, double[::1] x, bounded, double omega, double tol,
              long long max_steps):
    """Algorithm 3 (see ``refimpl.sor.sor_solve``); x and g are updated in place.

    G is symmetric, so the column G[:, i] of the gradient update is read as the row G[i, :]; G may
    be a leading block of a larger C-contiguous buffer (rows contiguous).  Returns ``(n_steps, residual)``.
    """
    cdef Py_ssize_t n = G.shape[0], i, k, best_i
    cdef const unsigned char[::1] bnd = np.ascontiguousarray(bounded, dtype=np.uint8)
    cdef double[::1] diag = np.empty(n)
    cdef double[::1] size = np.empty(n)
    cdef double[::1] delta = np.empty(n)
    cdef double dv, best, res, r, di
    cdef long long steps = 0
    cdef double* row
    if n > 0 and G.strides[1] != sizeof(double):
        raise ValueError("G must have contiguous rows")
    for k in range(n):
        diag[k] = G[k, k]
    with nogil:
        while True:
            best = 0.0
            res = 0.0
            for k in range(n):
                dv = -omega * g[k] / diag[k]
                if bnd[k]:
                    r = x[k] + dv
                    if r < 0.0:
                        r = 0.0
                    dv = r - x[k]
                delta[k] = dv
                dv = fabs(dv)
                size[k] = dv
                if dv > best:
                    best = dv
                r = dv * diag[k]
                if r > res:
                    res = r
            res = res / omega
            if res <= tol or steps >= max_steps:
                break
            best_i = 0
            for k in range(n):
                if size[k] >= best - TIE * best:
                    best_i = k
                    break
            i = best_i
            di = delta[i]
            x[i] += di
            if bnd[i] and x[i] < 0.0:
                x[i] = 0.0
            row = &G[i, 0]
            for k in range(n):
                g[k] += di * row[k]
            steps += 1
    return int(steps), float(res)


def kernel_matrix(spec, A, B):
    """[k(a_i, b_j)] (same as refimpl.kernels.kernel_block), rows in parallel."""
    cdef const double[:, ::1] a = np.ascontiguousarray(A, dtype=np.float64)
    cdef const double[:, ::1] b = np.ascontiguousarray(B, dtype=np.float64)
    cdef Py_ssize_t na = a.shape[0], nb = b.shape[0], d = a.shape[1], i, t
    cdef cnp.ndarray[double, ndim=2, mode="c"] out = np.empty((na, nb))
    cdef double[:, ::1] o = out
    cdef Kern K = make_kern(spec, d)
    cdef _PointStore store = _PointStore()
    cdef Py_ssize_t j0, nbk
    if na == 0 or nb == 0:
        return out
    if k_is_radial(&K):
        # Gaussian / Laplacian: B by coordinate (ROWS_KROW: k_row's sums vectorised over the columns), in
        # blocks of RADIAL_BLOCK columns (a block stays in cache for all rows)
        store.setup_kind(K, min(nb, RADIAL_BLOCK), ROWS_KROW)
        with nogil:
            j0 = 0
            while j0 < nb:
                nbk = min(RADIAL_BLOCK, nb - j0)
                store.n = 0
                for t in range(nbk):
                    store.put(t, &b[j0 + t, 0])
                for i in prange(na, schedule="static", use_threads_if=na * nb >= PARALLEL_MIN_WORK):
                    store.row(0, nbk, &a[i, 0], 0.0, 1.0, &o[i, j0])
                j0 += nbk
        return out
    # the dot-product kernels: B read in place by k_row (ROWS_SCALAR)
    store.view(K, &b[0, 0], nb, ROWS_SCALAR)
    with nogil:
        for i in prange(na, schedule="static", use_threads_if=na * nb >= PARALLEL_MIN_WORK):
            store.row(0, nb, &a[i, 0], 0.0, k_raw(&K, &a[i, 0], &a[i, 0]) if k_is_normalized(&K) else 1.0,
                      &o[i, 0])
    return out


def kernel_expansion(spec, SV, coef, X):
    """f(x) = sum_t coef_t k(sv_t, x): the engine's expansion, parallel only from this module's larger
    PARALLEL_MIN_WORK (the 59-point samples of the constrained loop do not pay for threads)."""
    return _engine.kernel_expansion(spec, SV, coef, X, PARALLEL_MIN_WORK)


cdef Py_ssize_t _gx_core(Kern* K, const double[:, ::1] X, const signed char[::1] sign,
                         const Py_ssize_t[::1] idx, const Py_ssize_t[::1] S, const double[::1] alpha,
                         double label_bias, double diag_add, const double[:, ::1] proj,
                         const double[::1] gamma, Py_ssize_t[::1] pos, double* out) except -1:
    """Fills out[i] = (G x)_{idx[i]} (see :func:`constrained_gx`); returns the support size."""
    cdef Py_ssize_t m = X.shape[0], d = X.shape[1], nq = idx.shape[0], nt = S.shape[0]
    cdef Py_ssize_t ns = gamma.shape[0], i, j, t, l, q, nsv = 0, bufsize
    cdef bint has_sign = sign.shape[0] > 0
    cdef _PointStore sv = _PointStore()     # the support: by coordinate (radial kernels) or by row
    cdef Queries Q = dense_queries(&X[0, 0] if m > 0 else NULL, m, d)
    cdef double* coef
    cdef double* sva
    cdef double* buf
    cdef double asum = 0.0, v
    if nt != alpha.shape[0] or (has_sign and sign.shape[0] != m) or pos.shape[0] != m \
            or (ns and (proj.shape[0] != m or proj.shape[1] != ns)):
        raise ValueError("constrained_gx: inconsistent shapes")
    for i in range(nq):
        if idx[i] < 0 or idx[i] >= m:
            raise IndexError("constrained_gx: candidate index out of range")
    for t in range(nt):
        if S[t] < 0 or S[t] >= m:
            raise IndexError("constrained_gx: core index out of range")
        if alpha[t] > 0:
            nsv += 1
    sv.setup_kind(K[0], nsv, ROWS_KROW if k_is_radial(K) else ROWS_SCALAR)
    coef = <double*> malloc((nsv + 1) * sizeof(double))
    sva = <double*> malloc((nsv + 1) * sizeof(double))
    bufsize = rows_scratch(sv, &Q, nsv, 1)
    cdef bint parallel = nq * nsv >= PARALLEL_MIN_WORK
    with nogil:
        j = 0
        for t in range(nt):
            if alpha[t] > 0:
                l = S[t]
                sva[j] = alpha[t]
                coef[j] = alpha[t] * (<double> sign[l] if has_sign else 1.0)
                asum += coef[j]
                pos[l] = j
                sv.put(j, &X[l, 0])
                j += 1
        for i in prange(nq, schedule="static", use_threads_if=parallel):
            l = idx[i]
            buf = <double*> malloc(bufsize * sizeof(double))
            weighted_rows(sv, &Q, &idx[0], i, i + 1, 0, coef, False, False, &out[i], 1, buf)
            v = out[i] + label_bias * asum
            if has_sign:
                v = v * <double> sign[l]
            if diag_add != 0.0 and pos[l] >= 0:
                v = v + diag_add * sva[pos[l]]
            for q in range(ns):
                v = v + proj[l, q] * gamma[q]
            out[i] = v
            free(buf)
        for t in range(nt):
            pos[S[t]] = -1
    free(coef)
    free(sva)
    return nsv


def constrained_gx(spec, const double[:, ::1] X, const signed char[::1] sign, const Py_ssize_t[::1] idx,
                   const Py_ssize_t[::1] S, const double[::1] alpha, double label_bias, double diag_add,
                   const double[:, ::1] proj, const double[::1] gamma, Py_ssize_t[::1] pos):
    """(G x)_l of ``refimpl.constrained_meb.ConstrainedOps.gx`` for the candidates ``idx``, in one pass.

    X : (m, d) all points (rows read in place, no gathers);  sign : (m,) s_l, or empty for all +1;
    S, alpha : the core set and its alpha (only alpha > 0 enters);  proj : (m, s) rows of Phi~'U~
    (``ConstrainedOps.proj_table``), gamma : (s,);  pos : (m,) scratch, all -1 on entry and on exit
    (the position of each support vector in the packed support, for the c alpha_l [l in S] term).

    Per candidate: y_l [sum_j a_j y_j k(x_j, x_l) + beta_b sum_j a_j y_j] + c alpha_l + proj_l'gamma.
    For the Gaussian and Laplacian kernels the support is stored by coordinate (d x n_sv, ``ROWS_KROW``), so
    that the squared distances of one candidate to all support vectors accumulate coordinate by
    coordinate in a vectorised loop (``cv_radial_row_krow``: each distance summed in the same order as
    ``k_row``), then one vector exp.  Returns ``(out, n_sv)``.
    """
    cdef Kern K = make_kern(spec, X.shape[1])
    cdef cnp.ndarray[double, ndim=1, mode="c"] out = np.empty(idx.shape[0])
    nsv = _gx_core(&K, X, sign, idx, S, alpha, label_bias, diag_add, proj, gamma, pos, &out[0] if idx.shape[0] else NULL)
    return out, int(nsv)


def constrained_furthest(spec, const double[:, ::1] X, const signed char[::1] sign, const Py_ssize_t[::1] idx,
                         const Py_ssize_t[::1] S, const double[::1] alpha, double label_bias, double diag_add,
                         const double[:, ::1] proj, const double[::1] gamma, Py_ssize_t[::1] pos,
                         const double[::1] lin, double A, double cc):
    """``ConstrainedOps.furthest``: d_l^2 = c'c - 2 (G x)_l / A + eta_l (same operations in the same
    order as the NumPy expression) for the candidates, and the first one within a relative TIE of
    the largest.  lin : (m,) eta_l of all points.  Returns ``(index, d^2, n_sv)``."""
    cdef Py_ssize_t nq = idx.shape[0], i, k = 0
    cdef Kern K = make_kern(spec, X.shape[1])
    cdef double best, v
    cdef double* g
    if nq == 0:
        raise ValueError("constrained_furthest: no candidates")
    if lin.shape[0] != X.shape[0]:
        raise ValueError("constrained_furthest: inconsistent shapes")
    g = <double*> malloc(nq * sizeof(double))
    try:
        nsv = _gx_core(&K, X, sign, idx, S, alpha, label_bias, diag_add, proj, gamma, pos, g)
        for i in range(nq):
            g[i] = cc - 2.0 * g[i] / A + lin[idx[i]]
        best = g[0]
        for i in range(1, nq):
            if g[i] > best:
                best = g[i]
        for i in range(nq):
            if g[i] >= best - TIE * fabs(best):
                k = i
                break
    finally:
        free(g)
    return int(idx[k]), float(best), int(nsv)


def finish_kt_block(double[:, ::1] K, const Py_ssize_t[::1] rows, const Py_ssize_t[::1] cols,
                    const signed char[::1] sign, double label_bias, double diag_add):
    """In place, the bookkeeping of ``ConstrainedOps.kt_block`` on the raw kernel block K:
    K_ij = (K_ij + beta_b) (s_i s_j) [+ (c if rows_i == cols_j else 0) when c != 0], the same
    floating-point operations as the NumPy code (so the same bits).  sign empty means all +1."""
    cdef Py_ssize_t nr = K.shape[0], nc = K.shape[1], i, j
    cdef bint has_sign = sign.shape[0] > 0
    cdef double si, sj
    if rows.shape[0] != nr or cols.shape[0] != nc:
        raise ValueError("finish_kt_block: inconsistent shapes")
    for i in range(nr):
        if has_sign and not (0 <= rows[i] < sign.shape[0]):
            raise IndexError("finish_kt_block: row index out of range")
    for j in range(nc):
        if has_sign and not (0 <= cols[j] < sign.shape[0]):
            raise IndexError("finish_kt_block: column index out of range")
    with nogil:
        for i in range(nr):
            si = <double> sign[rows[i]] if has_sign else 1.0
            for j in range(nc):
                sj = <double> sign[cols[j]] if has_sign else 1.0
                K[i, j] = (K[i, j] + label_bias) * (si * sj)
                if diag_add != 0.0:
                    K[i, j] = K[i, j] + (diag_add if rows[i] == cols[j] else 0.0)


class FastConstrainedOps(ConstrainedOps):
    """``refimpl.constrained_meb.ConstrainedOps`` with its numerics in C."""

    def __init__(self, problem, omega=1.0):
        super().__init__(problem, omega)
        b = self.base
        self._X = np.ascontiguousarray(b.X, dtype=np.float64)
        self._sign = np.zeros(0, dtype=np.int8) if b.sign is None else np.ascontiguousarray(b.sign, dtype=np.int8)
        self._pos = np.full(b.n, -1, dtype=np.intp)
        self._no_proj = np.zeros((0, 0))
        self._no_gamma = np.zeros(0)
        self._lin = None

    def _lin_table(self):
        """eta_l of all points (``base.linear_term``), computed at the first use and kept for the fit."""
        if self._lin is None:
            self._lin = np.ascontiguousarray(self.base.linear_term(np.arange(self.base.n)), dtype=np.float64)
        return self._lin

    def linear_term(self, idx):
        """eta_l read from the per-fit table (the same elementwise values)."""
        return self._lin_table()[idx]

    def kt_block(self, rows, cols):
        """``ConstrainedOps.kt_block``: the same NumPy raw block, the bookkeeping in C."""
        rows = np.ascontiguousarray(rows, dtype=np.intp)
        cols = np.ascontiguousarray(cols, dtype=np.intp)
        b = self.base
        self.n_eval += len(rows) * len(cols)
        K = np.ascontiguousarray(self.raw_block(b.X[rows], b.X[cols]), dtype=np.float64)
        finish_kt_block(K, rows, cols, self._sign, float(b.label_bias), float(b.diag_add))
        return K

    def _args(self, idx, S, alpha, gamma):
        b = self.base
        if self.problem.s:
            proj, gamma = self.proj_table(), np.ascontiguousarray(gamma, dtype=np.float64)
        else:
            proj, gamma = self._no_proj, self._no_gamma
        return (b.kernel, self._X, self._sign, np.ascontiguousarray(idx, dtype=np.intp),
                np.ascontiguousarray(S, dtype=np.intp), np.ascontiguousarray(alpha, dtype=np.float64),
                float(b.label_bias), float(b.diag_add), proj, gamma, self._pos)

    def gx(self, idx, S, alpha, gamma):
        """``ConstrainedOps.gx`` by :func:`constrained_gx` (one C pass, no temporaries per candidate)."""
        out, nsv = constrained_gx(*self._args(idx, S, alpha, gamma))
        self.n_eval += len(out) * nsv
        return out

    def furthest(self, idx, S, alpha, gamma, A, cc):
        """``ConstrainedOps.furthest`` by :func:`constrained_furthest` (eta_l of all points read from
        a table made once, ``base.linear_term`` of every point)."""
        z, d2, nsv = constrained_furthest(*self._args(idx, S, alpha, gamma), self._lin_table(), float(A), float(cc))
        self.n_eval += len(idx) * nsv
        return z, d2

    def dense_block(self, A, B):
        return kernel_matrix(self.base.kernel, A, B)

    def expansion(self, SV, coef, Xq):
        return kernel_expansion(self.base.kernel, SV, coef, Xq)

    def sor(self, G, g, x, bounded, omega, tol, max_steps):
        return sor_solve(G, g, x, bounded, omega, tol, max_steps)
