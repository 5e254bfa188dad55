/* Inference that carries the values of shape computations along
 * (cge_graph_infer_values): shapes computed in the graph become known. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cge/compiler.h"

static void add_i64(cge_graph *g, const char *name, const int64_t *v, int64_t n)
{
    cge_shape s = CGE_SHAPE(n);
    assert_int_equal(cge_graph_add_constant(g, name, CGE_I64, &s, v, sizeof(int64_t) * (size_t)n),
                     CGE_OK);
}

static void node(cge_graph *g, const char *op, const char *const *ins, int32_t ni, const char *out)
{
    assert_int_equal(cge_graph_add_node(g, op, "", NULL, ins, ni, &out, 1, NULL), CGE_OK);
}

/* x [1,8,6]: Slice(x, 0, Shape(x)[2] / 2 * 1 + 0, axis 2) as exporters write
 * the split of a fused projection. Inference carries the int64 chain's
 * values from the static shape, so the Slice is static: [1,8,3]. Without
 * that it came out [1,8,?], which sent such graphs to op-by-op execution. */
static void test_infer_evaluates_shape_arithmetic(void **state)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("shape_math", &g), CGE_OK);
    cge_shape xs = CGE_SHAPE(1, 8, 6);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
    const int64_t two = 2, one = 1, zero = 0, idx = 2;
    add_i64(g, "idx", &idx, 1);
    add_i64(g, "two", &two, 1);
    add_i64(g, "one", &one, 1);
    add_i64(g, "zero", &zero, 1);
    add_i64(g, "axes", &idx, 1);
    const char *in_shape[1] = {"x"}, *in_gather[2] = {"shp", "idx"}, *in_div[2] = {"dim", "two"};
    const char *in_mul[2] = {"half", "one"}, *in_add[2] = {"end", "zero"};
    const char *in_slice[4] = {"x", "zero", "end0", "axes"};
    node(g, "Shape", in_shape, 1, "shp");
    node(g, "Gather", in_gather, 2, "dim");
    node(g, "Div", in_div, 2, "half");
    node(g, "Mul", in_mul, 2, "end");
    node(g, "Add", in_add, 2, "end0");
    node(g, "Slice", in_slice, 4, "y");
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    assert_int_equal(cge_graph_infer_values(g), CGE_OK);
    cge_tensor_desc d;
    assert_int_equal(cge_graph_get_desc(g, "y", &d), CGE_OK);
    assert_true(cge_shape_equal(&d.shape, &CGE_SHAPE(1, 8, 3)));
    /* A dynamic input dim keeps the chain unknown: no guess is made. */
    cge_shape dyn = CGE_SHAPE(1, 8, CGE_DIM_DYNAMIC);
    assert_int_equal(cge_graph_set_desc(g, "x", CGE_F32, &dyn), CGE_OK);
    assert_int_equal(cge_graph_infer_values(g), CGE_OK);
    assert_int_equal(cge_graph_get_desc(g, "y", &d), CGE_OK);
    assert_false(cge_shape_is_static(&d.shape));
    cge_graph_destroy(g);
}

/* ConstantOfShape(Size(Shape(x)) - 1) as the expanded LayerNormalization
 * writes it: a tensor whose shape's length is itself computed. */
static void test_infer_computed_shape_length(void **state)
{
    (void)state;
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("len", &g), CGE_OK);
    cge_shape xs = CGE_SHAPE(2, 3, 5);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
    const int64_t one = 1;
    add_i64(g, "one", &one, 1);
    const char *a[1] = {"x"}, *b[1] = {"shp"}, *c[2] = {"rank", "one"}, *d[1] = {"n"};
    node(g, "Shape", a, 1, "shp");
    node(g, "Size", b, 1, "rank");
    node(g, "Sub", c, 2, "n");
    node(g, "ConstantOfShape", d, 1, "zeros");
    assert_int_equal(cge_graph_add_output(g, "zeros"), CGE_OK);
    assert_int_equal(cge_graph_infer_values(g), CGE_OK);
    cge_tensor_desc dd;
    assert_int_equal(cge_graph_get_desc(g, "zeros", &dd), CGE_OK);
    /* n = [3 - 1] = [2]: zeros has shape [2] (its values are the shape). */
    assert_true(cge_shape_equal(&dd.shape, &CGE_SHAPE(2)));
    assert_int_equal(dd.dtype, CGE_F32);
    /* The same graph without carried values cannot know that shape. */
    assert_int_equal(cge_graph_infer(g), CGE_OK);
    assert_int_equal(cge_graph_get_desc(g, "zeros", &dd), CGE_OK);
    assert_false(cge_shape_is_static(&dd.shape));
    cge_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_infer_evaluates_shape_arithmetic),
        cmocka_unit_test(test_infer_computed_shape_length),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
