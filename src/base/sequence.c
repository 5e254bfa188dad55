/* Sequences and optionals at run time: a growable list of tensors of one
 * dtype over reference-counted element buffers (a copy shares them), kept
 * for reuse when elements go. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/sequence.h"
#include "cge/status.h"

static cge_status seq_err(cge_status st, const char *msg, long long a, long long b)
{
    return cge_error(CGE_LAYER_RUNTIME, st, msg, a, b);
}

/* ---- element buffers ----------------------------------------------------------------
 * An element's bytes never change once it is in a sequence (kernels write a
 * fresh element before it is visible), so copies of a sequence share them:
 * a copy, SequenceInsert's output and a Loop's carried state cost a pointer
 * per element, not the element. The count lives in the 64 bytes before the
 * data (which stays 64-byte aligned). */
#define BUF_HEAD 64

typedef struct buf_head {
    atomic_int refs;
} buf_head;

static buf_head *head_of(void *data) { return (buf_head *)((char *)data - BUF_HEAD); }

static void *buf_new(size_t bytes, size_t *cap)
{
    size_t alloc = bytes ? (bytes + 63) / 64 * 64 : 64;
    char *b = aligned_alloc(64, BUF_HEAD + alloc);
    if (!b)
        return NULL;
    atomic_init(&((buf_head *)b)->refs, 1);
    *cap = alloc;
    return b + BUF_HEAD;
}

static void buf_ref(void *data)
{
    if (data)
        atomic_fetch_add_explicit(&head_of(data)->refs, 1, memory_order_relaxed);
}

static void buf_unref(void *data)
{
    if (data && atomic_fetch_sub_explicit(&head_of(data)->refs, 1, memory_order_acq_rel) == 1)
        free(head_of(data));
}

/* Only a buffer no other sequence holds may be written again. */
static bool buf_unique(void *data)
{
    return atomic_load_explicit(&head_of(data)->refs, memory_order_acquire) == 1;
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
        buf_unref(s->elems[i].data);
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

cge_status cge__seq_reserve(cge_sequence *s, int64_t n)
{
    if (n <= s->cap)
        return CGE_OK;
    if (n > INT32_MAX)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_UNSUPPORTED, "sequence: too many elements");
    cge__seq_elem *e = realloc(s->elems, sizeof *e * (size_t)n);
    if (!e)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "sequence: out of memory");
    memset(e + s->cap, 0, sizeof *e * (size_t)(n - s->cap));
    s->elems = e;
    s->cap = (int32_t)n;
    return CGE_OK;
}

/* Room for one more element (amortised doubling); the slot at count is
 * moved to `pos` and returned, holding the spare buffer it had (or none). */
static cge_status open_slot(cge_sequence *s, int64_t pos, cge__seq_elem **out)
{
    if (pos < 0 || pos > s->count)
        return seq_err(CGE_ERR_INVALID_ARG, "sequence: position %lld is out of range 0..%lld",
                       (long long)pos, (long long)s->count);
    if (s->count == INT32_MAX)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_UNSUPPORTED, "sequence: too many elements");
    if (s->count == s->cap) {
        int64_t nc = s->cap ? (s->cap > INT32_MAX / 2 ? INT32_MAX : (int64_t)s->cap * 2) : 4;
        cge_status st = cge__seq_reserve(s, nc);
        if (st)
            return st;
    }
    cge__seq_elem slot = s->elems[s->count];
    memmove(s->elems + pos + 1, s->elems + pos, sizeof slot * (size_t)(s->count - pos));
    s->elems[pos] = slot;
    s->count++;
    if (is_optional(s->type))
        s->none = false;
    *out = &s->elems[pos];
    return CGE_OK;
}

/* open_slot undone: the element at pos goes back to the spare slot. */
static void close_slot(cge_sequence *s, int64_t pos)
{
    cge__seq_elem slot = s->elems[pos];
    memmove(s->elems + pos, s->elems + pos + 1, sizeof slot * (size_t)(s->count - 1 - pos));
    s->count--;
    s->elems[s->count] = slot;
}

cge_status cge__seq_insert_uninit(cge_sequence *s, int64_t pos, const cge_shape *shape,
                                  void **data)
{
    cge__seq_elem *e = NULL;
    cge_status st = open_slot(s, pos, &e);
    if (st)
        return st;
    size_t need = cge_tensor_nbytes(s->dtype, shape);
    /* The spare buffer is reused when it is big enough and no copy shares it. */
    if (!e->data || e->cap < need || !buf_unique(e->data)) {
        buf_unref(e->data);
        e->data = buf_new(need, &e->cap);
        if (!e->data) {
            e->cap = 0;
            close_slot(s, pos);
            return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY,
                             "sequence: out of memory for a %zu-byte element", need);
        }
    }
    e->shape = *shape;
    *data = e->data;
    return CGE_OK;
}

cge_status cge__seq_insert_shared(cge_sequence *s, int64_t pos, const cge__seq_elem *src)
{
    cge__seq_elem *e = NULL;
    cge_status st = open_slot(s, pos, &e);
    if (st)
        return st;
    buf_unref(e->data);   /* the spare (if any): a shared element takes its slot */
    buf_ref(src->data);
    *e = *src;
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
    cge_status st = cge__seq_reserve(dst, src->count);
    for (int32_t i = 0; !st && i < src->count; i++)
        st = cge__seq_insert_shared(dst, i, &src->elems[i]);
    if (st)
        return st;
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
