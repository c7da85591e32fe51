/* A Taylor expansion of a weighted Gaussian sum, for screening the scans of fastimpl/_engine.pyx.
 *
 * The scans need s(x) = sum_j w_j exp(-gamma ||x - c_j||^2) at many points x for the same support {c_j, w_j}.
 * With a centre mu, u = x - mu and v_j = c_j - mu,
 *
 *     exp(-gamma ||u - v||^2) = exp(-gamma ||u||^2) exp(-gamma ||v||^2) exp(2 gamma u'v),
 *
 * and expanding exp(2 gamma u'v) = sum_k (2 gamma u'v)^k / k! by the multinomial theorem gives
 *
 *     s(x) ~ exp(-gamma ||u||^2) sum_{|n| <= p} A_n u^n,
 *     A_n = sum_j w_j exp(-gamma ||v_j||^2) prod_e (2 gamma v_je)^{n_e} / n_e!,
 *
 * the single-centre Taylor form of the fast Gauss transform (Greengard & Strain 1991; the graded
 * truncation of Yang, Duraiswami & Gumerov's improved FGT, 2003).  It is computed in the scaled
 * coordinates u' = sigma u, v' = sigma v, sigma = sqrt(2 gamma): then A_n u^n = (sum_j w_j e^{-|v'_j|^2/2}
 * v'_j^n / n!) u'^n and exp(-gamma |u|^2) = exp(-|u'|^2 / 2), and every factor is bounded by
 * |u'|, |v'| <= sqrt(t), whatever the data's units (no power of a raw coordinate can overflow).  The
 * C(p + d, d) moments A_n cost O(n_sv C(p + d, d)) once per support; each point then costs C(p + d, d)
 * multiply-adds instead of n_sv kernel evaluations.  It pays for wide kernels in few dimensions --
 * exactly where single-precision screening cannot decide (the d^2 of a wide kernel at large C spread less
 * than float's error).
 *
 * Error per term (|x - mu|, |c_j - mu| <= R; t = 2 gamma R^2), proved in _PointStore.enable_taylor:
 *   truncation: |exp(s) - sum_{k<=p} s^k/k!| <= |s|^{p+1}/(p+1)! e^{|s|} at s = 2 gamma u'v, and
 *     exp(-gamma(|u|^2 + |v|^2)) e^{2 gamma |u||v|} <= 1, so each term is off by at most t^{p+1}/(p+1)!;
 *   rounding: sum_n |A_n u^n| exp(-gamma|u|^2) <= sum_j |w_j| exp(-gamma (|u| - |v_j|)^2) <= sum_j |w_j|,
 *     so every rounding is relative to sum |w| and the bound is (chain length) * eps * sum |w|.
 * Monomials are ordered lexicographically by (n_1, ..., n_d), n_1 outermost; d is 1, 2 or 3. */
#ifndef COREVECTOR_TAYLOR_H
#define COREVECTOR_TAYLOR_H
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "_simd.h"

#define CV_TAYLOR_MAX_D 3
/* support vectors per tile of the moment build, points per lane block of the evaluation */
#define CV_TT 64
#define CV_TL 32

/* number of monomials of degree <= p in d variables: C(p + d, d) */
CV_API ptrdiff_t cv_taylor_nterms(int d, int p)
{
    ptrdiff_t r = 1;
    for (int k = 1; k <= d; k++) r = r * (p + k) / k;
    return r;
}

/* coef[k++] += sum_l T[l] Q[l] over a tile: one moment's share of it (the build below) */
#define CV_TAYLOR_MOMENT(T, Q)                                                                      \
    { double s_ = 0.0;                                                                              \
      _Pragma("omp simd reduction(+:s_)")                                                           \
      for (l = 0; l < CV_TT; l++) s_ += (T)[l] * (Q)[l];                                            \
      coef[k++] += s_; }

/* coef[0 : nterms] = the scaled moments sum_j w_j e^{-|v'_j|^2/2} v'_j^n / n! of the n points C (coordinate-
 * major, C[e * ld + j]), v'_j = sigma (c_j - mu), with weights w.  work: cv_taylor_work doubles.  The sums
 * run tile by tile in a fixed order (deterministic). */
#define CV_TAYLOR_BUILD_BODY                                                                       \
    const ptrdiff_t P1 = p + 1;                                                                    \
    double *gw = work, *t1 = work + CV_TT, *t2 = work + 2 * CV_TT;                                  \
    double *pw = work + 3 * CV_TT; /* pw[(e * P1 + a) * CV_TT + l] = v'_le^a / a! */                \
    ptrdiff_t nt = cv_taylor_nterms(d, p), j0, l, a, b, c, e, k;                                    \
    for (k = 0; k < nt; k++) coef[k] = 0.0;                                                         \
    for (j0 = 0; j0 < n; j0 += CV_TT) {                                                            \
        const ptrdiff_t nb = n - j0 < CV_TT ? n - j0 : CV_TT;                                       \
        for (l = 0; l < CV_TT; l++) gw[l] = 0.0;                                                    \
        for (l = 0; l < nb; l++) {                                                                  \
            double r = 0.0;                                                                         \
            for (e = 0; e < d; e++) { double v = sigma * (C[e * ld + j0 + l] - mu[e]); r += v * v; } \
            gw[l] = w[j0 + l] * exp(-0.5 * r);                                                      \
        }                                                                                           \
        for (e = 0; e < d; e++) {                                                                   \
            double *q = pw + e * P1 * CV_TT;                                                        \
            for (l = 0; l < CV_TT; l++) {                                                           \
                q[l] = 1.0;                                                                         \
                t1[l] = l < nb ? sigma * (C[e * ld + j0 + l] - mu[e]) : 0.0;                        \
            }                                                                                       \
            for (a = 1; a <= p; a++) {                                                              \
                const double inv = 1.0 / (double) a;                                                \
                _Pragma("omp simd")                                                                 \
                for (l = 0; l < CV_TT; l++) q[a * CV_TT + l] = q[(a - 1) * CV_TT + l] * (t1[l] * inv); \
            }                                                                                       \
        }                                                                                           \
        k = 0;                                                                                      \
        for (a = 0; a <= p; a++) {                                                                  \
            const double *q0 = pw + a * CV_TT;                                                      \
            _Pragma("omp simd")                                                                     \
            for (l = 0; l < CV_TT; l++) t1[l] = gw[l] * q0[l];                                      \
            if (d == 1) { double s = 0.0;                                                           \
                _Pragma("omp simd reduction(+:s)")                                                  \
                for (l = 0; l < CV_TT; l++) s += t1[l];                                             \
                coef[k++] += s; continue; }                                                         \
            for (b = 0; b <= p - a; b++) {                                                          \
                const double *q1 = pw + (P1 + b) * CV_TT;                                           \
                if (d == 2) { CV_TAYLOR_MOMENT(t1, q1) continue; }                                  \
                _Pragma("omp simd")                                                                 \
                for (l = 0; l < CV_TT; l++) t2[l] = t1[l] * q1[l];                                  \
                for (c = 0; c <= p - a - b; c++)                                                    \
                    CV_TAYLOR_MOMENT(t2, pw + (2 * P1 + c) * CV_TT)                                 \
            }                                                                                       \
        }                                                                                           \
    }

/* DST[l] = sum_{h <= TOP} Q[h] UE[l]^h for every lane l, by Horner (one variable of the evaluation below) */
#define CV_TAYLOR_HORNER(DST, Q, TOP, UE)                                                           \
    for (l = 0; l < CV_TL; l++) (DST)[l] = (Q)[TOP];                                                \
    for (ptrdiff_t h_ = (TOP) - 1; h_ >= 0; h_--) {                                                 \
        _Pragma("omp simd")                                                                         \
        for (l = 0; l < CV_TL; l++) (DST)[l] = (DST)[l] * (UE)[l] + (Q)[h_];                        \
    }

/* out[i] = exp(-|u'_i|^2 / 2) sum_n coef[n] u'_i^n, u'_i = sigma (X[rows[i] * ldx + :] - mu) (rows NULL:
 * row i), CV_TL points at a time: every loop over l is one vector operation. */
#define CV_TAYLOR_EVAL_BODY                                                                        \
    double u[CV_TAYLOR_MAX_D][CV_TL], acc[CV_TL], in1[CV_TL], in2[CV_TL], pw0[CV_TL], pw1[CV_TL];   \
    double r[CV_TL];                                                                                \
    ptrdiff_t i0, l, a, b, e, k;                                                                    \
    for (i0 = 0; i0 < n; i0 += CV_TL) {                                                            \
        const ptrdiff_t nb = n - i0 < CV_TL ? n - i0 : CV_TL;                                       \
        for (l = 0; l < CV_TL; l++) {                                                               \
            const double *x = X + (l < nb ? (rows ? rows[i0 + l] : i0 + l) : (rows ? rows[i0] : i0)) * ldx; \
            r[l] = 0.0;                                                                             \
            for (e = 0; e < d; e++) { u[e][l] = sigma * (x[e] - mu[e]); r[l] += u[e][l] * u[e][l]; } \
        }                                                                                           \
        if (d == 1) {                                                                               \
            CV_TAYLOR_HORNER(acc, coef, p, u[0])                                                    \
        } else {                                                                                    \
            k = 0;                                                                                  \
            for (l = 0; l < CV_TL; l++) { acc[l] = 0.0; pw0[l] = 1.0; }                            \
            for (a = 0; a <= p; a++) {                                                              \
                if (d == 2) {  /* Horner in u_2 over the block of n_1 = a */                       \
                    CV_TAYLOR_HORNER(in1, coef + k, p - a, u[1])                                    \
                    k += p - a + 1;                                                                 \
                } else {                                                                            \
                    for (l = 0; l < CV_TL; l++) { in1[l] = 0.0; pw1[l] = 1.0; }                    \
                    for (b = 0; b <= p - a; b++) {  /* Horner in u_3 over the block of (a, b) */    \
                        CV_TAYLOR_HORNER(in2, coef + k, p - a - b, u[2])                            \
                        k += p - a - b + 1;                                                         \
                        _Pragma("omp simd")                                                         \
                        for (l = 0; l < CV_TL; l++) { in1[l] += pw1[l] * in2[l]; pw1[l] *= u[1][l]; } \
                    }                                                                               \
                }                                                                                   \
                _Pragma("omp simd")                                                                 \
                for (l = 0; l < CV_TL; l++) { acc[l] += pw0[l] * in1[l]; pw0[l] *= u[0][l]; }       \
            }                                                                                       \
        }                                                                                           \
        _Pragma("omp simd")                                                                         \
        for (l = 0; l < CV_TL; l++) r[l] = exp(-0.5 * r[l]);                                        \
        for (l = 0; l < nb; l++) out[i0 + l] = r[l] * acc[l];                                       \
    }

#define CV_TAYLOR_DEFINE(SUFFIX, ATTR)                                                              \
    ATTR static void cv_taylor_build_##SUFFIX(const double *restrict C, ptrdiff_t ld, ptrdiff_t n,  \
            int d, const double *restrict mu, double sigma, int p, const double *restrict w,        \
            double *restrict coef, double *restrict work)                                           \
    { CV_TAYLOR_BUILD_BODY }                                                                        \
    ATTR static void cv_taylor_eval_##SUFFIX(const double *restrict coef, int d, int p, double sigma, \
            const double *restrict mu, const double *restrict X, ptrdiff_t ldx,                     \
            const ptrdiff_t *restrict rows, ptrdiff_t n, double *restrict out)                      \
    { CV_TAYLOR_EVAL_BODY }

CV_TAYLOR_DEFINE(base, )
#ifdef CV_X86_DISPATCH
CV_TAYLOR_DEFINE(avx2, CV_T256)
CV_TAYLOR_DEFINE(avx512, CV_T512)
#endif

/* doubles of work space cv_taylor_build needs */
CV_API ptrdiff_t cv_taylor_work(int d, int p) { return (ptrdiff_t) CV_TT * (3 + (ptrdiff_t) d * (p + 1)); }

/* sigma = sqrt(2 gamma): see the top of this file */
CV_API void cv_taylor_build(const double *C, ptrdiff_t ld, ptrdiff_t n, int d, const double *mu, double sigma,
                            int p, const double *w, double *coef, double *work)
{
#ifdef CV_X86_DISPATCH
    int level = cv_simd_level();
    if (level == 2) { cv_taylor_build_avx512(C, ld, n, d, mu, sigma, p, w, coef, work); return; }
    if (level == 1) { cv_taylor_build_avx2(C, ld, n, d, mu, sigma, p, w, coef, work); return; }
#endif
    cv_taylor_build_base(C, ld, n, d, mu, sigma, p, w, coef, work);
}

CV_API void cv_taylor_eval(const double *coef, int d, int p, double sigma, const double *mu, const double *X,
                           ptrdiff_t ldx, const ptrdiff_t *rows, ptrdiff_t n, double *out)
{
#ifdef CV_X86_DISPATCH
    int level = cv_simd_level();
    if (level == 2) { cv_taylor_eval_avx512(coef, d, p, sigma, mu, X, ldx, rows, n, out); return; }
    if (level == 1) { cv_taylor_eval_avx2(coef, d, p, sigma, mu, X, ldx, rows, n, out); return; }
#endif
    cv_taylor_eval_base(coef, d, p, sigma, mu, X, ldx, rows, n, out);
}
#endif
