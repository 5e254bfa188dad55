/* partition/assign_engines: every node goes to the engine of highest priority
 * that has a kernel for its dtype and accepts it (capability query); the
 * outputs take that engine's format. */
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler_internal.h"

/* Connected runs of one engine are the subgraphs counted in the statistics. */

#define MAX_IO 64

static cge_status grow_nodes(cc_ctx *ctx, int32_t n)
{
    if (n <= ctx->node_cap)
        return CGE_OK;
    int32_t nc = ctx->node_cap ? ctx->node_cap : 64;
    while (nc < n)
        nc *= 2;
    int32_t *e = realloc(ctx->node_engine, sizeof(int32_t) * (size_t)nc);
    if (e)
        ctx->node_engine = e;
    const cge_kernel_def **k = e ? realloc(ctx->node_kernel, sizeof(*k) * (size_t)nc) : NULL;
    if (k)
        ctx->node_kernel = k;
    const cge_op_def **d = k ? realloc(ctx->node_def, sizeof(*d) * (size_t)nc) : NULL;
    if (d)
        ctx->node_def = d;
    int32_t *s = d ? realloc(ctx->node_space, sizeof(int32_t) * (size_t)nc) : NULL;
    if (s)
        ctx->node_space = s;
    if (!s)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "partition: out of memory");
    ctx->node_cap = nc;
    return CGE_OK;
}

/* The dtype kernels are chosen by: input 0's (the first present input's),
 * else output 0's. */
static cge_dtype kernel_dtype(const cge_graph *g, const cge_node *n)
{
    for (int32_t i = 0; i < cge_node_num_inputs(n); i++)
        if (cge_node_input_id(n, i) >= 0)
            return cc_in_desc(g, n, i).dtype;
    return cge_node_num_outputs(n) ? cc_out_desc(g, n, 0).dtype : CGE_DTYPE_UNDEFINED;
}

cge_status cc_assign_node(cc_ctx *ctx, cge_graph *g, int32_t i, int32_t prefer)
{
    cge_status st = grow_nodes(ctx, i + 1);
    if (st)
        return st;
    cge_node *n = cge_graph_node(g, i);
    const cge_op_def *def = cc_find_op(ctx, n);
    if (!def)
        return cge_node_check_schema(g, n);
    int32_t ni = cge_node_num_inputs(n), no = cge_node_num_outputs(n);
    cge_tensor_desc ins[MAX_IO], outs[MAX_IO];
    for (int32_t k = 0; k < ni && k < MAX_IO; k++)
        ins[k] = cc_in_desc(g, n, k);
    for (int32_t k = 0; k < no && k < MAX_IO; k++)
        outs[k] = cc_out_desc(g, n, k);
    cge_dtype dt = kernel_dtype(g, n);
    for (int32_t t = -1; t < ctx->num_engines; t++) {
        int32_t e = t < 0 ? prefer : t;
        if (e < 0)
            continue;
        const cge_engine_desc *ed = &ctx->engines[e];
        const cge_kernel_def *k = cge_op_find_kernel(def, ed->name, dt);
        if (!k)
            continue;
        if (ed->supports && !ed->supports(n, ins, ni < MAX_IO ? ni : MAX_IO, outs,
                                          no < MAX_IO ? no : MAX_IO, ed->user))
            continue;
        cge_clear_error();
        ctx->node_engine[i] = e;
        ctx->node_kernel[i] = k;
        ctx->node_def[i] = def;
        ctx->node_space[i] = ed->memory_space;
        return CGE_OK;
    }
    char list[256];
    size_t len = 0;
    list[0] = '\0';
    for (int32_t e = 0; e < ctx->num_engines && len < sizeof list; e++)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", e ? ", " : "",
                                ctx->engines[e].name);
    return cge_error(CGE_LAYER_ENGINE, CGE_ERR_UNSUPPORTED,
                     "no engine has a kernel for %s '%s' with dtype %s (engines tried: %s)",
                     cge_node_op_type(n), cge_node_name(n), cge_dtype_name(dt), list);
}

static int32_t find(int32_t *p, int32_t x)
{
    while (p[x] != x) {
        p[x] = p[p[x]];
        x = p[x];
    }
    return x;
}

cge_status cc_pass_assign_engines(cc_ctx *ctx, cge_graph *g)
{
    int32_t nn = cge_graph_num_nodes(g);
    cge_status st = grow_nodes(ctx, nn);
    for (int32_t i = 0; !st && i < nn; i++)
        st = cc_assign_node(ctx, g, i, -1);
    for (int32_t i = 0; !st && i < nn; i++) {
        cge_node *n = cge_graph_node(g, i);
        for (int32_t o = 0; !st && o < cge_node_num_outputs(n); o++)
            st = cge_graph_set_format(g, cge_node_output(n, o), ctx->engines[ctx->node_engine[i]].format);
    }
    /* Subgraphs: nodes joined by edges within one engine. */
    int32_t *parent = st ? NULL : malloc(sizeof(int32_t) * (size_t)(nn ? nn : 1));
    if (!st && !parent)
        st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "partition: out of memory");
    if (!st) {
        for (int32_t i = 0; i < nn; i++)
            parent[i] = i;
        for (int32_t i = 0; i < nn; i++) {
            cge_node *n = cge_graph_node(g, i);
            for (int32_t k = 0; k < cge_node_num_inputs(n); k++) {
                cge_node *p = cge_graph_value_producer(g, cge_node_input_id(n, k));
                if (p && ctx->node_engine[cge_node_index(p)] == ctx->node_engine[i])
                    parent[find(parent, cge_node_index(p))] = find(parent, i);
            }
        }
        ctx->num_subgraphs = 0;
        for (int32_t i = 0; i < nn; i++)
            ctx->num_subgraphs += find(parent, i) == i;
    }
    free(parent);
    return st;
}
