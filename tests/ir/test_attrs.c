/* Attributes: every kind round-trips as a deep copy (nested graphs and tensor
 * data included), replacement, removal, typed getters, and refused values. */
#include <stdlib.h>
#include <string.h>

#include "ir_test_util.h"

/* A graph with one node to hang attributes on. */
static cge_graph *one_node(cge_node **n)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("host", &g), CGE_OK);
    cge_shape s = CGE_SHAPE(3);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &s), CGE_OK);
    const char *in[] = {"x"}, *out[] = {"y"};
    assert_int_equal(cge_graph_add_node(g, "Custom", "test", "node1", in, 1, out, 1, n), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    return g;
}

static void test_kind_names(void **state)
{
    (void)state;
    assert_string_equal(cge_attr_kind_name(CGE_ATTR_INT), "int");
    assert_string_equal(cge_attr_kind_name(CGE_ATTR_FLOATS), "floats");
    assert_string_equal(cge_attr_kind_name(CGE_ATTR_GRAPHS), "graphs");
    assert_string_equal(cge_attr_kind_name((cge_attr_kind)77), "invalid");
}

static void test_scalars_and_lists(void **state)
{
    (void)state;
    cge_node *n = NULL;
    cge_graph *g = one_node(&n);
    cge_attrs *a = cge_node_attrs(n);
    assert_int_equal(cge_attrs_count(a), 0);

    char sbuf[] = "reflect";
    int64_t ints[] = {1, -2, 3};
    float floats[] = {0.25f, -1.5f};
    char s0[] = "a", s1[] = "bee";
    const char *strs[] = {s0, s1};
    assert_int_equal(cge_node_set_int(n, "axis", -1), CGE_OK);
    assert_int_equal(cge_node_set_float(n, "eps", 1e-5f), CGE_OK);
    assert_int_equal(cge_node_set_string(n, "mode", sbuf), CGE_OK);
    assert_int_equal(cge_node_set_ints(n, "pads", ints, 3), CGE_OK);
    assert_int_equal(cge_node_set_floats(n, "scales", floats, 2), CGE_OK);
    assert_int_equal(cge_attrs_set(a, &(cge_attr){.name = "names", .kind = CGE_ATTR_STRINGS,
                                                  .strings = strs, .n = 2}),
                     CGE_OK);
    assert_int_equal(cge_node_set_ints(n, "empty", NULL, 0), CGE_OK);
    /* The node holds copies: the caller's buffers may change. */
    sbuf[0] = 'X';
    ints[0] = 100;
    floats[0] = 100;
    s1[0] = 'X';

    const cge_attrs *c = cge_node_attrs_const(n);
    assert_int_equal(cge_attrs_count(c), 7);
    assert_string_equal(cge_attrs_at(c, 0)->name, "axis");
    assert_int_equal(cge_attrs_at(c, 0)->kind, CGE_ATTR_INT);
    assert_null(cge_attrs_at(c, 7));
    assert_null(cge_attrs_at(c, -1));
    assert_int_equal(cge_attrs_get_int(c, "axis", 0), -1);
    assert_true(cge_attrs_get_float(c, "eps", 0) == 1e-5f);
    assert_string_equal(cge_attrs_get_string(c, "mode", NULL), "reflect");
    const int64_t *iv = NULL;
    assert_int_equal(cge_attrs_get_ints(c, "pads", &iv), 3);
    assert_int_equal(iv[0], 1);
    assert_int_equal(iv[1], -2);
    assert_int_equal(iv[2], 3);
    const float *fv = NULL;
    assert_int_equal(cge_attrs_get_floats(c, "scales", &fv), 2);
    assert_true(fv[0] == 0.25f && fv[1] == -1.5f);
    const cge_attr *sa = cge_attrs_find(c, "names");
    assert_non_null(sa);
    assert_int_equal(sa->kind, CGE_ATTR_STRINGS);
    assert_int_equal(sa->n, 2);
    assert_string_equal(sa->strings[0], "a");
    assert_string_equal(sa->strings[1], "bee");
    assert_int_equal(cge_attrs_get_ints(c, "empty", &iv), 0);

    /* Absent or of another kind: the default. */
    assert_int_equal(cge_attrs_get_int(c, "nope", 42), 42);
    assert_int_equal(cge_attrs_get_int(c, "eps", 42), 42);
    assert_true(cge_attrs_get_float(c, "axis", 7.0f) == 7.0f);
    assert_string_equal(cge_attrs_get_string(c, "axis", "d"), "d");
    iv = (const int64_t *)1;
    assert_int_equal(cge_attrs_get_ints(c, "scales", &iv), -1);
    assert_null(iv);
    assert_int_equal(cge_attrs_get_floats(c, "nope", NULL), -1);
    assert_null(cge_attrs_get_tensor(c, "axis"));
    assert_null(cge_attrs_get_graph(c, "axis"));
    assert_null(cge_attrs_find(c, "nope"));
    assert_null(cge_attrs_find(NULL, "axis"));
    assert_int_equal(cge_attrs_count(NULL), 0);

    /* Replacing keeps the position and may change the kind. */
    assert_int_equal(cge_node_set_string(n, "axis", "last"), CGE_OK);
    assert_int_equal(cge_attrs_count(c), 7);
    assert_string_equal(cge_attrs_at(c, 0)->name, "axis");
    assert_string_equal(cge_attrs_get_string(c, "axis", NULL), "last");
    assert_int_equal(cge_attrs_get_int(c, "axis", 5), 5);

    assert_int_equal(cge_attrs_remove(a, "mode"), CGE_OK);
    assert_int_equal(cge_attrs_count(c), 6);
    assert_null(cge_attrs_find(c, "mode"));
    assert_string_equal(cge_attrs_at(c, 2)->name, "pads");
    ir_assert_error(cge_attrs_remove(a, "mode"), CGE_ERR_NOT_FOUND, "'node1'", "'mode'");
    cge_graph_destroy(g);
}

static void test_tensors(void **state)
{
    (void)state;
    cge_node *n = NULL;
    cge_graph *g = one_node(&n);
    int32_t data[6] = {1, 2, 3, 4, 5, 6};
    cge_tensor t = {.name = "val", .dtype = CGE_I32, .shape = CGE_SHAPE(2, 3), .data = data,
                    .bytes = sizeof data};
    assert_int_equal(cge_node_set_tensor(n, "value", &t), CGE_OK);
    data[0] = 99;
    const cge_tensor *got = cge_attrs_get_tensor(cge_node_attrs_const(n), "value");
    assert_non_null(got);
    assert_ptr_not_equal(got, &t);
    assert_ptr_not_equal(got->data, data);
    assert_int_equal((uintptr_t)got->data % 64, 0);
    assert_string_equal(got->name, "val");
    assert_int_equal(got->dtype, CGE_I32);
    assert_int_equal(got->shape.rank, 2);
    assert_int_equal(got->bytes, 24);
    assert_int_equal(((const int32_t *)got->data)[0], 1);
    assert_int_equal(((const int32_t *)got->data)[5], 6);

    /* A list of tensors: a nameless scalar and an empty tensor. */
    float f = 3.5f;
    cge_tensor list[2] = {
        {.dtype = CGE_F32, .shape = CGE_SCALAR, .data = &f, .bytes = sizeof f},
        {.name = "empty", .dtype = CGE_I64, .shape = CGE_SHAPE(0), .data = NULL, .bytes = 0},
    };
    assert_int_equal(cge_attrs_set(cge_node_attrs(n), &(cge_attr){.name = "ts",
                                                                   .kind = CGE_ATTR_TENSORS,
                                                                   .tensors = list, .n = 2}),
                     CGE_OK);
    const cge_attr *ts = cge_attrs_find(cge_node_attrs_const(n), "ts");
    assert_int_equal(ts->n, 2);
    assert_null(ts->tensors[0].name);
    assert_true(*(const float *)ts->tensors[0].data == 3.5f);
    assert_string_equal(ts->tensors[1].name, "empty");
    assert_int_equal(ts->tensors[1].bytes, 0);

    /* Sizes must match the dense size exactly; a refused value changes nothing. */
    t.bytes = 20;
    ir_assert_error(cge_node_set_tensor(n, "value", &t), CGE_ERR_INVALID_ARG, "'node1'", "'value'");
    t.bytes = 24;
    t.data = NULL;
    ir_assert_error(cge_node_set_tensor(n, "value", &t), CGE_ERR_INVALID_ARG, "'node1'", NULL);
    t.data = data;
    t.dtype = CGE_DTYPE_UNDEFINED;
    ir_assert_error(cge_node_set_tensor(n, "value", &t), CGE_ERR_INVALID_ARG, "'node1'", NULL);
    t.dtype = CGE_I32;
    t.shape = CGE_SHAPE(CGE_DIM_DYNAMIC, 3);
    ir_assert_error(cge_node_set_tensor(n, "value", &t), CGE_ERR_INVALID_ARG, "'node1'", NULL);
    ir_assert_error(cge_node_set_tensor(n, "value", NULL), CGE_ERR_INVALID_ARG, "'value'", NULL);
    list[1].bytes = 8;
    ir_assert_error(cge_attrs_set(cge_node_attrs(n), &(cge_attr){.name = "ts",
                                                                  .kind = CGE_ATTR_TENSORS,
                                                                  .tensors = list, .n = 2}),
                    CGE_ERR_INVALID_ARG, "'ts'", NULL);
    got = cge_attrs_get_tensor(cge_node_attrs_const(n), "value");
    assert_int_equal(((const int32_t *)got->data)[0], 1);
    assert_int_equal(cge_attrs_find(cge_node_attrs_const(n), "ts")->n, 2);
    cge_graph_destroy(g);
}

static void test_graphs(void **state)
{
    (void)state;
    cge_node *n = NULL;
    cge_graph *g = one_node(&n);
    cge_graph *body = ir_build_x2y();
    /* Two levels: the body itself carries a graph attribute. */
    cge_graph *inner = ir_build_x2y();
    assert_int_equal(cge_node_set_graph(cge_graph_node(body, 1), "inner", inner), CGE_OK);
    assert_int_equal(cge_node_set_graph(n, "body", body), CGE_OK);
    /* Changing or destroying the caller's graphs does not reach the copy. */
    const char *in[] = {"z"}, *out[] = {"w"};
    assert_int_equal(cge_graph_add_node(body, "Neg", NULL, NULL, in, 1, out, 1, NULL), CGE_OK);
    cge_graph_destroy(inner);

    const cge_graph *b = cge_attrs_get_graph(cge_node_attrs_const(n), "body");
    assert_non_null(b);
    assert_ptr_not_equal(b, body);
    assert_int_equal(cge_graph_num_nodes(b), 2);
    assert_string_equal(cge_graph_name(b), "x_plus_2y");
    assert_int_equal(cge_graph_verify_structure(b), CGE_OK);
    const cge_graph *in2 =
        cge_attrs_get_graph(cge_node_attrs_const(cge_graph_node(b, 1)), "inner");
    assert_non_null(in2);
    assert_int_equal(cge_graph_num_nodes(in2), 2);
    assert_string_equal(cge_node_name(cge_graph_node(in2, 1)), "Add1");

    const cge_graph *list[] = {body, g};
    assert_int_equal(cge_attrs_set(cge_node_attrs(n), &(cge_attr){.name = "branches",
                                                                   .kind = CGE_ATTR_GRAPHS,
                                                                   .graphs = list, .n = 2}),
                     CGE_OK);
    cge_graph_destroy(body);
    const cge_attr *br = cge_attrs_find(cge_node_attrs_const(n), "branches");
    assert_int_equal(br->n, 2);
    assert_int_equal(cge_graph_num_nodes(br->graphs[0]), 3);
    /* A snapshot of the host graph itself, taken before "branches" existed. */
    assert_string_equal(cge_graph_name(br->graphs[1]), "host");
    assert_int_equal(cge_attrs_count(cge_node_attrs_const(cge_graph_node(br->graphs[1], 0))), 1);

    /* Cloning the host clones the nested graphs too. */
    cge_graph *c = NULL;
    assert_int_equal(cge_graph_clone(g, &c), CGE_OK);
    const cge_graph *cb = cge_attrs_get_graph(cge_node_attrs_const(cge_graph_node(c, 0)), "body");
    assert_non_null(cb);
    assert_ptr_not_equal(cb, b);
    assert_int_equal(cge_graph_num_nodes(cb), 2);
    assert_non_null(cge_attrs_get_graph(cge_node_attrs_const(cge_graph_node(cb, 1)), "inner"));
    cge_graph_destroy(g);
    assert_int_equal(cge_graph_verify_structure(cb), CGE_OK);
    cge_graph_destroy(c);
}

static void test_refused_values(void **state)
{
    (void)state;
    cge_node *n = NULL;
    cge_graph *g = one_node(&n);
    cge_attrs *a = cge_node_attrs(n);
    assert_int_equal(cge_node_set_int(n, "k", 1), CGE_OK);
    const char *strs[] = {"a", NULL};
    const cge_graph *graphs[] = {NULL};
    ir_assert_error(cge_node_set_string(n, "k", NULL), CGE_ERR_INVALID_ARG, "'node1'", "'k'");
    ir_assert_error(cge_node_set_ints(n, "k", NULL, 2), CGE_ERR_INVALID_ARG, "'k'", NULL);
    ir_assert_error(cge_node_set_floats(n, "k", (const float[]){1}, -1), CGE_ERR_INVALID_ARG,
                    "'k'", NULL);
    ir_assert_error(cge_attrs_set(a, &(cge_attr){.name = "k", .kind = CGE_ATTR_STRINGS,
                                                 .strings = strs, .n = 2}),
                    CGE_ERR_INVALID_ARG, "'k'", NULL);
    ir_assert_error(cge_attrs_set(a, &(cge_attr){.name = "k", .kind = CGE_ATTR_GRAPHS,
                                                 .graphs = graphs, .n = 1}),
                    CGE_ERR_INVALID_ARG, "'k'", NULL);
    ir_assert_error(cge_node_set_graph(n, "k", NULL), CGE_ERR_INVALID_ARG, "'k'", NULL);
    ir_assert_error(cge_attrs_set(a, &(cge_attr){.name = "k", .kind = (cge_attr_kind)42}),
                    CGE_ERR_INVALID_ARG, "'k'", "kind");
    ir_assert_error(cge_attrs_set(a, &(cge_attr){.name = "k", .kind = CGE_ATTR_UNDEFINED}),
                    CGE_ERR_INVALID_ARG, "'k'", NULL);
    ir_assert_error(cge_node_set_int(n, "", 1), CGE_ERR_INVALID_ARG, "'node1'", NULL);
    ir_assert_error(cge_node_set_int(n, NULL, 1), CGE_ERR_INVALID_ARG, "'node1'", NULL);
    ir_assert_error(cge_node_set_int(NULL, "k", 1), CGE_ERR_INVALID_ARG, NULL, NULL);
    ir_assert_error(cge_attrs_set(NULL, &(cge_attr){.name = "k", .kind = CGE_ATTR_INT}),
                    CGE_ERR_INVALID_ARG, NULL, NULL);
    /* The old value survived every refusal. */
    assert_int_equal(cge_attrs_count(a), 1);
    assert_int_equal(cge_attrs_get_int(a, "k", 0), 1);
    cge_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kind_names), cmocka_unit_test(test_scalars_and_lists),
        cmocka_unit_test(test_tensors),    cmocka_unit_test(test_graphs),
        cmocka_unit_test(test_refused_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
