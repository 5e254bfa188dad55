/* Tests of If, Loop and Scan with hand-built bodies: branch choice and outer
 * values, loop-carried values and scan outputs (trip count, computed
 * condition), scans in both directions and along other axes, control flow
 * nested in a body, meta with and without values, and body errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "cge/graph.h"
#include "op_runner.h"
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

static cge_attr graph_attr(const char *name, const cge_graph *g)
{
    return (cge_attr){.name = name, .kind = CGE_ATTR_GRAPH, .g = g};
}

static cge_attr strings_attr(const char *name, const char *const *v, int64_t n)
{
    return (cge_attr){.name = name, .kind = CGE_ATTR_STRINGS, .strings = v, .n = n};
}

/* then: o + k (k = [10, 20]), else: -o; `o` read from the outer scope. */
static void if_branches(cge_graph **then_g, cge_graph **else_g)
{
    *then_g = new_graph("then");
    float k[2] = {10, 20};
    assert_int_equal(cge_graph_add_constant(*then_g, "k", CGE_F32, &CGE_SHAPE(2), k, sizeof k),
                     CGE_OK);
    node(*then_g, "Add", (const char *[]){"o", "k"}, 2, "t");
    assert_int_equal(cge_graph_add_output(*then_g, "t"), CGE_OK);
    *else_g = new_graph("else");
    node(*else_g, "Neg", (const char *[]){"o"}, 1, "e");
    assert_int_equal(cge_graph_add_output(*else_g, "e"), CGE_OK);
}

static void test_if_outer_values(void **state)
{
    (void)state;
    cge_graph *tg, *eg;
    if_branches(&tg, &eg);
    const char *outer[] = {"o"};
    cge_attr attrs[] = {graph_attr("then_branch", tg), graph_attr("else_branch", eg),
                        strings_attr("outer_names", outer, 1)};
    float x[2] = {1.5f, -2.0f};
    for (int c = 0; c < 2; c++) {
        uint8_t cond = (uint8_t)c;
        cge_tensor in[] = {op_tensor(CGE_BOOL, CGE_SCALAR, &cond),
                           op_tensor(CGE_F32, CGE_SHAPE(2), x)};
        cge_tensor out[1];
        cge_status st = op_run("If", in, 2, attrs, 3, out, 1);
        if (st)
            fail_msg("%s", cge_last_error());
        float want_t[2] = {11.5f, 18.0f}, want_e[2] = {-1.5f, 2.0f};
        op_assert_equal(&out[0], CGE_F32, CGE_SHAPE(2), c ? want_t : want_e);
        op_free_outputs(out, 1);
    }
    /* Without the condition's value, both branches agree on [2]. */
    cge_tensor_desc ind[] = {{.name = "c", .dtype = CGE_BOOL, .shape = CGE_SCALAR},
                             {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(2)}};
    cge_tensor_desc outd[1] = {{.name = "y"}};
    assert_int_equal(op_infer("If", ind, NULL, 2, attrs, 3, outd, 1), CGE_OK);
    assert_int_equal(outd[0].dtype, CGE_F32);
    assert_true(cge_shape_equal(&outd[0].shape, &CGE_SHAPE(2)));
    cge_graph_destroy(tg);
    cge_graph_destroy(eg);
}

/* A branch whose output size depends on its values (NonZero of an outer
 * value): meta runs the branch to measure it, and the kernel uses what meta
 * measured instead of running it again (the branch runs once per run, checked
 * by the interpreter's counter), with the values the kernel sees: new values
 * in the same buffer run the branch again. */
static void test_if_measured_branch_runs_once(void **state)
{
    (void)state;
    cge_graph *tg = new_graph("then"), *eg = new_graph("else");
    node(tg, "NonZero", (const char *[]){"o"}, 1, "t");
    assert_int_equal(cge_graph_add_output(tg, "t"), CGE_OK);
    node(eg, "Neg", (const char *[]){"o"}, 1, "n");
    node(eg, "NonZero", (const char *[]){"n"}, 1, "e");
    assert_int_equal(cge_graph_add_output(eg, "e"), CGE_OK);
    const char *outer[] = {"o"};
    cge_attr attrs[] = {graph_attr("then_branch", tg), graph_attr("else_branch", eg),
                        strings_attr("outer_names", outer, 1)};
    /* past the few kilobytes a body's meta computes by itself */
    enum { N = 2000 };
    static float x[N];
    memset(x, 0, sizeof x);
    x[1] = 3;
    x[3] = -1;
    x[1999] = 2;
    uint8_t cond = 1;
    cge_tensor in[] = {op_tensor(CGE_BOOL, CGE_SCALAR, &cond), op_tensor(CGE_F32, CGE_SHAPE(N), x)};
    cge_tensor out[1];
    int64_t want[3] = {1, 3, 1999};
    for (int run = 0; run < 3; run++) {
        if (run == 1) {
            /* Meta alone on these values, then the buffer changes: the
             * kernel must not take the stale measurement. */
            cge_tensor_desc ind[] = {{.name = "c", .dtype = CGE_BOOL, .shape = CGE_SCALAR},
                                     {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(N)}};
            const void *vals[] = {&cond, x};
            cge_tensor_desc outd[1] = {{.name = "y"}};
            assert_int_equal(op_infer("If", ind, vals, 2, attrs, 3, outd, 1), CGE_OK);
            assert_int_equal(outd[0].shape.dims[1], 3);
            x[1] = 0;
            x[0] = 5;
            want[0] = 0;
            want[1] = 3;
        }
        if (run == 2)
            cond = 0;   /* the other branch (-x is nonzero where x is), alike */
        long long before = cge__control_flow_body_runs();
        cge_status st = op_run("If", in, 2, attrs, 3, out, 1);
        if (st)
            fail_msg("%s", cge_last_error());
        assert_int_equal(cge__control_flow_body_runs() - before, 1);
        op_assert_equal(&out[0], CGE_I64, CGE_SHAPE(1, 3), want);
        op_free_outputs(out, 1);
    }
    cge_graph_destroy(tg);
    cge_graph_destroy(eg);
}

/* Branches of different lengths: dynamic without the condition, exact with. */
static void test_if_shapes_follow_condition(void **state)
{
    (void)state;
    cge_graph *tg = new_graph("then"), *eg = new_graph("else");
    float a[3] = {1, 2, 3}, b[1] = {7};
    assert_int_equal(cge_graph_add_constant(tg, "a", CGE_F32, &CGE_SHAPE(3), a, sizeof a), CGE_OK);
    assert_int_equal(cge_graph_add_output(tg, "a"), CGE_OK);
    assert_int_equal(cge_graph_add_constant(eg, "b", CGE_F32, &CGE_SHAPE(1), b, sizeof b), CGE_OK);
    assert_int_equal(cge_graph_add_output(eg, "b"), CGE_OK);
    cge_attr attrs[] = {graph_attr("then_branch", tg), graph_attr("else_branch", eg)};
    cge_tensor_desc ind[] = {{.name = "c", .dtype = CGE_BOOL, .shape = CGE_SCALAR}};
    cge_tensor_desc outd[1] = {{.name = "y"}};
    assert_int_equal(op_infer("If", ind, NULL, 1, attrs, 2, outd, 1), CGE_OK);
    assert_int_equal(outd[0].shape.rank, 1);
    assert_int_equal(outd[0].shape.dims[0], CGE_DIM_DYNAMIC);
    uint8_t f = 0;
    cge_tensor in[] = {op_tensor(CGE_BOOL, CGE_SCALAR, &f)};
    cge_tensor out[1];
    assert_int_equal(op_run("If", in, 1, attrs, 2, out, 1), CGE_OK);
    op_assert_equal(&out[0], CGE_F32, CGE_SHAPE(1), b);
    op_free_outputs(out, 1);
    cge_graph_destroy(tg);
    cge_graph_destroy(eg);
}

/* body(i, cond, y) -> (cond', y + i, y + i as a scan slice); cond' is the
 * incoming cond, or y + i < limit when `limit` > 0. */
static cge_graph *sum_body(int64_t limit)
{
    cge_graph *b = new_graph("body");
    assert_int_equal(cge_graph_add_input(b, "i", CGE_I64, &CGE_SCALAR), CGE_OK);
    assert_int_equal(cge_graph_add_input(b, "c", CGE_BOOL, &CGE_SCALAR), CGE_OK);
    assert_int_equal(cge_graph_add_input(b, "y", CGE_I64, &CGE_SCALAR), CGE_OK);
    node(b, "Add", (const char *[]){"y", "i"}, 2, "y2");
    node(b, "Identity", (const char *[]){"y2"}, 1, "s");
    if (limit > 0) {
        assert_int_equal(cge_graph_add_constant(b, "lim", CGE_I64, &CGE_SCALAR, &limit,
                                                sizeof limit), CGE_OK);
        node(b, "Less", (const char *[]){"y2", "lim"}, 2, "c2");
    } else {
        node(b, "Identity", (const char *[]){"c"}, 1, "c2");
    }
    assert_int_equal(cge_graph_add_output(b, "c2"), CGE_OK);
    assert_int_equal(cge_graph_add_output(b, "y2"), CGE_OK);
    assert_int_equal(cge_graph_add_output(b, "s"), CGE_OK);
    return b;
}

static void test_loop_trip_count(void **state)
{
    (void)state;
    cge_graph *b = sum_body(0);
    cge_attr attrs[] = {graph_attr("body", b)};
    int64_t m = 4, y0 = 0;
    uint8_t cond = 1;
    cge_tensor in[] = {op_tensor(CGE_I64, CGE_SCALAR, &m), op_tensor(CGE_BOOL, CGE_SCALAR, &cond),
                       op_tensor(CGE_I64, CGE_SCALAR, &y0)};
    cge_tensor out[2];
    cge_status st = op_run("Loop", in, 3, attrs, 1, out, 2);
    if (st)
        fail_msg("%s", cge_last_error());
    int64_t y = 6, scan[4] = {0, 1, 3, 6};
    op_assert_equal(&out[0], CGE_I64, CGE_SCALAR, &y);
    op_assert_equal(&out[1], CGE_I64, CGE_SHAPE(4), scan);
    op_free_outputs(out, 2);
    /* A false condition runs nothing: the states come back as given. */
    cond = 0;
    y0 = 42;
    assert_int_equal(op_run("Loop", in, 3, attrs, 1, out, 2), CGE_OK);
    op_assert_equal(&out[0], CGE_I64, CGE_SCALAR, &y0);
    assert_int_equal(out[1].shape.dims[0], 0);
    op_free_outputs(out, 2);
    /* Meta without values: the scan length is dynamic. */
    cge_tensor_desc ind[] = {{.name = "M", .dtype = CGE_I64, .shape = CGE_SCALAR},
                             {.name = "", .dtype = CGE_DTYPE_UNDEFINED},
                             {.name = "y", .dtype = CGE_I64, .shape = CGE_SCALAR}};
    cge_tensor_desc outd[2] = {{.name = "a"}, {.name = "b"}};
    assert_int_equal(op_infer("Loop", ind, NULL, 3, attrs, 1, outd, 2), CGE_OK);
    assert_true(cge_shape_equal(&outd[0].shape, &CGE_SCALAR));
    assert_int_equal(outd[1].shape.rank, 1);
    assert_int_equal(outd[1].shape.dims[0], CGE_DIM_DYNAMIC);
    cge_graph_destroy(b);
}

/* Loop body (i, c, a, b) -> (c, a + b, a, b): the new b is the old a passed
 * through, and the scan output is the old b passed through. Every new state is copied before an
 * old one goes, and a scan output that is a state passed through is read
 * before its buffer goes (the scan output and the second state read freed
 * memory before). Fibonacci-like: a, b = a + b, a. */
static void test_loop_states_swapped_and_passed_through(void **state)
{
    (void)state;
    cge_graph *b = new_graph("swap_body");
    assert_int_equal(cge_graph_add_input(b, "i", CGE_I64, &CGE_SCALAR), CGE_OK);
    assert_int_equal(cge_graph_add_input(b, "c", CGE_BOOL, &CGE_SCALAR), CGE_OK);
    assert_int_equal(cge_graph_add_input(b, "a", CGE_I64, &CGE_SHAPE(3)), CGE_OK);
    assert_int_equal(cge_graph_add_input(b, "b", CGE_I64, &CGE_SHAPE(3)), CGE_OK);
    node(b, "Add", (const char *[]){"a", "b"}, 2, "ab");
    node(b, "Identity", (const char *[]){"c"}, 1, "c2");
    assert_int_equal(cge_graph_add_output(b, "c2"), CGE_OK);
    assert_int_equal(cge_graph_add_output(b, "ab"), CGE_OK);
    assert_int_equal(cge_graph_add_output(b, "a"), CGE_OK);
    assert_int_equal(cge_graph_add_output(b, "b"), CGE_OK);
    cge_attr attrs[] = {graph_attr("body", b)};
    int64_t m = 5, a0[3] = {1, 2, 3}, b0[3] = {0, 10, 100};
    uint8_t cond = 1;
    cge_tensor in[] = {op_tensor(CGE_I64, CGE_SCALAR, &m), op_tensor(CGE_BOOL, CGE_SCALAR, &cond),
                       op_tensor(CGE_I64, CGE_SHAPE(3), a0), op_tensor(CGE_I64, CGE_SHAPE(3), b0)};
    cge_tensor out[3];
    cge_status st = op_run("Loop", in, 4, attrs, 1, out, 3);
    if (st)
        fail_msg("%s", cge_last_error());
    int64_t a[3], bb[3], scan[5][3];
    memcpy(a, a0, sizeof a);
    memcpy(bb, b0, sizeof bb);
    for (int t = 0; t < 5; t++)
        for (int k = 0; k < 3; k++) {
            scan[t][k] = bb[k];
            int64_t sum = a[k] + bb[k];
            bb[k] = a[k];
            a[k] = sum;
        }
    op_assert_equal(&out[0], CGE_I64, CGE_SHAPE(3), a);
    op_assert_equal(&out[1], CGE_I64, CGE_SHAPE(3), bb);
    op_assert_equal(&out[2], CGE_I64, CGE_SHAPE(5, 3), scan);
    op_free_outputs(out, 3);
    cge_graph_destroy(b);
}

/* No trip count: the body's computed condition ends the loop; meta measures
 * the scan length since every input value is at hand. */
static void test_loop_computed_condition(void **state)
{
    (void)state;
    cge_graph *b = sum_body(5);
    cge_attr attrs[] = {graph_attr("body", b)};
    int64_t y0 = 0;
    cge_tensor in[] = {op_absent(), op_absent(), op_tensor(CGE_I64, CGE_SCALAR, &y0)};
    cge_tensor out[2];
    cge_status st = op_run("Loop", in, 3, attrs, 1, out, 2);
    if (st)
        fail_msg("%s", cge_last_error());
    int64_t y = 6, scan[4] = {0, 1, 3, 6};
    op_assert_equal(&out[0], CGE_I64, CGE_SCALAR, &y);
    op_assert_equal(&out[1], CGE_I64, CGE_SHAPE(4), scan);
    op_free_outputs(out, 2);
    cge_graph_destroy(b);
}

/* body(s, x) -> (s + x, s + x) */
static cge_graph *scan_body(void)
{
    cge_graph *b = new_graph("scan_body");
    assert_int_equal(cge_graph_add_input(b, "s", CGE_F32, &CGE_SHAPE(2)), CGE_OK);
    assert_int_equal(cge_graph_add_input(b, "x", CGE_F32, &CGE_SHAPE(2)), CGE_OK);
    node(b, "Add", (const char *[]){"s", "x"}, 2, "s2");
    node(b, "Identity", (const char *[]){"s2"}, 1, "o");
    assert_int_equal(cge_graph_add_output(b, "s2"), CGE_OK);
    assert_int_equal(cge_graph_add_output(b, "o"), CGE_OK);
    return b;
}

static void test_scan_directions_and_axes(void **state)
{
    (void)state;
    cge_graph *b = scan_body();
    float s0[2] = {0, 0}, x[6] = {1, 2, 3, 4, 5, 6};
    cge_tensor in[] = {op_tensor(CGE_F32, CGE_SHAPE(2), s0), op_tensor(CGE_F32, CGE_SHAPE(3, 2), x)};
    cge_tensor out[2];
    cge_attr attrs[] = {graph_attr("body", b), CGE_ATTR_I("num_scan_inputs", 1)};
    cge_status st = op_run("Scan", in, 2, attrs, 2, out, 2);
    if (st)
        fail_msg("%s", cge_last_error());
    float fin[2] = {9, 12}, acc[6] = {1, 2, 4, 6, 9, 12};
    op_assert_equal(&out[0], CGE_F32, CGE_SHAPE(2), fin);
    op_assert_equal(&out[1], CGE_F32, CGE_SHAPE(3, 2), acc);
    op_free_outputs(out, 2);

    /* Reversed input, reversed output stacked along axis 1. */
    int64_t one = 1;
    cge_attr rev[] = {graph_attr("body", b), CGE_ATTR_I("num_scan_inputs", 1),
                      CGE_ATTR_INTS("scan_input_directions", &one, 1),
                      CGE_ATTR_INTS("scan_output_directions", &one, 1),
                      CGE_ATTR_INTS("scan_output_axes", &one, 1)};
    assert_int_equal(op_run("Scan", in, 2, rev, 5, out, 2), CGE_OK);
    /* steps: [5,6], [8,10], [9,12]; written at t = 2, 1, 0 of axis 1 */
    float racc[6] = {9, 8, 5, 12, 10, 6};
    op_assert_equal(&out[0], CGE_F32, CGE_SHAPE(2), fin);
    op_assert_equal(&out[1], CGE_F32, CGE_SHAPE(2, 3), racc);
    op_free_outputs(out, 2);

    /* Scanning along axis 1 of a [2, 3] input: columns (1,4), (2,5), (3,6). */
    float xt[6] = {1, 3, 5, 2, 4, 6};
    cge_tensor in_t[] = {op_tensor(CGE_F32, CGE_SHAPE(2), s0),
                         op_tensor(CGE_F32, CGE_SHAPE(2, 3), xt)};
    cge_attr ax[] = {graph_attr("body", b), CGE_ATTR_I("num_scan_inputs", 1),
                     CGE_ATTR_INTS("scan_input_axes", &one, 1)};
    assert_int_equal(op_run("Scan", in_t, 2, ax, 3, out, 2), CGE_OK);
    op_assert_equal(&out[0], CGE_F32, CGE_SHAPE(2), fin);
    op_assert_equal(&out[1], CGE_F32, CGE_SHAPE(3, 2), acc);
    op_free_outputs(out, 2);
    cge_graph_destroy(b);
}

/* A Loop inside an If branch, reading the If's outer value: o doubled three
 * times. The inner Loop runs from inside the If's host task. */
static void test_nested_control_flow(void **state)
{
    (void)state;
    cge_graph *lb = new_graph("double");
    assert_int_equal(cge_graph_add_input(lb, "i", CGE_I64, &CGE_SCALAR), CGE_OK);
    assert_int_equal(cge_graph_add_input(lb, "c", CGE_BOOL, &CGE_SCALAR), CGE_OK);
    assert_int_equal(cge_graph_add_input(lb, "y", CGE_F32, &CGE_SHAPE(2)), CGE_OK);
    node(lb, "Add", (const char *[]){"y", "y"}, 2, "y2");
    node(lb, "Identity", (const char *[]){"c"}, 1, "c2");
    assert_int_equal(cge_graph_add_output(lb, "c2"), CGE_OK);
    assert_int_equal(cge_graph_add_output(lb, "y2"), CGE_OK);

    cge_graph *tg = new_graph("then");
    int64_t m = 3;
    assert_int_equal(cge_graph_add_constant(tg, "m", CGE_I64, &CGE_SCALAR, &m, sizeof m), CGE_OK);
    cge_node *loop = NULL;
    const char *lin[] = {"m", "", "o"}, *lout[] = {"r"};
    assert_int_equal(cge_graph_add_node(tg, "Loop", NULL, "inner", lin, 3, lout, 1, &loop), CGE_OK);
    assert_int_equal(cge_node_set_graph(loop, "body", lb), CGE_OK);
    assert_int_equal(cge_graph_add_output(tg, "r"), CGE_OK);
    cge_graph *eg = new_graph("else");
    node(eg, "Identity", (const char *[]){"o"}, 1, "e");
    assert_int_equal(cge_graph_add_output(eg, "e"), CGE_OK);

    const char *outer[] = {"o"};
    cge_attr attrs[] = {graph_attr("then_branch", tg), graph_attr("else_branch", eg),
                        strings_attr("outer_names", outer, 1)};
    uint8_t cond = 1;
    float x[2] = {1, -3};
    cge_tensor in[] = {op_tensor(CGE_BOOL, CGE_SCALAR, &cond), op_tensor(CGE_F32, CGE_SHAPE(2), x)};
    cge_tensor out[1];
    cge_status st = op_run("If", in, 2, attrs, 3, out, 1);
    if (st)
        fail_msg("%s", cge_last_error());
    float want[2] = {8, -24};
    op_assert_equal(&out[0], CGE_F32, CGE_SHAPE(2), want);
    op_free_outputs(out, 1);
    cge_graph_destroy(lb);
    cge_graph_destroy(tg);
    cge_graph_destroy(eg);
}

static void test_body_errors(void **state)
{
    (void)state;
    /* A branch reading a value that no scope defines. */
    cge_graph *tg = new_graph("then"), *eg = new_graph("else");
    node(tg, "Neg", (const char *[]){"nowhere"}, 1, "t");
    assert_int_equal(cge_graph_add_output(tg, "t"), CGE_OK);
    node(eg, "Neg", (const char *[]){"nowhere"}, 1, "e");
    assert_int_equal(cge_graph_add_output(eg, "e"), CGE_OK);
    cge_attr attrs[] = {graph_attr("then_branch", tg), graph_attr("else_branch", eg)};
    uint8_t cond = 1;
    cge_tensor in[] = {op_tensor(CGE_BOOL, CGE_SCALAR, &cond)};
    cge_tensor out[1];
    op_assert_error(op_run("If", in, 1, attrs, 2, out, 1), "[meta]", "'nowhere'");
    /* A Loop body with too few outputs for the node. */
    cge_graph *b = sum_body(0);
    cge_attr la[] = {graph_attr("body", b)};
    int64_t m = 2, y0 = 0;
    cge_tensor lin[] = {op_tensor(CGE_I64, CGE_SCALAR, &m), op_absent(),
                        op_tensor(CGE_I64, CGE_SCALAR, &y0)};
    cge_tensor lout[3];
    op_assert_error(op_run("Loop", lin, 3, la, 1, lout, 3), "[meta]", "outputs");
    /* Scan inputs of different lengths. */
    cge_graph *sb = scan_body();
    float s0[2] = {0, 0}, x[6] = {0};
    cge_tensor sin[] = {op_tensor(CGE_F32, CGE_SHAPE(2), s0), op_tensor(CGE_F32, CGE_SHAPE(3, 2), x),
                        op_tensor(CGE_F32, CGE_SHAPE(2, 2), x)};
    cge_attr sa[] = {graph_attr("body", sb), CGE_ATTR_I("num_scan_inputs", 2)};
    cge_tensor sout[2];
    op_assert_error(op_run("Scan", sin, 3, sa, 2, sout, 2), "[meta]", "different lengths");
    cge_graph_destroy(tg);
    cge_graph_destroy(eg);
    cge_graph_destroy(b);
    cge_graph_destroy(sb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_if_outer_values),
        cmocka_unit_test(test_if_shapes_follow_condition),
        cmocka_unit_test(test_if_measured_branch_runs_once),
        cmocka_unit_test(test_loop_trip_count),
        cmocka_unit_test(test_loop_computed_condition),
        cmocka_unit_test(test_loop_states_swapped_and_passed_through),
        cmocka_unit_test(test_scan_directions_and_axes),
        cmocka_unit_test(test_nested_control_flow),
        cmocka_unit_test(test_body_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
