/* The zoo's float32 convolution shapes in oneDNN directly, by activation
 * layout (NHWC acdb, nChw8c aBcd8b, oneDNN's own choice) and, for 1x1
 * stride-1, as one product through cge's GEMM: process CPU time per run,
 * 1 and 2 threads. Not a test. Run with OMP_WAIT_POLICY=passive. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <oneapi/dnnl/dnnl.h>

#include "ops/gemm_kernel.c"

#define OK(call)                                                                 \
    do {                                                                         \
        if ((call) != dnnl_success) {                                            \
            fprintf(stderr, "%s failed\n", #call);                              \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

typedef struct shape {
    const char *model;
    int C, M, H, k, s;
} shape;

/* Batch 1; pads k/2; out = (H + 2*(k/2) - k) / s + 1. */
static const shape shapes[] = {
    {"resnet stem 7x7/2", 3, 64, 224, 7, 2},
    {"resnet18 l1 3x3", 64, 64, 56, 3, 1},
    {"resnet18 l2.0 3x3/2", 64, 128, 56, 3, 2},
    {"resnet18 l2 3x3", 128, 128, 28, 3, 1},
    {"resnet18 l2 ds 1x1/2", 64, 128, 56, 1, 2},
    {"resnet18 l3 3x3", 256, 256, 14, 3, 1},
    {"resnet18 l4 3x3", 512, 512, 7, 3, 1},
    {"resnet50 1x1 64-64", 64, 64, 56, 1, 1},
    {"resnet50 1x1 64-256", 64, 256, 56, 1, 1},
    {"resnet50 1x1 256-64", 256, 64, 56, 1, 1},
    {"resnet50 1x1 512-128", 512, 128, 28, 1, 1},
    {"resnet50 1x1 128-512", 128, 512, 28, 1, 1},
    {"resnet50 1x1/2 512-1024", 512, 1024, 28, 1, 2},
    {"resnet50 1x1 1024-256", 1024, 256, 14, 1, 1},
    {"resnet50 1x1 2048-512", 2048, 512, 7, 1, 1},
    {"vgg 3x3 3-64", 3, 64, 224, 3, 1},
    {"vgg 3x3 64-64", 64, 64, 224, 3, 1},
    {"vgg 3x3 128-128", 128, 128, 112, 3, 1},
    {"vgg 3x3 256-256", 256, 256, 56, 3, 1},
    {"vgg 3x3 512-512", 512, 512, 28, 3, 1},
    {"unet 3x3 16-16", 16, 16, 128, 3, 1},
    {"unet 3x3 32-32", 32, 32, 64, 3, 1},
    {"mobilenet 1x1 16-96", 16, 96, 112, 1, 1},
    {"mobilenet 1x1 144-24", 144, 24, 56, 1, 1},
    {"mobilenet 1x1 192-32", 192, 32, 28, 1, 1},
    {"mobilenet 1x1 384-64", 384, 64, 14, 1, 1},
    {"mobilenet 1x1 960-160", 960, 160, 7, 1, 1},
};

static double cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static float *fill(size_t n)
{
    float *p = malloc(n * sizeof(float) + 64);
    unsigned s = 12345;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = (float)((s >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
    return p;
}

static void omp_threads(int t)
{
    extern void omp_set_num_threads(int);
    omp_set_num_threads(t);
}

static int RUNS = 15; /* CONV_AVX2_RUNS overrides */

/* Min CPU us per run of one oneDNN convolution with activations in `tag`
 * (dnnl_format_tag_any: oneDNN's choice), weights any, bias, ReLU post-op. */
static double time_dnnl(dnnl_engine_t eng, dnnl_stream_t strm, const shape *sh, int threads,
                        dnnl_format_tag_t stag, dnnl_format_tag_t tag, char *impl,
                        size_t impl_len, double *reorder_us)
{
    int p = sh->k / 2, O = (sh->H + 2 * p - sh->k) / sh->s + 1;
    dnnl_dims_t sd = {1, sh->C, sh->H, sh->H}, dd = {1, sh->M, O, O},
                wd = {sh->M, sh->C, sh->k, sh->k}, bd = {sh->M}, st = {sh->s, sh->s},
                dil = {0, 0}, pl = {p, p}, pr = {p, p};
    omp_threads(threads);
    dnnl_memory_desc_t s, w, b, d, snhwc;
    OK(dnnl_memory_desc_init_by_tag(&s, 4, sd, dnnl_f32, stag));
    OK(dnnl_memory_desc_init_by_tag(&d, 4, dd, dnnl_f32, tag));
    OK(dnnl_memory_desc_init_by_tag(&w, 4, wd, dnnl_f32, dnnl_format_tag_any));
    OK(dnnl_memory_desc_init_by_tag(&b, 1, bd, dnnl_f32, dnnl_x));
    OK(dnnl_memory_desc_init_by_tag(&snhwc, 4, sd, dnnl_f32, dnnl_nhwc));
    dnnl_convolution_desc_t cd;
    OK(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference,
                                                  dnnl_convolution_direct, &s, &w, &b, &d, st,
                                                  dil, pl, pr));
    dnnl_primitive_attr_t attr;
    dnnl_post_ops_t po;
    OK(dnnl_primitive_attr_create(&attr));
    OK(dnnl_post_ops_create(&po));
    OK(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f));
    OK(dnnl_primitive_attr_set_post_ops(attr, po));
    dnnl_primitive_desc_t pd;
    OK(dnnl_primitive_desc_create(&pd, &cd, attr, eng, NULL));
    const char *info = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &info);
    const dnnl_memory_desc_t *rs = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *rw = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *rd = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    const char *fmt = "?";
    if (tag == dnnl_format_tag_any) {
        dnnl_memory_desc_t t8, tl;
        dnnl_memory_desc_init_by_tag(&t8, 4, sd, dnnl_f32, dnnl_aBcd8b);
        dnnl_memory_desc_init_by_tag(&tl, 4, sd, dnnl_f32, dnnl_nhwc);
        fmt = dnnl_memory_desc_equal(rs, &t8) ? "8b" : dnnl_memory_desc_equal(rs, &tl) ? "nhwc"
                                                                                      : "other";
    }
    snprintf(impl, impl_len, "%s%s%s", info ? info : "?", tag == dnnl_format_tag_any ? "/" : "",
             tag == dnnl_format_tag_any ? fmt : "");
    dnnl_memory_t ms, mw, mb, md, msc, mn;
    OK(dnnl_memory_create(&ms, rs, eng, DNNL_MEMORY_ALLOCATE));
    OK(dnnl_memory_create(&mw, rw, eng, DNNL_MEMORY_ALLOCATE));
    OK(dnnl_memory_create(&mb, &b, eng, DNNL_MEMORY_ALLOCATE));
    OK(dnnl_memory_create(&md, rd, eng, DNNL_MEMORY_ALLOCATE));
    OK(dnnl_memory_create(&mn, &snhwc, eng, DNNL_MEMORY_ALLOCATE));
    const dnnl_memory_desc_t *rsc = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    OK(dnnl_memory_create(&msc, rsc, eng, DNNL_MEMORY_ALLOCATE));
    void *h;
    dnnl_memory_get_data_handle(ms, &h);
    memset(h, 0, dnnl_memory_desc_get_size(rs));
    dnnl_memory_get_data_handle(mw, &h);
    memset(h, 0, dnnl_memory_desc_get_size(rw));
    dnnl_memory_get_data_handle(mb, &h);
    memset(h, 0, dnnl_memory_desc_get_size(&b));
    dnnl_primitive_t prim;
    OK(dnnl_primitive_create(&prim, pd));
    dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, mb},
                              {DNNL_ARG_DST, md}, {DNNL_ARG_SCRATCHPAD, msc}};
    double best = 1e30;
    for (int r = 0; r < RUNS + 2; r++) {
        double t0 = cpu_us();
        OK(dnnl_primitive_execute(prim, strm, 5, args));
        OK(dnnl_stream_wait(strm));
        double t = cpu_us() - t0;
        if (r >= 2 && t < best)
            best = t;
    }
    /* NHWC -> the chosen layout of X: what entering a blocked run costs. */
    *reorder_us = 0;
    if (!dnnl_memory_desc_equal(rs, &snhwc)) {
        dnnl_primitive_desc_t rpd;
        dnnl_primitive_t rp;
        OK(dnnl_reorder_primitive_desc_create(&rpd, &snhwc, eng, rs, eng, NULL));
        OK(dnnl_primitive_create(&rp, rpd));
        dnnl_exec_arg_t ra[] = {{DNNL_ARG_FROM, mn}, {DNNL_ARG_TO, ms}};
        double rb = 1e30;
        for (int r = 0; r < RUNS; r++) {
            double t0 = cpu_us();
            OK(dnnl_primitive_execute(rp, strm, 2, ra));
            OK(dnnl_stream_wait(strm));
            double t = cpu_us() - t0;
            if (t < rb)
                rb = t;
        }
        *reorder_us = rb;
        dnnl_primitive_destroy(rp);
        dnnl_primitive_desc_destroy(rpd);
    }
    dnnl_primitive_destroy(prim);
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_attr_destroy(attr);
    dnnl_post_ops_destroy(po);
    dnnl_memory_destroy(ms);
    dnnl_memory_destroy(mw);
    dnnl_memory_destroy(mb);
    dnnl_memory_destroy(md);
    dnnl_memory_destroy(msc);
    dnnl_memory_destroy(mn);
    return best;
}

typedef struct gemm_job {
    cge__gemm_f32 g;
    int64_t i0, i1;
} gemm_job;

static void *gemm_rows(void *arg)
{
    gemm_job *j = arg;
    for (int64_t i = j->i0; i < j->i1; i += 96) {
        int64_t e = i + 96 < j->i1 ? i + 96 : j->i1;
        cge__gemm_f32_tile(&j->g, i, e, 0, j->g.N);
    }
    return NULL;
}

/* A 1x1 stride-1 NHWC convolution as [HW, C] x [C, M] with bias (B packed
 * once, not timed); rows split over the threads. */
static double time_gemm(const shape *sh, int threads)
{
    int64_t HW = (int64_t)sh->H * sh->H;
    float *x = fill((size_t)(HW * sh->C)), *w = fill((size_t)sh->C * sh->M),
          *bias = fill((size_t)sh->M), *y = malloc((size_t)(HW * sh->M) * sizeof(float));
    float *bp = malloc((size_t)cge__gemm_packed_b_floats(sh->C, sh->M) * sizeof(float));
    int64_t panels = (sh->M + CGE_GEMM_NR - 1) / CGE_GEMM_NR;
    cge__gemm_pack_b(w, sh->M, 1, sh->C, sh->M, 0, panels, bp);
    cge__gemm_f32 g = {.M = HW, .N = sh->M, .K = sh->C, .a = x, .a_rs = sh->C, .a_cs = 1,
                       .bp = bp, .c = y, .ldc = sh->M, .alpha = 1.0f, .bias = bias,
                       .bias_rs = 0, .bias_cs = 1, .beta = 1.0f, .isa = CGE_GEMM_ISA_AUTO};
    double best = 1e30;
    for (int r = 0; r < RUNS + 2; r++) {
        gemm_job jobs[2];
        pthread_t th[2];
        int64_t half = (HW / 2 + CGE_GEMM_MT - 1) / CGE_GEMM_MT * CGE_GEMM_MT;
        double t0 = cpu_us();
        if (threads == 1) {
            jobs[0] = (gemm_job){g, 0, HW};
            gemm_rows(&jobs[0]);
        } else {
            jobs[0] = (gemm_job){g, 0, half};
            jobs[1] = (gemm_job){g, half, HW};
            for (int i = 0; i < 2; i++)
                pthread_create(&th[i], NULL, gemm_rows, &jobs[i]);
            for (int i = 0; i < 2; i++)
                pthread_join(th[i], NULL);
        }
        double t = cpu_us() - t0;
        if (r >= 2 && t < best)
            best = t;
    }
    free(x);
    free(w);
    free(bias);
    free(y);
    free(bp);
    return best;
}

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL, *runs = getenv("CONV_AVX2_RUNS");
    if (runs && atoi(runs) > 0)
        RUNS = atoi(runs);
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    OK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    OK(dnnl_stream_create(&strm, eng, dnnl_stream_default_flags));
    printf("CPU us per run (min of %d), bias + ReLU; nChw8c: X and Y nChw8c (X nchw when C < 8); "
           "reord8b = NHWC->that X\n",
           RUNS);
    printf("%-26s %2s %9s %9s %9s %9s %8s  %s | %s\n", "shape", "t", "nhwc", "nChw8c", "any",
           "gemm", "reord8b", "impl nhwc", "impl 8b | any");
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const shape *sh = &shapes[i];
        if (only && !strstr(sh->model, only))
            continue;
        for (int t = 1; t <= 2; t++) {
            char i1[64], i2[64], i3[80];
            double r1, r2, r3;
            double a = time_dnnl(eng, strm, sh, t, dnnl_nhwc, dnnl_nhwc, i1, sizeof i1, &r1);
            /* Few input channels: oneDNN's first-layer kernel reads plain
             * NCHW X (a reorder of C planes from NHWC) and writes nChw8c. */
            dnnl_format_tag_t s8 = sh->C < 8 ? dnnl_nchw : dnnl_aBcd8b;
            double b = time_dnnl(eng, strm, sh, t, s8, dnnl_aBcd8b, i2, sizeof i2, &r2);
            double c = time_dnnl(eng, strm, sh, t, dnnl_format_tag_any, dnnl_format_tag_any, i3,
                                 sizeof i3, &r3);
            double gm = sh->k == 1 && sh->s == 1 ? time_gemm(sh, t) : 0;
            printf("%-26s %2d %9.0f %9.0f %9.0f %9.0f %8.0f  %s | %s | %s\n", sh->model, t, a, b,
                   c, gm, r2, i1, i2, i3);
            fflush(stdout);
        }
    }
    dnnl_stream_destroy(strm);
    dnnl_engine_destroy(eng);
    return 0;
}
