/* Channels-last depthwise convolutions at level 3: with CGE_DW_NHWC=1 plans
 * run them on depthwise_nhwc.c's kernel (its run counter moves), with each
 * fused activation and a residual addend, equal to level 0 within rounding;
 * a fused activation gives the bits of the same activation run as its own
 * node after the convolution; CGE_DW_NHWC=0 and the default keep oneDNN's
 * primitive. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/fused_ops.h"
#include "ct_util.h"
#include "ops/depthwise_nhwc.h"

static float wbuf[2][128 * 49], bbuf[128];

typedef struct dw_graph_case {
    int64_t c, h, w, k, s, pb, pe; /* square window and strides; pads begin, end */
    int nsp;
    const char *act; /* Relu, Clip, HardSwish, HardSigmoid, LeakyRelu, SiLU, Add, NULL */
} dw_graph_case;

static bool kernel_expected(void)
{
    return cge_fused_conv_channels_last_available() && cge__dw_nhwc_available();
}

/* x -> depthwise Conv (+ bias) = c -> the activation = y; with `split`, c is
 * a graph output too, so that the activation stays a node of its own. */
static cge_graph *dw_graph(const dw_graph_case *t, bool split)
{
    cge_graph *g = ct_graph("dw");
    cge_shape xs = {.rank = 2 + t->nsp}, ws = {.rank = 2 + t->nsp};
    xs.dims[0] = 1;
    xs.dims[1] = ws.dims[0] = t->c;
    ws.dims[1] = 1;
    for (int i = 0; i < t->nsp; i++) {
        xs.dims[2 + i] = i == t->nsp - 1 ? t->w : t->h;
        ws.dims[2 + i] = t->k;
    }
    int64_t n = cge_shape_numel(&ws);
    assert_true(n <= 128 * 49 && t->c <= 128);
    for (int64_t i = 0; i < n; i++)
        wbuf[0][i] = (float)((i * 37) % 23) * 0.02f - 0.2f;
    for (int64_t i = 0; i < t->c; i++)
        bbuf[i] = 0.03f * (float)(i % 7) - 0.09f;
    ct_input(g, "x", xs);
    ct_const_f32(g, "w", ws, wbuf[0]);
    ct_const_f32(g, "b", CGE_SHAPE(t->c), bbuf);
    const char *ins[3] = {"x", "w", "b"}, *outs[1] = {"c"};
    cge_node *cv = ct_node_n(g, "Conv", "", ins, 3, outs, 1);
    int64_t st[2] = {t->s, t->s}, pads[4];
    for (int i = 0; i < t->nsp; i++) {
        pads[i] = t->pb;
        pads[t->nsp + i] = t->pe;
    }
    assert_int_equal(cge_node_set_ints(cv, "strides", st, t->nsp), CGE_OK);
    assert_int_equal(cge_node_set_ints(cv, "pads", pads, 2 * t->nsp), CGE_OK);
    assert_int_equal(cge_node_set_int(cv, "group", t->c), CGE_OK);
    const char *last = "c";
    if (!t->act) {
    } else if (!strcmp(t->act, "Clip")) {
        ct_const_scalar(g, "lo", 0.0f);
        ct_const_scalar(g, "hi", 0.5f);
        const char *ci[3] = {"c", "lo", "hi"}, *co[1] = {"y"};
        ct_node_n(g, "Clip", "", ci, 3, co, 1);
        last = "y";
    } else if (!strcmp(t->act, "SiLU")) {
        ct_node(g, "Sigmoid", "c", NULL, "sg");
        ct_node(g, "Mul", "c", "sg", "y");
        last = "y";
    } else if (!strcmp(t->act, "Add")) { /* stride 1, same-size pads: x's shape */
        ct_node(g, "Add", "c", "x", "y");
        last = "y";
    } else {
        ct_node(g, t->act, "c", NULL, "y");
        last = "y";
    }
    if (split && strcmp(last, "c"))
        ct_output(g, "c");
    ct_output(g, last);
    return g;
}

static const dw_graph_case cases[] = {
    {32, 14, 14, 3, 1, 1, 1, 2, "Relu"},
    {24, 15, 15, 3, 2, 1, 1, 2, "Clip"},
    {40, 12, 12, 5, 2, 2, 2, 2, "HardSwish"},
    {20, 9, 11, 5, 1, 2, 2, 2, "SiLU"},
    {48, 7, 7, 7, 1, 3, 3, 2, NULL},
    {19, 10, 13, 7, 2, 3, 3, 2, "HardSigmoid"},
    {16, 8, 8, 3, 2, 0, 1, 2, "LeakyRelu"},
    {33, 9, 9, 3, 1, 1, 1, 2, "Add"},
    {24, 1, 37, 5, 1, 2, 2, 1, "Relu"}, /* 1-D */
    {17, 1, 1, 3, 1, 1, 1, 2, "Sigmoid"},
};

static void test_plans_take_the_kernel(void **state)
{
    (void)state;
    setenv("CGE_DW_NHWC", "1", 1); /* every window the kernel takes */
    cge_compile_options o = ct_opts(CGE_OPT_LAYOUT);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cge_graph *g = dw_graph(&cases[i], false);
        int64_t before = cge__dw_nhwc_runs();
        ct_assert_equivalent(g, &o, 256, 1e-5);
        if (kernel_expected() && cge__dw_nhwc_runs() == before)
            fail_msg("case %zu did not run the channels-last depthwise kernel", i);
        cge_graph_destroy(g);
    }
    unsetenv("CGE_DW_NHWC");
}

/* By default no depthwise layer takes the kernel (oneDNN measured as fast
 * or faster): not a wide 3x3 stride-2 one, not a stride-1 one. */
static void test_default_is_onednn(void **state)
{
    (void)state;
    unsetenv("CGE_DW_NHWC");
    static const dw_graph_case left[] = {{32, 56, 57, 3, 2, 1, 1, 2, "Clip"},
                                         {32, 28, 28, 3, 1, 1, 1, 2, "Relu"}};
    cge_compile_options o = ct_opts(CGE_OPT_LAYOUT);
    for (size_t i = 0; i < sizeof left / sizeof left[0]; i++) {
        cge_graph *g = dw_graph(&left[i], false);
        int64_t before = cge__dw_nhwc_runs();
        ct_assert_equivalent(g, &o, 256, 1e-5);
        assert_int_equal(cge__dw_nhwc_runs(), before);
        cge_graph_destroy(g);
    }
}

static void run_level3(const cge_graph *g, cge_tensor *in, cge_tensor *out, int32_t no)
{
    cge_compile_options o = ct_opts(CGE_OPT_LAYOUT);
    if (ct_compile_run(g, &o, in, 1, out, no, NULL) != CGE_OK)
        fail_msg("level 3 run failed: %s", cge_last_error());
}

static void test_fused_equals_unfused(void **state)
{
    (void)state;
    setenv("CGE_DW_NHWC", "1", 1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!cases[i].act)
            continue;
        cge_graph *fused = dw_graph(&cases[i], false), *apart = dw_graph(&cases[i], true);
        cge_tensor in[1], a[1], b[2];
        ct_random_inputs(fused, 11, in);
        run_level3(fused, in, a, 1);
        run_level3(apart, in, b, 2);
        /* apart's outputs: c, then the activation's */
        assert_int_equal(a[0].bytes, b[1].bytes);
        /* the bits hold for cge's kernel; where it cannot run (no AVX2, or
         * CGE_CPU_ISA=generic) oneDNN's primitive applies its own activation
         * formula, equal within rounding */
        const bool bits = kernel_expected();
        const float *x = a[0].data, *y = b[1].data;
        for (size_t k = 0; k < a[0].bytes / 4; k++)
            if (bits ? memcmp(&x[k], &y[k], 4) != 0
                     : fabsf(x[k] - y[k]) > 1e-5f * (1.0f + fabsf(y[k])))
                fail_msg("case %zu (%s): fused %.9g, unfused %.9g at %zu", i, cases[i].act,
                         (double)x[k], (double)y[k], k);
        ct_free_outputs(in, 1);
        ct_free_outputs(a, 1);
        ct_free_outputs(b, 2);
        cge_graph_destroy(fused);
        cge_graph_destroy(apart);
    }
    unsetenv("CGE_DW_NHWC");
}

static void test_switch_keeps_onednn(void **state)
{
    (void)state;
    setenv("CGE_DW_NHWC", "0", 1);
    cge_compile_options o = ct_opts(CGE_OPT_LAYOUT);
    for (size_t i = 0; i < 3; i++) {
        cge_graph *g = dw_graph(&cases[i], false);
        int64_t before = cge__dw_nhwc_runs();
        ct_assert_equivalent(g, &o, 256, 1e-5);
        assert_int_equal(cge__dw_nhwc_runs(), before);
        cge_graph_destroy(g);
    }
    unsetenv("CGE_DW_NHWC");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plans_take_the_kernel),
        cmocka_unit_test(test_fused_equals_unfused),
        cmocka_unit_test(test_switch_keeps_onednn),
        cmocka_unit_test(test_default_is_onednn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
