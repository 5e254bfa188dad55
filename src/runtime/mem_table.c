/* Pointer set for device allocations and sorted host-range table for pinned
 * host memory (see mem_table.h). */
#include "runtime/mem_table.h"

#include <stdlib.h>
#include <string.h>

void rt_mem_table_init(cge__mem_table *t) { memset(t, 0, sizeof *t); }

void rt_mem_table_fini(cge__mem_table *t)
{
    free(t->slots);
    free(t->ranges);
    memset(t, 0, sizeof *t);
}

/* Allocations are 64-byte aligned, so the low bits carry nothing. */
static size_t ptr_hash(const void *p, size_t mask)
{
    uint64_t x = (uint64_t)(uintptr_t)p >> 6;
    x *= 0x9E3779B97F4A7C15ull;
    return (size_t)(x >> 20) & mask;
}

static bool ptr_grow(cge__mem_table *t)
{
    size_t cap = t->capacity ? t->capacity * 2 : 64;
    rt_ptr_slot *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return false;
    for (size_t i = 0; i < t->capacity; i++) {
        if (!t->slots[i].ptr)
            continue;
        size_t j = ptr_hash(t->slots[i].ptr, cap - 1);
        while (slots[j].ptr)
            j = (j + 1) & (cap - 1);
        slots[j] = t->slots[i];
    }
    free(t->slots);
    t->slots = slots;
    t->capacity = cap;
    return true;
}

static size_t ptr_find(const cge__mem_table *t, const void *ptr)
{
    if (!t->capacity)
        return SIZE_MAX;
    size_t mask = t->capacity - 1;
    for (size_t i = ptr_hash(ptr, mask);; i = (i + 1) & mask) {
        if (t->slots[i].ptr == ptr)
            return i;
        if (!t->slots[i].ptr)
            return SIZE_MAX;
    }
}

bool rt_ptr_add(cge__mem_table *t, const void *ptr, size_t bytes)
{
    /* Keep the load under 1/2 so probe chains stay short. */
    if ((t->count + 1) * 2 > t->capacity && !ptr_grow(t))
        return false;
    size_t mask = t->capacity - 1;
    size_t i = ptr_hash(ptr, mask);
    while (t->slots[i].ptr)
        i = (i + 1) & mask;
    t->slots[i].ptr = ptr;
    t->slots[i].bytes = bytes;
    t->count++;
    return true;
}

bool rt_ptr_contains(const cge__mem_table *t, const void *ptr) { return ptr_find(t, ptr) != SIZE_MAX; }

bool rt_ptr_lookup(const cge__mem_table *t, const void *ptr, size_t *bytes)
{
    size_t i = ptr_find(t, ptr);
    if (i == SIZE_MAX)
        return false;
    *bytes = t->slots[i].bytes;
    return true;
}

bool rt_ptr_remove(cge__mem_table *t, const void *ptr)
{
    size_t i = ptr_find(t, ptr);
    if (i == SIZE_MAX)
        return false;
    /* Backward-shift deletion: no tombstones, so lookups never slow down. */
    size_t mask = t->capacity - 1;
    size_t hole = i;
    for (size_t j = (i + 1) & mask; t->slots[j].ptr; j = (j + 1) & mask) {
        size_t home = ptr_hash(t->slots[j].ptr, mask);
        /* Move j into the hole unless its home lies cyclically in (hole, j]. */
        bool home_between = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!home_between) {
            t->slots[hole] = t->slots[j];
            hole = j;
        }
    }
    t->slots[hole].ptr = NULL;
    t->slots[hole].bytes = 0;
    t->count--;
    return true;
}

static size_t range_len(size_t bytes) { return bytes ? bytes : 1; }

/* Index of the first range whose base is > p. */
static size_t range_upper(const cge__mem_table *t, const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    size_t lo = 0, hi = t->num_ranges;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)t->ranges[mid].base <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

rt_range_status rt_range_add(cge__mem_table *t, const void *base, size_t bytes, bool registered)
{
    uintptr_t b = (uintptr_t)base;
    size_t len = range_len(bytes);
    size_t at = range_upper(t, base);
    if (at > 0) {
        const rt_host_range *prev = &t->ranges[at - 1];
        if (b - (uintptr_t)prev->base < range_len(prev->bytes))
            return RT_RANGE_OVERLAP;
    }
    if (at < t->num_ranges && (uintptr_t)t->ranges[at].base - b < len)
        return RT_RANGE_OVERLAP;
    if (t->num_ranges == t->cap_ranges) {
        size_t cap = t->cap_ranges ? t->cap_ranges * 2 : 16;
        rt_host_range *r = realloc(t->ranges, cap * sizeof *r);
        if (!r)
            return RT_RANGE_NO_MEMORY;
        t->ranges = r;
        t->cap_ranges = cap;
    }
    memmove(&t->ranges[at + 1], &t->ranges[at], (t->num_ranges - at) * sizeof *t->ranges);
    t->ranges[at] = (rt_host_range){.base = base, .bytes = bytes, .registered = registered};
    t->num_ranges++;
    return RT_RANGE_OK;
}

const rt_host_range *rt_range_find_base(const cge__mem_table *t, const void *base)
{
    size_t at = range_upper(t, base);
    if (at > 0 && t->ranges[at - 1].base == base)
        return &t->ranges[at - 1];
    return NULL;
}

const rt_host_range *rt_range_find_containing(const cge__mem_table *t, const void *ptr, size_t bytes)
{
    size_t at = range_upper(t, ptr);
    if (at == 0)
        return NULL;
    const rt_host_range *r = &t->ranges[at - 1];
    size_t off = (uintptr_t)ptr - (uintptr_t)r->base;
    size_t len = range_len(r->bytes);
    if (off >= len || bytes > len - off)
        return NULL;
    return r;
}

void rt_range_remove(cge__mem_table *t, const rt_host_range *r)
{
    size_t at = (size_t)(r - t->ranges);
    memmove(&t->ranges[at], &t->ranges[at + 1], (t->num_ranges - at - 1) * sizeof *t->ranges);
    t->num_ranges--;
}
