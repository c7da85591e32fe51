# The core-set QP by SMO (fastimpl._engine): warm-started, second-order working-set selection
# (refimpl.simplex_qp.smo_simplex), on the core set's alpha and gradient g = 2 Q alpha - (l - c0), which
# FastMEBOps holds, with rows of Q from its cache (FastMEBOps.qrow).  No buffers of its own: a step's three
# O(|S|) passes are the vectorised loops of _simd_smo.h.  grad_stats and most_violating are shared with
# the active set (_active_set.pxi), whose stopping gap is SMO's.

cdef extern from "_simd.h":
    void cv_grad_update(double* g, const double* Qi, const double* Qj, const double* alpha, double two_t,
                        Py_ssize_t n, double* gmin, double* gmax, double* gabs) noexcept nogil
    Py_ssize_t cv_wss2(const double* g, const double* Qi, const double* Qd, const double* alpha, double gi,
                       double Qii, double tau, double tie, Py_ssize_t n, double* best_out) noexcept nogil
    Py_ssize_t cv_first_le(const double* g, Py_ssize_t n, double thr) noexcept nogil

cdef void grad_stats(FastMEBOps ops, double* gmin, double* gmax, double* gabs) noexcept nogil:
    """min g, max_{alpha>0} g and max |g| over the core set (SMO fuses this pass into its update)."""
    cdef Py_ssize_t t
    cdef double g
    gmin[0] = INFINITY
    gmax[0] = -INFINITY
    gabs[0] = 0.0
    for t in range(ops.size):
        g = ops.grad[t]
        if g < gmin[0]:
            gmin[0] = g
        if fabs(g) > gabs[0]:
            gabs[0] = fabs(g)
        if ops.alpha[t] > 0 and g > gmax[0]:
            gmax[0] = g


cdef Py_ssize_t most_violating(FastMEBOps ops, double gmin, double gabs) noexcept nogil:
    """refimpl.simplex_qp.most_violating: the first t with g_t within TIE of the minimum."""
    cdef Py_ssize_t t = cv_first_le(ops.grad, ops.size, gmin + TIE * (gabs + fabs(ops.c0)))
    return t if t < ops.size else 0


cdef Py_ssize_t smo_solve(FastMEBOps ops, double tol, Py_ssize_t max_steps) noexcept nogil:
    """Warm-started SMO with second-order working-set selection (refimpl.simplex_qp.smo_simplex).

    Same selections and the same arithmetic as the reference, organised for speed: the three O(|S|)
    passes of a step (the most violating i, the second-order j, the gradient update with the
    statistics of the next step) are the vectorised loops of _simd_smo.h, and Q rows come from the LRU
    cache.  Returns the steps made (-2: out of memory)."""
    cdef Py_ssize_t steps = 0, t, i, j, size = ops.size
    cdef double gmin = INFINITY, gmax = -INFINITY, gabs = 0.0, gi, best
    cdef double diff, curv, step, tstep, Qii, ai_old
    cdef double* Qi
    cdef double* Qj
    cdef double* grad = ops.grad
    cdef double* alpha = ops.alpha
    cdef double* Qd = ops.Qd
    grad_stats(ops, &gmin, &gmax, &gabs)
    while True:
        i = most_violating(ops, gmin, gabs)
        gi = grad[i]
        if gmax - gi <= tol or steps >= max_steps:
            return steps
        Qi = ops.qrow(i, -1)
        if Qi == NULL:
            return -2
        Qii = Qd[i]
        j = cv_wss2(grad, Qi, Qd, alpha, gi, Qii, TAU, TIE, size, &best)
        if j < 0:  # no coordinate may decrease against i (the first of the support, as the reference)
            j = 0
            while j < size - 1 and not (alpha[j] > 0):
                j += 1
        diff = grad[j] - gi
        curv = Qii + Qd[j] - 2.0 * Qi[j]
        if curv <= TAU:
            curv = TAU
        step = diff / (2.0 * curv)
        if step >= alpha[j]:
            tstep = alpha[j]
            alpha[j] = 0.0
        else:
            tstep = step
            alpha[j] -= tstep
        ai_old = alpha[i]
        alpha[i] += tstep
        Qj = ops.qrow(j, i)
        if Qj == NULL:
            return -2
        cv_grad_update(grad, Qi, Qj, alpha, 2.0 * tstep, size, &gmin, &gmax, &gabs)
        steps += 1
