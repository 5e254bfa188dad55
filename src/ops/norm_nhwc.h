/* Meta and kernel of cge.fused ChannelsLastGroupNorm (norm.c): a group
 * normalisation of float32 NHWC activations, written by the layout passes for
 * the exported GroupNorm (Reshape -> InstanceNormalization -> Reshape);
 * schema in channels_last.c. */
#ifndef CGE_OPS_NORM_NHWC_H
#define CGE_OPS_NORM_NHWC_H

#include "cge/op.h"

/* X [N, C, D1, ...] in NHWC format, scale and bias float32 [G] (G divides C):
 * each image's G groups of C/G consecutive channels normalised over their
 * channels and positions, then y = x * a[g] + b[g], the same bits as
 * InstanceNormalization's kernel on the plain [N, G, C/G * D1 * ...] tensor;
 * then optional A, B float64 [C] (a ChannelsLastAffine it absorbed: y * A + B)
 * and "activation" relu or gelu (exact), each as its own kernel computes it. */
cge_status cge__group_norm_nhwc_infer(cge_infer_ctx *ctx);
cge_status cge__group_norm_nhwc_launch(const cge_kernel_ctx *ctx, cge_stream *stream);
size_t cge__group_norm_nhwc_workspace(const cge_kernel_ctx *ctx);

#endif
