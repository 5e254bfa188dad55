/* Reference-counted memory blocks, 64-byte aligned: immutable data that
 * several owners share (a graph's constants and its clones', kernels'
 * prepared constant data) and that goes when the last one lets go. */
#ifndef CGE_BASE_SHARED_BLOCK_H
#define CGE_BASE_SHARED_BLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* `bytes` fresh bytes (a block even for 0) with one reference, copied from
 * `data` when it is not NULL; NULL when out of memory. */
void *cge__block_new(const void *data, size_t bytes);
/* The same, not copied from anything, and with large blocks' pages not made
 * yet: for a block that several threads fill at once, each first calling
 * cge__block_populate on its part, so that the kernel's zeroing of fresh
 * pages is shared out too (the pages' contents are zero either way). */
void *cge__block_new_unpopulated(size_t bytes);
/* Makes the pages wholly inside [data, data + bytes) resident now, in one
 * call rather than a fault per page; only advice (a no-op on malloc'd
 * memory that is resident already, or where the system lacks it). */
void cge__block_populate(void *data, size_t bytes);
/* A block whose data are the bytes [offset, offset + bytes) of the file
 * open as `fd`, mapped in place (private: nothing is written to the file),
 * with no copy, 8-byte aligned (not 64 as other blocks: kernels assume no
 * more than their element's alignment); NULL where that cannot be (offset
 * not a multiple of 8 or below 64, the mapping refused): the caller copies
 * instead. The file must hold the range (checked by the caller). */
void *cge__block_map_file(int fd, uint64_t offset, size_t bytes);
/* A block over memory someone else owns (a loaded model file's packed
 * weights): `data` is 64-byte aligned and the 64 writable bytes before it
 * become the header; the last unref frees nothing, so the owner must
 * outlive every reference. NULL if data is NULL or misaligned. */
void *cge__block_borrow(void *data);
/* Gives the pages wholly inside a mapped block's data back to the system
 * while the block lives on: its address range stays reserved (no later
 * allocation can land there) but reading it faults. For a weight whose
 * packed copy is found by the source's address (kernel_cache.h,
 * cge__kernel_cache_retire), by the holder of its only reference. false,
 * and nothing done, for a block from the heap (under 128 KiB), a borrowed
 * one, or one that someone else holds too. */
bool cge__block_discard_pages(void *block);
/* The same for a block with exactly `holders` references, all of them the
 * caller's (a session's graphs sharing one weight): false, and nothing
 * done, when it has any other. */
bool cge__block_discard_pages_held(void *block, int64_t holders);
/* Undoes cge__block_discard_pages: the pages it gave back are mapped again,
 * readable and writable, zero-filled, for the caller to write the bytes
 * back (kernel_cache.h, cge__kernel_cache_revive). false where the block
 * is not mapped or the system refuses the mapping. */
bool cge__block_restore_pages(void *block);
/* Whether the block is mapped pages of its own (cge__block_discard_pages
 * can give them back). */
bool cge__block_is_mapped(const void *block);
void *cge__block_ref(void *block);      /* another reference; returns block */
void cge__block_unref(void *block);     /* NULL is a no-op */

#endif
