/* Tests of Resize and Upsample: every ONNX 1.12 node test case of them
 * (resize_fixtures.h, with numpy cases for integer data and resizing over
 * several axes); shape inference from constant and unknown scales/sizes. */
#include "resize_fixtures.h"

static void test_resize_meta(void **state)
{
    cge_tensor_desc in[4] = {
        {.name = "", .dtype = CGE_F32, .shape = CGE_SHAPE(1, 2, 5, 7)},
        {.name = "", .dtype = CGE_DTYPE_UNDEFINED},
        {.name = "", .dtype = CGE_F32, .shape = CGE_SHAPE(4)},
        {.name = "", .dtype = CGE_DTYPE_UNDEFINED},
    };
    cge_tensor_desc out[1] = {{.name = ""}};
    const float scales[4] = {1, 1, 0.5f, 2.5f};
    const void *vals[4] = {NULL, NULL, scales, NULL};
    assert_int_equal(op_infer("Resize", in, vals, 4, NULL, 0, out, 1), CGE_OK);
    op_assert_shape(&(cge_tensor){.shape = out[0].shape}, CGE_SHAPE(1, 2, 2, 17));
    /* scales unknown: sizes unknown */
    assert_int_equal(op_infer("Resize", in, NULL, 4, NULL, 0, out, 1), CGE_OK);
    assert_int_equal(out[0].shape.dims[3], CGE_DIM_DYNAMIC);
    /* both scales and sizes */
    in[3] = (cge_tensor_desc){.name = "", .dtype = CGE_I64, .shape = CGE_SHAPE(4)};
    op_assert_error(op_infer("Resize", in, NULL, 4, NULL, 0, out, 1), "[meta]", "exactly one");
    in[3].dtype = CGE_DTYPE_UNDEFINED;
    cge_attr m = CGE_ATTR_S("mode", "bilinear");
    op_assert_error(op_infer("Resize", in, vals, 4, &m, 1, out, 1), "[meta]", "bilinear");
    in[2].shape = CGE_SHAPE(3);
    op_assert_error(op_infer("Resize", in, vals, 4, NULL, 0, out, 1), "[meta]", "scales");
}

int main(void)
{
    const struct CMUnitTest extra[] = {cmocka_unit_test(test_resize_meta)};
    return nn_fx_run_all("resize", resize_cases, RESIZE_NUM_CASES, extra, 1);
}
