/* Kernel rows of the fastimpl extensions: one header, one run-time CPU dispatch.
 *
 * The points a row runs over are stored by coordinate ("SoA"): coordinate e of point j is
 * C[e * ld + j], so every loop below runs over j with unit stride and vectorises.  Three copies of
 * each body are compiled -- portable, AVX2+FMA and AVX-512F/DQ -- and cv_simd_level() picks one at run
 * time.  With glibc's libmvec (setup.py defines COREVECTOR_LIBMVEC) exp is declared as an OpenMP SIMD
 * function, so the vectorised loops call its 2-, 4- or 8-wide exp (_ZGV{b,d,e}N*v_exp).
 *
 * Results differ from the scalar kernels of _krows.pxd only by rounding (FMA contraction and the
 * vector exp); every copy gives the same values on a given machine and thread count, because each
 * value is computed by one thread in one fixed order.  Two families keep other values on purpose:
 * cv_radial_row_krow (ROWS_KROW, fastimpl/_mmda.pyx) has k_row's sums (no FMA), and cv_radial_sums
 * (fastimpl/_ssvr.pyx) uses libmvec's exp rather than cv_exp4/cv_exp8.
 *
 * Where the AVX-512 and AVX2 copies share their structure, one macro template (CV_DEFINE_*) defines
 * both from the intrinsic prefix (_mm512 / _mm256) and the width.
 *
 * Three files, included in this order (one header to include, one translation order):
 *   _simd.h      the portable rows, cv_simd_level() and the dispatch of the rows and sums;
 *   _simd_x86.h  the AVX2 / AVX-512 copies: vector exp, distance passes, fused and screening sums, rows;
 *   _simd_smo.h  the O(|S|) passes of an SMO step (portable and AVX-512, with their dispatch).
 */
#ifndef COREVECTOR_SIMD_H
#define COREVECTOR_SIMD_H
#include <math.h>
#include <stddef.h>
#include "_vexp.h"   /* declares exp as an OpenMP SIMD function when libmvec is linked */
#include "_dot4.h"   /* cv_dot4 */

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define CV_X86_DISPATCH 1
#endif

/* the entry points: each extension calls some of them (unused ones are not worth a warning) */
#if defined(__GNUC__)
#define CV_API static __attribute__((unused))
#else
#define CV_API static
#endif

/* The portable kernel rows, compiled once per target by CV_DEFINE.  CV_COORD_PASSES: out[j] = 0, then one
 * vectorised pass over j < n per coordinate e doing STEP, with c = C + e*ld and xe = x[e]. */
#define CV_COORD_PASSES(STEP)                                                       \
    ptrdiff_t j, e;                                                                 \
    for (j = 0; j < n; j++) out[j] = 0.0;                                          \
    for (e = 0; e < d; e++) {                                                       \
        const double *restrict c = C + e * ld;                                      \
        const double xe = x[e];                                                     \
        _Pragma("omp simd")                                                         \
        for (j = 0; j < n; j++) { STEP }                                            \
    }

/* out[j] = exp(mg * sqrt(R)) (laplace) or exp(mg * R) for j < n, R an expression in j */
#define CV_EXP_PASS(R)                                                              \
    if (laplace) {                                                                  \
        _Pragma("omp simd")                                                         \
        for (j = 0; j < n; j++) out[j] = exp(mg * sqrt(R));                         \
    } else {                                                                        \
        _Pragma("omp simd")                                                         \
        for (j = 0; j < n; j++) out[j] = exp(mg * (R));                             \
    }

/* out[j] = exp(mg * r_j), r_j = sum_e (C[e*ld + j] - x[e])^2 (laplace: sqrt of it), j < n */
#define CV_RADIAL_ROW_BODY                                                          \
    CV_COORD_PASSES(double u = c[j] - xe; out[j] += u * u;)                         \
    CV_EXP_PASS(out[j])

/* out[j] = sum_e C[e*ld + j] x[e]  (dot products for the polynomial and linear kernels) */
#define CV_DOT_ROW_BODY CV_COORD_PASSES(out[j] += c[j] * xe;)

/* out[j] = exp(mg * r_j) from dot products: r_j = max(xsq + csq[j] - 2 dots[j], 0) (BLAS path) */
#define CV_POS(r) ((r) > 0.0 ? (r) : 0.0)
#define CV_RADIAL_FROM_DOTS_BODY                                                    \
    ptrdiff_t j;                                                                    \
    CV_EXP_PASS(CV_POS(xsq + csq[j] - 2.0 * out[j]))

/* the portable radial row (the vector units run cv_radial_row_x512/x256 below, with their own exp) */
static void cv_radial_row_base(const double *restrict C, ptrdiff_t ld, ptrdiff_t n, ptrdiff_t d,
                               const double *restrict x, double mg, int laplace, double *restrict out)
{ CV_RADIAL_ROW_BODY }

#define CV_DEFINE(SUFFIX, ATTR)                                                                       \
    ATTR static void cv_dot_row_##SUFFIX(const double *restrict C, ptrdiff_t ld, ptrdiff_t n,         \
            ptrdiff_t d, const double *restrict x, double *restrict out)                              \
    { CV_DOT_ROW_BODY }                                                                               \
    ATTR static void cv_radial_from_dots_##SUFFIX(double *restrict out, ptrdiff_t n, double xsq,      \
            const double *restrict csq, double mg, int laplace)                                       \
    { CV_RADIAL_FROM_DOTS_BODY }

CV_DEFINE(base, )
#ifdef CV_X86_DISPATCH
CV_DEFINE(avx2, __attribute__((target("avx2,fma"))))
CV_DEFINE(avx512, __attribute__((target("avx512f,avx2,fma"))))
#endif

/* Gaussian / Laplacian kernel values with k_row's arithmetic (_krows.pyx), for the ROWS_KROW stores of
 * _krows.pyx (fastimpl/_mmda.pyx): buf[j] = exp(mg * r_j) against n points packed by coordinate
 * (svT[e * ld + j]), r_j = ||sv_j - x||^2 (laplace: its root) summed over the coordinates in order, as
 * k_row does; the loop over j vectorises (4 coordinates per pass over buf).  The AVX2 copy has no FMA
 * (target "avx2" alone: the same IEEE distances) but libmvec's 4-wide exp, which differs from the 2-wide
 * exp of k_row's cv_vexp in the last bit of a few values in 10^4 (measured on AVX2 with glibc's libmvec):
 * the same values as k_row on the portable path, within an ulp of them on the vector one. */
#define CV_RADIAL_ROW_KROW_BODY                                                     \
    ptrdiff_t e = 0, j;                                                             \
    for (j = 0; j < n; j++) buf[j] = 0.0;                                           \
    for (; e + 4 <= d; e += 4) {                                                    \
        const double *c0 = svT + e * ld, *c1 = c0 + ld, *c2 = c1 + ld, *c3 = c2 + ld; \
        const double x0 = x[e], x1 = x[e + 1], x2 = x[e + 2], x3 = x[e + 3];        \
        for (j = 0; j < n; j++) {                                                   \
            double a = buf[j], u;                                                   \
            u = c0[j] - x0; a += u * u;                                             \
            u = c1[j] - x1; a += u * u;                                             \
            u = c2[j] - x2; a += u * u;                                             \
            u = c3[j] - x3; a += u * u;                                             \
            buf[j] = a;                                                             \
        }                                                                           \
    }                                                                               \
    for (; e < d; e++) {                                                            \
        const double *c0 = svT + e * ld;                                            \
        const double x0 = x[e];                                                     \
        for (j = 0; j < n; j++) { double u = c0[j] - x0; buf[j] += u * u; }         \
    }                                                                               \
    if (laplace) { for (j = 0; j < n; j++) buf[j] = mg * sqrt(buf[j]); }            \
    else { for (j = 0; j < n; j++) buf[j] = mg * buf[j]; }                          \
    cv_vexp(buf, n);

#define CV_DEFINE_KROW(SUFFIX, ATTR)                                                                  \
    ATTR static void cv_radial_row_krow_##SUFFIX(const double *restrict svT, ptrdiff_t ld, ptrdiff_t n,  \
            ptrdiff_t d, const double *restrict x, double mg, int laplace, double *restrict buf)      \
    { CV_RADIAL_ROW_KROW_BODY }

CV_DEFINE_KROW(base, )
#ifdef CV_X86_DISPATCH
CV_DEFINE_KROW(avx2, __attribute__((target("avx2"))))
#endif

#include "_simd_x86.h"   /* the AVX2 / AVX-512 copies (x86-64 with GCC only) */

/* 0: portable, 1: AVX2 + FMA, 2: AVX-512F; decided once */
static int cv_simd_level_cached = -1;
CV_API int cv_simd_level(void)
{
    if (cv_simd_level_cached < 0) {
        int level = 0;
#ifdef CV_X86_DISPATCH
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
            level = (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")) ? 2 : 1;
#endif
        cv_simd_level_cached = level;
    }
    return cv_simd_level_cached;
}

/* the radial row by the copy of a given level (0 portable, 1 AVX2, 2 AVX-512; one the machine cannot run, or
 * below 0, is cv_simd_level()'s): cv_radial_row's dispatch, and the test hook fastimpl._engine._radial_row_at,
 * so that every copy the machine can run is checked */
CV_API void cv_radial_row_at(int level, const double *C, ptrdiff_t ld, ptrdiff_t n, ptrdiff_t d, const double *x,
                             double mg, int laplace, double *out)
{
    if (level > cv_simd_level() || level < 0) level = cv_simd_level();
#ifdef CV_X86_DISPATCH
    if (level == 2) { cv_radial_row_x512(C, ld, n, d, x, mg, laplace, out); return; }
    if (level == 1) { cv_radial_row_x256(C, ld, n, d, x, mg, laplace, out); return; }
#endif
    cv_radial_row_base(C, ld, n, d, x, mg, laplace, out);
}

CV_API void cv_radial_row(const double *C, ptrdiff_t ld, ptrdiff_t n, ptrdiff_t d, const double *x,
                          double mg, int laplace, double *out)
{
    cv_radial_row_at(cv_simd_level(), C, ld, n, d, x, mg, laplace, out);
}

/* cv_radial_row_krow_avx2 where there is a vector unit (cv_simd_level() > 0), else _base */
CV_API void cv_radial_row_krow(const double *svT, ptrdiff_t ld, ptrdiff_t n, ptrdiff_t d, const double *x,
                               double mg, int laplace, double *buf)
{
#ifdef CV_X86_DISPATCH
    if (cv_simd_level() > 0) { cv_radial_row_krow_avx2(svT, ld, n, d, x, mg, laplace, buf); return; }
#endif
    cv_radial_row_krow_base(svT, ld, n, d, x, mg, laplace, buf);
}

CV_API void cv_dot_row(const double *C, ptrdiff_t ld, ptrdiff_t n, ptrdiff_t d, const double *x, double *out)
{
#ifdef CV_X86_DISPATCH
    int level = cv_simd_level();
    if (level == 2) { cv_dot_row_avx512(C, ld, n, d, x, out); return; }
    if (level == 1) { cv_dot_row_avx2(C, ld, n, d, x, out); return; }
#endif
    cv_dot_row_base(C, ld, n, d, x, out);
}

CV_API void cv_radial_from_dots(double *out, ptrdiff_t n, double xsq, const double *csq, double mg, int laplace)
{
#ifdef CV_X86_DISPATCH
    int level = cv_simd_level();
    if (level == 2) { cv_radial_from_dots_avx512(out, n, xsq, csq, mg, laplace); return; }
    if (level == 1) { cv_radial_from_dots_avx2(out, n, xsq, csq, mg, laplace); return; }
#endif
    cv_radial_from_dots_base(out, n, xsq, csq, mg, laplace);
}

/* sum_j w[j] exp(mg r_j) over the n stored points, tile by tile so that each tile's distances stay in
 * L1 (the scans' hot loop: no row of n values is written and read back).  The tiles are summed in a
 * fixed order, so the result does not depend on anything but the inputs. */
#define CV_TILE 256
CV_API double cv_radial_dot(const double *C, ptrdiff_t ld, ptrdiff_t n, ptrdiff_t d, const double *x,
                            double mg, int laplace, const double *w)
{
    double buf[CV_TILE], s = 0.0;
#ifdef CV_X86_DISPATCH
    int level = cv_simd_level();
    if (level == 2) return cv_radial_dot_avx512(C, ld, n, d, x, mg, laplace, w);
    if (level == 1) return cv_radial_dot_avx2(C, ld, n, d, x, mg, laplace, w);
#endif
    for (ptrdiff_t lo = 0; lo < n; lo += CV_TILE) {
        ptrdiff_t m = n - lo < CV_TILE ? n - lo : CV_TILE;
        cv_radial_row(C + lo, ld, m, d, x, mg, laplace, buf);
        s += cv_dot4(w + lo, buf, m);
    }
    return s;
}

/* 1 when cv_radial_dot_screen evaluates exp in single precision (its error within CV_SCREEN_TERM_ERR
 * per term), 0 when it is cv_radial_dot itself (no vector unit: nothing to gain, nothing to bound) */
CV_API int cv_screen_available(void)
{
#ifdef CV_X86_DISPATCH
    return cv_simd_level() > 0;
#else
    return 0;
#endif
}

CV_API double cv_radial_dot_screen(const double *C, ptrdiff_t ld, ptrdiff_t n, ptrdiff_t d, const double *x,
                                   double mg, int laplace, const double *w)
{
#ifdef CV_X86_DISPATCH
    int level = cv_simd_level();
    if (level == 2) return cv_radial_dot_screen_avx512(C, ld, n, d, x, mg, laplace, w);
    if (level == 1) return cv_radial_dot_screen_avx2(C, ld, n, d, x, mg, laplace, w);
#endif
    return cv_radial_dot(C, ld, n, d, x, mg, laplace, w);
}

/* cv_rbf_dot_screen_f32_avx512/_avx2 by CPU; only called where cv_screen_available() */
CV_API double cv_rbf_dot_screen_f32(const float *C, ptrdiff_t ld, ptrdiff_t n, ptrdiff_t d, const float *x,
                                    float mg, const double *w)
{
#ifdef CV_X86_DISPATCH
    int level = cv_simd_level();
    if (level == 2) return cv_rbf_dot_screen_f32_avx512(C, ld, n, d, x, mg, w);
    if (level == 1) return cv_rbf_dot_screen_f32_avx2(C, ld, n, d, x, mg, w);
#endif
    (void) C; (void) ld; (void) n; (void) d; (void) x; (void) mg; (void) w;
    return NAN;
}

/* 1 when cv_radial_sums runs (x86-64 with a vector unit, linked with libmvec); 0 when the caller takes
 * its portable path (_ssvr.pyx: the kernel row by k_row, then the sums) */
CV_API int cv_radial_sums_available(void)
{
#if defined(CV_X86_DISPATCH) && defined(COREVECTOR_LIBMVEC)
    return cv_simd_level() > 0;
#else
    return 0;
#endif
}

/* cv_radial_sums_x512/_x256 by CPU; only called where cv_radial_sums_available() */
CV_API void cv_radial_sums(const double *C, ptrdiff_t ld, ptrdiff_t n, ptrdiff_t d, const double *x, double mg,
                           int laplace, const double *w, double *sw, double *sk)
{
#if defined(CV_X86_DISPATCH) && defined(COREVECTOR_LIBMVEC)
    int level = cv_simd_level();
    if (level == 2) { cv_radial_sums_x512(C, ld, n, d, x, mg, laplace, w, sw, sk); return; }
    if (level == 1) { cv_radial_sums_x256(C, ld, n, d, x, mg, laplace, w, sw, sk); return; }
#endif
    (void) C; (void) ld; (void) n; (void) d; (void) x; (void) mg; (void) laplace; (void) w;
    *sw = NAN;
    *sk = NAN;
}
#include "_simd_smo.h"   /* the passes of an SMO step */
#endif
