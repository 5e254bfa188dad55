/* optimize/fuse_conv_bn: an inference BatchNormalization right after a Conv
 * with constant float32 weights is folded into the Conv's weights and bias. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler_internal.h"

/* The folding:
 *   s = scale / sqrt(var + eps);  W' = W * s (per output channel);
 *   B' = (B - mean) * s + beta
 * computed in double and rounded once, so results differ by rounding only. */

static const float *per_channel(const cge_graph *g, const cge_node *bn, int32_t i, int64_t m)
{
    const cge_tensor *t = cc_input_const(g, bn, i);
    if (!t || t->dtype != CGE_F32 || cge_shape_numel(&t->shape) != m)
        return NULL;
    return t->data;
}

static cge_status try_fold(cc_ctx *ctx, cc_uses *u, cge_graph *g, cge_node *conv)
{
    int32_t ni = cge_node_num_inputs(conv);
    if (ni < 2 || ni > 3 || cge_node_num_outputs(conv) != 1)
        return CGE_OK;
    const cge_tensor *w = cc_input_const(g, conv, 1);
    const cge_tensor *b = ni == 3 && cge_node_input_id(conv, 2) >= 0 ? cc_input_const(g, conv, 2) : NULL;
    if (!w || w->dtype != CGE_F32 || w->shape.rank < 3 || (ni == 3 && cge_node_input_id(conv, 2) >= 0 && !b))
        return CGE_OK;
    int32_t y = cge_node_output_id(conv, 0);
    cge_node *bn = cc_only_consumer(u, g, y);
    if (!bn || !cc_is_op(bn, "BatchNormalization") || cge_node_num_inputs(bn) != 5 ||
        cge_node_input_id(bn, 0) != y ||
        cge_attrs_get_int(cge_node_attrs_const(bn), "training_mode", 0) != 0)
        return CGE_OK;
    for (int32_t o = 1; o < cge_node_num_outputs(bn); o++)
        if (cc_value_used(u, g, cge_node_output_id(bn, o)))
            return CGE_OK;
    int64_t m = w->shape.dims[0], per = cge_shape_numel(&w->shape) / (m ? m : 1);
    const float *scale = per_channel(g, bn, 1, m), *beta = per_channel(g, bn, 2, m);
    const float *mean = per_channel(g, bn, 3, m), *var = per_channel(g, bn, 4, m);
    if (!scale || !beta || !mean || !var || (b && cge_shape_numel(&b->shape) != m))
        return CGE_OK;
    double eps = cge_attrs_get_float(cge_node_attrs_const(bn), "epsilon", 1e-5f);
    float *nw = malloc(w->bytes ? w->bytes : 1), *nb = malloc(sizeof(float) * (size_t)(m ? m : 1));
    cge_status st = nw && nb ? CGE_OK
                             : cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "fuse_conv_bn: out of memory");
    const float *wd = w->data;
    for (int64_t c = 0; !st && c < m; c++) {
        double s = (double)scale[c] / sqrt((double)var[c] + eps);
        for (int64_t k = 0; k < per; k++)
            nw[c * per + k] = (float)((double)wd[c * per + k] * s);
        double bias = b ? ((const float *)b->data)[c] : 0.0;
        nb[c] = (float)((bias - mean[c]) * s + beta[c]);
    }
    char wname[256], bname[256], name[256];
    cge_shape bs = CGE_SHAPE(m);
    if (!st)
        st = cc_add_const(ctx, g, "conv_w", CGE_F32, &w->shape, nw, wname, sizeof wname);
    if (!st)
        st = cc_add_const(ctx, g, "conv_b", CGE_F32, &bs, nb, bname, sizeof bname);
    free(nw);
    free(nb);
    if (st)
        return st;
    const char *ins[3] = {cge_node_input(conv, 0), wname, bname};
    const char *out = cge_graph_value_name(g, cge_node_output_id(bn, 0));
    cc_fresh_name(ctx, g, cge_node_name(conv), name, sizeof name);
    cge_node *nc = NULL;
    /* The new Conv takes the attributes; then both old nodes go. */
    st = cge_graph_remove_node(g, bn);
    if (!st)
        st = cge_graph_add_node(g, "Conv", "", name, ins, 3, &out, 1, &nc);
    if (!st)
        st = cc_copy_attrs(nc, conv);
    if (!st)
        st = cge_graph_remove_node(g, conv);
    if (!st) {
        ctx->fused += 2;
        ctx->removed += 2;
        ctx->added++;
        st = cc_uses_add_node(u, nc);
    }
    return st;
}

cge_status cc_pass_fuse_conv_bn(cc_ctx *ctx, cge_graph *g)
{
    cc_uses u;
    cge_status st = cc_uses_build(&u, g);
    int32_t nn = cge_graph_num_nodes(g);
    for (int32_t i = 0; !st && i < nn; i++) {
        cge_node *n = cge_graph_node(g, i);
        if (cc_is_op(n, "Conv"))
            st = try_fold(ctx, &u, g, n);
    }
    cc_uses_free(&u);
    return st;
}
