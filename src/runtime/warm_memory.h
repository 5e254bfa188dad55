/* Warm host memory: the bookkeeping arrays a new input signature makes (a
 * plan's tables, an instance's steps and operands) come from memory whose
 * pages are already in, and go back to it, so that a first run at a new
 * size takes no page faults for them. One store per device. */
#ifndef CGE_RUNTIME_WARM_MEMORY_H
#define CGE_RUNTIME_WARM_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "cge/runtime.h"

typedef struct cge__warm cge__warm;

typedef struct cge__warm_stats {
    int64_t chunks;          /* mappings made */
    size_t mapped_bytes;     /* their bytes */
    size_t populated_bytes;  /* of those, faulted in when mapped (cge__warm_reserve) */
    int64_t allocs;          /* blocks handed out */
    int64_t reused;          /* of those, blocks freed before and handed out again */
    /* Bytes handed out from pages nobody had touched (a chunk mapped on
     * demand, not reserved): what the caller's first writes fault in. */
    size_t cold_bytes;
    size_t live_bytes;       /* handed out and not freed (block sizes) */
    size_t peak_live_bytes;
} cge__warm_stats;

/* The device's store (created with the device; NULL: plain malloc). */
cge__warm *cge__device_warm(cge_device *dev);

cge__warm *cge__warm_create(void);
/* The store goes once the last of its blocks is freed: a plan may outlive
 * the device its arrays came from. */
void cge__warm_release(cge__warm *w);

/* n * size zeroed bytes, 64-byte aligned; NULL when out of memory. A NULL
 * store allocates from the C heap (still freed with cge__warm_free). */
void *cge__warm_calloc(cge__warm *w, size_t n, size_t size);
/* Any block of cge__warm_calloc (NULL: nothing). */
void cge__warm_free(void *p);

/* Makes sure that at least `bytes` of blocks can be handed out without
 * touching a new page: maps and faults in a chunk now if the free room is
 * smaller. For a caller that knows what is coming (a session after its
 * first signature), outside the runs it times. */
cge_status cge__warm_reserve(cge__warm *w, size_t bytes);

void cge__warm_get_stats(cge__warm *w, cge__warm_stats *out);

/* Faults in [p, p + bytes) for writing now, in one call where the kernel
 * can (MADV_POPULATE_WRITE), else a write per page. */
void cge__prefault(void *p, size_t bytes);

#endif
