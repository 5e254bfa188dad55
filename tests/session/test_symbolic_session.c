/* Sessions over graphs with symbolic dimensions: each concrete size of a
 * symbol compiles once and is reused, the capture limit keeping the most
 * recently run signatures' recordings; one symbol, two sizes: refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"

/* y = a + b, both [N,4]; "sq" = x * x with x [N,N]. */
static cge_graph *build(void)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("sym", &g), CGE_OK);
    int64_t N = cge_graph_dim_symbol(g, "N");
    cge_shape s = CGE_SHAPE(N, 4), sq = CGE_SHAPE(N, N);
    assert_int_equal(cge_graph_add_input(g, "a", CGE_F32, &s), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "b", CGE_F32, &s), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &sq), CGE_OK);
    const char *i1[] = {"a", "b"}, *o1[] = {"y"}, *i2[] = {"x", "x"}, *o2[] = {"z"};
    assert_int_equal(cge_graph_add_node(g, "Add", "", "add", i1, 2, o1, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Mul", "", "mul", i2, 2, o2, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "z"), CGE_OK);
    return g;
}

typedef struct io {
    float a[64], b[64], x[64], y[64], z[64];
    cge_tensor in[3], out[2];
} io;

static void set_sizes(io *t, int64_t na, int64_t nb, int64_t nx0, int64_t nx1)
{
    for (int i = 0; i < 64; i++)
        t->a[i] = (float)i, t->b[i] = 2.0f, t->x[i] = (float)i;
    t->in[0] = (cge_tensor){.name = "a", .dtype = CGE_F32, .shape = CGE_SHAPE(na, 4),
                            .data = t->a, .bytes = sizeof t->a};
    t->in[1] = (cge_tensor){.name = "b", .dtype = CGE_F32, .shape = CGE_SHAPE(nb, 4),
                            .data = t->b, .bytes = sizeof t->b};
    t->in[2] = (cge_tensor){.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(nx0, nx1),
                            .data = t->x, .bytes = sizeof t->x};
    t->out[0] = (cge_tensor){.name = "y", .data = t->y, .bytes = sizeof t->y};
    t->out[1] = (cge_tensor){.name = "z", .data = t->z, .bytes = sizeof t->z};
}

static cge_run_mode run_n(cge_session *s, int64_t n)
{
    io t;
    set_sizes(&t, n, n, n, n);
    assert_int_equal(cge_session_run_graph(s, 1, t.in, 3, t.out, 2), CGE_OK);
    assert_int_equal(t.out[0].shape.dims[0], n);
    assert_int_equal(t.out[1].shape.dims[1], n);
    for (int64_t i = 0; i < n * 4; i++)
        assert_float_equal(t.y[i], (float)i + 2.0f, 0);
    for (int64_t i = 0; i < n * n; i++)
        assert_float_equal(t.z[i], (float)(i * i), 0);
    cge_run_mode m;
    assert_int_equal(cge_session_last_run_mode(s, 1, &m), CGE_OK);
    return m;
}

static void test_plan_cache_by_symbol_value(void **state)
{
    (void)state;
    cge_graph *g = build();
    cge_session *s = NULL;
    cge_session_options o = {.capture_limit = 2, .run_mode = CGE_RUN_REPLAY};
    assert_int_equal(cge_session_create(&o, &s), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    assert_int_equal(cge_session_compile_graph(s, 1), CGE_OK);
    /* The compiled descriptors keep the symbol. */
    cge_tensor_desc d;
    assert_int_equal(cge_session_output_desc(s, 1, 0, &d), CGE_OK);
    assert_string_equal(cge_session_dim_symbol_name(s, 1, d.shape.dims[0]), "N");
    assert_int_equal(d.shape.dims[1], 4);
    assert_int_equal(run_n(s, 2), CGE_RUN_REPLAY);   /* signature 1: captured */
    assert_int_equal(run_n(s, 3), CGE_RUN_REPLAY);   /* signature 2: captured */
    assert_int_equal(run_n(s, 2), CGE_RUN_REPLAY);   /* reused, not recompiled */
    assert_int_equal(run_n(s, 3), CGE_RUN_REPLAY);
    /* A third signature past the limit replays too: the least recently run
     * one (2) gives up its recording, and is captured again when it comes
     * back, in place of 3. */
    assert_int_equal(run_n(s, 5), CGE_RUN_REPLAY);
    assert_int_equal(run_n(s, 2), CGE_RUN_REPLAY);
    assert_int_equal(run_n(s, 5), CGE_RUN_REPLAY);
    assert_int_equal(run_n(s, 3), CGE_RUN_REPLAY);
    cge_session_destroy(s);
    cge_graph_destroy(g);
}

static void expect_refused(cge_session *s, io *t, const char *n1, const char *n2)
{
    assert_int_equal(cge_session_run_graph(s, 1, t->in, 3, t->out, 2), CGE_ERR_SHAPE);
    const char *msg = cge_last_error();
    assert_int_equal(cge_last_error_layer(), CGE_LAYER_SESSION);
    if (!strstr(msg, "'N'") || !strstr(msg, n1) || !strstr(msg, n2))
        fail_msg("unexpected message: %s", msg);
}

static void test_mismatched_symbol_refused(void **state)
{
    (void)state;
    cge_graph *g = build();
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    io t;
    set_sizes(&t, 2, 3, 2, 2);    /* a and b disagree */
    expect_refused(s, &t, "input 'a'", "input 'b'");
    assert_true(strstr(cge_last_error(), "is 2") && strstr(cge_last_error(), "but 3"));
    set_sizes(&t, 2, 2, 3, 3);    /* x disagrees with a */
    expect_refused(s, &t, "input 'a'", "input 'x'");
    set_sizes(&t, 2, 2, 2, 3);    /* x's own two dims disagree */
    expect_refused(s, &t, "(dim 1)", "input 'x'");
    /* by position, too */
    set_sizes(&t, 2, 3, 2, 2);
    for (int i = 0; i < 3; i++)
        t.in[i].name = NULL;
    for (int i = 0; i < 2; i++)
        t.out[i].name = NULL;
    expect_refused(s, &t, "input 'a'", "input 'b'");
    /* nothing was spoiled: a consistent run still works (a new signature's
     * first run is a plan; it is captured when it comes back) */
    assert_int_equal(run_n(s, 4), CGE_RUN_PLAN);
    assert_int_equal(run_n(s, 4), CGE_RUN_REPLAY);
    cge_session_destroy(s);
    cge_graph_destroy(g);
}

/* An input whose size overflows is refused as too large (it was "needs
 * 18446744073709551615 bytes of data"), and the session still runs. */
static void test_input_too_large(void **state)
{
    (void)state;
    cge_graph *g = build();
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    io t;
    int64_t big = (int64_t)1 << 40;
    set_sizes(&t, 2, 2, big, big);
    assert_int_equal(cge_session_run_graph(s, 1, t.in, 3, t.out, 2), CGE_ERR_SHAPE);
    assert_int_equal(cge_last_error_layer(), CGE_LAYER_SESSION);
    if (!strstr(cge_last_error(), "input 'x'") || !strstr(cge_last_error(), "too large"))
        fail_msg("unexpected message: %s", cge_last_error());
    run_n(s, 3);
    cge_session_destroy(s);
    cge_graph_destroy(g);
}

/* Unnamed symbols (CGE_DIM_SYMBOL(k) without a name) are checked too. */
static void test_unnamed_symbol(void **state)
{
    (void)state;
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("anon", &g), CGE_OK);
    cge_shape s = CGE_SHAPE(CGE_DIM_SYMBOL(7), 2);
    assert_int_equal(cge_graph_add_input(g, "a", CGE_F32, &s), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "b", CGE_F32, &s), CGE_OK);
    const char *i1[] = {"a", "b"}, *o1[] = {"y"};
    assert_int_equal(cge_graph_add_node(g, "Add", "", "add", i1, 2, o1, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    cge_session *ss = NULL;
    assert_int_equal(cge_session_create(NULL, &ss), CGE_OK);
    assert_int_equal(cge_session_add_graph(ss, 1, g), CGE_OK);
    float a[8] = {0}, b[8] = {0}, y[8];
    cge_tensor in[2] = {
        {.name = "a", .dtype = CGE_F32, .shape = CGE_SHAPE(4, 2), .data = a, .bytes = sizeof a},
        {.name = "b", .dtype = CGE_F32, .shape = CGE_SHAPE(1, 2), .data = b, .bytes = sizeof b}};
    cge_tensor out = {.name = "y", .data = y, .bytes = sizeof y};
    assert_int_equal(cge_session_run_graph(ss, 1, in, 2, &out, 1), CGE_ERR_SHAPE);
    assert_non_null(strstr(cge_last_error(), "'s7'"));
    in[1].shape = CGE_SHAPE(4, 2);
    assert_int_equal(cge_session_run_graph(ss, 1, in, 2, &out, 1), CGE_OK);
    cge_session_destroy(ss);
    cge_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_cache_by_symbol_value),
        cmocka_unit_test(test_mismatched_symbol_refused),
        cmocka_unit_test(test_unnamed_symbol),
        cmocka_unit_test(test_input_too_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
