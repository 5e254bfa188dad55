/* Constant data derived by kernels at prepare, shared by the plans of one
 * session graph: blocks by (source address, key), reference counted, and the
 * address ranges whose bytes stay put for the cache's life. */
#include "ops/kernel_cache.h"

#include "base/hash.h"
#include "base/shared_block.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    const void *src;
    uint64_t hash;
    void *key;
    size_t key_bytes, bytes;
    void *block;            /* data pointer of the block (one reference held) */
    cge__kernel_restore_fn restore;   /* NULL: the source cannot be restored from it */
} entry;

typedef struct range {
    uintptr_t lo, hi;
} range;

struct cge_kernel_cache {
    pthread_mutex_t lock;
    entry *entries;
    int32_t num, cap;
    range *ranges;
    int32_t num_ranges, cap_ranges;
    bool sorted;
    range *retired;         /* cge__kernel_cache_retire: found, never filled */
    int32_t num_retired, cap_retired;
    void *comm;             /* cge__kernel_cache_set_comm */
    size_t made_bytes;      /* blocks made for kernels of this cache (atomic) */
};

static cge_status oom(const char *what)
{
    return cge_error(CGE_LAYER_KERNEL, CGE_ERR_NO_MEMORY, "kernel cache: out of memory (%s)", what);
}

cge_status cge__kernel_cache_create(cge_kernel_cache **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return oom("cache");
    pthread_mutex_init(&(*out)->lock, NULL);
    return CGE_OK;
}

void cge__kernel_cache_destroy(cge_kernel_cache *c)
{
    if (!c)
        return;
    for (int32_t i = 0; i < c->num; i++) {
        cge_kernel_shared_release(c->entries[i].block);
        free(c->entries[i].key);
    }
    free(c->entries);
    free(c->ranges);
    free(c->retired);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

cge_status cge__kernel_cache_add_stable(cge_kernel_cache *c, const void *data, size_t bytes)
{
    if (!c || !data || !bytes)
        return CGE_OK;
    pthread_mutex_lock(&c->lock);
    cge_status st = CGE_OK;
    if (c->num_ranges == c->cap_ranges) {
        int32_t cap = c->cap_ranges ? 2 * c->cap_ranges : 64;
        range *r = realloc(c->ranges, sizeof *r * (size_t)cap);
        if (r) {
            c->ranges = r;
            c->cap_ranges = cap;
        } else {
            st = oom("ranges");
        }
    }
    if (!st) {
        c->ranges[c->num_ranges++] = (range){(uintptr_t)data, (uintptr_t)data + bytes};
        c->sorted = false;
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

cge_status cge__kernel_cache_add_graph_constants(cge_kernel_cache *c, const cge_graph *g)
{
    cge_status st = CGE_OK;
    for (int32_t id = 0; !st && id < cge_graph_num_values(g); id++) {
        const cge_tensor *t = cge_graph_value_constant(g, id);
        if (t && t->data)
            st = cge__kernel_cache_add_stable(c, t->data, t->bytes);
    }
    return st;
}

/* Process-wide, for cge_kernel_shared_counts. */
static int64_t made_count, shared_count;

void cge_kernel_shared_counts(int64_t *made, int64_t *shared)
{
    if (made)
        *made = __atomic_load_n(&made_count, __ATOMIC_RELAXED);
    if (shared)
        *shared = __atomic_load_n(&shared_count, __ATOMIC_RELAXED);
}

static int range_cmp(const void *a, const void *b)
{
    const range *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Whether src lies in a stable range (the lock held). */
static bool stable(cge_kernel_cache *c, const void *src)
{
    if (!c->sorted) {
        qsort(c->ranges, (size_t)c->num_ranges, sizeof *c->ranges, range_cmp);
        c->sorted = true;
    }
    uintptr_t p = (uintptr_t)src;
    int32_t lo = 0, hi = c->num_ranges - 1, found = -1;
    while (lo <= hi) {   /* the last range starting at or before p */
        int32_t mid = lo + (hi - lo) / 2;
        if (c->ranges[mid].lo <= p) {
            found = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return found >= 0 && p < c->ranges[found].hi;
}

bool cge__kernel_data_is_stable(const cge_kernel_ctx *ctx, const void *src)
{
    cge_kernel_cache *c = ctx ? ctx->shared : NULL;
    if (!c || !src)
        return false;
    pthread_mutex_lock(&c->lock);
    bool r = stable(c, src);
    pthread_mutex_unlock(&c->lock);
    return r;
}

static uint64_t hash_key(const void *src, const void *key, size_t n)
{
    return cge__fnv1a(CGE__FNV1A_SEED ^ (uint64_t)(uintptr_t)src, key, n);
}

void cge_kernel_shared_release(void *block) { cge__block_unref(block); }

/* The prepare running on this thread records here (cge__kernel_watch_packed). */
static _Thread_local uint64_t *watched, *watched_any;

void cge__kernel_watch_packed(uint64_t *bits) { watched = bits; }

void cge__kernel_watch_packed_any_shape(uint64_t *bits) { watched_any = bits; }

void cge__kernel_input_packed_any_shape(const cge_kernel_ctx *ctx, int32_t input)
{
    (void)ctx;
    if (watched_any && input >= 0 && input < 64)
        *watched_any |= (uint64_t)1 << input;
}

void cge__kernel_input_packed(const cge_kernel_ctx *ctx, int32_t input)
{
    (void)ctx;
    if (watched && input >= 0 && input < 64)
        *watched |= (uint64_t)1 << input;
}

size_t cge__kernel_cache_made_bytes(const cge_kernel_cache *c)
{
    return c ? __atomic_load_n(&c->made_bytes, __ATOMIC_RELAXED) : 0;
}

/* The lock held. */
static void drop_retired(cge_kernel_cache *c, uintptr_t lo, uintptr_t hi)
{
    int32_t k = 0;
    for (int32_t i = 0; i < c->num_retired; i++)
        if (c->retired[i].hi <= lo || c->retired[i].lo >= hi)
            c->retired[k++] = c->retired[i];
    c->num_retired = k;
}

void cge__kernel_cache_forget(cge_kernel_cache *c, const void *data, size_t bytes)
{
    if (!c || !data)
        return;
    uintptr_t lo = (uintptr_t)data, hi = lo + bytes;
    pthread_mutex_lock(&c->lock);
    int32_t k = 0;
    for (int32_t i = 0; i < c->num_ranges; i++)
        if (c->ranges[i].hi <= lo || c->ranges[i].lo >= hi)
            c->ranges[k++] = c->ranges[i];
    c->num_ranges = k;
    drop_retired(c, lo, hi);
    k = 0;
    for (int32_t i = 0; i < c->num; i++) {
        uintptr_t s = (uintptr_t)c->entries[i].src;
        if (s >= lo && s < hi) {
            /* Kernels keep their own references: only the lookup goes. */
            cge_kernel_shared_release(c->entries[i].block);
            free(c->entries[i].key);
        } else {
            c->entries[k++] = c->entries[i];
        }
    }
    c->num = k;
    pthread_mutex_unlock(&c->lock);
}

cge_status cge__kernel_cache_retire(cge_kernel_cache *c, const void *data, size_t bytes)
{
    if (!c || !data || !bytes)
        return CGE_OK;
    pthread_mutex_lock(&c->lock);
    cge_status st = CGE_OK;
    if (c->num_retired == c->cap_retired) {
        int32_t cap = c->cap_retired ? 2 * c->cap_retired : 8;
        range *r = realloc(c->retired, sizeof *r * (size_t)cap);
        if (r) {
            c->retired = r;
            c->cap_retired = cap;
        } else {
            st = oom("retired ranges");
        }
    }
    if (!st)
        c->retired[c->num_retired++] = (range){(uintptr_t)data, (uintptr_t)data + bytes};
    pthread_mutex_unlock(&c->lock);
    return st;
}

void cge__kernel_shared_set_restore(const cge_kernel_ctx *ctx, const void *block,
                                    cge__kernel_restore_fn restore)
{
    cge_kernel_cache *c = ctx ? ctx->shared : NULL;
    if (!c || !block)
        return;
    pthread_mutex_lock(&c->lock);
    for (int32_t i = 0; i < c->num; i++)
        if (c->entries[i].block == block)
            c->entries[i].restore = restore;
    pthread_mutex_unlock(&c->lock);
}

/* The lock held. */
static bool restorable(const cge_kernel_cache *c, uintptr_t lo, uintptr_t hi)
{
    int32_t found = 0;
    for (int32_t i = 0; i < c->num; i++) {
        uintptr_t s = (uintptr_t)c->entries[i].src;
        if (s < lo || s >= hi)
            continue;
        if (!c->entries[i].restore)
            return false;
        found++;
    }
    return found > 0;
}

bool cge__kernel_cache_restorable(cge_kernel_cache *c, const void *data, size_t bytes)
{
    if (!c || !data || !bytes)
        return false;
    pthread_mutex_lock(&c->lock);
    bool r = restorable(c, (uintptr_t)data, (uintptr_t)data + bytes);
    pthread_mutex_unlock(&c->lock);
    return r;
}

cge_status cge__kernel_cache_revive(cge_kernel_cache *c, void *data, size_t bytes)
{
    if (!c || !data || !bytes)
        return cge_error(CGE_LAYER_KERNEL, CGE_ERR_INVALID_ARG, "revive: no cache or no data");
    uintptr_t lo = (uintptr_t)data, hi = lo + bytes;
    pthread_mutex_lock(&c->lock);
    if (!restorable(c, lo, hi)) {
        pthread_mutex_unlock(&c->lock);
        return cge_error(CGE_LAYER_KERNEL, CGE_ERR_STATE,
                         "a constant freed once packed cannot be written back from its "
                         "packed copies");
    }
    for (int32_t i = 0; i < c->num; i++) {
        entry *e = &c->entries[i];
        if ((uintptr_t)e->src >= lo && (uintptr_t)e->src < hi)
            e->restore(e->block, (void *)e->src, e->key, e->key_bytes);
    }
    drop_retired(c, lo, hi);
    pthread_mutex_unlock(&c->lock);
    return CGE_OK;
}

void cge__kernel_cache_unretire(cge_kernel_cache *c, const void *data, size_t bytes)
{
    if (!c || !data)
        return;
    pthread_mutex_lock(&c->lock);
    drop_retired(c, (uintptr_t)data, (uintptr_t)data + bytes);
    pthread_mutex_unlock(&c->lock);
}

/* Whether src lies in a retired range (the lock held; a handful of them). */
static bool retired(const cge_kernel_cache *c, const void *src)
{
    for (int32_t i = 0; i < c->num_retired; i++)
        if ((uintptr_t)src >= c->retired[i].lo && (uintptr_t)src < c->retired[i].hi)
            return true;
    return false;
}

static cge_status make(const cge_kernel_ctx *ctx, size_t bytes,
                       cge_status (*fill)(void *, void *), void *user, bool fill_populates,
                       void **out)
{
    void *b = fill_populates ? cge__block_new_unpopulated(bytes) : cge__block_new(NULL, bytes);
    if (!b)
        return cge_kernel_error(ctx, CGE_ERR_NO_MEMORY, "prepared constant data (%zu bytes): out of memory",
                                bytes);
    cge_status st = fill(b, user);
    if (st) {
        cge_kernel_shared_release(b);
        return st;
    }
    __atomic_fetch_add(&made_count, 1, __ATOMIC_RELAXED);
    if (ctx->shared)
        __atomic_fetch_add(&ctx->shared->made_bytes, bytes, __ATOMIC_RELAXED);
    *out = b;
    return CGE_OK;
}

/* Room for one more entry and a copy of its key (the lock held). */
static cge_status entry_room(cge_kernel_cache *c, const void *key, size_t key_bytes, void **k)
{
    *k = NULL;
    if (c->num == c->cap) {
        int32_t cap = c->cap ? 2 * c->cap : 32;
        entry *n = realloc(c->entries, sizeof *n * (size_t)cap);
        if (!n)
            return oom("entries");
        c->entries = n;
        c->cap = cap;
    }
    if (key_bytes && !(*k = malloc(key_bytes)))
        return oom("key");
    if (key_bytes)
        memcpy(*k, key, key_bytes);
    return CGE_OK;
}

static cge_status shared_get(const cge_kernel_ctx *ctx, const void *src, const void *key,
                             size_t key_bytes, size_t bytes,
                             cge_status (*fill)(void *dst, void *user), void *user,
                             bool fill_populates, void **out)
{
    if (!ctx || !fill || !out || (key_bytes && !key))
        return cge_error(CGE_LAYER_KERNEL, CGE_ERR_INVALID_ARG,
                         "cge_kernel_shared_get: NULL context, fill, out or key");
    *out = NULL;
    cge_kernel_cache *c = ctx->shared;
    if (!c)
        return make(ctx, bytes, fill, user, fill_populates, out);
    pthread_mutex_lock(&c->lock);
    cge_status st = CGE_OK;
    if (!src || !stable(c, src)) {
        /* the bytes of a retired source are gone: never read them */
        bool gone = src && retired(c, src);
        pthread_mutex_unlock(&c->lock);
        if (gone)
            return cge_kernel_error(ctx, CGE_ERR_STATE,
                                    "a constant input was freed once packed, and its packed "
                                    "copy is not shared: this prepare cannot pack it again");
        return make(ctx, bytes, fill, user, fill_populates, out);
    }
    uint64_t h = hash_key(src, key, key_bytes);
    for (int32_t i = 0; i < c->num; i++) {
        entry *e = &c->entries[i];
        if (e->hash == h && e->src == src && e->bytes == bytes && e->key_bytes == key_bytes &&
            (!key_bytes || !memcmp(e->key, key, key_bytes))) {
            *out = cge__block_ref(e->block);
            __atomic_fetch_add(&shared_count, 1, __ATOMIC_RELAXED);
            pthread_mutex_unlock(&c->lock);
            return CGE_OK;
        }
    }
    if (retired(c, src)) {
        pthread_mutex_unlock(&c->lock);
        return cge_kernel_error(ctx, CGE_ERR_STATE,
                                "a constant input was freed once packed, and this prepare asks "
                                "for another packed form of it");
    }
    /* Made under the lock: two plans preparing at once pack once. */
    void *b = NULL;
    void *k = NULL;
    st = entry_room(c, key, key_bytes, &k);
    if (!st)
        st = make(ctx, bytes, fill, user, fill_populates, &b);
    if (!st) {
        c->entries[c->num++] = (entry){src, h, k, key_bytes, bytes, b, NULL};
        *out = cge__block_ref(b);
    } else {
        free(k);
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

cge_status cge_kernel_shared_get(const cge_kernel_ctx *ctx, const void *src, const void *key,
                                 size_t key_bytes, size_t bytes,
                                 cge_status (*fill)(void *dst, void *user), void *user,
                                 void **out)
{
    return shared_get(ctx, src, key, key_bytes, bytes, fill, user, false, out);
}

cge_status cge__kernel_shared_get_parallel(const cge_kernel_ctx *ctx, const void *src,
                                           const void *key, size_t key_bytes, size_t bytes,
                                           cge_status (*fill)(void *dst, void *user),
                                           void *user, void **out)
{
    return shared_get(ctx, src, key, key_bytes, bytes, fill, user, true, out);
}

void cge__kernel_cache_each(cge_kernel_cache *c, cge__kernel_cache_visit fn, void *user)
{
    if (!c || !fn)
        return;
    pthread_mutex_lock(&c->lock);
    for (int32_t i = 0; i < c->num; i++) {
        const entry *e = &c->entries[i];
        fn(user, e->src, e->key, e->key_bytes, e->block, e->bytes);
    }
    pthread_mutex_unlock(&c->lock);
}

cge_status cge__kernel_cache_seed(cge_kernel_cache *c, const void *src, const void *key,
                                  size_t key_bytes, void *block, size_t bytes)
{
    if (!c || !src || !block || (key_bytes && !key))
        return cge_error(CGE_LAYER_KERNEL, CGE_ERR_INVALID_ARG, "kernel cache seed: NULL argument");
    pthread_mutex_lock(&c->lock);
    void *k = NULL;
    cge_status st = entry_room(c, key, key_bytes, &k);
    if (!st) {
        c->entries[c->num++] =
            (entry){src, hash_key(src, key, key_bytes), k, key_bytes, bytes, cge__block_ref(block), NULL};
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

void cge__kernel_cache_set_comm(cge_kernel_cache *c, void *comm)
{
    if (c)
        c->comm = comm;
}

void *cge__kernel_ctx_comm(const cge_kernel_ctx *ctx)
{
    return ctx && ctx->shared ? ctx->shared->comm : NULL;
}
