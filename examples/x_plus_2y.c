/* x + 2y, built twice — by hand (nodes and edges) and with the functional
 * builder — and run through a session; every status is checked and the
 * result compared with x + 2y computed here. */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 (docs/quickstart.md) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cge/cge.h"

#define ROWS 8
#define COLS 2048
#define N (ROWS * COLS)

#define CHECK(call)                                                              \
    do {                                                                         \
        cge_status st_ = (call);                                                 \
        if (st_ != CGE_OK) {                                                     \
            fprintf(stderr, "%s failed: %s\n", #call, cge_last_error());         \
            goto fail;                                                           \
        }                                                                        \
    } while (0)

/* The graph by hand: Data nodes x and y, Add0 = x + y, Add1 = Add0 + y. */
static cge_status build_manual(cge_graph **out)
{
    cge_graph *g = NULL;
    cge_shape shape = CGE_SHAPE(ROWS, COLS);
    const char *add0_in[] = {"x", "y"}, *add0_out[] = {"add0_out"};
    const char *add1_in[] = {"add0_out", "y"}, *add1_out[] = {"z"};
    CHECK(cge_graph_create("x_plus_2y_manual", &g));
    CHECK(cge_graph_add_input(g, "x", CGE_F32, &shape));
    CHECK(cge_graph_add_input(g, "y", CGE_F32, &shape));
    CHECK(cge_graph_add_node(g, "Add", "", "Add0", add0_in, 2, add0_out, 1, NULL));
    CHECK(cge_graph_add_node(g, "Add", "", "Add1", add1_in, 2, add1_out, 1, NULL));
    CHECK(cge_graph_add_output(g, "z"));
    CHECK(cge_graph_verify(g));
    *out = g;
    return CGE_OK;
fail:
    cge_graph_destroy(g);
    return cge_last_error_status();
}

/* The same graph in the functional style. */
static cge_status build_functional(cge_graph **out)
{
    cge_builder *b = cge_builder_create("x_plus_2y_functional");
    if (!b) {
        fprintf(stderr, "cge_builder_create: out of memory\n");
        return CGE_ERR_NO_MEMORY;
    }
    cge_t x = cge_es_input(b, "x", CGE_F32, CGE_SHAPE(ROWS, COLS));
    cge_t y = cge_es_input(b, "y", CGE_F32, CGE_SHAPE(ROWS, COLS));
    cge_builder_set_next_name(b, "Add0");
    cge_t add0 = cge_es_add(b, x, y);
    cge_builder_set_next_name(b, "Add1");
    cge_t z = cge_es_add(b, add0, y);
    cge_es_output(b, z, "z");
    cge_status st = cge_builder_finish(b, out); /* reports the first failed call */
    if (st != CGE_OK)
        fprintf(stderr, "building x+2y failed: %s\n", cge_last_error());
    cge_builder_destroy(b);
    return st;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void summary(const char *name, const float *v)
{
    double sum = 0, lo = v[0], hi = v[0];
    for (int i = 0; i < N; i++) {
        sum += v[i];
        lo = v[i] < lo ? v[i] : lo;
        hi = v[i] > hi ? v[i] : hi;
    }
    printf("  %s: float32 [%d,%d]  min %.4f  max %.4f  mean %.4f  first [%.4f, %.4f, %.4f]\n",
           name, ROWS, COLS, lo, hi, sum / N, v[0], v[1], v[2]);
}

/* Runs graph `id` and compares with x + 2y; returns mismatches (-1 on error). */
static long run_and_check(cge_session *s, uint32_t id, const float *x, const float *y, float *z,
                          double *ms)
{
    cge_tensor in[2] = {
        {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(ROWS, COLS), .data = (void *)x, .bytes = N * 4},
        {.name = "y", .dtype = CGE_F32, .shape = CGE_SHAPE(ROWS, COLS), .data = (void *)y, .bytes = N * 4},
    };
    cge_tensor out[1] = {{.name = "z", .data = z, .bytes = N * 4}};
    CHECK(cge_session_compile_graph(s, id));
    CHECK(cge_session_run_graph(s, id, in, 2, out, 1)); /* warm-up */
    double t0 = now_ms();
    const int reps = 100;
    for (int r = 0; r < reps; r++)
        CHECK(cge_session_run_graph(s, id, in, 2, out, 1));
    *ms = (now_ms() - t0) / reps;
    long bad = 0;
    for (int i = 0; i < N; i++)
        if (fabsf(z[i] - (x[i] + 2.0f * y[i])) > 1e-5f * (1.0f + fabsf(z[i])))
            bad++;
    return bad;
fail:
    return -1;
}

int main(void)
{
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *z = malloc(N * sizeof *z);
    cge_graph *manual = NULL, *functional = NULL;
    cge_session *s = NULL;
    int rc = 1;
    if (!x || !y || !z) {
        fprintf(stderr, "out of memory\n");
        goto fail;
    }
    srand(42);
    for (int i = 0; i < N; i++) {
        x[i] = (float)rand() / RAND_MAX * 2.0f - 1.0f;
        y[i] = (float)rand() / RAND_MAX * 2.0f - 1.0f;
    }
    /* compiled against (the header) and running with (the library) */
    printf("x + 2y on cge %s (library %s)\ninputs:\n", CGE_VERSION_STRING, cge_version());
    summary("x", x);
    summary("y", y);

    if (build_manual(&manual) != CGE_OK || build_functional(&functional) != CGE_OK)
        goto fail;
    CHECK(cge_session_create(NULL, &s));
    CHECK(cge_session_add_graph(s, 1, manual));
    CHECK(cge_session_add_graph(s, 2, functional));

    const char *how[2] = {"manual", "functional"};
    bool all_ok = true;
    for (uint32_t id = 1; id <= 2; id++) {
        double ms = 0;
        long bad = run_and_check(s, id, x, y, z, &ms);
        if (bad < 0)
            goto fail;
        printf("graph %u (%s builder):\n", id, how[id - 1]);
        summary("z", z);
        printf("  z == x + 2y: %s (%ld mismatches of %d)\n", bad ? "NO" : "yes", bad, N);
        printf("  run time: %.3f ms per run (mean of 100, %d threads)\n", ms,
               cge_device_num_threads(cge_session_device(s)));
        all_ok &= bad == 0;
    }
    CHECK(cge_session_remove_graph(s, 1));
    CHECK(cge_session_remove_graph(s, 2));
    rc = all_ok ? 0 : 1;
    printf("%s\n", all_ok ? "OK" : "FAILED");
fail:
    cge_session_destroy(s);
    cge_graph_destroy(manual);
    cge_graph_destroy(functional);
    free(x);
    free(y);
    free(z);
    return rc;
}
