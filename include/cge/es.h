/* The functional ("eager style") graph builder: builders, handles to values,
 * and calls that each add a node and return handles to its outputs
 * (cge_es_<op>() per op, cge_es_op() for any op). */
#ifndef CGE_ES_H
#define CGE_ES_H

#include "cge/graph.h"

/* Each call infers shapes at once, so that an error points at the call that
 * caused it. Nothing runs while building. The per-op functions cge_es_<op>()
 * are generated from the registered op definitions (cge/es_ops.h, written by
 * the build); cge_es_op() reaches any op, custom ones included. */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cge_builder cge_builder;

/* A handle to a value in a builder. id >= 0 is a value; CGE_NONE marks an
 * absent optional input; CGE_INVALID is what a failed call returns. */
typedef struct cge_t {
    int32_t id;
} cge_t;
#define CGE_NONE ((cge_t){-1})
#define CGE_INVALID ((cge_t){-2})
static inline bool cge_t_valid(cge_t t) { return t.id >= 0; }

/* NULL only when out of memory. */
cge_builder *cge_builder_create(const char *graph_name);
void cge_builder_destroy(cge_builder *b);                  /* NULL is a no-op */
/* The first error of any call on this builder (CGE_OK if none); the message
 * is cge_builder_error_message(). Calls after an error keep returning
 * CGE_INVALID without adding nodes. */
cge_status cge_builder_status(const cge_builder *b);
const char *cge_builder_error_message(const cge_builder *b);
/* Name for the next node added (otherwise "<op_type>_<n>"). */
void cge_builder_set_next_name(cge_builder *b, const char *node_name);
/* Hand over the graph (verified). After this the builder holds nothing but
 * can be destroyed. Returns the first error if any call failed. */
cge_status cge_builder_finish(cge_builder *b, cge_graph **out);

/* Descriptor of a handle's value (dtype, shape as inferred). */
cge_status cge_es_desc(const cge_builder *b, cge_t t, cge_tensor_desc *out);
const char *cge_es_name(const cge_builder *b, cge_t t);

cge_t cge_es_input(cge_builder *b, const char *name, cge_dtype dtype, cge_shape shape);
/* A constant; data (dense, row-major) is copied. name NULL gives "const_<n>". */
cge_t cge_es_constant(cge_builder *b, const char *name, cge_dtype dtype, cge_shape shape,
                      const void *data);
cge_t cge_es_scalar_f32(cge_builder *b, float v);
cge_t cge_es_scalar_i64(cge_builder *b, int64_t v);
cge_t cge_es_vector_i64(cge_builder *b, const int64_t *v, int64_t n);
/* Mark `t` as a graph output; it is renamed to `name` if given. */
cge_status cge_es_output(cge_builder *b, cge_t t, const char *name);

/* Any registered op: inputs (CGE_NONE for absent optional ones), attributes
 * (cge_attr values, copied), and `num_outputs` handles written to `outputs`. */
cge_status cge_es_op(cge_builder *b, const char *op_type, const char *domain,
                     const cge_t *inputs, int32_t num_inputs,
                     const cge_attr *attrs, int32_t num_attrs,
                     cge_t *outputs, int32_t num_outputs);
/* The same for single-output ops, returning the output. */
cge_t cge_es_op1(cge_builder *b, const char *op_type, const char *domain,
                 const cge_t *inputs, int32_t num_inputs,
                 const cge_attr *attrs, int32_t num_attrs);

#ifdef __cplusplus
}
#endif

#include "cge/es_ops.h"  /* generated: cge_es_add(), cge_es_matmul(), ... */

#endif
