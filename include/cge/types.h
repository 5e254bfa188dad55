/* Element types, shapes (rank <= 8, dynamic dimensions) and the plain tensor
 * view (descriptor + data pointer) shared by kernels and sessions. */
#ifndef CGE_TYPES_H
#define CGE_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cge/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Values follow ONNX's TensorProto.DataType so that importers map 1:1. */
typedef enum cge_dtype {
    CGE_DTYPE_UNDEFINED = 0,
    CGE_F32 = 1,
    CGE_U8 = 2,
    CGE_I8 = 3,
    CGE_U16 = 4,
    CGE_I16 = 5,
    CGE_I32 = 6,
    CGE_I64 = 7,
    CGE_BOOL = 9,
    CGE_F16 = 10,
    CGE_F64 = 11,
    CGE_U32 = 12,
    CGE_U64 = 13,
    CGE_BF16 = 16,
    CGE_DTYPE_MAX = 17
} cge_dtype;

/* A set of dtypes, for schemas and kernel constraints: CGE_DT(CGE_F32) | ... */
typedef uint32_t cge_dtype_set;
#define CGE_DT(t) ((cge_dtype_set)1u << (t))
#define CGE_DT_FLOAT (CGE_DT(CGE_F32) | CGE_DT(CGE_F16) | CGE_DT(CGE_BF16) | CGE_DT(CGE_F64))
#define CGE_DT_SIGNED_INT (CGE_DT(CGE_I8) | CGE_DT(CGE_I16) | CGE_DT(CGE_I32) | CGE_DT(CGE_I64))
#define CGE_DT_UNSIGNED_INT (CGE_DT(CGE_U8) | CGE_DT(CGE_U16) | CGE_DT(CGE_U32) | CGE_DT(CGE_U64))
#define CGE_DT_INT (CGE_DT_SIGNED_INT | CGE_DT_UNSIGNED_INT)
#define CGE_DT_NUMERIC (CGE_DT_FLOAT | CGE_DT_INT)
#define CGE_DT_ALL (CGE_DT_NUMERIC | CGE_DT(CGE_BOOL))

size_t cge_dtype_size(cge_dtype t);           /* bytes per element; 0 if invalid */
const char *cge_dtype_name(cge_dtype t);      /* "float32"; "invalid" if unknown */
bool cge_dtype_valid(cge_dtype t);
bool cge_dtype_is_float(cge_dtype t);
bool cge_dtype_is_int(cge_dtype t);           /* signed or unsigned integer */
bool cge_dtype_is_signed(cge_dtype t);        /* signed int or float */
/* Parse "float32", "f32", "int64", ...; returns CGE_DTYPE_UNDEFINED if unknown. */
cge_dtype cge_dtype_from_name(const char *name);

/* Half-precision conversions (round to nearest even). */
float cge_f16_to_f32(uint16_t h);
uint16_t cge_f32_to_f16(float f);
float cge_bf16_to_f32(uint16_t h);
uint16_t cge_f32_to_bf16(float f);

#define CGE_MAX_RANK 8
/* A dimension whose size is not known until run time. */
#define CGE_DIM_DYNAMIC ((int64_t)-1)

typedef struct cge_shape {
    int32_t rank;                  /* 0 .. CGE_MAX_RANK; rank 0 is a scalar */
    int64_t dims[CGE_MAX_RANK];    /* >= 0 known, CGE_DIM_DYNAMIC unknown */
} cge_shape;

#define CGE_SHAPE_NARGS_(a1, a2, a3, a4, a5, a6, a7, a8, n, ...) n
#define CGE_SHAPE_NARGS(...) CGE_SHAPE_NARGS_(__VA_ARGS__, 8, 7, 6, 5, 4, 3, 2, 1, 0)
/* CGE_SHAPE(8, 2048) -> rank-2 shape. Use CGE_SCALAR for rank 0. */
#define CGE_SHAPE(...) ((cge_shape){.rank = CGE_SHAPE_NARGS(__VA_ARGS__), .dims = {__VA_ARGS__}})
#define CGE_SCALAR ((cge_shape){.rank = 0, .dims = {0}})

/* Fails with CGE_ERR_SHAPE if rank is out of range or a dim is < -1. */
cge_status cge_shape_make(int32_t rank, const int64_t *dims, cge_shape *out);
bool cge_shape_is_static(const cge_shape *s);           /* no dynamic dims */
/* Number of elements; -1 if any dim is dynamic; 1 for rank 0. */
int64_t cge_shape_numel(const cge_shape *s);
bool cge_shape_equal(const cge_shape *a, const cge_shape *b);
/* Numpy (multidirectional) broadcasting. Dynamic dims broadcast to dynamic
 * unless the other side fixes them. CGE_ERR_SHAPE if incompatible (no message
 * is recorded: the caller knows the node and writes it). */
cge_status cge_shape_broadcast(const cge_shape *a, const cge_shape *b, cge_shape *out);
/* Row-major element strides (in elements) of a shape; dynamic dims count as 0. */
void cge_shape_strides(const cge_shape *s, int64_t strides[CGE_MAX_RANK]);
/* Normalise a possibly negative axis in [-rank, rank) (or [-rank-1, rank] when
 * `inclusive`, for Unsqueeze-like ops). Returns false if out of range. */
bool cge_axis_normalize(int64_t axis, int32_t rank, bool inclusive, int32_t *out);
/* Writes "[8,2048]" ("?" for dynamic dims, "[]" for scalars) into buf; returns buf. */
char *cge_shape_str(const cge_shape *s, char *buf, size_t size);
#define CGE_SHAPE_STR_MAX 192

/* Memory layout of a tensor. Plain row-major is the default; blocked layouts
 * belong to specific engines. */
typedef enum cge_format {
    CGE_FORMAT_PLAIN = 0,  /* row-major (ND, NCHW for 4-d images) */
    CGE_FORMAT_NHWC = 1,
    CGE_FORMAT_BLOCKED = 2 /* engine-specific blocked layout */
} cge_format;
const char *cge_format_name(cge_format f);

/* A tensor as kernels and sessions see it: a descriptor and a data pointer.
 * `bytes` is the size of the buffer at `data` (at least numel * dtype size). */
typedef struct cge_tensor {
    const char *name;   /* may be NULL where positions are used */
    cge_dtype dtype;
    cge_shape shape;
    void *data;
    size_t bytes;
} cge_tensor;

/* Bytes that a dense tensor of this dtype and (static) shape needs; 0 if the
 * shape is dynamic or the dtype invalid. Saturates to SIZE_MAX on overflow. */
size_t cge_tensor_nbytes(cge_dtype dtype, const cge_shape *shape);

#ifdef __cplusplus
}
#endif
#endif
