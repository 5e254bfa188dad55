/* Graphs whose shapes depend on computed values (NonZero, detectors) run
 * node by node: a node whose shapes the compiled graph knows is prepared at
 * the first run only, a weight every reader packed goes once packed (as in a
 * static plan), a run at a repeated size allocates nothing, and one reader
 * whose shapes follow the values keeps a small weight (heap memory) while a
 * weight of its own pages goes (its address kept, the packed copy found by
 * it); results stay exact. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"
#include "session_test_util.h"

enum { M = 4, K = 64, N = 48 };

static float W[K * N], X[M * K];
/* a weight of its own pages (over 1 MiB) */
enum { K2 = 512, N2 = 640, M2 = 6 };
static float W2[K2 * N2], X2[M2 * K2];

static void fill(void)
{
    st_fill(W, K * N, 7, 13, 0.0625f, -0.375f);
    st_fill(X, M * K, 5, 11, 0.125f, -0.625f);
    st_fill(W2, K2 * N2, 7, 13, 0.0625f, -0.375f);
    st_fill(X2, M2 * K2, 5, 11, 0.125f, -0.625f);
}

static void add(cge_graph *g, const char *op, const char *name, const char **ins, int32_t ni,
                const char *out)
{
    st_add_node(g, op, name, ins, ni, out, NULL);
}

/* y = x @ w; nz = NonZero(y > 0) (its size depends on y's values). With
 * `rows_follow`, also r = Gather(x, the rows of x whose first element is
 * positive) @ w, a product of a value-dependent number of rows that reads w
 * too. */
static cge_graph *build(bool rows_follow)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("eager_weights", &g), CGE_OK);
    cge_shape xs = CGE_SHAPE(M, K), ws = CGE_SHAPE(K, N), one = CGE_SHAPE(1);
    static const float zero = 0.0f;
    static const int64_t col0 = 0, axis_minus1 = -1;
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "w", CGE_F32, &ws, W, sizeof W), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "zero", CGE_F32, &one, &zero, sizeof zero), CGE_OK);
    const char *mm[] = {"x", "w"}, *gt[] = {"y", "zero"}, *nz[] = {"pos"};
    add(g, "MatMul", "mm", mm, 2, "y");
    add(g, "Greater", "gt", gt, 2, "pos");
    add(g, "NonZero", "nz", nz, 1, "nz");
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "nz"), CGE_OK);
    if (rows_follow) {
        cge_shape s0 = {.rank = 0}, s1 = CGE_SHAPE(1);
        assert_int_equal(cge_graph_add_constant(g, "col0", CGE_I64, &s0, &col0, sizeof col0),
                         CGE_OK);
        assert_int_equal(cge_graph_add_constant(g, "last", CGE_I64, &s1, &axis_minus1,
                                                sizeof axis_minus1), CGE_OK);
        /* first = x[:, 0] > 0 ([M]); idx = NonZero(first) ([1, rows]) as [rows];
         * r = x[idx] @ w */
        const char *ga[] = {"x", "col0"}, *g2[] = {"x0", "zero"}, *nz2[] = {"first"},
                   *rs[] = {"idx2", "last"}, *gx[] = {"x", "idx"}, *m2[] = {"xs", "w"};
        cge_node *gather = NULL;
        const char *o1[] = {"x0"};
        assert_int_equal(cge_graph_add_node(g, "Gather", "", "g0", ga, 2, o1, 1, &gather), CGE_OK);
        assert_int_equal(cge_node_set_int(gather, "axis", 1), CGE_OK);
        add(g, "Greater", "gt2", g2, 2, "first");
        add(g, "NonZero", "nz2", nz2, 1, "idx2");
        add(g, "Reshape", "rs", rs, 2, "idx");
        add(g, "Gather", "gx", gx, 2, "xs");
        add(g, "MatMul", "mm2", m2, 2, "r");
        assert_int_equal(cge_graph_add_output(g, "r"), CGE_OK);
    }
    return g;
}

static cge_session *session_for(cge_graph *g) { return st_session(g, false); }

static cge_session_graph_stats stats(const cge_session *s) { return st_stats(s); }

static double dot(const float *x, int j)
{
    double acc = 0;
    for (int k = 0; k < K; k++)
        acc += (double)x[k] * (double)W[k * N + j];
    return acc;
}

/* One run on `x`, every output checked against a float64 reference. */
static void run(cge_session *s, const float *x, bool rows_follow)
{
    static float y[M * N], r[M * N];
    static int64_t nz[2 * M * N];
    cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(M, K), .data = (void *)x,
                     .bytes = sizeof X};
    cge_tensor out[3] = {{.name = "y", .data = y, .bytes = sizeof y},
                         {.name = "nz", .data = nz, .bytes = sizeof nz},
                         {.name = "r", .data = r, .bytes = sizeof r}};
    cge_status rs = cge_session_run_graph(s, 1, &in, 1, out, rows_follow ? 3 : 2);
    if (rs)
        print_error("%s\n", cge_last_error());
    assert_int_equal(rs, CGE_OK);
    int64_t count = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double want = dot(x + i * K, j);
            assert_float_equal(y[i * N + j], want, 1e-4);
            count += y[i * N + j] > 0;
        }
    assert_int_equal(out[1].shape.rank, 2);
    assert_int_equal(out[1].shape.dims[1], count);
    for (int64_t c = 0; c < count; c++)
        assert_true(y[nz[c] * N + nz[count + c]] > 0);
    if (!rows_follow)
        return;
    int64_t rows = 0;
    for (int i = 0; i < M; i++) {
        if (!(x[i * K] > 0))
            continue;
        for (int j = 0; j < N; j++)
            assert_float_equal(r[rows * N + j], dot(x + i * K, j), 1e-4);
        rows++;
    }
    assert_int_equal(out[2].shape.dims[0], rows);
}

static void test_fixed_nodes_prepare_once_and_release(void **state)
{
    (void)state;
    cge_graph *g = build(false);
    cge_session *s = session_for(g);
    cge_graph_destroy(g);   /* the session's copy is the weight's only holder */
    run(s, X, false);
    cge_session_graph_stats st1 = stats(s);
    /* the product's packed copy is all that stays of w */
    assert_int_equal(st1.released_bytes, sizeof W);
    assert_true(st1.packed_bytes >= sizeof W);
    assert_true(st1.weight_bytes < sizeof W);
    assert_true(st1.eager_prepares > 0);
    assert_true(st1.arena_bytes > 0);   /* the runs' buffers */
    int64_t made1, shared1, made2, shared2;
    cge_kernel_shared_counts(&made1, &shared1);
    run(s, X, false);
    run(s, X, false);
    cge_kernel_shared_counts(&made2, &shared2);
    cge_session_graph_stats st2 = stats(s);
    /* the product (a fixed node) neither packs nor looks its pack up again */
    assert_int_equal(made2, made1);
    assert_int_equal(shared2, shared1);
    /* what prepares again per run are the nodes whose shapes follow values */
    int64_t per_run = (st2.eager_prepares - st1.eager_prepares) / 2;
    assert_true(per_run < st1.eager_prepares);
    /* runs at a repeated size reuse every buffer */
    assert_int_equal(st2.eager_allocs, st1.eager_allocs);
    assert_int_equal(st2.arena_bytes, st1.arena_bytes);
    cge_session_destroy(s);
}

static void test_value_dependent_reader_keeps_weight(void **state)
{
    (void)state;
    cge_graph *g = build(true);
    cge_session *s = session_for(g);
    cge_graph_destroy(g);
    float x2[M * K];
    for (int i = 0; i < M * K; i++)
        x2[i] = -X[i];   /* other rows selected: the second product's M changes */
    run(s, X, true);
    assert_int_equal(stats(s).released_bytes, 0);
    run(s, x2, true);
    run(s, X, true);
    assert_int_equal(stats(s).released_bytes, 0);
    cge_session_destroy(s);
}

/* A weight of its own pages (1 MiB and more) read only by a product whose
 * row count follows values (Faster R-CNN's box head: as many rows as
 * proposals): the product prepares again at every run, but its packed copy
 * is found by the weight's address, so the weight's bytes go after the first
 * run (its address kept) and runs at other row counts stay exact. */
static cge_graph *build_rows_of(cge_dtype dt, const void *w, const void *zero)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("eager_rows_weight", &g), CGE_OK);
    cge_shape xs = CGE_SHAPE(M2, K2), ws = CGE_SHAPE(K2, N2), one = CGE_SHAPE(1),
              s0 = {.rank = 0};
    size_t es = cge_dtype_size(dt);
    static const int64_t col0 = 0, axis_minus1 = -1;
    assert_int_equal(cge_graph_add_input(g, "x", dt, &xs), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "w", dt, &ws, w, es * K2 * N2), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "zero", dt, &one, zero, es), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "col0", CGE_I64, &s0, &col0, sizeof col0), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "last", CGE_I64, &one, &axis_minus1,
                                            sizeof axis_minus1), CGE_OK);
    const char *ga[] = {"x", "col0"}, *g2[] = {"x0", "zero"}, *nz2[] = {"first"},
               *rs[] = {"idx2", "last"}, *gx[] = {"x", "idx"}, *m2[] = {"xs", "w"};
    cge_node *gather = NULL;
    const char *o1[] = {"x0"};
    assert_int_equal(cge_graph_add_node(g, "Gather", "", "g0", ga, 2, o1, 1, &gather), CGE_OK);
    assert_int_equal(cge_node_set_int(gather, "axis", 1), CGE_OK);
    add(g, "Greater", "gt2", g2, 2, "first");
    add(g, "NonZero", "nz2", nz2, 1, "idx2");
    add(g, "Reshape", "rs", rs, 2, "idx");
    add(g, "Gather", "gx", gx, 2, "xs");
    add(g, "MatMul", "mm2", m2, 2, "r");
    assert_int_equal(cge_graph_add_output(g, "r"), CGE_OK);
    return g;
}

static cge_graph *build_rows_only(void)
{
    static const float zero = 0.0f;
    return build_rows_of(CGE_F32, W2, &zero);
}

/* One run; returns the rows selected (each checked against float64). */
static int64_t run_rows(cge_session *s, const float *x)
{
    static float r[M2 * N2];
    cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(M2, K2), .data = (void *)x,
                     .bytes = sizeof X2};
    cge_tensor out = {.name = "r", .data = r, .bytes = sizeof r};
    cge_status rs = cge_session_run_graph(s, 1, &in, 1, &out, 1);
    if (rs)
        print_error("%s\n", cge_last_error());
    assert_int_equal(rs, CGE_OK);
    int64_t rows = 0;
    for (int i = 0; i < M2; i++) {
        if (!(x[i * K2] > 0))
            continue;
        for (int j = 0; j < N2; j += 7) {
            double acc = 0;
            for (int k = 0; k < K2; k++)
                acc += (double)x[i * K2 + k] * (double)W2[k * N2 + j];
            assert_float_equal(r[rows * N2 + j], acc, 1e-3);
        }
        rows++;
    }
    assert_int_equal(out.shape.dims[0], rows);
    return rows;
}

static void test_rows_follow_values_weight_released(void **state)
{
    (void)state;
    float neg[M2 * K2];
    for (int i = 0; i < M2 * K2; i++)
        neg[i] = -X2[i];
    cge_graph *g = build_rows_only();
    cge_session *s = session_for(g);
    cge_graph_destroy(g);   /* the session's copy is the weight's only holder */
    int64_t rows1 = run_rows(s, X2);
    cge_session_graph_stats st1 = stats(s);
    assert_int_equal(st1.released_bytes, sizeof W2);
    assert_true(st1.weight_bytes < sizeof W2);
    assert_true(st1.packed_bytes >= sizeof W2);
    int64_t made1, made2;
    cge_kernel_shared_counts(&made1, NULL);
    /* other row counts: the product prepares again and finds its packed B */
    int64_t rows2 = run_rows(s, neg);
    assert_true(rows2 != rows1);
    run_rows(s, X2);
    cge_kernel_shared_counts(&made2, NULL);
    assert_int_equal(made2, made1);   /* nothing packed again */
    assert_int_equal(stats(s).released_bytes, sizeof W2);
    cge_session_destroy(s);
}

/* The same graph with the caller's graph alive (it shares the weight's
 * block): the bytes must stay readable for it, so nothing counts as freed,
 * and runs stay exact. */
static void test_rows_follow_values_weight_shared_stays(void **state)
{
    (void)state;
    cge_graph *g = build_rows_only();
    cge_session *s = session_for(g);
    run_rows(s, X2);
    assert_int_equal(stats(s).released_bytes, 0);
    const cge_tensor *w = cge_graph_constant(g, "w");
    assert_non_null(w->data);
    assert_memory_equal(w->data, W2, sizeof W2);   /* still the caller's bytes */
    float neg[M2 * K2];
    for (int i = 0; i < M2 * K2; i++)
        neg[i] = -X2[i];
    run_rows(s, neg);
    cge_session_destroy(s);
    cge_graph_destroy(g);
}

static void test_keep_packed_weights_env(void **state)
{
    (void)state;
    cge_graph *g = build(false);
    cge_session *s = st_session(g, true);
    cge_graph_destroy(g);
    run(s, X, false);
    run(s, X, false);
    assert_int_equal(stats(s).released_bytes, 0);
    cge_session_destroy(s);
}

/* An EAGER run requested on the value-dependent graph (its weights freed)
 * still runs node by node, with the same results. */
static void test_eager_mode_after_release(void **state)
{
    (void)state;
    cge_graph *g = build(false);
    cge_session *s = session_for(g);
    cge_graph_destroy(g);
    run(s, X, false);
    assert_int_equal(stats(s).released_bytes, sizeof W);
    static float y[M * N];
    static int64_t nz[2 * M * N];
    cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(M, K), .data = X,
                     .bytes = sizeof X};
    cge_tensor out[2] = {{.name = "y", .data = y, .bytes = sizeof y},
                         {.name = "nz", .data = nz, .bytes = sizeof nz}};
    cge_run_options ro = {.mode = CGE_RUN_EAGER};
    assert_int_equal(cge_session_run(s, 1, &in, 1, out, 2, &ro), CGE_OK);
    for (int j = 0; j < N; j++)
        assert_float_equal(y[j], dot(X, j), 1e-4);
    cge_session_destroy(s);
}

/* The same box-head shape with a weight the compiler makes (a float16
 * model's weight, widened to float32 at compile time): it lives in the
 * compiled graph only, and must be shared across the product's prepares as
 * the session graph's weights are. It was not: the first run freed its
 * pages once packed, and the next prepare (at another row count) packed it
 * again from the freed pages (a crash). */
static void test_compiler_made_weight_found_again(void **state)
{
    (void)state;
    static uint16_t w16[K2 * N2], x16[M2 * K2], neg16[M2 * K2], r16[M2 * N2];
    for (int i = 0; i < K2 * N2; i++)
        w16[i] = cge_f32_to_f16(W2[i]);
    for (int i = 0; i < M2 * K2; i++) {
        x16[i] = cge_f32_to_f16(X2[i]);
        neg16[i] = cge_f32_to_f16(-X2[i]);
    }
    static const uint16_t zero16 = 0;
    cge_shape xs = CGE_SHAPE(M2, K2);
    cge_graph *g = build_rows_of(CGE_F16, w16, &zero16);
    cge_session *s = session_for(g);
    cge_graph_destroy(g);
    int64_t made1 = 0, made2 = 0;
    for (int run = 0; run < 3; run++) {
        const uint16_t *x = run == 1 ? neg16 : x16;
        cge_tensor in = {.name = "x", .dtype = CGE_F16, .shape = xs, .data = (void *)x,
                         .bytes = sizeof x16};
        cge_tensor out = {.name = "r", .data = r16, .bytes = sizeof r16};
        cge_status rs2 = cge_session_run_graph(s, 1, &in, 1, &out, 1);
        if (rs2)
            fail_msg("run %d: %s", run, cge_last_error());
        int64_t rows = 0;
        for (int i = 0; i < M2; i++) {
            if (!(cge_f16_to_f32(x[i * K2]) > 0))
                continue;
            for (int j = 0; j < N2; j += 7) {
                double acc = 0;
                for (int k = 0; k < K2; k++)
                    acc += (double)cge_f16_to_f32(x[i * K2 + k]) * cge_f16_to_f32(w16[k * N2 + j]);
                double got = cge_f16_to_f32(r16[rows * N2 + j]);
                assert_true(fabs(got - acc) <= 2e-3 * (1 + fabs(acc)));
            }
            rows++;
        }
        assert_int_equal(out.shape.dims[0], rows);
        if (run == 0) {
            cge_kernel_shared_counts(&made1, NULL);
            assert_true(stats(s).released_bytes >= sizeof W2);  /* the widened W went */
        }
    }
    cge_kernel_shared_counts(&made2, NULL);
    assert_int_equal(made2, made1);   /* found again, not packed again */
    cge_session_destroy(s);
}

int main(void)
{
    fill();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed_nodes_prepare_once_and_release),
        cmocka_unit_test(test_value_dependent_reader_keeps_weight),
        cmocka_unit_test(test_rows_follow_values_weight_released),
        cmocka_unit_test(test_rows_follow_values_weight_shared_stays),
        cmocka_unit_test(test_keep_packed_weights_env),
        cmocka_unit_test(test_eager_mode_after_release),
        cmocka_unit_test(test_compiler_made_weight_found_again),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
