/* Tests of fuse_dq_matmul: MatMul(A, DequantizeLinear(constant int8/uint8 W,
 * per-column or per-tensor scale, zero point)) becomes one com.microsoft
 * MatMulNBits (8 bits) whose results agree with the unfused graph to float
 * rounding; other forms (per-row scales, a non-constant W) stay. */
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

/* A [3, K] x DQ(W [K, N]) with `ns` scales (1 or N) and zero points. */
static cge_graph *dq_matmul(cge_dtype wt, int64_t K, int64_t N, int64_t ns, int64_t axis)
{
    cge_graph *g = ct_graph("dq_mm");
    ct_input(g, "a", CGE_SHAPE(3, K));
    uint8_t *w = malloc((size_t)(K * N)), zp[64];
    float sc[64];
    for (int64_t i = 0; i < K * N; i++)
        w[i] = (uint8_t)((i * 37 + 11) % 251);
    for (int64_t i = 0; i < ns; i++) {
        sc[i] = 0.01f + 0.002f * (float)i;
        zp[i] = (uint8_t)(wt == CGE_I8 ? (uint8_t)(int8_t)(i % 7 - 3) : (uint8_t)(120 + i % 9));
    }
    cge_shape ws = CGE_SHAPE(K, N), ss = ns == 1 ? (cge_shape)CGE_SCALAR : CGE_SHAPE(ns);
    assert_int_equal(cge_graph_add_constant(g, "w", wt, &ws, w, (size_t)(K * N)), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "s", CGE_F32, &ss, sc, sizeof(float) * (size_t)ns),
                     CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "z", wt, &ss, zp, (size_t)ns), CGE_OK);
    const char *ins[3] = {"w", "s", "z"}, *out = "wf";
    cge_node *dq = ct_node_n(g, "DequantizeLinear", "", ins, 3, &out, 1);
    assert_int_equal(cge_node_set_int(dq, "axis", axis), CGE_OK);
    ct_node(g, "MatMul", "a", "wf", "y");
    ct_output(g, "y");
    free(w);
    return g;
}

static void test_fused_forms(void **state)
{
    (void)state;
    static const struct { cge_dtype t; int64_t K, N, ns; } cases[] = {
        {CGE_I8, 200, 24, 24}, {CGE_U8, 40, 9, 9}, {CGE_I8, 16, 5, 1}, {CGE_U8, 130, 33, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cge_graph *g = dq_matmul(cases[i].t, cases[i].K, cases[i].N, cases[i].ns, 1);
        cge_compile_options o = ct_opts(CGE_OPT_FUSE);
        cge_plan *p = NULL;
        assert_int_equal(cge_compile(g, NULL, 0, &o, &p), CGE_OK);
        assert_int_equal(ct_count_op(p, "MatMulNBits"), 1);
        assert_int_equal(ct_count_op(p, "DequantizeLinear"), 0);
        cge_plan_destroy(p);
        ct_assert_equivalent(g, &o, 64, 1e-4);
        cge_graph_destroy(g);
    }
}

static void test_per_row_scales_stay(void **state)
{
    (void)state;
    /* axis 0: a scale per k, not per column: no block form of MatMulNBits */
    cge_graph *g = dq_matmul(CGE_I8, 24, 24, 24, 0);
    cge_compile_options o = ct_opts(CGE_OPT_FUSE);
    cge_plan *p = NULL;
    assert_int_equal(cge_compile(g, NULL, 0, &o, &p), CGE_OK);
    assert_int_equal(ct_count_op(p, "MatMulNBits"), 0);
    cge_plan_destroy(p);
    cge_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fused_forms),
        cmocka_unit_test(test_per_row_scales_stay),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
