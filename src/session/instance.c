/* Instances: the executable form of a graph for one input signature, made by
 * the compiler or from a prebuilt plan, and their runs (planned, node by node,
 * EAGER, profiled, captured). */
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/hash.h"
#include "base/shared_block.h"
#include "base/sequence.h"
#include "base/strmap.h"
#include "cge/compiler.h"
#include "cge/op.h"
#include "ir/constant_block.h"
#include "ops/kernel_cache.h"
#include "runtime/warm_memory.h"
#include "session/instance.h"

/* The compiler turns the graph into a plan (cge/compiler.h): one arena and one
 * constant blob, kernel contexts bound once, so that a run only copies inputs,
 * launches the plan's steps and copies outputs. When some shape depends on
 * run-time values, the compiler's prepared graph runs node by node with a
 * buffer per value, inferring as it goes; EAGER runs (the debugging mode) do
 * the same over the unoptimised graph, their tables made on demand. A prebuilt
 * plan (a loaded model file) skips the compile: its plan and constants belong
 * to the caller, and its EAGER runs are the plan's steps one at a time.
 * Profiled runs time every step and copy, synchronizing after each, so that
 * host dispatch and kernel time can be told apart. */

/* A kernel tensor in a bindable value's memory, `delta` bytes into it. */
struct value_ref {
    cge_tensor *t;
    size_t delta;
};

typedef struct value {
    const char *name;
    cge_tensor_desc desc;
    void *data;             /* device buffer (eager) */
    size_t bytes;           /* allocated bytes */
    bool is_const;
    bool borrowed;          /* eager: data is the graph constant's own bytes (host device) */
    bool released;          /* eager: a constant freed once packed (data dangles) */
    bool retired;           /* eager: freed once packed, its address kept (retire_constant) */
    void *pdata;            /* where the plan keeps it (arena or constants), or NULL */
    /* Binding (plan inputs and outputs): the kernels' tensors that name this
     * value, the address they hold now (pdata or a caller's buffer), whether
     * a caller's buffer may stand in for it, and whether this run's does. */
    struct value_ref *refs;
    int32_t num_refs, refs_cap;
    void *cur;
    bool bindable, bound;
    /* A graph input's: the table index of the graph output that may be
     * bound to the same buffer as this input (share_output), -1 if none;
     * with one, `own` is a buffer of the session's that stands in for both
     * when the caller binds neither (made at the first such run), and
     * in_own says this run uses it. */
    int32_t share;
    void *own;
    size_t own_bytes;
    bool in_own;
    /* binding_table's per-layout facts (a delta rebind keeps them): its plan
     * value, whether it is read as a graph input or output once only and
     * never written in place (apart), and for an input the last step
     * reading its memory (share_output's candidate; -1 none, -2 readers on
     * several streams). */
    int32_t pv;
    bool apart;
    int32_t last_reader;
} value;

/* Values by name: a graph's, for eager runs, or a plan's inputs and outputs. */
typedef struct value_table {
    value *values;
    int32_t num, cap;
    cge__strmap index;
    /* Value of each graph input / output position, found once by name so
     * that runs index instead of looking names up. */
    int32_t *in_idx, *out_idx;
} value_table;

/* One step of the plan with its kernel context bound to arena addresses. */
typedef struct plan_exec {
    const cge_plan_step *step;
    cge_tensor *ins, *outs;
    cge_kernel_ctx ctx;
    uint64_t packed_inputs; /* inputs its prepare packed (cge__kernel_input_packed) */
    uint64_t packed_any;    /* ... for any shape (cge__kernel_input_packed_any_shape) */
    bool reads_host;        /* an input is a host value (the shape program's) */
} plan_exec;

typedef struct node_exec {
    const cge_node *node;
    const cge_op_def *def;
    const cge_kernel_def *kernel;
    int32_t *in_idx;        /* value index per input, -1 if absent */
    int32_t *out_idx;
    cge_tensor *ins, *outs;
    cge_value_type *in_types, *out_types;  /* what each holds (sequences, optionals) */
    cge_kernel_ctx ctx;
    /* eager: the values this node reads last (not constants, inputs or
     * outputs): their buffers go back to the pool once it has run */
    int32_t *release;
    int32_t num_release;
    /* fixed: every input and output is a tensor whose shape the compiled
     * graph knows, so each run binds the same shapes: the node is never
     * inferred and is prepared once (at its first run), as a plan step is.
     * args: it reads small computed integer tensors (shape-like arguments a
     * prepare may read); their bytes' hash when prepared, a new one prepares
     * it again. */
    bool fixed, args, prepared;
    uint64_t args_hash;
    uint64_t counted;       /* constant inputs counted as packed (release_packed) */
    /* A view (Reshape, Flatten, Squeeze, Unsqueeze, Identity) whose output
     * is its input's bytes: the value whose buffer it shares (its input's
     * root), or -1. Such a node launches nothing. */
    int32_t alias_root;
} node_exec;

/* Buffers of eager values that are no longer read in this run, for later
 * values to take: a run holds about its largest live set, not every
 * intermediate at once, and a steady state allocates nothing. */
typedef struct pool_buf {
    void *data;
    size_t bytes;
} pool_buf;

/* A graph run node by node, a buffer per value; built only for eager runs. */
typedef struct eager_exec {
    const cge_graph *g;
    value_table vals;
    node_exec *nodes;
    int32_t num_nodes;
    bool built;
    bool ready;             /* constants and inputs have buffers */
    pool_buf *pool;
    int32_t num_pool, cap_pool;
    /* Weights freed once packed (a releasing instance): per value, how many
     * nodes read it and how many of them have packed it; -1 for one that
     * stays (a graph output, a reader that did not pack it). `again`: a
     * reader may prepare again (its shapes follow values), so every such
     * reader must have promised the same packed copy at any shape, and the
     * bytes go with their address kept (`retired`, freed at the end). */
    int32_t *readers, *packed;
    uint8_t *again;
    struct retired_block {
        void *data;
        size_t bytes;
    } *retired;
    int32_t num_retired;
    void *ws;               /* the nodes' workspace (the largest one's size) */
    size_t ws_bytes;
    /* Kernel prepares and buffer allocations of eager runs (tests: a run at
     * a repeated shape does neither for fixed nodes). */
    int64_t prepares, allocs;
} eager_exec;

struct cge__instance {
    cge_device *dev;
    const cge_graph *src;   /* the session's graph (EAGER runs of a plan instance) */
    cge_shape *input_shapes;
    int32_t num_inputs;
    bool eager;             /* some shape is known only at run time: no plan steps */
    bool last_eager;        /* the last run was eager: output shapes are eager's */
    cge_plan *plan;         /* compiled here (owned) or borrowed (prebuilt) */
    const cge_graph *pg;    /* the plan's graph */
    value_table io;         /* the plan's inputs and outputs */
    eager_exec ex;
    void *arena, *consts;
    plan_exec *steps;
    cge_tensor *operands;   /* every step's ins and outs, one block */
    cge_stream **streams;   /* the plan's extra streams (1 .. n-1) */
    cge_event **events;     /* the plan's events, then fork and joins */
    int32_t num_streams, num_events;
    cge_event *done;        /* the last run's end, ordering runs across streams */
    cge_ri *ri;             /* the plan's launches, captured for REPLAY */
    bool prebuilt;          /* plan, graph and constants are borrowed */
    bool eager_by_steps;    /* cge__instance_eager_by_steps */
    cge__retire_request *retire;   /* while binding only (cge__instance_create_planned) */
    bool steps_only;        /* a loaded model's signature: its graph has no
                               constants, so EAGER runs are the plan's steps */
    bool consts_borrowed;   /* consts points at the caller's host memory */
    bool consts_in_graph;   /* constants are read in place from the plan's graph */
    cge_kernel_cache *shared; /* kernels' prepared constant data, the session graph's */
    bool arena_borrowed;    /* the arena is the session graph's, shared */
    cge_event *after;       /* another instance's `done` the next run waits for */
    bool step_sync;         /* synchronize after every step (eager on a plan) */
    cge_stream *inline_stream; /* immediate: synchronous one-stream plan runs */
    /* cge__instance_create_releasing: the graph the plan was compiled from,
     * whose constants go with the plan's once packed; and their bytes. */
    cge_graph *release_src;
    size_t released_bytes;
    /* binding_table's index: per plan value its group's owner; the values
     * and the kernels' tensors of each group (CSR by owner). */
    int32_t *root, *grp_start, *grp_vals, *ref_start, *ref_v;
    cge_tensor **ref_t;
    /* A delta rebind's index: the steps reading or writing each plan value
     * (CSR), and per step and value the epoch that marked it. */
    int32_t *vs_start, *vs_steps;
    uint32_t *smark, *vmark, epoch;
    cge_profile_fn prof;    /* set for the duration of a profiled run */
    void *prof_user;
};

double cge_profile_clock_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static cge_status oom(void)
{
    return cge_error(CGE_LAYER_SESSION, CGE_ERR_NO_MEMORY, "session: out of memory");
}

static cge_status add_value(value_table *t, const cge_graph *g, const char *name)
{
    if (cge__strmap_get(&t->index, name) >= 0)
        return CGE_OK;
    if (t->num == t->cap) {
        int32_t nc = t->cap ? t->cap * 2 : 64;
        value *v = realloc(t->values, sizeof *v * (size_t)nc);
        if (!v)
            return oom();
        t->values = v;
        t->cap = nc;
    }
    value *v = &t->values[t->num];
    memset(v, 0, sizeof *v);
    v->name = name;
    v->share = -1;
    cge_status st = cge_graph_get_desc(g, name, &v->desc);
    if (st)
        return st;
    v->desc.name = name;
    v->is_const = cge_graph_constant(g, name) != NULL;
    if (!cge__strmap_put(&t->index, name, t->num))
        return oom();
    t->num++;
    return CGE_OK;
}

/* The value of graph input / output `pos` (graphs keep their inputs' and
 * outputs' names through the compiler, so one position serves both graphs). */
static value *input_value(value_table *t, int32_t pos) { return &t->values[t->in_idx[pos]]; }
static value *output_value(value_table *t, int32_t pos) { return &t->values[t->out_idx[pos]]; }

/* The values of `g`'s inputs and outputs by position (all in the table). */
static cge_status table_index_io(value_table *t, const cge_graph *g)
{
    int32_t ni = cge_graph_num_inputs(g), no = cge_graph_num_outputs(g);
    t->in_idx = malloc(sizeof(int32_t) * ((size_t)ni + 1));
    t->out_idx = malloc(sizeof(int32_t) * ((size_t)no + 1));
    if (!t->in_idx || !t->out_idx)
        return oom();
    for (int32_t i = 0; i < ni; i++)
        t->in_idx[i] = cge__strmap_get(&t->index, cge_graph_input(g, i));
    for (int32_t i = 0; i < no; i++)
        t->out_idx[i] = cge__strmap_get(&t->index, cge_graph_output(g, i));
    return CGE_OK;
}

static void table_free(cge_device *dev, value_table *t)
{
    for (int32_t i = 0; i < t->num; i++) {
        if (!t->values[i].borrowed) {
            cge__value_release(t->values[i].desc.type, t->values[i].data);
            cge_mem_free(dev, t->values[i].data);
        }
        cge_mem_free(dev, t->values[i].own);
        free(t->values[i].refs);
    }
    free(t->values);
    free(t->in_idx);
    free(t->out_idx);
    cge__strmap_free(&t->index);
}

/* A sequence or optional value's buffer holds one cge_sequence, zeroed when
 * made (an empty one) and kept across runs with its element buffers, so
 * that a steady state allocates nothing for it. */
static cge_status alloc_value(cge__instance *inst, value *v)
{
    size_t need = cge__value_nbytes(v->desc.type, v->desc.dtype, &v->desc.shape);
    if (v->data && v->bytes >= need)
        return CGE_OK;
    cge__value_release(v->desc.type, v->data);
    cge_mem_free(inst->dev, v->data);
    v->data = NULL;
    v->bytes = 0;
    cge_status st = cge_mem_alloc(inst->dev, need, &v->data);
    if (st)
        return st;
    inst->ex.allocs++;
    if (v->desc.type != CGE_TYPE_TENSOR)
        memset(v->data, 0, need);
    v->bytes = need;
    return CGE_OK;
}

/* ---- eager: node by node ---------------------------------------------------- */

static cge_dtype kernel_dtype(const eager_exec *ex, const node_exec *ne)
{
    for (int32_t i = 0; i < cge_node_num_inputs(ne->node); i++)
        if (ne->in_idx[i] >= 0)
            return ex->vals.values[ne->in_idx[i]].desc.dtype;
    return CGE_DTYPE_UNDEFINED;
}

/* Points the node's kernel context at the current value buffers and shapes. */
static void bind_node(eager_exec *ex, node_exec *ne)
{
    int32_t ni = cge_node_num_inputs(ne->node), no = cge_node_num_outputs(ne->node);
    for (int32_t i = 0; i < ni; i++) {
        memset(&ne->ins[i], 0, sizeof ne->ins[i]);
        if (ne->in_idx[i] < 0)
            continue;
        value *v = &ex->vals.values[ne->in_idx[i]];
        ne->ins[i] = (cge_tensor){.name = v->name, .dtype = v->desc.dtype, .shape = v->desc.shape,
                                  .data = v->data, .bytes = v->bytes};
        ne->in_types[i] = v->desc.type;
    }
    for (int32_t i = 0; i < no; i++) {
        value *v = &ex->vals.values[ne->out_idx[i]];
        ne->outs[i] = (cge_tensor){.name = v->name, .dtype = v->desc.dtype, .shape = v->desc.shape,
                                   .data = v->data, .bytes = v->bytes};
        ne->out_types[i] = v->desc.type;
    }
}

static cge_status engine_error(const node_exec *ne)
{
    char msg[900];
    const char *e = cge_last_error();
    const char *body = strstr(e, "] ");
    snprintf(msg, sizeof msg, "%s", body ? body + 2 : e);
    return cge_error(CGE_LAYER_ENGINE, CGE_ERR_UNSUPPORTED, "node '%s' (%s): %s",
                     cge_node_name(ne->node), cge_node_op_type(ne->node), msg);
}

/* The hash of a node's small computed integer inputs (shape-like
 * arguments: a prepare may read them, as a plan step reads host values). */
static uint64_t args_hash(const eager_exec *ex, const node_exec *ne)
{
    uint64_t h = CGE__FNV1A_SEED;
    for (int32_t i = 0; i < cge_node_num_inputs(ne->node); i++) {
        const value *v = ne->in_idx[i] >= 0 ? &ex->vals.values[ne->in_idx[i]] : NULL;
        if (!v || v->is_const || v->desc.type != CGE_TYPE_TENSOR ||
            !cge_dtype_is_int(v->desc.dtype) || cge_shape_numel(&v->desc.shape) > 64 || !v->data)
            continue;
        h = cge__fnv1a(h, v->data, cge_tensor_nbytes(v->desc.dtype, &v->desc.shape));
    }
    return h;
}

/* Constant `name` of the compiled graph (whose bytes are at `data`, when
 * given) goes from it and from the session's graph, and from the kernel
 * cache's sources: packed copies are all that stays of it. */
static bool release_constant(cge__instance *inst, const char *name, const void *data)
{
    const cge_tensor *t = cge_graph_constant(inst->pg, name);
    if (!t || !t->data || (data && t->data != data))
        return false;
    data = t->data;
    size_t bytes = t->bytes;
    cge__kernel_cache_forget(inst->shared, data, bytes);
    cge__graph_release_constant_data(inst->release_src, name, data);
    if (!cge__graph_release_constant_data((cge_graph *)inst->pg, name, data))
        return false;
    inst->released_bytes += bytes;
    return true;
}

/* A constant read by a node that prepares again: its pages go, but the
 * block stays mapped (held here, unmapped when the instance goes), so that
 * its address, the key of the packed copy in the kernel cache, is never
 * reused; a prepare finds the packed copy by it without reading a byte.
 * false (nothing done) for a block from the heap: too small to matter. */
static bool retire_constant(cge__instance *inst, eager_exec *ex, value *v)
{
    const cge_tensor *t = cge_graph_constant(inst->pg, v->name);
    if (!t || !t->data || t->data != v->data || !cge__block_is_mapped(v->data) || !inst->shared)
        return false;
    struct retired_block *r = realloc(ex->retired, sizeof *r * ((size_t)ex->num_retired + 1));
    if (!r)
        return false;
    ex->retired = r;
    void *data = cge__block_ref(v->data);
    size_t bytes = t->bytes;
    if (cge__kernel_cache_retire(inst->shared, data, bytes)) {
        cge_clear_error();
        cge__block_unref(data);
        return false;
    }
    ex->retired[ex->num_retired++] = (struct retired_block){data, bytes};
    cge__graph_release_constant_data(inst->release_src, v->name, data);
    cge__graph_release_constant_data((cge_graph *)inst->pg, v->name, data);
    /* the pages stay where another holder (the caller's graph) shares them */
    if (cge__block_discard_pages(data))
        inst->released_bytes += bytes;
    return true;
}

/* After a node's prepare: constants that every reader has packed go once
 * the last one has (a releasing instance, as bind_plan does for plans):
 * from the compiled graph and the session's, so that only the packed copy
 * stays. `bits`: the inputs this prepare packed; `any`: those whose packed
 * copy it promised for any shape (needed from a node that prepares again). */
static void release_packed(cge__instance *inst, eager_exec *ex, node_exec *ne, uint64_t bits,
                           uint64_t any)
{
    bool once = ne->fixed && !ne->args;
    for (int32_t i = 0; i < cge_node_num_inputs(ne->node) && i < 64; i++) {
        int32_t vi = ne->in_idx[i];
        uint64_t bit = (uint64_t)1 << i;
        if (vi < 0 || ex->readers[vi] <= 0 || (ne->counted & bit) || !(bits & bit))
            continue;
        if (!once && !(any & bit)) {
            ex->readers[vi] = -1;   /* a later prepare may read the bytes */
            continue;
        }
        ne->counted |= bit;
        if (++ex->packed[vi] != ex->readers[vi])
            continue;
        value *v = &ex->vals.values[vi];
        if (!v->is_const || !v->borrowed)
            continue;
        if (ex->again[vi])
            v->retired = retire_constant(inst, ex, v);
        else
            v->released = release_constant(inst, v->name, v->data);
    }
}

/* Kernel choice, workspace and per-node state: at every run, or for a fixed
 * node at its first (and when its shape-like arguments change). */
static cge_status prepare_node(cge__instance *inst, eager_exec *ex, node_exec *ne,
                               cge_stream *stream)
{
    if (!ne->kernel) {
        ne->kernel = cge_op_find_kernel(ne->def, "cpu", kernel_dtype(ex, ne));
        if (!ne->kernel)
            return engine_error(ne);
    }
    bind_node(ex, ne);
    uint64_t h = ne->args ? args_hash(ex, ne) : 0;
    if (ne->fixed && ne->prepared && h == ne->args_hash)
        return CGE_OK;
    ne->prepared = false;
    uint64_t retired_in = 0;
    for (int32_t i = 0; i < cge_node_num_inputs(ne->node); i++)
        if (ne->in_idx[i] >= 0 && ex->vals.values[ne->in_idx[i]].retired && i < 64)
            retired_in |= (uint64_t)1 << i;
    for (int32_t i = 0; i < cge_node_num_inputs(ne->node); i++)
        if (ne->in_idx[i] >= 0 && ex->vals.values[ne->in_idx[i]].released)
            return cge_error(CGE_LAYER_SESSION, CGE_ERR_INTERNAL,
                             "node '%s' (%s): prepared again, but its input '%s' was freed once "
                             "packed",
                             cge_node_name(ne->node), cge_node_op_type(ne->node),
                             ex->vals.values[ne->in_idx[i]].name);
    ex->prepares++;
    if (ne->kernel->release && ne->ctx.state) {
        ne->kernel->release(ne->ctx.state);
        ne->ctx.state = NULL;
    }
    cge_status st = CGE_OK;
    if (ne->kernel->workspace_size) {
        /* Nodes run one after another: one workspace serves them all (a
         * plan's workspaces share its arena so). */
        size_t ws = ne->kernel->workspace_size(&ne->ctx);
        if (ws > ex->ws_bytes) {
            st = cge_stream_synchronize(stream);  /* nodes launched before may use it */
            if (!st) {
                cge_mem_free(inst->dev, ex->ws);
                ex->ws = NULL;
                ex->ws_bytes = 0;
                st = cge_mem_alloc(inst->dev, ws, &ex->ws);
            }
            if (!st) {
                ex->ws_bytes = ws;
                ex->allocs++;
            }
        }
        ne->ctx.workspace_size = st ? 0 : ws;
    }
    ne->ctx.workspace = ne->ctx.workspace_size ? ex->ws : NULL;
    uint64_t packed = 0, any = 0;
    if (!st && ne->kernel->prepare) {
        cge__kernel_watch_packed(ex->readers || retired_in ? &packed : NULL);
        cge__kernel_watch_packed_any_shape(ex->readers || retired_in ? &any : NULL);
        st = ne->kernel->prepare(&ne->ctx, &ne->ctx.state);
        cge__kernel_watch_packed(NULL);
        cge__kernel_watch_packed_any_shape(NULL);
    }
    if (!st && (retired_in & ~(packed & any)))
        /* its launch would read the missing bytes: refused, not run */
        st = cge_error(CGE_LAYER_SESSION, CGE_ERR_INTERNAL,
                       "node '%s' (%s): prepared again without the packed copy of an input "
                       "freed once packed",
                       cge_node_name(ne->node), cge_node_op_type(ne->node));
    if (!st) {
        ne->prepared = true;
        ne->args_hash = h;
    }
    if (!st && packed && ex->readers)
        release_packed(inst, ex, ne, packed, any);
    return st;
}

static void eager_free(cge__instance *inst, eager_exec *ex)
{
    cge_device *dev = inst->dev;
    for (int32_t k = 0; k < ex->num_nodes; k++) {
        node_exec *ne = &ex->nodes[k];
        if (ne->kernel && ne->kernel->release && ne->ctx.state)
            ne->kernel->release(ne->ctx.state);
        free(ne->in_idx);
        free(ne->out_idx);
        free(ne->ins);
        free(ne->outs);
        free(ne->in_types);
        free(ne->out_types);
        free(ne->release);
    }
    for (int32_t i = 0; i < ex->num_pool; i++)
        cge_mem_free(dev, ex->pool[i].data);
    free(ex->pool);
    free(ex->nodes);
    free(ex->readers);
    free(ex->packed);
    free(ex->again);
    /* the packed copies' lookups go before the addresses they are keyed by */
    for (int32_t i = 0; i < ex->num_retired; i++) {
        cge__kernel_cache_forget(inst->shared, ex->retired[i].data, ex->retired[i].bytes);
        cge__block_unref(ex->retired[i].data);
    }
    free(ex->retired);
    cge_mem_free(dev, ex->ws);
    table_free(dev, &ex->vals);
}

/* Whether node `ne` only renames its input's bytes (a view of one tensor
 * into one tensor of the same dtype: the compiler's view operators). */
static bool is_view_node(const eager_exec *ex, const node_exec *ne)
{
    if (!cge_node_is_view(ne->node) || cge_node_num_outputs(ne->node) != 1 ||
        cge_node_num_inputs(ne->node) < 1 || ne->in_idx[0] < 0)
        return false;
    const value *in = &ex->vals.values[ne->in_idx[0]], *out = &ex->vals.values[ne->out_idx[0]];
    return in->desc.type == CGE_TYPE_TENSOR && out->desc.type == CGE_TYPE_TENSOR &&
           cge_dtype_valid(in->desc.dtype) && in->desc.dtype == out->desc.dtype;
}

/* Each intermediate's last reader (its producer if nothing reads it): the
 * node after which its buffer returns to the pool. */
static cge_status eager_lifetimes(eager_exec *ex, const cge_graph *g)
{
    int32_t nv = ex->vals.num;
    int32_t *last = malloc(sizeof(int32_t) * ((size_t)nv + 1));
    int32_t *cnt = calloc((size_t)ex->num_nodes + 1, sizeof(int32_t));
    bool *keep = calloc((size_t)nv + 1, sizeof(bool));
    int32_t *root = malloc(sizeof(int32_t) * ((size_t)nv + 1));
    if (!last || !cnt || !keep || !root) {
        free(last);
        free(cnt);
        free(keep);
        free(root);
        return oom();
    }
    for (int32_t i = 0; i < nv; i++) {
        last[i] = -1;
        keep[i] = ex->vals.values[i].is_const;
    }
    for (int32_t i = 0; i < cge_graph_num_inputs(g); i++)
        keep[ex->vals.in_idx[i]] = true;
    for (int32_t i = 0; i < cge_graph_num_outputs(g); i++)
        if (ex->vals.out_idx[i] >= 0)
            keep[ex->vals.out_idx[i]] = true;
    /* Views share their input's buffer (not a constant's: constants may go
     * once packed; not for a graph output, whose buffer is its own): the
     * shared buffer lives until the last reader of any of them, and the
     * view's own value is never released. */
    for (int32_t i = 0; i < nv; i++)
        root[i] = i;
    for (int32_t k = 0; k < ex->num_nodes; k++) {
        node_exec *ne = &ex->nodes[k];
        ne->alias_root = -1;
        if (!is_view_node(ex, ne))
            continue;
        int32_t in = ne->in_idx[0], out = ne->out_idx[0];
        if (ex->vals.values[root[in]].is_const || keep[out])
            continue;
        ne->alias_root = root[in];
        root[out] = root[in];
        keep[out] = true;
    }
    for (int32_t k = 0; k < ex->num_nodes; k++) {
        const node_exec *ne = &ex->nodes[k];
        for (int32_t i = 0; i < cge_node_num_outputs(ne->node); i++)
            last[root[ne->out_idx[i]]] = k;
        for (int32_t i = 0; i < cge_node_num_inputs(ne->node); i++)
            if (ne->in_idx[i] >= 0)
                last[root[ne->in_idx[i]]] = k;
    }
    for (int32_t i = 0; i < nv; i++)
        if (!keep[i] && last[i] >= 0)
            cnt[last[i]]++;
    cge_status st = CGE_OK;
    for (int32_t k = 0; !st && k < ex->num_nodes; k++)
        if (cnt[k] && !(ex->nodes[k].release = malloc(sizeof(int32_t) * (size_t)cnt[k])))
            st = oom();
    for (int32_t i = 0; !st && i < nv; i++)
        if (!keep[i] && last[i] >= 0) {
            node_exec *ne = &ex->nodes[last[i]];
            ne->release[ne->num_release++] = i;
        }
    free(last);
    free(cnt);
    free(keep);
    free(root);
    return st;
}

/* A value's buffer back to the pool (tensors only: a sequence's buffer
 * holds its elements across runs). */
static cge_status pool_put(eager_exec *ex, value *v)
{
    if (!v->data || v->desc.type != CGE_TYPE_TENSOR || v->borrowed)
        return CGE_OK;
    if (ex->num_pool == ex->cap_pool) {
        /* grown by doubling: a steady state takes and puts without realloc */
        int32_t cap = ex->cap_pool ? 2 * ex->cap_pool : 16;
        pool_buf *p = realloc(ex->pool, sizeof *p * (size_t)cap);
        if (!p)
            return oom();
        ex->pool = p;
        ex->cap_pool = cap;
    }
    ex->pool[ex->num_pool++] = (pool_buf){v->data, v->bytes};
    v->data = NULL;
    v->bytes = 0;
    return CGE_OK;
}

/* The smallest pooled buffer that holds `need` bytes and is not much larger
 * (a small value should not take a buffer a large one needs next). */
static void pool_take(eager_exec *ex, value *v, size_t need)
{
    int32_t best = -1;
    for (int32_t i = 0; i < ex->num_pool; i++)
        if (ex->pool[i].bytes >= need && ex->pool[i].bytes <= 4 * need + 65536 &&
            (best < 0 || ex->pool[i].bytes < ex->pool[best].bytes))
            best = i;
    if (best < 0)
        return;
    v->data = ex->pool[best].data;
    v->bytes = ex->pool[best].bytes;
    ex->pool[best] = ex->pool[--ex->num_pool];
}

/* Which nodes of the compiled graph are fixed (its descriptors are what
 * inference found with this instance's input shapes: a static one is the
 * same at every run), and, for a releasing instance on the CPU device
 * (constants read in place), which constants may go once packed. */
static cge_status eager_fixed(cge__instance *inst, eager_exec *ex)
{
    const value *vals = ex->vals.values;
    for (int32_t k = 0; k < ex->num_nodes; k++) {
        node_exec *ne = &ex->nodes[k];
        bool fixed = true;
        for (int32_t i = 0; i < cge_node_num_outputs(ne->node); i++) {
            const value *v = &vals[ne->out_idx[i]];
            fixed = fixed && v->desc.type == CGE_TYPE_TENSOR && cge_shape_is_static(&v->desc.shape);
        }
        for (int32_t i = 0; i < cge_node_num_inputs(ne->node); i++) {
            if (ne->in_idx[i] < 0)
                continue;
            const value *v = &vals[ne->in_idx[i]];
            fixed = fixed && v->desc.type == CGE_TYPE_TENSOR && cge_shape_is_static(&v->desc.shape);
            ne->args = ne->args || (!v->is_const && cge_dtype_is_int(v->desc.dtype) &&
                                    cge_shape_numel(&v->desc.shape) <= 64);
        }
        ne->fixed = fixed;
    }
    if (!inst->release_src || strcmp(cge_device_name(inst->dev), "cpu"))
        return CGE_OK;
    int32_t nv = ex->vals.num;
    ex->readers = calloc((size_t)nv + 1, sizeof *ex->readers);
    ex->packed = calloc((size_t)nv + 1, sizeof *ex->packed);
    ex->again = calloc((size_t)nv + 1, sizeof *ex->again);
    if (!ex->readers || !ex->packed || !ex->again) {
        free(ex->readers);
        free(ex->packed);
        free(ex->again);
        ex->readers = ex->packed = NULL;
        ex->again = NULL;
        return CGE_OK;   /* nothing released: the memory stays, nothing breaks */
    }
    for (int32_t i = 0; i < cge_graph_num_outputs(ex->g); i++)
        if (ex->vals.out_idx[i] >= 0)
            ex->readers[ex->vals.out_idx[i]] = -1;
    for (int32_t k = 0; k < ex->num_nodes; k++) {
        const node_exec *ne = &ex->nodes[k];
        /* a node that may prepare again needs the constant's bytes again,
         * unless its packed copy is the same at any shape (release_packed) */
        bool once = ne->fixed && !ne->args;
        for (int32_t i = 0; i < cge_node_num_inputs(ne->node); i++) {
            int32_t vi = ne->in_idx[i];
            if (vi < 0 || !vals[vi].is_const)
                continue;
            if (i >= 64) {
                ex->readers[vi] = -1;
            } else if (ex->readers[vi] >= 0) {
                ex->readers[vi]++;
                ex->again[vi] |= !once;
            }
        }
    }
    return CGE_OK;
}

/* The eager tables of `g` (verified by the compile that made this
 * instance): its nodes in topological order, a value per name. */
static cge_status eager_build(cge__instance *inst, eager_exec *ex, const cge_graph *g)
{
    ex->g = g;
    ex->built = true;
    cge__strmap_init(&ex->vals.index);
    int32_t nn = cge_graph_num_nodes(g);
    int32_t *order = malloc(sizeof(int32_t) * ((size_t)nn + 1));
    ex->nodes = calloc((size_t)nn + 1, sizeof *ex->nodes);
    if (!order || !ex->nodes) {
        free(order);
        return oom();
    }
    cge_status st = cge_graph_topo_order(g, order);
    for (int32_t i = 0; !st && i < cge_graph_num_inputs(g); i++)
        st = add_value(&ex->vals, g, cge_graph_input(g, i));
    for (int32_t i = 0; !st && i < cge_graph_num_constants(g); i++)
        st = add_value(&ex->vals, g, cge_graph_constant_name(g, i));
    for (int32_t k = 0; !st && k < nn; k++) {
        node_exec *ne = &ex->nodes[k];
        ex->num_nodes = k + 1;
        ne->node = cge_graph_node(g, order[k]);
        int32_t ni = cge_node_num_inputs(ne->node), no = cge_node_num_outputs(ne->node);
        ne->in_idx = calloc((size_t)ni + 1, sizeof(int32_t));
        ne->out_idx = calloc((size_t)no + 1, sizeof(int32_t));
        ne->ins = calloc((size_t)ni + 1, sizeof(cge_tensor));
        ne->outs = calloc((size_t)no + 1, sizeof(cge_tensor));
        ne->in_types = calloc((size_t)ni + 1, sizeof(cge_value_type));
        ne->out_types = calloc((size_t)no + 1, sizeof(cge_value_type));
        if (!ne->in_idx || !ne->out_idx || !ne->ins || !ne->outs || !ne->in_types ||
            !ne->out_types) {
            st = oom();
            break;
        }
        ne->def = cge_op_find(cge_node_domain(ne->node), cge_node_op_type(ne->node), 0);
        if (!ne->def) {
            st = cge_last_error_status();
            break;
        }
        for (int32_t i = 0; !st && i < no; i++) {
            st = add_value(&ex->vals, g, cge_node_output(ne->node, i));
            ne->out_idx[i] = cge__strmap_get(&ex->vals.index, cge_node_output(ne->node, i));
        }
        for (int32_t i = 0; !st && i < ni; i++) {
            const char *nm = cge_node_input(ne->node, i);
            ne->in_idx[i] = nm[0] ? cge__strmap_get(&ex->vals.index, nm) : -1;
        }
        ne->ctx = (cge_kernel_ctx){
            .op_type = cge_node_op_type(ne->node),
            .node_name = cge_node_name(ne->node),
            .num_inputs = ni, .inputs = ne->ins,
            .num_outputs = no, .outputs = ne->outs,
            .attrs = cge_node_attrs_const(ne->node),
            .device = inst->dev,
            .num_threads = cge_device_num_threads(inst->dev),
            .shared = inst->shared,
            .input_types = ne->in_types,
            .output_types = ne->out_types,
        };
    }
    free(order);
    if (!st)
        st = table_index_io(&ex->vals, g);
    if (!st && g == inst->pg)
        st = eager_fixed(inst, ex);
    return st ? st : eager_lifetimes(ex, g);
}

/* Buffers for the constants, and for the inputs at this instance's shapes. */
static cge_status eager_buffers(cge__instance *inst, eager_exec *ex)
{
    cge_status st = CGE_OK;
    for (int32_t i = 0; !st && !ex->ready && i < ex->vals.num; i++) {
        value *v = &ex->vals.values[i];
        if (!v->is_const)
            continue;
        if (!strcmp(cge_device_name(inst->dev), "cpu") && v->desc.type == CGE_TYPE_TENSOR) {
            /* host memory: the kernels read the graph's bytes, no copy of
             * the weights (as plans do with consts_in_graph) */
            const cge_tensor *t = cge_graph_constant(ex->g, v->name);
            v->data = (void *)t->data;
            v->bytes = t->bytes;
            v->borrowed = true;
            continue;
        }
        st = alloc_value(inst, v);
        if (!st && v->bytes)
            st = cge_memcpy(inst->dev, v->data, cge_graph_constant(ex->g, v->name)->data,
                            v->bytes, CGE_MEMCPY_HOST_TO_DEVICE);
    }
    for (int32_t i = 0; !st && i < inst->num_inputs; i++) {
        value *v = input_value(&ex->vals, i);
        v->desc.shape = inst->input_shapes[i];
        st = alloc_value(inst, v);
    }
    if (!st)
        ex->ready = true;
    return st;
}

/* ---- the plan ------------------------------------------------------------------ */

/* The plan's step and binding tables live in the device's warm memory
 * (runtime/warm_memory.h): an instance made at a new size's first run does
 * not fault their pages in there. Freed with cge__warm_free. */
static void *table_alloc(const cge__instance *inst, size_t n, size_t size)
{
    return cge__warm_calloc(cge__device_warm(inst->dev), n, size);
}

static void plan_release(cge__instance *inst)
{
    for (int32_t k = 0; inst->steps && k < cge_plan_num_steps(inst->plan); k++) {
        plan_exec *pe = &inst->steps[k];
        if (pe->step && pe->step->kernel->release && pe->ctx.state)
            pe->step->kernel->release(pe->ctx.state);
    }
    cge__warm_free(inst->operands);
    cge__warm_free(inst->steps);
    for (int32_t i = 0; inst->events && i < inst->num_events + inst->num_streams; i++)
        cge_event_destroy(inst->events[i]);
    free(inst->events);
    for (int32_t i = 1; inst->streams && i < inst->num_streams; i++)
        cge_stream_destroy(inst->streams[i]);
    free(inst->streams);
    if (!inst->arena_borrowed)
        cge_mem_free(inst->dev, inst->arena);
    if (!inst->consts_borrowed)
        cge_mem_free(inst->dev, inst->consts);
    if (!inst->prebuilt)
        cge_plan_destroy(inst->plan);
}

void cge__instance_destroy(cge__instance *inst)
{
    if (!inst)
        return;
    cge_ri_destroy(inst->ri);
    cge_stream_destroy(inst->inline_stream);
    cge_event_destroy(inst->done);
    if (inst->ex.built)
        eager_free(inst, &inst->ex);
    table_free(inst->dev, &inst->io);
    plan_release(inst);
    cge__warm_free(inst->root);
    free(inst->vs_start);
    free(inst->vs_steps);
    free(inst->smark);
    free(inst->vmark);
    cge__warm_free(inst->grp_start);
    cge__warm_free(inst->grp_vals);
    cge__warm_free(inst->ref_start);
    cge__warm_free(inst->ref_v);
    cge__warm_free(inst->ref_t);
    free(inst->input_shapes);
    free(inst);
}

/* Where plan value `vi` lives: the arena, the constants block, or (graph
 * constants read in place) the graph's own bytes at the same offset within
 * the constant the value views. */
static void *value_address(const cge__instance *inst, const cge_plan_value *vals, int32_t vi)
{
    const cge_plan_value *v = &vals[vi];
    if (v->storage == CGE_STORAGE_HOST)   /* computed by the shape program */
        return (char *)cge_plan_host_data(inst->plan) + v->offset;
    if (v->storage != CGE_STORAGE_CONSTANT)
        return (char *)inst->arena + v->offset;
    if (!inst->consts_in_graph)
        return (char *)inst->consts + v->offset;
    const cge_plan_value *root = v;
    while (root->alias_of >= 0)
        root = &vals[root->alias_of];
    const cge_tensor *t = cge_graph_constant(inst->pg, root->name);
    return (char *)t->data + (v->offset - root->offset);
}

/* Whether every constant the plan places has its bytes in the plan's graph
 * (so that host memory can be read in place). */
static bool constants_in_graph(const cge_plan *p)
{
    const cge_plan_value *vals = cge_plan_values(p);
    for (int32_t v = 0; v < cge_plan_num_values(p); v++) {
        const cge_plan_value *root = &vals[v];
        if (root->storage != CGE_STORAGE_CONSTANT)
            continue;
        while (root->alias_of >= 0)
            root = &vals[root->alias_of];
        const cge_tensor *t = cge_graph_constant(cge_plan_graph(p), root->name);
        if (!t || t->bytes < vals[v].offset - root->offset + vals[v].bytes)
            return false;
    }
    return true;
}

/* Which graph inputs and outputs a caller's buffer can stand in for, and
 * the kernels' tensors that follow it: the value's memory group (itself,
 * its views, the values it reuses in place) lies in the arena within the
 * value's own bytes, from its start, and holds no other graph input or
 * output, so kernels working there touch nothing else. (The planner never
 * writes in place into an input's memory, so an input's group is views.) */

/* Operand i of step s (its inputs, then its outputs): the kernel's tensor,
 * and in *vi the plan value (-1: an absent input). */
static cge_tensor *operand(plan_exec *pe, const cge_plan_step *s, int32_t i, int32_t *vi)
{
    bool in = i < s->num_inputs;
    *vi = in ? s->inputs[i] : s->outputs[i - s->num_inputs];
    return in ? &pe->ins[i] : &pe->outs[i - s->num_inputs];
}

/* Values and kernel tensors by memory group (counting sort on the group's
 * owner), so that each graph input and output visits its own group only: a
 * new signature rebinds in time linear in the plan, not io x plan. */
static cge_status group_index(cge__instance *inst)
{
    const cge_plan *p = inst->plan;
    int32_t nv = cge_plan_num_values(p), ns = cge_plan_num_steps(p);
    size_t nops = 0;
    for (int32_t k = 0; k < ns; k++)
        nops += (size_t)inst->steps[k].step->num_inputs + (size_t)inst->steps[k].step->num_outputs;
    if (!inst->root) {
        inst->root = table_alloc(inst, (size_t)nv + 1, sizeof *inst->root);
        inst->grp_start = table_alloc(inst, (size_t)nv + 2, sizeof(int32_t));
        inst->grp_vals = table_alloc(inst, (size_t)nv + 1, sizeof(int32_t));
        inst->ref_start = table_alloc(inst, (size_t)nv + 2, sizeof(int32_t));
        inst->ref_t = table_alloc(inst, nops + 1, sizeof *inst->ref_t);
        inst->ref_v = table_alloc(inst, nops + 1, sizeof(int32_t));
        if (!inst->root || !inst->grp_start || !inst->grp_vals || !inst->ref_start ||
            !inst->ref_t || !inst->ref_v)
            return oom();
    }
    int32_t *root = inst->root, *gs = inst->grp_start, *rs = inst->ref_start;
    memset(gs, 0, sizeof(int32_t) * ((size_t)nv + 2));
    memset(rs, 0, sizeof(int32_t) * ((size_t)nv + 2));
    for (int32_t w = 0; w < nv; w++) {
        root[w] = cge_plan_root_value(p, w);
        gs[root[w] + 2]++;
    }
    for (int32_t k = 0; k < ns; k++) {
        const cge_plan_step *st = inst->steps[k].step;
        for (int32_t j = 0; j < st->num_inputs + st->num_outputs; j++) {
            int32_t x;
            operand(&inst->steps[k], st, j, &x);
            if (x >= 0)
                rs[root[x] + 2]++;
        }
    }
    for (int32_t r = 0; r < nv; r++) {
        gs[r + 2] += gs[r + 1];
        rs[r + 2] += rs[r + 1];
    }
    /* gs[r + 1] / rs[r + 1] now count the entries placed so far. */
    for (int32_t w = 0; w < nv; w++)
        inst->grp_vals[gs[root[w] + 1]++] = w;
    for (int32_t k = 0; k < ns; k++) {
        plan_exec *pe = &inst->steps[k];
        for (int32_t j = 0; j < pe->step->num_inputs + pe->step->num_outputs; j++) {
            int32_t x;
            cge_tensor *t = operand(pe, pe->step, j, &x);
            if (x < 0)
                continue;
            int32_t at = rs[root[x] + 1]++;
            inst->ref_t[at] = t;
            inst->ref_v[at] = x;
        }
    }
    return CGE_OK;
}

/* The graph output that may take graph input `in`'s memory (plan values;
 * -1 if none), for a caller who binds one buffer as both (a key/value cache
 * written in place): the step making the output is the last of the input's
 * readers, all on one stream, and its kernel writes output 0 in place of the
 * input (inplace_input: the kernel handles the output in its input's
 * buffer), reading nothing else in that memory. Nothing reads the input
 * after the output is written, so sharing changes no result. The planner
 * does not share them itself: a run with separate buffers, or none bound,
 * keeps them apart. */
static int32_t share_output(const cge__instance *inst, int32_t in, int32_t last);

/* share_output's candidate, which depends on the layout only: the last step
 * reading input `in`'s memory (-1: none; -2: readers on several streams). */
static int32_t share_last_reader(const cge__instance *inst, int32_t in)
{
    /* inst->root: group_index's roots of this plan (binding_table made
     * them just before), a lookup instead of a walk per operand. */
    const int32_t *root_of = inst->root;
    int32_t ns = cge_plan_num_steps(inst->plan), root = root_of[in], last = -1;
    for (int32_t k = 0; k < ns; k++) {
        const cge_plan_step *st = inst->steps[k].step;
        bool reads = false;
        for (int32_t j = 0; j < st->num_inputs && !reads; j++)
            reads = st->inputs[j] >= 0 && root_of[st->inputs[j]] == root;
        if (!reads || st->folded)
            continue;
        if (last >= 0 && inst->steps[last].step->stream != st->stream)
            return -2;
        last = k;
    }
    return last;
}

/* share_output at these sizes, given the input's last reader (the checks
 * that depend on offsets and bytes). */
static int32_t share_output(const cge__instance *inst, int32_t in, int32_t last)
{
    const cge_plan_value *vals = cge_plan_values(inst->plan);
    const int32_t *root_of = inst->root;
    int32_t root = root_of[in];
    if (last < 0)
        return -1;
    const cge_plan_step *st = inst->steps[last].step;
    int32_t ip = st->kernel->inplace_input;
    if (ip < 0 || ip >= st->num_inputs || st->num_outputs < 1 || st->outputs[0] < 0)
        return -1;
    int32_t x = st->inputs[ip], out = st->outputs[0];
    if (x < 0 || root_of[x] != root || vals[x].offset != vals[root].offset ||
        vals[x].bytes != vals[in].bytes || vals[out].bytes != vals[in].bytes ||
        vals[out].output_index < 0 || vals[out].input_index >= 0 || root_of[out] != out ||
        vals[out].memory_space != vals[in].memory_space)
        return -1;
    for (int32_t j = 0; j < st->num_inputs; j++)
        if (j != ip && st->inputs[j] >= 0 && root_of[st->inputs[j]] == root)
            return -1;
    return out;
}

/* `layout`: the plan's layout (alias groups, host values, folded steps)
 * may differ from the last table's, so its per-layout facts are found
 * again; without, only what sizes decide is (a delta rebind: offsets and
 * layout as they were, only bytes changed). */
static cge_status binding_table(cge__instance *inst, bool layout)
{
    const cge_plan *p = inst->plan;
    const cge_plan_value *vals = cge_plan_values(p);
    int32_t ns = cge_plan_num_steps(p);
    cge_status st0 = layout ? group_index(inst) : CGE_OK;
    if (st0)
        return st0;
    const int32_t *root_of = inst->root;
    for (int32_t i = 0; layout && i < inst->io.num; i++) {
        value *v = &inst->io.values[i];
        int32_t pv = v->pv = cge_plan_find_value(p, v->name);
        v->apart = false;
        v->last_reader = -1;
        if (pv < 0 || vals[pv].storage != CGE_STORAGE_ARENA)
            continue;
        int32_t root = root_of[pv];
        /* Plans made before inputs were kept apart (an older model file)
         * may write in place into an input's memory: not the caller's. */
        bool ok = true;
        for (int32_t k = 0; ok && vals[pv].input_index >= 0 && k < ns; k++) {
            const cge_plan_step *st = inst->steps[k].step;
            int32_t ip = st->kernel->inplace_input;
            ok = !(ip >= 0 && ip < st->num_inputs && st->inputs[ip] >= 0 &&
                   root_of[st->inputs[ip]] == root && st->num_outputs > 0 &&
                   st->outputs[0] >= 0 && root_of[st->outputs[0]] == root);
        }
        int32_t uses = 0;
        for (int32_t k = 0; ok && k < cge_graph_num_inputs(inst->pg); k++)
            uses += inst->io.in_idx[k] == i;
        for (int32_t k = 0; ok && k < cge_graph_num_outputs(inst->pg); k++)
            uses += inst->io.out_idx[k] == i;
        v->apart = ok && uses == 1;
        if (v->apart && vals[pv].input_index >= 0)
            v->last_reader = share_last_reader(inst, pv);
    }
    for (int32_t i = 0; i < inst->io.num; i++) {
        value *v = &inst->io.values[i];
        int32_t pv = v->pv;
        v->cur = v->pdata;
        v->bindable = v->bound = false;
        v->num_refs = 0;
        v->share = -1;
        if (pv < 0 || vals[pv].storage != CGE_STORAGE_ARENA || !v->apart)
            continue;
        int32_t root = root_of[pv];
        const cge_plan_value *rv = &vals[root];
        bool ok = rv->storage == CGE_STORAGE_ARENA && vals[pv].offset == rv->offset;
        for (int32_t g = inst->grp_start[root]; ok && g < inst->grp_start[root + 1]; g++) {
            int32_t w = inst->grp_vals[g];
            const cge_plan_value *x = &vals[w];
            ok = x->offset >= rv->offset && x->offset + x->bytes <= rv->offset + vals[pv].bytes;
            /* Another graph input or output in the group, or this one at two
             * positions, would get this buffer too. */
            if (ok && w != pv)
                ok = x->input_index < 0 && x->output_index < 0;
        }
        if (!ok)
            continue;
        int32_t lo = inst->ref_start[root], n = inst->ref_start[root + 1] - lo;
        if (n > v->refs_cap) {
            struct value_ref *r = realloc(v->refs, sizeof *r * ((size_t)n + 1));
            if (!r)
                return oom();
            v->refs = r;
            v->refs_cap = n;
        }
        for (int32_t q = 0; q < n; q++)
            v->refs[v->num_refs++] = (struct value_ref){inst->ref_t[lo + q],
                                                        vals[inst->ref_v[lo + q]].offset - rv->offset};
        v->bindable = true;
    }
    for (int32_t i = 0; i < inst->io.num; i++) {
        value *v = &inst->io.values[i];
        int32_t pv = v->pv;
        if (!v->bindable || pv < 0 || vals[pv].input_index < 0)
            continue;
        int32_t out = share_output(inst, pv, v->last_reader);
        int32_t w = out >= 0 ? cge__strmap_get(&inst->io.index, vals[out].name) : -1;
        if (w < 0 || w == i || !inst->io.values[w].bindable)
            continue;
        v->share = w;
    }
    return CGE_OK;
}

/* Whether [p, p + n) overlaps bound value w's buffer. */
static bool overlaps(const void *p, size_t n, const value *w)
{
    uintptr_t a0 = (uintptr_t)p, b0 = (uintptr_t)w->cur;
    size_t nb = cge_tensor_nbytes(w->desc.dtype, &w->desc.shape);
    return n && nb && a0 < b0 + nb && b0 < a0 + n;
}

static void point_value(value *v, void *to)
{
    if (v->cur == to)
        return;
    for (int32_t r = 0; r < v->num_refs; r++)
        v->refs[r].t->data = (char *)to + v->refs[r].delta;
    v->cur = to;
}

void cge__instance_bind_buffers(cge__instance *inst, const cge_tensor *inputs,
                                const int32_t *in_pos, int32_t num_inputs,
                                const cge_tensor *outputs, const int32_t *out_pos,
                                int32_t num_outputs, bool bind)
{
    if (inst->eager || !inst->steps)
        return;
    bool moved_any = false;
    for (int32_t i = 0; i < inst->io.num; i++)
        inst->io.values[i].bound = inst->io.values[i].in_own = false;
    for (int32_t i = 0; bind && i < num_outputs; i++) {
        value *v = output_value(&inst->io, out_pos[i]);
        if (v->bindable && outputs[i].data &&
            outputs[i].bytes >= cge_tensor_nbytes(v->desc.dtype, &v->desc.shape)) {
            moved_any |= v->cur != outputs[i].data;
            point_value(v, outputs[i].data);
            v->bound = true;
        }
    }
    for (int32_t i = 0; bind && i < num_inputs; i++) {
        value *v = input_value(&inst->io, in_pos[i]);
        size_t need = cge_tensor_nbytes(v->desc.dtype, &v->desc.shape);
        bool ok = v->bindable && inputs[i].data && inputs[i].bytes >= need;
        /* An input bound where an output is written: only the output that
         * may share it (share_output), in exactly its buffer; any other
         * input is copied into the plan's own memory first, so the run
         * reads it as the caller gave it. */
        for (int32_t j = 0; ok && j < num_outputs; j++) {
            const value *w = output_value(&inst->io, out_pos[j]);
            bool shared = v->share >= 0 && w == &inst->io.values[v->share] &&
                          w->cur == inputs[i].data;
            ok = !w->bound || shared || !overlaps(inputs[i].data, need, w);
        }
        if (ok) {
            moved_any |= v->cur != inputs[i].data;
            point_value(v, inputs[i].data);
            v->bound = true;
        }
    }
    /* A pair that may share, neither bound (the session owns a copy of the
     * input): one buffer of the session's for both, so the in-place step
     * writes only what it updates. The run copies the input into it and
     * the output out of it, as with the plan's own places. The buffer is
     * made at the first such run (a caller who binds never pays for it);
     * without it the run keeps the plan's places. */
    for (int32_t i = 0; i < inst->io.num; i++) {
        value *v = &inst->io.values[i];
        value *w = v->share >= 0 ? &inst->io.values[v->share] : NULL;
        if (!w || v->bound || w->bound)
            continue;
        size_t need = cge_tensor_nbytes(v->desc.dtype, &v->desc.shape);
        if (v->own && v->own_bytes < need) {
            /* Made for a smaller signature (the instance was rewritten for
             * larger sizes since): too small now. */
            cge_mem_free(inst->dev, v->own);
            v->own = NULL;
        }
        if (!v->own) {
            if (!need || cge_mem_alloc(inst->dev, need, &v->own) != CGE_OK) {
                v->own = NULL;
                continue;
            }
            v->own_bytes = need;
        }
        moved_any |= v->cur != v->own || w->cur != v->own;
        point_value(v, v->own);
        point_value(w, v->own);
        v->in_own = w->in_own = true;
    }
    for (int32_t i = 0; i < inst->io.num; i++) {
        value *v = &inst->io.values[i];
        if (!v->bound && !v->in_own && v->cur != v->pdata) {
            point_value(v, v->pdata);
            moved_any = true;
        }
    }
    /* A recording holds the addresses it was captured with. */
    if (moved_any)
        cge__instance_drop_capture(inst);
}

/* Weights freed once packed (cge__instance_create_releasing): per constant
 * value, how many steps read it and how many of those have packed it; -1 for
 * one that stays (a view of it exists, or it is a graph input or output). */
typedef struct release_plan {
    int32_t *readers, *packed;
} release_plan;

static bool release_plan_make(const cge__instance *inst, release_plan *r)
{
    const cge_plan *p = inst->plan;
    const cge_plan_value *vals = cge_plan_values(p);
    int32_t nv = cge_plan_num_values(p);
    r->readers = calloc((size_t)nv + 1, sizeof *r->readers);
    r->packed = calloc((size_t)nv + 1, sizeof *r->packed);
    if (!r->readers || !r->packed) {
        free(r->readers);
        free(r->packed);
        return false;  /* nothing released: the memory stays, nothing breaks */
    }
    for (int32_t v = 0; v < nv; v++) {
        if (vals[v].storage != CGE_STORAGE_CONSTANT)
            continue;
        if (vals[v].input_index >= 0 || vals[v].output_index >= 0)
            r->readers[v] = -1;
        if (vals[v].alias_of >= 0) {
            int32_t root = vals[v].alias_of;
            while (vals[root].alias_of >= 0)
                root = vals[root].alias_of;
            r->readers[root] = -1;
        }
    }
    for (int32_t k = 0; k < cge_plan_num_steps(p); k++) {
        const cge_plan_step *st = &cge_plan_steps(p)[k];
        for (int32_t i = 0; i < st->num_inputs; i++) {
            int32_t v = st->inputs[i];
            if (v >= 0 && vals[v].storage == CGE_STORAGE_CONSTANT && r->readers[v] >= 0)
                r->readers[v]++;
        }
    }
    return true;
}

/* After step k's prepare: the constants it packed whose every reader has
 * packed them now go, from the plan's graph and the graph it came from. */
static void release_packed_inputs(cge__instance *inst, release_plan *r, int32_t k, uint64_t bits)
{
    const cge_plan_value *vals = cge_plan_values(inst->plan);
    const cge_plan_step *st = &cge_plan_steps(inst->plan)[k];
    for (int32_t i = 0; i < st->num_inputs && i < 64; i++) {
        int32_t v = st->inputs[i];
        if (!(bits >> i & 1) || v < 0 || vals[v].storage != CGE_STORAGE_CONSTANT ||
            r->readers[v] <= 0 || ++r->packed[v] != r->readers[v])
            continue;
        release_constant(inst, vals[v].name, NULL);
    }
}

/* How many references the graphs in `holders` (each counted once) hold on
 * block `data`: one per constant of theirs with these bytes. */
static int64_t held_by(const cge_graph *const *holders, int32_t num_holders, const void *data)
{
    int64_t n = 0;
    for (int32_t h = 0; h < num_holders; h++) {
        bool seen = false;
        for (int32_t j = 0; j < h && !seen; j++)
            seen = holders[j] == holders[h];
        for (int32_t c = 0; !seen && holders[h] && c < cge_graph_num_constants(holders[h]); c++) {
            const cge_tensor *t =
                cge_graph_constant(holders[h], cge_graph_constant_name(holders[h], c));
            n += t && t->data == data;
        }
    }
    return n;
}

/* Constant value v, whose every reader has packed it for any shape (the
 * last of them just did), gives its pages back (cge__instance_create_planned,
 * `retire`): only where the request's graphs are all that hold its block (a
 * caller's graph sharing it keeps it, and so it stays), and where the packed
 * copies can write it back (a signature that must compile after all:
 * cge__kernel_cache_revive). A failure keeps the memory. */
static void retire_constant_pages(cge__instance *inst, int32_t v)
{
    cge__retire_request *rq = inst->retire;
    const cge_tensor *t = cge_graph_constant(inst->pg, cge_plan_values(inst->plan)[v].name);
    if (!t || !t->data || !t->bytes || !cge__block_is_mapped(t->data) ||
        !cge__kernel_cache_restorable(inst->shared, t->data, t->bytes))
        return;
    cge__retired_weight *grown = realloc(*rq->list, sizeof **rq->list * ((size_t)*rq->num + 1));
    if (!grown)
        return;
    *rq->list = grown;
    if (cge__kernel_cache_retire(inst->shared, t->data, t->bytes)) {
        cge_clear_error();
        return;
    }
    if (!cge__block_discard_pages_held(t->data, held_by(rq->holders, rq->num_holders, t->data))) {
        cge__kernel_cache_unretire(inst->shared, t->data, t->bytes);
        return;
    }
    (*rq->list)[(*rq->num)++] = (cge__retired_weight){t->data, t->bytes};
    rq->freed += t->bytes;
}

/* After step k's prepare: the constants it packed for any shape (`bits`)
 * whose every reader now has go (retire_constant_pages). */
static void retire_packed_inputs(cge__instance *inst, release_plan *r, int32_t *any, int32_t k,
                                 uint64_t bits)
{
    const cge_plan_value *vals = cge_plan_values(inst->plan);
    const cge_plan_step *st = &cge_plan_steps(inst->plan)[k];
    for (int32_t i = 0; i < st->num_inputs && i < 64; i++) {
        int32_t v = st->inputs[i];
        if ((bits >> i & 1) && v >= 0 && vals[v].storage == CGE_STORAGE_CONSTANT &&
            r->readers[v] > 0 && ++any[v] == r->readers[v])
            retire_constant_pages(inst, v);
    }
}

void cge__instance_eager_by_steps(cge__instance *inst)
{
    if (inst)
        inst->eager_by_steps = true;
}

/* Allocate the plan's arena and constants (`host_consts`: the caller's blob,
 * used in place on the CPU device; NULL: written from the plan's graph), bind
 * every step's tensors and prepare its kernel once. The arena comes
 * from `arena` when given (shared with the session graph's other instances). */
static cge_status bind_plan(cge__instance *inst, const void *host_consts,
                            const cge__arena_source *arena)
{
    const cge_plan *p = inst->plan;
    const cge_plan_value *vals = cge_plan_values(p);
    int32_t n = cge_plan_num_steps(p);
    inst->num_streams = cge_plan_num_streams(p);
    inst->num_events = cge_plan_num_events(p);
    bool host = !strcmp(cge_device_name(inst->dev), "cpu");
    inst->arena_borrowed = arena != NULL;
    cge_status st = arena ? arena->get(arena->user, cge_plan_arena_bytes(p), &inst->arena)
                          : cge_mem_alloc(inst->dev, cge_plan_arena_bytes(p), &inst->arena);
    if (!st && host && host_consts) {
        /* The CPU device's memory is host memory: no copy of the weights. */
        inst->consts = (void *)host_consts;
        inst->consts_borrowed = true;
    } else if (!st && host && constants_in_graph(p)) {
        /* Likewise the graph's constants, which every plan compiled from one
         * session graph shares (clones share constant data). */
        inst->consts_in_graph = true;
    } else if (!st) {
        st = cge_mem_alloc(inst->dev, cge_plan_constant_bytes(p), &inst->consts);
    }
    if (!st && inst->consts && !inst->consts_borrowed && cge_plan_constant_bytes(p)) {
        void *blob = host_consts ? (void *)host_consts : malloc(cge_plan_constant_bytes(p));
        if (!blob)
            return oom();
        if (!host_consts)
            cge_plan_write_constants(p, blob);
        st = cge_memcpy(inst->dev, inst->consts, blob, cge_plan_constant_bytes(p),
                        CGE_MEMCPY_HOST_TO_DEVICE);
        if (!host_consts)
            free(blob);
    }
    inst->steps = table_alloc(inst, (size_t)n + 1, sizeof *inst->steps);
    /* One block for every step's tensors: a new signature's instance is
     * made at its first run, and two allocations per step were a tenth of
     * what making it cost. */
    size_t nops = 0;
    for (int32_t k = 0; k < n; k++)
        nops += (size_t)cge_plan_steps(p)[k].num_inputs + (size_t)cge_plan_steps(p)[k].num_outputs + 2;
    inst->operands = table_alloc(inst, nops + 1, sizeof(cge_tensor));
    if (!st && !inst->operands)
        return oom();
    inst->streams = calloc((size_t)inst->num_streams + 1, sizeof *inst->streams);
    /* The plan's events, then a fork event and one join per extra stream. */
    inst->events = calloc((size_t)(inst->num_events + inst->num_streams) + 1, sizeof *inst->events);
    if (!st && (!inst->steps || !inst->streams || !inst->events))
        return oom();
    for (int32_t i = 1; !st && i < inst->num_streams; i++)
        st = cge_stream_create(inst->dev, &inst->streams[i]);
    for (int32_t i = 0; !st && i < inst->num_events + inst->num_streams; i++)
        st = cge_event_create(inst->dev, &inst->events[i]);
    for (int32_t i = 0; !st && i < inst->io.num; i++) {
        value *v = &inst->io.values[i];
        int32_t pv = cge_plan_find_value(p, v->name);
        if (pv >= 0 && vals[pv].storage != CGE_STORAGE_NONE)
            v->pdata = value_address(inst, vals, pv);
    }
    /* Constants packed by every kernel reading them go as soon as the last
     * one has packed them: the peak holds one weight twice, not them all. */
    release_plan rel = {0}, ret = {0};
    bool releasing = !st && inst->release_src && !inst->eager && inst->consts_in_graph &&
                     release_plan_make(inst, &rel);
    /* A symbolic plan's first instance: weights packed for any shape go as
     * soon as their last reader has packed them, so that the peak holds
     * one weight twice, not them all. */
    int32_t *ret_any = NULL;
    bool retiring = !st && inst->retire && host && !inst->eager && inst->consts_in_graph &&
                    inst->shared &&
                    (ret_any = calloc((size_t)cge_plan_num_values(p) + 1, sizeof *ret_any)) &&
                    release_plan_make(inst, &ret);
    size_t at = 0;
    for (int32_t k = 0; !st && k < n; k++) {
        plan_exec *pe = &inst->steps[k];
        const cge_plan_step *s = &cge_plan_steps(p)[k];
        pe->ins = inst->operands + at;
        at += (size_t)s->num_inputs + 1;
        pe->outs = inst->operands + at;
        at += (size_t)s->num_outputs + 1;
        for (int32_t i = 0; i < s->num_inputs + s->num_outputs; i++) {
            int32_t vi;
            cge_tensor *t = operand(pe, s, i, &vi);
            if (vi < 0)
                continue;
            const cge_plan_value *v = &vals[vi];
            *t = (cge_tensor){.name = v->name, .dtype = v->dtype, .shape = v->shape,
                              .data = value_address(inst, vals, vi), .bytes = v->bytes};
            pe->reads_host = pe->reads_host || (i < s->num_inputs && v->storage == CGE_STORAGE_HOST);
        }
        pe->ctx = (cge_kernel_ctx){
            .op_type = cge_node_op_type(s->node), .node_name = cge_node_name(s->node),
            .num_inputs = s->num_inputs, .inputs = pe->ins,
            .num_outputs = s->num_outputs, .outputs = pe->outs,
            .attrs = cge_node_attrs_const(s->node),
            .workspace = s->workspace_bytes ? (char *)inst->arena + s->workspace_offset : NULL,
            .workspace_size = s->workspace_bytes,
            .device = inst->dev, .num_threads = cge_device_num_threads(inst->dev),
            .shared = inst->shared};
        if (s->kernel->prepare) {
            cge__kernel_watch_packed(&pe->packed_inputs);
            cge__kernel_watch_packed_any_shape(&pe->packed_any);
            st = s->kernel->prepare(&pe->ctx, &pe->ctx.state);
            cge__kernel_watch_packed(NULL);
            cge__kernel_watch_packed_any_shape(NULL);
        }
        pe->step = s;
        if (!st && releasing && pe->packed_inputs)
            release_packed_inputs(inst, &rel, k, pe->packed_inputs);
        if (!st && retiring && pe->packed_any)
            retire_packed_inputs(inst, &ret, ret_any, k, pe->packed_any);
    }
    free(rel.readers);
    free(rel.packed);
    free(ret.readers);
    free(ret.packed);
    free(ret_any);
    return st ? st : binding_table(inst, true);
}

static void *moved(void *p, const void *from, size_t bytes, void *to)
{
    uintptr_t a = (uintptr_t)p, f = (uintptr_t)from;
    return p && a >= f && a < f + bytes ? (char *)to + (a - f) : p;
}

void cge__instance_relocate(cge__instance *inst, const void *from, size_t from_bytes, void *to)
{
    if (inst->eager || !inst->steps || inst->arena != from)
        return;
    /* The old block's size, not the plan's: a plan being respecialised
     * already asks for more, and a wider range would move pointers to
     * memory beyond the block (constants). */
    size_t b = from_bytes;
    for (int32_t k = 0; k < cge_plan_num_steps(inst->plan); k++) {
        plan_exec *pe = &inst->steps[k];
        for (int32_t i = 0; i < pe->step->num_inputs; i++)
            pe->ins[i].data = moved(pe->ins[i].data, from, b, to);
        for (int32_t i = 0; i < pe->step->num_outputs; i++)
            pe->outs[i].data = moved(pe->outs[i].data, from, b, to);
        pe->ctx.workspace = moved(pe->ctx.workspace, from, b, to);
    }
    for (int32_t i = 0; i < inst->io.num; i++) {
        value *v = &inst->io.values[i];
        v->pdata = moved(v->pdata, from, b, to);
        v->cur = moved(v->cur, from, b, to);
    }
    inst->arena = to;
    cge__instance_drop_capture(inst);
}

void cge__instance_wait(const cge__instance *inst)
{
    if (inst->done)
        cge_event_synchronize(inst->done);
}

void cge__instance_after(cge__instance *inst, const cge__instance *prev)
{
    inst->after = prev && prev != inst ? prev->done : NULL;
}

/* The plan's graph inputs and outputs by name, at the plan's shapes. */
static cge_status io_table(cge__instance *inst)
{
    const cge_graph *g = inst->pg;
    cge_status st = CGE_OK;
    for (int32_t i = 0; !st && i < cge_graph_num_inputs(g); i++)
        st = add_value(&inst->io, g, cge_graph_input(g, i));
    for (int32_t i = 0; !st && i < cge_graph_num_outputs(g); i++)
        st = add_value(&inst->io, g, cge_graph_output(g, i));
    return st ? st : table_index_io(&inst->io, g);
}

static cge__instance *instance_new(cge_device *dev, int32_t num_inputs)
{
    cge__instance *inst = calloc(1, sizeof *inst);
    if (!inst)
        return NULL;
    inst->dev = dev;
    cge__strmap_init(&inst->io.index);
    inst->num_inputs = num_inputs;
    inst->input_shapes = calloc((size_t)num_inputs + 1, sizeof(cge_shape));
    if (!inst->input_shapes) {
        cge__strmap_free(&inst->io.index);
        free(inst);
        return NULL;
    }
    return inst;
}

static cge_status create(cge_device *dev, const cge_graph *g, cge_graph *release_src,
                         const cge_shape *input_shapes, const cge_compile_options *copts,
                         cge_kernel_cache *shared, const cge__arena_source *arena,
                         cge__instance **out)
{
    cge__instance *inst = instance_new(dev, cge_graph_num_inputs(g));
    if (!inst)
        return oom();
    inst->src = g;
    inst->release_src = release_src;
    inst->shared = shared;
    memcpy(inst->input_shapes, input_shapes, sizeof(cge_shape) * (size_t)inst->num_inputs);
    /* The compiler does all the graph work, once: verify, infer, optimize,
     * plan; a graph whose shapes depend on computed values comes back
     * prepared only, and runs node by node. */
    cge_compile_options o = copts ? *copts : (cge_compile_options){0};
    o.device = dev;
    o.allow_incomplete = true;
    cge_status st = cge_compile(g, inst->input_shapes, inst->num_inputs, &o, &inst->plan);
    if (!st) {
        inst->pg = cge_plan_graph(inst->plan);
        inst->eager = !cge_plan_is_complete(inst->plan);
        st = inst->eager ? eager_build(inst, &inst->ex, inst->pg) : io_table(inst);
    }
    /* The constants the compiler made (folded values, widened halves, fused
     * weights) live in the compiled graph, as long as the instance: packed
     * copies of them are shared across its prepares like the session
     * graph's. Node-by-node nodes prepare again, and the copy they were
     * promised for any shape must be found, not made again from bytes
     * freed once packed. */
    if (!st && inst->eager && shared)
        st = cge__kernel_cache_add_graph_constants(shared, inst->pg);
    if (!st && !inst->eager)
        st = bind_plan(inst, NULL, arena);
    if (!st)
        st = cge_event_create(inst->dev, &inst->done);
    if (st) {
        cge__instance_destroy(inst);
        return st;
    }
    *out = inst;
    return CGE_OK;
}

cge_status cge__instance_create(cge_device *dev, const cge_graph *g, const cge_shape *input_shapes,
                               const cge_compile_options *copts, cge_kernel_cache *shared,
                               const cge__arena_source *arena, cge__instance **out)
{
    return create(dev, g, NULL, input_shapes, copts, shared, arena, out);
}

cge_status cge__instance_create_releasing(cge_device *dev, cge_graph *g,
                                         const cge_shape *input_shapes,
                                         const cge_compile_options *copts,
                                         cge_kernel_cache *shared, const cge__arena_source *arena,
                                         cge__instance **out)
{
    return create(dev, g, g, input_shapes, copts, shared, arena, out);
}

size_t cge__instance_released_bytes(const cge__instance *inst)
{
    return inst ? inst->released_bytes : 0;
}

void cge__instance_eager_counts(const cge__instance *inst, int64_t *prepares, int64_t *allocs,
                                size_t *buffer_bytes)
{
    *prepares = *allocs = 0;
    *buffer_bytes = 0;
    if (!inst || !inst->eager || !inst->ex.built)
        return;
    const eager_exec *ex = &inst->ex;
    *prepares = ex->prepares;
    *allocs = ex->allocs;
    for (int32_t i = 0; i < ex->vals.num; i++)
        if (!ex->vals.values[i].borrowed)
            *buffer_bytes += ex->vals.values[i].bytes;
    for (int32_t i = 0; i < ex->num_pool; i++)
        *buffer_bytes += ex->pool[i].bytes;
    *buffer_bytes += ex->ws_bytes;
}

/* The end of making a plan instance: memory and kernels bound, the event
 * that orders its runs; on failure the instance goes. */
static cge_status finish_plan(cge__instance *inst, const void *consts,
                              const cge__arena_source *arena, cge__instance **out)
{
    cge_status st = bind_plan(inst, consts, arena);
    if (!st)
        st = cge_event_create(inst->dev, &inst->done);
    if (st) {
        cge__instance_destroy(inst);
        return st;
    }
    *out = inst;
    return CGE_OK;
}

cge_status cge__instance_create_planned(cge_device *dev, const cge_graph *g,
                                      const cge_shape *input_shapes, cge_plan *plan,
                                      const void *consts, cge_kernel_cache *shared,
                                      const cge__arena_source *arena,
                                      cge__retire_request *retire, cge__instance **out)
{
    cge__instance *inst = instance_new(dev, cge_graph_num_inputs(g));
    if (!inst) {
        cge_plan_destroy(plan);
        return oom();
    }
    inst->src = g;
    inst->shared = shared;
    inst->plan = plan;
    inst->pg = cge_plan_graph(plan);
    inst->steps_only = consts != NULL;
    memcpy(inst->input_shapes, input_shapes, sizeof(cge_shape) * (size_t)inst->num_inputs);
    cge_status st = io_table(inst);
    /* The io table describes the plan's graph, whose inputs and outputs are
     * symbolic: this instance's sizes are the plan's. */
    for (int32_t i = 0; !st && i < inst->io.num; i++) {
        value *v = &inst->io.values[i];
        int32_t pv = cge_plan_find_value(plan, v->name);
        if (pv >= 0)
            v->desc.shape = cge_plan_values(plan)[pv].shape;
    }
    if (st) {
        cge__instance_destroy(inst);
        return st;
    }
    inst->retire = retire;
    st = finish_plan(inst, consts, arena, out);
    if (!st) {
        inst->retire = NULL;
        /* the unoptimised graph's nodes would read the weights retired */
        inst->eager_by_steps = retire && *retire->num > 0;
    }
    return st;
}

/* A kernel's prepared state depends on its tensors' shapes and attributes,
 * not on their addresses (a relocation moves addresses under it), nor on
 * arena contents; host values (shape computations) are data a prepare may
 * read. So a step keeps its state across a new specialisation when its
 * tensors' shapes and workspace size are unchanged and it reads no host
 * value: in a decode step most steps (projections, norms, the MLP) keep
 * theirs, and only those whose shapes follow the cache prepare again. */
/* Step k's tensors at the plan's shapes and places, its workspace, and its
 * kernel prepared again when its shapes or workspace changed or it reads a
 * host value that may have: any host value for a whole rebind (`vmark`
 * NULL), one marked with epoch `e` for a delta rebind (the host values are
 * the same values then, only their bytes may differ). */
static cge_status rebind_step(cge__instance *inst, int32_t k, const uint32_t *vmark, uint32_t e,
                              cge__rebind_counts *counts)
{
    const cge_plan_value *vals = cge_plan_values(inst->plan);
    plan_exec *pe = &inst->steps[k];
    const cge_plan_step *s = &cge_plan_steps(inst->plan)[k];
    bool changed = s->workspace_bytes != pe->ctx.workspace_size || (!vmark && pe->reads_host);
    if (!vmark)
        pe->reads_host = false;
    for (int32_t i = 0; i < s->num_inputs + s->num_outputs; i++) {
        int32_t vi;
        cge_tensor *t = operand(pe, s, i, &vi);
        if (vi < 0)
            continue;
        const cge_plan_value *v = &vals[vi];
        changed = changed || !cge_shape_equal(&t->shape, &v->shape);
        if (i < s->num_inputs && v->storage == CGE_STORAGE_HOST && (!vmark || vmark[vi] == e)) {
            changed = true;
            pe->reads_host = pe->reads_host || !vmark;
        }
        t->shape = v->shape;
        t->bytes = v->bytes;
        if (v->storage != CGE_STORAGE_CONSTANT)   /* constants stay where they are */
            t->data = value_address(inst, vals, vi);
    }
    pe->ctx.workspace = s->workspace_bytes ? (char *)inst->arena + s->workspace_offset : NULL;
    pe->ctx.workspace_size = s->workspace_bytes;
    pe->step = s;
    counts->steps_rebound++;
    if (!changed || !s->kernel->prepare)
        return CGE_OK;
    if (s->kernel->release && pe->ctx.state)
        s->kernel->release(pe->ctx.state);
    pe->ctx.state = NULL;
    counts->prepares++;
    return s->kernel->prepare(&pe->ctx, &pe->ctx.state);
}

static cge_status rebind_plan(cge__instance *inst, const cge__arena_source *arena,
                              cge__rebind_counts *counts)
{
    const cge_plan *p = inst->plan;
    const cge_plan_value *vals = cge_plan_values(p);
    int32_t n = cge_plan_num_steps(p);
    cge_status st = arena->get(arena->user, cge_plan_arena_bytes(p), &inst->arena);
    for (int32_t i = 0; !st && i < inst->io.num; i++) {
        value *v = &inst->io.values[i];
        int32_t pv = cge_plan_find_value(p, v->name);
        if (pv < 0)
            continue;
        v->desc.shape = vals[pv].shape;
        v->pdata = vals[pv].storage != CGE_STORAGE_NONE ? value_address(inst, vals, pv) : NULL;
    }
    for (int32_t k = 0; !st && k < n; k++)
        st = rebind_step(inst, k, NULL, 0, counts);
    return st ? st : binding_table(inst, true);
}

/* The steps reading or writing each plan value (CSR by value), made at the
 * instance's first delta rebind: the steps' operands never change. */
static cge_status step_index(cge__instance *inst)
{
    if (inst->vs_start)
        return CGE_OK;
    const cge_plan *p = inst->plan;
    int32_t nv = cge_plan_num_values(p), ns = cge_plan_num_steps(p);
    const cge_plan_step *steps = cge_plan_steps(p);
    size_t nops = 0;
    for (int32_t k = 0; k < ns; k++)
        nops += (size_t)steps[k].num_inputs + (size_t)steps[k].num_outputs;
    int32_t *start = calloc((size_t)nv + 2, sizeof *start);
    int32_t *list = malloc(sizeof *list * (nops + 1));
    uint32_t *smark = calloc((size_t)ns + 1, sizeof *smark);
    uint32_t *vmark = calloc((size_t)nv + 1, sizeof *vmark);
    if (!start || !list || !smark || !vmark) {
        free(start);
        free(list);
        free(smark);
        free(vmark);
        return oom();
    }
    for (int32_t k = 0; k < ns; k++)
        for (int32_t j = 0; j < steps[k].num_inputs + steps[k].num_outputs; j++) {
            int32_t x = j < steps[k].num_inputs ? steps[k].inputs[j]
                                                : steps[k].outputs[j - steps[k].num_inputs];
            if (x >= 0)
                start[x + 2]++;
        }
    for (int32_t v = 0; v < nv; v++)
        start[v + 2] += start[v + 1];
    for (int32_t k = 0; k < ns; k++)
        for (int32_t j = 0; j < steps[k].num_inputs + steps[k].num_outputs; j++) {
            int32_t x = j < steps[k].num_inputs ? steps[k].inputs[j]
                                                : steps[k].outputs[j - steps[k].num_inputs];
            if (x >= 0)
                list[start[x + 1]++] = k;
        }
    inst->vs_start = start;
    inst->vs_steps = list;
    inst->smark = smark;
    inst->vmark = vmark;
    inst->epoch = 0;
    return CGE_OK;
}

/* rebind_plan after a delta run of the shape program (`vals`: the plan
 * values whose shape, bytes or host value changed; `ws`: the steps whose
 * workspace size did), which moved no offset, no host value and no folded
 * step: only the steps that read or write a changed value, or whose
 * workspace changed, are bound again, and of those only the ones whose
 * shapes, workspace or host values changed prepare again. The caller's
 * buffers a run pointed kernels at go back to the plan's places first, as
 * a whole rebind leaves them. */
static cge_status rebind_changes(cge__instance *inst, const cge__arena_source *arena,
                                 const int32_t *cv, int32_t ncv, const int32_t *cws, int32_t ncws,
                                 cge__rebind_counts *counts)
{
    const cge_plan *p = inst->plan;
    const cge_plan_value *vals = cge_plan_values(p);
    int32_t n = cge_plan_num_steps(p);
    cge_status st = step_index(inst);
    if (!st)
        st = arena->get(arena->user, cge_plan_arena_bytes(p), &inst->arena);
    if (st)
        return st;
    for (int32_t i = 0; i < inst->io.num; i++) {
        value *v = &inst->io.values[i];
        point_value(v, v->pdata);
        if (v->pv < 0)
            continue;
        v->desc.shape = vals[v->pv].shape;
        v->pdata = vals[v->pv].storage != CGE_STORAGE_NONE ? value_address(inst, vals, v->pv) : NULL;
    }
    uint32_t e = ++inst->epoch;
    if (e == 0) {   /* wrapped: marks of 4 billion rebinds ago would match */
        memset(inst->smark, 0, sizeof *inst->smark * (size_t)n);
        memset(inst->vmark, 0, sizeof *inst->vmark * (size_t)cge_plan_num_values(p));
        e = inst->epoch = 1;
    }
    for (int32_t i = 0; i < ncv; i++) {
        int32_t x = cv[i];
        inst->vmark[x] = e;
        for (int32_t q = inst->vs_start[x]; q < inst->vs_start[x + 1]; q++)
            inst->smark[inst->vs_steps[q]] = e;
    }
    for (int32_t i = 0; i < ncws; i++)
        inst->smark[cws[i]] = e;
    for (int32_t k = 0; !st && k < n; k++)
        if (inst->smark[k] == e)
            st = rebind_step(inst, k, inst->vmark, e, counts);
    return st ? st : binding_table(inst, false);
}

cge_status cge__instance_respecialize(cge__instance *inst, cge_shape_program *sp,
                                      const cge_shape *input_shapes,
                                      const cge__arena_source *arena, cge__rebind_counts *counts)
{
    if (inst->eager || inst->prebuilt || !inst->steps || !inst->arena_borrowed)
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_INTERNAL,
                         "respecialize: the instance is not a shape program's");
    cge__instance_wait(inst);
    cge__instance_drop_capture(inst);   /* it holds the old addresses */
    cge_status st = cge_shape_program_run(sp, input_shapes, inst->num_inputs, &inst->plan);
    if (st)
        return st;
    memcpy(inst->input_shapes, input_shapes, sizeof(cge_shape) * (size_t)inst->num_inputs);
    inst->last_eager = false;
    const int32_t *cv = NULL, *cws = NULL;
    int32_t ncv = 0, ncws = 0;
    if (cge_shape_program_last_changes(sp, &cv, &ncv, &cws, &ncws)) {
        counts->deltas++;
        return rebind_changes(inst, arena, cv, ncv, cws, ncws, counts);
    }
    return rebind_plan(inst, arena, counts);
}

cge_status cge__instance_create_prebuilt(cge_device *dev, const cge_plan *plan,
                                        const void *constants, cge_kernel_cache *shared,
                                        cge__instance **out)
{
    const cge_graph *g = cge_plan_graph(plan);
    cge__instance *inst = instance_new(dev, cge_graph_num_inputs(g));
    if (!inst)
        return oom();
    inst->prebuilt = true;
    inst->shared = shared;
    inst->plan = (cge_plan *)plan;
    inst->pg = g;
    cge_status st = io_table(inst);
    for (int32_t i = 0; !st && i < inst->num_inputs; i++)
        inst->input_shapes[i] = input_value(&inst->io, i)->desc.shape;
    if (st) {
        cge__instance_destroy(inst);
        return st;
    }
    return finish_plan(inst, constants, NULL, out);
}

const cge_graph *cge__instance_graph(const cge__instance *inst) { return inst->pg; }

void cge__instance_set_profile(cge__instance *inst, cge_profile_fn fn, void *user)
{
    inst->prof = fn;
    inst->prof_user = user;
}

bool cge__instance_matches(const cge__instance *inst, const cge_shape *input_shapes, int32_t n)
{
    if (n != inst->num_inputs)
        return false;
    for (int32_t i = 0; i < n; i++)
        if (!cge_shape_equal(&inst->input_shapes[i], &input_shapes[i]))
            return false;
    return true;
}


/* Every output gets the dtype and shape of this run first, so that a caller
 * whose buffer is too small learns from its own call what to retry with
 * (no state another thread could change in between). */
static cge_status check_outputs(value_table *t, cge_tensor *outputs, const int32_t *out_pos,
                                int32_t n)
{
    char sh[CGE_SHAPE_STR_MAX];
    for (int32_t i = 0; i < n; i++) {
        const value *v = output_value(t, out_pos[i]);
        outputs[i].dtype = v->desc.dtype;
        outputs[i].shape = v->desc.shape;
    }
    for (int32_t i = 0; i < n; i++) {
        const value *v = output_value(t, out_pos[i]);
        if (v->desc.type != CGE_TYPE_TENSOR) {
            /* The caller's cge_sequence (cge/sequence.h) receives a copy. */
            if (!outputs[i].data)
                return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                                 "output '%s' is a %s of %s: its data must be a cge_sequence",
                                 v->name, cge_value_type_name(v->desc.type),
                                 cge_dtype_name(v->desc.dtype));
            continue;
        }
        size_t need = cge_tensor_nbytes(v->desc.dtype, &v->desc.shape);
        if (outputs[i].bytes < need || (need && !outputs[i].data))
            return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                             "output '%s' is %s %s and needs %zu bytes; the buffer given has "
                             "%zu%s",
                             v->name, cge_dtype_name(v->desc.dtype),
                             cge_shape_str(&v->desc.shape, sh, sizeof sh), need, outputs[i].bytes,
                             outputs[i].data ? "" : " (data is NULL)");
    }
    return CGE_OK;
}

/* A profiled copy: enqueue, wait for it, report it. */
static cge_status profiled_copy(cge__instance *inst, cge_stream *stream, void *dst,
                                const void *src, size_t bytes, cge_memcpy_kind kind,
                                const char *name)
{
    double t0 = cge_profile_clock_ms();
    cge_status st = cge_memcpy_async(stream, dst, src, bytes, kind);
    double t1 = cge_profile_clock_ms();
    if (!st)
        st = cge_stream_synchronize(stream);
    cge_profile_event ev = {
        .kind = kind == CGE_MEMCPY_HOST_TO_DEVICE ? CGE_PROFILE_COPY_IN : CGE_PROFILE_COPY_OUT,
        .step = -1, .name = name, .op_type = "", .domain = "", .engine = "",
        .launch_begin_ms = t0, .launch_end_ms = t1, .end_ms = cge_profile_clock_ms(),
        .bytes = bytes};
    if (!st)
        inst->prof(&ev, inst->prof_user);
    return st;
}

/* Copies on `stream` between the caller's tensors and `t`'s buffers: the
 * plan's places (plan) or the eager buffers. Outputs were described by
 * check_outputs. */
static cge_status copy_outputs(cge__instance *inst, value_table *t, cge_stream *stream,
                               cge_tensor *outputs, const int32_t *out_pos, int32_t n, bool plan)
{
    cge_status st = CGE_OK;
    for (int32_t i = 0; !st && i < n; i++) {
        const value *v = output_value(t, out_pos[i]);
        if (plan && v->bound)
            continue;
        if (v->desc.type != CGE_TYPE_TENSOR) {
            /* host objects: copied once the stream has passed the run */
            st = cge_stream_synchronize(stream);
            if (!st)
                st = cge_sequence_copy(outputs[i].data, v->data);
            continue;
        }
        size_t need = cge_tensor_nbytes(v->desc.dtype, &v->desc.shape);
        if (need && inst->prof)
            st = profiled_copy(inst, stream, outputs[i].data, plan ? v->cur : v->data, need,
                               CGE_MEMCPY_DEVICE_TO_HOST, v->name);
        else if (need)
            st = cge_memcpy_async(stream, outputs[i].data, plan ? v->cur : v->data, need,
                                  CGE_MEMCPY_DEVICE_TO_HOST);
    }
    return st;
}

static cge_status copy_inputs(cge__instance *inst, value_table *t, cge_stream *stream,
                              const cge_tensor *inputs, const int32_t *in_pos, int32_t n,
                              bool plan)
{
    cge_status st = CGE_OK;
    for (int32_t i = 0; !st && i < n; i++) {
        value *v = input_value(t, in_pos[i]);
        if (plan && v->bound)
            continue;
        if (v->desc.type != CGE_TYPE_TENSOR) {
            /* The caller's cge_sequence, copied into the value's own (the
             * previous run is over: eager runs end synchronized). */
            st = cge_stream_synchronize(stream);
            if (!st && v->data)
                st = cge_sequence_copy(v->data, inputs[i].data);
            continue;
        }
        size_t need = cge_tensor_nbytes(v->desc.dtype, &inst->input_shapes[in_pos[i]]);
        if (need && (plan ? v->cur != NULL : v->bytes >= need) && inst->prof)
            st = profiled_copy(inst, stream, plan ? v->cur : v->data, inputs[i].data, need,
                               CGE_MEMCPY_HOST_TO_DEVICE, v->name);
        else if (need && (plan ? v->cur != NULL : v->bytes >= need))
            st = cge_memcpy_async(stream, plan ? v->cur : v->data, inputs[i].data, need,
                                  CGE_MEMCPY_HOST_TO_DEVICE);
    }
    return st;
}

/* A fixed node's outputs at the shapes the compiled graph gives them. */
static cge_status fixed_outputs(cge__instance *inst, eager_exec *ex, node_exec *ne)
{
    cge_status st = CGE_OK;
    for (int32_t i = 0; !st && i < cge_node_num_outputs(ne->node); i++) {
        value *v = &ex->vals.values[ne->out_idx[i]];
        if (!v->data)
            pool_take(ex, v, cge_tensor_nbytes(v->desc.dtype, &v->desc.shape));
        st = alloc_value(inst, v);
    }
    return st;
}

/* Output shapes by inference with the input values at hand, and buffers
 * for them. */
static cge_status infer_outputs(cge__instance *inst, eager_exec *ex, node_exec *ne,
                                cge_tensor_desc *in_desc, const void **vals,
                                cge_tensor_desc *out_desc, bool alloc)
{
    value *values = ex->vals.values;
    int32_t ni = cge_node_num_inputs(ne->node), no = cge_node_num_outputs(ne->node);
    for (int32_t i = 0; i < ni; i++) {
        memset(&in_desc[i], 0, sizeof in_desc[i]);
        vals[i] = NULL;
        in_desc[i].name = "";
        if (ne->in_idx[i] < 0)
            continue;
        in_desc[i] = values[ne->in_idx[i]].desc;
        vals[i] = values[ne->in_idx[i]].data;
    }
    for (int32_t i = 0; i < no; i++)
        out_desc[i] = (cge_tensor_desc){.name = values[ne->out_idx[i]].name};
    cge_status st = cge_op_infer(ne->def, cge_node_name(ne->node), cge_node_attrs_const(ne->node),
                                 in_desc, vals, NULL, ni, out_desc, no);
    for (int32_t i = 0; !st && i < no; i++) {
        value *v = &values[ne->out_idx[i]];
        if (v->desc.type != out_desc[i].type && v->data) {
            /* what the value holds changed (a first run): a new buffer */
            cge__value_release(v->desc.type, v->data);
            cge_mem_free(inst->dev, v->data);
            v->data = NULL;
            v->bytes = 0;
        }
        v->desc.dtype = out_desc[i].dtype;
        v->desc.shape = out_desc[i].shape;
        v->desc.type = out_desc[i].type;
        if (v->desc.type == CGE_TYPE_TENSOR && !cge_shape_is_static(&v->desc.shape))
            st = cge_error(CGE_LAYER_META, CGE_ERR_SHAPE,
                           "%s '%s': output %d's shape is unknown even with every input "
                           "value at hand",
                           cge_node_op_type(ne->node), cge_node_name(ne->node), i);
        if (!st && alloc && !v->data && v->desc.type == CGE_TYPE_TENSOR)
            pool_take(ex, v, cge_tensor_nbytes(v->desc.dtype, &v->desc.shape));
        if (!st && alloc)
            st = alloc_value(inst, v);
    }
    return st;
}

/* A view's output: its input's bytes, described by inference where the
 * compiled graph did not fix them; no launch. */
static cge_status alias_output(cge__instance *inst, eager_exec *ex, node_exec *ne,
                               cge_tensor_desc *in_desc, const void **vals,
                               cge_tensor_desc *out_desc)
{
    value *out = &ex->vals.values[ne->out_idx[0]];
    const value *root = &ex->vals.values[ne->alias_root];
    cge_status st = ne->fixed ? CGE_OK
                              : infer_outputs(inst, ex, ne, in_desc, vals, out_desc, false);
    size_t need = cge_tensor_nbytes(out->desc.dtype, &out->desc.shape);
    if (!st && need && (!root->data || root->bytes < need))
        st = cge_error(CGE_LAYER_SESSION, CGE_ERR_INTERNAL,
                       "node '%s': the view's %zu bytes are not in its input's buffer",
                       cge_node_name(ne->node), need);
    out->data = root->data;
    out->bytes = root->bytes;
    out->borrowed = true;   /* the root's buffer: never freed or pooled as this value's */
    return st;
}

/* Node by node: infer with the values at hand (the CPU device's memory is
 * host-addressable, so value-dependent shapes can be read after a sync). */
static cge_status run_eager(cge__instance *inst, eager_exec *ex, cge_stream *stream)
{
    cge_status st = CGE_OK;
    value *values = ex->vals.values;
    for (int32_t k = 0; !st && k < ex->num_nodes; k++) {
        node_exec *ne = &ex->nodes[k];
        int32_t ni = cge_node_num_inputs(ne->node), no = cge_node_num_outputs(ne->node);
        cge_tensor_desc in_buf[64], out_buf[64];
        const void *val_buf[64];
        cge_tensor_desc *in_desc = in_buf, *out_desc = out_buf;
        const void **vals = val_buf;
        void *big = NULL;   /* a node of more than 64 (a Concat of 90 pieces) */
        if (ni > 64 || no > 64) {
            size_t m = (size_t)(ni > no ? ni : no);
            big = malloc(m * (2 * sizeof(cge_tensor_desc) + sizeof(void *)));
            if (!big)
                return cge_error(CGE_LAYER_SESSION, CGE_ERR_NO_MEMORY,
                                 "node '%s': out of memory", cge_node_name(ne->node));
            in_desc = big;
            out_desc = in_desc + m;
            vals = (const void **)(out_desc + m);
        }
        /* Inference reads values: the previous node must have run. A fixed
         * node's shapes are known, and on an in-order stream the buffers the
         * previous node read last may go to nodes launched after it. */
        if (!ne->fixed || ne->args)
            st = cge_stream_synchronize(stream);
        for (int32_t j = 0; !st && k > 0 && j < ex->nodes[k - 1].num_release; j++)
            st = pool_put(ex, &values[ex->nodes[k - 1].release[j]]);
        if (!st && ne->alias_root >= 0) {
            st = alias_output(inst, ex, ne, in_desc, vals, out_desc);
            free(big);
            continue;
        }
        if (!st)
            st = ne->fixed ? fixed_outputs(inst, ex, ne)
                           : infer_outputs(inst, ex, ne, in_desc, vals, out_desc, true);
        if (!st)
            st = prepare_node(inst, ex, ne, stream);
        /* the shared workspace may have grown since the node was prepared */
        ne->ctx.workspace = ne->ctx.workspace_size ? ex->ws : NULL;
        double t0 = inst->prof ? cge_profile_clock_ms() : 0.0;
        if (!st)
            st = ne->kernel->launch(&ne->ctx, stream);
        if (!st && inst->prof) {
            double t1 = cge_profile_clock_ms();
            st = cge_stream_synchronize(stream);
            cge_profile_event ev = {
                .kind = CGE_PROFILE_KERNEL, .step = k, .name = cge_node_name(ne->node),
                .op_type = cge_node_op_type(ne->node), .domain = cge_node_domain(ne->node),
                .engine = ne->kernel->engine, .launch_begin_ms = t0, .launch_end_ms = t1,
                .end_ms = cge_profile_clock_ms()};
            if (!st)
                inst->prof(&ev, inst->prof_user);
        }
        free(big);
    }
    if (!st && ex->num_nodes > 0)
        st = cge_stream_synchronize(stream);
    for (int32_t j = 0; !st && ex->num_nodes > 0 && j < ex->nodes[ex->num_nodes - 1].num_release; j++)
        st = pool_put(ex, &values[ex->nodes[ex->num_nodes - 1].release[j]]);
    return st;
}

bool cge__instance_value_dependent(const cge__instance *inst) { return inst->eager; }

bool cge__instance_captured(const cge__instance *inst) { return inst->ri != NULL; }

void cge__instance_drop_capture(cge__instance *inst)
{
    cge_ri_destroy(inst->ri);
    inst->ri = NULL;
}

/* The plan's steps in order, each on its stream (0 is the run's stream):
 * extra streams fork from it first and join it at the end, so that the whole
 * run is ordered on `stream` (and a capture on it records every stream). */
static cge_status launch_all(cge__instance *inst, cge_stream *stream)
{
    cge_status st = CGE_OK;
    int32_t ns = inst->num_streams;
    cge_event **fork_join = inst->events + inst->num_events;
    inst->streams[0] = stream;
    if (ns > 1)
        st = cge_event_record(fork_join[0], stream);
    for (int32_t i = 1; !st && i < ns; i++)
        st = cge_stream_wait_event(inst->streams[i], fork_join[0]);
    for (int32_t k = 0; !st && k < cge_plan_num_steps(inst->plan); k++) {
        plan_exec *pe = &inst->steps[k];
        cge_stream *on = inst->streams[pe->step->stream];
        if (pe->step->folded && !pe->step->num_waits && pe->step->record < 0)
            continue;   /* its outputs are the plan's, computed once */
        for (int32_t w = 0; !st && w < pe->step->num_waits; w++)
            st = cge_stream_wait_event(on, inst->events[pe->step->waits[w]]);
        double t0 = inst->prof ? cge_profile_clock_ms() : 0.0;
        /* A run stopped (cge_cancel) between its steps says where: steps
         * run as launched on an immediate stream or step by step. */
        if (!st && (st = cge_cancel_check()) != CGE_OK) {
            char why[256];
            snprintf(why, sizeof why, "%s", cge_last_error());
            st = cge_error(CGE_LAYER_RUNTIME, st, "%s, at step %d of %d (%s '%s')",
                           strncmp(why, "[runtime] ", 10) ? why : why + 10, (int)k,
                           (int)cge_plan_num_steps(inst->plan), cge_node_op_type(pe->step->node),
                           cge_node_name(pe->step->node));
            break;
        }
        if (!st)
            st = pe->step->kernel->launch(&pe->ctx, on);
        if (!st && pe->step->record >= 0)
            st = cge_event_record(inst->events[pe->step->record], on);
        if (!st && (inst->step_sync || inst->prof)) {
            /* One step at a time: a failure stops at its step; a profile
             * attributes the time to it. */
            double t1 = cge_profile_clock_ms();
            st = cge_stream_synchronize(on);
            const cge_plan_step *s = pe->step;
            cge_profile_event ev = {
                .kind = CGE_PROFILE_KERNEL, .step = k, .name = cge_node_name(s->node),
                .op_type = cge_node_op_type(s->node), .domain = cge_node_domain(s->node),
                .engine = s->engine, .stream = s->stream, .launch_begin_ms = t0,
                .launch_end_ms = t1, .end_ms = cge_profile_clock_ms()};
            if (!st && inst->prof)
                inst->prof(&ev, inst->prof_user);
        }
    }
    /* The other streams join even after a failure: the run's stream must
     * not end before work it forked. */
    for (int32_t i = 1; i < ns; i++) {
        cge_status j = cge_event_record(fork_join[i], inst->streams[i]);
        if (!j)
            j = cge_stream_wait_event(stream, fork_join[i]);
        if (!st)
            st = j;
    }
    return st;
}

cge_status cge__instance_capture(cge__instance *inst, cge_stream *stream)
{
    if (inst->ri)
        return CGE_OK;
    if (inst->eager)
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_UNSUPPORTED,
                         "graph '%s': shapes depend on values computed at run time; it cannot "
                         "be captured for replay",
                         cge_graph_name(inst->pg));
    /* Only the kernels are recorded: inputs and outputs are copied by each
     * run, around the replay, from and to the caller's buffers. */
    cge_status st = cge_stream_begin_capture(stream, CGE_CAPTURE_THREAD_LOCAL);
    if (st)
        return st;
    st = launch_all(inst, stream);
    cge_ri *ri = NULL;
    cge_status end = cge_stream_end_capture(stream, &ri);
    if (st) {
        cge_ri_destroy(ri);
        return st;
    }
    if (end)
        return end;
    /* The kernels read and write the caller's bound buffers through their
     * arguments, which the hazard guard does not see: name them to it. */
    for (int32_t pass = 0; !st && pass < 2; pass++) {
        int32_t n = pass ? cge_graph_num_outputs(inst->pg) : cge_graph_num_inputs(inst->pg);
        for (int32_t k = 0; !st && k < n; k++) {
            const value *v = pass ? output_value(&inst->io, k) : input_value(&inst->io, k);
            if (v->bound)
                st = cge_ri_track_range(ri, v->cur, cge_tensor_nbytes(v->desc.dtype, &v->desc.shape),
                                        pass == 1);
        }
    }
    if (st) {
        cge_ri_destroy(ri);
        return st;
    }
    inst->ri = ri;
    return CGE_OK;
}

/* Synchronous runs on the calling thread: inputs copied in, `body` run (a
 * replay, or the plan's steps on an immediate stream), outputs copied out,
 * after the runs still in flight on other streams. */
static cge_status copy_inputs_now(cge__instance *inst, const cge_tensor *inputs,
                                  const int32_t *in_pos, int32_t num_inputs)
{
    cge_status st = CGE_OK;
    for (int32_t i = 0; !st && i < num_inputs; i++) {
        value *v = input_value(&inst->io, in_pos[i]);
        size_t need = cge_tensor_nbytes(v->desc.dtype, &v->desc.shape);
        if (need && v->cur && !v->bound)
            st = cge_memcpy(inst->dev, v->cur, inputs[i].data, need, CGE_MEMCPY_HOST_TO_DEVICE);
    }
    return st;
}

static cge_status copy_outputs_now(cge__instance *inst, cge_tensor *outputs,
                                   const int32_t *out_pos, int32_t num_outputs)
{
    cge_status st = CGE_OK;
    for (int32_t i = 0; !st && i < num_outputs; i++) {
        const value *v = output_value(&inst->io, out_pos[i]);
        size_t need = cge_tensor_nbytes(v->desc.dtype, &v->desc.shape);
        if (need && !v->bound)
            st = cge_memcpy(inst->dev, outputs[i].data, v->cur, need, CGE_MEMCPY_DEVICE_TO_HOST);
    }
    return st;
}

/* The plan's steps launched on an immediate stream: each runs as it is
 * launched, on this thread (multi-block ones shared with idle workers), so
 * that libraries with thread teams of their own (oneDNN's OpenMP) keep one
 * team on one thread instead of one per pool worker, and no step waits for
 * a worker to wake. Kernel failures come back from its synchronize. */
static cge_status launch_inline(cge__instance *inst)
{
    cge_status st = CGE_OK;
    if (!inst->inline_stream)
        st = cge_stream_create_immediate(inst->dev, &inst->inline_stream);
    if (!st)
        st = cge_stream_burst_begin(inst->inline_stream);
    if (!st) {
        st = launch_all(inst, inst->inline_stream);
        cge_stream_burst_end(inst->inline_stream);
    }
    cge_status s2 = inst->inline_stream ? cge_stream_synchronize(inst->inline_stream) : CGE_OK;
    return st ? st : s2;
}

cge_status cge__instance_run(cge__instance *inst, cge_stream *stream, const cge_tensor *inputs,
                            const int32_t *in_pos, int32_t num_inputs, cge_tensor *outputs,
                            const int32_t *out_pos, int32_t num_outputs, cge_run_mode mode,
                            bool sync)
{
    cge_status st;
    if ((inst->prebuilt || inst->steps_only || inst->released_bytes || inst->eager_by_steps) &&
        !inst->eager && mode == CGE_RUN_EAGER) {
        /* A loaded model has no unoptimised graph (a symbolic one's has no
         * constants), and one whose weights went once packed has it without
         * them: its eager runs are the
         * plan's steps, each synchronized before the next. */
        inst->step_sync = true;
        st = cge__instance_run(inst, stream, inputs, in_pos, num_inputs, outputs, out_pos,
                              num_outputs, CGE_RUN_PLAN, true);
        inst->step_sync = false;
        return st;
    }
    inst->last_eager = inst->eager || mode == CGE_RUN_EAGER;
    if (inst->last_eager) {
        /* A plan instance's EAGER runs take the unoptimised graph, node by
         * node; its tables are made on the first such run. */
        eager_exec *ex = &inst->ex;
        cge_stream *on = stream;
        /* A synchronous run goes node by node on this thread, as a plan run
         * does (launch_inline): each node launched on a stream's worker and
         * waited for before the next one's inference cost two thread
         * switches a node, most of the time of a detector's hundreds of
         * small nodes (Shape, Gather, Unsqueeze: 20-40 us each). */
        bool burst = false;
        if (sync) {
            st = cge_event_synchronize(inst->done);
            if (!st && !inst->inline_stream)
                st = cge_stream_create_immediate(inst->dev, &inst->inline_stream);
            if (!st) {
                on = inst->inline_stream;
                burst = !(st = cge_stream_burst_begin(on));
            }
        } else {
            st = cge_stream_wait_event(stream, inst->done);
        }
        if (!st && !ex->built)
            st = eager_build(inst, ex, inst->src);
        if (!st)
            st = eager_buffers(inst, ex);
        if (!st)
            st = copy_inputs(inst, &ex->vals, on, inputs, in_pos, num_inputs, false);
        if (!st)
            st = run_eager(inst, ex, on);
        if (!st)
            st = cge_stream_synchronize(on);
        if (!st)
            st = check_outputs(&ex->vals, outputs, out_pos, num_outputs);
        if (!st)
            st = copy_outputs(inst, &ex->vals, on, outputs, out_pos, num_outputs, false);
        if (burst)
            cge_stream_burst_end(on);
        if (on != stream) {
            cge_status s2 = cge_stream_synchronize(on);
            if (!st)
                st = s2;
        }
    } else if (sync && ((mode == CGE_RUN_REPLAY && inst->ri) ||
                        (mode == CGE_RUN_PLAN && inst->num_streams == 1 && !inst->prof &&
                         !inst->step_sync))) {
        /* A synchronous replay (cge_ri_execute) or one-stream plan run goes
         * on the calling thread, after the runs still in flight on other
         * streams; inputs and outputs are plain copies around it. */
        st = check_outputs(&inst->io, outputs, out_pos, num_outputs);
        if (!st)
            st = cge_event_synchronize(inst->done);
        if (!st && inst->after)
            st = cge_event_synchronize(inst->after);
        if (!st)
            st = copy_inputs_now(inst, inputs, in_pos, num_inputs);
        if (!st)
            st = mode == CGE_RUN_REPLAY ? cge_ri_execute(inst->ri, -1) : launch_inline(inst);
        if (!st)
            st = copy_outputs_now(inst, outputs, out_pos, num_outputs);
        return st;
    } else {
        if (mode == CGE_RUN_REPLAY && !inst->ri)
            return cge_error(CGE_LAYER_SESSION, CGE_ERR_STATE,
                             "graph '%s': replay requested before a capture", cge_graph_name(inst->pg));
        st = check_outputs(&inst->io, outputs, out_pos, num_outputs);
        if (!st)
            st = cge_stream_wait_event(stream, inst->done);
        if (!st && inst->after)
            st = cge_stream_wait_event(stream, inst->after);
        if (!st)
            st = copy_inputs(inst, &inst->io, stream, inputs, in_pos, num_inputs, true);
        if (!st)
            st = mode == CGE_RUN_REPLAY ? cge_ri_execute_async(inst->ri, stream)
                                        : launch_all(inst, stream);
        if (!st)
            st = copy_outputs(inst, &inst->io, stream, outputs, out_pos, num_outputs,
                              true);
    }
    cge_status rec = cge_event_record(inst->done, stream);
    if (!st)
        st = rec;
    if (sync) {
        cge_status s2 = cge_stream_synchronize(stream);
        if (!st)
            st = s2;
        /* A kernel failure is reported by the stream it ran on: the plan's
         * other streams joined this one, but their errors stay with them. */
        for (int32_t i = 1; !inst->last_eager && i < inst->num_streams; i++) {
            s2 = inst->streams && inst->streams[i] ? cge_stream_synchronize(inst->streams[i])
                                                    : CGE_OK;
            if (!st)
                st = s2;
        }
    }
    return st;
}

cge_status cge__instance_output_desc(const cge__instance *inst, int32_t pos, cge_tensor_desc *out)
{
    cge__instance *in = (cge__instance *)inst;
    const value *v = in->eager || in->last_eager ? output_value(&in->ex.vals, pos)
                                    : output_value(&in->io, pos);
    if (!v)
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_INTERNAL, "output %d has no value", pos);
    *out = v->desc;
    return CGE_OK;
}
