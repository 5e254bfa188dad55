/* Events: record/query/synchronize/elapsed time, cross-stream ordering shown
 * through data dependencies (never timing), waits that must not hold a
 * worker, destroy with a pending point, and the argument errors. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "rt_test.h"

typedef struct fill_args {
    int32_t *buf;
    int64_t n;
    int32_t base;
} fill_args;

/* buf[i] = base + i, one slice of 256 per block, a little slow on purpose. */
static void fill_kernel(int64_t block, int64_t nblocks, void *args)
{
    fill_args *a = args;
    int64_t lo = block * 256, hi = lo + 256 < a->n ? lo + 256 : a->n;
    for (int64_t i = lo; i < hi; i++) {
        volatile int32_t v = a->base;
        for (int k = 0; k < 20; k++)
            v = v + 0;
        a->buf[i] = v + (int32_t)i;
    }
}

typedef struct copy_args {
    const int32_t *in;
    int32_t *out;
    int64_t n;
} copy_args;

static void copy_plus_one_kernel(int64_t block, int64_t nblocks, void *args)
{
    copy_args *a = args;
    int64_t lo = block * 256, hi = lo + 256 < a->n ? lo + 256 : a->n;
    for (int64_t i = lo; i < hi; i++)
        a->out[i] = a->in[i] + 1;
}

/* Stream B reads what stream A writes, ordered only by an event. A gate on A
 * makes B's task provably wait: B cannot finish while A is held. */
static void cross_stream(int threads)
{
    cge_device *dev = rt_make_device(threads);
    cge_stream *a = rt_make_stream(dev), *b = rt_make_stream(dev);
    cge_event *e = rt_make_event(dev);
    enum { N = 256 * 40 };
    int32_t *x = calloc(N, sizeof *x), *y = calloc(N, sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    rt_gate gate;
    gate_init(&gate);

    assert_int_equal(cge_launch_host_func(a, gate_fn, &gate), CGE_OK);
    fill_args fa = {x, N, 1000};
    assert_int_equal(cge_launch(a, fill_kernel, N / 256, &fa, sizeof fa), CGE_OK);
    assert_int_equal(cge_event_record(e, a), CGE_OK);
    assert_int_equal(cge_stream_wait_event(b, e), CGE_OK);
    copy_args ca = {x, y, N};
    assert_int_equal(cge_launch(b, copy_plus_one_kernel, N / 256, &ca, sizeof ca), CGE_OK);
    /* With a second worker, more work on A after the record (held by a
     * second gate) must not hold B back: B waits for the point, not A's tail.
     * If it did, the synchronize on B below would never return. */
    bool spare_worker = cge_device_num_threads(dev) >= 2;
    rt_gate gate2;
    gate_init(&gate2);
    if (spare_worker)
        assert_int_equal(cge_launch_host_func(a, gate_fn, &gate2), CGE_OK);

    gate_wait_entered(&gate);
    bool idle = true, done = true;
    assert_int_equal(cge_stream_query(b, &idle), CGE_OK);
    assert_false(idle); /* held back by the event, A is held by the gate */
    assert_int_equal(cge_event_query(e, &done), CGE_OK);
    assert_false(done);
    gate_open(&gate);
    assert_int_equal(cge_stream_synchronize(b), CGE_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(y[i], 1000 + i + 1);
    assert_int_equal(cge_event_query(e, &done), CGE_OK);
    assert_true(done);
    gate_open(&gate2);

    cge_event_destroy(e);
    cge_stream_destroy(a);
    cge_stream_destroy(b);
    gate_fini(&gate);
    gate_fini(&gate2);
    free(x);
    free(y);
    cge_device_destroy(dev);
}

static void test_cross_stream_wait(void **state) { cross_stream(0); }

/* With one worker the waiting stream must not occupy it, or A never runs. */
static void test_cross_stream_wait_one_thread(void **state) { cross_stream(1); }

/* B's wait is submitted before A has even been given its work. */
static void test_wait_submitted_before_work_one_thread(void **state)
{
    cge_device *dev = rt_make_device(1);
    cge_stream *a = rt_make_stream(dev), *b = rt_make_stream(dev);
    cge_event *e = rt_make_event(dev);
    enum { N = 256 * 8 };
    int32_t *x = calloc(N, sizeof *x), *y = calloc(N, sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    rt_gate gate;
    gate_init(&gate);
    /* A is held, its record queued; then B waits and queues its read. */
    assert_int_equal(cge_launch_host_func(a, gate_fn, &gate), CGE_OK);
    fill_args fa = {x, N, 7};
    assert_int_equal(cge_launch(a, fill_kernel, N / 256, &fa, sizeof fa), CGE_OK);
    assert_int_equal(cge_event_record(e, a), CGE_OK);
    assert_int_equal(cge_stream_wait_event(b, e), CGE_OK);
    copy_args ca = {x, y, N};
    assert_int_equal(cge_launch(b, copy_plus_one_kernel, N / 256, &ca, sizeof ca), CGE_OK);
    assert_int_equal(cge_launch(b, copy_plus_one_kernel, 1, &ca, sizeof ca), CGE_OK);
    gate_open(&gate);
    assert_int_equal(cge_device_synchronize(dev), CGE_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(y[i], 7 + i + 1);
    cge_event_destroy(e);
    cge_stream_destroy(a);
    cge_stream_destroy(b);
    gate_fini(&gate);
    free(x);
    free(y);
    cge_device_destroy(dev);
}

/* A chain over 8 streams: each adds one to the previous stream's output
 * after waiting on its event. */
typedef struct chain_args {
    const int32_t *in;
    int32_t *out;
} chain_args;

static void chain_kernel(int64_t block, int64_t n, void *args)
{
    chain_args *a = args;
    a->out[block] = (a->in ? a->in[block] : 0) + 1;
}

static void test_event_chain(void **state)
{
    cge_device *dev = rt_make_device(0);
    enum { S = 8, NB = 64 };
    cge_stream *s[S];
    cge_event *e[S];
    int32_t buf[S][NB];
    memset(buf, 0, sizeof buf);
    for (int k = 0; k < S; k++) {
        s[k] = rt_make_stream(dev);
        e[k] = rt_make_event(dev);
    }
    /* The gate holds stream 0, so every wait is queued before its point. */
    rt_gate gate;
    gate_init(&gate);
    assert_int_equal(cge_launch_host_func(s[0], gate_fn, &gate), CGE_OK);
    for (int k = 0; k < S; k++) {
        if (k > 0)
            assert_int_equal(cge_stream_wait_event(s[k], e[k - 1]), CGE_OK);
        chain_args a = {k ? buf[k - 1] : NULL, buf[k]};
        assert_int_equal(cge_launch(s[k], chain_kernel, NB, &a, sizeof a), CGE_OK);
        assert_int_equal(cge_event_record(e[k], s[k]), CGE_OK);
    }
    gate_open(&gate);
    assert_int_equal(cge_event_synchronize(e[S - 1]), CGE_OK);
    for (int k = 0; k < S; k++)
        for (int b = 0; b < NB; b++)
            assert_int_equal(buf[k][b], k + 1);
    for (int k = 0; k < S; k++) {
        cge_event_destroy(e[k]);
        cge_stream_destroy(s[k]);
    }
    gate_fini(&gate);
    cge_device_destroy(dev);
}

static void spin_kernel(int64_t block, int64_t n, void *args)
{
    volatile int64_t acc = 0;
    for (int i = 0; i < 10000; i++)
        acc = acc + i;
}

static void test_query_synchronize_elapsed(void **state)
{
    cge_device *dev = rt_make_device(0);
    cge_stream *s = rt_make_stream(dev);
    cge_event *start = rt_make_event(dev), *end = rt_make_event(dev);
    bool done = false;
    float ms = -1.0f;

    /* Never recorded: complete by definition, but has no time. */
    assert_int_equal(cge_event_query(start, &done), CGE_OK);
    assert_true(done);
    assert_int_equal(cge_event_synchronize(start), CGE_OK);
    assert_rt_error_msg(cge_event_elapsed_ms(start, end, &ms), CGE_ERR_STATE, "never recorded");

    assert_int_equal(cge_event_record(start, s), CGE_OK);
    assert_int_equal(cge_launch(s, spin_kernel, 16, NULL, 0), CGE_OK);
    assert_int_equal(cge_event_record(end, s), CGE_OK);
    assert_int_equal(cge_event_synchronize(end), CGE_OK);
    assert_int_equal(cge_event_query(end, &done), CGE_OK);
    assert_true(done);
    assert_int_equal(cge_event_query(start, &done), CGE_OK);
    assert_true(done);
    assert_int_equal(cge_event_elapsed_ms(start, end, &ms), CGE_OK);
    assert_true(ms >= 0.0f);
    float back = 1.0f;
    assert_int_equal(cge_event_elapsed_ms(end, start, &back), CGE_OK);
    assert_true(back <= 0.0f);
    assert_true(back == -ms);

    /* A pending end: elapsed time is an error until it completes. */
    rt_gate gate;
    gate_init(&gate);
    assert_int_equal(cge_launch_host_func(s, gate_fn, &gate), CGE_OK);
    assert_int_equal(cge_event_record(end, s), CGE_OK);
    gate_wait_entered(&gate);
    assert_int_equal(cge_event_query(end, &done), CGE_OK);
    assert_false(done);
    assert_rt_error_msg(cge_event_elapsed_ms(start, end, &ms), CGE_ERR_STATE, "not completed");
    gate_open(&gate);
    assert_int_equal(cge_event_synchronize(end), CGE_OK);
    assert_int_equal(cge_event_elapsed_ms(start, end, &ms), CGE_OK);
    assert_true(ms >= 0.0f);

    cge_event_destroy(start);
    cge_event_destroy(end);
    cge_stream_destroy(s);
    gate_fini(&gate);
    cge_device_destroy(dev);
}

static void count_host(void *user) { atomic_fetch_add((atomic_int *)user, 1); }

static void test_wait_never_recorded_is_noop(void **state)
{
    cge_device *dev = rt_make_device(1);
    cge_stream *s = rt_make_stream(dev);
    cge_event *e = rt_make_event(dev);
    atomic_int count = 0;
    assert_int_equal(cge_stream_wait_event(s, e), CGE_OK);
    assert_int_equal(cge_launch_host_func(s, count_host, &count), CGE_OK);
    assert_int_equal(cge_stream_synchronize(s), CGE_OK);
    assert_int_equal(atomic_load(&count), 1);
    /* Waiting on an event recorded earlier on the same stream is fine too. */
    assert_int_equal(cge_event_record(e, s), CGE_OK);
    assert_int_equal(cge_stream_wait_event(s, e), CGE_OK);
    assert_int_equal(cge_launch_host_func(s, count_host, &count), CGE_OK);
    assert_int_equal(cge_stream_synchronize(s), CGE_OK);
    assert_int_equal(atomic_load(&count), 2);
    cge_event_destroy(e);
    cge_stream_destroy(s);
    cge_device_destroy(dev);
}

/* Re-recording replaces the point: the event follows the newest record. */
static void test_rerecord_replaces_point(void **state)
{
    cge_device *dev = rt_make_device(0);
    cge_stream *a = rt_make_stream(dev), *b = rt_make_stream(dev);
    cge_event *e = rt_make_event(dev);
    rt_gate gate;
    gate_init(&gate);
    assert_int_equal(cge_event_record(e, b), CGE_OK);
    assert_int_equal(cge_event_synchronize(e), CGE_OK);
    bool done = false;
    /* Now record it behind a gate: no longer complete. */
    assert_int_equal(cge_launch_host_func(a, gate_fn, &gate), CGE_OK);
    assert_int_equal(cge_event_record(e, a), CGE_OK);
    gate_wait_entered(&gate);
    assert_int_equal(cge_event_query(e, &done), CGE_OK);
    assert_false(done);
    gate_open(&gate);
    assert_int_equal(cge_event_synchronize(e), CGE_OK);
    assert_int_equal(cge_event_query(e, &done), CGE_OK);
    assert_true(done);
    assert_int_equal(cge_stream_synchronize(a), CGE_OK);
    cge_event_destroy(e);
    cge_stream_destroy(a);
    cge_stream_destroy(b);
    gate_fini(&gate);
    cge_device_destroy(dev);
}

static void slow_count_host(void *user)
{
    volatile int spin = 0;
    for (int i = 0; i < 2000; i++)
        spin += i;
    atomic_fetch_add((atomic_int *)user, 1);
}

/* Destroying an event waits for its recorded point; queued waits on it in
 * other streams still work after the handle is gone. */
static void test_destroy_event_with_pending_point(void **state)
{
    cge_device *dev = rt_make_device(0);
    cge_stream *a = rt_make_stream(dev), *b = rt_make_stream(dev);
    cge_event *e = rt_make_event(dev);
    atomic_int count_a = 0, count_b = 0;
    for (int i = 0; i < 300; i++)
        assert_int_equal(cge_launch_host_func(a, slow_count_host, &count_a), CGE_OK);
    assert_int_equal(cge_event_record(e, a), CGE_OK);
    assert_int_equal(cge_stream_wait_event(b, e), CGE_OK);
    assert_int_equal(cge_launch_host_func(b, count_host, &count_b), CGE_OK);
    cge_event_destroy(e);
    /* Everything before the record ran. */
    assert_int_equal(atomic_load(&count_a), 300);
    assert_int_equal(cge_stream_synchronize(b), CGE_OK);
    assert_int_equal(atomic_load(&count_b), 1);
    cge_stream_destroy(a);
    cge_stream_destroy(b);
    cge_device_destroy(dev);
}

/* Queued tasks that name an event keep it alive after its handle is gone:
 * an older record held on a slower stream, and a wait not yet reached (ASan
 * would see a use after free otherwise). */
static void test_queued_tasks_outlive_event_handle(void **state)
{
    cge_device *dev = rt_make_device(0);
    cge_stream *a = rt_make_stream(dev), *b = rt_make_stream(dev), *c = rt_make_stream(dev);
    cge_event *e = rt_make_event(dev);
    rt_gate gate_a, gate_b, gate_c;
    gate_init(&gate_a);
    gate_init(&gate_b);
    gate_init(&gate_c);
    atomic_int count = 0;

    /* b: held, then waits on e's first point (behind gate a on stream a). */
    assert_int_equal(cge_launch_host_func(a, gate_fn, &gate_a), CGE_OK);
    assert_int_equal(cge_event_record(e, a), CGE_OK);
    assert_int_equal(cge_launch_host_func(b, gate_fn, &gate_b), CGE_OK);
    assert_int_equal(cge_stream_wait_event(b, e), CGE_OK);
    assert_int_equal(cge_launch_host_func(b, count_host, &count), CGE_OK);
    /* c: an older record of e held by gate c, then a newer one on a. */
    assert_int_equal(cge_launch_host_func(c, gate_fn, &gate_c), CGE_OK);
    assert_int_equal(cge_event_record(e, c), CGE_OK);
    assert_int_equal(cge_event_record(e, a), CGE_OK);

    gate_open(&gate_a);
    cge_event_destroy(e); /* waits for the newest point, on a */
    gate_open(&gate_b);   /* b's wait now reads the event */
    gate_open(&gate_c);   /* c's older record completes after the handle went */
    assert_int_equal(cge_device_synchronize(dev), CGE_OK);
    assert_int_equal(atomic_load(&count), 1);

    cge_stream_destroy(a);
    cge_stream_destroy(b);
    cge_stream_destroy(c);
    gate_fini(&gate_a);
    gate_fini(&gate_b);
    gate_fini(&gate_c);
    cge_device_destroy(dev);
}

static void test_event_errors(void **state)
{
    cge_device *dev = rt_make_device(1), *other = rt_make_device(1);
    cge_stream *s = rt_make_stream(dev), *s2 = rt_make_stream(other);
    cge_event *e = rt_make_event(dev), *e2 = rt_make_event(other);
    bool done;
    float ms;
    cge_event *out = (cge_event *)1;
    assert_rt_error_msg(cge_event_create(NULL, &out), CGE_ERR_INVALID_ARG, "device is NULL");
    assert_null(out);
    assert_rt_error(cge_event_create(dev, NULL), CGE_ERR_INVALID_ARG);
    assert_rt_error_msg(cge_event_record(NULL, s), CGE_ERR_INVALID_ARG, "event is NULL");
    assert_rt_error_msg(cge_event_record(e, NULL), CGE_ERR_INVALID_ARG, "stream is NULL");
    assert_rt_error_msg(cge_event_record(e, s2), CGE_ERR_INVALID_ARG, "different devices");
    assert_rt_error(cge_stream_wait_event(NULL, e), CGE_ERR_INVALID_ARG);
    assert_rt_error(cge_stream_wait_event(s, NULL), CGE_ERR_INVALID_ARG);
    assert_rt_error_msg(cge_stream_wait_event(s, e2), CGE_ERR_INVALID_ARG, "different devices");
    assert_rt_error(cge_event_query(NULL, &done), CGE_ERR_INVALID_ARG);
    assert_rt_error_msg(cge_event_query(e, NULL), CGE_ERR_INVALID_ARG, "done is NULL");
    assert_rt_error(cge_event_synchronize(NULL), CGE_ERR_INVALID_ARG);
    assert_rt_error(cge_event_elapsed_ms(NULL, e, &ms), CGE_ERR_INVALID_ARG);
    assert_rt_error(cge_event_elapsed_ms(e, NULL, &ms), CGE_ERR_INVALID_ARG);
    assert_rt_error(cge_event_elapsed_ms(e, e, NULL), CGE_ERR_INVALID_ARG);
    assert_rt_error_msg(cge_event_elapsed_ms(e, e2, &ms), CGE_ERR_INVALID_ARG, "different devices");
    cge_event_destroy(NULL);
    cge_event_destroy(e);
    cge_event_destroy(e2);
    cge_stream_destroy(s);
    cge_stream_destroy(s2);
    cge_device_destroy(dev);
    cge_device_destroy(other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cross_stream_wait),
        cmocka_unit_test(test_cross_stream_wait_one_thread),
        cmocka_unit_test(test_wait_submitted_before_work_one_thread),
        cmocka_unit_test(test_event_chain),
        cmocka_unit_test(test_query_synchronize_elapsed),
        cmocka_unit_test(test_wait_never_recorded_is_noop),
        cmocka_unit_test(test_rerecord_replaces_point),
        cmocka_unit_test(test_destroy_event_with_pending_point),
        cmocka_unit_test(test_queued_tasks_outlive_event_handle),
        cmocka_unit_test(test_event_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
