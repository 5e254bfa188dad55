/* int8 / uint8 helpers shared by the quantized operators (quant.c,
 * qlinear_elementwise.c, dnnl_qconv.c) and the QDQ fusion pass: loads of
 * quantized values, the clamp, the saturating store and QuantizeLinear's
 * rounding, so that every path writes the same bits. */
#ifndef CGE_OPS_Q8_H
#define CGE_OPS_Q8_H

#include <math.h>
#include <stdint.h>

#include "cge/model_file.h" /* cge_cpu_features */
#include "cge/types.h"

/* The int8 loops compiled a second time for AVX-512 (F, BW, VL, DQ) where
 * the compiler can (not in the ThreadSanitizer build), chosen at run time
 * by cge__q8_avx512(): the same IEEE operations, so the same bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
#define CGE__Q8_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define CGE__HAVE_Q8_AVX512 1

/* Whether this CPU runs them (asked once per file that calls it). */
static inline bool cge__q8_avx512(void)
{
    static int known = -1;
    if (known < 0) {
        uint64_t need = CGE_CPU_AVX512F | CGE_CPU_AVX512BW | CGE_CPU_AVX512VL;
        known = (cge_cpu_features() & need) == need;
    }
    return known != 0;
}

/* The same loops for AVX2 (8 float lanes, 32 byte lanes), chosen by
 * cge__q8_avx2() where AVX-512 is absent or capped off (CGE_CPU_ISA=avx2):
 * the same IEEE operations in the same order (no FMA), so the same bits. */
#define CGE__Q8_AVX2 __attribute__((target("avx2")))
#define CGE__HAVE_Q8_AVX2 1

static inline bool cge__q8_avx2(void)
{
    static int known = -1;
    if (known < 0)
        known = (cge_cpu_features() & CGE_CPU_AVX2) == CGE_CPU_AVX2;
    return known != 0;
}

#include <immintrin.h>

/* 8 codes of int8 (sg) or uint8 data at p as int32. */
CGE__Q8_AVX2 static inline __m256i cge__q8_load8_avx2(const void *p, int sg)
{
    __m128i b = _mm_loadl_epi64((const __m128i *)p);
    return sg ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
}

/* 16 rounded floats already within int8's (sg) or uint8's range, as 16
 * bytes: conversions and packs that saturate nothing (the values fit). */
CGE__Q8_AVX2 static inline void cge__q8_store16_avx2(void *y, int sg, __m256 v0, __m256 v1)
{
    __m256i w = _mm256_packs_epi32(_mm256_cvtps_epi32(v0), _mm256_cvtps_epi32(v1));
    w = _mm256_permute4x64_epi64(w, 0xD8); /* packs works per 128-bit lane */
    __m128i a = _mm256_castsi256_si128(w), b = _mm256_extracti128_si256(w, 1);
    _mm_storeu_si128((__m128i *)y, sg ? _mm_packs_epi16(a, b) : _mm_packus_epi16(a, b));
}

/* QuantizeLinear's arithmetic on 8 lanes: rint(x / s) + z, NaN to 0, then
 * clamped to [lo, hi] (cge__q8_quantize and cge__q8_clamp). */
CGE__Q8_AVX2 static inline __m256 cge__q8_quantize8_avx2(__m256 x, __m256 s, __m256 z, __m256 lo,
                                                          __m256 hi)
{
    __m256 v = _mm256_round_ps(_mm256_div_ps(x, s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm256_add_ps(v, z);
    v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q)); /* NaN -> 0 */
    return _mm256_min_ps(_mm256_max_ps(v, lo), hi);
}
#endif

/* Element i of int8, uint8 or int32 data as int32 (0 for another dtype). */
static inline int32_t cge__q_load(const void *p, cge_dtype t, int64_t i)
{
    switch (t) {
    case CGE_I8: return ((const int8_t *)p)[i];
    case CGE_U8: return ((const uint8_t *)p)[i];
    case CGE_I32: return ((const int32_t *)p)[i];
    default: return 0;
    }
}

/* Element i of int8 (sg) or uint8 data. */
static inline int32_t cge__q8_load(const void *p, int sg, int64_t i)
{
    return sg ? ((const int8_t *)p)[i] : ((const uint8_t *)p)[i];
}

/* v within [lo, hi]; NaN becomes 0 (then clamped). */
static inline float cge__q8_clamp(float v, float lo, float hi)
{
    if (v != v)
        v = 0.0f;
    return v < lo ? lo : (v > hi ? hi : v);
}

/* Store of a rounded value already within the dtype's range. */
static inline void cge__q8_store(void *y, int sg, int64_t i, float v)
{
    if (sg)
        ((int8_t *)y)[i] = (int8_t)v;
    else
        ((uint8_t *)y)[i] = (uint8_t)v;
}

/* Saturating store of a rounded value (NaN: 0) into int8 (sg) or uint8. */
static inline void cge__q8_store_sat(void *y, int sg, int64_t i, float v)
{
    cge__q8_store(y, sg, i, cge__q8_clamp(v, sg ? -128.0f : 0.0f, sg ? 127.0f : 255.0f));
}

/* QuantizeLinear's arithmetic for one value: x / scale rounded half to even
 * (rintf in the default rounding mode), plus the zero point; saturate it
 * with cge__q8_store_sat. */
static inline float cge__q8_quantize(float x, float scale, float zero_point)
{
    return rintf(x / scale) + zero_point;
}

/* QAdd's arithmetic over elements [e0, e1) of two full int8 / uint8 tensors
 * (qlinear_elementwise.c): y = clamp(rint(((a - za) * sa + (b - zb) * sb) /
 * sc) + zc, lo, hi), the unfused DequantizeLinear, Add, QuantizeLinear bits;
 * the QConvAdd kernel (quant.c) runs it on the rows a convolution just wrote. */
typedef struct cge__qadd_params {
    const void *a, *b;
    void *y;
    int32_t za, zb;
    float sa, sb, sc, zc, lo, hi;
    int asg, bsg, ysg;                 /* int8 rather than uint8 */
} cge__qadd_params;

void cge__qadd_span(const cge__qadd_params *p, int64_t e0, int64_t e1);

#endif
