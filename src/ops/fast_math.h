/* float32 exp and sigmoid for kernels, one element at a time or over rows:
 * branch-free, so that loops over them vectorise (AVX-512 / AVX2 clones of the
 * row functions). */
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

/* y[i] = f(x[i]) for n elements (y may be x). */
void cge__exp_f32_row(float *y, const float *x, int64_t n);
void cge__sigmoid_f32_row(float *y, const float *x, int64_t n);

#endif
