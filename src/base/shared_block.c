/* Reference-counted blocks (see shared_block.h): a 64-byte header holding
 * the count, then the data, so the data keeps the block's alignment. */
#include "base/shared_block.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HEADER 64

void *cge__block_new(const void *data, size_t bytes)
{
    size_t size = bytes ? bytes : 1;
    if (size > SIZE_MAX - 2 * HEADER)
        return NULL;
    size = ((size + 63) & ~(size_t)63) + HEADER;
    char *p = aligned_alloc(64, size);
    if (!p)
        return NULL;
    __atomic_store_n((int64_t *)p, 1, __ATOMIC_RELAXED);
    if (data && bytes)
        memcpy(p + HEADER, data, bytes);
    return p + HEADER;
}

void *cge__block_ref(void *block)
{
    if (block)
        __atomic_fetch_add((int64_t *)((char *)block - HEADER), 1, __ATOMIC_RELAXED);
    return block;
}

void cge__block_unref(void *block)
{
    if (block && __atomic_sub_fetch((int64_t *)((char *)block - HEADER), 1, __ATOMIC_ACQ_REL) == 0)
        free((char *)block - HEADER);
}
