/* The functional builder: x + 2y, generated per-op calls (single output,
 * variadic inputs, multiple outputs), the generic call, and errors that point
 * at the call that caused them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"

static void assert_desc(cge_builder *b, cge_t t, cge_dtype dtype, cge_shape shape)
{
    cge_tensor_desc d;
    assert_int_equal(cge_es_desc(b, t, &d), CGE_OK);
    assert_int_equal(d.dtype, dtype);
    if (!cge_shape_equal(&d.shape, &shape)) {
        char a[CGE_SHAPE_STR_MAX], e[CGE_SHAPE_STR_MAX];
        fail_msg("shape %s, expected %s", cge_shape_str(&d.shape, a, sizeof a),
                 cge_shape_str(&shape, e, sizeof e));
    }
}

static void test_x_plus_2y(void **state)
{
    (void)state;
    cge_builder *b = cge_builder_create("x_plus_2y");
    assert_non_null(b);
    cge_t x = cge_es_input(b, "x", CGE_F32, CGE_SHAPE(8, 2048));
    cge_t y = cge_es_input(b, "y", CGE_F32, CGE_SHAPE(8, 2048));
    cge_builder_set_next_name(b, "Add0");
    cge_t a0 = cge_es_add(b, x, y);
    cge_builder_set_next_name(b, "Add1");
    cge_t z = cge_es_add(b, a0, y);
    assert_true(cge_t_valid(z));
    assert_desc(b, z, CGE_F32, CGE_SHAPE(8, 2048));
    assert_int_equal(cge_es_output(b, z, "z"), CGE_OK);
    cge_graph *g = NULL;
    assert_int_equal(cge_builder_finish(b, &g), CGE_OK);
    cge_builder_destroy(b);

    assert_int_equal(cge_graph_num_nodes(g), 2);
    assert_int_equal(cge_graph_num_inputs(g), 2);
    assert_int_equal(cge_graph_num_outputs(g), 1);
    assert_string_equal(cge_graph_output(g, 0), "z");
    cge_node *n1 = cge_graph_find_node(g, "Add1");
    assert_non_null(n1);
    assert_string_equal(cge_node_input(n1, 0), "Add0");
    assert_string_equal(cge_node_input(n1, 1), "y");
    assert_string_equal(cge_node_output(n1, 0), "z");
    cge_tensor_desc d;
    assert_int_equal(cge_graph_get_desc(g, "z", &d), CGE_OK);
    assert_int_equal(d.dtype, CGE_F32);
    assert_int_equal(cge_graph_verify(g), CGE_OK);
    cge_graph_destroy(g);
}

static void test_error_points_at_call(void **state)
{
    (void)state;
    cge_builder *b = cge_builder_create("bad");
    cge_t x = cge_es_input(b, "x", CGE_F32, CGE_SHAPE(2, 3));
    cge_t y = cge_es_input(b, "y", CGE_F32, CGE_SHAPE(4));
    cge_t ok = cge_es_relu(b, x);
    assert_true(cge_t_valid(ok));
    cge_builder_set_next_name(b, "the_bad_add");
    cge_t bad = cge_es_add(b, x, y);
    assert_false(cge_t_valid(bad));
    assert_int_equal(cge_builder_status(b), CGE_ERR_SHAPE);
    assert_non_null(strstr(cge_last_error(), "[meta] Add 'the_bad_add'"));
    /* Later calls do nothing and keep the first error. */
    cge_t later = cge_es_relu(b, ok);
    assert_false(cge_t_valid(later));
    assert_non_null(strstr(cge_builder_error_message(b), "the_bad_add"));
    cge_graph *g = (cge_graph *)1;
    assert_int_equal(cge_builder_finish(b, &g), CGE_ERR_SHAPE);
    assert_null(g);
    assert_int_equal(cge_last_error_layer(), CGE_LAYER_META);
    assert_non_null(strstr(cge_last_error(), "[meta] Add 'the_bad_add'"));
    cge_builder_destroy(b);
}

static void test_generated_calls(void **state)
{
    (void)state;
    cge_builder *b = cge_builder_create("gen");
    cge_t a = cge_es_input(b, "a", CGE_F32, CGE_SHAPE(2, 3));
    cge_t w = cge_es_input(b, "w", CGE_F32, CGE_SHAPE(3, 4));
    cge_t m = cge_es_mat_mul(b, a, w);
    assert_desc(b, m, CGE_F32, CGE_SHAPE(2, 4));
    cge_t parts[3] = {m, m, m};
    cge_t cat = cge_es_concat(b, parts, 3, 1);
    assert_desc(b, cat, CGE_F32, CGE_SHAPE(2, 12));
    cge_t halves[2];
    assert_int_equal(cge_es_split(b, cat, CGE_NONE, 1, 0, halves, 2), CGE_OK);
    assert_desc(b, halves[0], CGE_F32, CGE_SHAPE(2, 6));
    assert_desc(b, halves[1], CGE_F32, CGE_SHAPE(2, 6));
    cge_t sm = cge_es_softmax(b, halves[1], -1);
    assert_desc(b, sm, CGE_F32, CGE_SHAPE(2, 6));
    cge_t c = cge_es_cast(b, sm, CGE_F16);
    assert_desc(b, c, CGE_F16, CGE_SHAPE(2, 6));
    int64_t shape[2] = {3, 4};
    cge_t r = cge_es_reshape(b, halves[0], cge_es_vector_i64(b, shape, 2), 0);
    assert_desc(b, r, CGE_F32, CGE_SHAPE(3, 4));
    assert_int_equal(cge_es_output(b, c, "probs"), CGE_OK);
    assert_int_equal(cge_es_output(b, r, NULL), CGE_OK);
    cge_graph *g = NULL;
    assert_int_equal(cge_builder_finish(b, &g), CGE_OK);
    assert_string_equal(cge_graph_output(g, 0), "probs");
    cge_graph_destroy(g);
    cge_builder_destroy(b);
}

static void test_generic_call(void **state)
{
    (void)state;
    cge_builder *b = cge_builder_create("generic");
    cge_t x = cge_es_input(b, "x", CGE_F32, CGE_SHAPE(CGE_DIM_DYNAMIC, 5));
    cge_attr axis = CGE_ATTR_I("axis", 0);
    cge_t s = cge_es_op1(b, "Softmax", "", &x, 1, &axis, 1);
    assert_desc(b, s, CGE_F32, CGE_SHAPE(CGE_DIM_DYNAMIC, 5));
    /* Unknown op: a [schema] error from the call. */
    cge_t u = cge_es_op1(b, "AddCustom", "custom", &x, 1, NULL, 0);
    assert_false(cge_t_valid(u));
    assert_string_equal(cge_last_error(),
                        "[schema] no operator 'AddCustom' in domain 'custom' (is its library loaded?)");
    cge_builder_destroy(b);

    b = cge_builder_create("misuse");
    x = cge_es_input(b, "x", CGE_F32, CGE_SHAPE(2));
    cge_t ins[2] = {x, CGE_NONE};
    assert_false(cge_t_valid(cge_es_op1(b, "Add", "", ins, 2, NULL, 0)));
    assert_non_null(strstr(cge_last_error(), "[schema] Add"));
    assert_non_null(strstr(cge_last_error(), "required input 1"));
    cge_builder_destroy(b);

    b = cge_builder_create("foreign");
    cge_t bogus = {77};
    assert_false(cge_t_valid(cge_es_relu(b, bogus)));
    assert_non_null(strstr(cge_last_error(), "[graph]"));
    cge_builder_destroy(b);

    b = cge_builder_create("attr_kind");
    x = cge_es_input(b, "x", CGE_F32, CGE_SHAPE(2));
    cge_attr wrong = CGE_ATTR_F("axis", 1.0f);
    assert_false(cge_t_valid(cge_es_op1(b, "Softmax", "", &x, 1, &wrong, 1)));
    assert_non_null(strstr(cge_last_error(), "[schema] Softmax"));
    assert_non_null(strstr(cge_last_error(), "'axis' is float"));
    cge_builder_destroy(b);
}

static void test_outputs_and_names(void **state)
{
    (void)state;
    cge_builder *b = cge_builder_create("names");
    cge_t x = cge_es_input(b, "x", CGE_F32, CGE_SHAPE(2));
    cge_t n = cge_es_neg(b, x);
    assert_int_equal(cge_es_output(b, n, "x"), CGE_ERR_INVALID_ARG); /* taken by the input */
    assert_non_null(strstr(cge_last_error(), "'x' is already used"));
    cge_builder_destroy(b);

    b = cge_builder_create("passthrough");
    x = cge_es_input(b, "x", CGE_F32, CGE_SHAPE(2));
    assert_int_equal(cge_es_output(b, x, "same"), CGE_OK);
    cge_graph *g = NULL;
    assert_int_equal(cge_builder_finish(b, &g), CGE_OK);
    /* An input cannot be renamed: an Identity carries it to the output name. */
    assert_int_equal(cge_graph_num_nodes(g), 1);
    assert_string_equal(cge_node_op_type(cge_graph_node(g, 0)), "Identity");
    assert_string_equal(cge_graph_output(g, 0), "same");
    cge_graph_destroy(g);
    cge_builder_destroy(b);

    b = cge_builder_create("empty");
    cge_es_input(b, "x", CGE_F32, CGE_SHAPE(2));
    g = NULL;
    assert_int_equal(cge_builder_finish(b, &g), CGE_ERR_STATE);
    assert_non_null(strstr(cge_last_error(), "no outputs"));
    cge_builder_destroy(b);
    cge_builder_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_x_plus_2y),       cmocka_unit_test(test_error_points_at_call),
        cmocka_unit_test(test_generated_calls), cmocka_unit_test(test_generic_call),
        cmocka_unit_test(test_outputs_and_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
