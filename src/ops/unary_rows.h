/* The row kernels of the unary family (unary.c): element functions per op and
 * precision, the typed contiguous row loops built from them, and Cast's
 * dtype-to-dtype rows. Included by unary.c only. */
#ifndef CGE_OPS_UNARY_ROWS_H
#define CGE_OPS_UNARY_ROWS_H

#include <math.h>
#include <string.h>

#include "ops/fast_math.h"
#include "ops/kernel_util.h"

/* Attribute values an element function may need, read once at launch. */
typedef struct un_par {
    float alpha, beta, gamma;
    int neg, pos;  /* IsInf detect_negative / detect_positive */
} un_par;

struct un_args;
/* One contiguous run of n elements. */
typedef void (*un_row)(const void *in, void *out, int64_t n, const struct un_args *a);

typedef struct un_args {
    un_row row;
    const void *in;
    void *out;
    size_t size_in, size_out;
    int64_t numel;
    cge_dtype dtype;  /* of the input, for generic rows */
    un_par par;
} un_args;

/* ---- element functions ---------------------------------------------------- */

/* One function per op and precision, so each can later be swapped for a
 * vector approximation without touching the loops. float32 transcendental
 * functions go through double libm calls: correctly rounded in practice,
 * which keeps float32 results within 1e-6 of numpy's float64 reference. */
static inline float neg_f(float x, un_par p) { return -x; }
static inline double neg_d(double x, un_par p) { return -x; }
static inline float abs_f(float x, un_par p) { return fabsf(x); }
static inline double abs_d(double x, un_par p) { return fabs(x); }
static inline float exp_f(float x, un_par p) { return cge__expf_fast(x); }
static inline double exp_d(double x, un_par p) { return exp(x); }
static inline float log_f(float x, un_par p) { return (float)log((double)x); }
static inline double log_d(double x, un_par p) { return log(x); }
static inline float sqrt_f(float x, un_par p) { return sqrtf(x); }
static inline double sqrt_d(double x, un_par p) { return sqrt(x); }
static inline float recip_f(float x, un_par p) { return 1.0f / x; }
static inline double recip_d(double x, un_par p) { return 1.0 / x; }
/* x < 0 rather than x > 0 keeps NaN as NaN, as numpy's maximum does. */
static inline float relu_f(float x, un_par p) { return x < 0.0f ? 0.0f : x; }
static inline double relu_d(double x, un_par p) { return x < 0.0 ? 0.0 : x; }
static inline float leaky_f(float x, un_par p) { return x < 0.0f ? p.alpha * x : x; }
static inline double leaky_d(double x, un_par p) { return x < 0.0 ? (double)p.alpha * x : x; }
/* 1/(1+e^-x) loses everything to rounding for very negative x; e^x/(1+e^x)
 * does not. */
static inline double sigmoid_d(double x, un_par p)
{
    if (x >= 0.0)
        return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}
static inline float sigmoid_f(float x, un_par p) { return cge__sigmoidf_fast(x); }
static inline float tanh_f(float x, un_par p) { return (float)tanh((double)x); }
static inline double tanh_d(double x, un_par p) { return tanh(x); }
/* erf and exact GELU: fast_math's vectorised forms (within 6 ulp), which the
 * fused kernels share. */
static inline float erf_f(float x, un_par p) { return cge__erff_fast(x); }
static inline double erf_d(double x, un_par p) { return erf(x); }
/* 0.5x(1+erf(x/sqrt2)) written with erfc, which does not cancel for x < 0. */
static inline double gelu_d(double x, un_par p) { return 0.5 * x * erfc(-x * M_SQRT1_2); }
static inline float gelu_f(float x, un_par p) { return cge__gelu_erf_fast(x); }
/* 0.5x(1+tanh(u)) = x * sigmoid(2u), again free of cancellation for x < 0. */
static inline double gelu_tanh_d(double x, un_par p)
{
    const double k = 0.7978845608028654; /* sqrt(2/pi) */
    double u = k * (x + 0.044715 * x * x * x);
    return x * sigmoid_d(2.0 * u, p);
}
static inline float gelu_tanh_f(float x, un_par p) { return (float)gelu_tanh_d(x, p); }

/* Cheap functions are written in float so that their float32 loops vectorise
 * (comparisons become selects, which also keeps NaN as NaN). Transcendental
 * ones go through double libm calls, as above: correctly rounded in
 * practice, so float32 results stay within an ulp of numpy's. Selects on the
 * bits (cge__select_f32) keep loops with float arithmetic vectorisable. */

/* floor from rint (which gcc vectorises; floorf it does not without
 * -fno-trapping-math): rint's result is an integer, one too high at most.
 * ceil(x) = -floor(-x) keeps the sign of zero right (ceil(-0.5) = -0). */
static inline float floor_f(float x, un_par p)
{
    float r = rintf(x);
    return cge__select_f32(r > x, r - 1.0f, r);
}
static inline double floor_d(double x, un_par p)
{
    double r = rint(x);
    return r > x ? r - 1.0 : r;
}
static inline float ceil_f(float x, un_par p) { return -floor_f(-x, p); }
static inline double ceil_d(double x, un_par p) { return -floor_d(-x, p); }
/* rint rounds half to even in the default rounding mode, as ONNX asks. */
static inline float round_f(float x, un_par p) { return rintf(x); }
static inline double round_d(double x, un_par p) { return rint(x); }
/* numpy's sign: 0 for +-0, NaN for NaN. */
static inline float sign_f(float x, un_par p)
{
    return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x == 0.0f ? 0.0f : x;
}
static inline double sign_d(double x, un_par p)
{
    return x > 0.0 ? 1.0 : x < 0.0 ? -1.0 : x == 0.0 ? 0.0 : x;
}

#define DEF_LIBM(NAME, FN)                                                               \
    static inline float NAME##_f(float x, un_par p) { return (float)FN((double)x); }     \
    static inline double NAME##_d(double x, un_par p) { return FN(x); }
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
static inline double softplus_d(double x, un_par p)
{
    return x > 0.0 ? x + log1p(exp(-x)) : log1p(exp(x));
}
static inline float softplus_f(float x, un_par p) { return (float)softplus_d(x, p); }
static inline float softsign_f(float x, un_par p) { return x / (1.0f + fabsf(x)); }
static inline double softsign_d(double x, un_par p) { return x / (1.0 + fabs(x)); }
/* expm1 keeps e^x - 1 exact near 0, where e^x rounds to 1. */
static inline double elu_d(double x, un_par p) { return x < 0.0 ? p.alpha * expm1(x) : x; }
static inline float elu_f(float x, un_par p) { return x < 0.0f ? (float)elu_d(x, p) : x; }
static inline double selu_d(double x, un_par p)
{
    return x <= 0.0 ? (double)p.gamma * p.alpha * expm1(x) : (double)p.gamma * x;
}
static inline float selu_f(float x, un_par p)
{
    return x <= 0.0f ? (float)selu_d(x, p) : p.gamma * x;
}
/* max(0, x) + min(0, alpha (e^(x/alpha) - 1)); only one side is nonzero. */
static inline double celu_d(double x, un_par p)
{
    return x > 0.0 ? x : x <= 0.0 ? p.alpha * expm1(x / p.alpha) : x;
}
static inline float celu_f(float x, un_par p) { return x > 0.0f ? x : (float)celu_d(x, p); }
static inline float threlu_f(float x, un_par p) { return x > p.alpha ? x : 0.0f; }
static inline double threlu_d(double x, un_par p) { return x > p.alpha ? x : 0.0; }
/* Clamped with comparisons, not fminf/fmaxf, which would turn NaN into 0 or 1. */
static inline float hsigmoid_f(float x, un_par p)
{
    float v = p.alpha * x + p.beta;
    v = v < 0.0f ? 0.0f : v;
    return v > 1.0f ? 1.0f : v;
}
static inline double hsigmoid_d(double x, un_par p)
{
    double v = (double)p.alpha * x + p.beta;
    v = v < 0.0 ? 0.0 : v;
    return v > 1.0 ? 1.0 : v;
}
/* HardSwish is x * HardSigmoid(x) with alpha 1/6, beta 1/2 (set at launch). */
static inline float hswish_f(float x, un_par p)
{
    float v = p.alpha * x + p.beta;
    v = cge__select_f32(v < 0.0f, 0.0f, v);
    return x * cge__select_f32(v > 1.0f, 1.0f, v);
}
static inline double hswish_d(double x, un_par p) { return x * hsigmoid_d(x, p); }
static inline double mish_d(double x, un_par p) { return x * tanh(softplus_d(x, p)); }
static inline float mish_f(float x, un_par p) { return (float)mish_d(x, p); }
/* Shrink: lambd in alpha, bias in beta. */
static inline float shrink_f(float x, un_par p)
{
    float lo = x + p.beta, hi = x - p.beta;
    return cge__select_f32(x < -p.alpha, lo, cge__select_f32(x > p.alpha, hi, 0.0f));
}
static inline double shrink_d(double x, un_par p)
{
    return x < -(double)p.alpha ? x + p.beta : x > (double)p.alpha ? x - p.beta : 0.0;
}

/* ---- rows ------------------------------------------------------------------ */

/* out[k] = EXPR of x = LOAD(in[k]), with the attribute values at hand as p. */
#define LD_SAME(v) (v)
#define DEF_ROW(NAME, TI, TX, TO, LOAD, EXPR)                                            \
    static void NAME(const void *in_, void *out_, int64_t n, const un_args *a)           \
    {                                                                                    \
        const TI *in = in_;                                                              \
        TO *out = out_;                                                                  \
        const un_par p = a->par;                                                         \
        (void)p;                                                                         \
        for (int64_t k = 0; k < n; k++) {                                                \
            TX x = LOAD(in[k]);                                                          \
            out[k] = (EXPR);                                                             \
        }                                                                                \
    }

/* Same-dtype float rows from the element functions OP##_f and OP##_d;
 * float16 / bfloat16 are computed in float32. WIDE: all but float32, for ops
 * whose float32 row is a vectorised one from fast_math. */
#define DEF_WIDE_FLOAT_ROWS(OP)                                                          \
    DEF_ROW(OP##_f64, double, double, double, LD_SAME, OP##_d(x, p))                     \
    DEF_ROW(OP##_f16, uint16_t, float, uint16_t, cge_f16_to_f32, cge_f32_to_f16(OP##_f(x, p))) \
    DEF_ROW(OP##_bf16, uint16_t, float, uint16_t, cge_bf16_to_f32,                       \
            cge_f32_to_bf16(OP##_f(x, p)))
#define DEF_FLOAT_ROWS(OP)                                                               \
    DEF_ROW(OP##_f32, float, float, float, LD_SAME, OP##_f(x, p))                        \
    DEF_WIDE_FLOAT_ROWS(OP)
#define DEF_VEC_FLOAT_ROWS(OP, ROW32)                                                    \
    static void OP##_f32(const void *in_, void *out_, int64_t n, const un_args *a)       \
    {                                                                                    \
        ROW32((float *)out_, (const float *)in_, n);                                     \
    }                                                                                    \
    DEF_WIDE_FLOAT_ROWS(OP)
DEF_FLOAT_ROWS(neg)
DEF_FLOAT_ROWS(abs)
DEF_VEC_FLOAT_ROWS(exp, cge__exp_f32_row)
DEF_FLOAT_ROWS(log)
DEF_FLOAT_ROWS(sqrt)
DEF_FLOAT_ROWS(recip)
DEF_FLOAT_ROWS(relu)
DEF_FLOAT_ROWS(leaky)
DEF_VEC_FLOAT_ROWS(sigmoid, cge__sigmoid_f32_row)
DEF_FLOAT_ROWS(tanh)
DEF_VEC_FLOAT_ROWS(erf, cge__erf_f32_row)
DEF_VEC_FLOAT_ROWS(gelu, cge__gelu_f32_row)
DEF_FLOAT_ROWS(gelu_tanh)
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
    DEF_ROW(OP##_f32, float, float, uint8_t, LD_SAME, EXPR)                              \
    DEF_ROW(OP##_f64, double, double, uint8_t, LD_SAME, EXPR)                            \
    DEF_ROW(OP##_f16, uint16_t, float, uint8_t, cge_f16_to_f32, EXPR)                    \
    DEF_ROW(OP##_bf16, uint16_t, float, uint8_t, cge_bf16_to_f32, EXPR)
DEF_TEST_ROWS(isnan, (uint8_t)(x != x))
DEF_TEST_ROWS(isinf, (uint8_t)((p.pos & (x == INFINITY)) | (p.neg & (x == -INFINITY))))

/* Integers. Signed negation wraps (in the unsigned type W), so -MIN and
 * |MIN| are MIN, as in numpy. */
#define DEF_INT_ROW(NAME, T, EXPR) DEF_ROW(NAME, T, T, T, LD_SAME, EXPR)
#define SSIGN ((x > 0) - (x < 0))
#define USIGN (x != 0)
#define DEF_SINT_ROWS(S, T, W)                                                           \
    DEF_INT_ROW(neg_##S, T, (T)((W)0 - (W)x))                                            \
    DEF_INT_ROW(abs_##S, T, x < 0 ? (T)((W)0 - (W)x) : x)                                \
    DEF_INT_ROW(relu_##S, T, x < 0 ? (T)0 : x)                                           \
    DEF_INT_ROW(sign_##S, T, (T)(SSIGN))                                                 \
    DEF_INT_ROW(bnot_##S, T, (T)~x)
#define DEF_UINT_ROWS(S, T)                                                              \
    DEF_INT_ROW(sign_##S, T, (T)(USIGN))                                                 \
    DEF_INT_ROW(bnot_##S, T, (T)~x)
DEF_SINT_ROWS(i8, int8_t, uint32_t)
DEF_SINT_ROWS(i16, int16_t, uint32_t)
DEF_SINT_ROWS(i32, int32_t, uint32_t)
DEF_SINT_ROWS(i64, int64_t, uint64_t)
DEF_UINT_ROWS(u8, uint8_t)
DEF_UINT_ROWS(u16, uint16_t)
DEF_UINT_ROWS(u32, uint32_t)
DEF_UINT_ROWS(u64, uint64_t)

/* Any nonzero byte is true; the result is a canonical 0 or 1. */
DEF_INT_ROW(not_bool, uint8_t, (uint8_t)(x == 0))

/* Bytes unchanged: Identity, Cast to the same dtype, Abs of unsigned ints.
 * In place (in == out) there is nothing to do. */
static void copy_row(const void *in, void *out, int64_t n, const un_args *a)
{
    if (in != out)
        memcpy(out, in, (size_t)n * a->size_in);
}

/* Shrink on integers: computed in double, then converted back (truncating,
 * saturating), which is numpy's astype of the float result. */
static void shrink_int(const void *in, void *out, int64_t n, const un_args *a)
{
    cge_dtype t = a->dtype;
    for (int64_t k = 0; k < n; k++)
        cge__store_from_double(t, out, k, shrink_d(cge__load_as_double(t, in, k), a->par));
}

/* ---- Cast ------------------------------------------------------------------ */

/* Cast semantics (ONNX leaves the edge cases open; these are cge's):
 * float -> int truncates toward zero, saturates out of range, NaN -> 0;
 * int -> int wraps modulo 2^bits (numpy's astype); anything -> bool is
 * x != 0 (NaN -> true); bool -> anything is 0 or 1; to float16/bfloat16
 * rounds to nearest even through float32. */
/* The integer types narrower than 64 bits and their ranges (Clip's absent
 * bounds are these too). */
#define NARROW_INTS(X)                                                                   \
    X(i8, I8, int8_t, INT8_MIN, INT8_MAX) X(i16, I16, int16_t, INT16_MIN, INT16_MAX)     \
    X(i32, I32, int32_t, INT32_MIN, INT32_MAX) X(u8, U8, uint8_t, 0, UINT8_MAX)          \
    X(u16, U16, uint16_t, 0, UINT16_MAX) X(u32, U32, uint32_t, 0, UINT32_MAX)
#define DEF_SAT(S, N, T, LO, HI)                                                         \
    static inline T sat_##N(double v)                                                    \
    {                                                                                    \
        return v != v ? (T)0 : v <= (double)(LO) ? (T)(LO) : v >= (double)(HI) ? (T)(HI) \
                                                                               : (T)v;   \
    }
NARROW_INTS(DEF_SAT)
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

#endif
