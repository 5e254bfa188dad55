/* Grouped float32 convolutions (1 < group, more than one input channel per
 * group) over channels-last activations: weights packed once per node and a
 * direct AVX-512 or AVX2 + FMA kernel, register-tiled over output pixels x
 * output channels. */
#ifndef CGE_OPS_CONV_GROUPED_H
#define CGE_OPS_CONV_GROUPED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* X is [N, IH, IW, C] (cge's NHWC), Y and Z [N, OH, OW, M], W the ONNX
 * weight [M, C/G, KH, KW]; 1-D convolutions are IH = OH = KH = 1.
 *
 * Wide groups: each group's output channels are cut into vectors of 16 (the
 * last one masked) and the vectors into register blocks of up to 4; an input
 * channel is broadcast to every lane. A block's packed weights are
 * [KH*KW][C/G][16 * its vectors], zero past the group's channels.
 *
 * Narrow groups (2, 4 or 8 channels in and out per group, M a multiple of
 * 16): one vector holds 16 / (C/G) whole groups, and the 16 input channels
 * it reads are loaded once per pixel and tap and permuted within each group
 * (a lane gets its own group's channel c), so that every lane does useful
 * work where a broadcast would leave all but C/G of them idle. Packed
 * weights are [M / 16][KH*KW][C/G][16]. */
typedef struct cge__gconv {
    int64_t N, C, M, G, cpg, mpg;
    int64_t ih, iw, oh, ow, kh, kw, sh, sw, dh, dw, ph, pw;
    bool narrow;
    bool avx2;         /* the AVX2 + FMA tiles (no AVX-512): wide groups only */
    int64_t vecs;      /* wide: ceil(mpg / 16); narrow: M / 16 */
    int64_t blocks;    /* wide: register blocks per group, ceil(vecs / 4) */
    int64_t w_group;   /* wide: packed floats per group, KH*KW * cpg * vecs * 16 */
    /* Work units of an output row: wide, the groups; narrow, pairs of
     * vectors. */
    int64_t units;
    /* Work items are one output row of one unit of one image; unit-major
     * (the unit's weights stay in cache over its rows) when the packed
     * weights are too big to stay in cache over a row of every unit. */
    bool group_major;
} cge__gconv;

/* Fill gc for the geometry (pb: the pads at the start of each dim; the end
 * pads are implied by the output sizes). False where this kernel cannot run
 * it: neither AVX-512 nor AVX2 + FMA, a group of one input channel, sizes out
 * of range. Without AVX-512 every group runs the wide layout on AVX2 tiles of
 * 16 output channels (two 8-lane vectors) x up to 6 pixels. */
bool cge__gconv_init(cge__gconv *gc, int64_t N, int64_t C, int64_t M, int64_t G,
                     const int64_t in[2], const int64_t out[2], const int64_t k[2],
                     const int64_t s[2], const int64_t d[2], const int64_t pb[2]);

/* Whether the engine should run gc on this kernel rather than oneDNN's
 * primitive: the shape class where it measured faster (docs/zoo.md,
 * "Grouped convolutions"): narrow groups of 2 or 4 channels, where oneDNN's
 * kernel computes in 4-channel blocks; none on the AVX2 tiles (docs/guide.md,
 * "AVX2 depthwise and grouped kernels": no faster than oneDNN's jit:avx2). */
bool cge__gconv_preferred(const cge__gconv *gc);

/* Whether a and b are one geometry (a launch's against its prepare's). */
bool cge__gconv_same(const cge__gconv *a, const cge__gconv *b);

/* Floats of the packed weights. */
int64_t cge__gconv_packed_floats(const cge__gconv *gc);
/* Pack W into dst (laid out as cge__gconv says). */
void cge__gconv_pack(const cge__gconv *gc, const float *w, float *dst);
/* Process-wide count of cge__gconv_pack calls (tests: the kernel was chosen). */
int64_t cge__gconv_pack_count(void);

/* Work items of one run (N * OH * units), the unit, image and output row of
 * item i in the order gc chose, and the output channels [c0, c1) of a unit. */
int64_t cge__gconv_items(const cge__gconv *gc);
void cge__gconv_item(const cge__gconv *gc, int64_t i, int64_t *u, int64_t *n, int64_t *oh);
void cge__gconv_unit_channels(const cge__gconv *gc, int64_t u, int64_t *c0, int64_t *c1);

/* Items [i0, i1) on the calling thread: y = conv(x, packed w) + b (NULL:
 * none) + z (NULL: none), then max(y, 0) where relu is set. */
void cge__gconv_run(const cge__gconv *gc, const float *wp, const float *x, const float *b,
                    const float *z, float *y, bool relu, int64_t i0, int64_t i1);

/* The same items by the plain loop (the reference the tests compare with;
 * W unpacked). */
void cge__gconv_run_ref(const cge__gconv *gc, const float *w, const float *x, const float *b,
                        const float *z, float *y, bool relu, int64_t i0, int64_t i1);

#endif
