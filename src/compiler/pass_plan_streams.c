/* build/plan_streams: independent branches on separate streams, cross-stream
 * edges as events, and the vector clocks that drop implied waits and tell when
 * a buffer is free on every stream. */
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler_internal.h"

/* A node continues the stream of its first producer when it is that producer's
 * first consumer; otherwise it opens a branch on the least loaded stream.
 * Cross-stream edges become events (recorded after the producer, waited on
 * before the consumer); vector clocks drop waits already implied by others,
 * and the memory planner uses the same clocks to know when a buffer is free on
 * every stream. One stream (the default) needs none of this. */

cge_status cc_pass_plan_streams(cc_ctx *ctx, cge_graph *g)
{
    int32_t S = ctx->opts.num_streams, n = ctx->build.num_order;
    if (S <= 1 || n == 0)
        return CGE_OK;
    int32_t nn = cge_graph_num_nodes(g);
    int32_t *step_of = malloc(sizeof(int32_t) * ((size_t)nn + 1));
    bool *handed = calloc((size_t)nn + 1, sizeof(bool));
    int64_t *load = calloc((size_t)S, sizeof(int64_t));
    int32_t *count = calloc((size_t)S, sizeof(int32_t));
    int32_t *last_on = malloc(sizeof(int32_t) * (size_t)S);
    ctx->build.streams.step_stream = malloc(sizeof(int32_t) * (size_t)n);
    ctx->build.streams.step_pos = malloc(sizeof(int32_t) * (size_t)n);
    ctx->build.streams.vc = malloc(sizeof(int32_t) * (size_t)n * (size_t)S);
    ctx->build.streams.record_event = malloc(sizeof(int32_t) * (size_t)n);
    ctx->build.streams.wait_start = calloc((size_t)n + 1, sizeof(int32_t));
    int64_t max_waits = 0;
    int32_t max_in = 1;
    for (int32_t k = 0; k < n; k++) {
        int32_t ni = cge_node_num_inputs(cge_graph_node(g, ctx->build.order[k]));
        max_waits += ni;
        if (ni > max_in)
            max_in = ni;
    }
    int32_t *prods = malloc(sizeof(int32_t) * (size_t)max_in);
    ctx->build.streams.waits = malloc(sizeof(int32_t) * (size_t)(max_waits + 1));
    cge_status st = CGE_OK;
    if (!prods || !step_of || !handed || !load || !count || !last_on || !ctx->build.streams.step_stream || !ctx->build.streams.step_pos ||
        !ctx->build.streams.vc || !ctx->build.streams.record_event || !ctx->build.streams.wait_start || !ctx->build.streams.waits)
        st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "plan_streams: out of memory");
    for (int32_t s = 0; !st && s < S; s++)
        last_on[s] = -1;
    int32_t nw = 0;
    ctx->build.streams.num_events = 0;
    for (int32_t t = 0; !st && t < n; t++) {
        int32_t ni = ctx->build.order[t];
        const cge_node *node = cge_graph_node(g, ni);
        step_of[ni] = t;
        ctx->build.streams.record_event[t] = -1;
        /* Stream choice. */
        int32_t stream = -1;
        for (int32_t k = 0; k < cge_node_num_inputs(node) && stream < 0; k++) {
            cge_node *p = cge_graph_value_producer(g, cge_node_input_id(node, k));
            if (p && !handed[cge_node_index(p)]) {
                handed[cge_node_index(p)] = true;
                stream = ctx->build.streams.step_stream[step_of[cge_node_index(p)]];
            }
        }
        if (stream < 0) {
            stream = 0;
            for (int32_t s = 1; s < S; s++)
                if (load[s] < load[stream])
                    stream = s;
        }
        int64_t work = 1;
        for (int32_t o = 0; o < cge_node_num_outputs(node); o++) {
            cge_tensor_desc d = cc_out_desc(g, node, o);
            size_t b = cge_tensor_nbytes(d.dtype, &d.shape);
            work += (int64_t)(b / 64);
        }
        load[stream] += work;
        ctx->build.streams.step_stream[t] = stream;
        ctx->build.streams.step_pos[t] = count[stream]++;
        int32_t *vc = &ctx->build.streams.vc[(size_t)t * (size_t)S];
        if (last_on[stream] >= 0)
            memcpy(vc, &ctx->build.streams.vc[(size_t)last_on[stream] * (size_t)S], sizeof(int32_t) * (size_t)S);
        else
            for (int32_t s = 0; s < S; s++)
                vc[s] = -1;
        vc[stream] = ctx->build.streams.step_pos[t];
        last_on[stream] = t;
        /* Waits: producers on other streams not yet known to be done, latest
         * first so that their clocks cover the earlier ones. */
        ctx->build.streams.wait_start[t] = nw;
        int32_t np = 0;
        for (int32_t k = 0; k < cge_node_num_inputs(node); k++) {
            cge_node *p = cge_graph_value_producer(g, cge_node_input_id(node, k));
            if (p)
                prods[np++] = step_of[cge_node_index(p)];
        }
        for (int32_t a = 1; a < np; a++)
            for (int32_t b = a; b > 0 && prods[b - 1] < prods[b]; b--) {
                int32_t x = prods[b];
                prods[b] = prods[b - 1];
                prods[b - 1] = x;
            }
        for (int32_t q = 0; q < np; q++) {
            int32_t p = prods[q], ps = ctx->build.streams.step_stream[p];
            if (ps == stream || vc[ps] >= ctx->build.streams.step_pos[p])
                continue;
            if (ctx->build.streams.record_event[p] < 0)
                ctx->build.streams.record_event[p] = ctx->build.streams.num_events++;
            ctx->build.streams.waits[nw++] = ctx->build.streams.record_event[p];
            const int32_t *pv = &ctx->build.streams.vc[(size_t)p * (size_t)S];
            for (int32_t s = 0; s < S; s++)
                if (pv[s] > vc[s])
                    vc[s] = pv[s];
        }
    }
    if (!st) {
        ctx->build.streams.wait_start[n] = nw;
        ctx->build.streams.made = true;
    }
    free(prods);
    free(step_of);
    free(handed);
    free(load);
    free(count);
    free(last_on);
    return st;
}
