/* Generating and rearranging operators: Range, ConstantOfShape, EyeLike,
 * Trilu, Tile, Size, DepthToSpace, SpaceToDepth, ReverseSequence. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/builtin.h"
#include "ops/kernel_util.h"

/* Output shapes that depend on input values (Range, ConstantOfShape, Tile) are
 * exact when meta has the values and dynamic otherwise; kernels take sizes
 * from the output shape. */

#define MIN_BLOCK ((int64_t)1 << 14)
#define RANGE_DT                                                                           \
    (CGE_DT(CGE_F32) | CGE_DT(CGE_F64) | CGE_DT(CGE_I16) | CGE_DT(CGE_I32) | CGE_DT(CGE_I64))
#define EYE_DT (CGE_DT_NUMERIC | CGE_DT(CGE_BOOL))

static int64_t prod(const int64_t *dims, int32_t lo, int32_t hi)
{
    int64_t p = 1;
    for (int32_t i = lo; i < hi; i++)
        p *= dims[i];
    return p;
}

static inline void elem_copy(char *dst, const char *src, size_t esize)
{
    switch (esize) {
    case 1: memcpy(dst, src, 1); break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    default: memcpy(dst, src, esize); break;
    }
}

/* ---- Range --------------------------------------------------------------------------- */

/* Number of elements of Range(start, limit, delta), or -1 when there is no
 * such number (*why says which input is wrong: a NaN, a zero delta, a length
 * that is undefined (inf - inf) or too large). Integers count exactly; floats
 * as max(ceil((limit - start) / delta), 0), the spec's formula. */
static int64_t range_count(cge_dtype t, const void *s, const void *l, const void *d,
                           char *why, size_t whysz)
{
    if (cge_dtype_is_float(t)) {
        double v[3] = {cge__load_as_double(t, s, 0), cge__load_as_double(t, l, 0),
                       cge__load_as_double(t, d, 0)};
        static const char *const names[3] = {"start", "limit", "delta"};
        for (int i = 0; i < 3; i++)
            if (isnan(v[i])) {
                snprintf(why, whysz, "%s is NaN; start, limit and delta must be numbers",
                         names[i]);
                return -1;
            }
        if (v[2] == 0) {
            snprintf(why, whysz, "delta is 0; it must be nonzero");
            return -1;
        }
        double n = ceil((v[1] - v[0]) / v[2]);
        if (isnan(n)) { /* inf - inf, or inf / inf */
            snprintf(why, whysz, "the range from %g to %g by %g has no defined length", v[0],
                     v[1], v[2]);
            return -1;
        }
        if (n > 4.0e15) {
            snprintf(why, whysz, "the range from %g to %g by %g has too many elements", v[0],
                     v[1], v[2]);
            return -1;
        }
        return n > 0 ? (int64_t)n : 0;
    }
    int64_t a = cge__load_as_i64(t, s, 0), b = cge__load_as_i64(t, l, 0),
            dl = cge__load_as_i64(t, d, 0);
    if (dl == 0) {
        snprintf(why, whysz, "delta is 0; it must be nonzero");
        return -1;
    }
    if ((dl > 0 && b <= a) || (dl < 0 && b >= a))
        return 0;
    uint64_t diff = dl > 0 ? (uint64_t)b - (uint64_t)a : (uint64_t)a - (uint64_t)b;
    uint64_t step = dl > 0 ? (uint64_t)dl : (uint64_t)0 - (uint64_t)dl;
    uint64_t n = diff / step + (diff % step != 0);
    if (n > ((uint64_t)1 << 52)) {
        snprintf(why, whysz, "the range from %lld to %lld by %lld has too many elements",
                 (long long)a, (long long)b, (long long)dl);
        return -1;
    }
    return (int64_t)n;
}

static cge_status range_infer(cge_infer_ctx *ctx)
{
    cge_dtype t = ctx->inputs[0].dtype;
    for (int32_t i = 0; i < 3; i++) {
        if (ctx->inputs[i].dtype != t)
            return cge_meta_error(ctx, CGE_ERR_DTYPE, "start, limit and delta must share a dtype");
        if (cge_shape_numel(&ctx->inputs[i].shape) != 1 || ctx->inputs[i].shape.rank > 1)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "input %d must be a scalar", (int)i);
    }
    const void *s = cge__meta_input_value(ctx, 0), *l = cge__meta_input_value(ctx, 1), *d = cge__meta_input_value(ctx, 2);
    int64_t n = CGE_DIM_DYNAMIC;
    if (s && l && d) {
        char why[256];
        n = range_count(t, s, l, d, why, sizeof why);
        if (n < 0)
            return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "%s", why);
    }
    ctx->outputs[0].dtype = t;
    ctx->outputs[0].shape = CGE_SHAPE(n);
    return CGE_OK;
}

typedef struct range_args {
    cge_dtype dtype;
    const void *start, *delta;
    void *out;
    int64_t n;
} range_args;

/* start + i * delta, computed in the element type (integers wrap). */
static void range_block(int64_t b, int64_t nb, void *p)
{
    const range_args *a = p;
    int64_t lo, hi;
    cge__block_range(a->n, b, nb, &lo, &hi);
    switch (a->dtype) {
    case CGE_F32: {
        float s = *(const float *)a->start, d = *(const float *)a->delta;
        for (int64_t i = lo; i < hi; i++)
            ((float *)a->out)[i] = s + (float)i * d;
        break;
    }
    case CGE_F64: {
        double s = *(const double *)a->start, d = *(const double *)a->delta;
        for (int64_t i = lo; i < hi; i++)
            ((double *)a->out)[i] = s + (double)i * d;
        break;
    }
    default: {
        uint64_t s = (uint64_t)cge__load_as_i64(a->dtype, a->start, 0),
                 d = (uint64_t)cge__load_as_i64(a->dtype, a->delta, 0);
        for (int64_t i = lo; i < hi; i++) {
            uint64_t v = s + (uint64_t)i * d;
            if (a->dtype == CGE_I64)
                ((int64_t *)a->out)[i] = (int64_t)v;
            else if (a->dtype == CGE_I32)
                ((int32_t *)a->out)[i] = (int32_t)v;
            else
                ((int16_t *)a->out)[i] = (int16_t)v;
        }
        break;
    }
    }
}

static cge_status range_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    cge_tensor *out = &ctx->outputs[0];
    cge_dtype t = ctx->inputs[0].dtype;
    if (out->dtype != t || out->shape.rank != 1 || !(RANGE_DT & CGE_DT(t)))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output must be 1-D %s",
                                cge_dtype_name(t));
    range_args a = {.dtype = t, .start = ctx->inputs[0].data, .delta = ctx->inputs[2].data,
                    .out = out->data, .n = out->shape.dims[0]};
    if (a.n == 0)
        return CGE_OK;
    if (!a.start || !a.delta || !a.out)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    return cge_launch(stream, range_block, cge__blocks_for(a.n, MIN_BLOCK, ctx->num_threads), &a,
                      sizeof a);
}

/* ---- ConstantOfShape ----------------------------------------------------------------- */

/* The fill value: the 'value' attribute (one element), float32 0 if absent. */
static bool const_value(const cge_attrs *attrs, cge_dtype *dt, unsigned char bytes[8])
{
    const cge_tensor *v = cge_attrs_get_tensor(attrs, "value");
    memset(bytes, 0, 8);
    if (!v) {
        *dt = CGE_F32;
        return true;
    }
    size_t es = cge_dtype_size(v->dtype);
    if (es == 0 || es > 8 || cge_shape_numel(&v->shape) != 1 || !v->data)
        return false;
    *dt = v->dtype;
    memcpy(bytes, v->data, es);
    return true;
}

static cge_status const_shape_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *in = &ctx->inputs[0];
    cge_dtype dt;
    unsigned char val[8];
    if (!const_value(ctx->attrs, &dt, val))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "'value' must be a one-element tensor");
    if (in->shape.rank != 1)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "input must be 1-D, got rank %d",
                              (int)in->shape.rank);
    int64_t r = in->shape.dims[0];
    if (!cge_dim_is_known(r))
        return cge_meta_error(ctx, CGE_ERR_UNSUPPORTED,
                              "the input's length must be known (it is the output rank)");
    if (r > CGE_MAX_RANK)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "output rank %lld exceeds %d", (long long)r,
                              CGE_MAX_RANK);
    const int64_t *v = cge__meta_input_value(ctx, 0);
    /* A symbolic shape (Shape of a [batch,...] tensor) gives its dims. */
    const cge_symbolic_value *sv = !v && ctx->input_symbolic ? ctx->input_symbolic[0] : NULL;
    cge_shape out = {.rank = (int32_t)r};
    for (int32_t i = 0; i < out.rank; i++) {
        out.dims[i] = v ? v[i] : CGE_DIM_DYNAMIC;
        if (sv && sv->numel == r) {
            out.dims[i] = sv->elems[i];
            if (!sv->is_dim[i] && sv->elems[i] < 0)
                return cge_meta_error(ctx, CGE_ERR_SHAPE, "dim %d is negative (%lld)", (int)i,
                                      (long long)sv->elems[i]);
        }
        if (v && v[i] < 0)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "dim %d is negative (%lld)", (int)i,
                                  (long long)v[i]);
    }
    ctx->outputs[0].dtype = dt;
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

typedef struct fill_args {
    char *out;
    int64_t n;
    size_t esize;
    unsigned char value[8];
} fill_args;

static void fill_block(int64_t b, int64_t nb, void *p)
{
    const fill_args *a = p;
    int64_t lo, hi;
    cge__block_range(a->n, b, nb, &lo, &hi);
    bool zero = true;
    for (size_t i = 0; i < a->esize; i++)
        zero = zero && a->value[i] == 0;
    if (zero) {
        memset(a->out + lo * (int64_t)a->esize, 0, (size_t)(hi - lo) * a->esize);
        return;
    }
    for (int64_t i = lo; i < hi; i++)
        elem_copy(a->out + i * (int64_t)a->esize, (const char *)a->value, a->esize);
}

static cge_status const_shape_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    cge_tensor *out = &ctx->outputs[0];
    fill_args a;
    memset(&a, 0, sizeof a);
    cge_dtype dt;
    if (!const_value(ctx->attrs, &dt, a.value) || out->dtype != dt)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "output dtype does not match 'value'");
    a.out = out->data;
    a.n = cge_shape_numel(&out->shape);
    a.esize = cge_dtype_size(dt);
    if (a.n == 0)
        return CGE_OK;
    if (!a.out)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing output buffer");
    return cge_launch(stream, fill_block, cge__blocks_for(a.n, MIN_BLOCK * 4, ctx->num_threads),
                      &a, sizeof a);
}

/* ---- EyeLike ------------------------------------------------------------------------- */

static cge_dtype eye_dtype(const cge_attrs *attrs, cge_dtype in)
{
    int64_t d = cge_attrs_get_int(attrs, "dtype", 0);
    return d == 0 ? in : (cge_dtype)d;
}

static cge_status eyelike_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *in = &ctx->inputs[0];
    if (in->shape.rank != 2)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "input must be 2-D, got rank %d",
                              (int)in->shape.rank);
    cge_dtype dt = eye_dtype(ctx->attrs, in->dtype);
    if (dt <= 0 || dt >= CGE_DTYPE_MAX || !cge_dtype_valid(dt) || !(EYE_DT & CGE_DT(dt)))
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "dtype %d is not supported",
                              (int)cge_attrs_get_int(ctx->attrs, "dtype", 0));
    ctx->outputs[0].dtype = dt;
    ctx->outputs[0].shape = in->shape;
    return CGE_OK;
}

typedef struct eye_args {
    char *out;
    cge_dtype dtype;
    size_t esize;
    int64_t rows, cols, k;
} eye_args;

static void eye_block(int64_t b, int64_t nb, void *p)
{
    const eye_args *a = p;
    int64_t lo, hi;
    cge__block_range(a->rows, b, nb, &lo, &hi);
    memset(a->out + lo * a->cols * (int64_t)a->esize, 0, (size_t)((hi - lo) * a->cols) * a->esize);
    for (int64_t i = lo; i < hi; i++) {
        /* k is clamped at launch, so i + k cannot overflow */
        int64_t j = i + a->k;
        if (j >= 0 && j < a->cols)
            cge__store_from_double(a->dtype, a->out, i * a->cols + j, 1.0);
    }
}

static cge_status eyelike_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *in = &ctx->inputs[0];
    cge_tensor *out = &ctx->outputs[0];
    if (in->shape.rank != 2 || !cge_shape_equal(&out->shape, &in->shape) ||
        out->dtype != eye_dtype(ctx->attrs, in->dtype))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output does not match the input");
    eye_args a = {.out = out->data, .dtype = out->dtype, .esize = cge_dtype_size(out->dtype),
                  .rows = in->shape.dims[0], .cols = in->shape.dims[1],
                  .k = cge_attrs_get_int(ctx->attrs, "k", 0)};
    if (a.k > a.cols)
        a.k = a.cols;
    if (a.k < -a.rows)
        a.k = -a.rows;
    if (a.rows * a.cols == 0)
        return CGE_OK;
    if (!a.out)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing output buffer");
    int64_t min_rows = a.cols >= MIN_BLOCK ? 1 : MIN_BLOCK / a.cols;
    return cge_launch(stream, eye_block, cge__blocks_for(a.rows, min_rows, ctx->num_threads), &a,
                      sizeof a);
}

/* ---- Tile ---------------------------------------------------------------------------- */

static cge_status tile_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *in = &ctx->inputs[0], *rep = &ctx->inputs[1];
    int32_t r = in->shape.rank;
    if (rep->shape.rank != 1 ||
        (cge_dim_is_known(rep->shape.dims[0]) && rep->shape.dims[0] != r))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "repeats must be 1-D with %d entries (the rank)",
                              (int)r);
    const void *v = cge__meta_input_value(ctx, 1);
    cge_shape out = in->shape;
    for (int32_t d = 0; d < r; d++) {
        int64_t k = v ? cge__load_as_i64(rep->dtype, v, d) : CGE_DIM_DYNAMIC;
        if (v && k < 0)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "repeats[%d] is negative (%lld)", (int)d,
                                  (long long)k);
        int64_t n = in->shape.dims[d];
        if (n == 0)
            out.dims[d] = 0;
        else if (v && k == 1)
            out.dims[d] = n;   /* a symbol stays */
        else if (!v || !cge_dim_is_known(n))
            out.dims[d] = CGE_DIM_DYNAMIC;
        else if (k > 0 && n > INT64_MAX / 4 / k)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "dim %d overflows", (int)d);
        else
            out.dims[d] = n * k;
    }
    ctx->outputs[0].dtype = in->dtype;
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

typedef struct tile_args {
    const char *in;
    char *out;
    size_t esize;
    int32_t rank;
    int64_t idims[CGE_MAX_RANK], odims[CGE_MAX_RANK], istr[CGE_MAX_RANK];
    int64_t rows;                   /* output rows (all dims but the last) */
} tile_args;

/* Each output row is its source input row, repeated out_last / in_last times;
 * output coordinate c reads input coordinate c % in_dim. */
static void tile_block(int64_t b, int64_t nb, void *p)
{
    const tile_args *a = p;
    int64_t lo, hi;
    cge__block_range(a->rows, b, nb, &lo, &hi);
    int32_t last = a->rank - 1;
    size_t row_bytes = (size_t)a->idims[last] * a->esize;
    int64_t reps = a->odims[last] / a->idims[last];
    for (int64_t row = lo; row < hi; row++) {
        int64_t rem = row, off = 0;
        for (int32_t d = last - 1; d >= 0; d--) {
            off += (rem % a->odims[d]) % a->idims[d] * a->istr[d];
            rem /= a->odims[d];
        }
        const char *src = a->in + off * (int64_t)a->esize;
        char *dst = a->out + row * reps * (int64_t)row_bytes;
        for (int64_t k = 0; k < reps; k++)
            memcpy(dst + k * (int64_t)row_bytes, src, row_bytes);
    }
}

static cge_status tile_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *in = &ctx->inputs[0];
    cge_tensor *out = &ctx->outputs[0];
    int32_t r = in->shape.rank;
    if (out->dtype != in->dtype || out->shape.rank != r)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output does not match the input");
    for (int32_t d = 0; d < r; d++) {
        int64_t i = in->shape.dims[d], o = out->shape.dims[d];
        if ((i == 0 && o != 0) || (i > 0 && o % i != 0))
            return cge_kernel_error(ctx, CGE_ERR_SHAPE,
                                    "output dim %d (%lld) is not a multiple of the input's (%lld)",
                                    (int)d, (long long)o, (long long)i);
    }
    int64_t numel = cge_shape_numel(&out->shape);
    if (numel == 0)
        return CGE_OK;
    if (!in->data || !out->data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    tile_args a;
    memset(&a, 0, sizeof a);
    a.in = in->data;
    a.out = out->data;
    a.esize = cge_dtype_size(in->dtype);
    if (r == 0) { /* a scalar: one row of one element */
        a.rank = 1;
        a.idims[0] = a.odims[0] = 1;
        a.istr[0] = 1;
    } else {
        a.rank = r;
        memcpy(a.idims, in->shape.dims, sizeof a.idims);
        memcpy(a.odims, out->shape.dims, sizeof a.odims);
        cge_shape_strides(&in->shape, a.istr);
    }
    a.rows = numel / a.odims[a.rank - 1];
    int64_t ol = a.odims[a.rank - 1];
    int64_t min_rows = ol >= MIN_BLOCK ? 1 : MIN_BLOCK / ol;
    return cge_launch(stream, tile_block, cge__blocks_for(a.rows, min_rows, ctx->num_threads), &a,
                      sizeof a);
}

/* ---- Size ---------------------------------------------------------------------------- */

static cge_status size_infer(cge_infer_ctx *ctx)
{
    ctx->outputs[0].dtype = CGE_I64;
    ctx->outputs[0].shape = CGE_SCALAR;
    return CGE_OK;
}

typedef struct size_args {
    int64_t *out;
    int64_t n;
} size_args;

static void size_block(int64_t b, int64_t nb, void *p)
{
    const size_args *a = p;
    *a->out = a->n;
}

static cge_status size_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    cge_tensor *out = &ctx->outputs[0];
    int64_t n = cge_shape_numel(&ctx->inputs[0].shape);
    if (out->dtype != CGE_I64 || out->shape.rank != 0 || n < 0)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output must be an int64 scalar");
    if (!out->data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing output buffer");
    size_args a = {.out = out->data, .n = n};
    return cge_launch(stream, size_block, 1, &a, sizeof a);
}

/* ---- DepthToSpace / SpaceToDepth ----------------------------------------------------- */

enum { D2S_DCR, D2S_CRD, S2D };

static bool d2s_mode(const cge_attrs *attrs, int *mode)
{
    const char *m = cge_attrs_get_string(attrs, "mode", "DCR");
    if (!strcmp(m, "DCR"))
        *mode = D2S_DCR;
    else if (!strcmp(m, "CRD"))
        *mode = D2S_CRD;
    else
        return false;
    return true;
}

static cge_status block_infer(cge_infer_ctx *ctx, bool to_space)
{
    const cge_tensor_desc *x = &ctx->inputs[0];
    int64_t b = cge_attrs_get_int(ctx->attrs, "blocksize", 0);
    int mode;
    if (x->shape.rank != 4)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "input must be 4-D [N,C,H,W], got rank %d",
                              (int)x->shape.rank);
    if (b < 1 || b > 65536)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "blocksize %lld must be >= 1",
                              (long long)b);
    if (to_space && !d2s_mode(ctx->attrs, &mode))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "mode '%s' is not DCR or CRD",
                              cge_attrs_get_string(ctx->attrs, "mode", ""));
    const int64_t *d = x->shape.dims;
    cge_shape out = x->shape;
#define DYN_OR(v, e) (!cge_dim_is_known(v) ? CGE_DIM_DYNAMIC : (e))
    if (to_space) {
        if (cge_dim_is_known(d[1]) && d[1] % (b * b) != 0)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "channels %lld are not a multiple of %lld",
                                  (long long)d[1], (long long)(b * b));
        out.dims[1] = DYN_OR(d[1], d[1] / (b * b));
        out.dims[2] = DYN_OR(d[2], d[2] * b);
        out.dims[3] = DYN_OR(d[3], d[3] * b);
    } else {
        for (int i = 2; i < 4; i++)
            if (cge_dim_is_known(d[i]) && d[i] % b != 0)
                return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                      "dim %d (%lld) is not a multiple of blocksize %lld", i,
                                      (long long)d[i], (long long)b);
        out.dims[1] = DYN_OR(d[1], d[1] * b * b);
        out.dims[2] = DYN_OR(d[2], d[2] / b);
        out.dims[3] = DYN_OR(d[3], d[3] / b);
    }
#undef DYN_OR
    ctx->outputs[0].dtype = x->dtype;
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

static cge_status d2s_infer(cge_infer_ctx *ctx)
{
    return block_infer(ctx, true);
}

static cge_status s2d_infer(cge_infer_ctx *ctx)
{
    return block_infer(ctx, false);
}

typedef struct block_args {
    const char *in;
    char *out;
    size_t esize;
    int mode;
    int64_t b;
    int64_t oc, oh, ow;             /* output dims */
    int64_t ic, ih, iw;             /* input dims */
    int64_t rows;                   /* N * oc * oh */
} block_args;

/* One output row (n, c, y) gathers from input rows:
 *   DepthToSpace DCR: out[n,c,y,x] = in[n, (i*b + j)*oc + c, y/b, x/b]
 *   DepthToSpace CRD: out[n,c,y,x] = in[n, c*b*b + i*b + j, y/b, x/b]
 *   SpaceToDepth:     out[n,c,y,x] = in[n, c % ic, y*b + i, x*b + j], (i*b + j) = c / ic
 * with i = y % b, j = x % b for DepthToSpace. */
static void block_fn(int64_t blk, int64_t nblk, void *p)
{
    const block_args *a = p;
    int64_t lo, hi, b = a->b;
    size_t es = a->esize;
    cge__block_range(a->rows, blk, nblk, &lo, &hi);
    for (int64_t row = lo; row < hi; row++) {
        int64_t y = row % a->oh, c = (row / a->oh) % a->oc, n = row / a->oh / a->oc;
        char *dst = a->out + row * a->ow * (int64_t)es;
        if (a->mode == S2D) {
            int64_t ij = c / a->ic, i = ij / b, j = ij % b;
            int64_t in_row = (n * a->ic + c % a->ic) * a->ih + y * b + i;
            const char *src = a->in + in_row * a->iw * (int64_t)es;
            for (int64_t x = 0; x < a->ow; x++)
                elem_copy(dst + x * (int64_t)es, src + (x * b + j) * (int64_t)es, es);
        } else {
            int64_t i = y % b;
            for (int64_t x = 0; x < a->ow; x++) {
                int64_t j = x % b;
                int64_t ch = a->mode == D2S_DCR ? (i * b + j) * a->oc + c : c * b * b + i * b + j;
                int64_t at = ((n * a->ic + ch) * a->ih + y / b) * a->iw + x / b;
                const char *src = a->in + at * (int64_t)es;
                elem_copy(dst + x * (int64_t)es, src, es);
            }
        }
    }
}

static cge_status block_launch(const cge_kernel_ctx *ctx, cge_stream *stream, bool to_space)
{
    const cge_tensor *in = &ctx->inputs[0];
    cge_tensor *out = &ctx->outputs[0];
    int64_t b = cge_attrs_get_int(ctx->attrs, "blocksize", 0);
    int mode = S2D;
    if (to_space && !d2s_mode(ctx->attrs, &mode))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "bad mode");
    if (in->shape.rank != 4 || out->shape.rank != 4 || b < 1 || out->dtype != in->dtype)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "input and output must be 4-D");
    const int64_t *i = in->shape.dims, *o = out->shape.dims;
    bool ok = i[0] == o[0] && (to_space ? (o[1] * b * b == i[1] && o[2] == i[2] * b &&
                                           o[3] == i[3] * b)
                                        : (o[1] == i[1] * b * b && o[2] * b == i[2] &&
                                           o[3] * b == i[3]));
    if (!ok)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output does not match input and blocksize");
    block_args a = {.in = in->data, .out = out->data, .esize = cge_dtype_size(in->dtype),
                    .mode = mode, .b = b, .oc = o[1], .oh = o[2], .ow = o[3], .ic = i[1],
                    .ih = i[2], .iw = i[3], .rows = o[0] * o[1] * o[2]};
    if (a.rows * a.ow == 0)
        return CGE_OK;
    if (!a.in || !a.out)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    int64_t min_rows = a.ow >= MIN_BLOCK ? 1 : MIN_BLOCK / a.ow;
    return cge_launch(stream, block_fn, cge__blocks_for(a.rows, min_rows, ctx->num_threads), &a,
                      sizeof a);
}

static cge_status d2s_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return block_launch(ctx, stream, true);
}

static cge_status s2d_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return block_launch(ctx, stream, false);
}

/* ---- ReverseSequence ----------------------------------------------------------------- */

static bool rs_axes(const cge_attrs *attrs, int32_t *time_axis)
{
    int64_t t = cge_attrs_get_int(attrs, "time_axis", 0);
    int64_t b = cge_attrs_get_int(attrs, "batch_axis", 1);
    *time_axis = (int32_t)t;
    return (t == 0 && b == 1) || (t == 1 && b == 0);
}

static cge_status revseq_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *x = &ctx->inputs[0], *lens = &ctx->inputs[1];
    int32_t ta;
    if (!rs_axes(ctx->attrs, &ta))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "time_axis and batch_axis must be 0 and 1 in some order");
    if (x->shape.rank < 2)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "input must have rank >= 2");
    int64_t batch = x->shape.dims[1 - ta];
    if (lens->shape.rank != 1 ||
        !cge_dim_may_equal(batch, lens->shape.dims[0]))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "sequence_lens must be 1-D with the batch size");
    ctx->outputs[0].dtype = x->dtype;
    ctx->outputs[0].shape = x->shape;
    return CGE_OK;
}

typedef struct revseq_args {
    const char *in;
    char *out;
    const int64_t *lens;
    int64_t steps, batch, slice_bytes;
    int32_t time_axis;
} revseq_args;

/* Slice (t, b) of the output reads slice (len-1-t, b) for t < len, else (t, b);
 * lengths outside [0, steps] are clamped there. */
static void revseq_block(int64_t blk, int64_t nblk, void *p)
{
    const revseq_args *a = p;
    int64_t lo, hi;
    cge__block_range(a->steps * a->batch, blk, nblk, &lo, &hi);
    for (int64_t u = lo; u < hi; u++) {
        int64_t t, b;
        if (a->time_axis == 0) {
            t = u / a->batch;
            b = u % a->batch;
        } else {
            b = u / a->steps;
            t = u % a->steps;
        }
        int64_t len = a->lens[b];
        len = len < 0 ? 0 : (len > a->steps ? a->steps : len);
        int64_t st = t < len ? len - 1 - t : t;
        int64_t src = a->time_axis == 0 ? st * a->batch + b : b * a->steps + st;
        memcpy(a->out + u * a->slice_bytes, a->in + src * a->slice_bytes, (size_t)a->slice_bytes);
    }
}

static cge_status revseq_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *x = &ctx->inputs[0], *lens = &ctx->inputs[1];
    cge_tensor *out = &ctx->outputs[0];
    int32_t ta;
    if (!rs_axes(ctx->attrs, &ta) || x->shape.rank < 2 || out->dtype != x->dtype ||
        !cge_shape_equal(&out->shape, &x->shape))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output does not match the input");
    revseq_args a = {.in = x->data, .out = out->data, .lens = lens->data,
                     .steps = x->shape.dims[ta], .batch = x->shape.dims[1 - ta],
                     .time_axis = ta};
    if (lens->dtype != CGE_I64 || lens->shape.rank != 1 || lens->shape.dims[0] != a.batch)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "sequence_lens must be int64 [batch]");
    a.slice_bytes = prod(x->shape.dims, 2, x->shape.rank) * (int64_t)cge_dtype_size(x->dtype);
    if (a.steps * a.batch * a.slice_bytes == 0)
        return CGE_OK;
    if (!a.in || !a.out || !a.lens)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    int64_t min_units = a.slice_bytes >= MIN_BLOCK ? 1 : MIN_BLOCK / a.slice_bytes;
    return cge_launch(stream, revseq_block,
                      cge__blocks_for(a.steps * a.batch, min_units, ctx->num_threads), &a, sizeof a);
}

/* ---- Trilu --------------------------------------------------------------------------- */

static cge_status trilu_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *x = &ctx->inputs[0];
    if (x->shape.rank < 2)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "input must have rank >= 2, got %d",
                              (int)x->shape.rank);
    if (cge__meta_has_input(ctx, 1)) {
        int64_t kn = cge_shape_numel(&ctx->inputs[1].shape);
        if (ctx->inputs[1].shape.rank > 1 || (kn >= 0 && kn != 1))
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "k must hold exactly one value");
    }
    ctx->outputs[0].dtype = x->dtype;
    ctx->outputs[0].shape = x->shape;
    return CGE_OK;
}

typedef struct trilu_args {
    const char *x;
    char *y;
    const int64_t *k;               /* NULL: 0 */
    size_t esize;
    int64_t h, w, rows;
    bool upper;
} trilu_args;

static void trilu_block(int64_t b, int64_t nb, void *p)
{
    const trilu_args *a = p;
    int64_t lo, hi, w = a->w;
    cge__block_range(a->rows, b, nb, &lo, &hi);
    int64_t k = a->k ? *a->k : 0;
    /* Clamp so that i + k cannot overflow; beyond +-(h + w) nothing changes. */
    if (k > a->h + w)
        k = a->h + w;
    if (k < -(a->h + w))
        k = -(a->h + w);
    size_t es = a->esize;
    for (int64_t row = lo; row < hi; row++) {
        int64_t i = row % a->h;
        /* upper keeps j >= i + k; lower keeps j <= i + k */
        int64_t c0 = a->upper ? i + k : 0, c1 = a->upper ? w : i + k + 1;
        c0 = c0 < 0 ? 0 : (c0 > w ? w : c0);
        c1 = c1 < c0 ? c0 : (c1 > w ? w : c1);
        char *dst = a->y + row * w * (int64_t)es;
        const char *src = a->x + row * w * (int64_t)es;
        memset(dst, 0, (size_t)c0 * es);
        if (c1 > c0)
            memcpy(dst + c0 * (int64_t)es, src + c0 * (int64_t)es, (size_t)(c1 - c0) * es);
        memset(dst + c1 * (int64_t)es, 0, (size_t)(w - c1) * es);
    }
}

static cge_status trilu_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *x = &ctx->inputs[0];
    cge_tensor *y = &ctx->outputs[0];
    int32_t r = x->shape.rank;
    if (r < 2 || y->dtype != x->dtype || !cge_shape_equal(&y->shape, &x->shape))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output must match an input of rank >= 2");
    const cge_tensor *kt = cge__kernel_has_input(ctx, 1) ? &ctx->inputs[1] : NULL;
    if (kt && (kt->dtype != CGE_I64 || cge_shape_numel(&kt->shape) != 1))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "k must be one int64 value");
    trilu_args a = {.x = x->data, .y = y->data, .k = kt ? kt->data : NULL,
                    .esize = cge_dtype_size(x->dtype), .h = x->shape.dims[r - 2],
                    .w = x->shape.dims[r - 1],
                    .upper = cge_attrs_get_int(ctx->attrs, "upper", 1) != 0};
    int64_t numel = cge_shape_numel(&x->shape);
    if (numel == 0)
        return CGE_OK;
    if (!x->data || !y->data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    a.rows = numel / a.w;
    int64_t min_rows = a.w >= MIN_BLOCK ? 1 : MIN_BLOCK / a.w;
    return cge_launch(stream, trilu_block, cge__blocks_for(a.rows, min_rows, ctx->num_threads),
                      &a, sizeof a);
}

/* ---- definitions --------------------------------------------------------------------- */

#define KDEF(DT, FN) {{.engine = "cpu", .dtypes = DT, .launch = FN, .inplace_input = -1}}
static const cge_kernel_def k_range[] = KDEF(RANGE_DT, range_launch);
static const cge_kernel_def k_const_shape[] = KDEF(0, const_shape_launch);
static const cge_kernel_def k_eyelike[] = KDEF(0, eyelike_launch);
static const cge_kernel_def k_trilu[] = KDEF(0, trilu_launch);
static const cge_kernel_def k_tile[] = KDEF(0, tile_launch);
static const cge_kernel_def k_size[] = KDEF(0, size_launch);
static const cge_kernel_def k_d2s[] = KDEF(0, d2s_launch);
static const cge_kernel_def k_s2d[] = KDEF(0, s2d_launch);
static const cge_kernel_def k_revseq[] = KDEF(0, revseq_launch);

static const cge_arg_def range_in[] = {
    {"start", 0, RANGE_DT, "first value (scalar)"},
    {"limit", 0, RANGE_DT, "exclusive bound (scalar)"},
    {"delta", 0, RANGE_DT, "step, nonzero (scalar)"},
};
static const cge_arg_def range_out[] = {{"output", 0, RANGE_DT, "start + i * delta"}};
static const cge_arg_def const_shape_in[] = {{"input", 0, CGE_DT(CGE_I64), "output shape (1-D)"}};
static const cge_arg_def eyelike_in[] = {{"input", 0, EYE_DT, "2-D tensor giving the shape"}};
static const cge_arg_def trilu_in[] = {
    {"input", 0, CGE_DT_ALL, "tensor of rank >= 2 (batches of matrices)"},
    {"k", CGE_ARG_OPTIONAL, CGE_DT(CGE_I64), "diagonal offset (one value); absent: 0"},
};
static const cge_arg_def tile_in[] = {
    {"input", 0, CGE_DT_ALL, "tensor"},
    {"repeats", 0, CGE_DT(CGE_I64), "1-D: copies along each dim"},
};
static const cge_arg_def any_in[] = {{"input", 0, CGE_DT_ALL, "tensor"}};
static const cge_arg_def any_out[] = {{"output", 0, CGE_DT_ALL, "result"}};
static const cge_arg_def size_out[] = {{"size", 0, CGE_DT(CGE_I64), "number of elements"}};
static const cge_arg_def revseq_in[] = {
    {"input", 0, CGE_DT_ALL, "tensor of rank >= 2"},
    {"sequence_lens", 0, CGE_DT(CGE_I64), "1-D: length of each batch entry's sequence"},
};

static const cge_attr_def const_shape_attrs[] = {
    {"value", CGE_ATTR_TENSOR, false, 0, 0.0f, NULL,
     "one-element fill value; float32 0 if absent"}};
static const cge_attr_def eyelike_attrs[] = {
    {"dtype", CGE_ATTR_INT, false, 0, 0.0f, NULL, "output dtype; absent: the input's"},
    {"k", CGE_ATTR_INT, false, 0, 0.0f, NULL, "diagonal: 0 main, > 0 upper, < 0 lower"}};
static const cge_attr_def trilu_attrs[] = {
    {"upper", CGE_ATTR_INT, false, 1, 0.0f, NULL, "1: upper triangle, 0: lower"}};
static const cge_attr_def d2s_attrs[] = {
    {"blocksize", CGE_ATTR_INT, true, 0, 0.0f, NULL, "block edge"},
    {"mode", CGE_ATTR_STRING, false, 0, 0.0f, "DCR", "DCR (depth-column-row) or CRD"}};
static const cge_attr_def s2d_attrs[] = {
    {"blocksize", CGE_ATTR_INT, true, 0, 0.0f, NULL, "block edge"}};
static const cge_attr_def revseq_attrs[] = {
    {"batch_axis", CGE_ATTR_INT, false, 1, 0.0f, NULL, "0 or 1"},
    {"time_axis", CGE_ATTR_INT, false, 0, 0.0f, NULL, "1 or 0"}};

#define OPDEF(NAME, SINCE, IN, NIN, OUT, ATTRS, NATTRS, INFER, K, DOC)                      \
    {                                                                                      \
        .name = NAME, .domain = CGE_DOMAIN_DEFAULT, .since_version = SINCE, .inputs = IN,  \
        .num_inputs = NIN, .outputs = OUT, .num_outputs = 1, .attrs = ATTRS,               \
        .num_attrs = NATTRS, .infer = INFER, .kernels = K, .num_kernels = 1, .doc = DOC    \
    }

static const cge_op_def generate_ops[] = {
    OPDEF("Range", 11, range_in, 3, range_out, NULL, 0, range_infer, k_range,
          "start, start + delta, ... up to limit (exclusive)."),
    OPDEF("ConstantOfShape", 9, const_shape_in, 1, any_out, const_shape_attrs, 1,
          const_shape_infer, k_const_shape, "A tensor of the given shape filled with 'value'."),
    OPDEF("EyeLike", 9, eyelike_in, 1, any_out, eyelike_attrs, 2, eyelike_infer, k_eyelike,
          "Ones on the k-th diagonal of the input's 2-D shape, zeros elsewhere."),
    OPDEF("Trilu", 14, trilu_in, 2, any_out, trilu_attrs, 1, trilu_infer, k_trilu,
          "Upper or lower triangle of the last two dims, shifted by k."),
    OPDEF("Tile", 13, tile_in, 2, any_out, NULL, 0, tile_infer, k_tile,
          "The input repeated repeats[d] times along each dim d."),
    OPDEF("Size", 13, any_in, 1, size_out, NULL, 0, size_infer, k_size,
          "Number of elements of the input (int64 scalar)."),
    OPDEF("DepthToSpace", 13, any_in, 1, any_out, d2s_attrs, 2, d2s_infer, k_d2s,
          "Channels moved into blocksize x blocksize spatial blocks (DCR or CRD order)."),
    OPDEF("SpaceToDepth", 13, any_in, 1, any_out, s2d_attrs, 1, s2d_infer, k_s2d,
          "Spatial blocksize x blocksize blocks moved into channels."),
    OPDEF("ReverseSequence", 10, revseq_in, 2, any_out, revseq_attrs, 2, revseq_infer,
          k_revseq, "Reverses the first sequence_lens[b] steps of each batch entry b."),
};

const cge_op_def *cge__ops_generate(int32_t *count)
{
    *count = (int32_t)(sizeof generate_ops / sizeof generate_ops[0]);
    return generate_ops;
}
