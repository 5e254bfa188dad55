/* MatMul (numpy matmul: 1-D promotion, broadcast batch dims) and Gemm (alpha,
 * beta, transposes, broadcast C). float32 runs on the packed GEMM of
 * gemm_kernel.c; the other dtypes on a plain row loop. */
#include <string.h>

#include "ops/builtin.h"
#include "ops/gemm_kernel.h"
#include "ops/kernel_util.h"

#define MM_DTYPES                                                                          \
    (CGE_DT(CGE_F32) | CGE_DT(CGE_F64) | CGE_DT(CGE_F16) | CGE_DT(CGE_BF16) |              \
     CGE_DT(CGE_I32) | CGE_DT(CGE_I64) | CGE_DT(CGE_U32) | CGE_DT(CGE_U64))

/* ---- shapes --------------------------------------------------------------- */

/* Everything both launch paths need about one product, from static shapes:
 * out batch t uses A matrix a_idx(t) and B matrix b_idx(t) (broadcast batch
 * strides counted in matrices). */
typedef struct mm_args {
    cge_dtype dtype;
    const void *a, *b, *bias;
    void *y;
    int64_t M, N, K;
    int64_t a_rs, a_cs, b_rs, b_cs;     /* element strides inside a matrix */
    int64_t a_mat, b_mat;               /* elements per matrix */
    int64_t bias_rs, bias_cs;
    float alpha, beta;
    int int_exact;                      /* ints: alpha == 1 and beta in {0, 1} */
    int32_t brank;
    int64_t bdims[CGE_MAX_RANK], a_bstr[CGE_MAX_RANK], b_bstr[CGE_MAX_RANK];
    int64_t batch, b_count;
    /* float32 GEMM */
    float *bp;
    int64_t bp_mat;
    cge__gemm_tiling tiling;
    cge__gemm_isa isa;
} mm_args;

static void batch_offsets(const mm_args *p, int64_t t, int64_t *ao, int64_t *bo)
{
    int64_t a = 0, b = 0;
    for (int32_t d = p->brank - 1; d >= 0; d--) {
        int64_t i = t % p->bdims[d];
        t /= p->bdims[d];
        a += i * p->a_bstr[d];
        b += i * p->b_bstr[d];
    }
    *ao = a;
    *bo = b;
}

/* MatMul layout from static shapes (meta has checked them). */
static void matmul_layout(const cge_shape *as, const cge_shape *bs, mm_args *p)
{
    int32_t ra = as->rank, rb = bs->rank;
    p->M = ra >= 2 ? as->dims[ra - 2] : 1;
    p->K = as->dims[ra - 1];
    p->N = rb >= 2 ? bs->dims[rb - 1] : 1;
    p->a_rs = p->K;
    p->a_cs = 1;
    p->b_rs = p->N;
    p->b_cs = 1;
    p->a_mat = p->M * p->K;
    p->b_mat = p->K * p->N;
    int32_t na = ra > 2 ? ra - 2 : 0, nb = rb > 2 ? rb - 2 : 0;
    p->brank = na > nb ? na : nb;
    p->batch = 1;
    p->b_count = 1;
    int64_t sa = 1, sb = 1;
    for (int32_t d = p->brank - 1; d >= 0; d--) {
        int32_t ia = d - (p->brank - na), ib = d - (p->brank - nb);
        int64_t da = ia >= 0 ? as->dims[ia] : 1, db = ib >= 0 ? bs->dims[ib] : 1;
        p->bdims[d] = da > db ? da : db;
        if (da == 0 || db == 0)
            p->bdims[d] = 0;
        p->a_bstr[d] = da == 1 ? 0 : sa;
        p->b_bstr[d] = db == 1 ? 0 : sb;
        sa *= da;
        sb *= db;
        p->batch *= p->bdims[d];
    }
    p->b_count = sb;
    /* One B for every batch and A not broadcast: the batch is just more rows. */
    if (sb == 1 && sa == p->batch && ra >= 2 && p->batch > 1) {
        p->M *= p->batch;
        p->a_mat = p->M * p->K;
        p->batch = 1;
        p->brank = 0;
    }
}

static cge_status matmul_infer(cge_infer_ctx *ctx)
{
    if (ctx->num_inputs < 2 || ctx->num_outputs < 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "needs inputs A, B and output Y");
    const cge_tensor_desc *A = &ctx->inputs[0], *B = &ctx->inputs[1];
    /* The shapes' text only for an error: a symbolic plan's shape program
     * runs this meta at every new signature. */
    char sa[CGE_SHAPE_STR_MAX], sb[CGE_SHAPE_STR_MAX];
#define MM_SHAPE_TEXT (cge_shape_str(&A->shape, sa, sizeof sa), cge_shape_str(&B->shape, sb, sizeof sb))
    if (A->dtype != B->dtype)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "A is %s but B is %s",
                              cge_dtype_name(A->dtype), cge_dtype_name(B->dtype));
    int32_t ra = A->shape.rank, rb = B->shape.rank;
    if (ra < 1 || rb < 1)
        return MM_SHAPE_TEXT, cge_meta_error(ctx, CGE_ERR_SHAPE, "inputs must have rank >= 1 (A %s, B %s)", sa,
                              sb);
    int64_t ka = A->shape.dims[ra - 1], kb = rb >= 2 ? B->shape.dims[rb - 2] : B->shape.dims[0];
    if (ka >= 0 && kb >= 0 && ka != kb)
        return MM_SHAPE_TEXT, cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "A %s and B %s: inner dimensions %lld and %lld differ", sa, sb,
                              (long long)ka, (long long)kb);
    cge_shape ba = {.rank = ra > 2 ? ra - 2 : 0}, bb = {.rank = rb > 2 ? rb - 2 : 0}, out;
    memcpy(ba.dims, A->shape.dims, sizeof(int64_t) * (size_t)ba.rank);
    memcpy(bb.dims, B->shape.dims, sizeof(int64_t) * (size_t)bb.rank);
    if (cge_shape_broadcast(&ba, &bb, &out) != CGE_OK)
        return MM_SHAPE_TEXT, cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "batch dimensions of A %s and B %s do not broadcast", sa, sb);
    if (ra >= 2)
        out.dims[out.rank++] = A->shape.dims[ra - 2];
    if (rb >= 2)
        out.dims[out.rank++] = B->shape.dims[rb - 1];
    ctx->outputs[0].dtype = A->dtype;
    ctx->outputs[0].shape = out;
    return CGE_OK;
#undef MM_SHAPE_TEXT
}

/* ---- generic row kernel (every dtype; float32 only when N == 1) ----------- */

/* Rows are (batch, i) pairs; 64 output columns are accumulated at a time. */
#define MM_ROWS_BODY(T, ACC, LD)                                                           \
    const mm_args *p = args;                                                               \
    int64_t r0, r1;                                                                        \
    cge__block_range(p->batch * p->M, blk, nblk, &r0, &r1);                                 \
    for (int64_t r = r0; r < r1; r++) {                                                    \
        int64_t t = r / p->M, i = r % p->M, ao, bo;                                        \
        batch_offsets(p, t, &ao, &bo);                                                     \
        const T *a = (const T *)p->a + ao * p->a_mat + i * p->a_rs;                        \
        const T *b = (const T *)p->b + bo * p->b_mat;                                      \
        T *y = (T *)p->y + (t * p->M + i) * p->N;                                          \
        for (int64_t j0 = 0; j0 < p->N; j0 += 64) {                                        \
            int64_t nj = p->N - j0 < 64 ? p->N - j0 : 64;                                  \
            ACC acc[64];                                                                   \
            for (int64_t j = 0; j < nj; j++)                                               \
                acc[j] = 0;                                                                \
            for (int64_t k = 0; k < p->K; k++) {                                           \
                ACC av = LD(a[k * p->a_cs]);                                               \
                const T *bk = b + k * p->b_rs + j0 * p->b_cs;                              \
                if (p->b_cs == 1)                                                          \
                    for (int64_t j = 0; j < nj; j++)                                       \
                        acc[j] += av * LD(bk[j]);                                          \
                else                                                                       \
                    for (int64_t j = 0; j < nj; j++)                                       \
                        acc[j] += av * LD(bk[j * p->b_cs]);                                \
            }

#define MM_ROWS_END                                                                        \
    }                                                                                      \
    }

#define LD_SELF(x) (x)
#define LD_F16(x) cge_f16_to_f32(x)
#define LD_BF16(x) cge_bf16_to_f32(x)
#define ST_SELF(x) (x)
#define ST_F32(x) ((float)(x))
#define ST_F16(x) cge_f32_to_f16(x)
#define ST_BF16(x) cge_f32_to_bf16(x)

/* Floats: y = alpha * acc + beta * bias. */
#define MM_ROWS_FLOAT(SUF, T, ACC, LD, ST)                                                 \
    static void mm_rows_##SUF(int64_t blk, int64_t nblk, void *args)                       \
    {                                                                                      \
        MM_ROWS_BODY(T, ACC, LD)                                                           \
        const T *bias = p->bias;                                                           \
        for (int64_t j = 0; j < nj; j++) {                                                 \
            ACC v = (ACC)p->alpha * acc[j];                                                \
            if (bias)                                                                      \
                v += (ACC)p->beta *                                                        \
                     LD(bias[(t * p->M + i) * p->bias_rs + (j0 + j) * p->bias_cs]);        \
            y[j0 + j] = ST(v);                                                             \
        }                                                                                  \
        MM_ROWS_END                                                                        \
    }

/* Integers accumulate in the unsigned type of their width, so overflow wraps
 * modulo 2^bits (as numpy's does) instead of being undefined. Non-unit alpha/beta go
 * through double and truncate. */
#define MM_ROWS_INT(SUF, T, U)                                                             \
    static void mm_rows_##SUF(int64_t blk, int64_t nblk, void *args)                       \
    {                                                                                      \
        MM_ROWS_BODY(T, U, (U))                                                            \
        const T *bias = p->bias;                                                           \
        for (int64_t j = 0; j < nj; j++) {                                                 \
            const T *bv =                                                                  \
                bias ? &bias[(t * p->M + i) * p->bias_rs + (j0 + j) * p->bias_cs] : NULL;  \
            if (p->int_exact)                                                              \
                y[j0 + j] = (T)(acc[j] + (bv ? (U)*bv : 0));                               \
            else                                                                           \
                cge__store_from_double(p->dtype, y, j0 + j,                                 \
                                      (double)p->alpha * (double)(T)acc[j] +               \
                                          (bv ? (double)p->beta * (double)*bv : 0.0));     \
        }                                                                                  \
        MM_ROWS_END                                                                        \
    }

MM_ROWS_FLOAT(f32, float, float, LD_SELF, ST_SELF)
MM_ROWS_FLOAT(f64, double, double, LD_SELF, ST_SELF)
MM_ROWS_FLOAT(f16, uint16_t, float, LD_F16, ST_F16)
MM_ROWS_FLOAT(bf16, uint16_t, float, LD_BF16, ST_BF16)
MM_ROWS_INT(i32, int32_t, uint32_t)
MM_ROWS_INT(i64, int64_t, uint64_t)
MM_ROWS_INT(u32, uint32_t, uint32_t)
MM_ROWS_INT(u64, uint64_t, uint64_t)

static cge_kernel_fn rows_fn(cge_dtype t)
{
    switch (t) {
    case CGE_F32: return mm_rows_f32;
    case CGE_F64: return mm_rows_f64;
    case CGE_F16: return mm_rows_f16;
    case CGE_BF16: return mm_rows_bf16;
    case CGE_I32: return mm_rows_i32;
    case CGE_I64: return mm_rows_i64;
    case CGE_U32: return mm_rows_u32;
    case CGE_U64: return mm_rows_u64;
    default: return NULL;
    }
}

/* ---- float32 GEMM path ------------------------------------------------------ */

static int uses_gemm(const mm_args *p)
{
    return p->dtype == CGE_F32 && p->N > 1 && p->K > 0 && p->M > 0 && p->batch > 0;
}

static int gemv_direct(const mm_args *p);
static int gemm_unpacked(const mm_args *p);

static size_t gemm_workspace(const mm_args *p)
{
    /* The paths that read B where it is need no room to pack it. */
    if (!uses_gemm(p) || gemv_direct(p) || gemm_unpacked(p))
        return 0;
    return (size_t)(p->b_count * cge__gemm_packed_b_floats(p->K, p->N)) * sizeof(float) + 64;
}

static void pack_b_fn(int64_t blk, int64_t nblk, void *args)
{
    const mm_args *p = args;
    int64_t panels = (p->N + CGE_GEMM_NR - 1) / CGE_GEMM_NR, w0, w1;
    cge__block_range(p->b_count * panels, blk, nblk, &w0, &w1);
    while (w0 < w1) {
        int64_t m = w0 / panels, q0 = w0 % panels;
        int64_t q1 = q0 + (w1 - w0) < panels ? q0 + (w1 - w0) : panels;
        cge__gemm_pack_b((const float *)p->b + m * p->b_mat, p->b_rs, p->b_cs, p->K, p->N, q0,
                        q1, p->bp + m * p->bp_mat);
        w0 += q1 - q0;
    }
}

static void gemm_fn(int64_t blk, int64_t nblk, void *args)
{
    const mm_args *p = args;
    const cge__gemm_tiling *tl = &p->tiling;
    int64_t per = tl->tiles_m * tl->tiles_n, w0, w1;
    cge__block_range(p->batch * per, blk, nblk, &w0, &w1);
    for (int64_t w = w0; w < w1; w++) {
        int64_t t = w / per, tm = (w % per) / tl->tiles_n, tn = w % tl->tiles_n, ao, bo;
        batch_offsets(p, t, &ao, &bo);
        cge__gemm_f32 g = {
            .M = p->M, .N = p->N, .K = p->K,
            .a = (const float *)p->a + ao * p->a_mat, .a_rs = p->a_rs, .a_cs = p->a_cs,
            .bp = p->bp ? p->bp + bo * p->bp_mat : NULL,
            .c = (float *)p->y + t * p->M * p->N, .ldc = p->N,
            .alpha = p->alpha,
            .bias = p->bias, .bias_rs = p->bias_rs, .bias_cs = p->bias_cs, .beta = p->beta,
            .isa = p->isa,
        };
        if (p->bp)
            cge__gemm_f32_tile(&g, tm * tl->mt, (tm + 1) * tl->mt, tn * tl->nt, (tn + 1) * tl->nt);
        else /* gemm_unpacked: B where it is */
            cge__gemm_f32_tile_unpacked(&g, (const float *)p->b + bo * p->b_mat, p->b_rs,
                                        tm * tl->mt, (tm + 1) * tl->mt, tn * tl->nt,
                                        (tn + 1) * tl->nt);
    }
}

/* Whether this CPU has kernels that read B where it is: AVX-512 or AVX2 +
 * FMA (cge__gemm_f32_tile_unpacked). */
static int direct_isa(void)
{
    cge__gemm_isa isa = cge__gemm_isa_best();
    return isa == CGE_GEMM_ISA_AVX512 || isa == CGE_GEMM_ISA_AVX2;
}

/* M = 1 products (a decoding step's attention: one query row against the
 * keys or values, which change every run) read B where it is, row-major:
 * packing it first would copy as many bytes as the product reads. The
 * products' columns are cut into chunks for the cores. */
static int gemv_direct(const mm_args *p)
{
    return uses_gemm(p) && p->M == 1 && p->b_cs == 1 && p->a_cs == 1 && p->alpha == 1.0f &&
           !p->bias && direct_isa();
}

static void gemv_fn(int64_t blk, int64_t nblk, void *args)
{
    const mm_args *p = args;
    int64_t chunks = (p->N + p->tiling.nt - 1) / p->tiling.nt, w0, w1;
    cge__block_range(p->batch * chunks, blk, nblk, &w0, &w1);
    for (int64_t w = w0; w < w1; w++) {
        int64_t t = w / chunks, j0 = (w % chunks) * p->tiling.nt, ao, bo;
        batch_offsets(p, t, &ao, &bo);
        cge__gemm_f32 g = {.M = 1, .N = p->N, .K = p->K,
                           .a = (const float *)p->a + ao * p->a_mat, .a_rs = p->K, .a_cs = 1,
                           .c = (float *)p->y + t * p->N, .ldc = p->N, .alpha = 1.0f,
                           .isa = cge__gemm_isa_best()};
        cge__gemv_f32_unpacked(&g, (const float *)p->b + bo * p->b_mat, p->b_rs, j0,
                               j0 + p->tiling.nt);
    }
}

/* Products with a B that changes every run (attention's Q K^T and P V past
 * the fused attention's reach, a prefill's) and is small: the direct
 * kernels read B row-major where it is, so no packing pass (a launch of its
 * own, waking the workers once more) and no workspace. Up to 64K floats
 * (256 KiB) per matrix, what a core's L2 holds with room: a larger B is
 * re-read from further away by every 12-row block, where packing it once
 * pays. */
#define UNPACKED_MAX_B_FLOATS 65536

static int gemm_unpacked(const mm_args *p)
{
    return uses_gemm(p) && p->M > 1 && p->b_cs == 1 && p->a_cs == 1 && p->alpha == 1.0f &&
           p->K * p->N <= UNPACKED_MAX_B_FLOATS &&
           (!p->bias || (p->bias_rs == 0 && p->bias_cs == 1 && p->beta == 1.0f)) &&
           direct_isa();
}

/* Enqueue the product described by `p` (inputs and output already set). */
static cge_status mm_enqueue(const cge_kernel_ctx *ctx, cge_stream *stream, mm_args *p)
{
    if (p->batch == 0 || p->M == 0 || p->N == 0)
        return CGE_OK;
    int threads = ctx->num_threads;
    if (gemv_direct(p)) {
        /* About two chunks per core over all products, whole panels each. */
        int64_t per = (2 * (int64_t)(threads > 0 ? threads : 1) + p->batch - 1) / p->batch;
        int64_t nt = (p->N + per - 1) / per;
        p->tiling.nt = (nt + CGE_GEMM_NR - 1) / CGE_GEMM_NR * CGE_GEMM_NR;
        int64_t chunks = (p->N + p->tiling.nt - 1) / p->tiling.nt;
        return cge_launch(stream, gemv_fn, cge__blocks_for(p->batch * chunks, 1, threads), p,
                          sizeof *p);
    }
    if (gemm_unpacked(p)) {
        p->bp = NULL;
        p->isa = cge__gemm_isa_best();
        cge__gemm_plan(p->batch, p->M, p->N, threads, &p->tiling);
        int64_t tiles = p->batch * p->tiling.tiles_m * p->tiling.tiles_n;
        return cge_launch(stream, gemm_fn, cge__blocks_for(tiles, 1, threads), p, sizeof *p);
    }
    if (uses_gemm(p)) {
        size_t need = gemm_workspace(p);
        /* Without the workspace the plan promised, fall back to the row loop
         * rather than fail: slower, same results. */
        if (ctx->workspace && ctx->workspace_size >= need) {
            uintptr_t base = ((uintptr_t)ctx->workspace + 63) & ~(uintptr_t)63;
            p->bp = (float *)base;
            p->bp_mat = cge__gemm_packed_b_floats(p->K, p->N);
            p->isa = cge__gemm_isa_best();
            cge__gemm_plan(p->batch, p->M, p->N, threads, &p->tiling);
            int64_t panels = (p->N + CGE_GEMM_NR - 1) / CGE_GEMM_NR;
            int64_t nb = cge__blocks_for(p->b_count * panels,
                                        p->K >= 4096 ? 1 : 4096 / p->K, threads);
            cge_status st = cge_launch(stream, pack_b_fn, nb, p, sizeof *p);
            if (st != CGE_OK)
                return st;
            int64_t tiles = p->batch * p->tiling.tiles_m * p->tiling.tiles_n;
            return cge_launch(stream, gemm_fn, cge__blocks_for(tiles, 1, threads), p, sizeof *p);
        }
    }
    int64_t rows = p->batch * p->M;
    int64_t per_row = p->N * (p->K > 0 ? p->K : 1);
    int64_t min_rows = per_row >= 32768 ? 1 : 32768 / per_row;
    return cge_launch(stream, rows_fn(p->dtype), cge__blocks_for(rows, min_rows, threads), p,
                      sizeof *p);
}

/* Checks shared by both launches: buffers present, dtype handled. */
static cge_status check_io(const cge_kernel_ctx *ctx, int32_t need_inputs)
{
    if (ctx->num_inputs < need_inputs || ctx->num_outputs < 1 || !ctx->outputs[0].data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffers");
    for (int32_t i = 0; i < need_inputs; i++)
        if (!ctx->inputs[i].data && cge_shape_numel(&ctx->inputs[i].shape) != 0)
            return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "input %d has no buffer", i);
    cge_dtype t = ctx->inputs[0].dtype;
    if (!rows_fn(t) || ctx->inputs[1].dtype != t || ctx->outputs[0].dtype != t)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "unsupported dtypes %s x %s -> %s",
                                cge_dtype_name(t), cge_dtype_name(ctx->inputs[1].dtype),
                                cge_dtype_name(ctx->outputs[0].dtype));
    return CGE_OK;
}

static void matmul_args(const cge_kernel_ctx *ctx, mm_args *p)
{
    memset(p, 0, sizeof *p);
    p->dtype = ctx->inputs[0].dtype;
    p->a = ctx->inputs[0].data;
    p->b = ctx->inputs[1].data;
    p->y = ctx->outputs[0].data;
    p->alpha = 1.0f;
    p->int_exact = 1;
    matmul_layout(&ctx->inputs[0].shape, &ctx->inputs[1].shape, p);
}

static size_t matmul_workspace(const cge_kernel_ctx *ctx)
{
    if (ctx->num_inputs < 2 || ctx->inputs[0].shape.rank < 1 || ctx->inputs[1].shape.rank < 1 ||
        !cge_shape_is_static(&ctx->inputs[0].shape) || !cge_shape_is_static(&ctx->inputs[1].shape))
        return 0;
    mm_args p;
    matmul_args(ctx, &p);
    return gemm_workspace(&p);
}

static cge_status matmul_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    cge_status st = check_io(ctx, 2);
    if (st != CGE_OK)
        return st;
    const cge_shape *as = &ctx->inputs[0].shape, *bs = &ctx->inputs[1].shape;
    if (as->rank < 1 || bs->rank < 1)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "inputs must have rank >= 1");
    mm_args p;
    matmul_args(ctx, &p);
    int64_t kb = bs->rank >= 2 ? bs->dims[bs->rank - 2] : bs->dims[0];
    if (kb != p.K || cge_shape_numel(&ctx->outputs[0].shape) != p.batch * p.M * p.N)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "input and output shapes do not agree");
    if (p.K == 0) /* empty sum: zeros (all-zero bits in every dtype here) */
        return p.batch * p.M * p.N == 0
                   ? CGE_OK
                   : cge_memset_async(stream, p.y, 0,
                                      (size_t)(p.batch * p.M * p.N) * cge_dtype_size(p.dtype));
    return mm_enqueue(ctx, stream, &p);
}

/* ---- Gemm ------------------------------------------------------------------ */

static cge_status gemm_infer(cge_infer_ctx *ctx)
{
    if (ctx->num_inputs < 2 || ctx->num_outputs < 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "needs inputs A, B and output Y");
    const cge_tensor_desc *A = &ctx->inputs[0], *B = &ctx->inputs[1];
    const cge_tensor_desc *C = ctx->num_inputs > 2 && ctx->inputs[2].dtype != CGE_DTYPE_UNDEFINED
                                   ? &ctx->inputs[2]
                                   : NULL;
    char sa[CGE_SHAPE_STR_MAX], sb[CGE_SHAPE_STR_MAX], sc[CGE_SHAPE_STR_MAX];
    cge_shape_str(&A->shape, sa, sizeof sa);
    cge_shape_str(&B->shape, sb, sizeof sb);
    if (A->dtype != B->dtype || (C && C->dtype != A->dtype))
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "A is %s, B is %s%s%s: they must agree",
                              cge_dtype_name(A->dtype), cge_dtype_name(B->dtype),
                              C ? ", C is " : "", C ? cge_dtype_name(C->dtype) : "");
    if (A->shape.rank != 2 || B->shape.rank != 2)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "A %s and B %s must both have rank 2", sa, sb);
    int ta = cge_attrs_get_int(ctx->attrs, "transA", 0) != 0;
    int tb = cge_attrs_get_int(ctx->attrs, "transB", 0) != 0;
    int64_t M = A->shape.dims[ta ? 1 : 0], ka = A->shape.dims[ta ? 0 : 1];
    int64_t kb = B->shape.dims[tb ? 1 : 0], N = B->shape.dims[tb ? 0 : 1];
    if (ka >= 0 && kb >= 0 && ka != kb)
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "A %s (transA=%d) and B %s (transB=%d): inner dimensions %lld and "
                              "%lld differ",
                              sa, ta, sb, tb, (long long)ka, (long long)kb);
    if (C) {
        cge_shape_str(&C->shape, sc, sizeof sc);
        int32_t rc = C->shape.rank;
        int ok = rc <= 2;
        int64_t want[2] = {M, N};
        for (int32_t d = 0; ok && d < rc; d++) {
            int64_t c = C->shape.dims[d], w = want[2 - rc + d];
            /* Unknown sizes must still be 1 or the output's: trust them. */
            if (c != 1 && c >= 0 && w >= 0 && c != w)
                ok = 0;
        }
        if (!ok)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "C %s does not broadcast to [%lld,%lld]",
                                  sc, (long long)M, (long long)N);
    }
    ctx->outputs[0].dtype = A->dtype;
    ctx->outputs[0].shape = CGE_SHAPE(M, N);
    return CGE_OK;
}

/* `with_data`: the buffers must be there (launch); planning asks for the
 * workspace before any data exists. */
static cge_status gemm_args(const cge_kernel_ctx *ctx, mm_args *p, bool with_data)
{
    memset(p, 0, sizeof *p);
    const cge_tensor *A = &ctx->inputs[0], *B = &ctx->inputs[1];
    const cge_tensor *C = ctx->num_inputs > 2 && ctx->inputs[2].dtype != CGE_DTYPE_UNDEFINED
                              ? &ctx->inputs[2]
                              : NULL;
    if (A->shape.rank != 2 || B->shape.rank != 2 || (C && C->shape.rank > 2))
        return CGE_ERR_SHAPE;
    int ta = cge_attrs_get_int(ctx->attrs, "transA", 0) != 0;
    int tb = cge_attrs_get_int(ctx->attrs, "transB", 0) != 0;
    p->dtype = A->dtype;
    p->a = A->data;
    p->b = B->data;
    p->y = ctx->outputs[0].data;
    p->M = A->shape.dims[ta ? 1 : 0];
    p->K = A->shape.dims[ta ? 0 : 1];
    p->N = B->shape.dims[tb ? 0 : 1];
    if (B->shape.dims[tb ? 1 : 0] != p->K)
        return CGE_ERR_SHAPE;
    p->a_rs = ta ? 1 : p->K;
    p->a_cs = ta ? p->M : 1;
    p->b_rs = tb ? 1 : p->N;
    p->b_cs = tb ? p->K : 1;
    p->a_mat = p->M * p->K;
    p->b_mat = p->K * p->N;
    p->batch = 1;
    p->b_count = 1;
    p->alpha = cge_attrs_get_float(ctx->attrs, "alpha", 1.0f);
    p->beta = cge_attrs_get_float(ctx->attrs, "beta", 1.0f);
    /* beta == 0 ignores C entirely, as ONNX's reference does. */
    if (C && p->beta != 0.0f) {
        int32_t rc = C->shape.rank;
        int64_t cm = rc == 2 ? C->shape.dims[0] : 1, cn = rc >= 1 ? C->shape.dims[rc - 1] : 1;
        if ((cm != 1 && cm != p->M) || (cn != 1 && cn != p->N))
            return CGE_ERR_SHAPE;
        if (with_data && !C->data && cm * cn != 0)
            return CGE_ERR_INVALID_ARG;
        p->bias = C->data;
        p->bias_rs = cm == 1 ? 0 : cn;
        p->bias_cs = cn == 1 ? 0 : 1;
    }
    p->int_exact = p->alpha == 1.0f && (!p->bias || p->beta == 1.0f);
    return CGE_OK;
}

static size_t gemm_workspace_size(const cge_kernel_ctx *ctx)
{
    mm_args p;
    if (ctx->num_inputs < 2 || !cge_shape_is_static(&ctx->inputs[0].shape) ||
        !cge_shape_is_static(&ctx->inputs[1].shape) || gemm_args(ctx, &p, false) != CGE_OK)
        return 0;
    return gemm_workspace(&p);
}

/* K == 0: Y = beta * C (or zeros). */
static void gemm_empty_fn(int64_t blk, int64_t nblk, void *args)
{
    const mm_args *p = args;
    int64_t e0, e1;
    cge__block_range(p->M * p->N, blk, nblk, &e0, &e1);
    for (int64_t e = e0; e < e1; e++) {
        int64_t i = e / p->N, j = e % p->N;
        double v = p->bias ? (double)p->beta * cge__load_as_double(p->dtype, p->bias,
                                                                  i * p->bias_rs + j * p->bias_cs)
                           : 0.0;
        cge__store_from_double(p->dtype, p->y, e, v);
    }
}

static cge_status gemm_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    cge_status st = check_io(ctx, 2);
    if (st != CGE_OK)
        return st;
    mm_args p;
    st = gemm_args(ctx, &p, true);
    if (st != CGE_OK)
        return cge_kernel_error(ctx, st, "A, B and C shapes do not fit Gemm");
    if (p.bias && ctx->inputs[2].dtype != p.dtype)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "C must have the dtype of A");
    if (!cge_shape_equal(&ctx->outputs[0].shape, &CGE_SHAPE(p.M, p.N)))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output shape does not agree with A and B");
    if (p.M == 0 || p.N == 0)
        return CGE_OK;
    if (p.K == 0)
        return cge_launch(stream, gemm_empty_fn, cge__blocks_for(p.M * p.N, 16384, ctx->num_threads),
                          &p, sizeof p);
    return mm_enqueue(ctx, stream, &p);
}

/* ---- definitions ------------------------------------------------------------ */

static const cge_arg_def matmul_inputs[] = {
    {"A", 0, MM_DTYPES, "N-dimensional matrix A"},
    {"B", 0, MM_DTYPES, "N-dimensional matrix B"},
};
static const cge_arg_def matmul_outputs[] = {{"Y", 0, MM_DTYPES, "Matrix product"}};
static const cge_kernel_def matmul_kernels[] = {{
    .engine = "cpu",
    .dtypes = MM_DTYPES,
    .launch = matmul_launch,
    .workspace_size = matmul_workspace,
    .inplace_input = -1,
}};

static const cge_arg_def gemm_inputs[] = {
    {"A", 0, MM_DTYPES, "[M,K], or [K,M] with transA"},
    {"B", 0, MM_DTYPES, "[K,N], or [N,K] with transB"},
    {"C", CGE_ARG_OPTIONAL, MM_DTYPES, "bias, unidirectionally broadcast to [M,N]"},
};
static const cge_arg_def gemm_outputs[] = {{"Y", 0, MM_DTYPES, "[M,N]"}};
static const cge_attr_def gemm_attrs[] = {
    {"alpha", CGE_ATTR_FLOAT, false, 0, 1.0f, NULL, "scale of A * B"},
    {"beta", CGE_ATTR_FLOAT, false, 0, 1.0f, NULL, "scale of C"},
    {"transA", CGE_ATTR_INT, false, 0, 0.0f, NULL, "transpose A"},
    {"transB", CGE_ATTR_INT, false, 0, 0.0f, NULL, "transpose B"},
};
static const cge_kernel_def gemm_kernels[] = {{
    .engine = "cpu",
    .dtypes = MM_DTYPES,
    .launch = gemm_launch,
    .workspace_size = gemm_workspace_size,
    .inplace_input = -1,
}};

static const cge_op_def matmul_ops[] = {
    {
        .name = "MatMul",
        .domain = CGE_DOMAIN_DEFAULT,
        .since_version = 13,
        .inputs = matmul_inputs,
        .num_inputs = 2,
        .outputs = matmul_outputs,
        .num_outputs = 1,
        .infer = matmul_infer,
        .kernels = matmul_kernels,
        .num_kernels = 1,
        .doc = "Matrix product with numpy.matmul semantics.",
    },
    {
        .name = "Gemm",
        .domain = CGE_DOMAIN_DEFAULT,
        .since_version = 13,
        .inputs = gemm_inputs,
        .num_inputs = 3,
        .outputs = gemm_outputs,
        .num_outputs = 1,
        .attrs = gemm_attrs,
        .num_attrs = 4,
        .infer = gemm_infer,
        .kernels = gemm_kernels,
        .num_kernels = 1,
        .doc = "Y = alpha * A' * B' + beta * C.",
    },
};

const cge_op_def *cge__ops_matmul(int32_t *count)
{
    *count = (int32_t)(sizeof matmul_ops / sizeof matmul_ops[0]);
    return matmul_ops;
}
