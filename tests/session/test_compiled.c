/* Sessions running compiled plans: every optimisation level and stream count
 * gives the eager (unoptimised, node by node) results in plan and replay
 * modes, synchronously and on a user stream; the options are honoured. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"

#define ROWS 16
#define COLS 64

static float w[COLS * COLS], bias[COLS];

/* Two branches from x (a MatMul + bias + Relu, and an elementwise chain)
 * joined by an Add, with an Identity and a *1 for the exact passes. */
static cge_graph *branches(void)
{
    for (int i = 0; i < COLS * COLS; i++)
        w[i] = (float)((i * 7) % 23) * 0.01f - 0.11f;
    for (int i = 0; i < COLS; i++)
        bias[i] = (float)i * 0.02f - 0.5f;
    cge_builder *b = cge_builder_create("branches");
    cge_t x = cge_es_input(b, "x", CGE_F32, CGE_SHAPE(ROWS, COLS));
    cge_t wt = cge_es_constant(b, "w", CGE_F32, CGE_SHAPE(COLS, COLS), w);
    cge_t bt = cge_es_constant(b, "bias", CGE_F32, CGE_SHAPE(COLS), bias);
    cge_t one = cge_es_scalar_f32(b, 1.0f);
    cge_t h = cge_es_relu(b, cge_es_add(b, cge_es_mat_mul(b, x, wt), bt));
    cge_t e = cge_es_tanh(b, cge_es_mul(b, cge_es_exp(b, cge_es_neg(b, x)), one));
    cge_t y = cge_es_add(b, cge_es_identity(b, h), e);
    cge_es_output(b, y, "y");
    cge_graph *g = NULL;
    assert_int_equal(cge_builder_finish(b, &g), CGE_OK);
    cge_builder_destroy(b);
    return g;
}

static void run(cge_session *s, cge_run_mode mode, cge_stream *stream, const float *xs, float *ys)
{
    cge_tensor in = {"x", CGE_F32, CGE_SHAPE(ROWS, COLS), (void *)xs, sizeof(float) * ROWS * COLS};
    cge_tensor out = {"y", CGE_F32, CGE_SHAPE(ROWS, COLS), ys, sizeof(float) * ROWS * COLS};
    cge_run_options ro = {.mode = mode, .stream = stream};
    cge_status st = cge_session_run(s, 1, &in, 1, &out, 1, &ro);
    if (st)
        fail_msg("run (%s): %s", cge_run_mode_name(mode), cge_last_error());
    if (stream)
        assert_int_equal(cge_stream_synchronize(stream), CGE_OK);
}

static void assert_close(const float *a, const float *b)
{
    for (int i = 0; i < ROWS * COLS; i++)
        if (fabsf(a[i] - b[i]) > 1e-5f * (1.0f + fabsf(a[i])))
            fail_msg("element %d: %.9g vs %.9g", i, (double)a[i], (double)b[i]);
}

static void test_levels_streams_modes(void **state)
{
    cge_graph *g = branches();
    static float xs[ROWS * COLS], ref[ROWS * COLS], got[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++)
        xs[i] = (float)((i * 13) % 29) * 0.1f - 1.4f;
    for (int lvl = CGE_OPT_NONE; lvl <= CGE_OPT_LAYOUT; lvl++) {
        for (int streams = 1; streams <= 2; streams++) {
            cge_session_options so = {.opt_level = (cge_opt_level)lvl, .num_streams = streams};
            cge_session *s = NULL;
            assert_int_equal(cge_session_create(&so, &s), CGE_OK);
            assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
            assert_int_equal(cge_session_compile_graph(s, 1), CGE_OK);
            run(s, CGE_RUN_EAGER, NULL, xs, ref);
            for (int rep = 0; rep < 3; rep++) {
                memset(got, 0, sizeof got);
                run(s, CGE_RUN_PLAN, NULL, xs, got);
                assert_close(ref, got);
                memset(got, 0, sizeof got);
                run(s, CGE_RUN_REPLAY, NULL, xs, got);
                assert_close(ref, got);
            }
            cge_run_mode last;
            assert_int_equal(cge_session_last_run_mode(s, 1, &last), CGE_OK);
            assert_int_equal(last, CGE_RUN_REPLAY);
            /* Asynchronous runs on a user stream, replayed. */
            cge_stream *us = NULL;
            assert_int_equal(cge_stream_create(cge_session_device(s), &us), CGE_OK);
            for (int rep = 0; rep < 3; rep++) {
                memset(got, 0, sizeof got);
                run(s, CGE_RUN_REPLAY, us, xs, got);
                assert_close(ref, got);
                memset(got, 0, sizeof got);
                run(s, CGE_RUN_PLAN, us, xs, got);
                assert_close(ref, got);
            }
            cge_stream_destroy(us);
            cge_session_destroy(s);
        }
    }
    cge_graph_destroy(g);
}

static void test_bad_level(void **state)
{
    cge_graph *g = branches();
    cge_session_options so = {.opt_level = (cge_opt_level)42};
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(&so, &s), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    assert_int_equal(cge_session_compile_graph(s, 1), CGE_ERR_INVALID_ARG);
    assert_non_null(strstr(cge_last_error(), "opt_level"));
    cge_session_destroy(s);
    cge_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels_streams_modes),
        cmocka_unit_test(test_bad_level),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
