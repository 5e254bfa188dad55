/* A graph with a symbolic batch compiles once for every size: results equal
 * a static compile of each size, and weights packed for one signature serve
 * the others (counted by cge_kernel_shared_counts). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"

enum { C = 3, H = 6, M = 4, K = M * H * H, NOUT = 16, MAXN = 8 };

/* x [N,3,6,6] -> Conv(3x3, pad 1) -> BatchNormalization -> Relu -> Flatten
 * -> MatMul(W2 [144,16]) + b2 -> y [N,16]: BatchNormalization folds into the
 * convolution and the MatMul gets a packed constant B. */
static cge_graph *build(int64_t n_static)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("sym", &g), CGE_OK);
    int64_t n = n_static > 0 ? n_static : cge_graph_dim_symbol(g, "batch");
    cge_shape xs = CGE_SHAPE(n, C, H, H), ws = CGE_SHAPE(M, C, 3, 3), cs = CGE_SHAPE(M);
    cge_shape w2s = CGE_SHAPE(K, NOUT), b2s = CGE_SHAPE(NOUT);
    static float w[M * C * 9], sc[M], bi[M], mean[M], var[M], w2[K * NOUT], b2[NOUT];
    for (int i = 0; i < M * C * 9; i++)
        w[i] = (float)((i * 7) % 11) * 0.05f - 0.25f;
    for (int i = 0; i < M; i++) {
        sc[i] = 1.0f + 0.1f * (float)i;
        bi[i] = 0.05f * (float)i;
        mean[i] = 0.01f * (float)i;
        var[i] = 0.5f + 0.25f * (float)i;
    }
    for (int i = 0; i < K * NOUT; i++)
        w2[i] = (float)((i * 13) % 17) * 0.01f - 0.08f;
    for (int i = 0; i < NOUT; i++)
        b2[i] = 0.1f * (float)i;
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "w", CGE_F32, &ws, w, sizeof w), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "scale", CGE_F32, &cs, sc, sizeof sc), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "bias", CGE_F32, &cs, bi, sizeof bi), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "mean", CGE_F32, &cs, mean, sizeof mean), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "var", CGE_F32, &cs, var, sizeof var), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "w2", CGE_F32, &w2s, w2, sizeof w2), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "b2", CGE_F32, &b2s, b2, sizeof b2), CGE_OK);
    const char *cv[] = {"x", "w"}, *bn[] = {"c", "scale", "bias", "mean", "var"}, *re[] = {"n"};
    const char *fl[] = {"r"}, *mm[] = {"f", "w2"}, *ad[] = {"m", "b2"};
    const char *oc[] = {"c"}, *on[] = {"n"}, *orl[] = {"r"}, *of[] = {"f"}, *om[] = {"m"},
               *oy[] = {"y"};
    cge_node *conv = NULL;
    assert_int_equal(cge_graph_add_node(g, "Conv", "", "conv", cv, 2, oc, 1, &conv), CGE_OK);
    int64_t pads[4] = {1, 1, 1, 1};
    assert_int_equal(cge_node_set_ints(conv, "pads", pads, 4), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "BatchNormalization", "", "bn", bn, 5, on, 1, NULL),
                     CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Relu", "", "relu", re, 1, orl, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Flatten", "", "flat", fl, 1, of, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "MatMul", "", "mm", mm, 2, om, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Add", "", "add", ad, 2, oy, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    return g;
}

static void run(cge_session *s, int64_t n, float *y)
{
    static float x[MAXN * C * H * H];
    for (int i = 0; i < MAXN * C * H * H; i++)
        x[i] = (float)((i * 5) % 9) * 0.125f - 0.5f;
    cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(n, C, H, H), .data = x,
                     .bytes = sizeof(float) * (size_t)(n * C * H * H)};
    cge_tensor out = {.name = "y", .data = y, .bytes = sizeof(float) * MAXN * NOUT};
    assert_int_equal(cge_session_run_graph(s, 1, &in, 1, &out, 1), CGE_OK);
    assert_int_equal(out.shape.rank, 2);
    assert_int_equal(out.shape.dims[0], n);
    assert_int_equal(out.shape.dims[1], NOUT);
}

static void test_one_compile_serves_every_batch(void **state)
{
    (void)state;
    static const int64_t sizes[] = {1, 2, 3, 5, 8, 2, 1};
    const int ns = (int)(sizeof sizes / sizeof sizes[0]);
    for (int rep = 0; rep < 2; rep++)
    for (cge_opt_level level = CGE_OPT_NONE; level <= CGE_OPT_LAYOUT; level++) {
        cge_session_options so = {.opt_level = level,
                                  .run_mode = rep ? CGE_RUN_REPLAY : CGE_RUN_PLAN};
        cge_session *s = NULL;
        assert_int_equal(cge_session_create(&so, &s), CGE_OK);
        cge_graph *g = build(0);
        assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
        cge_graph_destroy(g);
        int64_t made0, shared0, made1, shared1;
        for (int k = 0; k < ns; k++) {
            float y[MAXN * NOUT], want[MAXN * NOUT];
            cge_kernel_shared_counts(&made0, &shared0);
            run(s, sizes[k], y);
            cge_kernel_shared_counts(&made1, &shared1);
            /* Sizes after the first pack nothing: what they need is shared. */
            if (k > 0)
                assert_int_equal(made1, made0);
            if (k > 0 && k < 5 && level >= CGE_OPT_FUSE)
                assert_true(shared1 > shared0);
            /* The same as a graph compiled for this size alone. */
            cge_session *r = NULL;
            assert_int_equal(cge_session_create(&so, &r), CGE_OK);
            cge_graph *gs = build(sizes[k]);
            assert_int_equal(cge_session_add_graph(r, 1, gs), CGE_OK);
            cge_graph_destroy(gs);
            run(r, sizes[k], want);
            cge_session_destroy(r);
            for (int64_t i = 0; i < sizes[k] * NOUT; i++)
                assert_float_equal(y[i], want[i], 1e-5f * (1.0f + (want[i] < 0 ? -want[i] : want[i])));
        }
        /* Every signature ran in one arena: the largest plan's (the symbolic
         * plan's at MAXN, as the session made it), grown by half at a time. */
        cge_plan *prep = NULL, *sym = NULL, *big = NULL;
        cge_graph *gb = build(0);
        cge_compile_options co = {.opt_level = level, .allow_incomplete = true};
        assert_int_equal(cge_compile(gb, NULL, 0, &co, &prep), CGE_OK);
        co.symbolic_plan = true;
        assert_int_equal(cge_compile(cge_plan_graph(prep), NULL, 0, &co, &sym), CGE_OK);
        assert_true(cge_plan_is_symbolic(sym));
        cge_shape big_shape = CGE_SHAPE(MAXN, C, H, H);
        assert_int_equal(cge_plan_specialize(sym, &big_shape, 1, cge_session_device(s), &big),
                         CGE_OK);
        size_t arena = 0;
        assert_int_equal(cge_session_arena_bytes(s, 1, &arena), CGE_OK);
        assert_true(arena >= cge_plan_arena_bytes(big));
        assert_true(arena <= cge_plan_arena_bytes(big) + cge_plan_arena_bytes(big) / 2);
        cge_plan_destroy(big);
        cge_plan_destroy(sym);
        cge_plan_destroy(prep);
        cge_graph_destroy(gb);
        cge_session_destroy(s);
    }
}

/* Runs alternating between sizes after the arena grew read and write the
 * moved arena (replays captured before the move are captured again). */
static void test_signatures_share_a_grown_arena(void **state)
{
    (void)state;
    cge_session_options so = {.run_mode = CGE_RUN_REPLAY};
    cge_session *s = NULL, *r = NULL;
    assert_int_equal(cge_session_create(&so, &s), CGE_OK);
    assert_int_equal(cge_session_create(&so, &r), CGE_OK);
    cge_graph *g = build(0);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    assert_int_equal(cge_session_add_graph(r, 1, g), CGE_OK);
    cge_graph_destroy(g);
    float want[2][MAXN * NOUT], y[MAXN * NOUT];
    run(r, 1, want[0]);
    cge_session_destroy(r);
    assert_int_equal(cge_session_create(&so, &r), CGE_OK);
    g = build(0);
    assert_int_equal(cge_session_add_graph(r, 1, g), CGE_OK);
    cge_graph_destroy(g);
    run(r, MAXN, want[1]);
    cge_session_destroy(r);
    size_t before = 0, after = 0;
    run(s, 1, y);
    assert_int_equal(cge_session_arena_bytes(s, 1, &before), CGE_OK);
    for (int k = 0; k < 6; k++) {
        int64_t n = k % 2 ? 1 : MAXN;
        run(s, n, y);
        assert_memory_equal(y, want[k % 2 ? 0 : 1], sizeof(float) * (size_t)(n * NOUT));
    }
    assert_int_equal(cge_session_arena_bytes(s, 1, &after), CGE_OK);
    assert_true(after > before);
    cge_session_destroy(s);
}

/* Shape buckets: sizes round up to 2, 4 or 8 (inputs padded, outputs cut
 * back), so seven sizes compile three signatures, and every result equals an
 * unpadded run's. */
static void test_buckets_pad_and_cut(void **state)
{
    (void)state;
    static const int64_t sizes[] = {2, 4, 8};
    cge_dim_buckets b = {.dim = "batch", .sizes = sizes, .num_sizes = 3};
    cge_session_options so = {.buckets = &b, .num_buckets = 1};
    cge_session_options plain = {0};
    cge_session *s = NULL, *r = NULL;
    assert_int_equal(cge_session_create(&so, &s), CGE_OK);
    assert_int_equal(cge_session_create(&plain, &r), CGE_OK);
    cge_graph *g = build(0);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    assert_int_equal(cge_session_add_graph(r, 1, g), CGE_OK);
    cge_graph_destroy(g);
    static const int64_t runs[] = {1, 2, 3, 4, 5, 7, 8, 1};
    int64_t clones = 0;
    for (int k = 0; k < 8; k++) {
        float y[MAXN * NOUT], want[MAXN * NOUT];
        memset(y, 0x7f, sizeof y);
        int64_t c0 = cge_graph_clone_count();
        run(s, runs[k], y);
        if (k > 0)
            clones += cge_graph_clone_count() - c0;
        run(r, runs[k], want);
        for (int64_t i = 0; i < runs[k] * NOUT; i++)
            assert_float_equal(y[i], want[i], 1e-5f * (1.0f + (want[i] < 0 ? -want[i] : want[i])));
    }
    /* Buckets 2, 4 and 8 planned by the shape program, nothing compiled. */
    assert_int_equal(clones, 0);
    cge_session_graph_stats gs;
    assert_int_equal(cge_session_get_graph_stats(s, 1, &gs), CGE_OK);
    assert_int_equal(gs.specializations, 3);
    cge_session_destroy(s);
    cge_session_destroy(r);
    /* Bad declarations are refused at create. */
    static const int64_t zero[] = {0};
    cge_dim_buckets bad = {.dim = "batch", .sizes = zero, .num_sizes = 1};
    so.buckets = &bad;
    assert_int_equal(cge_session_create(&so, &s), CGE_ERR_INVALID_ARG);
    assert_non_null(strstr(cge_last_error(), "[session]"));
}

/* A size given where the graph fixes a dim is refused before any run. */
static void test_wrong_static_dim_is_refused(void **state)
{
    (void)state;
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    cge_graph *g = build(0);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    static float x[2 * C * 7 * 7], y[2 * NOUT];
    cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(2, C, 7, 7), .data = x,
                     .bytes = sizeof x};
    cge_tensor out = {.name = "y", .data = y, .bytes = sizeof y};
    assert_int_equal(cge_session_run_graph(s, 1, &in, 1, &out, 1), CGE_ERR_SHAPE);
    assert_non_null(strstr(cge_last_error(), "[session]"));
    assert_non_null(strstr(cge_last_error(), "'x'"));
    cge_session_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_compile_serves_every_batch),
        cmocka_unit_test(test_signatures_share_a_grown_arena),
        cmocka_unit_test(test_buckets_pad_and_cut),
        cmocka_unit_test(test_wrong_static_dim_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
