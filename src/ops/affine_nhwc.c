/* ChannelsLastAffine and ChannelsLastScale (see affine_nhwc.h): every
 * position's channel vector scaled (and shifted) by per-channel factors, the
 * row over C vectorised. */
#include <string.h>

#include "ops/affine_nhwc.h"
#include "ops/kernel_util.h"

typedef struct affine_args {
    const float *x;
    float *y;
    const double *a, *b;
    int64_t rows, C;
    int relu;
} affine_args;

static bool factors_ok(const cge_tensor_desc *x, const cge_tensor_desc *f)
{
    return f->dtype == CGE_F64 && f->shape.rank == 1 && x->shape.rank >= 2 &&
           f->shape.dims[0] == x->shape.dims[1];
}

cge_status cge__affine_nhwc_infer(cge_infer_ctx *ctx)
{
    if (ctx->num_inputs != 3 || ctx->num_outputs != 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "needs X, A and B, and one output");
    const cge_tensor_desc *x = &ctx->inputs[0];
    if (x->dtype != CGE_F32 || x->shape.rank < 3)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "X must be float32 of rank >= 3");
    if (!factors_ok(x, &ctx->inputs[1]) || !factors_ok(x, &ctx->inputs[2]))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "A and B must be float64 [C]");
    ctx->outputs[0].dtype = CGE_F32;
    ctx->outputs[0].shape = x->shape;
    return CGE_OK;
}

CGE_TARGET_CLONES
static void affine_row(float *restrict y, const float *restrict x, const double *restrict a,
                       const double *restrict b, int64_t C, int relu)
{
    if (relu) {
        /* Relu's expression on the rounded value: NaN stays NaN */
        for (int64_t c = 0; c < C; c++) {
            float v = (float)((double)x[c] * a[c] + b[c]);
            y[c] = v < 0.0f ? 0.0f : v;
        }
        return;
    }
    for (int64_t c = 0; c < C; c++)
        y[c] = (float)((double)x[c] * a[c] + b[c]);
}

static void affine_fn(int64_t blk, int64_t nblk, void *args)
{
    const affine_args *p = args;
    int64_t r0, r1;
    cge__block_range(p->rows, blk, nblk, &r0, &r1);
    for (int64_t r = r0; r < r1; r++)
        affine_row(p->y + r * p->C, p->x + r * p->C, p->a, p->b, p->C, p->relu);
}

cge_status cge__affine_nhwc_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_inputs != 3 || ctx->num_outputs != 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "needs X, A and B, and one output");
    const cge_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    cge_tensor_desc xd = {.dtype = x->dtype, .shape = x->shape};
    cge_tensor_desc ad = {.dtype = ctx->inputs[1].dtype, .shape = ctx->inputs[1].shape};
    cge_tensor_desc bd = {.dtype = ctx->inputs[2].dtype, .shape = ctx->inputs[2].shape};
    if (x->dtype != CGE_F32 || y->dtype != CGE_F32 || !cge_shape_equal(&x->shape, &y->shape) ||
        !factors_ok(&xd, &ad) || !factors_ok(&xd, &bd))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "X, A, B and Y do not agree");
    affine_args a = {x->data, y->data, ctx->inputs[1].data, ctx->inputs[2].data, 0,
                     x->shape.dims[1], cge_attrs_get_int(ctx->attrs, "relu", 0) != 0};
    int64_t n = cge_shape_numel(&x->shape);
    if (n == 0)
        return CGE_OK;
    if (!a.x || !a.y || !a.a || !a.b)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing buffer");
    a.rows = n / a.C;
    return cge_launch(stream, affine_fn,
                      cge__blocks_for(a.rows, a.C >= 16384 ? 1 : 16384 / a.C, ctx->num_threads),
                      &a, sizeof a);
}

/* ---- ChannelsLastScale ------------------------------------------------------ */

/* S: same rank as X, dims [1 or N, C, 1, ...]. */
static bool gate_ok(const cge_shape *x, const cge_shape *s)
{
    if (s->rank != x->rank || x->rank < 3 || s->dims[1] != x->dims[1] ||
        (s->dims[0] != 1 && s->dims[0] != x->dims[0]))
        return false;
    for (int32_t d = 2; d < s->rank; d++)
        if (s->dims[d] != 1)
            return false;
    return true;
}

cge_status cge__scale_nhwc_infer(cge_infer_ctx *ctx)
{
    if (ctx->num_inputs != 2 || ctx->num_outputs != 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "needs X and S, and one output");
    const cge_tensor_desc *x = &ctx->inputs[0], *g = &ctx->inputs[1];
    if (x->dtype != CGE_F32 || g->dtype != CGE_F32)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "X and S must be float32");
    if (!gate_ok(&x->shape, &g->shape))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "S must be [1 or N, C, 1, ...] for X");
    ctx->outputs[0].dtype = CGE_F32;
    ctx->outputs[0].shape = x->shape;
    return CGE_OK;
}

typedef struct scale_args {
    const float *x, *s;
    float *y;
    int64_t N, P, C;   /* images, positions per image, channels */
    int per_image;     /* S has one row per image */
} scale_args;

CGE_TARGET_CLONES
static void scale_row(float *restrict y, const float *restrict x, const float *restrict s,
                      int64_t C)
{
    for (int64_t c = 0; c < C; c++)
        y[c] = x[c] * s[c];
}

static void scale_fn(int64_t blk, int64_t nblk, void *args)
{
    const scale_args *p = args;
    int64_t r0, r1;
    cge__block_range(p->N * p->P, blk, nblk, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const float *s = p->s + (p->per_image ? (r / p->P) * p->C : 0);
        scale_row(p->y + r * p->C, p->x + r * p->C, s, p->C);
    }
}

cge_status cge__scale_nhwc_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_inputs != 2 || ctx->num_outputs != 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "needs X and S, and one output");
    const cge_tensor *x = &ctx->inputs[0], *g = &ctx->inputs[1], *y = &ctx->outputs[0];
    if (x->dtype != CGE_F32 || g->dtype != CGE_F32 || y->dtype != CGE_F32 ||
        !gate_ok(&x->shape, &g->shape) || !cge_shape_equal(&x->shape, &y->shape))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "X, S and Y do not agree");
    int64_t n = cge_shape_numel(&x->shape);
    if (n == 0)
        return CGE_OK;
    if (!x->data || !g->data || !y->data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing buffer");
    scale_args a = {x->data, g->data, y->data, x->shape.dims[0], 0, x->shape.dims[1],
                    g->shape.dims[0] != 1};
    a.P = n / (a.N * a.C);
    return cge_launch(stream, scale_fn,
                      cge__blocks_for(a.N * a.P, a.C >= 16384 ? 1 : 16384 / a.C, ctx->num_threads),
                      &a, sizeof a);
}
