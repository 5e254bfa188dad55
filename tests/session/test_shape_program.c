/* Symbolic graphs planned once: every new input signature's plan comes from
 * the symbolic plan's shape program (no compile, no clone, no inference over
 * the graph), with results equal to a compile of each size; the arena grows
 * geometrically under a decode loop; value-dependent graphs fall back to a
 * compile per signature; bad shapes give the [meta] errors a compile gives. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"

enum { D = 16, MAXB = 4, MAXS = 8 };

static void add_node(cge_graph *g, const char *op, const char *name, const char **in, int ni,
                     const char **out, int no, cge_node **n)
{
    assert_int_equal(cge_graph_add_node(g, op, "", name, in, ni, out, no, n), CGE_OK);
}

/* x [batch, seq, 16] -> h = Relu(x W + b) -> y = Softmax(Reshape(h, [Shape(h)[0], -1]))
 * [batch, seq*16], and z = h + x: the Reshape's target is computed in the
 * graph, so its shape needs the shape program's evaluated values. */
static cge_graph *build(int64_t bsz, int64_t seq)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("sp", &g), CGE_OK);
    int64_t b = bsz > 0 ? bsz : cge_graph_dim_symbol(g, "batch");
    int64_t s = seq > 0 ? seq : cge_graph_dim_symbol(g, "seq");
    cge_shape xs = CGE_SHAPE(b, s, D), ws = CGE_SHAPE(D, D), bs = CGE_SHAPE(D), i1 = CGE_SHAPE(1);
    static float w[D * D], bias[D];
    for (int i = 0; i < D * D; i++)
        w[i] = (float)((i * 7) % 13) * 0.03f - 0.15f;
    for (int i = 0; i < D; i++)
        bias[i] = 0.02f * (float)i - 0.1f;
    int64_t zero = 0, minus1 = -1;
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "w", CGE_F32, &ws, w, sizeof w), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "bias", CGE_F32, &bs, bias, sizeof bias), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "i0", CGE_I64, &i1, &zero, sizeof zero), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "m1", CGE_I64, &i1, &minus1, sizeof minus1),
                     CGE_OK);
    const char *mm[] = {"x", "w"}, *om[] = {"m"}, *ad[] = {"m", "bias"}, *oa[] = {"a"};
    const char *re[] = {"a"}, *oh[] = {"h"}, *sh[] = {"h"}, *osh[] = {"sh"};
    const char *ga[] = {"sh", "i0"}, *oga[] = {"b0"}, *cc[] = {"b0", "m1"}, *occ[] = {"tgt"};
    const char *rs[] = {"h", "tgt"}, *ors[] = {"r"}, *sm[] = {"r"}, *oy[] = {"y"};
    const char *ad2[] = {"h", "x"}, *oz[] = {"z"};
    cge_node *n = NULL;
    add_node(g, "MatMul", "mm", mm, 2, om, 1, NULL);
    add_node(g, "Add", "add", ad, 2, oa, 1, NULL);
    add_node(g, "Relu", "relu", re, 1, oh, 1, NULL);
    add_node(g, "Shape", "shape", sh, 1, osh, 1, NULL);
    add_node(g, "Gather", "gather", ga, 2, oga, 1, NULL);
    add_node(g, "Concat", "concat", cc, 2, occ, 1, &n);
    assert_int_equal(cge_node_set_int(n, "axis", 0), CGE_OK);
    add_node(g, "Reshape", "reshape", rs, 2, ors, 1, NULL);
    add_node(g, "Softmax", "softmax", sm, 1, oy, 1, &n);
    assert_int_equal(cge_node_set_int(n, "axis", -1), CGE_OK);
    add_node(g, "Add", "residual", ad2, 2, oz, 1, NULL);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "z"), CGE_OK);
    return g;
}

static void run(cge_session *s, int64_t b, int64_t seq, float *y, float *z, cge_run_mode mode)
{
    static float x[MAXB * MAXS * D];
    for (int i = 0; i < MAXB * MAXS * D; i++)
        x[i] = (float)((i * 5) % 11) * 0.1f - 0.5f;
    cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(b, seq, D), .data = x,
                     .bytes = sizeof(float) * (size_t)(b * seq * D)};
    cge_tensor out[2] = {{.name = "y", .data = y, .bytes = sizeof(float) * MAXB * MAXS * D},
                         {.name = "z", .data = z, .bytes = sizeof(float) * MAXB * MAXS * D}};
    cge_run_options ro = {.mode = mode};
    assert_int_equal(cge_session_run(s, 1, &in, 1, out, 2, &ro), CGE_OK);
    assert_int_equal(out[0].shape.rank, 2);
    assert_int_equal(out[0].shape.dims[0], b);
    assert_int_equal(out[0].shape.dims[1], seq * D);
    assert_int_equal(out[1].shape.rank, 3);
    assert_int_equal(out[1].shape.dims[1], seq);
}

static cge_session_graph_stats stats_of(cge_session *s)
{
    cge_session_graph_stats st;
    assert_int_equal(cge_session_get_graph_stats(s, 1, &st), CGE_OK);
    return st;
}

/* Many shapes, one plan: equal to a compile of each size, and no compile,
 * no graph clone and no graph inference per new signature. */
static void test_many_shapes_no_compile(void **state)
{
    (void)state;
    static const int64_t sizes[][2] = {{1, 1}, {2, 3}, {4, 5}, {3, 2}, {1, 8}, {2, 3}, {4, 8}, {1, 1}};
    const int ns = (int)(sizeof sizes / sizeof sizes[0]);
    for (int m = 0; m < 3; m++)
    for (cge_opt_level level = CGE_OPT_NONE; level <= CGE_OPT_LAYOUT; level++) {
        cge_run_mode mode = m == 0 ? CGE_RUN_DEFAULT : m == 1 ? CGE_RUN_PLAN : CGE_RUN_REPLAY;
        cge_session_options so = {.opt_level = level};
        cge_session *s = NULL;
        assert_int_equal(cge_session_create(&so, &s), CGE_OK);
        cge_graph *g = build(0, 0);
        assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
        cge_graph_destroy(g);
        assert_int_equal(cge_session_compile_graph(s, 1), CGE_OK);
        cge_session_graph_stats st0 = stats_of(s);
        assert_true(st0.shape_program);
        for (int k = 0; k < ns; k++) {
            static float y[MAXB * MAXS * D], z[MAXB * MAXS * D], wy[MAXB * MAXS * D],
                wz[MAXB * MAXS * D], y1[MAXB * MAXS * D], z1[MAXB * MAXS * D];
            int64_t b = sizes[k][0], q = sizes[k][1];
            /* The first run of a signature (a plan run in the default mode)
             * and the second (captured then) are both compared. */
            run(s, b, q, y1, z1, mode);
            run(s, b, q, y, z, mode);
            /* The reference: the graph compiled for this size alone. */
            cge_session *r = NULL;
            assert_int_equal(cge_session_create(&so, &r), CGE_OK);
            cge_graph *gs = build(b, q);
            assert_int_equal(cge_session_add_graph(r, 1, gs), CGE_OK);
            cge_graph_destroy(gs);
            run(r, b, q, wy, wz, CGE_RUN_PLAN);
            cge_session_destroy(r);
            for (int64_t i = 0; i < b * q * D; i++) {
                assert_float_equal(y[i], wy[i], 1e-6f);
                assert_float_equal(z[i], wz[i], 1e-5f);
                assert_float_equal(y1[i], wy[i], 1e-6f);
                assert_float_equal(z1[i], wz[i], 1e-5f);
            }
        }
        /* The references compiled; this session never did again. */
        cge_session_graph_stats st1 = stats_of(s);
        assert_int_equal(st1.compiles, st0.compiles);
        assert_int_equal(st1.specializations, 6);   /* distinct signatures */
        assert_true(st1.shape_program);
        cge_session_destroy(s);
    }
}

/* Nothing per signature touches the graph: no clone, no inference. */
static void test_new_signature_clones_nothing(void **state)
{
    (void)state;
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    cge_graph *g = build(0, 0);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    static float y[MAXB * MAXS * D], z[MAXB * MAXS * D];
    run(s, 1, 1, y, z, CGE_RUN_DEFAULT);
    int64_t clones = cge_graph_clone_count(), infers = cge_compiler_inference_count();
    for (int64_t q = 2; q <= MAXS; q++)
        run(s, 2, q, y, z, CGE_RUN_DEFAULT);
    assert_int_equal(cge_graph_clone_count(), clones);
    assert_int_equal(cge_compiler_inference_count(), infers);
    cge_session_destroy(s);
}

/* The switch: with the shape program off, each signature compiles. */
static void test_disabled_compiles_per_signature(void **state)
{
    (void)state;
    cge_session_options so = {.disable_shape_program = true};
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(&so, &s), CGE_OK);
    cge_graph *g = build(0, 0);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    static float y[MAXB * MAXS * D], z[MAXB * MAXS * D];
    run(s, 1, 2, y, z, CGE_RUN_DEFAULT);
    run(s, 2, 2, y, z, CGE_RUN_DEFAULT);
    run(s, 3, 2, y, z, CGE_RUN_DEFAULT);
    cge_session_graph_stats st = stats_of(s);
    assert_false(st.shape_program);
    assert_int_equal(st.compiles, 4);   /* the graph once, then 3 signatures */
    assert_int_equal(st.specializations, 0);
    cge_session_destroy(s);
}

/* past [1, L, 8] and new [1, 1, 8] -> present = Concat(past, new) on axis 1,
 * and y = ReduceSum(present, axis 1) [1, 8]: a KV cache growing a row a step. */
static cge_graph *build_cache(void)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("cache", &g), CGE_OK);
    int64_t L = cge_graph_dim_symbol(g, "past");
    cge_shape ps = CGE_SHAPE(1, L, 8), ns = CGE_SHAPE(1, 1, 8), ax = CGE_SHAPE(1);
    int64_t one = 1;
    assert_int_equal(cge_graph_add_input(g, "past", CGE_F32, &ps), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "new", CGE_F32, &ns), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "axes", CGE_I64, &ax, &one, sizeof one), CGE_OK);
    const char *ci[] = {"past", "new"}, *co[] = {"present"}, *ri[] = {"present", "axes"},
               *ro[] = {"y"};
    cge_node *n = NULL;
    add_node(g, "Concat", "cat", ci, 2, co, 1, &n);
    assert_int_equal(cge_node_set_int(n, "axis", 1), CGE_OK);
    add_node(g, "ReduceSum", "sum", ri, 2, ro, 1, &n);
    assert_int_equal(cge_node_set_int(n, "keepdims", 0), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "present"), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    return g;
}

/* One decode loop; with `refuse_first`, every step is first called with an
 * output buffer too small (refused, as the Python binding's first try at a
 * new shape is), which must not count as the signature's run. */
static cge_session_graph_stats decode_loop(bool refuse_first)
{
    enum { STEPS = 64 };
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    cge_graph *g = build_cache();
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    static float past[(STEPS + 1) * 8], present[(STEPS + 1) * 8];
    float nw[8], y[8];
    for (int t = 0; t < STEPS; t++) {
        for (int j = 0; j < 8; j++)
            nw[j] = (float)(t + 1) + 0.125f * (float)j;
        cge_tensor in[2] = {
            {.name = "past", .dtype = CGE_F32, .shape = CGE_SHAPE(1, t, 8), .data = past,
             .bytes = sizeof past},
            {.name = "new", .dtype = CGE_F32, .shape = CGE_SHAPE(1, 1, 8), .data = nw,
             .bytes = sizeof nw}};
        cge_tensor out[2] = {{.name = "present", .data = present, .bytes = sizeof present},
                             {.name = "y", .data = y, .bytes = sizeof y}};
        if (refuse_first) {
            out[0].bytes = 4;
            assert_int_not_equal(cge_session_run_graph(s, 1, in, 2, out, 2), CGE_OK);
            out[0].bytes = sizeof present;
        }
        assert_int_equal(cge_session_run_graph(s, 1, in, 2, out, 2), CGE_OK);
        assert_int_equal(out[0].shape.dims[1], t + 1);
        /* y[j] = sum over steps u <= t of (u + 1) + j/8 */
        for (int j = 0; j < 8; j++)
            assert_float_equal(y[j], (float)((t + 1) * (t + 2) / 2) + 0.125f * (float)j * (float)(t + 1),
                               1e-3f);
        memcpy(past, present, sizeof(float) * (size_t)(t + 1) * 8);
    }
    cge_session_graph_stats st = stats_of(s);
    assert_true(st.shape_program);
    assert_int_equal(st.specializations, STEPS);
    cge_session_destroy(s);
    return st;
}

static void test_decode_loop_arena_grows_geometrically(void **state)
{
    (void)state;
    for (int refuse = 0; refuse < 2; refuse++) {
        cge_session_graph_stats st = decode_loop(refuse);
        /* 64 sizes, a few moves: by half at least each time. */
        assert_true(st.arena_grows <= 10);
        /* Past the first few instances each step takes over the last one,
         * rewritten in place (a step is seen once), and plans its arena
         * again only when a block outgrows the room it was planned for. */
        assert_true(st.respecializations >= 64 - 9);
        assert_true(st.arena_replans <= 12);
    }
}

/* NonZero's size depends on the data: the shape program cannot serve it, and
 * the graph compiles per signature as before, with the same results. */
static void test_value_dependent_graph_falls_back(void **state)
{
    (void)state;
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("vd", &g), CGE_OK);
    int64_t n = cge_graph_dim_symbol(g, "n");
    cge_shape xs = CGE_SHAPE(n);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
    const char *ni[] = {"x"}, *no[] = {"y"};
    add_node(g, "NonZero", "nz", ni, 1, no, 1, NULL);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    float x[6] = {0, 1, 0, 2, 3, 0};
    int64_t y[6];
    for (int64_t len = 6; len >= 4; len--) {
        cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(len), .data = x,
                         .bytes = sizeof x};
        cge_tensor out = {.name = "y", .data = y, .bytes = sizeof y};
        assert_int_equal(cge_session_run_graph(s, 1, &in, 1, &out, 1), CGE_OK);
        assert_int_equal(out.shape.rank, 2);
        assert_int_equal(out.shape.dims[1], len >= 5 ? 3 : 2);
        assert_int_equal(y[0], 1);
        assert_int_equal(y[1], 3);
    }
    cge_session_graph_stats st = stats_of(s);
    assert_false(st.shape_program);
    assert_int_equal(st.specializations, 0);
    cge_session_destroy(s);
}

/* a [batch, n] + b [batch, m]: n and m are two symbols, so only a run can
 * see that 3 and 4 do not broadcast. Both paths refuse it with meta's error
 * naming the node, and the session goes on. */
static cge_status run_bad(bool disable, char *msg, size_t size)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("bad", &g), CGE_OK);
    int64_t b = cge_graph_dim_symbol(g, "batch");
    cge_shape as = CGE_SHAPE(b, cge_graph_dim_symbol(g, "n")),
              bs = CGE_SHAPE(b, cge_graph_dim_symbol(g, "m"));
    assert_int_equal(cge_graph_add_input(g, "a", CGE_F32, &as), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "b", CGE_F32, &bs), CGE_OK);
    const char *ai[] = {"a", "b"}, *ao[] = {"c"};
    add_node(g, "Add", "add_ab", ai, 2, ao, 1, NULL);
    assert_int_equal(cge_graph_add_output(g, "c"), CGE_OK);
    cge_session_options so = {.disable_shape_program = disable};
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(&so, &s), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    float a[8] = {0}, bb[8] = {0}, c[8];
    cge_tensor in[2] = {{.name = "a", .dtype = CGE_F32, .shape = CGE_SHAPE(2, 3), .data = a,
                         .bytes = sizeof a},
                        {.name = "b", .dtype = CGE_F32, .shape = CGE_SHAPE(2, 4), .data = bb,
                         .bytes = sizeof bb}};
    cge_tensor out = {.name = "c", .data = c, .bytes = sizeof c};
    cge_status st = cge_session_run_graph(s, 1, in, 2, &out, 1);
    snprintf(msg, size, "%s", cge_last_error());
    /* Good shapes still run. */
    in[1].shape = CGE_SHAPE(2, 3);
    assert_int_equal(cge_session_run_graph(s, 1, in, 2, &out, 1), CGE_OK);
    cge_session_destroy(s);
    return st;
}

static void test_bad_shapes_give_the_compile_error(void **state)
{
    (void)state;
    char with[1024], without[1024];
    cge_status a = run_bad(false, with, sizeof with);
    cge_status b = run_bad(true, without, sizeof without);
    assert_int_not_equal(a, CGE_OK);
    assert_int_equal(a, b);
    if (!strstr(with, "[meta]") || !strstr(with, "add_ab"))
        fail_msg("unexpected message: %s", with);
    assert_string_equal(with, without);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_shapes_no_compile),
        cmocka_unit_test(test_new_signature_clones_nothing),
        cmocka_unit_test(test_disabled_compiles_per_signature),
        cmocka_unit_test(test_decode_loop_arena_grows_geometrically),
        cmocka_unit_test(test_value_dependent_graph_falls_back),
        cmocka_unit_test(test_bad_shapes_give_the_compile_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
