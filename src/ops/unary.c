/* The elementwise unary family: math (Neg Abs Exp Log Sqrt ... Gelu), rounding, tests
 * to bool, logic, trigonometry, activations, Cast and Identity in one table driven by one
 * meta and one launch (row kernels: unary_rows.h); plus Clip, Dropout and Hardmax. */
#include <math.h>
#include <string.h>

#include "ops/builtin.h"
#include "ops/half_convert.h"
#include "ops/kernel_util.h"
#include "ops/sequence_util.h"
#include "ops/string_util.h"
#include "ops/unary_rows.h"

#define MIN_PER_BLOCK 16384

typedef enum un_op {
    U_NEG, U_ABS, U_EXP, U_LOG, U_SQRT, U_RECIP, U_RELU, U_LEAKY, U_SIGMOID, U_TANH, U_ERF,
    U_GELU, U_GELU_TANH, /* Gelu with approximate="tanh": same op, another row */
    U_CAST, U_IDENTITY,
    U_FLOOR, U_CEIL, U_ROUND, U_SIGN, U_ISNAN, U_ISINF, U_NOT, U_BNOT,
    U_SIN, U_COS, U_TAN, U_ASIN, U_ACOS, U_ATAN, U_SINH, U_COSH, U_ASINH, U_ACOSH, U_ATANH,
    U_SOFTPLUS, U_SOFTSIGN, U_ELU, U_SELU, U_CELU, U_THRELU, U_HSIGMOID, U_HSWISH, U_MISH,
    U_SHRINK, U_COUNT
} un_op;

/* ---- the table -------------------------------------------------------------- */

#define FLOAT_ROWS(P) [CGE_F32] = P##_f32, [CGE_F64] = P##_f64, [CGE_F16] = P##_f16,     \
                      [CGE_BF16] = P##_bf16
#define SINT_ROWS(P) [CGE_I8] = P##_i8, [CGE_I16] = P##_i16, [CGE_I32] = P##_i32,        \
                     [CGE_I64] = P##_i64
#define UINT_ROWS(P) [CGE_U8] = P##_u8, [CGE_U16] = P##_u16, [CGE_U32] = P##_u32,        \
                     [CGE_U64] = P##_u64
#define UINT_SAME(F) [CGE_U8] = F, [CGE_U16] = F, [CGE_U32] = F, [CGE_U64] = F
#define INT_SAME(F) [CGE_I8] = F, [CGE_I16] = F, [CGE_I32] = F, [CGE_I64] = F, UINT_SAME(F)
#define ALL_SAME(F) [CGE_F32] = F, [CGE_F64] = F, [CGE_F16] = F, [CGE_BF16] = F,         \
                    INT_SAME(F), [CGE_BOOL] = F

#define BOOL_DT CGE_DT(CGE_BOOL)
#define NEG_DTYPES (CGE_DT_FLOAT | CGE_DT_SIGNED_INT)
#define ABS_DTYPES CGE_DT_NUMERIC
#define RELU_DTYPES (CGE_DT_FLOAT | CGE_DT_SIGNED_INT)
#define SIGN_DTYPES CGE_DT_NUMERIC
#define SHRINK_DTYPES CGE_DT_NUMERIC

/* What an op writes: its input's dtype, bool, or (Cast) the output's. */
typedef enum un_out { OUT_SAME, OUT_BOOL, OUT_CAST } un_out;

typedef struct un_info {
    const char *name;
    cge_dtype_set dtypes;        /* accepted for the input */
    un_out out;
    un_row rows[CGE_DTYPE_MAX];  /* by input dtype (Cast: when the output's is the same) */
} un_info;

#define FLT(NAME, P) {NAME, CGE_DT_FLOAT, OUT_SAME, {FLOAT_ROWS(P)}}
static const un_info un_ops[U_COUNT] = {
    [U_NEG] = {"Neg", NEG_DTYPES, OUT_SAME, {FLOAT_ROWS(neg), SINT_ROWS(neg)}},
    [U_ABS] = {"Abs", ABS_DTYPES, OUT_SAME,
               {FLOAT_ROWS(abs), SINT_ROWS(abs), UINT_SAME(copy_row)}},
    [U_EXP] = FLT("Exp", exp),
    [U_LOG] = FLT("Log", log),
    [U_SQRT] = FLT("Sqrt", sqrt),
    [U_RECIP] = FLT("Reciprocal", recip),
    [U_RELU] = {"Relu", RELU_DTYPES, OUT_SAME, {FLOAT_ROWS(relu), SINT_ROWS(relu)}},
    [U_LEAKY] = FLT("LeakyRelu", leaky),
    [U_SIGMOID] = FLT("Sigmoid", sigmoid),
    [U_TANH] = FLT("Tanh", tanh),
    [U_ERF] = FLT("Erf", erf),
    [U_GELU] = FLT("Gelu", gelu),
    [U_GELU_TANH] = FLT("Gelu", gelu_tanh),
    /* Casts from and to strings are ops/string_cast.c's (un_launch hands them over). */
    [U_CAST] = {"Cast", CGE_DT_ALL | CGE_DT_STRING, OUT_CAST, {ALL_SAME(copy_row)}},
    /* A string element is a {data, size} pair: Identity copies the pairs. */
    [U_IDENTITY] = {"Identity", CGE_DT_ALL | CGE_DT_STRING, OUT_SAME,
                    {ALL_SAME(copy_row), [CGE_STRING] = copy_row}},
    [U_FLOOR] = FLT("Floor", floor),
    [U_CEIL] = FLT("Ceil", ceil),
    [U_ROUND] = FLT("Round", round),
    [U_SIGN] = {"Sign", SIGN_DTYPES, OUT_SAME,
                {FLOAT_ROWS(sign), SINT_ROWS(sign), UINT_ROWS(sign)}},
    [U_ISNAN] = {"IsNaN", CGE_DT_FLOAT, OUT_BOOL, {FLOAT_ROWS(isnan)}},
    [U_ISINF] = {"IsInf", CGE_DT_FLOAT, OUT_BOOL, {FLOAT_ROWS(isinf)}},
    [U_NOT] = {"Not", BOOL_DT, OUT_SAME, {[CGE_BOOL] = not_bool}},
    [U_BNOT] = {"BitwiseNot", CGE_DT_INT, OUT_SAME, {SINT_ROWS(bnot), UINT_ROWS(bnot)}},
    [U_SIN] = FLT("Sin", sin),
    [U_COS] = FLT("Cos", cos),
    [U_TAN] = FLT("Tan", tan),
    [U_ASIN] = FLT("Asin", asin),
    [U_ACOS] = FLT("Acos", acos),
    [U_ATAN] = FLT("Atan", atan),
    [U_SINH] = FLT("Sinh", sinh),
    [U_COSH] = FLT("Cosh", cosh),
    [U_ASINH] = FLT("Asinh", asinh),
    [U_ACOSH] = FLT("Acosh", acosh),
    [U_ATANH] = FLT("Atanh", atanh),
    [U_SOFTPLUS] = FLT("Softplus", softplus),
    [U_SOFTSIGN] = FLT("Softsign", softsign),
    [U_ELU] = FLT("Elu", elu),
    [U_SELU] = FLT("Selu", selu),
    [U_CELU] = FLT("Celu", celu),
    [U_THRELU] = FLT("ThresholdedRelu", threlu),
    [U_HSIGMOID] = FLT("HardSigmoid", hsigmoid),
    [U_HSWISH] = FLT("HardSwish", hswish),
    [U_MISH] = FLT("Mish", mish),
    [U_SHRINK] = {"Shrink", SHRINK_DTYPES, OUT_SAME, {FLOAT_ROWS(shrink), INT_SAME(shrink_int)}},
};

static bool in_set(cge_dtype_set set, cge_dtype t)
{
    return t > CGE_DTYPE_UNDEFINED && t < CGE_DTYPE_MAX && (set & CGE_DT(t));
}

/* Gelu's attribute picks the row: "none" (erf), "tanh", or false if neither. */
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

/* The attribute values of `op`, with ONNX's defaults. */
static un_par read_par(un_op op, const cge_attrs *attrs)
{
    un_par p = {0};
    switch (op) {
    case U_LEAKY:
        p.alpha = cge_attrs_get_float(attrs, "alpha", 0.01f);
        break;
    case U_ELU:
    case U_CELU:
    case U_THRELU:
        p.alpha = cge_attrs_get_float(attrs, "alpha", 1.0f);
        break;
    case U_SELU:
        p.alpha = cge_attrs_get_float(attrs, "alpha", 1.67326319217681884765625f);
        p.gamma = cge_attrs_get_float(attrs, "gamma", 1.05070102214813232421875f);
        break;
    case U_HSIGMOID:
        p.alpha = cge_attrs_get_float(attrs, "alpha", 0.2f);
        p.beta = cge_attrs_get_float(attrs, "beta", 0.5f);
        break;
    case U_HSWISH:
        p.alpha = 1.0f / 6.0f;
        p.beta = 0.5f;
        break;
    case U_SHRINK:
        p.alpha = cge_attrs_get_float(attrs, "lambd", 0.5f);
        p.beta = cge_attrs_get_float(attrs, "bias", 0.0f);
        break;
    case U_ISINF:
        p.neg = cge_attrs_get_int(attrs, "detect_negative", 1) != 0;
        p.pos = cge_attrs_get_int(attrs, "detect_positive", 1) != 0;
        break;
    default:
        break;
    }
    return p;
}

/* ---- meta and launch -------------------------------------------------------- */

static cge_status un_infer(cge_infer_ctx *ctx, un_op op)
{
    CGE__CHECK_COUNTS(ctx, cge_meta_error, 1, 1, 1, 1, "1 input and 1 output");
    const cge_tensor_desc *x = &ctx->inputs[0];
    if (op == U_IDENTITY && x->type != CGE_TYPE_TENSOR) {
        /* Identity of a sequence or optional (ops/sequence.c copies it) */
        ctx->outputs[0].dtype = x->dtype;
        ctx->outputs[0].shape = x->shape;
        ctx->outputs[0].type = x->type;
        return CGE_OK;
    }
    if (!in_set(un_ops[op].dtypes, x->dtype))
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "input has dtype %s, which %s does not support",
                              cge_dtype_name(x->dtype), un_ops[op].name);
    if (op == U_GELU && !gelu_variant(ctx->attrs, &op))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "attribute approximate is '%s'; it must be 'none' or 'tanh'",
                              cge_attrs_get_string(ctx->attrs, "approximate", ""));
    if (op == U_CELU && cge_attrs_get_float(ctx->attrs, "alpha", 1.0f) == 0.0f)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "Celu's alpha must not be 0");
    cge_dtype out = un_ops[op].out == OUT_BOOL ? CGE_BOOL : x->dtype;
    if (un_ops[op].out == OUT_CAST) {
        int64_t to = cge_attrs_get_int(ctx->attrs, "to", -1);
        if (to < 0 || to >= CGE_DTYPE_MAX || !in_set(CGE_DT_ALL | CGE_DT_STRING, (cge_dtype)to))
            return cge_meta_error(ctx, CGE_ERR_DTYPE,
                                  "attribute 'to' = %lld is missing or not a supported dtype "
                                  "(numeric types, bool and string)",
                                  (long long)to);
        out = (cge_dtype)to;
    }
    ctx->outputs[0].dtype = out;
    ctx->outputs[0].shape = x->shape;
    return CGE_OK;
}

static void un_block(int64_t blk, int64_t nb, void *p)
{
    const un_args *a = p;
    int64_t begin, end;
    cge__block_range(a->numel, blk, nb, &begin, &end);
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

/* float16 <-> float32 Casts with the CPU's conversions (the same bits). */
static void cast_f16_f32_n(const void *in, void *out, int64_t n, const un_args *a)
{
    (void)a;
    cge__f16_to_f32_n(in, out, n);
}

static void cast_f32_f16_n(const void *in, void *out, int64_t n, const un_args *a)
{
    (void)a;
    cge__f32_to_f16_n(in, out, n);
}

static un_row cast_row(cge_dtype from, cge_dtype to)
{
    if (from == CGE_F16 && to == CGE_F32)
        return cast_f16_f32_n;
    if (from == CGE_F32 && to == CGE_F16)
        return cast_f32_f16_n;
    return cast_rows[from][to];
}

static cge_status un_launch(const cge_kernel_ctx *ctx, cge_stream *stream, un_op op)
{
    CGE__CHECK_COUNTS(ctx, cge_kernel_error, 1, 1, 1, 1, "1 input and 1 output");
    const cge_tensor *x = &ctx->inputs[0];
    cge_tensor *y = &ctx->outputs[0];
    if (op == U_IDENTITY && ctx->input_types && ctx->input_types[0] != CGE_TYPE_TENSOR)
        return cge__seq_launch_copy(ctx, stream);
    if (op == U_GELU && !gelu_variant(ctx->attrs, &op))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                "attribute approximate must be 'none' or 'tanh'");
    if (op == U_CAST && (x->dtype == CGE_STRING || y->dtype == CGE_STRING))
        return cge__cast_string_launch(ctx, stream);
    un_args args;
    memset(&args, 0, sizeof args);
    const un_info *info = &un_ops[op];
    cge_dtype want = info->out == OUT_BOOL ? CGE_BOOL : info->out == OUT_CAST ? y->dtype : x->dtype;
    if (in_set(info->dtypes, x->dtype) && in_set(CGE_DT_ALL | CGE_DT_STRING, y->dtype) &&
        y->dtype == want)
        args.row = x->dtype == y->dtype || info->out != OUT_CAST ? info->rows[x->dtype]
                                                                 : cast_row(x->dtype, y->dtype);
    if (!args.row)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "no %s kernel for %s -> %s", info->name,
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
    int64_t nb = cge__blocks_for(args.numel, MIN_PER_BLOCK, ctx->num_threads);
    return cge_launch(stream, un_block, nb, &args, sizeof args);
}

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
    static void clip_##S(const clip_args *a, int64_t begin, int64_t end)                 \
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
#define DEF_CLIP_NARROW(S, N, T, LO, HI) DEF_CLIP(S, T, LO, HI)
NARROW_INTS(DEF_CLIP_NARROW)
DEF_CLIP(i64, int64_t, INT64_MIN, INT64_MAX)
DEF_CLIP(u64, uint64_t, 0, UINT64_MAX)

#define DEF_CLIP_HALF(S, TOF, FROMF)                                                     \
    static void clip_##S(const clip_args *a, int64_t begin, int64_t end)                 \
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

typedef void (*clip_fn)(const clip_args *a, int64_t begin, int64_t end);
static const clip_fn clip_fns[CGE_DTYPE_MAX] = {FLOAT_ROWS(clip), SINT_ROWS(clip),
                                                UINT_ROWS(clip)};

static void clip_block(int64_t blk, int64_t nb, void *p)
{
    const clip_args *a = p;
    int64_t begin, end;
    cge__block_range(a->numel, blk, nb, &begin, &end);
    if (begin < end && clip_fns[a->dtype]) /* the launch checked the dtype */
        clip_fns[a->dtype](a, begin, end);
}

static cge_status clip_infer(cge_infer_ctx *ctx)
{
    CGE__CHECK_COUNTS(ctx, cge_meta_error, 1, 3, 1, 1, "1 to 3 inputs and 1 output");
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
    CGE__CHECK_COUNTS(ctx, cge_kernel_error, 1, 3, 1, 1, "1 to 3 inputs and 1 output");
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
    int64_t nb = cge__blocks_for(args.numel, MIN_PER_BLOCK, ctx->num_threads);
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
    CGE__CHECK_COUNTS(ctx, cge_meta_error, 1, 3, 1, 2, "1 to 3 inputs and 1 or 2 outputs");
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
                double ratio = has_r ? cge__load_as_double(r->dtype, rv, 0) : 0.5;
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
    cge__block_range(a->numel, blk, nb, &begin, &end);
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
    /* No upper bound on the inputs here: only data is read. */
    CGE__CHECK_COUNTS(ctx, cge_kernel_error, 1, INT32_MAX, 1, 2,
                      "1 to 3 inputs and 1 or 2 outputs");
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
    int64_t nb = cge__blocks_for(args.numel, MIN_PER_BLOCK * 4, ctx->num_threads);
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
    static void hm_##S(const hm_args *a, int64_t begin, int64_t end)                     \
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

typedef void (*hm_fn)(const hm_args *a, int64_t begin, int64_t end);
static const hm_fn hm_fns[CGE_DTYPE_MAX] = {FLOAT_ROWS(hm)};

static void hm_block(int64_t blk, int64_t nb, void *p)
{
    const hm_args *a = p;
    int64_t begin, end;
    cge__block_range(a->outer * a->inner, blk, nb, &begin, &end);
    if (hm_fns[a->dtype]) /* the launch checked the dtype */
        hm_fns[a->dtype](a, begin, end);
}

static cge_status hm_infer(cge_infer_ctx *ctx)
{
    CGE__CHECK_COUNTS(ctx, cge_meta_error, 1, 1, 1, 1, "1 input and 1 output");
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
    CGE__CHECK_COUNTS(ctx, cge_kernel_error, 1, 1, 1, 1, "1 input and 1 output");
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
    int64_t nb = cge__blocks_for(lines, (MIN_PER_BLOCK + args.dim - 1) / args.dim,
                                ctx->num_threads);
    return cge_launch(stream, hm_block, nb, &args, sizeof args);
}

/* ---- schemas ------------------------------------------------------------------- */

#define ARGS(NAME, IN, OUT, XN, YN)                                                      \
    static const cge_arg_def NAME##_in[] = {{XN, 0, IN, "input"}};                       \
    static const cge_arg_def NAME##_out[] = {{YN, 0, OUT, "result, same shape"}}
ARGS(neg, NEG_DTYPES, NEG_DTYPES, "X", "Y");
ARGS(abs, ABS_DTYPES, ABS_DTYPES, "X", "Y");
ARGS(flt, CGE_DT_FLOAT, CGE_DT_FLOAT, "X", "Y");
ARGS(relu, RELU_DTYPES, RELU_DTYPES, "X", "Y");
/* ONNX names these ops' tensors "input" and "output". */
ARGS(io, CGE_DT_ALL | CGE_DT_STRING, CGE_DT_ALL | CGE_DT_STRING, "input", "output");
/* Identity also passes sequences and optionals on. */
static const cge_arg_def anyio_in[] = {
    {"input", CGE_ARG_NON_TENSOR, CGE_DT_ALL | CGE_DT_STRING, "input"}};
static const cge_arg_def anyio_out[] = {
    {"output", 0, CGE_DT_ALL | CGE_DT_STRING, "result, same shape"}};
ARGS(fltio, CGE_DT_FLOAT, CGE_DT_FLOAT, "input", "output");
ARGS(sign, SIGN_DTYPES, SIGN_DTYPES, "input", "output");
ARGS(test, CGE_DT_FLOAT, BOOL_DT, "X", "Y");
ARGS(not, BOOL_DT, BOOL_DT, "X", "Y");
ARGS(bnot, CGE_DT_INT, CGE_DT_INT, "X", "Y");
ARGS(shrink, SHRINK_DTYPES, SHRINK_DTYPES, "input", "output");

static const cge_attr_def leaky_attrs[] = {
    {.name = "alpha", .kind = CGE_ATTR_FLOAT, .default_f = 0.01f, .doc = "slope for x < 0"}};
static const cge_attr_def gelu_attrs[] = {
    {.name = "approximate", .kind = CGE_ATTR_STRING, .default_s = "none",
     .doc = "'none' (exact, erf) or 'tanh'"}};
static const cge_attr_def cast_attrs[] = {
    {.name = "to", .kind = CGE_ATTR_INT, .required = true, .doc = "target dtype (ONNX number)"}};
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

/* Every op of the table: its functions' prefix, op, ONNX name and version, the
 * schema's tensors (ARGS above), the kernel's dtypes and in-place partner, the
 * attributes. Same-dtype ops may write into their input's buffer. Cast may
 * change the element size and the float tests write one byte per wider
 * element: blocks running in parallel would then overwrite input elements
 * other blocks still read, so never in place. */
#define UNARY_OPS(X)                                                                     \
    X(neg, U_NEG, "Neg", 13, neg, NEG_DTYPES, 0, NULL, 0,                                \
      "-X; signed integers wrap (-MIN = MIN)")                                           \
    X(abs, U_ABS, "Abs", 13, abs, ABS_DTYPES, 0, NULL, 0,                                \
      "|X|; |MIN| = MIN for signed integers")                                            \
    X(exp, U_EXP, "Exp", 13, flt, CGE_DT_FLOAT, 0, NULL, 0, "e^X")                       \
    X(log, U_LOG, "Log", 13, flt, CGE_DT_FLOAT, 0, NULL, 0, "natural logarithm")         \
    X(sqrt, U_SQRT, "Sqrt", 13, flt, CGE_DT_FLOAT, 0, NULL, 0, "square root (NaN below 0)") \
    X(recip, U_RECIP, "Reciprocal", 13, flt, CGE_DT_FLOAT, 0, NULL, 0, "1 / X")          \
    X(relu, U_RELU, "Relu", 14, relu, RELU_DTYPES, 0, NULL, 0, "max(X, 0)")              \
    X(leaky, U_LEAKY, "LeakyRelu", 16, flt, CGE_DT_FLOAT, 0, leaky_attrs, 1,             \
      "X < 0 ? alpha * X : X")                                                           \
    X(sigmoid, U_SIGMOID, "Sigmoid", 13, flt, CGE_DT_FLOAT, 0, NULL, 0, "1 / (1 + e^-X)") \
    X(tanh, U_TANH, "Tanh", 13, flt, CGE_DT_FLOAT, 0, NULL, 0, "hyperbolic tangent")     \
    X(erf, U_ERF, "Erf", 13, flt, CGE_DT_FLOAT, 0, NULL, 0, "error function")            \
    X(gelu, U_GELU, "Gelu", 20, flt, CGE_DT_FLOAT, 0, gelu_attrs, 1,                     \
      "0.5 X (1 + erf(X / sqrt 2)), or the tanh approximation")                          \
    X(identity, U_IDENTITY, "Identity", 16, anyio, CGE_DT_ALL | CGE_DT_STRING, 0, NULL, 0, \
      "a copy of the input")                                                             \
    X(floor, U_FLOOR, "Floor", 13, flt, CGE_DT_FLOAT, 0, NULL, 0, "largest integer <= X") \
    X(ceil, U_CEIL, "Ceil", 13, flt, CGE_DT_FLOAT, 0, NULL, 0, "smallest integer >= X")  \
    X(round, U_ROUND, "Round", 11, flt, CGE_DT_FLOAT, 0, NULL, 0,                        \
      "nearest integer, halves to even")                                                 \
    X(sign, U_SIGN, "Sign", 13, sign, SIGN_DTYPES, 0, NULL, 0, "-1, 0 or 1 (NaN stays NaN)") \
    X(isnan, U_ISNAN, "IsNaN", 13, test, CGE_DT_FLOAT, -1, NULL, 0, "X is NaN")          \
    X(isinf, U_ISINF, "IsInf", 10, test, CGE_DT_FLOAT, -1, isinf_attrs, 2,               \
      "X is +inf and/or -inf")                                                           \
    X(not, U_NOT, "Not", 1, not, BOOL_DT, 0, NULL, 0, "logical not")                     \
    X(bnot, U_BNOT, "BitwiseNot", 18, bnot, CGE_DT_INT, 0, NULL, 0, "~X")                \
    X(sin, U_SIN, "Sin", 7, fltio, CGE_DT_FLOAT, 0, NULL, 0, "sine")                     \
    X(cos, U_COS, "Cos", 7, fltio, CGE_DT_FLOAT, 0, NULL, 0, "cosine")                   \
    X(tan, U_TAN, "Tan", 7, fltio, CGE_DT_FLOAT, 0, NULL, 0, "tangent")                  \
    X(asin, U_ASIN, "Asin", 7, fltio, CGE_DT_FLOAT, 0, NULL, 0, "arcsine")               \
    X(acos, U_ACOS, "Acos", 7, fltio, CGE_DT_FLOAT, 0, NULL, 0, "arccosine")             \
    X(atan, U_ATAN, "Atan", 7, fltio, CGE_DT_FLOAT, 0, NULL, 0, "arctangent")            \
    X(sinh, U_SINH, "Sinh", 9, fltio, CGE_DT_FLOAT, 0, NULL, 0, "hyperbolic sine")       \
    X(cosh, U_COSH, "Cosh", 9, fltio, CGE_DT_FLOAT, 0, NULL, 0, "hyperbolic cosine")     \
    X(asinh, U_ASINH, "Asinh", 9, fltio, CGE_DT_FLOAT, 0, NULL, 0, "inverse hyperbolic sine") \
    X(acosh, U_ACOSH, "Acosh", 9, fltio, CGE_DT_FLOAT, 0, NULL, 0,                       \
      "inverse hyperbolic cosine")                                                       \
    X(atanh, U_ATANH, "Atanh", 9, fltio, CGE_DT_FLOAT, 0, NULL, 0,                       \
      "inverse hyperbolic tangent")                                                      \
    X(softplus, U_SOFTPLUS, "Softplus", 1, flt, CGE_DT_FLOAT, 0, NULL, 0, "log(1 + e^X)") \
    X(softsign, U_SOFTSIGN, "Softsign", 1, fltio, CGE_DT_FLOAT, 0, NULL, 0, "X / (1 + |X|)") \
    X(elu, U_ELU, "Elu", 6, flt, CGE_DT_FLOAT, 0, alpha1_attrs, 1,                       \
      "X < 0 ? alpha (e^X - 1) : X")                                                     \
    X(selu, U_SELU, "Selu", 6, flt, CGE_DT_FLOAT, 0, selu_attrs, 2,                      \
      "gamma (X <= 0 ? alpha (e^X - 1) : X)")                                            \
    X(celu, U_CELU, "Celu", 12, flt, CGE_DT_FLOAT, 0, alpha1_attrs, 1,                   \
      "max(0, X) + min(0, alpha (e^(X/alpha) - 1))")                                     \
    X(threlu, U_THRELU, "ThresholdedRelu", 10, flt, CGE_DT_FLOAT, 0, alpha1_attrs, 1,    \
      "X > alpha ? X : 0")                                                               \
    X(hsigmoid, U_HSIGMOID, "HardSigmoid", 6, flt, CGE_DT_FLOAT, 0, hsigmoid_attrs, 2,   \
      "max(0, min(1, alpha X + beta))")                                                  \
    X(hswish, U_HSWISH, "HardSwish", 14, flt, CGE_DT_FLOAT, 0, NULL, 0,                  \
      "X max(0, min(1, X / 6 + 1/2))")                                                   \
    X(mish, U_MISH, "Mish", 18, flt, CGE_DT_FLOAT, 0, NULL, 0, "X tanh(softplus(X))")    \
    X(shrink, U_SHRINK, "Shrink", 9, shrink, SHRINK_DTYPES, 0, shrink_attrs, 2,          \
      "X < -lambd ? X + bias : X > lambd ? X - bias : 0")

#define X_FNS(F, OP, NAME, SINCE, ARGN, KDT, INPLACE, ATTRS, NATTRS, DOC)                \
    static cge_status F##_infer(cge_infer_ctx *ctx) { return un_infer(ctx, OP); }        \
    static cge_status F##_launch(const cge_kernel_ctx *ctx, cge_stream *stream)          \
    {                                                                                    \
        return un_launch(ctx, stream, OP);                                               \
    }                                                                                    \
    static const cge_kernel_def F##_kernels[] = {                                        \
        {.engine = "cpu", .dtypes = KDT, .launch = F##_launch, .inplace_input = INPLACE}};
UNARY_OPS(X_FNS)
/* Clip and Dropout are elementwise too; Hardmax reads a whole line before
 * writing it, and lines are disjoint. */
#define KERNEL(NAME, DTYPES)                                                             \
    static const cge_kernel_def NAME##_kernels[] = {                                     \
        {.engine = "cpu", .dtypes = DTYPES, .launch = NAME##_launch, .inplace_input = 0}}
KERNEL(clip, CGE_DT_NUMERIC);
/* Cast is outside the table's macro for its prepare and release: a cast to
 * string keeps the output's bytes in a store of the node's (ops/string_cast.c). */
static cge_status cast_infer(cge_infer_ctx *ctx) { return un_infer(ctx, U_CAST); }
static cge_status cast_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return un_launch(ctx, stream, U_CAST);
}
static const cge_kernel_def cast_kernels[] = {
    {.engine = "cpu", .dtypes = CGE_DT_ALL | CGE_DT_STRING, .launch = cast_launch,
     .prepare = cge__cast_string_prepare, .release = cge__cast_string_release,
     .inplace_input = -1}};
KERNEL(dropout, CGE_DT_FLOAT);
KERNEL(hm, CGE_DT_FLOAT);

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

#define X_DEF(F, OP, NAME, SINCE, ARGN, KDT, INPLACE, ATTRS, NATTRS, DOC)                \
    {.name = NAME, .domain = CGE_DOMAIN_DEFAULT, .since_version = SINCE,                 \
     .inputs = ARGN##_in, .num_inputs = 1, .outputs = ARGN##_out, .num_outputs = 1,      \
     .attrs = ATTRS, .num_attrs = NATTRS, .infer = F##_infer, .kernels = F##_kernels,    \
     .num_kernels = 1, .doc = DOC},

static const cge_op_def unary_ops[] = {
    {.name = "Cast", .domain = CGE_DOMAIN_DEFAULT, .since_version = 13, .inputs = io_in,
     .num_inputs = 1, .outputs = io_out, .num_outputs = 1, .attrs = cast_attrs, .num_attrs = 1,
     .infer = cast_infer, .kernels = cast_kernels, .num_kernels = 1,
     .doc = "convert to dtype 'to': float -> int truncates toward zero and saturates (NaN -> "
            "0), int -> int wraps, x -> bool is x != 0; to and from strings as numpy's "
            "astype (shortest round-trip text; 'NaN', 'INF', '-INF' parse)"},
    UNARY_OPS(X_DEF)
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

const cge_op_def *cge__ops_unary(int32_t *count)
{
    if (count)
        *count = (int32_t)(sizeof unary_ops / sizeof unary_ops[0]);
    return unary_ops;
}
