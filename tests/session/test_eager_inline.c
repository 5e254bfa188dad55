/* A synchronous run of a graph that runs node by node (a shape follows a
 * computed value: NonZero) executes its nodes on the calling thread, as a
 * plan run does: each node was launched on the session stream's worker and
 * waited for before the next one's inference, two thread switches a node
 * (a detector's hundreds of small nodes spent most of their time there).
 * Checked with a probe operator that records the thread its work runs on,
 * before and after the value-dependent node, over several runs and sizes;
 * the results stay the reference's. An asynchronous run still goes on the
 * caller's stream. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"
#include "probe_op.h"

static int setup(void **state)
{
    (void)state;
    return probe_register() == CGE_OK ? 0 : -1;
}

static void add(cge_graph *g, const char *op, const char *domain, const char *in,
                const char *out, cge_node **node)
{
    const char *ins[] = {in}, *outs[] = {out};
    assert_int_equal(cge_graph_add_node(g, op, domain, NULL, ins, 1, outs, 1, node), CGE_OK);
}

/* a = probe(x); pos = NonZero(a); y = probe(Cast(pos, float)) */
static cge_graph *build(void)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("eager_inline", &g), CGE_OK);
    cge_shape xs = CGE_SHAPE(6);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
    cge_node *cast = NULL;
    add(g, "Probe", "session_probe", "x", "a", NULL);
    add(g, "NonZero", "", "a", "pos", NULL);
    add(g, "Cast", "", "pos", "posf", &cast);
    assert_int_equal(cge_node_set_int(cast, "to", CGE_F32), CGE_OK);
    add(g, "Probe", "session_probe", "posf", "y", NULL);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    return g;
}

/* Runs once with x (on a stream of its own when `async`); checks y against
 * the reference, that both probes ran, and for a synchronous run that they
 * ran on this thread. */
static void run(cge_session *s, const float *x, bool async)
{
    float y[8] = {0};
    int expect = 0;
    float want[8];
    for (int i = 0; i < 6; i++)
        if (x[i] - 1.0f != 0.0f)
            want[expect++] = (float)i - 1.0f;
    cge_tensor in = {.dtype = CGE_F32, .shape = CGE_SHAPE(6), .data = (void *)x, .bytes = 6 * 4};
    cge_tensor out = {.dtype = CGE_F32, .shape = CGE_SHAPE(1, expect), .data = y,
                      .bytes = sizeof y};
    probe_reset();
    cge_status st;
    if (async) {
        cge_stream *str = NULL;
        st = cge_stream_create(cge_session_device(s), &str);
        if (!st)
            st = cge_session_run_graph_async(s, 1, &in, 1, &out, 1, str);
        if (!st)
            st = cge_stream_synchronize(str);
        cge_stream_destroy(str);
    } else {
        st = cge_session_run_graph(s, 1, &in, 1, &out, 1);
    }
    if (st)
        fail_msg("%s", cge_last_error());
    assert_int_equal(atomic_load(&probe_calls), 2);
    for (int i = 0; i < expect; i++)
        assert_true(y[i] == want[i]);
    for (int k = 0; k < 2 && !async; k++)
        assert_true(pthread_equal(probe_thread[k], pthread_self()));
}

static void test_sync_runs_on_the_calling_thread(void **state)
{
    (void)state;
    cge_graph *g = build();
    cge_session *s = probe_session(g);
    assert_non_null(s);
    const float x1[6] = {1, 2, 3, 1, 5, 6}, x2[6] = {0, 1, 1, 1, 4, 1};
    run(s, x1, false);
    run(s, x2, false); /* another count of positions */
    run(s, x1, false);
    cge_session_destroy(s);
    cge_graph_destroy(g);
}

static void test_async_run_still_completes(void **state)
{
    (void)state;
    cge_graph *g = build();
    cge_session *s = probe_session(g);
    assert_non_null(s);
    const float x1[6] = {1, 2, 3, 1, 5, 6};
    run(s, x1, true);
    run(s, x1, false);
    run(s, x1, true);
    cge_session_destroy(s);
    cge_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sync_runs_on_the_calling_thread),
        cmocka_unit_test(test_async_run_still_completes),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
