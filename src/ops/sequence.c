/* Sequence operators (ONNX SequenceEmpty, SequenceConstruct, SequenceAt,
 * SequenceInsert, SequenceErase, SequenceLength, SplitToSequence,
 * ConcatFromSequence) over the host-side cge_sequence a non-tensor value's
 * buffer holds; their metas read the sequences when they are at hand. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/builtin.h"
#include "ops/family_util.h"
#include "ops/kernel_util.h"
#include "ops/sequence_util.h"

/* ---- shared helpers ------------------------------------------------------------------ */

/* "SequenceAt 'node'" for a message (formatted only when one is written:
 * these calls are a Loop body's per-iteration cost). */
static void seq_label(const cge__seq_call *c, char *buf, size_t size)
{
    snprintf(buf, size, "%s '%s'", c->op_type ? c->op_type : "op",
             c->node_name ? c->node_name : "");
}

static void seq_host(void *user)
{
    cge__seq_call *c = user;
    cge_status st = c->fn(c);
    if (st) {
        char label[160];
        seq_label(c, label, sizeof label);
        const char *m = cge_last_error();
        const char *b = strstr(m, "] ");
        cge_kernel_fail(st, "%s: %s", label, b ? b + 2 : m);
    }
    free(c);
}

cge_status cge__seq_enqueue(const cge_kernel_ctx *ctx, cge_stream *stream,
                            cge_status (*fn)(const cge__seq_call *c))
{
    /* One block: the call, then its tensor copies (freed by the host function). */
    size_t nt = (size_t)ctx->num_inputs + (size_t)ctx->num_outputs + 1;
    size_t n = sizeof(cge__seq_call) + (sizeof(cge_tensor) + sizeof(cge_value_type)) * nt;
    cge__seq_call *c = calloc(1, n);
    if (!c)
        return cge_kernel_error(ctx, CGE_ERR_NO_MEMORY, "out of memory");
    c->op_type = ctx->op_type;
    c->node_name = ctx->node_name;
    c->attrs = ctx->attrs;
    c->ni = ctx->num_inputs;
    c->no = ctx->num_outputs;
    c->ins = (cge_tensor *)(c + 1);
    c->outs = c->ins + c->ni;
    memcpy(c->ins, ctx->inputs, sizeof(cge_tensor) * (size_t)c->ni);
    memcpy(c->outs, ctx->outputs, sizeof(cge_tensor) * (size_t)c->no);
    c->in_types = (cge_value_type *)(c->outs + c->no + 1);
    c->out_types = c->in_types + c->ni;
    if (ctx->input_types)
        memcpy(c->in_types, ctx->input_types, sizeof(cge_value_type) * (size_t)c->ni);
    if (ctx->output_types)
        memcpy(c->out_types, ctx->output_types, sizeof(cge_value_type) * (size_t)c->no);
    c->fn = fn;
    cge_status st = cge_launch_host_func(stream, seq_host, c);
    if (st)
        free(c);
    return st;
}

static cge_status copy_run(const cge__seq_call *c)
{
    return cge__value_copy(c->in_types[0], c->outs[0].data, c->ins[0].data, c->ins[0].bytes);
}

cge_status cge__seq_launch_copy(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_inputs < 1 || ctx->num_outputs < 1 || !ctx->input_types ||
        !ctx->output_types || ctx->input_types[0] != ctx->output_types[0])
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "input and output hold different types");
    return cge__seq_enqueue(ctx, stream, copy_run);
}

cge_shape cge__seq_merge_shape(const cge_shape *a, const cge_shape *b)
{
    cge_shape r = {.rank = -1};
    if (a->rank < 0 || b->rank < 0 || a->rank != b->rank)
        return r;
    r = *a;
    for (int32_t d = 0; d < r.rank; d++)
        if (a->dims[d] != b->dims[d])
            r.dims[d] = CGE_DIM_DYNAMIC;
    return r;
}

cge_shape cge__seq_elem_shape(const cge_sequence *s)
{
    cge_shape r = {.rank = -1};
    for (int32_t i = 0; i < s->count; i++)
        r = i ? cge__seq_merge_shape(&r, &s->elems[i].shape) : s->elems[i].shape;
    return r;
}

int64_t cge__seq_scalar(cge_dtype dtype, const void *data)
{
    return dtype == CGE_I32 ? *(const int32_t *)data : *(const int64_t *)data;
}

static cge_status need_seq(cge_infer_ctx *c, int32_t i, const char *what)
{
    if (c->inputs[i].type != CGE_TYPE_SEQUENCE)
        return cge_meta_error(c, CGE_ERR_DTYPE, "%s must be a sequence; it is a %s", what,
                              cge_value_type_name(c->inputs[i].type));
    return CGE_OK;
}

static cge_status need_index(cge_infer_ctx *c, int32_t i, const char *what)
{
    if (i >= c->num_inputs)
        return CGE_OK;   /* an optional position left out */
    const cge_tensor_desc *d = &c->inputs[i];
    if (d->dtype == CGE_DTYPE_UNDEFINED)
        return CGE_OK;
    if (d->type != CGE_TYPE_TENSOR || (d->dtype != CGE_I32 && d->dtype != CGE_I64) ||
        cge_shape_numel(&d->shape) > 1 || d->shape.rank > 1)
        return cge_meta_error(c, CGE_ERR_DTYPE, "%s must be an int32 or int64 scalar", what);
    return CGE_OK;
}

/* The first checks of the position-taking metas: input 0 a sequence,
 * input `pos` (when present) an index scalar. */
static cge_status need_seq_pos(cge_infer_ctx *c, int32_t pos)
{
    cge_status st = need_seq(c, 0, "input_sequence");
    return st ? st : need_index(c, pos, "position");
}

static const void *in_val(const cge_infer_ctx *c, int32_t i)
{
    return c->input_values && i < c->num_inputs && c->inputs[i].dtype ? c->input_values[i] : NULL;
}

static void set_seq_out(cge_infer_ctx *c, cge_dtype dt, cge_shape shape)
{
    c->outputs[0].type = CGE_TYPE_SEQUENCE;
    c->outputs[0].dtype = dt;
    c->outputs[0].shape = shape;
}

static cge_sequence *out_seq(const cge__seq_call *c, int32_t i, cge_dtype dt)
{
    cge_sequence *s = c->outs[i].data;
    cge__seq_reset(s, CGE_TYPE_SEQUENCE, dt);
    return s;
}

/* All of `src` into `dst` (a fresh output) except element `skip` (-1: none),
 * with room for `extra` more: the elements are shared, not copied (a Loop
 * growing a sequence by SequenceInsert costs a pointer per element and
 * iteration, not the elements' bytes). */
static cge_status share_except(cge_sequence *dst, const cge_sequence *src, int64_t skip,
                               int64_t extra)
{
    cge_status st = cge__seq_reserve(dst, src->count + extra);
    for (int32_t i = 0; !st && i < src->count; i++)
        if (i != skip)
            st = cge__seq_insert_shared(dst, dst->count, &src->elems[i]);
    return st;
}

static cge_status range_error(const char *what, int64_t pos, int64_t lo, int64_t hi, int64_t n)
{
    return cge_error(CGE_LAYER_KERNEL, CGE_ERR_INVALID_ARG,
                     "%s %lld is out of range for a sequence of %lld (valid: %lld..%lld)", what,
                     (long long)pos, (long long)n, (long long)lo, (long long)hi);
}

static cge_status meta_range(cge_infer_ctx *c, const char *what, int64_t pos, int64_t lo,
                             int64_t hi, int64_t n)
{
    return cge_meta_error(c, CGE_ERR_INVALID_ARG,
                          "%s %lld is out of range for a sequence of %lld (valid: %lld..%lld)",
                          what, (long long)pos, (long long)n, (long long)lo, (long long)hi);
}

/* ---- SequenceEmpty, SequenceConstruct ---------------------------------------------------- */

static cge_status empty_infer(cge_infer_ctx *c)
{
    CGE__CHECK_COUNTS(c, cge_meta_error, 0, 0, 1, 1, "0 to 0 inputs and 1 output");
    cge_dtype dt = (cge_dtype)cge_attrs_get_int(c->attrs, "dtype", CGE_F32);
    if (!cge_dtype_valid(dt))
        return cge_meta_error(c, CGE_ERR_DTYPE, "dtype %d is not a dtype cge has", (int)dt);
    set_seq_out(c, dt, (cge_shape){.rank = -1});
    return CGE_OK;
}

static cge_status empty_run(const cge__seq_call *c)
{
    out_seq(c, 0, (cge_dtype)cge_attrs_get_int(c->attrs, "dtype", CGE_F32));
    return CGE_OK;
}

static cge_status construct_infer(cge_infer_ctx *c)
{
    CGE__CHECK_COUNTS(c, cge_meta_error, 1, INT32_MAX, 1, 1, "1 to any inputs and 1 output");
    if (c->num_inputs < 1)
        return cge_meta_error(c, CGE_ERR_INVALID_ARG, "needs at least one tensor");
    cge_shape s = c->inputs[0].shape;
    for (int32_t i = 1; i < c->num_inputs; i++) {
        if (c->inputs[i].dtype != c->inputs[0].dtype)
            return cge_meta_error(c, CGE_ERR_DTYPE,
                                  "input %d is %s; input 0 is %s (a sequence holds one dtype)", i,
                                  cge_dtype_name(c->inputs[i].dtype),
                                  cge_dtype_name(c->inputs[0].dtype));
        s = cge__seq_merge_shape(&s, &c->inputs[i].shape);
    }
    set_seq_out(c, c->inputs[0].dtype, s);
    return CGE_OK;
}

static cge_status construct_run(const cge__seq_call *c)
{
    cge_sequence *s = out_seq(c, 0, c->ins[0].dtype);
    cge_status st = CGE_OK;
    for (int32_t i = 0; !st && i < c->ni; i++)
        st = cge__seq_insert_copy(s, i, &c->ins[i].shape, c->ins[i].data);
    return st;
}

/* ---- SequenceAt, SequenceLength ---------------------------------------------------------- */

static cge_status at_infer(cge_infer_ctx *c)
{
    CGE__CHECK_COUNTS(c, cge_meta_error, 2, 2, 1, 1, "2 to 2 inputs and 1 output");
    cge_status st = need_seq_pos(c, 1);
    if (st)
        return st;
    const cge_sequence *s = cge__seq_in(c, 0);
    const void *pv = in_val(c, 1);
    c->outputs[0].dtype = c->inputs[0].dtype;
    cge_shape shape = c->inputs[0].shape;
    if (s) {
        shape = cge__seq_elem_shape(s);
        if (pv) {
            int64_t pos = cge__seq_scalar(c->inputs[1].dtype, pv), k = 0;
            if (!cge__seq_index(s, pos, &k))
                return meta_range(c, "position", pos, -(int64_t)s->count, s->count - 1, s->count);
            shape = s->elems[k].shape;
        }
    }
    /* An element of unknown rank (known only at run time, where this runs
     * again with the sequence at hand): a scalar stands in. */
    if (shape.rank < 0)
        shape = CGE_SCALAR;
    c->outputs[0].shape = shape;
    return CGE_OK;
}

static cge_status at_run(const cge__seq_call *c)
{
    const cge_sequence *s = c->ins[0].data;
    int64_t pos = cge__seq_scalar(c->ins[1].dtype, c->ins[1].data), k = 0;
    if (!cge__seq_index(s, pos, &k))
        return range_error("position", pos, -(int64_t)s->count, s->count - 1, s->count);
    size_t n = cge_tensor_nbytes(s->dtype, &s->elems[k].shape);
    if (!cge_shape_equal(&s->elems[k].shape, &c->outs[0].shape) || c->outs[0].bytes < n)
        return cge_error(CGE_LAYER_KERNEL, CGE_ERR_SHAPE,
                         "element %lld does not fit the output planned for it", (long long)k);
    if (n)
        memcpy(c->outs[0].data, s->elems[k].data, n);
    return CGE_OK;
}

static cge_status length_infer(cge_infer_ctx *c)
{
    CGE__CHECK_COUNTS(c, cge_meta_error, 1, 1, 1, 1, "1 to 1 inputs and 1 output");
    cge_status st = need_seq(c, 0, "input_sequence");
    if (st)
        return st;
    c->outputs[0].dtype = CGE_I64;
    c->outputs[0].shape = CGE_SCALAR;
    return CGE_OK;
}

static cge_status length_run(const cge__seq_call *c)
{
    *(int64_t *)c->outs[0].data = ((const cge_sequence *)c->ins[0].data)->count;
    return CGE_OK;
}

/* ---- SequenceInsert, SequenceErase -------------------------------------------------------- */

static cge_status insert_infer(cge_infer_ctx *c)
{
    CGE__CHECK_COUNTS(c, cge_meta_error, 2, 3, 1, 1, "2 to 3 inputs and 1 output");
    cge_status st = need_seq_pos(c, 2);
    if (st)
        return st;
    if (c->inputs[1].dtype != c->inputs[0].dtype)
        return cge_meta_error(c, CGE_ERR_DTYPE, "the tensor is %s; the sequence holds %s",
                              cge_dtype_name(c->inputs[1].dtype),
                              cge_dtype_name(c->inputs[0].dtype));
    const cge_sequence *s = cge__seq_in(c, 0);
    const void *pv = in_val(c, 2);
    cge_shape shape = c->inputs[0].shape;
    if (s) {
        shape = s->count ? cge__seq_elem_shape(s) : c->inputs[1].shape;
        if (pv) {
            int64_t pos = cge__seq_scalar(c->inputs[2].dtype, pv);
            if (pos < -(int64_t)s->count || pos > s->count)
                return meta_range(c, "position", pos, -(int64_t)s->count, s->count, s->count);
        }
    }
    set_seq_out(c, c->inputs[0].dtype, cge__seq_merge_shape(&shape, &c->inputs[1].shape));
    return CGE_OK;
}

static cge_status insert_run(const cge__seq_call *c)
{
    const cge_sequence *src = c->ins[0].data;
    int64_t n = src->count, pos = n;
    if (c->ni > 2 && c->ins[2].data)
        pos = cge__seq_scalar(c->ins[2].dtype, c->ins[2].data);
    if (pos < -n || pos > n)
        return range_error("position", pos, -n, n, n);
    if (pos < 0)
        pos += n;
    cge_sequence *dst = out_seq(c, 0, src->dtype);
    cge_status st = share_except(dst, src, -1, 1);
    if (!st)
        st = cge__seq_insert_copy(dst, pos, &c->ins[1].shape, c->ins[1].data);
    return st;
}

static cge_status erase_infer(cge_infer_ctx *c)
{
    CGE__CHECK_COUNTS(c, cge_meta_error, 1, 2, 1, 1, "1 to 2 inputs and 1 output");
    cge_status st = need_seq_pos(c, 1);
    if (st)
        return st;
    const cge_sequence *s = cge__seq_in(c, 0);
    const void *pv = in_val(c, 1);
    if (s && pv) {
        int64_t pos = cge__seq_scalar(c->inputs[1].dtype, pv);
        if (pos < -(int64_t)s->count || pos >= s->count)
            return meta_range(c, "position", pos, -(int64_t)s->count, s->count - 1, s->count);
    }
    set_seq_out(c, c->inputs[0].dtype, s ? cge__seq_elem_shape(s) : c->inputs[0].shape);
    return CGE_OK;
}

static cge_status erase_run(const cge__seq_call *c)
{
    const cge_sequence *src = c->ins[0].data;
    int64_t n = src->count, pos = -1, k = 0;
    if (c->ni > 1 && c->ins[1].data)
        pos = cge__seq_scalar(c->ins[1].dtype, c->ins[1].data);
    if (!cge__seq_index(src, pos, &k))
        return range_error("position", pos, -n, n - 1, n);
    return share_except(out_seq(c, 0, src->dtype), src, k, 0);
}

/* ---- SplitToSequence, ConcatFromSequence --------------------------------------------------- */

/* The pieces of SplitToSequence: their count and sizes along the axis. */
static cge_status split_sizes(const char *label, const cge_shape *x, int32_t axis, cge_dtype sdt,
                              const cge_shape *sshape, const void *sv, int64_t *count,
                              int64_t **sizes)
{
    int64_t len = x->dims[axis];
    *sizes = NULL;
    if (!sv) {
        *count = len;
        *sizes = malloc(sizeof(int64_t) * (size_t)(len > 0 ? len : 1));
        for (int64_t i = 0; *sizes && i < len; i++)
            (*sizes)[i] = 1;
    } else if (sshape->rank == 0) {
        int64_t k = cge__seq_scalar(sdt, sv);
        if (k <= 0)
            return cge_error(CGE_LAYER_META, CGE_ERR_INVALID_ARG, "%s: split %lld must be positive",
                             label, (long long)k);
        *count = len ? (len + k - 1) / k : 0;
        *sizes = malloc(sizeof(int64_t) * (size_t)(*count > 0 ? *count : 1));
        for (int64_t i = 0; *sizes && i < *count; i++)
            (*sizes)[i] = i + 1 < *count ? k : len - k * (*count - 1);
    } else {
        *count = sshape->dims[0];
        *sizes = malloc(sizeof(int64_t) * (size_t)(*count > 0 ? *count : 1));
        int64_t sum = 0;
        for (int64_t i = 0; *sizes && i < *count; i++) {
            (*sizes)[i] = cge__load_as_i64(sdt, sv, i);
            sum += (*sizes)[i];
            if ((*sizes)[i] < 0) {
                free(*sizes);
                *sizes = NULL;
                return cge_error(CGE_LAYER_META, CGE_ERR_INVALID_ARG,
                                 "%s: split sizes must not be negative", label);
            }
        }
        if (*sizes && sum != len) {
            free(*sizes);
            *sizes = NULL;
            return cge_error(CGE_LAYER_META, CGE_ERR_INVALID_ARG,
                             "%s: split sizes add up to %lld; the axis is %lld", label,
                             (long long)sum, (long long)len);
        }
    }
    if (!*sizes)
        return cge_error(CGE_LAYER_META, CGE_ERR_NO_MEMORY, "%s: out of memory", label);
    return CGE_OK;
}

static cge_status split_infer(cge_infer_ctx *c)
{
    CGE__CHECK_COUNTS(c, cge_meta_error, 1, 2, 1, 1, "1 to 2 inputs and 1 output");
    const cge_tensor_desc *x = &c->inputs[0];
    int32_t axis = 0;
    if (!cge_axis_normalize(cge_attrs_get_int(c->attrs, "axis", 0), x->shape.rank, false, &axis))
        return cge_meta_error(c, CGE_ERR_INVALID_ARG, "axis is out of range for rank %d",
                              x->shape.rank);
    bool has_split = c->num_inputs > 1 && c->inputs[1].dtype != CGE_DTYPE_UNDEFINED;
    if (has_split && (c->inputs[1].dtype != CGE_I32 && c->inputs[1].dtype != CGE_I64))
        return cge_meta_error(c, CGE_ERR_DTYPE, "split must be int32 or int64");
    bool keep = cge_attrs_get_int(c->attrs, "keepdims", 1) != 0 || has_split;
    cge_shape e = x->shape;
    e.dims[axis] = 1;
    const void *sv = has_split ? in_val(c, 1) : NULL;
    if (has_split) {
        e.dims[axis] = CGE_DIM_DYNAMIC;
        if (sv && cge_dim_is_known(x->shape.dims[axis])) {
            char label[160];
            snprintf(label, sizeof label, "SplitToSequence '%s'", c->node_name);
            int64_t n = 0, *sz = NULL;
            cge_status st = split_sizes(label, &x->shape, axis, c->inputs[1].dtype,
                                        &c->inputs[1].shape, sv, &n, &sz);
            if (st)
                return st;
            bool same = true;
            for (int64_t i = 1; i < n; i++)
                same &= sz[i] == sz[0];
            if (n > 0 && same)
                e.dims[axis] = sz[0];
            free(sz);
        }
    }
    if (!keep) {
        for (int32_t d = axis; d + 1 < e.rank; d++)
            e.dims[d] = e.dims[d + 1];
        e.rank--;
    }
    set_seq_out(c, x->dtype, e);
    return CGE_OK;
}

static cge_status split_run(const cge__seq_call *c)
{
    const cge_tensor *x = &c->ins[0];
    int32_t axis = 0;
    cge_axis_normalize(cge_attrs_get_int(c->attrs, "axis", 0), x->shape.rank, false, &axis);
    bool has_split = c->ni > 1 && c->ins[1].data;
    bool keep = cge_attrs_get_int(c->attrs, "keepdims", 1) != 0 || has_split;
    int64_t n = 0, *sz = NULL;
    char label[160];
    seq_label(c, label, sizeof label);
    cge_status st = split_sizes(label, &x->shape, axis, has_split ? c->ins[1].dtype : CGE_I64,
                                has_split ? &c->ins[1].shape : NULL,
                                has_split ? c->ins[1].data : NULL, &n, &sz);
    if (st)
        return st;
    cge_sequence *s = out_seq(c, 0, x->dtype);
    int64_t outer = cge__dims_prod(x->shape.dims, 0, axis);
    size_t inner = (size_t)cge__dims_prod(x->shape.dims, axis + 1, x->shape.rank) *
                   cge_dtype_size(x->dtype);
    int64_t len = x->shape.dims[axis], off = 0;
    for (int64_t i = 0; !st && i < n; i++) {
        cge_shape e = x->shape;
        e.dims[axis] = sz[i];
        if (!keep) {
            for (int32_t d = axis; d + 1 < e.rank; d++)
                e.dims[d] = e.dims[d + 1];
            e.rank--;
        }
        void *d = NULL;
        st = cge__seq_insert_uninit(s, i, &e, &d);
        for (int64_t o = 0; !st && o < outer; o++)
            memcpy((char *)d + (size_t)(o * sz[i]) * inner,
                   (const char *)x->data + (size_t)(o * len + off) * inner, (size_t)sz[i] * inner);
        off += sz[i];
    }
    free(sz);
    return st;
}

static cge_status concat_infer(cge_infer_ctx *c)
{
    CGE__CHECK_COUNTS(c, cge_meta_error, 1, 1, 1, 1, "1 to 1 inputs and 1 output");
    cge_status st = need_seq(c, 0, "input_sequence");
    if (st)
        return st;
    const cge_attr *ax = cge_attrs_find(c->attrs, "axis");
    if (!ax)
        return cge_meta_error(c, CGE_ERR_INVALID_ARG, "attribute axis is required");
    bool stack = cge_attrs_get_int(c->attrs, "new_axis", 0) != 0;
    const cge_sequence *s = cge__seq_in(c, 0);
    cge_shape e = s ? cge__seq_elem_shape(s) : c->inputs[0].shape;
    c->outputs[0].dtype = c->inputs[0].dtype;
    if (e.rank < 0) {
        if (s && s->count == 0)
            return cge_meta_error(c, CGE_ERR_INVALID_ARG, "the sequence is empty");
        c->outputs[0].shape = CGE_SCALAR;   /* stands in until the run knows the rank */
        return CGE_OK;
    }
    int32_t axis = 0;
    if (!cge_axis_normalize(ax->i, e.rank, stack, &axis))
        return cge_meta_error(c, CGE_ERR_INVALID_ARG, "axis %lld is out of range for rank %d",
                              (long long)ax->i, e.rank);
    if (stack && e.rank >= CGE_MAX_RANK)
        return cge_meta_error(c, CGE_ERR_UNSUPPORTED, "the result's rank is above %d",
                              CGE_MAX_RANK);
    cge_shape o = e;
    if (stack) {
        for (int32_t d = e.rank; d > axis; d--)
            o.dims[d] = e.dims[d - 1];
        o.rank++;
        o.dims[axis] = s ? s->count : CGE_DIM_DYNAMIC;
    } else if (s) {
        int64_t sum = 0;
        for (int32_t i = 0; i < s->count; i++) {
            const cge_shape *k = &s->elems[i].shape;
            for (int32_t d = 0; d < e.rank; d++)
                if (d != axis && k->dims[d] != s->elems[0].shape.dims[d])
                    return cge_meta_error(c, CGE_ERR_SHAPE,
                                          "element %d differs from element 0 in dim %d", i, d);
            sum += k->dims[axis];
        }
        o.dims[axis] = sum;
    } else {
        o.dims[axis] = CGE_DIM_DYNAMIC;
    }
    c->outputs[0].shape = o;
    return CGE_OK;
}

static cge_status concat_run(const cge__seq_call *c)
{
    const cge_sequence *s = c->ins[0].data;
    const cge_tensor *y = &c->outs[0];
    bool stack = cge_attrs_get_int(c->attrs, "new_axis", 0) != 0;
    int32_t axis = 0;
    cge_axis_normalize(cge_attrs_get_int(c->attrs, "axis", 0), y->shape.rank, false, &axis);
    int64_t outer = cge__dims_prod(y->shape.dims, 0, axis);
    size_t esz = cge_dtype_size(y->dtype);
    size_t inner = (size_t)cge__dims_prod(y->shape.dims, axis + 1, y->shape.rank) * esz;
    int64_t total = y->shape.dims[axis], off = 0;
    for (int32_t i = 0; i < s->count; i++) {
        int64_t len = stack ? 1 : s->elems[i].shape.dims[axis];
        for (int64_t o = 0; o < outer; o++)
            memcpy((char *)y->data + (size_t)(o * total + off) * inner,
                   (const char *)s->elems[i].data + (size_t)(o * len) * inner,
                   (size_t)len * inner);
        off += len;
    }
    return CGE_OK;
}

/* ---- definitions --------------------------------------------------------------------------- */

#define SEQ_LAUNCH(F)                                                                 \
    static cge_status F##_launch(const cge_kernel_ctx *ctx, cge_stream *stream)       \
    {                                                                                 \
        return cge__seq_enqueue(ctx, stream, F##_run);                                \
    }                                                                                 \
    static const cge_kernel_def F##_k[] = CGE__KDEF(0, F##_launch, NULL, -1)
SEQ_LAUNCH(empty);
SEQ_LAUNCH(construct);
SEQ_LAUNCH(at);
SEQ_LAUNCH(length);
SEQ_LAUNCH(insert);
SEQ_LAUNCH(erase);
SEQ_LAUNCH(split);
SEQ_LAUNCH(concat);

#define IDX (CGE_DT(CGE_I32) | CGE_DT(CGE_I64))
static const cge_arg_def seq_in[] = {{"input_sequence", CGE_ARG_NON_TENSOR, 0, "a sequence"}};
static const cge_arg_def seq_out[] = {{"output_sequence", 0, 0, "a sequence"}};
static const cge_arg_def tensor_out[] = {{"tensor", 0, 0, "a tensor"}};
static const cge_arg_def construct_in[] = {
    {"inputs", CGE_ARG_VARIADIC, CGE_DT_ALL, "tensors of one dtype"}};
static const cge_arg_def at_in[] = {
    {"input_sequence", CGE_ARG_NON_TENSOR, 0, "a sequence"},
    {"position", 0, IDX, "index; negative counts from the end"}};
static const cge_arg_def length_out[] = {{"length", 0, CGE_DT(CGE_I64), "int64 scalar"}};
static const cge_arg_def insert_in[] = {
    {"input_sequence", CGE_ARG_NON_TENSOR, 0, "a sequence"},
    {"tensor", 0, CGE_DT_ALL, "the tensor to insert"},
    {"position", CGE_ARG_OPTIONAL, IDX, "where (default: at the end)"}};
static const cge_arg_def erase_in[] = {
    {"input_sequence", CGE_ARG_NON_TENSOR, 0, "a sequence"},
    {"position", CGE_ARG_OPTIONAL, IDX, "which (default: the last)"}};
static const cge_arg_def split_in[] = {
    {"input", 0, CGE_DT_ALL, "the tensor to split"},
    {"split", CGE_ARG_OPTIONAL, IDX, "a piece length (scalar) or the lengths (1-D)"}};
static const cge_arg_def concat_out[] = {{"concat_result", 0, 0, "the joined tensor"}};

static const cge_attr_def empty_attrs[] = {
    {.name = "dtype", .kind = CGE_ATTR_INT, .default_i = CGE_F32, .doc = "element dtype"}};
static const cge_attr_def split_attrs[] = {
    {.name = "axis", .kind = CGE_ATTR_INT, .default_i = 0, .doc = "the axis split"},
    {.name = "keepdims", .kind = CGE_ATTR_INT, .default_i = 1,
     .doc = "without split: keep the axis (length 1) in each piece"}};
static const cge_attr_def concat_attrs[] = {
    {.name = "axis", .kind = CGE_ATTR_INT, .required = true, .doc = "the axis joined along"},
    {.name = "new_axis", .kind = CGE_ATTR_INT, .default_i = 0,
     .doc = "1: stack along a new axis"}};

static const cge_op_def sequence_ops[] = {
    CGE__OPDEF("SequenceEmpty", 11, NULL, 0, seq_out, 1, empty_attrs, CGE__NATTR(empty_attrs),
               empty_infer, empty_k, "an empty sequence of dtype"),
    CGE__OPDEF("SequenceConstruct", 11, construct_in, 1, seq_out, 1, NULL, 0, construct_infer,
               construct_k, "a sequence of the inputs"),
    CGE__OPDEF("SequenceAt", 11, at_in, 2, tensor_out, 1, NULL, 0, at_infer, at_k,
               "the element at position (a copy)"),
    CGE__OPDEF("SequenceLength", 11, seq_in, 1, length_out, 1, NULL, 0, length_infer, length_k,
               "the number of elements"),
    CGE__OPDEF("SequenceInsert", 11, insert_in, 3, seq_out, 1, NULL, 0, insert_infer, insert_k,
               "the sequence with the tensor inserted at position"),
    CGE__OPDEF("SequenceErase", 11, erase_in, 2, seq_out, 1, NULL, 0, erase_infer, erase_k,
               "the sequence without the element at position"),
    CGE__OPDEF("SplitToSequence", 11, split_in, 2, seq_out, 1, split_attrs,
               CGE__NATTR(split_attrs), split_infer, split_k,
               "the pieces of a tensor split along axis"),
    CGE__OPDEF("ConcatFromSequence", 11, seq_in, 1, concat_out, 1, concat_attrs,
               CGE__NATTR(concat_attrs), concat_infer, concat_k,
               "the elements joined (or stacked, new_axis) along axis"),
};

const cge_op_def *cge__ops_sequence(int32_t *count)
{
    *count = (int32_t)(sizeof sequence_ops / sizeof sequence_ops[0]);
    return sequence_ops;
}
