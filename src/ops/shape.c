/* Shape operators: Reshape, Flatten, Squeeze, Unsqueeze (byte copies the planner
 * may alias away), Expand (broadcast copy through broadcast.h), Shape, Constant.
 * Any dtype: elements move by size, never by value. */
#include <stdio.h>
#include <string.h>

#include "ops/broadcast.h"
#include "ops/builtin.h"
#include "ops/kernel_util.h"

/* Copies smaller than this stay in one block: splitting costs more than it saves. */
#define COPY_MIN_BYTES ((int64_t)1 << 16)

/* ---- meta helpers ------------------------------------------------------- */

/* Reads 1-D integer input `i` (named `what` in messages) of at most `max`
 * entries. *len is its length (-1 if unknown); *known says whether `vals`
 * holds the values. Only a wrong rank or an over-long list is an error.
 * With `is_dim`, a symbolic value (cge_infer_ctx.input_symbolic) counts as
 * known too: is_dim[k] marks the entries that are unknown sizes in the dim
 * encoding (a symbol or CGE_DIM_DYNAMIC) rather than numbers. */
static cge_status read_int_list_symbolic(const cge_infer_ctx *ctx, int32_t i, const char *what,
                                         int64_t max, int64_t *vals, uint8_t *is_dim,
                                         int64_t *len, bool *known)
{
    const cge_tensor_desc *d = &ctx->inputs[i];
    *known = false;
    *len = -1;
    /* A scalar axes is one axis (ONNX's reference and ONNX Runtime take it:
     * onnx's test_loop13_seq unsqueezes with one). */
    bool scalar_axes = d->shape.rank == 0 && !strcmp(what, "axes");
    if (d->shape.rank != 1 && !scalar_axes)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "input '%s' must be 1-D, got rank %d", what,
                              (int)d->shape.rank);
    *len = scalar_axes ? 1 : d->shape.dims[0];
    if (*len > max)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "input '%s' has %lld entries, at most %lld allowed",
                              what, (long long)*len, (long long)max);
    if (*len < 0)
        return CGE_OK;
    const void *v = cge__meta_input_value(ctx, i);
    const cge_symbolic_value *sv =
        !v && is_dim && ctx->input_symbolic && cge__meta_has_input(ctx, i) ? ctx->input_symbolic[i]
                                                                          : NULL;
    if (sv && sv->numel == *len) {
        for (int64_t k = 0; k < *len; k++) {
            vals[k] = sv->elems[k];
            is_dim[k] = sv->is_dim[k] != 0;
        }
        *known = true;
        return CGE_OK;
    }
    if (!v)
        return CGE_OK;
    for (int64_t k = 0; k < *len; k++) {
        vals[k] = cge__load_as_i64(d->dtype, v, k);
        if (is_dim)
            is_dim[k] = 0;
    }
    *known = true;
    return CGE_OK;
}

static cge_status read_int_list(const cge_infer_ctx *ctx, int32_t i, const char *what,
                                int64_t max, int64_t *vals, int64_t *len, bool *known)
{
    return read_int_list_symbolic(ctx, i, what, max, vals, NULL, len, known);
}

static cge_shape all_dynamic(int32_t rank)
{
    cge_shape s;
    memset(&s, 0, sizeof s);
    s.rank = rank;
    for (int32_t i = 0; i < rank; i++)
        s.dims[i] = CGE_DIM_DYNAMIC;
    return s;
}

static void set_output(cge_infer_ctx *ctx, int32_t i, cge_dtype dtype, const cge_shape *shape)
{
    ctx->outputs[i].dtype = dtype;
    ctx->outputs[i].shape = *shape;
}

/* Product of dims [lo, hi); CGE_DIM_DYNAMIC if any is unknown or it
 * overflows, except that one symbol times 1s is that symbol ([N,1] -> N). */
static int64_t dims_product(const cge_shape *s, int32_t lo, int32_t hi)
{
    int64_t p = 1, unknown = 1;
    int32_t num_unknown = 0;
    for (int32_t i = lo; i < hi; i++) {
        if (s->dims[i] < 0) {
            unknown = s->dims[i];
            num_unknown++;
        } else if (__builtin_mul_overflow(p, s->dims[i], &p)) {
            return CGE_DIM_DYNAMIC;
        }
    }
    if (num_unknown == 0)
        return p;
    return num_unknown == 1 && p == 1 ? unknown : CGE_DIM_DYNAMIC;
}

/* Reshape's -1 entry when sizes are unknown: if the unknown dims of the
 * input and of the other output entries are the same symbols (as in
 * [N,S,64] -> [0,0,4,-1]), they cancel and the entry is known. */
static int64_t reshape_infer_symbolic(const cge_shape *in, const cge_shape *out, int32_t infer_at,
                                      int64_t out_known_prod)
{
    int64_t in_syms[CGE_MAX_RANK], out_syms[CGE_MAX_RANK], in_prod = 1;
    int32_t ni = 0, no = 0;
    for (int32_t i = 0; i < in->rank; i++) {
        if (in->dims[i] == CGE_DIM_DYNAMIC)
            return CGE_DIM_DYNAMIC;
        if (in->dims[i] < 0)
            in_syms[ni++] = in->dims[i];
        else if (__builtin_mul_overflow(in_prod, in->dims[i], &in_prod))
            return CGE_DIM_DYNAMIC;
    }
    for (int32_t i = 0; i < out->rank; i++) {
        if (i == infer_at || out->dims[i] >= 0)
            continue;
        if (out->dims[i] == CGE_DIM_DYNAMIC)
            return CGE_DIM_DYNAMIC;
        out_syms[no++] = out->dims[i];
    }
    if (ni != no)
        return CGE_DIM_DYNAMIC;
    for (int32_t i = 0; i < ni; i++) {
        int32_t j = 0;
        while (j < no && out_syms[j] != in_syms[i])
            j++;
        if (j == no)
            return CGE_DIM_DYNAMIC;
        out_syms[j] = out_syms[--no];
    }
    if (out_known_prod <= 0 || in_prod % out_known_prod != 0)
        return CGE_DIM_DYNAMIC;   /* the run reports the mismatch */
    return in_prod / out_known_prod;
}

/* ---- kernels: plain copy ------------------------------------------------ */

/* Reshape, Flatten, Squeeze and Unsqueeze: the output holds the input's bytes
 * under another shape. When the planner aliases the two, there is nothing to do. */
static cge_status launch_copy(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_inputs < 1 || ctx->num_outputs < 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "expects an input and an output");
    const cge_tensor *in = &ctx->inputs[0];
    cge_tensor *out = &ctx->outputs[0];
    int64_t n_in = cge_shape_numel(&in->shape), n_out = cge_shape_numel(&out->shape);
    if (in->dtype != out->dtype || n_in < 0 || n_in != n_out)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "input (%s, %lld elements) and output (%s, %lld elements) differ",
                                cge_dtype_name(in->dtype), (long long)n_in,
                                cge_dtype_name(out->dtype), (long long)n_out);
    size_t bytes = cge_tensor_nbytes(out->dtype, &out->shape);
    if (bytes == 0 || in->data == out->data)
        return CGE_OK;
    if (!in->data || !out->data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    return cge__launch_copy_bytes(stream, out->data, in->data, (int64_t)bytes, COPY_MIN_BYTES,
                                  ctx->num_threads);
}

/* ---- Reshape ------------------------------------------------------------ */

static cge_status reshape_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *data = &ctx->inputs[0];
    int64_t vals[CGE_MAX_RANK], n;
    uint8_t is_dim[CGE_MAX_RANK];
    bool known;
    cge_status st = read_int_list_symbolic(ctx, 1, "shape", CGE_MAX_RANK, vals, is_dim, &n, &known);
    if (st)
        return st;
    if (n < 0)
        return cge_meta_error(ctx, CGE_ERR_UNSUPPORTED,
                              "the length of input 'shape' is unknown, so is the output rank");
    cge_shape out = all_dynamic((int32_t)n);
    if (!known) {
        set_output(ctx, 0, data->dtype, &out);
        return CGE_OK;
    }
    bool allowzero = cge_attrs_get_int(ctx->attrs, "allowzero", 0) != 0;
    int32_t infer_at = -1;
    bool dynamic = false, has_zero = false;
    int64_t prod = 1;
    for (int32_t i = 0; i < (int32_t)n; i++) {
        int64_t d = vals[i];
        if (is_dim[i]) {
            /* A size a run knows: never 0 or -1 as a marker here (a symbol
             * of size 0 would copy the input dim; no exporter relies on that). */
            out.dims[i] = d;
            dynamic = true;
            continue;
        }
        if (d == -1) {
            if (infer_at >= 0)
                return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                      "'shape' has more than one -1 (entries %d and %d)", infer_at, i);
            infer_at = i;
            continue;
        }
        if (d < -1)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "'shape' entry %d is %lld", i, (long long)d);
        if (d == 0 && !allowzero) {
            if (i >= data->shape.rank)
                return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                      "'shape' entry %d is 0 (copy input dim %d) but the input has rank %d",
                                      i, i, (int)data->shape.rank);
            d = data->shape.dims[i];
        } else if (d == 0) {
            has_zero = true;
        }
        out.dims[i] = d;
        if (d < 0)
            dynamic = true;
        else if (__builtin_mul_overflow(prod, d, &prod))
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "'shape' has too many elements");
    }
    if (allowzero && has_zero && infer_at >= 0)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "'shape' has both 0 and -1 while allowzero=1");
    char buf[CGE_SHAPE_STR_MAX];
    int64_t numel = cge_shape_numel(&data->shape);
    if (infer_at >= 0) {
        if (dynamic || numel < 0)
            out.dims[infer_at] = reshape_infer_symbolic(&data->shape, &out, infer_at, prod);
        else if (prod == 0 || numel % prod != 0)
            return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                  "cannot reshape input %s (%lld elements): the other entries of 'shape' multiply to %lld",
                                  cge_shape_str(&data->shape, buf, sizeof buf), (long long)numel,
                                  (long long)prod);
        else
            out.dims[infer_at] = numel / prod;
    } else if (!dynamic && numel >= 0 && prod != numel) {
        char buf2[CGE_SHAPE_STR_MAX];
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "cannot reshape input %s (%lld elements) to %s (%lld elements)",
                              cge_shape_str(&data->shape, buf, sizeof buf), (long long)numel,
                              cge_shape_str(&out, buf2, sizeof buf2), (long long)prod);
    }
    set_output(ctx, 0, data->dtype, &out);
    return CGE_OK;
}

/* ---- Flatten ------------------------------------------------------------ */

static cge_status flatten_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *in = &ctx->inputs[0];
    int32_t r = in->shape.rank;
    int64_t axis = cge_attrs_get_int(ctx->attrs, "axis", 1);
    /* Flatten's axis lies in [-r, r] and counts from r when negative. */
    if (axis < -r || axis > r)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "axis %lld is out of range for rank %d",
                              (long long)axis, (int)r);
    if (axis < 0)
        axis += r;
    cge_shape out = CGE_SHAPE(dims_product(&in->shape, 0, (int32_t)axis),
                              dims_product(&in->shape, (int32_t)axis, r));
    set_output(ctx, 0, in->dtype, &out);
    return CGE_OK;
}

/* ---- Squeeze ------------------------------------------------------------ */

static cge_status squeeze_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *in = &ctx->inputs[0];
    int32_t r = in->shape.rank;
    cge_shape out;
    memset(&out, 0, sizeof out);
    if (!cge__meta_has_input(ctx, 1)) {
        /* A dynamic dim is taken to be no 1: squeezing it would change the rank
         * with its value, which no plan can follow. */
        for (int32_t i = 0; i < r; i++)
            if (in->shape.dims[i] != 1)
                out.dims[out.rank++] = in->shape.dims[i];
        set_output(ctx, 0, in->dtype, &out);
        return CGE_OK;
    }
    int64_t axes[CGE_MAX_RANK], n;
    bool known;
    cge_status st = read_int_list(ctx, 1, "axes", CGE_MAX_RANK, axes, &n, &known);
    if (st)
        return st;
    if (n < 0)
        return cge_meta_error(ctx, CGE_ERR_UNSUPPORTED,
                              "the length of input 'axes' is unknown, so is the output rank");
    if (n > r)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "%lld axes to squeeze from rank %d",
                              (long long)n, (int)r);
    if (!known) {
        /* Which dims go is unknown, unless exactly n dims are 1 and none is dynamic. */
        int32_t ones = 0;
        for (int32_t i = 0; i < r; i++)
            ones += in->shape.dims[i] == 1;
        if (ones == n && cge_shape_is_static(&in->shape)) {
            for (int32_t i = 0; i < r; i++)
                if (in->shape.dims[i] != 1)
                    out.dims[out.rank++] = in->shape.dims[i];
        } else {
            out = all_dynamic(r - (int32_t)n);
        }
        set_output(ctx, 0, in->dtype, &out);
        return CGE_OK;
    }
    bool drop[CGE_MAX_RANK] = {false};
    for (int64_t k = 0; k < n; k++) {
        int32_t a;
        if (!cge_axis_normalize(axes[k], r, false, &a))
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "axis %lld is out of range for rank %d",
                                  (long long)axes[k], (int)r);
        if (drop[a])
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "axis %lld is given twice", (long long)axes[k]);
        if (in->shape.dims[a] != 1 && cge_dim_is_known(in->shape.dims[a]))
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "cannot squeeze axis %d of size %lld", (int)a,
                                  (long long)in->shape.dims[a]);
        drop[a] = true;
    }
    for (int32_t i = 0; i < r; i++)
        if (!drop[i])
            out.dims[out.rank++] = in->shape.dims[i];
    set_output(ctx, 0, in->dtype, &out);
    return CGE_OK;
}

/* ---- Unsqueeze ---------------------------------------------------------- */

static cge_status unsqueeze_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *in = &ctx->inputs[0];
    int32_t r = in->shape.rank;
    int64_t axes[CGE_MAX_RANK], n;
    bool known;
    cge_status st = read_int_list(ctx, 1, "axes", CGE_MAX_RANK, axes, &n, &known);
    if (st)
        return st;
    if (n < 0)
        return cge_meta_error(ctx, CGE_ERR_UNSUPPORTED,
                              "the length of input 'axes' is unknown, so is the output rank");
    if (r + n > CGE_MAX_RANK)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "output rank %lld exceeds %d",
                              (long long)(r + n), CGE_MAX_RANK);
    int32_t out_r = r + (int32_t)n;
    cge_shape out = all_dynamic(out_r);
    if (!known) {
        set_output(ctx, 0, in->dtype, &out);
        return CGE_OK;
    }
    bool ins[CGE_MAX_RANK] = {false};
    for (int64_t k = 0; k < n; k++) {
        int32_t a;
        if (!cge_axis_normalize(axes[k], out_r, false, &a))
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "axis %lld is out of range for output rank %d",
                                  (long long)axes[k], (int)out_r);
        if (ins[a])
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "axis %lld is given twice", (long long)axes[k]);
        ins[a] = true;
    }
    for (int32_t i = 0, j = 0; i < out_r; i++)
        out.dims[i] = ins[i] ? 1 : in->shape.dims[j++];
    set_output(ctx, 0, in->dtype, &out);
    return CGE_OK;
}

/* ---- Expand ------------------------------------------------------------- */

static cge_status expand_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *in = &ctx->inputs[0];
    int64_t vals[CGE_MAX_RANK], n;
    uint8_t is_dim[CGE_MAX_RANK];
    bool known;
    cge_status st = read_int_list_symbolic(ctx, 1, "shape", CGE_MAX_RANK, vals, is_dim, &n, &known);
    if (st)
        return st;
    if (n < 0)
        return cge_meta_error(ctx, CGE_ERR_UNSUPPORTED,
                              "the length of input 'shape' is unknown, so is the output rank");
    cge_shape out;
    if (!known) {
        /* A known input dim other than 1 survives whatever 'shape' holds. */
        int32_t r = in->shape.rank > n ? in->shape.rank : (int32_t)n;
        out = all_dynamic(r);
        for (int32_t i = 0; i < r; i++) {
            int32_t j = i - (r - in->shape.rank);
            if (j >= 0 && in->shape.dims[j] >= 0 && in->shape.dims[j] != 1)
                out.dims[i] = in->shape.dims[j];
        }
        set_output(ctx, 0, in->dtype, &out);
        return CGE_OK;
    }
    cge_shape target;
    memset(&target, 0, sizeof target);
    target.rank = (int32_t)n;
    for (int32_t i = 0; i < target.rank; i++) {
        if (is_dim[i]) {
            /* broadcast by cge_shape_broadcast's rules for unknown dims */
            target.dims[i] = vals[i];
            continue;
        }
        if (vals[i] < 0)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "'shape' entry %d is %lld", i, (long long)vals[i]);
        target.dims[i] = vals[i];
    }
    if (cge_shape_broadcast(&in->shape, &target, &out) != CGE_OK) {
        char a[CGE_SHAPE_STR_MAX], b[CGE_SHAPE_STR_MAX];
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "input %s does not broadcast with shape %s",
                              cge_shape_str(&in->shape, a, sizeof a),
                              cge_shape_str(&target, b, sizeof b));
    }
    set_output(ctx, 0, in->dtype, &out);
    return CGE_OK;
}

/* Blocks take equal ranges of output elements; broadcast.h walks the input. */
typedef struct expand_args {
    const char *src;
    char *dst;
    size_t esize;
    cge__bcast bc;
} expand_args;

static void expand_block(int64_t b, int64_t nb, void *p)
{
    const expand_args *a = p;
    int64_t lo, hi;
    cge__block_range(a->bc.numel, b, nb, &lo, &hi);
    cge__bcast_copy(&a->bc, 0, a->esize, a->src, a->dst, lo, hi);
}

static cge_status expand_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *in = &ctx->inputs[0];
    cge_tensor *out = &ctx->outputs[0];
    expand_args a;
    memset(&a, 0, sizeof a);
    const cge_shape *ins[1] = {&in->shape};
    if (in->dtype != out->dtype || cge__bcast_init(&a.bc, &out->shape, ins, 1) != CGE_OK) {
        char x[CGE_SHAPE_STR_MAX], y[CGE_SHAPE_STR_MAX];
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "input %s does not expand to output %s",
                                cge_shape_str(&in->shape, x, sizeof x),
                                cge_shape_str(&out->shape, y, sizeof y));
    }
    if (a.bc.numel == 0)
        return CGE_OK;
    if (!in->data || !out->data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    a.src = in->data;
    a.dst = out->data;
    a.esize = cge_dtype_size(out->dtype);
    return cge_launch(stream, expand_block,
                      cge__blocks_for(a.bc.numel, COPY_MIN_BYTES / (int64_t)a.esize, ctx->num_threads),
                      &a, sizeof a);
}

/* ---- Shape -------------------------------------------------------------- */

static void shape_range(const cge_attrs *attrs, int32_t r, int64_t *start, int64_t *end)
{
    int64_t s = cge_attrs_get_int(attrs, "start", 0);
    int64_t e = cge_attrs_find(attrs, "end") ? cge_attrs_get_int(attrs, "end", r) : r;
    if (s < 0)
        s += r;
    if (e < 0)
        e += r;
    s = s < 0 ? 0 : (s > r ? r : s);
    e = e < 0 ? 0 : (e > r ? r : e);
    *start = s;
    *end = e > s ? e : s;
}

static cge_status shape_infer(cge_infer_ctx *ctx)
{
    int64_t s, e;
    shape_range(ctx->attrs, ctx->inputs[0].shape.rank, &s, &e);
    cge_shape out = CGE_SHAPE(e - s);
    set_output(ctx, 0, CGE_I64, &out);
    return CGE_OK;
}

typedef struct shape_args {
    int64_t *dst;
    int64_t n;
    int64_t dims[CGE_MAX_RANK];
} shape_args;

static void shape_block(int64_t b, int64_t nb, void *p)
{
    const shape_args *a = p;
    memcpy(a->dst, a->dims, (size_t)a->n * sizeof(int64_t));
}

static cge_status shape_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *in = &ctx->inputs[0];
    cge_tensor *out = &ctx->outputs[0];
    shape_args a;
    memset(&a, 0, sizeof a);
    int64_t s, e;
    shape_range(ctx->attrs, in->shape.rank, &s, &e);
    a.n = e - s;
    if (out->dtype != CGE_I64 || out->shape.rank != 1 || out->shape.dims[0] != a.n)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output must be int64 [%lld]", (long long)a.n);
    if (!cge_shape_is_static(&in->shape))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "input shape is not concrete");
    if (a.n == 0)
        return CGE_OK;
    if (!out->data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing output buffer");
    a.dst = out->data;
    memcpy(a.dims, in->shape.dims + s, (size_t)a.n * sizeof(int64_t));
    return cge_launch(stream, shape_block, 1, &a, sizeof a);
}

/* ---- Constant ----------------------------------------------------------- */

static const char *const constant_value_attrs[] = {
    "value", "value_float", "value_floats", "value_int", "value_ints",
    "value_string", "value_strings", "sparse_value",
};

/* The one value attribute of a Constant node and its dtype, shape and bytes.
 * Error (returned through `fail`) if there is not exactly one usable. */
typedef struct constant_value {
    cge_dtype dtype;
    cge_shape shape;
    const void *data;
    int64_t scalar_i;   /* value_int / value_float live here, the attr is not addressed */
    float scalar_f;
} constant_value;

static cge_status constant_get(const cge_attrs *attrs, constant_value *cv, char *why, size_t why_size)
{
    const cge_attr *found = NULL;
    int count = 0;
    for (size_t k = 0; k < sizeof constant_value_attrs / sizeof *constant_value_attrs; k++) {
        const cge_attr *at = cge_attrs_find(attrs, constant_value_attrs[k]);
        if (at) {
            found = at;
            count++;
        }
    }
    if (count != 1) {
        snprintf(why, why_size,
                 "exactly one of value, value_float, value_floats, value_int, value_ints must be given, found %d",
                 count);
        return CGE_ERR_INVALID_ARG;
    }
    memset(cv, 0, sizeof *cv);
    const char *name = found->name;
    if (!strcmp(name, "value_string") || !strcmp(name, "value_strings") ||
        !strcmp(name, "sparse_value")) {
        snprintf(why, why_size, "attribute '%s' is not supported (no string or sparse tensors)", name);
        return CGE_ERR_UNSUPPORTED;
    }
    cge_attr_kind want = !strcmp(name, "value") ? CGE_ATTR_TENSOR
                         : !strcmp(name, "value_float") ? CGE_ATTR_FLOAT
                         : !strcmp(name, "value_floats") ? CGE_ATTR_FLOATS
                         : !strcmp(name, "value_int") ? CGE_ATTR_INT
                                                      : CGE_ATTR_INTS;
    if (found->kind != want) {
        snprintf(why, why_size, "attribute '%s' must be of kind %s, not %s", name,
                 cge_attr_kind_name(want), cge_attr_kind_name(found->kind));
        return CGE_ERR_INVALID_ARG;
    }
    switch (want) {
    case CGE_ATTR_TENSOR: {
        const cge_tensor *t = found->t;
        if (!t || !cge_dtype_valid(t->dtype) || !cge_shape_is_static(&t->shape)) {
            snprintf(why, why_size, "attribute 'value' is not a valid tensor");
            return CGE_ERR_INVALID_ARG;
        }
        size_t need = cge_tensor_nbytes(t->dtype, &t->shape);
        if (need > 0 && (!t->data || t->bytes < need)) {
            snprintf(why, why_size, "attribute 'value' holds %zu bytes, %zu needed", t->bytes, need);
            return CGE_ERR_INVALID_ARG;
        }
        cv->dtype = t->dtype;
        cv->shape = t->shape;
        cv->data = t->data;
        break;
    }
    case CGE_ATTR_FLOAT:
        cv->dtype = CGE_F32;
        cv->shape = CGE_SCALAR;
        cv->scalar_f = found->f;
        break;
    case CGE_ATTR_INT:
        cv->dtype = CGE_I64;
        cv->shape = CGE_SCALAR;
        cv->scalar_i = found->i;
        break;
    case CGE_ATTR_FLOATS:
        cv->dtype = CGE_F32;
        cv->shape = CGE_SHAPE(found->n);
        cv->data = found->floats;
        break;
    default:
        cv->dtype = CGE_I64;
        cv->shape = CGE_SHAPE(found->n);
        cv->data = found->ints;
        break;
    }
    return CGE_OK;
}

static cge_status constant_infer(cge_infer_ctx *ctx)
{
    constant_value cv;
    char why[160];
    cge_status st = constant_get(ctx->attrs, &cv, why, sizeof why);
    if (st)
        return cge_meta_error(ctx, st, "%s", why);
    set_output(ctx, 0, cv.dtype, &cv.shape);
    return CGE_OK;
}

/* Scalars travel inside the launch arguments; tensors and lists are read from
 * the node's attribute, which outlives every plan made from the node. */
typedef struct constant_args {
    char *dst;
    const char *src;
    int64_t bytes;
    char scalar[8];
} constant_args;

static void constant_block(int64_t b, int64_t nb, void *p)
{
    const constant_args *a = p;
    int64_t lo, hi;
    cge__block_range(a->bytes, b, nb, &lo, &hi);
    if (hi > lo)
        memcpy(a->dst + lo, (a->src ? a->src : a->scalar) + lo, (size_t)(hi - lo));
}

static cge_status constant_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    constant_value cv;
    char why[160];
    cge_status st = constant_get(ctx->attrs, &cv, why, sizeof why);
    if (st)
        return cge_kernel_error(ctx, st, "%s", why);
    cge_tensor *out = &ctx->outputs[0];
    if (out->dtype != cv.dtype || !cge_shape_equal(&out->shape, &cv.shape))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output does not match the constant's dtype and shape");
    size_t bytes = cge_tensor_nbytes(cv.dtype, &cv.shape);
    if (bytes == 0)
        return CGE_OK;
    if (!out->data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing output buffer");
    constant_args a;
    memset(&a, 0, sizeof a);
    a.dst = out->data;
    a.src = cv.data;
    a.bytes = (int64_t)bytes;
    if (!cv.data) {
        if (cv.dtype == CGE_F32)
            memcpy(a.scalar, &cv.scalar_f, sizeof cv.scalar_f);
        else
            memcpy(a.scalar, &cv.scalar_i, sizeof cv.scalar_i);
    }
    return cge_launch(stream, constant_block, cge__blocks_for(a.bytes, COPY_MIN_BYTES, ctx->num_threads),
                      &a, sizeof a);
}

/* ---- definitions -------------------------------------------------------- */

#define I64 CGE_DT(CGE_I64)

/* inplace_input 0: the planner may give the output the input's buffer. */
static const cge_kernel_def copy_kernels[] = {{"cpu", 0, launch_copy, NULL, NULL, NULL, 0}};
static const cge_kernel_def expand_kernels[] = {{"cpu", 0, expand_launch, NULL, NULL, NULL, -1}};
static const cge_kernel_def shape_kernels[] = {{"cpu", 0, shape_launch, NULL, NULL, NULL, -1}};
static const cge_kernel_def constant_kernels[] = {{"cpu", 0, constant_launch, NULL, NULL, NULL, -1}};

/* Ops that only re-describe or copy elements take strings too: a string
 * element is a {data, size} pair that copies as bytes (cge/types.h). */
#define VIEW_DT (CGE_DT_ALL | CGE_DT_STRING)

static const cge_arg_def reshape_in[] = {
    {"data", 0, VIEW_DT, "tensor to reshape"},
    {"shape", 0, I64, "new shape: 0 copies the input dim (unless allowzero), -1 is inferred"},
};
static const cge_arg_def reshape_out[] = {{"reshaped", 0, VIEW_DT, "same data, new shape"}};
static const cge_attr_def reshape_attrs[] = {
    {"allowzero", CGE_ATTR_INT, false, 0, 0.0f, NULL, "1: a 0 in 'shape' is a real 0-size dim"},
};

static const cge_arg_def flatten_in[] = {{"input", 0, VIEW_DT, "tensor of rank >= axis"}};
static const cge_arg_def flatten_out[] = {{"output", 0, VIEW_DT, "2-D: [prod(dims[:axis]), prod(dims[axis:])]"}};
static const cge_attr_def flatten_attrs[] = {
    {"axis", CGE_ATTR_INT, false, 1, 0.0f, NULL, "first dim of the second output dim; negative counts from the end"},
};

static const cge_arg_def squeeze_in[] = {
    {"data", 0, VIEW_DT, "tensor"},
    {"axes", CGE_ARG_OPTIONAL, I64, "dims of size 1 to remove; all of them if absent"},
};
static const cge_arg_def squeeze_out[] = {{"squeezed", 0, VIEW_DT, "data without those dims"}};

static const cge_arg_def unsqueeze_in[] = {
    {"data", 0, VIEW_DT, "tensor"},
    {"axes", 0, I64, "positions of new size-1 dims in the output"},
};
static const cge_arg_def unsqueeze_out[] = {{"expanded", 0, VIEW_DT, "data with size-1 dims inserted"}};

static const cge_arg_def expand_in[] = {
    {"input", 0, CGE_DT_ALL, "tensor"},
    {"shape", 0, I64, "shape broadcast (both ways) with the input's"},
};
static const cge_arg_def expand_out[] = {{"output", 0, CGE_DT_ALL, "input broadcast to the result shape"}};

static const cge_arg_def shape_in[] = {{"data", 0, VIEW_DT, "any tensor (only its shape is read)"}};
static const cge_arg_def shape_out[] = {{"shape", 0, I64, "dims [start, end) of data's shape"}};
static const cge_attr_def shape_attrs[] = {
    {"start", CGE_ATTR_INT, false, 0, 0.0f, NULL, "first dim (negative counts from the end; clamped)"},
    {"end", CGE_ATTR_INT, false, 0, 0.0f, NULL, "one past the last dim; the rank if absent (clamped)"},
};

static const cge_arg_def constant_out[] = {{"output", 0, CGE_DT_ALL, "the value"}};
static const cge_attr_def constant_attrs[] = {
    {"value", CGE_ATTR_TENSOR, false, 0, 0.0f, NULL, "a tensor"},
    {"value_float", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "float32 scalar"},
    {"value_floats", CGE_ATTR_FLOATS, false, 0, 0.0f, NULL, "float32 1-D"},
    {"value_int", CGE_ATTR_INT, false, 0, 0.0f, NULL, "int64 scalar"},
    {"value_ints", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "int64 1-D"},
    {"value_string", CGE_ATTR_STRING, false, 0, 0.0f, NULL, "unsupported"},
    {"value_strings", CGE_ATTR_STRINGS, false, 0, 0.0f, NULL, "unsupported"},
    {"sparse_value", CGE_ATTR_TENSOR, false, 0, 0.0f, NULL, "unsupported"},
};

#define N(a) ((int32_t)(sizeof(a) / sizeof((a)[0])))

static const cge_op_def shape_ops[] = {
    {"Reshape", CGE_DOMAIN_DEFAULT, 14, 0, reshape_in, N(reshape_in), reshape_out, N(reshape_out),
     reshape_attrs, N(reshape_attrs), reshape_infer, copy_kernels, N(copy_kernels),
     "Reshape data to 'shape' (ONNX Reshape-14)"},
    {"Flatten", CGE_DOMAIN_DEFAULT, 13, 0, flatten_in, N(flatten_in), flatten_out, N(flatten_out),
     flatten_attrs, N(flatten_attrs), flatten_infer, copy_kernels, N(copy_kernels),
     "Flatten to 2-D around 'axis' (ONNX Flatten-13)"},
    {"Squeeze", CGE_DOMAIN_DEFAULT, 13, 0, squeeze_in, N(squeeze_in), squeeze_out, N(squeeze_out),
     NULL, 0, squeeze_infer, copy_kernels, N(copy_kernels), "Remove size-1 dims (ONNX Squeeze-13)"},
    {"Unsqueeze", CGE_DOMAIN_DEFAULT, 13, 0, unsqueeze_in, N(unsqueeze_in), unsqueeze_out,
     N(unsqueeze_out), NULL, 0, unsqueeze_infer, copy_kernels, N(copy_kernels),
     "Insert size-1 dims (ONNX Unsqueeze-13)"},
    {"Expand", CGE_DOMAIN_DEFAULT, 13, 0, expand_in, N(expand_in), expand_out, N(expand_out), NULL, 0,
     expand_infer, expand_kernels, N(expand_kernels), "Broadcast to a shape (ONNX Expand-13)"},
    {"Shape", CGE_DOMAIN_DEFAULT, 15, 0, shape_in, N(shape_in), shape_out, N(shape_out), shape_attrs,
     N(shape_attrs), shape_infer, shape_kernels, N(shape_kernels),
     "The input's shape as int64 (ONNX Shape-15)"},
    {"Constant", CGE_DOMAIN_DEFAULT, 13, 0, NULL, 0, constant_out, N(constant_out), constant_attrs,
     N(constant_attrs), constant_infer, constant_kernels, N(constant_kernels),
     "A constant tensor from an attribute (ONNX Constant-13)"},
};

const cge_op_def *cge__ops_shape(int32_t *count)
{
    *count = N(shape_ops);
    return shape_ops;
}
