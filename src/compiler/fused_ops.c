/* Operators the compiler introduces, registered through the public op API as
 * the library "compiler": cge.fused ElementwiseChain (a float32 bytecode
 * kernel that reads each input once and writes each output once), cge.fused
 * FusedMatMul (the packed GEMM with bias and activation applied to each tile
 * while it is hot), cge.fused FusedConv (kernels in ops/conv.c), cge.fused
 * ChannelsLastPool (kernels in ops/pool_nhwc.c), ChannelsLastConcat and
 * ChannelsLastSplit (ops/transform.c), ChannelsLastAffine
 * and ChannelsLastScale (ops/affine_nhwc.c), LayoutView (ops/transform.c), ChannelsLastResize
 * (ops/resize.c), and the
 * border conversions cge Copy and cge Reorder. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler_internal.h"
#include "ops/affine_nhwc.h"
#include "ops/conv_fused.h"
#include "ops/fast_math.h"
#include "ops/gemm_kernel.h"
#include "ops/kernel_util.h"
#include "ops/pool_nhwc.h"
#include "ops/resize_nhwc.h"
#include "ops/transform_nhwc.h"

/* ---- element functions: the same expressions as the unfused kernels, so
 * that a fused chain gives the same bits ---------------------------------- */

static inline double sigmoid_d(double x)
{
    if (x >= 0.0)
        return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}
static inline float gelu_f(float x) { return (float)(0.5 * (double)x * erfc(-(double)x * M_SQRT1_2)); }
static inline float gelu_tanh_f(float x)
{
    const double k = 0.7978845608028654, d = x;
    return (float)(d * sigmoid_d(2.0 * (k * (d + 0.044715 * d * d * d))));
}

/* ---- ElementwiseChain --------------------------------------------------------- */

#define EW_MAX_IN 16
#define EW_MAX_OUT 8
#define EW_MAX_INSTR 48
#define EW_MAX_IMM 32
#define EW_TILE 128

typedef struct ew_args {
    const float *in[EW_MAX_IN];
    float *out[EW_MAX_OUT];
    int64_t numel;
    int32_t num_in, num_out, num_instr;
    uint8_t scalar[EW_MAX_IN];
    int16_t prog[EW_MAX_INSTR][4];
    int16_t out_reg[EW_MAX_OUT];
    float imm[EW_MAX_IMM];
} ew_args;

static void ew_apply(const int16_t *ins, const float *imm, float r[][EW_TILE], int64_t len)
{
    float *d = r[ins[1]];
    const float *a = r[ins[2]];
    const float *b = ins[0] <= CC_EW_DIV ? r[ins[3]] : NULL;
    switch ((cc_ew_op)ins[0]) {
    case CC_EW_ADD: for (int64_t j = 0; j < len; j++) d[j] = a[j] + b[j]; break;
    case CC_EW_SUB: for (int64_t j = 0; j < len; j++) d[j] = a[j] - b[j]; break;
    case CC_EW_MUL: for (int64_t j = 0; j < len; j++) d[j] = a[j] * b[j]; break;
    case CC_EW_DIV: for (int64_t j = 0; j < len; j++) d[j] = a[j] / b[j]; break;
    case CC_EW_NEG: for (int64_t j = 0; j < len; j++) d[j] = -a[j]; break;
    case CC_EW_ABS: for (int64_t j = 0; j < len; j++) d[j] = fabsf(a[j]); break;
    case CC_EW_EXP: cge_exp_f32_row(d, a, len); break;
    case CC_EW_LOG: for (int64_t j = 0; j < len; j++) d[j] = (float)log((double)a[j]); break;
    case CC_EW_SQRT: for (int64_t j = 0; j < len; j++) d[j] = sqrtf(a[j]); break;
    case CC_EW_RECIP: for (int64_t j = 0; j < len; j++) d[j] = 1.0f / a[j]; break;
    case CC_EW_RELU: for (int64_t j = 0; j < len; j++) d[j] = a[j] < 0.0f ? 0.0f : a[j]; break;
    case CC_EW_LEAKY: {
        float al = imm[ins[3]];
        for (int64_t j = 0; j < len; j++)
            d[j] = a[j] < 0.0f ? al * a[j] : a[j];
        break;
    }
    case CC_EW_SIGMOID: cge_sigmoid_f32_row(d, a, len); break;
    case CC_EW_TANH: for (int64_t j = 0; j < len; j++) d[j] = (float)tanh((double)a[j]); break;
    case CC_EW_ERF: for (int64_t j = 0; j < len; j++) d[j] = (float)erf((double)a[j]); break;
    case CC_EW_GELU: for (int64_t j = 0; j < len; j++) d[j] = gelu_f(a[j]); break;
    case CC_EW_GELU_TANH: for (int64_t j = 0; j < len; j++) d[j] = gelu_tanh_f(a[j]); break;
    case CC_EW_COPY: for (int64_t j = 0; j < len; j++) d[j] = a[j]; break;
    case CC_EW_CLIP: {
        float lo = imm[ins[3]], hi = imm[ins[3] + 1];
        /* Clip's order: max with lo first, then min with hi; NaN passes. */
        for (int64_t j = 0; j < len; j++) {
            float x = a[j];
            x = x < lo ? lo : x;
            d[j] = x > hi ? hi : x;
        }
        break;
    }
    default: break;
    }
}

static void ew_block(int64_t blk, int64_t nblk, void *p)
{
    const ew_args *a = p;
    float r[CC_EW_MAX_REGS][EW_TILE];
    int64_t lo, hi;
    cge_block_range(a->numel, blk, nblk, &lo, &hi);
    for (int64_t t = lo; t < hi; t += EW_TILE) {
        int64_t len = hi - t < EW_TILE ? hi - t : EW_TILE;
        for (int32_t i = 0; i < a->num_in; i++) {
            if (a->scalar[i])
                for (int64_t j = 0; j < len; j++)
                    r[i][j] = a->in[i][0];
            else
                memcpy(r[i], a->in[i] + t, sizeof(float) * (size_t)len);
        }
        for (int32_t k = 0; k < a->num_instr; k++)
            ew_apply(a->prog[k], a->imm, r, len);
        for (int32_t o = 0; o < a->num_out; o++)
            memcpy(a->out[o] + t, r[a->out_reg[o]], sizeof(float) * (size_t)len);
    }
}

static cge_status ew_args_make(const cge_attrs *at, int32_t ni, int32_t no, ew_args *a,
                               char *why, size_t size)
{
    const int64_t *prog, *outs;
    const float *imm;
    int64_t np = cge_attrs_get_ints(at, "program", &prog);
    int64_t nout = cge_attrs_get_ints(at, "out_regs", &outs);
    int64_t nimm = cge_attrs_get_floats(at, "imm", &imm);
    memset(a, 0, sizeof *a);
    if (ni < 1 || ni > EW_MAX_IN || no < 1 || no > EW_MAX_OUT || np < 4 || np % 4 ||
        np / 4 > EW_MAX_INSTR || nout != no || nimm > EW_MAX_IMM) {
        snprintf(why, size, "program of %lld ints, %d inputs, %d outputs, %lld out_regs is "
                 "malformed or too large", (long long)np, (int)ni, (int)no, (long long)nout);
        return CGE_ERR_INVALID_ARG;
    }
    a->num_in = ni;
    a->num_out = no;
    a->num_instr = (int32_t)(np / 4);
    int64_t defined = ni;
    for (int32_t k = 0; k < a->num_instr; k++) {
        const int64_t *q = prog + 4 * k;
        bool binary = q[0] >= CC_EW_ADD && q[0] <= CC_EW_DIV;
        bool uses_imm = q[0] == CC_EW_LEAKY || q[0] == CC_EW_CLIP;
        int64_t need_imm = q[0] == CC_EW_CLIP ? 2 : 1;
        if (q[0] < CC_EW_ADD || q[0] >= CC_EW_COUNT || q[1] != defined || q[1] >= CC_EW_MAX_REGS ||
            q[2] < 0 || q[2] >= defined || (binary && (q[3] < 0 || q[3] >= defined)) ||
            (uses_imm && (q[3] < 0 || q[3] + need_imm > nimm))) {
            snprintf(why, size, "instruction %d (op %lld, dst %lld, a %lld, b %lld) is invalid",
                     (int)k, (long long)q[0], (long long)q[1], (long long)q[2], (long long)q[3]);
            return CGE_ERR_INVALID_ARG;
        }
        for (int c = 0; c < 4; c++)
            a->prog[k][c] = (int16_t)q[c];
        defined++;
    }
    for (int32_t o = 0; o < no; o++) {
        if (outs[o] < 0 || outs[o] >= defined) {
            snprintf(why, size, "out_regs[%d] = %lld is not a register", (int)o, (long long)outs[o]);
            return CGE_ERR_INVALID_ARG;
        }
        a->out_reg[o] = (int16_t)outs[o];
    }
    for (int64_t i = 0; i < nimm; i++)
        a->imm[i] = imm[i];
    return CGE_OK;
}

static cge_status ew_infer(cge_infer_ctx *ctx)
{
    ew_args a;
    char why[256];
    cge_status st = ew_args_make(ctx->attrs, ctx->num_inputs, ctx->num_outputs, &a, why, sizeof why);
    if (st)
        return cge_meta_error(ctx, st, "%s", why);
    const cge_shape *big = NULL;
    int64_t best = -1;
    for (int32_t i = 0; i < ctx->num_inputs; i++) {
        if (ctx->inputs[i].dtype != CGE_F32)
            return cge_meta_error(ctx, CGE_ERR_DTYPE, "input %d is %s; only float32 is fused",
                                  (int)i, cge_dtype_name(ctx->inputs[i].dtype));
        int64_t n = cge_shape_numel(&ctx->inputs[i].shape);
        if (n < 0) {
            big = &ctx->inputs[i].shape;
            best = INT64_MAX;
        } else if (n > best) {
            best = n;
            big = &ctx->inputs[i].shape;
        }
    }
    for (int32_t i = 0; i < ctx->num_inputs; i++) {
        int64_t n = cge_shape_numel(&ctx->inputs[i].shape);
        if (n != 1 && !cge_shape_equal(&ctx->inputs[i].shape, big)) {
            char x[CGE_SHAPE_STR_MAX], y[CGE_SHAPE_STR_MAX];
            return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                  "input %d is %s; inputs must be %s or have one element", (int)i,
                                  cge_shape_str(&ctx->inputs[i].shape, x, sizeof x),
                                  cge_shape_str(big, y, sizeof y));
        }
    }
    for (int32_t o = 0; o < ctx->num_outputs; o++) {
        ctx->outputs[o].dtype = CGE_F32;
        ctx->outputs[o].shape = *big;
    }
    return CGE_OK;
}

static cge_status ew_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    ew_args a;
    char why[256];
    cge_status st = ew_args_make(ctx->attrs, ctx->num_inputs, ctx->num_outputs, &a, why, sizeof why);
    if (st)
        return cge_kernel_error(ctx, st, "%s", why);
    a.numel = cge_shape_numel(&ctx->outputs[0].shape);
    for (int32_t i = 0; i < a.num_in; i++) {
        a.in[i] = ctx->inputs[i].data;
        a.scalar[i] = cge_shape_numel(&ctx->inputs[i].shape) == 1 && a.numel != 1;
        if (!a.in[i] && a.numel > 0)
            return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "input %d has no buffer", (int)i);
    }
    for (int32_t o = 0; o < a.num_out; o++) {
        a.out[o] = ctx->outputs[o].data;
        if (!a.out[o] && a.numel > 0)
            return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "output %d has no buffer", (int)o);
    }
    if (a.numel <= 0)
        return CGE_OK;
    return cge_launch(stream, ew_block, cge_blocks_for(a.numel, 16384, ctx->num_threads), &a, sizeof a);
}

/* ---- FusedMatMul -------------------------------------------------------------- */

typedef enum act_kind { ACT_NONE, ACT_RELU, ACT_SIGMOID, ACT_TANH, ACT_GELU, ACT_GELU_TANH, ACT_LEAKY, ACT_CLIP } act_kind;

static int act_from_name(const char *s)
{
    static const char *const names[] = {"none", "relu", "sigmoid", "tanh", "gelu", "gelu_tanh",
                                        "leaky_relu", "clip"};
    for (int i = 0; i < 8; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}

typedef struct fmm_args {
    const float *a, *b, *bias;
    float *c, *bp;
    int64_t M, N, K, b_rs, b_cs;
    int act;
    float alpha, lo, hi;
    cge_gemm_tiling tiling;
    cge_gemm_isa isa;
} fmm_args;

static void fmm_pack(int64_t blk, int64_t nblk, void *p)
{
    const fmm_args *a = p;
    int64_t panels = (a->N + CGE_GEMM_NR - 1) / CGE_GEMM_NR, q0, q1;
    cge_block_range(panels, blk, nblk, &q0, &q1);
    if (q1 > q0)
        cge_gemm_pack_b(a->b, a->b_rs, a->b_cs, a->K, a->N, q0, q1, a->bp);
}

static void epilogue(const fmm_args *a, int64_t i0, int64_t i1, int64_t j0, int64_t j1)
{
    if (i1 > a->M)
        i1 = a->M;
    if (j1 > a->N)
        j1 = a->N;
    for (int64_t i = i0; i < i1; i++) {
        float *c = a->c + i * a->N;
        switch ((act_kind)a->act) {
        case ACT_RELU: for (int64_t j = j0; j < j1; j++) c[j] = c[j] < 0.0f ? 0.0f : c[j]; break;
        case ACT_SIGMOID: cge_sigmoid_f32_row(c + j0, c + j0, j1 - j0); break;
        case ACT_TANH: for (int64_t j = j0; j < j1; j++) c[j] = (float)tanh((double)c[j]); break;
        case ACT_GELU: for (int64_t j = j0; j < j1; j++) c[j] = gelu_f(c[j]); break;
        case ACT_GELU_TANH: for (int64_t j = j0; j < j1; j++) c[j] = gelu_tanh_f(c[j]); break;
        case ACT_LEAKY:
            for (int64_t j = j0; j < j1; j++)
                c[j] = c[j] < 0.0f ? a->alpha * c[j] : c[j];
            break;
        case ACT_CLIP:
            for (int64_t j = j0; j < j1; j++) {
                float x = c[j] < a->lo ? a->lo : c[j];
                c[j] = x > a->hi ? a->hi : x;
            }
            break;
        default: break;
        }
    }
}

static void fmm_tiles(int64_t blk, int64_t nblk, void *p)
{
    const fmm_args *a = p;
    const cge_gemm_tiling *tl = &a->tiling;
    int64_t w0, w1;
    cge_block_range(tl->tiles_m * tl->tiles_n, blk, nblk, &w0, &w1);
    cge_gemm_f32 g = {.M = a->M, .N = a->N, .K = a->K, .a = a->a, .a_rs = a->K, .a_cs = 1,
                      .bp = a->bp, .c = a->c, .ldc = a->N, .alpha = 1.0f, .bias = a->bias,
                      .bias_rs = 0, .bias_cs = 1, .beta = a->bias ? 1.0f : 0.0f, .isa = a->isa};
    for (int64_t w = w0; w < w1; w++) {
        int64_t tm = w / tl->tiles_n, tn = w % tl->tiles_n;
        int64_t i0 = tm * tl->mt, i1 = i0 + tl->mt, j0 = tn * tl->nt, j1 = j0 + tl->nt;
        cge_gemm_f32_tile(&g, i0, i1, j0, j1);
        epilogue(a, i0, i1, j0, j1);
    }
}

/* K = 0: an empty sum, so bias (or 0) and then the activation. */
static void fmm_empty(int64_t blk, int64_t nblk, void *p)
{
    const fmm_args *a = p;
    for (int64_t i = 0; i < a->M; i++)
        for (int64_t j = 0; j < a->N; j++)
            a->c[i * a->N + j] = a->bias ? a->bias[j] : 0.0f;
    epilogue(a, 0, a->M, 0, a->N);
}

/* A [..., M, K] (rows flattened), B [K, N] or [N, K] with trans_b, bias
 * numel N or absent. */
static bool fmm_dims(const cge_shape *as, const cge_shape *bs, bool trans_b, int64_t *M,
                     int64_t *N, int64_t *K)
{
    if (as->rank < 2 || bs->rank != 2)
        return false;
    *K = as->dims[as->rank - 1];
    int64_t rows = 1;
    for (int32_t d = 0; d < as->rank - 1; d++)
        rows = as->dims[d] < 0 || rows < 0 ? -1 : rows * as->dims[d];
    *M = rows;
    int64_t kb = trans_b ? bs->dims[1] : bs->dims[0];
    *N = trans_b ? bs->dims[0] : bs->dims[1];
    return kb == *K || kb < 0 || *K < 0;
}

static cge_status fmm_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *A = &ctx->inputs[0], *B = &ctx->inputs[1];
    bool tb = cge_attrs_get_int(ctx->attrs, "trans_b", 0) != 0;
    int64_t M, N, K;
    if (A->dtype != CGE_F32 || B->dtype != CGE_F32)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "only float32 A and B are supported");
    if (!fmm_dims(&A->shape, &B->shape, tb, &M, &N, &K))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "A must be [..., M, K] and B [K, N]%s",
                              tb ? " transposed" : "");
    if (ctx->num_inputs > 2 && ctx->inputs[2].dtype != CGE_DTYPE_UNDEFINED) {
        int64_t bn = cge_shape_numel(&ctx->inputs[2].shape);
        if (ctx->inputs[2].dtype != CGE_F32 || (bn != N && N >= 0))
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "bias must be float32 with N elements");
    }
    if (act_from_name(cge_attrs_get_string(ctx->attrs, "activation", "none")) < 0)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "unknown activation '%s'",
                              cge_attrs_get_string(ctx->attrs, "activation", "none"));
    ctx->outputs[0].dtype = CGE_F32;
    ctx->outputs[0].shape = A->shape;
    ctx->outputs[0].shape.dims[A->shape.rank - 1] = N;
    return CGE_OK;
}

static bool fmm_make(const cge_kernel_ctx *ctx, fmm_args *a)
{
    memset(a, 0, sizeof *a);
    bool tb = cge_attrs_get_int(ctx->attrs, "trans_b", 0) != 0;
    if (ctx->num_inputs < 2 ||
        !fmm_dims(&ctx->inputs[0].shape, &ctx->inputs[1].shape, tb, &a->M, &a->N, &a->K) ||
        a->M < 0 || a->N < 0 || a->K < 0)
        return false;
    a->b_rs = tb ? 1 : a->N;
    a->b_cs = tb ? a->K : 1;
    a->act = act_from_name(cge_attrs_get_string(ctx->attrs, "activation", "none"));
    a->alpha = cge_attrs_get_float(ctx->attrs, "alpha", 0.01f);
    a->lo = cge_attrs_get_float(ctx->attrs, "min", -INFINITY);
    a->hi = cge_attrs_get_float(ctx->attrs, "max", INFINITY);
    return a->act >= 0;
}

static size_t fmm_workspace(const cge_kernel_ctx *ctx)
{
    fmm_args a;
    if (!fmm_make(ctx, &a))
        return 0;
    return (size_t)cge_gemm_packed_b_floats(a.K, a.N) * sizeof(float) + 64;
}

/* With b_const (set by the compiler when B is a graph constant) B is packed
 * once here, from the constant's buffer the plan bound, instead of on every
 * run. The source address is kept: a launch with another B packs as usual. */
typedef struct fmm_state {
    const void *src;
    float *packed;
} fmm_state;

static void fmm_release(void *state)
{
    fmm_state *s = state;
    if (s)
        free(s->packed);
    free(s);
}

static cge_status fmm_prepare(const cge_kernel_ctx *ctx, void **state)
{
    *state = NULL;
    fmm_args a;
    if (!cge_attrs_get_int(ctx->attrs, "b_const", 0) || !fmm_make(ctx, &a) || !ctx->inputs[1].data ||
        a.K <= 0 || a.N <= 0)
        return CGE_OK;
    fmm_state *s = calloc(1, sizeof *s);
    size_t bytes = (size_t)cge_gemm_packed_b_floats(a.K, a.N) * sizeof(float);
    if (s)
        s->packed = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!s || !s->packed) {
        fmm_release(s);
        return cge_kernel_error(ctx, CGE_ERR_NO_MEMORY, "packing B (%zu bytes): out of memory",
                                bytes);
    }
    s->src = ctx->inputs[1].data;
    cge_gemm_pack_b(s->src, a.b_rs, a.b_cs, a.K, a.N, 0, (a.N + CGE_GEMM_NR - 1) / CGE_GEMM_NR,
                    s->packed);
    *state = s;
    return CGE_OK;
}

static cge_status fmm_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    fmm_args a;
    if (!fmm_make(ctx, &a))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "inputs do not form a matrix product");
    if (ctx->workspace_size < fmm_workspace(ctx) || !ctx->workspace)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "workspace of %zu bytes is too small",
                                ctx->workspace_size);
    if (a.M == 0 || a.N == 0)
        return CGE_OK;
    a.a = ctx->inputs[0].data;
    a.b = ctx->inputs[1].data;
    a.bias = ctx->num_inputs > 2 ? ctx->inputs[2].data : NULL;
    a.c = ctx->outputs[0].data;
    a.bp = (float *)(((uintptr_t)ctx->workspace + 63) & ~(uintptr_t)63);
    a.isa = cge_gemm_isa_best();
    if (a.K == 0)
        return cge_launch(stream, fmm_empty, 1, &a, sizeof a);
    cge_gemm_plan(1, a.M, a.N, ctx->num_threads, &a.tiling);
    const fmm_state *pre = ctx->state;
    if (pre && pre->src == a.b) {
        a.bp = pre->packed;
    } else {
        int64_t panels = (a.N + CGE_GEMM_NR - 1) / CGE_GEMM_NR;
        cge_status st = cge_launch(
            stream, fmm_pack, cge_blocks_for(panels, a.K >= 4096 ? 1 : 4096 / a.K, ctx->num_threads),
            &a, sizeof a);
        if (st)
            return st;
    }
    return cge_launch(stream, fmm_tiles,
                      cge_blocks_for(a.tiling.tiles_m * a.tiling.tiles_n, 1, ctx->num_threads), &a,
                      sizeof a);
}

/* ---- Copy and Reorder ---------------------------------------------------------- */

static cge_status same_infer(cge_infer_ctx *ctx)
{
    ctx->outputs[0].dtype = ctx->inputs[0].dtype;
    ctx->outputs[0].shape = ctx->inputs[0].shape;
    return CGE_OK;
}

static cge_status copy_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    size_t n = cge_tensor_nbytes(ctx->inputs[0].dtype, &ctx->inputs[0].shape);
    if (!n || ctx->inputs[0].data == ctx->outputs[0].data)
        return CGE_OK;
    return cge_memcpy_async(stream, ctx->outputs[0].data, ctx->inputs[0].data, n,
                            CGE_MEMCPY_DEVICE_TO_DEVICE);
}

typedef struct reorder_args {
    const char *src;
    char *dst;
    int64_t n, c, hw;
    size_t es;
    int to_nhwc;
} reorder_args;

/* A plain <-> NHWC reorder is a [C, HW] <-> [HW, C] transpose per image;
 * blocks take strips of TILE spatial positions and walk them in TILE x TILE
 * tiles so that both sides stay in cache lines. */
#define REORDER_TILE 16

static void reorder_tile(const reorder_args *a, int64_t b, int64_t s0, int64_t s1, int64_t c0,
                         int64_t c1)
{
    size_t es = a->es;
    const char *src = a->src + (size_t)(b * a->c * a->hw) * es;
    char *dst = a->dst + (size_t)(b * a->c * a->hw) * es;
    if (es == 4) {
        const float *x = (const float *)src;
        float *y = (float *)dst;
        for (int64_t ch = c0; ch < c1; ch++)
            for (int64_t s = s0; s < s1; s++) {
                if (a->to_nhwc)
                    y[s * a->c + ch] = x[ch * a->hw + s];
                else
                    y[ch * a->hw + s] = x[s * a->c + ch];
            }
        return;
    }
    for (int64_t ch = c0; ch < c1; ch++)
        for (int64_t s = s0; s < s1; s++) {
            size_t plain = (size_t)(ch * a->hw + s) * es, nhwc = (size_t)(s * a->c + ch) * es;
            if (a->to_nhwc)
                memcpy(dst + nhwc, src + plain, es);
            else
                memcpy(dst + plain, src + nhwc, es);
        }
}

static void reorder_block(int64_t blk, int64_t nblk, void *p)
{
    const reorder_args *a = p;
    int64_t strips = (a->hw + REORDER_TILE - 1) / REORDER_TILE, lo, hi;
    cge_block_range(a->n * strips, blk, nblk, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        int64_t b = r / strips, s0 = (r % strips) * REORDER_TILE;
        int64_t s1 = s0 + REORDER_TILE < a->hw ? s0 + REORDER_TILE : a->hw;
        for (int64_t c0 = 0; c0 < a->c; c0 += REORDER_TILE)
            reorder_tile(a, b, s0, s1, c0, c0 + REORDER_TILE < a->c ? c0 + REORDER_TILE : a->c);
    }
}

static cge_status reorder_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    int64_t from = cge_attrs_get_int(ctx->attrs, "from", 0), to = cge_attrs_get_int(ctx->attrs, "to", 0);
    const cge_tensor *in = &ctx->inputs[0];
    if (from == to)
        return copy_launch(ctx, stream);
    bool plain_nhwc = (from == CGE_FORMAT_PLAIN && to == CGE_FORMAT_NHWC) ||
                      (from == CGE_FORMAT_NHWC && to == CGE_FORMAT_PLAIN);
    if (!plain_nhwc || in->shape.rank < 3)
        return cge_kernel_error(ctx, CGE_ERR_UNSUPPORTED,
                                "the cpu engine reorders only plain <-> nhwc (rank >= 3); %s -> %s "
                                "needs the engine's own Reorder kernel",
                                cge_format_name((cge_format)from), cge_format_name((cge_format)to));
    reorder_args a = {in->data, ctx->outputs[0].data, in->shape.dims[0], in->shape.dims[1], 1,
                      cge_dtype_size(in->dtype), to == CGE_FORMAT_NHWC};
    for (int32_t d = 2; d < in->shape.rank; d++)
        a.hw *= in->shape.dims[d];
    if (a.n * a.c * a.hw == 0)
        return CGE_OK;
    int64_t strips = a.n * ((a.hw + REORDER_TILE - 1) / REORDER_TILE);
    int64_t per = a.c * REORDER_TILE; /* elements per strip */
    return cge_launch(stream, reorder_block,
                      cge_blocks_for(strips, per >= 16384 ? 1 : 16384 / per, ctx->num_threads), &a,
                      sizeof a);
}

/* ---- registration ------------------------------------------------------------ */

static const cge_arg_def ew_in[] = {{"inputs", CGE_ARG_VARIADIC, CGE_DT(CGE_F32), "operands"}};
static const cge_arg_def ew_out[] = {{"outputs", CGE_ARG_VARIADIC, CGE_DT(CGE_F32), "results"}};
static const cge_attr_def ew_attrs[] = {
    {.name = "program", .kind = CGE_ATTR_INTS, .required = true,
     .doc = "4 ints per instruction: op, dst register, a, b (register or imm index)"},
    {.name = "out_regs", .kind = CGE_ATTR_INTS, .required = true, .doc = "register of each output"},
    {.name = "imm", .kind = CGE_ATTR_FLOATS, .doc = "parameters (LeakyRelu alpha, Clip bounds)"},
};
/* Each tile is read whole before it is written, at the same positions: the
 * result may take input 0's buffer (the planner checks the sizes match). */
static const cge_kernel_def ew_kernels[] = {
    {.engine = "cpu", .dtypes = CGE_DT(CGE_F32), .launch = ew_launch, .inplace_input = 0}};

static const cge_arg_def fmm_in[] = {
    {"A", 0, CGE_DT(CGE_F32), "[..., M, K]"},
    {"B", 0, CGE_DT(CGE_F32), "[K, N] ([N, K] with trans_b)"},
    {"bias", CGE_ARG_OPTIONAL, CGE_DT(CGE_F32), "N elements, added to every row"},
};
static const cge_arg_def fmm_out[] = {{"Y", 0, CGE_DT(CGE_F32), "act(A B + bias)"}};
static const cge_attr_def fmm_attrs[] = {
    {.name = "activation", .kind = CGE_ATTR_STRING, .default_s = "none",
     .doc = "none relu sigmoid tanh gelu gelu_tanh leaky_relu clip"},
    {.name = "alpha", .kind = CGE_ATTR_FLOAT, .default_f = 0.01f, .doc = "leaky_relu slope"},
    {.name = "min", .kind = CGE_ATTR_FLOAT, .doc = "clip lower bound"},
    {.name = "max", .kind = CGE_ATTR_FLOAT, .doc = "clip upper bound"},
    {.name = "trans_b", .kind = CGE_ATTR_INT, .doc = "B is [N, K]"},
    {.name = "b_const", .kind = CGE_ATTR_INT,
     .doc = "B is a constant: packed once when the plan is made"},
};
static const cge_kernel_def fmm_kernels[] = {
    {.engine = "cpu", .dtypes = CGE_DT(CGE_F32), .launch = fmm_launch,
     .workspace_size = fmm_workspace, .prepare = fmm_prepare, .release = fmm_release,
     .inplace_input = -1}};

static const cge_arg_def fconv_in[] = {
    {"X", 0, CGE_DT(CGE_F32), "[N, C, D1, ...] (1 to 3 spatial dims)"},
    {"W", 0, CGE_DT(CGE_F32), "[M, C/group, k1, ...]"},
    {"B", CGE_ARG_OPTIONAL, CGE_DT(CGE_F32), "[M] bias"},
    {"Z", CGE_ARG_OPTIONAL, CGE_DT(CGE_F32), "addend of Y's shape (a residual)"},
};
static const cge_arg_def fconv_out[] = {{"Y", 0, CGE_DT(CGE_F32), "act(Conv(X, W, B) + Z)"}};
static const cge_attr_def fconv_attrs[] = {
    {"auto_pad", CGE_ATTR_STRING, false, 0, 0.0f, "NOTSET", "NOTSET, SAME_UPPER, SAME_LOWER, VALID"},
    {"dilations", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "per spatial dim, default 1"},
    {"group", CGE_ATTR_INT, false, 1, 0.0f, NULL, "channel groups"},
    {"kernel_shape", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "taken from W when absent"},
    {"pads", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "begins then ends, default 0"},
    {"strides", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "per spatial dim, default 1"},
    {.name = "activation", .kind = CGE_ATTR_STRING, .default_s = "none",
     .doc = "none relu leaky_relu clip sigmoid tanh"},
    {.name = "alpha", .kind = CGE_ATTR_FLOAT, .default_f = 0.01f, .doc = "leaky_relu slope"},
    {.name = "min", .kind = CGE_ATTR_FLOAT, .doc = "clip lower bound"},
    {.name = "max", .kind = CGE_ATTR_FLOAT, .doc = "clip upper bound"},
    {.name = "w_const", .kind = CGE_ATTR_INT, .doc = "W is a graph constant"},
    {.name = "channels_last", .kind = CGE_ATTR_INT,
     .doc = "X, Z and Y are in NHWC format (set by the layout pass; needs oneDNN)"},
};
static const cge_kernel_def fconv_kernels[] = {
    {.engine = "cpu", .dtypes = CGE_DT(CGE_F32), .launch = cge_fused_conv_launch,
     .workspace_size = cge_fused_conv_workspace, .prepare = cge_fused_conv_prepare,
     .release = cge_fused_conv_release, .inplace_input = -1}};

static const cge_arg_def clpool_in[] = {{"X", 0, CGE_DT(CGE_F32), "[N, C, D1, ...] in NHWC format"}};
static const cge_arg_def clpool_out[] = {{"Y", 0, CGE_DT(CGE_F32), "pooled, in NHWC format"}};
static const cge_attr_def clpool_attrs[] = {
    {.name = "mode", .kind = CGE_ATTR_STRING, .required = true,
     .doc = "max, avg, global_max or global_avg"},
    {"auto_pad", CGE_ATTR_STRING, false, 0, 0.0f, "NOTSET", "NOTSET, SAME_UPPER, SAME_LOWER, VALID"},
    {"ceil_mode", CGE_ATTR_INT, false, 0, 0.0f, NULL, "ceil for output sizes"},
    {"count_include_pad", CGE_ATTR_INT, false, 0, 0.0f, NULL, "pads count in the divisor"},
    {"dilations", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "default 1"},
    {"kernel_shape", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "window size (window modes)"},
    {"pads", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "begins then ends, default 0"},
    {"strides", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "default 1"},
};
static const cge_kernel_def clpool_kernels[] = {
    {.engine = "cpu", .dtypes = CGE_DT(CGE_F32), .launch = cge_pool_nhwc_launch,
     .inplace_input = -1}};

/* Concat's and Split's meta with what the NHWC kernels need on top: a
 * channel axis (rank 3 or more) and at most CGE_NHWC_SEG_MAX_PARTS parts,
 * which the kernels check at launch too. */
static cge_status nhwc_parts_check(cge_infer_ctx *ctx, const cge_tensor_desc *whole,
                                   int32_t parts)
{
    if (whole->shape.rank < 3) {
        char s[CGE_SHAPE_STR_MAX];
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "%s has no channel axis: NHWC data has rank 3 "
                              "or more", cge_shape_str(&whole->shape, s, sizeof s));
    }
    if (parts > CGE_NHWC_SEG_MAX_PARTS)
        return cge_meta_error(ctx, CGE_ERR_UNSUPPORTED, "%d parts; at most %d in NHWC",
                              (int)parts, CGE_NHWC_SEG_MAX_PARTS);
    return CGE_OK;
}

static cge_status clcat_infer(cge_infer_ctx *ctx)
{
    cge_status st = ctx->num_inputs > 0 ? nhwc_parts_check(ctx, &ctx->inputs[0], ctx->num_inputs)
                                        : CGE_OK;
    return st ? st : cge_concat_infer(ctx);
}

static cge_status clsplit_infer(cge_infer_ctx *ctx)
{
    cge_status st = ctx->num_inputs > 0 ? nhwc_parts_check(ctx, &ctx->inputs[0], ctx->num_outputs)
                                        : CGE_OK;
    return st ? st : cge_split_infer(ctx);
}

static const cge_arg_def clcat_in[] = {
    {"inputs", CGE_ARG_VARIADIC, CGE_DT_ALL, "tensors of one dtype and rank, in NHWC format"}};
static const cge_arg_def clcat_out[] = {{"concat_result", 0, CGE_DT_ALL, "joined, in NHWC format"}};
static const cge_attr_def clcat_attrs[] = {
    {"axis", CGE_ATTR_INT, true, 0, 0.0f, NULL, "logical (NCHW) axis to join along"}};
static const cge_kernel_def clcat_kernels[] = {
    {.engine = "cpu", .launch = cge_concat_nhwc_launch, .inplace_input = -1}};
static const cge_arg_def clsplit_in[] = {
    {"input", 0, CGE_DT_ALL, "tensor to split, in NHWC format"},
    {"split", CGE_ARG_OPTIONAL, CGE_DT(CGE_I64), "sizes of the outputs along axis"}};
static const cge_arg_def clsplit_out[] = {
    {"outputs", CGE_ARG_VARIADIC, CGE_DT_ALL, "the pieces, in NHWC format"}};
static const cge_attr_def clsplit_attrs[] = {
    {"axis", CGE_ATTR_INT, false, 0, 0.0f, NULL, "logical (NCHW) axis to split"}};
static const cge_kernel_def clsplit_kernels[] = {
    {.engine = "cpu", .launch = cge_split_nhwc_launch, .inplace_input = -1}};

static const cge_arg_def claff_in[] = {
    {"X", 0, CGE_DT(CGE_F32), "[N, C, ...] in NHWC format"},
    {"A", 0, CGE_DT(CGE_F64), "[C] scale"},
    {"B", 0, CGE_DT(CGE_F64), "[C] shift"}};
static const cge_arg_def claff_out[] = {{"Y", 0, CGE_DT(CGE_F32), "X * A + B, in NHWC format"}};
static const cge_attr_def claff_attrs[] = {
    {"relu", CGE_ATTR_INT, false, 0, 0.0f, NULL, "1: Relu applied to the result"}};
static const cge_kernel_def claff_kernels[] = {
    {.engine = "cpu", .dtypes = CGE_DT(CGE_F32), .launch = cge_affine_nhwc_launch,
     .inplace_input = 0}};

static const cge_arg_def lview_in[] = {{"data", 0, CGE_DT_ALL, "tensor"}};
static const cge_arg_def lview_out[] = {{"transposed", 0, CGE_DT_ALL, "the same bytes"}};
static const cge_attr_def lview_attrs[] = {
    {"perm", CGE_ATTR_INTS, true, 0, 0.0f, NULL, "the Transpose's permutation"},
    {"to", CGE_ATTR_INT, false, 0, 0.0f, NULL, "cge_format of the output: 0 plain, 1 NHWC"}};
static const cge_kernel_def lview_kernels[] = {
    {.engine = "cpu", .launch = cge_layout_view_launch, .inplace_input = -1}};

/* Resize's schema and meta, less the dtypes: the NHWC kernel is float32's. */
static cge_status clrz_infer(cge_infer_ctx *ctx)
{
    if (ctx->num_inputs > 0 && ctx->inputs[0].dtype != CGE_F32)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "X is %s; the NHWC kernel takes float32",
                              cge_dtype_name(ctx->inputs[0].dtype));
    return cge_resize_infer(ctx);
}

static const cge_arg_def clrz_out[] = {{"Y", 0, CGE_DT(CGE_F32), "resized, in NHWC format"}};
static const cge_kernel_def clrz_kernels[] = {
    {.engine = "cpu", .dtypes = CGE_DT(CGE_F32), .launch = cge_resize_nhwc_launch,
     .workspace_size = cge_resize_workspace, .inplace_input = -1}};

static const cge_arg_def clscale_in[] = {
    {"X", 0, CGE_DT(CGE_F32), "[N, C, ...] in NHWC format"},
    {"S", 0, CGE_DT(CGE_F32), "[1 or N, C, 1, ...] gate"}};
static const cge_arg_def clscale_out[] = {{"Y", 0, CGE_DT(CGE_F32), "X * S, in NHWC format"}};
static const cge_kernel_def clscale_kernels[] = {
    {.engine = "cpu", .dtypes = CGE_DT(CGE_F32), .launch = cge_scale_nhwc_launch,
     .inplace_input = 0}};

static const cge_arg_def any_in[] = {{"input", 0, CGE_DT_ALL, "tensor"}};
static const cge_arg_def any_out[] = {{"output", 0, CGE_DT_ALL, "same data"}};
static const cge_attr_def reorder_attrs[] = {
    {.name = "from", .kind = CGE_ATTR_INT, .doc = "cge_format of the input"},
    {.name = "to", .kind = CGE_ATTR_INT, .doc = "cge_format of the output"},
};
static const cge_kernel_def copy_kernels[] = {
    {.engine = "cpu", .launch = copy_launch, .inplace_input = -1}};
static const cge_kernel_def reorder_kernels[] = {
    {.engine = "cpu", .launch = reorder_launch, .inplace_input = -1}};

static const cge_op_def compiler_ops[] = {
    {.name = "ElementwiseChain", .domain = CC_FUSED_DOMAIN, .since_version = 1,
     .inputs = ew_in, .num_inputs = 1, .outputs = ew_out, .num_outputs = 1, .attrs = ew_attrs,
     .num_attrs = 3, .infer = ew_infer, .kernels = ew_kernels, .num_kernels = 1,
     .doc = "a fused chain of float32 elementwise ops"},
    {.name = "FusedMatMul", .domain = CC_FUSED_DOMAIN, .since_version = 1, .inputs = fmm_in,
     .num_inputs = 3, .outputs = fmm_out, .num_outputs = 1, .attrs = fmm_attrs, .num_attrs = 6,
     .infer = fmm_infer, .kernels = fmm_kernels, .num_kernels = 1,
     .doc = "matrix product with bias and activation in the GEMM's epilogue"},
    {.name = "FusedConv", .domain = CC_FUSED_DOMAIN, .since_version = 1, .inputs = fconv_in,
     .num_inputs = 4, .outputs = fconv_out, .num_outputs = 1, .attrs = fconv_attrs,
     .num_attrs = 12, .infer = cge_fused_conv_infer, .kernels = fconv_kernels, .num_kernels = 1,
     .doc = "convolution with bias, a residual addend and an activation applied to its output"},
    {.name = "ChannelsLastPool", .domain = CC_FUSED_DOMAIN, .since_version = 1,
     .inputs = clpool_in, .num_inputs = 1, .outputs = clpool_out, .num_outputs = 1,
     .attrs = clpool_attrs, .num_attrs = 8, .infer = cge_pool_nhwc_infer,
     .kernels = clpool_kernels, .num_kernels = 1,
     .doc = "max / average / global pooling of NHWC activations (made by the layout passes)"},
    {.name = "ChannelsLastConcat", .domain = CC_FUSED_DOMAIN, .since_version = 1,
     .inputs = clcat_in, .num_inputs = 1, .outputs = clcat_out, .num_outputs = 1,
     .attrs = clcat_attrs, .num_attrs = 1, .infer = clcat_infer, .kernels = clcat_kernels,
     .num_kernels = 1, .doc = "Concat of NHWC activations (made by the layout passes)"},
    {.name = "ChannelsLastSplit", .domain = CC_FUSED_DOMAIN, .since_version = 1,
     .inputs = clsplit_in, .num_inputs = 2, .outputs = clsplit_out, .num_outputs = 1,
     .attrs = clsplit_attrs, .num_attrs = 1, .infer = clsplit_infer, .kernels = clsplit_kernels,
     .num_kernels = 1, .doc = "Split of NHWC activations (made by the layout passes)"},
    {.name = "ChannelsLastAffine", .domain = CC_FUSED_DOMAIN, .since_version = 1,
     .inputs = claff_in, .num_inputs = 3, .outputs = claff_out, .num_outputs = 1,
     .attrs = claff_attrs, .num_attrs = 1, .infer = cge_affine_nhwc_infer, .kernels = claff_kernels, .num_kernels = 1,
     .doc = "per-channel scale and shift of NHWC activations (an inference "
            "BatchNormalization, made by the layout passes)"},
    {.name = "LayoutView", .domain = CC_FUSED_DOMAIN, .since_version = 1, .inputs = lview_in,
     .num_inputs = 1, .outputs = lview_out, .num_outputs = 1, .attrs = lview_attrs,
     .num_attrs = 2, .infer = cge_transpose_infer, .kernels = lview_kernels, .num_kernels = 1,
     .doc = "a Transpose between NHWC bytes and the plain transposed tensor: a view "
            "(made by the layout passes)"},
    {.name = "ChannelsLastResize", .domain = CC_FUSED_DOMAIN, .since_version = 1,
     .inputs = cge_resize_inputs, .num_inputs = CGE_RESIZE_NUM_INPUTS, .outputs = clrz_out,
     .num_outputs = 1, .attrs = cge_resize_attrs, .num_attrs = CGE_RESIZE_NUM_ATTRS,
     .infer = clrz_infer, .kernels = clrz_kernels, .num_kernels = 1,
     .doc = "Resize of NHWC activations, channels kept (made by the layout passes)"},
    {.name = "ChannelsLastScale", .domain = CC_FUSED_DOMAIN, .since_version = 1,
     .inputs = clscale_in, .num_inputs = 2, .outputs = clscale_out, .num_outputs = 1,
     .infer = cge_scale_nhwc_infer, .kernels = clscale_kernels, .num_kernels = 1,
     .doc = "NHWC activations times a per-image, per-channel gate (squeeze-excitation; "
            "made by the layout passes)"},
    {.name = "Copy", .domain = CC_DOMAIN, .since_version = 1, .inputs = any_in, .num_inputs = 1,
     .outputs = any_out, .num_outputs = 1, .infer = same_infer, .kernels = copy_kernels,
     .num_kernels = 1, .doc = "copy between memory spaces (inserted by partition)"},
    {.name = "Reorder", .domain = CC_DOMAIN, .since_version = 1, .inputs = any_in,
     .num_inputs = 1, .outputs = any_out, .num_outputs = 1, .attrs = reorder_attrs,
     .num_attrs = 2, .infer = same_infer, .kernels = reorder_kernels, .num_kernels = 1,
     .doc = "layout change between engines' formats (inserted by partition)"},
};

static const cge_op_library compiler_library = {
    .api_version = CGE_OP_API_VERSION,
    .name = "compiler",
    .ops = compiler_ops,
    .num_ops = (int32_t)(sizeof compiler_ops / sizeof compiler_ops[0]),
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static cge_status registered;

static void do_register(void)
{
    registered = cge_op_register_library(&compiler_library);
}

cge_status cc_register_ops(void)
{
    pthread_once(&once, do_register);
    if (registered)
        return cge_error(CGE_LAYER_SCHEMA, registered,
                         "the compiler's fused operators could not be registered");
    return CGE_OK;
}
