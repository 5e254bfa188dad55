/* Small helpers shared by the builtin kernels: splitting work into SPMD
 * blocks, and reading/writing any dtype as double (the slow generic path used
 * for rare dtypes; hot paths are typed). */
#ifndef CGE_OPS_KERNEL_UTIL_H
#define CGE_OPS_KERNEL_UTIL_H

#include <string.h>

#include "cge/op.h"

/* Compile a hot function for several instruction sets, picked at load time.
 * Not under ThreadSanitizer: the ifunc resolvers run during relocation, before
 * the TSan runtime is up, and crash the program. */
#if defined(__SANITIZE_THREAD__)
#define CGE_TARGET_CLONES
#else
#define CGE_TARGET_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif

/* For meta functions: whether optional input i is present, and its value
 * when it is known now (a constant, or a run-time value in eager runs). */
static inline bool cge__meta_has_input(const cge_infer_ctx *ctx, int32_t i)
{
    return i < ctx->num_inputs && ctx->inputs[i].dtype != CGE_DTYPE_UNDEFINED;
}

static inline const void *cge__meta_input_value(const cge_infer_ctx *ctx, int32_t i)
{
    if (!cge__meta_has_input(ctx, i) || !ctx->input_values)
        return NULL;
    return ctx->input_values[i];
}

/* For kernels: whether optional input i is present with a buffer. */
static inline bool cge__kernel_has_input(const cge_kernel_ctx *ctx, int32_t i)
{
    return i < ctx->num_inputs && ctx->inputs[i].dtype != CGE_DTYPE_UNDEFINED &&
           ctx->inputs[i].data;
}

/* Blocks for `work` items when each block should get at least `min_per_block`
 * items: between 1 and 4 * num_threads (to balance uneven blocks). */
static inline int64_t cge__blocks_for(int64_t work, int64_t min_per_block, int num_threads)
{
    if (work <= 0 || min_per_block <= 0)
        return 1;
    int64_t nb = (work + min_per_block - 1) / min_per_block;
    int64_t cap = (int64_t)(num_threads > 0 ? num_threads : 1) * 4;
    if (nb > cap)
        nb = cap;
    return nb < 1 ? 1 : nb;
}

/* The [begin, end) range of block `b` of `nb` over `work` items. */
static inline void cge__block_range(int64_t work, int64_t b, int64_t nb, int64_t *begin,
                                   int64_t *end)
{
    int64_t q = work / nb, r = work % nb;
    *begin = b * q + (b < r ? b : r);
    *end = *begin + q + (b < r ? 1 : 0);
}

/* Copies `bytes` from src to dst (not overlapping) on `stream`, split into
 * blocks of at least `min_block` bytes over the core pool; nothing when the
 * two are one buffer (the planner aliased them) or bytes is 0. */
cge_status cge__launch_copy_bytes(cge_stream *stream, void *dst, const void *src, int64_t bytes,
                                  int64_t min_block, int num_threads);

/* For prepare's one-off work (packing a constant weight): runs fn's blocks
 * over the core pool of ctx's device and returns when all are done. Safe
 * from inside a running task (an immediate stream: the calling thread works
 * too); without a device, the blocks run here in order. The blocks must
 * write disjoint bytes, so the result never depends on the split. */
cge_status cge__prepare_parallel(const cge_kernel_ctx *ctx, cge_kernel_fn fn, int64_t num_blocks,
                                 const void *args, size_t args_size);

/* c ? a : b on the bits. gcc (with its default -ftrapping-math) will not
 * if-convert a loop where float arithmetic feeds a conditional, which keeps
 * such loops scalar; this select it vectorises. */
#define CGE__DEF_SELECT(NAME, T, U)                                                      \
    static inline T NAME(int c, T a, T b)                                                \
    {                                                                                    \
        U ia, ib, m = (U)0 - (U)(c != 0);                                                \
        memcpy(&ia, &a, sizeof ia);                                                      \
        memcpy(&ib, &b, sizeof ib);                                                      \
        U r = (ia & m) | (ib & ~m);                                                      \
        T f;                                                                             \
        memcpy(&f, &r, sizeof f);                                                        \
        return f;                                                                        \
    }
CGE__DEF_SELECT(cge__select_f32, float, uint32_t)
CGE__DEF_SELECT(cge__select_f64, double, uint64_t)

/* The first check of a meta (ERR = cge_meta_error) or a kernel (cge_kernel_error):
 * the op's input and output counts, WHAT in words ("1 input and 1 output"). */
#define CGE__CHECK_COUNTS(CTX, ERR, IN_MIN, IN_MAX, OUT_MIN, OUT_MAX, WHAT)              \
    do {                                                                                 \
        if ((CTX)->num_inputs < (IN_MIN) || (CTX)->num_inputs > (IN_MAX) ||              \
            (CTX)->num_outputs < (OUT_MIN) || (CTX)->num_outputs > (OUT_MAX))            \
            return ERR((CTX), CGE_ERR_INVALID_ARG, "expects " WHAT ", got %d and %d",    \
                       (CTX)->num_inputs, (CTX)->num_outputs);                           \
    } while (0)

/* A launch-time check every kernel relies on: `t` has a static shape and a
 * buffer large enough for it (a [kernel] error naming `what` otherwise). */
cge_status cge__kernel_check_buffer(const cge_kernel_ctx *ctx, const cge_tensor *t,
                                   const char *what);

/* Element i of a buffer of `dtype`, as double (bool -> 0/1). */
double cge__load_as_double(cge_dtype dtype, const void *data, int64_t i);
/* Store v into element i, converting as C casts do (float->int truncates;
 * bool is v != 0; f16/bf16 round to nearest even). */
void cge__store_from_double(cge_dtype dtype, void *data, int64_t i, double v);
/* Element i as int64 (for index/shape inputs of any integer dtype). */
int64_t cge__load_as_i64(cge_dtype dtype, const void *data, int64_t i);

#endif
