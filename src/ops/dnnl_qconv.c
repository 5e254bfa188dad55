/* oneDNN int8 convolution / matmul wrapper (see dnnl_qconv.h). Without
 * CGE_HAVE_DNNL every entry point reports that oneDNN is unavailable and the
 * integer operators keep cge's own kernels. */
#include "ops/dnnl_qconv.h"

#include <stdlib.h>

#ifdef CGE_HAVE_DNNL
#include <pthread.h>
#include <string.h>

#include <stdio.h>

#include "base/cpu_isa.h"
#include "ops/dnnl_common.h"
#include "ops/q8.h"

/* How the weights reach oneDNN, which takes s8 weights without zero points:
 * as they are; shifted by their zero points into s8 (every w - w_zp fits);
 * or shifted by 128 (u8) or not at all (s8), with one all-ones output channel
 * per group for the compensation, int32 results and cge's requantisation. */
enum { W_PLAIN, W_SHIFT, W_COMP };

/* Exactness without VNNI. oneDNN's int8 kernels without AVX512-VNNI sum each
 * pair of u8 x s8 products into int16 with saturation (vpmaddubsw), and for
 * s8 sources halve the weights (losing their last bit). The sums are exact
 * when the source is u8 and every weight oneDNN gets has |v| <= 64 (a pair
 * then stays within 255 * 128 = 32640, whatever oneDNN pairs). Else, on such
 * a machine: an s8 source is flipped to u8 (x + 128, by x ^ 0x80) with its
 * zero point + 128, so that sum (x - x_zp) w is unchanged (padding included);
 * and weights past 64 are split into two halves hi = floor(v / 2), lo = v - hi
 * (each within [-64, 64]) as two output channels of W_COMP, their int32 sums
 * added in cge's requantisation. Depthwise convolutions need no split (their
 * kernel has no pairs), only the flip. CGE_CPU_ISA below avx512 asks for the same
 * (exact, slower) path on a VNNI machine, whose oneDNN would not need it. */
static int qconv_trace(void)
{
    const char *t = getenv("CGE_QCONV_TRACE");
    return t && t[0] == '1';
}

#define QMM_MAX_SLICES 16

/* src and dst are the caller's buffers when the primitive takes their layout
 * (channels-last, or a matmul's rows); otherwise the *_user memories wrap the
 * caller's plain tensors and reorders move data in and out. The weights live
 * in a block shared through cge_kernel_shared_get. Unsliced, oneDNN keeps
 * its scratch itself (library mode): a buffer made once and reused by later
 * runs; a slice's comes from the running thread's buffer (thread_scratch). */
struct cge__dnnl_qconv {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, bias, dst, src_user, dst_user, wei_user;
    dnnl_primitive_t r_src, r_dst, r_wei;
    void *wei_block;
    int threads;
    int mode;                      /* W_* */
    int matmul, w_u8, has_bias;
    int64_t G, M, mg, per;         /* groups, outputs, per group, weights per output */
    int32_t *wz;                   /* W_SHIFT / W_COMP: M weight zero points */
    /* Without VNNI (see above): parts 2 when W_COMP's weights are split in
     * halves (channels j and mg + j of a group), else 1; flip when the s8
     * source runs as u8, through xu (the flipped x). */
    int parts, flip;
    uint8_t *xu;
    int64_t x_elems;
    /* x's zero point folded into the bias where no padding reads it (a
     * matrix product, a convolution without padding): Σ (x - xz) w =
     * Σ x w - xz Σ w, so oneDNN runs without a source zero point (its
     * faster kernels) and the bias it adds is bias[m] + xcomp[m], made per
     * run into a buffer of the slice's own (fbias) as the bias may vary. */
    int32_t *xcomp, *fbias;
    /* W_COMP: the int32 results [rows, G * (mg + 1)] and their requantisation */
    int32_t *acc;
    int64_t rows, sp;              /* rows = N * sp; sp the output's spatial size */
    int64_t y_elems;               /* the output's elements */
    float *scale;
    int64_t num_scales;
    int32_t y_zp;
    int y_signed, clip, plain_out;
    float lo, hi;
    /* A matrix product of enough rows is cut into nslice slices of rows_q
     * rows, one per block of cge's pool, each a one-thread run of the one
     * primitive with memories and stream of its own: oneDNN's
     * OpenMP team is not started (as MatMulBF16; on the shared machine its
     * spinning workers made the int8 encoder 8x slower at 2 threads). */
    int nslice;
    int64_t rows_q, K, Mo;
    /* A channels-last convolution of one image is cut the same way, into
     * bands of output rows (the outermost spatial dim): each band is a
     * primitive of its own (its own input rows and padding; the bands share
     * the packed weights, whose layout the first band chose), run on one
     * thread at byte offsets into x and y (conv_slices set). */
    int conv_slices;
    /* Or cut by output channels (chan_slices: a matrix product of too few
     * rows, a convolution whose weights outweigh its input, as resnet50's
     * 7x7 and 14x14 layers): every slice reads all of x and only its own
     * channels' weights, packed apart (wei_block), and writes its columns
     * of y (strided: y_off is m0 bytes), with its own scales and bias. */
    int chan_slices;
    struct qmm_slot {
        dnnl_stream_t stream;
        dnnl_memory_t src, dst, wei, bias, scratch;
        size_t scratch_bytes;      /* taken from the running thread's buffer */
        dnnl_primitive_desc_t pd;  /* a band's own (band 0: c->pd) */
        dnnl_primitive_t prim;
        int64_t x_off, y_off, r0, r1; /* bytes into x and y; its rows of y */
        int64_t m0, ms;            /* chan_slices: its output channels [m0, m0 + ms) */
        int64_t spots;             /* a convolution's: y positions, its ms channels each
                                    * made dense after the scratch, then copied */
        dnnl_memory_t wei_user;    /* chan_slices, own_wei: its plain weights, their packing */
        dnnl_primitive_t r_wei;
        void *wei_block;
        int own_wei;               /* a band whose weights are packed apart */
    } slot[QMM_MAX_SLICES];
};

void cge__dnnl_qconv_destroy(cge__dnnl_qconv *c)
{
    if (!c)
        return;
    dnnl_memory_t mems[] = {c->src, c->wei, c->bias, c->dst, c->src_user, c->dst_user, c->wei_user};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        dnnl_memory_destroy(mems[i]);
    dnnl_primitive_destroy(c->r_src);
    dnnl_primitive_destroy(c->r_dst);
    dnnl_primitive_destroy(c->r_wei);
    dnnl_primitive_destroy(c->prim);
    dnnl_primitive_desc_destroy(c->pd);
    cge_kernel_shared_release(c->wei_block);
    dnnl_stream_destroy(c->stream);
    dnnl_engine_destroy(c->engine);
    for (int i = 0; i < QMM_MAX_SLICES; i++) {
        struct qmm_slot *q = &c->slot[i];
        dnnl_memory_t m[] = {q->src, q->dst, q->wei, q->bias, q->scratch, q->wei_user};
        for (size_t k = 0; k < sizeof m / sizeof m[0]; k++)
            dnnl_memory_destroy(m[k]);
        dnnl_stream_destroy(q->stream);
        dnnl_primitive_destroy(q->prim);
        dnnl_primitive_desc_destroy(q->pd);
        dnnl_primitive_destroy(q->r_wei);
        cge_kernel_shared_release(q->wei_block);
    }
    free(c->wz);
    free(c->xu);
    free(c->xcomp);
    free(c->fbias);
    free(c->acc);
    free(c->scale);
    free(c);
}

/* Output channel of weight element i ([M, per] for a convolution, [K, M]
 * for a matmul). */
static int64_t w_channel(const cge__dnnl_qconv *c, int64_t i)
{
    return c->matmul ? i % c->M : i / c->per;
}

static int32_t w_value(const cge__dnnl_qconv *c, const void *w, int64_t i)
{
    return cge__q8_load(w, !c->w_u8, i);
}

/* c->mode and c->wz from d: the zero points, and whether w - w_zp fits s8. */
static cge_status weight_mode(const cge__dnnl_qconv_desc *d, cge__dnnl_qconv *c)
{
    c->mode = W_PLAIN;
    int any = c->w_u8;
    for (int64_t m = 0; d->w_zp && m < d->num_w_zp && !any; m++)
        any = cge__q8_load(d->w_zp, !d->w_zp_u8, m) != 0;
    if (!any)
        return CGE_OK;
    if (!d->w || (d->w_zp && d->num_w_zp != 1 && d->num_w_zp != c->M))
        return CGE_ERR_UNSUPPORTED;
    c->wz = malloc(sizeof(int32_t) * (size_t)c->M);
    if (!c->wz)
        return CGE_ERR_NO_MEMORY;
    for (int64_t m = 0; m < c->M; m++)
        c->wz[m] = d->w_zp ? cge__q8_load(d->w_zp, !d->w_zp_u8, d->num_w_zp == 1 ? 0 : m) : 0;
    c->mode = W_SHIFT;
    for (int64_t i = 0, n = c->M * c->per; i < n && c->mode == W_SHIFT; i++) {
        int32_t v = w_value(c, d->w, i) - c->wz[w_channel(c, i)];
        if (v < -128 || v > 127)
            c->mode = W_COMP;
    }
    return CGE_OK;
}

/* The s8 weight oneDNN gets for element i in c->mode (before any split). */
static int32_t onednn_weight(const cge__dnnl_qconv *c, const void *w, int64_t i)
{
    if (c->mode == W_PLAIN)
        return w_value(c, w, i);
    if (c->mode == W_SHIFT)
        return w_value(c, w, i) - c->wz[w_channel(c, i)];
    return w_value(c, w, i) - (c->w_u8 ? 128 : 0);
}

/* c->flip and c->parts: what keeps oneDNN's sums exact on this CPU. */
static cge_status exact_mode(const cge__dnnl_qconv_desc *d, cge__dnnl_qconv *c)
{
    c->parts = 1;
    c->flip = 0;
    if (cge__cpu_has(CGE_CPU_AVX512VNNI))
        return CGE_OK;
    c->flip = d->x_signed;
    /* a depthwise convolution (one input and one output channel per group)
     * runs oneDNN's depthwise kernel, which widens every product to int32
     * (no pairs): exact for u8 sources whatever the weights */
    if (!d->matmul && c->G > 1 && c->mg == 1 && d->C == c->G)
        return CGE_OK;
    int fits = d->w != NULL;
    for (int64_t i = 0, n = c->M * c->per; fits && i < n; i++) {
        int32_t v = onednn_weight(c, d->w, i);
        fits = v >= -64 && v <= 64;
    }
    if (fits)
        return CGE_OK;
    if (!c->wz && !(c->wz = calloc((size_t)c->M, sizeof(int32_t))))
        return CGE_ERR_NO_MEMORY;
    c->mode = W_COMP;
    c->parts = 2;
    return CGE_OK;
}

/* W_COMP's oneDNN output channels per group: mg (twice when split), the
 * all-ones one (at mg * parts), and for a split one-group layer zero channels
 * up to a multiple of 16, oneDNN's AVX2 output block (its tail loops are
 * slower). */
static int64_t comp_channels(const cge__dnnl_qconv *c)
{
    int64_t n = c->mg * c->parts + 1;
    return c->parts > 1 && c->G == 1 ? (n + 15) / 16 * 16 : n;
}

/* Part p of a split weight v (parts 2): floor(v / 2) and the rest. */
static int8_t weight_part(int32_t v, int parts, int p)
{
    if (parts == 1)
        return (int8_t)v;
    int32_t hi = v >= 0 ? v / 2 : -((1 - v) / 2);
    return (int8_t)(p ? v - hi : hi);
}

/* W_COMP's requantisation state: what oneDNN would have done after the sum. */
static cge_status comp_state(const cge__dnnl_qconv_desc *d, cge__dnnl_qconv *c)
{
    c->sp = 1;
    for (int i = 0; !d->matmul && i < d->nsp; i++)
        c->sp *= d->out[3 - d->nsp + i];
    c->rows = d->N * c->sp;
    /* the int32 sums of every row, whatever the slices */
    size_t bytes = sizeof(int32_t) * (size_t)c->rows * (size_t)c->Mo;
    c->scale = malloc(sizeof(float) * (size_t)d->num_scales);
    c->acc = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!c->scale || !c->acc)
        return CGE_ERR_NO_MEMORY;
    memcpy(c->scale, d->scale, sizeof(float) * (size_t)d->num_scales);
    c->num_scales = d->num_scales;
    c->y_zp = d->y_zp;
    c->y_signed = d->y_signed;
    c->clip = d->clip;
    c->lo = d->lo;
    c->hi = d->hi;
    c->plain_out = !d->matmul && !d->channels_last;
    return CGE_OK;
}

/* Output rows [o0, o1) of the outermost spatial dim as a convolution of
 * their own: the input rows [i0, i1) they read, clipped to x, and the
 * padding left before (pt) and after (pr) them. 0 when they read no row of
 * x (all padding), which oneDNN cannot describe. */
typedef struct band {
    int64_t o0, o1, i0, i1, pt, pr;
} band;

static int band_of(const cge__dnnl_qconv_desc *d, int64_t o0, int64_t o1, band *b)
{
    int off = 3 - d->nsp;
    int64_t s = d->s[off], k = (d->k[off] - 1) * d->d[off] + 1, in = d->in[off];
    int64_t lo = o0 * s - d->pb[off], hi = (o1 - 1) * s - d->pb[off] + k;
    b->o0 = o0;
    b->o1 = o1;
    b->i0 = lo < 0 ? 0 : lo;
    b->i1 = hi > in ? in : hi;
    b->pt = b->i0 - lo;
    b->pr = hi - b->i1;
    return b->i1 > b->i0;
}

/* The convolution (the whole layer, band b of it, or with ms > 0 the ms
 * output channels of a channel slice, dense: with y's strides oneDNN takes
 * its reference loops) with weights `wfix` (NULL: the layout oneDNN
 * prefers); smd / dmd get the caller's layouts of x and y, wmd the plain
 * weights'. */
static int conv_op(const cge__dnnl_qconv_desc *d, const cge__dnnl_qconv *c, const band *b,
                   int64_t ms, const dnnl_memory_desc_t *wfix, const dnnl_memory_desc_t *bmd,
                   dnnl_memory_desc_t *smd, dnnl_memory_desc_t *dmd, dnnl_memory_desc_t *wmd,
                   dnnl_convolution_desc_t *op)
{
    int comp = c->mode == W_COMP;
    dnnl_data_type_t xt = d->x_signed ? dnnl_s8 : dnnl_u8;
    dnnl_data_type_t yt = comp ? dnnl_s32 : d->y_signed ? dnnl_s8 : dnnl_u8;
    int n = d->nsp, off = 3 - n, rank = n + 2, wr = c->G > 1 ? n + 3 : n + 2;
    int64_t mg = comp ? comp_channels(c) : c->mg;
    dnnl_dims_t sd = {d->N, d->C}, dd = {d->N, c->G * mg}, wd, st, dil, pl, pr;
    if (c->G > 1) {
        wd[0] = c->G;
        wd[1] = mg;
        wd[2] = d->C / c->G;
    } else {
        wd[0] = mg;
        wd[1] = d->C;
    }
    for (int i = 0; i < n; i++) {
        sd[2 + i] = d->in[off + i];
        dd[2 + i] = d->out[off + i];
        wd[wr - n + i] = d->k[off + i];
        st[i] = d->s[off + i];
        dil[i] = d->d[off + i] - 1;
        pl[i] = d->pb[off + i];
        pr[i] = d->pe[off + i];
    }
    if (b) {
        sd[2] = b->i1 - b->i0;
        dd[2] = b->o1 - b->o0;
        pl[0] = b->pt;
        pr[0] = b->pr;
    }
    if (ms > 0) {
        dd[1] = ms;
        wd[0] = ms;
    }
    static const dnnl_format_tag_t plain[] = {dnnl_ncw, dnnl_nchw, dnnl_ncdhw};
    static const dnnl_format_tag_t last[] = {dnnl_nwc, dnnl_nhwc, dnnl_ndhwc};
    static const dnnl_format_tag_t w1[] = {dnnl_oiw, dnnl_oihw, dnnl_oidhw};
    static const dnnl_format_tag_t wg[] = {dnnl_goiw, dnnl_goihw, dnnl_goidhw};
    /* Plain activations: oneDNN's int8 kernels want channels-last or
     * blocked data, so the primitive chooses and the data is reordered.
     * The int32 sums of W_COMP are channels-last, read by cge's loop. */
    dnnl_format_tag_t at = d->channels_last ? last[n - 1] : dnnl_format_tag_any;
    dnnl_format_tag_t yplain = comp || d->channels_last ? last[n - 1] : plain[n - 1];
    dnnl_memory_desc_t sa, da, wany;
    return dnnl_memory_desc_init_by_tag(smd, rank, sd, xt,
                                        d->channels_last ? last[n - 1] : plain[n - 1]) ==
               dnnl_success &&
           dnnl_memory_desc_init_by_tag(dmd, rank, dd, yt, yplain) == dnnl_success &&
           dnnl_memory_desc_init_by_tag(&sa, rank, sd, xt, at) == dnnl_success &&
           dnnl_memory_desc_init_by_tag(&da, rank, dd, yt, comp ? yplain : at) == dnnl_success &&
           dnnl_memory_desc_init_by_tag(wmd, wr, wd, dnnl_s8, c->G > 1 ? wg[n - 1] : w1[n - 1]) ==
               dnnl_success &&
           (wfix || dnnl_memory_desc_init_by_tag(&wany, wr, wd, dnnl_s8, dnnl_format_tag_any) ==
                        dnnl_success) &&
           dnnl_dilated_convolution_forward_desc_init(
               op, dnnl_forward_inference, dnnl_convolution_direct, &sa, wfix ? wfix : &wany,
               c->has_bias ? bmd : NULL, &da, st, dil, pl, pr) == dnnl_success;
}

/* Whether no padding is read: every pad of a convolution 0 (a matrix product
 * has none). */
static int unpadded(const cge__dnnl_qconv_desc *d)
{
    for (int i = 0; !d->matmul && i < 3; i++)
        if (d->pb[i] || d->pe[i])
            return 0;
    return 1;
}

/* -xz Σ_k w[m, k] per output, over the s8 weights oneDNN gets, in int32 as
 * the reference loops sum (wrapping alike). */
static int32_t *x_compensation(const cge__dnnl_qconv_desc *d, const cge__dnnl_qconv *c)
{
    int32_t *t = calloc((size_t)c->M, sizeof(int32_t));
    if (!t)
        return NULL;
    uint32_t *u = (uint32_t *)t;
    for (int64_t i = 0, n = c->M * c->per; i < n; i++) {
        int64_t m = w_channel(c, i);
        u[m] += (uint32_t)(w_value(c, d->w, i) - (c->wz ? c->wz[m] : 0));
    }
    for (int64_t m = 0; m < c->M; m++)
        u[m] *= (uint32_t)-d->x_zp;
    return t;
}

/* The bias oneDNN adds: the caller's, and with x's zero point folded, plus
 * xcomp, into buffer `slice`. */
static const int32_t *run_bias(cge__dnnl_qconv *c, const int32_t *bias, int64_t slice)
{
    if (!c->xcomp)
        return bias;
    uint32_t *f = (uint32_t *)c->fbias + slice * c->M;
    for (int64_t m = 0; m < c->M; m++)
        f[m] = (bias ? (uint32_t)bias[m] : 0u) + (uint32_t)c->xcomp[m];
    return (const int32_t *)f;
}

/* How many slices: a matrix product the most blocks up to the threads that
 * divide its rows evenly, at least 16 rows each (so that one primitive
 * serves all); a channels-last convolution of one image one band of output
 * rows per thread, each reading at least one row of x. */
/* A cut by output channels, one slice per thread: where the weights are what a slice reads most, so that
 * a cut by rows would have every thread read all of them (resnet50's
 * 3x3 512-channel layers: 2.4 MB of weights, 25 KB of input, and 7 rows,
 * 4 and 3 to two bands) or cannot be made (a classifier's one row). Not
 * for W_COMP (its extra channel per group) nor groups. */
static int plan_channels(const cge__dnnl_qconv_desc *d, cge__dnnl_qconv *c, int top)
{
    if (top < 2 || c->mode == W_COMP || c->G != 1 || c->M < 64 * top)
        return 0;
    double wbytes = (double)c->M * (double)c->per, xbytes = (double)d->C;
    if (d->matmul) {
        if (wbytes < 262144.0)
            return 0;
    } else {
        if (!d->channels_last || d->N != 1)
            return 0;
        for (int i = 0; i < d->nsp; i++)
            xbytes *= (double)d->in[3 - d->nsp + i];
        if (wbytes < 65536.0 || wbytes < xbytes)
            return 0;
    }
    /* ranges from multiples of 64 (oneDNN's output channel blocks: a slice
     * of 80 channels measured 8% more work than the layer's 160), each
     * within 1/8 of an even share */
    for (int i = 0; i < top; i++) {
        int64_t a = i ? (i * c->M / top + 32) / 64 * 64 : 0;
        int64_t b = i + 1 < top ? ((i + 1) * c->M / top + 32) / 64 * 64 : c->M;
        int64_t even = c->M / top;
        if (b - a < even - even / 8 || b - a > even + even / 8)
            return 0;
        c->slot[i].m0 = a;
        c->slot[i].ms = b - a;
    }
    c->nslice = top;
    c->chan_slices = 1;
    return 1;
}

/* `allow`: 1 bands of rows, 2 slices of channels (the first tried). */
static void plan_slices(const cge__dnnl_qconv_desc *d, cge__dnnl_qconv *c, band *bands,
                        int allow)
{
    int top = c->threads < QMM_MAX_SLICES ? c->threads : QMM_MAX_SLICES;
    c->nslice = 1;
    if (d->matmul) {
        for (int sl = top; sl > 1 && c->nslice == 1; sl--)
            if (d->N % sl == 0 && d->N / sl >= 16)
                c->nslice = sl;
        if (c->nslice == 1 && (allow & 2))
            plan_channels(d, c, top);
        return;
    }
    if ((allow & 2) && plan_channels(d, c, top))
        return;
    if (!(allow & 1) || !d->channels_last || d->N != 1)
        return;
    int64_t oh = d->out[3 - d->nsp];
    for (int sl = top < oh ? top : (int)oh; sl > 1; sl--) {
        int ok = 1;
        for (int i = 0; i < sl && ok; i++)
            ok = band_of(d, i * oh / sl, (i + 1) * oh / sl, &bands[i]);
        if (ok) {
            c->nslice = sl;
            c->conv_slices = 1;
            return;
        }
    }
}

/* Byte offsets into x and y (or W_COMP's sums) and the rows of y of slice i. */
static void slice_offsets(const cge__dnnl_qconv_desc *d, cge__dnnl_qconv *c, const band *b,
                          struct qmm_slot *q, int i)
{
    int64_t ysz = c->mode == W_COMP ? (int64_t)sizeof(int32_t) * c->Mo : c->M;
    if (!c->conv_slices) {
        q->r0 = i * c->rows_q;
        q->r1 = q->r0 + c->rows_q;
        q->x_off = q->r0 * c->K;
        q->y_off = q->r0 * ysz;
        return;
    }
    int off = 3 - d->nsp;
    int64_t xin = d->C, yin = 1; /* per row of the outermost spatial dim */
    for (int j = off + 1; j < 3; j++) {
        xin *= d->in[j];
        yin *= d->out[j];
    }
    q->r0 = b->o0 * yin;
    q->r1 = b->o1 * yin;
    q->x_off = b->i0 * xin;
    q->y_off = q->r0 * ysz;
}

/* Whether pd runs one of oneDNN's reference loops (which a band held to the
 * first band's weight layout may get: far slower than the whole layer). */
static int is_ref(const_dnnl_primitive_desc_t pd)
{
    const char *name = NULL;
    return dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) != dnnl_success ||
           !name || strstr(name, "ref");
}

/* Channel slice q's primitive (the layer's attributes with its own scales),
 * memories and the reorder that packs its weights. */
static int chan_slice(const cge__dnnl_qconv_desc *d, cge__dnnl_qconv *c, struct qmm_slot *q,
                      const_dnnl_primitive_attr_t attr, const char *avoid)
{
    dnnl_data_type_t xt = d->x_signed ? dnnl_s8 : dnnl_u8, yt = d->y_signed ? dnnl_s8 : dnnl_u8;
    dnnl_memory_desc_t smd, dmd, wmd, wany, bmd;
    union {
        dnnl_convolution_desc_t conv;
        dnnl_matmul_desc_t mm;
    } opd;
    int ok;
    if (d->matmul) {
        dnnl_dims_t sd = {d->N, d->C}, dd = {d->N, q->ms}, wd = {d->C, q->ms}, bd = {1, q->ms};
        dnnl_dims_t cols = {d->M, 1}; /* its columns of the [N, M] / [K, M] rows */
        ok = dnnl_memory_desc_init_by_tag(&smd, 2, sd, xt, dnnl_ab) == dnnl_success &&
             dnnl_memory_desc_init_by_strides(&dmd, 2, dd, yt, cols) == dnnl_success &&
             dnnl_memory_desc_init_by_strides(&wmd, 2, wd, dnnl_s8, cols) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&wany, 2, wd, dnnl_s8, dnnl_format_tag_any) ==
                 dnnl_success &&
             dnnl_memory_desc_init_by_tag(&bmd, 2, bd, dnnl_s32, dnnl_ab) == dnnl_success &&
             dnnl_matmul_desc_init(&opd.mm, &smd, &wany, c->has_bias ? &bmd : NULL, &dmd) ==
                 dnnl_success;
    } else {
        dnnl_dims_t bd = {q->ms};
        ok = dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_s32, dnnl_x) == dnnl_success &&
             conv_op(d, c, NULL, q->ms, NULL, &bmd, &smd, &dmd, &wmd, &opd.conv);
    }
    dnnl_primitive_attr_t a = NULL;
    const dnnl_memory_desc_t *qw = NULL, *spd = NULL;
    ok = ok && dnnl_primitive_attr_clone(&a, attr) == dnnl_success &&
         (d->num_scales == 1 ||
          dnnl_primitive_attr_set_output_scales(a, q->ms, 1 << 1, d->scale + q->m0) ==
              dnnl_success) &&
         cge__dnnl_pd_create(&q->pd, &opd, a, c->engine, avoid) == dnnl_success &&
         !is_ref(q->pd) && dnnl_primitive_create(&q->prim, q->pd) == dnnl_success &&
         (qw = dnnl_primitive_desc_query_md(q->pd, dnnl_query_weights_md, 0)) != NULL &&
         (spd = dnnl_primitive_desc_query_md(q->pd, dnnl_query_scratchpad_md, 0)) != NULL &&
         dnnl_stream_create(&q->stream, c->engine, dnnl_stream_default_flags) == dnnl_success &&
         dnnl_memory_create(&q->src, dnnl_primitive_desc_query_md(q->pd, dnnl_query_src_md, 0),
                            c->engine, DNNL_MEMORY_NONE) == dnnl_success &&
         dnnl_memory_create(&q->dst, dnnl_primitive_desc_query_md(q->pd, dnnl_query_dst_md, 0),
                            c->engine, DNNL_MEMORY_NONE) == dnnl_success &&
         dnnl_memory_create(&q->wei, qw, c->engine, DNNL_MEMORY_NONE) == dnnl_success &&
         dnnl_memory_create(&q->wei_user, &wmd, c->engine, DNNL_MEMORY_NONE) == dnnl_success &&
         cge__dnnl_make_reorder(c->engine, &wmd, qw, &q->r_wei) &&
         dnnl_memory_create(&q->bias, &bmd, c->engine, DNNL_MEMORY_NONE) == dnnl_success &&
         dnnl_memory_create(&q->scratch, spd, c->engine, DNNL_MEMORY_NONE) == dnnl_success;
    dnnl_primitive_attr_destroy(a);
    q->scratch_bytes = spd ? (dnnl_memory_desc_get_size(spd) + 63) & ~(size_t)63 : 0;
    q->spots = 0;
    for (int i = 0; !d->matmul && i < d->nsp; i++)
        q->spots = (q->spots ? q->spots : 1) * d->out[3 - d->nsp + i];
    q->x_off = 0;
    q->y_off = q->m0;
    q->r0 = 0;
    q->r1 = d->N;
    return ok;
}

static cge_status create(const cge__dnnl_qconv_desc *d, int allow, cge__dnnl_qconv **out)
{
    *out = NULL;
    if ((!d->matmul && (d->nsp < 1 || d->nsp > 3)) || d->G < 1 || d->num_scales < 1 ||
        d->M % d->G || d->C % d->G)
        return CGE_ERR_UNSUPPORTED;
    cge__dnnl_qconv *c = calloc(1, sizeof *c);
    if (!c)
        return CGE_ERR_NO_MEMORY;
    c->threads = d->threads > 0 ? d->threads : 1;
    c->matmul = d->matmul;
    c->w_u8 = d->w_u8;
    c->G = d->matmul ? 1 : d->G;
    c->M = d->M;
    c->mg = d->M / c->G;
    c->per = d->C / c->G;
    for (int i = 0; !d->matmul && i < d->nsp; i++)
        c->per *= d->k[3 - d->nsp + i];
    cge_status made = weight_mode(d, c);
    if (!made)
        made = exact_mode(d, c);
    if (made) {
        cge__dnnl_qconv_destroy(c);
        return made;
    }
    const cge__dnnl_qconv_desc *orig = d;
    cge__dnnl_qconv_desc flipped;
    if (c->flip) { /* oneDNN sees u8 x + 128 and x_zp + 128 */
        flipped = *d;
        flipped.x_signed = 0;
        flipped.x_zp = d->x_zp + 128;
        d = &flipped;
        c->x_elems = d->N * d->C;
        for (int i = 0; !d->matmul && i < d->nsp; i++)
            c->x_elems *= d->in[3 - d->nsp + i];
        /* one flipped copy of x: no bands (they overlap) nor channel
         * slices (each reads all of x); a matmul's row slices flip their
         * own rows */
        allow = d->matmul ? allow & 1 : 0;
        if (!(c->xu = malloc(c->x_elems > 0 ? (size_t)c->x_elems : 1))) {
            cge__dnnl_qconv_destroy(c);
            return CGE_ERR_NO_MEMORY;
        }
    }
    int comp = c->mode == W_COMP, mg = (int)(comp ? comp_channels(c) : c->mg);
    int fold = d->x_zp && !comp && d->w && unpadded(d);
    if (fold && !(c->xcomp = x_compensation(d, c))) {
        cge__dnnl_qconv_destroy(c);
        return CGE_ERR_NO_MEMORY;
    }
    c->has_bias = (d->has_bias || fold) && !comp;
    int saved = cge__dnnl_omp_enter(c->threads);
    dnnl_data_type_t xt = d->x_signed ? dnnl_s8 : dnnl_u8;
    dnnl_data_type_t yt = comp ? dnnl_s32 : d->y_signed ? dnnl_s8 : dnnl_u8;
    dnnl_memory_desc_t smd, dmd, wmd, wany, bmd;
    dnnl_dims_t bd = {d->M};
    union {
        dnnl_convolution_desc_t conv;
        dnnl_matmul_desc_t mm;
    } opd;
    band bands[QMM_MAX_SLICES];
    c->K = d->C;
    c->Mo = c->G * mg; /* oneDNN's output channels */
    c->y_elems = d->N * d->M;
    for (int i = 0; !d->matmul && i < d->nsp; i++)
        c->y_elems *= d->out[3 - d->nsp + i];
    plan_slices(d, c, bands, allow);
    c->rows_q = c->chan_slices ? d->N : d->N / c->nslice;
    /* A product of too few rows to slice and little work (a classifier's
     * one row): one thread, where starting oneDNN's team costs more than
     * it saves and on a loaded machine its spinning takes the cores. */
    if (d->matmul && c->nslice == 1 && (double)d->N * (double)d->C * (double)d->M < 4e6)
        c->threads = 1;
    int ok = dnnl_engine_create(&c->engine, dnnl_cpu, 0) == dnnl_success &&
             dnnl_stream_create(&c->stream, c->engine, dnnl_stream_default_flags) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_s32, dnnl_x) == dnnl_success;
    if (ok && d->matmul) {
        /* a [M] bias is [1, M] to the matmul */
        dnnl_dims_t sd = {c->rows_q, d->C}, dd = {c->rows_q, c->Mo}, wd = {d->C, c->Mo},
                    b2 = {1, d->M};
        ok = dnnl_memory_desc_init_by_tag(&smd, 2, sd, xt, dnnl_ab) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&dmd, 2, dd, yt, dnnl_ab) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&wmd, 2, wd, dnnl_s8, dnnl_ab) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&wany, 2, wd, dnnl_s8, dnnl_format_tag_any) ==
                 dnnl_success &&
             dnnl_memory_desc_init_by_tag(&bmd, 2, b2, dnnl_s32, dnnl_ab) == dnnl_success &&
             dnnl_matmul_desc_init(&opd.mm, &smd, &wany, c->has_bias ? &bmd : NULL, &dmd) ==
                 dnnl_success;
    } else if (ok) {
        ok = conv_op(d, c, c->conv_slices ? &bands[0] : NULL, 0, NULL, &bmd, &smd, &dmd, &wmd,
                     &opd.conv);
    }
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    const dnnl_memory_desc_t *cs, *cw, *cd;
    int dst_dim = 1; /* channels are dst dim 1 for both (a matmul's columns) */
    /* AMX tiles take 64 bytes of K per step: with a shorter reduction (the
     * 1x1 convolutions of 16 to 32 channels of mobilenet_v2) oneDNN's AMX
     * kernels measured up to 1.5x slower than its AVX512-VNNI ones. From
     * K = 64 on AMX wins (one thread, the models' shapes, same process:
     * 64->256 at 56x56 205 against 249-263 us, 64->64 52 against 60-68,
     * 64->384 at 14x14 21 against 23-26, 96->576 37-45 against 43-50). */
    const char *avoid = c->per < 64 ? "amx" : NULL;
    ok = ok && dnnl_primitive_attr_create(&attr) == dnnl_success &&
         (c->nslice == 1 || dnnl_primitive_attr_set_scratchpad_mode(
                                attr, dnnl_scratchpad_mode_user) == dnnl_success) &&
         (comp || dnnl_primitive_attr_set_output_scales(attr, d->num_scales,
                                                        d->num_scales > 1 ? 1 << dst_dim : 0,
                                                        d->scale) == dnnl_success) &&
         (!d->x_zp || fold ||
          dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_SRC, 1, 0, &d->x_zp) ==
              dnnl_success) &&
         dnnl_post_ops_create(&po) == dnnl_success &&
         /* round before the zero point is added, as QLinearConv's reference
          * loops (and ONNX Runtime) do: rint(a) + z, not rint(a + z), which
          * differs where a + z loses a's low bits or z is odd at a tie. The
          * zero point is a post-op of its own, not oneDNN's destination zero
          * point: with that, oneDNN takes its older (non-brgemm) kernels,
          * measured 10-40% slower on resnet50's and mobilenet_v2's shapes. */
         (comp || !d->y_zp ||
          dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_round, 0.0f, 0.0f) == dnnl_success) &&
         (comp || !d->clip ||
          dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip, d->lo, d->hi) == dnnl_success) &&
         (comp || !d->y_zp ||
          dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_linear, 1.0f, (float)d->y_zp) ==
              dnnl_success) &&
         dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success &&
         cge__dnnl_pd_create(&c->pd, &opd, attr, c->engine, avoid) == dnnl_success &&
         /* channel slices run only their own primitives and reorders */
         (c->chan_slices || dnnl_primitive_create(&c->prim, c->pd) == dnnl_success) &&
         (cs = dnnl_primitive_desc_query_md(c->pd, dnnl_query_src_md, 0)) != NULL &&
         (cw = dnnl_primitive_desc_query_md(c->pd, dnnl_query_weights_md, 0)) != NULL &&
         (cd = dnnl_primitive_desc_query_md(c->pd, dnnl_query_dst_md, 0)) != NULL &&
         cge__dnnl_bind(c->engine, &smd, cs, &c->src, &c->src_user, &c->r_src, NULL) &&
         cge__dnnl_bind(c->engine, &dmd, cd, &c->dst, &c->dst_user, NULL, &c->r_dst) &&
         dnnl_memory_create(&c->wei_user, &wmd, c->engine, DNNL_MEMORY_NONE) == dnnl_success &&
         (c->chan_slices || cge__dnnl_make_reorder(c->engine, &wmd, cw, &c->r_wei)) &&
         dnnl_memory_create(&c->bias, &bmd, c->engine, DNNL_MEMORY_NONE) == dnnl_success &&
         (!comp || comp_state(d, c) == CGE_OK);
    for (int i = 0; ok && c->chan_slices && i < c->nslice; i++)
        ok = chan_slice(d, c, &c->slot[i], attr, avoid);
    for (int i = 0; ok && c->nslice > 1 && !c->chan_slices && i < c->nslice; i++) {
        struct qmm_slot *q = &c->slot[i];
        dnnl_primitive_desc_t pd = c->pd;
        const dnnl_memory_desc_t *qwm = cw;
        if (c->conv_slices && i > 0) {
            /* every band packs its weights as the first band chose; where
             * oneDNN serves that layout only with a reference loop (or not
             * at all: the 7x7 layers of mobilenet_v2, a band of 3 rows and
             * one of 4), the band takes the layout it prefers and packs its
             * own copy (own_wei) */
            dnnl_memory_desc_t s2, d2, w2;
            const dnnl_memory_desc_t *qw = NULL;
            ok = conv_op(d, c, &bands[i], 0, cw, &bmd, &s2, &d2, &w2, &opd.conv) &&
                 cge__dnnl_pd_create(&q->pd, &opd, attr, c->engine, avoid) == dnnl_success &&
                 (qw = dnnl_primitive_desc_query_md(q->pd, dnnl_query_weights_md, 0)) != NULL &&
                 dnnl_memory_desc_equal(qw, cw) && !is_ref(q->pd);
            if (!ok) {
                dnnl_primitive_desc_destroy(q->pd);
                q->pd = NULL;
                ok = conv_op(d, c, &bands[i], 0, NULL, &bmd, &s2, &d2, &w2, &opd.conv) &&
                     cge__dnnl_pd_create(&q->pd, &opd, attr, c->engine, avoid) == dnnl_success &&
                     (qw = dnnl_primitive_desc_query_md(q->pd, dnnl_query_weights_md, 0)) != NULL &&
                     !is_ref(q->pd) &&
                     dnnl_memory_create(&q->wei_user, &w2, c->engine, DNNL_MEMORY_NONE) ==
                         dnnl_success &&
                     cge__dnnl_make_reorder(c->engine, &w2, qw, &q->r_wei);
                q->own_wei = ok;
                qwm = qw;
            }
            ok = ok && dnnl_primitive_create(&q->prim, q->pd) == dnnl_success;
            pd = q->pd;
        }
        const dnnl_memory_desc_t *spd = ok ? dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0) : NULL;
        size_t sb = spd ? dnnl_memory_desc_get_size(spd) : 0;
        ok = spd && dnnl_stream_create(&q->stream, c->engine, dnnl_stream_default_flags) ==
                        dnnl_success &&
             dnnl_memory_create(&q->src, dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0),
                                c->engine, DNNL_MEMORY_NONE) == dnnl_success &&
             dnnl_memory_create(&q->dst, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0),
                                c->engine, DNNL_MEMORY_NONE) == dnnl_success &&
             dnnl_memory_create(&q->wei, qwm, c->engine, DNNL_MEMORY_NONE) == dnnl_success &&
             dnnl_memory_create(&q->bias, &bmd, c->engine, DNNL_MEMORY_NONE) == dnnl_success &&
             dnnl_memory_create(&q->scratch, spd, c->engine, DNNL_MEMORY_NONE) == dnnl_success;
        q->scratch_bytes = sb;
        slice_offsets(d, c, &bands[i], q, i);
    }
    if (ok && c->xcomp)
        ok = (c->fbias = malloc(sizeof(int32_t) * (size_t)(c->M * c->nslice))) != NULL;
    dnnl_primitive_attr_destroy(attr);
    dnnl_post_ops_destroy(po);
    cge__dnnl_omp_leave(saved);
    if (!ok) {
        int banded = c->conv_slices, chan = c->chan_slices;
        cge__dnnl_qconv_destroy(c);
        /* channel slices oneDNN serves badly or not at all: bands of rows;
         * bands it does not: the whole layer, on its OpenMP team */
        return chan ? create(orig, allow & 1, out) : banded ? create(orig, 0, out)
                                                            : CGE_ERR_UNSUPPORTED;
    }
    if (qconv_trace())
        fprintf(stderr, "cge qconv: %s %s%s%s\n", c->matmul ? "matmul" : "conv",
                c->parts > 1 ? "split" : "plain", c->flip ? " u8-flip" : "",
                cge__cpu_has(CGE_CPU_AVX512VNNI) ? " vnni" : "");
    *out = c;
    return CGE_OK;
}

cge_status cge__dnnl_qconv_create(const cge__dnnl_qconv_desc *d, cge__dnnl_qconv **out)
{
    /* A matrix product too short to cut by rows is cut by columns (the
     * classifier). A convolution is cut by rows: its channel slices
     * (CGE_QCONV_CHANNEL_SLICES=1) measured slower on a quiet machine
     * (resnet50 int8 10.9 ms against 6.6-10.7 by rows, 2 threads: each slice
     * packs its own weights and copies its block into y), so they are an
     * option, kept for the comparison and for machines with more cores. */
    const char *cs = getenv("CGE_QCONV_CHANNEL_SLICES");
    bool slices = d->matmul || (cs && !strcmp(cs, "1"));
    return create(d, slices ? 3 : 1, out);
}

/* The s8 weights oneDNN packs, in their plain layout, derived from w. */
static int8_t *derived_weights(const cge__dnnl_qconv *c, const void *w)
{
    int comp = c->mode == W_COMP;
    int64_t n = (comp ? c->G * comp_channels(c) : c->M) * c->per;
    int8_t *t = calloc(n > 0 ? (size_t)n : 1, 1);
    if (!t)
        return NULL;
    if (!comp) {
        for (int64_t i = 0; i < c->M * c->per; i++)
            t[i] = (int8_t)(w_value(c, w, i) - c->wz[w_channel(c, i)]);
        return t;
    }
    int32_t shift = c->w_u8 ? 128 : 0;
    int np = c->parts;
    if (c->matmul) { /* [K, M * parts + 1]: the last column all ones */
        int64_t cols = comp_channels(c);
        for (int64_t k = 0; k < c->per; k++) {
            for (int64_t m = 0; m < c->M; m++)
                for (int p = 0; p < np; p++)
                    t[k * cols + p * c->M + m] =
                        weight_part(w_value(c, w, k * c->M + m) - shift, np, p);
            t[k * cols + c->M * np] = 1;
        }
        return t;
    }
    /* [G, mg * parts + 1, per]: each group's last output all ones */
    int64_t mo = comp_channels(c);
    for (int64_t g = 0; g < c->G; g++) {
        int8_t *tg = t + g * mo * c->per;
        for (int64_t j = 0; j < c->mg; j++)
            for (int p = 0; p < np; p++)
                for (int64_t e = 0; e < c->per; e++)
                    tg[(p * c->mg + j) * c->per + e] = weight_part(
                        w_value(c, w, (g * c->mg + j) * c->per + e) - shift, np, p);
        memset(tg + c->mg * np * c->per, 1, (size_t)c->per);
    }
    return t;
}

/* Slot q's own weights (a channel slice's, a band's of its own layout qw)
 * packed from `from`, shared through ctx's cache under `key`. */
static cge_status pack_slot(cge__dnnl_qconv *c, const cge_kernel_ctx *ctx, struct qmm_slot *q,
                            const dnnl_memory_desc_t *qw, const void *w, const void *from,
                            const void *key, size_t key_bytes)
{
    void *block = NULL;
    dnnl_memory_t m = NULL;
    cge_status st = cge__dnnl_pack_shared(ctx, c->engine, c->stream, q->r_wei, q->wei_user, qw, w,
                                          from, key, key_bytes, 1, &block, &m);
    if (!st) {
        dnnl_memory_destroy(q->wei);
        cge_kernel_shared_release(q->wei_block);
        q->wei = m;
        q->wei_block = block;
    }
    return st;
}

cge_status cge__dnnl_qconv_prepack(cge__dnnl_qconv *c, const cge_kernel_ctx *ctx, const void *w)
{
    if (!c || !w)
        return CGE_ERR_INVALID_ARG;
    const dnnl_memory_desc_t *cw = dnnl_primitive_desc_query_md(c->pd, dnnl_query_weights_md, 0);
    if (!cw)
        return CGE_ERR_INTERNAL;
    /* The packed bytes depend on W, the chosen layout (the descriptor, which
     * also records the compensation oneDNN folds in for zero points) and,
     * when derived, on how: the mode and the zero points. */
    struct {
        dnnl_memory_desc_t md;
        int32_t mode, w_u8;
        uint64_t zp_hash;
        int64_t m0, ms; /* a channel slice's */
    } key;
    memset(&key, 0, sizeof key);
    key.md = *cw;
    key.mode = c->mode;
    key.w_u8 = c->w_u8;
    key.zp_hash = 1469598103934665603ull;
    for (int64_t m = 0; c->wz && m < c->M; m++)
        key.zp_hash = (key.zp_hash ^ (uint32_t)c->wz[m]) * 1099511628211ull;
    int8_t *derived = NULL;
    if (c->mode != W_PLAIN && !(derived = derived_weights(c, w)))
        return CGE_ERR_NO_MEMORY;
    const void *data = derived ? (const void *)derived : w;
    if (c->chan_slices) { /* each slice its own channels' weights */
        cge_status st = CGE_OK;
        for (int i = 0; i < c->nslice && !st; i++) {
            struct qmm_slot *q = &c->slot[i];
            const dnnl_memory_desc_t *qw = dnnl_primitive_desc_query_md(q->pd, dnnl_query_weights_md, 0);
            if (!qw) {
                st = CGE_ERR_INTERNAL;
                break;
            }
            key.md = *qw;
            key.m0 = q->m0;
            key.ms = q->ms;
            /* [M, per] rows of a convolution; [K, M] columns of a matmul */
            const char *from = (const char *)data + (c->matmul ? q->m0 : q->m0 * c->per);
            st = pack_slot(c, ctx, q, qw, w, from, &key, sizeof key);
        }
        free(derived);
        return st;
    }
    void *block = NULL;
    dnnl_memory_t m = NULL;
    cge_status st = cge__dnnl_pack_shared(ctx, c->engine, c->stream, c->r_wei, c->wei_user, cw, w,
                                          derived ? (const void *)derived : w, &key, sizeof key,
                                          c->threads, &block, &m);
    if (!st) {
        dnnl_memory_destroy(c->wei);
        cge_kernel_shared_release(c->wei_block);
        c->wei = m;
        c->wei_block = block;
    }
    /* bands with a layout of their own */
    for (int i = 1; !st && c->conv_slices && i < c->nslice; i++) {
        struct qmm_slot *q = &c->slot[i];
        const dnnl_memory_desc_t *qw = q->own_wei ? dnnl_primitive_desc_query_md(q->pd, dnnl_query_weights_md, 0) : NULL;
        if (!q->own_wei)
            continue;
        if (!qw) {
            st = CGE_ERR_INTERNAL;
            break;
        }
        key.md = *qw;
        st = pack_slot(c, ctx, q, qw, w, data, &key, sizeof key);
    }
    free(derived);
    return st;
}

/* W_COMP: y = saturate(clip(rint(float(acc + comp[m] * S + bias[m]) *
 * scale[m])) + y_zp), S the group's all-ones channel, in int32 as the
 * reference loops sum (wrapping alike). */
/* One group, y rows of M (channels-last, a matmul): the same operations in
 * loops the compiler vectorises. rint by the 1.5 * 2^23 trick (half to even,
 * as rintf in the default rounding mode) on values first held within 2^22,
 * past which every result saturates alike. */
static void comp_requantise_rows(const cge__dnnl_qconv *c, const int32_t *bias, void *y,
                                 int64_t r0, int64_t r1)
{
    int64_t M = c->M, mo = comp_channels(c);
    uint32_t shift = c->w_u8 ? 128u : 0u;
    const float big = 4194304.0f, magic = 12582912.0f, z = (float)c->y_zp;
    const float lo = c->clip ? c->lo : -big, hi = c->clip ? c->hi : big;
    const float ylo = c->y_signed ? -128.0f : 0.0f, yhi = c->y_signed ? 127.0f : 255.0f;
    const int two = c->parts > 1, per_m = c->num_scales > 1;
    for (int64_t r = r0; r < r1; r++) {
        const int32_t *a = c->acc + r * mo;
        uint32_t S = (uint32_t)a[M * c->parts];
        const int32_t *b2 = a + (two ? M : 0);
        int8_t *ys = (int8_t *)y + r * M;
        uint8_t *yu = (uint8_t *)y + r * M;
        for (int64_t m = 0; m < M; m++) {
            uint32_t t = (uint32_t)a[m] + (two ? (uint32_t)b2[m] : 0u) +
                         (shift - (uint32_t)c->wz[m]) * S + (uint32_t)(bias ? bias[m] : 0);
            float v = (float)(int32_t)t * c->scale[per_m ? m : 0];
            v = v < -big ? -big : (v > big ? big : v);
            v = (v + magic) - magic;
            v = v < lo ? lo : (v > hi ? hi : v);
            v += z;
            v = v < ylo ? ylo : (v > yhi ? yhi : v);
            if (c->y_signed)
                ys[m] = (int8_t)(int32_t)v;
            else
                yu[m] = (uint8_t)(int32_t)v;
        }
    }
}

static void comp_requantise(const cge__dnnl_qconv *c, const int32_t *bias, void *y, int64_t r0,
                            int64_t r1)
{
    if (c->G == 1 && !c->plain_out) {
        comp_requantise_rows(c, bias, y, r0, r1);
        return;
    }
    int64_t mo = comp_channels(c), stride = c->G * mo;
    int32_t shift = c->w_u8 ? 128 : 0;
    float z = (float)c->y_zp;
    for (int64_t r = r0; r < r1; r++) {
        const int32_t *a = c->acc + r * stride;
        int64_t n = r / c->sp, s = r % c->sp;
        for (int64_t g = 0; g < c->G; g++) {
            const int32_t *ag = a + g * mo;
            uint32_t S = (uint32_t)ag[c->mg * c->parts];
            for (int64_t j = 0; j < c->mg; j++) {
                int64_t m = g * c->mg + j;
                uint32_t comp = (uint32_t)(shift - c->wz[m]);
                uint32_t sum = (uint32_t)ag[j] + (c->parts > 1 ? (uint32_t)ag[c->mg + j] : 0u);
                int32_t t = (int32_t)(sum + comp * S + (uint32_t)(bias ? bias[m] : 0));
                float v = rintf((float)t * c->scale[c->num_scales > 1 ? m : 0]);
                if (c->clip)
                    v = v < c->lo ? c->lo : (v > c->hi ? c->hi : v);
                int64_t o = c->plain_out ? (n * c->M + m) * c->sp + s : r * c->M + m;
                cge__q8_store_sat(y, c->y_signed, o, v + z);
            }
        }
    }
}

int64_t cge__dnnl_qconv_blocks(const cge__dnnl_qconv *c, int threads)
{
    (void)threads; /* fixed when the primitive was made */
    return c->nslice;
}

int cge__dnnl_qconv_block_span(const cge__dnnl_qconv *c, int64_t blk, int64_t nblk, int64_t *e0,
                               int64_t *e1)
{
    if (nblk != c->nslice || blk < 0 || blk >= nblk || c->chan_slices)
        return 0;
    if (c->nslice == 1) {
        *e0 = 0;
        *e1 = c->y_elems;
        return 1;
    }
    /* a slice's rows are y positions of all M channels (dense: matrix rows,
     * channels-last bands) */
    *e0 = c->slot[blk].r0 * c->M;
    *e1 = c->slot[blk].r1 * c->M;
    return 1;
}

/* The scratch of a slice, from a buffer of the running thread's own that
 * grows to the largest one asked (as oneDNN's own library-mode scratchpad):
 * a thread runs one slice at a time, and one buffer per thread of the pool
 * costs far less than one per slice of every layer. Freed at thread exit. */
typedef struct tscratch {
    void *p;
    size_t n;
} tscratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_key_ok;

static void scratch_free(void *v)
{
    tscratch *t = v;
    free(t->p);
    free(t);
}

static void scratch_init(void)
{
    scratch_key_ok = pthread_key_create(&scratch_key, scratch_free) == 0;
}

static void *thread_scratch(size_t n)
{
    pthread_once(&scratch_once, scratch_init);
    if (!scratch_key_ok)
        return NULL;
    tscratch *t = pthread_getspecific(scratch_key);
    if (!t) {
        if (!(t = calloc(1, sizeof *t)) || pthread_setspecific(scratch_key, t)) {
            free(t);
            return NULL;
        }
    }
    if (t->n < n || !t->p) {
        size_t bytes = ((n ? n : 1) + 63) & ~(size_t)63;
        void *p = aligned_alloc(64, bytes);
        if (!p)
            return NULL;
        free(t->p);
        t->p = p;
        t->n = bytes;
    }
    return t->p;
}

/* x[e0, e1) into c->xu as u8 (x + 128); c->xu. */
static const void *flip_x(cge__dnnl_qconv *c, const void *x, int64_t e0, int64_t e1)
{
    const uint8_t *s = x;
    for (int64_t e = e0; e < e1; e++)
        c->xu[e] = s[e] ^ 0x80u;
    return c->xu;
}

static int packed(const cge__dnnl_qconv *c)
{
    return c->chan_slices ? c->slot[0].wei_block != NULL : c->wei != NULL;
}

/* One slice (rows of a matrix product, a band of a convolution's output
 * rows, a range of output channels) on the calling thread. */
static cge_status run_slice(cge__dnnl_qconv *c, const void *x, const int32_t *bias, void *y,
                            int64_t blk)
{
    struct qmm_slot *q = &c->slot[blk];
    int comp = c->mode == W_COMP;
    void *w = NULL;
    bias = run_bias(c, bias, blk);
    if (c->flip) /* a matmul's rows */
        x = flip_x(c, x, q->x_off, q->x_off + c->rows_q * c->K);
    char *scratch = thread_scratch(q->scratch_bytes + (size_t)(q->spots * q->ms));
    char *dense = q->spots ? scratch + q->scratch_bytes : NULL;
    int saved = cge__dnnl_omp_enter(1);
    int ok = scratch && dnnl_memory_set_data_handle(q->scratch, scratch) == dnnl_success &&
             (c->chan_slices || q->own_wei ||
              (dnnl_memory_get_data_handle(c->wei, &w) == dnnl_success &&
               dnnl_memory_set_data_handle(q->wei, w) == dnnl_success)) &&
             dnnl_memory_set_data_handle(q->src, (char *)x + q->x_off) == dnnl_success &&
             dnnl_memory_set_data_handle(q->dst, dense ? dense
                                                 : (comp ? (char *)c->acc : (char *)y) + q->y_off) ==
                 dnnl_success &&
             dnnl_memory_set_data_handle(q->bias, bias ? (void *)(bias + q->m0) : NULL) ==
                 dnnl_success;
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, q->src}, {DNNL_ARG_WEIGHTS, q->wei},
                               {DNNL_ARG_DST, q->dst}, {DNNL_ARG_SCRATCHPAD, q->scratch},
                               {DNNL_ARG_BIAS, q->bias}};
    ok = ok && dnnl_primitive_execute(q->prim ? q->prim : c->prim, q->stream,
                                      bias && c->has_bias ? 5 : 4, args) == dnnl_success &&
         dnnl_stream_wait(q->stream) == dnnl_success;
    cge__dnnl_omp_leave(saved);
    for (int64_t p = 0; ok && dense && p < q->spots; p++) /* its channels of y */
        memcpy((char *)y + p * c->M + q->m0, dense + p * q->ms, (size_t)q->ms);
    if (ok && comp)
        comp_requantise(c, bias, y, q->r0, q->r1);
    return ok ? CGE_OK : CGE_ERR_INTERNAL;
}

cge_status cge__dnnl_qconv_run_block(cge__dnnl_qconv *c, const void *x, const int32_t *bias,
                                     void *y, int64_t blk, int64_t nblk)
{
    if (c->nslice > 1 && nblk == c->nslice)
        return packed(c) && blk < c->nslice ? run_slice(c, x, bias, y, blk) : CGE_ERR_INVALID_ARG;
    return blk == 0 ? cge__dnnl_qconv_run(c, x, bias, y) : CGE_OK;
}

cge_status cge__dnnl_qconv_run(cge__dnnl_qconv *c, const void *x, const int32_t *bias, void *y)
{
    if (!packed(c))
        return CGE_ERR_INVALID_ARG;
    if (c->nslice > 1) { /* every slice in turn */
        cge_status st = CGE_OK;
        for (int64_t b = 0; b < c->nslice && !st; b++)
            st = run_slice(c, x, bias, y, b);
        return st;
    }
    int comp = c->mode == W_COMP;
    bias = run_bias(c, bias, 0);
    if (c->flip)
        x = flip_x(c, x, 0, c->x_elems);
    int saved = cge__dnnl_omp_enter(c->threads);
    int ok = dnnl_memory_set_data_handle(c->r_src ? c->src_user : c->src, (void *)x) ==
                 dnnl_success &&
             dnnl_memory_set_data_handle(c->r_dst ? c->dst_user : c->dst,
                                         comp ? (void *)c->acc : y) == dnnl_success &&
             dnnl_memory_set_data_handle(c->bias, (void *)bias) == dnnl_success;
    if (ok && c->r_src)
        ok = cge__dnnl_run_reorder(c->stream, c->r_src, c->src_user, c->src);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, c->src}, {DNNL_ARG_WEIGHTS, c->wei},
                               {DNNL_ARG_DST, c->dst}, {DNNL_ARG_BIAS, c->bias}};
    ok = ok && dnnl_primitive_execute(c->prim, c->stream, bias && c->has_bias ? 4 : 3, args) ==
                   dnnl_success;
    if (ok && c->r_dst)
        ok = cge__dnnl_run_reorder(c->stream, c->r_dst, c->dst, c->dst_user);
    ok = ok && dnnl_stream_wait(c->stream) == dnnl_success;
    cge__dnnl_omp_leave(saved);
    if (ok && comp)
        comp_requantise(c, bias, y, 0, c->rows);
    return ok ? CGE_OK : CGE_ERR_INTERNAL;
}

#else

cge_status cge__dnnl_qconv_create(const cge__dnnl_qconv_desc *d, cge__dnnl_qconv **out)
{
    (void)d;
    *out = NULL;
    return CGE_ERR_UNSUPPORTED;
}

cge_status cge__dnnl_qconv_prepack(cge__dnnl_qconv *c, const cge_kernel_ctx *ctx, const void *w)
{
    (void)c, (void)ctx, (void)w;
    return CGE_ERR_UNSUPPORTED;
}

cge_status cge__dnnl_qconv_run(cge__dnnl_qconv *c, const void *x, const int32_t *bias, void *y)
{
    (void)c, (void)x, (void)bias, (void)y;
    return CGE_ERR_UNSUPPORTED;
}

int64_t cge__dnnl_qconv_blocks(const cge__dnnl_qconv *c, int threads)
{
    (void)c, (void)threads;
    return 1;
}

cge_status cge__dnnl_qconv_run_block(cge__dnnl_qconv *c, const void *x, const int32_t *bias,
                                     void *y, int64_t blk, int64_t nblk)
{
    (void)c, (void)x, (void)bias, (void)y, (void)blk, (void)nblk;
    return CGE_ERR_UNSUPPORTED;
}

int cge__dnnl_qconv_block_span(const cge__dnnl_qconv *c, int64_t blk, int64_t nblk, int64_t *e0,
                               int64_t *e1)
{
    (void)c, (void)blk, (void)nblk, (void)e0, (void)e1;
    return 0;
}

void cge__dnnl_qconv_destroy(cge__dnnl_qconv *c)
{
    (void)c;
}

#endif
