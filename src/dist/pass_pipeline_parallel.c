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

/* Micro-batches (GPipe): the stage of a graph whose inputs have batch/N on
 * axis 0, instantiated N times. The inputs are Split along axis 0; copy i's
 * cut Send/Recv get tags of their own (tag + i * MB_TAG_STRIDE); copy i's
 * receives also wait on copy i-1's results on this rank, so on a stream a
 * stage takes micro-batch i only after finishing i-1, while the stage
 * before already works on i+1. The last rank concatenates the outputs along
 * axis 0 and sends them whole, once, to the other ranks (which receive them
 * after all their own sends): no copy's output traffic can block the
 * pipeline. Weights are shared by the copies. */
#define MB_TAG_STRIDE 1000
#define MB_MAX 16

static void mb_name(char *buf, size_t size, const char *name, int i)
{
    snprintf(buf, size, "%s#mb%d", name, i);
}

/* The stage's transfers of graph outputs (replaced by whole-batch ones). */
static bool is_output_xfer(const cge_node *n)
{
    const char *op = cge_node_op_type(n);
    return !strcmp(cge_node_domain(n), CGE_DOMAIN_DIST) && (!strcmp(op, "Send") || !strcmp(op, "Recv")) &&
           cge_attrs_get_int(cge_node_attrs_const(n), "tag", 0) >= OUTPUT_TAG;
}

cge_status cge_dist_pipeline_parallel_micro(const cge_graph *g, int pp, int rank, int micro_batches,
                                            cge_graph **out, int32_t *num_stages,
                                            int64_t *sent_bytes)
{
    if (micro_batches <= 1 || pp <= 1)
        return cge_dist_pipeline_parallel(g, pp, rank, out, num_stages, sent_bytes);
    if (!g || !out)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "pipeline_parallel: NULL graph or out");
    *out = NULL;
    int N = micro_batches;
    if (N > MB_MAX)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_UNSUPPORTED,
                         "pipeline_parallel: %d micro-batches; at most %d", N, MB_MAX);
    /* The graph of one micro-batch: every input's axis 0 divided by N. */
    cge_graph *small = NULL;
    cge_status st = cge_graph_clone(g, &small);
    for (int32_t i = 0; !st && i < cge_graph_num_inputs(g); i++) {
        cge_tensor_desc d;
        const char *name = cge_graph_input(g, i);
        st = cge_graph_get_desc(g, name, &d);
        if (!st && (d.shape.rank < 1 || d.shape.dims[0] <= 0 || d.shape.dims[0] % N))
            st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                           "pipeline_parallel: %d micro-batches, but input '%s' has %s %lld on axis "
                           "0 (the batch is split along axis 0 into equal parts: a static batch "
                           "that %d divides)", N, name, d.shape.rank < 1 ? "no" : "size",
                           (long long)(d.shape.rank < 1 ? 0 : d.shape.dims[0]), N);
        if (!st) {
            d.shape.dims[0] /= N;
            st = cge_graph_set_desc(small, name, d.dtype, &d.shape);
        }
    }
    cge_graph *stage = NULL;
    int32_t stages = 1;
    int64_t bytes = 0;
    if (!st) {
        /* A batch baked into a constant (a Reshape target of a model
         * exported with a static batch) does not infer at batch/N. */
        cge_graph *norm = NULL;
        if (cge__dist_normalised(small, &norm)) {
            char why[512];
            snprintf(why, sizeof why, "%s", cge_last_error());
            st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_UNSUPPORTED,
                           "pipeline_parallel: the graph does not infer with 1/%d of the batch per "
                           "micro-batch (a batch size baked into a Reshape target? export the model "
                           "with a dynamic batch axis): %s", N, why);
        }
        cge_graph_destroy(norm);
    }
    if (!st)
        st = cge_dist_pipeline_parallel(small, pp, rank, &stage, &stages, &bytes);
    cge_graph_destroy(small);
    if (!st && stages != pp) {
        /* Not cut (dynamic shapes): every rank computes everything. */
        cge_graph_destroy(stage);
        return cge_dist_pipeline_parallel(g, pp, rank, out, num_stages, sent_bytes);
    }
    /* Outputs must be micro-batch slices on axis 0 to be concatenated back;
     * their whole shapes are the normalised graph's. */
    cge_graph *full = NULL;
    if (!st)
        st = cge__dist_normalised(g, &full);
    for (int32_t i = 0; !st && i < cge_graph_num_outputs(g); i++) {
        cge_tensor_desc a, b;
        const char *name = cge_graph_output(g, i);
        st = cge_graph_get_desc(stage, name, &b);
        if (!st)
            st = cge_graph_get_desc(full, name, &a);
        if (!st && (b.shape.rank < 1 || a.shape.rank != b.shape.rank ||
                    a.shape.dims[0] != b.shape.dims[0] * N))
            st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_UNSUPPORTED,
                           "pipeline_parallel: output '%s' of one micro-batch does not have 1/%d of "
                           "the batch on axis 0, so micro-batches cannot be concatenated back", name, N);
    }
    cge_graph *mb = NULL;
    if (!st)
        st = cge_graph_create(cge_graph_name(g), &mb);
    for (int32_t i = 0; !st && i < cge_graph_num_inputs(g); i++) {
        cge_tensor_desc d;
        st = cge_graph_get_desc(g, cge_graph_input(g, i), &d);
        if (!st)
            st = cge_graph_add_input(mb, cge_graph_input(g, i), d.dtype, &d.shape);
    }
    for (int32_t i = 0; !st && i < cge_graph_num_constants(stage); i++) {
        const char *name = cge_graph_constant_name(stage, i);
        const cge_tensor *t = cge_graph_constant(stage, name);
        st = cge_graph_add_constant(mb, name, t->dtype, &t->shape, t->data, t->bytes);
    }
    for (int32_t i = 0; !st && i < cge_graph_num_outputs(g); i++)
        st = cge_graph_add_output(mb, cge_graph_output(g, i));
    /* Inputs split along axis 0. */
    for (int32_t i = 0; !st && i < cge_graph_num_inputs(g); i++) {
        const char *name = cge_graph_input(g, i);
        cge_tensor_desc d;
        st = cge_graph_get_desc(g, name, &d);
        int64_t parts[MB_MAX];
        for (int k = 0; k < N; k++)
            parts[k] = d.shape.dims[0] / N;
        cge_shape ps = {.rank = 1, .dims = {N}};
        char cname[600], nname[600];
        snprintf(cname, sizeof cname, "%s/pp_mb_split_sizes", name);
        snprintf(nname, sizeof nname, "%s/pp_mb_split", name);
        if (!st)
            st = cge_graph_add_constant(mb, cname, CGE_I64, &ps, parts, sizeof(int64_t) * (size_t)N);
        char outs_buf[MB_MAX][600];
        const char *outs[MB_MAX];
        for (int k = 0; k < N; k++) {
            mb_name(outs_buf[k], sizeof outs_buf[k], name, k);
            outs[k] = outs_buf[k];
        }
        const char *ins[] = {name, cname};
        cge_node *n = NULL;
        if (!st)
            st = cge_graph_add_node(mb, "Split", NULL, nname, ins, 2, outs, N, &n);
        if (!st)
            st = cge_node_set_int(n, "axis", 0);
    }
    /* The copies. prev: copy i-1's values that copy i's receives wait on. */
    int32_t ns = cge_graph_num_nodes(stage);
    char **prev = calloc((size_t)ns * 4 + (size_t)cge_graph_num_outputs(g) + 1, sizeof(char *));
    char **sends = calloc((size_t)ns * (size_t)N + 1, sizeof(char *));
    int32_t nprev = 0, nsends = 0, ps0 = 0, ps1 = 0; /* ps0..ps1: copy c-1's sends */
    if (!st && (!prev || !sends))
        st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "pipeline_parallel: out of memory");
    for (int c = 0; !st && c < N; c++) {
        char **cur = calloc((size_t)ns * 4 + (size_t)cge_graph_num_outputs(g) + 1, sizeof(char *));
        int32_t ncur = 0, cs0 = nsends;
        if (!cur)
            st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "pipeline_parallel: out of memory");
        for (int32_t j = 0; !st && j < ns; j++) {
            cge_node *n = cge_graph_node(stage, j);
            if (cge_node_is_removed(n) || is_output_xfer(n))
                continue;
            bool send = !strcmp(cge_node_domain(n), CGE_DOMAIN_DIST) && !strcmp(cge_node_op_type(n), "Send");
            bool recv = !strcmp(cge_node_domain(n), CGE_DOMAIN_DIST) && !strcmp(cge_node_op_type(n), "Recv");
            int32_t ni = cge_node_num_inputs(n), no = cge_node_num_outputs(n);
            /* Receives wait on copy c-1's results, sends on copy c-1's sends:
             * on one stream a blocking send of part c never comes before
             * that of part c-1, whatever order the scheduler picks, so the
             * ranks cannot wait on each other in a cycle. */
            int32_t nin = ni + (recv && c > 0 ? nprev : 0) + (send && c > 0 ? ps1 - ps0 : 0);
            char (*ibuf)[600] = malloc(600 * (size_t)(ni + 1));
            char (*obuf)[600] = malloc(600 * (size_t)(no + 1));
            const char **ins = malloc(sizeof(char *) * (size_t)(nin + 1));
            const char **outs = malloc(sizeof(char *) * (size_t)(no + 1));
            if (!ibuf || !obuf || !ins || !outs)
                st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "pipeline_parallel: out of memory");
            for (int32_t k = 0; !st && k < ni; k++) {
                const char *v = cge_node_input(n, k);
                if (!v[0] || cge_graph_constant(stage, v))
                    ins[k] = v;
                else {
                    mb_name(ibuf[k], sizeof ibuf[k], v, c);
                    ins[k] = ibuf[k];
                }
            }
            for (int32_t k = 0; !st && recv && c > 0 && k < nprev; k++)
                ins[ni + k] = prev[k];
            for (int32_t k = 0; !st && send && c > 0 && k < ps1 - ps0; k++)
                ins[ni + k] = sends[ps0 + k];
            for (int32_t k = 0; !st && k < no; k++) {
                mb_name(obuf[k], sizeof obuf[k], cge_node_output(n, k), c);
                outs[k] = obuf[k];
            }
            char nm[700];
            mb_name(nm, sizeof nm, cge_node_name(n), c);
            cge_node *m = NULL;
            if (!st)
                st = cge_graph_add_node(mb, cge_node_op_type(n), cge_node_domain(n), nm, ins, nin,
                                        outs, no, &m);
            const cge_attrs *a = cge_node_attrs_const(n);
            for (int32_t k = 0; !st && k < cge_attrs_count(a); k++)
                st = cge_attrs_set(cge_node_attrs(m), cge_attrs_at(a, k));
            if (!st && (send || recv)) {
                int64_t tag = cge_attrs_get_int(a, "tag", 0);
                if (tag >= MB_TAG_STRIDE)
                    st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_UNSUPPORTED,
                                   "pipeline_parallel: %lld values cross a cut; micro-batches take "
                                   "at most %d", (long long)tag + 1, MB_TAG_STRIDE);
                else
                    st = cge_node_set_int(m, "tag", tag + (int64_t)c * MB_TAG_STRIDE);
            }
            if (!st && send) {
                if (!(cur[ncur++] = strdup(ins[0])) || !(sends[nsends++] = strdup(outs[0])))
                    st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "pipeline_parallel: out of memory");
            }
            free(ibuf);
            free(obuf);
            free(ins);
            free(outs);
        }
        if (!st && rank == pp - 1) {
            for (int32_t i = 0; !st && i < cge_graph_num_outputs(g); i++) {
                char v[600];
                mb_name(v, sizeof v, cge_graph_output(g, i), c);
                if (!(cur[ncur++] = strdup(v)))
                    st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "pipeline_parallel: out of memory");
            }
        }
        for (int32_t k = 0; k < nprev; k++)
            free(prev[k]);
        free(prev);
        prev = cur;
        nprev = ncur;
        ps0 = cs0;
        ps1 = nsends;
    }
    /* Outputs: concatenated on the last rank, sent whole to the others. */
    for (int32_t i = 0; !st && i < cge_graph_num_outputs(g); i++) {
        const char *name = cge_graph_output(g, i);
        cge_tensor_desc d;
        st = cge_graph_get_desc(full, name, &d);
        if (!st && rank == pp - 1) {
            char parts_buf[MB_MAX][600], cat[640];
            const char *parts[MB_MAX];
            for (int k = 0; k < N; k++) {
                mb_name(parts_buf[k], sizeof parts_buf[k], name, k);
                parts[k] = parts_buf[k];
            }
            snprintf(cat, sizeof cat, "%s/pp_mb_concat", name);
            const char *outs[] = {name};
            cge_node *n = NULL;
            st = cge_graph_add_node(mb, "Concat", NULL, cat, parts, N, outs, 1, &n);
            if (!st)
                st = cge_node_set_int(n, "axis", 0);
            for (int q = 0; !st && q < pp - 1; q++) {
                char nm[700];
                st = send_node(mb, name, q, OUTPUT_TAG + i, nm, sizeof nm);
            }
        } else if (!st) {
            st = recv_node(mb, name, &d, pp - 1, OUTPUT_TAG + i, (const char *const *)sends, nsends);
        }
    }
    for (int32_t k = 0; prev && k < nprev; k++)
        free(prev[k]);
    free(prev);
    for (int32_t k = 0; sends && k < nsends; k++)
        free(sends[k]);
    free(sends);
    cge_graph_destroy(stage);
    cge_graph_destroy(full);
    if (!st)
        st = cge_graph_verify(mb);
    /* The micro-batch copies were added without descs: infer them, so that
     * the Sends' sizes below are known (they read 0 bytes before). */
    if (!st)
        st = cge_graph_infer(mb);
    bytes = 0; /* what this rank's Sends hand MPI per run */
    for (int32_t j = 0; !st && j < cge_graph_num_nodes(mb); j++) {
        cge_node *n = cge_graph_node(mb, j);
        cge_tensor_desc d;
        if (!strcmp(cge_node_domain(n), CGE_DOMAIN_DIST) && !strcmp(cge_node_op_type(n), "Send") &&
            !cge_graph_get_desc(mb, cge_node_input(n, 0), &d))
            bytes += (int64_t)cge_tensor_nbytes(d.dtype, &d.shape);
    }
    if (st) {
        cge_graph_destroy(mb);
        return st;
    }
    if (num_stages)
        *num_stages = pp;
    if (sent_bytes)
        *sent_bytes = bytes;
    *out = mb;
    return CGE_OK;
}
