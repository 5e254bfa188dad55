/* Meta and kernels of cge.fused ChannelsLastAffine (Y = X * A[c] + B[c], then
 * Relu if "relu" = 1) and ChannelsLastScale over float32 NHWC activations;
 * schemas in channels_last.c. */
#ifndef CGE_OPS_AFFINE_NHWC_H
#define CGE_OPS_AFFINE_NHWC_H

#include "cge/op.h"

/* ChannelsLastAffine: an inference BatchNormalization with its constants
 * folded into A and B, float64 [C], computed as BatchNormalization's kernel
 * does, so that the bits are the same. */

cge_status cge__affine_nhwc_infer(cge_infer_ctx *ctx);
cge_status cge__affine_nhwc_launch(const cge_kernel_ctx *ctx, cge_stream *stream);

/* cge.fused ChannelsLastScale: Y = X * S over float32 NHWC activations,
 * S [N or 1, C, 1, ...] (a squeeze-excitation gate): Mul's broadcast, the
 * same float products. */
cge_status cge__scale_nhwc_infer(cge_infer_ctx *ctx);
cge_status cge__scale_nhwc_launch(const cge_kernel_ctx *ctx, cge_stream *stream);

#endif
