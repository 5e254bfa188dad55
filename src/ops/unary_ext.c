/* The remaining elementwise unary operators: rounding (Floor Ceil Round Sign),
 * tests (IsNaN IsInf), logic (Not BitwiseNot), trigonometric and hyperbolic
 * functions, activations (Softplus ... Shrink), Clip, Dropout and Hardmax. */
#include <math.h>
#include <string.h>

#include "ops/builtin.h"
#include "ops/float_rows.h"
#include "ops/kernel_util.h"

#define MIN_PER_BLOCK 16384

typedef enum ux_op {
    X_FLOOR, X_CEIL, X_ROUND, X_SIGN, X_ISNAN, X_ISINF, X_NOT, X_BNOT,
    X_SIN, X_COS, X_TAN, X_ASIN, X_ACOS, X_ATAN, X_SINH, X_COSH, X_ASINH, X_ACOSH, X_ATANH,
    X_SOFTPLUS, X_SOFTSIGN, X_ELU, X_SELU, X_CELU, X_THRELU, X_HSIGMOID, X_HSWISH, X_MISH,
    X_SHRINK, X_COUNT
} ux_op;

static const char *const ux_names[X_COUNT] = {
    "Floor", "Ceil", "Round", "Sign", "IsNaN", "IsInf", "Not", "BitwiseNot",
    "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
    "Softplus", "Softsign", "Elu", "Selu", "Celu", "ThresholdedRelu", "HardSigmoid",
    "HardSwish", "Mish", "Shrink"};

/* Attribute values an element function may need, read once at launch. */
typedef struct ux_par {
    float alpha, beta, gamma;
    int neg, pos;  /* IsInf detect_negative / detect_positive */
} ux_par;

struct ux_args;
typedef void (*ux_row)(const void *in, void *out, int64_t n, const struct ux_args *a);

typedef struct ux_args {
    ux_row row;
    const void *in;
    void *out;
    size_t size_in, size_out;
    int64_t numel;
    cge_dtype dtype;  /* of the input, for generic rows */
    ux_par par;
} ux_args;

/* ---- element functions ------------------------------------------------------ */

/* Cheap functions are written in float so that their float32 loops vectorise
 * (comparisons become selects, which also keeps NaN as NaN). Transcendental
 * ones go through double libm calls, as unary.c does: correctly rounded in
 * practice, so float32 results stay within an ulp of numpy's. */
/* c ? a : b on the bits. gcc (with its default -ftrapping-math) will not
 * if-convert a loop where float arithmetic feeds a conditional, which keeps
 * such loops scalar; this select it vectorises. */
static inline float sel_f(int c, float a, float b)
{
    uint32_t ia, ib, m = (uint32_t)0 - (uint32_t)(c != 0);
    memcpy(&ia, &a, sizeof ia);
    memcpy(&ib, &b, sizeof ib);
    uint32_t r = (ia & m) | (ib & ~m);
    float f;
    memcpy(&f, &r, sizeof f);
    return f;
}

/* floor from rint (which gcc vectorises; floorf it does not without
 * -fno-trapping-math): rint's result is an integer, one too high at most.
 * ceil(x) = -floor(-x) keeps the sign of zero right (ceil(-0.5) = -0). */
static inline float floor_f(float x, ux_par p)
{
    float r = rintf(x);
    return sel_f(r > x, r - 1.0f, r);
}
static inline double floor_d(double x, ux_par p)
{
    double r = rint(x);
    return r > x ? r - 1.0 : r;
}
static inline float ceil_f(float x, ux_par p) { return -floor_f(-x, p); }
static inline double ceil_d(double x, ux_par p) { return -floor_d(-x, p); }
/* rint rounds half to even in the default rounding mode, as ONNX asks. */
static inline float round_f(float x, ux_par p) { return rintf(x); }
static inline double round_d(double x, ux_par p) { return rint(x); }
/* numpy's sign: 0 for +-0, NaN for NaN. */
static inline float sign_f(float x, ux_par p)
{
    return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x == 0.0f ? 0.0f : x;
}
static inline double sign_d(double x, ux_par p)
{
    return x > 0.0 ? 1.0 : x < 0.0 ? -1.0 : x == 0.0 ? 0.0 : x;
}

#define DEF_LIBM(NAME, FN)                                                               \
    static inline float NAME##_f(float x, ux_par p) { return (float)FN((double)x); }     \
    static inline double NAME##_d(double x, ux_par p) { return FN(x); }
DEF_LIBM(sin, sin)
DEF_LIBM(cos, cos)
DEF_LIBM(tan, tan)
DEF_LIBM(asin, asin)
DEF_LIBM(acos, acos)
DEF_LIBM(atan, atan)
DEF_LIBM(sinh, sinh)
DEF_LIBM(cosh, cosh)
DEF_LIBM(asinh, asinh)
DEF_LIBM(acosh, acosh)
DEF_LIBM(atanh, atanh)

/* log(1 + e^x) without overflow for large x or loss for very negative x. */
static inline double softplus_d(double x, ux_par p)
{
    return x > 0.0 ? x + log1p(exp(-x)) : log1p(exp(x));
}
static inline float softplus_f(float x, ux_par p) { return (float)softplus_d(x, p); }
static inline float softsign_f(float x, ux_par p) { return x / (1.0f + fabsf(x)); }
static inline double softsign_d(double x, ux_par p) { return x / (1.0 + fabs(x)); }
/* expm1 keeps e^x - 1 exact near 0, where e^x rounds to 1. */
static inline double elu_d(double x, ux_par p) { return x < 0.0 ? p.alpha * expm1(x) : x; }
static inline float elu_f(float x, ux_par p) { return x < 0.0f ? (float)elu_d(x, p) : x; }
static inline double selu_d(double x, ux_par p)
{
    return x <= 0.0 ? (double)p.gamma * p.alpha * expm1(x) : (double)p.gamma * x;
}
static inline float selu_f(float x, ux_par p)
{
    return x <= 0.0f ? (float)selu_d(x, p) : p.gamma * x;
}
/* max(0, x) + min(0, alpha (e^(x/alpha) - 1)); only one side is nonzero. */
static inline double celu_d(double x, ux_par p)
{
    return x > 0.0 ? x : x <= 0.0 ? p.alpha * expm1(x / p.alpha) : x;
}
static inline float celu_f(float x, ux_par p) { return x > 0.0f ? x : (float)celu_d(x, p); }
static inline float threlu_f(float x, ux_par p) { return x > p.alpha ? x : 0.0f; }
static inline double threlu_d(double x, ux_par p) { return x > p.alpha ? x : 0.0; }
/* Clamped with comparisons, not fminf/fmaxf, which would turn NaN into 0 or 1. */
static inline float hsigmoid_f(float x, ux_par p)
{
    float v = p.alpha * x + p.beta;
    v = v < 0.0f ? 0.0f : v;
    return v > 1.0f ? 1.0f : v;
}
static inline double hsigmoid_d(double x, ux_par p)
{
    double v = (double)p.alpha * x + p.beta;
    v = v < 0.0 ? 0.0 : v;
    return v > 1.0 ? 1.0 : v;
}
/* HardSwish is x * HardSigmoid(x) with alpha 1/6, beta 1/2 (set at launch). */
static inline float hswish_f(float x, ux_par p)
{
    float v = p.alpha * x + p.beta;
    v = sel_f(v < 0.0f, 0.0f, v);
    return x * sel_f(v > 1.0f, 1.0f, v);
}
static inline double hswish_d(double x, ux_par p) { return x * hsigmoid_d(x, p); }
static inline double mish_d(double x, ux_par p) { return x * tanh(softplus_d(x, p)); }
static inline float mish_f(float x, ux_par p) { return (float)mish_d(x, p); }
/* Shrink: lambd in alpha, bias in beta. */
static inline float shrink_f(float x, ux_par p)
{
    float lo = x + p.beta, hi = x - p.beta;
    return sel_f(x < -p.alpha, lo, sel_f(x > p.alpha, hi, 0.0f));
}
static inline double shrink_d(double x, ux_par p)
{
    return x < -(double)p.alpha ? x + p.beta : x > (double)p.alpha ? x - p.beta : 0.0;
}

/* ---- rows -------------------------------------------------------------------- */

/* Same-dtype float rows; float16 / bfloat16 are computed in float32. */
#define DEF_FLOAT_ROWS(OP) CGE_FLOAT_ROWS(OP, ux_args, ux_par, par)
DEF_FLOAT_ROWS(floor)
DEF_FLOAT_ROWS(ceil)
DEF_FLOAT_ROWS(round)
DEF_FLOAT_ROWS(sign)
DEF_FLOAT_ROWS(sin)
DEF_FLOAT_ROWS(cos)
DEF_FLOAT_ROWS(tan)
DEF_FLOAT_ROWS(asin)
DEF_FLOAT_ROWS(acos)
DEF_FLOAT_ROWS(atan)
DEF_FLOAT_ROWS(sinh)
DEF_FLOAT_ROWS(cosh)
DEF_FLOAT_ROWS(asinh)
DEF_FLOAT_ROWS(acosh)
DEF_FLOAT_ROWS(atanh)
DEF_FLOAT_ROWS(softplus)
DEF_FLOAT_ROWS(softsign)
DEF_FLOAT_ROWS(elu)
DEF_FLOAT_ROWS(selu)
DEF_FLOAT_ROWS(celu)
DEF_FLOAT_ROWS(threlu)
DEF_FLOAT_ROWS(hsigmoid)
DEF_FLOAT_ROWS(hswish)
DEF_FLOAT_ROWS(mish)
DEF_FLOAT_ROWS(shrink)

/* Float tests to bool: the half types widen first (exactly). */
#define DEF_TEST_ROWS(OP, EXPR)                                                          \
    static void OP##_f32(const void *in_, void *out_, int64_t n, const ux_args *a)      \
    {                                                                                    \
        const float *in = in_;                                                           \
        uint8_t *out = out_;                                                             \
        const ux_par p = a->par;                                                         \
        (void)p;                                                                         \
        for (int64_t k = 0; k < n; k++) {                                                \
            float x = in[k];                                                             \
            out[k] = (EXPR);                                                             \
        }                                                                                \
    }                                                                                    \
    static void OP##_f64(const void *in_, void *out_, int64_t n, const ux_args *a)      \
    {                                                                                    \
        const double *in = in_;                                                          \
        uint8_t *out = out_;                                                             \
        const ux_par p = a->par;                                                         \
        (void)p;                                                                         \
        for (int64_t k = 0; k < n; k++) {                                                \
            double x = in[k];                                                            \
            out[k] = (EXPR);                                                             \
        }                                                                                \
    }                                                                                    \
    static void OP##_f16(const void *in_, void *out_, int64_t n, const ux_args *a)      \
    {                                                                                    \
        const uint16_t *in = in_;                                                        \
        uint8_t *out = out_;                                                             \
        const ux_par p = a->par;                                                         \
        (void)p;                                                                         \
        for (int64_t k = 0; k < n; k++) {                                                \
            float x = cge_f16_to_f32(in[k]);                                             \
            out[k] = (EXPR);                                                             \
        }                                                                                \
    }                                                                                    \
    static void OP##_bf16(const void *in_, void *out_, int64_t n, const ux_args *a)     \
    {                                                                                    \
        const uint16_t *in = in_;                                                        \
        uint8_t *out = out_;                                                             \
        const ux_par p = a->par;                                                         \
        (void)p;                                                                         \
        for (int64_t k = 0; k < n; k++) {                                                \
            float x = cge_bf16_to_f32(in[k]);                                            \
            out[k] = (EXPR);                                                             \
        }                                                                                \
    }
DEF_TEST_ROWS(isnan, (uint8_t)(x != x))
DEF_TEST_ROWS(isinf, (uint8_t)((p.pos & (x == INFINITY)) | (p.neg & (x == -INFINITY))))

#define DEF_INT_ROW(NAME, T, EXPR)                                                       \
    static void NAME(const void *in_, void *out_, int64_t n, const ux_args *a)          \
    {                                                                                    \
        const T *in = in_;                                                               \
        T *out = out_;                                                                   \
        for (int64_t k = 0; k < n; k++) {                                                \
            T x = in[k];                                                                 \
            out[k] = (EXPR);                                                             \
        }                                                                                \
    }
#define DEF_INT_ROWS(S, T, SIGN)                                                         \
    DEF_INT_ROW(sign_##S, T, (T)(SIGN))                                                  \
    DEF_INT_ROW(bnot_##S, T, (T)~x)
#define SSIGN ((x > 0) - (x < 0))
#define USIGN (x != 0)
DEF_INT_ROWS(i8, int8_t, SSIGN)
DEF_INT_ROWS(i16, int16_t, SSIGN)
DEF_INT_ROWS(i32, int32_t, SSIGN)
DEF_INT_ROWS(i64, int64_t, SSIGN)
DEF_INT_ROWS(u8, uint8_t, USIGN)
DEF_INT_ROWS(u16, uint16_t, USIGN)
DEF_INT_ROWS(u32, uint32_t, USIGN)
DEF_INT_ROWS(u64, uint64_t, USIGN)

/* Any nonzero byte is true; the result is a canonical 0 or 1. */
DEF_INT_ROW(not_bool, uint8_t, (uint8_t)(x == 0))

/* Shrink on integers: computed in double, then converted back (truncating,
 * saturating), which is numpy's astype of the float result. */
static void shrink_int(const void *in, void *out, int64_t n, const ux_args *a);

#define FLOAT_ROWS(P) [CGE_F32] = P##_f32, [CGE_F64] = P##_f64, [CGE_F16] = P##_f16, \
                      [CGE_BF16] = P##_bf16
#define INT_ROWS(P) [CGE_I8] = P##_i8, [CGE_I16] = P##_i16, [CGE_I32] = P##_i32,        \
                    [CGE_I64] = P##_i64, [CGE_U8] = P##_u8, [CGE_U16] = P##_u16,         \
                    [CGE_U32] = P##_u32, [CGE_U64] = P##_u64
#define INT_GENERIC(F) [CGE_I8] = F, [CGE_I16] = F, [CGE_I32] = F, [CGE_I64] = F,       \
                       [CGE_U8] = F, [CGE_U16] = F, [CGE_U32] = F, [CGE_U64] = F

static const ux_row ux_rows[X_COUNT][CGE_DTYPE_MAX] = {
    [X_FLOOR] = {FLOAT_ROWS(floor)},
    [X_CEIL] = {FLOAT_ROWS(ceil)},
    [X_ROUND] = {FLOAT_ROWS(round)},
    [X_SIGN] = {FLOAT_ROWS(sign), INT_ROWS(sign)},
    [X_ISNAN] = {FLOAT_ROWS(isnan)},
    [X_ISINF] = {FLOAT_ROWS(isinf)},
    [X_NOT] = {[CGE_BOOL] = not_bool},
    [X_BNOT] = {INT_ROWS(bnot)},
    [X_SIN] = {FLOAT_ROWS(sin)},
    [X_COS] = {FLOAT_ROWS(cos)},
    [X_TAN] = {FLOAT_ROWS(tan)},
    [X_ASIN] = {FLOAT_ROWS(asin)},
    [X_ACOS] = {FLOAT_ROWS(acos)},
    [X_ATAN] = {FLOAT_ROWS(atan)},
    [X_SINH] = {FLOAT_ROWS(sinh)},
    [X_COSH] = {FLOAT_ROWS(cosh)},
    [X_ASINH] = {FLOAT_ROWS(asinh)},
    [X_ACOSH] = {FLOAT_ROWS(acosh)},
    [X_ATANH] = {FLOAT_ROWS(atanh)},
    [X_SOFTPLUS] = {FLOAT_ROWS(softplus)},
    [X_SOFTSIGN] = {FLOAT_ROWS(softsign)},
    [X_ELU] = {FLOAT_ROWS(elu)},
    [X_SELU] = {FLOAT_ROWS(selu)},
    [X_CELU] = {FLOAT_ROWS(celu)},
    [X_THRELU] = {FLOAT_ROWS(threlu)},
    [X_HSIGMOID] = {FLOAT_ROWS(hsigmoid)},
    [X_HSWISH] = {FLOAT_ROWS(hswish)},
    [X_MISH] = {FLOAT_ROWS(mish)},
    [X_SHRINK] = {FLOAT_ROWS(shrink), INT_GENERIC(shrink_int)},
};

#define SIGN_DTYPES CGE_DT_NUMERIC
#define SHRINK_DTYPES CGE_DT_NUMERIC
#define BOOL_DT CGE_DT(CGE_BOOL)
static const cge_dtype_set ux_dtypes[X_COUNT] = {
    [X_FLOOR] = CGE_DT_FLOAT,   [X_CEIL] = CGE_DT_FLOAT,    [X_ROUND] = CGE_DT_FLOAT,
    [X_SIGN] = SIGN_DTYPES,     [X_ISNAN] = CGE_DT_FLOAT,   [X_ISINF] = CGE_DT_FLOAT,
    [X_NOT] = BOOL_DT,          [X_BNOT] = CGE_DT_INT,      [X_SIN] = CGE_DT_FLOAT,
    [X_COS] = CGE_DT_FLOAT,     [X_TAN] = CGE_DT_FLOAT,     [X_ASIN] = CGE_DT_FLOAT,
    [X_ACOS] = CGE_DT_FLOAT,    [X_ATAN] = CGE_DT_FLOAT,    [X_SINH] = CGE_DT_FLOAT,
    [X_COSH] = CGE_DT_FLOAT,    [X_ASINH] = CGE_DT_FLOAT,   [X_ACOSH] = CGE_DT_FLOAT,
    [X_ATANH] = CGE_DT_FLOAT,   [X_SOFTPLUS] = CGE_DT_FLOAT, [X_SOFTSIGN] = CGE_DT_FLOAT,
    [X_ELU] = CGE_DT_FLOAT,     [X_SELU] = CGE_DT_FLOAT,    [X_CELU] = CGE_DT_FLOAT,
    [X_THRELU] = CGE_DT_FLOAT,  [X_HSIGMOID] = CGE_DT_FLOAT, [X_HSWISH] = CGE_DT_FLOAT,
    [X_MISH] = CGE_DT_FLOAT,    [X_SHRINK] = SHRINK_DTYPES,
};

static bool in_set(cge_dtype_set set, cge_dtype t)
{
    return t > CGE_DTYPE_UNDEFINED && t < CGE_DTYPE_MAX && (set & CGE_DT(t));
}

static bool to_bool(ux_op op) { return op == X_ISNAN || op == X_ISINF; }

static void shrink_int(const void *in, void *out, int64_t n, const ux_args *a)
{
    cge_dtype t = a->dtype;
    for (int64_t k = 0; k < n; k++)
        cge_store_from_double(t, out, k, shrink_d(cge_load_as_double(t, in, k), a->par));
}

/* The attribute values of `op`, with ONNX's defaults. */
static ux_par read_par(ux_op op, const cge_attrs *attrs)
{
    ux_par p = {0};
    switch (op) {
    case X_ELU:
    case X_CELU:
    case X_THRELU:
        p.alpha = cge_attrs_get_float(attrs, "alpha", 1.0f);
        break;
    case X_SELU:
        p.alpha = cge_attrs_get_float(attrs, "alpha", 1.67326319217681884765625f);
        p.gamma = cge_attrs_get_float(attrs, "gamma", 1.05070102214813232421875f);
        break;
    case X_HSIGMOID:
        p.alpha = cge_attrs_get_float(attrs, "alpha", 0.2f);
        p.beta = cge_attrs_get_float(attrs, "beta", 0.5f);
        break;
    case X_HSWISH:
        p.alpha = 1.0f / 6.0f;
        p.beta = 0.5f;
        break;
    case X_SHRINK:
        p.alpha = cge_attrs_get_float(attrs, "lambd", 0.5f);
        p.beta = cge_attrs_get_float(attrs, "bias", 0.0f);
        break;
    case X_ISINF:
        p.neg = cge_attrs_get_int(attrs, "detect_negative", 1) != 0;
        p.pos = cge_attrs_get_int(attrs, "detect_positive", 1) != 0;
        break;
    default:
        break;
    }
    return p;
}

/* ---- meta and launch ----------------------------------------------------------- */

static cge_status ux_infer(cge_infer_ctx *ctx, ux_op op)
{
    if (ctx->num_inputs != 1 || ctx->num_outputs != 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "expects 1 input and 1 output, got %d and %d", ctx->num_inputs,
                              ctx->num_outputs);
    const cge_tensor_desc *x = &ctx->inputs[0];
    if (!in_set(ux_dtypes[op], x->dtype))
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "input has dtype %s, which %s does not support",
                              cge_dtype_name(x->dtype), ux_names[op]);
    if (op == X_CELU && cge_attrs_get_float(ctx->attrs, "alpha", 1.0f) == 0.0f)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "Celu's alpha must not be 0");
    ctx->outputs[0].dtype = to_bool(op) ? CGE_BOOL : x->dtype;
    ctx->outputs[0].shape = x->shape;
    return CGE_OK;
}

static void ux_block(int64_t blk, int64_t nb, void *p)
{
    const ux_args *a = p;
    int64_t begin, end;
    cge_block_range(a->numel, blk, nb, &begin, &end);
    if (begin < end)
        a->row((const char *)a->in + (size_t)begin * a->size_in,
               (char *)a->out + (size_t)begin * a->size_out, end - begin, a);
}

/* Dense same-shape input and output with buffers large enough. */
static cge_status check_io(const cge_kernel_ctx *ctx, const cge_tensor *x, const cge_tensor *y)
{
    if (!cge_shape_is_static(&x->shape) || !cge_shape_equal(&x->shape, &y->shape)) {
        char sx[CGE_SHAPE_STR_MAX], sy[CGE_SHAPE_STR_MAX];
        return cge_kernel_error(ctx, CGE_ERR_SHAPE,
                                "input %s and output %s must have one static shape",
                                cge_shape_str(&x->shape, sx, sizeof sx),
                                cge_shape_str(&y->shape, sy, sizeof sy));
    }
    size_t nx = cge_tensor_nbytes(x->dtype, &x->shape), ny = cge_tensor_nbytes(y->dtype, &y->shape);
    if (nx && (!x->data || x->bytes < nx || !y->data || y->bytes < ny))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                "buffers too small or missing: input %zu of %zu bytes, "
                                "output %zu of %zu",
                                x->data ? x->bytes : (size_t)0, nx,
                                y->data ? y->bytes : (size_t)0, ny);
    return CGE_OK;
}

static cge_status ux_launch(const cge_kernel_ctx *ctx, cge_stream *stream, ux_op op)
{
    if (ctx->num_inputs != 1 || ctx->num_outputs != 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                "expects 1 input and 1 output, got %d and %d", ctx->num_inputs,
                                ctx->num_outputs);
    const cge_tensor *x = &ctx->inputs[0];
    cge_tensor *y = &ctx->outputs[0];
    ux_args args;
    memset(&args, 0, sizeof args);
    cge_dtype want = to_bool(op) ? CGE_BOOL : x->dtype;
    if (in_set(ux_dtypes[op], x->dtype) && y->dtype == want)
        args.row = ux_rows[op][x->dtype];
    if (!args.row)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "no %s kernel for %s -> %s", ux_names[op],
                                cge_dtype_name(x->dtype), cge_dtype_name(y->dtype));
    cge_status st = check_io(ctx, x, y);
    if (st)
        return st;
    args.numel = cge_shape_numel(&x->shape);
    if (args.numel == 0)
        return CGE_OK;
    args.in = x->data;
    args.out = y->data;
    args.size_in = cge_dtype_size(x->dtype);
    args.size_out = cge_dtype_size(y->dtype);
    args.par = read_par(op, ctx->attrs);
    args.dtype = x->dtype;
    int64_t nb = cge_blocks_for(args.numel, MIN_PER_BLOCK, ctx->num_threads);
    return cge_launch(stream, ux_block, nb, &args, sizeof args);
}

#define DEF_OP_FNS(NAME, OP)                                                             \
    static cge_status NAME##_infer(cge_infer_ctx *ctx) { return ux_infer(ctx, OP); }     \
    static cge_status NAME##_launch(const cge_kernel_ctx *ctx, cge_stream *stream)       \
    {                                                                                    \
        return ux_launch(ctx, stream, OP);                                               \
    }
DEF_OP_FNS(floor, X_FLOOR)
DEF_OP_FNS(ceil, X_CEIL)
DEF_OP_FNS(round, X_ROUND)
DEF_OP_FNS(sign, X_SIGN)
DEF_OP_FNS(isnan, X_ISNAN)
DEF_OP_FNS(isinf, X_ISINF)
DEF_OP_FNS(not, X_NOT)
DEF_OP_FNS(bnot, X_BNOT)
DEF_OP_FNS(sin, X_SIN)
DEF_OP_FNS(cos, X_COS)
DEF_OP_FNS(tan, X_TAN)
DEF_OP_FNS(asin, X_ASIN)
DEF_OP_FNS(acos, X_ACOS)
DEF_OP_FNS(atan, X_ATAN)
DEF_OP_FNS(sinh, X_SINH)
DEF_OP_FNS(cosh, X_COSH)
DEF_OP_FNS(asinh, X_ASINH)
DEF_OP_FNS(acosh, X_ACOSH)
DEF_OP_FNS(atanh, X_ATANH)
DEF_OP_FNS(softplus, X_SOFTPLUS)
DEF_OP_FNS(softsign, X_SOFTSIGN)
DEF_OP_FNS(elu, X_ELU)
DEF_OP_FNS(selu, X_SELU)
DEF_OP_FNS(celu, X_CELU)
DEF_OP_FNS(threlu, X_THRELU)
DEF_OP_FNS(hsigmoid, X_HSIGMOID)
DEF_OP_FNS(hswish, X_HSWISH)
DEF_OP_FNS(mish, X_MISH)
DEF_OP_FNS(shrink, X_SHRINK)

/* ---- Clip ---------------------------------------------------------------------- */

/* min and max are optional scalar inputs (since opset 11); absent means the
 * dtype's lowest / highest. Their values are read inside the kernel, on the
 * stream, since an earlier task may still be producing them at launch. */
typedef struct clip_args {
    const void *x, *lo, *hi;
    void *y;
    int64_t numel;
    cge_dtype dtype;
} clip_args;

/* min(max(x, lo), hi) as numpy's clip: lo > hi gives hi; NaN stays NaN. */
#define DEF_CLIP(S, T, LOWEST, HIGHEST)                                                  \
    static void clip_##S(const clip_args *a, int64_t begin, int64_t end)                \
    {                                                                                    \
        const T *x = (const T *)a->x + begin;                                            \
        T *y = (T *)a->y + begin;                                                        \
        const T lo = a->lo ? *(const T *)a->lo : (LOWEST);                               \
        const T hi = a->hi ? *(const T *)a->hi : (HIGHEST);                              \
        for (int64_t k = 0; k < end - begin; k++) {                                      \
            T v = x[k] < lo ? lo : x[k];                                                 \
            y[k] = v > hi ? hi : v;                                                      \
        }                                                                                \
    }
DEF_CLIP(f32, float, -INFINITY, INFINITY)
DEF_CLIP(f64, double, -INFINITY, INFINITY)
DEF_CLIP(i8, int8_t, INT8_MIN, INT8_MAX)
DEF_CLIP(i16, int16_t, INT16_MIN, INT16_MAX)
DEF_CLIP(i32, int32_t, INT32_MIN, INT32_MAX)
DEF_CLIP(i64, int64_t, INT64_MIN, INT64_MAX)
DEF_CLIP(u8, uint8_t, 0, UINT8_MAX)
DEF_CLIP(u16, uint16_t, 0, UINT16_MAX)
DEF_CLIP(u32, uint32_t, 0, UINT32_MAX)
DEF_CLIP(u64, uint64_t, 0, UINT64_MAX)

#define DEF_CLIP_HALF(S, TOF, FROMF)                                                     \
    static void clip_##S(const clip_args *a, int64_t begin, int64_t end)                \
    {                                                                                    \
        const uint16_t *x = (const uint16_t *)a->x + begin;                              \
        uint16_t *y = (uint16_t *)a->y + begin;                                          \
        const float lo = a->lo ? TOF(*(const uint16_t *)a->lo) : -INFINITY;              \
        const float hi = a->hi ? TOF(*(const uint16_t *)a->hi) : INFINITY;               \
        for (int64_t k = 0; k < end - begin; k++) {                                      \
            float v = TOF(x[k]);                                                         \
            v = v < lo ? lo : v;                                                         \
            y[k] = FROMF(v > hi ? hi : v);                                               \
        }                                                                                \
    }
DEF_CLIP_HALF(f16, cge_f16_to_f32, cge_f32_to_f16)
DEF_CLIP_HALF(bf16, cge_bf16_to_f32, cge_f32_to_bf16)

static void clip_block(int64_t blk, int64_t nb, void *p)
{
    const clip_args *a = p;
    int64_t begin, end;
    cge_block_range(a->numel, blk, nb, &begin, &end);
    if (begin >= end)
        return;
    switch (a->dtype) {
    case CGE_F32: clip_f32(a, begin, end); break;
    case CGE_F64: clip_f64(a, begin, end); break;
    case CGE_F16: clip_f16(a, begin, end); break;
    case CGE_BF16: clip_bf16(a, begin, end); break;
    case CGE_I8: clip_i8(a, begin, end); break;
    case CGE_I16: clip_i16(a, begin, end); break;
    case CGE_I32: clip_i32(a, begin, end); break;
    case CGE_I64: clip_i64(a, begin, end); break;
    case CGE_U8: clip_u8(a, begin, end); break;
    case CGE_U16: clip_u16(a, begin, end); break;
    case CGE_U32: clip_u32(a, begin, end); break;
    case CGE_U64: clip_u64(a, begin, end); break;
    default: break;
    }
}

static cge_status clip_infer(cge_infer_ctx *ctx)
{
    if (ctx->num_inputs < 1 || ctx->num_inputs > 3 || ctx->num_outputs != 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "expects 1 to 3 inputs and 1 output, got %d and %d",
                              ctx->num_inputs, ctx->num_outputs);
    const cge_tensor_desc *x = &ctx->inputs[0];
    if (!in_set(CGE_DT_NUMERIC, x->dtype))
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "input has dtype %s; Clip takes numeric types",
                              cge_dtype_name(x->dtype));
    for (int32_t i = 1; i < ctx->num_inputs; i++) {
        const cge_tensor_desc *b = &ctx->inputs[i];
        if (b->dtype == CGE_DTYPE_UNDEFINED)
            continue;
        if (b->dtype != x->dtype)
            return cge_meta_error(ctx, CGE_ERR_DTYPE, "%s has dtype %s; it must be the input's %s",
                                  i == 1 ? "min" : "max", cge_dtype_name(b->dtype),
                                  cge_dtype_name(x->dtype));
        int64_t n = cge_shape_numel(&b->shape);
        if (n != 1) {
            char s[CGE_SHAPE_STR_MAX];
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "%s has shape %s; it must be a scalar",
                                  i == 1 ? "min" : "max", cge_shape_str(&b->shape, s, sizeof s));
        }
    }
    ctx->outputs[0].dtype = x->dtype;
    ctx->outputs[0].shape = x->shape;
    return CGE_OK;
}

static cge_status clip_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_inputs < 1 || ctx->num_inputs > 3 || ctx->num_outputs != 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                "expects 1 to 3 inputs and 1 output, got %d and %d",
                                ctx->num_inputs, ctx->num_outputs);
    const cge_tensor *x = &ctx->inputs[0];
    cge_tensor *y = &ctx->outputs[0];
    clip_args args;
    memset(&args, 0, sizeof args);
    if (!in_set(CGE_DT_NUMERIC, x->dtype) || y->dtype != x->dtype)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "no Clip kernel for %s -> %s",
                                cge_dtype_name(x->dtype), cge_dtype_name(y->dtype));
    cge_status st = check_io(ctx, x, y);
    if (st)
        return st;
    const void *bounds[2] = {NULL, NULL};
    for (int32_t i = 1; i < ctx->num_inputs; i++) {
        const cge_tensor *b = &ctx->inputs[i];
        if (!b->data)
            continue; /* absent */
        if (b->dtype != x->dtype || cge_shape_numel(&b->shape) != 1 ||
            b->bytes < cge_dtype_size(b->dtype))
            return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                    "%s must be one element of dtype %s",
                                    i == 1 ? "min" : "max", cge_dtype_name(x->dtype));
        bounds[i - 1] = b->data;
    }
    args.numel = cge_shape_numel(&x->shape);
    if (args.numel == 0)
        return CGE_OK;
    args.x = x->data;
    args.y = y->data;
    args.lo = bounds[0];
    args.hi = bounds[1];
    args.dtype = x->dtype;
    int64_t nb = cge_blocks_for(args.numel, MIN_PER_BLOCK, ctx->num_threads);
    return cge_launch(stream, clip_block, nb, &args, sizeof args);
}

/* ---- Dropout ------------------------------------------------------------------- */

/* Inference only: the output is the input and the mask all true. Training
 * with a nonzero ratio would need random masks, which cge does not produce:
 * meta refuses it. When training_mode (or, with it, ratio) is not known at
 * compile time, the outputs get dynamic dims, so the session runs the node
 * with values at hand and meta decides then. */
static cge_status dropout_infer(cge_infer_ctx *ctx)
{
    if (ctx->num_inputs < 1 || ctx->num_inputs > 3 || ctx->num_outputs < 1 ||
        ctx->num_outputs > 2)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "expects 1 to 3 inputs and 1 or 2 outputs, got %d and %d",
                              ctx->num_inputs, ctx->num_outputs);
    const cge_tensor_desc *x = &ctx->inputs[0];
    if (!in_set(CGE_DT_FLOAT, x->dtype))
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "data has dtype %s; Dropout takes floats",
                              cge_dtype_name(x->dtype));
    const cge_tensor_desc *r = ctx->num_inputs > 1 ? &ctx->inputs[1] : NULL;
    const cge_tensor_desc *t = ctx->num_inputs > 2 ? &ctx->inputs[2] : NULL;
    bool has_r = r && r->dtype != CGE_DTYPE_UNDEFINED, has_t = t && t->dtype != CGE_DTYPE_UNDEFINED;
    if (has_r && (!in_set(CGE_DT_FLOAT, r->dtype) || cge_shape_numel(&r->shape) != 1))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "ratio must be a float scalar (it is %s)", cge_dtype_name(r->dtype));
    if (has_t && (t->dtype != CGE_BOOL || cge_shape_numel(&t->shape) != 1))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "training_mode must be a bool scalar");
    bool unknown = false;
    if (has_t) {
        const void *tv = ctx->input_values[2];
        const void *rv = has_r ? ctx->input_values[1] : NULL;
        if (!tv) {
            unknown = true;
        } else if (*(const uint8_t *)tv) {
            /* Training: only ratio 0 (identity) is supported; absent ratio is 0.5. */
            if (has_r && !rv) {
                unknown = true;
            } else {
                double ratio = has_r ? cge_load_as_double(r->dtype, rv, 0) : 0.5;
                if (ratio != 0.0)
                    return cge_meta_error(ctx, CGE_ERR_UNSUPPORTED,
                                          "training mode with ratio %g is not supported "
                                          "(random masks); only inference or ratio 0",
                                          ratio);
            }
        }
    }
    cge_shape shape = x->shape;
    if (unknown) {
        if (shape.rank == 0)
            return cge_meta_error(ctx, CGE_ERR_UNSUPPORTED,
                                  "training_mode must be known before running on a scalar");
        for (int32_t d = 0; d < shape.rank; d++)
            shape.dims[d] = CGE_DIM_DYNAMIC;
    }
    ctx->outputs[0].dtype = x->dtype;
    ctx->outputs[0].shape = shape;
    if (ctx->num_outputs > 1) {
        ctx->outputs[1].dtype = CGE_BOOL;
        ctx->outputs[1].shape = shape;
    }
    return CGE_OK;
}

typedef struct dropout_args {
    const void *x;
    void *y;
    uint8_t *mask;
    size_t esize;
    int64_t numel;
} dropout_args;

static void dropout_block(int64_t blk, int64_t nb, void *p)
{
    const dropout_args *a = p;
    int64_t begin, end;
    cge_block_range(a->numel, blk, nb, &begin, &end);
    if (begin >= end)
        return;
    if (a->y != a->x)
        memcpy((char *)a->y + (size_t)begin * a->esize,
               (const char *)a->x + (size_t)begin * a->esize, (size_t)(end - begin) * a->esize);
    if (a->mask)
        memset(a->mask + begin, 1, (size_t)(end - begin));
}

static cge_status dropout_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_inputs < 1 || ctx->num_outputs < 1 || ctx->num_outputs > 2)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                "expects 1 to 3 inputs and 1 or 2 outputs, got %d and %d",
                                ctx->num_inputs, ctx->num_outputs);
    const cge_tensor *x = &ctx->inputs[0];
    cge_tensor *y = &ctx->outputs[0];
    cge_tensor *m = ctx->num_outputs > 1 && ctx->outputs[1].data ? &ctx->outputs[1] : NULL;
    if (!in_set(CGE_DT_FLOAT, x->dtype) || y->dtype != x->dtype || (m && m->dtype != CGE_BOOL))
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "no Dropout kernel for %s -> %s",
                                cge_dtype_name(x->dtype), cge_dtype_name(y->dtype));
    cge_status st = check_io(ctx, x, y);
    if (!st && m)
        st = check_io(ctx, x, m);
    if (st)
        return st;
    dropout_args args = {.x = x->data, .y = y->data, .mask = m ? m->data : NULL,
                         .esize = cge_dtype_size(x->dtype), .numel = cge_shape_numel(&x->shape)};
    if (args.numel == 0)
        return CGE_OK;
    int64_t nb = cge_blocks_for(args.numel, MIN_PER_BLOCK * 4, ctx->num_threads);
    return cge_launch(stream, dropout_block, nb, &args, sizeof args);
}

/* ---- Hardmax ------------------------------------------------------------------- */

/* Opset 13: 1 at the first maximum along `axis`, 0 elsewhere. NaN counts as
 * the maximum, as numpy's argmax (the reference) has it. */
typedef struct hm_args {
    const void *x;
    void *y;
    int64_t outer, dim, inner;
    cge_dtype dtype;
} hm_args;

#define DEF_HM(S, T, LOAD, ONE, ZERO)                                                    \
    static void hm_##S(const hm_args *a, int64_t begin, int64_t end)                    \
    {                                                                                    \
        const T *x = a->x;                                                               \
        T *y = a->y;                                                                     \
        int64_t dim = a->dim, inner = a->inner;                                          \
        for (int64_t l = begin; l < end; l++) {                                          \
            int64_t base = (l / inner) * dim * inner + l % inner;                        \
            int64_t best = 0;                                                            \
            double bv = LOAD(x[base]);                                                   \
            for (int64_t j = 1; j < dim && bv == bv; j++) {                              \
                double v = LOAD(x[base + j * inner]);                                    \
                if (v > bv || v != v) {                                                  \
                    bv = v;                                                              \
                    best = j;                                                            \
                }                                                                        \
            }                                                                            \
            for (int64_t j = 0; j < dim; j++)                                            \
                y[base + j * inner] = j == best ? (ONE) : (ZERO);                        \
        }                                                                                \
    }
#define LOAD_PLAIN(v) (double)(v)
DEF_HM(f32, float, LOAD_PLAIN, 1.0f, 0.0f)
DEF_HM(f64, double, LOAD_PLAIN, 1.0, 0.0)
DEF_HM(f16, uint16_t, cge_f16_to_f32, (uint16_t)0x3c00, (uint16_t)0)
DEF_HM(bf16, uint16_t, cge_bf16_to_f32, (uint16_t)0x3f80, (uint16_t)0)

static void hm_block(int64_t blk, int64_t nb, void *p)
{
    const hm_args *a = p;
    int64_t begin, end;
    cge_block_range(a->outer * a->inner, blk, nb, &begin, &end);
    switch (a->dtype) {
    case CGE_F32: hm_f32(a, begin, end); break;
    case CGE_F64: hm_f64(a, begin, end); break;
    case CGE_F16: hm_f16(a, begin, end); break;
    case CGE_BF16: hm_bf16(a, begin, end); break;
    default: break;
    }
}

static cge_status hm_infer(cge_infer_ctx *ctx)
{
    if (ctx->num_inputs != 1 || ctx->num_outputs != 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "expects 1 input and 1 output, got %d and %d", ctx->num_inputs,
                              ctx->num_outputs);
    const cge_tensor_desc *x = &ctx->inputs[0];
    if (!in_set(CGE_DT_FLOAT, x->dtype))
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "input has dtype %s; Hardmax takes floats",
                              cge_dtype_name(x->dtype));
    int64_t axis = cge_attrs_get_int(ctx->attrs, "axis", -1);
    int32_t ax;
    if (!cge_axis_normalize(axis, x->shape.rank, false, &ax))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "axis %lld is out of range for rank %d",
                              (long long)axis, x->shape.rank);
    ctx->outputs[0].dtype = x->dtype;
    ctx->outputs[0].shape = x->shape;
    return CGE_OK;
}

static cge_status hm_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_inputs != 1 || ctx->num_outputs != 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                "expects 1 input and 1 output, got %d and %d", ctx->num_inputs,
                                ctx->num_outputs);
    const cge_tensor *x = &ctx->inputs[0];
    cge_tensor *y = &ctx->outputs[0];
    if (!in_set(CGE_DT_FLOAT, x->dtype) || y->dtype != x->dtype)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "no Hardmax kernel for %s -> %s",
                                cge_dtype_name(x->dtype), cge_dtype_name(y->dtype));
    cge_status st = check_io(ctx, x, y);
    if (st)
        return st;
    int32_t ax;
    if (!cge_axis_normalize(cge_attrs_get_int(ctx->attrs, "axis", -1), x->shape.rank, false, &ax))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "axis out of range for rank %d",
                                x->shape.rank);
    hm_args args = {.x = x->data, .y = y->data, .outer = 1, .inner = 1, .dtype = x->dtype};
    args.dim = x->shape.dims[ax];
    for (int32_t d = 0; d < ax; d++)
        args.outer *= x->shape.dims[d];
    for (int32_t d = ax + 1; d < x->shape.rank; d++)
        args.inner *= x->shape.dims[d];
    if (args.outer * args.inner * args.dim == 0)
        return CGE_OK;
    int64_t lines = args.outer * args.inner;
    int64_t nb = cge_blocks_for(lines, (MIN_PER_BLOCK + args.dim - 1) / args.dim,
                                ctx->num_threads);
    return cge_launch(stream, hm_block, nb, &args, sizeof args);
}

/* ---- schemas ------------------------------------------------------------------- */

/* Same-dtype ops may write into their input's buffer; the float tests write
 * one byte per wider element, so blocks in parallel would overwrite input
 * that others still read: never in place. Hardmax reads a whole line before
 * writing it, and lines are disjoint. */
#define KERNEL(NAME, DTYPES, INPLACE)                                                    \
    static const cge_kernel_def NAME##_kernels[] = {                                     \
        {.engine = "cpu", .dtypes = DTYPES, .launch = NAME##_launch, .inplace_input = INPLACE}}
KERNEL(floor, CGE_DT_FLOAT, 0);
KERNEL(ceil, CGE_DT_FLOAT, 0);
KERNEL(round, CGE_DT_FLOAT, 0);
KERNEL(sign, SIGN_DTYPES, 0);
KERNEL(isnan, CGE_DT_FLOAT, -1);
KERNEL(isinf, CGE_DT_FLOAT, -1);
KERNEL(not, BOOL_DT, 0);
KERNEL(bnot, CGE_DT_INT, 0);
KERNEL(sin, CGE_DT_FLOAT, 0);
KERNEL(cos, CGE_DT_FLOAT, 0);
KERNEL(tan, CGE_DT_FLOAT, 0);
KERNEL(asin, CGE_DT_FLOAT, 0);
KERNEL(acos, CGE_DT_FLOAT, 0);
KERNEL(atan, CGE_DT_FLOAT, 0);
KERNEL(sinh, CGE_DT_FLOAT, 0);
KERNEL(cosh, CGE_DT_FLOAT, 0);
KERNEL(asinh, CGE_DT_FLOAT, 0);
KERNEL(acosh, CGE_DT_FLOAT, 0);
KERNEL(atanh, CGE_DT_FLOAT, 0);
KERNEL(softplus, CGE_DT_FLOAT, 0);
KERNEL(softsign, CGE_DT_FLOAT, 0);
KERNEL(elu, CGE_DT_FLOAT, 0);
KERNEL(selu, CGE_DT_FLOAT, 0);
KERNEL(celu, CGE_DT_FLOAT, 0);
KERNEL(threlu, CGE_DT_FLOAT, 0);
KERNEL(hsigmoid, CGE_DT_FLOAT, 0);
KERNEL(hswish, CGE_DT_FLOAT, 0);
KERNEL(mish, CGE_DT_FLOAT, 0);
KERNEL(shrink, SHRINK_DTYPES, 0);
KERNEL(clip, CGE_DT_NUMERIC, 0);
KERNEL(dropout, CGE_DT_FLOAT, 0);
KERNEL(hm, CGE_DT_FLOAT, 0);

#define ARGS(NAME, IN, OUT, XN, YN)                                                      \
    static const cge_arg_def NAME##_in[] = {{XN, 0, IN, "input"}};                       \
    static const cge_arg_def NAME##_out[] = {{YN, 0, OUT, "result, same shape"}}
ARGS(flt, CGE_DT_FLOAT, CGE_DT_FLOAT, "X", "Y");
ARGS(fltio, CGE_DT_FLOAT, CGE_DT_FLOAT, "input", "output");
ARGS(sign, SIGN_DTYPES, SIGN_DTYPES, "input", "output");
ARGS(test, CGE_DT_FLOAT, BOOL_DT, "X", "Y");
ARGS(not, BOOL_DT, BOOL_DT, "X", "Y");
ARGS(bnot, CGE_DT_INT, CGE_DT_INT, "X", "Y");
ARGS(shrink, SHRINK_DTYPES, SHRINK_DTYPES, "input", "output");

static const cge_attr_def alpha1_attrs[] = {
    {.name = "alpha", .kind = CGE_ATTR_FLOAT, .default_f = 1.0f, .doc = "coefficient"}};
static const cge_attr_def selu_attrs[] = {
    {.name = "alpha", .kind = CGE_ATTR_FLOAT, .default_f = 1.67326319217681884765625f,
     .doc = "coefficient of the negative part"},
    {.name = "gamma", .kind = CGE_ATTR_FLOAT, .default_f = 1.05070102214813232421875f,
     .doc = "scale"}};
static const cge_attr_def hsigmoid_attrs[] = {
    {.name = "alpha", .kind = CGE_ATTR_FLOAT, .default_f = 0.2f, .doc = "slope"},
    {.name = "beta", .kind = CGE_ATTR_FLOAT, .default_f = 0.5f, .doc = "offset"}};
static const cge_attr_def shrink_attrs[] = {
    {.name = "bias", .kind = CGE_ATTR_FLOAT, .default_f = 0.0f, .doc = "added/subtracted"},
    {.name = "lambd", .kind = CGE_ATTR_FLOAT, .default_f = 0.5f, .doc = "threshold"}};
static const cge_attr_def isinf_attrs[] = {
    {.name = "detect_negative", .kind = CGE_ATTR_INT, .default_i = 1, .doc = "map -inf to true"},
    {.name = "detect_positive", .kind = CGE_ATTR_INT, .default_i = 1, .doc = "map +inf to true"}};
static const cge_attr_def hm_attrs[] = {
    {.name = "axis", .kind = CGE_ATTR_INT, .default_i = -1, .doc = "axis of the maximum"}};
static const cge_attr_def dropout_attrs[] = {
    {.name = "seed", .kind = CGE_ATTR_INT, .doc = "random seed (unused: inference only)"}};

static const cge_arg_def clip_in[] = {
    {"input", 0, CGE_DT_NUMERIC, "values to clip"},
    {"min", CGE_ARG_OPTIONAL, CGE_DT_NUMERIC, "lower bound, a scalar (default: lowest)"},
    {"max", CGE_ARG_OPTIONAL, CGE_DT_NUMERIC, "upper bound, a scalar (default: highest)"},
};
static const cge_arg_def clip_out[] = {{"output", 0, CGE_DT_NUMERIC, "clipped values"}};
static const cge_arg_def dropout_in[] = {
    {"data", 0, CGE_DT_FLOAT, "input"},
    {"ratio", CGE_ARG_OPTIONAL, CGE_DT_FLOAT, "drop probability, a scalar (default 0.5)"},
    {"training_mode", CGE_ARG_OPTIONAL, BOOL_DT, "a scalar; true supported only with ratio 0"},
};
static const cge_arg_def dropout_out[] = {
    {"output", 0, CGE_DT_FLOAT, "the input (inference)"},
    {"mask", CGE_ARG_OPTIONAL, BOOL_DT, "all true (inference)"},
};

#define UX_DEF(NAME, SINCE, ARGN, KNAME, ATTRS, NATTRS, DOC)                             \
    {.name = NAME, .domain = CGE_DOMAIN_DEFAULT, .since_version = SINCE,                 \
     .inputs = ARGN##_in, .num_inputs = 1, .outputs = ARGN##_out, .num_outputs = 1,      \
     .attrs = ATTRS, .num_attrs = NATTRS, .infer = KNAME##_infer,                        \
     .kernels = KNAME##_kernels, .num_kernels = 1, .doc = DOC}

static const cge_op_def unary_ext_ops[] = {
    UX_DEF("Floor", 13, flt, floor, NULL, 0, "largest integer <= X"),
    UX_DEF("Ceil", 13, flt, ceil, NULL, 0, "smallest integer >= X"),
    UX_DEF("Round", 11, flt, round, NULL, 0, "nearest integer, halves to even"),
    UX_DEF("Sign", 13, sign, sign, NULL, 0, "-1, 0 or 1 (NaN stays NaN)"),
    UX_DEF("IsNaN", 13, test, isnan, NULL, 0, "X is NaN"),
    UX_DEF("IsInf", 10, test, isinf, isinf_attrs, 2, "X is +inf and/or -inf"),
    UX_DEF("Not", 1, not, not, NULL, 0, "logical not"),
    UX_DEF("BitwiseNot", 18, bnot, bnot, NULL, 0, "~X"),
    UX_DEF("Sin", 7, fltio, sin, NULL, 0, "sine"),
    UX_DEF("Cos", 7, fltio, cos, NULL, 0, "cosine"),
    UX_DEF("Tan", 7, fltio, tan, NULL, 0, "tangent"),
    UX_DEF("Asin", 7, fltio, asin, NULL, 0, "arcsine"),
    UX_DEF("Acos", 7, fltio, acos, NULL, 0, "arccosine"),
    UX_DEF("Atan", 7, fltio, atan, NULL, 0, "arctangent"),
    UX_DEF("Sinh", 9, fltio, sinh, NULL, 0, "hyperbolic sine"),
    UX_DEF("Cosh", 9, fltio, cosh, NULL, 0, "hyperbolic cosine"),
    UX_DEF("Asinh", 9, fltio, asinh, NULL, 0, "inverse hyperbolic sine"),
    UX_DEF("Acosh", 9, fltio, acosh, NULL, 0, "inverse hyperbolic cosine"),
    UX_DEF("Atanh", 9, fltio, atanh, NULL, 0, "inverse hyperbolic tangent"),
    UX_DEF("Softplus", 1, flt, softplus, NULL, 0, "log(1 + e^X)"),
    UX_DEF("Softsign", 1, fltio, softsign, NULL, 0, "X / (1 + |X|)"),
    UX_DEF("Elu", 6, flt, elu, alpha1_attrs, 1, "X < 0 ? alpha (e^X - 1) : X"),
    UX_DEF("Selu", 6, flt, selu, selu_attrs, 2, "gamma (X <= 0 ? alpha (e^X - 1) : X)"),
    UX_DEF("Celu", 12, flt, celu, alpha1_attrs, 1,
           "max(0, X) + min(0, alpha (e^(X/alpha) - 1))"),
    UX_DEF("ThresholdedRelu", 10, flt, threlu, alpha1_attrs, 1, "X > alpha ? X : 0"),
    UX_DEF("HardSigmoid", 6, flt, hsigmoid, hsigmoid_attrs, 2,
           "max(0, min(1, alpha X + beta))"),
    UX_DEF("HardSwish", 14, flt, hswish, NULL, 0, "X max(0, min(1, X / 6 + 1/2))"),
    UX_DEF("Mish", 18, flt, mish, NULL, 0, "X tanh(softplus(X))"),
    UX_DEF("Shrink", 9, shrink, shrink, shrink_attrs, 2,
           "X < -lambd ? X + bias : X > lambd ? X - bias : 0"),
    {.name = "Clip", .domain = CGE_DOMAIN_DEFAULT, .since_version = 13, .inputs = clip_in,
     .num_inputs = 3, .outputs = clip_out, .num_outputs = 1, .infer = clip_infer,
     .kernels = clip_kernels, .num_kernels = 1,
     .doc = "min(max(input, min), max); bounds are optional scalar inputs"},
    {.name = "Dropout", .domain = CGE_DOMAIN_DEFAULT, .since_version = 13, .inputs = dropout_in,
     .num_inputs = 3, .outputs = dropout_out, .num_outputs = 2, .attrs = dropout_attrs,
     .num_attrs = 1, .infer = dropout_infer, .kernels = dropout_kernels, .num_kernels = 1,
     .doc = "inference: output = data, mask all true; training only with ratio 0"},
    {.name = "Hardmax", .domain = CGE_DOMAIN_DEFAULT, .since_version = 13, .inputs = fltio_in,
     .num_inputs = 1, .outputs = fltio_out, .num_outputs = 1, .attrs = hm_attrs,
     .num_attrs = 1, .infer = hm_infer, .kernels = hm_kernels, .num_kernels = 1,
     .doc = "1 at the first maximum along axis, 0 elsewhere"},
};

const cge_op_def *cge_ops_unary_ext(int32_t *count)
{
    if (count)
        *count = (int32_t)(sizeof unary_ext_ops / sizeof unary_ext_ops[0]);
    return unary_ext_ops;
}
