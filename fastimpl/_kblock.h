/* The sums of the kernel block (fastimpl/_kblock.pxi): sum_j w[j] v[j] and sum_j |w[j]| v[j] over a row of
 * single-precision kernel values v against double weights w, accumulated in double.
 *
 * One body, compiled portable and for AVX-512 (run-time dispatch by cv_simd_level of _simd.h); each copy
 * sums in one fixed order (the vector lanes, then the lanes in order), so a value depends on the inputs
 * and the machine only, never on threads. */
#ifndef COREVECTOR_KBLOCK_H
#define COREVECTOR_KBLOCK_H
#include <stddef.h>
#include "_simd.h"

/* s[0] += sum_j w[j] v[j], s[1] += sum_j a[j] v[j] (a = |w|: the scale of the block's error bound) */
#define CV_FDOT2_BODY                                                               \
    double s0 = 0.0, s1 = 0.0;                                                      \
    _Pragma("omp simd reduction(+:s0,s1)")                                          \
    for (ptrdiff_t j = 0; j < n; j++) {                                             \
        double x = (double)v[j];                                                    \
        s0 += w[j] * x;                                                             \
        s1 += a[j] * x;                                                             \
    }                                                                               \
    s[0] += s0;                                                                     \
    s[1] += s1;

static void cv_fdot2_base(const float *restrict v, const double *restrict w, const double *restrict a,
                          ptrdiff_t n, double *s)
{ CV_FDOT2_BODY }
#ifdef CV_X86_DISPATCH
__attribute__((target("avx512f,avx2,fma")))
static void cv_fdot2_avx512(const float *restrict v, const double *restrict w, const double *restrict a,
                            ptrdiff_t n, double *s)
{ CV_FDOT2_BODY }
#endif

static void cv_fdot2(const float *v, const double *w, const double *a, ptrdiff_t n, double *s)
{
#ifdef CV_X86_DISPATCH
    if (cv_simd_level() == 2) { cv_fdot2_avx512(v, w, a, n, s); return; }
#endif
    cv_fdot2_base(v, w, a, n, s);
}

/* The block's sums of n candidates over one panel: s0[i] += sum_j w[j] v_i[j], s1[i] += sum_j a[j] v_i[j],
 * v_i = panel + rows[i] * ld (cols values).  Candidates are random rows of a large array, so each row is
 * a few cache misses: the row CV_PREFETCH candidates ahead is requested while the current one is summed.
 * Every (candidate, panel) sum is cv_fdot2's, added in panel order by the caller: the same values as one
 * candidate at a time. */
#define CV_PREFETCH 8
static void cv_panel_sums(const float *panel, ptrdiff_t ld, const ptrdiff_t *rows, ptrdiff_t n,
                          const double *w, const double *a, ptrdiff_t cols, double *s0, double *s1)
{
    for (ptrdiff_t i = 0; i < n; i++) {
        double s[2] = {0.0, 0.0};
        if (i + CV_PREFETCH < n) {
            const char *q = (const char *)(panel + rows[i + CV_PREFETCH] * ld);
            for (ptrdiff_t b = 0; b < (ptrdiff_t)(cols * sizeof(float)); b += 64) __builtin_prefetch(q + b);
        }
        cv_fdot2(panel + rows[i] * ld, w, a, cols, s);
        s0[i] += s[0];
        s1[i] += s[1];
    }
}
#endif
