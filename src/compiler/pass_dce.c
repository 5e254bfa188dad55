/* optimize/dce: nodes none of whose outputs reach a graph output are removed,
 * and so are constants nothing reads. One sweep in reverse topological order
 * (O(nodes + edges)). */
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler_internal.h"

cge_status cc_pass_dce(cc_ctx *ctx, cge_graph *g)
{
    int32_t nn = cge_graph_num_nodes(g), nv = cge_graph_num_values(g);
    int32_t *order = malloc(sizeof(int32_t) * (size_t)(nn ? nn : 1));
    bool *live = calloc((size_t)(nv ? nv : 1), sizeof(bool));
    cge_status st = order && live ? CGE_OK
                                   : cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "dce: out of memory");
    if (!st)
        st = cge_graph_topo_order(g, order);
    for (int32_t i = 0; !st && i < cge_graph_num_outputs(g); i++)
        live[cge_graph_value_id(g, cge_graph_output(g, i))] = true;
    for (int32_t k = nn - 1; !st && k >= 0; k--) {
        cge_node *n = cge_graph_node(g, order[k]);
        bool used = false;
        for (int32_t o = 0; o < cge_node_num_outputs(n) && !used; o++)
            used = live[cge_node_output_id(n, o)];
        /* A cge.dist node talks to other processes (a Send): it stays even
         * when nothing in this graph reads what it passes through. */
        used = used || !strcmp(cge_node_domain(n), "cge.dist");
        if (!used) {
            st = cge_graph_remove_node(g, n);
            ctx->removed++;
            continue;
        }
        for (int32_t i = 0; i < cge_node_num_inputs(n); i++) {
            int32_t id = cge_node_input_id(n, i);
            if (id >= 0)
                live[id] = true;
        }
    }
    for (int32_t i = cge_graph_num_constants(g) - 1; !st && i >= 0; i--) {
        const char *name = cge_graph_constant_name(g, i);
        int32_t id = cge_graph_value_id(g, name);
        if (!live[id])
            st = cge_graph_remove_constant(g, name);
    }
    free(order);
    free(live);
    return st;
}
