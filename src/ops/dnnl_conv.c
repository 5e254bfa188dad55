/* oneDNN convolution wrapper (see dnnl_conv.h). Without CGE_HAVE_DNNL every
 * entry point reports that oneDNN is unavailable and Conv keeps its own
 * kernels. */
#include "ops/dnnl_conv.h"

#include "cge/op.h"

#include <stdbool.h>
#include <stdlib.h>

#ifdef CGE_HAVE_DNNL
#include <string.h>

#include "ops/dnnl_common.h"

/* In blocked mode src, wei and dst hold oneDNN's layouts in buffers of their
 * own, and the *_user memories wrap the caller's plain tensors; a NULL
 * reorder means the chosen layout is the plain one and the caller's buffer is
 * used directly. */
struct cge__dnnl_conv {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, bias, dst, scratch;
    dnnl_memory_t src_user, wei_user, dst_user;
    dnnl_primitive_t r_src, r_wei, r_dst, r_z;
    const void *wei_from; /* the W last reordered */
    void *wei_block;      /* shared W in the chosen layout (cge_kernel_shared_get), or NULL */
    size_t scratch_bytes, dst_bytes;
    int post;
    int threads; /* OpenMP threads it was made for and runs with */
    /* Winograd: the primitive is one image's, run `images` times, X, Z and Y
     * advancing by one image's floats each time; else images is 1. */
    bool winograd;
    bool blocked8; /* desc.blocked8 taken */
    int64_t images, x_image, y_image;
    /* Winograd's blocked X and Y (one image's) live in the caller's scratch,
     * after oneDNN's own, at these offsets (0: a buffer of their own): the
     * plan's arena holds them once for all steps, not each instance per
     * convolution. */
    size_t src_off, dst_off;
    /* A transposed convolution in its matmul form (unpool_form): W is
     * rearranged before its reorder (unpool_weights), and the bias is
     * repeated once per position of the last kernel dim (bias_rep, reps x M
     * floats, refreshed from B at every run). */
    bool unpool;
    int64_t unpool_C, unpool_M, unpool_k[3];
    int unpool_n;
    float *bias_rep;
    int64_t reps;
};

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Whether d's channels-last activations are run on nChw8c copies
 * (dnnl_conv.h, blocked8): the direct convolution only. */
static bool blocked8_taken(const cge__dnnl_conv_desc *d)
{
    return d->blocked8 && d->channels_last && !d->winograd && !d->transpose && !d->bf16 &&
           d->G == 1;
}

/* Scratch bytes of pd with, for Winograd and blocked8 (`inside`), its
 * blocked X and Y after oneDNN's own (src_off, dst_off: where they go; 0
 * where the layout is the caller's). */
static size_t scratch_layout(const_dnnl_primitive_desc_t pd, const dnnl_memory_desc_t *smd,
                             const dnnl_memory_desc_t *dmd, bool inside, size_t *src_off,
                             size_t *dst_off)
{
    const dnnl_memory_desc_t *spd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    const dnnl_memory_desc_t *cs = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *cd = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    size_t n = spd ? dnnl_memory_desc_get_size(spd) : 0;
    *src_off = *dst_off = 0;
    if (!inside || !cs || !cd)
        return n;
    n = round64(n);
    if (!dnnl_memory_desc_equal(smd, cs)) {
        *src_off = n;
        n += round64(dnnl_memory_desc_get_size(cs));
    }
    if (!dnnl_memory_desc_equal(dmd, cd)) {
        *dst_off = n;
        n += round64(dnnl_memory_desc_get_size(cd));
    }
    return n;
}

void cge__dnnl_conv_destroy(cge__dnnl_conv *c)
{
    if (!c)
        return;
    dnnl_memory_t *mems[] = {&c->src, &c->wei, &c->bias, &c->dst, &c->scratch,
                             &c->src_user, &c->wei_user, &c->dst_user};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        dnnl_memory_destroy(*mems[i]);
    dnnl_primitive_destroy(c->r_src);
    dnnl_primitive_destroy(c->r_wei);
    dnnl_primitive_destroy(c->r_dst);
    dnnl_primitive_destroy(c->r_z);
    dnnl_primitive_destroy(c->prim);
    dnnl_primitive_desc_destroy(c->pd);
    cge_kernel_shared_release(c->wei_block);
    free(c->bias_rep);
    dnnl_stream_destroy(c->stream);
    dnnl_engine_destroy(c->engine);
    free(c);
}

/* The eltwise post-op(s) for d->eltwise. oneDNN 2.6 has no HardSigmoid:
 * it is linear then clip. */
static int append_eltwise(dnnl_post_ops_t po, const cge__dnnl_conv_desc *d)
{
    dnnl_alg_kind_t alg;
    float a = 0.0f, b = 0.0f;
    switch (d->eltwise) {
    case CGE_DNNL_ELT_RELU: alg = dnnl_eltwise_relu, a = d->alpha; break;
    case CGE_DNNL_ELT_CLIP: alg = dnnl_eltwise_clip, a = d->alpha, b = d->beta; break;
    case CGE_DNNL_ELT_SWISH: alg = dnnl_eltwise_swish, a = 1.0f; break;
    case CGE_DNNL_ELT_GELU_ERF: alg = dnnl_eltwise_gelu_erf; break;
    case CGE_DNNL_ELT_HARDSWISH: alg = dnnl_eltwise_hardswish; break;
    case CGE_DNNL_ELT_LOGISTIC: alg = dnnl_eltwise_logistic; break;
    case CGE_DNNL_ELT_TANH: alg = dnnl_eltwise_tanh; break;
    case CGE_DNNL_ELT_HARDSIGMOID:
        return dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_linear, d->alpha, d->beta) ==
                   dnnl_success &&
               dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip, 0.0f, 1.0f) ==
                   dnnl_success;
    default: return 0;
    }
    return dnnl_post_ops_append_eltwise(po, 1.0f, alg, a, b) == dnnl_success;
}

/* Process-wide: convolutions made (primitive, reorders, memories) and
 * scratch queries answered by a primitive descriptor alone
 * (cge__dnnl_conv_counts). */
static int64_t made_count, query_count, wino_count, blocked8_count;

int64_t cge__dnnl_conv_blocked8_made(void)
{
    return __atomic_load_n(&blocked8_count, __ATOMIC_RELAXED);
}

int64_t cge__dnnl_conv_winograd_made(void)
{
    return __atomic_load_n(&wino_count, __ATOMIC_RELAXED);
}

void cge__dnnl_conv_counts(int64_t *made, int64_t *queried)
{
    if (made)
        *made = __atomic_load_n(&made_count, __ATOMIC_RELAXED);
    if (queried)
        *queried = __atomic_load_n(&query_count, __ATOMIC_RELAXED);
}

/* The memory descriptors of d: the caller's (plain or channels-last) and
 * those the primitive is asked for (any where oneDNN chooses). */
typedef struct conv_mds {
    dnnl_memory_desc_t smd, wmd, bmd, dmd;
} conv_mds;

/* The primitive descriptor of d (its post-ops in *post) on engine e. */
static int make_pd(const cge__dnnl_conv_desc *d, dnnl_engine_t e, conv_mds *m, int *post,
                   dnnl_primitive_desc_t *pd)
{
    int n = d->nsp, off = 3 - n;
    bool wino = d->winograd && !d->transpose && !d->bf16 && d->G == 1;
    dnnl_dims_t sd = {d->N, d->C}, dd = {d->N, d->M}, wd, bd = {d->M}, st, dil, pl, pr;
    int wr = d->G > 1 ? n + 3 : n + 2;
    if (d->G > 1) {
        wd[0] = d->G;
        wd[1] = d->M / d->G;
        wd[2] = d->C / d->G;
    } else {
        wd[0] = d->M;
        wd[1] = d->C;
    }
    for (int i = 0; i < n; i++) {
        int j = off + i;
        sd[2 + i] = d->in[j];
        dd[2 + i] = d->out[j];
        wd[wr - n + i] = d->k[j];
        st[i] = d->s[j];
        dil[i] = d->d[j] - 1;
        pl[i] = d->pb[j];
        /* Transposed: oneDNN's output is (in-1)s + (k-1)d + 1 - pl - pr, so
         * output_padding (and an output_shape past that) lowers pr. */
        pr[i] = d->transpose ? (d->in[j] - 1) * d->s[j] + (d->k[j] - 1) * d->d[j] + 1 - d->pb[j] -
                                   d->out[j]
                             : d->pe[j];
    }
    static const dnnl_format_tag_t plain[] = {dnnl_ncw, dnnl_nchw, dnnl_ncdhw};
    static const dnnl_format_tag_t last[] = {dnnl_nwc, dnnl_nhwc, dnnl_ndhwc};
    const dnnl_format_tag_t *act = d->channels_last ? last : plain;
    /* ConvTranspose's W is [C, M/G, k...]: the logical (O, I) swapped. */
    static const dnnl_format_tag_t w1c[] = {dnnl_oiw, dnnl_oihw, dnnl_oidhw};
    static const dnnl_format_tag_t wgc[] = {dnnl_goiw, dnnl_goihw, dnnl_goidhw};
    static const dnnl_format_tag_t w1t[] = {dnnl_bac, dnnl_bacd, dnnl_bacde};
    static const dnnl_format_tag_t wgt[] = {dnnl_acbd, dnnl_acbde, dnnl_acbdef};
    const dnnl_format_tag_t *w1 = d->transpose ? w1t : w1c, *wg = d->transpose ? wgt : wgc;
    static const dnnl_format_tag_t block8[] = {dnnl_aBc8b, dnnl_aBcd8b, dnnl_aBcde8b};
    dnnl_format_tag_t at = (d->blocked && !d->channels_last) || wino ? dnnl_format_tag_any
                           : blocked8_taken(d)                      ? block8[n - 1]
                                                                     : act[n - 1];
    dnnl_format_tag_t wt = d->blocked || d->channels_last || wino ? dnnl_format_tag_any
                           : d->G > 1                     ? wg[n - 1]
                                                          : w1[n - 1];
    dnnl_memory_desc_t sa, wa, da;
    dnnl_convolution_desc_t cd;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    *post = d->blocked || d->channels_last || wino ? (d->sum ? CGE_DNNL_POST_SUM : 0) |
                                                 (d->eltwise ? CGE_DNNL_POST_ELTWISE : 0)
                                           : 0;
    int ok =
        dnnl_memory_desc_init_by_tag(&m->smd, n + 2, sd, dnnl_f32, act[n - 1]) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(&m->dmd, n + 2, dd, dnnl_f32, act[n - 1]) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(&m->wmd, wr, wd, dnnl_f32,
                                     d->G > 1 ? wg[n - 1] : w1[n - 1]) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(&sa, n + 2, sd, d->bf16 ? dnnl_bf16 : dnnl_f32, at) ==
            dnnl_success &&
        dnnl_memory_desc_init_by_tag(&da, n + 2, dd, dnnl_f32, at) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(&wa, wr, wd, d->bf16 ? dnnl_bf16 : dnnl_f32, wt) ==
            dnnl_success &&
        dnnl_memory_desc_init_by_tag(&m->bmd, 1, bd, dnnl_f32, dnnl_x) == dnnl_success &&
        (d->transpose ? dnnl_dilated_deconvolution_forward_desc_init(
                            &cd, dnnl_forward_inference, dnnl_deconvolution_direct, &sa, &wa,
                            d->has_bias ? &m->bmd : NULL, &da, st, dil, pl, pr)
                      : dnnl_dilated_convolution_forward_desc_init(
                            &cd, dnnl_forward_inference,
                            wino ? dnnl_convolution_winograd : dnnl_convolution_direct, &sa, &wa,
                            d->has_bias ? &m->bmd : NULL, &da, st, dil, pl, pr)) == dnnl_success &&
        dnnl_primitive_attr_create(&attr) == dnnl_success &&
        dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) ==
            dnnl_success &&
        dnnl_post_ops_create(&po) == dnnl_success &&
        (!(*post & CGE_DNNL_POST_SUM) || dnnl_post_ops_append_sum(po, 1.0f) == dnnl_success) &&
        (!(*post & CGE_DNNL_POST_ELTWISE) || append_eltwise(po, d)) &&
        dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success &&
        dnnl_primitive_desc_create(pd, &cd, attr, e, NULL) == dnnl_success;
    dnnl_primitive_attr_destroy(attr);
    dnnl_post_ops_destroy(po);
    /* blocked8 is for oneDNN's JIT kernels; where only its reference one
     * takes nChw8c (channel counts its kernels do not block), the caller
     * keeps NHWC. */
    const char *impl = NULL;
    if (ok && blocked8_taken(d) &&
        (dnnl_primitive_desc_query(*pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success ||
         !impl || !strncmp(impl, "ref", 3))) {
        dnnl_primitive_desc_destroy(*pd);
        *pd = NULL;
        ok = 0;
    }
    return ok;
}

/* ---- ConvTranspose as one matmul ---------------------------------------------
 * A transposed convolution whose kernel equals its stride, without pads,
 * dilation or groups (U-Net's 2x2 stride-2 upsampling), writes disjoint
 * windows: in channels-last, input position p's C values times W give the
 * k0 x ... x M values of p's window, whose rows lie in the output at fixed
 * strides. With X viewed as the dense [N*I0, 1, I1, 1, ..., C] and Y (NHWC)
 * as the dense [N*I0, k0, I1, k1, ..., k(n-1)*M], that is one matmul with W
 * rearranged to [1, k0, 1, k1, ..., C, k(n-1)*M] (1-D: [N*I0, C] x
 * [C, k0*M]), broadcast over the input's positions and X over the kernel's:
 * oneDNN's brgemm matmul reads and writes the activations as they are and
 * takes every post-op. */
static int64_t deconv_mm_count;

int64_t cge__dnnl_conv_deconv_matmul_made(void)
{
    return __atomic_load_n(&deconv_mm_count, __ATOMIC_RELAXED);
}

/* $CGE_DNNL_DECONV_MATMUL=0 keeps oneDNN's deconvolution (read when a
 * primitive is made or its scratch queried, never per run). */
static bool unpool_form(const cge__dnnl_conv_desc *d)
{
    const char *off = getenv("CGE_DNNL_DECONV_MATMUL");
    if ((off && !strcmp(off, "0")) || !d->transpose || !d->channels_last || d->bf16 ||
        d->G != 1 || d->nsp < 1 || d->nsp > 3 || d->N < 1 || d->C < 1 || d->M < 1)
        return false;
    for (int j = 3 - d->nsp; j < 3; j++)
        if (d->k[j] != d->s[j] || (d->k[j] > 1 && d->d[j] != 1) || d->pb[j] != 0 ||
            d->in[j] < 1 || d->out[j] != d->in[j] * d->s[j])
            return false;
    return true;
}

/* The matmul's src, weights, dst and bias dims for d (unpool_form); returns
 * their count (2 per spatial dim). */
static int unpool_dims(const cge__dnnl_conv_desc *d, dnnl_dims_t sd, dnnl_dims_t wd,
                       dnnl_dims_t dd, dnnl_dims_t bd)
{
    int n = d->nsp, off = 3 - n, r = 0;
    for (int i = 0; i + 1 < n; i++) {
        int64_t in = i == 0 ? d->N * d->in[off] : d->in[off + i];
        sd[r] = dd[r] = in, wd[r] = bd[r] = 1, r++;
        sd[r] = bd[r] = 1, wd[r] = dd[r] = d->k[off + i], r++;
    }
    int64_t rows = n == 1 ? d->N * d->in[off] : d->in[off + n - 1], km = d->k[2] * d->M;
    sd[r] = dd[r] = rows, wd[r] = d->C, bd[r] = 1, r++;
    sd[r] = d->C, wd[r] = dd[r] = bd[r] = km, r++;
    return r;
}

static int make_unpool_pd(const cge__dnnl_conv_desc *d, dnnl_engine_t e, conv_mds *m, int *post,
                          dnnl_primitive_desc_t *pd)
{
    static const dnnl_format_tag_t dense[] = {dnnl_ab, dnnl_abcd, dnnl_abcdef};
    dnnl_dims_t sd, wd, dd, bd;
    int r = unpool_dims(d, sd, wd, dd, bd);
    dnnl_format_tag_t tag = dense[d->nsp - 1];
    dnnl_memory_desc_t wa;
    dnnl_matmul_desc_t mm;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    const char *name = NULL;
    *post = (d->sum ? CGE_DNNL_POST_SUM : 0) | (d->eltwise ? CGE_DNNL_POST_ELTWISE : 0);
    int ok =
        dnnl_memory_desc_init_by_tag(&m->smd, r, sd, dnnl_f32, tag) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(&m->wmd, r, wd, dnnl_f32, tag) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(&m->dmd, r, dd, dnnl_f32, tag) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(&m->bmd, r, bd, dnnl_f32, tag) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(&wa, r, wd, dnnl_f32, dnnl_format_tag_any) ==
            dnnl_success &&
        dnnl_matmul_desc_init(&mm, &m->smd, &wa, d->has_bias ? &m->bmd : NULL, &m->dmd) ==
            dnnl_success &&
        dnnl_primitive_attr_create(&attr) == dnnl_success &&
        dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) ==
            dnnl_success &&
        dnnl_post_ops_create(&po) == dnnl_success &&
        (!d->sum || dnnl_post_ops_append_sum(po, 1.0f) == dnnl_success) &&
        (!d->eltwise || append_eltwise(po, d)) &&
        dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success &&
        dnnl_primitive_desc_create(pd, &mm, attr, e, NULL) == dnnl_success;
    dnnl_primitive_attr_destroy(attr);
    dnnl_post_ops_destroy(po);
    /* oneDNN's reference matmul (no JIT kernel for these broadcasts or this
     * ISA) would lose to its deconvolution: take that instead. */
    if (ok && (dnnl_primitive_desc_query(*pd, dnnl_query_impl_info_str, 0, &name) !=
                   dnnl_success ||
               !name || strstr(name, "ref")))
        ok = 0;
    if (!ok) {
        dnnl_primitive_desc_destroy(*pd);
        *pd = NULL;
    }
    return ok;
}

/* W [C, M, k0, ...] (ConvTranspose's, one group) rearranged to the matmul's
 * plain weights [k0, ..., k(n-2), C, k(n-1), M]: a buffer the caller frees. */
static float *unpool_weights(const cge__dnnl_conv *c, const float *w)
{
    int64_t C = c->unpool_C, M = c->unpool_M, kvol = 1, klast = c->unpool_k[c->unpool_n - 1];
    for (int i = 0; i < c->unpool_n; i++)
        kvol *= c->unpool_k[i];
    float *t = malloc((size_t)(C * M * kvol) * sizeof *t);
    if (!t)
        return NULL;
    for (int64_t ci = 0; ci < C; ci++)
        for (int64_t mi = 0; mi < M; mi++)
            for (int64_t k = 0; k < kvol; k++)
                t[((k / klast * C + ci) * klast + k % klast) * M + mi] = w[(ci * M + mi) * kvol + k];
    return t;
}

/* A wrapper with nothing made yet: d's threads, one execution per run. */
static cge__dnnl_conv *conv_alloc(const cge__dnnl_conv_desc *d)
{
    cge__dnnl_conv *c = calloc(1, sizeof *c);
    if (c) {
        c->threads = d->threads > 0 ? d->threads : 1;
        c->images = 1;
    }
    return c;
}

static cge_status unpool_create(const cge__dnnl_conv_desc *d, cge__dnnl_conv **out)
{
    *out = NULL;
    cge__dnnl_conv *c = conv_alloc(d);
    if (!c)
        return CGE_ERR_NO_MEMORY;
    c->unpool = true;
    c->unpool_C = d->C;
    c->unpool_M = d->M;
    c->unpool_n = d->nsp;
    for (int i = 0; i < d->nsp; i++)
        c->unpool_k[i] = d->k[3 - d->nsp + i];
    c->reps = d->k[2];
    int omp = cge__dnnl_omp_enter(c->threads);
    conv_mds m;
    const dnnl_memory_desc_t *spd, *cw;
    /* The weights always get a buffer of their own, even in the plain
     * layout: they are the rearranged W, not the caller's. */
    int ok =
        dnnl_engine_create(&c->engine, dnnl_cpu, 0) == dnnl_success &&
        dnnl_stream_create(&c->stream, c->engine, dnnl_stream_default_flags) == dnnl_success &&
        make_unpool_pd(d, c->engine, &m, &c->post, &c->pd) &&
        dnnl_primitive_create(&c->prim, c->pd) == dnnl_success &&
        (spd = dnnl_primitive_desc_query_md(c->pd, dnnl_query_scratchpad_md, 0)) != NULL &&
        (cw = dnnl_primitive_desc_query_md(c->pd, dnnl_query_weights_md, 0)) != NULL &&
        dnnl_memory_create(&c->src, &m.smd, c->engine, DNNL_MEMORY_NONE) == dnnl_success &&
        dnnl_memory_create(&c->dst, &m.dmd, c->engine, DNNL_MEMORY_NONE) == dnnl_success &&
        dnnl_memory_create(&c->wei, cw, c->engine, DNNL_MEMORY_ALLOCATE) == dnnl_success &&
        dnnl_memory_create(&c->wei_user, &m.wmd, c->engine, DNNL_MEMORY_NONE) == dnnl_success &&
        cge__dnnl_make_reorder(c->engine, &m.wmd, cw, &c->r_wei) &&
        dnnl_memory_create(&c->bias, &m.bmd, c->engine, DNNL_MEMORY_NONE) == dnnl_success &&
        dnnl_memory_create(&c->scratch, spd, c->engine, DNNL_MEMORY_NONE) == dnnl_success &&
        (!d->has_bias ||
         (c->bias_rep = malloc((size_t)(c->reps * d->M) * sizeof *c->bias_rep)) != NULL);
    cge__dnnl_omp_leave(omp);
    if (!ok) {
        cge__dnnl_conv_destroy(c);
        return CGE_ERR_UNSUPPORTED;
    }
    c->scratch_bytes = scratch_layout(c->pd, &m.smd, &m.dmd, false, &c->src_off, &c->dst_off);
    c->dst_bytes = dnnl_memory_desc_get_size(&m.dmd);
    __atomic_add_fetch(&made_count, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&deconv_mm_count, 1, __ATOMIC_RELAXED);
    *out = c;
    return CGE_OK;
}

static cge_status conv_create(const cge__dnnl_conv_desc *d, cge__dnnl_conv **out);

cge_status cge__dnnl_conv_create(const cge__dnnl_conv_desc *d, cge__dnnl_conv **out)
{
    *out = NULL;
    if (d->nsp < 1 || d->nsp > 3 || d->G < 1)
        return CGE_ERR_UNSUPPORTED;
    if (unpool_form(d) && unpool_create(d, out) == CGE_OK)
        return CGE_OK;
    if (d->winograd && !d->transpose && !d->bf16 && d->G == 1 && d->N > 0) {
        /* One image's primitive, run per image (dnnl_conv.h). */
        cge__dnnl_conv_desc one = *d;
        one.N = 1;
        if (conv_create(&one, out) == CGE_OK) {
            cge__dnnl_conv *c = *out;
            c->winograd = true;
            __atomic_add_fetch(&wino_count, 1, __ATOMIC_RELAXED);
            c->images = d->N;
            c->x_image = d->C;
            c->y_image = d->M;
            for (int i = 3 - d->nsp; i < 3; i++) {
                c->x_image *= d->in[i];
                c->y_image *= d->out[i];
            }
            return CGE_OK;
        }
    }
    cge__dnnl_conv_desc direct = *d;
    direct.winograd = 0;
    if (blocked8_taken(&direct) && conv_create(&direct, out) == CGE_OK)
        return CGE_OK;
    direct.blocked8 = 0;
    return conv_create(&direct, out);
}

static cge_status conv_create(const cge__dnnl_conv_desc *d, cge__dnnl_conv **out)
{
    *out = NULL;
    cge__dnnl_conv *c = conv_alloc(d);
    if (!c)
        return CGE_ERR_NO_MEMORY;
    int omp = cge__dnnl_omp_enter(c->threads);
    conv_mds m;
    const dnnl_memory_desc_t *spd, *cs, *cw, *cdst;
    int ok =
        dnnl_engine_create(&c->engine, dnnl_cpu, 0) == dnnl_success &&
        dnnl_stream_create(&c->stream, c->engine, dnnl_stream_default_flags) == dnnl_success &&
        make_pd(d, c->engine, &m, &c->post, &c->pd) &&
        dnnl_primitive_create(&c->prim, c->pd) == dnnl_success &&
        (spd = dnnl_primitive_desc_query_md(c->pd, dnnl_query_scratchpad_md, 0)) != NULL &&
        (cs = dnnl_primitive_desc_query_md(c->pd, dnnl_query_src_md, 0)) != NULL &&
        (cw = dnnl_primitive_desc_query_md(c->pd, dnnl_query_weights_md, 0)) != NULL &&
        (cdst = dnnl_primitive_desc_query_md(c->pd, dnnl_query_dst_md, 0)) != NULL &&
        cge__dnnl_bind(c->engine, &m.smd, cs, &c->src, &c->src_user, &c->r_src, NULL) &&
        cge__dnnl_bind(c->engine, &m.wmd, cw, &c->wei, &c->wei_user, &c->r_wei, NULL) &&
        cge__dnnl_bind(c->engine, &m.dmd, cdst, &c->dst, &c->dst_user,
                       (c->post & CGE_DNNL_POST_SUM) ? &c->r_z : NULL, &c->r_dst) &&
        dnnl_memory_create(&c->bias, &m.bmd, c->engine, DNNL_MEMORY_NONE) == dnnl_success &&
        dnnl_memory_create(&c->scratch, spd, c->engine, DNNL_MEMORY_NONE) == dnnl_success;
    cge__dnnl_omp_leave(omp);
    if (!ok) {
        cge__dnnl_conv_destroy(c);
        return CGE_ERR_UNSUPPORTED;
    }
    c->blocked8 = blocked8_taken(d);
    c->scratch_bytes = scratch_layout(c->pd, &m.smd, &m.dmd, d->winograd || c->blocked8,
                                      &c->src_off, &c->dst_off);
    c->dst_bytes = dnnl_memory_desc_get_size(&m.dmd);
    /* Winograd's and blocked8's X and Y in the scratch instead of their own
     * buffers. */
    dnnl_memory_t *inside[2] = {c->src_off ? &c->src : NULL, c->dst_off ? &c->dst : NULL};
    for (int i = 0; ok && i < 2; i++) {
        const dnnl_memory_desc_t *md = NULL;
        dnnl_memory_t mem = NULL;
        if (!inside[i])
            continue;
        ok = dnnl_memory_get_memory_desc(*inside[i], &md) == dnnl_success &&
             dnnl_memory_create(&mem, md, c->engine, DNNL_MEMORY_NONE) == dnnl_success;
        if (ok) {
            dnnl_memory_destroy(*inside[i]);
            *inside[i] = mem;
        }
    }
    if (!ok) {
        cge__dnnl_conv_destroy(c);
        return CGE_ERR_UNSUPPORTED;
    }
    /* The activations' own buffers (a chosen layout not the caller's) get
     * their pages now, when the plan is made, not in its first run. */
    dnnl_memory_t acts[2] = {c->r_src ? c->src : NULL, c->r_dst ? c->dst : NULL};
    for (int i = 0; i < 2; i++) {
        void *h = NULL;
        const dnnl_memory_desc_t *md = NULL;
        if (acts[i] && dnnl_memory_get_data_handle(acts[i], &h) == dnnl_success && h &&
            dnnl_memory_get_memory_desc(acts[i], &md) == dnnl_success)
            memset(h, 0, dnnl_memory_desc_get_size(md));
    }
    __atomic_add_fetch(&made_count, 1, __ATOMIC_RELAXED);
    if (c->blocked8)
        __atomic_add_fetch(&blocked8_count, 1, __ATOMIC_RELAXED);
    *out = c;
    return CGE_OK;
}

/* A plan's workspace query at every new signature asks only this: the
 * primitive descriptor answers it, without the primitive (its JIT code),
 * the reorders and the layouts' buffers that cge__dnnl_conv_create makes
 * and prepare makes once more. */
cge_status cge__dnnl_conv_scratch_query(const cge__dnnl_conv_desc *d, size_t *bytes)
{
    *bytes = 0;
    if (d->nsp < 1 || d->nsp > 3 || d->G < 1)
        return CGE_ERR_UNSUPPORTED;
    int omp = cge__dnnl_omp_enter(d->threads > 0 ? d->threads : 1);
    dnnl_engine_t e = NULL;
    dnnl_primitive_desc_t pd = NULL;
    conv_mds m;
    int post = 0;
    const dnnl_memory_desc_t *spd = NULL;
    /* As cge__dnnl_conv_create chooses: Winograd for one image, else (or
     * where oneDNN refuses it) the direct convolution. */
    cge__dnnl_conv_desc q = *d;
    if (q.winograd && !q.transpose && !q.bf16 && q.G == 1 && q.N > 0)
        q.N = 1;
    else
        q.winograd = 0;
    int ok = dnnl_engine_create(&e, dnnl_cpu, 0) == dnnl_success;
    if (ok && unpool_form(d) && make_unpool_pd(d, e, &m, &post, &pd))
        q.winograd = 0;
    else if (ok && q.winograd && !make_pd(&q, e, &m, &post, &pd)) {
        dnnl_primitive_desc_destroy(pd);
        pd = NULL;
        q = *d;
        q.winograd = 0;
    }
    if (ok && !pd && blocked8_taken(&q) && !make_pd(&q, e, &m, &post, &pd)) {
        dnnl_primitive_desc_destroy(pd);
        pd = NULL;
        q.blocked8 = 0; /* as cge__dnnl_conv_create falls back */
    }
    ok = ok && (pd || make_pd(&q, e, &m, &post, &pd)) &&
         (spd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0)) != NULL;
    size_t so, dof;
    if (ok)
        *bytes = scratch_layout(pd, &m.smd, &m.dmd, q.winograd || blocked8_taken(&q), &so, &dof);
    dnnl_primitive_desc_destroy(pd);
    dnnl_engine_destroy(e);
    cge__dnnl_omp_leave(omp);
    if (ok)
        __atomic_add_fetch(&query_count, 1, __ATOMIC_RELAXED);
    return ok ? CGE_OK : CGE_ERR_UNSUPPORTED;
}

size_t cge__dnnl_conv_scratch_size(const cge__dnnl_conv *c)
{
    return c ? c->scratch_bytes : 0;
}

int cge__dnnl_conv_post_ops(const cge__dnnl_conv *c)
{
    return c ? c->post : 0;
}

bool cge__dnnl_conv_winograd(const cge__dnnl_conv *c) { return c && c->winograd; }

bool cge__dnnl_conv_blocked8(const cge__dnnl_conv *c) { return c && c->blocked8; }

/* Point `user` (or `own` when there is no reorder) at the caller's buffer. */
static int set(dnnl_memory_t own, dnnl_memory_t user, dnnl_primitive_t r, const void *p)
{
    return dnnl_memory_set_data_handle(r ? user : own, (void *)p) == dnnl_success;
}

/* The weights memory over `handle` (DNNL_MEMORY_ALLOCATE: a buffer of its
 * own), replacing the one there. */
static int weights_memory(cge__dnnl_conv *c, void *handle)
{
    const dnnl_memory_desc_t *cw = dnnl_primitive_desc_query_md(c->pd, dnnl_query_weights_md, 0);
    dnnl_memory_t m = NULL;
    if (!cw || dnnl_memory_create(&m, cw, c->engine, handle) != dnnl_success)
        return 0;
    dnnl_memory_destroy(c->wei);
    c->wei = m;
    return 1;
}

/* Reorder w into the primitive's weights buffer unless it is there already.
 * A shared block is never written: another W gets a buffer of its own. */
static int ensure_weights(cge__dnnl_conv *c, const float *w)
{
    if (!c->r_wei)
        return set(c->wei, c->wei_user, NULL, w);
    if (w == c->wei_from)
        return 1;
    if (c->wei_block) {
        if (!weights_memory(c, DNNL_MEMORY_ALLOCATE))
            return 0;
        cge_kernel_shared_release(c->wei_block);
        c->wei_block = NULL;
    }
    cge__dnnl_count_weight_reorder();
    float *t = c->unpool ? unpool_weights(c, w) : NULL;
    if (c->unpool && !t)
        return 0;
    int ok = set(c->wei, c->wei_user, c->r_wei, t ? t : w) &&
             cge__dnnl_run_reorder(c->stream, c->r_wei, c->wei_user, c->wei) &&
             (!t || dnnl_stream_wait(c->stream) == dnnl_success);
    free(t);
    c->wei_from = ok ? w : NULL;
    return ok;
}

cge_status cge__dnnl_conv_prepack(cge__dnnl_conv *c, const cge_kernel_ctx *ctx, const float *w)
{
    if (!c || !w || !c->r_wei)
        return CGE_OK;
    /* The reordered W depends on W's address (its bytes) and on the layout
     * oneDNN chose, which the memory descriptor holds entirely. */
    const dnnl_memory_desc_t *cw = dnnl_primitive_desc_query_md(c->pd, dnnl_query_weights_md, 0);
    if (!cw)
        return CGE_ERR_INTERNAL;
    void *block = NULL;
    dnnl_memory_t m = NULL;
    /* The matmul form reorders W rearranged: the key tells it apart from a
     * reorder of W itself into the same layout. */
    struct {
        dnnl_memory_desc_t md;
        int32_t form;
    } key;
    memset(&key, 0, sizeof key);
    key.md = *cw;
    key.form = 1;
    float *t = c->unpool ? unpool_weights(c, w) : NULL;
    if (c->unpool && !t)
        return CGE_ERR_NO_MEMORY;
    cge_status st = cge__dnnl_pack_shared(ctx, c->engine, c->stream, c->r_wei, c->wei_user, cw, w,
                                          t ? t : w, t ? &key : NULL, t ? sizeof key : 0,
                                          c->threads, &block, &m);
    free(t);
    if (!st) {
        /* The buffer oneDNN allocated at creation goes with the old memory. */
        dnnl_memory_destroy(c->wei);
        c->wei = m;
        cge_kernel_shared_release(c->wei_block);
        c->wei_block = block;
        c->wei_from = w;
    }
    return st;
}

bool cge__dnnl_conv_weights_packed(const cge__dnnl_conv *c) { return c && c->wei_block; }

/* One execution: one image's for a Winograd primitive, else the batch's. */
static int run_once(cge__dnnl_conv *c, const float *x, const float *b, const float *z, float *y,
                    void *scratch)
{
    bool sum = (c->post & CGE_DNNL_POST_SUM) && z;
    int ok = set(c->src, c->src_user, c->r_src, x) && set(c->dst, c->dst_user, c->r_dst, y) &&
             dnnl_memory_set_data_handle(c->bias, (void *)b) == dnnl_success &&
             dnnl_memory_set_data_handle(c->scratch, scratch) == dnnl_success;
    if (ok && c->src_off)
        ok = scratch && dnnl_memory_set_data_handle(c->src, (char *)scratch + c->src_off) ==
                            dnnl_success;
    if (ok && c->dst_off)
        ok = scratch && dnnl_memory_set_data_handle(c->dst, (char *)scratch + c->dst_off) ==
                            dnnl_success;
    if (ok && c->r_src)
        ok = cge__dnnl_run_reorder(c->stream, c->r_src, c->src_user, c->src);
    /* The sum post-op adds what the output holds. */
    if (ok && sum && c->r_z)
        ok = dnnl_memory_set_data_handle(c->dst_user, (void *)z) == dnnl_success &&
             cge__dnnl_run_reorder(c->stream, c->r_z, c->dst_user, c->dst) &&
             dnnl_memory_set_data_handle(c->dst_user, y) == dnnl_success;
    else if (ok && sum && z != y)
        memcpy(y, z, c->dst_bytes);
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, c->src}, {DNNL_ARG_WEIGHTS, c->wei},
                               {DNNL_ARG_DST, c->dst}, {DNNL_ARG_SCRATCHPAD, c->scratch},
                               {DNNL_ARG_BIAS, c->bias}};
    ok = ok && dnnl_primitive_execute(c->prim, c->stream, b ? 5 : 4, args) == dnnl_success;
    if (ok && c->r_dst)
        ok = cge__dnnl_run_reorder(c->stream, c->r_dst, c->dst, c->dst_user);
    /* The next image reuses the primitive's own buffers. */
    return ok && (c->images == 1 || dnnl_stream_wait(c->stream) == dnnl_success);
}

cge_status cge__dnnl_conv_run(cge__dnnl_conv *c, const float *x, const float *w, const float *b,
                             const float *z, float *y, void *scratch)
{
    int omp = cge__dnnl_omp_enter(c->threads);
    int ok = ensure_weights(c, w);
    if (c->bias_rep && b) {
        /* B once per position of the last kernel dim (unpool_form) */
        for (int64_t r = 0; r < c->reps; r++)
            memcpy(c->bias_rep + r * c->unpool_M, b, (size_t)c->unpool_M * sizeof *b);
        b = c->bias_rep;
    }
    for (int64_t n = 0; ok && n < c->images; n++)
        ok = run_once(c, x + n * c->x_image, b, z ? z + n * c->y_image : NULL, y + n * c->y_image,
                      scratch);
    ok = ok && dnnl_stream_wait(c->stream) == dnnl_success;
    cge__dnnl_omp_leave(omp);
    return ok ? CGE_OK : CGE_ERR_INTERNAL;
}

#else

cge_status cge__dnnl_conv_create(const cge__dnnl_conv_desc *d, cge__dnnl_conv **out)
{
    (void)d;
    *out = NULL;
    return CGE_ERR_UNSUPPORTED;
}

size_t cge__dnnl_conv_scratch_size(const cge__dnnl_conv *c)
{
    (void)c;
    return 0;
}

cge_status cge__dnnl_conv_scratch_query(const cge__dnnl_conv_desc *d, size_t *bytes)
{
    (void)d;
    *bytes = 0;
    return CGE_ERR_UNSUPPORTED;
}

void cge__dnnl_conv_counts(int64_t *made, int64_t *queried)
{
    if (made)
        *made = 0;
    if (queried)
        *queried = 0;
}

int cge__dnnl_conv_post_ops(const cge__dnnl_conv *c)
{
    (void)c;
    return 0;
}

bool cge__dnnl_conv_winograd(const cge__dnnl_conv *c)
{
    (void)c;
    return false;
}

bool cge__dnnl_conv_blocked8(const cge__dnnl_conv *c)
{
    (void)c;
    return false;
}

int64_t cge__dnnl_conv_blocked8_made(void) { return 0; }

int64_t cge__dnnl_conv_winograd_made(void)
{
    return 0;
}

int64_t cge__dnnl_conv_deconv_matmul_made(void)
{
    return 0;
}

cge_status cge__dnnl_conv_prepack(cge__dnnl_conv *c, const cge_kernel_ctx *ctx, const float *w)
{
    (void)c, (void)ctx, (void)w;
    return CGE_ERR_UNSUPPORTED;
}

bool cge__dnnl_conv_weights_packed(const cge__dnnl_conv *c)
{
    (void)c;
    return false;
}

cge_status cge__dnnl_conv_run(cge__dnnl_conv *c, const float *x, const float *w, const float *b,
                             const float *z, float *y, void *scratch)
{
    (void)c, (void)x, (void)w, (void)b, (void)z, (void)y, (void)scratch;
    return CGE_ERR_UNSUPPORTED;
}

void cge__dnnl_conv_destroy(cge__dnnl_conv *c)
{
    (void)c;
}

#endif
