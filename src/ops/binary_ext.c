/* More broadcasting binary operators: LessOrEqual GreaterOrEqual, the logical
 * And Or Xor, Mod (both fmod modes), BitShift, BitwiseAnd/Or/Xor and PRelu
 * (slope broadcast to X). Typed row loops over the shared broadcast iterator. */
#include <math.h>
#include <string.h>

#include "ops/broadcast.h"
#include "ops/builtin.h"
#include "ops/kernel_util.h"

#define MIN_PER_BLOCK 16384

typedef enum bx_op {
    B_LE, B_GE, B_AND, B_OR, B_XOR, B_MOD, B_FMOD, B_SHL, B_SHR, B_BAND, B_BOR, B_BXOR,
    B_PRELU, B_COUNT
} bx_op;

static const char *const bx_names[B_COUNT] = {
    "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Mod", "Mod", "BitShift",
    "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "PRelu"};

/* One row: n output elements; a and b advance by sa, sb (each 0 or 1). */
typedef void (*bx_row)(void *o, const void *a, int64_t sa, const void *b, int64_t sb,
                       int64_t n);

typedef struct bx_args {
    cge_bcast bc;
    bx_row row;
    const void *a, *b;
    void *out;
    size_t size_a, size_b, size_out;
} bx_args;

/* ---- typed rows --------------------------------------------------------------- */

/* Four stride cases, each a plain loop that vectorises; the output may be
 * A's buffer (in place), hence no restrict. */
#define DEF_ROW(NAME, TA, TB, TO, EXPR)                                                  \
    static void NAME(void *o_, const void *a_, int64_t sa, const void *b_, int64_t sb,   \
                     int64_t n)                                                          \
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

/* c ? a : b on the bits. gcc (with its default -ftrapping-math) will not
 * if-convert a loop where float arithmetic feeds a conditional, which keeps
 * PRelu scalar; this select it vectorises. */
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
static inline double sel_d(int c, double a, double b)
{
    uint64_t ia, ib, m = (uint64_t)0 - (uint64_t)(c != 0);
    memcpy(&ia, &a, sizeof ia);
    memcpy(&ib, &b, sizeof ib);
    uint64_t r = (ia & m) | (ib & ~m);
    double f;
    memcpy(&f, &r, sizeof f);
    return f;
}

/* Comparisons (NaN compares false) and PRelu on floats. */
#define DEF_FLOAT_ROWS(S, T, FMOD, SEL)                                                  \
    DEF_ROW(le_##S, T, T, uint8_t, x <= y)                                               \
    DEF_ROW(ge_##S, T, T, uint8_t, x >= y)                                               \
    DEF_ROW(fmod_##S, T, T, T, FMOD(x, y))                                               \
    DEF_ROW(prelu_##S, T, T, T, SEL(x < 0, y * x, x))
DEF_FLOAT_ROWS(f32, float, fmodf, sel_f)
DEF_FLOAT_ROWS(f64, double, fmod, sel_d)

#define DEF_HALF_ROWS(S, TOF, FROMF)                                                     \
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
        return (r != 0 && ((r < 0) != (y < 0))) ? (T)(r + y) : r;                       \
    }                                                                                    \
    static inline T sfmod_##S(T x, T y) { return y == 0 || y == -1 ? (T)0 : (T)(x % y); }
DEF_SMOD(i8, int8_t)
DEF_SMOD(i16, int16_t)
DEF_SMOD(i32, int32_t)
DEF_SMOD(i64, int64_t)
#define UMOD(x, y) ((y) == 0 ? 0 : (x) % (y))

/* Integers: comparisons, remainders and PRelu (y * x wraps, computed in the
 * unsigned type W). */
#define DEF_SINT_ROWS(S, T, W)                                                           \
    DEF_ROW(le_##S, T, T, uint8_t, x <= y)                                               \
    DEF_ROW(ge_##S, T, T, uint8_t, x >= y)                                               \
    DEF_ROW(mod_##S, T, T, T, smod_##S(x, y))                                            \
    DEF_ROW(fmod_##S, T, T, T, sfmod_##S(x, y))                                          \
    DEF_ROW(prelu_##S, T, T, T, x < 0 ? (T)((W)y * (W)x) : x)
DEF_SINT_ROWS(i8, int8_t, uint32_t)
DEF_SINT_ROWS(i16, int16_t, uint32_t)
DEF_SINT_ROWS(i32, int32_t, uint32_t)
DEF_SINT_ROWS(i64, int64_t, uint64_t)

/* Unsigned: both Mod modes agree; PRelu is the identity (x is never < 0). */
#define DEF_UINT_ROWS(S, T, BITS)                                                        \
    DEF_ROW(le_##S, T, T, uint8_t, x <= y)                                               \
    DEF_ROW(ge_##S, T, T, uint8_t, x >= y)                                               \
    DEF_ROW(mod_##S, T, T, T, (T)UMOD(x, y))                                             \
    DEF_ROW(prelu_##S, T, T, T, ((void)y, x))                                            \
    DEF_ROW(shl_##S, T, T, T, y >= BITS ? (T)0 : (T)(x << y))                            \
    DEF_ROW(shr_##S, T, T, T, y >= BITS ? (T)0 : (T)(x >> y))                            \
    DEF_ROW(band_##S, T, T, T, (T)(x & y))                                               \
    DEF_ROW(bor_##S, T, T, T, (T)(x | y))                                                \
    DEF_ROW(bxor_##S, T, T, T, (T)(x ^ y))
DEF_UINT_ROWS(u8, uint8_t, 8)
DEF_UINT_ROWS(u16, uint16_t, 16)
DEF_UINT_ROWS(u32, uint32_t, 32)
DEF_UINT_ROWS(u64, uint64_t, 64)

/* Booleans: any nonzero byte is true; results are 0 or 1. */
DEF_ROW(and_bool, uint8_t, uint8_t, uint8_t, (uint8_t)((x != 0) & (y != 0)))
DEF_ROW(or_bool, uint8_t, uint8_t, uint8_t, (uint8_t)((x != 0) | (y != 0)))
DEF_ROW(xor_bool, uint8_t, uint8_t, uint8_t, (uint8_t)((x != 0) ^ (y != 0)))

#define FLOAT_ROWS(P) [CGE_F32] = P##_f32, [CGE_F64] = P##_f64, [CGE_F16] = P##_f16, \
                      [CGE_BF16] = P##_bf16
#define SINT_ROWS(P) [CGE_I8] = P##_i8, [CGE_I16] = P##_i16, [CGE_I32] = P##_i32, \
                     [CGE_I64] = P##_i64
#define UINT_ROWS(P) [CGE_U8] = P##_u8, [CGE_U16] = P##_u16, [CGE_U32] = P##_u32, \
                     [CGE_U64] = P##_u64
/* Bit operations do not care about signedness: signed types use the unsigned
 * row of their size. */
#define BIT_ROWS(P) UINT_ROWS(P), [CGE_I8] = P##_u8, [CGE_I16] = P##_u16, \
                    [CGE_I32] = P##_u32, [CGE_I64] = P##_u64

static const bx_row bx_rows[B_COUNT][CGE_DTYPE_MAX] = {
    [B_LE] = {FLOAT_ROWS(le), SINT_ROWS(le), UINT_ROWS(le)},
    [B_GE] = {FLOAT_ROWS(ge), SINT_ROWS(ge), UINT_ROWS(ge)},
    [B_AND] = {[CGE_BOOL] = and_bool},
    [B_OR] = {[CGE_BOOL] = or_bool},
    [B_XOR] = {[CGE_BOOL] = xor_bool},
    [B_MOD] = {SINT_ROWS(mod), UINT_ROWS(mod)},
    [B_FMOD] = {FLOAT_ROWS(fmod), SINT_ROWS(fmod), [CGE_U8] = mod_u8, [CGE_U16] = mod_u16,
                [CGE_U32] = mod_u32, [CGE_U64] = mod_u64},
    [B_SHL] = {UINT_ROWS(shl)},
    [B_SHR] = {UINT_ROWS(shr)},
    [B_BAND] = {BIT_ROWS(band)},
    [B_BOR] = {BIT_ROWS(bor)},
    [B_BXOR] = {BIT_ROWS(bxor)},
    [B_PRELU] = {FLOAT_ROWS(prelu), SINT_ROWS(prelu), UINT_ROWS(prelu)},
};

#define BOOL_DT CGE_DT(CGE_BOOL)
/* ONNX 16's PRelu types: floats and 32/64-bit integers. */
#define PRELU_DTYPES (CGE_DT_FLOAT | CGE_DT(CGE_I32) | CGE_DT(CGE_I64) | CGE_DT(CGE_U32) | \
                      CGE_DT(CGE_U64))
static const cge_dtype_set bx_dtypes[B_COUNT] = {
    [B_LE] = CGE_DT_NUMERIC,        [B_GE] = CGE_DT_NUMERIC,     [B_AND] = BOOL_DT,
    [B_OR] = BOOL_DT,               [B_XOR] = BOOL_DT,           [B_MOD] = CGE_DT_INT,
    [B_FMOD] = CGE_DT_NUMERIC,      [B_SHL] = CGE_DT_UNSIGNED_INT,
    [B_SHR] = CGE_DT_UNSIGNED_INT,  [B_BAND] = CGE_DT_INT,       [B_BOR] = CGE_DT_INT,
    [B_BXOR] = CGE_DT_INT,          [B_PRELU] = PRELU_DTYPES,
};

static bool in_set(cge_dtype_set set, cge_dtype t)
{
    return t > CGE_DTYPE_UNDEFINED && t < CGE_DTYPE_MAX && (set & CGE_DT(t));
}

static bool to_bool(bx_op op) { return op == B_LE || op == B_GE; }

/* Attributes pick the variant: Mod's fmod, BitShift's direction. Returns
 * false (and leaves *op) for a bad direction. */
static bool variant(const cge_attrs *attrs, bx_op *op)
{
    if (*op == B_MOD || *op == B_FMOD) {
        *op = cge_attrs_get_int(attrs, "fmod", 0) ? B_FMOD : B_MOD;
    } else if (*op == B_SHL || *op == B_SHR) {
        const char *d = cge_attrs_get_string(attrs, "direction", "");
        if (d && !strcmp(d, "LEFT"))
            *op = B_SHL;
        else if (d && !strcmp(d, "RIGHT"))
            *op = B_SHR;
        else
            return false;
    }
    return true;
}

/* ---- meta ------------------------------------------------------------------------ */

static cge_status bx_infer(cge_infer_ctx *ctx, bx_op op)
{
    if (ctx->num_inputs != 2 || ctx->num_outputs != 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "expects 2 inputs and 1 output, got %d and %d", ctx->num_inputs,
                              ctx->num_outputs);
    const cge_tensor_desc *a = &ctx->inputs[0], *b = &ctx->inputs[1];
    if (!variant(ctx->attrs, &op))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "attribute direction is '%s'; it must be 'LEFT' or 'RIGHT'",
                              cge_attrs_get_string(ctx->attrs, "direction", ""));
    if (op == B_MOD && cge_dtype_is_float(a->dtype))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "input is %s: Mod on floating-point inputs needs fmod = 1",
                              cge_dtype_name(a->dtype));
    if (!in_set(bx_dtypes[op], a->dtype))
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "input 0 has dtype %s, which %s does not support",
                              cge_dtype_name(a->dtype), bx_names[op]);
    if (a->dtype != b->dtype)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "inputs must have one dtype; they are %s and %s",
                              cge_dtype_name(a->dtype), cge_dtype_name(b->dtype));
    cge_shape out;
    char sa[CGE_SHAPE_STR_MAX], sb[CGE_SHAPE_STR_MAX];
    if (op == B_PRELU) {
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
    ctx->outputs[0].dtype = (to_bool(op) || a->dtype == CGE_BOOL) ? CGE_BOOL : a->dtype;
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

/* ---- kernels --------------------------------------------------------------------- */


static void bx_row_call(const void *user, void *o, const void *a, int64_t sa, const void *b,
                        int64_t sb, int64_t n)
{
    ((const bx_args *)user)->row(o, a, sa, b, sb, n);
}

static void bx_block(int64_t blk, int64_t nb, void *p)
{
    const bx_args *a = p;
    int64_t begin, end;
    cge_block_range(a->bc.numel, blk, nb, &begin, &end);
    cge_bcast_rows2(&a->bc, begin, end, a->out, a->size_out, a->a, a->size_a, a->b, a->size_b,
                    bx_row_call, a);
}

static cge_status bx_launch(const cge_kernel_ctx *ctx, cge_stream *stream, bx_op op)
{
    if (ctx->num_inputs != 2 || ctx->num_outputs != 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                "expects 2 inputs and 1 output, got %d and %d", ctx->num_inputs,
                                ctx->num_outputs);
    const cge_tensor *A = &ctx->inputs[0], *B = &ctx->inputs[1];
    cge_tensor *C = &ctx->outputs[0];
    if (!variant(ctx->attrs, &op))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                "attribute direction must be 'LEFT' or 'RIGHT'");
    bx_args args;
    memset(&args, 0, sizeof args);
    cge_dtype want = (to_bool(op) || A->dtype == CGE_BOOL) ? CGE_BOOL : A->dtype;
    if (in_set(bx_dtypes[op], A->dtype) && A->dtype == B->dtype && C->dtype == want)
        args.row = bx_rows[op][A->dtype];
    if (!args.row)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "no %s kernel for %s, %s -> %s",
                                bx_names[op], cge_dtype_name(A->dtype), cge_dtype_name(B->dtype),
                                cge_dtype_name(C->dtype));
    cge_status st;
    if ((st = cge_kernel_check_buffer(ctx, A, "input 0")) || (st = cge_kernel_check_buffer(ctx, B, "input 1")) ||
        (st = cge_kernel_check_buffer(ctx, C, "output 0")))
        return st;
    /* The output is the broadcast of both (PRelu: exactly X's shape). */
    cge_shape want_shape;
    bool ok;
    if (op == B_PRELU) {
        want_shape = A->shape;
        ok = true;
    } else {
        ok = cge_shape_broadcast(&A->shape, &B->shape, &want_shape) == CGE_OK;
    }
    const cge_shape *ins[2] = {&A->shape, &B->shape};
    if (!ok || !cge_shape_equal(&want_shape, &C->shape) ||
        cge_bcast_init(&args.bc, &C->shape, ins, 2) != CGE_OK) {
        char s0[CGE_SHAPE_STR_MAX], s1[CGE_SHAPE_STR_MAX], so[CGE_SHAPE_STR_MAX];
        return cge_kernel_error(ctx, CGE_ERR_SHAPE,
                                "inputs %s and %s do not give output shape %s",
                                cge_shape_str(&A->shape, s0, sizeof s0),
                                cge_shape_str(&B->shape, s1, sizeof s1),
                                cge_shape_str(&C->shape, so, sizeof so));
    }
    if (args.bc.numel == 0)
        return CGE_OK;
    args.a = A->data;
    args.b = B->data;
    args.out = C->data;
    args.size_a = cge_dtype_size(A->dtype);
    args.size_b = cge_dtype_size(B->dtype);
    args.size_out = cge_dtype_size(C->dtype);
    int64_t nb = cge_blocks_for(args.bc.numel, MIN_PER_BLOCK, ctx->num_threads);
    return cge_launch(stream, bx_block, nb, &args, sizeof args);
}

#define DEF_OP_FNS(NAME, OP)                                                             \
    static cge_status NAME##_infer(cge_infer_ctx *ctx) { return bx_infer(ctx, OP); }     \
    static cge_status NAME##_launch(const cge_kernel_ctx *ctx, cge_stream *stream)       \
    {                                                                                    \
        return bx_launch(ctx, stream, OP);                                               \
    }
DEF_OP_FNS(le, B_LE)
DEF_OP_FNS(ge, B_GE)
DEF_OP_FNS(and, B_AND)
DEF_OP_FNS(or, B_OR)
DEF_OP_FNS(xor, B_XOR)
DEF_OP_FNS(mod, B_MOD)
DEF_OP_FNS(shift, B_SHL)
DEF_OP_FNS(band, B_BAND)
DEF_OP_FNS(bor, B_BOR)
DEF_OP_FNS(bxor, B_BXOR)
DEF_OP_FNS(prelu, B_PRELU)

/* ---- schemas --------------------------------------------------------------------- */

/* Ops that write A's dtype may write into A's buffer; comparisons write one
 * byte per possibly wider element: never in place. */
#define KERNEL(NAME, DTYPES, INPLACE)                                                    \
    static const cge_kernel_def NAME##_kernels[] = {                                     \
        {.engine = "cpu", .dtypes = DTYPES, .launch = NAME##_launch, .inplace_input = INPLACE}}
KERNEL(le, CGE_DT_NUMERIC, -1);
KERNEL(ge, CGE_DT_NUMERIC, -1);
KERNEL(and, BOOL_DT, 0);
KERNEL(or, BOOL_DT, 0);
KERNEL(xor, BOOL_DT, 0);
KERNEL(mod, CGE_DT_NUMERIC, 0);
KERNEL(shift, CGE_DT_UNSIGNED_INT, 0);
KERNEL(band, CGE_DT_INT, 0);
KERNEL(bor, CGE_DT_INT, 0);
KERNEL(bxor, CGE_DT_INT, 0);
KERNEL(prelu, PRELU_DTYPES, 0);

#define ARGS2(NAME, DTYPES, OUT, AN, BN, CN)                                             \
    static const cge_arg_def NAME##_in[] = {{AN, 0, DTYPES, "first operand"},            \
                                            {BN, 0, DTYPES, "second operand, broadcast"}};\
    static const cge_arg_def NAME##_out[] = {{CN, 0, OUT, "result"}}
ARGS2(cmp, CGE_DT_NUMERIC, BOOL_DT, "A", "B", "C");
ARGS2(logic, BOOL_DT, BOOL_DT, "A", "B", "C");
ARGS2(mod, CGE_DT_NUMERIC, CGE_DT_NUMERIC, "A", "B", "C");
ARGS2(shift, CGE_DT_UNSIGNED_INT, CGE_DT_UNSIGNED_INT, "X", "Y", "Z");
ARGS2(bit, CGE_DT_INT, CGE_DT_INT, "A", "B", "C");
ARGS2(prelu, PRELU_DTYPES, PRELU_DTYPES, "X", "slope", "Y");

static const cge_attr_def mod_attrs[] = {
    {.name = "fmod", .kind = CGE_ATTR_INT, .default_i = 0,
     .doc = "1: sign of the dividend (C fmod; required for floats); 0: of the divisor"}};
static const cge_attr_def shift_attrs[] = {
    {.name = "direction", .kind = CGE_ATTR_STRING, .required = true,
     .doc = "'LEFT' or 'RIGHT'; shifting by the bit width or more gives 0"}};

#define BX_DEF(NAME, SINCE, ARGN, KNAME, ATTRS, NATTRS, DOC)                             \
    {.name = NAME, .domain = CGE_DOMAIN_DEFAULT, .since_version = SINCE,                 \
     .inputs = ARGN##_in, .num_inputs = 2, .outputs = ARGN##_out, .num_outputs = 1,      \
     .attrs = ATTRS, .num_attrs = NATTRS, .infer = KNAME##_infer,                        \
     .kernels = KNAME##_kernels, .num_kernels = 1, .doc = DOC}

static const cge_op_def binary_ext_ops[] = {
    BX_DEF("LessOrEqual", 16, cmp, le, NULL, 0, "A <= B elementwise, broadcast"),
    BX_DEF("GreaterOrEqual", 16, cmp, ge, NULL, 0, "A >= B elementwise, broadcast"),
    BX_DEF("And", 7, logic, and, NULL, 0, "logical and, broadcast"),
    BX_DEF("Or", 7, logic, or, NULL, 0, "logical or, broadcast"),
    BX_DEF("Xor", 7, logic, xor, NULL, 0, "logical xor, broadcast"),
    BX_DEF("Mod", 13, mod, mod, mod_attrs, 1,
           "remainder, broadcast; integer x mod 0 is 0"),
    BX_DEF("BitShift", 11, shift, shift, shift_attrs, 1, "X << Y or X >> Y, broadcast"),
    BX_DEF("BitwiseAnd", 18, bit, band, NULL, 0, "A & B, broadcast"),
    BX_DEF("BitwiseOr", 18, bit, bor, NULL, 0, "A | B, broadcast"),
    BX_DEF("BitwiseXor", 18, bit, bxor, NULL, 0, "A ^ B, broadcast"),
    BX_DEF("PRelu", 16, prelu, prelu, NULL, 0,
           "X < 0 ? slope * X : X, slope broadcast to X"),
};

const cge_op_def *cge_ops_binary_ext(int32_t *count)
{
    if (count)
        *count = (int32_t)(sizeof binary_ext_ops / sizeof binary_ext_ops[0]);
    return binary_ext_ops;
}
