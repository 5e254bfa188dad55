/* fuse_conv_activation: Conv + activation / residual Add becomes cge.fused
 * FusedConv where it may, stays where it must, and computes what the unfused
 * graph does (level 0 vs the pass: relative 1e-5) on every kernel path this
 * build has: oneDNN blocked (constant 3x3 W), oneDNN plain (W an input,
 * grouped), the depthwise kernel, and without oneDNN the GEMM fallback. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ct_util.h"

#define MAX_IO 8

static cge_compile_options only_pass(void)
{
    cge_compile_options o = ct_opts(CGE_OPT_NONE);
    o.enable = "fuse_conv_activation";
    return o;
}

static cge_plan *compile(const cge_graph *g, const cge_compile_options *o)
{
    cge_plan *p = NULL;
    if (cge_compile(g, NULL, 0, o, &p))
        fail_msg("compile: %s", cge_last_error());
    return p;
}

/* Run at level 0 and with `o` on the same random inputs; every output agrees
 * within rtol 1e-5 (plus 1e-6 absolute for values near 0). */
static void assert_close(const cge_graph *g, const cge_compile_options *o)
{
    int32_t ni = cge_graph_num_inputs(g), no = cge_graph_num_outputs(g);
    cge_tensor in[MAX_IO], ref[MAX_IO], got[MAX_IO];
    ct_random_inputs(g, 11, in);
    cge_compile_options none = ct_opts(CGE_OPT_NONE);
    if (ct_compile_run(g, &none, in, ni, ref, no, NULL))
        fail_msg("reference run: %s", cge_last_error());
    if (ct_compile_run(g, o, in, ni, got, no, NULL))
        fail_msg("fused run: %s", cge_last_error());
    for (int32_t k = 0; k < no; k++) {
        assert_true(cge_shape_equal(&ref[k].shape, &got[k].shape));
        const float *a = ref[k].data, *b = got[k].data;
        int64_t n = cge_shape_numel(&ref[k].shape);
        double big = 0.0;
        for (int64_t i = 0; i < n; i++)
            big = fabs((double)a[i]) > big ? fabs((double)a[i]) : big;
        assert_true(big > 0.0); /* the graph computes something */
        for (int64_t i = 0; i < n; i++) {
            double d = fabs((double)a[i] - (double)b[i]);
            double tol = 1e-5 * fmax(fabs((double)a[i]), fabs((double)b[i])) + 1e-6;
            if (!(d <= tol))
                fail_msg("output %d element %lld: %.9g vs %.9g", (int)k, (long long)i,
                         (double)a[i], (double)b[i]);
        }
    }
    ct_free_outputs(in, ni);
    ct_free_outputs(ref, no);
    ct_free_outputs(got, no);
}

static int32_t count(const cge_graph *g, const char *op)
{
    cge_compile_options o = only_pass();
    cge_plan *p = compile(g, &o);
    int32_t n = ct_count_op(p, op);
    cge_plan_destroy(p);
    return n;
}

/* x [1, C, H, H] -> Conv (M outputs, k x k, pad k/2, stride s, groups G,
 * bias) -> "y". W is a constant unless w_input. */
static cge_graph *conv_graph(int64_t C, int64_t M, int64_t H, int64_t k, int64_t s, int64_t G,
                             bool w_input)
{
    static float w[64 * 64 * 9], b[64];
    int64_t nw = M * (C / G) * k * k;
    assert_true(nw <= 64 * 64 * 9 && M <= 64);
    for (int64_t i = 0; i < nw; i++)
        w[i] = (float)((i * 37) % 23) * 0.02f - 0.22f;
    for (int64_t i = 0; i < M; i++)
        b[i] = 0.05f * (float)(i % 7) - 0.1f;
    cge_graph *g = ct_graph("conv");
    ct_input(g, "x", CGE_SHAPE(1, C, H, H));
    if (w_input)
        ct_input(g, "w", CGE_SHAPE(M, C / G, k, k));
    else
        ct_const_f32(g, "w", CGE_SHAPE(M, C / G, k, k), w);
    ct_const_f32(g, "b", CGE_SHAPE(M), b);
    const char *ins[3] = {"x", "w", "b"}, *outs[1] = {"y"};
    cge_node *n = ct_node_n(g, "Conv", "", ins, 3, outs, 1);
    int64_t pads[4] = {k / 2, k / 2, k / 2, k / 2}, st[2] = {s, s};
    assert_int_equal(cge_node_set_ints(n, "pads", pads, 4), CGE_OK);
    assert_int_equal(cge_node_set_ints(n, "strides", st, 2), CGE_OK);
    assert_int_equal(cge_node_set_int(n, "group", G), CGE_OK);
    return g;
}

static void clip06(cge_graph *g, const char *in, const char *out)
{
    ct_const_scalar(g, "lo", 0.0f);
    ct_const_scalar(g, "hi", 6.0f);
    const char *ins[3] = {in, "lo", "hi"}, *outs[1] = {out};
    ct_node_n(g, "Clip", "", ins, 3, outs, 1);
}

static void test_conv_relu(void **state)
{
    cge_graph *g = conv_graph(8, 16, 10, 3, 1, 1, false);
    ct_node(g, "Relu", "y", NULL, "r");
    ct_output(g, "r");
    assert_int_equal(count(g, "FusedConv"), 1);
    assert_int_equal(count(g, "Relu") + count(g, "Conv"), 0);
    cge_compile_options o = only_pass();
    assert_close(g, &o);
    cge_graph_destroy(g);
}

static void test_conv_clip6(void **state)
{
    /* a 1x1 conv (oneDNN's plain path, epilogue after) and a strided 3x3 */
    for (int64_t k = 1; k <= 3; k += 2) {
        cge_graph *g = conv_graph(6, 12, 9, k, k == 3 ? 2 : 1, 1, false);
        clip06(g, "y", "r");
        ct_output(g, "r");
        assert_int_equal(count(g, "FusedConv"), 1);
        assert_int_equal(count(g, "Clip"), 0);
        cge_compile_options o = only_pass();
        assert_close(g, &o);
        cge_graph_destroy(g);
    }
}

static void test_conv_residual_relu(void **state)
{
    /* Z another input; then Z the conv's own input (C == M, stride 1). */
    for (int v = 0; v < 2; v++) {
        cge_graph *g = conv_graph(16, 16, 8, 3, 1, 1, false);
        if (v == 0)
            ct_input(g, "z", CGE_SHAPE(1, 16, 8, 8));
        ct_node(g, "Add", v == 0 ? "z" : "x", "y", "s");
        ct_node(g, "Relu", "s", NULL, "r");
        ct_output(g, "r");
        assert_int_equal(count(g, "FusedConv"), 1);
        assert_int_equal(count(g, "Add") + count(g, "Relu"), 0);
        cge_compile_options o = only_pass();
        assert_close(g, &o);
        o = ct_opts(CGE_OPT_FUSE);
        assert_close(g, &o);
        cge_graph_destroy(g);
    }
}

static void test_residual_without_activation(void **state)
{
    cge_graph *g = conv_graph(8, 8, 6, 1, 1, 1, false);
    ct_input(g, "z", CGE_SHAPE(1, 8, 6, 6));
    ct_node(g, "Add", "y", "z", "s");
    ct_output(g, "s");
    assert_int_equal(count(g, "FusedConv"), 1);
    assert_int_equal(count(g, "Add"), 0);
    cge_compile_options o = only_pass();
    assert_close(g, &o);
    cge_graph_destroy(g);
}

static void test_depthwise_clip6(void **state)
{
    for (int64_t s = 1; s <= 2; s++) {
        cge_graph *g = conv_graph(16, 16, 11, 3, s, 16, false);
        clip06(g, "y", "r");
        ct_output(g, "r");
        assert_int_equal(count(g, "FusedConv"), 1);
        assert_int_equal(count(g, "Clip"), 0);
        cge_compile_options o = only_pass();
        assert_close(g, &o);
        cge_graph_destroy(g);
    }
}

static void test_other_activations(void **state)
{
    /* W an input (no w_const: oneDNN's plain layouts), grouped, 1x1 */
    const char *acts[3] = {"LeakyRelu", "Sigmoid", "Tanh"};
    for (int a = 0; a < 3; a++) {
        cge_graph *g = a == 0 ? conv_graph(8, 8, 7, 3, 1, 1, true)
                     : a == 1 ? conv_graph(8, 12, 7, 3, 1, 2, false)
                              : conv_graph(8, 12, 7, 1, 1, 1, false);
        cge_node *n = ct_node(g, acts[a], "y", NULL, "r");
        if (a == 0)
            assert_int_equal(cge_node_set_float(n, "alpha", 0.2f), CGE_OK);
        ct_output(g, "r");
        assert_int_equal(count(g, "FusedConv"), 1);
        assert_int_equal(count(g, acts[a]), 0);
        cge_compile_options o = only_pass();
        assert_close(g, &o);
        cge_graph_destroy(g);
    }
}

static void test_leaves_shared_output(void **state)
{
    /* The conv output is also a graph output: the Relu must stay, and a 1x1
     * Conv alone gains nothing from fusing. */
    cge_graph *g = conv_graph(8, 8, 6, 1, 1, 1, false);
    ct_node(g, "Relu", "y", NULL, "r");
    ct_output(g, "r");
    ct_output(g, "y");
    assert_int_equal(count(g, "Relu"), 1);
    assert_int_equal(count(g, "Conv"), 1);
    assert_int_equal(count(g, "FusedConv"), 0);
    cge_compile_options o = only_pass();
    assert_close(g, &o);
    cge_graph_destroy(g);

    /* two consumers */
    g = conv_graph(8, 8, 6, 1, 1, 1, false);
    ct_node(g, "Relu", "y", NULL, "r");
    ct_node(g, "Sigmoid", "y", NULL, "q");
    ct_output(g, "r");
    ct_output(g, "q");
    assert_int_equal(count(g, "Relu") + count(g, "Sigmoid"), 2);
    assert_int_equal(count(g, "FusedConv"), 0);
    cge_graph_destroy(g);
}

static void test_leaves_variable_clip(void **state)
{
    cge_graph *g = conv_graph(8, 8, 6, 1, 1, 1, false);
    ct_input(g, "lo", CGE_SHAPE(1));
    const char *ins[2] = {"y", "lo"}, *outs[1] = {"r"};
    ct_node_n(g, "Clip", "", ins, 2, outs, 1);
    ct_output(g, "r");
    assert_int_equal(count(g, "Clip"), 1);
    assert_int_equal(count(g, "FusedConv"), 0);
    cge_graph_destroy(g);
}

static void test_lone_constant_conv(void **state)
{
    /* A 3x3 Conv with constant W becomes a FusedConv (W kept in oneDNN's
     * layout); W as an input does not. */
    cge_graph *g = conv_graph(8, 16, 9, 3, 1, 1, false);
    ct_output(g, "y");
    assert_int_equal(count(g, "FusedConv"), 1);
    cge_compile_options o = only_pass();
    assert_close(g, &o);
    cge_graph_destroy(g);
    g = conv_graph(8, 16, 9, 3, 1, 1, true);
    ct_output(g, "y");
    assert_int_equal(count(g, "FusedConv"), 0);
    assert_int_equal(count(g, "Conv"), 1);
    cge_graph_destroy(g);
}

static void test_level_gating(void **state)
{
    /* a rewrite that may round differently: not at level 1 */
    cge_graph *g = conv_graph(8, 8, 6, 3, 1, 1, false);
    ct_node(g, "Relu", "y", NULL, "r");
    ct_output(g, "r");
    cge_compile_options o = ct_opts(CGE_OPT_EXACT);
    cge_plan *p = compile(g, &o);
    assert_int_equal(ct_count_op(p, "FusedConv"), 0);
    cge_plan_destroy(p);
    o = ct_opts(CGE_OPT_FUSE);
    p = compile(g, &o);
    assert_int_equal(ct_count_op(p, "FusedConv"), 1);
    cge_plan_destroy(p);
    cge_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_relu),
        cmocka_unit_test(test_conv_clip6),
        cmocka_unit_test(test_conv_residual_relu),
        cmocka_unit_test(test_residual_without_activation),
        cmocka_unit_test(test_depthwise_clip6),
        cmocka_unit_test(test_other_activations),
        cmocka_unit_test(test_leaves_shared_output),
        cmocka_unit_test(test_leaves_variable_clip),
        cmocka_unit_test(test_lone_constant_conv),
        cmocka_unit_test(test_level_gating),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
