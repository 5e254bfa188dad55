/* Tests of constant-B prepacking: fuse_matmul_epilogue turns a MatMul or Gemm
 * whose B is a constant into FusedMatMul with b_const, even without bias or
 * activation; its kernel packs B once at prepare and must give the bits of
 * the unfused product, and pack again when launched with another B. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/op.h"
#include "ct_util.h"

static cge_compile_options only(const char *pass)
{
    cge_compile_options o = ct_opts(CGE_OPT_NONE);
    o.enable = pass;
    return o;
}

static float *vals(int64_t n, int seed)
{
    float *d = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        d[i] = (float)((i * 37 + seed * 11) % 101) / 50.0f - 1.0f;
    return d;
}

/* b_const on the plan's FusedMatMul step(s). */
static int32_t count_b_const(const cge_plan *p)
{
    int32_t c = 0;
    for (int32_t k = 0; k < cge_plan_num_steps(p); k++) {
        const cge_node *n = cge_plan_steps(p)[k].node;
        if (!strcmp(cge_node_op_type(n), "FusedMatMul") &&
            cge_attrs_get_int(cge_node_attrs_const(n), "b_const", 0))
            c++;
    }
    return c;
}

static void test_lone_matmul_with_constant_b(void **state)
{
    float *w = vals(40 * 35, 1);
    cge_graph *g = ct_graph("mm_const");
    ct_input(g, "x", CGE_SHAPE(2, 13, 40));
    ct_const_f32(g, "w", CGE_SHAPE(40, 35), w);
    ct_node(g, "MatMul", "x", "w", "y");
    ct_output(g, "y");
    cge_compile_options o = only("fuse_matmul_epilogue");
    cge_plan *p = NULL;
    assert_int_equal(cge_compile(g, NULL, 0, &o, &p), CGE_OK);
    assert_int_equal(ct_count_op(p, "FusedMatMul"), 1);
    assert_int_equal(count_b_const(p), 1);
    cge_plan_destroy(p);
    /* Bit for bit what MatMul computes. */
    ct_assert_equivalent(g, &o, 0, 0.0);
    cge_graph_destroy(g);
    free(w);
}

static void test_lone_gemm_transb_bias(void **state)
{
    float *w = vals(21 * 30, 2), *bias = vals(21, 3);
    cge_graph *g = ct_graph("gemm_const");
    ct_input(g, "x", CGE_SHAPE(17, 30));
    ct_const_f32(g, "w", CGE_SHAPE(21, 30), w);
    ct_const_f32(g, "bias", CGE_SHAPE(21), bias);
    const char *ins[3] = {"x", "w", "bias"}, *outs[1] = {"y"};
    cge_node *n = ct_node_n(g, "Gemm", "", ins, 3, outs, 1);
    assert_int_equal(cge_node_set_int(n, "transB", 1), CGE_OK);
    ct_output(g, "y");
    cge_compile_options o = only("fuse_matmul_epilogue");
    cge_plan *p = NULL;
    assert_int_equal(cge_compile(g, NULL, 0, &o, &p), CGE_OK);
    assert_int_equal(ct_count_op(p, "Gemm"), 0);
    assert_int_equal(count_b_const(p), 1);
    cge_plan_destroy(p);
    ct_assert_equivalent(g, &o, 0, 0.0);
    cge_graph_destroy(g);
    free(w);
    free(bias);
}

static void test_variable_b_is_left_alone(void **state)
{
    cge_graph *g = ct_graph("mm_var");
    ct_input(g, "x", CGE_SHAPE(8, 16));
    ct_input(g, "w", CGE_SHAPE(16, 24));
    ct_node(g, "MatMul", "x", "w", "y");
    ct_output(g, "y");
    cge_compile_options o = only("fuse_matmul_epilogue");
    cge_plan *p = NULL;
    assert_int_equal(cge_compile(g, NULL, 0, &o, &p), CGE_OK);
    assert_int_equal(ct_count_op(p, "FusedMatMul"), 0);
    cge_plan_destroy(p);
    cge_graph_destroy(g);
}

/* The kernel itself: prepared with one B, launched with another buffer for B
 * (a later binding), it must use the B it is given. */
static void test_prepacked_kernel_follows_b(void **state)
{
    const int64_t M = 5, K = 20, N = 18;
    const cge_op_def *def = cge_op_find("cge.fused", "FusedMatMul", 0);
    assert_non_null(def);
    const cge_kernel_def *k = cge_op_find_kernel(def, "cpu", CGE_F32);
    assert_non_null(k);
    assert_non_null(k->prepare);
    cge_device *dev = NULL;
    cge_stream *s = NULL;
    cge_device_options dopt = {.num_threads = 2};
    assert_int_equal(cge_device_create_cpu(&dopt, &dev), CGE_OK);
    assert_int_equal(cge_stream_create(dev, &s), CGE_OK);
    float *a = vals(M * K, 4), *b1 = vals(K * N, 5), *b2 = vals(K * N, 6);
    float *y = malloc(sizeof(float) * (size_t)(M * N));
    cge_graph *g = ct_graph("attrs");
    cge_node *n = NULL;
    const char *ins[2] = {"a", "b"}, *outs[1] = {"y"};
    assert_int_equal(cge_graph_add_node(g, "FusedMatMul", "cge.fused", "f", ins, 2, outs, 1, &n),
                     CGE_OK);
    assert_int_equal(cge_node_set_int(n, "b_const", 1), CGE_OK);
    cge_tensor tin[2] = {
        {.name = "a", .dtype = CGE_F32, .shape = CGE_SHAPE(M, K), .data = a},
        {.name = "b", .dtype = CGE_F32, .shape = CGE_SHAPE(K, N), .data = b1},
    };
    cge_tensor tout[1] = {{.name = "y", .dtype = CGE_F32, .shape = CGE_SHAPE(M, N), .data = y}};
    cge_kernel_ctx ctx = {.op_type = "FusedMatMul", .node_name = "f", .num_inputs = 2,
                          .inputs = tin, .num_outputs = 1, .outputs = tout,
                          .attrs = cge_node_attrs_const(n), .device = dev, .num_threads = 2};
    ctx.workspace_size = k->workspace_size(&ctx);
    void *ws = malloc(ctx.workspace_size);
    ctx.workspace = ws;
    assert_int_equal(k->prepare(&ctx, &ctx.state), CGE_OK);
    assert_non_null(ctx.state);
    for (int round = 0; round < 2; round++) {
        const float *b = round ? b2 : b1;
        tin[1].data = (void *)b;
        assert_int_equal(k->launch(&ctx, s), CGE_OK);
        assert_int_equal(cge_stream_synchronize(s), CGE_OK);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double r = 0;
                for (int64_t q = 0; q < K; q++)
                    r += (double)a[i * K + q] * b[q * N + j];
                assert_true(fabs(y[i * N + j] - r) <= 1e-4 * (1 + fabs(r)));
            }
    }
    k->release(ctx.state);
    free(ws);
    cge_graph_destroy(g);
    free(a), free(b1), free(b2), free(y);
    cge_stream_destroy(s);
    cge_device_destroy(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lone_matmul_with_constant_b),
        cmocka_unit_test(test_lone_gemm_transb_bias),
        cmocka_unit_test(test_variable_b_is_left_alone),
        cmocka_unit_test(test_prepacked_kernel_follows_b),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
