/* A symbolic graph's weights once packed: a MatMul weight that every reader
 * packed for any shape gives its pages back when the first signature is
 * planned (as a static graph's goes), every later signature's kernels find
 * the packed copy by its address, results are bit-equal to a session that
 * keeps the weight ($CGE_KEEP_PACKED_WEIGHTS=1), EAGER runs take the plan's
 * steps, and a signature the shape program refuses (so that it compiles,
 * which reads constants) first writes the weight back from its packed copy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"
#include "session_test_util.h"

/* 256 KiB of weight: a block of its own pages */
enum { K = 128, N = 512, MAX_ROWS = 700 };

static float W[K * N], X[MAX_ROWS * K];

static void fill(void)
{
    st_fill(W, K * N, 7, 13, 0.0625f, -0.375f);
    st_fill(X, MAX_ROWS * K, 5, 11, 0.125f, -0.625f);
}

/* y = x @ w, x [rows, K] with rows symbolic. With `counted`, also
 * z = Reshape(y, [max(Range(0, rows)) + 1, N]): a shape the shape program
 * computes on the host while Range's output is small (rows <= 512) and
 * cannot beyond, where the signature compiles. */
static cge_graph *build(bool counted)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("symbolic_weights", &g), CGE_OK);
    cge_shape xs = CGE_SHAPE(cge_graph_dim_symbol(g, "rows"), K), ws = CGE_SHAPE(K, N);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "w", CGE_F32, &ws, W, sizeof W), CGE_OK);
    const char *mm[] = {"x", "w"};
    st_add_node(g, "MatMul", "mm", mm, 2, "y", NULL);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    if (counted) {
        static const int64_t zero = 0, one = 1, one_v[1] = {1}, n_v[1] = {N};
        cge_shape s0 = {.rank = 0}, s1 = CGE_SHAPE(1);
        assert_int_equal(cge_graph_add_constant(g, "zero", CGE_I64, &s0, &zero, sizeof zero), CGE_OK);
        assert_int_equal(cge_graph_add_constant(g, "one", CGE_I64, &s0, &one, sizeof one), CGE_OK);
        assert_int_equal(cge_graph_add_constant(g, "one_v", CGE_I64, &s1, one_v, sizeof one_v),
                         CGE_OK);
        assert_int_equal(cge_graph_add_constant(g, "n_v", CGE_I64, &s1, n_v, sizeof n_v), CGE_OK);
        const char *sh[] = {"x"}, *ga[] = {"shape", "zero"}, *ra[] = {"zero", "rows", "one"},
                   *mx[] = {"range"}, *ad[] = {"top", "one_v"}, *cc[] = {"count", "n_v"},
                   *rs[] = {"y", "dims"};
        cge_node *concat = NULL;
        st_add_node(g, "Shape", "shape", sh, 1, "shape", NULL);
        st_add_node(g, "Gather", "rows", ga, 2, "rows", NULL);
        st_add_node(g, "Range", "range", ra, 3, "range", NULL);
        st_add_node(g, "ReduceMax", "top", mx, 1, "top", NULL);
        st_add_node(g, "Add", "count", ad, 2, "count", NULL);
        st_add_node(g, "Concat", "dims", cc, 2, "dims", &concat);
        assert_int_equal(cge_node_set_int(concat, "axis", 0), CGE_OK);
        st_add_node(g, "Reshape", "z", rs, 2, "z", NULL);
        assert_int_equal(cge_graph_add_output(g, "z"), CGE_OK);
    }
    return g;
}

/* y (and z with `counted`) at `rows`, into y; checked against the product
 * computed here. */
static void run(cge_session *s, int64_t rows, bool counted, cge_run_mode mode, float *y)
{
    float *z = malloc(sizeof(float) * (size_t)(rows * N));
    assert_non_null(z);
    cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(rows, K), .data = X,
                     .bytes = sizeof(float) * (size_t)(rows * K)};
    cge_tensor out[2] = {{.name = "y", .data = y, .bytes = sizeof(float) * (size_t)(rows * N)},
                         {.name = "z", .data = z, .bytes = sizeof(float) * (size_t)(rows * N)}};
    cge_run_options ro = {.mode = mode};
    assert_int_equal(cge_session_run(s, 1, &in, 1, out, counted ? 2 : 1, &ro), CGE_OK);
    assert_int_equal(out[0].shape.dims[0], rows);
    for (int64_t i = 0; i < rows; i += 7)
        for (int64_t j = 0; j < N; j += 5) {
            double want = 0;
            for (int64_t k = 0; k < K; k++)
                want += (double)X[i * K + k] * (double)W[k * N + j];
            assert_float_equal(y[i * N + j], want, 1e-3);
        }
    if (counted) {
        assert_int_equal(out[1].shape.rank, 2);
        assert_int_equal(out[1].shape.dims[0], rows);
        assert_memory_equal(z, y, sizeof(float) * (size_t)(rows * N));
    }
    free(z);
}

static const int64_t SIZES[] = {1, 3, 17, 64, 5, 200};

static void test_weight_pages_go_results_bit_equal(void **state)
{
    (void)state;
    /* Two graphs: sessions made from one graph would share its weight's
     * block, and a block someone else holds keeps its pages. */
    cge_graph *g = build(false), *gk = build(false);
    cge_session *s = st_session(g, false), *kept = st_session(gk, true);
    cge_graph_destroy(g);   /* the session's copy is the weight's only holder */
    cge_graph_destroy(gk);
    assert_int_equal(cge_session_compile_graph(s, 1), CGE_OK);
    assert_int_equal(cge_session_compile_graph(kept, 1), CGE_OK);
    cge_session_graph_stats st = st_stats(s), sk = st_stats(kept);
    assert_true(st.shape_program);
    assert_int_equal(st.released_bytes, sizeof W);
    assert_true(st.weight_bytes < sizeof W);   /* the float copy is gone */
    assert_true(st.packed_bytes >= sizeof W);
    assert_int_equal(sk.released_bytes, 0);
    assert_true(sk.weight_bytes >= sizeof W);
    float *y = malloc(sizeof(float) * MAX_ROWS * N), *yk = malloc(sizeof(float) * MAX_ROWS * N);
    assert_non_null(y);
    assert_non_null(yk);
    int64_t made0, made1;
    cge_kernel_shared_counts(&made0, NULL);
    for (size_t i = 0; i < sizeof SIZES / sizeof SIZES[0]; i++) {
        run(s, SIZES[i], false, CGE_RUN_DEFAULT, y);
        run(kept, SIZES[i], false, CGE_RUN_DEFAULT, yk);
        assert_memory_equal(y, yk, sizeof(float) * (size_t)(SIZES[i] * N));
    }
    cge_kernel_shared_counts(&made1, NULL);
    assert_int_equal(made1, made0);   /* no signature packed the weight again */
    st = st_stats(s);
    assert_int_equal(st.compiles, st_stats(kept).compiles);   /* no signature compiled */
    assert_int_equal(st.released_bytes, sizeof W);
    /* EAGER runs take the plan's steps: the same numbers. */
    run(s, 9, false, CGE_RUN_EAGER, y);
    run(kept, 9, false, CGE_RUN_PLAN, yk);
    assert_memory_equal(y, yk, sizeof(float) * 9 * N);
    free(y);
    free(yk);
    cge_session_destroy(s);
    cge_session_destroy(kept);
}

static void test_caller_graph_keeps_the_weight(void **state)
{
    (void)state;
    cge_graph *g = build(false);
    cge_session *s = st_session(g, false);
    assert_int_equal(cge_session_compile_graph(s, 1), CGE_OK);
    assert_int_equal(st_stats(s).released_bytes, 0);
    float *y = malloc(sizeof(float) * 17 * N);
    assert_non_null(y);
    run(s, 17, false, CGE_RUN_DEFAULT, y);
    const cge_tensor *w = cge_graph_constant(g, "w");
    assert_non_null(w);
    assert_memory_equal(w->data, W, sizeof W);   /* still readable, unchanged */
    free(y);
    cge_session_destroy(s);
    cge_graph_destroy(g);
}

static void test_compiled_signature_writes_the_weight_back(void **state)
{
    (void)state;
    cge_graph *g = build(true), *gk = build(true);
    cge_session *s = st_session(g, false), *kept = st_session(gk, true);
    cge_graph_destroy(g);
    cge_graph_destroy(gk);
    float *y = malloc(sizeof(float) * MAX_ROWS * N), *yk = malloc(sizeof(float) * MAX_ROWS * N);
    assert_non_null(y);
    assert_non_null(yk);
    run(s, 4, true, CGE_RUN_DEFAULT, y);
    run(s, 300, true, CGE_RUN_DEFAULT, y);
    cge_session_graph_stats st = st_stats(s);
    assert_true(st.shape_program);
    assert_int_equal(st.released_bytes, sizeof W);
    int64_t compiles = st.compiles;
    /* Range's output is over what the shape program computes: a compile,
     * which needs the weight's bytes, written back first. */
    run(s, MAX_ROWS, true, CGE_RUN_DEFAULT, y);
    run(kept, MAX_ROWS, true, CGE_RUN_DEFAULT, yk);
    assert_memory_equal(y, yk, sizeof(float) * MAX_ROWS * N);
    st = st_stats(s);
    assert_int_equal(st.compiles, compiles + 1);
    assert_int_equal(st.released_bytes, 0);
    assert_true(st.weight_bytes >= sizeof W);
    /* Every signature still right, the planned ones too. */
    for (size_t i = 0; i < sizeof SIZES / sizeof SIZES[0]; i++) {
        run(s, SIZES[i], true, CGE_RUN_DEFAULT, y);
        run(kept, SIZES[i], true, CGE_RUN_DEFAULT, yk);
        assert_memory_equal(y, yk, sizeof(float) * (size_t)(SIZES[i] * N));
    }
    free(y);
    free(yk);
    cge_session_destroy(s);
    cge_session_destroy(kept);
}

int main(void)
{
    fill();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_weight_pages_go_results_bit_equal),
        cmocka_unit_test(test_caller_graph_keeps_the_weight),
        cmocka_unit_test(test_compiled_signature_writes_the_weight_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
