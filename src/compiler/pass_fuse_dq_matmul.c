/* optimize/fuse_dq_matmul: MatMul(A, DequantizeLinear(Wq, scale, zp)) with a
 * constant int8/uint8 Wq [K, N] and per-tensor, per-column (axis 1) or
 * blocked (opset 21: block_size along axis 0, K) scales — a weight-only
 * quantized product with float activations — becomes one com.microsoft
 * MatMulNBits: 4-bit codes where every code and zero point fits in 4 bits
 * (int4/uint4 weights, unpacked into int8/uint8 on import), else 8-bit. The
 * weights stay packed and are dequantised in the kernel's registers instead
 * of into a float copy. */
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler_internal.h"

/* It runs before fold_constants, which would otherwise turn a small
 * DequantizeLinear of constants into float32 weights (4x the bytes a token
 * reads, 8x for 4-bit weights). The codes are repacked into MatMulNBits'
 * layout ([N, n_blocks, block * bits / 8], as ONNX Runtime's): int8 codes
 * shifted by 2^(bits-1) into unsigned ones with the zero point shifted
 * alike, so (q - z) is unchanged. Without DQ blocks each column's scale and
 * zero point are repeated for blocks of 128 (32 or 16 for small K); with DQ
 * blocks of B, MatMulNBits' block is the largest power of two >= 16 that
 * divides B (B itself when it is one), so that every kernel block lies in one
 * DQ block; a DQ block size that is not a multiple of 16 stays unfused (it
 * runs as written, and constant folding makes its weights float). Results
 * differ from the unfused product by float rounding (the sum's order). */

static bool const_of(const cge_graph *g, const cge_node *n, int32_t i, const cge_tensor **t)
{
    *t = i < cge_node_num_inputs(n) && cge_node_input_id(n, i) >= 0 ? cc_input_const(g, n, i) : NULL;
    return *t != NULL;
}

/* The largest power of two >= 16 dividing b (capped at 256), or 0. */
static int64_t kernel_block(int64_t b)
{
    int64_t p = 0;
    for (int64_t c = 16; c <= 256 && b % c == 0; c *= 2)
        p = c;
    return p;
}

typedef struct dq_weight {
    const uint8_t *wq, *zq;
    const float *sv;
    bool sgn, per_col;
    int64_t K, N, dq_block; /* dq_block 0: per tensor / per column */
} dq_weight;

/* Code, zero point and scale of element (k, n), zero points unshifted. */
static inline int code_of(const dq_weight *w, int64_t k, int64_t n)
{
    return w->sgn ? (int)(int8_t)w->wq[k * w->N + n] : w->wq[k * w->N + n];
}

static inline int64_t param_idx(const dq_weight *w, int64_t k, int64_t n)
{
    if (w->dq_block)
        return (k / w->dq_block) * w->N + n;
    return w->per_col ? n : 0;
}

static inline int zp_of(const dq_weight *w, int64_t i)
{
    return !w->zq ? 0 : w->sgn ? (int)(int8_t)w->zq[i] : w->zq[i];
}

/* 4 bits when every code and zero point, shifted to unsigned, fits. */
static int bits_needed(const dq_weight *w, int64_t nparams)
{
    int shift = w->sgn ? 8 : 0;
    for (int64_t i = 0; i < w->K * w->N; i++) {
        int q = (w->sgn ? (int)(int8_t)w->wq[i] : w->wq[i]) + shift;
        if (q < 0 || q > 15)
            return 8;
    }
    for (int64_t i = 0; i < nparams; i++) {
        int z = zp_of(w, i) + shift;
        if (z < 0 || z > 15)
            return 8;
    }
    return 4;
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
    const cge_attrs *da = cge_node_attrs_const(dq);
    int64_t K = w->shape.dims[0], N = w->shape.dims[1], ns = cge_shape_numel(&s->shape);
    int64_t axis = cge_attrs_get_int(da, "axis", 1), dqb = cge_attrs_get_int(da, "block_size", 0);
    if (K <= 0 || N <= 0 || (z && cge_shape_numel(&z->shape) != ns))
        return CGE_OK;
    dq_weight dw = {.wq = w->data, .zq = z ? z->data : NULL, .sv = s->data,
                    .sgn = w->dtype == CGE_I8, .K = K, .N = N};
    int64_t bs;
    if (dqb > 0) {
        /* blocks along K only: scale [ceil(K / B), N] */
        int64_t nbq = (K + dqb - 1) / dqb;
        if ((axis != 0 && axis != -2) || s->shape.rank != 2 || s->shape.dims[0] != nbq ||
            s->shape.dims[1] != N || !(bs = kernel_block(dqb)))
            return CGE_OK;
        dw.dq_block = dqb;
    } else {
        dw.per_col = ns == N && ns > 1;
        if (ns != 1 && !(dw.per_col && (axis == 1 || axis == -1)))
            return CGE_OK;
        bs = K >= 128 ? 128 : K >= 32 ? 32 : 16;
    }
    int bits = bits_needed(&dw, ns);
    int shift = bits == 4 ? 8 : 128;
    int64_t nb = (K + bs - 1) / bs, blob = bs * bits / 8, zrow = (nb * bits + 7) / 8;
    uint8_t *codes = calloc((size_t)(N * nb * blob), 1);
    float *scales = malloc(sizeof(float) * (size_t)(N * nb));
    uint8_t *zps = calloc((size_t)(N * zrow), 1);
    cge_status st = codes && scales && zps ? CGE_OK
                                           : cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY,
                                                       "fuse_dq_matmul: out of memory");
    for (int64_t n = 0; !st && n < N; n++) {
        uint8_t *col = codes + n * nb * blob;
        for (int64_t blk = 0; blk < nb; blk++) {
            int64_t p = param_idx(&dw, blk * bs, n);
            int zp = zp_of(&dw, p) + (dw.sgn ? shift : 0);
            scales[n * nb + blk] = dw.sv[p];
            if (bits == 8)
                zps[n * zrow + blk] = (uint8_t)zp;
            else
                zps[n * zrow + blk / 2] |= (uint8_t)(zp << (4 * (blk & 1)));
            /* Padding codes equal the zero point: they would add nothing
             * even against a nonzero A (the kernel pads A with zeros anyway). */
            for (int64_t j = 0; j < bs; j++) {
                int64_t k = blk * bs + j;
                int q = k < K ? code_of(&dw, k, n) + (dw.sgn ? shift : 0) : zp;
                if (bits == 8)
                    col[k] = (uint8_t)q;
                else
                    col[k / 2] |= (uint8_t)(q << (4 * (k & 1)));
            }
        }
    }
    char bname[256], sname[256], zname[256], name[256];
    cge_shape bsh = CGE_SHAPE(N, nb, blob), ssh = CGE_SHAPE(N * nb), zsh = CGE_SHAPE(N * zrow);
    if (!st)
        st = cc_add_const(ctx, g, "wq_codes", CGE_U8, &bsh, codes, bname, sizeof bname);
    if (!st)
        st = cc_add_const(ctx, g, "wq_scales", CGE_F32, &ssh, scales, sname, sizeof sname);
    if (!st)
        st = cc_add_const(ctx, g, "wq_zero_points", CGE_U8, &zsh, zps, zname, sizeof zname);
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
        st = cge_node_set_int(f, "bits", bits);
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
