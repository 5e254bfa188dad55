/* Sessions: x + 2y built both ways, several graphs, input and output checks
 * (each a [session] error that leaves outputs untouched), dynamic input
 * shapes (one instance per signature), value-dependent shapes, asynchronous
 * runs on user streams, compile errors naming the node. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <math.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"

#define N 16384

static cge_graph *x_plus_2y_manual(cge_shape shape)
{
    cge_graph *g = NULL;
    const char *i0[] = {"x", "y"}, *o0[] = {"t"}, *i1[] = {"t", "y"}, *o1[] = {"z"};
    assert_int_equal(cge_graph_create("x2y", &g), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &shape), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "y", CGE_F32, &shape), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Add", "", "Add0", i0, 2, o0, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Add", "", "Add1", i1, 2, o1, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "z"), CGE_OK);
    return g;
}

static cge_graph *x_plus_2y_functional(void)
{
    cge_builder *b = cge_builder_create("x2y_es");
    cge_t x = cge_es_input(b, "x", CGE_F32, CGE_SHAPE(8, 2048));
    cge_t y = cge_es_input(b, "y", CGE_F32, CGE_SHAPE(8, 2048));
    cge_es_output(b, cge_es_add(b, cge_es_add(b, x, y), y), "z");
    cge_graph *g = NULL;
    assert_int_equal(cge_builder_finish(b, &g), CGE_OK);
    cge_builder_destroy(b);
    return g;
}

static float xs[N], ys[N], zs[N];

static void fill(void)
{
    for (int i = 0; i < N; i++) {
        xs[i] = (float)(i % 97) * 0.25f - 3.0f;
        ys[i] = (float)(i % 13) * -0.5f + 1.0f;
    }
}

static void check_z(int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (zs[i] != xs[i] + 2.0f * ys[i])
            fail_msg("z[%lld] = %g, expected %g", (long long)i, zs[i], xs[i] + 2.0f * ys[i]);
}

static void io(cge_tensor in[2], cge_tensor out[1], cge_shape shape)
{
    size_t nb = cge_tensor_nbytes(CGE_F32, &shape);
    in[0] = (cge_tensor){.name = "x", .dtype = CGE_F32, .shape = shape, .data = xs, .bytes = nb};
    in[1] = (cge_tensor){.name = "y", .dtype = CGE_F32, .shape = shape, .data = ys, .bytes = nb};
    out[0] = (cge_tensor){.name = "z", .data = zs, .bytes = sizeof zs};
}

static void test_x_plus_2y_both_builders(void **state)
{
    (void)state;
    fill();
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    cge_graph *g1 = x_plus_2y_manual(CGE_SHAPE(8, 2048)), *g2 = x_plus_2y_functional();
    assert_int_equal(cge_session_add_graph(s, 1, g1), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 2, g2), CGE_OK);
    cge_graph_destroy(g1); /* the session keeps its own copies */
    cge_graph_destroy(g2);
    for (uint32_t id = 1; id <= 2; id++) {
        assert_int_equal(cge_session_compile_graph(s, id), CGE_OK);
        cge_tensor in[2], out[1];
        io(in, out, CGE_SHAPE(8, 2048));
        memset(zs, 0, sizeof zs);
        assert_int_equal(cge_session_run_graph(s, id, in, 2, out, 1), CGE_OK);
        check_z(N);
        assert_int_equal(out[0].dtype, CGE_F32);
        cge_shape want = CGE_SHAPE(8, 2048);
        assert_true(cge_shape_equal(&out[0].shape, &want));
    }
    int32_t ni = 0, no = 0;
    assert_int_equal(cge_session_num_io(s, 1, &ni, &no), CGE_OK);
    assert_int_equal(ni, 2);
    assert_int_equal(no, 1);
    cge_tensor_desc d;
    assert_int_equal(cge_session_input_desc(s, 1, 1, &d), CGE_OK);
    assert_string_equal(d.name, "y");
    assert_int_equal(cge_session_output_desc(s, 2, 0, &d), CGE_OK);
    assert_string_equal(d.name, "z");
    assert_int_equal(cge_session_remove_graph(s, 1), CGE_OK);
    cge_tensor in[2], out[1];
    io(in, out, CGE_SHAPE(8, 2048));
    cge_status st = cge_session_run_graph(s, 1, in, 2, out, 1);
    assert_int_equal(st, CGE_ERR_NOT_FOUND);
    assert_string_equal(cge_last_error(), "[session] no graph with id 1 in this session");
    cge_graph *again = x_plus_2y_manual(CGE_SHAPE(8, 2048));
    assert_int_equal(cge_session_add_graph(s, 2, again), CGE_ERR_EXISTS);
    cge_graph_destroy(again);
    cge_session_destroy(s);
    cge_session_destroy(NULL);
}

static void expect(cge_status st, cge_status want, const char *needle)
{
    assert_int_equal(st, want);
    if (strncmp(cge_last_error(), "[session]", 9) || !strstr(cge_last_error(), needle))
        fail_msg("error '%s' should be a [session] error containing '%s'", cge_last_error(), needle);
    for (int i = 0; i < 8; i++)
        assert_true(zs[i] == -7.0f); /* outputs untouched */
}

static void test_input_checks(void **state)
{
    (void)state;
    fill();
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    cge_graph *g = x_plus_2y_manual(CGE_SHAPE(8, 2048));
    assert_int_equal(cge_session_add_graph(s, 7, g), CGE_OK);
    cge_graph_destroy(g);
    cge_tensor in[2], out[1];
    for (int i = 0; i < 8; i++)
        zs[i] = -7.0f;

    io(in, out, CGE_SHAPE(8, 2048));
    expect(cge_session_run_graph(s, 7, in, 1, out, 1), CGE_ERR_INVALID_ARG, "takes 2 inputs; 1 given");
    in[1].name = "q";
    expect(cge_session_run_graph(s, 7, in, 2, out, 1), CGE_ERR_NOT_FOUND, "no input named 'q'");
    io(in, out, CGE_SHAPE(8, 2048));
    in[0].dtype = CGE_I32;
    expect(cge_session_run_graph(s, 7, in, 2, out, 1), CGE_ERR_DTYPE,
           "input 'x' is int32; the graph declares float32");
    io(in, out, CGE_SHAPE(8, 2048));
    in[1].shape = CGE_SHAPE(4, 2048);
    expect(cge_session_run_graph(s, 7, in, 2, out, 1), CGE_ERR_SHAPE,
           "input 'y' has shape [4,2048]; the graph declares [8,2048]");
    io(in, out, CGE_SHAPE(8, 2048));
    in[0].data = NULL;
    expect(cge_session_run_graph(s, 7, in, 2, out, 1), CGE_ERR_INVALID_ARG, "data is NULL");
    io(in, out, CGE_SHAPE(8, 2048));
    out[0].bytes = 100;
    expect(cge_session_run_graph(s, 7, in, 2, out, 1), CGE_ERR_INVALID_ARG,
           "output 'z' is float32 [8,2048] and needs 65536 bytes");
    io(in, out, CGE_SHAPE(8, 2048));
    out[0].name = "zz";
    expect(cge_session_run_graph(s, 7, in, 2, out, 1), CGE_ERR_NOT_FOUND, "no output named 'zz'");
    io(in, out, CGE_SHAPE(8, 2048));
    in[1].name = NULL;
    expect(cge_session_run_graph(s, 7, in, 2, out, 1), CGE_ERR_INVALID_ARG, "name either every input or none");
    io(in, out, CGE_SHAPE(8, 2048));
    in[1] = in[0];
    expect(cge_session_run_graph(s, 7, in, 2, out, 1), CGE_ERR_INVALID_ARG, "'x' is given twice");

    /* Positional inputs and outputs work; the session still runs after errors. */
    io(in, out, CGE_SHAPE(8, 2048));
    in[0].name = in[1].name = NULL;
    out[0].name = NULL;
    assert_int_equal(cge_session_run_graph(s, 7, in, 2, out, 1), CGE_OK);
    check_z(N);
    cge_session_destroy(s);
}

static void test_dynamic_shapes(void **state)
{
    (void)state;
    fill();
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    cge_graph *g = x_plus_2y_manual(CGE_SHAPE(CGE_DIM_DYNAMIC, 16));
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    assert_int_equal(cge_session_compile_graph(s, 1), CGE_OK);
    int64_t rows[] = {1, 5, 1, 300, 0};
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        cge_tensor in[2], out[1];
        io(in, out, CGE_SHAPE(rows[r], 16));
        memset(zs, 0, sizeof zs);
        assert_int_equal(cge_session_run_graph(s, 1, in, 2, out, 1), CGE_OK);
        cge_shape want = CGE_SHAPE(rows[r], 16);
        assert_true(cge_shape_equal(&out[0].shape, &want));
        check_z(rows[r] * 16);
    }
    cge_tensor in[2], out[1];
    io(in, out, CGE_SHAPE(2, 15));
    for (int i = 0; i < 8; i++)
        zs[i] = -7.0f;
    expect(cge_session_run_graph(s, 1, in, 2, out, 1), CGE_ERR_SHAPE, "the graph declares [?,16]");
    cge_session_destroy(s);
}

/* z = Reshape(y, Shape(x)): the target shape is known only when Shape runs. */
static void test_value_dependent_shape(void **state)
{
    (void)state;
    cge_builder *b = cge_builder_create("reshape_like");
    cge_t x = cge_es_input(b, "x", CGE_F32, CGE_SHAPE(CGE_DIM_DYNAMIC, 3));
    cge_t y = cge_es_input(b, "y", CGE_F32, CGE_SHAPE(CGE_DIM_DYNAMIC));
    cge_t shp = cge_es_shape(b, x, 0, 0);
    cge_t z = cge_es_reshape(b, y, shp, 0);
    cge_es_output(b, z, "z");
    cge_graph *g = NULL;
    if (cge_builder_finish(b, &g) != CGE_OK)
        fail_msg("%s", cge_last_error());
    cge_builder_destroy(b);
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 3, g), CGE_OK);
    cge_graph_destroy(g);
    float xv[6] = {0}, yv[6] = {1, 2, 3, 4, 5, 6}, zv[6] = {0};
    cge_tensor in[2] = {
        {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(2, 3), .data = xv, .bytes = sizeof xv},
        {.name = "y", .dtype = CGE_F32, .shape = CGE_SHAPE(6), .data = yv, .bytes = sizeof yv},
    };
    cge_tensor out[1] = {{.name = "z", .data = zv, .bytes = sizeof zv}};
    assert_int_equal(cge_session_run_graph(s, 3, in, 2, out, 1), CGE_OK);
    cge_shape want = CGE_SHAPE(2, 3);
    assert_true(cge_shape_equal(&out[0].shape, &want));
    for (int i = 0; i < 6; i++)
        assert_true(zv[i] == yv[i]);
    /* A mismatch found only at run time is a [meta] error naming the node. */
    in[1].shape = CGE_SHAPE(5);
    in[1].bytes = 5 * sizeof(float);
    cge_status st = cge_session_run_graph(s, 3, in, 2, out, 1);
    assert_int_not_equal(st, CGE_OK);
    assert_non_null(strstr(cge_last_error(), "[meta] Reshape"));
    cge_session_destroy(s);
}

static void test_async_on_streams(void **state)
{
    (void)state;
    fill();
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    cge_graph *g = x_plus_2y_manual(CGE_SHAPE(8, 2048));
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    cge_stream *s1 = NULL, *s2 = NULL;
    assert_int_equal(cge_stream_create(cge_session_device(s), &s1), CGE_OK);
    assert_int_equal(cge_stream_create(cge_session_device(s), &s2), CGE_OK);
    static float z1[N], z2[N], y2[N];
    for (int i = 0; i < N; i++)
        y2[i] = ys[i] * 3.0f;
    cge_tensor in1[2], out1[1], in2[2], out2[1];
    io(in1, out1, CGE_SHAPE(8, 2048));
    io(in2, out2, CGE_SHAPE(8, 2048));
    out1[0].data = z1;
    out2[0].data = z2;
    in2[1].data = y2;
    for (int rep = 0; rep < 20; rep++) {
        assert_int_equal(cge_session_run_graph_async(s, 1, in1, 2, out1, 1, s1), CGE_OK);
        assert_int_equal(cge_session_run_graph_async(s, 1, in2, 2, out2, 1, s2), CGE_OK);
    }
    assert_int_equal(cge_stream_synchronize(s1), CGE_OK);
    assert_int_equal(cge_stream_synchronize(s2), CGE_OK);
    for (int i = 0; i < N; i++) {
        assert_true(z1[i] == xs[i] + 2.0f * ys[i]);
        assert_true(z2[i] == xs[i] + 2.0f * y2[i]);
    }
    assert_int_equal(cge_session_run_graph_async(s, 1, in1, 2, out1, 1, NULL), CGE_ERR_INVALID_ARG);
    cge_stream_destroy(s1);
    cge_stream_destroy(s2);
    cge_session_destroy(s);
}

static void test_compile_errors(void **state)
{
    (void)state;
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    cge_graph *g = NULL;
    cge_shape a = CGE_SHAPE(2, 3), b = CGE_SHAPE(4, 5);
    const char *ins[] = {"a", "b"}, *outs[] = {"c"};
    assert_int_equal(cge_graph_create("mm", &g), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "a", CGE_F32, &a), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "b", CGE_F32, &b), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "MatMul", "", "proj", ins, 2, outs, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "c"), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_status st = cge_session_compile_graph(s, 1);
    assert_int_not_equal(st, CGE_OK);
    assert_non_null(strstr(cge_last_error(), "[meta] MatMul 'proj'"));
    cge_graph_destroy(g);

    const char *dangling[] = {"a", "nowhere"};
    assert_int_equal(cge_graph_create("dangling", &g), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "a", CGE_F32, &a), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Add", "", "add_d", dangling, 2, outs, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "c"), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 2, g), CGE_OK);
    assert_int_not_equal(cge_session_compile_graph(s, 2), CGE_OK);
    assert_non_null(strstr(cge_last_error(), "[graph]"));
    assert_non_null(strstr(cge_last_error(), "nowhere"));
    cge_graph_destroy(g);
    assert_int_equal(cge_session_compile_graph(s, 99), CGE_ERR_NOT_FOUND);
    assert_int_equal(cge_session_add_graph(NULL, 1, NULL), CGE_ERR_INVALID_ARG);
    cge_session_destroy(s);
}

/* A small network with constants: y = Softmax(Relu(x @ W + b)). */
static void test_small_network(void **state)
{
    (void)state;
    float w[3 * 2] = {1, -1, 0.5f, 2, -1, 0}, bias[2] = {0.1f, -0.2f};
    cge_builder *bl = cge_builder_create("mlp");
    cge_t x = cge_es_input(bl, "x", CGE_F32, CGE_SHAPE(2, 3));
    cge_t W = cge_es_constant(bl, "W", CGE_F32, CGE_SHAPE(3, 2), w);
    cge_t B = cge_es_constant(bl, "b", CGE_F32, CGE_SHAPE(2), bias);
    cge_t h = cge_es_relu(bl, cge_es_add(bl, cge_es_mat_mul(bl, x, W), B));
    cge_es_output(bl, cge_es_softmax(bl, h, -1), "y");
    cge_graph *g = NULL;
    assert_int_equal(cge_builder_finish(bl, &g), CGE_OK);
    cge_builder_destroy(bl);
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(&(cge_session_options){.num_threads = 1}, &s), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    float xv[6] = {1, 2, 3, -1, 0, 1}, yv[4];
    cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(2, 3), .data = xv, .bytes = sizeof xv};
    cge_tensor out = {.name = "y", .data = yv, .bytes = sizeof yv};
    assert_int_equal(cge_session_run_graph(s, 1, &in, 1, &out, 1), CGE_OK);
    /* Worked by hand: x@W+b = [[-0.9,2.8],[-1.9,0.8]]; relu; softmax per row. */
    double e0 = 1.0 / (1.0 + exp(2.8)), e1 = 1.0 / (1.0 + exp(0.8));
    double want[4] = {e0, 1 - e0, e1, 1 - e1};
    for (int i = 0; i < 4; i++)
        assert_true(fabs(yv[i] - want[i]) < 1e-6);
    cge_session_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_x_plus_2y_both_builders),
        cmocka_unit_test(test_input_checks),
        cmocka_unit_test(test_dynamic_shapes),
        cmocka_unit_test(test_value_dependent_shape),
        cmocka_unit_test(test_async_on_streams),
        cmocka_unit_test(test_compile_errors),
        cmocka_unit_test(test_small_network),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
