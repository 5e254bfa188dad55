/* How the float32 products of transformers scale from one thread to two:
 * FusedMatMul (constant B, bias) at M = 1..128 rows and the zoo's K x N,
 * timed at 1 and 2 threads in the same minutes. Not a test. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cge/cge.h"
#include "bench_common.h"

/* Products per graph: independent (all read x), each with its own weights, so
 * that the weights stream from beyond L2 as a model's do. */
enum { REPS = 8, ROUNDS = 7, RUNS = 15, WARMUP = 5, THREADS = 2 };

static float *fill(size_t n, unsigned seed)
{
    float *p = malloc(n * sizeof(float));
    if (!p)
        exit(1);
    unsigned s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = (float)((s >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
    return p;
}

typedef struct side {
    cge_session *s;
    uint32_t id;
    cge_tensor in, out[3 * REPS];
    int reps;
    double kernel_us;
} side;

static void on_profile(const cge_profile_event *ev, void *user)
{
    side *c = user;
    if (ev->kind == CGE_PROFILE_KERNEL && !strcmp(ev->op_type, "FusedMatMul"))
        c->kernel_us += (ev->end_ms - ev->launch_begin_ms) * 1e3;
}

static void build(side *c, cge_session *s, uint32_t id, int64_t M, int64_t K, int64_t N,
                  int reps, float *x, float **w, float **b, float **y)
{
    memset(c, 0, sizeof *c);
    c->s = s;
    c->id = id;
    cge_builder *bl = cge_builder_create("gemm_threads");
    cge_shape xs = CGE_SHAPE(M, K);
    cge_t xt = cge_es_input(bl, "x", CGE_F32, xs);
    c->in = (cge_tensor){.name = "x", .dtype = CGE_F32, .shape = xs, .data = x,
                         .bytes = (size_t)(M * K) * sizeof(float)};
    c->reps = reps;
    for (int r = 0; r < reps; r++) {
        char wn[16], bn[16], yn[16];
        snprintf(wn, sizeof wn, "w%d", r);
        snprintf(bn, sizeof bn, "b%d", r);
        snprintf(yn, sizeof yn, "y%d", r);
        cge_t wt = cge_es_constant(bl, wn, CGE_F32, CGE_SHAPE(K, N), w[r]);
        cge_t bt = cge_es_constant(bl, bn, CGE_F32, CGE_SHAPE(N), b[r]);
        cge_es_output(bl, cge_es_add(bl, cge_es_mat_mul(bl, xt, wt), bt), yn);
        c->out[r] = (cge_tensor){.name = strdup(yn), .dtype = CGE_F32, .shape = CGE_SHAPE(M, N),
                                 .data = y[r], .bytes = (size_t)(M * N) * sizeof(float)};
    }
    cge_graph *g = NULL;
    if (cge_builder_finish(bl, &g) != CGE_OK) {
        fprintf(stderr, "%s\n", cge_builder_error_message(bl));
        exit(1);
    }
    cge_builder_destroy(bl);
    CHECK(cge_session_add_graph(s, id, g));
    cge_graph_destroy(g);
    CHECK(cge_session_compile_graph(s, id));
}

/* One plan run's wall time (the outputs bound: no copies), and one profiled
 * run's summed FusedMatMul kernel time. */
static double plan_us(side *c)
{
    cge_run_options o = {.mode = CGE_RUN_PLAN, .bind_buffers = true};
    double t0 = bench_now_us();
    CHECK(cge_session_run(c->s, c->id, &c->in, 1, c->out, c->reps, &o));
    return bench_now_us() - t0;
}

static double kernel_us(side *c)
{
    cge_run_options o = {.mode = CGE_RUN_PLAN, .profile = on_profile, .profile_user = c};
    c->kernel_us = 0;
    CHECK(cge_session_run(c->s, c->id, &c->in, 1, c->out, c->reps, &o));
    return c->kernel_us;
}

/* What merging q/k/v would gain: three products of width d against one of
 * width 3d (one launch, one read of A), REPS groups, at 2 threads (the
 * difference is the launches and the second and third reads of A). */
static void merge_table(cge_session **ses, uint32_t *id)
{
    static const int64_t ms[] = {1, 4, 16, 64, 128}, ds[] = {256, 768};
    printf("\nq/k/v merged or not: 3 products [M,d]x[d,d] against 1 of [M,d]x[d,3d]; per "
           "triple, plan run wall time, microseconds\n");
    printf("%5s %5s | %8s %8s %6s | %8s %8s %6s\n", "M", "d", "3x 1t", "1x 1t", "3x/1x",
           "3x 2t", "1x 2t", "3x/1x");
    for (size_t di = 0; di < sizeof ds / sizeof ds[0]; di++) {
        int64_t d = ds[di];
        float *w[3 * REPS], *b[3 * REPS], *y[3 * REPS];
        for (int r = 0; r < 3 * REPS; r++) {
            w[r] = fill((size_t)(d * 3 * d), 10 + r);
            b[r] = fill((size_t)(3 * d), 30 + r);
            y[r] = fill((size_t)(128 * 3 * d), 50 + r);
        }
        float *x = fill((size_t)(128 * d), 1);
        for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
            int64_t M = ms[mi];
            side c[THREADS][2];
            for (int t = 0; t < THREADS; t++) {
                build(&c[t][0], ses[t], (*id)++, M, d, d, 3 * REPS, x, w, b, y);
                build(&c[t][1], ses[t], (*id)++, M, d, 3 * d, REPS, x, w, b, y);
            }
            double res[THREADS][2], rounds[ROUNDS], v[RUNS];
            for (int t = 0; t < THREADS; t++)
                for (int k = 0; k < 2; k++) {
                    for (int i = 0; i < WARMUP; i++)
                        plan_us(&c[t][k]);
                    for (int r = 0; r < ROUNDS; r++) {
                        for (int i = 0; i < RUNS; i++)
                            v[i] = plan_us(&c[t][k]) / REPS;
                        rounds[r] = bench_median(v, RUNS);
                    }
                    res[t][k] = bench_median(rounds, ROUNDS);
                }
            printf("%5lld %5lld | %8.2f %8.2f %6.2f | %8.2f %8.2f %6.2f\n", (long long)M,
                   (long long)d, res[0][0], res[0][1], res[0][0] / res[0][1], res[1][0],
                   res[1][1], res[1][0] / res[1][1]);
            fflush(stdout);
            for (int t = 0; t < THREADS; t++)
                for (int k = 0; k < 2; k++) {
                    CHECK(cge_session_remove_graph(ses[t], c[t][k].id));
                    for (int r = 0; r < c[t][k].reps; r++)
                        free((void *)c[t][k].out[r].name);
                }
        }
        for (int r = 0; r < 3 * REPS; r++) {
            free(w[r]);
            free(b[r]);
            free(y[r]);
        }
        free(x);
    }
}

int main(int argc, char **argv)
{
    /* M, then the zoo's (K, N): attention projections (d 256/768), MLPs
     * (x4), the decoder's head, ViT-B's 768/3072 */
    static const int64_t ms[] = {1, 4, 16, 64, 128};
    static const int64_t kn[][2] = {{256, 256},  {256, 768},  {256, 1024}, {1024, 256},
                                    {256, 1000}, {768, 768},  {768, 2304}, {768, 3072},
                                    {3072, 768}};
    const char *only = argc > 1 ? argv[1] : NULL; /* "K,N", or "merge" */
    cge_session *ses[THREADS];
    for (int t = 0; t < THREADS; t++) {
        cge_session_options so = {.num_threads = t + 1};
        CHECK(cge_session_create(&so, &ses[t]));
    }
    printf("FusedMatMul (constant B, bias), %d independent products per graph; per product, "
           "microseconds:\n"
           "plan = plan run wall time / %d (outputs bound), kernel = profiled kernel time "
           "(each step waited for);\n"
           "medians over %d rounds alternating the thread counts, each the median of %d runs.\n\n",
           REPS, REPS, ROUNDS, RUNS);
    printf("%5s %5s %5s | %9s %9s %6s | %9s %9s %6s | %7s\n", "M", "K", "N", "plan 1t",
           "plan 2t", "1t/2t", "kern 1t", "kern 2t", "1t/2t", "GB/s 2t");
    uint32_t id = 1;
    for (size_t s = 0; s < sizeof kn / sizeof kn[0]; s++) {
        int64_t K = kn[s][0], N = kn[s][1];
        char tag[32];
        snprintf(tag, sizeof tag, "%lld,%lld", (long long)K, (long long)N);
        if (only && strcmp(only, tag))
            continue;
        float *w[REPS], *b[REPS], *y[REPS];
        for (int r = 0; r < REPS; r++) {
            w[r] = fill((size_t)(K * N), 10 + r);
            b[r] = fill((size_t)N, 30 + r);
            y[r] = fill((size_t)(128 * N), 50 + r);
        }
        float *x = fill((size_t)(128 * K), 1);
        for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
            int64_t M = ms[mi];
            side c[THREADS];
            for (int t = 0; t < THREADS; t++)
                build(&c[t], ses[t], id++, M, K, N, REPS, x, w, b, y);
            double plan[THREADS][ROUNDS], kern[THREADS][ROUNDS], v[RUNS];
            for (int t = 0; t < THREADS; t++)
                for (int i = 0; i < WARMUP; i++)
                    plan_us(&c[t]);
            for (int r = 0; r < ROUNDS; r++)
                for (int t = 0; t < THREADS; t++) {
                    for (int i = 0; i < RUNS; i++)
                        v[i] = plan_us(&c[t]) / REPS;
                    plan[t][r] = bench_median(v, RUNS);
                    for (int i = 0; i < RUNS; i++)
                        v[i] = kernel_us(&c[t]) / REPS;
                    kern[t][r] = bench_median(v, RUNS);
                }
            double p1 = bench_median(plan[0], ROUNDS), p2 = bench_median(plan[1], ROUNDS);
            double k1 = bench_median(kern[0], ROUNDS), k2 = bench_median(kern[1], ROUNDS);
            printf("%5lld %5lld %5lld | %9.2f %9.2f %6.2f | %9.2f %9.2f %6.2f | %7.1f\n",
                   (long long)M, (long long)K, (long long)N, p1, p2, p1 / p2, k1, k2, k1 / k2,
                   4.0 * (double)(K * N) / (p2 * 1e3));
            fflush(stdout);
            for (int t = 0; t < THREADS; t++) {
                CHECK(cge_session_remove_graph(ses[t], c[t].id));
                for (int r = 0; r < c[t].reps; r++)
                    free((void *)c[t].out[r].name);
            }
        }
        for (int r = 0; r < REPS; r++) {
            free(w[r]);
            free(b[r]);
            free(y[r]);
        }
        free(x);
    }
    if (!only || !strcmp(only, "merge"))
        merge_table(ses, &id);
    for (int t = 0; t < THREADS; t++)
        cge_session_destroy(ses[t]);
    return 0;
}
