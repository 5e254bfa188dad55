/* The operator contract (schema, meta, kernels, converters), its registration,
 * lookup and introspection, and meta on nodes and graphs. Builtin operators
 * and custom libraries register through exactly this API. */
#ifndef CGE_OP_H
#define CGE_OP_H

#include "cge/graph.h"
#include "cge/runtime.h"

/* One definition in four layers: schema (names, arity, attributes), meta
 * (shape/dtype inference and the kernel's real constraints), converters
 * (front-end node -> operator) and kernels (per engine). */

#ifdef __cplusplus
extern "C" {
#endif

/* Version of this contract. A library declares the version it was built
 * against; a library of another major version is refused at load. */
#define CGE_OP_API_VERSION 1

#define CGE_DOMAIN_DEFAULT ""   /* ONNX's default domain */

/* ---- 1. schema --------------------------------------------------------- */

enum {
    CGE_ARG_OPTIONAL = 1u << 0, /* may be absent ("" in a node) */
    CGE_ARG_VARIADIC = 1u << 1, /* last argument only: one or more values */
    /* May be a sequence or an optional (cge_value_type), not only a tensor;
     * the op's meta checks which it takes. Without it, meta refuses them. */
    CGE_ARG_NON_TENSOR = 1u << 2
};

typedef struct cge_arg_def {
    const char *name;
    uint32_t flags;            /* CGE_ARG_* */
    cge_dtype_set dtypes;      /* accepted dtypes; 0 = any */
    const char *doc;
} cge_arg_def;

typedef struct cge_attr_def {
    const char *name;
    cge_attr_kind kind;
    bool required;
    /* Defaults for absent optional scalar attributes (lists default to empty). */
    int64_t default_i;
    float default_f;
    const char *default_s;
    const char *doc;
} cge_attr_def;

/* ---- 2. meta ----------------------------------------------------------- */

/* A small integer input (a shape computation: Shape of a [batch,3,4,4]
 * tensor, a Gather or Concat of it) whose elements are known one by one
 * while the whole is not: some elements are sizes only a run knows. Element
 * k is the plain number elems[k] where is_dim[k] is 0 (any int64, so a
 * Reshape target's -1 or 0 keeps its meaning), and an unknown size in the
 * dimension encoding of types.h where is_dim[k] is nonzero: a symbol
 * CGE_DIM_SYMBOL(s), equal to that dim of the graph, or CGE_DIM_DYNAMIC,
 * unknown and unrelated (a number computed from a symbol, 2*N: a meta maps
 * it onto an anonymous output dim, never reads it as -1). Elements are in
 * row-major order. */
typedef struct cge_symbolic_value {
    int64_t numel;
    const int64_t *elems;              /* [numel] */
    const uint8_t *is_dim;             /* [numel] */
} cge_symbolic_value;

/* What `infer` sees: input descriptors (absent optional inputs have dtype
 * UNDEFINED), the values of inputs known at this point (constants at compile
 * time; NULL otherwise), and the node's attributes. It writes the dtype and
 * shape of every output, or returns a [meta] error naming the node and what
 * the kernel cannot do. It touches no tensor data other than input_values.
 *
 * input_symbolic is optional and NULL unless graph inference carries
 * symbolic values (cge_graph_infer_values and the compiler's infer pass):
 * for an input whose value is not known (input_values[i] NULL) but is an
 * integer shape computation with some elements known, input_symbolic[i]
 * describes them; other entries are NULL. A meta that ignores it sees such
 * an input as unknown, as before; one that reads it (Reshape, Expand,
 * ConstantOfShape) maps a symbolic element onto an output dim. It is never
 * set where input_values[i] is. */
typedef struct cge_infer_ctx {
    const char *op_type;
    const char *node_name;
    int32_t num_inputs;
    const cge_tensor_desc *inputs;
    const void *const *input_values;   /* [num_inputs], entries may be NULL */
    const cge_attrs *attrs;
    int32_t num_outputs;
    cge_tensor_desc *outputs;          /* names filled; infer sets dtype, shape */
    /* [num_inputs] or NULL; entries may be NULL (see above). Last, so that
     * contexts written without it keep NULL. */
    const cge_symbolic_value *const *input_symbolic;
} cge_infer_ctx;

typedef cge_status (*cge_infer_fn)(cge_infer_ctx *ctx);

/* ---- 4. kernels (the converter layer follows below) --------------------- */

/* What a kernel sees at launch: concrete inputs and outputs (device memory,
 * static shapes already checked by meta), attributes, workspace and the state
 * its `prepare` made. Absent optional inputs have data NULL. */
typedef struct cge_kernel_cache cge_kernel_cache;

typedef struct cge_kernel_ctx {
    const char *op_type;
    const char *node_name;
    int32_t num_inputs;
    const cge_tensor *inputs;
    int32_t num_outputs;
    cge_tensor *outputs;
    const cge_attrs *attrs;
    void *workspace;
    size_t workspace_size;
    void *state;
    cge_device *device;
    int num_threads;                   /* the core pool's size, for block counts */
    /* Where prepare finds constant data derived once for every plan of one
     * session graph (cge_kernel_shared_get); NULL outside a session. */
    cge_kernel_cache *shared;
    /* What each input and output holds ([num_inputs], [num_outputs]), or
     * NULL where all are tensors: a sequence's or optional's data is a
     * cge_sequence (cge/sequence.h). Only ops whose schema says
     * CGE_ARG_NON_TENSOR see anything but tensors. */
    const cge_value_type *input_types;
    const cge_value_type *output_types;
} cge_kernel_ctx;

typedef struct cge_kernel_def {
    const char *engine;                /* "cpu" */
    cge_dtype_set dtypes;              /* dtypes of input 0 handled; 0 = any */
    /* Enqueue the work on `stream` (cge_launch ...); never block on it. A
     * constraint the kernel cannot meet is a [kernel] error, checked here too. */
    cge_status (*launch)(const cge_kernel_ctx *ctx, cge_stream *stream);
    /* Optional: bytes of scratch memory needed for these shapes. */
    size_t (*workspace_size)(const cge_kernel_ctx *ctx);
    /* Optional: per-node state built once when a plan is made (ctx has shapes
     * and attributes, data pointers may be NULL), released with the plan. */
    cge_status (*prepare)(const cge_kernel_ctx *ctx, void **state);
    void (*release)(void *state);
    /* Output 0 may be written into the buffer of this input (elementwise ops);
     * -1 if never. */
    int32_t inplace_input;
} cge_kernel_def;

typedef struct cge_op_def {
    const char *name;                  /* "Add" */
    const char *domain;                /* "" default (ONNX), "custom", ... */
    int32_t since_version;             /* first opset this definition follows */
    int32_t end_version;               /* last opset, 0 = still current */
    const cge_arg_def *inputs;
    int32_t num_inputs;
    const cge_arg_def *outputs;
    int32_t num_outputs;
    const cge_attr_def *attrs;
    int32_t num_attrs;
    cge_infer_fn infer;                /* required */
    const cge_kernel_def *kernels;
    int32_t num_kernels;
    const char *doc;
} cge_op_def;

/* ---- 3. converters ------------------------------------------------------ */

/* Maps one front-end node onto operators: it adds node(s) to `dst` that read
 * `src`'s inputs and produce `src`'s outputs. It maps; it never computes.
 * NULL `convert` in a def means a 1:1 mapping onto target_op/target_domain
 * with the same inputs, outputs and attributes. */
typedef cge_status (*cge_convert_fn)(const cge_node *src, int64_t opset, cge_graph *dst);

typedef struct cge_converter_def {
    const char *front_end;             /* "onnx" */
    const char *source_op;             /* op_type in the front end */
    const char *source_domain;         /* "" for ONNX's default */
    int32_t since_version;             /* applies to opsets >= this ... */
    int32_t end_version;               /* ... and <= this (0 = open) */
    const char *target_op;
    const char *target_domain;
    cge_convert_fn convert;
} cge_converter_def;

/* ---- registration ------------------------------------------------------- */

/* A set of definitions registered together, all or none. A custom operator
 * library is a shared object exporting one entry point,
 *     const cge_op_library *cge_op_library_entry(void);
 * returning its description; api_version must be CGE_OP_API_VERSION. */
typedef struct cge_op_library {
    uint32_t api_version;
    const char *name;                  /* "add_custom" */
    const cge_op_def *ops;
    int32_t num_ops;
    const cge_converter_def *converters;
    int32_t num_converters;
} cge_op_library;

#define CGE_OP_LIBRARY_ENTRY "cge_op_library_entry"
typedef const cge_op_library *(*cge_op_library_entry_fn)(void);

/* Register every op and converter of `lib`. An op whose (domain, name) and
 * version range overlap an existing one is a [schema] error naming both
 * libraries; nothing of `lib` is registered then. The definitions are used
 * in place: they must outlive the process (static data). */
cge_status cge_op_register_library(const cge_op_library *lib);
/* dlopen `path`, check its declared API version, register it. The library
 * stays loaded. */
cge_status cge_load_op_library(const char *path);

/* ---- lookup and introspection ------------------------------------------ */

int32_t cge_op_count(void);
const cge_op_def *cge_op_at(int32_t index);
/* The definition of (domain, name) for `version` (0 = the newest). NULL and
 * a [schema] error if none. */
const cge_op_def *cge_op_find(const char *domain, const char *name, int32_t version);
/* Which library registered a definition ("builtin", "add_custom", ...). */
const char *cge_op_origin(const cge_op_def *def);
/* The kernel of `def` for `engine` handling `dtype`, or NULL and an [engine]
 * error naming the op, engine and dtype. */
const cge_kernel_def *cge_op_find_kernel(const cge_op_def *def, const char *engine,
                                         cge_dtype dtype);
/* The converter for a front-end node, or NULL and a [converter] error naming
 * op type, domain and opset. */
const cge_converter_def *cge_converter_find(const char *front_end, const char *source_domain,
                                            const char *source_op, int64_t opset);
/* Apply a converter (its function, or the 1:1 default). */
cge_status cge_converter_apply(const cge_converter_def *conv, const cge_node *src,
                               int64_t opset, cge_graph *dst);

/* ---- meta on nodes and graphs ------------------------------------------ */

/* Check a node against its schema: op exists, arity, attribute kinds,
 * required attributes. [schema] errors name the node. */
cge_status cge_node_check_schema(const cge_graph *g, const cge_node *n);
/* Structure (cge_graph_verify_structure) plus every node against its schema. */
cge_status cge_graph_verify(const cge_graph *g);
/* Run meta on every node in topological order, writing value descriptors.
 * Constant inputs are passed to infer as values. */
cge_status cge_graph_infer(cge_graph *g);
/* Run `def`'s meta on one set of input descriptors, outside a graph (a
 * pass, a front end or a tool asking what a node would produce): each
 * present input's dtype is checked against the schema, then infer runs, then
 * every output must have a dtype and shape. inputs[i].dtype UNDEFINED marks
 * an absent optional input; input_values and input_symbolic may be NULL, or
 * hold NULL entries (as in cge_infer_ctx). outputs[] get dtype and shape,
 * their names are kept; errors name `node_name`. */
cge_status cge_op_infer(const cge_op_def *def, const char *node_name, const cge_attrs *attrs,
                        const cge_tensor_desc *inputs, const void *const *input_values,
                        const cge_symbolic_value *const *input_symbolic, int32_t num_inputs,
                        cge_tensor_desc *outputs, int32_t num_outputs);

/* ---- constant data shared between plans -------------------------------- */

/* Data a kernel's prepare derives from a constant input (packed weights),
 * made once and shared by every plan of one session graph, so that each new
 * input signature does not pack the weights again. `src` is the constant's
 * data (ctx->inputs[i].data); `key` (key_bytes, may be 0) holds everything
 * else the derived bytes depend on (sizes, strides, layout). The first call
 * for (src, key) gets `bytes` fresh 64-byte-aligned bytes and fill(dst,
 * user) writes them; later calls get the same block. Blocks are read-only
 * once filled. The kernel calls cge_kernel_shared_release from its release.
 * Outside a session, or when `src` is not constant data the session keeps
 * for the graph's life, the block is the caller's alone (made and filled all
 * the same). */
cge_status cge_kernel_shared_get(const cge_kernel_ctx *ctx, const void *src, const void *key,
                                 size_t key_bytes, size_t bytes,
                                 cge_status (*fill)(void *dst, void *user), void *user,
                                 void **out);
void cge_kernel_shared_release(void *block);   /* NULL is a no-op */
/* Blocks made (filled) and lookups answered with an existing block, in this
 * process so far: a debugging aid for tests and tools that check a new
 * signature packs nothing again. */
void cge_kernel_shared_counts(int64_t *made, int64_t *shared);

/* Helpers for infer functions: record a [meta] error naming the node. */
cge_status cge_meta_error(const cge_infer_ctx *ctx, cge_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Same for kernels at launch: a [kernel] error naming the node. */
cge_status cge_kernel_error(const cge_kernel_ctx *ctx, cge_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif
