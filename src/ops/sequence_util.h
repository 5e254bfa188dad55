/* What the sequence and optional operator files share: the host call that
 * runs their work on the stream (their values are host-side objects), the
 * merge of element shapes into one descriptor, and reading a small index. */
#ifndef CGE_OPS_SEQUENCE_UTIL_H
#define CGE_OPS_SEQUENCE_UTIL_H

#include "base/sequence.h"
#include "cge/op.h"

/* A launch's tensors and names, copied for a host function that runs once
 * the stream reaches it. */
typedef struct cge__seq_call {
    const char *op_type, *node_name; /* the graph's (they outlive the run), for messages */
    const cge_attrs *attrs;
    int32_t ni, no;
    cge_tensor *ins, *outs;
    cge_value_type *in_types, *out_types;   /* what each holds (kernel ctx's, or tensors) */
    cge_status (*fn)(const struct cge__seq_call *c);
} cge__seq_call;

/* Enqueue c->fn on `stream` with copies of ctx's tensors; a failure it
 * returns becomes the stream's [kernel] error naming the node. */
cge_status cge__seq_enqueue(const cge_kernel_ctx *ctx, cge_stream *stream,
                            cge_status (*fn)(const cge__seq_call *c));
/* A copy of input 0 (a sequence or optional) into output 0, on the stream:
 * Identity's kernel for them. */
cge_status cge__seq_launch_copy(const cge_kernel_ctx *ctx, cge_stream *stream);
/* The element descriptor that covers both shapes: equal dims stay, others
 * dynamic; rank -1 (unknown) where the ranks differ or either is unknown. */
cge_shape cge__seq_merge_shape(const cge_shape *a, const cge_shape *b);
/* The shape of every element of `s` merged (rank -1 for an empty one). */
cge_shape cge__seq_elem_shape(const cge_sequence *s);
/* The one integer of a scalar (or one-element) index tensor. */
int64_t cge__seq_scalar(cge_dtype dtype, const void *data);
/* A value's descriptor and its value in a meta: the sequence, if at hand. */
static inline const cge_sequence *cge__seq_in(const cge_infer_ctx *c, int32_t i)
{
    return c->input_values && i < c->num_inputs ? (const cge_sequence *)c->input_values[i] : NULL;
}

#endif
