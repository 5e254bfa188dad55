/* Meta and kernel of cge.fused ChannelsLastPool (schema in channels_last.c):
 * float32 max, average and global pools whose X and Y are NHWC
 * (N, spatial..., C). */
#ifndef CGE_OPS_POOL_NHWC_H
#define CGE_OPS_POOL_NHWC_H

#include "cge/op.h"

/* The "mode" attribute says which: max, avg, global_max, global_avg; the other
 * attributes are MaxPool's / AveragePool's. */

cge_status cge__pool_nhwc_infer(cge_infer_ctx *ctx);
cge_status cge__pool_nhwc_launch(const cge_kernel_ctx *ctx, cge_stream *stream);

#endif
