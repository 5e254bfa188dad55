/* Quantization operators: QuantizeLinear / DequantizeLinear (13-21: per
 * tensor, per axis and blocked; int8/uint8/int16/uint16, int32 in),
 * DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul and
 * QLinearConv, and the compiler's cge.fused QConv / QMatMul (fuse_qdq:
 * constant weights on oneDNN's int8 kernels). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu_isa.h"
#include "cge/fused_ops.h"
#include "ops/builtin.h"
#include "ops/dnnl_qconv.h"
#include "ops/kernel_util.h"
#include "ops/nn_spatial.h"
#include "ops/q8.h"

/* Rounding is to nearest, ties to even (rintf in the default rounding mode),
 * then saturation. Integer products accumulate in int32, as the ONNX
 * definitions allow. */

#define Q8 (CGE_DT(CGE_I8) | CGE_DT(CGE_U8))
#define F32 CGE_DT(CGE_F32)
#define Q16 (CGE_DT(CGE_I16) | CGE_DT(CGE_U16))

static int present(const cge_infer_ctx *ctx, int32_t i)
{
    return ctx->num_inputs > i && ctx->inputs[i].dtype != CGE_DTYPE_UNDEFINED;
}

static int kpresent(const cge_kernel_ctx *ctx, int32_t i)
{
    return ctx->num_inputs > i && ctx->inputs[i].dtype != CGE_DTYPE_UNDEFINED;
}

/* ---- QuantizeLinear / DequantizeLinear ------------------------------------ */

/* Three forms of scale (and zero point), as opset 21 defines them: a scalar
 * (per tensor); 1-D along `axis` (per axis); or, with block_size > 0, x's
 * rank with dims[axis] = ceil(x.dims[axis] / block_size) and the other dims
 * x's (blocked: consecutive block_size elements along axis share one). The
 * importer unpacks int4/uint4 tensors into int8/uint8 and turns a 4-bit
 * QuantizeLinear into an 8-bit one and a Clip (onnx_opset21.c), so nothing
 * here is 4-bit. */
typedef struct qdq_layout {
    int32_t axis;
    int64_t block;      /* 0: per tensor or per axis */
    int64_t axis_dim;   /* x's size along axis (1 per tensor) */
    int64_t nb;         /* scales along axis: axis_dim, or ceil(axis_dim / block) */
    int64_t inner;      /* elements after axis */
} qdq_layout;

/* The layout of the scale at input si against x's shape; an error message in
 * err otherwise. Unknown (dynamic) dims are accepted by the meta and checked
 * again when the kernel runs. */
static bool qdq_layout_of(const cge_shape *x, const cge_shape *s, const cge_attrs *attrs,
                          qdq_layout *l, char *err, size_t errsz)
{
    memset(l, 0, sizeof *l);
    l->axis_dim = l->nb = l->inner = 1;
    int64_t ns = cge_shape_numel(s), axis_attr = cge_attrs_get_int(attrs, "axis", 1);
    l->block = cge_attrs_get_int(attrs, "block_size", 0);
    if (l->block < 0) {
        snprintf(err, errsz, "block_size %lld is negative", (long long)l->block);
        return false;
    }
    bool per_tensor = l->block == 0 && (s->rank == 0 || (s->rank == 1 && s->dims[0] == 1));
    if (per_tensor)
        return true;
    if (l->block == 0 && s->rank > 1) {
        snprintf(err, errsz, "the scale must be a scalar or 1-D (rank %d without block_size)",
                 s->rank);
        return false;
    }
    int32_t ax;
    if (!cge_axis_normalize(axis_attr, x->rank, false, &ax)) {
        snprintf(err, errsz, "axis %lld is out of range for rank %d", (long long)axis_attr,
                 x->rank);
        return false;
    }
    l->axis = ax;
    l->axis_dim = x->dims[ax];
    for (int32_t d = ax + 1; d < x->rank; d++)
        l->inner *= x->dims[d];
    if (l->block == 0) {
        l->nb = ns;
        if (ns >= 0 && l->axis_dim >= 0 && ns != l->axis_dim) {
            snprintf(err, errsz, "%lld scales for axis %d of size %lld", (long long)ns, ax,
                     (long long)l->axis_dim);
            return false;
        }
        return true;
    }
    if (s->rank != x->rank) {
        snprintf(err, errsz, "block_size %lld: the scale has rank %d, x rank %d (they must "
                 "agree)", (long long)l->block, s->rank, x->rank);
        return false;
    }
    for (int32_t d = 0; d < x->rank; d++) {
        int64_t xd = x->dims[d], sd = s->dims[d];
        int64_t want = d == ax && xd >= 0 ? (xd + l->block - 1) / l->block : xd;
        if (xd >= 0 && sd >= 0 && sd != want) {
            snprintf(err, errsz, "block_size %lld: the scale's dim %d is %lld, %lld expected "
                     "(x's dim %lld%s)", (long long)l->block, d, (long long)sd, (long long)want,
                     (long long)xd, d == ax ? " in blocks, rounded up" : "");
            return false;
        }
    }
    l->nb = s->dims[ax];
    return true;
}

static cge_status check_scale(cge_infer_ctx *ctx, int32_t si, int32_t zi)
{
    const cge_tensor_desc *s = &ctx->inputs[si];
    if (present(ctx, zi) && !cge_shape_equal(&ctx->inputs[zi].shape, &s->shape))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "the zero point's shape differs from the scale's");
    qdq_layout l;
    char err[256];
    if (!qdq_layout_of(&ctx->inputs[0].shape, &s->shape, ctx->attrs, &l, err, sizeof err))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "%s", err);
    return CGE_OK;
}

/* QuantizeLinear's output type: the zero point's, else output_dtype (an
 * ONNX type number; 0 means uint8). */
static cge_dtype quantize_out_dtype(const cge_attrs *attrs, cge_dtype zt)
{
    if (zt != CGE_DTYPE_UNDEFINED)
        return zt;
    switch (cge_attrs_get_int(attrs, "output_dtype", 0)) {
    case 0: case 2: return CGE_U8;
    case 3: return CGE_I8;
    case 4: return CGE_U16;
    case 5: return CGE_I16;
    default: return CGE_DTYPE_UNDEFINED;
    }
}

static cge_status quantize_infer(cge_infer_ctx *ctx)
{
    cge_status st = check_scale(ctx, 1, 2);
    if (st)
        return st;
    cge_dtype zt = present(ctx, 2) ? ctx->inputs[2].dtype : CGE_DTYPE_UNDEFINED;
    int64_t od = cge_attrs_get_int(ctx->attrs, "output_dtype", 0);
    cge_dtype yt = quantize_out_dtype(ctx->attrs, zt);
    if (yt == CGE_DTYPE_UNDEFINED)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "output_dtype %lld is not supported (uint8, "
                              "int8, uint16, int16; int4/uint4 through the importer)",
                              (long long)od);
    if (zt != CGE_DTYPE_UNDEFINED && od != 0 &&
        quantize_out_dtype(ctx->attrs, CGE_DTYPE_UNDEFINED) != zt)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "output_dtype %lld disagrees with the zero "
                              "point's %s", (long long)od, cge_dtype_name(zt));
    ctx->outputs[0].dtype = yt;
    ctx->outputs[0].shape = ctx->inputs[0].shape;
    return CGE_OK;
}

static cge_status dequantize_infer(cge_infer_ctx *ctx)
{
    cge_status st = check_scale(ctx, 1, 2);
    if (st)
        return st;
    if (present(ctx, 2) && ctx->inputs[2].dtype != ctx->inputs[0].dtype)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "x is %s but x_zero_point is %s",
                              cge_dtype_name(ctx->inputs[0].dtype),
                              cge_dtype_name(ctx->inputs[2].dtype));
    ctx->outputs[0].dtype = CGE_F32;
    ctx->outputs[0].shape = ctx->inputs[0].shape;
    return CGE_OK;
}

typedef struct qdq_args {
    cge_dtype xt, zt, yt;
    const void *x, *zp;
    const float *scale;
    void *y;
    int64_t n, nscale;
    qdq_layout l;
    float lo, hi;
} qdq_args;

/* The scale index of element i. Per axis: (i / inner) % axis_dim; blocked:
 * the same coordinates with the axis one divided by the block. */
static inline int64_t scale_idx(const qdq_args *p, int64_t i)
{
    if (p->nscale == 1)
        return 0;
    int64_t in = i % p->l.inner, r = i / p->l.inner;
    int64_t a = r % p->l.axis_dim, o = r / p->l.axis_dim;
    if (!p->l.block)
        return a;
    return (o * p->l.nb + a / p->l.block) * p->l.inner + in;
}

static inline int32_t load_qx(const void *p, cge_dtype t, int64_t i)
{
    switch (t) {
    case CGE_I16: return ((const int16_t *)p)[i];
    case CGE_U16: return ((const uint16_t *)p)[i];
    default: return cge__q_load(p, t, i);
    }
}

static inline void store_qx(void *y, cge_dtype t, int64_t i, float v)
{
    switch (t) {
    case CGE_I8: ((int8_t *)y)[i] = (int8_t)v; break;
    case CGE_U8: ((uint8_t *)y)[i] = (uint8_t)v; break;
    case CGE_I16: ((int16_t *)y)[i] = (int16_t)v; break;
    case CGE_U16: ((uint16_t *)y)[i] = (uint16_t)v; break;
    default: break;
    }
}

/* Per-tensor float32 -> int8/uint8 QuantizeLinear, 16 lanes on AVX-512:
 * the same IEEE operations as the scalar loop below (a true division,
 * round half to even, the zero point added, NaN to 0, the clamp), so the
 * same bits; the compiler left the scalar loop unvectorised (2-3 ns an
 * element, a model's input quantisation ~9% of mobilenet_v2 int8). */
#ifdef CGE__HAVE_Q8_AVX512
CGE__Q8_AVX512 static int64_t
quantize_avx512(const float *x, void *y, int sg, float s, float z, float lo, float hi, int64_t e0,
                int64_t e1)
{
    const __m512 vs = _mm512_set1_ps(s), vz = _mm512_set1_ps(z), vlo = _mm512_set1_ps(lo),
                 vhi = _mm512_set1_ps(hi);
    int64_t i = e0;
    for (; i + 16 <= e1; i += 16) {
        __m512 v = _mm512_div_ps(_mm512_loadu_ps(x + i), vs);
        v = _mm512_add_ps(_mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), vz);
        v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v); /* NaN -> 0 */
        __m512i q = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(v, vlo), vhi));
        if (sg)
            _mm_storeu_si128((__m128i *)((int8_t *)y + i), _mm512_cvtsepi32_epi8(q));
        else
            _mm_storeu_si128((__m128i *)((uint8_t *)y + i), _mm512_cvtusepi32_epi8(q));
    }
    return i;
}

#endif

#ifdef CGE__HAVE_Q8_AVX2
/* The same on AVX2, 16 values a step (two 8-lane halves). */
CGE__Q8_AVX2 static int64_t quantize_avx2(const float *x, void *y, int sg, float s, float z,
                                          float lo, float hi, int64_t e0, int64_t e1)
{
    const __m256 vs = _mm256_set1_ps(s), vz = _mm256_set1_ps(z), vlo = _mm256_set1_ps(lo),
                 vhi = _mm256_set1_ps(hi);
    int64_t i = e0;
    for (; i + 16 <= e1; i += 16) {
        __m256 a = cge__q8_quantize8_avx2(_mm256_loadu_ps(x + i), vs, vz, vlo, vhi);
        __m256 b = cge__q8_quantize8_avx2(_mm256_loadu_ps(x + i + 8), vs, vz, vlo, vhi);
        cge__q8_store16_avx2((uint8_t *)y + i, sg, a, b);
    }
    return i;
}
#endif

static void quantize_fn(int64_t blk, int64_t nblk, void *args)
{
    const qdq_args *p = args;
    int64_t e0, e1;
    cge__block_range(p->n, blk, nblk, &e0, &e1);
    float lo = p->lo, hi = p->hi;
    if (p->nscale == 1 && p->xt == CGE_F32 && (p->yt == CGE_I8 || p->yt == CGE_U8)) {
        /* per tensor, the common case: one loop the compiler vectorises */
        int sg = p->yt == CGE_I8;
        const float *x = p->x;
        float s = p->scale[0], z = p->zp ? (float)cge__q_load(p->zp, p->zt, 0) : 0.0f;
#ifdef CGE__HAVE_Q8_AVX512
        if (cge__q8_avx512())
            e0 = quantize_avx512(x, p->y, sg, s, z, lo, hi, e0, e1);
        else if (cge__q8_avx2())
            e0 = quantize_avx2(x, p->y, sg, s, z, lo, hi, e0, e1);
#endif
        for (int64_t i = e0; i < e1; i++) {
            float v = rintf(x[i] / s) + z;
            v = v != v ? 0.0f : v;
            v = v < lo ? lo : (v > hi ? hi : v);
            if (sg)
                ((int8_t *)p->y)[i] = (int8_t)v;
            else
                ((uint8_t *)p->y)[i] = (uint8_t)v;
        }
        return;
    }
    for (int64_t i = e0; i < e1; i++) {
        int64_t s = scale_idx(p, i);
        float xv = p->xt == CGE_F32 ? ((const float *)p->x)[i] : (float)((const int32_t *)p->x)[i];
        float z = p->zp ? (float)load_qx(p->zp, p->zt, s) : 0.0f;
        float v = rintf(xv / p->scale[s]) + z;
        v = v != v ? 0.0f : v;
        store_qx(p->y, p->yt, i, v < lo ? lo : (v > hi ? hi : v));
    }
}

/* ---- QuantizeNHWC: a per-tensor QuantizeLinear of NCHW float32 data
 * written channels-last (the layout pass's Reorder of the model's quantized
 * input folded in by fuse_quantize_reorder); QuantizeLinear's arithmetic,
 * so the same bytes as the two nodes, in one parallel pass. */

#define QNHWC_MAX_C 16

typedef struct qnhwc_args {
    const float *x;
    void *y;
    int64_t N, C, H, W;
    float s, z, lo, hi;
    int sg;
} qnhwc_args;

static cge_status qnhwc_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *x = &ctx->inputs[0];
    if (cge_shape_numel(&ctx->inputs[1].shape) != 1 ||
        (present(ctx, 2) && cge_shape_numel(&ctx->inputs[2].shape) != 1))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "the scale and zero point must be one value");
    if (x->shape.rank != 4 || (x->shape.dims[1] >= 0 && x->shape.dims[1] > QNHWC_MAX_C))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "x must be [N, C, H, W] with C <= %d",
                              QNHWC_MAX_C);
    ctx->outputs[0].dtype = present(ctx, 2) ? ctx->inputs[2].dtype : CGE_U8;
    ctx->outputs[0].shape = x->shape;
    return CGE_OK;
}

/* 16 values of channel plane `x` quantized into t (bytes). */
static void qnhwc16(const qnhwc_args *p, const float *x, uint8_t *t, int64_t n)
{
    for (int64_t j = 0; j < n; j++) {
        float v = rintf(x[j] / p->s) + p->z;
        v = v != v ? 0.0f : v;
        v = v < p->lo ? p->lo : (v > p->hi ? p->hi : v);
        t[j] = p->sg ? (uint8_t)(int8_t)v : (uint8_t)v;
    }
}

#ifdef CGE__HAVE_Q8_AVX512
CGE__Q8_AVX512 static void qnhwc16_avx512(const qnhwc_args *p, const float *x, uint8_t *t)
{
    __m512 v = _mm512_div_ps(_mm512_loadu_ps(x), _mm512_set1_ps(p->s));
    v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm512_add_ps(v, _mm512_set1_ps(p->z));
    v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v); /* NaN -> 0 */
    v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(p->lo)), _mm512_set1_ps(p->hi));
    __m512i q = _mm512_cvtps_epi32(v);
    _mm_storeu_si128((__m128i *)t, p->sg ? _mm512_cvtsepi32_epi8(q) : _mm512_cvtusepi32_epi8(q));
}
#endif

#ifdef CGE__HAVE_Q8_AVX2
CGE__Q8_AVX2 static void qnhwc16_avx2(const qnhwc_args *p, const float *x, uint8_t *t)
{
    const __m256 s = _mm256_set1_ps(p->s), z = _mm256_set1_ps(p->z), lo = _mm256_set1_ps(p->lo),
                 hi = _mm256_set1_ps(p->hi);
    cge__q8_store16_avx2(t, p->sg, cge__q8_quantize8_avx2(_mm256_loadu_ps(x), s, z, lo, hi),
                         cge__q8_quantize8_avx2(_mm256_loadu_ps(x + 8), s, z, lo, hi));
}

/* Three channels' 16 bytes each (t: c0, c1, c2) as 16 RGB pixels: each
 * 16-byte third of the output gathers its bytes from the three channels
 * with one byte shuffle each (index 0x80: zero). */
CGE__Q8_AVX2 static void qnhwc_rgb16_avx2(const uint8_t *t, uint8_t *y)
{
    /* [output third * 3 + channel]: output byte j of third o is pixel
     * (16o + j) / 3's channel (16o + j) mod 3 */
    static const uint8_t mask[9][16] = {
        {0, 0x80, 0x80, 1, 0x80, 0x80, 2, 0x80, 0x80, 3, 0x80, 0x80, 4, 0x80, 0x80, 5},
        {0x80, 0, 0x80, 0x80, 1, 0x80, 0x80, 2, 0x80, 0x80, 3, 0x80, 0x80, 4, 0x80, 0x80},
        {0x80, 0x80, 0, 0x80, 0x80, 1, 0x80, 0x80, 2, 0x80, 0x80, 3, 0x80, 0x80, 4, 0x80},
        {0x80, 0x80, 6, 0x80, 0x80, 7, 0x80, 0x80, 8, 0x80, 0x80, 9, 0x80, 0x80, 10, 0x80},
        {5, 0x80, 0x80, 6, 0x80, 0x80, 7, 0x80, 0x80, 8, 0x80, 0x80, 9, 0x80, 0x80, 10},
        {0x80, 5, 0x80, 0x80, 6, 0x80, 0x80, 7, 0x80, 0x80, 8, 0x80, 0x80, 9, 0x80, 0x80},
        {0x80, 11, 0x80, 0x80, 12, 0x80, 0x80, 13, 0x80, 0x80, 14, 0x80, 0x80, 15, 0x80, 0x80},
        {0x80, 0x80, 11, 0x80, 0x80, 12, 0x80, 0x80, 13, 0x80, 0x80, 14, 0x80, 0x80, 15, 0x80},
        {10, 0x80, 0x80, 11, 0x80, 0x80, 12, 0x80, 0x80, 13, 0x80, 0x80, 14, 0x80, 0x80, 15},
    };
    __m128i c0 = _mm_loadu_si128((const __m128i *)t), c1 = _mm_loadu_si128((const __m128i *)(t + 16)),
            c2 = _mm_loadu_si128((const __m128i *)(t + 32));
    for (int o = 0; o < 3; o++) {
        __m128i v = _mm_or_si128(
            _mm_or_si128(_mm_shuffle_epi8(c0, _mm_loadu_si128((const __m128i *)mask[3 * o])),
                         _mm_shuffle_epi8(c1, _mm_loadu_si128((const __m128i *)mask[3 * o + 1]))),
            _mm_shuffle_epi8(c2, _mm_loadu_si128((const __m128i *)mask[3 * o + 2])));
        _mm_storeu_si128((__m128i *)(y + 16 * o), v);
    }
}
#endif

/* Three channels' 16 bytes each (t: c0, c1, c2) as 16 RGB pixels: one byte
 * permutation (AVX512-VBMI) instead of 48 single-byte stores. */
#ifdef CGE__HAVE_Q8_AVX512
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static void qnhwc_rgb16(const uint8_t *t,
                                                                             uint8_t *y)
{
    static const uint8_t perm[64] = {
        0,  16, 32, 1,  17, 33, 2,  18, 34, 3,  19, 35, 4,  20, 36, 5,
        21, 37, 6,  22, 38, 7,  23, 39, 8,  24, 40, 9,  25, 41, 10, 26,
        42, 11, 27, 43, 12, 28, 44, 13, 29, 45, 14, 30, 46, 15, 31, 47};
    __m512i v = _mm512_maskz_loadu_epi8((__mmask64)0xffffffffffffull, t);
    __m512i o = _mm512_permutexvar_epi8(_mm512_loadu_si512(perm), v);
    _mm512_mask_storeu_epi8(y, (__mmask64)0xffffffffffffull, o);
}
#endif

/* Blocks of image rows (n, h): per 16 pixels each channel's values, then
 * interleaved. */
static void qnhwc_fn(int64_t blk, int64_t nblk, void *args)
{
    const qnhwc_args *p = args;
    int64_t r0, r1, C = p->C, H = p->H, W = p->W;
    cge__block_range(p->N * H, blk, nblk, &r0, &r1);
    uint8_t t[QNHWC_MAX_C * 16];
#ifdef CGE__HAVE_Q8_AVX512
    int wide = cge__q8_avx512();
    int rgb = wide && C == 3 && __builtin_cpu_supports("avx512vbmi");
    int avx2 = !wide && cge__q8_avx2();
#endif
    for (int64_t r = r0; r < r1; r++) {
        int64_t n = r / H, h = r % H;
        uint8_t *y = (uint8_t *)p->y + r * W * C;
        for (int64_t w0 = 0; w0 < W; w0 += 16) {
            int64_t nw = W - w0 < 16 ? W - w0 : 16;
            for (int64_t c = 0; c < C; c++) {
                const float *x = p->x + ((n * C + c) * H + h) * W + w0;
#ifdef CGE__HAVE_Q8_AVX512
                if (wide && nw == 16) {
                    qnhwc16_avx512(p, x, t + c * 16);
                    continue;
                }
                if (avx2 && nw == 16) {
                    qnhwc16_avx2(p, x, t + c * 16);
                    continue;
                }
#endif
                qnhwc16(p, x, t + c * 16, nw);
            }
#ifdef CGE__HAVE_Q8_AVX512
            if (rgb && nw == 16) {
                qnhwc_rgb16(t, y + w0 * 3);
                continue;
            }
            if (avx2 && C == 3 && nw == 16) {
                qnhwc_rgb16_avx2(t, y + w0 * 3);
                continue;
            }
#endif
            for (int64_t j = 0; j < nw; j++)
                for (int64_t c = 0; c < C; c++)
                    y[(w0 + j) * C + c] = t[c * 16 + j];
        }
    }
}

static cge_status qnhwc_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    if (x->dtype != CGE_F32 || (y->dtype != CGE_U8 && y->dtype != CGE_I8) || x->shape.rank != 4 ||
        x->shape.dims[1] > QNHWC_MAX_C || ctx->inputs[1].dtype != CGE_F32)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "float32 [N, C<=%d, H, W] to int8 or uint8 "
                                "expected", QNHWC_MAX_C);
    qnhwc_args p = {.x = x->data, .y = y->data, .N = x->shape.dims[0], .C = x->shape.dims[1],
                    .H = x->shape.dims[2], .W = x->shape.dims[3],
                    .s = ((const float *)ctx->inputs[1].data)[0], .sg = y->dtype == CGE_I8};
    p.z = kpresent(ctx, 2) ? (float)cge__q_load(ctx->inputs[2].data, ctx->inputs[2].dtype, 0) : 0.0f;
    p.lo = p.sg ? -128.0f : 0.0f;
    p.hi = p.sg ? 127.0f : 255.0f;
    int64_t rows = p.N * p.H;
    if (rows * p.W * p.C == 0)
        return CGE_OK;
    return cge_launch(stream, qnhwc_fn,
                      cge__blocks_for(rows, 16384 / (p.W * p.C) + 1, ctx->num_threads), &p,
                      sizeof p);
}

static void dequantize_fn(int64_t blk, int64_t nblk, void *args)
{
    const qdq_args *p = args;
    int64_t e0, e1;
    cge__block_range(p->n, blk, nblk, &e0, &e1);
    float *y = p->y;
    for (int64_t i = e0; i < e1; i++) {
        int64_t s = scale_idx(p, i);
        int32_t z = p->zp ? load_qx(p->zp, p->zt, s) : 0;
        /* int32 x - zero point in int64: no overflow before the conversion */
        y[i] = (float)((int64_t)load_qx(p->x, p->xt, i) - z) * p->scale[s];
    }
}

static cge_status qdq_launch(const cge_kernel_ctx *ctx, cge_stream *stream, int quant)
{
    const cge_tensor *x = &ctx->inputs[0], *s = &ctx->inputs[1];
    qdq_args p = {
        .xt = x->dtype, .x = x->data, .scale = s->data, .y = ctx->outputs[0].data,
        .yt = ctx->outputs[0].dtype, .n = cge_shape_numel(&x->shape),
        .nscale = cge_shape_numel(&s->shape),
    };
    if (kpresent(ctx, 2)) {
        p.zp = ctx->inputs[2].data;
        p.zt = ctx->inputs[2].dtype;
        if (cge_shape_numel(&ctx->inputs[2].shape) != p.nscale)
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "zero point and scale sizes differ");
    }
    bool q_ok = p.yt == CGE_I8 || p.yt == CGE_U8 || p.yt == CGE_I16 || p.yt == CGE_U16;
    if (s->dtype != CGE_F32 || (quant && p.zp && p.zt != p.yt) ||
        (quant ? !q_ok : p.yt != CGE_F32))
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "unsupported dtypes");
    switch (p.yt) {
    case CGE_I8: p.lo = -128.0f, p.hi = 127.0f; break;
    case CGE_U8: p.lo = 0.0f, p.hi = 255.0f; break;
    case CGE_I16: p.lo = -32768.0f, p.hi = 32767.0f; break;
    default: p.lo = 0.0f, p.hi = 65535.0f; break;
    }
    char err[256];
    if (p.nscale < 1)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "the scale is empty");
    if (!qdq_layout_of(&x->shape, &s->shape, ctx->attrs, &p.l, err, sizeof err))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "%s", err);
    if (p.n == 0)
        return CGE_OK;
    return cge_launch(stream, quant ? quantize_fn : dequantize_fn,
                      cge__blocks_for(p.n, 16384, ctx->num_threads), &p, sizeof p);
}

static cge_status quantize_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return qdq_launch(ctx, stream, 1);
}

static cge_status dequantize_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return qdq_launch(ctx, stream, 0);
}

/* ---- DynamicQuantizeLinear -------------------------------------------------- */

static cge_status dynq_infer(cge_infer_ctx *ctx)
{
    ctx->outputs[0].dtype = CGE_U8;
    ctx->outputs[0].shape = ctx->inputs[0].shape;
    for (int32_t o = 1; o < ctx->num_outputs; o++) {
        ctx->outputs[o].dtype = o == 1 ? CGE_F32 : CGE_U8;
        ctx->outputs[o].shape = CGE_SCALAR;
    }
    return CGE_OK;
}

typedef struct dynq_args {
    const float *x;
    uint8_t *y, *yzp;
    float *yscale;
    float *part;     /* [2 * parts]: min, max per part */
    int64_t n, parts;
} dynq_args;

static void dynq_minmax_fn(int64_t blk, int64_t nblk, void *args)
{
    const dynq_args *p = args;
    int64_t e0, e1;
    cge__block_range(p->n, blk, nblk, &e0, &e1);
    float lo = 0.0f, hi = 0.0f; /* the range always includes 0 */
    for (int64_t i = e0; i < e1; i++) {
        float v = p->x[i];
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    p->part[2 * blk] = lo;
    p->part[2 * blk + 1] = hi;
}

/* Every block folds the partial ranges again (a few dozen values) rather than
 * waiting for one block to publish them. */
static void dynq_quant_fn(int64_t blk, int64_t nblk, void *args)
{
    const dynq_args *p = args;
    float lo = 0.0f, hi = 0.0f;
    for (int64_t b = 0; b < p->parts; b++) {
        lo = p->part[2 * b] < lo ? p->part[2 * b] : lo;
        hi = p->part[2 * b + 1] > hi ? p->part[2 * b + 1] : hi;
    }
    float scale = (hi - lo) / 255.0f;
    if (scale == 0.0f) /* all zeros: any scale works; 1 avoids dividing by 0 */
        scale = 1.0f;
    float zf = rintf(0.0f - lo / scale);
    zf = zf < 0.0f ? 0.0f : (zf > 255.0f ? 255.0f : zf);
    if (blk == 0) {
        if (p->yscale)
            *p->yscale = scale;
        if (p->yzp)
            *p->yzp = (uint8_t)zf;
    }
    int64_t e0, e1;
    cge__block_range(p->n, blk, nblk, &e0, &e1);
    for (int64_t i = e0; i < e1; i++)
        cge__q8_store_sat(p->y, 0, i, rintf(p->x[i] / scale) + zf);
}

static size_t dynq_workspace(const cge_kernel_ctx *ctx)
{
    return (size_t)(8 * (ctx->num_threads > 0 ? ctx->num_threads : 1)) * sizeof(float);
}

static cge_status dynq_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->inputs[0].dtype != CGE_F32)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "x must be float32");
    dynq_args p = {
        .x = ctx->inputs[0].data, .y = ctx->outputs[0].data,
        .yscale = ctx->num_outputs > 1 ? ctx->outputs[1].data : NULL,
        .yzp = ctx->num_outputs > 2 ? ctx->outputs[2].data : NULL,
        .part = ctx->workspace, .n = cge_shape_numel(&ctx->inputs[0].shape),
    };
    if (!ctx->workspace || ctx->workspace_size < dynq_workspace(ctx))
        return cge_kernel_error(ctx, CGE_ERR_NO_MEMORY, "workspace missing");
    p.parts = cge__blocks_for(p.n, 16384, ctx->num_threads);
    cge_status st = cge_launch(stream, dynq_minmax_fn, p.parts, &p, sizeof p);
    if (!st)
        st = cge_launch(stream, dynq_quant_fn, cge__blocks_for(p.n, 16384, ctx->num_threads), &p,
                        sizeof p);
    return st;
}

/* ---- integer matrix products ----------------------------------------------- */

/* Input positions of the operands (MatMulInteger / QLinearMatMul). */
typedef struct mm_pos {
    int32_t a, b, az, bz, as, bs, ys, yz;
} mm_pos;
static const mm_pos pos_mmi = {0, 1, 2, 3, -1, -1, -1, -1};
static const mm_pos pos_qmm = {0, 3, 2, 5, 1, 4, 6, 7};

/* A per-row (A) or per-column (B) parameter: 1 value or `n` values. */
static int per_ok(const cge_tensor_desc *t, int64_t n)
{
    int64_t c = cge_shape_numel(&t->shape);
    return c < 0 || n < 0 || c == 1 || c == n;
}

static cge_status imm_infer(cge_infer_ctx *ctx)
{
    int qlinear = strcmp(ctx->op_type, "MatMulInteger") != 0;
    const mm_pos *ps = qlinear ? &pos_qmm : &pos_mmi;
    const cge_tensor_desc *A = &ctx->inputs[ps->a], *B = &ctx->inputs[ps->b];
    int32_t ra = A->shape.rank, rb = B->shape.rank;
    if (ra < 1 || rb < 1)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "A and B must have rank >= 1");
    int64_t M = ra >= 2 ? A->shape.dims[ra - 2] : 1, K = A->shape.dims[ra - 1];
    int64_t kb = rb >= 2 ? B->shape.dims[rb - 2] : B->shape.dims[0];
    int64_t N = rb >= 2 ? B->shape.dims[rb - 1] : 1;
    if (K >= 0 && kb >= 0 && K != kb)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "inner dimensions %lld and %lld differ",
                              (long long)K, (long long)kb);
    int32_t idx[4] = {ps->az, ps->as, ps->bz, ps->bs};
    for (int i = 0; i < 4; i++) {
        if (idx[i] < 0 || !present(ctx, idx[i]))
            continue;
        if (!per_ok(&ctx->inputs[idx[i]], i < 2 ? M : N))
            return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                  "input %d: zero points and scales must be scalars or one per "
                                  "%s (per-batch values are not supported)",
                                  idx[i], i < 2 ? "row of A" : "column of B");
        if ((i == 0 || i == 2) && ctx->inputs[idx[i]].dtype != ctx->inputs[i == 0 ? ps->a : ps->b].dtype)
            return cge_meta_error(ctx, CGE_ERR_DTYPE, "zero point %d has another dtype than its matrix",
                                  idx[i]);
    }
    if (qlinear) {
        if (cge_shape_numel(&ctx->inputs[ps->ys].shape) > 1 ||
            cge_shape_numel(&ctx->inputs[ps->yz].shape) > 1)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "y_scale and y_zero_point must be scalars");
    }
    cge_shape ba = {.rank = ra > 2 ? ra - 2 : 0}, bb = {.rank = rb > 2 ? rb - 2 : 0}, out;
    memcpy(ba.dims, A->shape.dims, sizeof(int64_t) * (size_t)ba.rank);
    memcpy(bb.dims, B->shape.dims, sizeof(int64_t) * (size_t)bb.rank);
    if (cge_shape_broadcast(&ba, &bb, &out) != CGE_OK)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "batch dimensions of A and B do not broadcast");
    if (ra >= 2)
        out.dims[out.rank++] = M;
    if (rb >= 2)
        out.dims[out.rank++] = N;
    ctx->outputs[0].dtype = qlinear ? ctx->inputs[ps->yz].dtype : CGE_I32;
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

typedef struct imm_args {
    cge_dtype at, bt, yt;
    const void *a, *b, *az, *bz, *as, *bs, *ys, *yz;
    void *y;
    int16_t *bw;                 /* B - zero point, [b_count][K][N] */
    const int32_t *bias;         /* QMatMul's [N], added to the int32 sum */
    float lo, hi;                /* QMatMul's clamp of the requantised value */
    int64_t M, N, K, naz, nbz, nas, nbs;
    int32_t brank;
    int64_t bdims[CGE_MAX_RANK], a_bstr[CGE_MAX_RANK], b_bstr[CGE_MAX_RANK];
    int64_t batch, b_count;
} imm_args;

static void imm_bconv_fn(int64_t blk, int64_t nblk, void *args)
{
    const imm_args *p = args;
    int64_t e0, e1;
    cge__block_range(p->b_count * p->K * p->N, blk, nblk, &e0, &e1);
    for (int64_t e = e0; e < e1; e++) {
        int64_t j = e % p->N;
        int32_t z = p->bz ? cge__q_load(p->bz, p->bt, p->nbz == 1 ? 0 : j) : 0;
        p->bw[e] = (int16_t)(cge__q_load(p->b, p->bt, e) - z);
    }
}

static void imm_rows_fn(int64_t blk, int64_t nblk, void *args)
{
    const imm_args *p = args;
    int64_t r0, r1;
    cge__block_range(p->batch * p->M, blk, nblk, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t t = r / p->M, i = r % p->M, ao = 0, bo = 0, tt = t;
        for (int32_t d = p->brank - 1; d >= 0; d--) {
            int64_t q = tt % p->bdims[d];
            tt /= p->bdims[d];
            ao += q * p->a_bstr[d];
            bo += q * p->b_bstr[d];
        }
        int64_t arow = (ao * p->M + i) * p->K;
        const int16_t *bm = p->bw + bo * p->K * p->N;
        int32_t za = p->az ? cge__q_load(p->az, p->at, p->naz == 1 ? 0 : i) : 0;
        float sa = p->as ? ((const float *)p->as)[p->nas == 1 ? 0 : i] : 0.0f;
        for (int64_t j0 = 0; j0 < p->N; j0 += 64) {
            int64_t nj = p->N - j0 < 64 ? p->N - j0 : 64;
            int32_t acc[64];
            for (int64_t j = 0; j < nj; j++)
                acc[j] = p->bias ? p->bias[j0 + j] : 0;
            for (int64_t k = 0; k < p->K; k++) {
                int32_t av = cge__q_load(p->a, p->at, arow + k) - za;
                const int16_t *bk = bm + k * p->N + j0;
                for (int64_t j = 0; j < nj; j++)
                    acc[j] += av * (int32_t)bk[j];
            }
            int64_t yo = (t * p->M + i) * p->N + j0;
            if (p->yt == CGE_I32) {
                memcpy((int32_t *)p->y + yo, acc, sizeof(int32_t) * (size_t)nj);
                continue;
            }
            float ys = ((const float *)p->ys)[0];
            float yz = (float)cge__q_load(p->yz, p->yt, 0);
            const float *bs = p->bs;
            for (int64_t j = 0; j < nj; j++) {
                float m = sa * bs[p->nbs == 1 ? 0 : j0 + j] / ys;
                float v = rintf((float)acc[j] * m) + yz;
                cge__q8_store_sat(p->y, p->yt == CGE_I8, yo + j, v < p->lo ? p->lo : (v > p->hi ? p->hi : v));
            }
        }
    }
}

static int imm_layout(const cge_kernel_ctx *ctx, const mm_pos *ps, imm_args *p)
{
    memset(p, 0, sizeof *p);
    const cge_shape *as = &ctx->inputs[ps->a].shape, *bs = &ctx->inputs[ps->b].shape;
    int32_t ra = as->rank, rb = bs->rank;
    if (ra < 1 || rb < 1)
        return 0;
    p->M = ra >= 2 ? as->dims[ra - 2] : 1;
    p->K = as->dims[ra - 1];
    p->N = rb >= 2 ? bs->dims[rb - 1] : 1;
    if ((rb >= 2 ? bs->dims[rb - 2] : bs->dims[0]) != p->K)
        return 0;
    int32_t na = ra > 2 ? ra - 2 : 0, nb = rb > 2 ? rb - 2 : 0;
    p->brank = na > nb ? na : nb;
    p->batch = 1;
    int64_t sa = 1, sb = 1;
    for (int32_t d = p->brank - 1; d >= 0; d--) {
        int32_t ia = d - (p->brank - na), ib = d - (p->brank - nb);
        int64_t da = ia >= 0 ? as->dims[ia] : 1, db = ib >= 0 ? bs->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return 0;
        p->bdims[d] = da == 0 || db == 0 ? 0 : (da > db ? da : db);
        p->a_bstr[d] = da == 1 ? 0 : sa;
        p->b_bstr[d] = db == 1 ? 0 : sb;
        sa *= da;
        sb *= db;
        p->batch *= p->bdims[d];
    }
    p->b_count = sb;
    return 1;
}

static size_t imm_workspace(const cge_kernel_ctx *ctx)
{
    imm_args p;
    const mm_pos *ps = strcmp(ctx->op_type, "MatMulInteger") ? &pos_qmm : &pos_mmi;
    if (!imm_layout(ctx, ps, &p))
        return 0;
    return (size_t)(p.b_count * p.K * p.N) * sizeof(int16_t) + 16;
}

static const void *kin(const cge_kernel_ctx *ctx, int32_t i, int64_t *count)
{
    if (i < 0 || !kpresent(ctx, i)) {
        *count = 0;
        return NULL;
    }
    *count = cge_shape_numel(&ctx->inputs[i].shape);
    return ctx->inputs[i].data;
}

/* QConv / QMatMul's "lo" and "hi": a Relu or Clip folded into the
 * requantisation, in output units (zero point included). */
static void clamp_attrs(const cge_kernel_ctx *ctx, float *lo, float *hi)
{
    *lo = (float)cge_attrs_get_int(ctx->attrs, "lo", -1024);
    *hi = (float)cge_attrs_get_int(ctx->attrs, "hi", 1024);
}

static cge_status imm_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    int qlinear = strcmp(ctx->op_type, "MatMulInteger") != 0;
    const mm_pos *ps = qlinear ? &pos_qmm : &pos_mmi;
    imm_args p;
    if (!imm_layout(ctx, ps, &p))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "A and B shapes do not fit");
    p.at = ctx->inputs[ps->a].dtype;
    p.bt = ctx->inputs[ps->b].dtype;
    p.yt = ctx->outputs[0].dtype;
    p.a = ctx->inputs[ps->a].data;
    p.b = ctx->inputs[ps->b].data;
    p.y = ctx->outputs[0].data;
    int64_t c;
    p.az = kin(ctx, ps->az, &p.naz);
    p.bz = kin(ctx, ps->bz, &p.nbz);
    p.as = kin(ctx, ps->as, &p.nas);
    p.bs = kin(ctx, ps->bs, &p.nbs);
    p.ys = kin(ctx, ps->ys, &c);
    p.yz = kin(ctx, ps->yz, &c);
    clamp_attrs(ctx, &p.lo, &p.hi);
    if (ctx->num_inputs > 8 && kpresent(ctx, 8)) {
        p.bias = kin(ctx, 8, &c);
        if (c != p.N)
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "the bias needs %lld values",
                                    (long long)p.N);
    }
    if ((p.az && p.naz != 1 && p.naz != p.M) || (p.bz && p.nbz != 1 && p.nbz != p.N) ||
        (p.as && p.nas != 1 && p.nas != p.M) || (p.bs && p.nbs != 1 && p.nbs != p.N))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "zero point or scale sizes do not fit");
    if (qlinear && (!p.ys || !p.yz || !p.as || !p.bs || (p.yt != CGE_I8 && p.yt != CGE_U8)))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "scales and zero points are required");
    size_t need = imm_workspace(ctx);
    if (!ctx->workspace || ctx->workspace_size < need)
        return cge_kernel_error(ctx, CGE_ERR_NO_MEMORY, "workspace of %zu bytes missing", need);
    p.bw = ctx->workspace;
    int64_t nb_elems = p.b_count * p.K * p.N, rows = p.batch * p.M;
    if (rows * p.N == 0)
        return CGE_OK;
    cge_status st = CGE_OK;
    if (nb_elems > 0)
        st = cge_launch(stream, imm_bconv_fn, cge__blocks_for(nb_elems, 32768, ctx->num_threads),
                        &p, sizeof p);
    int64_t per_row = p.N * (p.K > 0 ? p.K : 1);
    if (!st)
        st = cge_launch(stream, imm_rows_fn,
                        cge__blocks_for(rows, per_row >= 32768 ? 1 : 32768 / per_row,
                                       ctx->num_threads),
                        &p, sizeof p);
    return st;
}

/* ---- integer convolutions --------------------------------------------------- */

typedef struct cpos {
    int32_t x, xz, w, wz, xs, ws, ys, yz, bias;
} cpos;
static const cpos pos_ci = {0, 2, 1, 3, -1, -1, -1, -1, -1};
static const cpos pos_qc = {0, 2, 3, 5, 1, 4, 6, 7, 8};

static cge_status iconv_geom(const cge_shape *xs, const cge_shape *wsh, const cge_attrs *attrs,
                             nn_geom *g, int64_t *group, char *err, size_t errsz)
{
    int32_t nsp = xs->rank - 2;
    if (xs->rank < 3 || wsh->rank != xs->rank) {
        snprintf(err, errsz, "x and w must have the same rank, 3 to 5");
        return CGE_ERR_SHAPE;
    }
    *group = cge_attrs_get_int(attrs, "group", 1);
    int64_t C = xs->dims[1], M = wsh->dims[0];
    if (*group < 1 ||
        (C >= 0 && (C % *group || (wsh->dims[1] >= 0 && wsh->dims[1] != C / *group))) ||
        (M >= 0 && M % *group)) {
        snprintf(err, errsz, "group %lld does not divide channels %lld / feature maps %lld, or "
                 "w's second dimension is not channels/group", (long long)*group, (long long)C,
                 (long long)M);
        return CGE_ERR_SHAPE;
    }
    if (!nn_geom_make(attrs, nsp, xs->dims + 2, wsh->dims + 2, false, g, err, errsz))
        return CGE_ERR_INVALID_ARG;
    return CGE_OK;
}

static cge_status iconv_infer(cge_infer_ctx *ctx)
{
    int ql = strcmp(ctx->op_type, "ConvInteger") != 0;
    const cpos *ps = ql ? &pos_qc : &pos_ci;
    const cge_tensor_desc *X = &ctx->inputs[ps->x], *W = &ctx->inputs[ps->w];
    nn_geom g;
    int64_t group;
    char err[256];
    cge_status st = iconv_geom(&X->shape, &W->shape, ctx->attrs, &g, &group, err, sizeof err);
    if (st)
        return cge_meta_error(ctx, st, "%s", err);
    int64_t M = W->shape.dims[0];
    if (present(ctx, ps->xz) && cge_shape_numel(&ctx->inputs[ps->xz].shape) > 1)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "x_zero_point must be a scalar");
    int32_t per[3] = {ps->wz, ps->ws, ps->bias};
    for (int i = 0; i < 3; i++)
        if (per[i] >= 0 && present(ctx, per[i]) && !per_ok(&ctx->inputs[per[i]], M) &&
            !(i == 2 && cge_shape_numel(&ctx->inputs[per[i]].shape) == M))
            return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                  "input %d must have one value or one per feature map", per[i]);
    if (ql && (cge_shape_numel(&ctx->inputs[ps->xs].shape) > 1 ||
               cge_shape_numel(&ctx->inputs[ps->ys].shape) > 1 ||
               cge_shape_numel(&ctx->inputs[ps->yz].shape) > 1))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "x_scale, y_scale and y_zero_point must be scalars");
    cge_shape out = {.rank = X->shape.rank};
    out.dims[0] = X->shape.dims[0];
    out.dims[1] = M;
    for (int32_t i = 0; i < g.nsp; i++)
        out.dims[2 + i] = g.out[NN_MAX_SP - g.nsp + i];
    ctx->outputs[0].dtype = ql ? ctx->inputs[ps->yz].dtype : CGE_I32;
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

typedef struct iconv_args {
    nn_geom g;
    cge_dtype xt, wt, yt;
    const void *x, *w, *xz, *wz, *xs, *ws, *ys, *yz;
    const int32_t *bias;
    void *y;
    int16_t *xw, *ww;             /* x - x_zero_point, w - w_zero_point */
    float lo, hi;
    int64_t N, C, M, group, nwz, nws;
} iconv_args;

static void iconv_prep_fn(int64_t blk, int64_t nblk, void *args)
{
    const iconv_args *p = args;
    const nn_geom *g = &p->g;
    int64_t nx = p->N * p->C * g->in[0] * g->in[1] * g->in[2];
    int64_t kk = g->k[0] * g->k[1] * g->k[2], nw = p->M * (p->C / p->group) * kk;
    int64_t e0, e1;
    cge__block_range(nx + nw, blk, nblk, &e0, &e1);
    int32_t xz = p->xz ? cge__q_load(p->xz, p->xt, 0) : 0;
    for (int64_t e = e0; e < e1; e++) {
        if (e < nx) {
            p->xw[e] = (int16_t)(cge__q_load(p->x, p->xt, e) - xz);
        } else {
            int64_t i = e - nx, m = i / (nw / p->M);
            int32_t wz = p->wz ? cge__q_load(p->wz, p->wt, p->nwz == 1 ? 0 : m) : 0;
            p->ww[i] = (int16_t)(cge__q_load(p->w, p->wt, i) - wz);
        }
    }
}

/* Block work: (n, m, output plane index along the first real dim). */
static void iconv_fn(int64_t blk, int64_t nblk, void *args)
{
    const iconv_args *p = args;
    const nn_geom *g = &p->g;
    int64_t o0n = g->out[0], o1n = g->out[1], o2n = g->out[2];
    int64_t i0n = g->in[0], i1n = g->in[1], i2n = g->in[2];
    int64_t cg = p->C / p->group, mg = p->M / p->group, kk = g->k[0] * g->k[1] * g->k[2];
    int64_t w0, w1;
    cge__block_range(p->N * p->M * o0n, blk, nblk, &w0, &w1);
    float ys = p->ys ? ((const float *)p->ys)[0] : 1.0f;
    float yz = p->yz ? (float)cge__q_load(p->yz, p->yt, 0) : 0.0f;
    float xs = p->xs ? ((const float *)p->xs)[0] : 1.0f;
    for (int64_t w = w0; w < w1; w++) {
        int64_t n = w / (p->M * o0n), m = (w / o0n) % p->M, a = w % o0n;
        int64_t grp = m / mg;
        const int16_t *wm = p->ww + m * cg * kk;
        float mult = p->ws ? xs * ((const float *)p->ws)[p->nws == 1 ? 0 : m] / ys : 0.0f;
        int32_t bias = p->bias ? p->bias[m] : 0;
        int64_t ka0, ka1;
        nn_tap_range(g, 0, a, &ka0, &ka1);
        for (int64_t b = 0; b < o1n; b++) {
            int64_t kb0, kb1;
            nn_tap_range(g, 1, b, &kb0, &kb1);
            for (int64_t c = 0; c < o2n; c++) {
                int64_t kc0, kc1;
                nn_tap_range(g, 2, c, &kc0, &kc1);
                int32_t acc = bias;
                for (int64_t ci = 0; ci < cg; ci++) {
                    const int16_t *xc = p->xw + (n * p->C + grp * cg + ci) * i0n * i1n * i2n;
                    const int16_t *wc = wm + ci * kk;
                    for (int64_t ta = ka0; ta < ka1; ta++) {
                        int64_t ia = a * g->s[0] - g->pb[0] + ta * g->d[0];
                        for (int64_t tb = kb0; tb < kb1; tb++) {
                            int64_t ib = b * g->s[1] - g->pb[1] + tb * g->d[1];
                            const int16_t *xr = xc + (ia * i1n + ib) * i2n;
                            const int16_t *wr = wc + (ta * g->k[1] + tb) * g->k[2];
                            int64_t base = c * g->s[2] - g->pb[2];
                            for (int64_t tc = kc0; tc < kc1; tc++)
                                acc += (int32_t)xr[base + tc * g->d[2]] * (int32_t)wr[tc];
                        }
                    }
                }
                int64_t yo = ((n * p->M + m) * o0n + a) * o1n * o2n + b * o2n + c;
                if (p->yt == CGE_I32)
                    ((int32_t *)p->y)[yo] = acc;
                else {
                    float v = rintf((float)acc * mult) + yz;
                    cge__q8_store_sat(p->y, p->yt == CGE_I8, yo, v < p->lo ? p->lo : (v > p->hi ? p->hi : v));
                }
            }
        }
    }
}

static int iconv_setup(const cge_kernel_ctx *ctx, const cpos *ps, iconv_args *p)
{
    memset(p, 0, sizeof *p);
    const cge_tensor *X = &ctx->inputs[ps->x], *W = &ctx->inputs[ps->w];
    char err[256];
    if (!cge_shape_is_static(&X->shape) || !cge_shape_is_static(&W->shape) ||
        iconv_geom(&X->shape, &W->shape, ctx->attrs, &p->g, &p->group, err, sizeof err))
        return 0;
    p->N = X->shape.dims[0];
    p->C = X->shape.dims[1];
    p->M = W->shape.dims[0];
    return 1;
}

static int64_t iconv_counts(const iconv_args *p, int64_t *nw)
{
    const nn_geom *g = &p->g;
    *nw = p->M * (p->C / p->group) * g->k[0] * g->k[1] * g->k[2];
    return p->N * p->C * g->in[0] * g->in[1] * g->in[2];
}

static size_t iconv_workspace(const cge_kernel_ctx *ctx)
{
    iconv_args p;
    const cpos *ps = strcmp(ctx->op_type, "ConvInteger") ? &pos_qc : &pos_ci;
    if (!iconv_setup(ctx, ps, &p))
        return 0;
    int64_t nw, nx = iconv_counts(&p, &nw);
    return (size_t)(nx + nw) * sizeof(int16_t) + 64;
}

static cge_status iconv_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    int ql = strcmp(ctx->op_type, "ConvInteger") != 0;
    const cpos *ps = ql ? &pos_qc : &pos_ci;
    iconv_args p;
    if (!iconv_setup(ctx, ps, &p))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "x and w do not fit this convolution");
    p.xt = ctx->inputs[ps->x].dtype;
    p.wt = ctx->inputs[ps->w].dtype;
    p.yt = ctx->outputs[0].dtype;
    p.x = ctx->inputs[ps->x].data;
    p.w = ctx->inputs[ps->w].data;
    p.y = ctx->outputs[0].data;
    int64_t c, nb;
    p.xz = kin(ctx, ps->xz, &c);
    p.wz = kin(ctx, ps->wz, &p.nwz);
    p.xs = kin(ctx, ps->xs, &c);
    p.ws = kin(ctx, ps->ws, &p.nws);
    p.ys = kin(ctx, ps->ys, &c);
    p.yz = kin(ctx, ps->yz, &c);
    p.bias = kin(ctx, ps->bias, &nb);
    clamp_attrs(ctx, &p.lo, &p.hi);
    if ((p.wz && p.nwz != 1 && p.nwz != p.M) || (p.ws && p.nws != 1 && p.nws != p.M) ||
        (p.bias && nb != p.M))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "per-channel inputs must have %lld values",
                                (long long)p.M);
    if (ql && (!p.xs || !p.ws || !p.ys || !p.yz))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "scales and zero points are required");
    size_t need = iconv_workspace(ctx);
    if (!ctx->workspace || ctx->workspace_size < need)
        return cge_kernel_error(ctx, CGE_ERR_NO_MEMORY, "workspace of %zu bytes missing", need);
    int64_t nw, nx = iconv_counts(&p, &nw);
    p.xw = ctx->workspace;
    p.ww = p.xw + nx;
    int64_t work = p.N * p.M * p.g.out[0];
    if (work * p.g.out[1] * p.g.out[2] == 0)
        return CGE_OK;
    cge_status st = CGE_OK;
    if (nx + nw > 0)
        st = cge_launch(stream, iconv_prep_fn, cge__blocks_for(nx + nw, 32768, ctx->num_threads),
                        &p, sizeof p);
    int64_t per = p.g.out[1] * p.g.out[2] * (p.C / p.group) * p.g.k[0] * p.g.k[1] * p.g.k[2];
    if (!st)
        st = cge_launch(stream, iconv_fn,
                        cge__blocks_for(work, per >= 16384 ? 1 : 16384 / (per ? per : 1),
                                       ctx->num_threads),
                        &p, sizeof p);
    return st;
}

/* ---- the oneDNN path of QConv / QMatMul ------------------------------------- */

/* Made at prepare when W is a constant s8 or u8 tensor (zero points other
 * than 0 are shifted away by dnnl_qconv.c) and x's zero point is one value: the
 * primitive requantises with scale[m] = x_scale * w_scale[m] / y_scale, the
 * factor cge's own loops use, and packs W once. Anything else keeps the
 * loops above (no state). */

typedef struct qprim {
    cge__dnnl_qconv *dc;
    const void *x;
    const int32_t *bias;
    void *y;
} qprim;

static const cge_tensor *kopt(const cge_kernel_ctx *ctx, int32_t i)
{
    return kpresent(ctx, i) ? &ctx->inputs[i] : NULL;
}

/* The requantisation, clamp and weights of d from the nine inputs in
 * QConv's order (in[5] and in[8] may be NULL: no weight zero point, no
 * bias), M outputs, the clamp [lo, hi] in output units; 0 when the
 * constants do not fit. */
static int qprim_params(cge__dnnl_qconv_desc *d, float **scales, const cge_tensor *const in[9],
                        int64_t M, float lo, float hi, int threads)
{
    const cge_tensor *x = in[0], *xs = in[1], *xz = in[2], *w = in[3], *ws = in[4], *wz = in[5];
    const cge_tensor *ys = in[6], *yz = in[7];
    int64_t nws = cge_shape_numel(&ws->shape);
    if (M <= 0 || d->N <= 0 || (nws != 1 && nws != M))
        return 0;
    float *sc = malloc(sizeof(float) * (size_t)nws);
    if (!sc)
        return 0;
    float xsv = ((const float *)xs->data)[0], ysv = ((const float *)ys->data)[0];
    for (int64_t m = 0; m < nws; m++)
        sc[m] = xsv * ((const float *)ws->data)[m] / ysv;
    *scales = sc;
    d->scale = sc;
    d->num_scales = nws;
    d->x_signed = x->dtype == CGE_I8;
    /* the requantised output's type is its zero point's (QConvAdd's output
     * is the residual add's) */
    d->y_signed = yz->dtype == CGE_I8;
    d->x_zp = cge__q_load(xz->data, xz->dtype, 0);
    d->y_zp = cge__q_load(yz->data, yz->dtype, 0);
    d->has_bias = in[8] != NULL;
    float tlo = d->y_signed ? -128.0f : 0.0f, thi = d->y_signed ? 127.0f : 255.0f;
    if (lo > tlo || hi < thi) {
        /* clamped before the zero point is added */
        d->clip = 1;
        d->lo = (lo > tlo ? lo : tlo) - (float)d->y_zp;
        d->hi = (hi < thi ? hi : thi) - (float)d->y_zp;
    }
    d->threads = threads > 0 ? threads : 1;
    /* u8 weights and weight zero points: dnnl_qconv.c shifts them */
    d->w_u8 = w->dtype == CGE_U8;
    d->w = w->data;
    d->w_zp = wz ? wz->data : NULL;
    d->w_zp_u8 = wz && wz->dtype == CGE_U8;
    d->num_w_zp = wz ? cge_shape_numel(&wz->shape) : 0;
    return 1;
}

/* Whether the constants of the nine inputs are there: data, one x scale and
 * zero point. */
static int qprim_consts(const cge_tensor *const in[9])
{
    return in[3]->data && in[1]->data && in[2]->data && in[4]->data && in[6]->data &&
           in[7]->data && (!in[5] || in[5]->data) && cge_shape_numel(&in[2]->shape) == 1 &&
           cge_shape_numel(&in[1]->shape) == 1 && cge_shape_is_static(&in[0]->shape);
}

/* The primitive's description from ctx, or 0 when its constants do not fit. */
static int qprim_desc(const cge_kernel_ctx *ctx, int matmul, cge__dnnl_qconv_desc *d,
                      float **scales)
{
    memset(d, 0, sizeof *d);
    *scales = NULL;
    if (!cge_attrs_get_int(ctx->attrs, "w_const", 0))
        return 0;
    const cge_tensor *in[9];
    for (int i = 0; i < 9; i++)
        in[i] = i == 5 || i == 8 ? kopt(ctx, i) : &ctx->inputs[i];
    const cge_tensor *x = in[0], *w = in[3];
    if (!qprim_consts(in))
        return 0;
    int64_t M;
    if (matmul) {
        if (w->shape.rank != 2 || x->shape.rank < 1 || x->shape.dims[x->shape.rank - 1] != w->shape.dims[0])
            return 0;
        d->matmul = 1;
        d->C = w->shape.dims[0];
        d->M = M = w->shape.dims[1];
        d->N = d->C ? cge_shape_numel(&x->shape) / d->C : 0;
        d->G = 1;
    } else {
        iconv_args p;
        if (!iconv_setup(ctx, &pos_qc, &p))
            return 0;
        d->N = p.N, d->C = p.C, d->M = M = p.M, d->G = p.group, d->nsp = p.g.nsp;
        for (int i = 0; i < 3; i++) {
            d->in[i] = p.g.in[i], d->out[i] = p.g.out[i], d->k[i] = p.g.k[i];
            d->s[i] = p.g.s[i], d->d[i] = p.g.d[i], d->pb[i] = p.g.pb[i], d->pe[i] = p.g.pe[i];
        }
        d->channels_last = cge_attrs_get_int(ctx->attrs, "channels_last", 0) != 0;
    }
    float lo, hi;
    clamp_attrs(ctx, &lo, &hi);
    return qprim_params(d, scales, in, M, lo, hi, ctx->num_threads);
}

static cge_status qprim_make(const cge_kernel_ctx *ctx, int matmul, cge__dnnl_qconv **out)
{
    *out = NULL;
    cge__dnnl_qconv_desc d;
    float *scales;
    if (!qprim_desc(ctx, matmul, &d, &scales))
        return CGE_ERR_UNSUPPORTED;
    cge_status st = cge__dnnl_qconv_create(&d, out);
    free(scales);
    return st;
}

static cge_status qprim_prepare(const cge_kernel_ctx *ctx, void **state)
{
    int matmul = !strcmp(ctx->op_type, "QMatMul");
    *state = NULL;
    cge__dnnl_qconv *dc = NULL;
    if (qprim_make(ctx, matmul, &dc) == CGE_OK) {
        if (cge__dnnl_qconv_prepack(dc, ctx, ctx->inputs[3].data) != CGE_OK) {
            cge__dnnl_qconv_destroy(dc);
            return cge_kernel_error(ctx, CGE_ERR_INTERNAL, "oneDNN could not pack W");
        }
        *state = dc;
    } else if (cge_attrs_get_int(ctx->attrs, "channels_last", 0)) {
        return cge_kernel_error(ctx, CGE_ERR_UNSUPPORTED,
                                "channels_last needs oneDNN's int8 convolution, which this build "
                                "lacks or which refused these parameters");
    }
    return CGE_OK;
}

static void qprim_release(void *state)
{
    cge__dnnl_qconv_destroy(state);
}

/* One block (oneDNN runs its own team while the pool's other workers wait),
 * or one slice of a matrix product's rows per block. */
static void qprim_fn(int64_t blk, int64_t nblk, void *args)
{
    const qprim *a = args;
    if (cge__dnnl_qconv_run_block(a->dc, a->x, a->bias, a->y, blk, nblk) != CGE_OK)
        cge_kernel_fail(CGE_ERR_INTERNAL, "oneDNN's int8 primitive failed to run");
}

/* Without the primitive the loops need their int16 copies; with it, none. */
static bool qprim_possible(const cge_kernel_ctx *ctx, int matmul)
{
    cge__dnnl_qconv *dc = NULL;
    if (qprim_make(ctx, matmul, &dc) != CGE_OK)
        return false;
    cge__dnnl_qconv_destroy(dc);
    return true;
}

static size_t qconv_workspace(const cge_kernel_ctx *ctx)
{
    return qprim_possible(ctx, 0) ? 0 : iconv_workspace(ctx);
}

static size_t qmm_workspace(const cge_kernel_ctx *ctx)
{
    return qprim_possible(ctx, 1) ? 0 : imm_workspace(ctx);
}

static cge_status qprim_launch(const cge_kernel_ctx *ctx, cge_stream *stream, int matmul)
{
    if (ctx->state) {
        qprim a = {.dc = ctx->state, .x = ctx->inputs[0].data,
                   .bias = kpresent(ctx, 8) ? ctx->inputs[8].data : NULL,
                   .y = ctx->outputs[0].data};
        return cge_launch(stream, qprim_fn, cge__dnnl_qconv_blocks(a.dc, ctx->num_threads), &a,
                          sizeof a);
    }
    if (cge_attrs_get_int(ctx->attrs, "channels_last", 0))
        return cge_kernel_error(ctx, CGE_ERR_UNSUPPORTED,
                                "channels_last needs oneDNN's int8 convolution");
    return matmul ? imm_launch(ctx, stream) : iconv_launch(ctx, stream);
}

static cge_status qconv_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return qprim_launch(ctx, stream, 0);
}

static cge_status qmm_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return qprim_launch(ctx, stream, 1);
}

/* ---- QConvAdd: a QConv and the residual QAdd that reads it ------------------- */

/* fuse_qconv_add's node: QConv's inputs 0-8 (its output's scale and zero
 * point, 6 and 7, those of the int8 value the QDQ graph rounds to), then
 * the other addend S (9) with its scale (10) and zero point (11), and the
 * sum's scale (12) and zero point (13); attributes QConv's and add_lo /
 * add_hi, the add's clamp (a Relu after it). The convolution writes its
 * int8 result into the workspace, and each block of its rows is then added
 * to S on the thread that wrote it, while the rows are in that core's
 * cache: QConv's bytes, then QAdd's arithmetic on them (cge__qadd_span), so
 * the same bits as the two nodes. */
static cge_status qconvadd_infer(cge_infer_ctx *ctx)
{
    cge_status st = iconv_infer(ctx);
    if (st)
        return st;
    const cge_tensor_desc *S = &ctx->inputs[9];
    if (S->dtype != CGE_I8 && S->dtype != CGE_U8)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "S must be int8 or uint8");
    if (!cge_shape_equal(&S->shape, &ctx->outputs[0].shape))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "S must have the convolution's output shape");
    for (int i = 10; i < 14; i++)
        if (cge_shape_numel(&ctx->inputs[i].shape) > 1)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "input %d must be a scalar", i);
    if (ctx->inputs[11].dtype != S->dtype)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "S's zero point must have S's dtype");
    ctx->outputs[0].dtype = ctx->inputs[13].dtype;
    return CGE_OK;
}

static size_t qconvadd_bytes(const cge_kernel_ctx *ctx)
{
    return ((size_t)cge_shape_numel(&ctx->outputs[0].shape) + 63) & ~(size_t)63;
}

static size_t qconvadd_workspace(const cge_kernel_ctx *ctx)
{
    return qconvadd_bytes(ctx) + qconv_workspace(ctx);
}

typedef struct qconvadd_args {
    qprim conv;                    /* y: the workspace */
    cge__qadd_params add;          /* a: the workspace, b: S */
    int64_t n;
} qconvadd_args;

/* Block blk of the convolution, then the add on the rows it wrote. */
static void qconvadd_fn(int64_t blk, int64_t nblk, void *args)
{
    const qconvadd_args *a = args;
    int64_t e0, e1;
    if (cge__dnnl_qconv_run_block(a->conv.dc, a->conv.x, a->conv.bias, a->conv.y, blk, nblk) !=
        CGE_OK)
        cge_kernel_fail(CGE_ERR_INTERNAL, "oneDNN's int8 primitive failed to run");
    else if (cge__dnnl_qconv_block_span(a->conv.dc, blk, nblk, &e0, &e1))
        cge__qadd_span(&a->add, e0, e1);
}

static void qconvadd_add_fn(int64_t blk, int64_t nblk, void *args)
{
    const qconvadd_args *a = args;
    int64_t e0, e1;
    cge__block_range(a->n, blk, nblk, &e0, &e1);
    cge__qadd_span(&a->add, e0, e1);
}

/* The residual add's parameters: the convolution's int8 result t (its scale
 * and zero point inputs ti, ti + 1), the addend S, its scale and zero point
 * (si .. si + 2), the sum's scale and zero point (si + 3, si + 4), the
 * add_lo / add_hi clamp. */
static void qadd_fill(cge__qadd_params *p, const cge_kernel_ctx *ctx, int ti, int si, void *t)
{
    const cge_tensor *S = &ctx->inputs[si], *Y = &ctx->outputs[0];
    cge_dtype tt = ctx->inputs[ti + 1].dtype;
    *p = (cge__qadd_params){
        .a = t, .b = S->data, .y = Y->data,
        .za = cge__q8_load(ctx->inputs[ti + 1].data, tt == CGE_I8, 0),
        .zb = cge__q8_load(ctx->inputs[si + 2].data, S->dtype == CGE_I8, 0),
        .sa = ((const float *)ctx->inputs[ti].data)[0],
        .sb = ((const float *)ctx->inputs[si + 1].data)[0],
        .sc = ((const float *)ctx->inputs[si + 3].data)[0],
        .asg = tt == CGE_I8, .bsg = S->dtype == CGE_I8, .ysg = Y->dtype == CGE_I8};
    p->zc = (float)cge__q8_load(ctx->inputs[si + 4].data, p->ysg, 0);
    float tlo = p->ysg ? -128.0f : 0.0f, thi = p->ysg ? 127.0f : 255.0f;
    float lo = (float)cge_attrs_get_int(ctx->attrs, "add_lo", -1024);
    float hi = (float)cge_attrs_get_int(ctx->attrs, "add_hi", 1024);
    p->lo = lo > tlo ? lo : tlo;
    p->hi = hi < thi ? hi : thi;
}

static cge_status qconvadd_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *S = &ctx->inputs[9], *Y = &ctx->outputs[0];
    size_t tb = qconvadd_bytes(ctx);
    if (!ctx->workspace || ctx->workspace_size < qconvadd_workspace(ctx))
        return cge_kernel_error(ctx, CGE_ERR_NO_MEMORY, "workspace missing");
    if ((S->dtype != CGE_I8 && S->dtype != CGE_U8) || (Y->dtype != CGE_I8 && Y->dtype != CGE_U8))
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "S and the output must be int8 or uint8");
    qconvadd_args a;
    memset(&a, 0, sizeof a);
    a.n = cge_shape_numel(&Y->shape);
    cge_dtype tt = ctx->inputs[7].dtype;
    qadd_fill(&a.add, ctx, 6, 9, ctx->workspace);
    if (a.n == 0)
        return CGE_OK;
    cge_status st;
    if (ctx->state) {
        a.conv = (qprim){.dc = ctx->state, .x = ctx->inputs[0].data,
                         .bias = kpresent(ctx, 8) ? ctx->inputs[8].data : NULL,
                         .y = ctx->workspace};
        int64_t nb = cge__dnnl_qconv_blocks(a.conv.dc, ctx->num_threads), e0, e1;
        /* rows each block writes, and more than one block or one thread (a
         * whole layer on oneDNN's team: the add on the pool after it) */
        if (cge__dnnl_qconv_block_span(a.conv.dc, 0, nb, &e0, &e1) &&
            (nb > 1 || ctx->num_threads <= 1 || a.n < 16384))
            return cge_launch(stream, qconvadd_fn, nb, &a, sizeof a);
        st = cge_launch(stream, qprim_fn, nb, &a.conv, sizeof a.conv);
    } else {
        if (cge_attrs_get_int(ctx->attrs, "channels_last", 0))
            return cge_kernel_error(ctx, CGE_ERR_UNSUPPORTED,
                                    "channels_last needs oneDNN's int8 convolution");
        /* the reference loops, writing the workspace */
        cge_tensor t = ctx->outputs[0];
        t.data = ctx->workspace;
        t.dtype = tt;
        cge_kernel_ctx c2 = *ctx;
        c2.outputs = &t;
        c2.num_outputs = 1;
        c2.workspace = (char *)ctx->workspace + tb;
        c2.workspace_size = ctx->workspace_size - tb;
        st = iconv_launch(&c2, stream);
    }
    return st ? st
              : cge_launch(stream, qconvadd_add_fn, cge__blocks_for(a.n, 16384, ctx->num_threads),
                           &a, sizeof a);
}

/* ---- QConvPair: a QConv and the pointwise QConv that alone reads it ------------ */

/* fuse_qconv_add's node for a convolution A whose output only a pointwise
 * (1x1, stride 1, unpadded, one group) convolution B reads, both
 * channels-last (MobileNet's depthwise -> projection, ResNet's 3x3 -> 1x1):
 * A's inputs 0-8 (QConv's), B's weights 9, their scale 10 and zero point 11,
 * B's output scale 12 and zero point 13, its bias 14 (optional); B's x is
 * A's output, with A's scale and zero point (6, 7). Then, optionally,
 * QConvAdd's addend: S 15, its scale 16 and zero point 17, the sum's scale
 * 18 and zero point 19. Attributes: A's, b_lo / b_hi (B's clamp), add_lo /
 * add_hi. B's output rows are the A rows it reads, so where both are cut
 * into the same bands of rows, one block of cge's pool computes A's band,
 * B's on it and the add, with no wait for the other threads between them:
 * QConv's bytes twice, then QAdd's arithmetic, the three nodes' bits. */
typedef struct qpair_state {
    cge__dnnl_qconv *a, *b;
    int fused;                     /* the blocks of A and B are the same rows */
} qpair_state;

static int qpair_add(const cge_kernel_ctx *ctx)
{
    return ctx->num_inputs > 19 && kpresent(ctx, 15);
}

static cge_status qpair_infer(cge_infer_ctx *ctx)
{
    cge_status st = iconv_infer(ctx);
    if (st)
        return st;
    const cge_tensor_desc *W = &ctx->inputs[9];
    cge_shape y = ctx->outputs[0].shape;
    if (W->shape.rank != y.rank || W->shape.dims[1] != y.dims[1])
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "B's weights must be [M, A's outputs, 1, ...]");
    for (int32_t i = 2; i < W->shape.rank; i++)
        if (W->shape.dims[i] != 1)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "B must be a 1x1 convolution");
    y.dims[1] = W->shape.dims[0];
    ctx->outputs[0].shape = y;
    ctx->outputs[0].dtype = ctx->inputs[13].dtype;
    if (present(ctx, 15)) {
        if (!cge_shape_equal(&ctx->inputs[15].shape, &y))
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "S must have B's output shape");
        ctx->outputs[0].dtype = ctx->inputs[19].dtype;
    }
    return CGE_OK;
}

/* A's output: B's, with A's channels and dtype. */
static cge_shape qpair_mid_shape(const cge_kernel_ctx *ctx)
{
    cge_shape t = ctx->outputs[0].shape;
    t.dims[1] = ctx->inputs[3].shape.dims[0];
    return t;
}

static size_t qpair_mid_bytes(const cge_kernel_ctx *ctx)
{
    cge_shape t = qpair_mid_shape(ctx);
    return ((size_t)cge_shape_numel(&t) + 63) & ~(size_t)63;
}

/* B as a QConv of its own for the reference loops: its nine inputs (x the
 * workspace's t) in `in`, no attributes (a 1x1 convolution by default; its
 * clamp comes after, qpair_clamp_fn). */
static cge_kernel_ctx qpair_b_ctx(const cge_kernel_ctx *ctx, cge_tensor in[9], void *t)
{
    in[0] = (cge_tensor){.dtype = ctx->inputs[7].dtype, .shape = qpair_mid_shape(ctx), .data = t};
    in[1] = ctx->inputs[6];
    in[2] = ctx->inputs[7];
    for (int i = 3; i < 8; i++)
        in[i] = ctx->inputs[6 + i];
    in[8] = kpresent(ctx, 14) ? ctx->inputs[14] : (cge_tensor){0};
    cge_kernel_ctx b = *ctx;
    b.inputs = in;
    b.num_inputs = kpresent(ctx, 14) ? 9 : 8;
    b.attrs = NULL;
    b.state = NULL;
    return b;
}

static size_t qpair_workspace(const cge_kernel_ctx *ctx)
{
    size_t n = qpair_mid_bytes(ctx) + (qpair_add(ctx) ? qconvadd_bytes(ctx) : 0);
    if (qprim_possible(ctx, 0)) /* else the loops' int16 copies, A's or B's */
        return n;
    cge_tensor in[9];
    cge_kernel_ctx b = qpair_b_ctx(ctx, in, NULL);
    size_t wa = iconv_workspace(ctx), wb = iconv_workspace(&b);
    return n + (wa > wb ? wa : wb);
}

static cge_status qpair_make_b(const cge_kernel_ctx *ctx, cge__dnnl_qconv **out)
{
    *out = NULL;
    cge_tensor t = {.dtype = ctx->inputs[7].dtype, .shape = qpair_mid_shape(ctx)};
    const cge_tensor *in[9] = {&t, &ctx->inputs[6], &ctx->inputs[7], &ctx->inputs[9],
                               &ctx->inputs[10], kopt(ctx, 11), &ctx->inputs[12],
                               &ctx->inputs[13], kopt(ctx, 14)};
    const cge_shape *y = &ctx->outputs[0].shape;
    if (!qprim_consts(in) || y->rank < 3 || y->rank > 5)
        return CGE_ERR_UNSUPPORTED;
    cge__dnnl_qconv_desc d;
    memset(&d, 0, sizeof d);
    d.N = y->dims[0];
    d.C = t.shape.dims[1];
    d.M = y->dims[1];
    d.G = 1;
    d.nsp = y->rank - 2;
    for (int i = 0; i < 3; i++) {
        int j = i - (3 - d.nsp);
        d.in[i] = d.out[i] = j >= 0 ? y->dims[2 + j] : 1;
        d.k[i] = d.s[i] = d.d[i] = 1;
    }
    d.channels_last = cge_attrs_get_int(ctx->attrs, "channels_last", 0) != 0;
    float *scales = NULL;
    float lo = (float)cge_attrs_get_int(ctx->attrs, "b_lo", -1024);
    float hi = (float)cge_attrs_get_int(ctx->attrs, "b_hi", 1024);
    if (!qprim_params(&d, &scales, in, d.M, lo, hi, ctx->num_threads)) {
        free(scales);
        return CGE_ERR_UNSUPPORTED;
    }
    cge_status st = cge__dnnl_qconv_create(&d, out);
    free(scales);
    return st;
}

static void qpair_release(void *state)
{
    qpair_state *q = state;
    if (!q)
        return;
    cge__dnnl_qconv_destroy(q->a);
    cge__dnnl_qconv_destroy(q->b);
    free(q);
}

/* Whether block k of A and of B cover the same rows, for every block. */
static int qpair_same_rows(const cge__dnnl_qconv *a, const cge__dnnl_qconv *b, int64_t ma,
                           int64_t mb, int threads)
{
    int64_t n = cge__dnnl_qconv_blocks(a, threads);
    if (n != cge__dnnl_qconv_blocks(b, threads) || (n == 1 && threads > 1))
        return 0;
    for (int64_t k = 0; k < n; k++) {
        int64_t a0, a1, b0, b1;
        if (!cge__dnnl_qconv_block_span(a, k, n, &a0, &a1) ||
            !cge__dnnl_qconv_block_span(b, k, n, &b0, &b1) || a0 / ma != b0 / mb ||
            a1 / ma != b1 / mb)
            return 0;
    }
    return 1;
}

static cge_status qpair_prepare(const cge_kernel_ctx *ctx, void **state)
{
    *state = NULL;
    qpair_state *q = calloc(1, sizeof *q);
    if (!q)
        return cge_kernel_error(ctx, CGE_ERR_NO_MEMORY, "out of memory");
    if (qprim_make(ctx, 0, &q->a) != CGE_OK || qpair_make_b(ctx, &q->b) != CGE_OK) {
        cge__dnnl_qconv_destroy(q->a);
        cge__dnnl_qconv_destroy(q->b);
        q->a = q->b = NULL;
        if (cge_attrs_get_int(ctx->attrs, "channels_last", 0)) {
            qpair_release(q);
            return cge_kernel_error(ctx, CGE_ERR_UNSUPPORTED,
                                    "channels_last needs oneDNN's int8 convolution, which this "
                                    "build lacks or which refused these parameters");
        }
        *state = q; /* the reference loops */
        return CGE_OK;
    }
    if (cge__dnnl_qconv_prepack(q->a, ctx, ctx->inputs[3].data) != CGE_OK ||
        cge__dnnl_qconv_prepack(q->b, ctx, ctx->inputs[9].data) != CGE_OK) {
        qpair_release(q);
        return cge_kernel_error(ctx, CGE_ERR_INTERNAL, "oneDNN could not pack W");
    }
    q->fused = qpair_same_rows(q->a, q->b, ctx->inputs[3].shape.dims[0],
                               ctx->outputs[0].shape.dims[1], ctx->num_threads);
    *state = q;
    return CGE_OK;
}

typedef struct qpair_args {
    qprim a, b;                    /* A: x -> t; B: t -> u (the sum's input) or y */
    cge__qadd_params add;
    int has_add;
    int64_t n;
} qpair_args;

static void qpair_fn(int64_t blk, int64_t nblk, void *args)
{
    const qpair_args *p = args;
    int64_t e0, e1;
    if (cge__dnnl_qconv_run_block(p->a.dc, p->a.x, p->a.bias, p->a.y, blk, nblk) != CGE_OK ||
        cge__dnnl_qconv_run_block(p->b.dc, p->b.x, p->b.bias, p->b.y, blk, nblk) != CGE_OK)
        cge_kernel_fail(CGE_ERR_INTERNAL, "oneDNN's int8 primitive failed to run");
    else if (p->has_add && cge__dnnl_qconv_block_span(p->b.dc, blk, nblk, &e0, &e1))
        cge__qadd_span(&p->add, e0, e1);
}

static void qpair_add_fn(int64_t blk, int64_t nblk, void *args)
{
    const qpair_args *p = args;
    int64_t e0, e1;
    cge__block_range(p->n, blk, nblk, &e0, &e1);
    cge__qadd_span(&p->add, e0, e1);
}

typedef struct qpair_clamp {
    void *y;
    int64_t n;
    int sg;
    int32_t lo, hi;
} qpair_clamp;

static void qpair_clamp_fn(int64_t blk, int64_t nblk, void *args)
{
    const qpair_clamp *c = args;
    int64_t e0, e1;
    cge__block_range(c->n, blk, nblk, &e0, &e1);
    for (int64_t i = e0; i < e1; i++) {
        int32_t v = cge__q8_load(c->y, c->sg, i);
        cge__q8_store(c->y, c->sg, i, (float)(v < c->lo ? c->lo : (v > c->hi ? c->hi : v)));
    }
}

/* Without oneDNN's primitives (plain layout only): A and B on the reference
 * loops, then B's clamp (clamping the saturated codes is clamping before
 * the saturation: both are clamps within the dtype's range). */
static cge_status qpair_loops(const cge_kernel_ctx *ctx, cge_stream *stream, void *t, void *u,
                              size_t used)
{
    if (cge_attrs_get_int(ctx->attrs, "channels_last", 0))
        return cge_kernel_error(ctx, CGE_ERR_UNSUPPORTED,
                                "channels_last needs oneDNN's int8 convolution");
    cge_tensor ta = {.dtype = ctx->inputs[7].dtype, .shape = qpair_mid_shape(ctx), .data = t};
    cge_tensor ub = ctx->outputs[0], in[9];
    ub.data = u;
    ub.dtype = ctx->inputs[13].dtype;
    cge_kernel_ctx a = *ctx, b = qpair_b_ctx(ctx, in, t);
    a.outputs = &ta;
    b.outputs = &ub;
    a.workspace = b.workspace = (char *)ctx->workspace + used;
    a.workspace_size = b.workspace_size = ctx->workspace_size - used;
    cge_status st = iconv_launch(&a, stream);
    if (!st)
        st = iconv_launch(&b, stream);
    qpair_clamp c = {.y = u, .n = cge_shape_numel(&ub.shape), .sg = ub.dtype == CGE_I8};
    float tlo = c.sg ? -128.0f : 0.0f, thi = c.sg ? 127.0f : 255.0f;
    float lo = (float)cge_attrs_get_int(ctx->attrs, "b_lo", -1024);
    float hi = (float)cge_attrs_get_int(ctx->attrs, "b_hi", 1024);
    c.lo = (int32_t)(lo > tlo ? lo : tlo);
    c.hi = (int32_t)(hi < thi ? hi : thi);
    if (!st && (lo > tlo || hi < thi))
        st = cge_launch(stream, qpair_clamp_fn, cge__blocks_for(c.n, 16384, ctx->num_threads), &c,
                        sizeof c);
    return st;
}

static cge_status qpair_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const qpair_state *q = ctx->state;
    if (!q)
        return cge_kernel_error(ctx, CGE_ERR_INTERNAL, "not prepared");
    if (!ctx->workspace || ctx->workspace_size < qpair_workspace(ctx))
        return cge_kernel_error(ctx, CGE_ERR_NO_MEMORY, "workspace missing");
    qpair_args p;
    memset(&p, 0, sizeof p);
    p.has_add = qpair_add(ctx);
    p.n = cge_shape_numel(&ctx->outputs[0].shape);
    char *t = ctx->workspace, *u = t + qpair_mid_bytes(ctx);
    p.a = (qprim){.dc = q->a, .x = ctx->inputs[0].data,
                  .bias = kpresent(ctx, 8) ? ctx->inputs[8].data : NULL, .y = t};
    p.b = (qprim){.dc = q->b, .x = t, .bias = kpresent(ctx, 14) ? ctx->inputs[14].data : NULL,
                  .y = p.has_add ? (void *)u : ctx->outputs[0].data};
    if (p.has_add)
        qadd_fill(&p.add, ctx, 12, 15, u);
    if (p.n == 0)
        return CGE_OK;
    cge_status st;
    if (!q->a) {
        st = qpair_loops(ctx, stream, t, p.b.y, qpair_mid_bytes(ctx) +
                                                (p.has_add ? qconvadd_bytes(ctx) : 0));
    } else {
        int64_t na = cge__dnnl_qconv_blocks(q->a, ctx->num_threads);
        if (q->fused)
            return cge_launch(stream, qpair_fn, na, &p, sizeof p);
        st = cge_launch(stream, qprim_fn, na, &p.a, sizeof p.a);
        if (!st)
            st = cge_launch(stream, qprim_fn, cge__dnnl_qconv_blocks(q->b, ctx->num_threads),
                            &p.b, sizeof p.b);
    }
    if (!st && p.has_add)
        st = cge_launch(stream, qpair_add_fn, cge__blocks_for(p.n, 16384, ctx->num_threads), &p,
                        sizeof p);
    return st;
}

/* ---- definitions ------------------------------------------------------------ */

/* 19 and 21 add block_size, output_dtype and saturate (the last only
 * matters for float8, which cge has not) to 13's definition, which the
 * current one covers: one definition serves 13-21. */
static const cge_attr_def q_attrs[] = {
    {"axis", CGE_ATTR_INT, false, 1, 0.0f, NULL, "axis of per-axis or blocked scales"},
    {"block_size", CGE_ATTR_INT, false, 0, 0.0f, NULL, "> 0: blocked scales along axis (21)"},
    {"output_dtype", CGE_ATTR_INT, false, 0, 0.0f, NULL,
     "ONNX type of y without a zero point (21): 0/2 uint8, 3 int8, 4 uint16, 5 int16"},
    {"saturate", CGE_ATTR_INT, false, 1, 0.0f, NULL, "float8 only (19); ignored"},
};
static const cge_attr_def dq_attrs[] = {
    {"axis", CGE_ATTR_INT, false, 1, 0.0f, NULL, "axis of per-axis or blocked scales"},
    {"block_size", CGE_ATTR_INT, false, 0, 0.0f, NULL, "> 0: blocked scales along axis (21)"},
};

static const cge_arg_def q_inputs[] = {
    {"x", 0, CGE_DT(CGE_F32) | CGE_DT(CGE_I32), "values to quantize"},
    {"y_scale", 0, F32, "scalar, 1-D along axis, or blocked (x's rank)"},
    {"y_zero_point", CGE_ARG_OPTIONAL, Q8 | Q16, "shape of y_scale; uint8 0 when absent"},
};
static const cge_arg_def q_outputs[] = {{"y", 0, Q8 | Q16, "quantized values"}};
static const cge_arg_def dq_inputs[] = {
    {"x", 0, Q8 | Q16 | CGE_DT(CGE_I32), "quantized values"},
    {"x_scale", 0, F32, "scalar, 1-D along axis, or blocked (x's rank)"},
    {"x_zero_point", CGE_ARG_OPTIONAL, Q8 | Q16 | CGE_DT(CGE_I32), "shape of x_scale"},
};
static const cge_arg_def dq_outputs[] = {{"y", 0, F32, "(x - x_zero_point) * x_scale"}};
static const cge_arg_def dynq_inputs[] = {{"x", 0, F32, "values"}};
static const cge_arg_def dynq_outputs[] = {
    {"y", 0, CGE_DT(CGE_U8), "quantized values"},
    {"y_scale", 0, F32, "scalar"},
    {"y_zero_point", 0, CGE_DT(CGE_U8), "scalar"},
};
static const cge_arg_def mmi_inputs[] = {
    {"A", 0, Q8, "N-d matrix A"},
    {"B", 0, Q8, "N-d matrix B"},
    {"a_zero_point", CGE_ARG_OPTIONAL, Q8, "scalar or one per row of A"},
    {"b_zero_point", CGE_ARG_OPTIONAL, Q8, "scalar or one per column of B"},
};
static const cge_arg_def i32_output[] = {{"Y", 0, CGE_DT(CGE_I32), "int32 result"}};
static const cge_arg_def qmm_inputs[] = {
    {"a", 0, Q8, "N-d matrix a"},
    {"a_scale", 0, F32, "scalar or one per row"},
    {"a_zero_point", 0, Q8, "scalar or one per row"},
    {"b", 0, Q8, "N-d matrix b"},
    {"b_scale", 0, F32, "scalar or one per column"},
    {"b_zero_point", 0, Q8, "scalar or one per column"},
    {"y_scale", 0, F32, "scalar"},
    {"y_zero_point", 0, Q8, "scalar"},
};
static const cge_arg_def qnhwc_inputs[] = {
    {"x", 0, F32, "[N, C, H, W], NCHW"},
    {"y_scale", 0, F32, "scalar"},
    {"y_zero_point", CGE_ARG_OPTIONAL, Q8, "scalar; uint8 0 when absent"},
};
static const cge_arg_def q8_output[] = {{"y", 0, Q8, "quantized result"}};
static const cge_arg_def ci_inputs[] = {
    {"x", 0, Q8, "[N, C, D1, ...]"},
    {"w", 0, Q8, "[M, C/group, k1, ...]"},
    {"x_zero_point", CGE_ARG_OPTIONAL, Q8, "scalar"},
    {"w_zero_point", CGE_ARG_OPTIONAL, Q8, "scalar or one per feature map"},
};
/* QLinearConv's x and w with their scales and zero points (inputs 0-5). */
#define QC_XW_INPUTS                                                                        \
    {"x", 0, Q8, "[N, C, D1, ...]"}, {"x_scale", 0, F32, "scalar"},                          \
    {"x_zero_point", 0, Q8, "scalar"}, {"w", 0, Q8, "[M, C/group, k1, ...]"},                \
    {"w_scale", 0, F32, "scalar or one per feature map"},                                   \
    {"w_zero_point", 0, Q8, "scalar or one per feature map"}
static const cge_arg_def qc_inputs[] = {
    QC_XW_INPUTS,
    {"y_scale", 0, F32, "scalar"},
    {"y_zero_point", 0, Q8, "scalar"},
    {"B", CGE_ARG_OPTIONAL, CGE_DT(CGE_I32), "[M], scale x_scale * w_scale"},
};
static const cge_arg_def qmmf_inputs[] = {
    {"a", 0, Q8, "[..., K]"},
    {"a_scale", 0, F32, "scalar"},
    {"a_zero_point", 0, Q8, "scalar"},
    {"b", 0, CGE_DT(CGE_I8) | CGE_DT(CGE_U8), "[K, N] constant"},
    {"b_scale", 0, F32, "scalar or one per column"},
    {"b_zero_point", 0, Q8, "scalar or one per column"},
    {"y_scale", 0, F32, "scalar"},
    {"y_zero_point", 0, Q8, "scalar"},
    {"bias", CGE_ARG_OPTIONAL, CGE_DT(CGE_I32), "[N], scale a_scale * b_scale"},
};
static const cge_arg_def qca_inputs[] = {
    QC_XW_INPUTS,
    {"t_scale", 0, F32, "scalar: the convolution's requantised output"},
    {"t_zero_point", 0, Q8, "scalar"},
    {"B", CGE_ARG_OPTIONAL, CGE_DT(CGE_I32), "[M], scale x_scale * w_scale"},
    {"S", 0, Q8, "the other addend, the convolution's output shape and layout"},
    {"S_scale", 0, F32, "scalar"},
    {"S_zero_point", 0, Q8, "scalar"},
    {"y_scale", 0, F32, "scalar: the sum's"},
    {"y_zero_point", 0, Q8, "scalar"},
};
static const cge_arg_def qpair_inputs[] = {
    QC_XW_INPUTS, /* A's */
    {"t_scale", 0, F32, "scalar: A's requantised output, B's input"},
    {"t_zero_point", 0, Q8, "scalar"},
    {"B", CGE_ARG_OPTIONAL, CGE_DT(CGE_I32), "A's [M], scale x_scale * w_scale"},
    {"w2", 0, Q8, "B's [M2, M, 1, ...]"},
    {"w2_scale", 0, F32, "scalar or one per feature map"},
    {"w2_zero_point", 0, Q8, "scalar or one per feature map"},
    {"u_scale", 0, F32, "scalar: B's requantised output"},
    {"u_zero_point", 0, Q8, "scalar"},
    {"B2", CGE_ARG_OPTIONAL, CGE_DT(CGE_I32), "B's [M2], scale t_scale * w2_scale"},
    {"S", CGE_ARG_OPTIONAL, Q8, "an addend of B's output shape and layout"},
    {"S_scale", CGE_ARG_OPTIONAL, F32, "scalar"},
    {"S_zero_point", CGE_ARG_OPTIONAL, Q8, "scalar"},
    {"y_scale", CGE_ARG_OPTIONAL, F32, "scalar: the sum's"},
    {"y_zero_point", CGE_ARG_OPTIONAL, Q8, "scalar"},
};
#define CLAMP_ATTRS                                                                          \
    {"lo", CGE_ATTR_INT, false, -1024, 0.0f, NULL, "lowest output value (a folded Relu/Clip)"}, \
    {"hi", CGE_ATTR_INT, false, 1024, 0.0f, NULL, "highest output value"},                   \
    {"w_const", CGE_ATTR_INT, false, 0, 0.0f, NULL, "the weight is a graph constant"}
static const cge_attr_def qmmf_attrs[] = {CLAMP_ATTRS};
/* A convolution's geometry (ConvInteger's, QLinearConv's and the fused
 * int8 convolutions'). */
#define CONV_GEOM_ATTRS                                                                     \
    {"auto_pad", CGE_ATTR_STRING, false, 0, 0.0f, "NOTSET", "NOTSET, VALID, SAME_UPPER, SAME_LOWER"}, \
    {"dilations", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "per spatial axis"},                 \
    {"group", CGE_ATTR_INT, false, 1, 0.0f, NULL, "channel groups"},                        \
    {"kernel_shape", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "from w when absent"},            \
    {"pads", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "begins then ends"},                      \
    {"strides", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "per spatial axis"}
static const cge_attr_def conv_attrs[] = {
    CONV_GEOM_ATTRS,
};
static const cge_attr_def qconv_attrs[] = {
    CONV_GEOM_ATTRS,
    CLAMP_ATTRS,
    {"channels_last", CGE_ATTR_INT, false, 0, 0.0f, NULL,
     "x and y are NHWC (set by the layout pass; needs oneDNN)"},
};

static const cge_attr_def qconvadd_attrs[] = {
    CONV_GEOM_ATTRS,
    CLAMP_ATTRS,
    {"channels_last", CGE_ATTR_INT, false, 0, 0.0f, NULL,
     "x, S and y are NHWC (needs oneDNN)"},
    {"add_lo", CGE_ATTR_INT, false, -1024, 0.0f, NULL, "lowest sum (a Relu after the add)"},
    {"add_hi", CGE_ATTR_INT, false, 1024, 0.0f, NULL, "highest sum"},
};

static const cge_attr_def qpair_attrs[] = {
    CONV_GEOM_ATTRS,
    CLAMP_ATTRS,
    {"channels_last", CGE_ATTR_INT, false, 0, 0.0f, NULL, "x, S and y are NHWC (needs oneDNN)"},
    {"b_lo", CGE_ATTR_INT, false, -1024, 0.0f, NULL, "B's lowest output value"},
    {"b_hi", CGE_ATTR_INT, false, 1024, 0.0f, NULL, "B's highest output value"},
    {"add_lo", CGE_ATTR_INT, false, -1024, 0.0f, NULL, "lowest sum (a Relu after the add)"},
    {"add_hi", CGE_ATTR_INT, false, 1024, 0.0f, NULL, "highest sum"},
};

#define KERNEL(fn, ws)                                                                     \
    {                                                                                      \
        .engine = "cpu", .dtypes = 0, .launch = fn, .workspace_size = ws, .inplace_input = -1 \
    }
static const cge_kernel_def q_kernels[] = {KERNEL(quantize_launch, NULL)};
static const cge_kernel_def qnhwc_kernels[] = {KERNEL(qnhwc_launch, NULL)};
static const cge_kernel_def dq_kernels[] = {KERNEL(dequantize_launch, NULL)};
static const cge_kernel_def dynq_kernels[] = {KERNEL(dynq_launch, dynq_workspace)};
static const cge_kernel_def imm_kernels[] = {KERNEL(imm_launch, imm_workspace)};
static const cge_kernel_def iconv_kernels[] = {KERNEL(iconv_launch, iconv_workspace)};
static const cge_kernel_def qconv_kernels[] = {
    {.engine = "cpu", .launch = qconv_launch, .workspace_size = qconv_workspace,
     .prepare = qprim_prepare, .release = qprim_release, .inplace_input = -1}};
static const cge_kernel_def qconvadd_kernels[] = {
    {.engine = "cpu", .launch = qconvadd_launch, .workspace_size = qconvadd_workspace,
     .prepare = qprim_prepare, .release = qprim_release, .inplace_input = -1}};
static const cge_kernel_def qpair_kernels[] = {
    {.engine = "cpu", .launch = qpair_launch, .workspace_size = qpair_workspace,
     .prepare = qpair_prepare, .release = qpair_release, .inplace_input = -1}};
static const cge_kernel_def qmm_kernels[] = {
    {.engine = "cpu", .launch = qmm_launch, .workspace_size = qmm_workspace,
     .prepare = qprim_prepare, .release = qprim_release, .inplace_input = -1}};

#define N_OF(a) ((int32_t)(sizeof(a) / sizeof((a)[0])))

static const cge_op_def quant_ops[] = {
    {
        .name = "QuantizeLinear", .domain = CGE_DOMAIN_DEFAULT, .since_version = 13,
        .inputs = q_inputs, .num_inputs = 3, .outputs = q_outputs, .num_outputs = 1,
        .attrs = q_attrs, .num_attrs = N_OF(q_attrs), .infer = quantize_infer,
        .kernels = q_kernels, .num_kernels = 1,
        .doc = "y = saturate(round_half_even(x / y_scale) + y_zero_point).",
    },
    {
        .name = "DequantizeLinear", .domain = CGE_DOMAIN_DEFAULT, .since_version = 13,
        .inputs = dq_inputs, .num_inputs = 3, .outputs = dq_outputs, .num_outputs = 1,
        .attrs = dq_attrs, .num_attrs = N_OF(dq_attrs), .infer = dequantize_infer,
        .kernels = dq_kernels, .num_kernels = 1,
        .doc = "y = (x - x_zero_point) * x_scale.",
    },
    {
        .name = "DynamicQuantizeLinear", .domain = CGE_DOMAIN_DEFAULT, .since_version = 11,
        .inputs = dynq_inputs, .num_inputs = 1, .outputs = dynq_outputs, .num_outputs = 3,
        .infer = dynq_infer, .kernels = dynq_kernels, .num_kernels = 1,
        .doc = "uint8 quantization with scale and zero point from the data's range.",
    },
    {
        .name = "MatMulInteger", .domain = CGE_DOMAIN_DEFAULT, .since_version = 10,
        .inputs = mmi_inputs, .num_inputs = 4, .outputs = i32_output, .num_outputs = 1,
        .infer = imm_infer, .kernels = imm_kernels, .num_kernels = 1,
        .doc = "int32 (A - a_zero_point) x (B - b_zero_point), numpy matmul shapes.",
    },
    {
        .name = "ConvInteger", .domain = CGE_DOMAIN_DEFAULT, .since_version = 10,
        .inputs = ci_inputs, .num_inputs = 4, .outputs = i32_output, .num_outputs = 1,
        .attrs = conv_attrs, .num_attrs = N_OF(conv_attrs), .infer = iconv_infer,
        .kernels = iconv_kernels, .num_kernels = 1,
        .doc = "int32 convolution of zero-point-shifted inputs (1-D to 3-D, direct loop).",
    },
    {
        .name = "QLinearMatMul", .domain = CGE_DOMAIN_DEFAULT, .since_version = 10,
        .inputs = qmm_inputs, .num_inputs = 8, .outputs = q8_output, .num_outputs = 1,
        .infer = imm_infer, .kernels = imm_kernels, .num_kernels = 1,
        .doc = "Quantized matmul, requantized to y_scale / y_zero_point.",
    },
    {
        .name = "QLinearConv", .domain = CGE_DOMAIN_DEFAULT, .since_version = 10,
        .inputs = qc_inputs, .num_inputs = 9, .outputs = q8_output, .num_outputs = 1,
        .attrs = conv_attrs, .num_attrs = N_OF(conv_attrs), .infer = iconv_infer,
        .kernels = iconv_kernels, .num_kernels = 1,
        .doc = "Quantized convolution with int32 bias, requantized (direct loop).",
    },
    {
        .name = "QConv", .domain = CGE_DOMAIN_FUSED, .since_version = 1,
        .inputs = qc_inputs, .num_inputs = 9, .outputs = q8_output, .num_outputs = 1,
        .attrs = qconv_attrs, .num_attrs = N_OF(qconv_attrs), .infer = iconv_infer,
        .kernels = qconv_kernels, .num_kernels = 1,
        .doc = "QLinearConv clamped to [lo, hi] (a folded Relu/Clip); oneDNN's int8 kernels "
               "with W packed once when W is constant, NHWC activations when channels_last.",
    },
    {
        .name = "QConvAdd", .domain = CGE_DOMAIN_FUSED, .since_version = 1,
        .inputs = qca_inputs, .num_inputs = 14, .outputs = q8_output, .num_outputs = 1,
        .attrs = qconvadd_attrs, .num_attrs = N_OF(qconvadd_attrs), .infer = qconvadd_infer,
        .kernels = qconvadd_kernels, .num_kernels = 1,
        .doc = "QConv (to t_scale / t_zero_point) and the QAdd of its output and S, clamped "
               "to [add_lo, add_hi]: each block of the convolution's rows added on the "
               "thread that wrote them; the same bits as the two nodes.",
    },
    {
        .name = "QConvPair", .domain = CGE_DOMAIN_FUSED, .since_version = 1,
        .inputs = qpair_inputs, .num_inputs = 20, .outputs = q8_output, .num_outputs = 1,
        .attrs = qpair_attrs, .num_attrs = N_OF(qpair_attrs), .infer = qpair_infer,
        .kernels = qpair_kernels, .num_kernels = 1,
        .doc = "QConv A, then the 1x1 QConv B that alone reads it (its weights w2, output "
               "u_scale / u_zero_point, clamp [b_lo, b_hi]), then optionally QConvAdd's add "
               "of S; each band of rows through all three on one thread; needs oneDNN.",
    },
    {
        .name = "QuantizeNHWC", .domain = CGE_DOMAIN_FUSED, .since_version = 1,
        .inputs = qnhwc_inputs, .num_inputs = 3, .outputs = q8_output, .num_outputs = 1,
        .infer = qnhwc_infer, .kernels = qnhwc_kernels, .num_kernels = 1,
        .doc = "Per-tensor QuantizeLinear of float32 NCHW x (C <= 16) written channels-last "
               "(NHWC bytes, NCHW dims): a quantized model's input QuantizeLinear and the "
               "Reorder after it, as fuse_quantize_reorder makes it.",
    },
    {
        .name = "QMatMul", .domain = CGE_DOMAIN_FUSED, .since_version = 1,
        .inputs = qmmf_inputs, .num_inputs = 9, .outputs = q8_output, .num_outputs = 1,
        .attrs = qmmf_attrs, .num_attrs = N_OF(qmmf_attrs), .infer = imm_infer,
        .kernels = qmm_kernels, .num_kernels = 1,
        .doc = "QLinearMatMul with an int32 bias and a clamp to [lo, hi]; oneDNN's int8 "
               "matmul with B packed once when B is constant.",
    },
};

const cge_op_def *cge__ops_quant(int32_t *count)
{
    *count = N_OF(quant_ops);
    return quant_ops;
}
