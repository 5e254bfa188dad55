/* The variadic elementwise operators Max Min Sum Mean: one or more inputs,
 * all broadcast together (numpy rules). Folded pairwise, one launch per
 * input after the second, each a vectorised two-operand row loop. */
#include <math.h>
#include <string.h>

#include "ops/broadcast.h"
#include "ops/builtin.h"
#include "ops/kernel_util.h"

#define MIN_PER_BLOCK 16384
#define MAX_INPUTS 64

typedef enum var_op { V_MAX, V_MIN, V_SUM, V_MEAN, V_COUNT } var_op;

static const char *const var_names[V_COUNT] = {"Max", "Min", "Sum", "Mean"};

/* One row of n outputs from two operands advancing by sa, sb (0 or 1); nn is
 * the number of inputs (Mean's divisor, used by its last pass only). */
typedef void (*var_row)(void *o, const void *a, int64_t sa, const void *b, int64_t sb,
                        int64_t n, float nn);

typedef struct var_args {
    cge__bcast bc;
    var_row row;
    const void *a, *b;
    void *out;
    size_t esize;
    float nn;
} var_args;

/* ---- rows ------------------------------------------------------------------------ */

#define DEF_ROW(NAME, T, EXPR)                                                           \
    static void NAME(void *o_, const void *a_, int64_t sa, const void *b_, int64_t sb,   \
                     int64_t n, float nn)                                                \
    {                                                                                    \
        T *o = o_;                                                                       \
        const T *a = a_, *b = b_;                                                        \
        if (sa && sb) {                                                                  \
            for (int64_t k = 0; k < n; k++) {                                            \
                T x = a[k], y = b[k];                                                    \
                o[k] = (EXPR);                                                           \
            }                                                                            \
        } else if (sb) {                                                                 \
            T x = a[0];                                                                  \
            for (int64_t k = 0; k < n; k++) {                                            \
                T y = b[k];                                                              \
                o[k] = (EXPR);                                                           \
            }                                                                            \
        } else if (sa) {                                                                 \
            T y = b[0];                                                                  \
            for (int64_t k = 0; k < n; k++) {                                            \
                T x = a[k];                                                              \
                o[k] = (EXPR);                                                           \
            }                                                                            \
        } else {                                                                         \
            T x = a[0], y = b[0];                                                        \
            T v = (EXPR);                                                                \
            for (int64_t k = 0; k < n; k++)                                              \
                o[k] = v;                                                                \
        }                                                                                \
    }

/* Max and Min propagate NaN, as numpy's maximum and minimum (the reference)
 * do; written as selects so that they vectorise. */
#define FMAX(x, y) ((x) > (y) || (x) != (x) ? (x) : (y))
#define FMIN(x, y) ((x) < (y) || (x) != (x) ? (x) : (y))
#define DEF_FLOAT_ROWS(S, T)                                                             \
    DEF_ROW(max_##S, T, FMAX(x, y))                                                      \
    DEF_ROW(min_##S, T, FMIN(x, y))                                                      \
    DEF_ROW(sum_##S, T, x + y)                                                           \
    DEF_ROW(mean_##S, T, (x + y) / (T)nn)
DEF_FLOAT_ROWS(f32, float)
DEF_FLOAT_ROWS(f64, double)

/* float16 / bfloat16 through float32, rounded after every input as numpy
 * does when it folds them. */
#define DEF_HALF_ROWS(S, TOF, FROMF)                                                     \
    DEF_ROW(max_##S, uint16_t, TOF(x) > TOF(y) || TOF(x) != TOF(x) ? x : y)              \
    DEF_ROW(min_##S, uint16_t, TOF(x) < TOF(y) || TOF(x) != TOF(x) ? x : y)              \
    DEF_ROW(sum_##S, uint16_t, FROMF(TOF(x) + TOF(y)))                                   \
    DEF_ROW(mean_##S, uint16_t, FROMF((TOF(x) + TOF(y)) / nn))
DEF_HALF_ROWS(f16, cge_f16_to_f32, cge_f32_to_f16)
DEF_HALF_ROWS(bf16, cge_bf16_to_f32, cge_f32_to_bf16)

#define DEF_INT_ROWS(S, T)                                                               \
    DEF_ROW(max_##S, T, x > y ? x : y)                                                   \
    DEF_ROW(min_##S, T, x < y ? x : y)
DEF_INT_ROWS(i8, int8_t)
DEF_INT_ROWS(i16, int16_t)
DEF_INT_ROWS(i32, int32_t)
DEF_INT_ROWS(i64, int64_t)
DEF_INT_ROWS(u8, uint8_t)
DEF_INT_ROWS(u16, uint16_t)
DEF_INT_ROWS(u32, uint32_t)
DEF_INT_ROWS(u64, uint64_t)

#define FLOAT_ROWS(P) [CGE_F32] = P##_f32, [CGE_F64] = P##_f64, [CGE_F16] = P##_f16, \
                      [CGE_BF16] = P##_bf16
#define INT_ROWS(P) [CGE_I8] = P##_i8, [CGE_I16] = P##_i16, [CGE_I32] = P##_i32,        \
                    [CGE_I64] = P##_i64, [CGE_U8] = P##_u8, [CGE_U16] = P##_u16,         \
                    [CGE_U32] = P##_u32, [CGE_U64] = P##_u64

static const var_row var_rows[V_COUNT][CGE_DTYPE_MAX] = {
    [V_MAX] = {FLOAT_ROWS(max), INT_ROWS(max)},
    [V_MIN] = {FLOAT_ROWS(min), INT_ROWS(min)},
    [V_SUM] = {FLOAT_ROWS(sum)},
    [V_MEAN] = {FLOAT_ROWS(sum)}, /* the last pass divides: mean_rows */
};
static const var_row mean_rows[CGE_DTYPE_MAX] = {FLOAT_ROWS(mean)};

static const cge_dtype_set var_dtypes[V_COUNT] = {
    [V_MAX] = CGE_DT_NUMERIC, [V_MIN] = CGE_DT_NUMERIC,
    [V_SUM] = CGE_DT_FLOAT, [V_MEAN] = CGE_DT_FLOAT,
};

static bool in_set(cge_dtype_set set, cge_dtype t)
{
    return t > CGE_DTYPE_UNDEFINED && t < CGE_DTYPE_MAX && (set & CGE_DT(t));
}

/* ---- meta ------------------------------------------------------------------------ */

static cge_status var_infer(cge_infer_ctx *ctx, var_op op)
{
    if (ctx->num_inputs < 1 || ctx->num_outputs != 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "expects 1 or more inputs and 1 output, got %d and %d",
                              ctx->num_inputs, ctx->num_outputs);
    if (ctx->num_inputs > MAX_INPUTS)
        return cge_meta_error(ctx, CGE_ERR_UNSUPPORTED, "%d inputs; the kernel takes at most %d",
                              ctx->num_inputs, MAX_INPUTS);
    const cge_tensor_desc *x = &ctx->inputs[0];
    if (!in_set(var_dtypes[op], x->dtype))
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "input 0 has dtype %s, which %s does not support",
                              cge_dtype_name(x->dtype), var_names[op]);
    cge_shape out = x->shape;
    for (int32_t i = 1; i < ctx->num_inputs; i++) {
        const cge_tensor_desc *in = &ctx->inputs[i];
        if (in->dtype != x->dtype)
            return cge_meta_error(ctx, CGE_ERR_DTYPE,
                                  "inputs must have one dtype; input 0 is %s, input %d is %s",
                                  cge_dtype_name(x->dtype), i, cge_dtype_name(in->dtype));
        if (cge_shape_broadcast(&out, &in->shape, &out) != CGE_OK) {
            char so[CGE_SHAPE_STR_MAX], si[CGE_SHAPE_STR_MAX];
            return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                  "input %d's shape %s does not broadcast with %s", i,
                                  cge_shape_str(&in->shape, si, sizeof si),
                                  cge_shape_str(&out, so, sizeof so));
        }
    }
    ctx->outputs[0].dtype = x->dtype;
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

/* ---- kernels --------------------------------------------------------------------- */

/* A pass combines two operands; with no row it copies the first (the
 * output's starting value). */
static void var_row_call(const void *user, void *o, const void *a, int64_t sa, const void *b,
                         int64_t sb, int64_t n)
{
    const var_args *args = user;
    if (args->row)
        args->row(o, a, sa, b, sb, n, args->nn);
    else if (o != a)
        memcpy(o, a, (size_t)n * args->esize);
}

static void var_block(int64_t blk, int64_t nb, void *p)
{
    const var_args *a = p;
    int64_t begin, end;
    cge__block_range(a->bc.numel, blk, nb, &begin, &end);
    cge__bcast_rows2(&a->bc, begin, end, a->out, a->esize, a->a, a->esize, a->b, a->esize,
                    var_row_call, a);
}

static cge_status var_launch(const cge_kernel_ctx *ctx, cge_stream *stream, var_op op)
{
    int32_t n_in = ctx->num_inputs;
    if (n_in < 1 || ctx->num_outputs != 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                "expects 1 or more inputs and 1 output, got %d and %d", n_in,
                                ctx->num_outputs);
    const cge_tensor *x = &ctx->inputs[0];
    cge_tensor *y = &ctx->outputs[0];
    if (!in_set(var_dtypes[op], x->dtype) || y->dtype != x->dtype)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "no %s kernel for %s -> %s", var_names[op],
                                cge_dtype_name(x->dtype), cge_dtype_name(y->dtype));
    cge_shape want = x->shape;
    for (int32_t i = 0; i < n_in; i++) {
        const cge_tensor *in = &ctx->inputs[i];
        size_t need = cge_tensor_nbytes(in->dtype, &in->shape);
        if (in->dtype != x->dtype || !cge_shape_is_static(&in->shape) ||
            (need && (!in->data || in->bytes < need)))
            return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                    "input %d: dtype %s, static shape and a buffer of %zu "
                                    "bytes needed",
                                    i, cge_dtype_name(x->dtype), need);
        if (cge_shape_broadcast(&want, &in->shape, &want) != CGE_OK)
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "input %d does not broadcast", i);
    }
    size_t need = cge_tensor_nbytes(y->dtype, &y->shape);
    if (!cge_shape_equal(&want, &y->shape) || (need && (!y->data || y->bytes < need))) {
        char s[CGE_SHAPE_STR_MAX];
        return cge_kernel_error(ctx, CGE_ERR_SHAPE,
                                "output must be the inputs' broadcast %s with a buffer",
                                cge_shape_str(&want, s, sizeof s));
    }
    if (cge_shape_numel(&want) == 0)
        return CGE_OK;

    /* Inputs in folding order. Each pass reads output element k (and the next
     * input's) before writing it, so the output may share a buffer with the
     * inputs of the first pass only: move such inputs to the front (every op
     * here is commutative). */
    const cge_tensor *order[MAX_INPUTS];
    if (n_in > MAX_INPUTS)
        return cge_kernel_error(ctx, CGE_ERR_UNSUPPORTED, "more than %d inputs", MAX_INPUTS);
    int32_t k = 0;
    for (int32_t i = 0; i < n_in; i++)
        if (ctx->inputs[i].data == y->data)
            order[k++] = &ctx->inputs[i];
    if (k > 2)
        return cge_kernel_error(ctx, CGE_ERR_UNSUPPORTED,
                                "%d inputs share the output's buffer; at most 2 can", k);
    for (int32_t i = 0; i < n_in; i++)
        if (ctx->inputs[i].data != y->data)
            order[k++] = &ctx->inputs[i];

    var_args args;
    memset(&args, 0, sizeof args);
    args.out = y->data;
    args.esize = cge_dtype_size(x->dtype);
    args.nn = (float)n_in;
    int64_t nb = cge__blocks_for(cge_shape_numel(&want), MIN_PER_BLOCK, ctx->num_threads);
    if (n_in == 1) {
        /* A copy (Mean of one input is that input too). */
        const cge_shape *ins[2] = {&order[0]->shape, &order[0]->shape};
        if (cge__bcast_init(&args.bc, &y->shape, ins, 2) != CGE_OK)
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "bad output shape");
        args.a = args.b = order[0]->data;
        return cge_launch(stream, var_block, nb, &args, sizeof args);
    }
    cge_status st = CGE_OK;
    for (int32_t p = 1; !st && p < n_in; p++) {
        const cge_tensor *acc = p == 1 ? order[0] : y;
        const cge_shape *ins[2] = {&acc->shape, &order[p]->shape};
        if (cge__bcast_init(&args.bc, &y->shape, ins, 2) != CGE_OK)
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "input does not broadcast to the output");
        args.a = acc->data;
        args.b = order[p]->data;
        args.row = (op == V_MEAN && p == n_in - 1) ? mean_rows[x->dtype] : var_rows[op][x->dtype];
        st = cge_launch(stream, var_block, nb, &args, sizeof args);
    }
    return st;
}

#define DEF_OP_FNS(NAME, OP)                                                             \
    static cge_status NAME##_infer(cge_infer_ctx *ctx) { return var_infer(ctx, OP); }    \
    static cge_status NAME##_launch(const cge_kernel_ctx *ctx, cge_stream *stream)       \
    {                                                                                    \
        return var_launch(ctx, stream, OP);                                              \
    }
DEF_OP_FNS(max, V_MAX)
DEF_OP_FNS(min, V_MIN)
DEF_OP_FNS(sum, V_SUM)
DEF_OP_FNS(mean, V_MEAN)

/* ---- schemas --------------------------------------------------------------------- */

#define KERNEL(NAME, DTYPES)                                                             \
    static const cge_kernel_def NAME##_kernels[] = {                                     \
        {.engine = "cpu", .dtypes = DTYPES, .launch = NAME##_launch, .inplace_input = 0}}
KERNEL(max, CGE_DT_NUMERIC);
KERNEL(min, CGE_DT_NUMERIC);
KERNEL(sum, CGE_DT_FLOAT);
KERNEL(mean, CGE_DT_FLOAT);

static const cge_arg_def num_in[] = {
    {"data_0", CGE_ARG_VARIADIC, CGE_DT_NUMERIC, "one or more tensors, broadcast together"}};
static const cge_arg_def num_out[] = {{"max", 0, CGE_DT_NUMERIC, "elementwise result"}};
static const cge_arg_def min_out[] = {{"min", 0, CGE_DT_NUMERIC, "elementwise result"}};
static const cge_arg_def flt_in[] = {
    {"data_0", CGE_ARG_VARIADIC, CGE_DT_FLOAT, "one or more tensors, broadcast together"}};
static const cge_arg_def sum_out[] = {{"sum", 0, CGE_DT_FLOAT, "elementwise sum"}};
static const cge_arg_def mean_out[] = {{"mean", 0, CGE_DT_FLOAT, "elementwise mean"}};

#define VAR_DEF(NAME, IN, OUT, KNAME, DOC)                                               \
    {.name = NAME, .domain = CGE_DOMAIN_DEFAULT, .since_version = 13, .inputs = IN,      \
     .num_inputs = 1, .outputs = OUT, .num_outputs = 1, .infer = KNAME##_infer,          \
     .kernels = KNAME##_kernels, .num_kernels = 1, .doc = DOC}

static const cge_op_def variadic_ops[] = {
    VAR_DEF("Max", num_in, num_out, max, "elementwise maximum of the inputs (NaN wins)"),
    VAR_DEF("Min", num_in, min_out, min, "elementwise minimum of the inputs (NaN wins)"),
    VAR_DEF("Sum", flt_in, sum_out, sum, "elementwise sum of the inputs"),
    VAR_DEF("Mean", flt_in, mean_out, mean, "elementwise mean of the inputs"),
};

const cge_op_def *cge__ops_variadic(int32_t *count)
{
    if (count)
        *count = (int32_t)(sizeof variadic_ops / sizeof variadic_ops[0]);
    return variadic_ops;
}
