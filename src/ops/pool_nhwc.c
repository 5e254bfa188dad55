/* Channels-last float32 pooling (see pool_nhwc.h): every output position
 * reduces its window's channel vectors, so the inner loop runs over C,
 * contiguous on both sides. */
#include <math.h>
#include <string.h>

#include "ops/kernel_util.h"
#include "ops/nn_spatial.h"
#include "ops/pool_nhwc.h"

/* Shapes are the logical NCHW ones; only the bytes are NHWC. Windows are
 * walked tap by tap in the same order as the NCHW kernels, and averages
 * multiply by the same float reciprocal. */

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define NN_CLONES CGE_TARGET_CLONES
#else
#define NN_CLONES
#endif

enum { MODE_MAX, MODE_AVG, MODE_GLOBAL_MAX, MODE_GLOBAL_AVG };

typedef struct nhwc_pool_args {
    const float *x;
    float *y;
    int64_t N, C;
    int mode, count_include_pad;
    nn_geom g;       /* window pools; global pools use in[] only */
} nhwc_pool_args;

static int mode_of(const cge_attrs *a)
{
    const char *m = cge_attrs_get_string(a, "mode", "");
    return !strcmp(m, "max")          ? MODE_MAX
           : !strcmp(m, "avg")        ? MODE_AVG
           : !strcmp(m, "global_max") ? MODE_GLOBAL_MAX
           : !strcmp(m, "global_avg") ? MODE_GLOBAL_AVG
                                      : -1;
}

/* Geometry and output shape of a window pool; false with a reason. */
static bool window_shape(const cge_attrs *a, const cge_shape *xs, nn_geom *g, cge_shape *out,
                         char *err, size_t errsz)
{
    if (xs->rank < 3 || xs->rank > 5) {
        snprintf(err, errsz, "X must have rank 3 to 5 (1 to 3 spatial dims)");
        return false;
    }
    if (!nn_geom_make(a, xs->rank - 2, xs->dims + 2, NULL,
                      cge_attrs_get_int(a, "ceil_mode", 0) != 0, g, err, errsz))
        return false;
    *out = *xs;
    for (int i = 0; i < g->nsp; i++)
        out->dims[2 + i] = g->out[NN_MAX_SP - g->nsp + i];
    return true;
}

cge_status cge__pool_nhwc_infer(cge_infer_ctx *ctx)
{
    if (ctx->num_inputs != 1 || ctx->num_outputs != 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "needs input X and output Y");
    const cge_tensor_desc *X = &ctx->inputs[0];
    int mode = mode_of(ctx->attrs);
    if (mode < 0)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "mode '%s' is not max, avg, global_max or global_avg",
                              cge_attrs_get_string(ctx->attrs, "mode", ""));
    if (X->dtype != CGE_F32)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "X is %s; only float32",
                              cge_dtype_name(X->dtype));
    cge_shape out = X->shape;
    if (mode >= MODE_GLOBAL_MAX) {
        if (X->shape.rank < 3)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "X must have rank >= 3 ([N, C, ...])");
        for (int32_t i = 2; i < out.rank; i++)
            out.dims[i] = 1;
    } else {
        nn_geom g;
        char err[512];
        if (!window_shape(ctx->attrs, &X->shape, &g, &out, err, sizeof err))
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "%s", err);
    }
    ctx->outputs[0].dtype = CGE_F32;
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

/* Channel blocks of this many floats keep their accumulators in registers
 * while every tap of the window passes over them. */
#define CBLK 64

/* One output position: y[c] = max or sum over the window's taps, c in a
 * block of at most CBLK channels; x0 is the input at tap (a0, a1, a2) of
 * that block, steps are the input strides of the three spatial dims. */
NN_CLONES
static void pool_block(float *restrict y, const float *restrict x0, int64_t cn, int64_t n0,
                       int64_t n1, int64_t n2, int64_t st0, int64_t st1, int64_t st2, bool is_max,
                       float scale)
{
    float acc[CBLK];
    if (cn == CBLK) {
        /* the whole block: a fixed trip count keeps acc in vector registers */
        for (int64_t i = 0; i < CBLK; i++)
            acc[i] = is_max ? -INFINITY : 0.0f;
        for (int64_t k0 = 0; k0 < n0; k0++)
            for (int64_t k1 = 0; k1 < n1; k1++)
                for (int64_t k2 = 0; k2 < n2; k2++) {
                    const float *x = x0 + k0 * st0 + k1 * st1 + k2 * st2;
                    if (is_max) {
                        for (int64_t i = 0; i < CBLK; i++)
                            acc[i] = x[i] > acc[i] ? x[i] : acc[i];
                    } else {
                        for (int64_t i = 0; i < CBLK; i++)
                            acc[i] += x[i];
                    }
                }
        bool empty = n0 * n1 * n2 == 0;
        for (int64_t i = 0; i < CBLK; i++)
            y[i] = is_max ? (empty ? 0.0f : acc[i]) : acc[i] * scale;
        return;
    }
    for (int64_t i = 0; i < cn; i++)
        acc[i] = is_max ? -INFINITY : 0.0f;
    for (int64_t k0 = 0; k0 < n0; k0++)
        for (int64_t k1 = 0; k1 < n1; k1++) {
            const float *xr = x0 + k0 * st0 + k1 * st1;
            for (int64_t k2 = 0; k2 < n2; k2++) {
                const float *x = xr + k2 * st2;
                if (is_max) {
                    for (int64_t i = 0; i < cn; i++)
                        acc[i] = x[i] > acc[i] ? x[i] : acc[i];
                } else {
                    for (int64_t i = 0; i < cn; i++)
                        acc[i] += x[i];
                }
            }
        }
    /* A max over an empty window (only in padding) gives 0, as in NCHW. */
    if (is_max && n0 * n1 * n2 == 0)
        for (int64_t i = 0; i < cn; i++)
            y[i] = 0.0f;
    else if (is_max)
        for (int64_t i = 0; i < cn; i++)
            y[i] = acc[i];
    else
        for (int64_t i = 0; i < cn; i++)
            y[i] = acc[i] * scale;
}

/* Window pools: blocks over output rows (n, od, oh). */
static void window_fn(int64_t blk, int64_t nblk, void *args)
{
    const nhwc_pool_args *p = args;
    const nn_geom *g = &p->g;
    int64_t r0, r1, C = p->C;
    cge__block_range(p->N * g->out[0] * g->out[1], blk, nblk, &r0, &r1);
    bool is_max = p->mode == MODE_MAX;
    /* input strides of the spatial dims, taps apart by the dilations */
    int64_t sx = C, sy = g->in[2] * C, sz = g->in[1] * g->in[2] * C;
    for (int64_t r = r0; r < r1; r++) {
        int64_t oh = r % g->out[1], od = (r / g->out[1]) % g->out[0];
        int64_t n = r / (g->out[0] * g->out[1]);
        const float *xn = p->x + n * g->in[0] * sz;
        int64_t a0, b0, a1, b1;
        nn_tap_range(g, 0, od, &a0, &b0);
        nn_tap_range(g, 1, oh, &a1, &b1);
        int64_t iz = od * g->s[0] - g->pb[0] + a0 * g->d[0];
        int64_t iy = oh * g->s[1] - g->pb[1] + a1 * g->d[1];
        for (int64_t ow = 0; ow < g->out[2]; ow++) {
            float *y = p->y + (r * g->out[2] + ow) * C;
            int64_t a2, b2;
            nn_tap_range(g, 2, ow, &a2, &b2);
            int64_t ix = ow * g->s[2] - g->pb[2] + a2 * g->d[2];
            int64_t taps = (b0 - a0) * (b1 - a1) * (b2 - a2);
            float scale = 1.0f; /* averages: 1 / the divisor */
            if (!is_max) {
                int64_t cnt = p->count_include_pad ? nn_padded_taps(g, 0, od) *
                                                         nn_padded_taps(g, 1, oh) *
                                                         nn_padded_taps(g, 2, ow)
                                                   : taps;
                scale = cnt > 0 ? 1.0f / (float)cnt : 0.0f;
            }
            const float *x0 = taps ? xn + iz * sz + iy * sy + ix * sx : xn;
            for (int64_t c0 = 0; c0 < C; c0 += CBLK)
                pool_block(y + c0, x0 + c0, C - c0 < CBLK ? C - c0 : CBLK, b0 - a0, b1 - a1,
                           b2 - a2, g->d[0] * sz, g->d[1] * sy, g->d[2] * sx, is_max, scale);
        }
    }
}

/* Global pools: blocks over (image, CBLK channels); each block keeps its
 * channels' accumulators in registers over the whole plane (pool_block with
 * one row of sp taps), so that one image's channels spread over the cores.
 * Taps are summed in plane order and scaled by the float reciprocal, as the
 * NCHW kernel does. */
static void global_fn(int64_t blk, int64_t nblk, void *args)
{
    const nhwc_pool_args *p = args;
    int64_t C = p->C, sp = p->g.in[0] * p->g.in[1] * p->g.in[2];
    int64_t cb = (C + CBLK - 1) / CBLK, w0, w1;
    cge__block_range(p->N * cb, blk, nblk, &w0, &w1);
    bool is_max = p->mode == MODE_GLOBAL_MAX;
    float scale = sp > 0 ? 1.0f / (float)sp : 0.0f;
    for (int64_t w = w0; w < w1; w++) {
        int64_t n = w / cb, c0 = (w % cb) * CBLK;
        pool_block(p->y + n * C + c0, p->x + n * sp * C + c0, C - c0 < CBLK ? C - c0 : CBLK, 1, 1,
                   sp, 0, 0, C, is_max, scale);
    }
}

static int64_t sp_of(const nhwc_pool_args *p)
{
    int64_t sp = p->g.in[0] * p->g.in[1] * p->g.in[2];
    return sp > 0 ? sp : 1;
}

cge_status cge__pool_nhwc_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_inputs != 1 || ctx->num_outputs != 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "needs input X and output Y");
    const cge_tensor *X = &ctx->inputs[0], *Y = &ctx->outputs[0];
    nhwc_pool_args p;
    memset(&p, 0, sizeof p);
    p.mode = mode_of(ctx->attrs);
    if (p.mode < 0 || X->dtype != CGE_F32 || Y->dtype != CGE_F32)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "float32 only, with a known mode");
    if (X->shape.rank < 3 || X->shape.rank > 5 || !cge_shape_is_static(&X->shape))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "X must have a static shape of rank 3 to 5");
    cge_shape out = X->shape;
    if (p.mode >= MODE_GLOBAL_MAX) {
        int32_t nsp = X->shape.rank - 2;
        for (int i = 0; i < NN_MAX_SP; i++)
            p.g.in[i] = i < NN_MAX_SP - nsp ? 1 : X->shape.dims[2 + i - (NN_MAX_SP - nsp)];
        for (int32_t i = 2; i < out.rank; i++)
            out.dims[i] = 1;
    } else {
        char err[512];
        if (!window_shape(ctx->attrs, &X->shape, &p.g, &out, err, sizeof err))
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "%s", err);
    }
    if (!cge_shape_equal(&out, &Y->shape))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output shape does not agree with X");
    p.x = X->data;
    p.y = Y->data;
    p.N = X->shape.dims[0];
    p.C = X->shape.dims[1];
    p.count_include_pad = cge_attrs_get_int(ctx->attrs, "count_include_pad", 0) != 0;
    if (cge_shape_numel(&out) == 0)
        return CGE_OK;
    if (!p.x || !p.y)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    if (p.mode >= MODE_GLOBAL_MAX)
        /* 64K floats a block at least: the squeeze-and-excitation pools
         * (a few thousand floats to 100K) stay on the calling thread, as
         * before, instead of waking a worker for microseconds of work;
         * the large early-stage ones split. */
        return cge_launch(stream, global_fn,
                          cge__blocks_for(p.N * ((p.C + CBLK - 1) / CBLK),
                                         (65536 + CBLK * sp_of(&p) - 1) / (CBLK * sp_of(&p)),
                                         ctx->num_threads),
                          &p, sizeof p);
    int64_t rows = p.N * p.g.out[0] * p.g.out[1];
    int64_t per = p.g.out[2] * p.g.k[0] * p.g.k[1] * p.g.k[2] * p.C;
    return cge_launch(stream, window_fn,
                      cge__blocks_for(rows, per >= 16384 ? 1 : 16384 / (per > 0 ? per : 1),
                                     ctx->num_threads),
                      &p, sizeof p);
}
