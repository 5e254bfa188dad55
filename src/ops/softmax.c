/* Softmax and LogSoftmax (opset 13: along one axis, not flattened), computed
 * stably by subtracting each row's maximum. Rows along the last axis are
 * contiguous loops; other axes run 64 inner positions at a time. */
#include <math.h>
#include <string.h>

#include "base/cpu_isa.h"
#include "ops/builtin.h"
#include "ops/kernel_util.h"

#define SM_DTYPES CGE_DT_FLOAT
#define SM_CHUNK 64
#define SM_TMP 256

/* expf written on 8-float vectors (GNU vector extensions, no intrinsics) so
 * that it vectorises without -ffast-math, in two SSE or one AVX register
 * depending on the caller's clone (wider vectors would need AVX-512 mask
 * registers for the selects, which GCC scalarises without AVX512DQ):
 * Cephes' range reduction and degree-5 polynomial (about 1 ulp), 2^n built in
 * the exponent bits. Inputs below -87.3 give 0, above 88.3 saturate; NaN
 * stays NaN. Every width computes the same bits per element. */
#define VW 8
#define EXP_W 16 /* floats per exp_w call, and buffer padding */
typedef float vwf __attribute__((vector_size(VW * 4)));
typedef int32_t vwi __attribute__((vector_size(VW * 4)));

/* Vectors never cross a call (no vector arguments or results, whose ABI
 * depends on the instruction set): the selects are a macro, the exponential
 * works in place on EXP_W floats. */
#define V_SEL(mask, a, b) ((vwf)(((vwi)(a) & (mask)) | ((vwi)(b) & ~(mask))))

static inline void exp_v(float *t)
{
    vwf x;
    memcpy(&x, t, sizeof x);
    const vwf zero = {0};
    const vwf hi = zero + 88.3762626647949f;
    const vwf lo = zero - 87.3365447504f;
    vwi nan = x != x, under = x < lo;
    vwf xc = V_SEL(x > hi, hi, x);
    xc = V_SEL(under | nan, zero, xc);
    /* round to nearest with the 1.5 * 2^23 trick (floorf is a libm call) */
    vwf fx = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    vwf r = xc - fx * 0.693359375f + fx * 2.12194440e-4f;
    vwf z = r * r;
    vwf p = r * 1.9875691500e-4f + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * z + r + 1.0f;
    vwi bits = (__builtin_convertvector(fx, vwi) + 127) << 23;
    vwf e = p * (vwf)bits;
    e = V_SEL(under, zero, e);
    e = V_SEL(nan, x, e);
    memcpy(t, &e, sizeof e);
}

static inline void exp_w(float *t)
{
    exp_v(t);
    exp_v(t + VW);
}

/* t[i] = exp(t[i]) for i < n; t has room for n rounded up to EXP_W. Inlined
 * into the cloned row kernels, so it runs at their width. */
static inline void exp_block_f32(float *t, int64_t n)
{
    for (int64_t i = 0; i < n; i += EXP_W)
        exp_w(t + i);
}

static void exp_block_f64(double *t, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        t[i] = exp(t[i]);
}

typedef struct sm_args {
    const void *x;
    void *y;
    int64_t outer, dim, inner;
    int log_out;  /* LogSoftmax */
} sm_args;

/* Input rank must be >= 1: ONNX 13's axis range [-r, r-1] is empty for a
 * scalar and its shape inference rejects one, so do we. */
static cge_status sm_infer(cge_infer_ctx *ctx)
{
    if (ctx->num_inputs < 1 || ctx->num_outputs < 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "needs one input and one output");
    const cge_tensor_desc *x = &ctx->inputs[0];
    int64_t axis = cge_attrs_get_int(ctx->attrs, "axis", -1);
    int32_t a;
    if (x->shape.rank < 1)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "input must have rank >= 1, got a scalar");
    if (!cge_axis_normalize(axis, x->shape.rank, false, &a)) {
        char s[CGE_SHAPE_STR_MAX];
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "axis %lld is out of range for input %s",
                              (long long)axis, cge_shape_str(&x->shape, s, sizeof s));
    }
    ctx->outputs[0].dtype = x->dtype;
    ctx->outputs[0].shape = x->shape;
    return CGE_OK;
}

#define LD_SELF(v) (v)
#define LD_F16(v) cge_f16_to_f32(v)
#define LD_BF16(v) cge_bf16_to_f32(v)
#define ST_SELF(v) (v)
#define ST_F16(v) cge_f32_to_f16(v)
#define ST_BF16(v) cge_f32_to_bf16(v)

/* EXACT: T holds the compute type exactly, so exp(x - max) can be parked in
 * y between passes instead of being computed twice. EXPB exponentiates a
 * buffer in place (vectorised for float). */
#define SM_KERNELS(SUF, T, C, LD, ST, EXPB, LOG, EXACT, FAST)                              \
    static void sm_row_##SUF(const T *x, T *y, int64_t n, int take_log)                    \
    {                                                                                      \
        C lanes[8];                                                                        \
        for (int l = 0; l < 8; l++)                                                        \
            lanes[l] = -(C)INFINITY;                                                       \
        int64_t j = 0;                                                                     \
        for (; j + 8 <= n; j += 8)                                                         \
            for (int l = 0; l < 8; l++) {                                                  \
                C v = LD(x[j + l]);                                                        \
                lanes[l] = v > lanes[l] ? v : lanes[l];                                    \
            }                                                                              \
        C m = lanes[0];                                                                    \
        for (int l = 1; l < 8; l++)                                                        \
            m = lanes[l] > m ? lanes[l] : m;                                               \
        for (; j < n; j++) {                                                               \
            C v = LD(x[j]);                                                                \
            m = v > m ? v : m;                                                             \
        }                                                                                  \
        /* exp in chunks through a small buffer: the exp loop and the lane sums            \
         * vectorise, and y (possibly x itself) is written only when safe.                 \
         */                                                                                \
        C tmp[SM_TMP], sl[16];                                                             \
        for (int l = 0; l < 16; l++)                                                       \
            sl[l] = 0;                                                                     \
        for (j = 0; j < n; j += SM_TMP) {                                                  \
            int64_t w = n - j < SM_TMP ? n - j : SM_TMP, c = 0;                            \
            for (; c < w; c++)                                                             \
                tmp[c] = LD(x[j + c]) - m;                                                 \
            for (int64_t k = c; k % EXP_W; k++)                                            \
                tmp[k] = 0;                                                                \
            EXPB(tmp, w);                                                                  \
            for (; c % 16; c++)                                                            \
                tmp[c] = 0;                                                                \
            for (int64_t k = 0; k < c; k += 16)                                            \
                for (int l = 0; l < 16; l++)                                               \
                    sl[l] += tmp[k + l];                                                   \
            if (EXACT && !take_log)                                                        \
                for (c = 0; c < w; c++)                                                    \
                    y[j + c] = ST(tmp[c]);                                                 \
        }                                                                                  \
        C s = 0;                                                                           \
        for (int l = 0; l < 16; l++)                                                       \
            s += sl[l];                                                                    \
        if (take_log) {                                                                    \
            /* (x - m) - log(s), not x - (m + log(s)): m may dwarf log(s). */              \
            C ls = LOG(s);                                                                 \
            for (j = 0; j < n; j++)                                                        \
                y[j] = ST((LD(x[j]) - m) - ls);                                            \
        } else if (EXACT) {                                                                \
            C inv = (C)1 / s;                                                              \
            for (j = 0; j < n; j++)                                                        \
                y[j] = ST(LD(y[j]) * inv);                                                 \
        } else {                                                                           \
            C inv = (C)1 / s;                                                              \
            for (j = 0; j < n; j += SM_TMP) {                                              \
                int64_t w = n - j < SM_TMP ? n - j : SM_TMP, c = 0;                        \
                for (; c < w; c++)                                                         \
                    tmp[c] = LD(x[j + c]) - m;                                             \
                for (; c % EXP_W; c++)                                                     \
                    tmp[c] = 0;                                                            \
                EXPB(tmp, w);                                                              \
                for (c = 0; c < w; c++)                                                    \
                    y[j + c] = ST(tmp[c] * inv);                                           \
            }                                                                              \
        }                                                                                  \
    }                                                                                      \
    /* `w` positions of one outer slice, starting at inner offset i0. */                   \
    static void sm_cols_##SUF(const T *x, T *y, int64_t dim, int64_t inner, int64_t w,     \
                              int take_log)                                                \
    {                                                                                      \
        C m[SM_CHUNK], s[SM_CHUNK];                                                        \
        for (int64_t c = 0; c < w; c++) {                                                  \
            m[c] = -(C)INFINITY;                                                           \
            s[c] = 0;                                                                      \
        }                                                                                  \
        for (int64_t d = 0; d < dim; d++)                                                  \
            for (int64_t c = 0; c < w; c++) {                                              \
                C v = LD(x[d * inner + c]);                                                \
                m[c] = v > m[c] ? v : m[c];                                                \
            }                                                                              \
        C t[SM_CHUNK];                                                                     \
        for (int64_t d = 0; d < dim; d++) {                                                \
            for (int64_t c = 0; c < SM_CHUNK; c++)                                         \
                t[c] = c < w ? LD(x[d * inner + c]) - m[c] : 0;                            \
            EXPB(t, w);                                                                    \
            for (int64_t c = 0; c < w; c++)                                                \
                s[c] += t[c];                                                              \
        }                                                                                  \
        for (int64_t c = 0; c < w; c++)                                                    \
            s[c] = take_log ? LOG(s[c]) : (C)1 / s[c];                                     \
        for (int64_t d = 0; d < dim; d++) {                                                \
            for (int64_t c = 0; c < SM_CHUNK; c++)                                         \
                t[c] = c < w ? LD(x[d * inner + c]) - m[c] : 0;                            \
            if (take_log) {                                                                \
                for (int64_t c = 0; c < w; c++)                                            \
                    y[d * inner + c] = ST(t[c] - s[c]);                                    \
            } else {                                                                       \
                EXPB(t, w);                                                                \
                for (int64_t c = 0; c < w; c++)                                            \
                    y[d * inner + c] = ST(t[c] * s[c]);                                    \
            }                                                                              \
        }                                                                                  \
    }                                                                                      \
    static void sm_fn_##SUF(int64_t blk, int64_t nblk, void *args)                         \
    {                                                                                      \
        const sm_args *p = args;                                                           \
        const T *x = p->x;                                                                 \
        T *y = p->y;                                                                       \
        int64_t chunks = (p->inner + SM_CHUNK - 1) / SM_CHUNK, w0, w1;                     \
        cge__block_range(p->outer * chunks, blk, nblk, &w0, &w1);                           \
        for (int64_t w = w0; w < w1; w++) {                                                \
            int64_t o = w / chunks, i0 = (w % chunks) * SM_CHUNK;                          \
            int64_t off = o * p->dim * p->inner + i0;                                      \
            if (p->inner == 1) {                                                           \
                if (p->log_out || !FAST(x + off, y + off, p->dim))                         \
                    sm_row_##SUF(x + off, y + off, p->dim, p->log_out);                    \
            } else                                                                         \
                sm_cols_##SUF(x + off, y + off, p->dim, p->inner,                          \
                              p->inner - i0 < SM_CHUNK ? p->inner - i0 : SM_CHUNK, p->log_out); \
        }                                                                                  \
    }

/* Softmax of one float32 row, cloned per instruction set so that every pass
 * runs EXP_W wide: the same lanes, sums and rounding as sm_row_f32 (element j
 * adds into lane j % 16, lanes reduced in order), so the results are the same
 * bits; it only avoids the scalar max loop and the trips through a buffer. */
CGE_TARGET_CLONES static void sm_row_exact_f32(const float *x, float *y, int64_t n)
{
    vwf m0 = {0}, m1;
    m0 = m0 - INFINITY;
    m1 = m0;
    int64_t j = 0, nv = n / EXP_W * EXP_W;
    for (; j < nv; j += EXP_W) {
        vwf a, b;
        memcpy(&a, x + j, sizeof a);
        memcpy(&b, x + j + VW, sizeof b);
        m0 = V_SEL(a > m0, a, m0);
        m1 = V_SEL(b > m1, b, m1);
    }
    float m = -INFINITY;
    for (int l = 0; l < VW; l++) {
        m = m0[l] > m ? m0[l] : m;
        m = m1[l] > m ? m1[l] : m;
    }
    for (; j < n; j++)
        m = x[j] > m ? x[j] : m;
    /* acc0 holds lanes 0-7 of the 16, acc1 lanes 8-15 */
    vwf acc0 = {0}, acc1 = {0};
    for (j = 0; j < nv; j += EXP_W) {
        vwf a, b;
        memcpy(&a, x + j, sizeof a);
        memcpy(&b, x + j + VW, sizeof b);
        a = a - m;
        b = b - m;
        memcpy(y + j, &a, sizeof a);
        memcpy(y + j + VW, &b, sizeof b);
        exp_w(y + j);
        memcpy(&a, y + j, sizeof a);
        memcpy(&b, y + j + VW, sizeof b);
        acc0 = acc0 + a;
        acc1 = acc1 + b;
    }
    if (nv < n) {
        float t[EXP_W];
        for (int64_t c = 0; c < EXP_W; c++)
            t[c] = nv + c < n ? x[nv + c] - m : 0.0f;
        exp_w(t);
        for (int64_t c = 0; c < EXP_W; c++) {
            if (nv + c < n)
                y[nv + c] = t[c];
            else
                t[c] = 0.0f;
        }
        vwf a, b;
        memcpy(&a, t, sizeof a);
        memcpy(&b, t + VW, sizeof b);
        acc0 = acc0 + a;
        acc1 = acc1 + b;
    }
    float s = 0.0f;
    for (int l = 0; l < VW; l++)
        s += acc0[l];
    for (int l = 0; l < VW; l++)
        s += acc1[l];
    float inv = 1.0f / s;
    for (j = 0; j < n; j++)
        y[j] = y[j] * inv;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SM_AVX512 1

/* exp_v on 16 lanes: the same operations in the same order (no FMA: C11
 * mode does not contract), so every lane gets exp_v's bits. */
__attribute__((target("avx512f"))) static inline __m512 exp16(__m512 x)
{
    const __m512 zero = _mm512_setzero_ps(), magic = _mm512_set1_ps(12582912.0f);
    __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_NEQ_UQ);
    __mmask16 under = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3365447504f), _CMP_LT_OQ);
    __mmask16 over = _mm512_cmp_ps_mask(x, _mm512_set1_ps(88.3762626647949f), _CMP_GT_OQ);
    __m512 xc = _mm512_mask_blend_ps(over, x, _mm512_set1_ps(88.3762626647949f));
    xc = _mm512_mask_blend_ps(under | nan, xc, zero);
    __m512 fx = _mm512_sub_ps(
        _mm512_add_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)), magic), magic);
    __m512 r = _mm512_add_ps(_mm512_sub_ps(xc, _mm512_mul_ps(fx, _mm512_set1_ps(0.693359375f))),
                             _mm512_mul_ps(fx, _mm512_set1_ps(2.12194440e-4f)));
    __m512 z = _mm512_mul_ps(r, r);
    __m512 p = _mm512_add_ps(_mm512_mul_ps(r, _mm512_set1_ps(1.9875691500e-4f)),
                             _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(p, z), r), _mm512_set1_ps(1.0f));
    __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(fx), _mm512_set1_epi32(127)), 23);
    __m512 e = _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
    e = _mm512_mask_blend_ps(under, e, zero);
    return _mm512_mask_blend_ps(nan, e, x);
}

/* sm_row_exact_f32 16 lanes wide, tails through masked loads and stores
 * instead of scalar loops and a buffer: the same maximum (a larger element
 * replaces it, NaN never does), the same lanes (element j into lane j % 16,
 * lanes added in order), the same bits; about 1.5x faster on the short rows
 * of windowed attention (49). */
__attribute__((target("avx512f"))) static void sm_row_avx512_f32(const float *x, float *y,
                                                                  int64_t n)
{
    __m512 mv = _mm512_set1_ps(-INFINITY);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 a = _mm512_loadu_ps(x + j);
        mv = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, mv, _CMP_GT_OQ), mv, a);
    }
    __mmask16 tail = (__mmask16)((1u << (n - j)) - 1u);
    if (tail) {
        __m512 a = _mm512_mask_loadu_ps(mv, tail, x + j);
        mv = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, mv, _CMP_GT_OQ), mv, a);
    }
    float lanes[16];
    _mm512_storeu_ps(lanes, mv);
    float m = -INFINITY;
    for (int l = 0; l < 16; l++)
        m = lanes[l] > m ? lanes[l] : m;
    __m512 mm = _mm512_set1_ps(m), acc = _mm512_setzero_ps();
    for (j = 0; j + 16 <= n; j += 16) {
        __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + j), mm));
        _mm512_storeu_ps(y + j, e);
        acc = _mm512_add_ps(acc, e);
    }
    if (tail) {
        /* lanes past the row: exp(0) computed, then 0 added, as the
         * buffered tail does */
        __m512 e = exp16(_mm512_maskz_sub_ps(tail, _mm512_maskz_loadu_ps(tail, x + j), mm));
        _mm512_mask_storeu_ps(y + j, tail, e);
        acc = _mm512_add_ps(acc, _mm512_maskz_mov_ps(tail, e));
    }
    _mm512_storeu_ps(lanes, acc);
    float s = 0.0f;
    for (int l = 0; l < 16; l++)
        s += lanes[l];
    __m512 inv = _mm512_set1_ps(1.0f / s);
    for (j = 0; j + 16 <= n; j += 16)
        _mm512_storeu_ps(y + j, _mm512_mul_ps(_mm512_loadu_ps(y + j), inv));
    if (tail)
        _mm512_mask_storeu_ps(y + j, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, y + j), inv));
}


#define AVX2_FN __attribute__((target("avx2,fma")))
#define AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

/* exp_v's algorithm on 8 lanes with multiply-adds fused: the same range
 * reduction, polynomial and saturation (below -87.34 exactly 0, NaN stays
 * NaN), within an ulp of exp_v but not its bits. */
AVX2_INLINE __m256 exp8_fma(__m256 x)
{
    const __m256 hi = _mm256_set1_ps(88.3762626647949f), lo = _mm256_set1_ps(-87.3365447504f);
    __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    __m256 xc = _mm256_min_ps(x, hi); /* NaN: hi, replaced below */
    xc = _mm256_max_ps(xc, lo);
    __m256 fx = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fmadd_ps(fx, _mm256_set1_ps(2.12194440e-4f), r);
    __m256 z = _mm256_mul_ps(r, r);
    __m256 p = _mm256_fmadd_ps(r, _mm256_set1_ps(1.9875691500e-4f), _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_add_ps(_mm256_fmadd_ps(p, z, r), _mm256_set1_ps(1.0f));
    __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
    __m256 e = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
    e = _mm256_andnot_ps(under, e);
    return _mm256_blendv_ps(e, x, nan);
}

/* Lanes [0, k) of 8 set (k in 0..8), for masked loads and stores. */
AVX2_INLINE __m256i mask8(int64_t k)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* One float32 row on AVX2 + FMA: 16 lanes in two registers, the tail
 * through masked loads and stores. The maximum as the other paths take it
 * (a NaN never replaces it; the NaN then poisons the sum), exp fused. */
AVX2_FN static void sm_row_avx2_f32(const float *x, float *y, int64_t n)
{
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0;
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        m0 = _mm256_max_ps(_mm256_loadu_ps(x + j), m0); /* the second operand on NaN */
        m1 = _mm256_max_ps(_mm256_loadu_ps(x + j + 8), m1);
    }
    for (; j + 8 <= n; j += 8)
        m0 = _mm256_max_ps(_mm256_loadu_ps(x + j), m0);
    __m256i tail = mask8(n - j);
    if (j < n)
        m1 = _mm256_blendv_ps(m1, _mm256_max_ps(_mm256_maskload_ps(x + j, tail), m1),
                              _mm256_castsi256_ps(tail));
    m0 = _mm256_max_ps(m1, m0);
    float lanes[8];
    _mm256_storeu_ps(lanes, m0);
    float m = -INFINITY;
    for (int l = 0; l < 8; l++)
        m = lanes[l] > m ? lanes[l] : m;
    __m256 mm = _mm256_set1_ps(m), a0 = _mm256_setzero_ps(), a1 = a0;
    for (j = 0; j + 16 <= n; j += 16) {
        __m256 e0 = exp8_fma(_mm256_sub_ps(_mm256_loadu_ps(x + j), mm));
        __m256 e1 = exp8_fma(_mm256_sub_ps(_mm256_loadu_ps(x + j + 8), mm));
        _mm256_storeu_ps(y + j, e0);
        _mm256_storeu_ps(y + j + 8, e1);
        a0 = _mm256_add_ps(a0, e0);
        a1 = _mm256_add_ps(a1, e1);
    }
    for (; j + 8 <= n; j += 8) {
        __m256 e = exp8_fma(_mm256_sub_ps(_mm256_loadu_ps(x + j), mm));
        _mm256_storeu_ps(y + j, e);
        a0 = _mm256_add_ps(a0, e);
    }
    if (j < n) {
        __m256 e = exp8_fma(_mm256_sub_ps(_mm256_maskload_ps(x + j, tail), mm));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(tail)); /* lanes past the row add 0 */
        _mm256_maskstore_ps(y + j, tail, e);
        a1 = _mm256_add_ps(a1, e);
    }
    _mm256_storeu_ps(lanes, _mm256_add_ps(a0, a1));
    float s = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) +
              ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
    __m256 inv = _mm256_set1_ps(1.0f / s);
    for (j = 0; j + 8 <= n; j += 8)
        _mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_loadu_ps(y + j), inv));
    if (j < n)
        _mm256_maskstore_ps(y + j, tail, _mm256_mul_ps(_mm256_maskload_ps(y + j, tail), inv));
}
#endif

/* The 16-wide row where the CPU has AVX-512, the AVX2 + FMA one where it
 * has that (or CGE_CPU_ISA caps it there). */
static void sm_row_fast_f32(const float *x, float *y, int64_t n)
{
#ifdef SM_AVX512
    if (cge__cpu_has(CGE_CPU_AVX512F)) {
        sm_row_avx512_f32(x, y, n);
        return;
    }
    if (cge__cpu_has(CGE_CPU_AVX2 | CGE_CPU_FMA)) {
        sm_row_avx2_f32(x, y, n);
        return;
    }
#endif
    sm_row_exact_f32(x, y, n);
}

#define FAST_F32(x, y, n) (sm_row_fast_f32((x), (y), (n)), 1)
#define FAST_NONE(x, y, n) 0

SM_KERNELS(f32, float, float, LD_SELF, ST_SELF, exp_block_f32, logf, 1, FAST_F32)
SM_KERNELS(f64, double, double, LD_SELF, ST_SELF, exp_block_f64, log, 1, FAST_NONE)
SM_KERNELS(f16, uint16_t, float, LD_F16, ST_F16, exp_block_f32, logf, 0, FAST_NONE)
SM_KERNELS(bf16, uint16_t, float, LD_BF16, ST_BF16, exp_block_f32, logf, 0, FAST_NONE)

static cge_kernel_fn sm_fn(cge_dtype t)
{
    switch (t) {
    case CGE_F32: return sm_fn_f32;
    case CGE_F64: return sm_fn_f64;
    case CGE_F16: return sm_fn_f16;
    case CGE_BF16: return sm_fn_bf16;
    default: return NULL;
    }
}

static cge_status sm_launch_common(const cge_kernel_ctx *ctx, cge_stream *stream, int log)
{
    if (ctx->num_inputs < 1 || ctx->num_outputs < 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "needs one input and one output");
    const cge_tensor *x = &ctx->inputs[0];
    cge_tensor *y = &ctx->outputs[0];
    cge_kernel_fn fn = sm_fn(x->dtype);
    if (!fn || y->dtype != x->dtype)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "unsupported dtypes %s -> %s",
                                cge_dtype_name(x->dtype), cge_dtype_name(y->dtype));
    int32_t axis;
    if (x->shape.rank < 1 ||
        !cge_axis_normalize(cge_attrs_get_int(ctx->attrs, "axis", -1), x->shape.rank, false,
                            &axis))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "axis out of range for a rank-%d input",
                                (int)x->shape.rank);
    if (!cge_shape_equal(&x->shape, &y->shape))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output shape differs from input shape");
    int64_t numel = cge_shape_numel(&x->shape);
    if (numel == 0)
        return CGE_OK;
    if (!x->data || !y->data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    sm_args p = {.x = x->data, .y = y->data, .outer = 1, .dim = x->shape.dims[axis],
                 .inner = 1, .log_out = log};
    for (int32_t d = 0; d < axis; d++)
        p.outer *= x->shape.dims[d];
    for (int32_t d = axis + 1; d < x->shape.rank; d++)
        p.inner *= x->shape.dims[d];
    int64_t items = p.outer * ((p.inner + SM_CHUNK - 1) / SM_CHUNK);
    int64_t per_item = p.dim * (p.inner < SM_CHUNK ? p.inner : SM_CHUNK);
    int64_t min_items = per_item >= 8192 ? 1 : 8192 / per_item;
    return cge_launch(stream, fn, cge__blocks_for(items, min_items, ctx->num_threads), &p,
                      sizeof p);
}

static cge_status softmax_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return sm_launch_common(ctx, stream, 0);
}

static cge_status log_softmax_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return sm_launch_common(ctx, stream, 1);
}

static const cge_arg_def sm_inputs[] = {{"input", 0, SM_DTYPES, "rank >= 1"}};
static const cge_arg_def sm_outputs[] = {{"output", 0, SM_DTYPES, "same shape as input"}};
static const cge_attr_def sm_attrs[] = {
    {"axis", CGE_ATTR_INT, false, -1, 0.0f, NULL, "the axis normalised over; negative counts "
                                                  "from the back"},
};
static const cge_kernel_def softmax_kernels[] = {
    {.engine = "cpu", .dtypes = SM_DTYPES, .launch = softmax_launch, .inplace_input = 0},
};
static const cge_kernel_def log_softmax_kernels[] = {
    {.engine = "cpu", .dtypes = SM_DTYPES, .launch = log_softmax_launch, .inplace_input = 0},
};

static const cge_op_def softmax_ops[] = {
    {
        .name = "Softmax",
        .domain = CGE_DOMAIN_DEFAULT,
        .since_version = 13,
        .inputs = sm_inputs,
        .num_inputs = 1,
        .outputs = sm_outputs,
        .num_outputs = 1,
        .attrs = sm_attrs,
        .num_attrs = 1,
        .infer = sm_infer,
        .kernels = softmax_kernels,
        .num_kernels = 1,
        .doc = "exp(x - max) / sum(exp(x - max)) along `axis`.",
    },
    {
        .name = "LogSoftmax",
        .domain = CGE_DOMAIN_DEFAULT,
        .since_version = 13,
        .inputs = sm_inputs,
        .num_inputs = 1,
        .outputs = sm_outputs,
        .num_outputs = 1,
        .attrs = sm_attrs,
        .num_attrs = 1,
        .infer = sm_infer,
        .kernels = log_softmax_kernels,
        .num_kernels = 1,
        .doc = "x - max - log(sum(exp(x - max))) along `axis`.",
    },
};

const cge_op_def *cge__ops_softmax(int32_t *count)
{
    *count = (int32_t)(sizeof softmax_ops / sizeof softmax_ops[0]);
    return softmax_ops;
}
