/* Kernel entry points of cge.fused ChannelsLastAffine, which the compiler
 * registers for its layout passes: Y = X * A[c] + B[c] over float32 NHWC
 * activations (an inference BatchNormalization with its constants folded
 * into A and B, float64 [C], computed as BatchNormalization's kernel does,
 * so that the bits are the same); "relu" = 1 applies Relu after. */
#ifndef CGE_OPS_AFFINE_NHWC_H
#define CGE_OPS_AFFINE_NHWC_H

#include "cge/op.h"

cge_status cge_affine_nhwc_infer(cge_infer_ctx *ctx);
cge_status cge_affine_nhwc_launch(const cge_kernel_ctx *ctx, cge_stream *stream);

#endif
