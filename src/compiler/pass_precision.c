/* optimize/precision: with cge_compile_options.precision bf16, the heavy
 * float32 operators run in bfloat16 with float32 accumulation: FusedMatMul
 * and MatMul become cge.fused MatMulBF16, Conv and FusedConv get FusedConv's
 * precision "bf16". Also the precision names. */
#include <string.h>

#include "cge/fused_ops.h"
#include "compiler/compiler_internal.h"
#include "ops/matmul_bf16.h"

const char *cge_precision_name(cge_precision p)
{
    return p == CGE_PRECISION_BF16 ? "bf16" : p == CGE_PRECISION_FP32 ? "fp32" : "invalid";
}

int cge_precision_from_name(const char *name)
{
    if (!name)
        return -1;
    if (!strcmp(name, "fp32") || !strcmp(name, "float32") || !strcmp(name, "f32"))
        return CGE_PRECISION_FP32;
    if (!strcmp(name, "bf16") || !strcmp(name, "bfloat16"))
        return CGE_PRECISION_BF16;
    return -1;
}

bool cge_precision_bf16_available(void)
{
    return cge__bf16_available();
}

/* The rewrite happens in the graph, not in the kernels' choices at run time,
 * so that the plan, its dump and a saved model file say which operators run
 * in bfloat16, and a loaded file runs as it was compiled. Gemm with transA,
 * alpha or beta (left by fuse_matmul_epilogue), ConvTranspose and
 * depthwise convolutions (cge's own kernel) stay float32. */

static bool f32(const cge_graph *g, int32_t id, cge_tensor_desc *d)
{
    return id >= 0 && !cge_graph_value_desc(g, id, d) && d->dtype == CGE_F32;
}

/* Replace `n` by a node of (op, domain) with its inputs, outputs and
 * attributes: the output names pass to the new node. */
static cge_status replace(cc_ctx *ctx, cge_graph *g, cge_node *n, const char *op,
                          const char *domain, cge_node **out)
{
    int32_t ni = cge_node_num_inputs(n);
    const char *ins[8];
    if (ni > 8 || cge_node_num_outputs(n) != 1)
        return CGE_OK;
    for (int32_t i = 0; i < ni; i++) {
        int32_t id = cge_node_input_id(n, i);
        ins[i] = id >= 0 ? cge_graph_value_name(g, id) : "";
    }
    char name[256], tmp[256], outname[256];
    snprintf(outname, sizeof outname, "%s", cge_graph_value_name(g, cge_node_output_id(n, 0)));
    const char *o = outname;
    cc_fresh_name(ctx, g, cge_node_name(n), name, sizeof name);
    cge_status st = cge_node_set_output(n, 0, cc_fresh_name(ctx, g, outname, tmp, sizeof tmp));
    if (!st)
        st = cge_graph_add_node(g, op, domain, name, ins, ni, &o, 1, out);
    if (!st)
        st = cc_copy_attrs(*out, n);
    if (!st)
        st = cge_graph_remove_node(g, n);
    if (!st) {
        ctx->removed++;
        ctx->added++;
    }
    return st;
}

static cge_status rewrite(cc_ctx *ctx, cge_graph *g, cge_node *n)
{
    cge_tensor_desc a, b, y;
    int32_t ia = cge_node_input_id(n, 0), ib = cge_node_num_inputs(n) > 1 ? cge_node_input_id(n, 1) : -1;
    if (cge_node_num_outputs(n) != 1 || !f32(g, ia, &a) || !f32(g, ib, &b) ||
        !f32(g, cge_node_output_id(n, 0), &y))
        return CGE_OK;
    cge_node *f = NULL;
    cge_status st = CGE_OK;
    if (cc_is_fused_op(n, "FusedConv")) {
        return cge_node_set_string(n, "precision", "bf16");
    } else if (cc_is_op(n, "Conv")) {
        /* Weights converted once need them constant; FusedConv carries the
         * precision (Conv's schema has no room for it). */
        if (!cge_graph_value_constant(g, ib))
            return CGE_OK;
        st = replace(ctx, g, n, "FusedConv", CGE_DOMAIN_FUSED, &f);
        if (!st && f)
            st = cge_node_set_int(f, "w_const", 1);
        if (!st && f)
            st = cge_node_set_string(f, "precision", "bf16");
    } else if (cc_is_fused_op(n, "FusedMatMul")) {
        /* MatMulBF16 has no residual input: such a product stays float32. */
        if (cge_node_num_inputs(n) > 3 && cge_node_input_id(n, 3) >= 0)
            return CGE_OK;
        st = replace(ctx, g, n, "MatMulBF16", CGE_DOMAIN_FUSED, &f);
    } else if (cc_is_op(n, "MatMul")) {
        if (a.shape.rank < 2 || b.shape.rank < 2)
            return CGE_OK;
        st = replace(ctx, g, n, "MatMulBF16", CGE_DOMAIN_FUSED, &f);
        if (!st && f && b.shape.rank == 2 && cge_graph_value_constant(g, ib))
            st = cge_node_set_int(f, "b_const", 1);
    }
    return st;
}

cge_status cc_pass_precision(cc_ctx *ctx, cge_graph *g)
{
    if (ctx->opts.precision != CGE_PRECISION_BF16 || !cge__bf16_available())
        return CGE_OK;
    cge_status st = CGE_OK;
    int32_t nn = cge_graph_num_nodes(g);
    for (int32_t i = 0; !st && i < nn; i++) {
        cge_node *n = cge_graph_node(g, i);
        if (n && cge_node_num_inputs(n) >= 2)
            st = rewrite(ctx, g, n);
    }
    return st;
}
