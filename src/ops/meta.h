/* Internal: run an operator's meta on descriptors, with the generic checks
 * (arity, dtype sets) every operator gets before its own infer. */
#ifndef CGE_OPS_META_H
#define CGE_OPS_META_H

#include "cge/op.h"

/* inputs[i].dtype == UNDEFINED marks an absent optional input. outputs[] get
 * dtype and shape; their names are left as given. */
cge_status cge__op_infer_node(const cge_op_def *def, const char *node_name,
                             const cge_attrs *attrs, const cge_tensor_desc *inputs,
                             const void *const *input_values, int32_t num_inputs,
                             cge_tensor_desc *outputs, int32_t num_outputs);

/* The same, with the symbolic values of inputs whose values are not known
 * (cge_infer_ctx.input_symbolic; NULL: none). */
cge_status cge__op_infer_node_symbolic(const cge_op_def *def, const char *node_name,
                                      const cge_attrs *attrs, const cge_tensor_desc *inputs,
                                      const void *const *input_values,
                                      const cge_symbolic_value *const *input_symbolic,
                                      int32_t num_inputs, cge_tensor_desc *outputs,
                                      int32_t num_outputs);

/* Arity check against the schema: [schema] error naming the node. */
cge_status cge__op_check_arity(const cge_op_def *def, const char *node_name,
                              const bool *input_present, int32_t num_inputs,
                              int32_t num_outputs);
/* Attribute kinds and required attributes: [schema] error naming the node. */
cge_status cge__op_check_attrs(const cge_op_def *def, const char *node_name,
                              const cge_attrs *attrs);

#endif
