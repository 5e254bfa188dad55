/* Dispatch cost: (1) runtime level — 10,000 one-block trivial kernels
 * submitted one by one (eager) vs captured once and replayed; (2) graph level
 * — a chain of 1,000 Add nodes (t = t + b) in eager, plan and replay modes.
 * Prints one JSON object per line; bench/dispatch.py puts it beside ONNX
 * Runtime. Not a test: no assertion on time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cge/cge.h"
#include "bench_common.h"

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

typedef struct { volatile long *counter; } trivial_args;

static void trivial_kernel(int64_t b, int64_t nb, void *p)
{
    (void)b;
    (void)nb;
    trivial_args *a = p;
    (*a->counter)++;
}

static void bench_runtime(cge_device *dev, int tasks, int reps)
{
    cge_stream *s = NULL;
    CHECK(cge_stream_create(dev, &s));
    volatile long counter = 0;
    trivial_args args = {&counter};
    double *eager = malloc(sizeof(double) * (size_t)reps), *replay = malloc(sizeof(double) * (size_t)reps);
    for (int r = 0; r < reps; r++) {
        double t0 = now_ns();
        for (int i = 0; i < tasks; i++)
            CHECK(cge_launch(s, trivial_kernel, 1, &args, sizeof args));
        CHECK(cge_stream_synchronize(s));
        eager[r] = (now_ns() - t0) / tasks;
    }
    cge_ri *ri = NULL;
    CHECK(cge_stream_begin_capture(s, CGE_CAPTURE_GLOBAL));
    for (int i = 0; i < tasks; i++)
        CHECK(cge_launch(s, trivial_kernel, 1, &args, sizeof args));
    CHECK(cge_stream_end_capture(s, &ri));
    for (int r = 0; r < reps; r++) {
        double t0 = now_ns();
        CHECK(cge_ri_execute_async(ri, s));
        CHECK(cge_stream_synchronize(s));
        replay[r] = (now_ns() - t0) / tasks;
    }
    long expect = (long)tasks * reps * 2;
    if (counter != expect) {
        fprintf(stderr, "runtime bench: %ld kernel calls, expected %ld\n", counter, expect);
        exit(1);
    }
    double e = bench_median(eager, reps), p = bench_median(replay, reps);
    printf("{\"bench\": \"runtime\", \"tasks\": %d, \"eager_ns_per_task\": %.1f, "
           "\"replay_ns_per_task\": %.1f, \"replay_over_eager\": %.4f}\n",
           tasks, e, p, p / e);
    cge_ri_destroy(ri);
    cge_stream_destroy(s);
    free(eager);
    free(replay);
}

static cge_graph *add_chain(int nodes, int64_t rows, int64_t cols, float *bvals)
{
    cge_builder *b = cge_builder_create("add_chain");
    cge_t t = cge_es_input(b, "x", CGE_F32, CGE_SHAPE(rows, cols));
    cge_t c = cge_es_constant(b, "b", CGE_F32, CGE_SHAPE(rows, cols), bvals);
    for (int i = 0; i < nodes; i++)
        t = cge_es_add(b, t, c);
    cge_es_output(b, t, "y");
    cge_graph *g = NULL;
    CHECK(cge_builder_finish(b, &g));
    cge_builder_destroy(b);
    return g;
}

static void bench_graph(cge_session *s, const char *opt, int nodes, int64_t rows, int64_t cols,
                        int reps)
{
    size_t n = (size_t)(rows * cols);
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *bv = malloc(n * sizeof *bv);
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)(i % 7);
        bv[i] = 0.001f * (float)(i % 3);
    }
    cge_graph *g = add_chain(nodes, rows, cols, bv);
    static uint32_t next_id = 1;
    uint32_t id = next_id++;
    CHECK(cge_session_add_graph(s, id, g));
    cge_graph_destroy(g);
    CHECK(cge_session_compile_graph(s, id));
    cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(rows, cols), .data = x, .bytes = n * 4};
    cge_tensor out = {.name = "y", .data = y, .bytes = n * 4};
    const cge_run_mode modes[3] = {CGE_RUN_EAGER, CGE_RUN_PLAN, CGE_RUN_REPLAY};
    double per_node[3];
    double *t = malloc(sizeof(double) * (size_t)reps);
    for (int m = 0; m < 3; m++) {
        cge_run_options o = {.mode = modes[m]};
        CHECK(cge_session_run(s, id, &in, 1, &out, 1, &o)); /* warm-up (captures for replay) */
        for (int r = 0; r < reps; r++) {
            double t0 = now_ns();
            CHECK(cge_session_run(s, id, &in, 1, &out, 1, &o));
            t[r] = (now_ns() - t0) / 1e3 / nodes;
        }
        per_node[m] = bench_median(t, reps);
        for (size_t i = 0; i < n; i++) {
            float want = x[i];
            for (int k = 0; k < nodes; k++)
                want += bv[i];
            if (y[i] - want > 1e-3f || want - y[i] > 1e-3f) {
                fprintf(stderr, "graph bench: wrong result in %s mode at %zu\n",
                        cge_run_mode_name(modes[m]), i);
                exit(1);
            }
        }
    }
    printf("{\"bench\": \"graph\", \"opt\": \"%s\", \"nodes\": %d, \"shape\": [%lld, %lld], "
           "\"eager_us_per_node\": %.4f, \"plan_us_per_node\": %.4f, \"replay_us_per_node\": %.4f}\n",
           opt, nodes, (long long)rows, (long long)cols, per_node[0], per_node[1], per_node[2]);
    CHECK(cge_session_remove_graph(s, id));
    free(t);
    free(x);
    free(y);
    free(bv);
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    cge_device *dev = NULL;
    cge_device_options dopt = {.num_threads = threads};
    CHECK(cge_device_create_cpu(&dopt, &dev));
    bench_runtime(dev, 10000, 15);
    /* Without optimization every Add stays a node: this measures dispatch.
     * With the default level the compiler fuses the chain: this measures
     * what a user gets. */
    const struct { cge_opt_level level; const char *name; } opts[2] = {
        {CGE_OPT_NONE, "none"}, {CGE_OPT_DEFAULT, "default"}};
    for (int o = 0; o < 2; o++) {
        cge_session *s = NULL;
        cge_session_options so = {.device = dev, .opt_level = opts[o].level};
        CHECK(cge_session_create(&so, &s));
        bench_graph(s, opts[o].name, 1000, 1, 16, 30);
        bench_graph(s, opts[o].name, 1000, 8, 2048, 10);
        cge_session_destroy(s);
    }
    cge_device_destroy(dev);
    return 0;
}
