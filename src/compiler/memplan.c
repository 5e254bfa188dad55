/* Offset assignment for buffers with lifetimes (greedy by size, and a linear
 * scan with a best-fit free list), the verifier that proves no two blocks live
 * at one step overlap, and the lower bound. */
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler_internal.h"

/* Greedy by size is TensorFlow Lite's planner: largest first, into the
 * best-fitting gap among the blocks it overlaps in time. The lower bound is
 * the largest sum of live sizes at one step. */

/* Greedy by size is O(n^2) in the worst case; above this many blocks only the
 * linear scan runs. */
#define GREEDY_MAX_BLOCKS 4096

static size_t round_up(size_t x, size_t a) { return (x + a - 1) & ~(a - 1); }

static bool live_together(const cge_mem_block *a, const cge_mem_block *b)
{
    return a->first <= b->last && b->first <= a->last;
}

static cge_status oom(void)
{
    return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "memory planner: out of memory");
}

/* ---- greedy by size ---------------------------------------------------------- */

/* Sort keys carried with the index, so that qsort needs no context. */
typedef struct key {
    size_t a;
    int64_t b;
    int32_t idx;
} key;

/* a descending, then b ascending, then index. */
static int key_desc_asc(const void *x, const void *y)
{
    const key *p = x, *q = y;
    if (p->a != q->a)
        return p->a < q->a ? 1 : -1;
    if (p->b != q->b)
        return p->b < q->b ? -1 : 1;
    return (p->idx > q->idx) - (p->idx < q->idx);
}

/* a ascending, then index. */
static int key_asc(const void *x, const void *y)
{
    const key *p = x, *q = y;
    if (p->a != q->a)
        return p->a < q->a ? -1 : 1;
    return (p->idx > q->idx) - (p->idx < q->idx);
}

static cge_status greedy_by_size(const cge_mem_block *blocks, int32_t n, size_t align,
                                 size_t *offsets, size_t *arena)
{
    key *order = malloc(sizeof(key) * (size_t)(n ? n : 1));
    int32_t *placed = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    if (!order || !placed) {
        free(order);
        free(placed);
        return oom();
    }
    for (int32_t i = 0; i < n; i++)
        order[i] = (key){blocks[i].bytes, blocks[i].first, i};
    qsort(order, (size_t)n, sizeof(key), key_desc_asc);
    /* `placed` stays sorted by offset, so each block walks it once. */
    int32_t np = 0;
    size_t top = 0;
    for (int32_t k = 0; k < n; k++) {
        int32_t b = order[k].idx;
        size_t size = round_up(blocks[b].bytes, align);
        size_t best = SIZE_MAX, best_gap = SIZE_MAX, prev_end = 0;
        for (int32_t q = 0; q < np; q++) {
            int32_t o = placed[q];
            if (!live_together(&blocks[o], &blocks[b]))
                continue;
            size_t off = offsets[o];
            if (off > prev_end && off - prev_end >= size && off - prev_end < best_gap) {
                best_gap = off - prev_end;
                best = prev_end;
            }
            size_t end = off + round_up(blocks[o].bytes, align);
            if (end > prev_end)
                prev_end = end;
        }
        if (best == SIZE_MAX)
            best = prev_end;
        offsets[b] = best;
        if (best + size > top)
            top = best + size;
        int32_t pos = np;
        while (pos > 0 && offsets[placed[pos - 1]] > best)
            pos--;
        memmove(&placed[pos + 1], &placed[pos], sizeof(int32_t) * (size_t)(np - pos));
        placed[pos] = b;
        np++;
    }
    free(order);
    free(placed);
    *arena = top;
    return CGE_OK;
}

/* ---- linear scan with a best-fit free list --------------------------------- */

/* Free holes: per size class (floor log2) a doubly linked list, and hash maps
 * from a hole's start and end offsets to the hole, so that freeing merges
 * with neighbours in O(1) and allocation searches one or a few classes. */
typedef struct hole {
    size_t off, size;
    int32_t prev, next;   /* in its class list */
    int cls;
} hole;

typedef struct omap {     /* offset -> hole index, open addressing */
    size_t *keys;
    int32_t *vals;        /* -1 empty, -2 deleted */
    size_t cap;
} omap;

typedef struct freelist {
    hole *h;
    int32_t nh, cap, free_head;   /* recycled hole slots chain through next */
    int32_t heads[65];
    omap starts, ends;
} freelist;

static size_t ohash(size_t k, size_t cap) { return (k * 0x9E3779B97F4A7C15ull >> 7) & (cap - 1); }

static int32_t omap_get(const omap *m, size_t k)
{
    for (size_t j = ohash(k, m->cap);; j = (j + 1) & (m->cap - 1)) {
        if (m->vals[j] == -1)
            return -1;
        if (m->vals[j] >= 0 && m->keys[j] == k)
            return m->vals[j];
    }
}

static void omap_put(omap *m, size_t k, int32_t v)
{
    size_t j = ohash(k, m->cap);
    while (m->vals[j] >= 0)
        j = (j + 1) & (m->cap - 1);
    m->keys[j] = k;
    m->vals[j] = v;
}

static void omap_del(omap *m, size_t k)
{
    for (size_t j = ohash(k, m->cap);; j = (j + 1) & (m->cap - 1)) {
        if (m->vals[j] == -1)
            return;
        if (m->vals[j] >= 0 && m->keys[j] == k) {
            m->vals[j] = -2;
            return;
        }
    }
}

static int size_class(size_t s)
{
    int c = 0;
    while (s > 1) {
        s >>= 1;
        c++;
    }
    return c;
}

static void fl_unlink(freelist *f, int32_t i)
{
    hole *x = &f->h[i];
    if (x->prev >= 0)
        f->h[x->prev].next = x->next;
    else
        f->heads[x->cls] = x->next;
    if (x->next >= 0)
        f->h[x->next].prev = x->prev;
    omap_del(&f->starts, x->off);
    omap_del(&f->ends, x->off + x->size);
    x->next = f->free_head;
    f->free_head = i;
}

static void fl_insert(freelist *f, size_t off, size_t size)
{
    int32_t i = f->free_head;
    if (i >= 0)
        f->free_head = f->h[i].next;
    else
        i = f->nh++;
    int c = size_class(size);
    f->h[i] = (hole){off, size, -1, f->heads[c], c};
    if (f->heads[c] >= 0)
        f->h[f->heads[c]].prev = i;
    f->heads[c] = i;
    omap_put(&f->starts, off, i);
    omap_put(&f->ends, off + size, i);
}

static void fl_free(freelist *f, size_t off, size_t size)
{
    int32_t before = omap_get(&f->ends, off), after = omap_get(&f->starts, off + size);
    if (before >= 0) {
        off = f->h[before].off;
        size += f->h[before].size;
        fl_unlink(f, before);
    }
    if (after >= 0) {
        size += f->h[after].size;
        fl_unlink(f, after);
    }
    fl_insert(f, off, size);
}

/* Best fit: the smallest hole of the first class that has one big enough
 * (an exact fit ends the search). -1 if none. */
static int32_t fl_find(const freelist *f, size_t size)
{
    for (int c = size_class(size); c < 65; c++) {
        int32_t best = -1;
        for (int32_t i = f->heads[c]; i >= 0; i = f->h[i].next) {
            if (f->h[i].size < size || (best >= 0 && f->h[i].size >= f->h[best].size))
                continue;
            best = i;
            if (f->h[i].size == size)
                break;
        }
        if (best >= 0)
            return best;
    }
    return -1;
}

typedef struct event {
    int32_t t, block;
    int kind; /* 0: free (sorted before allocations of the next step) */
} event;

static int event_cmp(const void *x, const void *y)
{
    const event *a = x, *b = y;
    if (a->t != b->t)
        return a->t < b->t ? -1 : 1;
    if (a->kind != b->kind)
        return a->kind - b->kind;
    return a->block - b->block;
}

/* The events of `n` blocks in event_cmp's order into ev (2n). Their times
 * are steps, a range about as long as the plan: counted into buckets of
 * (time, kind), filled in block order, which is the order within a bucket
 * (no comparisons: a shape program places a new signature's values this
 * way for every new size). A range far longer than the blocks (a caller's
 * sparse times) is sorted instead. */
static cge_status sort_events(const cge_mem_block *blocks, int32_t n, event *ev)
{
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (int32_t i = 0; i < n; i++) {
        lo = blocks[i].first < lo ? blocks[i].first : lo;
        hi = (int64_t)blocks[i].last + 1 > hi ? (int64_t)blocks[i].last + 1 : hi;
    }
    int64_t keys = n ? 2 * (hi - lo + 1) : 0;
    if (keys > 8 * (int64_t)n + 64) {
        for (int32_t i = 0; i < n; i++) {
            ev[2 * i] = (event){blocks[i].first, i, 1};
            ev[2 * i + 1] = (event){blocks[i].last + 1, i, 0};
        }
        qsort(ev, (size_t)(2 * n), sizeof(event), event_cmp);
        return CGE_OK;
    }
    int32_t *at = calloc((size_t)keys + 1, sizeof(int32_t));
    if (!at)
        return oom();
    /* key: 2 (t - lo) + kind, kind 0 (free) before 1 (allocation) */
    for (int32_t i = 0; i < n; i++) {
        at[2 * (blocks[i].first - lo) + 1 + 1]++;
        at[2 * ((int64_t)blocks[i].last + 1 - lo) + 1]++;
    }
    for (int64_t k = 1; k <= keys; k++)
        at[k] += at[k - 1];
    for (int32_t i = 0; i < n; i++) {
        ev[at[2 * (blocks[i].first - lo) + 1]++] = (event){blocks[i].first, i, 1};
        ev[at[2 * ((int64_t)blocks[i].last + 1 - lo)]++] = (event){blocks[i].last + 1, i, 0};
    }
    free(at);
    return CGE_OK;
}

static cge_status linear_scan(const cge_mem_block *blocks, int32_t n, size_t align,
                              size_t *offsets, size_t *arena)
{
    freelist f;
    memset(&f, 0, sizeof f);
    size_t mcap = 64;
    while (mcap < 4 * (size_t)n + 4)
        mcap *= 2;
    event *ev = malloc(sizeof(event) * (size_t)(2 * n + 1));
    f.h = malloc(sizeof(hole) * (size_t)(n + 2));
    f.starts = (omap){malloc(sizeof(size_t) * mcap), malloc(sizeof(int32_t) * mcap), mcap};
    f.ends = (omap){malloc(sizeof(size_t) * mcap), malloc(sizeof(int32_t) * mcap), mcap};
    cge_status st = CGE_OK;
    if (!ev || !f.h || !f.starts.keys || !f.starts.vals || !f.ends.keys || !f.ends.vals)
        st = oom();
    int32_t ne = 0;
    if (!st) {
        f.free_head = -1;
        for (int c = 0; c < 65; c++)
            f.heads[c] = -1;
        for (size_t j = 0; j < mcap; j++)
            f.starts.vals[j] = f.ends.vals[j] = -1;
        /* Freed once step `last` is over, before step last+1 allocates. */
        ne = 2 * n;
        st = sort_events(blocks, n, ev);
    }
    size_t top = 0;
    int64_t ops = 0;
    for (int32_t e = 0; !st && e < ne; e++) {
        int32_t b = ev[e].block;
        size_t size = round_up(blocks[b].bytes, align);
        /* Deleted map slots accumulate: rebuild both maps now and then. */
        if (++ops % (int64_t)(mcap / 4) == 0) {
            for (size_t j = 0; j < mcap; j++)
                f.starts.vals[j] = f.ends.vals[j] = -1;
            for (int c = 0; c < 65; c++)
                for (int32_t i = f.heads[c]; i >= 0; i = f.h[i].next) {
                    omap_put(&f.starts, f.h[i].off, i);
                    omap_put(&f.ends, f.h[i].off + f.h[i].size, i);
                }
        }
        if (ev[e].kind == 0) {
            if (size)
                fl_free(&f, offsets[b], size);
            continue;
        }
        if (!size) {
            offsets[b] = 0;
            continue;
        }
        int32_t best = fl_find(&f, size);
        if (best >= 0) {
            hole x = f.h[best];
            fl_unlink(&f, best);
            offsets[b] = x.off;
            if (x.size > size)
                fl_insert(&f, x.off + size, x.size - size);
        } else {
            int32_t last = omap_get(&f.ends, top);
            if (last >= 0) {
                /* The highest hole touches the top: grow it. */
                offsets[b] = f.h[last].off;
                fl_unlink(&f, last);
            } else {
                offsets[b] = top;
            }
            top = offsets[b] + size;
        }
    }
    free(ev);
    free(f.h);
    free(f.starts.keys);
    free(f.starts.vals);
    free(f.ends.keys);
    free(f.ends.vals);
    *arena = top;
    return st;
}

cge_status cge_memplan_assign(cge_mem_block *blocks, int32_t n, size_t alignment,
                              cge_memplan_strategy strategy, size_t *arena_bytes)
{
    if (n < 0 || (n && !blocks) || !arena_bytes)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "memplan_assign: bad arguments");
    if (!alignment)
        alignment = 64;
    if (alignment & (alignment - 1))
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                         "memplan_assign: alignment %zu is not a power of two", alignment);
    for (int32_t i = 0; i < n; i++)
        if (blocks[i].last < blocks[i].first)
            return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                             "memplan_assign: block %d ends (%d) before it starts (%d)", (int)i,
                             (int)blocks[i].last, (int)blocks[i].first);
    size_t *a = malloc(sizeof(size_t) * (size_t)(n ? n : 1));
    size_t *b = malloc(sizeof(size_t) * (size_t)(n ? n : 1));
    if (!a || !b) {
        free(a);
        free(b);
        return oom();
    }
    size_t ga = SIZE_MAX, la = SIZE_MAX;
    cge_status st = CGE_OK;
    bool greedy = strategy == CGE_MEMPLAN_GREEDY_BY_SIZE ||
                  (strategy == CGE_MEMPLAN_AUTO && n <= GREEDY_MAX_BLOCKS);
    bool linear = strategy == CGE_MEMPLAN_LINEAR_SCAN || strategy == CGE_MEMPLAN_AUTO;
    if (greedy)
        st = greedy_by_size(blocks, n, alignment, a, &ga);
    if (!st && linear)
        st = linear_scan(blocks, n, alignment, b, &la);
    if (!st) {
        const size_t *best = ga <= la ? a : b;
        for (int32_t i = 0; i < n; i++)
            blocks[i].offset = best[i];
        *arena_bytes = ga <= la ? ga : la;
    }
    free(a);
    free(b);
    return st;
}

/* ---- verification and the lower bound -------------------------------------- */

/* A treap keyed by offset: the blocks live at the current step, which are
 * pairwise disjoint, so a newcomer need only be checked against its
 * neighbours in offset order. Expected O(log n) per operation. */
typedef struct tnode {
    size_t key;
    uint32_t pri;
    int32_t l, r, blk;
} tnode;

static void t_split(tnode *t, int32_t root, size_t key, int32_t *a, int32_t *b)
{
    if (root < 0) {
        *a = *b = -1;
        return;
    }
    if (t[root].key < key) {
        t_split(t, t[root].r, key, &t[root].r, b);
        *a = root;
    } else {
        t_split(t, t[root].l, key, a, &t[root].l);
        *b = root;
    }
}

static int32_t t_merge(tnode *t, int32_t a, int32_t b)
{
    if (a < 0)
        return b;
    if (b < 0)
        return a;
    if (t[a].pri > t[b].pri) {
        t[a].r = t_merge(t, t[a].r, b);
        return a;
    }
    t[b].l = t_merge(t, a, t[b].l);
    return b;
}

/* The block with the largest key < key (or -1); with the smallest key >= key. */
static int32_t t_pred(const tnode *t, int32_t root, size_t key)
{
    int32_t best = -1;
    while (root >= 0) {
        if (t[root].key < key) {
            best = t[root].blk;
            root = t[root].r;
        } else {
            root = t[root].l;
        }
    }
    return best;
}

static int32_t t_succ(const tnode *t, int32_t root, size_t key)
{
    int32_t best = -1;
    while (root >= 0) {
        if (t[root].key >= key) {
            best = t[root].blk;
            root = t[root].l;
        } else {
            root = t[root].r;
        }
    }
    return best;
}

static cge_status overlap_error(const cge_mem_block *blocks, int32_t i, int32_t j)
{
    const cge_mem_block *o = &blocks[i], *b = &blocks[j];
    return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INTERNAL,
                     "memory plan: blocks %d [%zu, +%zu) steps %d-%d and %d [%zu, +%zu) "
                     "steps %d-%d are live together and overlap",
                     (int)i, o->offset, o->bytes, (int)o->first, (int)o->last, (int)j, b->offset,
                     b->bytes, (int)b->first, (int)b->last);
}

cge_status cge_memplan_verify(const cge_mem_block *blocks, int32_t n, size_t arena_bytes)
{
    if (n < 0 || (n && !blocks))
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "memplan_verify: bad arguments");
    for (int32_t i = 0; i < n; i++) {
        if (blocks[i].last < blocks[i].first)
            return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INTERNAL,
                             "memory plan: block %d ends (step %d) before it starts (step %d)",
                             (int)i, (int)blocks[i].last, (int)blocks[i].first);
        if (blocks[i].bytes && (blocks[i].offset > arena_bytes ||
                                blocks[i].bytes > arena_bytes - blocks[i].offset))
            return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INTERNAL,
                             "memory plan: block %d [%zu, +%zu) lies outside the arena of %zu "
                             "bytes", (int)i, blocks[i].offset, blocks[i].bytes, arena_bytes);
    }
    key *by_first = malloc(sizeof(key) * (size_t)(n ? n : 1));
    key *by_last = malloc(sizeof(key) * (size_t)(n ? n : 1));
    tnode *t = malloc(sizeof(tnode) * (size_t)(n ? n : 1));
    int32_t *node_of = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    if (!by_first || !by_last || !t || !node_of) {
        free(by_first);
        free(by_last);
        free(t);
        free(node_of);
        return oom();
    }
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++)
        node_of[i] = -1;
    for (int32_t i = 0; i < n; i++)
        if (blocks[i].bytes) {
            by_first[m] = (key){(size_t)((int64_t)blocks[i].first - INT32_MIN), 0, i};
            by_last[m++] = (key){(size_t)((int64_t)blocks[i].last - INT32_MIN), 0, i};
        }
    qsort(by_first, (size_t)m, sizeof(key), key_asc);
    qsort(by_last, (size_t)m, sizeof(key), key_asc);
    int32_t root = -1, nt = 0, expired = 0;
    uint32_t seed = 2463534242u;
    cge_status st = CGE_OK;
    for (int32_t k = 0; !st && k < m; k++) {
        int32_t bi = by_first[k].idx;
        const cge_mem_block *b = &blocks[bi];
        /* Blocks whose last step is before this one's first are gone. */
        while (expired < m && blocks[by_last[expired].idx].last < b->first) {
            int32_t gone = by_last[expired++].idx;
            if (node_of[gone] < 0)
                continue;
            int32_t a, rest, mid, c;
            t_split(t, root, blocks[gone].offset, &a, &rest);
            t_split(t, rest, blocks[gone].offset + 1, &mid, &c);
            root = t_merge(t, a, c);
            node_of[gone] = -1;
        }
        int32_t below = t_pred(t, root, b->offset + 1), above = t_succ(t, root, b->offset + 1);
        if (below >= 0 && blocks[below].offset + blocks[below].bytes > b->offset)
            st = overlap_error(blocks, below, bi);
        else if (above >= 0 && above != bi && blocks[above].offset < b->offset + b->bytes)
            st = overlap_error(blocks, above, bi);
        if (st)
            break;
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        t[nt] = (tnode){b->offset, seed, -1, -1, bi};
        int32_t a, c;
        t_split(t, root, b->offset, &a, &c);
        root = t_merge(t, t_merge(t, a, nt), c);
        node_of[bi] = nt++;
    }
    free(by_first);
    free(by_last);
    free(t);
    free(node_of);
    return st;
}

size_t cge_memplan_lower_bound(const cge_mem_block *blocks, int32_t n, size_t alignment)
{
    if (n <= 0 || !blocks)
        return 0;
    if (!alignment)
        alignment = 64;
    event *ev = malloc(sizeof(event) * (size_t)(2 * n));
    if (!ev)
        return 0;
    for (int32_t i = 0; i < n; i++) {
        ev[2 * i] = (event){blocks[i].first, i, 1};
        ev[2 * i + 1] = (event){blocks[i].last + 1, i, 0};
    }
    qsort(ev, (size_t)(2 * n), sizeof(event), event_cmp);
    size_t cur = 0, best = 0;
    for (int32_t e = 0; e < 2 * n; e++) {
        size_t s = round_up(blocks[ev[e].block].bytes, alignment);
        if (ev[e].kind == 0)
            cur -= s;
        else
            cur += s;
        if (cur > best)
            best = cur;
    }
    free(ev);
    return best;
}
