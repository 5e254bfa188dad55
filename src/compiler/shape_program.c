/* The shape program of a symbolic plan (cge_plan_specialize): a concrete plan
 * for one input signature from the plan's own steps, by running each step's
 * meta on concrete shapes and giving the fixed lifetimes offsets. No pass, no
 * graph copy, no whole-graph inference. */
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler_internal.h"

/* Why meta along the steps is the shape program, and not expressions of the
 * dims recorded once: meta already is the one statement of every operator's
 * shape rule and constraints, so a run at a new size refuses exactly what a
 * compile would ([meta] errors naming the node) and no rule is written twice.
 * A step's meta costs a fraction of a microsecond; a few hundred steps are
 * tens of microseconds, paid only when the input dims change. Shape
 * computations inside the graph (Shape -> Gather -> Concat -> Reshape) need
 * their values for the Reshape's meta: small integer values are evaluated
 * here with their CPU kernels on host memory, as the compiler's inference
 * does. The plan's structure (steps, kernels, alias groups, lifetimes) does
 * not depend on sizes; only bytes, offsets and workspaces do, and the
 * offsets come from one cge_memplan_assign over the fixed lifetimes. */

#define MAX_IO 64
/* Values evaluated here are shape-sized (as the infer pass's). */
#define SMALL_BYTES 4096

typedef struct spec {
    const cge_plan *sp;
    const cge_graph *g;
    const cge_plan_value *vals;
    int32_t nv, ns;
    cge_shape *shape;         /* per value, concrete */
    size_t *bytes;
    const void **data;        /* per value: constant bytes, or host values made here */
    void **owned;             /* what `data` points at when made here */
    cge_device *dev;
    cge_stream *imm;
} spec;

static cge_status oom(void)
{
    return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "specialize: out of memory");
}

static int32_t root_of(const cge_plan_value *vals, int32_t v)
{
    while (vals[v].alias_of >= 0)
        v = vals[v].alias_of;
    return v;
}

/* Constant bytes of plan value v in place, in the plan's graph. */
static const void *constant_data(const spec *s, int32_t v)
{
    const cge_plan_value *pv = &s->vals[v];
    if (pv->storage != CGE_STORAGE_CONSTANT)
        return NULL;
    const cge_plan_value *root = &s->vals[root_of(s->vals, v)];
    const cge_tensor *t = cge_graph_constant(s->g, root->name);
    if (!t || t->bytes < pv->offset - root->offset + pv->bytes)
        return NULL;
    return (const char *)t->data + (pv->offset - root->offset);
}

/* Host value of a small computation all of whose inputs are at hand: Shape
 * and Size from the shape alone, the rest by their CPU kernel. A step that
 * cannot be evaluated leaves its outputs unknown (the run computes them). */
static cge_status evaluate(spec *s, const cge_plan_step *st, const cge_tensor_desc *out)
{
    int32_t ni = st->num_inputs, no = st->num_outputs;
    size_t total = 0;
    for (int32_t k = 0; k < no; k++)
        total += s->bytes[st->outputs[k]];
    if (total > SMALL_BYTES || cc_is_nondeterministic(st->node))
        return CGE_OK;
    if (cc_is_op(st->node, "Shape") || cc_is_op(st->node, "Size")) {
        const cge_shape *in = &s->shape[st->inputs[0]];
        int64_t *v = malloc(sizeof(int64_t) * CGE_MAX_RANK + 8);
        if (!v)
            return oom();
        if (cc_is_op(st->node, "Size")) {
            v[0] = cge_shape_numel(in);
        } else {
            int64_t r = in->rank, a = cge_attrs_get_int(cge_node_attrs_const(st->node), "start", 0);
            a = a < 0 ? a + r : a;
            a = a < 0 ? 0 : (a > r ? r : a);
            int64_t cnt = out[0].shape.rank == 1 ? out[0].shape.dims[0] : -1;
            if (cnt < 0 || a + cnt > r) {
                free(v);
                return CGE_OK;
            }
            memcpy(v, in->dims + a, sizeof(int64_t) * (size_t)cnt);
        }
        s->owned[st->outputs[0]] = v;
        s->data[st->outputs[0]] = v;
        return CGE_OK;
    }
    if (strcmp(st->kernel->engine, "cpu") || ni > MAX_IO || no > MAX_IO)
        return CGE_OK;
    cge_tensor ins[MAX_IO], outs[MAX_IO];
    for (int32_t k = 0; k < ni; k++) {
        int32_t v = st->inputs[k];
        ins[k] = (cge_tensor){.dtype = CGE_DTYPE_UNDEFINED};
        if (v < 0)
            continue;
        if (!s->data[v] || s->bytes[v] > SMALL_BYTES)
            return CGE_OK;
        ins[k] = (cge_tensor){.name = s->vals[v].name, .dtype = s->vals[v].dtype,
                              .shape = s->shape[v], .data = (void *)s->data[v],
                              .bytes = s->bytes[v]};
    }
    if (!s->imm) {
        cge_status st2 = cge_stream_create_immediate(s->dev, &s->imm);
        if (st2)
            return st2;
    }
    cge_status rc = CGE_OK;
    for (int32_t k = 0; k < no; k++) {
        int32_t v = st->outputs[k];
        outs[k] = (cge_tensor){.name = s->vals[v].name, .dtype = out[k].dtype,
                               .shape = out[k].shape, .bytes = s->bytes[v],
                               .data = malloc(s->bytes[v] + 8)};
        if (!outs[k].data)
            rc = oom();
    }
    cge_kernel_ctx kc = {.op_type = cge_node_op_type(st->node), .node_name = cge_node_name(st->node),
                         .num_inputs = ni, .inputs = ins, .num_outputs = no, .outputs = outs,
                         .attrs = cge_node_attrs_const(st->node), .device = s->dev,
                         .num_threads = 1};
    void *ws = NULL;
    if (!rc && st->kernel->workspace_size) {
        kc.workspace_size = st->kernel->workspace_size(&kc);
        if (kc.workspace_size && !(ws = malloc(kc.workspace_size)))
            rc = oom();
        kc.workspace = ws;
    }
    if (!rc && st->kernel->prepare)
        rc = st->kernel->prepare(&kc, &kc.state);
    if (!rc)
        rc = st->kernel->launch(&kc, s->imm);
    cge_status sy = cge_stream_synchronize(s->imm);
    if (!rc)
        rc = sy;
    if (st->kernel->release && kc.state)
        st->kernel->release(kc.state);
    free(ws);
    bool ok = rc == CGE_OK;
    if (rc && rc != CGE_ERR_NO_MEMORY) {
        cge_clear_error();   /* not known now; the run computes it and reports a problem */
        rc = CGE_OK;
    }
    for (int32_t k = 0; k < no; k++) {
        if (ok) {
            s->owned[st->outputs[k]] = outs[k].data;
            s->data[st->outputs[k]] = outs[k].data;
        } else {
            free(outs[k].data);
        }
    }
    return rc;
}

static cge_status unsupported(const cge_plan_step *st, const char *why)
{
    return cge_error(CGE_LAYER_META, CGE_ERR_UNSUPPORTED, "%s '%s': %s", cge_node_op_type(st->node),
                     cge_node_name(st->node), why);
}

/* Meta along the steps: every value's concrete shape and bytes, and the
 * workspace each step asks for at them. */
static cge_status run_meta(spec *s, size_t *ws)
{
    const cge_plan_step *steps = cge_plan_steps(s->sp);
    cge_tensor_desc in[MAX_IO], out[MAX_IO];
    const void *iv[MAX_IO];
    for (int32_t t = 0; t < s->ns; t++) {
        const cge_plan_step *st = &steps[t];
        int32_t ni = st->num_inputs, no = st->num_outputs;
        if (ni > MAX_IO || no > MAX_IO)
            return unsupported(st, "more than 64 inputs or outputs");
        for (int32_t k = 0; k < ni; k++) {
            int32_t v = st->inputs[k];
            iv[k] = NULL;
            if (v < 0) {
                in[k] = (cge_tensor_desc){.name = "", .dtype = CGE_DTYPE_UNDEFINED};
                continue;
            }
            in[k] = (cge_tensor_desc){.name = s->vals[v].name, .dtype = s->vals[v].dtype,
                                      .shape = s->shape[v], .format = s->vals[v].format};
            iv[k] = s->data[v];
        }
        for (int32_t k = 0; k < no; k++)
            out[k] = (cge_tensor_desc){.name = s->vals[st->outputs[k]].name};
        cge_status rc = cge_op_infer(st->def, cge_node_name(st->node), cge_node_attrs_const(st->node),
                                     in, iv, NULL, ni, out, no);
        if (rc)
            return rc;
        for (int32_t k = 0; k < no; k++) {
            int32_t v = st->outputs[k];
            if (!cge_shape_is_static(&out[k].shape))
                return unsupported(st, "an output's shape depends on values computed at run time");
            if (out[k].dtype != s->vals[v].dtype)
                return unsupported(st, "an output's dtype differs from the symbolic plan's");
            s->shape[v] = out[k].shape;
            s->bytes[v] = cge_tensor_nbytes(out[k].dtype, &out[k].shape);
            if (s->bytes[v] == SIZE_MAX)
                return unsupported(st, "an output's size overflows");
        }
        rc = evaluate(s, st, out);
        if (rc)
            return rc;
        ws[t] = 0;
        if (st->kernel->workspace_size) {
            cge_tensor ins[MAX_IO], outs[MAX_IO];
            for (int32_t k = 0; k < ni; k++) {
                int32_t v = st->inputs[k];
                ins[k] = v < 0 ? (cge_tensor){.dtype = CGE_DTYPE_UNDEFINED}
                               : (cge_tensor){.name = s->vals[v].name, .dtype = s->vals[v].dtype,
                                              .shape = s->shape[v], .bytes = s->bytes[v]};
            }
            for (int32_t k = 0; k < no; k++) {
                int32_t v = st->outputs[k];
                outs[k] = (cge_tensor){.name = s->vals[v].name, .dtype = s->vals[v].dtype,
                                       .shape = s->shape[v], .bytes = s->bytes[v]};
            }
            cge_kernel_ctx kc = {.op_type = cge_node_op_type(st->node),
                                 .node_name = cge_node_name(st->node), .num_inputs = ni,
                                 .inputs = ins, .num_outputs = no, .outputs = outs,
                                 .attrs = cge_node_attrs_const(st->node),
                                 .num_threads = s->dev ? cge_device_num_threads(s->dev) : 0};
            ws[t] = st->kernel->workspace_size(&kc);
        }
    }
    return CGE_OK;
}

cge_status cge_plan_specialize(const cge_plan *sym, const cge_shape *input_shapes,
                               int32_t num_inputs, cge_device *dev, cge_plan **out)
{
    if (!sym || !out || (num_inputs && !input_shapes) || !dev)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "specialize: NULL argument");
    *out = NULL;
    const cge_graph *g = cge_plan_graph(sym);
    if (!cge_plan_is_symbolic(sym))
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                         "specialize: the plan of '%s' is not symbolic", cge_graph_name(g));
    if (num_inputs != cge_graph_num_inputs(g))
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                         "specialize: graph '%s' has %d inputs, %d shapes given", cge_graph_name(g),
                         (int)cge_graph_num_inputs(g), (int)num_inputs);
    if (strcmp(cge_device_name(dev), "cpu"))
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_UNSUPPORTED,
                         "specialize: small shape computations are evaluated on a CPU device");
    spec s = {.sp = sym, .g = g, .vals = cge_plan_values(sym), .nv = cge_plan_num_values(sym),
              .ns = cge_plan_num_steps(sym), .dev = dev};
    size_t nv1 = (size_t)s.nv + 1, ns1 = (size_t)s.ns + 1;
    s.shape = malloc(sizeof *s.shape * nv1);
    s.bytes = malloc(sizeof *s.bytes * nv1);
    s.data = calloc(nv1, sizeof *s.data);
    s.owned = calloc(nv1, sizeof *s.owned);
    bool *host = calloc(nv1, sizeof *host);
    size_t *ws = malloc(sizeof *ws * ns1);
    cge_mem_block *blocks = malloc(sizeof *blocks * (nv1 + ns1));
    int32_t *block_of = malloc(sizeof *block_of * nv1);
    cge_plan *p = NULL;
    cge_status st = s.shape && s.bytes && s.data && s.owned && host && ws && blocks && block_of
                        ? CGE_OK
                        : oom();
    for (int32_t v = 0; !st && v < s.nv; v++) {
        s.shape[v] = s.vals[v].shape;
        s.bytes[v] = cge_shape_is_static(&s.vals[v].shape) ? s.vals[v].bytes : 0;
        s.data[v] = constant_data(&s, v);
    }
    for (int32_t i = 0; !st && i < num_inputs; i++) {
        int32_t v = cge_plan_input_value(sym, i);
        if (v < 0)
            continue;
        s.shape[v] = input_shapes[i];
        s.bytes[v] = cge_tensor_nbytes(s.vals[v].dtype, &input_shapes[i]);
    }
    if (!st)
        st = run_meta(&s, ws);
    /* The symbolic plan shares memory where sizes are equal at every size
     * (views, in-place outputs); what it promised must hold here. */
    for (int32_t v = 0; !st && v < s.nv; v++) {
        int32_t r = root_of(s.vals, v);
        if (r != v && s.vals[v].storage == CGE_STORAGE_ARENA && s.bytes[v] != s.bytes[r])
            st = cge_error(CGE_LAYER_META, CGE_ERR_UNSUPPORTED,
                           "specialize: '%s' shares the memory of '%s' but has %zu bytes, not %zu",
                           s.vals[v].name, s.vals[r].name, s.bytes[v], s.bytes[r]);
    }
    /* Values the host computed (shape computations: Shape, Gather, Concat,
     * ... of sizes) are the same at every run of these sizes: the plan keeps
     * them, and the steps that make them are not launched. A memory group
     * moves to the host whole, or not at all. */
    size_t host_bytes = 0;
    for (int32_t v = 0; !st && v < s.nv; v++)
        host[v] = s.vals[v].storage == CGE_STORAGE_ARENA && s.owned[v] &&
                  s.vals[v].input_index < 0 && s.vals[v].output_index < 0;
    for (int32_t v = 0; !st && v < s.nv; v++)
        if (!host[v] && s.vals[v].storage == CGE_STORAGE_ARENA)
            host[root_of(s.vals, v)] = false;
    for (int32_t v = 0; !st && v < s.nv; v++)
        if (host[v] && !host[root_of(s.vals, v)])
            host[v] = false;
    for (int32_t v = 0; !st && v < s.nv; v++)
        if (host[v])
            host_bytes += (s.bytes[v] + 63) & ~(size_t)63;
    char *blob = !st && host_bytes ? aligned_alloc(64, host_bytes) : NULL;
    if (host_bytes && !blob && !st)
        st = oom();
    int32_t nb = 0;
    size_t arena = 0;
    for (int32_t v = 0; !st && v < s.nv; v++) {
        block_of[v] = -1;
        if (s.vals[v].alias_of >= 0 || s.vals[v].storage != CGE_STORAGE_ARENA || !s.bytes[v] ||
            host[v])
            continue;
        block_of[v] = nb;
        blocks[nb++] = (cge_mem_block){.bytes = s.bytes[v], .first = s.vals[v].first_step,
                                       .last = s.vals[v].last_step};
    }
    int32_t ws0 = nb;
    for (int32_t t = 0; !st && t < s.ns; t++)
        if (ws[t])
            blocks[nb++] = (cge_mem_block){.bytes = ws[t], .first = t,
                                           .last = cge_plan_workspace_last_step(sym, t)};
    if (!st)
        st = cge_memplan_assign(blocks, nb, 64, CGE_MEMPLAN_AUTO, &arena);
    if (!st)
        st = cge__plan_clone_layout(sym, &p);
    if (!st) {
        cge_plan_value *pv = cge__plan_values_mut(p);
        size_t at = 0;
        for (int32_t v = 0; v < s.nv; v++) {
            pv[v].shape = s.shape[v];
            pv[v].bytes = s.bytes[v];
            int32_t r = root_of(s.vals, v);
            if (host[v]) {
                pv[v].storage = CGE_STORAGE_HOST;
                pv[v].alias_of = -1;
                pv[v].offset = at;
                if (s.bytes[v])
                    memcpy(blob + at, s.owned[v], s.bytes[v]);
                at += (s.bytes[v] + 63) & ~(size_t)63;
            } else if (s.vals[v].storage == CGE_STORAGE_ARENA) {
                pv[v].offset = block_of[r] >= 0 ? blocks[block_of[r]].offset : 0;
            }
        }
        cge__plan_set_host_data(p, blob);
        blob = NULL;
        cge_plan_step *ps = cge__plan_steps_mut(p);
        for (int32_t t = 0, k = ws0; t < s.ns; t++) {
            ps[t].workspace_bytes = ws[t];
            ps[t].workspace_offset = ws[t] ? blocks[k++].offset : 0;
            bool folded = ps[t].num_outputs > 0;
            for (int32_t j = 0; folded && j < ps[t].num_outputs; j++)
                folded = host[ps[t].outputs[j]];
            ps[t].folded = folded;
        }
        cge__plan_set_sizes(p, arena, cge_plan_constant_bytes(sym), cge_plan_num_streams(sym),
                            cge_plan_num_events(sym));
        cge_plan_stats *stats = cge__plan_stats_mut(p);
        stats->arena_bytes = arena;
        stats->compile_ms = 0.0;
#ifndef NDEBUG
        st = cge_plan_verify(p);
#endif
    }
    for (int32_t v = 0; s.owned && v < s.nv; v++)
        free(s.owned[v]);
    cge_stream_destroy(s.imm);
    free(s.shape);
    free(s.bytes);
    free(s.data);
    free(s.owned);
    free(host);
    free(blob);
    free(ws);
    free(blocks);
    free(block_of);
    if (st) {
        cge_plan_destroy(p);
        return st;
    }
    *out = p;
    return CGE_OK;
}
