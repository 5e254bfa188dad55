/* Internal to the compiler: the context every pass receives, the pass table,
 * the parts of the plan under construction that build passes hand on, and use
 * lists and rewriting helpers shared by the passes. */
#ifndef CGE_COMPILER_INTERNAL_H
#define CGE_COMPILER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "cge/compiler.h"
#include "compiler/plan_builder.h"

/* The operators the passes make are declared in cge/fused_ops.h, not here. */

/* ---- context ---------------------------------------------------------------- */

/* What the build stage's passes hand on to each other: each part is made by
 * one pass, and the passes that read it name that pass in the pass table
 * (`needs`), so that it cannot be disabled under them. */
typedef struct cc_stream_plan {   /* build/plan_streams; absent: one stream */
    bool made;
    int32_t *step_stream;         /* per step (schedule position) */
    int32_t *step_pos;            /* position of the step within its stream */
    int32_t *vc;                  /* [step][stream]: last position known done */
    int32_t *wait_start, *waits;  /* CSR: events each step waits for */
    int32_t *record_event;        /* event recorded after the step, -1 none */
    int32_t num_events;
} cc_stream_plan;

typedef struct cc_build {
    cge_plan *plan;               /* written through compiler/plan_builder.h */
    int32_t *order;               /* build/order (node indices); build/schedule reorders it */
    int32_t num_order;
    cc_stream_plan streams;
} cc_build;

typedef struct cc_ctx {
    cge_compile_options opts;     /* defaults resolved */
    cge_opt_level level;
    const char *stage;            /* the stage running */
    cge_device *dev;              /* constant folding */
    bool own_dev;
    cge_stream *stream;
    cge_engine_desc *engines;     /* sorted by priority, highest first */
    int32_t num_engines;
    /* Per node index (valid from partition on; build passes add no nodes). */
    int32_t *node_engine;         /* index into engines */
    const cge_kernel_def **node_kernel;
    const cge_op_def **node_def;
    int32_t *node_space;          /* memory space of the node's outputs */
    int32_t node_cap;
    cc_build build;
    uint64_t inferred_rev;        /* graph revision the descriptors were last inferred at */
    /* Values the last whole-graph inference computed (value id -> host data,
     * owned), valid while the graph is at known_rev: folding takes them
     * instead of evaluating the same nodes again. */
    void **known;
    int32_t num_known;
    uint64_t known_rev;
    /* Counters of the pass running, for statistics. */
    int32_t removed, fused, added;
    uint64_t uniq;                /* fresh names */
    /* Operator lookups by the graph's interned op type pointer. */
    struct cc_opcache {
        const char *op_type, *domain;
        const cge_op_def *def;
    } opcache[512];
    int32_t num_subgraphs, num_conversions;
} cc_ctx;

typedef cge_status (*cc_pass_fn)(cc_ctx *ctx, cge_graph *g);

/* Pick engine and kernel for node index `i` (engine `prefer` first, if >= 0). */
cge_status cc_assign_node(cc_ctx *ctx, cge_graph *g, int32_t i, int32_t prefer);
/* Reshape, Flatten, Squeeze, Unsqueeze, Identity, cge.fused LayoutView:
 * output = input's bytes. */
bool cc_is_view_op(const cge_node *n);

/* ---- passes (one file each) -------------------------------------------------- */

cge_status cc_pass_verify(cc_ctx *ctx, cge_graph *g);
cge_status cc_pass_infer(cc_ctx *ctx, cge_graph *g);
/* Drop the values the last inference kept (ctx->known). */
void cc_forget_known(cc_ctx *ctx);
cge_status cc_pass_infer_changes(cc_ctx *ctx, cge_graph *g);
cge_status cc_pass_normalize(cc_ctx *ctx, cge_graph *g);
/* Only with compile option kv_cache_max_len: cge_graph_kv_cache_static. */
cge_status cc_pass_kv_cache_static(cc_ctx *ctx, cge_graph *g);
cge_status cc_pass_fold_sequences(cc_ctx *ctx, cge_graph *g);
/* float16 / bfloat16 nodes computed in float32, with Casts where half
 * values enter and leave (pass_widen_half.c). */
cge_status cc_pass_widen_half(cc_ctx *ctx, cge_graph *g);
cge_status cc_pass_fuse_qdq(cc_ctx *ctx, cge_graph *g);
/* MatMul(A, DequantizeLinear(constant int8 W)) -> com.microsoft MatMulNBits. */
cge_status cc_pass_fuse_dq_matmul(cc_ctx *ctx, cge_graph *g);
cge_status cc_pass_fold_constants(cc_ctx *ctx, cge_graph *g);
/* fold_constants leaving nodes of type keep_op (default domain) alone:
 * fuse_qdq folds all but the DequantizeLinears it reads weights through. */
cge_status cc_fold_constants_keeping(cc_ctx *ctx, cge_graph *g, const char *keep_op);
cge_status cc_pass_remove_noops(cc_ctx *ctx, cge_graph *g);
cge_status cc_pass_simplify_algebra(cc_ctx *ctx, cge_graph *g);
cge_status cc_pass_cse(cc_ctx *ctx, cge_graph *g);
cge_status cc_pass_dce(cc_ctx *ctx, cge_graph *g);
cge_status cc_pass_fuse_conv_bn(cc_ctx *ctx, cge_graph *g);
cge_status cc_pass_fuse_conv_activation(cc_ctx *ctx, cge_graph *g);
cge_status cc_pass_fuse_gelu(cc_ctx *ctx, cge_graph *g);
cge_status cc_pass_fuse_layernorm(cc_ctx *ctx, cge_graph *g);
cge_status cc_pass_fuse_skip_layernorm(cc_ctx *ctx, cge_graph *g);
cge_status cc_pass_fuse_attention(cc_ctx *ctx, cge_graph *g);
cge_status cc_pass_fuse_matmul_epilogue(cc_ctx *ctx, cge_graph *g);
/* A constant-B product read only through last-axis Slices/Splits -> one
 * product per piece on B's columns (the packed q/k/v projection). */
cge_status cc_pass_split_matmul_columns(cc_ctx *ctx, cge_graph *g);
cge_status cc_pass_fuse_elementwise(cc_ctx *ctx, cge_graph *g);
/* Runs only with precision bf16: Conv/MatMul/Gemm and their fused forms
 * marked (or rewritten) to run in bfloat16. */
cge_status cc_pass_precision(cc_ctx *ctx, cge_graph *g);
cge_status cc_pass_channels_last_ops(cc_ctx *ctx, cge_graph *g);
cge_status cc_pass_assign_engines(cc_ctx *ctx, cge_graph *g);
cge_status cc_pass_insert_conversions(cc_ctx *ctx, cge_graph *g);
cge_status cc_pass_layout_channels_last(cc_ctx *ctx, cge_graph *g);
cge_status cc_pass_fuse_quantize_reorder(cc_ctx *ctx, cge_graph *g);
/* QAdd(QConv's only reader) -> cge.fused QConvAdd (pass_fuse_qconv_add.c). */
cge_status cc_pass_fuse_qconv_add(cc_ctx *ctx, cge_graph *g);
/* After a partition pass removed nodes: the engine choices shifted to the
 * indices the pass manager's compaction gives (pass_fuse_quantize_reorder.c). */
void cc_compact_assignments(cc_ctx *ctx, const cge_graph *g);
cge_status cc_pass_order(cc_ctx *ctx, cge_graph *g);
cge_status cc_pass_schedule(cc_ctx *ctx, cge_graph *g);
cge_status cc_pass_plan_streams(cc_ctx *ctx, cge_graph *g);
cge_status cc_pass_plan_memory(cc_ctx *ctx, cge_graph *g);

/* ---- use lists ------------------------------------------------------------------ */

/* Consumers of every value id, built in O(nodes + edges). Kept up to date by
 * cc_redirect; nodes added after the build are not in it. */
typedef struct cc_use {
    cge_node *node;
    int32_t slot;
} cc_use;

typedef struct cc_uses {
    int32_t num_ids;
    int32_t *start;       /* CSR over ids, with room for redirected uses below */
    int32_t *count;
    cc_use *items;
    /* Uses moved by cc_redirect live in per-id overflow lists. */
    cc_use **extra;
    int32_t *num_extra, *cap_extra;
} cc_uses;

cge_status cc_uses_build(cc_uses *u, const cge_graph *g);
void cc_uses_free(cc_uses *u);
/* Number of live uses of `id` (by nodes not removed). */
int32_t cc_uses_count(const cc_uses *u, int32_t id);
/* The k-th use of id (0 .. count-1 over live uses); stable until changed. */
int32_t cc_uses_list(const cc_uses *u, int32_t id, cc_use *out, int32_t max);
/* True if `id` is a graph output or read by any live node. */
bool cc_value_used(const cc_uses *u, const cge_graph *g, int32_t id);

/* Record uses made after the build: input `slot` of `n` (after
 * cge_node_set_input), or every input of a node added since. */
cge_status cc_uses_add(cc_uses *u, cge_node *n, int32_t slot);
cge_status cc_uses_add_node(cc_uses *u, cge_node *n);
/* A fusion's bookkeeping: `n` replaced `count` nodes (the pass counters),
 * and its inputs' uses are recorded. */
cge_status cc_fused_node(cc_ctx *ctx, cc_uses *u, cge_node *n, int32_t count);
/* Make every live use of `from` read `to` (updating `u`). */
cge_status cc_redirect(cc_uses *u, cge_graph *g, int32_t from, int32_t to);

/* Remove node `n` whose output `out_slot` computes the same as value `with`
 * (a no-op): its uses read `with` instead. When its output is a graph output,
 * `with`'s producer is made to produce that name instead, if it can (`with`
 * is a node output and no graph output); otherwise nothing changes and
 * *done is false. */
cge_status cc_bypass(cc_ctx *ctx, cc_uses *u, cge_graph *g, cge_node *n, int32_t out_slot,
                     int32_t with, bool *done);

/* ---- small helpers --------------------------------------------------------------- */

/* A name not used in `g`, "<prefix>__cc<N>". Writes into buf. */
const char *cc_fresh_name(cc_ctx *ctx, const cge_graph *g, const char *prefix, char *buf,
                          size_t size);
/* Whether op type and domain match ("" default domain). */
bool cc_is_op(const cge_node *n, const char *op_type);
/* Whether n is a live node of cge.fused's `op_type` (NULL: false). */
bool cc_is_fused_op(const cge_node *n, const char *op_type);
/* One element out per element in, at the same position, whatever the layout
 * (Relu, Add, Clip, Where, ..., cge.fused ElementwiseChain). */
bool cc_is_elementwise(const cge_node *n);
/* Constant tensor of node input i, or NULL. */
const cge_tensor *cc_input_const(const cge_graph *g, const cge_node *n, int32_t i);
/* Descriptor of node input/output i (dtype UNDEFINED if absent). */
cge_tensor_desc cc_in_desc(const cge_graph *g, const cge_node *n, int32_t i);
cge_tensor_desc cc_out_desc(const cge_graph *g, const cge_node *n, int32_t i);
/* Whether every element of constant `t` equals v (float dtypes compare bits
 * of the value as that dtype, so -0.0 differs from 0.0). */
bool cc_const_all_equal(const cge_tensor *t, double v, bool check_sign_of_zero);
/* A scalar float constant's value (numel 1, any float dtype). */
bool cc_const_scalar(const cge_tensor *t, double *v);
/* Nodes whose results may differ between runs or that have effects. */
bool cc_is_nondeterministic(const cge_node *n);
/* Deep equality of two attribute sets (order-insensitive). */
bool cc_attrs_equal(const cge_attrs *a, const cge_attrs *b);
uint64_t cc_attrs_hash(const cge_attrs *a);
/* Add a float32 constant with a fresh name; writes its name into buf. */
cge_status cc_add_const(cc_ctx *ctx, cge_graph *g, const char *prefix, cge_dtype dtype,
                        const cge_shape *shape, const void *data, char *buf, size_t size);
double cc_now_ms(void);
/* cge_op_find for a node, remembered per op type (NULL and a [schema] error
 * if unknown). */
const cge_op_def *cc_find_op(cc_ctx *ctx, const cge_node *n);
/* An activation a fused kernel applies in its epilogue: Relu, Sigmoid, Tanh,
 * LeakyRelu (alpha), Clip with constant bounds (min/max inputs, or the old
 * attributes) and, when `with_gelu`, Gelu. Name NULL if `n` is none of them. */
typedef struct cc_activation {
    const char *name;          /* "relu", "clip", "gelu_tanh", ... */
    float alpha, lo, hi;
} cc_activation;
bool cc_match_activation(const cge_graph *g, const cge_node *n, bool with_gelu,
                         cc_activation *out);
/* y * Sigmoid(y) (SiLU as exported) or y * HardSigmoid(y) (HardSwish before
 * opset 14): y read by exactly the gate and the Mul, the gate by the Mul
 * alone, y no graph output. Fills the two nodes. */
bool cc_match_gated(const cc_uses *u, const cge_graph *g, int32_t y, cge_node **gate,
                    cge_node **mul);
/* Write the activation's attributes on fused node `f` (nothing if none). */
cge_status cc_set_activation(cge_node *f, const cc_activation *a);
/* Run node `n` now with kernel `k` on the compile-time CPU device: inputs are
 * host tensors (dtype UNDEFINED for absent ones), outputs as described.
 * host_out[i] get malloc'ed results (the caller frees them); on error they are
 * NULL and the error is recorded. */
cge_status cc_evaluate_node(cc_ctx *ctx, const cge_node *n, const cge_kernel_def *k,
                            const cge_tensor *in_host, const cge_tensor_desc *out_desc,
                            void **host_out);
/* Shape and Size of a static input shape `in` into dst (room for
 * CGE_MAX_RANK values), with no kernel: false for other nodes, or a Shape
 * whose output length `out` does not say. */
bool cc_shape_values(const cge_node *n, const cge_shape *in, const cge_shape *out, int64_t *dst);
/* Reusable host scratch (workspaces of host evaluations), grown on demand. */
typedef struct cc_scratch {
    void *data;
    size_t bytes;
} cc_scratch;
/* Run `n` with CPU kernel `k` on host tensors now (ins/outs data on the host,
 * `imm` an immediate stream of `dev`): workspace from `ws`, prepare, launch,
 * synchronize, release. The one way the compiler runs a kernel itself. */
cge_status cc_launch_on_host(cge_device *dev, cge_stream *imm, const cge_node *n,
                             const cge_kernel_def *k, cge_tensor *ins, int32_t ni,
                             cge_tensor *outs, int32_t no, cc_scratch *ws);
/* The workspace step `s` asks of its kernel for its values' shapes and bytes
 * (`shapes`/`bytes` per plan value, or NULL: the values' own), with no data;
 * 0 for a kernel without one or a step past CC_STEP_MAX_IO operands. */
#define CC_STEP_MAX_IO 64
size_t cc_step_workspace(const cge_plan_step *s, const cge_plan_value *vals, const cge_shape *shapes,
                         const size_t *bytes, int32_t num_threads);
/* The one node reading `id`, if it has exactly one use and is no graph output. */
cge_node *cc_only_consumer(const cc_uses *u, const cge_graph *g, int32_t id);
/* The other operand of a two-input node that reads `id`, or -1. */
int32_t cc_other_input(const cge_node *n, int32_t id);
/* Whether `id` is a one-element constant within tol of v. */
bool cc_scalar_near(const cge_graph *g, int32_t id, double v, double tol);
/* Element i of an int64 or int32 tensor (a constant's indices or bounds). */
int64_t cc_int_at(const cge_tensor *t, int64_t i);
cge_status cc_copy_attrs(cge_node *dst, const cge_node *src);

#endif
