/* oneDNN int8 convolution / matmul wrapper (see dnnl_qconv.h). Without
 * CGE_HAVE_DNNL every entry point reports that oneDNN is unavailable and the
 * integer operators keep cge's own kernels. */
#include "ops/dnnl_qconv.h"

#include <stdlib.h>

#ifdef CGE_HAVE_DNNL
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>
#include <string.h>

/* src and dst are the caller's buffers when the primitive takes their layout
 * (channels-last, or a matmul's rows); otherwise the *_user memories wrap the
 * caller's plain tensors and reorders move data in and out. The weights live
 * in a block shared through cge_kernel_shared_get. oneDNN keeps its scratch
 * itself (library mode): a buffer made once and reused by later runs. */
struct cge__dnnl_qconv {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, bias, dst, src_user, dst_user, wei_user;
    dnnl_primitive_t r_src, r_dst, r_wei;
    void *wei_block;
    int threads;
    void (*omp_set)(int);
    int (*omp_get)(void);
};

/* OpenMP threads scoped to one call, as in dnnl_conv.c: oneDNN's team is the
 * engine's thread budget, and the caller's own setting comes back after. */
static int omp_enter(const cge__dnnl_qconv *c)
{
    int saved = c->omp_get ? c->omp_get() : 0;
    if (c->omp_set)
        c->omp_set(c->threads);
    return saved;
}

static void omp_leave(const cge__dnnl_qconv *c, int saved)
{
    if (c->omp_set && saved > 0)
        c->omp_set(saved);
}

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
    free(c);
}

static int make_reorder(const cge__dnnl_qconv *c, const dnnl_memory_desc_t *from,
                        const dnnl_memory_desc_t *to, dnnl_primitive_t *out)
{
    dnnl_primitive_desc_t rpd;
    if (dnnl_reorder_primitive_desc_create(&rpd, from, c->engine, to, c->engine, NULL) !=
        dnnl_success)
        return 0;
    int ok = dnnl_primitive_create(out, rpd) == dnnl_success;
    dnnl_primitive_desc_destroy(rpd);
    return ok;
}

/* `own` over the caller's buffer when oneDNN took the plain layout; else a
 * buffer of its own, a wrapper of the plain one and the reorder between. */
static int bind(cge__dnnl_qconv *c, const dnnl_memory_desc_t *plain,
                const dnnl_memory_desc_t *chosen, dnnl_memory_t *own, dnnl_memory_t *user,
                dnnl_primitive_t *r, int into_own)
{
    if (dnnl_memory_desc_equal(plain, chosen))
        return dnnl_memory_create(own, plain, c->engine, DNNL_MEMORY_NONE) == dnnl_success;
    return dnnl_memory_create(own, chosen, c->engine, DNNL_MEMORY_ALLOCATE) == dnnl_success &&
           dnnl_memory_create(user, plain, c->engine, DNNL_MEMORY_NONE) == dnnl_success &&
           (into_own ? make_reorder(c, plain, chosen, r) : make_reorder(c, chosen, plain, r));
}

cge_status cge__dnnl_qconv_create(const cge__dnnl_qconv_desc *d, cge__dnnl_qconv **out)
{
    *out = NULL;
    if ((!d->matmul && (d->nsp < 1 || d->nsp > 3)) || d->G < 1 || d->num_scales < 1)
        return CGE_ERR_UNSUPPORTED;
    cge__dnnl_qconv *c = calloc(1, sizeof *c);
    if (!c)
        return CGE_ERR_NO_MEMORY;
    *(void **)&c->omp_set = dlsym(RTLD_DEFAULT, "omp_set_num_threads");
    *(void **)&c->omp_get = dlsym(RTLD_DEFAULT, "omp_get_max_threads");
    c->threads = d->threads > 0 ? d->threads : 1;
    int saved = omp_enter(c);
    dnnl_data_type_t xt = d->x_signed ? dnnl_s8 : dnnl_u8, yt = d->y_signed ? dnnl_s8 : dnnl_u8;
    dnnl_memory_desc_t smd, dmd, wmd, wany, bmd, sa, da;
    dnnl_dims_t bd = {d->M};
    int n = d->nsp, off = 3 - n, rank = n + 2, wr = d->G > 1 ? n + 3 : n + 2;
    union {
        dnnl_convolution_desc_t conv;
        dnnl_matmul_desc_t mm;
    } opd;
    int ok = dnnl_engine_create(&c->engine, dnnl_cpu, 0) == dnnl_success &&
             dnnl_stream_create(&c->stream, c->engine, dnnl_stream_default_flags) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_s32, dnnl_x) == dnnl_success;
    if (ok && d->matmul) {
        /* a [M] bias is [1, M] to the matmul */
        dnnl_dims_t sd = {d->N, d->C}, dd = {d->N, d->M}, wd = {d->C, d->M}, b2 = {1, d->M};
        ok = dnnl_memory_desc_init_by_tag(&smd, 2, sd, xt, dnnl_ab) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&dmd, 2, dd, yt, dnnl_ab) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&wmd, 2, wd, dnnl_s8, dnnl_ab) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&wany, 2, wd, dnnl_s8, dnnl_format_tag_any) ==
                 dnnl_success &&
             dnnl_memory_desc_init_by_tag(&bmd, 2, b2, dnnl_s32, dnnl_ab) == dnnl_success &&
             dnnl_matmul_desc_init(&opd.mm, &smd, &wany, d->has_bias ? &bmd : NULL, &dmd) ==
                 dnnl_success;
    } else if (ok) {
        dnnl_dims_t sd = {d->N, d->C}, dd = {d->N, d->M}, wd, st, dil, pl, pr;
        if (d->G > 1) {
            wd[0] = d->G;
            wd[1] = d->M / d->G;
            wd[2] = d->C / d->G;
        } else {
            wd[0] = d->M;
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
        static const dnnl_format_tag_t plain[] = {dnnl_ncw, dnnl_nchw, dnnl_ncdhw};
        static const dnnl_format_tag_t last[] = {dnnl_nwc, dnnl_nhwc, dnnl_ndhwc};
        static const dnnl_format_tag_t w1[] = {dnnl_oiw, dnnl_oihw, dnnl_oidhw};
        static const dnnl_format_tag_t wg[] = {dnnl_goiw, dnnl_goihw, dnnl_goidhw};
        /* Plain activations: oneDNN's int8 kernels want channels-last or
         * blocked data, so the primitive chooses and the data is reordered. */
        dnnl_format_tag_t at = d->channels_last ? last[n - 1] : dnnl_format_tag_any;
        ok = dnnl_memory_desc_init_by_tag(&smd, rank, sd, xt,
                                          d->channels_last ? last[n - 1] : plain[n - 1]) ==
                 dnnl_success &&
             dnnl_memory_desc_init_by_tag(&dmd, rank, dd, yt,
                                          d->channels_last ? last[n - 1] : plain[n - 1]) ==
                 dnnl_success &&
             dnnl_memory_desc_init_by_tag(&sa, rank, sd, xt, at) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&da, rank, dd, yt, at) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&wmd, wr, wd, dnnl_s8,
                                          d->G > 1 ? wg[n - 1] : w1[n - 1]) == dnnl_success &&
             dnnl_memory_desc_init_by_tag(&wany, wr, wd, dnnl_s8, dnnl_format_tag_any) ==
                 dnnl_success &&
             dnnl_dilated_convolution_forward_desc_init(
                 &opd.conv, dnnl_forward_inference, dnnl_convolution_direct, &sa, &wany,
                 d->has_bias ? &bmd : NULL, &da, st, dil, pl, pr) == dnnl_success;
    }
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    const dnnl_memory_desc_t *cs, *cw, *cd;
    int dst_dim = 1; /* channels are dst dim 1 for both (a matmul's columns) */
    ok = ok && dnnl_primitive_attr_create(&attr) == dnnl_success &&
         dnnl_primitive_attr_set_output_scales(attr, d->num_scales,
                                               d->num_scales > 1 ? 1 << dst_dim : 0,
                                               d->scale) == dnnl_success &&
         (!d->x_zp || dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_SRC, 1, 0, &d->x_zp) ==
                          dnnl_success) &&
         (!d->y_zp || dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_DST, 1, 0, &d->y_zp) ==
                          dnnl_success) &&
         dnnl_post_ops_create(&po) == dnnl_success &&
         /* round before the zero point is added, as QLinearConv's reference
          * loops (and ONNX Runtime) do: rint(a) + z, not rint(a + z), which
          * differs where a + z loses a's low bits or z is odd at a tie */
         (!d->y_zp ||
          dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_round, 0.0f, 0.0f) == dnnl_success) &&
         (!d->clip ||
          dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip, d->lo, d->hi) == dnnl_success) &&
         dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success &&
         dnnl_primitive_desc_create(&c->pd, &opd, attr, c->engine, NULL) == dnnl_success &&
         dnnl_primitive_create(&c->prim, c->pd) == dnnl_success &&
         (cs = dnnl_primitive_desc_query_md(c->pd, dnnl_query_src_md, 0)) != NULL &&
         (cw = dnnl_primitive_desc_query_md(c->pd, dnnl_query_weights_md, 0)) != NULL &&
         (cd = dnnl_primitive_desc_query_md(c->pd, dnnl_query_dst_md, 0)) != NULL &&
         bind(c, &smd, cs, &c->src, &c->src_user, &c->r_src, 1) &&
         bind(c, &dmd, cd, &c->dst, &c->dst_user, &c->r_dst, 0) &&
         dnnl_memory_create(&c->wei_user, &wmd, c->engine, DNNL_MEMORY_NONE) == dnnl_success &&
         make_reorder(c, &wmd, cw, &c->r_wei) &&
         dnnl_memory_create(&c->bias, &bmd, c->engine, DNNL_MEMORY_NONE) == dnnl_success;
    dnnl_primitive_attr_destroy(attr);
    dnnl_post_ops_destroy(po);
    omp_leave(c, saved);
    if (!ok) {
        cge__dnnl_qconv_destroy(c);
        return CGE_ERR_UNSUPPORTED;
    }
    *out = c;
    return CGE_OK;
}

typedef struct pack_job {
    cge__dnnl_qconv *c;
    const int8_t *w;
} pack_job;

static cge_status pack_fill(void *dst, void *user)
{
    pack_job *j = user;
    cge__dnnl_qconv *c = j->c;
    const dnnl_memory_desc_t *cw = dnnl_primitive_desc_query_md(c->pd, dnnl_query_weights_md, 0);
    dnnl_memory_t to = NULL;
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, c->wei_user}, {DNNL_ARG_TO, NULL}};
    int ok = cw && dnnl_memory_create(&to, cw, c->engine, dst) == dnnl_success &&
             dnnl_memory_set_data_handle(c->wei_user, (void *)j->w) == dnnl_success;
    a[1].memory = to;
    ok = ok && dnnl_primitive_execute(c->r_wei, c->stream, 2, a) == dnnl_success &&
         dnnl_stream_wait(c->stream) == dnnl_success;
    dnnl_memory_destroy(to);
    return ok ? CGE_OK : CGE_ERR_INTERNAL;
}

cge_status cge__dnnl_qconv_prepack(cge__dnnl_qconv *c, const cge_kernel_ctx *ctx, const int8_t *w)
{
    if (!c || !w)
        return CGE_ERR_INVALID_ARG;
    const dnnl_memory_desc_t *cw = dnnl_primitive_desc_query_md(c->pd, dnnl_query_weights_md, 0);
    if (!cw)
        return CGE_ERR_INTERNAL;
    int saved = omp_enter(c);
    pack_job job = {c, w};
    void *block = NULL;
    /* The packed bytes depend on W and the chosen layout (the descriptor,
     * which also records the compensation oneDNN folds in for zero points). */
    cge_status st = cge_kernel_shared_get(ctx, w, cw, sizeof *cw, dnnl_memory_desc_get_size(cw),
                                          pack_fill, &job, &block);
    dnnl_memory_t m = NULL;
    if (!st && dnnl_memory_create(&m, cw, c->engine, block) != dnnl_success) {
        cge_kernel_shared_release(block);
        st = CGE_ERR_INTERNAL;
    }
    if (!st) {
        dnnl_memory_destroy(c->wei);
        cge_kernel_shared_release(c->wei_block);
        c->wei = m;
        c->wei_block = block;
    }
    omp_leave(c, saved);
    return st;
}

static int run_reorder(cge__dnnl_qconv *c, dnnl_primitive_t r, dnnl_memory_t from, dnnl_memory_t to)
{
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    return dnnl_primitive_execute(r, c->stream, 2, a) == dnnl_success;
}

cge_status cge__dnnl_qconv_run(cge__dnnl_qconv *c, const void *x, const int32_t *bias, void *y)
{
    if (!c->wei)
        return CGE_ERR_INVALID_ARG;
    int saved = omp_enter(c);
    int ok = dnnl_memory_set_data_handle(c->r_src ? c->src_user : c->src, (void *)x) ==
                 dnnl_success &&
             dnnl_memory_set_data_handle(c->r_dst ? c->dst_user : c->dst, y) == dnnl_success &&
             dnnl_memory_set_data_handle(c->bias, (void *)bias) == dnnl_success;
    if (ok && c->r_src)
        ok = run_reorder(c, c->r_src, c->src_user, c->src);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, c->src}, {DNNL_ARG_WEIGHTS, c->wei},
                               {DNNL_ARG_DST, c->dst}, {DNNL_ARG_BIAS, c->bias}};
    ok = ok && dnnl_primitive_execute(c->prim, c->stream, bias ? 4 : 3, args) == dnnl_success;
    if (ok && c->r_dst)
        ok = run_reorder(c, c->r_dst, c->dst, c->dst_user);
    ok = ok && dnnl_stream_wait(c->stream) == dnnl_success;
    omp_leave(c, saved);
    return ok ? CGE_OK : CGE_ERR_INTERNAL;
}

#else

cge_status cge__dnnl_qconv_create(const cge__dnnl_qconv_desc *d, cge__dnnl_qconv **out)
{
    (void)d;
    *out = NULL;
    return CGE_ERR_UNSUPPORTED;
}

cge_status cge__dnnl_qconv_prepack(cge__dnnl_qconv *c, const cge_kernel_ctx *ctx, const int8_t *w)
{
    (void)c, (void)ctx, (void)w;
    return CGE_ERR_UNSUPPORTED;
}

cge_status cge__dnnl_qconv_run(cge__dnnl_qconv *c, const void *x, const int32_t *bias, void *y)
{
    (void)c, (void)x, (void)bias, (void)y;
    return CGE_ERR_UNSUPPORTED;
}

void cge__dnnl_qconv_destroy(cge__dnnl_qconv *c)
{
    (void)c;
}

#endif
