/* Vectorised rows of the float32 functions of fast_math.h, on the widest
 * path that cge__cpu_has allows (so CGE_CPU_ISA picks each on any machine):
 * the element functions compiled for AVX-512 (GCC vectorises them there:
 * its mask registers if-convert the selects), explicit AVX2 rows, and the
 * baseline. Every path computes fast_math.h's operations in its order, with
 * no multiply-add fused, so every path gives the same bits: the fused
 * kernels that call these rows stay bit-equal to the unfused ones on every
 * machine, and the AVX2 rows equal the portable ones. */
#include "ops/fast_math.h"

#include "base/cpu_isa.h"
#include "ops/kernel_util.h"

#define FAST_ROW_BODY(NAME, EXPR)                                                        \
    static inline __attribute__((always_inline)) void NAME##_body(float *y, const float *x, \
                                                                  int64_t n)             \
    {                                                                                    \
        for (int64_t i = 0; i < n; i++)                                                  \
            y[i] = EXPR;                                                                 \
    }                                                                                    \
    static void NAME##_row_generic(float *y, const float *x, int64_t n)                  \
    {                                                                                    \
        NAME##_body(y, x, n);                                                            \
    }

FAST_ROW_BODY(exp, cge__expf_fast(x[i]))
FAST_ROW_BODY(sigmoid, cge__sigmoidf_fast(x[i]))
FAST_ROW_BODY(tanh, cge__tanhf_fast(x[i]))
FAST_ROW_BODY(erf, cge__erff_fast(x[i]))
FAST_ROW_BODY(gelu, cge__gelu_erf_fast(x[i]))
/* x * sigmoid(x) as Sigmoid then Mul compute it: the same bits. */
FAST_ROW_BODY(silu, x[i] * cge__sigmoidf_fast(x[i]))

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX2_INLINE __attribute__((target("avx2"), always_inline)) static inline

AVX2_INLINE __m256 v_sel(__m256 c, __m256 a, __m256 b) /* c ? a : b */
{
    return _mm256_blendv_ps(b, a, c);
}

AVX2_INLINE __m256 v_set(float f)
{
    return _mm256_set1_ps(f);
}

#define V_ADD _mm256_add_ps
#define V_SUB _mm256_sub_ps
#define V_MUL _mm256_mul_ps
#define V_GT(a, b) _mm256_cmp_ps((a), (b), _CMP_GT_OQ)
#define V_LT(a, b) _mm256_cmp_ps((a), (b), _CMP_LT_OQ)
#define V_EQ(a, b) _mm256_cmp_ps((a), (b), _CMP_EQ_OQ)

AVX2_INLINE __m256 v_abs(__m256 x)
{
    return _mm256_andnot_ps(v_set(-0.0f), x);
}

/* cge__expf_fast, operation for operation. */
AVX2_INLINE __m256 v_exp(__m256 x)
{
    const __m256 hi = v_set(88.72f), lo = v_set(-87.33f);
    __m256 xc = v_sel(V_GT(x, hi), hi, x);
    xc = v_sel(V_LT(xc, lo), lo, xc);
    xc = _mm256_and_ps(xc, V_EQ(xc, xc)); /* NaN -> 0 */
    __m256 n = _mm256_round_ps(V_MUL(xc, v_set(1.44269504088896341f)), _MM_FROUND_CUR_DIRECTION);
    __m256 r = V_SUB(xc, V_MUL(n, v_set(0.693145751953125f)));
    r = V_SUB(r, V_MUL(n, v_set(1.428606765330187e-06f)));
    __m256 p = v_set(1.0f / 5040.0f);
    p = V_ADD(V_MUL(p, r), v_set(1.0f / 720.0f));
    p = V_ADD(V_MUL(p, r), v_set(1.0f / 120.0f));
    p = V_ADD(V_MUL(p, r), v_set(1.0f / 24.0f));
    p = V_ADD(V_MUL(p, r), v_set(1.0f / 6.0f));
    p = V_ADD(V_MUL(p, r), v_set(0.5f));
    p = V_ADD(V_MUL(p, r), v_set(1.0f));
    p = V_ADD(V_MUL(p, r), v_set(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_cvttps_epi32(n), 23);
    p = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
    p = v_sel(V_GT(x, hi), v_set(INFINITY), p);
    p = _mm256_andnot_ps(V_LT(x, lo), p);
    return v_sel(V_EQ(x, x), p, x);
}

AVX2_INLINE __m256 v_sigmoid(__m256 x)
{
    return _mm256_div_ps(v_set(1.0f), V_ADD(v_set(1.0f), v_exp(_mm256_xor_ps(x, v_set(-0.0f)))));
}

/* cge__tanhf_fast */
AVX2_INLINE __m256 v_tanh(__m256 x)
{
    __m256 a = v_abs(x), s = V_MUL(x, x);
    __m256 p = v_set(-5.70498872745e-3f);
    p = V_ADD(V_MUL(p, s), v_set(2.06390887954e-2f));
    p = V_SUB(V_MUL(p, s), v_set(5.37397155531e-2f));
    p = V_ADD(V_MUL(p, s), v_set(1.33314422036e-1f));
    p = V_SUB(V_MUL(p, s), v_set(3.33332819422e-1f));
    __m256 small = V_ADD(x, V_MUL(V_MUL(x, s), p));
    __m256 e = v_exp(V_MUL(v_set(2.0f), v_sel(V_GT(a, v_set(9.0f)), v_set(9.0f), a)));
    __m256 big = V_SUB(v_set(1.0f), _mm256_div_ps(v_set(2.0f), V_ADD(e, v_set(1.0f))));
    big = _mm256_or_ps(v_abs(big), _mm256_and_ps(x, v_set(-0.0f))); /* copysignf */
    return v_sel(V_LT(a, v_set(0.625f)), small, big);
}

/* cge__erf_small */
AVX2_INLINE __m256 v_erf_small(__m256 a)
{
    __m256 a2 = V_MUL(a, a);
    __m256 p = v_set(4.718033644e-03f);
    p = V_SUB(V_MUL(p, a2), v_set(2.675720881e-02f));
    p = V_ADD(V_MUL(p, a2), v_set(1.128282327e-01f));
    p = V_SUB(V_MUL(p, a2), v_set(3.761260860e-01f));
    p = V_ADD(V_MUL(p, a2), v_set(1.128379166e+00f));
    return V_MUL(a, p);
}

/* cge__erfcf_split */
AVX2_INLINE __m256 v_erfc_split(__m256 a, __m256 m, __m256 k)
{
    const __m256 one = v_set(1.0f), top = v_set(9.4f), half = v_set(0.5f);
    __m256 small = V_SUB(one, v_erf_small(a));
    __m256 ac = v_sel(V_GT(a, top), top, a);
    ac = v_sel(V_LT(ac, half), half, ac);
    __m256 v = _mm256_div_ps(one, V_ADD(one, ac));
    __m256 r = v_set(-1.254350025e+00f);
    r = V_ADD(V_MUL(r, v), v_set(4.456052018e+00f));
    r = V_SUB(V_MUL(r, v), v_set(6.065508945e+00f));
    r = V_ADD(V_MUL(r, v), v_set(3.161261128e+00f));
    r = V_ADD(V_MUL(r, v), v_set(7.435376319e-01f));
    r = V_SUB(V_MUL(r, v), v_set(1.327539903e+00f));
    r = V_SUB(V_MUL(r, v), v_set(1.016459843e-01f));
    r = V_ADD(V_MUL(r, v), v_set(2.521768012e-01f));
    r = V_ADD(V_MUL(r, v), v_set(5.671221489e-01f));
    r = V_ADD(V_MUL(r, v), v_set(5.640316536e-01f));
    r = V_ADD(V_MUL(r, v), v_set(3.596764395e-06f));
    __m256 h = _mm256_and_ps(m, _mm256_castsi256_ps(_mm256_set1_epi32((int)0xFFFFF000u)));
    __m256 d = V_MUL(k, V_MUL(V_SUB(m, h), V_ADD(m, h)));
    __m256 ed = V_SUB(v_set(1.0f / 24.0f), V_MUL(d, v_set(1.0f / 120.0f)));
    ed = V_SUB(v_set(1.0f / 6.0f), V_MUL(d, ed));
    ed = V_SUB(half, V_MUL(d, ed));
    ed = V_SUB(one, V_MUL(d, ed));
    ed = V_SUB(one, V_MUL(d, ed));
    __m256 eh = v_exp(_mm256_xor_ps(V_MUL(k, V_MUL(h, h)), v_set(-0.0f)));
    __m256 big = V_MUL(V_MUL(eh, ed), r);
    big = _mm256_andnot_ps(V_GT(a, top), big);
    return v_sel(V_LT(a, half), small, big);
}

/* cge__erff_fast */
AVX2_INLINE __m256 v_erf(__m256 x)
{
    __m256 a = v_abs(x);
    __m256 r = v_sel(V_LT(a, v_set(0.5f)), v_erf_small(a),
                     V_SUB(v_set(1.0f), v_erfc_split(a, a, v_set(1.0f))));
    return _mm256_or_ps(r, _mm256_and_ps(x, v_set(-0.0f)));
}

/* cge__gelu_erf_fast */
AVX2_INLINE __m256 v_gelu(__m256 x)
{
    __m256 m = v_abs(x);
    __m256 e = v_erfc_split(V_MUL(m, v_set(0.70710678118654752f)), m, v_set(0.5f));
    __m256 w = v_sel(V_GT(x, _mm256_setzero_ps()), V_SUB(v_set(2.0f), e), e);
    return V_MUL(V_MUL(v_set(0.5f), x), w);
}

AVX2_INLINE __m256 v_silu(__m256 x)
{
    return V_MUL(x, v_sigmoid(x));
}

/* 8 lanes at a time; the last n % 8 elements through the element function
 * (the same bits). Inputs and outputs may be one buffer. */
#define AVX2_ROW(NAME, VFN)                                                              \
    __attribute__((target("avx2"))) static void NAME##_row_avx2(float *y, const float *x, \
                                                                 int64_t n)              \
    {                                                                                    \
        int64_t i = 0;                                                                   \
        for (; i + 16 <= n; i += 16) {                                                   \
            __m256 a = VFN(_mm256_loadu_ps(x + i)), b = VFN(_mm256_loadu_ps(x + i + 8)); \
            _mm256_storeu_ps(y + i, a);                                                  \
            _mm256_storeu_ps(y + i + 8, b);                                              \
        }                                                                                \
        for (; i + 8 <= n; i += 8)                                                       \
            _mm256_storeu_ps(y + i, VFN(_mm256_loadu_ps(x + i)));                        \
        NAME##_row_generic(y + i, x + i, n - i);                                         \
    }                                                                                    \
    __attribute__((target("avx512f"))) static void NAME##_row_avx512(float *y, const float *x, \
                                                                     int64_t n)          \
    {                                                                                    \
        NAME##_body(y, x, n);                                                            \
    }                                                                                    \
    void cge__##NAME##_f32_row(float *y, const float *x, int64_t n)                      \
    {                                                                                    \
        if (cge__cpu_has(CGE_CPU_AVX512F))                                               \
            NAME##_row_avx512(y, x, n);                                                  \
        else if (cge__cpu_has(CGE_CPU_AVX2))                                             \
            NAME##_row_avx2(y, x, n);                                                    \
        else                                                                             \
            NAME##_row_generic(y, x, n);                                                 \
    }
#else
#define AVX2_ROW(NAME, VFN)                                                              \
    void cge__##NAME##_f32_row(float *y, const float *x, int64_t n)                      \
    {                                                                                    \
        NAME##_row_generic(y, x, n);                                                     \
    }
#endif

AVX2_ROW(exp, v_exp)
AVX2_ROW(sigmoid, v_sigmoid)
AVX2_ROW(tanh, v_tanh)
AVX2_ROW(erf, v_erf)
AVX2_ROW(gelu, v_gelu)
AVX2_ROW(silu, v_silu)
