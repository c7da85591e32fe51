/* cv_dot4: the dot product of the fastimpl extensions (kernel expansions, distance scans), one
 * definition for _simd.h (so _engine) and _mmda.pyx.
 *
 * sum_j w[j] v[j] with four partial sums (j mod 4), added as (s0 + s1) + (s2 + s3): four independent
 * chains instead of one dependent one; the order is fixed, so the result is deterministic. */
#ifndef COREVECTOR_DOT4_H
#define COREVECTOR_DOT4_H
#include <stddef.h>

static double cv_dot4(const double *restrict w, const double *restrict v, ptrdiff_t n)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    ptrdiff_t j = 0;
    for (; j + 4 <= n; j += 4) {
        s0 += w[j] * v[j];
        s1 += w[j + 1] * v[j + 1];
        s2 += w[j + 2] * v[j + 2];
        s3 += w[j + 3] * v[j + 3];
    }
    for (; j < n; j++) s0 += w[j] * v[j];
    return (s0 + s1) + (s2 + s3);
}
#endif
