/* The warm host memory store (warm_memory.h): chunks mapped once and kept,
 * blocks handed out by size class (powers of two) and recycled through a
 * free list per class, never given back to the system while the store
 * lives. A block's header names its store and class, so any block frees
 * the same way. */
#include "runtime/warm_memory.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cge/status.h"

/* Under AddressSanitizer a free block is poisoned, so that a table used
 * after its instance went is still caught as with the C heap. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define HEADER 64              /* keeps blocks 64-byte aligned */
#define MIN_CLASS 7            /* 128-byte blocks and up */
#define NUM_CLASSES 48
#define FIRST_CHUNK ((size_t)256 << 10)
#define HEAP_CLASS 0xff        /* a block of a NULL store: malloc'd */
#define MAGIC 0x5741524du      /* "WARM" */

typedef struct block_header {
    struct cge__warm *owner;
    uint32_t magic;
    uint8_t cls;
    struct block_header *next_free;
} block_header;
_Static_assert(sizeof(block_header) <= HEADER, "a block header fits its room");

typedef struct chunk {
    struct chunk *next;
    size_t bytes;
} chunk;

struct cge__warm {
    pthread_mutex_t lock;
    chunk *chunks;
    char *bump, *bump_end;      /* the current chunk's room */
    char *warm_end;             /* its pages below this are in */
    size_t next_chunk;          /* geometric: each on-demand chunk twice the last */
    block_header *free_list[NUM_CLASSES];
    int64_t live_blocks;
    bool released;
    cge__warm_stats st;
};

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

void cge__prefault(void *p, size_t bytes)
{
    if (!p || !bytes)
        return;
    size_t ps = page_size();
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(ps - 1);
    size_t len = ((uintptr_t)p + bytes) - a;
    if (madvise((void *)a, len, MADV_POPULATE_WRITE) == 0)
        return;
    /* Older kernels: one write per page, of the byte already there. */
    volatile char *c = p;
    for (size_t i = 0; i < bytes; i += ps)
        c[i] = c[i];
    c[bytes - 1] = c[bytes - 1];
}

cge__warm *cge__warm_create(void)
{
    cge__warm *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    if (pthread_mutex_init(&w->lock, NULL) != 0) {
        free(w);
        return NULL;
    }
    w->next_chunk = FIRST_CHUNK;
    return w;
}

static void destroy(cge__warm *w)
{
    for (chunk *c = w->chunks, *n; c; c = n) {
        n = c->next;
        /* the shadow of poisoned free blocks outlives munmap: a later
         * mapping at the same address would read as poisoned */
        size_t bytes = c->bytes;
        UNPOISON(c, bytes);
        munmap(c, bytes);
    }
    pthread_mutex_destroy(&w->lock);
    free(w);
}

void cge__warm_release(cge__warm *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->released = true;
    bool last = w->live_blocks == 0;
    pthread_mutex_unlock(&w->lock);
    if (last)
        destroy(w);
}

static int class_of(size_t bytes)
{
    int c = MIN_CLASS;
    while (c < NUM_CLASSES - 1 && ((size_t)1 << c) < bytes)
        c++;
    return ((size_t)1 << c) >= bytes ? c : -1;
}

/* A new chunk of at least `need` bytes of room; populated now if asked. */
static bool map_chunk_locked(cge__warm *w, size_t need, bool populate)
{
    size_t ps = page_size();
    size_t bytes = need + HEADER;
    if (bytes < w->next_chunk)
        bytes = w->next_chunk;
    bytes = (bytes + ps - 1) & ~(ps - 1);
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return false;
    UNPOISON(m, bytes);   /* fresh pages: never poisoned, whatever was mapped here before */
    if (populate)
        cge__prefault(m, bytes);
    chunk *c = m;
    c->bytes = bytes;
    c->next = w->chunks;
    w->chunks = c;
    w->bump = (char *)m + HEADER;
    w->bump_end = (char *)m + bytes;
    w->warm_end = populate ? w->bump_end : w->bump;
    if (w->next_chunk < ((size_t)1 << 30))
        w->next_chunk *= 2;
    w->st.chunks++;
    w->st.mapped_bytes += bytes;
    if (populate)
        w->st.populated_bytes += bytes;
    return true;
}

void *cge__warm_calloc(cge__warm *w, size_t n, size_t size)
{
    if (size && n > (SIZE_MAX - HEADER) / size)
        return NULL;
    size_t bytes = n * size;
    if (!w) {
        block_header *h = aligned_alloc(HEADER, (bytes + 2 * HEADER - 1) & ~(size_t)(HEADER - 1));
        if (!h)
            return NULL;
        memset(h, 0, HEADER + bytes);
        *h = (block_header){.owner = NULL, .magic = MAGIC, .cls = HEAP_CLASS};
        return (char *)h + HEADER;
    }
    int cls = class_of(bytes + HEADER);
    if (cls < 0)
        return NULL;
    size_t block = (size_t)1 << cls;
    pthread_mutex_lock(&w->lock);
    block_header *h = w->free_list[cls];
    bool reused = h != NULL;
    if (h) {
        UNPOISON(h, block);
        w->free_list[cls] = h->next_free;
    } else {
        if ((size_t)(w->bump_end - w->bump) < block && !map_chunk_locked(w, block, false)) {
            pthread_mutex_unlock(&w->lock);
            return NULL;
        }
        h = (block_header *)w->bump;
        w->bump += block;
        if (w->bump > w->warm_end) {
            char *from = (char *)h > w->warm_end ? (char *)h : w->warm_end;
            w->st.cold_bytes += (size_t)(w->bump - from);
            w->warm_end = w->bump;   /* the caller's writes bring them in */
        }
    }
    w->st.allocs++;
    w->st.reused += reused;
    w->st.live_bytes += block;
    if (w->st.live_bytes > w->st.peak_live_bytes)
        w->st.peak_live_bytes = w->st.live_bytes;
    w->live_blocks++;
    pthread_mutex_unlock(&w->lock);
    /* Fresh chunk memory is zero already; a recycled block is not. */
    if (reused)
        memset((char *)h + HEADER, 0, bytes);
    *h = (block_header){.owner = w, .magic = MAGIC, .cls = (uint8_t)cls};
    return (char *)h + HEADER;
}

void cge__warm_free(void *p)
{
    if (!p)
        return;
    block_header *h = (block_header *)((char *)p - HEADER);
    if (h->magic != MAGIC)
        return;   /* not a warm block: an internal error; leaking beats a bad free */
    if (h->cls == HEAP_CLASS) {
        h->magic = 0;
        free(h);
        return;
    }
    cge__warm *w = h->owner;
    size_t block = (size_t)1 << h->cls;
    pthread_mutex_lock(&w->lock);
    h->next_free = w->free_list[h->cls];
    w->free_list[h->cls] = h;
    /* The header stays readable: the free list runs through it. */
    POISON((char *)h + HEADER, block - HEADER);
    w->st.live_bytes -= block;
    bool last = --w->live_blocks == 0 && w->released;
    pthread_mutex_unlock(&w->lock);
    if (last)
        destroy(w);
}

cge_status cge__warm_reserve(cge__warm *w, size_t bytes)
{
    if (!w || !bytes)
        return CGE_OK;
    pthread_mutex_lock(&w->lock);
    bool ok = true;
    /* Freed blocks are warm too, but of fixed classes: count only the room. */
    if ((size_t)(w->bump_end - w->bump) < bytes) {
        ok = map_chunk_locked(w, bytes, true);
    } else if (w->warm_end < w->bump + bytes) {
        char *from = w->warm_end > w->bump ? w->warm_end : w->bump;
        cge__prefault(from, (size_t)(w->bump + bytes - from));
        w->st.populated_bytes += (size_t)(w->bump + bytes - from);
        w->warm_end = w->bump + bytes;
    }
    pthread_mutex_unlock(&w->lock);
    return ok ? CGE_OK
              : cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY,
                          "warm memory: cannot map %zu bytes for new signatures' tables", bytes);
}

void cge__warm_get_stats(cge__warm *w, cge__warm_stats *out)
{
    if (!w) {
        memset(out, 0, sizeof *out);
        return;
    }
    pthread_mutex_lock(&w->lock);
    *out = w->st;
    pthread_mutex_unlock(&w->lock);
}
