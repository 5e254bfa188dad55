/* A kernel that fails on any of a plan's streams fails the run: with two
 * independent branches over two streams, an out-of-range index in either
 * branch comes back as the [kernel] error (it was lost when it ran on a
 * stream other than the run's). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"

/* ya = Abs(GatherElements(d, ia)), yb = Neg(GatherElements(d, ib)): two
 * branches, which a two-stream plan puts on a stream each. */
static cge_graph *build(void)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("two_branches", &g), CGE_OK);
    cge_shape s = CGE_SHAPE(2, 3);
    static const float d[6] = {1, 2, 3, 4, 5, 6};
    assert_int_equal(cge_graph_add_input(g, "ia", CGE_I64, &s), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "ib", CGE_I64, &s), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "d", CGE_F32, &s, d, sizeof d), CGE_OK);
    const char *names[2][4] = {{"ia", "ga", "ya", "Abs"}, {"ib", "gb", "yb", "Neg"}};
    for (int b = 0; b < 2; b++) {
        const char *ig[] = {"d", names[b][0]}, *og[] = {names[b][1]}, *oy[] = {names[b][2]};
        cge_node *ge = NULL;
        assert_int_equal(cge_graph_add_node(g, "GatherElements", "", NULL, ig, 2, og, 1, &ge),
                         CGE_OK);
        assert_int_equal(cge_node_set_int(ge, "axis", 1), CGE_OK);
        assert_int_equal(cge_graph_add_node(g, names[b][3], "", NULL, og, 1, oy, 1, NULL),
                         CGE_OK);
        assert_int_equal(cge_graph_add_output(g, names[b][2]), CGE_OK);
    }
    return g;
}

static void test_failure_on_any_stream_fails_the_run(void **state)
{
    (void)state;
    cge_session_options so = {.num_streams = 2, .run_mode = CGE_RUN_PLAN};
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(&so, &s), CGE_OK);
    cge_graph *g = build();
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    float ya[6], yb[6];
    int64_t good[6] = {0, 1, 2, 2, 1, 0}, bad[6] = {0, 1, 7, 2, 1, 0};
    cge_tensor in[2] = {{"ia", CGE_I64, CGE_SHAPE(2, 3), good, sizeof good},
                        {"ib", CGE_I64, CGE_SHAPE(2, 3), good, sizeof good}};
    cge_tensor out[2] = {{"ya", CGE_F32, CGE_SHAPE(2, 3), ya, sizeof ya},
                         {"yb", CGE_F32, CGE_SHAPE(2, 3), yb, sizeof yb}};
    assert_int_equal(cge_session_run_graph(s, 1, in, 2, out, 2), CGE_OK);
    assert_true(ya[2] == 3.0f && yb[2] == -3.0f);
    for (int branch = 0; branch < 2; branch++) {
        in[0].data = branch == 0 ? bad : good;
        in[1].data = branch == 1 ? bad : good;
        for (int r = 0; r < 2; r++) {
            if (cge_session_run_graph(s, 1, in, 2, out, 2) == CGE_OK)
                fail_msg("branch %d, run %d: the out-of-range index was not reported", branch, r);
            assert_non_null(strstr(cge_last_error(), "[kernel]"));
            assert_non_null(strstr(cge_last_error(), "GatherElements"));
        }
    }
    /* The session goes on after the failures. */
    in[0].data = in[1].data = good;
    assert_int_equal(cge_session_run_graph(s, 1, in, 2, out, 2), CGE_OK);
    assert_true(ya[2] == 3.0f && yb[2] == -3.0f);
    cge_session_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failure_on_any_stream_fails_the_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
