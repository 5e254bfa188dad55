/* The layout of cge_sequence and the in-place helpers that kernels, the
 * body interpreter and sessions share: a non-tensor value's buffer holds one
 * cge_sequence struct (a zeroed buffer is a valid empty one). */
#ifndef CGE_BASE_SEQUENCE_H
#define CGE_BASE_SEQUENCE_H

#include "cge/graph.h"
#include "cge/sequence.h"

typedef struct cge__seq_elem {
    cge_shape shape;
    void *data;        /* 64-byte aligned, `cap` bytes, reference-counted (copies of
                          the sequence share it; never written once inserted);
                          kept as a spare when the element goes */
    size_t cap;
} cge__seq_elem;

struct cge_sequence {
    cge_value_type type;   /* 0 in a zeroed buffer: set by the first writer */
    cge_dtype dtype;
    bool none;             /* optionals: no value */
    bool heap;             /* made by cge_sequence_create (destroy frees it) */
    int32_t count;
    int32_t cap;           /* elems allocated; those past count keep spare buffers */
    cge__seq_elem *elems;
};

/* Bytes of a value's buffer: the dense size for a tensor, one struct for
 * the others. */
size_t cge__value_nbytes(cge_value_type type, cge_dtype dtype, const cge_shape *shape);
/* Set type and dtype, keep spare buffers, length 0 (has a value). */
void cge__seq_reset(cge_sequence *s, cge_value_type type, cge_dtype dtype);
/* Free every buffer; the struct is zeroed (a valid empty sequence again). */
void cge__seq_release(cge_sequence *s);
/* Insert an element of `shape` at `pos` (0..count) whose data the caller
 * writes; *data gets its buffer (spare buffers are reused, so a steady state
 * allocates nothing). */
cge_status cge__seq_insert_uninit(cge_sequence *s, int64_t pos, const cge_shape *shape,
                                  void **data);
/* Insert another sequence's element without copying its bytes (the buffer
 * is shared). */
cge_status cge__seq_insert_shared(cge_sequence *s, int64_t pos, const cge__seq_elem *src);
/* Room for `n` elements at least (one allocation for a known length). */
cge_status cge__seq_reserve(cge_sequence *s, int64_t n);
/* The same, with `data` copied in (cge_tensor_nbytes(dtype, shape) bytes). */
cge_status cge__seq_insert_copy(cge_sequence *s, int64_t pos, const cge_shape *shape,
                                const void *data);
/* `i` made non-negative; false if out of range (-count .. count-1). */
bool cge__seq_index(const cge_sequence *s, int64_t i, int64_t *out);
/* A value's contents into another buffer of the same type: bytes for a
 * tensor, a deep copy for the others. */
cge_status cge__value_copy(cge_value_type type, void *dst, const void *src, size_t bytes);
/* Release what a value's buffer owns (nothing for tensors) before it is freed. */
void cge__value_release(cge_value_type type, void *data);

#endif
