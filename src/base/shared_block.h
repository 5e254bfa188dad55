/* Reference-counted memory blocks, 64-byte aligned: immutable data that
 * several owners share (a graph's constants and its clones', kernels'
 * prepared constant data) and that goes when the last one lets go. */
#ifndef CGE_BASE_SHARED_BLOCK_H
#define CGE_BASE_SHARED_BLOCK_H

#include <stddef.h>

/* `bytes` fresh bytes (a block even for 0) with one reference, copied from
 * `data` when it is not NULL; NULL when out of memory. */
void *cge__block_new(const void *data, size_t bytes);
void *cge__block_ref(void *block);      /* another reference; returns block */
void cge__block_unref(void *block);     /* NULL is a no-op */

#endif
