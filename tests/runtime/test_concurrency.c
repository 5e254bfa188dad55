/* Several host threads at once: submitting to their own streams and to a
 * shared one, launching many-block kernels, creating and destroying streams
 * and events, and handing work to each other through events. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "rt_test.h"

enum { THREADS = 4, PER_THREAD = 1000 };

/* Logs are written only by tasks of one stream, which run one at a time in
 * order, so they need no lock: a race here is a runtime bug that TSan sees. */
typedef struct stream_log {
    int *entries;
    int n;
} stream_log;

typedef struct log_item {
    stream_log *log;
    int value;
} log_item;

static void append_host(void *user)
{
    log_item *it = user;
    it->log->entries[it->log->n++] = it->value;
}

typedef struct submitter {
    cge_device *dev;
    cge_stream *shared;
    stream_log *shared_log;
    int id;
    cge_stream *own;
    stream_log own_log;
    log_item own_items[PER_THREAD];
    log_item shared_items[PER_THREAD];
    atomic_int *blocks; /* counted by a many-block kernel */
    int failures;
} submitter;

static void block_count_kernel(int64_t block, int64_t n, void *args)
{
    atomic_fetch_add_explicit(*(atomic_int **)args, 1, memory_order_relaxed);
}

static void *submit_thread(void *p)
{
    submitter *s = p;
    for (int i = 0; i < PER_THREAD; i++) {
        s->own_items[i] = (log_item){&s->own_log, i};
        s->shared_items[i] = (log_item){s->shared_log, s->id * PER_THREAD + i};
        if (cge_launch_host_func(s->own, append_host, &s->own_items[i]) != CGE_OK)
            s->failures++;
        if (cge_launch_host_func(s->shared, append_host, &s->shared_items[i]) != CGE_OK)
            s->failures++;
        if (i % 50 == 0 && cge_launch(s->own, block_count_kernel, 40, &s->blocks, sizeof s->blocks) != CGE_OK)
            s->failures++;
    }
    if (cge_stream_synchronize(s->own) != CGE_OK)
        s->failures++;
    return NULL;
}

static void test_concurrent_submitters(void **state)
{
    cge_device *dev = rt_make_device(0);
    cge_stream *shared = rt_make_stream(dev);
    stream_log shared_log = {calloc(THREADS * PER_THREAD, sizeof(int)), 0};
    assert_non_null(shared_log.entries);
    atomic_int blocks = 0;
    submitter *subs = calloc(THREADS, sizeof *subs);
    assert_non_null(subs);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        subs[t].dev = dev;
        subs[t].shared = shared;
        subs[t].shared_log = &shared_log;
        subs[t].id = t;
        subs[t].own = rt_make_stream(dev);
        subs[t].own_log.entries = calloc(PER_THREAD, sizeof(int));
        assert_non_null(subs[t].own_log.entries);
        subs[t].blocks = &blocks;
    }
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, submit_thread, &subs[t]), 0);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    assert_int_equal(cge_stream_synchronize(shared), CGE_OK);

    for (int t = 0; t < THREADS; t++) {
        assert_int_equal(subs[t].failures, 0);
        /* Own stream: everything, in submission order. */
        assert_int_equal(subs[t].own_log.n, PER_THREAD);
        for (int i = 0; i < PER_THREAD; i++)
            assert_int_equal(subs[t].own_log.entries[i], i);
    }
    /* Shared stream: everything once, each thread's items in its order. */
    assert_int_equal(shared_log.n, THREADS * PER_THREAD);
    int next[THREADS] = {0};
    for (int k = 0; k < shared_log.n; k++) {
        int v = shared_log.entries[k];
        int t = v / PER_THREAD;
        assert_true(t >= 0 && t < THREADS);
        assert_int_equal(v % PER_THREAD, next[t]);
        next[t]++;
    }
    assert_int_equal(atomic_load(&blocks), THREADS * (PER_THREAD / 50) * 40);

    for (int t = 0; t < THREADS; t++) {
        cge_stream_destroy(subs[t].own);
        free(subs[t].own_log.entries);
    }
    cge_stream_destroy(shared);
    free(shared_log.entries);
    free(subs);
    cge_device_destroy(dev);
}

/* Threads that create, use and destroy streams and events concurrently. */
static void *churn_thread(void *p)
{
    cge_device *dev = p;
    intptr_t failures = 0;
    for (int round = 0; round < 30; round++) {
        cge_stream *s = NULL;
        cge_event *e = NULL;
        if (cge_stream_create(dev, &s) != CGE_OK || cge_event_create(dev, &e) != CGE_OK) {
            failures++;
            cge_stream_destroy(s);
            continue;
        }
        atomic_int count = 0;
        atomic_int *pc = &count;
        for (int i = 0; i < 20; i++)
            if (cge_launch(s, block_count_kernel, 1 + i % 5, &pc, sizeof pc) != CGE_OK)
                failures++;
        if (cge_event_record(e, s) != CGE_OK)
            failures++;
        cge_event_destroy(e); /* waits for the record */
        int expected = 0;
        for (int i = 0; i < 20; i++)
            expected += 1 + i % 5;
        if (atomic_load(&count) != expected)
            failures++;
        cge_stream_destroy(s);
    }
    return (void *)failures;
}

static void test_concurrent_create_destroy(void **state)
{
    cge_device *dev = rt_make_device(0);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, churn_thread, dev), 0);
    for (int t = 0; t < THREADS; t++) {
        void *ret = NULL;
        pthread_join(th[t], &ret);
        assert_int_equal((intptr_t)ret, 0);
    }
    cge_device_destroy(dev);
}

/* A pipeline across threads: a producer thread submits stage 1 on its stream
 * and records an event per item; a consumer thread makes its stream wait on
 * each event and submits stage 2. Data flow proves the ordering. */
enum { ITEMS = 200, WIDTH = 32 };

typedef struct pipe_state {
    cge_device *dev;
    cge_stream *prod, *cons;
    cge_event *ev[ITEMS];
    int32_t stage1[ITEMS][WIDTH];
    int32_t stage2[ITEMS][WIDTH];
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int recorded; /* items whose event has been recorded */
} pipe_state;

typedef struct stage_args {
    const int32_t *in;
    int32_t *out;
    int32_t k;
} stage_args;

static void stage_kernel(int64_t block, int64_t n, void *args)
{
    stage_args *a = args;
    a->out[block] = (a->in ? a->in[block] * 2 : (int32_t)block) + a->k;
}

static void *producer(void *p)
{
    pipe_state *ps = p;
    for (int i = 0; i < ITEMS; i++) {
        stage_args a = {NULL, ps->stage1[i], i};
        cge_launch(ps->prod, stage_kernel, WIDTH, &a, sizeof a);
        cge_event_record(ps->ev[i], ps->prod);
        pthread_mutex_lock(&ps->lock);
        ps->recorded = i + 1;
        pthread_cond_signal(&ps->cv);
        pthread_mutex_unlock(&ps->lock);
    }
    return NULL;
}

static void *consumer(void *p)
{
    pipe_state *ps = p;
    for (int i = 0; i < ITEMS; i++) {
        pthread_mutex_lock(&ps->lock);
        while (ps->recorded <= i)
            pthread_cond_wait(&ps->cv, &ps->lock);
        pthread_mutex_unlock(&ps->lock);
        cge_stream_wait_event(ps->cons, ps->ev[i]);
        stage_args a = {ps->stage1[i], ps->stage2[i], 1};
        cge_launch(ps->cons, stage_kernel, WIDTH, &a, sizeof a);
    }
    cge_stream_synchronize(ps->cons);
    return NULL;
}

static void run_pipeline(int threads)
{
    pipe_state *ps = calloc(1, sizeof *ps);
    assert_non_null(ps);
    ps->dev = rt_make_device(threads);
    ps->prod = rt_make_stream(ps->dev);
    ps->cons = rt_make_stream(ps->dev);
    for (int i = 0; i < ITEMS; i++)
        ps->ev[i] = rt_make_event(ps->dev);
    pthread_mutex_init(&ps->lock, NULL);
    pthread_cond_init(&ps->cv, NULL);
    pthread_t tp, tc;
    assert_int_equal(pthread_create(&tc, NULL, consumer, ps), 0);
    assert_int_equal(pthread_create(&tp, NULL, producer, ps), 0);
    pthread_join(tp, NULL);
    pthread_join(tc, NULL);
    for (int i = 0; i < ITEMS; i++)
        for (int b = 0; b < WIDTH; b++)
            assert_int_equal(ps->stage2[i][b], (b + i) * 2 + 1);
    for (int i = 0; i < ITEMS; i++)
        cge_event_destroy(ps->ev[i]);
    cge_stream_destroy(ps->prod);
    cge_stream_destroy(ps->cons);
    cge_device_destroy(ps->dev);
    pthread_cond_destroy(&ps->cv);
    pthread_mutex_destroy(&ps->lock);
    free(ps);
}

static void test_event_pipeline_across_threads(void **state) { run_pipeline(0); }
static void test_event_pipeline_one_worker(void **state) { run_pipeline(1); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_submitters),
        cmocka_unit_test(test_concurrent_create_destroy),
        cmocka_unit_test(test_event_pipeline_across_threads),
        cmocka_unit_test(test_event_pipeline_one_worker),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
