/* ONNX models exported by PyTorch with a symbolic batch (dynamic_axes) that
 * compute their shapes in the graph: x.view(x.size(0), -1) of a [batch,3,4,4]
 * input must come out [batch,48] from graph inference and from a session,
 * and run right for a concrete batch. Fixtures: gen_onnx_symbolic_fixtures.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "cge/cge.h"
#include "onnx_symbolic_fixtures.h"

#define FX(name) fx_##name, sizeof fx_##name

static void check_view_batch(const unsigned char *data, size_t size)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_onnx_import_buffer(data, size, NULL, NULL, &g), CGE_OK);
    assert_int_equal(cge_graph_infer_values(g), CGE_OK);
    cge_tensor_desc d;
    assert_int_equal(cge_graph_get_desc(g, cge_graph_output(g, 0), &d), CGE_OK);
    char buf[CGE_SHAPE_STR_MAX];
    assert_int_equal(d.shape.rank, 2);
    if (!cge_dim_is_symbol(d.shape.dims[0]) || d.shape.dims[1] != 48)
        fail_msg("output inferred %s, expected [batch,48]",
                 cge_graph_shape_str(g, &d.shape, buf, sizeof buf));
    assert_string_equal(cge_graph_dim_symbol_name(g, d.shape.dims[0]), "batch");

    /* A session reports the same, then runs batch 3. */
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    assert_int_equal(cge_session_compile_graph(s, 1), CGE_OK);
    assert_int_equal(cge_session_output_desc(s, 1, 0, &d), CGE_OK);
    assert_int_equal(d.shape.rank, 2);
    assert_string_equal(cge_session_dim_symbol_name(s, 1, d.shape.dims[0]), "batch");
    assert_int_equal(d.shape.dims[1], 48);
    float x[3 * 48], y[3 * 48];
    for (int i = 0; i < 3 * 48; i++)
        x[i] = (float)i * 0.25f;
    cge_tensor in = {.name = NULL, .dtype = CGE_F32, .shape = CGE_SHAPE(3, 3, 4, 4), .data = x,
                     .bytes = sizeof x};
    cge_tensor out = {.name = NULL, .data = y, .bytes = sizeof y};
    assert_int_equal(cge_session_run_graph(s, 1, &in, 1, &out, 1), CGE_OK);
    assert_true(cge_shape_equal(&out.shape, &CGE_SHAPE(3, 48)));
    assert_memory_equal(x, y, sizeof x);
    cge_session_destroy(s);
    cge_graph_destroy(g);
}

static void test_view_batch_opset11(void **state)
{
    (void)state;
    check_view_batch(FX(view_batch_opset11));
}

static void test_view_batch_opset13(void **state)
{
    (void)state;
    check_view_batch(FX(view_batch_opset13));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_view_batch_opset11),
        cmocka_unit_test(test_view_batch_opset13),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
