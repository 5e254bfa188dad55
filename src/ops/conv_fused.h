/* Meta and kernel entry points of cge.fused FusedConv (schema in
 * fused_conv.c), which share Conv's paths in conv.c: Y = act(Conv(X, W, B) +
 * Z), Z optional, act one of none relu leaky_relu clip sigmoid tanh silu
 * hardsigmoid hardswish gelu. */
#ifndef CGE_OPS_CONV_FUSED_H
#define CGE_OPS_CONV_FUSED_H

#include "cge/fused_ops.h" /* cge_fused_conv_channels_last_available, defined in conv.c */
#include "cge/op.h"

/* Conv's attributes (its schema's, in this order), the first of FusedConv's:
 * one list, so that the two cannot drift apart. */
#define CGE__CONV_ATTR_DEFS                                                                       \
    {"auto_pad", CGE_ATTR_STRING, false, 0, 0.0f, "NOTSET",                                       \
     "NOTSET, SAME_UPPER, SAME_LOWER, VALID"},                                                    \
    {"dilations", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "per spatial dim, default 1"},             \
    {"group", CGE_ATTR_INT, false, 1, 0.0f, NULL, "channel groups"},                              \
    {"kernel_shape", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "taken from W when absent"},            \
    {"pads", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "begins then ends, default 0"},                 \
    {"strides", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "per spatial dim, default 1"}

cge_status cge__fused_conv_infer(cge_infer_ctx *ctx);
cge_status cge__fused_conv_prepare(const cge_kernel_ctx *ctx, void **state);
void cge__fused_conv_release(void *state);
size_t cge__fused_conv_workspace(const cge_kernel_ctx *ctx);
cge_status cge__fused_conv_launch(const cge_kernel_ctx *ctx, cge_stream *stream);

#endif
