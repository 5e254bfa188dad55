/* optimize/channels_last_ops (level 3): ops whose data comes out of
 * convolutions that partition/layout_channels_last will make channels-last
 * become their cge.fused NHWC forms (ChannelsLast*, LayoutView). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cge/fused_ops.h"
#include "compiler/compiler_internal.h"

/* The NHWC forms keep activations NHWC through these ops instead of
 * reordering them out and back in. A float32 MaxPool (without Indices), AveragePool,
 * GlobalMaxPool or GlobalAveragePool becomes a cge.fused ChannelsLastPool (an
 * AveragePool of a zero Pad too, the Pad's amounts its own, same bits), a
 * Concat of such data a ChannelsLastConcat, a Split of it a ChannelsLastSplit,
 * an inference BatchNormalization with constant parameters a
 * ChannelsLastAffine (its factors folded now, as the BatchNormalization kernel
 * computes them: same bits), a Mul or Add by a per-channel constant a
 * ChannelsLastAffine too (same bits: a float product or sum rounded once
 * either way), a Transpose by [0,2,...,1] of such data a LayoutView (the plain
 * transposed tensor has the same bytes), a Transpose by [0,r-1,1,...] of a
 * rank-4/5 tensor a LayoutView giving NHWC data (at worst a Reorder replaces
 * the Transpose's copy), a Resize that keeps the channels a ChannelsLastResize
 * (same bits), and a Mul by a computed per-image, per-channel gate a
 * ChannelsLastScale, and the exported GroupNorm (Reshape to [N, G, ...] ->
 * InstanceNormalization with constant [G] scale and bias -> Reshape back) a
 * ChannelsLastGroupNorm (same bits); a Relu that alone reads an affine node
 * runs inside it.
 * "Such data" is the output of a FusedConv with constant W, of an op converted
 * here, or of an elementwise node whose full-size inputs are all such data
 * (the layout pass lets those work on NHWC bytes). Needs oneDNN (the
 * convolutions' channels-last kernels); without it nothing changes. */

static const char *pool_mode(const cge_node *n)
{
    static const char *const ops[][2] = {{"MaxPool", "max"},
                                         {"AveragePool", "avg"},
                                         {"GlobalMaxPool", "global_max"},
                                         {"GlobalAveragePool", "global_avg"}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (cc_is_op(n, ops[i][0]))
            return ops[i][1];
    return NULL;
}

/* Rank 3 to 5 with the channel dim known and every other dim known or a
 * named symbol (a symbolic plan's batch or image size: the kernels get
 * concrete shapes per signature), never an anonymous -1. */
static bool sized_rank_3_to_5(const cge_graph *g, int32_t id)
{
    cge_tensor_desc d;
    return id >= 0 && !cge_graph_value_desc(g, id, &d) && d.shape.rank >= 3 &&
           d.shape.rank <= 5 && d.shape.dims[1] >= 0 && cge_shape_same(&d.shape, &d.shape);
}

/* Whether value x will be NHWC data (see the file comment); `depth` bounds
 * the walk back through elementwise nodes. */
static bool feeds_nhwc(const cge_graph *g, int32_t x, int depth)
{
    const cge_node *p = cge_graph_value_producer(g, x);
    if (!p || !sized_rank_3_to_5(g, x))
        return false;
    if (cc_is_fused_op(p, "ChannelsLastPool") || cc_is_fused_op(p, "ChannelsLastConcat") ||
        cc_is_fused_op(p, "ChannelsLastSplit") || cc_is_fused_op(p, "ChannelsLastAffine") ||
        cc_is_fused_op(p, "ChannelsLastResize") || cc_is_fused_op(p, "ChannelsLastScale") ||
        cc_is_fused_op(p, "ChannelsLastGroupNorm") || cc_is_fused_op(p, "ChannelsLastShuffle"))
        return true;
    if (cc_is_fused_op(p, "LayoutView"))
        return cge_attrs_get_int(cge_node_attrs_const(p), "to", 0) == CGE_FORMAT_NHWC;
    if (cc_is_fused_op(p, "FusedConv"))
        return cge_attrs_get_int(cge_node_attrs_const(p), "w_const", 0) != 0 &&
               cc_in_desc(g, p, 0).dtype == CGE_F32;
    if (depth <= 0 || !cc_is_elementwise(p))
        return false;
    cge_tensor_desc xd;
    cge_graph_value_desc(g, x, &xd);
    int32_t full = 0;
    for (int32_t k = 0; k < cge_node_num_inputs(p); k++) {
        int32_t v = cge_node_input_id(p, k);
        cge_tensor_desc d;
        if (v < 0 || cge_graph_value_desc(g, v, &d) || cge_shape_numel(&d.shape) == 1)
            continue;
        if (!cge_shape_same(&d.shape, &xd.shape) || !feeds_nhwc(g, v, depth - 1))
            return false;
        full++;
    }
    return full > 0;
}

static bool pool_eligible(const cge_graph *g, const cge_node *n)
{
    if (!pool_mode(n) || cge_node_num_inputs(n) != 1)
        return false;
    /* MaxPool's Indices are positions in the NCHW tensor */
    for (int32_t k = 1; k < cge_node_num_outputs(n); k++)
        if (cge_node_output_id(n, k) >= 0)
            return false;
    int32_t x = cge_node_input_id(n, 0), y = cge_node_output_id(n, 0);
    return x >= 0 && cc_in_desc(g, n, 0).dtype == CGE_F32 && sized_rank_3_to_5(g, y) &&
           feeds_nhwc(g, x, 8);
}

static bool all_known(const cge_shape *s)
{
    for (int32_t i = 0; i < s->rank; i++)
        if (s->dims[i] < 0)
            return false;
    return true;
}

/* An AveragePool (explicit pads, ceil_mode 0; its own pads 0 or already
 * counted) of a constant Pad by zeros on the spatial axes only, of NHWC data:
 * the exported avg_pool2d(padding, count_include_pad=True) (inception's
 * branches). It becomes a ChannelsLastPool over the Pad's input with the
 * pads added and count_include_pad 1: the window sums the same taps in the
 * same order (the Pad's zeros added nothing) and divides by the same
 * count, so the bits are the unfused pair's on the NHWC kernel. *x is the
 * Pad's input, pads the pool's 2 * spatial pads. */
static bool padded_pool_eligible(const cge_graph *g, const cge_node *n, int32_t *x,
                                 int64_t *pads, int32_t *npads)
{
    if (!cc_is_op(n, "AveragePool") || cge_node_num_inputs(n) != 1 ||
        cge_node_num_outputs(n) != 1)
        return false;
    const cge_attrs *a = cge_node_attrs_const(n);
    const cge_node *pd = cge_graph_value_producer(g, cge_node_input_id(n, 0));
    if (!pd || cge_node_is_removed(pd) || !cc_is_op(pd, "Pad") ||
        cge_attrs_get_int(a, "ceil_mode", 0) != 0 ||
        strcmp(cge_attrs_get_string(a, "auto_pad", "NOTSET"), "NOTSET") ||
        strcmp(cge_attrs_get_string(cge_node_attrs_const(pd), "mode", "constant"), "constant"))
        return false;
    int32_t ni = cge_node_num_inputs(pd);
    *x = cge_node_input_id(pd, 0);
    cge_tensor_desc xd;
    if (*x < 0 || cge_graph_value_desc(g, *x, &xd) || xd.dtype != CGE_F32 ||
        !sized_rank_3_to_5(g, *x) || !sized_rank_3_to_5(g, cge_node_output_id(n, 0)) ||
        (ni > 3 && cge_node_input_id(pd, 3) >= 0))
        return false;
    const cge_tensor *pv = cc_input_const(g, pd, 1);
    const cge_tensor *cv = ni > 2 && cge_node_input_id(pd, 2) >= 0 ? cc_input_const(g, pd, 2) : NULL;
    int32_t r = xd.shape.rank, nsp = r - 2;
    if (!pv || (pv->dtype != CGE_I64 && pv->dtype != CGE_I32) ||
        cge_shape_numel(&pv->shape) != 2 * r ||
        (ni > 2 && cge_node_input_id(pd, 2) >= 0 && (!cv || !cc_const_all_equal(cv, 0.0, false))))
        return false;
    const int64_t *pp = NULL;
    int64_t np = cge_attrs_get_ints(a, "pads", &pp);
    bool own = false; /* the pool pads too */
    if (np > 0 && np != 2 * nsp)
        return false;
    for (int32_t i = 0; i < 2 * nsp; i++)
        own = own || (np > 0 && pp[i] != 0);
    if (own && cge_attrs_get_int(a, "count_include_pad", 0) == 0)
        return false;
    for (int32_t i = 0; i < r; i++) {
        int64_t b = cc_int_at(pv, i);
        int64_t e = cc_int_at(pv, r + i);
        if (i < 2 ? (b != 0 || e != 0) : (b < 0 || e < 0))
            return false;
        if (i >= 2) {
            pads[i - 2] = b + (np > 0 ? pp[i - 2] : 0);
            pads[nsp + i - 2] = e + (np > 0 ? pp[nsp + i - 2] : 0);
        }
    }
    *npads = 2 * nsp;
    return feeds_nhwc(g, *x, 8);
}

static cge_status swap_node(cc_ctx *ctx, cge_graph *g, cge_node *n, const char *op,
                            const char *const *ins, int32_t ni, bool copy_attrs, cge_node **made);

static cge_status convert_padded_pool(cc_ctx *ctx, cge_graph *g, cge_node *n, int32_t x,
                                      const int64_t *pads, int32_t npads)
{
    const char *ins[1] = {cge_graph_value_name(g, x)};
    cge_node *f = NULL;
    cge_status st = swap_node(ctx, g, n, "ChannelsLastPool", ins, 1, true, &f);
    if (!st)
        st = cge_node_set_string(f, "mode", "avg");
    if (!st)
        st = cge_node_set_ints(f, "pads", pads, npads);
    return st ? st : cge_node_set_int(f, "count_include_pad", 1);
}

/* n is the last Reshape of an exported channel shuffle of NHWC data x
 * [N, C, ...] (ShuffleNet's): Reshape to [N, g, C/g, ...], Transpose
 * [0, 2, 1, 3, ...], Reshape back to x's shape, static shapes. *groups is g. */
static bool shuffle_eligible(const cge_graph *g, const cge_node *n, int32_t *x, int64_t *groups)
{
    if (!cc_is_op(n, "Reshape") || cge_node_num_inputs(n) < 1 || cge_node_num_outputs(n) != 1)
        return false;
    const cge_node *t = cge_graph_value_producer(g, cge_node_input_id(n, 0));
    if (!t || cge_node_is_removed(t) || !cc_is_op(t, "Transpose") || cge_node_num_inputs(t) != 1)
        return false;
    const cge_node *r1 = cge_graph_value_producer(g, cge_node_input_id(t, 0));
    if (!r1 || cge_node_is_removed(r1) || !cc_is_op(r1, "Reshape") || cge_node_num_inputs(r1) < 1)
        return false;
    *x = cge_node_input_id(r1, 0);
    cge_tensor_desc xd, md = cc_out_desc(g, r1, 0), yd = cc_out_desc(g, n, 0);
    if (*x < 0 || cge_graph_value_desc(g, *x, &xd) || xd.dtype != CGE_F32 ||
        !sized_rank_3_to_5(g, *x) || !all_known(&xd.shape) || !all_known(&md.shape) ||
        !cge_shape_equal(&yd.shape, &xd.shape) || md.shape.rank != xd.shape.rank + 1)
        return false;
    int32_t r = md.shape.rank;
    int64_t G = md.shape.dims[1];
    if (md.shape.dims[0] != xd.shape.dims[0] || G < 1 || md.shape.dims[2] * G != xd.shape.dims[1])
        return false;
    for (int32_t d = 3; d < r; d++)
        if (md.shape.dims[d] != xd.shape.dims[d - 1])
            return false;
    const int64_t *perm = NULL;
    if (cge_attrs_get_ints(cge_node_attrs_const(t), "perm", &perm) != r)
        return false;
    for (int32_t d = 0; d < r; d++)
        if (perm[d] != (d == 1 ? 2 : d == 2 ? 1 : d))
            return false;
    *groups = G;
    return feeds_nhwc(g, *x, 8);
}

/* A Slice of NHWC data along the channel axis only (constant starts, ends
 * and axes, step 1): its channel range [*c0, *c1). */
static bool channel_slice(const cge_graph *g, const cge_node *n, int64_t *c0, int64_t *c1)
{
    if (!cc_is_op(n, "Slice") || cge_node_num_inputs(n) < 4 || cge_node_num_outputs(n) != 1 ||
        cge_node_input_id(n, 3) < 0)
        return false;
    cge_tensor_desc xd = cc_in_desc(g, n, 0);
    if (!sized_rank_3_to_5(g, cge_node_input_id(n, 0)) ||
        !sized_rank_3_to_5(g, cge_node_output_id(n, 0)))
        return false;
    const cge_tensor *st = cc_input_const(g, n, 1), *en = cc_input_const(g, n, 2);
    const cge_tensor *ax = cc_input_const(g, n, 3);
    const cge_tensor *sp = cge_node_num_inputs(n) > 4 && cge_node_input_id(n, 4) >= 0
                               ? cc_input_const(g, n, 4)
                               : NULL;
    if (!st || !en || !ax || (cge_node_num_inputs(n) > 4 && cge_node_input_id(n, 4) >= 0 && !sp))
        return false;
    const cge_tensor *all[4] = {st, en, ax, sp};
    for (int k = 0; k < 4; k++)
        if (all[k] && ((all[k]->dtype != CGE_I64 && all[k]->dtype != CGE_I32) ||
                       cge_shape_numel(&all[k]->shape) != 1))
            return false;
    int64_t r = xd.shape.rank, C = xd.shape.dims[1], a = cc_int_at(ax, 0);
    if ((a != 1 && a != 1 - r) || (sp && cc_int_at(sp, 0) != 1))
        return false;
    int64_t b = cc_int_at(st, 0), e = cc_int_at(en, 0);
    b = b < 0 ? b + C : b;
    e = e < 0 ? e + C : e;
    *c0 = b < 0 ? 0 : b > C ? C : b;
    *c1 = e < 0 ? 0 : e > C ? C : e;
    return *c1 > *c0;
}

/* The channel Slices of NHWC data that tile its channels exactly (torch's
 * chunk and split, exported as Slices) become one ChannelsLastSplit; n is
 * one of them. */
static cge_status merge_channel_slices(cc_ctx *ctx, cge_graph *g, cge_node *n, bool *done)
{
    int64_t c0, c1;
    *done = false;
    if (!channel_slice(g, n, &c0, &c1) || !feeds_nhwc(g, cge_node_input_id(n, 0), 8))
        return CGE_OK;
    int32_t x = cge_node_input_id(n, 0);
    int64_t C = cc_in_desc(g, n, 0).shape.dims[1];
    cge_node *part[CGE_CHANNELS_LAST_MAX_PARTS];
    int64_t lo[CGE_CHANNELS_LAST_MAX_PARTS], hi[CGE_CHANNELS_LAST_MAX_PARTS];
    int32_t np = 0;
    for (int32_t i = 0; i < cge_graph_num_nodes(g); i++) {
        cge_node *s = cge_graph_node(g, i);
        int64_t a, b;
        if (!s || cge_node_is_removed(s) || cge_node_input_id(s, 0) != x ||
            !channel_slice(g, s, &a, &b))
            continue;
        if (np == CGE_CHANNELS_LAST_MAX_PARTS)
            return CGE_OK;
        /* in channel order (insertion) */
        int32_t k = np++;
        for (; k > 0 && lo[k - 1] > a; k--) {
            part[k] = part[k - 1], lo[k] = lo[k - 1], hi[k] = hi[k - 1];
        }
        part[k] = s, lo[k] = a, hi[k] = b;
    }
    for (int32_t k = 0; k < np; k++)
        if (lo[k] != (k ? hi[k - 1] : 0))
            return CGE_OK;
    if (np < 2 || hi[np - 1] != C)
        return CGE_OK;
    int64_t sizes[CGE_CHANNELS_LAST_MAX_PARTS];
    for (int32_t k = 0; k < np; k++)
        sizes[k] = hi[k] - lo[k];
    char sn[256], name[256], tmp[256];
    char outs_buf[CGE_CHANNELS_LAST_MAX_PARTS][256];
    const char *outs[CGE_CHANNELS_LAST_MAX_PARTS];
    cge_shape s1 = CGE_SHAPE(np);
    cge_status st = cc_add_const(ctx, g, "cl_split", CGE_I64, &s1, sizes, sn, sizeof sn);
    for (int32_t k = 0; k < np && !st; k++) {
        snprintf(outs_buf[k], sizeof outs_buf[k], "%s",
                 cge_graph_value_name(g, cge_node_output_id(part[k], 0)));
        outs[k] = outs_buf[k];
        st = cge_node_set_output(part[k], 0, cc_fresh_name(ctx, g, outs_buf[k], tmp, sizeof tmp));
    }
    const char *ins[2] = {cge_graph_value_name(g, x), sn};
    cge_node *f = NULL;
    if (!st)
        st = cge_graph_add_node(g, "ChannelsLastSplit", CGE_DOMAIN_FUSED,
                                cc_fresh_name(ctx, g, cge_node_name(n), name, sizeof name), ins, 2,
                                outs, np, &f);
    if (!st)
        st = cge_node_set_int(f, "axis", 1);
    for (int32_t k = 0; k < np && !st; k++) {
        st = cge_graph_remove_node(g, part[k]);
        ctx->removed++;
    }
    if (!st) {
        ctx->fused++;
        ctx->added++;
        *done = true;
    }
    return st;
}

static bool concat_eligible(const cge_graph *g, const cge_node *n)
{
    int32_t ni = cge_node_num_inputs(n);
    if (!cc_is_op(n, "Concat") || ni < 1 || ni > CGE_CHANNELS_LAST_MAX_PARTS ||
        !sized_rank_3_to_5(g, cge_node_output_id(n, 0)))
        return false;
    for (int32_t k = 0; k < ni; k++)
        if (!feeds_nhwc(g, cge_node_input_id(n, k), 8))
            return false;
    return true;
}

static bool split_eligible(const cge_graph *g, const cge_node *n)
{
    int32_t no = cge_node_num_outputs(n);
    if (!cc_is_op(n, "Split") || no < 1 || no > CGE_CHANNELS_LAST_MAX_PARTS ||
        cge_node_num_inputs(n) > 2)
        return false;
    for (int32_t k = 0; k < no; k++)
        if (!sized_rank_3_to_5(g, cge_node_output_id(n, k)))
            return false;
    return feeds_nhwc(g, cge_node_input_id(n, 0), 8);
}

/* An inference BatchNormalization of float32 NHWC data whose scale, bias,
 * mean and variance are float32 constants of [C]. */
static bool bn_eligible(const cge_graph *g, const cge_node *n)
{
    if (!cc_is_op(n, "BatchNormalization") || cge_node_num_inputs(n) != 5 ||
        cge_attrs_get_int(cge_node_attrs_const(n), "training_mode", 0) != 0)
        return false;
    for (int32_t k = 1; k < cge_node_num_outputs(n); k++)
        if (cge_node_output_id(n, k) >= 0)
            return false;
    cge_tensor_desc x = cc_in_desc(g, n, 0);
    if (x.dtype != CGE_F32 || !sized_rank_3_to_5(g, cge_node_input_id(n, 0)))
        return false;
    for (int32_t k = 1; k < 5; k++) {
        const cge_tensor *t = cc_input_const(g, n, k);
        if (!t || t->dtype != CGE_F32 || t->shape.rank != 1 || t->shape.dims[0] != x.shape.dims[1])
            return false;
    }
    return feeds_nhwc(g, cge_node_input_id(n, 0), 8);
}

/* Replace n by cge.fused `op` reading `ins` and producing n's outputs under
 * their names (n's attributes copied when asked); *made is the new node. */
static cge_status swap_node(cc_ctx *ctx, cge_graph *g, cge_node *n, const char *op,
                            const char *const *ins, int32_t ni, bool copy_attrs, cge_node **made)
{
    int32_t no = cge_node_num_outputs(n);
    char outs_buf[CGE_CHANNELS_LAST_MAX_PARTS][256];
    const char *outs[CGE_CHANNELS_LAST_MAX_PARTS];
    char name[256], tmp[256];
    if (no > CGE_CHANNELS_LAST_MAX_PARTS)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INTERNAL, "channels_last_ops: too many outputs");
    cc_fresh_name(ctx, g, cge_node_name(n), name, sizeof name);
    /* The outputs' names pass to the new node: temporary names for the old
     * one first, so that both exist while attributes are copied. */
    cge_status st = CGE_OK;
    for (int32_t k = 0; k < no && !st; k++) {
        snprintf(outs_buf[k], sizeof outs_buf[k], "%s",
                 cge_node_output_id(n, k) >= 0 ? cge_graph_value_name(g, cge_node_output_id(n, k))
                                               : "");
        outs[k] = outs_buf[k];
        if (outs_buf[k][0])
            st = cge_node_set_output(n, k, cc_fresh_name(ctx, g, outs_buf[k], tmp, sizeof tmp));
    }
    cge_node *f = NULL;
    if (!st)
        st = cge_graph_add_node(g, op, CGE_DOMAIN_FUSED, name, ins, ni, outs, no, &f);
    if (!st && copy_attrs)
        st = cc_copy_attrs(f, n);
    if (!st)
        st = cge_graph_remove_node(g, n);
    if (!st) {
        ctx->fused++;
        ctx->removed++;
        ctx->added++;
        if (made)
            *made = f;
    }
    return st;
}

static cge_status add_affine(cc_ctx *ctx, cge_graph *g, cge_node *n, int32_t xs,
                             const double *ab, int64_t C);

/* BatchNormalization -> ChannelsLastAffine(X, A, B) with A = scale /
 * sqrt(var + epsilon), B = bias - mean * A in float64. */
static cge_status convert_bn(cc_ctx *ctx, cge_graph *g, cge_node *n)
{
    const cge_tensor *sc = cc_input_const(g, n, 1), *bi = cc_input_const(g, n, 2);
    const cge_tensor *mu = cc_input_const(g, n, 3), *va = cc_input_const(g, n, 4);
    int64_t C = sc->shape.dims[0];
    double *ab = malloc(sizeof(double) * 2 * (size_t)(C ? C : 1));
    if (!ab)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "channels_last_ops: out of memory");
    double eps = cge_attrs_get_float(cge_node_attrs_const(n), "epsilon", 1e-5f);
    for (int64_t c = 0; c < C; c++) {
        double a = (double)((const float *)sc->data)[c] /
                   sqrt((double)((const float *)va->data)[c] + eps);
        ab[c] = a;
        ab[C + c] = (double)((const float *)bi->data)[c] - (double)((const float *)mu->data)[c] * a;
    }
    cge_status st = add_affine(ctx, g, n, 0, ab, C);
    free(ab);
    return st;
}

/* A float32 Resize of NHWC data that keeps the channels: the channel axis
 * maps to itself with weight 1 (scale exactly 1, no crop), which the
 * channels-last kernel needs. */
static bool resize_eligible(const cge_graph *g, const cge_node *n)
{
    if (!cc_is_op(n, "Resize") || cge_node_num_inputs(n) < 1 || cge_node_num_outputs(n) != 1)
        return false;
    int32_t x = cge_node_input_id(n, 0), y = cge_node_output_id(n, 0);
    cge_tensor_desc xd = cc_in_desc(g, n, 0), yd = cc_out_desc(g, n, 0);
    if (xd.dtype != CGE_F32 || !sized_rank_3_to_5(g, x) || !sized_rank_3_to_5(g, y) ||
        xd.shape.dims[1] != yd.shape.dims[1] || xd.shape.dims[1] < 2)
        return false;
    const cge_attrs *a = cge_node_attrs_const(n);
    if (!strcmp(cge_attrs_get_string(a, "coordinate_transformation_mode", "half_pixel"),
                "tf_crop_and_resize"))
        return false;
    /* scales, when they decide, must be constant with the channel's exactly 1 */
    if (cge_node_num_inputs(n) > 2 && cge_node_input_id(n, 2) >= 0 &&
        (cge_node_num_inputs(n) < 4 || cge_node_input_id(n, 3) < 0)) {
        const cge_tensor *sc = cc_input_const(g, n, 2);
        if (!sc)
            return false;
        if (cge_shape_numel(&sc->shape) > 0 &&
            (sc->dtype != CGE_F32 || cge_shape_numel(&sc->shape) != xd.shape.rank ||
             ((const float *)sc->data)[1] != 1.0f))
            return false;
    }
    return feeds_nhwc(g, x, 8);
}

/* Mul of NHWC data by a computed float32 gate [1 or N, C, 1, ...] (a
 * squeeze-excitation block's); *xs is the data's slot. */
static bool gate_eligible(const cge_graph *g, const cge_node *n, int32_t *xs)
{
    if (!cc_is_op(n, "Mul") || cge_node_num_inputs(n) != 2)
        return false;
    for (int32_t k = 0; k < 2; k++) {
        cge_tensor_desc xd = cc_in_desc(g, n, k), sd = cc_in_desc(g, n, 1 - k);
        cge_tensor_desc yd = cc_out_desc(g, n, 0);
        int32_t x = cge_node_input_id(n, k);
        if (xd.dtype != CGE_F32 || sd.dtype != CGE_F32 || !sized_rank_3_to_5(g, x) ||
            !cge_shape_same(&xd.shape, &yd.shape) || sd.shape.rank != xd.shape.rank ||
            !cge_shape_same(&sd.shape, &sd.shape) || sd.shape.dims[1] != xd.shape.dims[1] ||
            (sd.shape.dims[0] != 1 && !cge_dim_same(sd.shape.dims[0], xd.shape.dims[0])))
            continue;
        bool gate = true;
        for (int32_t d = 2; gate && d < sd.shape.rank; d++)
            gate = sd.shape.dims[d] == 1;
        if (gate && feeds_nhwc(g, x, 8)) {
            *xs = k;
            return true;
        }
    }
    return false;
}

/* n is the Reshape back of an exported GroupNorm over NHWC data: its input
 * an InstanceNormalization (float32 constant scale and bias [G]) of a Reshape
 * of x [N, C, ...] to [N, G, ...], n's output x's shape, static shapes. Row
 * (n, g) of the plain [N, G, ...] tensor is then channels g*C/G .. of image
 * n, which ChannelsLastGroupNorm reads from the NHWC bytes. Or n is an
 * InstanceNormalization of NHWC data itself (G = C: where remove_noops took
 * out a GroupNorm's Reshapes, or a plain instance norm). *in is the
 * InstanceNormalization, *x the NHWC data. */
static bool group_norm_eligible(const cge_graph *g, const cge_node *n, const cge_node **in,
                                int32_t *x)
{
    const cge_node *nrm = n, *r1 = NULL;
    if (cc_is_op(n, "Reshape")) {
        if (cge_node_num_inputs(n) < 1 || cge_node_num_outputs(n) != 1)
            return false;
        nrm = cge_graph_value_producer(g, cge_node_input_id(n, 0));
    }
    if (!nrm || cge_node_is_removed(nrm) || !cc_is_op(nrm, "InstanceNormalization") ||
        cge_node_num_inputs(nrm) != 3 || cge_node_num_outputs(nrm) != 1)
        return false;
    *x = cge_node_input_id(nrm, 0);
    if (nrm != n) {
        r1 = cge_graph_value_producer(g, *x);
        if (!r1 || cge_node_is_removed(r1) || !cc_is_op(r1, "Reshape") ||
            cge_node_num_inputs(r1) < 1)
            return false;
        *x = cge_node_input_id(r1, 0);
    }
    cge_tensor_desc xd, md = cc_in_desc(g, nrm, 0), yd = cc_out_desc(g, n, 0);
    if (*x < 0 || cge_graph_value_desc(g, *x, &xd) || xd.dtype != CGE_F32 ||
        md.dtype != CGE_F32 || !sized_rank_3_to_5(g, *x) || !all_known(&xd.shape) ||
        !all_known(&md.shape) || md.shape.rank < 3 || !cge_shape_equal(&yd.shape, &xd.shape))
        return false;
    int64_t G = md.shape.dims[1];
    if (md.shape.dims[0] != xd.shape.dims[0] || G < 1 || xd.shape.dims[1] % G != 0 ||
        cge_shape_numel(&md.shape) != cge_shape_numel(&xd.shape))
        return false;
    for (int32_t k = 1; k < 3; k++) {
        const cge_tensor *t = cc_input_const(g, nrm, k);
        if (!t || t->dtype != CGE_F32 || t->shape.rank != 1 || t->shape.dims[0] != G)
            return false;
    }
    *in = nrm;
    return feeds_nhwc(g, *x, 8);
}

static cge_status convert_group_norm(cc_ctx *ctx, cge_graph *g, cge_node *n, const cge_node *nrm,
                                     int32_t x)
{
    const char *ins[3] = {cge_graph_value_name(g, x), cge_node_input(nrm, 1),
                          cge_node_input(nrm, 2)};
    float eps = cge_attrs_get_float(cge_node_attrs_const(nrm), "epsilon", 1e-5f);
    cge_node *f = NULL;
    cge_status st = swap_node(ctx, g, n, "ChannelsLastGroupNorm", ins, 3, false, &f);
    return st ? st : cge_node_set_float(f, "epsilon", eps);
}

/* perm is [0, 2, ..., r-1, 1] (NCHW -> NHWC order: to_nhwc false) or
 * [0, r-1, 1, ..., r-2] (the reverse: to_nhwc true). */
static bool channel_perm(const cge_node *n, int32_t r, bool to_nhwc)
{
    const int64_t *p = NULL;
    if (cge_attrs_get_ints(cge_node_attrs_const(n), "perm", &p) != r || r < 3)
        return false;
    for (int32_t i = 0; i < r; i++) {
        int64_t want = i == 0 ? 0 : !to_nhwc ? (i == r - 1 ? 1 : i + 1) : (i == 1 ? r - 1 : i - 1);
        if (p[i] != want)
            return false;
    }
    return true;
}

/* 0: no; 1: Transpose of NHWC data into the plain channels-last tensor;
 * 2: Transpose of a plain channels-last rank-4/5 tensor into NHWC data. */
static int transpose_view(const cge_graph *g, const cge_node *n)
{
    if (!cc_is_op(n, "Transpose") || cge_node_num_inputs(n) != 1)
        return 0;
    int32_t x = cge_node_input_id(n, 0), y = cge_node_output_id(n, 0);
    cge_tensor_desc xd = cc_in_desc(g, n, 0);
    if (x < 0 || !sized_rank_3_to_5(g, x) || !sized_rank_3_to_5(g, y))
        return 0;
    if (channel_perm(n, xd.shape.rank, false) && feeds_nhwc(g, x, 8))
        return 1;
    if (channel_perm(n, xd.shape.rank, true) && xd.shape.rank >= 4 && xd.dtype == CGE_F32)
        return 2;
    return 0;
}

/* Mul or Add of NHWC data by a float32 constant that varies only along the
 * channel axis ([C], [C,1,1], [1,C,1,1]); *xs is the data's slot. */
static bool per_channel_eligible(const cge_graph *g, const cge_node *n, int32_t *xs)
{
    if ((!cc_is_op(n, "Mul") && !cc_is_op(n, "Add")) || cge_node_num_inputs(n) != 2)
        return false;
    for (int32_t k = 0; k < 2; k++) {
        const cge_tensor *c = cc_input_const(g, n, 1 - k);
        int32_t x = cge_node_input_id(n, k);
        cge_tensor_desc xd = cc_in_desc(g, n, k), yd = cc_out_desc(g, n, 0);
        if (!c || c->dtype != CGE_F32 || xd.dtype != CGE_F32 || !sized_rank_3_to_5(g, x) ||
            !cge_shape_same(&xd.shape, &yd.shape) || c->shape.rank > xd.shape.rank)
            continue;
        /* aligned to the right: the channel axis is x's axis 1 */
        int32_t off = xd.shape.rank - c->shape.rank;
        bool ok = cge_shape_numel(&c->shape) == xd.shape.dims[1];
        for (int32_t d = 0; ok && d < c->shape.rank; d++)
            ok = c->shape.dims[d] == (d + off == 1 ? xd.shape.dims[1] : 1);
        if (ok && feeds_nhwc(g, x, 8)) {
            *xs = k;
            return true;
        }
    }
    return false;
}

/* An affine node (X, A, B as float64 [C]) in place of n, with n's output. */
static cge_status add_affine(cc_ctx *ctx, cge_graph *g, cge_node *n, int32_t xs,
                             const double *ab, int64_t C)
{
    char an[256], bn[256];
    cge_shape s1 = CGE_SHAPE(C);
    cge_status st = cc_add_const(ctx, g, "cl_scale", CGE_F64, &s1, ab, an, sizeof an);
    if (!st)
        st = cc_add_const(ctx, g, "cl_shift", CGE_F64, &s1, ab + C, bn, sizeof bn);
    if (st)
        return st;
    const char *ins[3] = {cge_node_input(n, xs), an, bn};
    return swap_node(ctx, g, n, "ChannelsLastAffine", ins, 3, false, NULL);
}

static cge_status convert_per_channel(cc_ctx *ctx, cge_graph *g, cge_node *n, int32_t xs)
{
    const cge_tensor *c = cc_input_const(g, n, 1 - xs);
    int64_t C = cge_shape_numel(&c->shape);
    double *ab = malloc(sizeof(double) * 2 * (size_t)(C ? C : 1));
    if (!ab)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "channels_last_ops: out of memory");
    bool mul = cc_is_op(n, "Mul");
    for (int64_t i = 0; i < C; i++) {
        double v = ((const float *)c->data)[i];
        ab[i] = mul ? v : 1.0;
        ab[C + i] = mul ? 0.0 : v;
    }
    cge_status st = add_affine(ctx, g, n, xs, ab, C);
    free(ab);
    return st;
}

/* Replace n by `op` (cge.fused) with the same inputs, outputs and attributes;
 * `mode` is set when not NULL. */
static cge_status convert(cc_ctx *ctx, cge_graph *g, cge_node *n, const char *op,
                          const char *mode, cge_node **made)
{
    int32_t ni = cge_node_num_inputs(n);
    const char *ins[CGE_CHANNELS_LAST_MAX_PARTS];
    if (ni > CGE_CHANNELS_LAST_MAX_PARTS)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INTERNAL, "channels_last_ops: too many inputs");
    for (int32_t k = 0; k < ni; k++)
        ins[k] = cge_node_input(n, k);
    cge_node *f = NULL;
    cge_status st = swap_node(ctx, g, n, op, ins, ni, true, &f);
    if (!st && cge_attrs_find(cge_node_attrs(f), "storage_order"))
        st = cge_attrs_remove(cge_node_attrs(f), "storage_order");
    if (!st && cge_attrs_find(cge_node_attrs(f), "num_outputs"))
        st = cge_attrs_remove(cge_node_attrs(f), "num_outputs");
    if (!st && mode)
        st = cge_node_set_string(f, "mode", mode);
    if (!st && made)
        *made = f;
    return st;
}

/* n takes over the output name of r, its only reader, which goes. */
static cge_status take_over_output(cc_ctx *ctx, cge_graph *g, cge_node *n, cge_node *r)
{
    char out[256];
    snprintf(out, sizeof out, "%s", cge_graph_value_name(g, cge_node_output_id(r, 0)));
    cge_status st = cge_graph_remove_node(g, r);
    if (!st)
        st = cge_node_set_output(n, 0, out);
    if (!st) {
        ctx->fused++;
        ctx->removed++;
    }
    return st;
}

/* A Relu that is the only reader of an affine node's output runs inside it. */
static cge_status absorb_relus(cc_ctx *ctx, cge_graph *g)
{
    cc_uses u;
    cge_status st = cc_uses_build(&u, g);
    int32_t nn = cge_graph_num_nodes(g);
    for (int32_t i = 0; i < nn && !st; i++) {
        cge_node *a = cge_graph_node(g, i);
        if (!cc_is_fused_op(a, "ChannelsLastAffine") ||
            cge_attrs_get_int(cge_node_attrs_const(a), "relu", 0))
            continue;
        int32_t y = cge_node_output_id(a, 0);
        cge_node *r = cc_only_consumer(&u, g, y);
        if (!r || !cc_is_op(r, "Relu") || cge_node_num_outputs(r) != 1)
            continue;
        /* the affine node takes over the Relu's output name */
        st = take_over_output(ctx, g, a, r);
        if (!st)
            st = cge_node_set_int(a, "relu", 1);
    }
    cc_uses_free(&u);
    return st;
}

/* A ChannelsLastAffine that alone reads a ChannelsLastGroupNorm (its A, B
 * and Relu), then an exact Gelu that alone reads the result, run in the
 * group norm's epilogue (the same expressions). */
static cge_status absorb_into_group_norms(cc_ctx *ctx, cge_graph *g)
{
    cc_uses u;
    cge_status st = cc_uses_build(&u, g);
    int32_t nn = cge_graph_num_nodes(g);
    for (int32_t i = 0; i < nn && !st; i++) {
        cge_node *gn = cge_graph_node(g, i);
        if (!gn || !cc_is_fused_op(gn, "ChannelsLastGroupNorm") || cge_node_num_inputs(gn) != 3)
            continue;
        bool relu = false;
        for (int step = 0; step < 2 && !st; step++) {
            cge_node *r = cc_only_consumer(&u, g, cge_node_output_id(gn, 0));
            bool affine = step == 0 && r && cc_is_fused_op(r, "ChannelsLastAffine") &&
                          cge_node_num_inputs(r) == 3 && cge_node_input_id(r, 0) ==
                                                             cge_node_output_id(gn, 0);
            bool gelu = r && !relu && cc_is_op(r, "Gelu") && cge_node_num_outputs(r) == 1 &&
                        !strcmp(cge_attrs_get_string(cge_node_attrs_const(r), "approximate",
                                                     "none"), "none");
            if (!affine && !gelu)
                continue;
            char a[256], b[256];
            if (affine) {
                snprintf(a, sizeof a, "%s", cge_node_input(r, 1));
                snprintf(b, sizeof b, "%s", cge_node_input(r, 2));
                relu = cge_attrs_get_int(cge_node_attrs_const(r), "relu", 0) != 0;
            }
            if (affine) {
                /* a new node with A and B for inputs (a node's inputs do not grow) */
                const char *ins[5] = {cge_node_input(gn, 0), cge_node_input(gn, 1),
                                      cge_node_input(gn, 2), a, b};
                cge_node *f = NULL;
                st = swap_node(ctx, g, gn, "ChannelsLastGroupNorm", ins, 5, true, &f);
                if (!st) {
                    ctx->added--; /* swap_node counted one added, one removed: a rename */
                    ctx->removed--;
                    ctx->fused--;
                    gn = f;
                }
            }
            if (!st)
                st = take_over_output(ctx, g, gn, r);
            if (!st && (relu || gelu))
                st = cge_node_set_string(gn, "activation", gelu ? "gelu" : "relu");
            /* uses changed: rebuild */
            cc_uses_free(&u);
            if (!st)
                st = cc_uses_build(&u, g);
        }
    }
    cc_uses_free(&u);
    return st;
}

/* A dim unknown even with the input shapes given (NonZero, a computed
 * Reshape): such a graph runs node by node, never through partition, so no
 * convolution becomes channels-last and NHWC forms would read NCHW bytes. */
static bool value_dependent(const cge_graph *g)
{
    for (int32_t id = 0; id < cge_graph_num_values(g); id++) {
        cge_tensor_desc d;
        if (cge_graph_value_kind(g, id) == CGE_VALUE_UNDEFINED || cge_graph_value_desc(g, id, &d))
            continue;
        for (int32_t k = 0; k < d.shape.rank; k++)
            if (d.shape.dims[k] == CGE_DIM_DYNAMIC)
                return true;
    }
    return false;
}

cge_status cc_pass_channels_last_ops(cc_ctx *ctx, cge_graph *g)
{
    if (!cge_fused_conv_channels_last_available() || value_dependent(g))
        return CGE_OK;
    /* Until nothing changes: a node may read one converted later in node
     * order. */
    cge_status st = CGE_OK;
    for (bool changed = true; changed && !st;) {
        changed = false;
        int32_t nn = cge_graph_num_nodes(g);
        for (int32_t i = 0; i < nn && !st; i++) {
            cge_node *n = cge_graph_node(g, i);
            int32_t xs = 0, tv = 0;
            const cge_node *nrm = NULL;
            if (!n || cge_node_is_removed(n))
                continue;
            int64_t pads[2 * 3], groups = 0;
            int32_t npads = 0;
            if (padded_pool_eligible(g, n, &xs, pads, &npads))
                st = convert_padded_pool(ctx, g, n, xs, pads, npads);
            else if (pool_eligible(g, n))
                st = convert(ctx, g, n, "ChannelsLastPool", pool_mode(n), NULL);
            else if (shuffle_eligible(g, n, &xs, &groups)) {
                const char *ins[1] = {cge_graph_value_name(g, xs)};
                cge_node *f = NULL;
                st = swap_node(ctx, g, n, "ChannelsLastShuffle", ins, 1, false, &f);
                if (!st)
                    st = cge_node_set_int(f, "groups", groups);
            }
            else if (cc_is_op(n, "Slice")) {
                bool done = false;
                st = merge_channel_slices(ctx, g, n, &done);
                if (!done)
                    continue;
            }
            else if (concat_eligible(g, n))
                st = convert(ctx, g, n, "ChannelsLastConcat", NULL, NULL);
            else if (split_eligible(g, n))
                st = convert(ctx, g, n, "ChannelsLastSplit", NULL, NULL);
            else if (bn_eligible(g, n))
                st = convert_bn(ctx, g, n);
            else if (resize_eligible(g, n))
                st = convert(ctx, g, n, "ChannelsLastResize", NULL, NULL);
            else if (group_norm_eligible(g, n, &nrm, &xs))
                st = convert_group_norm(ctx, g, n, nrm, xs);
            else if (per_channel_eligible(g, n, &xs))
                st = convert_per_channel(ctx, g, n, xs);
            else if (gate_eligible(g, n, &xs)) {
                const char *ins[2] = {cge_node_input(n, xs), cge_node_input(n, 1 - xs)};
                st = swap_node(ctx, g, n, "ChannelsLastScale", ins, 2, false, NULL);
            }
            else if ((tv = transpose_view(g, n)) != 0) {
                cge_node *v = NULL;
                st = convert(ctx, g, n, "LayoutView", NULL, &v);
                if (!st)
                    st = cge_node_set_int(v, "to", tv == 2 ? CGE_FORMAT_NHWC : CGE_FORMAT_PLAIN);
            }
            else
                continue;
            changed = true;
        }
    }
    if (!st)
        st = absorb_relus(ctx, g);
    return st ? st : absorb_into_group_norms(ctx, g);
}
