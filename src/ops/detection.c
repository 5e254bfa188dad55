/* Object detection: RoiAlign (pooled, bilinearly sampled regions of interest,
 * as ONNX Runtime computes them), MaxRoiPool (max over roi bins) and
 * NonMaxSuppression (greedy box selection per batch and class; its output
 * count comes from the values). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/builtin.h"
#include "ops/family_util.h"
#include "ops/kernel_util.h"

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
    cge_status st = cge__meta_need_float(ctx, 0, "X");
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
        rois->dtype != x->dtype ||
        (cge_dim_is_known(rois->shape.dims[1]) && rois->shape.dims[1] != 4) ||
        (cge_dim_is_known(rois->shape.dims[0]) && cge_dim_is_known(bi->shape.dims[0]) &&
         rois->shape.dims[0] != bi->shape.dims[0]) || !(CGE__IDX_DT & CGE_DT(bi->dtype)))
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

/* One axis of roi_sample, for the separable form: the lower and upper
 * index, their weights, and whether the sample lies in the map. */
typedef struct roi_tap {
    int64_t lo, hi;
    double wl, wh;
    bool in;
} roi_tap;

static roi_tap roi_axis(double v, int64_t size)
{
    roi_tap t = {0, 0, 0.0, 0.0, false};
    if (!(v >= -1.0 && v <= (double)size))
        return t; /* NaN too */
    if (v <= 0)
        v = 0;
    int64_t l = (int64_t)v, h;
    if (l >= size - 1) {
        h = l = size - 1;
        v = (double)l;
    } else {
        h = l + 1;
    }
    double f = v - (double)l;
    return (roi_tap){l, h, 1.0 - f, f, true};
}

static inline double roi_ld(const roi_args *a, int64_t i)
{
    return a->dt == CGE_F32 ? (double)((const float *)a->x)[i] : cge__load_as_double(a->dt, a->x, i);
}

/* Per roi, the samples' rows and columns are computed once (ORT's pre_calc):
 * roi_sample's weights are products of a row and a column weight, and a
 * sample is outside when its row or its column is. The channels then only
 * gather. Sample counts past the tables' size (an adaptive grid of a huge
 * roi) take roi_sample per sample; both give the same bits. */
#define ROI_TAPS 1024
/* float32 avg mode: a roi's samples (four offsets into the plane and their
 * weight products, or none when outside) listed once, so that each channel
 * is a run of loads and multiply-adds in roi_block's order (the same bits).
 * A roi with more samples than this takes the tables' loop. */
#define ROI_SAMPLES 1024

typedef struct roi_pick {
    int64_t o[4];
    double w[4];
    bool in;
} roi_pick;

static void roi_picks(const roi_args *a, const roi_tap *ty, const roi_tap *tx, int64_t gh,
                      int64_t gw, roi_pick *pk)
{
    int64_t k = 0;
    for (int64_t ph = 0; ph < a->oh; ph++)
        for (int64_t pw = 0; pw < a->ow; pw++)
            for (int64_t iy = 0; iy < gh; iy++)
                for (int64_t ix = 0; ix < gw; ix++, k++) {
                    const roi_tap *y = &ty[ph * gh + iy], *x = &tx[pw * gw + ix];
                    pk[k].in = y->in && x->in;
                    if (!pk[k].in)
                        continue;
                    int64_t r0 = y->lo * a->w, r1 = y->hi * a->w;
                    pk[k].o[0] = r0 + x->lo;
                    pk[k].o[1] = r0 + x->hi;
                    pk[k].o[2] = r1 + x->lo;
                    pk[k].o[3] = r1 + x->hi;
                    pk[k].w[0] = y->wl * x->wl;
                    pk[k].w[1] = y->wl * x->wh;
                    pk[k].w[2] = y->wh * x->wl;
                    pk[k].w[3] = y->wh * x->wh;
                }
}

/* One channel of one roi from its picks: per bin, the sum of its samples'
 * v[0] + v[1] + v[2] + v[3], as roi_block adds them, over the count. */
static void roi_channel_f32(const roi_args *a, const roi_pick *pk, int64_t per_bin,
                            const float *plane, float *out, double count)
{
    for (int64_t bin = 0; bin < a->oh * a->ow; bin++) {
        double acc = 0.0;
        const roi_pick *q = pk + bin * per_bin;
        for (int64_t s = 0; s < per_bin; s++) {
            if (!q[s].in) {
                acc += 0.0;
                continue;
            }
            double v0 = q[s].w[0] * (double)plane[q[s].o[0]];
            double v1 = q[s].w[1] * (double)plane[q[s].o[1]];
            double v2 = q[s].w[2] * (double)plane[q[s].o[2]];
            double v3 = q[s].w[3] * (double)plane[q[s].o[3]];
            acc += v0 + v1 + v2 + v3;
        }
        out[bin] = (float)(acc / count);
    }
}

/* Four channels of one roi at once (planes `plane_stride` apart), each
 * summed in the order roi_channel_f32 sums it (the same bits): the four
 * accumulations overlap instead of waiting on one chain of additions, and
 * each sample's offsets and weights are read once for the four. */
static void roi_channels4_f32(const roi_args *a, const roi_pick *pk, int64_t per_bin,
                              const float *plane, int64_t plane_stride, float *out,
                              int64_t out_stride, double count)
{
    const float *p0 = plane, *p1 = plane + plane_stride, *p2 = p1 + plane_stride,
                *p3 = p2 + plane_stride;
    for (int64_t bin = 0; bin < a->oh * a->ow; bin++) {
        double acc[4] = {0.0, 0.0, 0.0, 0.0};
        const roi_pick *q = pk + bin * per_bin;
        for (int64_t s = 0; s < per_bin; s++) {
            if (!q[s].in) {
                for (int c = 0; c < 4; c++)
                    acc[c] += 0.0;
                continue;
            }
            const int64_t *o = q[s].o;
            const double *w = q[s].w;
            acc[0] += w[0] * (double)p0[o[0]] + w[1] * (double)p0[o[1]] + w[2] * (double)p0[o[2]] +
                      w[3] * (double)p0[o[3]];
            acc[1] += w[0] * (double)p1[o[0]] + w[1] * (double)p1[o[1]] + w[2] * (double)p1[o[2]] +
                      w[3] * (double)p1[o[3]];
            acc[2] += w[0] * (double)p2[o[0]] + w[1] * (double)p2[o[1]] + w[2] * (double)p2[o[2]] +
                      w[3] * (double)p2[o[3]];
            acc[3] += w[0] * (double)p3[o[0]] + w[1] * (double)p3[o[1]] + w[2] * (double)p3[o[2]] +
                      w[3] * (double)p3[o[3]];
        }
        for (int c = 0; c < 4; c++)
            out[c * out_stride + bin] = (float)(acc[c] / count);
    }
}

static void roi_block(int64_t b, int64_t nb, void *p)
{
    const roi_args *a = p;
    int64_t lo, hi;
    cge__block_range(a->r * a->c, b, nb, &lo, &hi);
    double off = a->half_pixel ? 0.5 : 0.0;
    roi_tap ty[ROI_TAPS], tx[ROI_TAPS];
    roi_pick picks[ROI_SAMPLES];
    int64_t tab_roi = -1;
    bool picked = false;
    for (int64_t u = lo; u < hi; u++) {
        int64_t ri = u / a->c, ch = u % a->c;
        int64_t bidx = cge__load_as_i64(a->bt, a->bi, ri);
        int64_t obase = u * a->oh * a->ow;
        if (bidx < 0 || bidx >= a->n) {
            if (ch == 0)
                cge_kernel_fail(CGE_ERR_INVALID_ARG, "%s: batch index %lld of roi %lld is "
                                "outside [0, %lld)", a->node, (long long)bidx, (long long)ri,
                                (long long)a->n);
            for (int64_t k = 0; k < a->oh * a->ow; k++)
                cge__store_from_double(a->dt, a->y, obase + k, 0.0);
            continue;
        }
        double x1 = cge__load_as_double(a->dt, a->rois, ri * 4) * a->scale - off;
        double y1 = cge__load_as_double(a->dt, a->rois, ri * 4 + 1) * a->scale - off;
        double x2 = cge__load_as_double(a->dt, a->rois, ri * 4 + 2) * a->scale - off;
        double y2 = cge__load_as_double(a->dt, a->rois, ri * 4 + 3) * a->scale - off;
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
        bool tables = a->oh * gh <= ROI_TAPS && a->ow * gw <= ROI_TAPS;
        if (tables && tab_roi != ri) {
            for (int64_t ph = 0; ph < a->oh; ph++)
                for (int64_t iy = 0; iy < gh; iy++)
                    ty[ph * gh + iy] = roi_axis(
                        y1 + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh, a->h);
            for (int64_t pw = 0; pw < a->ow; pw++)
                for (int64_t ix = 0; ix < gw; ix++)
                    tx[pw * gw + ix] = roi_axis(
                        x1 + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw, a->w);
            tab_roi = ri;
            picked = a->dt == CGE_F32 && !a->max_mode && a->oh * a->ow * gh * gw <= ROI_SAMPLES;
            if (picked)
                roi_picks(a, ty, tx, gh, gw, picks);
        }
        if (tables && picked && ch + 4 <= a->c && u + 4 <= hi) {
            roi_channels4_f32(a, picks, gh * gw, (const float *)a->x + plane, a->h * a->w,
                              (float *)a->y + obase, a->oh * a->ow, count);
            u += 3;
            continue;
        }
        if (tables && picked) {
            roi_channel_f32(a, picks, gh * gw, (const float *)a->x + plane, (float *)a->y + obase,
                            count);
            continue;
        }
        for (int64_t ph = 0; ph < a->oh; ph++)
            for (int64_t pw = 0; pw < a->ow; pw++) {
                double acc = 0.0;
                bool first = true;
                for (int64_t iy = 0; iy < gh; iy++) {
                    for (int64_t ix = 0; ix < gw; ix++) {
                        double v[4] = {0, 0, 0, 0};
                        if (tables) {
                            const roi_tap *y = &ty[ph * gh + iy], *x = &tx[pw * gw + ix];
                            if (y->in && x->in) {
                                int64_t r0 = plane + y->lo * a->w, r1 = plane + y->hi * a->w;
                                v[0] = y->wl * x->wl * roi_ld(a, r0 + x->lo);
                                v[1] = y->wl * x->wh * roi_ld(a, r0 + x->hi);
                                v[2] = y->wh * x->wl * roi_ld(a, r1 + x->lo);
                                v[3] = y->wh * x->wh * roi_ld(a, r1 + x->hi);
                            }
                        } else {
                            double yy = y1 + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
                            double xx = x1 + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
                            int64_t pos[4] = {0, 0, 0, 0};
                            double wt[4] = {0, 0, 0, 0};
                            if (roi_sample(a, yy, xx, pos, wt))
                                for (int k = 0; k < 4; k++)
                                    v[k] = wt[k] * roi_ld(a, plane + pos[k]);
                        }
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
                cge__store_from_double(a->dt, a->y, obase + ph * a->ow + pw,
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
        cge_shape_numel(&bi->shape) != rois->shape.dims[0] || !cge_dtype_is_float(x->dtype) ||
        !(CGE__IDX_DT & CGE_DT(bi->dtype)))
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
    cge__kernel_label(ctx, a.node, sizeof a.node);
    if (a.r * a.c * a.oh * a.ow == 0)
        return CGE_OK;
    if (!a.y || !a.rois || !a.bi || (a.h * a.w > 0 && !a.x))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    if (a.h == 0 || a.w == 0)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "X has an empty feature map");
    int64_t per = a.oh * a.ow * 16;
    return cge_launch(stream, roi_block,
                      cge__blocks_for(a.r * a.c, per >= CGE__MIN_BLOCK ? 1 : CGE__MIN_BLOCK / per,
                                     ctx->num_threads),
                      &a, sizeof a);
}

/* ---- MaxRoiPool ----------------------------------------------------------------------- */

/* Opset 1's region-of-interest max pooling (Fast R-CNN's), as ONNX Runtime
 * computes it: roi corners scaled and rounded half away from zero, a
 * malformed roi made 1x1, bins of roi_size / pooled_size (float32
 * arithmetic), floor and ceil bin edges clamped to the map; an empty bin is 0. */
static cge_status maxroipool_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *x = &ctx->inputs[0], *rois = &ctx->inputs[1];
    cge_status st = cge__meta_need_float(ctx, 0, "X");
    if (st)
        return st;
    const int64_t *ps = NULL;
    if (cge_attrs_get_ints(ctx->attrs, "pooled_shape", &ps) != 2 || ps[0] < 1 || ps[1] < 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "pooled_shape must be two values >= 1 (height, width)");
    if (x->shape.rank != 4 || rois->shape.rank != 2 || rois->dtype != x->dtype ||
        (cge_dim_is_known(rois->shape.dims[1]) && rois->shape.dims[1] != 5))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "expects X [N, C, H, W] and rois [R, 5] "
                              "(batch index, x1, y1, x2, y2) of X's dtype");
    ctx->outputs[0].dtype = x->dtype;
    ctx->outputs[0].shape = CGE_SHAPE(rois->shape.dims[0], x->shape.dims[1], ps[0], ps[1]);
    return CGE_OK;
}

typedef struct mrp_args {
    const void *x, *rois;
    void *y;
    cge_dtype dt;
    int64_t n, c, h, w, r, ph, pw;
    float scale;
    char node[96];
} mrp_args;

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* Blocks over (roi, channel) planes of the output. */
static void maxroipool_block(int64_t b, int64_t nb, void *p)
{
    const mrp_args *a = p;
    int64_t lo, hi;
    cge__block_range(a->r * a->c, b, nb, &lo, &hi);
    for (int64_t u = lo; u < hi; u++) {
        int64_t ri = u / a->c, ch = u % a->c, obase = u * a->ph * a->pw;
        double bv = cge__load_as_double(a->dt, a->rois, ri * 5);
        if (!(bv >= 0) || bv >= (double)a->n) {
            if (ch == 0)
                cge_kernel_fail(CGE_ERR_INVALID_ARG, "%s: batch index %g of roi %lld is outside "
                                "[0, %lld)", a->node, bv, (long long)ri, (long long)a->n);
            for (int64_t k = 0; k < a->ph * a->pw; k++)
                cge__store_from_double(a->dt, a->y, obase + k, 0.0);
            continue;
        }
        int64_t bidx = (int64_t)bv;
        float cr[4];
        for (int k = 0; k < 4; k++)
            cr[k] = (float)cge__load_as_double(a->dt, a->rois, ri * 5 + 1 + k);
        int64_t x1 = (int64_t)roundf(cr[0] * a->scale), y1 = (int64_t)roundf(cr[1] * a->scale);
        int64_t x2 = (int64_t)roundf(cr[2] * a->scale), y2 = (int64_t)roundf(cr[3] * a->scale);
        int64_t rh = y2 - y1 + 1 > 1 ? y2 - y1 + 1 : 1, rw = x2 - x1 + 1 > 1 ? x2 - x1 + 1 : 1;
        float bh = (float)rh / (float)a->ph, bw = (float)rw / (float)a->pw;
        int64_t plane = (bidx * a->c + ch) * a->h * a->w;
        for (int64_t oy = 0; oy < a->ph; oy++) {
            int64_t hs = clamp64((int64_t)floorf((float)oy * bh) + y1, 0, a->h);
            int64_t he = clamp64((int64_t)ceilf((float)(oy + 1) * bh) + y1, 0, a->h);
            for (int64_t ox = 0; ox < a->pw; ox++) {
                int64_t ws = clamp64((int64_t)floorf((float)ox * bw) + x1, 0, a->w);
                int64_t we = clamp64((int64_t)ceilf((float)(ox + 1) * bw) + x1, 0, a->w);
                double m = 0.0;
                bool first = true;
                for (int64_t yy = hs; yy < he; yy++)
                    for (int64_t xx = ws; xx < we; xx++) {
                        double v = cge__load_as_double(a->dt, a->x, plane + yy * a->w + xx);
                        if (first || v > m)
                            m = v;
                        first = false;
                    }
                cge__store_from_double(a->dt, a->y, obase + oy * a->pw + ox, m);
            }
        }
    }
}

static cge_status maxroipool_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *x = &ctx->inputs[0], *rois = &ctx->inputs[1];
    const int64_t *ps = NULL;
    if (cge_attrs_get_ints(ctx->attrs, "pooled_shape", &ps) != 2 || ps[0] < 1 || ps[1] < 1 ||
        x->shape.rank != 4 || rois->shape.rank != 2 || rois->shape.dims[1] != 5 ||
        rois->dtype != x->dtype || !cge_dtype_is_float(x->dtype) ||
        ctx->outputs[0].dtype != x->dtype)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "inputs the meta did not accept");
    mrp_args a;
    memset(&a, 0, sizeof a);
    a.n = x->shape.dims[0];
    a.c = x->shape.dims[1];
    a.h = x->shape.dims[2];
    a.w = x->shape.dims[3];
    a.r = rois->shape.dims[0];
    a.ph = ps[0];
    a.pw = ps[1];
    a.scale = cge_attrs_get_float(ctx->attrs, "spatial_scale", 1.0f);
    a.x = x->data;
    a.rois = rois->data;
    a.y = ctx->outputs[0].data;
    a.dt = x->dtype;
    cge__kernel_label(ctx, a.node, sizeof a.node);
    if (a.r * a.c == 0)
        return CGE_OK;
    if (!a.y || !a.rois || (a.h * a.w > 0 && !a.x))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    int64_t per = a.ph * a.pw * 16;
    return cge_launch(stream, maxroipool_block,
                      cge__blocks_for(a.r * a.c, per >= CGE__MIN_BLOCK ? 1 : CGE__MIN_BLOCK / per,
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
    char *scratch;                  /* per block: nms_scratch_bytes(s) */
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
    double v0 = cge__load_as_double(a->bt, a->boxes, o);
    double v1 = cge__load_as_double(a->bt, a->boxes, o + 1);
    double v2 = cge__load_as_double(a->bt, a->boxes, o + 2);
    double v3 = cge__load_as_double(a->bt, a->boxes, o + 3);
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

/* The selected boxes of one (batch, class), corners and area side by side,
 * so that a candidate is tested against many of them in one vector loop. */
typedef struct nms_kept {
    double *y1, *x1, *y2, *x2, *area;
} nms_kept;

/* Selection scratch (one per block, nms_scratch_bytes(s)): the kept boxes'
 * arrays, then a grid over x. Kept boxes are listed in every x cell they
 * span (up to NMS_SPAN_CAP cells; wider ones in a list every candidate
 * reads), so a candidate is tested only against boxes its x range meets:
 * a box it does not meet in x cannot suppress it, so the decisions are
 * those of testing every kept box. torchvision's batched NMS offsets each
 * class's boxes along x, which makes this the difference between seconds
 * and milliseconds on a detector's 10^4 candidates. */
#define NMS_SPAN_CAP 8
#define NMS_CELLS 1024

static size_t nms_scratch_bytes(int64_t s)
{
    size_t b = (size_t)s * (5 * sizeof(double) + (2 * NMS_SPAN_CAP + 1) * sizeof(int32_t)) +
               NMS_CELLS * sizeof(int32_t);
    return (b + 63) & ~(size_t)63;   /* the next block's doubles stay aligned */
}

/* nms_suppress's test of box a against kept box j, in the same arithmetic
 * and order (the same decisions), without branches. Boxes with NaN corners
 * go through nms_suppress instead (fmin/fmax treat NaN unlike these). */
static inline int nms_hit(const nms_kept *k, int64_t j, double ay1, double ax1, double ay2,
                          double ax2, double area_a, double iou)
{
    double ix1 = ax1 > k->x1[j] ? ax1 : k->x1[j], ix2 = ax2 < k->x2[j] ? ax2 : k->x2[j];
    double iy1 = ay1 > k->y1[j] ? ay1 : k->y1[j], iy2 = ay2 < k->y2[j] ? ay2 : k->y2[j];
    double inter = (ix2 - ix1) * (iy2 - iy1);
    double uni = area_a + k->area[j] - inter;
    return (ix2 > ix1) & (iy2 > iy1) & (k->area[j] > 0.0) & (uni > 0.0) & (inter / uni > iou);
}

/* Whether box a overlaps any of the first n kept boxes by more than iou. */
CGE_TARGET_CLONES
static bool nms_any_overlap(const nms_kept *k, int64_t n, double ay1, double ax1, double ay2,
                            double ax2, double iou)
{
    double area_a = (ax2 - ax1) * (ay2 - ay1);
    if (!(area_a > 0.0))
        return false;
    for (int64_t j0 = 0; j0 < n; j0 += 64) {
        int64_t j1 = j0 + 64 < n ? j0 + 64 : n;
        int hit = 0;
        for (int64_t j = j0; j < j1; j++)
            hit |= nms_hit(k, j, ay1, ax1, ay2, ax2, area_a, iou);
        if (hit)
            return true;
    }
    return false;
}

typedef struct nms_grid {
    double x0, inv;
    int32_t cells, *head, *next, *box, *wide;
    int64_t used, nwide;
} nms_grid;

static int32_t nms_cell(const nms_grid *g, double x)
{
    double v = (x - g->x0) * g->inv;
    return !(v >= 0.0) ? 0 : v >= (double)g->cells ? g->cells - 1 : (int32_t)v;
}

static bool nms_grid_overlap(const nms_grid *g, const nms_kept *k, double ay1, double ax1,
                             double ay2, double ax2, double iou)
{
    double area_a = (ax2 - ax1) * (ay2 - ay1);
    if (!(area_a > 0.0))
        return false;
    for (int64_t w = 0; w < g->nwide; w++)
        if (nms_hit(k, g->wide[w], ay1, ax1, ay2, ax2, area_a, iou))
            return true;
    for (int32_t c = nms_cell(g, ax1), c1 = nms_cell(g, ax2); c <= c1; c++)
        for (int32_t e = g->head[c]; e >= 0; e = g->next[e])
            if (nms_hit(k, g->box[e], ay1, ax1, ay2, ax2, area_a, iou))
                return true;
    return false;
}

static void nms_grid_add(nms_grid *g, int64_t j, double x1, double x2)
{
    int32_t c0 = nms_cell(g, x1), c1 = nms_cell(g, x2);
    if (c1 - c0 + 1 > NMS_SPAN_CAP) {
        g->wide[g->nwide++] = (int32_t)j;
        return;
    }
    for (int32_t c = c0; c <= c1; c++) {
        g->box[g->used] = (int32_t)j;
        g->next[g->used] = g->head[c];
        g->head[c] = (int32_t)g->used++;
    }
}

/* Greedy selection for one (batch, class): sel[0] = count, sel[1..] = boxes;
 * `scratch` has nms_scratch_bytes(s) bytes, 8-byte aligned. */
static void nms_class(const nms_args *a, int64_t pair, nms_item *items, int64_t *sel,
                      void *scratch)
{
    int64_t bt = pair / a->c, n = 0, count = 0, s = a->s;
    for (int64_t i = 0; i < s; i++) {
        double sc = cge__load_as_double(a->st, a->scores, pair * s + i);
        if (!a->has_score_thr || sc > a->score_thr)
            items[n++] = (nms_item){sc, i};
    }
    qsort(items, (size_t)n, sizeof *items, nms_cmp);
    double *kd = scratch;
    nms_kept k = {kd, kd + s, kd + 2 * s, kd + 3 * s, kd + 4 * s};
    int32_t *ki = (int32_t *)(kd + 5 * s);
    nms_grid g = {.head = ki, .next = ki + NMS_CELLS, .box = ki + NMS_CELLS + NMS_SPAN_CAP * s,
                  .wide = ki + NMS_CELLS + 2 * NMS_SPAN_CAP * s};
    /* The grid when every candidate's x range is finite (the ends, and no NaN). */
    double lo = INFINITY, hi = -INFINITY;
    bool finite = n >= 64;
    for (int64_t i = 0; finite && i < n; i++) {
        double y1, x1, y2, x2;
        nms_box(a, bt, items[i].idx, &y1, &x1, &y2, &x2);
        finite = isfinite(y1) && isfinite(x1) && isfinite(y2) && isfinite(x2);
        lo = x1 < lo ? x1 : lo;
        hi = x2 > hi ? x2 : hi;
    }
    bool grid = finite && hi > lo && isfinite(hi - lo);
    if (grid) {
        g.cells = (int32_t)(n / 8 < NMS_CELLS ? n / 8 : NMS_CELLS);
        g.x0 = lo;
        g.inv = g.cells / (hi - lo);
        for (int32_t c = 0; c < g.cells; c++)
            g.head[c] = -1;
    }
    bool any_nan = false;
    for (int64_t i = 0; i < n && count < a->max_out; i++) {
        double y1, x1, y2, x2;
        nms_box(a, bt, items[i].idx, &y1, &x1, &y2, &x2);
        bool nan = y1 != y1 || x1 != x1 || y2 != y2 || x2 != x2;
        bool keep = true;
        if (grid) {
            keep = !nms_grid_overlap(&g, &k, y1, x1, y2, x2, a->iou);
        } else if (nan || any_nan) {
            for (int64_t j = 0; j < count && keep; j++)
                keep = !nms_suppress(a, bt, items[i].idx, sel[1 + j]);
        } else {
            keep = !nms_any_overlap(&k, count, y1, x1, y2, x2, a->iou);
        }
        if (!keep)
            continue;
        any_nan |= nan;
        k.y1[count] = y1;
        k.x1[count] = x1;
        k.y2[count] = y2;
        k.x2[count] = x2;
        k.area[count] = (x2 - x1) * (y2 - y1);
        if (grid)
            nms_grid_add(&g, count, x1, x2);
        sel[1 + count++] = items[i].idx;
    }
    sel[0] = count;
}

static void nms_block(int64_t b, int64_t nb, void *p)
{
    const nms_args *a = p;
    int64_t lo, hi;
    cge__block_range(a->b * a->c, b, nb, &lo, &hi);
    void *scratch = a->scratch + (size_t)b * nms_scratch_bytes(a->s);
    for (int64_t pair = lo; pair < hi; pair++)
        nms_class(a, pair, a->items + pair * a->s, a->sel + pair * (a->s + 1), scratch);
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
    if (cge_dim_is_known(bx->dims[2]) && bx->dims[2] != 4)
        return false;
    if (cge_dim_is_known(bx->dims[0]) && cge_dim_is_known(sc->dims[0]) &&
        bx->dims[0] != sc->dims[0])
        return false;
    return !(cge_dim_is_known(bx->dims[1]) && cge_dim_is_known(sc->dims[2]) &&
             bx->dims[1] != sc->dims[2]);
}

/* Scalar parameters from the optional inputs 2..4 (values at hand). */
static void nms_params(nms_args *a, const cge_dtype *dts, const void *const *vals)
{
    a->max_out = vals[0] ? cge__load_as_i64(dts[0], vals[0], 0) : 0;
    if (a->max_out < 0)
        a->max_out = 0;
    a->iou = vals[1] ? cge__load_as_double(dts[1], vals[1], 0) : 0.0;
    a->has_score_thr = vals[2] != NULL;
    a->score_thr = vals[2] ? cge__load_as_double(dts[2], vals[2], 0) : 0.0;
}

static cge_status nms_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *bx = &ctx->inputs[0], *sc = &ctx->inputs[1];
    cge_status st = cge__meta_need_float(ctx, 0, "boxes");
    if (!st)
        st = cge__meta_need_float(ctx, 1, "scores");
    if (st)
        return st;
    if (!nms_shapes(&bx->shape, &sc->shape))
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "expects boxes [B, S, 4] and scores [B, C, S]");
    for (int32_t i = 2; i < 5; i++)
        if (cge__meta_has_input(ctx, i) && cge_shape_numel(&ctx->inputs[i].shape) != 1)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "input %d must hold exactly one value", (int)i);
    ctx->outputs[0].dtype = CGE_I64;
    ctx->outputs[0].shape = CGE_SHAPE(CGE_DIM_DYNAMIC, 3);
    /* The count depends on every value: computed here when all are at hand. */
    const void *vals[5];
    cge_dtype dts[3] = {CGE_DTYPE_UNDEFINED, CGE_DTYPE_UNDEFINED, CGE_DTYPE_UNDEFINED};
    for (int32_t i = 0; i < 5; i++) {
        vals[i] = cge__meta_input_value(ctx, i);
        if (!vals[i] && (i < 2 || cge__meta_has_input(ctx, i)))
            return CGE_OK;
        if (i >= 2)
            dts[i - 2] = cge__meta_has_input(ctx, i) ? ctx->inputs[i].dtype : CGE_DTYPE_UNDEFINED;
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
    void *kept = malloc(nms_scratch_bytes(a.s));
    if (!items || !sel || !kept) {
        free(items);
        free(sel);
        free(kept);
        return cge_meta_error(ctx, CGE_ERR_NO_MEMORY, "no memory for %lld boxes",
                              (long long)a.s);
    }
    int64_t total = 0;
    for (int64_t pair = 0; pair < a.b * a.c; pair++) {
        nms_class(&a, pair, items, sel, kept);
        total += sel[0];
    }
    free(items);
    free(sel);
    free(kept);
    ctx->outputs[0].shape.dims[0] = total;
    return CGE_OK;
}

static size_t nms_workspace(const cge_kernel_ctx *ctx)
{
    const cge_shape *sc = &ctx->inputs[1].shape;
    if (sc->rank != 3)
        return 0;
    size_t pairs = (size_t)(sc->dims[0] * sc->dims[1]), s = (size_t)sc->dims[2];
    int64_t blocks = cge__blocks_for((int64_t)pairs, 1, ctx->num_threads);
    return pairs * s * sizeof(nms_item) + pairs * (s + 1) * sizeof(int64_t) +
           (size_t)blocks * nms_scratch_bytes((int64_t)s);
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
    if (!nms_shapes(&bx->shape, &sc->shape) || !cge_dtype_is_float(bx->dtype) ||
        !cge_dtype_is_float(sc->dtype) || y->dtype != CGE_I64 || y->shape.rank != 2 ||
        y->shape.dims[1] != 3)
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
        l.param_vals[i] = cge__kernel_has_input(ctx, i + 2) ? ctx->inputs[i + 2].data : NULL;
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
    a->scratch = (char *)(a->sel + a->b * a->c * (a->s + 1));
    st = cge_launch(stream, nms_block_params, cge__blocks_for(a->b * a->c, 1, ctx->num_threads), &l,
                    sizeof l);
    if (!st)
        st = cge_launch(stream, nms_gather_params, 1, &l, sizeof l);
    return st;
}

/* ---- definitions ---------------------------------------------------------------------- */

static const cge_kernel_def k_roialign[] = CGE__KDEF(CGE_DT_FLOAT, roialign_launch, NULL, -1);
static const cge_kernel_def k_nms[] = CGE__KDEF(CGE_DT_FLOAT, nms_launch, nms_workspace, -1);
static const cge_kernel_def k_maxroipool[] = CGE__KDEF(CGE_DT_FLOAT, maxroipool_launch, NULL, -1);

static const cge_arg_def mrp_in[] = {
    {"X", 0, CGE_DT_FLOAT, "[N, C, H, W] feature map"},
    {"rois", 0, CGE_DT_FLOAT, "[R, 5] (batch index, x1, y1, x2, y2) in input coordinates"},
};
static const cge_attr_def mrp_attrs[] = {
    {"pooled_shape", CGE_ATTR_INTS, true, 0, 0.0f, NULL, "output height and width"},
    {"spatial_scale", CGE_ATTR_FLOAT, false, 0, 1.0f, NULL, "rois to input coordinates"},
};

static const cge_arg_def roi_in[] = {
    {"X", 0, CGE_DT_FLOAT, "[N, C, H, W] feature map"},
    {"rois", 0, CGE_DT_FLOAT, "[R, 4] (x1, y1, x2, y2) in input coordinates"},
    {"batch_indices", 0, CGE__IDX_DT, "[R] image of each roi"},
};
static const cge_arg_def roi_out[] = {{"Y", 0, CGE_DT_FLOAT, "result"}};
static const cge_arg_def nms_in[] = {
    {"boxes", 0, CGE_DT_FLOAT, "[B, S, 4]"},
    {"scores", 0, CGE_DT_FLOAT, "[B, C, S]"},
    {"max_output_boxes_per_class", CGE_ARG_OPTIONAL, CGE_DT(CGE_I64), "one value; absent: 0"},
    {"iou_threshold", CGE_ARG_OPTIONAL, CGE_DT(CGE_F32), "one value; absent: 0"},
    {"score_threshold", CGE_ARG_OPTIONAL, CGE_DT(CGE_F32), "one value; absent: none"},
};
static const cge_arg_def nms_out[] = {
    {"selected_indices", 0, CGE_DT(CGE_I64), "[count, 3] (batch, class, box); count from values"}};

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

static const cge_op_def detection_ops[] = {
    CGE__OPDEF("RoiAlign", 16, roi_in, 3, roi_out, 1, roi_attrs, CGE__NATTR(roi_attrs),
               roialign_infer, k_roialign,
               "Bilinearly sampled, pooled (avg or max) regions of interest."),
    CGE__OPDEF("NonMaxSuppression", 11, nms_in, 5, nms_out, 1, nms_attrs, CGE__NATTR(nms_attrs),
               nms_infer, k_nms,
               "Greedy selection of boxes by score, dropping those overlapping a kept box."),
    CGE__OPDEF("MaxRoiPool", 1, mrp_in, 2, roi_out, 1, mrp_attrs, CGE__NATTR(mrp_attrs),
               maxroipool_infer, k_maxroipool,
               "Max over each bin of regions of interest (Fast R-CNN's RoI pooling)."),
};

const cge_op_def *cge__ops_detection(int32_t *count)
{
    *count = (int32_t)(sizeof detection_ops / sizeof detection_ops[0]);
    return detection_ops;
}
