/* float16 / bfloat16 <-> float32 over arrays (half_convert.h). */
#include "ops/half_convert.h"

#include <immintrin.h>
#include <stdbool.h>

#include "base/cpu_isa.h"

/* Why: Cast's generic rows convert bit by bit (5 ns an element); a float16
 * model computed in float32 (compiler pass widen_half) casts its inputs and
 * outputs on every run, and VCVTPH2PS / VCVTPS2PH do eight at a time with
 * IEEE rounding. A signalling NaN comes out quiet either way (the scalar
 * functions set the quiet bit as the instructions do). */

__attribute__((target("avx,f16c"))) static void f16_to_f32_f16c(const uint16_t *in, float *out,
                                                                 int64_t n)
{
    int64_t k = 0;
    for (; k + 8 <= n; k += 8)
        _mm256_storeu_ps(out + k, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + k))));
    for (; k < n; k++)
        out[k] = cge_f16_to_f32(in[k]);
}

__attribute__((target("avx,f16c"))) static void f32_to_f16_f16c(const float *in, uint16_t *out,
                                                                 int64_t n)
{
    int64_t k = 0;
    for (; k + 8 <= n; k += 8)
        _mm_storeu_si128((__m128i *)(out + k),
                         _mm256_cvtps_ph(_mm256_loadu_ps(in + k),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; k < n; k++)
        out[k] = cge_f32_to_f16(in[k]);
}

static bool have_f16c(void) { return cge__cpu_has(CGE_CPU_AVX | CGE_CPU_F16C); }

void cge__f16_to_f32_n(const uint16_t *in, float *out, int64_t n)
{
    if (have_f16c()) {
        f16_to_f32_f16c(in, out, n);
        return;
    }
    for (int64_t k = 0; k < n; k++)
        out[k] = cge_f16_to_f32(in[k]);
}

void cge__f32_to_f16_n(const float *in, uint16_t *out, int64_t n)
{
    if (have_f16c()) {
        f32_to_f16_f16c(in, out, n);
        return;
    }
    for (int64_t k = 0; k < n; k++)
        out[k] = cge_f32_to_f16(in[k]);
}

void cge__half_to_f32_n(cge_dtype half, const uint16_t *in, float *out, int64_t n)
{
    if (half == CGE_F16) {
        cge__f16_to_f32_n(in, out, n);
        return;
    }
    for (int64_t k = 0; k < n; k++)   /* a shift: vectorised by the compiler */
        out[k] = cge_bf16_to_f32(in[k]);
}

void cge__f32_to_half_n(cge_dtype half, const float *in, uint16_t *out, int64_t n)
{
    if (half == CGE_F16) {
        cge__f32_to_f16_n(in, out, n);
        return;
    }
    for (int64_t k = 0; k < n; k++)
        out[k] = cge_f32_to_bf16(in[k]);
}
