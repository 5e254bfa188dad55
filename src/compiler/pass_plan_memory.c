/* build/plan_memory: the plan itself. Every value gets a place: constants in
 * one blob, everything else (graph inputs and outputs included) in one arena,
 * by lifetimes; views and in-place outputs share memory. */
#include <stdlib.h>
#include <string.h>

#include "cge/fused_ops.h"
#include "compiler/compiler_internal.h"

/* Views (Reshape, Flatten, Squeeze, Unsqueeze, Identity, the layout passes'
 * LayoutView) share their input's memory; an output takes an input's buffer in
 * place when the kernel allows it, the sizes match and nothing reads the input
 * afterwards. Offsets come from cge_memplan_assign; cge_plan_verify checks the
 * result. */

typedef struct mp {
    cc_ctx *ctx;
    cge_graph *g;
    cge_plan *p;
    cge_plan_value *vals;       /* the plan's, as they are added */
    cge_plan_step *steps;
    int32_t nv;
    size_t constant_bytes, arena_bytes;
    int32_t n;                  /* steps */
    int32_t S;
    int32_t *prod;              /* per plan value: producing step, -1 */
    int32_t *rstart, *readers;  /* CSR per plan value: reading steps (distinct) */
    int32_t *parent;            /* alias groups */
    bool *has_output;           /* per group root */
    int32_t **stream_steps;     /* per stream: its steps in issue order */
    int32_t *stream_len;
    /* A symbolic plan (compile option symbolic_plan): shapes may hold
     * symbols, sizes are unknown; steps, groups and lifetimes are made, and
     * cge_plan_specialize gives bytes and offsets per signature. */
    bool sym_allowed, sym;      /* sym: some value's shape is not static */
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
    if (id < 0 || cge__plan_value_of_id(p, id) >= 0)
        return CGE_OK;
    cge_tensor_desc d;
    cge_status st = cge_graph_value_desc(m->g, id, &d);
    if (st)
        return st;
    char sh[CGE_SHAPE_STR_MAX];
    bool symbolic_ok = m->sym_allowed && d.shape.rank >= 0 &&
                       cge_graph_value_kind(m->g, id) != CGE_VALUE_CONSTANT;
    if (symbolic_ok && cge_dtype_valid(d.dtype) && !cge_shape_is_static(&d.shape))
        m->sym = true;
    if (!cge_dtype_valid(d.dtype) || (!cge_shape_is_static(&d.shape) && !symbolic_ok))
        return cge_error(CGE_LAYER_META, CGE_ERR_SHAPE,
                         "value '%s' is %s %s when the plan is built: every shape must be known "
                         "(compile with concrete input shapes; shapes that depend on computed "
                         "values need eager runs)",
                         d.name, cge_dtype_name(d.dtype),
                         cge_graph_shape_str(m->g, &d.shape, sh, sizeof sh));
    cge_node *prod = cge_graph_value_producer(m->g, id);
    cge_plan_value pv = {
        .dtype = d.dtype, .shape = d.shape,
        .format = d.format, .memory_space = prod ? m->ctx->node_space[cge_node_index(prod)] : 0,
        .bytes = cge_tensor_nbytes(d.dtype, &d.shape), .alias_of = -1, .first_step = -1,
        .last_step = -1, .input_index = -1, .output_index = -1};
    switch (cge_graph_value_kind(m->g, id)) {
    case CGE_VALUE_CONSTANT:
        pv.storage = CGE_STORAGE_CONSTANT;
        pv.offset = m->constant_bytes;
        m->constant_bytes += align64(pv.bytes);
        break;
    case CGE_VALUE_INPUT:
    case CGE_VALUE_NODE:
        pv.storage = CGE_STORAGE_ARENA;
        break;
    default:
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INTERNAL, "plan_memory: value '%s' is undefined",
                         d.name);
    }
    if (cge__plan_add_value(p, id, &pv, NULL))
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INTERNAL, "plan_memory: value '%s' added twice",
                         d.name);
    m->nv++;
    return CGE_OK;
}

/* Whether two values take the same bytes at every size: equal when both are
 * known; in a symbolic plan, the same element size and the same dims, each
 * known or the same symbol (an unknown -1 dim equals nothing). */
static bool same_bytes(const mp *m, const cge_plan_value *a, const cge_plan_value *b)
{
    if (cge_shape_is_static(&a->shape) && cge_shape_is_static(&b->shape))
        return a->bytes == b->bytes;
    if (!m->sym || cge_dtype_size(a->dtype) != cge_dtype_size(b->dtype) ||
        a->shape.rank != b->shape.rank)
        return false;
    for (int32_t i = 0; i < a->shape.rank; i++)
        if (a->shape.dims[i] != b->shape.dims[i] || a->shape.dims[i] == CGE_DIM_DYNAMIC)
            return false;
    return true;
}

/* A view's output has its input's elements (meta holds every view op to
 * it), so in a symbolic plan the same element size means the same bytes;
 * cge_plan_specialize checks it at each size. */
static bool view_same_bytes(const mp *m, const cge_plan_value *a, const cge_plan_value *b)
{
    if (cge_shape_is_static(&a->shape) && cge_shape_is_static(&b->shape))
        return a->bytes == b->bytes;
    return m->sym && cge_dtype_size(a->dtype) == cge_dtype_size(b->dtype);
}

/* ---- lifetimes ------------------------------------------------------------------ */

/* Whether step t starts after every step of R is done (R as the largest
 * position per stream, -1 for none). */
static bool after_all(const mp *m, int32_t t, const int32_t *rmax)
{
    const cc_stream_plan *c = &m->ctx->build.streams;
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
        int32_t s = m->ctx->build.streams.step_stream[steps[i]], pos = m->ctx->build.streams.step_pos[steps[i]];
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

static int32_t stream_of(const mp *m, int32_t t) { return m->S > 1 ? m->ctx->build.streams.step_stream[t] : 0; }
static int32_t pos_of(const mp *m, int32_t t) { return m->S > 1 ? m->ctx->build.streams.step_pos[t] : t; }

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
                    : m->ctx->build.streams.vc[(size_t)t * (size_t)m->S + (size_t)s] < rmax[s])
            return false;
    }
    return true;
}

/* ---- main -------------------------------------------------------------------------- */

static cge_status build_steps(mp *m, const int32_t *order)
{
    cge_plan *p = m->p;
    cge_graph *g = m->g;
    const cc_stream_plan *sp = &m->ctx->build.streams;
    for (int32_t t = 0; t < m->n; t++) {
        int32_t ni = order[t];
        const cge_node *nd = cge_graph_node(g, ni);
        cge_plan_step *s = &m->steps[t];
        int32_t nin = cge_node_num_inputs(nd), nout = cge_node_num_outputs(nd);
        int32_t nw = sp->made ? sp->wait_start[t + 1] - sp->wait_start[t] : 0;
        int32_t *io = NULL;
        cge_status st = cge__plan_step_io(p, t, nin, nout, nw, &io);
        if (st)
            return st;
        s->node = nd;
        s->def = m->ctx->node_def[ni];
        s->kernel = m->ctx->node_kernel[ni];
        s->engine = m->ctx->engines[m->ctx->node_engine[ni]].name;
        s->stream = sp->made ? sp->step_stream[t] : 0;
        for (int32_t k = 0; k < nin; k++) {
            int32_t id = cge_node_input_id(nd, k);
            *io++ = id >= 0 ? cge__plan_value_of_id(p, id) : -1;
        }
        for (int32_t k = 0; k < nout; k++)
            *io++ = cge__plan_value_of_id(p, cge_node_output_id(nd, k));
        s->record = sp->made ? sp->record_event[t] : -1;
        for (int32_t w = 0; w < nw; w++)
            *io++ = sp->waits[sp->wait_start[t] + w];
        /* Workspace for these shapes, asked of the kernel with no data yet
         * (a symbolic plan's come with its sizes: cge_plan_specialize). */
        if (s->kernel->workspace_size && !m->sym) {
            if (s->num_inputs > CC_STEP_MAX_IO || s->num_outputs > CC_STEP_MAX_IO)
                return cge_error(CGE_LAYER_ENGINE, CGE_ERR_UNSUPPORTED,
                                 "node '%s': more than 64 inputs or outputs", cge_node_name(nd));
            s->workspace_bytes = cc_step_workspace(
                s, m->vals, NULL, NULL, m->ctx->dev ? cge_device_num_threads(m->ctx->dev) : 0);
        }
    }
    return CGE_OK;
}

static cge_status readers_build(mp *m)
{
    int32_t nv = m->nv;
    m->prod = malloc(sizeof(int32_t) * ((size_t)nv + 1));
    m->rstart = calloc((size_t)nv + 2, sizeof(int32_t));
    int64_t total = 0;
    for (int32_t t = 0; t < m->n; t++)
        total += m->steps[t].num_inputs;
    m->readers = malloc(sizeof(int32_t) * (size_t)(total + 1));
    if (!m->prod || !m->rstart || !m->readers)
        return oom();
    for (int32_t v = 0; v < nv; v++)
        m->prod[v] = -1;
    for (int32_t t = 0; t < m->n; t++) {
        const cge_plan_step *s = &m->steps[t];
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
        const cge_plan_step *s = &m->steps[t];
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
    int32_t nv = m->nv, S = m->S;
    int32_t *rmax = malloc(sizeof(int32_t) * ((size_t)nv * (size_t)S + 1));
    if (!rmax)
        return oom();
    for (int32_t v = 0; v < nv; v++) {
        m->parent[v] = v;
        m->has_output[v] = m->vals[v].output_index >= 0;
        for (int32_t s = 0; s < S; s++)
            rmax[(size_t)v * (size_t)S + (size_t)s] = -1;
        add_readers(m, v, &rmax[(size_t)v * (size_t)S]);
    }
    for (int32_t t = 0; t < m->n; t++) {
        const cge_plan_step *s = &m->steps[t];
        if (s->num_outputs < 1 || s->num_inputs < 1)
            continue;
        int32_t out = s->outputs[0];
        cge_plan_value *ov = &m->vals[out];
        if (ov->storage != CGE_STORAGE_ARENA || ov->input_index >= 0)
            continue;
        int32_t src = -1;
        if (cc_is_view_op(s->node) && s->num_outputs == 1 && s->inputs[0] >= 0) {
            const cge_plan_value *iv = &m->vals[s->inputs[0]];
            if (view_same_bytes(m, iv, ov) && iv->memory_space == ov->memory_space)
                src = s->inputs[0];
        } else if (s->kernel->inplace_input >= 0 && s->kernel->inplace_input < s->num_inputs &&
                   s->inputs[s->kernel->inplace_input] >= 0) {
            int32_t in = s->inputs[s->kernel->inplace_input];
            const cge_plan_value *iv = &m->vals[in];
            int32_t root = find(m->parent, in);
            /* Never into a graph input's memory: a run may hand the caller's
             * own buffer to the kernels (I/O binding), which must stay as given. */
            bool ok = iv->storage == CGE_STORAGE_ARENA && iv->memory_space == ov->memory_space &&
                      same_bytes(m, &m->vals[root], ov) && same_bytes(m, iv, ov) &&
                      !m->has_output[root] && m->vals[root].input_index < 0;
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
        if (m->vals[root].storage == CGE_STORAGE_CONSTANT)
            ov->storage = CGE_STORAGE_CONSTANT;
    }
    free(rmax);
    return CGE_OK;
}

static cge_status place(mp *m)
{
    cge_plan *p = m->p;
    int32_t nv = m->nv;
    int32_t *scratch = malloc(sizeof(int32_t) * ((size_t)m->n + 2));
    int32_t *gfirst = malloc(sizeof(int32_t) * ((size_t)nv + 1));
    int32_t *glast = malloc(sizeof(int32_t) * ((size_t)nv + 1));
    int32_t *block_of = malloc(sizeof(int32_t) * ((size_t)nv + 1));
    cge_mem_block *blocks = malloc(sizeof(cge_mem_block) * ((size_t)nv + (size_t)m->n + 1));
    cge_status st = scratch && gfirst && glast && block_of && blocks ? CGE_OK : oom();
    for (int32_t v = 0; !st && v < nv; v++) {
        cge_plan_value *pv = &m->vals[v];
        pv->first_step = m->prod[v];
        pv->last_step = pv->output_index >= 0 ? m->n : value_release(m, v, scratch);
        if (pv->last_step < pv->first_step)
            pv->last_step = pv->first_step;
        gfirst[v] = INT32_MAX;
        glast[v] = INT32_MIN;
    }
    for (int32_t v = 0; !st && v < nv; v++) {
        int32_t r = find(m->parent, v);
        if (m->vals[v].first_step < gfirst[r])
            gfirst[r] = m->vals[v].first_step;
        if (m->vals[v].last_step > glast[r])
            glast[r] = m->vals[v].last_step;
    }
    int32_t nb = 0;
    size_t naive = 0;
    for (int32_t v = 0; !st && v < nv; v++) {
        cge_plan_value *pv = &m->vals[v];
        block_of[v] = -1;
        if (pv->storage == CGE_STORAGE_ARENA)
            naive += align64(pv->bytes);
        if (find(m->parent, v) != v || pv->storage != CGE_STORAGE_ARENA || (!pv->bytes && !m->sym))
            continue;
        block_of[v] = nb;
        blocks[nb++] = (cge_mem_block){.bytes = pv->bytes, .first = gfirst[v], .last = glast[v]};
    }
    int32_t ws0 = nb;
    for (int32_t t = 0; !st && t < m->n; t++) {
        cge_plan_step *s = &m->steps[t];
        if (!s->workspace_bytes)
            continue;
        scratch[0] = t;
        cge__plan_set_workspace_last(p, t, release_step(m, scratch, 1));
        naive += align64(s->workspace_bytes);
        blocks[nb++] = (cge_mem_block){.bytes = s->workspace_bytes, .first = t,
                                       .last = cge_plan_workspace_last_step(p, t)};
    }
    if (!st && !m->sym)
        st = cge_memplan_assign(blocks, nb, 64, CGE_MEMPLAN_AUTO, &m->arena_bytes);
    for (int32_t b = 0; m->sym && b < nb; b++)
        blocks[b].offset = 0;   /* per signature: cge_plan_specialize */
    if (!st) {
        for (int32_t v = 0; v < nv; v++) {
            int32_t r = find(m->parent, v);
            cge_plan_value *pv = &m->vals[v];
            if (r != v) {
                pv->alias_of = r;
                pv->offset = m->vals[r].storage == CGE_STORAGE_CONSTANT || block_of[r] < 0
                                 ? m->vals[r].offset
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
            if (m->steps[t].workspace_bytes)
                m->steps[t].workspace_offset = blocks[k++].offset;
        cge_plan_stats *ps = cge__plan_stats_mut(p);
        ps->arena_bytes = m->arena_bytes;
        ps->lower_bound_bytes = cge_memplan_lower_bound(blocks, nb, 64);
        ps->naive_bytes = naive;
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
    cge_plan *p = ctx->build.plan;
    int32_t nn = cge_graph_num_nodes(g), nv = cge_graph_num_values(g);
    const int32_t *order = ctx->build.order;
    if (!order || ctx->build.num_order != nn)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INTERNAL, "plan_memory: build/order has not run");
    const cc_stream_plan *sp = &ctx->build.streams;
    mp m = {.ctx = ctx, .g = g, .p = p, .n = nn, .S = sp->made ? ctx->opts.num_streams : 1,
            .sym_allowed = ctx->opts.symbolic_plan && ctx->opts.allow_incomplete};
    int32_t ni = cge_graph_num_inputs(g), no = cge_graph_num_outputs(g);
    size_t ios = sp->made ? (size_t)sp->wait_start[nn] : 0;
    for (int32_t t = 0; t < nn; t++) {
        const cge_node *nd = cge_graph_node(g, order[t]);
        ios += (size_t)cge_node_num_inputs(nd) + (size_t)cge_node_num_outputs(nd);
    }
    cge_status st = cge__plan_reserve(p, nn, nv, ni, no, ios);
    m.vals = cge__plan_values_mut(p);
    m.steps = cge__plan_steps_mut(p);
    for (int32_t i = 0; !st && i < ni; i++)
        st = add_value(&m, cge_graph_value_id(g, cge_graph_input(g, i)));
    for (int32_t t = 0; !st && t < nn; t++) {
        const cge_node *nd = cge_graph_node(g, order[t]);
        for (int32_t k = 0; !st && k < cge_node_num_inputs(nd); k++)
            st = add_value(&m, cge_node_input_id(nd, k));
        for (int32_t k = 0; !st && k < cge_node_num_outputs(nd); k++)
            st = add_value(&m, cge_node_output_id(nd, k));
    }
    for (int32_t i = 0; !st && i < no; i++)
        st = add_value(&m, cge_graph_value_id(g, cge_graph_output(g, i)));
    for (int32_t i = 0; !st && i < ni; i++) {
        int32_t v = cge__plan_value_of_id(p, cge_graph_value_id(g, cge_graph_input(g, i)));
        cge__plan_set_io(p, false, i, v);
        m.vals[v].input_index = i;
    }
    for (int32_t i = 0; !st && i < no; i++) {
        int32_t v = cge__plan_value_of_id(p, cge_graph_value_id(g, cge_graph_output(g, i)));
        cge__plan_set_io(p, true, i, v);
        if (m.vals[v].output_index < 0)
            m.vals[v].output_index = i;
    }
    if (!st)
        st = build_steps(&m, order);
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
            int32_t s = sp->step_stream[t];
            m.stream_steps[s][m.stream_len[s]++] = t;
        }
    }
    if (!st) {
        m.parent = malloc(sizeof(int32_t) * ((size_t)m.nv + 1));
        m.has_output = calloc((size_t)m.nv + 1, sizeof(bool));
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
            if (m.steps[t].stream + 1 > used)
                used = m.steps[t].stream + 1;
        int32_t streams = used > 0 ? used : 1;
        cge__plan_set_sizes(p, m.arena_bytes, m.constant_bytes, streams, sp->num_events);
        cge_plan_stats *ps = cge__plan_stats_mut(p);
        ps->num_streams = streams;
        ps->num_events = sp->num_events;
        ps->constant_bytes = m.constant_bytes;
        /* A symbolic plan has no offsets yet: its specialisations are
         * verified instead. */
        if (!m.sym)
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
