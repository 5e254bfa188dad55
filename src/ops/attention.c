/* cge.fused Attention: softmax(scale * Q K^T + mask) V in one kernel, made by
 * the compiler's fuse_attention pass. Keys are scored a chunk at a time with
 * a running-max (online) softmax, so no [M, N] score tensor is ever stored;
 * Q, K, V and the output are read and written through permutations (the
 * Transposes around the attention, folded away). */
/* Multiply-adds fused (FMA in the AVX2 / AVX-512 clones): this kernel sums in
 * its own order anyway, so it is not bit-equal to the unfused graph. */
#pragma GCC optimize("fp-contract=fast")

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu_isa.h"
#include "cge/fused_ops.h"
#include "ops/builtin.h"
#include "ops/fast_math.h"
#include "ops/kernel_util.h"

/* CGE_TARGET_CLONES' instruction sets, named by level so that the AVX2 and
 * AVX-512 clones have FMA too (GCC's "avx2" target does not). */
#if defined(__SANITIZE_THREAD__)
#define ATTN_CLONES
#else
#define ATTN_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif

/* Keys per chunk: one row's scores of a chunk live in 8 vectors of 8 floats. */
#define NC 64
/* Floats of the packed K^T chunk ([D][NC]) kept on the stack: D up to 256. */
#define KT_FLOATS (256 * NC)
/* Most rows of one work item (their running maxima and sums live on the
 * stack); a packed K^T chunk serves all of them, so items are as large as
 * the thread count allows. */
#define RB 256
/* Fewest rows of a work item that take the tiled path (attn_rows_tiled). */
#define TILE_MIN_ROWS 4

typedef float v8f __attribute__((vector_size(32)));
/* the same, at any float's alignment, for loads and stores */
typedef float v8u __attribute__((vector_size(32), aligned(4), may_alias));
typedef int32_t v8i __attribute__((vector_size(32)));
#define V8_MAX(a, b) ((v8f)((((v8i)(a)) & ((a) > (b))) | (((v8i)(b)) & ~((a) > (b)))))

enum { MASK_NONE = 0, MASK_ADD = 1, MASK_KEEP_TRUE = 2, MASK_KEEP_FALSE = 3 };
/* The tiled paths: attn_rows_tiled (AVX-512), attn_rows_tiled_avx2. */
enum { TILED_NONE = 0, TILED_AVX512 = 1, TILED_AVX2 = 2 };

typedef struct attn_args {
    const float *q, *k, *v;
    const void *mask;
    float *o;
    int32_t nb;                      /* batch dims (rank - 2) */
    int64_t bdim[CGE_MAX_RANK];      /* the output's batch dims */
    int64_t qb[CGE_MAX_RANK], kb[CGE_MAX_RANK], vb[CGE_MAX_RANK], ob[CGE_MAX_RANK],
        mb[CGE_MAX_RANK];            /* batch strides (0 where broadcast) */
    int64_t nbatch, M, N, D, Dv;
    int64_t q_m, q_d, k_n, k_d, v_n, o_m, mask_m, mask_n;
    int64_t rb, rblocks;             /* rows per item (<= RB), row blocks per batch entry */
    float scale, fill;
    int kind;
    int tiled;                       /* the tile path that may run (TILED_*) */
} attn_args;

/* The logical dims of a permuted input: logical dim i is source dim perm[i]. */
static bool get_perm(const cge_attrs *attrs, const char *name, int32_t r, int32_t *perm)
{
    const int64_t *p = NULL;
    int64_t n = cge_attrs_get_ints(attrs, name, &p);
    if (n <= 0) {
        for (int32_t i = 0; i < r; i++)
            perm[i] = i;
        return true;
    }
    if (n != r)
        return false;
    bool seen[CGE_MAX_RANK] = {false};
    for (int32_t i = 0; i < r; i++) {
        if (p[i] < 0 || p[i] >= r || seen[p[i]])
            return false;
        seen[p[i]] = true;
        perm[i] = (int32_t)p[i];
    }
    return true;
}

/* Two dims that must agree, where both are known now. */
static bool dims_clash(int64_t a, int64_t b)
{
    return cge_dim_is_known(a) && cge_dim_is_known(b) && a != b;
}

static cge_status attn_infer(cge_infer_ctx *ctx)
{
    if (ctx->num_inputs < 3 || ctx->num_outputs != 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "needs Q, K, V (and an optional mask)");
    const cge_tensor_desc *q = &ctx->inputs[0], *k = &ctx->inputs[1], *v = &ctx->inputs[2];
    int32_t r = q->shape.rank;
    if (q->dtype != CGE_F32 || k->dtype != CGE_F32 || v->dtype != CGE_F32)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "Q, K and V must be float32");
    if (r < 2 || k->shape.rank != r || v->shape.rank != r)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "Q, K and V must have one rank >= 2 (got %d, %d, %d)",
                              (int)r, (int)k->shape.rank, (int)v->shape.rank);
    int32_t qp[CGE_MAX_RANK], kp[CGE_MAX_RANK], vp[CGE_MAX_RANK], op[CGE_MAX_RANK];
    if (!get_perm(ctx->attrs, "q_perm", r, qp) || !get_perm(ctx->attrs, "k_perm", r, kp) ||
        !get_perm(ctx->attrs, "v_perm", r, vp) || !get_perm(ctx->attrs, "out_perm", r, op))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "a permutation attribute is not a permutation of %d axes",
                              (int)r);
    if (vp[r - 1] != r - 1 || op[r - 1] != r - 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "v_perm and out_perm must keep the last axis last");
    int64_t lq[CGE_MAX_RANK], lk[CGE_MAX_RANK], lv[CGE_MAX_RANK], lo[CGE_MAX_RANK];
    for (int32_t i = 0; i < r; i++) {
        lq[i] = q->shape.dims[qp[i]];
        lk[i] = k->shape.dims[kp[i]];
        lv[i] = v->shape.dims[vp[i]];
    }
    if (dims_clash(lq[r - 1], lk[r - 1]) || dims_clash(lk[r - 2], lv[r - 2]))
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "Q's head size %lld and K's %lld, or K's keys %lld and V's %lld, differ",
                              (long long)lq[r - 1], (long long)lk[r - 1], (long long)lk[r - 2],
                              (long long)lv[r - 2]);
    for (int32_t i = 0; i < r - 2; i++) {
        int64_t d = lq[i];
        if (d == 1 && lk[i] != 1)
            d = lk[i];
        if (d == 1 && lv[i] != 1)
            d = lv[i];
        if ((lk[i] != 1 && dims_clash(d, lk[i])) || (lv[i] != 1 && dims_clash(d, lv[i])) ||
            (lq[i] != 1 && dims_clash(d, lq[i])))
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "batch axis %d: Q, K and V have %lld, %lld, %lld",
                                  (int)i, (long long)lq[i], (long long)lk[i], (long long)lv[i]);
        lo[i] = d;
    }
    lo[r - 2] = lq[r - 2];
    lo[r - 1] = lv[r - 1];
    int64_t kind = cge_attrs_get_int(ctx->attrs, "mask_kind", MASK_NONE);
    bool has_mask = cge__meta_has_input(ctx, 3);
    if (kind < MASK_NONE || kind > MASK_KEEP_FALSE || has_mask != (kind != MASK_NONE))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "mask_kind %lld does not match the inputs",
                              (long long)kind);
    if (has_mask) {
        const cge_tensor_desc *m = &ctx->inputs[3];
        if (m->dtype != (kind == MASK_ADD ? CGE_F32 : CGE_BOOL))
            return cge_meta_error(ctx, CGE_ERR_DTYPE, "the mask must be %s",
                                  kind == MASK_ADD ? "float32 (added)" : "bool (kept where selected)");
        if (m->shape.rank > r)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "the mask has rank %d, above the scores' %d",
                                  (int)m->shape.rank, (int)r);
        for (int32_t j = 0; j < m->shape.rank; j++) {
            int32_t i = r - m->shape.rank + j;
            int64_t want = i == r - 1 ? lk[r - 2] : lo[i];
            int64_t d = m->shape.dims[j];
            if (d != 1 && dims_clash(d, want))
                return cge_meta_error(ctx, CGE_ERR_SHAPE, "mask axis %d is %lld; the scores have %lld",
                                      (int)j, (long long)d, (long long)want);
        }
    }
    ctx->outputs[0].dtype = CGE_F32;
    ctx->outputs[0].shape.rank = r;
    for (int32_t j = 0; j < r; j++)
        ctx->outputs[0].shape.dims[j] = lo[op[j]];
    return CGE_OK;
}

static void strides_of(const cge_shape *s, int64_t *st)
{
    int64_t acc = 1;
    for (int32_t i = s->rank - 1; i >= 0; i--) {
        st[i] = acc;
        acc *= s->dims[i];
    }
}

/* Vectors never cross a call (their ABI depends on the instruction set of
 * the clone): loads, stores and sums are macros. */
#define LD8(p) (*(const v8u *)(const void *)(p))
#define ST8(p, x) (*(v8u *)(void *)(p) = (x))
#define HSUM8(x, out)                                                                     \
    do {                                                                                  \
        float t_[8];                                                                      \
        memcpy(t_, &(x), sizeof t_);                                                      \
        (out) = ((t_[0] + t_[4]) + (t_[1] + t_[5])) + ((t_[2] + t_[6]) + (t_[3] + t_[7])); \
    } while (0)

/* Whether key n is kept for row m (only for the Where-form masks). */
static inline __attribute__((always_inline)) bool kept(const attn_args *a, const unsigned char *mrow, int64_t n)
{
    bool sel = mrow[n * a->mask_n] != 0;
    return a->kind == MASK_KEEP_TRUE ? sel : !sel;
}

/* The mask on one row's chunk of scores (packed: the dot products were all
 * made, so dropped scores are replaced here). */
static inline __attribute__((always_inline)) void mask_chunk(const attn_args *a, const void *mrow,
                                                             int64_t n0, int64_t nc, bool packed,
                                                             float *s)
{
    if (a->kind == MASK_ADD) {
        const float *mr = mrow;
        for (int64_t j = 0; j < nc; j++)
            s[j] += mr[(n0 + j) * a->mask_n];
    } else if (packed && a->kind != MASK_NONE) {
        for (int64_t j = 0; j < nc; j++)
            if (!kept(a, mrow, n0 + j))
                s[j] = a->fill;
    }
}

/* One row's chunk of scores s[0..nc): from a packed K^T chunk when kt is
 * given, else by a dot product per key (the one-row path: packing would read
 * K as often as scoring it). Scaled and masked. */
static inline __attribute__((always_inline)) void score_chunk(const attn_args *a, const float *qr, const float *kc, const float *kt,
                               const void *mrow, int64_t n0, int64_t nc, float *s)
{
    const int64_t D = a->D;
    if (kt) {
        v8f acc[NC / 8] = {{0}};
        int64_t nv = (nc + 7) / 8;
        if (nv == NC / 8) { /* a whole chunk: the 8 sums stay in registers */
            for (int64_t d = 0; d < D; d++) {
                float qv = qr[d * a->q_d];
                v8f qb = {qv, qv, qv, qv, qv, qv, qv, qv};
                const float *kr = kt + d * NC;
                for (int t = 0; t < NC / 8; t++)
                    acc[t] += qb * LD8(kr + 8 * t);
            }
        } else {
            for (int64_t d = 0; d < D; d++) {
                float qv = qr[d * a->q_d];
                v8f qb = {qv, qv, qv, qv, qv, qv, qv, qv};
                const float *kr = kt + d * NC;
                for (int64_t t = 0; t < nv; t++)
                    acc[t] += qb * LD8(kr + 8 * t);
            }
        }
        v8f sc = {a->scale, a->scale, a->scale, a->scale, a->scale, a->scale, a->scale, a->scale};
        for (int64_t t = 0; t < nv; t++)
            ST8(s + 8 * t, acc[t] * sc);
    } else {
        for (int64_t j = 0; j < nc; j++) {
            if ((a->kind == MASK_KEEP_TRUE || a->kind == MASK_KEEP_FALSE) &&
                !kept(a, mrow, n0 + j)) {
                s[j] = a->fill; /* replaced by the mask: not worth a dot product */
                continue;
            }
            const float *kr = kc + j * a->k_n;
            float dot;
            if (a->k_d == 1 && a->q_d == 1) {
                v8f x0 = {0}, x1 = {0};
                int64_t d = 0;
                for (; d + 16 <= D; d += 16) {
                    x0 += LD8(qr + d) * LD8(kr + d);
                    x1 += LD8(qr + d + 8) * LD8(kr + d + 8);
                }
                v8f xs = x0 + x1;
                HSUM8(xs, dot);
                for (; d < D; d++)
                    dot += qr[d] * kr[d];
            } else {
                dot = 0.0f;
                for (int64_t d = 0; d < D; d++)
                    dot += qr[d * a->q_d] * kr[d * a->k_d];
            }
            s[j] = dot * a->scale;
        }
    }
    mask_chunk(a, mrow, n0, nc, kt != NULL, s);
}

/* Two rows' scores of a whole chunk from the packed K^T: each K^T load
 * serves both rows (the product is bound by loads, not multiply-adds). */
static inline __attribute__((always_inline)) void score_pair(const attn_args *a, const float *q0,
                                                             const float *q1, const float *kt,
                                                             float *s0, float *s1)
{
    v8f x[NC / 8] = {{0}}, y[NC / 8] = {{0}};
    for (int64_t d = 0; d < a->D; d++) {
        float u = q0[d * a->q_d], w = q1[d * a->q_d];
        v8f ub = {u, u, u, u, u, u, u, u}, wb = {w, w, w, w, w, w, w, w};
        const float *kr = kt + d * NC;
        for (int t = 0; t < NC / 8; t++) {
            v8f k8 = LD8(kr + 8 * t);
            x[t] += ub * k8;
            y[t] += wb * k8;
        }
    }
    v8f sc = {a->scale, a->scale, a->scale, a->scale, a->scale, a->scale, a->scale, a->scale};
    for (int t = 0; t < NC / 8; t++) {
        ST8(s0 + 8 * t, x[t] * sc);
        ST8(s1 + 8 * t, y[t] * sc);
    }
}

/* Folds one chunk of scores into a row's running maximum *mx, sum *l and
 * unnormalised output o[0..Dv). */
static inline __attribute__((always_inline)) void fold_chunk(const attn_args *a, const float *vc, float *s, int64_t nc, float *mx,
                              float *l, float *o)
{
    const int64_t Dv = a->Dv;
    /* s has room for NC: pad to whole vectors with -inf (weight 0) */
    int64_t nv = (nc + 7) / 8;
    for (int64_t j = nc; j < nv * 8; j++)
        s[j] = -INFINITY;
    v8f vm = LD8(s);
    for (int64_t t = 1; t < nv; t++) {
        v8f x = LD8(s + 8 * t);
        vm = V8_MAX(x, vm);
    }
    float cm, mt[8];
    memcpy(mt, &vm, sizeof mt);
    cm = mt[0];
    for (int i = 1; i < 8; i++)
        cm = mt[i] > cm ? mt[i] : cm;
    float nm = cm > *mx ? cm : *mx;
    if (nm == -INFINITY)
        return; /* every score so far is -inf: nothing to weigh yet */
    if (nm != *mx) {
        float alpha = cge__expf_fast(*mx - nm);
        *l *= alpha;
        for (int64_t d = 0; d < Dv; d++)
            o[d] *= alpha;
        *mx = nm;
    }
    for (int64_t j = 0; j < nv * 8; j++) /* no reduction here: this loop vectorises */
        s[j] = cge__expf_fast(s[j] - nm);
    v8f vs = {0};
    for (int64_t t = 0; t < nv; t++)
        vs += LD8(s + 8 * t);
    float sum;
    HSUM8(vs, sum);
    *l += sum;
    /* o += sum_j s[j] V[j], 64 columns at a time held in registers; weight-0
     * keys (masked, or far below the maximum) skipped */
    int64_t d0 = 0;
    for (; d0 + 64 <= Dv; d0 += 64) {
        v8f acc[8];
        for (int t = 0; t < 8; t++)
            acc[t] = LD8(o + d0 + 8 * t);
        for (int64_t j = 0; j < nc; j++) {
            float w = s[j];
            if (w == 0.0f)
                continue;
            v8f wb = {w, w, w, w, w, w, w, w};
            const float *vr = vc + j * a->v_n + d0;
            for (int t = 0; t < 8; t++)
                acc[t] += wb * LD8(vr + 8 * t);
        }
        for (int t = 0; t < 8; t++)
            ST8(o + d0 + 8 * t, acc[t]);
    }
    for (int64_t j = 0; j < nc && d0 < Dv; j++) {
        float w = s[j];
        if (w == 0.0f)
            continue;
        const float *vr = vc + j * a->v_n;
        v8f wb = {w, w, w, w, w, w, w, w};
        int64_t d = d0;
        for (; d + 8 <= Dv; d += 8)
            ST8(o + d, LD8(o + d) + wb * LD8(vr + d));
        for (; d < Dv; d++)
            o[d] += w * vr[d];
    }
}

/* ---- the tiled path: TM query rows against a chunk of NC keys --------------
 * The row path above loads each V row once per query row, and each packed
 * K^T vector for two rows: it is bound by loads, and took 1.2-1.6x the time
 * of the unfused graph (two packed GEMMs, Softmax) at 64-256 rows (one
 * thread, CPU time). Here a tile of TM rows x
 * 64 keys is scored in AVX-512 registers (24 accumulators; one K^T load
 * serves TM rows), its softmax weights go to an L1 tile, and P V is summed
 * TM rows at a time (one V load serves TM rows): about 2.4 multiply-adds per
 * load instead of 1-2. */
#if defined(__x86_64__)
#include <immintrin.h>

#define TM 6
#define AVX512_FN __attribute__((target("avx512f")))
#define AVX512_INLINE __attribute__((target("avx512f"), always_inline)) static inline

/* cge__expf_fast on 16 lanes (the same polynomial; 2^n by scalef): lanes
 * below -87.33 (a dropped key's -inf) are exactly 0, NaN stays NaN. */
AVX512_INLINE __m512 exp16(__m512 x)
{
    const __m512 lo = _mm512_set1_ps(-87.33f);
    __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    __m512 xc = _mm512_max_ps(lo, x); /* the second operand on NaN: x */
    xc = _mm512_min_ps(_mm512_set1_ps(88.72f), xc);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_maskz_mov_ps((__mmask16)~under, _mm512_scalef_ps(p, n));
}

/* Whether every score of rows [m, m + rows) x keys [n0, n0 + nc) is dropped
 * by the mask (weight exactly 0: an added -inf, or a bool mask whose fill is
 * -inf): a causal mask's upper blocks are skipped whole. */
static bool tile_dropped(const attn_args *a, const char *mask, int64_t m, int64_t rows, int64_t n0,
                         int64_t nc)
{
    if (a->kind == MASK_NONE || (a->kind != MASK_ADD && a->fill != -INFINITY))
        return false;
    for (int64_t r = 0; r < rows; r++) {
        if (a->kind == MASK_ADD) {
            const float *mr = (const float *)(const void *)mask + (m + r) * a->mask_m;
            for (int64_t j = 0; j < nc; j++)
                if (mr[(n0 + j) * a->mask_n] != -INFINITY)
                    return false;
        } else {
            const unsigned char *mr = (const unsigned char *)mask + (m + r) * a->mask_m;
            for (int64_t j = 0; j < nc; j++)
                if (kept(a, mr, n0 + j))
                    return false;
        }
    }
    return true;
}

/* o[r] = alpha[r] o[r] + sum_j p[r][j] V[j], for TM rows (rows past `rows`
 * repeat the last one and are not stored) and NV vectors of 16 columns from
 * column c0 (the last one masked by km). */
AVX512_INLINE void pv_tile(const attn_args *a, const int NV, const float *vc, int64_t nc, const float *pt,
                           const float *alpha, float *const *orow, int64_t rows, int64_t c0, __mmask16 klast)
{
    __m512 acc[TM][4];
    __mmask16 km[4];
    for (int t = 0; t < NV; t++)
        km[t] = t == NV - 1 ? klast : (__mmask16)0xFFFF;
#pragma GCC unroll 6
    for (int r = 0; r < TM; r++) {
        __m512 al = _mm512_set1_ps(alpha[r]);
#pragma GCC unroll 4
        for (int t = 0; t < NV; t++)
            acc[r][t] = _mm512_mul_ps(_mm512_maskz_loadu_ps(km[t], orow[r] + c0 + 16 * t), al);
    }
    for (int64_t j = 0; j < nc; j++) {
        const float *vr = vc + j * a->v_n + c0;
        __m512 vv[4];
#pragma GCC unroll 4
        for (int t = 0; t < NV; t++)
            vv[t] = _mm512_maskz_loadu_ps(km[t], vr + 16 * t);
#pragma GCC unroll 6
        for (int r = 0; r < TM; r++) {
            __m512 w = _mm512_set1_ps(pt[r * NC + j]);
#pragma GCC unroll 4
            for (int t = 0; t < NV; t++)
                acc[r][t] = _mm512_fmadd_ps(w, vv[t], acc[r][t]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < TM; r++)
        if (r < rows)
#pragma GCC unroll 4
            for (int t = 0; t < NV; t++)
                _mm512_mask_storeu_ps(orow[r] + c0 + 16 * t, km[t], acc[r][t]);
}

/* pt[r][0, 16 NV) = scale q[r] . K^T for TM rows (rows past the tile's
 * repeat its last one), NV vectors of 16 keys from the packed chunk kt:
 * NV accumulators per row (TM NV in all) held in registers, each K^T load
 * serving TM rows. */
AVX512_INLINE void qk_tile(const attn_args *a, const int NV, const float *kt, const float *const *qr,
                           float *pt)
{
    __m512 acc[TM][4];
#pragma GCC unroll 6
    for (int r = 0; r < TM; r++)
#pragma GCC unroll 4
        for (int t = 0; t < NV; t++)
            acc[r][t] = _mm512_setzero_ps();
    for (int64_t d = 0; d < a->D; d++) {
        const float *kr = kt + d * NC;
        __m512 kv[4];
#pragma GCC unroll 4
        for (int t = 0; t < NV; t++)
            kv[t] = _mm512_load_ps(kr + 16 * t);
#pragma GCC unroll 6
        for (int r = 0; r < TM; r++) {
            __m512 qb = _mm512_set1_ps(qr[r][d * a->q_d]);
#pragma GCC unroll 4
            for (int t = 0; t < NV; t++)
                acc[r][t] = _mm512_fmadd_ps(qb, kv[t], acc[r][t]);
        }
    }
    const __m512 sc = _mm512_set1_ps(a->scale);
#pragma GCC unroll 6
    for (int r = 0; r < TM; r++)
#pragma GCC unroll 4
        for (int t = 0; t < NV; t++)
            _mm512_store_ps(pt + r * NC + 16 * t, _mm512_mul_ps(acc[r][t], sc));
}

/* Rows [m0, m1) of one batch entry (q, k, v, mask, o at its origin). */
AVX512_FN static void attn_rows_tiled(const attn_args *a, const float *q, const float *k, const float *v,
                                      const char *mask, float *o, int64_t m0, int64_t m1)
{
    const int64_t N = a->N, D = a->D, Dv = a->Dv, esz = a->kind == MASK_ADD ? 4 : 1;
    float mx[RB], l[RB], alpha[TM];
    float pt[TM * NC] __attribute__((aligned(64)));
    float kt[KT_FLOATS] __attribute__((aligned(64)));
    for (int64_t m = m0; m < m1; m++) {
        mx[m - m0] = -INFINITY;
        l[m - m0] = 0.0f;
        memset(o + m * a->o_m, 0, (size_t)Dv * sizeof(float));
    }
    for (int64_t n0 = 0; n0 < N; n0 += NC) {
        int64_t nc = N - n0 < NC ? N - n0 : NC;
        const float *kc = k + n0 * a->k_n, *vc = v + n0 * a->v_n;
        /* vectors of 16 keys that this chunk fills (a short sequence's
         * one chunk scores only these) */
        int nvk = (int)((nc + 15) / 16);
        for (int64_t d = 0; d < D; d++) {
            float *row = kt + d * NC;
            for (int64_t j = 0; j < nc; j++)
                row[j] = kc[j * a->k_n + d * a->k_d];
            for (int64_t j = nc; j < 16 * nvk; j++)
                row[j] = 0.0f;
        }
        for (int64_t m = m0; m < m1; m += TM) {
            int64_t rows = m1 - m < TM ? m1 - m : TM;
            if (mask && tile_dropped(a, mask, m, rows, n0, nc))
                continue;
            const float *qr[TM];
            float *orow[TM];
            for (int r = 0; r < TM; r++) {
                int64_t mr = m + (r < rows ? r : rows - 1);
                qr[r] = q + mr * a->q_m;
                orow[r] = o + mr * a->o_m;
            }
            /* S = scale Q K^T for the tile, in registers; the mask, then the
             * online softmax per row: weights into pt */
            switch (nvk) {
            case 4: qk_tile(a, 4, kt, qr, pt); break;
            case 3: qk_tile(a, 3, kt, qr, pt); break;
            case 2: qk_tile(a, 2, kt, qr, pt); break;
            default: qk_tile(a, 1, kt, qr, pt); break;
            }
            for (int64_t r = 0; r < TM; r++) {
                float *s = pt + r * NC;
                alpha[r] = 1.0f;
                if (r >= rows) {
                    memset(s, 0, NC * sizeof(float));
                    continue;
                }
                if (mask)
                    mask_chunk(a, mask + (m + r) * a->mask_m * esz, n0, nc, true, s);
                for (int64_t j = nc; j < NC; j++)
                    s[j] = -INFINITY;
                __m512 vm = _mm512_load_ps(s);
                for (int t = 1; t < nvk; t++)
                    vm = _mm512_max_ps(vm, _mm512_load_ps(s + 16 * t));
                float cm = _mm512_reduce_max_ps(vm);
                float *rmx = &mx[m + r - m0];
                float nm = cm > *rmx ? cm : *rmx;
                if (nm == -INFINITY) { /* every score so far is -inf: nothing to weigh yet */
                    memset(s, 0, NC * sizeof(float));
                    continue;
                }
                if (nm != *rmx) {
                    alpha[r] = cge__expf_fast(*rmx - nm);
                    *rmx = nm;
                }
                __m512 nmv = _mm512_set1_ps(nm), sum = _mm512_setzero_ps();
                for (int t = 0; t < nvk; t++) {
                    __m512 e = exp16(_mm512_sub_ps(_mm512_load_ps(s + 16 * t), nmv));
                    _mm512_store_ps(s + 16 * t, e);
                    sum = _mm512_add_ps(sum, e);
                }
                l[m + r - m0] = l[m + r - m0] * alpha[r] + _mm512_reduce_add_ps(sum);
            }
            /* O = alpha O + P V, 64 columns at a time */
            for (int64_t c0 = 0; c0 < Dv; c0 += 64) {
                int64_t left = Dv - c0;
                int nv = left >= 64 ? 4 : (int)((left + 15) / 16);
                int64_t tail = left - 16 * (nv - 1);
                __mmask16 klast = tail >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << tail) - 1u);
                switch (nv) {
                case 4: pv_tile(a, 4, vc, nc, pt, alpha, orow, rows, c0, klast); break;
                case 3: pv_tile(a, 3, vc, nc, pt, alpha, orow, rows, c0, klast); break;
                case 2: pv_tile(a, 2, vc, nc, pt, alpha, orow, rows, c0, klast); break;
                default: pv_tile(a, 1, vc, nc, pt, alpha, orow, rows, c0, klast); break;
                }
            }
        }
    }
    for (int64_t m = m0; m < m1; m++) {
        float inv = 1.0f / l[m - m0]; /* 0 / 0 for a row of -inf scores, as Softmax */
        float *orow = o + m * a->o_m;
        for (int64_t d = 0; d < Dv; d++)
            orow[d] *= inv;
    }
}

/* ---- the tiled path on AVX2 + FMA ------------------------------------------
 * attn_rows_tiled's plan in 8-lane registers: a tile of T2 rows x 16 keys
 * (12 accumulators, two K^T loads serving T2 rows) for the scores, and T2
 * rows x 16 columns for P V, so every tile fits the 16 registers. */
#define T2 6
#define AVX2_FN __attribute__((target("avx2,fma")))
#define AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

/* exp16's polynomial on 8 lanes, 2^n built in the exponent bits (the
 * scores here are at most 0 after the maximum is taken off, so n stays in
 * the normal range): lanes below -87.33 exactly 0, NaN stays NaN. */
AVX2_INLINE __m256 exp8(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(-87.33f);
    __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    __m256 xc = _mm256_max_ps(lo, x); /* the second operand on NaN: x */
    xc = _mm256_min_ps(_mm256_set1_ps(88.3762626647949f), xc);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

/* Lanes [0, k) of 8 set (k in 0..8). */
AVX2_INLINE __m256i lanes8(int64_t k)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* pt[r][k0, k0 + 8 NV) = scale q[r] . K^T for T2 rows (rows past the
 * tile's repeat its last one), from the packed chunk kt. */
AVX2_INLINE void qk_tile8(const attn_args *a, const int NV, const float *kt, int64_t k0,
                          const float *const *qr, float *pt)
{
    __m256 acc[T2][2];
#pragma GCC unroll 6
    for (int r = 0; r < T2; r++)
#pragma GCC unroll 2
        for (int t = 0; t < NV; t++)
            acc[r][t] = _mm256_setzero_ps();
    for (int64_t d = 0; d < a->D; d++) {
        const float *kr = kt + d * NC + k0;
        __m256 kv[2];
#pragma GCC unroll 2
        for (int t = 0; t < NV; t++)
            kv[t] = _mm256_load_ps(kr + 8 * t);
#pragma GCC unroll 6
        for (int r = 0; r < T2; r++) {
            __m256 qb = _mm256_broadcast_ss(qr[r] + d * a->q_d);
#pragma GCC unroll 2
            for (int t = 0; t < NV; t++)
                acc[r][t] = _mm256_fmadd_ps(qb, kv[t], acc[r][t]);
        }
    }
    const __m256 sc = _mm256_set1_ps(a->scale);
#pragma GCC unroll 6
    for (int r = 0; r < T2; r++)
#pragma GCC unroll 2
        for (int t = 0; t < NV; t++)
            _mm256_store_ps(pt + r * NC + k0 + 8 * t, _mm256_mul_ps(acc[r][t], sc));
}

/* Lanes of vector t of NV: all, or klast for the last one when PARTIAL
 * (masked loads and stores are slow on some AVX2 parts: only the column
 * tail takes them). */
#define PV_LD(PARTIAL, NV, t, p, klast) \
    ((PARTIAL) && (t) == (NV) - 1 ? _mm256_maskload_ps((p), (klast)) : _mm256_loadu_ps(p))

/* o[r][c0, c0 + 8 NV) = alpha[r] o[r] + sum_j p[r][j] V[j] for T2 rows
 * (only the first `rows` stored); when PARTIAL, the last vector's lanes
 * masked by klast. */
AVX2_INLINE void pv_tile8(const attn_args *a, const int NV, const int PARTIAL, const float *vc,
                          int64_t nc, const float *pt, const float *alpha, float *const *orow,
                          int64_t rows, int64_t c0, __m256i klast)
{
    __m256 acc[T2][2];
#pragma GCC unroll 6
    for (int r = 0; r < T2; r++) {
        __m256 al = _mm256_set1_ps(alpha[r]);
#pragma GCC unroll 2
        for (int t = 0; t < NV; t++)
            acc[r][t] = _mm256_mul_ps(PV_LD(PARTIAL, NV, t, orow[r] + c0 + 8 * t, klast), al);
    }
    for (int64_t j = 0; j < nc; j++) {
        const float *vr = vc + j * a->v_n + c0;
        __m256 vv[2];
#pragma GCC unroll 2
        for (int t = 0; t < NV; t++)
            vv[t] = PV_LD(PARTIAL, NV, t, vr + 8 * t, klast);
#pragma GCC unroll 6
        for (int r = 0; r < T2; r++) {
            __m256 w = _mm256_broadcast_ss(pt + r * NC + j);
#pragma GCC unroll 2
            for (int t = 0; t < NV; t++)
                acc[r][t] = _mm256_fmadd_ps(w, vv[t], acc[r][t]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < T2; r++)
        if (r < rows)
#pragma GCC unroll 2
            for (int t = 0; t < NV; t++) {
                if (PARTIAL && t == NV - 1)
                    _mm256_maskstore_ps(orow[r] + c0 + 8 * t, klast, acc[r][t]);
                else
                    _mm256_storeu_ps(orow[r] + c0 + 8 * t, acc[r][t]);
            }
}

/* attn_rows_tiled on AVX2: rows [m0, m1) of one batch entry. */
AVX2_FN static void attn_rows_tiled_avx2(const attn_args *a, const float *q, const float *k,
                                         const float *v, const char *mask, float *o, int64_t m0,
                                         int64_t m1)
{
    const int64_t N = a->N, D = a->D, Dv = a->Dv, esz = a->kind == MASK_ADD ? 4 : 1;
    float mx[RB], l[RB], alpha[T2];
    float pt[T2 * NC] __attribute__((aligned(32)));
    float kt[KT_FLOATS] __attribute__((aligned(32)));
    for (int64_t m = m0; m < m1; m++) {
        mx[m - m0] = -INFINITY;
        l[m - m0] = 0.0f;
        memset(o + m * a->o_m, 0, (size_t)Dv * sizeof(float));
    }
    for (int64_t n0 = 0; n0 < N; n0 += NC) {
        int64_t nc = N - n0 < NC ? N - n0 : NC;
        const float *kc = k + n0 * a->k_n, *vc = v + n0 * a->v_n;
        int nv8 = (int)((nc + 7) / 8); /* vectors of 8 keys this chunk fills */
        for (int64_t d = 0; d < D; d++) {
            float *row = kt + d * NC;
            for (int64_t j = 0; j < nc; j++)
                row[j] = kc[j * a->k_n + d * a->k_d];
            for (int64_t j = nc; j < 8 * nv8; j++)
                row[j] = 0.0f;
        }
        for (int64_t m = m0; m < m1; m += T2) {
            int64_t rows = m1 - m < T2 ? m1 - m : T2;
            if (mask && tile_dropped(a, mask, m, rows, n0, nc))
                continue;
            const float *qr[T2];
            float *orow[T2];
            for (int r = 0; r < T2; r++) {
                int64_t mr = m + (r < rows ? r : rows - 1);
                qr[r] = q + mr * a->q_m;
                orow[r] = o + mr * a->o_m;
            }
            int v = 0;
            for (; v + 2 <= nv8; v += 2)
                qk_tile8(a, 2, kt, 8 * v, qr, pt);
            if (v < nv8)
                qk_tile8(a, 1, kt, 8 * v, qr, pt);
            int64_t live = 0; /* keys past the tile's last non-zero weight add nothing */
            for (int64_t r = 0; r < T2; r++) {
                float *s = pt + r * NC;
                alpha[r] = 1.0f;
                if (r >= rows) {
                    memset(s, 0, NC * sizeof(float));
                    continue;
                }
                if (mask)
                    mask_chunk(a, mask + (m + r) * a->mask_m * esz, n0, nc, true, s);
                for (int64_t j = nc; j < NC; j++)
                    s[j] = -INFINITY;
                __m256 vm = _mm256_load_ps(s);
                for (int t = 1; t < nv8; t++)
                    vm = _mm256_max_ps(vm, _mm256_load_ps(s + 8 * t));
                float mt[8];
                _mm256_storeu_ps(mt, vm);
                float cm = mt[0];
                for (int i = 1; i < 8; i++)
                    cm = mt[i] > cm ? mt[i] : cm;
                float *rmx = &mx[m + r - m0];
                float nm = cm > *rmx ? cm : *rmx;
                if (nm == -INFINITY) { /* every score so far is -inf: nothing to weigh yet */
                    memset(s, 0, NC * sizeof(float));
                    continue;
                }
                if (nm != *rmx) {
                    alpha[r] = cge__expf_fast(*rmx - nm);
                    *rmx = nm;
                }
                __m256 nmv = _mm256_set1_ps(nm), sum = _mm256_setzero_ps();
                for (int t = 0; t < nv8; t++) {
                    __m256 e = exp8(_mm256_sub_ps(_mm256_load_ps(s + 8 * t), nmv));
                    _mm256_store_ps(s + 8 * t, e);
                    sum = _mm256_add_ps(sum, e);
                }
                _mm256_storeu_ps(mt, sum);
                float ts = ((mt[0] + mt[4]) + (mt[1] + mt[5])) + ((mt[2] + mt[6]) + (mt[3] + mt[7]));
                l[m + r - m0] = l[m + r - m0] * alpha[r] + ts;
                int64_t e = nc;
                while (e > live && s[e - 1] == 0.0f)
                    e--;
                live = e;
            }
            /* O = alpha O + P V, 16 columns at a time */
            for (int64_t c0 = 0; c0 < Dv; c0 += 16) {
                int64_t left = Dv - c0;
                if (left >= 16)
                    pv_tile8(a, 2, 0, vc, live, pt, alpha, orow, rows, c0, lanes8(8));
                else if (left > 8)
                    pv_tile8(a, 2, 1, vc, live, pt, alpha, orow, rows, c0, lanes8(left - 8));
                else if (left == 8)
                    pv_tile8(a, 1, 0, vc, live, pt, alpha, orow, rows, c0, lanes8(8));
                else
                    pv_tile8(a, 1, 1, vc, live, pt, alpha, orow, rows, c0, lanes8(left));
            }
        }
    }
    for (int64_t m = m0; m < m1; m++) {
        float inv = 1.0f / l[m - m0]; /* 0 / 0 for a row of -inf scores, as Softmax */
        float *orow = o + m * a->o_m;
        for (int64_t d = 0; d < Dv; d++)
            orow[d] *= inv;
    }
}

/* Which tiled path may run: TILED_AVX512, TILED_AVX2 (CGE_CPU_ISA caps
 * an AVX-512 machine to the second), or none. */
static int tiled_available(void)
{
    if (cge__cpu_has(CGE_CPU_AVX512F))
        return TILED_AVX512;
    if (cge__cpu_has(CGE_CPU_AVX2 | CGE_CPU_FMA))
        return TILED_AVX2;
    return TILED_NONE;
}
#else
static int tiled_available(void)
{
    return TILED_NONE;
}
#endif

ATTN_CLONES static void attn_rows(const attn_args *a, int64_t b, int64_t m0, int64_t m1)
{
    int64_t qo = 0, ko = 0, vo = 0, oo = 0, mo = 0, rem = b;
    for (int32_t i = a->nb - 1; i >= 0; i--) {
        int64_t c = rem % a->bdim[i];
        rem /= a->bdim[i];
        qo += c * a->qb[i];
        ko += c * a->kb[i];
        vo += c * a->vb[i];
        oo += c * a->ob[i];
        mo += c * a->mb[i];
    }
    const float *q = a->q + qo, *k = a->k + ko, *v = a->v + vo;
    float *o = a->o + oo;
    const int64_t N = a->N, D = a->D, Dv = a->Dv, esz = a->kind == MASK_ADD ? 4 : 1;
    const char *mask = a->mask ? (const char *)a->mask + mo * esz : NULL;
#if defined(__x86_64__)
    if (a->tiled != TILED_NONE && m1 - m0 >= TILE_MIN_ROWS && D <= KT_FLOATS / NC) {
        if (a->tiled == TILED_AVX512)
            attn_rows_tiled(a, q, k, v, mask, o, m0, m1);
        else
            attn_rows_tiled_avx2(a, q, k, v, mask, o, m0, m1);
        return;
    }
#endif
    float mx[RB], l[RB];
    float s[NC], s2[NC];
    for (int64_t m = m0; m < m1; m++) {
        mx[m - m0] = -INFINITY;
        l[m - m0] = 0.0f;
        memset(o + m * a->o_m, 0, (size_t)Dv * sizeof(float));
    }
    /* Pack K^T chunks when several rows share them and they fit the stack. */
    bool pack = m1 - m0 >= 4 && D <= KT_FLOATS / NC;
    float kt[KT_FLOATS];
    for (int64_t n0 = 0; n0 < N; n0 += NC) {
        int64_t nc = N - n0 < NC ? N - n0 : NC;
        const float *kc = k + n0 * a->k_n, *vc = v + n0 * a->v_n;
        if (pack) {
            for (int64_t d = 0; d < D; d++) {
                float *row = kt + d * NC;
                for (int64_t j = 0; j < nc; j++)
                    row[j] = kc[j * a->k_n + d * a->k_d];
                for (int64_t j = nc; j < NC; j++)
                    row[j] = 0.0f;
            }
        }
        int64_t m = m0;
        if (pack && nc == NC)
            for (; m + 2 <= m1; m += 2) {
                const void *r0 = mask ? mask + m * a->mask_m * esz : NULL;
                const void *r1 = mask ? mask + (m + 1) * a->mask_m * esz : NULL;
                score_pair(a, q + m * a->q_m, q + (m + 1) * a->q_m, kt, s, s2);
                mask_chunk(a, r0, n0, nc, true, s);
                mask_chunk(a, r1, n0, nc, true, s2);
                fold_chunk(a, vc, s, nc, &mx[m - m0], &l[m - m0], o + m * a->o_m);
                fold_chunk(a, vc, s2, nc, &mx[m + 1 - m0], &l[m + 1 - m0], o + (m + 1) * a->o_m);
            }
        for (; m < m1; m++) {
            const void *mrow = mask ? mask + m * a->mask_m * esz : NULL;
            score_chunk(a, q + m * a->q_m, kc, pack ? kt : NULL, mrow, n0, nc, s);
            fold_chunk(a, vc, s, nc, &mx[m - m0], &l[m - m0], o + m * a->o_m);
        }
    }
    for (int64_t m = m0; m < m1; m++) {
        float inv = 1.0f / l[m - m0]; /* 0 / 0 for a row of -inf scores, as Softmax */
        float *orow = o + m * a->o_m;
        for (int64_t d = 0; d < Dv; d++)
            orow[d] *= inv;
    }
}

static void attn_block(int64_t blk, int64_t nblk, void *p)
{
    const attn_args *a = p;
    int64_t i0, i1;
    cge__block_range(a->nbatch * a->rblocks, blk, nblk, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        int64_t b = i / a->rblocks, r = i % a->rblocks;
        int64_t m0 = r * a->rb, m1 = m0 + a->rb < a->M ? m0 + a->rb : a->M;
        attn_rows(a, b, m0, m1);
    }
}

/* The node's attributes, parsed once at prepare (they do not depend on the
 * shapes, which a symbolic plan changes per run); a launch without prepared
 * state parses its own. */
typedef struct attn_cfg {
    int32_t rank;
    int32_t qp[CGE_MAX_RANK], kp[CGE_MAX_RANK], vp[CGE_MAX_RANK], op[CGE_MAX_RANK];
    int kind;
    float scale, fill;
    bool ok;   /* the permutations are valid for this rank */
} attn_cfg;

static void attn_cfg_parse(const cge_attrs *attrs, int32_t r, attn_cfg *c)
{
    c->rank = r;
    c->ok = r >= 2 && get_perm(attrs, "q_perm", r, c->qp) && get_perm(attrs, "k_perm", r, c->kp) &&
            get_perm(attrs, "v_perm", r, c->vp) && get_perm(attrs, "out_perm", r, c->op) &&
            c->vp[r - 1] == r - 1 && c->op[r - 1] == r - 1;
    c->kind = (int)cge_attrs_get_int(attrs, "mask_kind", MASK_NONE);
    c->scale = cge_attrs_get_float(attrs, "scale", 1.0f);
    c->fill = cge_attrs_get_float(attrs, "fill", -INFINITY);
}

static cge_status attn_prepare(const cge_kernel_ctx *ctx, void **state)
{
    attn_cfg *c = malloc(sizeof *c);
    if (!c)
        return cge_kernel_error(ctx, CGE_ERR_NO_MEMORY, "out of memory");
    attn_cfg_parse(ctx->attrs, ctx->inputs[0].shape.rank, c);
    *state = c;
    return CGE_OK;
}

static cge_status attn_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *Q = &ctx->inputs[0], *K = &ctx->inputs[1], *V = &ctx->inputs[2];
    cge_tensor *Y = &ctx->outputs[0];
    int32_t r = Q->shape.rank;
    attn_cfg own;
    const attn_cfg *cfg = ctx->state;
    if (!cfg || cfg->rank != r) {
        attn_cfg_parse(ctx->attrs, r, &own);
        cfg = &own;
    }
    const int32_t *qp = cfg->qp, *kp = cfg->kp, *vp = cfg->vp, *op = cfg->op;
    if (!cfg->ok || K->shape.rank != r || V->shape.rank != r || Y->shape.rank != r)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "inputs do not form an attention");
    int64_t sq[CGE_MAX_RANK], sk[CGE_MAX_RANK], sv[CGE_MAX_RANK], sy[CGE_MAX_RANK];
    strides_of(&Q->shape, sq);
    strides_of(&K->shape, sk);
    strides_of(&V->shape, sv);
    strides_of(&Y->shape, sy);
    attn_args a = {0};
    int64_t lo[CGE_MAX_RANK], los[CGE_MAX_RANK];
    for (int32_t j = 0; j < r; j++) {
        lo[op[j]] = Y->shape.dims[j];
        los[op[j]] = sy[j];
    }
    a.nb = r - 2;
    a.M = lo[r - 2];
    a.Dv = lo[r - 1];
    a.D = Q->shape.dims[qp[r - 1]];
    a.N = K->shape.dims[kp[r - 2]];
    if (K->shape.dims[kp[r - 1]] != a.D || V->shape.dims[vp[r - 2]] != a.N ||
        V->shape.dims[vp[r - 1]] != a.Dv || Q->shape.dims[qp[r - 2]] != a.M)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "Q, K, V and the output do not agree in size");
    a.nbatch = 1;
    for (int32_t i = 0; i < a.nb; i++) {
        int64_t d = lo[i];
        a.bdim[i] = d;
        a.nbatch *= d;
        int64_t dq = Q->shape.dims[qp[i]], dk = K->shape.dims[kp[i]], dv = V->shape.dims[vp[i]];
        if ((dq != d && dq != 1) || (dk != d && dk != 1) || (dv != d && dv != 1))
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "batch axis %d: %lld, %lld, %lld for %lld",
                                    (int)i, (long long)dq, (long long)dk, (long long)dv, (long long)d);
        a.qb[i] = dq == 1 ? 0 : sq[qp[i]];
        a.kb[i] = dk == 1 ? 0 : sk[kp[i]];
        a.vb[i] = dv == 1 ? 0 : sv[vp[i]];
        a.ob[i] = los[i];
    }
    a.q_m = sq[qp[r - 2]];
    a.q_d = sq[qp[r - 1]];
    a.k_n = sk[kp[r - 2]];
    a.k_d = sk[kp[r - 1]];
    a.v_n = sv[vp[r - 2]];
    a.o_m = los[r - 2];
    a.kind = cfg->kind;
    a.scale = cfg->scale;
    a.fill = cfg->fill;
    if (a.kind != MASK_NONE) {
        if (!cge__kernel_has_input(ctx, 3))
            return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "mask_kind %d without a mask", a.kind);
        const cge_tensor *Mk = &ctx->inputs[3];
        int32_t mr = Mk->shape.rank;
        int64_t sm[CGE_MAX_RANK];
        strides_of(&Mk->shape, sm);
        int64_t full[CGE_MAX_RANK];
        for (int32_t i = 0; i < r; i++)
            full[i] = 0;
        for (int32_t j = 0; j < mr; j++) {
            int32_t i = r - mr + j;
            int64_t want = i == r - 1 ? a.N : lo[i];
            if (Mk->shape.dims[j] != 1 && Mk->shape.dims[j] != want)
                return cge_kernel_error(ctx, CGE_ERR_SHAPE, "mask axis %d is %lld, not %lld or 1", (int)j,
                                        (long long)Mk->shape.dims[j], (long long)want);
            full[i] = Mk->shape.dims[j] == 1 ? 0 : sm[j];
        }
        for (int32_t i = 0; i < a.nb; i++)
            a.mb[i] = full[i];
        a.mask_m = full[r - 2];
        a.mask_n = full[r - 1];
        a.mask = Mk->data;
    }
    if (a.nbatch == 0 || a.M == 0 || a.Dv == 0)
        return CGE_OK;
    a.q = Q->data;
    a.k = K->data;
    a.v = V->data;
    a.o = Y->data;
    a.tiled = tiled_available();
    /* rows per item: all of them where the batch entries alone give every
     * thread two items, else split (in multiples of 16) until they do */
    int64_t threads = ctx->num_threads > 0 ? ctx->num_threads : 1;
    int64_t splits = a.nbatch >= 2 * threads ? 1 : (2 * threads + a.nbatch - 1) / a.nbatch;
    a.rb = (a.M + splits - 1) / splits;
    a.rb = (a.rb + 15) / 16 * 16;
    a.rb = a.rb < 16 ? 16 : a.rb > RB ? RB : a.rb;
    a.rblocks = (a.M + a.rb - 1) / a.rb;
    /* at least ~32k multiply-adds per block: a decode step's heads are tiny */
    int64_t rows = a.M < a.rb ? a.M : a.rb;
    int64_t per_item = rows * (a.N > 0 ? a.N : 1) * (a.D + a.Dv);
    int64_t min_items = per_item >= 32768 ? 1 : (32768 + per_item - 1) / per_item;
    int64_t nblk = cge__blocks_for(a.nbatch * a.rblocks, min_items, ctx->num_threads);
    return cge_launch(stream, attn_block, nblk, &a, sizeof a);
}

/* ---- registration ------------------------------------------------------------ */

static const cge_arg_def attn_in[] = {
    {"Q", 0, CGE_DT(CGE_F32), "queries, [..., M, D] after q_perm"},
    {"K", 0, CGE_DT(CGE_F32), "keys, [..., N, D] after k_perm"},
    {"V", 0, CGE_DT(CGE_F32), "values, [..., N, Dv] after v_perm"},
    {"mask", CGE_ARG_OPTIONAL, CGE_DT(CGE_F32) | CGE_DT(CGE_BOOL),
     "broadcast to [..., M, N]: added (float32) or selecting the kept scores (bool)"},
};
static const cge_arg_def attn_out[] = {
    {"Y", 0, CGE_DT(CGE_F32), "softmax(scale Q K^T + mask) V, [..., M, Dv] permuted by out_perm"}};
static const cge_attr_def attn_attrs[] = {
    {.name = "scale", .kind = CGE_ATTR_FLOAT, .doc = "multiplies Q K^T (default 1)"},
    {.name = "mask_kind", .kind = CGE_ATTR_INT,
     .doc = "0 no mask, 1 added, 2 scores kept where the mask is true (else fill), 3 kept where false"},
    {.name = "fill", .kind = CGE_ATTR_FLOAT, .doc = "the score where a bool mask drops one"},
    {.name = "q_perm", .kind = CGE_ATTR_INTS, .doc = "logical axis i of Q is axis q_perm[i] of the input"},
    {.name = "k_perm", .kind = CGE_ATTR_INTS, .doc = "the same for K ([..., N, D])"},
    {.name = "v_perm", .kind = CGE_ATTR_INTS, .doc = "the same for V; keeps the last axis"},
    {.name = "out_perm", .kind = CGE_ATTR_INTS,
     .doc = "output axis j is logical axis out_perm[j]; keeps the last axis"},
};
static const cge_kernel_def attn_kernels[] = {
    {.engine = "cpu", .dtypes = CGE_DT(CGE_F32), .launch = attn_launch, .prepare = attn_prepare,
     .release = free, .inplace_input = -1}};

static const cge_op_def attn_ops[] = {
    {.name = "Attention", .domain = CGE_DOMAIN_FUSED, .since_version = 1, .inputs = attn_in,
     .num_inputs = 4, .outputs = attn_out, .num_outputs = 1, .attrs = attn_attrs,
     .num_attrs = (int32_t)(sizeof attn_attrs / sizeof attn_attrs[0]), .infer = attn_infer,
     .kernels = attn_kernels, .num_kernels = 1,
     .doc = "scaled dot-product attention with an online softmax, no score tensor stored"},
};

const cge_op_def *cge__ops_attention(int32_t *count)
{
    *count = (int32_t)(sizeof attn_ops / sizeof attn_ops[0]);
    return attn_ops;
}
