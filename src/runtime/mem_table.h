/* Bookkeeping of a device's memory: the set of live device allocations (so an
 * unknown pointer is an error, not a crash) and the sorted table of pinned host
 * ranges (allocated or registered). Not thread-safe: the caller locks. */
#ifndef CGE_RUNTIME_MEM_TABLE_H
#define CGE_RUNTIME_MEM_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rt_ptr_slot {
    const void *ptr; /* NULL: empty */
    size_t bytes;
} rt_ptr_slot;

typedef struct rt_host_range {
    const void *base;
    size_t bytes;
    bool registered; /* caller-owned (register_host) rather than alloc_host */
} rt_host_range;

typedef struct cge__mem_table {
    rt_ptr_slot *slots; /* open addressing, linear probing; capacity a power of 2 */
    size_t capacity;
    size_t count;
    rt_host_range *ranges; /* sorted by base, never overlapping */
    size_t num_ranges;
    size_t cap_ranges;
} cge__mem_table;

void rt_mem_table_init(cge__mem_table *t);
void rt_mem_table_fini(cge__mem_table *t);

/* Device allocations. add returns false if out of memory. */
bool rt_ptr_add(cge__mem_table *t, const void *ptr, size_t bytes);
/* Removes `ptr`; false if it was not there. */
bool rt_ptr_remove(cge__mem_table *t, const void *ptr);
bool rt_ptr_contains(const cge__mem_table *t, const void *ptr);
/* Like contains, and gives the allocation's size. */
bool rt_ptr_lookup(const cge__mem_table *t, const void *ptr, size_t *bytes);

typedef enum rt_range_status { RT_RANGE_OK = 0, RT_RANGE_OVERLAP, RT_RANGE_NO_MEMORY } rt_range_status;
/* Host ranges. An empty range (bytes 0, from alloc_host(0)) counts as 1 byte
 * so that it has an identity. */
rt_range_status rt_range_add(cge__mem_table *t, const void *base, size_t bytes, bool registered);
/* The range starting exactly at `base`, or NULL. */
const rt_host_range *rt_range_find_base(const cge__mem_table *t, const void *base);
/* The range holding all of [ptr, ptr + bytes), or NULL. */
const rt_host_range *rt_range_find_containing(const cge__mem_table *t, const void *ptr, size_t bytes);
void rt_range_remove(cge__mem_table *t, const rt_host_range *r);

#endif
