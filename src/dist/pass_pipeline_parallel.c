/* Pipeline parallelism as a graph rewrite: the normalised graph's nodes, in
 * topological order, cut into `pp` runs of balanced estimated cost; rank r
 * keeps run r, receives what crosses the cut before it, sends what crosses
 * the cut after it (values a later stage reads, forwarded through the
 * stages between), and the last stage sends the graph outputs to every
 * other rank. Tags are positions in each cut's list, so sends and receives
 * pair whatever order the stages' streams issue them in. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cge/op.h"
#include "dist/dist_internal.h"

#define OUTPUT_TAG 20000

/* Multiply-adds for the heavy ops, elements written for the rest. */
static double node_cost(const cge_graph *g, const cge_node *n)
{
    cge_tensor_desc o, a;
    if (cge_node_num_outputs(n) < 1 || cge_graph_value_desc(g, cge_node_output_id(n, 0), &o))
        return 1;
    double out = (double)cge_shape_numel(&o.shape);
    const char *op = cge_node_op_type(n);
    if ((!strcmp(op, "MatMul") || !strcmp(op, "Gemm") || !strncmp(op, "FusedMatMul", 11)) &&
        !cge_graph_value_desc(g, cge_node_input_id(n, 0), &a) && a.shape.rank >= 1) {
        int64_t k = a.shape.dims[a.shape.rank - 1];
        if (!strcmp(op, "Gemm") && cge_attrs_get_int(cge_node_attrs_const(n), "transA", 0))
            k = a.shape.dims[0];
        return out * (double)(k > 0 ? k : 1);
    }
    if (!strncmp(op, "Conv", 4) && cge_node_num_inputs(n) > 1 &&
        !cge_graph_value_desc(g, cge_node_input_id(n, 1), &a) && a.shape.rank >= 2) {
        double per = 1;
        for (int32_t d = 1; d < a.shape.rank; d++)
            per *= (double)a.shape.dims[d];
        return out * per;
    }
    return out > 0 ? out : 1;
}

static bool all_static(const cge_graph *g)
{
    for (int32_t id = 0; id < cge_graph_num_values(g); id++) {
        cge_tensor_desc d;
        if (cge_graph_value_desc(g, id, &d) == CGE_OK && d.dtype != CGE_DTYPE_UNDEFINED &&
            cge_graph_value_producer(g, id) && !cge_shape_is_static(&d.shape))
            return false;
    }
    return true;
}

static cge_status recv_node(cge_graph *g, const char *value, const cge_tensor_desc *d, int peer,
                            int tag, const char *const *after, int32_t num_after)
{
    char nm[600];
    snprintf(nm, sizeof nm, "%s/pp_recv", value);
    const char *outs[] = {value};
    cge_node *n = NULL;
    cge_status st = cge_graph_add_node(g, "Recv", CGE_DOMAIN_DIST, nm, after, num_after, outs, 1, &n);
    if (!st)
        st = cge_node_set_int(n, "peer", peer);
    if (!st)
        st = cge_node_set_int(n, "tag", tag);
    if (!st)
        st = cge_node_set_int(n, "dtype", d->dtype);
    if (!st)
        st = cge_node_set_ints(n, "shape", d->shape.dims, d->shape.rank);
    return st;
}

static cge_status send_node(cge_graph *g, const char *value, int peer, int tag, char *out_name,
                            size_t size)
{
    snprintf(out_name, size, "%s/pp_sent_%d", value, peer);
    char nm[640];
    snprintf(nm, sizeof nm, "%s/pp_send_%d", value, peer);
    const char *ins[] = {value}, *outs[] = {out_name};
    cge_node *n = NULL;
    cge_status st = cge_graph_add_node(g, "Send", CGE_DOMAIN_DIST, nm, ins, 1, outs, 1, &n);
    if (!st)
        st = cge_node_set_int(n, "peer", peer);
    if (!st)
        st = cge_node_set_int(n, "tag", tag);
    return st;
}

cge_status cge_dist_pipeline_parallel(const cge_graph *g, int pp, int rank, cge_graph **out,
                                      int32_t *num_stages, int64_t *sent_bytes)
{
    if (num_stages)
        *num_stages = 1;
    if (sent_bytes)
        *sent_bytes = 0;
    if (!g || !out)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "pipeline_parallel: NULL graph or out");
    *out = NULL;
    if (pp < 1 || rank < 0 || rank >= pp)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "pipeline_parallel: rank %d of pp %d",
                         rank, pp);
    cge_status st = cge_dist_register_ops();
    if (st || pp == 1)
        return st ? st : cge_graph_clone(g, out);
    cge_graph *cur = NULL;
    if (cge__dist_normalised(g, &cur)) {
        cge_clear_error();
        return cge_graph_clone(g, out);
    }
    if (!all_static(cur)) {
        cge_graph_destroy(cur);
        return cge_graph_clone(g, out);
    }
    int32_t nn = cge_graph_num_nodes(cur), nv = cge_graph_num_values(cur);
    int32_t *order = malloc(sizeof(int32_t) * (size_t)(nn + 1));
    int32_t *stage_of_node = malloc(sizeof(int32_t) * (size_t)(nn + 1));
    int32_t *prod = malloc(sizeof(int32_t) * (size_t)(nv + 1));   /* producing stage, -1: everywhere */
    int32_t *last = malloc(sizeof(int32_t) * (size_t)(nv + 1));   /* last reading stage (pp: outputs) */
    double *cost = malloc(sizeof(double) * (size_t)(nn + 1));
    char **sent = NULL;
    int32_t nsent = 0;
    if (!order || !stage_of_node || !prod || !last || !cost)
        st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "pipeline_parallel: out of memory");
    if (!st)
        st = cge_graph_topo_order(cur, order);
    double total = 0;
    for (int32_t k = 0; !st && k < nn; k++) {
        cge_node *n = cge_graph_node(cur, order[k]);
        cost[k] = cge_node_is_removed(n) ? 0 : node_cost(cur, n);
        total += cost[k];
    }
    /* Cuts: near each balanced point (within a tenth of a stage's cost), the
     * position where the fewest bytes cross (between blocks, one residual
     * stream, rather than inside one). cross[k]: bytes made before position
     * k and read at or after it. */
    double *cross = calloc((size_t)nn + 2, sizeof(double));
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)(nn + 1));
    if (!st && (!cross || !pos))
        st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "pipeline_parallel: out of memory");
    for (int32_t k = 0; !st && k < nn; k++)
        pos[order[k]] = k;
    for (int32_t i = 0; !st && i < nn; i++) {
        cge_node *n = cge_graph_node(cur, i);
        if (cge_node_is_removed(n))
            continue;
        for (int32_t o = 0; o < cge_node_num_outputs(n); o++) {
            int32_t id = cge_node_output_id(n, o);
            cge_tensor_desc d;
            if (id < 0 || cge_graph_value_desc(cur, id, &d))
                continue;
            int32_t use = pos[i];
            for (int32_t j = 0; j < nn; j++) {
                cge_node *c = cge_graph_node(cur, j);
                for (int32_t k = 0; !cge_node_is_removed(c) && k < cge_node_num_inputs(c); k++)
                    if (cge_node_input_id(c, k) == id && pos[j] > use)
                        use = pos[j];
            }
            if (cge_graph_value_is_output(cur, id))
                use = nn;
            double b = (double)cge_tensor_nbytes(d.dtype, &d.shape);
            cross[pos[i] + 1] += b;   /* crosses cuts pos+1 .. use */
            cross[use + 1 < nn + 1 ? use + 1 : nn + 1] -= b;
        }
    }
    for (int32_t k = 1; !st && k <= nn; k++)
        cross[k] += cross[k - 1];
    int32_t cuts[64];
    int32_t ncuts = 0;
    double cum = 0, slack = total / pp / 10;
    int32_t j = 1;
    for (int32_t k = 0; !st && k < nn && j < pp && j < 64; k++) {
        /* cum: cost before position k. */
        if (cum >= (double)j * total / pp - slack) {
            int32_t best = k;
            double c2 = cum;
            for (int32_t q = k; q < nn && c2 <= (double)j * total / pp + slack; q++) {
                if (cross[q] < cross[best])
                    best = q;
                c2 += cost[q];
            }
            cuts[ncuts++] = best;
            j++;
            while (k < best) /* continue after the cut */
                cum += cost[k++];
        }
        cum += cost[k];
    }
    for (int32_t k = 0, s = 0; !st && k < nn; k++) {
        while (s < ncuts && k >= cuts[s])
            s++;
        stage_of_node[order[k]] = s;
    }
    free(cross);
    free(pos);
    for (int32_t id = 0; id < nv && !st; id++) {
        prod[id] = -1;
        last[id] = -1;
    }
    for (int32_t i = 0; !st && i < nn; i++) {
        cge_node *n = cge_graph_node(cur, i);
        if (cge_node_is_removed(n))
            continue;
        for (int32_t o = 0; o < cge_node_num_outputs(n); o++)
            if (cge_node_output_id(n, o) >= 0)
                prod[cge_node_output_id(n, o)] = stage_of_node[i];
        for (int32_t k = 0; k < cge_node_num_inputs(n); k++) {
            int32_t id = cge_node_input_id(n, k);
            if (id >= 0 && stage_of_node[i] > last[id])
                last[id] = stage_of_node[i];
        }
    }
    for (int32_t i = 0; !st && i < cge_graph_num_outputs(cur); i++)
        last[cge_graph_value_id(cur, cge_graph_output(cur, i))] = pp;
    /* This rank's graph: the normalised one without the other stages' nodes. */
    cge_graph *mine = NULL;
    if (!st)
        st = cge_graph_clone(cur, &mine);
    for (int32_t i = 0; !st && i < nn; i++) {
        cge_node *n = cge_graph_node(mine, i);
        if (!cge_node_is_removed(n) && stage_of_node[i] != rank)
            st = cge_graph_remove_node(mine, n);
    }
    int64_t bytes = 0;
    /* The cut before this stage: receive every value made before it and
     * read from here on; the cut after it: send every value made up to here
     * and read later. Tags number each cut's values in id order. */
    int32_t before = 0, after = 0; /* tags of the cut before and the cut after */
    sent = calloc((size_t)nv + (size_t)pp * (size_t)cge_graph_num_outputs(cur) + 1, sizeof(char *));
    if (!st && !sent)
        st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "pipeline_parallel: out of memory");
    for (int32_t id = 0; !st && id < nv; id++) {
        if (prod[id] < 0)
            continue;
        cge_tensor_desc d;
        st = cge_graph_value_desc(cur, id, &d);
        const char *name = cge_graph_value_name(cur, id);
        if (!st && rank > 0 && prod[id] < rank && last[id] >= rank) {
            /* Graph outputs made before the last stage come through the cuts
             * too: the last rank hands them to the ranks before their maker. */
            st = recv_node(mine, name, &d, rank - 1, before++, NULL, 0);
        }
        if (!st && rank < pp - 1 && prod[id] <= rank && last[id] > rank) {
            char nm[700];
            st = send_node(mine, name, rank + 1, after++, nm, sizeof nm);
            if (!st && !(sent[nsent++] = strdup(nm)))
                st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "pipeline_parallel: out of memory");
            bytes += (int64_t)cge_tensor_nbytes(d.dtype, &d.shape);
        }
    }
    /* Outputs: the last rank sends each to every rank that did not make it;
     * those receive it after their own sends (so that a stage never waits
     * for the outputs before it has passed its values on). */
    for (int32_t i = 0; !st && i < cge_graph_num_outputs(cur); i++) {
        const char *name = cge_graph_output(cur, i);
        int32_t id = cge_graph_value_id(cur, name);
        if (prod[id] < 0)
            continue;
        cge_tensor_desc d;
        st = cge_graph_value_desc(cur, id, &d);
        if (rank == pp - 1) {
            for (int q = 0; !st && q < pp - 1; q++) {
                if (q >= prod[id]) /* made it, or got it through a cut */
                    continue;
                char nm[700];
                st = send_node(mine, name, q, OUTPUT_TAG + i, nm, sizeof nm);
                bytes += (int64_t)cge_tensor_nbytes(d.dtype, &d.shape);
            }
        } else if (rank < prod[id]) {
            st = recv_node(mine, name, &d, pp - 1, OUTPUT_TAG + i, (const char *const *)sent, nsent);
        }
    }
    /* Constants no node reads any more (the other stages' weights) leave. */
    if (!st) {
        bool *used = calloc((size_t)cge_graph_num_values(mine) + 1, 1);
        if (!used)
            st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "pipeline_parallel: out of memory");
        for (int32_t i = 0; used && i < cge_graph_num_nodes(mine); i++) {
            cge_node *n = cge_graph_node(mine, i);
            for (int32_t k = 0; k < cge_node_num_inputs(n); k++)
                if (cge_node_input_id(n, k) >= 0)
                    used[cge_node_input_id(n, k)] = true;
        }
        for (int32_t id = 0; used && !st && id < cge_graph_num_values(mine); id++)
            if (!used[id] && cge_graph_value_constant(mine, id) && !cge_graph_value_is_output(mine, id))
                st = cge_graph_remove_constant(mine, cge_graph_value_name(mine, id));
        free(used);
    }
    if (!st)
        st = cge_graph_compact(mine);
    if (!st)
        st = cge_graph_verify(mine);
    for (int32_t i = 0; sent && i < nsent; i++)
        free(sent[i]);
    free(sent);
    free(order);
    free(stage_of_node);
    free(prod);
    free(last);
    free(cost);
    cge_graph_destroy(cur);
    if (st) {
        cge_graph_destroy(mine);
        return st;
    }
    if (num_stages)
        *num_stages = pp;
    if (sent_bytes)
        *sent_bytes = bytes;
    *out = mine;
    return CGE_OK;
}
