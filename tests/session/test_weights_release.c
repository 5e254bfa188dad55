/* Weights packed once and freed after: a constant MatMul weight is packed
 * when the session compiles and never on a run (cge_kernel_shared_counts);
 * with static shapes its float copy goes once packed, unless another node
 * reads it, the caller still holds it, or the shapes are symbolic; results
 * are the same either way. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"
#include "session_test_util.h"

enum { M = 4, K = 64, N = 48 };

static float W[K * N], X[M * K], X2[K * N];

static void fill(void)
{
    st_fill(W, K * N, 7, 13, 0.0625f, -0.375f);
    st_fill(X2, K * N, 3, 5, 0.5f, 0.0f);
    st_fill(X, M * K, 5, 11, 0.125f, -0.625f);
}

/* y = x @ w (x [m, K], m symbolic when m < 0); with `shared_use` also
 * z = w + x2, so that w has a reader that does not pack it. */
static cge_graph *build(int64_t m, bool shared_use)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("release", &g), CGE_OK);
    int64_t rows = m > 0 ? m : cge_graph_dim_symbol(g, "rows");
    cge_shape xs = CGE_SHAPE(rows, K), ws = CGE_SHAPE(K, N);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "w", CGE_F32, &ws, W, sizeof W), CGE_OK);
    const char *mm[] = {"x", "w"}, *oy[] = {"y"};
    assert_int_equal(cge_graph_add_node(g, "MatMul", "", "mm", mm, 2, oy, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    if (shared_use) {
        assert_int_equal(cge_graph_add_input(g, "x2", CGE_F32, &ws), CGE_OK);
        const char *ad[] = {"w", "x2"}, *oz[] = {"z"};
        assert_int_equal(cge_graph_add_node(g, "Add", "", "add", ad, 2, oz, 1, NULL), CGE_OK);
        assert_int_equal(cge_graph_add_output(g, "z"), CGE_OK);
    }
    return g;
}

static void run(cge_session *s, bool shared_use)
{
    float y[M * N], z[K * N];
    cge_tensor in[2] = {
        {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(M, K), .data = X, .bytes = sizeof X},
        {.name = "x2", .dtype = CGE_F32, .shape = CGE_SHAPE(K, N), .data = X2,
         .bytes = sizeof X2}};
    cge_tensor out[2] = {{.name = "y", .data = y, .bytes = sizeof y},
                         {.name = "z", .data = z, .bytes = sizeof z}};
    int32_t n = shared_use ? 2 : 1;
    assert_int_equal(cge_session_run_graph(s, 1, in, n, out, n), CGE_OK);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double want = 0;
            for (int k = 0; k < K; k++)
                want += (double)X[i * K + k] * (double)W[k * N + j];
            assert_float_equal(y[i * N + j], want, 1e-4);
        }
    for (int i = 0; shared_use && i < K * N; i++)
        assert_float_equal(z[i], W[i] + X2[i], 0);
}

static cge_session *session_for(cge_graph *g) { return st_session(g, false); }

static cge_session_graph_stats stats(const cge_session *s) { return st_stats(s); }

static void test_packed_once_then_freed(void **state)
{
    (void)state;
    cge_graph *g = build(M, false);
    cge_session *s = session_for(g);
    cge_graph_destroy(g);   /* the session's copy is the weight's only holder */
    int64_t made0, made1, made2;
    cge_kernel_shared_counts(&made0, NULL);
    assert_int_equal(cge_session_compile_graph(s, 1), CGE_OK);
    cge_kernel_shared_counts(&made1, NULL);
    assert_int_equal(made1, made0 + 1);   /* packed at prepare, once */
    cge_session_graph_stats st = stats(s);
    assert_int_equal(st.released_bytes, sizeof W);
    assert_true(st.packed_bytes >= sizeof W);
    assert_true(st.weight_bytes < sizeof W);  /* the float copy is gone */
    run(s, false);
    run(s, false);
    cge_kernel_shared_counts(&made2, NULL);
    assert_int_equal(made2, made1);        /* no run packed anything */
    assert_int_equal(stats(s).released_bytes, sizeof W);
    cge_session_destroy(s);
}

static void test_caller_graph_keeps_its_weights(void **state)
{
    (void)state;
    cge_graph *g = build(M, false);
    cge_session *s = session_for(g);
    assert_int_equal(cge_session_compile_graph(s, 1), CGE_OK);
    run(s, false);
    /* The session let go of its reference only: the caller's graph still
     * has the bytes, and compiles again. */
    const cge_tensor *w = cge_graph_constant(g, "w");
    assert_non_null(w);
    assert_non_null(w->data);
    assert_memory_equal(w->data, W, sizeof W);
    cge_session *again = session_for(g);
    run(again, false);
    cge_session_destroy(again);
    cge_session_destroy(s);
    cge_graph_destroy(g);
}

static void test_other_reader_keeps_the_weight(void **state)
{
    (void)state;
    cge_graph *g = build(M, true);
    cge_session *s = session_for(g);
    cge_graph_destroy(g);
    assert_int_equal(cge_session_compile_graph(s, 1), CGE_OK);
    assert_int_equal(stats(s).released_bytes, 0);
    assert_true(stats(s).weight_bytes >= sizeof W);
    run(s, true);
    run(s, true);
    cge_session_destroy(s);
}

static void test_symbolic_shapes_keep_the_weight(void **state)
{
    (void)state;
    cge_graph *g = build(-1, false);
    cge_session *s = session_for(g);
    cge_graph_destroy(g);
    run(s, false);
    assert_int_equal(stats(s).released_bytes, 0);
    run(s, false);
    cge_session_destroy(s);
}

static void test_keep_packed_weights_env(void **state)
{
    (void)state;
    cge_graph *g = build(M, false);
    cge_session *s = st_session(g, true);
    cge_graph_destroy(g);
    assert_int_equal(cge_session_compile_graph(s, 1), CGE_OK);
    assert_int_equal(stats(s).released_bytes, 0);
    assert_true(stats(s).weight_bytes >= sizeof W);
    run(s, false);
    cge_session_destroy(s);
}

/* A small CNN: convolution weights reordered by oneDNN go too (where this
 * build has oneDNN), and the results equal a session that keeps them. */
static void test_conv_weights_freed_results_unchanged(void **state)
{
    (void)state;
    enum { C = 8, H = 10, F = 16 };
    static float w[F * C * 9], x[C * H * H], y[2][F * H * H];
    for (int i = 0; i < F * C * 9; i++)
        w[i] = (float)((i * 11) % 17) * 0.03f - 0.24f;
    for (int i = 0; i < C * H * H; i++)
        x[i] = (float)((i * 7) % 9) * 0.1f - 0.4f;
    for (int keep = 0; keep < 2; keep++) {
        if (keep)
            setenv("CGE_KEEP_PACKED_WEIGHTS", "1", 1);
        cge_graph *g = NULL;
        assert_int_equal(cge_graph_create("cnn", &g), CGE_OK);
        cge_shape xs = CGE_SHAPE(1, C, H, H), ws = CGE_SHAPE(F, C, 3, 3);
        assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
        assert_int_equal(cge_graph_add_constant(g, "w", CGE_F32, &ws, w, sizeof w), CGE_OK);
        const char *cv[] = {"x", "w"}, *oc[] = {"c"}, *re[] = {"c"}, *oy[] = {"y"};
        cge_node *conv = NULL;
        assert_int_equal(cge_graph_add_node(g, "Conv", "", "conv", cv, 2, oc, 1, &conv), CGE_OK);
        int64_t pads[4] = {1, 1, 1, 1};
        assert_int_equal(cge_node_set_ints(conv, "pads", pads, 4), CGE_OK);
        assert_int_equal(cge_graph_add_node(g, "Relu", "", "relu", re, 1, oy, 1, NULL), CGE_OK);
        assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
        cge_session *s = session_for(g);
        unsetenv("CGE_KEEP_PACKED_WEIGHTS");
        cge_graph_destroy(g);
        cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = xs, .data = x, .bytes = sizeof x};
        cge_tensor out = {.name = "y", .data = y[keep], .bytes = sizeof y[keep]};
        assert_int_equal(cge_session_run_graph(s, 1, &in, 1, &out, 1), CGE_OK);
        assert_int_equal(cge_session_run_graph(s, 1, &in, 1, &out, 1), CGE_OK);
        cge_session_graph_stats st = stats(s);
        if (keep)
            assert_int_equal(st.released_bytes, 0);
        else if (st.packed_bytes >= sizeof w)   /* oneDNN reordered W */
            assert_int_equal(st.released_bytes, sizeof w);
        cge_session_destroy(s);
    }
    assert_memory_equal(y[0], y[1], sizeof y[0]);
}

int main(void)
{
    fill();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_packed_once_then_freed),
        cmocka_unit_test(test_caller_graph_keeps_its_weights),
        cmocka_unit_test(test_other_reader_keeps_the_weight),
        cmocka_unit_test(test_symbolic_shapes_keep_the_weight),
        cmocka_unit_test(test_keep_packed_weights_env),
        cmocka_unit_test(test_conv_weights_freed_results_unchanged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
