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
    CGE_STRING = 8,   /* elements are cge_string (below) */
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
/* Strings are outside CGE_DT_ALL on purpose: an op takes them only where its
 * schema names them, so no numeric kernel ever sees one. */
#define CGE_DT_STRING CGE_DT(CGE_STRING)

/* One element of a CGE_STRING tensor: `size` bytes at `data` (any bytes,
 * UTF-8 by convention; not NUL-terminated; data may be NULL when size is 0).
 * An element refers to bytes it does not own, which are immutable while any
 * tensor refers to them: a constant's bytes live in the constant's block
 * (cge_graph_add_constant copies them in), a caller's input strings are the
 * caller's for the length of the run, and bytes a kernel writes live in
 * that node's string store until the node runs again. Ops that only move
 * elements (Identity, Reshape, Concat, Gather, ...) therefore copy the
 * 16-byte elements and never the bytes. See docs/strings.md. */
typedef struct cge_string {
    const char *data;
    int64_t size;
} cge_string;

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
/* A dimension is one int64_t:
 *   d >= 0            a known size;
 *   CGE_DIM_DYNAMIC   (-1) unknown until run time, and unrelated to any other
 *                     dimension (anonymous);
 *   CGE_DIM_SYMBOL(k) (-(k+2), k >= 0) unknown until run time, but the same
 *                     size wherever the same symbol appears (ONNX's dim_param
 *                     "batch"). A graph names its symbols
 *                     (cge_graph_dim_symbol). */
#define CGE_DIM_DYNAMIC ((int64_t)-1)
/* Symbol ids are 0 .. CGE_DIM_MAX_SYMBOLS-1; dims below the last one are invalid. */
#define CGE_DIM_MAX_SYMBOLS ((int64_t)1 << 30)
#define CGE_DIM_SYMBOL(k) ((int64_t)(-(int64_t)(k) - 2))
#define CGE_DIM_MIN CGE_DIM_SYMBOL(CGE_DIM_MAX_SYMBOLS - 1)

static inline bool cge_dim_is_known(int64_t d) { return d >= 0; }
static inline bool cge_dim_is_symbol(int64_t d) { return d <= -2 && d >= CGE_DIM_MIN; }
/* k for CGE_DIM_SYMBOL(k); -1 if `d` is not a symbol. */
static inline int64_t cge_dim_symbol_id(int64_t d) { return cge_dim_is_symbol(d) ? -d - 2 : -1; }
/* Derived symbols: ids from CGE_DIM_DERIVED_FIRST up are not names in a
 * graph's table but encode floor((base + add) / div) of a named symbol base
 * (id below 512, -2048 <= add < 2048, 1 <= div <= 256): the spatial size a
 * convolution or pooling window gives a symbolic size. The encoding is a
 * function of (base, add, div), so two dims with the same derived symbol are
 * equal at every size, and equal arithmetic on equal inputs (a residual
 * branch's 3x3/2 pad 1 and 1x1/2 pad 0) gives the same symbol. */
#define CGE_DIM_DERIVED_FIRST ((int64_t)1 << 29)
static inline bool cge_dim_is_derived(int64_t d)
{
    return d <= CGE_DIM_SYMBOL(CGE_DIM_DERIVED_FIRST) && d >= CGE_DIM_MIN;
}
/* floor((d + add) / div) as a dim: a size for a known d, a symbol (derived,
 * or d itself where add is 0 and div 1) for a symbolic d, CGE_DIM_DYNAMIC
 * for an anonymous d or where the result does not fit the encoding. */
int64_t cge_dim_derive(int64_t d, int64_t add, int64_t div);
/* The parts of a derived symbol; false (and base = d, add 0, div 1) otherwise. */
bool cge_dim_derived_parts(int64_t d, int64_t *base, int64_t *add, int64_t *div);
/* A size, CGE_DIM_DYNAMIC or a symbol. */
static inline bool cge_dim_valid(int64_t d) { return d >= CGE_DIM_MIN; }
/* Provably the same size in every run: equal known sizes or the same symbol
 * (two anonymous dims are not). */
static inline bool cge_dim_same(int64_t a, int64_t b) { return a == b && a != CGE_DIM_DYNAMIC; }
/* Possibly the same size: equal, or either not known. Meta refuses a pair of
 * dims that must match only when this is false. */
static inline bool cge_dim_may_equal(int64_t a, int64_t b) { return a == b || a < 0 || b < 0; }
/* The dim of a position where two dims must be equal (Concat's other axes,
 * a contraction's K): the known one, the shared symbol, else anonymous. */
static inline int64_t cge_dim_merge(int64_t a, int64_t b)
{
    if (a >= 0)
        return a;
    if (b >= 0)
        return b;
    return a == b ? a : CGE_DIM_DYNAMIC;
}

typedef struct cge_shape {
    int32_t rank;                  /* 0 .. CGE_MAX_RANK; rank 0 is a scalar */
    int64_t dims[CGE_MAX_RANK];    /* >= 0 known, CGE_DIM_DYNAMIC or a symbol unknown */
} cge_shape;

#define CGE_SHAPE_NARGS_(a1, a2, a3, a4, a5, a6, a7, a8, n, ...) n
#define CGE_SHAPE_NARGS(...) CGE_SHAPE_NARGS_(__VA_ARGS__, 8, 7, 6, 5, 4, 3, 2, 1, 0)
/* CGE_SHAPE(8, 2048) -> rank-2 shape. Use CGE_SCALAR for rank 0. */
#define CGE_SHAPE(...) ((cge_shape){.rank = CGE_SHAPE_NARGS(__VA_ARGS__), .dims = {__VA_ARGS__}})
#define CGE_SCALAR ((cge_shape){.rank = 0, .dims = {0}})

/* Fails with CGE_ERR_SHAPE if rank is out of range or a dim is invalid
 * (below CGE_DIM_MIN). Symbols are accepted. */
cge_status cge_shape_make(int32_t rank, const int64_t *dims, cge_shape *out);
bool cge_shape_is_static(const cge_shape *s);           /* every dim known */
/* Number of elements; -1 if any dim is not known; 1 for rank 0. */
int64_t cge_shape_numel(const cge_shape *s);
/* Same description: same rank and identical dim values, so the same symbol
 * matches and two anonymous (-1) dims match too, as they always have
 * (callers compare descriptors). Whether two shapes are provably the same
 * size at run time is cge_shape_same. */
bool cge_shape_equal(const cge_shape *a, const cge_shape *b);
/* Provably equal at run time: same rank, every dim pair cge_dim_same. */
bool cge_shape_same(const cge_shape *a, const cge_shape *b);
/* Numpy (multidirectional) broadcasting, per dim: equal dims stay (a symbol
 * included); 1 gives way to the other side; a known size k > 1 fixes an
 * unknown one (checked again at run time); two different unknowns (two
 * symbols, or -1 with anything unknown) give -1. CGE_ERR_SHAPE if two known
 * sizes are incompatible (no message is recorded: the caller knows the node
 * and writes it). */
cge_status cge_shape_broadcast(const cge_shape *a, const cge_shape *b, cge_shape *out);
/* Row-major element strides (in elements) of a shape; dynamic dims count as 0. */
void cge_shape_strides(const cge_shape *s, int64_t strides[CGE_MAX_RANK]);
/* Normalise a possibly negative axis in [-rank, rank) (or [-rank-1, rank] when
 * `inclusive`, for Unsqueeze-like ops). Returns false if out of range. */
bool cge_axis_normalize(int64_t axis, int32_t rank, bool inclusive, int32_t *out);
/* Writes "[8,2048]" ("?" for anonymous dims, "s<k>" for symbol k, "(s<k>+1)/2"
 * for a derived symbol, "[]" for scalars) into buf; returns buf. */
char *cge_shape_str(const cge_shape *s, char *buf, size_t size);
/* The same, with symbols named by `name_of(symbol dim, user)` where it returns
 * non-NULL ("[batch,16]"); "s<k>" where it returns NULL. */
typedef const char *(*cge_dim_name_fn)(int64_t dim, const void *user);
char *cge_shape_str_named(const cge_shape *s, cge_dim_name_fn name_of, const void *user,
                          char *buf, size_t size);
#define CGE_SHAPE_STR_MAX 192

/* Memory layout of a tensor. Plain row-major is the default; blocked layouts
 * belong to specific engines. */
typedef enum cge_format {
    CGE_FORMAT_PLAIN = 0,  /* row-major (ND, NCHW for 4-d images) */
    CGE_FORMAT_NHWC = 1,
    CGE_FORMAT_BLOCKED = 2 /* engine-specific blocked layout */
} cge_format;
const char *cge_format_name(cge_format f);

/* What a value holds (ONNX's TypeProto kinds): a tensor, a sequence of
 * tensors of one dtype, or an optional (a tensor or a sequence, or none).
 * Descriptors of non-tensor values keep the element dtype in `dtype` and
 * the element shape where known (dims dynamic where elements differ); at
 * run time their data is a cge_sequence (cge/sequence.h). */
typedef enum cge_value_type {
    CGE_TYPE_TENSOR = 0,
    CGE_TYPE_SEQUENCE = 1,
    CGE_TYPE_OPTIONAL = 2,           /* optional tensor */
    CGE_TYPE_OPTIONAL_SEQUENCE = 3   /* optional sequence of tensors */
} cge_value_type;
const char *cge_value_type_name(cge_value_type t);   /* "tensor", "sequence", ... */

/* A tensor as kernels and sessions see it: a descriptor and a data pointer.
 * `bytes` is the size of the buffer at `data` (at least numel * dtype size).
 * A sequence or optional value travels as a cge_tensor too: `data` is then
 * a cge_sequence and `dtype` its elements' (its type is told apart: the
 * graph's descriptor for sessions, cge_kernel_ctx.input_types for kernels). */
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

/* The largest tensor cge describes: 2^56 bytes (64 PiB, beyond any address
 * space of today), so that element counts, byte sizes, byte offsets and sums
 * of a few of them never overflow int64 or size_t wherever they are taken. */
#define CGE_MAX_TENSOR_BYTES ((uint64_t)1 << 56)

/* Whether a dense tensor of this dtype and static shape is larger than
 * CGE_MAX_TENSOR_BYTES (computed without overflow); false for dynamic shapes
 * (checked once their dims are known) and for empty ones. Callers report it
 * in their layer; cge_tensor_size_str writes the size for that message. */
bool cge_tensor_too_large(cge_dtype dtype, const cge_shape *shape);
/* "1.2e+24 elements, 4.8e+24 bytes" for a static shape, in floating point so
 * that an overflowing size prints as what it is. Returns buf. */
char *cge_tensor_size_str(cge_dtype dtype, const cge_shape *shape, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
