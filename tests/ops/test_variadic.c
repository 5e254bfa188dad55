/* Tests of the variadic family (Max Min Sum Mean): onnx 1.12's node test
 * cases (variadic_fixtures.h), then many-input broadcasting, NaN and dtype
 * edges by hand. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "op_runner.h"
#include "variadic_fixtures.h"

#define NCASES (sizeof variadic_cases / sizeof variadic_cases[0])

static cge_tensor T(cge_dtype dt, cge_shape s, const void *d) { return op_tensor(dt, s, d); }

static cge_tensor runn(const char *op, const cge_tensor *in, int32_t n)
{
    cge_tensor out[1];
    cge_status st = op_run(op, in, n, NULL, 0, out, 1);
    if (st)
        fail_msg("%s failed: %s", op, cge_last_error());
    return out[0];
}

static void test_onnx_cases(void **state)
{
    static const char *const ops[] = {"Max", "Min", "Sum", "Mean"};
    int total = 0;
    for (size_t i = 0; i < 4; i++) {
        int n = ew2_run_cases(variadic_cases, NCASES, ops[i]);
        if (n == 0)
            fail_msg("no onnx cases for %s", ops[i]);
        total += n;
    }
    assert_int_equal(total, (int)NCASES);
}

/* Five inputs of shapes [2,1,3], [3], [4,1], [] and [1,4,3] -> [2,4,3]. */
static void test_five_inputs_broadcast(void **state)
{
    float a[6], b[3], c[4], d[1] = {0.5f}, e[12];
    for (int i = 0; i < 6; i++)
        a[i] = (float)(i * 3 % 7) - 3.0f;
    for (int i = 0; i < 3; i++)
        b[i] = (float)i - 1.25f;
    for (int i = 0; i < 4; i++)
        c[i] = 2.0f - (float)i;
    for (int i = 0; i < 12; i++)
        e[i] = (float)(i % 5) * 0.75f - 1.5f;
    cge_tensor in[5] = {T(CGE_F32, CGE_SHAPE(2, 1, 3), a), T(CGE_F32, CGE_SHAPE(3), b),
                        T(CGE_F32, CGE_SHAPE(4, 1), c), T(CGE_F32, CGE_SCALAR, d),
                        T(CGE_F32, CGE_SHAPE(1, 4, 3), e)};
    const char *ops[4] = {"Max", "Min", "Sum", "Mean"};
    for (int k = 0; k < 4; k++) {
        cge_tensor y = runn(ops[k], in, 5);
        op_assert_shape(&y, CGE_SHAPE(2, 4, 3));
        const float *o = y.data;
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 4; j++)
                for (int l = 0; l < 3; l++) {
                    float v[5] = {a[i * 3 + l], b[l], c[j], d[0], e[j * 3 + l]};
                    float w = v[0];
                    for (int m = 1; m < 5; m++)
                        w = k == 0 ? (v[m] > w ? v[m] : w) : k == 1 ? (v[m] < w ? v[m] : w)
                                                                    : w + v[m];
                    if (k == 3)
                        w = w / 5.0f;
                    float got = o[(i * 4 + j) * 3 + l];
                    if (fabsf(got - w) > 1e-6f * fabsf(w) + 1e-7f)
                        fail_msg("%s [%d,%d,%d]: %g, expected %g", ops[k], i, j, l, got, w);
                }
        op_free_outputs(&y, 1);
    }
}

static void test_nan_propagates(void **state)
{
    const float a[4] = {NAN, 1, 2, NAN}, b[4] = {1, NAN, 0, NAN}, c[4] = {0, 0, NAN, 5};
    const float want[4] = {NAN, NAN, NAN, NAN};
    cge_tensor in[3] = {T(CGE_F32, CGE_SHAPE(4), a), T(CGE_F32, CGE_SHAPE(4), b),
                        T(CGE_F32, CGE_SHAPE(4), c)};
    cge_tensor y = runn("Max", in, 3);
    op_assert_close(&y, CGE_F32, CGE_SHAPE(4), want, 0, 0);
    op_free_outputs(&y, 1);
    y = runn("Min", in, 3);
    op_assert_close(&y, CGE_F32, CGE_SHAPE(4), want, 0, 0);
    op_free_outputs(&y, 1);
    /* float16 too */
    uint16_t h0[2] = {cge_f32_to_f16(NAN), cge_f32_to_f16(1)};
    uint16_t h1[2] = {cge_f32_to_f16(3), cge_f32_to_f16(-1)};
    cge_tensor hin[2] = {T(CGE_F16, CGE_SHAPE(2), h0), T(CGE_F16, CGE_SHAPE(2), h1)};
    y = runn("Max", hin, 2);
    const uint16_t *o = y.data;
    assert_true(isnan(cge_f16_to_f32(o[0])));
    assert_true(cge_f16_to_f32(o[1]) == 1.0f);
    op_free_outputs(&y, 1);
}

static void test_integer_and_half_types(void **state)
{
    const uint64_t u0[3] = {UINT64_MAX, 0, 5}, u1[3] = {1, UINT64_MAX - 1, 5};
    const uint64_t umax[3] = {UINT64_MAX, UINT64_MAX - 1, 5}, umin[3] = {1, 0, 5};
    cge_tensor in[2] = {T(CGE_U64, CGE_SHAPE(3), u0), T(CGE_U64, CGE_SHAPE(3), u1)};
    cge_tensor y = runn("Max", in, 2);
    op_assert_equal(&y, CGE_U64, CGE_SHAPE(3), umax);
    op_free_outputs(&y, 1);
    y = runn("Min", in, 2);
    op_assert_equal(&y, CGE_U64, CGE_SHAPE(3), umin);
    op_free_outputs(&y, 1);
    const int8_t i0[2] = {-128, 127}, i1[1] = {0};
    const int8_t imax[2] = {0, 127};
    cge_tensor iin[2] = {T(CGE_I8, CGE_SHAPE(2), i0), T(CGE_I8, CGE_SHAPE(1), i1)};
    y = runn("Max", iin, 2);
    op_assert_equal(&y, CGE_I8, CGE_SHAPE(2), imax);
    op_free_outputs(&y, 1);
    /* Sum / Mean in bfloat16, rounded after each input */
    uint16_t b0[2] = {cge_f32_to_bf16(1.0f), cge_f32_to_bf16(-2.0f)};
    uint16_t b1[2] = {cge_f32_to_bf16(2.0f), cge_f32_to_bf16(0.5f)};
    uint16_t b2[2] = {cge_f32_to_bf16(3.0f), cge_f32_to_bf16(0.0f)};
    uint16_t bsum[2] = {cge_f32_to_bf16(6.0f), cge_f32_to_bf16(-1.5f)};
    uint16_t bmean[2] = {cge_f32_to_bf16(2.0f), cge_f32_to_bf16(-0.5f)};
    cge_tensor bin[3] = {T(CGE_BF16, CGE_SHAPE(2), b0), T(CGE_BF16, CGE_SHAPE(2), b1),
                         T(CGE_BF16, CGE_SHAPE(2), b2)};
    y = runn("Sum", bin, 3);
    op_assert_equal(&y, CGE_BF16, CGE_SHAPE(2), bsum);
    op_free_outputs(&y, 1);
    y = runn("Mean", bin, 3);
    op_assert_equal(&y, CGE_BF16, CGE_SHAPE(2), bmean);
    op_free_outputs(&y, 1);
    /* Sum and Mean take floats only */
    cge_tensor out[1];
    op_assert_error(op_run("Sum", in, 2, NULL, 0, out, 1), "[meta]", "uint64");
}

static void test_one_input_and_errors(void **state)
{
    const double x[3] = {1.5, -2, 7};
    cge_tensor in[3] = {T(CGE_F64, CGE_SHAPE(3), x)};
    const char *ops[4] = {"Max", "Min", "Sum", "Mean"};
    for (int k = 0; k < 4; k++) {
        cge_tensor y = runn(ops[k], in, 1);
        op_assert_equal(&y, CGE_F64, CGE_SHAPE(3), x);
        op_free_outputs(&y, 1);
    }
    const float f[2] = {1, 2};
    in[1] = T(CGE_F32, CGE_SHAPE(2), f);
    cge_tensor out[1];
    op_assert_error(op_run("Max", in, 2, NULL, 0, out, 1), "[meta]", "one dtype");
    in[0] = T(CGE_F32, CGE_SHAPE(2), f);
    in[1] = T(CGE_F32, CGE_SHAPE(3, 1), f);
    in[2] = T(CGE_F32, CGE_SHAPE(4), f);
    op_assert_error(op_run("Sum", in, 3, NULL, 0, out, 1), "[meta]", "does not broadcast");
    op_assert_error(op_run("Sum", in, 0, NULL, 0, out, 1), "[schema]", "inputs");
}

/* Many blocks: four [300, 257] float32 inputs, one of them a [257] row. */
static void test_large(void **state)
{
    enum { R = 300, C = 257, N = R * C };
    float *x[3], row[C];
    for (int k = 0; k < 3; k++) {
        x[k] = malloc(sizeof(float) * N);
        assert_non_null(x[k]);
        for (int i = 0; i < N; i++)
            x[k][i] = (float)(((int64_t)i * (k + 3) * 7919) % 1000) / 100.0f - 5.0f;
    }
    for (int i = 0; i < C; i++)
        row[i] = (float)(i % 11) - 5.0f;
    cge_tensor in[4] = {T(CGE_F32, CGE_SHAPE(R, C), x[0]), T(CGE_F32, CGE_SHAPE(C), row),
                        T(CGE_F32, CGE_SHAPE(R, C), x[1]), T(CGE_F32, CGE_SHAPE(R, C), x[2])};
    cge_tensor mx = runn("Max", in, 4), mean = runn("Mean", in, 4);
    const float *om = mx.data, *oa = mean.data;
    for (int i = 0; i < N; i++) {
        float v[4] = {x[0][i], row[i % C], x[1][i], x[2][i]};
        float m = v[0], s = v[0];
        for (int k = 1; k < 4; k++) {
            m = v[k] > m ? v[k] : m;
            s += v[k];
        }
        if (om[i] != m)
            fail_msg("Max element %d: %g, expected %g", i, om[i], m);
        if (fabsf(oa[i] - s / 4) > 1e-6f * fabsf(s / 4) + 1e-6f)
            fail_msg("Mean element %d: %g, expected %g", i, oa[i], s / 4);
    }
    op_free_outputs(&mx, 1);
    op_free_outputs(&mean, 1);
    for (int k = 0; k < 3; k++)
        free(x[k]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_onnx_cases),
        cmocka_unit_test(test_five_inputs_broadcast),
        cmocka_unit_test(test_nan_propagates),
        cmocka_unit_test(test_integer_and_half_types),
        cmocka_unit_test(test_one_input_and_errors),
        cmocka_unit_test(test_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
