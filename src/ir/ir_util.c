/* Small containers under the IR: a chunked string arena (names are freed all
 * at once with their graph) and array growth. */
#include <stdlib.h>
#include <string.h>

#include "ir/graph_internal.h"

struct cge__ir_chunk {
    cge__ir_chunk *next;
    char data[];
};

/* Big enough that a graph of 100k nodes makes only a few hundred chunks. */
#define ARENA_CHUNK 65536

char *cge__ir_arena_alloc(cge__ir_arena *a, size_t n)
{
    if (n > a->left) {
        /* A large request gets a chunk of its own, so the current chunk's
         * remaining space is not thrown away for it. */
        size_t size = n > ARENA_CHUNK / 4 ? n : ARENA_CHUNK;
        if (size > SIZE_MAX - sizeof(cge__ir_chunk))
            return NULL;
        cge__ir_chunk *c = malloc(sizeof(cge__ir_chunk) + size);
        if (!c)
            return NULL;
        if (size != ARENA_CHUNK && a->head) {
            c->next = a->head->next;
            a->head->next = c;
            return c->data;
        }
        c->next = a->head;
        a->head = c;
        a->pos = c->data;
        a->left = size;
    }
    char *p = a->pos;
    a->pos += n;
    a->left -= n;
    return p;
}

const char *cge__ir_arena_strdup(cge__ir_arena *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = cge__ir_arena_alloc(a, n);
    if (p)
        memcpy(p, s, n);
    return p;
}

void cge__ir_arena_free(cge__ir_arena *a)
{
    cge__ir_chunk *c = a->head;
    while (c) {
        cge__ir_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->pos = NULL;
    a->left = 0;
}

bool cge__ir_grow(void **items, int32_t *cap, int64_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    if (need > INT32_MAX)
        return false;
    int64_t nc = *cap ? *cap : 8;
    while (nc < need)
        nc *= 2;
    if (nc > INT32_MAX)
        nc = INT32_MAX;
    if ((uint64_t)nc > SIZE_MAX / elem)
        return false;
    void *p = realloc(*items, (size_t)nc * elem);
    if (!p)
        return false;
    *items = p;
    *cap = (int32_t)nc;
    return true;
}
