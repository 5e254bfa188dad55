/* Run modes: eager, plan and replay give identical results; DEFAULT resolves
 * to replay for static graphs and to eager for value-dependent shapes; the
 * capture limit falls back to plan; replays see new input values; the
 * CGE_RUN_MODE environment variable; asynchronous replays on a user stream;
 * kernel failures in every mode. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"

/* y = Softmax(Transpose(Relu(x @ W + b)) * 0.5) ++ ReduceSum(x) — a mix of
 * families, with constants and several intermediate shapes. */
static cge_graph *mixed_graph(int64_t rows)
{
    static float w[4 * 3], bias[3];
    for (int i = 0; i < 12; i++)
        w[i] = (float)((i * 7) % 5) * 0.3f - 0.6f;
    for (int i = 0; i < 3; i++)
        bias[i] = 0.1f * (float)i;
    cge_builder *b = cge_builder_create("mixed");
    cge_t x = cge_es_input(b, "x", CGE_F32, CGE_SHAPE(rows, 4));
    cge_t h = cge_es_relu(b, cge_es_add(b, cge_es_mat_mul(b, x, cge_es_constant(b, "W", CGE_F32, CGE_SHAPE(4, 3), w)),
                                        cge_es_constant(b, "b", CGE_F32, CGE_SHAPE(3), bias)));
    int64_t perm[2] = {1, 0};
    cge_t t = cge_es_mul(b, cge_es_transpose(b, h, perm, 2), cge_es_scalar_f32(b, 0.5f));
    cge_es_output(b, cge_es_softmax(b, t, -1), "y");
    int64_t axes[1] = {1};
    cge_es_output(b, cge_es_reduce_sum(b, x, cge_es_vector_i64(b, axes, 1), 1, 0), "s");
    cge_graph *g = NULL;
    if (cge_builder_finish(b, &g) != CGE_OK)
        fail_msg("%s", cge_last_error());
    cge_builder_destroy(b);
    return g;
}

static void run_mode(cge_session *s, uint32_t id, cge_run_mode mode, const float *x, int64_t rows,
                     float *y, float *sum, cge_run_mode expect_used)
{
    cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(rows, 4), .data = (void *)x,
                     .bytes = (size_t)rows * 4 * sizeof(float)};
    cge_tensor out[2] = {{.name = "y", .data = y, .bytes = (size_t)rows * 3 * sizeof(float)},
                         {.name = "s", .data = sum, .bytes = (size_t)rows * sizeof(float)}};
    cge_run_options o = {.mode = mode};
    if (cge_session_run(s, id, &in, 1, out, 2, &o) != CGE_OK)
        fail_msg("run in %s mode: %s", cge_run_mode_name(mode), cge_last_error());
    cge_run_mode used;
    assert_int_equal(cge_session_last_run_mode(s, id, &used), CGE_OK);
    if (used != expect_used)
        fail_msg("asked %s, ran %s, expected %s", cge_run_mode_name(mode), cge_run_mode_name(used),
                 cge_run_mode_name(expect_used));
}

static void test_modes_identical(void **state)
{
    (void)state;
    enum { ROWS = 37 };
    float x[ROWS * 4], y[3][ROWS * 3], s3[3][ROWS];
    for (int i = 0; i < ROWS * 4; i++)
        x[i] = sinf((float)i) * 2.0f;
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    cge_graph *g = mixed_graph(ROWS);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    run_mode(s, 1, CGE_RUN_EAGER, x, ROWS, y[0], s3[0], CGE_RUN_EAGER);
    run_mode(s, 1, CGE_RUN_PLAN, x, ROWS, y[1], s3[1], CGE_RUN_PLAN);
    run_mode(s, 1, CGE_RUN_REPLAY, x, ROWS, y[2], s3[2], CGE_RUN_REPLAY);
    assert_memory_equal(y[0], y[1], sizeof y[0]);
    assert_memory_equal(y[0], y[2], sizeof y[0]);
    assert_memory_equal(s3[0], s3[1], sizeof s3[0]);
    assert_memory_equal(s3[0], s3[2], sizeof s3[0]);
    /* Softmax over each row of the transposed [3, ROWS] tensor sums to 1. */
    for (int r = 0; r < 3; r++) {
        double tot = 0;
        for (int c = 0; c < ROWS; c++)
            tot += y[0][r * ROWS + c];
        assert_true(fabs(tot - 1.0) < 1e-5);
    }
    /* DEFAULT on a static graph is a replay. */
    run_mode(s, 1, CGE_RUN_DEFAULT, x, ROWS, y[1], s3[1], CGE_RUN_REPLAY);
    assert_memory_equal(y[0], y[1], sizeof y[0]);
    cge_session_destroy(s);
}

static void test_replay_sees_new_inputs(void **state)
{
    (void)state;
    enum { ROWS = 5 };
    float x[ROWS * 4], y[ROWS * 3], sum[ROWS], y_plan[ROWS * 3], sum_plan[ROWS];
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    cge_graph *g = mixed_graph(ROWS);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 2, g), CGE_OK);
    cge_graph_destroy(g);
    for (int rep = 0; rep < 6; rep++) {
        for (int i = 0; i < ROWS * 4; i++)
            x[i] = (float)(i + rep * 3) * 0.25f - 2.0f;
        run_mode(s, 1, CGE_RUN_REPLAY, x, ROWS, y, sum, CGE_RUN_REPLAY);
        run_mode(s, 2, CGE_RUN_PLAN, x, ROWS, y_plan, sum_plan, CGE_RUN_PLAN);
        assert_memory_equal(y, y_plan, sizeof y);
        for (int r = 0; r < ROWS; r++) {
            float want = 0;
            for (int c = 0; c < 4; c++)
                want += x[r * 4 + c];
            assert_true(fabsf(sum[r] - want) < 1e-5f);
        }
    }
    cge_session_destroy(s);
}

static void test_capture_limit(void **state)
{
    (void)state;
    cge_session *s = NULL;
    cge_session_options o = {.capture_limit = 2};
    assert_int_equal(cge_session_create(&o, &s), CGE_OK);
    cge_graph *g = mixed_graph(CGE_DIM_DYNAMIC);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    float x[8 * 4], y[8 * 3], sum[8], y_ref[8 * 3], sum_ref[8];
    for (int i = 0; i < 32; i++)
        x[i] = (float)i * 0.1f;
    /* REPLAY asked: the default mode would run a signature's first run as a
     * plan (it comes from the shape program) and capture it at its second. */
    run_mode(s, 1, CGE_RUN_DEFAULT, x, 2, y, sum, CGE_RUN_PLAN);
    run_mode(s, 1, CGE_RUN_REPLAY, x, 2, y, sum, CGE_RUN_REPLAY);
    run_mode(s, 1, CGE_RUN_REPLAY, x, 3, y, sum, CGE_RUN_REPLAY);
    run_mode(s, 1, CGE_RUN_DEFAULT, x, 2, y, sum, CGE_RUN_REPLAY); /* captured before */
    /* Past the limit: 3, the least recently run, gives up its recording. */
    run_mode(s, 1, CGE_RUN_REPLAY, x, 8, y, sum, CGE_RUN_REPLAY);
    run_mode(s, 1, CGE_RUN_DEFAULT, x, 3, y, sum, CGE_RUN_REPLAY);  /* captured again, 2 gives up */
    run_mode(s, 1, CGE_RUN_DEFAULT, x, 8, y, sum, CGE_RUN_REPLAY);  /* still captured */
    run_mode(s, 1, CGE_RUN_EAGER, x, 8, y_ref, sum_ref, CGE_RUN_EAGER);
    assert_memory_equal(y, y_ref, sizeof y);
    assert_memory_equal(sum, sum_ref, sizeof sum);
    cge_session_destroy(s);
}

static void test_value_dependent_runs_eager(void **state)
{
    (void)state;
    /* z = Reshape(y, s): the target shape is an input's values, known only
     * when a run brings them (a Shape of a static input would be known at
     * compile time, and replay). */
    cge_builder *b = cge_builder_create("reshape_to_values");
    cge_t s_in = cge_es_input(b, "s", CGE_I64, CGE_SHAPE(2));
    cge_t y = cge_es_input(b, "y", CGE_F32, CGE_SHAPE(6));
    cge_es_output(b, cge_es_reshape(b, y, s_in, 0), "z");
    cge_graph *g = NULL;
    assert_int_equal(cge_builder_finish(b, &g), CGE_OK);
    cge_builder_destroy(b);
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    int64_t sv[2] = {2, 3};
    float yv[6] = {1, 2, 3, 4, 5, 6}, zv[6];
    cge_tensor in[2] = {
        {.name = "s", .dtype = CGE_I64, .shape = CGE_SHAPE(2), .data = sv, .bytes = sizeof sv},
        {.name = "y", .dtype = CGE_F32, .shape = CGE_SHAPE(6), .data = yv, .bytes = sizeof yv},
    };
    cge_tensor out = {.name = "z", .data = zv, .bytes = sizeof zv};
    cge_run_options o = {.mode = CGE_RUN_REPLAY};
    assert_int_equal(cge_session_run(s, 1, in, 2, &out, 1, &o), CGE_OK);
    cge_run_mode used;
    assert_int_equal(cge_session_last_run_mode(s, 1, &used), CGE_OK);
    assert_int_equal(used, CGE_RUN_EAGER);
    cge_shape want = CGE_SHAPE(2, 3);
    assert_true(cge_shape_equal(&out.shape, &want));
    assert_memory_equal(zv, yv, sizeof zv);
    /* New values, new shape, same graph. */
    sv[0] = 3;
    sv[1] = 2;
    assert_int_equal(cge_session_run(s, 1, in, 2, &out, 1, &o), CGE_OK);
    cge_shape want2 = CGE_SHAPE(3, 2);
    assert_true(cge_shape_equal(&out.shape, &want2));
    cge_session_destroy(s);
}

static void test_env_mode(void **state)
{
    (void)state;
    setenv("CGE_RUN_MODE", "plan", 1);
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    unsetenv("CGE_RUN_MODE");
    cge_graph *g = mixed_graph(3);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    float x[12] = {0}, y[9], sum[3];
    run_mode(s, 1, CGE_RUN_DEFAULT, x, 3, y, sum, CGE_RUN_PLAN);
    run_mode(s, 1, CGE_RUN_REPLAY, x, 3, y, sum, CGE_RUN_REPLAY); /* a run may still choose */
    cge_session_destroy(s);
    assert_int_equal(cge_run_mode_from_name("replay"), CGE_RUN_REPLAY);
    assert_int_equal(cge_run_mode_from_name("fast"), -1);
    cge_run_options bad = {.mode = (cge_run_mode)9};
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    assert_int_equal(cge_session_run(s, 1, NULL, 0, NULL, 0, &bad), CGE_ERR_INVALID_ARG);
    assert_non_null(strstr(cge_last_error(), "[session] run: invalid run mode 9"));
    cge_session_destroy(s);
}

static void test_async_replay(void **state)
{
    (void)state;
    enum { ROWS = 64, RUNS = 10 };
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    cge_graph *g = mixed_graph(ROWS);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    cge_stream *st = NULL;
    assert_int_equal(cge_stream_create(cge_session_device(s), &st), CGE_OK);
    static float x[RUNS][ROWS * 4], y[RUNS][ROWS * 3], sum[RUNS][ROWS];
    static float y_ref[ROWS * 3], sum_ref[ROWS];
    for (int r = 0; r < RUNS; r++)
        for (int i = 0; i < ROWS * 4; i++)
            x[r][i] = (float)((i * (r + 1)) % 17) * 0.2f;
    for (int r = 0; r < RUNS; r++) {
        cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(ROWS, 4), .data = x[r],
                         .bytes = sizeof x[r]};
        cge_tensor out[2] = {{.name = "y", .data = y[r], .bytes = sizeof y[r]},
                             {.name = "s", .data = sum[r], .bytes = sizeof sum[r]}};
        cge_run_options o = {.mode = CGE_RUN_REPLAY, .stream = st};
        assert_int_equal(cge_session_run(s, 1, &in, 1, out, 2, &o), CGE_OK);
    }
    assert_int_equal(cge_stream_synchronize(st), CGE_OK);
    for (int r = 0; r < RUNS; r++) {
        run_mode(s, 1, CGE_RUN_PLAN, x[r], ROWS, y_ref, sum_ref, CGE_RUN_PLAN);
        assert_memory_equal(y[r], y_ref, sizeof y_ref);
        assert_memory_equal(sum[r], sum_ref, sizeof sum_ref);
    }
    cge_stream_destroy(st);
    cge_session_destroy(s);
}

/* A kernel that fails on the data (a Gather index out of range) fails the
 * run in every mode, synchronous plan runs on the calling thread included,
 * and the next run with good data succeeds. */
static void test_kernel_failure_each_mode(void **state)
{
    (void)state;
    static const float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    cge_builder *b = cge_builder_create("gather");
    cge_t idx = cge_es_input(b, "idx", CGE_I64, CGE_SHAPE(2));
    cge_t d = cge_es_constant(b, "data", CGE_F32, CGE_SHAPE(4, 2), data);
    cge_es_output(b, cge_es_relu(b, cge_es_gather(b, d, idx, 0)), "y");
    cge_graph *g = NULL;
    assert_int_equal(cge_builder_finish(b, &g), CGE_OK);
    cge_builder_destroy(b);
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    cge_stream *st = NULL;
    assert_int_equal(cge_stream_create(cge_session_device(s), &st), CGE_OK);
    const cge_run_mode modes[3] = {CGE_RUN_PLAN, CGE_RUN_REPLAY, CGE_RUN_EAGER};
    for (int m = 0; m < 3; m++)
        for (int async = 0; async < 2; async++) {
            int64_t bad[2] = {1, 7}, good[2] = {3, 0};
            float y[4] = {0};
            cge_tensor out = {.name = "y", .data = y, .bytes = sizeof y};
            cge_run_options o = {.mode = modes[m], .stream = async ? st : NULL};
            cge_tensor in = {.name = "idx", .dtype = CGE_I64, .shape = CGE_SHAPE(2), .data = bad,
                             .bytes = sizeof bad};
            cge_status rc = cge_session_run(s, 1, &in, 1, &out, 1, &o);
            if (async && rc == CGE_OK)
                rc = cge_stream_synchronize(st);
            if (rc == CGE_OK)
                fail_msg("%s%s run with index 7 succeeded", cge_run_mode_name(modes[m]),
                         async ? " (async)" : "");
            assert_non_null(strstr(cge_last_error(), "index 7"));
            in.data = good;
            assert_int_equal(cge_session_run(s, 1, &in, 1, &out, 1, &o), CGE_OK);
            if (async)
                assert_int_equal(cge_stream_synchronize(st), CGE_OK);
            const float want[4] = {7, 8, 1, 2};
            assert_memory_equal(y, want, sizeof want);
        }
    cge_stream_destroy(st);
    cge_session_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_modes_identical),
        cmocka_unit_test(test_replay_sees_new_inputs),
        cmocka_unit_test(test_capture_limit),
        cmocka_unit_test(test_value_dependent_runs_eager),
        cmocka_unit_test(test_env_mode),
        cmocka_unit_test(test_async_replay),
        cmocka_unit_test(test_kernel_failure_each_mode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
