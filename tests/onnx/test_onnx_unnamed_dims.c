/* Unnamed ONNX input dims (no dim_value, no dim_param) import as fresh
 * symbols of their own, so a model with an unknown batch and image size gets
 * one symbolic plan and serves new sizes with no compile, equal to a static
 * import of each size. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "cge/cge.h"
#include "onnx_unnamed_fixtures.h"

enum { MAXN = 3, MAXHW = 12 };

static cge_graph *import(const cge_shape *fixed)
{
    cge_onnx_input_shape is = {"x", fixed ? *fixed : CGE_SCALAR};
    cge_onnx_options o = {.input_shapes = fixed ? &is : NULL, .num_input_shapes = fixed ? 1 : 0};
    cge_graph *g = NULL;
    assert_int_equal(cge_onnx_import_buffer(fx_unnamed_convnet, sizeof fx_unnamed_convnet, NULL,
                                            &o, &g),
                     CGE_OK);
    return g;
}

static void test_unnamed_dims_are_fresh_symbols(void **state)
{
    (void)state;
    cge_graph *g = import(NULL);
    cge_tensor_desc d;
    assert_int_equal(cge_graph_get_desc(g, "x", &d), CGE_OK);
    char buf[CGE_SHAPE_STR_MAX];
    assert_string_equal(cge_graph_shape_str(g, &d.shape, buf, sizeof buf),
                        "[unk__x_0,3,unk__x_2,unk__x_3]");
    assert_int_equal(cge_graph_num_dim_symbols(g), 3);
    assert_int_equal(cge_graph_infer(g), CGE_OK);
    assert_int_equal(cge_graph_get_desc(g, "y", &d), CGE_OK);
    assert_string_equal(cge_graph_shape_str(g, &d.shape, buf, sizeof buf),
                        "[unk__x_0,8,(unk__x_2+1)/2,(unk__x_3+1)/2]");
    cge_graph_destroy(g);
}

static void run(cge_session *s, int64_t n, int64_t h, int64_t w, float *y, cge_shape *ys)
{
    static float x[MAXN * 3 * MAXHW * MAXHW];
    for (int64_t i = 0; i < n * 3 * h * w; i++)
        x[i] = (float)((i * 7) % 11) * 0.1f - 0.5f;
    cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(n, 3, h, w), .data = x,
                     .bytes = sizeof(float) * (size_t)(n * 3 * h * w)};
    cge_tensor out = {.name = "y", .data = y, .bytes = sizeof(float) * MAXN * 8 * MAXHW * MAXHW};
    assert_int_equal(cge_session_run_graph(s, 1, &in, 1, &out, 1), CGE_OK);
    *ys = out.shape;
}

static cge_session_graph_stats stats_of(cge_session *s)
{
    cge_session_graph_stats st;
    assert_int_equal(cge_session_get_graph_stats(s, 1, &st), CGE_OK);
    return st;
}

static void test_unnamed_model_uses_shape_program(void **state)
{
    (void)state;
    static const int64_t sizes[][3] = {{1, 8, 8}, {3, 8, 8}, {2, 7, 12}, {1, 8, 8}, {1, 5, 9}};
    for (cge_opt_level level = CGE_OPT_NONE; level <= CGE_OPT_LAYOUT; level++) {
        cge_session_options so = {.opt_level = level};
        cge_session *s = NULL;
        assert_int_equal(cge_session_create(&so, &s), CGE_OK);
        cge_graph *g = import(NULL);
        assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
        cge_graph_destroy(g);
        assert_int_equal(cge_session_compile_graph(s, 1), CGE_OK);
        cge_session_graph_stats st0 = stats_of(s);
        assert_true(st0.shape_program);
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            static float y[MAXN * 8 * MAXHW * MAXHW], wy[MAXN * 8 * MAXHW * MAXHW];
            const int64_t *z = sizes[k];
            cge_shape ys, ws, xs = CGE_SHAPE(z[0], 3, z[1], z[2]);
            run(s, z[0], z[1], z[2], y, &ys);
            cge_session *r = NULL;
            assert_int_equal(cge_session_create(&so, &r), CGE_OK);
            cge_graph *gs = import(&xs);
            assert_int_equal(cge_session_add_graph(r, 1, gs), CGE_OK);
            cge_graph_destroy(gs);
            run(r, z[0], z[1], z[2], wy, &ws);
            cge_session_destroy(r);
            assert_true(cge_shape_equal(&ys, &ws));
            assert_int_equal(ys.dims[2], (z[1] + 1) / 2);
            assert_memory_equal(y, wy, sizeof(float) * (size_t)cge_shape_numel(&ys));
        }
        cge_session_graph_stats st = stats_of(s);
        assert_true(st.shape_program);
        assert_int_equal(st.compiles, st0.compiles);   /* none per signature */
        assert_int_equal(st.specializations, 4);
        cge_session_destroy(s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unnamed_dims_are_fresh_symbols),
        cmocka_unit_test(test_unnamed_model_uses_shape_program),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
