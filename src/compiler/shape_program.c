/* The shape program of a symbolic plan (cge_shape_program_run,
 * cge_plan_specialize): a concrete plan for one input signature from the
 * plan's own steps, by running each step's meta on concrete shapes and giving
 * the fixed lifetimes offsets. No pass, no graph copy, no whole-graph
 * inference; made again in place, its buffers reused, at each new size. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler_internal.h"
#include "runtime/warm_memory.h"

/* Why meta along the steps is the shape program, and not expressions of the
 * dims recorded once: meta already is the one statement of every operator's
 * shape rule and constraints, so a run at a new size refuses exactly what a
 * compile would ([meta] errors naming the node) and no rule is written twice.
 * A step's meta costs a fraction of a microsecond; a few hundred steps are
 * tens of microseconds, paid only when the input dims change. Shape
 * computations inside the graph (Shape -> Gather -> Concat -> Reshape) need
 * their values for the Reshape's meta: small integer values are evaluated
 * here with their CPU kernels on host memory, as the compiler's inference
 * does (cc_launch_on_host, cc_shape_values). The plan's structure (steps,
 * kernels, alias groups, lifetimes) does not depend on sizes; only bytes,
 * offsets and workspaces do.
 *
 * A decode loop meets a new size at every step, so the program keeps its
 * per-value arrays, the host values' buffers and an immediate stream from
 * one run to the next (nothing is allocated once sizes stop growing), and a
 * plan it rewrites in place keeps its offsets while every block fits the
 * bytes it was planned for: only a block that outgrows them plans the
 * arena again, with half as much again for each block that grew, so that a
 * cache growing a row per step re-plans a few times, not at every step.
 *
 * A new size changes few values in a decode step (the caches, the attention
 * over them, the shape computations of the past length), so a run keeps the
 * list of what it changed: the values whose shape, bytes or host value
 * differ from the last run's, the steps whose workspace does. When the plan
 * it rewrites is the one it wrote last (its stamp) and the change moves no
 * offset and no host value's place, only those entries are written (a
 * "delta" run), and the caller (the session's instance) rebinds only the
 * steps that read or write them (cge_shape_program_last_changes). */

#define MAX_IO CC_STEP_MAX_IO
/* Values evaluated here are shape-sized (as the infer pass's). */
#define SMALL_BYTES 4096

struct cge_shape_program {
    const cge_plan *sp;
    const cge_graph *g;
    const cge_plan_value *vals;
    int32_t nv, ns;
    cge_device *dev;
    cge_stream *imm;
    const void **consts;      /* per value: its constant bytes in the graph, or NULL */
    cge_shape *shape;         /* per value, concrete */
    size_t *bytes;
    const void **data;        /* per value: constant bytes, or host values made here */
    void **owned;             /* per value: buffer for a host value (kept across runs) */
    size_t *owned_bytes;      /* its capacity */
    bool *made;               /* the value was computed on the host (this run's) */
    bool *dirty;              /* its shape or host value differs from the last run's */
    bool valid;               /* the arrays hold the last run's results (a run
                                 recomputes only the steps whose inputs changed) */
    bool *host;               /* ... and the plan keeps it (CGE_STORAGE_HOST) */
    size_t *ws;               /* per step */
    cge_mem_block *blocks;
    int32_t *block_of;        /* per value: its block, or -1 */
    int32_t *block_item;      /* per block: the value, or num_values + step */
    cc_scratch scratch;       /* host evaluations' workspaces */
    int64_t replans;
    /* What this run changed (valid runs only): values whose shape, bytes or
     * host value differ from the last run's, steps whose workspace does. */
    int32_t *changed, num_changed;
    int32_t *ws_changed, num_ws_changed;
    bool made_changed;        /* a value's being computed here differs */
    int32_t *root;            /* per value: its memory's owner (symbolic plan) */
    int32_t *grp_start, *grp_vals;  /* values by root */
    int32_t *host_list, num_host;   /* the host values, in plan order */
    uint64_t stamp;           /* the mark written into the plan written last */
    bool all_dirty;           /* the last run started from scratch */
    bool delta;               /* the last run wrote only the changed entries */
    bool no_delta;            /* $CGE_DELTA_REBIND=0: every run writes all (A/B) */
    cge_shape_program_stats stats;
    uint8_t *eval_kind;       /* per step: EVAL_* */
};

/* What evaluate_outputs may do with a step, decided once per step (the op
 * and engine names are compared at create, not at every run). */
enum { EVAL_NEVER, EVAL_SHAPE, EVAL_KERNEL };

/* Marks of the plans programs write: a plan whose mark is a program's last
 * holds exactly that program's last results. */
static atomic_uint_fast64_t next_stamp = 1;

static cge_status oom(void)
{
    return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "specialize: out of memory");
}

static cge_status unsupported(const cge_plan_step *st, const char *why)
{
    return cge_error(CGE_LAYER_META, CGE_ERR_UNSUPPORTED, "%s '%s': %s", cge_node_op_type(st->node),
                     cge_node_name(st->node), why);
}

/* Value v differs from the last run's (listed once per run). A run after
 * an invalid one has every value dirty and lists nothing: it writes all. */
static void mark(cge_shape_program *s, int32_t v)
{
    if (s->dirty[v])
        return;
    s->dirty[v] = true;
    s->changed[s->num_changed++] = v;
}

/* Constant bytes of plan value v in place, in the plan's graph. */
static const void *constant_data(const cge_shape_program *s, int32_t v)
{
    const cge_plan_value *pv = &s->vals[v];
    if (pv->storage != CGE_STORAGE_CONSTANT)
        return NULL;
    const cge_plan_value *root = &s->vals[cge_plan_root_value(s->sp, v)];
    const cge_tensor *t = cge_graph_constant(s->g, root->name);
    if (!t || t->bytes < pv->offset - root->offset + pv->bytes)
        return NULL;
    return (const char *)t->data + (pv->offset - root->offset);
}

/* Host buffer for value v of `bytes`, the one of earlier runs when it fits. */
static void *host_buffer(cge_shape_program *s, int32_t v, size_t bytes)
{
    if (s->owned[v] && s->owned_bytes[v] >= bytes)
        return s->owned[v];
    void *b = malloc(bytes + 8);
    if (!b)
        return NULL;
    s->stats.allocations++;
    free(s->owned[v]);
    s->owned[v] = b;
    s->owned_bytes[v] = bytes;
    return b;
}

/* Host value of a small computation all of whose inputs are at hand: Shape
 * and Size from the shape alone, the rest by their CPU kernel. A step that
 * cannot be evaluated leaves its outputs unknown (the run computes them). */
static cge_status evaluate_outputs(cge_shape_program *s, const cge_plan_step *st, bool *same)
{
    int32_t ni = st->num_inputs, no = st->num_outputs;
    size_t total = 0;
    for (int32_t k = 0; k < no; k++)
        total += s->bytes[st->outputs[k]];
    uint8_t kind = s->eval_kind[st - cge_plan_steps(s->sp)];
    if (total > SMALL_BYTES || kind == EVAL_NEVER)
        return CGE_OK;
    if (kind == EVAL_SHAPE) {
        int32_t o = st->outputs[0];
        int64_t v[CGE_MAX_RANK + 1];
        if (st->inputs[0] < 0 || !cc_shape_values(st->node, &s->shape[st->inputs[0]], &s->shape[o], v))
            return CGE_OK;
        same[0] = s->owned[o] && s->owned_bytes[o] >= s->bytes[o] &&
                  !memcmp(s->owned[o], v, s->bytes[o]);
        void *b = host_buffer(s, o, s->bytes[o]);
        if (!b)
            return oom();
        memcpy(b, v, s->bytes[o]);
        s->data[o] = b;
        s->made[o] = true;
        return CGE_OK;
    }
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
    /* The outputs' last values, to tell whether they changed. */
    char before[SMALL_BYTES + 8];
    size_t at = 0;
    for (int32_t k = 0; k < no; k++) {
        int32_t v = st->outputs[k];
        bool had = s->owned[v] && s->owned_bytes[v] >= s->bytes[v];
        void *b = host_buffer(s, v, s->bytes[v]);
        if (!b)
            return oom();
        if (had)
            memcpy(before + at, b, s->bytes[v]);
        same[k] = had;
        at += s->bytes[v];
        outs[k] = (cge_tensor){.name = s->vals[v].name, .dtype = s->vals[v].dtype,
                               .shape = s->shape[v], .bytes = s->bytes[v], .data = b};
    }
    cge_status rc = cc_launch_on_host(s->dev, s->imm, st->node, st->kernel, ins, ni, outs, no,
                                      &s->scratch);
    if (rc && rc != CGE_ERR_NO_MEMORY) {
        cge_clear_error();   /* not known now; the run computes it and reports a problem */
        return CGE_OK;
    }
    at = 0;
    for (int32_t k = 0; !rc && k < no; k++) {
        int32_t v = st->outputs[k];
        same[k] = same[k] && !memcmp(before + at, outs[k].data, s->bytes[v]);
        at += s->bytes[v];
        s->data[v] = outs[k].data;
        s->made[v] = true;
    }
    return rc;
}

/* evaluate_outputs, and which outputs now differ from the last run: known
 * then and not now (or the reverse), or known with other values. */
static cge_status evaluate(cge_shape_program *s, const cge_plan_step *st)
{
    bool was[MAX_IO], same[MAX_IO];
    for (int32_t k = 0; k < st->num_outputs; k++) {
        int32_t v = st->outputs[k];
        was[k] = s->made[v];
        same[k] = false;
        s->made[v] = false;
        s->data[v] = NULL;
    }
    cge_status rc = evaluate_outputs(s, st, same);
    for (int32_t k = 0; k < st->num_outputs; k++) {
        int32_t v = st->outputs[k];
        s->made_changed = s->made_changed || was[k] != s->made[v];
        if (was[k] != s->made[v] || (s->made[v] && !same[k]))
            mark(s, v);
    }
    return rc;
}

/* Meta along the steps: every value's concrete shape and bytes, and the
 * workspace each step asks for at them. */
static cge_status run_meta(cge_shape_program *s)
{
    const cge_plan_step *steps = cge_plan_steps(s->sp);
    cge_tensor_desc in[MAX_IO], out[MAX_IO];
    const void *iv[MAX_IO];
    int32_t threads = cge_device_num_threads(s->dev);
    for (int32_t t = 0; t < s->ns; t++) {
        const cge_plan_step *st = &steps[t];
        int32_t ni = st->num_inputs, no = st->num_outputs;
        if (ni > MAX_IO || no > MAX_IO)
            return unsupported(st, "more than 64 inputs or outputs");
        /* Inputs as at the last run: so are its outputs and workspace. */
        bool changed = !s->valid;
        for (int32_t k = 0; !changed && k < ni; k++)
            changed = st->inputs[k] >= 0 && s->dirty[st->inputs[k]];
        if (!changed)
            continue;
        s->stats.metas++;
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
            if (s->valid && !cge_shape_equal(&s->shape[v], &out[k].shape))
                mark(s, v);
            s->shape[v] = out[k].shape;
            s->bytes[v] = cge_tensor_nbytes(out[k].dtype, &out[k].shape);
            if (s->bytes[v] == SIZE_MAX)
                return unsupported(st, "an output's size overflows");
        }
        rc = evaluate(s, st);
        if (rc)
            return rc;
        size_t ws = cc_step_workspace(st, s->vals, s->shape, s->bytes, threads);
        if (s->valid && ws != s->ws[t])
            s->ws_changed[s->num_ws_changed++] = t;
        s->ws[t] = ws;
    }
    return CGE_OK;
}

void cge_shape_program_destroy(cge_shape_program *s)
{
    if (!s)
        return;
    for (int32_t v = 0; s->owned && v < s->nv; v++)
        free(s->owned[v]);
    cge_stream_destroy(s->imm);
    free(s->consts);
    free(s->shape);
    free(s->bytes);
    free(s->data);
    free(s->owned);
    free(s->owned_bytes);
    free(s->made);
    free(s->dirty);
    free(s->host);
    free(s->ws);
    free(s->blocks);
    free(s->block_of);
    free(s->block_item);
    free(s->changed);
    free(s->ws_changed);
    free(s->root);
    free(s->grp_start);
    free(s->grp_vals);
    free(s->host_list);
    free(s->eval_kind);
    free(s->scratch.data);
    free(s);
}

cge_status cge_shape_program_create(const cge_plan *sym, cge_device *dev, cge_shape_program **out)
{
    if (!sym || !dev || !out)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "specialize: NULL argument");
    *out = NULL;
    const cge_graph *g = cge_plan_graph(sym);
    if (!cge_plan_is_symbolic(sym))
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                         "specialize: the plan of '%s' is not symbolic", cge_graph_name(g));
    if (strcmp(cge_device_name(dev), "cpu"))
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_UNSUPPORTED,
                         "specialize: small shape computations are evaluated on a CPU device");
    cge_shape_program *s = calloc(1, sizeof *s);
    if (!s)
        return oom();
    *s = (cge_shape_program){.sp = sym, .g = g, .vals = cge_plan_values(sym),
                             .nv = cge_plan_num_values(sym), .ns = cge_plan_num_steps(sym),
                             .dev = dev};
    size_t nv1 = (size_t)s->nv + 1, ns1 = (size_t)s->ns + 1;
    s->consts = calloc(nv1, sizeof *s->consts);
    s->shape = malloc(sizeof *s->shape * nv1);
    s->bytes = malloc(sizeof *s->bytes * nv1);
    s->data = calloc(nv1, sizeof *s->data);
    s->owned = calloc(nv1, sizeof *s->owned);
    s->owned_bytes = calloc(nv1, sizeof *s->owned_bytes);
    s->made = calloc(nv1, sizeof *s->made);
    s->dirty = calloc(nv1, sizeof *s->dirty);
    s->host = calloc(nv1, sizeof *s->host);
    s->ws = calloc(ns1, sizeof *s->ws);
    s->blocks = malloc(sizeof *s->blocks * (nv1 + ns1));
    s->block_of = malloc(sizeof *s->block_of * nv1);
    s->block_item = malloc(sizeof *s->block_item * (nv1 + ns1));
    s->changed = malloc(sizeof *s->changed * nv1);
    s->ws_changed = malloc(sizeof *s->ws_changed * ns1);
    s->root = malloc(sizeof *s->root * nv1);
    s->grp_start = calloc(nv1 + 1, sizeof *s->grp_start);
    s->grp_vals = malloc(sizeof *s->grp_vals * nv1);
    s->host_list = malloc(sizeof *s->host_list * nv1);
    s->eval_kind = malloc(ns1);
    if (!s->eval_kind || !s->consts || !s->shape || !s->bytes || !s->data || !s->owned || !s->owned_bytes ||
        !s->made || !s->dirty || !s->host || !s->ws || !s->blocks || !s->block_of ||
        !s->block_item || !s->changed || !s->ws_changed || !s->root || !s->grp_start ||
        !s->grp_vals || !s->host_list) {
        cge_shape_program_destroy(s);
        return oom();
    }
    const cge_plan_step *steps = cge_plan_steps(sym);
    for (int32_t t = 0; t < s->ns; t++) {
        const cge_plan_step *st = &steps[t];
        s->eval_kind[t] = st->num_outputs == 0 || cc_is_nondeterministic(st->node) ? EVAL_NEVER
                          : cc_is_op(st->node, "Shape") || cc_is_op(st->node, "Size") ? EVAL_SHAPE
                          : strcmp(st->kernel->engine, "cpu")                          ? EVAL_NEVER
                                                                                        : EVAL_KERNEL;
    }
    const char *env = getenv("CGE_DELTA_REBIND");
    s->no_delta = env && !strcmp(env, "0");
    for (int32_t v = 0; v < s->nv; v++) {
        s->consts[v] = constant_data(s, v);
        s->root[v] = cge_plan_root_value(sym, v);
        s->grp_start[s->root[v] + 2]++;
    }
    /* Each memory group's values, for the checks a delta run makes on the
     * groups whose values changed. */
    for (int32_t r = 0; r < s->nv; r++)
        s->grp_start[r + 2] += s->grp_start[r + 1];
    for (int32_t v = 0; v < s->nv; v++)
        s->grp_vals[s->grp_start[s->root[v] + 1]++] = v;
    *out = s;
    return CGE_OK;
}

int64_t cge_shape_program_replans(const cge_shape_program *s) { return s ? s->replans : 0; }

void cge_shape_program_use_constants(cge_shape_program *s, const void *blob)
{
    for (int32_t v = 0; s && blob && v < s->nv; v++)
        if (!s->consts[v] && s->vals[v].storage == CGE_STORAGE_CONSTANT)
            s->consts[v] = (const char *)blob + s->vals[v].offset;
    if (s)
        s->valid = false;
}

/* Which values the plan keeps on the host: values computed here (shape
 * computations: Shape, Gather, Concat, ... of sizes) are the same at every
 * run of these sizes, and the steps that make them are not launched. A
 * memory group moves to the host whole, or not at all. */
static size_t choose_host(cge_shape_program *s)
{
    for (int32_t v = 0; v < s->nv; v++)
        s->host[v] = s->vals[v].storage == CGE_STORAGE_ARENA && s->made[v] &&
                     s->vals[v].input_index < 0 && s->vals[v].output_index < 0;
    for (int32_t v = 0; v < s->nv; v++)
        if (!s->host[v] && s->vals[v].storage == CGE_STORAGE_ARENA)
            s->host[s->root[v]] = false;
    size_t bytes = 0;
    s->num_host = 0;
    for (int32_t v = 0; v < s->nv; v++) {
        if (s->host[v] && !s->host[s->root[v]])
            s->host[v] = false;
        if (s->host[v]) {
            bytes += (s->bytes[v] + 63) & ~(size_t)63;
            s->host_list[s->num_host++] = v;
        }
    }
    return bytes;
}

/* The arena blocks (each memory group's owner, each step's workspace) at
 * these sizes: whether each fits the bytes `reserved` says its offset was
 * planned for (zero: never planned). */
static bool make_blocks(cge_shape_program *s, const size_t *reserved, int32_t *nb)
{
    bool fits = reserved != NULL;
    int32_t n = 0;
    for (int32_t v = 0; v < s->nv; v++) {
        s->block_of[v] = -1;
        if (s->vals[v].alias_of >= 0 || s->vals[v].storage != CGE_STORAGE_ARENA || !s->bytes[v] ||
            s->host[v])
            continue;
        s->block_of[v] = n;
        s->block_item[n] = v;
        s->blocks[n++] = (cge_mem_block){.bytes = s->bytes[v], .first = s->vals[v].first_step,
                                         .last = s->vals[v].last_step};
        fits = fits && s->bytes[v] <= reserved[v];
    }
    for (int32_t t = 0; t < s->ns; t++)
        if (s->ws[t]) {
            s->block_item[n] = s->nv + t;
            s->blocks[n++] = (cge_mem_block){.bytes = s->ws[t], .first = t,
                                             .last = cge_plan_workspace_last_step(s->sp, t)};
            fits = fits && s->ws[t] <= reserved[s->nv + t];
        }
    *nb = n;
    return fits;
}

/* The memory the symbolic plan shares (views, in-place outputs) must have
 * equal bytes at these sizes: for every value (a full run), or for the
 * groups of the values this run changed. */
static cge_status check_shared(const cge_shape_program *s, bool all)
{
    int32_t n = all ? s->nv : s->num_changed;
    for (int32_t i = 0; i < n; i++) {
        int32_t c = all ? i : s->changed[i], r = s->root[c];
        int32_t lo = all ? 0 : s->grp_start[r], hi = all ? 1 : s->grp_start[r + 1];
        for (int32_t g = lo; g < hi; g++) {
            int32_t v = all ? c : s->grp_vals[g];
            if (r != v && s->vals[v].storage == CGE_STORAGE_ARENA && s->bytes[v] != s->bytes[r])
                return cge_error(CGE_LAYER_META, CGE_ERR_UNSUPPORTED,
                                 "specialize: '%s' shares the memory of '%s' but has %zu bytes, "
                                 "not %zu",
                                 s->vals[v].name, s->vals[r].name, s->bytes[v], s->bytes[r]);
        }
    }
    return CGE_OK;
}

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Whether plan p (the one this program wrote last, so holding the last
 * run's results) takes this run's changes in place: no value computed here
 * came or went (the host values and folded steps stay), no host value's
 * rounded size changed (their places stay), and every changed arena block
 * and workspace fits the room its offset was planned for without appearing
 * or vanishing (the offsets stay). */
static bool delta_fits(const cge_shape_program *s, const cge_plan *p, const size_t *reserved)
{
    if (s->made_changed || !reserved)
        return false;
    const cge_plan_value *pv = cge_plan_values(p);
    for (int32_t i = 0; i < s->num_changed; i++) {
        int32_t v = s->changed[i];
        size_t was = pv[v].bytes, now = s->bytes[v];
        if (s->host[v] && round64(was) != round64(now))
            return false;
        if (s->vals[v].alias_of >= 0 || s->vals[v].storage != CGE_STORAGE_ARENA || s->host[v])
            continue;
        if (!was != !now || now > reserved[v])
            return false;
    }
    const cge_plan_step *ps = cge_plan_steps(p);
    for (int32_t i = 0; i < s->num_ws_changed; i++) {
        int32_t t = s->ws_changed[i];
        size_t was = ps[t].workspace_bytes, now = s->ws[t];
        if (!was != !now || now > reserved[s->nv + t])
            return false;
    }
    return true;
}

/* The delta run's writes: the changed values' shapes, bytes and host
 * bytes, the changed workspaces' sizes; nothing else moved. */
static void write_delta(const cge_shape_program *s, cge_plan *p)
{
    cge_plan_value *pv = cge__plan_values_mut(p);
    char *blob = (char *)cge_plan_host_data(p);
    for (int32_t i = 0; i < s->num_changed; i++) {
        int32_t v = s->changed[i];
        pv[v].shape = s->shape[v];
        pv[v].bytes = s->bytes[v];
        if (s->host[v] && s->bytes[v])
            memcpy(blob + pv[v].offset, s->data[v], s->bytes[v]);
    }
    cge_plan_step *ps = cge__plan_steps_mut(p);
    for (int32_t i = 0; i < s->num_ws_changed; i++)
        ps[s->ws_changed[i]].workspace_bytes = s->ws[s->ws_changed[i]];
}

static cge_status run_program(cge_shape_program *s, const cge_shape *input_shapes,
                              int32_t num_inputs, cge_plan **plan)
{
    if (!s || !plan || (num_inputs && !input_shapes))
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "specialize: NULL argument");
    if (num_inputs != cge_graph_num_inputs(s->g))
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                         "specialize: graph '%s' has %d inputs, %d shapes given",
                         cge_graph_name(s->g), (int)cge_graph_num_inputs(s->g), (int)num_inputs);
    bool was_valid = s->valid;
    s->delta = false;
    if (was_valid && s->all_dirty) {
        /* After a run from scratch every value was dirty. */
        memset(s->dirty, 0, sizeof *s->dirty * (size_t)s->nv);
    } else if (was_valid) {
        /* Only the values the last run changed are dirty. */
        for (int32_t i = 0; i < s->num_changed; i++)
            s->dirty[s->changed[i]] = false;
    } else {
        for (int32_t v = 0; v < s->nv; v++) {
            s->dirty[v] = true;
            s->shape[v] = s->vals[v].shape;
            s->bytes[v] = cge_shape_is_static(&s->vals[v].shape) ? s->vals[v].bytes : 0;
            s->data[v] = s->consts[v];
            s->made[v] = false;
        }
    }
    s->all_dirty = !was_valid;
    s->num_changed = s->num_ws_changed = 0;
    s->made_changed = false;
    for (int32_t i = 0; i < num_inputs; i++) {
        int32_t v = cge_plan_input_value(s->sp, i);
        if (v < 0 || (was_valid && cge_shape_equal(&s->shape[v], &input_shapes[i])))
            continue;
        s->shape[v] = input_shapes[i];
        s->bytes[v] = cge_tensor_nbytes(s->vals[v].dtype, &input_shapes[i]);
        if (was_valid)
            mark(s, v);
    }
    cge_status st = run_meta(s);
    /* A run that failed part way leaves the arrays between two signatures:
     * the next one starts from scratch. */
    s->valid = st == CGE_OK;
    if (!st)
        st = check_shared(s, !was_valid);
    if (st)
        return st;
    cge_plan *p = *plan;
    bool fresh = p == NULL;
    size_t *reserved = p ? cge__plan_reserved(p) : NULL;
    if (p && !reserved)
        return oom();
    if (was_valid && p && s->stamp && !s->no_delta && cge__plan_stamp(p) == s->stamp &&
        delta_fits(s, p, reserved)) {
        write_delta(s, p);
#ifndef NDEBUG
        st = cge_plan_verify(p);
        if (st) {
            s->valid = false;
            return st;
        }
#endif
        s->delta = true;
        s->stats.runs++;
        s->stats.delta_runs++;
        s->stamp = atomic_fetch_add(&next_stamp, 1);
        cge__plan_set_stamp(p, s->stamp);
        return CGE_OK;
    }
    size_t host_bytes = s->made_changed || !was_valid ? choose_host(s) : 0;
    if (!s->made_changed && was_valid) {
        for (int32_t i = 0; i < s->num_host; i++)   /* the same host values */
            host_bytes += round64(s->bytes[s->host_list[i]]);
    }
    int32_t nb = 0;
    size_t arena = p ? cge_plan_arena_bytes(p) : 0;
    if (!make_blocks(s, reserved, &nb)) {
        /* Re-planned: a block that outgrew its room gets half as much again
         * (it is likely to grow again: a cache, a sequence); one that fits
         * keeps the room it had. A first plan is exact. */
        for (int32_t b = 0; reserved && b < nb; b++) {
            size_t r = reserved[s->block_item[b]], need = s->blocks[b].bytes;
            s->blocks[b].bytes = need <= r ? r : (need + need / 2 + 63) & ~(size_t)63;
        }
        st = cge_memplan_assign(s->blocks, nb, 64, CGE_MEMPLAN_AUTO, &arena);
        if (!st && p)
            s->replans++;
    } else {
        /* Every block fits where it was: the offsets stay. */
        const cge_plan_value *pv = cge_plan_values(p);
        const cge_plan_step *ps = cge_plan_steps(p);
        for (int32_t b = 0; b < nb; b++) {
            int32_t it = s->block_item[b];
            s->blocks[b].offset = it < s->nv ? pv[it].offset : ps[it - s->nv].workspace_offset;
            s->blocks[b].bytes = reserved[it];
        }
    }
    if (!st && fresh) {
        /* Its tables in the device's warm memory: no page faults for them
         * in the first run at this size. */
        st = cge__plan_clone_layout_in(s->sp, cge__device_warm(s->dev), &p);
        s->stats.allocations += !st;
    }
    char *blob = NULL;
    if (!st && host_bytes) {
        const void *had = cge_plan_host_data(p);
        if (!(blob = cge__plan_host_room(p, host_bytes)))
            st = oom();
        s->stats.allocations += blob && blob != had;
    }
    if (!st && !(reserved = cge__plan_reserved(p)))
        st = oom();
    if (st) {
        if (fresh)
            cge_plan_destroy(p);
        return st;
    }
    /* From here on nothing fails: the plan is written whole. */
    cge_plan_value *pv = cge__plan_values_mut(p);
    memcpy(pv, s->vals, sizeof *pv * (size_t)s->nv);
    memset(reserved, 0, sizeof *reserved * ((size_t)s->nv + (size_t)s->ns));
    for (int32_t b = 0; b < nb; b++)
        reserved[s->block_item[b]] = s->blocks[b].bytes;
    size_t at = 0;
    for (int32_t v = 0; v < s->nv; v++) {
        pv[v].shape = s->shape[v];
        pv[v].bytes = s->bytes[v];
        int32_t r = s->root[v];
        if (s->host[v]) {
            pv[v].storage = CGE_STORAGE_HOST;
            pv[v].alias_of = -1;
            pv[v].offset = at;
            if (s->bytes[v])
                memcpy(blob + at, s->data[v], s->bytes[v]);
            at += round64(s->bytes[v]);
        } else if (s->vals[v].storage == CGE_STORAGE_ARENA) {
            pv[v].offset = s->block_of[r] >= 0 ? s->blocks[s->block_of[r]].offset : 0;
        }
    }
    const cge_plan_step *ss = cge_plan_steps(s->sp);
    cge_plan_step *ps = cge__plan_steps_mut(p);
    for (int32_t t = 0, k = 0; t < s->ns; t++) {
        while (k < nb && s->block_item[k] < s->nv)
            k++;
        ps[t].workspace_bytes = s->ws[t];
        ps[t].workspace_offset = s->ws[t] ? s->blocks[k++].offset : 0;
        bool folded = ss[t].num_outputs > 0;
        for (int32_t j = 0; folded && j < ss[t].num_outputs; j++)
            folded = s->host[ss[t].outputs[j]];
        ps[t].folded = folded;
    }
    cge__plan_set_sizes(p, arena, cge_plan_constant_bytes(s->sp), cge_plan_num_streams(s->sp),
                        cge_plan_num_events(s->sp));
    cge_plan_stats *stats = cge__plan_stats_mut(p);
    stats->arena_bytes = arena;
    stats->compile_ms = 0.0;
#ifndef NDEBUG
    st = cge_plan_verify(p);
    if (st) {
        if (fresh)
            cge_plan_destroy(p);
        s->valid = false;
        return st;
    }
#endif
    s->stats.runs++;
    s->stamp = atomic_fetch_add(&next_stamp, 1);
    cge__plan_set_stamp(p, s->stamp);
    *plan = p;
    return CGE_OK;
}

cge_status cge_shape_program_run(cge_shape_program *s, const cge_shape *input_shapes,
                                 int32_t num_inputs, cge_plan **plan)
{
    cge_status st = run_program(s, input_shapes, num_inputs, plan);
    /* A failed run leaves its plan as it was, but the arrays may hold its
     * sizes: no plan holds the last results now (no delta from them), and
     * the next run starts from scratch. */
    if (st && s) {
        s->stamp = 0;
        s->delta = false;
        s->valid = false;
    }
    return st;
}

bool cge_shape_program_last_changes(const cge_shape_program *s, const int32_t **values,
                                    int32_t *num_values, const int32_t **steps,
                                    int32_t *num_steps)
{
    bool d = s && s->delta;
    if (values)
        *values = d ? s->changed : NULL;
    if (num_values)
        *num_values = d ? s->num_changed : 0;
    if (steps)
        *steps = d ? s->ws_changed : NULL;
    if (num_steps)
        *num_steps = d ? s->num_ws_changed : 0;
    return d;
}

void cge_shape_program_get_stats(const cge_shape_program *s, cge_shape_program_stats *out)
{
    if (!out)
        return;
    *out = s ? s->stats : (cge_shape_program_stats){0};
    out->replans = s ? s->replans : 0;
}

cge_status cge_plan_specialize(const cge_plan *sym, const cge_shape *input_shapes,
                               int32_t num_inputs, cge_device *dev, cge_plan **out)
{
    if (!sym || !out || (num_inputs && !input_shapes) || !dev)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "specialize: NULL argument");
    *out = NULL;
    cge_shape_program *s = NULL;
    cge_status st = cge_shape_program_create(sym, dev, &s);
    if (!st)
        st = cge_shape_program_run(s, input_shapes, num_inputs, out);
    cge_shape_program_destroy(s);
    return st;
}
