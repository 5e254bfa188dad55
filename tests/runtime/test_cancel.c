/* Cancel tokens: work enqueued in a thread's scope stops when the token is
 * requested from another thread or passes its deadline (the next synchronize
 * gives a [runtime] CGE_ERR_CANCELLED or CGE_ERR_TIMEOUT once); event records
 * and host callbacks still happen, so other streams are not left waiting;
 * replays stop under their submitter's token; work outside the scope and
 * after a reset runs. */
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "rt_test.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

typedef struct slow_args {
    atomic_long *ran;
} slow_args;

/* 1 ms per block. */
static void slow_block(int64_t b, int64_t nb, void *p)
{
    (void)b;
    (void)nb;
    slow_args *a = p;
    usleep(1000);
    atomic_fetch_add(a->ran, 1);
}

static void count_host(void *user)
{
    atomic_fetch_add((atomic_long *)user, 1);
}

typedef struct later {
    cge_cancel *c;
    int ms;
} later;

static void *request_later(void *p)
{
    later *l = p;
    usleep((useconds_t)l->ms * 1000);
    cge_cancel_request(l->c);
    return NULL;
}

static void test_token(void **state)
{
    (void)state;
    cge_cancel *c = NULL;
    assert_int_equal(cge_cancel_create(&c), CGE_OK);
    assert_false(cge_cancel_requested(c));
    cge_cancel_request(c);
    assert_true(cge_cancel_requested(c));
    cge_cancel_reset(c);
    assert_false(cge_cancel_requested(c));
    cge_cancel_set_timeout(c, 0);
    assert_true(cge_cancel_requested(c));
    cge_cancel_set_timeout(c, 1e9);
    assert_false(cge_cancel_requested(c));
    cge_cancel_set_timeout(c, -1);
    assert_false(cge_cancel_requested(c));
    assert_null(cge_cancel_scope(c));
    assert_ptr_equal(cge_cancel_scope(NULL), c);
    assert_int_equal(cge_cancel_check(), CGE_OK);   /* outside any task: no token */
    assert_false(cge_cancel_requested(NULL));
    cge_cancel_request(NULL);
    cge_cancel_destroy(c);
    cge_cancel_destroy(NULL);
    assert_int_equal(cge_cancel_create(NULL), CGE_ERR_INVALID_ARG);
}

static void run_request_from_another_thread(int threads)
{
    cge_device *dev = rt_make_device(threads);
    cge_stream *s = rt_make_stream(dev);
    cge_cancel *c = NULL;
    assert_int_equal(cge_cancel_create(&c), CGE_OK);
    atomic_long ran = 0, hosts = 0;
    slow_args a = {&ran};
    /* 4 s of work at 2 threads: 2000 one-block launches, then one of 2000 blocks */
    double t0 = now_ms();
    cge_cancel *prev = cge_cancel_scope(c);
    for (int i = 0; i < 2000; i++)
        assert_int_equal(cge_launch(s, slow_block, 1, &a, sizeof a), CGE_OK);
    assert_int_equal(cge_launch(s, slow_block, 2000, &a, sizeof a), CGE_OK);
    assert_int_equal(cge_launch_host_func(s, count_host, &hosts), CGE_OK);
    assert_ptr_equal(cge_cancel_scope(prev), c);
    pthread_t th;
    later l = {c, 50};
    pthread_create(&th, NULL, request_later, &l);
    assert_rt_error_msg(cge_stream_synchronize(s), CGE_ERR_CANCELLED, "run cancelled");
    pthread_join(th, NULL);
    double ms = now_ms() - t0;
    if (ms > 1500)
        fail_msg("the cancelled work took %.0f ms to stop", ms);
    assert_true(atomic_load(&ran) < 4000);
    assert_int_equal(atomic_load(&hosts), 1);   /* callbacks still run */
    assert_int_equal(cge_stream_synchronize(s), CGE_OK); /* reported once */
    /* Work outside the scope, and the token reset, run again. */
    long before = atomic_load(&ran);
    assert_int_equal(cge_launch(s, slow_block, 4, &a, sizeof a), CGE_OK);
    assert_int_equal(cge_stream_synchronize(s), CGE_OK);
    cge_cancel_reset(c);
    prev = cge_cancel_scope(c);
    assert_int_equal(cge_launch(s, slow_block, 4, &a, sizeof a), CGE_OK);
    cge_cancel_scope(prev);
    assert_int_equal(cge_stream_synchronize(s), CGE_OK);
    assert_int_equal(atomic_load(&ran), before + 8);
    cge_stream_destroy(s);
    cge_cancel_destroy(c);
    cge_device_destroy(dev);
}

static void test_request_from_another_thread(void **state)
{
    (void)state;
    run_request_from_another_thread(1);
    run_request_from_another_thread(2);
    run_request_from_another_thread(4);
}

static void test_deadline_and_events(void **state)
{
    (void)state;
    cge_device *dev = rt_make_device(2);
    cge_stream *a = rt_make_stream(dev), *b = rt_make_stream(dev);
    cge_event *e = rt_make_event(dev);
    cge_cancel *c = NULL;
    assert_int_equal(cge_cancel_create(&c), CGE_OK);
    cge_cancel_set_timeout(c, 40);
    atomic_long ran = 0;
    slow_args sa = {&ran};
    static char buf[64];
    double t0 = now_ms();
    cge_cancel *prev = cge_cancel_scope(c);
    assert_int_equal(cge_launch(a, slow_block, 5000, &sa, sizeof sa), CGE_OK);
    assert_int_equal(cge_event_record(e, a), CGE_OK);
    assert_int_equal(cge_stream_wait_event(b, e), CGE_OK);
    assert_int_equal(cge_memset_async(b, buf, 1, sizeof buf), CGE_OK);
    cge_cancel_scope(prev);
    /* b waits for a's event, which is still recorded: no deadlock */
    assert_rt_error_msg(cge_stream_synchronize(b), CGE_ERR_TIMEOUT, "deadline of 40 ms exceeded");
    assert_rt_error_msg(cge_stream_synchronize(a), CGE_ERR_TIMEOUT, "skipped");
    assert_true(now_ms() - t0 < 2000);
    assert_int_equal(buf[0], 0);   /* the copy after the deadline was skipped */
    bool done = false;
    assert_int_equal(cge_event_query(e, &done), CGE_OK);
    assert_true(done);
    cge_event_destroy(e);
    cge_stream_destroy(a);
    cge_stream_destroy(b);
    cge_cancel_destroy(c);
    cge_device_destroy(dev);
}

static void test_replay_stops(void **state)
{
    (void)state;
    cge_device *dev = rt_make_device(2);
    cge_stream *s = rt_make_stream(dev);
    atomic_long ran = 0;
    slow_args sa = {&ran};
    assert_int_equal(cge_stream_begin_capture(s, CGE_CAPTURE_GLOBAL), CGE_OK);
    for (int i = 0; i < 500; i++)
        assert_int_equal(cge_launch(s, slow_block, 1, &sa, sizeof sa), CGE_OK);
    cge_ri *ri = NULL;
    assert_int_equal(cge_stream_end_capture(s, &ri), CGE_OK);
    cge_cancel *c = NULL;
    assert_int_equal(cge_cancel_create(&c), CGE_OK);
    /* inline replay (cge_ri_execute) and a queued one, both under the token */
    for (int k = 0; k < 2; k++) {
        atomic_store(&ran, 0);
        cge_cancel_reset(c);
        cge_cancel_set_timeout(c, 30);
        cge_cancel *prev = cge_cancel_scope(c);
        if (k == 0) {
            assert_rt_error_msg(cge_ri_execute(ri, -1), CGE_ERR_TIMEOUT, "deadline");
        } else {
            assert_int_equal(cge_ri_execute_async(ri, s), CGE_OK);
            assert_rt_error_msg(cge_stream_synchronize(s), CGE_ERR_TIMEOUT, "deadline");
        }
        cge_cancel_scope(prev);
        assert_true(atomic_load(&ran) < 500);
    }
    atomic_store(&ran, 0);
    assert_int_equal(cge_ri_execute(ri, -1), CGE_OK);   /* outside the scope: all of it */
    assert_int_equal(atomic_load(&ran), 500);
    cge_ri_destroy(ri);
    cge_cancel_destroy(c);
    cge_stream_destroy(s);
    cge_device_destroy(dev);
}

/* The token binds through the scope of the thread that enqueues; a host
 * callback runs with it bound, so cge_cancel_check there sees it. */
static void check_in_callback(void *user)
{
    *(cge_status *)user = cge_cancel_check();
}

static void test_check_inside_a_task(void **state)
{
    (void)state;
    cge_device *dev = rt_make_device(2);
    cge_stream *s = rt_make_stream(dev);
    cge_cancel *c = NULL;
    assert_int_equal(cge_cancel_create(&c), CGE_OK);
    cge_status seen = CGE_OK;
    cge_cancel_request(c);
    cge_cancel *prev = cge_cancel_scope(c);
    assert_int_equal(cge_launch_host_func(s, check_in_callback, &seen), CGE_OK);
    cge_cancel_scope(prev);
    assert_int_equal(cge_stream_synchronize(s), CGE_OK);   /* callbacks are not skipped */
    assert_int_equal(seen, CGE_ERR_CANCELLED);
    seen = CGE_ERR_INTERNAL;
    assert_int_equal(cge_launch_host_func(s, check_in_callback, &seen), CGE_OK);
    assert_int_equal(cge_stream_synchronize(s), CGE_OK);
    assert_int_equal(seen, CGE_OK);
    cge_cancel_destroy(c);
    cge_stream_destroy(s);
    cge_device_destroy(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token),
        cmocka_unit_test(test_request_from_another_thread),
        cmocka_unit_test(test_deadline_and_events),
        cmocka_unit_test(test_replay_stops),
        cmocka_unit_test(test_check_inside_a_task),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
