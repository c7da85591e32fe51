# SSVR's candidate scoring (fastimpl._ssvr; eq. (16)): num_j = g_bar'K_bar_j and knorm2_j = |K_bar_j|^2 for the
# candidates of a round, from each candidate's kernel row over the n inputs.  score_candidates runs the full-scan
# skeleton of the kernel-row layer (_krows.pxd: kernel_rows) with _score_sink as its reduction, in parallel over
# chunks of candidates; score_candidates_simd fuses the Gaussian / Laplacian rows with the sums below BLAS_MIN_D
# (cv_radial_sums of _simd.h on the inputs stored by coordinate).  Each candidate's sums run on one thread in a
# fixed order, so the scores do not depend on the thread count.

cdef struct _Scoring:
    # what the reduction of a candidate's kernel row reads (shared by the threads; each writes its own j)
    const double* g
    const double* beta
    const Py_ssize_t* P
    const Py_ssize_t* O
    Py_ssize_t n, m
    double lam
    double* num
    double* knorm2
    const Kern* K
    const double* rd         # k_raw(x_i, x_i), for the candidate's own entry
    bint fix_self            # set the candidate's own entry k(x_o, x_o) to k_diag (BLAS and CSR rows)


cdef void _score_sink(void* ctx, Py_ssize_t j, double* row) noexcept nogil:
    """num_j = g_bar'K_bar_j and knorm2_j = |K_bar_j|^2 of eq. (16) from candidate j's kernel row."""
    cdef _Scoring* c = <_Scoring*> ctx
    cdef Py_ssize_t i, p
    cdef double sg = 0.0, sk = 0.0, sp = 0.0, sq = 0.0, v
    if c.fix_self:
        row[c.O[j]] = k_diag(c.K, c.rd[c.O[j]])
    for i in range(c.n):
        sg = sg + c.g[i] * row[i]
        sk = sk + row[i] * row[i]
    for p in range(c.m):
        v = row[c.P[p]]
        sp = sp + c.beta[p] * v
        sq = sq + v * v
    c.num[j] = sg + 2.0 * c.lam * sp
    c.knorm2[j] = sk + sq


cdef int score_candidates(_PointStore rows, const Queries* Q, Py_ssize_t nO, _Scoring* ctx, Py_ssize_t block,
                          int nthreads) noexcept nogil:
    """_score_sink over the candidates ctx.O[:nO]: the layer's kernel_rows in parallel over chunks of ``block``
    candidates (each chunk's rows, and so each candidate's sums, do not depend on nthreads).  Returns -1 when
    out of memory."""
    cdef Py_ssize_t nchunk = (nO + block - 1) // block, c, lo, hi, failed = 0
    cdef Py_ssize_t bufsize = rows_scratch(rows, Q, rows.n, block)
    cdef double* buf = NULL
    with parallel(num_threads=nthreads):
        buf = <double*> malloc(bufsize * sizeof(double))
        for c in prange(nchunk, schedule="dynamic"):
            lo = c * block
            hi = min(lo + block, nO)
            if buf == NULL:
                failed += 1
            else:
                kernel_rows(rows, Q, ctx.O, lo, hi, 0, rows.n, block, _score_sink, ctx, buf)
        free(buf)
    return -1 if failed else 0


cdef void score_candidates_simd(const Kern* K, const double* X, const double* Xt, Py_ssize_t ldt, Py_ssize_t n,
                                const Py_ssize_t* O, Py_ssize_t nO, const double* g, const double* beta,
                                const double* KP, Py_ssize_t m, double lam,
                                double* num, double* knorm2, int nthreads) noexcept nogil:
    """score_candidates for the Gaussian / Laplacian kernel below BLAS_MIN_D (cv_radial_sums of _simd.h, Xt the
    inputs by coordinate with leading dimension ldt):
    the sums over the n points in one fused SIMD pass per candidate (no buffer), the basis entries K_Pj read from row j
    of K_P (k(x_j, x_p) = k(x_p, x_j) exactly: the squared differences are symmetric)."""
    cdef Py_ssize_t j, p, o
    cdef double sg, sk, sp, sq, v
    cdef int lap = 1 if k_is_laplacian(K) else 0
    for j in prange(nO, schedule="dynamic", num_threads=nthreads):
        o = O[j]
        # sg and sk are written through their addresses only: without an assignment here Cython
        # would leave them shared between the threads (a data race that changed the selected basis)
        sg = 0.0
        sk = 0.0
        cv_radial_sums(Xt, ldt, n, K.d, &X[o * K.d], -K.gamma, lap, g, &sg, &sk)
        sp = 0.0
        sq = 0.0
        for p in range(m):
            v = KP[o + p * n]
            sp = sp + beta[p] * v
            sq = sq + v * v
        num[j] = sg + 2.0 * lam * sp
        knorm2[j] = sk + sq
