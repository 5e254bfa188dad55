/* int8 convolution and matrix product through oneDNN's C API, when the build
 * has it (CGE_HAVE_DNNL): u8/s8 activations, s8 or u8 weights with zero
 * points packed once, int32 bias, per-tensor or per-channel requantisation
 * scales and zero points. */
#ifndef CGE_OPS_DNNL_QCONV_H
#define CGE_OPS_DNNL_QCONV_H

#include <stddef.h>
#include <stdint.h>

#include "cge/op.h"
#include "cge/status.h"

/* y = saturate(round_half_even(clip(scale[m] * (acc + bias[m]))) + y_zp),
 * acc the exact int32 sum of (x - x_zp) * w over the window (padding reads
 * x_zp, i.e. a real zero). oneDNN applies the scale to the int32 sum converted
 * to float, as cge's own kernels do, so results agree with them except where
 * |acc| passes 2^24. */

typedef struct cge__dnnl_qconv cge__dnnl_qconv;

typedef struct cge__dnnl_qconv_desc {
    /* Convolution: N, C, M, G, 1 to 3 spatial dims (as cge__dnnl_conv_desc).
     * Matrix product (matmul set): N rows of K = C values times a [C, M]
     * weight; the spatial fields are ignored. */
    int matmul;
    int64_t N, C, M, G;
    int32_t nsp;
    int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
    int x_signed, y_signed;        /* s8 rather than u8 */
    int has_bias;                  /* int32 [M] */
    const float *scale;            /* 1 or M requantisation factors */
    int64_t num_scales;
    int32_t x_zp, y_zp;
    /* Clamp of the scaled value before the zero point is added (Relu/Clip
     * folded into the requantisation); off when clip is 0. */
    int clip;
    float lo, hi;
    /* X and Y channels-last (NHWC); else plain NCHW, reordered in and out. */
    int channels_last;
    int threads;                   /* OpenMP threads it runs with (0: 1) */
    /* The weights: s8, or u8 with w_u8; w_zp their zero points (NULL: 0),
     * one or M values, u8 with w_zp_u8 else s8. oneDNN takes s8 weights
     * without zero points only, so otherwise `w` (the constant weights,
     * the ones prepack gets) decides at creation: where every w - w_zp
     * fits s8 that is the weight packed (exact); else w - 128 (u8) or w
     * (s8) is, with an extra all-ones output channel per group giving
     * S = sum(x - x_zp) over the window, and the int32 sums come back to a
     * requantisation of cge's own: acc + (128 or 0 - w_zp[m]) * S, exact. */
    int w_u8;
    const void *w_zp;
    int w_zp_u8;
    int64_t num_w_zp;
    const void *w;
} cge__dnnl_qconv_desc;

/* CGE_ERR_UNSUPPORTED when oneDNN is absent or refuses. */
cge_status cge__dnnl_qconv_create(const cge__dnnl_qconv_desc *d, cge__dnnl_qconv **out);
/* Reorder the constant weights (OIHW / GOIHW, or [K, N] for a matmul; s8
 * or u8 as the description said) into the primitive's layout, shared
 * through ctx's cache. */
cge_status cge__dnnl_qconv_prepack(cge__dnnl_qconv *c, const cge_kernel_ctx *ctx, const void *w);
/* The blocks a launch runs: a matrix product of enough rows is cut into
 * slices, one per block of cge's pool, each on one thread; else one block,
 * where oneDNN runs its own OpenMP team. One of them (prepack first). */
int64_t cge__dnnl_qconv_blocks(const cge__dnnl_qconv *c, int threads);
cge_status cge__dnnl_qconv_run_block(cge__dnnl_qconv *c, const void *x, const int32_t *bias,
                                     void *y, int64_t blk, int64_t nblk);
/* Elements [*e0, *e1) of y that block blk of nblk writes: whole rows (all
 * their channels) of a band, of a matrix product's slice, or the whole
 * output for one block; 0 where the blocks are channel slices. Work on those
 * rows may follow on the same thread (QConvAdd's residual add). */
int cge__dnnl_qconv_block_span(const cge__dnnl_qconv *c, int64_t blk, int64_t nblk, int64_t *e0,
                               int64_t *e1);
/* Run on the calling thread, every block in turn (prepack first). */
cge_status cge__dnnl_qconv_run(cge__dnnl_qconv *c, const void *x, const int32_t *bias, void *y);
void cge__dnnl_qconv_destroy(cge__dnnl_qconv *c);

#endif
