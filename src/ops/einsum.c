/* Einsum (opset 12): explicit and implicit outputs, ellipsis (broadcast,
 * right-aligned), repeated indices (diagonals), any number of operands. */
#include <string.h>

#include "ops/builtin.h"
#include "ops/gemm_kernel.h"
#include "ops/kernel_util.h"

/* A float32 two-operand contraction runs on the packed GEMM as [batch, M, K]
 * x [batch, K, N]: read in place where each operand's index groups collapse
 * to one stride (attention's bhid,bhjd->bhij), gathered into that layout
 * where they do not; everything else is a generic strided loop. */

#define EIN_DTYPES                                                                         \
    (CGE_DT_INT | CGE_DT(CGE_F16) | CGE_DT(CGE_F32) | CGE_DT(CGE_F64))
#define EIN_MAX_OPS 8       /* operands */
#define EIN_MAX_IDX 24      /* distinct indices, ellipsis dimensions included */
#define EIN_EQ_MAX 256

/* The parsed equation bound to shapes. Indices are numbered in order of first
 * appearance; an operand's stride for an index sums the strides of every
 * dimension it labels (a repeated index walks the diagonal) and is 0 where the
 * operand lacks the index or broadcasts it. */
typedef struct ein_plan {
    int32_t nops, nidx, nout, nred;
    int64_t size[EIN_MAX_IDX];
    int32_t out[EIN_MAX_IDX], red[EIN_MAX_IDX];
    int64_t stride[EIN_MAX_OPS][EIN_MAX_IDX];
    int8_t count[EIN_MAX_OPS][EIN_MAX_IDX];   /* dims of operand labelled by index */
} ein_plan;

/* Raw labels: letters a-z 0..25, A-Z 26..51, ellipsis dimension j 52 + j. */
static int letter_label(char c)
{
    if (c >= 'a' && c <= 'z')
        return c - 'a';
    if (c >= 'A' && c <= 'Z')
        return 26 + (c - 'A');
    return -1;
}

/* ASCII order of a raw label, for the implicit output's sorting. */
static int label_char(int l)
{
    return l < 26 ? 'a' + l : 'A' + (l - 26);
}

/* Labels of one term with its ellipsis expanded to `rank` dims; returns the
 * number of labels, or -1 with err written. `e_total` is the widest ellipsis. */
static int term_labels(const char *t, size_t len, int32_t rank, int e_total, int *labels,
                       char *err, size_t errsz)
{
    int letters = 0, ell = 0;
    for (size_t i = 0; i < len; i++) {
        if (t[i] == '.') {
            if (ell || i + 2 >= len || t[i + 1] != '.' || t[i + 2] != '.') {
                snprintf(err, errsz, "a term has a stray '.' or two ellipses");
                return -1;
            }
            ell = 1;
            i += 2;
        } else if (letter_label(t[i]) >= 0) {
            letters++;
        } else {
            snprintf(err, errsz, "'%c' is not a letter", t[i]);
            return -1;
        }
    }
    int e = rank - letters;
    if ((!ell && e != 0) || e < 0 || rank < 0) {
        snprintf(err, errsz, "a term has %d indices for a rank-%d operand", letters, (int)rank);
        return -1;
    }
    int n = 0;
    for (size_t i = 0; i < len; i++) {
        if (t[i] == '.') {
            for (int j = 0; j < e; j++)
                labels[n++] = 52 + (e_total - e) + j;
            i += 2;
        } else {
            labels[n++] = letter_label(t[i]);
        }
    }
    return n;
}

static int count_letters(const char *t, size_t len, int *has_ell)
{
    int n = 0;
    *has_ell = 0;
    for (size_t i = 0; i < len; i++)
        if (t[i] == '.')
            *has_ell = 1;
        else
            n++;
    return n;
}

/* Parse `equation` for operands of the given shapes (dims may be dynamic:
 * sizes are then -1). Returns 0 and writes err on a bad equation. */
static int ein_parse(const char *equation, int32_t nops, const cge_shape *const *shapes,
                     ein_plan *pl, char *err, size_t errsz)
{
    memset(pl, 0, sizeof *pl);
    char eq[EIN_EQ_MAX];
    size_t n = 0;
    for (const char *c = equation; *c; c++) {
        if (*c == ' ')
            continue;
        if (n + 1 >= sizeof eq) {
            snprintf(err, errsz, "the equation is too long");
            return 0;
        }
        eq[n++] = *c;
    }
    eq[n] = '\0';
    if (nops < 1 || nops > EIN_MAX_OPS) {
        snprintf(err, errsz, "%d operands; this kernel takes 1 to %d", (int)nops, EIN_MAX_OPS);
        return 0;
    }
    pl->nops = nops;
    const char *arrow = strstr(eq, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - eq) : n;
    /* terms and the widest ellipsis */
    const char *term[EIN_MAX_OPS];
    size_t tlen[EIN_MAX_OPS];
    int32_t nt = 0;
    size_t start = 0;
    for (size_t i = 0; i <= lhs_len; i++)
        if (i == lhs_len || eq[i] == ',') {
            if (nt == nops) {
                snprintf(err, errsz, "more terms than the %d operands", (int)nops);
                return 0;
            }
            term[nt] = eq + start;
            tlen[nt++] = i - start;
            start = i + 1;
        }
    if (nt != nops) {
        snprintf(err, errsz, "%d terms for %d operands", (int)nt, (int)nops);
        return 0;
    }
    int e_total = 0;
    for (int32_t k = 0; k < nops; k++) {
        int ell, letters = count_letters(term[k], tlen[k], &ell);
        int e = shapes[k]->rank - letters;
        if (ell && e > e_total)
            e_total = e;
    }
    int raw[EIN_MAX_OPS][CGE_MAX_RANK];
    int rawn[EIN_MAX_OPS];
    int seen[64] = {0}, compact[64];
    for (int l = 0; l < 64; l++)
        compact[l] = -1;
    for (int32_t k = 0; k < nops; k++) {
        int lab[EIN_EQ_MAX];
        int m = term_labels(term[k], tlen[k], shapes[k]->rank, e_total, lab, err, errsz);
        if (m < 0)
            return 0;
        rawn[k] = m;
        for (int d = 0; d < m; d++) {
            raw[k][d] = lab[d];
            seen[lab[d]]++;
        }
    }
    /* output labels */
    int outl[64], no = 0;
    if (arrow) {
        const char *r = arrow + 2;
        int used[64] = {0};
        for (size_t i = 0; r[i]; i++) {
            if (r[i] == '.') {
                if (strncmp(r + i, "...", 3) != 0 || used[63]) {
                    snprintf(err, errsz, "the output has a stray '.' or two ellipses");
                    return 0;
                }
                for (int j = 0; j < e_total; j++)
                    outl[no++] = 52 + j;
                used[63] = 1;
                i += 2;
                continue;
            }
            int l = letter_label(r[i]);
            if (l < 0 || !seen[l] || used[l]) {
                snprintf(err, errsz, "output index '%c' is %s", r[i],
                         l < 0 ? "not a letter" : used[l] ? "repeated" : "in no input term");
                return 0;
            }
            used[l] = 1;
            outl[no++] = l;
        }
    } else {
        for (int j = 0; j < e_total; j++)
            outl[no++] = 52 + j;
        for (int c = 'A'; c <= 'z'; c++) {
            int l = letter_label((char)c);
            if (l >= 0 && seen[l] == 1)
                outl[no++] = l;
        }
    }
    /* compact numbering: output indices first, then the reduced ones */
    int nidx = 0;
    for (int i = 0; i < no; i++)
        compact[outl[i]] = nidx++;
    pl->nout = no;
    for (int l = 0; l < 64; l++)
        if (seen[l] && compact[l] < 0) {
            if (nidx >= EIN_MAX_IDX)
                break;
            pl->red[pl->nred++] = nidx;
            compact[l] = nidx++;
        }
    for (int l = 0; l < 64; l++)
        if (seen[l] && compact[l] < 0)
            nidx = EIN_MAX_IDX + 1;
    if (nidx > EIN_MAX_IDX) {
        snprintf(err, errsz, "more than %d distinct indices", EIN_MAX_IDX);
        return 0;
    }
    pl->nidx = nidx;
    for (int i = 0; i < no; i++)
        pl->out[i] = i;
    /* Unset is INT64_MIN, not a negative dim: symbols are negative too. */
    for (int i = 0; i < nidx; i++)
        pl->size[i] = INT64_MIN;
    for (int32_t k = 0; k < nops; k++)
        for (int d = 0; d < rawn[k]; d++) {
            int c = compact[raw[k][d]];
            int64_t s = shapes[k]->dims[d];
            pl->count[k][c]++;
            int64_t cur = pl->size[c];
            /* as broadcasting: 1 gives way, a known size fixes an unknown
             * one, two different unknowns leave an anonymous one */
            if (cur == INT64_MIN || cur == 1 || (cur < 0 && s >= 0))
                pl->size[c] = s;
            else if (cur < 0 && s < 0 && s != cur && s != 1)
                pl->size[c] = CGE_DIM_DYNAMIC;
            else if (s != cur && s != 1 && s >= 0) {
                snprintf(err, errsz, "index '%c' has sizes %lld and %lld",
                         raw[k][d] < 52 ? label_char(raw[k][d]) : '.', (long long)cur,
                         (long long)s);
                return 0;
            }
        }
    for (int32_t k = 0; k < nops; k++) {
        int64_t st = 1;
        for (int d = rawn[k] - 1; d >= 0; d--) {
            int c = compact[raw[k][d]];
            int64_t s = shapes[k]->dims[d];
            if (!(s == 1 && pl->size[c] != 1))
                pl->stride[k][c] += st;
            st *= s < 0 ? 0 : s;
        }
    }
    return 1;
}

/* ---- meta --------------------------------------------------------------------- */

static cge_status einsum_infer(cge_infer_ctx *ctx)
{
    const char *eq = cge_attrs_get_string(ctx->attrs, "equation", NULL);
    if (!eq)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "attribute equation is required");
    const cge_shape *shapes[EIN_MAX_OPS];
    for (int32_t i = 0; i < ctx->num_inputs && i < EIN_MAX_OPS; i++) {
        shapes[i] = &ctx->inputs[i].shape;
        if (ctx->inputs[i].dtype != ctx->inputs[0].dtype)
            return cge_meta_error(ctx, CGE_ERR_DTYPE, "operand %d is %s, operand 0 %s", i,
                                  cge_dtype_name(ctx->inputs[i].dtype),
                                  cge_dtype_name(ctx->inputs[0].dtype));
    }
    ein_plan pl;
    char err[160];
    if (!ein_parse(eq, ctx->num_inputs, shapes, &pl, err, sizeof err))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "equation '%s': %s", eq, err);
    if (pl.nout > CGE_MAX_RANK)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "equation '%s': output rank %d is above %d", eq,
                              (int)pl.nout, CGE_MAX_RANK);
    ctx->outputs[0].dtype = ctx->inputs[0].dtype;
    ctx->outputs[0].shape.rank = pl.nout;
    for (int i = 0; i < pl.nout; i++)
        ctx->outputs[0].shape.dims[i] =
            cge_dim_valid(pl.size[pl.out[i]]) ? pl.size[pl.out[i]] : CGE_DIM_DYNAMIC;
    return CGE_OK;
}

/* ---- generic loop ---------------------------------------------------------------- */

typedef struct ein_args {
    ein_plan pl;
    cge_dtype t;
    const void *op[EIN_MAX_OPS];
    void *y;
    int64_t nout_elems, nred_elems;
    /* GEMM path: operand 0 is [batch, M, K], operand 1 [batch, K, N] */
    int32_t nb, nm, nn, nk;
    int32_t bi[EIN_MAX_IDX], mi[EIN_MAX_IDX], ni[EIN_MAX_IDX], ki[EIN_MAX_IDX];
    int64_t batch, M, N, K;
    /* Operands and output read and written in place where their groups
     * collapse to one stride each (direct_*), else gathered into ag/bg and
     * scattered from cg: the strides of the M, K (A), K, N (B), M (output)
     * groups, and each one's strides over the batch indices. */
    int direct_a, direct_b, direct_y;
    int64_t a_rs, a_cs, b_rs, b_cs, y_rs;
    int64_t ystride[EIN_MAX_IDX];
    float *ag, *bg, *bp, *cg;
    int64_t bp_mat;
    cge__gemm_tiling tiling;
    cge__gemm_isa isa;
} ein_args;

/* Offsets of output element e in every operand. */
static void out_offsets(const ein_args *p, int64_t e, int64_t *off)
{
    const ein_plan *pl = &p->pl;
    for (int32_t k = 0; k < pl->nops; k++)
        off[k] = 0;
    for (int32_t d = pl->nout - 1; d >= 0; d--) {
        int32_t c = pl->out[d];
        int64_t i = e % pl->size[c];
        e /= pl->size[c];
        for (int32_t k = 0; k < pl->nops; k++)
            off[k] += i * pl->stride[k][c];
    }
}

/* Floats accumulate in double; integers in uint64 (wrapping like the dtype
 * does, without signed overflow). */
#define EIN_GENERIC(SUF, T, ACC, LD, ST)                                                    \
    static void ein_generic_##SUF(int64_t blk, int64_t nblk, void *args)                    \
    {                                                                                       \
        const ein_args *p = args;                                                           \
        const ein_plan *pl = &p->pl;                                                        \
        int64_t e0, e1;                                                                     \
        cge__block_range(p->nout_elems, blk, nblk, &e0, &e1);                                \
        for (int64_t e = e0; e < e1; e++) {                                                 \
            int64_t off[EIN_MAX_OPS], idx[EIN_MAX_IDX] = {0};                               \
            out_offsets(p, e, off);                                                         \
            ACC acc = 0;                                                                    \
            for (int64_t r = 0; r < p->nred_elems; r++) {                                   \
                ACC prod = LD(((const T *)p->op[0])[off[0]]);                               \
                for (int32_t k = 1; k < pl->nops; k++)                                      \
                    prod *= LD(((const T *)p->op[k])[off[k]]);                              \
                acc += prod;                                                                \
                for (int32_t d = pl->nred - 1; d >= 0; d--) {                               \
                    int32_t c = pl->red[d];                                                 \
                    for (int32_t k = 0; k < pl->nops; k++)                                  \
                        off[k] += pl->stride[k][c];                                         \
                    if (++idx[d] < pl->size[c])                                             \
                        break;                                                              \
                    for (int32_t k = 0; k < pl->nops; k++)                                  \
                        off[k] -= pl->stride[k][c] * pl->size[c];                           \
                    idx[d] = 0;                                                             \
                }                                                                           \
            }                                                                               \
            ((T *)p->y)[e] = ST(acc);                                                       \
        }                                                                                   \
    }

#define LD_D(x) ((double)(x))
#define LD_H(x) ((double)cge_f16_to_f32(x))
#define LD_U(x) ((uint64_t)(x))
#define LD_S(x) ((uint64_t)(int64_t)(x))
#define ST_F(x) ((float)(x))
#define ST_D(x) (x)
#define ST_H(x) cge_f32_to_f16((float)(x))

EIN_GENERIC(f32, float, double, LD_D, ST_F)
EIN_GENERIC(f64, double, double, LD_D, ST_D)
EIN_GENERIC(f16, uint16_t, double, LD_H, ST_H)
EIN_GENERIC(i8, int8_t, uint64_t, LD_S, (int8_t))
EIN_GENERIC(i16, int16_t, uint64_t, LD_S, (int16_t))
EIN_GENERIC(i32, int32_t, uint64_t, LD_S, (int32_t))
EIN_GENERIC(i64, int64_t, uint64_t, LD_S, (int64_t))
EIN_GENERIC(u8, uint8_t, uint64_t, LD_U, (uint8_t))
EIN_GENERIC(u16, uint16_t, uint64_t, LD_U, (uint16_t))
EIN_GENERIC(u32, uint32_t, uint64_t, LD_U, (uint32_t))
EIN_GENERIC(u64, uint64_t, uint64_t, LD_U, (uint64_t))

static cge_kernel_fn generic_fn(cge_dtype t)
{
    switch (t) {
    case CGE_F32: return ein_generic_f32;
    case CGE_F64: return ein_generic_f64;
    case CGE_F16: return ein_generic_f16;
    case CGE_I8: return ein_generic_i8;
    case CGE_I16: return ein_generic_i16;
    case CGE_I32: return ein_generic_i32;
    case CGE_I64: return ein_generic_i64;
    case CGE_U8: return ein_generic_u8;
    case CGE_U16: return ein_generic_u16;
    case CGE_U32: return ein_generic_u32;
    case CGE_U64: return ein_generic_u64;
    default: return NULL;
    }
}

/* ---- GEMM path ---------------------------------------------------------------------- */

/* The one stride that walks a group of indices (in order, the last fastest)
 * through an operand, as if they were one dimension: 0 if they do not nest
 * (a transposed pair), so that the operand must be gathered. Size-1 indices
 * take no part; a group of none has stride 0. */
static int group_stride(const ein_plan *pl, const int64_t *stride, const int32_t *g, int32_t n,
                        int64_t *out)
{
    int have = 0;
    int64_t next = 0;
    *out = 0;
    for (int32_t j = n - 1; j >= 0; j--) {
        int32_t c = g[j];
        if (pl->size[c] == 1)
            continue;
        if (!have)
            *out = stride[c];
        else if (stride[c] != next)
            return 0;
        have = 1;
        next = stride[c] * pl->size[c];
    }
    return 1;
}

/* Whether the plan is a plain float32 contraction of two operands, and its
 * index groups: batch (both and output), M (first and output), N (second and
 * output), K (both, summed). */
static int gemm_groups(ein_args *p)
{
    const ein_plan *pl = &p->pl;
    if (p->t != CGE_F32 || pl->nops != 2)
        return 0;
    p->nb = p->nm = p->nn = p->nk = 0;
    p->batch = p->M = p->N = p->K = 1;
    for (int32_t c = 0; c < pl->nidx; c++) {
        int in0 = pl->count[0][c] > 0, in1 = pl->count[1][c] > 0, out = c < pl->nout;
        if (pl->count[0][c] > 1 || pl->count[1][c] > 1 || pl->size[c] <= 0)
            return 0;
        if (in0 && in1 && out) {
            p->bi[p->nb++] = c;
            p->batch *= pl->size[c];
        } else if (in0 && out) {
            p->mi[p->nm++] = c;
            p->M *= pl->size[c];
        } else if (in1 && out) {
            p->ni[p->nn++] = c;
            p->N *= pl->size[c];
        } else if (in0 && in1) {
            p->ki[p->nk++] = c;
            p->K *= pl->size[c];
        } else {
            return 0; /* summed inside one operand: the generic loop */
        }
    }
    /* a product too small for packing to pay */
    if (p->M * p->N * p->K < 4096 || p->N <= 1)
        return 0;
    int64_t s = 1, unit;
    for (int32_t d = pl->nout - 1; d >= 0; d--) {
        p->ystride[pl->out[d]] = s;
        s *= pl->size[pl->out[d]];
    }
    p->direct_a = group_stride(pl, pl->stride[0], p->mi, p->nm, &p->a_rs) &&
                  group_stride(pl, pl->stride[0], p->ki, p->nk, &p->a_cs);
    p->direct_b = group_stride(pl, pl->stride[1], p->ki, p->nk, &p->b_rs) &&
                  group_stride(pl, pl->stride[1], p->ni, p->nn, &p->b_cs);
    p->direct_y = group_stride(pl, p->ystride, p->ni, p->nn, &unit) && unit == 1 &&
                  group_stride(pl, p->ystride, p->mi, p->nm, &p->y_rs);
    if (p->direct_y && p->M == 1)
        p->y_rs = p->N;
    return 1;
}

/* Offset of batch element t (batch indices in bi order, the last fastest)
 * under per-index strides. */
static int64_t batch_offset(const ein_args *p, const int64_t *stride, int64_t t)
{
    int64_t off = 0;
    for (int32_t j = p->nb - 1; j >= 0; j--) {
        int64_t sz = p->pl.size[p->bi[j]];
        off += (t % sz) * stride[p->bi[j]];
        t /= sz;
    }
    return off;
}

/* dst (dense over groups g[0..ng) in order) = src gathered by index strides. */
typedef struct gather_spec {
    int32_t n;
    int32_t idx[3 * EIN_MAX_IDX];
    int64_t size[3 * EIN_MAX_IDX], stride[3 * EIN_MAX_IDX];
    const float *src;
    float *dst;
    int64_t total;
} gather_spec;

/* Elements [e0, e1): the first one's index divided out once, then an
 * odometer, the innermost dimension a plain strided loop. */
static void gather_run(const gather_spec *g, int64_t e0, int64_t e1)
{
    if (e0 >= e1)
        return;
    if (g->n == 0) {
        g->dst[e0] = g->src[0];
        return;
    }
    int64_t idx[3 * EIN_MAX_IDX], r = e0, off = 0;
    for (int32_t d = g->n - 1; d >= 0; d--) {
        idx[d] = r % g->size[d];
        off += idx[d] * g->stride[d];
        r /= g->size[d];
    }
    int32_t in = g->n - 1;
    int64_t n_in = g->size[in], s_in = g->stride[in];
    for (int64_t e = e0; e < e1;) {
        int64_t run = n_in - idx[in] < e1 - e ? n_in - idx[in] : e1 - e;
        const float *src = g->src + off;
        float *dst = g->dst + e;
        for (int64_t i = 0; i < run; i++)
            dst[i] = src[i * s_in];
        e += run;
        off += run * s_in;
        idx[in] += run;
        for (int32_t d = in; d > 0 && idx[d] == g->size[d]; d--) {
            off -= g->size[d] * g->stride[d];
            idx[d] = 0;
            idx[d - 1]++;
            off += g->stride[d - 1];
        }
    }
}

static void make_gather(const ein_args *p, const int64_t *strides, const int32_t *const *groups,
                        const int32_t *ns, int ng, const float *src, float *dst, gather_spec *g)
{
    g->n = 0;
    g->total = 1;
    for (int gi = 0; gi < ng; gi++)
        for (int32_t j = 0; j < ns[gi]; j++) {
            int32_t c = groups[gi][j];
            g->size[g->n] = p->pl.size[c];
            g->stride[g->n] = strides[c];
            g->total *= p->pl.size[c];
            g->n++;
        }
    g->src = src;
    g->dst = dst;
}

static void gather_ab_fn(int64_t blk, int64_t nblk, void *args)
{
    const ein_args *p = args;
    gather_spec ga, gb;
    const int32_t *gA[3] = {p->bi, p->mi, p->ki}, *gB[3] = {p->bi, p->ki, p->ni};
    int32_t nA[3] = {p->nb, p->nm, p->nk}, nB[3] = {p->nb, p->nk, p->nn};
    make_gather(p, p->pl.stride[0], gA, nA, 3, p->op[0], p->ag, &ga);
    make_gather(p, p->pl.stride[1], gB, nB, 3, p->op[1], p->bg, &gb);
    if (p->direct_a)
        ga.total = 0;
    if (p->direct_b)
        gb.total = 0;
    int64_t e0, e1;
    cge__block_range(ga.total + gb.total, blk, nblk, &e0, &e1);
    if (e0 < ga.total)
        gather_run(&ga, e0, e1 < ga.total ? e1 : ga.total);
    if (e1 > ga.total)
        gather_run(&gb, (e0 > ga.total ? e0 : ga.total) - ga.total, e1 - ga.total);
}

static void pack_fn(int64_t blk, int64_t nblk, void *args)
{
    const ein_args *p = args;
    int64_t panels = (p->N + CGE_GEMM_NR - 1) / CGE_GEMM_NR, w0, w1;
    cge__block_range(p->batch * panels, blk, nblk, &w0, &w1);
    while (w0 < w1) {
        int64_t m = w0 / panels, q0 = w0 % panels;
        int64_t q1 = q0 + (w1 - w0) < panels ? q0 + (w1 - w0) : panels;
        if (p->direct_b)
            cge__gemm_pack_b((const float *)p->op[1] + batch_offset(p, p->pl.stride[1], m),
                            p->b_rs, p->b_cs, p->K, p->N, q0, q1, p->bp + m * p->bp_mat);
        else
            cge__gemm_pack_b(p->bg + m * p->K * p->N, p->N, 1, p->K, p->N, q0, q1,
                            p->bp + m * p->bp_mat);
        w0 += q1 - q0;
    }
}

static void gemm_fn(int64_t blk, int64_t nblk, void *args)
{
    const ein_args *p = args;
    const cge__gemm_tiling *tl = &p->tiling;
    int64_t per = tl->tiles_m * tl->tiles_n, w0, w1;
    cge__block_range(p->batch * per, blk, nblk, &w0, &w1);
    for (int64_t w = w0; w < w1; w++) {
        int64_t t = w / per, tm = (w % per) / tl->tiles_n, tn = w % tl->tiles_n;
        cge__gemm_f32 g = {
            .M = p->M, .N = p->N, .K = p->K,
            .a = p->ag + t * p->M * p->K, .a_rs = p->K, .a_cs = 1,
            .bp = p->bp + t * p->bp_mat,
            .c = p->cg + t * p->M * p->N, .ldc = p->N, .alpha = 1.0f, .isa = p->isa,
        };
        if (p->direct_a) {
            g.a = (const float *)p->op[0] + batch_offset(p, p->pl.stride[0], t);
            g.a_rs = p->a_rs;
            g.a_cs = p->a_cs;
        }
        if (p->direct_y) {
            g.c = (float *)p->y + batch_offset(p, p->ystride, t);
            g.ldc = p->y_rs;
        }
        cge__gemm_f32_tile(&g, tm * tl->mt, (tm + 1) * tl->mt, tn * tl->nt, (tn + 1) * tl->nt);
    }
}

/* Output (indices in output order) from C laid out [batch, M, N]. */
static void scatter_fn(int64_t blk, int64_t nblk, void *args)
{
    const ein_args *p = args;
    int64_t cstr[EIN_MAX_IDX] = {0}, s = 1;
    const int32_t *groups[3] = {p->bi, p->mi, p->ni};
    int32_t ns[3] = {p->nb, p->nm, p->nn};
    for (int gi = 2; gi >= 0; gi--)
        for (int32_t j = ns[gi] - 1; j >= 0; j--) {
            cstr[groups[gi][j]] = s;
            s *= p->pl.size[groups[gi][j]];
        }
    gather_spec g;
    int32_t outs[EIN_MAX_IDX];
    for (int32_t i = 0; i < p->pl.nout; i++)
        outs[i] = p->pl.out[i];
    const int32_t *og[1] = {outs};
    int32_t on[1] = {p->pl.nout};
    make_gather(p, cstr, og, on, 1, p->cg, p->y, &g);
    int64_t e0, e1;
    cge__block_range(g.total, blk, nblk, &e0, &e1);
    gather_run(&g, e0, e1);
}

/* Workspace floats of the GEMM path, each piece 16-float aligned. */
static int64_t gemm_carve(ein_args *p, float *base)
{
    int64_t sizes[4] = {p->direct_a ? 0 : p->batch * p->M * p->K,
                        p->direct_b ? 0 : p->batch * p->K * p->N,
                        p->batch * cge__gemm_packed_b_floats(p->K, p->N),
                        p->direct_y ? 0 : p->batch * p->M * p->N};
    float **dst[4] = {&p->ag, &p->bg, &p->bp, &p->cg};
    int64_t off = 0;
    for (int i = 0; i < 4; i++) {
        if (base)
            *dst[i] = base + off;
        off += (sizes[i] + 15) / 16 * 16;
    }
    return off;
}

static int ein_setup(const cge_kernel_ctx *ctx, ein_args *p)
{
    memset(p, 0, sizeof *p);
    const char *eq = cge_attrs_get_string(ctx->attrs, "equation", NULL);
    const cge_shape *shapes[EIN_MAX_OPS];
    if (!eq || ctx->num_inputs < 1 || ctx->num_inputs > EIN_MAX_OPS)
        return 0;
    for (int32_t i = 0; i < ctx->num_inputs; i++) {
        if (!cge_shape_is_static(&ctx->inputs[i].shape))
            return 0;
        shapes[i] = &ctx->inputs[i].shape;
    }
    char err[160];
    if (!ein_parse(eq, ctx->num_inputs, shapes, &p->pl, err, sizeof err))
        return 0;
    p->t = ctx->inputs[0].dtype;
    return 1;
}

static size_t einsum_workspace(const cge_kernel_ctx *ctx)
{
    ein_args p;
    if (!ein_setup(ctx, &p) || !gemm_groups(&p))
        return 0;
    return (size_t)gemm_carve(&p, NULL) * sizeof(float) + 64;
}

static cge_status einsum_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    ein_args p;
    if (!ein_setup(ctx, &p))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "the equation does not fit the operands");
    for (int32_t i = 0; i < ctx->num_inputs; i++) {
        if (ctx->inputs[i].dtype != p.t)
            return cge_kernel_error(ctx, CGE_ERR_DTYPE, "operands differ in dtype");
        p.op[i] = ctx->inputs[i].data;
    }
    if (!generic_fn(p.t) || ctx->outputs[0].dtype != p.t)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "dtype %s is not supported",
                                cge_dtype_name(p.t));
    p.y = ctx->outputs[0].data;
    p.nout_elems = 1;
    for (int32_t i = 0; i < p.pl.nout; i++)
        p.nout_elems *= p.pl.size[p.pl.out[i]];
    p.nred_elems = 1;
    for (int32_t i = 0; i < p.pl.nred; i++)
        p.nred_elems *= p.pl.size[p.pl.red[i]];
    if (cge_shape_numel(&ctx->outputs[0].shape) != p.nout_elems)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output shape does not fit the equation");
    if (p.nout_elems == 0)
        return CGE_OK;
    int threads = ctx->num_threads;
    size_t need = einsum_workspace(ctx);
    if (need && ctx->workspace && ctx->workspace_size >= need && gemm_groups(&p)) {
        gemm_carve(&p, (float *)(((uintptr_t)ctx->workspace + 63) & ~(uintptr_t)63));
        p.bp_mat = cge__gemm_packed_b_floats(p.K, p.N);
        p.isa = cge__gemm_isa_best();
        cge__gemm_plan(p.batch, p.M, p.N, threads, &p.tiling);
        int64_t nab = p.batch * ((p.direct_a ? 0 : p.M * p.K) + (p.direct_b ? 0 : p.K * p.N));
        int64_t panels = p.batch * ((p.N + CGE_GEMM_NR - 1) / CGE_GEMM_NR);
        cge_status st = CGE_OK;
        if (nab)
            st = cge_launch(stream, gather_ab_fn, cge__blocks_for(nab, 16384, threads), &p,
                            sizeof p);
        if (!st)
            st = cge_launch(stream, pack_fn,
                            cge__blocks_for(panels, p.K >= 4096 ? 1 : 4096 / p.K, threads), &p,
                            sizeof p);
        if (!st)
            st = cge_launch(stream, gemm_fn,
                            cge__blocks_for(p.batch * p.tiling.tiles_m * p.tiling.tiles_n, 1,
                                           threads),
                            &p, sizeof p);
        if (!st && !p.direct_y)
            st = cge_launch(stream, scatter_fn, cge__blocks_for(p.nout_elems, 16384, threads), &p,
                            sizeof p);
        return st;
    }
    int64_t per = p.nred_elems * p.pl.nops;
    return cge_launch(stream, generic_fn(p.t),
                      cge__blocks_for(p.nout_elems, per >= 16384 ? 1 : 16384 / (per ? per : 1),
                                     threads),
                      &p, sizeof p);
}

/* ---- definition ------------------------------------------------------------------ */

static const cge_arg_def einsum_inputs[] = {
    {"Inputs", CGE_ARG_VARIADIC, EIN_DTYPES, "operands (1 to 8)"},
};
static const cge_arg_def einsum_outputs[] = {{"Output", 0, EIN_DTYPES, "result"}};
static const cge_attr_def einsum_attrs[] = {
    {"equation", CGE_ATTR_STRING, true, 0, 0.0f, NULL, "e.g. 'bij,bjk->bik'"},
};
static const cge_kernel_def einsum_kernels[] = {{
    .engine = "cpu",
    .dtypes = EIN_DTYPES,
    .launch = einsum_launch,
    .workspace_size = einsum_workspace,
    .inplace_input = -1,
}};

static const cge_op_def einsum_ops[] = {{
    .name = "Einsum", .domain = CGE_DOMAIN_DEFAULT, .since_version = 12,
    .inputs = einsum_inputs, .num_inputs = 1, .outputs = einsum_outputs, .num_outputs = 1,
    .attrs = einsum_attrs, .num_attrs = 1, .infer = einsum_infer,
    .kernels = einsum_kernels, .num_kernels = 1,
    .doc = "Einstein summation over up to 8 operands.",
}};

const cge_op_def *cge__ops_einsum(int32_t *count)
{
    *count = 1;
    return einsum_ops;
}
