/* The writer: a plan and its constants into the .cgm layout (format.h). Each
 * section is built in its own growing buffer, then header, section table,
 * sections and the page-aligned weights are laid out one after another. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/shared_block.h"
#include "base/strmap.h"
#include "cge/cge.h"
#include "model_file/model_internal.h"
#include "ops/kernel_cache.h"

typedef struct buf {
    char *p;
    size_t n, cap;
    bool oom;
} buf;

static size_t buf_put(buf *b, const void *data, size_t n)
{
    size_t at = b->n;
    if (b->oom)
        return at;
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc < b->n + n)
            nc *= 2;
        char *q = realloc(b->p, nc);
        if (!q) {
            b->oom = true;
            return at;
        }
        b->p = q;
        b->cap = nc;
    }
    if (data)
        memcpy(b->p + b->n, data, n);
    else
        memset(b->p + b->n, 0, n);
    b->n += n;
    return at;
}

static void buf_align(buf *b, size_t a)
{
    size_t pad = (a - b->n % a) % a;
    if (pad)
        buf_put(b, NULL, pad);
}

typedef struct writer {
    const cge_plan *p;
    buf sec[CGM_SEC_COUNT];
    cge__strmap strs;
    const char *err_node;
} writer;

static uint32_t str_ref(writer *w, const char *s)
{
    if (!s || !s[0])
        return 0;
    int32_t at = cge__strmap_get(&w->strs, s);
    if (at >= 0)
        return (uint32_t)at;
    size_t off = buf_put(&w->sec[CGM_SEC_STRINGS], s, strlen(s) + 1);
    if (off > INT32_MAX || !cge__strmap_put(&w->strs, s, (int32_t)off))
        w->sec[CGM_SEC_STRINGS].oom = true;
    return (uint32_t)off;
}

static uint32_t idx_put(writer *w, int32_t v)
{
    return (uint32_t)(buf_put(&w->sec[CGM_SEC_INDICES], &v, sizeof v) / sizeof v);
}

static uint64_t aux_put(writer *w, const void *data, size_t n, size_t align)
{
    buf_align(&w->sec[CGM_SEC_AUX], align);
    return buf_put(&w->sec[CGM_SEC_AUX], data, n);
}

static cgm_tensor tensor_rec(writer *w, const cge_tensor *t)
{
    cgm_tensor r = {.dtype = t->dtype, .rank = t->shape.rank};
    for (int32_t k = 0; k < t->shape.rank && k < 8; k++)
        r.dims[k] = t->shape.dims[k];
    r.bytes = t->bytes;
    r.data = aux_put(w, t->data, t->bytes, 64);
    return r;
}

/* String tensors' elements are pointers to their bytes (cge/types.h): the
 * format (version 3) has no section for those bytes, so a string constant
 * or tensor attribute is refused rather than written as addresses. String
 * inputs, outputs and intermediates hold nothing in the file and save. */
static cge_status strings_refused(const cge_node *n, const char *what)
{
    if (n)
        return cge_error(CGE_LAYER_IO, CGE_ERR_UNSUPPORTED,
                         "model save: node '%s' (%s): attribute '%s' is a string tensor; the "
                         "model file cannot hold string tensors' bytes",
                         cge_node_name(n), cge_node_op_type(n), what);
    return cge_error(CGE_LAYER_IO, CGE_ERR_UNSUPPORTED,
                     "model save: constant '%s' is a string tensor; the model file cannot hold "
                     "string tensors' bytes", what);
}

static cge_status attr_rec(writer *w, const cge_node *n, const cge_attr *a, int depth,
                           cgm_attr *out);

/* Body `g` (nested `depth` deep) as a cgm_graph record; its arrays go to AUX. */
static cge_status graph_rec(writer *w, const cge_node *owner, const cge_graph *g, int depth,
                            cgm_graph *out)
{
    if (depth >= CGM_GRAPH_DEPTH_MAX)
        return cge_error(CGE_LAYER_IO, CGE_ERR_UNSUPPORTED,
                         "model save: node '%s' (%s): bodies nest more than %d deep",
                         cge_node_name(owner), cge_node_op_type(owner), CGM_GRAPH_DEPTH_MAX);
    *out = (cgm_graph){.name = str_ref(w, cge_graph_name(g)),
                       .num_inputs = (uint32_t)cge_graph_num_inputs(g),
                       .num_outputs = (uint32_t)cge_graph_num_outputs(g)};
    cgm_graph_input *ins = calloc(out->num_inputs + 1, sizeof *ins);
    uint32_t *outs = calloc(out->num_outputs + 1, sizeof *outs);
    int32_t nc = cge_graph_num_constants(g), nn = cge_graph_num_nodes(g);
    cgm_graph_constant *cs = calloc((size_t)nc + 1, sizeof *cs);
    cgm_graph_node *ns = calloc((size_t)nn + 1, sizeof *ns);
    cge_status st = ins && outs && cs && ns
                        ? CGE_OK
                        : cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "model save: out of memory");
    for (uint32_t i = 0; !st && i < out->num_inputs; i++) {
        cge_tensor_desc d;
        const char *name = cge_graph_input(g, (int32_t)i);
        st = cge_graph_get_desc(g, name, &d);
        ins[i] = (cgm_graph_input){.name = str_ref(w, name), .dtype = d.dtype,
                                   .value_type = d.type, .rank = d.shape.rank};
        /* The interpreter binds a body's inputs to what the node gives it:
         * declared sizes it does not know are only "dynamic" here. */
        for (int32_t k = 0; k < d.shape.rank && k < 8; k++)
            ins[i].dims[k] = d.shape.dims[k] < 0 ? CGE_DIM_DYNAMIC : d.shape.dims[k];
    }
    for (uint32_t i = 0; !st && i < out->num_outputs; i++)
        outs[i] = str_ref(w, cge_graph_output(g, (int32_t)i));
    for (int32_t i = 0; !st && i < nc; i++) {
        const char *name = cge_graph_constant_name(g, i);
        const cge_tensor *t = cge_graph_value_constant(g, cge_graph_value_id(g, name));
        if (!t || (t->bytes && !t->data))
            st = cge_error(CGE_LAYER_IO, CGE_ERR_STATE,
                           "model save: node '%s' (%s): constant '%s' of its body has no data",
                           cge_node_name(owner), cge_node_op_type(owner), name);
        else if (t->dtype == CGE_STRING)
            st = strings_refused(NULL, name);
        else
            cs[out->num_constants++] = (cgm_graph_constant){.name = str_ref(w, name),
                                                            .t = tensor_rec(w, t)};
    }
    for (int32_t i = 0; !st && i < nn; i++) {
        const cge_node *n = cge_graph_node(g, i);
        if (cge_node_is_removed(n))
            continue;
        cgm_graph_node *r = &ns[out->num_nodes++];
        *r = (cgm_graph_node){.name = str_ref(w, cge_node_name(n)),
                              .op = str_ref(w, cge_node_op_type(n)),
                              .domain = str_ref(w, cge_node_domain(n)),
                              .num_inputs = (uint32_t)cge_node_num_inputs(n),
                              .num_outputs = (uint32_t)cge_node_num_outputs(n)};
        uint32_t refs[2 * 64 + 2];
        if (r->num_inputs > 64 || r->num_outputs > 64) {
            st = cge_error(CGE_LAYER_IO, CGE_ERR_UNSUPPORTED,
                           "model save: node '%s' of a body has more than 64 inputs or outputs",
                           cge_node_name(n));
            break;
        }
        for (uint32_t k = 0; k < r->num_inputs; k++)
            refs[k] = str_ref(w, cge_node_input(n, (int32_t)k));
        r->inputs = aux_put(w, refs, sizeof(uint32_t) * r->num_inputs, 8);
        for (uint32_t k = 0; k < r->num_outputs; k++)
            refs[k] = str_ref(w, cge_node_output(n, (int32_t)k));
        r->outputs = aux_put(w, refs, sizeof(uint32_t) * r->num_outputs, 8);
        const cge_attrs *as = cge_node_attrs_const(n);
        int32_t na = cge_attrs_count(as);
        cgm_attr *ar = calloc((size_t)na + 1, sizeof *ar);
        if (!ar) {
            st = cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "model save: out of memory");
            break;
        }
        for (int32_t k = 0; !st && k < na; k++)
            st = attr_rec(w, n, cge_attrs_at(as, k), depth + 1, &ar[k]);
        r->num_attrs = (uint32_t)na;
        r->attrs = aux_put(w, ar, sizeof *ar * (size_t)na, 8);
        free(ar);
    }
    if (!st) {
        out->inputs = aux_put(w, ins, sizeof *ins * out->num_inputs, 8);
        out->outputs = aux_put(w, outs, sizeof *outs * out->num_outputs, 8);
        out->constants = aux_put(w, cs, sizeof *cs * out->num_constants, 8);
        out->nodes = aux_put(w, ns, sizeof *ns * out->num_nodes, 8);
    }
    free(ins);
    free(outs);
    free(cs);
    free(ns);
    return st;
}

static cge_status write_attr(writer *w, const cge_node *n, const cge_attr *a)
{
    cgm_attr r;
    cge_status st = attr_rec(w, n, a, 0, &r);
    if (!st)
        buf_put(&w->sec[CGM_SEC_ATTRS], &r, sizeof r);
    return st;
}

/* Attribute `a` of node `n` as a record (lists, tensors and graphs in AUX);
 * `depth`: how deep in bodies `n` lies. */
static cge_status attr_rec(writer *w, const cge_node *n, const cge_attr *a, int depth,
                           cgm_attr *out)
{
    cgm_attr r = {.name = str_ref(w, a->name), .kind = a->kind};
    switch (a->kind) {
    case CGE_ATTR_INT: r.i = a->i; break;
    case CGE_ATTR_FLOAT: r.f = a->f; break;
    case CGE_ATTR_STRING: r.s = str_ref(w, a->s); break;
    case CGE_ATTR_INTS:
        r.n = a->n;
        r.aux = aux_put(w, a->ints, sizeof(int64_t) * (size_t)a->n, 8);
        break;
    case CGE_ATTR_FLOATS:
        r.n = a->n;
        r.aux = aux_put(w, a->floats, sizeof(float) * (size_t)a->n, 8);
        break;
    case CGE_ATTR_STRINGS: {
        r.n = a->n;
        uint32_t *refs = malloc(sizeof(uint32_t) * ((size_t)a->n + 1));
        if (!refs)
            return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "model save: out of memory");
        for (int64_t k = 0; k < a->n; k++)
            refs[k] = str_ref(w, a->strings[k]);
        r.aux = aux_put(w, refs, sizeof(uint32_t) * (size_t)a->n, 8);
        free(refs);
        break;
    }
    case CGE_ATTR_TENSOR: {
        if (a->t->dtype == CGE_STRING)
            return strings_refused(n, a->name);
        r.n = 1;
        cgm_tensor t = tensor_rec(w, a->t);
        r.aux = aux_put(w, &t, sizeof t, 8);
        break;
    }
    case CGE_ATTR_TENSORS: {
        r.n = a->n;
        cgm_tensor *ts = calloc((size_t)a->n + 1, sizeof *ts);
        if (!ts)
            return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "model save: out of memory");
        for (int64_t k = 0; k < a->n; k++) {
            if (a->tensors[k].dtype == CGE_STRING) {
                free(ts);
                return strings_refused(n, a->name);
            }
            ts[k] = tensor_rec(w, &a->tensors[k]);
        }
        r.aux = aux_put(w, ts, sizeof *ts * (size_t)a->n, 8);
        free(ts);
        break;
    }
    case CGE_ATTR_GRAPH:
    case CGE_ATTR_GRAPHS: {
        int64_t cnt = a->kind == CGE_ATTR_GRAPH ? 1 : a->n;
        cgm_graph *gs = calloc((size_t)cnt + 1, sizeof *gs);
        if (!gs)
            return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "model save: out of memory");
        cge_status st = CGE_OK;
        for (int64_t k = 0; !st && k < cnt; k++) {
            const cge_graph *g = a->kind == CGE_ATTR_GRAPH ? a->g : a->graphs[k];
            st = g ? graph_rec(w, n, g, depth, &gs[k])
                   : cge_error(CGE_LAYER_IO, CGE_ERR_INVALID_ARG,
                               "model save: node '%s' (%s): attribute '%s' holds no graph",
                               cge_node_name(n), cge_node_op_type(n), a->name);
        }
        if (!st) {
            r.n = cnt;
            r.aux = aux_put(w, gs, sizeof *gs * (size_t)cnt, 8);
        }
        free(gs);
        if (st)
            return st;
        break;
    }
    default:
        return cge_error(CGE_LAYER_IO, CGE_ERR_UNSUPPORTED,
                         "model save: node '%s' (%s): attribute '%s' is a %s, which the model "
                         "file cannot hold",
                         cge_node_name(n), cge_node_op_type(n), a->name,
                         cge_attr_kind_name(a->kind));
    }
    *out = r;
    return CGE_OK;
}

bool cgm_builtin_origin(const char *origin)
{
    return !origin || !strcmp(origin, "builtin") || !strcmp(origin, "onnx_converters");
}

/* The name a library at `path` registers under, if it is loaded. */
static bool lib_name_of(const char *path, char *name, size_t size)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return false;
    void *sym = dlsym(h, CGE_OP_LIBRARY_ENTRY);
    cge_op_library_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);
    const cge_op_library *lib = entry ? entry() : NULL;
    bool ok = lib && lib->name;
    if (ok)
        snprintf(name, size, "%s", lib->name);
    dlclose(h);
    return ok;
}

static void write_libs(writer *w, const cge_model_save_options *opts)
{
    const cge_plan_step *steps = cge_plan_steps(w->p);
    int32_t n = cge_plan_num_steps(w->p);
    for (int32_t t = 0; t < n; t++) {
        const char *origin = cge_op_origin(steps[t].def);
        if (cgm_builtin_origin(origin))
            continue;
        bool seen = false;
        for (int32_t u = 0; u < t && !seen; u++)
            seen = cge_op_origin(steps[u].def) == origin;
        if (seen)
            continue;
        const char *path = "";
        char name[256];
        for (int32_t k = 0; opts && k < opts->num_op_libraries; k++)
            if (opts->op_libraries[k] && lib_name_of(opts->op_libraries[k], name, sizeof name) &&
                !strcmp(name, origin))
                path = opts->op_libraries[k];
        cgm_lib r = {.name = str_ref(w, origin), .path = str_ref(w, path)};
        buf_put(&w->sec[CGM_SEC_LIBS], &r, sizeof r);
    }
}

/* The dtype a kernel is chosen by (as partition does): the first present
 * input's, else output 0's. */
static int32_t step_kernel_dtype(const cge_plan *p, const cge_plan_step *s)
{
    const cge_plan_value *v = cge_plan_values(p);
    for (int32_t k = 0; k < s->num_inputs; k++)
        if (s->inputs[k] >= 0)
            return v[s->inputs[k]].dtype;
    return s->num_outputs ? v[s->outputs[0]].dtype : CGE_DTYPE_UNDEFINED;
}

static cge_status build_sections(writer *w, const cge_model_save_options *opts)
{
    const cge_plan *p = w->p;
    buf_put(&w->sec[CGM_SEC_STRINGS], "", 1);   /* reference 0 is "" */
    const cge_plan_stats *ps = cge_plan_get_stats(p);
    const cge_graph *g = cge_plan_graph(p);
    cgm_model m = {
        .graph_name = str_ref(w, cge_graph_name(g)),
        .num_values = cge_plan_num_values(p), .num_steps = cge_plan_num_steps(p),
        .num_inputs = cge_graph_num_inputs(g), .num_outputs = cge_graph_num_outputs(g),
        .num_streams = cge_plan_num_streams(p), .num_events = cge_plan_num_events(p),
        .nodes_in = ps->nodes_in, .num_subgraphs = ps->num_subgraphs,
        .num_conversions = ps->num_conversions,
        .arena_bytes = cge_plan_arena_bytes(p), .constant_bytes = cge_plan_constant_bytes(p),
        .lower_bound_bytes = ps->lower_bound_bytes, .naive_bytes = ps->naive_bytes,
        .compile_ms = ps->compile_ms};
    for (int s = 0; s < 4; s++)
        m.stage_ms[s] = ps->stage_ms[s];
    m.inputs_first = (uint32_t)(w->sec[CGM_SEC_INDICES].n / 4);
    for (int32_t i = 0; i < m.num_inputs; i++)
        idx_put(w, cge_plan_input_value(p, i));
    m.outputs_first = (uint32_t)(w->sec[CGM_SEC_INDICES].n / 4);
    for (int32_t i = 0; i < m.num_outputs; i++)
        idx_put(w, cge_plan_output_value(p, i));
    const cge_plan_value *vals = cge_plan_values(p);
    for (int32_t v = 0; v < m.num_values; v++) {
        const cge_plan_value *pv = &vals[v];
        cgm_value r = {.name = str_ref(w, pv->name), .dtype = pv->dtype, .rank = pv->shape.rank,
                       .format = pv->format, .memory_space = pv->memory_space,
                       .storage = pv->storage, .alias_of = pv->alias_of,
                       .first_step = pv->first_step, .last_step = pv->last_step,
                       .input_index = pv->input_index, .output_index = pv->output_index,
                       .bytes = pv->bytes, .offset = pv->offset};
        for (int32_t k = 0; k < pv->shape.rank; k++)
            r.dims[k] = pv->shape.dims[k];
        buf_put(&w->sec[CGM_SEC_VALUES], &r, sizeof r);
    }
    const cge_plan_step *steps = cge_plan_steps(p);
    int32_t num_attrs = 0;
    for (int32_t t = 0; t < m.num_steps; t++) {
        const cge_plan_step *s = &steps[t];
        cgm_step r = {.name = str_ref(w, cge_node_name(s->node)),
                      .op = str_ref(w, cge_node_op_type(s->node)),
                      .domain = str_ref(w, cge_node_domain(s->node)),
                      .engine = str_ref(w, s->engine),
                      .kernel_dtype = step_kernel_dtype(p, s), .stream = s->stream,
                      .num_inputs = s->num_inputs, .num_outputs = s->num_outputs,
                      .num_waits = s->num_waits, .record = s->record,
                      .ws_last = cge_plan_workspace_last_step(p, t),
                      .ws_offset = s->workspace_offset, .ws_bytes = s->workspace_bytes};
        r.io_first = (uint32_t)(w->sec[CGM_SEC_INDICES].n / 4);
        for (int32_t k = 0; k < s->num_inputs; k++)
            idx_put(w, s->inputs[k]);
        for (int32_t k = 0; k < s->num_outputs; k++)
            idx_put(w, s->outputs[k]);
        r.waits_first = (uint32_t)(w->sec[CGM_SEC_INDICES].n / 4);
        for (int32_t k = 0; k < s->num_waits; k++)
            idx_put(w, s->waits[k]);
        const cge_attrs *as = cge_node_attrs_const(s->node);
        r.attr_first = (uint32_t)num_attrs;
        r.num_attrs = cge_attrs_count(as);
        for (int32_t k = 0; k < r.num_attrs; k++) {
            cge_status st = write_attr(w, s->node, cge_attrs_at(as, k));
            if (st)
                return st;
        }
        num_attrs += r.num_attrs;
        buf_put(&w->sec[CGM_SEC_STEPS], &r, sizeof r);
    }
    m.num_attrs = num_attrs;
    m.opt_level = opts ? (int32_t)opts->opt_level : 0;   /* the plan does not keep it */
    if (cge_plan_is_symbolic(p)) {
        /* The shape program is meta along the steps (cge_shape_program_run):
         * what it needs beyond the plan is the graph's symbol names, so that
         * a loaded model names its dims as the session that compiled it. */
        int32_t ns = cge_graph_num_dim_symbols(g);
        cgm_symbol head = {CGM_SHAPES_MAGIC, (uint32_t)ns};
        buf_put(&w->sec[CGM_SEC_SHAPES], &head, sizeof head);
        for (int32_t k = 0; k < ns; k++) {
            cgm_symbol r = {str_ref(w, cge_graph_dim_symbol_name(g, CGE_DIM_SYMBOL(k))), 0};
            buf_put(&w->sec[CGM_SEC_SHAPES], &r, sizeof r);
        }
    }
    buf_put(&w->sec[CGM_SEC_MODEL], &m, sizeof m);
    write_libs(w, opts);
    for (int s = 1; s < CGM_SEC_COUNT; s++)
        if (w->sec[s].oom)
            return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "model save: out of memory");
    return CGE_OK;
}

/* ---- packed weights (version 3) ------------------------------------------ */

/* What the kernels' prepare made from the constants, as a session would at
 * load: each step with a prepare runs it once over the constants and an
 * arena of the plan's size, with a kernel cache of its own, and the cache's
 * entries derived from a constant are what the file stores. */
typedef struct packed_item {
    uint64_t src;                 /* offset into the constants */
    const void *key;
    size_t key_bytes;
    void *block;                  /* the cache's (alive while it is) */
    size_t bytes;
} packed_item;

typedef struct packed_set {
    const char *consts;
    size_t const_bytes;
    packed_item *items;
    int32_t num, cap;
    bool oom;
} packed_set;

static void packed_visit(void *user, const void *src, const void *key, size_t key_bytes,
                         void *block, size_t bytes)
{
    packed_set *ps = user;
    const char *p = src;
    if (ps->oom || !p || p < ps->consts || p >= ps->consts + ps->const_bytes ||
        key_bytes > CGM_PACKED_KEY_MAX || !bytes)
        return;
    if (ps->num == ps->cap) {
        int32_t cap = ps->cap ? 2 * ps->cap : 32;
        packed_item *n = realloc(ps->items, sizeof *n * (size_t)cap);
        if (!n) {
            ps->oom = true;
            return;
        }
        ps->items = n;
        ps->cap = cap;
    }
    /* The cache holds key and block until the file is written. */
    ps->items[ps->num++] = (packed_item){(uint64_t)(p - ps->consts), key, key_bytes, block, bytes};
}

static void packed_free(packed_set *ps)
{
    free(ps->items);
    memset(ps, 0, sizeof *ps);
}

/* Runs the steps' prepares over `consts` into `cache`; a step whose prepare
 * fails is left to pack at load (its error shows there, if anywhere). */
static void prepare_steps(const cge_plan *p, const char *consts, cge_device *dev,
                          cge_kernel_cache *cache)
{
    const cge_plan_value *vals = cge_plan_values(p);
    const cge_plan_step *steps = cge_plan_steps(p);
    const char *host = cge_plan_host_data(p);
    /* An arena as a session's, so that every operand and workspace has the
     * address kind a prepare expects (calloc: pages nobody touches cost
     * nothing). */
    char *arena = calloc(1, cge_plan_arena_bytes(p) + 64);
    if (!arena)
        return;
    for (int32_t k = 0; k < cge_plan_num_steps(p); k++) {
        const cge_plan_step *s = &steps[k];
        if (!s->kernel || !s->kernel->prepare || s->folded)
            continue;
        cge_tensor *t = calloc((size_t)(s->num_inputs + s->num_outputs) + 1, sizeof *t);
        if (!t)
            break;
        for (int32_t i = 0; i < s->num_inputs + s->num_outputs; i++) {
            int32_t vi = i < s->num_inputs ? s->inputs[i] : s->outputs[i - s->num_inputs];
            if (vi < 0)
                continue;
            const cge_plan_value *v = &vals[vi];
            void *data = NULL;
            if (v->storage == CGE_STORAGE_CONSTANT)
                data = (char *)consts + v->offset;
            else if (v->storage == CGE_STORAGE_HOST && host)
                data = (char *)host + v->offset;
            else if (v->storage == CGE_STORAGE_ARENA)
                data = arena + v->offset;
            t[i] = (cge_tensor){.name = v->name, .dtype = v->dtype, .shape = v->shape,
                                .data = data, .bytes = v->bytes};
        }
        cge_kernel_ctx ctx = {
            .op_type = cge_node_op_type(s->node), .node_name = cge_node_name(s->node),
            .num_inputs = s->num_inputs, .inputs = t, .num_outputs = s->num_outputs,
            .outputs = t + s->num_inputs, .attrs = cge_node_attrs_const(s->node),
            .workspace = s->workspace_bytes ? arena + s->workspace_offset : NULL,
            .workspace_size = s->workspace_bytes, .device = dev,
            .num_threads = cge_device_num_threads(dev), .shared = cache};
        void *state = NULL;
        cge__kernel_watch_packed(NULL);
        if (s->kernel->prepare(&ctx, &state) == CGE_OK && state && s->kernel->release)
            s->kernel->release(state);
        free(t);
    }
    free(arena);
}

static cge_status collect_packed(const cge_plan *p, const char *consts, cge_kernel_cache **cache,
                                 packed_set *ps)
{
    size_t n = cge_plan_constant_bytes(p);
    *ps = (packed_set){.consts = consts, .const_bytes = n};
    cge_device *dev = NULL;
    cge_status st = cge_device_create_cpu(NULL, &dev);
    if (!st)
        st = cge__kernel_cache_create(cache);
    if (!st)
        st = cge__kernel_cache_add_stable(*cache, consts, n);
    if (!st) {
        prepare_steps(p, consts, dev, *cache);
        cge__kernel_cache_each(*cache, packed_visit, ps);
        if (ps->oom)
            st = cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "model save: out of memory");
    }
    cge_device_destroy(dev);
    return st;
}

static const uint32_t record_bytes[CGM_SEC_COUNT] = {
    [CGM_SEC_STRINGS] = 1, [CGM_SEC_MODEL] = sizeof(cgm_model),
    [CGM_SEC_VALUES] = sizeof(cgm_value), [CGM_SEC_STEPS] = sizeof(cgm_step),
    [CGM_SEC_INDICES] = sizeof(int32_t), [CGM_SEC_ATTRS] = sizeof(cgm_attr),
    [CGM_SEC_AUX] = 1, [CGM_SEC_LIBS] = sizeof(cgm_lib),
    [CGM_SEC_SHAPES] = sizeof(cgm_symbol), [CGM_SEC_PACKED] = sizeof(cgm_packed)};

/* The packed section's records and where each weight goes after `start`
 * (the region's offset): 64 bytes free before each (a loaded block's
 * header), data 64-byte aligned. Returns the region's size. */
static uint64_t packed_records(writer *w, const packed_set *ps, uint64_t start)
{
    buf *sec = &w->sec[CGM_SEC_PACKED];
    cgm_packed head = {.magic = CGM_PACKED_MAGIC, .src = start, .key = cge_cpu_features()};
    buf_put(sec, &head, sizeof head);
    uint64_t at = start;
    for (int32_t i = 0; i < ps->num; i++) {
        const packed_item *it = &ps->items[i];
        at += 64;
        cgm_packed r = {.key_bytes = (uint32_t)it->key_bytes, .src = it->src, .data = at,
                        .bytes = it->bytes};
        r.key = aux_put(w, it->key, it->key_bytes, 8);
        buf_put(sec, &r, sizeof r);
        at = (at + it->bytes + 63) & ~(uint64_t)63;
    }
    return at - start;
}

cge_status cge_model_save_buffer(const cge_plan *plan, const cge_model_save_options *opts,
                                 void **data, size_t *size)
{
    if (!plan || !data || !size)
        return cge_error(CGE_LAYER_IO, CGE_ERR_INVALID_ARG, "model save: NULL plan or output");
    *data = NULL;
    *size = 0;
    for (int32_t v = 0; v < cge_plan_num_values(plan); v++) {
        const cge_plan_value *pv = &cge_plan_values(plan)[v];
        if (pv->storage == CGE_STORAGE_CONSTANT && pv->dtype == CGE_STRING)
            return strings_refused(NULL, pv->name);
    }
    writer w = {.p = plan};
    cge__strmap_init(&w.strs);
    cge_status st = build_sections(&w, opts);
    buf out = {0};
    /* Packed weights: the kernels prepare over a copy of the constants; the
     * records go in once the weights' place in the file is known. */
    char *consts = NULL;
    cge_kernel_cache *cache = NULL;
    packed_set ps = {0};
    size_t const_bytes = cge_plan_constant_bytes(plan);
    if (!st && opts && opts->pack_weights && const_bytes && !cge_plan_is_symbolic(plan)) {
        consts = cge__block_new(NULL, const_bytes);
        if (!consts)
            st = cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "model save: out of memory");
        else {
            cge_plan_write_constants(plan, consts);
            st = collect_packed(plan, consts, &cache, &ps);
        }
    }
    if (!st) {
        /* Each present section once; the packed one only when it holds
         * weights, so that a file without them reads as version 2 did. */
        int kinds[CGM_SEC_COUNT], nsec = 0;
        for (int k = 1; k < CGM_SEC_COUNT; k++)
            if (k != CGM_SEC_PACKED || ps.num)
                kinds[nsec++] = k;
        /* The packed section's size is known before the layout: its records
         * are fixed-size, their keys go in AUX, which must be final first. */
        uint64_t region_bytes = 0;
        if (ps.num)
            region_bytes = packed_records(&w, &ps, 0);
        if (w.sec[CGM_SEC_AUX].oom || w.sec[CGM_SEC_PACKED].oom)
            out.oom = true;
        cgm_header h = {.format_version = CGE_MODEL_FORMAT_VERSION,
                        .header_bytes = sizeof(cgm_header), .byte_order = CGM_BYTE_ORDER,
                        .engine_version = CGE_VERSION_MAJOR << 16 | CGE_VERSION_MINOR << 8 |
                                          CGE_VERSION_PATCH,
                        .num_sections = (uint32_t)nsec,
                        .cpu_required = cgm_cpu_build_features(),
                        .cpu_compiled_on = cge_cpu_features()};
        memcpy(h.magic, CGM_MAGIC, 8);
        snprintf(h.arch, sizeof h.arch, "%s", cgm_arch());
        buf_put(&out, &h, sizeof h);
        h.section_table = out.n;
        cgm_section table[CGM_SEC_COUNT];
        buf_put(&out, NULL, sizeof(cgm_section) * (size_t)nsec);
        size_t packed_at = 0;
        for (int i = 0; i < nsec; i++) {
            int s = kinds[i];
            buf_align(&out, 8);
            table[i] = (cgm_section){.kind = (uint32_t)s, .record_bytes = record_bytes[s],
                                     .offset = out.n, .bytes = w.sec[s].n,
                                     .count = w.sec[s].n / record_bytes[s]};
            if (s == CGM_SEC_PACKED)
                packed_at = out.n;
            buf_put(&out, w.sec[s].p, w.sec[s].n);
        }
        buf_align(&out, CGM_WEIGHTS_ALIGN);
        h.meta_end = h.weights_offset = out.n;
        h.weights_bytes = const_bytes;
        size_t woff = buf_put(&out, NULL, h.weights_bytes);
        uint64_t region = 0;
        if (ps.num) {
            buf_align(&out, 64);
            region = out.n;
            buf_put(&out, NULL, region_bytes);
        }
        if (!out.oom) {
            if (consts)
                memcpy(out.p + woff, consts, const_bytes);
            else
                cge_plan_write_constants(plan, out.p + woff);
            h.weights_crc32 = cgm_crc32(0, out.p + woff, h.weights_bytes);
            if (ps.num) {
                /* Records written relative to 0: move them to the region. */
                cgm_packed *r = (cgm_packed *)(out.p + packed_at);
                r[0].src = region;
                r[0].bytes = region_bytes;
                for (int32_t i = 0; i < ps.num; i++) {
                    r[i + 1].data += region;
                    memcpy(out.p + r[i + 1].data, ps.items[i].block, ps.items[i].bytes);
                }
                r[0].crc32 = cgm_crc32(0, out.p + region, region_bytes);
            }
            h.file_bytes = out.n;
            memcpy(out.p, &h, sizeof h);
            memcpy(out.p + h.section_table, table, sizeof(cgm_section) * (size_t)nsec);
            h.meta_crc32 = cgm_meta_crc(out.p, h.meta_end);
            memcpy(out.p, &h, sizeof h);
        }
        if (out.oom)
            st = cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "model save: out of memory");
    }
    for (int s = 0; s < CGM_SEC_COUNT; s++)
        free(w.sec[s].p);
    cge__strmap_free(&w.strs);
    packed_free(&ps);
    cge__kernel_cache_destroy(cache);
    cge__block_unref(consts);
    if (st) {
        free(out.p);
        return st;
    }
    *data = out.p;
    *size = out.n;
    return CGE_OK;
}

cge_status cge_model_save(const cge_plan *plan, const char *path, const cge_model_save_options *opts)
{
    if (!path || !path[0])
        return cge_error(CGE_LAYER_IO, CGE_ERR_INVALID_ARG, "model save: no path");
    void *data = NULL;
    size_t size = 0;
    cge_status st = cge_model_save_buffer(plan, opts, &data, &size);
    if (st)
        return st;
    size_t len = strlen(path);
    char *tmp = malloc(len + 16);
    if (!tmp) {
        free(data);
        return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "model save: out of memory");
    }
    snprintf(tmp, len + 16, "%s.tmp%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        st = cge_error(CGE_LAYER_IO, CGE_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    } else {
        bool ok = fwrite(data, 1, size, f) == size;
        ok &= fflush(f) == 0;
        int err = errno;
        ok &= fclose(f) == 0;
        if (!ok)
            st = cge_error(CGE_LAYER_IO, CGE_ERR_IO, "%s: write failed: %s", path, strerror(err));
        else if (rename(tmp, path) != 0)
            st = cge_error(CGE_LAYER_IO, CGE_ERR_IO, "%s: cannot rename '%s' into place: %s",
                           path, tmp, strerror(errno));
        if (st)
            remove(tmp);
    }
    free(tmp);
    free(data);
    return st;
}
