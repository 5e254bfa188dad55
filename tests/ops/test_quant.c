/* Quantization operators: every ONNX 1.12 node case plus numpy-referenced
 * cases (quant_fixtures.h: ties to even, saturation, per-axis scales, int32
 * inputs, mixed signedness, per-column zero points, grouped/strided/dilated
 * and auto-padded integer convolutions, requantization), and meta errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "quant_fixtures.h"

static void test_quant_node_cases(void **state)
{
    nc_run_all(quant_cases, NUM_QUANT_CASES);
}

static void test_quant_meta_errors(void **state)
{
    cge_tensor_desc out[1];
    cge_tensor_desc q[3] = {
        {.dtype = CGE_F32, .shape = CGE_SHAPE(2, 3)},
        {.dtype = CGE_F32, .shape = CGE_SHAPE(4)},
        {.dtype = CGE_I8, .shape = CGE_SHAPE(4)},
    };
    /* 4 scales for axis 1 of size 3 */
    op_assert_error(op_infer("QuantizeLinear", q, NULL, 3, NULL, 0, out, 1), "[meta]", "scales");
    q[1].shape = q[2].shape = CGE_SHAPE(3);
    assert_int_equal(op_infer("QuantizeLinear", q, NULL, 3, NULL, 0, out, 1), CGE_OK);
    assert_int_equal(out[0].dtype, CGE_I8);
    assert_int_equal(op_infer("QuantizeLinear", q, NULL, 2, NULL, 0, out, 1), CGE_OK);
    assert_int_equal(out[0].dtype, CGE_U8);
    q[0].dtype = CGE_F64;
    op_assert_error(op_infer("QuantizeLinear", q, NULL, 3, NULL, 0, out, 1), "[meta]", "float64");

    cge_tensor_desc mm[4] = {
        {.dtype = CGE_U8, .shape = CGE_SHAPE(2, 3)},
        {.dtype = CGE_I8, .shape = CGE_SHAPE(4, 5)},
    };
    op_assert_error(op_infer("MatMulInteger", mm, NULL, 2, NULL, 0, out, 1), "[meta]", "inner");
    mm[1].shape = CGE_SHAPE(3, 5);
    mm[2] = (cge_tensor_desc){.dtype = CGE_U8, .shape = CGE_SHAPE(7)};
    op_assert_error(op_infer("MatMulInteger", mm, NULL, 3, NULL, 0, out, 1), "[meta]", "row");
    mm[2].shape = CGE_SHAPE(2);
    assert_int_equal(op_infer("MatMulInteger", mm, NULL, 3, NULL, 0, out, 1), CGE_OK);
    assert_int_equal(out[0].dtype, CGE_I32);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(2, 5)));

    cge_tensor_desc cv[2] = {
        {.dtype = CGE_U8, .shape = CGE_SHAPE(1, 4, 5, 5)},
        {.dtype = CGE_I8, .shape = CGE_SHAPE(6, 3, 3, 3)},
    };
    op_assert_error(op_infer("ConvInteger", cv, NULL, 2, NULL, 0, out, 1), "[meta]", "group");
    cv[1].shape = CGE_SHAPE(6, 2, 3, 3);
    cge_attr g = CGE_ATTR_I("group", 2);
    assert_int_equal(op_infer("ConvInteger", cv, NULL, 2, &g, 1, out, 1), CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(1, 6, 3, 3)));
}

/* DynamicQuantizeLinear over a range that needs several blocks: the partial
 * ranges must be folded across blocks. */
static void test_dynamic_quantize_large(void **state)
{
    int64_t n = 200000;
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)((i * 7919) % 1000) / 100.0f - 2.0f; /* [-2, 7.99] */
    x[n - 1] = 10.2f; /* the maximum lies in the last block */
    cge_tensor in = op_tensor(CGE_F32, CGE_SHAPE(n), x);
    cge_tensor out[3];
    assert_int_equal(op_run("DynamicQuantizeLinear", &in, 1, NULL, 0, out, 3), CGE_OK);
    float scale = *(float *)out[1].data;
    uint8_t zp = *(uint8_t *)out[2].data;
    assert_float_equal(scale, (10.2f + 2.0f) / 255.0f, 1e-7);
    assert_int_equal(zp, (uint8_t)rintf(2.0f / scale));
    assert_int_equal(((uint8_t *)out[0].data)[n - 1], 255);
    for (int64_t i = 0; i < n; i += 997) {
        float q = rintf(x[i] / scale) + zp;
        q = q < 0 ? 0 : (q > 255 ? 255 : q);
        assert_int_equal(((uint8_t *)out[0].data)[i], (uint8_t)q);
    }
    op_free_outputs(out, 3);
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quant_node_cases),
        cmocka_unit_test(test_quant_meta_errors),
        cmocka_unit_test(test_dynamic_quantize_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
