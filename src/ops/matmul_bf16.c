/* cge.fused MatMulBF16: a float32 matrix product (FusedMatMul's bias and
 * activation included, or a batched MatMul) computed with bfloat16 operands
 * and float32 accumulation by oneDNN's matmul primitive (AMX-BF16 or
 * AVX512-BF16). The compiler's precision pass makes it. */
#include "ops/matmul_bf16.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cge/fused_ops.h"
#include "cge/model_file.h"
#include "ops/builtin.h"
#include "ops/fused_act.h"
#include "ops/kernel_util.h"
#include "ops/matmul_epilogue.h"

/* Why oneDNN and not a vdpbf16ps GEMM of cge's own: on this machine's CPU
 * (AMX-BF16) oneDNN's bf16 matmul measured ~1700 GFLOP/s on one core against
 * ~180 for float32, while vdpbf16ps can at best double float32's FMA rate
 * (32 products per instruction instead of 16). Activations are converted to
 * bfloat16 by cge's own blocks; the weights once, into oneDNN's layout. */

/* ---- float32 -> bfloat16 ------------------------------------------------------ */

#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#include <immintrin.h>
__attribute__((target("avx512f,avx512bf16,avx512vl"))) static void cvt_avx512(const float *src,
                                                                            uint16_t *dst,
                                                                            int64_t n)
{
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + i + 16), _mm512_loadu_ps(src + i));
        _mm512_storeu_si512((void *)(dst + i), (__m512i)v);
    }
    for (; i + 16 <= n; i += 16) {
        __m256bh v = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
        _mm256_storeu_si256((__m256i *)(dst + i), (__m256i)v);
    }
    for (; i < n; i++)
        dst[i] = cge_f32_to_bf16(src[i]);
}
#define HAVE_CVT_AVX512 1
#endif

#if defined(HAVE_CVT_AVX512) || defined(CGE_HAVE_DNNL)
/* cge_cpu_features is the one answer (src/base/cpu_features.c), read once. */
static int cpu_bf16(void)
{
    static int known = -1;
    if (known < 0)
        known = (cge_cpu_features() & CGE_CPU_AVX512BF16) != 0;
    return known;
}
#endif

void cge__f32_to_bf16_row(const float *src, uint16_t *dst, int64_t n)
{
#ifdef HAVE_CVT_AVX512
    if (cpu_bf16()) {
        cvt_avx512(src, dst, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++)
        dst[i] = cge_f32_to_bf16(src[i]);
}

/* ---- geometry ------------------------------------------------------------------ */

enum { ACT_NONE = CGE__MM_NONE, ACT_RELU, ACT_SIGMOID, ACT_TANH, ACT_GELU, ACT_GELU_TANH, ACT_LEAKY, ACT_CLIP, ACT_SILU };

/* The product as oneDNN sees it: `rank` dims each for A, B and C (batch
 * dims broadcast as in numpy). A 2-D B (the weights case) folds A's leading
 * dims into M. B's strides follow trans_b. */
typedef struct bmm_geom {
    int32_t rank;
    int64_t a[CGE_MAX_RANK], b[CGE_MAX_RANK], c[CGE_MAX_RANK];
    int64_t b_strides[CGE_MAX_RANK];
    int64_t M, N, K;
    int64_t a_numel, b_numel, c_numel;
    bool trans_b;
} bmm_geom;

static bool bmm_geometry(const cge_shape *as, const cge_shape *bs, bool trans_b, bmm_geom *g)
{
    memset(g, 0, sizeof *g);
    if (as->rank < 2 || bs->rank < 2 || (trans_b && bs->rank != 2))
        return false;
    for (int32_t d = 0; d < as->rank; d++)
        if (as->dims[d] < 0)
            return false;
    for (int32_t d = 0; d < bs->rank; d++)
        if (bs->dims[d] < 0)
            return false;
    g->trans_b = trans_b;
    g->K = as->dims[as->rank - 1];
    int64_t kb = trans_b ? bs->dims[1] : bs->dims[bs->rank - 2];
    g->N = trans_b ? bs->dims[0] : bs->dims[bs->rank - 1];
    if (kb != g->K)
        return false;
    if (bs->rank == 2) {
        int64_t rows = 1;
        for (int32_t d = 0; d < as->rank - 1; d++)
            rows *= as->dims[d];
        g->rank = 2;
        g->M = rows;
        g->a[0] = rows, g->a[1] = g->K;
        g->b[0] = g->K, g->b[1] = g->N;
        g->c[0] = rows, g->c[1] = g->N;
        g->b_strides[0] = trans_b ? 1 : g->N;
        g->b_strides[1] = trans_b ? g->K : 1;
    } else {
        int32_t r = as->rank > bs->rank ? as->rank : bs->rank;
        g->rank = r;
        for (int32_t d = 0; d < r; d++) {
            int32_t da = d - (r - as->rank), db = d - (r - bs->rank);
            g->a[d] = da >= 0 ? as->dims[da] : 1;
            g->b[d] = db >= 0 ? bs->dims[db] : 1;
            if (d < r - 2) {
                if (g->a[d] != g->b[d] && g->a[d] != 1 && g->b[d] != 1)
                    return false;
                g->c[d] = g->a[d] == 1 ? g->b[d] : g->a[d];
            }
        }
        g->M = g->a[r - 2];
        g->c[r - 2] = g->M;
        g->c[r - 1] = g->N;
        int64_t s = 1;
        for (int32_t d = r - 1; d >= 0; d--) {
            g->b_strides[d] = s;
            s *= g->b[d];
        }
    }
    g->a_numel = g->b_numel = g->c_numel = 1;
    for (int32_t d = 0; d < g->rank; d++) {
        g->a_numel *= g->a[d];
        g->b_numel *= g->b[d];
        g->c_numel *= g->c[d];
    }
    return true;
}

/* ---- meta ------------------------------------------------------------------------ */

static cge_status bmm_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *A = &ctx->inputs[0], *B = &ctx->inputs[1];
    bool tb = cge_attrs_get_int(ctx->attrs, "trans_b", 0) != 0;
    if (A->dtype != CGE_F32 || B->dtype != CGE_F32)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "only float32 A and B are supported");
    const cge_shape *as = &A->shape, *bs = &B->shape;
    if (as->rank < 2 || bs->rank < 2 || (tb && bs->rank != 2))
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "A must be [..., M, K] and B [K, N] or [..., K, N]%s",
                              tb ? " ([N, K] with trans_b)" : "");
    int64_t K = as->dims[as->rank - 1], kb = tb ? bs->dims[1] : bs->dims[bs->rank - 2];
    int64_t N = tb ? bs->dims[0] : bs->dims[bs->rank - 1];
    if (K >= 0 && kb >= 0 && K != kb)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "A has K = %lld, B has %lld", (long long)K,
                              (long long)kb);
    cge_shape out = *as;
    if (bs->rank > 2) {
        int32_t r = as->rank > bs->rank ? as->rank : bs->rank;
        out.rank = r;
        for (int32_t d = 0; d < r - 2; d++) {
            int32_t da = d - (r - as->rank), db = d - (r - bs->rank);
            int64_t x = da >= 0 ? as->dims[da] : 1, y = db >= 0 ? bs->dims[db] : 1;
            if (x >= 0 && y >= 0 && x != y && x != 1 && y != 1)
                return cge_meta_error(ctx, CGE_ERR_SHAPE, "batch dims %lld and %lld do not broadcast",
                                      (long long)x, (long long)y);
            out.dims[d] = x == 1 ? y : y == 1 ? x : x < 0 ? y : x;
        }
        out.dims[r - 2] = as->dims[as->rank - 2];
    }
    out.dims[out.rank - 1] = N;
    if (cge__meta_has_input(ctx, 2)) {
        if (bs->rank != 2)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "a bias needs a 2-D B");
        int64_t bn = cge_shape_numel(&ctx->inputs[2].shape);
        if (ctx->inputs[2].dtype != CGE_F32 || (bn != N && N >= 0 && bn >= 0))
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "bias must be float32 with N elements");
    }
    if (cge__mm_act_from_name(cge_attrs_get_string(ctx->attrs, "activation", "none")) < 0)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "unknown activation '%s'",
                              cge_attrs_get_string(ctx->attrs, "activation", "none"));
    ctx->outputs[0].dtype = CGE_F32;
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

/* ---- the reference path (no oneDNN, no primitive, eager runs) ------------------------ */

typedef struct bmm_call {
    bmm_geom g;
    const float *a, *b, *bias;
    float *c;
    int act;
    float alpha, lo, hi;
    uint16_t *a16, *b16;          /* bf16 copies of A and (if converted per run) B */
    struct bmm_prim *prim;
    void *scratch;
} bmm_call;

static float act_apply(const bmm_call *k, float x)
{
    switch (k->act) {
    case ACT_RELU: return x < 0.0f ? 0.0f : x;
    case ACT_SIGMOID: return (float)cge__sigmoid_d(x);
    case ACT_TANH: return (float)tanh((double)x);
    case ACT_GELU: return cge__gelu_f(x);
    case ACT_GELU_TANH: return cge__gelu_tanh_f(x);
    case ACT_LEAKY: return x < 0.0f ? k->alpha * x : x;
    case ACT_CLIP: return x < k->lo ? k->lo : x > k->hi ? k->hi : x;
    case ACT_SILU: return x * (float)cge__sigmoid_d(x);
    default: return x;
    }
}

static inline float rbf(float x)
{
    return cge_bf16_to_f32(cge_f32_to_bf16(x));
}

/* Offset of batch index `bi` (of C's batch dims) in an operand of dims `d`. */
static int64_t batch_offset(const bmm_geom *g, const int64_t *d, int64_t bi, int64_t mat)
{
    int64_t off = 0, stride = mat;
    for (int32_t k = g->rank - 3; k >= 0; k--) {
        int64_t idx = bi % g->c[k];
        bi /= g->c[k];
        if (d[k] != 1)
            off += idx * stride;
        stride *= d[k];
    }
    return off;
}

/* Operands rounded to bfloat16 as the fast path rounds them, products summed
 * in float32: the same numbers up to the order of the sums. */
static void bmm_ref_fn(int64_t blk, int64_t nblk, void *p)
{
    const bmm_call *k = p;
    const bmm_geom *g = &k->g;
    int64_t batches = g->c_numel / (g->M * g->N > 0 ? g->M * g->N : 1), r0, r1;
    cge__block_range(batches * g->M, blk, nblk, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t bi = r / g->M, i = r % g->M;
        const float *a = k->a + batch_offset(g, g->a, bi, g->M * g->K) + i * g->K;
        const float *b = k->b + batch_offset(g, g->b, bi, g->K * g->N);
        float *c = k->c + bi * g->M * g->N + i * g->N;
        for (int64_t j = 0; j < g->N; j++) {
            float s = 0.0f;
            for (int64_t q = 0; q < g->K; q++)
                s += rbf(a[q]) * rbf(b[q * g->b_strides[g->rank - 2] + j * g->b_strides[g->rank - 1]]);
            if (k->bias)
                s += k->bias[j];
            c[j] = act_apply(k, s);
        }
    }
}

/* The attributes, read once when the plan is prepared (kept in the kernel's
 * state), or per launch where there is no state (eager runs). */
typedef struct bmm_opts {
    bool trans_b;
    int act;
    float alpha, lo, hi;
} bmm_opts;

static bool bmm_opts_parse(const cge_attrs *a, bmm_opts *o)
{
    o->trans_b = cge_attrs_get_int(a, "trans_b", 0) != 0;
    o->act = cge__mm_act_from_name(cge_attrs_get_string(a, "activation", "none"));
    o->alpha = cge_attrs_get_float(a, "alpha", 0.01f);
    o->lo = cge_attrs_get_float(a, "min", -INFINITY);
    o->hi = cge_attrs_get_float(a, "max", INFINITY);
    return o->act >= 0;
}

typedef struct bmm_state {
    bmm_opts o;
    struct bmm_prim *prim; /* NULL: the reference path */
} bmm_state;

static bool bmm_args(const cge_kernel_ctx *ctx, const bmm_opts *o, bmm_call *k)
{
    memset(k, 0, sizeof *k);
    if (ctx->num_inputs < 2 ||
        !bmm_geometry(&ctx->inputs[0].shape, &ctx->inputs[1].shape, o->trans_b, &k->g))
        return false;
    k->act = o->act;
    k->alpha = o->alpha;
    k->lo = o->lo;
    k->hi = o->hi;
    k->a = ctx->inputs[0].data;
    k->b = ctx->inputs[1].data;
    k->bias = cge__kernel_has_input(ctx, 2) ? ctx->inputs[2].data : NULL;
    k->c = ctx->outputs[0].data;
    return k->act >= 0;
}

static bool b_const(const cge_kernel_ctx *ctx)
{
    return cge_attrs_get_int(ctx->attrs, "b_const", 0) != 0 && ctx->inputs[1].shape.rank == 2;
}

/* ---- oneDNN -------------------------------------------------------------------------- */

#ifdef CGE_HAVE_DNNL
#include "ops/dnnl_common.h"

/* Threads: cge's own. The rows of a product with a 2-D B are cut into
 * slices, one per SPMD block, and each block runs a one-thread primitive on
 * its slice (converting its rows of A first, while they are hot). oneDNN's
 * OpenMP team is never started: on this 2-core machine, shared, its workers
 * spinning after each product took the cores from cge's pool and made whole
 * models 10-30x slower than the kernels' own time. Batched products (two
 * activations) run as one block. */

#define BMM_MAX_BLOCKS 64

typedef struct bmm_slot {       /* what one block touches: nothing is shared */
    dnnl_stream_t stream;
    dnnl_memory_t src, wei, bias, dst, scratch;
} bmm_slot;

typedef struct bmm_prim {
    dnnl_engine_t engine;
    dnnl_primitive_desc_t pd[2];    /* slices of rows_q rows, and the last of rows_r */
    dnnl_primitive_t prim[2], r_wei;
    dnnl_memory_t wei_user, wei_pack;
    dnnl_stream_t stream;           /* weight reorders */
    bmm_slot slot[BMM_MAX_BLOCKS];
    int32_t nblk;
    int64_t rows_q, rows_r;
    size_t scratch_bytes;           /* per block */
    bool packed_b;                  /* weights in oneDNN's own layout (constant B) */
    const void *wei_from;           /* the B the block below holds */
    void *wei_block;                /* cge_kernel_shared_get block, or NULL */
    void *wei_own;                  /* room for another B (made when one comes) */
} bmm_prim;

static void prim_destroy(bmm_prim *p)
{
    if (!p)
        return;
    for (int32_t b = 0; b < BMM_MAX_BLOCKS; b++) {
        bmm_slot *s = &p->slot[b];
        dnnl_memory_t mems[] = {s->src, s->wei, s->bias, s->dst, s->scratch};
        for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
            dnnl_memory_destroy(mems[i]);
        dnnl_stream_destroy(s->stream);
    }
    dnnl_memory_destroy(p->wei_user);
    dnnl_memory_destroy(p->wei_pack);
    dnnl_primitive_destroy(p->r_wei);
    for (int i = 0; i < 2; i++) {
        dnnl_primitive_destroy(p->prim[i]);
        dnnl_primitive_desc_destroy(p->pd[i]);
    }
    cge_kernel_shared_release(p->wei_block);
    free(p->wei_own);
    dnnl_stream_destroy(p->stream);
    dnnl_engine_destroy(p->engine);
    free(p);
}

static dnnl_alg_kind_t act_alg(int act)
{
    switch (act) {
    case ACT_RELU: case ACT_LEAKY: return dnnl_eltwise_relu;
    case ACT_SIGMOID: return dnnl_eltwise_logistic;
    case ACT_TANH: return dnnl_eltwise_tanh;
    case ACT_GELU: return dnnl_eltwise_gelu_erf;
    case ACT_GELU_TANH: return dnnl_eltwise_gelu_tanh;
    case ACT_CLIP: return dnnl_eltwise_clip;
    case ACT_SILU: return dnnl_eltwise_swish;
    default: return dnnl_alg_kind_undef;
    }
}

static const dnnl_format_tag_t plain_tags[] = {dnnl_a, dnnl_ab, dnnl_abc, dnnl_abcd, dnnl_abcde,
                                               dnnl_abcdef, dnnl_abcdefg, dnnl_abcdefgh};

/* The primitive descriptor for `rows` rows of A (2-D B) or the whole batched
 * product (rows < 0); `wmd` NULL lets oneDNN choose B's layout (packed) or
 * takes B plain. */
static int make_pd(const bmm_prim *p, const bmm_call *k, int64_t rows, bool has_bias, bool packed,
                   const dnnl_memory_desc_t *wmd, dnnl_primitive_desc_t *out)
{
    const bmm_geom *g = &k->g;
    int r = g->rank;
    dnnl_dims_t ad, bd, cd, bs, biasd;
    for (int d = 0; d < r; d++) {
        ad[d] = g->a[d];
        bd[d] = g->b[d];
        cd[d] = g->c[d];
        bs[d] = g->b_strides[d];
        biasd[d] = d == r - 1 ? g->N : 1;
    }
    if (rows >= 0)
        ad[0] = cd[0] = rows;
    dnnl_memory_desc_t amd, bmd, cmd, biasmd;
    dnnl_matmul_desc_t md;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_alg_kind_t alg = act_alg(k->act);
    float alpha = k->act == ACT_LEAKY ? k->alpha
                  : k->act == ACT_CLIP ? k->lo
                  : k->act == ACT_SILU ? 1.0f /* swish: x sigmoid(alpha x) */
                                       : 0.0f;
    float beta = k->act == ACT_CLIP ? k->hi : 0.0f;
    int ok =
        dnnl_memory_desc_init_by_tag(&amd, r, ad, dnnl_bf16, plain_tags[r - 1]) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(&cmd, r, cd, dnnl_f32, plain_tags[r - 1]) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(&biasmd, r, biasd, dnnl_f32, plain_tags[r - 1]) ==
            dnnl_success &&
        (wmd ? (bmd = *wmd, 1)
             : (packed ? dnnl_memory_desc_init_by_tag(&bmd, r, bd, dnnl_bf16, dnnl_format_tag_any)
                       : dnnl_memory_desc_init_by_strides(&bmd, r, bd, dnnl_bf16, bs)) ==
                   dnnl_success) &&
        dnnl_matmul_desc_init(&md, &amd, &bmd, has_bias ? &biasmd : NULL, &cmd) == dnnl_success &&
        dnnl_primitive_attr_create(&attr) == dnnl_success &&
        dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
        dnnl_post_ops_create(&po) == dnnl_success &&
        (alg == dnnl_alg_kind_undef ||
         dnnl_post_ops_append_eltwise(po, 1.0f, alg, alpha, beta) == dnnl_success) &&
        dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success &&
        dnnl_primitive_desc_create(out, &md, attr, p->engine, NULL) == dnnl_success;
    dnnl_primitive_attr_destroy(attr);
    dnnl_post_ops_destroy(po);
    return ok;
}

static const dnnl_memory_desc_t *pd_md(dnnl_primitive_desc_t pd, dnnl_query_t what)
{
    return dnnl_primitive_desc_query_md(pd, what, 0);
}

/* The primitives for k's product over up to `blocks` row slices; `packed`
 * lets oneDNN choose B's layout (B is then reordered, once per address). */
static cge_status prim_create(const bmm_call *k, bool has_bias, bool packed, int blocks,
                              bmm_prim **out)
{
    *out = NULL;
    bmm_prim *p = calloc(1, sizeof *p);
    if (!p)
        return CGE_ERR_NO_MEMORY;
    p->packed_b = packed;
    /* oneDNN's OpenMP at one thread, as everywhere in this file */
    int saved = cge__dnnl_omp_enter(1);
    const bmm_geom *g = &k->g;
    bool sliced = g->rank == 2;
    if (!sliced || blocks < 1)
        blocks = 1;
    if (blocks > BMM_MAX_BLOCKS)
        blocks = BMM_MAX_BLOCKS;
    int64_t M = g->M;
    p->rows_q = sliced ? (M + blocks - 1) / blocks : -1;
    if (p->rows_q == 0)
        p->rows_q = 1;
    p->nblk = sliced ? (int32_t)((M + p->rows_q - 1) / p->rows_q) : 1;
    if (p->nblk < 1)
        p->nblk = 1;
    p->rows_r = sliced ? M - (int64_t)(p->nblk - 1) * p->rows_q : -1;
    int ok = dnnl_engine_create(&p->engine, dnnl_cpu, 0) == dnnl_success &&
             dnnl_stream_create(&p->stream, p->engine, dnnl_stream_default_flags) == dnnl_success &&
             make_pd(p, k, p->rows_q, has_bias, packed, NULL, &p->pd[0]);
    /* The last slice takes the first's layout of B, so one copy serves both. */
    if (ok && p->rows_r != p->rows_q &&
        !make_pd(p, k, p->rows_r, has_bias, packed, pd_md(p->pd[0], dnnl_query_weights_md),
                 &p->pd[1]))
        ok = 0;
    for (int i = 0; ok && i < 2; i++)
        if (p->pd[i]) {
            ok = dnnl_primitive_create(&p->prim[i], p->pd[i]) == dnnl_success;
            size_t sb = ok ? dnnl_memory_desc_get_size(pd_md(p->pd[i], dnnl_query_scratchpad_md)) : 0;
            p->scratch_bytes = sb > p->scratch_bytes ? sb : p->scratch_bytes;
        }
    const dnnl_memory_desc_t *wmd = ok ? pd_md(p->pd[0], dnnl_query_weights_md) : NULL;
    for (int32_t b = 0; ok && b < p->nblk; b++) {
        bmm_slot *s = &p->slot[b];
        dnnl_primitive_desc_t pd = p->pd[b == p->nblk - 1 && p->pd[1] ? 1 : 0];
        dnnl_memory_desc_t sc;
        dnnl_dims_t sd = {(dnnl_dim_t)p->scratch_bytes};
        ok = dnnl_stream_create(&s->stream, p->engine, dnnl_stream_default_flags) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&sc, 1, sd, dnnl_u8, dnnl_a) == dnnl_success &&
             dnnl_memory_create(&s->src, pd_md(pd, dnnl_query_src_md), p->engine,
                                DNNL_MEMORY_NONE) == dnnl_success &&
             dnnl_memory_create(&s->dst, pd_md(pd, dnnl_query_dst_md), p->engine,
                                DNNL_MEMORY_NONE) == dnnl_success &&
             dnnl_memory_create(&s->wei, wmd, p->engine, DNNL_MEMORY_NONE) == dnnl_success &&
             dnnl_memory_create(&s->scratch, pd_md(pd, dnnl_query_scratchpad_md), p->engine,
                                DNNL_MEMORY_NONE) == dnnl_success;
        if (ok && has_bias)
            ok = dnnl_memory_create(&s->bias, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1),
                                    p->engine, DNNL_MEMORY_NONE) == dnnl_success;
    }
    if (ok && packed) {
        dnnl_memory_desc_t bumd;
        dnnl_dims_t bd = {g->b[0], g->b[1]}, bs = {g->b_strides[0], g->b_strides[1]};
        ok = dnnl_memory_desc_init_by_strides(&bumd, 2, bd, dnnl_f32, bs) == dnnl_success &&
             dnnl_memory_create(&p->wei_user, &bumd, p->engine, DNNL_MEMORY_NONE) == dnnl_success &&
             dnnl_memory_create(&p->wei_pack, wmd, p->engine, DNNL_MEMORY_NONE) == dnnl_success &&
             cge__dnnl_make_reorder(p->engine, &bumd, wmd, &p->r_wei);
    }
    cge__dnnl_omp_leave(saved);
    if (!ok) {
        prim_destroy(p);
        return CGE_ERR_UNSUPPORTED;
    }
    *out = p;
    return CGE_OK;
}

/* Reorder the float32 B at `b` into oneDNN's bf16 layout at `dst`. */
static int reorder_b(bmm_prim *p, const float *b, void *dst)
{
    int saved = cge__dnnl_omp_enter(1);
    int ok = dnnl_memory_set_data_handle(p->wei_user, (void *)b) == dnnl_success &&
             dnnl_memory_set_data_handle(p->wei_pack, dst) == dnnl_success &&
             cge__dnnl_run_reorder(p->stream, p->r_wei, p->wei_user, p->wei_pack) &&
             dnnl_stream_wait(p->stream) == dnnl_success;
    cge__dnnl_omp_leave(saved);
    return ok;
}

static size_t prim_weights_bytes(const bmm_prim *p)
{
    return dnnl_memory_desc_get_size(pd_md(p->pd[0], dnnl_query_weights_md));
}

/* The constant B reordered once, shared by the graph's plans: the key is B's
 * layout as oneDNN chose it (the memory descriptor holds all of it). The
 * slots' memories point at the block; the one made over it is not needed. */
static cge_status prim_prepack(bmm_prim *p, const cge_kernel_ctx *ctx, const float *b)
{
    dnnl_memory_t m = NULL;
    cge_status st = cge__dnnl_pack_shared(ctx, p->engine, p->stream, p->r_wei, p->wei_user,
                                          pd_md(p->pd[0], dnnl_query_weights_md), b, b, NULL, 0, 1,
                                          &p->wei_block, &m);
    dnnl_memory_destroy(m);
    if (!st)
        p->wei_from = b;
    return st;
}

/* The constant's memory rebound to another B: reordered into room of the
 * node's own (the shared block stays: other plans read it). One block, before
 * the product. */
static void rebind_fn(int64_t blk, int64_t nblk, void *args)
{
    (void)blk, (void)nblk;
    const bmm_call *k = args;
    bmm_prim *p = k->prim;
    if (!p->wei_own)
        p->wei_own = aligned_alloc(64, (prim_weights_bytes(p) + 63) & ~(size_t)63);
    if (!p->wei_own || !reorder_b(p, k->b, p->wei_own))
        cge_kernel_fail(CGE_ERR_INTERNAL, "MatMulBF16: reordering another B failed");
}

static void prim_run_fn(int64_t blk, int64_t nblk, void *args)
{
    (void)nblk;
    const bmm_call *k = args;
    bmm_prim *p = k->prim;
    if (blk >= p->nblk)
        return;
    const bmm_geom *g = &k->g;
    bmm_slot *s = &p->slot[blk];
    bool last = blk == p->nblk - 1 && p->prim[1];
    int64_t m0 = p->rows_q >= 0 ? blk * p->rows_q : 0;
    int64_t rows = p->rows_q < 0 ? 0 : last ? p->rows_r : p->rows_q;
    int64_t a_off = p->rows_q >= 0 ? m0 * g->K : 0, a_n = p->rows_q >= 0 ? rows * g->K : g->a_numel;
    int64_t c_off = p->rows_q >= 0 ? m0 * g->N : 0;
    cge__f32_to_bf16_row(k->a + a_off, k->a16 + a_off, a_n);
    if (!p->packed_b)
        cge__f32_to_bf16_row(k->b, k->b16, g->b_numel);
    void *w = !p->packed_b ? (void *)k->b16 : k->b == p->wei_from ? p->wei_block : p->wei_own;
    int saved = cge__dnnl_omp_enter(1);
    int ok = dnnl_memory_set_data_handle(s->src, k->a16 + a_off) == dnnl_success &&
             dnnl_memory_set_data_handle(s->wei, w) == dnnl_success &&
             dnnl_memory_set_data_handle(s->dst, k->c + c_off) == dnnl_success &&
             (!s->bias || dnnl_memory_set_data_handle(s->bias, (void *)k->bias) == dnnl_success) &&
             dnnl_memory_set_data_handle(s->scratch, (char *)k->scratch + blk * p->scratch_bytes) ==
                 dnnl_success;
    dnnl_exec_arg_t args5[5] = {{DNNL_ARG_SRC, s->src}, {DNNL_ARG_WEIGHTS, s->wei},
                                {DNNL_ARG_DST, s->dst}, {DNNL_ARG_SCRATCHPAD, s->scratch},
                                {DNNL_ARG_BIAS, s->bias}};
    ok = ok && dnnl_primitive_execute(p->prim[last ? 1 : 0], s->stream, k->bias ? 5 : 4, args5) ==
                   dnnl_success &&
         dnnl_stream_wait(s->stream) == dnnl_success;
    cge__dnnl_omp_leave(saved);
    if (!ok)
        cge_kernel_fail(CGE_ERR_INTERNAL, "MatMulBF16: oneDNN's matmul failed to run");
}

bool cge__bf16_available(void)
{
    return cpu_bf16() != 0;
}

#else /* no oneDNN: only the reference path */

typedef struct bmm_prim bmm_prim;
static void prim_destroy(bmm_prim *p) { (void)p; }

bool cge__bf16_available(void)
{
    return false;
}

#endif

/* ---- kernel ------------------------------------------------------------------------ */

static size_t align64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

#ifdef CGE_HAVE_DNNL
/* Row slices: one per thread, each of at least 16 rows (a decode step, M =
 * 1, is one block). */
static int bmm_blocks(const bmm_call *k, int threads)
{
    int64_t b = k->g.rank == 2 ? k->g.M / 16 : 1;
    if (b > threads)
        b = threads;
    return b < 1 ? 1 : (int)b;
}
#endif

/* Workspace: A (and a per-run B) in bfloat16, then each block's scratch. */
static size_t bmm_fixed_bytes(const bmm_call *k, bool packed)
{
    return align64((size_t)k->g.a_numel * 2) + 64 + (packed ? 0 : align64((size_t)k->g.b_numel * 2));
}

static size_t bmm_workspace(const cge_kernel_ctx *ctx)
{
    bmm_call k;
    bmm_opts o;
    if (!bmm_opts_parse(ctx->attrs, &o) || !bmm_args(ctx, &o, &k))
        return 0;
    size_t need = bmm_fixed_bytes(&k, b_const(ctx));
#ifdef CGE_HAVE_DNNL
    /* For at least as many threads as this machine has (a plan may be
     * compiled without the device it runs on), as Conv does. */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = ctx->num_threads > (int)cores ? ctx->num_threads : (int)(cores > 0 ? cores : 1);
    bmm_prim *p = NULL;
    if (cge__bf16_available() && k.g.c_numel * k.g.K > 0 &&
        prim_create(&k, ctx->num_inputs > 2 && ctx->inputs[2].dtype == CGE_F32, b_const(ctx),
                    bmm_blocks(&k, threads), &p) == CGE_OK) {
        need += align64(p->scratch_bytes * (size_t)p->nblk);
        prim_destroy(p);
    }
#endif
    return need;
}

static cge_status bmm_prepare(const cge_kernel_ctx *ctx, void **state)
{
    *state = NULL;
    bmm_state *s = calloc(1, sizeof *s);
    if (!s)
        return cge_kernel_error(ctx, CGE_ERR_NO_MEMORY, "out of memory");
    if (!bmm_opts_parse(ctx->attrs, &s->o)) {
        free(s);
        return CGE_OK; /* the launch reports the activation */
    }
    *state = s;
#ifdef CGE_HAVE_DNNL
    bmm_call k;
    if (!cge__bf16_available() || !bmm_args(ctx, &s->o, &k) || k.g.c_numel * k.g.K == 0)
        return CGE_OK;
    bool has_bias = ctx->num_inputs > 2 && ctx->inputs[2].dtype == CGE_F32;
    bool packed = b_const(ctx) && ctx->inputs[1].data;
    int blocks = bmm_blocks(&k, ctx->num_threads > 0 ? ctx->num_threads : 1);
    bmm_prim *p = NULL;
    cge_status made = prim_create(&k, has_bias, packed, blocks, &p);
    /* A workspace sized elsewhere (a model file from a smaller machine): as
     * many blocks as its scratch fits. */
    size_t fixed = bmm_fixed_bytes(&k, b_const(ctx));
    while (made == CGE_OK && blocks > 1 && ctx->workspace_size &&
           fixed + align64(p->scratch_bytes * (size_t)p->nblk) > ctx->workspace_size) {
        prim_destroy(p);
        p = NULL;
        made = prim_create(&k, has_bias, packed, --blocks, &p);
    }
    if (made != CGE_OK)
        return CGE_OK; /* the reference path runs it */
    if (packed) {
        cge_status st = prim_prepack(p, ctx, ctx->inputs[1].data);
        if (st) {
            prim_destroy(p);
            return cge_kernel_error(ctx, st, "oneDNN could not reorder B into bfloat16");
        }
    }
    s->prim = p;
#endif
    return CGE_OK;
}

static void bmm_release(void *state)
{
    bmm_state *s = state;
    if (s)
        prim_destroy(s->prim);
    free(s);
}

static cge_status bmm_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const bmm_state *s = ctx->state;
    bmm_opts o;
    if (s)
        o = s->o;
    else if (!bmm_opts_parse(ctx->attrs, &o))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "unknown activation");
    bmm_call k;
    if (!bmm_args(ctx, &o, &k))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "inputs do not form a matrix product");
    if (k.g.c_numel == 0)
        return CGE_OK;
    if (!k.a || !k.b || !k.c)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
#ifdef CGE_HAVE_DNNL
    bmm_prim *p = s ? s->prim : NULL;
    if (p && k.g.K > 0) {
        size_t a_bytes = align64((size_t)k.g.a_numel * 2);
        size_t b_bytes = p->packed_b ? 0 : align64((size_t)k.g.b_numel * 2);
        size_t need = 64 + a_bytes + b_bytes + align64(p->scratch_bytes * (size_t)p->nblk);
        if (ctx->workspace && ctx->workspace_size >= need) {
            uintptr_t base = ((uintptr_t)ctx->workspace + 63) & ~(uintptr_t)63;
            k.a16 = (uint16_t *)base;
            k.b16 = b_bytes ? (uint16_t *)(base + a_bytes) : NULL;
            k.scratch = (void *)(base + a_bytes + b_bytes);
            k.prim = p;
            cge_status st = CGE_OK;
            if (p->packed_b && k.b != p->wei_from)
                st = cge_launch(stream, rebind_fn, 1, &k, sizeof k);
            if (!st)
                st = cge_launch(stream, prim_run_fn, p->nblk, &k, sizeof k);
            return st;
        }
    }
#endif
    /* No primitive (eager runs, no oneDNN) or K = 0 (an empty sum: bias and
     * activation): the reference path. */
    int64_t rows = k.g.c_numel / (k.g.N > 0 ? k.g.N : 1);
    int64_t per = k.g.N * (k.g.K > 0 ? k.g.K : 1);
    return cge_launch(stream, bmm_ref_fn,
                      cge__blocks_for(rows, per >= 65536 ? 1 : 65536 / (per > 0 ? per : 1),
                                      ctx->num_threads),
                      &k, sizeof k);
}

/* ---- registration ------------------------------------------------------------------- */

static const cge_arg_def bmm_in[] = {
    {"A", 0, CGE_DT(CGE_F32), "[..., M, K]"},
    {"B", 0, CGE_DT(CGE_F32), "[K, N] ([N, K] with trans_b) or [..., K, N] (batched)"},
    {"bias", CGE_ARG_OPTIONAL, CGE_DT(CGE_F32), "N elements, added to every row (2-D B)"},
};
static const cge_arg_def bmm_out[] = {{"Y", 0, CGE_DT(CGE_F32), "act(A B + bias)"}};
static const cge_attr_def bmm_attrs[] = {
    CGE__MM_EPILOGUE_ATTR_DEFS,
    {.name = "b_const", .kind = CGE_ATTR_INT,
     .doc = "B is a constant: converted to bfloat16 once when the plan is made"},
};
static const cge_kernel_def bmm_kernels[] = {
    {.engine = "cpu", .dtypes = CGE_DT(CGE_F32), .launch = bmm_launch,
     .workspace_size = bmm_workspace, .prepare = bmm_prepare, .release = bmm_release,
     .inplace_input = -1}};

static const cge_op_def bmm_ops[] = {
    {.name = "MatMulBF16", .domain = CGE_DOMAIN_FUSED, .since_version = 1, .inputs = bmm_in,
     .num_inputs = 3, .outputs = bmm_out, .num_outputs = 1, .attrs = bmm_attrs, .num_attrs = 6,
     .infer = bmm_infer, .kernels = bmm_kernels, .num_kernels = 1,
     .doc = "float32 matrix product computed with bfloat16 operands and float32 accumulation"},
};

const cge_op_def *cge__ops_matmul_bf16(int32_t *count)
{
    *count = (int32_t)(sizeof bmm_ops / sizeof bmm_ops[0]);
    return bmm_ops;
}
