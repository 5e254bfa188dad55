/* Sequences and optionals at run time: a growable list of owned tensors of
 * one dtype, whose element buffers are kept for reuse when elements go. */
#include <stdlib.h>
#include <string.h>

#include "base/sequence.h"
#include "cge/status.h"

static cge_status seq_err(cge_status st, const char *msg, long long a, long long b)
{
    return cge_error(CGE_LAYER_RUNTIME, st, msg, a, b);
}

size_t cge__value_nbytes(cge_value_type type, cge_dtype dtype, const cge_shape *shape)
{
    return type == CGE_TYPE_TENSOR ? cge_tensor_nbytes(dtype, shape) : sizeof(cge_sequence);
}

static bool is_optional(cge_value_type t)
{
    return t == CGE_TYPE_OPTIONAL || t == CGE_TYPE_OPTIONAL_SEQUENCE;
}

cge_status cge_sequence_create(cge_value_type type, cge_dtype dtype, cge_sequence **out)
{
    if (!out)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "sequence: out is NULL");
    *out = NULL;
    if (type != CGE_TYPE_SEQUENCE && !is_optional(type))
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "sequence: type %d is not a sequence or optional", (int)type);
    if (!cge_dtype_valid(dtype))
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_DTYPE, "sequence: invalid element dtype %d",
                         (int)dtype);
    cge_sequence *s = calloc(1, sizeof *s);
    if (!s)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "sequence: out of memory");
    s->type = type;
    s->dtype = dtype;
    s->none = is_optional(type);
    s->heap = true;
    *out = s;
    return CGE_OK;
}

void cge__seq_release(cge_sequence *s)
{
    if (!s)
        return;
    for (int32_t i = 0; i < s->cap; i++)
        free(s->elems[i].data);
    free(s->elems);
    bool heap = s->heap;
    memset(s, 0, sizeof *s);
    s->heap = heap;
}

void cge_sequence_destroy(cge_sequence *s)
{
    if (!s)
        return;
    cge__seq_release(s);
    free(s);
}

void cge__seq_reset(cge_sequence *s, cge_value_type type, cge_dtype dtype)
{
    s->type = type;
    s->dtype = dtype;
    s->none = false;
    s->count = 0;
}

cge_value_type cge_sequence_type(const cge_sequence *s) { return s ? s->type : CGE_TYPE_TENSOR; }
cge_dtype cge_sequence_dtype(const cge_sequence *s) { return s ? s->dtype : CGE_DTYPE_UNDEFINED; }
int64_t cge_sequence_length(const cge_sequence *s) { return s ? s->count : 0; }
bool cge_sequence_has_value(const cge_sequence *s) { return s && !s->none; }

cge_status cge_sequence_set_none(cge_sequence *s)
{
    if (!s || !is_optional(s->type))
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "sequence: only an optional can hold no value");
    s->count = 0;
    s->none = true;
    return CGE_OK;
}

void cge_sequence_clear(cge_sequence *s)
{
    if (s) {
        s->count = 0;
        s->none = false;
    }
}

bool cge__seq_index(const cge_sequence *s, int64_t i, int64_t *out)
{
    if (i < 0)
        i += s->count;
    if (i < 0 || i >= s->count)
        return false;
    *out = i;
    return true;
}

cge_status cge__seq_insert_uninit(cge_sequence *s, int64_t pos, const cge_shape *shape,
                                  void **data)
{
    if (pos < 0 || pos > s->count)
        return seq_err(CGE_ERR_INVALID_ARG, "sequence: position %lld is out of range 0..%lld",
                       (long long)pos, (long long)s->count);
    if (s->count == INT32_MAX)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_UNSUPPORTED, "sequence: too many elements");
    if (s->count == s->cap) {
        int32_t nc = s->cap ? (s->cap > INT32_MAX / 2 ? INT32_MAX : s->cap * 2) : 4;
        cge__seq_elem *e = realloc(s->elems, sizeof *e * (size_t)nc);
        if (!e)
            return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "sequence: out of memory");
        memset(e + s->cap, 0, sizeof *e * (size_t)(nc - s->cap));
        s->elems = e;
        s->cap = nc;
    }
    /* The spare slot at count (its buffer kept) becomes the new element. */
    cge__seq_elem slot = s->elems[s->count];
    memmove(s->elems + pos + 1, s->elems + pos, sizeof slot * (size_t)(s->count - pos));
    size_t need = cge_tensor_nbytes(s->dtype, shape);
    if (!slot.data || slot.cap < need) {
        free(slot.data);
        size_t alloc = need ? (need + 63) / 64 * 64 : 64;
        slot.data = aligned_alloc(64, alloc);
        slot.cap = slot.data ? alloc : 0;
    }
    s->elems[pos] = slot;
    s->count++;
    if (!slot.data) {
        /* keep the list consistent: the element goes again */
        memmove(s->elems + pos, s->elems + pos + 1, sizeof slot * (size_t)(s->count - 1 - pos));
        s->count--;
        s->elems[s->count] = slot;
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY,
                         "sequence: out of memory for a %zu-byte element", need);
    }
    s->elems[pos].shape = *shape;
    if (is_optional(s->type))
        s->none = false;
    *data = slot.data;
    return CGE_OK;
}

cge_status cge_sequence_insert(cge_sequence *s, int64_t pos, const cge_shape *shape,
                               const void *data)
{
    if (!s || !shape || !cge_shape_is_static(shape))
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "sequence: insert needs a sequence and a static shape");
    if (s->type == CGE_TYPE_OPTIONAL && s->count >= 1)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "sequence: an optional tensor holds one tensor at most");
    return cge__seq_insert_copy(s, pos < 0 ? pos + s->count : pos, shape, data);
}

cge_status cge__seq_insert_copy(cge_sequence *s, int64_t pos, const cge_shape *shape,
                                const void *data)
{
    void *dst = NULL;
    cge_status st = cge__seq_insert_uninit(s, pos, shape, &dst);
    size_t n = cge_tensor_nbytes(s->dtype, shape);
    if (!st && n)
        memcpy(dst, data, n);
    return st;
}

cge_status cge_sequence_append(cge_sequence *s, const cge_shape *shape, const void *data)
{
    return cge_sequence_insert(s, s ? s->count : 0, shape, data);
}

cge_status cge_sequence_at(const cge_sequence *s, int64_t i, cge_tensor *out)
{
    int64_t k = 0;
    if (!s || !out)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "sequence: NULL argument");
    if (!cge__seq_index(s, i, &k))
        return seq_err(CGE_ERR_INVALID_ARG, "sequence: index %lld is out of range for length %lld",
                       (long long)i, (long long)s->count);
    const cge__seq_elem *e = &s->elems[k];
    *out = (cge_tensor){.dtype = s->dtype, .shape = e->shape, .data = e->data,
                        .bytes = cge_tensor_nbytes(s->dtype, &e->shape)};
    return CGE_OK;
}

cge_status cge_sequence_erase(cge_sequence *s, int64_t pos)
{
    int64_t k = 0;
    if (!s)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "sequence: NULL argument");
    if (!cge__seq_index(s, pos, &k))
        return seq_err(CGE_ERR_INVALID_ARG,
                       "sequence: position %lld is out of range for length %lld", (long long)pos,
                       (long long)s->count);
    cge__seq_elem gone = s->elems[k];
    memmove(s->elems + k, s->elems + k + 1, sizeof gone * (size_t)(s->count - 1 - k));
    s->count--;
    s->elems[s->count] = gone;   /* a spare buffer for the next insert */
    return CGE_OK;
}

cge_status cge_sequence_copy(cge_sequence *dst, const cge_sequence *src)
{
    if (!dst || !src)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "sequence: NULL argument");
    if (dst == src)
        return CGE_OK;
    cge__seq_reset(dst, src->type, src->dtype);
    for (int32_t i = 0; i < src->count; i++) {
        cge_status st = cge__seq_insert_copy(dst, i, &src->elems[i].shape, src->elems[i].data);
        if (st)
            return st;
    }
    dst->none = src->none;
    return CGE_OK;
}

cge_status cge__value_copy(cge_value_type type, void *dst, const void *src, size_t bytes)
{
    if (type == CGE_TYPE_TENSOR) {
        if (bytes && dst != src)
            memcpy(dst, src, bytes);
        return CGE_OK;
    }
    return cge_sequence_copy(dst, src);
}

void cge__value_release(cge_value_type type, void *data)
{
    if (type != CGE_TYPE_TENSOR && data)
        cge__seq_release(data);
}
