/* Normalisation: BatchNormalization (inference and training mode),
 * InstanceNormalization, GroupNormalization, LayerNormalization (with
 * Mean/InvStdDev), LRN and MeanVarianceNormalization; and cge.fused
 * ChannelsLastGroupNorm (norm_nhwc.h) and SkipLayerNorm (Add + LayerNorm). */
#include <math.h>
#include <string.h>

#include "base/cpu_isa.h"
#include "cge/fused_ops.h"
#include "ops/builtin.h"
#include "ops/fast_math.h"
#include "ops/family_util.h"
#include "ops/kernel_util.h"
#include "ops/norm_nhwc.h"
#include "ops/transpose_tile.h"

/* Every dtype but MVN's goes through the same loops on chunks of doubles
 * (loaded and stored by typed loops), so float64 keeps its precision and
 * float32 still vectorises; statistics are accumulated in double. MVN, rare
 * and over any axes, reads and writes element by element. */

#define NORM_DTYPES CGE_DT_FLOAT
#define CH 256 /* elements per chunk */

static void load_chunk(cge_dtype t, const void *p, int64_t off, int64_t n, double *buf)
{
    switch (t) {
    case CGE_F32: {
        const float *s = (const float *)p + off;
        for (int64_t i = 0; i < n; i++)
            buf[i] = s[i];
        break;
    }
    case CGE_F64: memcpy(buf, (const double *)p + off, sizeof(double) * (size_t)n); break;
    case CGE_F16: {
        const uint16_t *s = (const uint16_t *)p + off;
        for (int64_t i = 0; i < n; i++)
            buf[i] = cge_f16_to_f32(s[i]);
        break;
    }
    case CGE_BF16: {
        const uint16_t *s = (const uint16_t *)p + off;
        for (int64_t i = 0; i < n; i++)
            buf[i] = cge_bf16_to_f32(s[i]);
        break;
    }
    default:
        for (int64_t i = 0; i < n; i++)
            buf[i] = cge__load_as_double(t, p, off + i);
    }
}

static void store_chunk(cge_dtype t, void *p, int64_t off, int64_t n, const double *buf)
{
    switch (t) {
    case CGE_F32: {
        float *d = (float *)p + off;
        for (int64_t i = 0; i < n; i++)
            d[i] = (float)buf[i];
        break;
    }
    case CGE_F64: memcpy((double *)p + off, buf, sizeof(double) * (size_t)n); break;
    default:
        for (int64_t i = 0; i < n; i++)
            cge__store_from_double(t, p, off + i, buf[i]);
    }
}

static double ld1(cge_dtype t, const void *p, int64_t i)
{
    double v;
    load_chunk(t, p, i, 1, &v);
    return v;
}

/* Mean and population variance of n elements at x[off...] (two passes). */
static void moments(cge_dtype t, const void *x, int64_t off, int64_t n, double *mean, double *var)
{
    double buf[CH], s = 0.0, q = 0.0;
    for (int64_t i = 0; i < n; i += CH) {
        int64_t w = n - i < CH ? n - i : CH;
        load_chunk(t, x, off + i, w, buf);
        for (int64_t j = 0; j < w; j++)
            s += buf[j];
    }
    double m = n > 0 ? s / (double)n : 0.0;
    for (int64_t i = 0; i < n; i += CH) {
        int64_t w = n - i < CH ? n - i : CH;
        load_chunk(t, x, off + i, w, buf);
        for (int64_t j = 0; j < w; j++)
            q += (buf[j] - m) * (buf[j] - m);
    }
    *mean = m;
    *var = n > 0 ? q / (double)n : 0.0;
}

/* y[off..off+n) = x * a + b */
static void affine(cge_dtype t, const void *x, void *y, int64_t off, int64_t n, double a, double b)
{
    double buf[CH];
    for (int64_t i = 0; i < n; i += CH) {
        int64_t w = n - i < CH ? n - i : CH;
        load_chunk(t, x, off + i, w, buf);
        for (int64_t j = 0; j < w; j++)
            buf[j] = buf[j] * a + b;
        store_chunk(t, y, off + i, w, buf);
    }
}

static bool is_float(cge_dtype t)
{
    return (CGE_DT_FLOAT & CGE_DT(t)) != 0;
}

/* A per-channel parameter: rank 1 of length C (unknown sizes trusted). */
static bool channel_vec(const cge_tensor_desc *d, int64_t C)
{
    return d->shape.rank == 1 && (d->shape.dims[0] < 0 || C < 0 || d->shape.dims[0] == C);
}

/* ---- BatchNormalization ------------------------------------------------------- */

typedef struct bn_args {
    cge_dtype tx, tp, tm;  /* X/Y, scale/B, mean/var dtypes */
    const void *x, *scale, *bias, *mean, *var;
    void *y, *run_mean, *run_var;
    double eps, momentum;
    int64_t N, C, S;       /* S: spatial size */
    double *stats;         /* training: [C] mean, [C] var (workspace) */
} bn_args;

static cge_status bn_infer(cge_infer_ctx *ctx)
{
    if (ctx->num_inputs < 5 || ctx->num_outputs < 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "needs inputs X, scale, B, input_mean, input_var and output Y");
    const cge_tensor_desc *X = &ctx->inputs[0];
    if (X->shape.rank < 2)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "X must have rank >= 2 ([N, C, ...])");
    int64_t C = X->shape.dims[1];
    for (int32_t i = 1; i < 5; i++)
        if (!channel_vec(&ctx->inputs[i], C) || !is_float(ctx->inputs[i].dtype))
            return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                  "input %d must be a float vector of length C = %lld", i,
                                  (long long)C);
    if (ctx->inputs[1].dtype != ctx->inputs[2].dtype ||
        ctx->inputs[3].dtype != ctx->inputs[4].dtype)
        return cge_meta_error(ctx, CGE_ERR_DTYPE,
                              "scale and B, and input_mean and input_var, must share dtypes");
    int training = cge_attrs_get_int(ctx->attrs, "training_mode", 0) != 0;
    if (!training && ctx->num_outputs > 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "running_mean and running_var are outputs only in training_mode");
    ctx->outputs[0].dtype = X->dtype;
    ctx->outputs[0].shape = X->shape;
    for (int32_t i = 1; i < ctx->num_outputs && i < 3; i++) {
        ctx->outputs[i].dtype = ctx->inputs[3].dtype;
        ctx->outputs[i].shape = ctx->inputs[3].shape;
    }
    return CGE_OK;
}

/* Training: per-channel batch statistics and the running outputs. Blocks over C. */
static void bn_stats_fn(int64_t blk, int64_t nblk, void *args)
{
    const bn_args *p = args;
    int64_t c0, c1;
    cge__block_range(p->C, blk, nblk, &c0, &c1);
    for (int64_t c = c0; c < c1; c++) {
        double s = 0.0, q = 0.0;
        for (int64_t n = 0; n < p->N; n++) {
            double m, v;
            moments(p->tx, p->x, (n * p->C + c) * p->S, p->S, &m, &v);
            s += m;
            q += v + m * m;
        }
        double mean = s / (double)p->N, var = q / (double)p->N - mean * mean;
        if (var < 0)
            var = 0;
        p->stats[c] = mean;
        p->stats[p->C + c] = var;
        if (p->run_mean)
            cge__store_from_double(p->tm, p->run_mean, c,
                                  ld1(p->tm, p->mean, c) * p->momentum + mean * (1 - p->momentum));
        if (p->run_var)
            cge__store_from_double(p->tm, p->run_var, c,
                                  ld1(p->tm, p->var, c) * p->momentum + var * (1 - p->momentum));
    }
}

/* Blocks over (n, c) planes. */
static void bn_fn(int64_t blk, int64_t nblk, void *args)
{
    const bn_args *p = args;
    int64_t r0, r1;
    cge__block_range(p->N * p->C, blk, nblk, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t c = r % p->C;
        double mean = p->stats ? p->stats[c] : ld1(p->tm, p->mean, c);
        double var = p->stats ? p->stats[p->C + c] : ld1(p->tm, p->var, c);
        double a = ld1(p->tp, p->scale, c) / sqrt(var + p->eps);
        double b = ld1(p->tp, p->bias, c) - mean * a;
        affine(p->tx, p->x, p->y, r * p->S, p->S, a, b);
    }
}

static bool bn_args_make(const cge_kernel_ctx *ctx, bn_args *p)
{
    memset(p, 0, sizeof *p);
    if (ctx->num_inputs < 5 || ctx->num_outputs < 1 || ctx->inputs[0].shape.rank < 2)
        return false;
    const cge_tensor *X = &ctx->inputs[0];
    p->tx = X->dtype;
    p->tp = ctx->inputs[1].dtype;
    p->tm = ctx->inputs[3].dtype;
    p->N = X->shape.dims[0];
    p->C = X->shape.dims[1];
    p->S = 1;
    for (int32_t i = 2; i < X->shape.rank; i++)
        p->S *= X->shape.dims[i];
    return true;
}

static size_t bn_workspace(const cge_kernel_ctx *ctx)
{
    bn_args p;
    if (!cge_attrs_get_int(ctx->attrs, "training_mode", 0) || !bn_args_make(ctx, &p) || p.C < 0)
        return 0;
    return sizeof(double) * (size_t)(2 * p.C);
}

static cge_status bn_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    bn_args p;
    if (!bn_args_make(ctx, &p))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "needs five inputs and X of rank >= 2");
    const cge_tensor *X = &ctx->inputs[0];
    if (!is_float(p.tx) || !is_float(p.tp) || !is_float(p.tm) || ctx->outputs[0].dtype != p.tx)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "unsupported dtypes");
    for (int32_t i = 1; i < 5; i++)
        if (cge_shape_numel(&ctx->inputs[i].shape) != p.C)
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "input %d must have C elements", i);
    if (!cge_shape_equal(&X->shape, &ctx->outputs[0].shape))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "Y must have X's shape");
    p.x = X->data;
    p.scale = ctx->inputs[1].data;
    p.bias = ctx->inputs[2].data;
    p.mean = ctx->inputs[3].data;
    p.var = ctx->inputs[4].data;
    p.y = ctx->outputs[0].data;
    p.eps = cge_attrs_get_float(ctx->attrs, "epsilon", 1e-5f);
    p.momentum = cge_attrs_get_float(ctx->attrs, "momentum", 0.9f);
    int training = cge_attrs_get_int(ctx->attrs, "training_mode", 0) != 0;
    if (training) {
        if (ctx->num_outputs > 1)
            p.run_mean = ctx->outputs[1].data;
        if (ctx->num_outputs > 2)
            p.run_var = ctx->outputs[2].data;
    }
    int64_t total = p.N * p.C * p.S;
    if (p.C == 0 || (total == 0 && !training))
        return CGE_OK;
    if (training) {
        if (p.N * p.S == 0)
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "training_mode needs a non-empty batch");
        if (!ctx->workspace || ctx->workspace_size < bn_workspace(ctx))
            return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                    "training_mode needs its workspace");
        p.stats = ctx->workspace;
        cge_status st = cge_launch(stream, bn_stats_fn,
                                   cge__blocks_for(p.C, 1 + 16384 / (p.N * p.S), ctx->num_threads),
                                   &p, sizeof p);
        if (st != CGE_OK)
            return st;
    }
    return cge_launch(stream, bn_fn,
                      cge__blocks_for(p.N * p.C, p.S >= 16384 ? 1 : 16384 / (p.S ? p.S : 1),
                                     ctx->num_threads),
                      &p, sizeof p);
}

/* ---- InstanceNormalization ----------------------------------------------------- */

typedef struct in_args {
    cge_dtype t;
    const void *x, *scale, *bias;
    void *y;
    double eps;
    int64_t NC, C, S;
} in_args;

static cge_status in_infer(cge_infer_ctx *ctx)
{
    if (ctx->num_inputs < 3 || ctx->num_outputs < 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "needs inputs input, scale, B");
    const cge_tensor_desc *X = &ctx->inputs[0];
    if (X->shape.rank < 3)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "input must have rank >= 3 ([N, C, D1, ...])");
    for (int32_t i = 1; i < 3; i++) {
        if (ctx->inputs[i].dtype != X->dtype)
            return cge_meta_error(ctx, CGE_ERR_DTYPE, "input %d must be %s", i,
                                  cge_dtype_name(X->dtype));
        if (!channel_vec(&ctx->inputs[i], X->shape.dims[1]))
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "input %d must be a vector of length C", i);
    }
    ctx->outputs[0].dtype = X->dtype;
    ctx->outputs[0].shape = X->shape;
    return CGE_OK;
}

/* float32 rows: one pass for the statistics, one for normalise + affine,
 * both vectorised. The sums are of x - x[0] (shifted data: no cancellation
 * when the mean is far from 0), 16 float lanes per 256-element chunk, the
 * chunks added in double. Rounds differently from the double loops (within
 * float32 rounding of the result). */
#define IN_LANES 16
/* The statistics of one row: the shift k = x[0], the mean of x - k and the
 * variance. in_row_f32 and the channels-last GroupNorm (which gathers its
 * group into one such row first) share it, so their factors agree bit for
 * bit. */
static inline __attribute__((always_inline)) void in_stats_f32(const float *x, int64_t S,
                                                               float *kp, double *dmp,
                                                               double *varp)
{
    float k = x[0];
    double s = 0.0, q = 0.0;
    for (int64_t i = 0; i < S; i += CH) {
        int64_t w = S - i < CH ? S - i : CH, j = 0;
        float ps[IN_LANES] = {0}, pq[IN_LANES] = {0};
        const float *xi = x + i;
        for (; j + IN_LANES <= w; j += IN_LANES)
            for (int l = 0; l < IN_LANES; l++) {
                float d = xi[j + l] - k;
                ps[l] += d;
                pq[l] += d * d;
            }
        for (; j < w; j++) {
            float d = xi[j] - k;
            ps[0] += d;
            pq[0] += d * d;
        }
        for (int l = 0; l < IN_LANES; l++) {
            s += ps[l];
            q += pq[l];
        }
    }
    double dm = s / (double)S, var = q / (double)S - dm * dm;
    *kp = k;
    *dmp = dm;
    *varp = var < 0.0 ? 0.0 : var;
}

/* y = x * af + bf with af, bf the row's factors (float, as in_row_f32's). */
static inline __attribute__((always_inline)) void in_factors_f32(float k, double dm, double var,
                                                                 double scale, double bias,
                                                                 double eps, float *af, float *bf)
{
    double a = scale / sqrt(var + eps);
    *af = (float)a;
    *bf = (float)(bias - ((double)k + dm) * a);
}

CGE_TARGET_CLONES static void in_row_f32(const float *x, float *y, int64_t S, double scale,
                                         double bias, double eps)
{
    float k, af, bf;
    double dm, var;
    in_stats_f32(x, S, &k, &dm, &var);
    in_factors_f32(k, dm, var, scale, bias, eps, &af, &bf);
    for (int64_t j = 0; j < S; j++)
        y[j] = x[j] * af + bf;
}

static void in_fn(int64_t blk, int64_t nblk, void *args)
{
    const in_args *p = args;
    int64_t r0, r1;
    cge__block_range(p->NC, blk, nblk, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        if (p->t == CGE_F32) {
            int64_t c = r % p->C;
            in_row_f32((const float *)p->x + r * p->S, (float *)p->y + r * p->S, p->S,
                       ((const float *)p->scale)[c], ((const float *)p->bias)[c], p->eps);
            continue;
        }
        int64_t c = r % p->C;
        double m, v;
        moments(p->t, p->x, r * p->S, p->S, &m, &v);
        double a = ld1(p->t, p->scale, c) / sqrt(v + p->eps);
        affine(p->t, p->x, p->y, r * p->S, p->S, a, ld1(p->t, p->bias, c) - m * a);
    }
}

/* X, scale, bias, Y and epsilon of InstanceNormalization and
 * GroupNormalization; false unless all four tensors share one float dtype. */
static bool norm_args(const cge_kernel_ctx *ctx, in_args *p)
{
    const cge_tensor *X = &ctx->inputs[0];
    *p = (in_args){.t = X->dtype, .x = X->data, .scale = ctx->inputs[1].data,
                   .bias = ctx->inputs[2].data, .y = ctx->outputs[0].data,
                   .eps = cge_attrs_get_float(ctx->attrs, "epsilon", 1e-5f)};
    return is_float(p->t) && ctx->inputs[1].dtype == p->t && ctx->inputs[2].dtype == p->t &&
           ctx->outputs[0].dtype == p->t;
}

static cge_status in_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_inputs < 3 || ctx->num_outputs < 1 || ctx->inputs[0].shape.rank < 3)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "needs input, scale, B (rank >= 3)");
    const cge_tensor *X = &ctx->inputs[0];
    in_args p;
    if (!norm_args(ctx, &p))
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "unsupported dtypes");
    p.C = X->shape.dims[1];
    p.NC = X->shape.dims[0] * p.C;
    p.S = 1;
    for (int32_t i = 2; i < X->shape.rank; i++)
        p.S *= X->shape.dims[i];
    if (cge_shape_numel(&ctx->inputs[1].shape) != p.C ||
        cge_shape_numel(&ctx->inputs[2].shape) != p.C ||
        !cge_shape_equal(&X->shape, &ctx->outputs[0].shape))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "scale and B need C elements, Y X's shape");
    if (p.NC == 0 || p.S == 0)
        return CGE_OK;
    return cge_launch(stream, in_fn,
                      cge__blocks_for(p.NC, p.S >= 8192 ? 1 : 8192 / p.S, ctx->num_threads), &p,
                      sizeof p);
}

/* ---- GroupNormalization ---------------------------------------------------------- */

/* Opset 18: the C channels form num_groups groups of consecutive channels;
 * each (n, group) is normalised over its channels and spatial positions, then
 * scaled and shifted by that group's scale and bias (18's are [num_groups];
 * 21 made them per channel). Each (n, group) is one contiguous row, so it is
 * InstanceNormalization's loop with groups for channels. */
static cge_status gn_infer(cge_infer_ctx *ctx)
{
    if (ctx->num_inputs < 3 || ctx->num_outputs < 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "needs inputs X, scale, bias");
    const cge_tensor_desc *X = &ctx->inputs[0];
    int64_t G = cge_attrs_get_int(ctx->attrs, "num_groups", 0);
    if (X->shape.rank < 2)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "X must have rank >= 2 ([N, C, D1, ...])");
    int64_t C = X->shape.dims[1];
    if (G < 1 || (C >= 0 && C % G != 0))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "num_groups %lld must be >= 1 and divide the %lld channels",
                              (long long)G, (long long)C);
    for (int32_t i = 1; i < 3; i++) {
        if (ctx->inputs[i].dtype != X->dtype)
            return cge_meta_error(ctx, CGE_ERR_DTYPE, "input %d must be %s", i,
                                  cge_dtype_name(X->dtype));
        if (!channel_vec(&ctx->inputs[i], G))
            return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                  "input %d must be a vector of num_groups (%lld) elements", i,
                                  (long long)G);
    }
    ctx->outputs[0].dtype = X->dtype;
    ctx->outputs[0].shape = X->shape;
    return CGE_OK;
}

static cge_status gn_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_inputs < 3 || ctx->num_outputs < 1 || ctx->inputs[0].shape.rank < 2)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "needs X (rank >= 2), scale, bias");
    const cge_tensor *X = &ctx->inputs[0];
    in_args p;
    if (!norm_args(ctx, &p))
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "unsupported dtypes");
    int64_t G = cge_attrs_get_int(ctx->attrs, "num_groups", 0), C = X->shape.dims[1];
    if (G < 1 || C % G != 0)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                "num_groups %lld must be >= 1 and divide the %lld channels",
                                (long long)G, (long long)C);
    p.C = G;
    p.NC = X->shape.dims[0] * G;
    p.S = C / G;
    for (int32_t i = 2; i < X->shape.rank; i++)
        p.S *= X->shape.dims[i];
    if (cge_shape_numel(&ctx->inputs[1].shape) != G ||
        cge_shape_numel(&ctx->inputs[2].shape) != G ||
        !cge_shape_equal(&X->shape, &ctx->outputs[0].shape))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE,
                                "scale and bias need num_groups elements, Y X's shape");
    if (p.NC == 0 || p.S == 0)
        return CGE_OK;
    return cge_launch(stream, in_fn,
                      cge__blocks_for(p.NC, p.S >= 8192 ? 1 : 8192 / p.S, ctx->num_threads), &p,
                      sizeof p);
}

/* ---- ChannelsLastGroupNorm (norm_nhwc.h) -------------------------------------- */

/* Two steps. First, per (image, group), the group is gathered from the NHWC
 * data into one row of the plain layout's order (channel by channel,
 * positions in order; tiles of positions, so that the lines read stay in L1
 * across the group's channels), so that in_stats_f32 adds the same numbers in
 * the same order as InstanceNormalization's kernel on the plain tensor; the
 * row is in a per-block workspace (C/G * positions floats) and only the
 * group's factors af, bf are kept, spread to its channels. Second, over all
 * positions, y = x * af[c] + bf[c] along each contiguous channel vector: the
 * plain kernel's expression per element, so the same bits; then, where the
 * layout pass folded them in, ChannelsLastAffine's per-channel A, B (its
 * expression) and a Relu or exact GELU (the unfused kernels' rows), so the
 * epilogue changes no bits either. */

typedef struct gnl_args {
    const float *x, *scale, *bias;
    float *y, *ws, *fa, *fb; /* rows' workspace; per (image, channel) factors */
    const double *ea, *eb;   /* the epilogue's affine [C], or NULL */
    int act;                 /* 0 none, 1 relu, 2 exact gelu */
    double eps;
    int64_t NG, G, C, Cg, P; /* rows, groups, channels, channels per group, positions */
    bool simd;               /* the gather by AVX-512 tiles (transpose_tile.h) */
} gnl_args;

static cge_status gnl_shapes(const cge_shape *x, const cge_shape *sc, const cge_shape *bi,
                             int64_t *G)
{
    if (x->rank < 3)
        return CGE_ERR_SHAPE;
    *G = cge_shape_numel(sc);
    if (sc->rank != 1 || bi->rank != 1 || *G < 1 || cge_shape_numel(bi) != *G ||
        (x->dims[1] >= 0 && x->dims[1] % *G != 0))
        return CGE_ERR_SHAPE;
    return CGE_OK;
}

static bool gnl_epilogue_ok(int32_t ni, const cge_dtype *dt, const cge_shape *const *sh, int64_t C);
static int gnl_act(const cge_attrs *a);

cge_status cge__group_norm_nhwc_infer(cge_infer_ctx *ctx)
{
    if ((ctx->num_inputs != 3 && ctx->num_inputs != 5) || ctx->num_outputs != 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "needs X, scale, bias (and A, B), and one output");
    const cge_tensor_desc *x = &ctx->inputs[0];
    int64_t G;
    if (x->dtype != CGE_F32 || ctx->inputs[1].dtype != CGE_F32 || ctx->inputs[2].dtype != CGE_F32)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "X, scale and bias must be float32");
    if (gnl_shapes(&x->shape, &ctx->inputs[1].shape, &ctx->inputs[2].shape, &G))
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "X needs rank >= 3, scale and bias [G] with G dividing C");
    cge_dtype dt[5];
    const cge_shape *sh[5];
    for (int32_t k = 0; k < ctx->num_inputs; k++) {
        dt[k] = ctx->inputs[k].dtype;
        sh[k] = &ctx->inputs[k].shape;
    }
    if (!gnl_epilogue_ok(ctx->num_inputs, dt, sh, x->shape.dims[1]))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "A and B must be float64 [C]");
    if (gnl_act(ctx->attrs) < 0)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "activation must be none, relu or gelu");
    ctx->outputs[0].dtype = CGE_F32;
    ctx->outputs[0].shape = x->shape;
    return CGE_OK;
}

/* One block per core at most in the first step: each holds one group's row. */
static int64_t gnl_blocks(const cge_kernel_ctx *ctx, int64_t NG)
{
    int64_t t = ctx->num_threads > 0 ? ctx->num_threads : 1;
    return NG < t ? NG : t;
}

static int64_t gnl_positions(const cge_shape *x)
{
    int64_t s = 1;
    for (int32_t i = 2; i < x->rank; i++)
        s *= x->dims[i];
    return s;
}

/* Floats: the factors (2 * N * C), then one row (C/G * positions) per block. */
static int64_t gnl_floats(const cge_kernel_ctx *ctx, const cge_shape *x, int64_t G, int64_t *nb)
{
    int64_t NG = x->dims[0] * G;
    *nb = NG > 0 ? gnl_blocks(ctx, NG) : 0;
    return 2 * x->dims[0] * x->dims[1] + *nb * (x->dims[1] / G) * gnl_positions(x);
}

size_t cge__group_norm_nhwc_workspace(const cge_kernel_ctx *ctx)
{
    int64_t G, nb;
    if (ctx->num_inputs < 3 || gnl_shapes(&ctx->inputs[0].shape, &ctx->inputs[1].shape,
                                           &ctx->inputs[2].shape, &G))
        return 0;
    return (size_t)gnl_floats(ctx, &ctx->inputs[0].shape, G, &nb) * sizeof(float);
}

#define GNL_TILE 64 /* positions per gather tile */

CGE_TARGET_CLONES static void gnl_group(const gnl_args *p, int64_t r, float *ws)
{
    int64_t n = r / p->G, g = r % p->G, Cg = p->Cg, P = p->P, C = p->C;
    const float *x = p->x + n * P * C + g * Cg;
#if CGE_TRANSPOSE_TILE_X86
    if (p->simd) {
        /* tiles of 16 positions x 16 channels transposed in registers */
        for (int64_t p0 = 0; p0 < P; p0 += 16)
            for (int64_t j0 = 0; j0 < Cg; j0 += 16)
                cge__tr_tile32_avx512(x + p0 * C + j0, C, ws + j0 * P + p0, P,
                                      (int)(P - p0 < 16 ? P - p0 : 16),
                                      (int)(Cg - j0 < 16 ? Cg - j0 : 16));
    }
#endif
    for (int64_t p0 = 0; !p->simd && p0 < P; p0 += GNL_TILE) {
        int64_t pe = P - p0 < GNL_TILE ? P - p0 : GNL_TILE;
        for (int64_t j = 0; j < Cg; j++) {
            const float *xj = x + p0 * C + j;
            float *wj = ws + j * P + p0;
            for (int64_t q = 0; q < pe; q++)
                wj[q] = xj[q * C];
        }
    }
    float k, af, bf;
    double dm, var;
    in_stats_f32(ws, Cg * P, &k, &dm, &var);
    in_factors_f32(k, dm, var, p->scale[g], p->bias[g], p->eps, &af, &bf);
    for (int64_t j = 0; j < Cg; j++) {
        p->fa[n * C + g * Cg + j] = af;
        p->fb[n * C + g * Cg + j] = bf;
    }
}

#define GNL_CV 32 /* channels per column block when a group is one channel */

/* A group of one channel (InstanceNormalization on channels-last data) is a
 * column of the NHWC data, one float per position C floats apart: gathering
 * it would read a cache line per float, once per channel. Here GNL_CV
 * adjacent channels' statistics are taken together, row by row, so the data
 * is read once. Per channel they are in_stats_f32's to the bit: in each chunk
 * of CH positions, position j goes to lane j % IN_LANES (the chunk's tail,
 * past its last whole vector of lanes, to lane 0), the same float adds in the
 * same order per lane, then the lanes added to the double sums in lane order
 * at the chunk's end. */
CGE_TARGET_CLONES static void gnl_channels(const gnl_args *p, int64_t n, int64_t c0, int64_t nc)
{
    int64_t P = p->P, C = p->C;
    const float *x = p->x + n * P * C + c0;
    float k[GNL_CV];
    double s[GNL_CV], q[GNL_CV];
    for (int64_t c = 0; c < nc; c++) {
        k[c] = x[c];
        s[c] = q[c] = 0.0;
    }
    for (int64_t i = 0; i < P; i += CH) {
        int64_t w = P - i < CH ? P - i : CH, whole = w / IN_LANES * IN_LANES;
        float ps[IN_LANES][GNL_CV], pq[IN_LANES][GNL_CV];
        memset(ps, 0, sizeof ps);
        memset(pq, 0, sizeof pq);
        for (int64_t j = 0; j < w; j++) {
            int l = j < whole ? (int)(j % IN_LANES) : 0;
            const float *xr = x + (i + j) * C;
            for (int64_t c = 0; c < nc; c++) {
                float d = xr[c] - k[c];
                ps[l][c] += d;
                pq[l][c] += d * d;
            }
        }
        for (int l = 0; l < IN_LANES; l++)
            for (int64_t c = 0; c < nc; c++) {
                s[c] += ps[l][c];
                q[c] += pq[l][c];
            }
    }
    for (int64_t c = 0; c < nc; c++) {
        double dm = s[c] / (double)P, var = q[c] / (double)P - dm * dm;
        float af, bf;
        in_factors_f32(k[c], dm, var < 0.0 ? 0.0 : var, p->scale[c0 + c], p->bias[c0 + c],
                       p->eps, &af, &bf);
        p->fa[n * C + c0 + c] = af;
        p->fb[n * C + c0 + c] = bf;
    }
}

/* Rows of the first step: groups, or column blocks of GNL_CV channels when a
 * group is one channel. */
static int64_t gnl_stat_rows(const gnl_args *p)
{
    return p->Cg == 1 ? p->NG / p->G * ((p->C + GNL_CV - 1) / GNL_CV) : p->NG;
}

static void gnl_stats_fn(int64_t blk, int64_t nblk, void *args)
{
    const gnl_args *p = args;
    int64_t r0, r1;
    cge__block_range(gnl_stat_rows(p), blk, nblk, &r0, &r1);
    int64_t cols = (p->C + GNL_CV - 1) / GNL_CV;
    for (int64_t r = r0; r < r1; r++) {
        if (p->Cg == 1) {
            int64_t c0 = r % cols * GNL_CV;
            gnl_channels(p, r / cols, c0, p->C - c0 < GNL_CV ? p->C - c0 : GNL_CV);
        } else {
            gnl_group(p, r, p->ws + blk * p->Cg * p->P);
        }
    }
}

CGE_TARGET_CLONES static void gnl_apply_row(float *restrict y, const float *restrict x,
                                            const float *restrict fa, const float *restrict fb,
                                            const double *restrict ea, const double *restrict eb,
                                            int act, int64_t C)
{
    for (int64_t c = 0; c < C; c++)
        y[c] = x[c] * fa[c] + fb[c];
    if (ea)
        for (int64_t c = 0; c < C; c++)
            y[c] = (float)((double)y[c] * ea[c] + eb[c]);
    if (act == 1)
        for (int64_t c = 0; c < C; c++)
            y[c] = y[c] < 0.0f ? 0.0f : y[c];
    else if (act == 2)
        cge__gelu_f32_row(y, y, C);
}

static void gnl_apply_fn(int64_t blk, int64_t nblk, void *args)
{
    const gnl_args *p = args;
    int64_t r0, r1;
    cge__block_range(p->NG / p->G * p->P, blk, nblk, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t n = r / p->P;
        gnl_apply_row(p->y + r * p->C, p->x + r * p->C, p->fa + n * p->C, p->fb + n * p->C,
                      p->ea, p->eb, p->act, p->C);
    }
}

/* The epilogue's A and B: float64 [C] both, or both absent. */
static bool gnl_epilogue_ok(int32_t ni, const cge_dtype *dt, const cge_shape *const *sh, int64_t C)
{
    if (ni <= 3 || (ni == 5 && dt[3] == CGE_DTYPE_UNDEFINED && dt[4] == CGE_DTYPE_UNDEFINED))
        return true;
    if (ni != 5)
        return false;
    for (int32_t k = 3; k < 5; k++)
        if (dt[k] != CGE_F64 || sh[k]->rank != 1 || (C >= 0 && sh[k]->dims[0] != C))
            return false;
    return true;
}

static int gnl_act(const cge_attrs *a)
{
    const char *s = cge_attrs_get_string(a, "activation", "none");
    return !strcmp(s, "none") ? 0 : !strcmp(s, "relu") ? 1 : !strcmp(s, "gelu") ? 2 : -1;
}

cge_status cge__group_norm_nhwc_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if ((ctx->num_inputs != 3 && ctx->num_inputs != 5) || ctx->num_outputs != 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                "needs X, scale, bias (and A, B), and one output");
    const cge_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    int64_t G, nb;
    if (x->dtype != CGE_F32 || y->dtype != CGE_F32 || ctx->inputs[1].dtype != CGE_F32 ||
        ctx->inputs[2].dtype != CGE_F32 ||
        gnl_shapes(&x->shape, &ctx->inputs[1].shape, &ctx->inputs[2].shape, &G) ||
        !cge_shape_equal(&x->shape, &y->shape))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "X, scale, bias and Y do not agree");
    cge_dtype dt[5];
    const cge_shape *sh[5];
    for (int32_t k = 0; k < ctx->num_inputs; k++) {
        dt[k] = ctx->inputs[k].dtype;
        sh[k] = &ctx->inputs[k].shape;
    }
    int act = gnl_act(ctx->attrs);
    if (!gnl_epilogue_ok(ctx->num_inputs, dt, sh, x->shape.dims[1]) || act < 0)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                "A and B must be float64 [C]; activation none, relu or gelu");
    if (cge_shape_numel(&x->shape) == 0)
        return CGE_OK;
    int64_t N = x->shape.dims[0], C = x->shape.dims[1], row = C / G * gnl_positions(&x->shape);
    gnl_floats(ctx, &x->shape, G, &nb);
    /* as many rows as the workspace holds (it was sized for the pool the plan
     * was made with) */
    int64_t fit = ((int64_t)(ctx->workspace_size / sizeof(float)) - 2 * N * C) / row;
    nb = nb < fit ? nb : fit;
    float *w = ctx->workspace;
    if (!x->data || !y->data || !ctx->inputs[1].data || !ctx->inputs[2].data || !w || nb < 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing buffer or workspace");
    bool epi = ctx->num_inputs == 5 && dt[3] != CGE_DTYPE_UNDEFINED;
    const double *ea = epi ? ctx->inputs[3].data : NULL, *eb = epi ? ctx->inputs[4].data : NULL;
    if (epi && (!ea || !eb))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing buffer");
    gnl_args a = {x->data, ctx->inputs[1].data, ctx->inputs[2].data, y->data,
                  w + 2 * N * C, w, w + N * C, ea, eb, act,
                  cge_attrs_get_float(ctx->attrs, "epsilon", 1e-5f), N * G, G, C, C / G,
                  gnl_positions(&x->shape),
                  CGE_TRANSPOSE_TILE_X86 && cge__cpu_has(CGE_CPU_AVX512F)};
    if (a.Cg == 1)   /* column blocks need no row of workspace: as many as the pool */
        nb = cge__blocks_for(gnl_stat_rows(&a), 1, ctx->num_threads);
    cge_status st = cge_launch(stream, gnl_stats_fn, nb, &a, sizeof a);
    if (st)
        return st;
    return cge_launch(stream, gnl_apply_fn,
                      cge__blocks_for(N * a.P, C >= 16384 ? 1 : 16384 / C, ctx->num_threads), &a,
                      sizeof a);
}

/* ---- LayerNormalization --------------------------------------------------------- */

typedef struct ln_args {
    cge_dtype t;
    const void *x, *scale, *bias;
    void *y;
    float *mean, *inv;
    int scale_bcast, bias_bcast;   /* one element for the whole row */
    double eps;
    int64_t rows, D;
} ln_args;

/* Scale/B must broadcast to X.shape[axis:]; this kernel takes exactly that
 * many elements (leading 1s allowed) or a single one. */
static bool ln_param_ok(const cge_shape *ps, const cge_shape *xs, int32_t axis)
{
    int64_t n = cge_shape_numel(ps);
    if (n == 1)
        return true;
    int32_t nd = xs->rank - axis;
    if (ps->rank > xs->rank)
        return false;
    for (int32_t i = 0; i < ps->rank; i++) {
        int32_t xi = xs->rank - ps->rank + i;
        int64_t pd = ps->dims[i];
        if (xi < axis) {
            if (pd != 1)
                return false;
        } else if (pd >= 0 && xs->dims[xi] >= 0 && pd != xs->dims[xi]) {
            return false;
        }
    }
    /* fewer trailing dims than the normalised shape: only if they are all that
     * is not 1 in it */
    for (int32_t i = axis; i < xs->rank - ps->rank && i < xs->rank; i++)
        if (xs->dims[i] != 1)
            return false;
    (void)nd;
    return true;
}

static cge_status ln_infer(cge_infer_ctx *ctx)
{
    if (ctx->num_inputs < 2 || ctx->num_outputs < 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "needs inputs X, Scale");
    const cge_tensor_desc *X = &ctx->inputs[0];
    int32_t axis;
    if (X->shape.rank < 1 ||
        !cge_axis_normalize(cge_attrs_get_int(ctx->attrs, "axis", -1), X->shape.rank, false,
                            &axis))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "axis is out of range for a rank-%d X",
                              (int)X->shape.rank);
    if (cge_attrs_get_int(ctx->attrs, "stash_type", 1) != 1)
        return cge_meta_error(ctx, CGE_ERR_UNSUPPORTED,
                              "stash_type must be 1 (float32 statistics)");
    for (int32_t i = 1; i < 3; i++) {
        if (!cge__meta_has_input(ctx, i))
            continue;
        char s[CGE_SHAPE_STR_MAX];
        if (ctx->inputs[i].dtype != X->dtype)
            return cge_meta_error(ctx, CGE_ERR_DTYPE, "input %d must be %s", i,
                                  cge_dtype_name(X->dtype));
        if (!ln_param_ok(&ctx->inputs[i].shape, &X->shape, axis))
            return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                  "input %d %s must have the normalised shape X.shape[%d:] "
                                  "(or one element)",
                                  i, cge_shape_str(&ctx->inputs[i].shape, s, sizeof s),
                                  (int)axis);
    }
    ctx->outputs[0].dtype = X->dtype;
    ctx->outputs[0].shape = X->shape;
    for (int32_t i = 1; i < ctx->num_outputs && i < 3; i++) {
        ctx->outputs[i].dtype = CGE_F32;
        ctx->outputs[i].shape = X->shape;
        for (int32_t d = axis; d < X->shape.rank; d++)
            ctx->outputs[i].shape.dims[d] = 1;
    }
    return CGE_OK;
}

/* LayerNorm's float32 rows: 16-lane float vectors (GCC's vector extension:
 * each target clone makes them its widest registers), summed per 256-element
 * chunk and the chunks added in double, as the statistics of
 * InstanceNormalization (in_stats_f32). Vectors never cross a call (their
 * ABI is the clone's): loads and sums are macros. */
typedef float ln_v16 __attribute__((vector_size(64)));
typedef float ln_v16u __attribute__((vector_size(64), aligned(4), may_alias));
#define LN_LD(p) (*(const ln_v16u *)(const void *)(p))
#define LN_HSUM(v, out)                            \
    do {                                           \
        float t_[16];                              \
        memcpy(t_, &(v), sizeof t_);               \
        double s_ = 0.0;                           \
        for (int l_ = 0; l_ < 16; l_++)            \
            s_ += t_[l_];                          \
        (out) = s_;                                \
    } while (0)

/* One float32 row with per-element Scale (and B, or none): the common
 * LayerNorm. Two passes for the statistics (the mean, then the squared
 * deviations from it: no cancellation when the mean is far from 0), one for
 * normalise + affine. The double loops this replaced cost 0.65 ns per
 * element (one thread: 27 us for an encoder's [128, 256]); it rounds
 * differently from them, within float32 rounding of the result. */
static inline __attribute__((always_inline)) void ln_row_impl(const float *x, float *y, int64_t D,
                                                              const float *sc, const float *bi,
                                                              double eps, float *mean_out,
                                                              float *inv_out)
{
    double sum = 0.0, sq = 0.0;
    for (int64_t i = 0; i < D; i += CH) {
        int64_t w = D - i < CH ? D - i : CH, j = 0;
        ln_v16 acc = {0};
        for (; j + 16 <= w; j += 16)
            acc += LN_LD(x + i + j);
        double c;
        LN_HSUM(acc, c);
        for (; j < w; j++)
            c += (double)x[i + j];
        sum += c;
    }
    double m = D > 0 ? sum / (double)D : 0.0;
    float mf = (float)m;
    for (int64_t i = 0; i < D; i += CH) {
        int64_t w = D - i < CH ? D - i : CH, j = 0;
        ln_v16 acc = {0}, mv = {mf, mf, mf, mf, mf, mf, mf, mf, mf, mf, mf, mf, mf, mf, mf, mf};
        for (; j + 16 <= w; j += 16) {
            ln_v16 d = LN_LD(x + i + j) - mv;
            acc += d * d;
        }
        double c;
        LN_HSUM(acc, c);
        for (; j < w; j++) {
            double d = (double)x[i + j] - m;
            c += d * d;
        }
        sq += c;
    }
    double v = D > 0 ? sq / (double)D : 0.0;
    float inv = (float)(1.0 / sqrt((double)(float)v + eps));
    if (mean_out)
        *mean_out = mf;
    if (inv_out)
        *inv_out = inv;
    if (bi)
        for (int64_t i = 0; i < D; i++)
            y[i] = (x[i] - mf) * inv * sc[i] + bi[i];
    else
        for (int64_t i = 0; i < D; i++)
            y[i] = (x[i] - mf) * inv * sc[i];
}

/* ln_row_impl compiled for AVX-512 (what the AVX-512 clone of the former
 * target_clones function made: the same bits) and for the baseline; the
 * AVX2 + FMA row below rounds its own way. Picked per row by cge__cpu_has, so
 * CGE_CPU_ISA selects each on any machine. */
static void ln_row_generic_f32(const float *x, float *y, int64_t D, const float *sc,
                               const float *bi, double eps, float *mean_out, float *inv_out)
{
    ln_row_impl(x, y, D, sc, bi, eps, mean_out, inv_out);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define LN_X86 1

__attribute__((target("avx512f"))) static void ln_row_avx512_f32(const float *x, float *y,
                                                                 int64_t D, const float *sc,
                                                                 const float *bi, double eps,
                                                                 float *mean_out, float *inv_out)
{
    ln_row_impl(x, y, D, sc, bi, eps, mean_out, inv_out);
}

#define LN_AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

/* Lanes [0, k) of 8 set (k in 0..8). */
LN_AVX2_INLINE __m256i ln_mask8(int64_t k)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The 8 lanes of v added in double. */
LN_AVX2_INLINE double ln_hsum8(__m256 v)
{
    __m256d s = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)),
                              _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

/* ln_row_impl's statistics and affine on AVX2 with multiply-adds fused:
 * float lanes per 256-element chunk, chunks added in double; the tail
 * through masked loads and stores. Within float32 rounding of the other
 * rows, not their bits (SkipLayerNorm uses this row too, so it still equals
 * Add + LayerNormalization on this path). */
__attribute__((target("avx2,fma"))) static void ln_row_avx2_f32(const float *x, float *y,
                                                                int64_t D, const float *sc,
                                                                const float *bi, double eps,
                                                                float *mean_out, float *inv_out)
{
    double sum = 0.0, sq = 0.0;
    for (int64_t i = 0; i < D; i += CH) {
        int64_t w = D - i < CH ? D - i : CH, j = 0;
        const float *xc = x + i;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0;
        for (; j + 16 <= w; j += 16) {
            a0 = _mm256_add_ps(a0, _mm256_loadu_ps(xc + j));
            a1 = _mm256_add_ps(a1, _mm256_loadu_ps(xc + j + 8));
        }
        for (; j + 8 <= w; j += 8)
            a0 = _mm256_add_ps(a0, _mm256_loadu_ps(xc + j));
        if (j < w)
            a1 = _mm256_add_ps(a1, _mm256_maskload_ps(xc + j, ln_mask8(w - j)));
        sum += ln_hsum8(_mm256_add_ps(a0, a1));
    }
    double m = D > 0 ? sum / (double)D : 0.0;
    float mf = (float)m;
    const __m256 mv = _mm256_set1_ps(mf);
    for (int64_t i = 0; i < D; i += CH) {
        int64_t w = D - i < CH ? D - i : CH, j = 0;
        const float *xc = x + i;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0;
        for (; j + 16 <= w; j += 16) {
            __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(xc + j), mv);
            __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(xc + j + 8), mv);
            a0 = _mm256_fmadd_ps(d0, d0, a0);
            a1 = _mm256_fmadd_ps(d1, d1, a1);
        }
        for (; j + 8 <= w; j += 8) {
            __m256 d = _mm256_sub_ps(_mm256_loadu_ps(xc + j), mv);
            a0 = _mm256_fmadd_ps(d, d, a0);
        }
        if (j < w) {
            __m256i k = ln_mask8(w - j);
            __m256 d = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(xc + j, k), mv),
                                     _mm256_castsi256_ps(k));
            a1 = _mm256_fmadd_ps(d, d, a1);
        }
        sq += ln_hsum8(_mm256_add_ps(a0, a1));
    }
    double v = D > 0 ? sq / (double)D : 0.0;
    float inv = (float)(1.0 / sqrt((double)(float)v + eps));
    if (mean_out)
        *mean_out = mf;
    if (inv_out)
        *inv_out = inv;
    const __m256 iv = _mm256_set1_ps(inv);
    int64_t i = 0;
    for (; i + 8 <= D; i += 8) {
        __m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv), iv);
        __m256 r = bi ? _mm256_fmadd_ps(t, _mm256_loadu_ps(sc + i), _mm256_loadu_ps(bi + i))
                      : _mm256_mul_ps(t, _mm256_loadu_ps(sc + i));
        _mm256_storeu_ps(y + i, r);
    }
    if (i < D) {
        __m256i k = ln_mask8(D - i);
        __m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, k), mv), iv);
        __m256 r = bi ? _mm256_fmadd_ps(t, _mm256_maskload_ps(sc + i, k), _mm256_maskload_ps(bi + i, k))
                      : _mm256_mul_ps(t, _mm256_maskload_ps(sc + i, k));
        _mm256_maskstore_ps(y + i, k, r);
    }
}
#endif

/* One float32 LayerNorm row, on the widest path this CPU (or its
 * CGE_CPU_ISA cap) allows. */
static void ln_row_f32(const float *x, float *y, int64_t D, const float *sc, const float *bi,
                       double eps, float *mean_out, float *inv_out)
{
#ifdef LN_X86
    if (cge__cpu_has(CGE_CPU_AVX512F)) {
        ln_row_avx512_f32(x, y, D, sc, bi, eps, mean_out, inv_out);
        return;
    }
    if (cge__cpu_has(CGE_CPU_AVX2 | CGE_CPU_FMA)) {
        ln_row_avx2_f32(x, y, D, sc, bi, eps, mean_out, inv_out);
        return;
    }
#endif
    ln_row_generic_f32(x, y, D, sc, bi, eps, mean_out, inv_out);
}

static void ln_fn(int64_t blk, int64_t nblk, void *args)
{
    const ln_args *p = args;
    int64_t r0, r1;
    cge__block_range(p->rows, blk, nblk, &r0, &r1);
    if (p->t == CGE_F32 && !p->scale_bcast && !(p->bias && p->bias_bcast)) {
        for (int64_t r = r0; r < r1; r++)
            ln_row_f32((const float *)p->x + r * p->D, (float *)p->y + r * p->D, p->D,
                       p->scale, p->bias, p->eps, p->mean ? p->mean + r : NULL,
                       p->inv ? p->inv + r : NULL);
        return;
    }
    double buf[CH], sc[CH], bi[CH];
    for (int64_t r = r0; r < r1; r++) {
        double m, v;
        moments(p->t, p->x, r * p->D, p->D, &m, &v);
        /* ONNX computes in the stash type (float32): round the statistics. */
        float inv = (float)(1.0 / sqrt((double)(float)v + p->eps));
        if (p->mean)
            p->mean[r] = (float)m;
        if (p->inv)
            p->inv[r] = inv;
        for (int64_t i = 0; i < p->D; i += CH) {
            int64_t w = p->D - i < CH ? p->D - i : CH;
            load_chunk(p->t, p->x, r * p->D + i, w, buf);
            if (p->scale_bcast) {
                double s = ld1(p->t, p->scale, 0);
                for (int64_t j = 0; j < w; j++)
                    sc[j] = s;
            } else {
                load_chunk(p->t, p->scale, i, w, sc);
            }
            if (!p->bias)
                for (int64_t j = 0; j < w; j++)
                    bi[j] = 0.0;
            else if (p->bias_bcast) {
                double b = ld1(p->t, p->bias, 0);
                for (int64_t j = 0; j < w; j++)
                    bi[j] = b;
            } else {
                load_chunk(p->t, p->bias, i, w, bi);
            }
            for (int64_t j = 0; j < w; j++)
                buf[j] = (buf[j] - m) * inv * sc[j] + bi[j];
            store_chunk(p->t, p->y, r * p->D + i, w, buf);
        }
    }
}

static cge_status ln_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_inputs < 2 || ctx->num_outputs < 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "needs inputs X, Scale");
    const cge_tensor *X = &ctx->inputs[0];
    const cge_tensor *B = ctx->num_inputs > 2 && ctx->inputs[2].dtype != CGE_DTYPE_UNDEFINED
                              ? &ctx->inputs[2]
                              : NULL;
    int32_t axis;
    if (X->shape.rank < 1 ||
        !cge_axis_normalize(cge_attrs_get_int(ctx->attrs, "axis", -1), X->shape.rank, false,
                            &axis))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "axis out of range");
    ln_args p = {.t = X->dtype, .x = X->data, .scale = ctx->inputs[1].data,
                 .bias = B ? B->data : NULL, .y = ctx->outputs[0].data,
                 .eps = cge_attrs_get_float(ctx->attrs, "epsilon", 1e-5f), .rows = 1, .D = 1};
    if (!is_float(p.t) || ctx->inputs[1].dtype != p.t || (B && B->dtype != p.t) ||
        ctx->outputs[0].dtype != p.t)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "unsupported dtypes");
    for (int32_t d = 0; d < X->shape.rank; d++)
        *(d < axis ? &p.rows : &p.D) *= X->shape.dims[d];
    int64_t ns = cge_shape_numel(&ctx->inputs[1].shape), nb = B ? cge_shape_numel(&B->shape) : 0;
    if ((ns != p.D && ns != 1) || (B && nb != p.D && nb != 1))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "Scale and B need the normalised size");
    p.scale_bcast = ns == 1 && p.D != 1;
    p.bias_bcast = nb == 1 && p.D != 1;
    for (int32_t i = 1; i < ctx->num_outputs && i < 3; i++) {
        if (!ctx->outputs[i].data)
            continue;
        if (ctx->outputs[i].dtype != CGE_F32 || cge_shape_numel(&ctx->outputs[i].shape) != p.rows)
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output %d must be float32 [rows]", i);
        *(i == 1 ? &p.mean : &p.inv) = ctx->outputs[i].data;
    }
    if (p.rows == 0)
        return CGE_OK;
    return cge_launch(stream, ln_fn,
                      cge__blocks_for(p.rows, p.D >= 8192 ? 1 : 8192 / (p.D ? p.D : 1),
                                     ctx->num_threads),
                      &p, sizeof p);
}

/* ---- LRN ---------------------------------------------------------------------------- */

typedef struct lrn_args {
    cge_dtype t;
    const void *x;
    void *y;
    double alpha, beta, bias;
    int64_t size, N, C, S;
} lrn_args;

static cge_status lrn_infer(cge_infer_ctx *ctx)
{
    if (ctx->num_inputs < 1 || ctx->num_outputs < 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "needs input X");
    const cge_tensor_desc *X = &ctx->inputs[0];
    if (X->shape.rank < 3)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "X must have rank >= 3 ([N, C, D1, ...])");
    if (cge_attrs_get_int(ctx->attrs, "size", 0) < 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "size must be >= 1");
    ctx->outputs[0].dtype = X->dtype;
    ctx->outputs[0].shape = X->shape;
    return CGE_OK;
}

/* Blocks over (n, c) planes, 256 positions at a time. */
static void lrn_fn(int64_t blk, int64_t nblk, void *args)
{
    const lrn_args *p = args;
    int64_t r0, r1;
    cge__block_range(p->N * p->C, blk, nblk, &r0, &r1);
    double buf[CH], sq[CH];
    int64_t lo = (p->size - 1) / 2, hi = p->size - 1 - lo;
    for (int64_t r = r0; r < r1; r++) {
        int64_t n = r / p->C, c = r % p->C;
        int64_t ca = c - lo < 0 ? 0 : c - lo, cb = c + hi >= p->C ? p->C - 1 : c + hi;
        for (int64_t i = 0; i < p->S; i += CH) {
            int64_t w = p->S - i < CH ? p->S - i : CH;
            for (int64_t j = 0; j < w; j++)
                sq[j] = 0.0;
            for (int64_t cc = ca; cc <= cb; cc++) {
                load_chunk(p->t, p->x, (n * p->C + cc) * p->S + i, w, buf);
                for (int64_t j = 0; j < w; j++)
                    sq[j] += buf[j] * buf[j];
            }
            load_chunk(p->t, p->x, r * p->S + i, w, buf);
            double k = p->alpha / (double)p->size;
            for (int64_t j = 0; j < w; j++)
                buf[j] = buf[j] / pow(p->bias + k * sq[j], p->beta);
            store_chunk(p->t, p->y, r * p->S + i, w, buf);
        }
    }
}

static cge_status lrn_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_inputs < 1 || ctx->num_outputs < 1 || ctx->inputs[0].shape.rank < 3)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "needs X of rank >= 3");
    const cge_tensor *X = &ctx->inputs[0];
    lrn_args p = {.t = X->dtype, .x = X->data, .y = ctx->outputs[0].data,
                  .alpha = cge_attrs_get_float(ctx->attrs, "alpha", 1e-4f),
                  .beta = cge_attrs_get_float(ctx->attrs, "beta", 0.75f),
                  .bias = cge_attrs_get_float(ctx->attrs, "bias", 1.0f),
                  .size = cge_attrs_get_int(ctx->attrs, "size", 0),
                  .N = X->shape.dims[0], .C = X->shape.dims[1], .S = 1};
    if (!is_float(p.t) || ctx->outputs[0].dtype != p.t)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "unsupported dtypes");
    if (p.size < 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "size must be >= 1");
    for (int32_t i = 2; i < X->shape.rank; i++)
        p.S *= X->shape.dims[i];
    if (p.N * p.C * p.S == 0)
        return CGE_OK;
    int64_t per = p.S * p.size;
    return cge_launch(stream, lrn_fn,
                      cge__blocks_for(p.N * p.C, per >= 8192 ? 1 : 8192 / per, ctx->num_threads),
                      &p, sizeof p);
}

/* ---- MeanVarianceNormalization ----------------------------------------------------- */

/* Marks the reduced axes; false if one is out of range or repeated. */
static bool mvn_axes(const cge_attrs *attrs, int32_t rank, bool red[CGE_MAX_RANK])
{
    static const int64_t dflt[] = {0, 2, 3};
    const int64_t *ax = NULL;
    int64_t n = cge_attrs_get_ints(attrs, "axes", &ax);
    if (n < 0) {
        ax = dflt;
        n = 3;
    }
    memset(red, 0, sizeof(bool) * CGE_MAX_RANK);
    for (int64_t i = 0; i < n; i++) {
        int32_t a;
        if (!cge_axis_normalize(ax[i], rank, false, &a) || red[a])
            return false;
        red[a] = true;
    }
    return true;
}

static cge_status mvn_infer(cge_infer_ctx *ctx)
{
    cge_status st = cge__meta_need_float(ctx, 0, "X");
    if (st)
        return st;
    bool red[CGE_MAX_RANK];
    if (!mvn_axes(ctx->attrs, ctx->inputs[0].shape.rank, red))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "axes (default [0, 2, 3]) must be distinct axes of the rank-%d input",
                              (int)ctx->inputs[0].shape.rank);
    ctx->outputs[0].dtype = ctx->inputs[0].dtype;
    ctx->outputs[0].shape = ctx->inputs[0].shape;
    return CGE_OK;
}

typedef struct mvn_args {
    const void *x;
    void *y;
    cge_dtype dt;
    int32_t nk, nr;                 /* kept and reduced axes */
    int64_t kdims[CGE_MAX_RANK], kstr[CGE_MAX_RANK];
    int64_t rdims[CGE_MAX_RANK], rstr[CGE_MAX_RANK];
    int64_t groups, per_group;
} mvn_args;

static int64_t mvn_offset(const int64_t *dims, const int64_t *str, int32_t n, int64_t idx)
{
    int64_t off = 0;
    for (int32_t i = n - 1; i >= 0; i--) {
        off += (idx % dims[i]) * str[i];
        idx /= dims[i];
    }
    return off;
}

static void mvn_block(int64_t b, int64_t nb, void *p)
{
    const mvn_args *a = p;
    int64_t lo, hi;
    cge__block_range(a->groups, b, nb, &lo, &hi);
    for (int64_t g = lo; g < hi; g++) {
        int64_t base = mvn_offset(a->kdims, a->kstr, a->nk, g);
        double sum = 0.0;
        for (int64_t r = 0; r < a->per_group; r++)
            sum += cge__load_as_double(a->dt, a->x, base + mvn_offset(a->rdims, a->rstr, a->nr, r));
        double mean = sum / (double)a->per_group, var = 0.0;
        for (int64_t r = 0; r < a->per_group; r++) {
            double v = cge__load_as_double(a->dt, a->x,
                                          base + mvn_offset(a->rdims, a->rstr, a->nr, r)) - mean;
            var += v * v;
        }
        /* onnx's function body: (x - mean) / (sqrt(E[x^2] - mean^2) + 1e-9) */
        double den = sqrt(var / (double)a->per_group) + 1e-9;
        for (int64_t r = 0; r < a->per_group; r++) {
            int64_t o = base + mvn_offset(a->rdims, a->rstr, a->nr, r);
            double v = cge__load_as_double(a->dt, a->x, o);
            cge__store_from_double(a->dt, a->y, o, (v - mean) / den);
        }
    }
}

static cge_status mvn_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *x = &ctx->inputs[0];
    bool red[CGE_MAX_RANK];
    if (!cge_dtype_is_float(x->dtype) || !mvn_axes(ctx->attrs, x->shape.rank, red))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "input or axes the meta did not accept");
    mvn_args a;
    memset(&a, 0, sizeof a);
    int64_t str[CGE_MAX_RANK];
    cge_shape_strides(&x->shape, str);
    a.groups = a.per_group = 1;
    for (int32_t i = 0; i < x->shape.rank; i++) {
        if (red[i]) {
            a.rdims[a.nr] = x->shape.dims[i];
            a.rstr[a.nr++] = str[i];
            a.per_group *= x->shape.dims[i];
        } else {
            a.kdims[a.nk] = x->shape.dims[i];
            a.kstr[a.nk++] = str[i];
            a.groups *= x->shape.dims[i];
        }
    }
    if (a.groups * a.per_group == 0)
        return CGE_OK;
    a.x = x->data;
    a.y = ctx->outputs[0].data;
    a.dt = x->dtype;
    if (!a.x || !a.y)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    int64_t min_groups = a.per_group >= CGE__MIN_BLOCK ? 1 : CGE__MIN_BLOCK / a.per_group;
    return cge_launch(stream, mvn_block, cge__blocks_for(a.groups, min_groups, ctx->num_threads), &a,
                      sizeof a);
}

/* ---- definitions ------------------------------------------------------------------ */

static const cge_arg_def bn_inputs[] = {
    {"X", 0, NORM_DTYPES, "[N, C, ...]"},
    {"scale", 0, NORM_DTYPES, "[C]"},
    {"B", 0, NORM_DTYPES, "[C]"},
    {"input_mean", 0, NORM_DTYPES, "[C]"},
    {"input_var", 0, NORM_DTYPES, "[C]"},
};
static const cge_arg_def bn_outputs[] = {
    {"Y", 0, NORM_DTYPES, "X's shape"},
    {"running_mean", CGE_ARG_OPTIONAL, NORM_DTYPES, "training_mode only"},
    {"running_var", CGE_ARG_OPTIONAL, NORM_DTYPES, "training_mode only"},
};
static const cge_attr_def bn_attrs[] = {
    {"epsilon", CGE_ATTR_FLOAT, false, 0, 1e-5f, NULL, "added to the variance"},
    {"momentum", CGE_ATTR_FLOAT, false, 0, 0.9f, NULL, "running statistics' decay"},
    {"training_mode", CGE_ATTR_INT, false, 0, 0.0f, NULL, "use batch statistics"},
};
static const cge_kernel_def bn_kernels[] = {{.engine = "cpu", .dtypes = NORM_DTYPES,
                                             .launch = bn_launch,
                                             .workspace_size = bn_workspace,
                                             .inplace_input = 0}};

static const cge_arg_def in_inputs[] = {
    {"input", 0, NORM_DTYPES, "[N, C, D1, ...]"},
    {"scale", 0, NORM_DTYPES, "[C]"},
    {"B", 0, NORM_DTYPES, "[C]"},
};
static const cge_arg_def one_output[] = {{"output", 0, NORM_DTYPES, "input's shape"}};
static const cge_attr_def eps_attr[] = {
    {"epsilon", CGE_ATTR_FLOAT, false, 0, 1e-5f, NULL, "added to the variance"},
};
static const cge_kernel_def in_kernels[] = {
    {.engine = "cpu", .dtypes = NORM_DTYPES, .launch = in_launch, .inplace_input = 0}};

static const cge_arg_def gn_inputs[] = {
    {"X", 0, NORM_DTYPES, "[N, C, D1, ...]"},
    {"scale", 0, NORM_DTYPES, "[num_groups]"},
    {"bias", 0, NORM_DTYPES, "[num_groups]"},
};
static const cge_arg_def gn_outputs[] = {{"Y", 0, NORM_DTYPES, "X's shape"}};
static const cge_attr_def gn_attrs[] = {
    {"epsilon", CGE_ATTR_FLOAT, false, 0, 1e-5f, NULL, "added to the variance"},
    {"num_groups", CGE_ATTR_INT, true, 0, 0.0f, NULL, "groups of consecutive channels"},
};
static const cge_kernel_def gn_kernels[] = {
    {.engine = "cpu", .dtypes = NORM_DTYPES, .launch = gn_launch, .inplace_input = 0}};

/* ---- cge.fused SkipLayerNorm ------------------------------------------------------ */

/* LayerNormalization (last axis, float32, per-element Scale and optional B)
 * of S = A + B2, A and B2 of one shape, in one pass over the rows: each row's
 * sum is rounded to float32 into S (when the graph reads it: the next
 * residual) or into Y itself, then normalised by ln_row_f32 from there while
 * it is in cache. The sum is the Add kernel's float add and the row is
 * LayerNormalization's: the same bits as the pair it replaces. */
typedef struct sln_args {
    const float *a, *b, *scale, *bias;
    float *y, *s;
    double eps;
    int64_t rows, D;
} sln_args;

CGE_TARGET_CLONES static void sln_add_row(const float *a, const float *b, float *s, int64_t D)
{
    for (int64_t i = 0; i < D; i++)
        s[i] = a[i] + b[i];
}

static void sln_fn(int64_t blk, int64_t nblk, void *args)
{
    const sln_args *p = args;
    int64_t r0, r1;
    cge__block_range(p->rows, blk, nblk, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        float *y = p->y + r * p->D, *s = p->s ? p->s + r * p->D : y;
        sln_add_row(p->a + r * p->D, p->b + r * p->D, s, p->D);
        ln_row_f32(s, y, p->D, p->scale, p->bias, p->eps, NULL, NULL);
    }
}

static cge_status sln_infer(cge_infer_ctx *ctx)
{
    if (ctx->num_inputs < 3 || ctx->num_outputs < 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "needs inputs A, B, Scale");
    const cge_tensor_desc *A = &ctx->inputs[0];
    char s1[CGE_SHAPE_STR_MAX], s2[CGE_SHAPE_STR_MAX];
    if (A->dtype != CGE_F32 || A->shape.rank < 1)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "A must be float32 of rank >= 1");
    if (ctx->inputs[1].dtype != CGE_F32 || !cge_shape_equal(&ctx->inputs[1].shape, &A->shape))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "B %s must be float32 of A's shape %s (no broadcast)",
                              cge_shape_str(&ctx->inputs[1].shape, s1, sizeof s1),
                              cge_shape_str(&A->shape, s2, sizeof s2));
    int64_t d = A->shape.dims[A->shape.rank - 1];
    for (int32_t i = 2; i < 4; i++) {
        if (!cge__meta_has_input(ctx, i))
            continue;
        const cge_tensor_desc *t = &ctx->inputs[i];
        if (t->dtype != CGE_F32 || t->shape.rank != 1 ||
            (d >= 0 && t->shape.dims[0] >= 0 && t->shape.dims[0] != d))
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "input %d %s must be float32 [%lld]", i,
                                  cge_shape_str(&t->shape, s1, sizeof s1), (long long)d);
    }
    for (int32_t i = 0; i < ctx->num_outputs && i < 2; i++) {
        ctx->outputs[i].dtype = CGE_F32;
        ctx->outputs[i].shape = A->shape;
    }
    return CGE_OK;
}

static cge_status sln_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_inputs < 3 || ctx->num_outputs < 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "needs inputs A, B, Scale");
    const cge_tensor *A = &ctx->inputs[0], *B = &ctx->inputs[1], *sc = &ctx->inputs[2];
    const cge_tensor *bi = ctx->num_inputs > 3 && ctx->inputs[3].dtype != CGE_DTYPE_UNDEFINED
                               ? &ctx->inputs[3]
                               : NULL;
    const cge_tensor *S = ctx->num_outputs > 1 && ctx->outputs[1].data ? &ctx->outputs[1] : NULL;
    if (A->dtype != CGE_F32 || B->dtype != CGE_F32 || sc->dtype != CGE_F32 ||
        (bi && bi->dtype != CGE_F32) || ctx->outputs[0].dtype != CGE_F32 ||
        (S && S->dtype != CGE_F32))
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "SkipLayerNorm is float32 only");
    if (A->shape.rank < 1)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "A needs rank >= 1");
    int64_t n = cge_shape_numel(&A->shape), D = A->shape.dims[A->shape.rank - 1];
    if (cge_shape_numel(&B->shape) != n || cge_shape_numel(&ctx->outputs[0].shape) != n ||
        (S && cge_shape_numel(&S->shape) != n) || cge_shape_numel(&sc->shape) != D ||
        (bi && cge_shape_numel(&bi->shape) != D))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE,
                                "A, B, Y, S need one size and Scale, Bias A's last dim");
    if (n == 0)
        return CGE_OK;
    sln_args p = {.a = A->data, .b = B->data, .scale = sc->data, .bias = bi ? bi->data : NULL,
                  .y = ctx->outputs[0].data, .s = S ? S->data : NULL,
                  .eps = cge_attrs_get_float(ctx->attrs, "epsilon", 1e-5f), .rows = n / D,
                  .D = D};
    return cge_launch(stream, sln_fn,
                      cge__blocks_for(p.rows, D >= 8192 ? 1 : 8192 / D, ctx->num_threads), &p,
                      sizeof p);
}

static const cge_arg_def ln_inputs[] = {
    {"X", 0, NORM_DTYPES, "any rank >= 1"},
    {"Scale", 0, NORM_DTYPES, "the normalised shape X.shape[axis:]"},
    {"B", CGE_ARG_OPTIONAL, NORM_DTYPES, "the normalised shape"},
};
static const cge_arg_def ln_outputs[] = {
    {"Y", 0, NORM_DTYPES, "X's shape"},
    {"Mean", CGE_ARG_OPTIONAL, CGE_DT(CGE_F32), "X.shape[:axis] + 1s"},
    {"InvStdDev", CGE_ARG_OPTIONAL, CGE_DT(CGE_F32), "X.shape[:axis] + 1s"},
};
static const cge_attr_def ln_attrs[] = {
    {"axis", CGE_ATTR_INT, false, -1, 0.0f, NULL, "first normalised axis"},
    {"epsilon", CGE_ATTR_FLOAT, false, 0, 1e-5f, NULL, "added to the variance"},
    {"stash_type", CGE_ATTR_INT, false, 1, 0.0f, NULL, "statistics dtype (1 = float32)"},
};
static const cge_kernel_def ln_kernels[] = {
    {.engine = "cpu", .dtypes = NORM_DTYPES, .launch = ln_launch, .inplace_input = 0}};

static const cge_arg_def sln_inputs[] = {
    {"A", 0, CGE_DT(CGE_F32), "any rank >= 1"},
    {"B", 0, CGE_DT(CGE_F32), "A's shape (no broadcast)"},
    {"Scale", 0, CGE_DT(CGE_F32), "[A.shape[-1]]"},
    {"Bias", CGE_ARG_OPTIONAL, CGE_DT(CGE_F32), "[A.shape[-1]]"},
};
static const cge_arg_def sln_outputs[] = {
    {"Y", 0, CGE_DT(CGE_F32), "LayerNormalization(A + B) over the last axis"},
    {"S", CGE_ARG_OPTIONAL, CGE_DT(CGE_F32), "A + B"},
};
static const cge_attr_def sln_attrs[] = {
    {"epsilon", CGE_ATTR_FLOAT, false, 0, 1e-5f, NULL, "added to the variance"},
};
static const cge_kernel_def sln_kernels[] = {
    {.engine = "cpu", .dtypes = CGE_DT(CGE_F32), .launch = sln_launch, .inplace_input = 0}};

static const cge_arg_def lrn_inputs[] = {{"X", 0, NORM_DTYPES, "[N, C, D1, ...]"}};
static const cge_arg_def lrn_outputs[] = {{"Y", 0, NORM_DTYPES, "X's shape"}};
static const cge_attr_def lrn_attrs[] = {
    {"alpha", CGE_ATTR_FLOAT, false, 0, 1e-4f, NULL, "scale"},
    {"beta", CGE_ATTR_FLOAT, false, 0, 0.75f, NULL, "exponent"},
    {"bias", CGE_ATTR_FLOAT, false, 0, 1.0f, NULL, "offset"},
    {"size", CGE_ATTR_INT, true, 0, 0.0f, NULL, "channels summed over"},
};
static const cge_kernel_def lrn_kernels[] = {
    {.engine = "cpu", .dtypes = NORM_DTYPES, .launch = lrn_launch, .inplace_input = -1}};

static const cge_arg_def mvn_inputs[] = {{"X", 0, CGE_DT_FLOAT, "float tensor"}};
static const cge_arg_def mvn_outputs[] = {{"Y", 0, CGE_DT_FLOAT, "result"}};
static const cge_attr_def mvn_attrs[] = {
    {"axes", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "axes to normalise over (default [0, 2, 3])"}};
static const cge_kernel_def mvn_kernels[] = {
    {.engine = "cpu", .dtypes = CGE_DT_FLOAT, .launch = mvn_launch, .inplace_input = -1}};

static const cge_op_def norm_ops[] = {
    {.name = "BatchNormalization", .domain = CGE_DOMAIN_DEFAULT, .since_version = 15,
     .inputs = bn_inputs, .num_inputs = 5, .outputs = bn_outputs, .num_outputs = 3,
     .attrs = bn_attrs, .num_attrs = 3, .infer = bn_infer, .kernels = bn_kernels,
     .num_kernels = 1, .doc = "scale * (X - mean) / sqrt(var + epsilon) + B per channel."},
    {.name = "InstanceNormalization", .domain = CGE_DOMAIN_DEFAULT, .since_version = 6,
     .inputs = in_inputs, .num_inputs = 3, .outputs = one_output, .num_outputs = 1,
     .attrs = eps_attr, .num_attrs = 1, .infer = in_infer, .kernels = in_kernels,
     .num_kernels = 1, .doc = "Normalise each (n, c) plane, then scale and shift per channel."},
    {.name = "GroupNormalization", .domain = CGE_DOMAIN_DEFAULT, .since_version = 18,
     .inputs = gn_inputs, .num_inputs = 3, .outputs = gn_outputs, .num_outputs = 1,
     .attrs = gn_attrs, .num_attrs = 2, .infer = gn_infer, .kernels = gn_kernels,
     .num_kernels = 1,
     .doc = "Normalise each group of channels (and positions), then scale and shift per group."},
    {.name = "LayerNormalization", .domain = CGE_DOMAIN_DEFAULT, .since_version = 17,
     .inputs = ln_inputs, .num_inputs = 3, .outputs = ln_outputs, .num_outputs = 3,
     .attrs = ln_attrs, .num_attrs = 3, .infer = ln_infer, .kernels = ln_kernels,
     .num_kernels = 1, .doc = "Normalise over the axes from `axis` on, then Scale and B."},
    {.name = "SkipLayerNorm", .domain = CGE_DOMAIN_FUSED, .since_version = 1,
     .inputs = sln_inputs, .num_inputs = 4, .outputs = sln_outputs, .num_outputs = 2,
     .attrs = sln_attrs, .num_attrs = 1, .infer = sln_infer, .kernels = sln_kernels,
     .num_kernels = 1,
     .doc = "LayerNormalization over the last axis of S = A + B, S written too when read."},
    {.name = "LRN", .domain = CGE_DOMAIN_DEFAULT, .since_version = 13, .inputs = lrn_inputs,
     .num_inputs = 1, .outputs = lrn_outputs, .num_outputs = 1, .attrs = lrn_attrs,
     .num_attrs = 4, .infer = lrn_infer, .kernels = lrn_kernels, .num_kernels = 1,
     .doc = "Local response normalisation across channels."},
    {.name = "MeanVarianceNormalization", .domain = CGE_DOMAIN_DEFAULT, .since_version = 13,
     .inputs = mvn_inputs, .num_inputs = 1, .outputs = mvn_outputs, .num_outputs = 1,
     .attrs = mvn_attrs, .num_attrs = 1, .infer = mvn_infer, .kernels = mvn_kernels,
     .num_kernels = 1, .doc = "(X - mean) / (std + 1e-9), mean and std over axes."},
};

const cge_op_def *cge__ops_norm(int32_t *count)
{
    *count = (int32_t)(sizeof norm_ops / sizeof norm_ops[0]);
    return norm_ops;
}
