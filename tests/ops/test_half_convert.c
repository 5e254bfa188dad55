/* The array conversions of ops/half_convert.c give the scalar conversions'
 * bits (cge_f16_to_f32 / cge_f32_to_f16) for every float16 value, and for
 * float32 values at every rounding edge: halfway cases (ties to even),
 * values just above and below them, subnormal results, overflow to
 * infinity, infinities and NaNs; and at lengths that are no multiple of the
 * vector width (the tails); the dtype-generic forms, bfloat16 included. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/types.h"
#include "ops/half_convert.h"

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void every_half_widens_as_the_scalar(void **state)
{
    (void)state;
    enum { N = 65536 };
    uint16_t *h = malloc(N * sizeof *h);
    float *f = malloc(N * sizeof *f);
    assert_non_null(h);
    assert_non_null(f);
    for (int32_t i = 0; i < N; i++)
        h[i] = (uint16_t)i;
    cge__f16_to_f32_n(h, f, N);
    for (int32_t i = 0; i < N; i++) {
        float want = cge_f16_to_f32(h[i]);
        if (bits_of(f[i]) != bits_of(want))
            fail_msg("half 0x%04x: 0x%08x, the scalar conversion gives 0x%08x", i,
                     bits_of(f[i]), bits_of(want));
    }
    /* and back: every half survives the round trip, NaNs as quiet NaNs */
    uint16_t *back = malloc(N * sizeof *back);
    assert_non_null(back);
    cge__f32_to_f16_n(f, back, N);
    for (int32_t i = 0; i < N; i++) {
        bool nan = (i & 0x7c00) == 0x7c00 && (i & 0x3ff);
        uint16_t want = nan ? (uint16_t)(i | 0x200) : (uint16_t)i;
        if (back[i] != want)
            fail_msg("half 0x%04x came back as 0x%04x", i, back[i]);
    }
    free(back);
    free(h);
    free(f);
}

static void floats_narrow_as_the_scalar(void **state)
{
    (void)state;
    /* every float32 exponent near half's range, mantissas at the rounding
     * edges of a half's 10 bits (ties, one ulp either side), both signs */
    enum { CAP = 1 << 16 };
    float *x = malloc(CAP * sizeof *x);
    assert_non_null(x);
    int32_t n = 0;
    const uint32_t mants[] = {0x000000, 0x000001, 0x000fff, 0x001000, 0x001001, 0x002000,
                              0x003000, 0x7fefff, 0x7ff000, 0x7ff001, 0x7fffff, 0x400000,
                              0x3ff000, 0x1fffff, 0x200000};
    for (uint32_t sign = 0; sign < 2; sign++)
        for (uint32_t e = 90; e <= 160; e++)
            for (size_t m = 0; m < sizeof mants / sizeof mants[0]; m++)
                x[n++] = float_of(sign << 31 | e << 23 | mants[m]);
    const float special[] = {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e-8f,
                             2.98e-8f, 2.99e-8f, 5.96e-8f, 6.1e-5f, 1e30f, -1e30f};
    for (size_t k = 0; k < sizeof special / sizeof special[0]; k++)
        x[n++] = special[k];
    x[n++] = float_of(0x7f800000u);  /* inf */
    x[n++] = float_of(0xff800000u);  /* -inf */
    x[n++] = float_of(0x7fc00000u);  /* quiet NaN */
    x[n++] = float_of(0x7f800001u);  /* signalling NaN */
    x[n++] = float_of(0xffa00000u);  /* negative NaN with a payload */
    srand(7);
    while (n < CAP - 3)
        x[n++] = float_of((uint32_t)rand() << 16 ^ (uint32_t)rand());
    uint16_t *h = malloc(CAP * sizeof *h);
    assert_non_null(h);
    /* lengths with tails, from several offsets */
    const int32_t lens[] = {n, 1, 7, 8, 9, 15, 17, 31};
    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
        int32_t off = l ? (int32_t)l * 3 : 0;
        memset(h, 0, CAP * sizeof *h);
        cge__f32_to_f16_n(x + off, h, lens[l]);
        for (int32_t i = 0; i < lens[l]; i++) {
            uint16_t want = cge_f32_to_f16(x[off + i]);
            if (h[i] != want)
                fail_msg("float 0x%08x: half 0x%04x, the scalar conversion gives 0x%04x",
                         bits_of(x[off + i]), h[i], want);
        }
    }
    free(h);
    free(x);
}

/* The dtype-generic forms: float16 as above, bfloat16 as the scalar
 * cge_bf16_to_f32 / cge_f32_to_bf16, every bfloat16 value and back. */
static void generic_forms_match_the_scalars(void **state)
{
    (void)state;
    enum { N = 65536 };
    uint16_t *h = malloc(N * sizeof *h), *back = malloc(N * sizeof *back);
    float *f = malloc(N * sizeof *f);
    assert_non_null(h);
    assert_non_null(back);
    assert_non_null(f);
    for (int32_t i = 0; i < N; i++)
        h[i] = (uint16_t)i;
    const cge_dtype halves[2] = {CGE_F16, CGE_BF16};
    for (int t = 0; t < 2; t++) {
        cge_dtype dt = halves[t];
        cge__half_to_f32_n(dt, h, f, N);
        cge__f32_to_half_n(dt, f, back, N);
        for (int32_t i = 0; i < N; i++) {
            float want = dt == CGE_F16 ? cge_f16_to_f32(h[i]) : cge_bf16_to_f32(h[i]);
            if (bits_of(f[i]) != bits_of(want))
                fail_msg("%s 0x%04x widened to 0x%08x, the scalar gives 0x%08x",
                         cge_dtype_name(dt), i, bits_of(f[i]), bits_of(want));
            uint16_t wb = dt == CGE_F16 ? cge_f32_to_f16(f[i]) : cge_f32_to_bf16(f[i]);
            if (back[i] != wb)
                fail_msg("%s 0x%04x narrowed to 0x%04x, the scalar gives 0x%04x",
                         cge_dtype_name(dt), i, back[i], wb);
        }
    }
    free(h);
    free(back);
    free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_half_widens_as_the_scalar),
        cmocka_unit_test(floats_narrow_as_the_scalar),
        cmocka_unit_test(generic_forms_match_the_scalars),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
