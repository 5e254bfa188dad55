/* Tests of MaxPool (with Indices), AveragePool, LpPool and the Global pools:
 * every ONNX 1.12 node test case of them but the two large 3-D defaults, and
 * numpy cases (pool_fixtures.h) for 3-D, strides with pads, batches, int8,
 * Lp; meta errors by hand. */
#include "pool_fixtures.h"

static void test_pool_meta_errors(void **state)
{
    cge_tensor_desc in[1] = {{.name = "", .dtype = CGE_F32, .shape = CGE_SHAPE(1, 3, 8, 8)}};
    cge_tensor_desc out[2] = {{.name = ""}, {.name = ""}};
    /* kernel_shape is required */
    op_assert_error(op_infer("MaxPool", in, NULL, 1, NULL, 0, out, 1), "[schema]",
                    "kernel_shape");
    const int64_t k3[3] = {2, 2, 2};
    cge_attr a = CGE_ATTR_INTS("kernel_shape", k3, 3);
    op_assert_error(op_infer("AveragePool", in, NULL, 1, &a, 1, out, 1), "[meta]",
                    "kernel_shape");
    cge_attr ap[2] = {CGE_ATTR_INTS("kernel_shape", k3, 2), CGE_ATTR_S("auto_pad", "SAME")};
    op_assert_error(op_infer("MaxPool", in, NULL, 1, ap, 2, out, 1), "[meta]", "auto_pad");
    /* Indices are int64 and shaped like Y */
    assert_int_equal(op_infer("MaxPool", in, NULL, 1, ap, 1, out, 2), CGE_OK);
    assert_int_equal(out[1].dtype, CGE_I64);
    op_assert_shape(&(cge_tensor){.shape = out[1].shape}, CGE_SHAPE(1, 3, 7, 7));
    /* AveragePool has no integer kernel */
    in[0].dtype = CGE_I8;
    assert_int_not_equal(op_infer("AveragePool", in, NULL, 1, ap, 1, out, 1), CGE_OK);
    in[0].dtype = CGE_F32;
    in[0].shape = CGE_SHAPE(3, 8);
    op_assert_error(op_infer("GlobalAveragePool", in, NULL, 1, NULL, 0, out, 1), "[meta]",
                    "rank");
}

int main(void)
{
    const struct CMUnitTest extra[] = {cmocka_unit_test(test_pool_meta_errors)};
    return nn_fx_run_all("pool", pool_cases, POOL_NUM_CASES, extra, 1);
}
