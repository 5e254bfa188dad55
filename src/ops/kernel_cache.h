/* The cache behind cge_kernel_shared_get: constant data kernels derive at
 * prepare (packed weights), shared by the plans of one session graph. */
#ifndef CGE_OPS_KERNEL_CACHE_H
#define CGE_OPS_KERNEL_CACHE_H

#include "cge/op.h"

cge_status cge__kernel_cache_create(cge_kernel_cache **out);
/* Releases the cache's references; blocks still held by kernels live on
 * until they are released. NULL is a no-op. */
void cge__kernel_cache_destroy(cge_kernel_cache *c);
/* Declare [data, data + bytes) constant and alive as long as the cache:
 * only data in such ranges is a source worth sharing (another address may
 * be freed and reused for other bytes). */
cge_status cge__kernel_cache_add_stable(cge_kernel_cache *c, const void *data, size_t bytes);
/* The session's communicator (a cge_dist_comm, cge/dist.h), carried here
 * because the cache is what a kernel's prepare already gets from its session:
 * the cge.dist kernels read it; NULL outside a session or without
 * distribution (a world of one). */
void cge__kernel_cache_set_comm(cge_kernel_cache *c, void *comm);
void *cge__kernel_ctx_comm(const cge_kernel_ctx *ctx);

#endif
