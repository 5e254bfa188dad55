/* Grouped channels-last float32 convolution (see conv_grouped.h): weight
 * packing, the AVX-512 and AVX2 + FMA register tiles, the row driver and the
 * plain reference loop. */
#include "base/cpu_isa.h"
#include "ops/conv_grouped.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GC_X86 1
#else
#define GC_X86 0
#endif

#define VL 16
#define MAX_VECS 4 /* vectors of 16 output channels per register block */
#define MAX_RP 8   /* output pixels per register tile */
/* Packed weights above this stay in cache only over one group's rows:
 * the items then run group by group (cge__gconv.group_major). */
#define ROW_MAJOR_MAX_BYTES ((int64_t)1 << 20)
/* Narrow groups (conv_grouped.h): at most this many channels per group, and
 * vectors per work unit. */
#define NARROW_MAX 8
#define NARROW_VECS 2

static int64_t block_vecs(const cge__gconv *gc, int64_t b)
{
    int64_t base = gc->vecs / gc->blocks, extra = gc->vecs % gc->blocks;
    return base + (b < extra ? 1 : 0);
}

static int64_t block_first(const cge__gconv *gc, int64_t b)
{
    int64_t base = gc->vecs / gc->blocks, extra = gc->vecs % gc->blocks;
    return b * base + (b < extra ? b : extra);
}

static bool have_avx512(void)
{
#if GC_X86
    return cge__cpu_has(CGE_CPU_AVX512F);
#else
    return false;
#endif
}

/* The AVX2 + FMA tiles (wide groups only) where AVX-512 is absent or capped
 * off (CGE_CPU_ISA=avx2). */
static bool have_avx2(void)
{
#if GC_X86
    return cge__cpu_has(CGE_CPU_AVX2 | CGE_CPU_FMA);
#else
    return false;
#endif
}

bool cge__gconv_init(cge__gconv *gc, int64_t N, int64_t C, int64_t M, int64_t G,
                     const int64_t in[2], const int64_t out[2], const int64_t k[2],
                     const int64_t s[2], const int64_t d[2], const int64_t pb[2])
{
    memset(gc, 0, sizeof *gc);
    bool wide_isa = have_avx512();
    if ((!wide_isa && !have_avx2()) || G < 2 || C <= 0 || M <= 0 || N <= 0 || C % G || M % G ||
        C / G < 2)
        return false;
    for (int i = 0; i < 2; i++)
        if (in[i] <= 0 || out[i] <= 0 || k[i] <= 0 || s[i] <= 0 || d[i] <= 0 || pb[i] < 0 ||
            in[i] > ((int64_t)1 << 24) || out[i] > ((int64_t)1 << 24) || k[i] > 4096)
            return false;
    gc->N = N, gc->C = C, gc->M = M, gc->G = G, gc->cpg = C / G, gc->mpg = M / G;
    gc->ih = in[0], gc->iw = in[1], gc->oh = out[0], gc->ow = out[1];
    gc->kh = k[0], gc->kw = k[1], gc->sh = s[0], gc->sw = s[1], gc->dh = d[0], gc->dw = d[1];
    gc->ph = pb[0], gc->pw = pb[1];
    gc->avx2 = !wide_isa;
    gc->narrow = wide_isa && gc->cpg == gc->mpg && gc->mpg <= NARROW_MAX && VL % gc->mpg == 0 &&
                 M % VL == 0;
    if (gc->narrow) {
        gc->vecs = M / VL;
        gc->units = (gc->vecs + NARROW_VECS - 1) / NARROW_VECS;
    } else {
        gc->vecs = (gc->mpg + VL - 1) / VL;
        gc->blocks = (gc->vecs + MAX_VECS - 1) / MAX_VECS;
        gc->w_group = gc->kh * gc->kw * gc->cpg * gc->vecs * VL;
        gc->units = G;
    }
    gc->group_major = cge__gconv_packed_floats(gc) * (int64_t)sizeof(float) > ROW_MAJOR_MAX_BYTES;
    return true;
}

bool cge__gconv_preferred(const cge__gconv *gc)
{
    /* 1 thread, per node: 4 per group 0.42-0.49x oneDNN's time (resnext's
     * 56x56 stage); 8 per group 0.85-1.2x either way (narrow or wide); 16
     * and 32 wide 1.5-1.9x slower (oneDNN's direct kernel reaches about
     * 160 GFLOP/s there, this one about 105); 48-232 within +-10%. */
    /* AVX2 tiles: regnet_x_400mf / 800mf with every grouped node on them
     * 1.01-1.02x oneDNN's CPU time (one thread) */
    if (gc->avx2)
        return false;
    return gc->narrow && gc->cpg <= 4;
}

bool cge__gconv_same(const cge__gconv *a, const cge__gconv *b)
{
    const int64_t x[] = {a->N, a->C, a->M, a->G, a->ih, a->iw, a->oh, a->ow, a->kh,
                         a->kw, a->sh, a->sw, a->dh, a->dw, a->ph, a->pw};
    const int64_t y[] = {b->N, b->C, b->M, b->G, b->ih, b->iw, b->oh, b->ow, b->kh,
                         b->kw, b->sh, b->sw, b->dh, b->dw, b->ph, b->pw};
    return !memcmp(x, y, sizeof x) && a->group_major == b->group_major &&
           a->narrow == b->narrow && a->avx2 == b->avx2;
}

int64_t cge__gconv_packed_floats(const cge__gconv *gc)
{
    return gc->narrow ? gc->M * gc->kh * gc->kw * gc->cpg : gc->w_group * gc->G;
}

static int64_t pack_count;

int64_t cge__gconv_pack_count(void) { return __atomic_load_n(&pack_count, __ATOMIC_RELAXED); }

void cge__gconv_pack(const cge__gconv *gc, const float *w, float *dst)
{
    __atomic_add_fetch(&pack_count, 1, __ATOMIC_RELAXED);
    int64_t taps = gc->kh * gc->kw, cpg = gc->cpg, mpg = gc->mpg;
    if (gc->narrow) {
        /* [vector][tap][c][lane]: lane l is output channel 16 v + l, its
         * group's input channel c */
        for (int64_t v = 0; v < gc->vecs; v++)
            for (int64_t t = 0; t < taps; t++)
                for (int64_t c = 0; c < cpg; c++)
                    for (int64_t l = 0; l < VL; l++)
                        dst[((v * taps + t) * cpg + c) * VL + l] =
                            w[((v * VL + l) * cpg + c) * taps + t];
        return;
    }
    for (int64_t g = 0; g < gc->G; g++)
        for (int64_t b = 0; b < gc->blocks; b++) {
            int64_t nv = block_vecs(gc, b), v0 = block_first(gc, b), lanes = nv * VL;
            float *db = dst + g * gc->w_group + taps * cpg * VL * v0;
            for (int64_t t = 0; t < taps; t++)
                for (int64_t c = 0; c < cpg; c++)
                    for (int64_t j = 0; j < lanes; j++) {
                        int64_t m = v0 * VL + j;
                        db[(t * cpg + c) * lanes + j] =
                            m < mpg ? w[((g * mpg + m) * cpg + c) * taps + t] : 0.0f;
                    }
        }
}

int64_t cge__gconv_items(const cge__gconv *gc) { return gc->N * gc->oh * gc->units; }

void cge__gconv_item(const cge__gconv *gc, int64_t i, int64_t *u, int64_t *n, int64_t *oh)
{
    int64_t r;
    if (gc->group_major) {
        *u = i / (gc->N * gc->oh);
        r = i % (gc->N * gc->oh);
    } else {
        *u = i % gc->units;
        r = i / gc->units;
    }
    *n = r / gc->oh;
    *oh = r % gc->oh;
}

void cge__gconv_unit_channels(const cge__gconv *gc, int64_t u, int64_t *c0, int64_t *c1)
{
    if (gc->narrow) {
        *c0 = u * NARROW_VECS * VL;
        *c1 = *c0 + NARROW_VECS * VL < gc->M ? *c0 + NARROW_VECS * VL : gc->M;
    } else {
        *c0 = u * gc->mpg;
        *c1 = *c0 + gc->mpg;
    }
}

/* The taps [t0, t1) of a window starting at input position p0 (stride
 * between taps d) that fall inside [0, size). */
static void valid_taps(int64_t p0, int64_t d, int64_t taps, int64_t size, int64_t *t0, int64_t *t1)
{
    int64_t a = p0 < 0 ? (-p0 + d - 1) / d : 0;
    int64_t b = size - 1 - p0 < 0 ? 0 : (size - 1 - p0) / d + 1;
    b = b < taps ? b : taps;
    *t0 = a < b ? a : b;
    *t1 = b;
}

void cge__gconv_run_ref(const cge__gconv *gc, const float *w, const float *x, const float *b,
                        const float *z, float *y, bool relu, int64_t i0, int64_t i1)
{
    int64_t C = gc->C, M = gc->M, cpg = gc->cpg, mpg = gc->mpg;
    for (int64_t i = i0; i < i1; i++) {
        int64_t u, n, oh, o0, o1;
        cge__gconv_item(gc, i, &u, &n, &oh);
        cge__gconv_unit_channels(gc, u, &o0, &o1);
        for (int64_t ow = 0; ow < gc->ow; ow++)
            for (int64_t o = o0; o < o1; o++) {
                int64_t g = o / mpg;
                float acc = 0.0f;
                for (int64_t c = 0; c < cpg; c++)
                    for (int64_t kh = 0; kh < gc->kh; kh++) {
                        int64_t ih = oh * gc->sh - gc->ph + kh * gc->dh;
                        if (ih < 0 || ih >= gc->ih)
                            continue;
                        for (int64_t kw = 0; kw < gc->kw; kw++) {
                            int64_t iw = ow * gc->sw - gc->pw + kw * gc->dw;
                            if (iw < 0 || iw >= gc->iw)
                                continue;
                            acc += x[((n * gc->ih + ih) * gc->iw + iw) * C + g * cpg + c] *
                                   w[((o * cpg + c) * gc->kh + kh) * gc->kw + kw];
                        }
                    }
                int64_t yo = ((n * gc->oh + oh) * gc->ow + ow) * M + o;
                float v = acc + (b ? b[o] : 0.0f);
                if (z)
                    v += z[yo];
                y[yo] = relu && v < 0.0f ? 0.0f : v;
            }
    }
}

#if GC_X86

/* One register tile: RP output pixels of one row x one register block of
 * NV vectors (its last one masked by `last`), over the taps [kh0, kh1) x
 * [kw0, kw1), all inside the input for every pixel of the tile. */
typedef struct tile_args {
    const float *x;  /* image n at the unit's first input channel, position (0, 0) */
    const float *w;  /* the block's packed weights */
    const float *b;  /* bias at the block's first channel, or NULL */
    const float *z;  /* Z at the tile's first pixel and the block's first channel, or NULL */
    float *y;        /* Y there */
    int64_t C, M, iw, cpg, kw;
    int64_t ih0, dh, kh0, kh1; /* input row of tap 0; the taps' rows */
    int64_t iw0, sw, dw, kw0, kw1;
    int64_t wvs; /* narrow: packed floats per vector */
    int64_t lanes; /* AVX2: packed floats per tap and channel (the block's lanes) */
    __mmask16 last;
    bool relu;
} tile_args;

/* Accumulator sets a tile of RP x NV vectors splits its channel sum into:
 * at least 8 independent FMA chains, so that a small tile (an edge pixel,
 * a narrow remainder) is not bound by the FMA's latency. */
#define SPLITS(RP, NV) ((RP) * (NV) >= 8 ? 1 : (8 + (RP) * (NV)-1) / ((RP) * (NV)))

__attribute__((target("avx512f"), always_inline)) static inline void tile(const tile_args *a,
                                                                          const int RP,
                                                                          const int NV)
{
    const int S = SPLITS(RP, NV);
    __m512 acc[8][MAX_RP][MAX_VECS];
    const int64_t lanes = (int64_t)NV * VL, xps = a->sw * a->C, cpg = a->cpg;
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) {
        __m512 bv = _mm512_setzero_ps();
        if (a->b)
            bv = v == NV - 1 ? _mm512_maskz_loadu_ps(a->last, a->b + v * VL)
                             : _mm512_loadu_ps(a->b + v * VL);
#pragma GCC unroll 8
        for (int r = 0; r < RP; r++) {
            acc[0][r][v] = bv;
#pragma GCC unroll 8
            for (int sp = 1; sp < S; sp++)
                acc[sp][r][v] = _mm512_setzero_ps();
        }
    }
    for (int64_t kh = a->kh0; kh < a->kh1; kh++) {
        int64_t ih = a->ih0 + kh * a->dh;
        for (int64_t kw = a->kw0; kw < a->kw1; kw++) {
            const float *xp = a->x + (ih * a->iw + a->iw0 + kw * a->dw) * a->C;
            const float *wp = a->w + (kh * a->kw + kw) * cpg * lanes;
            int64_t c = 0;
            for (; c + S <= cpg; c += S, wp += S * lanes)
#pragma GCC unroll 8
                for (int sp = 0; sp < S; sp++) {
                    __m512 wv[MAX_VECS];
#pragma GCC unroll 4
                    for (int v = 0; v < NV; v++)
                        wv[v] = _mm512_loadu_ps(wp + sp * lanes + v * VL);
#pragma GCC unroll 8
                    for (int r = 0; r < RP; r++) {
                        __m512 xb = _mm512_set1_ps(xp[r * xps + c + sp]);
#pragma GCC unroll 4
                        for (int v = 0; v < NV; v++)
                            acc[sp][r][v] = _mm512_fmadd_ps(xb, wv[v], acc[sp][r][v]);
                    }
                }
            for (; c < cpg; c++, wp += lanes) {
                __m512 wv[MAX_VECS];
#pragma GCC unroll 4
                for (int v = 0; v < NV; v++)
                    wv[v] = _mm512_loadu_ps(wp + v * VL);
#pragma GCC unroll 8
                for (int r = 0; r < RP; r++) {
                    __m512 xb = _mm512_set1_ps(xp[r * xps + c]);
#pragma GCC unroll 4
                    for (int v = 0; v < NV; v++)
                        acc[0][r][v] = _mm512_fmadd_ps(xb, wv[v], acc[0][r][v]);
                }
            }
        }
    }
    const __m512 zero = _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int r = 0; r < RP; r++) {
        float *yr = a->y + r * a->M;
        const float *zr = a->z ? a->z + r * a->M : NULL;
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) {
            __m512 t = acc[0][r][v];
#pragma GCC unroll 8
            for (int sp = 1; sp < S; sp++)
                t = _mm512_add_ps(t, acc[sp][r][v]);
            if (v == NV - 1) {
                if (zr)
                    t = _mm512_add_ps(t, _mm512_maskz_loadu_ps(a->last, zr + v * VL));
                if (a->relu)
                    t = _mm512_max_ps(t, zero);
                _mm512_mask_storeu_ps(yr + v * VL, a->last, t);
            } else {
                if (zr)
                    t = _mm512_add_ps(t, _mm512_loadu_ps(zr + v * VL));
                if (a->relu)
                    t = _mm512_max_ps(t, zero);
                _mm512_storeu_ps(yr + v * VL, t);
            }
        }
    }
}

typedef void (*tile_fn)(const tile_args *);

#define GC_TILE(RP, NV)                                                                      \
    __attribute__((target("avx512f"))) static void tile_##RP##_##NV(const tile_args *a)   \
    {                                                                                        \
        tile(a, RP, NV);                                                                     \
    }
#define GC_TILES(NV)                                                                         \
    GC_TILE(1, NV) GC_TILE(2, NV) GC_TILE(3, NV) GC_TILE(4, NV) GC_TILE(5, NV) GC_TILE(6, NV) \
    GC_TILE(7, NV) GC_TILE(8, NV)
GC_TILES(1)
GC_TILES(2)
GC_TILES(3)
GC_TILES(4)

#define GC_ROW(NV)                                                                           \
    {tile_1_##NV, tile_2_##NV, tile_3_##NV, tile_4_##NV,                                     \
     tile_5_##NV, tile_6_##NV, tile_7_##NV, tile_8_##NV}
static const tile_fn tiles[MAX_VECS][MAX_RP] = {GC_ROW(1), GC_ROW(2), GC_ROW(3), GC_ROW(4)};

/* AVX2 + FMA: one 16-lane slice of a wide block (two 8-lane vectors, the
 * packed weights' rows `lanes` floats apart) x RP pixels, the last slice's
 * lanes past the group's channels masked by `last`. RP 6 at most: 12
 * accumulators, 2 weight vectors and a broadcast in 16 registers. */
#define RP2_MAX 6

__attribute__((target("avx2,fma"), always_inline)) static inline __m256
gc2_load(const float *p, bool full, __m256i m)
{
    return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
}

__attribute__((target("avx2,fma"), always_inline)) static inline void tile2(const tile_args *a,
                                                                            const int RP)
{
    const int S = SPLITS(RP, 2);
    __m256 acc[4][RP2_MAX][2];
    const int64_t lanes = a->lanes, xps = a->sw * a->C, cpg = a->cpg;
    const __m256i bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    __m256i m[2];
    bool full[2];
    for (int v = 0; v < 2; v++) {
        unsigned lm = ((unsigned)a->last >> (8 * v)) & 0xffu;
        full[v] = lm == 0xffu;
        m[v] = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)lm), bits), bits);
    }
#pragma GCC unroll 2
    for (int v = 0; v < 2; v++) {
        __m256 bv = a->b ? gc2_load(a->b + v * 8, full[v], m[v]) : _mm256_setzero_ps();
#pragma GCC unroll 6
        for (int r = 0; r < RP; r++) {
            acc[0][r][v] = bv;
#pragma GCC unroll 4
            for (int sp = 1; sp < S; sp++)
                acc[sp][r][v] = _mm256_setzero_ps();
        }
    }
    for (int64_t kh = a->kh0; kh < a->kh1; kh++) {
        int64_t ih = a->ih0 + kh * a->dh;
        for (int64_t kw = a->kw0; kw < a->kw1; kw++) {
            const float *xp = a->x + (ih * a->iw + a->iw0 + kw * a->dw) * a->C;
            const float *wp = a->w + (kh * a->kw + kw) * cpg * lanes;
            int64_t c = 0;
            for (; c + S <= cpg; c += S, wp += S * lanes)
#pragma GCC unroll 4
                for (int sp = 0; sp < S; sp++) {
                    __m256 w0 = _mm256_loadu_ps(wp + sp * lanes);
                    __m256 w1 = _mm256_loadu_ps(wp + sp * lanes + 8);
#pragma GCC unroll 6
                    for (int r = 0; r < RP; r++) {
                        __m256 xb = _mm256_broadcast_ss(xp + r * xps + c + sp);
                        acc[sp][r][0] = _mm256_fmadd_ps(xb, w0, acc[sp][r][0]);
                        acc[sp][r][1] = _mm256_fmadd_ps(xb, w1, acc[sp][r][1]);
                    }
                }
            for (; c < cpg; c++, wp += lanes) {
                __m256 w0 = _mm256_loadu_ps(wp), w1 = _mm256_loadu_ps(wp + 8);
#pragma GCC unroll 6
                for (int r = 0; r < RP; r++) {
                    __m256 xb = _mm256_broadcast_ss(xp + r * xps + c);
                    acc[0][r][0] = _mm256_fmadd_ps(xb, w0, acc[0][r][0]);
                    acc[0][r][1] = _mm256_fmadd_ps(xb, w1, acc[0][r][1]);
                }
            }
        }
    }
    const __m256 zero = _mm256_setzero_ps();
#pragma GCC unroll 6
    for (int r = 0; r < RP; r++)
#pragma GCC unroll 2
        for (int v = 0; v < 2; v++) {
            __m256 t = acc[0][r][v];
#pragma GCC unroll 4
            for (int sp = 1; sp < S; sp++)
                t = _mm256_add_ps(t, acc[sp][r][v]);
            if (a->z)
                t = _mm256_add_ps(t, gc2_load(a->z + r * a->M + v * 8, full[v], m[v]));
            if (a->relu)
                t = _mm256_max_ps(t, zero);
            if (full[v])
                _mm256_storeu_ps(a->y + r * a->M + v * 8, t);
            else
                _mm256_maskstore_ps(a->y + r * a->M + v * 8, m[v], t);
        }
}

#define GC_TILE2(RP)                                                                         \
    __attribute__((target("avx2,fma"))) static void tile2_##RP(const tile_args *a)           \
    {                                                                                        \
        tile2(a, RP);                                                                        \
    }
GC_TILE2(1)
GC_TILE2(2)
GC_TILE2(3)
GC_TILE2(4)
GC_TILE2(5)
GC_TILE2(6)
static const tile_fn tiles2[RP2_MAX] = {tile2_1, tile2_2, tile2_3, tile2_4, tile2_5, tile2_6};

/* Narrow groups: RP pixels x NV vectors of CPG-channel groups; lane l of
 * a vector reads its group's channel c as element (l & ~(CPG - 1)) + c of
 * the 16 input channels loaded at its own channel offset (C == M). */
__attribute__((target("avx512f"), always_inline)) static inline void
ntile(const tile_args *a, const int RP, const int NV, const int CPG)
{
    /* split the CPG products of a pixel and tap over S sets (SPLITS) */
    const int S0 = SPLITS(RP, NV), S = S0 < CPG ? S0 : CPG;
    __m512 acc[8][MAX_RP][NARROW_VECS];
    __m512i idx[8];
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i base = _mm512_and_si512(lane, _mm512_set1_epi32(~(CPG - 1)));
#pragma GCC unroll 8
    for (int c = 0; c < CPG; c++)
        idx[c] = _mm512_add_epi32(base, _mm512_set1_epi32(c));
    const int64_t xps = a->sw * a->C;
#pragma GCC unroll 2
    for (int v = 0; v < NV; v++) {
        __m512 bv = a->b ? _mm512_loadu_ps(a->b + v * VL) : _mm512_setzero_ps();
#pragma GCC unroll 8
        for (int r = 0; r < RP; r++) {
            acc[0][r][v] = bv;
#pragma GCC unroll 8
            for (int sp = 1; sp < S; sp++)
                acc[sp][r][v] = _mm512_setzero_ps();
        }
    }
    for (int64_t kh = a->kh0; kh < a->kh1; kh++) {
        int64_t ih = a->ih0 + kh * a->dh;
        for (int64_t kw = a->kw0; kw < a->kw1; kw++) {
            const float *xp = a->x + (ih * a->iw + a->iw0 + kw * a->dw) * a->C;
            const float *wp = a->w + (kh * a->kw + kw) * CPG * VL;
#pragma GCC unroll 8
            for (int r = 0; r < RP; r++)
#pragma GCC unroll 2
                for (int v = 0; v < NV; v++) {
                    __m512 xv = _mm512_loadu_ps(xp + r * xps + v * VL);
                    const float *wv = wp + v * a->wvs;
#pragma GCC unroll 8
                    for (int c = 0; c < CPG; c++)
                        acc[c % S][r][v] =
                            _mm512_fmadd_ps(_mm512_permutexvar_ps(idx[c], xv),
                                            _mm512_loadu_ps(wv + c * VL), acc[c % S][r][v]);
                }
        }
    }
    const __m512 zero = _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int r = 0; r < RP; r++)
#pragma GCC unroll 2
        for (int v = 0; v < NV; v++) {
            __m512 t = acc[0][r][v];
#pragma GCC unroll 8
            for (int sp = 1; sp < S; sp++)
                t = _mm512_add_ps(t, acc[sp][r][v]);
            if (a->z)
                t = _mm512_add_ps(t, _mm512_loadu_ps(a->z + r * a->M + v * VL));
            if (a->relu)
                t = _mm512_max_ps(t, zero);
            _mm512_storeu_ps(a->y + r * a->M + v * VL, t);
        }
}

#define GC_NTILE(RP, NV, CPG)                                                                \
    __attribute__((target("avx512f"))) static void ntile_##RP##_##NV##_##CPG(                \
        const tile_args *a)                                                                  \
    {                                                                                        \
        ntile(a, RP, NV, CPG);                                                               \
    }
#define GC_NTILES(NV, CPG)                                                                   \
    GC_NTILE(1, NV, CPG) GC_NTILE(2, NV, CPG) GC_NTILE(3, NV, CPG) GC_NTILE(4, NV, CPG)      \
    GC_NTILE(5, NV, CPG) GC_NTILE(6, NV, CPG) GC_NTILE(7, NV, CPG) GC_NTILE(8, NV, CPG)
GC_NTILES(1, 2)
GC_NTILES(2, 2)
GC_NTILES(1, 4)
GC_NTILES(2, 4)
GC_NTILES(1, 8)
GC_NTILES(2, 8)
#define GC_NROW(NV, CPG)                                                                     \
    {ntile_1_##NV##_##CPG, ntile_2_##NV##_##CPG, ntile_3_##NV##_##CPG, ntile_4_##NV##_##CPG, \
     ntile_5_##NV##_##CPG, ntile_6_##NV##_##CPG, ntile_7_##NV##_##CPG, ntile_8_##NV##_##CPG}
static const tile_fn ntiles[3][NARROW_VECS][MAX_RP] = {
    {GC_NROW(1, 2), GC_NROW(2, 2)}, {GC_NROW(1, 4), GC_NROW(2, 4)}, {GC_NROW(1, 8), GC_NROW(2, 8)}};

/* Pixels per tile for a wide block of nv vectors: the accumulators
 * (RP * nv), the weights (nv) and a broadcast fit the 32 vector registers. */
static int64_t rp_max(int64_t nv) { return nv >= 4 ? 6 : MAX_RP; }

/* One output row of one unit: the interior pixels [lo, hi) (every tap
 * inside the input) in tiles of up to rmax pixels, the others one by one
 * over their own taps. ta has everything but the pixel's fields; yo0 is Y's
 * offset of the row's first pixel at the unit's (block's) first channel;
 * pl the pad before the input's column 0. (A zero-padded copy of the rows,
 * so that the border pixels join full tiles, measured no faster: the
 * border tiles' time is mostly the first touch of the rows.) */
static void row(const cge__gconv *gc, tile_args *ta, const tile_fn *fns, int64_t rmax, float *y,
                const float *z, int64_t yo0, int64_t lo, int64_t hi, int64_t pl)
{
    int64_t OW = gc->ow;
    for (int64_t ow = 0; ow < OW;) {
        int64_t rp;
        ta->iw0 = ow * gc->sw - pl;
        if (ow < lo || ow >= hi) {
            rp = 1;
            valid_taps(ta->iw0, gc->dw, gc->kw, ta->iw, &ta->kw0, &ta->kw1);
        } else {
            /* the interior in equal tiles (14 pixels: 7 + 7, not 8 + 6) */
            int64_t left = hi - ow, tiles_left = (left + rmax - 1) / rmax;
            rp = (left + tiles_left - 1) / tiles_left;
            ta->kw0 = 0;
            ta->kw1 = gc->kw;
        }
        int64_t yo = yo0 + ow * gc->M;
        ta->y = y + yo;
        ta->z = z ? z + yo : NULL;
        fns[rp - 1](ta);
        ow += rp;
    }
}

static void run_item(const cge__gconv *gc, const float *wp, const float *x, const float *b,
                     const float *z, float *y, bool relu, int64_t u, int64_t n, int64_t oh)
{
    int64_t C = gc->C, M = gc->M, taps = gc->kh * gc->kw;
    tile_args ta = {.C = C, .M = M, .iw = gc->iw, .cpg = gc->cpg, .kw = gc->kw, .dh = gc->dh,
                    .sw = gc->sw, .dw = gc->dw, .relu = relu};
    ta.ih0 = oh * gc->sh - gc->ph;
    valid_taps(ta.ih0, gc->dh, gc->kh, gc->ih, &ta.kh0, &ta.kh1);
    int64_t yrow = ((n * gc->oh + oh) * gc->ow) * M;
    const float *xn = x + n * gc->ih * gc->iw * C;
    int64_t c0, span;
    if (gc->narrow) {
        int64_t v0 = u * NARROW_VECS;
        c0 = v0 * VL;
        span = (gc->vecs - v0 < NARROW_VECS ? gc->vecs - v0 : NARROW_VECS) * VL;
    } else {
        c0 = u * gc->cpg;
        span = gc->cpg;
    }
    /* Interior pixels [lo, hi): every tap of the row inside the input. */
    ta.x = xn + c0;
    int64_t pl = gc->pw, edge = gc->iw - 1 - (gc->kw - 1) * gc->dw + gc->pw;
    int64_t lo = (gc->pw + gc->sw - 1) / gc->sw;
    lo = lo < gc->ow ? lo : gc->ow;
    int64_t hi = edge < 0 ? lo : edge / gc->sw + 1;
    hi = hi < gc->ow ? hi : gc->ow;
    hi = hi > lo ? hi : lo;
    if (gc->narrow) {
        int64_t v0 = u * NARROW_VECS, nv = span / VL;
        ta.wvs = taps * gc->cpg * VL;
        ta.w = wp + v0 * ta.wvs;
        ta.b = b ? b + c0 : NULL;
        int ci = gc->cpg == 2 ? 0 : gc->cpg == 4 ? 1 : 2;
        /* 8 channels: 8 permutation indices and the weights leave room
         * for 5 pixels' accumulators without spilling */
        row(gc, &ta, ntiles[ci][nv - 1], gc->cpg == 8 ? 5 : MAX_RP, y, z, yrow + c0, lo, hi, pl);
        return;
    }
    for (int64_t blk = 0; blk < gc->blocks; blk++) {
        int64_t nv = block_vecs(gc, blk), v0 = block_first(gc, blk);
        if (gc->avx2) {
            /* the block's 16-lane slices one by one, each over the row (all
             * groups of a pixel tile in turn, so that the input streams
             * whole pixels, measured no faster) */
            ta.lanes = nv * VL;
            for (int64_t v = v0; v < v0 + nv; v++) {
                int64_t rest = gc->mpg - v * VL;
                ta.last = rest >= VL ? (__mmask16)0xFFFF : (__mmask16)((1u << rest) - 1u);
                ta.w = wp + u * gc->w_group + taps * gc->cpg * VL * v0 + (v - v0) * VL;
                ta.b = b ? b + u * gc->mpg + v * VL : NULL;
                row(gc, &ta, tiles2, RP2_MAX, y, z, yrow + u * gc->mpg + v * VL, lo, hi, pl);
            }
            continue;
        }
        int64_t rest = gc->mpg - (v0 + nv - 1) * VL;
        ta.last = rest >= VL ? (__mmask16)0xFFFF : (__mmask16)((1u << rest) - 1u);
        ta.w = wp + u * gc->w_group + taps * gc->cpg * VL * v0;
        ta.b = b ? b + u * gc->mpg + v0 * VL : NULL;
        row(gc, &ta, tiles[nv - 1], rp_max(nv), y, z, yrow + u * gc->mpg + v0 * VL, lo, hi, pl);
    }
}

void cge__gconv_run(const cge__gconv *gc, const float *wp, const float *x, const float *b,
                    const float *z, float *y, bool relu, int64_t i0, int64_t i1)
{
    for (int64_t i = i0; i < i1; i++) {
        int64_t u, n, oh;
        cge__gconv_item(gc, i, &u, &n, &oh);
        run_item(gc, wp, x, b, z, y, relu, u, n, oh);
    }
}

#else

/* cge__gconv_init refuses every shape off x86-64: never called. */
void cge__gconv_run(const cge__gconv *gc, const float *wp, const float *x, const float *b,
                    const float *z, float *y, bool relu, int64_t i0, int64_t i1)
{
    (void)gc, (void)wp, (void)x, (void)b, (void)z, (void)y, (void)relu, (void)i0, (void)i1;
}

#endif
