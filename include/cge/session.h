/* Sessions: hold several graphs by id, compile them (verify, infer, order,
 * allocate) and run them synchronously or asynchronously on a stream. Inputs
 * are checked (count, names, dtypes, shapes) before anything runs. */
#ifndef CGE_SESSION_H
#define CGE_SESSION_H

#include "cge/compiler.h"
#include "cge/dist.h"
#include "cge/graph.h"
#include "cge/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cge_session cge_session;

/* How a run executes a compiled graph.
 * EAGER:  op by op from the graph: infer, bind buffers, launch, synchronize,
 *         for each node (debugging: a failure stops at its node).
 * PLAN:   the precomputed node list: every address resolved and every shape
 *         known at compile time; a run copies inputs, launches, copies outputs.
 * REPLAY: the plan captured once per input signature into a replay instance;
 *         a run copies inputs into the bound buffers and submits it in one step.
 * DEFAULT: REPLAY where the graph allows it (every shape known before the
 *         run), otherwise PLAN (or EAGER for shapes that depend on values);
 *         a signature a symbolic graph's shape program planned runs its
 *         first run as PLAN and is captured at its second. */
typedef enum cge_run_mode {
    CGE_RUN_DEFAULT = 0,
    CGE_RUN_EAGER = 1,
    CGE_RUN_PLAN = 2,
    CGE_RUN_REPLAY = 3
} cge_run_mode;
const char *cge_run_mode_name(cge_run_mode mode);     /* "eager", ... */
/* Parse "eager" | "plan" | "replay" | "default"; -1 if unknown. */
int cge_run_mode_from_name(const char *name);

/* Shape buckets for one symbolic dim (by its name, "batch") whose rows are
 * independent, so that padding it changes no real row: a run's size is
 * rounded up to the next of `sizes` (sizes past the largest run as they
 * are), its inputs padded with zeros and its outputs cut back, so a few
 * compiled and captured signatures serve every size (as vLLM's capture
 * sizes 1, 2, 4, 8, ...). The caller never sees a padded row. Only
 * synchronous runs pad, and only where every graph output carries the dim. */
typedef struct cge_dim_buckets {
    const char *dim;
    const int64_t *sizes;
    int32_t num_sizes;
} cge_dim_buckets;

typedef struct cge_session_options {
    /* Device to run on; NULL creates a CPU device owned by the session. */
    cge_device *device;
    /* Threads of the owned device (0: $CGE_NUM_THREADS or all cores). */
    int num_threads;
    /* Run mode for runs that do not choose one; $CGE_RUN_MODE (eager, plan,
     * replay) overrides it, for experiments. */
    cge_run_mode run_mode;
    /* Recordings for replay a graph keeps, one per input signature (0: 8).
     * Past it, the least recently run signature gives up its recording for
     * the new one (and is captured again if it comes back). The session
     * keeps up to 16 compiled signatures per graph, least recently run
     * evicted. */
    int capture_limit;
    /* How plans are compiled (cge/compiler.h): CGE_OPT_DEFAULT is level 3
     * (exact rewrites, fusions, channels-last convolutions) unless
     * $CGE_OPT_LEVEL (0-3) says otherwise;
     * CGE_OPT_NONE compiles the graph as written. Eager runs always execute
     * the unoptimised graph. */
    cge_opt_level opt_level;
    /* Streams a plan may spread independent branches over (0: 1). */
    int num_streams;
    /* Shape buckets (copied at create): see cge_dim_buckets. */
    const cge_dim_buckets *buckets;
    int32_t num_buckets;
    /* A graph with symbolic inputs is partitioned and built once, dims
     * symbolic, and each new input signature's plan comes from that plan's
     * shape program (cge_plan_specialize: meta along the steps, offsets over
     * fixed lifetimes), with no compile. True turns this off: each signature
     * compiles the optimised graph instead (as does a graph the shape
     * program cannot serve: shapes that depend on values, control flow).
     * $CGE_SHAPE_PROGRAM=0 turns it off too. */
    bool disable_shape_program;
    /* Arithmetic of the heavy float32 operators (cge/compiler.h,
     * cge_precision): 0 is float32; CGE_PRECISION_BF16 runs Conv, MatMul and
     * Gemm in bfloat16 with float32 accumulation. $CGE_PRECISION (fp32,
     * bf16) overrides a zero field, for experiments. */
    cge_precision precision;
    /* Distribution over processes (cge/dist.h, docs/distributed.md); all
     * zero: one process, and cge.dist operators act on a world of one.
     * The session duplicates the communicator at create (a collective call:
     * every rank creates its session, and then builds its plans in the same
     * order). */
    cge_dist_source dist;
    const void *dist_mpi_comm;    /* CGE_DIST_MPI_COMM: address of the caller's MPI_Comm */
    /* Nonzero: the world must have this many ranks and this process must be
     * dist_rank ([runtime] error at create otherwise): a launcher mistake
     * caught before any graph runs. */
    int dist_world_size;
    int dist_rank;
    int dist_timeout_ms;          /* every collective's bound (0: 30000 ms) */
    /* Tensor-parallel degree (0, 1: none): each graph added is sharded for
     * this rank (cge_dist_tensor_parallel); it must equal the world size. */
    int dist_tp;
    /* Pipeline-parallel degree (0, 1: none): each graph added is cut into
     * this many stages of balanced cost, this rank keeping its stage
     * (cge_dist_pipeline_parallel); it must equal the world size, and is
     * not combined with dist_tp. */
    int dist_pp;
    /* With dist_pp: micro-batches per run (0, 1: none). The inputs' axis 0
     * (a static batch it must divide) is split into this many parts that
     * flow through the stages one after another, GPipe-style, so that the
     * stages work at the same time (cge_dist_pipeline_parallel_micro). */
    int dist_micro_batches;
    /* > 0: each graph added is rewritten from the concat form of a
     * key/value cache export to the static form with caches of this many
     * slots (cge_graph_kv_cache_static, cge/compiler.h): the pasts become
     * [.., max_len, ..], a last input "cache_position" (int64 [1]) appears,
     * and every decoding step has the same shapes. A graph it does not match
     * is a [meta] error at cge_session_add_graph. Plans added
     * (cge_session_add_plan, models) are taken as they are. 0: no rewrite. */
    int64_t kv_cache_max_len;
} cge_session_options;

/* Profiling: a run with cge_run_options.profile set executes step by step
 * (a REPLAY request runs as PLAN, since a replay cannot be split), waits for
 * every step and copy to finish before the next, and reports each one. Times
 * are cge_profile_clock_ms() values: launch_begin..launch_end is the host's
 * dispatch (binding, enqueueing), launch_end..end_ms the work itself. */
typedef enum cge_profile_kind {
    CGE_PROFILE_KERNEL = 0,     /* a plan step (eager: a node) */
    CGE_PROFILE_COPY_IN = 1,    /* a graph input copied from the caller */
    CGE_PROFILE_COPY_OUT = 2    /* a graph output copied to the caller */
} cge_profile_kind;

typedef struct cge_profile_event {
    cge_profile_kind kind;
    int32_t step;               /* step (eager: node) index; -1 for copies */
    const char *name;           /* node, or the input/output copied */
    const char *op_type;        /* "" for copies */
    const char *domain;
    const char *engine;
    int32_t stream;
    double launch_begin_ms, launch_end_ms, end_ms;
    size_t bytes;               /* copies: bytes moved */
} cge_profile_event;
typedef void (*cge_profile_fn)(const cge_profile_event *ev, void *user);
/* The monotonic clock of profile times, in milliseconds. */
double cge_profile_clock_ms(void);

typedef struct cge_run_options {
    cge_run_mode mode;       /* CGE_RUN_DEFAULT: the session's mode */
    cge_stream *stream;      /* NULL: run synchronously on the session's stream */
    cge_profile_fn profile;  /* NULL: no profile; else a synchronous profiled run */
    void *profile_user;
    /* I/O binding: the kernels read the inputs from, and write the outputs
     * into, the caller's buffers themselves, with no copy in or out (where
     * the plan keeps a value apart, which is the common case; an output that
     * is a view of another value is still copied). The buffers must stay
     * valid, and the inputs unchanged, until the run ends. Replays keep
     * their recording while the same buffers come back; other buffers mean
     * one new capture. Eager runs copy as usual. */
    bool bind_buffers;
    /* The run's work carries this token (cge/runtime.h, "cancellation"), as
     * if run inside cge_cancel_scope(cancel): cge_cancel_request from any
     * thread, or its deadline, stops it with a [runtime] CGE_ERR_CANCELLED or
     * CGE_ERR_TIMEOUT error, naming the plan step where a step-by-step run
     * stopped. NULL: the calling thread's scope. */
    cge_cancel *cancel;
} cge_run_options;

cge_status cge_session_create(const cge_session_options *opts, cge_session **out);
/* Waits for the session's work, releases every graph. NULL is a no-op. */
void cge_session_destroy(cge_session *s);
cge_device *cge_session_device(const cge_session *s);

/* The session keeps its own copy of `g`; the caller keeps `g`. */
cge_status cge_session_add_graph(cge_session *s, uint32_t graph_id, const cge_graph *g);
/* Runs a plan built elsewhere (a loaded model file, cge_compile) under
 * `graph_id`: no compile. `plan` (its graph included) and `constants` (host
 * memory of cge_plan_constant_bytes(), used in place on the CPU device;
 * NULL: written from the plan's graph, as for a cge_compile plan) stay the
 * caller's; release(owner) is called once the session no longer uses them
 * (release may be NULL). An incomplete plan (cge_plan_is_complete) is refused. */
cge_status cge_session_add_plan(cge_session *s, uint32_t graph_id, const cge_plan *plan,
                                const void *constants, void (*release)(void *), void *owner);
/* Compiles the graph (cge_compile: verify, infer, optimize, plan) for its
 * declared input shapes when they are static, so that errors surface now;
 * with symbolic inputs it checks, infers and optimises the graph once and
 * builds its symbolic plan, whose shape program plans each new input
 * signature at its first run (no compile); where there is no symbolic plan,
 * each new signature compiles the optimised graph (a few ms). */
cge_status cge_session_compile_graph(cge_session *s, uint32_t graph_id);
cge_status cge_session_remove_graph(cge_session *s, uint32_t graph_id);

/* Descriptors of a compiled graph's inputs and outputs (shapes as compiled:
 * dynamic dims stay dynamic until a run fixes them). */
cge_status cge_session_num_io(const cge_session *s, uint32_t graph_id, int32_t *num_inputs,
                              int32_t *num_outputs);
cge_status cge_session_input_desc(const cge_session *s, uint32_t graph_id, int32_t i,
                                  cge_tensor_desc *out);
cge_status cge_session_output_desc(const cge_session *s, uint32_t graph_id, int32_t i,
                                   cge_tensor_desc *out);

/* The name of a symbolic dimension (a dim <= -2 in those descriptors, e.g.
 * ONNX's dim_param "batch"); NULL for other dims, unnamed symbols, or an
 * unknown graph. Inputs declared with the same symbol must be given the same
 * size in a run ([session] error otherwise). The string lives as long as the
 * graph stays in the session. */
const char *cge_session_dim_symbol_name(const cge_session *s, uint32_t graph_id, int64_t dim);
/* Output `i` as the graph's last run computed it (dtype, concrete shape).
 * A run that fails only because an output buffer is too small still records
 * it, so a caller that cannot know output shapes beforehand (shapes that
 * depend on values) runs, reads the shapes here, allocates and runs again.
 * CGE_ERR_STATE before the first run. */
cge_status cge_session_last_output_desc(const cge_session *s, uint32_t graph_id, int32_t i,
                                        cge_tensor_desc *out);

/* Run a compiled graph (compiling it first if needed). Inputs: host tensors,
 * matched by name (or by position when every name is NULL), each with the
 * graph's dtype and a shape that fits the declared one. Outputs: host
 * buffers, by name or position; each output's dtype and shape are written
 * back, and `bytes` must be large enough. Errors leave the outputs' data
 * untouched; when a buffer is too small ([session] "output 'y' is ... and
 * needs N bytes"), every output's dtype and shape say what this run needs,
 * so that the caller can retry with larger buffers from its own call's
 * answer (another thread's runs cannot change it). A string output
 * (CGE_STRING) receives cge_string elements whose bytes stay the session's
 * (a node's string store, a constant, or the caller's own input strings):
 * valid until the graph's next run or its removal; copy them to keep them
 * (docs/strings.md). */
cge_status cge_session_run_graph(cge_session *s, uint32_t graph_id, const cge_tensor *inputs,
                                 int32_t num_inputs, cge_tensor *outputs, int32_t num_outputs);
/* The same, enqueued on `stream`: returns after checking and enqueueing; the
 * input and output buffers must stay valid until the stream has passed the
 * run (cge_stream_synchronize). Runs of one graph on a stream are ordered. */
cge_status cge_session_run_graph_async(cge_session *s, uint32_t graph_id,
                                       const cge_tensor *inputs, int32_t num_inputs,
                                       cge_tensor *outputs, int32_t num_outputs,
                                       cge_stream *stream);
/* The general form: mode and stream from `opts` (NULL: defaults, synchronous).
 * With a stream the call returns once the run is enqueued (eager mode and
 * value-dependent shapes still synchronize as they go). */
cge_status cge_session_run(cge_session *s, uint32_t graph_id, const cge_tensor *inputs,
                           int32_t num_inputs, cge_tensor *outputs, int32_t num_outputs,
                           const cge_run_options *opts);
/* The mode the last run of the graph used (what DEFAULT resolved to). */
cge_status cge_session_last_run_mode(const cge_session *s, uint32_t graph_id,
                                     cge_run_mode *mode);
/* Bytes of the arena the graph's compiled signatures share: as large as the
 * largest of their plans' arenas (signatures take turns in it), 0 before the
 * first compile. */
cge_status cge_session_arena_bytes(const cge_session *s, uint32_t graph_id, size_t *bytes);
/* The session's communicator (NULL without distribution). */
cge_dist_comm *cge_session_dist_comm(const cge_session *s);

/* What the session did for one graph so far, for tests and tools that check
 * a path does no work twice. */
typedef struct cge_session_graph_stats {
    int64_t compiles;          /* cge_compile calls (the graph's, and per signature) */
    int64_t specializations;   /* signatures planned by the shape program instead */
    int64_t arena_grows;       /* times the shared arena moved to a larger block */
    bool shape_program;        /* new signatures come from the shape program */
    /* Memory, in bytes, once compiled (0 before): the constants the graph's
     * plans read as they are (weights not packed, biases, folded values);
     * what kernels derived from constants at prepare (packed weights,
     * reordered convolution weights); the weights freed once packed (a graph
     * with static shapes keeps only their packed copy; $CGE_KEEP_PACKED_WEIGHTS=1
     * keeps both); and the arena (activations and workspaces). */
    size_t weight_bytes;
    size_t packed_bytes;
    size_t released_bytes;
    size_t arena_bytes;
    /* Of the specializations, those that rewrote an instance seen once in
     * place (a decode step's), the kernels prepared again there (those
     * whose shapes changed), and the in-place ones that planned the arena
     * again (a block outgrew the room its offset was planned for). */
    int64_t respecializations, kernel_prepares, arena_replans;
    /* CPU time (ms) of the shape program and the in-place rebinding, and of
     * binding new instances (kernel prepare included). */
    double specialize_ms, bind_ms;
    /* Graphs whose shapes depend on computed values run node by node: the
     * kernel prepares and buffer allocations those runs made so far. A
     * node whose shapes are static in the compiled graph is prepared at its
     * first run only, and a run at a repeated size reuses its buffers; the
     * buffers' bytes are in arena_bytes. */
    int64_t eager_prepares, eager_allocs;
    /* Of the respecializations, those whose shape program run changed the
     * plan only where sizes changed, so that only the steps touching a
     * changed value were bound again ("delta" rebinds); the steps bound
     * again in all respecializations; and the shape program's step metas
     * and buffer allocations (cge_shape_program_get_stats). */
    int64_t delta_rebinds, steps_rebound;
    int64_t shape_metas, shape_allocations;
} cge_session_graph_stats;
cge_status cge_session_get_graph_stats(const cge_session *s, uint32_t graph_id,
                                       cge_session_graph_stats *out);

#ifdef __cplusplus
}
#endif
#endif
