/* I/O binding (cge_run_options.bind_buffers): kernels read the caller's
 * input buffers and write its output buffers themselves, so a bound run
 * copies nothing (seen in a profile: no copy events), in every mode, and a
 * replay stays captured while the same buffers come back. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"

enum { ROWS = 4, COLS = 8 };

/* y = Relu(x W + b) + Tanh(x); with `view`, the output is a Reshape of the
 * last value instead (a view the plan cannot hand to the caller alone). */
static cge_graph *build(bool view)
{
    static float w[COLS * COLS], bias[COLS];
    for (int i = 0; i < COLS * COLS; i++)
        w[i] = (float)((i * 7) % 13) * 0.05f - 0.3f;
    for (int i = 0; i < COLS; i++)
        bias[i] = 0.1f * (float)i - 0.2f;
    cge_builder *b = cge_builder_create("bound");
    cge_t x = cge_es_input(b, "x", CGE_F32, CGE_SHAPE(ROWS, COLS));
    cge_t wt = cge_es_constant(b, "w", CGE_F32, CGE_SHAPE(COLS, COLS), w);
    cge_t bt = cge_es_constant(b, "bias", CGE_F32, CGE_SHAPE(COLS), bias);
    cge_t h = cge_es_relu(b, cge_es_add(b, cge_es_mat_mul(b, x, wt), bt));
    cge_t y = cge_es_add(b, h, cge_es_tanh(b, x));
    if (view) {
        int64_t shape[2] = {COLS, ROWS};
        y = cge_es_reshape(b, y, cge_es_constant(b, "shape", CGE_I64, CGE_SHAPE(2), shape), 0);
    }
    cge_es_output(b, y, "y");
    cge_graph *g = NULL;
    assert_int_equal(cge_builder_finish(b, &g), CGE_OK);
    cge_builder_destroy(b);
    return g;
}

static void count_copies(const cge_profile_event *ev, void *user)
{
    int *copies = user;
    copies[0] += ev->kind == CGE_PROFILE_COPY_IN;
    copies[1] += ev->kind == CGE_PROFILE_COPY_OUT;
}

/* Runs with or without binding; copies[0..1] get the profile's copies in
 * and out when `profile` is set. */
static void run(cge_session *s, cge_run_mode mode, bool bind, bool profile, const float *xs,
                float *ys, int *copies)
{
    cge_tensor in = {"x", CGE_F32, CGE_SHAPE(ROWS, COLS), (void *)xs, sizeof(float) * ROWS * COLS};
    cge_tensor out = {"y", CGE_F32, CGE_SHAPE(ROWS, COLS), ys, sizeof(float) * ROWS * COLS};
    cge_run_options ro = {.mode = mode, .bind_buffers = bind};
    if (profile) {
        copies[0] = copies[1] = 0;
        ro.profile = count_copies;
        ro.profile_user = copies;
    }
    if (cge_session_run(s, 1, &in, 1, &out, 1, &ro))
        fail_msg("run (%s): %s", cge_run_mode_name(mode), cge_last_error());
}

static void reference(const float *xs, float *ys)
{
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    cge_graph *g = build(false);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    run(s, CGE_RUN_EAGER, false, false, xs, ys, NULL);
    cge_session_destroy(s);
}

static void assert_close(const float *a, const float *b)
{
    for (int i = 0; i < ROWS * COLS; i++)
        if (fabsf(a[i] - b[i]) > 1e-5f * (1.0f + fabsf(a[i])))
            fail_msg("element %d: %.9g vs %.9g", i, (double)a[i], (double)b[i]);
}

static void test_bound_runs_copy_nothing(void **state)
{
    (void)state;
    static float xs[ROWS * COLS], ref[ROWS * COLS], got[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++)
        xs[i] = (float)((i * 13) % 29) * 0.1f - 1.4f;
    reference(xs, ref);
    for (int lvl = CGE_OPT_NONE; lvl <= CGE_OPT_LAYOUT; lvl++) {
        cge_session_options so = {.opt_level = (cge_opt_level)lvl};
        cge_session *s = NULL;
        assert_int_equal(cge_session_create(&so, &s), CGE_OK);
        cge_graph *g = build(false);
        assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
        cge_graph_destroy(g);
        int copies[2];
        run(s, CGE_RUN_PLAN, false, true, xs, got, copies);
        assert_int_equal(copies[0], 1);
        assert_int_equal(copies[1], 1);
        memset(got, 0, sizeof got);
        run(s, CGE_RUN_PLAN, true, true, xs, got, copies);
        assert_int_equal(copies[0], 0);
        assert_int_equal(copies[1], 0);
        assert_close(ref, got);
        /* Unbound again: the plan's own buffers, copied. */
        memset(got, 0, sizeof got);
        run(s, CGE_RUN_PLAN, false, true, xs, got, copies);
        assert_int_equal(copies[1], 1);
        assert_close(ref, got);
        for (cge_run_mode m = CGE_RUN_PLAN; m <= CGE_RUN_REPLAY; m++) {
            memset(got, 0, sizeof got);
            run(s, m, true, false, xs, got, NULL);
            assert_close(ref, got);
        }
        cge_session_destroy(s);
    }
}

/* The same buffers keep the recording; new ones are captured again, and the
 * results follow the buffers. */
static void test_replay_follows_bound_buffers(void **state)
{
    (void)state;
    static float xs[2][ROWS * COLS], ref[2][ROWS * COLS], got[2][ROWS * COLS];
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < ROWS * COLS; i++)
            xs[k][i] = (float)((i * (13 + k)) % 29) * 0.1f - 1.4f + (float)k;
        reference(xs[k], ref[k]);
    }
    cge_session_options so = {.run_mode = CGE_RUN_REPLAY};
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(&so, &s), CGE_OK);
    cge_graph *g = build(false);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    for (int r = 0; r < 6; r++) {
        int k = (r / 2) % 2;
        memset(got[k], 0, sizeof got[k]);
        run(s, CGE_RUN_DEFAULT, true, false, xs[k], got[k], NULL);
        assert_close(ref[k], got[k]);
        cge_run_mode m;
        assert_int_equal(cge_session_last_run_mode(s, 1, &m), CGE_OK);
        assert_int_equal(m, CGE_RUN_REPLAY);
    }
    cge_session_destroy(s);
}

/* An output the plan keeps as a view of another value binds with that
 * value's memory: the buffer serves both, and nothing is copied out. */
static void test_view_output_binds_with_its_source(void **state)
{
    (void)state;
    static float xs[ROWS * COLS], ref[ROWS * COLS], got[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++)
        xs[i] = (float)((i * 5) % 17) * 0.1f - 0.8f;
    reference(xs, ref);
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    cge_graph *g = build(true);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    cge_tensor in = {"x", CGE_F32, CGE_SHAPE(ROWS, COLS), xs, sizeof xs};
    cge_tensor out = {"y", CGE_F32, CGE_SHAPE(COLS, ROWS), got, sizeof got};
    int copies[2] = {0, 0};
    cge_run_options ro = {.mode = CGE_RUN_PLAN, .bind_buffers = true, .profile = count_copies,
                          .profile_user = copies};
    assert_int_equal(cge_session_run(s, 1, &in, 1, &out, 1, &ro), CGE_OK);
    assert_int_equal(out.shape.dims[0], COLS);
    assert_close(ref, got);
    assert_int_equal(copies[0], 0);
    assert_int_equal(copies[1], 0);
    cge_session_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bound_runs_copy_nothing),
        cmocka_unit_test(test_replay_follows_bound_buffers),
        cmocka_unit_test(test_view_output_binds_with_its_source),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
