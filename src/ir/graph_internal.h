/* Internal layout of the IR (graphs, values, nodes, attribute sets) and the
 * string arena under it (name lookups use base/strmap.h). Shared by
 * the files of src/ir; other layers use only include/cge/graph.h. */
#ifndef CGE_IR_GRAPH_INTERNAL_H
#define CGE_IR_GRAPH_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "base/strmap.h"
#include "cge/graph.h"

#if defined(__GNUC__)
#define CGE_IR_HIDDEN __attribute__((visibility("hidden")))
#else
#define CGE_IR_HIDDEN
#endif

/* ---- string arena: names live as long as their graph -------------------- */

typedef struct cge__ir_chunk cge__ir_chunk;
typedef struct cge__ir_arena {
    cge__ir_chunk *head;
    char *pos;
    size_t left;
} cge__ir_arena;

CGE_IR_HIDDEN char *cge__ir_arena_alloc(cge__ir_arena *a, size_t n);        /* NULL on OOM */
CGE_IR_HIDDEN const char *cge__ir_arena_strdup(cge__ir_arena *a, const char *s);
CGE_IR_HIDDEN void cge__ir_arena_free(cge__ir_arena *a);

/* Grow a heap array so that it holds `need` items; false on OOM or overflow. */
CGE_IR_HIDDEN bool cge__ir_grow(void **items, int32_t *cap, int64_t need, size_t elem);

/* ---- values, constants, attributes, nodes, graphs ----------------------- */

typedef enum cge__ir_value_kind {
    CGE_IR_VALUE_REF = 0,  /* only named (node input, graph output): not defined yet */
    CGE_IR_VALUE_INPUT,
    CGE_IR_VALUE_CONST,
    CGE_IR_VALUE_NODE
} cge__ir_value_kind;

typedef struct cge__ir_value {
    const char *name;      /* arena */
    cge_dtype dtype;
    cge_format format;
    cge_shape shape;
    uint8_t kind;          /* cge__ir_value_kind */
    uint8_t vtype;         /* cge_value_type: tensor, sequence, optional */
    bool is_output;
    int32_t def;           /* INPUT: input index, CONST: constant index, NODE: node index */
    uint32_t stamp;        /* scratch for duplicate checks within one call */
    uint64_t rev;          /* graph revision of its last descriptor change */
} cge__ir_value;

typedef struct cge__ir_const {
    int32_t value;
    cge_tensor t;          /* t.name is the value's name; t.data a shared block
                              (base/shared_block.h): immutable, clones share it, so
                              a compile's copy of the graph copies no weights */
    bool removed;          /* detached by cge_graph_remove_constant, dropped by compact */
    bool released;         /* its bytes let go (cge__graph_release_constant_data):
                              t.data is NULL, the descriptor stays */
} cge__ir_const;

struct cge_attrs {
    const cge_node *owner; /* names the node in error messages */
    int32_t count, cap;
    cge_attr *items;       /* every pointer inside is owned */
};

struct cge_node {
    cge_graph *graph;
    int32_t index;
    const char *op_type;   /* arena (interned) */
    const char *domain;    /* arena, "" for the default domain */
    const char *name;      /* arena */
    int32_t num_inputs, num_outputs;
    int32_t *inputs;       /* value indices, -1 = absent optional input */
    int32_t *outputs;      /* value indices */
    cge_attrs attrs;
    bool removed;          /* detached by cge_graph_remove_node, dropped by compact */
    uint64_t rev;          /* graph revision of its last change */
};

typedef struct cge__ir_optype {
    const char *name;      /* arena */
    int64_t next;          /* next n tried for an automatic "<op_type>_<n>" name */
} cge__ir_optype;

struct cge_graph {
    char *name;
    cge__ir_arena arena;

    cge__ir_value *values;
    int32_t num_values, cap_values;
    cge__strmap value_map;

    int32_t *inputs;       /* value indices */
    int32_t num_inputs, cap_inputs;
    int32_t *outputs;      /* value indices */
    int32_t num_outputs, cap_outputs;
    cge__ir_const **consts; /* pointers: cge_graph_constant() results stay valid */
    int32_t num_consts, cap_consts;

    cge_node **nodes;
    int32_t num_nodes, cap_nodes;
    cge__strmap node_map;

    cge__ir_optype *optypes;
    int32_t num_optypes, cap_optypes;
    cge__strmap optype_map;

    /* Names of symbolic dimensions: symbol k (CGE_DIM_SYMBOL(k)) is
     * dim_syms[k] (arena). Each graph has its own; a nested graph's shapes
     * are inferred from its parent's descriptors, not from its table. */
    const char **dim_syms;
    int32_t num_dim_syms, cap_dim_syms;
    cge__strmap dim_sym_map;

    uint32_t stamp;
    uint64_t uid;          /* cge__graph_uid: unique in the process */
    uint64_t rev;          /* bumped by every change to a node or a descriptor */
};

/* Record a [graph] error prefixed with "node <op> '<name>': ". */
CGE_IR_HIDDEN cge_status cge__ir_node_error(const cge_node *n, cge_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Attribute helpers (attrs.c). */
/* A node changed (added, rewired, an attribute set): it takes the next revision. */
static inline void cge__ir_touch(cge_node *n) { n->rev = ++n->graph->rev; }

CGE_IR_HIDDEN void cge__ir_attrs_init(cge_attrs *a, const cge_node *owner);
CGE_IR_HIDDEN void cge__ir_attrs_release(cge_attrs *a);
/* Deep-copy every attribute of `src` into the empty set `dst`. */
CGE_IR_HIDDEN cge_status cge__ir_attrs_copy(cge_attrs *dst, const cge_attrs *src);
/* 64-byte aligned copy of `bytes` bytes (a valid pointer even for 0 bytes). */
CGE_IR_HIDDEN void *cge__ir_aligned_copy(const void *data, size_t bytes);


/* Kahn's algorithm shared by verify and topo order; writes a [graph] error
 * with the cycle path when there is one. */
CGE_IR_HIDDEN cge_status cge__ir_topo(const cge_graph *g, int32_t *order);

#endif
