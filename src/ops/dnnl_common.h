/* oneDNN glue shared by the float32 / bf16 convolution (dnnl_conv.c), int8
 * convolution and matmul (dnnl_qconv.c) and bf16 matmul (matmul_bf16.c)
 * wrappers: OpenMP thread scope, reorders, memory binding, weight packing
 * into cge's shared cache and implementation choice. Including it includes
 * oneDNN's own header (when the build has it): only the wrappers do.
 * cge__dnnl_available (dnnl_conv.h) is defined here too. */
#ifndef CGE_OPS_DNNL_COMMON_H
#define CGE_OPS_DNNL_COMMON_H

#include <stddef.h>

#include "cge/op.h"
#include "cge/status.h"

#ifdef CGE_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>

/* The calling thread's OpenMP thread count set to `threads` (< 1: 1) for one
 * oneDNN call; cge__dnnl_omp_leave gives the caller's setting back, so that
 * neither oneDNN's scratch sizing nor the caller's own OpenMP code (PyTorch
 * on the same thread) sees another's. libgomp comes with oneDNN; its
 * functions are looked up rather than linked so that cge needs no OpenMP
 * flags. */
int cge__dnnl_omp_enter(int threads);
void cge__dnnl_omp_leave(int saved);

/* A reorder primitive from one layout to another on engine e; 0 on failure. */
int cge__dnnl_make_reorder(dnnl_engine_t e, const dnnl_memory_desc_t *from,
                           const dnnl_memory_desc_t *to, dnnl_primitive_t *out);
/* Bytes of the scratchpad reorder r needs (its caller gives it: user mode);
 * 0 for most layouts, a Winograd weights transform's is W transformed. */
size_t cge__dnnl_reorder_scratch_size(const_dnnl_primitive_t r);
/* Enqueue reorder r from -> to on s (no wait; a reorder with a scratchpad
 * runs on a buffer of its own for this call and waits); 0 on failure. */
int cge__dnnl_run_reorder(dnnl_stream_t s, dnnl_primitive_t r, dnnl_memory_t from,
                          dnnl_memory_t to);

/* The memory for one argument: `own` over the caller's plain buffer when
 * oneDNN chose the plain layout (no reorders made), else a buffer of its own
 * plus `user`, a wrapper of the plain one, and the reorders between them
 * (to_own: plain -> chosen, from_own: back; either may be NULL). */
int cge__dnnl_bind(dnnl_engine_t e, const dnnl_memory_desc_t *plain,
                   const dnnl_memory_desc_t *chosen, dnnl_memory_t *own, dnnl_memory_t *user,
                   dnnl_primitive_t *to_own, dnnl_primitive_t *from_own);

/* A constant W reordered by r_wei into `chosen`, the primitive's layout, in
 * a block of ctx's shared cache (cge_kernel_shared_get), so that primitives
 * of one session graph that chose the same layout share one. `src` is the
 * constant's data (the cache's identity), `data` what is reordered (src
 * itself, or a copy derived from it: then `key` must tell the derivations
 * apart), read through `user`, a memory of W's plain layout; `key` (NULL:
 * `chosen` itself) holds everything else the bytes depend on. *block gets
 * the block (release it with cge_kernel_shared_release) and *mem a memory
 * over it. Runs with `threads` OpenMP threads. */
cge_status cge__dnnl_pack_shared(const cge_kernel_ctx *ctx, dnnl_engine_t e, dnnl_stream_t s,
                                 dnnl_primitive_t r_wei, dnnl_memory_t user,
                                 const dnnl_memory_desc_t *chosen, const void *src,
                                 const void *data, const void *key, size_t key_bytes,
                                 int threads, void **block, dnnl_memory_t *mem);

/* Counts one reorder of constant weights (cge__dnnl_weight_reorders). */
void cge__dnnl_count_weight_reorder(void);

/* The primitive descriptor for op_desc: oneDNN's first choice, or, with
 * `avoid` set, the first implementation whose name does not contain it (the
 * first choice when every one does). */
dnnl_status_t cge__dnnl_pd_create(dnnl_primitive_desc_t *out, const_dnnl_op_desc_t op_desc,
                                  const_dnnl_primitive_attr_t attr, dnnl_engine_t e,
                                  const char *avoid);
#endif

#endif
