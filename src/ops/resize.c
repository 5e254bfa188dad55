/* Resize (opsets 13 and 18), Upsample (9-10) and the kernel of cge.fused
 * ChannelsLastResize: a table of taps per axis, and the output as a separable
 * sum over them. */
#include <math.h>
#include <string.h>

#include "base/cpu_isa.h"
#include "ops/builtin.h"
#include "ops/kernel_util.h"
#include "ops/resize_nhwc.h"

/* Resize: nearest/linear/cubic, every coordinate transformation and nearest
 * mode, exclude_outside, tf_crop_and_resize extrapolation, and 18's
 * antialias, axes and keep_aspect_ratio_policy; Upsample:
 * asymmetric nearest-floor or linear. Each axis's table of taps (source index
 * and weight per output index) is built on the stream from the scales; the
 * output is a separable sum over the taps of all axes. */

#define RZ_DTYPES CGE_DT_NUMERIC
#define RZ_MAX_COMBOS 1024 /* taps of all axes but the last, per output row */

enum { RZ_NEAREST, RZ_LINEAR, RZ_CUBIC };
enum {
    CT_HALF_PIXEL, CT_PYTORCH_HALF_PIXEL, CT_ALIGN_CORNERS, CT_ASYMMETRIC, CT_TF_CROP,
    CT_TF_HALF_PIXEL_NN /* Resize 11-12 only; 13 dropped it */
};
enum { NM_ROUND_FLOOR, NM_ROUND_CEIL, NM_FLOOR, NM_CEIL };
enum { KAR_STRETCH, KAR_NOT_LARGER, KAR_NOT_SMALLER };

typedef struct rz_args {
    cge_dtype dtype;
    const void *x;
    void *y;
    const void *roi, *scales, *sizes;
    cge_dtype roi_t, scales_t, sizes_t;
    int64_t nroi, nscales, nsizes;
    int mode, ctm, nearest, exclude_outside;
    int antialias, policy;    /* 18: antialias, keep_aspect_ratio_policy */
    double cubic_a, extrapolation;
    cge_shape in, out;
    int64_t maxt;             /* the mode's taps per output index: 1, 2 or 4 */
    /* 18's axes: scales, sizes and roi list these axes only (all when absent) */
    int32_t naxes, axis_of[CGE_MAX_RANK], list_of[CGE_MAX_RANK];
    int64_t mt[CGE_MAX_RANK]; /* tap slots per output index, per axis */
    unsigned char *ws;        /* tables */
    /* ChannelsLastResize's plain_output: NHWC X, Y written NCHW (the
     * channel vectors computed as for NHWC Y, then stored by plane) */
    int plain_out;
} rz_args;

/* Workspace: per axis its tap count, then idx[out][mt], w[out][mt],
 * outside[out]. */
typedef struct rz_tab {
    int64_t ntaps[CGE_MAX_RANK];
    int64_t *idx[CGE_MAX_RANK];
    double *w[CGE_MAX_RANK];
    unsigned char *outside[CGE_MAX_RANK];
} rz_tab;

static int lookup(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}

/* Attribute modes; false with a message on an unknown one. */
static bool rz_modes(const cge_attrs *a, bool upsample, rz_args *p, char *err, size_t errsz)
{
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const ctms[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                       "asymmetric", "tf_crop_and_resize",
                                       "tf_half_pixel_for_nn"};
    static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    const char *m = cge_attrs_get_string(a, "mode", "nearest");
    const char *c = cge_attrs_get_string(a, "coordinate_transformation_mode", "half_pixel");
    const char *n = cge_attrs_get_string(a, "nearest_mode", "round_prefer_floor");
    p->mode = lookup(m, modes, upsample ? 2 : 3);
    p->ctm = upsample ? CT_ASYMMETRIC : lookup(c, ctms, 6);
    p->nearest = upsample ? NM_FLOOR : lookup(n, nms, 4);
    if (p->mode < 0 || p->ctm < 0 || p->nearest < 0) {
        snprintf(err, errsz, "unsupported mode '%s', coordinate_transformation_mode '%s' or "
                             "nearest_mode '%s'", m, upsample ? "asymmetric" : c, n);
        return false;
    }
    static const char *const kars[] = {"stretch", "not_larger", "not_smaller"};
    const char *k = cge_attrs_get_string(a, "keep_aspect_ratio_policy", "stretch");
    p->policy = upsample ? KAR_STRETCH : lookup(k, kars, 3);
    int64_t aa = upsample ? 0 : cge_attrs_get_int(a, "antialias", 0);
    if (p->policy < 0 || (aa != 0 && aa != 1)) {
        snprintf(err, errsz, "keep_aspect_ratio_policy '%s' is not stretch, not_larger or "
                 "not_smaller, or antialias %lld not 0 or 1", k, (long long)aa);
        return false;
    }
    /* antialiasing stretches linear and cubic filters; nearest has none */
    p->antialias = aa && p->mode != RZ_NEAREST;
    p->cubic_a = upsample ? -0.75 : cge_attrs_get_float(a, "cubic_coeff_a", -0.75f);
    p->exclude_outside = upsample ? 0 : cge_attrs_get_int(a, "exclude_outside", 0) != 0;
    p->extrapolation = upsample ? 0.0 : cge_attrs_get_float(a, "extrapolation_value", 0.0f);
    p->maxt = p->mode == RZ_NEAREST ? 1 : p->mode == RZ_LINEAR ? 2 : 4;
    return true;
}

/* 18's axes attribute (every axis in order when absent) for rank r. */
static bool rz_axes(const cge_attrs *a, int32_t r, rz_args *p, char *err, size_t errsz)
{
    const int64_t *v = NULL;
    int64_t n = a ? cge_attrs_get_ints(a, "axes", &v) : -1;
    for (int32_t d = 0; d < r; d++)
        p->list_of[d] = n < 0 ? d : -1;
    p->naxes = n < 0 ? r : (int32_t)n;
    for (int32_t k = 0; k < r; k++)
        p->axis_of[k] = k;
    if (n < 0)
        return true;
    if (n > r) {
        snprintf(err, errsz, "%lld axes for rank %d", (long long)n, (int)r);
        return false;
    }
    for (int64_t k = 0; k < n; k++) {
        int32_t d;
        if (!cge_axis_normalize(v[k], r, false, &d) || p->list_of[d] >= 0) {
            snprintf(err, errsz, "axes value %lld is out of range for rank %d or repeated",
                     (long long)v[k], (int)r);
            return false;
        }
        p->list_of[d] = (int32_t)k;
        p->axis_of[k] = d;
    }
    return true;
}

/* Tap slots per output index of each axis (p->in, p->out known): the mode's
 * taps, 1 for an unlisted axis (identity), and with antialias the filter
 * stretched by 1 / scale for a downscaled axis: 2 ceil(1 / s) (linear) or
 * 2 ceil(2 / s) (cubic) taps, bounded by base * ceil(in / (out - 0.5)), since
 * the scale is more than (out - 0.5) / in whether it comes from scales
 * (out = floor(in s)) or from a kept aspect ratio (out = round(in s)). An
 * axis that keeps its size has a scale of at least 1 unless an aspect ratio
 * is kept. */
static void rz_taps(rz_args *p)
{
    for (int32_t d = 0; d < p->out.rank; d++) {
        int64_t in = p->in.dims[d], out = p->out.dims[d], t = p->maxt;
        if (p->list_of[d] < 0)
            t = 1;
        else if (in == out && p->policy == KAR_STRETCH)
            t = p->maxt; /* scale >= 1 (scales: floor(in s) = in) or exactly 1 (sizes) */
        else if (p->antialias && out >= 1 && in > out - 1) {
            int64_t f = (2 * in + 2 * out - 2) / (2 * out - 1); /* ceil(in / (out - 0.5)) */
            t = p->maxt * (f > 1 ? f : 1);
        }
        p->mt[d] = t;
    }
}

/* Outer axes' combined taps must fit the kernel's per-row buffer. */
static bool rz_combos_ok(const rz_args *p, int32_t rank)
{
    int64_t c = 1;
    for (int32_t d = 0; d + 1 < rank; d++) {
        c *= p->mt[d];
        if (c > RZ_MAX_COMBOS)
            return false;
    }
    return true;
}

static bool present(const cge_infer_ctx *ctx, int32_t i)
{
    return i < ctx->num_inputs && ctx->inputs[i].dtype != CGE_DTYPE_UNDEFINED &&
           cge_shape_numel(&ctx->inputs[i].shape) != 0;
}

static cge_status rz_infer_common(cge_infer_ctx *ctx, bool upsample)
{
    if (ctx->num_inputs < 1 || ctx->num_outputs < 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "needs input X");
    const cge_tensor_desc *X = &ctx->inputs[0];
    int32_t r = X->shape.rank;
    rz_args p;
    char err[1024];
    memset(&p, 0, sizeof p);
    if (!rz_modes(ctx->attrs, upsample, &p, err, sizeof err))
        return cge_meta_error(ctx, CGE_ERR_UNSUPPORTED, "%s", err);
    if (!rz_axes(upsample ? NULL : ctx->attrs, r, &p, err, sizeof err))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "%s", err);
    int32_t na = p.naxes;
    int32_t si = upsample ? 1 : 2, zi = upsample ? -1 : 3;
    bool has_sizes = zi > 0 && present(ctx, zi), has_scales = present(ctx, si);
    if (has_sizes == has_scales)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "exactly one of scales and sizes must be given (non-empty)");
    const cge_tensor_desc *S = &ctx->inputs[has_sizes ? zi : si];
    if (S->shape.rank != 1 || (S->shape.dims[0] >= 0 && S->shape.dims[0] != na))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "%s must be 1-D with %d values (one per %s)",
                              has_sizes ? "sizes" : "scales", (int)na,
                              na == r && p.list_of[0] == 0 ? "axis" : "listed axis");
    if (has_sizes ? !cge_dtype_is_int(S->dtype) : !cge_dtype_is_float(S->dtype))
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "%s has dtype %s",
                              has_sizes ? "sizes" : "scales", cge_dtype_name(S->dtype));
    if (p.policy != KAR_STRETCH && !has_sizes)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "keep_aspect_ratio_policy applies to sizes, not scales");
    if (p.ctm == CT_TF_CROP && !present(ctx, 1))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "tf_crop_and_resize needs roi");
    if (p.ctm == CT_TF_CROP && cge_shape_numel(&ctx->inputs[1].shape) >= 0 &&
        cge_shape_numel(&ctx->inputs[1].shape) != 2 * na)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "roi must have %d values", (int)(2 * na));
    ctx->outputs[0].dtype = X->dtype;
    cge_shape out = X->shape;
    const void *v = ctx->input_values ? ctx->input_values[has_sizes ? zi : si] : NULL;
    /* keep_aspect_ratio_policy: one scale for the listed axes, the smallest
     * (not_larger) or largest (not_smaller) of sizes / input dims */
    double kept = p.policy == KAR_NOT_LARGER ? INFINITY : -INFINITY;
    bool kept_known = v != NULL;
    for (int32_t k = 0; v && has_sizes && k < na; k++) {
        int64_t z = cge__load_as_i64(S->dtype, v, k), in = X->shape.dims[p.axis_of[k]];
        if (z < 0)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "sizes[%d] is negative", (int)k);
        if (in < 0)
            kept_known = false;
        else if (in > 0)
            kept = p.policy == KAR_NOT_LARGER ? fmin(kept, (double)z / (double)in)
                                              : fmax(kept, (double)z / (double)in);
    }
    for (int32_t k = 0; k < na; k++) {
        int32_t d = p.axis_of[k];
        if (!v) {
            out.dims[d] = CGE_DIM_DYNAMIC;
        } else if (has_sizes && p.policy != KAR_STRETCH) {
            out.dims[d] = kept_known && X->shape.dims[d] >= 0 && isfinite(kept)
                              ? (int64_t)(kept * (double)X->shape.dims[d] + 0.5)
                              : CGE_DIM_DYNAMIC;
        } else if (has_sizes) {
            out.dims[d] = cge__load_as_i64(S->dtype, v, k);
        } else {
            double sc = cge__load_as_double(S->dtype, v, k);
            if (!(sc > 0))
                return cge_meta_error(ctx, CGE_ERR_SHAPE, "scales[%d] = %g must be > 0", (int)k,
                                      sc);
            if (X->shape.dims[d] >= 0)
                out.dims[d] = (int64_t)floor((double)X->shape.dims[d] * sc);
            else if (sc != 1.0)
                out.dims[d] = CGE_DIM_DYNAMIC;   /* a scaled symbol is a new size */
        }
    }
    p.in = X->shape;
    p.out = out;
    if (cge_shape_is_static(&p.in) && cge_shape_is_static(&p.out)) {
        rz_taps(&p);
    } else {
        for (int32_t d = 0; d < r; d++)
            p.mt[d] = p.list_of[d] < 0 ? 1 : p.maxt; /* the launch checks antialias's */
    }
    if (!rz_combos_ok(&p, r))
        return cge_meta_error(ctx, CGE_ERR_UNSUPPORTED, "rank %d is too high for %s resizing%s",
                              (int)r, p.mode == RZ_CUBIC ? "cubic" : "linear",
                              p.antialias ? " with antialias at these scales" : "");
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

cge_status cge__resize_infer(cge_infer_ctx *ctx)
{
    return rz_infer_common(ctx, false);
}

static cge_status upsample_infer(cge_infer_ctx *ctx)
{
    return rz_infer_common(ctx, true);
}

/* ---- tables ---------------------------------------------------------------------- */

/* The tables, then 64 bytes of taps per axis and 64 more whose first byte
 * says whether every axis maps each output index to the same input index
 * with weight 1 and nothing outside (a resize to the input's own size: a
 * detector's transform given an image of its target size). */
static size_t rz_tab_bytes(const rz_args *p)
{
    size_t b = 128;
    for (int32_t d = 0; d < p->out.rank; d++)
        b += (size_t)(p->out.dims[d] * p->mt[d]) * (sizeof(int64_t) + sizeof(double)) +
             (size_t)p->out.dims[d] + 16;
    return b;
}

static void rz_tab_layout(const rz_args *p, rz_tab *t)
{
    unsigned char *q = p->ws;
    for (int32_t d = 0; d < p->out.rank; d++) {
        size_t n = (size_t)(p->out.dims[d] * p->mt[d]);
        t->idx[d] = (int64_t *)q;
        q += n * sizeof(int64_t);
        t->w[d] = (double *)q;
        q += n * sizeof(double);
        t->outside[d] = q;
        q += ((size_t)p->out.dims[d] + 15) / 16 * 16;
    }
}

static void cubic_coeffs(double r, double A, double c[4])
{
    double x = r + 1, y = 1 - r, z = 2 - r;
    c[0] = ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
    c[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
    c[2] = ((A + 2) * y - (A + 3)) * y * y + 1;
    c[3] = ((A * z - 5 * A) * z + 8 * A) * z - 4 * A;
}

/* The scale of axis d (1 for an unlisted one): from scales, from sizes
 * (out / in), or keep_aspect_ratio_policy's one scale for the listed axes. */
static double rz_axis_scale(const rz_args *p, int32_t d)
{
    int32_t k = p->list_of[d];
    if (k < 0)
        return 1.0;
    if (!p->sizes)
        return cge__load_as_double(p->scales_t, p->scales, k);
    if (p->policy == KAR_STRETCH) {
        int64_t in = p->in.dims[d];
        return in > 0 ? (double)p->out.dims[d] / (double)in : 1.0;
    }
    double kept = p->policy == KAR_NOT_LARGER ? INFINITY : -INFINITY;
    for (int32_t j = 0; j < p->naxes; j++) {
        int64_t in = p->in.dims[p->axis_of[j]];
        double q = in > 0 ? (double)cge__load_as_i64(p->sizes_t, p->sizes, j) / (double)in : 0;
        if (in > 0)
            kept = p->policy == KAR_NOT_LARGER ? fmin(kept, q) : fmax(kept, q);
    }
    return isfinite(kept) ? kept : 1.0;
}

/* onnx's filters stretched for downscaling (scale < 1): taps i = start ..
 * start + n - 1 around the left neighbour, weights of (i - ratio) * scale,
 * normalised by the caller. Returns n, or -1 if more than `cap`. */
static int64_t rz_antialias_coeffs(int mode, double ratio, double scale, double A, double *c,
                                   int64_t cap)
{
    double s = scale < 1 ? scale : 1;
    int64_t start = (int64_t)floor((mode == RZ_LINEAR ? -1.0 : -2.0) / s) + 1;
    int64_t n = 2 - 2 * start;
    if (n > cap)
        return -1;
    for (int64_t k = 0; k < n; k++) {
        double x = fabs(((double)(start + k) - ratio) * s);
        if (mode == RZ_LINEAR)
            c[k] = x < 1 ? 1 - x : 0;
        else
            c[k] = x <= 1   ? ((A + 2) * x - (A + 3)) * x * x + 1
                   : x < 2 ? ((A * x - 5 * A) * x + 8 * A) * x - 4 * A
                           : 0;
    }
    return n;
}

/* One block: the taps of every axis (the tap counts go into the last bytes
 * of the workspace header, read back by the main kernel). */
static void rz_tab_fn(int64_t blk, int64_t nblk, void *args)
{
    const rz_args *p = args;
    rz_tab t;
    rz_tab_layout(p, &t);
    int32_t r = p->out.rank;
    bool all_identity = true;
    for (int32_t d = 0; d < r; d++) {
        int64_t in = p->in.dims[d], out = p->out.dims[d], mt = p->mt[d];
        int32_t k = p->list_of[d];
        double scale = rz_axis_scale(p, d);
        double owidth = scale * (double)in;
        double r0 = 0, r1 = 1;
        if (p->ctm == CT_TF_CROP && k >= 0) {
            r0 = cge__load_as_double(p->roi_t, p->roi, k);
            r1 = cge__load_as_double(p->roi_t, p->roi, p->naxes + k);
        }
        bool identity = in == out;
        for (int64_t o = 0; o < out; o++) {
            double x;
            switch (p->ctm) {
            case CT_ALIGN_CORNERS:
                x = owidth == 1 ? 0.0 : (double)o * (double)(in - 1) / (owidth - 1);
                break;
            case CT_ASYMMETRIC: x = (double)o / scale; break;
            case CT_TF_CROP:
                x = owidth == 1 ? (r1 - r0) * (double)(in - 1) / 2
                                : (double)o * (r1 - r0) * (double)(in - 1) / (owidth - 1);
                x += r0 * (double)(in - 1);
                break;
            case CT_TF_HALF_PIXEL_NN: x = ((double)o + 0.5) / scale; break;
            case CT_PYTORCH_HALF_PIXEL:
                x = owidth == 1 ? -0.5 : ((double)o + 0.5) / scale - 0.5;
                break;
            default: x = ((double)o + 0.5) / scale - 0.5; break;
            }
            if (x != (double)o)
                identity = false;
            if (k < 0)
                continue; /* an unlisted axis is the identity */
            t.outside[d][o] = p->ctm == CT_TF_CROP && (x < 0 || x > (double)(in - 1));
            int64_t *ix = t.idx[d] + o * mt;
            double *w = t.w[d] + o * mt;
            double xf = floor(x), ratio = x - xf;
            int64_t xi = (int64_t)xf;
            if (ratio == 0) { /* prefer the left neighbour with ratio 1 */
                xi -= 1;
                ratio = 1;
            }
            for (int64_t j = 0; j < mt; j++) {
                ix[j] = 0;
                w[j] = 0;
            }
            if (p->mode == RZ_NEAREST) {
                int up;
                if (ratio == 1)
                    up = 1;
                else if (p->nearest == NM_ROUND_FLOOR)
                    up = ratio > 0.5;
                else if (p->nearest == NM_ROUND_CEIL)
                    up = ratio >= 0.5;
                else
                    up = p->nearest == NM_CEIL;
                ix[0] = xi + up;
                w[0] = 1.0;
            } else {
                double cbuf[4], *c = p->antialias ? w : cbuf;
                int64_t n = p->maxt;
                if (p->antialias) {
                    n = rz_antialias_coeffs(p->mode, ratio, scale, p->cubic_a, w, mt);
                    if (n < 0) {
                        /* scales changed on the stream beyond the planned taps */
                        cge_kernel_fail(CGE_ERR_SHAPE, "Resize: antialias needs more taps "
                                        "than the plan made room for (scales changed)");
                        return;
                    }
                } else if (p->mode == RZ_LINEAR) {
                    c[0] = 1 - ratio;
                    c[1] = ratio;
                } else {
                    cubic_coeffs(ratio, p->cubic_a, c);
                }
                double sum = 0;
                for (int64_t j = 0; j < n; j++) {
                    ix[j] = xi - n / 2 + 1 + j;
                    if (p->exclude_outside && (ix[j] < 0 || ix[j] >= in))
                        c[j] = 0;
                    sum += c[j];
                }
                bool norm = (p->exclude_outside || p->antialias) && sum != 0;
                for (int64_t j = 0; j < n; j++)
                    w[j] = norm ? c[j] / sum : c[j];
            }
            for (int64_t j = 0; j < mt; j++)
                ix[j] = ix[j] < 0 ? 0 : ix[j] >= in ? in - 1 : ix[j];
        }
        if (identity || k < 0) {
            for (int64_t o = 0; o < out; o++) {
                t.idx[d][o * mt] = o;
                t.w[d][o * mt] = 1.0;
                t.outside[d][o] = 0;
            }
        }
        t.ntaps[d] = identity || k < 0 ? 1 : mt;
        all_identity &= (identity || k < 0) && in == out;
    }
    memcpy(p->ws + rz_tab_bytes(p) - 128, t.ntaps, sizeof(int64_t) * (size_t)r);
    p->ws[rz_tab_bytes(p) - 64] = all_identity;
}

static bool rz_identity(const rz_args *p) { return p->ws[rz_tab_bytes(p) - 64] != 0; }

/* Rows [r0, r1) of an identity resize: each output element is its input
 * element times weights of 1, which is the input's value: copied. */
static void rz_copy(const rz_args *p, int64_t r0, int64_t r1, int64_t row_elems)
{
    size_t es = cge_dtype_size(p->dtype);
    size_t from = (size_t)(r0 * row_elems) * es;
    memcpy((char *)p->y + from, (const char *)p->x + from, (size_t)((r1 - r0) * row_elems) * es);
}

/* The input offsets and weights of every combination of taps over the axes
 * r-2 down to 0 but `skip` (-1: none) for output indices o[]; returns how
 * many, and sets *outside when any axis is outside the crop. */
static int64_t rz_combos(const rz_args *p, const rz_tab *t, const int64_t *o, int32_t skip,
                         const int64_t *str, int64_t *coff, double *cw, int *outside)
{
    int64_t nc = 1;
    coff[0] = 0;
    cw[0] = 1.0;
    for (int32_t d = p->out.rank - 2; d >= 0; d--) {
        if (d == skip)
            continue;
        int64_t mt = p->mt[d];
        *outside |= t->outside[d][o[d]];
        int64_t k = t->ntaps[d], n2 = 0;
        for (int64_t c = 0; c < nc; c++)
            for (int64_t j = 0; j < k; j++) {
                double wv = t->w[d][o[d] * mt + j];
                if (wv == 0 && k > 1)
                    continue;
                /* combos beyond c are rewritten only after c is read */
                coff[nc + n2] = coff[c] + t->idx[d][o[d] * mt + j] * str[d];
                cw[nc + n2] = cw[c] * wv;
                n2++;
            }
        memmove(coff, coff + nc, sizeof(int64_t) * (size_t)n2);
        memmove(cw, cw + nc, sizeof(double) * (size_t)n2);
        nc = n2;
    }
    return nc;
}

/* Blocks over output rows (all axes but the last). */
static void rz_fn(int64_t blk, int64_t nblk, void *args)
{
    const rz_args *p = args;
    rz_tab t;
    rz_tab_layout(p, &t);
    int32_t r = p->out.rank;
    memcpy(t.ntaps, p->ws + rz_tab_bytes(p) - 128, sizeof(int64_t) * (size_t)r);
    int64_t W = p->out.dims[r - 1], rows = cge_shape_numel(&p->out) / W, r0, r1;
    cge__block_range(rows, blk, nblk, &r0, &r1);
    if (rz_identity(p)) {
        rz_copy(p, r0, r1, W);
        return;
    }
    int64_t str[CGE_MAX_RANK];
    cge_shape_strides(&p->in, str);
    int64_t coff[2 * RZ_MAX_COMBOS];
    double cw[2 * RZ_MAX_COMBOS];
    int64_t L = r - 1, nt = t.ntaps[L], mt = p->mt[L];
    for (int64_t row = r0; row < r1; row++) {
        int64_t o[CGE_MAX_RANK] = {0}, rem = row;
        for (int32_t d = r - 2; d >= 0; d--) {
            o[d] = rem % p->out.dims[d];
            rem /= p->out.dims[d];
        }
        int outside = 0;
        int64_t nc = rz_combos(p, &t, o, -1, str, coff, cw, &outside);
        if (p->dtype == CGE_F32) {
            const float *x = p->x;
            float *y = (float *)p->y + row * W;
            for (int64_t ow = 0; ow < W; ow++) {
                if (outside || t.outside[L][ow]) {
                    y[ow] = (float)p->extrapolation;
                    continue;
                }
                double acc = 0;
                const int64_t *ix = t.idx[L] + ow * mt;
                const double *w = t.w[L] + ow * mt;
                for (int64_t c = 0; c < nc; c++) {
                    const float *xc = x + coff[c];
                    double s = 0;
                    for (int64_t j = 0; j < nt; j++)
                        s += w[j] * xc[ix[j]];
                    acc += cw[c] * s;
                }
                y[ow] = (float)acc;
            }
        } else {
            for (int64_t ow = 0; ow < W; ow++) {
                double acc = 0;
                if (outside || t.outside[L][ow]) {
                    acc = p->extrapolation;
                } else {
                    const int64_t *ix = t.idx[L] + ow * mt;
                    const double *w = t.w[L] + ow * mt;
                    for (int64_t c = 0; c < nc; c++)
                        for (int64_t j = 0; j < nt; j++)
                            acc += cw[c] * w[j] * cge__load_as_double(p->dtype, p->x, coff[c] + ix[j]);
                }
                cge__store_from_double(p->dtype, p->y, row * W + ow, acc);
            }
        }
    }
}

/* NHWC (channels-last) float32: blocks over output positions (all axes but
 * C). Rank 4 with N kept (every 2-D map: feature pyramids, segmentation
 * heads, YOLO's upsampling) takes the taps of H and W straight from the
 * tables, their weight products rounded to float once, and accumulates the
 * channel vector in float: about 10x faster than the general loop, within
 * float32 rounding of the NCHW kernel (which sums in double). Other ranks
 * and filters with more than 16 taps per position (antialiased
 * down-scaling) compute each position's channel vector with the NCHW
 * kernel's arithmetic in the same order (the C axis maps to itself with
 * weight 1): the same bits. */
#define RZ_CBLK 64
#define RZ_2D_TAPS 16

/* Positions [r0, r1) of a rank-4 NHWC resize with N kept; false (nothing
 * written) when a position has more than RZ_2D_TAPS taps. */
CGE_TARGET_CLONES
static bool rz_nhwc_2d(const rz_args *p, const rz_tab *t, const int64_t *str, int64_t r0,
                       int64_t r1, float *yb)
{
    int64_t C = p->out.dims[1], H = p->out.dims[2], W = p->out.dims[3];
    int64_t k2 = t->ntaps[2], k3 = t->ntaps[3], m2 = p->mt[2], m3 = p->mt[3];
    if (k2 * k3 > RZ_2D_TAPS)
        return false;
    const float *x = p->x;
    float ext = (float)p->extrapolation;
    /* the position's indices stepped, not divided out (three divisions
     * per position cost more than its 21-channel vector) */
    int64_t ow = r0 % W, oh = (r0 / W) % H, n = r0 / (W * H);
    for (int64_t pos = r0; pos < r1; pos++, ow++) {
        if (ow == W) {
            ow = 0;
            if (++oh == H) {
                oh = 0;
                n++;
            }
        }
        float *restrict y = yb + (pos - r0) * C;
        if (t->outside[0][n] || t->outside[2][oh] || t->outside[3][ow]) {
            for (int64_t c = 0; c < C; c++)
                y[c] = ext;
            continue;
        }
        const float *src[RZ_2D_TAPS];
        float wt[RZ_2D_TAPS];
        int nt = 0;
        const float *xn = x + t->idx[0][n * p->mt[0]] * str[0];
        for (int64_t a = 0; a < k2; a++) {
            double wy = t->w[2][oh * m2 + a];
            if (wy == 0 && k2 > 1)
                continue;
            const float *xr = xn + t->idx[2][oh * m2 + a] * str[2];
            for (int64_t b = 0; b < k3; b++) {
                double wx = t->w[3][ow * m3 + b];
                if (wx == 0 && k3 > 1)
                    continue;
                src[nt] = xr + t->idx[3][ow * m3 + b] * str[3];
                wt[nt++] = (float)(wy * wx);
            }
        }
        if (nt == 0) {
            for (int64_t c = 0; c < C; c++)
                y[c] = 0.0f;
            continue;
        }
        const float *restrict s0 = src[0];
        float w0 = wt[0];
        if (nt == 4) {
            /* bilinear: one pass over y, the taps summed in the same order
             * as the general loop below (no FMA contraction: the same bits) */
            const float *restrict s1 = src[1], *restrict s2 = src[2], *restrict s3 = src[3];
            float w1 = wt[1], w2 = wt[2], w3 = wt[3];
            for (int64_t c = 0; c < C; c++)
                y[c] = ((w0 * s0[c] + w1 * s1[c]) + w2 * s2[c]) + w3 * s3[c];
            continue;
        }
        if (nt == 2) {
            const float *restrict s1 = src[1];
            float w1 = wt[1];
            for (int64_t c = 0; c < C; c++)
                y[c] = w0 * s0[c] + w1 * s1[c];
            continue;
        }
        for (int64_t c = 0; c < C; c++)
            y[c] = w0 * s0[c];
        for (int k = 1; k < nt; k++) {
            const float *restrict sk = src[k];
            float wk = wt[k];
            for (int64_t c = 0; c < C; c++)
                y[c] += wk * sk[c];
        }
    }
    return true;
}

/* Positions [r0, r1) of an NHWC resize, their channel vectors written as
 * rows from yb (position r0's). Cloned per instruction set: the channel
 * loops are the work (no contraction into FMA in C11 mode, so every clone
 * gives the same bits). */
CGE_TARGET_CLONES
static void rz_nhwc_rows(const rz_args *p, const rz_tab *t, const int64_t *str, int64_t r0,
                         int64_t r1, float *yb)
{
    int32_t r = p->out.rank;
    int64_t C = p->out.dims[1];
    if (r == 4 && t->ntaps[0] == 1 && p->in.dims[0] == p->out.dims[0] &&
        rz_nhwc_2d(p, t, str, r0, r1, yb))
        return;
    int64_t coff[2 * RZ_MAX_COMBOS];
    double cw[2 * RZ_MAX_COMBOS];
    int64_t L = r - 1, nt = t->ntaps[L], mt = p->mt[L];
    const float *x = p->x;
    for (int64_t pos = r0; pos < r1; pos++) {
        int64_t o[CGE_MAX_RANK] = {0}, rem = pos;
        for (int32_t d = r - 1; d >= 0; d--) {
            if (d == 1)
                continue;
            o[d] = rem % p->out.dims[d];
            rem /= p->out.dims[d];
        }
        int outside = t->outside[L][o[L]];
        int64_t nc = rz_combos(p, t, o, 1, str, coff, cw, &outside);
        float *y = yb + (pos - r0) * C;
        if (outside) {
            for (int64_t ch = 0; ch < C; ch++)
                y[ch] = (float)p->extrapolation;
            continue;
        }
        const int64_t *ix = t->idx[L] + o[L] * mt;
        const double *w = t->w[L] + o[L] * mt;
        for (int64_t c0 = 0; c0 < C; c0 += RZ_CBLK) {
            int64_t cn = C - c0 < RZ_CBLK ? C - c0 : RZ_CBLK;
            double acc[RZ_CBLK] = {0}, sum[RZ_CBLK];
            for (int64_t c = 0; c < nc; c++) {
                for (int64_t i = 0; i < cn; i++)
                    sum[i] = 0;
                for (int64_t j = 0; j < nt; j++) {
                    const float *xs = x + coff[c] + ix[j] * str[L] + c0;
                    for (int64_t i = 0; i < cn; i++)
                        sum[i] += w[j] * xs[i];
                }
                for (int64_t i = 0; i < cn; i++)
                    acc[i] += cw[c] * sum[i];
            }
            for (int64_t i = 0; i < cn; i++)
                y[c0 + i] = (float)acc[i];
        }
    }
}

/* plain_output: positions go through a stack tile of at most this many
 * floats, then out by channel plane (runs of positions contiguous on
 * both sides), so that no NHWC copy of the enlarged output exists. */
#define RZ_TILE_FLOATS 8192

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RZ_X86 1
#else
#define RZ_X86 0
#endif

#if RZ_X86
#define RZ_PERM_FLOATS 8192

/* plain_output of a rank-4 resize with N kept and at most RZ_2D_TAPS taps
 * per position (rz_nhwc_2d's case: a segmentation head's 8x bilinear
 * upsampling), written straight into NCHW rows: 16 output columns of one
 * row of one channel at a time, each column's taps gathered from the NHWC
 * input (a row of taps is a few KB, in L1). The per-position tile and its
 * scalar transpose took 2x ONNX Runtime's NCHW kernel on lraspp/deeplabv3's
 * 21-channel 28x28 -> 224x224 head; this is one vector per 16 outputs.
 * The bits are rz_nhwc_2d's: the same float weights (float)(wy * wx), the
 * same taps skipped (a zero weight on an axis with more than one tap), the
 * products summed left to right in the same (row tap, column tap) order,
 * with separate multiplies and adds (no FMA). Lanes differ only in which
 * column taps they have, so each lane accumulates under a mask: its first
 * live tap starts its sum. Not for tf_crop_and_resize (no position is
 * outside the input). Rows [q0, q1) of the N * H output rows. */
__attribute__((target("avx512f"))) static void rz_plain_2d_avx512(const rz_args *p,
                                                                  const rz_tab *t,
                                                                  const int64_t *str,
                                                                  int64_t q0, int64_t q1)
{
    int64_t C = p->out.dims[1], H = p->out.dims[2], W = p->out.dims[3];
    int64_t k2 = t->ntaps[2], k3 = t->ntaps[3], m2 = p->mt[2], m3 = p->mt[3];
    const float *x = p->x;
    float *y = p->y;
    /* An input row of at most 32 positions (a head's 28x28 or smaller) is
     * transposed once into channel rows of 32 floats; a column tap is then
     * one two-register permute instead of a gather (about 3x faster). */
    int64_t Win = p->in.dims[3];
    bool perm = Win <= 32 && k2 * C * 32 <= RZ_PERM_FLOATS;
    _Alignas(64) float tr[RZ_PERM_FLOATS];
    const float *cached[RZ_2D_TAPS] = {0};
    if (perm)
        memset(tr, 0, sizeof(float) * (size_t)(k2 * C * 32));
    for (int64_t q = q0; q < q1; q++) {
        int64_t n = q / H, oh = q % H;
        float *yrow = y + n * C * H * W + oh * W; /* channel c's row: + c * H * W */
        const float *rows[RZ_2D_TAPS];
        double wy[RZ_2D_TAPS];
        int na = 0;
        const float *xn = x + t->idx[0][n * p->mt[0]] * str[0];
        for (int64_t a = 0; a < k2; a++) {
            double w = t->w[2][oh * m2 + a];
            if (w == 0 && k2 > 1)
                continue;
            rows[na] = xn + t->idx[2][oh * m2 + a] * str[2];
            wy[na++] = w;
        }
        for (int a = 0; perm && a < na; a++) {
            if (cached[a] == rows[a])
                continue; /* the previous output row's input row */
            cached[a] = rows[a];
            for (int64_t c = 0; c < C; c++)
                for (int64_t i = 0; i < Win; i++)
                    tr[(a * C + c) * 32 + i] = rows[a][i * C + c];
        }
        for (int64_t ow = 0; ow < W; ow += 16) {
            int64_t cols = W - ow < 16 ? W - ow : 16;
            __mmask16 all = (__mmask16)(cols == 16 ? 0xffff : (1u << cols) - 1u);
            /* per column tap b: its input offsets, weights, which lanes have it */
            int32_t off[RZ_2D_TAPS][16];
            double wx[RZ_2D_TAPS][16];
            __mmask16 live[RZ_2D_TAPS];
            for (int64_t b = 0; b < k3; b++) {
                live[b] = 0;
                for (int64_t l = 0; l < 16; l++) {
                    int64_t o = ow + (l < cols ? l : 0);
                    double w = t->w[3][o * m3 + b];
                    off[b][l] = (int32_t)(t->idx[3][o * m3 + b] * (perm ? 1 : str[3]));
                    wx[b][l] = w;
                    if (l < cols && !(w == 0 && k3 > 1))
                        live[b] |= (__mmask16)(1u << l);
                }
            }
            /* the weight of every (row tap, column tap), rounded to float once */
            __m512 wt[RZ_2D_TAPS];
            __m512i vi[RZ_2D_TAPS];
            for (int64_t b = 0; b < k3; b++)
                vi[b] = _mm512_loadu_si512(off[b]);
            for (int a = 0; a < na; a++)
                for (int64_t b = 0; b < k3; b++) {
                    __m512d wa = _mm512_set1_pd(wy[a]);
                    __m256 lo = _mm512_cvtpd_ps(_mm512_mul_pd(wa, _mm512_loadu_pd(wx[b])));
                    __m256 hi = _mm512_cvtpd_ps(_mm512_mul_pd(wa, _mm512_loadu_pd(wx[b] + 8)));
                    wt[a * k3 + b] = _mm512_castpd_ps(_mm512_insertf64x4(
                        _mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi), 1));
                }
            for (int64_t c = 0; c < C; c++) {
                __m512 acc = _mm512_setzero_ps();
                __mmask16 started = 0;
                for (int a = 0; a < na; a++)
                    for (int64_t b = 0; b < k3; b++) {
                        __mmask16 m = live[b];
                        __m512 s;
                        if (perm) {
                            const float *r = tr + (a * C + c) * 32;
                            s = _mm512_permutex2var_ps(_mm512_load_ps(r), vi[b],
                                                       _mm512_load_ps(r + 16));
                        } else {
                            s = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, vi[b],
                                                         rows[a] + c, 4);
                        }
                        __m512 prod = _mm512_mul_ps(wt[a * k3 + b], s);
                        __m512 sum = _mm512_add_ps(acc, prod);
                        acc = _mm512_mask_mov_ps(acc, (__mmask16)(started & m), sum);
                        acc = _mm512_mask_mov_ps(acc, (__mmask16)(~started & m), prod);
                        started |= m;
                    }
                _mm512_mask_storeu_ps(yrow + c * H * W + ow, all, acc);
            }
        }
    }
}
#endif

/* Whether rz_plain_2d_avx512 takes this plain_output resize. */
static bool rz_plain_2d_ok(const rz_args *p, const rz_tab *t)
{
#if RZ_X86
    int64_t C = p->out.dims[1];
    return p->out.rank == 4 && p->ctm != CT_TF_CROP && t->ntaps[0] == 1 &&
           p->in.dims[0] == p->out.dims[0] &&
           t->ntaps[2] * t->ntaps[3] <= RZ_2D_TAPS &&
           p->in.dims[3] * C < INT32_MAX && cge__cpu_has(CGE_CPU_AVX512F);
#else
    (void)p;
    (void)t;
    return false;
#endif
}

static void rz_nhwc_fn(int64_t blk, int64_t nblk, void *args)
{
    const rz_args *p = args;
    rz_tab t;
    rz_tab_layout(p, &t);
    int32_t r = p->out.rank;
    memcpy(t.ntaps, p->ws + rz_tab_bytes(p) - 128, sizeof(int64_t) * (size_t)r);
    if (t.ntaps[1] != 1) {
        cge_kernel_fail(CGE_ERR_INTERNAL, "Resize (channels-last): the channel axis is resized");
        return;
    }
    int64_t C = p->out.dims[1], pos_n = cge_shape_numel(&p->out) / C, r0, r1;
    cge__block_range(pos_n, blk, nblk, &r0, &r1);
    /* strides of the logical axes in the NHWC input */
    int64_t str[CGE_MAX_RANK];
    str[1] = 1;
    int64_t acc_str = C;
    for (int32_t d = r - 1; d >= 2; d--) {
        str[d] = acc_str;
        acc_str *= p->in.dims[d];
    }
    str[0] = acc_str;
    if (!p->plain_out && rz_identity(p)) {
        rz_copy(p, r0, r1, C);
        return;
    }
    if (!p->plain_out) {
        rz_nhwc_rows(p, &t, str, r0, r1, (float *)p->y + r0 * C);
        return;
    }
#if RZ_X86
    if (rz_plain_2d_ok(p, &t)) {
        int64_t q0, q1;
        cge__block_range(p->out.dims[0] * p->out.dims[2], blk, nblk, &q0, &q1);
        rz_plain_2d_avx512(p, &t, str, q0, q1);
        return;
    }
#endif
    float tile[RZ_TILE_FLOATS]; /* C <= RZ_TILE_FLOATS: the launch checked */
    int64_t S = pos_n / p->out.dims[0]; /* positions per image */
    int64_t step = RZ_TILE_FLOATS / C > 0 ? RZ_TILE_FLOATS / C : 1;
    for (int64_t a = r0; a < r1;) {
        int64_t n = a / S, b = a + step;
        b = b > r1 ? r1 : b;
        b = b > (n + 1) * S ? (n + 1) * S : b;
        rz_nhwc_rows(p, &t, str, a, b, tile);
        float *y = (float *)p->y + n * C * S + (a - n * S);
        for (int64_t c = 0; c < C; c++)
            for (int64_t q = 0; q < b - a; q++)
                y[c * S + q] = tile[q * C + c];
        a = b;
    }
}

static bool rz_args_make(const cge_kernel_ctx *ctx, bool upsample, rz_args *p, char *err,
                         size_t errsz)
{
    memset(p, 0, sizeof *p);
    if (ctx->num_inputs < 1 || ctx->num_outputs < 1) {
        snprintf(err, errsz, "needs input X and output Y");
        return false;
    }
    if (!rz_modes(ctx->attrs, upsample, p, err, errsz))
        return false;
    const cge_tensor *X = &ctx->inputs[0];
    p->dtype = X->dtype;
    p->x = X->data;
    p->y = ctx->outputs[0].data;
    p->in = X->shape;
    p->out = ctx->outputs[0].shape;
    if (p->in.rank != p->out.rank || p->in.rank < 1 || !cge_shape_is_static(&p->out) ||
        !cge_shape_is_static(&p->in)) {
        snprintf(err, errsz, "X and Y need the same rank (>= 1) and static shapes");
        return false;
    }
    if (!rz_axes(upsample ? NULL : ctx->attrs, p->in.rank, p, err, errsz))
        return false;
    for (int32_t d = 0; d < p->in.rank; d++)
        if (p->list_of[d] < 0 && p->in.dims[d] != p->out.dims[d]) {
            snprintf(err, errsz, "axis %d is not listed in axes but changes size", (int)d);
            return false;
        }
    rz_taps(p);
    if (!rz_combos_ok(p, p->in.rank)) {
        snprintf(err, errsz, "rank too high for this mode");
        return false;
    }
    int32_t si = upsample ? 1 : 2, zi = upsample ? -1 : 3;
    for (int32_t i = 1; i < ctx->num_inputs; i++) {
        const cge_tensor *t = &ctx->inputs[i];
        if (t->dtype == CGE_DTYPE_UNDEFINED || cge_shape_numel(&t->shape) == 0)
            continue;
        if (i == zi) {
            p->sizes = t->data;
            p->sizes_t = t->dtype;
            p->nsizes = cge_shape_numel(&t->shape);
        } else if (i == si) {
            p->scales = t->data;
            p->scales_t = t->dtype;
            p->nscales = cge_shape_numel(&t->shape);
        } else if (i == 1 && !upsample) {
            p->roi = t->data;
            p->roi_t = t->dtype;
            p->nroi = cge_shape_numel(&t->shape);
        }
    }
    if (p->sizes ? p->nsizes != p->naxes || !cge_dtype_is_int(p->sizes_t)
                 : !p->scales || p->nscales != p->naxes || !cge_dtype_is_float(p->scales_t)) {
        snprintf(err, errsz, "scales (float) or sizes (integer), one per listed axis, must be "
                 "given");
        return false;
    }
    if (p->ctm == CT_TF_CROP && (!p->roi || p->nroi != 2 * p->naxes ||
                                 !cge_dtype_is_float(p->roi_t))) {
        snprintf(err, errsz, "tf_crop_and_resize needs a float roi of %d values",
                 (int)(2 * p->naxes));
        return false;
    }
    return true;
}

/* The tables' size needs the output shape and the mode only: plans ask
 * before any input (scales included) has data. */
static size_t rz_workspace_common(const cge_kernel_ctx *ctx, bool upsample)
{
    rz_args p;
    char err[1024];
    memset(&p, 0, sizeof p);
    if (ctx->num_outputs < 1 || !rz_modes(ctx->attrs, upsample, &p, err, sizeof err))
        return 0;
    p.out = ctx->outputs[0].shape;
    if (p.out.rank < 1 || !cge_shape_is_static(&p.out) || ctx->num_inputs < 1)
        return 0;
    p.in = ctx->inputs[0].shape;
    if (p.in.rank != p.out.rank || !cge_shape_is_static(&p.in) ||
        !rz_axes(upsample ? NULL : ctx->attrs, p.in.rank, &p, err, sizeof err))
        return 0;
    rz_taps(&p);
    return rz_tab_bytes(&p);
}

size_t cge__resize_workspace(const cge_kernel_ctx *ctx)
{
    return rz_workspace_common(ctx, false);
}

static size_t upsample_workspace(const cge_kernel_ctx *ctx)
{
    return rz_workspace_common(ctx, true);
}

static cge_status rz_launch_common(const cge_kernel_ctx *ctx, cge_stream *stream, bool upsample,
                                   bool nhwc)
{
    rz_args p;
    char err[1024];
    if (!rz_args_make(ctx, upsample, &p, err, sizeof err))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "%s", err);
    if (!(RZ_DTYPES & CGE_DT(p.dtype)) || ctx->outputs[0].dtype != p.dtype)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "unsupported dtype %s",
                                cge_dtype_name(p.dtype));
    int64_t n = cge_shape_numel(&p.out);
    if (n == 0)
        return CGE_OK;
    if (cge_shape_numel(&p.in) == 0)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "cannot resize an empty input to a non-empty "
                                                    "output");
    if (!ctx->workspace || ctx->workspace_size < rz_tab_bytes(&p))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing workspace");
    if (!p.x || !p.y)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    p.ws = ctx->workspace;
    cge_status st = cge_launch(stream, rz_tab_fn, 1, &p, sizeof p);
    if (st != CGE_OK)
        return st;
    if (nhwc) {
        if (p.dtype != CGE_F32 || p.out.rank < 3 || p.in.dims[1] != p.out.dims[1])
            return cge_kernel_error(ctx, CGE_ERR_UNSUPPORTED,
                                    "channels-last: float32, rank >= 3, channels kept");
        p.plain_out = cge_attrs_get_int(ctx->attrs, "plain_output", 0) != 0;
        if (p.plain_out && p.out.dims[1] > RZ_TILE_FLOATS)
            return cge_kernel_error(ctx, CGE_ERR_UNSUPPORTED,
                                    "plain_output: at most %d channels", RZ_TILE_FLOATS);
        int64_t positions = n / p.out.dims[1];
        int64_t per_pos = p.out.dims[1] * p.maxt * p.mt[p.out.rank - 1];
        return cge_launch(stream, rz_nhwc_fn,
                          cge__blocks_for(positions, per_pos >= 4096 ? 1 : 4096 / per_pos,
                                         ctx->num_threads),
                          &p, sizeof p);
    }
    int64_t W = p.out.dims[p.out.rank - 1], rows = n / W;
    int64_t per = W * p.maxt * p.mt[p.out.rank - 1];
    return cge_launch(stream, rz_fn,
                      cge__blocks_for(rows, per >= 4096 ? 1 : 4096 / per, ctx->num_threads), &p,
                      sizeof p);
}

static cge_status resize_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return rz_launch_common(ctx, stream, false, false);
}

cge_status cge__resize_nhwc_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return rz_launch_common(ctx, stream, false, true);
}

int64_t cge__resize_nhwc_max_plain_channels(void)
{
    return RZ_TILE_FLOATS;
}

static cge_status upsample_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return rz_launch_common(ctx, stream, true, false);
}

const cge_arg_def cge__resize_inputs[CGE_RESIZE_NUM_INPUTS] = {
    {"X", 0, RZ_DTYPES, "any rank >= 1"},
    {"roi", CGE_ARG_OPTIONAL, CGE_DT_FLOAT, "starts then ends (tf_crop_and_resize)"},
    {"scales", CGE_ARG_OPTIONAL, CGE_DT(CGE_F32), "one per axis; empty when sizes is given"},
    {"sizes", CGE_ARG_OPTIONAL, CGE_DT(CGE_I64), "output shape"},
};
static const cge_arg_def rz_outputs[] = {{"Y", 0, RZ_DTYPES, "resized"}};
/* Resize's attributes, shared with ChannelsLastResize (which adds one);
 * the last three are 18's, the first six 13's. */
#define RZ_ATTRS \
    {"coordinate_transformation_mode", CGE_ATTR_STRING, false, 0, 0.0f, "half_pixel", \
     "half_pixel, pytorch_half_pixel, align_corners, asymmetric, tf_crop_and_resize, " \
     "tf_half_pixel_for_nn (Resize 11-12)"}, \
    {"cubic_coeff_a", CGE_ATTR_FLOAT, false, 0, -0.75f, NULL, "cubic kernel's a"}, \
    {"exclude_outside", CGE_ATTR_INT, false, 0, 0.0f, NULL, "drop taps outside and renormalise"}, \
    {"extrapolation_value", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "tf_crop_and_resize outside"}, \
    {"mode", CGE_ATTR_STRING, false, 0, 0.0f, "nearest", "nearest, linear or cubic"}, \
    {"nearest_mode", CGE_ATTR_STRING, false, 0, 0.0f, "round_prefer_floor", \
     "round_prefer_floor, round_prefer_ceil, floor, ceil"}, \
    {"antialias", CGE_ATTR_INT, false, 0, 0.0f, NULL, \
     "1: linear and cubic filters stretched by 1 / scale when downscaling"}, \
    {"axes", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "axes scales, sizes and roi list"}, \
    {"keep_aspect_ratio_policy", CGE_ATTR_STRING, false, 0, 0.0f, "stretch", \
     "with sizes: stretch, not_larger or not_smaller (one scale for the listed axes)"},
const cge_attr_def cge__resize_attrs[CGE_RESIZE_NUM_ATTRS] = {RZ_ATTRS};
const cge_attr_def cge__resize_nhwc_attrs[CGE_RESIZE_NUM_ATTRS + 1] = {
    RZ_ATTRS
    {"plain_output", CGE_ATTR_INT, false, 0, 0.0f, NULL,
     "1: Y in the plain (NCHW) layout, X still NHWC (set by the layout pass)"}};
static const cge_kernel_def rz_kernels[] = {{.engine = "cpu", .dtypes = RZ_DTYPES,
                                             .launch = resize_launch,
                                             .workspace_size = cge__resize_workspace,
                                             .inplace_input = -1}};

static const cge_arg_def up_inputs[] = {
    {"X", 0, RZ_DTYPES, "any rank >= 1"},
    {"scales", 0, CGE_DT(CGE_F32), "one per axis"},
};
static const cge_attr_def up_attrs[] = {
    {"mode", CGE_ATTR_STRING, false, 0, 0.0f, "nearest", "nearest or linear"},
};
static const cge_kernel_def up_kernels[] = {{.engine = "cpu", .dtypes = RZ_DTYPES,
                                             .launch = upsample_launch,
                                             .workspace_size = upsample_workspace,
                                             .inplace_input = -1}};

static const cge_op_def resize_ops[] = {
    {.name = "Resize", .domain = CGE_DOMAIN_DEFAULT, .since_version = 13, .end_version = 17,
     .inputs = cge__resize_inputs, .num_inputs = 4, .outputs = rz_outputs, .num_outputs = 1,
     .attrs = cge__resize_attrs, .num_attrs = 6, .infer = cge__resize_infer,
     .kernels = rz_kernels, .num_kernels = 1,
     .doc = "Resize by scales or to sizes with nearest, linear or cubic interpolation."},
    {.name = "Resize", .domain = CGE_DOMAIN_DEFAULT, .since_version = 18,
     .inputs = cge__resize_inputs, .num_inputs = 4, .outputs = rz_outputs, .num_outputs = 1,
     .attrs = cge__resize_attrs, .num_attrs = CGE_RESIZE_NUM_ATTRS, .infer = cge__resize_infer,
     .kernels = rz_kernels, .num_kernels = 1,
     .doc = "Resize by scales or to sizes with nearest, linear or cubic interpolation; "
            "antialias, axes and keep_aspect_ratio_policy."},
    {.name = "Upsample", .domain = CGE_DOMAIN_DEFAULT, .since_version = 9, .end_version = 10,
     .inputs = up_inputs, .num_inputs = 2, .outputs = rz_outputs, .num_outputs = 1,
     .attrs = up_attrs, .num_attrs = 1, .infer = upsample_infer, .kernels = up_kernels,
     .num_kernels = 1, .doc = "Upsample by scales (asymmetric; nearest floors)."},
};

const cge_op_def *cge__ops_resize(int32_t *count)
{
    *count = (int32_t)(sizeof resize_ops / sizeof resize_ops[0]);
    return resize_ops;
}
