/* The example custom operator library (examples/custom_op, AddCustom in
 * domain "custom") through the C front ends: loading (and a library built for
 * another API version refused), the functional builder's generic op call, a
 * session in every run mode including a captured replay, and the [meta] and
 * [kernel] checks of its [8,2048] limit. ONNX, Python and PyTorch front ends
 * are tested in python/tests/test_custom_op.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"

#define N (8 * 2048)

static void assert_error(cge_status st, const char *layer, const char *needle)
{
    if (st == CGE_OK)
        fail_msg("expected an error %s containing '%s', got CGE_OK", layer, needle);
    const char *m = cge_last_error();
    if (strncmp(m, layer, strlen(layer)) || !strstr(m, needle))
        fail_msg("expected %s ... '%s', got '%s'", layer, needle, m);
}

static int setup(void **state)
{
    (void)state;
    if (!cge_op_find("custom", "AddCustom", 0) && cge_load_op_library(ADD_CUSTOM_PATH) != CGE_OK) {
        fprintf(stderr, "%s\n", cge_last_error());
        return -1;
    }
    return 0;
}

static void test_load(void **state)
{
    (void)state;
    const cge_op_def *d = cge_op_find("custom", "AddCustom", 0);
    assert_non_null(d);
    assert_string_equal(cge_op_origin(d), "add_custom");
    assert_int_equal(d->num_inputs, 2);
    assert_string_equal(d->inputs[0].name, "x");
    assert_string_equal(d->outputs[0].name, "z");
    /* The ONNX converter comes with it. */
    const cge_converter_def *c = cge_converter_find("onnx", "custom", "AddCustom", 1);
    assert_non_null(c);
    assert_string_equal(c->target_op, "AddCustom");
    /* Twice: refused, naming both registrations. */
    assert_error(cge_load_op_library(ADD_CUSTOM_PATH), "[schema]",
                 "already registered by library 'add_custom'");
}

static void test_wrong_api_version(void **state)
{
    (void)state;
    int32_t before = cge_op_count();
    assert_error(cge_load_op_library(ADD_CUSTOM_BADVERSION_PATH), "[schema]",
                 "built for operator API version 99");
    assert_non_null(strstr(cge_last_error(), "rebuild it"));
    assert_int_equal(cge_op_count(), before);
}

static cge_graph *add_graph(cge_shape s, cge_status *st_out)
{
    cge_builder *b = cge_builder_create("add_custom");
    cge_t in[2] = {cge_es_input(b, "x", CGE_F32, s), cge_es_input(b, "y", CGE_F32, s)};
    cge_builder_set_next_name(b, "add0");
    cge_t z = cge_es_op1(b, "AddCustom", "custom", in, 2, NULL, 0);
    /* z + z through a builtin, so the custom op sits inside a larger plan. */
    cge_es_output(b, cge_es_add(b, z, z), "z2");
    cge_graph *g = NULL;
    *st_out = cge_builder_finish(b, &g);
    cge_builder_destroy(b);
    return g;
}

static void fill(float *x, float *y)
{
    for (int i = 0; i < N; i++) {
        x[i] = (float)(i % 97) * 0.5f;
        y[i] = (float)(i % 13) - 6.0f;
    }
}

static void check(const float *x, const float *y, const float *z2)
{
    for (int i = 0; i < N; i++)
        if (z2[i] != 2.0f * (x[i] + y[i]))
            fail_msg("element %d: %g, expected %g", i, z2[i], 2.0f * (x[i] + y[i]));
}

static void run(cge_session *s, cge_run_mode mode, const float *x, const float *y, float *z2)
{
    cge_tensor in[2] = {
        {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(8, 2048), .data = (void *)x, .bytes = N * 4},
        {.name = "y", .dtype = CGE_F32, .shape = CGE_SHAPE(8, 2048), .data = (void *)y, .bytes = N * 4},
    };
    cge_tensor out = {.name = "z2", .data = z2, .bytes = N * 4};
    cge_run_options o = {.mode = mode};
    if (cge_session_run(s, 1, in, 2, &out, 1, &o) != CGE_OK)
        fail_msg("%s run: %s", cge_run_mode_name(mode), cge_last_error());
    cge_run_mode used;
    assert_int_equal(cge_session_last_run_mode(s, 1, &used), CGE_OK);
    assert_int_equal(used, mode);
}

static void test_builder_and_run_modes(void **state)
{
    (void)state;
    cge_status st;
    cge_graph *g = add_graph(CGE_SHAPE(8, 2048), &st);
    if (st)
        fail_msg("%s", cge_last_error());
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    assert_int_equal(cge_session_compile_graph(s, 1), CGE_OK);
    float *x = malloc(N * 4), *y = malloc(N * 4), *z = malloc(N * 4);
    assert_non_null(x);
    assert_non_null(y);
    assert_non_null(z);
    fill(x, y);
    const cge_run_mode modes[] = {CGE_RUN_EAGER, CGE_RUN_PLAN, CGE_RUN_REPLAY};
    for (int m = 0; m < 3; m++) {
        memset(z, 0, N * 4);
        run(s, modes[m], x, y, z);
        check(x, y, z);
    }
    /* Replay again with new values in the same captured buffers. */
    for (int i = 0; i < N; i++)
        x[i] = -x[i] + 1.0f;
    memset(z, 0, N * 4);
    run(s, CGE_RUN_REPLAY, x, y, z);
    check(x, y, z);
    cge_session_destroy(s);
    free(x);
    free(y);
    free(z);
}

static void test_meta_refuses_other_shapes(void **state)
{
    (void)state;
    cge_status st;
    cge_graph *g = add_graph(CGE_SHAPE(4, 2048), &st);
    assert_null(g);
    assert_error(st, "[meta]", "AddCustom 'add0': input 0 is [4,2048]; this kernel supports only "
                               "[8,2048]");
    /* A dynamic dimension is refused too: the kernel has exactly one shape. */
    g = add_graph(CGE_SHAPE(CGE_DIM_DYNAMIC, 2048), &st);
    assert_null(g);
    assert_error(st, "[meta]", "supports only [8,2048]");
    /* float64: the schema's dtype set refuses it before the op's meta. */
    cge_builder *b = cge_builder_create("f64");
    cge_t in[2] = {cge_es_input(b, "x", CGE_F64, CGE_SHAPE(8, 2048)),
                   cge_es_input(b, "y", CGE_F64, CGE_SHAPE(8, 2048))};
    assert_false(cge_t_valid(cge_es_op1(b, "AddCustom", "custom", in, 2, NULL, 0)));
    assert_int_equal(cge_builder_finish(b, &g), CGE_ERR_DTYPE);
    assert_non_null(strstr(cge_builder_error_message(b), "[meta]"));
    assert_non_null(strstr(cge_builder_error_message(b), "float64"));
    cge_builder_destroy(b);
    /* Wrong arity is a schema error. */
    b = cge_builder_create("arity");
    cge_t one = cge_es_input(b, "x", CGE_F32, CGE_SHAPE(8, 2048));
    assert_false(cge_t_valid(cge_es_op1(b, "AddCustom", "custom", &one, 1, NULL, 0)));
    assert_non_null(strstr(cge_builder_error_message(b), "[schema]"));
    cge_builder_destroy(b);
}

/* The kernel checks the same constraint at launch, for callers that skip meta. */
static void test_kernel_checks_at_launch(void **state)
{
    (void)state;
    const cge_op_def *d = cge_op_find("custom", "AddCustom", 0);
    const cge_kernel_def *k = cge_op_find_kernel(d, "cpu", CGE_F32);
    assert_non_null(k);
    cge_device *dev = NULL;
    cge_stream *stream = NULL;
    assert_int_equal(cge_device_create_cpu(NULL, &dev), CGE_OK);
    assert_int_equal(cge_stream_create(dev, &stream), CGE_OK);
    static float a[4 * 2048], bb[4 * 2048], c[4 * 2048];
    cge_tensor in[2] = {{.dtype = CGE_F32, .shape = CGE_SHAPE(4, 2048), .data = a, .bytes = sizeof a},
                        {.dtype = CGE_F32, .shape = CGE_SHAPE(4, 2048), .data = bb, .bytes = sizeof bb}};
    cge_tensor out = {.dtype = CGE_F32, .shape = CGE_SHAPE(4, 2048), .data = c, .bytes = sizeof c};
    cge_kernel_ctx ctx = {.op_type = "AddCustom", .node_name = "raw", .num_inputs = 2, .inputs = in,
                          .num_outputs = 1, .outputs = &out, .device = dev, .num_threads = 2};
    assert_error(k->launch(&ctx, stream), "[kernel]", "AddCustom 'raw': input 0 must be float32 [8,2048]");
    assert_int_equal(cge_stream_synchronize(stream), CGE_OK);
    cge_stream_destroy(stream);
    cge_device_destroy(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_wrong_api_version),
        cmocka_unit_test(test_builder_and_run_modes),
        cmocka_unit_test(test_meta_refuses_other_shapes),
        cmocka_unit_test(test_kernel_checks_at_launch),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
