/* The reduction family: ReduceSum Mean Max Min Prod L1 L2 LogSum LogSumExp SumSquare (axes
 * attribute before opset 18, axes input from it) and ArgMax/ArgMin. One driver (axes, keepdims,
 * shapes, the block loop) runs a typed kernel per op kind and dtype over [outer, reduce, inner]. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/builtin.h"
#include "ops/kernel_util.h"

#define RED_DTYPES                                                                         \
    (CGE_DT(CGE_F32) | CGE_DT(CGE_F64) | CGE_DT(CGE_F16) | CGE_DT(CGE_BF16) |              \
     CGE_DT(CGE_I32) | CGE_DT(CGE_I64) | CGE_DT(CGE_U32) | CGE_DT(CGE_U64))
/* ReduceMax and ReduceMin also take 8-bit integers; ArgMax/ArgMin 16-bit ones too. */
#define RED_MINMAX_DTYPES (RED_DTYPES | CGE_DT(CGE_I8) | CGE_DT(CGE_U8))
#define ARG_DTYPES (RED_MINMAX_DTYPES | CGE_DT(CGE_I16) | CGE_DT(CGE_U16))
#define RED_CHUNK 64
#define RED_LANES 16
#define WALK_LANES 8

/* Sum, Mean and Max have their own fast kernels (FAST_KERNELS); the others
 * share one walker (WALK_KERNELS). */
typedef enum red_op {
    RED_SUM, RED_MEAN, RED_MAX,
    RED_MIN, RED_PROD, RED_L1, RED_L2, RED_LOGSUM, RED_LSE, RED_SUMSQ
} red_op;

/* ---- meta ---------------------------------------------------------------------- */

/* Reduced axes as a mask; *known = false when they come from an input whose
 * value is not available. */
typedef struct axes_info {
    bool known;
    bool noop;          /* empty axes with noop_with_empty_axes: identity */
    bool reduce[CGE_MAX_RANK];
} axes_info;

/* Validate `n` axes for a rank-`rank` input into a mask; an error message
 * goes to `err`. Empty axes reduce every dimension unless `noop_empty`. */
static cge_status axes_mask(const int64_t *axes, int64_t n, int32_t rank, bool noop_empty,
                            axes_info *ai, char *err, size_t errlen)
{
    memset(ai, 0, sizeof *ai);
    ai->known = true;
    if (n == 0) {
        ai->noop = noop_empty;
        for (int32_t d = 0; d < rank; d++)
            ai->reduce[d] = !noop_empty;
        return CGE_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        int32_t a;
        if (!cge_axis_normalize(axes[i], rank, false, &a)) {
            snprintf(err, errlen, "axis %lld is out of range for rank %d", (long long)axes[i],
                     (int)rank);
            return CGE_ERR_SHAPE;
        }
        if (ai->reduce[a]) {
            snprintf(err, errlen, "axis %lld appears more than once in axes", (long long)axes[i]);
            return CGE_ERR_SHAPE;
        }
        ai->reduce[a] = true;
    }
    return CGE_OK;
}

static cge_status reduce_infer(cge_infer_ctx *ctx, bool axes_input)
{
    if (ctx->num_inputs < 1 || ctx->num_outputs < 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "needs input data and output reduced");
    const cge_tensor_desc *x = &ctx->inputs[0];
    int32_t rank = x->shape.rank;
    bool keepdims = cge_attrs_get_int(ctx->attrs, "keepdims", 1) != 0;
    bool noop = axes_input && cge_attrs_get_int(ctx->attrs, "noop_with_empty_axes", 0) != 0;
    axes_info ai;
    char err[160];
    cge_status st = CGE_OK;
    if (!axes_input) {
        const int64_t *v = NULL;
        int64_t n = cge_attrs_get_ints(ctx->attrs, "axes", &v);
        st = axes_mask(v, n < 0 ? 0 : n, rank, false, &ai, err, sizeof err);
    } else if (ctx->num_inputs > 1 && ctx->inputs[1].dtype != CGE_DTYPE_UNDEFINED) {
        const cge_tensor_desc *ax = &ctx->inputs[1];
        if (ax->shape.rank != 1)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "axes must be 1-D, got rank %d",
                                  (int)ax->shape.rank);
        const void *val = ctx->input_values ? ctx->input_values[1] : NULL;
        if (ax->shape.dims[0] == 0) {
            st = axes_mask(NULL, 0, rank, noop, &ai, err, sizeof err);
        } else if (val && ax->shape.dims[0] > 0) {
            st = axes_mask(val, ax->shape.dims[0], rank, noop, &ai, err, sizeof err);
        } else {
            memset(&ai, 0, sizeof ai);
            if (!keepdims) {
                /* k distinct axes go: the rank is known, which dims stay is
                 * not (the run infers again with the values). */
                int64_t k = ax->shape.dims[0];
                if (k < 0)
                    return cge_meta_error(ctx, CGE_ERR_UNSUPPORTED,
                                          "with keepdims=0 the number of axes must be known (the "
                                          "output rank depends on it)");
                if (k > rank)
                    return cge_meta_error(ctx, CGE_ERR_SHAPE, "%lld axes for a rank-%d input",
                                          (long long)k, (int)rank);
                ctx->outputs[0].dtype = x->dtype;
                ctx->outputs[0].shape = (cge_shape){.rank = rank - (int32_t)k};
                for (int32_t d = 0; d < rank - (int32_t)k; d++)
                    ctx->outputs[0].shape.dims[d] = CGE_DIM_DYNAMIC;
                return CGE_OK;
            }
        }
    } else {
        st = axes_mask(NULL, 0, rank, noop, &ai, err, sizeof err);
    }
    if (st != CGE_OK)
        return cge_meta_error(ctx, st, "%s", err);
    cge_shape out = {.rank = 0};
    for (int32_t d = 0; d < rank; d++) {
        int64_t dim = x->shape.dims[d];
        if (!ai.known) /* unknown axes, keepdims: each dim stays or becomes 1 */
            out.dims[out.rank++] = dim == 1 ? 1 : CGE_DIM_DYNAMIC;
        else if (!ai.reduce[d])
            out.dims[out.rank++] = dim;
        else if (keepdims)
            out.dims[out.rank++] = 1;
    }
    ctx->outputs[0].dtype = x->dtype;
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

static cge_status reduce_infer_attr(cge_infer_ctx *ctx)
{
    return reduce_infer(ctx, false);
}

static cge_status reduce_infer_input(cge_infer_ctx *ctx)
{
    return reduce_infer(ctx, true);
}

/* ---- plans ------------------------------------------------------------------------ */

/* Which loops a given mask needs. */
enum { PLAN_COPY, PLAN_ROWS, PLAN_MID, PLAN_STRIDED };

typedef struct red_plan {
    int kind;
    int64_t outer, count, inner;       /* ROWS/MID view; count = elements reduced */
    int32_t nk, nr;                    /* STRIDED: kept and reduced groups */
    int64_t kdims[CGE_MAX_RANK], kstr[CGE_MAX_RANK], rdims[CGE_MAX_RANK], rstr[CGE_MAX_RANK];
} red_plan;

/* Merge the input into groups of kept and reduced dims for `mask` and pick
 * the loops they need. */
static void red_plan_make(const cge_shape *in, const bool *mask, red_plan *pl)
{
    memset(pl, 0, sizeof *pl);
    int64_t strides[CGE_MAX_RANK];
    cge_shape_strides(in, strides);
    /* Size-1 dims never matter; consecutive dims of one kind merge. */
    int32_t ng = 0;
    int64_t gsize[CGE_MAX_RANK], gstr[CGE_MAX_RANK];
    bool gred[CGE_MAX_RANK];
    for (int32_t d = 0; d < in->rank; d++) {
        int64_t n = in->dims[d];
        if (n == 1)
            continue;
        if (ng > 0 && gred[ng - 1] == mask[d]) {
            gsize[ng - 1] *= n;
            gstr[ng - 1] = strides[d];
        } else {
            gsize[ng] = n;
            gstr[ng] = strides[d];
            gred[ng] = mask[d];
            ng++;
        }
    }
    pl->count = 1;
    for (int32_t g = 0; g < ng; g++) {
        if (gred[g]) {
            pl->rdims[pl->nr] = gsize[g];
            pl->rstr[pl->nr++] = gstr[g];
            pl->count *= gsize[g];
        } else {
            pl->kdims[pl->nk] = gsize[g];
            pl->kstr[pl->nk++] = gstr[g];
        }
    }
    pl->outer = pl->inner = 1;
    if (pl->nr == 0) {
        pl->kind = PLAN_COPY;
    } else if (pl->nr == 1 && ng <= 3 && (ng < 3 || !gred[0])) {
        int32_t r = 0;
        while (!gred[r])
            r++;
        if (r > 0)
            pl->outer = gsize[0];
        if (r + 1 < ng)
            pl->inner = gsize[r + 1];
        pl->kind = pl->inner == 1 ? PLAN_ROWS : PLAN_MID;
    } else {
        pl->kind = PLAN_STRIDED;
    }
}

struct red_args;
/* A typed kernel: outputs [e0, e1) of a launch, by the plan `pl`. */
typedef void (*red_range_fn)(const struct red_args *p, const red_plan *pl, int64_t e0,
                             int64_t e1);

/* What every reduction kernel gets. */
typedef struct red_args {
    cge_dtype dtype;
    red_op op;
    red_range_fn range;
    const void *x;
    void *y;
    cge_shape in;
    int64_t out_numel;
    /* Either a mask decided at launch, or axes read when the kernel runs
     * (keepdims=0 with an axes input: its value is only safe to read then). */
    bool have_mask;
    bool reduce[CGE_MAX_RANK];
    const int64_t *axes;
    int64_t num_axes;
    bool noop_empty;    /* noop_with_empty_axes */
    bool identity;      /* noop_with_empty_axes and no axes: output = input */
} red_args;

/* The loop plan of a launch: from its mask, or from axes read now (on the
 * stream). False if those axes are invalid. */
static bool red_args_plan(const red_args *p, red_plan *pl)
{
    bool mask[CGE_MAX_RANK];
    if (p->have_mask) {
        memcpy(mask, p->reduce, sizeof mask);
    } else {
        axes_info ai;
        char err[160];
        if (axes_mask(p->axes, p->num_axes, p->in.rank, p->noop_empty, &ai, err, sizeof err) !=
            CGE_OK)
            return false;
        memcpy(mask, ai.reduce, sizeof mask);
    }
    red_plan_make(&p->in, mask, pl);
    return true;
}

/* STRIDED plans: the offset of output e's first element, of the run at
 * reduced index idx (all groups but the last), and the next idx (false after
 * the last). */
static inline int64_t strided_base(const red_plan *pl, int64_t e)
{
    int64_t base = 0;
    for (int32_t d = pl->nk - 1; d >= 0; d--) {
        base += (e % pl->kdims[d]) * pl->kstr[d];
        e /= pl->kdims[d];
    }
    return base;
}

static inline int64_t strided_off(const red_plan *pl, int64_t base, const int64_t *idx)
{
    for (int32_t d = 0; d + 1 < pl->nr; d++)
        base += idx[d] * pl->rstr[d];
    return base;
}

static inline bool strided_next(const red_plan *pl, int64_t *idx)
{
    for (int32_t d = pl->nr - 2; d >= 0; d--) {
        if (++idx[d] < pl->rdims[d])
            return true;
        idx[d] = 0;
    }
    return false;
}

/* ---- typed kernels ---------------------------------------------------------------- */

#define LD_SELF(v) (v)
#define LD_F16(v) cge_f16_to_f32(v)
#define LD_BF16(v) cge_bf16_to_f32(v)
#define ST_F16(v) cge_f32_to_f16((float)(v))
#define ST_BF16(v) cge_f32_to_bf16((float)(v))

/* Sum, Mean, Max: sums in RED_LANES lanes of the element's float type
 * (float32 for the half types), so that last-axis rows vectorise; middle axes
 * reduce whole inner rows at once; other patterns walk strides. NaN wins a
 * float max, as in numpy. */
#define MAX_FLOAT(a, b) (((b) > (a) || (b) != (b)) ? (b) : (a))
#define MAX_INT(a, b) ((b) > (a) ? (b) : (a))
#define MEAN_FLOAT(SA, s, n) ((s) / (SA)(n))
#define MEAN_SIGNED(SA, s, n) ((n) ? (SA)((int64_t)(s) / (int64_t)(n)) : (SA)0)
#define MEAN_UNSIGNED(SA, s, n) ((n) ? (SA)((s) / (uint64_t)(n)) : (SA)0)

/* T: element; SA/LDS/STS: sum accumulator, load, store; MA/LDM/STM: the same
 * for max, MAXINIT its identity (-inf or the type's minimum); MEAN: divide. */
#define FAST_KERNELS(SUF, T, SA, LDS, STS, MA, LDM, STM, MAXINIT, MAXOP, MEAN)             \
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
    static void fast_##SUF(const red_args *p, const red_plan *pl, int64_t e0, int64_t e1)  \
    {                                                                                      \
        const T *x = p->x;                                                                 \
        T *y = p->y;                                                                       \
        int64_t n = pl->count;                                                             \
        if (pl->kind == PLAN_COPY) {                                                       \
            memcpy(y + e0, x + e0, (size_t)(e1 - e0) * sizeof(T));                         \
        } else if (pl->kind == PLAN_ROWS) {                                                \
            for (int64_t e = e0; e < e1; e++) {                                            \
                if (p->op == RED_MAX)                                                      \
                    y[e] = STM(max_row_##SUF(x + e * n, n));                               \
                else {                                                                     \
                    SA s = sum_row_##SUF(x + e * n, n);                                    \
                    y[e] = STS(p->op == RED_MEAN ? MEAN(SA, s, n) : s);                    \
                }                                                                          \
            }                                                                              \
        } else if (pl->kind == PLAN_MID) {                                                 \
            int64_t inner = pl->inner;                                                     \
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
            int64_t last = pl->rdims[pl->nr - 1], lstr = pl->rstr[pl->nr - 1];             \
            for (int64_t e = e0; e < e1; e++) {                                            \
                SA s = 0;                                                                  \
                MA m = MAXINIT;                                                            \
                int64_t base = strided_base(pl, e), idx[CGE_MAX_RANK] = {0};               \
                do {                                                                       \
                    int64_t off = strided_off(pl, base, idx);                              \
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
                } while (strided_next(pl, idx));                                           \
                if (p->op == RED_MAX)                                                      \
                    y[e] = STM(m);                                                         \
                else                                                                       \
                    y[e] = STS(p->op == RED_MEAN ? MEAN(SA, s, n) : s);                    \
            }                                                                              \
        }                                                                                  \
    }

FAST_KERNELS(f32, float, float, LD_SELF, (float), float, LD_SELF, (float), -INFINITY, MAX_FLOAT,
             MEAN_FLOAT)
FAST_KERNELS(f64, double, double, LD_SELF, (double), double, LD_SELF, (double), -INFINITY,
             MAX_FLOAT, MEAN_FLOAT)
FAST_KERNELS(f16, uint16_t, float, LD_F16, ST_F16, float, LD_F16, ST_F16, -INFINITY, MAX_FLOAT,
             MEAN_FLOAT)
FAST_KERNELS(bf16, uint16_t, float, LD_BF16, ST_BF16, float, LD_BF16, ST_BF16, -INFINITY,
             MAX_FLOAT, MEAN_FLOAT)
/* Integer sums wrap to the output width, as the output type holds no more. */
FAST_KERNELS(i32, int32_t, int64_t, (int64_t), (int32_t), int32_t, LD_SELF, (int32_t), INT32_MIN,
             MAX_INT, MEAN_SIGNED)
FAST_KERNELS(i64, int64_t, uint64_t, (uint64_t), (int64_t), int64_t, LD_SELF, (int64_t),
             INT64_MIN, MAX_INT, MEAN_SIGNED)
FAST_KERNELS(u32, uint32_t, uint64_t, (uint64_t), (uint32_t), uint32_t, LD_SELF, (uint32_t), 0,
             MAX_INT, MEAN_UNSIGNED)
FAST_KERNELS(u64, uint64_t, uint64_t, LD_SELF, (uint64_t), uint64_t, LD_SELF, (uint64_t), 0,
             MAX_INT, MEAN_UNSIGNED)
FAST_KERNELS(i8, int8_t, int64_t, (int64_t), (int8_t), int8_t, LD_SELF, (int8_t), INT8_MIN,
             MAX_INT, MEAN_SIGNED)
FAST_KERNELS(u8, uint8_t, uint64_t, (uint64_t), (uint8_t), uint8_t, LD_SELF, (uint8_t), 0,
             MAX_INT, MEAN_UNSIGNED)

/* The others, in chunks of up to RED_CHUNK outputs: they accumulate in double
 * (floats) or uint64_t (integers). Signed integers accumulate in uint64_t too:
 * products and sums wrap (to the output width, once stored) instead of
 * overflowing. */
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
#define WALK(T, ACC, AT, INIT, COMB, MERGE, LD)                                            \
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
                AT l[WALK_LANES];                                                          \
                for (int k = 0; k < WALK_LANES; k++)                                       \
                    l[k] = INIT;                                                           \
                int64_t j = 0;                                                             \
                for (; j + WALK_LANES <= n; j += WALK_LANES)                               \
                    for (int k = 0; k < WALK_LANES; k++)                                   \
                        COMB(l[k], LD(r[j + k]), c);                                       \
                for (; j < n; j++)                                                         \
                    COMB(l[0], LD(r[j]), c);                                               \
                for (int k = 0; k < WALK_LANES; k++)                                       \
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
                if (pl->count == 0)                                                        \
                    continue;                                                              \
                int64_t base = strided_base(pl, e + c), idx[CGE_MAX_RANK] = {0};           \
                do {                                                                       \
                    int64_t off = strided_off(pl, base, idx);                              \
                    for (int64_t j = 0; j < last; j++)                                     \
                        COMB(ACC[c], LD(x[off + j * lstr]), c);                            \
                } while (strided_next(pl, idx));                                           \
            }                                                                              \
        }                                                                                  \
    } while (0)

/* T: element; A/LDA/A2D/STA: arithmetic accumulator (double for floats,
 * uint64_t for integers), load, to double, store; MT/LDM/STM/MINIT: ReduceMin's
 * comparison type and its identity (+inf, type maximum). ABS_<SUF> and
 * LDD_<SUF> (below) load for L1 and for LogSumExp. */
#define WALK_KERNELS(SUF, T, A, LDA, A2D, STA, MT, LDM, STM, MINIT)                        \
    static void walk_chunk_##SUF(const red_args *p, const red_plan *pl, const T *x, T *y,  \
                               int64_t e, int64_t w)                                       \
    {                                                                                      \
        A acc[RED_CHUNK];                                                                  \
        double mx[RED_CHUNK], sd[RED_CHUNK];                                               \
        MT mn[RED_CHUNK];                                                                  \
        switch (p->op) {                                                                   \
        case RED_MIN:                                                                      \
            WALK(T, mn, MT, MINIT, C_MIN, C_MIN, LDM);                                     \
            for (int64_t c = 0; c < w; c++)                                                \
                y[e + c] = STM(mn[c]);                                                     \
            break;                                                                         \
        case RED_PROD:                                                                     \
            WALK(T, acc, A, (A)1, C_MUL, C_MUL, LDA);                                      \
            for (int64_t c = 0; c < w; c++)                                                \
                y[e + c] = STA(acc[c]);                                                    \
            break;                                                                         \
        case RED_L1:                                                                       \
            WALK(T, acc, A, (A)0, C_ADD, C_ADD, ABS_##SUF);                                \
            for (int64_t c = 0; c < w; c++)                                                \
                y[e + c] = STA(acc[c]);                                                    \
            break;                                                                         \
        case RED_SUMSQ:                                                                    \
        case RED_L2:                                                                       \
            WALK(T, acc, A, (A)0, C_SQ, C_ADD, LDA);                                       \
            for (int64_t c = 0; c < w; c++) {                                              \
                if (p->op == RED_SUMSQ)                                                    \
                    y[e + c] = STA(acc[c]);                                                \
                else                                                                       \
                    cge__store_from_double(p->dtype, y, e + c, sqrt(A2D(acc[c])));          \
            }                                                                              \
            break;                                                                         \
        case RED_LOGSUM:                                                                   \
            WALK(T, acc, A, (A)0, C_ADD, C_ADD, LDA);                                      \
            for (int64_t c = 0; c < w; c++)                                                \
                cge__store_from_double(p->dtype, y, e + c, log(A2D(acc[c])));               \
            break;                                                                         \
        default: /* RED_LSE: max first, so that exp never overflows */                     \
            WALK(T, mx, double, -INFINITY, C_MAX, C_MAX, LDD_##SUF);                       \
            WALK(T, sd, double, 0.0, C_EXP, C_ADD, LDD_##SUF);                             \
            for (int64_t c = 0; c < w; c++) {                                              \
                double m = mx[c];                                                          \
                cge__store_from_double(p->dtype, y, e + c,                                  \
                                      isinf(m) || isnan(m) ? m : m + log(sd[c]));          \
            }                                                                              \
            break;                                                                         \
        }                                                                                  \
    }                                                                                      \
    static void walk_##SUF(const red_args *p, const red_plan *pl, int64_t e0, int64_t e1)  \
    {                                                                                      \
        for (int64_t e = e0; e < e1;) {                                                    \
            int64_t w = e1 - e < RED_CHUNK ? e1 - e : RED_CHUNK;                           \
            if (pl->kind == PLAN_MID && pl->inner - e % pl->inner < w)                     \
                w = pl->inner - e % pl->inner;                                             \
            walk_chunk_##SUF(p, pl, p->x, p->y, e, w);                                     \
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

WALK_KERNELS(f32, float, double, LDF32D, A2D_F, (float), float, LD_SELF, LD_SELF, INFINITY)
WALK_KERNELS(f64, double, double, LD_SELF, A2D_F, (double), double, LD_SELF, LD_SELF,
             INFINITY)
WALK_KERNELS(f16, uint16_t, double, LDF16D, A2D_F, ST_F16, float, LD_F16, ST_F16, INFINITY)
WALK_KERNELS(bf16, uint16_t, double, LDBF16D, A2D_F, ST_BF16, float, LD_BF16, ST_BF16,
             INFINITY)
WALK_KERNELS(i32, int32_t, uint64_t, LD_SU, A2D_S, (int32_t), int32_t, LD_SELF, LD_SELF,
             INT32_MAX)
WALK_KERNELS(i64, int64_t, uint64_t, LD_SU, A2D_S, (int64_t), int64_t, LD_SELF, LD_SELF,
             INT64_MAX)
WALK_KERNELS(i8, int8_t, uint64_t, LD_SU, A2D_S, (int8_t), int8_t, LD_SELF, LD_SELF,
             INT8_MAX)
WALK_KERNELS(u32, uint32_t, uint64_t, LD_U64, A2D_U, (uint32_t), uint32_t, LD_SELF,
             LD_SELF, UINT32_MAX)
WALK_KERNELS(u64, uint64_t, uint64_t, LD_U64, A2D_U, (uint64_t), uint64_t, LD_SELF,
             LD_SELF, UINT64_MAX)
WALK_KERNELS(u8, uint8_t, uint64_t, LD_U64, A2D_U, (uint8_t), uint8_t, LD_SELF, LD_SELF,
             UINT8_MAX)

#define BY_DTYPE(P)                                                                        \
    [CGE_F32] = P##_f32, [CGE_F64] = P##_f64, [CGE_F16] = P##_f16, [CGE_BF16] = P##_bf16,  \
    [CGE_I32] = P##_i32, [CGE_I64] = P##_i64, [CGE_U32] = P##_u32, [CGE_U64] = P##_u64,    \
    [CGE_I8] = P##_i8, [CGE_U8] = P##_u8
static const red_range_fn fast_ranges[CGE_DTYPE_MAX] = {BY_DTYPE(fast)};
static const red_range_fn walk_ranges[CGE_DTYPE_MAX] = {BY_DTYPE(walk)};

/* Whether t may index the tables above. */
static bool dtype_in_range(cge_dtype t) { return t > CGE_DTYPE_UNDEFINED && t < CGE_DTYPE_MAX; }

/* ---- the driver -------------------------------------------------------------------- */

/* The block loop of every reduction: outputs [e0, e1) of this block, copied
 * (noop_with_empty_axes), or reduced by the launch's typed kernel. */
static void red_block(int64_t blk, int64_t nblk, void *args)
{
    const red_args *p = args;
    size_t es = cge_dtype_size(p->dtype);
    int64_t e0, e1;
    cge__block_range(p->out_numel, blk, nblk, &e0, &e1);
    char *y = (char *)p->y + (size_t)e0 * es;
    if (p->identity) {
        memcpy(y, (const char *)p->x + (size_t)e0 * es, (size_t)(e1 - e0) * es);
        return;
    }
    red_plan pl;
    if (!red_args_plan(p, &pl)) {
        memset(y, 0, (size_t)(e1 - e0) * es); /* meta rejects this */
        return;
    }
    p->range(p, &pl, e0, e1);
}

/* The launch shared by every reduction: dtype and rank checks, the axes (an
 * attribute, a mask derived from the shapes, or an input read on the stream),
 * blocks over the outputs, then red_block on the stream. */
static cge_status reduce_launch(const cge_kernel_ctx *ctx, cge_stream *stream, red_op op,
                                bool axes_input)
{
    if (ctx->num_inputs < 1 || ctx->num_outputs < 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "needs input data and output reduced");
    const cge_tensor *x = &ctx->inputs[0];
    cge_tensor *y = &ctx->outputs[0];
    red_range_fn range = !dtype_in_range(x->dtype) ? NULL
                         : op <= RED_MAX           ? fast_ranges[x->dtype]
                                                   : walk_ranges[x->dtype];
    if (!range || y->dtype != x->dtype)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "unsupported dtypes %s -> %s",
                                cge_dtype_name(x->dtype), cge_dtype_name(y->dtype));
    /* An empty input may have no buffer; it is never read then, but a NULL
     * base would make even zero-offset pointer arithmetic undefined. */
    red_args p = {.dtype = x->dtype, .op = op, .range = range,
                  .x = x->data ? x->data : y->data, .y = y->data, .in = x->shape};
    p.out_numel = cge_shape_numel(&y->shape);
    bool keepdims = cge_attrs_get_int(ctx->attrs, "keepdims", 1) != 0;
    p.noop_empty = axes_input && cge_attrs_get_int(ctx->attrs, "noop_with_empty_axes", 0) != 0;
    const cge_tensor *ax = axes_input && ctx->num_inputs > 1 &&
                                   ctx->inputs[1].dtype != CGE_DTYPE_UNDEFINED
                               ? &ctx->inputs[1]
                               : NULL;
    int32_t expect_rank = x->shape.rank;
    if (ax && ax->shape.rank == 1 && ax->shape.dims[0] > 0) {
        if (ax->dtype != CGE_I64 || (!ax->data))
            return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "axes must be an int64 buffer");
        if (keepdims) {
            /* Same rank: a dim reduced is one that became 1 (reducing a size-1
             * dim changes nothing), so the shapes say it all. */
            if (y->shape.rank != x->shape.rank)
                return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output rank differs from input");
            p.have_mask = true;
            for (int32_t d = 0; d < x->shape.rank; d++)
                p.reduce[d] = y->shape.dims[d] == 1 && x->shape.dims[d] != 1;
        } else {
            p.axes = ax->data;
            p.num_axes = ax->shape.dims[0];
            expect_rank = x->shape.rank - (int32_t)p.num_axes;
        }
    } else {
        const int64_t *v = NULL;
        int64_t n = 0;
        if (!axes_input) {
            n = cge_attrs_get_ints(ctx->attrs, "axes", &v);
            n = n < 0 ? 0 : n;
        }
        axes_info ai;
        char err[160];
        cge_status st = axes_mask(v, n, x->shape.rank, p.noop_empty, &ai, err, sizeof err);
        if (st != CGE_OK)
            return cge_kernel_error(ctx, st, "%s", err);
        p.identity = ai.noop;
        p.have_mask = true;
        memcpy(p.reduce, ai.reduce, sizeof p.reduce);
        if (!keepdims) {
            expect_rank = 0;
            for (int32_t d = 0; d < x->shape.rank; d++)
                expect_rank += !ai.reduce[d];
        }
    }
    if (y->shape.rank != expect_rank)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output rank %d, expected %d",
                                (int)y->shape.rank, (int)expect_rank);
    if (p.out_numel == 0)
        return CGE_OK;
    int64_t in_numel = cge_shape_numel(&x->shape);
    if ((in_numel > 0 && !x->data) || !y->data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    int64_t per = in_numel / p.out_numel;
    int64_t min_out = per >= 16384 ? 1 : 16384 / (per > 0 ? per : 1);
    return cge_launch(stream, red_block, cge__blocks_for(p.out_numel, min_out, ctx->num_threads),
                      &p, sizeof p);
}

/* The launch functions of the kernel definitions: CALL with the context c
 * and stream s. */
#define DEF_LAUNCH(FN, CALL)                                                               \
    static cge_status FN(const cge_kernel_ctx *c, cge_stream *s) { return CALL; }
#define RED_LAUNCH(FN, OP, AXES_INPUT) DEF_LAUNCH(FN, reduce_launch(c, s, OP, AXES_INPUT))
#define RED_LAUNCHERS(NAME, OP)                                                            \
    RED_LAUNCH(NAME##_launch13, OP, false)                                                 \
    RED_LAUNCH(NAME##_launch18, OP, true)
RED_LAUNCH(sum_launch18, RED_SUM, true)
RED_LAUNCHERS(mean, RED_MEAN)
RED_LAUNCHERS(max, RED_MAX)
RED_LAUNCHERS(min, RED_MIN)
RED_LAUNCHERS(prod, RED_PROD)
RED_LAUNCHERS(l1, RED_L1)
RED_LAUNCHERS(l2, RED_L2)
RED_LAUNCHERS(logsum, RED_LOGSUM)
RED_LAUNCHERS(lse, RED_LSE)
RED_LAUNCHERS(sumsq, RED_SUMSQ)

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
        cge__block_range(p->out_numel, blk, nblk, &e0, &e1);                                \
        for (int64_t e = e0; e < e1;) {                                                    \
            int64_t i0 = e % inner, w = e1 - e < RED_CHUNK ? e1 - e : RED_CHUNK;           \
            if (inner - i0 < w)                                                            \
                w = inner - i0;                                                            \
            const T *xs = x + (e / inner) * n * inner + i0;                                \
            MT best[RED_CHUNK];                                                            \
            int64_t at[RED_CHUNK];                                                         \
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

static const cge_kernel_fn arg_fns[CGE_DTYPE_MAX] = {BY_DTYPE(arg_fn), [CGE_I16] = arg_fn_i16,
                                                     [CGE_U16] = arg_fn_u16};

static cge_status arg_launch(const cge_kernel_ctx *ctx, cge_stream *stream, bool is_max)
{
    const cge_tensor *x = &ctx->inputs[0];
    cge_tensor *y = &ctx->outputs[0];
    int32_t rank = x->shape.rank, axis;
    cge_kernel_fn fn = dtype_in_range(x->dtype) ? arg_fns[x->dtype] : NULL;
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
    return cge_launch(stream, fn, cge__blocks_for(p.out_numel, min_out, ctx->num_threads), &p,
                      sizeof p);
}

DEF_LAUNCH(argmax_launch, arg_launch(c, s, true))
DEF_LAUNCH(argmin_launch, arg_launch(c, s, false))

/* ---- definitions ------------------------------------------------------------------ */

#define IN_ARGS(NAME, DTYPES)                                                              \
    static const cge_arg_def NAME##_in13[] = {{"data", 0, DTYPES, "input tensor"}};        \
    static const cge_arg_def NAME##_in18[] = {                                             \
        {"data", 0, DTYPES, "input tensor"},                                               \
        {"axes", CGE_ARG_OPTIONAL, CGE_DT(CGE_I64), "1-D axes to reduce; empty or absent: all"}, \
    };                                                                                     \
    static const cge_arg_def NAME##_out[] = {{"reduced", 0, DTYPES, "reduced tensor"}}
IN_ARGS(red, RED_DTYPES);
IN_ARGS(minmax, RED_MINMAX_DTYPES);

static const cge_attr_def attrs13[] = {
    {"axes", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "axes to reduce; absent: all"},
    {"keepdims", CGE_ATTR_INT, false, 1, 0.0f, NULL, "keep reduced dims as 1"},
};
static const cge_attr_def attrs18[] = {
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

#define KDEF(NAME, DT, FN)                                                                 \
    static const cge_kernel_def NAME[] = {                                                 \
        {.engine = "cpu", .dtypes = DT, .launch = FN, .inplace_input = -1}}
#define KDEF_PAIR(NAME, DT)                                                                \
    KDEF(k_##NAME##13, DT, NAME##_launch13);                                               \
    KDEF(k_##NAME##18, DT, NAME##_launch18)
KDEF(k_sum18, RED_DTYPES, sum_launch18);
KDEF_PAIR(mean, RED_DTYPES);
KDEF_PAIR(max, RED_MINMAX_DTYPES);
KDEF_PAIR(min, RED_MINMAX_DTYPES);
KDEF_PAIR(prod, RED_DTYPES);
KDEF_PAIR(l1, RED_DTYPES);
KDEF_PAIR(l2, RED_DTYPES);
KDEF_PAIR(logsum, RED_DTYPES);
KDEF_PAIR(lse, RED_DTYPES);
KDEF_PAIR(sumsq, RED_DTYPES);
KDEF(k_argmax, ARG_DTYPES, argmax_launch);
KDEF(k_argmin, ARG_DTYPES, argmin_launch);

#define OPDEF(NAME, SINCE, END, IN, NIN, OUT, ATTRS, NATTRS, INFER, K, DOC)                \
    {                                                                                      \
        .name = NAME, .domain = CGE_DOMAIN_DEFAULT, .since_version = SINCE,                \
        .end_version = END, .inputs = IN, .num_inputs = NIN, .outputs = OUT,               \
        .num_outputs = 1, .attrs = ATTRS, .num_attrs = NATTRS, .infer = INFER,             \
        .kernels = K, .num_kernels = 1, .doc = DOC                                         \
    }
/* Opset 13's form (axes attribute, up to 17) and 18's (axes input). */
#define OPDEF13(NAME, ARGN, K, DOC)                                                        \
    OPDEF(NAME, 13, 17, ARGN##_in13, 1, ARGN##_out, attrs13, 2, reduce_infer_attr, k_##K##13, DOC)
#define OPDEF18(NAME, ARGN, K, DOC)                                                        \
    OPDEF(NAME, 18, 0, ARGN##_in18, 2, ARGN##_out, attrs18, 2, reduce_infer_input, k_##K##18, DOC)
#define OPDEF_PAIR(NAME, ARGN, K, DOC)                                                     \
    OPDEF13(NAME, ARGN, K, DOC " (axes attribute)."), OPDEF18(NAME, ARGN, K, DOC " (axes input).")

/* Empty reductions give ONNX 18's identities: 0 (sum, L1, L2, sum of
 * squares), NaN for floats and 0 for integers (mean), -inf or the type's
 * minimum (max), +inf or the type's maximum (min), 1 (prod), -inf (log-sum,
 * log-sum-exp). Integer means divide with truncation; integer results of L2
 * and the logarithms are computed in double and truncated; integer sums and
 * products wrap to the output width. ReduceSum has had its axes input since
 * opset 13. */
static const cge_op_def reduce_ops[] = {
    OPDEF("ReduceSum", 13, 0, red_in18, 2, red_out, attrs18, 2, reduce_infer_input, k_sum18,
          "Sum over axes (from input 'axes')."),
    OPDEF13("ReduceMean", red, mean, "Mean over axes (attribute)."),
    OPDEF13("ReduceMax", minmax, max, "Maximum over axes (attribute)."),
    OPDEF18("ReduceMean", red, mean, "Mean over axes (from input 'axes')."),
    OPDEF18("ReduceMax", minmax, max, "Maximum over axes (from input 'axes')."),
    OPDEF_PAIR("ReduceMin", minmax, min, "Minimum over axes"),
    OPDEF_PAIR("ReduceProd", red, prod, "Product over axes"),
    OPDEF_PAIR("ReduceL1", red, l1, "Sum of |x| over axes"),
    OPDEF_PAIR("ReduceL2", red, l2, "sqrt(sum of x^2) over axes"),
    OPDEF_PAIR("ReduceLogSum", red, logsum, "log(sum of x) over axes"),
    OPDEF_PAIR("ReduceLogSumExp", red, lse, "log(sum of exp(x)) over axes, computed stably"),
    OPDEF_PAIR("ReduceSumSquare", red, sumsq, "Sum of x^2 over axes"),
    OPDEF("ArgMax", 13, 0, arg_in, 1, arg_out, arg_attrs, 3, arg_infer, k_argmax,
          "Index of the maximum along axis (first, or last with select_last_index)."),
    OPDEF("ArgMin", 13, 0, arg_in, 1, arg_out, arg_attrs, 3, arg_infer, k_argmin,
          "Index of the minimum along axis (first, or last with select_last_index)."),
};

const cge_op_def *cge__ops_reduce(int32_t *count)
{
    *count = (int32_t)(sizeof reduce_ops / sizeof reduce_ops[0]);
    return reduce_ops;
}
