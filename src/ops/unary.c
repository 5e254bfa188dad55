/* The elementwise unary family: Neg Abs Exp Log Sqrt Reciprocal Relu
 * LeakyRelu Sigmoid Tanh Erf Gelu, plus Cast (any dtype to any dtype) and
 * Identity. Typed contiguous row loops per dtype, split into SPMD blocks. */
#include <math.h>
#include <string.h>

#include "ops/builtin.h"
#include "ops/fast_math.h"
#include "ops/float_rows.h"
#include "ops/kernel_util.h"

#define MIN_PER_BLOCK 16384

typedef enum un_op {
    U_NEG, U_ABS, U_EXP, U_LOG, U_SQRT, U_RECIP, U_RELU, U_LEAKY, U_SIGMOID, U_TANH, U_ERF,
    U_GELU, U_GELU_TANH, /* Gelu with approximate="tanh": same op, another row */
    U_CAST, U_IDENTITY, U_COUNT
} un_op;

struct un_args;
/* One contiguous run of n elements. */
typedef void (*un_row)(const void *in, void *out, int64_t n, const struct un_args *a);

typedef struct un_args {
    un_row row;
    const void *in;
    void *out;
    size_t size_in, size_out;
    int64_t numel;
    float alpha;  /* LeakyRelu */
} un_args;

/* ---- element functions ---------------------------------------------------- */

/* One function per op and precision, so each can later be swapped for a
 * vector approximation without touching the loops. float32 transcendental
 * functions go through double libm calls: correctly rounded in practice,
 * which keeps float32 results within 1e-6 of numpy's float64 reference. */
static inline float neg_f(float x, float al) { return -x; }
static inline double neg_d(double x, float al) { return -x; }
static inline float abs_f(float x, float al) { return fabsf(x); }
static inline double abs_d(double x, float al) { return fabs(x); }
static inline float exp_f(float x, float al) { return cge_expf_fast(x); }
static inline double exp_d(double x, float al) { return exp(x); }
static inline float log_f(float x, float al) { return (float)log((double)x); }
static inline double log_d(double x, float al) { return log(x); }
static inline float sqrt_f(float x, float al) { return sqrtf(x); }
static inline double sqrt_d(double x, float al) { return sqrt(x); }
static inline float recip_f(float x, float al) { return 1.0f / x; }
static inline double recip_d(double x, float al) { return 1.0 / x; }
/* x < 0 rather than x > 0 keeps NaN as NaN, as numpy's maximum does. */
static inline float relu_f(float x, float al) { return x < 0.0f ? 0.0f : x; }
static inline double relu_d(double x, float al) { return x < 0.0 ? 0.0 : x; }
static inline float leaky_f(float x, float al) { return x < 0.0f ? al * x : x; }
static inline double leaky_d(double x, float al) { return x < 0.0 ? (double)al * x : x; }
/* 1/(1+e^-x) loses everything to rounding for very negative x; e^x/(1+e^x)
 * does not. */
static inline double sigmoid_d(double x, float al)
{
    if (x >= 0.0)
        return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}
static inline float sigmoid_f(float x, float al) { return cge_sigmoidf_fast(x); }
static inline float tanh_f(float x, float al) { return (float)tanh((double)x); }
static inline double tanh_d(double x, float al) { return tanh(x); }
static inline float erf_f(float x, float al) { return (float)erf((double)x); }
static inline double erf_d(double x, float al) { return erf(x); }
/* 0.5x(1+erf(x/sqrt2)) written with erfc, which does not cancel for x < 0. */
static inline double gelu_d(double x, float al) { return 0.5 * x * erfc(-x * M_SQRT1_2); }
static inline float gelu_f(float x, float al) { return (float)gelu_d(x, al); }
/* 0.5x(1+tanh(u)) = x * sigmoid(2u), again free of cancellation for x < 0. */
static inline double gelu_tanh_d(double x, float al)
{
    const double k = 0.7978845608028654; /* sqrt(2/pi) */
    double u = k * (x + 0.044715 * x * x * x);
    return x * sigmoid_d(2.0 * u, al);
}
static inline float gelu_tanh_f(float x, float al) { return (float)gelu_tanh_d(x, al); }

/* ---- rows ------------------------------------------------------------------ */

/* float32 / float64 rows and float16 / bfloat16 rows computed in float32;
 * exp and sigmoid take their vectorised float32 rows from fast_math. */
#define DEF_FLOAT_ROWS(OP) CGE_FLOAT_ROWS(OP, un_args, float, alpha)
#define DEF_VEC_FLOAT_ROWS(OP, ROW32)                                                    \
    static void OP##_f32(const void *in_, void *out_, int64_t n, const un_args *a)      \
    {                                                                                    \
        ROW32((float *)out_, (const float *)in_, n);                                     \
    }                                                                                    \
    CGE_WIDE_FLOAT_ROWS(OP, un_args, float, alpha)
DEF_FLOAT_ROWS(neg)
DEF_FLOAT_ROWS(abs)
DEF_VEC_FLOAT_ROWS(exp, cge_exp_f32_row)
DEF_FLOAT_ROWS(log)
DEF_FLOAT_ROWS(sqrt)
DEF_FLOAT_ROWS(recip)
DEF_FLOAT_ROWS(relu)
DEF_FLOAT_ROWS(leaky)
DEF_VEC_FLOAT_ROWS(sigmoid, cge_sigmoid_f32_row)
DEF_FLOAT_ROWS(tanh)
DEF_FLOAT_ROWS(erf)
DEF_FLOAT_ROWS(gelu)
DEF_FLOAT_ROWS(gelu_tanh)

#define DEF_INT_ROW(NAME, T, EXPR)                                                       \
    static void NAME(const void *in_, void *out_, int64_t n, const un_args *a)          \
    {                                                                                    \
        const T *in = in_;                                                               \
        T *out = out_;                                                                   \
        for (int64_t k = 0; k < n; k++) {                                                \
            T x = in[k];                                                                 \
            out[k] = (EXPR);                                                             \
        }                                                                                \
    }
/* Signed integers: negation wraps (in the unsigned type W), so -MIN and
 * |MIN| are MIN, as in numpy. */
#define DEF_SINT_ROWS(S, T, W)                                                           \
    DEF_INT_ROW(neg_##S, T, (T)((W)0 - (W)x))                                            \
    DEF_INT_ROW(abs_##S, T, x < 0 ? (T)((W)0 - (W)x) : x)                                \
    DEF_INT_ROW(relu_##S, T, x < 0 ? (T)0 : x)
DEF_SINT_ROWS(i8, int8_t, uint32_t)
DEF_SINT_ROWS(i16, int16_t, uint32_t)
DEF_SINT_ROWS(i32, int32_t, uint32_t)
DEF_SINT_ROWS(i64, int64_t, uint64_t)

/* Bytes unchanged: Identity, Cast to the same dtype, Abs of unsigned ints.
 * In place (in == out) there is nothing to do. */
static void copy_row(const void *in, void *out, int64_t n, const un_args *a)
{
    if (in != out)
        memcpy(out, in, (size_t)n * a->size_in);
}

/* ---- Cast ------------------------------------------------------------------ */

/* Cast semantics (ONNX leaves the edge cases open; these are cge's):
 * float -> int truncates toward zero, saturates out of range, NaN -> 0;
 * int -> int wraps modulo 2^bits (numpy's astype); anything -> bool is
 * x != 0 (NaN -> true); bool -> anything is 0 or 1; to float16/bfloat16
 * rounds to nearest even through float32. */
#define DEF_SAT(S, T, LO, HI)                                                            \
    static inline T sat_##S(double v)                                                    \
    {                                                                                    \
        return v != v ? (T)0 : v <= (double)(LO) ? (T)(LO) : v >= (double)(HI) ? (T)(HI) \
                                                                               : (T)v;   \
    }
DEF_SAT(I8, int8_t, INT8_MIN, INT8_MAX)
DEF_SAT(I16, int16_t, INT16_MIN, INT16_MAX)
DEF_SAT(I32, int32_t, INT32_MIN, INT32_MAX)
DEF_SAT(U8, uint8_t, 0, UINT8_MAX)
DEF_SAT(U16, uint16_t, 0, UINT16_MAX)
DEF_SAT(U32, uint32_t, 0, UINT32_MAX)
/* (double)INT64_MAX rounds up to 2^63, which is out of range: compare
 * against 2^63 exclusively. */
static inline int64_t sat_I64(double v)
{
    return v != v ? 0 : v < -9223372036854775808.0 ? INT64_MIN
                        : v >= 9223372036854775808.0 ? INT64_MAX : (int64_t)v;
}
static inline uint64_t sat_U64(double v)
{
    return v != v ? 0 : v <= 0.0 ? 0 : v >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)v;
}

/* Source kinds: how to read an element, and whether it is a float. */
#define LOAD_FLT(x) (x)
#define LOAD_SINT(x) (x)
#define LOAD_UINT(x) (x)
#define LOAD_BOOL(x) ((x) != 0)
#define LOAD_HALF(x) cge_f16_to_f32(x)
#define LOAD_BHALF(x) cge_bf16_to_f32(x)
#define ISF_FLT 1
#define ISF_SINT 0
#define ISF_UINT 0
#define ISF_BOOL 0
#define ISF_HALF 1
#define ISF_BHALF 1
/* Destination kinds. The unused arm of STORE_INT is never executed for the
 * source kind at hand (ISF_ is a constant), so no out-of-range float -> int
 * conversion can happen. */
#define STORE_FLT(DN, DT, SK, v) ((DT)(v))
#define STORE_INT(DN, DT, SK, v) (ISF_##SK ? sat_##DN((double)(v)) : (DT)(v))
#define STORE_BOOL(DN, DT, SK, v) ((uint8_t)((v) != 0))
#define STORE_HALF(DN, DT, SK, v) cge_f32_to_f16((float)(v))
#define STORE_BHALF(DN, DT, SK, v) cge_f32_to_bf16((float)(v))

/* Two copies of the dtype list so one can be expanded inside the other. */
#define CAST_SRC(X)                                                                      \
    X(F32, float, FLT) X(F64, double, FLT) X(F16, uint16_t, HALF)                        \
    X(BF16, uint16_t, BHALF) X(I8, int8_t, SINT) X(I16, int16_t, SINT)                   \
    X(I32, int32_t, SINT) X(I64, int64_t, SINT) X(U8, uint8_t, UINT)                     \
    X(U16, uint16_t, UINT) X(U32, uint32_t, UINT) X(U64, uint64_t, UINT)                 \
    X(BOOL, uint8_t, BOOL)
#define CAST_DST(X, SN, ST, SK)                                                          \
    X(SN, ST, SK, F32, float, FLT) X(SN, ST, SK, F64, double, FLT)                       \
    X(SN, ST, SK, F16, uint16_t, HALF) X(SN, ST, SK, BF16, uint16_t, BHALF)              \
    X(SN, ST, SK, I8, int8_t, INT) X(SN, ST, SK, I16, int16_t, INT)                      \
    X(SN, ST, SK, I32, int32_t, INT) X(SN, ST, SK, I64, int64_t, INT)                    \
    X(SN, ST, SK, U8, uint8_t, INT) X(SN, ST, SK, U16, uint16_t, INT)                    \
    X(SN, ST, SK, U32, uint32_t, INT) X(SN, ST, SK, U64, uint64_t, INT)                  \
    X(SN, ST, SK, BOOL, uint8_t, BOOL)

#define DEF_CAST(SN, ST, SK, DN, DT, DK)                                                 \
    static void cast_##SN##_##DN(const void *in_, void *out_, int64_t n, const un_args *a) \
    {                                                                                    \
        const ST *in = in_;                                                              \
        DT *out = out_;                                                                  \
        for (int64_t k = 0; k < n; k++)                                                  \
            out[k] = STORE_##DK(DN, DT, SK, LOAD_##SK(in[k]));                           \
    }
#define DEF_CAST_FROM(SN, ST, SK) CAST_DST(DEF_CAST, SN, ST, SK)
CAST_SRC(DEF_CAST_FROM)

#define CAST_CELL(SN, ST, SK, DN, DT, DK) [CGE_##DN] = cast_##SN##_##DN,
#define CAST_ROW(SN, ST, SK) [CGE_##SN] = {CAST_DST(CAST_CELL, SN, ST, SK)},
static const un_row cast_rows[CGE_DTYPE_MAX][CGE_DTYPE_MAX] = {CAST_SRC(CAST_ROW)};

/* ---- tables ------------------------------------------------------------------ */

#define FLOAT_ROWS(P) [CGE_F32] = P##_f32, [CGE_F64] = P##_f64, [CGE_F16] = P##_f16, \
                      [CGE_BF16] = P##_bf16
#define SINT_ROWS(P) [CGE_I8] = P##_i8, [CGE_I16] = P##_i16, [CGE_I32] = P##_i32, \
                     [CGE_I64] = P##_i64

/* Rows by op and dtype; Cast and Identity are chosen separately. */
static const un_row un_rows[U_COUNT][CGE_DTYPE_MAX] = {
    [U_NEG] = {FLOAT_ROWS(neg), SINT_ROWS(neg)},
    [U_ABS] = {FLOAT_ROWS(abs), SINT_ROWS(abs), [CGE_U8] = copy_row, [CGE_U16] = copy_row,
               [CGE_U32] = copy_row, [CGE_U64] = copy_row},
    [U_EXP] = {FLOAT_ROWS(exp)},
    [U_LOG] = {FLOAT_ROWS(log)},
    [U_SQRT] = {FLOAT_ROWS(sqrt)},
    [U_RECIP] = {FLOAT_ROWS(recip)},
    [U_RELU] = {FLOAT_ROWS(relu), SINT_ROWS(relu)},
    [U_LEAKY] = {FLOAT_ROWS(leaky)},
    [U_SIGMOID] = {FLOAT_ROWS(sigmoid)},
    [U_TANH] = {FLOAT_ROWS(tanh)},
    [U_ERF] = {FLOAT_ROWS(erf)},
    [U_GELU] = {FLOAT_ROWS(gelu)},
    [U_GELU_TANH] = {FLOAT_ROWS(gelu_tanh)},
};

static const char *const un_names[U_COUNT] = {
    "Neg", "Abs", "Exp", "Log", "Sqrt", "Reciprocal", "Relu", "LeakyRelu", "Sigmoid",
    "Tanh", "Erf", "Gelu", "Gelu", "Cast", "Identity"};

#define NEG_DTYPES (CGE_DT_FLOAT | CGE_DT_SIGNED_INT)
#define ABS_DTYPES CGE_DT_NUMERIC
#define RELU_DTYPES (CGE_DT_FLOAT | CGE_DT_SIGNED_INT)
static const cge_dtype_set un_dtypes[U_COUNT] = {
    [U_NEG] = NEG_DTYPES,        [U_ABS] = ABS_DTYPES,        [U_EXP] = CGE_DT_FLOAT,
    [U_LOG] = CGE_DT_FLOAT,      [U_SQRT] = CGE_DT_FLOAT,     [U_RECIP] = CGE_DT_FLOAT,
    [U_RELU] = RELU_DTYPES,      [U_LEAKY] = CGE_DT_FLOAT,    [U_SIGMOID] = CGE_DT_FLOAT,
    [U_TANH] = CGE_DT_FLOAT,     [U_ERF] = CGE_DT_FLOAT,      [U_GELU] = CGE_DT_FLOAT,
    [U_GELU_TANH] = CGE_DT_FLOAT, [U_CAST] = CGE_DT_ALL,      [U_IDENTITY] = CGE_DT_ALL,
};

static bool in_set(cge_dtype_set set, cge_dtype t)
{
    return t > CGE_DTYPE_UNDEFINED && t < CGE_DTYPE_MAX && (set & CGE_DT(t));
}

/* Gelu's attribute picks the row: "none" (erf), "tanh", or NULL if neither. */
static bool gelu_variant(const cge_attrs *attrs, un_op *op)
{
    const char *ap = cge_attrs_get_string(attrs, "approximate", "none");
    if (!ap || !strcmp(ap, "none"))
        *op = U_GELU;
    else if (!strcmp(ap, "tanh"))
        *op = U_GELU_TANH;
    else
        return false;
    return true;
}

/* ---- meta -------------------------------------------------------------------- */

static cge_status un_infer(cge_infer_ctx *ctx, un_op op)
{
    if (ctx->num_inputs != 1 || ctx->num_outputs != 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "expects 1 input and 1 output, got %d and %d", ctx->num_inputs,
                              ctx->num_outputs);
    const cge_tensor_desc *x = &ctx->inputs[0];
    if (!in_set(un_dtypes[op], x->dtype))
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "input has dtype %s, which %s does not support",
                              cge_dtype_name(x->dtype), un_names[op]);
    cge_dtype out = x->dtype;
    if (op == U_GELU && !gelu_variant(ctx->attrs, &op))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "attribute approximate is '%s'; it must be 'none' or 'tanh'",
                              cge_attrs_get_string(ctx->attrs, "approximate", ""));
    if (op == U_CAST) {
        int64_t to = cge_attrs_get_int(ctx->attrs, "to", -1);
        if (to < 0 || to >= CGE_DTYPE_MAX || !in_set(CGE_DT_ALL, (cge_dtype)to))
            return cge_meta_error(ctx, CGE_ERR_DTYPE,
                                  "attribute 'to' = %lld is missing or not a supported dtype "
                                  "(numeric types and bool)",
                                  (long long)to);
        out = (cge_dtype)to;
    }
    ctx->outputs[0].dtype = out;
    ctx->outputs[0].shape = x->shape;
    return CGE_OK;
}

/* ---- kernels ----------------------------------------------------------------- */

static void un_block(int64_t blk, int64_t nb, void *p)
{
    const un_args *a = p;
    int64_t begin, end;
    cge_block_range(a->numel, blk, nb, &begin, &end);
    if (begin < end)
        a->row((const char *)a->in + (size_t)begin * a->size_in,
               (char *)a->out + (size_t)begin * a->size_out, end - begin, a);
}

static cge_status un_launch(const cge_kernel_ctx *ctx, cge_stream *stream, un_op op)
{
    if (ctx->num_inputs != 1 || ctx->num_outputs != 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                "expects 1 input and 1 output, got %d and %d", ctx->num_inputs,
                                ctx->num_outputs);
    const cge_tensor *x = &ctx->inputs[0];
    cge_tensor *y = &ctx->outputs[0];
    un_args args;
    memset(&args, 0, sizeof args);
    if (op == U_GELU && !gelu_variant(ctx->attrs, &op))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                "attribute approximate must be 'none' or 'tanh'");
    bool dt_ok = in_set(un_dtypes[op], x->dtype) && in_set(CGE_DT_ALL, y->dtype);
    if (dt_ok) {
        if (op == U_CAST)
            args.row = x->dtype == y->dtype ? copy_row : cast_rows[x->dtype][y->dtype];
        else if (op == U_IDENTITY)
            args.row = x->dtype == y->dtype ? copy_row : NULL;
        else
            args.row = x->dtype == y->dtype ? un_rows[op][x->dtype] : NULL;
    }
    if (!args.row)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "no %s kernel for %s -> %s", un_names[op],
                                cge_dtype_name(x->dtype), cge_dtype_name(y->dtype));
    if (!cge_shape_is_static(&x->shape) || !cge_shape_equal(&x->shape, &y->shape)) {
        char sx[CGE_SHAPE_STR_MAX], sy[CGE_SHAPE_STR_MAX];
        return cge_kernel_error(ctx, CGE_ERR_SHAPE,
                                "input %s and output %s must have one static shape",
                                cge_shape_str(&x->shape, sx, sizeof sx),
                                cge_shape_str(&y->shape, sy, sizeof sy));
    }
    args.numel = cge_shape_numel(&x->shape);
    if (args.numel == 0)
        return CGE_OK;
    size_t nx = cge_tensor_nbytes(x->dtype, &x->shape), ny = cge_tensor_nbytes(y->dtype, &y->shape);
    if (!x->data || x->bytes < nx || !y->data || y->bytes < ny)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                "buffers too small or missing: input %zu of %zu bytes, "
                                "output %zu of %zu",
                                x->data ? x->bytes : (size_t)0, nx,
                                y->data ? y->bytes : (size_t)0, ny);
    args.in = x->data;
    args.out = y->data;
    args.size_in = cge_dtype_size(x->dtype);
    args.size_out = cge_dtype_size(y->dtype);
    args.alpha = cge_attrs_get_float(ctx->attrs, "alpha", 0.01f);
    int64_t nb = cge_blocks_for(args.numel, MIN_PER_BLOCK, ctx->num_threads);
    return cge_launch(stream, un_block, nb, &args, sizeof args);
}

#define DEF_OP_FNS(NAME, OP)                                                             \
    static cge_status NAME##_infer(cge_infer_ctx *ctx) { return un_infer(ctx, OP); }     \
    static cge_status NAME##_launch(const cge_kernel_ctx *ctx, cge_stream *stream)       \
    {                                                                                    \
        return un_launch(ctx, stream, OP);                                               \
    }
DEF_OP_FNS(neg, U_NEG)
DEF_OP_FNS(abs, U_ABS)
DEF_OP_FNS(exp, U_EXP)
DEF_OP_FNS(log, U_LOG)
DEF_OP_FNS(sqrt, U_SQRT)
DEF_OP_FNS(recip, U_RECIP)
DEF_OP_FNS(relu, U_RELU)
DEF_OP_FNS(leaky, U_LEAKY)
DEF_OP_FNS(sigmoid, U_SIGMOID)
DEF_OP_FNS(tanh, U_TANH)
DEF_OP_FNS(erf, U_ERF)
DEF_OP_FNS(gelu, U_GELU)
DEF_OP_FNS(cast, U_CAST)
DEF_OP_FNS(identity, U_IDENTITY)

/* ---- schemas ----------------------------------------------------------------- */

/* Same-dtype elementwise ops may write into their input's buffer. Cast may
 * change the element size, and blocks running in parallel would then
 * overwrite input elements other blocks still read: never in place. */
#define KERNEL(NAME, DTYPES, INPLACE)                                                    \
    static const cge_kernel_def NAME##_kernels[] = {                                     \
        {.engine = "cpu", .dtypes = DTYPES, .launch = NAME##_launch, .inplace_input = INPLACE}}
KERNEL(neg, NEG_DTYPES, 0);
KERNEL(abs, ABS_DTYPES, 0);
KERNEL(exp, CGE_DT_FLOAT, 0);
KERNEL(log, CGE_DT_FLOAT, 0);
KERNEL(sqrt, CGE_DT_FLOAT, 0);
KERNEL(recip, CGE_DT_FLOAT, 0);
KERNEL(relu, RELU_DTYPES, 0);
KERNEL(leaky, CGE_DT_FLOAT, 0);
KERNEL(sigmoid, CGE_DT_FLOAT, 0);
KERNEL(tanh, CGE_DT_FLOAT, 0);
KERNEL(erf, CGE_DT_FLOAT, 0);
KERNEL(gelu, CGE_DT_FLOAT, 0);
KERNEL(cast, CGE_DT_ALL, -1);
KERNEL(identity, CGE_DT_ALL, 0);

#define ARGS(NAME, DTYPES)                                                               \
    static const cge_arg_def NAME##_in[] = {{"X", 0, DTYPES, "input"}};                  \
    static const cge_arg_def NAME##_out[] = {{"Y", 0, DTYPES, "result, same shape"}}
ARGS(neg, NEG_DTYPES);
ARGS(abs, ABS_DTYPES);
ARGS(flt, CGE_DT_FLOAT);
ARGS(relu, RELU_DTYPES);
/* ONNX names Cast's and Identity's tensors "input" and "output". */
static const cge_arg_def io_in[] = {{"input", 0, CGE_DT_ALL, "input"}};
static const cge_arg_def io_out[] = {{"output", 0, CGE_DT_ALL, "result, same shape"}};

static const cge_attr_def leaky_attrs[] = {
    {.name = "alpha", .kind = CGE_ATTR_FLOAT, .default_f = 0.01f, .doc = "slope for x < 0"}};
static const cge_attr_def gelu_attrs[] = {
    {.name = "approximate", .kind = CGE_ATTR_STRING, .default_s = "none",
     .doc = "'none' (exact, erf) or 'tanh'"}};
static const cge_attr_def cast_attrs[] = {
    {.name = "to", .kind = CGE_ATTR_INT, .required = true, .doc = "target dtype (ONNX number)"}};

#define UN_DEF(NAME, SINCE, ARGN, KNAME, ATTRS, NATTRS, DOC)                             \
    {.name = NAME, .domain = CGE_DOMAIN_DEFAULT, .since_version = SINCE,                 \
     .inputs = ARGN##_in, .num_inputs = 1, .outputs = ARGN##_out, .num_outputs = 1,      \
     .attrs = ATTRS, .num_attrs = NATTRS, .infer = KNAME##_infer,                        \
     .kernels = KNAME##_kernels, .num_kernels = 1, .doc = DOC}

static const cge_op_def unary_ops[] = {
    UN_DEF("Neg", 13, neg, neg, NULL, 0, "-X; signed integers wrap (-MIN = MIN)"),
    UN_DEF("Abs", 13, abs, abs, NULL, 0, "|X|; |MIN| = MIN for signed integers"),
    UN_DEF("Exp", 13, flt, exp, NULL, 0, "e^X"),
    UN_DEF("Log", 13, flt, log, NULL, 0, "natural logarithm"),
    UN_DEF("Sqrt", 13, flt, sqrt, NULL, 0, "square root (NaN below 0)"),
    UN_DEF("Reciprocal", 13, flt, recip, NULL, 0, "1 / X"),
    UN_DEF("Relu", 14, relu, relu, NULL, 0, "max(X, 0)"),
    UN_DEF("LeakyRelu", 16, flt, leaky, leaky_attrs, 1, "X < 0 ? alpha * X : X"),
    UN_DEF("Sigmoid", 13, flt, sigmoid, NULL, 0, "1 / (1 + e^-X)"),
    UN_DEF("Tanh", 13, flt, tanh, NULL, 0, "hyperbolic tangent"),
    UN_DEF("Erf", 13, flt, erf, NULL, 0, "error function"),
    UN_DEF("Gelu", 20, flt, gelu, gelu_attrs, 1,
           "0.5 X (1 + erf(X / sqrt 2)), or the tanh approximation"),
    UN_DEF("Cast", 13, io, cast, cast_attrs, 1,
           "convert to dtype 'to': float -> int truncates toward zero and saturates (NaN -> "
           "0), int -> int wraps, x -> bool is x != 0"),
    UN_DEF("Identity", 16, io, identity, NULL, 0, "a copy of the input"),
};

const cge_op_def *cge_ops_unary(int32_t *count)
{
    if (count)
        *count = (int32_t)(sizeof unary_ops / sizeof unary_ops[0]);
    return unary_ops;
}
