/* FNV-1a, the one byte hash of the engine: name maps, kernel-cache keys,
 * collective signatures and shard names all hash with it. */
#ifndef CGE_BASE_HASH_H
#define CGE_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define CGE__FNV1A_SEED 1469598103934665603ull

/* h folded with n bytes at p; start from CGE__FNV1A_SEED (or a seed mixed
 * with it) and chain calls to hash several fields. */
static inline uint64_t cge__fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

#endif
