/* com.microsoft MatMulNBits (ONNX Runtime's contrib operator): Y = A B^T
 * (+ bias) with B [N, K] quantized to 4 or 8 bits in blocks along K, each
 * block with a scale and a zero point, dequantised in registers inside the
 * product: float weights never exist in memory. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu_isa.h"
#include "ops/builtin.h"
#include "ops/gemm_kernel.h"
#include "ops/kernel_util.h"

/* The layout is ONNX Runtime's, so files are interchangeable:
 *   B            uint8 [N, n_blocks, blob], blob = block_size * bits / 8,
 *                n_blocks = ceil(K / block_size); codes packed low bits
 *                first along K (4 bits: element 2i in the low nibble of
 *                byte i, 2i+1 in the high one); the last block is padded.
 *   scales       float32 [N * n_blocks] (or [N, n_blocks])
 *   zero_points  optional: uint8 packed as B's codes, per column
 *                ceil(n_blocks * bits / 8) bytes ([N * that]); or float32
 *                [N * n_blocks]. Absent: 2^(bits-1) (8 or 128).
 *   g_idx        optional int32 [K]: must be k / block_size (the act-order
 *                permutations it could describe are refused)
 *   bias         optional float32 [N]
 * W(n, k) = (code(n, k) - zp(n, k / bs)) * scale(n, k / bs).
 *
 * The kernel reads each weight byte once per group of rows: for a decode
 * step (M = 1, memory bound) that is the whole point, bytes read per token
 * are bits/32 of float32's. Zero points come out of the inner loop:
 *   sum_k (q - z) s a = s (sum_k q a - z sum_k a),
 * with sum_k a per block computed once per run. A is repacked once per run
 * (padded to whole blocks; for 4 bits each 32-element chunk as 16 even then
 * 16 odd elements, the order in which nibbles unpack). accuracy_level is
 * accepted and ignored: products are float32. */

typedef struct nb_args {
    int64_t M, N, K, bs, nb, blob, kp;   /* kp = nb * bs */
    int bits;
    const float *a;
    const uint8_t *b;
    const float *scales;
    const uint8_t *zp_u8;
    const float *zp_f32;
    const float *bias;
    float *y;
    float *ap;          /* [M][kp] repacked A */
    float *asum;        /* [M][nb] */
    float *sz;          /* [N][nb]: scale * zero point */
    float *apt;         /* panel path: A'^T packed as the GEMM's B */
    float *wbuf;        /* panel path: per block, NB_WROWS rows of W and of Y^T */
    int64_t panel_blocks;
    int64_t col_blocks; /* column groups the blocks split N into */
    int fast;           /* the vector inner loops apply (A' in their order) */
    int wide;           /* ... on AVX-512; else AVX2 + FMA */
} nb_args;

/* ---- meta ------------------------------------------------------------------------ */

static bool nb_attrs(const cge_attrs *at, int64_t *K, int64_t *N, int *bits, int64_t *bs)
{
    *K = cge_attrs_get_int(at, "K", -1);
    *N = cge_attrs_get_int(at, "N", -1);
    *bits = (int)cge_attrs_get_int(at, "bits", 4);
    *bs = cge_attrs_get_int(at, "block_size", 0);
    return *K > 0 && *N > 0 && (*bits == 4 || *bits == 8) && *bs >= 16 && (*bs & (*bs - 1)) == 0;
}

static cge_status nb_infer(cge_infer_ctx *ctx)
{
    int64_t K, N, bs;
    int bits;
    if (!nb_attrs(ctx->attrs, &K, &N, &bits, &bs))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "K and N must be positive, bits 4 or 8 (2-bit codes are not "
                              "supported) and block_size a power of two >= 16");
    const cge_tensor_desc *A = &ctx->inputs[0], *B = &ctx->inputs[1], *S = &ctx->inputs[2];
    if (A->dtype != CGE_F32)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "A is %s; only float32 is supported",
                              cge_dtype_name(A->dtype));
    if (A->shape.rank < 1 || (A->shape.dims[A->shape.rank - 1] >= 0 &&
                              A->shape.dims[A->shape.rank - 1] != K))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "A's last dim must be K = %lld", (long long)K);
    int64_t nb = (K + bs - 1) / bs, blob = bs * bits / 8;
    if (B->dtype != CGE_U8 || (cge_shape_is_static(&B->shape) &&
                               cge_shape_numel(&B->shape) != N * nb * blob))
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "B must be uint8 [N, n_blocks, blob] = [%lld, %lld, %lld]",
                              (long long)N, (long long)nb, (long long)blob);
    if (S->dtype != CGE_F32 || (cge_shape_is_static(&S->shape) && cge_shape_numel(&S->shape) != N * nb))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "scales must be float32 with N * n_blocks = %lld "
                              "elements", (long long)(N * nb));
    if (cge__meta_has_input(ctx, 3)) {
        const cge_tensor_desc *Z = &ctx->inputs[3];
        int64_t want = Z->dtype == CGE_U8 ? N * ((nb * bits + 7) / 8) : N * nb;
        if ((Z->dtype != CGE_U8 && Z->dtype != CGE_F32) ||
            (cge_shape_is_static(&Z->shape) && cge_shape_numel(&Z->shape) != want))
            return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                  "zero_points must be uint8 (packed: %lld bytes) or float32 "
                                  "(%lld elements)", (long long)(N * ((nb * bits + 7) / 8)),
                                  (long long)(N * nb));
    }
    if (cge__meta_has_input(ctx, 4)) {
        const cge_tensor_desc *G = &ctx->inputs[4];
        if (G->dtype != CGE_I32 || (cge_shape_is_static(&G->shape) && cge_shape_numel(&G->shape) != K))
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "g_idx must be int32 [K]");
        const int32_t *g = cge__meta_input_value(ctx, 4);
        for (int64_t k = 0; g && k < K; k++)
            if (g[k] != (int32_t)(k / bs))
                return cge_meta_error(ctx, CGE_ERR_UNSUPPORTED,
                                      "g_idx[%lld] = %d: only g_idx = k / block_size is supported "
                                      "(act-order permutations are not)", (long long)k, (int)g[k]);
    }
    if (cge__meta_has_input(ctx, 5)) {
        const cge_tensor_desc *Bi = &ctx->inputs[5];
        if (Bi->dtype != CGE_F32 || (cge_shape_is_static(&Bi->shape) && cge_shape_numel(&Bi->shape) != N))
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "bias must be float32 [N]");
    }
    ctx->outputs[0].dtype = CGE_F32;
    ctx->outputs[0].shape = A->shape;
    ctx->outputs[0].shape.dims[A->shape.rank - 1] = N;
    return CGE_OK;
}

/* ---- kernel ------------------------------------------------------------------------ */

static float zp_at(const nb_args *a, int64_t n, int64_t blk)
{
    if (a->zp_f32)
        return a->zp_f32[n * a->nb + blk];
    if (!a->zp_u8)
        return (float)(1 << (a->bits - 1));
    if (a->bits == 8)
        return (float)a->zp_u8[n * a->nb + blk];
    uint8_t z = a->zp_u8[n * ((a->nb + 1) / 2) + blk / 2];
    return (float)((blk & 1) ? z >> 4 : z & 15);
}

/* Rows [m0, m1) of A into ap (zero-padded to kp, 4-bit chunks deinterleaved)
 * and their per-block sums (of the real elements; padding adds nothing). */
static void nb_pack_fn(int64_t blk, int64_t nblk, void *p)
{
    const nb_args *a = p;
    int64_t m0, m1;
    cge__block_range(a->M, blk, nblk, &m0, &m1);
    for (int64_t m = m0; m < m1; m++) {
        const float *src = a->a + m * a->K;
        float *dst = a->ap + m * a->kp;
        if (a->bits == 4 && a->fast) {
            for (int64_t c = 0; c < a->kp; c += 32)
                for (int64_t j = 0; j < 16; j++) {
                    int64_t e = c + 2 * j, o = e + 1;
                    dst[c + j] = e < a->K ? src[e] : 0.0f;
                    dst[c + 16 + j] = o < a->K ? src[o] : 0.0f;
                }
        } else {
            for (int64_t k = 0; k < a->kp; k++)
                dst[k] = k < a->K ? src[k] : 0.0f;
        }
        for (int64_t b = 0; b < a->nb; b++) {
            double s = 0;
            for (int64_t k = b * a->bs; k < (b + 1) * a->bs && k < a->K; k++)
                s += src[k];
            a->asum[m * a->nb + b] = (float)s;
        }
    }
}

/* The portable path: any block size, any CPU. A is in plain order here. */
static void nb_ref_cols(const nb_args *a, int64_t m0, int64_t m1, int64_t n0, int64_t n1)
{
    for (int64_t m = m0; m < m1; m++) {
        const float *ap = a->ap + m * a->kp;
        for (int64_t n = n0; n < n1; n++) {
            const uint8_t *bn = a->b + n * a->nb * a->blob;
            float acc = 0.0f;
            for (int64_t blk = 0; blk < a->nb; blk++) {
                const uint8_t *q = bn + blk * a->blob;
                const float *x = ap + blk * a->bs;
                float s = 0.0f;
                if (a->bits == 8) {
                    for (int64_t k = 0; k < a->bs; k++)
                        s += (float)q[k] * x[k];
                } else {
                    for (int64_t k = 0; k < a->bs / 2; k++)
                        s += (float)(q[k] & 15) * x[2 * k] + (float)(q[k] >> 4) * x[2 * k + 1];
                }
                acc += a->scales[n * a->nb + blk] * s - a->sz[n * a->nb + blk] * a->asum[m * a->nb + blk];
            }
            a->y[m * a->N + n] = acc + (a->bias ? a->bias[n] : 0.0f);
        }
    }
}

/* sz for columns of this block: once per run, O(N * n_blocks), so that no
 * zero point is unpacked in the products' loops. */
static void nb_sz_fn(int64_t blk, int64_t nblk, void *p)
{
    const nb_args *a = p;
    int64_t n0, n1;
    cge__block_range(a->N, blk, nblk, &n0, &n1);
    for (int64_t n = n0; n < n1; n++)
        for (int64_t b = 0; b < a->nb; b++)
            a->sz[n * a->nb + b] = a->scales[n * a->nb + b] * zp_at(a, n, b);
}

#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
/* Zero points out of the inner loop: sum over blocks of s * z * sum(a). */
static float nb_corr(const nb_args *a, int64_t m, int64_t n)
{
    float c = 0.0f;
    const float *sz = a->sz + n * a->nb, *as = a->asum + m * a->nb;
    for (int64_t blk = 0; blk < a->nb; blk++)
        c += sz[blk] * as[blk];
    return c;
}

#include <immintrin.h>
#define NB_HAVE_AVX512 1
#define NB_TARGET __attribute__((target("avx512f,avx512bw")))

/* One step is 32 elements of K: 16 code bytes (4 bits) or 32 (8 bits),
 * unpacked into w0 (the elements A' holds at k .. k+15) and w1 (k+16 ..
 * k+31), already scaled (w = q * s: the zero point is out of the loop). */
#define NB_DEQ4(q, vs, w0, w1)                                                               \
    do {                                                                                     \
        __m512i x_ = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(q)));            \
        w0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_and_si512(x_, lo4)), vs);               \
        w1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(x_, 4)), vs);                \
    } while (0)
#define NB_DEQ8(q, vs, w0, w1)                                                               \
    do {                                                                                     \
        w0 = _mm512_mul_ps(                                                                  \
            _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(q)))), \
            vs);                                                                             \
        w1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(                          \
                               _mm_loadu_si128((const __m128i *)((q) + 16)))),               \
                           vs);                                                              \
    } while (0)

static NB_TARGET float nb_result(const nb_args *a, int64_t m, int64_t n, __m512 s0, __m512 s1)
{
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)) - nb_corr(a, m, n) +
           (a->bias ? a->bias[n] : 0.0f);
}

/* Decode: one row by two columns (n1 may equal n0 for an odd last column;
 * only n0 is written then), four independent accumulators. */
#define NB_1X2(NAME, DEQ, STEP)                                                              \
    static NB_TARGET void NAME(const nb_args *a, int64_t m, int64_t n0, int64_t n1)          \
    {                                                                                        \
        const __m512i lo4 = _mm512_set1_epi32(15);                                           \
        (void)lo4;                                                                           \
        __m512 a00 = _mm512_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, w00, w01, w10, w11; \
        const uint8_t *q0 = a->b + n0 * a->nb * a->blob, *q1 = a->b + n1 * a->nb * a->blob;  \
        const float *ap = a->ap + m * a->kp;                                                 \
        for (int64_t blk = 0; blk < a->nb; blk++) {                                          \
            __m512 vs0 = _mm512_set1_ps(a->scales[n0 * a->nb + blk]);                        \
            __m512 vs1 = _mm512_set1_ps(a->scales[n1 * a->nb + blk]);                        \
            for (int64_t k = blk * a->bs; k < (blk + 1) * a->bs; k += 32) {                  \
                DEQ(q0, vs0, w00, w01);                                                      \
                DEQ(q1, vs1, w10, w11);                                                      \
                __m512 x0 = _mm512_loadu_ps(ap + k), x1 = _mm512_loadu_ps(ap + k + 16);      \
                a00 = _mm512_fmadd_ps(w00, x0, a00);                                         \
                a01 = _mm512_fmadd_ps(w01, x1, a01);                                         \
                a10 = _mm512_fmadd_ps(w10, x0, a10);                                         \
                a11 = _mm512_fmadd_ps(w11, x1, a11);                                         \
                q0 += STEP, q1 += STEP;                                                      \
            }                                                                                \
        }                                                                                    \
        a->y[m * a->N + n0] = nb_result(a, m, n0, a00, a01);                                    \
        if (n1 != n0)                                                                        \
            a->y[m * a->N + n1] = nb_result(a, m, n1, a10, a11);                                \
    }

/* Prefill: four rows by one column, the codes unpacked once for all four. */
#define NB_4X1(NAME, DEQ, STEP)                                                              \
    static NB_TARGET void NAME(const nb_args *a, int64_t m, int64_t n)                       \
    {                                                                                        \
        const __m512i lo4 = _mm512_set1_epi32(15);                                           \
        (void)lo4;                                                                           \
        __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00,        \
               c21 = c00, c30 = c00, c31 = c00, w0, w1;                                      \
        const uint8_t *q = a->b + n * a->nb * a->blob;                                       \
        const float *p0 = a->ap + m * a->kp, *p1 = p0 + a->kp, *p2 = p1 + a->kp,             \
                    *p3 = p2 + a->kp;                                                        \
        for (int64_t blk = 0; blk < a->nb; blk++) {                                          \
            __m512 vs = _mm512_set1_ps(a->scales[n * a->nb + blk]);                          \
            for (int64_t k = blk * a->bs; k < (blk + 1) * a->bs; k += 32) {                  \
                DEQ(q, vs, w0, w1);                                                          \
                c00 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(p0 + k), c00);                     \
                c01 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(p0 + k + 16), c01);                \
                c10 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(p1 + k), c10);                     \
                c11 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(p1 + k + 16), c11);                \
                c20 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(p2 + k), c20);                     \
                c21 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(p2 + k + 16), c21);                \
                c30 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(p3 + k), c30);                     \
                c31 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(p3 + k + 16), c31);                \
                q += STEP;                                                                   \
            }                                                                                \
        }                                                                                    \
        a->y[m * a->N + n] = nb_result(a, m, n, c00, c01);                                      \
        a->y[(m + 1) * a->N + n] = nb_result(a, m + 1, n, c10, c11);                            \
        a->y[(m + 2) * a->N + n] = nb_result(a, m + 2, n, c20, c21);                            \
        a->y[(m + 3) * a->N + n] = nb_result(a, m + 3, n, c30, c31);                            \
    }

NB_1X2(nb_1x2_b4, NB_DEQ4, 16)
NB_1X2(nb_1x2_b8, NB_DEQ8, 32)
NB_4X1(nb_4x1_b4, NB_DEQ4, 16)
NB_4X1(nb_4x1_b8, NB_DEQ8, 32)

static NB_TARGET void nb_avx512_cols(const nb_args *a, int64_t m0, int64_t m1, int64_t n0,
                                     int64_t n1)
{
    int64_t m = m0;
    for (; m + 4 <= m1; m += 4)
        for (int64_t n = n0; n < n1; n++)
            (a->bits == 4 ? nb_4x1_b4 : nb_4x1_b8)(a, m, n);
    for (; m < m1; m++)
        for (int64_t n = n0; n < n1; n += 2)
            (a->bits == 4 ? nb_1x2_b4 : nb_1x2_b8)(a, m, n, n + 1 < n1 ? n + 1 : n);
}

/* The same on AVX2 + FMA: a 32-element step is four 8-lane vectors, w0..w3
 * holding A' positions k .. k+7, k+8 .. k+15, k+16 .. k+23, k+24 .. k+31
 * (4 bits: codes 0-7 and 8-15, low nibbles then high nibbles). The sums go
 * in another order than AVX-512's, so the results differ in the last bits. */
#define NB2_TARGET __attribute__((target("avx2,fma")))
#define NB2_DEQ4(q, vs, w0, w1, w2, w3)                                                      \
    do {                                                                                     \
        __m256i x_ = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(q)));            \
        __m256i y_ = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)((q) + 8)));      \
        w0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_and_si256(x_, lo4)), vs);               \
        w1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_and_si256(y_, lo4)), vs);               \
        w2 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(x_, 4)), vs);                \
        w3 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(y_, 4)), vs);                \
    } while (0)
#define NB2_U8(q) _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(q))))
#define NB2_DEQ8(q, vs, w0, w1, w2, w3)                                                      \
    do {                                                                                     \
        w0 = _mm256_mul_ps(NB2_U8(q), vs);                                                   \
        w1 = _mm256_mul_ps(NB2_U8((q) + 8), vs);                                             \
        w2 = _mm256_mul_ps(NB2_U8((q) + 16), vs);                                            \
        w3 = _mm256_mul_ps(NB2_U8((q) + 24), vs);                                            \
    } while (0)

static NB2_TARGET float nb2_result(const nb_args *a, int64_t m, int64_t n, __m256 s0, __m256 s1)
{
    __m256 v = _mm256_add_ps(s0, s1);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h) - nb_corr(a, m, n) + (a->bias ? a->bias[n] : 0.0f);
}

/* Decode: one row by two columns, two accumulators per column. */
#define NB2_1X2(NAME, DEQ, STEP)                                                             \
    static NB2_TARGET void NAME(const nb_args *a, int64_t m, int64_t n0, int64_t n1)         \
    {                                                                                        \
        const __m256i lo4 = _mm256_set1_epi32(15);                                           \
        (void)lo4;                                                                           \
        __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00;                   \
        __m256 u0, u1, u2, u3, v0, v1, v2, v3;                                               \
        const uint8_t *q0 = a->b + n0 * a->nb * a->blob, *q1 = a->b + n1 * a->nb * a->blob;  \
        const float *ap = a->ap + m * a->kp;                                                 \
        for (int64_t blk = 0; blk < a->nb; blk++) {                                          \
            __m256 vs0 = _mm256_set1_ps(a->scales[n0 * a->nb + blk]);                        \
            __m256 vs1 = _mm256_set1_ps(a->scales[n1 * a->nb + blk]);                        \
            for (int64_t k = blk * a->bs; k < (blk + 1) * a->bs; k += 32) {                  \
                DEQ(q0, vs0, u0, u1, u2, u3);                                                \
                DEQ(q1, vs1, v0, v1, v2, v3);                                                \
                __m256 x0 = _mm256_loadu_ps(ap + k), x1 = _mm256_loadu_ps(ap + k + 8);       \
                __m256 x2 = _mm256_loadu_ps(ap + k + 16), x3 = _mm256_loadu_ps(ap + k + 24); \
                a00 = _mm256_fmadd_ps(u0, x0, a00);                                          \
                a01 = _mm256_fmadd_ps(u1, x1, a01);                                          \
                a10 = _mm256_fmadd_ps(v0, x0, a10);                                          \
                a11 = _mm256_fmadd_ps(v1, x1, a11);                                          \
                a00 = _mm256_fmadd_ps(u2, x2, a00);                                          \
                a01 = _mm256_fmadd_ps(u3, x3, a01);                                          \
                a10 = _mm256_fmadd_ps(v2, x2, a10);                                          \
                a11 = _mm256_fmadd_ps(v3, x3, a11);                                          \
                q0 += STEP, q1 += STEP;                                                      \
            }                                                                                \
        }                                                                                    \
        a->y[m * a->N + n0] = nb2_result(a, m, n0, a00, a01);                                \
        if (n1 != n0)                                                                        \
            a->y[m * a->N + n1] = nb2_result(a, m, n1, a10, a11);                            \
    }

/* Prefill rows below NB_PANEL_ROWS: two rows by one column. */
#define NB2_2X1(NAME, DEQ, STEP)                                                             \
    static NB2_TARGET void NAME(const nb_args *a, int64_t m, int64_t n)                      \
    {                                                                                        \
        const __m256i lo4 = _mm256_set1_epi32(15);                                           \
        (void)lo4;                                                                           \
        __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, w0, w1, w2, w3;   \
        const uint8_t *q = a->b + n * a->nb * a->blob;                                       \
        const float *p0 = a->ap + m * a->kp, *p1 = p0 + a->kp;                               \
        for (int64_t blk = 0; blk < a->nb; blk++) {                                          \
            __m256 vs = _mm256_set1_ps(a->scales[n * a->nb + blk]);                          \
            for (int64_t k = blk * a->bs; k < (blk + 1) * a->bs; k += 32) {                  \
                DEQ(q, vs, w0, w1, w2, w3);                                                  \
                c00 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(p0 + k), c00);                     \
                c01 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(p0 + k + 8), c01);                 \
                c10 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(p1 + k), c10);                     \
                c11 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(p1 + k + 8), c11);                 \
                c00 = _mm256_fmadd_ps(w2, _mm256_loadu_ps(p0 + k + 16), c00);                \
                c01 = _mm256_fmadd_ps(w3, _mm256_loadu_ps(p0 + k + 24), c01);                \
                c10 = _mm256_fmadd_ps(w2, _mm256_loadu_ps(p1 + k + 16), c10);                \
                c11 = _mm256_fmadd_ps(w3, _mm256_loadu_ps(p1 + k + 24), c11);                \
                q += STEP;                                                                   \
            }                                                                                \
        }                                                                                    \
        a->y[m * a->N + n] = nb2_result(a, m, n, c00, c01);                                  \
        a->y[(m + 1) * a->N + n] = nb2_result(a, m + 1, n, c10, c11);                        \
    }

NB2_1X2(nb2_1x2_b4, NB2_DEQ4, 16)
NB2_1X2(nb2_1x2_b8, NB2_DEQ8, 32)
NB2_2X1(nb2_2x1_b4, NB2_DEQ4, 16)
NB2_2X1(nb2_2x1_b8, NB2_DEQ8, 32)

static NB2_TARGET void nb_avx2_cols(const nb_args *a, int64_t m0, int64_t m1, int64_t n0,
                                    int64_t n1)
{
    int64_t m = m0;
    for (; m + 2 <= m1; m += 2)
        for (int64_t n = n0; n < n1; n++)
            (a->bits == 4 ? nb2_2x1_b4 : nb2_2x1_b8)(a, m, n);
    for (; m < m1; m++)
        for (int64_t n = n0; n < n1; n += 2)
            (a->bits == 4 ? nb2_1x2_b4 : nb2_1x2_b8)(a, m, n, n + 1 < n1 ? n + 1 : n);
}

/* Prefill (NB_PANEL_ROWS rows or more): Y^T = W A^T on cge's float32 GEMM,
 * W dequantised NB_WROWS rows (columns of Y) at a time into a block's own
 * buffer — L2-sized, never the whole weights — in the same k order as A'
 * (for 4 bits, nibble order: a dot product does not care, as long as both
 * sides agree); the zero points go into those rows (w = q s - z s). A'^T is
 * packed once per run as the GEMM's B; the block's Y^T tile is written back
 * transposed, with the bias. */
#define NB_PANEL_ROWS 16
#define NB_WROWS 48

static NB_TARGET void nb_dequant_rows(const nb_args *a, int64_t n0, int64_t n1, float *w)
{
    const __m512i lo4 = _mm512_set1_epi32(15);
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *q = a->b + n * a->nb * a->blob;
        float *row = w + (n - n0) * a->kp;
        for (int64_t blk = 0; blk < a->nb; blk++) {
            __m512 vs = _mm512_set1_ps(a->scales[n * a->nb + blk]);
            __m512 vz = _mm512_set1_ps(a->sz[n * a->nb + blk]);
            for (int64_t k = blk * a->bs; k < (blk + 1) * a->bs; k += 32) {
                __m512i x0, x1;
                if (a->bits == 4) {
                    __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)q));
                    x0 = _mm512_and_si512(x, lo4);
                    x1 = _mm512_srli_epi32(x, 4);
                    q += 16;
                } else {
                    x0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)q));
                    x1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(q + 16)));
                    q += 32;
                }
                _mm512_storeu_ps(row + k, _mm512_fmsub_ps(_mm512_cvtepi32_ps(x0), vs, vz));
                _mm512_storeu_ps(row + k + 16, _mm512_fmsub_ps(_mm512_cvtepi32_ps(x1), vs, vz));
            }
        }
    }
}

static NB2_TARGET void nb_dequant_rows_avx2(const nb_args *a, int64_t n0, int64_t n1, float *w)
{
    const __m256i lo4 = _mm256_set1_epi32(15);
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *q = a->b + n * a->nb * a->blob;
        float *row = w + (n - n0) * a->kp;
        for (int64_t blk = 0; blk < a->nb; blk++) {
            __m256 vs = _mm256_set1_ps(a->scales[n * a->nb + blk]);
            __m256 vz = _mm256_set1_ps(a->sz[n * a->nb + blk]);
            for (int64_t k = blk * a->bs; k < (blk + 1) * a->bs; k += 32) {
                __m256i x[4];
                if (a->bits == 4) {
                    __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)q));
                    __m256i hi = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(q + 8)));
                    x[0] = _mm256_and_si256(lo, lo4);
                    x[1] = _mm256_and_si256(hi, lo4);
                    x[2] = _mm256_srli_epi32(lo, 4);
                    x[3] = _mm256_srli_epi32(hi, 4);
                    q += 16;
                } else {
                    for (int j = 0; j < 4; j++)
                        x[j] = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(q + 8 * j)));
                    q += 32;
                }
                for (int j = 0; j < 4; j++)
                    _mm256_storeu_ps(row + k + 8 * j,
                                     _mm256_fmsub_ps(_mm256_cvtepi32_ps(x[j]), vs, vz));
            }
        }
    }
}

static void nb_packt_fn(int64_t blk, int64_t nblk, void *p)
{
    const nb_args *a = p;
    int64_t panels = (a->M + CGE_GEMM_NR - 1) / CGE_GEMM_NR, q0, q1;
    cge__block_range(panels, blk, nblk, &q0, &q1);
    if (q1 > q0)
        cge__gemm_pack_b(a->ap, 1, a->kp, a->kp, a->M, q0, q1, a->apt);
}

static void nb_panel_fn(int64_t blk, int64_t nblk, void *p)
{
    const nb_args *a = p;
    int64_t groups = (a->N + NB_WROWS - 1) / NB_WROWS, g0, g1;
    cge__block_range(groups, blk, nblk, &g0, &g1);
    float *w = a->wbuf + blk * (NB_WROWS * a->kp + NB_WROWS * a->M);
    float *ct = w + NB_WROWS * a->kp;
    for (int64_t gi = g0; gi < g1; gi++) {
        int64_t n0 = gi * NB_WROWS, n1 = n0 + NB_WROWS < a->N ? n0 + NB_WROWS : a->N;
        if (a->wide)
            nb_dequant_rows(a, n0, n1, w);
        else
            nb_dequant_rows_avx2(a, n0, n1, w);
        cge__gemm_f32 g = {.M = n1 - n0, .N = a->M, .K = a->kp, .a = w, .a_rs = a->kp, .a_cs = 1,
                          .bp = a->apt, .c = ct, .ldc = a->M, .alpha = 1.0f,
                          .isa = CGE_GEMM_ISA_AUTO};
        cge__gemm_f32_tile(&g, 0, n1 - n0, 0, a->M);
        for (int64_t m = 0; m < a->M; m++)
            for (int64_t n = n0; n < n1; n++)
                a->y[m * a->N + n] = ct[(n - n0) * a->M + m] + (a->bias ? a->bias[n] : 0.0f);
    }
}

static int cpu_avx512(void)
{
    static int known = -1;
    if (known < 0) {
        __builtin_cpu_init();
        known = cge__cpu_has(CGE_CPU_AVX512F) && cge__cpu_has(CGE_CPU_AVX512BW);
    }
    return known;
}

static int cpu_avx2(void)
{
    return cge__cpu_has(CGE_CPU_AVX2 | CGE_CPU_FMA);
}
#endif

/* Work items: (row group, column group); a decode step (M = 1) splits N. */
static void nb_main_fn(int64_t blk, int64_t nblk, void *p)
{
    const nb_args *a = p;
    int64_t row_groups = (a->M + 31) / 32, w0, w1;
    cge__block_range(row_groups * a->col_blocks, blk, nblk, &w0, &w1);
    for (int64_t w = w0; w < w1; w++) {
        int64_t rg = w / a->col_blocks, cg = w % a->col_blocks, n0, n1;
        cge__block_range(a->N, cg, a->col_blocks, &n0, &n1);
        int64_t m0 = rg * 32, m1 = m0 + 32 < a->M ? m0 + 32 : a->M;
#ifdef NB_HAVE_AVX512
        if (a->fast) {
            if (a->wide)
                nb_avx512_cols(a, m0, m1, n0, n1);
            else
                nb_avx2_cols(a, m0, m1, n0, n1);
            continue;
        }
#endif
        nb_ref_cols(a, m0, m1, n0, n1);
    }
}

static bool nb_make(const cge_kernel_ctx *ctx, nb_args *a)
{
    memset(a, 0, sizeof *a);
    if (ctx->num_inputs < 3 || !nb_attrs(ctx->attrs, &a->K, &a->N, &a->bits, &a->bs))
        return false;
    const cge_shape *as = &ctx->inputs[0].shape;
    if (as->rank < 1 || as->dims[as->rank - 1] != a->K)
        return false;
    a->M = 1;
    for (int32_t d = 0; d < as->rank - 1; d++)
        a->M *= as->dims[d];
    a->nb = (a->K + a->bs - 1) / a->bs;
    a->blob = a->bs * a->bits / 8;
    a->kp = a->nb * a->bs;
#ifdef NB_HAVE_AVX512
    /* Steps of 32 elements, whole within a block. */
    a->wide = cpu_avx512();
    a->fast = (a->wide || cpu_avx2()) && a->bs % 32 == 0;
#endif
    return a->M >= 0;
}

/* A repacked, its block sums, and each column's scale * zero point per block
 * (sz: the zero points' term comes out of the products as
 * sum_blk sz[n, blk] * asum[m, blk]). */
#ifdef NB_HAVE_AVX512
static bool nb_panel(const nb_args *a) { return a->fast && a->M >= NB_PANEL_ROWS; }

static int64_t nb_panel_blocks(const nb_args *a, int threads)
{
    return cge__blocks_for((a->N + NB_WROWS - 1) / NB_WROWS, 1, threads);
}
#endif

static size_t nb_bytes(const nb_args *a, int threads)
{
    size_t n = (size_t)(a->M * (a->kp + a->nb) + a->N * a->nb + 16);
#ifdef NB_HAVE_AVX512
    if (nb_panel(a))
        n += (size_t)(cge__gemm_packed_b_floats(a->kp, a->M) + 16) +
             (size_t)nb_panel_blocks(a, threads) * (size_t)(NB_WROWS * (a->kp + a->M));
#else
    (void)threads;
#endif
    return n * sizeof(float) + 64;
}

static size_t nb_workspace(const cge_kernel_ctx *ctx)
{
    nb_args a;
    if (!nb_make(ctx, &a))
        return 0;
    return nb_bytes(&a, ctx->num_threads > 0 ? ctx->num_threads : 1);
}

/* sz made once when the plan is made, from constant scales and zero points
 * (the usual case: they are weights), shared by the graph's plans. */
typedef struct nb_state {
    const void *scales, *zp;
    float *sz;              /* a cge_kernel_shared_get block */
} nb_state;

static void nb_release(void *state)
{
    nb_state *st = state;
    if (st)
        cge_kernel_shared_release(st->sz);
    free(st);
}

static cge_status nb_sz_fill(void *dst, void *user)
{
    nb_args *a = user;
    a->sz = dst;
    nb_sz_fn(0, 1, a);
    return CGE_OK;
}

static bool nb_bind(const cge_kernel_ctx *ctx, nb_args *a)
{
    if (!nb_make(ctx, a))
        return false;
    a->a = ctx->inputs[0].data;
    a->b = ctx->inputs[1].data;
    a->scales = ctx->inputs[2].data;
    if (cge__kernel_has_input(ctx, 3)) {
        if (ctx->inputs[3].dtype == CGE_U8)
            a->zp_u8 = ctx->inputs[3].data;
        else
            a->zp_f32 = ctx->inputs[3].data;
    }
    a->bias = cge__kernel_has_input(ctx, 5) ? ctx->inputs[5].data : NULL;
    a->y = ctx->outputs[0].data;
    return true;
}

static cge_status nb_prepare(const cge_kernel_ctx *ctx, void **state)
{
    *state = NULL;
    nb_args a;
    bool zp_given = ctx->num_inputs > 3 && ctx->inputs[3].dtype != CGE_DTYPE_UNDEFINED;
    if (!nb_bind(ctx, &a) || !a.scales || (zp_given && !ctx->inputs[3].data))
        return CGE_OK; /* not known now: computed on every run */
    nb_state *st = calloc(1, sizeof *st);
    if (!st)
        return cge_kernel_error(ctx, CGE_ERR_NO_MEMORY, "out of memory");
    st->scales = a.scales;
    st->zp = a.zp_u8 ? (const void *)a.zp_u8 : (const void *)a.zp_f32;
    /* The block depends on the zero points as well as the scales it is keyed
     * by: their address (constant data the session keeps) goes in the key. */
    const void *key[2] = {st->zp, (const void *)(intptr_t)(a.bits * 65536 + a.nb)};
    cge_status s = cge_kernel_shared_get(ctx, a.scales, key, sizeof key,
                                         (size_t)(a.N * a.nb) * sizeof(float), nb_sz_fill, &a,
                                         (void **)&st->sz);
    if (s) {
        nb_release(st);
        return s;
    }
    *state = st;
    return CGE_OK;
}

static cge_status nb_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    nb_args a;
    if (!nb_bind(ctx, &a))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "A's last dim is not K");
    if (a.M == 0)
        return CGE_OK;
    int threads = ctx->num_threads > 0 ? ctx->num_threads : 1;
    /* A workspace sized for fewer threads (a model file from a smaller
     * machine) gets fewer panel blocks. */
    while (threads > 1 && nb_bytes(&a, threads) > ctx->workspace_size)
        threads--;
    size_t need = nb_bytes(&a, threads);
    if (!ctx->workspace || ctx->workspace_size < need)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                "workspace of %zu bytes is too small (%zu needed)",
                                ctx->workspace_size, need);
    const int32_t *g = cge__kernel_has_input(ctx, 4) ? ctx->inputs[4].data : NULL;
    for (int64_t k = 0; g && k < a.K; k++)
        if (g[k] != (int32_t)(k / a.bs))
            return cge_kernel_error(ctx, CGE_ERR_UNSUPPORTED,
                                    "g_idx[%lld] = %d: only g_idx = k / block_size is supported",
                                    (long long)k, (int)g[k]);
    a.ap = (float *)(((uintptr_t)ctx->workspace + 63) & ~(uintptr_t)63);
    a.asum = a.ap + a.M * a.kp;
    a.sz = a.asum + a.M * a.nb;
    int64_t row_groups = (a.M + 31) / 32;
    /* Enough column groups for every thread, each at least 16 columns. */
    int64_t want = (4 * threads + row_groups - 1) / row_groups;
    a.col_blocks = a.N / 16 < want ? (a.N / 16 > 0 ? a.N / 16 : 1) : want;
    cge_status st = cge_launch(stream, nb_pack_fn, cge__blocks_for(a.M, 4, threads), &a, sizeof a);
    const nb_state *pre = ctx->state;
    const void *zp = a.zp_u8 ? (const void *)a.zp_u8 : (const void *)a.zp_f32;
    if (pre && pre->scales == a.scales && pre->zp == zp)
        a.sz = pre->sz;
    else if (!st)
        st = cge_launch(stream, nb_sz_fn, cge__blocks_for(a.N, 256, threads), &a, sizeof a);
    if (st)
        return st;
#ifdef NB_HAVE_AVX512
    if (nb_panel(&a)) {
        a.apt = a.asum + a.M * a.nb + a.N * a.nb + 16;
        a.apt = (float *)(((uintptr_t)a.apt + 63) & ~(uintptr_t)63);
        a.wbuf = a.apt + cge__gemm_packed_b_floats(a.kp, a.M);
        a.panel_blocks = nb_panel_blocks(&a, threads);
        int64_t panels = (a.M + CGE_GEMM_NR - 1) / CGE_GEMM_NR;
        st = cge_launch(stream, nb_packt_fn, cge__blocks_for(panels, 1, threads), &a, sizeof a);
        if (!st)
            st = cge_launch(stream, nb_panel_fn, a.panel_blocks, &a, sizeof a);
        return st;
    }
#endif
    return cge_launch(stream, nb_main_fn,
                      cge__blocks_for(row_groups * a.col_blocks, 1, threads), &a, sizeof a);
}

/* ---- registration ------------------------------------------------------------------- */

static const cge_arg_def nb_in[] = {
    {"A", 0, CGE_DT(CGE_F32), "[..., K]"},
    {"B", 0, CGE_DT(CGE_U8), "[N, n_blocks, blob] packed codes (low bits first)"},
    {"scales", 0, CGE_DT(CGE_F32), "[N * n_blocks]"},
    {"zero_points", CGE_ARG_OPTIONAL, CGE_DT(CGE_U8) | CGE_DT(CGE_F32),
     "uint8 packed like B, or float32 [N * n_blocks]; absent: 2^(bits-1)"},
    {"g_idx", CGE_ARG_OPTIONAL, CGE_DT(CGE_I32), "[K]; only k / block_size is supported"},
    {"bias", CGE_ARG_OPTIONAL, CGE_DT(CGE_F32), "[N]"},
};
static const cge_arg_def nb_out[] = {{"Y", 0, CGE_DT(CGE_F32), "[..., N]"}};
static const cge_attr_def nb_attr_defs[] = {
    {.name = "K", .kind = CGE_ATTR_INT, .required = true, .doc = "A's last dim"},
    {.name = "N", .kind = CGE_ATTR_INT, .required = true, .doc = "output columns"},
    {.name = "bits", .kind = CGE_ATTR_INT, .default_i = 4, .doc = "4 or 8"},
    {.name = "block_size", .kind = CGE_ATTR_INT, .required = true,
     .doc = "elements per quantization block along K (a power of two >= 16)"},
    {.name = "accuracy_level", .kind = CGE_ATTR_INT,
     .doc = "accepted, ignored: products are float32"},
};
static const cge_kernel_def nb_kernels[] = {
    {.engine = "cpu", .dtypes = CGE_DT(CGE_F32), .launch = nb_launch,
     .workspace_size = nb_workspace, .prepare = nb_prepare, .release = nb_release,
     .inplace_input = -1}};

static const cge_op_def nb_ops[] = {
    {.name = "MatMulNBits", .domain = "com.microsoft", .since_version = 1, .inputs = nb_in,
     .num_inputs = 6, .outputs = nb_out, .num_outputs = 1, .attrs = nb_attr_defs,
     .num_attrs = 5, .infer = nb_infer, .kernels = nb_kernels, .num_kernels = 1,
     .doc = "A times block-quantized (4 or 8 bit) B transposed, dequantized in registers"},
};

const cge_op_def *cge__ops_matmul_nbits(int32_t *count)
{
    *count = (int32_t)(sizeof nb_ops / sizeof nb_ops[0]);
    return nb_ops;
}
