/* Tests of Pad: the ONNX 1.12 node test cases (constant, edge, reflect) and
 * numpy cases (pad_fixtures.h) for negative pads, reflections wider than the
 * axis and uint8; pads known only at run time, axes (Pad 18), meta errors. */
#include "pad_fixtures.h"

static void test_pad_meta(void **state)
{
    cge_tensor_desc in[2] = {
        {.name = "", .dtype = CGE_F32, .shape = CGE_SHAPE(2, 3)},
        {.name = "", .dtype = CGE_I64, .shape = CGE_SHAPE(4)},
    };
    cge_tensor_desc out[1] = {{.name = ""}};
    /* pads unknown: every dim unknown */
    assert_int_equal(op_infer("Pad", in, NULL, 2, NULL, 0, out, 1), CGE_OK);
    assert_int_equal(out[0].shape.dims[0], CGE_DIM_DYNAMIC);
    const int64_t pads[4] = {1, -4, 0, 0};
    const void *vals[2] = {NULL, pads};
    op_assert_error(op_infer("Pad", in, vals, 2, NULL, 0, out, 1), "[meta]", "negative");
    cge_attr m = CGE_ATTR_S("mode", "wrap");
    op_assert_error(op_infer("Pad", in, vals, 2, &m, 1, out, 1), "[meta]", "wrap");
    in[1].shape = CGE_SHAPE(3);
    op_assert_error(op_infer("Pad", in, vals, 2, NULL, 0, out, 1), "[meta]", "pads has 3");
}

static void test_pad_axes(void **state)
{
    const float x[6] = {1, 2, 3, 4, 5, 6};
    const int64_t pads[2] = {1, 2}, axes[1] = {-1};
    const float c = 9;
    cge_tensor in[4] = {op_tensor(CGE_F32, CGE_SHAPE(2, 3), x),
                        op_tensor(CGE_I64, CGE_SHAPE(2), pads),
                        op_tensor(CGE_F32, CGE_SCALAR, &c),
                        op_tensor(CGE_I64, CGE_SHAPE(1), axes)};
    cge_tensor out[1];
    assert_int_equal(op_run("Pad", in, 4, NULL, 0, out, 1), CGE_OK);
    const float want[12] = {9, 1, 2, 3, 9, 9, 9, 4, 5, 6, 9, 9};
    op_assert_equal(&out[0], CGE_F32, CGE_SHAPE(2, 6), want);
    op_free_outputs(out, 1);
}

int main(void)
{
    const struct CMUnitTest extra[] = {
        cmocka_unit_test(test_pad_meta),
        cmocka_unit_test(test_pad_axes),
    };
    return nn_fx_run_all("pad", pad_cases, PAD_NUM_CASES, extra, 2);
}
