/* cge.fused FusedMatMul: the packed GEMM (gemm_kernel.h) with bias, an
 * activation and a residual add applied to each output tile while it is hot;
 * B packed once when it is a constant. The compiler's fuse_matmul_epilogue
 * pass makes it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cge/fused_ops.h"
#include "base/shared_block.h"
#include "ops/builtin.h"
#include "ops/fast_math.h"
#include "ops/fused_act.h"
#include "ops/gemm_kernel.h"
#include "ops/kernel_cache.h"
#include "ops/kernel_util.h"
#include "ops/matmul_epilogue.h"

typedef enum act_kind { ACT_NONE = CGE__MM_NONE, ACT_RELU, ACT_SIGMOID, ACT_TANH, ACT_GELU, ACT_GELU_TANH, ACT_LEAKY, ACT_CLIP, ACT_SILU } act_kind;

typedef struct fmm_args {
    const float *a, *b, *bias;
    const float *res;       /* residual [M, N] added after the activation, or NULL */
    float *c, *bp;
    int64_t M, N, K, b_rs, b_cs;
    int64_t col_lo;         /* b_cols: B and the bias start at this column */
    int act;
    float alpha, lo, hi;
    cge__gemm_tiling tiling;
    cge__gemm_isa isa;
} fmm_args;

static void fmm_pack(int64_t blk, int64_t nblk, void *p)
{
    const fmm_args *a = p;
    int64_t panels = (a->N + CGE_GEMM_NR - 1) / CGE_GEMM_NR, q0, q1;
    cge__block_range(panels, blk, nblk, &q0, &q1);
    if (q1 > q0)
        cge__gemm_pack_b(a->b, a->b_rs, a->b_cs, a->K, a->N, q0, q1, a->bp);
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
        case ACT_SIGMOID: cge__sigmoid_f32_row(c + j0, c + j0, j1 - j0); break;
        case ACT_TANH: for (int64_t j = j0; j < j1; j++) c[j] = (float)tanh((double)c[j]); break;
        case ACT_GELU: cge__gelu_f32_row(c + j0, c + j0, j1 - j0); break;
        case ACT_SILU: cge__silu_f32_row(c + j0, c + j0, j1 - j0); break;
        case ACT_GELU_TANH:
            for (int64_t j = j0; j < j1; j++)
                c[j] = cge__gelu_tanh_f(c[j]);
            break;
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
        /* The residual last, as the unfused Add did after the product (and
         * its activation): the same one rounding per element, so the same bits. */
        if (a->res) {
            const float *r = a->res + i * a->N;
            for (int64_t j = j0; j < j1; j++)
                c[j] += r[j];
        }
    }
}

static void fmm_tiles(int64_t blk, int64_t nblk, void *p)
{
    const fmm_args *a = p;
    const cge__gemm_tiling *tl = &a->tiling;
    int64_t w0, w1;
    cge__block_range(tl->tiles_m * tl->tiles_n, blk, nblk, &w0, &w1);
    cge__gemm_f32 g = {.M = a->M, .N = a->N, .K = a->K, .a = a->a, .a_rs = a->K, .a_cs = 1,
                      .bp = a->bp, .c = a->c, .ldc = a->N, .alpha = 1.0f, .bias = a->bias,
                      .bias_rs = 0, .bias_cs = 1, .beta = a->bias ? 1.0f : 0.0f, .isa = a->isa};
    for (int64_t w = w0; w < w1; w++) {
        int64_t tm = w / tl->tiles_n, tn = w % tl->tiles_n;
        int64_t i0 = tm * tl->mt, i1 = i0 + tl->mt, j0 = tn * tl->nt, j1 = j0 + tl->nt;
        cge__gemm_f32_tile(&g, i0, i1, j0, j1);
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

/* "b_cols" [lo, hi): B (and the bias) are the columns lo..hi of the inputs,
 * which have more (split_matmul_columns cuts one packed projection into its
 * pieces without copying the weight: each piece packs its own columns and
 * the weight is freed once all have). Absent: all of them, [0, N). */
static bool b_window(const cge_attrs *at, int64_t full_n, int64_t *lo, int64_t *hi)
{
    const int64_t *v = NULL;
    int64_t n = cge_attrs_get_ints(at, "b_cols", &v);
    *lo = 0;
    *hi = full_n;
    if (n <= 0)
        return true;
    if (n != 2 || v[0] < 0 || v[1] < v[0] || (full_n >= 0 && v[1] > full_n))
        return false;
    *lo = v[0];
    *hi = v[1];
    return true;
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
    int64_t lo, hi;
    if (!b_window(ctx->attrs, N, &lo, &hi))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "b_cols must be [lo, hi] with 0 <= lo <= hi <= N = %lld",
                              (long long)N);
    if (ctx->num_inputs > 2 && ctx->inputs[2].dtype != CGE_DTYPE_UNDEFINED) {
        int64_t bn = cge_shape_numel(&ctx->inputs[2].shape);
        if (ctx->inputs[2].dtype != CGE_F32 || (bn != N && N >= 0))
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "bias must be float32 with N elements");
    }
    N = N >= 0 ? hi - lo : N;
    if (ctx->num_inputs > 3 && ctx->inputs[3].dtype != CGE_DTYPE_UNDEFINED) {
        const cge_tensor_desc *R = &ctx->inputs[3];
        cge_shape want = A->shape;
        want.dims[A->shape.rank - 1] = N;
        if (R->dtype != CGE_F32 || !cge_shape_equal(&R->shape, &want))
            return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                  "residual must be float32 with the output's shape");
    }
    if (cge__mm_act_from_name(cge_attrs_get_string(ctx->attrs, "activation", "none")) < 0)
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
    int64_t hi;
    if (!b_window(ctx->attrs, a->N, &a->col_lo, &hi))
        return false;
    a->N = hi - a->col_lo;
    a->act = cge__mm_act_from_name(cge_attrs_get_string(ctx->attrs, "activation", "none"));
    a->alpha = cge_attrs_get_float(ctx->attrs, "alpha", 0.01f);
    a->lo = cge_attrs_get_float(ctx->attrs, "min", -INFINITY);
    a->hi = cge_attrs_get_float(ctx->attrs, "max", INFINITY);
    return a->act >= 0;
}

/* Room to pack B on every run; none for a constant B, which prepare packs
 * once into memory of its own (shared by the graph's plans): the arena holds
 * activations, not a second copy of the weights. */
static size_t fmm_workspace(const cge_kernel_ctx *ctx)
{
    fmm_args a;
    if (!fmm_make(ctx, &a) || cge_attrs_get_int(ctx->attrs, "b_const", 0))
        return 0;
    return (size_t)cge__gemm_packed_b_floats(a.K, a.N) * sizeof(float) + 64;
}

/* With b_const (set by the compiler when B is a graph constant) B is packed
 * once here, from the constant's buffer the plan bound, instead of on every
 * run; the packed copy is shared by every plan of the session's graph (each
 * input signature's). The source address is kept: a launch with another B
 * packs as usual. */
typedef struct fmm_state {
    const void *src;
    float *packed;          /* a cge_kernel_shared_get block */
    float *own;             /* room of its own for another B (made when one comes) */
} fmm_state;

static void fmm_release(void *state)
{
    fmm_state *s = state;
    if (s) {
        cge_kernel_shared_release(s->packed);
        free(s->own);
    }
    free(s);
}

/* Packs B's panels over the core pool, each block making its own pages
 * first (cge__kernel_shared_get_parallel): at prepare this is most of a
 * session's creation, the kernel zeroing fresh pages included. */
typedef struct fmm_fill_args {
    fmm_args a;
    const cge_kernel_ctx *ctx;
} fmm_fill_args;

static void fmm_pack_populate(int64_t blk, int64_t nblk, void *p)
{
    const fmm_args *a = p;
    int64_t panels = (a->N + CGE_GEMM_NR - 1) / CGE_GEMM_NR, q0, q1;
    cge__block_range(panels, blk, nblk, &q0, &q1);
    if (q1 <= q0)
        return;
    /* Panel q occupies [q * K * NR, (q + 1) * K * NR) floats of the packed B. */
    size_t panel = (size_t)a->K * CGE_GEMM_NR * sizeof(float);
    cge__block_populate((char *)a->bp + (size_t)q0 * panel, (size_t)(q1 - q0) * panel);
    cge__gemm_pack_b(a->b, a->b_rs, a->b_cs, a->K, a->N, q0, q1, a->bp);
}

static cge_status fmm_fill(void *dst, void *user)
{
    fmm_fill_args *f = user;
    fmm_args a = f->a;
    a.bp = dst;
    int64_t panels = (a.N + CGE_GEMM_NR - 1) / CGE_GEMM_NR;
    /* At least 256 KiB of packed B per block: smaller ones are not worth a hand-off. */
    int64_t per = ((int64_t)1 << 16) / (a.K * CGE_GEMM_NR) + 1;
    return cge__prepare_parallel(f->ctx, fmm_pack_populate,
                                 cge__blocks_for(panels, per, f->ctx->num_threads), &a, sizeof a);
}

/* The B a packed block was made from, written back (a session that freed
 * B's bytes once packed needs them again: cge__kernel_cache_revive); the
 * key is fmm_prepare's. */
static void fmm_restore(const void *block, void *src, const void *key, size_t key_bytes)
{
    int64_t k[4];
    if (key_bytes != sizeof k)
        return;
    memcpy(k, key, sizeof k);
    cge__gemm_unpack_b(block, k[2], k[3], k[0], k[1], src);
}

static cge_status fmm_prepare(const cge_kernel_ctx *ctx, void **state)
{
    *state = NULL;
    fmm_args a;
    if (!cge_attrs_get_int(ctx->attrs, "b_const", 0) || !fmm_make(ctx, &a) || !ctx->inputs[1].data ||
        a.K <= 0 || a.N <= 0)
        return CGE_OK;
    fmm_state *s = calloc(1, sizeof *s);
    if (!s)
        return cge_kernel_error(ctx, CGE_ERR_NO_MEMORY, "packing B: out of memory");
    size_t bytes = (size_t)cge__gemm_packed_b_floats(a.K, a.N) * sizeof(float);
    int64_t key[4] = {a.K, a.N, a.b_rs, a.b_cs};
    s->src = a.b = (const float *)ctx->inputs[1].data + a.col_lo * a.b_cs;
    fmm_fill_args f = {a, ctx};
    cge_status st = cge__kernel_shared_get_parallel(ctx, s->src, key, sizeof key, bytes, fmm_fill,
                                                    &f, (void **)&s->packed);
    if (st) {
        fmm_release(s);
        return st;
    }
    cge__kernel_input_packed(ctx, 1); /* launches read the packed copy only */
    /* the key is B's own: any rows of A find this block again */
    cge__kernel_input_packed_any_shape(ctx, 1);
    cge__kernel_shared_set_restore(ctx, s->packed, fmm_restore);
    *state = s;
    return CGE_OK;
}

static cge_status fmm_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    fmm_args a;
    if (!fmm_make(ctx, &a))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "inputs do not form a matrix product");
    if (a.M == 0 || a.N == 0)
        return CGE_OK;
    a.a = ctx->inputs[0].data;
    a.b = ctx->inputs[1].data ? (const float *)ctx->inputs[1].data + a.col_lo * a.b_cs : NULL;
    fmm_state *pre = ctx->state;
    bool packed = pre && pre->src == a.b;
    size_t need = (size_t)cge__gemm_packed_b_floats(a.K, a.N) * sizeof(float) + 64;
    if (!packed && pre && a.K > 0 && ctx->workspace_size < need) {
        /* A constant B packed at prepare, then another B (the constant's
         * memory rebound): packed on every run, into room of the node's own,
         * made once (the shared block stays as other plans read it). */
        if (!pre->own && !(pre->own = aligned_alloc(64, (need + 63) & ~(size_t)63)))
            return cge_kernel_error(ctx, CGE_ERR_NO_MEMORY, "packing B (%zu bytes): out of memory",
                                    need);
        a.bp = pre->own;
    } else if (!packed && a.K > 0 && (ctx->workspace_size < need || !ctx->workspace)) {
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                "workspace of %zu bytes is too small (%zu needed to pack B)",
                                ctx->workspace_size, need);
    }
    a.bias = ctx->num_inputs > 2 && ctx->inputs[2].data
                 ? (const float *)ctx->inputs[2].data + a.col_lo
                 : NULL;
    if (ctx->num_inputs > 3 && ctx->inputs[3].dtype != CGE_DTYPE_UNDEFINED) {
        if (ctx->inputs[3].dtype != CGE_F32 || cge_shape_numel(&ctx->inputs[3].shape) != a.M * a.N ||
            !ctx->inputs[3].data)
            return cge_kernel_error(ctx, CGE_ERR_SHAPE,
                                    "residual must be float32 with the output's %lld elements",
                                    (long long)(a.M * a.N));
        a.res = ctx->inputs[3].data;
    }
    a.c = ctx->outputs[0].data;
    if (!a.bp)
        a.bp = (float *)(((uintptr_t)ctx->workspace + 63) & ~(uintptr_t)63);
    a.isa = cge__gemm_isa_best();
    if (a.K == 0)
        return cge_launch(stream, fmm_empty, 1, &a, sizeof a);
    cge__gemm_plan(1, a.M, a.N, ctx->num_threads, &a.tiling);
    if (packed) {
        a.bp = pre->packed;
    } else {
        int64_t panels = (a.N + CGE_GEMM_NR - 1) / CGE_GEMM_NR;
        cge_status st = cge_launch(
            stream, fmm_pack, cge__blocks_for(panels, a.K >= 4096 ? 1 : 4096 / a.K, ctx->num_threads),
            &a, sizeof a);
        if (st)
            return st;
    }
    return cge_launch(stream, fmm_tiles,
                      cge__blocks_for(a.tiling.tiles_m * a.tiling.tiles_n, 1, ctx->num_threads), &a,
                      sizeof a);
}

/* ---- registration ------------------------------------------------------------ */

static const cge_arg_def fmm_in[] = {
    {"A", 0, CGE_DT(CGE_F32), "[..., M, K]"},
    {"B", 0, CGE_DT(CGE_F32), "[K, N] ([N, K] with trans_b)"},
    {"bias", CGE_ARG_OPTIONAL, CGE_DT(CGE_F32), "N elements, added to every row"},
    {"residual", CGE_ARG_OPTIONAL, CGE_DT(CGE_F32), "Y's shape, added after the activation"},
};
static const cge_arg_def fmm_out[] = {{"Y", 0, CGE_DT(CGE_F32), "act(A B + bias) + residual"}};
static const cge_attr_def fmm_attrs[] = {
    CGE__MM_EPILOGUE_ATTR_DEFS,
    {.name = "b_const", .kind = CGE_ATTR_INT,
     .doc = "B is a constant: packed once when the plan is made"},
    {.name = "b_cols", .kind = CGE_ATTR_INTS,
     .doc = "[lo, hi]: B and the bias are columns lo..hi of the inputs (Y has hi - lo)"},
};
static const cge_kernel_def fmm_kernels[] = {
    {.engine = "cpu", .dtypes = CGE_DT(CGE_F32), .launch = fmm_launch,
     .workspace_size = fmm_workspace, .prepare = fmm_prepare, .release = fmm_release,
     .inplace_input = -1}};

static const cge_op_def fmm_ops[] = {
    {.name = "FusedMatMul", .domain = CGE_DOMAIN_FUSED, .since_version = 1, .inputs = fmm_in,
     .num_inputs = 4, .outputs = fmm_out, .num_outputs = 1, .attrs = fmm_attrs, .num_attrs = 7,
     .infer = fmm_infer, .kernels = fmm_kernels, .num_kernels = 1,
     .doc = "matrix product with bias, activation and residual add in the GEMM's epilogue"},
};

const cge_op_def *cge__ops_fused_matmul(int32_t *count)
{
    *count = (int32_t)(sizeof fmm_ops / sizeof fmm_ops[0]);
    return fmm_ops;
}
