/* Conv and ConvTranspose (1-D to 3-D; groups, dilations, strides, pads,
 * auto_pad) and the kernel of cge.fused FusedConv: oneDNN, im2col + packed
 * GEMM, depthwise and generic paths. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cpu_isa.h"
#include "ops/builtin.h"
#include "ops/conv_fused.h"
#include "ops/conv_grouped.h"
#include "ops/conv_rows.h"
#include "ops/depthwise_nhwc.h"
#include "ops/dnnl_conv.h"
#include "ops/fast_math.h"
#include "ops/gemm_kernel.h"
#include "ops/kernel_cache.h"
#include "ops/kernel_util.h"
#include "ops/nn_spatial.h"

/* float32 Conv runs on oneDNN when the build has it (measured 1.5-5x faster
 * than the fallback on resnet/mobilenet layers), else im2col straight into the
 * GEMM's packed panels and the packed GEMM; depthwise convolutions (one input
 * channel per group) run a direct row kernel; float32 ConvTranspose runs on
 * oneDNN's deconvolution (the gather loop took 81 ms on a U-Net layer that
 * oneDNN does in under 1), other dtypes and builds without oneDNN a plain
 * gather loop. */

#define CONV_DTYPES (CGE_DT(CGE_F32) | CGE_DT(CGE_F64) | CGE_DT(CGE_F16) | CGE_DT(CGE_BF16))
#define NR CGE_GEMM_NR

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/* Builds target x86-64-v2; the hot loops that the compiler vectorises get
 * AVX2/AVX-512 clones picked at load time. */
#define NN_CLONES CGE_TARGET_CLONES
#else
#define NN_CLONES
#endif

typedef struct conv_args {
    cge_dtype dtype;
    const void *x, *w, *b;
    void *y;
    int64_t N, C, M, G, cpg, mpg;
    nn_geom g;
    int64_t K;      /* cpg * kernel volume: GEMM depth */
    int64_t P;      /* output pixels per image and channel */
    int64_t in_sp;  /* input pixels per image and channel */
    int64_t kvol;
    int transpose;
    /* float32 GEMM path, one image per launch pair */
    int64_t n;
    float *bp;
    int64_t panels;
    int is_1x1;
    cge__gemm_tiling tiling;
    cge__gemm_isa isa;
    /* FusedConv's epilogue: y = act(y + z), z optional */
    const float *z;
    int act, w_const;
    /* X, Z and Y are channels-last (FusedConv's channels_last, set by the
     * compiler's layout pass): only oneDNN's primitive reads them. */
    int channels_last;
    /* FusedConv's precision "bf16": oneDNN computes in bfloat16 (the
     * builtin kernels stay float32). */
    int bf16;
    float alpha, beta, lo, hi;
} conv_args;

/* ---- FusedConv's epilogue: the unfused Add's and activations' expressions,
 * so that the fallback gives the unfused bits --------------------------------- */

/* silu is x * Sigmoid(x), hardswish x * HardSigmoid(x) (alpha, beta): the
 * unfused pairs' expressions, element for element. */
enum {
    ACT_NONE, ACT_RELU, ACT_LEAKY, ACT_CLIP, ACT_SIGMOID, ACT_TANH, ACT_SILU, ACT_HSIGMOID,
    ACT_HSWISH, ACT_GELU, ACT_COUNT
};

static int act_from_name(const char *s)
{
    static const char *const names[ACT_COUNT] = {"none", "relu", "leaky_relu", "clip", "sigmoid",
                                                 "tanh", "silu", "hardsigmoid", "hardswish",
                                                 "gelu"};
    for (int i = 0; i < ACT_COUNT; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}

static inline double sigmoid_d(double x)
{
    if (x >= 0.0)
        return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

static void epilogue(const conv_args *p, float *y, const float *z, int64_t n)
{
    if (z)
        for (int64_t i = 0; i < n; i++)
            y[i] = y[i] + z[i];
    switch (p->act) {
    case ACT_RELU: for (int64_t i = 0; i < n; i++) y[i] = y[i] < 0.0f ? 0.0f : y[i]; break;
    case ACT_LEAKY:
        for (int64_t i = 0; i < n; i++)
            y[i] = y[i] < 0.0f ? p->alpha * y[i] : y[i];
        break;
    case ACT_CLIP:
        for (int64_t i = 0; i < n; i++) {
            float v = y[i] < p->lo ? p->lo : y[i];
            y[i] = v > p->hi ? p->hi : v;
        }
        break;
    case ACT_SIGMOID: cge__sigmoid_f32_row(y, y, n); break;
    case ACT_TANH: for (int64_t i = 0; i < n; i++) y[i] = (float)tanh((double)y[i]); break;
    case ACT_SILU: cge__silu_f32_row(y, y, n); break;
    case ACT_GELU: cge__gelu_f32_row(y, y, n); break;
    case ACT_HSIGMOID:
    case ACT_HSWISH:
        for (int64_t i = 0; i < n; i++) {
            float v = p->alpha * y[i] + p->beta;
            v = v < 0.0f ? 0.0f : v;
            v = v > 1.0f ? 1.0f : v;
            y[i] = p->act == ACT_HSWISH ? y[i] * v : v;
        }
        break;
    default: break;
    }
}

/* Blocks over the whole output. */
static void epilogue_fn(int64_t blk, int64_t nblk, void *args)
{
    const conv_args *p = args;
    int64_t lo, hi;
    cge__block_range(p->N * p->M * p->P, blk, nblk, &lo, &hi);
    if (hi > lo)
        epilogue(p, (float *)p->y + lo, p->z ? p->z + lo : NULL, hi - lo);
}

/* ---- meta ------------------------------------------------------------------ */

/* Everything about a Conv/ConvTranspose node from descriptors and attributes;
 * writes the output shape. Returns false with a reason in err. */
static bool conv_shapes(const cge_attrs *a, const cge_shape *xs, const cge_shape *ws,
                        const cge_shape *bs, bool transpose, conv_args *p, cge_shape *out,
                        char *err, size_t errsz)
{
    char sx[CGE_SHAPE_STR_MAX], sw[CGE_SHAPE_STR_MAX];
    cge_shape_str(xs, sx, sizeof sx);
    cge_shape_str(ws, sw, sizeof sw);
    memset(p, 0, sizeof *p);
    int32_t r = xs->rank;
    if (r < 3 || r > 5 || ws->rank != r) {
        snprintf(err, errsz, "X %s and W %s must both have rank 3 to 5 (1 to 3 spatial dims)",
                 sx, sw);
        return false;
    }
    int64_t G = cge_attrs_get_int(a, "group", 1);
    if (G < 1) {
        snprintf(err, errsz, "group must be >= 1, got %lld", (long long)G);
        return false;
    }
    p->transpose = transpose;
    p->G = G;
    p->N = xs->dims[0];
    p->C = xs->dims[1];
    int64_t wc = transpose ? ws->dims[0] : ws->dims[1] * G;
    p->M = transpose ? ws->dims[1] * G : ws->dims[0];
    if (p->C >= 0 && ws->dims[0] >= 0 && ws->dims[1] >= 0 && wc != p->C) {
        snprintf(err, errsz, "X %s has %lld channels but W %s with group %lld expects %lld", sx,
                 (long long)p->C, sw, (long long)G, (long long)wc);
        return false;
    }
    if (!transpose && p->M >= 0 && p->M % G != 0) {
        snprintf(err, errsz, "W %s: %lld output channels do not split into %lld groups", sw,
                 (long long)p->M, (long long)G);
        return false;
    }
    if (transpose && p->C >= 0 && p->C % G != 0) {
        snprintf(err, errsz, "X %s: %lld channels do not split into %lld groups", sx,
                 (long long)p->C, (long long)G);
        return false;
    }
    if (bs && (bs->rank != 1 || (bs->dims[0] >= 0 && p->M >= 0 && bs->dims[0] != p->M))) {
        char sb[CGE_SHAPE_STR_MAX];
        snprintf(err, errsz, "B %s must be [%lld] (one per output channel)",
                 cge_shape_str(bs, sb, sizeof sb), (long long)p->M);
        return false;
    }
    int32_t nsp = r - 2;
    const int64_t *kern = ws->dims + 2;
    for (int i = 0; i < nsp; i++)
        if (kern[i] < 0) {
            snprintf(err, errsz, "W %s must have static spatial dims", sw);
            return false;
        }
    out->rank = r;
    out->dims[0] = p->N;
    out->dims[1] = p->M;
    if (!transpose) {
        if (!nn_geom_make(a, nsp, xs->dims + 2, kern, false, &p->g, err, errsz))
            return false;
        for (int i = 0; i < nsp; i++)
            out->dims[2 + i] = p->g.out[NN_MAX_SP - nsp + i];
    } else {
        /* Transposed: geometry of the forward conv from Y back to X, so the
         * pads and strides read the same; the output sizes come from the
         * input sizes instead. */
        nn_geom *g = &p->g;
        int64_t k[NN_MAX_SP], s[NN_MAX_SP], d[NN_MAX_SP], pd[2 * NN_MAX_SP], op[NN_MAX_SP],
            os[NN_MAX_SP + 2];
        for (int i = 0; i < nsp; i++) {
            k[i] = kern[i];
            s[i] = d[i] = 1;
            pd[i] = pd[nsp + i] = op[i] = 0;
        }
        const int64_t *osv = NULL;
        int64_t nos = cge_attrs_get_ints(a, "output_shape", &osv);
        if (nn_ints_attr(a, "kernel_shape", nsp, k) < 0 || nn_ints_attr(a, "strides", nsp, s) < 0 ||
            nn_ints_attr(a, "dilations", nsp, d) < 0 || nn_ints_attr(a, "pads", 2 * nsp, pd) < 0 ||
            nn_ints_attr(a, "output_padding", nsp, op) < 0 ||
            (cge_attrs_find(a, "output_shape") && nos != nsp && nos != nsp + 2)) {
            snprintf(err, errsz, "kernel_shape, strides, dilations, output_padding and "
                                 "output_shape need %d entries and pads %d",
                     (int)nsp, (int)(2 * nsp));
            return false;
        }
        for (int i = 0; i < nos; i++)
            os[i] = osv[i];
        const char *ap = cge_attrs_get_string(a, "auto_pad", "NOTSET");
        int mode = !strcmp(ap, "NOTSET") ? 0 : !strcmp(ap, "VALID") ? 1
                 : !strcmp(ap, "SAME_UPPER") ? 2 : !strcmp(ap, "SAME_LOWER") ? 3 : -1;
        if (mode < 0) {
            snprintf(err, errsz, "auto_pad '%s' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER",
                     ap);
            return false;
        }
        g->nsp = nsp;
        int off = NN_MAX_SP - nsp;
        for (int i = 0; i < NN_MAX_SP; i++) {
            g->in[i] = g->out[i] = g->k[i] = g->s[i] = g->d[i] = 1;
            g->pb[i] = g->pe[i] = 0;
        }
        for (int i = 0; i < nsp; i++) {
            int j = off + i;
            if (k[i] != kern[i] || s[i] < 1 || d[i] < 1 || pd[i] < 0 || pd[nsp + i] < 0 ||
                op[i] < 0) {
                snprintf(err, errsz, "bad kernel_shape, strides, dilations, pads or "
                                     "output_padding");
                return false;
            }
            g->k[j] = k[i];
            g->s[j] = s[i];
            g->d[j] = d[i];
            g->in[j] = xs->dims[2 + i];
            int64_t ext = (k[i] - 1) * d[i] + 1, in = xs->dims[2 + i], o;
            if (in < 0) {
                /* Symbolic: output_shape fixes the size; else s*(in-1) + op +
                 * ext - pads, a symbol of the input's only at stride 1. */
                if (nos > 0)
                    o = os[nos - nsp + i] >= 0 ? os[nos - nsp + i] : CGE_DIM_DYNAMIC;
                else if (s[i] != 1)
                    o = CGE_DIM_DYNAMIC;
                else if (mode >= 2)
                    o = in;
                else
                    o = cge_dim_derive(in, op[i] + ext - 1 - (mode == 0 ? pd[i] + pd[nsp + i] : 0),
                                       1);
                g->out[j] = out->dims[2 + i] = o;
                continue;
            }
            int64_t full = s[i] * (in - 1) + op[i] + ext;
            if (nos > 0 || mode >= 2) {
                o = nos > 0 ? os[nos - nsp + i] : in * s[i];
                /* ONNX: SAME_UPPER puts the larger half at the end, the
                 * others at the start. A negative total (output_shape larger
                 * than the input makes) adds positions at the end that get
                 * only the bias, as the ONNX test data has it. */
                int64_t tot = full - o;
                g->pb[j] = tot < 0 ? 0 : mode == 2 ? tot / 2 : tot - tot / 2;
                g->pe[j] = tot - g->pb[j];
            } else {
                if (mode == 0) {
                    g->pb[j] = pd[i];
                    g->pe[j] = pd[nsp + i];
                }
                o = full - g->pb[j] - g->pe[j];
            }
            if (o < 0) {
                snprintf(err, errsz, "pads leave a negative output size");
                return false;
            }
            g->out[j] = out->dims[2 + i] = o;
        }
    }
    p->cpg = p->C >= 0 ? p->C / G : -1;
    p->mpg = p->M >= 0 ? p->M / G : -1;
    p->kvol = p->g.k[0] * p->g.k[1] * p->g.k[2];
    p->K = p->cpg * p->kvol;
    /* Symbolic sizes are negative codes: no products of them. */
    bool known = p->g.out[0] >= 0 && p->g.out[1] >= 0 && p->g.out[2] >= 0 && p->g.in[0] >= 0 &&
                 p->g.in[1] >= 0 && p->g.in[2] >= 0;
    p->P = known ? p->g.out[0] * p->g.out[1] * p->g.out[2] : -1;
    p->in_sp = known ? p->g.in[0] * p->g.in[1] * p->g.in[2] : -1;
    return true;
}

static cge_status conv_infer_common(cge_infer_ctx *ctx, bool transpose)
{
    if (ctx->num_inputs < 2 || ctx->num_outputs < 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "needs inputs X, W and output Y");
    const cge_tensor_desc *X = &ctx->inputs[0], *W = &ctx->inputs[1];
    const cge_tensor_desc *B = ctx->num_inputs > 2 && ctx->inputs[2].dtype != CGE_DTYPE_UNDEFINED
                                   ? &ctx->inputs[2]
                                   : NULL;
    if (W->dtype != X->dtype || (B && B->dtype != X->dtype))
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "X is %s, W is %s%s%s: they must agree",
                              cge_dtype_name(X->dtype), cge_dtype_name(W->dtype),
                              B ? ", B is " : "", B ? cge_dtype_name(B->dtype) : "");
    conv_args p;
    char err[1024];
    cge_shape out;
    if (!conv_shapes(ctx->attrs, &X->shape, &W->shape, B ? &B->shape : NULL, transpose, &p, &out,
                     err, sizeof err))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "%s", err);
    ctx->outputs[0].dtype = X->dtype;
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

static cge_status conv_infer(cge_infer_ctx *ctx)
{
    return conv_infer_common(ctx, false);
}

static cge_status convt_infer(cge_infer_ctx *ctx)
{
    return conv_infer_common(ctx, true);
}

/* ---- generic gather loop (every dtype; both directions) ------------------- */

static inline double ld(cge_dtype t, const void *p, int64_t i)
{
    switch (t) {
    case CGE_F32: return ((const float *)p)[i];
    case CGE_F64: return ((const double *)p)[i];
    case CGE_F16: return cge_f16_to_f32(((const uint16_t *)p)[i]);
    default: return cge_bf16_to_f32(((const uint16_t *)p)[i]);
    }
}

/* Blocks over output rows (n, m, od, oh). */
static void conv_generic_fn(int64_t blk, int64_t nblk, void *args)
{
    const conv_args *p = args;
    const nn_geom *g = &p->g;
    int64_t rows = p->N * p->M * g->out[0] * g->out[1], r0, r1;
    cge__block_range(rows, blk, nblk, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t oh = r % g->out[1], od = (r / g->out[1]) % g->out[0];
        int64_t m = (r / (g->out[0] * g->out[1])) % p->M, n = r / (g->out[0] * g->out[1] * p->M);
        int64_t gi = m / p->mpg, ml = m % p->mpg;
        for (int64_t ow = 0; ow < g->out[2]; ow++) {
            double acc = p->b ? ld(p->dtype, p->b, m) : 0.0;
            int64_t o[3] = {od, oh, ow};
            for (int64_t cl = 0; cl < p->cpg; cl++) {
                int64_t c = gi * p->cpg + cl;
                const int64_t xbase = (n * p->C + c) * p->in_sp;
                /* weight [m][cl][k] forward, [c][ml][k] transposed */
                int64_t wbase = p->transpose ? (c * p->mpg + ml) * p->kvol
                                             : (m * p->cpg + cl) * p->kvol;
                for (int64_t k0 = 0; k0 < g->k[0]; k0++)
                    for (int64_t k1 = 0; k1 < g->k[1]; k1++)
                        for (int64_t k2 = 0; k2 < g->k[2]; k2++) {
                            int64_t kk[3] = {k0, k1, k2}, idx = 0;
                            int ok = 1;
                            for (int j = 0; j < 3 && ok; j++) {
                                int64_t i;
                                if (!p->transpose) {
                                    i = o[j] * g->s[j] - g->pb[j] + kk[j] * g->d[j];
                                } else {
                                    int64_t t = o[j] + g->pb[j] - kk[j] * g->d[j];
                                    if (t < 0 || t % g->s[j]) {
                                        ok = 0;
                                        break;
                                    }
                                    i = t / g->s[j];
                                }
                                if (i < 0 || i >= g->in[j])
                                    ok = 0;
                                idx = idx * g->in[j] + i;
                            }
                            if (ok)
                                acc += ld(p->dtype, p->x, xbase + idx) *
                                       ld(p->dtype, p->w, wbase + (k0 * g->k[1] + k1) * g->k[2] + k2);
                        }
            }
            cge__store_from_double(p->dtype, p->y, r * g->out[2] + ow, acc);
        }
    }
}

/* ---- float32: depthwise (one input channel per group) --------------------- */

/* Output positions o with o*s - pb + t*d inside [0, in): [*a, *b). */
static inline void valid_out(int64_t in, int64_t out, int64_t s, int64_t pb, int64_t off,
                             int64_t *a, int64_t *b)
{
    int64_t lo = pb - off; /* o*s >= lo */
    int64_t x = lo <= 0 ? 0 : (lo + s - 1) / s;
    int64_t hi = in - 1 + pb - off; /* o*s <= hi */
    int64_t y = hi < 0 ? 0 : hi / s + 1;
    if (y > out)
        y = out;
    if (x > y)
        x = y;
    *a = x;
    *b = y;
}

static inline void dw_row(float *restrict y, const float *restrict x, float w, int64_t a,
                          int64_t b, int64_t s, int64_t off)
{
    if (s == 1) {
        const float *xs = x + off;
        for (int64_t o = a; o < b; o++)
            y[o] += w * xs[o];
    } else if (s == 2) {
        const float *xs = x + off;
        for (int64_t o = a; o < b; o++)
            y[o] += w * xs[2 * o];
    } else {
        for (int64_t o = a; o < b; o++)
            y[o] += w * x[o * s + off];
    }
}

#define DW_MAX_KW 32

/* One output plane. Cloned per instruction set as a whole so that the row
 * loops inline (small planes are dominated by per-row overhead otherwise). */
NN_CLONES
static void dw_plane(const nn_geom *g, const float *xp, const float *wp, float *yp, float bv)
{
    int64_t ca[DW_MAX_KW], cb[DW_MAX_KW];
    for (int64_t k2 = 0; k2 < g->k[2]; k2++)
        valid_out(g->in[2], g->out[2], g->s[2], g->pb[2], k2 * g->d[2], &ca[k2], &cb[k2]);
    for (int64_t od = 0; od < g->out[0]; od++) {
        int64_t a0, b0;
        nn_tap_range(g, 0, od, &a0, &b0);
        for (int64_t oh = 0; oh < g->out[1]; oh++) {
            float *yr = yp + (od * g->out[1] + oh) * g->out[2];
            for (int64_t ow = 0; ow < g->out[2]; ow++)
                yr[ow] = bv;
            int64_t a1, b1;
            nn_tap_range(g, 1, oh, &a1, &b1);
            for (int64_t k0 = a0; k0 < b0; k0++) {
                int64_t iz = od * g->s[0] - g->pb[0] + k0 * g->d[0];
                for (int64_t k1 = a1; k1 < b1; k1++) {
                    int64_t iy = oh * g->s[1] - g->pb[1] + k1 * g->d[1];
                    const float *xr = xp + (iz * g->in[1] + iy) * g->in[2];
                    const float *wr = wp + (k0 * g->k[1] + k1) * g->k[2];
                    for (int64_t k2 = 0; k2 < g->k[2]; k2++)
                        dw_row(yr, xr, wr[k2], ca[k2], cb[k2], g->s[2], k2 * g->d[2] - g->pb[2]);
                }
            }
        }
    }
}

/* 2-D 3x3 planes (mobilenet's depthwise layers): every output of a row's
 * interior takes its nine taps in one pass; rows outside the input get zero
 * weights on a valid row so that the interior loop has no branches. */
#define DW3_ROW(S)                                                                         \
    for (int64_t o = o0; o < o1; o++) {                                                    \
        int64_t i = o * (S) + off;                                                         \
        yr[o] = bv + w00 * r0[i] + w01 * r0[i + d] + w02 * r0[i + 2 * d] + w10 * r1[i] +   \
                w11 * r1[i + d] + w12 * r1[i + 2 * d] + w20 * r2[i] + w21 * r2[i + d] +    \
                w22 * r2[i + 2 * d];                                                       \
    }

NN_CLONES
static void dw_plane_3x3(const nn_geom *g, const float *xp, const float *wp, float *yp, float bv)
{
    int64_t o0, o1, W = g->in[2], s = g->s[2], d = g->d[2], off = -g->pb[2];
    nn_inner_range(g, 2, &o0, &o1);
    for (int64_t oh = 0; oh < g->out[1]; oh++) {
        float *yr = yp + oh * g->out[2];
        const float *r[3];
        float w[3][3];
        for (int ky = 0; ky < 3; ky++) {
            int64_t iy = oh * g->s[1] - g->pb[1] + ky * g->d[1];
            bool in = iy >= 0 && iy < g->in[1];
            r[ky] = xp + (in ? iy : 0) * W;
            for (int kx = 0; kx < 3; kx++)
                w[ky][kx] = in ? wp[ky * 3 + kx] : 0.0f;
        }
        const float *r0 = r[0], *r1 = r[1], *r2 = r[2];
        float w00 = w[0][0], w01 = w[0][1], w02 = w[0][2], w10 = w[1][0], w11 = w[1][1],
              w12 = w[1][2], w20 = w[2][0], w21 = w[2][1], w22 = w[2][2];
        if (s == 1)
            DW3_ROW(1)
        else if (s == 2)
            DW3_ROW(2)
        else
            DW3_ROW(s)
        for (int64_t o = 0; o < g->out[2]; o++) {
            if (o == o0 && o1 > o0)
                o = o1;
            if (o >= g->out[2])
                break;
            float acc = bv;
            for (int kx = 0; kx < 3; kx++) {
                int64_t ix = o * s + off + kx * d;
                if (ix >= 0 && ix < W)
                    acc += w[0][kx] * r0[ix] + w[1][kx] * r1[ix] + w[2][kx] * r2[ix];
            }
            yr[o] = acc;
        }
    }
}

/* Blocks over (n, m) output planes. */
static void conv_dw_fn(int64_t blk, int64_t nblk, void *args)
{
    const conv_args *p = args;
    const float *x = p->x, *w = p->w, *bias = p->b;
    float *y = p->y;
    int64_t c0, c1;
    cge__block_range(p->N * p->M, blk, nblk, &c0, &c1);
    for (int64_t nm = c0; nm < c1; nm++) {
        int64_t n = nm / p->M, m = nm % p->M, c = m / p->mpg;
        const nn_geom *g = &p->g;
        if (g->k[0] == 1 && g->in[0] == 1 && g->k[1] == 3 && g->k[2] == 3)
            dw_plane_3x3(g, x + (n * p->C + c) * p->in_sp, w + m * p->kvol, y + nm * p->P,
                         bias ? bias[m] : 0.0f);
        else
            dw_plane(g, x + (n * p->C + c) * p->in_sp, w + m * p->kvol, y + nm * p->P,
                     bias ? bias[m] : 0.0f);
        if (p->z || p->act)
            epilogue(p, y + nm * p->P, p->z ? p->z + nm * p->P : NULL, p->P);
    }
}

/* ---- float32: a 1x1 convolution of one position (a matrix-vector product) -- */

/* Squeeze-excitation's two fully connected layers (efficientnet, mnasnet,
 * mobilenet_v3, regnet) are 1x1 convolutions of a [N, C, 1, 1] pool: a few
 * thousand multiply-adds each, where a oneDNN primitive's call (and its
 * thread team at 2 threads) measured 1.3-2.5x ONNX Runtime's time. One
 * position has the same bytes in both layouts, so this runs for plain and
 * channels-last nodes alike. */
static bool uses_gemv(const conv_args *p)
{
    return p->dtype == CGE_F32 && !p->transpose && !p->bf16 && p->G == 1 && p->kvol == 1 &&
           p->in_sp == 1 && p->P == 1 && p->C > 0 && p->M > 0;
}

#define GEMV_LANES 16

/* Outputs [o0, o1) of (n, m): y = b[m] + W[m, :] . x[n, :], summed in
 * GEMV_LANES interleaved partial sums, then the epilogue. */
NN_CLONES
static void gemv_rows(const conv_args *p, int64_t o0, int64_t o1)
{
    const float *x = p->x, *w = p->w, *b = p->b;
    float *y = p->y;
    int64_t C = p->C, M = p->M, cv = C / GEMV_LANES * GEMV_LANES;
    for (int64_t o = o0; o < o1; o++) {
        int64_t n = o / M, m = o % M;
        const float *restrict xr = x + n * C, *restrict wr = w + m * C;
        float acc[GEMV_LANES] = {0};
        for (int64_t c = 0; c < cv; c += GEMV_LANES)
            for (int i = 0; i < GEMV_LANES; i++)
                acc[i] += wr[c + i] * xr[c + i];
        float t = 0.0f;
        for (int64_t c = cv; c < C; c++)
            t += wr[c] * xr[c];
        for (int i = 0; i < GEMV_LANES; i++)
            t += acc[i];
        y[o] = (b ? b[m] : 0.0f) + t;
    }
}

static void conv_gemv_fn(int64_t blk, int64_t nblk, void *args)
{
    const conv_args *p = args;
    int64_t o0, o1;
    cge__block_range(p->N * p->M, blk, nblk, &o0, &o1);
    if (o1 <= o0)
        return;
    gemv_rows(p, o0, o1);
    if (p->z || p->act)
        epilogue(p, (float *)p->y + o0, p->z ? p->z + o0 : NULL, o1 - o0);
}

/* ---- float32: im2col into packed panels + GEMM ------------------------------ */

/* Panel q (16 output pixels) of group gi's im2col matrix, written as the GEMM
 * packs B: dst[k][16], pixels past P zero. */
static void pack_panel(const conv_args *p, const float *xg, int64_t q, float *dst)
{
    const nn_geom *g = &p->g;
    int64_t p0 = q * NR, np = p->P - p0 < NR ? p->P - p0 : NR;
    if (np < NR)
        memset(dst, 0, sizeof(float) * (size_t)(p->K * NR));
    /* The panel's pixels split into runs along the last output dim. */
    int64_t seg_od[NR], seg_oh[NR], seg_ow[NR], seg_len[NR], seg_lane[NR];
    int nseg = 0;
    for (int64_t l = 0; l < np;) {
        int64_t pix = p0 + l, ow = pix % g->out[2], oh = (pix / g->out[2]) % g->out[1];
        int64_t od = pix / (g->out[2] * g->out[1]);
        int64_t len = g->out[2] - ow < np - l ? g->out[2] - ow : np - l;
        seg_od[nseg] = od;
        seg_oh[nseg] = oh;
        seg_ow[nseg] = ow;
        seg_len[nseg] = len;
        seg_lane[nseg] = l;
        nseg++;
        l += len;
    }
    int64_t k = 0;
    for (int64_t c = 0; c < p->cpg; c++) {
        const float *xc = xg + c * p->in_sp;
        for (int64_t k0 = 0; k0 < g->k[0]; k0++)
            for (int64_t k1 = 0; k1 < g->k[1]; k1++)
                for (int64_t k2 = 0; k2 < g->k[2]; k2++, k++) {
                    float *d = dst + k * NR;
                    for (int sg = 0; sg < nseg; sg++) {
                        float *ds = d + seg_lane[sg];
                        int64_t len = seg_len[sg];
                        int64_t iz = seg_od[sg] * g->s[0] - g->pb[0] + k0 * g->d[0];
                        int64_t iy = seg_oh[sg] * g->s[1] - g->pb[1] + k1 * g->d[1];
                        if (iz < 0 || iz >= g->in[0] || iy < 0 || iy >= g->in[1]) {
                            memset(ds, 0, sizeof(float) * (size_t)len);
                            continue;
                        }
                        const float *xr = xc + (iz * g->in[1] + iy) * g->in[2];
                        int64_t a, b, ow0 = seg_ow[sg];
                        valid_out(g->in[2], g->out[2], g->s[2], g->pb[2], k2 * g->d[2], &a, &b);
                        a = a < ow0 ? ow0 : a;
                        b = b > ow0 + len ? ow0 + len : b;
                        if (a > b)
                            a = b;
                        int64_t off = k2 * g->d[2] - g->pb[2];
                        int64_t i = 0;
                        for (; i < a - ow0; i++)
                            ds[i] = 0.0f;
                        if (g->s[2] == 1) {
                            memcpy(ds + i, xr + a + off, sizeof(float) * (size_t)(b - a));
                            i += b - a;
                        } else {
                            for (int64_t o = a; o < b; o++, i++)
                                ds[i] = xr[o * g->s[2] + off];
                        }
                        for (; i < len; i++)
                            ds[i] = 0.0f;
                    }
                }
    }
}

/* Blocks over (group, panel) of image p->n. */
static void conv_pack_fn(int64_t blk, int64_t nblk, void *args)
{
    const conv_args *p = args;
    int64_t w0, w1;
    cge__block_range(p->G * p->panels, blk, nblk, &w0, &w1);
    const float *xn = (const float *)p->x + p->n * p->C * p->in_sp;
    while (w0 < w1) {
        int64_t gi = w0 / p->panels, q0 = w0 % p->panels;
        int64_t q1 = q0 + (w1 - w0) < p->panels ? q0 + (w1 - w0) : p->panels;
        const float *xg = xn + gi * p->cpg * p->in_sp;
        float *bg = p->bp + gi * p->panels * p->K * NR;
        if (p->is_1x1)
            cge__gemm_pack_b(xg, p->in_sp, 1, p->K, p->P, q0, q1, bg);
        else
            for (int64_t q = q0; q < q1; q++)
                pack_panel(p, xg, q, bg + q * p->K * NR);
        w0 += q1 - q0;
    }
}

/* Rows [i0, i1) x columns [j0, j1) of group gi's output in image p->n after
 * the GEMM: + bias, then FusedConv's epilogue, while the tile is in cache. */
static void tile_epilogue(const conv_args *p, int64_t gi, int64_t i0, int64_t i1, int64_t j0,
                          int64_t j1)
{
    const float *b = p->b ? (const float *)p->b + gi * p->mpg : NULL;
    i1 = i1 < p->mpg ? i1 : p->mpg;
    j1 = j1 < p->P ? j1 : p->P;
    if (j1 <= j0)
        return;
    for (int64_t i = i0; i < i1; i++) {
        int64_t off = (p->n * p->M + gi * p->mpg + i) * p->P + j0;
        float *y = (float *)p->y + off;
        if (b) {
            float bv = b[i];
            for (int64_t j = 0; j < j1 - j0; j++)
                y[j] += bv;
        }
        if (p->z || p->act)
            epilogue(p, y, p->z ? p->z + off : NULL, j1 - j0);
    }
}

/* Blocks over (group, row tile, column tile) of image p->n. The bias is added
 * after the product rather than given to the GEMM: a per-row bias would keep
 * it off its unpacked-A kernel and cost a pass over C before the product. */
static void conv_gemm_fn(int64_t blk, int64_t nblk, void *args)
{
    const conv_args *p = args;
    const cge__gemm_tiling *tl = &p->tiling;
    int64_t per = tl->tiles_m * tl->tiles_n, w0, w1;
    cge__block_range(p->G * per, blk, nblk, &w0, &w1);
    for (int64_t w = w0; w < w1; w++) {
        int64_t gi = w / per, tm = (w % per) / tl->tiles_n, tn = w % tl->tiles_n;
        cge__gemm_f32 gm = {
            .M = p->mpg, .N = p->P, .K = p->K,
            .a = (const float *)p->w + gi * p->mpg * p->K, .a_rs = p->K, .a_cs = 1,
            .bp = p->bp + gi * p->panels * p->K * NR,
            .c = (float *)p->y + (p->n * p->M + gi * p->mpg) * p->P, .ldc = p->P,
            .alpha = 1.0f,
            .isa = p->isa,
        };
        int64_t i0 = tm * tl->mt, i1 = (tm + 1) * tl->mt, j0 = tn * tl->nt, j1 = (tn + 1) * tl->nt;
        cge__gemm_f32_tile(&gm, i0, i1, j0, j1);
        if (p->b || p->z || p->act)
            tile_epilogue(p, gi, i0, i1, j0, j1);
    }
}

/* ---- float32 on oneDNN ------------------------------------------------------ */

typedef struct dnnl_args {
    cge__dnnl_conv *dc;
    const float *x, *w, *b, *z;
    float *y;
    void *scratch;
} dnnl_args;

/* One block: oneDNN runs its own team (the threads it was made for) while
 * the pool's other workers wait. */
static void conv_dnnl_fn(int64_t blk, int64_t nblk, void *args)
{
    const dnnl_args *a = args;
    if (cge__dnnl_conv_run(a->dc, a->x, a->w, a->b, a->z, a->y, a->scratch) != CGE_OK) {
        cge_kernel_fail(CGE_ERR_INTERNAL, "Conv: oneDNN's primitive failed to run");
        return;
    }
}

/* ---- launch ---------------------------------------------------------------- */

static bool uses_depthwise(const conv_args *p)
{
    return p->dtype == CGE_F32 && !p->transpose && p->cpg == 1 && p->g.k[2] <= DW_MAX_KW;
}

static bool uses_gemm(const conv_args *p)
{
    return p->dtype == CGE_F32 && !p->transpose && !uses_depthwise(p) && p->K > 0 && p->P > 0 &&
           p->mpg > 0;
}

static size_t gemm_ws(const conv_args *p)
{
    if (!uses_gemm(p))
        return 0;
    return (size_t)(p->G * cge__gemm_packed_b_floats(p->K, p->P)) * sizeof(float) + 64;
}

static cge_status conv_ctx_args(const cge_kernel_ctx *ctx, bool transpose, conv_args *p)
{
    if (ctx->num_inputs < 2 || ctx->num_outputs < 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "needs inputs X, W and output Y");
    const cge_tensor *X = &ctx->inputs[0], *W = &ctx->inputs[1];
    const cge_tensor *B = ctx->num_inputs > 2 && ctx->inputs[2].dtype != CGE_DTYPE_UNDEFINED
                              ? &ctx->inputs[2]
                              : NULL;
    char err[1024];
    cge_shape out;
    if (!conv_shapes(ctx->attrs, &X->shape, &W->shape, B ? &B->shape : NULL, transpose, p, &out,
                     err, sizeof err))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "%s", err);
    if (!cge_shape_is_static(&X->shape) || !cge_shape_equal(&out, &ctx->outputs[0].shape))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output shape does not agree with X and W");
    if (!(CONV_DTYPES & CGE_DT(X->dtype)) || W->dtype != X->dtype ||
        (B && B->dtype != X->dtype) || ctx->outputs[0].dtype != X->dtype)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "unsupported dtypes (X %s, W %s)",
                                cge_dtype_name(X->dtype), cge_dtype_name(W->dtype));
    p->dtype = X->dtype;
    p->x = X->data;
    p->w = W->data;
    p->b = B ? B->data : NULL;
    p->y = ctx->outputs[0].data;
    return CGE_OK;
}

/* A float32 1x1 convolution without stride, padding or groups: per image
 * Y = W[M,C] * X[C,P], the GEMM on X as it lies (packing is a copy). */
/* A 1x1 window without stride or padding: im2col is X itself. */
static bool unit_window(const conv_args *p)
{
    const nn_geom *g = &p->g;
    return p->kvol == 1 && g->s[0] == 1 && g->s[1] == 1 && g->s[2] == 1 &&
           g->pb[0] + g->pb[1] + g->pb[2] + g->pe[0] + g->pe[1] + g->pe[2] == 0;
}

static bool uses_dnnl(const conv_args *p)
{
    /* Transposed: every shape (oneDNN's deconvolution is its backward-data
     * convolution, far ahead of the gather loop, depthwise included). */
    return p->dtype == CGE_F32 && (p->cpg != 1 || p->channels_last || p->transpose) &&
           p->K > 0 && p->P > 0 && p->N > 0 && p->mpg > 0 && p->in_sp > 0 &&
           cge__dnnl_available();
}

/* The activations oneDNN applies as post-ops where it takes them (its own
 * layouts): relu, its leaky form and clip compute the same as ours; sigmoid,
 * tanh, silu, GELU, HardSigmoid and HardSwish (with ONNX's 1/6, 1/2) round
 * differently, within a few ulp, as level 2's fusions may. Other
 * activations run as our epilogue afterwards. */
static int dnnl_eltwise(const conv_args *p)
{
    switch (p->act) {
    case ACT_RELU:
    case ACT_LEAKY: return CGE_DNNL_ELT_RELU;
    case ACT_CLIP: return CGE_DNNL_ELT_CLIP;
    case ACT_SIGMOID: return CGE_DNNL_ELT_LOGISTIC;
    case ACT_TANH: return CGE_DNNL_ELT_TANH;
    case ACT_SILU: return CGE_DNNL_ELT_SWISH;
    case ACT_GELU: return CGE_DNNL_ELT_GELU_ERF;
    case ACT_HSIGMOID: return CGE_DNNL_ELT_HARDSIGMOID;
    case ACT_HSWISH:
        return p->alpha == 1.0f / 6.0f && p->beta == 0.5f ? CGE_DNNL_ELT_HARDSWISH
                                                          : CGE_DNNL_ELT_NONE;
    default: return CGE_DNNL_ELT_NONE;
    }
}

/* oneDNN's own layouts (its direct JIT kernels, post-ops included) beat its
 * GEMM-based plain-layout kernel for spatial kernels larger than 1x1 even
 * with the reorders in and out; 1x1 measured slower. The weights are then
 * reordered once, which needs them constant. */
static bool dnnl_blocked(const conv_args *p)
{
    return p->w_const && p->G == 1 && p->kvol > 1;
}

/* oneDNN's F(2x2,3x3) kernel blocks the output channels by 16 and the
 * tiles by register blocks taken from divisors of their counts: on outputs
 * of fewer than 64 2x2 tiles (14x14, 15x15) with a count of channel blocks
 * above 8 that no number from 2 to 8 divides (the primes 11 and 13: 176
 * and 208 outputs, GoogLeNet's 14x14 branch conv) it measured 1.4-1.8x the
 * direct time (1 thread, C 96-256), while counts of at most 8 or with such
 * a divisor (5, 7, 9, 12, 14, 15, 16, 18, 20, 25) gained 0.6-0.85x there,
 * and 13 blocks gained from 17x17 up. */
static bool wino_blocks_ok(const conv_args *p)
{
    const nn_geom *g = &p->g;
    int64_t tiles = ((g->out[1] + 1) / 2) * ((g->out[2] + 1) / 2), b = p->M / 16;
    if (tiles >= 64 || b <= 8)
        return true;
    for (int64_t d = 2; d <= 8; d++)
        if (b % d == 0)
            return true;
    return false;
}

/* oneDNN's Winograd convolution, run per image (dnnl_conv.h), where it
 * measured faster than its direct one with the reorders to and from its
 * blocked layout counted (1 thread, batch 1 and 4, AVX-512): 3x3 windows at
 * stride 1 with 64 or more channels in and out, over outputs of 14x14 or
 * more: 0.45-0.85x the direct time at 28x28 and above, about 0.85-1.0x at
 * 14x14; at 7x7 (reading its weights, 16/9 the direct ones, once per image
 * outweighs the arithmetic saved) and with few channels it lost. It needs
 * constant weights (reordered once); $CGE_DNNL_WINOGRAD=0 turns it off.
 * Its weights take 4x the float ones in memory and their reorder is slow
 * (fcn_resnet50's 2048->512 head: 38 -> 151 MB, most of its session
 * creation), so a layer whose float weights pass 4 MiB keeps
 * the direct kernel: that cut the models whose peak memory or creation time
 * was above ONNX Runtime's (VGG's 512-channel layers, the wide ResNets'
 * 512x512 ones, the segmentation heads), at 14x14 and 28x28 maps where
 * Winograd gained least. $CGE_DNNL_WINOGRAD_MAX_MB moves the bound (memory
 * for speed). */
static int64_t wino_max_weight_bytes(void)
{
    /* read at prepare and workspace queries only, never per launch */
    const char *env = getenv("CGE_DNNL_WINOGRAD_MAX_MB");
    char *end = NULL;
    long mb = env ? strtol(env, &end, 10) : -1;
    return env && end != env && *end == '\0' && mb >= 0 ? (int64_t)mb << 20 : (int64_t)4 << 20;
}
static bool dnnl_winograd(const conv_args *p)
{
    /* read at prepare and workspace queries only, never per launch */
    const char *off = getenv("CGE_DNNL_WINOGRAD");
    const nn_geom *g = &p->g;
    /* oneDNN 2.6's Winograd is AVX-512 only: elsewhere (and under
     * CGE_CPU_ISA=avx2) the AVX2 rule, dnnl_blocked8, applies. */
    return !(off && !strcmp(off, "0")) && cge__cpu_has(CGE_CPU_AVX512F) && p->w_const &&
           !p->transpose && !p->bf16 &&
           p->dtype == CGE_F32 && p->G == 1 && g->nsp == 2 && g->k[1] == 3 && g->k[2] == 3 &&
           g->s[1] == 1 && g->s[2] == 1 && g->d[1] == 1 && g->d[2] == 1 && p->C >= 64 &&
           p->M >= 64 && p->C % 16 == 0 && p->M % 16 == 0 && g->out[1] * g->out[2] >= 14 * 14 &&
           p->C * p->M * 9 * (int64_t)sizeof(float) <= wino_max_weight_bytes() &&
           wino_blocks_ok(p);
}

/* 2-D and 3-D channels-last convolutions with a spatial window on a machine
 * with AVX2 and no AVX-512 run oneDNN's direct kernel on nChw8c copies of
 * their activations (dnnl_conv.h, blocked8): its jit:avx2 kernel over NHWC
 * took 1.1-2.8x the blocked one's time on the zoo's 3x3 layers, the
 * reorders in and out (a few percent) counted (docs/guide.md, "Convolutions
 * on AVX2 machines"); 1x1 windows measured alike in both layouts and stay
 * NHWC, and a 1-D model (audio_conv1d) was slower blocked (1.2x).
 * AVX-512 machines keep their NHWC brgemm kernels. $CGE_DNNL_CONV_BLOCKED8=0
 * turns it off. */
static bool dnnl_blocked8(const conv_args *p)
{
    /* read at prepare and workspace queries only, never per launch */
    const char *off = getenv("CGE_DNNL_CONV_BLOCKED8");
    return !(off && !strcmp(off, "0")) && p->channels_last && p->w_const && !p->transpose &&
           !p->bf16 && p->dtype == CGE_F32 && p->G == 1 && p->kvol > 1 && p->g.nsp >= 2 &&
           cge__cpu_has(CGE_CPU_AVX2 | CGE_CPU_FMA) && !cge__cpu_has(CGE_CPU_AVX512F);
}

static cge__dnnl_conv_desc dnnl_desc(const conv_args *p, bool has_bias, int threads)
{
    cge__dnnl_conv_desc d = {.threads = threads, .N = p->N, .C = p->C, .M = p->M, .G = p->G, .nsp = p->g.nsp,
                            .has_bias = has_bias, .sum = p->z != NULL,
                            .eltwise = dnnl_eltwise(p), .blocked = dnnl_blocked(p),
                            .channels_last = p->channels_last, .bf16 = p->bf16,
                            .transpose = p->transpose, .winograd = dnnl_winograd(p),
                            .blocked8 = dnnl_blocked8(p)};
    d.alpha = d.eltwise == CGE_DNNL_ELT_CLIP          ? p->lo
              : p->act == ACT_LEAKY || p->act == ACT_HSIGMOID ? p->alpha
                                                              : 0.0f;
    d.beta = d.eltwise == CGE_DNNL_ELT_CLIP ? p->hi : p->act == ACT_HSIGMOID ? p->beta : 0.0f;
    for (int i = 0; i < NN_MAX_SP; i++) {
        d.in[i] = p->g.in[i];
        d.out[i] = p->g.out[i];
        d.k[i] = p->g.k[i];
        d.s[i] = p->g.s[i];
        d.d[i] = p->g.d[i];
        d.pb[i] = p->g.pb[i];
        d.pe[i] = p->g.pe[i];
    }
    return d;
}

static cge_status dnnl_make(const conv_args *p, bool has_bias, int threads, cge__dnnl_conv **out)
{
    cge__dnnl_conv_desc d = dnnl_desc(p, has_bias, threads);
    return cge__dnnl_conv_create(&d, out);
}

static bool ctx_has_bias(const cge_kernel_ctx *ctx)
{
    return ctx->num_inputs > 2 && ctx->inputs[2].dtype != CGE_DTYPE_UNDEFINED;
}

static bool ctx_has_z(const cge_kernel_ctx *ctx)
{
    return ctx->num_inputs > 3 && ctx->inputs[3].dtype != CGE_DTYPE_UNDEFINED;
}

/* FusedConv's attributes into p; false for an unknown activation. */
static bool fused_attrs(const cge_kernel_ctx *ctx, conv_args *p)
{
    p->act = act_from_name(cge_attrs_get_string(ctx->attrs, "activation", "none"));
    p->alpha = cge_attrs_get_float(ctx->attrs, "alpha", 0.01f);
    p->beta = cge_attrs_get_float(ctx->attrs, "beta", 0.5f);
    p->lo = cge_attrs_get_float(ctx->attrs, "min", -INFINITY);
    p->hi = cge_attrs_get_float(ctx->attrs, "max", INFINITY);
    p->w_const = cge_attrs_get_int(ctx->attrs, "w_const", 0) != 0;
    p->channels_last = cge_attrs_get_int(ctx->attrs, "channels_last", 0) != 0;
    p->bf16 = !strcmp(cge_attrs_get_string(ctx->attrs, "precision", "fp32"), "bf16");
    return p->act >= 0;
}

/* Geometry from the descriptors alone (prepare and workspace queries). */
static bool conv_static_args(const cge_kernel_ctx *ctx, bool fused, bool transpose,
                             conv_args *p)
{
    char err[1024];
    cge_shape out;
    if (ctx->num_inputs < 2 || !cge_shape_is_static(&ctx->inputs[0].shape) ||
        !conv_shapes(ctx->attrs, &ctx->inputs[0].shape, &ctx->inputs[1].shape, NULL, transpose, p,
                     &out, err, sizeof err))
        return false;
    p->dtype = ctx->inputs[0].dtype;
    if (fused) {
        if (!fused_attrs(ctx, p))
            return false;
        /* only its presence matters to the primitive */
        p->z = ctx_has_z(ctx) ? (const float *)p : NULL;
    }
    return true;
}

/* What prepare keeps per node: oneDNN's primitive (NULL where oneDNN refuses
 * or is not used: the builtin kernels) and the node's geometry and
 * attributes parsed once for the plan's shapes, so that a launch with those
 * shapes copies them instead of parsing the attributes again (a few
 * microseconds per convolution, 1-4% of a small network's run). */
typedef struct conv_state {
    cge__dnnl_conv *dc;
    bool parsed;
    bool has_b, has_z;
    cge_shape xs, ws, bs, ys;
    conv_args args; /* buffers NULL */
    /* A grouped channels-last convolution on conv_grouped.c's kernel
     * (uses_grouped): its geometry and W packed at prepare (shared block),
     * packed from gw_src. */
    bool grouped;
    cge__gconv gc;
    float *gw;
    const void *gw_src;
    /* Channels-last depthwise on depthwise_nhwc.c's kernel (dw_nhwc_wanted):
     * dw_w its packed weights (a cge_kernel_shared_get block), or NULL where
     * W was not there at prepare (each launch packs it into the workspace). */
    bool dw_on;
    float *dw_w;
    int64_t dw_C, dw_kvol;
    /* A channels-last 1-D convolution as one GEMM over its windows
     * (conv_rows.c, uses_rows): W packed at prepare for the GEMM (a shared
     * block, packed from rw_src) for rw_C x rw_K -> rw_M. */
    bool rows;
    float *rw;
    const void *rw_src;
    int64_t rw_C, rw_M, rw_K;
} conv_state;

static void conv_release(void *state)
{
    if (!state)
        return;
    cge__dnnl_conv_destroy(((conv_state *)state)->dc);
    cge_kernel_shared_release(((conv_state *)state)->gw);
    cge_kernel_shared_release(((conv_state *)state)->dw_w);
    cge_kernel_shared_release(((conv_state *)state)->rw);
    free(state);
}

/* ---- float32 channels-last depthwise (depthwise_nhwc.c) ------------------- */

/* A channels-last depthwise FusedConv (one channel per group, M = C, 1-D or
 * 2-D) whose window the AVX-512 kernel takes, when $CGE_DW_NHWC=1 (read at
 * prepare and workspace queries only). Off by default: at the zoo's 60
 * depthwise shapes (bench/depthwise.py, docs/zoo.md) oneDNN's primitive was
 * as fast or faster nearly everywhere (geometric mean 1.29x its time at one
 * thread); 3x3 stride-2 layers over wide inputs measured 0.90-0.97x at one
 * thread but 0.90-1.53x at two, so no class is reliably ahead. */
static bool dw_nhwc_wanted(const conv_args *p)
{
    const nn_geom *g = &p->g;
    const char *env = getenv("CGE_DW_NHWC");
    return env && !strcmp(env, "1") && p->dtype == CGE_F32 && p->channels_last &&
           !p->transpose && !p->bf16 && p->cpg == 1 && p->mpg == 1 && p->G == p->C && p->C > 0 &&
           g->nsp <= 2 && g->k[0] == 1 && g->in[0] == 1 &&
           cge__dw_nhwc_takes(g->k[1], g->k[2], g->s[1], g->s[2], g->d[1], g->d[2], g->pb[1],
                              g->pb[2], g->pe[1], g->pe[2]) &&
           cge__dw_nhwc_available();
}

static size_t dw_nhwc_ws(const conv_args *p)
{
    return (size_t)cge__dw_nhwc_packed_floats(p->C, p->kvol) * sizeof(float) + 64;
}

typedef struct dw_pack_args {
    const float *w;
    float *dst;
    int64_t C, kvol;
} dw_pack_args;

static cge_status dw_pack_fill(void *dst, void *user)
{
    const dw_pack_args *a = user;
    cge__dw_nhwc_pack(a->w, a->C, a->kvol, dst);
    return CGE_OK;
}

static void dw_pack_fn(int64_t blk, int64_t nblk, void *args)
{
    const dw_pack_args *a = args;
    if (blk == 0)
        cge__dw_nhwc_pack(a->w, a->C, a->kvol, a->dst);
}

/* At prepare: W packed once, shared between the plans of the session graph;
 * launches then read the packed copy only. */
static cge_status dw_nhwc_prepare(const cge_kernel_ctx *ctx, const conv_args *p, conv_state *st)
{
    st->dw_on = true;
    const float *w = ctx->inputs[1].data;
    if (!p->w_const || !w)
        return CGE_OK;
    int64_t key[4] = {0x6477636863ll /* "dwnhwc" */, 1, p->C, p->kvol};
    dw_pack_args a = {.w = w, .C = p->C, .kvol = p->kvol};
    cge_status s = cge_kernel_shared_get(ctx, w, key, sizeof key,
                                         (size_t)cge__dw_nhwc_packed_floats(p->C, p->kvol) *
                                             sizeof(float),
                                         dw_pack_fill, &a, (void **)&st->dw_w);
    if (s)
        return s;
    st->dw_C = p->C;
    st->dw_kvol = p->kvol;
    cge__kernel_input_packed(ctx, 1);
    return CGE_OK;
}

static int dw_act(int act)
{
    switch (act) {
    case ACT_RELU: return CGE__DW_ACT_RELU;
    case ACT_LEAKY: return CGE__DW_ACT_LEAKY;
    case ACT_CLIP: return CGE__DW_ACT_CLIP;
    case ACT_SIGMOID: return CGE__DW_ACT_SIGMOID;
    case ACT_TANH: return CGE__DW_ACT_TANH;
    case ACT_SILU: return CGE__DW_ACT_SILU;
    case ACT_HSIGMOID: return CGE__DW_ACT_HSIGMOID;
    case ACT_HSWISH: return CGE__DW_ACT_HSWISH;
    case ACT_GELU: return CGE__DW_ACT_GELU;
    default: return CGE__DW_ACT_NONE;
    }
}

static cge_status dw_nhwc_launch(const cge_kernel_ctx *ctx, cge_stream *stream,
                                 const conv_args *p)
{
    const conv_state *st = ctx->state;
    const nn_geom *g = &p->g;
    if (p->cpg != 1 || p->mpg != 1 || g->nsp > 2 ||
        !cge__dw_nhwc_takes(g->k[1], g->k[2], g->s[1], g->s[2], g->d[1], g->d[2], g->pb[1],
                            g->pb[2], g->pe[1], g->pe[2]))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE,
                                "channels-last depthwise: the shapes are not the prepared kind");
    const float *w = st->dw_w;
    if (!w || st->dw_C != p->C || st->dw_kvol != p->kvol) {
        /* W was not there at prepare: pack it on the stream, in the workspace */
        if (!ctx->workspace || ctx->workspace_size < dw_nhwc_ws(p))
            return cge_kernel_error(ctx, CGE_ERR_INTERNAL,
                                    "channels-last depthwise: the workspace is missing or small");
        float *dst = (float *)(((uintptr_t)ctx->workspace + 63) & ~(uintptr_t)63);
        dw_pack_args pa = {.w = p->w, .dst = dst, .C = p->C, .kvol = p->kvol};
        cge_status s = cge_launch(stream, dw_pack_fn, 1, &pa, sizeof pa);
        if (s)
            return s;
        w = dst;
    }
    cge__dw_nhwc a = {.x = p->x, .w = w, .b = p->b, .z = p->z, .y = p->y, .N = p->N, .C = p->C,
                      .IH = g->in[1], .IW = g->in[2], .OH = g->out[1], .OW = g->out[2],
                      .cp = (p->C + 15) / 16 * 16, .kh = (int)g->k[1], .kw = (int)g->k[2],
                      .sh = (int)g->s[1], .sw = (int)g->s[2], .pt = (int)g->pb[1],
                      .pl = (int)g->pb[2], .act = dw_act(p->act), .alpha = p->alpha,
                      .beta = p->beta, .lo = p->lo, .hi = p->hi};
    return cge_launch(stream, cge__dw_nhwc_fn, cge__dw_nhwc_blocks(&a, ctx->num_threads), &a,
                      sizeof a);
}

static cge__dnnl_conv *state_dc(const void *state)
{
    return state ? ((const conv_state *)state)->dc : NULL;
}

/* The launch's geometry and attributes from the state when its shapes are
 * the prepared ones (everything conv_ctx_args and fused_attrs check was
 * checked at prepare with these shapes); false: parse them. */
static bool cached_args(const cge_kernel_ctx *ctx, conv_args *p)
{
    const conv_state *st = ctx->state;
    if (!st || !st->parsed || ctx->num_inputs < 2 || ctx->num_outputs < 1)
        return false;
    bool has_b = ctx_has_bias(ctx), has_z = ctx_has_z(ctx);
    if (has_b != st->has_b || has_z != st->has_z ||
        !cge_shape_equal(&ctx->inputs[0].shape, &st->xs) ||
        !cge_shape_equal(&ctx->inputs[1].shape, &st->ws) ||
        !cge_shape_equal(&ctx->outputs[0].shape, &st->ys) ||
        (has_b && !cge_shape_equal(&ctx->inputs[2].shape, &st->bs)) ||
        ctx->inputs[0].dtype != st->args.dtype || ctx->inputs[1].dtype != st->args.dtype ||
        ctx->outputs[0].dtype != st->args.dtype ||
        (has_b && ctx->inputs[2].dtype != st->args.dtype))
        return false;
    *p = st->args;
    p->x = ctx->inputs[0].data;
    p->w = ctx->inputs[1].data;
    p->b = has_b ? ctx->inputs[2].data : NULL;
    p->y = ctx->outputs[0].data;
    return true;
}

static cge_status conv_ctx_args(const cge_kernel_ctx *ctx, bool transpose, conv_args *p);

/* The parse a launch with the descriptors' shapes would make, into st. */
static void parse_once(const cge_kernel_ctx *ctx, bool fused, bool transpose, conv_state *st)
{
    conv_args p;
    if (!cge_shape_is_static(&ctx->inputs[0].shape) || ctx->num_outputs < 1 ||
        !cge_shape_is_static(&ctx->outputs[0].shape))
        return;
    /* conv_ctx_args reports errors; a failing parse here stays silent and
     * the launch parses (and reports) itself */
    char err[1024];
    cge_shape out;
    bool has_b = ctx_has_bias(ctx);
    const cge_tensor *X = &ctx->inputs[0], *W = &ctx->inputs[1];
    if (!conv_shapes(ctx->attrs, &X->shape, &W->shape, has_b ? &ctx->inputs[2].shape : NULL,
                     transpose, &p, &out, err, sizeof err) ||
        !cge_shape_equal(&out, &ctx->outputs[0].shape) || !(CONV_DTYPES & CGE_DT(X->dtype)) ||
        W->dtype != X->dtype || (has_b && ctx->inputs[2].dtype != X->dtype) ||
        ctx->outputs[0].dtype != X->dtype)
        return;
    p.dtype = X->dtype;
    if (fused) {
        if (p.dtype != CGE_F32 || !fused_attrs(ctx, &p))
            return;
        if (ctx_has_z(ctx) && (ctx->inputs[3].dtype != CGE_F32 ||
                               !cge_shape_equal(&ctx->inputs[3].shape, &ctx->outputs[0].shape)))
            return;
    }
    p.x = p.w = p.b = NULL;
    p.y = NULL;
    p.z = NULL;
    st->args = p;
    st->xs = X->shape;
    st->ws = W->shape;
    st->ys = ctx->outputs[0].shape;
    st->has_b = has_b;
    st->has_z = ctx_has_z(ctx);
    if (has_b)
        st->bs = ctx->inputs[2].shape;
    st->parsed = true;
}

/* ---- float32 grouped, channels-last (conv_grouped.c) ------------------------ */

/* Grouped convolutions (more than one input channel per group) of the
 * channels-last path run conv_grouped.c's direct kernel instead of oneDNN's
 * primitive in the shape class where it measured faster
 * (cge__gconv_preferred; docs/zoo.md, "Grouped convolutions"). W must be
 * constant (packed once at prepare). $CGE_GROUPED_CONV (read at prepare):
 * 0 keeps every one on oneDNN, "all" takes every one this kernel can run
 * (measurements). */
static bool grouped_geom(const conv_args *p, cge__gconv *gc)
{
    const nn_geom *g = &p->g;
    return cge__gconv_init(gc, p->N, p->C, p->M, p->G, g->in + 1, g->out + 1, g->k + 1, g->s + 1,
                           g->d + 1, g->pb + 1);
}

static bool uses_grouped(const conv_args *p, cge__gconv *gc)
{
    const char *env = getenv("CGE_GROUPED_CONV");
    if ((env && !strcmp(env, "0")) || p->dtype != CGE_F32 || p->transpose || p->bf16 ||
        !p->channels_last || !p->w_const || p->G <= 1 || p->cpg <= 1 || p->g.nsp > 2 ||
        p->N <= 0 || p->P <= 0 || !grouped_geom(p, gc))
        return false;
    return (env && !strcmp(env, "all")) || cge__gconv_preferred(gc);
}

typedef struct grouped_fill {
    const cge__gconv *gc;
    const float *w;
} grouped_fill;

static cge_status grouped_pack(void *dst, void *user)
{
    const grouped_fill *f = user;
    cge__gconv_pack(f->gc, f->w, dst);
    return CGE_OK;
}

/* W packed into st for the kernel; false (nothing kept) where the kernel
 * does not take this node. */
static cge_status prepare_grouped(const cge_kernel_ctx *ctx, const conv_args *p, conv_state *st,
                                  bool *taken)
{
    *taken = false;
    if (!ctx->inputs[1].data || !uses_grouped(p, &st->gc))
        return CGE_OK;
    grouped_fill f = {&st->gc, ctx->inputs[1].data};
    /* the layout depends on these, not on the batch or the image size */
    int64_t key[16] = {st->gc.C, st->gc.M, st->gc.G, st->gc.kh, st->gc.kw,
                       st->gc.vecs, st->gc.blocks, st->gc.narrow, 0x67636f6e76 /* "gconv" */};
    void *block = NULL;
    cge_status s = cge_kernel_shared_get(ctx, f.w, key, sizeof key,
                                         (size_t)cge__gconv_packed_floats(&st->gc) * sizeof(float),
                                         grouped_pack, &f, &block);
    if (s)
        return s;
    st->gw = block;
    st->gw_src = f.w;
    st->grouped = *taken = true;
    cge__kernel_input_packed(ctx, 1); /* launches read the packed copy only */
    return CGE_OK;
}

typedef struct grouped_args {
    conv_args p;
    cge__gconv gc;
    const float *wp; /* packed W; NULL: p.w unpacked, the reference loop */
} grouped_args;

/* Blocks of a launch: at least 128K multiply-adds each. */
static int64_t grouped_blocks(const cge__gconv *gc, int threads)
{
    int64_t per = gc->ow * (gc->M / gc->units) * gc->cpg * gc->kh * gc->kw;
    return cge__blocks_for(cge__gconv_items(gc), per >= 131072 ? 1 : 131072 / per, threads);
}


static void conv_grouped_fn(int64_t blk, int64_t nblk, void *args)
{
    const grouped_args *a = args;
    const conv_args *p = &a->p;
    const cge__gconv *gc = &a->gc;
    int64_t i0, i1;
    cge__block_range(cge__gconv_items(gc), blk, nblk, &i0, &i1);
    bool relu = p->act == ACT_RELU;
    if (a->wp)
        cge__gconv_run(gc, a->wp, p->x, p->b, p->z, p->y, relu, i0, i1);
    else
        cge__gconv_run_ref(gc, p->w, p->x, p->b, p->z, p->y, relu, i0, i1);
    if (p->act == ACT_NONE || relu)
        return;
    /* Other activations over what these items wrote (Z is in already). */
    conv_args e = *p;
    e.z = NULL;
    for (int64_t i = i0; i < i1; i++) {
        int64_t u, n, oh, c0, c1;
        cge__gconv_item(gc, i, &u, &n, &oh);
        cge__gconv_unit_channels(gc, u, &c0, &c1);
        float *y = (float *)p->y + ((n * gc->oh + oh) * gc->ow) * gc->M + c0;
        for (int64_t ow = 0; ow < gc->ow; ow++)
            epilogue(&e, y + ow * gc->M, NULL, c1 - c0);
    }
}

/* The node's prepared grouped kernel when p is the geometry it was prepared
 * for (a plan of other shapes parses its own; W read where it was packed). */
static bool launch_grouped(const cge_kernel_ctx *ctx, cge_stream *stream, const conv_args *p,
                           cge_status *out)
{
    const conv_state *st = ctx->state;
    grouped_args a;
    if (!st || !st->grouped || !grouped_geom(p, &a.gc) ||
        !cge__gconv_same(&a.gc, &st->gc))
        return false;
    a.p = *p;
    /* A W other than the packed one (never in a plan: W is constant) runs
     * the plain loop rather than packing on every run. */
    a.wp = p->w == st->gw_src ? st->gw : NULL;
    *out = cge_launch(stream, conv_grouped_fn, grouped_blocks(&a.gc, ctx->num_threads), &a,
                      sizeof a);
    return true;
}

/* ---- float32 channels-last 1-D: one GEMM over the windows (conv_rows.c) ---- */

/* A 1-D convolution of one group, dilation 1, constant W, channels-last:
 * the GEMM over X's overlapping windows instead of oneDNN's primitive, whose
 * JIT code took 3-28 ms per layer to make for a wav2vec-like front end and
 * ran no faster (docs/guide.md, "Conv1d as one product"). $CGE_CONV_ROWS=0
 * (read at prepare and workspace queries) keeps them on oneDNN. */
static bool rows_geom(const conv_args *p, cge__conv_rows *rg)
{
    const nn_geom *g = &p->g;
    return p->dtype == CGE_F32 && !p->transpose && !p->bf16 && p->channels_last && p->w_const &&
           p->G == 1 && g->nsp == 1 &&
           cge__conv_rows_init(rg, p->N, p->C, p->M, g->in[2], g->out[2], g->k[2], g->s[2],
                               g->d[2], g->pb[2], g->pe[2]);
}

static bool uses_rows(const conv_args *p, cge__conv_rows *rg)
{
    const char *env = getenv("CGE_CONV_ROWS");
    return !(env && !strcmp(env, "0")) && cge__conv_rows_preferred() && rows_geom(p, rg);
}

static size_t rows_ws(const cge__conv_rows *rg)
{
    int64_t f = cge__conv_rows_pad_floats(rg);
    return f ? (size_t)f * sizeof(float) + 64 : 0;
}

typedef struct rows_fill {
    const cge__conv_rows *rg;
    const float *w;
} rows_fill;

static cge_status rows_pack(void *dst, void *user)
{
    const rows_fill *f = user;
    return cge__conv_rows_pack(f->rg, f->w, dst) ? CGE_OK : CGE_ERR_NO_MEMORY;
}

/* W packed into st for the GEMM; false (nothing kept) where the path does
 * not take this node. The packing depends on C, M and K only: one block
 * serves every length of a symbolic plan. */
static cge_status prepare_rows(const cge_kernel_ctx *ctx, const conv_args *p, conv_state *st,
                               bool *taken)
{
    *taken = false;
    cge__conv_rows rg;
    if (!ctx->inputs[1].data || !uses_rows(p, &rg))
        return CGE_OK;
    rows_fill f = {&rg, ctx->inputs[1].data};
    int64_t key[16] = {rg.C, rg.M, rg.K, 0x63726f7773 /* "crows" */};
    void *block = NULL;
    cge_status s = cge_kernel_shared_get(ctx, f.w, key, sizeof key,
                                         (size_t)cge__conv_rows_packed_floats(&rg) * sizeof(float),
                                         rows_pack, &f, &block);
    if (s)
        return s == CGE_ERR_NO_MEMORY ? cge_kernel_error(ctx, s, "out of memory packing W") : s;
    st->rw = block;
    st->rw_src = f.w;
    st->rw_C = rg.C;
    st->rw_M = rg.M;
    st->rw_K = rg.K;
    st->rows = *taken = true;
    cge__kernel_input_packed(ctx, 1); /* launches read the packed copy only */
    return CGE_OK;
}

typedef struct rows_args {
    conv_args p;
    cge__conv_rows rg;
    const float *wp, *pads;
    float *pad_buf;
    cge__gemm_tiling tl;
    cge__gemm_isa isa;
} rows_args;

static void rows_pad_fn(int64_t blk, int64_t nblk, void *args)
{
    const rows_args *a = args;
    int64_t n0, n1;
    cge__block_range(a->rg.N, blk, nblk, &n0, &n1);
    for (int64_t n = n0; n < n1; n++)
        cge__conv_rows_fill_pads(&a->rg, a->p.x, n, a->pad_buf);
}

/* Blocks over (image, row tile, column tile); each tile's epilogue (Z,
 * the activation) right after its product, while it is in cache. */
static void rows_gemm_fn(int64_t blk, int64_t nblk, void *args)
{
    const rows_args *a = args;
    const conv_args *p = &a->p;
    const cge__conv_rows *rg = &a->rg;
    int64_t per = a->tl.tiles_m * a->tl.tiles_n, w0, w1;
    cge__block_range(rg->N * per, blk, nblk, &w0, &w1);
    for (int64_t w = w0; w < w1; w++) {
        int64_t n = w / per, tm = (w % per) / a->tl.tiles_n, tn = w % a->tl.tiles_n;
        int64_t i0 = tm * a->tl.mt, i1 = (tm + 1) * a->tl.mt, j0 = tn * a->tl.nt;
        int64_t j1 = (tn + 1) * a->tl.nt;
        i1 = i1 < rg->OW ? i1 : rg->OW;
        j1 = j1 < rg->M ? j1 : rg->M;
        cge__conv_rows_tile(rg, a->wp, p->x, a->pads, p->b, p->y, n, i0, i1, j0, j1, a->isa);
        if (!p->z && !p->act)
            continue;
        for (int64_t i = i0; i < i1; i++) {
            int64_t off = (n * rg->OW + i) * rg->M + j0;
            epilogue(p, (float *)p->y + off, p->z ? p->z + off : NULL, j1 - j0);
        }
    }
}

/* The node's packed GEMM when p is a convolution it serves (its C, M and K:
 * the lengths may change from run to run). */
static bool launch_rows(const cge_kernel_ctx *ctx, cge_stream *stream, const conv_args *p,
                        cge_status *out)
{
    const conv_state *st = ctx->state;
    rows_args a;
    if (!st || !st->rows || p->w != st->rw_src || !rows_geom(p, &a.rg) ||
        a.rg.C != st->rw_C || a.rg.M != st->rw_M || a.rg.K != st->rw_K)
        return false;
    size_t need = rows_ws(&a.rg);
    if (need && (!ctx->workspace || ctx->workspace_size < need)) {
        *out = cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                "the workspace is missing or too small for the padded windows");
        return true;
    }
    a.p = *p;
    a.wp = st->rw;
    a.pad_buf = need ? (float *)(((uintptr_t)ctx->workspace + 63) & ~(uintptr_t)63) : NULL;
    a.pads = a.pad_buf;
    a.isa = cge__gemm_isa_best();
    cge__gemm_plan(a.rg.N, a.rg.OW, a.rg.M, ctx->num_threads, &a.tl);
    *out = CGE_OK;
    if (need)
        *out = cge_launch(stream, rows_pad_fn, cge__blocks_for(a.rg.N, 1, ctx->num_threads), &a,
                          sizeof a);
    if (!*out)
        *out = cge_launch(stream, rows_gemm_fn,
                          cge__blocks_for(a.rg.N * a.tl.tiles_m * a.tl.tiles_n, 1,
                                          ctx->num_threads),
                          &a, sizeof a);
    return true;
}

static cge_status prepare_dnnl(const cge_kernel_ctx *ctx, bool fused, bool transpose,
                               cge__dnnl_conv **state);

static cge_status prepare_common(const cge_kernel_ctx *ctx, bool fused, bool transpose,
                                 void **state)
{
    *state = NULL;
    if (ctx->num_inputs < 2)
        return CGE_OK;
    cge__dnnl_conv *dc = NULL;
    /* one-position 1x1 convolutions run their own kernel: no primitive, and
     * W stays as it is (a primitive would take it over, packed) */
    conv_args sp;
    bool parsed = conv_static_args(ctx, fused, transpose, &sp);
    bool dw = parsed && dw_nhwc_wanted(&sp); /* no primitive: its own kernel and packing */
    bool own = (parsed && uses_gemv(&sp)) || dw;
    conv_state *st = calloc(1, sizeof *st);
    if (!st)
        return cge_kernel_error(ctx, CGE_ERR_NO_MEMORY, "out of memory");
    cge_status s = CGE_OK;
    if (parsed && !own)
        s = prepare_grouped(ctx, &sp, st, &own);
    if (!s && parsed && !own)
        s = prepare_rows(ctx, &sp, st, &own);
    if (!s && !own)
        s = prepare_dnnl(ctx, fused, transpose, &dc);
    if (s) {
        conv_release(st);
        return s;
    }
    st->dc = dc;
    parse_once(ctx, fused, transpose, st);
    if (dw && (s = dw_nhwc_prepare(ctx, &sp, st)) != CGE_OK) {
        conv_release(st);
        return s;
    }
    *state = st;
    return CGE_OK;
}

/* The oneDNN primitive, made once per node when a plan is built. A node
 * oneDNN refuses keeps the builtin kernels (no primitive). */
static cge_status prepare_dnnl(const cge_kernel_ctx *ctx, bool fused, bool transpose,
                               cge__dnnl_conv **state)
{
    *state = NULL;
    conv_args p;
    if (!conv_static_args(ctx, fused, transpose, &p))
        return CGE_OK;
    if (p.channels_last && !uses_dnnl(&p))
        return cge_kernel_error(ctx, CGE_ERR_UNSUPPORTED,
                                "channels_last needs oneDNN, which this build does not have "
                                "(compile the model again here)");
    if (!uses_dnnl(&p))
        return CGE_OK;
    cge__dnnl_conv *dc = NULL;
    /* oneDNN sizes its scratch by threads: with a workspace sized elsewhere
     * (a model file compiled on a smaller machine), use as many threads as
     * it fits. */
    int threads = ctx->num_threads > 0 ? ctx->num_threads : 1;
    cge_status made = dnnl_make(&p, ctx_has_bias(ctx), threads, &dc);
    while (made == CGE_OK && threads > 1 && ctx->workspace_size &&
           cge__dnnl_conv_scratch_size(dc) + 64 > ctx->workspace_size) {
        cge__dnnl_conv_destroy(dc);
        dc = NULL;
        made = dnnl_make(&p, ctx_has_bias(ctx), --threads, &dc);
    }
    if (made == CGE_OK) {
        *state = dc;
        /* A constant W is in place already (plans write their constants
         * before preparing): reorder it now, not in the first run. */
        if (p.w_const && ctx->inputs[1].data &&
            cge__dnnl_conv_prepack(dc, ctx, ctx->inputs[1].data) != CGE_OK) {
            cge__dnnl_conv_destroy(dc);
            *state = NULL;
            return cge_kernel_error(ctx, CGE_ERR_INTERNAL, "oneDNN could not reorder W");
        }
        /* Runs then read the reordered W only (conv_compute takes oneDNN's
         * path whenever its scratch fits the workspace, as it does here). */
        size_t scratch = cge__dnnl_conv_scratch_size(dc);
        if (p.w_const && cge__dnnl_conv_weights_packed(dc) &&
            (scratch == 0 || (ctx->workspace_size >= scratch + 64)))
            cge__kernel_input_packed(ctx, 1);
    } else if (p.channels_last)
        return cge_kernel_error(ctx, CGE_ERR_UNSUPPORTED,
                                "oneDNN refused this channels_last convolution");
    return CGE_OK;
}

static cge_status conv_prepare(const cge_kernel_ctx *ctx, void **state)
{
    return prepare_common(ctx, false, false, state);
}

static cge_status convt_prepare(const cge_kernel_ctx *ctx, void **state)
{
    return prepare_common(ctx, false, true, state);
}


static size_t workspace_common(const cge_kernel_ctx *ctx, bool fused, bool transpose)
{
    conv_args p;
    if (!conv_static_args(ctx, fused, transpose, &p))
        return 0;
    if (dw_nhwc_wanted(&p))
        return dw_nhwc_ws(&p); /* W packed here when prepare could not */
    cge__conv_rows rg;
    if (uses_rows(&p, &rg))
        return rows_ws(&rg); /* no oneDNN primitive is made (prepare_rows) */
    size_t need = gemm_ws(&p);
    /* oneDNN's scratch: the plan's workspace serves both paths, so no run
     * allocates. It is asked for at least as many threads as this machine
     * has (a plan may be compiled without the device it runs on, or saved
     * and loaded elsewhere), of the primitive descriptor alone: a symbolic
     * plan asks at every new signature, and making the primitive here too
     * (its JIT code, reorders, buffers) cost as much as prepare does. */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = ctx->num_threads > (int)cores ? ctx->num_threads : (int)(cores > 0 ? cores : 1);
    cge__dnnl_conv_desc d = dnnl_desc(&p, ctx_has_bias(ctx), threads);
    size_t scratch;
    if (uses_dnnl(&p) && cge__dnnl_conv_scratch_query(&d, &scratch) == CGE_OK)
        need = scratch + 64 > need ? scratch + 64 : need;
    /* A Winograd one also for the threads prepare makes it with: its scratch
     * does not only grow with them (oneDNN blocks a 56x56 map for one thread
     * into larger pieces than for two: vgg11 at one thread found its
     * workspace too small for the primitive and refused to run). The AVX2
     * machines' blocked8 direct kernel likewise (its scratch is oneDNN's
     * choice per thread count). Only there, so that a new signature asks no
     * more than before elsewhere. */
    d.threads = ctx->num_threads > 0 ? ctx->num_threads : 1;
    if ((d.winograd || d.blocked8) && d.threads != threads && uses_dnnl(&p) &&
        cge__dnnl_conv_scratch_query(&d, &scratch) == CGE_OK)
        need = scratch + 64 > need ? scratch + 64 : need;
    return need;
}

static size_t conv_workspace(const cge_kernel_ctx *ctx)
{
    return workspace_common(ctx, false, false);
}

static size_t convt_workspace(const cge_kernel_ctx *ctx)
{
    return workspace_common(ctx, false, true);
}

/* The convolution of p (its epilogue included) on the best path: oneDNN's
 * primitive dc when there is one, else the builtin kernels. */
static cge_status conv_compute(const cge_kernel_ctx *ctx, cge_stream *stream, conv_args *p,
                               cge__dnnl_conv *dc)
{
    int threads = ctx->num_threads;
    bool epi = p->z || p->act;
    cge_status st;
    if (launch_grouped(ctx, stream, p, &st))
        return st;
    if (launch_rows(ctx, stream, p, &st))
        return st;
    if (uses_gemv(p))
        /* 256K multiply-adds a block at least: squeeze-excitation's (5K to
         * 60K) stay on the calling thread instead of waking a worker */
        return cge_launch(stream, conv_gemv_fn,
                          cge__blocks_for(p->N * p->M, p->C >= 262144 ? 1 : 262144 / p->C,
                                          threads),
                          p, sizeof *p);
    if (dc && uses_dnnl(p)) {
        size_t need = cge__dnnl_conv_scratch_size(dc);
        if (need == 0 || (ctx->workspace && ctx->workspace_size >= need + 64)) {
            uintptr_t base = ((uintptr_t)ctx->workspace + 63) & ~(uintptr_t)63;
            dnnl_args a = {.dc = dc, .x = p->x, .w = p->w, .b = p->b, .z = p->z, .y = p->y,
                           .scratch = need ? (void *)base : NULL};
            /* What oneDNN's post-ops left (z, act) runs as blocks of its
             * own right after, over every thread: sigmoid, SiLU and GELU
             * cost too much for the primitive's one-block task. */
            int post = cge__dnnl_conv_post_ops(dc);
            conv_args rest = *p;
            if (post & CGE_DNNL_POST_SUM)
                rest.z = NULL;
            if (post & CGE_DNNL_POST_ELTWISE)
                rest.act = ACT_NONE;
            st = cge_launch(stream, conv_dnnl_fn, 1, &a, sizeof a);
            if (st || (!rest.z && !rest.act))
                return st;
            return cge_launch(stream, epilogue_fn,
                              cge__blocks_for(p->N * p->M * p->P, 16384, threads), &rest,
                              sizeof rest);
        }
    }
    if (p->channels_last)
        return cge_kernel_error(ctx, CGE_ERR_UNSUPPORTED,
                                "channels_last needs oneDNN's primitive (%s)",
                                dc ? "the workspace is missing or too small"
                                   : "oneDNN is absent or refused the convolution");
    if (uses_depthwise(p)) {
        int64_t per = p->P * p->kvol;
        return cge_launch(stream, conv_dw_fn,
                          cge__blocks_for(p->N * p->M, per >= 16384 ? 1 : 16384 / per, threads), p,
                          sizeof *p);
    }
    size_t need = gemm_ws(p);
    if (uses_gemm(p) && ctx->workspace && ctx->workspace_size >= need) {
        uintptr_t base = ((uintptr_t)ctx->workspace + 63) & ~(uintptr_t)63;
        p->bp = (float *)base;
        p->panels = (p->P + NR - 1) / NR;
        p->isa = cge__gemm_isa_best();
        p->is_1x1 = unit_window(p);
        cge__gemm_plan(p->G, p->mpg, p->P, threads, &p->tiling);
        int64_t pack_nb = cge__blocks_for(p->G * p->panels, p->K >= 2048 ? 1 : 2048 / p->K, threads);
        int64_t tiles = p->G * p->tiling.tiles_m * p->tiling.tiles_n;
        for (int64_t n = 0; n < p->N; n++) {
            p->n = n;
            st = cge_launch(stream, conv_pack_fn, pack_nb, p, sizeof *p);
            if (st == CGE_OK)
                st = cge_launch(stream, conv_gemm_fn, cge__blocks_for(tiles, 1, threads), p,
                                sizeof *p);
            if (st != CGE_OK)
                return st;
        }
        return CGE_OK; /* the tiles ran the epilogue */
    } else {
        /* Other dtypes, ConvTranspose, or no workspace: the gather loop. */
        int64_t rows = p->N * p->M * p->g.out[0] * p->g.out[1];
        int64_t per = p->g.out[2] * (p->K > 0 ? p->K : 1);
        st = cge_launch(stream, conv_generic_fn,
                        cge__blocks_for(rows, per >= 8192 ? 1 : 8192 / per, threads), p, sizeof *p);
        if (st)
            return st;
    }
    if (!epi)
        return CGE_OK;
    return cge_launch(stream, epilogue_fn, cge__blocks_for(p->N * p->M * p->P, 16384, threads), p,
                      sizeof *p);
}

static cge_status conv_launch_common(const cge_kernel_ctx *ctx, cge_stream *stream,
                                     bool transpose)
{
    conv_args p;
    if (!cached_args(ctx, &p)) {
        cge_status st = conv_ctx_args(ctx, transpose, &p);
        if (st != CGE_OK)
            return st;
    }
    if (p.N * p.M * p.P == 0)
        return CGE_OK;
    if (!p.y || !p.x || !p.w)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    return conv_compute(ctx, stream, &p, state_dc(ctx->state));
}

static cge_status conv_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return conv_launch_common(ctx, stream, false);
}

/* ---- FusedConv (cge.fused; its schema is in fused_conv.c) ------------------- */

/* FusedConv made from a ConvTranspose (its output_padding and output_shape
 * among the attributes). */
static bool fused_transpose(const cge_attrs *a)
{
    return cge_attrs_get_int(a, "transpose", 0) != 0;
}

cge_status cge__fused_conv_infer(cge_infer_ctx *ctx)
{
    cge_status st = conv_infer_common(ctx, fused_transpose(ctx->attrs));
    if (st)
        return st;
    if (ctx->inputs[0].dtype != CGE_F32)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "X is %s; only float32 is fused",
                              cge_dtype_name(ctx->inputs[0].dtype));
    if (act_from_name(cge_attrs_get_string(ctx->attrs, "activation", "none")) < 0)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "unknown activation '%s'",
                              cge_attrs_get_string(ctx->attrs, "activation", "none"));
    if (ctx->num_inputs > 3 && ctx->inputs[3].dtype != CGE_DTYPE_UNDEFINED) {
        const cge_tensor_desc *Z = &ctx->inputs[3];
        if (Z->dtype != CGE_F32 || !cge_shape_equal(&Z->shape, &ctx->outputs[0].shape)) {
            char a[CGE_SHAPE_STR_MAX], b[CGE_SHAPE_STR_MAX];
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "Z is %s %s; it must be float32 %s",
                                  cge_dtype_name(Z->dtype), cge_shape_str(&Z->shape, a, sizeof a),
                                  cge_shape_str(&ctx->outputs[0].shape, b, sizeof b));
        }
    }
    return CGE_OK;
}

bool cge_fused_conv_channels_last_available(void)
{
    return cge__dnnl_available() != 0;
}

cge_status cge__fused_conv_prepare(const cge_kernel_ctx *ctx, void **state)
{
    return prepare_common(ctx, true, fused_transpose(ctx->attrs), state);
}

void cge__fused_conv_release(void *state)
{
    conv_release(state);
}

size_t cge__fused_conv_workspace(const cge_kernel_ctx *ctx)
{
    return workspace_common(ctx, true, fused_transpose(ctx->attrs));
}

cge_status cge__fused_conv_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    conv_args p;
    if (cached_args(ctx, &p)) {
        if (ctx_has_z(ctx))
            p.z = ctx->inputs[3].data;
    } else {
        cge_status st = conv_ctx_args(ctx, fused_transpose(ctx->attrs), &p);
        if (st != CGE_OK)
            return st;
        if (p.dtype != CGE_F32 || !fused_attrs(ctx, &p))
            return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG,
                                    "float32 only, with a known activation");
        if (ctx_has_z(ctx)) {
            const cge_tensor *Z = &ctx->inputs[3];
            if (Z->dtype != CGE_F32 || !cge_shape_equal(&Z->shape, &ctx->outputs[0].shape))
                return cge_kernel_error(ctx, CGE_ERR_SHAPE, "Z does not match the output");
            p.z = Z->data;
        }
    }
    if (ctx_has_z(ctx)) {
        if (!p.z && p.N * p.M * p.P != 0)
            return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "Z has no buffer");
    }
    if (p.N * p.M * p.P == 0)
        return CGE_OK;
    if (!p.y || !p.x || !p.w)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    if (ctx->state && ((const conv_state *)ctx->state)->dw_on)
        return dw_nhwc_launch(ctx, stream, &p);
    return conv_compute(ctx, stream, &p, state_dc(ctx->state));
}

static cge_status convt_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return conv_launch_common(ctx, stream, true);
}

/* ---- definitions ------------------------------------------------------------ */

static const cge_arg_def conv_inputs[] = {
    {"X", 0, CONV_DTYPES, "[N, C, D1, ...] (1 to 3 spatial dims)"},
    {"W", 0, CONV_DTYPES, "[M, C/group, k1, ...]"},
    {"B", CGE_ARG_OPTIONAL, CONV_DTYPES, "[M] bias"},
};
static const cge_arg_def conv_outputs[] = {{"Y", 0, CONV_DTYPES, "[N, M, O1, ...]"}};
static const cge_attr_def conv_attrs[] = {CGE__CONV_ATTR_DEFS};
static const cge_kernel_def conv_kernels[] = {{
    .engine = "cpu",
    .dtypes = CONV_DTYPES,
    .launch = conv_launch,
    .workspace_size = conv_workspace,
    .prepare = conv_prepare,
    .release = conv_release,
    .inplace_input = -1,
}};

static const cge_arg_def convt_inputs[] = {
    {"X", 0, CONV_DTYPES, "[N, C, D1, ...] (1 to 3 spatial dims)"},
    {"W", 0, CONV_DTYPES, "[C, M/group, k1, ...]"},
    {"B", CGE_ARG_OPTIONAL, CONV_DTYPES, "[M] bias"},
};
static const cge_attr_def convt_attrs[] = {
    {"auto_pad", CGE_ATTR_STRING, false, 0, 0.0f, "NOTSET", "NOTSET, SAME_UPPER, SAME_LOWER, VALID"},
    {"dilations", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "per spatial dim, default 1"},
    {"group", CGE_ATTR_INT, false, 1, 0.0f, NULL, "channel groups"},
    {"kernel_shape", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "taken from W when absent"},
    {"output_padding", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "added at the end of each dim"},
    {"output_shape", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "spatial output size; pads follow"},
    {"pads", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "begins then ends, default 0"},
    {"strides", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "per spatial dim, default 1"},
};
static const cge_kernel_def convt_kernels[] = {{
    .engine = "cpu",
    .dtypes = CONV_DTYPES,
    .launch = convt_launch,
    .workspace_size = convt_workspace,
    .prepare = convt_prepare,
    .release = conv_release,
    .inplace_input = -1,
}};

static const cge_op_def conv_ops[] = {
    {
        .name = "Conv",
        .domain = CGE_DOMAIN_DEFAULT,
        .since_version = 11,
        .inputs = conv_inputs,
        .num_inputs = 3,
        .outputs = conv_outputs,
        .num_outputs = 1,
        .attrs = conv_attrs,
        .num_attrs = 6,
        .infer = conv_infer,
        .kernels = conv_kernels,
        .num_kernels = 1,
        .doc = "N-d convolution with groups, strides, dilations and pads.",
    },
    {
        .name = "ConvTranspose",
        .domain = CGE_DOMAIN_DEFAULT,
        .since_version = 11,
        .inputs = convt_inputs,
        .num_inputs = 3,
        .outputs = conv_outputs,
        .num_outputs = 1,
        .attrs = convt_attrs,
        .num_attrs = 8,
        .infer = convt_infer,
        .kernels = convt_kernels,
        .num_kernels = 1,
        .doc = "Transposed convolution (the gradient of Conv with respect to its input).",
    },
};

const cge_op_def *cge__ops_conv(int32_t *count)
{
    *count = (int32_t)(sizeof conv_ops / sizeof conv_ops[0]);
    return conv_ops;
}
