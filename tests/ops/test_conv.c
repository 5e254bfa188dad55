/* Tests of Conv and ConvTranspose: every ONNX 1.12 node test case of both and
 * numpy cases (conv_fixtures.h) for groups, depthwise, dilations, auto_pad,
 * 1-D/3-D, batches and GEMM tile remainders; meta errors by hand. */
#include "cge/runtime.h"
#include "conv_fixtures.h"

static void test_conv_meta_errors(void **state)
{
    cge_tensor_desc in[3] = {
        {.name = "", .dtype = CGE_F32, .shape = CGE_SHAPE(1, 3, 8, 8)},
        {.name = "", .dtype = CGE_F32, .shape = CGE_SHAPE(4, 2, 3, 3)},
    };
    cge_tensor_desc out[1] = {{.name = ""}};
    /* 3 channels, weight expects 2 */
    cge_status st = op_infer("Conv", in, NULL, 2, NULL, 0, out, 1);
    op_assert_error(st, "[meta]", "channels");
    /* group 2 would need 4 channels */
    cge_attr g = CGE_ATTR_I("group", 2);
    in[0].shape = CGE_SHAPE(1, 4, 8, 8);
    assert_int_equal(op_infer("Conv", in, NULL, 2, &g, 1, out, 1), CGE_OK);
    op_assert_shape(&(cge_tensor){.shape = out[0].shape}, CGE_SHAPE(1, 4, 6, 6));
    in[0].shape = CGE_SHAPE(1, 3, 8, 8);
    in[1].shape = CGE_SHAPE(4, 3, 3, 3);
    /* wrong pads length */
    const int64_t pads[2] = {1, 1};
    cge_attr pa = CGE_ATTR_INTS("pads", pads, 2);
    op_assert_error(op_infer("Conv", in, NULL, 2, &pa, 1, out, 1), "[meta]", "pads");
    /* window larger than the input */
    in[0].shape = CGE_SHAPE(1, 3, 2, 8);
    op_assert_error(op_infer("Conv", in, NULL, 2, NULL, 0, out, 1), "[meta]", "larger");
    /* dtype mismatch and a bias of the wrong length */
    in[0].shape = CGE_SHAPE(1, 3, 8, 8);
    in[1].dtype = CGE_F64;
    op_assert_error(op_infer("Conv", in, NULL, 2, NULL, 0, out, 1), "[meta]", "agree");
    in[1].dtype = CGE_F32;
    in[2] = (cge_tensor_desc){.name = "", .dtype = CGE_F32, .shape = CGE_SHAPE(5)};
    op_assert_error(op_infer("Conv", in, NULL, 3, NULL, 0, out, 1), "[meta]", "B");
    /* 4 spatial dims are refused, not mis-computed */
    in[0].shape = CGE_SHAPE(1, 3, 4, 4, 4, 4);
    in[1].shape = CGE_SHAPE(4, 3, 1, 1, 1, 1);
    op_assert_error(op_infer("Conv", in, NULL, 2, NULL, 0, out, 1), "[meta]", "rank");
    /* dynamic spatial dims stay dynamic */
    in[0].shape = CGE_SHAPE(1, 3, CGE_DIM_DYNAMIC, 8);
    in[1].shape = CGE_SHAPE(4, 3, 3, 3);
    assert_int_equal(op_infer("Conv", in, NULL, 2, NULL, 0, out, 1), CGE_OK);
    assert_int_equal(out[0].shape.dims[2], CGE_DIM_DYNAMIC);
    assert_int_equal(out[0].shape.dims[3], 6);
}

static void test_conv_empty_batch(void **state)
{
    float w[2 * 3 * 3 * 3] = {0};
    cge_tensor in[2] = {op_tensor(CGE_F32, CGE_SHAPE(0, 3, 5, 5), NULL),
                        op_tensor(CGE_F32, CGE_SHAPE(2, 3, 3, 3), w)};
    cge_tensor out[1];
    assert_int_equal(op_run("Conv", in, 2, NULL, 0, out, 1), CGE_OK);
    op_assert_shape(&out[0], CGE_SHAPE(0, 2, 3, 3));
    op_free_outputs(out, 1);
}

/* Every float32 Conv case again with the kernel launched without `prepare`:
 * the builtin im2col + GEMM and depthwise kernels, which serve when oneDNN is
 * absent or refuses a node (op_run's prepare hands other nodes to oneDNN). */
static void test_conv_builtin_path(void **state)
{
    cge_device *dev = NULL;
    cge_stream *st = NULL;
    assert_int_equal(cge_device_create_cpu(NULL, &dev), CGE_OK);
    assert_int_equal(cge_stream_create(dev, &st), CGE_OK);
    const cge_op_def *def = cge_op_find("", "Conv", 0);
    assert_non_null(def);
    const cge_kernel_def *k = cge_op_find_kernel(def, "cpu", CGE_F32);
    assert_non_null(k);
    int checked = 0;
    for (int ci = 0; ci < CONV_NUM_CASES; ci++) {
        const nn_fx_case *c = &conv_cases[ci];
        if (strcmp(c->op, "Conv") || c->inputs[0].dtype != CGE_F32)
            continue;
        cge_graph *g = NULL;
        cge_node *nd = NULL;
        const char *ins[3] = {"x", "w", "b"}, *outs[1] = {"y"};
        assert_int_equal(cge_graph_create("t", &g), CGE_OK);
        assert_int_equal(cge_graph_add_node(g, "Conv", "", "n", ins, c->num_inputs, outs, 1, &nd),
                         CGE_OK);
        for (int32_t a = 0; a < c->num_attrs; a++)
            assert_int_equal(cge_attrs_set(cge_node_attrs(nd), &c->attrs[a]), CGE_OK);
        cge_tensor in[3], out[1];
        for (int32_t i = 0; i < c->num_inputs; i++)
            in[i] = op_tensor(CGE_F32, nn_fx_shape(&c->inputs[i]), c->inputs[i].data);
        out[0] = op_tensor(CGE_F32, nn_fx_shape(&c->outputs[0]), NULL);
        out[0].data = malloc(out[0].bytes + 4);
        cge_kernel_ctx ctx = {.op_type = "Conv", .node_name = "n", .num_inputs = c->num_inputs,
                              .inputs = in, .num_outputs = 1, .outputs = out,
                              .attrs = cge_node_attrs_const(nd), .device = dev,
                              .num_threads = cge_device_num_threads(dev)};
        ctx.workspace_size = k->workspace_size(&ctx);
        ctx.workspace = malloc(ctx.workspace_size + 1);
        assert_int_equal(k->launch(&ctx, st), CGE_OK);
        assert_int_equal(cge_stream_synchronize(st), CGE_OK);
        op_assert_close(&out[0], CGE_F32, nn_fx_shape(&c->outputs[0]), c->outputs[0].data, 1e-4,
                        1e-5);
        free(ctx.workspace);
        free(out[0].data);
        cge_graph_destroy(g);
        checked++;
    }
    assert_true(checked >= 20);
    cge_stream_destroy(st);
    cge_device_destroy(dev);
}

int main(void)
{
    const struct CMUnitTest extra[] = {
        cmocka_unit_test(test_conv_meta_errors),
        cmocka_unit_test(test_conv_empty_batch),
        cmocka_unit_test(test_conv_builtin_path),
    };
    return nn_fx_run_all("conv", conv_cases, CONV_NUM_CASES, extra, 3);
}
