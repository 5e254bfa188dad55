/* Graph rewriting for passes: value ids, rewiring inputs and outputs,
 * removing nodes and constants (detached, then compacted), moving nodes,
 * renaming values; the graph verifies after each rewrite, and misuse is an
 * error that changes nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cge/graph.h"

static cge_node *add(cge_graph *g, const char *op, const char *name, const char *in0,
                     const char *in1, const char *out)
{
    const char *ins[2] = {in0, in1};
    cge_node *n = NULL;
    assert_int_equal(cge_graph_add_node(g, op, "", name, ins, in1 ? 2 : 1, &out, 1, &n), CGE_OK);
    return n;
}

/* x -> A(a) -> B(b) -> C(y); c is a constant read by B. */
static cge_graph *chain(void)
{
    cge_graph *g = NULL;
    cge_shape s = CGE_SHAPE(4);
    float c[4] = {1, 2, 3, 4};
    assert_int_equal(cge_graph_create("chain", &g), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &s), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "c", CGE_F32, &s, c, sizeof c), CGE_OK);
    add(g, "Neg", "A", "x", NULL, "a");
    add(g, "Add", "B", "a", "c", "b");
    add(g, "Relu", "C", "b", NULL, "y");
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    return g;
}

static void test_ids(void **state)
{
    cge_graph *g = chain();
    int32_t x = cge_graph_value_id(g, "x"), c = cge_graph_value_id(g, "c"), y = cge_graph_value_id(g, "y");
    assert_true(x >= 0 && c >= 0 && y >= 0);
    assert_int_equal(cge_graph_value_id(g, "nope"), -1);
    assert_string_equal(cge_graph_value_name(g, y), "y");
    assert_null(cge_graph_value_name(g, cge_graph_num_values(g)));
    assert_int_equal(cge_graph_value_kind(g, x), CGE_VALUE_INPUT);
    assert_int_equal(cge_graph_value_kind(g, c), CGE_VALUE_CONSTANT);
    assert_int_equal(cge_graph_value_kind(g, y), CGE_VALUE_NODE);
    assert_true(cge_graph_value_is_output(g, y));
    assert_false(cge_graph_value_is_output(g, x));
    assert_ptr_equal(cge_graph_value_producer(g, y), cge_graph_find_node(g, "C"));
    assert_non_null(cge_graph_value_constant(g, c));
    assert_null(cge_graph_value_constant(g, x));
    cge_node *b = cge_graph_find_node(g, "B");
    assert_int_equal(cge_node_index(b), 1);
    assert_int_equal(cge_node_input_id(b, 1), c);
    assert_int_equal(cge_node_input_id(b, 2), -1);
    assert_int_equal(cge_node_output_id(b, 0), cge_graph_value_id(g, "b"));
    cge_tensor_desc d;
    assert_int_equal(cge_graph_value_desc(g, x, &d), CGE_OK);
    assert_string_equal(d.name, "x");
    assert_int_equal(cge_graph_value_desc(g, -1, &d), CGE_ERR_NOT_FOUND);
    cge_graph_destroy(g);
}

static void test_remove_and_compact(void **state)
{
    cge_graph *g = chain();
    cge_node *b = cge_graph_find_node(g, "B"), *c = cge_graph_find_node(g, "C");
    /* Bypass B: C reads a; then B goes. */
    assert_int_equal(cge_node_set_input(c, 0, "a"), CGE_OK);
    assert_int_equal(cge_graph_remove_node(g, b), CGE_OK);
    assert_true(cge_node_is_removed(b));
    assert_int_equal(cge_node_num_inputs(b), 0);
    assert_null(cge_graph_find_node(g, "B"));
    assert_int_equal(cge_graph_value_kind(g, cge_graph_value_id(g, "b")), CGE_VALUE_UNDEFINED);
    assert_int_equal(cge_graph_num_nodes(g), 3);   /* still listed until compaction */
    assert_int_equal(cge_graph_remove_constant(g, "c"), CGE_OK);
    assert_null(cge_graph_constant(g, "c"));
    assert_int_equal(cge_graph_remove_constant(g, "c"), CGE_ERR_NOT_FOUND);
    assert_int_equal(cge_graph_compact(g), CGE_OK);
    assert_int_equal(cge_graph_num_nodes(g), 2);
    assert_int_equal(cge_graph_num_constants(g), 0);
    assert_ptr_equal(cge_graph_node(g, 1), c);
    assert_int_equal(cge_node_index(c), 1);
    assert_ptr_equal(cge_graph_producer(g, "y"), c);
    assert_ptr_equal(cge_graph_find_node(g, "C"), c);
    assert_int_equal(cge_graph_verify_structure(g), CGE_OK);
    /* The name is free again. */
    add(g, "Exp", "B", "y", NULL, "z");
    assert_int_equal(cge_graph_verify_structure(g), CGE_OK);
    cge_graph *copy = NULL;
    assert_int_equal(cge_graph_clone(g, &copy), CGE_OK);
    assert_int_equal(cge_graph_num_nodes(copy), 3);
    cge_graph_destroy(copy);
    cge_graph_destroy(g);
}

static void test_removed_output_breaks_verify(void **state)
{
    cge_graph *g = chain();
    assert_int_equal(cge_graph_remove_node(g, cge_graph_find_node(g, "C")), CGE_OK);
    assert_int_equal(cge_graph_compact(g), CGE_OK);
    assert_int_equal(cge_graph_verify_structure(g), CGE_ERR_NOT_FOUND);
    cge_graph_destroy(g);
}

static void test_set_output_and_replace_uses(void **state)
{
    cge_graph *g = chain();
    cge_node *a = cge_graph_find_node(g, "A"), *c = cge_graph_find_node(g, "C");
    /* C is dropped; B produces y directly under that name. */
    assert_int_equal(cge_graph_remove_node(g, c), CGE_OK);
    cge_node *b = cge_graph_find_node(g, "B");
    assert_int_equal(cge_node_set_output(b, 0, "y"), CGE_OK);
    assert_ptr_equal(cge_graph_producer(g, "y"), b);
    assert_null(cge_graph_producer(g, "b"));
    /* y is defined now: nobody else may produce it. */
    assert_int_equal(cge_node_set_output(a, 0, "y"), CGE_ERR_EXISTS);
    assert_string_equal(cge_node_output(a, 0), "a");
    assert_int_equal(cge_node_set_output(a, 3, "q"), CGE_ERR_INVALID_ARG);
    assert_int_equal(cge_graph_compact(g), CGE_OK);
    assert_int_equal(cge_graph_verify_structure(g), CGE_OK);
    /* Every reader of a reads x instead. */
    assert_int_equal(cge_graph_replace_uses(g, "a", "x"), CGE_OK);
    assert_string_equal(cge_node_input(b, 0), "x");
    assert_int_equal(cge_node_set_input(b, 1, ""), CGE_OK);
    assert_string_equal(cge_node_input(b, 1), "");
    assert_int_equal(cge_node_set_input(b, 2, "x"), CGE_ERR_INVALID_ARG);
    cge_graph_destroy(g);
}

static void test_move_and_rename(void **state)
{
    cge_graph *g = chain();
    cge_node *c = cge_graph_find_node(g, "C");
    assert_int_equal(cge_graph_move_node(g, c, 0), CGE_OK);
    assert_ptr_equal(cge_graph_node(g, 0), c);
    assert_int_equal(cge_node_index(cge_graph_find_node(g, "A")), 1);
    assert_ptr_equal(cge_graph_producer(g, "a"), cge_graph_find_node(g, "A"));
    assert_int_equal(cge_graph_verify_structure(g), CGE_OK);
    int32_t order[3];
    assert_int_equal(cge_graph_topo_order(g, order), CGE_OK);
    assert_int_equal(order[2], 0);   /* C still runs last */
    assert_int_equal(cge_graph_move_node(g, c, 3), CGE_ERR_INVALID_ARG);
    int32_t id = cge_graph_value_id(g, "a");
    assert_int_equal(cge_graph_rename_value(g, "a", "alpha"), CGE_OK);
    assert_int_equal(cge_graph_value_id(g, "alpha"), id);
    assert_int_equal(cge_graph_value_id(g, "a"), -1);
    assert_string_equal(cge_node_input(cge_graph_find_node(g, "B"), 0), "alpha");
    assert_int_equal(cge_graph_rename_value(g, "alpha", "x"), CGE_ERR_EXISTS);
    assert_int_equal(cge_graph_rename_value(g, "c", "cc"), CGE_OK);
    assert_string_equal(cge_graph_constant(g, "cc")->name, "cc");
    assert_int_equal(cge_graph_rename_value(g, "y", "out"), CGE_OK);
    assert_string_equal(cge_graph_output(g, 0), "out");
    assert_int_equal(cge_graph_verify_structure(g), CGE_OK);
    cge_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_remove_and_compact),
        cmocka_unit_test(test_removed_output_breaks_verify),
        cmocka_unit_test(test_set_output_and_replace_uses),
        cmocka_unit_test(test_move_and_rename),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
