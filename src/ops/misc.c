/* Operators that belong to no larger family: CastLike, MeanVarianceNormalization,
 * Det, GridSample, MaxUnpool, RoiAlign, NonMaxSuppression, Unique,
 * TfIdfVectorizer and the random generators (Bernoulli, RandomUniform[Like],
 * RandomNormal[Like], Multinomial). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>
#include <time.h>

#include "ops/builtin.h"
#include "ops/kernel_util.h"

#define MISC_FLOAT_DT (CGE_DT(CGE_F32) | CGE_DT(CGE_F64) | CGE_DT(CGE_F16) | CGE_DT(CGE_BF16))
#define MISC_IDX_DT (CGE_DT(CGE_I32) | CGE_DT(CGE_I64))
/* Elements per block below which work stays in one block. */
#define MISC_MIN_BLOCK ((int64_t)1 << 14)
#define MISC_MAX_BLOCKS 256

/* ---- shared helpers ------------------------------------------------------------------- */

static void *k_output(const cge_kernel_ctx *ctx, int32_t i)
{
    return i < ctx->num_outputs ? ctx->outputs[i].data : NULL;
}

static void node_label(const cge_kernel_ctx *ctx, char *buf, size_t size)
{
    snprintf(buf, size, "%s '%s'", ctx->op_type ? ctx->op_type : "op",
             ctx->node_name ? ctx->node_name : "");
}

static bool is_float_dt(cge_dtype t)
{
    return (MISC_FLOAT_DT & CGE_DT(t)) != 0;
}

static bool known(int64_t d)
{
    return cge_dim_is_known(d);   /* symbols (< -1) are unknown too */
}

static cge_status need_float(cge_infer_ctx *ctx, int32_t i, const char *what)
{
    if (!is_float_dt(ctx->inputs[i].dtype))
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "%s is %s; it must be a float type", what,
                              cge_dtype_name(ctx->inputs[i].dtype));
    return CGE_OK;
}

/* ---- CastLike ------------------------------------------------------------------------- */

/* CastLike is Cast with the target's dtype: the kernel hands the work to the
 * registered Cast kernel so that both follow one set of conversion rules. */
static cge_status castlike_infer(cge_infer_ctx *ctx)
{
    ctx->outputs[0].dtype = ctx->inputs[1].dtype;
    ctx->outputs[0].shape = ctx->inputs[0].shape;
    return CGE_OK;
}

static cge_status castlike_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_inputs < 1 || ctx->num_outputs < 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "expects input, target_type, output");
    const cge_op_def *cast = cge_op_find(CGE_DOMAIN_DEFAULT, "Cast", 0);
    const cge_kernel_def *k = cast ? cge_op_find_kernel(cast, "cpu", ctx->inputs[0].dtype) : NULL;
    if (!k)
        return cge_kernel_error(ctx, CGE_ERR_UNSUPPORTED, "no Cast kernel to delegate to");
    cge_kernel_ctx c = *ctx;
    c.num_inputs = 1;
    c.num_outputs = 1;
    c.workspace = NULL;
    c.workspace_size = 0;
    c.state = NULL;
    return k->launch(&c, stream);
}

/* ---- MeanVarianceNormalization -------------------------------------------------------- */

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
    cge_status st = need_float(ctx, 0, "X");
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
    cge_block_range(a->groups, b, nb, &lo, &hi);
    for (int64_t g = lo; g < hi; g++) {
        int64_t base = mvn_offset(a->kdims, a->kstr, a->nk, g);
        double sum = 0.0;
        for (int64_t r = 0; r < a->per_group; r++)
            sum += cge_load_as_double(a->dt, a->x, base + mvn_offset(a->rdims, a->rstr, a->nr, r));
        double mean = sum / (double)a->per_group, var = 0.0;
        for (int64_t r = 0; r < a->per_group; r++) {
            double v = cge_load_as_double(a->dt, a->x,
                                          base + mvn_offset(a->rdims, a->rstr, a->nr, r)) - mean;
            var += v * v;
        }
        /* onnx's function body: (x - mean) / (sqrt(E[x^2] - mean^2) + 1e-9) */
        double den = sqrt(var / (double)a->per_group) + 1e-9;
        for (int64_t r = 0; r < a->per_group; r++) {
            int64_t o = base + mvn_offset(a->rdims, a->rstr, a->nr, r);
            double v = cge_load_as_double(a->dt, a->x, o);
            cge_store_from_double(a->dt, a->y, o, (v - mean) / den);
        }
    }
}

static cge_status mvn_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *x = &ctx->inputs[0];
    bool red[CGE_MAX_RANK];
    if (!is_float_dt(x->dtype) || !mvn_axes(ctx->attrs, x->shape.rank, red))
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
    int64_t min_groups = a.per_group >= MISC_MIN_BLOCK ? 1 : MISC_MIN_BLOCK / a.per_group;
    return cge_launch(stream, mvn_block, cge_blocks_for(a.groups, min_groups, ctx->num_threads), &a,
                      sizeof a);
}

/* ---- Det ------------------------------------------------------------------------------ */

static cge_status det_infer(cge_infer_ctx *ctx)
{
    const cge_shape *s = &ctx->inputs[0].shape;
    cge_status st = need_float(ctx, 0, "X");
    if (st)
        return st;
    if (s->rank < 2)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "X has rank %d; it must be [*, M, M]",
                              (int)s->rank);
    int64_t m1 = s->dims[s->rank - 2], m2 = s->dims[s->rank - 1];
    if (known(m1) && known(m2) && m1 != m2)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "X's last two dims are %lld and %lld; the "
                              "matrices must be square", (long long)m1, (long long)m2);
    ctx->outputs[0].dtype = ctx->inputs[0].dtype;
    ctx->outputs[0].shape = (cge_shape){.rank = s->rank - 2};
    memcpy(ctx->outputs[0].shape.dims, s->dims, sizeof(int64_t) * (size_t)(s->rank - 2));
    return CGE_OK;
}

typedef struct det_args {
    const void *x;
    void *y;
    cge_dtype dt;
    int64_t batch, m;
    double *scratch;                /* [nb][m * m] */
} det_args;

static int64_t det_blocks(const cge_kernel_ctx *ctx)
{
    const cge_shape *s = &ctx->inputs[0].shape;
    int64_t m = s->rank >= 2 ? s->dims[s->rank - 1] : 1, batch = 1;
    for (int32_t i = 0; i + 2 < s->rank; i++)
        batch *= s->dims[i];
    int64_t work = m * m * m > 0 ? m * m * m : 1;
    int64_t nb = cge_blocks_for(batch, work >= MISC_MIN_BLOCK ? 1 : MISC_MIN_BLOCK / work,
                                ctx->num_threads);
    return nb > batch && batch > 0 ? batch : nb;
}

static size_t det_workspace(const cge_kernel_ctx *ctx)
{
    const cge_shape *s = &ctx->inputs[0].shape;
    int64_t m = s->rank >= 2 ? s->dims[s->rank - 1] : 1;
    return (size_t)det_blocks(ctx) * (size_t)(m * m > 0 ? m * m : 1) * sizeof(double);
}

/* LU decomposition with partial pivoting, in double. */
static void det_block(int64_t b, int64_t nb, void *p)
{
    const det_args *a = p;
    int64_t lo, hi, m = a->m;
    double *w = a->scratch + b * m * m;
    cge_block_range(a->batch, b, nb, &lo, &hi);
    for (int64_t k = lo; k < hi; k++) {
        for (int64_t i = 0; i < m * m; i++)
            w[i] = cge_load_as_double(a->dt, a->x, k * m * m + i);
        double det = 1.0;
        for (int64_t c = 0; c < m && det != 0.0; c++) {
            int64_t piv = c;
            for (int64_t r = c + 1; r < m; r++)
                if (fabs(w[r * m + c]) > fabs(w[piv * m + c]))
                    piv = r;
            if (w[piv * m + c] == 0.0) {
                det = 0.0;
                break;
            }
            if (piv != c) {
                for (int64_t j = 0; j < m; j++) {
                    double t = w[c * m + j];
                    w[c * m + j] = w[piv * m + j];
                    w[piv * m + j] = t;
                }
                det = -det;
            }
            double d = w[c * m + c];
            det *= d;
            for (int64_t r = c + 1; r < m; r++) {
                double f = w[r * m + c] / d;
                for (int64_t j = c + 1; j < m; j++)
                    w[r * m + j] -= f * w[c * m + j];
            }
        }
        cge_store_from_double(a->dt, a->y, k, det);
    }
}

static cge_status det_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *x = &ctx->inputs[0];
    const cge_shape *s = &x->shape;
    if (s->rank < 2 || s->dims[s->rank - 1] != s->dims[s->rank - 2] || !is_float_dt(x->dtype))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "X must be float [*, M, M]");
    det_args a = {.x = x->data, .y = ctx->outputs[0].data, .dt = x->dtype,
                  .m = s->dims[s->rank - 1], .batch = 1};
    for (int32_t i = 0; i + 2 < s->rank; i++)
        a.batch *= s->dims[i];
    if (a.batch == 0)
        return CGE_OK;
    if (a.m == 0) {
        /* the determinant of an empty matrix is 1 */
        for (int64_t k = 0; k < a.batch; k++)
            cge_store_from_double(a.dt, a.y, k, 1.0);
        return CGE_OK;
    }
    int64_t nb = det_blocks(ctx);
    if (!ctx->workspace || ctx->workspace_size < (size_t)(nb * a.m * a.m) * sizeof(double) ||
        !a.x || !a.y)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing buffer or workspace");
    a.scratch = ctx->workspace;
    return cge_launch(stream, det_block, nb, &a, sizeof a);
}

/* ---- GridSample ----------------------------------------------------------------------- */

enum { GS_BILINEAR, GS_NEAREST, GS_BICUBIC };
enum { GS_ZEROS, GS_BORDER, GS_REFLECTION };

static bool gs_modes(const cge_attrs *attrs, int *mode, int *pad)
{
    const char *m = cge_attrs_get_string(attrs, "mode", "bilinear");
    const char *p = cge_attrs_get_string(attrs, "padding_mode", "zeros");
    *mode = !strcmp(m, "bilinear") ? GS_BILINEAR
            : !strcmp(m, "nearest") ? GS_NEAREST
            : !strcmp(m, "bicubic") ? GS_BICUBIC : -1;
    *pad = !strcmp(p, "zeros") ? GS_ZEROS
           : !strcmp(p, "border") ? GS_BORDER
           : !strcmp(p, "reflection") ? GS_REFLECTION : -1;
    return *mode >= 0 && *pad >= 0;
}

static cge_status gridsample_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *x = &ctx->inputs[0], *g = &ctx->inputs[1];
    int mode, pad;
    cge_status st = need_float(ctx, 0, "X");
    if (!st)
        st = need_float(ctx, 1, "grid");
    if (st)
        return st;
    if (!gs_modes(ctx->attrs, &mode, &pad))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "mode '%s' / padding_mode '%s': mode must be bilinear, nearest or "
                              "bicubic, padding_mode zeros, border or reflection",
                              cge_attrs_get_string(ctx->attrs, "mode", "bilinear"),
                              cge_attrs_get_string(ctx->attrs, "padding_mode", "zeros"));
    if (x->shape.rank != 4 || g->shape.rank != 4)
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "X has rank %d and grid rank %d; only 2-D sampling is supported "
                              "(X [N, C, H, W], grid [N, H_out, W_out, 2])",
                              (int)x->shape.rank, (int)g->shape.rank);
    if ((known(g->shape.dims[3]) && g->shape.dims[3] != 2) ||
        (known(x->shape.dims[0]) && known(g->shape.dims[0]) &&
         x->shape.dims[0] != g->shape.dims[0]))
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "grid must be [N, H_out, W_out, 2] with X's N = %lld",
                              (long long)x->shape.dims[0]);
    ctx->outputs[0].dtype = x->dtype;
    ctx->outputs[0].shape = CGE_SHAPE(cge_dim_merge(x->shape.dims[0], g->shape.dims[0]),
                                      x->shape.dims[1], g->shape.dims[1], g->shape.dims[2]);
    return CGE_OK;
}

typedef struct gs_args {
    const void *x, *grid;
    void *y;
    cge_dtype xt, gt;
    int64_t n, c, h, w, ho, wo;
    int mode, pad;
    bool align;
} gs_args;

static double gs_unnormalize(double v, int64_t size, bool align)
{
    return align ? (v + 1.0) / 2.0 * (double)(size - 1) : ((v + 1.0) * (double)size - 1.0) / 2.0;
}

static double gs_clip(double v, int64_t size)
{
    return fmin((double)(size - 1), fmax(v, 0.0));
}

static double gs_reflect(double v, double twice_lo, double twice_hi)
{
    if (twice_lo == twice_hi)
        return 0.0;
    double mn = twice_lo / 2.0, span = (twice_hi - twice_lo) / 2.0;
    v = fabs(v - mn);
    double extra = fmod(v, span);
    int64_t flips = (int64_t)floor(v / span);
    return flips % 2 == 0 ? extra + mn : span - extra + mn;
}

/* The padding rule applied to a source coordinate (PyTorch's grid_sample). */
static double gs_pad(const gs_args *a, double v, int64_t size)
{
    if (a->pad == GS_BORDER)
        return gs_clip(v, size);
    if (a->pad == GS_REFLECTION) {
        v = a->align ? gs_reflect(v, 0.0, 2.0 * (double)(size - 1))
                     : gs_reflect(v, -1.0, 2.0 * (double)size - 1.0);
        return gs_clip(v, size);
    }
    return v;
}

/* floor(v) as an index; NaN and huge values become an index far outside any
 * tensor (converting them directly would be undefined). */
static int64_t gs_index(double v)
{
    const double lim = 4611686018427387904.0; /* 2^62 */
    return v > -lim && v < lim ? (int64_t)floor(v) : -((int64_t)1 << 62);
}

static double gs_at(const gs_args *a, int64_t plane, int64_t y, int64_t x)
{
    if (y < 0 || y >= a->h || x < 0 || x >= a->w)
        return 0.0;
    return cge_load_as_double(a->xt, a->x, plane + y * a->w + x);
}

static double gs_bounded(const gs_args *a, int64_t plane, double y, double x)
{
    y = gs_pad(a, y, a->h);
    x = gs_pad(a, x, a->w);
    return gs_at(a, plane, gs_index(y), gs_index(x));
}

static double cubic1(double x, double A)
{
    return ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
}

static double cubic2(double x, double A)
{
    return ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
}

static double cubic_interp(double x0, double x1, double x2, double x3, double t)
{
    const double A = -0.75;
    return x0 * cubic2(t + 1.0, A) + x1 * cubic1(t, A) + x2 * cubic1(1.0 - t, A) +
           x3 * cubic2(2.0 - t, A);
}

static void gs_block(int64_t b, int64_t nb, void *p)
{
    const gs_args *a = p;
    int64_t lo, hi;
    cge_block_range(a->n * a->ho, b, nb, &lo, &hi);
    for (int64_t row = lo; row < hi; row++) {
        int64_t n = row / a->ho, oy = row % a->ho;
        for (int64_t ox = 0; ox < a->wo; ox++) {
            int64_t gi = ((n * a->ho + oy) * a->wo + ox) * 2;
            double gx = cge_load_as_double(a->gt, a->grid, gi);
            double gy = cge_load_as_double(a->gt, a->grid, gi + 1);
            double ix = gs_unnormalize(gx, a->w, a->align), iy = gs_unnormalize(gy, a->h, a->align);
            for (int64_t c = 0; c < a->c; c++) {
                int64_t plane = (n * a->c + c) * a->h * a->w;
                double v;
                if (a->mode == GS_BICUBIC) {
                    double fx = floor(ix), fy = floor(iy), tx = ix - fx, ty = iy - fy, r[4];
                    for (int i = 0; i < 4; i++) {
                        double yy = fy - 1.0 + i;
                        r[i] = cubic_interp(gs_bounded(a, plane, yy, fx - 1.0),
                                            gs_bounded(a, plane, yy, fx),
                                            gs_bounded(a, plane, yy, fx + 1.0),
                                            gs_bounded(a, plane, yy, fx + 2.0), tx);
                    }
                    v = cubic_interp(r[0], r[1], r[2], r[3], ty);
                } else {
                    double sx = gs_pad(a, ix, a->w), sy = gs_pad(a, iy, a->h);
                    if (a->mode == GS_NEAREST) {
                        v = gs_at(a, plane, gs_index(nearbyint(sy)), gs_index(nearbyint(sx)));
                    } else {
                        double x0 = floor(sx), y0 = floor(sy), dx = sx - x0, dy = sy - y0;
                        int64_t xi = gs_index(x0), yi = gs_index(y0);
                        v = gs_at(a, plane, yi, xi) * (1.0 - dx) * (1.0 - dy) +
                            gs_at(a, plane, yi, xi + 1) * dx * (1.0 - dy) +
                            gs_at(a, plane, yi + 1, xi) * (1.0 - dx) * dy +
                            gs_at(a, plane, yi + 1, xi + 1) * dx * dy;
                    }
                }
                cge_store_from_double(a->xt, a->y, ((n * a->c + c) * a->ho + oy) * a->wo + ox, v);
            }
        }
    }
}

static cge_status gridsample_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *x = &ctx->inputs[0], *g = &ctx->inputs[1];
    gs_args a;
    memset(&a, 0, sizeof a);
    if (!gs_modes(ctx->attrs, &a.mode, &a.pad) || x->shape.rank != 4 || g->shape.rank != 4 ||
        g->shape.dims[3] != 2 || g->shape.dims[0] != x->shape.dims[0] || !is_float_dt(x->dtype) ||
        !is_float_dt(g->dtype))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "inputs or modes the meta did not accept");
    a.align = cge_attrs_get_int(ctx->attrs, "align_corners", 0) != 0;
    a.n = x->shape.dims[0];
    a.c = x->shape.dims[1];
    a.h = x->shape.dims[2];
    a.w = x->shape.dims[3];
    a.ho = g->shape.dims[1];
    a.wo = g->shape.dims[2];
    a.x = x->data;
    a.grid = g->data;
    a.y = ctx->outputs[0].data;
    a.xt = x->dtype;
    a.gt = g->dtype;
    if (a.n * a.c * a.ho * a.wo == 0)
        return CGE_OK;
    if (!a.grid || !a.y || (a.h * a.w > 0 && !a.x))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    int64_t per_row = a.wo * a.c * (a.mode == GS_BICUBIC ? 16 : 4);
    int64_t min_rows = per_row >= MISC_MIN_BLOCK ? 1 : MISC_MIN_BLOCK / per_row;
    return cge_launch(stream, gs_block, cge_blocks_for(a.n * a.ho, min_rows, ctx->num_threads),
                      &a, sizeof a);
}

/* ---- MaxUnpool ------------------------------------------------------------------------ */

/* The default output: (in - 1) * stride + kernel - pads, per spatial dim. */
static cge_status unpool_default_shape(cge_infer_ctx *ctx, const cge_shape *xs, cge_shape *out)
{
    const int64_t *ks = NULL, *st = NULL, *pads = NULL;
    int64_t nk = cge_attrs_get_ints(ctx->attrs, "kernel_shape", &ks);
    int64_t ns = cge_attrs_get_ints(ctx->attrs, "strides", &st);
    int64_t np = cge_attrs_get_ints(ctx->attrs, "pads", &pads);
    int32_t sp = xs->rank - 2;
    if (xs->rank < 3 || nk != sp || (ns >= 0 && ns != sp) || (np >= 0 && np != 2 * sp))
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "X has rank %d: kernel_shape needs %d values, strides %d, pads %d",
                              (int)xs->rank, (int)sp, (int)sp, (int)(2 * sp));
    *out = *xs;
    for (int32_t i = 0; i < sp; i++) {
        int64_t s = ns >= 0 ? st[i] : 1, k = ks[i];
        int64_t pb = np >= 0 ? pads[i] : 0, pe = np >= 0 ? pads[sp + i] : 0;
        if (s < 1 || k < 1 || pb < 0 || pe < 0)
            return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                                  "kernel_shape and strides must be >= 1, pads >= 0");
        int64_t d = xs->dims[i + 2];
        out->dims[i + 2] = known(d) ? (d - 1) * s + k - pb - pe : CGE_DIM_DYNAMIC;
        if (known(d) && out->dims[i + 2] < 0)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "the unpooled dim %d would be negative",
                                  (int)(i + 2));
    }
    return CGE_OK;
}

static cge_status maxunpool_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *x = &ctx->inputs[0], *ind = &ctx->inputs[1];
    cge_shape def;
    cge_status st = need_float(ctx, 0, "X");
    if (st)
        return st;
    bool same = ind->dtype == CGE_I64 && ind->shape.rank == x->shape.rank;
    for (int32_t i = 0; same && i < x->shape.rank; i++)
        same = !known(ind->shape.dims[i]) || !known(x->shape.dims[i]) ||
               ind->shape.dims[i] == x->shape.dims[i];
    if (!same)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "I must be int64 with X's shape");
    st = unpool_default_shape(ctx, &x->shape, &def);
    if (st)
        return st;
    ctx->outputs[0].dtype = x->dtype;
    ctx->outputs[0].shape = def;
    if (cge_meta_has_input(ctx, 2)) {
        const cge_tensor_desc *os = &ctx->inputs[2];
        if (os->shape.rank != 1 || !(MISC_IDX_DT & CGE_DT(os->dtype)) ||
            (known(os->shape.dims[0]) && os->shape.dims[0] != x->shape.rank))
            return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                  "output_shape must be a 1-D integer tensor of %d values",
                                  (int)x->shape.rank);
        const void *v = cge_meta_input_value(ctx, 2);
        for (int32_t i = 0; i < x->shape.rank; i++) {
            int64_t d = v ? cge_load_as_i64(os->dtype, v, i) : CGE_DIM_DYNAMIC;
            if (v && d < 0)
                return cge_meta_error(ctx, CGE_ERR_SHAPE, "output_shape[%d] is %lld", (int)i,
                                      (long long)d);
            ctx->outputs[0].shape.dims[i] = d;
        }
    }
    return CGE_OK;
}

typedef struct unpool_args {
    const void *x, *ind;
    void *y;
    cge_dtype dt;
    size_t esize;
    int32_t rank;
    int64_t numel_x, numel_y;
    int64_t def_dims[CGE_MAX_RANK], out_dims[CGE_MAX_RANK];
    bool same;                      /* output shape == default shape */
    char node[96];
} unpool_args;

/* Index i refers to the default (inferred) output layout, as onnx's reference
 * does; with a larger output_shape the values keep their coordinates (the
 * extra rows and columns at the end stay zero). */
static void unpool_scatter(int64_t b, int64_t nb, void *p)
{
    const unpool_args *a = p;
    int64_t lo, hi;
    cge_block_range(a->numel_x, b, nb, &lo, &hi);
    int64_t def_numel = 1;
    for (int32_t d = 0; d < a->rank; d++)
        def_numel *= a->def_dims[d];
    for (int64_t i = lo; i < hi; i++) {
        int64_t idx = ((const int64_t *)a->ind)[i];
        if (idx < 0 || idx >= def_numel) {
            cge_kernel_fail(CGE_ERR_INVALID_ARG, "%s: index %lld (position %lld) is outside the "
                            "unpooled tensor of %lld elements", a->node, (long long)idx,
                            (long long)i, (long long)def_numel);
            continue;
        }
        int64_t dst = idx;
        if (!a->same) {
            int64_t rem = idx, off = 0, mul = 1;
            bool inside = true;
            for (int32_t d = a->rank - 1; d >= 0; d--) {
                int64_t c = rem % a->def_dims[d];
                rem /= a->def_dims[d];
                inside = inside && c < a->out_dims[d];
                off += c * mul;
                mul *= a->out_dims[d];
            }
            if (!inside)
                continue;
            dst = off;
        }
        memcpy((char *)a->y + (size_t)dst * a->esize, (const char *)a->x + (size_t)i * a->esize,
               a->esize);
    }
}

static cge_status maxunpool_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *x = &ctx->inputs[0], *ind = &ctx->inputs[1];
    cge_tensor *y = &ctx->outputs[0];
    unpool_args a;
    memset(&a, 0, sizeof a);
    const int64_t *ks = NULL, *st = NULL, *pads = NULL;
    int64_t nk = cge_attrs_get_ints(ctx->attrs, "kernel_shape", &ks);
    int64_t ns = cge_attrs_get_ints(ctx->attrs, "strides", &st);
    int64_t np = cge_attrs_get_ints(ctx->attrs, "pads", &pads);
    int32_t sp = x->shape.rank - 2;
    if (sp < 1 || nk != sp || ind->dtype != CGE_I64 || y->shape.rank != x->shape.rank ||
        cge_shape_numel(&ind->shape) != cge_shape_numel(&x->shape) || y->dtype != x->dtype)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "inputs the meta did not accept");
    a.rank = x->shape.rank;
    a.def_dims[0] = x->shape.dims[0];
    a.def_dims[1] = x->shape.dims[1];
    for (int32_t i = 0; i < sp; i++)
        a.def_dims[i + 2] = (x->shape.dims[i + 2] - 1) * (ns == sp ? st[i] : 1) + ks[i] -
                            (np == 2 * sp ? pads[i] + pads[sp + i] : 0);
    a.same = true;
    for (int32_t i = 0; i < a.rank; i++) {
        a.out_dims[i] = y->shape.dims[i];
        a.same = a.same && a.out_dims[i] == a.def_dims[i];
    }
    a.numel_x = cge_shape_numel(&x->shape);
    a.numel_y = cge_shape_numel(&y->shape);
    a.x = x->data;
    a.ind = ind->data;
    a.y = y->data;
    a.dt = x->dtype;
    a.esize = cge_dtype_size(x->dtype);
    node_label(ctx, a.node, sizeof a.node);
    if (a.numel_y == 0)
        return CGE_OK;
    if (!a.y || (a.numel_x > 0 && (!a.x || !a.ind)))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    cge_status s = cge_memset_async(stream, a.y, 0, (size_t)a.numel_y * a.esize);
    if (s || a.numel_x == 0)
        return s;
    /* One block: two equal indices must keep the later value, as a loop does. */
    return cge_launch(stream, unpool_scatter, 1, &a, sizeof a);
}

/* ---- RoiAlign ------------------------------------------------------------------------- */

static bool roi_modes(const cge_attrs *attrs, bool *max_mode, bool *half_pixel)
{
    const char *m = cge_attrs_get_string(attrs, "mode", "avg");
    const char *t = cge_attrs_get_string(attrs, "coordinate_transformation_mode", "half_pixel");
    *max_mode = !strcmp(m, "max");
    *half_pixel = !strcmp(t, "half_pixel");
    return (*max_mode || !strcmp(m, "avg")) && (*half_pixel || !strcmp(t, "output_half_pixel"));
}

static cge_status roialign_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *x = &ctx->inputs[0], *rois = &ctx->inputs[1], *bi = &ctx->inputs[2];
    bool mx, hp;
    cge_status st = need_float(ctx, 0, "X");
    if (st)
        return st;
    if (!roi_modes(ctx->attrs, &mx, &hp))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "mode must be avg or max, coordinate_transformation_mode "
                              "half_pixel or output_half_pixel");
    int64_t oh = cge_attrs_get_int(ctx->attrs, "output_height", 1);
    int64_t ow = cge_attrs_get_int(ctx->attrs, "output_width", 1);
    if (oh < 1 || ow < 1 || cge_attrs_get_int(ctx->attrs, "sampling_ratio", 0) < 0)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "output_height and output_width must be >= 1, sampling_ratio >= 0");
    if (x->shape.rank != 4 || rois->shape.rank != 2 || bi->shape.rank != 1 ||
        rois->dtype != x->dtype || (known(rois->shape.dims[1]) && rois->shape.dims[1] != 4) ||
        (known(rois->shape.dims[0]) && known(bi->shape.dims[0]) &&
         rois->shape.dims[0] != bi->shape.dims[0]) || !(MISC_IDX_DT & CGE_DT(bi->dtype)))
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "expects X [N, C, H, W], rois [R, 4] of X's dtype and integer "
                              "batch_indices [R]");
    ctx->outputs[0].dtype = x->dtype;
    ctx->outputs[0].shape = CGE_SHAPE(cge_dim_merge(rois->shape.dims[0], bi->shape.dims[0]),
                                      x->shape.dims[1], oh, ow);
    return CGE_OK;
}

typedef struct roi_args {
    const void *x, *rois, *bi;
    void *y;
    cge_dtype dt, bt;
    int64_t n, c, h, w, r, oh, ow, ratio;
    double scale;
    bool max_mode, half_pixel;
    char node[96];
} roi_args;

/* Bilinear weights of one sample, as ONNX Runtime computes them: samples
 * beyond one pixel outside the map count as zero; others clamp to the edge. */
static bool roi_sample(const roi_args *a, double y, double x, int64_t pos[4], double wt[4])
{
    if (!(y >= -1.0 && y <= (double)a->h && x >= -1.0 && x <= (double)a->w))
        return false; /* NaN too */
    if (y <= 0)
        y = 0;
    if (x <= 0)
        x = 0;
    int64_t yl = (int64_t)y, xl = (int64_t)x, yh, xh;
    if (yl >= a->h - 1) {
        yh = yl = a->h - 1;
        y = (double)yl;
    } else {
        yh = yl + 1;
    }
    if (xl >= a->w - 1) {
        xh = xl = a->w - 1;
        x = (double)xl;
    } else {
        xh = xl + 1;
    }
    double ly = y - (double)yl, lx = x - (double)xl, hy = 1.0 - ly, hx = 1.0 - lx;
    pos[0] = yl * a->w + xl;
    pos[1] = yl * a->w + xh;
    pos[2] = yh * a->w + xl;
    pos[3] = yh * a->w + xh;
    wt[0] = hy * hx;
    wt[1] = hy * lx;
    wt[2] = ly * hx;
    wt[3] = ly * lx;
    return true;
}

/* Adaptive samples per bin side: ceil(bin size), at least 1. NaN gives 1 and
 * the count is capped (a bin of 65536 pixels a side would be absurd) so that
 * the conversion is defined and the loop ends. */
static int64_t roi_grid(double bin)
{
    double g = ceil(bin);
    return g >= 1.0 ? (g < 65536.0 ? (int64_t)g : 65536) : 1;
}

static void roi_block(int64_t b, int64_t nb, void *p)
{
    const roi_args *a = p;
    int64_t lo, hi;
    cge_block_range(a->r * a->c, b, nb, &lo, &hi);
    double off = a->half_pixel ? 0.5 : 0.0;
    for (int64_t u = lo; u < hi; u++) {
        int64_t ri = u / a->c, ch = u % a->c;
        int64_t bidx = cge_load_as_i64(a->bt, a->bi, ri);
        int64_t obase = u * a->oh * a->ow;
        if (bidx < 0 || bidx >= a->n) {
            if (ch == 0)
                cge_kernel_fail(CGE_ERR_INVALID_ARG, "%s: batch index %lld of roi %lld is "
                                "outside [0, %lld)", a->node, (long long)bidx, (long long)ri,
                                (long long)a->n);
            for (int64_t k = 0; k < a->oh * a->ow; k++)
                cge_store_from_double(a->dt, a->y, obase + k, 0.0);
            continue;
        }
        double x1 = cge_load_as_double(a->dt, a->rois, ri * 4) * a->scale - off;
        double y1 = cge_load_as_double(a->dt, a->rois, ri * 4 + 1) * a->scale - off;
        double x2 = cge_load_as_double(a->dt, a->rois, ri * 4 + 2) * a->scale - off;
        double y2 = cge_load_as_double(a->dt, a->rois, ri * 4 + 3) * a->scale - off;
        double rw = x2 - x1, rh = y2 - y1;
        if (!a->half_pixel) {
            rw = fmax(rw, 1.0);
            rh = fmax(rh, 1.0);
        }
        double bh = rh / (double)a->oh, bw = rw / (double)a->ow;
        int64_t gh = a->ratio > 0 ? a->ratio : roi_grid(rh / (double)a->oh);
        int64_t gw = a->ratio > 0 ? a->ratio : roi_grid(rw / (double)a->ow);
        double count = (double)(gh * gw > 1 ? gh * gw : 1);
        int64_t plane = (bidx * a->c + ch) * a->h * a->w;
        for (int64_t ph = 0; ph < a->oh; ph++)
            for (int64_t pw = 0; pw < a->ow; pw++) {
                double acc = 0.0;
                bool first = true;
                for (int64_t iy = 0; iy < gh; iy++) {
                    double yy = y1 + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
                    for (int64_t ix = 0; ix < gw; ix++) {
                        double xx = x1 + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
                        int64_t pos[4] = {0, 0, 0, 0};
                        double wt[4] = {0, 0, 0, 0}, v[4];
                        bool in = roi_sample(a, yy, xx, pos, wt);
                        for (int k = 0; k < 4; k++)
                            v[k] = in ? wt[k] * cge_load_as_double(a->dt, a->x, plane + pos[k])
                                      : 0.0;
                        if (a->max_mode) {
                            /* ONNX Runtime: the largest weighted corner over all samples */
                            double m = fmax(fmax(v[0], v[1]), fmax(v[2], v[3]));
                            acc = first ? m : fmax(acc, m);
                            first = false;
                        } else {
                            acc += v[0] + v[1] + v[2] + v[3];
                        }
                    }
                }
                cge_store_from_double(a->dt, a->y, obase + ph * a->ow + pw,
                                      a->max_mode ? acc : acc / count);
            }
    }
}

static cge_status roialign_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *x = &ctx->inputs[0], *rois = &ctx->inputs[1], *bi = &ctx->inputs[2];
    roi_args a;
    memset(&a, 0, sizeof a);
    if (!roi_modes(ctx->attrs, &a.max_mode, &a.half_pixel) || x->shape.rank != 4 ||
        rois->shape.rank != 2 || rois->shape.dims[1] != 4 || rois->dtype != x->dtype ||
        cge_shape_numel(&bi->shape) != rois->shape.dims[0] || !is_float_dt(x->dtype) ||
        !(MISC_IDX_DT & CGE_DT(bi->dtype)))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "inputs the meta did not accept");
    a.n = x->shape.dims[0];
    a.c = x->shape.dims[1];
    a.h = x->shape.dims[2];
    a.w = x->shape.dims[3];
    a.r = rois->shape.dims[0];
    a.oh = cge_attrs_get_int(ctx->attrs, "output_height", 1);
    a.ow = cge_attrs_get_int(ctx->attrs, "output_width", 1);
    a.ratio = cge_attrs_get_int(ctx->attrs, "sampling_ratio", 0);
    a.scale = cge_attrs_get_float(ctx->attrs, "spatial_scale", 1.0f);
    a.x = x->data;
    a.rois = rois->data;
    a.bi = bi->data;
    a.bt = bi->dtype;
    a.dt = x->dtype;
    a.y = ctx->outputs[0].data;
    node_label(ctx, a.node, sizeof a.node);
    if (a.r * a.c * a.oh * a.ow == 0)
        return CGE_OK;
    if (!a.y || !a.rois || !a.bi || (a.h * a.w > 0 && !a.x))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    if (a.h == 0 || a.w == 0)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "X has an empty feature map");
    int64_t per = a.oh * a.ow * 16;
    return cge_launch(stream, roi_block,
                      cge_blocks_for(a.r * a.c, per >= MISC_MIN_BLOCK ? 1 : MISC_MIN_BLOCK / per,
                                     ctx->num_threads),
                      &a, sizeof a);
}

/* ---- NonMaxSuppression ---------------------------------------------------------------- */

typedef struct nms_item {
    double score;
    int64_t idx;
} nms_item;

typedef struct nms_args {
    const void *boxes, *scores;
    cge_dtype bt, st;
    int64_t b, c, s;                /* batches, classes, boxes */
    int64_t max_out;
    double iou, score_thr;
    bool has_score_thr, center;
    nms_item *items;                /* [b * c][s] */
    int64_t *sel;                   /* [b * c][s + 1]: count, then box indices */
    int64_t *out, cap;
} nms_args;

static int nms_cmp(const void *pa, const void *pb)
{
    const nms_item *a = pa, *b = pb;
    bool na = a->score != a->score, nb = b->score != b->score;
    if (na != nb)
        return na ? 1 : -1; /* NaN scores last */
    if (!na && a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static void nms_box(const nms_args *a, int64_t bt, int64_t i, double *y1, double *x1, double *y2,
                    double *x2)
{
    const int64_t o = (bt * a->s + i) * 4;
    double v0 = cge_load_as_double(a->bt, a->boxes, o);
    double v1 = cge_load_as_double(a->bt, a->boxes, o + 1);
    double v2 = cge_load_as_double(a->bt, a->boxes, o + 2);
    double v3 = cge_load_as_double(a->bt, a->boxes, o + 3);
    if (a->center) {
        /* [x_center, y_center, width, height] */
        *x1 = v0 - v2 / 2.0;
        *x2 = v0 + v2 / 2.0;
        *y1 = v1 - v3 / 2.0;
        *y2 = v1 + v3 / 2.0;
    } else {
        /* [y1, x1, y2, x2], any diagonal pair */
        *y1 = fmin(v0, v2);
        *y2 = fmax(v0, v2);
        *x1 = fmin(v1, v3);
        *x2 = fmax(v1, v3);
    }
}

static bool nms_suppress(const nms_args *a, int64_t bt, int64_t i, int64_t j)
{
    double ay1, ax1, ay2, ax2, by1, bx1, by2, bx2;
    nms_box(a, bt, i, &ay1, &ax1, &ay2, &ax2);
    nms_box(a, bt, j, &by1, &bx1, &by2, &bx2);
    double ix1 = fmax(ax1, bx1), ix2 = fmin(ax2, bx2), iy1 = fmax(ay1, by1), iy2 = fmin(ay2, by2);
    if (ix2 <= ix1 || iy2 <= iy1)
        return false;
    double inter = (ix2 - ix1) * (iy2 - iy1);
    double area_a = (ax2 - ax1) * (ay2 - ay1), area_b = (bx2 - bx1) * (by2 - by1);
    double uni = area_a + area_b - inter;
    if (area_a <= 0.0 || area_b <= 0.0 || uni <= 0.0)
        return false;
    return inter / uni > a->iou;
}

/* Greedy selection for one (batch, class): sel[0] = count, sel[1..] = boxes. */
static void nms_class(const nms_args *a, int64_t pair, nms_item *items, int64_t *sel)
{
    int64_t bt = pair / a->c, n = 0, count = 0;
    for (int64_t i = 0; i < a->s; i++) {
        double sc = cge_load_as_double(a->st, a->scores, pair * a->s + i);
        if (!a->has_score_thr || sc > a->score_thr)
            items[n++] = (nms_item){sc, i};
    }
    qsort(items, (size_t)n, sizeof *items, nms_cmp);
    for (int64_t k = 0; k < n && count < a->max_out; k++) {
        bool keep = true;
        for (int64_t j = 0; j < count && keep; j++)
            keep = !nms_suppress(a, bt, items[k].idx, sel[1 + j]);
        if (keep)
            sel[1 + count++] = items[k].idx;
    }
    sel[0] = count;
}

static void nms_block(int64_t b, int64_t nb, void *p)
{
    const nms_args *a = p;
    int64_t lo, hi;
    cge_block_range(a->b * a->c, b, nb, &lo, &hi);
    for (int64_t pair = lo; pair < hi; pair++)
        nms_class(a, pair, a->items + pair * a->s, a->sel + pair * (a->s + 1));
}

static void nms_gather(int64_t b, int64_t nb, void *p)
{
    const nms_args *a = p;
    int64_t k = 0;
    for (int64_t pair = 0; pair < a->b * a->c; pair++) {
        const int64_t *sel = a->sel + pair * (a->s + 1);
        for (int64_t j = 0; j < sel[0] && k < a->cap; j++, k++) {
            a->out[3 * k] = pair / a->c;
            a->out[3 * k + 1] = pair % a->c;
            a->out[3 * k + 2] = sel[1 + j];
        }
    }
}

static bool nms_shapes(const cge_shape *bx, const cge_shape *sc)
{
    if (bx->rank != 3 || sc->rank != 3)
        return false;
    if (known(bx->dims[2]) && bx->dims[2] != 4)
        return false;
    if (known(bx->dims[0]) && known(sc->dims[0]) && bx->dims[0] != sc->dims[0])
        return false;
    return !(known(bx->dims[1]) && known(sc->dims[2]) && bx->dims[1] != sc->dims[2]);
}

/* Scalar parameters from the optional inputs 2..4 (values at hand). */
static void nms_params(nms_args *a, const cge_dtype *dts, const void *const *vals)
{
    a->max_out = vals[0] ? cge_load_as_i64(dts[0], vals[0], 0) : 0;
    if (a->max_out < 0)
        a->max_out = 0;
    a->iou = vals[1] ? cge_load_as_double(dts[1], vals[1], 0) : 0.0;
    a->has_score_thr = vals[2] != NULL;
    a->score_thr = vals[2] ? cge_load_as_double(dts[2], vals[2], 0) : 0.0;
}

static cge_status nms_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *bx = &ctx->inputs[0], *sc = &ctx->inputs[1];
    cge_status st = need_float(ctx, 0, "boxes");
    if (!st)
        st = need_float(ctx, 1, "scores");
    if (st)
        return st;
    if (!nms_shapes(&bx->shape, &sc->shape))
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "expects boxes [B, S, 4] and scores [B, C, S]");
    for (int32_t i = 2; i < 5; i++)
        if (cge_meta_has_input(ctx, i) && cge_shape_numel(&ctx->inputs[i].shape) != 1)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "input %d must hold exactly one value", (int)i);
    ctx->outputs[0].dtype = CGE_I64;
    ctx->outputs[0].shape = CGE_SHAPE(CGE_DIM_DYNAMIC, 3);
    /* The count depends on every value: computed here when all are at hand. */
    const void *vals[5];
    cge_dtype dts[3] = {CGE_DTYPE_UNDEFINED, CGE_DTYPE_UNDEFINED, CGE_DTYPE_UNDEFINED};
    for (int32_t i = 0; i < 5; i++) {
        vals[i] = cge_meta_input_value(ctx, i);
        if (!vals[i] && (i < 2 || cge_meta_has_input(ctx, i)))
            return CGE_OK;
        if (i >= 2)
            dts[i - 2] = cge_meta_has_input(ctx, i) ? ctx->inputs[i].dtype : CGE_DTYPE_UNDEFINED;
    }
    if (!cge_shape_is_static(&bx->shape) || !cge_shape_is_static(&sc->shape))
        return CGE_OK;
    nms_args a;
    memset(&a, 0, sizeof a);
    a.boxes = vals[0];
    a.scores = vals[1];
    a.bt = bx->dtype;
    a.st = sc->dtype;
    a.b = sc->shape.dims[0];
    a.c = sc->shape.dims[1];
    a.s = sc->shape.dims[2];
    a.center = cge_attrs_get_int(ctx->attrs, "center_point_box", 0) != 0;
    nms_params(&a, dts, vals + 2);
    nms_item *items = malloc(sizeof *items * (size_t)(a.s > 0 ? a.s : 1));
    int64_t *sel = malloc(sizeof *sel * (size_t)(a.s + 1));
    if (!items || !sel) {
        free(items);
        free(sel);
        return cge_meta_error(ctx, CGE_ERR_NO_MEMORY, "no memory for %lld boxes",
                              (long long)a.s);
    }
    int64_t total = 0;
    for (int64_t pair = 0; pair < a.b * a.c; pair++) {
        nms_class(&a, pair, items, sel);
        total += sel[0];
    }
    free(items);
    free(sel);
    ctx->outputs[0].shape.dims[0] = total;
    return CGE_OK;
}

static size_t nms_workspace(const cge_kernel_ctx *ctx)
{
    const cge_shape *sc = &ctx->inputs[1].shape;
    if (sc->rank != 3)
        return 0;
    size_t pairs = (size_t)(sc->dims[0] * sc->dims[1]), s = (size_t)sc->dims[2];
    return pairs * s * sizeof(nms_item) + pairs * (s + 1) * sizeof(int64_t);
}

/* Reads the scalar inputs on the stream (they may be produced by earlier
 * tasks), then selects per (batch, class) and gathers. */
typedef struct nms_launch_args {
    nms_args a;
    const void *param_vals[3];
    cge_dtype param_dts[3];
} nms_launch_args;

static void nms_block_params(int64_t b, int64_t nb, void *p)
{
    nms_launch_args *l = p;
    nms_args a = l->a;
    nms_params(&a, l->param_dts, l->param_vals);
    nms_block(b, nb, &a);
}

static void nms_gather_params(int64_t b, int64_t nb, void *p)
{
    nms_launch_args *l = p;
    nms_gather(b, nb, &l->a);
}

static cge_status nms_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *bx = &ctx->inputs[0], *sc = &ctx->inputs[1];
    cge_tensor *y = &ctx->outputs[0];
    if (!nms_shapes(&bx->shape, &sc->shape) || !is_float_dt(bx->dtype) || !is_float_dt(sc->dtype) ||
        y->dtype != CGE_I64 || y->shape.rank != 2 || y->shape.dims[1] != 3)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "inputs or output the meta did not accept");
    nms_launch_args l;
    memset(&l, 0, sizeof l);
    nms_args *a = &l.a;
    a->boxes = bx->data;
    a->scores = sc->data;
    a->bt = bx->dtype;
    a->st = sc->dtype;
    a->b = sc->shape.dims[0];
    a->c = sc->shape.dims[1];
    a->s = sc->shape.dims[2];
    a->center = cge_attrs_get_int(ctx->attrs, "center_point_box", 0) != 0;
    a->out = y->data;
    a->cap = y->shape.dims[0];
    for (int32_t i = 0; i < 3; i++) {
        l.param_vals[i] = cge_kernel_has_input(ctx, i + 2) ? ctx->inputs[i + 2].data : NULL;
        l.param_dts[i] = l.param_vals[i] ? ctx->inputs[i + 2].dtype : CGE_DTYPE_UNDEFINED;
    }
    if (a->cap == 0)
        return CGE_OK;
    if (!a->out)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing output buffer");
    /* A meta that ran without values sized the output by the values later:
     * rows beyond the selection stay as they were, so clear them first. */
    cge_status st = cge_memset_async(stream, a->out, 0, (size_t)a->cap * 3 * sizeof(int64_t));
    if (st || a->b * a->c * a->s == 0)
        return st;
    if (!a->boxes || !a->scores)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input buffer");
    if (!ctx->workspace || ctx->workspace_size < nms_workspace(ctx))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "workspace missing or too small");
    a->items = ctx->workspace;
    a->sel = (int64_t *)(a->items + a->b * a->c * a->s);
    st = cge_launch(stream, nms_block_params, cge_blocks_for(a->b * a->c, 1, ctx->num_threads), &l,
                    sizeof l);
    if (!st)
        st = cge_launch(stream, nms_gather_params, 1, &l, sizeof l);
    return st;
}

/* ---- Unique --------------------------------------------------------------------------- */

typedef struct uq_ctx {
    const void *x;
    cge_dtype dt;
    int64_t outer, len, inner;      /* x viewed as [outer, len, inner]; rows along len */
} uq_ctx;

static int uq_cmp_elem(cge_dtype t, const void *p, int64_t i, int64_t j)
{
    if (cge_dtype_is_float(t)) {
        double a = cge_load_as_double(t, p, i), b = cge_load_as_double(t, p, j);
        bool na = a != a, nb = b != b;
        if (na || nb)
            return na == nb ? 0 : na ? 1 : -1; /* NaN sorts last, NaNs are equal */
        return a < b ? -1 : a > b;
    }
    if (t == CGE_U64) {
        uint64_t a = ((const uint64_t *)p)[i], b = ((const uint64_t *)p)[j];
        return a < b ? -1 : a > b;
    }
    int64_t a = cge_load_as_i64(t, p, i), b = cge_load_as_i64(t, p, j);
    return a < b ? -1 : a > b;
}

/* Rows compare lexicographically over (outer, inner), as numpy's unique. */
static int uq_cmp_rows(const uq_ctx *u, int64_t r1, int64_t r2)
{
    for (int64_t o = 0; o < u->outer; o++)
        for (int64_t k = 0; k < u->inner; k++) {
            int64_t base = o * u->len * u->inner + k;
            int c = uq_cmp_elem(u->dt, u->x, base + r1 * u->inner, base + r2 * u->inner);
            if (c)
                return c;
        }
    return 0;
}

/* Stable bottom-up merge sort of ord[0..n) by row value. */
static void uq_sort(const uq_ctx *u, int64_t *ord, int64_t *tmp, int64_t n)
{
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                tmp[k++] = uq_cmp_rows(u, ord[j], ord[i]) < 0 ? ord[j++] : ord[i++];
            while (i < mid)
                tmp[k++] = ord[i++];
            while (j < hi)
                tmp[k++] = ord[j++];
        }
        memcpy(ord, tmp, sizeof *ord * (size_t)n);
    }
}

/* Scratch of 4 * len int64. Writes (when not NULL) first[U], count[U] and
 * inverse[len] in output order and returns U. */
static int64_t uq_run(const uq_ctx *u, bool sorted, int64_t *scratch, int64_t *first,
                      int64_t *count, int64_t *inverse)
{
    int64_t n = u->len, *ord = scratch, *tmp = scratch + n, *grp = scratch + 2 * n,
            *gpos = scratch + 3 * n;
    for (int64_t i = 0; i < n; i++)
        ord[i] = i;
    uq_sort(u, ord, tmp, n);
    /* groups in sorted order: tmp[g] = first index (the smallest, by
     * stability), grp[row] = group of each row */
    int64_t groups = 0;
    for (int64_t k = 0; k < n; k++) {
        if (k == 0 || uq_cmp_rows(u, ord[k - 1], ord[k]) != 0)
            tmp[groups++] = ord[k];
        grp[ord[k]] = groups - 1;
    }
    /* output position of each group: sorted order, or order of first
     * appearance (rows scanned in index order) */
    if (sorted) {
        for (int64_t g = 0; g < groups; g++)
            gpos[g] = g;
    } else {
        for (int64_t g = 0; g < groups; g++)
            gpos[g] = -1;
        int64_t next = 0;
        for (int64_t i = 0; i < n; i++)
            if (gpos[grp[i]] < 0)
                gpos[grp[i]] = next++;
    }
    if (count)
        for (int64_t g = 0; g < groups; g++)
            count[g] = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t pos = gpos[grp[i]];
        if (inverse)
            inverse[i] = pos;
        if (count)
            count[pos]++;
    }
    if (first)
        for (int64_t g = 0; g < groups; g++)
            first[gpos[g]] = tmp[g];
    return groups;
}

static bool uq_view(const cge_shape *s, const cge_attrs *attrs, uq_ctx *u, int32_t *axis)
{
    const cge_attr *ax = cge_attrs_find(attrs, "axis");
    u->outer = u->inner = 1;
    if (!ax || ax->kind != CGE_ATTR_INT) {
        *axis = -1;
        u->len = cge_shape_numel(s);
        return true;
    }
    if (!cge_axis_normalize(ax->i, s->rank, false, axis))
        return false;
    for (int32_t i = 0; i < s->rank; i++) {
        if (i < *axis)
            u->outer *= s->dims[i];
        else if (i > *axis)
            u->inner *= s->dims[i];
    }
    u->len = s->dims[*axis];
    return true;
}

static cge_status unique_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *x = &ctx->inputs[0];
    uq_ctx u;
    int32_t axis;
    memset(&u, 0, sizeof u);
    if (!uq_view(&x->shape, ctx->attrs, &u, &axis))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "axis %lld is outside the rank-%d input",
                              (long long)cge_attrs_get_int(ctx->attrs, "axis", 0),
                              (int)x->shape.rank);
    int64_t groups = CGE_DIM_DYNAMIC;
    const void *v = cge_meta_input_value(ctx, 0);
    if (v && cge_shape_is_static(&x->shape)) {
        u.x = v;
        u.dt = x->dtype;
        int64_t *scratch = malloc(sizeof(int64_t) * 4 * (size_t)(u.len > 0 ? u.len : 1));
        if (!scratch)
            return cge_meta_error(ctx, CGE_ERR_NO_MEMORY, "no memory for %lld rows",
                                  (long long)u.len);
        groups = uq_run(&u, true, scratch, NULL, NULL, NULL);
        free(scratch);
    }
    ctx->outputs[0].dtype = x->dtype;
    if (axis < 0) {
        ctx->outputs[0].shape = CGE_SHAPE(groups);
    } else {
        ctx->outputs[0].shape = x->shape;
        ctx->outputs[0].shape.dims[axis] = groups;
    }
    int64_t len = axis < 0 ? cge_shape_numel(&x->shape) : x->shape.dims[axis];
    for (int32_t k = 1; k < ctx->num_outputs; k++) {
        ctx->outputs[k].dtype = CGE_I64;
        ctx->outputs[k].shape = CGE_SHAPE(k == 2 ? len : groups);
    }
    return CGE_OK;
}

static size_t unique_workspace(const cge_kernel_ctx *ctx)
{
    uq_ctx u;
    int32_t axis;
    if (!uq_view(&ctx->inputs[0].shape, ctx->attrs, &u, &axis))
        return 0;
    /* scratch, then first and count (U <= len) */
    return sizeof(int64_t) * 6 * (size_t)(u.len > 0 ? u.len : 1);
}

typedef struct unique_args {
    uq_ctx u;
    bool sorted;
    int64_t *scratch;
    void *y;
    int64_t *indices, *inverse, *counts;
    int64_t cap;                    /* U the output was sized for */
    size_t esize;
    char node[96];
} unique_args;

static void unique_block(int64_t b, int64_t nb, void *p)
{
    const unique_args *a = p;
    const uq_ctx *u = &a->u;
    int64_t *first = a->scratch + 4 * u->len, *count = a->scratch + 5 * u->len;
    int64_t *inverse = a->inverse;
    int64_t groups = uq_run(u, a->sorted, a->scratch, first, count, NULL);
    if (groups != a->cap) {
        cge_kernel_fail(CGE_ERR_SHAPE, "%s: %lld unique values, the output was sized for %lld",
                        a->node, (long long)groups, (long long)a->cap);
        return;
    }
    /* recompute the inverse (uq_run's scratch still holds the groups) */
    if (inverse) {
        const int64_t *grp = a->scratch + 2 * u->len, *gpos = a->scratch + 3 * u->len;
        for (int64_t i = 0; i < u->len; i++)
            inverse[i] = gpos[grp[i]];
    }
    for (int64_t g = 0; g < groups; g++) {
        if (a->indices)
            a->indices[g] = first[g];
        if (a->counts)
            a->counts[g] = count[g];
        if (a->y && u->inner > 0) {
            /* copy row first[g] into output row g */
            for (int64_t o = 0; o < u->outer; o++)
                memcpy((char *)a->y + (size_t)((o * groups + g) * u->inner) * a->esize,
                       (const char *)u->x + (size_t)((o * u->len + first[g]) * u->inner) * a->esize,
                       (size_t)u->inner * a->esize);
        }
    }
}

static cge_status unique_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *x = &ctx->inputs[0];
    unique_args a;
    memset(&a, 0, sizeof a);
    int32_t axis;
    if (!uq_view(&x->shape, ctx->attrs, &a.u, &axis))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "axis the meta did not accept");
    a.u.x = x->data;
    a.u.dt = x->dtype;
    a.sorted = cge_attrs_get_int(ctx->attrs, "sorted", 1) != 0;
    a.y = k_output(ctx, 0);
    a.indices = k_output(ctx, 1);
    a.inverse = k_output(ctx, 2);
    a.counts = k_output(ctx, 3);
    a.esize = cge_dtype_size(x->dtype);
    a.cap = axis < 0 ? ctx->outputs[0].shape.dims[0] : ctx->outputs[0].shape.dims[axis];
    node_label(ctx, a.node, sizeof a.node);
    if (a.u.len == 0)
        return CGE_OK;
    if (!a.u.x && a.u.outer * a.u.inner > 0)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input buffer");
    if (!ctx->workspace || ctx->workspace_size < unique_workspace(ctx))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "workspace missing or too small");
    a.scratch = ctx->workspace;
    /* sorting is one sequential pass: one block */
    return cge_launch(stream, unique_block, 1, &a, sizeof a);
}

/* ---- TfIdfVectorizer ------------------------------------------------------------------ */

enum { TFIDF_TF, TFIDF_IDF, TFIDF_TFIDF };

typedef struct tfidf_cfg {
    int mode;
    int64_t min_n, max_n, max_skip;
    const int64_t *counts, *indexes, *pool;
    int64_t ncounts, nindexes, npool;
    const float *weights;
    int64_t nweights;
    int64_t out_dim;
} tfidf_cfg;

/* Checks the attributes; on error writes why into msg and returns false. */
static bool tfidf_config(const cge_attrs *attrs, tfidf_cfg *c, char *msg, size_t size)
{
    memset(c, 0, sizeof *c);
    const char *mode = cge_attrs_get_string(attrs, "mode", "");
    c->mode = !strcmp(mode, "TF") ? TFIDF_TF : !strcmp(mode, "IDF") ? TFIDF_IDF
              : !strcmp(mode, "TFIDF") ? TFIDF_TFIDF : -1;
    c->min_n = cge_attrs_get_int(attrs, "min_gram_length", 0);
    c->max_n = cge_attrs_get_int(attrs, "max_gram_length", 0);
    c->max_skip = cge_attrs_get_int(attrs, "max_skip_count", 0);
    c->ncounts = cge_attrs_get_ints(attrs, "ngram_counts", &c->counts);
    c->nindexes = cge_attrs_get_ints(attrs, "ngram_indexes", &c->indexes);
    c->npool = cge_attrs_get_ints(attrs, "pool_int64s", &c->pool);
    c->nweights = cge_attrs_get_floats(attrs, "weights", &c->weights);
    if (cge_attrs_find(attrs, "pool_strings")) {
        snprintf(msg, size, "pool_strings (string n-grams) is not supported: cge has no string "
                            "tensors; only int32/int64 input with pool_int64s");
        return false;
    }
    if (c->mode < 0) {
        snprintf(msg, size, "mode is '%s'; it must be TF, IDF or TFIDF", mode);
        return false;
    }
    if (c->min_n < 1 || c->max_n < c->min_n || c->max_skip < 0 || c->ncounts < c->max_n ||
        c->nindexes < 0 || c->npool < 0) {
        snprintf(msg, size, "needs 1 <= min_gram_length <= max_gram_length <= len(ngram_counts), "
                            "max_skip_count >= 0, ngram_indexes and pool_int64s");
        return false;
    }
    /* n-grams of length n + 1 start at counts[n] in the pool */
    int64_t total = 0;
    for (int64_t n = 0; n < c->ncounts; n++) {
        int64_t start = c->counts[n], end = n + 1 < c->ncounts ? c->counts[n + 1] : c->npool;
        if (start < 0 || end < start || end > c->npool || (end - start) % (n + 1)) {
            snprintf(msg, size, "ngram_counts[%lld] = %lld does not split pool_int64s into "
                                "%lld-grams", (long long)n, (long long)start, (long long)(n + 1));
            return false;
        }
        total += (end - start) / (n + 1);
    }
    if (total != c->nindexes || (c->nweights >= 0 && c->nweights != c->nindexes)) {
        snprintf(msg, size, "the pool holds %lld n-grams; ngram_indexes has %lld and weights %lld",
                 (long long)total, (long long)c->nindexes, (long long)c->nweights);
        return false;
    }
    c->out_dim = 0;
    for (int64_t i = 0; i < c->nindexes; i++) {
        if (c->indexes[i] < 0) {
            snprintf(msg, size, "ngram_indexes[%lld] is negative", (long long)i);
            return false;
        }
        if (c->indexes[i] + 1 > c->out_dim)
            c->out_dim = c->indexes[i] + 1;
    }
    return true;
}

static cge_status tfidf_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *x = &ctx->inputs[0];
    tfidf_cfg c;
    char msg[256];
    if (!tfidf_config(ctx->attrs, &c, msg, sizeof msg))
        return cge_meta_error(ctx, CGE_ERR_UNSUPPORTED, "%s", msg);
    if (!(MISC_IDX_DT & CGE_DT(x->dtype)))
        return cge_meta_error(ctx, CGE_ERR_DTYPE,
                              "X is %s; only int32 and int64 input is supported (no strings)",
                              cge_dtype_name(x->dtype));
    if (x->shape.rank != 1 && x->shape.rank != 2)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "X has rank %d; it must be [C] or [N, C]",
                              (int)x->shape.rank);
    ctx->outputs[0].dtype = CGE_F32;
    ctx->outputs[0].shape = x->shape.rank == 1 ? CGE_SHAPE(c.out_dim)
                                                : CGE_SHAPE(x->shape.dims[0], c.out_dim);
    return CGE_OK;
}

typedef struct tfidf_args {
    tfidf_cfg c;
    const void *x;
    cge_dtype dt;
    float *y;
    int64_t rows, len;
} tfidf_args;

static void tfidf_block(int64_t b, int64_t nb, void *p)
{
    const tfidf_args *a = p;
    const tfidf_cfg *c = &a->c;
    int64_t lo, hi;
    cge_block_range(a->rows, b, nb, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        float *out = a->y + r * c->out_dim;
        memset(out, 0, sizeof *out * (size_t)c->out_dim);
        int64_t base = r * a->len, id0 = 0;
        for (int64_t n = 1; n <= c->max_n; n++) {
            int64_t start = c->counts[n - 1], end = n < c->ncounts ? c->counts[n] : c->npool;
            int64_t count = (end - start) / n;
            if (n >= c->min_n && count > 0) {
                /* unigrams are counted once; longer n-grams once per skip */
                int64_t skips = n == 1 ? 1 : c->max_skip + 1;
                for (int64_t s = 1; s <= skips; s++)
                    for (int64_t i = 0; i + (n - 1) * s < a->len; i++)
                        for (int64_t g = 0; g < count; g++) {
                            const int64_t *gram = c->pool + start + g * n;
                            int64_t k = 0;
                            while (k < n &&
                                   cge_load_as_i64(a->dt, a->x, base + i + k * s) == gram[k])
                                k++;
                            if (k == n) {
                                out[c->indexes[id0 + g]] += 1.0f;
                                break;
                            }
                        }
            }
            id0 += count;
        }
        if (c->mode == TFIDF_TF)
            continue;
        for (int64_t id = 0; id < c->nindexes; id++) {
            float w = c->nweights >= 0 ? c->weights[id] : 1.0f, *o = out + c->indexes[id];
            *o = c->mode == TFIDF_IDF ? (*o > 0.0f ? w : 0.0f) : *o * w;
        }
    }
}

static cge_status tfidf_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *x = &ctx->inputs[0];
    tfidf_args a;
    char msg[256];
    memset(&a, 0, sizeof a);
    if (!tfidf_config(ctx->attrs, &a.c, msg, sizeof msg))
        return cge_kernel_error(ctx, CGE_ERR_UNSUPPORTED, "%s", msg);
    if (!(MISC_IDX_DT & CGE_DT(x->dtype)) || (x->shape.rank != 1 && x->shape.rank != 2) ||
        ctx->outputs[0].dtype != CGE_F32)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "input the meta did not accept");
    a.rows = x->shape.rank == 1 ? 1 : x->shape.dims[0];
    a.len = x->shape.dims[x->shape.rank - 1];
    a.x = x->data;
    a.dt = x->dtype;
    a.y = ctx->outputs[0].data;
    if (a.rows * a.c.out_dim == 0)
        return CGE_OK;
    if (!a.y || (a.len > 0 && !a.x))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    int64_t per = (a.len + 1) * (a.c.nindexes + 1);
    return cge_launch(stream, tfidf_block,
                      cge_blocks_for(a.rows, per >= MISC_MIN_BLOCK ? 1 : MISC_MIN_BLOCK / per,
                                     ctx->num_threads),
                      &a, sizeof a);
}

/* ---- random generators ---------------------------------------------------------------- */

/* A counter-based generator: element i's numbers are a hash of (key, i), so
 * results do not depend on how the work is split into blocks. With a `seed`
 * attribute the key comes from the seed and every run gives the same values;
 * without one a fresh key is drawn on the stream at each run (also in a
 * replay), from the system's entropy. */
static inline uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static inline double rng_uniform(uint64_t key, uint64_t i)
{
    return (double)(mix64(key ^ mix64(i)) >> 11) * 0x1.0p-53;
}

static inline double rng_normal(uint64_t key, uint64_t i)
{
    double u1 = 1.0 - rng_uniform(key, 2 * i), u2 = rng_uniform(key, 2 * i + 1);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

enum { RNG_UNIFORM, RNG_NORMAL, RNG_BERNOULLI, RNG_MULTINOMIAL };

typedef struct rng_args {
    int kind;
    uint64_t *key;                  /* workspace slot written by rng_key_block */
    bool seeded;
    uint64_t seed_key;
    const void *x;                  /* Bernoulli probabilities, Multinomial logits */
    cge_dtype xt, yt;
    void *y;
    int64_t numel;
    double a, b;                    /* low/high, mean/scale */
    int64_t classes, samples;       /* Multinomial */
    double *cdf;                    /* Multinomial workspace [rows][classes] */
} rng_args;

static void rng_key_block(int64_t b, int64_t nb, void *p)
{
    const rng_args *a = p;
    uint64_t k = 0;
    if (a->seeded) {
        k = a->seed_key;
    } else {
        struct timespec ts;
        if (getrandom(&k, sizeof k, GRND_NONBLOCK) != (ssize_t)sizeof k) {
            clock_gettime(CLOCK_MONOTONIC, &ts);
            k = mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^
                      (uint64_t)(uintptr_t)a->key);
        }
    }
    *a->key = k;
}

static void rng_block(int64_t b, int64_t nb, void *p)
{
    const rng_args *a = p;
    uint64_t key = *a->key;
    int64_t lo, hi;
    if (a->kind == RNG_MULTINOMIAL) {
        int64_t rows = a->numel / (a->samples > 0 ? a->samples : 1);
        cge_block_range(rows, b, nb, &lo, &hi);
        for (int64_t r = lo; r < hi; r++) {
            double *cdf = a->cdf + r * a->classes, mx = -INFINITY, tot = 0.0;
            for (int64_t k = 0; k < a->classes; k++) {
                double v = cge_load_as_double(a->xt, a->x, r * a->classes + k);
                mx = v > mx ? v : mx;
            }
            for (int64_t k = 0; k < a->classes; k++) {
                tot += exp(cge_load_as_double(a->xt, a->x, r * a->classes + k) - mx);
                cdf[k] = tot;
            }
            for (int64_t s = 0; s < a->samples; s++) {
                double u = rng_uniform(key, (uint64_t)(r * a->samples + s)) * tot;
                int64_t l = 0, h = a->classes - 1;
                while (l < h) {            /* first class with cdf > u */
                    int64_t m = (l + h) / 2;
                    if (cdf[m] > u)
                        h = m;
                    else
                        l = m + 1;
                }
                cge_store_from_double(a->yt, a->y, r * a->samples + s, (double)l);
            }
        }
        return;
    }
    cge_block_range(a->numel, b, nb, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        double v;
        if (a->kind == RNG_UNIFORM)
            v = a->a + (a->b - a->a) * rng_uniform(key, (uint64_t)i);
        else if (a->kind == RNG_NORMAL)
            v = a->a + a->b * rng_normal(key, (uint64_t)i);
        else
            v = rng_uniform(key, (uint64_t)i) < cge_load_as_double(a->xt, a->x, i) ? 1.0 : 0.0;
        cge_store_from_double(a->yt, a->y, i, v);
    }
}

/* The output dtype: the dtype attribute, else `dflt`. */
static cge_dtype rng_dtype(const cge_attrs *attrs, cge_dtype dflt)
{
    const cge_attr *d = cge_attrs_find(attrs, "dtype");
    return d && d->kind == CGE_ATTR_INT ? (cge_dtype)d->i : dflt;
}

static cge_status rng_check_float_out(cge_infer_ctx *ctx, cge_dtype t)
{
    if (t <= CGE_DTYPE_UNDEFINED || t >= CGE_DTYPE_MAX || !is_float_dt(t))
        return cge_meta_error(ctx, CGE_ERR_DTYPE,
                              "output dtype %d is not a float type (float16, float, double, "
                              "bfloat16)", (int)t);
    return CGE_OK;
}

static cge_status rng_generate_infer(cge_infer_ctx *ctx)
{
    const int64_t *dims = NULL;
    int64_t n = cge_attrs_get_ints(ctx->attrs, "shape", &dims);
    cge_dtype t = rng_dtype(ctx->attrs, CGE_F32);
    cge_status st = rng_check_float_out(ctx, t);
    if (st)
        return st;
    if (n < 0 || n > CGE_MAX_RANK)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "shape must list at most %d dims",
                              CGE_MAX_RANK);
    cge_shape s = {.rank = (int32_t)n};
    for (int64_t i = 0; i < n; i++) {
        if (dims[i] < 0)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "shape[%lld] is %lld", (long long)i,
                                  (long long)dims[i]);
        s.dims[i] = dims[i];
    }
    ctx->outputs[0].dtype = t;
    ctx->outputs[0].shape = s;
    return CGE_OK;
}

static cge_status rng_like_infer(cge_infer_ctx *ctx)
{
    cge_dtype t = rng_dtype(ctx->attrs, ctx->inputs[0].dtype);
    cge_status st = rng_check_float_out(ctx, t);
    if (st)
        return st;
    ctx->outputs[0].dtype = t;
    ctx->outputs[0].shape = ctx->inputs[0].shape;
    return CGE_OK;
}

static cge_status bernoulli_infer(cge_infer_ctx *ctx)
{
    cge_status st = need_float(ctx, 0, "input");
    if (st)
        return st;
    cge_dtype t = rng_dtype(ctx->attrs, ctx->inputs[0].dtype);
    if (t <= CGE_DTYPE_UNDEFINED || t >= CGE_DTYPE_MAX || !(CGE_DT_ALL & CGE_DT(t)))
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "dtype %d is not a numeric type or bool",
                              (int)t);
    ctx->outputs[0].dtype = t;
    ctx->outputs[0].shape = ctx->inputs[0].shape;
    return CGE_OK;
}

static cge_status multinomial_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *x = &ctx->inputs[0];
    cge_status st = need_float(ctx, 0, "input");
    if (st)
        return st;
    cge_dtype t = rng_dtype(ctx->attrs, CGE_I32);
    int64_t samples = cge_attrs_get_int(ctx->attrs, "sample_size", 1);
    if (t != CGE_I32 && t != CGE_I64)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "dtype %d must be int32 (6) or int64 (7)",
                              (int)t);
    if (x->shape.rank != 2 || samples < 1)
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "input must be [batch, classes] and sample_size >= 1");
    if (known(x->shape.dims[1]) && x->shape.dims[1] < 1)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "input has no classes");
    ctx->outputs[0].dtype = t;
    ctx->outputs[0].shape = CGE_SHAPE(x->shape.dims[0], samples);
    return CGE_OK;
}

static size_t rng_workspace(const cge_kernel_ctx *ctx)
{
    size_t n = sizeof(uint64_t) * 8; /* the key, kept 64 bytes apart from the rest */
    if (!strcmp(ctx->op_type ? ctx->op_type : "", "Multinomial") && ctx->num_inputs > 0)
        n += sizeof(double) * (size_t)cge_shape_numel(&ctx->inputs[0].shape);
    return n;
}

static cge_status rng_launch(const cge_kernel_ctx *ctx, cge_stream *stream, int kind)
{
    cge_tensor *y = &ctx->outputs[0];
    rng_args a;
    memset(&a, 0, sizeof a);
    a.kind = kind;
    a.y = y->data;
    a.yt = y->dtype;
    a.numel = cge_shape_numel(&y->shape);
    const cge_attr *seed = cge_attrs_find(ctx->attrs, "seed");
    a.seeded = seed && seed->kind == CGE_ATTR_FLOAT;
    if (a.seeded) {
        uint32_t bits;
        memcpy(&bits, &seed->f, sizeof bits);
        a.seed_key = mix64(bits ^ 0x5EEDull);
    }
    if (kind == RNG_UNIFORM) {
        a.a = cge_attrs_get_float(ctx->attrs, "low", 0.0f);
        a.b = cge_attrs_get_float(ctx->attrs, "high", 1.0f);
    } else if (kind == RNG_NORMAL) {
        a.a = cge_attrs_get_float(ctx->attrs, "mean", 0.0f);
        a.b = cge_attrs_get_float(ctx->attrs, "scale", 1.0f);
    } else {
        const cge_tensor *x = &ctx->inputs[0];
        a.x = x->data;
        a.xt = x->dtype;
        if (!is_float_dt(x->dtype))
            return cge_kernel_error(ctx, CGE_ERR_DTYPE, "input must be a float type");
        if (kind == RNG_BERNOULLI && cge_shape_numel(&x->shape) != a.numel)
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output must have the input's shape");
        if (kind == RNG_MULTINOMIAL) {
            if (x->shape.rank != 2 || y->shape.rank != 2 || y->shape.dims[0] != x->shape.dims[0] ||
                (y->dtype != CGE_I32 && y->dtype != CGE_I64) || x->shape.dims[1] < 1)
                return cge_kernel_error(ctx, CGE_ERR_SHAPE, "expects [batch, classes] logits and "
                                        "an int32/int64 [batch, samples] output");
            a.classes = x->shape.dims[1];
            a.samples = y->shape.dims[1];
        }
    }
    if (!is_float_dt(a.yt) && kind != RNG_BERNOULLI && kind != RNG_MULTINOMIAL)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "output must be a float type");
    if (a.numel == 0)
        return CGE_OK;
    if (!a.y || (kind >= RNG_BERNOULLI && !a.x))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    if (!ctx->workspace || ctx->workspace_size < rng_workspace(ctx))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "workspace missing or too small");
    a.key = ctx->workspace;
    a.cdf = (double *)((char *)ctx->workspace + sizeof(uint64_t) * 8);
    cge_status st = cge_launch(stream, rng_key_block, 1, &a, sizeof a);
    if (st)
        return st;
    int64_t work = kind == RNG_MULTINOMIAL ? a.numel / a.samples : a.numel;
    int64_t per = kind == RNG_MULTINOMIAL ? a.classes + a.samples * 8 : 1;
    return cge_launch(stream, rng_block,
                      cge_blocks_for(work, per >= MISC_MIN_BLOCK ? 1 : MISC_MIN_BLOCK / per,
                                     ctx->num_threads),
                      &a, sizeof a);
}

static cge_status uniform_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return rng_launch(ctx, stream, RNG_UNIFORM);
}

static cge_status normal_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return rng_launch(ctx, stream, RNG_NORMAL);
}

static cge_status bernoulli_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return rng_launch(ctx, stream, RNG_BERNOULLI);
}

static cge_status multinomial_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return rng_launch(ctx, stream, RNG_MULTINOMIAL);
}

/* ---- definitions ---------------------------------------------------------------------- */

#define KDEF(DT, FN, WS)                                                                   \
    {{.engine = "cpu", .dtypes = DT, .launch = FN, .workspace_size = WS, .inplace_input = -1}}
#define OPDEF(NAME, SINCE, IN, NIN, OUT, NOUT, ATTRS, NATTRS, INFER, K, DOC)                \
    {                                                                                      \
        .name = NAME, .domain = CGE_DOMAIN_DEFAULT, .since_version = SINCE, .inputs = IN,  \
        .num_inputs = NIN, .outputs = OUT, .num_outputs = NOUT, .attrs = ATTRS,            \
        .num_attrs = NATTRS, .infer = INFER, .kernels = K, .num_kernels = 1, .doc = DOC    \
    }
#define NATTR(A) ((int32_t)(sizeof A / sizeof A[0]))

static const cge_kernel_def k_castlike[] = KDEF(CGE_DT_ALL, castlike_launch, NULL);
static const cge_kernel_def k_mvn[] = KDEF(MISC_FLOAT_DT, mvn_launch, NULL);
static const cge_kernel_def k_det[] = KDEF(MISC_FLOAT_DT, det_launch, det_workspace);
static const cge_kernel_def k_gridsample[] = KDEF(MISC_FLOAT_DT, gridsample_launch, NULL);
static const cge_kernel_def k_maxunpool[] = KDEF(MISC_FLOAT_DT, maxunpool_launch, NULL);
static const cge_kernel_def k_roialign[] = KDEF(MISC_FLOAT_DT, roialign_launch, NULL);
static const cge_kernel_def k_nms[] = KDEF(MISC_FLOAT_DT, nms_launch, nms_workspace);
static const cge_kernel_def k_unique[] = KDEF(CGE_DT_ALL, unique_launch, unique_workspace);
static const cge_kernel_def k_tfidf[] = KDEF(MISC_IDX_DT, tfidf_launch, NULL);
static const cge_kernel_def k_uniform[] = KDEF(0, uniform_launch, rng_workspace);
static const cge_kernel_def k_normal[] = KDEF(0, normal_launch, rng_workspace);
static const cge_kernel_def k_bernoulli[] = KDEF(MISC_FLOAT_DT, bernoulli_launch, rng_workspace);
static const cge_kernel_def k_multinomial[] = KDEF(MISC_FLOAT_DT, multinomial_launch,
                                                   rng_workspace);

static const cge_arg_def castlike_in[] = {
    {"input", 0, CGE_DT_ALL, "tensor to convert"},
    {"target_type", 0, CGE_DT_ALL, "only its dtype is used"},
};
static const cge_arg_def castlike_out[] = {{"output", 0, CGE_DT_ALL, "input in target's dtype"}};
static const cge_arg_def float_x_in[] = {{"X", 0, MISC_FLOAT_DT, "float tensor"}};
static const cge_arg_def float_y_out[] = {{"Y", 0, MISC_FLOAT_DT, "result"}};
static const cge_arg_def det_out[] = {{"Y", 0, MISC_FLOAT_DT, "determinants [*]"}};
static const cge_arg_def gs_in[] = {
    {"X", 0, MISC_FLOAT_DT, "[N, C, H, W]"},
    {"grid", 0, MISC_FLOAT_DT, "[N, H_out, W_out, 2] sampling points (x, y) in [-1, 1]"},
};
static const cge_arg_def unpool_in[] = {
    {"X", 0, MISC_FLOAT_DT, "pooled values [N, C, d1..dn]"},
    {"I", 0, CGE_DT(CGE_I64), "MaxPool's flat indices into the unpooled tensor"},
    {"output_shape", CGE_ARG_OPTIONAL, MISC_IDX_DT, "output shape (values needed)"},
};
static const cge_arg_def roi_in[] = {
    {"X", 0, MISC_FLOAT_DT, "[N, C, H, W] feature map"},
    {"rois", 0, MISC_FLOAT_DT, "[R, 4] (x1, y1, x2, y2) in input coordinates"},
    {"batch_indices", 0, MISC_IDX_DT, "[R] image of each roi"},
};
static const cge_arg_def nms_in[] = {
    {"boxes", 0, MISC_FLOAT_DT, "[B, S, 4]"},
    {"scores", 0, MISC_FLOAT_DT, "[B, C, S]"},
    {"max_output_boxes_per_class", CGE_ARG_OPTIONAL, CGE_DT(CGE_I64), "one value; absent: 0"},
    {"iou_threshold", CGE_ARG_OPTIONAL, CGE_DT(CGE_F32), "one value; absent: 0"},
    {"score_threshold", CGE_ARG_OPTIONAL, CGE_DT(CGE_F32), "one value; absent: none"},
};
static const cge_arg_def nms_out[] = {
    {"selected_indices", 0, CGE_DT(CGE_I64), "[count, 3] (batch, class, box); count from values"}};
static const cge_arg_def unique_in[] = {{"X", 0, CGE_DT_ALL, "tensor"}};
static const cge_arg_def unique_out[] = {
    {"Y", 0, CGE_DT_ALL, "unique values (or slices along axis)"},
    {"indices", CGE_ARG_OPTIONAL, CGE_DT(CGE_I64), "first occurrence of each"},
    {"inverse_indices", CGE_ARG_OPTIONAL, CGE_DT(CGE_I64), "position in Y of each input"},
    {"counts", CGE_ARG_OPTIONAL, CGE_DT(CGE_I64), "occurrences of each"},
};
static const cge_arg_def tfidf_in[] = {{"X", 0, MISC_IDX_DT, "[C] or [N, C] token ids"}};
static const cge_arg_def tfidf_out[] = {{"Y", 0, CGE_DT(CGE_F32), "[O] or [N, O] n-gram scores"}};
static const cge_arg_def like_in[] = {{"input", 0, CGE_DT_ALL, "gives the shape (and dtype)"}};
static const cge_arg_def rng_out[] = {{"output", 0, MISC_FLOAT_DT, "random values"}};
static const cge_arg_def bern_in[] = {{"input", 0, MISC_FLOAT_DT, "probabilities of 1"}};
static const cge_arg_def bern_out[] = {{"output", 0, CGE_DT_ALL, "0 or 1"}};
static const cge_arg_def multi_in[] = {
    {"input", 0, MISC_FLOAT_DT, "[batch, classes] unnormalised log-probabilities"}};
static const cge_arg_def multi_out[] = {
    {"output", 0, MISC_IDX_DT, "[batch, sample_size] drawn classes"}};

static const cge_attr_def mvn_attrs[] = {
    {"axes", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "axes to normalise over (default [0, 2, 3])"}};
static const cge_attr_def gs_attrs[] = {
    {"align_corners", CGE_ATTR_INT, false, 0, 0.0f, NULL, "1: -1 and 1 are the corner centres"},
    {"mode", CGE_ATTR_STRING, false, 0, 0.0f, "bilinear", "bilinear, nearest or bicubic"},
    {"padding_mode", CGE_ATTR_STRING, false, 0, 0.0f, "zeros", "zeros, border or reflection"},
};
static const cge_attr_def unpool_attrs[] = {
    {"kernel_shape", CGE_ATTR_INTS, true, 0, 0.0f, NULL, "pooling kernel per spatial dim"},
    {"pads", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "begin and end pads (default 0)"},
    {"strides", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "strides (default 1)"},
};
static const cge_attr_def roi_attrs[] = {
    {"coordinate_transformation_mode", CGE_ATTR_STRING, false, 0, 0.0f, "half_pixel",
     "half_pixel or output_half_pixel (no pixel shift, rois at least 1x1)"},
    {"mode", CGE_ATTR_STRING, false, 0, 0.0f, "avg", "avg or max"},
    {"output_height", CGE_ATTR_INT, false, 1, 0.0f, NULL, "pooled height"},
    {"output_width", CGE_ATTR_INT, false, 1, 0.0f, NULL, "pooled width"},
    {"sampling_ratio", CGE_ATTR_INT, false, 0, 0.0f, NULL, "samples per bin side; 0: adaptive"},
    {"spatial_scale", CGE_ATTR_FLOAT, false, 0, 1.0f, NULL, "rois to input coordinates"},
};
static const cge_attr_def nms_attrs[] = {
    {"center_point_box", CGE_ATTR_INT, false, 0, 0.0f, NULL,
     "0: [y1, x1, y2, x2], 1: [x_center, y_center, width, height]"}};
static const cge_attr_def unique_attrs[] = {
    {"axis", CGE_ATTR_INT, false, 0, 0.0f, NULL, "slices along axis (absent: flattened)"},
    {"sorted", CGE_ATTR_INT, false, 1, 0.0f, NULL, "1: ascending, 0: order of appearance"},
};
static const cge_attr_def tfidf_attrs[] = {
    {"max_gram_length", CGE_ATTR_INT, true, 0, 0.0f, NULL, "longest n-gram"},
    {"max_skip_count", CGE_ATTR_INT, true, 0, 0.0f, NULL, "most items skipped between two"},
    {"min_gram_length", CGE_ATTR_INT, true, 0, 0.0f, NULL, "shortest n-gram"},
    {"mode", CGE_ATTR_STRING, true, 0, 0.0f, NULL, "TF, IDF or TFIDF"},
    {"ngram_counts", CGE_ATTR_INTS, true, 0, 0.0f, NULL, "pool start of each n-gram length"},
    {"ngram_indexes", CGE_ATTR_INTS, true, 0, 0.0f, NULL, "output position of each n-gram"},
    {"pool_int64s", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "the n-grams, by length"},
    {"pool_strings", CGE_ATTR_STRINGS, false, 0, 0.0f, NULL, "string n-grams: unsupported"},
    {"weights", CGE_ATTR_FLOATS, false, 0, 0.0f, NULL, "weight of each n-gram (default 1)"},
};
static const cge_attr_def uniform_attrs[] = {
    {"dtype", CGE_ATTR_INT, false, 1, 0.0f, NULL, "output dtype (default float)"},
    {"high", CGE_ATTR_FLOAT, false, 0, 1.0f, NULL, "upper bound (exclusive)"},
    {"low", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "lower bound"},
    {"seed", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "fixed seed: the same values every run"},
    {"shape", CGE_ATTR_INTS, true, 0, 0.0f, NULL, "output shape"},
};
static const cge_attr_def uniform_like_attrs[] = {
    {"dtype", CGE_ATTR_INT, false, 0, 0.0f, NULL, "output dtype (default the input's)"},
    {"high", CGE_ATTR_FLOAT, false, 0, 1.0f, NULL, "upper bound (exclusive)"},
    {"low", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "lower bound"},
    {"seed", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "fixed seed: the same values every run"},
};
static const cge_attr_def normal_attrs[] = {
    {"dtype", CGE_ATTR_INT, false, 1, 0.0f, NULL, "output dtype (default float)"},
    {"mean", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "mean"},
    {"scale", CGE_ATTR_FLOAT, false, 0, 1.0f, NULL, "standard deviation"},
    {"seed", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "fixed seed: the same values every run"},
    {"shape", CGE_ATTR_INTS, true, 0, 0.0f, NULL, "output shape"},
};
static const cge_attr_def normal_like_attrs[] = {
    {"dtype", CGE_ATTR_INT, false, 0, 0.0f, NULL, "output dtype (default the input's)"},
    {"mean", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "mean"},
    {"scale", CGE_ATTR_FLOAT, false, 0, 1.0f, NULL, "standard deviation"},
    {"seed", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "fixed seed: the same values every run"},
};
static const cge_attr_def bern_attrs[] = {
    {"dtype", CGE_ATTR_INT, false, 0, 0.0f, NULL, "output dtype (default the input's)"},
    {"seed", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "fixed seed: the same values every run"},
};
static const cge_attr_def multi_attrs[] = {
    {"dtype", CGE_ATTR_INT, false, 6, 0.0f, NULL, "int32 (6, default) or int64 (7)"},
    {"sample_size", CGE_ATTR_INT, false, 1, 0.0f, NULL, "samples per batch row"},
    {"seed", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "fixed seed: the same values every run"},
};

static const cge_op_def misc_ops[] = {
    OPDEF("CastLike", 15, castlike_in, 2, castlike_out, 1, NULL, 0, castlike_infer, k_castlike,
          "Cast to the dtype of the second input (Cast's conversion rules)."),
    OPDEF("MeanVarianceNormalization", 13, float_x_in, 1, float_y_out, 1, mvn_attrs,
          NATTR(mvn_attrs), mvn_infer, k_mvn,
          "(X - mean) / (std + 1e-9), mean and std over axes."),
    OPDEF("Det", 11, float_x_in, 1, det_out, 1, NULL, 0, det_infer, k_det,
          "Determinants of square matrices [*, M, M] (LU with partial pivoting)."),
    OPDEF("GridSample", 16, gs_in, 2, float_y_out, 1, gs_attrs, NATTR(gs_attrs),
          gridsample_infer, k_gridsample,
          "Samples X at grid points (2-D): bilinear, nearest or bicubic, with padding modes."),
    OPDEF("MaxUnpool", 11, unpool_in, 3, float_y_out, 1, unpool_attrs, NATTR(unpool_attrs),
          maxunpool_infer, k_maxunpool,
          "Zeros with X's values put back at MaxPool's indices."),
    OPDEF("RoiAlign", 16, roi_in, 3, float_y_out, 1, roi_attrs, NATTR(roi_attrs),
          roialign_infer, k_roialign,
          "Bilinearly sampled, pooled (avg or max) regions of interest."),
    OPDEF("NonMaxSuppression", 11, nms_in, 5, nms_out, 1, nms_attrs, NATTR(nms_attrs), nms_infer,
          k_nms, "Greedy selection of boxes by score, dropping those overlapping a kept box."),
    OPDEF("Unique", 11, unique_in, 1, unique_out, 4, unique_attrs, NATTR(unique_attrs),
          unique_infer, k_unique,
          "Unique values or slices, first indices, inverse indices and counts."),
    OPDEF("TfIdfVectorizer", 9, tfidf_in, 1, tfidf_out, 1, tfidf_attrs, NATTR(tfidf_attrs),
          tfidf_infer, k_tfidf, "N-gram counts (TF, IDF or TFIDF) of integer token sequences."),
    OPDEF("RandomUniform", 1, NULL, 0, rng_out, 1, uniform_attrs, NATTR(uniform_attrs),
          rng_generate_infer, k_uniform, "Uniform random values in [low, high)."),
    OPDEF("RandomUniformLike", 1, like_in, 1, rng_out, 1, uniform_like_attrs,
          NATTR(uniform_like_attrs), rng_like_infer, k_uniform,
          "Uniform random values in [low, high), shaped like the input."),
    OPDEF("RandomNormal", 1, NULL, 0, rng_out, 1, normal_attrs, NATTR(normal_attrs),
          rng_generate_infer, k_normal, "Normal random values (mean, scale)."),
    OPDEF("RandomNormalLike", 1, like_in, 1, rng_out, 1, normal_like_attrs,
          NATTR(normal_like_attrs), rng_like_infer, k_normal,
          "Normal random values (mean, scale), shaped like the input."),
    OPDEF("Bernoulli", 15, bern_in, 1, bern_out, 1, bern_attrs, NATTR(bern_attrs),
          bernoulli_infer, k_bernoulli, "1 with the input's probability, else 0."),
    OPDEF("Multinomial", 7, multi_in, 1, multi_out, 1, multi_attrs, NATTR(multi_attrs),
          multinomial_infer, k_multinomial,
          "Classes drawn from the softmax of each row, sample_size per row."),
};

const cge_op_def *cge_ops_misc(int32_t *count)
{
    *count = (int32_t)(sizeof misc_ops / sizeof misc_ops[0]);
    return misc_ops;
}
