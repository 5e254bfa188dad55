/* The compiler's int8 elementwise and pooling operators (cge.fused QAdd, QMul,
 * QLookup, QPool, made by fuse_qdq): int8 in, int8 out, requantised in one pass,
 * plain NCHW or channels-last data. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu_isa.h"
#include "cge/fused_ops.h"
#include "ops/builtin.h"
#include "ops/kernel_util.h"
#include "ops/nn_spatial.h"
#include "ops/q8.h"

/* QAdd / QMul compute exactly what DequantizeLinear, the float Add / Mul
 * (and a Relu or Clip) and QuantizeLinear compute one after the other:
 * (a - za) * sa in float (a table of the 256 values), the float sum or
 * product, division by the output scale, rounding half to even, the zero
 * point, then the clamp and saturation: the same bits. QPool's max commutes
 * with the (monotone) requantisation, so it is exact too; its averages sum
 * (x - zx) in int32 exactly where the float path sums floats, so they agree
 * within one quantisation step. */

#define Q8 (CGE_DT(CGE_I8) | CGE_DT(CGE_U8))
#define F32 CGE_DT(CGE_F32)

/* [lo, hi] of the output: the dtype's range narrowed by the lo/hi attributes. */
static void out_range(const cge_kernel_ctx *ctx, int sg, float *lo, float *hi)
{
    float tlo = sg ? -128.0f : 0.0f, thi = sg ? 127.0f : 255.0f;
    float a = (float)cge_attrs_get_int(ctx->attrs, "lo", -1024);
    float b = (float)cge_attrs_get_int(ctx->attrs, "hi", 1024);
    *lo = a > tlo ? a : tlo;
    *hi = b < thi ? b : thi;
}

static int scalar_ok(const cge_tensor_desc *d)
{
    return cge_shape_numel(&d->shape) == 1 || cge_shape_numel(&d->shape) < 0;
}

/* ---- QAdd / QMul ------------------------------------------------------------ */

/* Inputs as com.microsoft QLinearAdd: A, A_scale, A_zero_point, B, B_scale,
 * B_zero_point, C_scale, C_zero_point; A and B of one shape, or one of them a
 * single element. */
static cge_status qbin_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *a = &ctx->inputs[0], *b = &ctx->inputs[3];
    for (int i = 1; i < 8; i++)
        if (i != 3 && !scalar_ok(&ctx->inputs[i]))
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "input %d must be a scalar", i);
    if (ctx->inputs[2].dtype != a->dtype || ctx->inputs[5].dtype != b->dtype)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "zero points must have their operand's dtype");
    int64_t na = cge_shape_numel(&a->shape), nb = cge_shape_numel(&b->shape);
    const cge_tensor_desc *big = na == 1 ? b : a;
    if (!(na == 1 || nb == 1 || cge_shape_equal(&a->shape, &b->shape)))
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "A and B must have one shape, or one of them one element");
    ctx->outputs[0].dtype = ctx->inputs[7].dtype;
    ctx->outputs[0].shape = big->shape;
    return CGE_OK;
}

typedef struct qbin_args {
    const void *a, *b;
    void *y;
    int64_t n, na, nb;
    int32_t za, zb;
    float sa, sb, sc, zc, lo, hi;
    int mul, asg, bsg, ysg;
} qbin_args;

/* One loop per dtype combination, so that the compiler vectorises it:
 * (q - z) * s is DequantizeLinear's float, the rest QuantizeLinear's. */
#define QBIN_LOOP(TA, TB, TY)                                                                \
    do {                                                                                     \
        const TA *a = p->a;                                                                  \
        const TB *b = p->b;                                                                  \
        TY *y = p->y;                                                                        \
        int64_t ia = p->na == 1 ? 0 : 1, ib = p->nb == 1 ? 0 : 1;                            \
        const int32_t za = p->za, zb = p->zb;                                                \
        const float sa = p->sa, sb = p->sb, sc = p->sc, zc = p->zc, lo = p->lo, hi = p->hi;  \
        if (p->mul)                                                                          \
            for (int64_t i = e0; i < e1; i++) {                                              \
                float va = (float)((int32_t)a[i * ia] - za) * sa;                            \
                float vb = (float)((int32_t)b[i * ib] - zb) * sb;                            \
                float v = rintf(va * vb / sc) + zc;                                          \
                v = v < lo ? lo : v;                                                         \
                y[i] = (TY)(v > hi ? hi : v);                                                \
            }                                                                                \
        else if (ia && ib)                                                                   \
            for (int64_t i = e0; i < e1; i++) {                                              \
                float va = (float)((int32_t)a[i] - za) * sa;                                 \
                float vb = (float)((int32_t)b[i] - zb) * sb;                                 \
                float v = rintf((va + vb) / sc) + zc;                                        \
                v = v < lo ? lo : v;                                                         \
                y[i] = (TY)(v > hi ? hi : v);                                                \
            }                                                                                \
        else                                                                                 \
            for (int64_t i = e0; i < e1; i++) {                                              \
                float va = (float)((int32_t)a[i * ia] - za) * sa;                            \
                float vb = (float)((int32_t)b[i * ib] - zb) * sb;                            \
                float v = rintf((va + vb) / sc) + zc;                                        \
                v = v < lo ? lo : v;                                                         \
                y[i] = (TY)(v > hi ? hi : v);                                                \
            }                                                                                \
    } while (0)

#define QBIN_Y(TA, TB)                                                                       \
    do {                                                                                     \
        if (p->ysg)                                                                          \
            QBIN_LOOP(TA, TB, int8_t);                                                       \
        else                                                                                 \
            QBIN_LOOP(TA, TB, uint8_t);                                                      \
    } while (0)

/* The loops below are compiled twice: for the build's baseline (SSE4, 4
 * lanes) and, where the CPU has it (cge__q8_avx512 in q8.h), for AVX-512 (16
 * lanes). The same IEEE operations in the same order (no contraction into
 * FMA: ISO C mode), so the same bits. */
static inline __attribute__((always_inline)) void qbin_body(const qbin_args *p, int64_t e0,
                                                            int64_t e1)
{
    /* NaN cannot come out of int8 inputs (finite scales), so the clamp to
     * [lo, hi], within the dtype's range, is the whole saturation. */
    if (p->asg && p->bsg)
        QBIN_Y(int8_t, int8_t);
    else if (p->asg)
        QBIN_Y(int8_t, uint8_t);
    else if (p->bsg)
        QBIN_Y(uint8_t, int8_t);
    else
        QBIN_Y(uint8_t, uint8_t);
}

static void qbin_fn(int64_t blk, int64_t nblk, void *args)
{
    const qbin_args *p = args;
    int64_t e0, e1;
    cge__block_range(p->n, blk, nblk, &e0, &e1);
    qbin_body(p, e0, e1);
}

#ifdef CGE__HAVE_Q8_AVX512
/* 16 codes of int8 (sg) or uint8 data as (q - z) * s, DequantizeLinear's float. */
CGE__Q8_AVX512 static inline __m512 qbin_deq16(const void *p, int sg, int64_t i, __m512i z,
                                               __m512 s)
{
    __m128i b = _mm_loadu_si128((const __m128i *)((const uint8_t *)p + i));
    __m512i q = sg ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(q, z)), s);
}

/* Both operands full tensors: the loop above in AVX-512 intrinsics, 16
 * lanes at a time, the same IEEE operations in the same order, so the same
 * bits (the compiler's vectorisation of the loop above: 92 against 80 us
 * for 200,704 elements, one thread). */
CGE__Q8_AVX512 static int64_t qbin_avx512(const qbin_args *p, int64_t e0, int64_t e1)
{
    const __m512i za = _mm512_set1_epi32(p->za), zb = _mm512_set1_epi32(p->zb);
    const __m512 sa = _mm512_set1_ps(p->sa), sb = _mm512_set1_ps(p->sb),
                 sc = _mm512_set1_ps(p->sc), zc = _mm512_set1_ps(p->zc), lo = _mm512_set1_ps(p->lo),
                 hi = _mm512_set1_ps(p->hi);
    int64_t i = e0;
    for (; i + 16 <= e1; i += 16) {
        __m512 va = qbin_deq16(p->a, p->asg, i, za, sa), vb = qbin_deq16(p->b, p->bsg, i, zb, sb);
        __m512 v = p->mul ? _mm512_mul_ps(va, vb) : _mm512_add_ps(va, vb);
        v = _mm512_roundscale_ps(_mm512_div_ps(v, sc), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        v = _mm512_add_ps(v, zc);
        __m512i q = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(v, lo), hi));
        __m128i o = p->ysg ? _mm512_cvtsepi32_epi8(q) : _mm512_cvtusepi32_epi8(q);
        _mm_storeu_si128((__m128i *)((uint8_t *)p->y + i), o);
    }
    return i;
}

CGE__Q8_AVX512 static void qbin_fn_avx512(int64_t blk, int64_t nblk, void *args)
{
    const qbin_args *p = args;
    int64_t e0, e1;
    cge__block_range(p->n, blk, nblk, &e0, &e1);
    if (p->na == p->n && p->nb == p->n)
        e0 = qbin_avx512(p, e0, e1);
    qbin_body(p, e0, e1);
}
#endif

#ifdef CGE__HAVE_Q8_AVX2
CGE__Q8_AVX2 static inline __m256 qbin_deq8(const void *p, int64_t i, int sg, __m256i z, __m256 s)
{
    __m256i q = cge__q8_load8_avx2((const uint8_t *)p + i, sg);
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q, z)), s);
}

/* 8 outputs of the loop above: DequantizeLinear of both, the sum or
 * product, rint(v / sc) + zc, the clamp. */
CGE__Q8_AVX2 static inline __m256 qbin8(const qbin_args *p, int64_t i, __m256i za, __m256i zb,
                                        __m256 sa, __m256 sb, __m256 sc, __m256 zc, __m256 lo,
                                        __m256 hi)
{
    __m256 va = qbin_deq8(p->a, i, p->asg, za, sa), vb = qbin_deq8(p->b, i, p->bsg, zb, sb);
    __m256 v = p->mul ? _mm256_mul_ps(va, vb) : _mm256_add_ps(va, vb);
    v = _mm256_round_ps(_mm256_div_ps(v, sc), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v, zc), lo), hi);
}

/* Both operands full tensors: the loop above on AVX2, 16 elements a step,
 * the same IEEE operations in the same order. */
CGE__Q8_AVX2 static int64_t qbin_avx2(const qbin_args *p, int64_t e0, int64_t e1)
{
    const __m256i za = _mm256_set1_epi32(p->za), zb = _mm256_set1_epi32(p->zb);
    const __m256 sa = _mm256_set1_ps(p->sa), sb = _mm256_set1_ps(p->sb),
                 sc = _mm256_set1_ps(p->sc), zc = _mm256_set1_ps(p->zc), lo = _mm256_set1_ps(p->lo),
                 hi = _mm256_set1_ps(p->hi);
    int64_t i = e0;
    for (; i + 16 <= e1; i += 16)
        cge__q8_store16_avx2((uint8_t *)p->y + i, p->ysg,
                             qbin8(p, i, za, zb, sa, sb, sc, zc, lo, hi),
                             qbin8(p, i + 8, za, zb, sa, sb, sc, zc, lo, hi));
    return i;
}

static void qbin_fn_avx2(int64_t blk, int64_t nblk, void *args)
{
    const qbin_args *p = args;
    int64_t e0, e1;
    cge__block_range(p->n, blk, nblk, &e0, &e1);
    if (p->na == p->n && p->nb == p->n)
        e0 = qbin_avx2(p, e0, e1);
    qbin_body(p, e0, e1);
}
#endif

static cge_status qbin_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    qbin_args p;
    p.mul = !strcmp(ctx->op_type, "QMul");
    const cge_tensor *A = &ctx->inputs[0], *B = &ctx->inputs[3], *Y = &ctx->outputs[0];
    if ((A->dtype != CGE_I8 && A->dtype != CGE_U8) || (B->dtype != CGE_I8 && B->dtype != CGE_U8) ||
        (Y->dtype != CGE_I8 && Y->dtype != CGE_U8))
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "A, B and C must be int8 or uint8");
    p.asg = A->dtype == CGE_I8;
    p.bsg = B->dtype == CGE_I8;
    p.sa = ((const float *)ctx->inputs[1].data)[0];
    p.za = cge__q8_load(ctx->inputs[2].data, p.asg, 0);
    p.sb = ((const float *)ctx->inputs[4].data)[0];
    p.zb = cge__q8_load(ctx->inputs[5].data, p.bsg, 0);
    p.a = A->data;
    p.b = B->data;
    p.y = Y->data;
    p.na = cge_shape_numel(&A->shape);
    p.nb = cge_shape_numel(&B->shape);
    p.n = cge_shape_numel(&Y->shape);
    p.sc = ((const float *)ctx->inputs[6].data)[0];
    p.ysg = Y->dtype == CGE_I8;
    p.zc = (float)cge__q8_load(ctx->inputs[7].data, p.ysg, 0);
    out_range(ctx, p.ysg, &p.lo, &p.hi);
    if (p.n == 0)
        return CGE_OK;
    cge_kernel_fn fn = qbin_fn;
#ifdef CGE__HAVE_Q8_AVX512
    if (cge__q8_avx512())
        fn = qbin_fn_avx512;
    else if (cge__q8_avx2())
        fn = qbin_fn_avx2;
#endif
    return cge_launch(stream, fn, cge__blocks_for(p.n, 16384, ctx->num_threads), &p, sizeof p);
}

void cge__qadd_span(const cge__qadd_params *q, int64_t e0, int64_t e1)
{
    qbin_args p = {.a = q->a, .b = q->b, .y = q->y, .n = e1, .na = e1, .nb = e1,
                   .za = q->za, .zb = q->zb, .sa = q->sa, .sb = q->sb, .sc = q->sc,
                   .zc = q->zc, .lo = q->lo, .hi = q->hi, .mul = 0, .asg = q->asg,
                   .bsg = q->bsg, .ysg = q->ysg};
#ifdef CGE__HAVE_Q8_AVX512
    if (cge__q8_avx512())
        e0 = qbin_avx512(&p, e0, e1);
    else if (cge__q8_avx2())
        e0 = qbin_avx2(&p, e0, e1);
#endif
    qbin_body(&p, e0, e1);
}

/* ---- QLookup: y = table[x], a unary function of 256 values ------------------ */

static cge_status qlut_infer(cge_infer_ctx *ctx)
{
    if (cge_shape_numel(&ctx->inputs[1].shape) != 256)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "the table must have 256 entries");
    ctx->outputs[0].dtype = ctx->inputs[1].dtype;
    ctx->outputs[0].shape = ctx->inputs[0].shape;
    return CGE_OK;
}

/* An int8 table (Q(f(DQ(x)))) or a float32 one: a DequantizeLinear left
 * after the fusions, tabulated by fuse_qdq with DequantizeLinear's own
 * arithmetic, so a load per element instead of a conversion and a product. */
typedef struct qlut_args {
    union {
        uint8_t q[256];
        float f[256];
    } t;
    const uint8_t *x;
    void *y;
    int64_t n;
    int wide;
} qlut_args;

#ifdef CGE__HAVE_Q8_AVX2
/* The byte table on AVX2, 32 codes a step: the table as 16 rows of 16
 * bytes; each row looks up every code's low nibble (one byte shuffle) and
 * is kept where the code's high nibble is the row's. */
CGE__Q8_AVX2 static int64_t qlut_avx2(const qlut_args *p, int64_t e0, int64_t e1)
{
    const __m256i nib = _mm256_set1_epi8(0x0f);
    int64_t i = e0;
    for (; i + 32 <= e1; i += 32) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(p->x + i));
        __m256i lo = _mm256_and_si256(x, nib), hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), nib);
        __m256i r = _mm256_setzero_si256();
        for (int k = 0; k < 16; k++) {
            __m256i row = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(p->t.q + 16 * k)));
            __m256i hit = _mm256_cmpeq_epi8(hi, _mm256_set1_epi8((char)k));
            r = _mm256_or_si256(r, _mm256_and_si256(_mm256_shuffle_epi8(row, lo), hit));
        }
        _mm256_storeu_si256((__m256i *)((uint8_t *)p->y + i), r);
    }
    return i;
}
#endif

static void qlut_fn(int64_t blk, int64_t nblk, void *args)
{
    const qlut_args *p = args;
    int64_t e0, e1;
    cge__block_range(p->n, blk, nblk, &e0, &e1);
#ifdef CGE__HAVE_Q8_AVX2
    if (!p->wide && cge__q8_avx2())
        e0 = qlut_avx2(p, e0, e1);
#endif
    if (p->wide)
        for (int64_t i = e0; i < e1; i++)
            ((float *)p->y)[i] = p->t.f[p->x[i]];
    else
        for (int64_t i = e0; i < e1; i++)
            ((uint8_t *)p->y)[i] = p->t.q[p->x[i]];
}

static cge_status qlut_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    qlut_args p;
    cge_dtype tt = ctx->inputs[1].dtype;
    if (cge_dtype_size(ctx->inputs[0].dtype) != 1 ||
        (cge_dtype_size(tt) != 1 && tt != CGE_F32) || cge_shape_numel(&ctx->inputs[1].shape) != 256)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE,
                                "X must be 8-bit, the table 256 8-bit or float32 values");
    p.wide = tt == CGE_F32;
    memcpy(&p.t, ctx->inputs[1].data, p.wide ? sizeof p.t.f : sizeof p.t.q);
    p.x = ctx->inputs[0].data;
    p.y = ctx->outputs[0].data;
    p.n = cge_shape_numel(&ctx->inputs[0].shape);
    if (p.n == 0)
        return CGE_OK;
    return cge_launch(stream, qlut_fn, cge__blocks_for(p.n, 32768, ctx->num_threads), &p, sizeof p);
}

/* ---- QPool -------------------------------------------------------------------- */

/* Inputs X, x_scale, x_zero_point, y_scale, y_zero_point; "mode" max, avg or
 * global_avg with MaxPool / AveragePool's attributes; rank 4 (NCHW, or NHWC
 * bytes when channels_last). */
static cge_status qpool_geom(const cge_attrs *a, const cge_shape *xs, nn_geom *g, int *mode,
                             char *err, size_t errsz)
{
    const char *m = cge_attrs_get_string(a, "mode", "max");
    *mode = !strcmp(m, "max") ? 0 : !strcmp(m, "avg") ? 1 : !strcmp(m, "global_avg") ? 2 : -1;
    if (*mode < 0) {
        snprintf(err, errsz, "mode '%s' is not max, avg or global_avg", m);
        return CGE_ERR_INVALID_ARG;
    }
    if (xs->rank != 4) {
        snprintf(err, errsz, "X must have rank 4");
        return CGE_ERR_SHAPE;
    }
    if (*mode == 2) {
        memset(g, 0, sizeof *g);
        g->nsp = 2;
        for (int i = 0; i < NN_MAX_SP; i++) {
            g->in[i] = i ? xs->dims[1 + i] : 1;
            g->k[i] = g->in[i];
            g->out[i] = g->s[i] = g->d[i] = 1;
        }
        return CGE_OK;
    }
    bool ceil_mode = cge_attrs_get_int(a, "ceil_mode", 0) != 0;
    if (!nn_geom_make(a, 2, xs->dims + 2, NULL, ceil_mode, g, err, errsz))
        return CGE_ERR_INVALID_ARG;
    return CGE_OK;
}

static cge_status qpool_infer(cge_infer_ctx *ctx)
{
    for (int i = 1; i < 5; i++)
        if (!scalar_ok(&ctx->inputs[i]))
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "input %d must be a scalar", i);
    nn_geom g;
    int mode;
    char err[256];
    cge_status st = qpool_geom(ctx->attrs, &ctx->inputs[0].shape, &g, &mode, err, sizeof err);
    if (st)
        return cge_meta_error(ctx, st, "%s", err);
    ctx->outputs[0].dtype = ctx->inputs[4].dtype;
    ctx->outputs[0].shape = ctx->inputs[0].shape;
    ctx->outputs[0].shape.dims[2] = g.out[1];
    ctx->outputs[0].shape.dims[3] = g.out[2];
    return CGE_OK;
}

typedef struct qpool_args {
    nn_geom g;
    const void *x;
    void *y;
    int64_t N, C;
    int mode, xsg, ysg, nhwc, count_pad;
    int32_t zx;
    float sx, sy, zy, lo, hi;
    /* max: qpool_out of each input code (index code + 128 for int8), made
     * once per launch; identity when it maps every code to itself */
    uint8_t table[256];
    int identity, vbmi;
    /* NHWC averages of few output rows (a global average: one): each row's
     * channels cut into cparts ranges of 64, one block each,
     * so that the threads share them */
    int64_t cparts;
} qpool_args;

/* The window of output (oh, ow): its tap ranges, the taps inside the input
 * (`real`) and the divisor of an average (`div`: with count_include_pad the
 * padded taps count too, as zeros). */
static void qpool_window(const qpool_args *p, int64_t oh, int64_t ow, int64_t k[4],
                         int64_t *real, int64_t *div)
{
    nn_tap_range(&p->g, 1, oh, &k[0], &k[1]);
    nn_tap_range(&p->g, 2, ow, &k[2], &k[3]);
    *real = (k[1] - k[0]) * (k[3] - k[2]);
    *div = p->mode == 1 && p->count_pad ? nn_padded_taps(&p->g, 1, oh) * nn_padded_taps(&p->g, 2, ow)
                                        : *real;
}

/* Max pooling's window of output (oh, ow): nn_tap_range without its
 * integer divisions where the dilation is 1 (two divisions per output
 * position took most of resnet50's 3x3 max pool); `real` its taps. */
static inline void qpool_max_window(const qpool_args *p, int64_t oh, int64_t ow, int64_t k[4],
                                    int64_t *real)
{
    const nn_geom *g = &p->g;
    const int64_t o[2] = {oh, ow};
    for (int j = 0; j < 2; j++) {
        if (g->d[1 + j] != 1) {
            nn_tap_range(g, 1 + j, o[j], &k[2 * j], &k[2 * j + 1]);
            continue;
        }
        int64_t start = o[j] * g->s[1 + j] - g->pb[1 + j], lim = g->in[1 + j] - start;
        int64_t a = start < 0 ? -start : 0, b = lim < g->k[1 + j] ? lim : g->k[1 + j];
        b = b < 0 ? 0 : b;
        k[2 * j] = a < b ? a : b;
        k[2 * j + 1] = b;
    }
    *real = (k[1] - k[0]) * (k[3] - k[2]);
}

/* The output code from the window's max (mode 0) or sum (mode 1) of raw
 * codes over `real` taps. */
static int32_t qpool_out(const qpool_args *p, int32_t acc, int64_t real, int64_t div)
{
    float v = p->mode == 0 ? (float)(acc - p->zx) * p->sx
              : div        ? (float)(acc - (int32_t)real * p->zx) * p->sx / (float)div
                           : 0.0f;
    return cge__q8_clamp(rintf(v / p->sy) + p->zy, p->lo, p->hi);
}

/* NHWC max: the window's largest code per channel, in bytes (64 lanes on
 * AVX-512), then the code's output from the table: qpool_out is a monotone
 * function of one code, so table[max] is qpool_out(max), the same bits as
 * the int32 loop below at a fraction of its cost (per output its own float
 * division and clamp, unvectorised: resnet50's 3x3 MaxPool took 0.9 ms). */
#define QP_CHUNK 256
static inline __attribute__((always_inline)) void qpool_max_nhwc(const qpool_args *p, int64_t r0,
                                                                 int64_t r1)
{
    const nn_geom *g = &p->g;
    int64_t H = g->in[1], W = g->in[2], OH = g->out[1], OW = g->out[2], C = p->C;
    /* int8 codes flipped to unsigned order (x ^ 0x80), so one unsigned max
     * serves both; the table is indexed the same way */
    uint8_t flip = p->xsg ? 0x80 : 0, acc[QP_CHUNK];
    for (int64_t r = r0; r < r1; r++) {
        int64_t n = r / OH, oh = r % OH;
        for (int64_t ow = 0; ow < OW; ow++) {
            int64_t k[4], real;
            qpool_max_window(p, oh, ow, k, &real);
            uint8_t *y = (uint8_t *)p->y + ((n * OH + oh) * OW + ow) * C;
            if (real == 0) { /* only padding: the int32 loop's -1000 */
                uint8_t v = (uint8_t)qpool_out(p, -1000, 0, 0);
                memset(y, v, (size_t)C);
                continue;
            }
            for (int64_t c0 = 0; c0 < C; c0 += QP_CHUNK) {
                int64_t nc = C - c0 < QP_CHUNK ? C - c0 : QP_CHUNK;
                for (int64_t c = 0; c < nc; c++)
                    acc[c] = 0;
                for (int64_t ta = k[0]; ta < k[1]; ta++) {
                    int64_t ih = oh * g->s[1] - g->pb[1] + ta * g->d[1];
                    for (int64_t tb = k[2]; tb < k[3]; tb++) {
                        int64_t iw = ow * g->s[2] - g->pb[2] + tb * g->d[2];
                        const uint8_t *x = (const uint8_t *)p->x + ((n * H + ih) * W + iw) * C + c0;
                        for (int64_t c = 0; c < nc; c++) {
                            uint8_t v = x[c] ^ flip;
                            acc[c] = v > acc[c] ? v : acc[c];
                        }
                    }
                }
                if (p->identity)
                    for (int64_t c = 0; c < nc; c++)
                        y[c0 + c] = acc[c] ^ flip;
                else
                    for (int64_t c = 0; c < nc; c++)
                        y[c0 + c] = p->table[acc[c]];
            }
        }
    }
}

/* NHWC: per output position, the taps outside and the channels inside
 * (contiguous), in chunks of int32 sums. */
static inline __attribute__((always_inline)) void qpool_nhwc(const qpool_args *p, int64_t r0,
                                                             int64_t r1, int64_t cb, int64_t ce)
{
    const nn_geom *g = &p->g;
    int64_t H = g->in[1], W = g->in[2], OH = g->out[1], OW = g->out[2], C = p->C;
    int32_t acc[QP_CHUNK];
    for (int64_t r = r0; r < r1; r++) {
        int64_t n = r / OH, oh = r % OH;
        for (int64_t ow = 0; ow < OW; ow++) {
            int64_t k[4], real, div;
            qpool_window(p, oh, ow, k, &real, &div);
            int64_t ka0 = k[0], ka1 = k[1], kb0 = k[2], kb1 = k[3];
            for (int64_t c0 = cb; c0 < ce; c0 += QP_CHUNK) {
                int64_t nc = ce - c0 < QP_CHUNK ? ce - c0 : QP_CHUNK;
                int32_t init = p->mode == 0 ? -1000 : 0;
                for (int64_t c = 0; c < nc; c++)
                    acc[c] = init;
                for (int64_t ta = ka0; ta < ka1; ta++) {
                    int64_t ih = oh * g->s[1] - g->pb[1] + ta * g->d[1];
                    for (int64_t tb = kb0; tb < kb1; tb++) {
                        int64_t iw = ow * g->s[2] - g->pb[2] + tb * g->d[2];
                        int64_t base = ((n * H + ih) * W + iw) * C + c0;
                        if (p->xsg) {
                            const int8_t *x = (const int8_t *)p->x + base;
                            if (p->mode == 0)
                                for (int64_t c = 0; c < nc; c++)
                                    acc[c] = x[c] > acc[c] ? x[c] : acc[c];
                            else
                                for (int64_t c = 0; c < nc; c++)
                                    acc[c] += x[c];
                        } else {
                            const uint8_t *x = (const uint8_t *)p->x + base;
                            if (p->mode == 0)
                                for (int64_t c = 0; c < nc; c++)
                                    acc[c] = x[c] > acc[c] ? x[c] : acc[c];
                            else
                                for (int64_t c = 0; c < nc; c++)
                                    acc[c] += x[c];
                        }
                    }
                }
                int64_t yo = ((n * OH + oh) * OW + ow) * C + c0;
                for (int64_t c = 0; c < nc; c++)
                    cge__q8_store(p->y, p->ysg, yo + c, qpool_out(p, acc[c], real, div));
            }
        }
    }
}

/* Block work: (n, output row); every channel of it. */
#ifdef CGE__HAVE_Q8_AVX512
/* The byte max above in 64-lane registers (the compiled loop spent ~120
 * cycles per output position of resnet50's 3x3 pool, 64 channels): per
 * window one masked load and max per tap and 64 channels, the table as two
 * 128-entry byte permutations (AVX512-VBMI; without it the scalar lookup). */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi"))) static void
qpool_max_nhwc_zmm(const qpool_args *p, int64_t r0, int64_t r1, int vbmi)
{
    const nn_geom *g = &p->g;
    int64_t H = g->in[1], W = g->in[2], OH = g->out[1], OW = g->out[2], C = p->C;
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512i t0 = _mm512_setzero_si512(), t1 = t0;
    if (vbmi) {
        t0 = _mm512_loadu_si512(p->table);
        t1 = _mm512_loadu_si512(p->table + 64);
    }
    __m512i t2 = vbmi ? _mm512_loadu_si512(p->table + 128) : t0;
    __m512i t3 = vbmi ? _mm512_loadu_si512(p->table + 192) : t0;
    for (int64_t r = r0; r < r1; r++) {
        int64_t n = r / OH, oh = r % OH;
        for (int64_t ow = 0; ow < OW; ow++) {
            int64_t k[4], real;
            qpool_max_window(p, oh, ow, k, &real);
            uint8_t *y = (uint8_t *)p->y + ((n * OH + oh) * OW + ow) * C;
            if (real == 0) {
                memset(y, (uint8_t)qpool_out(p, -1000, 0, 0), (size_t)C);
                continue;
            }
            for (int64_t c0 = 0; c0 < C; c0 += 64) {
                __mmask64 m = C - c0 >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << (C - c0)) - 1;
                /* int8 flipped to unsigned order as the scalar loop does */
                __m512i acc = _mm512_setzero_si512();
                for (int64_t ta = k[0]; ta < k[1]; ta++) {
                    int64_t ih = oh * g->s[1] - g->pb[1] + ta * g->d[1];
                    for (int64_t tb = k[2]; tb < k[3]; tb++) {
                        int64_t iw = ow * g->s[2] - g->pb[2] + tb * g->d[2];
                        __m512i v = _mm512_maskz_loadu_epi8(
                            m, (const uint8_t *)p->x + ((n * H + ih) * W + iw) * C + c0);
                        if (p->xsg)
                            v = _mm512_xor_si512(v, flip);
                        acc = _mm512_max_epu8(acc, v);
                    }
                }
                if (p->identity) {
                    if (p->xsg)
                        acc = _mm512_xor_si512(acc, flip);
                    _mm512_mask_storeu_epi8(y + c0, m, acc);
                } else if (vbmi) {
                    /* table[acc]: entries 0-127 from t0:t1, 128-255 from t2:t3 */
                    __m512i lo = _mm512_permutex2var_epi8(t0, acc, t1);
                    __m512i hi = _mm512_permutex2var_epi8(t2, acc, t3);
                    __m512i o = _mm512_mask_blend_epi8(_mm512_movepi8_mask(acc), lo, hi);
                    _mm512_mask_storeu_epi8(y + c0, m, o);
                } else {
                    uint8_t b[64];
                    _mm512_storeu_si512(b, acc);
                    for (int64_t c = 0; c < 64 && c0 + c < C; c++)
                        y[c0 + c] = p->table[b[c]];
                }
            }
        }
    }
}

CGE__Q8_AVX512 static void qpool_nhwc_avx512(const qpool_args *p, int64_t r0, int64_t r1,
                                             int64_t cb, int64_t ce)
{
    if (p->mode == 0)
        qpool_max_nhwc_zmm(p, r0, r1, p->vbmi);
    else
        qpool_nhwc(p, r0, r1, cb, ce);
}
#endif

#ifdef CGE__HAVE_Q8_AVX2
/* The NHWC loops above compiled for AVX2 (32 byte lanes, 8 int32 lanes). */
CGE__Q8_AVX2 static void qpool_nhwc_avx2(const qpool_args *p, int64_t r0, int64_t r1, int64_t cb,
                                         int64_t ce)
{
    if (p->mode == 0)
        qpool_max_nhwc(p, r0, r1);
    else
        qpool_nhwc(p, r0, r1, cb, ce);
}
#endif

static void qpool_fn(int64_t blk, int64_t nblk, void *args)
{
    const qpool_args *p = args;
    const nn_geom *g = &p->g;
    int64_t H = g->in[1], W = g->in[2], OH = g->out[1], OW = g->out[2], C = p->C;
    int64_t r0, r1, cb = 0, ce = C;
    if (p->cparts > 1) { /* blocks: row blocks x channel parts */
        int64_t part = blk % p->cparts;
        cge__block_range((C + 63) / 64, part, p->cparts, &cb, &ce);
        cb *= 64;
        ce = ce * 64 < C ? ce * 64 : C;
        blk /= p->cparts;
        nblk /= p->cparts;
    }
    cge__block_range(p->N * OH, blk, nblk, &r0, &r1);
    if (p->nhwc) {
#ifdef CGE__HAVE_Q8_AVX512
        if (cge__q8_avx512()) {
            qpool_nhwc_avx512(p, r0, r1, cb, ce);
            return;
        }
        if (cge__q8_avx2()) {
            qpool_nhwc_avx2(p, r0, r1, cb, ce);
            return;
        }
#endif
        if (p->mode == 0)
            qpool_max_nhwc(p, r0, r1);
        else
            qpool_nhwc(p, r0, r1, cb, ce);
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        int64_t n = r / OH, oh = r % OH;
        for (int64_t ow = 0; ow < OW; ow++) {
            int64_t k[4], real, div;
            qpool_window(p, oh, ow, k, &real, &div);
            int64_t ka0 = k[0], ka1 = k[1], kb0 = k[2], kb1 = k[3];
            for (int64_t c = 0; c < C; c++) {
                int32_t acc = p->mode == 0 ? -1000 : 0;
                for (int64_t ta = ka0; ta < ka1; ta++) {
                    int64_t ih = oh * g->s[1] - g->pb[1] + ta * g->d[1];
                    for (int64_t tb = kb0; tb < kb1; tb++) {
                        int64_t iw = ow * g->s[2] - g->pb[2] + tb * g->d[2];
                        int32_t v = cge__q8_load(p->x, p->xsg, ((n * C + c) * H + ih) * W + iw);
                        acc = p->mode == 0 ? (v > acc ? v : acc) : acc + v;
                    }
                }
                cge__q8_store(p->y, p->ysg, ((n * C + c) * OH + oh) * OW + ow,
                         qpool_out(p, acc, real, div));
            }
        }
    }
}

/* What the attributes say (the geometry, mode, layout, padding rule and the
 * output range): read once when the plan is prepared, kept as the kernel's
 * state, or per launch where there is none. */
typedef struct qpool_opts {
    nn_geom g;
    int mode, nhwc, count_pad;
    float lo, hi;
} qpool_opts;

static cge_status qpool_opts_read(const cge_kernel_ctx *ctx, qpool_opts *o)
{
    memset(o, 0, sizeof *o);
    char err[256];
    const cge_tensor *X = &ctx->inputs[0], *Y = &ctx->outputs[0];
    cge_status st = qpool_geom(ctx->attrs, &X->shape, &o->g, &o->mode, err, sizeof err);
    if (st)
        return cge_kernel_error(ctx, st, "%s", err);
    if ((X->dtype != CGE_I8 && X->dtype != CGE_U8) || (Y->dtype != CGE_I8 && Y->dtype != CGE_U8))
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "X and Y must be int8 or uint8");
    o->nhwc = cge_attrs_get_int(ctx->attrs, "channels_last", 0) != 0;
    o->count_pad = cge_attrs_get_int(ctx->attrs, "count_include_pad", 0) != 0;
    out_range(ctx, Y->dtype == CGE_I8, &o->lo, &o->hi);
    return CGE_OK;
}

static cge_status qpool_prepare(const cge_kernel_ctx *ctx, void **state)
{
    *state = NULL;
    qpool_opts *o = malloc(sizeof *o);
    if (!o)
        return cge_kernel_error(ctx, CGE_ERR_NO_MEMORY, "out of memory");
    cge_status st = qpool_opts_read(ctx, o);
    if (st) {
        free(o);
        return st;
    }
    *state = o;
    return CGE_OK;
}

static void qpool_release(void *state)
{
    free(state);
}

static cge_status qpool_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    qpool_opts o;
    if (ctx->state)
        o = *(const qpool_opts *)ctx->state;
    else {
        cge_status st = qpool_opts_read(ctx, &o);
        if (st)
            return st;
    }
    qpool_args p;
    memset(&p, 0, sizeof p);
    const cge_tensor *X = &ctx->inputs[0], *Y = &ctx->outputs[0];
    p.g = o.g;
    p.mode = o.mode;
    p.nhwc = o.nhwc;
    p.count_pad = o.count_pad;
    p.lo = o.lo;
    p.hi = o.hi;
    p.x = X->data;
    p.y = Y->data;
    p.N = X->shape.dims[0];
    p.C = X->shape.dims[1];
    p.xsg = X->dtype == CGE_I8;
    p.ysg = Y->dtype == CGE_I8;
    p.sx = ((const float *)ctx->inputs[1].data)[0];
    p.zx = cge__q8_load(ctx->inputs[2].data, p.xsg, 0);
    p.sy = ((const float *)ctx->inputs[3].data)[0];
    p.zy = (float)cge__q8_load(ctx->inputs[4].data, p.ysg, 0);
    int64_t rows = p.N * p.g.out[1];
    if (rows * p.g.out[2] * p.C == 0)
        return CGE_OK;
    if (p.mode == 0) {
        p.identity = 1;
        for (int c = 0; c < 256; c++) {
            int32_t code = p.xsg ? c - 128 : c;
            int32_t out = qpool_out(&p, code, 1, 1);
            /* as a byte of y's type, which is what the stores write */
            p.table[c] = (uint8_t)(p.ysg ? (uint8_t)(int8_t)out : (uint8_t)out);
            p.identity &= p.xsg == p.ysg && out == code;
        }
#ifdef CGE__HAVE_Q8_AVX512
        p.vbmi = __builtin_cpu_supports("avx512vbmi");
#endif
    }
    int64_t per = p.g.out[2] * p.C * p.g.k[1] * p.g.k[2];
    int64_t nb = cge__blocks_for(rows, per >= 16384 ? 1 : 16384 / (per ? per : 1),
                                 ctx->num_threads);
    p.cparts = 1;
    if (p.nhwc && p.mode != 0 && nb < ctx->num_threads) {
        /* fewer row blocks than threads (resnet50's global average: one row,
         * 2048 channels of 49 taps): the channels cut too, at least 16384
         * taps per part */
        int64_t chunks = (p.C + 63) / 64, taps = per / nb;
        p.cparts = cge__blocks_for(chunks, 16384 * chunks / (taps ? taps : 1) + 1,
                                   (int)((ctx->num_threads + nb - 1) / nb));
        if (p.cparts > (ctx->num_threads + nb - 1) / nb)
            p.cparts = (ctx->num_threads + nb - 1) / nb;
    }
    return cge_launch(stream, qpool_fn, nb * p.cparts, &p, sizeof p);
}

/* ---- definitions -------------------------------------------------------------- */

static const cge_arg_def qbin_in[] = {
    {"A", 0, Q8, "int8 or uint8"},
    {"A_scale", 0, F32, "scalar"},
    {"A_zero_point", 0, Q8, "scalar"},
    {"B", 0, Q8, "A's shape, or one element"},
    {"B_scale", 0, F32, "scalar"},
    {"B_zero_point", 0, Q8, "scalar"},
    {"C_scale", 0, F32, "scalar"},
    {"C_zero_point", 0, Q8, "scalar"},
};
static const cge_arg_def q_out[] = {{"C", 0, Q8, "requantised result"}};
static const cge_arg_def qpool_in[] = {
    {"X", 0, Q8, "[N, C, H, W]"},
    {"x_scale", 0, F32, "scalar"},
    {"x_zero_point", 0, Q8, "scalar"},
    {"y_scale", 0, F32, "scalar"},
    {"y_zero_point", 0, Q8, "scalar"},
};
#define RANGE_ATTRS                                                                          \
    {"lo", CGE_ATTR_INT, false, -1024, 0.0f, NULL, "lowest output value (a folded Relu/Clip)"}, \
    {"hi", CGE_ATTR_INT, false, 1024, 0.0f, NULL, "highest output value"}
static const cge_attr_def qbin_attrs[] = {RANGE_ATTRS};
static const cge_attr_def qpool_attrs[] = {
    RANGE_ATTRS,
    {"mode", CGE_ATTR_STRING, false, 0, 0.0f, "max", "max, avg or global_avg"},
    {"auto_pad", CGE_ATTR_STRING, false, 0, 0.0f, "NOTSET", "NOTSET, VALID, SAME_UPPER, SAME_LOWER"},
    {"ceil_mode", CGE_ATTR_INT, false, 0, 0.0f, NULL, "ceil for output sizes"},
    {"count_include_pad", CGE_ATTR_INT, false, 0, 0.0f, NULL, "avg: padding counts"},
    {"dilations", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "per spatial axis"},
    {"kernel_shape", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "window"},
    {"pads", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "begins then ends"},
    {"strides", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "per spatial axis"},
    {"channels_last", CGE_ATTR_INT, false, 0, 0.0f, NULL, "X and Y are NHWC (the layout pass)"},
};
static const cge_kernel_def qbin_kernels[] = {
    {.engine = "cpu", .launch = qbin_launch, .inplace_input = -1}};
static const cge_arg_def qlut_in[] = {
    {"X", 0, Q8, "int8 or uint8"},
    {"table", 0, Q8 | F32, "[256]: the output for each byte of X (its dtype is Y's)"},
};
static const cge_arg_def qlut_out[] = {{"Y", 0, Q8 | F32, "table[X]"}};
static const cge_kernel_def qlut_kernels[] = {
    {.engine = "cpu", .launch = qlut_launch, .inplace_input = 0}};
static const cge_kernel_def qpool_kernels[] = {
    {.engine = "cpu", .launch = qpool_launch, .prepare = qpool_prepare, .release = qpool_release,
     .inplace_input = -1}};

#define N_OF(a) ((int32_t)(sizeof(a) / sizeof((a)[0])))

static const cge_op_def qlinear_ops[] = {
    {.name = "QAdd", .domain = CGE_DOMAIN_FUSED, .since_version = 1, .inputs = qbin_in,
     .num_inputs = 8, .outputs = q_out, .num_outputs = 1, .attrs = qbin_attrs,
     .num_attrs = N_OF(qbin_attrs), .infer = qbin_infer, .kernels = qbin_kernels,
     .num_kernels = 1,
     .doc = "Q(DQ(A) + DQ(B)) clamped to [lo, hi] (com.microsoft QLinearAdd's inputs)"},
    {.name = "QMul", .domain = CGE_DOMAIN_FUSED, .since_version = 1, .inputs = qbin_in,
     .num_inputs = 8, .outputs = q_out, .num_outputs = 1, .attrs = qbin_attrs,
     .num_attrs = N_OF(qbin_attrs), .infer = qbin_infer, .kernels = qbin_kernels,
     .num_kernels = 1, .doc = "Q(DQ(A) * DQ(B)) clamped to [lo, hi]"},
    {.name = "QLookup", .domain = CGE_DOMAIN_FUSED, .since_version = 1, .inputs = qlut_in,
     .num_inputs = 2, .outputs = qlut_out, .num_outputs = 1, .infer = qlut_infer,
     .kernels = qlut_kernels, .num_kernels = 1,
     .doc = "table[X]: Q(f(DQ(X))) for a unary f (or a chain of them), or DQ(X) itself in "
            "float32, tabulated by fuse_qdq with the ops' own kernels"},
    {.name = "QPool", .domain = CGE_DOMAIN_FUSED, .since_version = 1, .inputs = qpool_in,
     .num_inputs = 5, .outputs = q_out, .num_outputs = 1, .attrs = qpool_attrs,
     .num_attrs = N_OF(qpool_attrs), .infer = qpool_infer, .kernels = qpool_kernels,
     .num_kernels = 1,
     .doc = "Q(MaxPool / AveragePool / GlobalAveragePool(DQ(X))) in int8, NCHW or NHWC"},
};

const cge_op_def *cge__ops_qlinear(int32_t *count)
{
    *count = N_OF(qlinear_ops);
    return qlinear_ops;
}
