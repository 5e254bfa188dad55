/* partition/layout_channels_last (level 3): float32 FusedConvs with constant
 * weights on the cpu engine read and write NHWC activations (oneDNN's brgemm
 * kernels, which measured 2-10x faster than its plain-layout paths), as do
 * the ChannelsLastPools that optimize/channels_last_pools made, so that a
 * chain of them passes activations along with no reorder; cge Reorder nodes
 * convert only where data enters or leaves a chain (graph inputs and outputs
 * included). A value with one spatial position has the same bytes in both
 * layouts and is never reordered. Runs after insert_conversions, so the
 * formats it sets are final. */
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler_internal.h"
#include "ops/conv_fused.h"

static bool is_pool(const cge_node *n)
{
    return !cge_node_is_removed(n) && !strcmp(cge_node_op_type(n), "ChannelsLastPool") &&
           !strcmp(cge_node_domain(n), CC_FUSED_DOMAIN);
}

/* Inputs that follow the layout: FusedConv's X and Z, the pool's X. */
static bool activation_slot(const cge_node *n, int32_t slot)
{
    return slot == 0 || (slot == 3 && !is_pool(n));
}

/* Rank >= 3 with one spatial position: NCHW and NHWC bytes agree. */
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

static bool is_candidate(const cc_ctx *ctx, const cge_graph *g, const cge_node *n)
{
    if (cge_node_is_removed(n) || strcmp(cge_node_op_type(n), "FusedConv") != 0 ||
        strcmp(cge_node_domain(n), CC_FUSED_DOMAIN) != 0)
        return false;
    int32_t i = cge_node_index(n);
    if (strcmp(ctx->engines[ctx->node_engine[i]].name, "cpu") != 0 ||
        ctx->engines[ctx->node_engine[i]].format != CGE_FORMAT_PLAIN)
        return false;
    const cge_attrs *a = cge_node_attrs_const(n);
    if (!cge_attrs_get_int(a, "w_const", 0) || cge_attrs_get_int(a, "channels_last", 0))
        return false;
    cge_tensor_desc x = cc_in_desc(g, n, 0), y = cc_out_desc(g, n, 0);
    return x.dtype == CGE_F32 && x.format == CGE_FORMAT_PLAIN && x.shape.rank >= 3 &&
           x.shape.rank <= 5 && cge_shape_is_static(&x.shape) && cge_shape_is_static(&y.shape) &&
           cge_node_num_outputs(n) == 1;
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
    cge_status st = cge_graph_add_node(g, "Reorder", CC_DOMAIN, nname, &in, 1, &out, 1, &n);
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

/* The output of candidate `c`: NHWC for the candidates that read it as X or
 * Z; everything else (other ops, other slots, the graph's outputs) reads a
 * plain copy under the original name. */
static cge_status convert_output(cc_ctx *ctx, cc_uses *u, cge_graph *g, cge_node *c,
                                 const bool *cand)
{
    int32_t y = cge_node_output_id(c, 0);
    int32_t count = cc_uses_count(u, y);
    cc_use *uses = count ? malloc(sizeof *uses * (size_t)count) : NULL;
    if (count && !uses)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "layout_channels_last: out of memory");
    cc_uses_list(u, y, uses, count);
    bool plain_needed = cge_graph_value_is_output(g, y);
    for (int32_t k = 0; k < count && !plain_needed; k++)
        plain_needed = !cand[cge_node_index(uses[k].node)] ||
                       !activation_slot(uses[k].node, uses[k].slot);
    cge_status st = CGE_OK;
    if (one_position(g, y)) {
        /* as it is, whoever reads it */
        if (!plain_needed)
            st = cge_graph_set_format(g, cge_graph_value_name(g, y), CGE_FORMAT_NHWC);
    } else if (!plain_needed) {
        st = cge_graph_set_format(g, cge_graph_value_name(g, y), CGE_FORMAT_NHWC);
    } else {
        /* The conv now writes a fresh NHWC value; the original name (the
         * graph output, the plain readers) comes from a Reorder of it. */
        char fresh[256], orig[256];
        snprintf(orig, sizeof orig, "%s", cge_graph_value_name(g, y));
        cc_fresh_name(ctx, g, orig, fresh, sizeof fresh);
        int32_t plain_id;
        st = cge_node_set_output(c, 0, fresh);
        if (!st)
            st = cge_graph_set_format(g, fresh, CGE_FORMAT_NHWC);
        if (!st)
            st = add_reorder(ctx, g, cge_graph_value_id(g, fresh), CGE_FORMAT_PLAIN, orig,
                             &plain_id);
        for (int32_t k = 0; k < count && !st; k++)
            if (cand[cge_node_index(uses[k].node)] && activation_slot(uses[k].node, uses[k].slot))
                st = cge_node_set_input(uses[k].node, uses[k].slot, fresh);
    }
    free(uses);
    return st;
}

typedef struct in_cache {
    int32_t *from, *to;
    int32_t n;
} in_cache;

/* X and Z of candidate `c` in NHWC: values from outside a chain are
 * reordered once each, however many candidates read them. */
static cge_status convert_inputs(cc_ctx *ctx, cge_graph *g, cge_node *c, in_cache *cache)
{
    for (int32_t slot = 0; slot < cge_node_num_inputs(c); slot++) {
        if (!activation_slot(c, slot))
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
    bool *cand = calloc((size_t)nn + 1, sizeof *cand);
    cge_node **list = malloc(sizeof *list * ((size_t)nn + 1));
    in_cache cache = {malloc(sizeof(int32_t) * (2 * (size_t)nn + 1)),
                      malloc(sizeof(int32_t) * (2 * (size_t)nn + 1)), 0};
    if (!cand || !list || !cache.from || !cache.to) {
        free(cand), free(list), free(cache.from), free(cache.to);
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "layout_channels_last: out of memory");
    }
    int32_t nc = 0;
    int32_t nconv = 0;
    for (int32_t i = 0; i < nn; i++) {
        cge_node *n = cge_graph_node(g, i);
        if (n && is_candidate(ctx, g, n)) {
            cand[i] = true;
            list[nc++] = n;
        }
    }
    nconv = nc;
    for (int32_t i = 0; i < nn; i++) {
        cge_node *n = cge_graph_node(g, i);
        if (n && is_pool(n)) {
            cand[i] = true;
            list[nc++] = n;
        }
    }
    cc_uses u;
    cge_status st = nc ? cc_uses_build(&u, g) : CGE_OK;
    if (nc && !st) {
        /* Outputs first (uses as the graph had them), then inputs. */
        for (int32_t k = 0; k < nc && !st; k++)
            st = convert_output(ctx, &u, g, list[k], cand);
        cc_uses_free(&u);
        for (int32_t k = 0; k < nc && !st; k++)
            st = convert_inputs(ctx, g, list[k], &cache);
        for (int32_t k = 0; k < nconv && !st; k++)
            st = cge_node_set_int(list[k], "channels_last", 1);
    }
    free(cand), free(list), free(cache.from), free(cache.to);
    return st;
}
