/* The border conversions partition inserts, domain "cge": Copy (between
 * memory spaces) and Reorder (between engines' layouts; the cpu engine's
 * kernel does plain <-> NHWC). */
#include <stdint.h>
#include <string.h>

#include "cge/fused_ops.h"
#include "ops/builtin.h"
#include "ops/kernel_util.h"

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

/* The sizes are locals and the pointers restrict: stores through y would
 * otherwise make every iteration reload them from the arguments. */
static void reorder_tile_f32(const float *restrict x, float *restrict y, int64_t C, int64_t HW,
                             int to_nhwc, int64_t s0, int64_t s1, int64_t c0, int64_t c1)
{
    if (to_nhwc)
        for (int64_t s = s0; s < s1; s++)
            for (int64_t ch = c0; ch < c1; ch++)
                y[s * C + ch] = x[ch * HW + s];
    else
        for (int64_t ch = c0; ch < c1; ch++)
            for (int64_t s = s0; s < s1; s++)
                y[ch * HW + s] = x[s * C + ch];
}

/* A network's input (C of 1 to 4, a whole image per block): pixel by pixel,
 * the few channels unrolled, so that the writes run contiguously. */
static void reorder_to_nhwc_few(const float *restrict x, float *restrict y, int64_t C, int64_t HW,
                                int64_t s0, int64_t s1)
{
    const float *x0 = x, *x1 = x + HW, *x2 = x + 2 * HW, *x3 = x + 3 * HW;
    switch (C) {
    case 1: memcpy(y + s0, x + s0, sizeof(float) * (size_t)(s1 - s0)); break;
    case 2:
        for (int64_t s = s0; s < s1; s++) {
            y[2 * s] = x0[s];
            y[2 * s + 1] = x1[s];
        }
        break;
    case 3:
        for (int64_t s = s0; s < s1; s++) {
            y[3 * s] = x0[s];
            y[3 * s + 1] = x1[s];
            y[3 * s + 2] = x2[s];
        }
        break;
    default:
        for (int64_t s = s0; s < s1; s++) {
            y[4 * s] = x0[s];
            y[4 * s + 1] = x1[s];
            y[4 * s + 2] = x2[s];
            y[4 * s + 3] = x3[s];
        }
    }
}

/* The same for int8 data (a quantized network's input after its first
 * QuantizeLinear): byte by byte through restrict pointers, not the generic
 * tile's strided writes. */
static void reorder_to_nhwc_few_u8(const uint8_t *restrict x, uint8_t *restrict y, int64_t C,
                                   int64_t HW, int64_t s0, int64_t s1)
{
    if (C == 1) {
        memcpy(y + s0, x + s0, (size_t)(s1 - s0));
        return;
    }
    for (int64_t s = s0; s < s1; s++)
        for (int64_t ch = 0; ch < C; ch++)
            y[C * s + ch] = x[ch * HW + s];
}

static void reorder_tile(const reorder_args *a, int64_t b, int64_t s0, int64_t s1, int64_t c0,
                         int64_t c1)
{
    size_t es = a->es;
    const char *src = a->src + (size_t)(b * a->c * a->hw) * es;
    char *dst = a->dst + (size_t)(b * a->c * a->hw) * es;
    if (es == 4) {
        reorder_tile_f32((const float *)src, (float *)dst, a->c, a->hw, a->to_nhwc, s0, s1, c0,
                         c1);
        return;
    }
    if (es == 1) { /* int8 data of quantized models */
        const uint8_t *x = (const uint8_t *)src;
        uint8_t *y = (uint8_t *)dst;
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
    cge__block_range(a->n * strips, blk, nblk, &lo, &hi);
    if ((a->es == 4 || a->es == 1) && a->to_nhwc && a->c <= 4) {
        /* runs of strips within one image at a time */
        while (lo < hi) {
            int64_t b = lo / strips, e = (b + 1) * strips < hi ? (b + 1) * strips : hi;
            int64_t s0 = (lo % strips) * REORDER_TILE, s1 = (e - b * strips) * REORDER_TILE;
            size_t off = (size_t)(b * a->c * a->hw);
            if (a->es == 4)
                reorder_to_nhwc_few((const float *)a->src + off, (float *)a->dst + off, a->c,
                                    a->hw, s0, s1 < a->hw ? s1 : a->hw);
            else
                reorder_to_nhwc_few_u8((const uint8_t *)a->src + off, (uint8_t *)a->dst + off,
                                       a->c, a->hw, s0, s1 < a->hw ? s1 : a->hw);
            lo = e;
        }
        return;
    }
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
                      cge__blocks_for(strips, per >= 16384 ? 1 : 16384 / per, ctx->num_threads), &a,
                      sizeof a);
}

/* ---- registration ------------------------------------------------------------ */

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

static const cge_op_def copy_ops[] = {
    {.name = "Copy", .domain = CGE_DOMAIN_CONVERSION, .since_version = 1, .inputs = any_in,
     .num_inputs = 1, .outputs = any_out, .num_outputs = 1, .infer = same_infer,
     .kernels = copy_kernels, .num_kernels = 1, .doc = "copy between memory spaces (inserted by partition)"},
    {.name = "Reorder", .domain = CGE_DOMAIN_CONVERSION, .since_version = 1, .inputs = any_in,
     .num_inputs = 1, .outputs = any_out, .num_outputs = 1, .attrs = reorder_attrs,
     .num_attrs = 2, .infer = same_infer, .kernels = reorder_kernels, .num_kernels = 1,
     .doc = "layout change between engines' formats (inserted by partition)"},
};

const cge_op_def *cge__ops_copy(int32_t *count)
{
    *count = (int32_t)(sizeof copy_ops / sizeof copy_ops[0]);
    return copy_ops;
}
