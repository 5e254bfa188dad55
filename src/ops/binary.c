/* The broadcasting binary family: Add Sub Mul Div Pow (arithmetic), Equal Less
 * Greater (comparisons to bool) and Where (select, three inputs). Typed row
 * loops per dtype, driven by the shared broadcast iterator (broadcast.h). */
#include <math.h>
#include <string.h>

#include "ops/broadcast.h"
#include "ops/builtin.h"
#include "ops/kernel_util.h"

/* Each block gets at least this many output elements: below it, the cost of
 * another task outweighs the work. */
#define MIN_PER_BLOCK 16384

typedef enum bin_op {
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_POW, OP_EQ, OP_LT, OP_GT, OP_COUNT
} bin_op;

static const char *const op_names[OP_COUNT] = {"Add", "Sub", "Mul", "Div",
                                               "Pow", "Equal", "Less", "Greater"};

struct bin_args;
/* One row: n output elements; a and b advance by sa, sb (each 0 or 1). */
typedef void (*row_fn)(void *o, const void *a, int64_t sa, const void *b, int64_t sb, int64_t n,
                       const struct bin_args *args);

typedef struct bin_args {
    cge_bcast bc;
    row_fn row;
    const void *a, *b;
    void *out;
    size_t size_a, size_b, size_out;
    cge_dtype ta, tb;  /* for the generic Pow row */
} bin_args;

/* ---- typed rows --------------------------------------------------------- */

/* The four stride cases are separate loops so that each one vectorises; the
 * output may be A's buffer (in place), hence no restrict. */
#define DEF_ROW(NAME, TA, TB, TO, EXPR)                                                  \
    CGE_TARGET_CLONES static void NAME(void *o_, const void *a_, int64_t sa, const void *b_, int64_t sb,   \
                     int64_t n, const bin_args *args)                                    \
    {                                                                                    \
        TO *o = o_;                                                                      \
        const TA *a = a_;                                                                \
        const TB *b = b_;                                                                \
        if (sa && sb) {                                                                  \
            for (int64_t k = 0; k < n; k++) {                                            \
                TA x = a[k];                                                             \
                TB y = b[k];                                                             \
                o[k] = (EXPR);                                                           \
            }                                                                            \
        } else if (sb) {                                                                 \
            TA x = a[0];                                                                 \
            for (int64_t k = 0; k < n; k++) {                                            \
                TB y = b[k];                                                             \
                o[k] = (EXPR);                                                           \
            }                                                                            \
        } else if (sa) {                                                                 \
            TB y = b[0];                                                                 \
            for (int64_t k = 0; k < n; k++) {                                            \
                TA x = a[k];                                                             \
                o[k] = (EXPR);                                                           \
            }                                                                            \
        } else {                                                                         \
            TA x = a[0];                                                                 \
            TB y = b[0];                                                                 \
            TO v = (EXPR);                                                               \
            for (int64_t k = 0; k < n; k++)                                              \
                o[k] = v;                                                                \
        }                                                                                \
    }

/* float32 / float64: plain C arithmetic (IEEE: x/0 is inf or NaN). */
#define DEF_FLOAT_ROWS(S, T, POWF)                                                       \
    DEF_ROW(add_##S, T, T, T, x + y)                                                     \
    DEF_ROW(sub_##S, T, T, T, x - y)                                                     \
    DEF_ROW(mul_##S, T, T, T, x * y)                                                     \
    DEF_ROW(div_##S, T, T, T, x / y)                                                     \
    DEF_ROW(pow_##S, T, T, T, POWF(x, y))                                                \
    DEF_ROW(eq_##S, T, T, uint8_t, x == y)                                               \
    DEF_ROW(lt_##S, T, T, uint8_t, x < y)                                                \
    DEF_ROW(gt_##S, T, T, uint8_t, x > y)
DEF_FLOAT_ROWS(f32, float, powf)
DEF_FLOAT_ROWS(f64, double, pow)

/* float16 / bfloat16: computed in float32 and rounded back, as numpy does. */
#define DEF_HALF_ROWS(S, TOF, FROMF)                                                     \
    DEF_ROW(add_##S, uint16_t, uint16_t, uint16_t, FROMF(TOF(x) + TOF(y)))               \
    DEF_ROW(sub_##S, uint16_t, uint16_t, uint16_t, FROMF(TOF(x) - TOF(y)))               \
    DEF_ROW(mul_##S, uint16_t, uint16_t, uint16_t, FROMF(TOF(x) * TOF(y)))               \
    DEF_ROW(div_##S, uint16_t, uint16_t, uint16_t, FROMF(TOF(x) / TOF(y)))               \
    DEF_ROW(pow_##S, uint16_t, uint16_t, uint16_t, FROMF(powf(TOF(x), TOF(y))))          \
    DEF_ROW(eq_##S, uint16_t, uint16_t, uint8_t, TOF(x) == TOF(y))                       \
    DEF_ROW(lt_##S, uint16_t, uint16_t, uint8_t, TOF(x) < TOF(y))                        \
    DEF_ROW(gt_##S, uint16_t, uint16_t, uint8_t, TOF(x) > TOF(y))
DEF_HALF_ROWS(f16, cge_f16_to_f32, cge_f32_to_f16)
DEF_HALF_ROWS(bf16, cge_bf16_to_f32, cge_f32_to_bf16)

/* Integers wrap modulo 2^bits like numpy (computed in the unsigned type W, so
 * signed overflow never happens). Division truncates toward zero; x / 0 is 0
 * (defined here: C and numpy leave it undefined or warn), and MIN / -1 wraps
 * to MIN. */
#define SDIV(T, W, x, y) ((y) == 0 ? (T)0 : (y) == -1 ? (T)((W)0 - (W)(x)) : (T)((x) / (y)))
#define UDIV(T, W, x, y) ((y) == 0 ? (T)0 : (T)((x) / (y)))
#define DEF_INT_ROWS(S, T, W, DIV)                                                       \
    DEF_ROW(add_##S, T, T, T, (T)((W)x + (W)y))                                          \
    DEF_ROW(sub_##S, T, T, T, (T)((W)x - (W)y))                                          \
    DEF_ROW(mul_##S, T, T, T, (T)((W)x * (W)y))                                          \
    DEF_ROW(div_##S, T, T, T, DIV(T, W, x, y))                                           \
    DEF_ROW(eq_##S, T, T, uint8_t, x == y)                                               \
    DEF_ROW(lt_##S, T, T, uint8_t, x < y)                                                \
    DEF_ROW(gt_##S, T, T, uint8_t, x > y)
DEF_INT_ROWS(i8, int8_t, uint32_t, SDIV)
DEF_INT_ROWS(i16, int16_t, uint32_t, SDIV)
DEF_INT_ROWS(i32, int32_t, uint32_t, SDIV)
DEF_INT_ROWS(i64, int64_t, uint64_t, SDIV)
DEF_INT_ROWS(u8, uint8_t, uint32_t, UDIV)
DEF_INT_ROWS(u16, uint16_t, uint32_t, UDIV)
DEF_INT_ROWS(u32, uint32_t, uint32_t, UDIV)
DEF_INT_ROWS(u64, uint64_t, uint64_t, UDIV)

/* Bool equality compares truth values, whatever nonzero byte encodes true. */
DEF_ROW(eq_bool, uint8_t, uint8_t, uint8_t, (x != 0) == (y != 0))

/* base^e for integers by squaring, wrapping modulo 2^64 (numpy wraps too).
 * A negative exponent gives the truncated 1 / base^|e|: 1 or -1 for base
 * +-1, else 0 (0^-n is defined as 0 here rather than an error). */
static int64_t ipow_wrap(int64_t base, bool neg, uint64_t e)
{
    if (neg)
        return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;
    uint64_t r = 1, b = (uint64_t)base;
    while (e) {
        if (e & 1)
            r *= b;
        b *= b;
        e >>= 1;
    }
    return (int64_t)r;
}

/* Pow with mixed dtypes (ONNX 15 lets the exponent's dtype differ) and integer
 * bases: integer^integer is exact and wraps; anything with a float side goes
 * through double, then to the base's dtype (float -> int truncates toward
 * zero, saturating; NaN -> 0). */
static void pow_generic(void *o, const void *a, int64_t sa, const void *b, int64_t sb, int64_t n,
                        const bin_args *args)
{
    cge_dtype ta = args->ta, tb = args->tb;
    bool int_exact = cge_dtype_is_int(ta) && cge_dtype_is_int(tb);
    for (int64_t k = 0; k < n; k++) {
        if (int_exact) {
            int64_t x = cge_load_as_i64(ta, a, k * sa);
            uint64_t e;
            bool neg = false;
            if (tb == CGE_U64) {
                e = ((const uint64_t *)b)[k * sb];
            } else {
                int64_t y = cge_load_as_i64(tb, b, k * sb);
                neg = y < 0;
                e = neg ? (uint64_t)0 - (uint64_t)y : (uint64_t)y;
            }
            int64_t r = ipow_wrap(x, neg, e);
            if (ta == CGE_I32)
                ((int32_t *)o)[k] = (int32_t)r;
            else
                ((int64_t *)o)[k] = r;
        } else {
            double x = cge_load_as_double(ta, a, k * sa);
            double y = cge_load_as_double(tb, b, k * sb);
            cge_store_from_double(ta, o, k, pow(x, y));
        }
    }
}

#define ROWS_ALL_TYPES(P)                                                                \
    {                                                                                    \
        [CGE_F32] = P##_f32, [CGE_F64] = P##_f64, [CGE_F16] = P##_f16,                   \
        [CGE_BF16] = P##_bf16, [CGE_I8] = P##_i8, [CGE_I16] = P##_i16,                   \
        [CGE_I32] = P##_i32, [CGE_I64] = P##_i64, [CGE_U8] = P##_u8, [CGE_U16] = P##_u16, \
        [CGE_U32] = P##_u32, [CGE_U64] = P##_u64                                         \
    }

/* Rows by op and dtype of A (and of B, which equals A's except for Pow). */
static const row_fn rows[OP_COUNT][CGE_DTYPE_MAX] = {
    [OP_ADD] = ROWS_ALL_TYPES(add),
    [OP_SUB] = ROWS_ALL_TYPES(sub),
    [OP_MUL] = ROWS_ALL_TYPES(mul),
    [OP_DIV] = ROWS_ALL_TYPES(div),
    [OP_POW] = {[CGE_F32] = pow_f32, [CGE_F64] = pow_f64, [CGE_F16] = pow_f16,
                [CGE_BF16] = pow_bf16},
    [OP_EQ] = {[CGE_F32] = eq_f32, [CGE_F64] = eq_f64, [CGE_F16] = eq_f16,
               [CGE_BF16] = eq_bf16, [CGE_I8] = eq_i8, [CGE_I16] = eq_i16, [CGE_I32] = eq_i32,
               [CGE_I64] = eq_i64, [CGE_U8] = eq_u8, [CGE_U16] = eq_u16, [CGE_U32] = eq_u32,
               [CGE_U64] = eq_u64, [CGE_BOOL] = eq_bool},
    [OP_LT] = ROWS_ALL_TYPES(lt),
    [OP_GT] = ROWS_ALL_TYPES(gt),
};

/* Dtypes each op accepts for A (Pow: for its base X; its exponent Y takes
 * any numeric dtype). */
#define POW_BASE_DTYPES (CGE_DT_FLOAT | CGE_DT(CGE_I32) | CGE_DT(CGE_I64))
static const cge_dtype_set op_dtypes[OP_COUNT] = {
    [OP_ADD] = CGE_DT_NUMERIC, [OP_SUB] = CGE_DT_NUMERIC, [OP_MUL] = CGE_DT_NUMERIC,
    [OP_DIV] = CGE_DT_NUMERIC, [OP_POW] = POW_BASE_DTYPES, [OP_EQ] = CGE_DT_ALL,
    [OP_LT] = CGE_DT_NUMERIC,  [OP_GT] = CGE_DT_NUMERIC,
};

static bool in_set(cge_dtype_set set, cge_dtype t)
{
    return t > CGE_DTYPE_UNDEFINED && t < CGE_DTYPE_MAX && (set & CGE_DT(t));
}

static bool is_compare(bin_op op) { return op == OP_EQ || op == OP_LT || op == OP_GT; }

static row_fn pick_row(bin_op op, cge_dtype ta, cge_dtype tb)
{
    if (!in_set(op_dtypes[op], ta))
        return NULL;
    if (op == OP_POW) {
        if (!in_set(CGE_DT_NUMERIC, tb))
            return NULL;
        return ta == tb && rows[op][ta] ? rows[op][ta] : pow_generic;
    }
    return ta == tb ? rows[op][ta] : NULL;
}

/* ---- meta ---------------------------------------------------------------- */

static cge_status bin_infer(cge_infer_ctx *ctx, bin_op op)
{
    if (ctx->num_inputs != 2 || ctx->num_outputs != 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "expects 2 inputs and 1 output, got %d and %d", ctx->num_inputs,
                              ctx->num_outputs);
    const cge_tensor_desc *a = &ctx->inputs[0], *b = &ctx->inputs[1];
    if (!in_set(op_dtypes[op], a->dtype))
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "input 0 has dtype %s, which %s does not support",
                              cge_dtype_name(a->dtype), op_names[op]);
    if (op == OP_POW) {
        if (!in_set(CGE_DT_NUMERIC, b->dtype))
            return cge_meta_error(ctx, CGE_ERR_DTYPE,
                                  "exponent Y has dtype %s; Pow needs a numeric exponent",
                                  cge_dtype_name(b->dtype));
    } else if (a->dtype != b->dtype) {
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "inputs must have one dtype; A is %s, B is %s",
                              cge_dtype_name(a->dtype), cge_dtype_name(b->dtype));
    }
    cge_shape out;
    if (cge_shape_broadcast(&a->shape, &b->shape, &out) != CGE_OK) {
        char sa[CGE_SHAPE_STR_MAX], sb[CGE_SHAPE_STR_MAX];
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "inputs %s and %s do not broadcast",
                              cge_shape_str(&a->shape, sa, sizeof sa),
                              cge_shape_str(&b->shape, sb, sizeof sb));
    }
    ctx->outputs[0].dtype = is_compare(op) ? CGE_BOOL : a->dtype;
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

static cge_status where_infer(cge_infer_ctx *ctx)
{
    if (ctx->num_inputs != 3 || ctx->num_outputs != 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "expects 3 inputs and 1 output, got %d and %d", ctx->num_inputs,
                              ctx->num_outputs);
    const cge_tensor_desc *c = &ctx->inputs[0], *x = &ctx->inputs[1], *y = &ctx->inputs[2];
    if (c->dtype != CGE_BOOL)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "condition must be bool, not %s",
                              cge_dtype_name(c->dtype));
    if (!in_set(CGE_DT_ALL, x->dtype) || x->dtype != y->dtype)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "X and Y must have one dtype; X is %s, Y is %s",
                              cge_dtype_name(x->dtype), cge_dtype_name(y->dtype));
    cge_shape cx, out;
    if (cge_shape_broadcast(&c->shape, &x->shape, &cx) != CGE_OK ||
        cge_shape_broadcast(&cx, &y->shape, &out) != CGE_OK) {
        char s0[CGE_SHAPE_STR_MAX], s1[CGE_SHAPE_STR_MAX], s2[CGE_SHAPE_STR_MAX];
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "condition %s, X %s and Y %s do not broadcast",
                              cge_shape_str(&c->shape, s0, sizeof s0),
                              cge_shape_str(&x->shape, s1, sizeof s1),
                              cge_shape_str(&y->shape, s2, sizeof s2));
    }
    ctx->outputs[0].dtype = x->dtype;
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

#define DEF_INFER(NAME, OP)                                                              \
    static cge_status NAME##_infer(cge_infer_ctx *ctx) { return bin_infer(ctx, OP); }
DEF_INFER(add, OP_ADD)
DEF_INFER(sub, OP_SUB)
DEF_INFER(mul, OP_MUL)
DEF_INFER(div, OP_DIV)
DEF_INFER(pow, OP_POW)
DEF_INFER(eq, OP_EQ)
DEF_INFER(lt, OP_LT)
DEF_INFER(gt, OP_GT)

/* ---- kernels ------------------------------------------------------------- */


/* The output's shape must be exactly the broadcast of the inputs'. */
static cge_status check_out_shape(const cge_kernel_ctx *ctx, const cge_shape *const *ins,
                                  int32_t n, const cge_shape *out, cge_bcast *bc)
{
    cge_shape want = *ins[0];
    bool ok = true;
    for (int32_t i = 1; i < n && ok; i++)
        ok = cge_shape_broadcast(&want, ins[i], &want) == CGE_OK;
    if (ok)
        ok = cge_shape_equal(&want, out) && cge_bcast_init(bc, out, ins, n) == CGE_OK;
    if (!ok) {
        char so[CGE_SHAPE_STR_MAX];
        return cge_kernel_error(ctx, CGE_ERR_SHAPE,
                                "output shape %s is not the broadcast of the input shapes",
                                cge_shape_str(out, so, sizeof so));
    }
    return CGE_OK;
}

static void bin_row(const void *user, void *o, const void *a, int64_t sa, const void *b,
                    int64_t sb, int64_t n)
{
    const bin_args *args = user;
    args->row(o, a, sa, b, sb, n, args);
}

static void bin_block(int64_t blk, int64_t nb, void *p)
{
    const bin_args *a = p;
    int64_t begin, end;
    cge_block_range(a->bc.numel, blk, nb, &begin, &end);
    cge_bcast_rows2(&a->bc, begin, end, a->out, a->size_out, a->a, a->size_a, a->b, a->size_b,
                    bin_row, a);
}

static cge_status bin_launch(const cge_kernel_ctx *ctx, cge_stream *stream, bin_op op)
{
    if (ctx->num_inputs != 2 || ctx->num_outputs != 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                "expects 2 inputs and 1 output, got %d and %d", ctx->num_inputs,
                                ctx->num_outputs);
    const cge_tensor *A = &ctx->inputs[0], *B = &ctx->inputs[1];
    cge_tensor *C = &ctx->outputs[0];
    bin_args args;
    memset(&args, 0, sizeof args);
    args.row = pick_row(op, A->dtype, B->dtype);
    cge_dtype want = is_compare(op) ? CGE_BOOL : A->dtype;
    if (!args.row || C->dtype != want)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "no %s kernel for %s, %s -> %s", op_names[op],
                                cge_dtype_name(A->dtype), cge_dtype_name(B->dtype),
                                cge_dtype_name(C->dtype));
    cge_status st;
    if ((st = cge_kernel_check_buffer(ctx, A, "input 0")) || (st = cge_kernel_check_buffer(ctx, B, "input 1")) ||
        (st = cge_kernel_check_buffer(ctx, C, "output 0")))
        return st;
    const cge_shape *ins[2] = {&A->shape, &B->shape};
    if ((st = check_out_shape(ctx, ins, 2, &C->shape, &args.bc)))
        return st;
    if (args.bc.numel == 0)
        return CGE_OK;
    args.a = A->data;
    args.b = B->data;
    args.out = C->data;
    args.size_a = cge_dtype_size(A->dtype);
    args.size_b = cge_dtype_size(B->dtype);
    args.size_out = cge_dtype_size(C->dtype);
    args.ta = A->dtype;
    args.tb = B->dtype;
    int64_t nb = cge_blocks_for(args.bc.numel, MIN_PER_BLOCK, ctx->num_threads);
    return cge_launch(stream, bin_block, nb, &args, sizeof args);
}

#define DEF_LAUNCH(NAME, OP)                                                             \
    static cge_status NAME##_launch(const cge_kernel_ctx *ctx, cge_stream *stream)       \
    {                                                                                    \
        return bin_launch(ctx, stream, OP);                                              \
    }
DEF_LAUNCH(add, OP_ADD)
DEF_LAUNCH(sub, OP_SUB)
DEF_LAUNCH(mul, OP_MUL)
DEF_LAUNCH(div, OP_DIV)
DEF_LAUNCH(pow, OP_POW)
DEF_LAUNCH(eq, OP_EQ)
DEF_LAUNCH(lt, OP_LT)
DEF_LAUNCH(gt, OP_GT)

/* Where: select by element size, since selecting never looks at the value. */
typedef struct where_args {
    cge_bcast bc;
    const uint8_t *cond;
    const void *x, *y;
    void *out;
    size_t size;
} where_args;

#define DEF_WHERE_ROW(NAME, T)                                                           \
    static void NAME(void *o_, const uint8_t *c, int64_t sc, const void *x_, int64_t sx,  \
                     const void *y_, int64_t sy, int64_t n)                              \
    {                                                                                    \
        T *o = o_;                                                                       \
        const T *x = x_, *y = y_;                                                        \
        if (sc && sx && sy) {                                                            \
            for (int64_t k = 0; k < n; k++)                                              \
                o[k] = c[k] ? x[k] : y[k];                                               \
        } else {                                                                         \
            for (int64_t k = 0; k < n; k++)                                              \
                o[k] = c[k * sc] ? x[k * sx] : y[k * sy];                                \
        }                                                                                \
    }
DEF_WHERE_ROW(where_row8, uint8_t)
DEF_WHERE_ROW(where_row16, uint16_t)
DEF_WHERE_ROW(where_row32, uint32_t)
DEF_WHERE_ROW(where_row64, uint64_t)

static void where_block(int64_t blk, int64_t nb, void *p)
{
    const where_args *a = p;
    const cge_bcast *bc = &a->bc;
    int64_t begin, end;
    cge_block_range(bc->numel, blk, nb, &begin, &end);
    int32_t last = bc->rank - 1;
    int64_t sc = bc->strides[0][last], sx = bc->strides[1][last], sy = bc->strides[2][last];
    const char *X = a->x, *Y = a->y;
    char *O = a->out;
    size_t sz = a->size;
    cge_bcast_iter it;
    cge_bcast_iter_init(bc, begin, &it);
    while (it.pos < end) {
        int64_t n = cge_bcast_iter_run(bc, &it, end);
        void *o = O + (size_t)it.pos * sz;
        const uint8_t *c = a->cond + it.off[0];
        const void *x = X + (size_t)it.off[1] * sz, *y = Y + (size_t)it.off[2] * sz;
        switch (sz) {
        case 1: where_row8(o, c, sc, x, sx, y, sy, n); break;
        case 2: where_row16(o, c, sc, x, sx, y, sy, n); break;
        case 4: where_row32(o, c, sc, x, sx, y, sy, n); break;
        default: where_row64(o, c, sc, x, sx, y, sy, n); break;
        }
        cge_bcast_iter_advance(bc, &it, n);
    }
}

static cge_status where_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_inputs != 3 || ctx->num_outputs != 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                "expects 3 inputs and 1 output, got %d and %d", ctx->num_inputs,
                                ctx->num_outputs);
    const cge_tensor *c = &ctx->inputs[0], *x = &ctx->inputs[1], *y = &ctx->inputs[2];
    cge_tensor *o = &ctx->outputs[0];
    size_t sz = cge_dtype_size(x->dtype);
    if (c->dtype != CGE_BOOL || x->dtype != y->dtype || o->dtype != x->dtype ||
        !(sz == 1 || sz == 2 || sz == 4 || sz == 8))
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "no Where kernel for %s, %s, %s -> %s",
                                cge_dtype_name(c->dtype), cge_dtype_name(x->dtype),
                                cge_dtype_name(y->dtype), cge_dtype_name(o->dtype));
    cge_status st;
    if ((st = cge_kernel_check_buffer(ctx, c, "input 0")) || (st = cge_kernel_check_buffer(ctx, x, "input 1")) ||
        (st = cge_kernel_check_buffer(ctx, y, "input 2")) || (st = cge_kernel_check_buffer(ctx, o, "output 0")))
        return st;
    where_args args;
    memset(&args, 0, sizeof args);
    const cge_shape *ins[3] = {&c->shape, &x->shape, &y->shape};
    if ((st = check_out_shape(ctx, ins, 3, &o->shape, &args.bc)))
        return st;
    if (args.bc.numel == 0)
        return CGE_OK;
    args.cond = c->data;
    args.x = x->data;
    args.y = y->data;
    args.out = o->data;
    args.size = sz;
    int64_t nb = cge_blocks_for(args.bc.numel, MIN_PER_BLOCK, ctx->num_threads);
    return cge_launch(stream, where_block, nb, &args, sizeof args);
}

/* ---- schemas ------------------------------------------------------------- */

/* Arithmetic writes A's dtype: the output may take A's buffer. Comparisons
 * write one byte per element of a possibly wider A, so blocks running in
 * parallel would overwrite elements of A other blocks still read: never in
 * place. Where writes X's dtype and reads X[k] before writing element k, so X
 * (input 1) is its in-place partner. */
#define KERNEL(NAME, DTYPES, INPLACE)                                                    \
    static const cge_kernel_def NAME##_kernels[] = {                                     \
        {.engine = "cpu", .dtypes = DTYPES, .launch = NAME##_launch, .inplace_input = INPLACE}}
KERNEL(add, CGE_DT_NUMERIC, 0);
KERNEL(sub, CGE_DT_NUMERIC, 0);
KERNEL(mul, CGE_DT_NUMERIC, 0);
KERNEL(div, CGE_DT_NUMERIC, 0);
KERNEL(pow, POW_BASE_DTYPES, 0);
KERNEL(eq, CGE_DT_ALL, -1);
KERNEL(lt, CGE_DT_NUMERIC, -1);
KERNEL(gt, CGE_DT_NUMERIC, -1);
/* Input 0 is the bool condition; X and Y may be any dtype. */
KERNEL(where, 0, 1);

static const cge_arg_def num_ab[] = {
    {"A", 0, CGE_DT_NUMERIC, "first operand"},
    {"B", 0, CGE_DT_NUMERIC, "second operand (broadcast with A)"},
};
static const cge_arg_def all_ab[] = {
    {"A", 0, CGE_DT_ALL, "first operand"},
    {"B", 0, CGE_DT_ALL, "second operand (broadcast with A)"},
};
static const cge_arg_def num_c[] = {{"C", 0, CGE_DT_NUMERIC, "result, A's dtype"}};
static const cge_arg_def bool_c[] = {{"C", 0, CGE_DT(CGE_BOOL), "elementwise comparison"}};
static const cge_arg_def pow_in[] = {
    {"X", 0, POW_BASE_DTYPES, "base"},
    {"Y", 0, CGE_DT_NUMERIC, "exponent (any numeric dtype)"},
};
static const cge_arg_def pow_out[] = {{"Z", 0, POW_BASE_DTYPES, "X^Y in X's dtype"}};
static const cge_arg_def where_in[] = {
    {"condition", 0, CGE_DT(CGE_BOOL), "true selects X, false Y"},
    {"X", 0, CGE_DT_ALL, "values where condition is true"},
    {"Y", 0, CGE_DT_ALL, "values where condition is false"},
};
static const cge_arg_def where_out[] = {{"output", 0, CGE_DT_ALL, "selected values"}};

#define BIN_DEF(NAME, SINCE, IN, OUT, KNAME, DOC)                                        \
    {.name = NAME, .domain = CGE_DOMAIN_DEFAULT, .since_version = SINCE,                 \
     .inputs = IN, .num_inputs = 2, .outputs = OUT, .num_outputs = 1,                    \
     .infer = KNAME##_infer, .kernels = KNAME##_kernels, .num_kernels = 1, .doc = DOC}

static const cge_op_def binary_ops[] = {
    BIN_DEF("Add", 14, num_ab, num_c, add, "A + B with numpy broadcasting; integers wrap"),
    BIN_DEF("Sub", 14, num_ab, num_c, sub, "A - B with numpy broadcasting; integers wrap"),
    BIN_DEF("Mul", 14, num_ab, num_c, mul, "A * B with numpy broadcasting; integers wrap"),
    BIN_DEF("Div", 14, num_ab, num_c, div,
            "A / B with numpy broadcasting; integer division truncates toward zero and "
            "x / 0 is 0"),
    BIN_DEF("Pow", 15, pow_in, pow_out, pow,
            "X^Y with numpy broadcasting, in X's dtype; integer powers are exact and wrap"),
    BIN_DEF("Equal", 13, all_ab, bool_c, eq, "A == B elementwise, broadcast"),
    BIN_DEF("Less", 13, num_ab, bool_c, lt, "A < B elementwise, broadcast"),
    BIN_DEF("Greater", 13, num_ab, bool_c, gt, "A > B elementwise, broadcast"),
    {.name = "Where", .domain = CGE_DOMAIN_DEFAULT, .since_version = 16, .inputs = where_in,
     .num_inputs = 3, .outputs = where_out, .num_outputs = 1, .infer = where_infer,
     .kernels = where_kernels, .num_kernels = 1,
     .doc = "condition ? X : Y elementwise, all three broadcast"},
};

const cge_op_def *cge_ops_binary(int32_t *count)
{
    if (count)
        *count = (int32_t)(sizeof binary_ops / sizeof binary_ops[0]);
    return binary_ops;
}
