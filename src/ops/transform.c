/* Data-movement operators: Transpose (cache-blocked tiles), Concat and Split
 * (one segment-copy kernel), Slice and Gather. Any dtype: elements move by
 * size (1, 2, 4 or 8 bytes), never by value. */
#include <stdio.h>
#include <string.h>

#include "base/cpu_isa.h"
#include "ops/builtin.h"
#include "ops/kernel_util.h"
#include "ops/transform_nhwc.h"

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

/* Work below this many bytes (or elements, for strided loops) stays in one block. */
#define MIN_BLOCK_BYTES ((int64_t)1 << 16)
#define MIN_BLOCK_ELEMS ((int64_t)1 << 14)
/* Transpose tile edge in elements: 32x32 tiles of up to 8 bytes fit in L1 twice. */
#define TILE 32

/* ---- meta helpers ------------------------------------------------------- */

static cge_shape all_dynamic(int32_t rank)
{
    cge_shape s;
    memset(&s, 0, sizeof s);
    s.rank = rank;
    for (int32_t i = 0; i < rank; i++)
        s.dims[i] = CGE_DIM_DYNAMIC;
    return s;
}

static int64_t dims_product(const int64_t *dims, int32_t lo, int32_t hi)
{
    int64_t p = 1;
    for (int32_t i = lo; i < hi; i++)
        p *= dims[i];
    return p;
}

/* ---- strided copy: dense output, input read through element strides ----- */

/* One output row of n elements; the input advances `stride` elements per
 * element (negative for reversed slices, 0 for broadcast). */
static void strided_row(char *dst, const char *src, int64_t n, int64_t stride, int32_t esize)
{
    if (stride == 1) {
        memcpy(dst, src, (size_t)(n * esize));
        return;
    }
#define ROW(T)                                                                                 \
    do {                                                                                       \
        T *d = (T *)dst;                                                                       \
        const T *s = (const T *)src;                                                           \
        for (int64_t i = 0; i < n; i++)                                                        \
            d[i] = s[i * stride];                                                              \
    } while (0)
    switch (esize) {
    case 1: ROW(uint8_t); break;
    case 2: ROW(uint16_t); break;
    case 4: ROW(uint32_t); break;
    case 8: ROW(uint64_t); break;
    default:
        for (int64_t i = 0; i < n; i++)
            memcpy(dst + i * esize, src + i * stride * esize, (size_t)esize);
        break;
    }
#undef ROW
}

typedef struct strided_args {
    const char *src;                /* the input element at output index 0 */
    char *dst;
    int32_t rank;
    int32_t esize;
    int64_t dims[CGE_MAX_RANK];     /* output dims */
    int64_t stride[CGE_MAX_RANK];   /* input strides, in elements */
    int64_t rows;                   /* product of all dims but the last */
} strided_args;

/* Rows [lo, hi) of a strided copy; an odometer walks the input offset. */
static void strided_rows(const strided_args *a, int64_t lo, int64_t hi)
{
    if (lo >= hi)
        return;
    int32_t last = a->rank - 1;
    int64_t len = a->dims[last], idx[CGE_MAX_RANK] = {0}, off = 0, rem = lo;
    for (int32_t d = last - 1; d >= 0; d--) {
        idx[d] = rem % a->dims[d];
        rem /= a->dims[d];
        off += idx[d] * a->stride[d];
    }
    int64_t row_bytes = len * a->esize;
    for (int64_t row = lo; row < hi; row++) {
        strided_row(a->dst + row * row_bytes, a->src + off * a->esize, len, a->stride[last],
                    a->esize);
        for (int32_t d = last - 1; d >= 0; d--) {
            off += a->stride[d];
            if (++idx[d] < a->dims[d])
                break;
            off -= idx[d] * a->stride[d];
            idx[d] = 0;
        }
    }
}

static void strided_block(int64_t b, int64_t nb, void *p)
{
    const strided_args *a = p;
    int64_t lo, hi;
    cge__block_range(a->rows, b, nb, &lo, &hi);
    strided_rows(a, lo, hi);
}

/* Drops size-1 dims and merges neighbours the input walks contiguously, so
 * inner loops run as long as possible. Leaves at least one dim. */
static void collapse(int32_t *rank, int64_t *dims, int64_t *stride)
{
    int32_t r = 0;
    for (int32_t i = 0; i < *rank; i++) {
        if (dims[i] == 1)
            continue;
        if (r > 0 && stride[r - 1] == stride[i] * dims[i]) {
            dims[r - 1] *= dims[i];
            stride[r - 1] = stride[i];
        } else {
            dims[r] = dims[i];
            stride[r] = stride[i];
            r++;
        }
    }
    if (r == 0) {
        dims[0] = 1;
        stride[0] = 1;
        r = 1;
    }
    *rank = r;
}

static int64_t min_rows_for(int64_t row_len)
{
    return row_len > 0 ? (MIN_BLOCK_ELEMS + row_len - 1) / row_len : 1;
}

/* ---- Transpose ---------------------------------------------------------- */

/* Reads perm (default: reversed dims) and checks it is a permutation of rank r. */
static bool get_perm(const cge_attrs *attrs, int32_t r, int32_t perm[CGE_MAX_RANK], char *why,
                     size_t why_size)
{
    const int64_t *p = NULL;
    int64_t n = cge_attrs_get_ints(attrs, "perm", &p);
    if (n < 0) {
        for (int32_t i = 0; i < r; i++)
            perm[i] = r - 1 - i;
        return true;
    }
    if (n != r) {
        snprintf(why, why_size, "perm has %lld entries for an input of rank %d", (long long)n, (int)r);
        return false;
    }
    bool seen[CGE_MAX_RANK] = {false};
    for (int32_t i = 0; i < r; i++) {
        if (p[i] < 0 || p[i] >= r || seen[p[i]]) {
            snprintf(why, why_size, "perm is not a permutation of 0..%d (entry %d is %lld)", (int)r - 1,
                     (int)i, (long long)p[i]);
            return false;
        }
        seen[p[i]] = true;
        perm[i] = (int32_t)p[i];
    }
    return true;
}

cge_status cge__transpose_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *in = &ctx->inputs[0];
    int32_t perm[CGE_MAX_RANK];
    char why[128];
    if (!get_perm(ctx->attrs, in->shape.rank, perm, why, sizeof why))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "%s", why);
    cge_shape out = in->shape;
    for (int32_t i = 0; i < out.rank; i++)
        out.dims[i] = in->shape.dims[perm[i]];
    ctx->outputs[0].dtype = in->dtype;
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

/* Tiled transpose: output dim `k` is walked by the input with stride 1 and the
 * output's last dim with stride S, so each TILE x TILE tile reads and writes
 * whole cache lines. The other dims are batch dims. */
typedef struct tile_args {
    const char *src;
    char *dst;
    int32_t esize;
    int32_t nb;                       /* batch dims */
    int64_t bdims[CGE_MAX_RANK];
    int64_t bin[CGE_MAX_RANK];        /* input strides of batch dims */
    int64_t bout[CGE_MAX_RANK];       /* output strides of batch dims */
    int64_t I, J;                     /* sizes of output dims k and last */
    int64_t S;                        /* input stride of the output's last dim */
    int64_t OS;                       /* output stride of dim k */
    int64_t itiles, jtiles, units;
} tile_args;

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TILE_AVX2 1

/* 8x8 blocks of 4-byte elements through AVX registers (32-byte loads and
 * stores); the edges of the tile, under 8 wide, go to tile4's 4x4 and
 * element loops. Bits are moved, never computed on. */
__attribute__((target("avx2"))) static void tile4_avx2(const uint32_t *s, uint32_t *d, int64_t i0,
                                                      int64_t i1, int64_t j0, int64_t j1,
                                                      int64_t S, int64_t OS, int64_t *i_done,
                                                      int64_t *j_done)
{
    int64_t i = i0, jend = j0 + (j1 - j0) / 8 * 8;
    for (; i + 8 <= i1; i += 8)
        for (int64_t j = j0; j < jend; j += 8) {
            __m256 r[8], t[8];
            for (int k = 0; k < 8; k++)
                r[k] = _mm256_loadu_ps((const float *)(s + i + (j + k) * S));
            for (int k = 0; k < 8; k += 2) {
                t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
                t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
            }
            for (int k = 0; k < 8; k += 4) {
                r[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
                r[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xEE);
                r[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
                r[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
            }
            for (int k = 0; k < 4; k++) {
                t[k] = _mm256_permute2f128_ps(r[k], r[k + 4], 0x20);
                t[k + 4] = _mm256_permute2f128_ps(r[k], r[k + 4], 0x31);
            }
            for (int k = 0; k < 8; k++)
                _mm256_storeu_ps((float *)(d + (i + k) * OS + j), t[k]);
        }
    *i_done = i;
    *j_done = jend;
}
#endif

/* One tile of 4-byte elements: 8x8 AVX2 blocks where the CPU has AVX2, then
 * 4x4 register transposes where SSE2 is there (every x86-64), so both the
 * loads and the stores are 16- or 32-byte runs. */
static void tile4(const uint32_t *s, uint32_t *d, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                  int64_t S, int64_t OS)
{
    int64_t i = i0;
#ifdef TILE_AVX2
    if (j1 - j0 >= 8 && i1 - i0 >= 8 && cge__cpu_has(CGE_CPU_AVX2)) {
        int64_t ie, je;
        tile4_avx2(s, d, i0, i1, j0, j1, S, OS, &ie, &je);
        /* the right edge of the rows done (columns [je, j1)), then the rows left */
        for (int64_t r = i0; r < ie; r++)
            for (int64_t j = je; j < j1; j++)
                d[r * OS + j] = s[r + j * S];
        i = ie;
    }
#endif
#if defined(__SSE2__)
    for (; i + 4 <= i1; i += 4) {
        int64_t j = j0;
        for (; j + 4 <= j1; j += 4) {
            __m128 r0 = _mm_loadu_ps((const float *)(s + i + (j + 0) * S));
            __m128 r1 = _mm_loadu_ps((const float *)(s + i + (j + 1) * S));
            __m128 r2 = _mm_loadu_ps((const float *)(s + i + (j + 2) * S));
            __m128 r3 = _mm_loadu_ps((const float *)(s + i + (j + 3) * S));
            _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
            _mm_storeu_ps((float *)(d + (i + 0) * OS + j), r0);
            _mm_storeu_ps((float *)(d + (i + 1) * OS + j), r1);
            _mm_storeu_ps((float *)(d + (i + 2) * OS + j), r2);
            _mm_storeu_ps((float *)(d + (i + 3) * OS + j), r3);
        }
        for (; j < j1; j++)
            for (int64_t k = i; k < i + 4; k++)
                d[k * OS + j] = s[k + j * S];
    }
#endif
    for (; i < i1; i++)
        for (int64_t j = j0; j < j1; j++)
            d[i * OS + j] = s[i + j * S];
}

static void tile_block(int64_t b, int64_t nb, void *p)
{
    const tile_args *a = p;
    int64_t lo, hi;
    cge__block_range(a->units, b, nb, &lo, &hi);
    for (int64_t u = lo; u < hi; u++) {
        int64_t jt = u % a->jtiles, it = (u / a->jtiles) % a->itiles;
        int64_t rem = u / a->jtiles / a->itiles, ioff = 0, ooff = 0;
        for (int32_t d = a->nb - 1; d >= 0; d--) {
            int64_t x = rem % a->bdims[d];
            rem /= a->bdims[d];
            ioff += x * a->bin[d];
            ooff += x * a->bout[d];
        }
        int64_t i0 = it * TILE, i1 = i0 + TILE < a->I ? i0 + TILE : a->I;
        int64_t j0 = jt * TILE, j1 = j0 + TILE < a->J ? j0 + TILE : a->J;
        int64_t S = a->S, OS = a->OS;
#define TILE_COPY(T)                                                                           \
    do {                                                                                       \
        const T *s = (const T *)a->src + ioff;                                                 \
        T *d = (T *)a->dst + ooff;                                                             \
        for (int64_t i = i0; i < i1; i++)                                                      \
            for (int64_t j = j0; j < j1; j++)                                                  \
                d[i * OS + j] = s[i + j * S];                                                  \
    } while (0)
        switch (a->esize) {
        case 1: TILE_COPY(uint8_t); break;
        case 2: TILE_COPY(uint16_t); break;
        case 4: tile4((const uint32_t *)a->src + ioff, (uint32_t *)a->dst + ooff, i0, i1, j0, j1, S, OS); break;
        default: TILE_COPY(uint64_t); break;
        }
#undef TILE_COPY
    }
}

static cge_status transpose_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *in = &ctx->inputs[0];
    cge_tensor *out = &ctx->outputs[0];
    int32_t r = in->shape.rank, perm[CGE_MAX_RANK];
    char why[128];
    if (!get_perm(ctx->attrs, r, perm, why, sizeof why))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "%s", why);
    if (out->dtype != in->dtype || out->shape.rank != r || !cge_shape_is_static(&in->shape))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output does not match the transposed input");
    for (int32_t i = 0; i < r; i++)
        if (out->shape.dims[i] != in->shape.dims[perm[i]])
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output does not match the transposed input");
    int64_t numel = cge_shape_numel(&out->shape);
    if (numel == 0)
        return CGE_OK;
    if (!in->data || !out->data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    int32_t esize = (int32_t)cge_dtype_size(in->dtype);
    int64_t in_strides[CGE_MAX_RANK];
    cge_shape_strides(&in->shape, in_strides);
    int32_t rank = r;
    int64_t dims[CGE_MAX_RANK], stride[CGE_MAX_RANK];
    for (int32_t i = 0; i < r; i++) {
        dims[i] = out->shape.dims[i];
        stride[i] = in_strides[perm[i]];
    }
    collapse(&rank, dims, stride);
    if (stride[rank - 1] == 1) {
        /* The innermost dim stays innermost: rows are plain copies. */
        strided_args a;
        memset(&a, 0, sizeof a);
        a.src = in->data;
        a.dst = out->data;
        a.rank = rank;
        a.esize = esize;
        memcpy(a.dims, dims, sizeof dims);
        memcpy(a.stride, stride, sizeof stride);
        a.rows = numel / dims[rank - 1];
        return cge_launch(stream, strided_block,
                          cge__blocks_for(a.rows, min_rows_for(dims[rank - 1]), ctx->num_threads), &a,
                          sizeof a);
    }
    /* After collapsing, the input's innermost dim is some output dim k < last. */
    int32_t k = -1;
    for (int32_t i = 0; i < rank - 1; i++)
        if (stride[i] == 1)
            k = i;
    if (k < 0)
        return cge_kernel_error(ctx, CGE_ERR_INTERNAL, "no unit-stride dim after collapsing");
    int64_t out_strides[CGE_MAX_RANK], acc = 1;
    for (int32_t i = rank - 1; i >= 0; i--) {
        out_strides[i] = acc;
        acc *= dims[i];
    }
    tile_args a;
    memset(&a, 0, sizeof a);
    a.src = in->data;
    a.dst = out->data;
    a.esize = esize;
    for (int32_t i = 0; i < rank - 1; i++) {
        if (i == k)
            continue;
        a.bdims[a.nb] = dims[i];
        a.bin[a.nb] = stride[i];
        a.bout[a.nb] = out_strides[i];
        a.nb++;
    }
    a.I = dims[k];
    a.J = dims[rank - 1];
    a.S = stride[rank - 1];
    a.OS = out_strides[k];
    a.itiles = (a.I + TILE - 1) / TILE;
    a.jtiles = (a.J + TILE - 1) / TILE;
    a.units = dims_product(a.bdims, 0, a.nb) * a.itiles * a.jtiles;
    return cge_launch(stream, tile_block,
                      cge__blocks_for(a.units, MIN_BLOCK_ELEMS / (TILE * TILE), ctx->num_threads), &a,
                      sizeof a);
}

/* ---- segment copy: Concat (parts -> whole) and Split (whole -> parts) ---- */

/* Seen as bytes, the whole tensor is `outer` rows; each row is the parts'
 * chunks side by side. Blocks take equal byte ranges over a group of parts,
 * so one huge part or many small rows balance alike. */
#define SEG_MAX 128

typedef struct seg_part {
    char *ptr;
    int64_t chunk;   /* bytes of this part per row */
    int64_t col;     /* byte offset of the chunk in a row of the whole */
} seg_part;

typedef struct seg_args {
    char *whole;
    int64_t row_bytes;    /* of the whole */
    int64_t outer;
    int64_t group_bytes;  /* sum of this group's chunks */
    int32_t n;
    int32_t to_whole;     /* 1: Concat, 0: Split */
    seg_part parts[SEG_MAX];
} seg_args;
_Static_assert(sizeof(seg_args) <= CGE_LAUNCH_MAX_ARGS, "seg_args must fit in launch arguments");

static void seg_block(int64_t b, int64_t nb, void *p)
{
    const seg_args *a = p;
    int64_t lo, hi;
    cge__block_range(a->outer * a->group_bytes, b, nb, &lo, &hi);
    if (lo >= hi)
        return;
    int64_t row = lo / a->group_bytes, pos = lo % a->group_bytes;
    int32_t k = 0;
    while (pos >= a->parts[k].chunk) {
        pos -= a->parts[k].chunk;
        k++;
    }
    int64_t left = hi - lo;
    while (left > 0) {
        const seg_part *pt = &a->parts[k];
        int64_t n = pt->chunk - pos < left ? pt->chunk - pos : left;
        char *w = a->whole + row * a->row_bytes + pt->col + pos;
        char *q = pt->ptr + row * pt->chunk + pos;
        if (a->to_whole)
            memcpy(w, q, (size_t)n);
        else
            memcpy(q, w, (size_t)n);
        left -= n;
        pos = 0;
        if (++k == a->n) {
            k = 0;
            row++;
        }
    }
}

/* ---- Concat ------------------------------------------------------------- */

cge_status cge__concat_infer(cge_infer_ctx *ctx)
{
    if (ctx->num_inputs < 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "needs at least one input");
    const cge_tensor_desc *first = &ctx->inputs[0];
    int32_t r = first->shape.rank, axis;
    if (r < 1)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "inputs must have rank >= 1, input 0 is a scalar");
    int64_t ax = cge_attrs_get_int(ctx->attrs, "axis", 0);
    if (!cge_axis_normalize(ax, r, false, &axis))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "axis %lld is out of range for rank %d",
                              (long long)ax, (int)r);
    cge_shape out = first->shape;
    for (int32_t i = 1; i < ctx->num_inputs; i++) {
        const cge_tensor_desc *t = &ctx->inputs[i];
        char a[CGE_SHAPE_STR_MAX], b[CGE_SHAPE_STR_MAX];
        if (t->dtype != first->dtype)
            return cge_meta_error(ctx, CGE_ERR_DTYPE, "input %d is %s, input 0 is %s", (int)i,
                                  cge_dtype_name(t->dtype), cge_dtype_name(first->dtype));
        if (t->shape.rank != r)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "input %d is %s, input 0 is %s: ranks differ",
                                  (int)i, cge_shape_str(&t->shape, a, sizeof a),
                                  cge_shape_str(&first->shape, b, sizeof b));
        for (int32_t d = 0; d < r; d++) {
            int64_t x = t->shape.dims[d];
            if (d == axis) {
                out.dims[d] = (out.dims[d] < 0 || x < 0) ? CGE_DIM_DYNAMIC : out.dims[d] + x;
            } else if (out.dims[d] < 0) {
                out.dims[d] = cge_dim_merge(out.dims[d], x);   /* two symbols: anonymous */
            } else if (x >= 0 && x != out.dims[d]) {
                return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                      "input %d is %s, input 0 is %s: dim %d differs off axis %d",
                                      (int)i, cge_shape_str(&t->shape, a, sizeof a),
                                      cge_shape_str(&first->shape, b, sizeof b), (int)d, (int)axis);
            }
        }
    }
    ctx->outputs[0].dtype = first->dtype;
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

/* Shared by Concat and Split: checks every part against `whole` along the
 * axis first (so that nothing is launched for a bad node), then launches the
 * copies in groups of SEG_MAX parts. Parts with no bytes are skipped. No heap:
 * plan runs allocate nothing. */
static cge_status seg_run_axis(const cge_kernel_ctx *ctx, cge_stream *stream,
                               const cge_tensor *whole, const cge_tensor *parts, int32_t n,
                               bool to_whole, int32_t axis);

static cge_status seg_run(const cge_kernel_ctx *ctx, cge_stream *stream, const cge_tensor *whole,
                          const cge_tensor *parts, int32_t n, bool to_whole)
{
    int32_t r = whole->shape.rank, axis;
    if (r < 1 || !cge_shape_is_static(&whole->shape) ||
        !cge_axis_normalize(cge_attrs_get_int(ctx->attrs, "axis", 0), r, false, &axis))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "bad axis or shape");
    return seg_run_axis(ctx, stream, whole, parts, n, to_whole, axis);
}

/* The same over NHWC bytes: shapes and the axis are moved to the order the
 * memory has (N, spatial..., C), where the copy is the plain one. */
static void to_channels_last(const cge_tensor *t, cge_tensor *out)
{
    *out = *t;
    int32_t r = t->shape.rank;
    for (int32_t d = 2; d < r; d++)
        out->shape.dims[d - 1] = t->shape.dims[d];
    out->shape.dims[r - 1] = t->shape.dims[1];
}

static cge_status seg_run_nhwc(const cge_kernel_ctx *ctx, cge_stream *stream,
                               const cge_tensor *whole, const cge_tensor *parts, int32_t n,
                               bool to_whole)
{
    int32_t r = whole->shape.rank, axis;
    if (r < 3 || n > CGE_CHANNELS_LAST_MAX_PARTS || !cge_shape_is_static(&whole->shape) ||
        !cge_axis_normalize(cge_attrs_get_int(ctx->attrs, "axis", 0), r, false, &axis))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "bad axis or shape (rank 3 to 5, NHWC)");
    cge_tensor w, p[CGE_CHANNELS_LAST_MAX_PARTS];
    to_channels_last(whole, &w);
    for (int32_t i = 0; i < n; i++) {
        if (parts[i].shape.rank != r)
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "part %d has rank %d, the whole %d",
                                    (int)i, (int)parts[i].shape.rank, (int)r);
        to_channels_last(&parts[i], &p[i]);
    }
    int32_t m = axis == 0 ? 0 : axis == 1 ? r - 1 : axis - 1;
    return seg_run_axis(ctx, stream, &w, p, n, to_whole, m);
}

cge_status cge__layout_view_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_inputs != 1 || ctx->num_outputs != 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "needs one input and one output");
    const cge_tensor *in = &ctx->inputs[0], *out = &ctx->outputs[0];
    size_t n = cge_tensor_nbytes(in->dtype, &in->shape);
    if (out->dtype != in->dtype || cge_tensor_nbytes(out->dtype, &out->shape) != n)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output and input sizes differ");
    if (!n || in->data == out->data)
        return CGE_OK; /* the plan made it a view */
    if (!in->data || !out->data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing buffer");
    return cge_memcpy_async(stream, out->data, in->data, n, CGE_MEMCPY_DEVICE_TO_DEVICE);
}

cge_status cge__concat_nhwc_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_outputs < 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "needs an output");
    return seg_run_nhwc(ctx, stream, &ctx->outputs[0], ctx->inputs, ctx->num_inputs, true);
}

cge_status cge__split_nhwc_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_inputs < 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "needs an input");
    return seg_run_nhwc(ctx, stream, &ctx->inputs[0], ctx->outputs, ctx->num_outputs, false);
}

/* ---- ChannelsLastShuffle ------------------------------------------------ */

cge_status cge__channel_shuffle_infer(cge_infer_ctx *ctx)
{
    if (ctx->num_inputs != 1 || ctx->num_outputs != 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "needs input X and output Y");
    const cge_tensor_desc *X = &ctx->inputs[0];
    int64_t g = cge_attrs_get_int(ctx->attrs, "groups", 0);
    if (X->shape.rank < 3)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "X must have rank >= 3 ([N, C, ...])");
    if (g < 1 || (X->shape.dims[1] >= 0 && X->shape.dims[1] % g != 0))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "groups %lld does not divide C = %lld",
                              (long long)g, (long long)X->shape.dims[1]);
    ctx->outputs[0] = *X;
    return CGE_OK;
}

typedef struct shuffle_args {
    const unsigned char *x;
    unsigned char *y;
    int64_t positions, C, g;
    size_t esize;
} shuffle_args;

/* Blocks over positions; each moves one position's channel vector, channel
 * gi * C/g + c of X to c * g + gi of Y. */
static void shuffle_fn(int64_t blk, int64_t nblk, void *args)
{
    const shuffle_args *a = args;
    int64_t p0, p1, C = a->C, g = a->g, cpg = C / g;
    cge__block_range(a->positions, blk, nblk, &p0, &p1);
    for (int64_t p = p0; p < p1; p++) {
        if (a->esize == 4) {
            const uint32_t *x = (const uint32_t *)a->x + p * C;
            uint32_t *y = (uint32_t *)a->y + p * C;
            if (g == 2) {
                for (int64_t c = 0; c < cpg; c++) {
                    y[2 * c] = x[c];
                    y[2 * c + 1] = x[cpg + c];
                }
            } else {
                for (int64_t gi = 0; gi < g; gi++)
                    for (int64_t c = 0; c < cpg; c++)
                        y[c * g + gi] = x[gi * cpg + c];
            }
        } else {
            const unsigned char *x = a->x + (size_t)(p * C) * a->esize;
            unsigned char *y = a->y + (size_t)(p * C) * a->esize;
            for (int64_t gi = 0; gi < g; gi++)
                for (int64_t c = 0; c < cpg; c++)
                    memcpy(y + (size_t)(c * g + gi) * a->esize, x + (size_t)(gi * cpg + c) * a->esize,
                           a->esize);
        }
    }
}

cge_status cge__channel_shuffle_nhwc_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_inputs != 1 || ctx->num_outputs != 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "needs input X and output Y");
    const cge_tensor *X = &ctx->inputs[0], *Y = &ctx->outputs[0];
    shuffle_args a = {X->data, Y->data, 0, 0, cge_attrs_get_int(ctx->attrs, "groups", 0),
                      cge_dtype_size(X->dtype)};
    if (X->shape.rank < 3 || !cge_shape_is_static(&X->shape) ||
        !cge_shape_equal(&X->shape, &Y->shape) || X->dtype != Y->dtype)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "X and Y need one static shape of rank >= 3");
    a.C = X->shape.dims[1];
    if (a.g < 1 || a.C % a.g != 0 || a.esize == 0)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "groups %lld does not divide C = %lld",
                                (long long)a.g, (long long)a.C);
    int64_t n = cge_shape_numel(&X->shape);
    if (n == 0)
        return CGE_OK;
    if (!a.x || !a.y)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing buffer");
    a.positions = n / a.C;
    int64_t nb = cge__blocks_for(n * (int64_t)a.esize, MIN_BLOCK_BYTES, ctx->num_threads);
    return cge_launch(stream, shuffle_fn, nb < a.positions ? nb : a.positions, &a, sizeof a);
}

static cge_status seg_run_axis(const cge_kernel_ctx *ctx, cge_stream *stream,
                               const cge_tensor *whole, const cge_tensor *parts, int32_t n,
                               bool to_whole, int32_t axis)
{
    int32_t r = whole->shape.rank;
    int64_t esize = (int64_t)cge_dtype_size(whole->dtype);
    int64_t inner = dims_product(whole->shape.dims, axis + 1, r) * esize;
    int64_t outer = dims_product(whole->shape.dims, 0, axis), sum = 0;
    for (int32_t i = 0; i < n; i++) {
        const cge_tensor *t = &parts[i];
        bool ok = t->dtype == whole->dtype && t->shape.rank == r;
        for (int32_t d = 0; ok && d < r; d++)
            ok = d == axis ? t->shape.dims[d] >= 0 : t->shape.dims[d] == whole->shape.dims[d];
        if (!ok)
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "part %d does not fit the whole along axis %d",
                                    (int)i, (int)axis);
        if (outer * inner * t->shape.dims[axis] > 0 && !t->data)
            return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing buffer of part %d", (int)i);
        sum += t->shape.dims[axis];
    }
    if (sum != whole->shape.dims[axis])
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "parts add up to %lld along axis %d, the whole has %lld",
                                (long long)sum, (int)axis, (long long)whole->shape.dims[axis]);
    int64_t row_bytes = sum * inner;
    if (outer * row_bytes == 0)
        return CGE_OK;
    if (!whole->data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing buffer");
    seg_args a;
    memset(&a, 0, sizeof a);
    a.whole = whole->data;
    a.row_bytes = row_bytes;
    a.outer = outer;
    a.to_whole = to_whole;
    int64_t col = 0;
    for (int32_t i = 0; i <= n; i++) {
        if (i < n) {
            int64_t chunk = parts[i].shape.dims[axis] * inner;
            if (chunk > 0)
                a.parts[a.n++] = (seg_part){parts[i].data, chunk, col};
            col += chunk;
        }
        if (a.n > 0 && (a.n == SEG_MAX || i == n)) {
            a.group_bytes = 0;
            for (int32_t k = 0; k < a.n; k++)
                a.group_bytes += a.parts[k].chunk;
            cge_status st = cge_launch(stream, seg_block,
                                       cge__blocks_for(outer * a.group_bytes, MIN_BLOCK_BYTES, ctx->num_threads),
                                       &a, sizeof a);
            if (st)
                return st;
            a.n = 0;
        }
    }
    return CGE_OK;
}

static cge_status concat_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return seg_run(ctx, stream, &ctx->outputs[0], ctx->inputs, ctx->num_inputs, true);
}

/* ---- Split -------------------------------------------------------------- */

cge_status cge__split_infer(cge_infer_ctx *ctx)
{
    return cge__split_infer_pieces(ctx, cge_attrs_find(ctx->attrs, "num_outputs") != NULL);
}

cge_status cge__split_infer_pieces(cge_infer_ctx *ctx, bool ceil_pieces)
{
    const cge_tensor_desc *in = &ctx->inputs[0];
    int32_t r = in->shape.rank, axis, n = ctx->num_outputs;
    int64_t ax = cge_attrs_get_int(ctx->attrs, "axis", 0);
    if (r < 1 || !cge_axis_normalize(ax, r, false, &axis))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "axis %lld is out of range for rank %d",
                              (long long)ax, (int)r);
    if (n < 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "needs at least one output");
    int64_t dim = in->shape.dims[axis];
    for (int32_t i = 0; i < n; i++) {
        ctx->outputs[i].dtype = in->dtype;
        ctx->outputs[i].shape = in->shape;
        ctx->outputs[i].shape.dims[axis] = CGE_DIM_DYNAMIC;
    }
    if (cge__meta_has_input(ctx, 1)) {
        if (cge_attrs_find(ctx->attrs, "num_outputs"))
            return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                                  "input 'split' and attribute num_outputs are exclusive");
        const cge_tensor_desc *sd = &ctx->inputs[1];
        if (sd->shape.rank != 1)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "input 'split' must be 1-D, got rank %d",
                                  (int)sd->shape.rank);
        if (sd->shape.dims[0] >= 0 && sd->shape.dims[0] != n)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "'split' has %lld entries for %d outputs",
                                  (long long)sd->shape.dims[0], (int)n);
        const void *v = cge__meta_input_value(ctx, 1);
        if (!v || sd->shape.dims[0] < 0)
            return CGE_OK;
        int64_t sum = 0;
        for (int32_t i = 0; i < n; i++) {
            int64_t s = cge__load_as_i64(sd->dtype, v, i);
            if (s < 0)
                return cge_meta_error(ctx, CGE_ERR_SHAPE, "'split' entry %d is %lld", (int)i, (long long)s);
            ctx->outputs[i].shape.dims[axis] = s;
            sum += s;
        }
        if (dim >= 0 && sum != dim)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "'split' adds up to %lld, axis %d has %lld",
                                  (long long)sum, (int)axis, (long long)dim);
        return CGE_OK;
    }
    /* Split-18's num_outputs: pieces of ceil(dim / n), the last one smaller. */
    const cge_attr *num = cge_attrs_find(ctx->attrs, "num_outputs");
    if (num && num->i != n)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "num_outputs is %lld, the node has %d outputs",
                              (long long)num->i, (int)n);
    if (dim < 0) {
        if (n == 1)
            ctx->outputs[0].shape.dims[axis] = dim;   /* a symbol passes whole */
        return CGE_OK;
    }
    if (ceil_pieces) {
        int64_t piece = (dim + n - 1) / n, last = dim - piece * (n - 1);
        if (last < 0)
            return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                  "axis %d of size %lld has no %d pieces of %lld (num_outputs)",
                                  (int)axis, (long long)dim, (int)n, (long long)piece);
        for (int32_t i = 0; i < n; i++)
            ctx->outputs[i].shape.dims[axis] = i < n - 1 ? piece : last;
        return CGE_OK;
    }
    if (dim % n != 0)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "axis %d of size %lld does not split evenly into %d outputs",
                              (int)axis, (long long)dim, (int)n);
    for (int32_t i = 0; i < n; i++)
        ctx->outputs[i].shape.dims[axis] = dim / n;
    return CGE_OK;
}

/* The pieces' sizes come from the output shapes meta fixed (from 'split'). */
static cge_status split_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return seg_run(ctx, stream, &ctx->inputs[0], ctx->outputs, ctx->num_outputs, false);
}

/* ---- Slice -------------------------------------------------------------- */

/* Where one list of Slice's index inputs lives (data NULL when absent). */
typedef struct index_list {
    const void *data;
    cge_dtype dtype;
} index_list;

typedef struct slice_lists {
    index_list starts, ends, axes, steps;
    int64_t n;
} slice_lists;

/* ONNX's rules: per listed axis, negative starts/ends count from the end, then
 * clamp to [0, dim] (forward) or [0, dim-1] / [-1, dim-1] (backward). Writes
 * each dim's first index and step and the output dims; unknown input dims
 * give unknown output dims. Returns false with `why` on bad lists. */
static bool slice_params(const cge_shape *in, const slice_lists *l, int64_t start[CGE_MAX_RANK],
                         int64_t step[CGE_MAX_RANK], cge_shape *out, char *why, size_t why_size)
{
    int32_t r = in->rank;
    bool seen[CGE_MAX_RANK] = {false};
    *out = *in;
    for (int32_t d = 0; d < r; d++) {
        start[d] = 0;
        step[d] = 1;
    }
    if (l->n > r) {
        snprintf(why, why_size, "%lld axes listed for rank %d", (long long)l->n, (int)r);
        return false;
    }
    for (int64_t k = 0; k < l->n; k++) {
        int64_t ax = l->axes.data ? cge__load_as_i64(l->axes.dtype, l->axes.data, k) : k;
        int32_t a;
        if (!cge_axis_normalize(ax, r, false, &a)) {
            snprintf(why, why_size, "axis %lld is out of range for rank %d", (long long)ax, (int)r);
            return false;
        }
        if (seen[a]) {
            snprintf(why, why_size, "axis %lld is listed twice", (long long)ax);
            return false;
        }
        seen[a] = true;
        int64_t st = l->steps.data ? cge__load_as_i64(l->steps.dtype, l->steps.data, k) : 1;
        if (st == 0) {
            snprintf(why, why_size, "step for axis %lld is 0", (long long)ax);
            return false;
        }
        int64_t dim = in->dims[a];
        step[a] = st;
        if (dim < 0) {
            out->dims[a] = CGE_DIM_DYNAMIC;
            continue;
        }
        int64_t s = cge__load_as_i64(l->starts.dtype, l->starts.data, k);
        int64_t e = cge__load_as_i64(l->ends.dtype, l->ends.data, k);
        if (s < 0)
            s += dim;
        if (e < 0)
            e += dim;
        int64_t len;
        if (dim == 0) {
            s = 0;
            len = 0;
        } else if (st > 0) {
            s = s < 0 ? 0 : (s > dim ? dim : s);
            e = e < 0 ? 0 : (e > dim ? dim : e);
            len = e > s ? (int64_t)((uint64_t)(e - s - 1) / (uint64_t)st) + 1 : 0;
        } else {
            s = s < 0 ? 0 : (s > dim - 1 ? dim - 1 : s);
            e = e < -1 ? -1 : (e > dim - 1 ? dim - 1 : e);
            uint64_t as = (uint64_t)0 - (uint64_t)st;
            len = s > e ? (int64_t)((uint64_t)(s - e - 1) / as) + 1 : 0;
        }
        start[a] = s;
        out->dims[a] = len;
    }
    return true;
}

static cge_status slice_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *in = &ctx->inputs[0];
    static const char *const names[] = {"starts", "ends", "axes", "steps"};
    int64_t n = -2;
    bool known = true;
    for (int32_t i = 1; i <= 4; i++) {
        if (!cge__meta_has_input(ctx, i)) {
            if (i <= 2)
                return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "input '%s' is required", names[i - 1]);
            continue;
        }
        const cge_tensor_desc *d = &ctx->inputs[i];
        if (d->shape.rank != 1)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "input '%s' must be 1-D, got rank %d",
                                  names[i - 1], (int)d->shape.rank);
        int64_t len = d->shape.dims[0];
        if (len >= 0 && n >= 0 && len != n)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "input '%s' has %lld entries, 'starts' has %lld",
                                  names[i - 1], (long long)len, (long long)n);
        if (len >= 0 && n == -2)
            n = len;
        if (len < 0)
            known = false;
        if (!cge__meta_input_value(ctx, i))
            known = false;
    }
    if (n > in->shape.rank)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "%lld axes listed for rank %d", (long long)n,
                              (int)in->shape.rank);
    ctx->outputs[0].dtype = in->dtype;
    if (!known) {
        /* Without the values, the listed axes are unknown; when 'axes' is known
         * the other dims keep their size. */
        cge_shape out = all_dynamic(in->shape.rank);
        const void *av = cge__meta_input_value(ctx, 3);
        if (cge__meta_has_input(ctx, 3) && av && n >= 0) {
            out = in->shape;
            for (int64_t k = 0; k < n; k++) {
                int32_t a;
                int64_t ax = cge__load_as_i64(ctx->inputs[3].dtype, av, k);
                if (!cge_axis_normalize(ax, in->shape.rank, false, &a))
                    return cge_meta_error(ctx, CGE_ERR_SHAPE, "axis %lld is out of range for rank %d",
                                          (long long)ax, (int)in->shape.rank);
                out.dims[a] = CGE_DIM_DYNAMIC;
            }
        }
        ctx->outputs[0].shape = out;
        return CGE_OK;
    }
    slice_lists l;
    memset(&l, 0, sizeof l);
    l.n = n;
    l.starts = (index_list){cge__meta_input_value(ctx, 1), ctx->inputs[1].dtype};
    l.ends = (index_list){cge__meta_input_value(ctx, 2), ctx->inputs[2].dtype};
    if (cge__meta_has_input(ctx, 3))
        l.axes = (index_list){cge__meta_input_value(ctx, 3), ctx->inputs[3].dtype};
    if (cge__meta_has_input(ctx, 4))
        l.steps = (index_list){cge__meta_input_value(ctx, 4), ctx->inputs[4].dtype};
    int64_t start[CGE_MAX_RANK], step[CGE_MAX_RANK];
    char why[128];
    if (!slice_params(&in->shape, &l, start, step, &ctx->outputs[0].shape, why, sizeof why))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "%s", why);
    return CGE_OK;
}

/* The index lists are read when the kernel runs, not at launch: they may be
 * produced by earlier work on the stream, and a replay reads them afresh. If
 * they no longer give the planned output shape, the output is zeroed rather
 * than read out of bounds. */
typedef struct slice_args {
    const char *src;
    char *dst;
    int32_t esize;
    cge_shape in, out;
    slice_lists l;
    int64_t rows;
} slice_args;

static void slice_block(int64_t b, int64_t nb, void *p)
{
    const slice_args *a = p;
    int64_t lo, hi, start[CGE_MAX_RANK], step[CGE_MAX_RANK];
    cge__block_range(a->rows, b, nb, &lo, &hi);
    if (lo >= hi)
        return;
    int32_t r = a->out.rank;
    int64_t row_len = r > 0 ? a->out.dims[r - 1] : 1;
    cge_shape got;
    char why[128];
    if (!slice_params(&a->in, &a->l, start, step, &got, why, sizeof why) ||
        !cge_shape_equal(&got, &a->out)) {
        memset(a->dst + lo * row_len * a->esize, 0, (size_t)((hi - lo) * row_len * a->esize));
        return;
    }
    int64_t in_strides[CGE_MAX_RANK], base = 0;
    cge_shape_strides(&a->in, in_strides);
    strided_args s;
    memset(&s, 0, sizeof s);
    for (int32_t d = 0; d < r; d++) {
        base += start[d] * in_strides[d];
        s.dims[d] = a->out.dims[d];
        s.stride[d] = step[d] * in_strides[d];
    }
    if (r == 0) {
        s.dims[0] = 1;
        s.stride[0] = 1;
    }
    s.src = a->src + base * a->esize;
    s.dst = a->dst;
    s.rank = r > 0 ? r : 1;
    s.esize = a->esize;
    s.rows = a->rows;
    strided_rows(&s, lo, hi);
}

static cge_status slice_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *in = &ctx->inputs[0];
    cge_tensor *out = &ctx->outputs[0];
    if (ctx->num_inputs < 3 || !ctx->inputs[1].data || !ctx->inputs[2].data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "'starts' and 'ends' are required");
    slice_args a;
    memset(&a, 0, sizeof a);
    a.l.n = ctx->inputs[1].shape.rank == 1 ? ctx->inputs[1].shape.dims[0] : -1;
    for (int32_t i = 1; i < ctx->num_inputs && i <= 4; i++) {
        const cge_tensor *t = &ctx->inputs[i];
        if (!t->data)
            continue;
        if (!cge_dtype_is_int(t->dtype) || t->shape.rank != 1 || t->shape.dims[0] != a.l.n)
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "index inputs must be 1-D integer lists of one length");
        index_list il = {t->data, t->dtype};
        if (i == 1)
            a.l.starts = il;
        else if (i == 2)
            a.l.ends = il;
        else if (i == 3)
            a.l.axes = il;
        else
            a.l.steps = il;
    }
    if (out->dtype != in->dtype || out->shape.rank != in->shape.rank ||
        !cge_shape_is_static(&in->shape) || !cge_shape_is_static(&out->shape))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output does not match the input's dtype and rank");
    int64_t numel = cge_shape_numel(&out->shape);
    if (numel == 0)
        return CGE_OK;
    if (!in->data || !out->data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    a.src = in->data;
    a.dst = out->data;
    a.esize = (int32_t)cge_dtype_size(in->dtype);
    a.in = in->shape;
    a.out = out->shape;
    int64_t row_len = out->shape.rank > 0 ? out->shape.dims[out->shape.rank - 1] : 1;
    a.rows = numel / row_len;
    return cge_launch(stream, slice_block, cge__blocks_for(a.rows, min_rows_for(row_len), ctx->num_threads),
                      &a, sizeof a);
}

/* ---- Gather ------------------------------------------------------------- */

static cge_status gather_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *data = &ctx->inputs[0], *idx = &ctx->inputs[1];
    int32_t r = data->shape.rank, q = idx->shape.rank, axis;
    int64_t ax = cge_attrs_get_int(ctx->attrs, "axis", 0);
    if (r < 1)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "input 'data' must have rank >= 1, got a scalar");
    if (!cge_axis_normalize(ax, r, false, &axis))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "axis %lld is out of range for rank %d",
                              (long long)ax, (int)r);
    if (r - 1 + q > CGE_MAX_RANK)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "output rank %d exceeds %d", (int)(r - 1 + q),
                              CGE_MAX_RANK);
    cge_shape out;
    memset(&out, 0, sizeof out);
    for (int32_t i = 0; i < axis; i++)
        out.dims[out.rank++] = data->shape.dims[i];
    for (int32_t i = 0; i < q; i++)
        out.dims[out.rank++] = idx->shape.dims[i];
    for (int32_t i = axis + 1; i < r; i++)
        out.dims[out.rank++] = data->shape.dims[i];
    ctx->outputs[0].dtype = data->dtype;
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

typedef struct gather_args {
    const char *src;
    char *dst;
    const void *idx;
    cge_dtype idx_dtype;
    int64_t n;          /* number of indices */
    int64_t dim;        /* data's size along axis */
    int64_t inner;      /* bytes per gathered slice */
    int64_t rows;       /* outer * n */
    int32_t axis;
    const char *node;   /* for the failure message */
} gather_args;

static void gather_block(int64_t b, int64_t nb, void *p)
{
    const gather_args *a = p;
    int64_t lo, hi;
    cge__block_range(a->rows, b, nb, &lo, &hi);
    int64_t inner = a->inner;
    for (int64_t row = lo; row < hi; row++) {
        int64_t o = row / a->n, j = row % a->n;
        int64_t k = a->idx_dtype == CGE_I32 ? ((const int32_t *)a->idx)[j] : ((const int64_t *)a->idx)[j];
        if (k < 0)
            k += a->dim;
        char *dst = a->dst + row * inner;
        /* Indices exist only on the stream, so they are checked here: a bad
         * one zeroes its slice and fails the run at the next synchronize. */
        if (k < 0 || k >= a->dim) {
            memset(dst, 0, (size_t)inner);
            long long raw = k < 0 ? k - a->dim : k;
            cge_kernel_fail(CGE_ERR_SHAPE,
                            "Gather '%s': index %lld (position %lld) is out of range [%lld, %lld) "
                            "on axis %d",
                            a->node, raw, (long long)j, (long long)-a->dim, (long long)a->dim,
                            (int)a->axis);
            continue;
        }
        const char *src = a->src + (o * a->dim + k) * inner;
        switch (inner) {
        /* Constant sizes become single moves. */
        case 1: memcpy(dst, src, 1); break;
        case 2: memcpy(dst, src, 2); break;
        case 4: memcpy(dst, src, 4); break;
        case 8: memcpy(dst, src, 8); break;
        default: memcpy(dst, src, (size_t)inner); break;
        }
    }
}

static cge_status gather_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *data = &ctx->inputs[0], *idx = &ctx->inputs[1];
    cge_tensor *out = &ctx->outputs[0];
    int32_t r = data->shape.rank, axis;
    if (r < 1 || !cge_axis_normalize(cge_attrs_get_int(ctx->attrs, "axis", 0), r, false, &axis))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "bad axis for rank %d", (int)r);
    if (idx->dtype != CGE_I32 && idx->dtype != CGE_I64)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "indices must be int32 or int64, got %s",
                                cge_dtype_name(idx->dtype));
    if (out->dtype != data->dtype || out->shape.rank != r - 1 + idx->shape.rank ||
        !cge_shape_is_static(&data->shape) || !cge_shape_is_static(&idx->shape))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output does not match data and indices");
    int64_t n = cge_shape_numel(&idx->shape), dim = data->shape.dims[axis];
    if (n > 0 && !idx->data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing indices buffer");
    int64_t numel = cge_shape_numel(&out->shape);
    if (numel == 0)
        return CGE_OK;
    if (!data->data || !out->data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing data or output buffer");
    gather_args a;
    memset(&a, 0, sizeof a);
    a.src = data->data;
    a.dst = out->data;
    a.idx = idx->data;
    a.idx_dtype = idx->dtype;
    a.n = n;
    a.dim = dim;
    a.axis = axis;
    a.node = ctx->node_name;
    a.inner = dims_product(data->shape.dims, axis + 1, r) * (int64_t)cge_dtype_size(data->dtype);
    a.rows = dims_product(data->shape.dims, 0, axis) * n;
    int64_t min_rows = (MIN_BLOCK_BYTES + a.inner - 1) / a.inner;
    return cge_launch(stream, gather_block, cge__blocks_for(a.rows, min_rows, ctx->num_threads), &a,
                      sizeof a);
}

/* ---- definitions -------------------------------------------------------- */

#define IDX (CGE_DT(CGE_I32) | CGE_DT(CGE_I64))

static const cge_kernel_def transpose_kernels[] = {{"cpu", 0, transpose_launch, NULL, NULL, NULL, -1}};
static const cge_kernel_def concat_kernels[] = {{"cpu", 0, concat_launch, NULL, NULL, NULL, -1}};
static const cge_kernel_def split_kernels[] = {{"cpu", 0, split_launch, NULL, NULL, NULL, -1}};
static const cge_kernel_def slice_kernels[] = {{"cpu", 0, slice_launch, NULL, NULL, NULL, -1}};
static const cge_kernel_def gather_kernels[] = {{"cpu", 0, gather_launch, NULL, NULL, NULL, -1}};

/* Concat, Slice and Gather copy whole elements with memcpy of their size,
 * so string elements ({data, size} pairs, cge/types.h) move as they are.
 * Transpose's tiles copy at most 8 bytes an element: no strings there. */
#define MOVE_DT (CGE_DT_ALL | CGE_DT_STRING)

static const cge_arg_def transpose_in[] = {{"data", 0, CGE_DT_ALL, "tensor"}};
static const cge_arg_def transpose_out[] = {{"transposed", 0, CGE_DT_ALL, "output dim i is input dim perm[i]"}};
static const cge_attr_def transpose_attrs[] = {
    {"perm", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "permutation of the dims; reversed if absent"},
};

static const cge_arg_def concat_in[] = {{"inputs", CGE_ARG_VARIADIC, MOVE_DT, "tensors of one dtype and rank"}};
static const cge_arg_def concat_out[] = {{"concat_result", 0, MOVE_DT, "inputs joined along axis"}};
static const cge_attr_def concat_attrs[] = {
    {"axis", CGE_ATTR_INT, true, 0, 0.0f, NULL, "axis to join along; negative counts from the end"},
};

static const cge_arg_def split_in[] = {
    {"input", 0, CGE_DT_ALL, "tensor to split"},
    {"split", CGE_ARG_OPTIONAL, CGE_DT(CGE_I64), "sizes of the outputs along axis; equal if absent"},
};
static const cge_arg_def split_out[] = {{"outputs", CGE_ARG_VARIADIC, CGE_DT_ALL, "the pieces"}};
static const cge_attr_def split_attrs[] = {
    {"axis", CGE_ATTR_INT, false, 0, 0.0f, NULL, "axis to split; negative counts from the end"},
    {"num_outputs", CGE_ATTR_INT, false, 0, 0.0f, NULL,
     "18: pieces of ceil(dim / num_outputs), the last smaller (without 'split')"},
};

static const cge_arg_def slice_in[] = {
    {"data", 0, MOVE_DT, "tensor to slice"},
    {"starts", 0, IDX, "first index per listed axis"},
    {"ends", 0, IDX, "end (exclusive) per listed axis"},
    {"axes", CGE_ARG_OPTIONAL, IDX, "axes the lists apply to; 0..n-1 if absent"},
    {"steps", CGE_ARG_OPTIONAL, IDX, "steps (non-zero; negative walks backwards); 1 if absent"},
};
static const cge_arg_def slice_out[] = {{"output", 0, MOVE_DT, "the slice"}};

static const cge_arg_def gather_in[] = {
    {"data", 0, MOVE_DT, "tensor of rank >= 1"},
    {"indices", 0, IDX, "indices along axis; negative counts from the end"},
};
static const cge_arg_def gather_out[] = {{"output", 0, MOVE_DT, "data[:axis] + indices + data[axis+1:]"}};
static const cge_attr_def gather_attrs[] = {
    {"axis", CGE_ATTR_INT, false, 0, 0.0f, NULL, "axis to gather on; negative counts from the end"},
};

#define N(a) ((int32_t)(sizeof(a) / sizeof((a)[0])))

static const cge_op_def transform_ops[] = {
    {"Transpose", CGE_DOMAIN_DEFAULT, 13, 0, transpose_in, N(transpose_in), transpose_out,
     N(transpose_out), transpose_attrs, N(transpose_attrs), cge__transpose_infer, transpose_kernels,
     N(transpose_kernels), "Permute dims (ONNX Transpose-13)"},
    {"Concat", CGE_DOMAIN_DEFAULT, 13, 0, concat_in, N(concat_in), concat_out, N(concat_out),
     concat_attrs, N(concat_attrs), cge__concat_infer, concat_kernels, N(concat_kernels),
     "Join tensors along an axis (ONNX Concat-13)"},
    {"Split", CGE_DOMAIN_DEFAULT, 13, 17, split_in, N(split_in), split_out, N(split_out), split_attrs,
     1, cge__split_infer, split_kernels, N(split_kernels),
     "Split a tensor along an axis (ONNX Split-13)"},
    {"Split", CGE_DOMAIN_DEFAULT, 18, 0, split_in, N(split_in), split_out, N(split_out), split_attrs,
     N(split_attrs), cge__split_infer, split_kernels, N(split_kernels),
     "Split a tensor along an axis into given sizes or num_outputs pieces (ONNX Split-18)"},
    {"Slice", CGE_DOMAIN_DEFAULT, 13, 0, slice_in, N(slice_in), slice_out, N(slice_out), NULL, 0,
     slice_infer, slice_kernels, N(slice_kernels), "Strided slice (ONNX Slice-13)"},
    {"Gather", CGE_DOMAIN_DEFAULT, 13, 0, gather_in, N(gather_in), gather_out, N(gather_out),
     gather_attrs, N(gather_attrs), gather_infer, gather_kernels, N(gather_kernels),
     "Gather slices by index (ONNX Gather-13)"},
};

const cge_op_def *cge__ops_transform(int32_t *count)
{
    *count = N(transform_ops);
    return transform_ops;
}
