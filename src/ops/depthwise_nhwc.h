/* Channels-last float32 depthwise convolution on AVX-512 or AVX2 + FMA
 * (conv.c's kernel for FusedConv nodes with channels_last, one channel per
 * group, when CGE_DW_NHWC=1; oneDNN's otherwise): weights packed
 * per tap as channel vectors, bias, residual addend and activation applied in
 * registers before the store. */
#ifndef CGE_OPS_DEPTHWISE_NHWC_H
#define CGE_OPS_DEPTHWISE_NHWC_H

#include <stdbool.h>
#include <stdint.h>

/* The epilogue's activation, after y = conv + bias (+ z). The first ones run
 * on the accumulators; the others (sigmoid, tanh, silu, gelu) on the finished
 * pixels through fast_math's row functions, conv.c's epilogue's expressions. */
enum {
    CGE__DW_ACT_NONE, CGE__DW_ACT_RELU, CGE__DW_ACT_LEAKY, CGE__DW_ACT_CLIP,
    CGE__DW_ACT_HSIGMOID, CGE__DW_ACT_HSWISH, CGE__DW_ACT_SIGMOID, CGE__DW_ACT_TANH,
    CGE__DW_ACT_SILU, CGE__DW_ACT_GELU
};

/* Shapes are the logical ones; x, z and y are NHWC bytes ([N][IH][IW][C]).
 * w is packed (cge__dw_nhwc_pack): tap t of channel c at w[t * cp + c]. */
typedef struct cge__dw_nhwc {
    const float *x, *w, *b, *z; /* b: [C] or NULL; z: the output's shape, or NULL */
    float *y;
    int64_t N, C, IH, IW, OH, OW;
    int64_t cp; /* C rounded up to 16 */
    int kh, kw, sh, sw, pt, pl;
    int act;
    float alpha, beta, lo, hi; /* leaky: alpha; hard sigmoid/swish: alpha, beta; clip: lo, hi */
} cge__dw_nhwc;

/* Whether the machine runs the kernel (AVX-512F, or AVX2 and FMA), as
 * cge__cpu_has answers (CGE_CPU_ISA=avx2 picks the AVX2 one), and which:
 * 512, 256, or 0 for none. */
bool cge__dw_nhwc_available(void);
int cge__dw_nhwc_isa(void);
/* Whether the kernel takes this window: kw 3, 5 or 7, kh 1 to 7, strides 1
 * or 2, no dilation (dh, dw 1), pads smaller than the window. */
bool cge__dw_nhwc_takes(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh, int64_t dw,
                        int64_t pt, int64_t pl, int64_t pb, int64_t pr);
/* Floats of the packed weights for C channels and kvol taps. */
int64_t cge__dw_nhwc_packed_floats(int64_t C, int64_t kvol);
/* w [C][kvol] (ONNX's [C, 1, kh, kw]) into dst, channels past C zero. */
void cge__dw_nhwc_pack(const float *w, int64_t C, int64_t kvol, float *dst);
/* Blocks for cge_launch over `threads` workers. */
int64_t cge__dw_nhwc_blocks(const cge__dw_nhwc *a, int threads);
/* cge_launch's function; args is a cge__dw_nhwc. */
void cge__dw_nhwc_fn(int64_t blk, int64_t nblk, void *args);
/* Launches that ran in this process (block 0 counts them): for tests that
 * check which kernel a plan took. */
int64_t cge__dw_nhwc_runs(void);
/* Those of them that ran the AVX2 kernel. */
int64_t cge__dw_nhwc_runs_avx2(void);

/* Internal to the kernel's two files: output rows [r0, r1) (row index
 * n * OH + oh) on AVX2 + FMA (depthwise_nhwc_avx2.c), and the sigmoid, tanh,
 * SiLU or GELU epilogue over n finished floats. */
void cge__dw_nhwc_rows_avx2(const cge__dw_nhwc *a, int64_t r0, int64_t r1);
void cge__dw_nhwc_post(const cge__dw_nhwc *a, float *t, int64_t n);

#endif
