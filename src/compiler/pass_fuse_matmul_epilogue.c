/* optimize/fuse_matmul_epilogue: MatMul or Gemm followed by a bias add, an
 * activation and/or a residual add becomes one cge.fused FusedMatMul, and so
 * does a lone product whose B is a constant. */
#include <math.h>
#include <string.h>

#include "cge/fused_ops.h"
#include "compiler/compiler_internal.h"
#include "ops/matmul_bf16.h"

/* What qualifies: MatMul (A [..., M, K] x B [K, N]) or Gemm (no transA,
 * alpha = beta = 1), a bias add of N elements, an activation among Relu,
 * Sigmoid, Tanh, Gelu, LeakyRelu and Clip. The bias and activation are
 * applied to each tile of the product while it is in cache, and the
 * intermediates never exist. The GEMM adds the bias as the unfused Add would:
 * results match to rounding. Then an Add of a tensor of the output's own shape
 * (a transformer's residual: x + proj(attn), x + mlp(x)) is taken as the
 * epilogue's last operation, one float add per element as the Add did, so the
 * same bits as the unfused Add; a decoding step loses one launch per residual
 * and an encoder one pass over its activations. A product whose B is a constant is rewritten
 * even alone (b_const): its kernel packs B once per plan instead of on every
 * run. */

static bool f32(const cge_graph *g, int32_t id)
{
    cge_tensor_desc d;
    return id >= 0 && !cge_graph_value_desc(g, id, &d) && d.dtype == CGE_F32 &&
           cge_shape_is_static(&d.shape);
}

/* A float32 A whose rows may be symbolic (batch, sequence): only K, its
 * last dim, must be known; the kernel gets every size at run time. */
static bool f32_rows(const cge_graph *g, int32_t id)
{
    cge_tensor_desc d;
    return id >= 0 && !cge_graph_value_desc(g, id, &d) && d.dtype == CGE_F32 &&
           d.shape.rank >= 1 && cge_dim_is_known(d.shape.dims[d.shape.rank - 1]);
}

static cge_status try_fuse(cc_ctx *ctx, cc_uses *u, cge_graph *g, cge_node *mm)
{
    bool gemm = cc_is_op(mm, "Gemm");
    int32_t a = cge_node_input_id(mm, 0), b = cge_node_input_id(mm, 1), bias = -1;
    if (!f32_rows(g, a) || !f32(g, b) || cge_node_num_outputs(mm) != 1)
        return CGE_OK;
    cge_tensor_desc ad, bd, yd = cc_out_desc(g, mm, 0);
    cge_graph_value_desc(g, a, &ad);
    cge_graph_value_desc(g, b, &bd);
    int64_t trans_b = 0;
    if (gemm) {
        const cge_attrs *at = cge_node_attrs_const(mm);
        if (cge_attrs_get_int(at, "transA", 0) || cge_attrs_get_float(at, "alpha", 1.0f) != 1.0f ||
            cge_attrs_get_float(at, "beta", 1.0f) != 1.0f || ad.shape.rank != 2)
            return CGE_OK;
        trans_b = cge_attrs_get_int(at, "transB", 0) != 0;
        if (cge_node_num_inputs(mm) == 3 && cge_node_input_id(mm, 2) >= 0)
            bias = cge_node_input_id(mm, 2);
    } else if (ad.shape.rank < 2) {
        return CGE_OK;
    }
    if (bd.shape.rank != 2 || yd.dtype != CGE_F32)
        return CGE_OK;
    int64_t n = trans_b ? bd.shape.dims[0] : bd.shape.dims[1];
    if (ad.shape.dims[ad.shape.rank - 1] == 0)
        return CGE_OK;
    if (bias >= 0) {
        cge_tensor_desc cd;
        cge_graph_value_desc(g, bias, &cd);
        if (!f32(g, bias) || cge_shape_numel(&cd.shape) != n || cd.shape.dims[cd.shape.rank - 1] != n)
            return CGE_OK; /* Gemm's C of [M, N] stays a Gemm */
    }
    cge_node *nodes[5] = {mm, NULL, NULL, NULL, NULL};
    int32_t count = 1, cur = cge_node_output_id(mm, 0);
    cge_node *next = cc_only_consumer(u, g, cur);
    if (!gemm && next && cc_is_op(next, "Add")) {
        int32_t o = cc_other_input(next, cur);
        cge_tensor_desc od, sd = cc_out_desc(g, next, 0);
        if (o >= 0 && o != cur && f32(g, o) && !cge_graph_value_desc(g, o, &od) &&
            cge_shape_numel(&od.shape) == n && od.shape.dims[od.shape.rank - 1] == n &&
            cge_shape_equal(&sd.shape, &yd.shape)) {
            bias = o;
            nodes[count++] = next;
            cur = cge_node_output_id(next, 0);
            next = cc_only_consumer(u, g, cur);
        }
    }
    cc_activation av = {0};
    cge_node *gate = NULL, *mul = NULL;
    const char *act = NULL;
    if (cc_match_gated(u, g, cur, &gate, &mul) && cc_is_op(gate, "Sigmoid")) {
        /* y * Sigmoid(y): SiLU (SwiGLU's gate, efficientnet's head) */
        cge_tensor_desc sd = cc_out_desc(g, mul, 0);
        if (sd.dtype == CGE_F32 && cge_shape_equal(&sd.shape, &yd.shape)) {
            av = (cc_activation){.name = "silu", .alpha = 0.01f, .lo = -INFINITY, .hi = INFINITY};
            act = av.name;
            nodes[count++] = gate;
            nodes[count++] = mul;
            cur = cge_node_output_id(mul, 0);
        }
    } else if (next && cc_match_activation(g, next, true, &av)) {
        act = av.name;
        cge_tensor_desc sd = cc_out_desc(g, next, 0);
        if (sd.dtype != CGE_F32 || !cge_shape_equal(&sd.shape, &yd.shape))
            act = NULL;
        if (act) {
            nodes[count++] = next;
            cur = cge_node_output_id(next, 0);
        }
    }
    /* The residual: an Add whose other operand has the output's shape. It
     * cannot depend on the chain (each link has one use, the next link). */
    int32_t res = -1;
    /* Not under precision bf16: MatMulBF16, which the precision pass makes
     * of FusedMatMul, has no residual input. */
    bool bf16 = ctx->opts.precision == CGE_PRECISION_BF16 && cge__bf16_available();
    next = cc_only_consumer(u, g, cur);
    if (!bf16 && next && cc_is_op(next, "Add") && cge_node_num_inputs(next) == 2) {
        int32_t o = cc_other_input(next, cur);
        cge_tensor_desc od, sd = cc_out_desc(g, next, 0);
        if (o >= 0 && o != cur && !cge_graph_value_desc(g, o, &od) && od.dtype == CGE_F32 &&
            cge_shape_equal(&od.shape, &yd.shape) && sd.dtype == CGE_F32 &&
            cge_shape_equal(&sd.shape, &yd.shape)) {
            res = o;
            nodes[count++] = next;
            cur = cge_node_output_id(next, 0);
        }
    }
    /* A lone product gains only when its constant B can be packed once. */
    bool b_const = cge_graph_value_constant(g, b) != NULL;
    if (count == 1 && !b_const)
        return CGE_OK;
    const char *ins[4] = {cge_graph_value_name(g, a), cge_graph_value_name(g, b),
                          bias >= 0 ? cge_graph_value_name(g, bias) : "",
                          res >= 0 ? cge_graph_value_name(g, res) : ""};
    const char *out = cge_graph_value_name(g, cur);
    char name[256];
    cc_fresh_name(ctx, g, cge_node_name(mm), name, sizeof name);
    cge_status st = CGE_OK;
    for (int32_t k = 0; k < count && !st; k++)
        st = cge_graph_remove_node(g, nodes[k]);
    cge_node *f = NULL;
    if (!st)
        st = cge_graph_add_node(g, "FusedMatMul", CGE_DOMAIN_FUSED, name, ins,
                                res >= 0 ? 4 : bias >= 0 ? 3 : 2, &out, 1, &f);
    if (!st && act)
        st = cc_set_activation(f, &av);
    if (!st && trans_b)
        st = cge_node_set_int(f, "trans_b", 1);
    if (!st && b_const)
        st = cge_node_set_int(f, "b_const", 1);
    if (!st)
        st = cc_fused_node(ctx, u, f, count);
    return st;
}

cge_status cc_pass_fuse_matmul_epilogue(cc_ctx *ctx, cge_graph *g)
{
    cc_uses u;
    cge_status st = cc_uses_build(&u, g);
    int32_t nn = cge_graph_num_nodes(g);
    for (int32_t i = 0; !st && i < nn; i++) {
        cge_node *n = cge_graph_node(g, i);
        if ((cc_is_op(n, "MatMul") || cc_is_op(n, "Gemm")) && cge_node_num_inputs(n) >= 2)
            st = try_fuse(ctx, &u, g, n);
    }
    cc_uses_free(&u);
    return st;
}
