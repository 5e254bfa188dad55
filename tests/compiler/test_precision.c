/* Tests of precision bf16: the precision pass rewrites MatMul / FusedMatMul
 * into MatMulBF16 and gives Conv / FusedConv precision "bf16" (nothing where
 * the CPU has no bfloat16 kernels), and the results stay within 1e-2 of the
 * largest float32 output while differing from float32's bits. */
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

static float *vals(int64_t n, int seed)
{
    float *d = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        d[i] = (float)((i * 37 + seed * 11) % 101) / 50.0f - 1.0f;
    return d;
}

static int32_t count_bf16_convs(const cge_plan *p)
{
    int32_t c = 0;
    for (int32_t k = 0; k < cge_plan_num_steps(p); k++) {
        const cge_node *n = cge_plan_steps(p)[k].node;
        if (!strcmp(cge_node_op_type(n), "FusedConv") &&
            !strcmp(cge_attrs_get_string(cge_node_attrs_const(n), "precision", "fp32"), "bf16"))
            c++;
    }
    return c;
}

/* Run g at fp32 and bf16 (level 3), return max |bf16 - fp32| / max |fp32|
 * over output 0; *bf16_steps: MatMulBF16 steps, *convs: bf16 FusedConvs. */
static double compare(const cge_graph *g, int32_t *bf16_steps, int32_t *convs)
{
    cge_tensor in[2];
    int32_t ni = cge_graph_num_inputs(g);
    ct_random_inputs(g, 5, in);
    cge_tensor o32[1], o16[1];
    cge_compile_options a = ct_opts(CGE_OPT_LAYOUT), b = a;
    b.precision = CGE_PRECISION_BF16;
    cge_plan *p32 = NULL, *p16 = NULL;
    assert_int_equal(ct_compile_run(g, &a, in, ni, o32, 1, &p32), CGE_OK);
    if (ct_compile_run(g, &b, in, ni, o16, 1, &p16))
        fail_msg("%s", cge_last_error());
    assert_int_equal(ct_count_op(p32, "MatMulBF16"), 0);
    *bf16_steps = ct_count_op(p16, "MatMulBF16");
    *convs = count_bf16_convs(p16);
    int64_t n = cge_shape_numel(&o32[0].shape);
    const float *x = o32[0].data, *y = o16[0].data;
    double scale = 0, err = 0;
    for (int64_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(x[i]));
    for (int64_t i = 0; i < n; i++)
        err = fmax(err, fabs((double)x[i] - y[i]) / scale);
    cge_plan_destroy(p32);
    cge_plan_destroy(p16);
    ct_free_outputs(o32, 1);
    ct_free_outputs(o16, 1);
    ct_free_outputs(in, ni);
    return err;
}

static void test_names(void **state)
{
    (void)state;
    assert_int_equal(cge_precision_from_name("bf16"), CGE_PRECISION_BF16);
    assert_int_equal(cge_precision_from_name("bfloat16"), CGE_PRECISION_BF16);
    assert_int_equal(cge_precision_from_name("fp32"), CGE_PRECISION_FP32);
    assert_int_equal(cge_precision_from_name("fp16"), -1);
    assert_string_equal(cge_precision_name(CGE_PRECISION_BF16), "bf16");
}

static void test_matmul_epilogue_and_batched(void **state)
{
    (void)state;
    float *w = vals(96 * 80, 1), *bias = vals(80, 2);
    cge_graph *g = ct_graph("mm_bf16");
    ct_input(g, "x", CGE_SHAPE(2, 24, 96));
    ct_const_f32(g, "w", CGE_SHAPE(96, 80), w);
    ct_const_f32(g, "b", CGE_SHAPE(80), bias);
    ct_node(g, "MatMul", "x", "w", "h");
    ct_node(g, "Add", "h", "b", "h1");
    ct_node(g, "Relu", "h1", NULL, "h2");
    /* an attention-shaped product of two activations: [2,24,80] x [2,80,24] */
    const int64_t perm[3] = {0, 2, 1};
    cge_node *t = ct_node(g, "Transpose", "h2", NULL, "h2t");
    assert_int_equal(cge_node_set_ints(t, "perm", perm, 3), CGE_OK);
    ct_node(g, "MatMul", "h2", "h2t", "y");
    ct_output(g, "y");
    int32_t steps, convs;
    double err = compare(g, &steps, &convs);
    if (cge_precision_bf16_available()) {
        assert_int_equal(steps, 2);
        assert_true(err > 0);
    } else {
        assert_int_equal(steps, 0);
    }
    assert_true(err <= 1e-2);
    cge_graph_destroy(g);
    free(w), free(bias);
}

static void test_conv(void **state)
{
    (void)state;
    float *w = vals(16 * 8 * 9, 3);
    cge_graph *g = ct_graph("conv_bf16");
    ct_input(g, "x", CGE_SHAPE(1, 8, 12, 12));
    ct_const_f32(g, "w", CGE_SHAPE(16, 8, 3, 3), w);
    cge_node *c = ct_node(g, "Conv", "x", "w", "y");
    const int64_t pads[4] = {1, 1, 1, 1};
    assert_int_equal(cge_node_set_ints(c, "pads", pads, 4), CGE_OK);
    ct_output(g, "y");
    int32_t steps, convs;
    double err = compare(g, &steps, &convs);
    assert_int_equal(convs, cge_precision_bf16_available() ? 1 : 0);
    if (cge_precision_bf16_available())
        assert_true(err > 0);
    assert_true(err <= 1e-2);
    cge_graph_destroy(g);
    free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_matmul_epilogue_and_batched),
        cmocka_unit_test(test_conv),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
