/* The IR: tensor descriptors, attributes (every ONNX attribute kind), nodes
 * and graphs with named values (edges), structural verification, topological
 * order and DOT export. Checks against operator schemas live in op.h. */
#ifndef CGE_GRAPH_H
#define CGE_GRAPH_H

#include <stdio.h>

#include "cge/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cge_graph cge_graph;
typedef struct cge_node cge_node;
typedef struct cge_attrs cge_attrs;

/* Descriptor of a value (edge): what is known before any data exists. */
typedef struct cge_tensor_desc {
    const char *name;
    cge_dtype dtype;     /* CGE_DTYPE_UNDEFINED until inferred */
    cge_shape shape;
    cge_format format;
    /* Tensor (0), sequence or optional: dtype and shape then describe the
     * elements (types.h). Last, so that descriptors written without it
     * describe tensors. */
    cge_value_type type;
} cge_tensor_desc;

/* Attribute kinds, numbered as ONNX's AttributeProto.AttributeType. */
typedef enum cge_attr_kind {
    CGE_ATTR_UNDEFINED = 0,
    CGE_ATTR_FLOAT = 1,
    CGE_ATTR_INT = 2,
    CGE_ATTR_STRING = 3,
    CGE_ATTR_TENSOR = 4,
    CGE_ATTR_GRAPH = 5,
    CGE_ATTR_FLOATS = 6,
    CGE_ATTR_INTS = 7,
    CGE_ATTR_STRINGS = 8,
    CGE_ATTR_TENSORS = 9,
    CGE_ATTR_GRAPHS = 10
} cge_attr_kind;
const char *cge_attr_kind_name(cge_attr_kind k);   /* "int", "floats", ... */

/* An attribute value. As stored in a node it is read-only and owned by the
 * node; as passed to a setter (cge_attrs_set) it is copied deeply. Only the
 * fields of its kind are used; list kinds use `n` and the matching array. */
typedef struct cge_attr {
    const char *name;
    cge_attr_kind kind;
    int64_t i;
    float f;
    const char *s;
    const cge_tensor *t;           /* TENSOR: dtype, shape, data (bytes) */
    const cge_graph *g;            /* GRAPH */
    int64_t n;                     /* length of a list */
    const int64_t *ints;
    const float *floats;
    const char *const *strings;
    const cge_tensor *tensors;
    const cge_graph *const *graphs;
} cge_attr;

/* Attribute value helpers (for cge_attrs_set, cge_es_op, ...). */
#define CGE_ATTR_I(nm, v) ((cge_attr){.name = (nm), .kind = CGE_ATTR_INT, .i = (v)})
#define CGE_ATTR_F(nm, v) ((cge_attr){.name = (nm), .kind = CGE_ATTR_FLOAT, .f = (v)})
#define CGE_ATTR_S(nm, v) ((cge_attr){.name = (nm), .kind = CGE_ATTR_STRING, .s = (v)})
#define CGE_ATTR_INTS(nm, p, cnt) \
    ((cge_attr){.name = (nm), .kind = CGE_ATTR_INTS, .ints = (p), .n = (cnt)})
#define CGE_ATTR_FLOATS(nm, p, cnt) \
    ((cge_attr){.name = (nm), .kind = CGE_ATTR_FLOATS, .floats = (p), .n = (cnt)})

/* ---- attribute sets (a node's attributes) ------------------------------ */

int32_t cge_attrs_count(const cge_attrs *a);
const cge_attr *cge_attrs_at(const cge_attrs *a, int32_t index);
const cge_attr *cge_attrs_find(const cge_attrs *a, const char *name);   /* NULL if absent */
/* Typed getters return `dflt` when the attribute is absent or of another kind. */
int64_t cge_attrs_get_int(const cge_attrs *a, const char *name, int64_t dflt);
float cge_attrs_get_float(const cge_attrs *a, const char *name, float dflt);
const char *cge_attrs_get_string(const cge_attrs *a, const char *name, const char *dflt);
/* List getters: the length, or -1 if absent; *vals points into the node. */
int64_t cge_attrs_get_ints(const cge_attrs *a, const char *name, const int64_t **vals);
int64_t cge_attrs_get_floats(const cge_attrs *a, const char *name, const float **vals);
const cge_tensor *cge_attrs_get_tensor(const cge_attrs *a, const char *name);
const cge_graph *cge_attrs_get_graph(const cge_attrs *a, const char *name);
/* Deep-copies `value` (name included), replacing an attribute of that name. */
cge_status cge_attrs_set(cge_attrs *a, const cge_attr *value);
cge_status cge_attrs_remove(cge_attrs *a, const char *name);

/* ---- graphs -------------------------------------------------------------- */

cge_status cge_graph_create(const char *name, cge_graph **out);
void cge_graph_destroy(cge_graph *g);                          /* NULL is a no-op */
/* Copy of values, nodes, attributes and nested graphs; constants' data is
 * shared (it is immutable once added), so a clone costs no copy of the weights. */
cge_status cge_graph_clone(const cge_graph *g, cge_graph **out);
/* Calls of cge_graph_clone in this process so far (nested graphs included):
 * a debugging aid for tests and tools that check a path copies no graph twice. */
int64_t cge_graph_clone_count(void);
const char *cge_graph_name(const cge_graph *g);

/* A graph input (a "Data" node): a named value with dtype and shape, dynamic
 * dimensions allowed. */
cge_status cge_graph_add_input(cge_graph *g, const char *name, cge_dtype dtype,
                               const cge_shape *shape);
/* A constant (weight); `bytes` must equal the dense size; the data is copied. */
cge_status cge_graph_add_constant(cge_graph *g, const char *name, cge_dtype dtype,
                                  const cge_shape *shape, const void *data, size_t bytes);
/* Mark a value as a graph output (it may be produced by a node added later). */
cge_status cge_graph_add_output(cge_graph *g, const char *name);

/* Add a node. `inputs` name values (graph inputs, constants or outputs of
 * other nodes, possibly added later); "" or NULL marks an absent optional
 * input. `outputs` name the values it produces: each name may be produced
 * once in a graph. `name` NULL gives a unique "<op_type>_<n>"; `domain` NULL
 * or "" is the default (ONNX) domain. *out (may be NULL) stays valid until the
 * graph is destroyed. */
cge_status cge_graph_add_node(cge_graph *g, const char *op_type, const char *domain,
                              const char *name, const char *const *inputs, int32_t num_inputs,
                              const char *const *outputs, int32_t num_outputs, cge_node **out);

int32_t cge_graph_num_inputs(const cge_graph *g);
const char *cge_graph_input(const cge_graph *g, int32_t i);
int32_t cge_graph_num_outputs(const cge_graph *g);
const char *cge_graph_output(const cge_graph *g, int32_t i);
int32_t cge_graph_num_nodes(const cge_graph *g);
cge_node *cge_graph_node(const cge_graph *g, int32_t i);       /* in insertion order */
cge_node *cge_graph_find_node(const cge_graph *g, const char *name);
/* Names of all constants. */
int32_t cge_graph_num_constants(const cge_graph *g);
const char *cge_graph_constant_name(const cge_graph *g, int32_t i);

/* Descriptor of a named value (input, constant, node output). For a value
 * nobody has described yet, dtype is UNDEFINED and rank 0.
 * CGE_ERR_NOT_FOUND ([graph] error) if the name is not a value of the graph. */
cge_status cge_graph_get_desc(const cge_graph *g, const char *name, cge_tensor_desc *out);
/* Set dtype/shape of a value (shape inference, value_info). */
cge_status cge_graph_set_desc(cge_graph *g, const char *name, cge_dtype dtype,
                              const cge_shape *shape);
cge_status cge_graph_set_format(cge_graph *g, const char *name, cge_format format);
/* What a value holds (tensor, sequence, optional): set by a front end for
 * graph inputs, outputs and value_info, and by inference for node outputs.
 * cge_graph_set_desc leaves it as it is. A constant is always a tensor. */
cge_status cge_graph_set_value_type(cge_graph *g, const char *name, cge_value_type type);
/* True if some value of `g` (not of its nested graphs) is not a tensor. */
bool cge_graph_has_non_tensor_values(const cge_graph *g);
/* Symbolic dimensions: the dim value (CGE_DIM_SYMBOL(k)) naming `name` in
 * this graph, made on first use; the same name always gives the same value.
 * Put it in shapes (inputs, set_desc) to say that dimensions are equal
 * though unknown ("batch"). CGE_DIM_DYNAMIC, with an error recorded, if the
 * name is empty or memory runs out. Each graph (a nested body too) has its
 * own table; a clone copies it. */
int64_t cge_graph_dim_symbol(cge_graph *g, const char *name);
/* The name of symbol `dim` in this graph; NULL if `dim` is not a symbol the
 * graph named (the string lives as long as the graph). */
const char *cge_graph_dim_symbol_name(const cge_graph *g, int64_t dim);
int32_t cge_graph_num_dim_symbols(const cge_graph *g);
/* cge_shape_str with this graph's symbol names ("[batch,16]"). */
char *cge_graph_shape_str(const cge_graph *g, const cge_shape *s, char *buf, size_t size);
/* Concrete input shapes that give one symbol two sizes: the first pair. */
typedef struct cge_dim_conflict {
    int64_t symbol;        /* CGE_DIM_SYMBOL(k) */
    int32_t input[2];      /* graph input positions (input[0] <= input[1]) */
    int32_t axis[2];
    int64_t size[2];
} cge_dim_conflict;
/* `shapes[i]` is the concrete shape given for graph input i (n of them, each
 * of its declared rank). True, with *out filled, if two positions declared
 * with the same symbol get different sizes. Allocates nothing. */
bool cge_graph_find_dim_conflict(const cge_graph *g, const cge_shape *shapes, int32_t n,
                                 cge_dim_conflict *out);
/* The constant's tensor, or NULL if `name` is not a constant. Its data is
 * read-only: clones share it (replace a constant to change it). */
const cge_tensor *cge_graph_constant(const cge_graph *g, const char *name);
/* The node producing `name`, or NULL (graph input, constant, unknown). */
cge_node *cge_graph_producer(const cge_graph *g, const char *name);

/* ---- nodes --------------------------------------------------------------- */

const char *cge_node_op_type(const cge_node *n);
const char *cge_node_domain(const cge_node *n);   /* "" for the default domain */
const char *cge_node_name(const cge_node *n);
int32_t cge_node_num_inputs(const cge_node *n);
const char *cge_node_input(const cge_node *n, int32_t i);   /* "" if absent */
int32_t cge_node_num_outputs(const cge_node *n);
const char *cge_node_output(const cge_node *n, int32_t i);
cge_attrs *cge_node_attrs(cge_node *n);
const cge_attrs *cge_node_attrs_const(const cge_node *n);
/* Convenience setters on a node's attributes. */
cge_status cge_node_set_int(cge_node *n, const char *name, int64_t v);
cge_status cge_node_set_float(cge_node *n, const char *name, float v);
cge_status cge_node_set_string(cge_node *n, const char *name, const char *v);
cge_status cge_node_set_ints(cge_node *n, const char *name, const int64_t *v, int64_t count);
cge_status cge_node_set_floats(cge_node *n, const char *name, const float *v, int64_t count);
cge_status cge_node_set_tensor(cge_node *n, const char *name, const cge_tensor *t);
cge_status cge_node_set_graph(cge_node *n, const char *name, const cge_graph *sub);

/* ---- value ids and rewriting (compiler passes) --------------------------- */

/* Every named value has a dense id, stable for the life of the graph (ids are
 * never reused; a value whose producer is removed stays as an undefined name).
 * Passes index their tables by id instead of hashing names. */
typedef enum cge_value_kind {
    CGE_VALUE_UNDEFINED = 0,  /* only referenced, or its producer was removed */
    CGE_VALUE_INPUT = 1,
    CGE_VALUE_CONSTANT = 2,
    CGE_VALUE_NODE = 3
} cge_value_kind;

int32_t cge_graph_num_values(const cge_graph *g);                 /* ids are 0 .. n-1 */
int32_t cge_graph_value_id(const cge_graph *g, const char *name);  /* -1 if absent */
const char *cge_graph_value_name(const cge_graph *g, int32_t id);  /* NULL if out of range */
cge_value_kind cge_graph_value_kind(const cge_graph *g, int32_t id);
bool cge_graph_value_is_output(const cge_graph *g, int32_t id);
/* Descriptor by id (name included); CGE_ERR_NOT_FOUND if out of range. */
cge_status cge_graph_value_desc(const cge_graph *g, int32_t id, cge_tensor_desc *out);
/* The producing node, or NULL; the constant's tensor, or NULL. */
cge_node *cge_graph_value_producer(const cge_graph *g, int32_t id);
const cge_tensor *cge_graph_value_constant(const cge_graph *g, int32_t id);
int32_t cge_node_index(const cge_node *n);          /* position in cge_graph_node() order */
/* Revision stamps, for analyses that redo only what changed since they last
 * ran: every change to a node (added, an input or output replaced, an
 * attribute set or removed) and every change of a value's descriptor takes
 * the graph's next revision. */
uint64_t cge_graph_revision(const cge_graph *g);
uint64_t cge_node_revision(const cge_node *n);
uint64_t cge_graph_value_revision(const cge_graph *g, int32_t id);
int32_t cge_node_input_id(const cge_node *n, int32_t i);    /* -1 if absent or out of range */
int32_t cge_node_output_id(const cge_node *n, int32_t i);

/* Make input `i` of `n` read `name` ("" or NULL: absent). O(1). */
cge_status cge_node_set_input(cge_node *n, int32_t i, const char *name);
/* Make `n` produce `name` as output `i` instead of its current value, which
 * becomes undefined. `name` must not be defined by anything else; it takes
 * the old value's descriptor. O(1). */
cge_status cge_node_set_output(cge_node *n, int32_t i, const char *name);
/* Every node input reading `from` reads `to` instead (graph outputs are left
 * alone). O(nodes + edges): passes that do this often keep use lists. */
cge_status cge_graph_replace_uses(cge_graph *g, const char *from, const char *to);
/* Detach `n`: its outputs become undefined, its name is free again, and it
 * stays in cge_graph_node() order as a removed node (no inputs, no outputs)
 * until cge_graph_compact(). O(degree). */
cge_status cge_graph_remove_node(cge_graph *g, cge_node *n);
bool cge_node_is_removed(const cge_node *n);
/* Detach a constant (its value becomes undefined; its data is freed at once
 * or by cge_graph_compact). O(1). */
cge_status cge_graph_remove_constant(cge_graph *g, const char *name);
/* Drop removed nodes and constants, keeping the order of the rest; node
 * pointers of the rest stay valid, their indices change. O(nodes + constants). */
cge_status cge_graph_compact(cge_graph *g);
/* Move `n` to `position` in cge_graph_node() order (0 .. num_nodes-1),
 * shifting the nodes between. O(nodes). */
cge_status cge_graph_move_node(cge_graph *g, cge_node *n, int32_t position);
/* Give value `from` the new name `to`, which must not name any value yet.
 * Node inputs/outputs and graph input/output lists follow (they hold ids). O(1). */
cge_status cge_graph_rename_value(cge_graph *g, const char *from, const char *to);

/* ---- checks and views -------------------------------------------------- */

/* Structure only: every node input is defined (graph input, constant or node
 * output), no value is produced twice or both input and produced, node names
 * are unique, graph outputs exist, no cycles. Errors are [graph] errors
 * naming the node and value. (cge_graph_verify in op.h adds schema checks.) */
cge_status cge_graph_verify_structure(const cge_graph *g);
/* Node indices in a topological order (stable: insertion order among ready
 * nodes). `order` must hold cge_graph_num_nodes(g) entries. A cycle is a
 * [graph] error naming a node on it. */
cge_status cge_graph_topo_order(const cge_graph *g, int32_t *order);
/* Graphviz DOT: one box per node (op type, name), an ellipse per graph input,
 * output and constant, edges labelled with dtype and shape. */
cge_status cge_graph_write_dot(const cge_graph *g, FILE *f);
/* Human-readable text listing (one node per line). */
cge_status cge_graph_write_text(const cge_graph *g, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
