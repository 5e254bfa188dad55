/* The float32 GEMM: packing, the micro-kernels (one per instruction set, picked
 * at run time because builds target plain x86-64-v2) and tile planning. */
#include "ops/gemm_kernel.h"

#include "cge/model_file.h" /* cge_cpu_features: the one answer, CGE_CPU_ISA applied */

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

int cge__gemm_isa_supported(cge__gemm_isa isa)
{
    switch (isa) {
    case CGE_GEMM_ISA_AUTO:
    case CGE_GEMM_ISA_GENERIC: return 1;
#if GEMM_X86
    case CGE_GEMM_ISA_AVX2:
        return (cge_cpu_features() & (CGE_CPU_AVX2 | CGE_CPU_FMA)) == (CGE_CPU_AVX2 | CGE_CPU_FMA);
    case CGE_GEMM_ISA_AVX512: return (cge_cpu_features() & CGE_CPU_AVX512F) != 0;
#endif
    default: return 0;
    }
}

cge__gemm_isa cge__gemm_isa_best(void)
{
    if (cge__gemm_isa_supported(CGE_GEMM_ISA_AVX512))
        return CGE_GEMM_ISA_AVX512;
    if (cge__gemm_isa_supported(CGE_GEMM_ISA_AVX2))
        return CGE_GEMM_ISA_AVX2;
    return CGE_GEMM_ISA_GENERIC;
}

int64_t cge__gemm_packed_b_floats(int64_t K, int64_t N)
{
    return K * ((N + NR - 1) / NR * NR);
}

void cge__gemm_pack_b(const float *b, int64_t rs, int64_t cs, int64_t K, int64_t N, int64_t p0,
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

void cge__gemm_unpack_b(const float *packed, int64_t rs, int64_t cs, int64_t K, int64_t N,
                        float *b)
{
    for (int64_t j0 = 0; j0 < N; j0 += NR) {
        const float *d = packed + j0 * K;   /* panel j0 / NR: K * NR floats */
        int64_t nj = N - j0 < NR ? N - j0 : NR;
        for (int64_t k = 0; k < K; k++)
            for (int64_t j = 0; j < nj; j++)
                b[k * rs + (j0 + j) * cs] = d[k * NR + j];
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
                                                                  int64_t ks, float *c, int64_t ldc,
                                                                  int mode, const float *bias)
{
    __m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps(), c2 = _mm512_setzero_ps();
    __m512 c3 = _mm512_setzero_ps(), c4 = _mm512_setzero_ps(), c5 = _mm512_setzero_ps();
    __m512 c6 = _mm512_setzero_ps(), c7 = _mm512_setzero_ps(), c8 = _mm512_setzero_ps();
    __m512 c9 = _mm512_setzero_ps(), c10 = _mm512_setzero_ps(), c11 = _mm512_setzero_ps();
    const float *a0 = a, *a3 = a + 3 * lda, *a6 = a + 6 * lda, *a9 = a + 9 * lda;
    for (int64_t k = 0; k < kc; k++) {
        __m512 b = _mm512_loadu_ps(bp + k * ks);
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

/* ukr_avx512_direct on two neighbouring 16-column panels at once (12x32, 24
 * accumulators): each broadcast A value feeds two FMAs, so the loop is bound
 * by the FMA units rather than by the loads (13 loads per 12 FMAs in the
 * 12x16 kernel). Same order of operations per element, so the same bits. */
__attribute__((target("avx512f"))) static void ukr_avx512_direct2(int64_t kc, const float *a,
                                                                   int64_t lda, const float *bp0,
                                                                   const float *bp1, int64_t ks,
                                                                   float *c, int64_t ldc, int mode,
                                                                   const float *bias)
{
    __m512 c00 = _mm512_setzero_ps(), c01 = _mm512_setzero_ps(), c10 = _mm512_setzero_ps();
    __m512 c11 = _mm512_setzero_ps(), c20 = _mm512_setzero_ps(), c21 = _mm512_setzero_ps();
    __m512 c30 = _mm512_setzero_ps(), c31 = _mm512_setzero_ps(), c40 = _mm512_setzero_ps();
    __m512 c41 = _mm512_setzero_ps(), c50 = _mm512_setzero_ps(), c51 = _mm512_setzero_ps();
    __m512 c60 = _mm512_setzero_ps(), c61 = _mm512_setzero_ps(), c70 = _mm512_setzero_ps();
    __m512 c71 = _mm512_setzero_ps(), c80 = _mm512_setzero_ps(), c81 = _mm512_setzero_ps();
    __m512 c90 = _mm512_setzero_ps(), c91 = _mm512_setzero_ps(), ca0 = _mm512_setzero_ps();
    __m512 ca1 = _mm512_setzero_ps(), cb0 = _mm512_setzero_ps(), cb1 = _mm512_setzero_ps();
    const float *a0 = a, *a3 = a + 3 * lda, *a6 = a + 6 * lda, *a9 = a + 9 * lda;
    for (int64_t k = 0; k < kc; k++) {
        __m512 b0 = _mm512_loadu_ps(bp0 + k * ks), b1 = _mm512_loadu_ps(bp1 + k * ks), av;
#define ROW2(acc0, acc1, src)                                                                      \
    av = _mm512_set1_ps(src);                                                                      \
    acc0 = _mm512_fmadd_ps(av, b0, acc0);                                                          \
    acc1 = _mm512_fmadd_ps(av, b1, acc1);
        ROW2(c00, c01, a0[k])
        ROW2(c10, c11, a0[lda + k])
        ROW2(c20, c21, a0[2 * lda + k])
        ROW2(c30, c31, a3[k])
        ROW2(c40, c41, a3[lda + k])
        ROW2(c50, c51, a3[2 * lda + k])
        ROW2(c60, c61, a6[k])
        ROW2(c70, c71, a6[lda + k])
        ROW2(c80, c81, a6[2 * lda + k])
        ROW2(c90, c91, a9[k])
        ROW2(ca0, ca1, a9[lda + k])
        ROW2(cb0, cb1, a9[2 * lda + k])
#undef ROW2
    }
    __m512 acc[24] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51,
                      c60, c61, c70, c71, c80, c81, c90, c91, ca0, ca1, cb0, cb1};
    __m512 bv0 = mode == 2 ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
    __m512 bv1 = mode == 2 ? _mm512_loadu_ps(bias + NR) : _mm512_setzero_ps();
    for (int r = 0; r < 12; r++) {
        float *d = c + r * ldc;
        if (mode == 1) {
            _mm512_storeu_ps(d, _mm512_add_ps(_mm512_loadu_ps(d), acc[2 * r]));
            _mm512_storeu_ps(d + NR, _mm512_add_ps(_mm512_loadu_ps(d + NR), acc[2 * r + 1]));
        } else if (mode == 2) {
            _mm512_storeu_ps(d, _mm512_add_ps(bv0, acc[2 * r]));
            _mm512_storeu_ps(d + NR, _mm512_add_ps(bv1, acc[2 * r + 1]));
        } else {
            _mm512_storeu_ps(d, acc[2 * r]);
            _mm512_storeu_ps(d + NR, acc[2 * r + 1]);
        }
    }
}

/* The direct kernels' edges: R (1-12) rows of A in place, one or (TWO) two
 * 16-column panels, the last one's columns masked by `last` (B's panels are
 * zero-padded; C and the bias are only touched under the mask). R and TWO
 * are constants at each call below, so the row loops unroll and the
 * accumulators stay in registers. The same operations per element as the
 * packed path, so the same bits. */
__attribute__((target("avx512f"), always_inline)) static inline void
direct_edge(const int R, const int TWO, int64_t kc, const float *a, int64_t lda, const float *bp0,
            const float *bp1, int64_t ks, float *c, int64_t ldc, int mode, const float *bias,
            __mmask16 last)
{
    __m512 acc0[12], acc1[12];
#pragma GCC unroll 12
    for (int r = 0; r < R; r++) {
        acc0[r] = _mm512_setzero_ps();
        acc1[r] = _mm512_setzero_ps();
    }
    for (int64_t k = 0; k < kc; k++) {
        /* The last panel's columns past N under the mask: zeros in a packed
         * B, not read at all in an unpacked one. */
        __m512 b0 = TWO ? _mm512_loadu_ps(bp0 + k * ks) : _mm512_maskz_loadu_ps(last, bp0 + k * ks);
        __m512 b1 = TWO ? _mm512_maskz_loadu_ps(last, bp1 + k * ks) : b0;
#pragma GCC unroll 12
        for (int r = 0; r < R; r++) {
            __m512 av = _mm512_set1_ps(a[r * lda + k]);
            acc0[r] = _mm512_fmadd_ps(av, b0, acc0[r]);
            if (TWO)
                acc1[r] = _mm512_fmadd_ps(av, b1, acc1[r]);
        }
    }
    __mmask16 m0 = TWO ? (__mmask16)0xffff : last, m1 = last;
    __m512 bv0 = mode == 2 ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
    __m512 bv1 = TWO && mode == 2 ? _mm512_maskz_loadu_ps(m1, bias + NR) : _mm512_setzero_ps();
#pragma GCC unroll 12
    for (int r = 0; r < R; r++) {
        float *d = c + r * ldc;
        __m512 v0 = acc0[r], v1 = acc1[r];
        if (mode == 1) {
            v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, d), v0);
            if (TWO)
                v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, d + NR), v1);
        } else if (mode == 2) {
            v0 = _mm512_add_ps(bv0, v0);
            if (TWO)
                v1 = _mm512_add_ps(bv1, v1);
        }
        _mm512_mask_storeu_ps(d, m0, v0);
        if (TWO)
            _mm512_mask_storeu_ps(d + NR, m1, v1);
    }
}

/* One row of A against NP (1-8, a constant at each call) neighbouring
 * 16-column panels of B (panel p's row k at bp + p * pstride + k * kstride:
 * packed, or B itself with unit column stride), the last one's columns
 * masked by `last`: NP independent accumulators, where the one-row edge
 * kernel has one or two chains that wait on the FMA latency, and NP streams
 * of B in flight at once (an M=1 product, a decoding step's, only streams
 * B). The same operations per element as the direct kernels, in the same
 * order, so the same bits. */
__attribute__((target("avx512f"), always_inline)) static inline void
gemv_panels(const int NP, int64_t kc, const float *a, const float *bp, int64_t pstride,
            int64_t kstride, float *c, int mode, const float *bias, __mmask16 last)
{
    __m512 acc[8];
#pragma GCC unroll 8
    for (int p = 0; p < NP; p++)
        acc[p] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        __m512 av = _mm512_set1_ps(a[k]);
#pragma GCC unroll 8
        for (int p = 0; p < NP - 1; p++)
            acc[p] = _mm512_fmadd_ps(av, _mm512_loadu_ps(bp + p * pstride + k * kstride), acc[p]);
        acc[NP - 1] = _mm512_fmadd_ps(
            av, _mm512_maskz_loadu_ps(last, bp + (NP - 1) * pstride + k * kstride), acc[NP - 1]);
    }
#pragma GCC unroll 8
    for (int p = 0; p < NP; p++) {
        __mmask16 m = p == NP - 1 ? last : (__mmask16)0xffff;
        __m512 v = acc[p];
        if (mode == 1)
            v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, c + p * NR), v);
        else if (mode == 2)
            v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, bias + p * NR), v);
        _mm512_mask_storeu_ps(c + p * NR, m, v);
    }
}

/* Columns [j0, j1) of one row of C (j0 a multiple of 16) over depth
 * [k0, k0 + kc), eight panels at a time; B packed (b NULL: g->bp) or
 * unpacked, B(k, j) = b[k * b_rs + j]. */
__attribute__((target("avx512f"))) static void gemv_row_avx512(const cge__gemm_f32 *g,
                                                                const float *b, int64_t b_rs,
                                                                const float *a, int64_t k0,
                                                                int64_t kc, float *c, int64_t j0,
                                                                int64_t j1)
{
    int mode = k0 > 0 ? 1 : g->bias ? 2 : 0;
    for (int64_t j = j0; j < j1; j += 8 * NR) {
        int64_t cols = j1 - j < 8 * NR ? j1 - j : 8 * NR;
        int np = (int)((cols + NR - 1) / NR);
        int64_t tail = cols - (int64_t)(np - 1) * NR;
        __mmask16 last = (__mmask16)((1u << tail) - 1u);
        const float *bp = b ? b + k0 * b_rs + j : g->bp + (j / NR) * g->K * NR + k0 * NR;
        int64_t pstride = b ? NR : g->K * NR, kstride = b ? b_rs : NR;
        const float *bias = g->bias ? g->bias + j : NULL;
        switch (np) {
#define GEMV_CASE(P)                                                                               \
    case P: gemv_panels(P, kc, a + k0, bp, pstride, kstride, c + j, mode, bias, last); break;
            GEMV_CASE(1) GEMV_CASE(2) GEMV_CASE(3) GEMV_CASE(4)
            GEMV_CASE(5) GEMV_CASE(6) GEMV_CASE(7) GEMV_CASE(8)
#undef GEMV_CASE
        default: break;
        }
    }
}

__attribute__((target("avx512f"))) static void ukr_avx512_edge(int rows, int two, int64_t kc,
                                                                const float *a, int64_t lda,
                                                                const float *bp0, const float *bp1,
                                                                int64_t ks, float *c, int64_t ldc,
                                                                int mode, const float *bias,
                                                                __mmask16 last)
{
#define EDGE_CASE(R)                                                                               \
    case R:                                                                                        \
        if (two)                                                                                   \
            direct_edge(R, 1, kc, a, lda, bp0, bp1, ks, c, ldc, mode, bias, last);                 \
        else                                                                                       \
            direct_edge(R, 0, kc, a, lda, bp0, bp1, ks, c, ldc, mode, bias, last);                 \
        break;
    switch (rows) {
        EDGE_CASE(1) EDGE_CASE(2) EDGE_CASE(3) EDGE_CASE(4) EDGE_CASE(5) EDGE_CASE(6)
        EDGE_CASE(7) EDGE_CASE(8) EDGE_CASE(9) EDGE_CASE(10) EDGE_CASE(11) EDGE_CASE(12)
    default: break;
    }
#undef EDGE_CASE
}
/* Rows [i0, i1) x columns [j0, j1) of C by the direct kernels (A read in
 * place), depth slice by depth slice; B packed (b NULL: g->bp) or unpacked,
 * B(k, j) = b[k * b_rs + j]: panel q's row k at q * K * NR + k * NR in the
 * packed B, at k * b_rs + q * NR in B itself. */
__attribute__((target("avx512f"))) static void direct_tiles(const cge__gemm_f32 *g, const float *b,
                                                             int64_t b_rs, int64_t i0, int64_t i1,
                                                             int64_t j0, int64_t j1)
{
    const int mr = MR_AVX512;
    int64_t pstride = b ? NR : g->K * NR, ks = b ? b_rs : NR;
    for (int64_t k0 = 0; k0 < g->K; k0 += KC) {
        int64_t kc = g->K - k0 < KC ? g->K - k0 : KC;
        int mode = k0 > 0 ? 1 : g->bias ? 2 : 0;
        for (int64_t i = i0; i < i1; i += mr) {
            int64_t rows = i1 - i < mr ? i1 - i : mr;
            const float *ai = g->a + i * g->a_rs + k0;
            for (int64_t j = j0; j < j1; j += NR) {
                int64_t cols = j1 - j < NR ? j1 - j : NR;
                const float *bpj = b ? b + k0 * b_rs + j : g->bp + (j / NR) * g->K * NR + k0 * NR;
                float *cij = g->c + i * g->ldc + j;
                const float *bias = g->bias ? g->bias + j : NULL;
                if (rows == mr && j + 2 * NR <= j1) {
                    ukr_avx512_direct2(kc, ai, g->a_rs, bpj, bpj + pstride, ks, cij, g->ldc, mode,
                                       bias);
                    j += NR; /* the loop steps over the second panel */
                    continue;
                }
                if (rows == mr && cols == NR) {
                    ukr_avx512_direct(kc, ai, g->a_rs, bpj, ks, cij, g->ldc, mode, bias);
                    continue;
                }
                /* Edge rows or columns: pairs of panels where both are whole,
                 * else one (masked when partial). */
                int two = j + 2 * NR <= j1;
                int64_t last = two ? NR : cols;
                ukr_avx512_edge((int)rows, two, kc, ai, g->a_rs, bpj, two ? bpj + pstride : bpj, ks,
                                cij, g->ldc, mode, bias, (__mmask16)((1u << last) - 1u));
                if (two)
                    j += NR;
            }
        }
    }
}

/* ---- AVX2 + FMA direct paths ------------------------------------------------
 * The AVX-512 direct paths' counterparts for machines without AVX-512 (AMD
 * Zen 1-3, Intel client cores): A read in place, the result merged straight
 * into C, one-row products on their own kernel. 16 ymm registers: a 6x16
 * tile's 12 accumulators, the two halves of a B row and the broadcast A
 * value. Every element sees the operations of ukr_avx2 + store_tile (one FMA
 * per k in order, then one add into C per depth slice), so every AVX2 path
 * gives the same bits. */

/* The columns [0, cols) of a 16-wide row into C (cols < 16: through a
 * scratch row, so nothing past the edge is touched). */
__attribute__((target("avx2,fma"), always_inline)) static inline void
avx2_merge_row(float *d, __m256 v0, __m256 v1, int cols, int mode, const float *bias)
{
    if (cols == NR) {
        if (mode == 1) {
            v0 = _mm256_add_ps(_mm256_loadu_ps(d), v0);
            v1 = _mm256_add_ps(_mm256_loadu_ps(d + 8), v1);
        } else if (mode == 2) {
            v0 = _mm256_add_ps(_mm256_loadu_ps(bias), v0);
            v1 = _mm256_add_ps(_mm256_loadu_ps(bias + 8), v1);
        }
        _mm256_storeu_ps(d, v0);
        _mm256_storeu_ps(d + 8, v1);
        return;
    }
    float t[NR];
    _mm256_storeu_ps(t, v0);
    _mm256_storeu_ps(t + 8, v1);
    for (int j = 0; j < cols; j++)
        d[j] = mode == 1 ? d[j] + t[j] : mode == 2 ? bias[j] + t[j] : t[j];
}

/* R (1-6) rows of A in place (row stride lda) against one 16-column panel
 * of B (row k at bp + k * ks), the result's columns [0, cols) merged into C.
 * mode 0: C = acc; 1: C += acc; 2: C = acc + bias. `masked`: B holds only
 * `cols` columns (an unpacked B's last panel), read under a mask. R is a
 * constant at each call, so the row loops unroll into registers. */
__attribute__((target("avx2,fma"), always_inline)) static inline void
direct_avx2(const int R, int64_t kc, const float *a, int64_t lda, const float *bp, int64_t ks,
            float *c, int64_t ldc, int mode, const float *bias, int cols, int masked,
            const float *pf, int64_t npf)
{
    __m256 acc0[6], acc1[6];
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
        acc0[r] = _mm256_setzero_ps();
        acc1[r] = _mm256_setzero_ps();
    }
    if (!masked) {
        for (int64_t k = 0; k < kc; k++) {
            __m256 b0 = _mm256_loadu_ps(bp + k * ks), b1 = _mm256_loadu_ps(bp + k * ks + 8);
            if (k < npf)
                _mm_prefetch((const char *)(pf + k * NR), _MM_HINT_T0);
#pragma GCC unroll 6
            for (int r = 0; r < R; r++) {
                __m256 av = _mm256_broadcast_ss(a + r * lda + k);
                acc0[r] = _mm256_fmadd_ps(av, b0, acc0[r]);
                acc1[r] = _mm256_fmadd_ps(av, b1, acc1[r]);
            }
        }
    } else {
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), lane);
        __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols - 8), lane);
        for (int64_t k = 0; k < kc; k++) {
            __m256 b0 = _mm256_maskload_ps(bp + k * ks, m0);
            __m256 b1 = _mm256_maskload_ps(bp + k * ks + 8, m1);
#pragma GCC unroll 6
            for (int r = 0; r < R; r++) {
                __m256 av = _mm256_broadcast_ss(a + r * lda + k);
                acc0[r] = _mm256_fmadd_ps(av, b0, acc0[r]);
                acc1[r] = _mm256_fmadd_ps(av, b1, acc1[r]);
            }
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; r++)
        avx2_merge_row(c + r * ldc, acc0[r], acc1[r], cols, mode, bias);
}

__attribute__((target("avx2,fma"))) static void ukr_avx2_direct6(int64_t kc, const float *a,
                                                                  int64_t lda, const float *bp,
                                                                  int64_t ks, float *c,
                                                                  int64_t ldc, int mode,
                                                                  const float *bias)
{
    direct_avx2(6, kc, a, lda, bp, ks, c, ldc, mode, bias, NR, 0, NULL, 0);
}

/* ukr_avx2_direct6 that also fetches `npf` rows of the next panel's depth
 * slice (`pf`, a packed panel's 64-byte rows) into L1, one per step: the
 * blocks of rows of a panel share the next one's slice between them, so it
 * starts from L1, not from L3 or memory. */
__attribute__((target("avx2,fma"))) static void ukr_avx2_direct6_pf(int64_t kc, const float *a,
                                                                     int64_t lda, const float *bp,
                                                                     int64_t ks, float *c,
                                                                     int64_t ldc, int mode,
                                                                     const float *bias,
                                                                     const float *pf, int64_t npf)
{
    direct_avx2(6, kc, a, lda, bp, ks, c, ldc, mode, bias, NR, 0, pf, npf);
}

__attribute__((target("avx2,fma"))) static void ukr_avx2_edge(int rows, int64_t kc,
                                                               const float *a, int64_t lda,
                                                               const float *bp, int64_t ks,
                                                               float *c, int64_t ldc, int mode,
                                                               const float *bias, int cols,
                                                               int masked)
{
    switch (rows) {
#define EDGE2_CASE(R)                                                                              \
    case R: direct_avx2(R, kc, a, lda, bp, ks, c, ldc, mode, bias, cols, masked, NULL, 0); break;
        EDGE2_CASE(1) EDGE2_CASE(2) EDGE2_CASE(3) EDGE2_CASE(4) EDGE2_CASE(5) EDGE2_CASE(6)
#undef EDGE2_CASE
    default: break;
    }
}

static void gemv_row_avx2(const cge__gemm_f32 *g, const float *b, int64_t b_rs, const float *a,
                          int64_t k0, int64_t kc, float *c, int64_t j0, int64_t j1);

/* Rows [i0, i1) x columns [j0, j1) of C by the AVX2 direct kernels, depth
 * slice by depth slice; B packed (b NULL: g->bp) or unpacked, as
 * direct_tiles. Panel by panel, the 6-row blocks inside: a panel's depth
 * slice (16 KiB at KC = 256) stays in L1 while the rows of A stream from L2,
 * where the other order would stream B's panels through L1 for every block
 * of 6 rows (2 of 6 FMAs' operands from L2 instead of 1 in 16). */
__attribute__((target("avx2,fma"))) static void direct_tiles_avx2(const cge__gemm_f32 *g,
                                                                   const float *b, int64_t b_rs,
                                                                   int64_t i0, int64_t i1,
                                                                   int64_t j0, int64_t j1)
{
    const int mr = MR_AVX2;
    int64_t ks = b ? b_rs : NR;
    /* One row past the last block of 6 takes the GEMV kernel: 12
     * independent sums where the edge kernel would have 2 waiting on the FMA
     * latency (two rows keep the edge kernel, which streams B once). */
    int64_t i_end = (i1 - i0) % mr == 1 && i1 - i0 > 1 ? i1 - 1 : i1;
    for (int64_t k0 = 0; k0 < g->K; k0 += KC) {
        int64_t kc = g->K - k0 < KC ? g->K - k0 : KC;
        int mode = k0 > 0 ? 1 : g->bias ? 2 : 0;
        for (int64_t j = j0; j < j1; j += NR) {
            int cols = (int)(j1 - j < NR ? j1 - j : NR);
            const float *bpj = b ? b + k0 * b_rs + j : g->bp + (j / NR) * g->K * NR + k0 * NR;
            const float *bias = g->bias ? g->bias + j : NULL;
            int masked = b && cols < NR;
            /* The next panel's slice (packed B: the next panel, or the
             * first of the next depth slice) in shares, one per full block
             * of rows. */
            const float *next = NULL;
            if (!b && j + NR < j1)
                next = bpj + g->K * NR;
            else if (!b && k0 + KC < g->K)
                next = g->bp + (j0 / NR) * g->K * NR + (k0 + KC) * NR;
            int64_t blocks = (i1 - i0) / mr, share = blocks > 0 ? (kc + blocks - 1) / blocks : 0;
            for (int64_t i = i0; i < i_end; i += mr) {
                int64_t rows = i_end - i < mr ? i_end - i : mr;
                const float *ai = g->a + i * g->a_rs + k0;
                float *cij = g->c + i * g->ldc + j;
                int64_t first = (i - i0) / mr * share;
                if (rows == mr && cols == NR && next && first < kc)
                    ukr_avx2_direct6_pf(kc, ai, g->a_rs, bpj, ks, cij, g->ldc, mode, bias,
                                        next + first * NR, kc - first < share ? kc - first : share);
                else if (rows == mr && cols == NR)
                    ukr_avx2_direct6(kc, ai, g->a_rs, bpj, ks, cij, g->ldc, mode, bias);
                else
                    ukr_avx2_edge((int)rows, kc, ai, g->a_rs, bpj, ks, cij, g->ldc, mode, bias,
                                  cols, masked);
            }
        }
        for (int64_t i = i_end; i < i1; i++)
            gemv_row_avx2(g, b, b_rs, g->a + i * g->a_rs, k0, kc, g->c + i * g->ldc, j0, j1);
    }
}

/* One row of A against NP (1-6) neighbouring panels (panel p's row k at
 * bp + p * pstride + k * kstride), the last one's columns [0, last) only
 * (`masked`: read under a mask, an unpacked B's edge): 2 NP independent
 * accumulators and NP streams of B in flight. Same bits as the tiles. */
__attribute__((target("avx2,fma"), always_inline)) static inline void
gemv_panels_avx2(const int NP, int64_t kc, const float *a, const float *bp, int64_t pstride,
                 int64_t kstride, float *c, int mode, const float *bias, int last, int masked)
{
    __m256 acc[12];
#pragma GCC unroll 12
    for (int p = 0; p < 2 * NP; p++)
        acc[p] = _mm256_setzero_ps();
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(masked ? last : NR), lane);
    __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(masked ? last - 8 : NR), lane);
    if (!masked) {
        for (int64_t k = 0; k < kc; k++) {
            __m256 av = _mm256_broadcast_ss(a + k);
#pragma GCC unroll 6
            for (int p = 0; p < NP; p++) {
                const float *s = bp + p * pstride + k * kstride;
                acc[2 * p] = _mm256_fmadd_ps(av, _mm256_loadu_ps(s), acc[2 * p]);
                acc[2 * p + 1] = _mm256_fmadd_ps(av, _mm256_loadu_ps(s + 8), acc[2 * p + 1]);
            }
        }
    } else {
        for (int64_t k = 0; k < kc; k++) {
            __m256 av = _mm256_broadcast_ss(a + k);
#pragma GCC unroll 6
            for (int p = 0; p < NP - 1; p++) {
                const float *s = bp + p * pstride + k * kstride;
                acc[2 * p] = _mm256_fmadd_ps(av, _mm256_loadu_ps(s), acc[2 * p]);
                acc[2 * p + 1] = _mm256_fmadd_ps(av, _mm256_loadu_ps(s + 8), acc[2 * p + 1]);
            }
            const float *s = bp + (NP - 1) * pstride + k * kstride;
            acc[2 * NP - 2] = _mm256_fmadd_ps(av, _mm256_maskload_ps(s, m0), acc[2 * NP - 2]);
            acc[2 * NP - 1] = _mm256_fmadd_ps(av, _mm256_maskload_ps(s + 8, m1), acc[2 * NP - 1]);
        }
    }
#pragma GCC unroll 6
    for (int p = 0; p < NP; p++)
        avx2_merge_row(c + p * NR, acc[2 * p], acc[2 * p + 1], p == NP - 1 ? last : NR, mode,
                       bias ? bias + p * NR : NULL);
}

/* Columns [j0, j1) of one row of C (j0 a multiple of 16) over depth
 * [k0, k0 + kc), six panels at a time; B packed (b NULL) or unpacked. */
__attribute__((target("avx2,fma"))) static void gemv_row_avx2(const cge__gemm_f32 *g,
                                                               const float *b, int64_t b_rs,
                                                               const float *a, int64_t k0,
                                                               int64_t kc, float *c, int64_t j0,
                                                               int64_t j1)
{
    int mode = k0 > 0 ? 1 : g->bias ? 2 : 0;
    for (int64_t j = j0; j < j1; j += 6 * NR) {
        int64_t cols = j1 - j < 6 * NR ? j1 - j : 6 * NR;
        int np = (int)((cols + NR - 1) / NR);
        int last = (int)(cols - (int64_t)(np - 1) * NR);
        int masked = b && last < NR;
        const float *bp = b ? b + k0 * b_rs + j : g->bp + (j / NR) * g->K * NR + k0 * NR;
        int64_t pstride = b ? NR : g->K * NR, kstride = b ? b_rs : NR;
        const float *bias = g->bias ? g->bias + j : NULL;
        switch (np) {
#define GEMV2_CASE(P)                                                                              \
    case P:                                                                                        \
        gemv_panels_avx2(P, kc, a + k0, bp, pstride, kstride, c + j, mode, bias, last, masked);    \
        break;
            GEMV2_CASE(1) GEMV2_CASE(2) GEMV2_CASE(3) GEMV2_CASE(4) GEMV2_CASE(5) GEMV2_CASE(6)
#undef GEMV2_CASE
        default: break;
        }
    }
}
#endif

static void pick(cge__gemm_isa isa, ukr_fn *fn, int *mr)
{
    if (isa == CGE_GEMM_ISA_AUTO)
        isa = cge__gemm_isa_best();
#if GEMM_X86
    if (isa == CGE_GEMM_ISA_AVX512 && cge__gemm_isa_supported(isa)) {
        *fn = ukr_avx512;
        *mr = MR_AVX512;
        return;
    }
    if (isa == CGE_GEMM_ISA_AVX2 && cge__gemm_isa_supported(isa)) {
        *fn = ukr_avx2;
        *mr = MR_AVX2;
        return;
    }
#endif
    *fn = ukr_generic;
    *mr = MR_GENERIC;
}

/* A rows [i, i+rows) x depth [k0, k0+kc) into ap[k][mr], rows past `rows` zero. */
static void pack_a(const cge__gemm_f32 *g, int64_t i, int64_t rows, int64_t k0, int64_t kc,
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

#if GEMM_X86
/* The direct paths (A read in place) of either instruction set: one row on
 * the GEMV kernel, more on the tiles; B packed (b NULL) or unpacked. */
static void direct_run(const cge__gemm_f32 *g, bool avx512, const float *b, int64_t b_rs,
                       int64_t i0, int64_t i1, int64_t j0, int64_t j1)
{
    if (i1 - i0 == 1) {
        const float *a = g->a + i0 * g->a_rs;
        float *c = g->c + i0 * g->ldc;
        for (int64_t k0 = 0; k0 < g->K; k0 += KC) {
            int64_t kc = g->K - k0 < KC ? g->K - k0 : KC;
            if (avx512)
                gemv_row_avx512(g, b, b_rs, a, k0, kc, c, j0, j1);
            else
                gemv_row_avx2(g, b, b_rs, a, k0, kc, c, j0, j1);
        }
        return;
    }
    if (avx512)
        direct_tiles(g, b, b_rs, i0, i1, j0, j1);
    else
        direct_tiles_avx2(g, b, b_rs, i0, i1, j0, j1);
}
#endif

void cge__gemm_f32_tile(const cge__gemm_f32 *g, int64_t i0, int64_t i1, int64_t j0, int64_t j1)
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
    bool direct = (ukr == ukr_avx512 || ukr == ukr_avx2) && g->a_cs == 1 && g->alpha == 1.0f &&
                  (!g->bias || (g->bias_rs == 0 && g->bias_cs == 1 && g->beta == 1.0f));
    if (direct && g->K > 0) {
        direct_run(g, ukr == ukr_avx512, NULL, 0, i0, i1, j0, j1);
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

#if GEMM_X86
/* The unpacked paths' conditions: A read by rows, no alpha, a bias row at
 * most, and the AVX-512 or AVX2 kernels chosen and present. Returns the
 * instruction set, or GENERIC where only the packed path can. */
static cge__gemm_isa unpacked_direct_isa(const cge__gemm_f32 *g)
{
    cge__gemm_isa isa = g->isa == CGE_GEMM_ISA_AUTO ? cge__gemm_isa_best() : g->isa;
    if (g->a_cs != 1 || g->alpha != 1.0f || g->K <= 0 ||
        (g->bias && (g->bias_rs != 0 || g->bias_cs != 1 || g->beta != 1.0f)) ||
        (isa != CGE_GEMM_ISA_AVX512 && isa != CGE_GEMM_ISA_AVX2) || !cge__gemm_isa_supported(isa))
        return CGE_GEMM_ISA_GENERIC;
    return isa;
}
#endif

int cge__gemv_f32_unpacked(const cge__gemm_f32 *g, const float *b, int64_t b_rs, int64_t j0,
                           int64_t j1)
{
    return cge__gemm_f32_tile_unpacked(g, b, b_rs, 0, 1, j0, j1);
}

int cge__gemm_f32_tile_unpacked(const cge__gemm_f32 *g, const float *b, int64_t b_rs, int64_t i0,
                                int64_t i1, int64_t j0, int64_t j1)
{
#if GEMM_X86
    cge__gemm_isa isa = unpacked_direct_isa(g);
    if (isa == CGE_GEMM_ISA_GENERIC)
        return 0;
    if (i1 > g->M)
        i1 = g->M;
    if (j1 > g->N)
        j1 = g->N;
    if (i0 < i1 && j0 < j1)
        direct_run(g, isa == CGE_GEMM_ISA_AVX512, b, b_rs, i0, i1, j0, j1);
    return 1;
#else
    (void)g, (void)b, (void)b_rs, (void)i0, (void)i1, (void)j0, (void)j1;
    return 0;
#endif
}

static int64_t round_up(int64_t v, int64_t m)
{
    return (v + m - 1) / m * m;
}

/* Estimated time of a batch-1 tiling on `threads` cores: tiles taken in
 * order by the least-loaded core (as the pool's block claiming does); a tile
 * costs its rows rounded up to whole micro-panels, plus one panel for
 * streaming its slice of B once (so that splitting rows, which re-reads all
 * of B per tile, is not free), times its columns rounded up to 16. */
static int64_t tiling_makespan(int64_t M, int64_t N, int64_t mt, int64_t nt, int threads)
{
    int64_t load[8] = {0};
    int T = threads < 8 ? threads : 8;
    for (int64_t i0 = 0; i0 < M; i0 += mt)
        for (int64_t j0 = 0; j0 < N; j0 += nt) {
            int64_t rows = M - i0 < mt ? M - i0 : mt, cols = N - j0 < nt ? N - j0 : nt;
            int64_t cost = (round_up(rows, CGE_GEMM_MT) + CGE_GEMM_MT) * round_up(cols, NR);
            int best = 0;
            for (int k = 1; k < T; k++)
                if (load[k] < load[best])
                    best = k;
            load[best] += cost;
        }
    int64_t worst = 0;
    for (int k = 0; k < T; k++)
        worst = load[k] > worst ? load[k] : worst;
    return worst;
}

/* A single product cut into fewer tiles than about 4 per core balances
 * poorly, and each row split streams all of B again: try cutting it into
 * p x q near-equal tiles (p, q <= 4; columns at most 512 so that a depth
 * slice of B stays in L2) and keep the best estimate, the given one on ties. */
static void balance_small(int64_t M, int64_t N, int threads, int64_t *mt, int64_t *nt)
{
    int64_t best = tiling_makespan(M, N, *mt, *nt, threads);
    for (int p = 1; p <= 4; p++)
        for (int q = 1; q <= 4; q++) {
            int64_t m = round_up((M + p - 1) / p, CGE_GEMM_MT), n = round_up((N + q - 1) / q, NR);
            if (n > 512)
                continue;
            int64_t cost = tiling_makespan(M, N, m, n, threads);
            if (cost < best) {
                best = cost;
                *mt = m;
                *nt = n;
            }
        }
}

void cge__gemm_plan(int64_t batch, int64_t M, int64_t N, int num_threads, cge__gemm_tiling *t)
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
    if (batch == 1 && num_threads > 1 && num_threads <= 8 && M > 0 && N > 0 &&
        ((M + mt - 1) / mt) * ((N + nt - 1) / nt) < 4 * (int64_t)num_threads)
        balance_small(M, N, num_threads, &mt, &nt);
    t->mt = mt;
    t->nt = nt;
    t->tiles_m = M > 0 ? (M + mt - 1) / mt : 0;
    t->tiles_n = N > 0 ? (N + nt - 1) / nt : 0;
}
