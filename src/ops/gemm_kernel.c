/* The float32 GEMM: packing, the micro-kernels (one per instruction set, picked
 * at run time because builds target plain x86-64-v2) and tile planning. */
#include "ops/gemm_kernel.h"

#include <stdbool.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define GEMM_X86 1
#else
#define GEMM_X86 0
#endif

#define NR CGE_GEMM_NR
#define KC CGE_GEMM_KC
#define MR_MAX 12

typedef void (*ukr_fn)(int64_t kc, const float *ap, const float *bp, float *out);

int cge_gemm_isa_supported(cge_gemm_isa isa)
{
    switch (isa) {
    case CGE_GEMM_ISA_AUTO:
    case CGE_GEMM_ISA_GENERIC: return 1;
#if GEMM_X86
    case CGE_GEMM_ISA_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case CGE_GEMM_ISA_AVX512: return __builtin_cpu_supports("avx512f");
#endif
    default: return 0;
    }
}

cge_gemm_isa cge_gemm_isa_best(void)
{
    if (cge_gemm_isa_supported(CGE_GEMM_ISA_AVX512))
        return CGE_GEMM_ISA_AVX512;
    if (cge_gemm_isa_supported(CGE_GEMM_ISA_AVX2))
        return CGE_GEMM_ISA_AVX2;
    return CGE_GEMM_ISA_GENERIC;
}

int64_t cge_gemm_packed_b_floats(int64_t K, int64_t N)
{
    return K * ((N + NR - 1) / NR * NR);
}

void cge_gemm_pack_b(const float *b, int64_t rs, int64_t cs, int64_t K, int64_t N, int64_t p0,
                     int64_t p1, float *dst)
{
    for (int64_t p = p0; p < p1; p++) {
        float *d = dst + p * K * NR;
        int64_t j0 = p * NR, nj = N - j0 < NR ? N - j0 : NR;
        if (cs == 1 && nj == NR) {
            for (int64_t k = 0; k < K; k++)
                memcpy(d + k * NR, b + k * rs + j0, NR * sizeof(float));
            continue;
        }
        for (int64_t k = 0; k < K; k++) {
            const float *src = b + k * rs + j0 * cs;
            int64_t j = 0;
            for (; j < nj; j++)
                d[k * NR + j] = src[j * cs];
            for (; j < NR; j++)
                d[k * NR + j] = 0.0f;
        }
    }
}

/* ---- micro-kernels: out[MR][16] = sum_k ap[k][MR] (x) bp[k][16] ---------- */

#define MR_GENERIC 4
static void ukr_generic(int64_t kc, const float *ap, const float *bp, float *out)
{
    float acc[MR_GENERIC][NR];
    memset(acc, 0, sizeof acc);
    for (int64_t k = 0; k < kc; k++) {
        for (int r = 0; r < MR_GENERIC; r++) {
            float a = ap[k * MR_GENERIC + r];
            for (int j = 0; j < NR; j++)
                acc[r][j] += a * bp[k * NR + j];
        }
    }
    memcpy(out, acc, sizeof acc);
}

#if GEMM_X86
#define MR_AVX2 6
/* 12 accumulators + 2 B vectors + 1 broadcast fit the 16 ymm registers. */
__attribute__((target("avx2,fma"))) static void ukr_avx2(int64_t kc, const float *ap,
                                                          const float *bp, float *out)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
    __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
        __m256 a;
        a = _mm256_broadcast_ss(ap + 0);
        c00 = _mm256_fmadd_ps(a, b0, c00);
        c01 = _mm256_fmadd_ps(a, b1, c01);
        a = _mm256_broadcast_ss(ap + 1);
        c10 = _mm256_fmadd_ps(a, b0, c10);
        c11 = _mm256_fmadd_ps(a, b1, c11);
        a = _mm256_broadcast_ss(ap + 2);
        c20 = _mm256_fmadd_ps(a, b0, c20);
        c21 = _mm256_fmadd_ps(a, b1, c21);
        a = _mm256_broadcast_ss(ap + 3);
        c30 = _mm256_fmadd_ps(a, b0, c30);
        c31 = _mm256_fmadd_ps(a, b1, c31);
        a = _mm256_broadcast_ss(ap + 4);
        c40 = _mm256_fmadd_ps(a, b0, c40);
        c41 = _mm256_fmadd_ps(a, b1, c41);
        a = _mm256_broadcast_ss(ap + 5);
        c50 = _mm256_fmadd_ps(a, b0, c50);
        c51 = _mm256_fmadd_ps(a, b1, c51);
        ap += MR_AVX2;
        bp += NR;
    }
    _mm256_storeu_ps(out + 0 * NR, c00);
    _mm256_storeu_ps(out + 0 * NR + 8, c01);
    _mm256_storeu_ps(out + 1 * NR, c10);
    _mm256_storeu_ps(out + 1 * NR + 8, c11);
    _mm256_storeu_ps(out + 2 * NR, c20);
    _mm256_storeu_ps(out + 2 * NR + 8, c21);
    _mm256_storeu_ps(out + 3 * NR, c30);
    _mm256_storeu_ps(out + 3 * NR + 8, c31);
    _mm256_storeu_ps(out + 4 * NR, c40);
    _mm256_storeu_ps(out + 4 * NR + 8, c41);
    _mm256_storeu_ps(out + 5 * NR, c50);
    _mm256_storeu_ps(out + 5 * NR + 8, c51);
}

#define MR_AVX512 12
/* One zmm holds a 16-wide row: 12 accumulators, the FMAs take their A value
 * as a broadcast memory operand. */
__attribute__((target("avx512f"))) static void ukr_avx512(int64_t kc, const float *ap,
                                                           const float *bp, float *out)
{
    __m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps(), c2 = _mm512_setzero_ps();
    __m512 c3 = _mm512_setzero_ps(), c4 = _mm512_setzero_ps(), c5 = _mm512_setzero_ps();
    __m512 c6 = _mm512_setzero_ps(), c7 = _mm512_setzero_ps(), c8 = _mm512_setzero_ps();
    __m512 c9 = _mm512_setzero_ps(), c10 = _mm512_setzero_ps(), c11 = _mm512_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        __m512 b = _mm512_loadu_ps(bp);
        c0 = _mm512_fmadd_ps(_mm512_set1_ps(ap[0]), b, c0);
        c1 = _mm512_fmadd_ps(_mm512_set1_ps(ap[1]), b, c1);
        c2 = _mm512_fmadd_ps(_mm512_set1_ps(ap[2]), b, c2);
        c3 = _mm512_fmadd_ps(_mm512_set1_ps(ap[3]), b, c3);
        c4 = _mm512_fmadd_ps(_mm512_set1_ps(ap[4]), b, c4);
        c5 = _mm512_fmadd_ps(_mm512_set1_ps(ap[5]), b, c5);
        c6 = _mm512_fmadd_ps(_mm512_set1_ps(ap[6]), b, c6);
        c7 = _mm512_fmadd_ps(_mm512_set1_ps(ap[7]), b, c7);
        c8 = _mm512_fmadd_ps(_mm512_set1_ps(ap[8]), b, c8);
        c9 = _mm512_fmadd_ps(_mm512_set1_ps(ap[9]), b, c9);
        c10 = _mm512_fmadd_ps(_mm512_set1_ps(ap[10]), b, c10);
        c11 = _mm512_fmadd_ps(_mm512_set1_ps(ap[11]), b, c11);
        ap += MR_AVX512;
        bp += NR;
    }
    _mm512_storeu_ps(out + 0 * NR, c0);
    _mm512_storeu_ps(out + 1 * NR, c1);
    _mm512_storeu_ps(out + 2 * NR, c2);
    _mm512_storeu_ps(out + 3 * NR, c3);
    _mm512_storeu_ps(out + 4 * NR, c4);
    _mm512_storeu_ps(out + 5 * NR, c5);
    _mm512_storeu_ps(out + 6 * NR, c6);
    _mm512_storeu_ps(out + 7 * NR, c7);
    _mm512_storeu_ps(out + 8 * NR, c8);
    _mm512_storeu_ps(out + 9 * NR, c9);
    _mm512_storeu_ps(out + 10 * NR, c10);
    _mm512_storeu_ps(out + 11 * NR, c11);
}

/* The full-tile fast path: 12 rows of A read in place (unit column stride,
 * row stride lda) instead of packed, the 12x16 result merged straight into C.
 * mode 0: C = acc; 1: C += acc; 2: C = acc + bias[0..16). The sums are
 * formed in the same order as ukr_avx512 + store_tile with alpha = beta = 1,
 * so the bits are the same. */
__attribute__((target("avx512f"))) static void ukr_avx512_direct(int64_t kc, const float *a,
                                                                  int64_t lda, const float *bp,
                                                                  float *c, int64_t ldc, int mode,
                                                                  const float *bias)
{
    __m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps(), c2 = _mm512_setzero_ps();
    __m512 c3 = _mm512_setzero_ps(), c4 = _mm512_setzero_ps(), c5 = _mm512_setzero_ps();
    __m512 c6 = _mm512_setzero_ps(), c7 = _mm512_setzero_ps(), c8 = _mm512_setzero_ps();
    __m512 c9 = _mm512_setzero_ps(), c10 = _mm512_setzero_ps(), c11 = _mm512_setzero_ps();
    const float *a0 = a, *a3 = a + 3 * lda, *a6 = a + 6 * lda, *a9 = a + 9 * lda;
    for (int64_t k = 0; k < kc; k++) {
        __m512 b = _mm512_loadu_ps(bp + k * NR);
        c0 = _mm512_fmadd_ps(_mm512_set1_ps(a0[k]), b, c0);
        c1 = _mm512_fmadd_ps(_mm512_set1_ps(a0[lda + k]), b, c1);
        c2 = _mm512_fmadd_ps(_mm512_set1_ps(a0[2 * lda + k]), b, c2);
        c3 = _mm512_fmadd_ps(_mm512_set1_ps(a3[k]), b, c3);
        c4 = _mm512_fmadd_ps(_mm512_set1_ps(a3[lda + k]), b, c4);
        c5 = _mm512_fmadd_ps(_mm512_set1_ps(a3[2 * lda + k]), b, c5);
        c6 = _mm512_fmadd_ps(_mm512_set1_ps(a6[k]), b, c6);
        c7 = _mm512_fmadd_ps(_mm512_set1_ps(a6[lda + k]), b, c7);
        c8 = _mm512_fmadd_ps(_mm512_set1_ps(a6[2 * lda + k]), b, c8);
        c9 = _mm512_fmadd_ps(_mm512_set1_ps(a9[k]), b, c9);
        c10 = _mm512_fmadd_ps(_mm512_set1_ps(a9[lda + k]), b, c10);
        c11 = _mm512_fmadd_ps(_mm512_set1_ps(a9[2 * lda + k]), b, c11);
    }
    __m512 acc[12] = {c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11};
    __m512 bv = mode == 2 ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
    for (int r = 0; r < 12; r++) {
        float *d = c + r * ldc;
        if (mode == 1)
            _mm512_storeu_ps(d, _mm512_add_ps(_mm512_loadu_ps(d), acc[r]));
        else if (mode == 2)
            _mm512_storeu_ps(d, _mm512_add_ps(bv, acc[r]));
        else
            _mm512_storeu_ps(d, acc[r]);
    }
}
#endif

static void pick(cge_gemm_isa isa, ukr_fn *fn, int *mr)
{
    if (isa == CGE_GEMM_ISA_AUTO)
        isa = cge_gemm_isa_best();
#if GEMM_X86
    if (isa == CGE_GEMM_ISA_AVX512 && cge_gemm_isa_supported(isa)) {
        *fn = ukr_avx512;
        *mr = MR_AVX512;
        return;
    }
    if (isa == CGE_GEMM_ISA_AVX2 && cge_gemm_isa_supported(isa)) {
        *fn = ukr_avx2;
        *mr = MR_AVX2;
        return;
    }
#endif
    *fn = ukr_generic;
    *mr = MR_GENERIC;
}

/* A rows [i, i+rows) x depth [k0, k0+kc) into ap[k][mr], rows past `rows` zero. */
static void pack_a(const cge_gemm_f32 *g, int64_t i, int64_t rows, int64_t k0, int64_t kc,
                   int mr, float *ap)
{
    for (int r = 0; r < mr; r++) {
        if (r >= rows) {
            for (int64_t k = 0; k < kc; k++)
                ap[k * mr + r] = 0.0f;
            continue;
        }
        const float *src = g->a + (i + r) * g->a_rs + k0 * g->a_cs;
        if (g->a_cs == 1) {
            for (int64_t k = 0; k < kc; k++)
                ap[k * mr + r] = src[k];
        } else {
            for (int64_t k = 0; k < kc; k++)
                ap[k * mr + r] = src[k * g->a_cs];
        }
    }
}

/* Merge a micro-tile into C: the first pass over K without a bias overwrites
 * (C may hold garbage), every later pass accumulates. */
static void store_tile(const float *acc, float *c, int64_t ldc, int64_t rows, int64_t cols,
                       float alpha, int overwrite)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *s = acc + r * NR;
        float *d = c + r * ldc;
        if (overwrite) {
            for (int64_t j = 0; j < cols; j++)
                d[j] = alpha * s[j];
        } else {
            for (int64_t j = 0; j < cols; j++)
                d[j] += alpha * s[j];
        }
    }
}

void cge_gemm_f32_tile(const cge_gemm_f32 *g, int64_t i0, int64_t i1, int64_t j0, int64_t j1)
{
    if (i1 > g->M)
        i1 = g->M;
    if (j1 > g->N)
        j1 = g->N;
    if (i0 >= i1 || j0 >= j1)
        return;
    ukr_fn ukr;
    int mr;
    pick(g->isa, &ukr, &mr);
#if GEMM_X86
    /* Unit-stride A, alpha 1 and no bias or a row-broadcast one: full 12x16
     * tiles skip packing A and the scratch tile; the edges take the general
     * path below, pass by pass, so every element sees the same operations. */
    bool direct = ukr == ukr_avx512 && g->a_cs == 1 && g->alpha == 1.0f &&
                  (!g->bias || (g->bias_rs == 0 && g->bias_cs == 1 && g->beta == 1.0f));
    if (direct && g->K > 0) {
        float ap[KC * MR_MAX] __attribute__((aligned(64)));
        float acc[MR_MAX * NR] __attribute__((aligned(64)));
        for (int64_t k0 = 0; k0 < g->K; k0 += KC) {
            int64_t kc = g->K - k0 < KC ? g->K - k0 : KC;
            for (int64_t i = i0; i < i1; i += mr) {
                int64_t rows = i1 - i < mr ? i1 - i : mr;
                bool packed = false;
                for (int64_t j = j0; j < j1; j += NR) {
                    int64_t cols = j1 - j < NR ? j1 - j : NR;
                    const float *bpj = g->bp + (j / NR) * g->K * NR + k0 * NR;
                    float *cij = g->c + i * g->ldc + j;
                    if (rows == mr && cols == NR) {
                        ukr_avx512_direct(kc, g->a + i * g->a_rs + k0, g->a_rs, bpj, cij, g->ldc,
                                          k0 > 0 ? 1 : g->bias ? 2 : 0,
                                          g->bias ? g->bias + j : NULL);
                        continue;
                    }
                    if (!packed)
                        pack_a(g, i, rows, k0, kc, mr, ap);
                    packed = true;
                    ukr(kc, ap, bpj, acc);
                    for (int64_t r = 0; r < rows; r++) {
                        float *d = cij + r * g->ldc;
                        const float *sv = acc + r * NR;
                        for (int64_t q = 0; q < cols; q++)
                            d[q] = k0 > 0 ? d[q] + sv[q] : g->bias ? g->bias[j + q] + sv[q] : sv[q];
                    }
                }
            }
        }
        return;
    }
#endif
    if (g->bias) {
        for (int64_t i = i0; i < i1; i++)
            for (int64_t j = j0; j < j1; j++)
                g->c[i * g->ldc + j] = g->beta * g->bias[i * g->bias_rs + j * g->bias_cs];
    } else if (g->K == 0) {
        for (int64_t i = i0; i < i1; i++)
            memset(g->c + i * g->ldc + j0, 0, (size_t)(j1 - j0) * sizeof(float));
    }
    float ap[KC * MR_MAX] __attribute__((aligned(64)));
    float acc[MR_MAX * NR] __attribute__((aligned(64)));
    for (int64_t k0 = 0; k0 < g->K; k0 += KC) {
        int64_t kc = g->K - k0 < KC ? g->K - k0 : KC;
        int overwrite = k0 == 0 && !g->bias;
        for (int64_t i = i0; i < i1; i += mr) {
            int64_t rows = i1 - i < mr ? i1 - i : mr;
            pack_a(g, i, rows, k0, kc, mr, ap);
            for (int64_t j = j0; j < j1; j += NR) {
                int64_t cols = j1 - j < NR ? j1 - j : NR;
                ukr(kc, ap, g->bp + (j / NR) * g->K * NR + k0 * NR, acc);
                store_tile(acc, g->c + i * g->ldc + j, g->ldc, rows, cols, g->alpha, overwrite);
            }
        }
    }
}

static int64_t round_up(int64_t v, int64_t m)
{
    return (v + m - 1) / m * m;
}

void cge_gemm_plan(int64_t batch, int64_t M, int64_t N, int num_threads, cge_gemm_tiling *t)
{
    int64_t mt = round_up(M > 0 ? M : 1, CGE_GEMM_MT), nt = round_up(N > 0 ? N : 1, NR);
    if (mt > 96)
        mt = 96;
    if (nt > 256)
        nt = 256;
    int64_t want = 2 * (int64_t)(num_threads > 0 ? num_threads : 1);
    for (;;) {
        int64_t tiles = batch * ((M + mt - 1) / mt) * ((N + nt - 1) / nt);
        if (tiles >= want)
            break;
        /* Shrink rows first: a narrower column tile re-packs A more often. */
        if (mt > 2 * CGE_GEMM_MT)
            mt = round_up(mt / 2, CGE_GEMM_MT);
        else if (nt > 4 * NR)
            nt = round_up(nt / 2, NR);
        else if (mt > CGE_GEMM_MT)
            mt = CGE_GEMM_MT;
        else if (nt > NR)
            nt = round_up(nt / 2, NR);
        else
            break;
    }
    t->mt = mt;
    t->nt = nt;
    t->tiles_m = M > 0 ? (M + mt - 1) / mt : 0;
    t->tiles_n = N > 0 ? (N + nt - 1) / nt : 0;
}
