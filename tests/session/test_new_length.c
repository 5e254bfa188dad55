/* A new input length at the cost of a seen one: a decode loop whose cache
 * grows a row per step rewrites its instance only where sizes changed (the
 * shape program's delta runs, the instance's delta rebinds), with outputs
 * bit-equal to a fresh session's at every length, in every run mode; and a
 * session-owned buffer shared by a cache's past and present grows with it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"

enum { D = 8, STEPS = 40, MAXL = STEPS + 2 };

static void add_node(cge_graph *g, const char *op, const char *name, const char **in, int ni,
                     const char **out, int no, cge_node **n)
{
    assert_int_equal(cge_graph_add_node(g, op, "", name, in, ni, out, no, n), CGE_OK);
}

static void add_i64(cge_graph *g, const char *name, const int64_t *v, int64_t n)
{
    cge_shape s = CGE_SHAPE(n);
    assert_int_equal(cge_graph_add_constant(g, name, CGE_I64, &s, v, sizeof(int64_t) * (size_t)n),
                     CGE_OK);
}

/* past [1, L, 8] ("past" symbolic, or `len` when > 0), x [1, 1, 8]:
 *   k = x Wk, present = Concat(past, k) on axis 1         [1, L+1, 8]
 *   o = Softmax((x Wq) present^T) present                 [1, 1, 8]
 *   last = Slice(present, [n-1], [n], axes [1]) with n = Shape(present)[1]
 *          (host values that change every step), y = last + o
 *   r = Relu(x Wq)                                        (no L in it)
 * Attention-like work over a growing cache, shape computations the shape
 * program evaluates, and steps no new length touches. */
static cge_graph *build(int64_t len)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("newlen", &g), CGE_OK);
    int64_t L = len > 0 ? len : cge_graph_dim_symbol(g, "past");
    cge_shape ps = CGE_SHAPE(1, L, D), xs = CGE_SHAPE(1, 1, D), ws = CGE_SHAPE(D, D);
    static float wq[D * D], wk[D * D];
    for (int i = 0; i < D * D; i++) {
        wq[i] = (float)((i * 7) % 13) * 0.03f - 0.15f;
        wk[i] = (float)((i * 5) % 11) * 0.04f - 0.2f;
    }
    assert_int_equal(cge_graph_add_input(g, "past", CGE_F32, &ps), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "wq", CGE_F32, &ws, wq, sizeof wq), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "wk", CGE_F32, &ws, wk, sizeof wk), CGE_OK);
    static const int64_t one[1] = {1}, perm[3] = {0, 2, 1};
    add_i64(g, "one", one, 1);
    add_i64(g, "axis1", one, 1);
    cge_node *n = NULL;
    const char *mq[] = {"x", "wq"}, *oq[] = {"q"}, *mk[] = {"x", "wk"}, *ok[] = {"k"};
    add_node(g, "MatMul", "proj_q", mq, 2, oq, 1, NULL);
    add_node(g, "MatMul", "proj_k", mk, 2, ok, 1, NULL);
    const char *ci[] = {"past", "k"}, *co[] = {"present"};
    add_node(g, "Concat", "cat", ci, 2, co, 1, &n);
    assert_int_equal(cge_node_set_int(n, "axis", 1), CGE_OK);
    const char *ti[] = {"present"}, *to[] = {"kt"};
    add_node(g, "Transpose", "kt", ti, 1, to, 1, &n);
    assert_int_equal(cge_node_set_ints(n, "perm", perm, 3), CGE_OK);
    const char *si[] = {"q", "kt"}, *so[] = {"scores"};
    add_node(g, "MatMul", "scores", si, 2, so, 1, NULL);
    const char *pi[] = {"scores"}, *po[] = {"probs"};
    add_node(g, "Softmax", "softmax", pi, 1, po, 1, &n);
    assert_int_equal(cge_node_set_int(n, "axis", -1), CGE_OK);
    const char *oi[] = {"probs", "present"}, *oo[] = {"o"};
    add_node(g, "MatMul", "attend", oi, 2, oo, 1, NULL);
    const char *shi[] = {"present"}, *sho[] = {"shape"};
    add_node(g, "Shape", "shape", shi, 1, sho, 1, NULL);
    const char *gi[] = {"shape", "one"}, *go[] = {"n"};
    add_node(g, "Gather", "n", gi, 2, go, 1, NULL);
    const char *bi[] = {"n", "one"}, *bo[] = {"n1"};
    add_node(g, "Sub", "n1", bi, 2, bo, 1, NULL);
    const char *li[] = {"present", "n1", "n", "axis1"}, *lo[] = {"last"};
    add_node(g, "Slice", "last", li, 4, lo, 1, NULL);
    const char *yi[] = {"last", "o"}, *yo[] = {"y"};
    add_node(g, "Add", "y", yi, 2, yo, 1, NULL);
    const char *ri[] = {"q"}, *ro[] = {"r"};
    add_node(g, "Relu", "r", ri, 1, ro, 1, NULL);
    assert_int_equal(cge_graph_add_output(g, "present"), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "r"), CGE_OK);
    return g;
}

typedef struct outs {
    float present[MAXL * D], y[D], r[D];
} outs;

static void run(cge_session *s, int64_t L, const float *past, const float *x, outs *o,
                cge_run_mode mode)
{
    cge_tensor in[2] = {
        {.name = "past", .dtype = CGE_F32, .shape = CGE_SHAPE(1, L, D), .data = (void *)past,
         .bytes = sizeof(float) * (size_t)(L * D)},
        {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(1, 1, D), .data = (void *)x,
         .bytes = sizeof(float) * D}};
    cge_tensor out[3] = {{.name = "present", .data = o->present, .bytes = sizeof o->present},
                         {.name = "y", .data = o->y, .bytes = sizeof o->y},
                         {.name = "r", .data = o->r, .bytes = sizeof o->r}};
    cge_run_options ro = {.mode = mode};
    assert_int_equal(cge_session_run(s, 1, in, 2, out, 3, &ro), CGE_OK);
    assert_int_equal(out[0].shape.dims[1], L + 1);
}

static cge_session_graph_stats stats_of(cge_session *s)
{
    cge_session_graph_stats st;
    assert_int_equal(cge_session_get_graph_stats(s, 1, &st), CGE_OK);
    return st;
}

static void input_of(int64_t t, float *x)
{
    for (int j = 0; j < D; j++)
        x[j] = (float)((t * 3 + j * 5) % 17) * 0.0625f - 0.5f;
}

/* The decode loop, each output against a fresh session compiled for that
 * length alone (its first run); the stats at each step in *per. */
static void decode(cge_run_mode mode, cge_session_graph_stats *per)
{
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    cge_graph *g = build(0);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    assert_int_equal(cge_session_compile_graph(s, 1), CGE_OK);
    static float past[MAXL * D];
    memset(past, 0, sizeof past);
    float x[D];
    for (int64_t t = 0; t < STEPS; t++) {
        input_of(t, x);
        static outs o, w;
        run(s, t, past, x, &o, mode);
        per[t] = stats_of(s);
        cge_session *r = NULL;
        assert_int_equal(cge_session_create(NULL, &r), CGE_OK);
        cge_graph *gs = build(t > 0 ? t : 0);
        assert_int_equal(cge_session_add_graph(r, 1, gs), CGE_OK);
        cge_graph_destroy(gs);
        run(r, t, past, x, &w, CGE_RUN_PLAN);
        cge_session_destroy(r);
        if (memcmp(o.present, w.present, sizeof(float) * (size_t)((t + 1) * D)) ||
            memcmp(o.y, w.y, sizeof o.y) || memcmp(o.r, w.r, sizeof o.r))
            fail_msg("mode %d, past length %lld: outputs differ from a fresh session's", (int)mode,
                     (long long)t);
        memcpy(past, o.present, sizeof(float) * (size_t)((t + 1) * D));
    }
    cge_session_destroy(s);
}

/* Past the first instances every new length takes over the last one in
 * place; almost all of those are delta rebinds that bind a few steps
 * again, run the metas of the steps the length reaches only, and allocate
 * nothing once the arena's blocks have room. */
static void test_decode_loop_rebinds_changed_steps_only(void **state)
{
    (void)state;
    for (int m = 0; m < 3; m++) {
        cge_run_mode mode = m == 0 ? CGE_RUN_DEFAULT : m == 1 ? CGE_RUN_PLAN : CGE_RUN_REPLAY;
        static cge_session_graph_stats per[STEPS];
        decode(mode, per);
        const cge_session_graph_stats *last = &per[STEPS - 1];
        assert_true(last->shape_program);
        if (mode == CGE_RUN_REPLAY) {
            /* Every signature is captured: none is "seen once", so a new
             * one takes over the least recently run instance once the
             * cache is full, whose plan is not the one the shape program
             * wrote last: rewritten whole (the outputs were checked). */
            assert_true(last->respecializations > 0);
            continue;
        }
        assert_true(last->respecializations >= STEPS - 10);
        /* Replans (a block outgrew its room) and the first rewrite of
         * each instance are whole; the rest are deltas. */
        assert_true(last->delta_rebinds >= last->respecializations - last->arena_replans - 2);
        assert_true(last->delta_rebinds >= STEPS / 2);
        /* A delta rebind binds the steps the length reaches: not all. */
        int64_t total = 0, deltas = 0, whole = 0;
        for (int64_t t = STEPS / 2; t < STEPS; t++) {
            int64_t d = per[t].delta_rebinds - per[t - 1].delta_rebinds;
            int64_t steps = per[t].steps_rebound - per[t - 1].steps_rebound;
            if (d == 1) {
                total += steps;
                deltas++;
            } else {
                whole = steps;
            }
        }
        assert_true(deltas > 0);
        /* The plan's steps, as a whole rebind counts them (one came in
         * the loop, or take the largest delta's as a bound). */
        if (whole > 0)
            assert_true(total < deltas * whole);
        /* Metas and allocations per new length: a later length runs fewer
         * metas than the first signature did, and the second half of the
         * loop allocates nothing in the shape program (host values keep
         * their buffers; the plans are rewritten in place). */
        int64_t metas = per[STEPS - 1].shape_metas - per[STEPS - 2].shape_metas;
        assert_true(metas > 0);
        assert_true(metas < per[0].shape_metas);
        assert_int_equal(per[STEPS - 1].shape_allocations, per[STEPS / 2].shape_allocations);
    }
}

/* The switch: with CGE_DELTA_REBIND=0 no rebind is a delta, and the
 * outputs are the same. */
static void test_delta_off_gives_the_same_outputs(void **state)
{
    (void)state;
    setenv("CGE_DELTA_REBIND", "0", 1);
    static cge_session_graph_stats per[STEPS];
    decode(CGE_RUN_DEFAULT, per);
    unsetenv("CGE_DELTA_REBIND");
    assert_int_equal(per[STEPS - 1].delta_rebinds, 0);
    assert_true(per[STEPS - 1].respecializations >= STEPS - 10);
}

/* present = past + 1 may take past's memory (Add writes in place), so a run
 * that binds neither gets one session buffer for both. An instance taken
 * over by a longer past must not keep the shorter past's buffer: the
 * buffer grows with it (ASan saw the overflow before). */
static cge_graph *build_inplace(void)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("inplace", &g), CGE_OK);
    int64_t L = cge_graph_dim_symbol(g, "past");
    cge_shape ps = CGE_SHAPE(1, L, D), cs = CGE_SHAPE(1);
    static const float onef = 1.0f;
    assert_int_equal(cge_graph_add_input(g, "past", CGE_F32, &ps), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "c", CGE_F32, &cs, &onef, sizeof onef), CGE_OK);
    const char *ai[] = {"past", "c"}, *ao[] = {"present"};
    add_node(g, "Add", "add", ai, 2, ao, 1, NULL);
    assert_int_equal(cge_graph_add_output(g, "present"), CGE_OK);
    return g;
}

static void test_shared_buffer_grows_with_the_cache(void **state)
{
    (void)state;
    /* Copies in and out: the session's own buffer serves past and present. */
    setenv("CGE_COPY_IO", "1", 1);
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    unsetenv("CGE_COPY_IO");
    cge_graph *g = build_inplace();
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    static float past[MAXL * D], present[MAXL * D];
    for (int i = 0; i < MAXL * D; i++)
        past[i] = (float)(i % 9) * 0.5f;
    for (int64_t L = 1; L <= STEPS; L++) {
        cge_tensor in = {.name = "past", .dtype = CGE_F32, .shape = CGE_SHAPE(1, L, D),
                         .data = past, .bytes = sizeof(float) * (size_t)(L * D)};
        cge_tensor out = {.name = "present", .data = present, .bytes = sizeof present};
        assert_int_equal(cge_session_run_graph(s, 1, &in, 1, &out, 1), CGE_OK);
        for (int64_t i = 0; i < L * D; i++)
            if (present[i] != past[i] + 1.0f)
                fail_msg("length %lld, element %lld: %g, not %g", (long long)L, (long long)i,
                         (double)present[i], (double)(past[i] + 1.0f));
    }
    assert_true(stats_of(s).respecializations > 0);
    cge_session_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_loop_rebinds_changed_steps_only),
        cmocka_unit_test(test_delta_off_gives_the_same_outputs),
        cmocka_unit_test(test_shared_buffer_grows_with_the_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
