/* Tensor parallelism (Megatron-style) as a graph rewrite: placeholder until
 * the pattern matcher lands; tp <= 1 changes nothing. */
#include "cge/dist.h"

cge_status cge_dist_tensor_parallel(cge_graph *g, int tp, int rank, int32_t *num_sharded)
{
    if (num_sharded)
        *num_sharded = 0;
    if (!g)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "tensor_parallel: graph is NULL");
    return CGE_OK;
}
