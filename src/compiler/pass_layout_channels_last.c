/* partition/layout_channels_last (level 3): NHWC activations for float32
 * FusedConvs with constant weights on the cpu engine, the ChannelsLast* nodes
 * and the elementwise nodes among them, and likewise for fuse_qdq's int8
 * QConv / QPool / QAdd / QMul / QLookup; cge Reorders at the borders. */
#include <stdlib.h>
#include <string.h>

#include "cge/fused_ops.h"
#include "compiler/compiler_internal.h"
#include "ops/resize_nhwc.h"

/* NHWC lets the FusedConvs run oneDNN's brgemm kernels, which measured 2-10x
 * faster than its plain-layout paths; the ChannelsLast* nodes are those
 * optimize/channels_last_ops made. Elementwise nodes whose full-size inputs
 * all come out of such nodes work on the NHWC bytes as they are (an
 * elementwise op does not care about the order of its elements), so a SiLU or
 * a residual Add between convolutions costs no reorder. cge Reorder nodes
 * convert only where data enters or leaves an NHWC region (graph inputs and
 * outputs included). A value with one spatial position has the same bytes in
 * both layouts and is never reordered. A ChannelsLastResize read only in the
 * plain layout writes it itself (plain_output): the enlarged output of a
 * segmentation head is never stored NHWC to be reordered. Runs after
 * insert_conversions, so the formats it sets are final. */

/* What a node is to this pass: K_NHWC_OP is one of optimize/
 * channels_last_ops's ChannelsLast* nodes, NHWC by definition; K_VIEW_IN a
 * LayoutView reading NHWC data as the plain transposed tensor, K_VIEW_OUT
 * one reading a plain tensor as NHWC data. */
enum { K_NONE, K_CONV, K_NHWC_OP, K_ELEMENTWISE, K_VIEW_IN, K_VIEW_OUT, K_QOP };

/* Kinds whose outputs are NHWC data. K_QOP: a QConv or QPool, which reads
 * NHWC X (slot 0) when its channels_last is set, like K_CONV. */
static bool makes_nhwc(uint8_t k)
{
    return k == K_CONV || k == K_NHWC_OP || k == K_ELEMENTWISE || k == K_VIEW_OUT || k == K_QOP;
}

static int64_t numel_of(const cge_graph *g, int32_t id)
{
    cge_tensor_desc d;
    return cge_graph_value_desc(g, id, &d) ? -1 : cge_shape_numel(&d.shape);
}

static bool is_nhwc_op(const cge_node *n)
{
    return cc_is_fused_op(n, "ChannelsLastPool") || cc_is_fused_op(n, "ChannelsLastConcat") ||
           cc_is_fused_op(n, "ChannelsLastSplit") || cc_is_fused_op(n, "ChannelsLastAffine") ||
           cc_is_fused_op(n, "ChannelsLastResize") || cc_is_fused_op(n, "ChannelsLastScale") ||
           cc_is_fused_op(n, "ChannelsLastGroupNorm") || cc_is_fused_op(n, "ChannelsLastShuffle");
}

/* Inputs that follow the layout: FusedConv's X and Z, the pool's and the
 * split's X, all of a concat's, the elementwise node's full-size operands
 * (not its one-element ones). */
static bool activation_slot(const cge_graph *g, const uint8_t *kind, const cge_node *n,
                            int32_t slot)
{
    switch (kind[cge_node_index(n)]) {
    case K_CONV: return slot == 0 || slot == 3;
    case K_QOP: return slot == 0;
    case K_VIEW_IN: return slot == 0;
    case K_NHWC_OP: return slot == 0 || cc_is_fused_op(n, "ChannelsLastConcat");
    case K_ELEMENTWISE:
        return numel_of(g, cge_node_input_id(n, slot)) != 1 &&
               !(slot == 1 && cc_is_fused_op(n, "QLookup")); /* the table */
    default: return false;
    }
}

/* Rank >= 3 with one spatial position: NCHW and NHWC bytes agree. (A
 * symbolic spatial dim is not known to be 1: such a value is reordered,
 * which is right at every size.) */
static bool one_position(const cge_graph *g, int32_t id)
{
    cge_tensor_desc d;
    if (cge_graph_value_desc(g, id, &d) || d.shape.rank < 3)
        return false;
    for (int32_t i = 2; i < d.shape.rank; i++)
        if (d.shape.dims[i] != 1)
            return false;
    return true;
}

/* A shape a symbolic plan can run channels-last: every dim known or a named
 * symbol (batch, height: the kernels get concrete shapes when each
 * signature's plan prepares them), never an anonymous -1, and the channel
 * dim known. Static shapes qualify. */
static bool sized(const cge_shape *s)
{
    return s->rank >= 2 && s->dims[1] >= 0 && cge_shape_same(s, s);
}

static bool on_cpu(const cc_ctx *ctx, const cge_node *n)
{
    const cge_engine_desc *e = &ctx->engines[ctx->node_engine[cge_node_index(n)]];
    return !strcmp(e->name, "cpu") && e->format == CGE_FORMAT_PLAIN;
}

static bool is_conv(const cc_ctx *ctx, const cge_graph *g, const cge_node *n)
{
    if (!cc_is_fused_op(n, "FusedConv") || !on_cpu(ctx, n))
        return false;
    const cge_attrs *a = cge_node_attrs_const(n);
    if (!cge_attrs_get_int(a, "w_const", 0) || cge_attrs_get_int(a, "channels_last", 0))
        return false;
    cge_tensor_desc x = cc_in_desc(g, n, 0), y = cc_out_desc(g, n, 0);
    return x.dtype == CGE_F32 && x.format == CGE_FORMAT_PLAIN && x.shape.rank >= 3 &&
           x.shape.rank <= 5 && sized(&x.shape) && sized(&y.shape) &&
           cge_node_num_outputs(n) == 1;
}

/* fuse_qdq's int8 QConv (constant W) or QPool over rank-4 data, not NHWC yet. */
static bool is_qop(const cc_ctx *ctx, const cge_graph *g, const cge_node *n)
{
    if (!(cc_is_fused_op(n, "QConv") || cc_is_fused_op(n, "QPool")) || !on_cpu(ctx, n))
        return false;
    const cge_attrs *a = cge_node_attrs_const(n);
    if ((cc_is_fused_op(n, "QConv") && !cge_attrs_get_int(a, "w_const", 0)) ||
        cge_attrs_get_int(a, "channels_last", 0))
        return false;
    cge_tensor_desc x = cc_in_desc(g, n, 0), y = cc_out_desc(g, n, 0);
    return x.format == CGE_FORMAT_PLAIN && x.shape.rank == 4 && cge_shape_is_static(&x.shape) &&
           cge_shape_is_static(&y.shape);
}

/* int8 elementwise nodes of fuse_qdq (scales and zero points are one-element
 * inputs, so only the data follows the layout). */
static bool is_q_elementwise(const cge_node *n)
{
    return cc_is_fused_op(n, "QAdd") || cc_is_fused_op(n, "QMul") || cc_is_fused_op(n, "QLookup");
}

/* An elementwise node on the cpu engine whose outputs share one shape of
 * rank >= 3 (sized) and whose inputs are one-element values or provably of
 * that shape (cge_shape_same: equal sizes or the same symbols) and made by
 * NHWC nodes (at least one of them). */
static bool joins_elementwise(const cc_ctx *ctx, const cge_graph *g, const uint8_t *kind,
                              const cge_node *n)
{
    if (!(cc_is_elementwise(n) || is_q_elementwise(n)) || !on_cpu(ctx, n) ||
        cge_node_num_outputs(n) < 1)
        return false;
    cge_tensor_desc y0 = cc_out_desc(g, n, 0);
    /* a Cast to string: string tensors stay plain (docs/strings.md) */
    if (y0.shape.rank < 3 || !sized(&y0.shape) || y0.format != CGE_FORMAT_PLAIN ||
        y0.dtype == CGE_STRING)
        return false;
    for (int32_t k = 1; k < cge_node_num_outputs(n); k++) {
        cge_tensor_desc y = cc_out_desc(g, n, k);
        if (cge_node_output_id(n, k) < 0 || !cge_shape_same(&y.shape, &y0.shape))
            return false;
    }
    int32_t full = 0;
    for (int32_t k = 0; k < cge_node_num_inputs(n); k++) {
        int32_t v = cge_node_input_id(n, k);
        if (v < 0 || numel_of(g, v) == 1 || (k == 1 && cc_is_fused_op(n, "QLookup")))
            continue;
        cge_tensor_desc d;
        cge_graph_value_desc(g, v, &d);
        const cge_node *p = cge_graph_value_producer(g, v);
        if (!cge_shape_same(&d.shape, &y0.shape) || !p || !makes_nhwc(kind[cge_node_index(p)]))
            return false;
        full++;
    }
    return full > 0;
}

/* Add cge Reorder src -> out (a fresh name when out is NULL) with format
 * `to`; returns the result's id in *result. */
static cge_status add_reorder(cc_ctx *ctx, cge_graph *g, int32_t src, cge_format to,
                              const char *out, int32_t *result)
{
    char vname[256], nname[256];
    cge_tensor_desc d;
    cge_graph_value_desc(g, src, &d);
    const char *in = cge_graph_value_name(g, src);
    if (!out)
        out = cc_fresh_name(ctx, g, to == CGE_FORMAT_NHWC ? "nhwc" : "plain", vname, sizeof vname);
    cc_fresh_name(ctx, g, "Reorder", nname, sizeof nname);
    cge_node *n = NULL;
    cge_status st =
        cge_graph_add_node(g, "Reorder", CGE_DOMAIN_CONVERSION, nname, &in, 1, &out, 1, &n);
    if (!st)
        st = cge_node_set_int(n, "from", d.format);
    if (!st)
        st = cge_node_set_int(n, "to", to);
    if (!st)
        st = cge_graph_set_desc(g, out, d.dtype, &d.shape);
    if (!st)
        st = cge_graph_set_format(g, out, to);
    if (!st)
        st = cc_assign_node(ctx, g, cge_node_index(n), -1);
    if (!st) {
        *result = cge_graph_value_id(g, out);
        ctx->num_conversions++;
        ctx->added++;
    }
    return st;
}

/* Output `slot` of NHWC node `c`: NHWC for the NHWC nodes that read it in a
 * layout-following slot; everything else (other ops, other slots, the graph's
 * outputs) reads a plain copy under the original name. */
static cge_status convert_output(cc_ctx *ctx, cc_uses *u, cge_graph *g, cge_node *c, int32_t slot,
                                 const uint8_t *kind)
{
    int32_t y = cge_node_output_id(c, slot);
    if (y < 0)
        return CGE_OK;
    int32_t count = cc_uses_count(u, y);
    cc_use *uses = count ? malloc(sizeof *uses * (size_t)count) : NULL;
    if (count && !uses)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "layout_channels_last: out of memory");
    cc_uses_list(u, y, uses, count);
    bool plain_needed = cge_graph_value_is_output(g, y);
    for (int32_t k = 0; k < count && !plain_needed; k++)
        plain_needed = !activation_slot(g, kind, uses[k].node, uses[k].slot);
    bool nhwc_reader = false;
    for (int32_t k = 0; k < count && !nhwc_reader; k++)
        nhwc_reader = activation_slot(g, kind, uses[k].node, uses[k].slot);
    cge_status st = CGE_OK;
    if (plain_needed && !nhwc_reader && cc_is_fused_op(c, "ChannelsLastResize") &&
        cc_out_desc(g, c, slot).shape.dims[1] <= cge__resize_nhwc_max_plain_channels()) {
        /* Only plain readers: the resize writes them the plain tensor itself
         * (the same bits), instead of an NHWC one and a Reorder of it. */
        st = cge_node_set_int(c, "plain_output", 1);
    } else if (one_position(g, y)) {
        /* as it is, whoever reads it */
        if (!plain_needed)
            st = cge_graph_set_format(g, cge_graph_value_name(g, y), CGE_FORMAT_NHWC);
    } else if (!plain_needed) {
        st = cge_graph_set_format(g, cge_graph_value_name(g, y), CGE_FORMAT_NHWC);
    } else {
        /* The node now writes a fresh NHWC value; the original name (the
         * graph output, the plain readers) comes from a Reorder of it. */
        char fresh[256], orig[256];
        snprintf(orig, sizeof orig, "%s", cge_graph_value_name(g, y));
        cc_fresh_name(ctx, g, orig, fresh, sizeof fresh);
        int32_t plain_id;
        st = cge_node_set_output(c, slot, fresh);
        if (!st)
            st = cge_graph_set_format(g, fresh, CGE_FORMAT_NHWC);
        if (!st)
            st = add_reorder(ctx, g, cge_graph_value_id(g, fresh), CGE_FORMAT_PLAIN, orig,
                             &plain_id);
        for (int32_t k = 0; k < count && !st; k++)
            if (activation_slot(g, kind, uses[k].node, uses[k].slot))
                st = cge_node_set_input(uses[k].node, uses[k].slot, fresh);
    }
    free(uses);
    return st;
}

typedef struct in_cache {
    int32_t *from, *to;
    int32_t n;
} in_cache;

/* The layout-following inputs of conv or pool `c` in NHWC: values from
 * outside a region are reordered once each, however many nodes read them. */
static cge_status convert_inputs(cc_ctx *ctx, cge_graph *g, cge_node *c, const uint8_t *kind,
                                 in_cache *cache)
{
    for (int32_t slot = 0; slot < cge_node_num_inputs(c); slot++) {
        if (!activation_slot(g, kind, c, slot))
            continue;
        int32_t v = cge_node_input_id(c, slot);
        if (v < 0 || one_position(g, v))
            continue;
        cge_tensor_desc d;
        cge_graph_value_desc(g, v, &d);
        if (d.format == CGE_FORMAT_NHWC)
            continue;
        int32_t r = -1;
        for (int32_t k = 0; k < cache->n && r < 0; k++)
            if (cache->from[k] == v)
                r = cache->to[k];
        if (r < 0) {
            cge_status st = add_reorder(ctx, g, v, CGE_FORMAT_NHWC, NULL, &r);
            if (st)
                return st;
            cache->from[cache->n] = v;
            cache->to[cache->n++] = r;
        }
        cge_status st = cge_node_set_input(c, slot, cge_graph_value_name(g, r));
        if (st)
            return st;
    }
    return CGE_OK;
}

cge_status cc_pass_layout_channels_last(cc_ctx *ctx, cge_graph *g)
{
    if (!cge_fused_conv_channels_last_available())
        return CGE_OK;
    int32_t nn = cge_graph_num_nodes(g);
    /* Only nodes that exist now are ever looked up (uses are built first). */
    uint8_t *kind = calloc((size_t)nn + 1, sizeof *kind);
    cge_node **list = malloc(sizeof *list * ((size_t)nn + 1));
    /* One entry per value reordered in: at most every value there is. */
    size_t nv = (size_t)cge_graph_num_values(g) + 1;
    in_cache cache = {malloc(sizeof(int32_t) * nv), malloc(sizeof(int32_t) * nv), 0};
    if (!kind || !list || !cache.from || !cache.to) {
        free(kind), free(list), free(cache.from), free(cache.to);
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "layout_channels_last: out of memory");
    }
    int32_t nc = 0;
    for (int32_t i = 0; i < nn; i++) {
        cge_node *n = cge_graph_node(g, i);
        kind[i] = !n                 ? K_NONE
                  : is_conv(ctx, g, n) ? K_CONV
                  : is_qop(ctx, g, n)  ? K_QOP
                  : is_nhwc_op(n)      ? K_NHWC_OP
                  : !cc_is_fused_op(n, "LayoutView") ? K_NONE
                  : cge_attrs_get_int(cge_node_attrs_const(n), "to", 0) == CGE_FORMAT_NHWC
                      ? K_VIEW_OUT
                      : K_VIEW_IN;
        if (kind[i] != K_NONE)
            list[nc++] = n;
    }
    /* Elementwise nodes join where all their data is NHWC already; until
     * nothing changes, since node order need not be topological here. */
    for (bool changed = nc > 0; changed;) {
        changed = false;
        for (int32_t i = 0; i < nn; i++) {
            cge_node *n = cge_graph_node(g, i);
            if (n && kind[i] == K_NONE && joins_elementwise(ctx, g, kind, n)) {
                kind[i] = K_ELEMENTWISE;
                list[nc++] = n;
                changed = true;
            }
        }
    }
    cc_uses u;
    cge_status st = nc ? cc_uses_build(&u, g) : CGE_OK;
    if (nc && !st) {
        /* Outputs first (uses as the graph had them), then inputs. */
        for (int32_t k = 0; k < nc && !st; k++)
            for (int32_t o = 0; o < cge_node_num_outputs(list[k]) && !st; o++)
                if (makes_nhwc(kind[cge_node_index(list[k])]))
                    st = convert_output(ctx, &u, g, list[k], o, kind);
        cc_uses_free(&u);
        for (int32_t k = 0; k < nc && !st; k++) {
            uint8_t kk = kind[cge_node_index(list[k])];
            if (kk == K_CONV || kk == K_NHWC_OP || kk == K_VIEW_IN || kk == K_QOP)
                st = convert_inputs(ctx, g, list[k], kind, &cache);
        }
        for (int32_t k = 0; k < nc && !st; k++)
            if (kind[cge_node_index(list[k])] == K_CONV || kind[cge_node_index(list[k])] == K_QOP)
                st = cge_node_set_int(list[k], "channels_last", 1);
    }
    free(kind), free(list), free(cache.from), free(cache.to);
    return st;
}
