/* String -> int32 hash map with FNV-1a hashing and linear probing; no
 * deletion (graphs only grow while names are looked up). */
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/strmap.h"

uint64_t cge__str_hash(const char *s)
{
    return cge__fnv1a(CGE__FNV1A_SEED, s, strlen(s));
}

void cge__strmap_init(cge__strmap *m) { memset(m, 0, sizeof *m); }

void cge__strmap_free(cge__strmap *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static bool grow(cge__strmap *m)
{
    size_t nc = m->cap ? m->cap * 2 : 64;
    const char **keys = calloc(nc, sizeof *keys);
    int32_t *vals = calloc(nc, sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i])
            continue;
        size_t j = cge__str_hash(m->keys[i]) & (nc - 1);
        while (keys[j])
            j = (j + 1) & (nc - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = nc;
    return true;
}

bool cge__strmap_put(cge__strmap *m, const char *key, int32_t val)
{
    if ((m->count + 1) * 2 > m->cap && !grow(m))
        return false;
    size_t j = cge__str_hash(key) & (m->cap - 1);
    while (m->keys[j]) {
        if (!strcmp(m->keys[j], key)) {
            m->vals[j] = val;
            return true;
        }
        j = (j + 1) & (m->cap - 1);
    }
    m->keys[j] = key;
    m->vals[j] = val;
    m->count++;
    return true;
}

int32_t cge__strmap_get(const cge__strmap *m, const char *key)
{
    if (!m->cap)
        return -1;
    size_t j = cge__str_hash(key) & (m->cap - 1);
    while (m->keys[j]) {
        if (!strcmp(m->keys[j], key))
            return m->vals[j];
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}
