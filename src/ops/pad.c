/* Pad (13: pads as an input; 18: plus optional axes): constant, reflect and
 * edge modes, negative pads crop; and CenterCropPad (18), a zero Pad with
 * centring pads. Works on bytes for every dtype; each output row along the
 * last axis is a fill, one contiguous copy and a fill. */
#include <string.h>

#include "ops/builtin.h"
#include "ops/family_util.h"
#include "ops/kernel_util.h"

#define PAD_DTYPES CGE_DT_ALL

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE };

typedef struct pad_args {
    cge_dtype dtype;
    size_t es;
    const void *x;
    void *y;
    const void *pads, *cval, *axes;
    cge_dtype pads_t, axes_t;
    int64_t npads, naxes;
    int mode;
    bool center;            /* CenterCropPad: pads holds the target shape */
    int64_t axes_copy[CGE_MAX_RANK]; /* CenterCropPad's axes attribute */
    cge_shape in, out;
    char node[96];          /* "Pad 'name'", for failure messages */
} pad_args;

static int pad_mode(const cge_attrs *a)
{
    const char *m = cge_attrs_get_string(a, "mode", "constant");
    return !strcmp(m, "constant") ? PAD_CONSTANT : !strcmp(m, "reflect") ? PAD_REFLECT
         : !strcmp(m, "edge") ? PAD_EDGE : -1;
}

/* Per-axis begin/end pads (2 * rank) from the pads (and axes) values. */
static bool pad_amounts(int32_t rank, const void *pads, cge_dtype pt, int64_t npads,
                        const void *axes, cge_dtype at, int64_t naxes, int64_t *pb, int64_t *pe,
                        char *err, size_t errsz)
{
    for (int32_t d = 0; d < rank; d++)
        pb[d] = pe[d] = 0;
    int64_t na = axes ? naxes : rank;
    if (npads != 2 * na) {
        snprintf(err, errsz, "pads has %lld values; %lld expected (2 per %s)", (long long)npads,
                 (long long)(2 * na), axes ? "listed axis" : "axis");
        return false;
    }
    for (int64_t i = 0; i < na; i++) {
        int32_t ax = (int32_t)i;
        if (axes && !cge_axis_normalize(cge__load_as_i64(at, axes, i), rank, false, &ax)) {
            snprintf(err, errsz, "axes value %lld is out of range for rank %d",
                     (long long)cge__load_as_i64(at, axes, i), (int)rank);
            return false;
        }
        pb[ax] = cge__load_as_i64(pt, pads, i);
        pe[ax] = cge__load_as_i64(pt, pads, na + i);
    }
    return true;
}

/* CenterCropPad's per-axis pads (negative: crops) that centre the input (of
 * known dims) in the target shape: the odd element of a difference goes to
 * the end, as in onnx's reference. Axes from the attribute (all when absent);
 * the output's dims are the targets. */
static bool center_amounts(const cge_shape *in, const void *shape, cge_dtype st, int64_t nshape,
                           const int64_t *axes, int64_t naxes, int64_t *pb, int64_t *pe,
                           char *err, size_t errsz)
{
    int32_t rank = in->rank;
    for (int32_t d = 0; d < rank; d++)
        pb[d] = pe[d] = 0;
    int64_t na = naxes >= 0 ? naxes : rank;
    if (nshape != na) {
        snprintf(err, errsz, "shape has %lld values; %lld expected (one per %s)",
                 (long long)nshape, (long long)na, naxes >= 0 ? "listed axis" : "axis");
        return false;
    }
    bool seen[CGE_MAX_RANK] = {false};
    for (int64_t i = 0; i < na; i++) {
        int32_t ax = (int32_t)i;
        if (naxes >= 0 && !cge_axis_normalize(axes[i], rank, false, &ax)) {
            snprintf(err, errsz, "axes value %lld is out of range for rank %d",
                     (long long)axes[i], (int)rank);
            return false;
        }
        if (seen[ax]) {
            snprintf(err, errsz, "axis %d is listed twice", (int)ax);
            return false;
        }
        seen[ax] = true;
        int64_t t = cge__load_as_i64(st, shape, i), x = in->dims[ax];
        if (t < 0) {
            snprintf(err, errsz, "shape value %lld (axis %d) is negative", (long long)t, (int)ax);
            return false;
        }
        int64_t diff = t >= x ? t - x : x - t, lo = diff / 2, hi = diff - lo;
        pb[ax] = t >= x ? lo : -lo;
        pe[ax] = t >= x ? hi : -hi;
    }
    return true;
}

static bool pad_shape(const cge_shape *in, const int64_t *pb, const int64_t *pe, int mode,
                      cge_shape *out, char *err, size_t errsz)
{
    *out = *in;
    for (int32_t d = 0; d < in->rank; d++) {
        if (in->dims[d] < 0) {
            /* an unpadded symbol stays; a padded one is a new, unnamed size */
            if (pb[d] != 0 || pe[d] != 0)
                out->dims[d] = CGE_DIM_DYNAMIC;
            continue;
        }
        int64_t o = in->dims[d] + pb[d] + pe[d];
        if (o < 0) {
            snprintf(err, errsz, "pads %lld, %lld on axis %d of size %lld leave a negative size",
                     (long long)pb[d], (long long)pe[d], (int)d, (long long)in->dims[d]);
            return false;
        }
        if (mode != PAD_CONSTANT && in->dims[d] == 0 && o > 0) {
            snprintf(err, errsz, "%s padding cannot grow the empty axis %d",
                     mode == PAD_REFLECT ? "reflect" : "edge", (int)d);
            return false;
        }
        out->dims[d] = o;
    }
    return true;
}

static cge_status pad_infer(cge_infer_ctx *ctx)
{
    if (ctx->num_inputs < 2 || ctx->num_outputs < 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "needs inputs data, pads");
    const cge_tensor_desc *X = &ctx->inputs[0], *P = &ctx->inputs[1];
    int mode = pad_mode(ctx->attrs);
    if (mode < 0)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "mode '%s' is not constant, reflect or edge",
                              cge_attrs_get_string(ctx->attrs, "mode", ""));
    if (P->shape.rank != 1)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "pads must be a 1-D tensor");
    bool has_c = ctx->num_inputs > 2 && ctx->inputs[2].dtype != CGE_DTYPE_UNDEFINED;
    if (has_c && (ctx->inputs[2].dtype != X->dtype || cge_shape_numel(&ctx->inputs[2].shape) > 1))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "constant_value must be one %s value",
                              cge_dtype_name(X->dtype));
    bool has_axes = ctx->num_inputs > 3 && ctx->inputs[3].dtype != CGE_DTYPE_UNDEFINED;
    if (has_axes && ctx->inputs[3].shape.rank != 1)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "axes must be a 1-D tensor");
    ctx->outputs[0].dtype = X->dtype;
    cge_shape out = X->shape;
    const void *pv = ctx->input_values ? ctx->input_values[1] : NULL;
    const void *av = has_axes && ctx->input_values ? ctx->input_values[3] : NULL;
    if (!pv || (has_axes && !av) || !cge_shape_is_static(&P->shape) ||
        (has_axes && !cge_shape_is_static(&ctx->inputs[3].shape))) {
        /* Pads unknown until run time: the sizes are too. */
        for (int32_t d = 0; d < out.rank; d++)
            out.dims[d] = CGE_DIM_DYNAMIC;
        ctx->outputs[0].shape = out;
        return CGE_OK;
    }
    int64_t pb[CGE_MAX_RANK], pe[CGE_MAX_RANK];
    char err[1024];
    if (!pad_amounts(X->shape.rank, pv, P->dtype, P->shape.dims[0], av,
                     has_axes ? ctx->inputs[3].dtype : CGE_I64,
                     has_axes ? ctx->inputs[3].shape.dims[0] : 0, pb, pe, err, sizeof err) ||
        !pad_shape(&X->shape, pb, pe, mode, &out, err, sizeof err))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "%s", err);
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

/* Source index along one axis for output index o, or -1 for the constant. */
static inline int64_t src_index(int64_t o, int64_t pb, int64_t n, int mode)
{
    int64_t i = o - pb;
    if (i >= 0 && i < n)
        return i;
    if (mode == PAD_CONSTANT)
        return -1;
    if (mode == PAD_EDGE)
        return i < 0 ? 0 : n - 1;
    if (n == 1)
        return 0;
    int64_t period = 2 * (n - 1);
    i %= period;
    if (i < 0)
        i += period;
    return i < n ? i : period - i;
}

static void fill(unsigned char *d, const unsigned char *v, size_t es, int64_t n)
{
    if (n <= 0)
        return;
    memcpy(d, v, es);
    int64_t done = 1;
    while (done < n) {
        int64_t c = done < n - done ? done : n - done;
        memcpy(d + (size_t)done * es, d, (size_t)c * es);
        done += c;
    }
}

/* Blocks over output rows (every index but the last). Pads are read here, on
 * the stream, never at launch (an earlier task may compute them); the output
 * was sized by meta from the pads it saw, so pads that say otherwise now (a
 * value changed since: a bug elsewhere, or memory changed under the plan)
 * fail the run instead of writing past a row. Every block checks the same
 * values and stops; block 0 reports. */
static void pad_fn(int64_t blk, int64_t nblk, void *args)
{
    const pad_args *p = args;
    int32_t r = p->out.rank;
    int64_t pb[CGE_MAX_RANK], pe[CGE_MAX_RANK];
    char err[1024];
    if (p->center ? !center_amounts(&p->in, p->pads, p->pads_t, p->npads, p->axes_copy, p->naxes,
                                    pb, pe, err, sizeof err)
                  : !pad_amounts(r, p->pads, p->pads_t, p->npads, p->axes, p->axes_t, p->naxes,
                                 pb, pe, err, sizeof err)) {
        /* Checked against the output shape at launch by the same values, unless they
         * come from earlier work on the stream: then the run fails. */
        if (blk == 0)
            cge_kernel_fail(CGE_ERR_SHAPE, "%s: %s", p->node, err);
        return;
    }
    for (int32_t d = 0; d < r; d++) {
        /* pads within +-2^62 keep the sum exact; larger ones cannot match */
        bool small = pb[d] > -((int64_t)1 << 62) && pb[d] < ((int64_t)1 << 62) &&
                     pe[d] > -((int64_t)1 << 62) && pe[d] < ((int64_t)1 << 62);
        if (!small || p->in.dims[d] + pb[d] + pe[d] != p->out.dims[d]) {
            if (blk == 0)
                cge_kernel_fail(CGE_ERR_SHAPE,
                                "%s: pads %lld, %lld on axis %d of size %lld do not give the "
                                "output's size %lld (the pads changed after the output was "
                                "sized)",
                                p->node, (long long)pb[d], (long long)pe[d], (int)d,
                                (long long)p->in.dims[d], (long long)p->out.dims[d]);
            return;
        }
    }
    unsigned char cv[16] = {0};
    if (p->cval)
        memcpy(cv, p->cval, p->es);
    int64_t W = r > 0 ? p->out.dims[r - 1] : 1, Win = r > 0 ? p->in.dims[r - 1] : 1;
    int64_t rows = W > 0 ? cge_shape_numel(&p->out) / W : 0, r0, r1;
    cge__block_range(rows, blk, nblk, &r0, &r1);
    int64_t in_str[CGE_MAX_RANK];
    cge_shape_strides(&p->in, in_str);
    int64_t lpb = r > 0 ? pb[r - 1] : 0;
    /* last axis: [0, a) before the data, [a, b) copied, [b, W) after */
    int64_t a = lpb < 0 ? 0 : lpb, b = lpb + Win < W ? lpb + Win : W;
    if (b < a)
        b = a;
    const unsigned char *x = p->x;
    unsigned char *y = p->y;
    size_t es = p->es;
    for (int64_t row = r0; row < r1; row++) {
        unsigned char *yr = y + (size_t)(row * W) * es;
        int64_t off = 0, rem = row;
        int constant = 0;
        for (int32_t d = r - 2; d >= 0; d--) {
            int64_t o = rem % p->out.dims[d];
            rem /= p->out.dims[d];
            int64_t i = src_index(o, pb[d], p->in.dims[d], p->mode);
            if (i < 0)
                constant = 1;
            off += i * in_str[d];
        }
        if (constant || Win == 0) {
            if (p->mode == PAD_CONSTANT || !constant)
                fill(yr, cv, es, W);
            continue;
        }
        const unsigned char *xr = x + (size_t)off * es;
        if (p->mode == PAD_CONSTANT) {
            fill(yr, cv, es, a);
            fill(yr + (size_t)b * es, cv, es, W - b);
        } else {
            for (int64_t o = 0; o < a; o++)
                memcpy(yr + (size_t)o * es, xr + (size_t)src_index(o, lpb, Win, p->mode) * es, es);
            for (int64_t o = b; o < W; o++)
                memcpy(yr + (size_t)o * es, xr + (size_t)src_index(o, lpb, Win, p->mode) * es, es);
        }
        if (b > a)
            memcpy(yr + (size_t)a * es, xr + (size_t)(a - lpb) * es, (size_t)(b - a) * es);
    }
}

static cge_status pad_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_inputs < 2 || ctx->num_outputs < 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "needs inputs data, pads");
    const cge_tensor *X = &ctx->inputs[0], *P = &ctx->inputs[1];
    const cge_tensor *C = ctx->num_inputs > 2 && ctx->inputs[2].dtype != CGE_DTYPE_UNDEFINED
                              ? &ctx->inputs[2]
                              : NULL;
    const cge_tensor *A = ctx->num_inputs > 3 && ctx->inputs[3].dtype != CGE_DTYPE_UNDEFINED
                              ? &ctx->inputs[3]
                              : NULL;
    pad_args p = {.dtype = X->dtype, .es = cge_dtype_size(X->dtype), .x = X->data,
                  .y = ctx->outputs[0].data, .pads = P->data, .pads_t = P->dtype,
                  .npads = cge_shape_numel(&P->shape), .mode = pad_mode(ctx->attrs),
                  .in = X->shape, .out = ctx->outputs[0].shape};
    if (p.es == 0 || p.es > 16 || ctx->outputs[0].dtype != X->dtype || !cge_dtype_is_int(P->dtype))
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "unsupported dtypes");
    if (p.mode < 0)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "unknown mode");
    if (X->shape.rank != p.out.rank || !cge_shape_is_static(&p.out))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output rank differs from the input's");
    if (C && cge_shape_numel(&C->shape) == 1)
        p.cval = C->data;
    if (A) {
        p.axes = A->data;
        p.axes_t = A->dtype;
        p.naxes = cge_shape_numel(&A->shape);
    }
    cge__kernel_label(ctx, p.node, sizeof p.node);
    if (cge_shape_numel(&p.out) == 0)
        return CGE_OK;
    if (cge_shape_numel(&X->shape) == 0 && p.mode != PAD_CONSTANT)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "%s padding needs a non-empty input",
                                p.mode == PAD_REFLECT ? "reflect" : "edge");
    if (!p.y || (!p.x && cge_shape_numel(&X->shape) > 0) || (!p.pads && p.npads > 0))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    int32_t r = p.out.rank;
    int64_t W = r > 0 ? p.out.dims[r - 1] : 1;
    int64_t rows = cge_shape_numel(&p.out) / W;
    int64_t per = W * (int64_t)p.es;
    return cge_launch(stream, pad_fn,
                      cge__blocks_for(rows, per >= 32768 ? 1 : 32768 / per, ctx->num_threads), &p,
                      sizeof p);
}

/* ---- CenterCropPad (18) ---------------------------------------------------- */

static cge_status ccp_infer(cge_infer_ctx *ctx)
{
    if (ctx->num_inputs < 2 || ctx->num_outputs < 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "needs inputs input_data, shape");
    const cge_tensor_desc *X = &ctx->inputs[0], *S = &ctx->inputs[1];
    int32_t rank = X->shape.rank;
    const int64_t *axes = NULL;
    int64_t naxes = cge_attrs_get_ints(ctx->attrs, "axes", &axes), na = naxes >= 0 ? naxes : rank;
    if (S->shape.rank != 1 || (cge_dim_is_known(S->shape.dims[0]) && S->shape.dims[0] != na))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "shape must be 1-D with %lld values (one per %s)",
                              (long long)na, naxes >= 0 ? "listed axis" : "axis");
    int32_t ax[CGE_MAX_RANK];
    bool seen[CGE_MAX_RANK] = {false};
    if (na > rank)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "%lld axes for rank %d", (long long)na,
                              (int)rank);
    for (int64_t i = 0; i < na; i++) {
        ax[i] = (int32_t)i;
        if (naxes >= 0 && !cge_axis_normalize(axes[i], rank, false, &ax[i]))
            return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "axes value %lld is out of range for "
                                  "rank %d", (long long)axes[i], (int)rank);
        if (seen[ax[i]])
            return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "axis %d is listed twice",
                                  (int)ax[i]);
        seen[ax[i]] = true;
    }
    ctx->outputs[0].dtype = X->dtype;
    cge_shape out = X->shape;
    const void *sv = cge__meta_input_value(ctx, 1);
    for (int64_t i = 0; i < na; i++) {
        int64_t t = sv ? cge__load_as_i64(S->dtype, sv, i) : CGE_DIM_DYNAMIC;
        if (sv && t < 0)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "shape value %lld (axis %d) is negative",
                                  (long long)t, (int)ax[i]);
        out.dims[ax[i]] = t;
    }
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

/* Pad's kernel with centring pads, read on the stream from the shape values. */
static cge_status ccp_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_inputs < 2 || ctx->num_outputs < 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "needs inputs input_data, shape");
    const cge_tensor *X = &ctx->inputs[0], *S = &ctx->inputs[1];
    pad_args p = {.dtype = X->dtype, .es = cge_dtype_size(X->dtype), .x = X->data,
                  .y = ctx->outputs[0].data, .pads = S->data, .pads_t = S->dtype,
                  .npads = cge_shape_numel(&S->shape), .mode = PAD_CONSTANT, .center = true,
                  .in = X->shape, .out = ctx->outputs[0].shape, .naxes = -1};
    if (p.es == 0 || p.es > 16 || ctx->outputs[0].dtype != X->dtype || !cge_dtype_is_int(S->dtype))
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "unsupported dtypes");
    if (X->shape.rank != p.out.rank || !cge_shape_is_static(&p.out) ||
        !cge_shape_is_static(&X->shape))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output rank differs from the input's");
    const int64_t *axes = NULL;
    int64_t naxes = cge_attrs_get_ints(ctx->attrs, "axes", &axes);
    if (naxes > CGE_MAX_RANK)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "%lld axes", (long long)naxes);
    if (naxes >= 0) {
        memcpy(p.axes_copy, axes, sizeof(int64_t) * (size_t)naxes);
        p.naxes = naxes;
    }
    cge__kernel_label(ctx, p.node, sizeof p.node);
    int32_t r = p.out.rank;
    if (cge_shape_numel(&p.out) == 0)
        return CGE_OK;
    if (!p.y || (!p.x && cge_shape_numel(&X->shape) > 0) || (!p.pads && p.npads > 0))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    int64_t W = r > 0 ? p.out.dims[r - 1] : 1;
    int64_t rows = cge_shape_numel(&p.out) / W;
    int64_t per = W * (int64_t)p.es;
    return cge_launch(stream, pad_fn,
                      cge__blocks_for(rows, per >= 32768 ? 1 : 32768 / per, ctx->num_threads), &p,
                      sizeof p);
}

static const cge_arg_def pad_inputs[] = {
    {"data", 0, PAD_DTYPES, "any rank"},
    {"pads", 0, CGE_DT(CGE_I64), "begins then ends, 2 per axis (negative crops)"},
    {"constant_value", CGE_ARG_OPTIONAL, PAD_DTYPES, "scalar, default 0"},
    {"axes", CGE_ARG_OPTIONAL, CGE_DT(CGE_I64) | CGE_DT(CGE_I32), "axes the pads apply to"},
};
static const cge_arg_def pad_outputs[] = {{"output", 0, PAD_DTYPES, "padded"}};
static const cge_attr_def pad_attrs[] = {
    {"mode", CGE_ATTR_STRING, false, 0, 0.0f, "constant", "constant, reflect or edge"},
};
static const cge_kernel_def pad_kernels[] = {
    {.engine = "cpu", .dtypes = PAD_DTYPES, .launch = pad_launch, .inplace_input = -1}};

static const cge_arg_def ccp_inputs[] = {
    {"input_data", 0, PAD_DTYPES, "any rank"},
    {"shape", 0, CGE_DT(CGE_I64) | CGE_DT(CGE_I32), "target size per listed axis"},
};
static const cge_arg_def ccp_outputs[] = {{"output_data", 0, PAD_DTYPES, "cropped or padded"}};
static const cge_attr_def ccp_attrs[] = {
    {"axes", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "axes shape applies to (default: all)"},
};
static const cge_kernel_def ccp_kernels[] = {
    {.engine = "cpu", .dtypes = PAD_DTYPES, .launch = ccp_launch, .inplace_input = -1}};

static const cge_op_def pad_ops[] = {
    {.name = "Pad", .domain = CGE_DOMAIN_DEFAULT, .since_version = 13, .end_version = 17,
     .inputs = pad_inputs, .num_inputs = 3, .outputs = pad_outputs, .num_outputs = 1,
     .attrs = pad_attrs, .num_attrs = 1, .infer = pad_infer, .kernels = pad_kernels,
     .num_kernels = 1, .doc = "Pad with a constant, a reflection or the edge values."},
    {.name = "Pad", .domain = CGE_DOMAIN_DEFAULT, .since_version = 18, .inputs = pad_inputs,
     .num_inputs = 4, .outputs = pad_outputs, .num_outputs = 1, .attrs = pad_attrs,
     .num_attrs = 1, .infer = pad_infer, .kernels = pad_kernels, .num_kernels = 1,
     .doc = "Pad with a constant, a reflection or the edge values, on the given axes."},
    {.name = "CenterCropPad", .domain = CGE_DOMAIN_DEFAULT, .since_version = 18,
     .inputs = ccp_inputs, .num_inputs = 2, .outputs = ccp_outputs, .num_outputs = 1,
     .attrs = ccp_attrs, .num_attrs = 1, .infer = ccp_infer, .kernels = ccp_kernels,
     .num_kernels = 1, .doc = "Crop or zero-pad each listed axis to its target size, centred."},
};

const cge_op_def *cge__ops_pad(int32_t *count)
{
    *count = (int32_t)(sizeof pad_ops / sizeof pad_ops[0]);
    return pad_ops;
}
