/* float32 convolution through oneDNN's C API, when the build has it
 * (CGE_HAVE_DNNL), and ConvTranspose on its deconvolution: a primitive made once per node, over plain, "blocked" or
 * "channels_last" layouts. */
#ifndef CGE_OPS_DNNL_CONV_H
#define CGE_OPS_DNNL_CONV_H

#include <stddef.h>
#include <stdint.h>

#include "cge/op.h"
#include "cge/status.h"

/* The primitive runs on the calling thread with oneDNN's OpenMP team limited
 * to the engine's thread budget. Plain NCHW activations and OIHW weights by
 * default; "blocked" lets oneDNN pick its own layouts (its direct JIT kernels)
 * and reorders in and out; "channels_last" takes and gives NHWC activations as
 * they are. */

typedef struct cge__dnnl_conv cge__dnnl_conv;

/* One forward convolution: N, C, M, G and 1 to 3 spatial dims, each with its
 * input and output size, kernel, stride, dilation (1 = none) and pads. */
typedef struct cge__dnnl_conv_desc {
    int64_t N, C, M, G;
    int32_t nsp;
    int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
    int has_bias;
    /* Epilogue wanted, in this order: sum: y = conv + z; eltwise (a
     * CGE_DNNL_ELT_*): relu with slope alpha below 0, clip to [alpha, beta],
     * x sigmoid(x), exact GELU, HardSwish, sigmoid, tanh, HardSigmoid
     * (alpha x + beta, clipped to [0, 1]). Taken as post-ops
     * only in blocked mode (with plain layouts oneDNN picks its GEMM-based
     * kernel, where post-ops measured 2x slower than a separate pass);
     * cge__dnnl_conv_post_ops says which were taken. */
    int sum, eltwise;
    float alpha, beta;
    /* Let oneDNN choose activation and weight layouts. W must then be a
     * constant: it is reordered once and reused while its address stays. */
    int blocked;
    /* X, Z and Y are channels-last (N, spatial..., C: cge's NHWC format) and
     * oneDNN picks the weights' layout (W constant, as for blocked): its
     * brgemm kernels read and write these directly, so no activation is
     * reordered, and every post-op is taken. */
    int channels_last;
    /* bfloat16 X and W (converted by reorders: X on every run, a constant W
     * once), float32 bias, accumulation and Y. */
    int bf16;
    /* A transposed convolution (ONNX ConvTranspose: W is [C, M/G, k...],
     * in/out the input's and output's sizes, pb/pe its pads after
     * output_padding and output_shape are resolved): oneDNN's deconvolution,
     * or, channels-last with a kernel equal to its stride and no pads,
     * dilation or groups (non-overlapping windows), one oneDNN matmul of X
     * by W rearranged that writes Y as it lies (dnnl_conv.c, "ConvTranspose
     * as one matmul"). */
    int transpose;
    /* OpenMP threads it runs with (0: 1). oneDNN sizes its scratch for the
     * threads at creation, so runs must use the same number: creation and
     * runs set it on the calling thread and restore the caller's after. */
    int threads;
    /* Ask for oneDNN's Winograd convolution (3x3, stride 1, float32, W
     * constant): made for one image and run once per image, so that one
     * primitive, one weights layout and the same arithmetic serve every
     * batch (oneDNN's own choice switches from F(2x2,3x3) to the less exact
     * F(4x4,3x3), with another weights layout, as the batch grows). Its
     * activations are blocked: X, Z and Y are reordered from and to their
     * layout (plain or channels-last) per image. Where oneDNN refuses it
     * (post-ops, ISA), the direct convolution is made instead;
     * cge__dnnl_conv_winograd says which was. */
    int winograd;
    /* Channels-last X, Z and Y reordered per run to and from oneDNN's
     * 8-channel blocked layout (nChw8c) around its direct convolution, the
     * blocked copies in the caller's scratch: on AVX2 machines its jit:avx2
     * kernel ran a 3x3 layer in 0.55-0.9x its NHWC form's time (docs/guide.md,
     * "Convolutions on AVX2 machines"). Taken for a direct, ungrouped,
     * float32, non-transposed channels-last convolution (not with Winograd);
     * cge__dnnl_conv_blocked8 says whether it was. */
    int blocked8;
} cge__dnnl_conv_desc;

/* Whether this build has oneDNN (dnnl_common.c). */
int cge__dnnl_available(void);

enum { CGE_DNNL_POST_SUM = 1, CGE_DNNL_POST_ELTWISE = 2 };
enum {
    CGE_DNNL_ELT_NONE, CGE_DNNL_ELT_RELU, CGE_DNNL_ELT_CLIP, CGE_DNNL_ELT_SWISH,
    CGE_DNNL_ELT_GELU_ERF, CGE_DNNL_ELT_HARDSWISH, CGE_DNNL_ELT_LOGISTIC, CGE_DNNL_ELT_TANH,
    CGE_DNNL_ELT_HARDSIGMOID
};

/* Make the primitive; CGE_ERR_UNSUPPORTED when oneDNN is absent or refuses. */
cge_status cge__dnnl_conv_create(const cge__dnnl_conv_desc *d, cge__dnnl_conv **out);
/* Scratch bytes the primitive needs from the caller. */
size_t cge__dnnl_conv_scratch_size(const cge__dnnl_conv *c);
/* The same, for d, from its primitive descriptor alone (no primitive made):
 * what a workspace query at a new shape needs. */
cge_status cge__dnnl_conv_scratch_query(const cge__dnnl_conv_desc *d, size_t *bytes);
/* Process-wide counts: convolutions made by cge__dnnl_conv_create, scratch
 * queries answered by cge__dnnl_conv_scratch_query (tests). */
void cge__dnnl_conv_counts(int64_t *made, int64_t *queried);
/* Process-wide: Winograd primitives made (tests). */
int64_t cge__dnnl_conv_winograd_made(void);
/* Process-wide: transposed convolutions made in their matmul form (a
 * kernel equal to the stride, no pads, dilation or groups, channels-last:
 * one oneDNN matmul instead of its deconvolution; tests). */
int64_t cge__dnnl_conv_deconv_matmul_made(void);
/* Process-wide: convolutions made with desc.blocked8 taken (tests). */
int64_t cge__dnnl_conv_blocked8_made(void);
/* Whether c runs on nChw8c copies of its channels-last activations. */
bool cge__dnnl_conv_blocked8(const cge__dnnl_conv *c);
/* Whether c is the per-image Winograd primitive (desc.winograd taken). */
bool cge__dnnl_conv_winograd(const cge__dnnl_conv *c);
/* Process-wide count of constant weights reordered into a primitive's
 * layout (a packed copy made, shared or not; tests: packed once for every
 * batch). */
int64_t cge__dnnl_weight_reorders(void);
/* The CGE_DNNL_POST_* the primitive applies itself. */
int cge__dnnl_conv_post_ops(const cge__dnnl_conv *c);
/* Run on the calling thread with the OpenMP threads it was made for; z is the addend when the sum post-op was taken (else ignored). */
cge_status cge__dnnl_conv_run(cge__dnnl_conv *c, const float *x, const float *w, const float *b,
                             const float *z, float *y, void *scratch);
/* Reorder a constant W into the primitive's layout now (when the plan is
 * prepared) rather than on the first run; later runs with the same W reuse
 * it. The reordered copy comes from ctx's shared cache (cge_kernel_shared_get):
 * primitives of one session graph that chose the same layout share one. Nothing
 * to do for plain weights. */
cge_status cge__dnnl_conv_prepack(cge__dnnl_conv *c, const cge_kernel_ctx *ctx, const float *w);
/* Whether runs with the W given to prepack read only its reordered copy
 * (prepack reordered it; a W used in its own layout is read as it is). */
bool cge__dnnl_conv_weights_packed(const cge__dnnl_conv *c);
void cge__dnnl_conv_destroy(cge__dnnl_conv *c);

#endif
