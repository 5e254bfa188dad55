/* A channels-last 1-D convolution as one GEMM over overlapping windows
 * (conv_rows.h). */
#include "ops/conv_rows.h"

#include "ops/dnnl_conv.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Padded windows of all images past this many floats take oneDNN's path
 * (a short input with wide padding: nearly an im2col). */
#define PAD_FLOATS_MAX (1 << 20)

bool cge__conv_rows_init(cge__conv_rows *g, int64_t N, int64_t C, int64_t M, int64_t W,
                         int64_t OW, int64_t K, int64_t S, int64_t d, int64_t pb, int64_t pe)
{
    if (N <= 0 || C <= 0 || M <= 0 || W <= 0 || OW <= 0 || K <= 0 || S <= 0 || d != 1 ||
        pb < 0 || pe < 0 || OW != (W + pb + pe - K) / S + 1)
        return false;
    *g = (cge__conv_rows){.N = N, .C = C, .M = M, .W = W, .OW = OW, .K = K, .S = S, .pb = pb,
                          .KK = K * C};
    int64_t lo = (pb + S - 1) / S;
    int64_t hi = W - K + pb >= 0 ? (W - K + pb) / S + 1 : 0;
    g->t_lo = lo < OW ? lo : OW;
    g->t_hi = hi < g->t_lo ? g->t_lo : hi > OW ? OW : hi;
    return cge__conv_rows_pad_floats(g) <= PAD_FLOATS_MAX;
}

int64_t cge__conv_rows_packed_floats(const cge__conv_rows *g)
{
    return cge__gemm_packed_b_floats(g->KK, g->M);
}

bool cge__conv_rows_preferred(void)
{
    return cge__gemm_isa_best() == CGE_GEMM_ISA_AVX512 || !cge__dnnl_available();
}

static atomic_llong packs;

int64_t cge__conv_rows_pack_count(void)
{
    return atomic_load(&packs);
}

bool cge__conv_rows_pack(const cge__conv_rows *g, const float *w, float *dst)
{
    atomic_fetch_add(&packs, 1);
    /* B[kw * C + c][m] = W[m][c][kw], the order of a window's floats */
    int64_t C = g->C, K = g->K, M = g->M;
    float *b = malloc(sizeof(float) * (size_t)(g->KK * M));
    if (!b)
        return false;
    for (int64_t m = 0; m < M; m++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t kw = 0; kw < K; kw++)
                b[(kw * C + c) * M + m] = w[(m * C + c) * K + kw];
    cge__gemm_pack_b(b, M, 1, g->KK, M, 0, (M + 15) / 16, dst);
    free(b);
    return true;
}

static int64_t pad_windows(const cge__conv_rows *g)
{
    return g->t_lo + (g->OW - g->t_hi);
}

int64_t cge__conv_rows_pad_floats(const cge__conv_rows *g)
{
    return g->N * pad_windows(g) * g->KK;
}

void cge__conv_rows_fill_pads(const cge__conv_rows *g, const float *x, int64_t n, float *pads)
{
    int64_t C = g->C;
    const float *xn = x + n * g->W * C;
    float *pn = pads + n * pad_windows(g) * g->KK;
    for (int64_t q = 0; q < pad_windows(g); q++) {
        int64_t t = q < g->t_lo ? q : g->t_hi + (q - g->t_lo);
        float *row = pn + q * g->KK;
        for (int64_t kw = 0; kw < g->K; kw++) {
            int64_t pos = t * g->S - g->pb + kw;
            if (pos >= 0 && pos < g->W)
                memcpy(row + kw * C, xn + pos * C, sizeof(float) * (size_t)C);
            else
                memset(row + kw * C, 0, sizeof(float) * (size_t)C);
        }
    }
}

/* Rows [r0, r1) of one part (padded top, inside, padded bottom) of size
 * `rows`, A from `a` with row stride a_rs, C from c. */
static void part(const cge__conv_rows *g, const float *wp, const float *a, int64_t a_rs,
                 const float *b, float *c, int64_t rows, int64_t r0, int64_t r1, int64_t j0,
                 int64_t j1, cge__gemm_isa isa)
{
    r0 = r0 < 0 ? 0 : r0;
    r1 = r1 > rows ? rows : r1;
    if (r1 <= r0)
        return;
    cge__gemm_f32 gm = {.M = rows, .N = g->M, .K = g->KK, .a = a, .a_rs = a_rs, .a_cs = 1,
                        .bp = wp, .c = c, .ldc = g->M, .alpha = 1.0f, .bias = b,
                        .bias_rs = 0, .bias_cs = 1, .beta = b ? 1.0f : 0.0f, .isa = isa};
    cge__gemm_f32_tile(&gm, r0, r1, j0, j1);
}

void cge__conv_rows_tile(const cge__conv_rows *g, const float *wp, const float *x,
                         const float *pads, const float *b, float *y, int64_t n, int64_t i0,
                         int64_t i1, int64_t j0, int64_t j1, cge__gemm_isa isa)
{
    j1 = j1 < g->M ? j1 : g->M;
    if (j1 <= j0)
        return;
    int64_t M = g->M, OW = g->OW;
    float *yn = y + n * OW * M;
    const float *pn = pads ? pads + n * pad_windows(g) * g->KK : NULL;
    if (g->t_lo > 0)
        part(g, wp, pn, g->KK, b, yn, g->t_lo, i0, i1, j0, j1, isa);
    if (g->t_hi > g->t_lo)
        part(g, wp, x + (n * g->W + g->t_lo * g->S - g->pb) * g->C, g->S * g->C, b,
             yn + g->t_lo * M, g->t_hi - g->t_lo, i0 - g->t_lo, i1 - g->t_lo, j0, j1, isa);
    if (OW > g->t_hi)
        part(g, wp, pn + g->t_lo * g->KK, g->KK, b, yn + g->t_hi * M, OW - g->t_hi,
             i0 - g->t_hi, i1 - g->t_hi, j0, j1, isa);
}
