/* ReduceSum, ReduceMean, ReduceMax. The reduced axes are merged into a view
 * [outer, reduce, inner] when they are contiguous (last-axis rows vectorise,
 * middle axes reduce whole inner rows at once); other patterns walk strides. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/builtin.h"
#include "ops/kernel_util.h"
#include "ops/reduce_util.h"

#define RED_DTYPES                                                                         \
    (CGE_DT(CGE_F32) | CGE_DT(CGE_F64) | CGE_DT(CGE_F16) | CGE_DT(CGE_BF16) |              \
     CGE_DT(CGE_I32) | CGE_DT(CGE_I64) | CGE_DT(CGE_U32) | CGE_DT(CGE_U64))
#define RED_MAX_DTYPES (RED_DTYPES | CGE_DT(CGE_I8) | CGE_DT(CGE_U8))
#define RED_CHUNK 64
#define RED_LANES 16

enum { RED_SUM, RED_MEAN, RED_MAX };

/* ---- meta -------------------------------------------------------------------- */

/* axes_mask and reduce_infer live in reduce_util.h, shared with reduce_ext.c. */

static cge_status reduce_infer_attr(cge_infer_ctx *ctx)
{
    return reduce_infer(ctx, false);
}

static cge_status reduce_infer_input(cge_infer_ctx *ctx)
{
    return reduce_infer(ctx, true);
}

/* ---- plan: which loops a given mask needs (red_plan_make, reduce_util.h) ---- */

/* ---- typed loops --------------------------------------------------------------- */

#define LD_SELF(v) (v)
#define LD_F16(v) cge_f16_to_f32(v)
#define LD_BF16(v) cge_bf16_to_f32(v)
#define ST_F16(v) cge_f32_to_f16(v)
#define ST_BF16(v) cge_f32_to_bf16(v)
/* NaN wins a float max, as in numpy. */
#define MAX_FLOAT(a, b) (((b) > (a) || (b) != (b)) ? (b) : (a))
#define MAX_INT(a, b) ((b) > (a) ? (b) : (a))
#define MEAN_FLOAT(SA, s, n) ((s) / (SA)(n))
#define MEAN_SIGNED(SA, s, n) ((n) ? (SA)((int64_t)(s) / (int64_t)(n)) : (SA)0)
#define MEAN_UNSIGNED(SA, s, n) ((n) ? (SA)((s) / (uint64_t)(n)) : (SA)0)

/* T: element; SA/LDS/STS: sum accumulator, load, store; MA/LDM/STM: the same
 * for max, MAXINIT its identity (-inf or the type's minimum); MEAN: divide. */
#define RED_KERNELS(SUF, T, SA, LDS, STS, MA, LDM, STM, MAXINIT, MAXOP, MEAN)              \
    static SA sum_row_##SUF(const T *x, int64_t n)                                         \
    {                                                                                      \
        SA lanes[RED_LANES];                                                               \
        for (int l = 0; l < RED_LANES; l++)                                                \
            lanes[l] = 0;                                                                  \
        int64_t j = 0;                                                                     \
        for (; j + RED_LANES <= n; j += RED_LANES)                                         \
            for (int l = 0; l < RED_LANES; l++)                                            \
                lanes[l] += LDS(x[j + l]);                                                 \
        SA s = 0;                                                                          \
        for (int l = 0; l < RED_LANES; l++)                                                \
            s += lanes[l];                                                                 \
        for (; j < n; j++)                                                                 \
            s += LDS(x[j]);                                                                \
        return s;                                                                          \
    }                                                                                      \
    static MA max_row_##SUF(const T *x, int64_t n)                                         \
    {                                                                                      \
        MA lanes[RED_LANES];                                                               \
        for (int l = 0; l < RED_LANES; l++)                                                \
            lanes[l] = MAXINIT;                                                            \
        int64_t j = 0;                                                                     \
        for (; j + RED_LANES <= n; j += RED_LANES)                                         \
            for (int l = 0; l < RED_LANES; l++) {                                          \
                MA v = LDM(x[j + l]);                                                      \
                lanes[l] = MAXOP(lanes[l], v);                                             \
            }                                                                              \
        MA m = MAXINIT;                                                                    \
        for (int l = 0; l < RED_LANES; l++)                                                \
            m = MAXOP(m, lanes[l]);                                                        \
        for (; j < n; j++) {                                                               \
            MA v = LDM(x[j]);                                                              \
            m = MAXOP(m, v);                                                               \
        }                                                                                  \
        return m;                                                                          \
    }                                                                                      \
    static void red_fn_##SUF(int64_t blk, int64_t nblk, void *args)                        \
    {                                                                                      \
        const red_args *p = args;                                                          \
        const T *x = p->x;                                                                 \
        T *y = p->y;                                                                       \
        red_plan pl;                                                                       \
        int64_t e0, e1;                                                                    \
        cge_block_range(p->out_numel, blk, nblk, &e0, &e1);                                \
        if (!red_args_plan(p, &pl)) {                                                          \
            memset(y + e0, 0, (size_t)(e1 - e0) * sizeof(T)); /* meta rejects this */      \
            return;                                                                        \
        }                                                                                  \
        int64_t n = pl.count;                                                              \
        if (pl.kind == PLAN_COPY) {                                                        \
            memcpy(y + e0, x + e0, (size_t)(e1 - e0) * sizeof(T));                         \
        } else if (pl.kind == PLAN_ROWS) {                                                 \
            for (int64_t e = e0; e < e1; e++) {                                            \
                if (p->op == RED_MAX)                                                      \
                    y[e] = STM(max_row_##SUF(x + e * n, n));                               \
                else {                                                                     \
                    SA s = sum_row_##SUF(x + e * n, n);                                    \
                    y[e] = STS(p->op == RED_MEAN ? MEAN(SA, s, n) : s);                    \
                }                                                                          \
            }                                                                              \
        } else if (pl.kind == PLAN_MID) {                                                  \
            int64_t inner = pl.inner;                                                      \
            for (int64_t e = e0; e < e1;) {                                                \
                int64_t o = e / inner, i0 = e % inner;                                     \
                int64_t w = inner - i0 < e1 - e ? inner - i0 : e1 - e;                     \
                if (w > RED_CHUNK)                                                         \
                    w = RED_CHUNK;                                                         \
                const T *xs = x + o * n * inner + i0;                                      \
                if (p->op == RED_MAX) {                                                    \
                    MA acc[RED_CHUNK];                                                     \
                    for (int64_t c = 0; c < w; c++)                                        \
                        acc[c] = MAXINIT;                                                  \
                    for (int64_t r = 0; r < n; r++)                                        \
                        for (int64_t c = 0; c < w; c++) {                                  \
                            MA v = LDM(xs[r * inner + c]);                                 \
                            acc[c] = MAXOP(acc[c], v);                                     \
                        }                                                                  \
                    for (int64_t c = 0; c < w; c++)                                        \
                        y[e + c] = STM(acc[c]);                                            \
                } else {                                                                   \
                    SA acc[RED_CHUNK];                                                     \
                    for (int64_t c = 0; c < w; c++)                                        \
                        acc[c] = 0;                                                        \
                    for (int64_t r = 0; r < n; r++)                                        \
                        for (int64_t c = 0; c < w; c++)                                    \
                            acc[c] += LDS(xs[r * inner + c]);                              \
                    for (int64_t c = 0; c < w; c++)                                        \
                        y[e + c] = STS(p->op == RED_MEAN ? MEAN(SA, acc[c], n) : acc[c]);  \
                }                                                                          \
                e += w;                                                                    \
            }                                                                              \
        } else {                                                                           \
            int64_t last = pl.rdims[pl.nr - 1], lstr = pl.rstr[pl.nr - 1];                 \
            for (int64_t e = e0; e < e1; e++) {                                            \
                int64_t base = 0, t = e;                                                   \
                for (int32_t d = pl.nk - 1; d >= 0; d--) {                                 \
                    base += (t % pl.kdims[d]) * pl.kstr[d];                                \
                    t /= pl.kdims[d];                                                      \
                }                                                                          \
                SA s = 0;                                                                  \
                MA m = MAXINIT;                                                            \
                int64_t idx[CGE_MAX_RANK] = {0};                                           \
                for (;;) {                                                                 \
                    int64_t off = base;                                                    \
                    for (int32_t d = 0; d + 1 < pl.nr; d++)                                \
                        off += idx[d] * pl.rstr[d];                                        \
                    if (n > 0) {                                                           \
                        if (p->op == RED_MAX)                                              \
                            for (int64_t j = 0; j < last; j++) {                           \
                                MA v = LDM(x[off + j * lstr]);                             \
                                m = MAXOP(m, v);                                           \
                            }                                                              \
                        else                                                               \
                            for (int64_t j = 0; j < last; j++)                             \
                                s += LDS(x[off + j * lstr]);                               \
                    }                                                                      \
                    int32_t d = pl.nr - 2;                                                 \
                    for (; d >= 0; d--) {                                                  \
                        if (++idx[d] < pl.rdims[d])                                        \
                            break;                                                         \
                        idx[d] = 0;                                                        \
                    }                                                                      \
                    if (d < 0)                                                             \
                        break;                                                             \
                }                                                                          \
                if (p->op == RED_MAX)                                                      \
                    y[e] = STM(m);                                                         \
                else                                                                       \
                    y[e] = STS(p->op == RED_MEAN ? MEAN(SA, s, n) : s);                    \
            }                                                                              \
        }                                                                                  \
    }

RED_KERNELS(f32, float, float, LD_SELF, (float), float, LD_SELF, (float), -INFINITY, MAX_FLOAT,
            MEAN_FLOAT)
RED_KERNELS(f64, double, double, LD_SELF, (double), double, LD_SELF, (double), -INFINITY,
            MAX_FLOAT, MEAN_FLOAT)
RED_KERNELS(f16, uint16_t, float, LD_F16, ST_F16, float, LD_F16, ST_F16, -INFINITY, MAX_FLOAT,
            MEAN_FLOAT)
RED_KERNELS(bf16, uint16_t, float, LD_BF16, ST_BF16, float, LD_BF16, ST_BF16, -INFINITY,
            MAX_FLOAT, MEAN_FLOAT)
/* Integer sums wrap to the output width, as the output type holds no more. */
RED_KERNELS(i32, int32_t, int64_t, (int64_t), (int32_t), int32_t, LD_SELF, (int32_t), INT32_MIN,
            MAX_INT, MEAN_SIGNED)
RED_KERNELS(i64, int64_t, uint64_t, (uint64_t), (int64_t), int64_t, LD_SELF, (int64_t),
            INT64_MIN, MAX_INT, MEAN_SIGNED)
RED_KERNELS(u32, uint32_t, uint64_t, (uint64_t), (uint32_t), uint32_t, LD_SELF, (uint32_t), 0,
            MAX_INT, MEAN_UNSIGNED)
RED_KERNELS(u64, uint64_t, uint64_t, LD_SELF, (uint64_t), uint64_t, LD_SELF, (uint64_t), 0,
            MAX_INT, MEAN_UNSIGNED)
RED_KERNELS(i8, int8_t, int64_t, (int64_t), (int8_t), int8_t, LD_SELF, (int8_t), INT8_MIN,
            MAX_INT, MEAN_SIGNED)
RED_KERNELS(u8, uint8_t, uint64_t, (uint64_t), (uint8_t), uint8_t, LD_SELF, (uint8_t), 0,
            MAX_INT, MEAN_UNSIGNED)

static cge_kernel_fn red_fn(cge_dtype t)
{
    switch (t) {
    case CGE_F32: return red_fn_f32;
    case CGE_F64: return red_fn_f64;
    case CGE_F16: return red_fn_f16;
    case CGE_BF16: return red_fn_bf16;
    case CGE_I32: return red_fn_i32;
    case CGE_I64: return red_fn_i64;
    case CGE_U32: return red_fn_u32;
    case CGE_U64: return red_fn_u64;
    case CGE_I8: return red_fn_i8;
    case CGE_U8: return red_fn_u8;
    default: return NULL;
    }
}

/* ---- launch ---------------------------------------------------------------------- */

static cge_status reduce_launch(const cge_kernel_ctx *ctx, cge_stream *stream, int op,
                                bool axes_input)
{
    return reduce_launch_with(ctx, stream, red_fn(ctx->num_inputs > 0 ? ctx->inputs[0].dtype
                                                                      : CGE_DTYPE_UNDEFINED),
                              op, axes_input);
}

static cge_status sum_launch(const cge_kernel_ctx *c, cge_stream *s)
{
    return reduce_launch(c, s, RED_SUM, true);
}
static cge_status mean_launch_attr(const cge_kernel_ctx *c, cge_stream *s)
{
    return reduce_launch(c, s, RED_MEAN, false);
}
static cge_status max_launch_attr(const cge_kernel_ctx *c, cge_stream *s)
{
    return reduce_launch(c, s, RED_MAX, false);
}
static cge_status mean_launch_input(const cge_kernel_ctx *c, cge_stream *s)
{
    return reduce_launch(c, s, RED_MEAN, true);
}
static cge_status max_launch_input(const cge_kernel_ctx *c, cge_stream *s)
{
    return reduce_launch(c, s, RED_MAX, true);
}

/* ---- definitions --------------------------------------------------------------- */

static const cge_arg_def red_in_attr[] = {{"data", 0, RED_DTYPES, "input tensor"}};
static const cge_arg_def red_in_input[] = {
    {"data", 0, RED_DTYPES, "input tensor"},
    {"axes", CGE_ARG_OPTIONAL, CGE_DT(CGE_I64), "1-D axes to reduce; empty or absent: all"},
};
static const cge_arg_def red_out[] = {{"reduced", 0, RED_DTYPES, "reduced tensor"}};
static const cge_arg_def max_in_attr[] = {{"data", 0, RED_MAX_DTYPES, "input tensor"}};
static const cge_arg_def max_in_input[] = {
    {"data", 0, RED_MAX_DTYPES, "input tensor"},
    {"axes", CGE_ARG_OPTIONAL, CGE_DT(CGE_I64), "1-D axes to reduce; empty or absent: all"},
};
static const cge_arg_def max_out[] = {{"reduced", 0, RED_MAX_DTYPES, "reduced tensor"}};

static const cge_attr_def attrs_attr[] = {
    {"axes", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "axes to reduce; absent: all"},
    {"keepdims", CGE_ATTR_INT, false, 1, 0.0f, NULL, "keep reduced dims as 1"},
};
static const cge_attr_def attrs_input[] = {
    {"keepdims", CGE_ATTR_INT, false, 1, 0.0f, NULL, "keep reduced dims as 1"},
    {"noop_with_empty_axes", CGE_ATTR_INT, false, 0, 0.0f, NULL,
     "empty axes: identity instead of reducing all"},
};

#define KDEF(DT, FN) {{.engine = "cpu", .dtypes = DT, .launch = FN, .inplace_input = -1}}
static const cge_kernel_def k_sum[] = KDEF(RED_DTYPES, sum_launch);
static const cge_kernel_def k_mean13[] = KDEF(RED_DTYPES, mean_launch_attr);
static const cge_kernel_def k_max13[] = KDEF(RED_MAX_DTYPES, max_launch_attr);
static const cge_kernel_def k_mean18[] = KDEF(RED_DTYPES, mean_launch_input);
static const cge_kernel_def k_max18[] = KDEF(RED_MAX_DTYPES, max_launch_input);

#define RED_DEF(NAME, SINCE, END, IN, NIN, OUT, ATTRS, INFER, K, DOC)                      \
    {                                                                                      \
        .name = NAME, .domain = CGE_DOMAIN_DEFAULT, .since_version = SINCE,                \
        .end_version = END, .inputs = IN, .num_inputs = NIN, .outputs = OUT,               \
        .num_outputs = 1, .attrs = ATTRS, .num_attrs = 2, .infer = INFER, .kernels = K,    \
        .num_kernels = 1, .doc = DOC                                                       \
    }

/* Empty reductions give 0 (sum), NaN for floats and 0 for integers (mean),
 * -inf for floats and the type's minimum for integers (max), as ONNX 18
 * specifies. Integer means divide with truncation. Opset 18 moved ReduceMean
 * and ReduceMax's axes to an input; both forms are here. */
static const cge_op_def reduce_ops[] = {
    RED_DEF("ReduceSum", 13, 0, red_in_input, 2, red_out, attrs_input, reduce_infer_input,
            k_sum, "Sum over axes (from input 'axes')."),
    RED_DEF("ReduceMean", 13, 17, red_in_attr, 1, red_out, attrs_attr, reduce_infer_attr,
            k_mean13, "Mean over axes (attribute)."),
    RED_DEF("ReduceMax", 13, 17, max_in_attr, 1, max_out, attrs_attr, reduce_infer_attr,
            k_max13, "Maximum over axes (attribute)."),
    RED_DEF("ReduceMean", 18, 0, red_in_input, 2, red_out, attrs_input, reduce_infer_input,
            k_mean18, "Mean over axes (from input 'axes')."),
    RED_DEF("ReduceMax", 18, 0, max_in_input, 2, max_out, attrs_input, reduce_infer_input,
            k_max18, "Maximum over axes (from input 'axes')."),
};

const cge_op_def *cge_ops_reduce(int32_t *count)
{
    *count = (int32_t)(sizeof reduce_ops / sizeof reduce_ops[0]);
    return reduce_ops;
}
