/* oneDNN convolution wrapper (see dnnl_conv.h). Without CGE_HAVE_DNNL every
 * entry point reports that oneDNN is unavailable and Conv keeps its own
 * kernels. */
#include "ops/dnnl_conv.h"

#include <stdlib.h>

#ifdef CGE_HAVE_DNNL
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>

struct cge_dnnl_conv {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, bias, dst, scratch;
    size_t scratch_bytes;
    void (*omp_set_num_threads)(int);
};

int cge_dnnl_available(void)
{
    return 1;
}

void cge_dnnl_conv_destroy(cge_dnnl_conv *c)
{
    if (!c)
        return;
    dnnl_memory_destroy(c->src);
    dnnl_memory_destroy(c->wei);
    dnnl_memory_destroy(c->bias);
    dnnl_memory_destroy(c->dst);
    dnnl_memory_destroy(c->scratch);
    dnnl_primitive_destroy(c->prim);
    dnnl_primitive_desc_destroy(c->pd);
    dnnl_stream_destroy(c->stream);
    dnnl_engine_destroy(c->engine);
    free(c);
}

cge_status cge_dnnl_conv_create(const cge_dnnl_conv_desc *d, cge_dnnl_conv **out)
{
    *out = NULL;
    if (d->nsp < 1 || d->nsp > 3 || d->G < 1)
        return CGE_ERR_UNSUPPORTED;
    cge_dnnl_conv *c = calloc(1, sizeof *c);
    if (!c)
        return CGE_ERR_NO_MEMORY;
    int n = d->nsp, off = 3 - n;
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
        sd[2 + i] = d->in[off + i];
        dd[2 + i] = d->out[off + i];
        wd[wr - n + i] = d->k[off + i];
        st[i] = d->s[off + i];
        dil[i] = d->d[off + i] - 1;
        pl[i] = d->pb[off + i];
        pr[i] = d->pe[off + i];
    }
    static const dnnl_format_tag_t act[] = {dnnl_ncw, dnnl_nchw, dnnl_ncdhw};
    static const dnnl_format_tag_t w1[] = {dnnl_oiw, dnnl_oihw, dnnl_oidhw};
    static const dnnl_format_tag_t wg[] = {dnnl_goiw, dnnl_goihw, dnnl_goidhw};
    dnnl_memory_desc_t smd, wmd, bmd, dmd;
    dnnl_convolution_desc_t cd;
    dnnl_primitive_attr_t attr = NULL;
    const dnnl_memory_desc_t *spd;
    int ok =
        dnnl_engine_create(&c->engine, dnnl_cpu, 0) == dnnl_success &&
        dnnl_stream_create(&c->stream, c->engine, dnnl_stream_default_flags) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(&smd, n + 2, sd, dnnl_f32, act[n - 1]) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(&dmd, n + 2, dd, dnnl_f32, act[n - 1]) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(&wmd, wr, wd, dnnl_f32,
                                     d->G > 1 ? wg[n - 1] : w1[n - 1]) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_x) == dnnl_success &&
        dnnl_dilated_convolution_forward_desc_init(
            &cd, dnnl_forward_inference, dnnl_convolution_direct, &smd, &wmd,
            d->has_bias ? &bmd : NULL, &dmd, st, dil, pl, pr) == dnnl_success &&
        dnnl_primitive_attr_create(&attr) == dnnl_success &&
        dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) ==
            dnnl_success &&
        dnnl_primitive_desc_create(&c->pd, &cd, attr, c->engine, NULL) == dnnl_success &&
        dnnl_primitive_create(&c->prim, c->pd) == dnnl_success &&
        (spd = dnnl_primitive_desc_query_md(c->pd, dnnl_query_scratchpad_md, 0)) != NULL &&
        dnnl_memory_create(&c->src, &smd, c->engine, DNNL_MEMORY_NONE) == dnnl_success &&
        dnnl_memory_create(&c->wei, &wmd, c->engine, DNNL_MEMORY_NONE) == dnnl_success &&
        dnnl_memory_create(&c->bias, &bmd, c->engine, DNNL_MEMORY_NONE) == dnnl_success &&
        dnnl_memory_create(&c->dst, &dmd, c->engine, DNNL_MEMORY_NONE) == dnnl_success &&
        dnnl_memory_create(&c->scratch, spd, c->engine, DNNL_MEMORY_NONE) == dnnl_success;
    dnnl_primitive_attr_destroy(attr);
    if (!ok) {
        cge_dnnl_conv_destroy(c);
        return CGE_ERR_UNSUPPORTED;
    }
    c->scratch_bytes = dnnl_memory_desc_get_size(spd);
    /* libgomp is loaded with oneDNN; its thread-count setter is looked up
     * rather than linked so that cge needs no OpenMP flags. */
    *(void **)&c->omp_set_num_threads = dlsym(RTLD_DEFAULT, "omp_set_num_threads");
    *out = c;
    return CGE_OK;
}

size_t cge_dnnl_conv_scratch_size(const cge_dnnl_conv *c)
{
    return c ? c->scratch_bytes : 0;
}

cge_status cge_dnnl_conv_run(cge_dnnl_conv *c, const float *x, const float *w, const float *b,
                             float *y, void *scratch, int threads)
{
    if (c->omp_set_num_threads)
        c->omp_set_num_threads(threads > 0 ? threads : 1);
    if (dnnl_memory_set_data_handle(c->src, (void *)x) != dnnl_success ||
        dnnl_memory_set_data_handle(c->wei, (void *)w) != dnnl_success ||
        dnnl_memory_set_data_handle(c->bias, (void *)b) != dnnl_success ||
        dnnl_memory_set_data_handle(c->dst, y) != dnnl_success ||
        dnnl_memory_set_data_handle(c->scratch, scratch) != dnnl_success)
        return CGE_ERR_INTERNAL;
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, c->src}, {DNNL_ARG_WEIGHTS, c->wei},
                               {DNNL_ARG_DST, c->dst}, {DNNL_ARG_SCRATCHPAD, c->scratch},
                               {DNNL_ARG_BIAS, c->bias}};
    if (dnnl_primitive_execute(c->prim, c->stream, b ? 5 : 4, args) != dnnl_success ||
        dnnl_stream_wait(c->stream) != dnnl_success)
        return CGE_ERR_INTERNAL;
    return CGE_OK;
}

#else

int cge_dnnl_available(void)
{
    return 0;
}

cge_status cge_dnnl_conv_create(const cge_dnnl_conv_desc *d, cge_dnnl_conv **out)
{
    (void)d;
    *out = NULL;
    return CGE_ERR_UNSUPPORTED;
}

size_t cge_dnnl_conv_scratch_size(const cge_dnnl_conv *c)
{
    (void)c;
    return 0;
}

cge_status cge_dnnl_conv_run(cge_dnnl_conv *c, const float *x, const float *w, const float *b,
                             float *y, void *scratch, int threads)
{
    (void)c, (void)x, (void)w, (void)b, (void)y, (void)scratch, (void)threads;
    return CGE_ERR_UNSUPPORTED;
}

void cge_dnnl_conv_destroy(cge_dnnl_conv *c)
{
    (void)c;
}

#endif
