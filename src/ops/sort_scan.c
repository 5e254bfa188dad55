/* Sorting and scanning along an axis: TopK (a heap per line, ties by lower
 * index), CumSum (running sums, exclusive and reverse) and Unique (a stable
 * sort of values or slices, then groups in sorted or first-seen order). */
#include <stdlib.h>
#include <string.h>

#include "ops/builtin.h"
#include "ops/family_util.h"
#include "ops/kernel_util.h"

/* CumSum's units of work: this many inner columns walk the axis together. */
#define CUM_CHUNK 64

/* ---- TopK ---------------------------------------------------------------------------- */

static cge_status topk_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *x = &ctx->inputs[0], *k = &ctx->inputs[1];
    int32_t r = x->shape.rank, axis;
    int64_t a = cge_attrs_get_int(ctx->attrs, "axis", -1);
    if (!cge_axis_normalize(a, r, false, &axis))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "axis %lld is out of range for rank %d",
                              (long long)a, (int)r);
    int64_t kn = cge_shape_numel(&k->shape);
    if (k->shape.rank > 1 || (kn >= 0 && kn != 1))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "K must hold exactly one value");
    int64_t kv = CGE_DIM_DYNAMIC, n = x->shape.dims[axis];
    const void *v = cge__meta_input_value(ctx, 1);
    if (v) {
        kv = cge__load_as_i64(k->dtype, v, 0);
        if (kv < 0 || (cge_dim_is_known(n) && kv > n))
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "K = %lld is not in [0, %lld]",
                                  (long long)kv, (long long)n);
    }
    cge_shape out = x->shape;
    out.dims[axis] = kv;
    ctx->outputs[0].dtype = x->dtype;
    ctx->outputs[0].shape = out;
    ctx->outputs[1].dtype = CGE_I64;
    ctx->outputs[1].shape = out;
    return CGE_OK;
}

typedef struct topk_args {
    const void *x;
    void *vals;
    int64_t *idx;
    int64_t n, k, inner, lines;
    bool largest;
} topk_args;

/* Per line, a heap of the k best so far lives in the output indices (stride
 * `inner`), its root the worst kept; heapsort then orders them best first.
 * "Better" is a total order: larger (smaller) value, then the lower index, so
 * ties keep their input order. NaN counts as larger than any number. */
#define TOPK_KERNEL(SUF, T, MT, LD)                                                        \
    static inline bool topk_better_##SUF(const T *x, int64_t st, bool largest, int64_t i,   \
                                         int64_t j)                                        \
    {                                                                                      \
        MT a = LD(x[i * st]), b = LD(x[j * st]);                                           \
        bool an = a != a, bn = b != b;                                                     \
        if (an || bn) {                                                                    \
            if (an && bn)                                                                  \
                return i < j;                                                              \
            return largest ? an : bn;                                                      \
        }                                                                                  \
        if (a != b)                                                                        \
            return largest ? a > b : a < b;                                                \
        return i < j;                                                                      \
    }                                                                                      \
    static void topk_sift_##SUF(const T *x, int64_t st, bool lg, int64_t *h, int64_t hs,    \
                                int64_t size, int64_t pos)                                 \
    {                                                                                      \
        for (;;) {                                                                         \
            int64_t l = 2 * pos + 1, w = pos;                                              \
            if (l < size && topk_better_##SUF(x, st, lg, h[w * hs], h[l * hs]))            \
                w = l;                                                                     \
            if (l + 1 < size && topk_better_##SUF(x, st, lg, h[w * hs], h[(l + 1) * hs]))  \
                w = l + 1;                                                                 \
            if (w == pos)                                                                  \
                return;                                                                    \
            int64_t t = h[w * hs];                                                         \
            h[w * hs] = h[pos * hs];                                                       \
            h[pos * hs] = t;                                                               \
            pos = w;                                                                       \
        }                                                                                  \
    }                                                                                      \
    static void topk_fn_##SUF(int64_t b, int64_t nb, void *args)                           \
    {                                                                                      \
        const topk_args *a = args;                                                         \
        int64_t lo, hi, n = a->n, k = a->k, in = a->inner;                                 \
        bool lg = a->largest;                                                              \
        cge__block_range(a->lines, b, nb, &lo, &hi);                                        \
        for (int64_t line = lo; line < hi; line++) {                                       \
            int64_t o = line / in, i = line % in;                                          \
            const T *x = (const T *)a->x + o * n * in + i;                                 \
            int64_t *h = a->idx + o * k * in + i;                                          \
            T *v = (T *)a->vals + o * k * in + i;                                          \
            int64_t size = 0;                                                              \
            for (int64_t j = 0; j < n; j++) {                                              \
                if (size < k) {                                                            \
                    int64_t c = size++;                                                    \
                    h[c * in] = j;                                                         \
                    while (c > 0) {                                                        \
                        int64_t pa = (c - 1) / 2;                                          \
                        if (!topk_better_##SUF(x, in, lg, h[pa * in], h[c * in]))          \
                            break;                                                         \
                        int64_t t = h[pa * in];                                            \
                        h[pa * in] = h[c * in];                                            \
                        h[c * in] = t;                                                     \
                        c = pa;                                                            \
                    }                                                                      \
                } else if (k > 0 && topk_better_##SUF(x, in, lg, j, h[0])) {               \
                    h[0] = j;                                                              \
                    topk_sift_##SUF(x, in, lg, h, in, size, 0);                            \
                }                                                                          \
            }                                                                              \
            for (int64_t s = size - 1; s > 0; s--) {                                       \
                int64_t t = h[s * in];                                                     \
                h[s * in] = h[0];                                                          \
                h[0] = t;                                                                  \
                topk_sift_##SUF(x, in, lg, h, in, s, 0);                                   \
            }                                                                              \
            for (int64_t s = 0; s < size; s++)                                             \
                v[s * in] = x[h[s * in] * in];                                             \
        }                                                                                  \
    }

#define LD_SELF(v) (v)
#define LD_F16(v) cge_f16_to_f32(v)
#define LD_BF16(v) cge_bf16_to_f32(v)
TOPK_KERNEL(f32, float, float, LD_SELF)
TOPK_KERNEL(f64, double, double, LD_SELF)
TOPK_KERNEL(f16, uint16_t, float, LD_F16)
TOPK_KERNEL(bf16, uint16_t, float, LD_BF16)
TOPK_KERNEL(i8, int8_t, int8_t, LD_SELF)
TOPK_KERNEL(i16, int16_t, int16_t, LD_SELF)
TOPK_KERNEL(i32, int32_t, int32_t, LD_SELF)
TOPK_KERNEL(i64, int64_t, int64_t, LD_SELF)
TOPK_KERNEL(u8, uint8_t, uint8_t, LD_SELF)
TOPK_KERNEL(u16, uint16_t, uint16_t, LD_SELF)
TOPK_KERNEL(u32, uint32_t, uint32_t, LD_SELF)
TOPK_KERNEL(u64, uint64_t, uint64_t, LD_SELF)

static cge_kernel_fn topk_fn(cge_dtype t)
{
    switch (t) {
    case CGE_F32: return topk_fn_f32;
    case CGE_F64: return topk_fn_f64;
    case CGE_F16: return topk_fn_f16;
    case CGE_BF16: return topk_fn_bf16;
    case CGE_I8: return topk_fn_i8;
    case CGE_I16: return topk_fn_i16;
    case CGE_I32: return topk_fn_i32;
    case CGE_I64: return topk_fn_i64;
    case CGE_U8: return topk_fn_u8;
    case CGE_U16: return topk_fn_u16;
    case CGE_U32: return topk_fn_u32;
    case CGE_U64: return topk_fn_u64;
    default: return NULL;
    }
}

static cge_status topk_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *x = &ctx->inputs[0];
    cge_tensor *vals = &ctx->outputs[0], *idx = &ctx->outputs[1];
    int32_t r = x->shape.rank, axis;
    cge_kernel_fn fn = topk_fn(x->dtype);
    if (!fn || vals->dtype != x->dtype || idx->dtype != CGE_I64)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "unsupported dtype %s",
                                cge_dtype_name(x->dtype));
    if (!cge_axis_normalize(cge_attrs_get_int(ctx->attrs, "axis", -1), r, false, &axis) ||
        !cge_shape_equal(&vals->shape, &idx->shape) || vals->shape.rank != r)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "outputs do not match the input");
    /* K comes from the outputs' shape (meta had its value): the kernel never
     * needs to read the K tensor. */
    topk_args a = {.x = x->data, .vals = vals->data, .idx = idx->data,
                   .n = x->shape.dims[axis], .k = vals->shape.dims[axis],
                   .inner = cge__dims_prod(x->shape.dims, axis + 1, r),
                   .largest = cge_attrs_get_int(ctx->attrs, "largest", 1) != 0};
    for (int32_t d = 0; d < r; d++)
        if (d != axis && vals->shape.dims[d] != x->shape.dims[d])
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "outputs do not match the input");
    if (a.k > a.n)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "K = %lld exceeds the axis size %lld",
                                (long long)a.k, (long long)a.n);
    a.lines = cge__dims_prod(x->shape.dims, 0, axis) * a.inner;
    if (a.lines == 0 || a.k == 0)
        return CGE_OK;
    if (!x->data || !vals->data || !idx->data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    int64_t min_lines = a.n >= CGE__MIN_BLOCK ? 1 : CGE__MIN_BLOCK / a.n;
    return cge_launch(stream, fn, cge__blocks_for(a.lines, min_lines, ctx->num_threads), &a,
                      sizeof a);
}

/* ---- CumSum -------------------------------------------------------------------------- */

static cge_status cumsum_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *x = &ctx->inputs[0], *ax = &ctx->inputs[1];
    if (x->shape.rank < 1)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "input must have rank >= 1");
    int64_t an = cge_shape_numel(&ax->shape);
    if (ax->shape.rank > 1 || (an >= 0 && an != 1))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "axis must hold exactly one value");
    const void *v = cge__meta_input_value(ctx, 1);
    int32_t axis;
    if (v && !cge_axis_normalize(cge__load_as_i64(ax->dtype, v, 0), x->shape.rank, false, &axis))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "axis %lld is out of range for rank %d",
                              (long long)cge__load_as_i64(ax->dtype, v, 0), (int)x->shape.rank);
    ctx->outputs[0].dtype = x->dtype;
    ctx->outputs[0].shape = x->shape;
    return CGE_OK;
}

typedef struct cumsum_args {
    const void *x;
    void *y;
    const void *axis;
    cge_dtype axis_dtype;
    cge_shape shape;
    bool exclusive, reverse;
} cumsum_args;

/* The axis is read here, when the kernel runs. Work units are (outer row,
 * chunk of inner columns): a chunk's running sums walk the axis together. An
 * axis out of range (not known to meta) zeroes the output. */
#define CUMSUM_KERNEL(SUF, T, A, LDA, STA)                                                 \
    static void cumsum_fn_##SUF(int64_t b, int64_t nb, void *args)                         \
    {                                                                                      \
        const cumsum_args *p = args;                                                       \
        const T *x = p->x;                                                                 \
        T *y = p->y;                                                                       \
        int32_t r = p->shape.rank, axis;                                                   \
        int64_t numel = cge_shape_numel(&p->shape), lo, hi;                                \
        if (!cge_axis_normalize(cge__load_as_i64(p->axis_dtype, p->axis, 0), r, false,     \
                                &axis)) {                                                  \
            cge__block_range(numel, b, nb, &lo, &hi);                                       \
            memset(y + lo, 0, (size_t)(hi - lo) * sizeof(T));                              \
            return;                                                                        \
        }                                                                                  \
        int64_t n = p->shape.dims[axis];                                                   \
        int64_t inner = cge__dims_prod(p->shape.dims, axis + 1, r);                        \
        int64_t chunks = (inner + CUM_CHUNK - 1) / CUM_CHUNK;                              \
        int64_t units = cge__dims_prod(p->shape.dims, 0, axis) * chunks;                   \
        cge__block_range(units, b, nb, &lo, &hi);                                           \
        for (int64_t u = lo; u < hi; u++) {                                                \
            int64_t o = u / chunks, i0 = (u % chunks) * CUM_CHUNK;                         \
            int64_t w = inner - i0 < CUM_CHUNK ? inner - i0 : CUM_CHUNK;                   \
            A acc[CUM_CHUNK];                                                              \
            for (int64_t c = 0; c < w; c++)                                                \
                acc[c] = 0;                                                                \
            for (int64_t s = 0; s < n; s++) {                                              \
                int64_t j = p->reverse ? n - 1 - s : s;                                    \
                const T *xs = x + (o * n + j) * inner + i0;                                \
                T *ys = y + (o * n + j) * inner + i0;                                      \
                if (p->exclusive)                                                          \
                    for (int64_t c = 0; c < w; c++) {                                      \
                        ys[c] = STA(acc[c]);                                               \
                        acc[c] += LDA(xs[c]);                                              \
                    }                                                                      \
                else                                                                       \
                    for (int64_t c = 0; c < w; c++) {                                      \
                        acc[c] += LDA(xs[c]);                                              \
                        ys[c] = STA(acc[c]);                                               \
                    }                                                                      \
            }                                                                              \
        }                                                                                  \
    }

#define ST_F16(v) cge_f32_to_f16(v)
#define ST_BF16(v) cge_f32_to_bf16(v)
#define LD_U64(v) ((uint64_t)(v))
#define LD_SU(v) ((uint64_t)(int64_t)(v))
CUMSUM_KERNEL(f32, float, float, LD_SELF, LD_SELF)
CUMSUM_KERNEL(f64, double, double, LD_SELF, LD_SELF)
CUMSUM_KERNEL(f16, uint16_t, float, LD_F16, ST_F16)
CUMSUM_KERNEL(bf16, uint16_t, float, LD_BF16, ST_BF16)
/* Integer sums wrap (unsigned arithmetic, never signed overflow). */
CUMSUM_KERNEL(i32, int32_t, uint64_t, LD_SU, (int32_t))
CUMSUM_KERNEL(i64, int64_t, uint64_t, LD_SU, (int64_t))
CUMSUM_KERNEL(u32, uint32_t, uint64_t, LD_U64, (uint32_t))
CUMSUM_KERNEL(u64, uint64_t, uint64_t, LD_U64, (uint64_t))

static cge_kernel_fn cumsum_fn(cge_dtype t)
{
    switch (t) {
    case CGE_F32: return cumsum_fn_f32;
    case CGE_F64: return cumsum_fn_f64;
    case CGE_F16: return cumsum_fn_f16;
    case CGE_BF16: return cumsum_fn_bf16;
    case CGE_I32: return cumsum_fn_i32;
    case CGE_I64: return cumsum_fn_i64;
    case CGE_U32: return cumsum_fn_u32;
    case CGE_U64: return cumsum_fn_u64;
    default: return NULL;
    }
}

static cge_status cumsum_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *x = &ctx->inputs[0], *ax = &ctx->inputs[1];
    cge_tensor *y = &ctx->outputs[0];
    cge_kernel_fn fn = cumsum_fn(x->dtype);
    if (!fn || y->dtype != x->dtype || !cge_shape_equal(&y->shape, &x->shape))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output must match the input (%s)",
                                cge_dtype_name(x->dtype));
    if ((ax->dtype != CGE_I32 && ax->dtype != CGE_I64) || cge_shape_numel(&ax->shape) != 1)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "axis must be one int32 or int64 value");
    int64_t numel = cge_shape_numel(&x->shape);
    if (numel == 0)
        return CGE_OK;
    if (!x->data || !y->data || !ax->data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    cumsum_args a = {.x = x->data, .y = y->data, .axis = ax->data, .axis_dtype = ax->dtype,
                     .shape = x->shape,
                     .exclusive = cge_attrs_get_int(ctx->attrs, "exclusive", 0) != 0,
                     .reverse = cge_attrs_get_int(ctx->attrs, "reverse", 0) != 0};
    /* Blocks are sized for the whole tensor; units are split inside. */
    return cge_launch(stream, fn, cge__blocks_for(numel, CGE__MIN_BLOCK, ctx->num_threads), &a,
                      sizeof a);
}

/* ---- Unique --------------------------------------------------------------------------- */

static void *k_output(const cge_kernel_ctx *ctx, int32_t i)
{
    return i < ctx->num_outputs ? ctx->outputs[i].data : NULL;
}

typedef struct uq_ctx {
    const void *x;
    cge_dtype dt;
    int64_t outer, len, inner;      /* x viewed as [outer, len, inner]; rows along len */
} uq_ctx;

static int uq_cmp_elem(cge_dtype t, const void *p, int64_t i, int64_t j)
{
    if (cge_dtype_is_float(t)) {
        double a = cge__load_as_double(t, p, i), b = cge__load_as_double(t, p, j);
        bool na = a != a, nb = b != b;
        if (na || nb)
            return na == nb ? 0 : na ? 1 : -1; /* NaN sorts last, NaNs are equal */
        return a < b ? -1 : a > b;
    }
    if (t == CGE_U64) {
        uint64_t a = ((const uint64_t *)p)[i], b = ((const uint64_t *)p)[j];
        return a < b ? -1 : a > b;
    }
    int64_t a = cge__load_as_i64(t, p, i), b = cge__load_as_i64(t, p, j);
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
    const void *v = cge__meta_input_value(ctx, 0);
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
    cge__kernel_label(ctx, a.node, sizeof a.node);
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

/* ---- definitions ---------------------------------------------------------------------- */

#define CUM_DT                                                                             \
    (CGE_DT(CGE_F32) | CGE_DT(CGE_F64) | CGE_DT(CGE_F16) | CGE_DT(CGE_BF16) |              \
     CGE_DT(CGE_I32) | CGE_DT(CGE_I64) | CGE_DT(CGE_U32) | CGE_DT(CGE_U64))
#define TOPK_DT (CGE_DT_NUMERIC)

static const cge_kernel_def k_topk[] = CGE__KDEF(TOPK_DT, topk_launch, NULL, -1);
static const cge_kernel_def k_cumsum[] = CGE__KDEF(CUM_DT, cumsum_launch, NULL, -1);
static const cge_kernel_def k_unique[] = CGE__KDEF(CGE_DT_ALL, unique_launch, unique_workspace, -1);

static const cge_arg_def topk_in[] = {
    {"X", 0, TOPK_DT, "tensor of rank >= 1"},
    {"K", 0, CGE_DT(CGE_I64), "number of elements to keep (one value)"},
};
static const cge_arg_def topk_out[] = {
    {"Values", 0, TOPK_DT, "the k largest (smallest) along axis"},
    {"Indices", 0, CGE_DT(CGE_I64), "their positions along axis"},
};
static const cge_arg_def cumsum_in[] = {
    {"x", 0, CUM_DT, "tensor of rank >= 1"},
    {"axis", 0, CGE__IDX_DT, "axis to sum along (one value)"},
};
static const cge_arg_def cumsum_out[] = {{"y", 0, CUM_DT, "running sums"}};
static const cge_arg_def unique_in[] = {{"X", 0, CGE_DT_ALL, "tensor"}};
static const cge_arg_def unique_out[] = {
    {"Y", 0, CGE_DT_ALL, "unique values (or slices along axis)"},
    {"indices", CGE_ARG_OPTIONAL, CGE_DT(CGE_I64), "first occurrence of each"},
    {"inverse_indices", CGE_ARG_OPTIONAL, CGE_DT(CGE_I64), "position in Y of each input"},
    {"counts", CGE_ARG_OPTIONAL, CGE_DT(CGE_I64), "occurrences of each"},
};

static const cge_attr_def topk_attrs[] = {
    {"axis", CGE_ATTR_INT, false, -1, 0.0f, NULL, "axis to select along"},
    {"largest", CGE_ATTR_INT, false, 1, 0.0f, NULL, "1: largest, 0: smallest"},
    {"sorted", CGE_ATTR_INT, false, 1, 0.0f, NULL, "results are always sorted"}};
static const cge_attr_def cumsum_attrs[] = {
    {"exclusive", CGE_ATTR_INT, false, 0, 0.0f, NULL, "1: exclude the element itself"},
    {"reverse", CGE_ATTR_INT, false, 0, 0.0f, NULL, "1: sum from the end"}};
static const cge_attr_def unique_attrs[] = {
    {"axis", CGE_ATTR_INT, false, 0, 0.0f, NULL, "slices along axis (absent: flattened)"},
    {"sorted", CGE_ATTR_INT, false, 1, 0.0f, NULL, "1: ascending, 0: order of appearance"},
};

static const cge_op_def sort_scan_ops[] = {
    CGE__OPDEF("TopK", 11, topk_in, 2, topk_out, 2, topk_attrs, 3, topk_infer, k_topk,
               "The K largest or smallest elements along axis, sorted; ties by lower index."),
    CGE__OPDEF("CumSum", 14, cumsum_in, 2, cumsum_out, 1, cumsum_attrs, 2, cumsum_infer,
               k_cumsum, "Cumulative sum along axis (exclusive and reverse variants)."),
    CGE__OPDEF("Unique", 11, unique_in, 1, unique_out, 4, unique_attrs, CGE__NATTR(unique_attrs),
               unique_infer, k_unique,
               "Unique values or slices, first indices, inverse indices and counts."),
};

const cge_op_def *cge__ops_sort_scan(int32_t *count)
{
    *count = (int32_t)(sizeof sort_scan_ops / sizeof sort_scan_ops[0]);
    return sort_scan_ops;
}
