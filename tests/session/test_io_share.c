/* One caller buffer bound as a graph input and a graph output (a key/value
 * cache written in place by ScatterElements): shared where the output's step
 * is the input's last reader, so nothing is copied; copied in first where the
 * input is read later, so results never change; and the hazard guard sees a
 * bound buffer that a replay in flight reads. */
#include <math.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"

enum { HEADS = 2, SLOTS = 8, DIM = 4, NUMEL = HEADS * SLOTS * DIM, NUPD = HEADS * DIM };

/* present = ScatterElements(past, idx, upd, axis 2); with `later`, also
 * sum = past + present, which reads past after present is written. */
static cge_graph *build(bool later)
{
    cge_builder *b = cge_builder_create("cache");
    cge_t in[3] = {cge_es_input(b, "past", CGE_F32, CGE_SHAPE(1, HEADS, SLOTS, DIM)),
                   cge_es_input(b, "idx", CGE_I64, CGE_SHAPE(1, HEADS, 1, DIM)),
                   cge_es_input(b, "upd", CGE_F32, CGE_SHAPE(1, HEADS, 1, DIM))};
    cge_attr axis = CGE_ATTR_I("axis", 2);
    cge_t present = cge_es_op1(b, "ScatterElements", "", in, 3, &axis, 1);
    cge_es_output(b, present, "present");
    if (later)
        cge_es_output(b, cge_es_add(b, in[0], present), "sum");
    cge_graph *g = NULL;
    assert_int_equal(cge_builder_finish(b, &g), CGE_OK);
    cge_builder_destroy(b);
    return g;
}

static cge_session *make(bool later, cge_session_options *so)
{
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(so, &s), CGE_OK);
    cge_graph *g = build(later);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    return s;
}

static void count_copies(const cge_profile_event *ev, void *user)
{
    int *copies = user;
    copies[0] += ev->kind == CGE_PROFILE_COPY_IN;
    copies[1] += ev->kind == CGE_PROFILE_COPY_OUT;
}

typedef struct step {
    float upd[NUPD];
    int64_t idx[NUPD];
} step;

static void make_step(step *st, int slot)
{
    for (int i = 0; i < NUPD; i++) {
        st->idx[i] = slot;
        st->upd[i] = 10.0f * (float)(slot + 1) + (float)i;
    }
}

/* One run: past from `past`, present into `present` (sum into `sum` when
 * not NULL); copies[0..1] get the profile's copies in and out when given. */
static void run(cge_session *s, cge_run_mode mode, bool bind, const step *st, float *past,
                float *present, float *sum, int *copies, cge_stream *stream)
{
    cge_tensor in[3] = {{"past", CGE_F32, CGE_SHAPE(1, HEADS, SLOTS, DIM), past, NUMEL * 4},
                        {"idx", CGE_I64, CGE_SHAPE(1, HEADS, 1, DIM), (void *)st->idx, NUPD * 8},
                        {"upd", CGE_F32, CGE_SHAPE(1, HEADS, 1, DIM), (void *)st->upd, NUPD * 4}};
    cge_tensor out[2] = {{"present", CGE_F32, CGE_SHAPE(1, HEADS, SLOTS, DIM), present, NUMEL * 4},
                         {"sum", CGE_F32, CGE_SHAPE(1, HEADS, SLOTS, DIM), sum, NUMEL * 4}};
    cge_run_options ro = {.mode = mode, .bind_buffers = bind, .stream = stream};
    if (copies) {
        copies[0] = copies[1] = 0;
        ro.profile = count_copies;
        ro.profile_user = copies;
    }
    if (cge_session_run(s, 1, in, 3, out, sum ? 2 : 1, &ro))
        fail_msg("run (%s): %s", cge_run_mode_name(mode), cge_last_error());
}

static void init_cache(float *c)
{
    for (int i = 0; i < NUMEL; i++)
        c[i] = (float)((i * 7) % 11) * 0.5f - 2.0f;
}

/* Past and present in one buffer: the run copies nothing (in or out) and
 * the buffer ends up as an unbound run's present, in every mode, step after
 * step (a decoder's cache); and the unbound runs are right. */
static void test_shared_cache_buffer(void **state)
{
    (void)state;
    for (cge_run_mode mode = CGE_RUN_PLAN; mode <= CGE_RUN_REPLAY; mode++) {
        cge_session *s = make(false, NULL);
        static float cache[NUMEL], ref[NUMEL], next[NUMEL];
        init_cache(cache);
        init_cache(ref);
        for (int slot = 0; slot < SLOTS; slot++) {
            step st;
            make_step(&st, slot);
            run(s, CGE_RUN_PLAN, false, &st, ref, next, NULL, NULL, NULL);
            memcpy(ref, next, sizeof ref);
            if (slot == 0) {
                int copies[2];
                run(s, CGE_RUN_PLAN, true, &st, cache, cache, NULL, copies, NULL);
                assert_int_equal(copies[0], 0);
                assert_int_equal(copies[1], 0);
            } else {
                run(s, mode, true, &st, cache, cache, NULL, NULL, NULL);
            }
            assert_memory_equal(cache, ref, sizeof ref);
        }
        /* The unbound runs (past and present in a buffer of the session's,
         * shared) wrote every slot: the cache holds the updates. */
        for (int h = 0; h < HEADS; h++)
            for (int slot = 0; slot < SLOTS; slot++)
                for (int d = 0; d < DIM; d++)
                    assert_true(ref[(h * SLOTS + slot) * DIM + d] ==
                                10.0f * (float)(slot + 1) + (float)(h * DIM + d));
        cge_session_destroy(s);
    }
}

/* Past read again after present is written (sum = past + present): one
 * buffer for both must not change what the run reads as past, so past is
 * copied in (the profile shows one copy) and the results equal separate
 * buffers', in every mode. */
static void test_shared_buffer_read_later_is_copied(void **state)
{
    (void)state;
    for (cge_run_mode mode = CGE_RUN_PLAN; mode <= CGE_RUN_REPLAY; mode++) {
        cge_session *s = make(true, NULL);
        static float past[NUMEL], present[NUMEL], sum[NUMEL], cache[NUMEL], got_sum[NUMEL];
        step st;
        make_step(&st, 3);
        init_cache(past);
        run(s, CGE_RUN_PLAN, false, &st, past, present, sum, NULL, NULL);
        for (int r = 0; r < 3; r++) {
            init_cache(cache);
            int copies[2];
            if (r == 0)
                run(s, CGE_RUN_PLAN, true, &st, cache, cache, got_sum, copies, NULL);
            else
                run(s, mode, true, &st, cache, cache, got_sum, NULL, NULL);
            if (r == 0) {
                assert_int_equal(copies[0], 1);
                assert_int_equal(copies[1], 0);
            }
            assert_memory_equal(cache, present, sizeof present);
            assert_memory_equal(got_sum, sum, sizeof sum);
        }
        cge_session_destroy(s);
    }
}

/* The rule is the planner's in-place rule, not ScatterElements': past's
 * last reader is the elementwise Add, so past and sum may share one buffer
 * (nothing is copied in) while present has its own; the results are those
 * of separate buffers. */
static void test_input_shared_with_its_last_readers_output(void **state)
{
    (void)state;
    cge_session *s = make(true, NULL);
    static float past[NUMEL], present[NUMEL], sum[NUMEL], cache[NUMEL], got[NUMEL];
    step st;
    make_step(&st, 6);
    init_cache(past);
    run(s, CGE_RUN_PLAN, false, &st, past, present, sum, NULL, NULL);
    for (cge_run_mode mode = CGE_RUN_PLAN; mode <= CGE_RUN_REPLAY; mode++) {
        init_cache(cache);
        int copies[2];
        run(s, CGE_RUN_PLAN, true, &st, cache, got, cache, copies, NULL);
        assert_int_equal(copies[0], 0);
        assert_memory_equal(got, present, sizeof present);
        assert_memory_equal(cache, sum, sizeof sum);
        init_cache(cache);
        run(s, mode, true, &st, cache, got, cache, NULL, NULL);
        assert_memory_equal(got, present, sizeof present);
        assert_memory_equal(cache, sum, sizeof sum);
    }
    cge_session_destroy(s);
}

static void gate_wait(void *user)
{
    atomic_int *open = user;
    while (!atomic_load(open))
        sched_yield();
}

/* The hazard guard still catches a caller overwriting a bound input during
 * a replay (the kernels read it through their arguments, which the
 * recording cannot see), and lets the write through once the replay is
 * done. */
static void test_hazard_guard_sees_bound_buffers(void **state)
{
    (void)state;
    cge_session *s = make(false, NULL);
    cge_device *dev = cge_session_device(s);
    assert_int_equal(cge_device_set_hazard_check(dev, true), CGE_OK);
    static float cache[NUMEL], ref[NUMEL], next[NUMEL];
    step st, other;
    make_step(&st, 2);
    make_step(&other, 5);
    init_cache(cache);
    init_cache(ref);
    run(s, CGE_RUN_PLAN, false, &st, ref, next, NULL, NULL, NULL);
    run(s, CGE_RUN_PLAN, false, &other, next, ref, NULL, NULL, NULL);
    cge_stream *stream = NULL;
    assert_int_equal(cge_stream_create(dev, &stream), CGE_OK);
    run(s, CGE_RUN_REPLAY, true, &st, cache, cache, NULL, NULL, stream);   /* captured */
    assert_int_equal(cge_stream_synchronize(stream), CGE_OK);
    atomic_int open = 0;
    assert_int_equal(cge_launch_host_func(stream, gate_wait, &open), CGE_OK);
    run(s, CGE_RUN_REPLAY, true, &other, cache, cache, NULL, NULL, stream);
    cge_run_mode m;
    assert_int_equal(cge_session_last_run_mode(s, 1, &m), CGE_OK);
    assert_int_equal(m, CGE_RUN_REPLAY);
    /* The replay waits behind the gate: the cache (read and written), the
     * indices and the updates (read) are all refused. */
    assert_int_not_equal(cge_mem_host_write(dev, cache + 3, 8), CGE_OK);
    assert_non_null(strstr(cge_last_error(), "hazard"));
    assert_int_not_equal(cge_mem_host_write(dev, other.upd, 4), CGE_OK);
    assert_int_not_equal(cge_mem_host_write(dev, other.idx, 8), CGE_OK);
    static float elsewhere[4];
    assert_int_equal(cge_mem_host_write(dev, elsewhere, sizeof elsewhere), CGE_OK);
    atomic_store(&open, 1);
    assert_int_equal(cge_stream_synchronize(stream), CGE_OK);
    assert_int_equal(cge_mem_host_write(dev, cache, sizeof cache), CGE_OK);
    assert_memory_equal(cache, ref, sizeof ref);
    cge_stream_destroy(stream);
    cge_session_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared_cache_buffer),
        cmocka_unit_test(test_shared_buffer_read_later_is_copied),
        cmocka_unit_test(test_input_shared_with_its_last_readers_output),
        cmocka_unit_test(test_hazard_guard_sees_bound_buffers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
