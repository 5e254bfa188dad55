/* The graph compiler: options, the engines partition chooses from, cge_compile
 * and the plan it makes for one input signature, and the standalone memory
 * planner and its verifier. */
#ifndef CGE_COMPILER_H
#define CGE_COMPILER_H

#include <stdio.h>

#include "cge/op.h"

/* Four stages of passes (prepare, optimize, partition, build) turn a graph and
 * a concrete input signature into a plan that a session executes without
 * allocating or inferring anything per run. Sessions keep one plan per input
 * signature (cge/session.h). */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- options ------------------------------------------------------------- */

/* Optimisation levels. The numbers are the 0-3 plus one, so that a
 * zeroed options struct means "the default" (CGE_OPT_LAYOUT). $CGE_OPT_LEVEL
 * (0-3) overrides the level of options that leave it at the default. */
typedef enum cge_opt_level {
    CGE_OPT_DEFAULT = 0,
    CGE_OPT_NONE = 1,    /* 0: prepare, partition and build only */
    CGE_OPT_EXACT = 2,   /* 1: + rewrites whose results are bit-identical */
    CGE_OPT_FUSE = 3,    /* 2: + fusions (results may differ by rounding) */
    CGE_OPT_LAYOUT = 4   /* 3: + layout changes (channels-last convolutions) */
} cge_opt_level;

/* Precision of the heavy float32 operators. FP32 (0, the default) computes
 * as the model says. BF16 runs Conv, MatMul, Gemm and their fused forms
 * (FusedConv, FusedMatMul) with bfloat16 inputs and weights and float32
 * accumulation and outputs, on oneDNN's AVX512-BF16 / AMX kernels: weights
 * are converted once when a plan is made, activations as they are read.
 * The compiler's "precision" pass does it (the plan and model files carry
 * it); on a CPU or build without bfloat16 kernels it changes nothing.
 * Results differ from float32 by bfloat16's rounding (8 significant bits:
 * relative errors near 1e-3 to 1e-2). */
typedef enum cge_precision {
    CGE_PRECISION_FP32 = 0,
    CGE_PRECISION_BF16 = 1
} cge_precision;
const char *cge_precision_name(cge_precision p);   /* "fp32", "bf16" */
/* Parse "fp32" | "float32" | "bf16" | "bfloat16"; -1 if unknown. */
int cge_precision_from_name(const char *name);
/* Whether this build and CPU run bfloat16 kernels (BF16 changes anything). */
bool cge_precision_bf16_available(void);

/* An engine: a kernel provider. Its kernels are the cge_kernel_def entries
 * whose `engine` field equals `name`. Partition gives every node to the
 * engine of highest priority that has a kernel for the node's dtype and, if
 * `supports` is set, accepts the node. */
typedef struct cge_engine_desc {
    const char *name;          /* "cpu" */
    int32_t priority;          /* higher wins */
    int32_t memory_space;      /* engines of different spaces exchange data by copies */
    cge_format format;         /* layout its kernels read and write */
    /* Optional capability query: inputs/outputs as inferred. */
    bool (*supports)(const cge_node *node, const cge_tensor_desc *inputs, int32_t num_inputs,
                     const cge_tensor_desc *outputs, int32_t num_outputs, void *user);
    void *user;
} cge_engine_desc;

typedef struct cge_compile_options {
    cge_opt_level opt_level;
    /* Comma-separated pass names to skip / to run even if off by default or
     * above the level ("fuse_elementwise,cse"). */
    const char *disable;
    const char *enable;
    /* Write the graph (name.dot, name.txt) after every pass into this folder;
     * NULL: $CGE_DUMP_DIR, if set. */
    const char *dump_dir;
    /* Verify the graph after every pass (always on in builds without NDEBUG). */
    bool verify_each_pass;
    /* Keep per-pass times and counts (cge_plan_stats, cge_plan_write_stats). */
    bool collect_stats;
    /* Streams the plan may use (0: 1). Independent branches go to separate
     * streams with events between them. */
    int32_t num_streams;
    /* Constant folding evaluates a node only if its outputs fit in this many
     * bytes (0: 1 MiB). */
    size_t fold_limit_bytes;
    /* Training mode: Dropout is kept (default: inference, Dropout is a no-op). */
    bool training;
    /* Engines to choose from; NULL: just "cpu" (priority 0, memory space 0,
     * plain format). */
    const cge_engine_desc *engines;
    int32_t num_engines;
    /* Device for constant folding; NULL: a 1-thread CPU device made for the
     * compile. */
    cge_device *device;
    /* When some shape is still unknown after prepare (an input is not static,
     * or a shape depends on values computed at run time), return a plan with
     * no steps instead of failing (cge_plan_is_complete() is false): its graph
     * is verified, inferred and optimised with the dims symbolic (constant
     * folding, fusion, weights transformed once), for a caller that compiles
     * that graph again per concrete signature (cheap: its weight work is
     * done, and constants are shared) or runs it node by node. */
    bool allow_incomplete;
    /* With allow_incomplete, a graph whose shapes stay symbolic after
     * prepare goes on through partition and build with the dims symbolic:
     * the result is a symbolic plan (cge_plan_is_symbolic), whose steps,
     * engines, kernels, alias groups and lifetimes serve every size, and
     * which cge_plan_specialize turns into a concrete plan per signature by
     * its shape program (no passes). One stream only (num_streams > 1 is
     * ignored for such a plan). */
    bool symbolic_plan;
    /* Arithmetic of the heavy float32 operators (see cge_precision). Last,
     * so that a zeroed struct keeps float32. */
    cge_precision precision;
    /* > 0: rewrite a concat-form key/value cache export to the static form
     * with caches of this many slots, as the prepare pass kv_cache_static
     * (cge_graph_kv_cache_static below); 0: no rewrite. */
    int64_t kv_cache_max_len;
} cge_compile_options;

/* ---- the plan ------------------------------------------------------------ */

typedef struct cge_plan cge_plan;

/* Where a value lives while a plan runs. */
typedef enum cge_plan_storage {
    CGE_STORAGE_NONE = 0,       /* not used by any step */
    CGE_STORAGE_ARENA = 1,      /* arena + offset (graph inputs and outputs included) */
    CGE_STORAGE_CONSTANT = 2,   /* constant blob + offset */
    /* cge_plan_host_data() + offset: a small value a specialisation's shape
     * program computed on the host (a shape computation), the same for every
     * run at its sizes; host-addressable devices (CPU) only. */
    CGE_STORAGE_HOST = 3
} cge_plan_storage;

typedef struct cge_plan_value {
    const char *name;
    cge_dtype dtype;
    cge_shape shape;            /* static */
    cge_format format;
    int32_t memory_space;
    size_t bytes;
    cge_plan_storage storage;
    size_t offset;              /* in the arena or the constant blob */
    /* The value whose memory this one shares (a view: Reshape, Squeeze, ...;
     * or in-place reuse), -1 if it owns its memory. */
    int32_t alias_of;
    int32_t first_step, last_step;  /* lifetime in steps; inputs start at -1,
                                       outputs end at num_steps */
    int32_t input_index;        /* position among graph inputs, or -1 */
    int32_t output_index;       /* position among graph outputs, or -1 */
} cge_plan_value;

typedef struct cge_plan_step {
    const cge_node *node;       /* in cge_plan_graph() */
    const cge_op_def *def;
    const cge_kernel_def *kernel;
    const char *engine;
    int32_t stream;             /* 0 .. num_streams-1 */
    int32_t num_inputs, num_outputs;
    const int32_t *inputs;      /* plan value indices, -1 for absent inputs */
    const int32_t *outputs;
    size_t workspace_offset;    /* in the arena */
    size_t workspace_bytes;
    /* Before launching, wait for these events (recorded by other streams);
     * after launching, record `record` (-1: none). */
    int32_t num_waits;
    const int32_t *waits;
    int32_t record;
    /* Its outputs are CGE_STORAGE_HOST values the shape program computed:
     * a run does not launch it. */
    bool folded;
} cge_plan_step;

typedef struct cge_plan_pass_stats {
    const char *stage;          /* "prepare", "optimize", "partition", "build" */
    const char *name;
    double ms;
    int32_t nodes_before, nodes_after;
    int32_t removed, fused, added;   /* as the pass counted them */
} cge_plan_pass_stats;

typedef struct cge_plan_stats {
    double compile_ms;
    double stage_ms[4];                 /* prepare, optimize, partition, build */
    int32_t nodes_in, nodes_out;
    size_t arena_bytes;                 /* what the plan needs */
    size_t lower_bound_bytes;           /* the largest sum of live sizes at one step */
    size_t naive_bytes;                 /* every value and workspace on its own */
    size_t constant_bytes;
    int32_t num_streams, num_events;
    int32_t num_subgraphs;              /* connected runs of one engine */
    int32_t num_conversions;            /* copies and reorders inserted at borders */
    int32_t num_passes;
    const cge_plan_pass_stats *passes;  /* with collect_stats, else NULL */
    cge_opt_level opt_level;            /* the level compiled at (default resolved) */
    bool incomplete;                    /* stopped before partition (allow_incomplete) */
    bool symbolic;                      /* built with symbolic dims (symbolic_plan) */
} cge_plan_stats;

/* Compile `g` for the input shapes given (NULL: the declared ones, which must
 * then be static). `g` is not changed: the plan owns an optimised copy. */
/* Shape and dtype inference over the whole graph (every value's descriptor
 * written), carrying the values of small shape computations along: Shape and
 * Size of static shapes, and what follows from them and from constants. So
 * shapes the graph computes (Reshape(x, Concat(Shape(x)[0], ...))) become
 * known. Nothing is rewritten. This is the compiler's own infer pass. */
cge_status cge_graph_infer_values(cge_graph *g);

/* Rewrite, in place, a graph that exports a key/value cache in the concat
 * form (a graph input past_* concatenated with the new keys or values along
 * a dynamic axis into a graph output present_*) to the static form for
 * caches of max_len slots: each past becomes [.., max_len, ..], each present
 * the past with the new slots written (ScatterElements; in place where the
 * caller binds one buffer as both), a new last input "cache_position" (int64
 * [1]: the position of the first new token) replaces the lengths the graph
 * read from the caches' shapes, and every Softmax over the key slots masks
 * the slots not written yet. Every decoding step then has the same shapes.
 * A graph with no such cache, or whose use of the cache length is not a
 * construct the rewrite knows, is a [meta] error naming the node; the graph
 * may be partly rewritten then (rewrite a copy). docs/guide.md,
 * "Static-cache decoding". */
cge_status cge_graph_kv_cache_static(cge_graph *g, int64_t max_len);

cge_status cge_compile(const cge_graph *g, const cge_shape *input_shapes, int32_t num_inputs,
                       const cge_compile_options *opts, cge_plan **out);
void cge_plan_destroy(cge_plan *p);               /* NULL is a no-op */

const cge_graph *cge_plan_graph(const cge_plan *p);
/* Whether node `n` only renames its input's bytes (Reshape, Flatten,
 * Squeeze, Unsqueeze, Identity, the layout passes' LayoutView): the memory
 * planner gives its output its input's memory, and a node-by-node run
 * launches nothing for it. */
bool cge_node_is_view(const cge_node *n);
/* False for a plan that stopped before partition (allow_incomplete): it has
 * no steps, and its graph's shapes depend on run-time values or dims. */
bool cge_plan_is_complete(const cge_plan *p);
/* Whole-graph shape inferences run in this process so far (the compiler's
 * infer pass, cge_graph_infer_values): a debugging aid for tests and tools
 * that check a path does no work twice. */
int64_t cge_compiler_inference_count(void);
/* True for a plan built with symbolic dims (compile option symbolic_plan):
 * its values' shapes may hold symbols and unknown dims, bytes and offsets
 * are not set, and it runs only through cge_plan_specialize. */
bool cge_plan_is_symbolic(const cge_plan *p);
/* The shape program of a symbolic plan: a concrete plan for these input
 * shapes (in graph input order), with no pass, no graph copy and no
 * inference over the graph. Along the steps, each step's meta gets the
 * concrete input shapes (and the values of small integer shape computations,
 * evaluated on the host with their CPU kernels on `dev`, a CPU device), which
 * gives its outputs' shapes; workspaces are asked of the kernels; then the
 * plan's fixed lifetimes and alias groups get offsets for the concrete sizes
 * (cge_memplan_assign). The concrete plan borrows the symbolic plan's graph,
 * steps' nodes and kernels: it must not outlive it. Errors: a [meta] error
 * naming the node for shapes meta refuses (as a compile for these shapes
 * would give); CGE_ERR_UNSUPPORTED when a shape depends on values only a run
 * computes (NonZero, a Reshape to a computed tensor), or the symbolic plan's
 * memory sharing does not hold at these sizes: the caller compiles the
 * signature instead. */
cge_status cge_plan_specialize(const cge_plan *symbolic, const cge_shape *input_shapes,
                               int32_t num_inputs, cge_device *dev, cge_plan **out);
/* The shape program as an object that lives beside its symbolic plan (which
 * must outlive it), for callers that specialise again and again (a session,
 * a decode loop): its per-value arrays, host values and stream are reused,
 * so a run allocates nothing once sizes stop growing. run: *plan NULL makes
 * a new concrete plan, as cge_plan_specialize; a plan this program made
 * before is rewritten in place for the new shapes (sizes, host values,
 * workspaces), keeping its offsets and arena size while every block fits the
 * bytes its offset was planned for, and otherwise planning the arena again
 * with half as much again for each block that grew. On error an existing
 * plan is left as it was. Errors as cge_plan_specialize. */
typedef struct cge_shape_program cge_shape_program;
cge_status cge_shape_program_create(const cge_plan *symbolic, cge_device *dev,
                                    cge_shape_program **out);
void cge_shape_program_destroy(cge_shape_program *sp);   /* NULL is a no-op */
cge_status cge_shape_program_run(cge_shape_program *sp, const cge_shape *input_shapes,
                                 int32_t num_inputs, cge_plan **plan);
/* Constants whose bytes the plan's graph does not hold (a loaded model's)
 * are read from `blob` (cge_plan_constant_bytes() bytes of host memory, laid
 * out as cge_plan_write_constants writes them), which must outlive `sp`. */
void cge_shape_program_use_constants(cge_shape_program *sp, const void *blob);
/* In-place runs that had to plan the arena again (a block outgrew its room). */
int64_t cge_shape_program_replans(const cge_shape_program *sp);
/* What the last successful run changed, when it rewrote the plan it wrote
 * the time before only where sizes changed ("delta" run: no offset, host
 * value place or folded step moved): true, with the plan values whose
 * shape, bytes or host value changed and the steps whose workspace size
 * changed; the other entries are as they were. false when the plan was
 * written whole (a new plan, another plan, offsets planned again, values
 * computed on the host that came or went). Valid until the next run. */
bool cge_shape_program_last_changes(const cge_shape_program *sp, const int32_t **values,
                                    int32_t *num_values, const int32_t **steps,
                                    int32_t *num_steps);
/* Work counted over the program's life, for tests and tools. */
typedef struct cge_shape_program_stats {
    int64_t runs;          /* successful runs */
    int64_t delta_runs;    /* of those, written only where sizes changed */
    int64_t metas;         /* step metas run (steps whose inputs changed) */
    int64_t allocations;   /* buffers allocated (host values, new plans, host blobs) */
    int64_t replans;       /* as cge_shape_program_replans */
} cge_shape_program_stats;
void cge_shape_program_get_stats(const cge_shape_program *sp, cge_shape_program_stats *out);
int32_t cge_plan_num_steps(const cge_plan *p);
const cge_plan_step *cge_plan_steps(const cge_plan *p);
int32_t cge_plan_num_values(const cge_plan *p);
const cge_plan_value *cge_plan_values(const cge_plan *p);
/* Plan value index of a graph input / output by position, or -1. */
int32_t cge_plan_input_value(const cge_plan *p, int32_t i);
int32_t cge_plan_output_value(const cge_plan *p, int32_t i);
/* Plan value index by name, or -1. */
int32_t cge_plan_find_value(const cge_plan *p, const char *name);
/* The value whose memory value `v` shares (following alias_of to the end):
 * `v` itself when it owns its memory; -1 for an index out of range. */
int32_t cge_plan_root_value(const cge_plan *p, int32_t v);
size_t cge_plan_arena_bytes(const cge_plan *p);
/* The bytes of CGE_STORAGE_HOST values (NULL if none), owned by the plan. */
const void *cge_plan_host_data(const cge_plan *p);
size_t cge_plan_constant_bytes(const cge_plan *p);
/* Fill a constant blob of cge_plan_constant_bytes() bytes (host memory). */
void cge_plan_write_constants(const cge_plan *p, void *blob);
/* The last step (in issue order) during which step `t`'s workspace is in
 * use: later steps on other streams may still run while it is. */
int32_t cge_plan_workspace_last_step(const cge_plan *p, int32_t t);
int32_t cge_plan_num_streams(const cge_plan *p);
int32_t cge_plan_num_events(const cge_plan *p);
const cge_plan_stats *cge_plan_get_stats(const cge_plan *p);
/* Human-readable statistics: per pass, memory, streams. */
cge_status cge_plan_write_stats(const cge_plan *p, FILE *f);
/* One line per step: stream, engine, op, node, inputs -> outputs with offsets. */
cge_status cge_plan_write_text(const cge_plan *p, FILE *f);
/* Check the plan's memory: no two values live at the same step overlap
 * unless one aliases the other, views and in-place writes are safe, and
 * everything fits in the arena. [graph] error naming the values otherwise. */
cge_status cge_plan_verify(const cge_plan *p);

/* Names of the passes of each stage, in order, for documentation and tools. */
int32_t cge_compiler_num_passes(void);
/* Stage and name of pass i; false if out of range. `default_level` is the
 * lowest level that runs it (CGE_OPT_NONE for mandatory passes); 0 if it is
 * opt-in only. */
bool cge_compiler_pass_info(int32_t i, const char **stage, const char **name,
                            cge_opt_level *default_level);

/* ---- standalone memory planning ----------------------------------------- */

/* One buffer with a lifetime [first, last] in steps (inclusive). */
typedef struct cge_mem_block {
    size_t bytes;
    int32_t first, last;
    size_t offset;                      /* written by cge_memplan_assign */
} cge_mem_block;

typedef enum cge_memplan_strategy {
    CGE_MEMPLAN_AUTO = 0,               /* the best of the others (by size for small sets) */
    CGE_MEMPLAN_GREEDY_BY_SIZE = 1,     /* largest first, lowest fitting offset (TFLite) */
    CGE_MEMPLAN_LINEAR_SCAN = 2         /* in time order, best fit in a free list */
} cge_memplan_strategy;

/* Give every block an offset (multiples of `alignment`, a power of two; 0:
 * 64) so that blocks live at the same step do not overlap; *arena_bytes is
 * the end of the highest block. */
cge_status cge_memplan_assign(cge_mem_block *blocks, int32_t n, size_t alignment,
                              cge_memplan_strategy strategy, size_t *arena_bytes);
/* [graph] error naming the first two blocks that are live at one step and
 * overlap, or a block past arena_bytes. O(n log n + n * live). */
cge_status cge_memplan_verify(const cge_mem_block *blocks, int32_t n, size_t arena_bytes);
/* The largest sum of sizes of blocks live at one step (each size rounded up
 * to `alignment`; 0: 64). */
size_t cge_memplan_lower_bound(const cge_mem_block *blocks, int32_t n, size_t alignment);

#ifdef __cplusplus
}
#endif
#endif
