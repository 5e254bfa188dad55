/* Pooling: MaxPool (with optional Indices), AveragePool (count_include_pad,
 * ceil_mode), LpPool (ceil_mode and dilations from 18), and their Global forms. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "ops/builtin.h"
#include "ops/kernel_util.h"
#include "ops/nn_spatial.h"

/* Blocks run over output rows; float32 rows do the window taps outer and the
 * output positions inner (a vectorisable loop), the edges and other dtypes go
 * element by element. */

#define POOL_FLOAT CGE_DT_FLOAT
#define MAXPOOL_DTYPES (CGE_DT_FLOAT | CGE_DT(CGE_I8) | CGE_DT(CGE_U8))

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define NN_CLONES CGE_TARGET_CLONES
#else
#define NN_CLONES
#endif

enum { POOL_MAX, POOL_AVG, POOL_LP };

typedef struct pool_args {
    cge_dtype dtype;
    const void *x;
    void *y;
    int64_t *ind;            /* MaxPool indices, or NULL */
    int kind;
    int count_include_pad;
    int storage_order;
    int64_t lp;              /* LpPool's p */
    int64_t NC, in_sp, P;
    nn_geom g;
} pool_args;

/* ---- meta ------------------------------------------------------------------ */

static cge_status pool_geometry(const cge_attrs *a, const cge_shape *xs, nn_geom *g, char *err,
                                size_t errsz)
{
    if (xs->rank < 3 || xs->rank > 5) {
        char s[CGE_SHAPE_STR_MAX];
        snprintf(err, errsz, "X %s must have rank 3 to 5 (1 to 3 spatial dims)",
                 cge_shape_str(xs, s, sizeof s));
        return CGE_ERR_SHAPE;
    }
    bool ceil_mode = cge_attrs_get_int(a, "ceil_mode", 0) != 0;
    if (!nn_geom_make(a, xs->rank - 2, xs->dims + 2, NULL, ceil_mode, g, err, errsz))
        return CGE_ERR_SHAPE;
    return CGE_OK;
}

static cge_status pool_infer(cge_infer_ctx *ctx)
{
    if (ctx->num_inputs < 1 || ctx->num_outputs < 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "needs input X and output Y");
    const cge_tensor_desc *X = &ctx->inputs[0];
    nn_geom g;
    char err[1024];
    cge_status st = pool_geometry(ctx->attrs, &X->shape, &g, err, sizeof err);
    if (st != CGE_OK)
        return cge_meta_error(ctx, st, "%s", err);
    if (!strcmp(ctx->op_type, "MaxPool") &&
        cge_attrs_get_int(ctx->attrs, "storage_order", 0) != 0 &&
        cge_attrs_get_int(ctx->attrs, "storage_order", 0) != 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "storage_order must be 0 or 1");
    if (!strcmp(ctx->op_type, "LpPool") && cge_attrs_get_int(ctx->attrs, "p", 2) < 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "p must be >= 1");
    cge_shape out = X->shape;
    for (int i = 0; i < g.nsp; i++)
        out.dims[2 + i] = g.out[NN_MAX_SP - g.nsp + i];
    for (int32_t i = 0; i < ctx->num_outputs && i < 2; i++) {
        ctx->outputs[i].dtype = i == 0 ? X->dtype : CGE_I64;
        ctx->outputs[i].shape = out;
    }
    return CGE_OK;
}

static cge_status global_infer(cge_infer_ctx *ctx)
{
    if (ctx->num_inputs < 1 || ctx->num_outputs < 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "needs input X and output Y");
    const cge_tensor_desc *X = &ctx->inputs[0];
    if (X->shape.rank < 3) {
        char s[CGE_SHAPE_STR_MAX];
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "X %s must have rank >= 3 ([N, C, ...])",
                              cge_shape_str(&X->shape, s, sizeof s));
    }
    if (!strcmp(ctx->op_type, "GlobalLpPool") && cge_attrs_get_int(ctx->attrs, "p", 2) < 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "p must be >= 1");
    ctx->outputs[0].dtype = X->dtype;
    ctx->outputs[0].shape = X->shape;
    for (int32_t i = 2; i < X->shape.rank; i++)
        ctx->outputs[0].shape.dims[i] = 1;
    return CGE_OK;
}

/* ---- kernels ---------------------------------------------------------------- */

static inline double ld(cge_dtype t, const void *p, int64_t i)
{
    switch (t) {
    case CGE_F32: return ((const float *)p)[i];
    case CGE_F64: return ((const double *)p)[i];
    case CGE_F16: return cge_f16_to_f32(((const uint16_t *)p)[i]);
    case CGE_BF16: return cge_bf16_to_f32(((const uint16_t *)p)[i]);
    case CGE_I8: return ((const int8_t *)p)[i];
    case CGE_U8: return ((const uint8_t *)p)[i];
    default: return cge__load_as_double(t, p, i);
    }
}

static inline double lp_pow(double v, int64_t p)
{
    v = fabs(v);
    return p == 1 ? v : p == 2 ? v * v : pow(v, (double)p);
}

static inline double lp_root(double s, int64_t p)
{
    return p == 1 ? s : p == 2 ? sqrt(s) : pow(s, 1.0 / (double)p);
}

/* One output element at (od, oh, ow) of plane nc, any dtype. */
static void pool_one(const pool_args *p, int64_t nc, int64_t od, int64_t oh, int64_t ow,
                     int64_t out_idx)
{
    const nn_geom *g = &p->g;
    int64_t o[3] = {od, oh, ow}, a[3], b[3], start[3];
    for (int j = 0; j < 3; j++) {
        nn_tap_range(g, j, o[j], &a[j], &b[j]);
        start[j] = o[j] * g->s[j] - g->pb[j];
    }
    int64_t base = nc * p->in_sp;
    double acc = p->kind == POOL_MAX ? -INFINITY : 0.0;
    int64_t best = -1, count = 0;
    for (int64_t k0 = a[0]; k0 < b[0]; k0++) {
        int64_t iz = start[0] + k0 * g->d[0];
        for (int64_t k1 = a[1]; k1 < b[1]; k1++) {
            int64_t iy = start[1] + k1 * g->d[1];
            for (int64_t k2 = a[2]; k2 < b[2]; k2++) {
                int64_t ix = start[2] + k2 * g->d[2];
                int64_t idx = (iz * g->in[1] + iy) * g->in[2] + ix;
                double v = ld(p->dtype, p->x, base + idx);
                count++;
                if (p->kind == POOL_MAX) {
                    if (v > acc || best < 0) {
                        acc = v;
                        best = p->storage_order ? iz + g->in[0] * (iy + g->in[1] * ix) : idx;
                    }
                } else if (p->kind == POOL_AVG) {
                    acc += v;
                } else {
                    acc += lp_pow(v, p->lp);
                }
            }
        }
    }
    if (p->kind == POOL_AVG) {
        if (p->count_include_pad)
            count = nn_padded_taps(g, 0, od) * nn_padded_taps(g, 1, oh) *
                    nn_padded_taps(g, 2, ow);
        acc = count > 0 ? acc / (double)count : 0.0;
    } else if (p->kind == POOL_LP) {
        acc = lp_root(acc, p->lp);
    } else if (best < 0) {
        acc = 0.0; /* an empty window (only possible in padding) */
    }
    cge__store_from_double(p->dtype, p->y, out_idx, acc);
    if (p->ind)
        p->ind[out_idx] = best < 0 ? 0 : base + best;
}

NN_CLONES
static void max_row(float *restrict y, const float *restrict x, int64_t a, int64_t b, int64_t s,
                    int64_t off)
{
    const float *xs = x + off;
    if (s == 1) {
        for (int64_t o = a; o < b; o++)
            y[o] = xs[o] > y[o] ? xs[o] : y[o];
    } else {
        for (int64_t o = a; o < b; o++)
            y[o] = xs[o * s] > y[o] ? xs[o * s] : y[o];
    }
}

NN_CLONES
static void sum_row(float *restrict y, const float *restrict x, int64_t a, int64_t b, int64_t s,
                    int64_t off)
{
    const float *xs = x + off;
    if (s == 1) {
        for (int64_t o = a; o < b; o++)
            y[o] += xs[o];
    } else {
        for (int64_t o = a; o < b; o++)
            y[o] += xs[o * s];
    }
}

/* float32 max/avg without indices: interior positions of each row tap by tap. */
static void pool_row_f32(const pool_args *p, int64_t nc, int64_t od, int64_t oh, float *yr)
{
    const nn_geom *g = &p->g;
    int64_t o0, o1, a0, b0, a1, b1;
    nn_inner_range(g, 2, &o0, &o1);
    nn_tap_range(g, 0, od, &a0, &b0);
    nn_tap_range(g, 1, oh, &a1, &b1);
    int64_t row = (nc * g->out[0] + od) * g->out[1] + oh;
    for (int64_t ow = 0; ow < o0; ow++)
        pool_one(p, nc, od, oh, ow, row * g->out[2] + ow);
    for (int64_t ow = o1; ow < g->out[2]; ow++)
        pool_one(p, nc, od, oh, ow, row * g->out[2] + ow);
    if (o0 >= o1)
        return;
    const float *xp = (const float *)p->x + nc * p->in_sp;
    int is_max = p->kind == POOL_MAX;
    for (int64_t o = o0; o < o1; o++)
        yr[o] = is_max ? -INFINITY : 0.0f;
    for (int64_t k0 = a0; k0 < b0; k0++) {
        int64_t iz = od * g->s[0] - g->pb[0] + k0 * g->d[0];
        for (int64_t k1 = a1; k1 < b1; k1++) {
            int64_t iy = oh * g->s[1] - g->pb[1] + k1 * g->d[1];
            const float *xr = xp + (iz * g->in[1] + iy) * g->in[2];
            for (int64_t k2 = 0; k2 < g->k[2]; k2++) {
                int64_t off = k2 * g->d[2] - g->pb[2];
                if (is_max)
                    max_row(yr, xr, o0, o1, g->s[2], off);
                else
                    sum_row(yr, xr, o0, o1, g->s[2], off);
            }
        }
    }
    if (!is_max) {
        int64_t cnt = p->count_include_pad
                          ? nn_padded_taps(g, 0, od) * nn_padded_taps(g, 1, oh) * g->k[2]
                          : (b0 - a0) * (b1 - a1) * g->k[2];
        float inv = cnt > 0 ? 1.0f / (float)cnt : 0.0f;
        for (int64_t o = o0; o < o1; o++)
            yr[o] *= inv;
    }
}

/* Blocks over output rows (nc, od, oh). */
static void pool_fn(int64_t blk, int64_t nblk, void *args)
{
    const pool_args *p = args;
    const nn_geom *g = &p->g;
    int64_t r0, r1;
    cge__block_range(p->NC * g->out[0] * g->out[1], blk, nblk, &r0, &r1);
    int fast = p->dtype == CGE_F32 && !p->ind && p->kind != POOL_LP;
    for (int64_t r = r0; r < r1; r++) {
        int64_t oh = r % g->out[1], od = (r / g->out[1]) % g->out[0];
        int64_t nc = r / (g->out[0] * g->out[1]);
        if (fast) {
            pool_row_f32(p, nc, od, oh, (float *)p->y + r * g->out[2]);
            continue;
        }
        for (int64_t ow = 0; ow < g->out[2]; ow++)
            pool_one(p, nc, od, oh, ow, r * g->out[2] + ow);
    }
}

/* Global pools: blocks over planes. */
static void global_fn(int64_t blk, int64_t nblk, void *args)
{
    const pool_args *p = args;
    int64_t c0, c1;
    cge__block_range(p->NC, blk, nblk, &c0, &c1);
    for (int64_t nc = c0; nc < c1; nc++) {
        double acc;
        if (p->dtype == CGE_F32 && p->kind != POOL_LP) {
            const float *x = (const float *)p->x + nc * p->in_sp;
            float lanes[16];
            for (int l = 0; l < 16; l++)
                lanes[l] = p->kind == POOL_MAX ? -INFINITY : 0.0f;
            int64_t i = 0;
            if (p->kind == POOL_MAX) {
                for (; i + 16 <= p->in_sp; i += 16)
                    for (int l = 0; l < 16; l++)
                        lanes[l] = x[i + l] > lanes[l] ? x[i + l] : lanes[l];
                acc = -INFINITY;
                for (int l = 0; l < 16; l++)
                    acc = lanes[l] > acc ? lanes[l] : acc;
                for (; i < p->in_sp; i++)
                    acc = x[i] > acc ? x[i] : acc;
            } else {
                for (; i + 16 <= p->in_sp; i += 16)
                    for (int l = 0; l < 16; l++)
                        lanes[l] += x[i + l];
                acc = 0.0;
                for (int l = 0; l < 16; l++)
                    acc += lanes[l];
                for (; i < p->in_sp; i++)
                    acc += x[i];
            }
        } else {
            acc = p->kind == POOL_MAX ? -INFINITY : 0.0;
            for (int64_t i = 0; i < p->in_sp; i++) {
                double v = ld(p->dtype, p->x, nc * p->in_sp + i);
                if (p->kind == POOL_MAX)
                    acc = v > acc ? v : acc;
                else if (p->kind == POOL_AVG)
                    acc += v;
                else
                    acc += lp_pow(v, p->lp);
            }
        }
        if (p->kind == POOL_AVG)
            acc /= (double)p->in_sp;
        else if (p->kind == POOL_LP)
            acc = lp_root(acc, p->lp);
        cge__store_from_double(p->dtype, p->y, nc, acc);
    }
}

static cge_status pool_check_io(const cge_kernel_ctx *ctx, cge_dtype_set ok)
{
    if (ctx->num_inputs < 1 || ctx->num_outputs < 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "needs input X and output Y");
    const cge_tensor *X = &ctx->inputs[0];
    if (!(ok & CGE_DT(X->dtype)) || ctx->outputs[0].dtype != X->dtype)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "unsupported dtypes %s -> %s",
                                cge_dtype_name(X->dtype), cge_dtype_name(ctx->outputs[0].dtype));
    if (X->shape.rank < 3 || !cge_shape_is_static(&X->shape))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "X must have a static shape of rank >= 3");
    return CGE_OK;
}

static cge_status pool_launch_kind(const cge_kernel_ctx *ctx, cge_stream *stream, int kind)
{
    cge_status st = pool_check_io(ctx, kind == POOL_MAX ? MAXPOOL_DTYPES : POOL_FLOAT);
    if (st != CGE_OK)
        return st;
    const cge_tensor *X = &ctx->inputs[0];
    pool_args p;
    memset(&p, 0, sizeof p);
    char err[1024];
    st = pool_geometry(ctx->attrs, &X->shape, &p.g, err, sizeof err);
    if (st != CGE_OK)
        return cge_kernel_error(ctx, st, "%s", err);
    cge_shape out = X->shape;
    for (int i = 0; i < p.g.nsp; i++)
        out.dims[2 + i] = p.g.out[NN_MAX_SP - p.g.nsp + i];
    if (!cge_shape_equal(&out, &ctx->outputs[0].shape))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output shape does not agree with X");
    if (ctx->num_outputs > 1 && ctx->outputs[1].data) {
        if (kind != POOL_MAX || ctx->outputs[1].dtype != CGE_I64 ||
            !cge_shape_equal(&out, &ctx->outputs[1].shape))
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "Indices must be int64 shaped like Y");
        p.ind = ctx->outputs[1].data;
    }
    p.dtype = X->dtype;
    p.x = X->data;
    p.y = ctx->outputs[0].data;
    p.kind = kind;
    p.count_include_pad = cge_attrs_get_int(ctx->attrs, "count_include_pad", 0) != 0;
    p.storage_order = cge_attrs_get_int(ctx->attrs, "storage_order", 0) != 0;
    p.lp = cge_attrs_get_int(ctx->attrs, "p", 2);
    p.NC = X->shape.dims[0] * X->shape.dims[1];
    p.in_sp = p.g.in[0] * p.g.in[1] * p.g.in[2];
    p.P = p.g.out[0] * p.g.out[1] * p.g.out[2];
    if (p.NC * p.P == 0)
        return CGE_OK;
    if (!p.x || !p.y)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    int64_t rows = p.NC * p.g.out[0] * p.g.out[1];
    int64_t per = p.g.out[2] * p.g.k[0] * p.g.k[1] * p.g.k[2];
    return cge_launch(stream, pool_fn,
                      cge__blocks_for(rows, per >= 8192 ? 1 : 8192 / (per > 0 ? per : 1),
                                     ctx->num_threads),
                      &p, sizeof p);
}

static cge_status maxpool_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return pool_launch_kind(ctx, stream, POOL_MAX);
}

static cge_status avgpool_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return pool_launch_kind(ctx, stream, POOL_AVG);
}

static cge_status lppool_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return pool_launch_kind(ctx, stream, POOL_LP);
}

static cge_status global_launch_kind(const cge_kernel_ctx *ctx, cge_stream *stream, int kind)
{
    if (ctx->num_inputs < 1 || ctx->num_outputs < 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "needs input X and output Y");
    const cge_tensor *X = &ctx->inputs[0];
    if (!(POOL_FLOAT & CGE_DT(X->dtype)) || ctx->outputs[0].dtype != X->dtype)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "unsupported dtypes %s -> %s",
                                cge_dtype_name(X->dtype), cge_dtype_name(ctx->outputs[0].dtype));
    if (X->shape.rank < 3)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "X must have rank >= 3");
    pool_args p;
    memset(&p, 0, sizeof p);
    p.dtype = X->dtype;
    p.x = X->data;
    p.y = ctx->outputs[0].data;
    p.kind = kind;
    p.lp = cge_attrs_get_int(ctx->attrs, "p", 2);
    p.NC = X->shape.dims[0] * X->shape.dims[1];
    p.in_sp = 1;
    for (int32_t i = 2; i < X->shape.rank; i++)
        p.in_sp *= X->shape.dims[i];
    if (cge_shape_numel(&ctx->outputs[0].shape) != p.NC)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output shape does not agree with X");
    if (p.NC == 0)
        return CGE_OK;
    if (!p.x || !p.y)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    int64_t per = p.in_sp > 0 ? p.in_sp : 1;
    return cge_launch(stream, global_fn,
                      cge__blocks_for(p.NC, per >= 16384 ? 1 : 16384 / per, ctx->num_threads), &p,
                      sizeof p);
}

static cge_status gavg_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return global_launch_kind(ctx, stream, POOL_AVG);
}

static cge_status gmax_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return global_launch_kind(ctx, stream, POOL_MAX);
}

static cge_status glp_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return global_launch_kind(ctx, stream, POOL_LP);
}

/* ---- definitions ------------------------------------------------------------ */

#define ATTR_AUTO_PAD                                                                      \
    {"auto_pad", CGE_ATTR_STRING, false, 0, 0.0f, "NOTSET",                                \
     "NOTSET, SAME_UPPER, SAME_LOWER, VALID"}
#define ATTR_KERNEL {"kernel_shape", CGE_ATTR_INTS, true, 0, 0.0f, NULL, "window size"}
#define ATTR_PADS {"pads", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "begins then ends, default 0"}
#define ATTR_STRIDES {"strides", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "default 1"}
#define ATTR_CEIL {"ceil_mode", CGE_ATTR_INT, false, 0, 0.0f, NULL, "ceil for output sizes"}
#define ATTR_DIL {"dilations", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "default 1"}

static const cge_arg_def max_inputs[] = {{"X", 0, MAXPOOL_DTYPES, "[N, C, D1, ...], 1-3 spatial dims"}};
static const cge_arg_def max_outputs[] = {
    {"Y", 0, MAXPOOL_DTYPES, "pooled"},
    {"Indices", CGE_ARG_OPTIONAL, CGE_DT(CGE_I64), "flat index of each maximum in X"},
};
static const cge_attr_def max_attrs[] = {
    ATTR_AUTO_PAD, ATTR_CEIL, ATTR_DIL, ATTR_KERNEL, ATTR_PADS,
    {"storage_order", CGE_ATTR_INT, false, 0, 0.0f, NULL, "0 row-major, 1 column-major indices"},
    ATTR_STRIDES,
};
static const cge_arg_def flt_inputs[] = {{"X", 0, POOL_FLOAT, "[N, C, D1, ...]"}};
static const cge_arg_def flt_outputs[] = {{"Y", 0, POOL_FLOAT, "pooled"}};
static const cge_attr_def avg_attrs[] = {
    ATTR_AUTO_PAD, ATTR_CEIL,
    {"count_include_pad", CGE_ATTR_INT, false, 0, 0.0f, NULL, "pads count in the divisor"},
    ATTR_KERNEL, ATTR_PADS, ATTR_STRIDES,
};
static const cge_attr_def lp_attrs[] = {
    ATTR_AUTO_PAD, ATTR_KERNEL,
    {"p", CGE_ATTR_INT, false, 2, 0.0f, NULL, "the norm's order"},
    ATTR_PADS, ATTR_STRIDES,
};
/* 18 added ceil_mode and dilations, which the geometry already handles. */
static const cge_attr_def lp18_attrs[] = {
    ATTR_AUTO_PAD, ATTR_CEIL, ATTR_DIL, ATTR_KERNEL,
    {"p", CGE_ATTR_INT, false, 2, 0.0f, NULL, "the norm's order"},
    ATTR_PADS, ATTR_STRIDES,
};
static const cge_attr_def glp_attrs[] = {
    {"p", CGE_ATTR_INT, false, 2, 0.0f, NULL, "the norm's order"},
};

#define KDEF(name, dts, fn)                                                                \
    static const cge_kernel_def name[] = {                                                 \
        {.engine = "cpu", .dtypes = (dts), .launch = (fn), .inplace_input = -1}}
KDEF(max_kernels, MAXPOOL_DTYPES, maxpool_launch);
KDEF(avg_kernels, POOL_FLOAT, avgpool_launch);
KDEF(lp_kernels, POOL_FLOAT, lppool_launch);
KDEF(gavg_kernels, POOL_FLOAT, gavg_launch);
KDEF(gmax_kernels, POOL_FLOAT, gmax_launch);
KDEF(glp_kernels, POOL_FLOAT, glp_launch);

#define POOL_OP(NAME, VER, INS, OUTS, NOUT, ATTRS, NATTR, INFER, KS, DOC)                  \
    {.name = NAME, .domain = CGE_DOMAIN_DEFAULT, .since_version = VER, .inputs = INS,      \
     .num_inputs = 1, .outputs = OUTS, .num_outputs = NOUT, .attrs = ATTRS,                \
     .num_attrs = NATTR, .infer = INFER, .kernels = KS, .num_kernels = 1, .doc = DOC}

#define POOL_OP_RANGE(NAME, VER, END, INS, OUTS, NOUT, ATTRS, NATTR, INFER, KS, DOC)     \
    {.name = NAME, .domain = CGE_DOMAIN_DEFAULT, .since_version = VER, .end_version = END, \
     .inputs = INS, .num_inputs = 1, .outputs = OUTS, .num_outputs = NOUT, .attrs = ATTRS, \
     .num_attrs = NATTR, .infer = INFER, .kernels = KS, .num_kernels = 1, .doc = DOC}

static const cge_op_def pool_ops[] = {
    POOL_OP("MaxPool", 12, max_inputs, max_outputs, 2, max_attrs, 7, pool_infer, max_kernels,
            "Maximum over each window; Indices flatten over the whole input."),
    POOL_OP("AveragePool", 11, flt_inputs, flt_outputs, 1, avg_attrs, 6, pool_infer,
            avg_kernels, "Mean over each window."),
    POOL_OP_RANGE("LpPool", 11, 17, flt_inputs, flt_outputs, 1, lp_attrs, 5, pool_infer,
                  lp_kernels, "p-norm over each window."),
    POOL_OP("LpPool", 18, flt_inputs, flt_outputs, 1, lp18_attrs, 7, pool_infer, lp_kernels,
            "p-norm over each (dilated) window; ceil_mode for output sizes."),
    POOL_OP("GlobalAveragePool", 1, flt_inputs, flt_outputs, 1, NULL, 0, global_infer,
            gavg_kernels, "Mean over all spatial positions."),
    POOL_OP("GlobalMaxPool", 1, flt_inputs, flt_outputs, 1, NULL, 0, global_infer, gmax_kernels,
            "Maximum over all spatial positions."),
    POOL_OP("GlobalLpPool", 2, flt_inputs, flt_outputs, 1, glp_attrs, 1, global_infer,
            glp_kernels, "p-norm over all spatial positions."),
};

const cge_op_def *cge__ops_pool(int32_t *count)
{
    *count = (int32_t)(sizeof pool_ops / sizeof pool_ops[0]);
    return pool_ops;
}
