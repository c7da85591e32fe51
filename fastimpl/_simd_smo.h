/* The O(|S|) passes of one SMO step, portable and AVX-512, with their dispatch (included by _simd.h only,
 * last; it relies on CV_X86_DISPATCH, CV_API, cv_mask8 and cv_simd_level from there and _simd_x86.h).
 * The engine's SMO (fastimpl/_smo.pxi) is their only caller. */
#ifndef COREVECTOR_SIMD_SMO_H
#define COREVECTOR_SIMD_SMO_H

/* ---------------------------------------------------------------------------------------------
 * The O(|S|) passes of one SMO step (fastimpl/_smo.pxi: smo), vectorised.  They compute the
 * same values as refimpl.simplex_qp.smo_simplex in the same order of operations (no FMA contraction:
 * g + t (Qi - Qj) is a subtraction, a product and a sum, each rounded), and pick the same indices. */
#define CV_NOCONTRACT __attribute__((optimize("fp-contract=off")))

/* g += two_t (Qi - Qj); returns min g, max over alpha > 0 of g and max |g| over the new values */
CV_NOCONTRACT
static void cv_grad_update_base(double *g, const double *Qi, const double *Qj, const double *alpha,
                                double two_t, ptrdiff_t n, double *gmin, double *gmax, double *gabs)
{
    double lo = INFINITY, hi = -INFINITY, ab = 0.0;
    for (ptrdiff_t t = 0; t < n; t++) {
        double d = Qi[t] - Qj[t];
        double v = g[t] + two_t * d;
        g[t] = v;
        if (v < lo) lo = v;
        if (fabs(v) > ab) ab = fabs(v);
        if (alpha[t] > 0 && v > hi) hi = v;
    }
    *gmin = lo; *gmax = hi; *gabs = ab;
}

/* the second-order choice of j (Fan, Chen & Lin 2005) among t with alpha_t > 0 and g_t > gi: the first
 * t whose score (g_t - gi)^2 / max(Qii + Qd_t - 2 Qi_t, tau) is within tie of the best; -1 if none.  Two
 * passes, each its own function so that the two-thread SMO (fastimpl/_smo.pxi) can split either over a
 * range: the best score (cv_wss2_max, -inf if no candidate), then the first candidate at or above
 * best - tie best (cv_wss2_first, n if none). */
CV_NOCONTRACT
static inline double cv_wss2_score_base(const double *g, const double *Qi, const double *Qd, const double *alpha,
                                        double gi, double Qii, double tau, ptrdiff_t t)
{
    double diff = g[t] - gi;
    if (!(alpha[t] > 0 && diff > 0)) return -INFINITY;
    double curv = (Qii + Qd[t]) - 2.0 * Qi[t];
    if (curv <= tau) curv = tau;
    return diff * diff / curv;
}

CV_NOCONTRACT
static double cv_wss2_max_base(const double *g, const double *Qi, const double *Qd, const double *alpha,
                               double gi, double Qii, double tau, ptrdiff_t n)
{
    double best = -INFINITY;
    for (ptrdiff_t t = 0; t < n; t++) {
        double sc = cv_wss2_score_base(g, Qi, Qd, alpha, gi, Qii, tau, t);
        if (sc > best) best = sc;
    }
    return best;
}

CV_NOCONTRACT
static ptrdiff_t cv_wss2_first_base(const double *g, const double *Qi, const double *Qd, const double *alpha,
                                    double gi, double Qii, double tau, double thr, ptrdiff_t n)
{
    for (ptrdiff_t t = 0; t < n; t++) {
        double diff = g[t] - gi;
        if (alpha[t] > 0 && diff > 0 && cv_wss2_score_base(g, Qi, Qd, alpha, gi, Qii, tau, t) >= thr) return t;
    }
    return n;
}

/* the first t with g_t <= thr (n if none) */
static ptrdiff_t cv_first_le_base(const double *g, ptrdiff_t n, double thr)
{
    for (ptrdiff_t t = 0; t < n; t++)
        if (g[t] <= thr) return t;
    return n;
}

#ifdef CV_X86_DISPATCH
CV_NOCONTRACT CV_T512 static void cv_grad_update_avx512(double *g, const double *Qi, const double *Qj, const double *alpha,
                                  double two_t, ptrdiff_t n, double *gmin, double *gmax, double *gabs)
{
    const __m512d vt = _mm512_set1_pd(two_t), zero = _mm512_setzero_pd();
    const __m512d absmask = _mm512_castsi512_pd(_mm512_set1_epi64(0x7FFFFFFFFFFFFFFFLL));
    __m512d lo = _mm512_set1_pd(INFINITY), hi = _mm512_set1_pd(-INFINITY), ab = zero;
    ptrdiff_t t;
    for (t = 0; t < n; t += 8) {
        const __mmask8 k = cv_mask8(n - t);
        __m512d d = _mm512_sub_pd(_mm512_maskz_loadu_pd(k, Qi + t), _mm512_maskz_loadu_pd(k, Qj + t));
        __m512d v = _mm512_add_pd(_mm512_maskz_loadu_pd(k, g + t), _mm512_mul_pd(vt, d));
        _mm512_mask_storeu_pd(g + t, k, v);
        lo = _mm512_mask_min_pd(lo, k, lo, v);
        ab = _mm512_mask_max_pd(ab, k, ab, _mm512_and_pd(v, absmask));
        __mmask8 pos = _mm512_mask_cmp_pd_mask(k, _mm512_maskz_loadu_pd(k, alpha + t), zero, _CMP_GT_OQ);
        hi = _mm512_mask_max_pd(hi, pos, hi, v);
    }
    *gmin = _mm512_reduce_min_pd(lo); *gmax = _mm512_reduce_max_pd(hi); *gabs = _mm512_reduce_max_pd(ab);
}

/* the scores (g_t - gi)^2 / max(Qii + Qd_t - 2 Qi_t, tau) of t, ..., t + 7 (those below n), and in *ok
 * the lanes with alpha_t > 0 and g_t > gi (the candidates) */
CV_NOCONTRACT CV_T512 static inline __m512d cv_wss2_scores_x512(const double *g, const double *Qi, const double *Qd,
        const double *alpha, ptrdiff_t t, ptrdiff_t n, __m512d vgi, __m512d vQii, __m512d vtau, __mmask8 *ok)
{
    const __m512d two = _mm512_set1_pd(2.0), zero = _mm512_setzero_pd();
    const __mmask8 k = cv_mask8(n - t);
    __m512d diff = _mm512_sub_pd(_mm512_maskz_loadu_pd(k, g + t), vgi);
    __mmask8 cand = _mm512_mask_cmp_pd_mask(k, _mm512_maskz_loadu_pd(k, alpha + t), zero, _CMP_GT_OQ);
    *ok = _mm512_mask_cmp_pd_mask(cand, diff, zero, _CMP_GT_OQ);
    __m512d curv = _mm512_sub_pd(_mm512_add_pd(vQii, _mm512_maskz_loadu_pd(k, Qd + t)),
                                 _mm512_mul_pd(two, _mm512_maskz_loadu_pd(k, Qi + t)));
    curv = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(curv, vtau, _CMP_LE_OQ), curv, vtau);
    return _mm512_div_pd(_mm512_mul_pd(diff, diff), curv);
}

CV_NOCONTRACT CV_T512 static double cv_wss2_max_avx512(const double *g, const double *Qi, const double *Qd,
                                const double *alpha, double gi, double Qii, double tau, ptrdiff_t n)
{
    const __m512d vgi = _mm512_set1_pd(gi), vQii = _mm512_set1_pd(Qii), vtau = _mm512_set1_pd(tau);
    __m512d best = _mm512_set1_pd(-INFINITY);
    for (ptrdiff_t t = 0; t < n; t += 8) {
        __mmask8 ok;
        __m512d sc = cv_wss2_scores_x512(g, Qi, Qd, alpha, t, n, vgi, vQii, vtau, &ok);
        best = _mm512_mask_max_pd(best, ok, best, sc);
    }
    return _mm512_reduce_max_pd(best);
}

CV_NOCONTRACT CV_T512 static ptrdiff_t cv_wss2_first_avx512(const double *g, const double *Qi, const double *Qd,
                                const double *alpha, double gi, double Qii, double tau, double thr, ptrdiff_t n)
{
    const __m512d vgi = _mm512_set1_pd(gi), vQii = _mm512_set1_pd(Qii), vtau = _mm512_set1_pd(tau);
    const __m512d vthr = _mm512_set1_pd(thr);
    for (ptrdiff_t t = 0; t < n; t += 8) {
        __mmask8 ok;
        __m512d sc = cv_wss2_scores_x512(g, Qi, Qd, alpha, t, n, vgi, vQii, vtau, &ok);
        __mmask8 hit = _mm512_mask_cmp_pd_mask(ok, sc, vthr, _CMP_GE_OQ);
        if (hit) return t + __builtin_ctz((unsigned) hit);
    }
    return n;
}

CV_T512 static ptrdiff_t cv_first_le_avx512(const double *g, ptrdiff_t n, double thr)
{
    const __m512d vthr = _mm512_set1_pd(thr);
    for (ptrdiff_t t = 0; t < n; t += 8) {
        const __mmask8 k = cv_mask8(n - t);
        __mmask8 hit = _mm512_mask_cmp_pd_mask(k, _mm512_maskz_loadu_pd(k, g + t), vthr, _CMP_LE_OQ);
        if (hit) return t + __builtin_ctz((unsigned) hit);
    }
    return n;
}
#endif

CV_API void cv_grad_update(double *g, const double *Qi, const double *Qj, const double *alpha, double two_t,
                           ptrdiff_t n, double *gmin, double *gmax, double *gabs)
{
#ifdef CV_X86_DISPATCH
    if (cv_simd_level() == 2) { cv_grad_update_avx512(g, Qi, Qj, alpha, two_t, n, gmin, gmax, gabs); return; }
#endif
    cv_grad_update_base(g, Qi, Qj, alpha, two_t, n, gmin, gmax, gabs);
}

CV_API double cv_wss2_max(const double *g, const double *Qi, const double *Qd, const double *alpha, double gi,
                          double Qii, double tau, ptrdiff_t n)
{
#ifdef CV_X86_DISPATCH
    if (cv_simd_level() == 2) return cv_wss2_max_avx512(g, Qi, Qd, alpha, gi, Qii, tau, n);
#endif
    return cv_wss2_max_base(g, Qi, Qd, alpha, gi, Qii, tau, n);
}

CV_API ptrdiff_t cv_wss2_first(const double *g, const double *Qi, const double *Qd, const double *alpha, double gi,
                               double Qii, double tau, double thr, ptrdiff_t n)
{
#ifdef CV_X86_DISPATCH
    if (cv_simd_level() == 2) return cv_wss2_first_avx512(g, Qi, Qd, alpha, gi, Qii, tau, thr, n);
#endif
    return cv_wss2_first_base(g, Qi, Qd, alpha, gi, Qii, tau, thr, n);
}

/* the threshold of cv_wss2_first from the best score: the candidates within tie of it */
CV_NOCONTRACT static inline double cv_wss2_threshold(double best, double tie) { return best - tie * best; }

/* both passes over [0, n): j, or -1 if no candidate; the best score in *best_out */
CV_API ptrdiff_t cv_wss2(const double *g, const double *Qi, const double *Qd, const double *alpha, double gi,
                         double Qii, double tau, double tie, ptrdiff_t n, double *best_out)
{
    double b = cv_wss2_max(g, Qi, Qd, alpha, gi, Qii, tau, n);
    *best_out = b;
    if (b == -INFINITY) return -1;
    ptrdiff_t j = cv_wss2_first(g, Qi, Qd, alpha, gi, Qii, tau, cv_wss2_threshold(b, tie), n);
    return j < n ? j : -1;
}

CV_API ptrdiff_t cv_first_le(const double *g, ptrdiff_t n, double thr)
{
#ifdef CV_X86_DISPATCH
    if (cv_simd_level() == 2) return cv_first_le_avx512(g, n, thr);
#endif
    return cv_first_le_base(g, n, thr);
}
#endif
