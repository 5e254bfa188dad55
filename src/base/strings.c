/* Packing string tensors into self-contained blocks, and the string store
 * (chunks reused across resets) that kernels write their strings into. */
#include <stdlib.h>
#include <string.h>

#include "base/strings.h"

size_t cge__strings_packed_size(const cge_string *elems, int64_t n)
{
    if (n < 0 || (uint64_t)n > CGE_MAX_TENSOR_BYTES / sizeof(cge_string))
        return SIZE_MAX;
    uint64_t total = (uint64_t)n * sizeof(cge_string);
    for (int64_t i = 0; i < n; i++) {
        int64_t sz = elems[i].size;
        if (sz < 0 || (sz > 0 && !elems[i].data) || (uint64_t)sz > CGE_MAX_TENSOR_BYTES - total)
            return SIZE_MAX;
        total += (uint64_t)sz;
    }
    return (size_t)total;
}

void cge__strings_pack(void *dst, const cge_string *elems, int64_t n)
{
    cge_string *out = dst;
    char *bytes = (char *)dst + (size_t)n * sizeof(cge_string);
    for (int64_t i = 0; i < n; i++) {
        size_t sz = (size_t)elems[i].size;
        if (sz)
            memcpy(bytes, elems[i].data, sz);
        out[i].data = bytes;
        out[i].size = (int64_t)sz;
        bytes += sz;
    }
}

void *cge__strings_pack_dup(const cge_string *elems, int64_t n, size_t *bytes)
{
    size_t need = cge__strings_packed_size(elems, n);
    if (need == SIZE_MAX)
        return NULL;
    void *p = malloc(need ? need : 1);
    if (p)
        cge__strings_pack(p, elems, n);
    if (bytes)
        *bytes = need;
    return p;
}

bool cge__string_equal(const cge_string *a, const cge_string *b)
{
    return a->size == b->size && (a->size == 0 || !memcmp(a->data, b->data, (size_t)a->size));
}

/* ---- the store ---------------------------------------------------------------- */

typedef struct chunk {
    struct chunk *next;
    size_t cap, used;
    char bytes[];
} chunk;

struct cge__strstore {
    chunk *first, *cur;
};

enum { CHUNK_MIN = 16384 };

cge__strstore *cge__strstore_create(void) { return calloc(1, sizeof(cge__strstore)); }

void cge__strstore_destroy(cge__strstore *s)
{
    if (!s)
        return;
    for (chunk *c = s->first, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(s);
}

void cge__strstore_reset(cge__strstore *s)
{
    for (chunk *c = s->first; c; c = c->next)
        c->used = 0;
    s->cur = s->first;
}

char *cge__strstore_alloc(cge__strstore *s, size_t size, const void *src)
{
    /* The chunks in use come first; a request too large for the current one
     * moves on to the next kept chunk that fits, else a new one joins the
     * list's end (twice the last, so a run of growing requests allocates a
     * few times, not once per string). */
    chunk *c = s->cur;
    while (c && c->cap - c->used < size)
        c = c->next;
    if (!c) {
        chunk *last = s->first;
        while (last && last->next)
            last = last->next;
        size_t cap = last ? last->cap * 2 : CHUNK_MIN;
        if (cap < size)
            cap = size;
        if (cap > SIZE_MAX - sizeof(chunk))
            return NULL;
        c = malloc(sizeof(chunk) + cap);
        if (!c)
            return NULL;
        c->next = NULL;
        c->cap = cap;
        c->used = 0;
        if (last)
            last->next = c;
        else
            s->first = c;
    }
    s->cur = c;
    char *p = c->bytes + c->used;
    c->used += size;
    if (src && size)
        memcpy(p, src, size);
    return p;
}

size_t cge__strstore_capacity(const cge__strstore *s)
{
    size_t n = 0;
    for (const chunk *c = s ? s->first : NULL; c; c = c->next)
        n += c->cap;
    return n;
}
