/* Reference-counted blocks (see shared_block.h): a 64-byte header holding
 * the count and how the block was made, then the data, so the data keeps
 * the block's alignment. Large blocks are mapped pages of their own, or a
 * file's pages mapped in place. */
#include "base/shared_block.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HEADER 64

/* From this size blocks are mmap'd: freeing one gives its pages back at
 * once. From malloc they could stay in the heap (glibc raises its mmap
 * threshold as large chunks are freed), and weights freed once packed
 * would still count in the process's memory. 128 KiB (glibc's first mmap
 * threshold), not larger: a transformer's projections of d 256 are 256 KiB
 * to 1 MiB each, and their pages are what a symbolic graph gives back once
 * packed (cge__block_discard_pages_held). */
#define MAP_FROM ((size_t)128 << 10)

typedef struct header {
    int64_t refs;
    size_t mapped;          /* bytes mapped from `base`, 0: malloc'd */
    void *base;
} header;

static void *block_make(const void *data, size_t bytes, bool populate)
{
    size_t size = bytes ? bytes : 1;
    if (size > SIZE_MAX - 2 * HEADER - 4096)
        return NULL;
    size = ((size + 63) & ~(size_t)63) + HEADER;
    char *p = NULL;
    size_t mapped = 0;
    if (size >= MAP_FROM) {
        size_t len = (size + 4095) & ~(size_t)4095;
        /* Populated at once: every block is written whole right away, and
         * one call that maps every page costs less than a fault per page
         * (vit_b_16's session creation measured 5-25% faster). A block
         * filled by several threads populates its parts from each of them
         * instead (cge__block_populate): the kernel's page clearing, most
         * of a session's creation, then runs on every core. */
        void *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | (populate ? MAP_POPULATE : 0), -1, 0);
        if (m != MAP_FAILED) {
            p = m;
            mapped = len;
        }
    }
    if (!p && !(p = aligned_alloc(64, size)))
        return NULL;
    header *h = (header *)p;
    __atomic_store_n(&h->refs, 1, __ATOMIC_RELAXED);
    h->mapped = mapped;
    h->base = p;
    if (data && bytes)
        memcpy(p + HEADER, data, bytes);
    return p + HEADER;
}

void *cge__block_new(const void *data, size_t bytes) { return block_make(data, bytes, true); }

void *cge__block_new_unpopulated(size_t bytes) { return block_make(NULL, bytes, false); }

void cge__block_populate(void *data, size_t bytes)
{
#ifdef MADV_POPULATE_WRITE
    uintptr_t lo = ((uintptr_t)data + 4095) & ~(uintptr_t)4095;
    uintptr_t hi = ((uintptr_t)data + bytes) & ~(uintptr_t)4095;
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE); /* advice: a failure faults later */
#else
    (void)data, (void)bytes;
#endif
}

bool cge__block_is_mapped(const void *block)
{
    return block && ((const header *)((const char *)block - HEADER))->mapped != 0;
}

/* The whole pages of a mapped block's data, up to the mapping's end (the
 * header's page, before the data, stays); false when there are none. */
static bool data_pages(void *block, uintptr_t *lo, uintptr_t *hi)
{
    header *h = (header *)((char *)block - HEADER);
    long page = sysconf(_SC_PAGESIZE);
    if (!h->mapped || page <= 0)
        return false;
    *lo = ((uintptr_t)block + (uintptr_t)page - 1) & ~(uintptr_t)(page - 1);
    *hi = ((uintptr_t)h->base + h->mapped) & ~(uintptr_t)(page - 1);
    return *hi > *lo;
}

bool cge__block_discard_pages_held(void *block, int64_t holders)
{
    if (!block)
        return false;
    header *h = (header *)((char *)block - HEADER);
    uintptr_t lo, hi;
    /* another holder (a caller's graph sharing the block) still reads it */
    if (__atomic_load_n(&h->refs, __ATOMIC_ACQUIRE) != holders || !data_pages(block, &lo, &hi))
        return false;
    /* A fresh inaccessible mapping over them: the old pages (anonymous or a
     * file's) go at once, and the range is still this block's to unmap. */
    void *m = mmap((void *)lo, hi - lo, PROT_NONE,
                   MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return m != MAP_FAILED;
}

bool cge__block_discard_pages(void *block) { return cge__block_discard_pages_held(block, 1); }

bool cge__block_restore_pages(void *block)
{
    uintptr_t lo, hi;
    if (!block || !data_pages(block, &lo, &hi))
        return false;
    void *m = mmap((void *)lo, hi - lo, PROT_READ | PROT_WRITE,
                   MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return m != MAP_FAILED;
}

void *cge__block_ref(void *block)
{
    if (block)
        __atomic_fetch_add(&((header *)((char *)block - HEADER))->refs, 1, __ATOMIC_RELAXED);
    return block;
}

void cge__block_unref(void *block)
{
    if (!block)
        return;
    header *h = (header *)((char *)block - HEADER);
    if (__atomic_sub_fetch(&h->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    if (h->mapped)
        munmap(h->base, h->mapped);
    else if (h->base)
        free(h);
}

void *cge__block_borrow(void *data)
{
    if (!data || (uintptr_t)data % 64)
        return NULL;
    header *h = (header *)((char *)data - HEADER);
    __atomic_store_n(&h->refs, 1, __ATOMIC_RELAXED);
    h->mapped = 0;
    h->base = NULL;   /* nothing to free: the memory is its owner's */
    return data;
}

void *cge__block_map_file(int fd, uint64_t offset, size_t bytes)
{
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || fd < 0 || !bytes || offset % 8 || offset < HEADER ||
        offset > (uint64_t)INT64_MAX - bytes)
        return NULL;
    /* The header goes in the 64 bytes before the data: their page becomes
     * a private copy when written; the data's pages stay the file's. A
     * mapping of its own per block, so that no other block sees it. An
     * offset that is a multiple of 8 keeps the header's counters aligned
     * and suits every element type: onnx's external data puts most large
     * tensors at 32-byte offsets (vit_l_16: 72 of its 99 tensors of 256 KiB
     * and more, 1 GiB that was copied when 64 was asked). */
    uint64_t start = (offset - HEADER) & ~(uint64_t)(page - 1);
    size_t len = (size_t)(offset + bytes - start);
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, (off_t)start);
    if (m == MAP_FAILED)
        return NULL;
    char *data = (char *)m + (offset - start);
    header *h = (header *)(data - HEADER);
    __atomic_store_n(&h->refs, 1, __ATOMIC_RELAXED);
    h->mapped = len;
    h->base = m;
    return data;
}
