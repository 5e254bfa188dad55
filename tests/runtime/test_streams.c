/* Streams: device creation and thread counts, in-order execution, query and
 * synchronize, destroy with work pending, and the argument errors. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "rt_test.h"
#include "runtime/device.h"

/* ---- device --------------------------------------------------------------- */

static void test_device_basics(void **state)
{
    cge_device *dev = NULL;
    assert_int_equal(cge_device_create_cpu(NULL, &dev), CGE_OK);
    assert_string_equal(cge_device_name(dev), "cpu");
    int n = cge_device_num_threads(dev);
    assert_true(n >= 1 && n <= rt_online_cores());
    assert_int_equal(cge_device_synchronize(dev), CGE_OK);
    cge_device_destroy(dev);
    cge_device_destroy(NULL);

    assert_rt_error_msg(cge_device_create_cpu(NULL, NULL), CGE_ERR_INVALID_ARG, "out is NULL");
    assert_rt_error_msg(cge_device_synchronize(NULL), CGE_ERR_INVALID_ARG, "device is NULL");
}

static void test_num_threads_option_and_env(void **state)
{
    int cores = rt_online_cores();
    cge_device *dev = rt_make_device(1);
    assert_int_equal(cge_device_num_threads(dev), 1);
    cge_device_destroy(dev);

    /* More than the cores is clamped: never more compute threads than cores. */
    dev = rt_make_device(cores + 100);
    assert_int_equal(cge_device_num_threads(dev), cores);
    cge_device_destroy(dev);

    cge_device_options bad = {.num_threads = -2};
    assert_rt_error_msg(cge_device_create_cpu(&bad, &dev), CGE_ERR_INVALID_ARG, "num_threads");
    assert_null(dev);

    /* 0 defers to $CGE_NUM_THREADS; an explicit count wins over it. */
    char *saved = getenv("CGE_NUM_THREADS") ? strdup(getenv("CGE_NUM_THREADS")) : NULL;
    setenv("CGE_NUM_THREADS", "1", 1);
    dev = rt_make_device(0);
    assert_int_equal(cge_device_num_threads(dev), 1);
    cge_device_destroy(dev);
    if (cores > 1) {
        dev = rt_make_device(2);
        assert_int_equal(cge_device_num_threads(dev), 2);
        cge_device_destroy(dev);
    }
    setenv("CGE_NUM_THREADS", "lots", 1);
    assert_rt_error_msg(cge_device_create_cpu(NULL, &dev), CGE_ERR_INVALID_ARG, "CGE_NUM_THREADS");
    setenv("CGE_NUM_THREADS", "0", 1);
    assert_rt_error(cge_device_create_cpu(NULL, &dev), CGE_ERR_INVALID_ARG);
    unsetenv("CGE_NUM_THREADS");
    dev = rt_make_device(0);
    assert_int_equal(cge_device_num_threads(dev), cores);
    cge_device_destroy(dev);
    if (saved) {
        setenv("CGE_NUM_THREADS", saved, 1);
        free(saved);
    }
}

/* ---- in-order execution -------------------------------------------------- */

typedef struct order_log {
    int entries[4096];
    int n;
    atomic_int blocks_done; /* blocks of multi-block kernels run so far */
    int blocks_seen[4096];  /* blocks_done as each host task saw it */
} order_log;

typedef struct log_arg {
    order_log *log;
    int id;
} log_arg;

static void log_host(void *user)
{
    log_arg *a = user;
    a->log->blocks_seen[a->log->n] = atomic_load(&a->log->blocks_done);
    a->log->entries[a->log->n++] = a->id;
}

static void log_kernel(int64_t block, int64_t nblocks, void *args)
{
    log_arg *a = args;
    if (nblocks == 1) {
        a->log->blocks_seen[a->log->n] = atomic_load(&a->log->blocks_done);
        a->log->entries[a->log->n++] = a->id;
    } else {
        atomic_fetch_add(&a->log->blocks_done, 1);
    }
}

static void test_in_order_execution(void **state)
{
    cge_device *dev = rt_make_device(0);
    cge_stream *s = rt_make_stream(dev);
    static order_log log;
    memset(&log, 0, sizeof log);
    enum { N = 600 };
    static log_arg host_args[N];
    int expected_blocks = 0, expected_seen[N], logged = 0;
    int expected_ids[N];
    for (int i = 0; i < N; i++) {
        log_arg a = {&log, i};
        switch (i % 3) {
        case 0: /* host callback: its argument must outlive the task */
            host_args[i] = a;
            assert_int_equal(cge_launch_host_func(s, log_host, &host_args[i]), CGE_OK);
            expected_seen[logged] = expected_blocks;
            expected_ids[logged++] = i;
            break;
        case 1: /* single-block kernel: logs like a host task */
            assert_int_equal(cge_launch(s, log_kernel, 1, &a, sizeof a), CGE_OK);
            expected_seen[logged] = expected_blocks;
            expected_ids[logged++] = i;
            break;
        default: /* multi-block kernel: all its blocks end before the next task */
            assert_int_equal(cge_launch(s, log_kernel, 2 + i % 17, &a, sizeof a), CGE_OK);
            expected_blocks += 2 + i % 17;
            break;
        }
    }
    assert_int_equal(cge_stream_synchronize(s), CGE_OK);
    assert_int_equal(log.n, logged);
    for (int k = 0; k < logged; k++) {
        assert_int_equal(log.entries[k], expected_ids[k]);
        assert_int_equal(log.blocks_seen[k], expected_seen[k]);
    }
    assert_int_equal(atomic_load(&log.blocks_done), expected_blocks);
    cge_stream_destroy(s);
    cge_device_destroy(dev);
}

/* ---- query / synchronize ------------------------------------------------- */

static void count_host(void *user) { atomic_fetch_add((atomic_int *)user, 1); }

static void test_query_and_synchronize(void **state)
{
    cge_device *dev = rt_make_device(0);
    cge_stream *s = rt_make_stream(dev);
    assert_ptr_equal(cge_stream_device(s), dev);
    assert_null(cge_stream_device(NULL));
    bool idle = false;
    assert_int_equal(cge_stream_query(s, &idle), CGE_OK);
    assert_true(idle); /* nothing submitted */

    rt_gate gate;
    gate_init(&gate);
    atomic_int count = 0;
    assert_int_equal(cge_launch_host_func(s, gate_fn, &gate), CGE_OK);
    for (int i = 0; i < 10; i++)
        assert_int_equal(cge_launch_host_func(s, count_host, &count), CGE_OK);
    gate_wait_entered(&gate);
    assert_int_equal(cge_stream_query(s, &idle), CGE_OK);
    assert_false(idle); /* the gate holds the stream */
    assert_int_equal(atomic_load(&count), 0);
    gate_open(&gate);
    assert_int_equal(cge_stream_synchronize(s), CGE_OK);
    assert_int_equal(atomic_load(&count), 10);
    assert_int_equal(cge_stream_query(s, &idle), CGE_OK);
    assert_true(idle);
    assert_int_equal(cge_device_synchronize(dev), CGE_OK);

    assert_rt_error_msg(cge_stream_synchronize(NULL), CGE_ERR_INVALID_ARG,
                        "cge_stream_synchronize: stream is NULL");
    assert_rt_error(cge_stream_query(NULL, &idle), CGE_ERR_INVALID_ARG);
    assert_rt_error_msg(cge_stream_query(s, NULL), CGE_ERR_INVALID_ARG, "idle is NULL");
    cge_stream *out = (cge_stream *)1;
    assert_rt_error(cge_stream_create(NULL, &out), CGE_ERR_INVALID_ARG);
    assert_null(out);
    assert_rt_error(cge_stream_create(dev, NULL), CGE_ERR_INVALID_ARG);
    assert_rt_error_msg(cge_launch_host_func(s, NULL, NULL), CGE_ERR_INVALID_ARG, "fn is NULL");
    assert_rt_error(cge_launch_host_func(NULL, count_host, &count), CGE_ERR_INVALID_ARG);
    cge_stream_destroy(NULL);

    cge_stream_destroy(s);
    gate_fini(&gate);
    cge_device_destroy(dev);
}

/* Several host threads wait on one stream at different points. */
typedef struct sync_arg {
    cge_stream *s;
    atomic_int *count;
    int expect_at_least;
    int seen;
} sync_arg;

static void *sync_thread(void *p)
{
    sync_arg *a = p;
    cge_stream_synchronize(a->s);
    a->seen = atomic_load(a->count);
    return NULL;
}

static void test_concurrent_synchronize(void **state)
{
    cge_device *dev = rt_make_device(0);
    cge_stream *s = rt_make_stream(dev);
    rt_gate gate;
    gate_init(&gate);
    atomic_int count = 0;
    assert_int_equal(cge_launch_host_func(s, gate_fn, &gate), CGE_OK);
    pthread_t th[3];
    sync_arg args[3];
    for (int t = 0; t < 3; t++) {
        for (int i = 0; i < 50; i++)
            assert_int_equal(cge_launch_host_func(s, count_host, &count), CGE_OK);
        /* Submitted before the thread starts, so its synchronize covers them. */
        args[t] = (sync_arg){s, &count, 50 * (t + 1), -1};
        assert_int_equal(pthread_create(&th[t], NULL, sync_thread, &args[t]), 0);
    }
    gate_open(&gate);
    for (int t = 0; t < 3; t++) {
        pthread_join(th[t], NULL);
        assert_true(args[t].seen >= args[t].expect_at_least);
    }
    cge_stream_destroy(s);
    assert_int_equal(atomic_load(&count), 150);
    gate_fini(&gate);
    cge_device_destroy(dev);
}

/* ---- destroy with work pending ------------------------------------------- */

static void slow_count_kernel(int64_t block, int64_t n, void *args)
{
    atomic_int *count = *(atomic_int **)args;
    volatile int spin = 0;
    for (int i = 0; i < 200; i++)
        spin += i;
    atomic_fetch_add(count, 1);
}

static void test_stream_destroy_with_pending_work(void **state)
{
    cge_device *dev = rt_make_device(0);
    cge_stream *s = rt_make_stream(dev);
    atomic_int count = 0;
    atomic_int *pc = &count;
    rt_gate gate;
    gate_init(&gate);
    assert_int_equal(cge_launch_host_func(s, gate_fn, &gate), CGE_OK);
    for (int i = 0; i < 500; i++)
        assert_int_equal(cge_launch(s, slow_count_kernel, 1 + i % 4, &pc, sizeof pc), CGE_OK);
    gate_wait_entered(&gate);
    assert_int_equal(atomic_load(&count), 0); /* all still queued behind the gate */
    gate_open(&gate);
    cge_stream_destroy(s); /* waits for all of it */
    int expected = 0;
    for (int i = 0; i < 500; i++)
        expected += 1 + i % 4;
    assert_int_equal(atomic_load(&count), expected);
    gate_fini(&gate);
    cge_device_destroy(dev);
}

/* Streams (and an event) left alive: device destroy waits for their queued
 * work, then releases them (ASan's leak checker confirms nothing is lost). */
static void test_device_destroy_with_pending_work(void **state)
{
    cge_device *dev = rt_make_device(0);
    atomic_int count = 0;
    atomic_int *pc = &count;
    cge_stream *s[3];
    for (int k = 0; k < 3; k++)
        s[k] = rt_make_stream(dev);
    cge_event *e = rt_make_event(dev);
    for (int i = 0; i < 300; i++) {
        assert_int_equal(cge_launch(s[i % 3], slow_count_kernel, 3, &pc, sizeof pc), CGE_OK);
        if (i == 150) {
            assert_int_equal(cge_event_record(e, s[0]), CGE_OK);
            assert_int_equal(cge_stream_wait_event(s[2], e), CGE_OK);
        }
    }
    cge_device_destroy(dev);
    assert_int_equal(atomic_load(&count), 900);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_basics),
        cmocka_unit_test(test_num_threads_option_and_env),
        cmocka_unit_test(test_in_order_execution),
        cmocka_unit_test(test_query_and_synchronize),
        cmocka_unit_test(test_concurrent_synchronize),
        cmocka_unit_test(test_stream_destroy_with_pending_work),
        cmocka_unit_test(test_device_destroy_with_pending_work),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
