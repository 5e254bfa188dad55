/* The packed float32 GEMM under MatMul and Gemm (and the other float32
 * products: FusedMatMul, Conv, Einsum, RNNs): packing, tiles and the
 * micro-kernel chosen at run time. */
#ifndef CGE_OPS_GEMM_KERNEL_H
#define CGE_OPS_GEMM_KERNEL_H

#include <stddef.h>
#include <stdint.h>

/* B is packed once into 16-column panels, A per micro-panel; the
 * register-tiled micro-kernel is AVX-512, AVX2+FMA or portable C. With
 * AVX-512 or AVX2 + FMA, a row-major A with alpha 1 is read in place (the
 * direct kernels) and one-row products take a GEMV kernel; each gives the
 * packed path's bits. Tiles of C are independent so callers spread them over
 * SPMD blocks. */

#define CGE_GEMM_NR 16   /* columns per packed B panel and per micro-tile */
#define CGE_GEMM_KC 256  /* depth of one pass over a micro-panel (L1-sized) */
#define CGE_GEMM_MT 12   /* tile rows are multiples of this (LCM of every MR) */

typedef enum cge__gemm_isa {
    CGE_GEMM_ISA_AUTO = 0,   /* the best the CPU supports */
    CGE_GEMM_ISA_GENERIC,    /* portable C, vectorised by the compiler */
    CGE_GEMM_ISA_AVX2,       /* AVX2 + FMA, 6x16 micro-kernel */
    CGE_GEMM_ISA_AVX512      /* AVX-512F, 12x16 micro-kernel */
} cge__gemm_isa;

/* The best micro-kernel for this CPU (never AUTO). */
cge__gemm_isa cge__gemm_isa_best(void);
/* Whether this CPU can run `isa`. */
int cge__gemm_isa_supported(cge__gemm_isa isa);

/* Floats that cge__gemm_pack_b needs for a K x N matrix: K * roundup(N, 16). */
int64_t cge__gemm_packed_b_floats(int64_t K, int64_t N);
/* Pack panels [p0, p1) of B (B(k,j) = b[k*rs + j*cs], K x N) into `dst`, laid
 * out [panel][k][16] with the last panel zero-padded. */
void cge__gemm_pack_b(const float *b, int64_t rs, int64_t cs, int64_t K, int64_t N, int64_t p0,
                     int64_t p1, float *dst);
/* The inverse of packing every panel: B(k,j) written back at b[k*rs + j*cs]
 * from `packed` (the same values, bit for bit). */
void cge__gemm_unpack_b(const float *packed, int64_t rs, int64_t cs, int64_t K, int64_t N,
                        float *b);

/* C = alpha * A * B + beta * bias, where A(i,k) = a[i*a_rs + k*a_cs], B is
 * packed, C(i,j) = c[i*ldc + j] and bias(i,j) = bias[i*bias_rs + j*bias_cs]
 * (strides 0 broadcast). bias NULL: C = alpha * A * B (C is not read). */
typedef struct cge__gemm_f32 {
    int64_t M, N, K;
    const float *a;
    int64_t a_rs, a_cs;
    const float *bp;
    float *c;
    int64_t ldc;
    float alpha;
    const float *bias;
    int64_t bias_rs, bias_cs;
    float beta;
    cge__gemm_isa isa;   /* AUTO picks the best */
} cge__gemm_f32;

/* Compute rows [i0, i1) x columns [j0, j1) of C on the calling thread. j0 must
 * be a multiple of 16. Uses about 13 KiB of stack. */
void cge__gemm_f32_tile(const cge__gemm_f32 *g, int64_t i0, int64_t i1, int64_t j0, int64_t j1);

/* Columns [j0, j1) of row 0 of an M = 1 product (j0 a multiple of 16) with
 * B unpacked, B(k, j) = b[k * b_rs + j]: for a B that changes every run
 * (attention's keys and values), whose packing would cost as much as the
 * product. g->bp is not read. The same bits as cge__gemm_f32_tile on the
 * packed B. Returns 0, computing nothing, where only the packed path can
 * (neither AVX-512 nor AVX2 + FMA, a strided A, alpha != 1, a bias other
 * than a broadcast row, K = 0). */
int cge__gemv_f32_unpacked(const cge__gemm_f32 *g, const float *b, int64_t b_rs, int64_t j0,
                           int64_t j1);

/* cge__gemm_f32_tile on a B read where it is, B(k, j) = b[k * b_rs + j]
 * (g->bp is not read): for a B that changes every run and is small enough
 * that its tile slices stay in cache (attention's keys and values), where
 * packing would cost a pass over B and a launch of its own. The same bits
 * as the packed path. Returns 0, computing nothing, where only the packed
 * path can (as cge__gemv_f32_unpacked). */
int cge__gemm_f32_tile_unpacked(const cge__gemm_f32 *g, const float *b, int64_t b_rs, int64_t i0,
                                int64_t i1, int64_t j0, int64_t j1);

/* How a batch of M x N products is cut into tiles: tile rows `mt` (multiple of
 * CGE_GEMM_MT), tile columns `nt` (multiple of 16); enough tiles to keep
 * `num_threads` cores busy without making them tiny. */
typedef struct cge__gemm_tiling {
    int64_t mt, nt, tiles_m, tiles_n;
} cge__gemm_tiling;
void cge__gemm_plan(int64_t batch, int64_t M, int64_t N, int num_threads, cge__gemm_tiling *t);

#endif
