# Shared by the fastimpl extensions with ``include "_kernels.pxi"``: the base kernels of
# refimpl.kernels evaluated point by point in C (nogil).  The including module must cimport
# exp and sqrt from libc.math.
cdef extern from "_vexp.h":
    void cv_vexp(double* buf, Py_ssize_t n) noexcept nogil

cdef struct Kern:
    int code          # 0 rbf, 1 laplacian, 2 poly, 3 linear (refimpl.kernels.KERNEL_CODES)
    double gamma
    int degree
    double coef0
    int normalize
    Py_ssize_t d


# The kernel kinds by name, so that no site tests code ranges.  The radial kernels (Gaussian,
# Laplacian) depend on ||a - b|| only and have k(a, a) = 1; the dot-product kernels (polynomial,
# linear) depend on a'b only, and only they are changed by normalisation.
cdef inline bint k_is_radial(const Kern* K) noexcept nogil:
    return K.code <= 1


cdef inline bint k_is_gaussian(const Kern* K) noexcept nogil:
    return K.code == 0


cdef inline bint k_is_laplacian(const Kern* K) noexcept nogil:
    return K.code == 1


cdef inline bint k_is_dot(const Kern* K) noexcept nogil:
    return K.code >= 2


cdef inline bint k_is_poly(const Kern* K) noexcept nogil:
    return K.code == 2


cdef inline bint k_is_linear(const Kern* K) noexcept nogil:
    return K.code == 3


cdef inline bint k_is_normalized(const Kern* K) noexcept nogil:
    """True when k(a, b) is k_raw(a, b) / sqrt(k_raw(a, a) k_raw(b, b)) (normalize and a dot-product kernel)."""
    return K.normalize != 0 and k_is_dot(K)


cdef inline double ipow(double x, int k) noexcept nogil:
    cdef double r = 1.0
    while k > 0:
        if k & 1:
            r *= x
        x *= x
        k >>= 1
    return r


cdef inline double k_raw(const Kern* K, const double* a, const double* b) noexcept nogil:
    cdef Py_ssize_t t
    cdef double s = 0.0, u
    if k_is_radial(K):
        for t in range(K.d):
            u = a[t] - b[t]
            s += u * u
        if k_is_gaussian(K):
            return exp(-K.gamma * s)
        return exp(-K.gamma * sqrt(s))
    for t in range(K.d):
        s += a[t] * b[t]
    if k_is_linear(K):
        return K.gamma * s
    return ipow(K.gamma * s + K.coef0, K.degree)


cdef inline double k_rawdiag(const Kern* K, const double* a) noexcept nogil:
    if k_is_radial(K):
        return 1.0
    return k_raw(K, a, a)


cdef inline double k_eval(const Kern* K, const double* a, const double* b, double da, double db) noexcept nogil:
    """k(a, b); da, db are k_raw(a, a), k_raw(b, b), used only by normalized kernels."""
    cdef double v = k_raw(K, a, b)
    if k_is_normalized(K):
        if da > 0 and db > 0:
            return v / sqrt(da * db)
        return 0.0
    return v


cdef inline double k_diag(const Kern* K, double da) noexcept nogil:
    if K.normalize:
        return 1.0 if (k_is_radial(K) or da > 0) else 0.0
    return da


cdef void k_row(const Kern* K, const double* SVX, const double* sda, Py_ssize_t ns,
                const double* x, double dax, double* out) noexcept nogil:
    """out[t] = k(sv_t, x) for the ns packed rows of SVX; exp runs over the whole row at once
    (vectorised by _vexp.h), which is where the Gaussian scans spend their time."""
    cdef Py_ssize_t t, e
    cdef double s, u
    cdef const double* a
    if k_is_radial(K):
        for t in range(ns):
            a = &SVX[t * K.d]
            s = 0.0
            for e in range(K.d):
                u = a[e] - x[e]
                s += u * u
            out[t] = -K.gamma * s if k_is_gaussian(K) else -K.gamma * sqrt(s)
        cv_vexp(out, ns)
        return
    for t in range(ns):
        out[t] = k_eval(K, &SVX[t * K.d], x, sda[t], dax)


cdef Kern make_kern(spec, Py_ssize_t d):
    cdef Kern K
    K.code = spec.code
    K.gamma = spec.gamma
    K.degree = spec.degree
    K.coef0 = spec.coef0
    K.normalize = 1 if spec.normalize else 0
    K.d = d
    return K
