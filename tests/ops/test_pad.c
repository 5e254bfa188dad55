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

/* The kernel reads the pads on the stream; pads that no longer give the
 * output's shape (changed after meta sized it, as a mapped model file changed
 * under a session once did: SIGSEGV) fail the run with a [kernel] error and
 * write nothing outside the output. */
static void test_pad_kernel_checks_pads(void **state)
{
    cge_device *dev = NULL;
    cge_stream *st = NULL;
    assert_int_equal(cge_device_create_cpu(NULL, &dev), CGE_OK);
    assert_int_equal(cge_stream_create(dev, &st), CGE_OK);
    const cge_op_def *def = cge_op_find("", "Pad", 18);
    assert_non_null(def);
    const cge_kernel_def *k = cge_op_find_kernel(def, "cpu", CGE_F32);
    assert_non_null(k);
    float x[6] = {1, 2, 3, 4, 5, 6}, y[2 * 6 + 8];
    int64_t pads[4] = {0, 1, 0, 2};
    cge_tensor in[2] = {{.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(2, 3), .data = x,
                         .bytes = sizeof x},
                        {.name = "p", .dtype = CGE_I64, .shape = CGE_SHAPE(4), .data = pads,
                         .bytes = sizeof pads}};
    cge_tensor out = {.name = "y", .dtype = CGE_F32, .shape = CGE_SHAPE(2, 6), .data = y,
                      .bytes = 12 * sizeof(float)};
    cge_kernel_ctx ctx = {.op_type = "Pad", .node_name = "pad0", .num_inputs = 2, .inputs = in,
                          .num_outputs = 1, .outputs = &out, .device = dev,
                          .num_threads = cge_device_num_threads(dev)};
    for (int i = 0; i < 20; i++)
        y[i] = -7;
    assert_int_equal(k->launch(&ctx, st), CGE_OK);
    assert_int_equal(cge_stream_synchronize(st), CGE_OK);
    const float want[12] = {0, 1, 2, 3, 0, 0, 0, 4, 5, 6, 0, 0};
    assert_memory_equal(y, want, sizeof want);
    static const int64_t bad[][4] = {{0, 1000000, 0, 2}, {1, 1, 0, 2}, {0, 1, 0, INT64_MAX},
                                     {INT64_MIN, 1, 0, 2}};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        memcpy(pads, bad[b], sizeof pads);
        for (int i = 0; i < 20; i++)
            y[i] = -7;
        assert_int_equal(k->launch(&ctx, st), CGE_OK);
        assert_int_not_equal(cge_stream_synchronize(st), CGE_OK);
        assert_int_equal(cge_last_error_layer(), CGE_LAYER_KERNEL);
        if (!strstr(cge_last_error(), "Pad 'pad0'") ||
            !strstr(cge_last_error(), "do not give the output's size"))
            fail_msg("unexpected message: %s", cge_last_error());
        for (int i = 12; i < 20; i++)
            assert_true(y[i] == -7);   /* nothing past the output */
    }
    cge_stream_destroy(st);
    cge_device_destroy(dev);
}

int main(void)
{
    const struct CMUnitTest extra[] = {
        cmocka_unit_test(test_pad_meta),
        cmocka_unit_test(test_pad_axes),
        cmocka_unit_test(test_pad_kernel_checks_pads),
    };
    return nn_fx_run_all("pad", pad_cases, PAD_NUM_CASES, extra, 3);
}
