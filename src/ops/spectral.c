/* Spectral operators at opset 17: DFT (axis, inverse, onesided, dft_length),
 * STFT, the Hann / Hamming / Blackman windows and MelWeightMatrix. */
#include <math.h>
#include <string.h>

#include "ops/builtin.h"
#include "ops/kernel_util.h"

/* Transforms compute in double: radix-2 FFT when the length is a power of two,
 * a direct DFT with a twiddle table otherwise; lines are spread over SPMD
 * blocks. */

#define SP_FLOAT CGE_DT_FLOAT
#define SP_INDEX (CGE_DT(CGE_I32) | CGE_DT(CGE_I64))
#define SP_OUT (CGE_DT_NUMERIC)

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static int has_in(const cge_infer_ctx *ctx, int32_t i)
{
    return ctx->num_inputs > i && ctx->inputs[i].dtype != CGE_DTYPE_UNDEFINED;
}

static int k_has_in(const cge_kernel_ctx *ctx, int32_t i)
{
    return ctx->num_inputs > i && ctx->inputs[i].dtype != CGE_DTYPE_UNDEFINED;
}

/* A scalar (or one-element) integer input's value when meta has it. */
static int scalar_value(const cge_infer_ctx *ctx, int32_t i, int64_t *v)
{
    if (!has_in(ctx, i) || !ctx->input_values[i] || cge_shape_numel(&ctx->inputs[i].shape) != 1)
        return 0;
    cge_dtype t = ctx->inputs[i].dtype;
    *v = cge_dtype_is_int(t) ? cge__load_as_i64(t, ctx->input_values[i], 0)
                             : (int64_t)cge__load_as_double(t, ctx->input_values[i], 0);
    return 1;
}

static cge_status need_scalar(cge_infer_ctx *ctx, int32_t i, const char *name)
{
    if (has_in(ctx, i) && cge_shape_numel(&ctx->inputs[i].shape) != 1 &&
        cge_shape_numel(&ctx->inputs[i].shape) >= 0)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "%s must be a scalar", name);
    return CGE_OK;
}

/* ---- the transform of one line --------------------------------------------- */

/* Per block scratch: twiddles, the input line and the result, n complex
 * values each. */
#define SCRATCH_PER_N 6

static int is_pow2(int64_t n)
{
    return n > 0 && (n & (n - 1)) == 0;
}

/* tw[k] = exp(-+2 pi i k / n) for k < n (sign + for the inverse). */
static void twiddles(double *tw, int64_t n, int inverse)
{
    double sg = inverse ? 1.0 : -1.0;
    for (int64_t k = 0; k < n; k++) {
        double a = 2.0 * M_PI * (double)k / (double)n;
        tw[2 * k] = cos(a);
        tw[2 * k + 1] = sg * sin(a);
    }
}

/* out[k] = sum_j line[j] tw[(j k) mod n] for k < kmax (interleaved complex). */
static void transform(const double *tw, const double *line, double *out, int64_t n, int64_t kmax)
{
    if (is_pow2(n)) {
        int bits = 0;
        while (((int64_t)1 << bits) < n)
            bits++;
        for (int64_t j = 0; j < n; j++) {
            int64_t r = 0;
            for (int b = 0; b < bits; b++)
                r |= ((j >> b) & 1) << (bits - 1 - b);
            out[2 * r] = line[2 * j];
            out[2 * r + 1] = line[2 * j + 1];
        }
        for (int64_t len = 2; len <= n; len <<= 1) {
            int64_t half = len / 2, step = n / len;
            for (int64_t s = 0; s < n; s += len)
                for (int64_t j = 0; j < half; j++) {
                    double wr = tw[2 * j * step], wi = tw[2 * j * step + 1];
                    double *a = out + 2 * (s + j), *b = out + 2 * (s + j + half);
                    double tr = b[0] * wr - b[1] * wi, ti = b[0] * wi + b[1] * wr;
                    b[0] = a[0] - tr;
                    b[1] = a[1] - ti;
                    a[0] += tr;
                    a[1] += ti;
                }
        }
        return;
    }
    for (int64_t k = 0; k < kmax; k++) {
        double re = 0.0, im = 0.0;
        int64_t idx = 0;
        for (int64_t j = 0; j < n; j++) {
            double wr = tw[2 * idx], wi = tw[2 * idx + 1];
            re += line[2 * j] * wr - line[2 * j + 1] * wi;
            im += line[2 * j] * wi + line[2 * j + 1] * wr;
            idx += k;
            if (idx >= n)
                idx %= n;
        }
        out[2 * k] = re;
        out[2 * k + 1] = im;
    }
}

static inline double ld(cge_dtype t, const void *p, int64_t i)
{
    switch (t) {
    case CGE_F32: return ((const float *)p)[i];
    case CGE_F64: return ((const double *)p)[i];
    default: return cge__load_as_double(t, p, i);
    }
}

static inline void st(cge_dtype t, void *p, int64_t i, double v)
{
    switch (t) {
    case CGE_F32: ((float *)p)[i] = (float)v; break;
    case CGE_F64: ((double *)p)[i] = v; break;
    default: cge__store_from_double(t, p, i, v); break;
    }
}

/* ---- DFT ------------------------------------------------------------------------ */

static int dft_axis(const cge_attrs *attrs, int32_t rank, int32_t *axis)
{
    int64_t a = cge_attrs_get_int(attrs, "axis", 1);
    if (a < 0)
        a += rank;
    if (a < 0 || a >= rank - 1)
        return 0;
    *axis = (int32_t)a;
    return 1;
}

static cge_status dft_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *x = &ctx->inputs[0];
    int32_t r = x->shape.rank, axis;
    int64_t comps = r > 0 ? x->shape.dims[r - 1] : 0;
    if (r < 2 || (comps >= 0 && comps != 1 && comps != 2))
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "input must be [batch, signal..., 1 or 2] (rank %d)", r);
    if (!dft_axis(ctx->attrs, r, &axis))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "axis %lld is not a signal axis of a rank-%d input",
                              (long long)cge_attrs_get_int(ctx->attrs, "axis", 1), r);
    int onesided = cge_attrs_get_int(ctx->attrs, "onesided", 0) != 0;
    int inverse = cge_attrs_get_int(ctx->attrs, "inverse", 0) != 0;
    if (onesided && (inverse || comps == 2))
        return cge_meta_error(ctx, CGE_ERR_UNSUPPORTED,
                              "onesided needs a real input and a forward transform");
    cge_status s = need_scalar(ctx, 1, "dft_length");
    if (s)
        return s;
    int64_t n = x->shape.dims[axis];
    int have_n = has_in(ctx, 1) && scalar_value(ctx, 1, &n);
    if (has_in(ctx, 1) && !have_n)
        n = CGE_DIM_DYNAMIC;
    if (have_n && n < 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "dft_length %lld must be >= 1",
                              (long long)n);
    ctx->outputs[0].dtype = x->dtype;
    ctx->outputs[0].shape = x->shape;
    /* an unknown n (a symbol included) stays only where the size is n itself */
    ctx->outputs[0].shape.dims[axis] =
        n < 0 ? (onesided ? CGE_DIM_DYNAMIC : n) : (onesided ? n / 2 + 1 : n);
    ctx->outputs[0].shape.dims[r - 1] = 2;
    return CGE_OK;
}

typedef struct dft_args {
    cge_dtype t;
    const void *x, *len;
    cge_dtype len_t;
    void *y;
    int64_t outer, inner, lin, lout, comps, nmax;
    int inverse, onesided;
    double *scratch;
    /* STFT */
    const void *win, *step;
    cge_dtype step_t;
    int64_t frames;
} dft_args;

static void dft_fn(int64_t blk, int64_t nblk, void *args)
{
    const dft_args *p = args;
    int64_t n = p->len ? cge__load_as_i64(p->len_t, p->len, 0) : p->lin;
    if (n < 1 || n > p->nmax) /* meta saw another length: leave nothing half-done */
        n = n < 1 ? 1 : p->nmax;
    double *tw = p->scratch + blk * SCRATCH_PER_N * p->nmax, *line = tw + 2 * n, *out = line + 2 * n;
    twiddles(tw, n, p->inverse);
    int64_t kmax = p->lout < n ? p->lout : n, l0, l1, take = n < p->lin ? n : p->lin;
    double scale = p->inverse ? 1.0 / (double)n : 1.0;
    cge__block_range(p->outer * p->inner, blk, nblk, &l0, &l1);
    for (int64_t l = l0; l < l1; l++) {
        int64_t o = l / p->inner, i = l % p->inner;
        for (int64_t j = 0; j < n; j++) {
            int64_t e = ((o * p->lin + j) * p->inner + i) * p->comps;
            line[2 * j] = j < take ? ld(p->t, p->x, e) : 0.0;
            line[2 * j + 1] = j < take && p->comps == 2 ? ld(p->t, p->x, e + 1) : 0.0;
        }
        transform(tw, line, out, n, kmax);
        for (int64_t k = 0; k < p->lout; k++) {
            int64_t e = ((o * p->lout + k) * p->inner + i) * 2;
            st(p->t, p->y, e, k < kmax ? out[2 * k] * scale : 0.0);
            st(p->t, p->y, e + 1, k < kmax ? out[2 * k + 1] * scale : 0.0);
        }
    }
}

static int64_t dft_blocks(const cge_kernel_ctx *ctx, int64_t lines, int64_t n)
{
    return cge__blocks_for(lines, n >= 4096 ? 1 : 4096 / (n > 0 ? n : 1), ctx->num_threads);
}

static int dft_setup(const cge_kernel_ctx *ctx, dft_args *p)
{
    memset(p, 0, sizeof *p);
    const cge_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    int32_t r = x->shape.rank, axis;
    if (r < 2 || y->shape.rank != r || !dft_axis(ctx->attrs, r, &axis))
        return 0;
    p->onesided = cge_attrs_get_int(ctx->attrs, "onesided", 0) != 0;
    p->inverse = cge_attrs_get_int(ctx->attrs, "inverse", 0) != 0;
    p->outer = 1;
    p->inner = 1;
    for (int32_t d = 0; d < axis; d++)
        p->outer *= x->shape.dims[d];
    for (int32_t d = axis + 1; d < r - 1; d++)
        p->inner *= x->shape.dims[d];
    p->lin = x->shape.dims[axis];
    p->lout = y->shape.dims[axis];
    p->comps = x->shape.dims[r - 1];
    p->nmax = p->onesided ? 2 * p->lout - 1 : p->lout;
    if (p->nmax < 1)
        p->nmax = 1;
    return 1;
}

static size_t dft_workspace(const cge_kernel_ctx *ctx)
{
    dft_args p;
    if (!dft_setup(ctx, &p))
        return 0;
    int64_t nb = dft_blocks(ctx, p.outer * p.inner, p.nmax);
    return (size_t)(nb * SCRATCH_PER_N * p.nmax) * sizeof(double);
}

static cge_status dft_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    dft_args p;
    if (!dft_setup(ctx, &p) || (p.comps != 1 && p.comps != 2))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "input and output shapes do not fit DFT");
    if (ctx->outputs[0].dtype != ctx->inputs[0].dtype)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "output dtype differs from the input's");
    p.t = ctx->inputs[0].dtype;
    p.x = ctx->inputs[0].data;
    p.y = ctx->outputs[0].data;
    if (k_has_in(ctx, 1)) {
        p.len = ctx->inputs[1].data;
        p.len_t = ctx->inputs[1].dtype;
    } else if (p.lout != (p.onesided ? p.lin / 2 + 1 : p.lin)) {
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output length does not fit the signal");
    }
    size_t need = dft_workspace(ctx);
    if (!ctx->workspace || ctx->workspace_size < need)
        return cge_kernel_error(ctx, CGE_ERR_NO_MEMORY, "workspace of %zu bytes missing", need);
    p.scratch = ctx->workspace;
    int64_t lines = p.outer * p.inner;
    if (lines == 0 || p.lout == 0)
        return CGE_OK;
    return cge_launch(stream, dft_fn, dft_blocks(ctx, lines, p.nmax), &p, sizeof p);
}

/* ---- STFT ------------------------------------------------------------------------ */

static cge_status stft_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *x = &ctx->inputs[0];
    int64_t comps = x->shape.rank == 3 ? x->shape.dims[2] : 0;
    if (x->shape.rank != 3 || (comps >= 0 && comps != 1 && comps != 2))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "signal must be [batch, length, 1 or 2]");
    int onesided = cge_attrs_get_int(ctx->attrs, "onesided", 1) != 0;
    if (onesided && comps == 2)
        return cge_meta_error(ctx, CGE_ERR_UNSUPPORTED,
                              "onesided needs a real signal (set onesided=0)");
    cge_status s = need_scalar(ctx, 1, "frame_step");
    if (!s)
        s = need_scalar(ctx, 3, "frame_length");
    if (s)
        return s;
    if (has_in(ctx, 2) && ctx->inputs[2].shape.rank != 1)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "window must be 1-D");
    if (has_in(ctx, 2) && ctx->inputs[2].dtype != x->dtype)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "window is %s but signal is %s",
                              cge_dtype_name(ctx->inputs[2].dtype), cge_dtype_name(x->dtype));
    int64_t n = CGE_DIM_DYNAMIC, step = CGE_DIM_DYNAMIC, wl = CGE_DIM_DYNAMIC;
    if (has_in(ctx, 2))
        wl = ctx->inputs[2].shape.dims[0];
    int have_n = 0;
    if (has_in(ctx, 3)) {
        have_n = scalar_value(ctx, 3, &n);
        if (have_n && wl >= 0 && n != wl)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "frame_length %lld differs from the "
                                  "window's length %lld", (long long)n, (long long)wl);
    } else if (has_in(ctx, 2)) {
        n = wl;
    } else {
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "needs a window or a frame_length");
    }
    int have_step = scalar_value(ctx, 1, &step);
    if ((have_step && step < 1) || (have_n && n < 1) || n == 0)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "frame_step and frame_length must be >= 1");
    int64_t L = x->shape.dims[1], frames = CGE_DIM_DYNAMIC;
    if (L >= 0 && n >= 0) {
        if (L < n)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "signal length %lld is below the frame "
                                  "length %lld", (long long)L, (long long)n);
        if (have_step)
            frames = (L - n) / step + 1;
    }
    ctx->outputs[0].dtype = x->dtype;
    ctx->outputs[0].shape =
        CGE_SHAPE(x->shape.dims[0], frames,
                  n < 0 ? (onesided ? CGE_DIM_DYNAMIC : n) : (onesided ? n / 2 + 1 : n), 2);
    return CGE_OK;
}

static void stft_fn(int64_t blk, int64_t nblk, void *args)
{
    const dft_args *p = args;
    int64_t n = p->win ? p->nmax : cge__load_as_i64(p->len_t, p->len, 0);
    int64_t step = cge__load_as_i64(p->step_t, p->step, 0);
    if (n < 1 || n > p->nmax)
        n = n < 1 ? 1 : p->nmax;
    double *tw = p->scratch + blk * SCRATCH_PER_N * p->nmax, *line = tw + 2 * n, *out = line + 2 * n;
    twiddles(tw, n, 0);
    int64_t kmax = p->lout < n ? p->lout : n, l0, l1;
    cge__block_range(p->outer * p->frames, blk, nblk, &l0, &l1);
    for (int64_t l = l0; l < l1; l++) {
        int64_t b = l / p->frames, f = l % p->frames;
        for (int64_t j = 0; j < n; j++) {
            int64_t pos = f * step + j;
            double w = p->win ? ld(p->t, p->win, j) : 1.0;
            int in = pos >= 0 && pos < p->lin;
            int64_t e = (b * p->lin + pos) * p->comps;
            line[2 * j] = in ? ld(p->t, p->x, e) * w : 0.0;
            line[2 * j + 1] = in && p->comps == 2 ? ld(p->t, p->x, e + 1) * w : 0.0;
        }
        transform(tw, line, out, n, kmax);
        for (int64_t k = 0; k < p->lout; k++) {
            int64_t e = (l * p->lout + k) * 2;
            st(p->t, p->y, e, k < kmax ? out[2 * k] : 0.0);
            st(p->t, p->y, e + 1, k < kmax ? out[2 * k + 1] : 0.0);
        }
    }
}

static int stft_setup(const cge_kernel_ctx *ctx, dft_args *p)
{
    memset(p, 0, sizeof *p);
    const cge_tensor *x = &ctx->inputs[0], *y = &ctx->outputs[0];
    if (x->shape.rank != 3 || y->shape.rank != 4 || !k_has_in(ctx, 1) ||
        (!k_has_in(ctx, 2) && !k_has_in(ctx, 3)))
        return 0;
    p->onesided = cge_attrs_get_int(ctx->attrs, "onesided", 1) != 0;
    p->outer = x->shape.dims[0];
    p->lin = x->shape.dims[1];
    p->comps = x->shape.dims[2];
    p->frames = y->shape.dims[1];
    p->lout = y->shape.dims[2];
    if (k_has_in(ctx, 2))
        p->nmax = ctx->inputs[2].shape.dims[0];
    else
        p->nmax = p->onesided ? 2 * p->lout - 1 : p->lout;
    if (p->nmax < 1)
        p->nmax = 1;
    return 1;
}

static size_t stft_workspace(const cge_kernel_ctx *ctx)
{
    dft_args p;
    if (!stft_setup(ctx, &p))
        return 0;
    int64_t nb = dft_blocks(ctx, p.outer * p.frames, p.nmax);
    return (size_t)(nb * SCRATCH_PER_N * p.nmax) * sizeof(double);
}

static cge_status stft_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    dft_args p;
    if (!stft_setup(ctx, &p) || (p.comps != 1 && p.comps != 2))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "input and output shapes do not fit STFT");
    p.t = ctx->inputs[0].dtype;
    p.x = ctx->inputs[0].data;
    p.y = ctx->outputs[0].data;
    p.step = ctx->inputs[1].data;
    p.step_t = ctx->inputs[1].dtype;
    if (k_has_in(ctx, 2)) {
        p.win = ctx->inputs[2].data;
        if (ctx->inputs[2].dtype != p.t)
            return cge_kernel_error(ctx, CGE_ERR_DTYPE, "window dtype differs from the signal's");
        if (p.lout != (p.onesided ? p.nmax / 2 + 1 : p.nmax))
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output bins do not fit the window");
    } else {
        p.len = ctx->inputs[3].data;
        p.len_t = ctx->inputs[3].dtype;
    }
    size_t need = stft_workspace(ctx);
    if (!ctx->workspace || ctx->workspace_size < need)
        return cge_kernel_error(ctx, CGE_ERR_NO_MEMORY, "workspace of %zu bytes missing", need);
    p.scratch = ctx->workspace;
    int64_t lines = p.outer * p.frames;
    if (lines == 0 || p.lout == 0)
        return CGE_OK;
    return cge_launch(stream, stft_fn, dft_blocks(ctx, lines, p.nmax), &p, sizeof p);
}

/* ---- windows ------------------------------------------------------------------ */

static int out_dtype_ok(int64_t t)
{
    return t > 0 && t < CGE_DTYPE_MAX && cge_dtype_valid((cge_dtype)t) && t != CGE_BOOL;
}

static cge_status window_infer(cge_infer_ctx *ctx)
{
    int64_t t = cge_attrs_get_int(ctx->attrs, "output_datatype", CGE_F32), n;
    if (!out_dtype_ok(t))
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "output_datatype %lld is not a numeric dtype",
                              (long long)t);
    cge_status s = need_scalar(ctx, 0, "size");
    if (s)
        return s;
    if (!scalar_value(ctx, 0, &n))
        n = CGE_DIM_DYNAMIC;
    else if (n < 0)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "size %lld is negative", (long long)n);
    ctx->outputs[0].dtype = (cge_dtype)t;
    ctx->outputs[0].shape = CGE_SHAPE(n);
    return CGE_OK;
}

typedef struct window_args {
    cge_dtype t;
    void *y;
    int64_t n;
    int periodic;
    double a0, a1, a2;   /* a0 - a1 cos(2 pi k / D) + a2 cos(4 pi k / D) */
} window_args;

static void window_fn(int64_t blk, int64_t nblk, void *args)
{
    const window_args *p = args;
    int64_t e0, e1;
    cge__block_range(p->n, blk, nblk, &e0, &e1);
    double D = (double)(p->periodic ? p->n : p->n - 1);
    for (int64_t k = e0; k < e1; k++) {
        double v = 1.0; /* a symmetric window of one point */
        if (D > 0) {
            double a = 2.0 * M_PI * (double)k / D;
            v = p->a0 - p->a1 * cos(a) + p->a2 * cos(2.0 * a);
        }
        cge__store_from_double(p->t, p->y, k, v);
    }
}

static cge_status window_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    window_args p = {
        .t = ctx->outputs[0].dtype, .y = ctx->outputs[0].data,
        .n = cge_shape_numel(&ctx->outputs[0].shape),
        .periodic = cge_attrs_get_int(ctx->attrs, "periodic", 1) != 0,
    };
    if (!strcmp(ctx->op_type, "HannWindow")) {
        p.a0 = 0.5;
        p.a1 = 0.5;
    } else if (!strcmp(ctx->op_type, "HammingWindow")) {
        p.a0 = 25.0 / 46.0;
        p.a1 = 1.0 - p.a0;
    } else {
        p.a0 = 0.42;
        p.a1 = 0.5;
        p.a2 = 0.08;
    }
    if (p.n == 0)
        return CGE_OK;
    return cge_launch(stream, window_fn, cge__blocks_for(p.n, 8192, ctx->num_threads), &p,
                      sizeof p);
}

/* ---- MelWeightMatrix -------------------------------------------------------------- */

static cge_status mel_infer(cge_infer_ctx *ctx)
{
    int64_t t = cge_attrs_get_int(ctx->attrs, "output_datatype", CGE_F32), bins, len;
    if (!out_dtype_ok(t))
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "output_datatype %lld is not a numeric dtype",
                              (long long)t);
    static const char *names[5] = {"num_mel_bins", "dft_length", "sample_rate",
                                   "lower_edge_hertz", "upper_edge_hertz"};
    for (int32_t i = 0; i < 5; i++) {
        cge_status s = need_scalar(ctx, i, names[i]);
        if (s)
            return s;
    }
    if (ctx->inputs[3].dtype != ctx->inputs[4].dtype || ctx->inputs[0].dtype != ctx->inputs[1].dtype ||
        ctx->inputs[0].dtype != ctx->inputs[2].dtype)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "the integer inputs, and the two edges, must "
                              "share a dtype");
    int hb = scalar_value(ctx, 0, &bins), hl = scalar_value(ctx, 1, &len);
    if ((hb && bins < 1) || (hl && len < 1))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "num_mel_bins and dft_length must be >= 1");
    ctx->outputs[0].dtype = (cge_dtype)t;
    ctx->outputs[0].shape = CGE_SHAPE(hl ? len / 2 + 1 : CGE_DIM_DYNAMIC,
                                      hb ? bins : CGE_DIM_DYNAMIC);
    return CGE_OK;
}

typedef struct mel_args {
    const void *in[5];
    cge_dtype it[5];
    cge_dtype t;
    void *y;
    int64_t rows, cols;
} mel_args;

/* One block: the matrix is small ([dft_length/2+1, bins]). Follows the ONNX
 * reference: bin edges evenly spaced in mel over num_mel_bins + 2 steps,
 * mapped to DFT bins by floor((dft_length + 1) * hz / sample_rate). */
static void mel_fn(int64_t blk, int64_t nblk, void *args)
{
    (void)blk;
    (void)nblk;
    const mel_args *p = args;
    int64_t bins = p->cols, rows = p->rows;
    int64_t len = cge__load_as_i64(p->it[1], p->in[1], 0);
    double rate = (double)cge__load_as_i64(p->it[2], p->in[2], 0);
    double lo = cge__load_as_double(p->it[3], p->in[3], 0);
    double hi = cge__load_as_double(p->it[4], p->in[4], 0);
    for (int64_t e = 0; e < rows * bins; e++)
        cge__store_from_double(p->t, p->y, e, 0.0);
    double lm = 2595.0 * log10(1.0 + lo / 700.0), hm = 2595.0 * log10(1.0 + hi / 700.0);
    double step = (hm - lm) / (double)(bins + 2);
    int64_t prev2 = 0, prev1 = 0;
    for (int64_t i = 0; i < bins + 2; i++) {
        double hz = 700.0 * (pow(10.0, ((double)i * step + lm) / 2595.0) - 1.0);
        int64_t fb = rate > 0 ? (int64_t)floor((double)(len + 1) * hz / rate) : 0;
        if (i >= 2) {
            int64_t m = i - 2, l = prev2, c = prev1, r = fb;
#define MEL_SET(row, v)                                                                    \
    do {                                                                                   \
        if ((row) >= 0 && (row) < rows)                                                    \
            cge__store_from_double(p->t, p->y, (row) * bins + m, (v));                      \
    } while (0)
            if (c == l)
                MEL_SET(c, 1.0);
            else
                for (int64_t j = l; j <= c; j++)
                    MEL_SET(j, (double)(j - l) / (double)(c - l));
            if (r > c)
                for (int64_t j = c; j < r; j++)
                    MEL_SET(j, (double)(r - j) / (double)(r - c));
#undef MEL_SET
        }
        prev2 = prev1;
        prev1 = fb;
    }
}

static cge_status mel_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    mel_args p = {.t = ctx->outputs[0].dtype, .y = ctx->outputs[0].data};
    if (ctx->outputs[0].shape.rank != 2)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output must be 2-D");
    p.rows = ctx->outputs[0].shape.dims[0];
    p.cols = ctx->outputs[0].shape.dims[1];
    for (int32_t i = 0; i < 5; i++) {
        p.in[i] = ctx->inputs[i].data;
        p.it[i] = ctx->inputs[i].dtype;
    }
    if (p.rows * p.cols == 0)
        return CGE_OK;
    return cge_launch(stream, mel_fn, 1, &p, sizeof p);
}

/* ---- definitions -------------------------------------------------------------- */

static const cge_arg_def dft_inputs[] = {
    {"input", 0, SP_FLOAT, "[batch, signal..., 1 (real) or 2 (complex)]"},
    {"dft_length", CGE_ARG_OPTIONAL, SP_INDEX, "scalar: pad or truncate the signal"},
};
static const cge_arg_def spec_output[] = {{"output", 0, SP_FLOAT, "complex, last dim 2"}};
static const cge_attr_def dft_attrs[] = {
    {"axis", CGE_ATTR_INT, false, 1, 0.0f, NULL, "signal axis"},
    {"inverse", CGE_ATTR_INT, false, 0, 0.0f, NULL, "inverse transform (scaled by 1/n)"},
    {"onesided", CGE_ATTR_INT, false, 0, 0.0f, NULL, "only n/2+1 bins (real input)"},
};
static const cge_arg_def stft_inputs[] = {
    {"signal", 0, SP_FLOAT, "[batch, length, 1 or 2]"},
    {"frame_step", 0, SP_INDEX, "scalar"},
    {"window", CGE_ARG_OPTIONAL, SP_FLOAT, "[frame_length]"},
    {"frame_length", CGE_ARG_OPTIONAL, SP_INDEX, "scalar"},
};
static const cge_attr_def stft_attrs[] = {
    {"onesided", CGE_ATTR_INT, false, 1, 0.0f, NULL, "only n/2+1 bins (real input)"},
};
static const cge_arg_def win_inputs[] = {{"size", 0, SP_INDEX, "scalar length"}};
static const cge_arg_def win_output[] = {{"output", 0, SP_OUT, "[size]"}};
static const cge_attr_def win_attrs[] = {
    {"output_datatype", CGE_ATTR_INT, false, CGE_F32, 0.0f, NULL, "dtype of the output"},
    {"periodic", CGE_ATTR_INT, false, 1, 0.0f, NULL, "periodic (1) or symmetric (0)"},
};
static const cge_arg_def mel_inputs[] = {
    {"num_mel_bins", 0, SP_INDEX, "scalar"},
    {"dft_length", 0, SP_INDEX, "scalar"},
    {"sample_rate", 0, SP_INDEX, "scalar"},
    {"lower_edge_hertz", 0, SP_FLOAT, "scalar"},
    {"upper_edge_hertz", 0, SP_FLOAT, "scalar"},
};
static const cge_arg_def mel_output[] = {{"output", 0, SP_OUT, "[dft_length/2+1, num_mel_bins]"}};
static const cge_attr_def mel_attrs[] = {
    {"output_datatype", CGE_ATTR_INT, false, CGE_F32, 0.0f, NULL, "dtype of the output"},
};

static const cge_kernel_def dft_kernels[] = {
    {.engine = "cpu", .launch = dft_launch, .workspace_size = dft_workspace, .inplace_input = -1}};
static const cge_kernel_def stft_kernels[] = {
    {.engine = "cpu", .launch = stft_launch, .workspace_size = stft_workspace, .inplace_input = -1}};
static const cge_kernel_def win_kernels[] = {
    {.engine = "cpu", .launch = window_launch, .inplace_input = -1}};
static const cge_kernel_def mel_kernels[] = {
    {.engine = "cpu", .launch = mel_launch, .inplace_input = -1}};

#define WINDOW_OP(nm, what)                                                                \
    {                                                                                      \
        .name = nm, .domain = CGE_DOMAIN_DEFAULT, .since_version = 17,                     \
        .inputs = win_inputs, .num_inputs = 1, .outputs = win_output, .num_outputs = 1,    \
        .attrs = win_attrs, .num_attrs = 2, .infer = window_infer, .kernels = win_kernels, \
        .num_kernels = 1, .doc = what,                                                     \
    }

static const cge_op_def spectral_ops[] = {
    {
        .name = "DFT", .domain = CGE_DOMAIN_DEFAULT, .since_version = 17,
        .inputs = dft_inputs, .num_inputs = 2, .outputs = spec_output, .num_outputs = 1,
        .attrs = dft_attrs, .num_attrs = 3, .infer = dft_infer, .kernels = dft_kernels,
        .num_kernels = 1, .doc = "Discrete Fourier transform along one axis.",
    },
    {
        .name = "STFT", .domain = CGE_DOMAIN_DEFAULT, .since_version = 17,
        .inputs = stft_inputs, .num_inputs = 4, .outputs = spec_output, .num_outputs = 1,
        .attrs = stft_attrs, .num_attrs = 1, .infer = stft_infer, .kernels = stft_kernels,
        .num_kernels = 1, .doc = "Short-time Fourier transform: [batch, frames, bins, 2].",
    },
    WINDOW_OP("HannWindow", "0.5 - 0.5 cos(2 pi k / N)."),
    WINDOW_OP("HammingWindow", "25/46 - 21/46 cos(2 pi k / N)."),
    WINDOW_OP("BlackmanWindow", "0.42 - 0.5 cos(2 pi k / N) + 0.08 cos(4 pi k / N)."),
    {
        .name = "MelWeightMatrix", .domain = CGE_DOMAIN_DEFAULT, .since_version = 17,
        .inputs = mel_inputs, .num_inputs = 5, .outputs = mel_output, .num_outputs = 1,
        .attrs = mel_attrs, .num_attrs = 1, .infer = mel_infer, .kernels = mel_kernels,
        .num_kernels = 1, .doc = "Triangular mel filterbank weights.",
    },
};

const cge_op_def *cge__ops_spectral(int32_t *count)
{
    *count = (int32_t)(sizeof spectral_ops / sizeof spectral_ops[0]);
    return spectral_ops;
}
