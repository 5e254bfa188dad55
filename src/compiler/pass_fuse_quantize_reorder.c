/* partition/fuse_quantize_reorder: a QuantizeLinear of float32 NCHW data
 * whose one reader is the Reorder to NHWC that layout_channels_last put
 * before an int8 QConv (a quantized model's input) becomes one
 * cge.fused QuantizeNHWC, which quantizes and writes channels-last. */
#include <string.h>

#include "cge/fused_ops.h"
#include "compiler/compiler_internal.h"

/* Why: the two ran one after the other over the image, the Reorder of the
 * bytes on one thread (mobilenet_v2 int8: 60 + 125 us of its 3.2 ms at one
 * thread). The fused op computes QuantizeLinear's arithmetic per element,
 * so the bytes are the same. */

#define QNHWC_MAX_C 16

static bool one_value(const cge_graph *g, const cge_node *n, int32_t i)
{
    if (i >= cge_node_num_inputs(n) || !cge_node_input(n, i)[0])
        return true; /* absent */
    cge_tensor_desc d = cc_in_desc(g, n, i);
    return cge_shape_is_static(&d.shape) && cge_shape_numel(&d.shape) == 1;
}

/* Reorder r (plain -> NHWC) of QuantizeLinear q's only output, q per tensor
 * from float32 [N, C <= 16, H, W] to int8 / uint8. */
static bool matches(const cc_uses *u, const cge_graph *g, const cge_node *r, cge_node **qout)
{
    if (cge_node_is_removed(r) || strcmp(cge_node_op_type(r), "Reorder") ||
        strcmp(cge_node_domain(r), CGE_DOMAIN_CONVERSION) ||
        cge_node_num_inputs(r) != 1 || cge_node_num_outputs(r) != 1)
        return false;
    const cge_attrs *a = cge_node_attrs_const(r);
    if (cge_attrs_get_int(a, "from", -1) != CGE_FORMAT_PLAIN ||
        cge_attrs_get_int(a, "to", -1) != CGE_FORMAT_NHWC)
        return false;
    int32_t v = cge_node_input_id(r, 0);
    cge_node *q = v >= 0 ? cge_graph_value_producer(g, v) : NULL;
    if (!q || !cc_is_op(q, "QuantizeLinear") ||
        cge_node_num_outputs(q) != 1 || cge_graph_value_is_output(g, v) || cc_uses_count(u, v) != 1)
        return false;
    if (cge_attrs_get_int(cge_node_attrs_const(q), "block_size", 0) != 0 || !one_value(g, q, 1) ||
        !one_value(g, q, 2))
        return false;
    cge_tensor_desc x = cc_in_desc(g, q, 0), s = cc_in_desc(g, q, 1), y = cc_out_desc(g, q, 0);
    if (x.dtype != CGE_F32 || s.dtype != CGE_F32 || x.format != CGE_FORMAT_PLAIN ||
        x.shape.rank != 4 || !cge_shape_is_static(&x.shape) || x.shape.dims[1] > QNHWC_MAX_C ||
        (y.dtype != CGE_U8 && y.dtype != CGE_I8))
        return false;
    *qout = q;
    return true;
}

/* The per-node engine choices follow the node indices, which the pass
 * manager's compaction after this pass shifts past the removed nodes (the
 * passes before build otherwise only add nodes): shift them alike. */
void cc_compact_assignments(cc_ctx *ctx, const cge_graph *g)
{
    int32_t j = 0, n = cge_graph_num_nodes(g);
    for (int32_t i = 0; i < n && i < ctx->node_cap; i++) {
        if (cge_node_is_removed(cge_graph_node(g, i)))
            continue;
        ctx->node_engine[j] = ctx->node_engine[i];
        ctx->node_kernel[j] = ctx->node_kernel[i];
        ctx->node_def[j] = ctx->node_def[i];
        ctx->node_space[j] = ctx->node_space[i];
        j++;
    }
}

cge_status cc_pass_fuse_quantize_reorder(cc_ctx *ctx, cge_graph *g)
{
    cc_uses u;
    cge_status st = cc_uses_build(&u, g);
    if (st)
        return st;
    int32_t count = cge_graph_num_nodes(g);
    for (int32_t i = 0; i < count && !st; i++) {
        cge_node *r = cge_graph_node(g, i), *q = NULL;
        if (!r || !matches(&u, g, r, &q))
            continue;
        /* names first: they live in the nodes about to be removed */
        char ins[3][256], out[256], name[256];
        int32_t ni = cge_node_num_inputs(q) > 2 && cge_node_input(q, 2)[0] ? 3 : 2;
        for (int32_t k = 0; k < ni; k++)
            snprintf(ins[k], sizeof ins[k], "%s", cge_node_input(q, k));
        snprintf(out, sizeof out, "%s", cge_node_output(r, 0));
        cge_tensor_desc yd = cc_out_desc(g, r, 0);
        const char *cins[3] = {ins[0], ins[1], ins[2]}, *couts[1] = {out};
        cc_fresh_name(ctx, g, "QuantizeNHWC", name, sizeof name);
        cge_node *f = NULL;
        st = cge_graph_remove_node(g, r);
        if (!st)
            st = cge_graph_remove_node(g, q);
        if (!st)
            st = cge_graph_add_node(g, "QuantizeNHWC", CGE_DOMAIN_FUSED, name, cins, ni, couts, 1,
                                    &f);
        if (!st)
            st = cge_graph_set_desc(g, out, yd.dtype, &yd.shape);
        if (!st)
            st = cge_graph_set_format(g, out, CGE_FORMAT_NHWC);
        if (!st)
            st = cc_assign_node(ctx, g, cge_node_index(f), -1);
        if (!st) {
            ctx->fused += 2;
            ctx->removed += 2;
            ctx->added++;
            ctx->num_conversions--;
        }
    }
    cc_uses_free(&u);
    if (!st && ctx->fused)
        cc_compact_assignments(ctx, g);
    return st;
}
