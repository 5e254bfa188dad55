/* build/order: the plan's step order, a topological order of the nodes. It
 * is the part of the plan that build/schedule improves and that
 * build/plan_streams and build/plan_memory read. */
#include <stdlib.h>

#include "compiler/compiler_internal.h"

cge_status cc_pass_order(cc_ctx *ctx, cge_graph *g)
{
    int32_t nn = cge_graph_num_nodes(g);
    int32_t *order = malloc(sizeof(int32_t) * ((size_t)nn + 1));
    if (!order)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "order: out of memory");
    cge_status st = cge_graph_topo_order(g, order);
    if (st) {
        free(order);
        return st;
    }
    free(ctx->build.order);
    ctx->build.order = order;
    ctx->build.num_order = nn;
    return CGE_OK;
}
