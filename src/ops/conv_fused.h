/* Meta and kernel entry points of cge.fused FusedConv (schema in
 * fused_conv.c), which share Conv's paths in conv.c: Y = act(Conv(X, W, B) +
 * Z), Z optional, act one of none relu leaky_relu clip sigmoid tanh. */
#ifndef CGE_OPS_CONV_FUSED_H
#define CGE_OPS_CONV_FUSED_H

#include "cge/fused_ops.h" /* cge_fused_conv_channels_last_available, defined in conv.c */
#include "cge/op.h"

cge_status cge_fused_conv_infer(cge_infer_ctx *ctx);
cge_status cge_fused_conv_prepare(const cge_kernel_ctx *ctx, void **state);
void cge_fused_conv_release(void *state);
size_t cge_fused_conv_workspace(const cge_kernel_ctx *ctx);
cge_status cge_fused_conv_launch(const cge_kernel_ctx *ctx, cge_stream *stream);

#endif
