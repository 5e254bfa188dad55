/* ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp,
 * ReduceSumSquare (opset 13: axes attribute; 18: axes input) and ArgMax/ArgMin.
 * They use reduce.c's [outer, reduce, inner] plans (reduce_util.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/builtin.h"
#include "ops/kernel_util.h"
#include "ops/reduce_util.h"

#define RX_DTYPES                                                                          \
    (CGE_DT(CGE_F32) | CGE_DT(CGE_F64) | CGE_DT(CGE_F16) | CGE_DT(CGE_BF16) |              \
     CGE_DT(CGE_I32) | CGE_DT(CGE_I64) | CGE_DT(CGE_U32) | CGE_DT(CGE_U64))
#define RX_MIN_DTYPES (RX_DTYPES | CGE_DT(CGE_I8) | CGE_DT(CGE_U8))
#define ARG_DTYPES (RX_MIN_DTYPES | CGE_DT(CGE_I16) | CGE_DT(CGE_U16))
#define RX_CHUNK 64
#define RX_LANES 8

enum { RX_MIN, RX_PROD, RX_L1, RX_L2, RX_LOGSUM, RX_LSE, RX_SUMSQ };

/* ---- meta ---------------------------------------------------------------------------- */

static cge_status rx_infer_attr(cge_infer_ctx *ctx)
{
    return reduce_infer(ctx, false);
}

static cge_status rx_infer_input(cge_infer_ctx *ctx)
{
    return reduce_infer(ctx, true);
}

/* ---- kernels ------------------------------------------------------------------------- */

typedef red_args rx_args;

#define LD_SELF(v) (v)
#define LD_F16(v) cge_f16_to_f32(v)
#define LD_BF16(v) cge_bf16_to_f32(v)
#define ST_F16(v) cge_f32_to_f16((float)(v))
#define ST_BF16(v) cge_f32_to_bf16((float)(v))
/* Signed integers accumulate in uint64_t: products and sums wrap (to the
 * output width, once stored) instead of overflowing. */
#define LD_SU(v) ((uint64_t)(int64_t)(v))
#define ABS_S(a) ((int64_t)(a) < 0 ? (uint64_t)0 - (a) : (a))
#define A2D_F(a) (a)
#define A2D_S(a) ((double)(int64_t)(a))
#define A2D_U(a) ((double)(a))

#define C_MIN(a, v, c) a = ((v) < (a) || (v) != (v)) ? (v) : (a)
#define C_MAX(a, v, c) a = ((v) > (a) || (v) != (v)) ? (v) : (a)
#define C_MUL(a, v, c) a *= (v)
#define C_ADD(a, v, c) a += (v)
#define C_SQ(a, v, c) a += (v) * (v)
#define C_EXP(a, v, c) a += exp((v) - mx[c])

/* Fills ACC[0..w) for outputs e..e+w-1 (a MID chunk stays in one inner row):
 * INIT, then COMB(slot, LD(element), c) over each output's reduced elements;
 * MERGE combines the lanes of contiguous rows. */
#define RX_WALK(T, ACC, AT, INIT, COMB, MERGE, LD)                                            \
    do {                                                                                   \
        for (int64_t c = 0; c < w; c++)                                                    \
            ACC[c] = INIT;                                                                 \
        if (pl->kind == PLAN_COPY) {                                                       \
            for (int64_t c = 0; c < w; c++)                                                \
                COMB(ACC[c], LD(x[e + c]), c);                                             \
        } else if (pl->kind == PLAN_ROWS) {                                                \
            int64_t n = pl->count;                                                         \
            for (int64_t c = 0; c < w; c++) {                                              \
                const T *r = x + (e + c) * n;                                              \
                AT l[RX_LANES];                                                            \
                for (int k = 0; k < RX_LANES; k++)                                         \
                    l[k] = INIT;                                                           \
                int64_t j = 0;                                                             \
                for (; j + RX_LANES <= n; j += RX_LANES)                                   \
                    for (int k = 0; k < RX_LANES; k++)                                     \
                        COMB(l[k], LD(r[j + k]), c);                                       \
                for (; j < n; j++)                                                         \
                    COMB(l[0], LD(r[j]), c);                                               \
                for (int k = 0; k < RX_LANES; k++)                                         \
                    MERGE(ACC[c], l[k], c);                                                \
            }                                                                              \
        } else if (pl->kind == PLAN_MID) {                                                 \
            int64_t n = pl->count, inner = pl->inner;                                      \
            const T *xs = x + (e / inner) * n * inner + e % inner;                         \
            for (int64_t r = 0; r < n; r++)                                                \
                for (int64_t c = 0; c < w; c++)                                            \
                    COMB(ACC[c], LD(xs[r * inner + c]), c);                                \
        } else {                                                                           \
            int64_t last = pl->rdims[pl->nr - 1], lstr = pl->rstr[pl->nr - 1];             \
            for (int64_t c = 0; c < w; c++) {                                              \
                int64_t base = 0, t = e + c;                                               \
                for (int32_t d = pl->nk - 1; d >= 0; d--) {                                \
                    base += (t % pl->kdims[d]) * pl->kstr[d];                              \
                    t /= pl->kdims[d];                                                     \
                }                                                                          \
                if (pl->count == 0)                                                        \
                    continue;                                                              \
                int64_t idx[CGE_MAX_RANK] = {0};                                           \
                for (;;) {                                                                 \
                    int64_t off = base;                                                    \
                    for (int32_t d = 0; d + 1 < pl->nr; d++)                               \
                        off += idx[d] * pl->rstr[d];                                       \
                    for (int64_t j = 0; j < last; j++)                                     \
                        COMB(ACC[c], LD(x[off + j * lstr]), c);                            \
                    int32_t d = pl->nr - 2;                                                \
                    for (; d >= 0; d--) {                                                  \
                        if (++idx[d] < pl->rdims[d])                                       \
                            break;                                                         \
                        idx[d] = 0;                                                        \
                    }                                                                      \
                    if (d < 0)                                                             \
                        break;                                                             \
                }                                                                          \
            }                                                                              \
        }                                                                                  \
    } while (0)

/* T: element; A/LDA/A2D/STA: arithmetic accumulator (double for floats,
 * uint64_t for integers), load, to double, store; MT/LDM/STM/MINIT: ReduceMin's
 * comparison type and its identity (+inf, type maximum). ABS_<SUF> and
 * LDD_<SUF> (below) load for L1 and for LogSumExp. */
#define RX_KERNELS(SUF, T, A, LDA, A2D, STA, MT, LDM, STM, MINIT)                     \
    static void rx_chunk_##SUF(const rx_args *p, const red_plan *pl, const T *x, T *y,      \
                               int64_t e, int64_t w)                                       \
    {                                                                                      \
        A acc[RX_CHUNK];                                                                   \
        double mx[RX_CHUNK], sd[RX_CHUNK];                                                 \
        MT mn[RX_CHUNK];                                                                   \
        switch (p->op) {                                                                   \
        case RX_MIN:                                                                       \
            RX_WALK(T, mn, MT, MINIT, C_MIN, C_MIN, LDM);                                     \
            for (int64_t c = 0; c < w; c++)                                                \
                y[e + c] = STM(mn[c]);                                                     \
            break;                                                                         \
        case RX_PROD:                                                                      \
            RX_WALK(T, acc, A, (A)1, C_MUL, C_MUL, LDA);                                      \
            for (int64_t c = 0; c < w; c++)                                                \
                y[e + c] = STA(acc[c]);                                                    \
            break;                                                                         \
        case RX_L1:                                                                        \
            RX_WALK(T, acc, A, (A)0, C_ADD, C_ADD, ABS_##SUF);                                \
            for (int64_t c = 0; c < w; c++)                                                \
                y[e + c] = STA(acc[c]);                                                    \
            break;                                                                         \
        case RX_SUMSQ:                                                                     \
        case RX_L2:                                                                        \
            RX_WALK(T, acc, A, (A)0, C_SQ, C_ADD, LDA);                                       \
            for (int64_t c = 0; c < w; c++) {                                              \
                if (p->op == RX_SUMSQ)                                                     \
                    y[e + c] = STA(acc[c]);                                                \
                else                                                                       \
                    cge_store_from_double(p->dtype, y, e + c, sqrt(A2D(acc[c])));          \
            }                                                                              \
            break;                                                                         \
        case RX_LOGSUM:                                                                    \
            RX_WALK(T, acc, A, (A)0, C_ADD, C_ADD, LDA);                                      \
            for (int64_t c = 0; c < w; c++)                                                \
                cge_store_from_double(p->dtype, y, e + c, log(A2D(acc[c])));               \
            break;                                                                         \
        default: /* RX_LSE: max first, so that exp never overflows */                     \
            RX_WALK(T, mx, double, -INFINITY, C_MAX, C_MAX, LDD_##SUF);                       \
            RX_WALK(T, sd, double, 0.0, C_EXP, C_ADD, LDD_##SUF);                             \
            for (int64_t c = 0; c < w; c++) {                                              \
                double m = mx[c];                                                          \
                cge_store_from_double(p->dtype, y, e + c,                                  \
                                      isinf(m) || isnan(m) ? m : m + log(sd[c]));          \
            }                                                                              \
            break;                                                                         \
        }                                                                                  \
    }                                                                                      \
    static void rx_fn_##SUF(int64_t blk, int64_t nblk, void *args)                         \
    {                                                                                      \
        const rx_args *p = args;                                                           \
        const T *x = p->x;                                                                 \
        T *y = p->y;                                                                       \
        int64_t e0, e1;                                                                    \
        cge_block_range(p->out_numel, blk, nblk, &e0, &e1);                                \
        if (p->identity) {                                                                 \
            memcpy(y + e0, x + e0, (size_t)(e1 - e0) * sizeof(T));                         \
            return;                                                                        \
        }                                                                                  \
        red_plan pl;                                                                       \
        if (!red_args_plan(p, &pl)) {                                                            \
            memset(y + e0, 0, (size_t)(e1 - e0) * sizeof(T)); /* meta rejects this */      \
            return;                                                                        \
        }                                                                                  \
        for (int64_t e = e0; e < e1;) {                                                    \
            int64_t w = e1 - e < RX_CHUNK ? e1 - e : RX_CHUNK;                             \
            if (pl.kind == PLAN_MID && pl.inner - e % pl.inner < w)                        \
                w = pl.inner - e % pl.inner;                                               \
            rx_chunk_##SUF(p, &pl, x, y, e, w);                                            \
            e += w;                                                                        \
        }                                                                                  \
    }

/* Loads for L1 (absolute value in the accumulator type) and LogSumExp (double). */
#define ABS_f32(v) fabs((double)(v))
#define ABS_f64(v) fabs(v)
#define ABS_f16(v) fabs((double)cge_f16_to_f32(v))
#define ABS_bf16(v) fabs((double)cge_bf16_to_f32(v))
#define ABS_i32(v) ABS_S(LD_SU(v))
#define ABS_i64(v) ABS_S(LD_SU(v))
#define ABS_i8(v) ABS_S(LD_SU(v))
#define ABS_u32(v) ((uint64_t)(v))
#define ABS_u64(v) ((uint64_t)(v))
#define ABS_u8(v) ((uint64_t)(v))
#define LDD_f32(v) ((double)(v))
#define LDD_f64(v) (v)
#define LDD_f16(v) ((double)cge_f16_to_f32(v))
#define LDD_bf16(v) ((double)cge_bf16_to_f32(v))
#define LDD_i32(v) ((double)(v))
#define LDD_i64(v) ((double)(v))
#define LDD_i8(v) ((double)(v))
#define LDD_u32(v) ((double)(v))
#define LDD_u64(v) ((double)(v))
#define LDD_u8(v) ((double)(v))
#define LDF32D(v) ((double)(v))
#define LDF16D(v) ((double)cge_f16_to_f32(v))
#define LDBF16D(v) ((double)cge_bf16_to_f32(v))
#define LD_U64(v) ((uint64_t)(v))

RX_KERNELS(f32, float, double, LDF32D, A2D_F, (float), float, LD_SELF, LD_SELF, INFINITY)
RX_KERNELS(f64, double, double, LD_SELF, A2D_F, (double), double, LD_SELF, LD_SELF,
           INFINITY)
RX_KERNELS(f16, uint16_t, double, LDF16D, A2D_F, ST_F16, float, LD_F16, ST_F16, INFINITY)
RX_KERNELS(bf16, uint16_t, double, LDBF16D, A2D_F, ST_BF16, float, LD_BF16, ST_BF16,
           INFINITY)
RX_KERNELS(i32, int32_t, uint64_t, LD_SU, A2D_S, (int32_t), int32_t, LD_SELF, LD_SELF,
           INT32_MAX)
RX_KERNELS(i64, int64_t, uint64_t, LD_SU, A2D_S, (int64_t), int64_t, LD_SELF, LD_SELF,
           INT64_MAX)
RX_KERNELS(i8, int8_t, uint64_t, LD_SU, A2D_S, (int8_t), int8_t, LD_SELF, LD_SELF,
           INT8_MAX)
RX_KERNELS(u32, uint32_t, uint64_t, LD_U64, A2D_U, (uint32_t), uint32_t, LD_SELF,
           LD_SELF, UINT32_MAX)
RX_KERNELS(u64, uint64_t, uint64_t, LD_U64, A2D_U, (uint64_t), uint64_t, LD_SELF,
           LD_SELF, UINT64_MAX)
RX_KERNELS(u8, uint8_t, uint64_t, LD_U64, A2D_U, (uint8_t), uint8_t, LD_SELF, LD_SELF,
           UINT8_MAX)

static cge_kernel_fn rx_fn(cge_dtype t)
{
    switch (t) {
    case CGE_F32: return rx_fn_f32;
    case CGE_F64: return rx_fn_f64;
    case CGE_F16: return rx_fn_f16;
    case CGE_BF16: return rx_fn_bf16;
    case CGE_I32: return rx_fn_i32;
    case CGE_I64: return rx_fn_i64;
    case CGE_I8: return rx_fn_i8;
    case CGE_U32: return rx_fn_u32;
    case CGE_U64: return rx_fn_u64;
    case CGE_U8: return rx_fn_u8;
    default: return NULL;
    }
}

static cge_status rx_launch(const cge_kernel_ctx *ctx, cge_stream *stream, int op,
                            bool axes_input)
{
    return reduce_launch_with(ctx, stream, rx_fn(ctx->num_inputs > 0 ? ctx->inputs[0].dtype
                                                                     : CGE_DTYPE_UNDEFINED),
                              op, axes_input);
}

#define RX_LAUNCHERS(NAME, OP)                                                             \
    static cge_status NAME##_launch13(const cge_kernel_ctx *c, cge_stream *s)              \
    {                                                                                      \
        return rx_launch(c, s, OP, false);                                                 \
    }                                                                                      \
    static cge_status NAME##_launch18(const cge_kernel_ctx *c, cge_stream *s)              \
    {                                                                                      \
        return rx_launch(c, s, OP, true);                                                  \
    }

RX_LAUNCHERS(min, RX_MIN)
RX_LAUNCHERS(prod, RX_PROD)
RX_LAUNCHERS(l1, RX_L1)
RX_LAUNCHERS(l2, RX_L2)
RX_LAUNCHERS(logsum, RX_LOGSUM)
RX_LAUNCHERS(lse, RX_LSE)
RX_LAUNCHERS(sumsq, RX_SUMSQ)

/* ---- ArgMax / ArgMin ----------------------------------------------------------------- */

static cge_status arg_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *x = &ctx->inputs[0];
    int32_t rank = x->shape.rank, axis;
    int64_t a = cge_attrs_get_int(ctx->attrs, "axis", 0);
    if (!cge_axis_normalize(a, rank, false, &axis))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "axis %lld is out of range for rank %d",
                              (long long)a, (int)rank);
    if (x->shape.dims[axis] == 0)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "axis %d is empty: no element to pick",
                              (int)axis);
    bool keepdims = cge_attrs_get_int(ctx->attrs, "keepdims", 1) != 0;
    cge_shape out = {.rank = 0};
    for (int32_t d = 0; d < rank; d++) {
        if (d != axis)
            out.dims[out.rank++] = x->shape.dims[d];
        else if (keepdims)
            out.dims[out.rank++] = 1;
    }
    ctx->outputs[0].dtype = CGE_I64;
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

typedef struct arg_args {
    const void *x;
    int64_t *y;
    int64_t n, inner, out_numel;
    bool is_max, last;
} arg_args;

/* NaN counts as the extreme (numpy's argmax/argmin pick the first NaN). With
 * select_last_index, ties (and NaNs) move the pick to the later index. */
#define ARG_KERNEL(SUF, T, MT, LD)                                                         \
    static void arg_fn_##SUF(int64_t blk, int64_t nblk, void *args)                        \
    {                                                                                      \
        const arg_args *p = args;                                                          \
        const T *x = p->x;                                                                 \
        int64_t e0, e1, n = p->n, inner = p->inner;                                        \
        cge_block_range(p->out_numel, blk, nblk, &e0, &e1);                                \
        for (int64_t e = e0; e < e1;) {                                                    \
            int64_t i0 = e % inner, w = e1 - e < RX_CHUNK ? e1 - e : RX_CHUNK;             \
            if (inner - i0 < w)                                                            \
                w = inner - i0;                                                            \
            const T *xs = x + (e / inner) * n * inner + i0;                                \
            MT best[RX_CHUNK];                                                             \
            int64_t at[RX_CHUNK];                                                          \
            for (int64_t c = 0; c < w; c++) {                                              \
                best[c] = LD(xs[c]);                                                       \
                at[c] = 0;                                                                 \
            }                                                                              \
            for (int64_t r = 1; r < n; r++)                                                \
                for (int64_t c = 0; c < w; c++) {                                          \
                    MT v = LD(xs[r * inner + c]), b = best[c];                             \
                    bool take;                                                             \
                    if (v != v)                                                            \
                        take = p->last || b == b;                                          \
                    else if (b != b)                                                       \
                        take = false;                                                      \
                    else if (p->is_max)                                                    \
                        take = p->last ? v >= b : v > b;                                   \
                    else                                                                   \
                        take = p->last ? v <= b : v < b;                                   \
                    if (take) {                                                            \
                        best[c] = v;                                                       \
                        at[c] = r;                                                         \
                    }                                                                      \
                }                                                                          \
            for (int64_t c = 0; c < w; c++)                                                \
                p->y[e + c] = at[c];                                                       \
            e += w;                                                                        \
        }                                                                                  \
    }

ARG_KERNEL(f32, float, float, LD_SELF)
ARG_KERNEL(f64, double, double, LD_SELF)
ARG_KERNEL(f16, uint16_t, float, LD_F16)
ARG_KERNEL(bf16, uint16_t, float, LD_BF16)
ARG_KERNEL(i8, int8_t, int8_t, LD_SELF)
ARG_KERNEL(u8, uint8_t, uint8_t, LD_SELF)
ARG_KERNEL(i16, int16_t, int16_t, LD_SELF)
ARG_KERNEL(u16, uint16_t, uint16_t, LD_SELF)
ARG_KERNEL(i32, int32_t, int32_t, LD_SELF)
ARG_KERNEL(u32, uint32_t, uint32_t, LD_SELF)
ARG_KERNEL(i64, int64_t, int64_t, LD_SELF)
ARG_KERNEL(u64, uint64_t, uint64_t, LD_SELF)

static cge_kernel_fn arg_fn(cge_dtype t)
{
    switch (t) {
    case CGE_F32: return arg_fn_f32;
    case CGE_F64: return arg_fn_f64;
    case CGE_F16: return arg_fn_f16;
    case CGE_BF16: return arg_fn_bf16;
    case CGE_I8: return arg_fn_i8;
    case CGE_U8: return arg_fn_u8;
    case CGE_I16: return arg_fn_i16;
    case CGE_U16: return arg_fn_u16;
    case CGE_I32: return arg_fn_i32;
    case CGE_U32: return arg_fn_u32;
    case CGE_I64: return arg_fn_i64;
    case CGE_U64: return arg_fn_u64;
    default: return NULL;
    }
}

static cge_status arg_launch(const cge_kernel_ctx *ctx, cge_stream *stream, bool is_max)
{
    const cge_tensor *x = &ctx->inputs[0];
    cge_tensor *y = &ctx->outputs[0];
    int32_t rank = x->shape.rank, axis;
    cge_kernel_fn fn = arg_fn(x->dtype);
    if (!fn || y->dtype != CGE_I64)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "unsupported dtypes %s -> %s",
                                cge_dtype_name(x->dtype), cge_dtype_name(y->dtype));
    if (!cge_axis_normalize(cge_attrs_get_int(ctx->attrs, "axis", 0), rank, false, &axis) ||
        x->shape.dims[axis] < 1)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "bad or empty axis for input rank %d",
                                (int)rank);
    arg_args p = {.x = x->data, .y = y->data, .n = x->shape.dims[axis], .inner = 1,
                  .is_max = is_max,
                  .last = cge_attrs_get_int(ctx->attrs, "select_last_index", 0) != 0};
    for (int32_t d = axis + 1; d < rank; d++)
        p.inner *= x->shape.dims[d];
    p.out_numel = cge_shape_numel(&x->shape) / p.n;
    if (cge_shape_numel(&y->shape) != p.out_numel)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output has %lld elements, expected %lld",
                                (long long)cge_shape_numel(&y->shape), (long long)p.out_numel);
    if (p.out_numel == 0)
        return CGE_OK;
    if (!x->data || !y->data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    int64_t min_out = p.n >= 16384 ? 1 : 16384 / p.n;
    return cge_launch(stream, fn, cge_blocks_for(p.out_numel, min_out, ctx->num_threads), &p,
                      sizeof p);
}

static cge_status argmax_launch(const cge_kernel_ctx *c, cge_stream *s)
{
    return arg_launch(c, s, true);
}
static cge_status argmin_launch(const cge_kernel_ctx *c, cge_stream *s)
{
    return arg_launch(c, s, false);
}

/* ---- definitions --------------------------------------------------------------------- */

static const cge_arg_def rx_in13[] = {{"data", 0, RX_DTYPES, "input tensor"}};
static const cge_arg_def rx_in18[] = {
    {"data", 0, RX_DTYPES, "input tensor"},
    {"axes", CGE_ARG_OPTIONAL, CGE_DT(CGE_I64), "1-D axes to reduce; empty or absent: all"},
};
static const cge_arg_def rx_out[] = {{"reduced", 0, RX_DTYPES, "reduced tensor"}};
static const cge_arg_def min_in13[] = {{"data", 0, RX_MIN_DTYPES, "input tensor"}};
static const cge_arg_def min_in18[] = {
    {"data", 0, RX_MIN_DTYPES, "input tensor"},
    {"axes", CGE_ARG_OPTIONAL, CGE_DT(CGE_I64), "1-D axes to reduce; empty or absent: all"},
};
static const cge_arg_def min_out[] = {{"reduced", 0, RX_MIN_DTYPES, "reduced tensor"}};

static const cge_attr_def rx_attrs13[] = {
    {"axes", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "axes to reduce; absent: all"},
    {"keepdims", CGE_ATTR_INT, false, 1, 0.0f, NULL, "keep reduced dims as 1"},
};
static const cge_attr_def rx_attrs18[] = {
    {"keepdims", CGE_ATTR_INT, false, 1, 0.0f, NULL, "keep reduced dims as 1"},
    {"noop_with_empty_axes", CGE_ATTR_INT, false, 0, 0.0f, NULL,
     "empty axes: identity instead of reducing all"},
};

static const cge_arg_def arg_in[] = {{"data", 0, ARG_DTYPES, "input tensor"}};
static const cge_arg_def arg_out[] = {{"reduced", 0, CGE_DT(CGE_I64), "indices (int64)"}};
static const cge_attr_def arg_attrs[] = {
    {"axis", CGE_ATTR_INT, false, 0, 0.0f, NULL, "axis to search"},
    {"keepdims", CGE_ATTR_INT, false, 1, 0.0f, NULL, "keep the axis as 1"},
    {"select_last_index", CGE_ATTR_INT, false, 0, 0.0f, NULL,
     "ties: the last index instead of the first"},
};

#define KDEF(DT, FN) {{.engine = "cpu", .dtypes = DT, .launch = FN, .inplace_input = -1}}
static const cge_kernel_def k_min13[] = KDEF(RX_MIN_DTYPES, min_launch13);
static const cge_kernel_def k_min18[] = KDEF(RX_MIN_DTYPES, min_launch18);
static const cge_kernel_def k_prod13[] = KDEF(RX_DTYPES, prod_launch13);
static const cge_kernel_def k_prod18[] = KDEF(RX_DTYPES, prod_launch18);
static const cge_kernel_def k_l113[] = KDEF(RX_DTYPES, l1_launch13);
static const cge_kernel_def k_l118[] = KDEF(RX_DTYPES, l1_launch18);
static const cge_kernel_def k_l213[] = KDEF(RX_DTYPES, l2_launch13);
static const cge_kernel_def k_l218[] = KDEF(RX_DTYPES, l2_launch18);
static const cge_kernel_def k_logsum13[] = KDEF(RX_DTYPES, logsum_launch13);
static const cge_kernel_def k_logsum18[] = KDEF(RX_DTYPES, logsum_launch18);
static const cge_kernel_def k_lse13[] = KDEF(RX_DTYPES, lse_launch13);
static const cge_kernel_def k_lse18[] = KDEF(RX_DTYPES, lse_launch18);
static const cge_kernel_def k_sumsq13[] = KDEF(RX_DTYPES, sumsq_launch13);
static const cge_kernel_def k_sumsq18[] = KDEF(RX_DTYPES, sumsq_launch18);
static const cge_kernel_def k_argmax[] = KDEF(ARG_DTYPES, argmax_launch);
static const cge_kernel_def k_argmin[] = KDEF(ARG_DTYPES, argmin_launch);

#define OPDEF(NAME, SINCE, END, IN, NIN, OUT, ATTRS, NATTRS, INFER, K, DOC)                \
    {                                                                                      \
        .name = NAME, .domain = CGE_DOMAIN_DEFAULT, .since_version = SINCE,                \
        .end_version = END, .inputs = IN, .num_inputs = NIN, .outputs = OUT,               \
        .num_outputs = 1, .attrs = ATTRS, .num_attrs = NATTRS, .infer = INFER,             \
        .kernels = K, .num_kernels = 1, .doc = DOC                                         \
    }
#define RX_PAIR(NAME, IN13, IN18, OUT, K13, K18, DOC)                                      \
    OPDEF(NAME, 13, 17, IN13, 1, OUT, rx_attrs13, 2, rx_infer_attr, K13,                    \
          DOC " (axes attribute)."),                                                       \
    OPDEF(NAME, 18, 0, IN18, 2, OUT, rx_attrs18, 2, rx_infer_input, K18, DOC " (axes input).")

/* Empty reductions give ONNX 18's identities: +inf or the type's maximum
 * (min), 1 (prod), 0 (L1, L2, sum of squares), -inf (log-sum, log-sum-exp).
 * Integer results of L2 and the logarithms are computed in double and
 * truncated; integer sums and products wrap to the output width. */
static const cge_op_def reduce_ext_ops[] = {
    RX_PAIR("ReduceMin", min_in13, min_in18, min_out, k_min13, k_min18, "Minimum over axes"),
    RX_PAIR("ReduceProd", rx_in13, rx_in18, rx_out, k_prod13, k_prod18, "Product over axes"),
    RX_PAIR("ReduceL1", rx_in13, rx_in18, rx_out, k_l113, k_l118, "Sum of |x| over axes"),
    RX_PAIR("ReduceL2", rx_in13, rx_in18, rx_out, k_l213, k_l218, "sqrt(sum of x^2) over axes"),
    RX_PAIR("ReduceLogSum", rx_in13, rx_in18, rx_out, k_logsum13, k_logsum18,
            "log(sum of x) over axes"),
    RX_PAIR("ReduceLogSumExp", rx_in13, rx_in18, rx_out, k_lse13, k_lse18,
            "log(sum of exp(x)) over axes, computed stably"),
    RX_PAIR("ReduceSumSquare", rx_in13, rx_in18, rx_out, k_sumsq13, k_sumsq18,
            "Sum of x^2 over axes"),
    OPDEF("ArgMax", 13, 0, arg_in, 1, arg_out, arg_attrs, 3, arg_infer, k_argmax,
          "Index of the maximum along axis (first, or last with select_last_index)."),
    OPDEF("ArgMin", 13, 0, arg_in, 1, arg_out, arg_attrs, 3, arg_infer, k_argmin,
          "Index of the minimum along axis (first, or last with select_last_index)."),
};

const cge_op_def *cge_ops_reduce_ext(int32_t *count)
{
    *count = (int32_t)(sizeof reduce_ext_ops / sizeof reduce_ext_ops[0]);
    return reduce_ext_ops;
}
