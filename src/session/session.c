/* Sessions: graphs by id, each compiled by the compiler into one instance per
 * input signature (a plan bound to its arena) and run on a stream. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/shared_block.h"
#include "base/strmap.h"
#include "cge/compiler.h"
#include "cge/fused_ops.h"
#include "cge/op.h"
#include "cge/sequence.h"
#include "cge/session.h"
#include "ops/builtin.h"
#include "ops/kernel_cache.h"
#include "runtime/warm_memory.h"
#include "session/buckets.h"
#include "session/instance.h"
#include "session/session_seed.h"
#include "session/session_dist.h"

/* The instances are the session's one plan cache. Inputs and outputs are
 * checked before anything is enqueued. */

#define MAX_INSTANCES 16
/* Instances a graph keeps before a signature seen once gives its own up. */
#define REUSE_AFTER 8

typedef struct run_scratch {
    void *block;
    int32_t *in_pos, *out_pos;
    cge_shape *shapes, *padded;
    cge_tensor *pin, *pout;
} run_scratch;

typedef struct graph_entry {
    uint32_t id;
    cge_graph *g;           /* the session's copy, as the user built it (a plan's
                               graph, borrowed, for cge_session_add_plan) */
    bool compiled;
    /* Symbolic inputs: the compiler's graph, verified, inferred and
     * optimised with symbolic dims, which every signature's instance compiles
     * from and which answers descriptor queries. */
    cge_plan *prepared;
    /* Symbolic inputs, shape program on: the prepared graph partitioned and
     * built once with the dims symbolic; each signature's plan comes from
     * its shape program (cge_plan_specialize), with no compile. NULL where
     * the graph cannot have one, or once a signature showed that it does not
     * serve (value-dependent shapes): then signatures compile. */
    cge_plan *symbolic;
    cge_shape_program *program;   /* the symbolic plan's, its buffers reused */
    bool symbolic_off;
    int64_t compiles, specializations, arena_grows;
    size_t released_bytes;  /* weights freed once packed (cge__instance_release_packed) */
    /* A symbolic plan's weights whose pages went once packed for any shape
     * (retire_request), until a signature that compiles needs them back
     * (revive_weights). */
    cge__retired_weight *retired;
    int32_t num_retired;
    size_t retired_bytes;
    bool retire_tried;
    /* Signatures that took over an instance seen once (respecialised in
     * place), kernels prepared again there, and the CPU time of making
     * signatures' plans and binding them. */
    int64_t respecializations, kernel_prepares;
    int64_t delta_rebinds, steps_rebound;   /* cge__rebind_counts of respecialisations */
    double specialize_ms, bind_ms;
    /* Constant data kernels prepare (packed weights), shared by the
     * instances: a new signature packs nothing the graph's others did. */
    cge_kernel_cache *shared;
    /* One arena for every instance, as large as the largest plan seen: runs
     * of the graph are ordered one after another, so signatures take turns
     * in the same memory instead of each keeping its own. */
    void *arena;
    size_t arena_bytes;
    /* Shape buckets: where the graph pads (NULL: nowhere), once made, and
     * host memory for padded runs' inputs and outputs. */
    cge__pad_plan *pad;
    bool pad_made;
    void *stage;
    size_t stage_bytes;
    /* A run's own arrays (the inputs' and outputs' positions, the input
     * shapes, a padded run's shapes and tensors), made at the first run and
     * kept: a run allocates nothing (a decode loop runs hundreds a second). */
    run_scratch scratch;
    cge_session *session;
    cge__instance *inst[MAX_INSTANCES];
    uint64_t used[MAX_INSTANCES];   /* clock of each instance's last run */
    /* Runs of each instance, and whether the shape program made it. */
    int64_t runs[MAX_INSTANCES];    /* that got as far as running (a call refused
                                       for a too small output buffer is none) */
    bool planned[MAX_INSTANCES];
    int32_t num_inst;
    uint64_t clock;
    cge_run_mode last_mode;
    cge__instance *last_inst;   /* instance of the last run that got one */
    /* A prebuilt plan (cge_session_add_model): one instance over it, no
     * compile; release(owner) once the entry goes. */
    const cge_plan *plan;
    const void *consts;
    void (*release)(void *);
    void *owner;
    /* cge__session_add_plan_seeded: fills the plan's kernel cache first. */
    cge_status (*seed)(void *owner, cge_kernel_cache *c);
    pthread_mutex_t lock;   /* one run (enqueue) or compile at a time */
    struct graph_entry *next;
} graph_entry;

struct cge_session {
    cge_device *dev;
    bool owns_device;
    cge_stream *stream;     /* for synchronous runs */
    cge_run_mode mode;      /* default run mode */
    int capture_limit;
    cge_compile_options copts;  /* how instances compile their plans */
    cge__buckets *buckets;  /* paddable dims' sizes, or NULL */
    bool shape_program;     /* symbolic graphs plan signatures by their shape program */
    bool capture_first;     /* $CGE_CAPTURE_FIRST=1: capture at a signature's first run */
    /* $CGE_COPY_IO=1: unrecorded runs copy inputs and outputs as recorded
     * ones do, instead of using the caller's buffers (runs_unrecorded; for
     * A/B comparisons). */
    bool copy_io;
    /* $CGE_KEEP_PACKED_WEIGHTS=1: a static graph keeps the weights its kernels
     * packed (for comparisons; they are freed by default). */
    bool keep_packed_sources;
    bool warm_batch;        /* plan a symbolic graph's size-1 signature at compile (warm_first_signature) */
    int64_t kv_cache_max_len;   /* > 0: graphs added get the static cache form */
    pthread_mutex_t lock;   /* the entry list */
    graph_entry *graphs;
    cge_dist_comm *comm;    /* distribution (session_dist.c), or NULL */
    int tp;                 /* tensor- (or with pp, pipeline-) parallel degree */
    bool pp;                /* graphs are cut into tp pipeline stages, not sharded */
    int micro_batches;      /* with pp: micro-batches per run (<= 1: none) */
};

cge_status cge_session_create(const cge_session_options *opts, cge_session **out)
{
    if (!out)
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG, "session_create: out is NULL");
    *out = NULL;
    if (opts && (opts->precision < CGE_PRECISION_FP32 || opts->precision > CGE_PRECISION_BF16))
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                         "session_create: precision %d is not fp32 (0) or bf16 (1)",
                         (int)opts->precision);
    cge_session *s = calloc(1, sizeof *s);
    if (!s)
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_NO_MEMORY, "session_create: out of memory");
    cge_status st = opts ? cge__buckets_create(opts->buckets, opts->num_buckets, &s->buckets)
                         : CGE_OK;
    if (st) {
        free(s);
        return st;
    }
    if (opts && opts->device) {
        s->dev = opts->device;
    } else {
        cge_device_options d = {.num_threads = opts ? opts->num_threads : 0};
        st = cge_device_create_cpu(&d, &s->dev);
        s->owns_device = st == CGE_OK;
    }
    if (!st)
        st = cge_stream_create(s->dev, &s->stream);
    if (st) {
        if (s->owns_device)
            cge_device_destroy(s->dev);
        cge__buckets_destroy(s->buckets);
        free(s);
        return st;
    }
    st = cge__session_dist_open(opts, &s->comm, &s->tp, &s->pp);
    if (opts)
        s->micro_batches = opts->dist_micro_batches;
    if (st) {
        cge_stream_destroy(s->stream);
        if (s->owns_device)
            cge_device_destroy(s->dev);
        cge__buckets_destroy(s->buckets);
        free(s);
        return st;
    }
    pthread_mutex_init(&s->lock, NULL);
    s->mode = opts ? opts->run_mode : CGE_RUN_DEFAULT;
    s->capture_limit = opts && opts->capture_limit > 0 ? opts->capture_limit : 8;
    s->kv_cache_max_len = opts ? opts->kv_cache_max_len : 0;
    s->copts.opt_level = opts ? opts->opt_level : CGE_OPT_DEFAULT;
    s->copts.num_streams = opts && opts->num_streams > 0 ? opts->num_streams : 1;
    s->shape_program = !(opts && opts->disable_shape_program);
    const char *sp = getenv("CGE_SHAPE_PROGRAM");
    if (sp && !strcmp(sp, "0"))
        s->shape_program = false;
    const char *cf = getenv("CGE_CAPTURE_FIRST");
    s->capture_first = cf && !strcmp(cf, "1");
    const char *ci = getenv("CGE_COPY_IO");
    s->copy_io = ci && !strcmp(ci, "1");
    const char *wb = getenv("CGE_WARM_BATCH");
    s->warm_batch = !(wb && !strcmp(wb, "0"));
    const char *kw = getenv("CGE_KEEP_PACKED_WEIGHTS");
    s->keep_packed_sources = kw && !strcmp(kw, "1");
    s->copts.precision = opts ? opts->precision : CGE_PRECISION_FP32;
    const char *penv = getenv("CGE_PRECISION");
    if (s->copts.precision == CGE_PRECISION_FP32 && penv && penv[0]) {
        int p = cge_precision_from_name(penv);
        if (p >= 0)
            s->copts.precision = (cge_precision)p;
        else
            fprintf(stderr, "cge: ignoring CGE_PRECISION='%s' (want fp32 or bf16)\n", penv);
    }
    const char *env = getenv("CGE_RUN_MODE");
    if (env && env[0]) {
        int m = cge_run_mode_from_name(env);
        if (m >= 0)
            s->mode = (cge_run_mode)m;
        else
            fprintf(stderr, "cge: ignoring CGE_RUN_MODE='%s' (want eager, plan or replay)\n", env);
    }
    *out = s;
    return CGE_OK;
}

const char *cge_run_mode_name(cge_run_mode mode)
{
    switch (mode) {
    case CGE_RUN_DEFAULT: return "default";
    case CGE_RUN_EAGER: return "eager";
    case CGE_RUN_PLAN: return "plan";
    case CGE_RUN_REPLAY: return "replay";
    }
    return "invalid";
}

int cge_run_mode_from_name(const char *name)
{
    for (int m = CGE_RUN_DEFAULT; name && m <= CGE_RUN_REPLAY; m++)
        if (!strcmp(name, cge_run_mode_name((cge_run_mode)m)))
            return m;
    return -1;
}

static void entry_free(graph_entry *e)
{
    for (int32_t i = 0; i < e->num_inst; i++)
        cge__instance_destroy(e->inst[i]);
    cge__kernel_cache_destroy(e->shared);
    if (e->arena)
        cge_mem_free(e->session->dev, e->arena);
    free(e->stage);
    free(e->scratch.block);
    cge__pad_plan_destroy(e->pad);
    cge_shape_program_destroy(e->program);
    if (e->symbolic != e->plan)   /* a loaded symbolic plan is the model's */
        cge_plan_destroy(e->symbolic);
    if (e->release)
        e->release(e->owner);
    if (!e->plan)
        cge_graph_destroy(e->g);
    cge_plan_destroy(e->prepared);
    free(e->retired);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

void cge_session_destroy(cge_session *s)
{
    if (!s)
        return;
    cge_device_synchronize(s->dev);
    while (s->graphs) {
        graph_entry *e = s->graphs;
        s->graphs = e->next;
        entry_free(e);
    }
    cge_stream_destroy(s->stream);
    if (s->owns_device)
        cge_device_destroy(s->dev);
    cge__buckets_destroy(s->buckets);
    cge_dist_comm_destroy(s->comm);
    pthread_mutex_destroy(&s->lock);
    free(s);
    /* If bodies' buffers kept for later runs: its graphs' are never asked
     * for again (another session's are made again at its next run) */
    cge__control_flow_trim();
}

cge_dist_comm *cge_session_dist_comm(const cge_session *s) { return s ? s->comm : NULL; }

cge_device *cge_session_device(const cge_session *s) { return s ? s->dev : NULL; }

static graph_entry *find_entry(cge_session *s, uint32_t id)
{
    pthread_mutex_lock(&s->lock);
    graph_entry *e = s->graphs;
    while (e && e->id != id)
        e = e->next;
    pthread_mutex_unlock(&s->lock);
    return e;
}

static cge_status no_graph(uint32_t id)
{
    return cge_error(CGE_LAYER_SESSION, CGE_ERR_NOT_FOUND, "no graph with id %u in this session",
                     id);
}

cge_status cge_session_add_graph(cge_session *s, uint32_t graph_id, const cge_graph *g)
{
    if (!s || !g)
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG, "add_graph: NULL session or graph");
    if (find_entry(s, graph_id))
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_EXISTS,
                         "add_graph: graph id %u is already in use (remove it first)", graph_id);
    graph_entry *e = calloc(1, sizeof *e);
    if (!e)
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_NO_MEMORY, "add_graph: out of memory");
    cge_status st = cge_graph_clone(g, &e->g);
    /* On the session's copy, before anything reads its interface: the
     * rewrite changes the inputs (the caches' shapes, cache_position). */
    if (!st && s->kv_cache_max_len > 0)
        st = cge_graph_kv_cache_static(e->g, s->kv_cache_max_len);
    if (!st && s->tp > 1) {
        cge_graph *sharded = NULL;
        st = s->pp ? cge_dist_pipeline_parallel_micro(e->g, s->tp, cge_dist_comm_rank(s->comm),
                                                      s->micro_batches, &sharded, NULL, NULL)
                   : cge_dist_tensor_parallel(e->g, s->tp, cge_dist_comm_rank(s->comm), &sharded, NULL);
        cge_graph_destroy(e->g);
        e->g = sharded;
    }
    if (st) {
        cge_graph_destroy(e->g);
        free(e);
        return st;
    }
    e->id = graph_id;
    e->session = s;
    pthread_mutex_init(&e->lock, NULL);
    pthread_mutex_lock(&s->lock);
    e->next = s->graphs;
    s->graphs = e;
    pthread_mutex_unlock(&s->lock);
    return CGE_OK;
}

static cge_status add_plan(cge_session *s, uint32_t graph_id, const cge_plan *plan,
                           const void *constants, void (*release)(void *), void *owner,
                           cge_status (*seed)(void *, cge_kernel_cache *))
{
    if (!s || !plan)
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG, "add_plan: NULL session or plan");
    if (find_entry(s, graph_id))
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_EXISTS,
                         "add_plan: graph id %u is already in use (remove it first)", graph_id);
    if (!cge_plan_is_complete(plan))
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                         "add_plan: the plan of '%s' stopped after prepare (its shapes depend on "
                         "run-time values); add its graph with cge_session_add_graph instead",
                         cge_graph_name(cge_plan_graph(plan)));
    graph_entry *e = calloc(1, sizeof *e);
    if (!e)
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_NO_MEMORY, "add_plan: out of memory");
    /* The plan's graph answers descriptor queries and input checks: its
     * inputs have the plan's static shapes. */
    e->g = (cge_graph *)cge_plan_graph(plan);
    e->id = graph_id;
    e->session = s;
    e->plan = plan;
    e->consts = constants;
    e->release = release;
    e->owner = owner;
    e->seed = seed;
    pthread_mutex_init(&e->lock, NULL);
    pthread_mutex_lock(&s->lock);
    e->next = s->graphs;
    s->graphs = e;
    pthread_mutex_unlock(&s->lock);
    return CGE_OK;
}

cge_status cge_session_add_plan(cge_session *s, uint32_t graph_id, const cge_plan *plan,
                                const void *constants, void (*release)(void *), void *owner)
{
    return add_plan(s, graph_id, plan, constants, release, owner, NULL);
}

cge_status cge__session_add_plan_seeded(cge_session *s, uint32_t graph_id, const cge_plan *plan,
                                        const void *constants, void (*release)(void *),
                                        void *owner,
                                        cge_status (*seed)(void *owner, cge_kernel_cache *c))
{
    return add_plan(s, graph_id, plan, constants, release, owner, seed);
}

cge_status cge_session_remove_graph(cge_session *s, uint32_t graph_id)
{
    if (!s)
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG, "remove_graph: session is NULL");
    pthread_mutex_lock(&s->lock);
    graph_entry **pp = &s->graphs;
    while (*pp && (*pp)->id != graph_id)
        pp = &(*pp)->next;
    graph_entry *e = *pp;
    if (e)
        *pp = e->next;
    pthread_mutex_unlock(&s->lock);
    if (!e)
        return no_graph(graph_id);
    /* Runs in flight still use the instances' buffers. */
    cge_device_synchronize(s->dev);
    entry_free(e);
    return CGE_OK;
}

/* The entry's arena for a plan of `bytes`: grown (never past the largest
 * plan seen) by moving every instance to the new block once the runs in
 * flight are done. */
static cge_status entry_arena(void *user, size_t bytes, void **out)
{
    graph_entry *e = user;
    if (bytes > e->arena_bytes || !e->arena) {
        /* Signatures from a shape program grow by half at least, so that a
         * decode loop whose cache grows a row per step moves the arena a few
         * times, not every step. */
        if (e->symbolic && e->arena && bytes < e->arena_bytes + e->arena_bytes / 2)
            bytes = e->arena_bytes + e->arena_bytes / 2;
        void *grown = NULL;
        cge_status st = cge_mem_alloc(e->session->dev, bytes, &grown);
        if (st)
            return st;
        if (e->arena) {
            /* The graph's runs are ordered: the last one's end is them all. */
            if (e->last_inst)
                cge__instance_wait(e->last_inst);
            for (int32_t i = 0; i < e->num_inst; i++)
                cge__instance_relocate(e->inst[i], e->arena, e->arena_bytes, grown);
            cge_mem_free(e->session->dev, e->arena);
            e->arena_grows++;
        }
        e->arena = grown;
        e->arena_bytes = bytes;
    }
    *out = e->arena;
    return CGE_OK;
}

/* Ops whose kernels run graphs of their own: their bodies are compiled
 * per shape inside the kernel, which a shape program does not follow. */
static bool has_control_flow(const cge_graph *g)
{
    for (int32_t i = 0; i < cge_graph_num_nodes(g); i++) {
        const cge_node *n = cge_graph_node(g, i);
        const char *op = cge_node_op_type(n);
        if (!cge_node_domain(n)[0] && (!strcmp(op, "If") || !strcmp(op, "Loop") || !strcmp(op, "Scan")))
            return true;
    }
    return false;
}

/* Whether the symbolic plan left a convolution in the plain layout that a
 * compile at concrete sizes makes channels-last (layout_channels_last: a
 * float32 Conv with constant W on the cpu engine at level 3, rank 3-5, when
 * oneDNN's NHWC kernels are there; they measured 2-10x faster). Such a plan
 * would be slower at every size than a compile per signature, so the graph
 * compiles per signature instead. */
static bool loses_channels_last(const cge_plan *p)
{
    const cge_plan_stats *ps = cge_plan_get_stats(p);
    if (!ps || ps->opt_level < CGE_OPT_LAYOUT || !cge_fused_conv_channels_last_available())
        return false;
    const cge_plan_step *steps = cge_plan_steps(p);
    const cge_plan_value *vals = cge_plan_values(p);
    for (int32_t t = 0; t < cge_plan_num_steps(p); t++) {
        const cge_plan_step *st = &steps[t];
        const cge_attrs *a = cge_node_attrs_const(st->node);
        const char *op = cge_node_op_type(st->node), *dom = cge_node_domain(st->node);
        bool fused = !strcmp(op, "FusedConv") && !strcmp(dom, CGE_DOMAIN_FUSED);
        bool conv = !strcmp(op, "Conv") && !dom[0];
        if ((!fused && !conv) || strcmp(st->engine, "cpu") || st->num_inputs < 2 ||
            st->inputs[0] < 0 || st->inputs[1] < 0)
            continue;
        const cge_plan_value *x = &vals[st->inputs[0]];
        bool w_const = fused ? cge_attrs_get_int(a, "w_const", 0) != 0
                             : vals[st->inputs[1]].storage == CGE_STORAGE_CONSTANT;
        if (x->dtype == CGE_F32 && x->shape.rank >= 3 && x->shape.rank <= 5 && w_const &&
            !cge_attrs_get_int(a, "channels_last", 0))
            return true;
    }
    return false;
}

/* The symbolic plan of the prepared graph: partition and build once, dims
 * symbolic. A graph the compiler cannot build that way, or whose symbolic
 * plan would run slower than its compiles (loses_channels_last), keeps the
 * compile per signature; that is no error. */
static cge_status make_symbolic(cge_session *s, graph_entry *e)
{
    const cge_graph *pg = cge_plan_graph(e->prepared);
    if (has_control_flow(pg) || strcmp(cge_device_name(s->dev), "cpu"))
        return CGE_OK;
    cge_compile_options o = s->copts;
    o.device = s->dev;
    o.allow_incomplete = true;
    o.symbolic_plan = true;
    cge_plan *p = NULL;
    cge_status st = cge_compile(pg, NULL, 0, &o, &p);
    e->compiles++;
    if (st || !cge_plan_is_symbolic(p) || loses_channels_last(p)) {
        cge_clear_error();
        cge_plan_destroy(p);
        return CGE_OK;
    }
    st = cge__kernel_cache_add_graph_constants(e->shared, cge_plan_graph(p));
    if (st) {
        cge_plan_destroy(p);
        return st;
    }
    st = cge_shape_program_create(p, s->dev, &e->program);
    if (st) {
        cge_plan_destroy(p);
        return st;
    }
    e->symbolic = p;
    return CGE_OK;
}

/* A symbolic graph gets one signature planned now, at compile, as ONNX
 * Runtime prepares its kernels at session creation: the kernels' weight
 * packing (done once for every size: later signatures find the packed copies
 * in the shared cache), oneDNN's first primitives and the arena are made
 * before any run, so the first run at that size is a plan run and a first run
 * at another size makes only its own primitives. Every symbolic dim stands at
 * 1 (batch 1, a one-token sequence, an empty or one-slot cache...). With a
 * convolution in the graph only leading (batch) dims may be symbolic: a
 * convolution's weight layout does not depend on the batch, while a stand-in
 * for a spatial dim could pack them for a layout no real size uses. A matrix
 * product's packing depends on its constant operand only, so sequence and
 * cache lengths are safe stand-ins. Anything the shape program refuses at 1
 * is left to the first run; $CGE_WARM_BATCH=0 turns this off, and shape
 * buckets skip it. */
static double cpu_ms(void);

/* Whether a node of g (nested graphs aside) convolves: its weights' layout
 * may follow the spatial sizes. */
static bool has_convolution(const cge_graph *g)
{
    for (int32_t i = 0; i < cge_graph_num_nodes(g); i++) {
        const cge_node *n = cge_graph_node(g, i);
        if (!n || cge_node_is_removed(n))
            continue;
        const char *op = cge_node_op_type(n);
        if (strstr(op, "Conv"))
            return true;
    }
    return false;
}

/* The request for the first instance planned from a symbolic graph's plan:
 * its weights that every reader packed for any shape give their pages back
 * (the packed copies are what every signature reads), as a static graph's
 * go once packed; $CGE_KEEP_PACKED_WEIGHTS=1 and shape buckets keep them.
 * NULL after the first try (or where they stay); `holders` gets the
 * session's graphs. Every later planned instance's EAGER runs take the
 * plan's steps when some went (planned_instance_made). */
static cge__retire_request *retire_request(cge_session *s, graph_entry *e,
                                           cge__retire_request *rq, const cge_graph *holders[3])
{
    if (e->retire_tried || s->keep_packed_sources || s->buckets || !e->prepared)
        return NULL;
    e->retire_tried = true;
    holders[0] = e->g;
    holders[1] = cge_plan_graph(e->prepared);
    holders[2] = e->symbolic ? cge_plan_graph(e->symbolic) : NULL;
    *rq = (cge__retire_request){.holders = holders, .num_holders = 3, .list = &e->retired,
                                .num = &e->num_retired};
    return rq;
}

/* After cge__instance_create_planned with `rq` (NULL: none): the bytes it
 * gave back (a failed creation may have given some), and the instance's
 * EAGER runs (NULL: it failed). */
static void planned_instance_made(graph_entry *e, cge__instance *inst,
                                  const cge__retire_request *rq)
{
    if (rq)
        e->retired_bytes += rq->freed;
    if (inst && e->num_retired)
        cge__instance_eager_by_steps(inst);
}

/* Before a signature compiles (the shape program refused it): the retired
 * weights are written back from their packed copies, since the compiler
 * reads constants. An error names the weight that could not be. */
static cge_status revive_weights(graph_entry *e)
{
    while (e->num_retired > 0) {
        cge__retired_weight *w = &e->retired[e->num_retired - 1];
        if (!cge__block_restore_pages(w->data))
            return cge_error(CGE_LAYER_SESSION, CGE_ERR_NO_MEMORY,
                             "graph %u: a weight freed once packed (%zu bytes) could not be "
                             "mapped again for a signature that compiles",
                             e->id, w->bytes);
        cge_status st = cge__kernel_cache_revive(e->shared, w->data, w->bytes);
        if (st)
            return st;
        e->retired_bytes -= w->bytes;
        e->num_retired--;
    }
    return CGE_OK;
}

static void warm_first_signature(cge_session *s, graph_entry *e)
{
    /* (With shape buckets batch 1 runs padded: its signature is a bucket's.) */
    if (!s->warm_batch || s->buckets || !e->symbolic || e->symbolic_off || !e->program ||
        e->num_inst)
        return;
    int32_t ni = cge_graph_num_inputs(e->g);
    cge_shape *shapes = calloc((size_t)ni + 1, sizeof *shapes);
    if (!shapes)
        return;
    bool batch = true, any = false, conv = has_convolution(cge_plan_graph(e->prepared));
    for (int32_t i = 0; batch && i < ni; i++) {
        cge_tensor_desc d;
        cge_graph_get_desc(e->g, cge_graph_input(e->g, i), &d);
        shapes[i] = d.shape;
        for (int32_t k = 0; batch && k < d.shape.rank; k++)
            if (d.shape.dims[k] < 0) {
                batch = k == 0 || !conv;
                any = true;
                shapes[i].dims[k] = 1;
            }
        batch = batch && d.shape.rank >= 0;
    }
    cge_plan *p = NULL;
    cge__instance *inst = NULL;
    cge__arena_source src = {entry_arena, e};
    cge__warm *warm = cge__device_warm(s->dev);
    cge__warm_stats w0, w1;
    const cge_graph *holders[3];
    cge__warm_get_stats(warm, &w0);
    double t0 = cpu_ms();
    cge_status st = batch && any ? CGE_OK : CGE_ERR_UNSUPPORTED;
    if (!st)
        st = cge_shape_program_run(e->program, shapes, ni, &p);
    double t1 = cpu_ms();
    if (!st) {
        e->specialize_ms += t1 - t0;
        e->specializations++;
        cge__retire_request rq, *retire = retire_request(s, e, &rq, holders);
        st = cge__instance_create_planned(s->dev, cge_plan_graph(e->prepared), shapes, p,
                                          e->consts, e->shared, &src, retire, &inst);
        planned_instance_made(e, st ? NULL : inst, retire);
        e->bind_ms += cpu_ms() - t1;
    }
    if (!st) {
        e->inst[0] = inst;
        e->used[0] = ++e->clock;
        e->runs[0] = 0;
        e->planned[0] = true;
        e->num_inst = 1;
        /* Its pages too (activations and workspaces only: nothing is there
         * yet), so that the first run does not fault them in. */
        if (e->arena && !strcmp(cge_device_name(s->dev), "cpu"))
            memset(e->arena, 0, e->arena_bytes);
        /* And the tables of the signatures to come (a plan and an
         * instance's steps, operands and binding index each, about what
         * this one took): warm memory for as many as the graph keeps before
         * it rewrites instances in place (16 MiB at most, or one), faulted
         * in now rather than in their first runs. */
        cge__warm_get_stats(warm, &w1);
        size_t one = w1.live_bytes > w0.live_bytes ? w1.live_bytes - w0.live_bytes : 0;
        size_t want = one * REUSE_AFTER, cap = (size_t)16 << 20;   /* a big graph: at most 16 MiB */
        if (one)
            cge__warm_reserve(warm, want < cap ? want : one > cap ? one : cap);
    }
    cge_clear_error();
    free(shapes);
}

static cge_status compile_locked(cge_session *s, graph_entry *e)
{
    if (e->compiled)
        return CGE_OK;
    if (e->plan && cge_plan_is_symbolic(e->plan)) {
        /* A loaded model with symbolic dims: its plan is the symbolic one,
         * each signature planned by its shape program, with the model's
         * weights (host memory) as the constants. */
        cge_status st = cge__kernel_cache_create(&e->shared);
        if (!st && e->consts)
            st = cge__kernel_cache_add_stable(e->shared, e->consts, cge_plan_constant_bytes(e->plan));
        if (!st)
            st = cge_shape_program_create(e->plan, s->dev, &e->program);
        if (!st)
            cge_shape_program_use_constants(e->program, e->consts);
        if (st) {
            cge_shape_program_destroy(e->program);
            e->program = NULL;
            cge__kernel_cache_destroy(e->shared);
            e->shared = NULL;
            return st;
        }
        e->symbolic = (cge_plan *)e->plan;
        e->compiled = true;
        return CGE_OK;
    }
    if (e->plan) {
        cge__instance *inst = NULL;
        cge_status st = CGE_OK;
        if (e->seed && e->consts && !e->shared) {
            /* Packed weights made elsewhere: found by the kernels' prepare
             * through the cache, so they are not packed again. */
            st = cge__kernel_cache_create(&e->shared);
            if (!st)
                st = cge__kernel_cache_add_stable(e->shared, e->consts,
                                                  cge_plan_constant_bytes(e->plan));
            if (!st)
                st = e->seed(e->owner, e->shared);
            if (st) {
                cge__kernel_cache_destroy(e->shared);
                e->shared = NULL;
                return st;
            }
        }
        st = cge__instance_create_prebuilt(s->dev, e->plan, e->consts, e->shared, &inst);
        if (st)
            return st;
        e->inst[e->num_inst++] = inst;
        e->compiled = true;
        return CGE_OK;
    }
    /* The compiler does the graph's work (verify, infer, optimise, plan).
     * With static inputs the one instance is built now, so that kernel and
     * allocation errors surface at compile time; with symbolic ones the graph
     * is prepared and optimised once, and each signature compiles that graph
     * (partition and build, its weight work done) at its first run. */
    if (!e->shared) {
        cge_status st = cge__kernel_cache_create(&e->shared);
        if (!st)
            cge__kernel_cache_set_comm(e->shared, s->comm);
        if (!st)
            st = cge__kernel_cache_add_graph_constants(e->shared, e->g);
        if (st) {
            cge__kernel_cache_destroy(e->shared);
            e->shared = NULL;
            return st;
        }
    }
    int32_t ni = cge_graph_num_inputs(e->g);
    cge_shape *shapes = calloc((size_t)ni + 1, sizeof *shapes);
    if (!shapes)
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_NO_MEMORY, "compile: out of memory");
    bool all_static = true;
    for (int32_t i = 0; i < ni; i++) {
        cge_tensor_desc d;
        cge_graph_get_desc(e->g, cge_graph_input(e->g, i), &d);
        shapes[i] = d.shape;
        all_static &= cge_shape_is_static(&d.shape);
    }
    cge_status st = CGE_OK;
    if (all_static && e->num_inst == 0) {
        cge__instance *inst = NULL;
        cge__arena_source src = {entry_arena, e};
        /* Static shapes: this is the graph's one plan (runs at other sizes are
         * refused, nothing compiles e->g again), so weights its kernels
         * packed need not stay as they were too. Shape buckets may compile
         * padded signatures from e->g: they keep them. */
        st = !s->buckets && !s->keep_packed_sources
                 ? cge__instance_create_releasing(s->dev, e->g, shapes, &s->copts, e->shared,
                                                  &src, &inst)
                 : cge__instance_create(s->dev, e->g, shapes, &s->copts, e->shared, &src, &inst);
        e->compiles++;
        if (!st) {
            e->inst[e->num_inst++] = inst;
            e->released_bytes = cge__instance_released_bytes(inst);
        }
    } else if (!all_static && !e->prepared) {
        cge_compile_options o = s->copts;
        o.device = s->dev;
        o.allow_incomplete = true;
        st = cge_compile(e->g, NULL, 0, &o, &e->prepared);
        e->compiles++;
        if (!st)
            st = cge__kernel_cache_add_graph_constants(e->shared, cge_plan_graph(e->prepared));
        if (!st && s->shape_program && cge_plan_is_complete(e->prepared) == false)
            st = make_symbolic(s, e);
        if (!st)
            warm_first_signature(s, e);
    }
    free(shapes);
    if (!st)
        e->compiled = true;
    return st;
}

/* The graph that answers descriptor queries: the compiler's, once there is
 * one; the user's before. */
static const cge_graph *described_graph(const graph_entry *e)
{
    if (e->prepared)
        return cge_plan_graph(e->prepared);
    if (e->num_inst)
        return cge__instance_graph(e->inst[0]);
    return e->g;
}

cge_status cge_session_compile_graph(cge_session *s, uint32_t graph_id)
{
    if (!s)
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG, "compile_graph: session is NULL");
    graph_entry *e = find_entry(s, graph_id);
    if (!e)
        return no_graph(graph_id);
    pthread_mutex_lock(&e->lock);
    cge_status st = compile_locked(s, e);
    pthread_mutex_unlock(&e->lock);
    return st;
}

cge_status cge_session_num_io(const cge_session *s, uint32_t graph_id, int32_t *num_inputs,
                              int32_t *num_outputs)
{
    graph_entry *e = s ? find_entry((cge_session *)s, graph_id) : NULL;
    if (!e)
        return s ? no_graph(graph_id)
                 : cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG, "num_io: session is NULL");
    if (num_inputs)
        *num_inputs = cge_graph_num_inputs(e->g);
    if (num_outputs)
        *num_outputs = cge_graph_num_outputs(e->g);
    return CGE_OK;
}

static cge_status io_desc(const cge_session *s, uint32_t graph_id, int32_t i, bool input,
                          cge_tensor_desc *out)
{
    graph_entry *e = s ? find_entry((cge_session *)s, graph_id) : NULL;
    if (!e || !out)
        return e ? cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG, "io_desc: out is NULL")
                 : (s ? no_graph(graph_id)
                      : cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG, "io_desc: session is NULL"));
    int32_t n = input ? cge_graph_num_inputs(e->g) : cge_graph_num_outputs(e->g);
    if (i < 0 || i >= n)
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                         "graph %u has %d %s; index %d is out of range", graph_id, n,
                         input ? "inputs" : "outputs", i);
    pthread_mutex_lock(&e->lock);
    const cge_graph *g = described_graph(e);
    cge_status st = cge_graph_get_desc(g, input ? cge_graph_input(g, i) : cge_graph_output(g, i), out);
    pthread_mutex_unlock(&e->lock);
    return st;
}

const char *cge_session_dim_symbol_name(const cge_session *s, uint32_t graph_id, int64_t dim)
{
    graph_entry *e = s ? find_entry((cge_session *)s, graph_id) : NULL;
    /* The table only grows while the graph is built, so no lock is needed. */
    return e ? cge_graph_dim_symbol_name(e->g, dim) : NULL;
}

cge_status cge_session_input_desc(const cge_session *s, uint32_t graph_id, int32_t i,
                                  cge_tensor_desc *out)
{
    return io_desc(s, graph_id, i, true, out);
}

cge_status cge_session_output_desc(const cge_session *s, uint32_t graph_id, int32_t i,
                                   cge_tensor_desc *out)
{
    return io_desc(s, graph_id, i, false, out);
}

/* Matches user tensors to graph positions: all by name or all by position. */
static cge_status bind(const cge_graph *g, uint32_t id, bool inputs, const cge_tensor *ts,
                       int32_t n, int32_t *pos_of)
{
    int32_t gn = inputs ? cge_graph_num_inputs(g) : cge_graph_num_outputs(g);
    const char *what = inputs ? "input" : "output";
    if (n < 0 || (n > 0 && !ts))
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG, "graph %u: bad %s list", id, what);
    bool named = n > 0 && ts[0].name != NULL;
    for (int32_t i = 0; i < n; i++)
        if ((ts[i].name != NULL) != named)
            return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                             "graph %u: name either every %s or none", id, what);
    if (inputs && n != gn)
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                         "graph %u takes %d inputs; %d given", id, gn, n);
    if (!inputs && (n > gn || (!named && n != gn)))
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                         "graph %u has %d outputs; %d given%s", id, gn, n,
                         named ? "" : " (pass all by position, or name a subset)");
    for (int32_t i = 0; i < n; i++) {
        if (!named) {
            pos_of[i] = i;
            continue;
        }
        pos_of[i] = -1;
        for (int32_t j = 0; j < gn; j++) {
            const char *gname = inputs ? cge_graph_input(g, j) : cge_graph_output(g, j);
            if (!strcmp(gname, ts[i].name))
                pos_of[i] = j;
        }
        if (pos_of[i] < 0) {
            char list[512];
            size_t k = 0;
            list[0] = '\0';
            for (int32_t j = 0; j < gn && k < sizeof list; j++)
                k += (size_t)snprintf(list + k, sizeof list - k, "%s'%s'", j ? ", " : "",
                                      inputs ? cge_graph_input(g, j) : cge_graph_output(g, j));
            return cge_error(CGE_LAYER_SESSION, CGE_ERR_NOT_FOUND,
                             "graph %u has no %s named '%s' (its %ss: %s)", id, what, ts[i].name,
                             what, list);
        }
        for (int32_t j = 0; j < i; j++)
            if (pos_of[j] == pos_of[i])
                return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                                 "graph %u: %s '%s' is given twice", id, what, ts[i].name);
    }
    return CGE_OK;
}

static cge_status check_inputs(const graph_entry *e, const cge_tensor *inputs, int32_t n,
                               const int32_t *pos_of, cge_shape *shapes)
{
    char a[CGE_SHAPE_STR_MAX], b[CGE_SHAPE_STR_MAX];
    for (int32_t i = 0; i < n; i++) {
        cge_tensor_desc d;
        const char *name = cge_graph_input(e->g, pos_of[i]);
        cge_graph_get_desc(e->g, name, &d);
        const cge_tensor *t = &inputs[i];
        if (d.type != CGE_TYPE_TENSOR) {
            /* A sequence or optional: data is the caller's cge_sequence; the
             * signature is the declared descriptor (lengths and element
             * shapes are run-time contents). */
            const cge_sequence *q = t->data;
            if (!q)
                return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                                 "graph %u: input '%s' is a %s: its data must be a cge_sequence",
                                 e->id, name, cge_value_type_name(d.type));
            cge_value_type qt = cge_sequence_type(q);
            /* an optional's value may come as what it holds */
            bool ok_type = qt == d.type ||
                           (d.type == CGE_TYPE_OPTIONAL_SEQUENCE && qt == CGE_TYPE_SEQUENCE);
            if (!ok_type || cge_sequence_dtype(q) != d.dtype)
                return cge_error(CGE_LAYER_SESSION, CGE_ERR_DTYPE,
                                 "graph %u: input '%s' is a %s of %s; the graph declares a %s of %s",
                                 e->id, name, cge_value_type_name(qt),
                                 cge_dtype_name(cge_sequence_dtype(q)),
                                 cge_value_type_name(d.type), cge_dtype_name(d.dtype));
            shapes[pos_of[i]] = d.shape.rank < 0 ? CGE_SCALAR : d.shape;
            continue;
        }
        if (t->dtype != d.dtype)
            return cge_error(CGE_LAYER_SESSION, CGE_ERR_DTYPE,
                             "graph %u: input '%s' is %s; the graph declares %s", e->id, name,
                             cge_dtype_name(t->dtype), cge_dtype_name(d.dtype));
        bool fits = t->shape.rank == d.shape.rank;
        for (int32_t k = 0; fits && k < d.shape.rank; k++)
            fits = t->shape.dims[k] >= 0 && (d.shape.dims[k] < 0 || d.shape.dims[k] == t->shape.dims[k]);
        if (!fits || t->shape.rank < 0 || t->shape.rank > CGE_MAX_RANK)
            return cge_error(CGE_LAYER_SESSION, CGE_ERR_SHAPE,
                             "graph %u: input '%s' has shape %s; the graph declares %s", e->id,
                             name, cge_shape_str(&t->shape, a, sizeof a),
                             cge_shape_str(&d.shape, b, sizeof b));
        if (cge_tensor_too_large(t->dtype, &t->shape))
            return cge_error(CGE_LAYER_SESSION, CGE_ERR_SHAPE,
                             "graph %u: input '%s' has shape %s: too large", e->id, name,
                             cge_shape_str(&t->shape, a, sizeof a));
        size_t need = cge_tensor_nbytes(t->dtype, &t->shape);
        if (t->bytes < need || (need && !t->data))
            return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                             "graph %u: input '%s' needs %zu bytes of data; %zu given%s", e->id,
                             name, need, t->bytes, t->data ? "" : " (data is NULL)");
        shapes[pos_of[i]] = t->shape;
    }
    /* Inputs declared with one symbol ("batch") must agree on its size:
     * otherwise kernels would read one size for another. */
    cge_dim_conflict c;
    if (n == cge_graph_num_inputs(e->g) && cge_graph_find_dim_conflict(e->g, shapes, n, &c)) {
        const char *sym = cge_graph_dim_symbol_name(e->g, c.symbol);
        char sbuf[32];
        if (!sym) {
            snprintf(sbuf, sizeof sbuf, "s%lld", (long long)cge_dim_symbol_id(c.symbol));
            sym = sbuf;
        }
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_SHAPE,
                         "graph %u: symbolic dimension '%s' is %lld in input '%s' (dim %d) but "
                         "%lld in input '%s' (dim %d)",
                         e->id, sym, (long long)c.size[0], cge_graph_input(e->g, c.input[0]),
                         (int)c.axis[0], (long long)c.size[1],
                         cge_graph_input(e->g, c.input[1]), (int)c.axis[1]);
    }
    return CGE_OK;
}

/* CPU time of this thread: what making a signature costs, apart from the
 * machine's other load. */
static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static cge_status get_instance(cge_session *s, graph_entry *e, const cge_shape *shapes,
                               cge__instance **out)
{
    int32_t ni = cge_graph_num_inputs(e->g);
    for (int32_t i = 0; i < e->num_inst; i++)
        if (cge__instance_matches(e->inst[i], shapes, ni)) {
            e->used[i] = ++e->clock;
            *out = e->inst[i];
            return CGE_OK;
        }
    if (e->plan && !e->symbolic)   /* unreachable: check_inputs holds inputs to the static shapes */
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_SHAPE,
                         "graph %u is a compiled model; its input shapes are fixed", e->id);
    /* A symbolic graph was optimised once (its weights folded and fused):
     * each signature compiles that graph, sharing its constants. */
    const cge_graph *g = e->prepared ? cge_plan_graph(e->prepared) : e->g;
    cge__instance *inst = NULL;
    cge__arena_source src = {entry_arena, e};
    cge_status st = CGE_ERR_UNSUPPORTED;
    bool planned = false;
    if (e->symbolic && !e->symbolic_off) {
        /* A signature seen once (a decode step's: each step's cache is a row
         * longer) is not likely to come back: once the graph has REUSE_AFTER
         * instances, the new signature takes over the last such instance,
         * rewritten in place, instead of a new one (a sweep over a few sizes
         * keeps them all). So does the least recently run planned instance
         * once the cache is full. */
        int32_t reuse = -1;
        for (int32_t i = 0; e->num_inst >= REUSE_AFTER && i < e->num_inst; i++)
            if (e->planned[i] && e->runs[i] <= 1 && !cge__instance_captured(e->inst[i]) &&
                (reuse < 0 || e->used[i] > e->used[reuse]))
                reuse = i;
        for (int32_t i = 0; reuse < 0 && e->num_inst == MAX_INSTANCES && i < e->num_inst; i++)
            if (e->planned[i] && (reuse < 0 || e->used[i] < e->used[reuse]))
                reuse = i;
        if (reuse >= 0) {
            double t0 = cpu_ms();
            cge__rebind_counts rc = {0};
            st = cge__instance_respecialize(e->inst[reuse], e->program, shapes, &src, &rc);
            e->kernel_prepares += rc.prepares;
            e->delta_rebinds += rc.deltas;
            e->steps_rebound += rc.steps_rebound;
            e->specialize_ms += cpu_ms() - t0;
            if (!st) {
                e->specializations++;
                e->respecializations++;
                e->used[reuse] = ++e->clock;
                e->runs[reuse] = 0;
                *out = e->inst[reuse];
                return CGE_OK;
            }
            /* Its plan may be half rewritten: the instance goes. */
            if (e->last_inst == e->inst[reuse])
                e->last_inst = NULL;
            cge__instance_destroy(e->inst[reuse]);
            e->num_inst--;
            e->inst[reuse] = e->inst[e->num_inst];
            e->used[reuse] = e->used[e->num_inst];
            e->runs[reuse] = e->runs[e->num_inst];
            e->planned[reuse] = e->planned[e->num_inst];
            if (st != CGE_ERR_UNSUPPORTED)
                return st;
            cge_clear_error();
        }
    }
    if (st && e->symbolic && !e->symbolic_off) {
        /* The shape program: this signature's plan from the symbolic one. */
        cge_plan *p = NULL;
        double t0 = cpu_ms();
        st = cge_shape_program_run(e->program, shapes, ni, &p);
        double t1 = cpu_ms();
        e->specialize_ms += t1 - t0;
        if (!st) {
            e->specializations++;
            const cge_graph *holders[3];
            cge__retire_request rq, *retire = retire_request(s, e, &rq, holders);
            st = cge__instance_create_planned(s->dev, g, shapes, p, e->consts, e->shared, &src,
                                              retire, &inst);
            e->bind_ms += cpu_ms() - t1;
            planned = st == CGE_OK;
            planned_instance_made(e, planned ? inst : NULL, retire);
        }
        if (st && st != CGE_ERR_UNSUPPORTED)
            return st;
        if (st)
            cge_clear_error();
    }
    if (st) {
        /* No shape program, or one that does not serve these shapes: the
         * signature compiles. Shapes that depend on values (an instance that
         * runs node by node) mean the shape program never will: later
         * signatures compile at once. (Instances made from the symbolic
         * plan borrow its graph: it stays until the entry goes.) */
        st = revive_weights(e);
        if (st)
            return st;
        st = cge__instance_create(s->dev, g, shapes, &s->copts, e->shared, &src, &inst);
        e->compiles++;
        if (st)
            return st;
        if (e->symbolic && cge__instance_value_dependent(inst))
            e->symbolic_off = true;
    }
    int32_t slot = e->num_inst;
    if (e->num_inst == MAX_INSTANCES) {
        /* Evict the least recently run; its runs in flight must end before
         * its buffers go. */
        slot = 0;
        for (int32_t i = 1; i < e->num_inst; i++)
            if (e->used[i] < e->used[slot])
                slot = i;
        cge__instance_wait(e->inst[slot]);
        if (e->last_inst == e->inst[slot])
            e->last_inst = NULL;
        cge__instance_destroy(e->inst[slot]);
    } else {
        e->num_inst++;
    }
    e->inst[slot] = inst;
    e->used[slot] = ++e->clock;
    e->runs[slot] = 0;
    e->planned[slot] = planned;
    *out = inst;
    return CGE_OK;
}

/* What a requested mode means for this instance: value-dependent shapes
 * run eagerly; replay needs a capture. At the graph's capture limit the
 * least recently run signature gives up its recording for the new one. */
static cge_run_mode resolve_mode(cge_session *s, graph_entry *e, cge__instance *inst,
                                 cge_run_mode want, cge_stream *stream)
{
    bool by_default = want == CGE_RUN_DEFAULT && s->mode == CGE_RUN_DEFAULT;
    if (want == CGE_RUN_DEFAULT)
        want = s->mode == CGE_RUN_DEFAULT ? CGE_RUN_REPLAY : s->mode;
    if (cge__instance_value_dependent(inst))
        return CGE_RUN_EAGER;
    if (want != CGE_RUN_REPLAY || cge__instance_captured(inst))
        return want;
    /* The default mode captures a shape program's signature when it comes
     * back: a signature seen once (a decode step's) runs as a plan, with no
     * recording made for nothing. */
    for (int32_t i = 0; by_default && i < e->num_inst; i++)
        if (e->inst[i] == inst && e->planned[i] && e->runs[i] < 1 && !s->capture_first)
            return CGE_RUN_PLAN;
    int32_t captured = 0, lru = -1;
    for (int32_t i = 0; i < e->num_inst; i++)
        if (e->inst[i] != inst && cge__instance_captured(e->inst[i])) {
            captured++;
            if (lru < 0 || e->used[i] < e->used[lru])
                lru = i;
        }
    if (captured >= s->capture_limit && lru >= 0)
        cge__instance_drop_capture(e->inst[lru]);   /* waits for its replays in flight */
    if (cge__instance_capture(inst, stream) != CGE_OK) {
        /* A plan that cannot be captured still runs; a later run retries. */
        cge_clear_error();
        return CGE_RUN_PLAN;
    }
    return CGE_RUN_REPLAY;
}

/* Whether this run of `inst` will be a plan run with no recording made
 * (resolve_mode's answer, without its side effects): a signature's first run
 * in the default mode (a decode step's new length), or every run in plan
 * mode. Such a run reads its inputs where the caller has them and writes its
 * outputs into the caller's buffers, as a bound run does: it is synchronous,
 * so the buffers stay put while it runs, and with no recording there are no
 * addresses to keep. That saves a copy of every input and output (the whole
 * cache, in and out, per concat-form decode step). */
static bool runs_unrecorded(const cge_session *s, const graph_entry *e, const cge__instance *inst,
                            cge_run_mode want)
{
    if (cge__instance_value_dependent(inst))
        return false;
    bool by_default = want == CGE_RUN_DEFAULT && s->mode == CGE_RUN_DEFAULT;
    if (want == CGE_RUN_DEFAULT)
        want = s->mode == CGE_RUN_DEFAULT ? CGE_RUN_REPLAY : s->mode;
    if (want == CGE_RUN_PLAN)
        return true;
    if (want != CGE_RUN_REPLAY || cge__instance_captured(inst) || !by_default || s->capture_first)
        return false;
    for (int32_t i = 0; i < e->num_inst; i++)
        if (e->inst[i] == inst)
            return e->planned[i] && e->runs[i] < 1;
    return false;
}

/* Whether two of the caller's output buffers overlap: then each must be
 * written where the session has it and copied out in order, as before. */
static bool outputs_overlap(const cge_tensor *outputs, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = i + 1; j < n; j++) {
            uintptr_t a = (uintptr_t)outputs[i].data, b = (uintptr_t)outputs[j].data;
            if (a && b && outputs[i].bytes && outputs[j].bytes && a < b + outputs[j].bytes &&
                b < a + outputs[i].bytes)
                return true;
        }
    return false;
}

/* A padded run's tensors: inputs at the padded shapes (zeros past the
 * caller's rows) and outputs at the instance's, in the entry's stage. */
static cge_status stage_padded(graph_entry *e, cge__instance *inst, const cge_tensor *inputs,
                               const int32_t *in_pos, int32_t ni, const cge_shape *padded,
                               const int32_t *out_pos, int32_t no, cge_tensor *pin,
                               cge_tensor *pout)
{
    size_t need = 0;
    cge_tensor_desc od;
    for (int32_t i = 0; i < ni; i++)
        need += (cge_tensor_nbytes(inputs[i].dtype, &padded[in_pos[i]]) + 63) & ~(size_t)63;
    for (int32_t j = 0; j < no; j++) {
        cge_status st = cge__instance_output_desc(inst, out_pos[j], &od);
        if (st)
            return st;
        need += (cge_tensor_nbytes(od.dtype, &od.shape) + 63) & ~(size_t)63;
    }
    if (need > e->stage_bytes) {
        void *grown = aligned_alloc(64, need);
        if (!grown)
            return cge_error(CGE_LAYER_SESSION, CGE_ERR_NO_MEMORY,
                             "graph %u: out of memory padding a run (%zu bytes)", e->id, need);
        free(e->stage);
        e->stage = grown;
        e->stage_bytes = need;
    }
    char *at = e->stage;
    for (int32_t i = 0; i < ni; i++) {
        pin[i] = inputs[i];
        pin[i].shape = padded[in_pos[i]];
        pin[i].data = at;
        pin[i].bytes = cge_tensor_nbytes(inputs[i].dtype, &pin[i].shape);
        cge__copy_box(at, &pin[i].shape, inputs[i].data, &inputs[i].shape,
                      cge_dtype_size(inputs[i].dtype));
        at += (pin[i].bytes + 63) & ~(size_t)63;
    }
    for (int32_t j = 0; j < no; j++) {
        cge__instance_output_desc(inst, out_pos[j], &od);
        pout[j] = (cge_tensor){.name = cge_graph_output(e->g, out_pos[j]), .data = at,
                               .bytes = cge_tensor_nbytes(od.dtype, &od.shape)};
        at += (pout[j].bytes + 63) & ~(size_t)63;
    }
    return CGE_OK;
}

/* The caller's outputs from a padded run's: each padded axis of an output
 * back at the size the caller's inputs gave it. */
static cge_status cut_padded(graph_entry *e, const cge_shape *shapes, const cge_tensor *pout,
                             cge_tensor *outputs, const int32_t *out_pos, int32_t no)
{
    char sh[CGE_SHAPE_STR_MAX];
    for (int32_t j = 0; j < no; j++) {
        cge_shape real = pout[j].shape;
        cge__pad_cut_shape(e->pad, out_pos[j], shapes, &real);
        outputs[j].dtype = pout[j].dtype;
        outputs[j].shape = real;
    }
    for (int32_t j = 0; j < no; j++) {
        size_t need = cge_tensor_nbytes(outputs[j].dtype, &outputs[j].shape);
        if (outputs[j].bytes < need || (need && !outputs[j].data))
            return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                             "output '%s' is %s %s and needs %zu bytes; the buffer given has "
                             "%zu%s",
                             cge_graph_output(e->g, out_pos[j]), cge_dtype_name(outputs[j].dtype),
                             cge_shape_str(&outputs[j].shape, sh, sizeof sh), need,
                             outputs[j].bytes, outputs[j].data ? "" : " (data is NULL)");
        cge__copy_box(outputs[j].data, &outputs[j].shape, pout[j].data, &pout[j].shape,
                      cge_dtype_size(outputs[j].dtype));
    }
    return CGE_OK;
}

/* The entry's run_scratch for ni inputs and no outputs (the graph's: they
 * never change), made once; the caller holds the entry's lock. Positions
 * start at 0 and shapes empty, as a fresh calloc's. */
static cge_status run_scratch_get(graph_entry *e, int32_t ni, int32_t no)
{
    run_scratch *r = &e->scratch;
    size_t nin = (size_t)ni + 1, nout = (size_t)no + 1;
    if (!r->block) {
        /* In one block: the shapes and tensors first (their alignment), the
         * positions last. */
        size_t bytes = 2 * nin * sizeof(cge_shape) + (nin + nout) * sizeof(cge_tensor) +
                       (nin + nout) * sizeof(int32_t);
        char *b = calloc(1, bytes);
        if (!b)
            return cge_error(CGE_LAYER_SESSION, CGE_ERR_NO_MEMORY, "run_graph: out of memory");
        r->block = b;
        r->shapes = (cge_shape *)b;
        r->padded = r->shapes + nin;
        r->pin = (cge_tensor *)(r->padded + nin);
        r->pout = r->pin + nin;
        r->in_pos = (int32_t *)(r->pout + nout);
        r->out_pos = r->in_pos + nin;
    }
    memset(r->in_pos, 0, sizeof *r->in_pos * nin);
    memset(r->out_pos, 0, sizeof *r->out_pos * nout);
    memset(r->shapes, 0, sizeof *r->shapes * nin);
    return CGE_OK;
}

static cge_status run(cge_session *s, uint32_t graph_id, const cge_tensor *inputs,
                      int32_t num_inputs, cge_tensor *outputs, int32_t num_outputs,
                      cge_stream *stream, bool sync, cge_run_mode want, cge_profile_fn prof,
                      void *prof_user, bool bind_buffers)
{
    if ((int)want < CGE_RUN_DEFAULT || want > CGE_RUN_REPLAY)
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG, "run: invalid run mode %d",
                         (int)want);
    if (!s)
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG, "run_graph: session is NULL");
    graph_entry *e = find_entry(s, graph_id);
    if (!e)
        return no_graph(graph_id);
    if (stream && cge_stream_device(stream) != s->dev)
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                         "graph %u: the stream belongs to another device than the session's",
                         graph_id);
    pthread_mutex_lock(&e->lock);
    cge_status st = compile_locked(s, e);
    int32_t ni = cge_graph_num_inputs(e->g), no = cge_graph_num_outputs(e->g);
    if (!st)
        st = run_scratch_get(e, ni, no);
    int32_t *in_pos = e->scratch.in_pos, *out_pos = e->scratch.out_pos;
    cge_shape *shapes = e->scratch.shapes;
    if (!st)
        st = bind(e->g, graph_id, true, inputs, num_inputs, in_pos);
    if (!st)
        st = bind(e->g, graph_id, false, outputs, num_outputs, out_pos);
    if (!st)
        st = check_inputs(e, inputs, num_inputs, in_pos, shapes);
    /* Shape buckets: a synchronous run at a paddable size runs at its bucket. */
    cge_shape *padded = NULL;
    cge_tensor *pin = NULL, *pout = NULL;
    bool pad = false;
    if (!st && s->buckets && (sync || !stream) && !prof && !bind_buffers) {
        padded = e->scratch.padded;
        pin = e->scratch.pin;
        pout = e->scratch.pout;
        memset(padded, 0, sizeof *padded * ((size_t)ni + 1));
        memset(pin, 0, sizeof *pin * ((size_t)ni + 1));
        memset(pout, 0, sizeof *pout * ((size_t)no + 1));
        /* Where the graph pads is worked out once, from its descriptors. */
        if (!st && !e->pad_made) {
            st = cge__pad_plan_create(s->buckets, e->g, described_graph(e), &e->pad);
            e->pad_made = !st;
        }
        if (!st)
            pad = cge__pad_round(e->pad, shapes, ni, padded);
    }
    cge__instance *inst = NULL;
    if (!st)
        st = get_instance(s, e, pad ? padded : shapes, &inst);
    if (!st && pad && cge__instance_value_dependent(inst)) {
        pad = false;   /* output shapes known only after the run: no padding */
        st = get_instance(s, e, shapes, &inst);
    }
    if (!st && pad)
        st = stage_padded(e, inst, inputs, in_pos, num_inputs, padded, out_pos, num_outputs, pin,
                          pout);
    const cge_tensor *run_in = pad ? pin : inputs;
    cge_tensor *run_out = pad ? pout : outputs;
    if (!st) {
        /* Instances share the arena: this run starts after the last one. */
        cge__instance_after(inst, e->last_inst);
        e->last_inst = inst;
    }
    cge_stream *on = stream ? stream : s->stream;
    /* Decided before a profile makes the run a plan run: a profiled run
     * shows the copies its unprofiled run would make. */
    bool in_place = !st && !bind_buffers && !pad && (sync || !stream) && !s->copy_io &&
                    runs_unrecorded(s, e, inst, want) && !outputs_overlap(run_out, num_outputs);
    if (!st && prof) {
        /* Profiled runs go step by step: a replay cannot be split. */
        if (want == CGE_RUN_DEFAULT)
            want = s->mode;
        if (want != CGE_RUN_EAGER)
            want = CGE_RUN_PLAN;
        sync = true;
    }
    if (!st) {
        /* Before a capture: a recording keeps the addresses it saw. */
        cge__instance_bind_buffers(inst, run_in, in_pos, num_inputs, run_out, out_pos,
                                   num_outputs, bind_buffers || in_place);
        cge_run_mode mode = resolve_mode(s, e, inst, want, on);
        e->last_mode = mode;
        cge__instance_set_profile(inst, prof, prof_user);
        st = cge__instance_run(inst, on, run_in, in_pos, num_inputs, run_out, out_pos,
                              num_outputs, mode, sync || !stream);
        cge__instance_set_profile(inst, NULL, NULL);
        for (int32_t i = 0; !st && i < e->num_inst; i++)
            e->runs[i] += e->inst[i] == inst;
    }
    if (!st && pad)
        st = cut_padded(e, shapes, pout, outputs, out_pos, num_outputs);
    pthread_mutex_unlock(&e->lock);
    return st;
}

cge_status cge_session_run_graph(cge_session *s, uint32_t graph_id, const cge_tensor *inputs,
                                 int32_t num_inputs, cge_tensor *outputs, int32_t num_outputs)
{
    return run(s, graph_id, inputs, num_inputs, outputs, num_outputs, NULL, true,
               CGE_RUN_DEFAULT, NULL, NULL, false);
}

cge_status cge_session_run(cge_session *s, uint32_t graph_id, const cge_tensor *inputs,
                           int32_t num_inputs, cge_tensor *outputs, int32_t num_outputs,
                           const cge_run_options *opts)
{
    cge_stream *stream = opts ? opts->stream : NULL;
    cge_cancel *prev = opts && opts->cancel ? cge_cancel_scope(opts->cancel) : NULL;
    cge_status st = run(s, graph_id, inputs, num_inputs, outputs, num_outputs, stream, !stream,
                        opts ? opts->mode : CGE_RUN_DEFAULT, opts ? opts->profile : NULL,
                        opts ? opts->profile_user : NULL, opts && opts->bind_buffers);
    if (opts && opts->cancel)
        cge_cancel_scope(prev);
    return st;
}

cge_status cge_session_arena_bytes(const cge_session *s, uint32_t graph_id, size_t *bytes)
{
    graph_entry *e = s ? find_entry((cge_session *)s, graph_id) : NULL;
    if (!e || !bytes)
        return e ? cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG, "arena_bytes: bytes is NULL")
                 : (s ? no_graph(graph_id)
                      : cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                                  "arena_bytes: session is NULL"));
    pthread_mutex_lock(&e->lock);
    /* A loaded model's one instance keeps the plan's arena of its own. */
    *bytes = e->arena ? e->arena_bytes : e->plan && e->compiled ? cge_plan_arena_bytes(e->plan) : 0;
    pthread_mutex_unlock(&e->lock);
    return CGE_OK;
}

/* Bytes of the constants the entry's plans read that are still held: each
 * instance's plan graph's, counted once per block (instances of one graph
 * share them). */
static size_t held_weight_bytes(const graph_entry *e)
{
    if (!e->compiled)
        return 0;
    size_t total = 0;
    const void **seen = NULL;
    int32_t num_seen = 0, cap_seen = 0;
    for (int32_t i = 0; i < e->num_inst; i++) {
        const cge_graph *g = cge__instance_graph(e->inst[i]);
        for (int32_t id = 0; id < cge_graph_num_values(g); id++) {
            const cge_tensor *t = cge_graph_value_constant(g, id);
            if (!t || !t->data)
                continue;
            bool dup = false;
            for (int32_t k = 0; k < e->num_retired && !dup; k++)
                dup = e->retired[k].data == t->data;   /* its pages are gone */
            for (int32_t k = 0; k < num_seen && !dup; k++)
                dup = seen[k] == t->data;
            if (dup)
                continue;
            if (num_seen == cap_seen) {
                int32_t cap = cap_seen ? 2 * cap_seen : 256;
                const void **n = realloc(seen, sizeof *n * (size_t)cap);
                if (!n)
                    break;   /* a statistic: an undercount beats failing */
                seen = n;
                cap_seen = cap;
            }
            seen[num_seen++] = t->data;
            total += t->bytes;
        }
    }
    free(seen);
    return total;
}

cge_status cge_session_get_graph_stats(const cge_session *s, uint32_t graph_id,
                                       cge_session_graph_stats *out)
{
    graph_entry *e = s ? find_entry((cge_session *)s, graph_id) : NULL;
    if (!e || !out)
        return e ? cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG, "graph_stats: out is NULL")
                 : (s ? no_graph(graph_id)
                      : cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                                  "graph_stats: session is NULL"));
    pthread_mutex_lock(&e->lock);
    /* Value-dependent instances prepare, allocate and free weights at runs. */
    int64_t eager_prepares = 0, eager_allocs = 0;
    size_t eager_bytes = 0, released = e->released_bytes + e->retired_bytes;
    for (int32_t i = 0; e->compiled && i < e->num_inst; i++) {
        int64_t p, a;
        size_t b;
        cge__instance_eager_counts(e->inst[i], &p, &a, &b);
        eager_prepares += p;
        eager_allocs += a;
        eager_bytes += b;
        if (cge__instance_value_dependent(e->inst[i]) &&
            cge__instance_released_bytes(e->inst[i]) > released)
            released = cge__instance_released_bytes(e->inst[i]);
    }
    *out = (cge_session_graph_stats){.compiles = e->compiles,
                                     .specializations = e->specializations,
                                     .arena_grows = e->arena_grows,
                                     .shape_program = e->symbolic && !e->symbolic_off,
                                     .weight_bytes = held_weight_bytes(e),
                                     .packed_bytes = cge__kernel_cache_made_bytes(e->shared),
                                     .released_bytes = released,
                                     .arena_bytes = e->arena ? e->arena_bytes : eager_bytes,
                                     .respecializations = e->respecializations,
                                     .kernel_prepares = e->kernel_prepares,
                                     .arena_replans = cge_shape_program_replans(e->program),
                                     .specialize_ms = e->specialize_ms,
                                     .bind_ms = e->bind_ms,
                                     .eager_prepares = eager_prepares,
                                     .eager_allocs = eager_allocs,
                                     .delta_rebinds = e->delta_rebinds,
                                     .steps_rebound = e->steps_rebound};
    if (e->program) {
        cge_shape_program_stats ps;
        cge_shape_program_get_stats(e->program, &ps);
        out->shape_metas = ps.metas;
        out->shape_allocations = ps.allocations;
    }
    pthread_mutex_unlock(&e->lock);
    return CGE_OK;
}

cge_status cge_session_last_run_mode(const cge_session *s, uint32_t graph_id,
                                     cge_run_mode *mode)
{
    graph_entry *e = s ? find_entry((cge_session *)s, graph_id) : NULL;
    if (!e || !mode)
        return e ? cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG, "last_run_mode: mode is NULL")
                 : (s ? no_graph(graph_id)
                      : cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                                  "last_run_mode: session is NULL"));
    pthread_mutex_lock(&e->lock);
    *mode = e->last_mode;
    pthread_mutex_unlock(&e->lock);
    return CGE_OK;
}

cge_status cge_session_run_graph_async(cge_session *s, uint32_t graph_id,
                                       const cge_tensor *inputs, int32_t num_inputs,
                                       cge_tensor *outputs, int32_t num_outputs,
                                       cge_stream *stream)
{
    if (!stream)
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG, "run_graph_async: stream is NULL");
    return run(s, graph_id, inputs, num_inputs, outputs, num_outputs, stream, false,
               CGE_RUN_DEFAULT, NULL, NULL, false);
}

cge_status cge_session_last_output_desc(const cge_session *s, uint32_t graph_id, int32_t i,
                                        cge_tensor_desc *out)
{
    graph_entry *e = s ? find_entry((cge_session *)s, graph_id) : NULL;
    if (!e || !out)
        return e ? cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG, "last_output_desc: out is NULL")
                 : (s ? no_graph(graph_id)
                      : cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                                  "last_output_desc: session is NULL"));
    int32_t n = cge_graph_num_outputs(e->g);
    if (i < 0 || i >= n)
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                         "graph %u has %d outputs; index %d is out of range", graph_id, n, i);
    pthread_mutex_lock(&e->lock);
    cge_status st = e->last_inst ? cge__instance_output_desc(e->last_inst, i, out)
                                 : cge_error(CGE_LAYER_SESSION, CGE_ERR_STATE,
                                             "graph %u has not been run yet", graph_id);
    pthread_mutex_unlock(&e->lock);
    return st;
}
