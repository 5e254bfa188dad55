/* I/O binding (cge_run_options.bind_buffers): kernels read the caller's
 * input buffers and write its output buffers themselves, so a bound run
 * copies nothing (seen in a profile: no copy events), in every mode, and a
 * replay stays captured while the same buffers come back; a run that records
 * nothing does the same unbound. */
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
        /* Replay mode (profiled as a plan run): recorded addresses, so an
         * unbound run copies its input in and its output out. */
        run(s, CGE_RUN_REPLAY, false, true, xs, got, copies);
        assert_int_equal(copies[0], 1);
        assert_int_equal(copies[1], 1);
        memset(got, 0, sizeof got);
        run(s, CGE_RUN_REPLAY, true, true, xs, got, copies);
        assert_int_equal(copies[0], 0);
        assert_int_equal(copies[1], 0);
        assert_close(ref, got);
        /* Unbound again: the plan's own buffers, copied. */
        memset(got, 0, sizeof got);
        run(s, CGE_RUN_REPLAY, false, true, xs, got, copies);
        assert_int_equal(copies[1], 1);
        assert_close(ref, got);
        /* Plan mode records nothing: unbound runs use the caller's buffers
         * as bound ones do. */
        memset(got, 0, sizeof got);
        run(s, CGE_RUN_PLAN, false, true, xs, got, copies);
        assert_int_equal(copies[0], 0);
        assert_int_equal(copies[1], 0);
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

/* y = Relu(x W + b) + Tanh(x) with x [rows, COLS], rows symbolic. */
static cge_graph *build_symbolic(void)
{
    static float w[COLS * COLS], bias[COLS];
    for (int i = 0; i < COLS * COLS; i++)
        w[i] = (float)((i * 7) % 13) * 0.05f - 0.3f;
    for (int i = 0; i < COLS; i++)
        bias[i] = 0.1f * (float)i - 0.2f;
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("rows", &g), CGE_OK);
    cge_shape xs = CGE_SHAPE(cge_graph_dim_symbol(g, "rows"), COLS);
    cge_shape ws = CGE_SHAPE(COLS, COLS), bs = CGE_SHAPE(COLS);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "w", CGE_F32, &ws, w, sizeof w), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "bias", CGE_F32, &bs, bias, sizeof bias), CGE_OK);
    const char *mm[] = {"x", "w"}, *omm[] = {"xw"}, *ad[] = {"xw", "bias"}, *oad[] = {"h0"};
    const char *re[] = {"h0"}, *ore[] = {"h"}, *th[] = {"x"}, *oth[] = {"t"};
    const char *sum[] = {"h", "t"}, *oy[] = {"y"};
    assert_int_equal(cge_graph_add_node(g, "MatMul", "", "mm", mm, 2, omm, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Add", "", "bias_add", ad, 2, oad, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Relu", "", "relu", re, 1, ore, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Tanh", "", "tanh", th, 1, oth, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Add", "", "sum", sum, 2, oy, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    return g;
}

static void reference_rows(const float *xs, int64_t rows, float *ys)
{
    for (int64_t r = 0; r < rows; r += ROWS) {
        float part[ROWS * COLS];
        reference(xs + r * COLS, part);
        memcpy(ys + r * COLS, part, sizeof(float) * (size_t)COLS *
               (size_t)(rows - r < ROWS ? rows - r : ROWS));
    }
}

/* A synchronous run that records nothing (a symbolic graph's new signature
 * in the default mode: a plan run, as a decode step's new length) reads the
 * caller's input and writes the caller's output in place, with no copy; the
 * signature's next run, captured, copies as before. Results equal the
 * reference every time, also when the output buffer is the input's. */
static void test_unrecorded_runs_use_callers_buffers(void **state)
{
    (void)state;
    enum { MAXR = 3 * ROWS };
    static float xs[MAXR * COLS], ref[MAXR * COLS], got[MAXR * COLS];
    for (int i = 0; i < MAXR * COLS; i++)
        xs[i] = (float)((i * 11) % 31) * 0.1f - 1.5f;
    reference_rows(xs, MAXR, ref);
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    cge_graph *g = build_symbolic();
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    const int64_t order[] = {ROWS, 2 * ROWS, ROWS, 3 * ROWS, 2 * ROWS};
    int first_copies = 0, again_copies = 0;
    bool seen[4] = {false};
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        int64_t rows = order[k];
        bool again = seen[rows / ROWS];
        seen[rows / ROWS] = true;
        size_t bytes = sizeof(float) * (size_t)(rows * COLS);
        memset(got, 0, sizeof got);
        cge_tensor in = {"x", CGE_F32, CGE_SHAPE(rows, COLS), xs, bytes};
        cge_tensor out = {"y", CGE_F32, CGE_SHAPE(rows, COLS), got, sizeof got};
        int copies[2] = {0, 0};
        cge_run_options ro = {.profile = count_copies, .profile_user = copies};
        if (cge_session_run(s, 1, &in, 1, &out, 1, &ro))
            fail_msg("rows %d: %s", (int)rows, cge_last_error());
        for (int i = 0; i < rows * COLS; i++)
            if (fabsf(got[i] - ref[i]) > 1e-5f * (1.0f + fabsf(ref[i])))
                fail_msg("rows %d, element %d: %.9g vs %.9g", (int)rows, i, (double)got[i],
                         (double)ref[i]);
        if (again)
            again_copies += copies[0] + copies[1];
        else
            first_copies += copies[0] + copies[1];
    }
    assert_int_equal(first_copies, 0);
    assert_int_equal(again_copies, 4);   /* two captured runs, one copy in and one out each */
    /* The output written over the input, at a new signature: the input is
     * copied in first (it overlaps the output), and the result is right. */
    static float io[MAXR * COLS];
    memcpy(io, xs, sizeof io);
    cge_tensor in = {"x", CGE_F32, CGE_SHAPE(MAXR - 1, COLS), io, sizeof(float) * (MAXR - 1) * COLS};
    cge_tensor out = {"y", CGE_F32, CGE_SHAPE(MAXR - 1, COLS), io, sizeof io};
    assert_int_equal(cge_session_run_graph(s, 1, &in, 1, &out, 1), CGE_OK);
    reference_rows(xs, MAXR - 1, ref);
    for (int i = 0; i < (MAXR - 1) * COLS; i++)
        if (fabsf(io[i] - ref[i]) > 1e-5f * (1.0f + fabsf(ref[i])))
            fail_msg("aliased, element %d: %.9g vs %.9g", i, (double)io[i], (double)ref[i]);
    cge_session_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bound_runs_copy_nothing),
        cmocka_unit_test(test_replay_follows_bound_buffers),
        cmocka_unit_test(test_view_output_binds_with_its_source),
        cmocka_unit_test(test_unrecorded_runs_use_callers_buffers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
