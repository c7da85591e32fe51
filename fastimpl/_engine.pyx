# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The core-set MEB engine in Cython: the same algorithm, draws and tie-breaking as ``refimpl.meb``.

Differences from the reference are only in *how*, never in *what*:

* kernel values are computed point by point in C (no temporary blocks), distance scans and
  kernel expansions run under ``nogil`` with OpenMP ``prange`` (falling back to serial loops
  when the compiler has no OpenMP);
* the core-set kernel matrix Q = K~[S, S] lives in a cache bounded by ``cache_size`` bytes:
  the first ``n_cached`` core vectors keep their rows there; entries beyond are recomputed;
* the coordinates of the core vectors are copied into a contiguous block, and the sums over
  the center skip core vectors with alpha = 0;
* nothing in the loop is O(n) in sampling mode: only the initial pair, the samples and the
  final certificate scan touch the data.

Random draws are made through the same ``numpy.random.Generator`` calls in the same order
as the reference, so the same ``random_state`` gives the same core set.
"""
import time
import warnings

import numpy as np
cimport numpy as cnp
from cython.parallel cimport prange
from libc.math cimport exp, sqrt, fabs, INFINITY
from libc.stdlib cimport malloc, free, realloc
from libc.string cimport memcpy
from scipy.linalg.cython_lapack cimport dpotrf, dpotrs

from sklearn.exceptions import ConvergenceWarning

from refimpl.meb import (auto_max_free, MEBResult, initial_pair, inner_tolerance, kkt_gap, make_rng, margin_scale,
                         smo_step_bound, stop_accepts, validate_engine_params, warn_if_radius_too_coarse,
                         warn_if_smo_capped)
from refimpl.progress import Progress

cnp.import_array()

cdef double TAU = 1e-12
cdef double TIE = 1e-12   # refimpl.simplex_qp.TIE: near-ties go to the lowest index in both engines
cdef double PIVOT_RTOL = 1e-12  # refimpl.simplex_qp.PIVOT_RTOL: smallest accepted Cholesky pivot^2 / Q_aa
# below this many kernel evaluations a scan runs serially: thread start-up would cost more
cdef Py_ssize_t PARALLEL_MIN_WORK = 20000
#: the active set's gradient refresh runs in parallel from this many multiply-adds on
cdef Py_ssize_t GRAD_PARALLEL_MIN_WORK = 2_000_000
cdef Py_ssize_t SCAN_CHUNK = 2048


def _set_grad_parallel_min_work(Py_ssize_t work):
    """Set the active set's parallel threshold; returns the old one (tests use 0 to force the
    parallel gradient refresh on small problems)."""
    global GRAD_PARALLEL_MIN_WORK
    old = GRAD_PARALLEL_MIN_WORK
    GRAD_PARALLEL_MIN_WORK = work
    return old


include "_kernels.pxi"


# ---------------------------------------------------------------- the engine state
cdef class _Engine:
    cdef Kern K
    cdef const double[:, ::1] X
    cdef Py_ssize_t n, d
    cdef const signed char* sign  # s_i in {-1, +1} of the m inputs; NULL: all +1
    cdef object sign_arr
    cdef Py_ssize_t m            # inputs; n = 2m augmented points when mirrored (CVR)
    cdef bint mirror             # z >= m is input z - m with its sign negated (000 eq. (8))
    cdef bint signed_            # any sign is -1 (sign array or mirror)
    cdef const double* offset    # t_i: linear term eta + s_z t_p(z) (000 eq. (15)); NULL: eta
    cdef object offset_arr
    cdef double label_bias, diag_add, eta
    cdef double c0               # constant part of the linear term, taken out of l (refimpl.meb._CoreSetQP)
    cdef bint lconst             # constant-diagonal kernel without Delta: l - c0 = 0 exactly
    cdef int has_delta
    # core set (capacity cap)
    cdef Py_ssize_t size, cap
    cdef Py_ssize_t* S
    cdef double* SX          # cap x d coordinates of the core vectors
    cdef double* Ss          # signs
    cdef double* Sda         # raw k(x, x) of the core vectors
    cdef double* l           # linear term diag(K~) + Delta
    cdef double* alpha
    cdef double* grad
    cdef double* Qd          # diag of Q
    # the bounded cache of Q: rows/cols < n_cached stored densely with stride qcap
    cdef double* Q
    cdef Py_ssize_t qcap, qmax
    cdef double* rowbuf_i
    cdef double* rowbuf_j
    cdef double* scorebuf
    cdef Py_ssize_t* actbuf
    # active-set solver work space: free set, its Gram matrix/factor, right-hand sides
    cdef Py_ssize_t* F
    cdef double* QFF
    cdef double* rhs
    cdef Py_ssize_t fcap, nf
    cdef bint fvalid
    cdef double* yu          # L^-1 l_F
    cdef double* yv          # L^-1 1
    cdef char* inF           # inF[t]: core vector t is in the free set
    # support (alpha > 0) compacted for the sums over the center
    cdef Py_ssize_t nsv
    cdef Py_ssize_t* sv
    cdef double* svalpha_s   # alpha_t * s_t
    cdef double* svX         # packed coordinates of the support (alpha > 0)
    cdef double* svda        # their raw k(x, x)
    cdef Py_ssize_t* svidx   # their indices among the n points
    cdef public long long n_eval

    def __cinit__(self):
        self.S = NULL; self.SX = NULL; self.Ss = NULL; self.Sda = NULL; self.l = NULL
        self.alpha = NULL; self.grad = NULL; self.Qd = NULL; self.Q = NULL
        self.rowbuf_i = NULL; self.rowbuf_j = NULL; self.scorebuf = NULL; self.actbuf = NULL; self.F = NULL; self.QFF = NULL; self.rhs = NULL; self.fcap = 0; self.nf = 0; self.fvalid = False; self.yu = NULL; self.yv = NULL; self.inF = NULL; self.sv = NULL; self.svalpha_s = NULL
        self.svX = NULL; self.svda = NULL; self.svidx = NULL

    def __dealloc__(self):
        free(self.S); free(self.SX); free(self.Ss); free(self.Sda); free(self.l)
        free(self.alpha); free(self.grad); free(self.Qd); free(self.Q)
        free(self.rowbuf_i); free(self.rowbuf_j); free(self.scorebuf); free(self.actbuf); free(self.F); free(self.QFF); free(self.rhs); free(self.yu); free(self.yv);
        free(self.inF); free(self.sv); free(self.svalpha_s)
        free(self.svX); free(self.svda); free(self.svidx)

    def __init__(self, problem, Py_ssize_t cache_size):
        cdef const signed char[::1] s
        cdef const double[::1] t
        self.X = problem.X
        self.m = problem.X.shape[0]
        self.n = problem.n
        self.d = problem.X.shape[1]
        self.mirror = bool(problem.mirror)
        self.K = make_kern(problem.kernel, self.d)
        if problem.sign is not None:
            arr = np.ascontiguousarray(problem.sign, dtype=np.int8)
            self.sign_arr = arr
            s = arr
            self.sign = &s[0]
        else:
            self.sign = NULL
        self.signed_ = self.sign != NULL or self.mirror
        if problem.offset is not None:
            arr = np.ascontiguousarray(problem.offset, dtype=np.float64)
            self.offset_arr = arr
            t = arr
            self.offset = &t[0]
        else:
            self.offset = NULL
        self.label_bias = problem.label_bias
        self.diag_add = problem.diag_add
        self.eta = problem.eta
        self.has_delta = 1 if problem.has_delta else 0
        self.c0 = problem.constant_term or 0.0
        self.lconst = (not problem.has_delta) and problem.kernel.constant_diagonal
        self.size = 0
        self.cap = 0
        self.nsv = 0
        self.n_eval = 0
        # largest dense block of Q that fits the cache (at least 2 x 2)
        self.qmax = max(2, <Py_ssize_t> sqrt(max(cache_size, 32) / 8.0))
        self.qcap = 0
        self._grow(64)

    cdef void _grow(self, Py_ssize_t newcap) except *:
        cdef Py_ssize_t old = self.cap, newq, i
        cdef double* newQ
        self.S = <Py_ssize_t*> realloc(self.S, newcap * sizeof(Py_ssize_t))
        self.SX = <double*> realloc(self.SX, newcap * self.d * sizeof(double))
        self.Ss = <double*> realloc(self.Ss, newcap * sizeof(double))
        self.Sda = <double*> realloc(self.Sda, newcap * sizeof(double))
        self.l = <double*> realloc(self.l, newcap * sizeof(double))
        self.alpha = <double*> realloc(self.alpha, newcap * sizeof(double))
        self.grad = <double*> realloc(self.grad, newcap * sizeof(double))
        self.Qd = <double*> realloc(self.Qd, newcap * sizeof(double))
        self.rowbuf_i = <double*> realloc(self.rowbuf_i, newcap * sizeof(double))
        self.rowbuf_j = <double*> realloc(self.rowbuf_j, newcap * sizeof(double))
        self.scorebuf = <double*> realloc(self.scorebuf, newcap * sizeof(double))
        self.actbuf = <Py_ssize_t*> realloc(self.actbuf, newcap * sizeof(Py_ssize_t))
        self.sv = <Py_ssize_t*> realloc(self.sv, newcap * sizeof(Py_ssize_t))
        self.svalpha_s = <double*> realloc(self.svalpha_s, newcap * sizeof(double))
        self.svX = <double*> realloc(self.svX, newcap * self.d * sizeof(double))
        self.svda = <double*> realloc(self.svda, newcap * sizeof(double))
        self.svidx = <Py_ssize_t*> realloc(self.svidx, newcap * sizeof(Py_ssize_t))
        if (self.S == NULL or self.SX == NULL or self.Ss == NULL or self.Sda == NULL or self.l == NULL
                or self.alpha == NULL or self.grad == NULL or self.Qd == NULL or self.rowbuf_i == NULL
                or self.rowbuf_j == NULL or self.scorebuf == NULL or self.actbuf == NULL or self.sv == NULL or self.svalpha_s == NULL
                or self.svX == NULL or self.svda == NULL or self.svidx == NULL):
            raise MemoryError("core-set arrays")
        self.cap = newcap
        newq = min(newcap, self.qmax)
        if newq > self.qcap:
            newQ = <double*> malloc(newq * newq * sizeof(double))
            if newQ == NULL:
                raise MemoryError("core-set kernel cache")
            if self.Q != NULL:
                for i in range(min(self.size, self.qcap)):
                    memcpy(&newQ[i * newq], &self.Q[i * self.qcap], min(self.size, self.qcap) * sizeof(double))
                free(self.Q)
            self.Q = newQ
            self.qcap = newq

    cdef inline double kt_core_core(self, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
        cdef double v = k_eval(&self.K, &self.SX[a * self.d], &self.SX[b * self.d], self.Sda[a], self.Sda[b]) \
            + self.label_bias
        if self.signed_:
            v *= self.Ss[a] * self.Ss[b]
        if a == b:
            v += self.diag_add
        return v

    cdef inline Py_ssize_t pz(self, Py_ssize_t z) noexcept nogil:
        """p(z): the input row of augmented point z (z mod m)."""
        return z - self.m if (self.mirror and z >= self.m) else z

    cdef inline double zsign(self, Py_ssize_t z) noexcept nogil:
        """s_z: the input's sign, negated for the mirrored half."""
        cdef double s = <double> self.sign[self.pz(z)] if self.sign != NULL else 1.0
        return -s if (self.mirror and z >= self.m) else s

    cdef inline double point_rawdiag(self, Py_ssize_t z) noexcept nogil:
        cdef Py_ssize_t p = self.pz(z)
        if self.K.normalize and self.K.code >= 2:
            return k_raw(&self.K, &self.X[p, 0], &self.X[p, 0])
        return k_rawdiag(&self.K, &self.X[p, 0])

    cdef inline double point_ldiag(self, Py_ssize_t z, double daz) noexcept nogil:
        """shifted linear term l_z - c0 = k~(z, z) + Delta_z - c0 (MEBProblem.shifted_linear_term):
        s_z t_p(z) (CVR), 0 (generalized CVM, constant diagonal) or k~(z, z) (c0 = 0)."""
        if self.has_delta:
            if self.offset != NULL:
                return self.zsign(z) * self.offset[self.pz(z)]
            return 0.0
        if self.lconst:
            return 0.0
        return k_diag(&self.K, daz) + self.label_bias + self.diag_add

    cdef double* qrow(self, Py_ssize_t i, double* buf) noexcept nogil:
        """Row i of Q over the core set: from the cache where it is, recomputed elsewhere."""
        cdef Py_ssize_t t, nc = min(self.size, self.qcap)
        if i < self.qcap and self.size <= self.qcap:
            return &self.Q[i * self.qcap]
        if i < self.qcap:
            memcpy(buf, &self.Q[i * self.qcap], nc * sizeof(double))
            for t in range(nc, self.size):
                buf[t] = self.kt_core_core(i, t)
        else:
            for t in range(self.size):
                buf[t] = self.kt_core_core(i, t)
        self.n_eval += self.size - (nc if i < self.qcap else 0)
        return buf

    # ------------------------------------------------------------ core-set operations
    cdef void add(self, Py_ssize_t z) except *:
        """Append z with alpha_z = 0; grad_z = 2 (K~alpha)_z - l_z."""
        cdef Py_ssize_t k = self.size, t
        cdef double daz, v, ka = 0.0
        if k == self.cap:
            self._grow(2 * self.cap)
        memcpy(&self.SX[k * self.d], &self.X[self.pz(z), 0], self.d * sizeof(double))
        self.S[k] = z
        self.Ss[k] = self.zsign(z)
        daz = self.point_rawdiag(z)
        self.Sda[k] = daz
        self.l[k] = self.point_ldiag(z, daz)
        self.size = k + 1
        for t in range(k + 1):
            v = self.kt_core_core(k, t)
            if t < k:
                ka += self.alpha[t] * v
            if k < self.qcap and t < self.qcap:
                self.Q[k * self.qcap + t] = v
                self.Q[t * self.qcap + k] = v
        self.n_eval += k + 1
        self.Qd[k] = self.kt_core_core(k, k)
        self.alpha[k] = 0.0
        self.grad[k] = 2.0 * ka - self.l[k]

    cdef double margin(self) noexcept nogil:
        """alpha'Q alpha = alpha'(g + l) / 2."""
        cdef double s = 0.0
        cdef Py_ssize_t t
        for t in range(self.size):
            s += self.alpha[t] * (self.grad[t] + self.l[t])
        return 0.5 * s

    cdef double radius2(self) noexcept nogil:
        cdef double s = 0.0
        cdef Py_ssize_t t
        for t in range(self.size):
            s += self.alpha[t] * self.l[t]
        return self.c0 + (s - self.margin())

    cdef void grad_stats(self, double* gmin, double* gmax, double* gabs) noexcept nogil:
        """min g, max_{alpha>0} g and max |g| over the core set (SMO fuses this pass into its update)."""
        cdef Py_ssize_t t
        cdef double g
        gmin[0] = INFINITY
        gmax[0] = -INFINITY
        gabs[0] = 0.0
        for t in range(self.size):
            g = self.grad[t]
            if g < gmin[0]:
                gmin[0] = g
            if fabs(g) > gabs[0]:
                gabs[0] = fabs(g)
            if self.alpha[t] > 0 and g > gmax[0]:
                gmax[0] = g

    cdef Py_ssize_t most_violating(self, double gmin, double gabs) noexcept nogil:
        """refimpl.simplex_qp.most_violating: the first t with g_t within TIE of the minimum."""
        cdef Py_ssize_t t
        for t in range(self.size):
            if self.grad[t] <= gmin + TIE * (gabs + fabs(self.c0)):
                return t
        return 0

    cdef Py_ssize_t smo(self, double tol, Py_ssize_t max_steps) noexcept nogil:
        """Warm-started SMO with second-order working-set selection (refimpl.simplex_qp).

        Same selections as the reference, organised for speed: the min/max statistics of the
        gradient for the next step are gathered in the pass that updates it, and the choice of j
        runs over a sorted list of the coordinates with alpha > 0 (the only ones that may
        decrease), rebuilt only when a coordinate enters or leaves the support."""
        cdef Py_ssize_t steps = 0, t, k, i, j, nact = 0
        cdef double gmin = INFINITY, gmax = -INFINITY, gabs = 0.0, gi
        cdef double diff, curv, score, best, step, tstep, Qii, g, two_t, ai_old
        cdef double* Qi
        cdef double* Qj
        cdef double* grad = self.grad
        cdef double* alpha = self.alpha
        cdef double* Qd = self.Qd
        cdef double* sb = self.scorebuf
        cdef Py_ssize_t* act = self.actbuf
        cdef Py_ssize_t size = self.size
        cdef bint changed = True
        self.grad_stats(&gmin, &gmax, &gabs)
        while True:
            if changed:
                nact = 0
                for t in range(size):
                    if alpha[t] > 0:
                        act[nact] = t
                        nact += 1
                changed = False
            i = self.most_violating(gmin, gabs)
            gi = grad[i]
            if gmax - gi <= tol or steps >= max_steps:
                return steps
            Qi = self.qrow(i, self.rowbuf_i)
            Qii = Qd[i]
            best = -INFINITY
            for k in range(nact):
                t = act[k]
                diff = grad[t] - gi
                score = -INFINITY
                if diff > 0:
                    curv = Qii + Qd[t] - 2.0 * Qi[t]
                    if curv <= TAU:
                        curv = TAU
                    score = diff * diff / curv
                    if score > best:
                        best = score
                sb[k] = score
            j = act[0]
            for k in range(nact):
                if sb[k] >= best - TIE * best:
                    j = act[k]
                    break
            diff = grad[j] - gi
            curv = Qii + Qd[j] - 2.0 * Qi[j]
            if curv <= TAU:
                curv = TAU
            step = diff / (2.0 * curv)
            if step >= alpha[j]:
                tstep = alpha[j]
                alpha[j] = 0.0
                changed = True
            else:
                tstep = step
                alpha[j] -= tstep
            ai_old = alpha[i]
            alpha[i] += tstep
            if ai_old <= 0 and alpha[i] > 0:
                changed = True
            Qj = self.qrow(j, self.rowbuf_j)
            two_t = 2.0 * tstep
            gmin = INFINITY
            gmax = -INFINITY
            gabs = 0.0
            for t in range(size):
                g = grad[t] + two_t * (Qi[t] - Qj[t])
                grad[t] = g
                if g < gmin:
                    gmin = g
                if fabs(g) > gabs:
                    gabs = fabs(g)
                if alpha[t] > 0 and g > gmax:
                    gmax = g
            steps += 1

    cdef int _ensure_free_capacity(self, Py_ssize_t k) noexcept nogil:
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
                memcpy(&L2[r * c], &self.QFF[r * self.fcap], (r + 1) * sizeof(double))
        free(self.F); free(self.QFF); free(self.rhs); free(self.yu); free(self.yv); free(self.inF)
        self.F, self.QFF, self.rhs, self.fcap = F2, L2, b2, c
        self.yu, self.yv, self.inF = yu2, yv2, in2
        return 0

    cdef void _forward_vectors(self, Py_ssize_t start) noexcept nogil:
        """yu = L^-1 l_F and yv = L^-1 1 from entry ``start`` on (earlier entries are unchanged)."""
        cdef Py_ssize_t a, c, ld = self.fcap
        cdef double* L = self.QFF
        cdef double au, av
        for a in range(start, self.nf):
            au = self.l[self.F[a]]
            av = 1.0
            for c in range(a):
                au -= L[a * ld + c] * self.yu[c]
                av -= L[a * ld + c] * self.yv[c]
            self.yu[a] = au / L[a * ld + a]
            self.yv[a] = av / L[a * ld + a]

    cdef int _factor_free_set(self) noexcept nogil:
        """F := the support in ascending order (as np.flatnonzero) and L := chol(Q_FF) from scratch."""
        cdef Py_ssize_t t, a, b, nf = 0
        cdef double* row
        cdef int n_, info, ld
        cdef char upper = b'U'  # a row-major lower factor is a column-major upper one
        for t in range(self.size):
            self.inF[t] = 0
            if self.alpha[t] > 0:
                self.F[nf] = t
                self.inF[t] = 1
                nf += 1
        self.nf = nf
        for a in range(nf):
            row = self.qrow(self.F[a], self.rowbuf_i)
            for b in range(a + 1):
                self.QFF[a * self.fcap + b] = row[self.F[b]]
        n_ = <int> nf
        ld = <int> self.fcap
        dpotrf(&upper, &n_, self.QFF, &ld, &info)
        if info != 0:
            return -1
        for a in range(nf):
            if not (self.QFF[a * self.fcap + a] * self.QFF[a * self.fcap + a] > PIVOT_RTOL * self.Qd[self.F[a]]):
                return -1
        self._forward_vectors(0)
        return 0

    cdef int _append_free(self, Py_ssize_t i) noexcept nogil:
        """F += [i]; L gains the row [w', delta] with L w = Q_Fi, delta^2 = Q_ii - w'w (O(nf^2))."""
        cdef Py_ssize_t a, c, nf = self.nf, ld = self.fcap
        cdef double* row = self.qrow(i, self.rowbuf_i)
        cdef double* L = self.QFF
        cdef double acc, d2 = self.Qd[i]
        for a in range(nf):
            acc = row[self.F[a]]
            for c in range(a):
                acc -= L[a * ld + c] * L[nf * ld + c]
            L[nf * ld + a] = acc / L[a * ld + a]
            d2 -= L[nf * ld + a] * L[nf * ld + a]
        if not (d2 > PIVOT_RTOL * self.Qd[i]):
            return -1  # Q_FF would not be numerically positive definite
        L[nf * ld + nf] = sqrt(d2)
        self.F[nf] = i
        self.inF[i] = 1
        self.nf = nf + 1
        self._forward_vectors(nf)
        return 0

    cdef void _remove_free(self, Py_ssize_t k) noexcept nogil:
        """F -= F[k]; the trailing block of L gets the rank-one update L33 L33' + l32 l32' (O(nf^2))."""
        cdef Py_ssize_t nf = self.nf, ld = self.fcap, i, j, n = nf - k - 1
        cdef double* L = self.QFF
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
        self._forward_vectors(k)

    cdef void _full_gradient(self) noexcept nogil:
        cdef Py_ssize_t a, t
        cdef double* row
        cdef double d
        for t in range(self.size):
            self.grad[t] = -self.l[t]
        for a in range(self.nf):
            d = 2.0 * self.alpha[self.F[a]]
            if d != 0.0:
                row = self.qrow(self.F[a], self.rowbuf_i)
                for t in range(self.size):
                    self.grad[t] += d * row[t]

    cdef void _inactive_gradient_parallel(self, double lam) noexcept nogil:
        """grad_t = 2 (Q_tF alpha_F) - l_t for t outside F and lambda on F, rows read from the cache."""
        cdef Py_ssize_t t, a, nf = self.nf, qcap = self.qcap
        cdef double d
        cdef const double* row
        cdef double* grad = self.grad
        cdef const double* alpha = self.alpha
        cdef const Py_ssize_t* F = self.F
        cdef const char* inF = self.inF
        cdef const double* Q = self.Q
        cdef const double* l = self.l
        for t in prange(self.size, schedule="static"):
            if inF[t]:
                grad[t] = lam
            else:
                row = &Q[t * qcap]
                d = 0.0
                for a in range(nf):
                    d = d + row[F[a]] * alpha[F[a]]
                grad[t] = 2.0 * d - l[t]

    cdef Py_ssize_t active_set(self, double tol, Py_ssize_t max_changes) noexcept nogil:
        """Exact active-set Newton solver for the core-set QP (refimpl.simplex_qp.active_set_simplex):
        same ratio test, entering rule and stopping gap.  The free set F and the Cholesky factor of
        Q_FF persist between calls and are updated, not recomputed: appending a coordinate or
        dropping one costs O(|F|^2), a Newton step two triangular solves, and the gradient is
        recomputed only at free-set optima, where g_F = lambda and only the |S| - |F| inactive
        entries need Q.  Returns the number of Newton steps, or -1 when Q_FF is not positive
        definite (the caller then runs SMO)."""
        cdef Py_ssize_t size = self.size, t, a, k, i, n_changes = 0, kblock, nf
        cdef double* alpha = self.alpha
        cdef double* grad = self.grad
        cdef double* rhs
        cdef double* row
        cdef double su, sv, lam, tg, s, r, d, gmin, gabs, gmax, gap
        cdef bint allpos
        if self._ensure_free_capacity(size + 1) != 0:
            return -1
        if not self.fvalid:
            if self._factor_free_set() != 0:
                return -1
            self.fvalid = True
        rhs = self.rhs
        while True:
            nf = self.nf
            # Newton step: with yu = L^-1 l_F and yv = L^-1 1 kept up to date,
            # 1'Q_FF^-1 l_F = yv'yu and 1'Q_FF^-1 1 = yv'yv, so lambda costs O(|F|) and the target
            # (u + lambda v)/2 = L^-T (yu + lambda yv)/2 one backward substitution
            su = 0.0
            sv = 0.0
            for a in range(nf):
                su += self.yv[a] * self.yu[a]
                sv += self.yv[a] * self.yv[a]
            if not (su == su and fabs(su) < INFINITY) or sv <= 0:
                self.fvalid = False
                return -1
            lam = (2.0 - su) / sv
            for a in range(nf):
                rhs[a] = 0.5 * (self.yu[a] + lam * self.yv[a])
            for a in range(nf - 1, -1, -1):
                rhs[a] /= self.QFF[a * self.fcap + a]
                tg = rhs[a]
                for k in range(a):
                    rhs[k] -= self.QFF[a * self.fcap + k] * tg
            allpos = True
            su = 0.0
            for a in range(nf):
                tg = rhs[a]
                su += tg
                if not (tg > 0):
                    allpos = False
            if fabs(su - 1.0) > 1e-9:
                self.fvalid = False
                return -1  # cancellation in lambda: the free-set system is too ill-conditioned
            for a in range(nf):
                rhs[a] /= su  # remove the round-off left in 1'alpha = 1
            if allpos:
                for a in range(nf):
                    alpha[self.F[a]] = rhs[a]
            else:
                # ratio test along target - current, first blocking coordinate in free-set order
                s = INFINITY
                for a in range(nf):
                    d = rhs[a] - alpha[self.F[a]]
                    if d < 0:
                        r = alpha[self.F[a]] / -d
                        if r < s:
                            s = r
                kblock = -1
                for a in range(nf):
                    d = rhs[a] - alpha[self.F[a]]
                    if d < 0 and alpha[self.F[a]] / -d <= s + TIE * s:
                        kblock = a
                        break
                for a in range(nf):
                    t = self.F[a]
                    alpha[t] = alpha[t] + s * (rhs[a] - alpha[t])
                    if alpha[t] < 0:
                        alpha[t] = 0.0
                alpha[self.F[kblock]] = 0.0
                self._remove_free(kblock)
            n_changes += 1
            if not allpos:
                if n_changes >= max_changes:
                    self._full_gradient()
                    return n_changes
                continue
            # at the free-set optimum g_F = lambda exactly; only the |S| - |F| inactive entries need Q
            if size <= self.qcap and (size - nf) * nf >= GRAD_PARALLEL_MIN_WORK:
                # every row is cached (qrow only reads): the rows are independent and each sum runs
                # in the same order on one thread, so the result does not depend on the team size
                self._inactive_gradient_parallel(lam)
            else:
                for t in range(size):
                    if self.inF[t]:
                        grad[t] = lam
                    else:
                        row = self.qrow(t, self.rowbuf_j)
                        d = 0.0
                        for a in range(nf):
                            d += row[self.F[a]] * alpha[self.F[a]]
                        grad[t] = 2.0 * d - self.l[t]
            self.grad_stats(&gmin, &gmax, &gabs)
            i = self.most_violating(gmin, gabs)
            gap = gmax - grad[i]
            if gap <= tol or n_changes >= max_changes:
                return n_changes
            if alpha[i] > 0:
                return n_changes  # the gap is round-off within the exactly solved free set
            for a in range(nf):
                if self.F[a] == i:
                    return n_changes
            if self._append_free(i) != 0:
                self.fvalid = False
                return -1

    cdef Py_ssize_t count_support(self) noexcept nogil:
        cdef Py_ssize_t t, k = 0
        for t in range(self.size):
            if self.alpha[t] > 0:
                k += 1
        return k

    cdef void compact_support(self) noexcept nogil:
        cdef Py_ssize_t t, k = 0
        for t in range(self.size):
            if self.alpha[t] > 0:
                self.sv[k] = t
                self.svalpha_s[k] = self.alpha[t] * self.Ss[t]
                memcpy(&self.svX[k * self.d], &self.SX[t * self.d], self.d * sizeof(double))
                self.svda[k] = self.Sda[t]
                self.svidx[k] = self.S[t]
                k += 1
        self.nsv = k

    cdef inline double dist2_point(self, Py_ssize_t z, double marg, double* buf) noexcept nogil:
        """||c - phi~(z)||^2 + Delta_z = alpha'K~alpha - 2 (K~alpha)_z + l_z (001 eq. (12)).
        ``buf`` is scratch space for one kernel row (nsv values)."""
        cdef Py_ssize_t k
        cdef double daz = self.point_rawdiag(z)
        cdef double s = 0.0, self_term = 0.0
        cdef double sz = self.zsign(z)
        k_row(&self.K, self.svX, self.svda, self.nsv, &self.X[self.pz(z), 0], daz, buf)
        for k in range(self.nsv):
            s += self.svalpha_s[k] * (buf[k] + self.label_bias)
            if self.svidx[k] == z:
                self_term += self.alpha[self.sv[k]] * self.diag_add  # the delta_ij / C of k~(z, z)
        return marg - 2.0 * (sz * s + self_term) + self.point_ldiag(z, daz)

    cdef double chunk_max(self, const Py_ssize_t* idx, Py_ssize_t cnt, Py_ssize_t c, double marg,
                          double* buf) noexcept nogil:
        """max of dist2 over chunk c of the candidates (idx[p], or p itself when idx is NULL)."""
        cdef Py_ssize_t p, z, lo = c * SCAN_CHUNK, hi = min(c * SCAN_CHUNK + SCAN_CHUNK, cnt)
        cdef double v, bd = -INFINITY
        for p in range(lo, hi):
            z = idx[p] if idx != NULL else p
            v = self.dist2_point(z, marg, buf)
            if v > bd:
                bd = v
        return bd

    cdef void furthest(self, const Py_ssize_t* idx, Py_ssize_t cnt, Py_ssize_t* best_out,
                       double* d2_out) noexcept nogil:
        """argmax of dist2 over idx[0:cnt] (or all n points when idx is NULL), as refimpl.meb._furthest:
        the first candidate within a relative TIE of the maximum wins.  Chunk maxima are found in
        parallel; the first chunk reaching the threshold is then rescanned serially."""
        cdef double marg = self.margin()
        cdef Py_ssize_t nchunk = (cnt + SCAN_CHUNK - 1) // SCAN_CHUNK
        cdef Py_ssize_t c, p, lo, hi, z
        cdef double bestd = -INFINITY, thr
        cdef double* cd = <double*> malloc(nchunk * sizeof(double))
        cdef double* buf
        cdef Py_ssize_t bufsize = (self.nsv + 1) * sizeof(double)
        if cnt * self.nsv < PARALLEL_MIN_WORK or nchunk == 1:
            buf = <double*> malloc(bufsize)
            for c in range(nchunk):
                cd[c] = self.chunk_max(idx, cnt, c, marg, buf)
            free(buf)
        else:
            for c in prange(nchunk, schedule="dynamic"):
                buf = <double*> malloc(bufsize)  # one scratch row per chunk keeps threads apart
                cd[c] = self.chunk_max(idx, cnt, c, marg, buf)
                free(buf)
        for c in range(nchunk):
            if cd[c] > bestd:
                bestd = cd[c]
        thr = bestd - TIE * (fabs(bestd) + fabs(self.c0))
        best_out[0] = -1
        buf = <double*> malloc(bufsize)
        for c in range(nchunk):
            if cd[c] >= thr:
                lo = c * SCAN_CHUNK
                hi = min(lo + SCAN_CHUNK, cnt)
                for p in range(lo, hi):
                    z = idx[p] if idx != NULL else p
                    if self.dist2_point(z, marg, buf) >= thr:
                        best_out[0] = z
                        break
                break
        free(buf)
        free(cd)
        self.n_eval += cnt * self.nsv
        d2_out[0] = bestd + self.c0  # unshifted squared distance

    cdef bint in_core(self, Py_ssize_t z) noexcept nogil:
        cdef Py_ssize_t t
        for t in range(self.size):
            if self.S[t] == z:
                return True
        return False

    cdef Py_ssize_t furthest_from(self, Py_ssize_t z, const Py_ssize_t* idx, Py_ssize_t cnt) noexcept nogil:
        """Initialisation: argmax over idx of ||phi~(z) - phi~(z_l)||^2 + Delta_l (refimpl.meb.initial_pair)."""
        cdef double daz = self.point_rawdiag(z), dal, v, best_v = -INFINITY, kzz
        cdef Py_ssize_t p, l, best = -1
        cdef double sz = self.zsign(z), sl
        kzz = k_diag(&self.K, daz) + self.label_bias + self.diag_add
        for p in range(cnt):
            l = idx[p]
            dal = self.point_rawdiag(l)
            sl = self.zsign(l)
            v = sz * sl * (k_eval(&self.K, &self.X[self.pz(z), 0], &self.X[self.pz(l), 0], daz, dal)
                           + self.label_bias)
            if l == z:
                v += self.diag_add
            v = kzz - 2.0 * v + (self.point_ldiag(l, dal) + self.c0)
            if v > best_v:
                best_v = v
                best = l
        self.n_eval += cnt
        return best


cdef Py_ssize_t _solve(_Engine eng, double tol, Py_ssize_t bound, bint use_active_set) noexcept nogil:
    """The core-set QP: active set when asked (SMO when Q_FF is singular), else SMO (refimpl.meb.fit_meb)."""
    cdef Py_ssize_t steps = -1
    if use_active_set:
        steps = eng.active_set(tol, bound)
    if steps < 0:
        steps = eng.smo(tol, bound)
        eng.fvalid = False  # SMO moved alpha: the free set is rebuilt from the support next time
    return steps


cdef Py_ssize_t _pick(_Engine eng, Py_ssize_t z, cnp.ndarray idx):
    cdef cnp.ndarray[Py_ssize_t, ndim=1, mode="c"] a = np.ascontiguousarray(idx, dtype=np.intp)
    return eng.furthest_from(z, &a[0], a.shape[0])


def fit_meb(problem, eps, *, sample_size=59, max_iter=10_000, tol=None, random_state=None,
            cache_size=200 * 2**20, certify=True, verbose=False, n_confirm=30, solver="auto", stop="radius"):
    """Same contract as :func:`refimpl.meb.fit_meb` (see its docstring)."""
    cdef Py_ssize_t n = problem.n, z_a, z_b, n_iter = 0, steps, best
    cdef double R2, d2, inner_tol, bound, r_cert2
    cdef double eps_ = 0.0
    cdef Py_ssize_t bound_steps, n_solves = 0, n_capped = 0
    cdef double tighten = 1.0
    cdef cnp.ndarray[Py_ssize_t, ndim=1, mode="c"] samp
    cdef _Engine eng
    validate_engine_params(eps, sample_size, max_iter, tol, n, n_confirm, solver, stop)
    cdef bint use_active_set = solver != "smo"
    cdef bint auto = solver == "auto"
    cdef Py_ssize_t max_free = auto_max_free(stop)
    eps_ = float(eps)
    rng = make_rng(random_state)
    if sample_size is not None and sample_size >= n:
        sample_size = None
    t0 = time.perf_counter()
    history = {"core_set_size": [], "radius": [], "elapsed": [], "smo_steps": [], "smo_capped": []}
    eng = _Engine(problem, int(cache_size))
    progress = Progress(verbose, "CVM (fast)")

    # --- initialisation, 001 Sec. 4.1.1: the reference's draws and rules, this engine's distances
    z_a, z_b = initial_pair(problem, rng, sample_size, lambda z, idx: _pick(eng, z, idx))
    eng.add(z_a)
    eng.alpha[0] = 1.0
    eng.grad[0] = 2.0 * eng.Qd[0] - eng.l[0]
    eng.add(z_b)

    R2 = eng.radius2()
    inner_tol = float(tol) if tol is not None else inner_tolerance(stop, eps_, R2, margin_scale(problem, R2))
    bound_steps = smo_step_bound(eng.size)
    if auto and use_active_set and eng.count_support() > max_free:
        use_active_set = False  # refimpl.meb: one-way switch to SMO
    with nogil:
        steps = _solve(eng, inner_tol, bound_steps, use_active_set)
    n_solves += 1
    n_capped += steps >= bound_steps
    cdef Py_ssize_t clean = 0
    converged = False
    last_scan = None
    while True:
        R2 = eng.radius2()
        if clean == 0:  # a re-drawn sample at the same center is not a new iteration
            history["core_set_size"].append(eng.size)
            history["radius"].append(sqrt(max(R2, 0.0)))
            history["elapsed"].append(time.perf_counter() - t0)
            history["smo_steps"].append(steps)
            history["smo_capped"].append(steps >= bound_steps)
            progress.update(n_iter, eng.size, R2)
        eng.compact_support()
        if sample_size is None:
            with nogil:
                eng.furthest(NULL, n, &best, &d2)
        else:
            samp = rng.integers(0, n, size=sample_size)
            with nogil:
                eng.furthest(&samp[0], samp.shape[0], &best, &d2)
        if stop_accepts(stop, eps_, R2, d2, margin_scale(problem, R2), eng.margin(), _gmax_support(eng)):
            clean += 1
            if sample_size is None or clean > n_confirm:
                converged = True
                if sample_size is None:
                    last_scan = d2
                break
            continue
        clean = 0
        if n_iter >= max_iter:
            warnings.warn(f"the MEB engine stopped at max_iter={max_iter} before the stop={stop!r} test held; "
                          "the certified ratio reports what was reached", ConvergenceWarning, stacklevel=2)
            break
        if eng.in_core(best):
            tighten *= 0.1  # the last QP stopped early: re-solve it tighter (refimpl.meb.fit_meb)
        else:
            eng.add(best)
        R2 = eng.radius2()
        inner_tol = tighten * (float(tol) if tol is not None else
                               inner_tolerance(stop, eps_, R2, margin_scale(problem, R2)))
        bound_steps = smo_step_bound(eng.size)
        if auto and use_active_set and eng.count_support() > max_free:
            use_active_set = False  # refimpl.meb: one-way switch to SMO
        with nogil:
            steps = _solve(eng, inner_tol, bound_steps, use_active_set)
        n_solves += 1
        n_capped += steps >= bound_steps
        n_iter += 1
    progress.close(n_iter, eng.size, eng.radius2())
    warn_if_smo_capped(steps >= bound_steps, n_capped, n_solves)

    R2 = eng.radius2()
    S = margin_scale(problem, R2)
    warn_if_radius_too_coarse(stop, eps_, R2, S)
    if certify:
        if last_scan is None:
            eng.compact_support()
            with nogil:
                eng.furthest(NULL, n, &best, &d2)
            last_scan = d2
        r_cert2 = last_scan
    else:
        r_cert2 = float("nan")
    core = np.array([eng.S[t] for t in range(eng.size)], dtype=np.intp)
    alpha = np.array([eng.alpha[t] for t in range(eng.size)], dtype=np.float64)
    return MEBResult(core_set=core, alpha=alpha, radius2=R2, margin=eng.margin(), r_cert2=r_cert2,
                     certified_ratio=r_cert2 / R2 if R2 > 0 else float("nan"), n_iter=n_iter,
                     converged=converged, history=history, kernel_evaluations=int(eng.n_eval),
                     margin_scale=S, kkt_gap=kkt_gap(eng.margin(), r_cert2, S, _gmax_support(eng)), stop=stop)


cdef double _gmax_support(_Engine eng):
    """max g_t over the core vectors with alpha_t > 0 (refimpl.meb._gmax_support)."""
    cdef double gmin, gmax, gabs
    eng.grad_stats(&gmin, &gmax, &gabs)
    return gmax - eng.c0


def kernel_expansion(spec, SV, coef, X, Py_ssize_t min_parallel_work=-1):
    """f(x) = sum_t coef_t k(sv_t, x) for each row of X (same as refimpl.kernels.kernel_expansion).

    Parallel over X only from ``min_parallel_work`` kernel evaluations on (default: the engine's
    PARALLEL_MIN_WORK); the result does not depend on it, each row's sum is formed the same way."""
    cdef const double[:, ::1] sv = np.ascontiguousarray(SV, dtype=np.float64)
    cdef const double[::1] c = np.ascontiguousarray(coef, dtype=np.float64)
    cdef const double[:, ::1] x = np.ascontiguousarray(X, dtype=np.float64)
    cdef Py_ssize_t nx = x.shape[0], ns = sv.shape[0], d = x.shape[1], i, t
    cdef cnp.ndarray[double, ndim=1, mode="c"] out = np.zeros(nx)
    cdef double[::1] o = out
    cdef Kern K = make_kern(spec, d)
    cdef double s, dax
    cdef double* sda
    cdef double* buf
    if nx == 0 or ns == 0:
        return out
    sda = <double*> malloc(ns * sizeof(double))
    # small expansions (e.g. a 59-point sample) run serially: starting threads would cost more,
    # and far more on a loaded machine, where spin-waiting threads compete for the cores
    cdef bint parallel = nx * ns >= (PARALLEL_MIN_WORK if min_parallel_work < 0 else min_parallel_work)
    with nogil:
        for t in range(ns):
            sda[t] = k_raw(&K, &sv[t, 0], &sv[t, 0]) if (K.normalize and K.code >= 2) else 1.0
        for i in prange(nx, schedule="static", use_threads_if=parallel):
            # one scratch row per test point keeps the loop body thread-private
            buf = <double*> malloc(ns * sizeof(double))
            dax = k_raw(&K, &x[i, 0], &x[i, 0]) if (K.normalize and K.code >= 2) else 1.0
            k_row(&K, &sv[0, 0], sda, ns, &x[i, 0], dax, buf)
            s = 0.0
            for t in range(ns):
                s = s + c[t] * buf[t]
            o[i] = s
            free(buf)
    free(sda)
    return out
