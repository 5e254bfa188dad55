/* Recurrent layers at opset 14: RNN, GRU and LSTM (both layouts, forward,
 * reverse and bidirectional, sequence_lens, peepholes, activations with
 * alpha/beta, clip, input_forget, linear_before_reset). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/cpu_isa.h"
#include "ops/builtin.h"
#include "ops/fast_math.h"
#include "ops/gemm_kernel.h"
#include "ops/half_convert.h"
#include "ops/kernel_cache.h"
#include "ops/kernel_util.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RNN_X86 1
#else
#define RNN_X86 0
#endif

/* float32: the input projection of every time step is one packed GEMM; each
 * step's recurrent product runs on GEMM tiles, blocks split over directions
 * and batch rows. */

/* float16 and bfloat16 layers too (ONNX allows float16): converted to
 * float32 in the workspace around the float32 kernel (rnn_launch_half); a
 * half model's layers run widened from level 2 (compiler pass widen_half). */
#define RNN_DTYPES (CGE_DT(CGE_F32) | CGE_DT(CGE_F16) | CGE_DT(CGE_BF16))

enum { KIND_RNN, KIND_GRU, KIND_LSTM };

enum {
    ACT_RELU, ACT_TANH, ACT_SIGMOID, ACT_AFFINE, ACT_LEAKY_RELU, ACT_THRESHOLDED_RELU,
    ACT_SCALED_TANH, ACT_HARD_SIGMOID, ACT_ELU, ACT_SOFTSIGN, ACT_SOFTPLUS
};

/* Name, whether it takes alpha / beta, and their defaults (those of the ONNX
 * operators of the same name). */
static const struct {
    const char *name;
    int uses_alpha, uses_beta;
    float alpha, beta;
} act_table[] = {
    [ACT_RELU] = {"Relu", 0, 0, 0, 0},
    [ACT_TANH] = {"Tanh", 0, 0, 0, 0},
    [ACT_SIGMOID] = {"Sigmoid", 0, 0, 0, 0},
    [ACT_AFFINE] = {"Affine", 1, 1, 1.0f, 0.0f},
    [ACT_LEAKY_RELU] = {"LeakyRelu", 1, 0, 0.01f, 0},
    [ACT_THRESHOLDED_RELU] = {"ThresholdedRelu", 1, 0, 1.0f, 0},
    [ACT_SCALED_TANH] = {"ScaledTanh", 1, 1, 1.0f, 1.0f},
    [ACT_HARD_SIGMOID] = {"HardSigmoid", 1, 1, 0.2f, 0.5f},
    [ACT_ELU] = {"Elu", 1, 0, 1.0f, 0},
    [ACT_SOFTSIGN] = {"Softsign", 0, 0, 0, 0},
    [ACT_SOFTPLUS] = {"Softplus", 0, 0, 0, 0},
};
#define NUM_ACTS ((int)(sizeof act_table / sizeof act_table[0]))

typedef struct act {
    int fn;
    float alpha, beta;
} act;

/* Per kind: gates, activations per direction and their defaults. */
static const int kind_gates[] = {1, 3, 4};
static const int kind_acts[] = {1, 2, 3};
static const int kind_default_acts[][3] = {
    {ACT_TANH, 0, 0}, {ACT_SIGMOID, ACT_TANH, 0}, {ACT_SIGMOID, ACT_TANH, ACT_TANH}};

static int op_kind(const char *op_type)
{
    return !strcmp(op_type, "LSTM") ? KIND_LSTM : !strcmp(op_type, "GRU") ? KIND_GRU : KIND_RNN;
}

/* Everything the three launches need; copied by cge_launch. */
typedef struct rnn_args {
    int kind, layout, lbr, input_forget, has_clip;
    int reverse_dir[2];               /* direction d runs backwards */
    float clip;
    act acts[2][3];
    int64_t seq, batch, in, hid, dirs, gh; /* gh = gates * hidden */
    const float *x, *w, *r, *b, *h0, *c0, *p;
    const int32_t *lens;
    float *y, *yh, *yc;
    /* workspace */
    float *wp, *rp, *rph, *bias, *rbh, *xw, *hs, *cs, *gates, *tmp;
    int64_t wp_n, rp_n, rph_n;
    int prepacked;                    /* wp/rp/rph hold W and R packed at prepare */
    cge__gemm_tiling tiling;
    int64_t batch_blocks;
    cge__gemm_isa isa;
    int vec_gates;                    /* the AVX2 + FMA gate path (step_row_avx2) */
} rnn_args;

/* ---- attributes ---------------------------------------------------------- */

static int act_from_name(const char *s)
{
    for (int i = 0; i < NUM_ACTS; i++)
        if (!strcasecmp(s, act_table[i].name))
            return i;
    return -1;
}

/* Directions from the attribute: 1 or 2, and whether each one runs backwards.
 * Returns 0 for an unknown direction. */
static int parse_direction(const cge_attrs *attrs, int reverse_dir[2])
{
    const char *d = cge_attrs_get_string(attrs, "direction", "forward");
    reverse_dir[0] = reverse_dir[1] = 0;
    if (!strcmp(d, "forward"))
        return 1;
    if (!strcmp(d, "reverse")) {
        reverse_dir[0] = 1;
        return 1;
    }
    if (!strcmp(d, "bidirectional")) {
        reverse_dir[1] = 1;
        return 2;
    }
    return 0;
}

/* Activations per direction. alpha and beta are consumed in order, only by
 * the functions that take them (as ONNX Runtime does); the rest get the
 * defaults of the ONNX operator of the same name. Returns NULL or a
 * description of what is wrong (written into err). */
static const char *parse_acts(const cge_attrs *attrs, int kind, int dirs, act acts[2][3],
                              char *err, size_t err_size)
{
    int per = kind_acts[kind];
    const char *const *names = NULL;
    int64_t n = 0;
    const cge_attr *a = cge_attrs_find(attrs, "activations");
    if (a && a->kind == CGE_ATTR_STRINGS) {
        names = a->strings;
        n = a->n;
    }
    const float *alphas = NULL, *betas = NULL;
    int64_t na = cge_attrs_get_floats(attrs, "activation_alpha", &alphas);
    int64_t nb = cge_attrs_get_floats(attrs, "activation_beta", &betas);
    if (n != 0 && n != per && n != (int64_t)per * dirs) {
        snprintf(err, err_size, "activations lists %lld functions; %d per direction expected",
                 (long long)n, per);
        return err;
    }
    int64_t ia = 0, ib = 0;
    for (int d = 0; d < dirs; d++)
        for (int k = 0; k < per; k++) {
            int fn = kind_default_acts[kind][k];
            if (n > 0) {
                const char *nm = names[n == per ? k : d * per + k];
                fn = act_from_name(nm ? nm : "");
                if (fn < 0) {
                    snprintf(err, err_size, "unknown activation '%s'", nm ? nm : "");
                    return err;
                }
            }
            act *x = &acts[d][k];
            x->fn = fn;
            x->alpha = act_table[fn].alpha;
            x->beta = act_table[fn].beta;
            /* a list given once for both directions is read again for the second */
            if (n == per && d == 1)
                continue;
            if (act_table[fn].uses_alpha && ia < na)
                x->alpha = alphas[ia++];
            if (act_table[fn].uses_beta && ib < nb)
                x->beta = betas[ib++];
        }
    if (n == per && dirs == 2)
        for (int k = 0; k < per; k++)
            acts[1][k] = acts[0][k];
    return NULL;
}

/* ---- meta ------------------------------------------------------------------ */

static int dim_ok(int64_t have, int64_t want)
{
    return have < 0 || want < 0 || have == want;
}

static cge_status check_input(cge_infer_ctx *ctx, int32_t i, const char *name, int32_t rank,
                              const int64_t *want)
{
    if (ctx->num_inputs <= i || ctx->inputs[i].dtype == CGE_DTYPE_UNDEFINED)
        return CGE_OK;
    const cge_tensor_desc *t = &ctx->inputs[i];
    char s[CGE_SHAPE_STR_MAX];
    cge_shape_str(&t->shape, s, sizeof s);
    if (t->shape.rank != rank)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "%s %s must have rank %d", name, s, rank);
    for (int32_t d = 0; d < rank; d++)
        if (!dim_ok(t->shape.dims[d], want[d]))
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "%s is %s; dimension %d should be %lld",
                                  name, s, d, (long long)want[d]);
    if (i != 4 && t->dtype != ctx->inputs[0].dtype)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "%s is %s but X is %s", name,
                              cge_dtype_name(t->dtype), cge_dtype_name(ctx->inputs[0].dtype));
    return CGE_OK;
}

static cge_status rnn_infer(cge_infer_ctx *ctx)
{
    int kind = op_kind(ctx->op_type);
    int64_t G = kind_gates[kind];
    if (ctx->num_inputs < 3)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "needs inputs X, W and R");
    const cge_tensor_desc *X = &ctx->inputs[0], *W = &ctx->inputs[1], *R = &ctx->inputs[2];
    if (!(RNN_DTYPES & CGE_DT(X->dtype)))
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "X is %s; want float32, float16 or bfloat16",
                              cge_dtype_name(X->dtype));
    int rev[2];
    int64_t dirs = parse_direction(ctx->attrs, rev);
    if (!dirs)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "direction '%s' is not forward, reverse or bidirectional",
                              cge_attrs_get_string(ctx->attrs, "direction", ""));
    int64_t layout = cge_attrs_get_int(ctx->attrs, "layout", 0);
    if (layout != 0 && layout != 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "layout %lld is not 0 or 1",
                              (long long)layout);
    if (X->shape.rank != 3 || W->shape.rank != 3 || R->shape.rank != 3)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "X, W and R must have rank 3");
    int64_t seq = X->shape.dims[layout ? 1 : 0], batch = X->shape.dims[layout ? 0 : 1];
    int64_t in = X->shape.dims[2];
    int64_t hid = cge_attrs_get_int(ctx->attrs, "hidden_size", R->shape.dims[2]);
    if (hid < 0 && R->shape.dims[2] >= 0)
        hid = R->shape.dims[2];
    if (cge_attrs_find(ctx->attrs, "hidden_size") && hid <= 0)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "hidden_size must be positive");
    int64_t gh = hid >= 0 ? G * hid : -1;
    char err[160];
    act acts[2][3];
    if (parse_acts(ctx->attrs, kind, (int)dirs, acts, err, sizeof err))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "%s", err);
    if (kind == KIND_LSTM && cge_attrs_get_int(ctx->attrs, "input_forget", 0) != 0 &&
        cge_attrs_get_int(ctx->attrs, "input_forget", 0) != 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "input_forget must be 0 or 1");

    int64_t wdims[3] = {dirs, gh, in}, rdims[3] = {dirs, gh, hid}, bdims[2] = {dirs, 2 * gh};
    int64_t ldims[1] = {batch};
    int64_t hdims[3] = {layout ? batch : dirs, layout ? dirs : batch, hid};
    int64_t pdims[2] = {dirs, hid >= 0 ? 3 * hid : -1};
    if (bdims[1] < -1)
        bdims[1] = -1;
    cge_status st = check_input(ctx, 1, "W", 3, wdims);
    if (!st)
        st = check_input(ctx, 2, "R", 3, rdims);
    if (!st)
        st = check_input(ctx, 3, "B", 2, bdims);
    if (!st)
        st = check_input(ctx, 4, "sequence_lens", 1, ldims);
    if (!st)
        st = check_input(ctx, 5, "initial_h", 3, hdims);
    if (!st && kind == KIND_LSTM)
        st = check_input(ctx, 6, "initial_c", 3, hdims);
    if (!st && kind == KIND_LSTM)
        st = check_input(ctx, 7, "P", 2, pdims);
    if (st)
        return st;
    if (ctx->num_inputs > 4 && ctx->inputs[4].dtype != CGE_DTYPE_UNDEFINED &&
        ctx->inputs[4].dtype != CGE_I32)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "sequence_lens must be int32, not %s",
                              cge_dtype_name(ctx->inputs[4].dtype));
    for (int32_t o = 0; o < ctx->num_outputs; o++) {
        ctx->outputs[o].dtype = X->dtype;
        if (o == 0)
            ctx->outputs[o].shape = layout ? CGE_SHAPE(batch, seq, dirs, hid)
                                           : CGE_SHAPE(seq, dirs, batch, hid);
        else
            ctx->outputs[o].shape = layout ? CGE_SHAPE(batch, dirs, hid)
                                           : CGE_SHAPE(dirs, batch, hid);
    }
    return CGE_OK;
}

/* ---- kernels ------------------------------------------------------------- */

/* Whether every activation the layer applies has an AVX2 form (vact). */
static int acts_vectorised(const rnn_args *p)
{
    for (int64_t d = 0; d < p->dirs; d++)
        for (int i = 0; i < kind_acts[p->kind]; i++) {
            int fn = p->acts[d][i].fn;
            if (fn != ACT_SIGMOID && fn != ACT_TANH && fn != ACT_RELU)
                return 0;
        }
    return 1;
}

static void act_apply(const act *a, float *v, int64_t n)
{
    float al = a->alpha, be = a->beta;
    switch (a->fn) {
    case ACT_RELU:
        for (int64_t i = 0; i < n; i++)
            v[i] = v[i] > 0.0f ? v[i] : 0.0f;
        break;
    case ACT_TANH:
        cge__tanh_f32_row(v, v, n);
        break;
    case ACT_SIGMOID:
        cge__sigmoid_f32_row(v, v, n);
        break;
    case ACT_AFFINE:
        for (int64_t i = 0; i < n; i++)
            v[i] = al * v[i] + be;
        break;
    case ACT_LEAKY_RELU:
        for (int64_t i = 0; i < n; i++)
            v[i] = v[i] >= 0.0f ? v[i] : al * v[i];
        break;
    case ACT_THRESHOLDED_RELU:
        for (int64_t i = 0; i < n; i++)
            v[i] = v[i] > al ? v[i] : 0.0f;
        break;
    case ACT_SCALED_TANH:
        for (int64_t i = 0; i < n; i++)
            v[i] = al * tanhf(be * v[i]);
        break;
    case ACT_HARD_SIGMOID:
        for (int64_t i = 0; i < n; i++) {
            float t = al * v[i] + be;
            v[i] = t < 0.0f ? 0.0f : (t > 1.0f ? 1.0f : t);
        }
        break;
    case ACT_ELU:
        for (int64_t i = 0; i < n; i++)
            v[i] = v[i] >= 0.0f ? v[i] : al * (expf(v[i]) - 1.0f);
        break;
    case ACT_SOFTSIGN:
        for (int64_t i = 0; i < n; i++)
            v[i] = v[i] / (1.0f + fabsf(v[i]));
        break;
    case ACT_SOFTPLUS:
        for (int64_t i = 0; i < n; i++)
            v[i] = v[i] > 20.0f ? v[i] : log1pf(expf(v[i]));
        break;
    default: break;
    }
}

/* v += add (when given), then clip to [-c, c] (when clipping). */
static void add_clip(const rnn_args *p, float *v, const float *add, int64_t n)
{
    if (add)
        for (int64_t i = 0; i < n; i++)
            v[i] += add[i];
    if (p->has_clip) {
        float c = p->clip;
        for (int64_t i = 0; i < n; i++)
            v[i] = v[i] < -c ? -c : (v[i] > c ? c : v[i]);
    }
}

/* Offsets (in floats) of state rows in the layout of X / Y / Y_h. */
static int64_t x_row(const rnn_args *p, int64_t t, int64_t b)
{
    return p->layout ? b * p->seq + t : t * p->batch + b;
}
static int64_t y_off(const rnn_args *p, int64_t t, int64_t d, int64_t b)
{
    return (p->layout ? (b * p->seq + t) * p->dirs + d : (t * p->dirs + d) * p->batch + b) *
           p->hid;
}
static int64_t h_off(const rnn_args *p, int64_t d, int64_t b)
{
    return (p->layout ? b * p->dirs + d : d * p->batch + b) * p->hid;
}

/* W^T and R^T of direction d packed for the GEMM (GRU: R's z and r gates
 * apart from its h gate, which multiplies r (.) H). */
static void pack_dir(const rnn_args *p, int64_t d, float *wp, float *rp, float *rph)
{
    int64_t H = p->hid, GH = p->gh, I = p->in;
    cge__gemm_pack_b(p->w + d * GH * I, 1, I, I, GH, 0, (GH + CGE_GEMM_NR - 1) / CGE_GEMM_NR,
                    wp + d * p->wp_n);
    const float *r = p->r + d * GH * H;
    if (p->kind == KIND_GRU) {
        cge__gemm_pack_b(r, 1, H, H, 2 * H, 0, (2 * H + CGE_GEMM_NR - 1) / CGE_GEMM_NR,
                        rp + d * p->rp_n);
        cge__gemm_pack_b(r + 2 * H * H, 1, H, H, H, 0, (H + CGE_GEMM_NR - 1) / CGE_GEMM_NR,
                        rph + d * p->rph_n);
    } else {
        cge__gemm_pack_b(r, 1, H, H, GH, 0, (GH + CGE_GEMM_NR - 1) / CGE_GEMM_NR,
                        rp + d * p->rp_n);
    }
}

/* Block d: pack W^T and R^T of direction d (unless prepare did), sum its
 * biases, load the initial state. */
static void prep_fn(int64_t blk, int64_t nblk, void *args)
{
    (void)nblk;
    const rnn_args *p = args;
    int64_t d = blk, H = p->hid, GH = p->gh;
    if (!p->prepacked)
        pack_dir(p, d, p->wp, p->rp, p->rph);
    float *bias = p->bias + d * GH, *rbh = p->rbh + d * H;
    const float *wb = p->b ? p->b + d * 2 * GH : NULL, *rb = wb ? wb + GH : NULL;
    for (int64_t j = 0; j < GH; j++)
        bias[j] = wb ? wb[j] + rb[j] : 0.0f;
    for (int64_t j = 0; j < H; j++)
        rbh[j] = 0.0f;
    /* linear_before_reset: Rbh is added inside r * (...), not with Wbh */
    if (p->kind == KIND_GRU && p->lbr && wb)
        for (int64_t j = 0; j < H; j++) {
            bias[2 * H + j] = wb[2 * H + j];
            rbh[j] = rb[2 * H + j];
        }
    for (int64_t b = 0; b < p->batch; b++) {
        float *hs = p->hs + (d * p->batch + b) * H, *cs = p->cs + (d * p->batch + b) * H;
        for (int64_t j = 0; j < H; j++) {
            hs[j] = p->h0 ? p->h0[h_off(p, d, b) + j] : 0.0f;
            cs[j] = p->c0 ? p->c0[h_off(p, d, b) + j] : 0.0f;
        }
    }
}

/* XW[d] = X * W[d]^T + biases, for every time step at once. */
static void xw_fn(int64_t blk, int64_t nblk, void *args)
{
    const rnn_args *p = args;
    const cge__gemm_tiling *tl = &p->tiling;
    int64_t per = tl->tiles_m * tl->tiles_n, w0, w1, M = p->seq * p->batch;
    cge__block_range(p->dirs * per, blk, nblk, &w0, &w1);
    for (int64_t w = w0; w < w1; w++) {
        int64_t d = w / per, tm = (w % per) / tl->tiles_n, tn = w % tl->tiles_n;
        cge__gemm_f32 g = {
            .M = M, .N = p->gh, .K = p->in,
            .a = p->x, .a_rs = p->in, .a_cs = 1,
            .bp = p->wp + d * p->wp_n,
            .c = p->xw + d * M * p->gh, .ldc = p->gh,
            .alpha = 1.0f,
            .bias = p->bias + d * p->gh, .bias_rs = 0, .bias_cs = 1, .beta = 1.0f,
            .isa = p->isa,
        };
        cge__gemm_f32_tile(&g, tm * tl->mt, (tm + 1) * tl->mt, tn * tl->nt, (tn + 1) * tl->nt);
    }
}

#if RNN_X86
/* The recurrent product for a few batch rows (fewer than the GEMM's 12-row
 * micro-tile, which would compute them as a padded edge): four rows by two
 * 16-column panels at a time, the accumulation over k in order with FMA as
 * the micro-kernel does. */
__attribute__((target("avx512f"))) static void rec_rows_avx512(const float *a, int64_t lda,
                                                               int64_t rows, const float *bp,
                                                               int64_t K, int64_t N, float *c,
                                                               int64_t ldc)
{
    int64_t panels = (N + CGE_GEMM_NR - 1) / CGE_GEMM_NR;
    for (int64_t r0 = 0; r0 < rows; r0 += 4) {
        int64_t nr = rows - r0 < 4 ? rows - r0 : 4;
        const float *ar[4];
        for (int i = 0; i < 4; i++)
            ar[i] = a + (r0 + (i < nr ? i : 0)) * lda;
        for (int64_t pn = 0; pn < panels; pn += 2) {
            int two = pn + 1 < panels;
            const float *b0 = bp + pn * K * CGE_GEMM_NR, *b1 = two ? b0 + K * CGE_GEMM_NR : b0;
            __m512 acc[4][2];
            for (int i = 0; i < 4; i++)
                acc[i][0] = acc[i][1] = _mm512_setzero_ps();
            for (int64_t k = 0; k < K; k++) {
                __m512 x0 = _mm512_loadu_ps(b0 + k * CGE_GEMM_NR);
                __m512 x1 = _mm512_loadu_ps(b1 + k * CGE_GEMM_NR);
                for (int i = 0; i < 4; i++) {
                    __m512 v = _mm512_set1_ps(ar[i][k]);
                    acc[i][0] = _mm512_fmadd_ps(v, x0, acc[i][0]);
                    acc[i][1] = _mm512_fmadd_ps(v, x1, acc[i][1]);
                }
            }
            for (int h = 0; h < 1 + two; h++) {
                int64_t n0 = (pn + h) * CGE_GEMM_NR, w = N - n0 < 16 ? N - n0 : 16;
                __mmask16 m = (__mmask16)((1u << w) - 1u);
                for (int64_t i = 0; i < nr; i++)
                    _mm512_mask_storeu_ps(c + (r0 + i) * ldc + n0, m, acc[i][h]);
            }
        }
    }
}
#endif

#if RNN_X86
/* AVX2 + FMA: the recurrent product for a few batch rows (the GEMM's 6-row
 * micro-tile would compute a padded edge and pack A every step). Tiles of R
 * rows by P 16-column panels (8 or 12 accumulators kept in registers), the
 * accumulation over k in order with FMA. `wlast`: the columns of the tile's
 * last panel that are C's (16, or N's remainder). */
#define REC_TILE_AVX2(R, P)                                                                    \
    __attribute__((target("avx2,fma"))) static void rec_tile_##R##x##P(                        \
        const float *a, int64_t lda, const float *b, int64_t K, float *c, int64_t ldc,         \
        int64_t wlast)                                                                         \
    {                                                                                          \
        __m256 acc[R][2 * P];                                                                  \
        _Pragma("GCC unroll 4") for (int i = 0; i < R; i++)                                    \
            _Pragma("GCC unroll 8") for (int q = 0; q < 2 * P; q++)                            \
                acc[i][q] = _mm256_setzero_ps();                                               \
        for (int64_t k = 0; k < K; k++) {                                                      \
            __m256 x[2 * P];                                                                   \
            _Pragma("GCC unroll 8") for (int q = 0; q < 2 * P; q++)                            \
                x[q] = _mm256_loadu_ps(b + (q / 2) * K * CGE_GEMM_NR + k * CGE_GEMM_NR +       \
                                       (q % 2) * 8);                                           \
            _Pragma("GCC unroll 4") for (int i = 0; i < R; i++) {                              \
                __m256 v = _mm256_broadcast_ss(a + i * lda + k);                               \
                _Pragma("GCC unroll 8") for (int q = 0; q < 2 * P; q++)                        \
                    acc[i][q] = _mm256_fmadd_ps(v, x[q], acc[i][q]);                           \
            }                                                                                  \
        }                                                                                      \
        _Pragma("GCC unroll 4") for (int i = 0; i < R; i++)                                    \
            _Pragma("GCC unroll 4") for (int q = 0; q < P; q++) {                              \
                float *dst = c + i * ldc + q * CGE_GEMM_NR;                                    \
                if (q < P - 1 || wlast == CGE_GEMM_NR) {                                       \
                    _mm256_storeu_ps(dst, acc[i][2 * q]);                                      \
                    _mm256_storeu_ps(dst + 8, acc[i][2 * q + 1]);                              \
                } else {                                                                       \
                    float t[CGE_GEMM_NR];                                                      \
                    _mm256_storeu_ps(t, acc[i][2 * q]);                                        \
                    _mm256_storeu_ps(t + 8, acc[i][2 * q + 1]);                                \
                    memcpy(dst, t, sizeof(float) * (size_t)wlast);                             \
                }                                                                              \
            }                                                                                  \
    }
REC_TILE_AVX2(4, 1)
REC_TILE_AVX2(2, 3)
REC_TILE_AVX2(2, 1)
REC_TILE_AVX2(1, 4)
REC_TILE_AVX2(1, 1)

static void rec_rows_avx2(const float *a, int64_t lda, int64_t rows, const float *bp, int64_t K,
                          int64_t N, float *c, int64_t ldc)
{
    typedef void (*tile_fn)(const float *, int64_t, const float *, int64_t, float *, int64_t,
                            int64_t);
    int64_t panels = (N + CGE_GEMM_NR - 1) / CGE_GEMM_NR;
    for (int64_t r0 = 0; r0 < rows;) {
        int64_t nr = rows - r0 >= 4 ? 4 : rows - r0 >= 2 ? 2 : 1;
        int64_t wide = nr == 4 ? 1 : nr == 2 ? 3 : 4; /* panels per tile */
        tile_fn big = nr == 4 ? rec_tile_4x1 : nr == 2 ? rec_tile_2x3 : rec_tile_1x4;
        tile_fn one = nr == 4 ? rec_tile_4x1 : nr == 2 ? rec_tile_2x1 : rec_tile_1x1;
        for (int64_t pn = 0; pn < panels;) {
            int64_t np = pn + wide <= panels ? wide : 1;
            int64_t n_last = (pn + np - 1) * CGE_GEMM_NR;
            int64_t w = N - n_last < CGE_GEMM_NR ? N - n_last : CGE_GEMM_NR;
            (np == wide ? big : one)(a + r0 * lda, lda, bp + pn * K * CGE_GEMM_NR, K,
                                     c + r0 * ldc + pn * CGE_GEMM_NR, ldc, w);
            pn += np;
        }
        r0 += nr;
    }
}

/* ---- AVX2 + FMA gates ---------------------------------------------------- */
/* The gate activations eight lanes at a time, the formulas of fast_math.h
 * (cge__expf_fast, cge__sigmoidf_fast, cge__tanhf_fast) with FMA, and each
 * step's element-wise work (bias rows, peepholes, clip, the cell and state
 * updates) fused into one pass over the hidden units. Used where every
 * activation of the layer is Sigmoid, Tanh or Relu (the defaults); other
 * activations take the scalar path. */

static const int32_t rnn_lane_mask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

typedef struct vlane {
    __m256i m;   /* the lanes of this chunk: all 8, or the row's tail */
    int full;
} vlane;

__attribute__((target("avx2,fma"))) static inline vlane lanes_at(int64_t j, int64_t n)
{
    int64_t left = n - j;
    vlane l;
    l.full = left >= 8;
    l.m = _mm256_loadu_si256((const __m256i *)(rnn_lane_mask + 8 - (l.full ? 8 : left)));
    return l;
}

__attribute__((target("avx2,fma"))) static inline __m256 vld(const float *p, vlane l)
{
    return l.full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, l.m);
}

__attribute__((target("avx2,fma"))) static inline void vst(float *p, __m256 v, vlane l)
{
    if (l.full)
        _mm256_storeu_ps(p, v);
    else
        _mm256_maskstore_ps(p, l.m, v);
}

__attribute__((target("avx2,fma"))) static inline __m256 vexp(__m256 x)
{
    const __m256 hi = _mm256_set1_ps(88.72f), lo = _mm256_set1_ps(-87.33f);
    __m256 xc = _mm256_min_ps(x, hi);
    xc = _mm256_max_ps(xc, lo);
    xc = _mm256_and_ps(xc, _mm256_cmp_ps(x, x, _CMP_ORD_Q)); /* NaN -> 0 */
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
    __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
    p = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
    p = _mm256_blendv_ps(p, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
    p = _mm256_blendv_ps(p, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
    return _mm256_blendv_ps(x, p, _mm256_cmp_ps(x, x, _CMP_ORD_Q));
}

__attribute__((target("avx2,fma"))) static inline __m256 vsigmoid(__m256 x)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 e = vexp(_mm256_xor_ps(x, _mm256_set1_ps(-0.0f)));
    return _mm256_div_ps(one, _mm256_add_ps(one, e));
}

__attribute__((target("avx2,fma"))) static inline __m256 vtanh(__m256 x)
{
    const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
    __m256 a = _mm256_andnot_ps(sign, x), s = _mm256_mul_ps(x, x);
    __m256 p = _mm256_set1_ps(-5.70498872745e-3f);
    p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(2.06390887954e-2f));
    p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(-5.37397155531e-2f));
    p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(1.33314422036e-1f));
    p = _mm256_fmadd_ps(p, s, _mm256_set1_ps(-3.33332819422e-1f));
    __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(x, s), p, x);
    __m256 e = vexp(_mm256_mul_ps(_mm256_set1_ps(2.0f), _mm256_min_ps(a, _mm256_set1_ps(9.0f))));
    __m256 big = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
    big = _mm256_or_ps(big, _mm256_and_ps(x, sign)); /* big >= 0: x's sign */
    /* NaN: a < 0.625 is false, and big is NaN from e = NaN... keep x */
    __m256 r = _mm256_blendv_ps(big, small, _mm256_cmp_ps(a, _mm256_set1_ps(0.625f), _CMP_LT_OQ));
    return _mm256_blendv_ps(x, r, _mm256_cmp_ps(x, x, _CMP_ORD_Q));
}

__attribute__((target("avx2,fma"))) static inline __m256 vact(int fn, __m256 v)
{
    switch (fn) {
    case ACT_SIGMOID: return vsigmoid(v);
    case ACT_TANH: return vtanh(v);
    default: return _mm256_max_ps(v, _mm256_setzero_ps()); /* ACT_RELU */
    }
}

/* clip to [-c, c] when the layer clips */
__attribute__((target("avx2,fma"))) static inline __m256 vclip(const rnn_args *p, __m256 v)
{
    if (!p->has_clip)
        return v;
    __m256 c = _mm256_set1_ps(p->clip);
    return _mm256_min_ps(_mm256_max_ps(v, _mm256_xor_ps(c, _mm256_set1_ps(-0.0f))), c);
}

/* step_row's work, eight hidden units at a time. */
__attribute__((target("avx2,fma"))) static void step_row_avx2(const rnn_args *p, int64_t d,
                                                              int64_t b, int64_t t)
{
    int64_t H = p->hid, GH = p->gh;
    const act *ac = p->acts[d];
    const float *xw = p->xw + d * p->seq * p->batch * GH + x_row(p, t, b) * GH;
    float *gt = p->gates + (d * p->batch + b) * GH;
    float *hs = p->hs + (d * p->batch + b) * H, *cs = p->cs + (d * p->batch + b) * H;
    float *y = p->y ? p->y + y_off(p, t, d, b) : NULL;
    const __m256 one = _mm256_set1_ps(1.0f);
    for (int64_t j = 0; j < H; j += 8) {
        vlane l = lanes_at(j, H);
        __m256 h;
        if (p->kind == KIND_RNN) {
            h = vact(ac[0].fn, vclip(p, _mm256_add_ps(vld(gt + j, l), vld(xw + j, l))));
        } else if (p->kind == KIND_LSTM) {
            __m256 c = vld(cs + j, l);
            __m256 gi = _mm256_add_ps(vld(gt + j, l), vld(xw + j, l));
            __m256 go = _mm256_add_ps(vld(gt + H + j, l), vld(xw + H + j, l));
            __m256 gf = _mm256_add_ps(vld(gt + 2 * H + j, l), vld(xw + 2 * H + j, l));
            __m256 gc = _mm256_add_ps(vld(gt + 3 * H + j, l), vld(xw + 3 * H + j, l));
            const float *pi = p->p ? p->p + d * 3 * H : NULL;
            if (pi) {
                gi = _mm256_fmadd_ps(vld(pi + j, l), c, gi);
                gf = _mm256_fmadd_ps(vld(pi + 2 * H + j, l), c, gf);
            }
            gi = vact(ac[0].fn, vclip(p, gi));
            gf = p->input_forget ? _mm256_sub_ps(one, gi) : vact(ac[0].fn, vclip(p, gf));
            gc = vact(ac[1].fn, vclip(p, gc));
            c = _mm256_fmadd_ps(gf, c, _mm256_mul_ps(gi, gc));
            if (pi)
                go = _mm256_fmadd_ps(vld(pi + H + j, l), c, go);
            go = vact(ac[0].fn, vclip(p, go));
            h = _mm256_mul_ps(go, vact(ac[2].fn, c));
            vst(cs + j, c, l);
        } else {
            /* GRU, second half (z and r activated in recur_fn) */
            __m256 gz = vld(gt + j, l), gr = vld(gt + H + j, l), gh = vld(gt + 2 * H + j, l);
            __m256 xh = vld(xw + 2 * H + j, l);
            if (p->lbr)
                gh = _mm256_fmadd_ps(gr, _mm256_add_ps(gh, vld(p->rbh + d * H + j, l)), xh);
            else
                gh = _mm256_add_ps(gh, xh);
            gh = vact(ac[1].fn, vclip(p, gh));
            /* (1 - z) h~ + z h */
            h = _mm256_fmadd_ps(gz, _mm256_sub_ps(vld(hs + j, l), gh), gh);
        }
        vst(hs + j, h, l);
        if (y)
            vst(y + j, h, l);
    }
}

/* GRU, first half: z and r gates (2H units) plus XW, clip, activation; then
 * tmp = r (.) H unless linear_before_reset. */
__attribute__((target("avx2,fma"))) static void gru_zr_avx2(const rnn_args *p, int64_t d,
                                                            float *g, const float *xw,
                                                            const float *hs, float *tmp)
{
    int64_t H = p->hid;
    int fn = p->acts[d][0].fn;
    for (int64_t j = 0; j < 2 * H; j += 8) {
        vlane l = lanes_at(j, 2 * H);
        vst(g + j, vact(fn, vclip(p, _mm256_add_ps(vld(g + j, l), vld(xw + j, l)))), l);
    }
    if (!p->lbr)
        for (int64_t j = 0; j < H; j += 8) {
            vlane l = lanes_at(j, H);
            vst(tmp + j, _mm256_mul_ps(vld(g + H + j, l), vld(hs + j, l)), l);
        }
}
#endif

/* c[b0..b1) = a[b0..b1) * packed (batch rows of K = hid, N columns, ldc). */
static void rec_product(const rnn_args *p, const float *a, const float *bp, float *c, int64_t N,
                        int64_t ldc, int64_t b0, int64_t b1)
{
#if RNN_X86
    if (p->isa == CGE_GEMM_ISA_AVX512 && b1 - b0 < CGE_GEMM_MT) {
        rec_rows_avx512(a + b0 * p->hid, p->hid, b1 - b0, bp, p->hid, N, c + b0 * ldc, ldc);
        return;
    }
    if (p->isa == CGE_GEMM_ISA_AVX2 && b1 - b0 < CGE_GEMM_MT) {
        rec_rows_avx2(a + b0 * p->hid, p->hid, b1 - b0, bp, p->hid, N, c + b0 * ldc, ldc);
        return;
    }
#endif
    cge__gemm_f32 g = {
        .M = p->batch, .N = N, .K = p->hid,
        .a = a, .a_rs = p->hid, .a_cs = 1,
        .bp = bp, .c = c, .ldc = ldc, .alpha = 1.0f, .isa = p->isa,
    };
    cge__gemm_f32_tile(&g, b0, b1, 0, N);
}

/* One time step of batch row b (time index t) of direction d; gates holds
 * H(t-1) * R^T for the row. Writes the new state into hs/cs and Y. */
static void step_row(const rnn_args *p, int64_t d, int64_t b, int64_t t)
{
#if RNN_X86
    if (p->vec_gates) {
        step_row_avx2(p, d, b, t);
        return;
    }
#endif
    int64_t H = p->hid, GH = p->gh;
    const act *ac = p->acts[d];
    const float *xw = p->xw + d * p->seq * p->batch * GH + x_row(p, t, b) * GH;
    float *gt = p->gates + (d * p->batch + b) * GH;
    float *hs = p->hs + (d * p->batch + b) * H, *cs = p->cs + (d * p->batch + b) * H;
    float *tmp = p->tmp + (d * p->batch + b) * H;
    if (p->kind == KIND_RNN) {
        add_clip(p, gt, xw, H);
        act_apply(&ac[0], gt, H);
        memcpy(hs, gt, sizeof(float) * (size_t)H);
    } else if (p->kind == KIND_LSTM) {
        float *gi = gt, *go = gt + H, *gf = gt + 2 * H, *gc = gt + 3 * H;
        const float *pi = p->p ? p->p + d * 3 * H : NULL, *po = pi ? pi + H : NULL,
                    *pf = pi ? pi + 2 * H : NULL;
        for (int64_t j = 0; j < GH; j++)
            gt[j] += xw[j];
        if (pi)
            for (int64_t j = 0; j < H; j++) {
                gi[j] += pi[j] * cs[j];
                gf[j] += pf[j] * cs[j];
            }
        add_clip(p, gi, NULL, H);
        act_apply(&ac[0], gi, H);
        if (p->input_forget) {
            for (int64_t j = 0; j < H; j++)
                gf[j] = 1.0f - gi[j];
        } else {
            add_clip(p, gf, NULL, H);
            act_apply(&ac[0], gf, H);
        }
        add_clip(p, gc, NULL, H);
        act_apply(&ac[1], gc, H);
        for (int64_t j = 0; j < H; j++)
            cs[j] = gf[j] * cs[j] + gi[j] * gc[j];
        if (po)
            for (int64_t j = 0; j < H; j++)
                go[j] += po[j] * cs[j];
        add_clip(p, go, NULL, H);
        act_apply(&ac[0], go, H);
        memcpy(tmp, cs, sizeof(float) * (size_t)H);
        act_apply(&ac[2], tmp, H);
        for (int64_t j = 0; j < H; j++)
            hs[j] = go[j] * tmp[j];
    } else {
        /* GRU, second half: gates[2H..3H) holds (r (.) H) * Rh^T, or H * Rh^T
         * with linear_before_reset; z and r are already activated. */
        float *gz = gt, *gr = gt + H, *gh = gt + 2 * H;
        const float *rbh = p->rbh + d * H;
        if (p->lbr)
            for (int64_t j = 0; j < H; j++)
                gh[j] = xw[2 * H + j] + gr[j] * (gh[j] + rbh[j]);
        else
            for (int64_t j = 0; j < H; j++)
                gh[j] += xw[2 * H + j];
        add_clip(p, gh, NULL, H);
        act_apply(&ac[1], gh, H);
        for (int64_t j = 0; j < H; j++)
            hs[j] = (1.0f - gz[j]) * gh[j] + gz[j] * hs[j];
    }
    if (p->y)
        memcpy(p->y + y_off(p, t, d, b), hs, sizeof(float) * (size_t)H);
}

static int64_t row_len(const rnn_args *p, int64_t b)
{
    if (!p->lens)
        return p->seq;
    int64_t l = p->lens[b];
    return l < 0 ? 0 : (l > p->seq ? p->seq : l);
}

/* Block = (direction, range of batch rows): the whole sequence. */
static void recur_fn(int64_t blk, int64_t nblk, void *args)
{
    (void)nblk;
    const rnn_args *p = args;
    int64_t d = blk / p->batch_blocks, b0, b1, H = p->hid, GH = p->gh;
    cge__block_range(p->batch, blk % p->batch_blocks, p->batch_blocks, &b0, &b1);
    float *hs = p->hs + d * p->batch * H, *gates = p->gates + d * p->batch * GH;
    float *tmp = p->tmp + d * p->batch * H;
    int rev = p->reverse_dir[d];
    for (int64_t s = 0; s < p->seq; s++) {
        /* rows past their length stay inactive; the product covers them anyway */
        if (p->kind == KIND_GRU) {
            rec_product(p, hs, p->rp + d * p->rp_n, gates, 2 * H, GH, b0, b1);
            for (int64_t b = b0; b < b1; b++) {
                int64_t len = row_len(p, b);
                if (s >= len)
                    continue;
                int64_t t = rev ? len - 1 - s : s;
                const float *xw = p->xw + d * p->seq * p->batch * GH + x_row(p, t, b) * GH;
                float *g = gates + b * GH;
#if RNN_X86
                if (p->vec_gates) {
                    gru_zr_avx2(p, d, g, xw, hs + b * H, tmp + b * H);
                    continue;
                }
#endif
                add_clip(p, g, xw, 2 * H);
                act_apply(&p->acts[d][0], g, 2 * H);
                if (!p->lbr)
                    for (int64_t j = 0; j < H; j++)
                        tmp[b * H + j] = g[H + j] * hs[b * H + j];
            }
            rec_product(p, p->lbr ? hs : tmp, p->rph + d * p->rph_n, gates + 2 * H, H, GH, b0,
                        b1);
        } else {
            rec_product(p, hs, p->rp + d * p->rp_n, gates, GH, GH, b0, b1);
        }
        for (int64_t b = b0; b < b1; b++) {
            int64_t len = row_len(p, b);
            if (s < len)
                step_row(p, d, b, rev ? len - 1 - s : s);
        }
    }
    for (int64_t b = b0; b < b1; b++) {
        if (p->y)
            for (int64_t t = row_len(p, b); t < p->seq; t++)
                memset(p->y + y_off(p, t, d, b), 0, sizeof(float) * (size_t)H);
        if (p->yh)
            memcpy(p->yh + h_off(p, d, b), hs + b * H, sizeof(float) * (size_t)H);
        if (p->yc)
            memcpy(p->yc + h_off(p, d, b), p->cs + (d * p->batch + b) * H,
                   sizeof(float) * (size_t)H);
    }
}

/* Static sizes from the kernel context; 0 if the shapes are not usable. */
static int rnn_sizes(const cge_kernel_ctx *ctx, rnn_args *p)
{
    memset(p, 0, sizeof *p);
    if (ctx->num_inputs < 3)
        return 0;
    const cge_tensor *X = &ctx->inputs[0], *W = &ctx->inputs[1], *R = &ctx->inputs[2];
    if (X->shape.rank != 3 || W->shape.rank != 3 || R->shape.rank != 3 ||
        !cge_shape_is_static(&X->shape) || !cge_shape_is_static(&W->shape) ||
        !cge_shape_is_static(&R->shape))
        return 0;
    p->kind = op_kind(ctx->op_type);
    p->dirs = parse_direction(ctx->attrs, p->reverse_dir);
    p->layout = cge_attrs_get_int(ctx->attrs, "layout", 0) != 0;
    p->seq = X->shape.dims[p->layout ? 1 : 0];
    p->batch = X->shape.dims[p->layout ? 0 : 1];
    p->in = X->shape.dims[2];
    p->hid = R->shape.dims[2];
    p->gh = kind_gates[p->kind] * p->hid;
    if (!p->dirs || W->shape.dims[0] != p->dirs || W->shape.dims[1] != p->gh ||
        W->shape.dims[2] != p->in || R->shape.dims[0] != p->dirs || R->shape.dims[1] != p->gh)
        return 0;
    if (p->kind == KIND_GRU) {
        p->rp_n = cge__gemm_packed_b_floats(p->hid, 2 * p->hid);
        p->rph_n = cge__gemm_packed_b_floats(p->hid, p->hid);
    } else {
        p->rp_n = cge__gemm_packed_b_floats(p->hid, p->gh);
    }
    p->wp_n = cge__gemm_packed_b_floats(p->in, p->gh);
    return 1;
}

/* Workspace pieces in order; returns floats needed (each piece 16-float aligned). */
static int64_t rnn_carve(rnn_args *p, float *base)
{
    int64_t D = p->dirs, B = p->batch, H = p->hid;
    int64_t sizes[] = {D * p->wp_n, D * p->rp_n, D * p->rph_n, D * p->gh, D * H,
                       D * p->seq * B * p->gh, D * B * H, D * B * H, D * B * p->gh, D * B * H};
    float **dst[] = {&p->wp, &p->rp, &p->rph, &p->bias, &p->rbh,
                     &p->xw, &p->hs, &p->cs, &p->gates, &p->tmp};
    int64_t off = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (base)
            *dst[i] = base + off;
        off += (sizes[i] + 15) / 16 * 16;
    }
    return off;
}

static size_t rnn_workspace_f32(const cge_kernel_ctx *ctx)
{
    rnn_args p;
    if (!rnn_sizes(ctx, &p))
        return 0;
    return (size_t)rnn_carve(&p, NULL) * sizeof(float) + 64;
}

static bool is_half(cge_dtype d) { return d == CGE_F16 || d == CGE_BF16; }

/* A half operand's float32 copy in the workspace: its bytes, rounded up to
 * whole cache lines. */
static size_t staged_bytes(const cge_tensor *t)
{
    return is_half(t->dtype) ? ((size_t)cge_shape_numel(&t->shape) * 4 + 63) / 64 * 64 : 0;
}

static size_t rnn_workspace(const cge_kernel_ctx *ctx)
{
    size_t b = rnn_workspace_f32(ctx);
    if (!b || !is_half(ctx->inputs[0].dtype))
        return b;
    b = (b + 63) / 64 * 64;
    for (int32_t i = 0; i < ctx->num_inputs; i++)
        b += staged_bytes(&ctx->inputs[i]);
    for (int32_t o = 0; o < ctx->num_outputs; o++)
        b += staged_bytes(&ctx->outputs[o]);
    return b + 64;
}

/* W and R constant (the usual case: a model's weights): packed once at
 * prepare into a block shared by every plan of the session's graph, instead
 * of on every run. The source addresses are kept: a launch with other W or R
 * packs as usual. */
typedef struct rnn_state {
    const void *w_src, *r_src;
    float *packed;    /* cge_kernel_shared_get block: W panels, R panels, Rh panels */
} rnn_state;

static void rnn_release(void *state)
{
    rnn_state *s = state;
    if (s)
        cge_kernel_shared_release(s->packed);
    free(s);
}

static cge_status rnn_fill(void *dst, void *user)
{
    const rnn_args *p = user;
    float *wp = dst, *rp = wp + p->dirs * p->wp_n, *rph = rp + p->dirs * p->rp_n;
    for (int64_t d = 0; d < p->dirs; d++)
        pack_dir(p, d, wp, rp, rph);
    return CGE_OK;
}

static cge_status rnn_prepare(const cge_kernel_ctx *ctx, void **state)
{
    *state = NULL;
    rnn_args p;
    if (!rnn_sizes(ctx, &p) || ctx->inputs[1].dtype != CGE_F32 || ctx->inputs[2].dtype != CGE_F32 ||
        !cge__kernel_data_is_stable(ctx, ctx->inputs[1].data) ||
        !cge__kernel_data_is_stable(ctx, ctx->inputs[2].data) || p.gh == 0 || p.in == 0)
        return CGE_OK;
    rnn_state *s = calloc(1, sizeof *s);
    if (!s)
        return cge_kernel_error(ctx, CGE_ERR_NO_MEMORY, "packing W and R: out of memory");
    p.w = ctx->inputs[1].data;
    p.r = ctx->inputs[2].data;
    size_t bytes = (size_t)(p.dirs * (p.wp_n + p.rp_n + p.rph_n)) * sizeof(float);
    int64_t key[6] = {p.kind, p.dirs, p.gh, p.in, p.hid, (int64_t)(uintptr_t)p.r};
    cge_status st = cge_kernel_shared_get(ctx, p.w, key, sizeof key, bytes, rnn_fill, &p,
                                          (void **)&s->packed);
    if (st) {
        rnn_release(s);
        return st;
    }
    s->w_src = p.w;
    s->r_src = p.r;
    *state = s;
    return CGE_OK;
}

static const float *opt_input(const cge_kernel_ctx *ctx, int32_t i)
{
    return ctx->num_inputs > i && ctx->inputs[i].dtype != CGE_DTYPE_UNDEFINED
               ? ctx->inputs[i].data
               : NULL;
}

static cge_status rnn_launch_half(const cge_kernel_ctx *ctx, cge_stream *stream);

static cge_status rnn_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (is_half(ctx->inputs[0].dtype))
        return rnn_launch_half(ctx, stream);
    rnn_args p;
    if (!rnn_sizes(ctx, &p))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "X, W and R shapes do not fit %s",
                                ctx->op_type);
    for (int32_t i = 0; i < ctx->num_inputs; i++)
        if (ctx->inputs[i].dtype != CGE_DTYPE_UNDEFINED &&
            ctx->inputs[i].dtype != (i == 4 ? CGE_I32 : CGE_F32))
            return cge_kernel_error(ctx, CGE_ERR_DTYPE, "input %d is %s; float32 expected", i,
                                    cge_dtype_name(ctx->inputs[i].dtype));
    char err[160];
    if (parse_acts(ctx->attrs, p.kind, (int)p.dirs, p.acts, err, sizeof err))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "%s", err);
    size_t need = rnn_workspace(ctx);
    if (!ctx->workspace || ctx->workspace_size < need)
        return cge_kernel_error(ctx, CGE_ERR_NO_MEMORY,
                                "workspace of %zu bytes needed, %zu given", need,
                                ctx->workspace_size);
    int64_t H = p.hid;
    int64_t hshape_n = p.dirs * p.batch * H;
    for (int32_t i = 3; i < ctx->num_inputs; i++) {
        const cge_tensor *t = &ctx->inputs[i];
        if (t->dtype == CGE_DTYPE_UNDEFINED)
            continue;
        int64_t want = i == 3 ? p.dirs * 2 * p.gh
                     : i == 4 ? p.batch
                     : i == 7 ? p.dirs * 3 * H
                              : hshape_n;
        if (cge_shape_numel(&t->shape) != want || (!t->data && want))
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "input %d does not fit the layer", i);
    }
    int64_t out_n[3] = {p.seq * p.dirs * p.batch * H, hshape_n, hshape_n};
    for (int32_t o = 0; o < ctx->num_outputs && o < 3; o++)
        if (ctx->outputs[o].data && cge_shape_numel(&ctx->outputs[o].shape) != out_n[o])
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output %d does not fit the layer", o);
    p.lbr = p.kind == KIND_GRU && cge_attrs_get_int(ctx->attrs, "linear_before_reset", 0) != 0;
    p.input_forget =
        p.kind == KIND_LSTM && cge_attrs_get_int(ctx->attrs, "input_forget", 0) != 0;
    const cge_attr *clip = cge_attrs_find(ctx->attrs, "clip");
    p.has_clip = clip && clip->kind == CGE_ATTR_FLOAT;
    p.clip = p.has_clip ? clip->f : 0.0f;
    p.x = ctx->inputs[0].data;
    p.w = ctx->inputs[1].data;
    p.r = ctx->inputs[2].data;
    p.b = opt_input(ctx, 3);
    p.lens = (const int32_t *)opt_input(ctx, 4);
    p.h0 = opt_input(ctx, 5);
    p.c0 = p.kind == KIND_LSTM ? opt_input(ctx, 6) : NULL;
    p.p = p.kind == KIND_LSTM ? opt_input(ctx, 7) : NULL;
    p.y = ctx->num_outputs > 0 ? ctx->outputs[0].data : NULL;
    p.yh = ctx->num_outputs > 1 ? ctx->outputs[1].data : NULL;
    p.yc = p.kind == KIND_LSTM && ctx->num_outputs > 2 ? ctx->outputs[2].data : NULL;
    if (p.batch == 0 || H == 0)
        return CGE_OK;
    rnn_carve(&p, (float *)(((uintptr_t)ctx->workspace + 63) & ~(uintptr_t)63));
    const rnn_state *pre = ctx->state;
    if (pre && pre->packed && pre->w_src == p.w && pre->r_src == p.r) {
        p.prepacked = 1;
        p.wp = pre->packed;
        p.rp = p.wp + p.dirs * p.wp_n;
        p.rph = p.rp + p.dirs * p.rp_n;
    }
    p.isa = cge__gemm_isa_best();
    /* The AVX2 gate step where AVX2 is the widest set (or CGE_CPU_ISA=avx2
     * caps it there); AVX-512 machines keep the row functions' AVX-512 clones
     * until the fused step is measured against them there. */
    p.vec_gates = RNN_X86 && cge__cpu_has(CGE_CPU_AVX2 | CGE_CPU_FMA) &&
                  !cge__cpu_has(CGE_CPU_AVX512F) && acts_vectorised(&p);
    int threads = ctx->num_threads;
    int64_t M = p.seq * p.batch;
    cge__gemm_plan(p.dirs, M > 0 ? M : 1, p.gh, threads, &p.tiling);
    /* A block per direction when the batch is small; more rows split the batch. */
    int64_t per_dir = (threads + p.dirs - 1) / p.dirs;
    p.batch_blocks = p.batch < per_dir ? p.batch : per_dir;
    if (p.batch_blocks > 1 && p.batch / p.batch_blocks < 4)
        p.batch_blocks = (p.batch + 3) / 4;
    if (p.batch_blocks < 1)
        p.batch_blocks = 1;
    cge_status st = cge_launch(stream, prep_fn, p.dirs, &p, sizeof p);
    if (!st && M > 0)
        st = cge_launch(stream, xw_fn,
                        cge__blocks_for(p.dirs * p.tiling.tiles_m * p.tiling.tiles_n, 1, threads),
                        &p, sizeof p);
    if (!st)
        st = cge_launch(stream, recur_fn, p.dirs * p.batch_blocks, &p, sizeof p);
    return st;
}

/* ---- float16 / bfloat16 ------------------------------------------------------- */

typedef struct half_copy {
    const void *src;
    void *dst;
    int64_t n;
    cge_dtype dtype;   /* the half type */
    int narrow;        /* float32 -> half (else half -> float32) */
} half_copy;

static void half_copy_fn(int64_t blk, int64_t nblk, void *args)
{
    const half_copy *c = args;
    int64_t i0, i1;
    cge__block_range(c->n, blk, nblk, &i0, &i1);
    if (c->narrow)
        cge__f32_to_half_n(c->dtype, (const float *)c->src + i0, (uint16_t *)c->dst + i0, i1 - i0);
    else
        cge__half_to_f32_n(c->dtype, (const uint16_t *)c->src + i0, (float *)c->dst + i0, i1 - i0);
}

static cge_status half_copy_launch(const cge_kernel_ctx *ctx, cge_stream *stream, const void *src,
                                   void *dst, int64_t n, cge_dtype dtype, int narrow)
{
    if (n == 0)
        return CGE_OK;
    half_copy c = {src, dst, n, dtype, narrow};
    return cge_launch(stream, half_copy_fn, cge__blocks_for(n, 1 << 14, ctx->num_threads), &c,
                      sizeof c);
}

/* The float32 kernel on float32 copies of the half operands (in the
 * workspace, after the float32 kernel's own), its outputs rounded back.
 * Inputs must all be the one half type (meta checks it). */
static cge_status rnn_launch_half(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    enum { MAX_IN = 8, MAX_OUT = 3 };
    if (ctx->num_inputs > MAX_IN || ctx->num_outputs > MAX_OUT)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "too many inputs or outputs");
    size_t need = rnn_workspace(ctx), base = (rnn_workspace_f32(ctx) + 63) / 64 * 64;
    if (!ctx->workspace || ctx->workspace_size < need)
        return cge_kernel_error(ctx, CGE_ERR_NO_MEMORY,
                                "workspace of %zu bytes needed, %zu given", need,
                                ctx->workspace_size);
    cge_dtype dt = ctx->inputs[0].dtype;
    char *q = (char *)(((uintptr_t)ctx->workspace + 63) & ~(uintptr_t)63) + base;
    cge_tensor ins[MAX_IN], outs[MAX_OUT];
    cge_status st = CGE_OK;
    for (int32_t i = 0; !st && i < ctx->num_inputs; i++) {
        ins[i] = ctx->inputs[i];
        size_t b = staged_bytes(&ins[i]);
        if (!b || !ins[i].data)
            continue;
        if (ins[i].dtype != dt)
            return cge_kernel_error(ctx, CGE_ERR_DTYPE, "input %d is %s, X is %s", i,
                                    cge_dtype_name(ins[i].dtype), cge_dtype_name(dt));
        int64_t n = cge_shape_numel(&ins[i].shape);
        st = half_copy_launch(ctx, stream, ins[i].data, q, n, dt, 0);
        ins[i].dtype = CGE_F32;
        ins[i].data = q;
        ins[i].bytes = (size_t)n * 4;
        q += b;
    }
    for (int32_t o = 0; o < ctx->num_outputs; o++) {
        outs[o] = ctx->outputs[o];
        size_t b = staged_bytes(&outs[o]);
        if (!b)
            continue;
        outs[o].dtype = CGE_F32;
        if (outs[o].data) {   /* an output not asked for stays unwritten */
            outs[o].data = q;
            outs[o].bytes = (size_t)cge_shape_numel(&outs[o].shape) * 4;
        }
        q += b;
    }
    cge_kernel_ctx c = *ctx;
    c.inputs = ins;
    c.outputs = outs;
    c.workspace_size = base;
    c.state = NULL;   /* no packed W (it is packed from the float32 copy) */
    if (!st)
        st = rnn_launch(&c, stream);
    for (int32_t o = 0; !st && o < ctx->num_outputs; o++)
        if (staged_bytes(&ctx->outputs[o]) && ctx->outputs[o].data)
            st = half_copy_launch(ctx, stream, outs[o].data, ctx->outputs[o].data,
                                  cge_shape_numel(&outs[o].shape), dt, 1);
    return st;
}

/* ---- definitions ------------------------------------------------------------ */

#define T_DOC "float32, float16 or bfloat16 (half layers run on float32 copies)"

static const cge_arg_def rnn_inputs[] = {
    {"X", 0, RNN_DTYPES, "[seq, batch, input] (layout 0) or [batch, seq, input]"},
    {"W", 0, RNN_DTYPES, "[directions, gates*hidden, input]"},
    {"R", 0, RNN_DTYPES, "[directions, gates*hidden, hidden]"},
    {"B", CGE_ARG_OPTIONAL, RNN_DTYPES, "[directions, 2*gates*hidden]: Wb then Rb"},
    {"sequence_lens", CGE_ARG_OPTIONAL, CGE_DT(CGE_I32), "[batch]"},
    {"initial_h", CGE_ARG_OPTIONAL, RNN_DTYPES, "[directions, batch, hidden] (layout 0)"},
    {"initial_c", CGE_ARG_OPTIONAL, RNN_DTYPES, "LSTM: [directions, batch, hidden]"},
    {"P", CGE_ARG_OPTIONAL, RNN_DTYPES, "LSTM peepholes: [directions, 3*hidden] (i, o, f)"},
};
static const cge_arg_def rnn_outputs[] = {
    {"Y", CGE_ARG_OPTIONAL, RNN_DTYPES, "[seq, directions, batch, hidden] (layout 0)"},
    {"Y_h", CGE_ARG_OPTIONAL, RNN_DTYPES, "last hidden state"},
    {"Y_c", CGE_ARG_OPTIONAL, RNN_DTYPES, "LSTM: last cell state"},
};

#define COMMON_ATTRS                                                                        \
    {"activation_alpha", CGE_ATTR_FLOATS, false, 0, 0.0f, NULL, "alphas, in order"},        \
        {"activation_beta", CGE_ATTR_FLOATS, false, 0, 0.0f, NULL, "betas, in order"},      \
        {"activations", CGE_ATTR_STRINGS, false, 0, 0.0f, NULL, "functions per direction"}, \
        {"clip", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "clip of activation inputs"},        \
        {"direction", CGE_ATTR_STRING, false, 0, 0.0f, "forward",                           \
         "forward, reverse or bidirectional"},                                              \
        {"hidden_size", CGE_ATTR_INT, false, 0, 0.0f, NULL, "hidden units"},                \
        {"layout", CGE_ATTR_INT, false, 0, 0.0f, NULL, "0: sequence first, 1: batch first"}

static const cge_attr_def rnn_attrs[] = {COMMON_ATTRS};
static const cge_attr_def gru_attrs[] = {
    COMMON_ATTRS,
    {"linear_before_reset", CGE_ATTR_INT, false, 0, 0.0f, NULL,
     "apply Rh before multiplying by r"},
};
static const cge_attr_def lstm_attrs[] = {
    COMMON_ATTRS,
    {"input_forget", CGE_ATTR_INT, false, 0, 0.0f, NULL, "couple input and forget gates"},
};

static const cge_kernel_def rnn_kernels[] = {{
    .engine = "cpu",
    .dtypes = RNN_DTYPES,
    .launch = rnn_launch,
    .workspace_size = rnn_workspace,
    .prepare = rnn_prepare,
    .release = rnn_release,
    .inplace_input = -1,
}};

static const cge_op_def rnn_ops[] = {
    {
        .name = "RNN", .domain = CGE_DOMAIN_DEFAULT, .since_version = 14,
        .inputs = rnn_inputs, .num_inputs = 6, .outputs = rnn_outputs, .num_outputs = 2,
        .attrs = rnn_attrs, .num_attrs = (int32_t)(sizeof rnn_attrs / sizeof rnn_attrs[0]),
        .infer = rnn_infer, .kernels = rnn_kernels, .num_kernels = 1,
        .doc = "Simple recurrent layer Ht = f(Xt W^T + Ht-1 R^T + Wb + Rb); " T_DOC ".",
    },
    {
        .name = "GRU", .domain = CGE_DOMAIN_DEFAULT, .since_version = 14,
        .inputs = rnn_inputs, .num_inputs = 6, .outputs = rnn_outputs, .num_outputs = 2,
        .attrs = gru_attrs, .num_attrs = (int32_t)(sizeof gru_attrs / sizeof gru_attrs[0]),
        .infer = rnn_infer, .kernels = rnn_kernels, .num_kernels = 1,
        .doc = "Gated recurrent unit layer (gates z, r, h); " T_DOC ".",
    },
    {
        .name = "LSTM", .domain = CGE_DOMAIN_DEFAULT, .since_version = 14,
        .inputs = rnn_inputs, .num_inputs = 8, .outputs = rnn_outputs, .num_outputs = 3,
        .attrs = lstm_attrs, .num_attrs = (int32_t)(sizeof lstm_attrs / sizeof lstm_attrs[0]),
        .infer = rnn_infer, .kernels = rnn_kernels, .num_kernels = 1,
        .doc = "Long short-term memory layer (gates i, o, f, c; peepholes); " T_DOC ".",
    },
};

const cge_op_def *cge__ops_rnn(int32_t *count)
{
    *count = (int32_t)(sizeof rnn_ops / sizeof rnn_ops[0]);
    return rnn_ops;
}
