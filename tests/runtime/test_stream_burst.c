/* Bursts of immediate submissions (cge_stream_burst_begin/end): between the
 * two the pool counts the thread as one replay (and a host thread as
 * computing), so idle workers poll through the gaps between its launches;
 * launches inside run as before and are not counted twice; pairs nest; the
 * accounting returns to rest after every end, also from a worker's task and
 * across two devices; queued and NULL streams are refused. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "rt_test.h"
#include "runtime/cpu.h"

typedef struct pool_view {
    int replays, busy;
} pool_view;

static pool_view view(cge_device *dev)
{
    cpu_device *d = cpu_dev(dev);
    pthread_mutex_lock(&d->lock);
    pool_view v = {atomic_load(&d->replays), d->busy};
    pthread_mutex_unlock(&d->lock);
    return v;
}

typedef struct fill_args {
    cpu_device *d;
    int *data;
    int64_t n;
    atomic_int *max_replays;   /* the most replays any block saw */
} fill_args;

static void fill_kernel(int64_t b, int64_t nb, void *p)
{
    fill_args *a = p;
    for (int64_t i = b; i < a->n; i += nb)
        a->data[i] = (int)i * 3;
    int r = atomic_load(&a->d->replays), m = atomic_load(a->max_replays);
    while (r > m && !atomic_compare_exchange_weak(a->max_replays, &m, r)) {
    }
}

static void test_burst_counts_the_thread_once(void **state)
{
    (void)state;
    cge_device *dev = NULL;
    cge_device_options o = {.num_threads = 2};
    assert_int_equal(cge_device_create_cpu(&o, &dev), CGE_OK);
    cge_stream *s = NULL;
    assert_int_equal(cge_stream_create_immediate(dev, &s), CGE_OK);
    pool_view rest = view(dev);
    assert_int_equal(rest.replays, 0);

    assert_int_equal(cge_stream_burst_begin(s), CGE_OK);
    pool_view in = view(dev);
    assert_int_equal(in.replays, 1);
    assert_int_equal(in.busy, rest.busy + 1);   /* a host thread computing */
    assert_int_equal(cge_stream_burst_begin(s), CGE_OK);   /* nested */
    assert_int_equal(view(dev).replays, 1);

    int data[4096];
    atomic_int max_replays = 0;
    for (int round = 0; round < 20; round++) {
        memset(data, 0, sizeof data);
        fill_args a = {cpu_dev(dev), data, 4096, &max_replays};
        assert_int_equal(cge_launch(s, fill_kernel, round % 3 ? 16 : 1, &a, sizeof a), CGE_OK);
        for (int i = 0; i < 4096; i++)
            assert_int_equal(data[i], i * 3);
    }
    /* The launches inside the burst did not count the thread again. */
    assert_int_equal(atomic_load(&max_replays), 1);
    assert_int_equal(cge_stream_synchronize(s), CGE_OK);

    cge_stream_burst_end(s);
    assert_int_equal(view(dev).replays, 1);   /* the outer pair is still open */
    cge_stream_burst_end(s);
    pool_view after = view(dev);
    assert_int_equal(after.replays, 0);
    assert_int_equal(after.busy, rest.busy);
    cge_stream_burst_end(s);                  /* an end without a begin: nothing */
    assert_int_equal(view(dev).replays, 0);

    /* Outside a burst a launch counts itself for its own length. */
    max_replays = 0;
    fill_args a = {cpu_dev(dev), data, 4096, &max_replays};
    assert_int_equal(cge_launch(s, fill_kernel, 8, &a, sizeof a), CGE_OK);
    assert_int_equal(atomic_load(&max_replays), 1);
    assert_int_equal(view(dev).replays, 0);
    cge_stream_destroy(s);
    cge_device_destroy(dev);
}

typedef struct task_burst {
    cge_device *dev;
    pool_view inside, base;
    int ok;
} task_burst;

/* A host task on a queued stream (so on a worker) that bursts on an
 * immediate stream of its own: the worker is counted as busy already. */
static void burst_in_task(void *user)
{
    task_burst *t = user;
    cge_stream *s = NULL;
    if (cge_stream_create_immediate(t->dev, &s) != CGE_OK)
        return;
    t->base = view(t->dev);
    if (cge_stream_burst_begin(s) == CGE_OK) {
        t->inside = view(t->dev);
        cge_stream_burst_end(s);
        t->ok = 1;
    }
    cge_stream_destroy(s);
}

static void test_burst_on_a_worker(void **state)
{
    (void)state;
    cge_device *dev = NULL;
    cge_device_options o = {.num_threads = 2};
    assert_int_equal(cge_device_create_cpu(&o, &dev), CGE_OK);
    cge_stream *q = NULL;
    assert_int_equal(cge_stream_create(dev, &q), CGE_OK);
    task_burst t = {.dev = dev};
    assert_int_equal(cge_launch_host_func(q, burst_in_task, &t), CGE_OK);
    assert_int_equal(cge_stream_synchronize(q), CGE_OK);
    assert_int_equal(t.ok, 1);
    assert_int_equal(t.inside.replays, t.base.replays + 1);
    assert_int_equal(t.inside.busy, t.base.busy);   /* the worker was counted */
    assert_int_equal(view(dev).replays, 0);
    cge_stream_destroy(q);
    cge_device_destroy(dev);
}

static void test_burst_across_devices(void **state)
{
    (void)state;
    cge_device *a = NULL, *b = NULL;
    cge_device_options o = {.num_threads = 2};
    assert_int_equal(cge_device_create_cpu(&o, &a), CGE_OK);
    assert_int_equal(cge_device_create_cpu(&o, &b), CGE_OK);
    cge_stream *sa = NULL, *sb = NULL;
    assert_int_equal(cge_stream_create_immediate(a, &sa), CGE_OK);
    assert_int_equal(cge_stream_create_immediate(b, &sb), CGE_OK);
    assert_int_equal(cge_stream_burst_begin(sa), CGE_OK);
    /* Inside a's burst, b's is accepted and not counted; its end leaves a's. */
    assert_int_equal(cge_stream_burst_begin(sb), CGE_OK);
    assert_int_equal(view(b).replays, 0);
    cge_stream_burst_end(sb);
    assert_int_equal(view(a).replays, 1);
    cge_stream_burst_end(sa);
    assert_int_equal(view(a).replays, 0);
    /* Once a's ends, b's counts. */
    assert_int_equal(cge_stream_burst_begin(sb), CGE_OK);
    assert_int_equal(view(b).replays, 1);
    cge_stream_burst_end(sb);
    assert_int_equal(view(b).replays, 0);
    cge_stream_destroy(sa);
    cge_stream_destroy(sb);
    cge_device_destroy(a);
    cge_device_destroy(b);
}

static void test_burst_refusals(void **state)
{
    (void)state;
    cge_device *dev = NULL;
    cge_device_options o = {.num_threads = 2};
    assert_int_equal(cge_device_create_cpu(&o, &dev), CGE_OK);
    cge_stream *q = NULL;
    assert_int_equal(cge_stream_create(dev, &q), CGE_OK);
    assert_rt_error_msg(cge_stream_burst_begin(q), CGE_ERR_INVALID_ARG, "queued");
    assert_rt_error_msg(cge_stream_burst_begin(NULL), CGE_ERR_INVALID_ARG, "NULL");
    cge_stream_burst_end(q);      /* refused pairs end as nothing */
    cge_stream_burst_end(NULL);
    assert_int_equal(view(dev).replays, 0);
    cge_stream_destroy(q);
    cge_device_destroy(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_burst_counts_the_thread_once),
        cmocka_unit_test(test_burst_on_a_worker),
        cmocka_unit_test(test_burst_across_devices),
        cmocka_unit_test(test_burst_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
