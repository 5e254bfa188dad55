/* The border conversions partition inserts, domain "cge": Copy (between
 * memory spaces) and Reorder (between engines' layouts; the cpu engine's
 * kernel does plain <-> NHWC). */
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#define REORDER_X86 1
#else
#define REORDER_X86 0
#endif

#include "base/cpu_isa.h"
#include "cge/fused_ops.h"
#include "ops/builtin.h"
#include "ops/kernel_util.h"
#include "ops/transpose_tile.h"

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
    int simd;        /* 4-byte tiles through the AVX-512 transpose */
    int simd_narrow; /* 1- and 2-byte ones too (AVX-512 BW + VL) */
} reorder_args;

/* A plain <-> NHWC reorder is a [C, HW] <-> [HW, C] transpose per image,
 * walked in TILE x TILE tiles (blocking below, at reorder_block). */
#define REORDER_TILE 16

/* The portable tiles, one per element size. The sizes are locals and the
 * pointers restrict: stores through y would otherwise make every iteration
 * reload them from the arguments (with uint8_t, which aliases everything, the
 * loops ran at ~1 GB/s). Inner loops run along the written side. */
#define REORDER_TILE_SCALAR(name, T)                                                          \
    static void name(const T *restrict x, T *restrict y, int64_t C, int64_t HW, int to_nhwc,  \
                     int64_t s0, int64_t s1, int64_t c0, int64_t c1)                          \
    {                                                                                         \
        if (to_nhwc)                                                                          \
            for (int64_t s = s0; s < s1; s++)                                                 \
                for (int64_t ch = c0; ch < c1; ch++)                                          \
                    y[s * C + ch] = x[ch * HW + s];                                           \
        else                                                                                  \
            for (int64_t ch = c0; ch < c1; ch++)                                              \
                for (int64_t s = s0; s < s1; s++)                                             \
                    y[ch * HW + s] = x[s * C + ch];                                           \
    }
REORDER_TILE_SCALAR(reorder_tile_f32, float)
REORDER_TILE_SCALAR(reorder_tile_u8, uint8_t)
REORDER_TILE_SCALAR(reorder_tile_u16, uint16_t)
REORDER_TILE_SCALAR(reorder_tile_u64, uint64_t)

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

#if REORDER_X86
/* The same for 1- and 2-byte elements (int8 maps of quantized models, f16):
 * widened to 32-bit lanes on load, narrowed back on store, so the tile costs
 * the float tile's instructions rather than one per element. */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void
tr_tile_narrow_avx512(const char *x, int64_t xs, char *y, int64_t ys, int rows, int cols,
                      size_t es)
{
    __m512 r[16];
    __mmask16 cm = (__mmask16)((1u << cols) - 1), rm = (__mmask16)((1u << rows) - 1);
    for (int i = 0; i < 16; i++) {
        __m512i v = _mm512_setzero_si512();
        if (i < rows && es == 1)
            v = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(cm, x + i * xs));
        else if (i < rows)
            v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(cm, x + 2 * i * xs));
        r[i] = _mm512_castsi512_ps(v);
    }
    cge__tr16_regs(r);
    for (int j = 0; j < cols; j++) {
        if (es == 1)
            _mm512_mask_cvtepi32_storeu_epi8(y + j * ys, rm, _mm512_castps_si512(r[j]));
        else
            _mm512_mask_cvtepi32_storeu_epi16(y + 2 * j * ys, rm, _mm512_castps_si512(r[j]));
    }
}
#endif

static void reorder_tile(const reorder_args *a, int64_t b, int64_t s0, int64_t s1, int64_t c0,
                         int64_t c1)
{
    size_t es = a->es;
    const char *src = a->src + (size_t)(b * a->c * a->hw) * es;
    char *dst = a->dst + (size_t)(b * a->c * a->hw) * es;
#if REORDER_X86
    if (es == 4 && a->simd) {
        const float *x = (const float *)src;
        float *y = (float *)dst;
        if (a->to_nhwc)
            cge__tr_tile32_avx512(x + c0 * a->hw + s0, a->hw, y + s0 * a->c + c0, a->c,
                             (int)(c1 - c0), (int)(s1 - s0));
        else
            cge__tr_tile32_avx512(x + s0 * a->c + c0, a->c, y + c0 * a->hw + s0, a->hw,
                             (int)(s1 - s0), (int)(c1 - c0));
        return;
    }
    if ((es == 1 || es == 2) && a->simd_narrow) {
        size_t C = (size_t)a->c, HW = (size_t)a->hw;
        if (a->to_nhwc)
            tr_tile_narrow_avx512(src + ((size_t)c0 * HW + (size_t)s0) * es, a->hw,
                                  dst + ((size_t)s0 * C + (size_t)c0) * es, a->c, (int)(c1 - c0),
                                  (int)(s1 - s0), es);
        else
            tr_tile_narrow_avx512(src + ((size_t)s0 * C + (size_t)c0) * es, a->c,
                                  dst + ((size_t)c0 * HW + (size_t)s0) * es, a->hw,
                                  (int)(s1 - s0), (int)(c1 - c0), es);
        return;
    }
#endif
    if (es == 4) {
        reorder_tile_f32((const float *)src, (float *)dst, a->c, a->hw, a->to_nhwc, s0, s1, c0,
                         c1);
        return;
    }
    if (es == 1) { /* int8 data of quantized models */
        reorder_tile_u8((const uint8_t *)src, (uint8_t *)dst, a->c, a->hw, a->to_nhwc, s0, s1, c0,
                        c1);
        return;
    }
    if (es == 2) {
        reorder_tile_u16((const uint16_t *)src, (uint16_t *)dst, a->c, a->hw, a->to_nhwc, s0, s1,
                         c0, c1);
        return;
    }
    if (es == 8) {
        reorder_tile_u64((const uint64_t *)src, (uint64_t *)dst, a->c, a->hw, a->to_nhwc, s0, s1,
                         c0, c1);
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

/* A network's input (C <= 4, channels-last wanted): the pixel loops above. */
static int reorder_few(const reorder_args *a)
{
    return (a->es == 4 || a->es == 1) && a->to_nhwc && a->c <= 4;
}

/* The tiled path's work items: per image, strips of REORDER_STRIP spatial
 * positions times groups of REORDER_GROUP channels. A strip is four tiles
 * wide so that each channel row is read (or written) 256 contiguous bytes at
 * a time: 16 memory streams per tile column rather than one per channel,
 * which the hardware prefetchers keep up with at C = 64 and beyond. The
 * channel groups give small maps (7 x 7 x 1280) work for both threads. */
#define REORDER_STRIP 64
#define REORDER_GROUP 64

static void reorder_block(int64_t blk, int64_t nblk, void *p)
{
    const reorder_args *a = p;
    int64_t lo, hi;
    if (reorder_few(a)) {
        int64_t strips = (a->hw + REORDER_TILE - 1) / REORDER_TILE;
        cge__block_range(a->n * strips, blk, nblk, &lo, &hi);
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
    int64_t strips = (a->hw + REORDER_STRIP - 1) / REORDER_STRIP;
    int64_t groups = (a->c + REORDER_GROUP - 1) / REORDER_GROUP;
    cge__block_range(a->n * strips * groups, blk, nblk, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        int64_t b = r / (strips * groups), q = r % (strips * groups);
        int64_t ss = (q / groups) * REORDER_STRIP, cs = (q % groups) * REORDER_GROUP;
        int64_t se = ss + REORDER_STRIP < a->hw ? ss + REORDER_STRIP : a->hw;
        int64_t ce = cs + REORDER_GROUP < a->c ? cs + REORDER_GROUP : a->c;
        for (int64_t c0 = cs; c0 < ce; c0 += REORDER_TILE)
            for (int64_t s0 = ss; s0 < se; s0 += REORDER_TILE)
                reorder_tile(a, b, s0, s0 + REORDER_TILE < se ? s0 + REORDER_TILE : se, c0,
                             c0 + REORDER_TILE < ce ? c0 + REORDER_TILE : ce);
    }
}

static cge_status reorder_enqueue(cge_stream *stream, const reorder_args *a, int num_threads)
{
    int64_t items, per; /* work items and elements per item */
    if (reorder_few(a)) {
        items = a->n * ((a->hw + REORDER_TILE - 1) / REORDER_TILE);
        per = a->c * REORDER_TILE;
    } else {
        int64_t strips = (a->hw + REORDER_STRIP - 1) / REORDER_STRIP;
        int64_t groups = (a->c + REORDER_GROUP - 1) / REORDER_GROUP;
        items = a->n * strips * groups;
        per = (a->c < REORDER_GROUP ? a->c : REORDER_GROUP) *
              (a->hw < REORDER_STRIP ? a->hw : REORDER_STRIP);
    }
    return cge_launch(stream, reorder_block,
                      cge__blocks_for(items, per >= 16384 ? 1 : 16384 / per, num_threads), a,
                      sizeof *a);
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
                      cge_dtype_size(in->dtype), to == CGE_FORMAT_NHWC, 0, 0};
#if REORDER_X86
    a.simd = cge__cpu_has(CGE_CPU_AVX512F);
    a.simd_narrow = a.simd && cge__cpu_has(CGE_CPU_AVX512BW) && cge__cpu_has(CGE_CPU_AVX512VL);
#endif
    for (int32_t d = 2; d < in->shape.rank; d++)
        a.hw *= in->shape.dims[d];
    if (a.n * a.c * a.hw == 0)
        return CGE_OK;
    return reorder_enqueue(stream, &a, ctx->num_threads);
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
