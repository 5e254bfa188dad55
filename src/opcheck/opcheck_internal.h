/* Internal to the contract checker: an input case (descriptors, values and
 * attributes for one call of an operator) and the ways cases are made. */
#ifndef CGE_OPCHECK_INTERNAL_H
#define CGE_OPCHECK_INTERNAL_H

#include "cge/opcheck.h"

#define OC_MAX_ARGS 16

/* One set of inputs and attributes for an op. Values are owned (malloc'ed,
 * dense); attributes live on a throwaway node, the only home cge_attrs has. */
typedef struct oc_case {
    int32_t num_inputs;
    int32_t num_outputs;
    bool present[OC_MAX_ARGS];
    cge_dtype dtype[OC_MAX_ARGS];
    cge_shape shape[OC_MAX_ARGS];
    void *values[OC_MAX_ARGS];
    /* Explicit values from a case spec, as doubles, repeated to fill (kept so
     * that a dtype or shape change can regenerate them). NULL: generated. */
    double *given[OC_MAX_ARGS];
    int32_t num_given[OC_MAX_ARGS];
    cge_graph *holder;
    cge_node *node;
} oc_case;

/* An empty case for `def` (attribute holder made, no inputs yet). */
cge_status oc_case_init(oc_case *c, const cge_op_def *def);
void oc_case_free(oc_case *c);
cge_status oc_case_clone(const oc_case *src, const cge_op_def *def, oc_case *dst);
/* (Re)make input i's values for its current dtype and shape. */
cge_status oc_case_fill(oc_case *c, const cge_op_def *def, int32_t i);
const cge_attrs *oc_case_attrs(const oc_case *c);
/* "x=float32[2,3] y=float32[2,3]" into buf. */
const char *oc_case_str(const oc_case *c, const cge_op_def *def, char *buf, size_t size);

/* Parse "f32[2,3]; i64[2]={3,2}; - | axis=0 perm=1,0" into a case for def. */
cge_status oc_case_parse(const cge_op_def *def, const char *spec, oc_case *c);

/* Builtin case specs for `name` (NULL-terminated; NULL if none), and why
 * an op is not run at all (NULL if it is). */
const char *const *oc_builtin_cases(const char *name);
const char *oc_builtin_skip(const char *name);

/* Generic candidate `k` (0, 1, ...) for def with the type-variable dtype
 * `t`: CGE_ERR_NOT_FOUND when there are no more. */
cge_status oc_generic_case(const cge_op_def *def, int32_t k, cge_dtype t, oc_case *c);

/* Inputs sharing input 0's dtype set (the schema's type variable "T"). */
bool oc_same_type_var(const cge_op_def *def, int32_t i);
int32_t oc_default_outputs(const cge_op_def *def);

#endif
