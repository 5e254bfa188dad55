/* build/schedule: a topological order that keeps peak memory low, from a list
 * scheduler that picks, among ready nodes, the one whose run frees the most
 * bytes net of what it allocates. */
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler_internal.h"

/* Stale scores are refreshed lazily. The result is kept only if its simulated
 * peak beats build/order's stable topological order, which it replaces. */

typedef struct item {
    int64_t score;
    int32_t node;
    uint32_t stamp;
} item;

static bool before(const item *a, const item *b)
{
    return a->score != b->score ? a->score < b->score : a->node < b->node;
}

static void push(item *h, int32_t *n, item v)
{
    int32_t i = (*n)++;
    while (i > 0) {
        int32_t p = (i - 1) / 2;
        if (!before(&v, &h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}

static item pop(item *h, int32_t *n)
{
    item top = h[0], last = h[--(*n)];
    int32_t i = 0;
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && before(&h[c + 1], &h[c]))
            c++;
        if (!before(&h[c], &last))
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0)
        h[i] = last;
    return top;
}

typedef struct sched {
    const cge_graph *g;
    int32_t nn, nv;
    int64_t *bytes;        /* per value id: bytes if it occupies memory, else 0 */
    int32_t *consumers;    /* per value id: distinct consumer nodes */
    int32_t *left;         /* per value id: consumers not yet scheduled */
} sched;

static int64_t vbytes(const cge_graph *g, int32_t id)
{
    cge_tensor_desc d;
    if (cge_graph_value_desc(g, id, &d) || cge_graph_value_kind(g, id) != CGE_VALUE_NODE)
        return 0;
    size_t b = cge_tensor_nbytes(d.dtype, &d.shape);
    return b == SIZE_MAX ? INT64_MAX / 4 : (int64_t)b;
}

/* Whether node n reads value id in an earlier input slot too. */
static bool repeated(const cge_node *n, int32_t k)
{
    for (int32_t j = 0; j < k; j++)
        if (cge_node_input_id(n, j) == cge_node_input_id(n, k))
            return true;
    return false;
}

static int64_t score(const sched *s, const cge_node *n)
{
    int64_t sc = 0;
    for (int32_t o = 0; o < cge_node_num_outputs(n); o++)
        sc += s->bytes[cge_node_output_id(n, o)];
    for (int32_t k = 0; k < cge_node_num_inputs(n); k++) {
        int32_t id = cge_node_input_id(n, k);
        if (id >= 0 && !repeated(n, k) && s->left[id] == 1 && !cge_graph_value_is_output(s->g, id))
            sc -= s->bytes[id];
    }
    return sc;
}

/* Peak of the sum of live node outputs for an order. */
static int64_t simulate(sched *s, const int32_t *order)
{
    memcpy(s->left, s->consumers, sizeof(int32_t) * (size_t)s->nv);
    int64_t cur = 0, peak = 0;
    for (int32_t k = 0; k < s->nn; k++) {
        const cge_node *n = cge_graph_node(s->g, order[k]);
        for (int32_t o = 0; o < cge_node_num_outputs(n); o++)
            cur += s->bytes[cge_node_output_id(n, o)];
        if (cur > peak)
            peak = cur;
        for (int32_t i = 0; i < cge_node_num_inputs(n); i++) {
            int32_t id = cge_node_input_id(n, i);
            if (id >= 0 && !repeated(n, i) && --s->left[id] == 0 && !cge_graph_value_is_output(s->g, id))
                cur -= s->bytes[id];
        }
        for (int32_t o = 0; o < cge_node_num_outputs(n); o++) {
            int32_t id = cge_node_output_id(n, o);
            if (s->consumers[id] == 0 && !cge_graph_value_is_output(s->g, id))
                cur -= s->bytes[id];
        }
    }
    return peak;
}

static cge_status greedy(sched *s, int32_t *order)
{
    const cge_graph *g = s->g;
    int32_t nn = s->nn;
    int32_t *indeg = calloc((size_t)nn + 1, sizeof(int32_t));
    uint32_t *stamp = calloc((size_t)nn + 1, sizeof(uint32_t));
    /* Entries: one per push; pushes happen at readiness and on score drops. */
    int64_t cap = (int64_t)nn * 2 + 16;
    for (int32_t i = 0; i < nn; i++)
        cap += cge_node_num_inputs(cge_graph_node(g, i));
    item *heap = malloc(sizeof(item) * (size_t)cap);
    bool *ready = calloc((size_t)nn + 1, sizeof(bool));
    if (!indeg || !stamp || !heap || !ready) {
        free(indeg);
        free(stamp);
        free(heap);
        free(ready);
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "schedule: out of memory");
    }
    memcpy(s->left, s->consumers, sizeof(int32_t) * (size_t)s->nv);
    for (int32_t i = 0; i < nn; i++) {
        const cge_node *n = cge_graph_node(g, i);
        for (int32_t k = 0; k < cge_node_num_inputs(n); k++)
            if (cge_graph_value_producer(g, cge_node_input_id(n, k)) && !repeated(n, k))
                indeg[i]++;
    }
    int32_t hn = 0, done = 0;
    for (int32_t i = 0; i < nn; i++)
        if (!indeg[i]) {
            ready[i] = true;
            push(heap, &hn, (item){score(s, cge_graph_node(g, i)), i, 0});
        }
    /* Consumers of a value, for indegree updates: scan the graph's use lists. */
    cc_uses u;
    cge_status st = cc_uses_build(&u, g);
    cc_use *list = NULL;
    int32_t list_cap = 0;
    while (!st && hn > 0) {
        item it = pop(heap, &hn);
        if (it.stamp != stamp[it.node] || !ready[it.node])
            continue;
        const cge_node *n = cge_graph_node(g, it.node);
        ready[it.node] = false;
        stamp[it.node]++;
        order[done++] = it.node;
        for (int32_t k = 0; k < cge_node_num_inputs(n); k++) {
            int32_t id = cge_node_input_id(n, k);
            if (id < 0 || repeated(n, k) || --s->left[id] != 1)
                continue;
            /* The last reader of `id` now frees it: its score drops. */
            int32_t cnt = cc_uses_count(&u, id);
            if (cnt > list_cap) {
                cc_use *p = realloc(list, sizeof(cc_use) * (size_t)cnt);
                if (!p) {
                    st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "schedule: out of memory");
                    break;
                }
                list = p;
                list_cap = cnt;
            }
            cc_uses_list(&u, id, list, cnt);
            for (int32_t q = 0; q < cnt; q++) {
                int32_t c = cge_node_index(list[q].node);
                if (ready[c] && hn < cap)
                    push(heap, &hn, (item){score(s, list[q].node), c, ++stamp[c]});
            }
        }
        for (int32_t o = 0; !st && o < cge_node_num_outputs(n); o++) {
            int32_t id = cge_node_output_id(n, o);
            int32_t cnt = cc_uses_count(&u, id);
            if (cnt > list_cap) {
                cc_use *p = realloc(list, sizeof(cc_use) * (size_t)cnt);
                if (!p) {
                    st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "schedule: out of memory");
                    break;
                }
                list = p;
                list_cap = cnt;
            }
            cc_uses_list(&u, id, list, cnt);
            for (int32_t q = 0; q < cnt; q++) {
                const cge_node *c = list[q].node;
                if (repeated(c, list[q].slot))
                    continue;
                int32_t ci = cge_node_index(c);
                if (--indeg[ci] == 0 && hn < cap) {
                    ready[ci] = true;
                    push(heap, &hn, (item){score(s, c), ci, stamp[ci]});
                }
            }
        }
    }
    if (!st && done != nn)
        st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_INTERNAL, "schedule: ordered %d of %d nodes",
                       (int)done, (int)nn);
    free(list);
    cc_uses_free(&u);
    free(indeg);
    free(stamp);
    free(heap);
    free(ready);
    return st;
}

cge_status cc_pass_schedule(cc_ctx *ctx, cge_graph *g)
{
    int32_t nn = cge_graph_num_nodes(g), nv = cge_graph_num_values(g);
    sched s = {.g = g, .nn = nn, .nv = nv};
    s.bytes = calloc((size_t)nv + 1, sizeof(int64_t));
    s.consumers = calloc((size_t)nv + 1, sizeof(int32_t));
    s.left = calloc((size_t)nv + 1, sizeof(int32_t));
    int32_t *topo = malloc(sizeof(int32_t) * ((size_t)nn + 1));
    int32_t *alt = malloc(sizeof(int32_t) * ((size_t)nn + 1));
    cge_status st = s.bytes && s.consumers && s.left && topo && alt
                        ? CGE_OK
                        : cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "schedule: out of memory");
    if (!st && ctx->build.num_order != nn)
        st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_INTERNAL, "schedule: build/order has not run");
    if (!st)
        memcpy(topo, ctx->build.order, sizeof(int32_t) * (size_t)nn);
    for (int32_t id = 0; !st && id < nv; id++)
        s.bytes[id] = vbytes(g, id);
    for (int32_t i = 0; !st && i < nn; i++) {
        const cge_node *n = cge_graph_node(g, i);
        for (int32_t k = 0; k < cge_node_num_inputs(n); k++)
            if (cge_node_input_id(n, k) >= 0 && !repeated(n, k))
                s.consumers[cge_node_input_id(n, k)]++;
    }
    if (!st)
        st = greedy(&s, alt);
    if (!st) {
        int64_t p_topo = simulate(&s, topo), p_alt = simulate(&s, alt);
        free(ctx->build.order);
        ctx->build.order = p_alt < p_topo ? alt : topo;
        ctx->build.num_order = nn;
        if (ctx->build.order == alt)
            alt = NULL;
        else
            topo = NULL;
    }
    free(topo);
    free(alt);
    free(s.bytes);
    free(s.consumers);
    free(s.left);
    return st;
}
