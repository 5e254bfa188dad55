/* Channels-last float32 depthwise convolution on AVX2 + FMA (depthwise_nhwc.h's
 * kernel where the machine, or CGE_CPU_ISA, leaves no AVX-512): 8 channels a
 * vector, 4 output pixels x 2 channel vectors of accumulators. */
#include "ops/depthwise_nhwc.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* Same order of operations as the AVX-512 kernel (bias first, taps row by
 * row, column by column, one fused multiply-add each, a tap outside the input
 * adding 0 x w), so both give the same bits. The pixel block is 4 x 2
 * vectors: 8 accumulators, 2 weight vectors and an input vector in 16 ymm
 * registers. */

#define DW2 __attribute__((target("avx2,fma")))
#define DW2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

enum { P2 = 4, V2 = 2, BAND2 = 4 };

typedef struct dw2_row {
    const cge__dw_nhwc *a;
    const float *x, *w, *z;
    float *y;
    int64_t xrs, C, cp, IW;
    int nky, kw, sw, pl;
    __m256i tail; /* the lanes of the last vector (C % 8, or all) */
} dw2_row;

DW2_INLINE __m256 dw2_act(__m256 v, const cge__dw_nhwc *a)
{
    const __m256 zero = _mm256_setzero_ps();
    switch (a->act) {
    case CGE__DW_ACT_RELU: /* y < 0 ? 0 : y, NaN and -0 kept (max gives its second operand) */
        return _mm256_max_ps(zero, v);
    case CGE__DW_ACT_LEAKY:
        return _mm256_blendv_ps(v, _mm256_mul_ps(v, _mm256_set1_ps(a->alpha)),
                                _mm256_cmp_ps(v, zero, _CMP_LT_OQ));
    case CGE__DW_ACT_CLIP:
        return _mm256_min_ps(_mm256_set1_ps(a->hi), _mm256_max_ps(_mm256_set1_ps(a->lo), v));
    case CGE__DW_ACT_HSIGMOID:
    case CGE__DW_ACT_HSWISH: {
        __m256 t = _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(a->alpha), v),
                                 _mm256_set1_ps(a->beta));
        t = _mm256_min_ps(_mm256_set1_ps(1.0f), _mm256_max_ps(zero, t));
        return a->act == CGE__DW_ACT_HSWISH ? _mm256_mul_ps(v, t) : t;
    }
    default: return v;
    }
}

DW2_INLINE __m256 dw2_load(const float *p, const bool masked, __m256i m)
{
    return masked ? _mm256_maskload_ps(p, m) : _mm256_loadu_ps(p);
}

DW2_INLINE void dw2_store(const dw2_row *r, __m256 acc[P2][V2], int64_t ow, int64_t c,
                          const int P, const int V, const bool masked)
{
    float *yp = r->y + ow * r->C + c;
    const float *zp = r->z ? r->z + ow * r->C + c : NULL;
#pragma GCC unroll 4
    for (int j = 0; j < P; j++, yp += r->C, zp = zp ? zp + r->C : NULL)
#pragma GCC unroll 2
        for (int v = 0; v < V; v++) {
            const bool mv = masked && v == V - 1;
            __m256 t = acc[j][v];
            if (zp)
                t = _mm256_add_ps(t, dw2_load(zp + 8 * v, mv, r->tail));
            t = dw2_act(t, r->a);
            if (mv)
                _mm256_maskstore_ps(yp + 8 * v, r->tail, t);
            else
                _mm256_storeu_ps(yp + 8 * v, t);
        }
}

DW2_INLINE void dw2_bias(const dw2_row *r, __m256 acc[P2][V2], int64_t c, const int P,
                         const int V, const bool masked)
{
#pragma GCC unroll 2
    for (int v = 0; v < V; v++) {
        __m256 b = r->a->b ? dw2_load(r->a->b + c + 8 * v, masked && v == V - 1, r->tail)
                           : _mm256_setzero_ps();
#pragma GCC unroll 4
        for (int j = 0; j < P; j++)
            acc[j][v] = b;
    }
}

/* P pixels from ow whose windows lie inside the input's columns, V vectors
 * from channel c. The packed weights reach cp (a multiple of 16), zero past
 * C, so weight loads are never masked. */
DW2_INLINE void dw2_block(const dw2_row *r, int64_t ow, int64_t c, const int P, const int V,
                          const int KW, const int SW, const bool masked)
{
    const int64_t C = r->C, cp = r->cp;
    __m256 acc[P2][V2];
    dw2_bias(r, acc, c, P, V, masked);
    const float *xr = r->x + (ow * SW - r->pl) * C + c, *wr = r->w + c;
    for (int ky = 0; ky < r->nky; ky++, xr += r->xrs, wr += KW * cp) {
        const float *xq = xr, *wq = wr;
#pragma GCC unroll 1
        for (int kx = 0; kx < KW; kx++, xq += C, wq += cp) {
            __m256 wv[V2];
#pragma GCC unroll 2
            for (int v = 0; v < V; v++)
                wv[v] = _mm256_loadu_ps(wq + 8 * v);
#pragma GCC unroll 4
            for (int j = 0; j < P; j++)
#pragma GCC unroll 2
                for (int v = 0; v < V; v++)
                    acc[j][v] = _mm256_fmadd_ps(
                        dw2_load(xq + j * SW * C + 8 * v, masked && v == V - 1, r->tail), wv[v],
                        acc[j][v]);
        }
    }
    dw2_store(r, acc, ow, c, P, V, masked);
}

DW2_INLINE void dw2_pixels(const dw2_row *r, int64_t ow, const int P, const int KW, const int SW)
{
    int64_t c = 0;
    for (; c + 16 <= r->C; c += 16)
        dw2_block(r, ow, c, P, 2, KW, SW, false);
    if (c + 8 <= r->C) {
        dw2_block(r, ow, c, P, 1, KW, SW, false);
        c += 8;
    }
    if (c < r->C)
        dw2_block(r, ow, c, P, 1, KW, SW, true);
}

typedef void (*dw2_interior_fn)(const dw2_row *r, int64_t o0, int64_t o1);

#define DW2_INTERIOR(KW, SW)                                                              \
    DW2 static void dw2_int_##KW##_##SW(const dw2_row *r, int64_t o0, int64_t o1)        \
    {                                                                                    \
        int64_t ow = o0;                                                                 \
        for (; ow + P2 <= o1; ow += P2)                                                  \
            dw2_pixels(r, ow, P2, KW, SW);                                               \
        if (ow + 2 <= o1) {                                                              \
            dw2_pixels(r, ow, 2, KW, SW);                                                \
            ow += 2;                                                                     \
        }                                                                                \
        if (ow < o1)                                                                     \
            dw2_pixels(r, ow, 1, KW, SW);                                                \
    }
DW2_INTERIOR(3, 1)
DW2_INTERIOR(3, 2)
DW2_INTERIOR(5, 1)
DW2_INTERIOR(5, 2)
DW2_INTERIOR(7, 1)
DW2_INTERIOR(7, 2)

static const dw2_interior_fn dw2_interior[3][2] = {
    {dw2_int_3_1, dw2_int_3_2}, {dw2_int_5_1, dw2_int_5_2}, {dw2_int_7_1, dw2_int_7_2}};

/* Up to 4 pixels from ow (n of them) whose windows may reach into the
 * padding, V vectors from channel c: a tap outside the input adds 0 x w
 * (nothing outside the input is read, so an Inf or NaN there cannot reach
 * the sum). */
DW2_INLINE void dw2_edge_block(const dw2_row *r, int64_t ow, int n, int64_t c,
                               const uint32_t *valid, const int V, const bool masked)
{
    const int64_t C = r->C, cp = r->cp;
    const int KW = r->kw;
    __m256 acc[P2][V2];
    dw2_bias(r, acc, c, P2, V, masked);
    const float *xr = r->x + c, *wr = r->w + c;
    for (int ky = 0; ky < r->nky; ky++, xr += r->xrs, wr += KW * cp)
        for (int kx = 0; kx < KW; kx++) {
            __m256 wv[V2];
#pragma GCC unroll 2
            for (int v = 0; v < V; v++)
                wv[v] = _mm256_loadu_ps(wr + kx * cp + 8 * v);
#pragma GCC unroll 4
            for (int j = 0; j < P2; j++) {
                bool in = j < n && ((valid[j] >> kx) & 1u);
                const float *xp = xr + (in ? (ow + j) * r->sw - r->pl + kx : 0) * C;
#pragma GCC unroll 2
                for (int v = 0; v < V; v++) {
                    __m256 xv = !in ? _mm256_setzero_ps()
                                    : dw2_load(xp + 8 * v, masked && v == V - 1, r->tail);
                    acc[j][v] = _mm256_fmadd_ps(xv, wv[v], acc[j][v]);
                }
            }
        }
    if (n == 4)
        dw2_store(r, acc, ow, c, 4, V, masked);
    else if (n == 3)
        dw2_store(r, acc, ow, c, 3, V, masked);
    else if (n == 2)
        dw2_store(r, acc, ow, c, 2, V, masked);
    else
        dw2_store(r, acc, ow, c, 1, V, masked);
}

DW2 static void dw2_edge(const dw2_row *r, int64_t o0, int64_t o1)
{
    for (int64_t ow = o0; ow < o1; ow += 4) {
        int n = o1 - ow < 4 ? (int)(o1 - ow) : 4;
        uint32_t valid[4] = {0, 0, 0, 0};
        for (int j = 0; j < n; j++)
            for (int kx = 0; kx < r->kw; kx++) {
                int64_t ix = (ow + j) * r->sw - r->pl + kx;
                if (ix >= 0 && ix < r->IW)
                    valid[j] |= 1u << kx;
            }
        int64_t c = 0;
        for (; c + 16 <= r->C; c += 16)
            dw2_edge_block(r, ow, n, c, valid, 2, false);
        if (c + 8 <= r->C) {
            dw2_edge_block(r, ow, n, c, valid, 1, false);
            c += 8;
        }
        if (c < r->C)
            dw2_edge_block(r, ow, n, c, valid, 1, true);
    }
}

DW2 void cge__dw_nhwc_rows_avx2(const cge__dw_nhwc *a, int64_t r0, int64_t r1)
{
    const int64_t C = a->C;
    int64_t owa = (a->pl + a->sw - 1) / a->sw;
    int64_t owb = a->IW - a->kw + a->pl >= 0 ? (a->IW - a->kw + a->pl) / a->sw + 1 : 0;
    owa = owa < a->OW ? owa : a->OW;
    owb = owb < a->OW ? owb : a->OW;
    owb = owb > owa ? owb : owa;
    dw2_interior_fn f = dw2_interior[(a->kw - 3) / 2][a->sw - 1];
    int tl = (int)(C % 8);
    dw2_row r = {.a = a, .C = C, .cp = a->cp, .IW = a->IW, .xrs = a->IW * C, .kw = a->kw,
                 .sw = a->sw, .pl = a->pl,
                 .tail = _mm256_cmpgt_epi32(_mm256_set1_epi32(tl ? tl : 8),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))};
    for (int64_t b0 = r0; b0 < r1; b0 += BAND2) {
        int64_t b1 = r1 - b0 < BAND2 ? r1 : b0 + BAND2;
        for (int64_t row = b0; row < b1; row++) {
            int64_t n = row / a->OH, oh = row % a->OH;
            int64_t ih0 = oh * a->sh - a->pt;
            int64_t ky0 = ih0 < 0 ? -ih0 : 0, ky1 = a->IH - ih0 < a->kh ? a->IH - ih0 : a->kh;
            r.nky = ky1 > ky0 ? (int)(ky1 - ky0) : 0;
            r.x = a->x + (r.nky ? ((n * a->IH + ih0 + ky0) * a->IW) * C : 0);
            r.w = a->w + (r.nky ? ky0 : 0) * a->kw * a->cp;
            r.y = a->y + row * a->OW * C;
            r.z = a->z ? a->z + row * a->OW * C : NULL;
            if (owa > 0)
                dw2_edge(&r, 0, owa);
            if (owb > owa)
                f(&r, owa, owb);
            if (a->OW > owb)
                dw2_edge(&r, owb, a->OW);
        }
        if (a->act >= CGE__DW_ACT_SIGMOID)
            cge__dw_nhwc_post(a, a->y + b0 * a->OW * C, (b1 - b0) * a->OW * C);
    }
}

#endif
