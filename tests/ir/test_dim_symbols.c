/* A graph's table of symbolic dimension names: same name, same dim; names
 * back from dims; symbols accepted in shapes; clones keep the table; the
 * text and DOT dumps print the names. */
#include <stdlib.h>
#include <string.h>

#include "ir_test_util.h"

static void test_table(void **state)
{
    (void)state;
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("sym", &g), CGE_OK);
    assert_int_equal(cge_graph_num_dim_symbols(g), 0);
    int64_t n = cge_graph_dim_symbol(g, "batch");
    int64_t m = cge_graph_dim_symbol(g, "seq");
    assert_true(cge_dim_is_symbol(n));
    assert_true(cge_dim_is_symbol(m));
    assert_true(n != m);
    assert_int_equal(cge_graph_dim_symbol(g, "batch"), n);
    assert_int_equal(cge_graph_num_dim_symbols(g), 2);
    assert_string_equal(cge_graph_dim_symbol_name(g, n), "batch");
    assert_string_equal(cge_graph_dim_symbol_name(g, m), "seq");
    assert_null(cge_graph_dim_symbol_name(g, CGE_DIM_SYMBOL(2)));   /* never named */
    assert_null(cge_graph_dim_symbol_name(g, CGE_DIM_DYNAMIC));
    assert_null(cge_graph_dim_symbol_name(g, 8));
    assert_null(cge_graph_dim_symbol_name(NULL, n));

    /* bad names: -1 and an error, the table unchanged */
    assert_int_equal(cge_graph_dim_symbol(g, ""), CGE_DIM_DYNAMIC);
    assert_int_equal(cge_last_error_layer(), CGE_LAYER_GRAPH);
    assert_int_equal(cge_graph_dim_symbol(g, NULL), CGE_DIM_DYNAMIC);
    assert_int_equal(cge_graph_dim_symbol(NULL, "batch"), CGE_DIM_DYNAMIC);
    assert_int_equal(cge_graph_num_dim_symbols(g), 2);

    /* many symbols: the table grows, ids stay put */
    char name[32];
    for (int i = 0; i < 300; i++) {
        snprintf(name, sizeof name, "d%d", i);
        assert_int_equal(cge_graph_dim_symbol(g, name), CGE_DIM_SYMBOL(2 + i));
    }
    assert_string_equal(cge_graph_dim_symbol_name(g, CGE_DIM_SYMBOL(2 + 299)), "d299");
    assert_string_equal(cge_graph_dim_symbol_name(g, n), "batch");
    cge_graph_destroy(g);
}

static void test_shapes_and_clone(void **state)
{
    (void)state;
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("sym", &g), CGE_OK);
    int64_t n = cge_graph_dim_symbol(g, "batch");
    cge_shape s = CGE_SHAPE(n, 16);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &s), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "y", CGE_F32, &s), CGE_OK);
    const char *ins[] = {"x", "y"}, *outs[] = {"z"};
    assert_int_equal(cge_graph_add_node(g, "Add", "", "add", ins, 2, outs, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "z"), CGE_OK);
    assert_int_equal(cge_graph_set_desc(g, "z", CGE_F32, &s), CGE_OK);
    /* an unnamed symbol is a valid dim too; below the last symbol is not */
    cge_shape anon = CGE_SHAPE(CGE_DIM_SYMBOL(40), 2);
    assert_int_equal(cge_graph_add_input(g, "w", CGE_F32, &anon), CGE_OK);
    cge_shape bad = CGE_SHAPE(CGE_DIM_MIN - 1, 2);
    ir_assert_error(cge_graph_add_input(g, "v", CGE_F32, &bad), CGE_ERR_SHAPE, "'v'", "symbol");

    char buf[CGE_SHAPE_STR_MAX];
    cge_tensor_desc d;
    assert_int_equal(cge_graph_get_desc(g, "y", &d), CGE_OK);
    assert_int_equal(d.shape.dims[0], n);
    assert_string_equal(cge_graph_shape_str(g, &d.shape, buf, sizeof buf), "[batch,16]");
    assert_string_equal(cge_graph_shape_str(g, &anon, buf, sizeof buf), "[s40,2]");

    cge_graph *c = NULL;
    assert_int_equal(cge_graph_clone(g, &c), CGE_OK);
    cge_graph_destroy(g);
    assert_string_equal(cge_graph_dim_symbol_name(c, n), "batch");
    assert_int_equal(cge_graph_dim_symbol(c, "batch"), n);
    assert_int_equal(cge_graph_num_dim_symbols(c), 1);
    assert_int_equal(cge_graph_get_desc(c, "x", &d), CGE_OK);
    assert_int_equal(d.shape.dims[0], n);

    char *txt = ir_dump(cge_graph_write_text, c);
    assert_non_null(strstr(txt, "input x: float32 [batch,16]"));
    assert_non_null(strstr(txt, "output z: float32 [batch,16]"));
    assert_non_null(strstr(txt, "input w: float32 [s40,2]"));
    free(txt);
    char *dot = ir_dump(cge_graph_write_dot, c);
    assert_non_null(strstr(dot, "[batch,16]"));
    free(dot);
    cge_graph_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_shapes_and_clone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
