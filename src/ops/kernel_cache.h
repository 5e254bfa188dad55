/* The cache behind cge_kernel_shared_get: constant data kernels derive at
 * prepare (packed weights), shared by the plans of one session graph. */
#ifndef CGE_OPS_KERNEL_CACHE_H
#define CGE_OPS_KERNEL_CACHE_H

#include <stdbool.h>

#include "cge/op.h"

cge_status cge__kernel_cache_create(cge_kernel_cache **out);
/* Releases the cache's references; blocks still held by kernels live on
 * until they are released. NULL is a no-op. */
void cge__kernel_cache_destroy(cge_kernel_cache *c);
/* Declare [data, data + bytes) constant and alive as long as the cache:
 * only data in such ranges is a source worth sharing (another address may
 * be freed and reused for other bytes). */
cge_status cge__kernel_cache_add_stable(cge_kernel_cache *c, const void *data, size_t bytes);
/* The same for every constant of `g` (not of its nested graphs) that has
 * its bytes: a graph whose constants stay as they are while the cache's
 * users live (a session's graph, the optimised one a plan or a node-by-node
 * instance keeps, whose folded and widened constants live nowhere else). */
cge_status cge__kernel_cache_add_graph_constants(cge_kernel_cache *c, const cge_graph *g);
/* Called from a builtin kernel's prepare: this node's launches never read
 * constant input `input` (0-63) again, only what prepare derived from it (a
 * packed copy), so the session may free the constant's bytes once no other
 * node reads them. Recorded in the bits the caller of prepare watches on
 * this thread (cge__kernel_watch_packed; NULL: nobody asks, nothing kept). */
void cge__kernel_input_packed(const cge_kernel_ctx *ctx, int32_t input);
void cge__kernel_watch_packed(uint64_t *bits);
/* A stronger promise, made beside cge__kernel_input_packed: a prepare of
 * this node at any shapes of its other inputs asks the cache for the same
 * block (keyed by input `input`'s address and its own shape only), so that
 * the session may free the constant's bytes even under a node that
 * prepares again at every run (a node-by-node run whose row count follows
 * values), keeping its address reserved (cge__kernel_cache_retire).
 * Recorded in the bits watched by cge__kernel_watch_packed_any_shape. */
void cge__kernel_input_packed_any_shape(const cge_kernel_ctx *ctx, int32_t input);
void cge__kernel_watch_packed_any_shape(uint64_t *bits);
/* cge_kernel_shared_get for a fill that shares its work out over the core
 * pool (cge__prepare_parallel) and makes each part's pages itself
 * (cge__block_populate): the block comes with no pages yet, so the kernel's
 * zeroing of them runs on every core, not in one call before the fill. */
cge_status cge__kernel_shared_get_parallel(const cge_kernel_ctx *ctx, const void *src,
                                           const void *key, size_t key_bytes, size_t bytes,
                                           cge_status (*fill)(void *dst, void *user),
                                           void *user, void **out);
/* Every entry (source, key, block), in the order they were made, for a
 * model file that stores packed weights (model_save.c); the lock is held. */
typedef void (*cge__kernel_cache_visit)(void *user, const void *src, const void *key,
                                        size_t key_bytes, void *block, size_t bytes);
void cge__kernel_cache_each(cge_kernel_cache *c, cge__kernel_cache_visit fn, void *user);
/* An entry made elsewhere (a packed weight read from a model file): a later
 * cge_kernel_shared_get for the same source, key and size returns `block`
 * (a reference is taken) instead of filling one. `src` must lie in a stable
 * range for it to be found. */
cge_status cge__kernel_cache_seed(cge_kernel_cache *c, const void *src, const void *key,
                                  size_t key_bytes, void *block, size_t bytes);
/* Bytes of the blocks kernels made through this cache (packed weights). */
size_t cge__kernel_cache_made_bytes(const cge_kernel_cache *c);
/* [data, data + bytes) is about to be freed (a constant released after
 * packing): it is no longer stable, and blocks derived from it are no longer
 * found (kernels holding them keep them). */
void cge__kernel_cache_forget(cge_kernel_cache *c, const void *data, size_t bytes);
/* [data, data + bytes) is a constant whose bytes are gone but whose address
 * stays reserved (cge__block_discard_pages): blocks derived from it are
 * still found, and a lookup that finds none fails with an error instead of
 * filling from the missing bytes. cge__kernel_cache_forget ends it (before
 * the address is unmapped). */
cge_status cge__kernel_cache_retire(cge_kernel_cache *c, const void *data, size_t bytes);
/* How a kernel's prepared block gives back the source bytes it was made
 * from (a packed matrix unpacked): writes them at `src`, as the source was
 * when the block was filled, the key being the one the block was found by. */
typedef void (*cge__kernel_restore_fn)(const void *block, void *src, const void *key,
                                       size_t key_bytes);
/* Called from a prepare that got `block` from the cache: it can be
 * restored (above). A retired source whose every block can be restored may
 * be revived (cge__kernel_cache_revive). */
void cge__kernel_shared_set_restore(const cge_kernel_ctx *ctx, const void *block,
                                    cge__kernel_restore_fn restore);
/* Whether every block derived from [data, data + bytes) can write its part
 * of the source back (and there is one). */
bool cge__kernel_cache_restorable(cge_kernel_cache *c, const void *data, size_t bytes);
/* A retired source whose pages are mapped again (cge__block_restore_pages):
 * every block derived from it writes its part back, and the range is no
 * longer retired (lookups may fill from it again). A [kernel] error, and
 * nothing written, where a block cannot (cge__kernel_cache_restorable). */
cge_status cge__kernel_cache_revive(cge_kernel_cache *c, void *data, size_t bytes);
/* A range retired whose bytes were not given back after all: no longer
 * retired, nothing written. */
void cge__kernel_cache_unretire(cge_kernel_cache *c, const void *data, size_t bytes);
/* Whether `src` lies in such a range: constant data a kernel's prepare may
 * derive from once (false outside a session). */
bool cge__kernel_data_is_stable(const cge_kernel_ctx *ctx, const void *src);
/* The session's communicator (a cge_dist_comm, cge/dist.h), carried here
 * because the cache is what a kernel's prepare already gets from its session:
 * the cge.dist kernels read it; NULL outside a session or without
 * distribution (a world of one). */
void cge__kernel_cache_set_comm(cge_kernel_cache *c, void *comm);
void *cge__kernel_ctx_comm(const cge_kernel_ctx *ctx);

#endif
