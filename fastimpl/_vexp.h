/* Vectorised exp for the kernel rows of fastimpl/_engine.pyx.
 *
 * When setup.py finds glibc's libmvec (x86_64 Linux), exp is declared as an OpenMP SIMD function
 * so that the loop below calls the 2-wide SSE2 vector exp (_ZGVbN2v_exp): about 2.4x faster
 * than scalar exp on the Gaussian kernel rows that dominate the distance scans and prediction.
 * Elsewhere the same loop runs scalar exp.  Only this loop is affected: no -ffast-math anywhere.
 */
#ifndef COREVECTOR_VEXP_H
#define COREVECTOR_VEXP_H
#include <math.h>
#include <stddef.h>

#ifdef COREVECTOR_LIBMVEC
#pragma omp declare simd notinbranch
extern double exp(double);
#endif

static inline void cv_vexp(double *buf, ptrdiff_t n)
{
#ifdef COREVECTOR_LIBMVEC
#pragma omp simd
#endif
    for (ptrdiff_t t = 0; t < n; t++)
        buf[t] = exp(buf[t]);
}
#endif
