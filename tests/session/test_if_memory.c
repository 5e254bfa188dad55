/* If bodies keep their memory across runs: an If step of a plan (its
 * condition a run-time input, its branches of one shape) runs its branch at
 * every launch, and an If whose output size follows its branch's values
 * (the detectors' NonMaxSuppression: the graph runs node by node, meta
 * measures the branch) runs it at every run. From each branch's second run
 * at a size seen before, the interpreter allocates nothing (value buffers,
 * tables, devices, streams and the measured outputs' copies are kept), with
 * the same results. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"
#include "ops/builtin.h"

static cge_graph *new_graph(const char *name)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create(name, &g), CGE_OK);
    return g;
}

static void node(cge_graph *g, const char *op, const char *const *ins, int32_t ni,
                 const char *out)
{
    assert_int_equal(cge_graph_add_node(g, op, NULL, NULL, ins, ni, &out, 1, NULL), CGE_OK);
}

static void test_if_plan_step_reuses_its_memory(void **state)
{
    (void)state;
    /* then: o + k (k = [10, 20]), else: -o; `o` read from the outer scope */
    cge_graph *tg = new_graph("then"), *eg = new_graph("else");
    float k[2] = {10, 20};
    assert_int_equal(cge_graph_add_constant(tg, "k", CGE_F32, &CGE_SHAPE(2), k, sizeof k), CGE_OK);
    node(tg, "Add", (const char *[]){"o", "k"}, 2, "t");
    assert_int_equal(cge_graph_add_output(tg, "t"), CGE_OK);
    node(eg, "Neg", (const char *[]){"o"}, 1, "e");
    assert_int_equal(cge_graph_add_output(eg, "e"), CGE_OK);
    cge_graph *g = new_graph("if_plan");
    assert_int_equal(cge_graph_add_input(g, "c", CGE_BOOL, &CGE_SCALAR), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "o", CGE_F32, &CGE_SHAPE(2)), CGE_OK);
    cge_node *n = NULL;
    const char *ins[] = {"c", "o"}, *outs[] = {"y"}, *outer[] = {"o"};
    assert_int_equal(cge_graph_add_node(g, "If", NULL, "if", ins, 2, outs, 1, &n), CGE_OK);
    cge_attr a[] = {{.name = "then_branch", .kind = CGE_ATTR_GRAPH, .g = tg},
                    {.name = "else_branch", .kind = CGE_ATTR_GRAPH, .g = eg},
                    {.name = "outer_names", .kind = CGE_ATTR_STRINGS, .strings = outer, .n = 1}};
    for (int i = 0; i < 3; i++)
        assert_int_equal(cge_attrs_set(cge_node_attrs(n), &a[i]), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    cge_session_options so = {.num_threads = 1};
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(&so, &s), CGE_OK);
    cge_status st = cge_session_add_graph(s, 1, g);
    if (st)
        fail_msg("%s", cge_last_error());
    float x[2] = {1.5f, -2.0f}, y[2];
    long long allocs[4];
    for (int run = 0; run < 4; run++) {
        uint8_t cond = (uint8_t)(run % 2 == 0);
        cge_tensor in[] = {{.name = "c", .dtype = CGE_BOOL, .shape = CGE_SCALAR, .data = &cond,
                            .bytes = 1},
                           {.name = "o", .dtype = CGE_F32, .shape = CGE_SHAPE(2), .data = x,
                            .bytes = sizeof x}};
        cge_tensor out[] = {{.name = "y", .data = y, .bytes = sizeof y}};
        long long before = cge__control_flow_body_allocs();
        st = cge_session_run_graph(s, 1, in, 2, out, 1);
        if (st)
            fail_msg("%s", cge_last_error());
        allocs[run] = cge__control_flow_body_allocs() - before;
        float want_t[2] = {11.5f, 18.0f}, want_e[2] = {-1.5f, 2.0f};
        const float *want = cond ? want_t : want_e;
        assert_true(y[0] == want[0] && y[1] == want[1]);
    }
    assert_true(allocs[0] > 0);
    assert_int_equal(allocs[2], 0);   /* each branch's second run */
    assert_int_equal(allocs[3], 0);
    cge_session_destroy(s);
    cge_graph_destroy(g);
    cge_graph_destroy(tg);
    cge_graph_destroy(eg);
}

/* then: NonZero(Abs(o)); else: NonZero(Neg(o)) ([1, count]: value-dependent,
 * and past what meta computes by itself, so each run measures its branch) */
static void test_if_measured_branch_reuses_its_memory(void **state)
{
    (void)state;
    enum { N = 3000 };
    cge_graph *tg = new_graph("then"), *eg = new_graph("else");
    node(tg, "Abs", (const char *[]){"o"}, 1, "a");
    node(tg, "NonZero", (const char *[]){"a"}, 1, "t");
    assert_int_equal(cge_graph_add_output(tg, "t"), CGE_OK);
    node(eg, "Neg", (const char *[]){"o"}, 1, "m");
    node(eg, "NonZero", (const char *[]){"m"}, 1, "e");
    assert_int_equal(cge_graph_add_output(eg, "e"), CGE_OK);
    cge_graph *g = new_graph("if_measured");
    assert_int_equal(cge_graph_add_input(g, "c", CGE_BOOL, &CGE_SCALAR), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &CGE_SHAPE(N)), CGE_OK);
    node(g, "Neg", (const char *[]){"x"}, 1, "o");
    cge_node *n = NULL;
    const char *ins[] = {"c", "o"}, *outs[] = {"y"}, *outer[] = {"o"};
    assert_int_equal(cge_graph_add_node(g, "If", NULL, "if", ins, 2, outs, 1, &n), CGE_OK);
    cge_attr a[] = {{.name = "then_branch", .kind = CGE_ATTR_GRAPH, .g = tg},
                    {.name = "else_branch", .kind = CGE_ATTR_GRAPH, .g = eg},
                    {.name = "outer_names", .kind = CGE_ATTR_STRINGS, .strings = outer, .n = 1}};
    for (int i = 0; i < 3; i++)
        assert_int_equal(cge_attrs_set(cge_node_attrs(n), &a[i]), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    cge_session_options so = {.num_threads = 2};
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(&so, &s), CGE_OK);
    cge_status st = cge_session_add_graph(s, 1, g);
    if (st)
        fail_msg("%s", cge_last_error());
    static float x[N];
    int64_t y[2 * N];
    long long allocs[6], runs[6];
    for (int run = 0; run < 6; run++) {
        uint8_t cond = (uint8_t)(run < 3);
        memset(x, 0, sizeof x);
        x[7] = (float)(run + 1);
        x[N - 1] = -2;
        if (run == 5)
            x[100] = 1;   /* three values: the measured size changes */
        cge_tensor in[] = {{.name = "c", .dtype = CGE_BOOL, .shape = CGE_SCALAR, .data = &cond,
                            .bytes = 1},
                           {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(N), .data = x,
                            .bytes = sizeof x}};
        cge_tensor out[] = {{.name = "y", .data = y, .bytes = sizeof y}};
        long long before = cge__control_flow_body_allocs(), r0 = cge__control_flow_body_runs();
        st = cge_session_run_graph(s, 1, in, 2, out, 1);
        if (st)
            fail_msg("%s", cge_last_error());
        allocs[run] = cge__control_flow_body_allocs() - before;
        runs[run] = cge__control_flow_body_runs() - r0;
        int64_t count = run == 5 ? 3 : 2;
        assert_int_equal(out[0].shape.rank, 2);
        assert_int_equal(out[0].shape.dims[1], count);
        assert_int_equal(y[0], 7);
        assert_int_equal(y[count - 1], N - 1);
        if (run == 5)
            assert_int_equal(y[1], 100);
    }
    for (int run = 0; run < 6; run++)
        assert_int_equal(runs[run], 1);   /* measured once, the kernel takes it */
    assert_true(allocs[0] > 0);
    assert_int_equal(allocs[1], 0);
    assert_int_equal(allocs[2], 0);
    assert_true(allocs[3] > 0);   /* the other branch's first run */
    assert_int_equal(allocs[4], 0);
    assert_true(allocs[5] <= 2);   /* the NonZero result's and its copy's buffers grow */
    cge_session_destroy(s);
    cge_graph_destroy(g);
    cge_graph_destroy(tg);
    cge_graph_destroy(eg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_if_plan_step_reuses_its_memory),
        cmocka_unit_test(test_if_measured_branch_reuses_its_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
