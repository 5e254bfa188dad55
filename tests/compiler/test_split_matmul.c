/* Tests of split_matmul_columns: a constant-B product read only through
 * last-axis Slices/Splits becomes one product per piece. The results must be
 * bit-equal to the same compile with the pass disabled, at the exact level
 * and with the fusions, and the plan must hold no Slice/Split. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ct_util.h"

#define PASS "split_matmul_columns"

static float *weights(int64_t n, unsigned seed)
{
    float *w = malloc(sizeof(float) * (size_t)n);
    assert_non_null(w);
    uint32_t x = seed * 2654435761u + 1u;
    for (int64_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        w[i] = (float)((double)(x % 4001) / 2000.0 - 1.0);
    }
    return w;
}

static cge_plan *compile(const cge_graph *g, const cge_compile_options *o)
{
    cge_plan *p = NULL;
    if (cge_compile(g, NULL, 0, o, &p))
        fail_msg("compile: %s", cge_last_error());
    return p;
}

/* Compile at `level` with the pass and without it, run both on the same
 * random inputs and assert every output is bit-equal; returns the plan made
 * with the pass (the caller destroys it). */
static cge_plan *assert_same_bits(const cge_graph *g, cge_opt_level level)
{
    enum { MAX_T = 16 };
    int32_t ni = cge_graph_num_inputs(g), no = cge_graph_num_outputs(g);
    cge_tensor in[MAX_T], ref[MAX_T], got[MAX_T];
    ct_random_inputs(g, 11, in);
    cge_compile_options off = ct_opts(level), on = ct_opts(level);
    off.disable = PASS;
    if (level < CGE_OPT_EXACT)
        on.enable = PASS;
    cge_plan *p = NULL;
    if (ct_compile_run(g, &off, in, ni, ref, no, NULL))
        fail_msg("run without the pass: %s", cge_last_error());
    if (ct_compile_run(g, &on, in, ni, got, no, &p))
        fail_msg("run with the pass: %s", cge_last_error());
    for (int32_t o = 0; o < no; o++) {
        assert_true(cge_shape_equal(&ref[o].shape, &got[o].shape));
        assert_int_equal(ref[o].bytes, got[o].bytes);
        for (size_t k = 0; k < ref[o].bytes / 4; k++)
            if (((uint32_t *)ref[o].data)[k] != ((uint32_t *)got[o].data)[k])
                fail_msg("level %d output %d element %zu: %.9g vs %.9g", (int)level, (int)o, k,
                         (double)((float *)ref[o].data)[k], (double)((float *)got[o].data)[k]);
    }
    ct_free_outputs(in, ni);
    ct_free_outputs(ref, no);
    ct_free_outputs(got, no);
    return p;
}

static void slice_node(cge_graph *g, const char *x, int64_t lo, int64_t hi, int64_t axis,
                       const char *out)
{
    char s[64], e[64], a[64];
    snprintf(s, sizeof s, "%s_s", out);
    snprintf(e, sizeof e, "%s_e", out);
    snprintf(a, sizeof a, "%s_a", out);
    ct_const_i64(g, s, &lo, 1);
    ct_const_i64(g, e, &hi, 1);
    ct_const_i64(g, a, &axis, 1);
    const char *ins[4] = {x, s, e, a};
    ct_node_n(g, "Slice", "", ins, 4, &out, 1);
}

/* nn.MultiheadAttention's packed projection: x [rows, 1, K] times W [K, 3d]
 * plus a bias, cut by three Slices of the last axis (axes -1), each read
 * further (a Relu, a Reshape, or the graph output). Odd sizes throughout. */
static cge_graph *packed_qkv(int64_t rows, int64_t K, int64_t d, bool bias_first)
{
    float *w = weights(K * 3 * d, 3), *b = weights(3 * d, 5);
    cge_graph *g = ct_graph("packed_qkv");
    ct_input(g, "x", CGE_SHAPE(rows, 1, K));
    ct_const_f32(g, "w", CGE_SHAPE(K, 3 * d), w);
    ct_const_f32(g, "b", CGE_SHAPE(3 * d), b);
    ct_node(g, "MatMul", "x", "w", "h");
    if (bias_first)
        ct_node(g, "Add", "b", "h", "hb");
    else
        ct_node(g, "Add", "h", "b", "hb");
    slice_node(g, "hb", 0, d, -1, "q");
    slice_node(g, "hb", d, 2 * d, -1, "k");
    slice_node(g, "hb", 2 * d, 3 * d, 2, "v"); /* a positive last axis too */
    ct_node(g, "Relu", "q", NULL, "qr");
    int64_t shape[2] = {rows, d};
    ct_const_i64(g, "kshape", shape, 2);
    ct_node(g, "Reshape", "k", "kshape", "kr");
    ct_output(g, "qr");
    ct_output(g, "kr");
    ct_output(g, "v");
    free(w);
    free(b);
    return g;
}

static void test_slices_bit_equal(void **state)
{
    (void)state;
    /* rows 1 (the decode GEMV), 5 and 29 (edge tiles), K past one depth
     * slice (300 > 256), widths off multiples of 16 */
    const int64_t cases[][3] = {{1, 37, 23}, {5, 64, 17}, {29, 300, 40}, {13, 19, 2}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        cge_graph *g = packed_qkv(cases[c][0], cases[c][1], cases[c][2], c % 2 == 0);
        cge_plan *p = assert_same_bits(g, CGE_OPT_EXACT);
        assert_int_equal(ct_count_op(p, "Slice"), 0);
        assert_int_equal(ct_count_op(p, "MatMul"), 3);
        assert_int_equal(ct_count_op(p, "Add"), 3);
        cge_plan_destroy(p);
        p = assert_same_bits(g, CGE_OPT_FUSE);
        assert_int_equal(ct_count_op(p, "Slice"), 0);
        assert_int_equal(ct_count_op(p, "FusedMatMul"), 3);
        assert_int_equal(ct_count_op(p, "Add") + ct_count_op(p, "MatMul"), 0);
        cge_plan_destroy(p);
        cge_graph_destroy(g);
    }
}

/* With the fusions each piece reads its columns of the one weight in place
 * (b_cols): the plan's constants are no larger than without the pass (no
 * sliced copy of B), at the exact level they are sliced copies. */
static void test_pieces_share_the_weight(void **state)
{
    (void)state;
    cge_graph *g = packed_qkv(3, 40, 24, false);
    cge_compile_options off = ct_opts(CGE_OPT_FUSE), on = ct_opts(CGE_OPT_FUSE);
    off.disable = PASS;
    cge_plan *a = compile(g, &on), *b = compile(g, &off);
    assert_int_equal(ct_count_op(a, "FusedMatMul"), 3);
    assert_true(cge_plan_constant_bytes(a) <= cge_plan_constant_bytes(b));
    assert_true(cge_plan_constant_bytes(a) >= sizeof(float) * 40 * 72);
    cge_plan_destroy(a);
    cge_plan_destroy(b);
    cge_graph_destroy(g);
}

/* Without the pass the Slices are there: what the counts above rely on. */
static void test_disabled_keeps_slices(void **state)
{
    (void)state;
    cge_graph *g = packed_qkv(4, 16, 8, false);
    cge_compile_options o = ct_opts(CGE_OPT_FUSE);
    o.disable = PASS;
    cge_plan *p = compile(g, &o);
    assert_int_equal(ct_count_op(p, "Slice"), 3);
    assert_int_equal(ct_count_op(p, "FusedMatMul"), 1);
    cge_plan_destroy(p);
    cge_graph_destroy(g);
}

/* A Split of the last axis (uneven sizes from its split input), no bias, a
 * batch of matrices as A; and a Gemm with transB and a bias [1, N] whose
 * pieces come from a Split into equal parts (no sizes given). */
static void test_split_and_gemm(void **state)
{
    (void)state;
    float *w = weights(21 * 45, 7);
    cge_graph *g = ct_graph("split");
    ct_input(g, "x", CGE_SHAPE(3, 7, 21));
    ct_const_f32(g, "w", CGE_SHAPE(21, 45), w);
    ct_node(g, "MatMul", "x", "w", "h");
    int64_t sizes[3] = {11, 19, 15};
    ct_const_i64(g, "sizes", sizes, 3);
    const char *ins[2] = {"h", "sizes"}, *outs[3] = {"a", "b", "c"};
    cge_node *s = ct_node_n(g, "Split", "", ins, 2, outs, 3);
    assert_int_equal(cge_node_set_int(s, "axis", 2), CGE_OK);
    for (int i = 0; i < 3; i++)
        ct_output(g, outs[i]);
    cge_plan *p = assert_same_bits(g, CGE_OPT_EXACT);
    assert_int_equal(ct_count_op(p, "Split"), 0);
    assert_int_equal(ct_count_op(p, "MatMul"), 3);
    cge_plan_destroy(p);
    p = assert_same_bits(g, CGE_OPT_FUSE);
    assert_int_equal(ct_count_op(p, "Split") + ct_count_op(p, "MatMul"), 0);
    assert_int_equal(ct_count_op(p, "FusedMatMul"), 3);
    cge_plan_destroy(p);
    cge_graph_destroy(g);
    free(w);

    float *wt = weights(34 * 17, 9), *bias = weights(34, 13);
    g = ct_graph("gemm_split");
    ct_input(g, "x", CGE_SHAPE(9, 17));
    ct_const_f32(g, "w", CGE_SHAPE(34, 17), wt);
    ct_const_f32(g, "bias", CGE_SHAPE(1, 34), bias);
    const char *gin[3] = {"x", "w", "bias"}, *gout[1] = {"h"};
    cge_node *gm = ct_node_n(g, "Gemm", "", gin, 3, gout, 1);
    assert_int_equal(cge_node_set_int(gm, "transB", 1), CGE_OK);
    const char *sin[1] = {"h"}, *souts[2] = {"k", "v"};
    s = ct_node_n(g, "Split", "", sin, 1, souts, 2);
    assert_int_equal(cge_node_set_int(s, "axis", 1), CGE_OK);
    ct_output(g, "k");
    ct_output(g, "v");
    p = assert_same_bits(g, CGE_OPT_EXACT);
    assert_int_equal(ct_count_op(p, "Split"), 0);
    assert_int_equal(ct_count_op(p, "Gemm"), 2);
    cge_plan_destroy(p);
    p = assert_same_bits(g, CGE_OPT_FUSE);
    assert_int_equal(ct_count_op(p, "Split"), 0);
    assert_int_equal(ct_count_op(p, "FusedMatMul"), 2);
    cge_plan_destroy(p);
    cge_graph_destroy(g);
    free(wt);
    free(bias);
}

/* Pieces that leave columns out: only the read columns are computed. */
static void test_unread_columns(void **state)
{
    (void)state;
    float *w = weights(10 * 30, 17);
    cge_graph *g = ct_graph("partial");
    ct_input(g, "x", CGE_SHAPE(6, 10));
    ct_const_f32(g, "w", CGE_SHAPE(10, 30), w);
    ct_node(g, "MatMul", "x", "w", "h");
    slice_node(g, "h", 3, 9, 1, "p");
    slice_node(g, "h", 20, 1000, -1, "q"); /* an end past N clamps */
    ct_output(g, "p");
    ct_output(g, "q");
    cge_plan *p = assert_same_bits(g, CGE_OPT_EXACT);
    assert_int_equal(ct_count_op(p, "Slice"), 0);
    assert_int_equal(ct_count_op(p, "MatMul"), 2);
    cge_plan_destroy(p);
    cge_graph_destroy(g);
    free(w);
}

/* What must stay: a Slice of another axis, overlapping pieces, a piece of one
 * column, another reader of the product, a run-time B. */
static void test_leaves_alone(void **state)
{
    (void)state;
    float *w = weights(8 * 24, 19);
    for (int c = 0; c < 5; c++) {
        cge_graph *g = ct_graph("keep");
        ct_input(g, "x", CGE_SHAPE(4, 8));
        ct_input(g, "rb", CGE_SHAPE(8, 24));
        ct_const_f32(g, "w", CGE_SHAPE(8, 24), w);
        ct_node(g, "MatMul", "x", c == 4 ? "rb" : "w", "h");
        slice_node(g, "h", 0, c == 2 ? 1 : 12, c == 0 ? 0 : 1, "p");
        slice_node(g, "h", c == 1 ? 10 : 12, 24, 1, "q");
        ct_output(g, "p");
        ct_output(g, "q");
        if (c == 3) {
            ct_node(g, "Relu", "h", NULL, "r");
            ct_output(g, "r");
        }
        cge_compile_options o = ct_opts(CGE_OPT_EXACT);
        cge_plan *p = compile(g, &o);
        assert_int_equal(ct_count_op(p, "Slice"), 2);
        assert_int_equal(ct_count_op(p, "MatMul"), 1);
        cge_plan_destroy(p);
        cge_graph_destroy(g);
    }
    free(w);
}

/* swin's form: Y [B, N, 3C] + bias -> Reshape [B, N, 3, h, d] -> Transpose
 * [2, 0, 3, 1, 4] -> Gather(0 / 1 / 2, axis 0), here with 3 heads of 5 and
 * a Gather index written negative; and a variant gathering 2 of 3 parts on
 * axis 1 of a [3, 0, 1, 2, 4]-like permutation. */
static void test_reshape_transpose_gather(void **state)
{
    (void)state;
    for (int variant = 0; variant < 2; variant++) {
        const int64_t B = 4, N = 7, h = 3, d = 5, C = h * d;
        float *w = weights(C * 3 * C, 23), *b = weights(3 * C, 29);
        cge_graph *g = ct_graph("swin_qkv");
        ct_input(g, "x", CGE_SHAPE(B, N, C));
        ct_const_f32(g, "w", CGE_SHAPE(C, 3 * C), w);
        ct_const_f32(g, "b", CGE_SHAPE(3 * C), b);
        ct_node(g, "MatMul", "x", "w", "y0");
        ct_node(g, "Add", "y0", "b", "y");
        int64_t rs[5] = {B, N, 3, h, d};
        ct_const_i64(g, "rs", rs, 5);
        ct_node(g, "Reshape", "y", "rs", "r");
        cge_node *t = ct_node(g, "Transpose", "r", NULL, "t");
        int64_t perm0[5] = {2, 0, 3, 1, 4}, perm1[5] = {3, 2, 0, 1, 4};
        assert_int_equal(cge_node_set_ints(t, "perm", variant ? perm1 : perm0, 5), CGE_OK);
        int64_t idx[3] = {0, 1, -1};
        const char *outs[3] = {"q", "k", "v"};
        for (int i = variant; i < 3; i++) {
            char in[8];
            snprintf(in, sizeof in, "i%d", i);
            cge_shape s0 = {.rank = 0};
            assert_int_equal(cge_graph_add_constant(g, in, CGE_I64, &s0, &idx[i], sizeof(int64_t)),
                             CGE_OK);
            cge_node *ga = ct_node(g, "Gather", "t", in, outs[i]);
            assert_int_equal(cge_node_set_int(ga, "axis", variant ? 1 : 0), CGE_OK);
            ct_output(g, outs[i]);
        }
        cge_plan *p = assert_same_bits(g, CGE_OPT_EXACT);
        assert_int_equal(ct_count_op(p, "Gather"), 0);
        assert_int_equal(ct_count_op(p, "MatMul"), 3 - variant);
        assert_int_equal(ct_count_op(p, "Transpose"), 3 - variant);
        cge_plan_destroy(p);
        p = assert_same_bits(g, CGE_OPT_FUSE);
        assert_int_equal(ct_count_op(p, "Gather"), 0);
        assert_int_equal(ct_count_op(p, "FusedMatMul"), 3 - variant);
        cge_plan_destroy(p);
        cge_graph_destroy(g);
        free(w);
        free(b);
    }
}

/* b_cols outside B's columns, or reversed, is a [meta] error naming N. */
static void test_bad_window_is_meta_error(void **state)
{
    (void)state;
    float w[4 * 6] = {0};
    const int64_t bad[][2] = {{4, 2}, {0, 7}, {-1, 3}};
    for (int c = 0; c < 3; c++) {
        cge_graph *g = ct_graph("bad_cols");
        ct_input(g, "x", CGE_SHAPE(2, 4));
        ct_const_f32(g, "w", CGE_SHAPE(4, 6), w);
        const char *ins[2] = {"x", "w"}, *outs[1] = {"y"};
        cge_node *f = ct_node_n(g, "FusedMatMul", "cge.fused", ins, 2, outs, 1);
        assert_int_equal(cge_node_set_ints(f, "b_cols", bad[c], 2), CGE_OK);
        ct_output(g, "y");
        cge_compile_options o = ct_opts(CGE_OPT_NONE);
        cge_plan *p = NULL;
        assert_int_not_equal(cge_compile(g, NULL, 0, &o, &p), CGE_OK);
        assert_non_null(strstr(cge_last_error(), "[meta]"));
        assert_non_null(strstr(cge_last_error(), "b_cols"));
        cge_graph_destroy(g);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slices_bit_equal),
        cmocka_unit_test(test_disabled_keeps_slices),
        cmocka_unit_test(test_pieces_share_the_weight),
        cmocka_unit_test(test_split_and_gemm),
        cmocka_unit_test(test_unread_columns),
        cmocka_unit_test(test_leaves_alone),
        cmocka_unit_test(test_reshape_transpose_gather),
        cmocka_unit_test(test_bad_window_is_meta_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
