/* A string -> int32 hash map (open addressing, linear probing) for name
 * lookups in graphs and sessions. Keys are not copied: they must outlive the
 * map or be removed first. */
#ifndef CGE_BASE_STRMAP_H
#define CGE_BASE_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cge__strmap {
    const char **keys;
    int32_t *vals;
    size_t cap;     /* power of two, or 0 */
    size_t count;
} cge__strmap;

void cge__strmap_init(cge__strmap *m);
void cge__strmap_free(cge__strmap *m);
/* Insert or replace; false only when out of memory. */
bool cge__strmap_put(cge__strmap *m, const char *key, int32_t val);
/* The value, or -1 if absent. */
int32_t cge__strmap_get(const cge__strmap *m, const char *key);
uint64_t cge__str_hash(const char *s);

#endif
