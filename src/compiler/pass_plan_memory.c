/* build/plan_memory: the plan itself. Every value gets a place: constants in
 * one blob, everything else (graph inputs and outputs included) in one arena,
 * by lifetimes. Views (Reshape, Flatten, Squeeze, Unsqueeze, Identity, the
 * layout passes' LayoutView) share
 * their input's memory; an output takes an input's buffer in place when the
 * kernel allows it, the sizes match and nothing reads the input afterwards.
 * Offsets come from cge_memplan_assign; cge_plan_verify checks the result. */
#include <stdlib.h>
#include <string.h>

#include "cge/fused_ops.h"
#include "compiler/compiler_internal.h"

static const char *const view_ops[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"};

bool cc_is_view_op(const cge_node *n)
{
    /* the layout passes' Transposes of NHWC bytes */
    if (!strcmp(cge_node_domain(n), CGE_DOMAIN_FUSED))
        return !strcmp(cge_node_op_type(n), "LayoutView");
    if (cge_node_domain(n)[0])
        return false;
    for (size_t i = 0; i < sizeof view_ops / sizeof view_ops[0]; i++)
        if (!strcmp(cge_node_op_type(n), view_ops[i]))
            return true;
    return false;
}

typedef struct mp {
    cc_ctx *ctx;
    cge_graph *g;
    cge_plan *p;
    int32_t n;                  /* steps */
    int32_t S;
    int32_t *prod;              /* per plan value: producing step, -1 */
    int32_t *rstart, *readers;  /* CSR per plan value: reading steps (distinct) */
    int32_t *parent;            /* alias groups */
    bool *has_output;           /* per group root */
    int32_t **stream_steps;     /* per stream: its steps in issue order */
    int32_t *stream_len;
} mp;

static cge_status oom(void)
{
    return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "plan_memory: out of memory");
}

static int32_t find(int32_t *parent, int32_t x)
{
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

static size_t align64(size_t x) { return (x + 63) & ~(size_t)63; }

/* ---- values ------------------------------------------------------------------- */

static cge_status add_value(mp *m, int32_t id)
{
    cge_plan *p = m->p;
    if (id < 0 || p->value_of_id[id] >= 0)
        return CGE_OK;
    cge_tensor_desc d;
    cge_status st = cge_graph_value_desc(m->g, id, &d);
    if (st)
        return st;
    char sh[CGE_SHAPE_STR_MAX];
    if (!cge_dtype_valid(d.dtype) || !cge_shape_is_static(&d.shape))
        return cge_error(CGE_LAYER_META, CGE_ERR_SHAPE,
                         "value '%s' is %s %s when the plan is built: every shape must be known "
                         "(compile with concrete input shapes; shapes that depend on computed "
                         "values need eager runs)",
                         d.name, cge_dtype_name(d.dtype), cge_shape_str(&d.shape, sh, sizeof sh));
    int32_t v = p->num_values++;
    p->value_of_id[id] = v;
    cge_plan_value *pv = &p->values[v];
    cge_node *prod = cge_graph_value_producer(m->g, id);
    *pv = (cge_plan_value){
        .name = cge_graph_value_name(m->g, id), .dtype = d.dtype, .shape = d.shape,
        .format = d.format, .memory_space = prod ? m->ctx->node_space[cge_node_index(prod)] : 0,
        .bytes = cge_tensor_nbytes(d.dtype, &d.shape), .alias_of = -1, .first_step = -1,
        .last_step = -1, .input_index = -1, .output_index = -1};
    switch (cge_graph_value_kind(m->g, id)) {
    case CGE_VALUE_CONSTANT:
        pv->storage = CGE_STORAGE_CONSTANT;
        pv->offset = p->constant_bytes;
        p->constant_bytes += align64(pv->bytes);
        break;
    case CGE_VALUE_INPUT:
    case CGE_VALUE_NODE:
        pv->storage = CGE_STORAGE_ARENA;
        break;
    default:
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INTERNAL, "plan_memory: value '%s' is undefined",
                         d.name);
    }
    return CGE_OK;
}

/* ---- lifetimes ------------------------------------------------------------------ */

/* Whether step t starts after every step of R is done (R as the largest
 * position per stream, -1 for none). */
static bool after_all(const mp *m, int32_t t, const int32_t *rmax)
{
    const cc_ctx *c = m->ctx;
    int32_t st = c->step_stream[t];
    for (int32_t s = 0; s < m->S; s++) {
        if (rmax[s] < 0)
            continue;
        if (s == st ? c->step_pos[t] <= rmax[s] : c->vc[(size_t)t * (size_t)m->S + (size_t)s] < rmax[s])
            return false;
    }
    return true;
}

/* The last step (issue order) that may run before the steps in `steps` are
 * all done: the value must stay until then. */
static int32_t release_step(const mp *m, const int32_t *steps, int32_t k)
{
    int32_t last = -1;
    for (int32_t i = 0; i < k; i++)
        if (steps[i] > last)
            last = steps[i];
    if (m->S <= 1 || last < 0)
        return last;
    int32_t rmax[16];
    for (int32_t s = 0; s < m->S; s++)
        rmax[s] = -1;
    for (int32_t i = 0; i < k; i++) {
        int32_t s = m->ctx->step_stream[steps[i]], pos = m->ctx->step_pos[steps[i]];
        if (pos > rmax[s])
            rmax[s] = pos;
    }
    for (int32_t s = 0; s < m->S; s++) {
        int32_t len = m->stream_len[s], lo = 0, hi = len;
        const int32_t *list = m->stream_steps[s];
        /* First safe position: safety is monotone along a stream. */
        while (lo < hi) {
            int32_t mid = (lo + hi) / 2;
            if (after_all(m, list[mid], rmax))
                hi = mid;
            else
                lo = mid + 1;
        }
        if (lo > 0 && list[lo - 1] > last)
            last = list[lo - 1];
    }
    return last;
}

static int32_t value_release(const mp *m, int32_t v, int32_t *scratch)
{
    int32_t k = 0;
    if (m->prod[v] >= 0)
        scratch[k++] = m->prod[v];
    for (int32_t r = m->rstart[v]; r < m->rstart[v + 1]; r++)
        scratch[k++] = m->readers[r];
    int32_t last = release_step(m, scratch, k);
    return last < 0 ? m->prod[v] : last;
}

/* ---- in-place ---------------------------------------------------------------------- */

static int32_t stream_of(const mp *m, int32_t t) { return m->S > 1 ? m->ctx->step_stream[t] : 0; }
static int32_t pos_of(const mp *m, int32_t t) { return m->S > 1 ? m->ctx->step_pos[t] : t; }

/* Fold value v's readers into a group's latest reader position per stream. */
static void add_readers(const mp *m, int32_t v, int32_t *rmax)
{
    for (int32_t r = m->rstart[v]; r < m->rstart[v + 1]; r++) {
        int32_t t = m->readers[r], s = stream_of(m, t);
        if (pos_of(m, t) > rmax[s])
            rmax[s] = pos_of(m, t);
    }
}

/* Whether a group whose readers are `rmax` may be overwritten by step t:
 * every reader is t itself or done before t starts. */
static bool group_dead_at(const mp *m, const int32_t *rmax, int32_t t)
{
    int32_t st = stream_of(m, t);
    for (int32_t s = 0; s < m->S; s++) {
        if (rmax[s] < 0)
            continue;
        if (s == st ? rmax[s] > pos_of(m, t)
                    : m->ctx->vc[(size_t)t * (size_t)m->S + (size_t)s] < rmax[s])
            return false;
    }
    return true;
}

/* ---- main -------------------------------------------------------------------------- */

static cge_status build_steps(mp *m, const int32_t *order)
{
    cge_plan *p = m->p;
    cge_graph *g = m->g;
    int64_t ios = 0;
    for (int32_t t = 0; t < m->n; t++) {
        const cge_node *nd = cge_graph_node(g, order[t]);
        ios += cge_node_num_inputs(nd) + cge_node_num_outputs(nd);
    }
    int32_t nwaits = m->ctx->wait_start ? m->ctx->wait_start[m->n] : 0;
    p->steps = calloc((size_t)m->n + 1, sizeof(cge_plan_step));
    p->step_ios = malloc(sizeof(int32_t) * (size_t)(ios + nwaits + 1));
    p->ws_last = malloc(sizeof(int32_t) * ((size_t)m->n + 1));
    if (!p->steps || !p->step_ios || !p->ws_last)
        return oom();
    int32_t *io = p->step_ios;
    for (int32_t t = 0; t < m->n; t++) {
        int32_t ni = order[t];
        const cge_node *nd = cge_graph_node(g, ni);
        cge_plan_step *s = &p->steps[t];
        s->node = nd;
        s->def = m->ctx->node_def[ni];
        s->kernel = m->ctx->node_kernel[ni];
        s->engine = m->ctx->engines[m->ctx->node_engine[ni]].name;
        s->stream = m->ctx->step_stream ? m->ctx->step_stream[t] : 0;
        s->num_inputs = cge_node_num_inputs(nd);
        s->num_outputs = cge_node_num_outputs(nd);
        s->inputs = io;
        for (int32_t k = 0; k < s->num_inputs; k++) {
            int32_t id = cge_node_input_id(nd, k);
            *io++ = id >= 0 ? p->value_of_id[id] : -1;
        }
        s->outputs = io;
        for (int32_t k = 0; k < s->num_outputs; k++)
            *io++ = p->value_of_id[cge_node_output_id(nd, k)];
        s->record = m->ctx->record_event ? m->ctx->record_event[t] : -1;
        if (m->ctx->wait_start) {
            s->num_waits = m->ctx->wait_start[t + 1] - m->ctx->wait_start[t];
            s->waits = io;
            for (int32_t w = m->ctx->wait_start[t]; w < m->ctx->wait_start[t + 1]; w++)
                *io++ = m->ctx->waits[w];
        }
        /* Workspace for these shapes, asked of the kernel with no data yet. */
        if (s->kernel->workspace_size) {
            cge_tensor ins[64], outs[64];
            if (s->num_inputs > 64 || s->num_outputs > 64)
                return cge_error(CGE_LAYER_ENGINE, CGE_ERR_UNSUPPORTED,
                                 "node '%s': more than 64 inputs or outputs", cge_node_name(nd));
            for (int32_t k = 0; k < s->num_inputs; k++) {
                memset(&ins[k], 0, sizeof ins[k]);
                if (s->inputs[k] >= 0) {
                    const cge_plan_value *v = &p->values[s->inputs[k]];
                    ins[k] = (cge_tensor){.name = v->name, .dtype = v->dtype, .shape = v->shape,
                                          .bytes = v->bytes};
                }
            }
            for (int32_t k = 0; k < s->num_outputs; k++) {
                const cge_plan_value *v = &p->values[s->outputs[k]];
                outs[k] = (cge_tensor){.name = v->name, .dtype = v->dtype, .shape = v->shape,
                                       .bytes = v->bytes};
            }
            cge_kernel_ctx kc = {.op_type = cge_node_op_type(nd), .node_name = cge_node_name(nd),
                                 .num_inputs = s->num_inputs, .inputs = ins,
                                 .num_outputs = s->num_outputs, .outputs = outs,
                                 .attrs = cge_node_attrs_const(nd),
                                 .num_threads = m->ctx->dev ? cge_device_num_threads(m->ctx->dev) : 0};
            s->workspace_bytes = s->kernel->workspace_size(&kc);
        }
    }
    return CGE_OK;
}

static cge_status readers_build(mp *m)
{
    cge_plan *p = m->p;
    int32_t nv = p->num_values;
    m->prod = malloc(sizeof(int32_t) * ((size_t)nv + 1));
    m->rstart = calloc((size_t)nv + 2, sizeof(int32_t));
    int64_t total = 0;
    for (int32_t t = 0; t < m->n; t++)
        total += p->steps[t].num_inputs;
    m->readers = malloc(sizeof(int32_t) * (size_t)(total + 1));
    if (!m->prod || !m->rstart || !m->readers)
        return oom();
    for (int32_t v = 0; v < nv; v++)
        m->prod[v] = -1;
    for (int32_t t = 0; t < m->n; t++) {
        const cge_plan_step *s = &p->steps[t];
        for (int32_t k = 0; k < s->num_outputs; k++)
            m->prod[s->outputs[k]] = t;
        for (int32_t k = 0; k < s->num_inputs; k++) {
            bool dup = s->inputs[k] < 0;
            for (int32_t j = 0; j < k && !dup; j++)
                dup = s->inputs[j] == s->inputs[k];
            if (!dup)
                m->rstart[s->inputs[k] + 1]++;
        }
    }
    for (int32_t v = 0; v < nv; v++)
        m->rstart[v + 1] += m->rstart[v];
    int32_t *fill = malloc(sizeof(int32_t) * ((size_t)nv + 1));
    if (!fill)
        return oom();
    memcpy(fill, m->rstart, sizeof(int32_t) * (size_t)nv);
    for (int32_t t = 0; t < m->n; t++) {
        const cge_plan_step *s = &p->steps[t];
        for (int32_t k = 0; k < s->num_inputs; k++) {
            bool dup = s->inputs[k] < 0;
            for (int32_t j = 0; j < k && !dup; j++)
                dup = s->inputs[j] == s->inputs[k];
            if (!dup)
                m->readers[fill[s->inputs[k]]++] = t;
        }
    }
    free(fill);
    return CGE_OK;
}

static cge_status make_groups(mp *m)
{
    cge_plan *p = m->p;
    int32_t nv = p->num_values, S = m->S;
    int32_t *rmax = malloc(sizeof(int32_t) * ((size_t)nv * (size_t)S + 1));
    if (!rmax)
        return oom();
    for (int32_t v = 0; v < nv; v++) {
        m->parent[v] = v;
        m->has_output[v] = p->values[v].output_index >= 0;
        for (int32_t s = 0; s < S; s++)
            rmax[(size_t)v * (size_t)S + (size_t)s] = -1;
        add_readers(m, v, &rmax[(size_t)v * (size_t)S]);
    }
    for (int32_t t = 0; t < m->n; t++) {
        const cge_plan_step *s = &p->steps[t];
        if (s->num_outputs < 1 || s->num_inputs < 1)
            continue;
        int32_t out = s->outputs[0];
        cge_plan_value *ov = &p->values[out];
        if (ov->storage != CGE_STORAGE_ARENA || ov->input_index >= 0)
            continue;
        int32_t src = -1;
        if (cc_is_view_op(s->node) && s->num_outputs == 1 && s->inputs[0] >= 0) {
            const cge_plan_value *iv = &p->values[s->inputs[0]];
            if (iv->bytes == ov->bytes && iv->memory_space == ov->memory_space)
                src = s->inputs[0];
        } else if (s->kernel->inplace_input >= 0 && s->kernel->inplace_input < s->num_inputs &&
                   s->inputs[s->kernel->inplace_input] >= 0) {
            int32_t in = s->inputs[s->kernel->inplace_input];
            const cge_plan_value *iv = &p->values[in];
            int32_t root = find(m->parent, in);
            bool ok = iv->storage == CGE_STORAGE_ARENA && iv->memory_space == ov->memory_space &&
                      p->values[root].bytes == ov->bytes && iv->bytes == ov->bytes &&
                      !m->has_output[root];
            /* Another operand in the same memory would be overwritten under it. */
            for (int32_t k = 0; ok && k < s->num_inputs; k++)
                ok = s->inputs[k] < 0 || s->inputs[k] == in || find(m->parent, s->inputs[k]) != root;
            for (int32_t k = 1; ok && k < s->num_outputs; k++)
                ok = find(m->parent, s->outputs[k]) != root;
            if (ok && group_dead_at(m, &rmax[(size_t)root * (size_t)S], t))
                src = in;
        }
        if (src < 0)
            continue;
        int32_t root = find(m->parent, src);
        m->parent[out] = root;
        m->has_output[root] |= m->has_output[out];
        int32_t *gr = &rmax[(size_t)root * (size_t)S], *orr = &rmax[(size_t)out * (size_t)S];
        for (int32_t q = 0; q < S; q++)
            if (orr[q] > gr[q])
                gr[q] = orr[q];
        if (p->values[root].storage == CGE_STORAGE_CONSTANT)
            ov->storage = CGE_STORAGE_CONSTANT;
    }
    free(rmax);
    return CGE_OK;
}

static cge_status place(mp *m)
{
    cge_plan *p = m->p;
    int32_t nv = p->num_values;
    int32_t *scratch = malloc(sizeof(int32_t) * ((size_t)m->n + 2));
    int32_t *gfirst = malloc(sizeof(int32_t) * ((size_t)nv + 1));
    int32_t *glast = malloc(sizeof(int32_t) * ((size_t)nv + 1));
    int32_t *block_of = malloc(sizeof(int32_t) * ((size_t)nv + 1));
    cge_mem_block *blocks = malloc(sizeof(cge_mem_block) * ((size_t)nv + (size_t)m->n + 1));
    cge_status st = scratch && gfirst && glast && block_of && blocks ? CGE_OK : oom();
    for (int32_t v = 0; !st && v < nv; v++) {
        cge_plan_value *pv = &p->values[v];
        pv->first_step = m->prod[v];
        pv->last_step = pv->output_index >= 0 ? m->n : value_release(m, v, scratch);
        if (pv->last_step < pv->first_step)
            pv->last_step = pv->first_step;
        gfirst[v] = INT32_MAX;
        glast[v] = INT32_MIN;
    }
    for (int32_t v = 0; !st && v < nv; v++) {
        int32_t r = find(m->parent, v);
        if (p->values[v].first_step < gfirst[r])
            gfirst[r] = p->values[v].first_step;
        if (p->values[v].last_step > glast[r])
            glast[r] = p->values[v].last_step;
    }
    int32_t nb = 0;
    size_t naive = 0;
    for (int32_t v = 0; !st && v < nv; v++) {
        cge_plan_value *pv = &p->values[v];
        block_of[v] = -1;
        if (pv->storage == CGE_STORAGE_ARENA)
            naive += align64(pv->bytes);
        if (find(m->parent, v) != v || pv->storage != CGE_STORAGE_ARENA || !pv->bytes)
            continue;
        block_of[v] = nb;
        blocks[nb++] = (cge_mem_block){.bytes = pv->bytes, .first = gfirst[v], .last = glast[v]};
    }
    int32_t ws0 = nb;
    for (int32_t t = 0; !st && t < m->n; t++) {
        cge_plan_step *s = &p->steps[t];
        p->ws_last[t] = t;
        if (!s->workspace_bytes)
            continue;
        scratch[0] = t;
        p->ws_last[t] = release_step(m, scratch, 1);
        naive += align64(s->workspace_bytes);
        blocks[nb++] = (cge_mem_block){.bytes = s->workspace_bytes, .first = t, .last = p->ws_last[t]};
    }
    if (!st)
        st = cge_memplan_assign(blocks, nb, 64, CGE_MEMPLAN_AUTO, &p->arena_bytes);
    if (!st) {
        for (int32_t v = 0; v < nv; v++) {
            int32_t r = find(m->parent, v);
            cge_plan_value *pv = &p->values[v];
            if (r != v) {
                pv->alias_of = r;
                pv->offset = p->values[r].storage == CGE_STORAGE_CONSTANT || block_of[r] < 0
                                 ? p->values[r].offset
                                 : blocks[block_of[r]].offset;
            } else {
                if (block_of[v] >= 0)
                    pv->offset = blocks[block_of[v]].offset;
                if (pv->storage == CGE_STORAGE_ARENA) {
                    pv->first_step = gfirst[v];
                    pv->last_step = glast[v];
                }
            }
        }
        int32_t k = ws0;
        for (int32_t t = 0; t < m->n; t++)
            if (p->steps[t].workspace_bytes)
                p->steps[t].workspace_offset = blocks[k++].offset;
        p->stats.arena_bytes = p->arena_bytes;
        p->stats.lower_bound_bytes = cge_memplan_lower_bound(blocks, nb, 64);
        p->stats.naive_bytes = naive;
    }
    free(scratch);
    free(gfirst);
    free(glast);
    free(block_of);
    free(blocks);
    return st;
}

cge_status cc_pass_plan_memory(cc_ctx *ctx, cge_graph *g)
{
    cge_plan *p = ctx->plan;
    int32_t nn = cge_graph_num_nodes(g), nv = cge_graph_num_values(g);
    if (!ctx->order || ctx->num_order != nn) {
        free(ctx->order);
        ctx->order = malloc(sizeof(int32_t) * ((size_t)nn + 1));
        if (!ctx->order)
            return oom();
        ctx->num_order = nn;
        cge_status st = cge_graph_topo_order(g, ctx->order);
        if (st)
            return st;
    }
    mp m = {.ctx = ctx, .g = g, .p = p, .n = nn,
            .S = ctx->step_stream ? ctx->opts.num_streams : 1};
    p->num_steps = nn;
    p->num_ids = nv;
    p->value_of_id = malloc(sizeof(int32_t) * ((size_t)nv + 1));
    p->values = calloc((size_t)nv + 1, sizeof(cge_plan_value));
    p->num_inputs = cge_graph_num_inputs(g);
    p->num_outputs = cge_graph_num_outputs(g);
    p->input_values = malloc(sizeof(int32_t) * ((size_t)p->num_inputs + 1));
    p->output_values = malloc(sizeof(int32_t) * ((size_t)p->num_outputs + 1));
    if (!p->value_of_id || !p->values || !p->input_values || !p->output_values)
        return oom();
    for (int32_t i = 0; i < nv; i++)
        p->value_of_id[i] = -1;
    cge_status st = CGE_OK;
    for (int32_t i = 0; !st && i < p->num_inputs; i++)
        st = add_value(&m, cge_graph_value_id(g, cge_graph_input(g, i)));
    for (int32_t t = 0; !st && t < nn; t++) {
        const cge_node *nd = cge_graph_node(g, ctx->order[t]);
        for (int32_t k = 0; !st && k < cge_node_num_inputs(nd); k++)
            st = add_value(&m, cge_node_input_id(nd, k));
        for (int32_t k = 0; !st && k < cge_node_num_outputs(nd); k++)
            st = add_value(&m, cge_node_output_id(nd, k));
    }
    for (int32_t i = 0; !st && i < p->num_outputs; i++)
        st = add_value(&m, cge_graph_value_id(g, cge_graph_output(g, i)));
    for (int32_t i = 0; !st && i < p->num_inputs; i++) {
        p->input_values[i] = p->value_of_id[cge_graph_value_id(g, cge_graph_input(g, i))];
        p->values[p->input_values[i]].input_index = i;
    }
    for (int32_t i = 0; !st && i < p->num_outputs; i++) {
        p->output_values[i] = p->value_of_id[cge_graph_value_id(g, cge_graph_output(g, i))];
        if (p->values[p->output_values[i]].output_index < 0)
            p->values[p->output_values[i]].output_index = i;
    }
    if (!st)
        st = build_steps(&m, ctx->order);
    if (!st)
        st = readers_build(&m);
    if (!st && m.S > 1) {
        m.stream_steps = calloc((size_t)m.S, sizeof(int32_t *));
        m.stream_len = calloc((size_t)m.S, sizeof(int32_t));
        if (!m.stream_steps || !m.stream_len)
            st = oom();
        for (int32_t s = 0; !st && s < m.S; s++)
            if (!(m.stream_steps[s] = malloc(sizeof(int32_t) * ((size_t)nn + 1))))
                st = oom();
        for (int32_t t = 0; !st && t < nn; t++) {
            int32_t s = ctx->step_stream[t];
            m.stream_steps[s][m.stream_len[s]++] = t;
        }
    }
    if (!st) {
        m.parent = malloc(sizeof(int32_t) * ((size_t)p->num_values + 1));
        m.has_output = calloc((size_t)p->num_values + 1, sizeof(bool));
        if (!m.parent || !m.has_output)
            st = oom();
    }
    if (!st)
        st = make_groups(&m);
    if (!st)
        st = place(&m);
    if (!st) {
        int32_t used = 0;
        for (int32_t t = 0; t < nn; t++)
            if (p->steps[t].stream + 1 > used)
                used = p->steps[t].stream + 1;
        p->num_streams = used > 0 ? used : 1;
        p->num_events = ctx->num_events;
        p->stats.num_streams = p->num_streams;
        p->stats.num_events = p->num_events;
        p->stats.constant_bytes = p->constant_bytes;
        st = cge_plan_verify(p);
    }
    free(m.prod);
    free(m.rstart);
    free(m.readers);
    free(m.parent);
    free(m.has_output);
    if (m.stream_steps)
        for (int32_t s = 0; s < m.S; s++)
            free(m.stream_steps[s]);
    free(m.stream_steps);
    free(m.stream_len);
    return st;
}
