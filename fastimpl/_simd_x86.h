/* The AVX2 and AVX-512 copies of the kernel rows and fused sums of _simd.h (included by _simd.h only,
 * between its portable rows and its run-time dispatch; it relies on CV_X86_DISPATCH and CV_API from there).
 *
 * Vector building blocks first -- exp on 4/8 lanes in double (cv_exp4, cv_exp8) and 8/16 in single
 * precision (cv_expf8, cv_expf16), the distance passes (cv_dist2_*, cv_dist8_mask_x512, cv_dist1), the
 * fused weighted-exp steps (cv_wexp_steps_*) -- then the kernels built on them: the fused scan sums
 * (cv_radial_dot_*), the screening sums of the scans (cv_radial_dot_screen_*, cv_rbf_dot_screen_f32_*),
 * the radial rows (cv_radial_row_x512/x256) and SSVR's candidate sums with libmvec's exp
 * (cv_radial_sums_*).  A new vector kernel family goes here; its dispatcher goes in _simd.h. */
#ifndef COREVECTOR_SIMD_X86_H
#define COREVECTOR_SIMD_X86_H
#ifdef CV_X86_DISPATCH
#include <immintrin.h>
/* the targets of the AVX-512 and AVX2 copies (cv_simd_level() 2 and 1) */
#define CV_T512 __attribute__((target("avx512f,avx512dq,avx2,fma")))
#define CV_T256 __attribute__((target("avx2,fma")))
/* exp on 4 or 8 lanes, for the kernel rows' arguments (x <= 0, or small x > 0): Cody-Waite reduction
 * x = n ln2 + r, |r| <= ln2/2, then exp(r) by its Taylor polynomial to degree 13 (truncation < 5e-18
 * relative), scaled by 2^n (AVX2: built in the exponent bits; AVX-512: vscalefpd, the same exact product
 * in one instruction).  Arguments below -708 give exp(-708) ~ 3e-308
 * instead of a denormal or 0: the kernel values concerned are below any tolerance of the engine.
 * Measured against libm's exp on 1e7 points of [-708, 1]: within 2 ulp. */
#define CV_EXP_LOG2E 1.4426950408889634
#define CV_EXP_LN2HI 6.93147180369123816490e-01
#define CV_EXP_LN2LO 1.90821492927058770002e-10
#define CV_EXP_POLY(ADD, MUL, FMA, SET1, r)                                                 \
    FMA(FMA(FMA(FMA(FMA(FMA(FMA(FMA(FMA(FMA(FMA(FMA(FMA(SET1(1.0 / 6227020800.0), r,       \
        SET1(1.0 / 479001600.0)), r, SET1(1.0 / 39916800.0)), r, SET1(1.0 / 3628800.0)), r,  \
        SET1(1.0 / 362880.0)), r, SET1(1.0 / 40320.0)), r, SET1(1.0 / 5040.0)), r,           \
        SET1(1.0 / 720.0)), r, SET1(1.0 / 120.0)), r, SET1(1.0 / 24.0)), r, SET1(1.0 / 6.0)), \
        r, SET1(0.5)), r, SET1(1.0)), r, SET1(1.0))

CV_T256 static inline __m256d cv_exp4(__m256d x)
{
    const __m256d magic = _mm256_set1_pd(6755399441055744.0);  /* 1.5 * 2^52: adds round to integers */
    x = _mm256_max_pd(x, _mm256_set1_pd(-708.0));
    __m256d nf = _mm256_fmadd_pd(x, _mm256_set1_pd(CV_EXP_LOG2E), magic);
    __m256d n = _mm256_sub_pd(nf, magic);
    __m256d r = _mm256_fnmadd_pd(n, _mm256_set1_pd(CV_EXP_LN2HI), x);
    r = _mm256_fnmadd_pd(n, _mm256_set1_pd(CV_EXP_LN2LO), r);
    __m256d p = CV_EXP_POLY(_mm256_add_pd, _mm256_mul_pd, _mm256_fmadd_pd, _mm256_set1_pd, r);
    /* the low bits of nf hold n: 2^n = (n + 1023) << 52 */
    __m256i e = _mm256_sub_epi64(_mm256_castpd_si256(nf), _mm256_castpd_si256(magic));
    e = _mm256_slli_epi64(_mm256_add_epi64(e, _mm256_set1_epi64x(1023)), 52);
    return _mm256_mul_pd(p, _mm256_castsi256_pd(e));
}

CV_T512 static inline __m512d cv_exp8(__m512d x)
{
    x = _mm512_max_pd(x, _mm512_set1_pd(-708.0));
    __m512d n = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(CV_EXP_LOG2E)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_fnmadd_pd(n, _mm512_set1_pd(CV_EXP_LN2HI), x);
    r = _mm512_fnmadd_pd(n, _mm512_set1_pd(CV_EXP_LN2LO), r);
    __m512d p = CV_EXP_POLY(_mm512_add_pd, _mm512_mul_pd, _mm512_fmadd_pd, _mm512_set1_pd, r);
    return _mm512_scalef_pd(p, n);  /* p 2^n in one step (n >= -1022: exact, as the exponent-bits product) */
}


/* exp on 8 or 16 lanes in single precision, for the screening kernels (their error: see there):
 * Cody-Waite reduction, Taylor polynomial to degree 6, 2^n p (AVX2: 2^n built in the exponent bits;
 * AVX-512: vscalefps). */
#define CV_EXPF_POLY(FMA, SET1, r)                                                          \
    FMA(FMA(FMA(FMA(FMA(FMA(SET1(1.0f / 720.0f), r, SET1(1.0f / 120.0f)), r,                \
        SET1(1.0f / 24.0f)), r, SET1(1.0f / 6.0f)), r, SET1(0.5f)), r, SET1(1.0f)), r, SET1(1.0f))
#define CV_EXPF_LOG2E 1.44269504f
#define CV_EXPF_LN2HI 0.693359375f        /* 9 significant bits: n * LN2HI is exact */
#define CV_EXPF_LN2LO -2.12194440e-4f

CV_T256 static inline __m256 cv_scalef8(__m256 p, __m256 n)
{
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

#define CV_DEFINE_EXPF(NAME, ATTR, VS, P, ROUND, SCALE)                                                \
    ATTR static inline VS NAME(VS x)                                                                   \
    {                                                                                                  \
        x = P##_max_ps(x, P##_set1_ps(-87.0f));                                                        \
        VS n = ROUND(P##_mul_ps(x, P##_set1_ps(CV_EXPF_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); \
        VS r = P##_fnmadd_ps(n, P##_set1_ps(CV_EXPF_LN2HI), x);                                        \
        r = P##_fnmadd_ps(n, P##_set1_ps(CV_EXPF_LN2LO), r);                                           \
        return SCALE(CV_EXPF_POLY(P##_fmadd_ps, P##_set1_ps, r), n);                                   \
    }
CV_DEFINE_EXPF(cv_expf8, CV_T256, __m256, _mm256, _mm256_round_ps, cv_scalef8)
CV_DEFINE_EXPF(cv_expf16, CV_T512, __m512, _mm512, _mm512_roundscale_ps, _mm512_scalef_ps)

/* The distance part of every radial kernel below, one definition per vector width W (4: AVX2, 8: AVX-512):
 * r0, r1 = the squared distances (laplace: distances) of the stored points j, ..., j + W - 1 and
 * j + W, ..., j + 2W - 1 to x (coordinates C[e*ld + j]), in one pass over the coordinates with two
 * independent FMA chains. */
#define CV_DEFINE_DIST2(SFX, ATTR, VD, P, W)                                                           \
    ATTR static inline void cv_dist2_##SFX(const double *C, ptrdiff_t ld, ptrdiff_t j, ptrdiff_t d,    \
                                           const double *x, int laplace, VD *r0, VD *r1)              \
    {                                                                                                  \
        VD s0 = P##_setzero_pd(), s1 = P##_setzero_pd();                                               \
        for (ptrdiff_t e = 0; e < d; e++) {                                                            \
            const VD xe = P##_set1_pd(x[e]);                                                           \
            VD u0 = P##_sub_pd(P##_loadu_pd(C + e * ld + j), xe);                                      \
            VD u1 = P##_sub_pd(P##_loadu_pd(C + e * ld + j + W), xe);                                  \
            s0 = P##_fmadd_pd(u0, u0, s0);                                                             \
            s1 = P##_fmadd_pd(u1, u1, s1);                                                             \
        }                                                                                              \
        if (laplace) { s0 = P##_sqrt_pd(s0); s1 = P##_sqrt_pd(s1); }                                   \
        *r0 = s0;                                                                                      \
        *r1 = s1;                                                                                      \
    }
CV_DEFINE_DIST2(x512, CV_T512, __m512d, _mm512, 8)
CV_DEFINE_DIST2(x256, CV_T256, __m256d, _mm256, 4)

/* lanes [0, m) of 8 (m >= 1) */
static inline __mmask8 cv_mask8(ptrdiff_t m) { return m >= 8 ? (__mmask8) 0xFF : (__mmask8) ((1u << m) - 1u); }

/* the squared distances (laplace: distances) of the stored points j + l to x, for the lanes l of k (others 0) */
CV_T512 static inline __m512d cv_dist8_mask_x512(const double *C, ptrdiff_t ld, ptrdiff_t j, ptrdiff_t d,
                                                const double *x, int laplace, __mmask8 k)
{
    __m512d r0 = _mm512_setzero_pd();
    for (ptrdiff_t e = 0; e < d; e++) {
        __m512d u0 = _mm512_sub_pd(_mm512_maskz_loadu_pd(k, C + e * ld + j), _mm512_set1_pd(x[e]));
        r0 = _mm512_fmadd_pd(u0, u0, r0);
    }
    return laplace ? _mm512_sqrt_pd(r0) : r0;
}

/* the squared distance (laplace: distance) of the stored point j to x, one lane at a time */
static inline double cv_dist1(const double *C, ptrdiff_t ld, ptrdiff_t j, ptrdiff_t d, const double *x,
                              int laplace)
{
    double r = 0.0;
    for (ptrdiff_t e = 0; e < d; e++) { double u = C[e * ld + j] - x[e]; r += u * u; }
    return laplace ? sqrt(r) : r;
}

/* exp(vmg r) in single precision for the 2W lanes of r0, r1 (AVX-512: W = 8, AVX2: W = 4) */
CV_T512 static inline __m512 cv_expf_of_x512(__m512d vmg, __m512d r0, __m512d r1)
{
    __m256 a0 = _mm512_cvtpd_ps(_mm512_mul_pd(vmg, r0)), a1 = _mm512_cvtpd_ps(_mm512_mul_pd(vmg, r1));
    return cv_expf16(_mm512_insertf32x8(_mm512_castps256_ps512(a0), a1, 1));
}

CV_T256 static inline __m256 cv_expf_of_x256(__m256d vmg, __m256d r0, __m256d r1)
{
    __m128 a0 = _mm256_cvtpd_ps(_mm256_mul_pd(vmg, r0)), a1 = _mm256_cvtpd_ps(_mm256_mul_pd(vmg, r1));
    return cv_expf8(_mm256_set_m128(a1, a0));
}

/* the double-precision halves of 16 (8) single-precision lanes */
#define CV_LO16(k) _mm512_cvtps_pd(_mm512_castps512_ps256(k))
#define CV_HI16(k) _mm512_cvtps_pd(_mm512_extractf32x8_ps(k, 1))
#define CV_LO8(k) _mm256_cvtps_pd(_mm256_castps256_ps128(k))
#define CV_HI8(k) _mm256_cvtps_pd(_mm256_extractf128_ps(k, 1))

/* The full steps of the fused kernels, one definition per width W (AVX2: 4, AVX-512: 8): from j = 0 by
 * 2W points while j + 2W <= n, *acc0 (*acc1) = the sum of w[j] exp(vmg r_j) over the first (second) W
 * lanes of the steps, exp in double precision (cv_exp4/8) or, single, in single precision (cv_expf8/16,
 * the screening kernels).  Returns the first point not summed. */
#define CV_DEFINE_WEXP_STEPS(SFX, ATTR, VD, VS, P, W, EXP, LO, HI)                                      \
    ATTR static inline ptrdiff_t cv_wexp_steps_##SFX(const double *C, ptrdiff_t ld, ptrdiff_t n,        \
            ptrdiff_t d, const double *x, VD vmg, int laplace, int single, const double *w,            \
            VD *acc0, VD *acc1)                                                                        \
    {                                                                                                  \
        VD a0 = P##_setzero_pd(), a1 = P##_setzero_pd(), r0, r1, k0, k1;                               \
        ptrdiff_t j = 0;                                                                               \
        for (; j + 2 * W <= n; j += 2 * W) {                                                           \
            cv_dist2_##SFX(C, ld, j, d, x, laplace, &r0, &r1);                                         \
            if (single) {                                                                              \
                VS k = cv_expf_of_##SFX(vmg, r0, r1);                                                  \
                k0 = LO(k);                                                                            \
                k1 = HI(k);                                                                            \
            } else {                                                                                   \
                k0 = EXP(P##_mul_pd(vmg, r0));                                                         \
                k1 = EXP(P##_mul_pd(vmg, r1));                                                         \
            }                                                                                          \
            a0 = P##_fmadd_pd(P##_loadu_pd(w + j), k0, a0);                                            \
            a1 = P##_fmadd_pd(P##_loadu_pd(w + j + W), k1, a1);                                        \
        }                                                                                              \
        *acc0 = a0;                                                                                    \
        *acc1 = a1;                                                                                    \
        return j;                                                                                      \
    }
CV_DEFINE_WEXP_STEPS(x512, CV_T512, __m512d, __m512, _mm512, 8, cv_exp8, CV_LO16, CV_HI16)
CV_DEFINE_WEXP_STEPS(x256, CV_T256, __m256d, __m256, _mm256, 4, cv_exp4, CV_LO8, CV_HI8)

/* Fused scan kernel: sum_j w[j] exp(mg r_j) with r_j the squared distance (laplace: its root) of the
 * stored point j (coordinates C[e*ld + j]) to x; 8 or 16 points per step, no row written. */
CV_T512 static double cv_radial_dot_avx512(const double *C, ptrdiff_t ld, ptrdiff_t n, ptrdiff_t d,
                                           const double *x, double mg, int laplace, const double *w)
{
    __m512d acc0, acc1, r0;
    const __m512d vmg = _mm512_set1_pd(mg);
    ptrdiff_t j = cv_wexp_steps_x512(C, ld, n, d, x, vmg, laplace, 0, w, &acc0, &acc1);
    for (; j < n; j += 8) {
        const __mmask8 k = cv_mask8(n - j);
        r0 = cv_dist8_mask_x512(C, ld, j, d, x, laplace, k);
        acc0 = _mm512_fmadd_pd(_mm512_maskz_loadu_pd(k, w + j), cv_exp8(_mm512_mul_pd(vmg, r0)), acc0);
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(acc0, acc1));
}

/* the lanes of a summed in a fixed order: (a0 + a1) + (a2 + a3) (+ ((a4 + a5) + (a6 + a7))) */
CV_T256 static inline double cv_hsum_x256(__m256d a)
{
    double t[4];
    _mm256_storeu_pd(t, a);
    return (t[0] + t[1]) + (t[2] + t[3]);
}

CV_T512 static inline double cv_hsum_x512(__m512d a)
{
    double t[8];
    _mm512_storeu_pd(t, a);
    return ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
}

CV_T256 static double cv_radial_dot_avx2(const double *C, ptrdiff_t ld, ptrdiff_t n, ptrdiff_t d,
                                         const double *x, double mg, int laplace, const double *w)
{
    __m256d acc0, acc1;
    double tail = 0.0;
    ptrdiff_t j = cv_wexp_steps_x256(C, ld, n, d, x, _mm256_set1_pd(mg), laplace, 0, w, &acc0, &acc1);
    for (; j < n; j++)
        tail += w[j] * exp(mg * cv_dist1(C, ld, j, d, x, laplace));
    return cv_hsum_x256(_mm256_add_pd(acc0, acc1)) + tail;
}
/* Screening kernel: the fused sum of cv_radial_dot with exp evaluated in single precision (twice the
 * lanes, half the polynomial); distances and the weighted sum stay in double.  The scans use it only to
 * rule candidates out: whatever may reach a threshold is computed again by cv_radial_dot, so no result
 * depends on it (see _Screens.err in _screens.pxi).  Error per term, k = exp(a) in (0, 1]:
 *   - rounding a to float: |exp(a_f) - exp(a)| <= exp(a) |a| 2^-24 (1 + 2^-20) <= 2^-24 / e;
 *   - float exp of a_f >= -87: Cody-Waite reduction |r| <= ln2/2, degree-6 Taylor polynomial
 *     (truncation < 1.7e-7 relative) in float arithmetic, a few 2^-24 relative;
 *   - a < -87 gives exp(-87) ~ 1.6e-38.
 * CV_SCREEN_TERM_ERR bounds their sum with a margin of more than 10 (measured worst: 1.5e-7 on AVX-512;
 * test_kernels checks a margin of 3). */
#define CV_SCREEN_TERM_ERR 2e-6
CV_T512 static double cv_radial_dot_screen_avx512(const double *C, ptrdiff_t ld, ptrdiff_t n, ptrdiff_t d,
                                                  const double *x, double mg, int laplace, const double *w)
{
    __m512d acc0, acc1, r0, r1;
    const __m512d vmg = _mm512_set1_pd(mg);
    ptrdiff_t j = cv_wexp_steps_x512(C, ld, n, d, x, vmg, laplace, 1, w, &acc0, &acc1);
    if (j < n) {  /* the tail: one masked step, the lanes past n weighted by 0 */
        const __mmask8 k0 = cv_mask8(n - j), k1 = (n - j <= 8) ? (__mmask8) 0 : cv_mask8(n - j - 8);
        r0 = cv_dist8_mask_x512(C, ld, j, d, x, laplace, k0);
        r1 = cv_dist8_mask_x512(C, ld, j + 8, d, x, laplace, k1);
        __m512 k = cv_expf_of_x512(vmg, r0, r1);
        acc0 = _mm512_fmadd_pd(_mm512_maskz_loadu_pd(k0, w + j), CV_LO16(k), acc0);
        acc1 = _mm512_fmadd_pd(_mm512_maskz_loadu_pd(k1, w + j + 8), CV_HI16(k), acc1);
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(acc0, acc1));
}

CV_T256 static double cv_radial_dot_screen_avx2(const double *C, ptrdiff_t ld, ptrdiff_t n, ptrdiff_t d,
                                                const double *x, double mg, int laplace, const double *w)
{
    __m256d acc0, acc1;
    ptrdiff_t j = cv_wexp_steps_x256(C, ld, n, d, x, _mm256_set1_pd(mg), laplace, 1, w, &acc0, &acc1);
    return cv_hsum_x256(_mm256_add_pd(acc0, acc1)) + (j < n ? cv_radial_dot_avx2(C + j, ld, n - j, d, x, mg, laplace, w + j) : 0.0);
}
/* Screening kernel with single-precision distances (Gaussian kernel only): coordinates stored as floats
 * relative to a centre mu of the data (C[e * ld + j] = fl(c_je - mu_e), x likewise), squared distances
 * accumulated in float with FMA, exp in float as above, the weighted sum in double.  Twice the lanes of
 * cv_radial_dot_screen in the distance part.  Its extra error per term, for coordinates within M of mu
 * (u = 2^-24, t = gamma r): |r_f - r| <= 4 u M sqrt(d r) + (d + 3) u r (the roundings of c - mu, x - mu,
 * their difference and d fused adds, and of gamma r), so |exp(-gamma r_f) - exp(-gamma r)| <=
 * 1.01 e^-t (4 u M sqrt(d gamma t) + (d + 3) u t) <= 1.01 (1.716 u M sqrt(d gamma) + 0.368 (d + 3) u)
 * whenever gamma |r_f - r| <= 0.01; FastMEBOps adds it to CV_SCREEN_TERM_ERR (_PointStore.enable_f32). */
CV_T512 static double cv_rbf_dot_screen_f32_avx512(const float *C, ptrdiff_t ld, ptrdiff_t n, ptrdiff_t d,
                                           const float *x, float mg, const double *w)
{
    __m512d acc0 = _mm512_setzero_pd(), acc1 = _mm512_setzero_pd();
    __m512d acc2 = _mm512_setzero_pd(), acc3 = _mm512_setzero_pd();
    const __m512 vmg = _mm512_set1_ps(mg);
    ptrdiff_t j = 0, e;
    for (; j + 32 <= n; j += 32) {  /* two independent blocks of 16: the exp's FMA chains overlap */
        __m512 r = _mm512_setzero_ps(), q = _mm512_setzero_ps();
        for (e = 0; e < d; e++) {
            const __m512 xe = _mm512_set1_ps(x[e]);
            __m512 u = _mm512_sub_ps(_mm512_loadu_ps(C + e * ld + j), xe);
            __m512 v = _mm512_sub_ps(_mm512_loadu_ps(C + e * ld + j + 16), xe);
            r = _mm512_fmadd_ps(u, u, r);
            q = _mm512_fmadd_ps(v, v, q);
        }
        __m512 kr = cv_expf16(_mm512_mul_ps(vmg, r)), kq = cv_expf16(_mm512_mul_ps(vmg, q));
        acc0 = _mm512_fmadd_pd(_mm512_loadu_pd(w + j), CV_LO16(kr), acc0);
        acc1 = _mm512_fmadd_pd(_mm512_loadu_pd(w + j + 8), CV_HI16(kr), acc1);
        acc2 = _mm512_fmadd_pd(_mm512_loadu_pd(w + j + 16), CV_LO16(kq), acc2);
        acc3 = _mm512_fmadd_pd(_mm512_loadu_pd(w + j + 24), CV_HI16(kq), acc3);
    }
    acc0 = _mm512_add_pd(acc0, acc2);
    acc1 = _mm512_add_pd(acc1, acc3);
    for (; j < n; j += 16) {
        const __mmask16 k = (n - j >= 16) ? (__mmask16) 0xFFFF : (__mmask16) ((1u << (n - j)) - 1u);
        __m512 r = _mm512_setzero_ps();
        for (e = 0; e < d; e++) {
            __m512 u = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, C + e * ld + j), _mm512_set1_ps(x[e]));
            r = _mm512_fmadd_ps(u, u, r);
        }
        __m512 kv = _mm512_maskz_mov_ps(k, cv_expf16(_mm512_mul_ps(vmg, r)));  /* lanes past n: 0 */
        const __mmask8 k0 = (__mmask8) (k & 0xFF), k1 = (__mmask8) (k >> 8);
        acc0 = _mm512_fmadd_pd(_mm512_maskz_loadu_pd(k0, w + j), CV_LO16(kv), acc0);
        acc1 = _mm512_fmadd_pd(_mm512_maskz_loadu_pd(k1, w + j + 8),
                               CV_HI16(kv), acc1);
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(acc0, acc1));
}

CV_T256 static double cv_rbf_dot_screen_f32_avx2(const float *C, ptrdiff_t ld, ptrdiff_t n, ptrdiff_t d,
                                         const float *x, float mg, const double *w)
{
    __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
    const __m256 vmg = _mm256_set1_ps(mg);
    ptrdiff_t j = 0, e;
    double tail = 0.0;
    for (; j + 8 <= n; j += 8) {
        __m256 r = _mm256_setzero_ps();
        for (e = 0; e < d; e++) {
            __m256 u = _mm256_sub_ps(_mm256_loadu_ps(C + e * ld + j), _mm256_set1_ps(x[e]));
            r = _mm256_fmadd_ps(u, u, r);
        }
        __m256 kv = cv_expf8(_mm256_mul_ps(vmg, r));
        acc0 = _mm256_fmadd_pd(_mm256_loadu_pd(w + j), CV_LO8(kv), acc0);
        acc1 = _mm256_fmadd_pd(_mm256_loadu_pd(w + j + 4), CV_HI8(kv), acc1);
    }
    for (; j < n; j++) {  /* the same float arithmetic, one lane at a time */
        float r = 0.0f;
        for (e = 0; e < d; e++) { float u = C[e * ld + j] - x[e]; r = fmaf(u, u, r); }
        float kv[8];
        _mm256_storeu_ps(kv, cv_expf8(_mm256_set1_ps(mg * r)));
        tail += w[j] * (double) kv[0];
    }
    return cv_hsum_x256(_mm256_add_pd(acc0, acc1)) + tail;
}
/* Rows: out[j] = exp(mg r_j) with the same vector exp */
CV_T512 static void cv_radial_row_x512(const double *C, ptrdiff_t ld, ptrdiff_t n, ptrdiff_t d,
                                       const double *x, double mg, int laplace, double *out)
{
    const __m512d vmg = _mm512_set1_pd(mg);
    for (ptrdiff_t j = 0; j < n; j += 8) {
        const __mmask8 k = cv_mask8(n - j);
        __m512d r0 = cv_dist8_mask_x512(C, ld, j, d, x, laplace, k);
        _mm512_mask_storeu_pd(out + j, k, cv_exp8(_mm512_mul_pd(vmg, r0)));
    }
}

CV_T256 static void cv_radial_row_x256(const double *C, ptrdiff_t ld, ptrdiff_t n, ptrdiff_t d,
                                       const double *x, double mg, int laplace, double *out)
{
    const __m256d vmg = _mm256_set1_pd(mg);
    ptrdiff_t j = 0, e;
    for (; j + 4 <= n; j += 4) {
        __m256d r0 = _mm256_setzero_pd();
        for (e = 0; e < d; e++) {
            __m256d u0 = _mm256_sub_pd(_mm256_loadu_pd(C + e * ld + j), _mm256_set1_pd(x[e]));
            r0 = _mm256_fmadd_pd(u0, u0, r0);
        }
        if (laplace) r0 = _mm256_sqrt_pd(r0);
        _mm256_storeu_pd(out + j, cv_exp4(_mm256_mul_pd(vmg, r0)));
    }
    if (j < n) {  /* the tail: one masked step, so that each value is a lane's wherever the row starts */
        const __m256i k = _mm256_cmpgt_epi64(_mm256_set1_epi64x(n - j), _mm256_set_epi64x(3, 2, 1, 0));
        __m256d r0 = _mm256_setzero_pd();
        for (e = 0; e < d; e++) {
            __m256d u0 = _mm256_sub_pd(_mm256_maskload_pd(C + e * ld + j, k), _mm256_set1_pd(x[e]));
            r0 = _mm256_fmadd_pd(u0, u0, r0);
        }
        if (laplace) r0 = _mm256_sqrt_pd(r0);
        _mm256_maskstore_pd(out + j, k, cv_exp4(_mm256_mul_pd(vmg, r0)));
    }
}

#ifdef COREVECTOR_LIBMVEC
/* Candidate scoring of fastimpl/_ssvr.pyx (eq. (16)): for one candidate x, *sw = sum_j w[j] k_j and
 * *sk = sum_j k_j^2 with k_j = exp(mg r_j) as above, in one pass over the stored points, with glibc's
 * vector exp (_ZGVdN4v_exp, _ZGVeN8v_exp of libmvec) rather than cv_exp4/cv_exp8.  Only where
 * cv_radial_sums_available(); _ssvr.pyx has a portable path otherwise. */
extern __m256d _ZGVdN4v_exp(__m256d);
extern __m512d _ZGVeN8v_exp(__m512d);
/* the tail of 2W lanes: distances one point at a time, one vector exp, the lanes past n weighted by 0 */
#define CV_RADIAL_SUMS_TAIL(P, VD, W, VEXP)                                                            \
    for (; j < n; j += W) {                                                                            \
        double sv[W] = {0}, gv[W] = {0}, mv[W] = {0};                                                  \
        for (ptrdiff_t l = 0; l < W && j + l < n; l++) {                                               \
            sv[l] = cv_dist1(C, ld, j + l, d, x, laplace);                                             \
            gv[l] = w[j + l];                                                                          \
            mv[l] = 1.0;                                                                               \
        }                                                                                              \
        VD k = P##_mul_pd(VEXP(P##_mul_pd(vmg, P##_loadu_pd(sv))), P##_loadu_pd(mv));                  \
        ag0 = P##_fmadd_pd(P##_loadu_pd(gv), k, ag0);                                                  \
        ak0 = P##_fmadd_pd(k, k, ak0);                                                                 \
    }
#define CV_DEFINE_RADIAL_SUMS(SFX, ATTR, VD, P, W, VEXP)                                               \
    ATTR static void cv_radial_sums_##SFX(const double *C, ptrdiff_t ld, ptrdiff_t n, ptrdiff_t d,     \
            const double *x, double mg, int laplace, const double *w, double *sw, double *sk)          \
    {                                                                                                  \
        VD ag0 = P##_setzero_pd(), ak0 = P##_setzero_pd(), ag1 = P##_setzero_pd(), ak1 = ag1, r0, r1;  \
        const VD vmg = P##_set1_pd(mg);                                                                \
        ptrdiff_t j = 0;                                                                               \
        for (; j + 2 * W <= n; j += 2 * W) {                                                           \
            cv_dist2_##SFX(C, ld, j, d, x, laplace, &r0, &r1);                                         \
            VD k0 = VEXP(P##_mul_pd(vmg, r0)), k1 = VEXP(P##_mul_pd(vmg, r1));                         \
            ag0 = P##_fmadd_pd(P##_loadu_pd(w + j), k0, ag0);                                          \
            ag1 = P##_fmadd_pd(P##_loadu_pd(w + j + W), k1, ag1);                                      \
            ak0 = P##_fmadd_pd(k0, k0, ak0);                                                           \
            ak1 = P##_fmadd_pd(k1, k1, ak1);                                                           \
        }                                                                                              \
        CV_RADIAL_SUMS_TAIL(P, VD, W, VEXP)                                                            \
        *sw = cv_hsum_##SFX(P##_add_pd(ag0, ag1));                                                 \
        *sk = cv_hsum_##SFX(P##_add_pd(ak0, ak1));                                                 \
    }
CV_DEFINE_RADIAL_SUMS(x512, CV_T512, __m512d, _mm512, 8, _ZGVeN8v_exp)
CV_DEFINE_RADIAL_SUMS(x256, CV_T256, __m256d, _mm256, 4, _ZGVdN4v_exp)
#endif
#endif
#endif
