/* A string -> int32 hash map (open addressing, linear probing) for name
 * lookups in graphs and sessions. Keys are not copied: they must outlive the
 * map or be removed first. */
#ifndef CGE_BASE_STRMAP_H
#define CGE_BASE_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cge_strmap {
    const char **keys;
    int32_t *vals;
    size_t cap;     /* power of two, or 0 */
    size_t count;
} cge_strmap;

void cge_strmap_init(cge_strmap *m);
void cge_strmap_free(cge_strmap *m);
/* Insert or replace; false only when out of memory. */
bool cge_strmap_put(cge_strmap *m, const char *key, int32_t val);
/* The value, or -1 if absent. */
int32_t cge_strmap_get(const cge_strmap *m, const char *key);
uint64_t cge_str_hash(const char *s);

#endif
