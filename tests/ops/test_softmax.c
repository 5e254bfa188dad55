/* Tests of Softmax and LogSoftmax against numpy references
 * (softmax_fixtures.h) and hand values: every axis position, chunked inner
 * axes, stability with large inputs, dtypes, empty tensors, meta errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "op_runner.h"
#include "softmax_fixtures.h"

/* The inputs formula shared with gen_mm_fixtures.py, scaled. */
static float *new_f32(cge_shape s, int seed, double scale)
{
    int64_t n = cge_shape_numel(&s);
    float *d = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        d[i] = (float)(((double)((i * 37 + seed * 11) % 101) / 50.0 - 1.0) * scale);
    return d;
}

static cge_tensor run_axis(const char *op, cge_tensor x, int64_t axis)
{
    cge_attr a = {.name = "axis", .kind = CGE_ATTR_INT, .i = axis};
    cge_tensor out[1];
    if (op_run(op, &x, 1, &a, 1, out, 1) != CGE_OK)
        fail_msg("%s(axis %lld) failed: %s", op, (long long)axis, cge_last_error());
    return out[0];
}

static void check(const char *op, cge_tensor x, int64_t axis, const float *want)
{
    cge_tensor y = run_axis(op, x, axis);
    op_assert_close(&y, CGE_F32, x.shape, want, 1e-5, 1e-6);
    op_free_outputs(&y, 1);
}

static void test_softmax_axes(void **state)
{
    cge_shape s = CGE_SHAPE(3, 4, 5);
    float *x = new_f32(s, 30, 3.0);
    cge_tensor t = op_tensor(CGE_F32, s, x);
    check("Softmax", t, -1, sm_last_y);
    check("Softmax", t, 2, sm_last_y);
    check("Softmax", t, 1, sm_mid_y);
    check("Softmax", t, -2, sm_mid_y);
    check("Softmax", t, 0, sm_first_y);
    check("LogSoftmax", t, -1, lsm_last_y);
    check("LogSoftmax", t, 1, lsm_mid_y);
    /* axis defaults to -1 */
    cge_tensor out[1];
    assert_int_equal(op_run("Softmax", &t, 1, NULL, 0, out, 1), CGE_OK);
    op_assert_close(&out[0], CGE_F32, s, sm_last_y, 1e-5, 1e-6);
    op_free_outputs(out, 1);
    free(x);
}

static void test_softmax_wide_inner(void **state)
{
    /* inner = 70 positions: one full 64-wide chunk and a partial one */
    cge_shape s = CGE_SHAPE(2, 3, 70);
    float *x = new_f32(s, 31, 4.0);
    cge_tensor t = op_tensor(CGE_F32, s, x);
    check("Softmax", t, 1, sm_wide_y);
    check("LogSoftmax", t, 1, lsm_wide_y);
    free(x);
}

static void test_softmax_stable(void **state)
{
    const float x[6] = {1000, 1001, 1002, -1000, -1000, -1000};
    cge_tensor t = op_tensor(CGE_F32, CGE_SHAPE(2, 3), x);
    check("Softmax", t, -1, sm_big_y);
    check("LogSoftmax", t, -1, lsm_big_y);

    /* A -inf entry gets probability 0 (log: -inf). */
    const float xi[3] = {-INFINITY, 0, 0};
    const float want[3] = {0, 0.5f, 0.5f}, wlog[3] = {-INFINITY, -0.693147181f, -0.693147181f};
    t = op_tensor(CGE_F32, CGE_SHAPE(3), xi);
    check("Softmax", t, 0, want);
    check("LogSoftmax", t, 0, wlog);
}

/* The float exp across its whole range: a 300-wide row from 0 down to -149.5
 * (below -87 exp underflows to 0), against double precision. */
static void test_softmax_exp_range(void **state)
{
    float x[300], want[300], wlog[300];
    double s = 0;
    for (int i = 0; i < 300; i++) {
        x[i] = -0.5f * (float)i;
        s += exp((double)x[i]);
    }
    for (int i = 0; i < 300; i++) {
        want[i] = (float)(exp((double)x[i]) / s);
        wlog[i] = (float)((double)x[i] - log(s));
    }
    cge_tensor t = op_tensor(CGE_F32, CGE_SHAPE(1, 300), x);
    check("Softmax", t, -1, want);
    check("LogSoftmax", t, 1, wlog);
    /* the same values down a non-last axis */
    t = op_tensor(CGE_F32, CGE_SHAPE(300, 1), x);
    check("Softmax", t, 0, want);
}

static void test_softmax_dtypes(void **state)
{
    double x64[10];
    for (int i = 0; i < 10; i++)
        x64[i] = (double)((i * 37 + 32 * 11) % 101) / 50.0 - 1.0;
    cge_tensor y = run_axis("Softmax", op_tensor(CGE_F64, CGE_SHAPE(2, 5), x64), 0);
    op_assert_close(&y, CGE_F64, CGE_SHAPE(2, 5), sm_f64_y, 1e-12, 1e-14);
    op_free_outputs(&y, 1);

    y = run_axis("Softmax", op_tensor(CGE_F16, CGE_SHAPE(3, 8), sm_f16_x), -1);
    op_assert_close(&y, CGE_F16, CGE_SHAPE(3, 8), sm_f16_y, 2e-3, 1e-4);
    op_free_outputs(&y, 1);

    /* bfloat16, exact: two equal entries share 1/2; four share 1/4. */
    uint16_t xb[6] = {cge_f32_to_bf16(3), cge_f32_to_bf16(3), cge_f32_to_bf16(-1),
                      cge_f32_to_bf16(-1), cge_f32_to_bf16(-1), cge_f32_to_bf16(-1)};
    uint16_t half = cge_f32_to_bf16(0.5f), quarter = cge_f32_to_bf16(0.25f);
    y = run_axis("Softmax", op_tensor(CGE_BF16, CGE_SHAPE(2, 1), xb), 0);
    uint16_t w1[2] = {half, half};
    op_assert_equal(&y, CGE_BF16, CGE_SHAPE(2, 1), w1);
    op_free_outputs(&y, 1);
    y = run_axis("Softmax", op_tensor(CGE_BF16, CGE_SHAPE(4), xb + 2), -1);
    uint16_t w2[4] = {quarter, quarter, quarter, quarter};
    op_assert_equal(&y, CGE_BF16, CGE_SHAPE(4), w2);
    op_free_outputs(&y, 1);
    y = run_axis("LogSoftmax", op_tensor(CGE_BF16, CGE_SHAPE(2), xb), 0);
    float ln2 = -0.693147181f;
    uint16_t w3[2] = {cge_f32_to_bf16(ln2), cge_f32_to_bf16(ln2)};
    op_assert_equal(&y, CGE_BF16, CGE_SHAPE(2), w3);
    op_free_outputs(&y, 1);
}

static void test_softmax_empty_and_single(void **state)
{
    float dummy[1] = {0};
    cge_tensor y = run_axis("Softmax", op_tensor(CGE_F32, CGE_SHAPE(0, 5), dummy), 1);
    op_assert_shape(&y, CGE_SHAPE(0, 5));
    op_free_outputs(&y, 1);
    y = run_axis("LogSoftmax", op_tensor(CGE_F32, CGE_SHAPE(3, 0), dummy), 1);
    op_assert_shape(&y, CGE_SHAPE(3, 0));
    op_free_outputs(&y, 1);
    /* One element per row: probability 1, log 0. */
    const float x[3] = {-5, 0, 7}, ones[3] = {1, 1, 1}, zeros[3] = {0, 0, 0};
    y = run_axis("Softmax", op_tensor(CGE_F32, CGE_SHAPE(3, 1), x), 1);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(3, 1), ones);
    op_free_outputs(&y, 1);
    y = run_axis("LogSoftmax", op_tensor(CGE_F32, CGE_SHAPE(3, 1), x), -1);
    op_assert_equal(&y, CGE_F32, CGE_SHAPE(3, 1), zeros);
    op_free_outputs(&y, 1);
}

static void test_softmax_meta_errors(void **state)
{
    cge_tensor_desc in[1] = {{.dtype = CGE_F32, .shape = CGE_SCALAR}}, out[1] = {{.name = "y"}};
    op_assert_error(op_infer("Softmax", in, NULL, 1, NULL, 0, out, 1), "[meta]", "node0");
    op_assert_error(op_infer("LogSoftmax", in, NULL, 1, NULL, 0, out, 1), "[meta]", "rank >= 1");
    in[0].shape = CGE_SHAPE(2, 3);
    cge_attr a = {.name = "axis", .kind = CGE_ATTR_INT, .i = 2};
    op_assert_error(op_infer("Softmax", in, NULL, 1, &a, 1, out, 1), "[meta]",
                    "axis 2 is out of range");
    a.i = -3;
    op_assert_error(op_infer("LogSoftmax", in, NULL, 1, &a, 1, out, 1), "[meta]", "axis -3");
    a.i = -2;
    in[0].shape = CGE_SHAPE(CGE_DIM_DYNAMIC, 3);
    assert_int_equal(op_infer("Softmax", in, NULL, 1, &a, 1, out, 1), CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &in[0].shape));
    /* Integers are not accepted (schema). */
    in[0].dtype = CGE_I32;
    assert_int_not_equal(op_infer("Softmax", in, NULL, 1, NULL, 0, out, 1), CGE_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_softmax_axes),          cmocka_unit_test(test_softmax_wide_inner),
        cmocka_unit_test(test_softmax_stable),        cmocka_unit_test(test_softmax_exp_range),        cmocka_unit_test(test_softmax_dtypes),
        cmocka_unit_test(test_softmax_empty_and_single), cmocka_unit_test(test_softmax_meta_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
