/* Tests of BatchNormalization (inference and training mode),
 * InstanceNormalization, LayerNormalization (Y, Mean, InvStdDev) and LRN:
 * every ONNX 1.12 node test case of them and numpy cases (norm_fixtures.h);
 * meta errors by hand. */
#include "norm_fixtures.h"

static void test_norm_meta_errors(void **state)
{
    cge_tensor_desc in[5];
    for (int i = 0; i < 5; i++)
        in[i] = (cge_tensor_desc){.name = "", .dtype = CGE_F32, .shape = CGE_SHAPE(3)};
    in[0].shape = CGE_SHAPE(2, 3, 4);
    cge_tensor_desc out[3] = {{.name = ""}, {.name = ""}, {.name = ""}};
    in[3].shape = CGE_SHAPE(4);
    op_assert_error(op_infer("BatchNormalization", in, NULL, 5, NULL, 0, out, 1), "[meta]",
                    "length C");
    in[3].shape = CGE_SHAPE(3);
    /* running statistics only come out in training mode */
    op_assert_error(op_infer("BatchNormalization", in, NULL, 5, NULL, 0, out, 3), "[meta]",
                    "training_mode");
    /* LayerNorm: Scale must have the normalised shape */
    in[1].shape = CGE_SHAPE(3, 4);
    cge_attr ax = CGE_ATTR_I("axis", 2);
    op_assert_error(op_infer("LayerNormalization", in, NULL, 2, &ax, 1, out, 1), "[meta]",
                    "normalised shape");
    in[1].shape = CGE_SHAPE(4);
    assert_int_equal(op_infer("LayerNormalization", in, NULL, 2, &ax, 1, out, 3), CGE_OK);
    op_assert_shape(&(cge_tensor){.shape = out[1].shape}, CGE_SHAPE(2, 3, 1));
    assert_int_equal(out[2].dtype, CGE_F32);
    ax.i = 3;
    op_assert_error(op_infer("LayerNormalization", in, NULL, 2, &ax, 1, out, 1), "[meta]",
                    "axis");
    cge_attr st = CGE_ATTR_I("stash_type", 10);
    in[1].shape = CGE_SHAPE(4);
    op_assert_error(op_infer("LayerNormalization", in, NULL, 2, &st, 1, out, 1), "[meta]",
                    "stash_type");
}

/* LayerNormalization in float16 goes through the same double loops. */
static void test_layernorm_f16(void **state)
{
    const float xf[6] = {1, 2, 3, -1, 0, 5};
    uint16_t x[6], s[3], y_want[6];
    for (int i = 0; i < 6; i++)
        x[i] = cge_f32_to_f16(xf[i]);
    for (int i = 0; i < 3; i++)
        s[i] = cge_f32_to_f16(1.0f);
    for (int r = 0; r < 2; r++) {
        double m = (xf[3 * r] + xf[3 * r + 1] + xf[3 * r + 2]) / 3, v = 0;
        for (int j = 0; j < 3; j++)
            v += (xf[3 * r + j] - m) * (xf[3 * r + j] - m) / 3;
        for (int j = 0; j < 3; j++)
            y_want[3 * r + j] = cge_f32_to_f16((float)((xf[3 * r + j] - m) / sqrt(v + 1e-5)));
    }
    cge_tensor in[2] = {op_tensor(CGE_F16, CGE_SHAPE(2, 3), x),
                        op_tensor(CGE_F16, CGE_SHAPE(3), s)};
    cge_tensor out[1];
    assert_int_equal(op_run("LayerNormalization", in, 2, NULL, 0, out, 1), CGE_OK);
    op_assert_close(&out[0], CGE_F16, CGE_SHAPE(2, 3), y_want, 2e-3, 2e-3);
    op_free_outputs(out, 1);
}

int main(void)
{
    const struct CMUnitTest extra[] = {
        cmocka_unit_test(test_norm_meta_errors),
        cmocka_unit_test(test_layernorm_f16),
    };
    return nn_fx_run_all("norm", norm_cases, NORM_NUM_CASES, extra, 2);
}
