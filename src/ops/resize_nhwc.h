/* Resize over channels-last (NHWC) float32 bytes, for cge.fused
 * ChannelsLastResize (schema in channels_last.c): Resize's inputs, attributes,
 * meta and workspace, and the NHWC kernel. */
#ifndef CGE_OPS_RESIZE_NHWC_H
#define CGE_OPS_RESIZE_NHWC_H

#include "cge/op.h"

/* The channel axis is kept (not resized); the results are the same bits as the
 * NCHW kernel's. */

#define CGE_RESIZE_NUM_INPUTS 4
#define CGE_RESIZE_NUM_ATTRS 9
extern const cge_arg_def cge__resize_inputs[CGE_RESIZE_NUM_INPUTS];
extern const cge_attr_def cge__resize_attrs[CGE_RESIZE_NUM_ATTRS];
/* Resize's and plain_output (1: Y written NCHW from NHWC X, the same bits as
 * an NHWC Y reordered; set by the layout pass where nothing reads Y NHWC). */
extern const cge_attr_def cge__resize_nhwc_attrs[CGE_RESIZE_NUM_ATTRS + 1];
/* The most channels plain_output takes. */
int64_t cge__resize_nhwc_max_plain_channels(void);

cge_status cge__resize_infer(cge_infer_ctx *ctx);
size_t cge__resize_workspace(const cge_kernel_ctx *ctx);
cge_status cge__resize_nhwc_launch(const cge_kernel_ctx *ctx, cge_stream *stream);

#endif
