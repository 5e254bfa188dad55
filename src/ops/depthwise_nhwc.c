/* Channels-last float32 depthwise convolution on AVX-512 (depthwise_nhwc.h;
 * the AVX2 one is depthwise_nhwc_avx2.c), and the dispatch between them:
 * 16 channels a vector, several output pixels of a row in registers, the
 * window's taps as per-channel weight vectors (no broadcasts). */
#include <math.h>
#include <string.h>

#include "base/cpu_isa.h"
#include "ops/depthwise_nhwc.h"
#include "ops/fast_math.h"
#include "ops/kernel_util.h"

/* Threads take whole output rows. A row runs pixel block by pixel block,
 * each over all its channels (a pixel's channels are contiguous, so the
 * input streams in long runs): the columns whose window lies inside the
 * input run a kernel specialised for the window width and stride (4 pixels
 * x 4 channel vectors of accumulators, the tap's 4 weight vectors loaded
 * once for the 4 pixels; narrower remainders the same way); the border
 * columns run 4 pixels at a time with the taps outside the input masked
 * off; rows outside the input are skipped. A channel tail (C not a multiple
 * of 16) uses masked loads and stores. The epilogue (bias, addend, relu /
 * leaky / clip / hard sigmoid / hard swish) runs on the accumulators;
 * sigmoid, tanh, SiLU and GELU run fast_math's row functions over each band
 * of DW_BAND finished rows. Every epilogue is conv.c's (the unfused ops')
 * expression, so that it gives the unfused bits for the same sums. */

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define DW_AVX512 __attribute__((target("avx512f")))
#define DW_INLINE __attribute__((target("avx512f"), always_inline)) static inline

/* Register blocks: DW_P pixels x DW_V channel vectors of accumulators, the
 * V weight vectors of a tap loaded once for the P pixels (4 x 4 measured
 * ahead of 8 x 2 and 8 x 1). The epilogue's row functions run over
 * DW_BAND output rows at a time, while they are in cache. */
enum { DW_P = 4, DW_V = 4, DW_BAND = 4 };

/* One output row. */
typedef struct dw_row {
    const cge__dw_nhwc *a;
    const float *x;  /* the input row of tap row ky0, column 0, channel 0 */
    const float *w;  /* the packed tap (ky0, 0), channel 0 */
    const float *z;  /* the addend's row, or NULL */
    float *y;        /* the output row */
    int64_t xrs, C, cp, IW;
    int64_t c0, c1;  /* the channels a block loop covers (all: 0, C) */
    int nky, kw, sw, pl;
    __mmask16 tail;  /* the lanes of the last vector (C % 16, or all) */
} dw_row;

DW_INLINE __m512 dw_act(__m512 v, const cge__dw_nhwc *a)
{
    const __m512 zero = _mm512_setzero_ps();
    switch (a->act) {
    case CGE__DW_ACT_RELU: /* y < 0 ? 0 : y, NaN and -0 kept */
        return _mm512_max_ps(zero, v);
    case CGE__DW_ACT_LEAKY:
        return _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), v,
                                  _mm512_set1_ps(a->alpha));
    case CGE__DW_ACT_CLIP: /* (y < lo ? lo : y) > hi ? hi : ... */
        return _mm512_min_ps(_mm512_set1_ps(a->hi), _mm512_max_ps(_mm512_set1_ps(a->lo), v));
    case CGE__DW_ACT_HSIGMOID:
    case CGE__DW_ACT_HSWISH: {
        /* alpha y + beta rounded twice (no contraction), as the scalar code */
        __m512 t = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(a->alpha), v),
                                 _mm512_set1_ps(a->beta));
        t = _mm512_min_ps(_mm512_set1_ps(1.0f), _mm512_max_ps(zero, t));
        return a->act == CGE__DW_ACT_HSWISH ? _mm512_mul_ps(v, t) : t;
    }
    default: return v;
    }
}

/* V vectors from channel c of P pixels from ow: the accumulators plus the
 * bias (added first, as conv.c's kernels do), the addend, the activation,
 * stored; the last vector masked when `masked`. Addresses are a pointer
 * per pixel plus constant offsets, so that the unrolled code needs few
 * registers for them. */
DW_INLINE void dw_store(const dw_row *r, __m512 acc[DW_P][DW_V], int64_t ow, int64_t c,
                        const int P, const int V, const bool masked)
{
    float *yp = r->y + ow * r->C + c;
    const float *zp = r->z ? r->z + ow * r->C + c : NULL;
#pragma GCC unroll 8
    for (int j = 0; j < P; j++, yp += r->C, zp = zp ? zp + r->C : NULL)
#pragma GCC unroll 4
        for (int v = 0; v < V; v++) {
            __m512 t = acc[j][v];
            __mmask16 m = masked && v == V - 1 ? r->tail : (__mmask16)0xffff;
            if (zp)
                t = _mm512_add_ps(t, _mm512_maskz_loadu_ps(m, zp + 16 * v));
            t = dw_act(t, r->a);
            if (masked && v == V - 1)
                _mm512_mask_storeu_ps(yp + 16 * v, m, t);
            else
                _mm512_storeu_ps(yp + 16 * v, t);
        }
}

DW_INLINE void dw_bias(const dw_row *r, __m512 acc[DW_P][DW_V], int64_t c, const int P,
                       const int V, const bool masked)
{
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) {
        __mmask16 m = masked && v == V - 1 ? r->tail : (__mmask16)0xffff;
        __m512 b = r->a->b ? _mm512_maskz_loadu_ps(m, r->a->b + c + 16 * v) : _mm512_setzero_ps();
#pragma GCC unroll 8
        for (int j = 0; j < P; j++)
            acc[j][v] = b;
    }
}

/* One tap of P pixels: pixel j's input at xq[j], the tap's weights at wp. */
DW_INLINE void dw_tap(const dw_row *r, __m512 acc[DW_P][DW_V], const float *const *xq,
                      const float *wp, const int P, const int V, const bool masked)
{
    __m512 wv[DW_V];
#pragma GCC unroll 4
    for (int v = 0; v < V; v++)
        wv[v] = _mm512_loadu_ps(wp + 16 * v);
#pragma GCC unroll 8
    for (int j = 0; j < P; j++)
#pragma GCC unroll 4
        for (int v = 0; v < V; v++) {
            __m512 xv = masked && v == V - 1 ? _mm512_maskz_loadu_ps(r->tail, xq[j] + 16 * v)
                                             : _mm512_loadu_ps(xq[j] + 16 * v);
            acc[j][v] = _mm512_fmadd_ps(xv, wv[v], acc[j][v]);
        }
}

/* P pixels from ow whose windows lie inside the input's columns, V vectors
 * from channel c. */
DW_INLINE void dw_block(const dw_row *r, int64_t ow, int64_t c, const int P, const int V,
                        const int KW, const int SW, const bool masked)
{
    const int64_t C = r->C, cp = r->cp;
    __m512 acc[DW_P][DW_V];
    dw_bias(r, acc, c, P, V, masked);
    const float *xr = r->x + (ow * SW - r->pl) * C + c, *wr = r->w + c;
    for (int ky = 0; ky < r->nky; ky++, xr += r->xrs, wr += KW * cp) {
        const float *xq[DW_P], *wq = wr;
#pragma GCC unroll 8
        for (int j = 0; j < P; j++)
            xq[j] = xr + j * SW * C;
        if (KW == 3) {
#pragma GCC unroll 3
            for (int kx = 0; kx < KW; kx++) {
                dw_tap(r, acc, xq, wq, P, V, masked);
#pragma GCC unroll 8
                for (int j = 0; j < P; j++)
                    xq[j] += C;
                wq += cp;
            }
        } else {
            /* not unrolled: sharing loads between taps would keep more
             * input vectors live than the registers hold */
#pragma GCC unroll 1
            for (int kx = 0; kx < KW; kx++) {
                dw_tap(r, acc, xq, wq, P, V, masked);
#pragma GCC unroll 8
                for (int j = 0; j < P; j++)
                    xq[j] += C;
                wq += cp;
            }
        }
    }
    dw_store(r, acc, ow, c, P, V, masked);
}

/* P pixels from ow, the pass's channels: V vectors at a time, then single
 * ones, the last one masked where it ends at C % 16 != 0. */
DW_INLINE void dw_pixels(const dw_row *r, int64_t ow, const int P, const int V, const int KW,
                         const int SW)
{
    int64_t full = r->c1 - r->c0 < 16 * V ? r->c0 : r->c1 / 16 * 16, c = r->c0;
    if (V > 1)
        for (; c + 16 * V <= full; c += 16 * V)
            dw_block(r, ow, c, P, V, KW, SW, false);
    for (; c + 16 <= r->c1; c += 16)
        dw_block(r, ow, c, P, 1, KW, SW, false);
    if (c < r->c1)
        dw_block(r, ow, c, P, 1, KW, SW, true);
}

typedef void (*dw_interior_fn)(const dw_row *r, int64_t o0, int64_t o1);

#define DW_INTERIOR(KW, SW)                                                               \
    DW_AVX512 static void dw_int_##KW##_##SW(const dw_row *r, int64_t o0, int64_t o1)    \
    {                                                                                    \
        int64_t ow = o0;                                                                 \
        for (; ow + DW_P <= o1; ow += DW_P)                                              \
            dw_pixels(r, ow, DW_P, DW_V, KW, SW);                                        \
        if (ow + 2 <= o1) {                                                              \
            dw_pixels(r, ow, 2, DW_V, KW, SW);                                           \
            ow += 2;                                                                     \
        }                                                                                \
        if (ow < o1)                                                                     \
            dw_pixels(r, ow, 1, DW_V, KW, SW);                                           \
    }
DW_INTERIOR(3, 1)
DW_INTERIOR(3, 2)
DW_INTERIOR(5, 1)
DW_INTERIOR(5, 2)
DW_INTERIOR(7, 1)
DW_INTERIOR(7, 2)

/* [kw 3, 5, 7][stride 1, 2] */
static const dw_interior_fn dw_interior[3][2] = {
    {dw_int_3_1, dw_int_3_2}, {dw_int_5_1, dw_int_5_2}, {dw_int_7_1, dw_int_7_2}};

/* Up to 4 pixels from ow (n of them) whose windows may reach into the
 * padding (the border columns, and inputs narrower than the window), V
 * vectors from channel c: a tap outside the input loads zeros (a masked
 * load of an in-range address, so nothing outside the input is read and an
 * Inf or NaN there cannot reach the sum). */
DW_INLINE void dw_edge_block(const dw_row *r, int64_t ow, int n, int64_t c,
                             const uint32_t *valid, const int V, const int KW, const bool masked)
{
    const int64_t C = r->C, cp = r->cp;
    __m512 acc[DW_P][DW_V];
    dw_bias(r, acc, c, 4, V, masked);
    const float *xr = r->x + c, *wr = r->w + c;
    for (int ky = 0; ky < r->nky; ky++, xr += r->xrs, wr += KW * cp) {
#pragma GCC unroll 1
        for (int kx = 0; kx < KW; kx++) {
            __m512 wv[DW_V];
#pragma GCC unroll 4
            for (int v = 0; v < V; v++)
                wv[v] = _mm512_loadu_ps(wr + kx * cp + 16 * v);
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                bool in = (valid[j] >> kx) & 1u;
                const float *xp = xr + (in ? (ow + j) * r->sw - r->pl + kx : 0) * C;
#pragma GCC unroll 4
                for (int v = 0; v < V; v++) {
                    __mmask16 m = !in ? (__mmask16)0
                                  : masked && v == V - 1 ? r->tail : (__mmask16)0xffff;
                    acc[j][v] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, xp + 16 * v), wv[v],
                                                acc[j][v]);
                }
            }
        }
    }
    if (n == 4)
        dw_store(r, acc, ow, c, 4, V, masked);
    else if (n == 3)
        dw_store(r, acc, ow, c, 3, V, masked);
    else if (n == 2)
        dw_store(r, acc, ow, c, 2, V, masked);
    else
        dw_store(r, acc, ow, c, 1, V, masked);
}

DW_INLINE void dw_edge(const dw_row *r, int64_t o0, int64_t o1, const int KW)
{
    for (int64_t ow = o0; ow < o1; ow += 4) {
        int n = o1 - ow < 4 ? (int)(o1 - ow) : 4;
        uint32_t valid[4] = {0, 0, 0, 0};
        for (int j = 0; j < n; j++)
            for (int kx = 0; kx < KW; kx++) {
                int64_t ix = (ow + j) * r->sw - r->pl + kx;
                if (ix >= 0 && ix < r->IW)
                    valid[j] |= 1u << kx;
            }
        int64_t c = r->c0;
        for (; c + 64 <= r->c1 && c + 64 <= r->C / 16 * 16; c += 64)
            dw_edge_block(r, ow, n, c, valid, 4, KW, false);
        for (; c + 16 <= r->c1; c += 16)
            dw_edge_block(r, ow, n, c, valid, 1, KW, false);
        if (c < r->c1)
            dw_edge_block(r, ow, n, c, valid, 1, KW, true);
    }
}

typedef void (*dw_edge_fn)(const dw_row *r, int64_t o0, int64_t o1);

#define DW_EDGES(KW)                                                                      \
    DW_AVX512 static void dw_edge_##KW(const dw_row *r, int64_t o0, int64_t o1)          \
    {                                                                                    \
        dw_edge(r, o0, o1, KW);                                                          \
    }
DW_EDGES(3)
DW_EDGES(5)
DW_EDGES(7)

static const dw_edge_fn dw_edges[3] = {dw_edge_3, dw_edge_5, dw_edge_7};

void cge__dw_nhwc_post(const cge__dw_nhwc *a, float *t, int64_t n)
{
    switch (a->act) {
    case CGE__DW_ACT_SIGMOID: cge__sigmoid_f32_row(t, t, n); break;
    case CGE__DW_ACT_SILU: cge__silu_f32_row(t, t, n); break;
    case CGE__DW_ACT_GELU: cge__gelu_f32_row(t, t, n); break;
    case CGE__DW_ACT_TANH:
        for (int64_t i = 0; i < n; i++)
            t[i] = (float)tanh((double)t[i]);
        break;
    default: break;
    }
}

/* Output rows [r0, r1) of the batch (row index n * OH + oh), each over all
 * its channels pixel block by pixel block: a pixel's channels are
 * contiguous, so the input streams in long runs (passes over a few channel
 * vectors at a time, each keeping its window rows in L1, measured 1.2-2x
 * slower: the hardware prefetcher follows strided 64-256 byte runs badly). */
DW_AVX512 static void dw_rows(const cge__dw_nhwc *a, int64_t r0, int64_t r1)
{
    const int64_t C = a->C;
    /* interior columns: ow sw - pl >= 0 and ow sw - pl + kw <= IW */
    int64_t owa = (a->pl + a->sw - 1) / a->sw;
    int64_t owb = a->IW - a->kw + a->pl >= 0 ? (a->IW - a->kw + a->pl) / a->sw + 1 : 0;
    owa = owa < a->OW ? owa : a->OW;
    owb = owb < a->OW ? owb : a->OW;
    owb = owb > owa ? owb : owa;
    dw_interior_fn f = dw_interior[(a->kw - 3) / 2][a->sw - 1];
    dw_edge_fn e = dw_edges[(a->kw - 3) / 2];
    dw_row r = {.a = a, .C = C, .cp = a->cp, .IW = a->IW, .xrs = a->IW * C, .kw = a->kw,
                .sw = a->sw, .pl = a->pl, .c0 = 0, .c1 = C,
                .tail = C % 16 ? (__mmask16)((1u << (C % 16)) - 1u) : (__mmask16)0xffff};
    for (int64_t b0 = r0; b0 < r1; b0 += DW_BAND) {
        int64_t b1 = r1 - b0 < DW_BAND ? r1 : b0 + DW_BAND;
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
                e(&r, 0, owa);
            if (owb > owa)
                f(&r, owa, owb);
            if (a->OW > owb)
                e(&r, owb, a->OW);
        }
        if (a->act >= CGE__DW_ACT_SIGMOID)
            cge__dw_nhwc_post(a, a->y + b0 * a->OW * C, (b1 - b0) * a->OW * C);
    }
}

static bool dw_avx512(void)
{
    return cge__cpu_has(CGE_CPU_AVX512F);
}

bool cge__dw_nhwc_available(void)
{
    return dw_avx512() || cge__cpu_has(CGE_CPU_AVX2 | CGE_CPU_FMA);
}

int cge__dw_nhwc_isa(void)
{
    return dw_avx512() ? 512 : cge__cpu_has(CGE_CPU_AVX2 | CGE_CPU_FMA) ? 256 : 0;
}

static int64_t dw_runs, dw_runs_avx2;

int64_t cge__dw_nhwc_runs(void)
{
    return __atomic_load_n(&dw_runs, __ATOMIC_RELAXED);
}

int64_t cge__dw_nhwc_runs_avx2(void)
{
    return __atomic_load_n(&dw_runs_avx2, __ATOMIC_RELAXED);
}

void cge__dw_nhwc_fn(int64_t blk, int64_t nblk, void *args)
{
    const cge__dw_nhwc *a = args;
    bool wide = dw_avx512();
    if (blk == 0) {
        __atomic_fetch_add(&dw_runs, 1, __ATOMIC_RELAXED);
        if (!wide)
            __atomic_fetch_add(&dw_runs_avx2, 1, __ATOMIC_RELAXED);
    }
    int64_t r0, r1;
    cge__block_range(a->N * a->OH, blk, nblk, &r0, &r1);
    if (r1 <= r0)
        return;
    if (wide)
        dw_rows(a, r0, r1);
    else
        cge__dw_nhwc_rows_avx2(a, r0, r1);
}

#else /* not x86-64 with GCC or clang: the kernel is absent, conv.c uses oneDNN */

bool cge__dw_nhwc_available(void)
{
    return false;
}

int cge__dw_nhwc_isa(void)
{
    return 0;
}

void cge__dw_nhwc_fn(int64_t blk, int64_t nblk, void *args)
{
    (void)blk, (void)nblk, (void)args;
}

int64_t cge__dw_nhwc_runs(void)
{
    return 0;
}

int64_t cge__dw_nhwc_runs_avx2(void)
{
    return 0;
}

#endif

bool cge__dw_nhwc_takes(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh, int64_t dw,
                        int64_t pt, int64_t pl, int64_t pb, int64_t pr)
{
    return (kw == 3 || kw == 5 || kw == 7) && kh >= 1 && kh <= 7 && (sh == 1 || sh == 2) &&
           (sw == 1 || sw == 2) && dh == 1 && dw == 1 && pt >= 0 && pb >= 0 && pl >= 0 &&
           pr >= 0 && pt < kh && pb < kh && pl < kw && pr < kw;
}

int64_t cge__dw_nhwc_packed_floats(int64_t C, int64_t kvol)
{
    return (C + 15) / 16 * 16 * kvol;
}

void cge__dw_nhwc_pack(const float *w, int64_t C, int64_t kvol, float *dst)
{
    int64_t cp = (C + 15) / 16 * 16;
    for (int64_t t = 0; t < kvol; t++) {
        float *d = dst + t * cp;
        for (int64_t c = 0; c < C; c++)
            d[c] = w[c * kvol + t];
        for (int64_t c = C; c < cp; c++)
            d[c] = 0.0f;
    }
}

int64_t cge__dw_nhwc_blocks(const cge__dw_nhwc *a, int threads)
{
    /* an output row costs OW x kh x kw x C / 16 vector multiply-adds; a
     * block gets 4096 at least, a few microseconds, so that small layers
     * stay on one thread instead of waking another for less than its
     * wake-up costs */
    int64_t per_row = a->OW * a->kh * a->kw * ((a->C + 15) / 16);
    return cge__blocks_for(a->N * a->OH, per_row >= 4096 ? 1 : 4096 / (per_row > 0 ? per_row : 1),
                           threads);
}
