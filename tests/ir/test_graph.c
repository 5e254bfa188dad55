/* Graph construction: the x + 2y graph by hand, value descriptors, constants,
 * automatic and duplicate names, add-time errors, clone, a 100k-node chain. */
#include <stdlib.h>
#include <string.h>

#include "ir_test_util.h"

static void test_x2y_structure(void **state)
{
    (void)state;
    cge_graph *g = ir_build_x2y();
    assert_string_equal(cge_graph_name(g), "x_plus_2y");
    assert_int_equal(cge_graph_num_inputs(g), 2);
    assert_string_equal(cge_graph_input(g, 0), "x");
    assert_string_equal(cge_graph_input(g, 1), "y");
    assert_null(cge_graph_input(g, 2));
    assert_null(cge_graph_input(g, -1));
    assert_int_equal(cge_graph_num_outputs(g), 1);
    assert_string_equal(cge_graph_output(g, 0), "z");
    assert_int_equal(cge_graph_num_nodes(g), 2);
    assert_int_equal(cge_graph_num_constants(g), 0);

    cge_node *a0 = cge_graph_node(g, 0), *a1 = cge_graph_node(g, 1);
    assert_non_null(a0);
    assert_non_null(a1);
    assert_null(cge_graph_node(g, 2));
    assert_string_equal(cge_node_op_type(a0), "Add");
    assert_string_equal(cge_node_domain(a0), "");
    assert_string_equal(cge_node_domain(a1), "");
    assert_string_equal(cge_node_name(a0), "Add0");
    assert_string_equal(cge_node_name(a1), "Add1");
    assert_int_equal(cge_node_num_inputs(a1), 2);
    assert_string_equal(cge_node_input(a1, 0), "t0");
    assert_string_equal(cge_node_input(a1, 1), "y");
    assert_null(cge_node_input(a1, 2));
    assert_int_equal(cge_node_num_outputs(a1), 1);
    assert_string_equal(cge_node_output(a1, 0), "z");

    assert_ptr_equal(cge_graph_find_node(g, "Add1"), a1);
    assert_null(cge_graph_find_node(g, "Add2"));
    assert_ptr_equal(cge_graph_producer(g, "t0"), a0);
    assert_ptr_equal(cge_graph_producer(g, "z"), a1);
    assert_null(cge_graph_producer(g, "x"));
    assert_null(cge_graph_producer(g, "nope"));

    assert_int_equal(cge_graph_verify_structure(g), CGE_OK);
    int32_t order[2] = {-1, -1};
    assert_int_equal(cge_graph_topo_order(g, order), CGE_OK);
    assert_int_equal(order[0], 0);
    assert_int_equal(order[1], 1);
    cge_graph_destroy(g);
    cge_graph_destroy(NULL);
}

static void test_descriptors(void **state)
{
    (void)state;
    cge_graph *g = ir_build_x2y();
    cge_tensor_desc d;
    assert_int_equal(cge_graph_get_desc(g, "x", &d), CGE_OK);
    assert_string_equal(d.name, "x");
    assert_int_equal(d.dtype, CGE_F32);
    assert_int_equal(d.shape.rank, 2);
    assert_int_equal(d.shape.dims[0], 8);
    assert_int_equal(d.shape.dims[1], 2048);
    assert_int_equal(d.format, CGE_FORMAT_PLAIN);

    /* A node output nobody described yet. */
    assert_int_equal(cge_graph_get_desc(g, "t0", &d), CGE_OK);
    assert_int_equal(d.dtype, CGE_DTYPE_UNDEFINED);
    assert_int_equal(d.shape.rank, 0);

    cge_shape s = CGE_SHAPE(CGE_DIM_DYNAMIC, 2048);
    assert_int_equal(cge_graph_set_desc(g, "t0", CGE_F16, &s), CGE_OK);
    assert_int_equal(cge_graph_set_format(g, "t0", CGE_FORMAT_NHWC), CGE_OK);
    assert_int_equal(cge_graph_get_desc(g, "t0", &d), CGE_OK);
    assert_int_equal(d.dtype, CGE_F16);
    assert_true(cge_shape_equal(&d.shape, &s));
    assert_int_equal(d.format, CGE_FORMAT_NHWC);
    /* NULL shape changes only the dtype. */
    assert_int_equal(cge_graph_set_desc(g, "t0", CGE_F32, NULL), CGE_OK);
    assert_int_equal(cge_graph_get_desc(g, "t0", &d), CGE_OK);
    assert_int_equal(d.dtype, CGE_F32);
    assert_int_equal(d.shape.dims[0], CGE_DIM_DYNAMIC);

    ir_assert_error(cge_graph_get_desc(g, "q", &d), CGE_ERR_NOT_FOUND, "'q'", NULL);
    ir_assert_error(cge_graph_set_desc(g, "q", CGE_F32, &s), CGE_ERR_NOT_FOUND, "'q'", NULL);
    ir_assert_error(cge_graph_set_format(g, "q", CGE_FORMAT_NHWC), CGE_ERR_NOT_FOUND, "'q'", NULL);
    ir_assert_error(cge_graph_set_desc(g, "t0", (cge_dtype)99, NULL), CGE_ERR_DTYPE, "'t0'",
                    NULL);
    cge_shape bad = {.rank = 9};
    ir_assert_error(cge_graph_set_desc(g, "t0", CGE_F32, &bad), CGE_ERR_SHAPE, "'t0'", NULL);
    ir_assert_error(cge_graph_set_format(g, "t0", (cge_format)7), CGE_ERR_INVALID_ARG, "'t0'",
                    NULL);
    /* The failed calls left the descriptor alone. */
    assert_int_equal(cge_graph_get_desc(g, "t0", &d), CGE_OK);
    assert_int_equal(d.dtype, CGE_F32);
    assert_int_equal(d.format, CGE_FORMAT_NHWC);
    cge_graph_destroy(g);
}

static void test_inputs_errors(void **state)
{
    (void)state;
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create(NULL, &g), CGE_OK);
    assert_string_equal(cge_graph_name(g), "");
    cge_shape s = CGE_SHAPE(2, 3);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &s), CGE_OK);
    ir_assert_error(cge_graph_add_input(g, "x", CGE_F32, &s), CGE_ERR_EXISTS, "'x'",
                    "graph input");
    ir_assert_error(cge_graph_add_input(g, "w", (cge_dtype)42, &s), CGE_ERR_DTYPE, "'w'", NULL);
    ir_assert_error(cge_graph_add_input(g, "w", CGE_F32, NULL), CGE_ERR_INVALID_ARG, "'w'", NULL);
    cge_shape r9 = {.rank = 9};
    ir_assert_error(cge_graph_add_input(g, "w", CGE_F32, &r9), CGE_ERR_SHAPE, "'w'", NULL);
    cge_shape neg = CGE_SHAPE(2, CGE_DIM_MIN - 1);   /* -2, -3, ... are symbols */
    ir_assert_error(cge_graph_add_input(g, "w", CGE_F32, &neg), CGE_ERR_SHAPE, "'w'", NULL);
    ir_assert_error(cge_graph_add_input(g, "", CGE_F32, &s), CGE_ERR_INVALID_ARG, NULL, NULL);
    ir_assert_error(cge_graph_add_input(NULL, "w", CGE_F32, &s), CGE_ERR_INVALID_ARG, NULL, NULL);
    ir_assert_error(cge_graph_add_output(g, ""), CGE_ERR_INVALID_ARG, NULL, NULL);
    assert_int_equal(cge_graph_add_output(g, "x"), CGE_OK);   /* identity graph */
    ir_assert_error(cge_graph_add_output(g, "x"), CGE_ERR_EXISTS, "'x'", NULL);
    assert_int_equal(cge_graph_num_inputs(g), 1);
    assert_int_equal(cge_graph_num_outputs(g), 1);
    assert_int_equal(cge_graph_verify_structure(g), CGE_OK);
    ir_assert_error(cge_graph_create("g", NULL), CGE_ERR_INVALID_ARG, NULL, NULL);
    cge_graph_destroy(g);
}

static void test_constants(void **state)
{
    (void)state;
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("c", &g), CGE_OK);
    float w[6] = {1, 2, 3, 4, 5, 6};
    cge_shape s = CGE_SHAPE(2, 3);
    assert_int_equal(cge_graph_add_constant(g, "w", CGE_F32, &s, w, sizeof w), CGE_OK);
    w[0] = 100;   /* the graph holds a copy */
    int64_t k = 7;
    assert_int_equal(cge_graph_add_constant(g, "k", CGE_I64, &CGE_SCALAR, &k, sizeof k), CGE_OK);
    cge_shape empty = CGE_SHAPE(0, 4);
    assert_int_equal(cge_graph_add_constant(g, "e", CGE_F32, &empty, NULL, 0), CGE_OK);

    assert_int_equal(cge_graph_num_constants(g), 3);
    assert_string_equal(cge_graph_constant_name(g, 0), "w");
    assert_string_equal(cge_graph_constant_name(g, 1), "k");
    assert_null(cge_graph_constant_name(g, 3));
    const cge_tensor *t = cge_graph_constant(g, "w");
    assert_non_null(t);
    assert_string_equal(t->name, "w");
    assert_int_equal(t->dtype, CGE_F32);
    assert_true(cge_shape_equal(&t->shape, &s));
    assert_int_equal(t->bytes, 24);
    assert_int_equal((uintptr_t)t->data % 64, 0);
    assert_true(((const float *)t->data)[0] == 1.0f);
    assert_true(((const float *)t->data)[5] == 6.0f);
    const cge_tensor *tk = cge_graph_constant(g, "k");
    assert_int_equal(*(const int64_t *)tk->data, 7);
    assert_int_equal(tk->shape.rank, 0);
    const cge_tensor *te = cge_graph_constant(g, "e");
    assert_int_equal(te->bytes, 0);
    assert_non_null(te->data);
    /* Adding more constants keeps earlier pointers valid. */
    for (int i = 0; i < 40; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "c%d", i);
        assert_int_equal(cge_graph_add_constant(g, nm, CGE_I64, &CGE_SCALAR, &k, sizeof k), CGE_OK);
    }
    assert_ptr_equal(cge_graph_constant(g, "w"), t);
    assert_true(((const float *)t->data)[1] == 2.0f);

    cge_tensor_desc d;
    assert_int_equal(cge_graph_get_desc(g, "w", &d), CGE_OK);
    assert_int_equal(d.dtype, CGE_F32);
    assert_true(cge_shape_equal(&d.shape, &s));
    assert_null(cge_graph_constant(g, "nope"));
    assert_null(cge_graph_producer(g, "w"));

    ir_assert_error(cge_graph_add_constant(g, "v", CGE_F32, &s, w, 20), CGE_ERR_INVALID_ARG,
                    "'v'", "24 bytes");
    ir_assert_error(cge_graph_add_constant(g, "v", CGE_F32, &s, NULL, 24), CGE_ERR_INVALID_ARG,
                    "'v'", NULL);
    cge_shape dyn = CGE_SHAPE(CGE_DIM_DYNAMIC, 3);
    ir_assert_error(cge_graph_add_constant(g, "v", CGE_F32, &dyn, w, 24), CGE_ERR_SHAPE, "'v'",
                    NULL);
    ir_assert_error(cge_graph_add_constant(g, "v", CGE_DTYPE_UNDEFINED, &s, w, 24),
                    CGE_ERR_DTYPE, "'v'", NULL);
    ir_assert_error(cge_graph_add_constant(g, "w", CGE_F32, &s, w, 24), CGE_ERR_EXISTS, "'w'",
                    "constant");
    cge_shape one = CGE_SHAPE(1);
    ir_assert_error(cge_graph_add_input(g, "w", CGE_F32, &one), CGE_ERR_EXISTS, "'w'",
                    "constant");
    /* A constant's descriptor follows its data. */
    ir_assert_error(cge_graph_set_desc(g, "w", CGE_F16, &s), CGE_ERR_STATE, "'w'", NULL);
    assert_int_equal(cge_graph_set_desc(g, "w", CGE_F32, &s), CGE_OK);
    assert_int_equal(cge_graph_num_constants(g), 43);
    cge_graph_destroy(g);
}

static void test_auto_names(void **state)
{
    (void)state;
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("n", &g), CGE_OK);
    cge_shape s = CGE_SHAPE(4);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &s), CGE_OK);
    const char *in[] = {"x"};
    const char *o0[] = {"a"}, *o1[] = {"b"}, *o2[] = {"c"}, *o3[] = {"d"}, *o4[] = {"e"};
    cge_node *n = NULL;
    assert_int_equal(cge_graph_add_node(g, "Relu", NULL, NULL, in, 1, o0, 1, &n), CGE_OK);
    assert_string_equal(cge_node_name(n), "Relu_0");
    /* An explicit name that an automatic one would take next is skipped. */
    assert_int_equal(cge_graph_add_node(g, "Relu", NULL, "Relu_1", in, 1, o1, 1, &n), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Relu", NULL, "", in, 1, o2, 1, &n), CGE_OK);
    assert_string_equal(cge_node_name(n), "Relu_2");
    assert_int_equal(cge_graph_add_node(g, "Relu", NULL, NULL, in, 1, o3, 1, &n), CGE_OK);
    assert_string_equal(cge_node_name(n), "Relu_3");
    assert_int_equal(cge_graph_add_node(g, "Neg", "custom.dom", NULL, in, 1, o4, 1, &n), CGE_OK);
    assert_string_equal(cge_node_name(n), "Neg_0");
    assert_string_equal(cge_node_domain(n), "custom.dom");
    assert_ptr_equal(cge_graph_find_node(g, "Relu_3"), cge_graph_node(g, 3));
    assert_int_equal(cge_graph_verify_structure(g), CGE_OK);
    cge_graph_destroy(g);
}

static void test_add_node_errors(void **state)
{
    (void)state;
    cge_graph *g = ir_build_x2y();
    float c = 2;
    assert_int_equal(cge_graph_add_constant(g, "two", CGE_F32, &CGE_SCALAR, &c, sizeof c), CGE_OK);
    const char *in[] = {"x", "y"};
    const char *o_t0[] = {"t0"}, *o_x[] = {"x"}, *o_two[] = {"two"};
    const char *o_dup[] = {"u", "u"}, *o_empty[] = {""}, *o_null[] = {NULL}, *o_ok[] = {"m"};
    cge_node *n = (cge_node *)1;

    /* A value produced twice names both producers. */
    ir_assert_error(cge_graph_add_node(g, "Mul", NULL, "mul1", in, 2, o_t0, 1, &n),
                    CGE_ERR_EXISTS, "Mul 'mul1'", "Add 'Add0'");
    assert_null(n);
    ir_assert_error(cge_graph_add_node(g, "Mul", NULL, "mul1", in, 2, o_x, 1, NULL),
                    CGE_ERR_EXISTS, "'mul1'", "graph input");
    ir_assert_error(cge_graph_add_node(g, "Mul", NULL, "mul1", in, 2, o_two, 1, NULL),
                    CGE_ERR_EXISTS, "'mul1'", "constant");
    ir_assert_error(cge_graph_add_node(g, "Split", NULL, "sp", in, 1, o_dup, 2, NULL),
                    CGE_ERR_EXISTS, "'sp'", "'u'");
    ir_assert_error(cge_graph_add_node(g, "Mul", NULL, "mul1", in, 2, o_empty, 1, NULL),
                    CGE_ERR_INVALID_ARG, "'mul1'", "output 0");
    ir_assert_error(cge_graph_add_node(g, "Mul", NULL, "mul1", in, 2, o_null, 1, NULL),
                    CGE_ERR_INVALID_ARG, "'mul1'", NULL);
    ir_assert_error(cge_graph_add_node(g, "Mul", NULL, "Add0", in, 2, o_ok, 1, NULL),
                    CGE_ERR_EXISTS, "'Add0'", NULL);
    ir_assert_error(cge_graph_add_node(g, NULL, NULL, "mul1", in, 2, o_ok, 1, NULL),
                    CGE_ERR_INVALID_ARG, "'mul1'", NULL);
    ir_assert_error(cge_graph_add_node(g, "Mul", NULL, "mul1", NULL, 2, o_ok, 1, NULL),
                    CGE_ERR_INVALID_ARG, "'mul1'", NULL);
    ir_assert_error(cge_graph_add_node(g, "Mul", NULL, "mul1", in, -1, o_ok, 1, NULL),
                    CGE_ERR_INVALID_ARG, "'mul1'", NULL);
    /* None of the failures changed the graph. */
    assert_int_equal(cge_graph_num_nodes(g), 2);
    assert_ptr_equal(cge_graph_producer(g, "t0"), cge_graph_node(g, 0));
    assert_null(cge_graph_producer(g, "u"));
    assert_null(cge_graph_find_node(g, "mul1"));
    assert_int_equal(cge_graph_verify_structure(g), CGE_OK);
    /* "u" was only named by a failed call: a later node may produce it. */
    const char *o_u[] = {"u"};
    assert_int_equal(cge_graph_add_node(g, "Mul", NULL, "mul1", in, 2, o_u, 1, &n), CGE_OK);
    assert_ptr_equal(cge_graph_producer(g, "u"), n);
    /* Absent optional inputs. */
    const char *opt_in[] = {"x", "", NULL, "y"}, *o_v[] = {"v"};
    assert_int_equal(cge_graph_add_node(g, "Clip", NULL, NULL, opt_in, 4, o_v, 1, &n), CGE_OK);
    assert_string_equal(cge_node_input(n, 1), "");
    assert_string_equal(cge_node_input(n, 2), "");
    assert_string_equal(cge_node_input(n, 3), "y");
    assert_int_equal(cge_graph_verify_structure(g), CGE_OK);
    cge_graph_destroy(g);
}

static void test_clone(void **state)
{
    (void)state;
    cge_graph *g = ir_build_x2y();
    float w[2] = {0.5f, 1.5f};
    cge_shape s2 = CGE_SHAPE(2);
    assert_int_equal(cge_graph_add_constant(g, "w", CGE_F32, &s2, w, sizeof w), CGE_OK);
    cge_node *a0 = cge_graph_node(g, 0);
    assert_int_equal(cge_node_set_float(a0, "alpha", 2.0f), CGE_OK);
    const int64_t axes[] = {0, 1};
    assert_int_equal(cge_node_set_ints(a0, "axes", axes, 2), CGE_OK);
    cge_shape st = CGE_SHAPE(8, 2048);
    assert_int_equal(cge_graph_set_desc(g, "t0", CGE_F32, &st), CGE_OK);

    cge_graph *c = NULL;
    assert_int_equal(cge_graph_clone(g, &c), CGE_OK);
    assert_non_null(c);
    assert_ptr_not_equal(c, g);
    char *tg = ir_dump(cge_graph_write_text, g), *tc = ir_dump(cge_graph_write_text, c);
    assert_string_equal(tg, tc);
    free(tc);
    assert_string_equal(cge_graph_name(c), "x_plus_2y");
    assert_int_equal(cge_graph_num_nodes(c), 2);
    assert_int_equal(cge_graph_num_inputs(c), 2);
    assert_int_equal(cge_graph_num_outputs(c), 1);
    cge_node *c0 = cge_graph_node(c, 0);
    assert_ptr_not_equal(c0, a0);
    assert_string_equal(cge_node_name(c0), "Add0");
    assert_ptr_equal(cge_graph_producer(c, "t0"), c0);
    assert_ptr_equal(cge_graph_find_node(c, "Add1"), cge_graph_node(c, 1));
    assert_true(cge_attrs_get_float(cge_node_attrs_const(c0), "alpha", 0) == 2.0f);
    const cge_tensor *cw = cge_graph_constant(c, "w");
    assert_non_null(cw);
    /* Constant data is immutable, so the clone shares it (no weight copy). */
    assert_ptr_equal(cw->data, cge_graph_constant(g, "w")->data);
    assert_memory_equal(cw->data, w, sizeof w);
    assert_int_equal((uintptr_t)cw->data % 64, 0);
    cge_tensor_desc d;
    assert_int_equal(cge_graph_get_desc(c, "t0", &d), CGE_OK);
    assert_int_equal(d.dtype, CGE_F32);
    assert_true(cge_shape_equal(&d.shape, &st));
    assert_int_equal(cge_graph_verify_structure(c), CGE_OK);

    /* Mutating the clone leaves the original as it was. */
    assert_int_equal(cge_node_set_float(c0, "alpha", 3.0f), CGE_OK);
    assert_int_equal(cge_attrs_remove(cge_node_attrs(c0), "axes"), CGE_OK);
    assert_int_equal(cge_graph_set_desc(c, "t0", CGE_F16, NULL), CGE_OK);
    const char *in[] = {"z"}, *out[] = {"r"};
    assert_int_equal(cge_graph_add_node(c, "Relu", NULL, NULL, in, 1, out, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_output(c, "r"), CGE_OK);
    assert_int_equal(cge_graph_num_nodes(g), 2);
    assert_int_equal(cge_graph_num_outputs(g), 1);
    assert_null(cge_graph_find_node(g, "Relu_0"));
    assert_true(cge_attrs_get_float(cge_node_attrs_const(a0), "alpha", 0) == 2.0f);
    assert_int_equal(cge_attrs_get_ints(cge_node_attrs_const(a0), "axes", NULL), 2);
    assert_int_equal(cge_graph_get_desc(g, "t0", &d), CGE_OK);
    assert_int_equal(d.dtype, CGE_F32);
    assert_true(((const float *)cge_graph_constant(g, "w")->data)[0] == 0.5f);
    char *tg2 = ir_dump(cge_graph_write_text, g);
    assert_string_equal(tg, tg2);
    free(tg);
    free(tg2);

    /* The clone outlives its source, constants included. */
    cge_graph_destroy(g);
    assert_int_equal(cge_graph_verify_structure(c), CGE_OK);
    assert_memory_equal(cge_graph_constant(c, "w")->data, w, sizeof w);
    assert_string_equal(cge_node_input(cge_graph_node(c, 2), 0), "z");
    /* Automatic names continue after the cloned ones. */
    const char *in2[] = {"r"}, *out2[] = {"r2"};
    cge_node *n = NULL;
    assert_int_equal(cge_graph_add_node(c, "Relu", NULL, NULL, in2, 1, out2, 1, &n), CGE_OK);
    assert_string_equal(cge_node_name(n), "Relu_1");
    cge_graph_destroy(c);

    ir_assert_error(cge_graph_clone(NULL, &c), CGE_ERR_INVALID_ARG, NULL, NULL);
    assert_null(c);
}

/* Node i reads t<i> and writes t<i+1>; nodes are added last-first, so every
 * node refers to a value that a later-added node defines. */
static void test_long_chain(void **state)
{
    (void)state;
    enum { N = 100000 };
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("chain", &g), CGE_OK);
    cge_shape s = CGE_SHAPE(16);
    assert_int_equal(cge_graph_add_input(g, "t0", CGE_F32, &s), CGE_OK);
    char in[32], out[32];
    const char *ins[] = {in}, *outs[] = {out};
    for (int32_t i = N - 1; i >= 0; i--) {
        snprintf(in, sizeof in, "t%d", (int)i);
        snprintf(out, sizeof out, "t%d", (int)i + 1);
        assert_int_equal(cge_graph_add_node(g, "Relu", NULL, NULL, ins, 1, outs, 1, NULL), CGE_OK);
    }
    snprintf(out, sizeof out, "t%d", (int)N);
    assert_int_equal(cge_graph_add_output(g, out), CGE_OK);
    assert_int_equal(cge_graph_num_nodes(g), N);
    assert_int_equal(cge_graph_verify_structure(g), CGE_OK);
    int32_t *order = malloc(N * sizeof *order);
    assert_non_null(order);
    assert_int_equal(cge_graph_topo_order(g, order), CGE_OK);
    for (int32_t k = 0; k < N; k++)
        if (order[k] != N - 1 - k)
            fail_msg("order[%d] = %d, expected %d", (int)k, (int)order[k], (int)(N - 1 - k));
    assert_string_equal(cge_node_name(cge_graph_node(g, N - 1)), "Relu_99999");
    assert_ptr_equal(cge_graph_find_node(g, "Relu_54321"), cge_graph_node(g, 54321));

    free(order);
    cge_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_x2y_structure), cmocka_unit_test(test_descriptors),
        cmocka_unit_test(test_inputs_errors), cmocka_unit_test(test_constants),
        cmocka_unit_test(test_auto_names),    cmocka_unit_test(test_add_node_errors),
        cmocka_unit_test(test_clone),         cmocka_unit_test(test_long_chain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
