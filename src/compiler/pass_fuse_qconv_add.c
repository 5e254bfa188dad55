/* partition/fuse_qconv_add: int8 convolutions joined with what alone reads
 * their output, so that each band of rows goes through all of it on one
 * thread: a QConv and the channels-last 1x1 QConv after it become
 * cge.fused QConvPair; a QAdd of a QConv's or a QConvPair's output (the
 * residual adds) becomes QConvAdd, or joins the QConvPair. */
#include <string.h>

#include "cge/fused_ops.h"
#include "compiler/compiler_internal.h"

/* Why: each of these ran as a step of its own over the whole tensor: one
 * more launch and wait for cge's pool per step (mobilenet_v2 int8 has 52
 * convolutions and 10 adds, most of them 10-50 us of work at 7x7 and 14x14:
 * at two threads the waits were a large part of its time), and the
 * intermediate tensor written to memory and read back (resnet50 int8: 16
 * adds, 16% of its time at one thread). Fused, a band's rows are still in
 * the core's cache when the next stage reads them. The kernels (quant.c)
 * compute each stage's bytes as the separate nodes do, so the results are
 * their bits. After layout_channels_last, so that layouts are known. */

/* Input i of a and input j of b are the same one-value constant. */
static bool same_scalar(const cge_graph *g, const cge_node *a, int32_t i, const cge_node *b,
                        int32_t j)
{
    if (cge_node_input_id(a, i) == cge_node_input_id(b, j))
        return true;
    const cge_tensor *x = cc_input_const(g, a, i), *y = cc_input_const(g, b, j);
    if (!x || !y || x->dtype != y->dtype || cge_shape_numel(&x->shape) != 1 ||
        cge_shape_numel(&y->shape) != 1 || !x->data || !y->data)
        return false;
    size_t sz = x->dtype == CGE_F32 ? 4 : 1;
    return (x->dtype == CGE_F32 || x->dtype == CGE_U8 || x->dtype == CGE_I8) &&
           !memcmp(x->data, y->data, sz);
}

/* The producer of n's input `slot`, read by n alone, not a graph output, on
 * n's engine. */
static cge_node *sole_producer(const cc_ctx *ctx, const cc_uses *u, const cge_graph *g,
                               const cge_node *n, int32_t slot)
{
    int32_t v = cge_node_input_id(n, slot);
    cge_node *p = v >= 0 ? cge_graph_value_producer(g, v) : NULL;
    if (!p || cge_node_num_outputs(p) != 1 || cge_graph_value_is_output(g, v) ||
        cc_uses_count(u, v) != 1)
        return NULL;
    int32_t pi = cge_node_index(p), ni = cge_node_index(n);
    if (pi >= ctx->node_cap || ni >= ctx->node_cap || ctx->node_engine[pi] != ctx->node_engine[ni])
        return NULL;
    return p;
}

/* Every value of ints attribute `name` is v (absent: true). */
static bool ints_all(const cge_attrs *a, const char *name, int64_t v)
{
    const int64_t *vals = NULL;
    int64_t n = cge_attrs_get_ints(a, name, &vals);
    for (int64_t i = 0; i < n; i++)
        if (vals[i] != v)
            return false;
    return true;
}

/* A channels-last QConv with constant weights that is a 1x1 convolution
 * of stride 1, without padding, of one group. */
static bool pointwise(const cge_graph *g, const cge_node *b)
{
    if (!cc_is_fused_op(b, "QConv") || cge_node_num_outputs(b) != 1 || cge_node_num_inputs(b) < 8)
        return false;
    const cge_attrs *a = cge_node_attrs_const(b);
    const char *pad = cge_attrs_get_string(a, "auto_pad", "NOTSET");
    if (!cge_attrs_get_int(a, "channels_last", 0) || !cge_attrs_get_int(a, "w_const", 0) ||
        cge_attrs_get_int(a, "group", 1) != 1 || !ints_all(a, "strides", 1) ||
        !ints_all(a, "dilations", 1) || !ints_all(a, "pads", 0) ||
        (strcmp(pad, "NOTSET") && strcmp(pad, "VALID")))
        return false;
    cge_tensor_desc w = cc_in_desc(g, b, 3);
    if (w.shape.rank < 3)
        return false;
    for (int32_t i = 2; i < w.shape.rank; i++)
        if (w.shape.dims[i] != 1)
            return false;
    return true;
}

/* Replace `gone` (two nodes) by op with inputs ins[0..ni), the attributes of
 * attrs_from (one of them) plus `extra` ints, writing out_node's output. */
typedef struct extra_int {
    const char *name;
    int64_t v, unset;
} extra_int;

static cge_status rewrite(cc_ctx *ctx, cge_graph *g, cge_node *gone[2], const cge_node *attrs_from,
                          const char *op, char (*ins)[256], int32_t ni, const cge_node *out_node,
                          const extra_int *extra, int32_t nextra)
{
    char out[256], name[256];
    snprintf(out, sizeof out, "%s", cge_node_output(out_node, 0));
    cge_tensor_desc yd = cc_out_desc(g, out_node, 0);
    const char *cins[20], *couts[1] = {out};
    for (int32_t k = 0; k < ni; k++)
        cins[k] = ins[k];
    cc_fresh_name(ctx, g, op, name, sizeof name);
    cge_node *f = NULL, *keep = gone[0] == attrs_from ? gone[0] : gone[1];
    cge_node *drop = keep == gone[0] ? gone[1] : gone[0];
    cge_status st = cge_graph_remove_node(g, drop);
    if (!st)
        st = cge_graph_add_node(g, op, CGE_DOMAIN_FUSED, name, cins, ni, couts, 1, &f);
    if (!st)
        st = cc_copy_attrs(f, attrs_from);
    if (!st)
        st = cge_graph_remove_node(g, keep);
    for (int32_t k = 0; k < nextra && !st; k++)
        if (extra[k].v != extra[k].unset)
            st = cge_node_set_int(f, extra[k].name, extra[k].v);
    if (!st)
        st = cge_graph_set_desc(g, out, yd.dtype, &yd.shape);
    if (!st)
        st = cge_graph_set_format(g, out, yd.format);
    if (!st)
        st = cc_assign_node(ctx, g, cge_node_index(f), -1);
    if (!st) {
        ctx->fused += 2;
        ctx->removed += 2;
        ctx->added++;
    }
    return st;
}

static void copy_inputs(char (*ins)[256], int32_t at, const cge_node *n, int32_t from, int32_t count)
{
    for (int32_t k = 0; k < count; k++)
        snprintf(ins[at + k], sizeof ins[at + k], "%s",
                 from + k < cge_node_num_inputs(n) ? cge_node_input(n, from + k) : "");
}

/* QConv A -> pointwise QConv B (A's output read by B alone, with the scale
 * and zero point A requantises to): QConvPair. */
static cge_status try_pair(cc_ctx *ctx, const cc_uses *u, cge_graph *g, cge_node *b, bool *made)
{
    *made = false;
    if (!pointwise(g, b))
        return CGE_OK;
    cge_node *a = sole_producer(ctx, u, g, b, 0);
    if (!a || !cc_is_fused_op(a, "QConv") || cge_node_num_inputs(a) < 8 ||
        !cge_attrs_get_int(cge_node_attrs_const(a), "channels_last", 0) ||
        !cge_attrs_get_int(cge_node_attrs_const(a), "w_const", 0) ||
        !same_scalar(g, a, 6, b, 1) || !same_scalar(g, a, 7, b, 2))
        return CGE_OK;
    char ins[20][256];
    copy_inputs(ins, 0, a, 0, 9);
    copy_inputs(ins, 9, b, 3, 6);
    for (int32_t k = 15; k < 20; k++)
        ins[k][0] = 0;
    const cge_attrs *ba = cge_node_attrs_const(b);
    extra_int ex[2] = {{"b_lo", cge_attrs_get_int(ba, "lo", -1024), -1024},
                       {"b_hi", cge_attrs_get_int(ba, "hi", 1024), 1024}};
    cge_node *gone[2] = {a, b};
    *made = true;
    return rewrite(ctx, g, gone, a, "QConvPair", ins, 20, b, ex, 2);
}

/* The QConv or addless QConvPair writing input `slot` of QAdd a, requantised
 * to the scale and zero point a dequantizes it with; the other addend of
 * the same shape, dtype class and layout. */
static cge_node *conv_addend(const cc_ctx *ctx, const cc_uses *u, const cge_graph *g,
                             const cge_node *a, int32_t slot)
{
    int32_t v = cge_node_input_id(a, slot), s = cge_node_input_id(a, slot ? 0 : 3);
    cge_node *c = sole_producer(ctx, u, g, a, slot);
    if (!c || s < 0 || s == v)
        return NULL;
    int32_t ts;
    if (cc_is_fused_op(c, "QConv") && cge_node_num_inputs(c) >= 8)
        ts = 6;
    else if (cc_is_fused_op(c, "QConvPair") && cge_node_num_inputs(c) == 20 &&
             !cge_node_input(c, 15)[0])
        ts = 12;
    else
        return NULL;
    cge_tensor_desc vd = cc_in_desc(g, a, slot), sd = cc_in_desc(g, a, slot ? 0 : 3);
    cge_tensor_desc yd = cc_out_desc(g, a, 0);
    if (!cge_shape_is_static(&vd.shape) || !cge_shape_equal(&vd.shape, &sd.shape) ||
        !cge_shape_equal(&vd.shape, &yd.shape) || vd.format != sd.format ||
        vd.format != yd.format || (sd.dtype != CGE_U8 && sd.dtype != CGE_I8))
        return NULL;
    if (!same_scalar(g, c, ts, a, slot + 1) || !same_scalar(g, c, ts + 1, a, slot + 2))
        return NULL;
    return c;
}

/* QAdd a of a convolution's output: QConvAdd, or the QConvPair's add. The
 * sum is commutative bit for bit, so the convolution's addend is A. */
static cge_status try_add(cc_ctx *ctx, const cc_uses *u, cge_graph *g, cge_node *a, bool *made)
{
    *made = false;
    if (!cc_is_fused_op(a, "QAdd") || cge_node_num_inputs(a) != 8 || cge_node_num_outputs(a) != 1)
        return CGE_OK;
    int32_t slot = 0;
    cge_node *c = conv_addend(ctx, u, g, a, 0);
    if (!c && (c = conv_addend(ctx, u, g, a, 3)))
        slot = 3;
    if (!c)
        return CGE_OK;
    bool pair = cc_is_fused_op(c, "QConvPair");
    int32_t base = pair ? 15 : 9;
    char ins[20][256];
    copy_inputs(ins, 0, c, 0, base);
    copy_inputs(ins, base, a, slot ? 0 : 3, 3);
    copy_inputs(ins, base + 3, a, 6, 2);
    const cge_attrs *aa = cge_node_attrs_const(a);
    extra_int ex[2] = {{"add_lo", cge_attrs_get_int(aa, "lo", -1024), -1024},
                       {"add_hi", cge_attrs_get_int(aa, "hi", 1024), 1024}};
    cge_node *gone[2] = {c, a};
    *made = true;
    return rewrite(ctx, g, gone, c, pair ? "QConvPair" : "QConvAdd", ins, base + 5, a, ex, 2);
}

cge_status cc_pass_fuse_qconv_add(cc_ctx *ctx, cge_graph *g)
{
    cge_status st = CGE_OK;
    int32_t made = 0;
    /* pairs first, then the adds (of pairs too): each round on fresh uses */
    for (int round = 0; round < 2 && !st; round++) {
        cc_uses u;
        if ((st = cc_uses_build(&u, g)))
            return st;
        int32_t count = cge_graph_num_nodes(g);
        for (int32_t i = 0; i < count && !st; i++) {
            cge_node *n = cge_graph_node(g, i);
            bool m = false;
            if (n && !cge_node_is_removed(n))
                st = round ? try_add(ctx, &u, g, n, &m) : try_pair(ctx, &u, g, n, &m);
            made += m;
        }
        cc_uses_free(&u);
    }
    if (!st && made)
        cc_compact_assignments(ctx, g);
    return st;
}
