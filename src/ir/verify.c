/* Structural verification and topological order (Kahn's algorithm with a
 * min-heap, so ready nodes leave in insertion order); a cycle is reported
 * with its path. Everything here is O((nodes + edges) log nodes). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/graph_internal.h"

#define UNDEFINED_HINT "(no graph input, constant or node output has that name)"

/* ---- min-heap of node indices --------------------------------------------- */

static void heap_push(int32_t *h, int32_t *n, int32_t v)
{
    int32_t i = (*n)++;
    while (i > 0) {
        int32_t p = (i - 1) / 2;
        if (h[p] <= v)
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}

static int32_t heap_pop(int32_t *h, int32_t *n)
{
    int32_t top = h[0];
    int32_t last = h[--(*n)];
    int32_t i = 0;
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1] < h[c])
            c++;
        if (last <= h[c])
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0)
        h[i] = last;
    return top;
}

/* ---- cycle report ----------------------------------------------------------- */

/* Append to a fixed buffer, truncating quietly. */
typedef struct strbuf {
    char *p;
    size_t size, len;
} strbuf;

static void sb_printf(strbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void sb_printf(strbuf *b, const char *fmt, ...)
{
    if (b->len + 1 >= b->size)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->size - b->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        b->len = b->len + (size_t)n < b->size ? b->len + (size_t)n : b->size - 1;
}

/* The producer of node u's first input that is still waiting (indeg > 0):
 * every node left over by Kahn has one. Writes the value index through `via`. */
static int32_t waiting_pred(const cge_graph *g, const int32_t *indeg, int32_t u, int32_t *via)
{
    const cge_node *n = g->nodes[u];
    for (int32_t k = 0; k < n->num_inputs; k++) {
        int32_t vi = n->inputs[k];
        if (vi < 0 || g->values[vi].kind != CGE_IR_VALUE_NODE)
            continue;
        int32_t p = g->values[vi].def;
        if (indeg[p] > 0) {
            *via = vi;
            return p;
        }
    }
    return -1;
}

/* Walk backwards from a left-over node until a node repeats: that closes a
 * cycle. `step` is scratch for n entries. O(nodes + edges). */
static cge_status report_cycle(const cge_graph *g, const int32_t *indeg, int32_t *step,
                               int32_t *path, int32_t *vias)
{
    int32_t n = g->num_nodes, start = -1;
    for (int32_t i = 0; i < n && start < 0; i++)
        if (indeg[i] > 0)
            start = i;
    if (start < 0)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INTERNAL, "graph '%s': cycle not found",
                         g->name);
    for (int32_t i = 0; i < n; i++)
        step[i] = -1;
    int32_t len = 0, u = start, closing = -1;
    while (u >= 0 && step[u] < 0) {
        step[u] = len;
        path[len] = u;
        u = waiting_pred(g, indeg, u, &vias[len]);
        len++;
    }
    if (u < 0)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INTERNAL,
                         "graph '%s': a left-over node has no waiting predecessor", g->name);
    closing = step[u];
    /* path[k] consumes vias[k], produced by path[k+1] (or by u for the last).
     * Printed forwards: producer --value--> consumer, from u round to u. */
    char msg[900];
    strbuf b = {msg, sizeof msg, 0};
    const cge_node *first = g->nodes[u];
    int32_t cycle_len = len - closing;
    sb_printf(&b, "graph '%s' has a cycle of %d node%s: %s '%s'", g->name, (int)cycle_len,
              cycle_len == 1 ? "" : "s", first->op_type, first->name);
    for (int32_t k = len - 1; k >= closing; k--) {
        const cge_node *c = g->nodes[path[k]];
        if (len - 1 - k >= 8 && k > closing) {
            sb_printf(&b, " ... (%d more)", (int)(k - closing));
            k = closing;
            c = g->nodes[path[k]];
        }
        sb_printf(&b, " --%s--> %s '%s'", g->values[vias[k]].name, c->op_type, c->name);
    }
    return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "%s", msg);
}

/* ---- Kahn --------------------------------------------------------------------- */

cge_status cge__ir_topo(const cge_graph *g, int32_t *order)
{
    int32_t n = g->num_nodes;
    if (n == 0)
        return CGE_OK;
    /* Edges producer -> consumer in CSR form: one per input occurrence, so a
     * node reading a value twice waits for two decrements. */
    int64_t num_edges = 0;
    for (int32_t i = 0; i < n; i++)
        num_edges += g->nodes[i]->num_inputs;
    if (num_edges > INT32_MAX)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_UNSUPPORTED, "graph '%s': too many edges",
                         g->name);
    int32_t *indeg = calloc((size_t)n, sizeof(int32_t));
    int32_t *start = calloc((size_t)n + 1, sizeof(int32_t));
    int32_t *adj = malloc(((size_t)num_edges + 1) * sizeof(int32_t));
    int32_t *heap = malloc((size_t)n * sizeof(int32_t));
    cge_status st = CGE_OK;
    if (!indeg || !start || !adj || !heap) {
        st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY,
                       "out of memory ordering graph '%s' (%d nodes)", g->name, (int)n);
        goto done;
    }
    for (int32_t i = 0; i < n; i++) {
        const cge_node *nd = g->nodes[i];
        for (int32_t k = 0; k < nd->num_inputs; k++) {
            int32_t vi = nd->inputs[k];
            if (vi >= 0 && g->values[vi].kind == CGE_IR_VALUE_NODE) {
                start[g->values[vi].def + 1]++;
                indeg[i]++;
            }
        }
    }
    for (int32_t i = 0; i < n; i++)
        start[i + 1] += start[i];
    /* heap doubles as the fill cursor per producer before it is used. */
    memcpy(heap, start, (size_t)n * sizeof(int32_t));
    for (int32_t i = 0; i < n; i++) {
        const cge_node *nd = g->nodes[i];
        for (int32_t k = 0; k < nd->num_inputs; k++) {
            int32_t vi = nd->inputs[k];
            if (vi >= 0 && g->values[vi].kind == CGE_IR_VALUE_NODE)
                adj[heap[g->values[vi].def]++] = i;
        }
    }
    int32_t hn = 0, done_count = 0;
    for (int32_t i = 0; i < n; i++)
        if (indeg[i] == 0)
            heap[hn++] = i;   /* ascending, hence already a heap */
    while (hn > 0) {
        int32_t u = heap_pop(heap, &hn);
        order[done_count++] = u;
        for (int32_t e = start[u]; e < start[u + 1]; e++)
            if (--indeg[adj[e]] == 0)
                heap_push(heap, &hn, adj[e]);
    }
    if (done_count < n) {
        /* start and adj are no longer needed: reuse them as scratch. */
        int32_t *path = malloc((size_t)n * sizeof(int32_t));
        if (!path) {
            st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "graph '%s' has a cycle",
                           g->name);
            goto done;
        }
        int32_t *vias = heap;
        st = report_cycle(g, indeg, start, path, vias);
        free(path);
    }
done:
    free(indeg);
    free(start);
    free(adj);
    free(heap);
    return st;
}

cge_status cge_graph_topo_order(const cge_graph *g, int32_t *order)
{
    if (!g)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                         "cge_graph_topo_order: graph is NULL");
    if (!order && g->num_nodes > 0)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                         "cge_graph_topo_order: order is NULL");
    return cge__ir_topo(g, order);
}

/* ---- verify ---------------------------------------------------------------- */

cge_status cge_graph_verify_structure(const cge_graph *g)
{
    if (!g)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                         "cge_graph_verify_structure: graph is NULL");
    for (int32_t i = 0; i < g->num_inputs; i++) {
        const cge__ir_value *v = &g->values[g->inputs[i]];
        if (!cge_dtype_valid(v->dtype))
            return cge_error(CGE_LAYER_GRAPH, CGE_ERR_DTYPE,
                             "graph input '%s' has no valid dtype (%s, %d)", v->name,
                             cge_dtype_name(v->dtype), (int)v->dtype);
        if (v->kind != CGE_IR_VALUE_INPUT || v->def != i)
            return cge_error(CGE_LAYER_GRAPH, CGE_ERR_EXISTS,
                             "graph input '%s' is also defined elsewhere", v->name);
    }
    /* The builders refuse duplicates as they happen; these checks guard
     * graphs whose tables were changed behind the API's back. */
    for (int32_t i = 0; i < g->num_nodes; i++) {
        const cge_node *n = g->nodes[i];
        int32_t named = cge__strmap_get(&g->node_map, n->name);
        if (named != i)
            return cge__ir_node_error(n, CGE_ERR_EXISTS, "another node (%d) has the same name",
                                     (int)named);
        for (int32_t k = 0; k < n->num_outputs; k++) {
            const cge__ir_value *v = &g->values[n->outputs[k]];
            if (v->kind != CGE_IR_VALUE_NODE || v->def != i) {
                const char *other = v->kind == CGE_IR_VALUE_INPUT   ? "a graph input"
                                    : v->kind == CGE_IR_VALUE_CONST ? "a constant"
                                    : v->kind == CGE_IR_VALUE_NODE  ? g->nodes[v->def]->name
                                                                    : "undefined";
                return cge__ir_node_error(n, CGE_ERR_EXISTS,
                                         "output '%s' is also produced by %s", v->name, other);
            }
        }
    }
    for (int32_t i = 0; i < g->num_nodes; i++) {
        const cge_node *n = g->nodes[i];
        for (int32_t k = 0; k < n->num_inputs; k++) {
            int32_t vi = n->inputs[k];
            if (vi >= 0 && g->values[vi].kind == CGE_IR_VALUE_REF)
                return cge__ir_node_error(n, CGE_ERR_NOT_FOUND,
                                         "input '%s' is not defined " UNDEFINED_HINT,
                                         g->values[vi].name);
            if (vi >= 0 && g->values[vi].kind == CGE_IR_VALUE_CONST &&
                g->consts[g->values[vi].def]->released)
                return cge__ir_node_error(n, CGE_ERR_INVALID_ARG,
                                         "constant '%s' has no data: a session released it once "
                                         "its kernel had packed it (compile the original graph)",
                                         g->values[vi].name);
        }
    }
    for (int32_t i = 0; i < g->num_outputs; i++) {
        const cge__ir_value *v = &g->values[g->outputs[i]];
        if (v->kind == CGE_IR_VALUE_REF)
            return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NOT_FOUND,
                             "graph output '%s' is not defined " UNDEFINED_HINT, v->name);
    }
    if (g->num_nodes == 0)
        return CGE_OK;
    int32_t *order = malloc((size_t)g->num_nodes * sizeof(int32_t));
    if (!order)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY,
                         "out of memory verifying graph '%s'", g->name);
    cge_status st = cge__ir_topo(g, order);
    free(order);
    return st;
}
