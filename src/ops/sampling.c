/* Spatial resampling of feature maps: GridSample (values at arbitrary grid
 * points, PyTorch's grid_sample), MaxUnpool (values put back where MaxPool
 * found them, the rest zero) and Col2Im (sliding-block columns summed back). */
#include <math.h>
#include <string.h>

#include "ops/builtin.h"
#include "ops/family_util.h"
#include "ops/kernel_util.h"

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
    cge_status st = cge__meta_need_float(ctx, 0, "X");
    if (!st)
        st = cge__meta_need_float(ctx, 1, "grid");
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
    if ((cge_dim_is_known(g->shape.dims[3]) && g->shape.dims[3] != 2) ||
        (cge_dim_is_known(x->shape.dims[0]) && cge_dim_is_known(g->shape.dims[0]) &&
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
    return cge__load_as_double(a->xt, a->x, plane + y * a->w + x);
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
    cge__block_range(a->n * a->ho, b, nb, &lo, &hi);
    for (int64_t row = lo; row < hi; row++) {
        int64_t n = row / a->ho, oy = row % a->ho;
        for (int64_t ox = 0; ox < a->wo; ox++) {
            int64_t gi = ((n * a->ho + oy) * a->wo + ox) * 2;
            double gx = cge__load_as_double(a->gt, a->grid, gi);
            double gy = cge__load_as_double(a->gt, a->grid, gi + 1);
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
                cge__store_from_double(a->xt, a->y, ((n * a->c + c) * a->ho + oy) * a->wo + ox, v);
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
        g->shape.dims[3] != 2 || g->shape.dims[0] != x->shape.dims[0] ||
        !cge_dtype_is_float(x->dtype) || !cge_dtype_is_float(g->dtype))
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
    int64_t min_rows = per_row >= CGE__MIN_BLOCK ? 1 : CGE__MIN_BLOCK / per_row;
    return cge_launch(stream, gs_block, cge__blocks_for(a.n * a.ho, min_rows, ctx->num_threads),
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
        out->dims[i + 2] = cge_dim_is_known(d) ? (d - 1) * s + k - pb - pe : CGE_DIM_DYNAMIC;
        if (cge_dim_is_known(d) && out->dims[i + 2] < 0)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "the unpooled dim %d would be negative",
                                  (int)(i + 2));
    }
    return CGE_OK;
}

static cge_status maxunpool_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *x = &ctx->inputs[0], *ind = &ctx->inputs[1];
    cge_shape def;
    cge_status st = cge__meta_need_float(ctx, 0, "X");
    if (st)
        return st;
    bool same = ind->dtype == CGE_I64 && ind->shape.rank == x->shape.rank;
    for (int32_t i = 0; same && i < x->shape.rank; i++)
        same = !cge_dim_is_known(ind->shape.dims[i]) || !cge_dim_is_known(x->shape.dims[i]) ||
               ind->shape.dims[i] == x->shape.dims[i];
    if (!same)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "I must be int64 with X's shape");
    st = unpool_default_shape(ctx, &x->shape, &def);
    if (st)
        return st;
    ctx->outputs[0].dtype = x->dtype;
    ctx->outputs[0].shape = def;
    if (cge__meta_has_input(ctx, 2)) {
        const cge_tensor_desc *os = &ctx->inputs[2];
        if (os->shape.rank != 1 || !(CGE__IDX_DT & CGE_DT(os->dtype)) ||
            (cge_dim_is_known(os->shape.dims[0]) && os->shape.dims[0] != x->shape.rank))
            return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                  "output_shape must be a 1-D integer tensor of %d values",
                                  (int)x->shape.rank);
        const void *v = cge__meta_input_value(ctx, 2);
        for (int32_t i = 0; i < x->shape.rank; i++) {
            int64_t d = v ? cge__load_as_i64(os->dtype, v, i) : CGE_DIM_DYNAMIC;
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
    cge__block_range(a->numel_x, b, nb, &lo, &hi);
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
    cge__kernel_label(ctx, a.node, sizeof a.node);
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

/* ---- Col2Im --------------------------------------------------------------------------- */

/* Opset 18: the inverse of im2col. input [N, C * prod(block_shape), L] holds,
 * for each of the L block positions of a sliding window over the image (with
 * strides, dilations and pads), the C * prod(block) values of that window;
 * they are summed back into the image [N, C, image_shape...] where windows
 * overlap. image_shape and block_shape are values (constant for a static
 * output shape). */

#define C2I_MAX_SP (CGE_MAX_RANK - 2)

typedef struct c2i_geom {
    int32_t sp;
    int64_t image[C2I_MAX_SP], block[C2I_MAX_SP], blocks[C2I_MAX_SP];
    int64_t stride[C2I_MAX_SP], dil[C2I_MAX_SP], pad[C2I_MAX_SP];
    int64_t K, L; /* prod(block), prod(blocks) */
} c2i_geom;

/* strides, dilations and pads, copied out of the attributes (counts -1 when
 * absent, -2 when too long), so that the kernel's blocks need no attributes. */
typedef struct c2i_attr_vals {
    int64_t ns, nd, np;
    int64_t st[C2I_MAX_SP], dl[C2I_MAX_SP], pd[2 * C2I_MAX_SP];
} c2i_attr_vals;

static int64_t c2i_copy(const cge_attrs *attrs, const char *name, int64_t *dst, int64_t cap)
{
    const int64_t *v = NULL;
    int64_t n = cge_attrs_get_ints(attrs, name, &v);
    if (n > cap)
        return -2;
    for (int64_t i = 0; i < n; i++)
        dst[i] = v[i];
    return n;
}

static void c2i_read_attrs(const cge_attrs *attrs, c2i_attr_vals *at)
{
    at->ns = c2i_copy(attrs, "strides", at->st, C2I_MAX_SP);
    at->nd = c2i_copy(attrs, "dilations", at->dl, C2I_MAX_SP);
    at->np = c2i_copy(attrs, "pads", at->pd, 2 * C2I_MAX_SP);
}

/* The attributes and the two shape vectors (values) into g; false with `err`. */
static bool c2i_geometry(const c2i_attr_vals *at, int64_t sp, cge_dtype it, const void *image,
                         cge_dtype bt, const void *block, c2i_geom *g, char *err, size_t errsz)
{
    if (sp < 1 || sp > C2I_MAX_SP) {
        snprintf(err, errsz, "image_shape and block_shape need 1 to %d values, not %lld",
                 C2I_MAX_SP, (long long)sp);
        return false;
    }
    int64_t ns = at->ns, nd = at->nd, np = at->np;
    const int64_t *st = at->st, *dl = at->dl, *pd = at->pd;
    if ((ns != -1 && ns != sp) || (nd != -1 && nd != sp) || (np != -1 && np != 2 * sp)) {
        snprintf(err, errsz, "%lld spatial dims: strides and dilations need %lld values, pads "
                 "%lld", (long long)sp, (long long)sp, (long long)(2 * sp));
        return false;
    }
    g->sp = (int32_t)sp;
    g->K = g->L = 1;
    for (int32_t i = 0; i < g->sp; i++) {
        g->image[i] = cge__load_as_i64(it, image, i);
        g->block[i] = cge__load_as_i64(bt, block, i);
        g->stride[i] = ns >= 0 ? st[i] : 1;
        g->dil[i] = nd >= 0 ? dl[i] : 1;
        g->pad[i] = np >= 0 ? pd[i] : 0;
        int64_t pe = np >= 0 ? pd[sp + i] : 0;
        if (g->image[i] < 0 || g->block[i] < 1 || g->stride[i] < 1 || g->dil[i] < 1 ||
            g->pad[i] < 0 || pe < 0) {
            snprintf(err, errsz, "dim %d: image_shape must be >= 0, block_shape, strides and "
                     "dilations >= 1, pads >= 0", (int)i);
            return false;
        }
        int64_t span = g->image[i] + g->pad[i] + pe - g->dil[i] * (g->block[i] - 1) - 1;
        if (span < 0) {
            snprintf(err, errsz, "dim %d: the dilated block (%lld) is larger than the padded "
                     "image (%lld)", (int)i, (long long)(g->dil[i] * (g->block[i] - 1) + 1),
                     (long long)(g->image[i] + g->pad[i] + pe));
            return false;
        }
        g->blocks[i] = span / g->stride[i] + 1;
        g->K *= g->block[i];
        g->L *= g->blocks[i];
    }
    return true;
}

static cge_status col2im_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *x = &ctx->inputs[0], *im = &ctx->inputs[1], *bl = &ctx->inputs[2];
    cge_status st = cge__meta_need_float(ctx, 0, "input");
    if (st)
        return st;
    if (x->shape.rank != 3)
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "input must have rank 3 ([N, C * prod(block_shape), L]), not %d",
                              (int)x->shape.rank);
    for (int32_t i = 1; i < 3; i++) {
        const cge_tensor_desc *d = &ctx->inputs[i];
        if (d->shape.rank != 1 || !(CGE__IDX_DT & CGE_DT(d->dtype)))
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "%s must be a 1-D integer tensor",
                                  i == 1 ? "image_shape" : "block_shape");
    }
    int64_t sp = im->shape.dims[0];
    if (!cge_dim_is_known(sp))
        sp = bl->shape.dims[0];
    if (!cge_dim_is_known(sp))
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "image_shape or block_shape must have a known length");
    if ((cge_dim_is_known(im->shape.dims[0]) && im->shape.dims[0] != sp) ||
        (cge_dim_is_known(bl->shape.dims[0]) && bl->shape.dims[0] != sp) || sp < 1 ||
        sp > C2I_MAX_SP)
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "image_shape and block_shape need the same length, 1 to %d",
                              C2I_MAX_SP);
    ctx->outputs[0].dtype = x->dtype;
    cge_shape out = {.rank = (int32_t)(2 + sp)};
    for (int32_t i = 0; i < out.rank; i++)
        out.dims[i] = CGE_DIM_DYNAMIC;
    out.dims[0] = x->shape.dims[0];
    const void *iv = cge__meta_input_value(ctx, 1), *bv = cge__meta_input_value(ctx, 2);
    if (iv && bv) {
        c2i_geom g;
        c2i_attr_vals at;
        char err[256];
        c2i_read_attrs(ctx->attrs, &at);
        if (!c2i_geometry(&at, sp, im->dtype, iv, bl->dtype, bv, &g, err, sizeof err))
            return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "%s", err);
        int64_t ck = x->shape.dims[1], l = x->shape.dims[2];
        if ((cge_dim_is_known(ck) && ck % g.K != 0) || (cge_dim_is_known(l) && l != g.L))
            return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                  "input dim 1 (%lld) must be a multiple of prod(block_shape) "
                                  "(%lld) and dim 2 (%lld) the number of blocks (%lld)",
                                  (long long)ck, (long long)g.K, (long long)l, (long long)g.L);
        out.dims[1] = cge_dim_is_known(ck) ? ck / g.K : CGE_DIM_DYNAMIC;
        for (int32_t i = 0; i < g.sp; i++)
            out.dims[2 + i] = g.image[i];
    }
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

/* image_shape and block_shape are read when the kernel runs, not at launch:
 * they may come from earlier work on the stream, and a replay reads them
 * afresh. If they no longer fit the planned shapes, the output stays zero and
 * the run fails. */
typedef struct c2i_args {
    const void *x, *image, *block;
    void *y;
    cge_dtype dt, image_t, block_t;
    int64_t sp, x_dims[3];
    cge_shape y_shape;
    c2i_attr_vals at;
    char node[96];
} c2i_args;

/* The geometry from the values, checked against the planned shapes. */
static bool c2i_fits(const c2i_args *a, c2i_geom *g, int64_t istride[C2I_MAX_SP])
{
    char err[256];
    if (!c2i_geometry(&a->at, a->sp, a->image_t, a->image, a->block_t, a->block, g, err,
                      sizeof err)) {
        cge_kernel_fail(CGE_ERR_INVALID_ARG, "%s: %s", a->node, err);
        return false;
    }
    bool ok = a->x_dims[1] == a->y_shape.dims[1] * g->K && a->x_dims[2] == g->L;
    for (int32_t i = 0; ok && i < g->sp; i++)
        ok = a->y_shape.dims[2 + i] == g->image[i];
    if (!ok) {
        cge_kernel_fail(CGE_ERR_SHAPE, "%s: image_shape and block_shape do not give the planned "
                        "input and output shapes", a->node);
        return false;
    }
    for (int32_t i = 0; i < g->sp; i++)
        istride[i] = cge__dims_prod(g->image, i + 1, g->sp);
    return true;
}

/* Blocks over (n, c) planes: each output plane is written by one block. */
static void col2im_block(int64_t b, int64_t nb, void *p)
{
    const c2i_args *a = p;
    c2i_geom geom;
    int64_t istride[C2I_MAX_SP];
    int64_t planes = a->y_shape.dims[0] * a->y_shape.dims[1], lo, hi;
    cge__block_range(planes, b, nb, &lo, &hi);
    if (lo >= hi || !c2i_fits(a, &geom, istride))
        return;
    const c2i_geom *g = &geom;
    int64_t image_numel = cge__dims_prod(g->image, 0, g->sp);
    for (int64_t pl = lo; pl < hi; pl++) {
        int64_t ybase = pl * image_numel;
        for (int64_t k = 0; k < g->K; k++) {
            int64_t kk[C2I_MAX_SP], rem = k;
            for (int32_t i = g->sp - 1; i >= 0; i--) {
                kk[i] = rem % g->block[i];
                rem /= g->block[i];
            }
            int64_t xrow = (pl * g->K + k) * g->L;
            for (int64_t l = 0; l < g->L; l++) {
                int64_t off = 0;
                bool inside = true;
                rem = l;
                for (int32_t i = g->sp - 1; i >= 0 && inside; i--) {
                    int64_t li = rem % g->blocks[i];
                    rem /= g->blocks[i];
                    int64_t c = li * g->stride[i] - g->pad[i] + kk[i] * g->dil[i];
                    inside = c >= 0 && c < g->image[i];
                    off += c * istride[i];
                }
                if (!inside)
                    continue;
                if (a->dt == CGE_F32)
                    ((float *)a->y)[ybase + off] += ((const float *)a->x)[xrow + l];
                else
                    cge__store_from_double(a->dt, a->y, ybase + off,
                                           cge__load_as_double(a->dt, a->y, ybase + off) +
                                               cge__load_as_double(a->dt, a->x, xrow + l));
            }
        }
    }
}

static cge_status col2im_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *x = &ctx->inputs[0], *im = &ctx->inputs[1], *bl = &ctx->inputs[2];
    const cge_tensor *y = &ctx->outputs[0];
    int64_t sp = im->shape.rank == 1 ? im->shape.dims[0] : -1;
    if (x->shape.rank != 3 || sp < 1 || sp > C2I_MAX_SP || bl->shape.rank != 1 ||
        bl->shape.dims[0] != sp || !(CGE__IDX_DT & CGE_DT(im->dtype)) ||
        !(CGE__IDX_DT & CGE_DT(bl->dtype)) || y->dtype != x->dtype ||
        !cge_dtype_is_float(x->dtype) || y->shape.rank != 2 + sp ||
        y->shape.dims[0] != x->shape.dims[0])
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "inputs the meta did not accept");
    c2i_args a;
    memset(&a, 0, sizeof a);
    a.x = x->data;
    a.image = im->data;
    a.block = bl->data;
    a.y = y->data;
    a.dt = x->dtype;
    a.image_t = im->dtype;
    a.block_t = bl->dtype;
    a.sp = sp;
    memcpy(a.x_dims, x->shape.dims, sizeof a.x_dims);
    a.y_shape = y->shape;
    c2i_read_attrs(ctx->attrs, &a.at);
    cge__kernel_label(ctx, a.node, sizeof a.node);
    int64_t numel_y = cge_shape_numel(&y->shape);
    if (numel_y == 0)
        return CGE_OK;
    if (!a.y || !a.image || !a.block || (cge_shape_numel(&x->shape) > 0 && !a.x))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    cge_status s = cge_memset_async(stream, a.y, 0, (size_t)numel_y * cge_dtype_size(a.dt));
    if (s)
        return s;
    int64_t planes = y->shape.dims[0] * y->shape.dims[1];
    int64_t per = cge_shape_numel(&x->shape) / (planes > 0 ? planes : 1);
    return cge_launch(stream, col2im_block,
                      cge__blocks_for(planes, per >= CGE__MIN_BLOCK ? 1 : CGE__MIN_BLOCK / (per ? per : 1),
                                      ctx->num_threads),
                      &a, sizeof a);
}

/* ---- definitions ---------------------------------------------------------------------- */

static const cge_kernel_def k_gridsample[] =
    CGE__KDEF(CGE_DT_FLOAT, gridsample_launch, NULL, -1);
static const cge_kernel_def k_maxunpool[] = CGE__KDEF(CGE_DT_FLOAT, maxunpool_launch, NULL, -1);
static const cge_kernel_def k_col2im[] = CGE__KDEF(CGE_DT_FLOAT, col2im_launch, NULL, -1);

static const cge_arg_def float_y_out[] = {{"Y", 0, CGE_DT_FLOAT, "result"}};
static const cge_arg_def gs_in[] = {
    {"X", 0, CGE_DT_FLOAT, "[N, C, H, W]"},
    {"grid", 0, CGE_DT_FLOAT, "[N, H_out, W_out, 2] sampling points (x, y) in [-1, 1]"},
};
static const cge_arg_def unpool_in[] = {
    {"X", 0, CGE_DT_FLOAT, "pooled values [N, C, d1..dn]"},
    {"I", 0, CGE_DT(CGE_I64), "MaxPool's flat indices into the unpooled tensor"},
    {"output_shape", CGE_ARG_OPTIONAL, CGE__IDX_DT, "output shape (values needed)"},
};

static const cge_arg_def c2i_in[] = {
    {"input", 0, CGE_DT_FLOAT, "[N, C * prod(block_shape), L] columns"},
    {"image_shape", 0, CGE__IDX_DT, "spatial dims of the image (values needed)"},
    {"block_shape", 0, CGE__IDX_DT, "spatial dims of the sliding block (values needed)"},
};
static const cge_arg_def c2i_out[] = {{"output", 0, CGE_DT_FLOAT, "[N, C, image_shape...]"}};
static const cge_attr_def c2i_attrs[] = {
    {"dilations", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "per spatial dim (default 1)"},
    {"pads", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "begins then ends (default 0)"},
    {"strides", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "per spatial dim (default 1)"},
};
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

static const cge_op_def sampling_ops[] = {
    CGE__OPDEF("GridSample", 16, gs_in, 2, float_y_out, 1, gs_attrs, CGE__NATTR(gs_attrs),
               gridsample_infer, k_gridsample,
               "Samples X at grid points (2-D): bilinear, nearest or bicubic, with padding "
               "modes."),
    CGE__OPDEF("MaxUnpool", 11, unpool_in, 3, float_y_out, 1, unpool_attrs,
               CGE__NATTR(unpool_attrs), maxunpool_infer, k_maxunpool,
               "Zeros with X's values put back at MaxPool's indices."),
    CGE__OPDEF("Col2Im", 18, c2i_in, 3, c2i_out, 1, c2i_attrs, CGE__NATTR(c2i_attrs),
               col2im_infer, k_col2im,
               "Sums sliding-block columns back into an image (the inverse of im2col)."),
};

const cge_op_def *cge__ops_sampling(int32_t *count)
{
    *count = (int32_t)(sizeof sampling_ops / sizeof sampling_ops[0]);
    return sampling_ops;
}
