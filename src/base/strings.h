/* String tensors' bytes: packing elements and bytes into one self-contained
 * block (constants, attributes, folded values), and the string store, a bump
 * allocator kept across resets, where kernels write the strings they make. */
#ifndef CGE_BASE_STRINGS_H
#define CGE_BASE_STRINGS_H

#include <stdbool.h>
#include <stddef.h>

#include "cge/types.h"

/* Bytes of the packed form of `n` elements: the elements (16 bytes each),
 * then every element's bytes, back to back. SIZE_MAX if an element is
 * malformed (negative size, NULL data with a non-zero size) or the sum
 * overflows CGE_MAX_TENSOR_BYTES. */
size_t cge__strings_packed_size(const cge_string *elems, int64_t n);
/* Writes the packed form into `dst` (8-byte aligned, packed_size bytes):
 * the elements' data point into dst, so the block owns every byte it
 * refers to and can be freed as one. `elems` may not overlap `dst`. */
void cge__strings_pack(void *dst, const cge_string *elems, int64_t n);
/* A malloc'd packed copy (free() it); NULL when out of memory or malformed. */
void *cge__strings_pack_dup(const cge_string *elems, int64_t n, size_t *bytes);
/* Elements a and b hold the same bytes. */
bool cge__string_equal(const cge_string *a, const cge_string *b);

/* Reset keeps the chunks, so a node that writes the same amount each run
 * allocates nothing after its first. Not thread-safe: one writer at a time. */
typedef struct cge__strstore cge__strstore;
cge__strstore *cge__strstore_create(void);         /* NULL when out of memory */
void cge__strstore_destroy(cge__strstore *s);      /* NULL is a no-op */
/* Forget every string (the memory stays for the next writer). */
void cge__strstore_reset(cge__strstore *s);
/* `size` bytes that live until the next reset or destroy, copied from `src`
 * when it is not NULL; NULL when out of memory. A 0-byte request gives a
 * valid non-NULL pointer. */
char *cge__strstore_alloc(cge__strstore *s, size_t size, const void *src);
/* Bytes held in chunks (for tests: a steady state does not grow it). */
size_t cge__strstore_capacity(const cge__strstore *s);

#endif
