/* Gathering and scattering by index or mask: GatherElements, GatherND,
 * ScatterND, ScatterElements, OneHot, NonZero, Compress. */
#include <string.h>

#include "ops/builtin.h"
#include "ops/family_util.h"
#include "ops/kernel_util.h"

/* Index values are read only inside the kernels (they may come from earlier
 * tasks on the stream); an out-of-range index never touches memory outside the
 * tensors. For the gathers and scatters it is an error, as in ONNX Runtime:
 * the gathered element reads as zero, the update is skipped, and the run
 * fails at its next synchronize with a [kernel] error naming the node, the
 * index and the valid range (cge_kernel_fail). OneHot's spec makes such an
 * index an all-"off" row, not an error. */

/* NonZero's first pass counts per block into the workspace, at most this many. */
#define NZ_MAX_BLOCKS 256

/* ---- shared helpers ------------------------------------------------------------------ */

static inline int64_t load_idx(cge_dtype t, const void *p, int64_t i)
{
    return t == CGE_I32 ? ((const int32_t *)p)[i] : ((const int64_t *)p)[i];
}

/* Reports index `raw` (at element `pos` of the indices) outside [-dim, dim)
 * on data's axis `axis`; the first report of a run is the one kept. */
static void index_fail(const char *op, const char *node, int64_t raw, int64_t pos, int64_t dim,
                       int32_t axis)
{
    cge_kernel_fail(CGE_ERR_SHAPE,
                    "%s '%s': index %lld (position %lld) is out of range [%lld, %lld) on axis %d",
                    op, node ? node : "", (long long)raw, (long long)pos, (long long)-dim,
                    (long long)dim, (int)axis);
}

/* One element of `esize` bytes; constant sizes become single moves. */
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

/* Copies data into the output before a scatter writes its updates (skipped
 * when the planner put the output in the data's buffer). */
static cge_status launch_copy(const cge_kernel_ctx *ctx, cge_stream *stream, const void *src,
                              void *dst, int64_t bytes)
{
    return cge__launch_copy_bytes(stream, dst, src, bytes, CGE__MIN_BLOCK * 8, ctx->num_threads);
}

/* ---- scatter reductions -------------------------------------------------------------- */

enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

static int parse_reduction(const cge_attrs *attrs)
{
    const char *r = cge_attrs_get_string(attrs, "reduction", "none");
    if (!strcmp(r, "none"))
        return RED_NONE;
    if (!strcmp(r, "add"))
        return RED_ADD;
    if (!strcmp(r, "mul"))
        return RED_MUL;
    if (!strcmp(r, "max"))
        return RED_MAX;
    if (!strcmp(r, "min"))
        return RED_MIN;
    return -1;
}

#define APPLY_LOOP(T, EXPR)                                                                \
    do {                                                                                   \
        T *d_ = (T *)dst;                                                                  \
        const T *s_ = (const T *)src;                                                      \
        for (int64_t i = 0; i < n; i++) {                                                  \
            T a = d_[i], b = s_[i];                                                        \
            d_[i] = EXPR;                                                                  \
        }                                                                                  \
    } while (0)
/* Integers: add and mul wrap (through uint64_t, never signed overflow). */
#define APPLY_INT(T)                                                                       \
    do {                                                                                   \
        switch (red) {                                                                     \
        case RED_ADD: APPLY_LOOP(T, (T)((uint64_t)a + (uint64_t)b)); break;                \
        case RED_MUL: APPLY_LOOP(T, (T)((uint64_t)a * (uint64_t)b)); break;                \
        case RED_MAX: APPLY_LOOP(T, b > a ? b : a); break;                                 \
        default: APPLY_LOOP(T, b < a ? b : a); break;                                      \
        }                                                                                  \
    } while (0)
#define APPLY_FLOAT(T)                                                                     \
    do {                                                                                   \
        switch (red) {                                                                     \
        case RED_ADD: APPLY_LOOP(T, a + b); break;                                         \
        case RED_MUL: APPLY_LOOP(T, a * b); break;                                         \
        case RED_MAX: APPLY_LOOP(T, (b > a || b != b) ? b : a); break;                     \
        default: APPLY_LOOP(T, (b < a || b != b) ? b : a); break;                          \
        }                                                                                  \
    } while (0)

/* dst[i] = dst[i] (red) src[i] for n elements; RED_NONE assigns. Half types
 * compute in float; bool: add/max are "or", mul/min are "and". */
static void apply_reduction(cge_dtype dt, int red, void *dst, const void *src, int64_t n)
{
    if (red == RED_NONE) {
        memcpy(dst, src, (size_t)n * cge_dtype_size(dt));
        return;
    }
    switch (dt) {
    case CGE_F32: APPLY_FLOAT(float); break;
    case CGE_F64: APPLY_FLOAT(double); break;
    case CGE_I8: APPLY_INT(int8_t); break;
    case CGE_I16: APPLY_INT(int16_t); break;
    case CGE_I32: APPLY_INT(int32_t); break;
    case CGE_I64: APPLY_INT(int64_t); break;
    case CGE_U8: APPLY_INT(uint8_t); break;
    case CGE_U16: APPLY_INT(uint16_t); break;
    case CGE_U32: APPLY_INT(uint32_t); break;
    case CGE_U64: APPLY_INT(uint64_t); break;
    case CGE_BOOL:
        if (red == RED_ADD || red == RED_MAX)
            APPLY_LOOP(uint8_t, (uint8_t)(a || b));
        else
            APPLY_LOOP(uint8_t, (uint8_t)(a && b));
        break;
    case CGE_F16:
    case CGE_BF16: {
        uint16_t *d = dst;
        const uint16_t *s = src;
        bool h = dt == CGE_F16;
        for (int64_t i = 0; i < n; i++) {
            float a = h ? cge_f16_to_f32(d[i]) : cge_bf16_to_f32(d[i]);
            float b = h ? cge_f16_to_f32(s[i]) : cge_bf16_to_f32(s[i]);
            float r = red == RED_ADD ? a + b
                    : red == RED_MUL ? a * b
                    : red == RED_MAX ? ((b > a || b != b) ? b : a)
                                     : ((b < a || b != b) ? b : a);
            d[i] = h ? cge_f32_to_f16(r) : cge_f32_to_bf16(r);
        }
        break;
    }
    default: break;
    }
}

/* ---- GatherElements ------------------------------------------------------------------ */

static cge_status gather_el_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *data = &ctx->inputs[0], *idx = &ctx->inputs[1];
    int32_t r = data->shape.rank, axis;
    int64_t a = cge_attrs_get_int(ctx->attrs, "axis", 0);
    if (r < 1 || idx->shape.rank != r)
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "data (rank %d) and indices (rank %d) must have one rank >= 1",
                              (int)r, (int)idx->shape.rank);
    if (!cge_axis_normalize(a, r, false, &axis))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "axis %lld is out of range for rank %d",
                              (long long)a, (int)r);
    for (int32_t d = 0; d < r; d++)
        if (d != axis && cge_dim_is_known(idx->shape.dims[d]) &&
            cge_dim_is_known(data->shape.dims[d]) && idx->shape.dims[d] > data->shape.dims[d])
            return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                  "indices dim %d is %lld, larger than data's %lld", (int)d,
                                  (long long)idx->shape.dims[d], (long long)data->shape.dims[d]);
    ctx->outputs[0].dtype = data->dtype;
    ctx->outputs[0].shape = idx->shape;
    return CGE_OK;
}

typedef struct gather_el_args {
    const char *data;
    char *out;
    const void *idx;
    cge_dtype idx_dtype;
    int32_t rank, axis;
    size_t esize;
    int64_t idims[CGE_MAX_RANK];    /* indices (= output) dims */
    int64_t dstr[CGE_MAX_RANK];     /* data strides */
    int64_t axis_dim;
    int64_t numel;
    const char *node;               /* for the failure message */
} gather_el_args;

static void gather_el_block(int64_t b, int64_t nb, void *p)
{
    const gather_el_args *a = p;
    int64_t lo, hi;
    cge__block_range(a->numel, b, nb, &lo, &hi);
    if (lo >= hi)
        return;
    int64_t coord[CGE_MAX_RANK], rem = lo;
    for (int32_t d = a->rank - 1; d >= 0; d--) {
        coord[d] = rem % a->idims[d];
        rem /= a->idims[d];
    }
    for (int64_t e = lo; e < hi; e++) {
        int64_t raw = load_idx(a->idx_dtype, a->idx, e), k = raw;
        if (k < 0)
            k += a->axis_dim;
        char *dst = a->out + e * (int64_t)a->esize;
        if (k < 0 || k >= a->axis_dim) {
            memset(dst, 0, a->esize);
            index_fail("GatherElements", a->node, raw, e, a->axis_dim, a->axis);
        } else {
            int64_t off = 0;
            for (int32_t d = 0; d < a->rank; d++)
                off += (d == a->axis ? k : coord[d]) * a->dstr[d];
            elem_copy(dst, a->data + off * (int64_t)a->esize, a->esize);
        }
        for (int32_t d = a->rank - 1; d >= 0; d--) {
            if (++coord[d] < a->idims[d])
                break;
            coord[d] = 0;
        }
    }
}

static cge_status gather_el_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *data = &ctx->inputs[0], *idx = &ctx->inputs[1];
    cge_tensor *out = &ctx->outputs[0];
    int32_t r = data->shape.rank, axis;
    if (r < 1 || idx->shape.rank != r ||
        !cge_axis_normalize(cge_attrs_get_int(ctx->attrs, "axis", 0), r, false, &axis))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "bad axis or ranks");
    if (idx->dtype != CGE_I32 && idx->dtype != CGE_I64)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "indices must be int32 or int64");
    if (out->dtype != data->dtype || !cge_shape_equal(&out->shape, &idx->shape))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output does not match the indices");
    for (int32_t d = 0; d < r; d++)
        if (d != axis && idx->shape.dims[d] > data->shape.dims[d])
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "indices dim %d exceeds data's", (int)d);
    gather_el_args a;
    memset(&a, 0, sizeof a);
    a.numel = cge_shape_numel(&out->shape);
    if (a.numel == 0)
        return CGE_OK;
    if (!data->data || !idx->data || !out->data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    a.data = data->data;
    a.out = out->data;
    a.idx = idx->data;
    a.idx_dtype = idx->dtype;
    a.rank = r;
    a.axis = axis;
    a.esize = cge_dtype_size(data->dtype);
    memcpy(a.idims, idx->shape.dims, sizeof a.idims);
    cge_shape_strides(&data->shape, a.dstr);
    a.axis_dim = data->shape.dims[axis];
    a.node = ctx->node_name;
    return cge_launch(stream, gather_el_block,
                      cge__blocks_for(a.numel, CGE__MIN_BLOCK, ctx->num_threads), &a, sizeof a);
}

/* ---- GatherND ------------------------------------------------------------------------ */

static cge_status gather_nd_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *data = &ctx->inputs[0], *idx = &ctx->inputs[1];
    int32_t r = data->shape.rank, q = idx->shape.rank;
    int64_t b = cge_attrs_get_int(ctx->attrs, "batch_dims", 0);
    if (r < 1 || q < 1)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "data and indices must have rank >= 1");
    if (b < 0 || b >= q || b >= r)
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "batch_dims %lld must be less than both ranks (%d, %d)",
                              (long long)b, (int)r, (int)q);
    int64_t m = idx->shape.dims[q - 1];
    if (!cge_dim_is_known(m))
        return cge_meta_error(ctx, CGE_ERR_UNSUPPORTED,
                              "the last dim of indices must be known (it fixes the output rank)");
    if (m < 1 || m > r - b)
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "indices' last dim %lld must be in [1, %lld] "
                              "(data rank - batch_dims)",
                              (long long)m, (long long)(r - b));
    for (int32_t d = 0; d < b; d++)
        if (cge_dim_is_known(data->shape.dims[d]) && cge_dim_is_known(idx->shape.dims[d]) &&
            data->shape.dims[d] != idx->shape.dims[d])
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "batch dim %d differs: %lld vs %lld",
                                  (int)d, (long long)data->shape.dims[d],
                                  (long long)idx->shape.dims[d]);
    cge_shape out = {.rank = 0};
    if (q - 1 + r - b - m > CGE_MAX_RANK)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "output rank exceeds %d", CGE_MAX_RANK);
    for (int32_t d = 0; d < q - 1; d++)
        out.dims[out.rank++] = idx->shape.dims[d];
    for (int32_t d = (int32_t)(b + m); d < r; d++)
        out.dims[out.rank++] = data->shape.dims[d];
    ctx->outputs[0].dtype = data->dtype;
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

/* Shared by GatherND and ScatterND: each index tuple (a row of indices)
 * addresses a slice of `slice` elements of data. */
typedef struct nd_view {
    int32_t m;                      /* index tuple length */
    int32_t batch_dims;             /* data's axis of tuple element 0 */
    int64_t rows;                   /* number of tuples */
    int64_t rows_per_batch;
    int64_t batch_stride;           /* elements of data per batch entry */
    int64_t dims[CGE_MAX_RANK];     /* data dims addressed by the tuple */
    int64_t strides[CGE_MAX_RANK];  /* their strides */
    int64_t slice;
} nd_view;

static void nd_make(const cge_shape *data, const cge_shape *idx, int32_t b, nd_view *v)
{
    int32_t q = idx->rank;
    int64_t st[CGE_MAX_RANK];
    cge_shape_strides(data, st);
    memset(v, 0, sizeof *v);
    v->m = (int32_t)idx->dims[q - 1];
    v->batch_dims = b;
    v->rows = cge__dims_prod(idx->dims, 0, q - 1);
    v->rows_per_batch = cge__dims_prod(idx->dims, b, q - 1);
    v->batch_stride = cge__dims_prod(data->dims, b, data->rank);
    for (int32_t j = 0; j < v->m; j++) {
        v->dims[j] = data->dims[b + j];
        v->strides[j] = st[b + j];
    }
    v->slice = cge__dims_prod(data->dims, b + v->m, data->rank);
}

/* Element offset in data of tuple `row`, or -1 if an index is out of range
 * (reported for `op` and `node`). */
static int64_t nd_offset(const nd_view *v, cge_dtype it, const void *idx, int64_t row,
                         const char *op, const char *node)
{
    int64_t off = (v->rows_per_batch ? row / v->rows_per_batch : 0) * v->batch_stride;
    for (int32_t j = 0; j < v->m; j++) {
        int64_t raw = load_idx(it, idx, row * v->m + j), k = raw;
        if (k < 0)
            k += v->dims[j];
        if (k < 0 || k >= v->dims[j]) {
            index_fail(op, node, raw, row * v->m + j, v->dims[j], v->batch_dims + j);
            return -1;
        }
        off += k * v->strides[j];
    }
    return off;
}

typedef struct gather_nd_args {
    const char *data;
    char *out;
    const void *idx;
    cge_dtype idx_dtype;
    size_t esize;
    nd_view v;
    const char *node;
} gather_nd_args;

static void gather_nd_block(int64_t b, int64_t nb, void *p)
{
    const gather_nd_args *a = p;
    int64_t lo, hi;
    cge__block_range(a->v.rows, b, nb, &lo, &hi);
    size_t bytes = (size_t)a->v.slice * a->esize;
    for (int64_t row = lo; row < hi; row++) {
        int64_t off = nd_offset(&a->v, a->idx_dtype, a->idx, row, "GatherND", a->node);
        char *dst = a->out + row * (int64_t)bytes;
        if (off < 0)
            memset(dst, 0, bytes);
        else if (bytes == a->esize)
            elem_copy(dst, a->data + off * (int64_t)a->esize, a->esize);
        else
            memcpy(dst, a->data + off * (int64_t)a->esize, bytes);
    }
}

static cge_status gather_nd_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *data = &ctx->inputs[0], *idx = &ctx->inputs[1];
    cge_tensor *out = &ctx->outputs[0];
    int64_t b = cge_attrs_get_int(ctx->attrs, "batch_dims", 0);
    int32_t r = data->shape.rank, q = idx->shape.rank;
    if (idx->dtype != CGE_I32 && idx->dtype != CGE_I64)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "indices must be int32 or int64");
    if (q < 1 || r < 1 || b < 0 || b >= q || b >= r || idx->shape.dims[q - 1] < 1 ||
        idx->shape.dims[q - 1] > r - b)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "bad indices shape or batch_dims");
    gather_nd_args a;
    memset(&a, 0, sizeof a);
    nd_make(&data->shape, &idx->shape, (int32_t)b, &a.v);
    a.esize = cge_dtype_size(data->dtype);
    int64_t numel = cge_shape_numel(&out->shape);
    if (out->dtype != data->dtype || numel != a.v.rows * a.v.slice)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output does not match data and indices");
    if (numel == 0)
        return CGE_OK;
    if (!data->data || !idx->data || !out->data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    a.data = data->data;
    a.out = out->data;
    a.idx = idx->data;
    a.idx_dtype = idx->dtype;
    a.node = ctx->node_name;
    int64_t min_rows = a.v.slice >= CGE__MIN_BLOCK ? 1 : CGE__MIN_BLOCK / a.v.slice;
    return cge_launch(stream, gather_nd_block, cge__blocks_for(a.v.rows, min_rows, ctx->num_threads),
                      &a, sizeof a);
}

/* ---- ScatterND ----------------------------------------------------------------------- */

/* What the metas of both scatters check first: the reduction, and updates
 * of data's dtype. */
static cge_status scatter_meta_check(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *data = &ctx->inputs[0], *upd = &ctx->inputs[2];
    if (parse_reduction(ctx->attrs) < 0)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "reduction '%s' is not none, add, mul, max or min",
                              cge_attrs_get_string(ctx->attrs, "reduction", ""));
    if (upd->dtype != data->dtype)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "updates are %s, data is %s",
                              cge_dtype_name(upd->dtype), cge_dtype_name(data->dtype));
    return CGE_OK;
}

/* What the kernels of both scatters check first: the reduction (into *red)
 * and the indices' dtype. */
static cge_status scatter_kernel_check(const cge_kernel_ctx *ctx, int *red)
{
    *red = parse_reduction(ctx->attrs);
    if (*red < 0)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "unknown reduction");
    if (ctx->inputs[1].dtype != CGE_I32 && ctx->inputs[1].dtype != CGE_I64)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "indices must be int32 or int64");
    return CGE_OK;
}

/* What the blocks of both scatters read: where the updates go, from where,
 * and how they combine with what is there. */
typedef struct scatter_common {
    char *out;
    const char *upd;
    const void *idx;
    cge_dtype idx_dtype, dtype;
    int red;
    size_t esize;
    const char *node;
} scatter_common;

/* After a scatter kernel's own checks: copies data into the output (its
 * starting point) and fills c for the blocks. *go is false when nothing is
 * left to do (empty data, or `nupd` = 0 updates). */
static cge_status scatter_start(const cge_kernel_ctx *ctx, cge_stream *stream, int red,
                                int64_t nupd, scatter_common *c, bool *go)
{
    const cge_tensor *data = &ctx->inputs[0], *idx = &ctx->inputs[1], *upd = &ctx->inputs[2];
    cge_tensor *out = &ctx->outputs[0];
    int64_t numel = cge_shape_numel(&data->shape);
    size_t esize = cge_dtype_size(data->dtype);
    *go = false;
    if (numel == 0)
        return CGE_OK;
    if (!data->data || !out->data || (nupd > 0 && (!idx->data || !upd->data)))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    cge_status st = launch_copy(ctx, stream, data->data, out->data, numel * (int64_t)esize);
    if (st || nupd == 0)
        return st;
    *c = (scatter_common){.out = out->data, .upd = upd->data, .idx = idx->data,
                          .idx_dtype = idx->dtype, .dtype = data->dtype, .red = red,
                          .esize = esize, .node = ctx->node_name};
    *go = true;
    return CGE_OK;
}

static cge_status scatter_nd_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *data = &ctx->inputs[0], *idx = &ctx->inputs[1],
                          *upd = &ctx->inputs[2];
    int32_t r = data->shape.rank, q = idx->shape.rank;
    cge_status st = scatter_meta_check(ctx);
    if (st)
        return st;
    if (r < 1 || q < 1)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "data and indices must have rank >= 1");
    int64_t m = idx->shape.dims[q - 1];
    if (cge_dim_is_known(m)) {
        if (m < 1 || m > r)
            return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                  "indices' last dim %lld must be in [1, %d]", (long long)m,
                                  (int)r);
        /* updates = indices.shape[:-1] + data.shape[m:] */
        int32_t ur = (int32_t)(q - 1 + r - m);
        bool ok = upd->shape.rank == ur;
        for (int32_t d = 0; ok && d < ur; d++) {
            int64_t want = d < q - 1 ? idx->shape.dims[d] : data->shape.dims[m + d - (q - 1)];
            int64_t got = upd->shape.dims[d];
            ok = !cge_dim_is_known(want) || !cge_dim_is_known(got) || want == got;
        }
        if (!ok) {
            char a[CGE_SHAPE_STR_MAX];
            return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                  "updates are %s; they must be indices.shape[:-1] + "
                                  "data.shape[%lld:]",
                                  cge_shape_str(&upd->shape, a, sizeof a), (long long)m);
        }
    }
    ctx->outputs[0].dtype = data->dtype;
    ctx->outputs[0].shape = data->shape;
    return CGE_OK;
}

typedef struct scatter_nd_args {
    scatter_common c;
    nd_view v;
} scatter_nd_args;

/* Blocks split each slice, never the list of updates: every block applies
 * all updates in order to its part of the slices, so duplicates reduce in a
 * fixed order and no two blocks write one element. */
static void scatter_nd_block(int64_t b, int64_t nb, void *p)
{
    const scatter_nd_args *a = p;
    int64_t lo, hi;
    cge__block_range(a->v.slice, b, nb, &lo, &hi);
    if (lo >= hi)
        return;
    const scatter_common *c = &a->c;
    int64_t es = (int64_t)c->esize;
    for (int64_t row = 0; row < a->v.rows; row++) {
        int64_t off = nd_offset(&a->v, c->idx_dtype, c->idx, row, "ScatterND", c->node);
        if (off < 0)
            continue;
        apply_reduction(c->dtype, c->red, c->out + (off + lo) * es,
                        c->upd + (row * a->v.slice + lo) * es, hi - lo);
    }
}

static cge_status scatter_nd_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *data = &ctx->inputs[0], *idx = &ctx->inputs[1], *upd = &ctx->inputs[2];
    cge_tensor *out = &ctx->outputs[0];
    int32_t r = data->shape.rank, q = idx->shape.rank;
    int red;
    cge_status st = scatter_kernel_check(ctx, &red);
    if (st)
        return st;
    if (q < 1 || r < 1 || idx->shape.dims[q - 1] < 1 || idx->shape.dims[q - 1] > r ||
        out->dtype != data->dtype || upd->dtype != data->dtype ||
        !cge_shape_equal(&out->shape, &data->shape))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "bad shapes for data, indices or output");
    scatter_nd_args a;
    memset(&a, 0, sizeof a);
    nd_make(&data->shape, &idx->shape, 0, &a.v);
    if (cge_shape_numel(&upd->shape) != a.v.rows * a.v.slice)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "updates have %lld elements, expected %lld",
                                (long long)cge_shape_numel(&upd->shape),
                                (long long)(a.v.rows * a.v.slice));
    int64_t work = a.v.rows * a.v.slice;
    bool go;
    st = scatter_start(ctx, stream, red, work, &a.c, &go);
    if (st || !go)
        return st;
    int64_t nb = cge__blocks_for(work, CGE__MIN_BLOCK, ctx->num_threads);
    if (nb > a.v.slice)
        nb = a.v.slice;
    return cge_launch(stream, scatter_nd_block, nb, &a, sizeof a);
}

/* ---- ScatterElements ----------------------------------------------------------------- */

static cge_status scatter_el_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *data = &ctx->inputs[0], *idx = &ctx->inputs[1],
                          *upd = &ctx->inputs[2];
    int32_t r = data->shape.rank, axis;
    cge_status st = scatter_meta_check(ctx);
    if (st)
        return st;
    int64_t a = cge_attrs_get_int(ctx->attrs, "axis", 0);
    if (r < 1 || idx->shape.rank != r || upd->shape.rank != r)
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "data, indices and updates must have one rank >= 1");
    if (!cge_axis_normalize(a, r, false, &axis))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "axis %lld is out of range for rank %d",
                              (long long)a, (int)r);
    for (int32_t d = 0; d < r; d++) {
        int64_t i = idx->shape.dims[d], u = upd->shape.dims[d], x = data->shape.dims[d];
        if (cge_dim_is_known(i) && cge_dim_is_known(u) && i != u)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "indices and updates differ in dim %d",
                                  (int)d);
        if (d != axis && cge_dim_is_known(i) && cge_dim_is_known(x) && i > x)
            return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                  "indices dim %d is %lld, larger than data's %lld", (int)d,
                                  (long long)i, (long long)x);
    }
    ctx->outputs[0].dtype = data->dtype;
    ctx->outputs[0].shape = data->shape;
    return CGE_OK;
}

typedef struct scatter_el_args {
    scatter_common c;
    int32_t rank, axis;
    int64_t idims[CGE_MAX_RANK];
    int64_t dstr[CGE_MAX_RANK];
    int64_t axis_dim;               /* data's size along axis */
    int64_t n, inner, lines;        /* indices as [outer, n, inner]; lines = outer*inner */
    bool dense;                     /* indices have data's dims but the axis' */
} scatter_el_args;

/* Index element e as a position on data's axis (negative ones counted from
 * the end); false, with the run's failure reported, when it is outside. */
static inline bool scatter_el_index(const scatter_el_args *a, int64_t e, int64_t *k)
{
    int64_t raw = load_idx(a->c.idx_dtype, a->c.idx, e);
    *k = raw < 0 ? raw + a->axis_dim : raw;
    if (*k >= 0 && *k < a->axis_dim)
        return true;
    index_fail("ScatterElements", a->c.node, raw, e, a->axis_dim, a->axis);
    return false;
}

/* A line (fixed coordinates but the axis) writes only the data line with the
 * same coordinates, so blocks take whole lines and never collide; inside a
 * line the updates apply in order. */
static void scatter_el_block(int64_t b, int64_t nb, void *p)
{
    const scatter_el_args *a = p;
    const scatter_common *c = &a->c;
    int64_t lo, hi, es = (int64_t)c->esize;
    cge__block_range(a->lines, b, nb, &lo, &hi);
    if (a->dense) {
        /* Lines of one outer index side by side: each step along the axis
         * reads and writes a contiguous run (a line at a time strides by
         * `inner`, a cache line per element); per line the order is kept. */
        for (int64_t line = lo; line < hi;) {
            int64_t o = line / a->inner, i0 = line % a->inner;
            int64_t i1 = a->inner - i0 < hi - line ? a->inner : i0 + (hi - line);
            if (c->red == RED_NONE && es == 4) {
                /* plain 4-byte assignment (float32, int32; Faster R-CNN's
                 * merge of its RoiAlign levels): a store per element, not a
                 * memcpy call */
                uint32_t *out = (uint32_t *)c->out;
                const uint32_t *upd = (const uint32_t *)c->upd;
                for (int64_t j = 0; j < a->n; j++)
                    for (int64_t i = i0; i < i1; i++) {
                        int64_t e = (o * a->n + j) * a->inner + i;
                        int64_t k;
                        if (!scatter_el_index(a, e, &k))
                            continue;
                        out[(o * a->axis_dim + k) * a->inner + i] = upd[e];
                    }
                line += i1 - i0;
                continue;
            }
            for (int64_t j = 0; j < a->n; j++)
                for (int64_t i = i0; i < i1; i++) {
                    int64_t e = (o * a->n + j) * a->inner + i;
                    int64_t k;
                    if (!scatter_el_index(a, e, &k))
                        continue;
                    apply_reduction(c->dtype, c->red,
                                    c->out + ((o * a->axis_dim + k) * a->inner + i) * es,
                                    c->upd + e * es, 1);
                }
            line += i1 - i0;
        }
        return;
    }
    for (int64_t line = lo; line < hi; line++) {
        int64_t o = line / a->inner, i = line % a->inner;
        /* data offset of this line's coordinates, with axis coordinate 0 */
        int64_t base = 0, rem = i;
        for (int32_t d = a->rank - 1; d > a->axis; d--) {
            base += (rem % a->idims[d]) * a->dstr[d];
            rem /= a->idims[d];
        }
        rem = o;
        for (int32_t d = a->axis - 1; d >= 0; d--) {
            base += (rem % a->idims[d]) * a->dstr[d];
            rem /= a->idims[d];
        }
        int64_t first = o * a->n * a->inner + i;
        for (int64_t j = 0; j < a->n; j++) {
            int64_t e = first + j * a->inner;
            int64_t k;
            if (!scatter_el_index(a, e, &k))
                continue;
            apply_reduction(c->dtype, c->red, c->out + (base + k * a->dstr[a->axis]) * es,
                            c->upd + e * es, 1);
        }
    }
}

static cge_status scatter_el_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *data = &ctx->inputs[0], *idx = &ctx->inputs[1], *upd = &ctx->inputs[2];
    cge_tensor *out = &ctx->outputs[0];
    int32_t r = data->shape.rank, axis;
    int red;
    cge_status st = scatter_kernel_check(ctx, &red);
    if (st)
        return st;
    if (r < 1 || idx->shape.rank != r ||
        !cge_axis_normalize(cge_attrs_get_int(ctx->attrs, "axis", 0), r, false, &axis) ||
        !cge_shape_equal(&idx->shape, &upd->shape) || upd->dtype != data->dtype ||
        out->dtype != data->dtype || !cge_shape_equal(&out->shape, &data->shape))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "bad shapes for data, indices or updates");
    for (int32_t d = 0; d < r; d++)
        if (d != axis && idx->shape.dims[d] > data->shape.dims[d])
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "indices dim %d exceeds data's", (int)d);
    scatter_el_args a;
    memset(&a, 0, sizeof a);
    int64_t nidx = cge_shape_numel(&idx->shape);
    bool go;
    st = scatter_start(ctx, stream, red, nidx, &a.c, &go);
    if (st || !go)
        return st;
    a.rank = r;
    a.axis = axis;
    memcpy(a.idims, idx->shape.dims, sizeof a.idims);
    cge_shape_strides(&data->shape, a.dstr);
    a.axis_dim = data->shape.dims[axis];
    a.n = idx->shape.dims[axis];
    a.inner = cge__dims_prod(idx->shape.dims, axis + 1, r);
    a.lines = nidx / a.n;
    a.dense = true;
    for (int32_t d = 0; d < r; d++)
        a.dense &= d == axis || idx->shape.dims[d] == data->shape.dims[d];
    int64_t min_lines = a.n >= CGE__MIN_BLOCK ? 1 : CGE__MIN_BLOCK / a.n;
    return cge_launch(stream, scatter_el_block,
                      cge__blocks_for(a.lines, min_lines, ctx->num_threads), &a, sizeof a);
}

/* ---- OneHot -------------------------------------------------------------------------- */

static cge_status onehot_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *idx = &ctx->inputs[0], *depth = &ctx->inputs[1],
                          *vals = &ctx->inputs[2];
    int32_t r = idx->shape.rank, axis;
    int64_t a = cge_attrs_get_int(ctx->attrs, "axis", -1);
    if (r + 1 > CGE_MAX_RANK)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "output rank exceeds %d", CGE_MAX_RANK);
    if (!cge_axis_normalize(a, r + 1, false, &axis))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "axis %lld is out of range for output rank %d",
                              (long long)a, (int)(r + 1));
    int64_t dn = cge_shape_numel(&depth->shape), vn = cge_shape_numel(&vals->shape);
    if (depth->shape.rank > 1 || (dn >= 0 && dn != 1))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "depth must hold exactly one value");
    if (vals->shape.rank != 1 || (vn >= 0 && vn != 2))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "values must be [off_value, on_value]");
    int64_t d = CGE_DIM_DYNAMIC;
    const void *dv = cge__meta_input_value(ctx, 1);
    if (dv) {
        double v = cge__load_as_double(depth->dtype, dv, 0);
        if (!(v >= 0 && v < 9.0e15))
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "depth %g is not a valid size", v);
        d = (int64_t)v;
    }
    cge_shape out = {.rank = r + 1};
    for (int32_t i = 0, k = 0; i <= r; i++)
        out.dims[i] = i == axis ? d : idx->shape.dims[k++];
    ctx->outputs[0].dtype = vals->dtype;
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

typedef struct onehot_args {
    const void *idx;
    cge_dtype idx_dtype;
    const char *vals;
    char *out;
    size_t esize;
    int64_t depth, inner, rows;     /* output as [outer, depth, inner]; rows = outer*depth */
} onehot_args;

/* Index e as a class in [0, depth), or -1 (out of range: the row stays "off"). */
static int64_t onehot_class(const onehot_args *a, int64_t e)
{
    int64_t k;
    if (cge_dtype_is_float(a->idx_dtype)) {
        double v = cge__load_as_double(a->idx_dtype, a->idx, e);
        if (!(v > -(double)a->depth - 1 && v < (double)a->depth))
            return -1;
        k = (int64_t)v; /* truncates, as a cast to int64 does */
    } else {
        k = cge__load_as_i64(a->idx_dtype, a->idx, e);
    }
    if (k < 0)
        k += a->depth;
    return k >= 0 && k < a->depth ? k : -1;
}

static void onehot_block(int64_t b, int64_t nb, void *p)
{
    const onehot_args *a = p;
    int64_t lo, hi;
    cge__block_range(a->rows, b, nb, &lo, &hi);
    const char *off = a->vals, *on = a->vals + a->esize;
    for (int64_t row = lo; row < hi; row++) {
        int64_t o = row / a->depth, d = row % a->depth;
        char *dst = a->out + row * a->inner * (int64_t)a->esize;
        for (int64_t i = 0; i < a->inner; i++)
            elem_copy(dst + i * (int64_t)a->esize,
                      onehot_class(a, o * a->inner + i) == d ? on : off, a->esize);
    }
}

static cge_status onehot_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *idx = &ctx->inputs[0], *vals = &ctx->inputs[2];
    cge_tensor *out = &ctx->outputs[0];
    int32_t r = idx->shape.rank, axis;
    if (!cge_axis_normalize(cge_attrs_get_int(ctx->attrs, "axis", -1), r + 1, false, &axis) ||
        out->shape.rank != r + 1 || out->dtype != vals->dtype ||
        cge_shape_numel(&vals->shape) != 2)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output does not match indices and values");
    onehot_args a;
    memset(&a, 0, sizeof a);
    a.depth = out->shape.dims[axis];
    a.inner = cge__dims_prod(idx->shape.dims, axis, r);
    a.rows = cge__dims_prod(idx->shape.dims, 0, axis) * a.depth;
    for (int32_t i = 0, k = 0; i <= r; i++)
        if (i != axis && out->shape.dims[i] != idx->shape.dims[k++])
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output does not match the indices");
    if (a.rows * a.inner == 0)
        return CGE_OK;
    if (!idx->data || !vals->data || !out->data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    a.idx = idx->data;
    a.idx_dtype = idx->dtype;
    a.vals = vals->data;
    a.out = out->data;
    a.esize = cge_dtype_size(vals->dtype);
    int64_t min_rows = a.inner >= CGE__MIN_BLOCK ? 1 : CGE__MIN_BLOCK / a.inner;
    return cge_launch(stream, onehot_block, cge__blocks_for(a.rows, min_rows, ctx->num_threads),
                      &a, sizeof a);
}

/* ---- NonZero ------------------------------------------------------------------------- */

static bool is_nonzero(cge_dtype t, const void *p, int64_t i)
{
    switch (t) {
    case CGE_F32: return ((const float *)p)[i] != 0.0f;
    case CGE_F64: return ((const double *)p)[i] != 0.0;
    case CGE_F16:
    case CGE_BF16: return (((const uint16_t *)p)[i] & 0x7fff) != 0;
    default: break;
    }
    switch (cge_dtype_size(t)) {
    case 1: return ((const uint8_t *)p)[i] != 0;
    case 2: return ((const uint16_t *)p)[i] != 0;
    case 4: return ((const uint32_t *)p)[i] != 0;
    default: return ((const uint64_t *)p)[i] != 0;
    }
}

/* Elements [i, i + 8 / size) lie in one all-zero 8-byte word (any dtype: zero
 * bits are a zero value; a nonzero word is checked element by element, so
 * -0.0 still counts as zero). Masks and thresholded scores are mostly zeros:
 * a detector's NonZero over a million scores skips them 8 bytes at a time. */
static bool zero_word(const void *p, size_t esize, int64_t i)
{
    uint64_t w;
    memcpy(&w, (const char *)p + (size_t)i * esize, sizeof w);
    return w == 0;
}

/* The nonzero elements of [lo, hi). */
static int64_t count_nonzero(cge_dtype t, const void *p, int64_t lo, int64_t hi)
{
    size_t es = cge_dtype_size(t);
    int64_t step = es && es <= 8 ? (int64_t)(8 / es) : 0, c = 0;
    for (int64_t i = lo; i < hi;) {
        if (step && i + step <= hi && zero_word(p, es, i)) {
            i += step;
            continue;
        }
        c += is_nonzero(t, p, i);
        i++;
    }
    return c;
}

static cge_status nonzero_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *x = &ctx->inputs[0];
    const void *v = cge__meta_input_value(ctx, 0);
    int64_t n = cge_shape_numel(&x->shape), count = CGE_DIM_DYNAMIC;
    if (v && n >= 0)
        count = count_nonzero(x->dtype, v, 0, n);
    /* A scalar counts as a 1-D tensor of one element, as numpy does. */
    ctx->outputs[0].dtype = CGE_I64;
    ctx->outputs[0].shape = CGE_SHAPE(x->shape.rank > 0 ? x->shape.rank : 1, count);
    return CGE_OK;
}

typedef struct nonzero_args {
    const void *x;
    cge_dtype dtype;
    int64_t *out;
    int64_t *counts;                /* per block (first pass), NULL with one block */
    int32_t rank;
    int64_t dims[CGE_MAX_RANK];
    int64_t numel, cap;             /* cap: the output's second dim */
} nonzero_args;

static void nonzero_count_block(int64_t b, int64_t nb, void *p)
{
    const nonzero_args *a = p;
    int64_t lo, hi;
    cge__block_range(a->numel, b, nb, &lo, &hi);
    a->counts[b] = count_nonzero(a->dtype, a->x, lo, hi);
}

static void nonzero_write_block(int64_t b, int64_t nb, void *p)
{
    const nonzero_args *a = p;
    int64_t lo, hi, pos = 0;
    cge__block_range(a->numel, b, nb, &lo, &hi);
    for (int64_t k = 0; a->counts && k < b; k++)
        pos += a->counts[k];
    if (lo >= hi)
        return;
    int64_t coord[CGE_MAX_RANK], rem = lo;
    for (int32_t d = a->rank - 1; d >= 0; d--) {
        coord[d] = rem % a->dims[d];
        rem /= a->dims[d];
    }
    size_t es = cge_dtype_size(a->dtype);
    int64_t step = es && es <= 8 ? (int64_t)(8 / es) : 0;
    for (int64_t i = lo; i < hi && pos < a->cap; i++) {
        if (step && i + step <= hi && zero_word(a->x, es, i)) {
            /* skip the word: its last element's coordinate, then the usual step */
            int64_t carry = step - 1;
            for (int32_t d = a->rank - 1; d >= 0 && carry; d--) {
                int64_t c = coord[d] + carry;
                coord[d] = c % a->dims[d];
                carry = c / a->dims[d];
            }
            i += step - 1;
        } else if (is_nonzero(a->dtype, a->x, i)) {
            for (int32_t d = 0; d < a->rank; d++)
                a->out[d * a->cap + pos] = coord[d];
            pos++;
        }
        for (int32_t d = a->rank - 1; d >= 0; d--) {
            if (++coord[d] < a->dims[d])
                break;
            coord[d] = 0;
        }
    }
}

static int64_t nonzero_blocks(const cge_kernel_ctx *ctx)
{
    int64_t nb = cge__blocks_for(cge_shape_numel(&ctx->inputs[0].shape), CGE__MIN_BLOCK * 4,
                                ctx->num_threads);
    return nb > NZ_MAX_BLOCKS ? NZ_MAX_BLOCKS : nb;
}

static size_t nonzero_workspace(const cge_kernel_ctx *ctx)
{
    return (size_t)nonzero_blocks(ctx) * sizeof(int64_t);
}

static cge_status nonzero_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *x = &ctx->inputs[0];
    cge_tensor *out = &ctx->outputs[0];
    int32_t rank = x->shape.rank > 0 ? x->shape.rank : 1;
    if (out->dtype != CGE_I64 || out->shape.rank != 2 || out->shape.dims[0] != rank)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output must be int64 [%d, count]",
                                (int)rank);
    nonzero_args a;
    memset(&a, 0, sizeof a);
    a.numel = cge_shape_numel(&x->shape);
    a.cap = out->shape.dims[1];
    if (a.numel == 0 || a.cap == 0)
        return CGE_OK;
    if (!x->data || !out->data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    a.x = x->data;
    a.dtype = x->dtype;
    a.out = out->data;
    a.rank = rank;
    if (x->shape.rank == 0)
        a.dims[0] = 1;
    else
        memcpy(a.dims, x->shape.dims, sizeof a.dims);
    /* Two passes when the work is large: count per block, then each block
     * writes from the sum of the counts before it. */
    int64_t nb = nonzero_blocks(ctx);
    if (nb > 1 && ctx->workspace && ctx->workspace_size >= (size_t)nb * sizeof(int64_t)) {
        a.counts = ctx->workspace;
        cge_status st = cge_launch(stream, nonzero_count_block, nb, &a, sizeof a);
        if (st)
            return st;
    } else {
        nb = 1;
    }
    return cge_launch(stream, nonzero_write_block, nb, &a, sizeof a);
}

/* ---- Compress ------------------------------------------------------------------------ */

/* No axis attribute means "flatten"; the attribute's absence is what counts. */
static bool compress_axis(const cge_attrs *attrs, int64_t *axis)
{
    *axis = cge_attrs_get_int(attrs, "axis", INT64_MIN);
    return *axis != INT64_MIN;
}

static cge_status compress_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *x = &ctx->inputs[0], *cond = &ctx->inputs[1];
    if (cond->shape.rank != 1)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "condition must be 1-D, got rank %d",
                              (int)cond->shape.rank);
    int64_t a;
    int32_t axis = 0;
    bool has_axis = compress_axis(ctx->attrs, &a);
    if (has_axis && !cge_axis_normalize(a, x->shape.rank, false, &axis))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "axis %lld is out of range for rank %d",
                              (long long)a, (int)x->shape.rank);
    int64_t len = has_axis ? x->shape.dims[axis] : cge_shape_numel(&x->shape);
    int64_t cn = cond->shape.dims[0];
    if (cge_dim_is_known(len) && len >= 0 && cge_dim_is_known(cn) && cn > len)
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "condition has %lld entries, more than the %lld selectable",
                              (long long)cn, (long long)len);
    int64_t count = CGE_DIM_DYNAMIC;
    const void *v = cge__meta_input_value(ctx, 1);
    if (v && cge_dim_is_known(cn)) {
        count = 0;
        for (int64_t i = 0; i < cn; i++)
            count += ((const uint8_t *)v)[i] != 0;
    }
    cge_shape out = x->shape;
    if (has_axis) {
        out.dims[axis] = count;
    } else {
        out.rank = 1;
        out.dims[0] = count;
    }
    ctx->outputs[0].dtype = x->dtype;
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

typedef struct compress_args {
    const char *x;
    char *y;
    const uint8_t *cond;
    int64_t cond_len, n, count, inner_bytes, units;  /* units = outer * count */
} compress_args;

/* Unit u copies slice (u % count) of outer row (u / count); a block finds its
 * first slice's position once, then walks the condition. Slices the
 * condition does not fill (its values changed since meta) are zero. */
static void compress_block(int64_t b, int64_t nb, void *p)
{
    const compress_args *a = p;
    int64_t lo, hi, limit = a->cond_len < a->n ? a->cond_len : a->n;
    cge__block_range(a->units, b, nb, &lo, &hi);
    if (lo >= hi)
        return;
    int64_t s = lo % a->count, j = 0, seen = 0;
    for (; j < limit; j++)
        if (a->cond[j] && seen++ == s)
            break;
    for (int64_t u = lo; u < hi; u++) {
        int64_t o = u / a->count;
        char *dst = a->y + u * a->inner_bytes;
        if (j < limit)
            memcpy(dst, a->x + (o * a->n + j) * a->inner_bytes, (size_t)a->inner_bytes);
        else
            memset(dst, 0, (size_t)a->inner_bytes);
        if (++s == a->count) {
            s = 0;
            for (j = 0; j < limit && !a->cond[j]; j++)
                ;
        } else {
            for (j++; j < limit && !a->cond[j]; j++)
                ;
        }
    }
}

static cge_status compress_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *x = &ctx->inputs[0], *cond = &ctx->inputs[1];
    cge_tensor *y = &ctx->outputs[0];
    int64_t a;
    int32_t axis = 0, r = x->shape.rank;
    bool has_axis = compress_axis(ctx->attrs, &a);
    if ((has_axis && !cge_axis_normalize(a, r, false, &axis)) || cond->shape.rank != 1 ||
        y->dtype != x->dtype)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "bad axis, condition or output");
    size_t es = cge_dtype_size(x->dtype);
    compress_args c = {.x = x->data, .y = y->data, .cond = cond->data,
                       .cond_len = cond->shape.dims[0]};
    int64_t outer;
    if (has_axis) {
        if (y->shape.rank != r)
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output rank differs from input");
        for (int32_t d = 0; d < r; d++)
            if (d != axis && y->shape.dims[d] != x->shape.dims[d])
                return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output does not match the input");
        outer = cge__dims_prod(x->shape.dims, 0, axis);
        c.n = x->shape.dims[axis];
        c.count = y->shape.dims[axis];
        c.inner_bytes = cge__dims_prod(x->shape.dims, axis + 1, r) * (int64_t)es;
    } else {
        if (y->shape.rank != 1)
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output must be 1-D without an axis");
        outer = 1;
        c.n = cge_shape_numel(&x->shape);
        c.count = y->shape.dims[0];
        c.inner_bytes = (int64_t)es;
    }
    c.units = outer * c.count;
    if (c.units == 0 || c.inner_bytes == 0)
        return CGE_OK;
    if (!x->data || !y->data || !cond->data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    int64_t min_units = c.inner_bytes >= CGE__MIN_BLOCK ? 1 : CGE__MIN_BLOCK / c.inner_bytes;
    return cge_launch(stream, compress_block, cge__blocks_for(c.units, min_units, ctx->num_threads),
                      &c, sizeof c);
}

/* ---- definitions --------------------------------------------------------------------- */

static const cge_kernel_def k_gather_el[] = CGE__KDEF(0, gather_el_launch, NULL, -1);
static const cge_kernel_def k_gather_nd[] = CGE__KDEF(0, gather_nd_launch, NULL, -1);
/* Scatters copy data to the output first; in place they skip the copy. */
static const cge_kernel_def k_scatter_nd[] = CGE__KDEF(0, scatter_nd_launch, NULL, 0);
static const cge_kernel_def k_scatter_el[] = CGE__KDEF(0, scatter_el_launch, NULL, 0);
static const cge_kernel_def k_onehot[] = CGE__KDEF(0, onehot_launch, NULL, -1);
static const cge_kernel_def k_nonzero[] = CGE__KDEF(0, nonzero_launch, nonzero_workspace, -1);
static const cge_kernel_def k_compress[] = CGE__KDEF(0, compress_launch, NULL, -1);

static const cge_arg_def gather_el_in[] = {
    {"data", 0, CGE_DT_ALL, "tensor of rank r >= 1"},
    {"indices", 0, CGE__IDX_DT, "rank r; values in [-s, s) along axis"},
};
static const cge_arg_def gather_nd_in[] = {
    {"data", 0, CGE_DT_ALL, "tensor of rank r >= 1"},
    {"indices", 0, CGE__IDX_DT, "rank q >= 1; last dim indexes data"},
};
static const cge_arg_def scatter_in[] = {
    {"data", 0, CGE_DT_ALL, "tensor of rank r >= 1"},
    {"indices", 0, CGE__IDX_DT, "where the updates go"},
    {"updates", 0, CGE_DT_ALL, "values to write or reduce"},
};
static const cge_arg_def any_out[] = {{"output", 0, CGE_DT_ALL, "result"}};
static const cge_arg_def onehot_in[] = {
    {"indices", 0, CGE_DT_NUMERIC, "class indices; negative count from depth"},
    {"depth", 0, CGE_DT_NUMERIC, "number of classes (one value)"},
    {"values", 0, CGE_DT_ALL, "[off_value, on_value]"},
};
static const cge_arg_def nonzero_in[] = {{"X", 0, CGE_DT_ALL, "tensor"}};
static const cge_arg_def nonzero_out[] = {
    {"Y", 0, CGE_DT(CGE_I64), "[rank, count] coordinates of nonzero elements, row-major order"}};
static const cge_arg_def compress_in[] = {
    {"input", 0, CGE_DT_ALL, "tensor"},
    {"condition", 0, CGE_DT(CGE_BOOL), "1-D: which slices (elements) to keep"},
};

static const cge_attr_def gather_el_attrs[] = {
    {"axis", CGE_ATTR_INT, false, 0, 0.0f, NULL, "axis to gather along"}};
static const cge_attr_def gather_nd_attrs[] = {
    {"batch_dims", CGE_ATTR_INT, false, 0, 0.0f, NULL, "leading dims shared by data and indices"}};
static const cge_attr_def scatter_nd_attrs[] = {
    {"reduction", CGE_ATTR_STRING, false, 0, 0.0f, "none",
     "none (assign), add, mul; also max, min"}};
static const cge_attr_def scatter_el_attrs[] = {
    {"axis", CGE_ATTR_INT, false, 0, 0.0f, NULL, "axis to scatter along"},
    {"reduction", CGE_ATTR_STRING, false, 0, 0.0f, "none",
     "none (assign), add, mul; also max, min"}};
static const cge_attr_def onehot_attrs[] = {
    {"axis", CGE_ATTR_INT, false, -1, 0.0f, NULL, "where the one-hot dim goes in the output"}};
static const cge_attr_def compress_attrs[] = {
    {"axis", CGE_ATTR_INT, false, INT64_MIN, 0.0f, NULL, "axis to select along; absent: flatten"}};

static const cge_op_def gather_scatter_ops[] = {
    CGE__OPDEF("GatherElements", 13, gather_el_in, 2, any_out, 1, gather_el_attrs, 1,
               gather_el_infer, k_gather_el,
               "out[i][j][k] = data[index][j][k] (axis 0), index = indices[i][j][k]."),
    CGE__OPDEF("GatherND", 13, gather_nd_in, 2, any_out, 1, gather_nd_attrs, 1, gather_nd_infer,
               k_gather_nd, "Slices of data addressed by the index tuples in indices' last dim."),
    CGE__OPDEF("ScatterND", 16, scatter_in, 3, any_out, 1, scatter_nd_attrs, 1, scatter_nd_infer,
               k_scatter_nd, "Copy of data with slices at index tuples replaced (or reduced)."),
    CGE__OPDEF("ScatterElements", 16, scatter_in, 3, any_out, 1, scatter_el_attrs, 2,
               scatter_el_infer, k_scatter_el,
               "Copy of data with elements at indices (along axis) replaced (or reduced)."),
    CGE__OPDEF("OneHot", 11, onehot_in, 3, any_out, 1, onehot_attrs, 1, onehot_infer, k_onehot,
               "One-hot encoding; indices outside [-depth, depth) give all off_value."),
    CGE__OPDEF("NonZero", 13, nonzero_in, 1, nonzero_out, 1, NULL, 0, nonzero_infer, k_nonzero,
               "Coordinates of the nonzero elements."),
    CGE__OPDEF("Compress", 11, compress_in, 2, any_out, 1, compress_attrs, 1, compress_infer,
               k_compress, "Slices along axis (elements, flattened) where condition is true."),
};

const cge_op_def *cge__ops_gather_scatter(int32_t *count)
{
    *count = (int32_t)(sizeof gather_scatter_ops / sizeof gather_scatter_ops[0]);
    return gather_scatter_ops;
}
