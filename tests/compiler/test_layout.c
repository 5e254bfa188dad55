/* layout_channels_last and channels_last_ops (level 3): chains of
 * FusedConvs, pools, concats and splits exchange NHWC activations, Reorders appear exactly where data enters or leaves a chain
 * (graph inputs, graph outputs, other ops), and the results equal level 0's
 * within rounding; what the pass must leave alone stays plain. Without
 * oneDNN the pass changes nothing. */
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

static float wbuf[4][16 * 16 * 9];

static void weights(cge_graph *g, const char *name, int which, cge_shape shape)
{
    int64_t n = cge_shape_numel(&shape);
    assert_true(n <= 16 * 16 * 9);
    for (int64_t i = 0; i < n; i++)
        wbuf[which][i] = (float)(((i + which) * 37) % 23) * 0.02f - 0.2f;
    ct_const_f32(g, name, shape, wbuf[which]);
}

static cge_node *conv(cge_graph *g, const char *x, const char *w, const char *y, int64_t k,
                      int64_t group)
{
    const char *ins[2] = {x, w}, *outs[1] = {y};
    cge_node *n = ct_node_n(g, "Conv", "", ins, 2, outs, 1);
    int64_t pads[4] = {k / 2, k / 2, k / 2, k / 2};
    assert_int_equal(cge_node_set_ints(n, "pads", pads, 4), CGE_OK);
    assert_int_equal(cge_node_set_int(n, "group", group), CGE_OK);
    return n;
}

/* x -> conv3x3+relu = a -> depthwise3x3+clip = b -> conv1x1 (+ a) + relu = y;
 * a also feeds a Softmax over channels (a plain reader) = side. */
static cge_graph *block(void)
{
    cge_graph *g = ct_graph("block");
    ct_input(g, "x", CGE_SHAPE(1, 8, 9, 9));
    weights(g, "w1", 0, CGE_SHAPE(16, 8, 3, 3));
    weights(g, "w2", 1, CGE_SHAPE(16, 1, 3, 3));
    weights(g, "w3", 2, CGE_SHAPE(16, 16, 1, 1));
    conv(g, "x", "w1", "c1", 3, 1);
    ct_node(g, "Relu", "c1", NULL, "a");
    conv(g, "a", "w2", "c2", 3, 16);
    ct_const_scalar(g, "lo", 0.0f);
    ct_const_scalar(g, "hi", 6.0f);
    const char *clip_in[3] = {"c2", "lo", "hi"}, *clip_out[1] = {"b"};
    ct_node_n(g, "Clip", "", clip_in, 3, clip_out, 1);
    conv(g, "b", "w3", "c3", 1, 1);
    ct_node(g, "Add", "c3", "a", "s");
    ct_node(g, "Relu", "s", NULL, "y");
    cge_node *sm = ct_node(g, "Softmax", "a", NULL, "side");
    assert_int_equal(cge_node_set_int(sm, "axis", 1), CGE_OK);
    ct_output(g, "y");
    ct_output(g, "side");
    return g;
}

static cge_plan *compile(const cge_graph *g, cge_opt_level level)
{
    cge_compile_options o = ct_opts(level);
    cge_plan *p = NULL;
    if (cge_compile(g, NULL, 0, &o, &p))
        fail_msg("compile: %s", cge_last_error());
    return p;
}

static int32_t channels_last_convs(const cge_plan *p)
{
    int32_t n = 0;
    for (int32_t t = 0; t < cge_plan_num_steps(p); t++) {
        const cge_node *node = cge_plan_steps(p)[t].node;
        if (!strcmp(cge_node_op_type(node), "FusedConv"))
            n += cge_attrs_get_int(cge_node_attrs_const(node), "channels_last", 0) != 0;
    }
    return n;
}

static cge_format value_format(const cge_plan *p, const char *name)
{
    int32_t v = cge_plan_find_value(p, name);
    assert_true(v >= 0);
    return cge_plan_values(p)[v].format;
}

static void test_chain_reorders_only_at_borders(void **state)
{
    cge_graph *g = block();
    cge_plan *p = compile(g, CGE_OPT_LAYOUT);
    assert_int_equal(ct_count_op(p, "FusedConv"), 3);
    int32_t cl = channels_last_convs(p);
    if (cl == 0) {
        /* no oneDNN in this build: nothing changes */
        assert_int_equal(ct_count_op(p, "Reorder"), 0);
    } else {
        assert_int_equal(cl, 3);
        /* x in; a out to the Softmax; y out. Nothing between the convs. */
        assert_int_equal(ct_count_op(p, "Reorder"), 3);
        assert_int_equal(value_format(p, "x"), CGE_FORMAT_PLAIN);
        assert_int_equal(value_format(p, "y"), CGE_FORMAT_PLAIN);
        assert_int_equal(value_format(p, "side"), CGE_FORMAT_PLAIN);
        assert_int_equal(value_format(p, "a"), CGE_FORMAT_PLAIN); /* the Softmax's copy */
        int32_t nhwc = 0;
        for (int32_t v = 0; v < cge_plan_num_values(p); v++)
            nhwc += cge_plan_values(p)[v].format == CGE_FORMAT_NHWC;
        /* x's NHWC copy, a (NHWC), b, y before its Reorder */
        assert_int_equal(nhwc, 4);
    }
    assert_int_equal(cge_plan_verify(p), CGE_OK);
    cge_plan_destroy(p);
    cge_compile_options o = ct_opts(CGE_OPT_LAYOUT);
    ct_assert_equivalent(g, &o, 64, 1e-4);
    cge_graph_destroy(g);
}

static void test_elementwise_between_convs(void **state)
{
    /* conv -> SiLU (x * sigmoid(x)) -> + residual (the first conv's output)
     * -> conv: the elementwise nodes work on NHWC bytes, so the only Reorders
     * are x in and y out; a Softmax of the SiLU needs a plain copy. */
    cge_graph *g = ct_graph("silu");
    ct_input(g, "x", CGE_SHAPE(1, 8, 9, 9));
    weights(g, "w1", 0, CGE_SHAPE(16, 8, 3, 3));
    weights(g, "w2", 1, CGE_SHAPE(16, 16, 3, 3));
    weights(g, "w3", 2, CGE_SHAPE(16, 16, 1, 1));
    conv(g, "x", "w1", "c1", 3, 1);
    conv(g, "c1", "w2", "c2", 3, 1);
    ct_node(g, "Sigmoid", "c2", NULL, "sg");
    ct_node(g, "Mul", "c2", "sg", "silu");
    ct_const_scalar(g, "half", 0.5f);
    ct_node(g, "Mul", "silu", "half", "scaled");
    ct_node(g, "Add", "scaled", "c1", "sum");
    conv(g, "sum", "w3", "y", 1, 1);
    cge_node *sm = ct_node(g, "Softmax", "silu", NULL, "side");
    assert_int_equal(cge_node_set_int(sm, "axis", 1), CGE_OK);
    ct_output(g, "y");
    ct_output(g, "side");
    cge_plan *p = compile(g, CGE_OPT_LAYOUT);
    if (channels_last_convs(p)) {
        assert_int_equal(channels_last_convs(p), 3);
        /* x in, y out, silu out to the Softmax */
        assert_int_equal(ct_count_op(p, "Reorder"), 3);
        assert_int_equal(value_format(p, "y"), CGE_FORMAT_PLAIN);
        assert_int_equal(value_format(p, "side"), CGE_FORMAT_PLAIN);
    }
    cge_plan_destroy(p);
    cge_compile_options o = ct_opts(CGE_OPT_LAYOUT);
    ct_assert_equivalent(g, &o, 64, 1e-4);
    /* The same at level 2 plus the layout pass alone, without the elementwise
     * fusion: separate Sigmoid/Mul/Add nodes join one by one. */
    o.disable = "fuse_elementwise";
    p = NULL;
    if (cge_compile(g, NULL, 0, &o, &p))
        fail_msg("compile: %s", cge_last_error());
    if (channels_last_convs(p))
        assert_int_equal(ct_count_op(p, "Reorder"), 3);
    cge_plan_destroy(p);
    ct_assert_equivalent(g, &o, 64, 1e-4);
    cge_graph_destroy(g);
}

static void test_level_two_keeps_plain(void **state)
{
    cge_graph *g = block();
    cge_plan *p = compile(g, CGE_OPT_FUSE);
    assert_int_equal(channels_last_convs(p), 0);
    assert_int_equal(ct_count_op(p, "Reorder"), 0);
    for (int32_t v = 0; v < cge_plan_num_values(p); v++)
        assert_int_equal(cge_plan_values(p)[v].format, CGE_FORMAT_PLAIN);
    cge_plan_destroy(p);
    cge_graph_destroy(g);
}

static void test_left_alone(void **state)
{
    /* W a graph input (not constant): the conv keeps plain layouts; so does
     * a float64 convolution. */
    cge_graph *g = ct_graph("w_input");
    ct_input(g, "x", CGE_SHAPE(1, 4, 6, 6));
    ct_input(g, "w", CGE_SHAPE(4, 4, 3, 3));
    conv(g, "x", "w", "c", 3, 1);
    ct_node(g, "Relu", "c", NULL, "y");
    ct_output(g, "y");
    cge_plan *p = compile(g, CGE_OPT_LAYOUT);
    assert_int_equal(channels_last_convs(p), 0);
    assert_int_equal(ct_count_op(p, "Reorder"), 0);
    cge_plan_destroy(p);
    cge_graph_destroy(g);
}

static void test_output_read_by_conv_and_graph(void **state)
{
    /* c1 is a graph output and the next conv's X: the conv reads NHWC, the
     * graph output gets a plain copy under its own name. */
    cge_graph *g = ct_graph("shared_output");
    ct_input(g, "x", CGE_SHAPE(1, 8, 7, 7));
    weights(g, "w1", 0, CGE_SHAPE(8, 8, 3, 3));
    weights(g, "w2", 1, CGE_SHAPE(8, 8, 1, 1));
    conv(g, "x", "w1", "c1", 3, 1);
    conv(g, "c1", "w2", "c2", 1, 1);
    ct_output(g, "c1");
    ct_output(g, "c2");
    cge_plan *p = compile(g, CGE_OPT_LAYOUT);
    if (channels_last_convs(p)) {
        assert_int_equal(channels_last_convs(p), 2);
        assert_int_equal(ct_count_op(p, "Reorder"), 3);
        assert_int_equal(value_format(p, "c1"), CGE_FORMAT_PLAIN);
        assert_int_equal(value_format(p, "c2"), CGE_FORMAT_PLAIN);
    }
    cge_plan_destroy(p);
    cge_compile_options o = ct_opts(CGE_OPT_LAYOUT);
    ct_assert_equivalent(g, &o, 64, 1e-4);
    cge_graph_destroy(g);
}

static cge_node *pool(cge_graph *g, const char *op, const char *x, const char *y, int64_t k,
                      int64_t s, int64_t pad)
{
    cge_node *n = ct_node(g, op, x, NULL, y);
    if (k > 0) {
        int64_t ks[2] = {k, k}, st[2] = {s, s}, pads[4] = {pad, pad, pad, pad};
        assert_int_equal(cge_node_set_ints(n, "kernel_shape", ks, 2), CGE_OK);
        assert_int_equal(cge_node_set_ints(n, "strides", st, 2), CGE_OK);
        assert_int_equal(cge_node_set_ints(n, "pads", pads, 4), CGE_OK);
    }
    return n;
}

static void test_pools_stay_channels_last(void **state)
{
    /* conv -> MaxPool 3x3/2 pad 1 -> conv -> AveragePool 3x3/2 pad 1
     * (count_include_pad, ceil_mode) -> GlobalAveragePool -> y: one Reorder
     * (x in); y has one spatial position, so none out. */
    cge_graph *g = ct_graph("pools");
    ct_input(g, "x", CGE_SHAPE(1, 8, 12, 12));
    weights(g, "w1", 0, CGE_SHAPE(16, 8, 3, 3));
    weights(g, "w2", 1, CGE_SHAPE(16, 16, 1, 1));
    conv(g, "x", "w1", "c1", 3, 1);
    pool(g, "MaxPool", "c1", "p1", 3, 2, 1);
    conv(g, "p1", "w2", "c2", 1, 1);
    cge_node *avg = pool(g, "AveragePool", "c2", "p2", 3, 2, 1);
    assert_int_equal(cge_node_set_int(avg, "count_include_pad", 1), CGE_OK);
    assert_int_equal(cge_node_set_int(avg, "ceil_mode", 1), CGE_OK);
    pool(g, "GlobalAveragePool", "p2", "y", 0, 0, 0);
    ct_output(g, "y");
    cge_plan *p = compile(g, CGE_OPT_LAYOUT);
    if (channels_last_convs(p)) {
        assert_int_equal(ct_count_op(p, "ChannelsLastPool"), 3);
        assert_int_equal(ct_count_op(p, "MaxPool") + ct_count_op(p, "AveragePool") +
                             ct_count_op(p, "GlobalAveragePool"),
                         0);
        assert_int_equal(ct_count_op(p, "Reorder"), 1);
        assert_int_equal(value_format(p, "p1"), CGE_FORMAT_NHWC);
        assert_int_equal(value_format(p, "y"), CGE_FORMAT_PLAIN);
    } else {
        assert_int_equal(ct_count_op(p, "ChannelsLastPool"), 0);
    }
    cge_plan_destroy(p);
    cge_compile_options o = ct_opts(CGE_OPT_LAYOUT);
    ct_assert_equivalent(g, &o, 64, 1e-4);
    cge_graph_destroy(g);
}

static void test_global_pools_wide_channels(void **state)
{
    /* Global pools over more channels than one register block (64) and a
     * ragged last block, two images, planes large enough (40x41) that each
     * (image, block) piece is a block of its own: max and average both equal
     * level 0. */
    cge_graph *g = ct_graph("global_pools");
    ct_input(g, "x", CGE_SHAPE(2, 8, 40, 41));
    weights(g, "w1", 0, CGE_SHAPE(150, 8, 1, 1));
    weights(g, "w2", 1, CGE_SHAPE(131, 8, 1, 1));
    conv(g, "x", "w1", "c1", 1, 1);
    conv(g, "x", "w2", "c2", 1, 1);
    pool(g, "GlobalMaxPool", "c1", "y1", 0, 0, 0);
    pool(g, "GlobalAveragePool", "c2", "y2", 0, 0, 0);
    ct_output(g, "y1");
    ct_output(g, "y2");
    cge_plan *p = compile(g, CGE_OPT_LAYOUT);
    if (channels_last_convs(p))
        assert_int_equal(ct_count_op(p, "ChannelsLastPool"), 2);
    cge_plan_destroy(p);
    cge_compile_options o = ct_opts(CGE_OPT_LAYOUT);
    ct_assert_equivalent(g, &o, 64, 1e-5);
    cge_graph_destroy(g);
}

static void test_pool_left_alone(void **state)
{
    /* a pool of a graph input, and a MaxPool whose Indices are used */
    cge_graph *g = ct_graph("pool_alone");
    ct_input(g, "x", CGE_SHAPE(1, 4, 8, 8));
    weights(g, "w1", 0, CGE_SHAPE(4, 4, 3, 3));
    pool(g, "MaxPool", "x", "p0", 2, 2, 0);
    conv(g, "x", "w1", "c1", 3, 1);
    const char *ins[1] = {"c1"}, *outs[2] = {"p1", "idx"};
    cge_node *mp = ct_node_n(g, "MaxPool", "", ins, 1, outs, 2);
    int64_t ks[2] = {2, 2}, st[2] = {2, 2};
    assert_int_equal(cge_node_set_ints(mp, "kernel_shape", ks, 2), CGE_OK);
    assert_int_equal(cge_node_set_ints(mp, "strides", st, 2), CGE_OK);
    ct_output(g, "p0");
    ct_output(g, "p1");
    ct_output(g, "idx");
    cge_plan *p = compile(g, CGE_OPT_LAYOUT);
    assert_int_equal(ct_count_op(p, "ChannelsLastPool"), 0);
    assert_int_equal(ct_count_op(p, "MaxPool"), 2);
    cge_plan_destroy(p);
    cge_compile_options o = ct_opts(CGE_OPT_LAYOUT);
    ct_assert_equivalent(g, &o, 64, 1e-4);
    cge_graph_destroy(g);
}

/* Channels-last convolutions over the shapes and attributes oneDNN sees:
 * 1-D to 3-D, batch > 1, groups, depthwise with a channel multiplier,
 * strides, dilations, asymmetric pads, auto_pad, a residual addend, a
 * sigmoid epilogue: every one equals level 0. */
static void test_conv_sweep(void **state)
{
    static float w[4096], bias[64];
    for (int i = 0; i < 4096; i++)
        w[i] = (float)((i * 29) % 31) * 0.01f - 0.15f;
    for (int i = 0; i < 64; i++)
        bias[i] = 0.02f * (float)(i % 5) - 0.04f;
    typedef struct {
        int nsp;
        int64_t n, c, m, g, size, k, s, d, pb, pe;
        const char *auto_pad, *act;
        bool residual;
    } conv_case;
    static const conv_case cases[] = {
        {2, 2, 8, 16, 1, 9, 3, 1, 1, 1, 1, NULL, "Relu", false},
        {2, 1, 16, 32, 16, 10, 3, 2, 1, 1, 1, NULL, "Relu", false}, /* depthwise x2 */
        {2, 1, 12, 12, 3, 11, 3, 1, 2, 2, 2, NULL, NULL, true},    /* groups, dilation */
        {2, 1, 8, 8, 1, 7, 3, 2, 1, 0, 2, NULL, "Sigmoid", false}, /* asymmetric pads */
        {2, 3, 4, 6, 1, 8, 5, 2, 1, 0, 0, "SAME_UPPER", NULL, false},
        {1, 2, 6, 10, 1, 17, 3, 1, 1, 1, 1, NULL, "Relu", true},
        {3, 1, 4, 8, 1, 6, 3, 1, 1, 1, 1, NULL, "Relu", false},
        {2, 1, 3, 16, 1, 12, 7, 2, 1, 3, 3, NULL, "Relu", false},  /* a stem: C = 3 */
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const conv_case *c = &cases[ci];
        cge_shape xs = {.rank = 2 + c->nsp}, ws = {.rank = 2 + c->nsp};
        xs.dims[0] = c->n;
        xs.dims[1] = c->c;
        ws.dims[0] = c->m;
        ws.dims[1] = c->c / c->g;
        for (int i = 0; i < c->nsp; i++) {
            xs.dims[2 + i] = c->size;
            ws.dims[2 + i] = c->k;
        }
        assert_true(cge_shape_numel(&ws) <= 4096 && c->m <= 64);
        cge_graph *g = ct_graph("sweep");
        ct_input(g, "x", xs);
        ct_const_f32(g, "w", ws, w);
        ct_const_f32(g, "b", CGE_SHAPE(c->m), bias);
        const char *ins[3] = {"x", "w", "b"}, *outs[1] = {"c"};
        cge_node *n = ct_node_n(g, "Conv", "", ins, 3, outs, 1);
        int64_t st[3], dl[3], pads[6];
        for (int i = 0; i < c->nsp; i++) {
            st[i] = c->s;
            dl[i] = c->d;
            pads[i] = c->pb;
            pads[c->nsp + i] = c->pe;
        }
        assert_int_equal(cge_node_set_ints(n, "strides", st, c->nsp), CGE_OK);
        assert_int_equal(cge_node_set_ints(n, "dilations", dl, c->nsp), CGE_OK);
        assert_int_equal(cge_node_set_int(n, "group", c->g), CGE_OK);
        if (c->auto_pad)
            assert_int_equal(cge_node_set_string(n, "auto_pad", c->auto_pad), CGE_OK);
        else
            assert_int_equal(cge_node_set_ints(n, "pads", pads, 2 * c->nsp), CGE_OK);
        const char *last = "c";
        if (c->residual) {
            /* a second conv of x gives an addend of c's shape */
            cge_node *n2 = ct_node_n(g, "Conv", "", ins, 3, (const char *[]){"c2"}, 1);
            assert_int_equal(cge_node_set_ints(n2, "strides", st, c->nsp), CGE_OK);
            assert_int_equal(cge_node_set_ints(n2, "dilations", dl, c->nsp), CGE_OK);
            assert_int_equal(cge_node_set_int(n2, "group", c->g), CGE_OK);
            assert_int_equal(cge_node_set_ints(n2, "pads", pads, 2 * c->nsp), CGE_OK);
            ct_node(g, "Exp", "c2", NULL, "e2");
            ct_node(g, "Add", "c", "e2", "s");
            last = "s";
        }
        if (c->act) {
            ct_node(g, c->act, last, NULL, "y");
            last = "y";
        }
        ct_output(g, last);
        cge_plan *p = compile(g, CGE_OPT_LAYOUT);
        if (!cge_fused_conv_channels_last_available())
            assert_int_equal(ct_count_op(p, "Reorder"), 0); /* no oneDNN: plain kernels */
        else if (channels_last_convs(p) != ct_count_op(p, "FusedConv"))
            fail_msg("case %zu: %d of %d convolutions channels-last", ci,
                     (int)channels_last_convs(p), (int)ct_count_op(p, "FusedConv"));
        cge_plan_destroy(p);
        cge_compile_options o = ct_opts(CGE_OPT_LAYOUT);
        ct_assert_equivalent(g, &o, 256, 1e-4);
        cge_graph_destroy(g);
    }
}

static void test_concat_split_stay_channels_last(void **state)
{
    /* A fire module (squeeze 1x1, expand 1x1 and 3x3, Concat on channels),
     * a SiLU on the concat, a Split on channels into two convs whose
     * outputs are joined along H (axis 2): no Reorder but x in and y out. */
    cge_graph *g = ct_graph("fire");
    ct_input(g, "x", CGE_SHAPE(1, 8, 9, 9));
    weights(g, "ws", 0, CGE_SHAPE(4, 8, 1, 1));
    weights(g, "we1", 1, CGE_SHAPE(6, 4, 1, 1));
    weights(g, "we3", 2, CGE_SHAPE(10, 4, 3, 3));
    weights(g, "wa", 3, CGE_SHAPE(5, 8, 3, 3));
    conv(g, "x", "ws", "sq", 1, 1);
    conv(g, "sq", "we1", "e1", 1, 1);
    conv(g, "sq", "we3", "e3", 3, 1);
    const char *cat_in[2] = {"e1", "e3"}, *cat_out[1] = {"cat"};
    cge_node *cat = ct_node_n(g, "Concat", "", cat_in, 2, cat_out, 1);
    assert_int_equal(cge_node_set_int(cat, "axis", 1), CGE_OK);
    ct_node(g, "Sigmoid", "cat", NULL, "sg");
    ct_node(g, "Mul", "cat", "sg", "silu");
    int64_t sizes[2] = {8, 8};
    ct_const_i64(g, "sizes", sizes, 2);
    const char *sp_in[2] = {"silu", "sizes"}, *sp_out[2] = {"h1", "h2"};
    cge_node *sp = ct_node_n(g, "Split", "", sp_in, 2, sp_out, 2);
    assert_int_equal(cge_node_set_int(sp, "axis", 1), CGE_OK);
    conv(g, "h1", "wa", "a1", 3, 1);
    conv(g, "h2", "wa", "a2", 3, 1);
    const char *j_in[2] = {"a1", "a2"}, *j_out[1] = {"y"};
    cge_node *j = ct_node_n(g, "Concat", "", j_in, 2, j_out, 1);
    assert_int_equal(cge_node_set_int(j, "axis", 2), CGE_OK);
    ct_output(g, "y");
    cge_plan *p = compile(g, CGE_OPT_LAYOUT);
    if (cge_fused_conv_channels_last_available()) {
        assert_int_equal(channels_last_convs(p), 5);
        assert_int_equal(ct_count_op(p, "ChannelsLastConcat"), 2);
        assert_int_equal(ct_count_op(p, "ChannelsLastSplit"), 1);
        assert_int_equal(ct_count_op(p, "Reorder"), 2);
        assert_int_equal(value_format(p, "y"), CGE_FORMAT_PLAIN);
    } else {
        assert_int_equal(ct_count_op(p, "ChannelsLastConcat"), 0);
    }
    cge_plan_destroy(p);
    cge_compile_options o = ct_opts(CGE_OPT_LAYOUT);
    ct_assert_equivalent(g, &o, 64, 1e-4);
    cge_graph_destroy(g);
}

static void test_batchnorm_on_nhwc_data(void **state)
{
    /* DenseNet's pre-activation: Concat of conv outputs -> BatchNormalization
     * -> Relu -> conv. The BatchNormalization becomes a ChannelsLastAffine
     * (same bits as the plain kernel), so nothing but x and y is reordered. */
    static float sc[16], bi[16], mu[16], va[16];
    for (int i = 0; i < 16; i++) {
        sc[i] = 0.5f + 0.1f * (float)(i % 3);
        bi[i] = 0.05f * (float)(i % 4) - 0.1f;
        mu[i] = 0.02f * (float)(i % 5);
        va[i] = 0.8f + 0.1f * (float)(i % 2);
    }
    cge_graph *g = ct_graph("densenet_layer");
    ct_input(g, "x", CGE_SHAPE(1, 8, 7, 7));
    weights(g, "w1", 0, CGE_SHAPE(8, 8, 3, 3));
    weights(g, "w2", 1, CGE_SHAPE(8, 8, 1, 1));
    weights(g, "w3", 2, CGE_SHAPE(4, 16, 1, 1));
    conv(g, "x", "w1", "c1", 3, 1);
    conv(g, "c1", "w2", "c2", 1, 1);
    const char *cat_in[2] = {"c1", "c2"}, *cat_out[1] = {"cat"};
    cge_node *cat = ct_node_n(g, "Concat", "", cat_in, 2, cat_out, 1);
    assert_int_equal(cge_node_set_int(cat, "axis", 1), CGE_OK);
    ct_const_f32(g, "sc", CGE_SHAPE(16), sc);
    ct_const_f32(g, "bi", CGE_SHAPE(16), bi);
    ct_const_f32(g, "mu", CGE_SHAPE(16), mu);
    ct_const_f32(g, "va", CGE_SHAPE(16), va);
    const char *bn_in[5] = {"cat", "sc", "bi", "mu", "va"}, *bn_out[1] = {"bn"};
    ct_node_n(g, "BatchNormalization", "", bn_in, 5, bn_out, 1);
    ct_node(g, "Relu", "bn", NULL, "r");
    conv(g, "r", "w3", "y", 1, 1);
    ct_output(g, "y");
    cge_plan *p = compile(g, CGE_OPT_LAYOUT);
    if (cge_fused_conv_channels_last_available()) {
        assert_int_equal(ct_count_op(p, "ChannelsLastAffine"), 1);
        assert_int_equal(ct_count_op(p, "BatchNormalization"), 0);
        assert_int_equal(ct_count_op(p, "Relu"), 0); /* inside the affine node */
        assert_int_equal(ct_count_op(p, "Reorder"), 2);
    }
    cge_plan_destroy(p);
    cge_compile_options o = ct_opts(CGE_OPT_LAYOUT);
    ct_assert_equivalent(g, &o, 64, 1e-4);
    cge_graph_destroy(g);
}

static void test_permute_between_convs(void **state)
{
    /* ConvNeXt's block: depthwise conv -> Transpose to channels-last ->
     * LayerNorm and a MatMul over C -> Transpose back -> per-channel scale ->
     * residual Add -> conv. The Transposes become views of the NHWC bytes,
     * the scale an affine node: only x in and y out are reordered. */
    static float ls[16], wm[16 * 16];
    for (int i = 0; i < 16; i++)
        ls[i] = 0.1f * (float)(i % 4) + 0.05f;
    for (int i = 0; i < 256; i++)
        wm[i] = (float)((i * 13) % 17) * 0.02f - 0.16f;
    cge_graph *g = ct_graph("convnext");
    ct_input(g, "x", CGE_SHAPE(1, 16, 6, 6));
    weights(g, "w0", 0, CGE_SHAPE(16, 16, 1, 1));
    weights(g, "wd", 1, CGE_SHAPE(16, 1, 3, 3));
    weights(g, "w2", 2, CGE_SHAPE(8, 16, 1, 1));
    conv(g, "x", "w0", "in", 1, 1);
    conv(g, "in", "wd", "d", 3, 16);
    int64_t to_last[4] = {0, 2, 3, 1}, to_first[4] = {0, 3, 1, 2};
    cge_node *t1 = ct_node(g, "Transpose", "d", NULL, "t1");
    assert_int_equal(cge_node_set_ints(t1, "perm", to_last, 4), CGE_OK);
    ct_const_f32(g, "wm", CGE_SHAPE(16, 16), wm);
    ct_node(g, "MatMul", "t1", "wm", "mm");
    ct_node(g, "Tanh", "mm", NULL, "th");
    cge_node *t2 = ct_node(g, "Transpose", "th", NULL, "t2");
    assert_int_equal(cge_node_set_ints(t2, "perm", to_first, 4), CGE_OK);
    ct_const_f32(g, "ls", CGE_SHAPE(16, 1, 1), ls);
    ct_node(g, "Mul", "ls", "t2", "sc");
    ct_node(g, "Add", "sc", "in", "res");
    conv(g, "res", "w2", "y", 1, 1);
    ct_output(g, "y");
    cge_plan *p = compile(g, CGE_OPT_LAYOUT);
    if (cge_fused_conv_channels_last_available()) {
        assert_int_equal(ct_count_op(p, "Transpose"), 0);
        assert_int_equal(ct_count_op(p, "LayoutView"), 2);
        assert_int_equal(ct_count_op(p, "ChannelsLastAffine"), 1);
        assert_int_equal(ct_count_op(p, "Reorder"), 2);
    }
    cge_plan_destroy(p);
    cge_compile_options o = ct_opts(CGE_OPT_LAYOUT);
    ct_assert_equivalent(g, &o, 64, 1e-4);
    cge_graph_destroy(g);
}

static void test_resize_between_convs(void **state)
{
    /* A feature-pyramid step: conv -> Resize 2x (nearest by scales; linear
     * by sizes with half_pixel; linear align_corners) -> Concat with a conv
     * of the larger map -> conv. The Resize stays NHWC with the same bits. */
    static const char *const modes[3][2] = {
        {"nearest", "asymmetric"}, {"linear", "half_pixel"}, {"linear", "align_corners"}};
    for (int m = 0; m < 3; m++) {
        cge_graph *g = ct_graph("fpn");
        ct_input(g, "x", CGE_SHAPE(1, 6, 8, 8));
        weights(g, "wa", 0, CGE_SHAPE(6, 6, 3, 3));
        weights(g, "wb", 1, CGE_SHAPE(6, 6, 3, 3));
        weights(g, "wc", 2, CGE_SHAPE(4, 12, 1, 1));
        conv(g, "x", "wa", "big", 3, 1);
        const char *ds_in[2] = {"big", "wb"}, *ds_out[1] = {"small"};
        cge_node *ds = ct_node_n(g, "Conv", "", ds_in, 2, ds_out, 1);
        int64_t st[2] = {2, 2}, pads[4] = {1, 1, 1, 1};
        assert_int_equal(cge_node_set_ints(ds, "strides", st, 2), CGE_OK);
        assert_int_equal(cge_node_set_ints(ds, "pads", pads, 4), CGE_OK);
        static const float scales[4] = {1, 1, 2, 2};
        static const int64_t sizes[4] = {1, 6, 8, 8};
        ct_const_f32(g, "scales", CGE_SHAPE(4), scales);
        ct_const_i64(g, "sizes", sizes, 4);
        const char *rz_in[4] = {"small", "", m == 1 ? "" : "scales", m == 1 ? "sizes" : ""};
        const char *rz_out[1] = {"up"};
        cge_node *rz = ct_node_n(g, "Resize", "", rz_in, 4, rz_out, 1);
        assert_int_equal(cge_node_set_string(rz, "mode", modes[m][0]), CGE_OK);
        assert_int_equal(cge_node_set_string(rz, "coordinate_transformation_mode", modes[m][1]),
                         CGE_OK);
        const char *cat_in[2] = {"up", "big"}, *cat_out[1] = {"cat"};
        cge_node *cat = ct_node_n(g, "Concat", "", cat_in, 2, cat_out, 1);
        assert_int_equal(cge_node_set_int(cat, "axis", 1), CGE_OK);
        conv(g, "cat", "wc", "y", 1, 1);
        ct_output(g, "y");
        cge_plan *p = compile(g, CGE_OPT_LAYOUT);
        if (cge_fused_conv_channels_last_available()) {
            assert_int_equal(ct_count_op(p, "ChannelsLastResize"), 1);
            assert_int_equal(ct_count_op(p, "Reorder"), 2);
        }
        cge_plan_destroy(p);
        cge_compile_options o = ct_opts(CGE_OPT_LAYOUT);
        ct_assert_equivalent(g, &o, 64, 1e-4);
        cge_graph_destroy(g);
    }
}

static void test_squeeze_excitation(void **state)
{
    /* conv -> GlobalAveragePool -> 1x1 conv + Relu -> 1x1 conv -> Sigmoid ->
     * Mul(conv output, gate) -> conv: the gate Mul stays NHWC. */
    cge_graph *g = ct_graph("se");
    ct_input(g, "x", CGE_SHAPE(2, 8, 7, 7));
    weights(g, "w0", 0, CGE_SHAPE(16, 8, 3, 3));
    weights(g, "w1", 1, CGE_SHAPE(4, 16, 1, 1));
    weights(g, "w2", 2, CGE_SHAPE(16, 4, 1, 1));
    weights(g, "w3", 3, CGE_SHAPE(8, 16, 1, 1));
    conv(g, "x", "w0", "c", 3, 1);
    ct_node(g, "GlobalAveragePool", "c", NULL, "gap");
    conv(g, "gap", "w1", "s1", 1, 1);
    ct_node(g, "Relu", "s1", NULL, "r1");
    conv(g, "r1", "w2", "s2", 1, 1);
    ct_node(g, "Sigmoid", "s2", NULL, "gate");
    ct_node(g, "Mul", "c", "gate", "se");
    conv(g, "se", "w3", "y", 1, 1);
    ct_output(g, "y");
    cge_plan *p = compile(g, CGE_OPT_LAYOUT);
    if (cge_fused_conv_channels_last_available()) {
        assert_int_equal(ct_count_op(p, "ChannelsLastScale"), 1);
        assert_int_equal(ct_count_op(p, "Mul"), 0);
        assert_int_equal(ct_count_op(p, "Reorder"), 2);
    }
    cge_plan_destroy(p);
    cge_compile_options o = ct_opts(CGE_OPT_LAYOUT);
    ct_assert_equivalent(g, &o, 64, 1e-4);
    cge_graph_destroy(g);
}

static void test_concat_with_plain_input_left_alone(void **state)
{
    /* One input of the Concat is a graph input: it stays a Concat, and
     * the conv's output is reordered for it. */
    cge_graph *g = ct_graph("mixed_concat");
    ct_input(g, "x", CGE_SHAPE(1, 4, 6, 6));
    ct_input(g, "z", CGE_SHAPE(1, 3, 6, 6));
    weights(g, "w", 0, CGE_SHAPE(5, 4, 3, 3));
    conv(g, "x", "w", "c", 3, 1);
    const char *cat_in[2] = {"c", "z"}, *cat_out[1] = {"y"};
    cge_node *cat = ct_node_n(g, "Concat", "", cat_in, 2, cat_out, 1);
    assert_int_equal(cge_node_set_int(cat, "axis", 1), CGE_OK);
    ct_output(g, "y");
    cge_plan *p = compile(g, CGE_OPT_LAYOUT);
    assert_int_equal(ct_count_op(p, "ChannelsLastConcat"), 0);
    assert_int_equal(ct_count_op(p, "Concat"), 1);
    cge_plan_destroy(p);
    cge_compile_options o = ct_opts(CGE_OPT_LAYOUT);
    ct_assert_equivalent(g, &o, 64, 1e-4);
    cge_graph_destroy(g);
}

/* x -> conv -> exported GroupNorm (Reshape [N, G, -1] -> InstanceNormalization
 * -> Reshape back) -> + per-channel bias -> Gelu -> conv -> y over `spatial`
 * (rank 3 or 4 data). The GroupNorm becomes a ChannelsLastGroupNorm, so only
 * x and y are reordered, with the same bits as the plain kernel (the same
 * plan without channels_last_ops) and level 0's results within rounding.
 * Where the Reshapes are no-ops (G = C) remove_noops leaves the
 * InstanceNormalization alone, which becomes the same node. */
static void group_norm_case(int32_t rank, int64_t C, int64_t G, const int64_t *spatial)
{
    static float sc[64], bi[64], beta[64];
    for (int i = 0; i < 64; i++) {
        sc[i] = 0.6f + 0.15f * (float)(i % 5);
        bi[i] = 0.03f * (float)(i % 7) - 0.1f;
        beta[i] = 0.02f * (float)(i % 3) - 0.02f;
    }
    cge_graph *g = ct_graph("group_norm");
    cge_shape xs = CGE_SHAPE(1, 4, 1, 1), ws1 = CGE_SHAPE(C, 4, 1, 1), ws2 = CGE_SHAPE(4, C, 1, 1);
    xs.rank = ws1.rank = ws2.rank = rank;
    for (int32_t d = 2; d < rank; d++) {
        xs.dims[d] = spatial[d - 2];
        ws1.dims[d] = ws2.dims[d] = 1;
    }
    ct_input(g, "x", xs);
    weights(g, "w1", 0, ws1);
    weights(g, "w2", 1, ws2);
    const char *c1_in[2] = {"x", "w1"}, *c1_out[1] = {"c1"};
    ct_node_n(g, "Conv", "", c1_in, 2, c1_out, 1);
    int64_t to_groups[3] = {0, G, -1}, back[CGE_MAX_RANK] = {1, C};
    for (int32_t d = 2; d < rank; d++)
        back[d] = spatial[d - 2];
    ct_const_i64(g, "to_groups", to_groups, 3);
    ct_const_i64(g, "back", back, rank);
    ct_node(g, "Reshape", "c1", "to_groups", "grouped");
    ct_const_f32(g, "sc", CGE_SHAPE(G), sc);
    ct_const_f32(g, "bi", CGE_SHAPE(G), bi);
    const char *in_in[3] = {"grouped", "sc", "bi"}, *in_out[1] = {"normed"};
    cge_node *in = ct_node_n(g, "InstanceNormalization", "", in_in, 3, in_out, 1);
    assert_int_equal(cge_node_set_float(in, "epsilon", 1e-3f), CGE_OK);
    ct_node(g, "Reshape", "normed", "back", "gn");
    cge_shape bs = CGE_SHAPE(C, 1, 1);
    bs.rank = rank - 1;
    ct_const_f32(g, "beta", bs, beta);
    ct_node(g, "Add", "gn", "beta", "shifted");
    ct_node(g, "Gelu", "shifted", NULL, "act");
    const char *c2_in[2] = {"act", "w2"}, *c2_out[1] = {"y"};
    ct_node_n(g, "Conv", "", c2_in, 2, c2_out, 1);
    ct_output(g, "y");
    cge_plan *p = compile(g, CGE_OPT_LAYOUT);
    if (cge_fused_conv_channels_last_available()) {
        assert_int_equal(ct_count_op(p, "ChannelsLastGroupNorm"), 1);
        assert_int_equal(ct_count_op(p, "InstanceNormalization"), 0);
        /* the bias Add and the Gelu run in its epilogue */
        assert_int_equal(ct_count_op(p, "ChannelsLastAffine"), 0);
        assert_int_equal(ct_count_op(p, "Gelu"), 0);
        assert_int_equal(ct_count_op(p, "ElementwiseChain"), 0);
        /* one position: the same bytes in both layouts, never reordered */
        assert_int_equal(ct_count_op(p, "Reorder"), cge_shape_numel(&xs) == 4 ? 0 : 2);
    }
    cge_plan_destroy(p);
    cge_compile_options o = ct_opts(CGE_OPT_LAYOUT);
    ct_assert_equivalent(g, &o, 64, 1e-4);
    /* bit for bit against the plain InstanceNormalization between the same
     * channels-last convolutions */
    cge_tensor in0[1], a[1], b[1];
    ct_random_inputs(g, 7, in0);
    assert_int_equal(ct_compile_run(g, &o, in0, 1, a, 1, NULL), CGE_OK);
    o.disable = "channels_last_ops";
    assert_int_equal(ct_compile_run(g, &o, in0, 1, b, 1, NULL), CGE_OK);
    assert_int_equal(cge_shape_numel(&a[0].shape), cge_shape_numel(&b[0].shape));
    assert_memory_equal(a[0].data, b[0].data, (size_t)cge_shape_numel(&a[0].shape) * 4);
    ct_free_outputs(in0, 1);
    ct_free_outputs(a, 1);
    ct_free_outputs(b, 1);
    cge_graph_destroy(g);
}

static void test_group_norm_on_nhwc_data(void **state)
{
    (void)state;
    int64_t audio[1] = {517}, prime[1] = {13}, one[2] = {1, 1}, image[2] = {7, 5};
    group_norm_case(3, 16, 4, audio);  /* wav2vec's feature encoder, smaller */
    group_norm_case(3, 12, 1, prime);  /* one group: LayerNorm over (C, L) */
    group_norm_case(3, 6, 6, prime);   /* a group per channel */
    /* a group per channel, in column blocks of 32 channels and one of 8; 600
     * positions: two whole chunks of 256 and one of 88 (80 in lanes, 8 in
     * the tail); 7 x 37: a chunk and 3 positions, all tail */
    int64_t long_audio[1] = {600}, wide[2] = {7, 37};
    group_norm_case(3, 40, 40, long_audio);
    group_norm_case(4, 33, 33, wide);
    group_norm_case(3, 40, 2, audio);  /* 20 channels a group: tiles of 16 and 4 */
    group_norm_case(4, 12, 3, image);  /* 2-D */
    group_norm_case(4, 8, 2, one);     /* one position */
}

/* Outputs 0..n-1 of g at level 3 and at level 3 without channels_last_ops
 * (the same channels-last convolutions, the op between them plain) agree
 * bit for bit. */
static void assert_same_bits_as_plain_op(const cge_graph *g, int32_t n)
{
    cge_tensor in0[4], a[4], b[4];
    int32_t ni = cge_graph_num_inputs(g);
    ct_random_inputs(g, 11, in0);
    cge_compile_options o = ct_opts(CGE_OPT_LAYOUT);
    assert_int_equal(ct_compile_run(g, &o, in0, ni, a, n, NULL), CGE_OK);
    o.disable = "channels_last_ops";
    assert_int_equal(ct_compile_run(g, &o, in0, ni, b, n, NULL), CGE_OK);
    for (int32_t k = 0; k < n; k++) {
        assert_int_equal(cge_shape_numel(&a[k].shape), cge_shape_numel(&b[k].shape));
        assert_memory_equal(a[k].data, b[k].data, (size_t)cge_shape_numel(&a[k].shape) * 4);
    }
    ct_free_outputs(in0, ni);
    ct_free_outputs(a, n);
    ct_free_outputs(b, n);
}

/* conv -> Pad (pads on H, W; value) -> AveragePool k x k stride s (own pads,
 * count_include_pad, ceil_mode) -> conv -> y: the exported
 * avg_pool2d(count_include_pad=True). */
static cge_graph *padded_pool_graph(int64_t H, int64_t W, const int64_t *pads8, float value,
                                    int64_t k, int64_t s, int64_t own_pad, int cip, int ceil)
{
    cge_graph *g = ct_graph("padded_pool");
    ct_input(g, "x", CGE_SHAPE(1, 5, H, W));
    weights(g, "w1", 0, CGE_SHAPE(7, 5, 3, 3));
    weights(g, "w2", 1, CGE_SHAPE(3, 7 + pads8[1] + pads8[5], 1, 1));
    conv(g, "x", "w1", "c1", 3, 1);
    ct_const_i64(g, "pads", pads8, 8);
    ct_const_scalar(g, "value", value);
    const char *pad_in[3] = {"c1", "pads", "value"}, *pad_out[1] = {"padded"};
    ct_node_n(g, "Pad", "", pad_in, 3, pad_out, 1);
    cge_node *avg = pool(g, "AveragePool", "padded", "p", k, s, own_pad);
    assert_int_equal(cge_node_set_int(avg, "count_include_pad", cip), CGE_OK);
    assert_int_equal(cge_node_set_int(avg, "ceil_mode", ceil), CGE_OK);
    conv(g, "p", "w2", "y", 1, 1);
    ct_output(g, "y");
    return g;
}

static void test_padded_average_pool(void **state)
{
    (void)state;
    static const int64_t sym[8] = {0, 0, 1, 1, 0, 0, 1, 1}, skew[8] = {0, 0, 0, 2, 0, 0, 1, 0},
                         chan[8] = {0, 1, 1, 1, 0, 0, 1, 1};
    struct {
        int64_t H, W;
        const int64_t *pads;
        float value;
        int64_t k, s, own;
        int cip, ceil, folds;
    } cases[] = {
        {17, 17, sym, 0.0f, 3, 1, 0, 0, 0, 1},  /* inception's branch pool */
        {7, 11, skew, 0.0f, 3, 2, 0, 0, 0, 1},  /* prime sizes, one-sided pads, stride */
        {5, 5, sym, 0.0f, 3, 1, 1, 1, 0, 1},    /* the pool pads too, counted */
        {1, 1, sym, 0.0f, 3, 1, 0, 0, 0, 1},    /* 1x1: the window is all padding but one */
        {6, 6, sym, 0.0f, 3, 1, 1, 0, 0, 0},    /* own pads not counted: not the same */
        {6, 6, sym, 0.5f, 3, 1, 0, 0, 0, 0},    /* padded by 0.5 */
        {6, 6, chan, 0.0f, 3, 1, 0, 0, 0, 0},   /* pads the channels */
        {6, 6, sym, 0.0f, 3, 2, 0, 0, 1, 0},    /* ceil_mode */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cge_graph *g = padded_pool_graph(cases[i].H, cases[i].W, cases[i].pads, cases[i].value,
                                         cases[i].k, cases[i].s, cases[i].own, cases[i].cip,
                                         cases[i].ceil);
        cge_plan *p = compile(g, CGE_OPT_LAYOUT);
        if (cge_fused_conv_channels_last_available()) {
            assert_int_equal(ct_count_op(p, "Pad"), cases[i].folds ? 0 : 1);
            assert_int_equal(ct_count_op(p, "ChannelsLastPool"), cases[i].folds);
            if (cases[i].folds) /* x in, y out, unless one position */
                assert_int_equal(ct_count_op(p, "Reorder"), cases[i].H * cases[i].W > 1 ? 2 : 0);
        }
        cge_plan_destroy(p);
        cge_compile_options o = ct_opts(CGE_OPT_LAYOUT);
        ct_assert_equivalent(g, &o, 64, 1e-5);
        /* Without its own pads the plain pool sums the same taps in floats
         * (with them, its border windows take the double path). */
        if (cases[i].folds && cases[i].own == 0)
            assert_same_bits_as_plain_op(g, 1);
        cge_graph_destroy(g);
    }
}

/* conv (C channels) -> Reshape [N, G, C/G, H, W] -> Transpose [0, 2, 1, 3, 4]
 * -> Reshape back -> Slices along the channels at `cuts` (n_cuts pieces) ->
 * a 1x1 conv of each piece -> outputs: ShuffleNet's channel shuffle and
 * chunk. */
static cge_graph *shuffle_graph(int64_t N, int64_t C, int64_t G, int64_t H, int64_t W,
                                const int64_t *cuts, int32_t n_cuts)
{
    cge_graph *g = ct_graph("shuffle");
    ct_input(g, "x", CGE_SHAPE(N, 4, H, W));
    weights(g, "w1", 0, CGE_SHAPE(C, 4, 3, 3));
    conv(g, "x", "w1", "c1", 3, 1);
    int64_t grouped[5] = {N, G, C / G, H, W}, back[4] = {N, C, H, W};
    ct_const_i64(g, "grouped_shape", grouped, 5);
    ct_const_i64(g, "back_shape", back, 4);
    ct_node(g, "Reshape", "c1", "grouped_shape", "grouped");
    cge_node *t = ct_node(g, "Transpose", "grouped", NULL, "swapped");
    int64_t perm[5] = {0, 2, 1, 3, 4};
    assert_int_equal(cge_node_set_ints(t, "perm", perm, 5), CGE_OK);
    ct_node(g, "Reshape", "swapped", "back_shape", "shuffled");
    int64_t axis = 1;
    ct_const_i64(g, "axis", &axis, 1);
    for (int32_t k = 0; k < n_cuts; k++) {
        char st[16], en[16], piece[16], wn[16], y[16];
        snprintf(st, sizeof st, "st%d", k);
        snprintf(en, sizeof en, "en%d", k);
        snprintf(piece, sizeof piece, "piece%d", k);
        snprintf(wn, sizeof wn, "wp%d", k);
        snprintf(y, sizeof y, "y%d", k);
        int64_t a = cuts[2 * k], b = cuts[2 * k + 1];
        ct_const_i64(g, st, &a, 1);
        ct_const_i64(g, en, &b, 1);
        const char *sl_in[4] = {"shuffled", st, en, "axis"}, *sl_out[1] = {piece};
        ct_node_n(g, "Slice", "", sl_in, 4, sl_out, 1);
        int64_t width = (b > C ? C : b) - a;
        weights(g, wn, 1 + k % 3, CGE_SHAPE(3, width, 1, 1));
        conv(g, piece, wn, y, 1, 1);
        ct_output(g, y);
    }
    return g;
}

static void test_channel_shuffle_and_chunk(void **state)
{
    (void)state;
    static const int64_t halves[4] = {0, 8, 8, 16}, thirds[6] = {0, 4, 4, 8, 8, 12},
                         halves6[4] = {0, 3, 3, 999}, gap[4] = {0, 6, 8, 16},
                         overlap[4] = {0, 9, 8, 16};
    struct {
        int64_t N, C, G, H, W;
        const int64_t *cuts;
        int32_t n;
        int merges;
    } cases[] = {
        {1, 16, 2, 9, 9, halves, 2, 1},   /* ShuffleNet v2: shuffle by 2, chunk in 2 */
        {2, 12, 3, 5, 7, thirds, 3, 1},   /* three groups, batch 2, prime sizes */
        {1, 6, 2, 1, 1, halves6, 2, 1},   /* one position; an end past C */
        {1, 16, 2, 4, 4, gap, 2, 0},      /* channels 6..8 unread: Slices stay */
        {1, 16, 2, 4, 4, overlap, 2, 0},  /* overlapping: Slices stay */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cge_graph *g = shuffle_graph(cases[i].N, cases[i].C, cases[i].G, cases[i].H, cases[i].W,
                                     cases[i].cuts, cases[i].n);
        cge_plan *p = compile(g, CGE_OPT_LAYOUT);
        if (cge_fused_conv_channels_last_available()) {
            assert_int_equal(ct_count_op(p, "ChannelsLastShuffle"), 1);
            assert_int_equal(ct_count_op(p, "Transpose"), 0);
            assert_int_equal(ct_count_op(p, "ChannelsLastSplit"), cases[i].merges);
            assert_int_equal(ct_count_op(p, "Slice"), cases[i].merges ? 0 : cases[i].n);
            if (cases[i].merges)
                /* x in; the outputs out (none where one position) */
                assert_int_equal(ct_count_op(p, "Reorder"),
                                 1 + (cases[i].H * cases[i].W > 1 ? cases[i].n : 0) -
                                     (cases[i].H * cases[i].W == 1));
        }
        cge_plan_destroy(p);
        cge_compile_options o = ct_opts(CGE_OPT_LAYOUT);
        ct_assert_equivalent(g, &o, 64, 1e-5);
        if (cases[i].merges)
            assert_same_bits_as_plain_op(g, cases[i].n);
        cge_graph_destroy(g);
    }
}

/* One conv -> Resize -> y graph of test_resize_writes_plain_output's; side:
 * a second conv reads y too (y then NHWC, reordered for the graph). */
typedef struct rz_case {
    const char *mode, *ctm;
    int64_t shape[4], oh, ow;
} rz_case;

static cge_graph *resize_head_graph(const rz_case *k, int side)
{
    cge_graph *g = ct_graph(side ? "head_side" : "head");
    const int64_t *s = k->shape;
    ct_input(g, "x", CGE_SHAPE(s[0], 4, s[2], s[3]));
    weights(g, "w", 0, CGE_SHAPE(s[1], 4, 1, 1));
    conv(g, "x", "w", "c", 1, 1);
    int64_t sizes[4] = {s[0], s[1], k->oh, k->ow};
    ct_const_i64(g, "sizes", sizes, 4);
    const char *rz_in[4] = {"c", "", "", "sizes"}, *rz_out[1] = {"y"};
    cge_node *rz = ct_node_n(g, "Resize", "", rz_in, 4, rz_out, 1);
    assert_int_equal(cge_node_set_string(rz, "mode", k->mode), CGE_OK);
    assert_int_equal(cge_node_set_string(rz, "coordinate_transformation_mode", k->ctm), CGE_OK);
    ct_output(g, "y");
    if (side) {
        weights(g, "w2", 1, CGE_SHAPE(3, s[1], 1, 1));
        conv(g, "y", "w2", "z", 1, 1);
        ct_output(g, "z");
    }
    return g;
}

/* conv -> Resize -> y, a graph output only: the resize writes y plain itself
 * (no Reorder after it), with the bits of the NHWC resize and a Reorder (the
 * same graph where a conv reads y too). The cases: the zoo's segmentation
 * head (21 channels, 28x28 -> 224x224, bilinear), widths that are no
 * multiple of 16 (the plain writer's vector of columns), two images of
 * bilinear (the NHWC kernels read image 0 for every image then), prime
 * channel counts, down-scaling, 16 taps (cubic), one input position, and
 * rows wider than 32 positions or with many channels (gathered, not permuted). */
static void test_resize_writes_plain_output(void **state)
{
    (void)state;
    static const rz_case cases[] = {
        {"linear", "half_pixel", {1, 21, 7, 7}, 56, 36},
        {"linear", "pytorch_half_pixel", {1, 21, 28, 28}, 224, 224},
        {"linear", "align_corners", {2, 17, 5, 3}, 19, 33},
        {"linear", "half_pixel", {1, 2, 9, 11}, 4, 5},
        {"nearest", "asymmetric", {2, 5, 3, 5}, 24, 26},
        {"cubic", "half_pixel", {1, 70, 1, 1}, 8, 6},
        {"cubic", "align_corners", {1, 3, 6, 4}, 13, 17},
        {"linear", "half_pixel", {1, 3, 4, 37}, 9, 80},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const rz_case *k = &cases[i];
        const int64_t *s = k->shape;
        for (int side = 0; side < 2; side++) {
            cge_graph *g = resize_head_graph(k, side);
            cge_plan *p = compile(g, CGE_OPT_LAYOUT);
            if (cge_fused_conv_channels_last_available()) {
                assert_int_equal(ct_count_op(p, "ChannelsLastResize"), 1);
                /* x in (unless one position); side: the NHWC y reordered for
                 * the graph, z out */
                assert_int_equal(ct_count_op(p, "Reorder"),
                                 (s[2] * s[3] > 1 ? 1 : 0) + (side ? 2 : 0));
                assert_int_equal(value_format(p, "y"), CGE_FORMAT_PLAIN);
            }
            cge_plan_destroy(p);
            cge_compile_options o = ct_opts(CGE_OPT_LAYOUT);
            ct_assert_equivalent(g, &o, 64, 1e-4);
            if (!side) {
                /* bit for bit against the graph whose y a conv reads too */
                cge_graph *g2 = resize_head_graph(k, 1);
                cge_tensor in0[1], a[1], b[2];
                ct_random_inputs(g, 7, in0);
                assert_int_equal(ct_compile_run(g, &o, in0, 1, a, 1, NULL), CGE_OK);
                assert_int_equal(ct_compile_run(g2, &o, in0, 1, b, 2, NULL), CGE_OK);
                assert_int_equal(cge_shape_numel(&a[0].shape), cge_shape_numel(&b[0].shape));
                assert_memory_equal(a[0].data, b[0].data,
                                    (size_t)cge_shape_numel(&a[0].shape) * 4);
                ct_free_outputs(in0, 1);
                ct_free_outputs(a, 1);
                ct_free_outputs(b, 2);
                cge_graph_destroy(g2);
            }
            cge_graph_destroy(g);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_reorders_only_at_borders),
        cmocka_unit_test(test_elementwise_between_convs),
        cmocka_unit_test(test_level_two_keeps_plain),
        cmocka_unit_test(test_left_alone),
        cmocka_unit_test(test_output_read_by_conv_and_graph),
        cmocka_unit_test(test_pools_stay_channels_last),
        cmocka_unit_test(test_global_pools_wide_channels),
        cmocka_unit_test(test_pool_left_alone),
        cmocka_unit_test(test_conv_sweep),
        cmocka_unit_test(test_concat_split_stay_channels_last),
        cmocka_unit_test(test_concat_with_plain_input_left_alone),
        cmocka_unit_test(test_batchnorm_on_nhwc_data),
        cmocka_unit_test(test_permute_between_convs),
        cmocka_unit_test(test_resize_between_convs),
        cmocka_unit_test(test_squeeze_excitation),
        cmocka_unit_test(test_group_norm_on_nhwc_data),
        cmocka_unit_test(test_padded_average_pool),
        cmocka_unit_test(test_channel_shuffle_and_chunk),
        cmocka_unit_test(test_resize_writes_plain_output),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
