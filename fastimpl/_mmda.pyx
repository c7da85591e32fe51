# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""MMDA(CVM) numerics in C: SOR on the core-set sub-problem and kernel blocks.

* :func:`sor_solve` is Algorithm 3 of 004_41bfd2b98060112a.txt (``refimpl.sor.sor_solve``) with
  the same arithmetic in the same order and the same tie rule, so its steps match the reference;
* :func:`kernel_matrix` fills |A| x |B| kernel blocks row by row under ``nogil`` with OpenMP
  ``prange`` (the rows of new core vectors, the projections U'phi(x), the dense matrices of the
  baselines and the ``transform`` of new data);
* :func:`kernel_expansion` computes the (G x)_l scans of eq. (23) without forming kernel blocks;
* :class:`FastConstrainedOps` plugs them (and SOR) into the constrained core-set loop of ``refimpl.constrained_meb`` (the loop itself is
  shared, so both implementations make the same random draws and decisions).
"""
import numpy as np
cimport numpy as cnp
from cython.parallel cimport prange
from libc.math cimport exp, sqrt, fabs
from libc.stdlib cimport malloc, free

from refimpl.constrained_meb import ConstrainedOps

from fastimpl import _engine

cnp.import_array()

cdef double TIE = 1e-12   # refimpl.simplex_qp.TIE
# below this many kernel evaluations a block is filled serially
cdef Py_ssize_t PARALLEL_MIN_WORK = 1000000

include "_kernels.pxi"


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
    cdef double* bda
    cdef double dai
    if na == 0 or nb == 0:
        return out
    bda = <double*> malloc(nb * sizeof(double))
    with nogil:
        for t in range(nb):
            bda[t] = k_raw(&K, &b[t, 0], &b[t, 0]) if (K.normalize and K.code >= 2) else 1.0
        if na * nb >= PARALLEL_MIN_WORK:
            for i in prange(na, schedule="static"):
                dai = k_raw(&K, &a[i, 0], &a[i, 0]) if (K.normalize and K.code >= 2) else 1.0
                k_row(&K, &b[0, 0], bda, nb, &a[i, 0], dai, &o[i, 0])
        else:
            for i in range(na):
                dai = k_raw(&K, &a[i, 0], &a[i, 0]) if (K.normalize and K.code >= 2) else 1.0
                k_row(&K, &b[0, 0], bda, nb, &a[i, 0], dai, &o[i, 0])
    free(bda)
    return out


def kernel_expansion(spec, SV, coef, X):
    """f(x) = sum_t coef_t k(sv_t, x): the engine's expansion, parallel only from this module's larger
    PARALLEL_MIN_WORK (the 59-point samples of the constrained loop do not pay for threads)."""
    return _engine.kernel_expansion(spec, SV, coef, X, PARALLEL_MIN_WORK)


class FastConstrainedOps(ConstrainedOps):
    """``refimpl.constrained_meb.ConstrainedOps`` with its numerics in C."""

    def dense_block(self, A, B):
        return kernel_matrix(self.base.kernel, A, B)

    def expansion(self, SV, coef, Xq):
        return kernel_expansion(self.base.kernel, SV, coef, Xq)

    def sor(self, G, g, x, bounded, omega, tol, max_steps):
        return sor_solve(G, g, x, bounded, omega, tol, max_steps)
