/* optimize/channels_last_pools (level 3): a float32 MaxPool (without
 * Indices), AveragePool, GlobalMaxPool or GlobalAveragePool whose input comes
 * from a convolution that partition/layout_channels_last will make
 * channels-last (a FusedConv with constant W), or from another such pool,
 * becomes a cge.fused ChannelsLastPool, so that the activations stay NHWC
 * through it instead of being reordered out and back in. Needs oneDNN (the
 * convolutions' channels-last kernels); without it nothing changes. */
#include <string.h>

#include "compiler/compiler_internal.h"
#include "ops/conv_fused.h"

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

static bool is_fused(const cge_node *n, const char *op)
{
    return n && !cge_node_is_removed(n) && !strcmp(cge_node_op_type(n), op) &&
           !strcmp(cge_node_domain(n), CC_FUSED_DOMAIN);
}

/* Whether X's producer will hand over NHWC data. */
static bool feeds_nhwc(const cge_graph *g, int32_t x)
{
    const cge_node *p = cge_graph_value_producer(g, x);
    if (is_fused(p, "ChannelsLastPool"))
        return true;
    return is_fused(p, "FusedConv") && cge_attrs_get_int(cge_node_attrs_const(p), "w_const", 0);
}

static bool eligible(const cge_graph *g, const cge_node *n)
{
    if (!pool_mode(n) || cge_node_num_inputs(n) != 1)
        return false;
    /* MaxPool's Indices are positions in the NCHW tensor */
    for (int32_t k = 1; k < cge_node_num_outputs(n); k++)
        if (cge_node_output_id(n, k) >= 0)
            return false;
    int32_t x = cge_node_input_id(n, 0), y = cge_node_output_id(n, 0);
    cge_tensor_desc xd, yd;
    if (x < 0 || y < 0 || cge_graph_value_desc(g, x, &xd) || cge_graph_value_desc(g, y, &yd))
        return false;
    if (xd.dtype != CGE_F32 || xd.shape.rank < 3 || xd.shape.rank > 5 ||
        !cge_shape_is_static(&xd.shape) || !cge_shape_is_static(&yd.shape))
        return false;
    /* LpPool-style attributes have no place here; MaxPool's storage_order
     * only concerns Indices. */
    return feeds_nhwc(g, x);
}

static cge_status convert(cc_ctx *ctx, cge_graph *g, cge_node *n)
{
    const char *mode = pool_mode(n);
    const char *in = cge_graph_value_name(g, cge_node_input_id(n, 0));
    char out[256], name[256];
    snprintf(out, sizeof out, "%s", cge_graph_value_name(g, cge_node_output_id(n, 0)));
    cc_fresh_name(ctx, g, cge_node_name(n), name, sizeof name);
    /* The pool's output name passes to the new node: a temporary name for
     * the old one first, so that both can exist while attributes are copied. */
    char tmp[256];
    cge_status st = cge_node_set_output(n, 0, cc_fresh_name(ctx, g, out, tmp, sizeof tmp));
    cge_node *f = NULL;
    const char *outs[1] = {out};
    if (!st)
        st = cge_graph_add_node(g, "ChannelsLastPool", CC_FUSED_DOMAIN, name, &in, 1, outs, 1, &f);
    if (!st)
        st = cc_copy_attrs(f, n);
    if (!st && cge_attrs_find(cge_node_attrs(f), "storage_order"))
        st = cge_attrs_remove(cge_node_attrs(f), "storage_order");
    if (!st)
        st = cge_node_set_string(f, "mode", mode);
    if (!st)
        st = cge_graph_remove_node(g, n);
    if (!st) {
        ctx->fused++;
        ctx->removed++;
        ctx->added++;
    }
    return st;
}

cge_status cc_pass_channels_last_pools(cc_ctx *ctx, cge_graph *g)
{
    if (!cge_fused_conv_channels_last_available())
        return CGE_OK;
    /* Until nothing changes: a pool may read another pool added later in
     * node order. */
    cge_status st = CGE_OK;
    for (bool changed = true; changed && !st;) {
        changed = false;
        int32_t nn = cge_graph_num_nodes(g);
        for (int32_t i = 0; i < nn && !st; i++) {
            cge_node *n = cge_graph_node(g, i);
            if (n && eligible(g, n)) {
                st = convert(ctx, g, n);
                changed = true;
            }
        }
    }
    return st;
}
