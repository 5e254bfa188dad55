/* Concat and Split over channels-last (NHWC) bytes, for the compiler's
 * cge.fused ChannelsLastConcat / ChannelsLastSplit (layout pass, level 3):
 * shapes and "axis" are the logical NCHW ones, as for Concat and Split,
 * whose meta they share. */
#ifndef CGE_OPS_TRANSFORM_NHWC_H
#define CGE_OPS_TRANSFORM_NHWC_H

#include "cge/op.h"

/* Parts one node may join or split into in NHWC. */
#define CGE_NHWC_SEG_MAX_PARTS 128

cge_status cge_concat_infer(cge_infer_ctx *ctx);
cge_status cge_split_infer(cge_infer_ctx *ctx);
cge_status cge_concat_nhwc_launch(const cge_kernel_ctx *ctx, cge_stream *stream);
cge_status cge_split_nhwc_launch(const cge_kernel_ctx *ctx, cge_stream *stream);

#endif
