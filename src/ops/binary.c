/* The broadcasting binary family: arithmetic (Add Sub Mul Div Pow Mod), comparisons to
 * bool, logic (And Or Xor), bits (BitShift Bitwise*), PRelu and Where. One table of typed
 * rows per op and dtype; one meta and one launch over the broadcast iterator (broadcast.h). */
#include <math.h>
#include <string.h>

#include "base/strings.h"
#include "ops/broadcast.h"
#include "ops/builtin.h"
#include "ops/kernel_util.h"

/* Each block gets at least this many output elements: below it, the cost of
 * another task outweighs the work. */
#define MIN_PER_BLOCK 16384

/* Mod and BitShift have two rows each, picked by an attribute (variant()). */
typedef enum bin_op {
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_POW, OP_EQ, OP_LT, OP_GT, OP_LE, OP_GE,
    OP_AND, OP_OR, OP_XOR, OP_MOD, OP_FMOD, OP_SHL, OP_SHR, OP_BAND, OP_BOR, OP_BXOR,
    OP_PRELU, OP_COUNT
} bin_op;

struct bin_args;
/* One row: n output elements; a and b advance by sa, sb (each 0 or 1). */
typedef void (*row_fn)(void *o, const void *a, int64_t sa, const void *b, int64_t sb, int64_t n,
                       const struct bin_args *args);

typedef struct bin_args {
    cge__bcast bc;
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
    CGE_TARGET_CLONES static void NAME(void *o_, const void *a_, int64_t sa, const void *b_, \
                                       int64_t sb, int64_t n, const bin_args *args)      \
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

/* float32 / float64: plain C arithmetic (IEEE: x/0 is inf or NaN); comparisons
 * with NaN are false. PRelu selects on the bits, which vectorises. */
#define DEF_FLOAT_ROWS(S, T, POWF, FMOD, SEL)                                            \
    DEF_ROW(add_##S, T, T, T, x + y)                                                     \
    DEF_ROW(sub_##S, T, T, T, x - y)                                                     \
    DEF_ROW(mul_##S, T, T, T, x * y)                                                     \
    DEF_ROW(div_##S, T, T, T, x / y)                                                     \
    DEF_ROW(pow_##S, T, T, T, POWF(x, y))                                                \
    DEF_ROW(eq_##S, T, T, uint8_t, x == y)                                               \
    DEF_ROW(lt_##S, T, T, uint8_t, x < y)                                                \
    DEF_ROW(gt_##S, T, T, uint8_t, x > y)                                                \
    DEF_ROW(le_##S, T, T, uint8_t, x <= y)                                               \
    DEF_ROW(ge_##S, T, T, uint8_t, x >= y)                                               \
    DEF_ROW(fmod_##S, T, T, T, FMOD(x, y))                                               \
    DEF_ROW(prelu_##S, T, T, T, SEL(x < 0, y * x, x))
DEF_FLOAT_ROWS(f32, float, powf, fmodf, cge__select_f32)
DEF_FLOAT_ROWS(f64, double, pow, fmod, cge__select_f64)

/* float16 / bfloat16: computed in float32 and rounded back, as numpy does. */
#define DEF_HALF_ROWS(S, TOF, FROMF)                                                     \
    DEF_ROW(add_##S, uint16_t, uint16_t, uint16_t, FROMF(TOF(x) + TOF(y)))               \
    DEF_ROW(sub_##S, uint16_t, uint16_t, uint16_t, FROMF(TOF(x) - TOF(y)))               \
    DEF_ROW(mul_##S, uint16_t, uint16_t, uint16_t, FROMF(TOF(x) * TOF(y)))               \
    DEF_ROW(div_##S, uint16_t, uint16_t, uint16_t, FROMF(TOF(x) / TOF(y)))               \
    DEF_ROW(pow_##S, uint16_t, uint16_t, uint16_t, FROMF(powf(TOF(x), TOF(y))))          \
    DEF_ROW(eq_##S, uint16_t, uint16_t, uint8_t, TOF(x) == TOF(y))                       \
    DEF_ROW(lt_##S, uint16_t, uint16_t, uint8_t, TOF(x) < TOF(y))                        \
    DEF_ROW(gt_##S, uint16_t, uint16_t, uint8_t, TOF(x) > TOF(y))                        \
    DEF_ROW(le_##S, uint16_t, uint16_t, uint8_t, TOF(x) <= TOF(y))                       \
    DEF_ROW(ge_##S, uint16_t, uint16_t, uint8_t, TOF(x) >= TOF(y))                       \
    DEF_ROW(fmod_##S, uint16_t, uint16_t, uint16_t, FROMF(fmodf(TOF(x), TOF(y))))        \
    DEF_ROW(prelu_##S, uint16_t, uint16_t, uint16_t,                                     \
            TOF(x) < 0.0f ? FROMF(TOF(y) * TOF(x)) : x)
DEF_HALF_ROWS(f16, cge_f16_to_f32, cge_f32_to_f16)
DEF_HALF_ROWS(bf16, cge_bf16_to_f32, cge_f32_to_bf16)

/* Integer remainders. x % 0 is 0 (as numpy gives); MIN % -1 is 0 (C leaves
 * it undefined). fmod keeps the dividend's sign (C's %); mod, the divisor's
 * (Python's %). */
#define DEF_SMOD(S, T)                                                                   \
    static inline T smod_##S(T x, T y)                                                   \
    {                                                                                    \
        if (y == 0 || y == -1)                                                           \
            return 0;                                                                    \
        T r = (T)(x % y);                                                                \
        return (r != 0 && ((r < 0) != (y < 0))) ? (T)(r + y) : r;                        \
    }                                                                                    \
    static inline T sfmod_##S(T x, T y) { return y == 0 || y == -1 ? (T)0 : (T)(x % y); }
DEF_SMOD(i8, int8_t)
DEF_SMOD(i16, int16_t)
DEF_SMOD(i32, int32_t)
DEF_SMOD(i64, int64_t)
#define UMOD(x, y) ((y) == 0 ? 0 : (x) % (y))

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
    DEF_ROW(gt_##S, T, T, uint8_t, x > y)                                                \
    DEF_ROW(le_##S, T, T, uint8_t, x <= y)                                               \
    DEF_ROW(ge_##S, T, T, uint8_t, x >= y)
/* Signed: remainders, and PRelu (y * x wraps, computed in W). */
#define DEF_SINT_ROWS(S, T, W)                                                           \
    DEF_INT_ROWS(S, T, W, SDIV)                                                          \
    DEF_ROW(mod_##S, T, T, T, smod_##S(x, y))                                            \
    DEF_ROW(fmod_##S, T, T, T, sfmod_##S(x, y))                                          \
    DEF_ROW(prelu_##S, T, T, T, x < 0 ? (T)((W)y * (W)x) : x)
/* Unsigned: both Mod modes agree; PRelu is the identity (x is never < 0);
 * shifting by the bit width or more gives 0. */
#define DEF_UINT_ROWS(S, T, W, BITS)                                                     \
    DEF_INT_ROWS(S, T, W, UDIV)                                                          \
    DEF_ROW(mod_##S, T, T, T, (T)UMOD(x, y))                                             \
    DEF_ROW(prelu_##S, T, T, T, ((void)y, x))                                            \
    DEF_ROW(shl_##S, T, T, T, y >= BITS ? (T)0 : (T)(x << y))                            \
    DEF_ROW(shr_##S, T, T, T, y >= BITS ? (T)0 : (T)(x >> y))                            \
    DEF_ROW(band_##S, T, T, T, (T)(x & y))                                               \
    DEF_ROW(bor_##S, T, T, T, (T)(x | y))                                                \
    DEF_ROW(bxor_##S, T, T, T, (T)(x ^ y))
DEF_SINT_ROWS(i8, int8_t, uint32_t)
DEF_SINT_ROWS(i16, int16_t, uint32_t)
DEF_SINT_ROWS(i32, int32_t, uint32_t)
DEF_SINT_ROWS(i64, int64_t, uint64_t)
DEF_UINT_ROWS(u8, uint8_t, uint32_t, 8)
DEF_UINT_ROWS(u16, uint16_t, uint32_t, 16)
DEF_UINT_ROWS(u32, uint32_t, uint32_t, 32)
DEF_UINT_ROWS(u64, uint64_t, uint64_t, 64)

/* Booleans: any nonzero byte is true; results are 0 or 1. */
DEF_ROW(eq_bool, uint8_t, uint8_t, uint8_t, (x != 0) == (y != 0))

/* Strings are equal when their bytes are (docs/strings.md). */
static void eq_string(void *o_, const void *a_, int64_t sa, const void *b_, int64_t sb,
                      int64_t n, const bin_args *args)
{
    (void)args;
    uint8_t *o = o_;
    const cge_string *a = a_, *b = b_;
    for (int64_t k = 0; k < n; k++)
        o[k] = cge__string_equal(&a[k * sa], &b[k * sb]);
}
DEF_ROW(and_bool, uint8_t, uint8_t, uint8_t, (uint8_t)((x != 0) & (y != 0)))
DEF_ROW(or_bool, uint8_t, uint8_t, uint8_t, (uint8_t)((x != 0) | (y != 0)))
DEF_ROW(xor_bool, uint8_t, uint8_t, uint8_t, (uint8_t)((x != 0) ^ (y != 0)))

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
            int64_t x = cge__load_as_i64(ta, a, k * sa);
            uint64_t e;
            bool neg = false;
            if (tb == CGE_U64) {
                e = ((const uint64_t *)b)[k * sb];
            } else {
                int64_t y = cge__load_as_i64(tb, b, k * sb);
                neg = y < 0;
                e = neg ? (uint64_t)0 - (uint64_t)y : (uint64_t)y;
            }
            int64_t r = ipow_wrap(x, neg, e);
            if (ta == CGE_I32)
                ((int32_t *)o)[k] = (int32_t)r;
            else
                ((int64_t *)o)[k] = r;
        } else {
            double x = cge__load_as_double(ta, a, k * sa);
            double y = cge__load_as_double(tb, b, k * sb);
            cge__store_from_double(ta, o, k, pow(x, y));
        }
    }
}

/* ---- the table ------------------------------------------------------------ */

#define FLOAT_ROWS(P) [CGE_F32] = P##_f32, [CGE_F64] = P##_f64, [CGE_F16] = P##_f16,     \
                      [CGE_BF16] = P##_bf16
#define SINT_ROWS(P) [CGE_I8] = P##_i8, [CGE_I16] = P##_i16, [CGE_I32] = P##_i32,        \
                     [CGE_I64] = P##_i64
#define UINT_ROWS(P) [CGE_U8] = P##_u8, [CGE_U16] = P##_u16, [CGE_U32] = P##_u32,        \
                     [CGE_U64] = P##_u64
#define NUM_ROWS(P) FLOAT_ROWS(P), SINT_ROWS(P), UINT_ROWS(P)
/* Bit operations do not care about signedness: signed types use the unsigned
 * row of their size. */
#define BIT_ROWS(P) UINT_ROWS(P), [CGE_I8] = P##_u8, [CGE_I16] = P##_u16,                \
                    [CGE_I32] = P##_u32, [CGE_I64] = P##_u64

#define BOOL_DT CGE_DT(CGE_BOOL)
/* Pow's base X (its exponent Y takes any numeric dtype). */
#define POW_BASE_DTYPES (CGE_DT_FLOAT | CGE_DT(CGE_I32) | CGE_DT(CGE_I64))
/* ONNX 16's PRelu types: floats and 32/64-bit integers. */
#define PRELU_DTYPES (CGE_DT_FLOAT | CGE_DT(CGE_I32) | CGE_DT(CGE_I64) | CGE_DT(CGE_U32) | \
                      CGE_DT(CGE_U64))

typedef struct bin_info {
    const char *name;
    cge_dtype_set dtypes;        /* accepted for A */
    bool to_bool;                /* a comparison: writes bool */
    row_fn rows[CGE_DTYPE_MAX];  /* by A's dtype (B's is the same, except for Pow) */
} bin_info;

static const bin_info bin_ops[OP_COUNT] = {
    [OP_ADD] = {"Add", CGE_DT_NUMERIC, false, {NUM_ROWS(add)}},
    [OP_SUB] = {"Sub", CGE_DT_NUMERIC, false, {NUM_ROWS(sub)}},
    [OP_MUL] = {"Mul", CGE_DT_NUMERIC, false, {NUM_ROWS(mul)}},
    [OP_DIV] = {"Div", CGE_DT_NUMERIC, false, {NUM_ROWS(div)}},
    [OP_POW] = {"Pow", POW_BASE_DTYPES, false, {FLOAT_ROWS(pow)}},
    [OP_EQ] = {"Equal", CGE_DT_ALL | CGE_DT_STRING, true,
               {NUM_ROWS(eq), [CGE_BOOL] = eq_bool, [CGE_STRING] = eq_string}},
    [OP_LT] = {"Less", CGE_DT_NUMERIC, true, {NUM_ROWS(lt)}},
    [OP_GT] = {"Greater", CGE_DT_NUMERIC, true, {NUM_ROWS(gt)}},
    [OP_LE] = {"LessOrEqual", CGE_DT_NUMERIC, true, {NUM_ROWS(le)}},
    [OP_GE] = {"GreaterOrEqual", CGE_DT_NUMERIC, true, {NUM_ROWS(ge)}},
    [OP_AND] = {"And", BOOL_DT, false, {[CGE_BOOL] = and_bool}},
    [OP_OR] = {"Or", BOOL_DT, false, {[CGE_BOOL] = or_bool}},
    [OP_XOR] = {"Xor", BOOL_DT, false, {[CGE_BOOL] = xor_bool}},
    [OP_MOD] = {"Mod", CGE_DT_INT, false, {SINT_ROWS(mod), UINT_ROWS(mod)}},
    [OP_FMOD] = {"Mod", CGE_DT_NUMERIC, false,
                 {FLOAT_ROWS(fmod), SINT_ROWS(fmod), UINT_ROWS(mod)}},
    [OP_SHL] = {"BitShift", CGE_DT_UNSIGNED_INT, false, {UINT_ROWS(shl)}},
    [OP_SHR] = {"BitShift", CGE_DT_UNSIGNED_INT, false, {UINT_ROWS(shr)}},
    [OP_BAND] = {"BitwiseAnd", CGE_DT_INT, false, {BIT_ROWS(band)}},
    [OP_BOR] = {"BitwiseOr", CGE_DT_INT, false, {BIT_ROWS(bor)}},
    [OP_BXOR] = {"BitwiseXor", CGE_DT_INT, false, {BIT_ROWS(bxor)}},
    [OP_PRELU] = {"PRelu", PRELU_DTYPES, false, {NUM_ROWS(prelu)}},
};

static bool in_set(cge_dtype_set set, cge_dtype t)
{
    return t > CGE_DTYPE_UNDEFINED && t < CGE_DTYPE_MAX && (set & CGE_DT(t));
}

/* Attributes pick the variant: Mod's fmod, BitShift's direction. Returns
 * false (and leaves *op) for a bad direction. */
static bool variant(const cge_attrs *attrs, bin_op *op)
{
    if (*op == OP_MOD || *op == OP_FMOD) {
        *op = cge_attrs_get_int(attrs, "fmod", 0) ? OP_FMOD : OP_MOD;
    } else if (*op == OP_SHL || *op == OP_SHR) {
        const char *d = cge_attrs_get_string(attrs, "direction", "");
        if (d && !strcmp(d, "LEFT"))
            *op = OP_SHL;
        else if (d && !strcmp(d, "RIGHT"))
            *op = OP_SHR;
        else
            return false;
    }
    return true;
}

static row_fn pick_row(bin_op op, cge_dtype ta, cge_dtype tb)
{
    if (!in_set(bin_ops[op].dtypes, ta))
        return NULL;
    if (op == OP_POW) {
        if (!in_set(CGE_DT_NUMERIC, tb))
            return NULL;
        return ta == tb && bin_ops[op].rows[ta] ? bin_ops[op].rows[ta] : pow_generic;
    }
    return ta == tb ? bin_ops[op].rows[ta] : NULL;
}

/* ---- meta ---------------------------------------------------------------- */

static cge_status bin_infer(cge_infer_ctx *ctx, bin_op op, const cge_arg_def *args)
{
    CGE__CHECK_COUNTS(ctx, cge_meta_error, 2, 2, 1, 1, "2 inputs and 1 output");
    const cge_tensor_desc *a = &ctx->inputs[0], *b = &ctx->inputs[1];
    if (!variant(ctx->attrs, &op))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "attribute direction is '%s'; it must be 'LEFT' or 'RIGHT'",
                              cge_attrs_get_string(ctx->attrs, "direction", ""));
    if (op == OP_MOD && cge_dtype_is_float(a->dtype))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "input is %s: Mod on floating-point inputs needs fmod = 1",
                              cge_dtype_name(a->dtype));
    if (!in_set(bin_ops[op].dtypes, a->dtype))
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "input 0 has dtype %s, which %s does not support",
                              cge_dtype_name(a->dtype), bin_ops[op].name);
    if (op == OP_POW) {
        if (!in_set(CGE_DT_NUMERIC, b->dtype))
            return cge_meta_error(ctx, CGE_ERR_DTYPE,
                                  "exponent Y has dtype %s; Pow needs a numeric exponent",
                                  cge_dtype_name(b->dtype));
    } else if (a->dtype != b->dtype) {
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "inputs must have one dtype; %s is %s, %s is %s",
                              args[0].name, cge_dtype_name(a->dtype), args[1].name,
                              cge_dtype_name(b->dtype));
    }
    cge_shape out;
    char sa[CGE_SHAPE_STR_MAX], sb[CGE_SHAPE_STR_MAX];
    if (op == OP_PRELU) {
        /* The slope broadcasts to X, never X to the slope. */
        out = a->shape;
        bool ok = b->shape.rank <= a->shape.rank;
        for (int32_t i = 0; ok && i < b->shape.rank; i++) {
            int64_t db = b->shape.dims[b->shape.rank - 1 - i];
            int64_t da = a->shape.dims[a->shape.rank - 1 - i];
            ok = db == 1 || cge_dim_may_equal(db, da);
        }
        if (!ok)
            return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                  "slope %s does not broadcast to X %s (unidirectionally)",
                                  cge_shape_str(&b->shape, sb, sizeof sb),
                                  cge_shape_str(&a->shape, sa, sizeof sa));
    } else if (cge_shape_broadcast(&a->shape, &b->shape, &out) != CGE_OK) {
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "inputs %s and %s do not broadcast",
                              cge_shape_str(&a->shape, sa, sizeof sa),
                              cge_shape_str(&b->shape, sb, sizeof sb));
    }
    ctx->outputs[0].dtype = bin_ops[op].to_bool ? CGE_BOOL : a->dtype;
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

static cge_status where_infer(cge_infer_ctx *ctx)
{
    CGE__CHECK_COUNTS(ctx, cge_meta_error, 3, 3, 1, 1, "3 inputs and 1 output");
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

/* ---- kernels ------------------------------------------------------------- */

/* The output's shape must be exactly the broadcast of the inputs' (or, when
 * `to_first`, input 0's: the others broadcast to it). */
static cge_status check_out_shape(const cge_kernel_ctx *ctx, const cge_shape *const *ins,
                                  int32_t n, bool to_first, const cge_shape *out, cge__bcast *bc)
{
    cge_shape want = *ins[0];
    bool ok = true;
    for (int32_t i = 1; i < n && ok && !to_first; i++)
        ok = cge_shape_broadcast(&want, ins[i], &want) == CGE_OK;
    if (ok)
        ok = cge_shape_equal(&want, out) && cge__bcast_init(bc, out, ins, n) == CGE_OK;
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
    cge__block_range(a->bc.numel, blk, nb, &begin, &end);
    cge__bcast_rows2(&a->bc, begin, end, a->out, a->size_out, a->a, a->size_a, a->b, a->size_b,
                    bin_row, a);
}

static cge_status bin_launch(const cge_kernel_ctx *ctx, cge_stream *stream, bin_op op)
{
    CGE__CHECK_COUNTS(ctx, cge_kernel_error, 2, 2, 1, 1, "2 inputs and 1 output");
    const cge_tensor *A = &ctx->inputs[0], *B = &ctx->inputs[1];
    cge_tensor *C = &ctx->outputs[0];
    if (!variant(ctx->attrs, &op))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                "attribute direction must be 'LEFT' or 'RIGHT'");
    bin_args args;
    memset(&args, 0, sizeof args);
    args.row = pick_row(op, A->dtype, B->dtype);
    cge_dtype want = bin_ops[op].to_bool ? CGE_BOOL : A->dtype;
    if (!args.row || C->dtype != want)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "no %s kernel for %s, %s -> %s",
                                bin_ops[op].name, cge_dtype_name(A->dtype),
                                cge_dtype_name(B->dtype), cge_dtype_name(C->dtype));
    cge_status st;
    if ((st = cge__kernel_check_buffer(ctx, A, "input 0")) ||
        (st = cge__kernel_check_buffer(ctx, B, "input 1")) ||
        (st = cge__kernel_check_buffer(ctx, C, "output 0")))
        return st;
    const cge_shape *ins[2] = {&A->shape, &B->shape};
    if ((st = check_out_shape(ctx, ins, 2, op == OP_PRELU, &C->shape, &args.bc)))
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
    int64_t nb = cge__blocks_for(args.bc.numel, MIN_PER_BLOCK, ctx->num_threads);
    return cge_launch(stream, bin_block, nb, &args, sizeof args);
}

/* Where: select by element size, since selecting never looks at the value. */
typedef struct where_args {
    cge__bcast bc;
    const uint8_t *cond;
    const void *x, *y;
    void *out;
    size_t size;
} where_args;

#define DEF_WHERE_ROW(NAME, T)                                                           \
    static void NAME(void *o_, const uint8_t *c, int64_t sc, const void *x_, int64_t sx, \
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
    const cge__bcast *bc = &a->bc;
    int64_t begin, end;
    cge__block_range(bc->numel, blk, nb, &begin, &end);
    int32_t last = bc->rank - 1;
    int64_t sc = bc->strides[0][last], sx = bc->strides[1][last], sy = bc->strides[2][last];
    const char *X = a->x, *Y = a->y;
    char *O = a->out;
    size_t sz = a->size;
    cge__bcast_iter it;
    cge__bcast_iter_init(bc, begin, &it);
    while (it.pos < end) {
        int64_t n = cge__bcast_iter_run(bc, &it, end);
        void *o = O + (size_t)it.pos * sz;
        const uint8_t *c = a->cond + it.off[0];
        const void *x = X + (size_t)it.off[1] * sz, *y = Y + (size_t)it.off[2] * sz;
        switch (sz) {
        case 1: where_row8(o, c, sc, x, sx, y, sy, n); break;
        case 2: where_row16(o, c, sc, x, sx, y, sy, n); break;
        case 4: where_row32(o, c, sc, x, sx, y, sy, n); break;
        default: where_row64(o, c, sc, x, sx, y, sy, n); break;
        }
        cge__bcast_iter_advance(bc, &it, n);
    }
}

static cge_status where_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    CGE__CHECK_COUNTS(ctx, cge_kernel_error, 3, 3, 1, 1, "3 inputs and 1 output");
    const cge_tensor *c = &ctx->inputs[0], *x = &ctx->inputs[1], *y = &ctx->inputs[2];
    cge_tensor *o = &ctx->outputs[0];
    size_t sz = cge_dtype_size(x->dtype);
    if (c->dtype != CGE_BOOL || x->dtype != y->dtype || o->dtype != x->dtype ||
        !(sz == 1 || sz == 2 || sz == 4 || sz == 8))
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "no Where kernel for %s, %s, %s -> %s",
                                cge_dtype_name(c->dtype), cge_dtype_name(x->dtype),
                                cge_dtype_name(y->dtype), cge_dtype_name(o->dtype));
    cge_status st;
    if ((st = cge__kernel_check_buffer(ctx, c, "input 0")) ||
        (st = cge__kernel_check_buffer(ctx, x, "input 1")) ||
        (st = cge__kernel_check_buffer(ctx, y, "input 2")) ||
        (st = cge__kernel_check_buffer(ctx, o, "output 0")))
        return st;
    where_args args;
    memset(&args, 0, sizeof args);
    const cge_shape *ins[3] = {&c->shape, &x->shape, &y->shape};
    if ((st = check_out_shape(ctx, ins, 3, false, &o->shape, &args.bc)))
        return st;
    if (args.bc.numel == 0)
        return CGE_OK;
    args.cond = c->data;
    args.x = x->data;
    args.y = y->data;
    args.out = o->data;
    args.size = sz;
    int64_t nb = cge__blocks_for(args.bc.numel, MIN_PER_BLOCK, ctx->num_threads);
    return cge_launch(stream, where_block, nb, &args, sizeof args);
}

/* ---- schemas ------------------------------------------------------------- */

#define ARGS2(NAME, IN, OUT, AN, AD, BN, BD, CN, CD)                                     \
    static const cge_arg_def NAME##_in[] = {{AN, 0, IN, AD}, {BN, 0, IN, BD}};           \
    static const cge_arg_def NAME##_out[] = {{CN, 0, OUT, CD}}
ARGS2(num, CGE_DT_NUMERIC, CGE_DT_NUMERIC, "A", "first operand", "B",
      "second operand (broadcast with A)", "C", "result, A's dtype");
ARGS2(eq, CGE_DT_ALL | CGE_DT_STRING, BOOL_DT, "A", "first operand", "B",
      "second operand (broadcast with A)",
      "C", "elementwise comparison");
ARGS2(lt, CGE_DT_NUMERIC, BOOL_DT, "A", "first operand", "B",
      "second operand (broadcast with A)", "C", "elementwise comparison");
#define ARGS2_SHORT(NAME, DTYPES, OUT, AN, BN, CN)                                       \
    ARGS2(NAME, DTYPES, OUT, AN, "first operand", BN, "second operand, broadcast", CN, "result")
ARGS2_SHORT(cmp, CGE_DT_NUMERIC, BOOL_DT, "A", "B", "C");
ARGS2_SHORT(logic, BOOL_DT, BOOL_DT, "A", "B", "C");
ARGS2_SHORT(mod, CGE_DT_NUMERIC, CGE_DT_NUMERIC, "A", "B", "C");
ARGS2_SHORT(shift, CGE_DT_UNSIGNED_INT, CGE_DT_UNSIGNED_INT, "X", "Y", "Z");
ARGS2_SHORT(bit, CGE_DT_INT, CGE_DT_INT, "A", "B", "C");
ARGS2_SHORT(prelu, PRELU_DTYPES, PRELU_DTYPES, "X", "slope", "Y");
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

static const cge_attr_def mod_attrs[] = {
    {.name = "fmod", .kind = CGE_ATTR_INT, .default_i = 0,
     .doc = "1: sign of the dividend (C fmod; required for floats); 0: of the divisor"}};
static const cge_attr_def shift_attrs[] = {
    {.name = "direction", .kind = CGE_ATTR_STRING, .required = true,
     .doc = "'LEFT' or 'RIGHT'; shifting by the bit width or more gives 0"}};

/* Every two-input op: its functions' prefix, op, ONNX name and version, the
 * schema's tensors (ARGS2 above), the kernel's dtypes and in-place partner,
 * the attributes. Ops that write A's dtype may write into A's buffer;
 * comparisons write one byte per element of a possibly wider A, so blocks
 * running in parallel would overwrite elements of A other blocks still read:
 * never in place. */
#define BINARY_OPS(X)                                                                    \
    X(add, OP_ADD, "Add", 14, num, CGE_DT_NUMERIC, 0, NULL, 0,                           \
      "A + B with numpy broadcasting; integers wrap")                                    \
    X(sub, OP_SUB, "Sub", 14, num, CGE_DT_NUMERIC, 0, NULL, 0,                           \
      "A - B with numpy broadcasting; integers wrap")                                    \
    X(mul, OP_MUL, "Mul", 14, num, CGE_DT_NUMERIC, 0, NULL, 0,                           \
      "A * B with numpy broadcasting; integers wrap")                                    \
    X(div, OP_DIV, "Div", 14, num, CGE_DT_NUMERIC, 0, NULL, 0,                           \
      "A / B with numpy broadcasting; integer division truncates toward zero and "       \
      "x / 0 is 0")                                                                      \
    X(pow, OP_POW, "Pow", 15, pow, POW_BASE_DTYPES, 0, NULL, 0,                          \
      "X^Y with numpy broadcasting, in X's dtype; integer powers are exact and wrap")    \
    X(eq, OP_EQ, "Equal", 13, eq, CGE_DT_ALL | CGE_DT_STRING, -1, NULL, 0,                  \
      "A == B elementwise, broadcast; strings compare their bytes")                      \
    X(lt, OP_LT, "Less", 13, lt, CGE_DT_NUMERIC, -1, NULL, 0, "A < B elementwise, broadcast") \
    X(gt, OP_GT, "Greater", 13, lt, CGE_DT_NUMERIC, -1, NULL, 0,                         \
      "A > B elementwise, broadcast")
/* Listed after Where, as they were registered before the families merged. */
#define BINARY_OPS_2(X)                                                                  \
    X(le, OP_LE, "LessOrEqual", 16, cmp, CGE_DT_NUMERIC, -1, NULL, 0,                    \
      "A <= B elementwise, broadcast")                                                   \
    X(ge, OP_GE, "GreaterOrEqual", 16, cmp, CGE_DT_NUMERIC, -1, NULL, 0,                 \
      "A >= B elementwise, broadcast")                                                   \
    X(and, OP_AND, "And", 7, logic, BOOL_DT, 0, NULL, 0, "logical and, broadcast")       \
    X(or, OP_OR, "Or", 7, logic, BOOL_DT, 0, NULL, 0, "logical or, broadcast")           \
    X(xor, OP_XOR, "Xor", 7, logic, BOOL_DT, 0, NULL, 0, "logical xor, broadcast")       \
    X(mod, OP_MOD, "Mod", 13, mod, CGE_DT_NUMERIC, 0, mod_attrs, 1,                      \
      "remainder, broadcast; integer x mod 0 is 0")                                      \
    X(shift, OP_SHL, "BitShift", 11, shift, CGE_DT_UNSIGNED_INT, 0, shift_attrs, 1,      \
      "X << Y or X >> Y, broadcast")                                                     \
    X(band, OP_BAND, "BitwiseAnd", 18, bit, CGE_DT_INT, 0, NULL, 0, "A & B, broadcast")  \
    X(bor, OP_BOR, "BitwiseOr", 18, bit, CGE_DT_INT, 0, NULL, 0, "A | B, broadcast")     \
    X(bxor, OP_BXOR, "BitwiseXor", 18, bit, CGE_DT_INT, 0, NULL, 0, "A ^ B, broadcast")  \
    X(prelu, OP_PRELU, "PRelu", 16, prelu, PRELU_DTYPES, 0, NULL, 0,                     \
      "X < 0 ? slope * X : X, slope broadcast to X")

#define X_FNS(F, OP, NAME, SINCE, ARGN, KDT, INPLACE, ATTRS, NATTRS, DOC)                \
    static cge_status F##_infer(cge_infer_ctx *ctx) { return bin_infer(ctx, OP, ARGN##_in); } \
    static cge_status F##_launch(const cge_kernel_ctx *ctx, cge_stream *stream)          \
    {                                                                                    \
        return bin_launch(ctx, stream, OP);                                              \
    }                                                                                    \
    static const cge_kernel_def F##_kernels[] = {                                        \
        {.engine = "cpu", .dtypes = KDT, .launch = F##_launch, .inplace_input = INPLACE}};
BINARY_OPS(X_FNS)
BINARY_OPS_2(X_FNS)
/* Where writes X's dtype and reads X[k] before writing element k, so X
 * (input 1) is its in-place partner; input 0 is the bool condition and X and
 * Y may be any dtype. */
static const cge_kernel_def where_kernels[] = {
    {.engine = "cpu", .dtypes = 0, .launch = where_launch, .inplace_input = 1}};

#define X_DEF(F, OP, NAME, SINCE, ARGN, KDT, INPLACE, ATTRS, NATTRS, DOC)                \
    {.name = NAME, .domain = CGE_DOMAIN_DEFAULT, .since_version = SINCE,                 \
     .inputs = ARGN##_in, .num_inputs = 2, .outputs = ARGN##_out, .num_outputs = 1,      \
     .attrs = ATTRS, .num_attrs = NATTRS, .infer = F##_infer, .kernels = F##_kernels,    \
     .num_kernels = 1, .doc = DOC},

static const cge_op_def binary_ops[] = {
    BINARY_OPS(X_DEF)
    {.name = "Where", .domain = CGE_DOMAIN_DEFAULT, .since_version = 16, .inputs = where_in,
     .num_inputs = 3, .outputs = where_out, .num_outputs = 1, .infer = where_infer,
     .kernels = where_kernels, .num_kernels = 1,
     .doc = "condition ? X : Y elementwise, all three broadcast"},
    BINARY_OPS_2(X_DEF)
};

const cge_op_def *cge__ops_binary(int32_t *count)
{
    if (count)
        *count = (int32_t)(sizeof binary_ops / sizeof binary_ops[0]);
    return binary_ops;
}
