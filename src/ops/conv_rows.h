/* A float32 one-dimensional convolution over channels-last activations as
 * one matrix product, with no im2col: X is [N, W, C], so the window of
 * output position t (input positions t*S - pb .. t*S - pb + K - 1, all C
 * channels of each) is K*C contiguous floats, and consecutive windows start
 * S*C floats apart. The product Y[t, m] = sum_k A[t, k] B[k, m] reads A as
 * the input itself with a row stride of S*C (rows overlap where S < K);
 * B is W [M, C, K] reordered to [K*C, M] and packed once for the GEMM
 * (gemm_kernel.h). Windows that reach into the padding (the first and last
 * few positions) are copied with their zeros into a small buffer and take
 * the same product. Dilation 1, one group. oneDNN's convolution builds JIT
 * code for every such shape (3-28 ms per layer at creation for a wav2vec-like
 * front end's), this path nothing (docs/guide.md, "Conv1d as one product"). */
#ifndef CGE_OPS_CONV_ROWS_H
#define CGE_OPS_CONV_ROWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops/gemm_kernel.h"

typedef struct cge__conv_rows {
    int64_t N, C, M, W, OW, K, S, pb;
    int64_t KK;         /* K * C: the product's depth */
    int64_t t_lo, t_hi; /* output positions whose window is inside X: [t_lo, t_hi) */
} cge__conv_rows;

/* Geometry of a 1-D convolution (dilation d, pads pb and pe, ow outputs);
 * false where this path does not apply (dilation, empty, too many padded
 * windows for the buffer). */
bool cge__conv_rows_init(cge__conv_rows *g, int64_t N, int64_t C, int64_t M, int64_t W,
                         int64_t OW, int64_t K, int64_t S, int64_t d, int64_t pb, int64_t pe);
/* Whether FusedConv takes this path on this machine: where the GEMM runs
 * its AVX-512 kernel (measured against oneDNN's brgconv: as fast or
 * faster, docs/guide.md), or where there is no oneDNN at all (a channels-last
 * 1-D convolution has no other kernel). With AVX2 only, oneDNN's JIT kernels
 * keep them (not measured against each other). */
bool cge__conv_rows_preferred(void);
/* Floats of the packed W, and W [M, C, K] packed into dst (false: out of
 * memory for the reordered copy). */
int64_t cge__conv_rows_packed_floats(const cge__conv_rows *g);
bool cge__conv_rows_pack(const cge__conv_rows *g, const float *w, float *dst);
/* Process-wide count of W packed (tests: once per node, shared by sizes). */
int64_t cge__conv_rows_pack_count(void);
/* Floats of the padded windows of all images (0 without padding), and
 * filling image n's part of them (pads: the buffer of all images) from X. */
int64_t cge__conv_rows_pad_floats(const cge__conv_rows *g);
void cge__conv_rows_fill_pads(const cge__conv_rows *g, const float *x, int64_t n, float *pads);
/* Rows [i0, i1) x columns [j0, j1) of image n's Y (j0 a multiple of 16):
 * the product, plus the bias b [M] when given. */
void cge__conv_rows_tile(const cge__conv_rows *g, const float *wp, const float *x,
                         const float *pads, const float *b, float *y, int64_t n, int64_t i0,
                         int64_t i1, int64_t j0, int64_t j1, cge__gemm_isa isa);

#endif
