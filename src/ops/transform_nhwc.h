/* Concat, Split, channel shuffle and Transpose views over channels-last
 * (NHWC) bytes, the kernels of cge.fused ChannelsLastConcat /
 * ChannelsLastSplit / ChannelsLastShuffle / LayoutView (schemas in
 * channels_last.c). */
#ifndef CGE_OPS_TRANSFORM_NHWC_H
#define CGE_OPS_TRANSFORM_NHWC_H

#include "cge/fused_ops.h" /* CGE_CHANNELS_LAST_MAX_PARTS */
#include "cge/op.h"

/* Shapes and "axis" are the logical NCHW ones, as for Concat and Split, whose
 * meta they share. */

cge_status cge__concat_infer(cge_infer_ctx *ctx);
cge_status cge__transpose_infer(cge_infer_ctx *ctx);
/* cge.fused LayoutView: a Transpose between NHWC bytes and the plain tensor
 * of the transposed shape, whose bytes are the same (perm [0,2,...,1] of
 * NHWC data, or [0,r-1,1,...] giving NHWC data): the plan makes the output
 * a view of the input; a copy otherwise. */
cge_status cge__layout_view_launch(const cge_kernel_ctx *ctx, cge_stream *stream);
cge_status cge__split_infer(cge_infer_ctx *ctx);
/* Split's meta; without 'split', ceil_pieces gives Split-18's num_outputs
 * pieces (ceil(dim / n), the last smaller) instead of n equal ones. */
cge_status cge__split_infer_pieces(cge_infer_ctx *ctx, bool ceil_pieces);
cge_status cge__concat_nhwc_launch(const cge_kernel_ctx *ctx, cge_stream *stream);
cge_status cge__split_nhwc_launch(const cge_kernel_ctx *ctx, cge_stream *stream);
/* cge.fused ChannelsLastShuffle: the channel shuffle of NHWC data (the
 * exported Reshape [N, g, C/g, ...] -> Transpose -> Reshape back): Y's
 * channel c * g + i is X's channel i * C/g + c. */
cge_status cge__channel_shuffle_infer(cge_infer_ctx *ctx);
cge_status cge__channel_shuffle_nhwc_launch(const cge_kernel_ctx *ctx, cge_stream *stream);

#endif
