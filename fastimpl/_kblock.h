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
#endif
