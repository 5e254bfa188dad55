/* Reference-counted memory blocks, 64-byte aligned: immutable data that
 * several owners share (a graph's constants and its clones', kernels'
 * prepared constant data) and that goes when the last one lets go. */
#ifndef CGE_BASE_SHARED_BLOCK_H
#define CGE_BASE_SHARED_BLOCK_H

#include <stddef.h>
#include <stdint.h>

/* `bytes` fresh bytes (a block even for 0) with one reference, copied from
 * `data` when it is not NULL; NULL when out of memory. */
void *cge__block_new(const void *data, size_t bytes);
/* A block whose data are the bytes [offset, offset + bytes) of the file
 * open as `fd`, mapped in place (private: nothing is written to the file),
 * with no copy; NULL where that cannot be (offset not 64-byte aligned or
 * below 64, the mapping refused): the caller copies instead. The file must
 * hold the range (checked by the caller). */
void *cge__block_map_file(int fd, uint64_t offset, size_t bytes);
void *cge__block_ref(void *block);      /* another reference; returns block */
void cge__block_unref(void *block);     /* NULL is a no-op */

#endif
