/* Control flow: If, Loop, Scan and SequenceMap, and the small interpreter that runs their
 * bodies (graphs in GRAPH attributes) from one host function that the node's
 * launch enqueues. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/sequence.h"
#include "ir/graph_identity.h"
#include "ops/builtin.h"
#include "ops/meta.h"

/* The interpreter walks a body in topological order, running meta with the
 * values at hand and launching kernels on an immediate stream. Outer-scope
 * values arrive as extra inputs named by the "outer_names" attribute (the ONNX
 * importer adds them). */

#define CF_MAX_ARGS 64

/* Bodies run for real (not meta only) since the process started: tests see
 * how often a branch runs per model run. */
static atomic_llong body_runs;

long long cge__control_flow_body_runs(void) { return atomic_load(&body_runs); }

/* Allocations the interpreter made for If bodies (value buffers, workspaces,
 * tables, devices, the measured outputs' copies): a run at repeated sizes
 * makes none (body_mem). */
static atomic_llong body_allocs;

long long cge__control_flow_body_allocs(void) { return atomic_load(&body_allocs); }

/* ---- the body interpreter ---------------------------------------------------------- */

typedef struct body_val {
    cge_tensor_desc desc;
    void *data;       /* NULL: no value (meta only, or not computed) */
    size_t bytes;
    bool owned;       /* allocated here with cge_mem_alloc (on the run's device) */
    /* An int64 vector of up to CGE_MAX_RANK elements known element by element
     * (a Shape of a partly dynamic shape, a Gather of one): sym.numel > 0. */
    cge_symbolic_value sym;
    int64_t sym_elems[CGE_MAX_RANK];
    uint8_t sym_is_dim[CGE_MAX_RANK];
} body_val;

/* What an If body keeps from one run to the next (the detectors run their
 * NonMaxSuppression branch at every model run, through meta's measurement):
 * its value table and order, a buffer per value and a workspace, taken back
 * when they fit, and a private single-thread device with its immediate
 * stream (the measurement's and meta's folding's). Kept in a small cache by
 * the body graph's uid and revision, one run at a time each. */
typedef struct body_mem {
    uint64_t uid, rev;
    bool busy;
    int32_t nv, nn;
    struct body_val *v;
    int32_t *order;
    void **buf;
    size_t *cap;
    void *ws;
    size_t ws_cap;
    cge_device *dev;
    cge_stream *imm;
} body_mem;

typedef struct body_run {
    const cge_graph *g;
    cge_device *dev;  /* NULL: meta only, nothing runs but small shape computations */
    body_mem *mem;    /* buffers kept across runs, or NULL */
    int32_t nv;
    body_val *v;
    /* Meta only: where the small shape computations run (made when one is
     * first needed), so that a nested If's condition (Equal(Shape(x)[1], 1))
     * is known and its branches fold as at the top level. */
    cge_device *fold_dev;
    cge_stream *fold_imm;
} body_run;

typedef struct outer_binding {
    int32_t n;
    const char *const *names;
    const cge_tensor_desc *descs;
    const void *const *values;   /* entries may be NULL */
} outer_binding;

static void body_free(body_run *r)
{
    for (int32_t i = 0; r->v && i < r->nv; i++)
        if (r->v[i].owned) {
            cge__value_release(r->v[i].desc.type, r->v[i].data);
            cge_mem_free(r->mem ? r->mem->dev : r->dev ? r->dev : r->fold_dev, r->v[i].data);
        }
    if (r->mem) {
        /* the table, the buffers and the device are the body_mem's */
        r->v = NULL;
        r->fold_imm = NULL;
        r->fold_dev = NULL;
        return;
    }
    free(r->v);
    r->v = NULL;
    cge_stream_destroy(r->fold_imm);
    cge_device_destroy(r->fold_dev);
    r->fold_imm = NULL;
    r->fold_dev = NULL;
}

/* ---- body memory kept across runs --------------------------------------------------- */

#define BODY_MEMS 8
static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static body_mem *mems[BODY_MEMS];   /* most recently used first */

static void mem_destroy(body_mem *m)
{
    if (!m)
        return;
    for (int32_t i = 0; m->dev && m->buf && i < m->nv; i++)
        cge_mem_free(m->dev, m->buf[i]);
    if (m->dev)
        cge_mem_free(m->dev, m->ws);
    free(m->buf);
    free(m->cap);
    free(m->v);
    free(m->order);
    cge_stream_destroy(m->imm);
    cge_device_destroy(m->dev);
    free(m);
}

/* A new body_mem for `g`: tables, order and device, made once. */
static body_mem *mem_new(const cge_graph *g)
{
    body_mem *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    atomic_fetch_add(&body_allocs, 1);
    m->uid = cge__graph_uid(g);
    m->rev = cge__graph_revision(g);
    m->nv = cge_graph_num_values(g);
    m->nn = cge_graph_num_nodes(g);
    m->v = calloc((size_t)m->nv + 1, sizeof *m->v);
    m->buf = calloc((size_t)m->nv + 1, sizeof *m->buf);
    m->cap = calloc((size_t)m->nv + 1, sizeof *m->cap);
    m->order = calloc((size_t)m->nn + 1, sizeof *m->order);
    cge_device_options o = {.num_threads = 1};
    if (!m->v || !m->buf || !m->cap || !m->order || cge_graph_topo_order(g, m->order) ||
        cge_device_create_cpu(&o, &m->dev) || cge_stream_create_immediate(m->dev, &m->imm)) {
        cge_clear_error();
        mem_destroy(m);
        return NULL;
    }
    return m;
}

/* The body_mem of `g`, taken for one run (mem_put gives it back), or NULL
 * (all in use, out of memory: the run allocates as it goes). */
static body_mem *mem_take(const cge_graph *g)
{
    uint64_t uid = cge__graph_uid(g), rev = cge__graph_revision(g);
    pthread_mutex_lock(&mem_lock);
    for (int32_t k = 0; k < BODY_MEMS; k++) {
        body_mem *m = mems[k];
        if (m && !m->busy && m->uid == uid && m->rev == rev) {
            m->busy = true;
            memmove(mems + 1, mems, sizeof mems[0] * (size_t)k);
            mems[0] = m;
            pthread_mutex_unlock(&mem_lock);
            return m;
        }
    }
    /* a new one in place of the least recently used that is not running
     * (a body of a destroyed graph is never asked for again) */
    int32_t slot = -1;
    for (int32_t k = BODY_MEMS - 1; k >= 0 && slot < 0; k--)
        if (!mems[k] || !mems[k]->busy)
            slot = k;
    if (slot < 0) {
        pthread_mutex_unlock(&mem_lock);
        return NULL;
    }
    body_mem *old = mems[slot];
    memmove(mems + 1, mems, sizeof mems[0] * (size_t)slot);
    mems[0] = NULL;
    pthread_mutex_unlock(&mem_lock);
    mem_destroy(old);
    body_mem *m = mem_new(g);
    pthread_mutex_lock(&mem_lock);
    if (m) {
        m->busy = true;
        if (!mems[0]) {
            mems[0] = m;
        } else {
            /* another thread filled the slot meanwhile: this one is not kept */
            pthread_mutex_unlock(&mem_lock);
            m->busy = false;
            mem_destroy(m);
            return NULL;
        }
    }
    pthread_mutex_unlock(&mem_lock);
    return m;
}

static void mem_put(body_mem *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&mem_lock);
    m->busy = false;
    pthread_mutex_unlock(&mem_lock);
}

static void mem_trim(void)
{
    body_mem *keep[BODY_MEMS] = {0}, *drop[BODY_MEMS] = {0};
    int32_t nk = 0, nd = 0;
    pthread_mutex_lock(&mem_lock);
    for (int32_t k = 0; k < BODY_MEMS; k++)
        if (mems[k] && mems[k]->busy)
            keep[nk++] = mems[k];
        else if (mems[k])
            drop[nd++] = mems[k];
    memcpy(mems, keep, sizeof mems);
    pthread_mutex_unlock(&mem_lock);
    for (int32_t k = 0; k < nd; k++)
        mem_destroy(drop[k]);
}

/* A buffer of at least `bytes` for value `id` from the run's body_mem (the
 * one kept from earlier runs when it fits), or a fresh one the run owns. */
static cge_status value_buffer(body_run *r, cge_device *dev, int32_t id, size_t bytes,
                               void **out, bool *owned)
{
    body_mem *m = r->mem;
    if (!m || id < 0 || id >= m->nv) {
        atomic_fetch_add(&body_allocs, 1);
        cge_status st = cge_mem_alloc(m ? m->dev : dev, bytes, out);
        *owned = !st;
        return st;
    }
    *owned = false;
    if (m->buf[id] && m->cap[id] >= bytes) {
        *out = m->buf[id];
        return CGE_OK;
    }
    cge_mem_free(m->dev, m->buf[id]);
    m->buf[id] = NULL;
    m->cap[id] = 0;
    atomic_fetch_add(&body_allocs, 1);
    cge_status st = cge_mem_alloc(m->dev, bytes ? bytes : 1, &m->buf[id]);
    if (!st)
        m->cap[id] = bytes ? bytes : 1;
    *out = m->buf[id];
    return st;
}

static cge_status body_err(const char *op, const char *node, cge_status st, const char *what,
                           const char *detail)
{
    return cge_error(CGE_LAYER_META, st, "%s '%s': body %s: %s", op, node, what, detail);
}

/* Allocates the node's outputs on `dev` (owned by the run) and runs its CPU
 * kernel on the immediate stream `imm`. */
static cge_status run_node(cge_device *dev, cge_stream *imm, body_run *r, const cge_node *n,
                           const cge_op_def *def, cge_dtype kdt, const cge_tensor *ins,
                           const cge_value_type *in_types, int32_t ni, int32_t no)
{
    cge_tensor outs[CF_MAX_ARGS];
    cge_value_type out_types[CF_MAX_ARGS] = {0};
    cge_status st = CGE_OK;
    for (int32_t i = 0; !st && i < no; i++) {
        int32_t id = cge_node_output_id(n, i);
        body_val *bv = &r->v[id];
        bool tensor = bv->desc.type == CGE_TYPE_TENSOR;
        bv->bytes = cge__value_nbytes(bv->desc.type, bv->desc.dtype, &bv->desc.shape);
        /* a sequence's buffer owns its elements: made per run */
        st = value_buffer(r, dev, tensor ? id : -1, bv->bytes, &bv->data, &bv->owned);
        if (!st && !tensor)
            memset(bv->data, 0, bv->bytes);   /* an empty cge_sequence */
        outs[i] = (cge_tensor){.name = bv->desc.name, .dtype = bv->desc.dtype,
                               .shape = bv->desc.shape, .data = bv->data, .bytes = bv->bytes};
        out_types[i] = bv->desc.type;
    }
    const cge_kernel_def *kd = st ? NULL : cge_op_find_kernel(def, "cpu", kdt);
    if (!st && !kd)
        st = cge_last_error_status();
    /* A kernel that writes strings keeps their bytes in its state, which
     * goes right after this launch (types.h, cge_string). */
    for (int32_t i = 0; !st && kd->release && i < no; i++)
        if (outs[i].dtype == CGE_STRING)
            st = cge_error(CGE_LAYER_KERNEL, CGE_ERR_UNSUPPORTED,
                           "%s '%s': strings made inside a control-flow body are not supported",
                           cge_node_op_type(n), cge_node_name(n));
    if (st)
        return st;
    cge_kernel_ctx kc = {.op_type = cge_node_op_type(n), .node_name = cge_node_name(n),
                         .num_inputs = ni, .inputs = ins, .num_outputs = no, .outputs = outs,
                         .attrs = cge_node_attrs_const(n), .device = dev,
                         .num_threads = cge_device_num_threads(dev),
                         .input_types = in_types, .output_types = out_types};
    void *ws = NULL;
    if (kd->workspace_size) {
        kc.workspace_size = kd->workspace_size(&kc);
        if (r->mem && r->mem->ws_cap >= kc.workspace_size) {
            kc.workspace = r->mem->ws;
        } else if (r->mem) {
            cge_mem_free(r->mem->dev, r->mem->ws);
            r->mem->ws = NULL;
            r->mem->ws_cap = 0;
            atomic_fetch_add(&body_allocs, 1);
            st = cge_mem_alloc(r->mem->dev, kc.workspace_size ? kc.workspace_size : 1,
                               &r->mem->ws);
            if (!st)
                r->mem->ws_cap = kc.workspace_size ? kc.workspace_size : 1;
            kc.workspace = r->mem->ws;
        } else {
            atomic_fetch_add(&body_allocs, 1);
            st = cge_mem_alloc(dev, kc.workspace_size, &ws);
            kc.workspace = ws;
        }
    }
    if (!st && kd->prepare)
        st = kd->prepare(&kc, &kc.state);
    if (!st)
        st = kd->launch(&kc, imm);
    if (!st)
        st = cge_stream_synchronize(imm);
    if (kd->release && kc.state)
        kd->release(kc.state);
    cge_mem_free(dev, ws);
    return st;
}

/* ---- small shape computations in a body's meta ----------------------------------- */

/* Values a body's meta computes (as prepare/infer does for the top graph):
 * shape-sized, never tensors. */
#define FOLD_MAX_BYTES 4096

static bool fold_skips(const cge_node *n)
{
    const char *op = cge_node_op_type(n), *dom = cge_node_domain(n);
    if (dom && *dom && strcmp(dom, "ai.onnx"))
        return true;
    return !strncmp(op, "Random", 6) || !strcmp(op, "Multinomial") || !strcmp(op, "Bernoulli") ||
           !strcmp(op, "If") || !strcmp(op, "Loop") || !strcmp(op, "Scan");
}

/* Sets `bv` from elements known one by one: fully known becomes its value
 * (held in the body_val itself), partly known a symbolic value. */
static void set_elems(body_val *bv, int64_t count, const int64_t *e, const uint8_t *is_dim)
{
    bool all = true;
    for (int64_t i = 0; i < count; i++) {
        bv->sym_elems[i] = e[i];
        bv->sym_is_dim[i] = is_dim[i];
        all &= !is_dim[i];
    }
    if (all) {
        bv->data = bv->sym_elems;
        bv->bytes = (size_t)count * sizeof(int64_t);
    } else {
        bv->sym = (cge_symbolic_value){.numel = count, .elems = bv->sym_elems,
                                       .is_dim = bv->sym_is_dim};
    }
}

/* Shape(x) from x's dims, known where they are. */
static bool fold_shape(body_run *r, const cge_node *n, const cge_tensor *ins, int32_t ni)
{
    if (strcmp(cge_node_op_type(n), "Shape") || ni < 1 || ins[0].dtype == CGE_DTYPE_UNDEFINED ||
        cge_node_num_outputs(n) != 1)
        return false;
    body_val *out = &r->v[cge_node_output_id(n, 0)];
    const cge_shape *s = &ins[0].shape;
    int64_t rank = s->rank, a = cge_attrs_get_int(cge_node_attrs_const(n), "start", 0),
            b = cge_attrs_get_int(cge_node_attrs_const(n), "end", rank);
    a = a < 0 ? a + rank : a;
    b = b < 0 ? b + rank : b;
    a = a < 0 ? 0 : (a > rank ? rank : a);
    b = b < 0 ? 0 : (b > rank ? rank : b);
    if (out->desc.dtype != CGE_I64 || out->desc.shape.rank != 1 ||
        out->desc.shape.dims[0] != (b > a ? b - a : 0))
        return true;   /* not what this reads; the run computes it */
    int64_t e[CGE_MAX_RANK];
    uint8_t d[CGE_MAX_RANK];
    for (int64_t i = a; i < b; i++) {
        e[i - a] = s->dims[i];
        d[i - a] = s->dims[i] < 0;
    }
    set_elems(out, b > a ? b - a : 0, e, d);
    return true;
}

/* Gather on axis 0 of a partly known vector with known indices. */
static bool fold_gather(body_run *r, const cge_node *n, const cge_tensor *ins, int32_t ni)
{
    if (strcmp(cge_node_op_type(n), "Gather") || ni != 2 || cge_node_num_outputs(n) != 1)
        return false;
    const body_val *x = &r->v[cge_node_input_id(n, 0)];
    if (x->data || x->sym.numel <= 0)
        return false;
    body_val *out = &r->v[cge_node_output_id(n, 0)];
    const cge_tensor *ix = &ins[1];
    int64_t cnt = cge_shape_numel(&ix->shape), len = x->sym.numel;
    int64_t axis = cge_attrs_get_int(cge_node_attrs_const(n), "axis", 0);
    if ((axis != 0 && axis != -1) || !ix->data || ix->shape.rank > 1 || cnt < 0 ||
        cnt > CGE_MAX_RANK || (ix->dtype != CGE_I64 && ix->dtype != CGE_I32) ||
        cge_shape_numel(&out->desc.shape) != cnt)
        return true;
    int64_t e[CGE_MAX_RANK];
    uint8_t d[CGE_MAX_RANK];
    for (int64_t i = 0; i < cnt; i++) {
        int64_t k = ix->dtype == CGE_I64 ? ((const int64_t *)ix->data)[i]
                                         : ((const int32_t *)ix->data)[i];
        k = k < 0 ? k + len : k;
        if (k < 0 || k >= len)
            return true;   /* the run reports it */
        e[i] = x->sym.elems[k];
        d[i] = x->sym.is_dim[k];
    }
    set_elems(out, cnt, e, d);
    return true;
}

/* Meta only: computes the node's outputs when they are small and every input
 * it has is known (else they stay unknown; the run computes them). */
static void fold_node(body_run *r, const cge_node *n, const cge_op_def *def, cge_dtype kdt,
                      const cge_tensor *ins, const cge_value_type *in_types, int32_t ni,
                      int32_t no)
{
    /* sequences and optionals are never folded here: the run builds them */
    for (int32_t i = 0; i < ni; i++)
        if (in_types[i] != CGE_TYPE_TENSOR)
            return;
    for (int32_t i = 0; i < no; i++)
        if (r->v[cge_node_output_id(n, i)].desc.type != CGE_TYPE_TENSOR)
            return;
    if (no < 1 || fold_skips(n) || fold_shape(r, n, ins, ni) || fold_gather(r, n, ins, ni))
        return;
    size_t total = 0;
    for (int32_t i = 0; i < no; i++) {
        const body_val *bv = &r->v[cge_node_output_id(n, i)];
        if (!cge_dtype_valid(bv->desc.dtype) || !cge_shape_is_static(&bv->desc.shape))
            return;
        total += cge_tensor_nbytes(bv->desc.dtype, &bv->desc.shape);
    }
    bool any = false;
    for (int32_t i = 0; i < ni; i++) {
        if (cge_node_input_id(n, i) < 0 || ins[i].dtype == CGE_DTYPE_UNDEFINED)
            continue;
        if (!ins[i].data || ins[i].bytes > FOLD_MAX_BYTES)
            return;
        any = true;
    }
    if (!any || total > FOLD_MAX_BYTES)
        return;
    if (!r->fold_dev && r->mem) {
        r->fold_dev = r->mem->dev;
        r->fold_imm = r->mem->imm;
    }
    if (!r->fold_dev) {
        atomic_fetch_add(&body_allocs, 1);
        cge_device_options o = {.num_threads = 1};
        if (cge_device_create_cpu(&o, &r->fold_dev) ||
            cge_stream_create_immediate(r->fold_dev, &r->fold_imm)) {
            cge_clear_error();
            cge_device_destroy(r->fold_dev);
            r->fold_dev = NULL;
            return;
        }
    }
    if (run_node(r->fold_dev, r->fold_imm, r, n, def, kdt, ins, in_types, ni, no) == CGE_OK)
        return;
    cge_clear_error();   /* not known now; the run computes it and reports any problem */
    for (int32_t i = 0; i < no; i++) {
        body_val *bv = &r->v[cge_node_output_id(n, i)];
        if (bv->owned)
            cge_mem_free(r->mem ? r->mem->dev : r->fold_dev, bv->data);
        bv->data = NULL;
        bv->owned = false;
        bv->bytes = 0;
    }
}

/* Runs (dev != NULL) or only infers (dev == NULL) `g` with its inputs bound
 * by position to `in_descs`/`in_vals` and the values it reads from outer
 * scopes bound by name. */
static cge_status body_exec_in(const char *op, const char *node, const cge_graph *g,
                               cge_device *dev, cge_stream *imm, int32_t n_in,
                               const cge_tensor_desc *in_descs, const void *const *in_vals,
                               const outer_binding *outer, body_mem *mem, body_run *r)
{
    memset(r, 0, sizeof *r);
    r->g = g;
    r->dev = dev;
    r->mem = mem && mem->nv == cge_graph_num_values(g) && mem->nn == cge_graph_num_nodes(g)
                 ? mem : NULL;
    if (dev)
        atomic_fetch_add(&body_runs, 1);
    r->nv = cge_graph_num_values(g);
    if (cge_graph_num_inputs(g) != n_in) {
        char m[128];
        snprintf(m, sizeof m, "it declares %d inputs; %d are given", cge_graph_num_inputs(g), n_in);
        return body_err(op, node, CGE_ERR_INVALID_ARG, cge_graph_name(g), m);
    }
    if (r->mem) {
        r->v = r->mem->v;
        memset(r->v, 0, sizeof *r->v * (size_t)r->nv);
    } else {
        atomic_fetch_add(&body_allocs, 1);
        r->v = calloc((size_t)r->nv + 1, sizeof *r->v);
    }
    if (!r->v)
        return cge_error(CGE_LAYER_META, CGE_ERR_NO_MEMORY, "%s '%s': out of memory", op, node);
    for (int32_t id = 0; id < r->nv; id++) {
        body_val *bv = &r->v[id];
        cge_graph_value_desc(g, id, &bv->desc);
        cge_value_kind k = cge_graph_value_kind(g, id);
        if (k == CGE_VALUE_CONSTANT) {
            const cge_tensor *t = cge_graph_value_constant(g, id);
            bv->data = t->data;
            bv->bytes = t->bytes;
            bv->desc.dtype = t->dtype;
            bv->desc.shape = t->shape;
        } else if (k == CGE_VALUE_UNDEFINED || k == CGE_VALUE_INPUT) {
            bv->desc.dtype = CGE_DTYPE_UNDEFINED;
            for (int32_t j = 0; outer && j < outer->n; j++)
                if (!strcmp(outer->names[j], bv->desc.name)) {
                    bv->desc.dtype = outer->descs[j].dtype;
                    bv->desc.shape = outer->descs[j].shape;
                    bv->desc.type = outer->descs[j].type;
                    bv->data = (void *)outer->values[j];
                    bv->bytes = cge__value_nbytes(bv->desc.type, bv->desc.dtype, &bv->desc.shape);
                }
        }
    }
    for (int32_t i = 0; i < n_in; i++) {
        body_val *bv = &r->v[cge_graph_value_id(g, cge_graph_input(g, i))];
        bv->desc.dtype = in_descs[i].dtype;
        bv->desc.shape = in_descs[i].shape;
        bv->desc.type = in_descs[i].type;
        bv->data = (void *)in_vals[i];
        bv->bytes = cge__value_nbytes(bv->desc.type, bv->desc.dtype, &bv->desc.shape);
    }
    int32_t nn = cge_graph_num_nodes(g);
    int32_t *order = r->mem ? r->mem->order : calloc((size_t)nn + 1, sizeof *order);
    if (!order)
        return cge_error(CGE_LAYER_META, CGE_ERR_NO_MEMORY, "%s '%s': out of memory", op, node);
    cge_status st = r->mem ? CGE_OK : cge_graph_topo_order(g, order);
    for (int32_t k = 0; !st && k < nn; k++) {
        const cge_node *n = cge_graph_node(g, order[k]);
        if (cge_node_is_removed(n))
            continue;
        int32_t ni = cge_node_num_inputs(n), no = cge_node_num_outputs(n);
        if (ni > CF_MAX_ARGS || no > CF_MAX_ARGS) {
            st = body_err(op, node, CGE_ERR_UNSUPPORTED, cge_node_name(n),
                          "more than 64 inputs or outputs");
            break;
        }
        const cge_op_def *def = cge_op_find(cge_node_domain(n), cge_node_op_type(n), 0);
        if (!def) {
            st = cge_last_error_status();
            break;
        }
        cge_tensor_desc ind[CF_MAX_ARGS], outd[CF_MAX_ARGS];
        const void *vals[CF_MAX_ARGS];
        const cge_symbolic_value *syms[CF_MAX_ARGS];
        cge_tensor ins[CF_MAX_ARGS];
        cge_value_type in_types[CF_MAX_ARGS] = {0};
        cge_dtype kdt = CGE_DTYPE_UNDEFINED;
        bool any_sym = false;
        for (int32_t i = 0; !st && i < ni; i++) {
            int32_t id = cge_node_input_id(n, i);
            memset(&ind[i], 0, sizeof ind[i]);
            memset(&ins[i], 0, sizeof ins[i]);
            ind[i].name = "";
            vals[i] = NULL;
            syms[i] = NULL;
            if (id < 0)
                continue;
            body_val *bv = &r->v[id];
            if (bv->desc.dtype == CGE_DTYPE_UNDEFINED) {
                char m[600];
                snprintf(m, sizeof m, "node '%s' reads '%s', which nothing defines",
                         cge_node_name(n), bv->desc.name);
                st = body_err(op, node, CGE_ERR_NOT_FOUND, cge_graph_name(g), m);
                break;
            }
            ind[i] = bv->desc;
            vals[i] = bv->data;
            if (!bv->data && bv->sym.numel > 0) {
                syms[i] = &bv->sym;
                any_sym = true;
            }
            ins[i] = (cge_tensor){.name = bv->desc.name, .dtype = bv->desc.dtype,
                                  .shape = bv->desc.shape, .data = bv->data, .bytes = bv->bytes};
            in_types[i] = bv->desc.type;
            if (kdt == CGE_DTYPE_UNDEFINED)
                kdt = bv->desc.dtype;
        }
        for (int32_t i = 0; i < no; i++)
            outd[i] = (cge_tensor_desc){.name = cge_node_output(n, i)};
        if (!st)
            st = cge__op_infer_node_symbolic(def, cge_node_name(n), cge_node_attrs_const(n), ind,
                                             vals, any_sym ? syms : NULL, ni, outd, no);
        for (int32_t i = 0; !st && i < no; i++) {
            body_val *bv = &r->v[cge_node_output_id(n, i)];
            bv->desc.dtype = outd[i].dtype;
            bv->desc.shape = outd[i].shape;
            bv->desc.type = outd[i].type;
        }
        if (st)
            break;
        if (!dev) {
            fold_node(r, n, def, kdt, ins, in_types, ni, no);
            continue;
        }
        for (int32_t i = 0; !st && i < no; i++) {
            body_val *bv = &r->v[cge_node_output_id(n, i)];
            bool tensor = bv->desc.type == CGE_TYPE_TENSOR;
            if (tensor && !cge_shape_is_static(&bv->desc.shape)) {
                st = body_err(op, node, CGE_ERR_SHAPE, cge_node_name(n),
                              "an output's shape is unknown with every input value at hand");
                break;
            }
        }
        if (!st)
            st = run_node(dev, imm, r, n, def, kdt, ins, in_types, ni, no);
    }
    if (!r->mem)
        free(order);
    for (int32_t i = 0; !st && i < cge_graph_num_outputs(g); i++) {
        int32_t id = cge_graph_value_id(g, cge_graph_output(g, i));
        if (id < 0 || r->v[id].desc.dtype == CGE_DTYPE_UNDEFINED)
            st = body_err(op, node, CGE_ERR_NOT_FOUND, cge_graph_name(g),
                          "an output is never defined");
    }
    return st;
}

static cge_status body_exec(const char *op, const char *node, const cge_graph *g, cge_device *dev,
                            cge_stream *imm, int32_t n_in, const cge_tensor_desc *in_descs,
                            const void *const *in_vals, const outer_binding *outer, body_run *r)
{
    return body_exec_in(op, node, g, dev, imm, n_in, in_descs, in_vals, outer, NULL, r);
}

static const body_val *body_output(const body_run *r, int32_t i)
{
    return &r->v[cge_graph_value_id(r->g, cge_graph_output(r->g, i))];
}

/* ---- shared node helpers ----------------------------------------------------------- */

/* How many of the node's inputs (the last ones) are outer-scope values. */
static int32_t num_outer(const cge_attrs *a, int32_t num_inputs)
{
    const cge_attr *at = cge_attrs_find(a, "outer_names");
    int64_t n = at && at->kind == CGE_ATTR_STRINGS ? at->n : 0;
    return n > num_inputs ? num_inputs : (int32_t)n;
}

static outer_binding outer_of(const cge_attrs *a, int32_t num_inputs, const cge_tensor_desc *descs,
                              const void *const *vals)
{
    int32_t k = num_outer(a, num_inputs);
    const cge_attr *at = cge_attrs_find(a, "outer_names");
    return (outer_binding){.n = k, .names = k ? at->strings : NULL,
                           .descs = descs + (num_inputs - k), .values = vals + (num_inputs - k)};
}

static const void *in_val(const cge_infer_ctx *c, int32_t i)
{
    return c->input_values && i < c->num_inputs ? c->input_values[i] : NULL;
}

static bool present(const cge_infer_ctx *c, int32_t i)
{
    return i < c->num_inputs && c->inputs[i].dtype != CGE_DTYPE_UNDEFINED;
}

static const cge_graph *graph_attr(const cge_attrs *a, const char *name)
{
    return cge_attrs_get_graph(a, name);
}

/* Two inferred shapes of one output merged: equal dims stay, others become
 * dynamic; a rank mismatch is an error. */
static bool merge_shape(cge_shape *into, const cge_shape *other)
{
    if (into->rank < 0 || other->rank < 0) {
        /* a sequence's elements of unknown rank (never a tensor's) */
        into->rank = -1;
        return true;
    }
    if (into->rank != other->rank)
        return false;
    for (int32_t d = 0; d < into->rank; d++)
        if (into->dims[d] != other->dims[d])
            into->dims[d] = CGE_DIM_DYNAMIC;
    return true;
}

/* The per-node state: the tensors of the last launch, for the host function. */
typedef struct cf_state {
    cge_device *dev;
    const char *op_type, *node_name;
    const cge_attrs *attrs;
    int32_t ni, no;
    cge_tensor *ins, *outs;
    cge_value_type *in_types;   /* what each input holds (sequences, optionals) */
    cge_stream *imm;            /* If: its branch's immediate stream, on imm_dev */
    cge_device *imm_dev;
} cf_state;

static cge_status cf_prepare(const cge_kernel_ctx *ctx, void **state)
{
    cf_state *s = calloc(1, sizeof *s);
    if (s) {
        s->ins = calloc((size_t)ctx->num_inputs + 1, sizeof *s->ins);
        s->outs = calloc((size_t)ctx->num_outputs + 1, sizeof *s->outs);
        s->in_types = calloc((size_t)ctx->num_inputs + 1, sizeof *s->in_types);
    }
    if (!s || !s->ins || !s->outs || !s->in_types) {
        if (s) {
            free(s->ins);
            free(s->outs);
            free(s->in_types);
        }
        free(s);
        return cge_kernel_error(ctx, CGE_ERR_NO_MEMORY, "out of memory");
    }
    *state = s;
    return CGE_OK;
}

static void cf_release(void *state)
{
    cf_state *s = state;
    if (!s)
        return;
    cge_stream_destroy(s->imm);
    free(s->ins);
    free(s->outs);
    free(s->in_types);
    free(s);
}

static cge_status cf_launch(const cge_kernel_ctx *ctx, cge_stream *stream, cge_host_fn fn)
{
    cf_state *s = ctx->state;
    if (!s)
        return cge_kernel_error(ctx, CGE_ERR_STATE, "launched without its prepared state");
    s->dev = ctx->device;
    s->op_type = ctx->op_type;
    s->node_name = ctx->node_name;
    s->attrs = ctx->attrs;
    s->ni = ctx->num_inputs;
    s->no = ctx->num_outputs;
    memcpy(s->ins, ctx->inputs, sizeof *s->ins * (size_t)ctx->num_inputs);
    memcpy(s->outs, ctx->outputs, sizeof *s->outs * (size_t)ctx->num_outputs);
    for (int32_t i = 0; i < ctx->num_inputs; i++)
        s->in_types[i] = ctx->input_types ? ctx->input_types[i] : CGE_TYPE_TENSOR;
    return cge_launch_host_func(stream, fn, s);
}

static void cf_fail(const cf_state *s, cge_status st)
{
    /* A cancelled loop is already a [runtime] error naming node and
     * iteration (cancel_point): reported as it is. */
    if (st == CGE_ERR_CANCELLED || st == CGE_ERR_TIMEOUT) {
        const char *m = cge_last_error();
        const char *p = strncmp(m, "[runtime] ", 10) ? m : m + 10;
        cge_kernel_fail(st, "%s", p);
        return;
    }
    cge_kernel_fail(st ? st : CGE_ERR_INTERNAL, "%s '%s': %s", s->op_type, s->node_name,
                    cge_last_error());
}

/* Before each iteration of a Loop or Scan, and when its body stopped: the
 * run's cancel token (a trip count of 10^12 would otherwise run for days).
 * `body_st` is the body's status (CGE_OK before the iteration). */
static cge_status cancel_point(const char *op, const char *node, int64_t it, cge_status body_st)
{
    if (body_st && body_st != CGE_ERR_CANCELLED && body_st != CGE_ERR_TIMEOUT)
        return body_st;
    cge_status st = cge_cancel_check();
    if (!st)
        return body_st;
    char m[256];
    const char *e = cge_last_error();
    snprintf(m, sizeof m, "%s", strncmp(e, "[runtime] ", 10) ? e : e + 10);
    return cge_error(CGE_LAYER_RUNTIME, st, "%s '%s': stopped at iteration %lld: %s", op,
                     node, (long long)it, m);
}

/* Copies a body result into a node output of exactly that size. */
static cge_status put_output(const cf_state *s, int32_t i, const body_val *bv)
{
    if (bv->desc.type != CGE_TYPE_TENSOR) {
        /* meta gave the node's output the body's type: a cge_sequence */
        if (!bv->data || !s->outs[i].data || s->outs[i].bytes < sizeof(cge_sequence))
            return cge_error(CGE_LAYER_KERNEL, CGE_ERR_DTYPE,
                             "output %d: the body produced a %s where a tensor was planned", i,
                             cge_value_type_name(bv->desc.type));
        return cge_sequence_copy(s->outs[i].data, bv->data);
    }
    size_t need = cge_tensor_nbytes(bv->desc.dtype, &bv->desc.shape);
    /* The buffer may be larger than the value (an eager run's, reused). */
    if (bv->desc.dtype != s->outs[i].dtype || need > s->outs[i].bytes ||
        !cge_shape_equal(&bv->desc.shape, &s->outs[i].shape)) {
        char a[CGE_SHAPE_STR_MAX], b[CGE_SHAPE_STR_MAX];
        return cge_error(CGE_LAYER_KERNEL, CGE_ERR_SHAPE,
                         "output %d: the body produced %s %s where %s %s was planned", i,
                         cge_dtype_name(bv->desc.dtype), cge_shape_str(&bv->desc.shape, a, sizeof a),
                         cge_dtype_name(s->outs[i].dtype),
                         cge_shape_str(&s->outs[i].shape, b, sizeof b));
    }
    if (need)
        memcpy(s->outs[i].data, bv->data, need);
    return CGE_OK;
}

static void tensors_split(const cf_state *s, cge_tensor_desc *d, const void **v)
{
    for (int32_t i = 0; i < s->ni; i++) {
        d[i] = (cge_tensor_desc){.name = s->ins[i].name ? s->ins[i].name : "",
                                 .dtype = s->ins[i].data ? s->ins[i].dtype : CGE_DTYPE_UNDEFINED,
                                 .shape = s->ins[i].shape, .type = s->in_types[i]};
        v[i] = s->ins[i].data;
    }
}

/* ---- If ------------------------------------------------------------------------------ */

/* Every input value is at hand (a run node by node) but an output's shape
 * depends on values the branch computes (NonMaxSuppression, NonZero): meta
 * runs the branch once on a private single-thread device and reads the
 * shapes off its results. The results are kept (a memo) for the kernel that
 * follows with the same inputs, which copies them instead of running the
 * branch again: each branch runs once per run. */

/* A memo: the node (its attributes, the branch: by the graph's uid and
 * revision, since a destroyed graph's address is reused by the next one), its
 * inputs as meta saw them (descriptors and a hash of their bytes: the kernel
 * may see the same values at other addresses, copied to the device) and the
 * branch's outputs. */
typedef struct if_memo {
    const cge_attrs *attrs;
    uint64_t graph_uid, graph_rev;
    int32_t ni, no;
    const void *vals[CF_MAX_ARGS];
    cge_tensor_desc ins[CF_MAX_ARGS];
    uint64_t hash;
    cge_tensor_desc outs[CF_MAX_ARGS];
    void *data[CF_MAX_ARGS];
    size_t bytes[CF_MAX_ARGS];
    size_t cap[CF_MAX_ARGS];    /* data[i]'s size (a recycled memo's buffers) */
} if_memo;

/* A few, for sessions run from several threads; the oldest is dropped (a
 * meta whose kernel never ran, an error in between). */
#define IF_MEMOS 4
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;
static if_memo *memos[IF_MEMOS];
/* Memos the kernel has read, with their buffers, for the next memo_put: a
 * branch measured at every run copies into the same buffers. */
static if_memo *spares[IF_MEMOS];

static void memo_destroy(if_memo *m)
{
    for (int32_t i = 0; m && i < CF_MAX_ARGS; i++)
        free(m->data[i]);
    free(m);
}

static void memo_free(if_memo *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&memo_lock);
    for (int32_t k = 0; k < IF_MEMOS; k++)
        if (!spares[k]) {
            spares[k] = m;
            m = NULL;
            break;
        }
    pthread_mutex_unlock(&memo_lock);
    memo_destroy(m);
}

/* A spare memo (its buffers kept), or a new one. */
static if_memo *memo_new(void)
{
    if_memo *m = NULL;
    pthread_mutex_lock(&memo_lock);
    for (int32_t k = 0; k < IF_MEMOS && !m; k++)
        if (spares[k]) {
            m = spares[k];
            spares[k] = NULL;
        }
    pthread_mutex_unlock(&memo_lock);
    if (!m) {
        atomic_fetch_add(&body_allocs, 1);
        m = calloc(1, sizeof *m);
    }
    return m;
}

/* The inputs' bytes, 8 at a time (FNV-1a's steps on words: a memo's inputs
 * may be megabytes, and the byte hash would cost more than the branch). */
static uint64_t memo_hash(int32_t ni, const cge_tensor_desc *d, const void *const *v)
{
    uint64_t h = 1469598103934665603ull;
    for (int32_t i = 0; i < ni; i++) {
        if (!v[i] || d[i].type != CGE_TYPE_TENSOR)
            continue;
        size_t n = cge_tensor_nbytes(d[i].dtype, &d[i].shape), k = 0;
        const unsigned char *b = v[i];
        for (; k + 8 <= n; k += 8) {
            uint64_t w;
            memcpy(&w, b + k, 8);
            h = (h ^ w) * 1099511628211ull;
        }
        for (; k < n; k++)
            h = (h ^ b[k]) * 1099511628211ull;
        h = (h ^ (uint64_t)n) * 1099511628211ull;
    }
    return h;
}

static bool memo_inputs_ok(int32_t ni, const cge_tensor_desc *d)
{
    if (ni > CF_MAX_ARGS)
        return false;
    for (int32_t i = 0; i < ni; i++)
        if (d[i].dtype != CGE_DTYPE_UNDEFINED && d[i].type != CGE_TYPE_TENSOR)
            return false;   /* a sequence's elements are not hashed: no memo */
    return true;
}

/* Keeps the branch's outputs (tensors only) for the kernel; on any failure
 * there is simply no memo and the kernel runs the branch. */
static void memo_put(const cge_attrs *attrs, const cge_graph *g, int32_t ni,
                     const cge_tensor_desc *d, const void *const *v, const body_run *r,
                     int32_t no)
{
    if (!memo_inputs_ok(ni, d) || no > CF_MAX_ARGS)
        return;
    if_memo *m = memo_new();
    if (!m)
        return;
    void *keep[CF_MAX_ARGS];
    size_t cap[CF_MAX_ARGS];
    memcpy(keep, m->data, sizeof keep);
    memcpy(cap, m->cap, sizeof cap);
    *m = (if_memo){.attrs = attrs, .graph_uid = cge__graph_uid(g),
                   .graph_rev = cge__graph_revision(g), .ni = ni};
    memcpy(m->data, keep, sizeof keep);
    memcpy(m->cap, cap, sizeof cap);
    for (int32_t i = 0; i < ni; i++) {
        m->vals[i] = v[i];
        m->ins[i] = d[i];
    }
    m->hash = memo_hash(ni, d, v);
    for (int32_t i = 0; i < no; i++, m->no = i) {
        const body_val *bv = body_output(r, i);
        size_t n = cge_tensor_nbytes(bv->desc.dtype, &bv->desc.shape);
        if (bv->desc.type != CGE_TYPE_TENSOR || (n && !bv->data)) {
            memo_free(m);
            return;
        }
        if (!m->data[i] || m->cap[i] < n) {
            free(m->data[i]);
            m->cap[i] = 0;
            atomic_fetch_add(&body_allocs, 1);
            if (!(m->data[i] = malloc(n ? n : 1))) {
                memo_free(m);
                return;
            }
            m->cap[i] = n ? n : 1;
        }
        if (n)
            memcpy(m->data[i], bv->data, n);
        m->outs[i] = bv->desc;
        m->bytes[i] = n;
    }
    pthread_mutex_lock(&memo_lock);
    if_memo *old = memos[IF_MEMOS - 1];
    memmove(memos + 1, memos, sizeof memos[0] * (IF_MEMOS - 1));
    memos[0] = m;
    pthread_mutex_unlock(&memo_lock);
    memo_free(old);   /* never read: a spare now */
}

/* The memo of this node with exactly these inputs, taken out of the list
 * (the caller frees it), or NULL. */
static if_memo *memo_take(const cge_attrs *attrs, const cge_graph *g, int32_t ni,
                          const cge_tensor_desc *d, const void *const *v)
{
    if (!memo_inputs_ok(ni, d))
        return NULL;
    if_memo *found = NULL;
    uint64_t h = 0;
    bool hashed = false;
    uint64_t uid = cge__graph_uid(g), rev = cge__graph_revision(g);
    pthread_mutex_lock(&memo_lock);
    for (int32_t k = 0; k < IF_MEMOS && !found; k++) {
        if_memo *m = memos[k];
        if (!m || m->attrs != attrs || m->graph_uid != uid || m->graph_rev != rev ||
            m->ni != ni)
            continue;
        bool same = true;
        for (int32_t i = 0; same && i < ni; i++)
            same = (m->vals[i] != NULL) == (v[i] != NULL) && m->ins[i].dtype == d[i].dtype &&
                   cge_shape_equal(&m->ins[i].shape, &d[i].shape);
        if (same && !hashed) {
            h = memo_hash(ni, d, v);
            hashed = true;
        }
        if (same && m->hash == h) {
            found = m;
            memmove(memos + k, memos + k + 1, sizeof memos[0] * (size_t)(IF_MEMOS - 1 - k));
            memos[IF_MEMOS - 1] = NULL;
        }
    }
    pthread_mutex_unlock(&memo_lock);
    return found;
}

void cge__control_flow_trim(void)
{
    mem_trim();
    if_memo *drop[IF_MEMOS];
    pthread_mutex_lock(&memo_lock);
    memcpy(drop, spares, sizeof drop);
    memset(spares, 0, sizeof spares);
    pthread_mutex_unlock(&memo_lock);
    for (int32_t k = 0; k < IF_MEMOS; k++)
        memo_destroy(drop[k]);
}

static cge_status if_measure(cge_infer_ctx *c, const cge_graph *g, const outer_binding *ob)
{
    body_mem *mem = mem_take(g);
    cge_device *dev = mem ? mem->dev : NULL;
    cge_stream *imm = mem ? mem->imm : NULL;
    cge_device_options o = {.num_threads = 1};
    cge_status st = CGE_OK;
    if (!mem) {
        atomic_fetch_add(&body_allocs, 1);
        st = cge_device_create_cpu(&o, &dev);
        if (!st)
            st = cge_stream_create_immediate(dev, &imm);
    }
    body_run r = {0};
    if (!st)
        st = body_exec_in(c->op_type, c->node_name, g, dev, imm, 0, NULL, NULL, ob, mem, &r);
    for (int32_t i = 0; !st && i < c->num_outputs; i++) {
        const body_val *bv = body_output(&r, i);
        c->outputs[i].dtype = bv->desc.dtype;
        c->outputs[i].shape = bv->desc.shape;
    }
    if (!st)
        memo_put(c->attrs, g, c->num_inputs, c->inputs, c->input_values, &r, c->num_outputs);
    body_free(&r);
    if (mem) {
        mem_put(mem);
    } else {
        cge_stream_destroy(imm);
        cge_device_destroy(dev);
    }
    return st;
}

static cge_status if_infer(cge_infer_ctx *c)
{
    const cge_graph *tg = graph_attr(c->attrs, "then_branch"), *eg = graph_attr(c->attrs, "else_branch");
    if (!tg || !eg)
        return cge_meta_error(c, CGE_ERR_INVALID_ARG, "then_branch and else_branch are required");
    if (c->num_inputs > CF_MAX_ARGS)
        return cge_meta_error(c, CGE_ERR_UNSUPPORTED, "more than 64 inputs");
    const void *nulls[CF_MAX_ARGS] = {0};
    outer_binding ob = outer_of(c->attrs, c->num_inputs, c->inputs,
                                c->input_values ? c->input_values : nulls);
    const void *cv = in_val(c, 0);
    const cge_graph *gs[2] = {tg, eg};
    int32_t ng = 2;
    if (cv) {
        gs[0] = *(const uint8_t *)cv ? tg : eg;
        ng = 1;
    }
    cge_status st = CGE_OK;
    for (int32_t k = 0; !st && k < ng; k++) {
        body_run r;
        body_mem *mem = mem_take(gs[k]);
        st = body_exec_in(c->op_type, c->node_name, gs[k], NULL, NULL, 0, NULL, NULL, &ob, mem,
                          &r);
        if (!st && cge_graph_num_outputs(gs[k]) != c->num_outputs)
            st = cge_meta_error(c, CGE_ERR_INVALID_ARG, "branch '%s' has %d outputs; the node %d",
                                cge_graph_name(gs[k]), cge_graph_num_outputs(gs[k]), c->num_outputs);
        for (int32_t i = 0; !st && i < c->num_outputs; i++) {
            const body_val *bv = body_output(&r, i);
            if (k == 0) {
                c->outputs[i].dtype = bv->desc.dtype;
                c->outputs[i].shape = bv->desc.shape;
                c->outputs[i].type = bv->desc.type;
            } else if (c->outputs[i].type != CGE_TYPE_TENSOR && c->outputs[i].type == bv->desc.type &&
                       c->outputs[i].dtype == bv->desc.dtype &&
                       c->outputs[i].shape.rank != bv->desc.shape.rank) {
                c->outputs[i].shape.rank = -1;   /* sequences: elements of either rank */
            } else if (c->outputs[i].dtype != bv->desc.dtype || c->outputs[i].type != bv->desc.type ||
                       !merge_shape(&c->outputs[i].shape, &bv->desc.shape)) {
                /* One output needs one type, dtype and rank for the plan; a
                 * condition known here (a constant, a shape computation)
                 * takes one branch above and never gets here. */
                st = cge_meta_error(c, CGE_ERR_UNSUPPORTED,
                                    "output %d is %s of rank %d in then_branch and %s of rank %d "
                                    "in else_branch, and the condition is known only at run time",
                                    i, cge_dtype_name(c->outputs[i].dtype),
                                    (int)c->outputs[i].shape.rank, cge_dtype_name(bv->desc.dtype),
                                    (int)bv->desc.shape.rank);
            } else {
                merge_shape(&c->outputs[i].shape, &bv->desc.shape);
            }
        }
        body_free(&r);
        mem_put(mem);
    }
    bool all_static = true, all_values = c->input_values != NULL;
    for (int32_t i = 0; i < c->num_outputs; i++)
        all_static &= cge_shape_is_static(&c->outputs[i].shape);
    for (int32_t i = 0; all_values && i < c->num_inputs; i++)
        all_values = !present(c, i) || c->input_values[i];
    if (!st && !all_static && all_values)
        st = if_measure(c, gs[0], &ob);
    return st;
}

static void if_host(void *user)
{
    cf_state *s = user;
    cge_tensor_desc d[CF_MAX_ARGS];
    const void *v[CF_MAX_ARGS];
    tensors_split(s, d, v);
    outer_binding ob = outer_of(s->attrs, s->ni, d, v);
    bool cond = *(const uint8_t *)s->ins[0].data != 0;
    const cge_graph *g = graph_attr(s->attrs, cond ? "then_branch" : "else_branch");
    if_memo *m = memo_take(s->attrs, g, s->ni, d, v);
    if (m) {
        /* meta ran this branch on these inputs: its outputs, copied */
        cge_status st = m->no == s->no ? CGE_OK
                                       : cge_error(CGE_LAYER_KERNEL, CGE_ERR_INTERNAL,
                                                   "a measured branch has %d outputs", m->no);
        for (int32_t i = 0; !st && i < s->no; i++) {
            body_val bv = {.desc = m->outs[i], .data = m->data[i], .bytes = m->bytes[i]};
            st = put_output(s, i, &bv);
        }
        memo_free(m);
        if (st)
            cf_fail(s, st);
        return;
    }
    body_run r = {0};
    cge_status st = CGE_OK;
    if (s->imm_dev != s->dev) {
        /* the node's immediate stream, made at its first run on this device */
        cge_stream_destroy(s->imm);
        s->imm = NULL;
        s->imm_dev = NULL;
        atomic_fetch_add(&body_allocs, 1);
        st = cge_stream_create_immediate(s->dev, &s->imm);
        if (!st)
            s->imm_dev = s->dev;
    }
    body_mem *mem = st ? NULL : mem_take(g);
    if (!st)
        st = body_exec_in(s->op_type, s->node_name, g, s->dev, s->imm, 0, NULL, NULL, &ob, mem,
                          &r);
    for (int32_t i = 0; !st && i < s->no; i++)
        st = put_output(s, i, body_output(&r, i));
    body_free(&r);
    mem_put(mem);
    if (st)
        cf_fail(s, st);
}

static cge_status if_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_inputs > CF_MAX_ARGS)
        return cge_kernel_error(ctx, CGE_ERR_UNSUPPORTED, "more than 64 inputs");
    return cf_launch(ctx, stream, if_host);
}

/* ---- Loop ---------------------------------------------------------------------------- */

/* True if the body's condition output is always its condition input (passed
 * through directly or by Identity) or a constant true: then the trip count
 * alone ends the loop. */
static bool cond_invariant(const cge_graph *g)
{
    if (cge_graph_num_inputs(g) < 2 || cge_graph_num_outputs(g) < 1)
        return false;
    const char *in = cge_graph_input(g, 1), *out = cge_graph_output(g, 0);
    for (int guard = 0; guard < 64; guard++) {
        if (!strcmp(in, out))
            return true;
        const cge_tensor *t = cge_graph_constant(g, out);
        if (t)
            return t->dtype == CGE_BOOL && t->bytes == 1 && *(const uint8_t *)t->data;
        const cge_node *n = cge_graph_producer(g, out);
        if (!n || strcmp(cge_node_op_type(n), "Identity") || cge_node_num_inputs(n) != 1)
            return false;
        out = cge_node_input(n, 0);
    }
    return false;
}

static cge_status loop_measure(cge_infer_ctx *c);

static cge_status loop_infer(cge_infer_ctx *c)
{
    const cge_graph *body = graph_attr(c->attrs, "body");
    if (!body)
        return cge_meta_error(c, CGE_ERR_INVALID_ARG, "body is required");
    if (c->num_inputs > CF_MAX_ARGS)
        return cge_meta_error(c, CGE_ERR_UNSUPPORTED, "more than 64 inputs");
    int32_t k_outer = num_outer(c->attrs, c->num_inputs);
    int32_t n_state = c->num_inputs - 2 - k_outer;
    if (n_state < 0 || c->num_outputs < n_state)
        return cge_meta_error(c, CGE_ERR_INVALID_ARG, "%d inputs and %d outputs do not fit a loop",
                              c->num_inputs, c->num_outputs);
    const void *nulls[CF_MAX_ARGS] = {0};
    outer_binding ob = outer_of(c->attrs, c->num_inputs, c->inputs,
                                c->input_values ? c->input_values : nulls);
    cge_tensor_desc bd[CF_MAX_ARGS];
    const void *bvals[CF_MAX_ARGS] = {0};
    bd[0] = (cge_tensor_desc){.name = "", .dtype = CGE_I64, .shape = CGE_SCALAR};
    bd[1] = (cge_tensor_desc){.name = "", .dtype = CGE_BOOL, .shape = CGE_SCALAR};
    for (int32_t i = 0; i < n_state; i++)
        bd[2 + i] = c->inputs[2 + i];
    body_run r;
    cge_status st = body_exec(c->op_type, c->node_name, body, NULL, NULL, 2 + n_state, bd, bvals,
                              &ob, &r);
    int32_t n_scan = c->num_outputs - n_state;
    if (!st && cge_graph_num_outputs(body) != 1 + n_state + n_scan)
        st = cge_meta_error(c, CGE_ERR_INVALID_ARG, "the body has %d outputs; %d are needed",
                            cge_graph_num_outputs(body), 1 + n_state + n_scan);
    /* The trip count, when the values tell it. */
    int64_t trips = CGE_DIM_DYNAMIC;
    const void *mv = in_val(c, 0), *cv = in_val(c, 1);
    bool m_known = present(c, 0) && mv, cond_known = !present(c, 1) || cv;
    if (cond_known && cv && !*(const uint8_t *)cv)
        trips = 0;
    else if (m_known && cond_known && !st && cond_invariant(body))
        trips = *(const int64_t *)mv > 0 ? *(const int64_t *)mv : 0;
    for (int32_t i = 0; !st && i < n_state; i++) {
        const body_val *bv = body_output(&r, 1 + i);
        c->outputs[i].dtype = c->inputs[2 + i].dtype;
        c->outputs[i].shape = c->inputs[2 + i].shape;
        c->outputs[i].type = c->inputs[2 + i].type;
        /* An optional state the body unwraps (onnx's test_loop16_seq_none:
         * optional(seq) in, seq out) carries what the body makes. */
        cge_value_type it = c->inputs[2 + i].type, ot = bv->desc.type;
        if ((it == CGE_TYPE_OPTIONAL_SEQUENCE && ot == CGE_TYPE_SEQUENCE) ||
            (it == CGE_TYPE_OPTIONAL && ot == CGE_TYPE_TENSOR && trips != 0)) {
            c->outputs[i].type = ot;
            c->outputs[i].shape = bv->desc.shape;
            if (bv->desc.dtype == c->inputs[2 + i].dtype)
                continue;
        }
        if (c->outputs[i].type != CGE_TYPE_TENSOR && bv->desc.type == c->outputs[i].type &&
            bv->desc.dtype == c->outputs[i].dtype &&
            c->outputs[i].shape.rank != bv->desc.shape.rank) {
            c->outputs[i].shape.rank = -1;   /* sequences: elements of either rank */
            continue;
        }
        if (bv->desc.dtype != c->inputs[2 + i].dtype || bv->desc.type != c->inputs[2 + i].type ||
            (trips != 0 && !merge_shape(&c->outputs[i].shape, &bv->desc.shape)))
            st = cge_meta_error(c, CGE_ERR_UNSUPPORTED,
                                "loop-carried value %d changes dtype or rank in the body", i);
    }
    for (int32_t k = 0; !st && k < n_scan; k++) {
        const body_val *bv = body_output(&r, 1 + n_state + k);
        if (bv->desc.shape.rank >= CGE_MAX_RANK) {
            st = cge_meta_error(c, CGE_ERR_UNSUPPORTED, "scan output %d has too high a rank", k);
            break;
        }
        cge_tensor_desc *o = &c->outputs[n_state + k];
        o->dtype = bv->desc.dtype;
        o->shape.rank = bv->desc.shape.rank + 1;
        o->shape.dims[0] = trips;
        for (int32_t d = 0; d < bv->desc.shape.rank; d++)
            o->shape.dims[d + 1] = bv->desc.shape.dims[d];
    }
    body_free(&r);
    bool all_static = true, all_values = c->input_values != NULL;
    for (int32_t i = 0; i < c->num_outputs; i++)
        all_static &= c->outputs[i].type != CGE_TYPE_TENSOR ||
                      cge_shape_is_static(&c->outputs[i].shape);
    for (int32_t i = 0; all_values && i < c->num_inputs; i++)
        all_values = !present(c, i) || c->input_values[i];
    if (!st && !all_static && all_values)
        st = loop_measure(c);
    return st;
}

static cge_status copy_owned(cge_device *dev, const body_val *from, body_val *to)
{
    body_val nv = {.desc = from->desc,
                   .bytes = cge__value_nbytes(from->desc.type, from->desc.dtype, &from->desc.shape),
                   .owned = true};
    cge_status st = cge_mem_alloc(dev, nv.bytes, &nv.data);
    if (st)
        return st;
    if (from->desc.type != CGE_TYPE_TENSOR) {
        /* a sequence state: a deep copy the next iteration owns */
        memset(nv.data, 0, nv.bytes);
        st = from->data ? cge_sequence_copy(nv.data, from->data) : CGE_OK;
        if (st) {
            cge__value_release(from->desc.type, nv.data);
            cge_mem_free(dev, nv.data);
            return st;
        }
    } else if (nv.bytes) {
        memcpy(nv.data, from->data, nv.bytes);
    }
    if (to->owned) {
        cge__value_release(to->desc.type, to->data);
        cge_mem_free(dev, to->data);
    }
    *to = nv;
    return CGE_OK;
}

/* ---- one body iteration (Loop, Scan-8, Scan-9, SequenceMap) --------------------------- */

/* What every iteration of a body shares: its immediate stream, the outer
 * values and the loop-carried states (owned copies). Each step checks the
 * run's cancel token, binds the states among the body's inputs, runs the
 * body and takes its new states from its outputs. */
typedef struct body_iter {
    const char *op, *node;
    const cge_graph *body;
    cge_device *dev;
    cge_stream *imm;
    const outer_binding *ob;
    int32_t n_state;
    body_val state[CF_MAX_ARGS];
    /* The states the last step replaced: a scan output of that step may be
     * one of them (a body input passed through), so they go only once the
     * caller has read the step's outputs (at the next step or the close). */
    body_val prev[CF_MAX_ARGS];
} body_iter;

static void release_owned(cge_device *dev, body_val *v)
{
    if (v->owned) {
        cge__value_release(v->desc.type, v->data);
        cge_mem_free(dev, v->data);
    }
    memset(v, 0, sizeof *v);
}

static cge_status iter_open(body_iter *it, const char *op, const char *node,
                            const cge_graph *body, cge_device *dev, const outer_binding *ob,
                            int32_t n_state)
{
    it->op = op;
    it->node = node;
    it->body = body;
    it->dev = dev;
    it->imm = NULL;
    it->ob = ob;
    it->n_state = n_state;
    memset(it->state, 0, sizeof it->state);
    memset(it->prev, 0, sizeof it->prev);
    return cge_stream_create_immediate(dev, &it->imm);
}

/* State i starts as a copy of `data` (`desc`). */
static cge_status iter_set_state(body_iter *it, int32_t i, const cge_tensor_desc *desc,
                                 const void *data)
{
    body_val init = {.desc = *desc, .data = (void *)data};
    return copy_owned(it->dev, &init, &it->state[i]);
}

/* Step t: the states go to body inputs in_pos.., the other inputs are in
 * bd/bv already; the new states come from body outputs out_pos... `r` holds
 * the body's values (body_free it, also after an error). */
static cge_status iter_step(body_iter *it, int64_t t, int32_t n_in, cge_tensor_desc *bd,
                            const void **bv, int32_t in_pos, int32_t out_pos, body_run *r)
{
    memset(r, 0, sizeof *r);
    for (int32_t i = 0; i < it->n_state; i++)
        release_owned(it->dev, &it->prev[i]);   /* the last step's outputs are read */
    cge_status st = cancel_point(it->op, it->node, t, CGE_OK);
    if (st)
        return st;
    for (int32_t i = 0; i < it->n_state; i++) {
        bd[in_pos + i] = it->state[i].desc;
        bv[in_pos + i] = it->state[i].data;
    }
    st = cancel_point(it->op, it->node, t,
                      body_exec(it->op, it->node, it->body, it->dev, it->imm, n_in, bd, bv,
                                it->ob, r));
    /* Every new state copied before any old one goes: a body output may be
     * another state's input passed through ((a, b) -> (a + b, a)). */
    body_val next[CF_MAX_ARGS];
    memset(next, 0, sizeof next);
    for (int32_t i = 0; !st && i < it->n_state; i++)
        st = copy_owned(it->dev, body_output(r, out_pos + i), &next[i]);
    for (int32_t i = 0; i < it->n_state; i++) {
        if (st) {
            release_owned(it->dev, &next[i]);
            continue;
        }
        it->prev[i] = it->state[i];
        it->state[i] = next[i];
    }
    return st;
}

static void iter_close(body_iter *it)
{
    for (int32_t i = 0; i < it->n_state; i++) {
        release_owned(it->dev, &it->prev[i]);
        release_owned(it->dev, &it->state[i]);
    }
    cge_stream_destroy(it->imm);
    it->imm = NULL;
}

/* Runs the loop. With `outs` it writes the node's outputs (sized by meta);
 * without, it only measures them: the final states' descriptors and each
 * scan output's stacked shape go to `measured`. */
static cge_status loop_exec(const char *op, const char *node, const cge_attrs *attrs,
                            cge_device *dev, int32_t ni, const cge_tensor_desc *d,
                            const void *const *v, int32_t no, cge_tensor *outs,
                            cge_tensor_desc *measured)
{
    outer_binding ob = outer_of(attrs, ni, d, v);
    const cge_graph *body = graph_attr(attrs, "body");
    int32_t n_state = ni - 2 - ob.n, n_scan = no - n_state;
    bool has_m = v[0] != NULL;
    int64_t m = has_m ? *(const int64_t *)v[0] : 0;
    bool cond = v[1] ? *(const uint8_t *)v[1] != 0 : true;
    size_t scan_off[CF_MAX_ARGS] = {0};
    int64_t iters = 0;
    body_iter bi;
    cge_status st = iter_open(&bi, op, node, body, dev, &ob, n_state);
    body_val *state = bi.state;
    for (int32_t i = 0; !st && i < n_state; i++)
        st = iter_set_state(&bi, i, &d[2 + i], v[2 + i]);
    for (int64_t it = 0; !st && (!has_m || it < m) && cond; it++, iters++) {
        cge_tensor_desc bd[CF_MAX_ARGS];
        const void *bv[CF_MAX_ARGS];
        bd[0] = (cge_tensor_desc){.name = "", .dtype = CGE_I64, .shape = CGE_SCALAR};
        bd[1] = (cge_tensor_desc){.name = "", .dtype = CGE_BOOL, .shape = CGE_SCALAR};
        uint8_t cb = cond;
        bv[0] = &it;
        bv[1] = &cb;
        body_run r;
        st = iter_step(&bi, it, 2 + n_state, bd, bv, 2, 1, &r);
        if (!st) {
            const body_val *cv = body_output(&r, 0);
            cond = cv->data && *(const uint8_t *)cv->data != 0;
        }
        for (int32_t k = 0; !st && k < n_scan; k++) {
            const body_val *sv = body_output(&r, 1 + n_state + k);
            size_t b = cge_tensor_nbytes(sv->desc.dtype, &sv->desc.shape);
            if (!outs) {
                cge_tensor_desc *md = &measured[n_state + k];
                if (it > 0 && (md->dtype != sv->desc.dtype || md->shape.rank != sv->desc.shape.rank + 1))
                    st = cge_error(CGE_LAYER_META, CGE_ERR_SHAPE,
                                   "%s '%s': scan output %d changes dtype or rank at iteration %lld",
                                   op, node, k, (long long)it);
                md->dtype = sv->desc.dtype;
                md->shape.rank = sv->desc.shape.rank + 1;
                for (int32_t q = 0; q < sv->desc.shape.rank; q++) {
                    if (it > 0 && md->shape.dims[q + 1] != sv->desc.shape.dims[q])
                        st = cge_error(CGE_LAYER_META, CGE_ERR_SHAPE,
                                       "%s '%s': scan output %d changes shape at iteration %lld",
                                       op, node, k, (long long)it);
                    md->shape.dims[q + 1] = sv->desc.shape.dims[q];
                }
                continue;
            }
            cge_tensor *o = &outs[n_state + k];
            if (sv->desc.dtype != o->dtype || scan_off[k] + b > o->bytes)
                st = cge_error(CGE_LAYER_KERNEL, CGE_ERR_SHAPE,
                               "scan output %d: iteration %lld does not fit the %zu bytes planned",
                               k, (long long)it, o->bytes);
            else if (b)
                memcpy((char *)o->data + scan_off[k], sv->data, b);
            scan_off[k] += b;
        }
        body_free(&r);
    }
    for (int32_t k = 0; !st && outs && k < n_scan; k++)
        if (scan_off[k] != outs[n_state + k].bytes)
            st = cge_error(CGE_LAYER_KERNEL, CGE_ERR_SHAPE,
                           "scan output %d: the loop produced %zu bytes where %zu were planned", k,
                           scan_off[k], outs[n_state + k].bytes);
    for (int32_t k = 0; !st && !outs && k < n_scan; k++) {
        cge_tensor_desc *md = &measured[n_state + k];
        md->shape.dims[0] = iters;
        for (int32_t q = 1; q < md->shape.rank; q++)
            if (md->shape.dims[q] < 0)
                md->shape.dims[q] = 0; /* no iteration ran: an empty output */
    }
    for (int32_t i = 0; !st && i < n_state; i++) {
        if (outs) {
            cf_state tmp = {.outs = outs, .no = no};
            st = put_output(&tmp, i, &state[i]);
        } else {
            measured[i].dtype = state[i].desc.dtype;
            measured[i].shape = state[i].desc.shape;
            measured[i].type = state[i].desc.type;
        }
    }
    iter_close(&bi);
    return st;
}

static void loop_host(void *user)
{
    cf_state *s = user;
    cge_tensor_desc d[CF_MAX_ARGS];
    const void *v[CF_MAX_ARGS];
    tensors_split(s, d, v);
    cge_status st = loop_exec(s->op_type, s->node_name, s->attrs, s->dev, s->ni, d, v, s->no,
                              s->outs, NULL);
    if (st)
        cf_fail(s, st);
}

/* Every input value is at hand but some output shape still depends on how
 * the body runs: run the loop once on a private single-thread device and
 * read the shapes off the result (the kernel then runs it for real). */
static cge_status loop_measure(cge_infer_ctx *c)
{
    cge_device *dev = NULL;
    cge_device_options o = {.num_threads = 1};
    cge_status st = cge_device_create_cpu(&o, &dev);
    if (st)
        return st;
    cge_tensor_desc d[CF_MAX_ARGS];
    const void *v[CF_MAX_ARGS];
    for (int32_t i = 0; i < c->num_inputs; i++) {
        d[i] = c->inputs[i];
        v[i] = present(c, i) ? c->input_values[i] : NULL;
    }
    st = loop_exec(c->op_type, c->node_name, c->attrs, dev, c->num_inputs, d, v, c->num_outputs,
                   NULL, c->outputs);
    cge_device_destroy(dev);
    return st;
}

static cge_status loop_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_inputs > CF_MAX_ARGS || ctx->num_outputs > CF_MAX_ARGS)
        return cge_kernel_error(ctx, CGE_ERR_UNSUPPORTED, "more than 64 inputs or outputs");
    return cf_launch(ctx, stream, loop_host);
}

/* ---- Scan (opset 9 and later) ---------------------------------------------------------- */

typedef struct scan_geo {
    int32_t n_state, n_scan_in, n_scan_out, k_outer;
    int64_t len;
} scan_geo;

static int64_t list_at(const cge_attrs *a, const char *name, int32_t i, int64_t dflt)
{
    const int64_t *v = NULL;
    int64_t n = cge_attrs_get_ints(a, name, &v);
    return n > i ? v[i] : dflt;
}

/* Slice geometry of `shape` at `axis`: outer count and inner bytes. */
static void slice_geo(const cge_shape *shape, int32_t axis, size_t esize, int64_t *outer,
                      size_t *inner)
{
    int64_t o = 1, in = 1;
    for (int32_t d = 0; d < axis; d++)
        o *= shape->dims[d];
    for (int32_t d = axis + 1; d < shape->rank; d++)
        in *= shape->dims[d];
    *outer = o;
    *inner = (size_t)in * esize;
}

static cge_shape drop_axis(const cge_shape *s, int32_t axis)
{
    cge_shape r = {.rank = s->rank - 1};
    for (int32_t d = 0, j = 0; d < s->rank; d++)
        if (d != axis)
            r.dims[j++] = s->dims[d];
    return r;
}

/* How a Scan's inputs and outputs divide (`lead` inputs first: Scan-8's
 * sequence_lens): outer values last, scan inputs before them, states first. */
static cge_status scan_counts(const char *op, const char *node, const cge_attrs *a, int32_t ni,
                              int32_t no, int32_t lead, const cge_graph *body, int32_t *k_outer,
                              int32_t *n_scan_in, int32_t *n_state, int32_t *n_scan_out)
{
    *k_outer = num_outer(a, ni);
    *n_scan_in = (int32_t)cge_attrs_get_int(a, "num_scan_inputs", 0);
    *n_state = ni - lead - *k_outer - *n_scan_in;
    *n_scan_out = no - *n_state;
    if (*n_scan_in < 1 || *n_state < 0 || *n_scan_out < 0 || ni > CF_MAX_ARGS || no > CF_MAX_ARGS)
        return cge_error(CGE_LAYER_META, CGE_ERR_INVALID_ARG,
                         "%s '%s': %d inputs, %d outputs and num_scan_inputs %d do not fit", op,
                         node, ni, no, *n_scan_in);
    if (cge_graph_num_outputs(body) != *n_state + *n_scan_out)
        return cge_error(CGE_LAYER_META, CGE_ERR_INVALID_ARG,
                         "%s '%s': the body has %d outputs; %d are needed", op, node,
                         cge_graph_num_outputs(body), *n_state + *n_scan_out);
    return CGE_OK;
}

static cge_status scan_setup(const char *op, const char *node, const cge_attrs *a, int32_t ni,
                             int32_t no, const cge_tensor_desc *ins, scan_geo *g, int32_t *in_axes,
                             int32_t *out_axes, const cge_graph *body)
{
    cge_status st = scan_counts(op, node, a, ni, no, 0, body, &g->k_outer, &g->n_scan_in,
                                &g->n_state, &g->n_scan_out);
    if (st)
        return st;
    g->len = CGE_DIM_DYNAMIC;
    for (int32_t j = 0; j < g->n_scan_in; j++) {
        const cge_tensor_desc *x = &ins[g->n_state + j];
        if (!cge_axis_normalize(list_at(a, "scan_input_axes", j, 0), x->shape.rank, false, &in_axes[j]))
            return cge_error(CGE_LAYER_META, CGE_ERR_INVALID_ARG, "%s '%s': scan input %d: bad axis",
                             op, node, j);
        int64_t l = x->shape.dims[in_axes[j]];
        if (g->len >= 0 && l >= 0 && l != g->len)
            return cge_error(CGE_LAYER_META, CGE_ERR_SHAPE,
                             "%s '%s': scan inputs have different lengths (%lld and %lld)", op, node,
                             (long long)g->len, (long long)l);
        if (l >= 0)
            g->len = l;
    }
    /* Output axes are normalised once the slice ranks are known. */
    for (int32_t k = 0; k < g->n_scan_out; k++)
        out_axes[k] = (int32_t)list_at(a, "scan_output_axes", k, 0);
    return CGE_OK;
}

/* ---- Scan 8: a batch axis first, sequence_lens ---------------------------------------- */

/* Scan-8 (the ONNX converter sets batch_major): input 0 is sequence_lens
 * (optional), then states [batch, ...] and scan inputs [batch, seq, ...];
 * outputs are states [batch, ...] and scan outputs [batch, seq, ...]. Each
 * batch element runs the body as Scan-9 does over its own sequence_lens[b]
 * steps (scan inputs reversed by `directions`); scan outputs past a row's
 * length are zeros, as ONNX Runtime leaves them. */
typedef struct scan8_geo {
    int32_t n_state, n_scan_in, n_scan_out, k_outer;
    int64_t batch, len;
} scan8_geo;

static cge_status scan8_setup(const char *op, const char *node, const cge_attrs *a, int32_t ni,
                              int32_t no, const cge_tensor_desc *ins, const cge_graph *body,
                              scan8_geo *g)
{
    cge_status st = scan_counts(op, node, a, ni, no, 1, body, &g->k_outer, &g->n_scan_in,
                                &g->n_state, &g->n_scan_out);
    if (st)
        return st;
    g->batch = g->len = CGE_DIM_DYNAMIC;
    for (int32_t i = 1; i < 1 + g->n_state + g->n_scan_in; i++) {
        const cge_tensor_desc *x = &ins[i];
        bool scan = i > g->n_state;
        if (x->shape.rank < (scan ? 2 : 1))
            return cge_error(CGE_LAYER_META, CGE_ERR_SHAPE,
                             "%s '%s': input %d needs a batch axis%s", op, node, i,
                             scan ? " and a sequence axis" : "");
        int64_t dims[2] = {x->shape.dims[0], scan ? x->shape.dims[1] : CGE_DIM_DYNAMIC};
        int64_t *have[2] = {&g->batch, &g->len};
        for (int k = 0; k < 2; k++) {
            if (dims[k] < 0)
                continue;
            if (*have[k] >= 0 && *have[k] != dims[k])
                return cge_error(CGE_LAYER_META, CGE_ERR_SHAPE,
                                 "%s '%s': inputs disagree on the %s (%lld and %lld)", op, node,
                                 k ? "sequence length" : "batch size", (long long)*have[k],
                                 (long long)dims[k]);
            *have[k] = dims[k];
        }
    }
    if (ni > 0 && ins[0].dtype != CGE_DTYPE_UNDEFINED &&
        (ins[0].dtype != CGE_I64 || ins[0].shape.rank != 1 ||
         (ins[0].shape.dims[0] >= 0 && g->batch >= 0 && ins[0].shape.dims[0] != g->batch)))
        return cge_error(CGE_LAYER_META, CGE_ERR_SHAPE,
                         "%s '%s': sequence_lens must be int64 [batch]", op, node);
    return CGE_OK;
}

/* The body's inputs for one batch element: states less the batch axis,
 * scan slices less batch and sequence axes. */
static void scan8_body_descs(const scan8_geo *g, const cge_tensor_desc *ins, cge_tensor_desc *bd)
{
    for (int32_t i = 0; i < g->n_state + g->n_scan_in; i++) {
        const cge_tensor_desc *x = &ins[1 + i];
        bd[i] = *x;
        bd[i].shape = drop_axis(&x->shape, 0);
        if (i >= g->n_state)
            bd[i].shape = drop_axis(&bd[i].shape, 0);
    }
}

static cge_status scan8_infer(cge_infer_ctx *c, const cge_graph *body)
{
    scan8_geo g;
    cge_status st = scan8_setup(c->op_type, c->node_name, c->attrs, c->num_inputs,
                                c->num_outputs, c->inputs, body, &g);
    if (st)
        return st;
    const void *nulls[CF_MAX_ARGS] = {0};
    outer_binding ob = outer_of(c->attrs, c->num_inputs, c->inputs,
                                c->input_values ? c->input_values : nulls);
    cge_tensor_desc bd[CF_MAX_ARGS];
    const void *bv[CF_MAX_ARGS] = {0};
    scan8_body_descs(&g, c->inputs, bd);
    body_run r;
    st = body_exec(c->op_type, c->node_name, body, NULL, NULL, g.n_state + g.n_scan_in, bd, bv,
                   &ob, &r);
    for (int32_t k = 0; !st && k < g.n_state + g.n_scan_out; k++) {
        const body_val *o = body_output(&r, k);
        bool scan = k >= g.n_state;
        if (o->desc.shape.rank + (scan ? 2 : 1) > CGE_MAX_RANK) {
            st = cge_meta_error(c, CGE_ERR_UNSUPPORTED, "output %d has too high a rank", k);
            break;
        }
        cge_tensor_desc *od = &c->outputs[k];
        od->dtype = o->desc.dtype;
        od->shape.rank = o->desc.shape.rank + (scan ? 2 : 1);
        od->shape.dims[0] = g.batch;
        if (scan)
            od->shape.dims[1] = g.len;
        for (int32_t d = 0; d < o->desc.shape.rank; d++)
            od->shape.dims[d + (scan ? 2 : 1)] = o->desc.shape.dims[d];
    }
    body_free(&r);
    return st;
}

static cge_status scan8_exec(cf_state *s, const cge_tensor_desc *d, const void *const *v)
{
    const cge_graph *body = graph_attr(s->attrs, "body");
    scan8_geo g;
    cge_status st = scan8_setup(s->op_type, s->node_name, s->attrs, s->ni, s->no, d, body, &g);
    if (st)
        return st;
    outer_binding ob = outer_of(s->attrs, s->ni, d, v);
    cge_tensor_desc bd[CF_MAX_ARGS];
    scan8_body_descs(&g, d, bd);
    body_iter bi;
    st = iter_open(&bi, s->op_type, s->node_name, body, s->dev, &ob, g.n_state);
    body_val *state = bi.state;
    for (int32_t k = g.n_state; !st && k < s->no; k++) {
        size_t bytes = cge_tensor_nbytes(s->outs[k].dtype, &s->outs[k].shape);
        if (bytes)
            memset(s->outs[k].data, 0, bytes);
    }
    const int64_t *lens = v[0] && d[0].dtype == CGE_I64 ? v[0] : NULL;
    for (int64_t b = 0; !st && b < g.batch; b++) {
        for (int32_t i = 0; !st && i < g.n_state; i++) {
            size_t bytes = cge_tensor_nbytes(bd[i].dtype, &bd[i].shape);
            st = iter_set_state(&bi, i, &bd[i], (const char *)v[1 + i] + (size_t)b * bytes);
        }
        int64_t len = lens ? lens[b] : g.len;
        if (!st && (len < 0 || len > g.len))
            st = cge_error(CGE_LAYER_KERNEL, CGE_ERR_SHAPE,
                           "sequence_lens[%lld] is %lld; the scan inputs hold %lld steps",
                           (long long)b, (long long)len, (long long)g.len);
        for (int64_t t = 0; !st && t < len; t++) {
            const void *bv[CF_MAX_ARGS];
            for (int32_t j = 0; j < g.n_scan_in; j++) {
                int32_t i = g.n_state + j;
                size_t bytes = cge_tensor_nbytes(bd[i].dtype, &bd[i].shape);
                int64_t idx = list_at(s->attrs, "directions", j, 0) ? len - 1 - t : t;
                bv[i] = (const char *)v[1 + i] + (size_t)(b * g.len + idx) * bytes;
            }
            body_run r;
            cge_tensor_desc sd[CF_MAX_ARGS];
            memcpy(sd, bd, sizeof sd[0] * (size_t)(g.n_state + g.n_scan_in));
            st = iter_step(&bi, t, g.n_state + g.n_scan_in, sd, bv, 0, 0, &r);
            for (int32_t k = 0; !st && k < g.n_scan_out; k++) {
                const body_val *sv = body_output(&r, g.n_state + k);
                cge_tensor *o = &s->outs[g.n_state + k];
                size_t step = o->shape.rank >= 2 && g.len > 0 && g.batch > 0
                                  ? cge_tensor_nbytes(o->dtype, &o->shape) /
                                        (size_t)(g.batch * g.len)
                                  : 0;
                if (sv->desc.dtype != o->dtype || sv->bytes != step) {
                    st = cge_error(CGE_LAYER_KERNEL, CGE_ERR_SHAPE,
                                   "scan output %d: step %lld's slice does not fit the output", k,
                                   (long long)t);
                    break;
                }
                if (step)
                    memcpy((char *)o->data + (size_t)(b * g.len + t) * step, sv->data, step);
            }
            body_free(&r);
        }
        for (int32_t i = 0; !st && i < g.n_state; i++) {
            size_t need = cge_tensor_nbytes(state[i].desc.dtype, &state[i].desc.shape);
            cge_tensor *o = &s->outs[i];
            if (state[i].desc.dtype != o->dtype ||
                (size_t)(b + 1) * need > cge_tensor_nbytes(o->dtype, &o->shape))
                st = cge_error(CGE_LAYER_KERNEL, CGE_ERR_SHAPE,
                               "state %d: the body changed its shape", i);
            else if (need)
                memcpy((char *)o->data + (size_t)b * need, state[i].data, need);
        }
    }
    iter_close(&bi);
    return st;
}

static cge_status scan_infer(cge_infer_ctx *c)
{
    const cge_graph *body = graph_attr(c->attrs, "body");
    if (!body)
        return cge_meta_error(c, CGE_ERR_INVALID_ARG, "body is required");
    if (cge_attrs_get_int(c->attrs, "batch_major", 0))
        return scan8_infer(c, body);
    scan_geo g;
    int32_t in_axes[CF_MAX_ARGS], out_axes[CF_MAX_ARGS];
    cge_status st = scan_setup(c->op_type, c->node_name, c->attrs, c->num_inputs, c->num_outputs,
                               c->inputs, &g, in_axes, out_axes, body);
    if (st)
        return st;
    const void *nulls[CF_MAX_ARGS] = {0};
    outer_binding ob = outer_of(c->attrs, c->num_inputs, c->inputs,
                                c->input_values ? c->input_values : nulls);
    cge_tensor_desc bd[CF_MAX_ARGS];
    const void *bv[CF_MAX_ARGS] = {0};
    for (int32_t i = 0; i < g.n_state; i++)
        bd[i] = c->inputs[i];
    for (int32_t j = 0; j < g.n_scan_in; j++) {
        bd[g.n_state + j] = c->inputs[g.n_state + j];
        bd[g.n_state + j].shape = drop_axis(&c->inputs[g.n_state + j].shape, in_axes[j]);
    }
    body_run r;
    st = body_exec(c->op_type, c->node_name, body, NULL, NULL, g.n_state + g.n_scan_in, bd, bv, &ob, &r);
    for (int32_t i = 0; !st && i < g.n_state; i++) {
        const body_val *o = body_output(&r, i);
        c->outputs[i].dtype = o->desc.dtype;
        c->outputs[i].shape = o->desc.shape;
    }
    for (int32_t k = 0; !st && k < g.n_scan_out; k++) {
        const body_val *o = body_output(&r, g.n_state + k);
        int32_t ax;
        if (o->desc.shape.rank >= CGE_MAX_RANK ||
            !cge_axis_normalize(out_axes[k], o->desc.shape.rank + 1, false, &ax)) {
            st = cge_meta_error(c, CGE_ERR_INVALID_ARG, "scan output %d: bad axis %d", k, out_axes[k]);
            break;
        }
        cge_tensor_desc *od = &c->outputs[g.n_state + k];
        od->dtype = o->desc.dtype;
        od->shape.rank = o->desc.shape.rank + 1;
        for (int32_t d = 0, j = 0; d < od->shape.rank; d++)
            od->shape.dims[d] = d == ax ? g.len : o->desc.shape.dims[j++];
    }
    body_free(&r);
    return st;
}

static void scan_host(void *user)
{
    cf_state *s = user;
    cge_tensor_desc d[CF_MAX_ARGS];
    const void *v[CF_MAX_ARGS];
    tensors_split(s, d, v);
    if (cge_attrs_get_int(s->attrs, "batch_major", 0)) {
        cge_status st8 = scan8_exec(s, d, v);
        if (st8)
            cf_fail(s, st8);
        return;
    }
    const cge_graph *body = graph_attr(s->attrs, "body");
    scan_geo g;
    int32_t in_axes[CF_MAX_ARGS], out_axes[CF_MAX_ARGS];
    cge_status st = scan_setup(s->op_type, s->node_name, s->attrs, s->ni, s->no, d, &g, in_axes,
                               out_axes, body);
    outer_binding ob = outer_of(s->attrs, s->ni, d, v);
    body_val slices[CF_MAX_ARGS];
    memset(slices, 0, sizeof slices);
    body_iter bi = {.n_state = 0};
    if (!st)
        st = iter_open(&bi, s->op_type, s->node_name, body, s->dev, &ob, g.n_state);
    body_val *state = bi.state;
    for (int32_t i = 0; !st && i < g.n_state; i++)
        st = iter_set_state(&bi, i, &d[i], v[i]);
    for (int32_t j = 0; !st && j < g.n_scan_in; j++) {
        body_val *sl = &slices[j];
        sl->desc = d[g.n_state + j];
        sl->desc.shape = drop_axis(&d[g.n_state + j].shape, in_axes[j]);
        sl->bytes = cge_tensor_nbytes(sl->desc.dtype, &sl->desc.shape);
        st = cge_mem_alloc(s->dev, sl->bytes, &sl->data);
        sl->owned = !st;
    }
    for (int64_t t = 0; !st && t < g.len; t++) {
        cge_tensor_desc bd[CF_MAX_ARGS];
        const void *bv[CF_MAX_ARGS];
        for (int32_t j = 0; j < g.n_scan_in; j++) {
            const cge_tensor *x = &s->ins[g.n_state + j];
            int64_t idx = list_at(s->attrs, "scan_input_directions", j, 0) ? g.len - 1 - t : t;
            int64_t outer;
            size_t inner;
            slice_geo(&x->shape, in_axes[j], cge_dtype_size(x->dtype), &outer, &inner);
            for (int64_t o = 0; o < outer; o++)
                memcpy((char *)slices[j].data + (size_t)o * inner,
                       (const char *)x->data + ((size_t)(o * g.len + idx)) * inner, inner);
            bd[g.n_state + j] = slices[j].desc;
            bv[g.n_state + j] = slices[j].data;
        }
        body_run r;
        st = iter_step(&bi, t, g.n_state + g.n_scan_in, bd, bv, 0, 0, &r);
        for (int32_t k = 0; !st && k < g.n_scan_out; k++) {
            const body_val *sv = body_output(&r, g.n_state + k);
            cge_tensor *o = &s->outs[g.n_state + k];
            int32_t ax = 0;
            cge_axis_normalize(out_axes[k], o->shape.rank, false, &ax);
            int64_t outer;
            size_t inner;
            slice_geo(&o->shape, ax, cge_dtype_size(o->dtype), &outer, &inner);
            if (sv->desc.dtype != o->dtype || (size_t)outer * inner != sv->bytes) {
                st = cge_error(CGE_LAYER_KERNEL, CGE_ERR_SHAPE,
                               "scan output %d: step %lld's slice does not fit the output", k,
                               (long long)t);
                break;
            }
            int64_t idx = list_at(s->attrs, "scan_output_directions", k, 0) ? g.len - 1 - t : t;
            for (int64_t q = 0; q < outer; q++)
                memcpy((char *)o->data + ((size_t)(q * g.len + idx)) * inner,
                       (const char *)sv->data + (size_t)q * inner, inner);
        }
        body_free(&r);
    }
    for (int32_t i = 0; !st && i < g.n_state; i++)
        st = put_output(s, i, &state[i]);
    for (int32_t i = 0; i < CF_MAX_ARGS; i++)
        if (slices[i].owned)
            cge_mem_free(s->dev, slices[i].data);
    iter_close(&bi);
    if (st)
        cf_fail(s, st);
}

static cge_status scan_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_inputs > CF_MAX_ARGS || ctx->num_outputs > CF_MAX_ARGS)
        return cge_kernel_error(ctx, CGE_ERR_UNSUPPORTED, "more than 64 inputs or outputs");
    return cf_launch(ctx, stream, scan_host);
}

/* ---- SequenceMap (opset 17) -------------------------------------------------------------- */

/* The body runs once per element: each sequence input gives its element i,
 * each tensor input itself; output k collects the body's output k of every
 * run into a sequence. */

/* Input j's descriptor and value for the body at element `i` (-1: only
 * descriptors, for meta; a sequence then gives its elements' shape). */
static void smap_bind(const cge_tensor_desc *d, const void *v, int64_t i, cge_tensor_desc *bd,
                      const void **bv)
{
    *bd = *d;
    *bv = v;
    if (d->type != CGE_TYPE_SEQUENCE)
        return;
    const cge_sequence *q = v;
    bd->type = CGE_TYPE_TENSOR;
    *bv = NULL;
    if (q && i >= 0 && i < q->count) {
        bd->shape = q->elems[i].shape;
        *bv = q->elems[i].data;
    } else if (q && q->count > 0) {
        bd->shape = q->elems[0].shape;
        for (int32_t k = 1; k < q->count; k++)
            merge_shape(&bd->shape, &q->elems[k].shape);
    }
    if (bd->shape.rank < 0)
        bd->shape = CGE_SCALAR;   /* elements of unknown rank: a run knows them */
}

static cge_status smap_infer(cge_infer_ctx *c)
{
    const cge_graph *body = graph_attr(c->attrs, "body");
    if (!body)
        return cge_meta_error(c, CGE_ERR_INVALID_ARG, "body is required");
    if (c->num_inputs > CF_MAX_ARGS)
        return cge_meta_error(c, CGE_ERR_UNSUPPORTED, "more than 64 inputs");
    int32_t n_in = c->num_inputs - num_outer(c->attrs, c->num_inputs);
    if (n_in < 1 || c->inputs[0].type != CGE_TYPE_SEQUENCE)
        return cge_meta_error(c, CGE_ERR_DTYPE, "input 0 must be a sequence");
    const void *nulls[CF_MAX_ARGS] = {0};
    const void *const *vals = c->input_values ? c->input_values : nulls;
    outer_binding ob = outer_of(c->attrs, c->num_inputs, c->inputs, vals);
    cge_tensor_desc bd[CF_MAX_ARGS];
    const void *bv[CF_MAX_ARGS];
    for (int32_t j = 0; j < n_in; j++) {
        if (c->inputs[j].type != CGE_TYPE_SEQUENCE && c->inputs[j].type != CGE_TYPE_TENSOR)
            return cge_meta_error(c, CGE_ERR_DTYPE, "input %d must be a sequence or a tensor", j);
        smap_bind(&c->inputs[j], vals[j], -1, &bd[j], &bv[j]);
        if (c->inputs[j].type == CGE_TYPE_SEQUENCE)
            bv[j] = NULL;   /* element values differ: meta sees none */
    }
    body_run r;
    cge_status st = body_exec(c->op_type, c->node_name, body, NULL, NULL, n_in, bd, bv, &ob, &r);
    if (!st && cge_graph_num_outputs(body) != c->num_outputs)
        st = cge_meta_error(c, CGE_ERR_INVALID_ARG, "the body has %d outputs; the node %d",
                            cge_graph_num_outputs(body), c->num_outputs);
    for (int32_t k = 0; !st && k < c->num_outputs; k++) {
        const body_val *o = body_output(&r, k);
        if (o->desc.type != CGE_TYPE_TENSOR) {
            st = cge_meta_error(c, CGE_ERR_UNSUPPORTED, "body output %d is not a tensor", k);
            break;
        }
        c->outputs[k].type = CGE_TYPE_SEQUENCE;
        c->outputs[k].dtype = o->desc.dtype;
        c->outputs[k].shape = o->desc.shape;
    }
    body_free(&r);
    return st;
}

static void smap_host(void *user)
{
    cf_state *s = user;
    cge_tensor_desc d[CF_MAX_ARGS];
    const void *v[CF_MAX_ARGS];
    tensors_split(s, d, v);
    outer_binding ob = outer_of(s->attrs, s->ni, d, v);
    int32_t n_in = s->ni - ob.n;
    const cge_graph *body = graph_attr(s->attrs, "body");
    int64_t len = ((const cge_sequence *)v[0])->count;
    cge_status st = CGE_OK;
    for (int32_t j = 1; j < n_in; j++)
        if (d[j].type == CGE_TYPE_SEQUENCE && ((const cge_sequence *)v[j])->count != len)
            st = cge_error(CGE_LAYER_KERNEL, CGE_ERR_SHAPE,
                           "sequence input %d has %d elements; input 0 has %lld", j,
                           ((const cge_sequence *)v[j])->count, (long long)len);
    for (int32_t k = 0; k < s->no; k++)
        cge__seq_reset(s->outs[k].data, CGE_TYPE_SEQUENCE, s->outs[k].dtype);
    body_iter bi = {.n_state = 0};
    if (!st)
        st = iter_open(&bi, s->op_type, s->node_name, body, s->dev, &ob, 0);
    for (int64_t i = 0; !st && i < len; i++) {
        cge_tensor_desc bd[CF_MAX_ARGS];
        const void *bv[CF_MAX_ARGS];
        for (int32_t j = 0; j < n_in; j++)
            smap_bind(&d[j], v[j], i, &bd[j], &bv[j]);
        body_run r;
        st = iter_step(&bi, i, n_in, bd, bv, 0, 0, &r);
        for (int32_t k = 0; !st && k < s->no; k++) {
            const body_val *o = body_output(&r, k);
            cge_sequence *q = s->outs[k].data;
            if (o->desc.type != CGE_TYPE_TENSOR || o->desc.dtype != q->dtype) {
                st = cge_error(CGE_LAYER_KERNEL, CGE_ERR_DTYPE,
                               "body output %d at element %lld is not a %s tensor", k,
                               (long long)i, cge_dtype_name(q->dtype));
                break;
            }
            st = cge__seq_insert_copy(q, q->count, &o->desc.shape, o->data);
        }
        body_free(&r);
    }
    iter_close(&bi);
    if (st)
        cf_fail(s, st);
}

static cge_status smap_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_inputs > CF_MAX_ARGS || ctx->num_outputs > CF_MAX_ARGS)
        return cge_kernel_error(ctx, CGE_ERR_UNSUPPORTED, "more than 64 inputs or outputs");
    for (int32_t k = 0; k < ctx->num_outputs; k++)
        if (!ctx->output_types || ctx->output_types[k] != CGE_TYPE_SEQUENCE)
            return cge_kernel_error(ctx, CGE_ERR_DTYPE, "output %d is not a sequence", k);
    if (!ctx->input_types || ctx->input_types[0] != CGE_TYPE_SEQUENCE)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "input 0 is not a sequence");
    return cf_launch(ctx, stream, smap_host);
}

/* ---- definitions ----------------------------------------------------------------------- */

static const cge_arg_def if_in[] = {
    {"cond", 0, CGE_DT(CGE_BOOL), "one-element condition"},
    {"outer", CGE_ARG_OPTIONAL | CGE_ARG_VARIADIC | CGE_ARG_NON_TENSOR, 0,
     "outer-scope values the branches read"}};
static const cge_arg_def loop_in[] = {
    {"M", CGE_ARG_OPTIONAL, CGE_DT(CGE_I64), "trip count"},
    {"cond", CGE_ARG_OPTIONAL, CGE_DT(CGE_BOOL), "initial condition"},
    {"v_initial", CGE_ARG_OPTIONAL | CGE_ARG_VARIADIC | CGE_ARG_NON_TENSOR, 0,
     "loop-carried values, then outer-scope values (outer_names)"}};
static const cge_arg_def scan_in[] = {
    /* optional: Scan-8's first input, sequence_lens, may be absent (meta
     * checks the counts) */
    {"initial_state_and_scan_inputs", CGE_ARG_OPTIONAL | CGE_ARG_VARIADIC, 0,
     "(Scan-8: sequence_lens,) states, scan inputs, then outer-scope values (outer_names)"}};
static const cge_arg_def smap_in[] = {
    {"input_sequence", CGE_ARG_NON_TENSOR, 0, "the sequence mapped"},
    {"additional_inputs", CGE_ARG_OPTIONAL | CGE_ARG_VARIADIC | CGE_ARG_NON_TENSOR, 0,
     "more sequences (element by element) or tensors, then outer-scope values (outer_names)"}};
static const cge_arg_def any_outs[] = {
    {"outputs", CGE_ARG_OPTIONAL | CGE_ARG_VARIADIC, 0, "results"}};

static const cge_attr_def if_attrs[] = {
    {"then_branch", CGE_ATTR_GRAPH, true, 0, 0.0f, NULL, "graph run when cond is true"},
    {"else_branch", CGE_ATTR_GRAPH, true, 0, 0.0f, NULL, "graph run when cond is false"},
    {"outer_names", CGE_ATTR_STRINGS, false, 0, 0.0f, NULL, "names the branches read outer values by"}};
static const cge_attr_def loop_attrs[] = {
    {"body", CGE_ATTR_GRAPH, true, 0, 0.0f, NULL, "(iter, cond, states) -> (cond, states, scans)"},
    {"outer_names", CGE_ATTR_STRINGS, false, 0, 0.0f, NULL, "names the body reads outer values by"}};
static const cge_attr_def scan_attrs[] = {
    {"body", CGE_ATTR_GRAPH, true, 0, 0.0f, NULL, "(states, slices) -> (states, scan slices)"},
    {"num_scan_inputs", CGE_ATTR_INT, true, 0, 0.0f, NULL, "how many inputs are scanned"},
    {"scan_input_axes", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "axis per scan input (0)"},
    {"scan_input_directions", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "1: reverse (0)"},
    {"scan_output_axes", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "axis per scan output (0)"},
    {"scan_output_directions", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "1: reverse (0)"},
    {"batch_major", CGE_ATTR_INT, false, 0, 0.0f, NULL,
     "Scan-8: input 0 is sequence_lens, inputs and outputs lead with a batch axis"},
    {"directions", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "Scan-8: 1: reverse scan input (0)"},
    {"outer_names", CGE_ATTR_STRINGS, false, 0, 0.0f, NULL, "names the body reads outer values by"}};

#define CF_KERNEL(LAUNCH)                                                                  \
    {                                                                                      \
        .engine = "cpu", .dtypes = 0, .launch = LAUNCH, .prepare = cf_prepare,             \
        .release = cf_release, .inplace_input = -1                                         \
    }
static const cge_kernel_def k_if[] = {CF_KERNEL(if_launch)};
static const cge_kernel_def k_loop[] = {CF_KERNEL(loop_launch)};
static const cge_kernel_def k_scan[] = {CF_KERNEL(scan_launch)};
static const cge_kernel_def k_smap[] = {CF_KERNEL(smap_launch)};
static const cge_attr_def smap_attrs[] = {
    {"body", CGE_ATTR_GRAPH, true, 0, 0.0f, NULL, "(elements, tensors) -> tensors"},
    {"outer_names", CGE_ATTR_STRINGS, false, 0, 0.0f, NULL, "names the body reads outer values by"}};

static const cge_op_def control_flow_ops[] = {
    {.name = "If", .domain = CGE_DOMAIN_DEFAULT, .since_version = 16, .inputs = if_in,
     .num_inputs = 2, .outputs = any_outs, .num_outputs = 1, .attrs = if_attrs, .num_attrs = 3,
     .infer = if_infer, .kernels = k_if, .num_kernels = 1,
     .doc = "Runs then_branch or else_branch by a one-element condition."},
    {.name = "Loop", .domain = CGE_DOMAIN_DEFAULT, .since_version = 16, .inputs = loop_in,
     .num_inputs = 3, .outputs = any_outs, .num_outputs = 1, .attrs = loop_attrs, .num_attrs = 2,
     .infer = loop_infer, .kernels = k_loop, .num_kernels = 1,
     .doc = "Runs body while i < M and cond; carries states, stacks scan outputs."},
    {.name = "Scan", .domain = CGE_DOMAIN_DEFAULT, .since_version = 16, .inputs = scan_in,
     .num_inputs = 1, .outputs = any_outs, .num_outputs = 1, .attrs = scan_attrs, .num_attrs = 9,
     .infer = scan_infer, .kernels = k_scan, .num_kernels = 1,
     .doc = "Runs body once per slice of the scan inputs, carrying states."},
    {.name = "SequenceMap", .domain = CGE_DOMAIN_DEFAULT, .since_version = 17, .inputs = smap_in,
     .num_inputs = 2, .outputs = any_outs, .num_outputs = 1, .attrs = smap_attrs, .num_attrs = 2,
     .infer = smap_infer, .kernels = k_smap, .num_kernels = 1,
     .doc = "Runs body once per element of the input sequences; its outputs form sequences."},
};

const cge_op_def *cge__ops_control_flow(int32_t *count)
{
    *count = (int32_t)(sizeof control_flow_ops / sizeof control_flow_ops[0]);
    return control_flow_ops;
}
