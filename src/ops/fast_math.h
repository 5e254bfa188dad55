/* float32 exp, sigmoid, erf and exact GELU for kernels, one element at a time or over rows:
 * branch-free, so that loops over them vectorise (the AVX-512 rows of
 * fast_math.c; its AVX2 rows restate these operations on 8 lanes). */
#ifndef CGE_OPS_FAST_MATH_H
#define CGE_OPS_FAST_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Within 2 ulp of the correctly rounded result over the normal range. Results
 * below the smallest normal float flush to 0; NaN and infinities behave as
 * expf's. The unfused kernels and the fused ones (ElementwiseChain, FusedConv
 * and FusedMatMul epilogues) all use these, so fusing changes no bits. */

static inline float cge__expf_fast(float x)
{
    /* x = n ln2 + r, |r| <= ln2/2; e^r by its Taylor series to r^7 (error
     * below 2^-26 there); 2^n by the exponent bits. */
    float xc = x > 88.72f ? 88.72f : x;
    xc = xc < -87.33f ? -87.33f : xc;
    xc = xc == xc ? xc : 0.0f;
    float n = rintf(xc * 1.44269504088896341f);
    float r = xc - n * 0.693145751953125f;
    r = r - n * 1.428606765330187e-06f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t e = (int32_t)n;
    uint32_t bits;
    memcpy(&bits, &p, sizeof bits);
    bits += (uint32_t)e << 23;
    memcpy(&p, &bits, sizeof p);
    p = x > 88.72f ? INFINITY : p;
    p = x < -87.33f ? 0.0f : p;
    return x == x ? p : x;
}

/* 1 / (1 + e^-x): for x < 0, e^-x is large but exact to its rounding, so
 * the quotient keeps its relative accuracy down to where it flushes to 0. */
static inline float cge__sigmoidf_fast(float x)
{
    return 1.0f / (1.0f + cge__expf_fast(-x));
}

/* tanh: below |x| = 0.625 x + x^3 P(x^2) (Cephes' tanhf polynomial, relative
 * error about 1 ulp); beyond, 1 - 2 / (e^2|x| + 1) with x's sign (absolute
 * error below 1.2e-7, where tanh is above 0.55). NaN passes. */
static inline float cge__tanhf_fast(float x)
{
    float a = fabsf(x);
    float s = x * x;
    float p = -5.70498872745e-3f;
    p = p * s + 2.06390887954e-2f;
    p = p * s - 5.37397155531e-2f;
    p = p * s + 1.33314422036e-1f;
    p = p * s - 3.33332819422e-1f;
    float small = x + x * s * p;
    float e = cge__expf_fast(2.0f * (a > 9.0f ? 9.0f : a));
    float big = copysignf(1.0f - 2.0f / (e + 1.0f), x);
    return a < 0.625f ? small : big;
}

/* erf(a) = a P(a^2) for 0 <= a < 0.5 */
static inline float cge__erf_small(float a)
{
    float a2 = a * a;
    float p = 4.718033644e-03f;
    p = p * a2 - 2.675720881e-02f;
    p = p * a2 + 1.128282327e-01f;
    p = p * a2 - 3.761260860e-01f;
    p = p * a2 + 1.128379166e+00f;
    return a * p;
}

/* erfc(a) for a >= 0 with a^2 = k m^2 (k = 1 or 1/2, m >= 0 given so that
 * a^2 need not be rounded; NaN passes). Below 0.5: 1 - a P(a^2); above:
 * e^-a^2 R(1/(1+a)), P and R fitted (relative minimax, Lawson) to erf(a)/a
 * on [0, 0.5] and to erfc(a) e^(a^2) on [0.5, 9.4]. e^-a^2 is e^-kh^2
 * e^-k(m^2-h^2) with h = m cut to 12 bits, so that h^2 is exact: the
 * rounding of a^2 (100 ulp of the result at a = 9) never reaches it. Past
 * 9.4 (erfc < 1e-38) 0. Within 6 ulp of erfc (measured, tests/ops). */
static inline float cge__erfcf_split(float a, float m, float k)
{
    float small = 1.0f - cge__erf_small(a);
    float ac = a > 9.4f ? 9.4f : a;
    ac = ac < 0.5f ? 0.5f : ac;
    float v = 1.0f / (1.0f + ac);
    float r = -1.254350025e+00f;
    r = r * v + 4.456052018e+00f;
    r = r * v - 6.065508945e+00f;
    r = r * v + 3.161261128e+00f;
    r = r * v + 7.435376319e-01f;
    r = r * v - 1.327539903e+00f;
    r = r * v - 1.016459843e-01f;
    r = r * v + 2.521768012e-01f;
    r = r * v + 5.671221489e-01f;
    r = r * v + 5.640316536e-01f;
    r = r * v + 3.596764395e-06f;
    uint32_t bits;
    memcpy(&bits, &m, sizeof bits);
    bits &= 0xFFFFF000u;
    float h;
    memcpy(&h, &bits, sizeof h);
    float d = k * ((m - h) * (m + h)); /* a^2 - k h^2, below 0.09 where it counts */
    float ed = 1.0f - d * (1.0f - d * (0.5f - d * (1.0f / 6.0f - d * (1.0f / 24.0f - d * (1.0f / 120.0f)))));
    float big = cge__expf_fast(-(k * (h * h))) * ed * r;
    big = a > 9.4f ? 0.0f : big;
    return a < 0.5f ? small : big;
}

static inline float cge__erfcf_pos(float a)
{
    return cge__erfcf_split(a, a, 1.0f);
}

/* erf from the same pieces: a P(a^2) near 0 (relative accuracy kept down to
 * the smallest floats), 1 - erfc(|x|) beyond, the sign restored. */
static inline float cge__erff_fast(float x)
{
    float a = fabsf(x);
    float r = a < 0.5f ? cge__erf_small(a) : 1.0f - cge__erfcf_pos(a);
    /* x's sign bit onto r (>= 0): erf(-0) is -0 */
    uint32_t rb, xb;
    memcpy(&rb, &r, sizeof rb);
    memcpy(&xb, &x, sizeof xb);
    rb |= xb & 0x80000000u;
    memcpy(&r, &rb, sizeof r);
    return r;
}

/* Exact GELU, 0.5 x erfc(-x / sqrt 2): written with erfc, which does not
 * cancel for x < 0 (where 1 + erf(x / sqrt 2) would lose every digit), and
 * with e^-(x^2/2) from x itself. */
static inline float cge__gelu_erf_fast(float x)
{
    float m = fabsf(x);
    float e = cge__erfcf_split(m * 0.70710678118654752f, m, 0.5f);
    return 0.5f * x * (x > 0.0f ? 2.0f - e : e);
}

/* y[i] = f(x[i]) for n elements (y may be x). */
void cge__exp_f32_row(float *y, const float *x, int64_t n);
void cge__sigmoid_f32_row(float *y, const float *x, int64_t n);
void cge__tanh_f32_row(float *y, const float *x, int64_t n);
void cge__erf_f32_row(float *y, const float *x, int64_t n);
void cge__gelu_f32_row(float *y, const float *x, int64_t n);
void cge__silu_f32_row(float *y, const float *x, int64_t n);

#endif
