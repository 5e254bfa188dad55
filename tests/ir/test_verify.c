/* Structural verification and topological order: each error kind names the
 * node and value, stable order for graphs added out of order, cycles. */
#include <stdlib.h>
#include <string.h>

#include "ir_test_util.h"

static cge_graph *new_graph(const char *name)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create(name, &g), CGE_OK);
    cge_shape s = CGE_SHAPE(4);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &s), CGE_OK);
    return g;
}

static cge_node *add1(cge_graph *g, const char *op, const char *name, const char *in0,
                      const char *in1, const char *out)
{
    const char *ins[] = {in0, in1}, *outs[] = {out};
    cge_node *n = NULL;
    assert_int_equal(cge_graph_add_node(g, op, NULL, name, ins, in1 ? 2 : 1, outs, 1, &n), CGE_OK);
    return n;
}

/* Every producer comes before its consumers in `order`. */
static void assert_topological(const cge_graph *g, const int32_t *order)
{
    int32_t n = cge_graph_num_nodes(g);
    int32_t *pos = malloc((size_t)n * sizeof *pos);
    assert_non_null(pos);
    for (int32_t i = 0; i < n; i++)
        pos[i] = -1;
    for (int32_t k = 0; k < n; k++) {
        assert_in_range(order[k], 0, n - 1);
        assert_int_equal(pos[order[k]], -1);
        pos[order[k]] = k;
    }
    for (int32_t i = 0; i < n; i++) {
        const cge_node *c = cge_graph_node(g, i);
        for (int32_t k = 0; k < cge_node_num_inputs(c); k++) {
            const cge_node *p = cge_graph_producer(g, cge_node_input(c, k));
            if (p) {
                for (int32_t j = 0; j < n; j++)
                    if (cge_graph_node(g, j) == p)
                        assert_true(pos[j] < pos[i]);
            }
        }
    }
    free(pos);
}

static void test_dangling_input(void **state)
{
    (void)state;
    cge_graph *g = new_graph("g");
    add1(g, "Relu", "r", "x", NULL, "a");
    add1(g, "Add", "add1", "a", "q", "b");
    assert_int_equal(cge_graph_add_output(g, "b"), CGE_OK);
    ir_assert_error(cge_graph_verify_structure(g), CGE_ERR_NOT_FOUND, "node Add 'add1'",
                    "input 'q' is not defined");
    /* Defining q later repairs the graph. */
    cge_shape s = CGE_SHAPE(4);
    assert_int_equal(cge_graph_add_input(g, "q", CGE_F32, &s), CGE_OK);
    assert_int_equal(cge_graph_verify_structure(g), CGE_OK);
    cge_graph_destroy(g);
}

static void test_undefined_output(void **state)
{
    (void)state;
    cge_graph *g = new_graph("g");
    add1(g, "Relu", "r", "x", NULL, "a");
    assert_int_equal(cge_graph_add_output(g, "zz"), CGE_OK);
    ir_assert_error(cge_graph_verify_structure(g), CGE_ERR_NOT_FOUND, "graph output 'zz'",
                    "not defined");
    add1(g, "Neg", "late", "a", NULL, "zz");
    assert_int_equal(cge_graph_verify_structure(g), CGE_OK);
    cge_graph_destroy(g);
}

static void test_input_dtype(void **state)
{
    (void)state;
    cge_graph *g = new_graph("g");
    cge_shape s = CGE_SHAPE(4);
    assert_int_equal(cge_graph_add_input(g, "untyped", CGE_DTYPE_UNDEFINED, &s), CGE_OK);
    add1(g, "Add", "add", "x", "untyped", "a");
    ir_assert_error(cge_graph_verify_structure(g), CGE_ERR_DTYPE, "graph input 'untyped'", NULL);
    assert_int_equal(cge_graph_set_desc(g, "untyped", CGE_F32, NULL), CGE_OK);
    assert_int_equal(cge_graph_verify_structure(g), CGE_OK);
    cge_graph_destroy(g);
}

static void test_cycle(void **state)
{
    (void)state;
    cge_graph *g = new_graph("cyc");
    add1(g, "Relu", "pre", "x", NULL, "p");          /* a DAG part before the cycle */
    add1(g, "Add", "a", "p", "t2", "t1");
    add1(g, "Neg", "b", "t1", NULL, "t2");
    add1(g, "Relu", "post", "t2", NULL, "out");
    ir_assert_error(cge_graph_verify_structure(g), CGE_ERR_INVALID_ARG, "cycle",
                    "Add 'a' --t1--> Neg 'b' --t2--> Add 'a'");
    assert_null(strstr(cge_last_error(), "'pre'"));
    int32_t order[4];
    ir_assert_error(cge_graph_topo_order(g, order), CGE_ERR_INVALID_ARG, "Neg 'b'", "Add 'a'");
    cge_graph_destroy(g);

    g = new_graph("self");
    add1(g, "Add", "loop", "x", "s", "s");
    ir_assert_error(cge_graph_verify_structure(g), CGE_ERR_INVALID_ARG, "1 node",
                    "Add 'loop' --s--> Add 'loop'");
    cge_graph_destroy(g);
}

/* A ring of 100k nodes: the report stays short and names nodes on it. */
static void test_long_cycle(void **state)
{
    (void)state;
    enum { N = 100000 };
    cge_graph *g = new_graph("ring");
    char in[32], out[32];
    for (int32_t i = 0; i < N; i++) {
        snprintf(in, sizeof in, "r%d", (int)((i + N - 1) % N));
        snprintf(out, sizeof out, "r%d", (int)i);
        add1(g, "Relu", NULL, in, NULL, out);
    }
    ir_assert_error(cge_graph_verify_structure(g), CGE_ERR_INVALID_ARG, "cycle of 100000 nodes",
                    "Relu 'Relu_0'");
    assert_true(strlen(cge_last_error()) < 1000);
    cge_graph_destroy(g);
}

/* Nodes added in an order where each refers to values defined later. */
static void test_topo_out_of_order(void **state)
{
    (void)state;
    cge_graph *g = new_graph("dag");
    add1(g, "Mul", "m", "t1", "t2", "z");            /* 0: needs 1 and 2 */
    add1(g, "Relu", "r", "x", NULL, "t1");           /* 1 */
    add1(g, "Neg", "n", "x", NULL, "t2");            /* 2 */
    add1(g, "Sigmoid", "s", "t1", NULL, "u");        /* 3: needs 1 */
    add1(g, "Add", "twice", "u", "u", "v");          /* 4: reads u twice */
    add1(g, "Add", "last", "v", "z", "w");           /* 5 */
    assert_int_equal(cge_graph_add_output(g, "w"), CGE_OK);
    assert_int_equal(cge_graph_verify_structure(g), CGE_OK);
    int32_t order[6];
    assert_int_equal(cge_graph_topo_order(g, order), CGE_OK);
    /* Kahn with the smallest ready index first. */
    const int32_t expect[6] = {1, 2, 0, 3, 4, 5};
    for (int k = 0; k < 6; k++)
        assert_int_equal(order[k], expect[k]);
    assert_topological(g, order);

    /* Already topological: insertion order comes back unchanged. */
    cge_graph *h = ir_build_x2y();
    add1(h, "Relu", "r1", "x", NULL, "rx");
    int32_t o2[3];
    assert_int_equal(cge_graph_topo_order(h, o2), CGE_OK);
    assert_int_equal(o2[0], 0);
    assert_int_equal(o2[1], 1);
    assert_int_equal(o2[2], 2);
    cge_graph_destroy(h);
    cge_graph_destroy(g);
}

static void test_empty_and_null(void **state)
{
    (void)state;
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("empty", &g), CGE_OK);
    assert_int_equal(cge_graph_verify_structure(g), CGE_OK);
    assert_int_equal(cge_graph_topo_order(g, NULL), CGE_OK);
    ir_assert_error(cge_graph_verify_structure(NULL), CGE_ERR_INVALID_ARG, NULL, NULL);
    ir_assert_error(cge_graph_topo_order(NULL, NULL), CGE_ERR_INVALID_ARG, NULL, NULL);
    cge_graph_destroy(g);
    g = ir_build_x2y();
    ir_assert_error(cge_graph_topo_order(g, NULL), CGE_ERR_INVALID_ARG, NULL, NULL);
    cge_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dangling_input),    cmocka_unit_test(test_undefined_output),
        cmocka_unit_test(test_input_dtype),       cmocka_unit_test(test_cycle),
        cmocka_unit_test(test_long_cycle),        cmocka_unit_test(test_topo_out_of_order),
        cmocka_unit_test(test_empty_and_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
