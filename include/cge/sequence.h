/* Sequences and optionals at run time: a host-side list of tensors of one
 * dtype (ONNX's sequence type), or an optional holding a tensor, a sequence
 * or nothing. Sessions take and give them for graph inputs and outputs whose
 * descriptor's type is not CGE_TYPE_TENSOR (cge_tensor.data points to one). */
#ifndef CGE_SEQUENCE_H
#define CGE_SEQUENCE_H

#include "cge/types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cge_sequence cge_sequence;

/* An empty sequence (CGE_TYPE_SEQUENCE), or an optional without a value
 * (CGE_TYPE_OPTIONAL, CGE_TYPE_OPTIONAL_SEQUENCE), of element dtype `dtype`.
 * Every element is copied in and owned by the sequence. */
cge_status cge_sequence_create(cge_value_type type, cge_dtype dtype, cge_sequence **out);
void cge_sequence_destroy(cge_sequence *s);                 /* NULL is a no-op */
cge_value_type cge_sequence_type(const cge_sequence *s);
cge_dtype cge_sequence_dtype(const cge_sequence *s);
/* Tensors held: a sequence's length; an optional tensor's 0 or 1. */
int64_t cge_sequence_length(const cge_sequence *s);
/* False only for an optional without a value (an empty sequence has one). */
bool cge_sequence_has_value(const cge_sequence *s);
/* An optional: drop its value (none). A sequence: [io]-free no-op error. */
cge_status cge_sequence_set_none(cge_sequence *s);
/* Length 0, and an optional then holds a value (an empty sequence, or - for
 * an optional tensor - nothing until one is appended). */
void cge_sequence_clear(cge_sequence *s);
/* Copy a tensor of the sequence's dtype in at `pos` (0 .. length; negative
 * counts from the end as ONNX's SequenceInsert: -1 is before the last);
 * `data` holds cge_tensor_nbytes(dtype, shape) bytes. An optional tensor
 * holds at most one. */
cge_status cge_sequence_insert(cge_sequence *s, int64_t pos, const cge_shape *shape,
                               const void *data);
cge_status cge_sequence_append(cge_sequence *s, const cge_shape *shape, const void *data);
/* Element `i` (negative from the end) as a view: out->data points into the
 * sequence and stays valid until the sequence changes. */
cge_status cge_sequence_at(const cge_sequence *s, int64_t i, cge_tensor *out);
cge_status cge_sequence_erase(cge_sequence *s, int64_t pos);
/* `src` (type, dtype, value or none, elements) into `dst`. The copy is
 * independent (changing either leaves the other as it was); it shares the
 * elements' bytes, which no operation changes in place. */
cge_status cge_sequence_copy(cge_sequence *dst, const cge_sequence *src);

#ifdef __cplusplus
}
#endif
#endif
