/* optimize/fuse_dq_matmul: MatMul(A, DequantizeLinear(Wq, scale, zp)) with a
 * constant int8/uint8 Wq [K, N] and per-tensor or per-column (axis 1) scales
 * — a weight-only quantized product with float activations — becomes one
 * com.microsoft MatMulNBits (8 bits): the weights stay one byte each and are
 * dequantised in the kernel's registers instead of into a float copy. */
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler_internal.h"

/* It runs before fold_constants, which would otherwise turn a small
 * DequantizeLinear of constants into float32 weights (4x the bytes a token
 * reads). The codes are repacked into MatMulNBits' layout ([N, n_blocks,
 * block], as ONNX Runtime's): int8 codes shifted by 128 into uint8 with the
 * zero point shifted alike, so (q - z) is unchanged; each column's scale and
 * zero point repeated for its blocks of 128 (32 or 16 for small K). Results
 * differ from the unfused product by float rounding (the sum's order). */

static bool const_of(const cge_graph *g, const cge_node *n, int32_t i, const cge_tensor **t)
{
    *t = i < cge_node_num_inputs(n) && cge_node_input_id(n, i) >= 0 ? cc_input_const(g, n, i) : NULL;
    return *t != NULL;
}

static cge_status try_fuse(cc_ctx *ctx, cc_uses *u, cge_graph *g, cge_node *mm)
{
    int32_t b = cge_node_input_id(mm, 1);
    cge_node *dq = b >= 0 ? cge_graph_value_producer(g, b) : NULL;
    if (!dq || !cc_is_op(dq, "DequantizeLinear") || cge_node_num_outputs(dq) != 1)
        return CGE_OK;
    cge_tensor_desc ad = cc_in_desc(g, mm, 0), yd = cc_out_desc(g, mm, 0);
    const cge_tensor *w, *s, *z = NULL;
    if (ad.dtype != CGE_F32 || yd.dtype != CGE_F32 || ad.shape.rank < 1 || !const_of(g, dq, 0, &w) ||
        !const_of(g, dq, 1, &s) || (cge_node_num_inputs(dq) > 2 && cge_node_input_id(dq, 2) >= 0 &&
                                    !const_of(g, dq, 2, &z)))
        return CGE_OK;
    if ((w->dtype != CGE_I8 && w->dtype != CGE_U8) || w->shape.rank != 2 || s->dtype != CGE_F32 ||
        (z && z->dtype != w->dtype))
        return CGE_OK;
    int64_t K = w->shape.dims[0], N = w->shape.dims[1], ns = cge_shape_numel(&s->shape);
    int64_t axis = cge_attrs_get_int(cge_node_attrs_const(dq), "axis", 1);
    bool per_col = ns == N && ns > 1;
    if (K <= 0 || N <= 0 || (ns != 1 && !(per_col && (axis == 1 || axis == -1))) ||
        (z && cge_shape_numel(&z->shape) != ns))
        return CGE_OK;
    int64_t bs = K >= 128 ? 128 : K >= 32 ? 32 : 16, nb = (K + bs - 1) / bs;
    uint8_t *codes = calloc((size_t)(N * nb * bs), 1);
    float *scales = malloc(sizeof(float) * (size_t)(N * nb));
    uint8_t *zps = malloc((size_t)(N * nb));
    cge_status st = codes && scales && zps ? CGE_OK
                                           : cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY,
                                                       "fuse_dq_matmul: out of memory");
    bool sgn = w->dtype == CGE_I8;
    const uint8_t *wq = w->data, *zq = z ? z->data : NULL;
    const float *sv = s->data;
    for (int64_t n = 0; !st && n < N; n++) {
        int64_t c = per_col ? n : 0;
        int zp = zq ? (sgn ? (int)(int8_t)zq[c] + 128 : zq[c]) : (sgn ? 128 : 0);
        for (int64_t blk = 0; blk < nb; blk++) {
            scales[n * nb + blk] = sv[c];
            zps[n * nb + blk] = (uint8_t)zp;
        }
        /* Padding codes equal the zero point: they would add nothing even
         * against a nonzero A (the kernel pads A with zeros anyway). */
        for (int64_t k = 0; k < nb * bs; k++) {
            int q = k < K ? (sgn ? (int)(int8_t)wq[k * N + n] + 128 : wq[k * N + n]) : zp;
            codes[n * nb * bs + k] = (uint8_t)q;
        }
    }
    char bname[256], sname[256], zname[256], name[256];
    cge_shape bsh = CGE_SHAPE(N, nb, bs), ssh = CGE_SHAPE(N * nb);
    if (!st)
        st = cc_add_const(ctx, g, "wq_codes", CGE_U8, &bsh, codes, bname, sizeof bname);
    if (!st)
        st = cc_add_const(ctx, g, "wq_scales", CGE_F32, &ssh, scales, sname, sizeof sname);
    if (!st)
        st = cc_add_const(ctx, g, "wq_zero_points", CGE_U8, &ssh, zps, zname, sizeof zname);
    free(codes), free(scales), free(zps);
    if (st)
        return st;
    char out[256], tmp[256];
    snprintf(out, sizeof out, "%s", cge_graph_value_name(g, cge_node_output_id(mm, 0)));
    const char *ins[4] = {cge_graph_value_name(g, cge_node_input_id(mm, 0)), bname, sname, zname};
    const char *o = out;
    cc_fresh_name(ctx, g, cge_node_name(mm), name, sizeof name);
    st = cge_node_set_output(mm, 0, cc_fresh_name(ctx, g, out, tmp, sizeof tmp));
    cge_node *f = NULL;
    if (!st)
        st = cge_graph_add_node(g, "MatMulNBits", "com.microsoft", name, ins, 4, &o, 1, &f);
    if (!st)
        st = cge_graph_remove_node(g, mm);
    if (!st)
        st = cge_node_set_int(f, "K", K);
    if (!st)
        st = cge_node_set_int(f, "N", N);
    if (!st)
        st = cge_node_set_int(f, "bits", 8);
    if (!st)
        st = cge_node_set_int(f, "block_size", bs);
    if (!st) {
        ctx->fused += 2;
        ctx->removed++;
        ctx->added++;
        st = cc_uses_add_node(u, f);
    }
    /* The DequantizeLinear goes with its last use (dce). */
    return st;
}

cge_status cc_pass_fuse_dq_matmul(cc_ctx *ctx, cge_graph *g)
{
    cc_uses u;
    cge_status st = cc_uses_build(&u, g);
    int32_t nn = cge_graph_num_nodes(g);
    for (int32_t i = 0; !st && i < nn; i++) {
        cge_node *n = cge_graph_node(g, i);
        if (cc_is_op(n, "MatMul") && cge_node_num_inputs(n) == 2)
            st = try_fuse(ctx, &u, g, n);
    }
    cc_uses_free(&u);
    return st;
}
