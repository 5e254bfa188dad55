/* Generic element access by dtype, for rare-dtype paths and shape inputs. */
#include "ops/kernel_util.h"

#include "cge/runtime.h"

cge_status cge__prepare_parallel(const cge_kernel_ctx *ctx, cge_kernel_fn fn, int64_t num_blocks,
                                 const void *args, size_t args_size)
{
    cge_stream *s = NULL;
    if (num_blocks > 1 && ctx && ctx->device && args_size <= CGE_LAUNCH_MAX_ARGS &&
        cge_stream_create_immediate(ctx->device, &s) == CGE_OK) {
        cge_status st = cge_launch(s, fn, num_blocks, args, args_size);
        cge_status sy = cge_stream_synchronize(s);
        cge_stream_destroy(s);
        return st ? st : sy;
    }
    for (int64_t b = 0; b < num_blocks; b++)
        fn(b, num_blocks, (void *)args);
    return CGE_OK;
}

double cge__load_as_double(cge_dtype dtype, const void *data, int64_t i)
{
    switch (dtype) {
    case CGE_F32: return ((const float *)data)[i];
    case CGE_F64: return ((const double *)data)[i];
    case CGE_F16: return cge_f16_to_f32(((const uint16_t *)data)[i]);
    case CGE_BF16: return cge_bf16_to_f32(((const uint16_t *)data)[i]);
    case CGE_I8: return ((const int8_t *)data)[i];
    case CGE_I16: return ((const int16_t *)data)[i];
    case CGE_I32: return ((const int32_t *)data)[i];
    case CGE_I64: return (double)((const int64_t *)data)[i];
    case CGE_U8: return ((const uint8_t *)data)[i];
    case CGE_U16: return ((const uint16_t *)data)[i];
    case CGE_U32: return ((const uint32_t *)data)[i];
    case CGE_U64: return (double)((const uint64_t *)data)[i];
    case CGE_BOOL: return ((const uint8_t *)data)[i] ? 1.0 : 0.0;
    default: return 0.0;
    }
}

/* Float -> integer conversion of out-of-range values is undefined in C; clamp
 * so that the sanitizer build and the release build agree. */
static double clamp(double v, double lo, double hi)
{
    if (v != v)
        return 0.0;
    return v < lo ? lo : (v > hi ? hi : v);
}

void cge__store_from_double(cge_dtype dtype, void *data, int64_t i, double v)
{
    switch (dtype) {
    case CGE_F32: ((float *)data)[i] = (float)v; break;
    case CGE_F64: ((double *)data)[i] = v; break;
    case CGE_F16: ((uint16_t *)data)[i] = cge_f32_to_f16((float)v); break;
    case CGE_BF16: ((uint16_t *)data)[i] = cge_f32_to_bf16((float)v); break;
    case CGE_I8: ((int8_t *)data)[i] = (int8_t)clamp(v, INT8_MIN, INT8_MAX); break;
    case CGE_I16: ((int16_t *)data)[i] = (int16_t)clamp(v, INT16_MIN, INT16_MAX); break;
    case CGE_I32: ((int32_t *)data)[i] = (int32_t)clamp(v, INT32_MIN, INT32_MAX); break;
    case CGE_I64: ((int64_t *)data)[i] = (int64_t)clamp(v, -9.2233720368547758e18, 9.2233720368547748e18); break;
    case CGE_U8: ((uint8_t *)data)[i] = (uint8_t)clamp(v, 0, UINT8_MAX); break;
    case CGE_U16: ((uint16_t *)data)[i] = (uint16_t)clamp(v, 0, UINT16_MAX); break;
    case CGE_U32: ((uint32_t *)data)[i] = (uint32_t)clamp(v, 0, UINT32_MAX); break;
    case CGE_U64: ((uint64_t *)data)[i] = (uint64_t)clamp(v, 0, 1.8446744073709550e19); break;
    case CGE_BOOL: ((uint8_t *)data)[i] = v != 0.0; break;
    default: break;
    }
}

int64_t cge__load_as_i64(cge_dtype dtype, const void *data, int64_t i)
{
    switch (dtype) {
    case CGE_I8: return ((const int8_t *)data)[i];
    case CGE_I16: return ((const int16_t *)data)[i];
    case CGE_I32: return ((const int32_t *)data)[i];
    case CGE_I64: return ((const int64_t *)data)[i];
    case CGE_U8: return ((const uint8_t *)data)[i];
    case CGE_U16: return ((const uint16_t *)data)[i];
    case CGE_U32: return ((const uint32_t *)data)[i];
    case CGE_U64: return (int64_t)((const uint64_t *)data)[i];
    case CGE_BOOL: return ((const uint8_t *)data)[i] != 0;
    default: return (int64_t)cge__load_as_double(dtype, data, i);
    }
}

cge_status cge__kernel_check_buffer(const cge_kernel_ctx *ctx, const cge_tensor *t,
                                   const char *what)
{
    size_t need = cge_tensor_nbytes(t->dtype, &t->shape);
    if (!cge_shape_is_static(&t->shape))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "%s has a dynamic shape at launch", what);
    if (need > 0 && (!t->data || t->bytes < need))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                "%s: buffer of %zu bytes for %zu needed (or no buffer)", what,
                                t->data ? t->bytes : (size_t)0, need);
    return CGE_OK;
}

typedef struct copy_bytes_args {
    const char *src;
    char *dst;
    int64_t bytes;
} copy_bytes_args;

static void copy_bytes_block(int64_t b, int64_t nb, void *p)
{
    const copy_bytes_args *a = p;
    int64_t lo, hi;
    cge__block_range(a->bytes, b, nb, &lo, &hi);
    if (hi > lo)
        memcpy(a->dst + lo, a->src + lo, (size_t)(hi - lo));
}

cge_status cge__launch_copy_bytes(cge_stream *stream, void *dst, const void *src, int64_t bytes,
                                  int64_t min_block, int num_threads)
{
    if (src == dst || bytes <= 0)
        return CGE_OK;
    copy_bytes_args a = {.src = src, .dst = dst, .bytes = bytes};
    return cge_launch(stream, copy_bytes_block, cge__blocks_for(bytes, min_block, num_threads), &a,
                      sizeof a);
}
