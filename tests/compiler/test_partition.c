/* Partition with a test engine registered through the public op API: nodes go
 * to the best engine that can run them, conversions (Copy across memory
 * spaces, Reorder across formats) appear exactly at the borders, the
 * capability query is honoured, and results match a CPU-only compile. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ct_util.h"

typedef struct scale_args {
    const float *x;
    float *y;
    int64_t n;
} scale_args;

static void scale_block(int64_t b, int64_t nb, void *p)
{
    const scale_args *a = p;
    for (int64_t i = 0; i < a->n; i++)
        a->y[i] = 2.0f * a->x[i];
}

static cge_status scale_launch(const cge_kernel_ctx *ctx, cge_stream *s)
{
    scale_args a = {ctx->inputs[0].data, ctx->outputs[0].data, cge_shape_numel(&ctx->inputs[0].shape)};
    return cge_launch(s, scale_block, 1, &a, sizeof a);
}

static cge_status same_infer(cge_infer_ctx *ctx)
{
    ctx->outputs[0].dtype = ctx->inputs[0].dtype;
    ctx->outputs[0].shape = ctx->inputs[0].shape;
    return CGE_OK;
}

static const cge_arg_def io_in[] = {{"X", 0, CGE_DT(CGE_F32), "input"}};
static const cge_arg_def io_out[] = {{"Y", 0, CGE_DT(CGE_F32), "2 X"}};
static const cge_kernel_def scale_kernels[] = {
    {.engine = "cpu", .dtypes = CGE_DT(CGE_F32), .launch = scale_launch, .inplace_input = -1},
    {.engine = "test", .dtypes = CGE_DT(CGE_F32), .launch = scale_launch, .inplace_input = -1},
};
static const cge_kernel_def only_kernels[] = {
    {.engine = "test", .dtypes = CGE_DT(CGE_F32), .launch = scale_launch, .inplace_input = -1},
};
static const cge_op_def test_ops[] = {
    {.name = "TScale", .domain = "cct", .since_version = 1, .inputs = io_in, .num_inputs = 1,
     .outputs = io_out, .num_outputs = 1, .infer = same_infer, .kernels = scale_kernels,
     .num_kernels = 2, .doc = "2x on cpu or test"},
    {.name = "TOnly", .domain = "cct", .since_version = 1, .inputs = io_in, .num_inputs = 1,
     .outputs = io_out, .num_outputs = 1, .infer = same_infer, .kernels = only_kernels,
     .num_kernels = 1, .doc = "2x on test only"},
};
static const cge_op_library test_lib = {.api_version = CGE_OP_API_VERSION, .name = "cct_engine",
                                        .ops = test_ops, .num_ops = 2};

static int setup(void **state)
{
    return cge_op_register_library(&test_lib) == CGE_OK ? 0 : -1;
}

static cge_node *op(cge_graph *g, const char *type, const char *in, const char *out)
{
    bool custom = !strncmp(type, "T", 1);
    return ct_node_n(g, type, custom ? "cct" : "", &in, 1, &out, 1);
}

/* x -> Relu -> TScale -> TScale -> Relu -> y */
static cge_graph *sandwich(cge_shape shape)
{
    cge_graph *g = ct_graph("sandwich");
    ct_input(g, "x", shape);
    op(g, "Relu", "x", "a");
    op(g, "TScale", "a", "b");
    op(g, "TScale", "b", "c");
    op(g, "Relu", "c", "y");
    ct_output(g, "y");
    return g;
}

static cge_plan *compile(const cge_graph *g, const cge_engine_desc *e, int32_t ne)
{
    cge_compile_options o = ct_opts(CGE_OPT_NONE);
    o.engines = e;
    o.num_engines = ne;
    cge_plan *p = NULL;
    if (cge_compile(g, NULL, 0, &o, &p))
        fail_msg("compile: %s", cge_last_error());
    return p;
}

static void assert_same_as_cpu(const cge_graph *g, const cge_plan *p)
{
    cge_tensor in[1], ref[1], got[1];
    ct_random_inputs(g, 5, in);
    cge_compile_options cpu = ct_opts(CGE_OPT_NONE);
    assert_int_equal(ct_compile_run(g, &cpu, in, 1, ref, 1, NULL), CGE_OK);
    assert_int_equal(ct_run_plan(p, in, 1, got, 1), CGE_OK);
    assert_int_equal(ref[0].bytes, got[0].bytes);
    assert_memory_equal(ref[0].data, got[0].data, ref[0].bytes);
    ct_free_outputs(in, 1);
    ct_free_outputs(ref, 1);
    ct_free_outputs(got, 1);
}

static void test_copies_at_borders(void **state)
{
    cge_engine_desc engines[2] = {{.name = "test", .priority = 10, .memory_space = 1},
                                  {.name = "cpu", .priority = 0}};
    cge_graph *g = sandwich(CGE_SHAPE(4, 8));
    cge_plan *p = compile(g, engines, 2);
    const cge_plan_step *s = cge_plan_steps(p);
    /* Relu, Copy, TScale, TScale, Copy, Relu: one copy into the test engine's
     * space and one out, none between the two TScale nodes. */
    assert_int_equal(cge_plan_num_steps(p), 6);
    assert_int_equal(ct_count_op(p, "Copy"), 2);
    const char *want[6] = {"Relu", "Copy", "TScale", "TScale", "Copy", "Relu"};
    for (int i = 0; i < 6; i++)
        assert_string_equal(cge_node_op_type(s[i].node), want[i]);
    assert_string_equal(s[2].engine, "test");
    assert_string_equal(s[3].engine, "test");
    assert_string_equal(s[0].engine, "cpu");
    assert_int_equal(cge_plan_values(p)[s[2].inputs[0]].memory_space, 1);
    assert_int_equal(cge_plan_values(p)[s[5].inputs[0]].memory_space, 0);
    const cge_plan_stats *st = cge_plan_get_stats(p);
    assert_int_equal(st->num_conversions, 2);
    assert_int_equal(st->num_subgraphs, 3);   /* cpu | test | cpu (before conversions) */
    assert_same_as_cpu(g, p);
    cge_plan_destroy(p);
    cge_graph_destroy(g);
}

static void test_reorders_at_borders(void **state)
{
    cge_engine_desc engines[1] = {{.name = "test", .priority = 10, .format = CGE_FORMAT_NHWC}};
    cge_graph *g = sandwich(CGE_SHAPE(1, 3, 4, 5));
    cge_plan *p = compile(g, engines, 1);   /* cpu joins as the last resort */
    assert_int_equal(ct_count_op(p, "Reorder"), 2);
    assert_int_equal(ct_count_op(p, "Copy"), 0);
    const cge_plan_step *s = cge_plan_steps(p);
    assert_string_equal(cge_node_op_type(s[1].node), "Reorder");
    assert_int_equal(cge_attrs_get_int(cge_node_attrs_const(s[1].node), "to", -1), CGE_FORMAT_NHWC);
    assert_int_equal(cge_plan_values(p)[s[2].inputs[0]].format, CGE_FORMAT_NHWC);
    assert_same_as_cpu(g, p);
    cge_plan_destroy(p);
    cge_graph_destroy(g);
}

static bool small_only(const cge_node *n, const cge_tensor_desc *in, int32_t ni,
                       const cge_tensor_desc *out, int32_t no, void *user)
{
    int *calls = user;
    (*calls)++;
    return cge_shape_numel(&in[0].shape) <= 16;
}

static void test_capability_query(void **state)
{
    int calls = 0;
    cge_engine_desc engines[2] = {
        {.name = "test", .priority = 10, .memory_space = 1, .supports = small_only, .user = &calls},
        {.name = "cpu", .priority = 0}};
    cge_graph *big = sandwich(CGE_SHAPE(4, 8));
    cge_plan *p = compile(big, engines, 2);
    assert_true(calls >= 2);
    assert_int_equal(ct_count_op(p, "Copy"), 0);     /* refused: everything on cpu */
    for (int32_t t = 0; t < cge_plan_num_steps(p); t++)
        assert_string_equal(cge_plan_steps(p)[t].engine, "cpu");
    cge_plan_destroy(p);
    cge_graph_destroy(big);
    cge_graph *small = sandwich(CGE_SHAPE(2, 8));
    p = compile(small, engines, 2);
    assert_int_equal(ct_count_op(p, "Copy"), 2);
    cge_plan_destroy(p);
    cge_graph_destroy(small);
}

static void test_output_leaves_engine(void **state)
{
    /* The graph output is made on the test engine: a Copy brings it back and
     * the output keeps its name. */
    cge_engine_desc engines[2] = {{.name = "test", .priority = 10, .memory_space = 1},
                                  {.name = "cpu", .priority = 0}};
    cge_graph *g = ct_graph("out");
    ct_input(g, "x", CGE_SHAPE(16));
    op(g, "TScale", "x", "y");
    ct_output(g, "y");
    cge_plan *p = compile(g, engines, 2);
    assert_int_equal(cge_plan_num_steps(p), 3);
    const cge_plan_step *s = cge_plan_steps(p);
    assert_string_equal(cge_node_op_type(s[2].node), "Copy");
    assert_string_equal(cge_plan_values(p)[s[2].outputs[0]].name, "y");
    assert_int_equal(cge_plan_output_value(p, 0), s[2].outputs[0]);
    assert_same_as_cpu(g, p);
    cge_plan_destroy(p);
    cge_graph_destroy(g);
}

static void test_no_engine(void **state)
{
    cge_graph *g = ct_graph("none");
    ct_input(g, "x", CGE_SHAPE(16));
    op(g, "TOnly", "x", "y");
    ct_output(g, "y");
    cge_compile_options o = ct_opts(CGE_OPT_NONE);
    cge_plan *p = NULL;
    assert_int_equal(cge_compile(g, NULL, 0, &o, &p), CGE_ERR_UNSUPPORTED);
    assert_null(p);
    assert_int_equal(cge_last_error_layer(), CGE_LAYER_ENGINE);
    assert_non_null(strstr(cge_last_error(), "TOnly"));
    cge_engine_desc engines[1] = {{.name = "test", .priority = 1}};
    o.engines = engines;
    o.num_engines = 1;
    assert_int_equal(cge_compile(g, NULL, 0, &o, &p), CGE_OK);
    assert_string_equal(cge_plan_steps(p)[0].engine, "test");
    cge_plan_destroy(p);
    cge_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copies_at_borders),
        cmocka_unit_test(test_reorders_at_borders),
        cmocka_unit_test(test_capability_query),
        cmocka_unit_test(test_output_leaves_engine),
        cmocka_unit_test(test_no_engine),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
