/* Replays on the core pool: chains of multi-block launches shared with the
 * workers, with single-block tasks between them, replayed inline by the host
 * (cge_ri_execute) and on a worker (cge_ri_execute_async); every block runs
 * once, in order, and the pool's replay accounting returns to rest. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "rt_test.h"
#include "runtime/cpu.h"

enum { N = 4096, STAGES = 12, REPLAYS = 40 };

typedef struct stage_args {
    const float *x;
    float *y;
    int64_t n;
    atomic_int *runs; /* one counter per block of this launch */
} stage_args;

/* y = 2x + 1 over this block's slice; counts the block's runs. */
static void stage_kernel(int64_t block, int64_t nblocks, void *args)
{
    const stage_args *a = args;
    int64_t lo = a->n * block / nblocks, hi = a->n * (block + 1) / nblocks;
    for (int64_t i = lo; i < hi; i++)
        a->y[i] = 2.0f * a->x[i] + 1.0f;
    atomic_fetch_add_explicit(&a->runs[block], 1, memory_order_relaxed);
}

typedef struct probe_args {
    cpu_device *d;
    atomic_int *seen_replaying; /* replays counted while this kernel ran */
    atomic_int *seen_busy;      /* busy threads counted while it ran */
} probe_args;

/* A single-block task inside the replay: reads the pool's view of it. */
static void probe_kernel(int64_t block, int64_t nblocks, void *args)
{
    const probe_args *p = args;
    pthread_mutex_lock(&p->d->lock);
    int busy = p->d->busy;
    pthread_mutex_unlock(&p->d->lock);
    atomic_store(p->seen_busy, busy);
    atomic_store(p->seen_replaying, atomic_load(&p->d->replays));
}

static const int64_t block_counts[STAGES] = {2, 1, 3, 2, 7, 1, 64, 2, 5, 1, 16, 2};

static void run_chain(int threads, bool async)
{
    cge_device *dev = rt_make_device(threads);
    cge_stream *s = rt_make_stream(dev);
    float *buf[STAGES + 1];
    for (int k = 0; k <= STAGES; k++)
        buf[k] = calloc(N, sizeof(float));
    atomic_int runs[STAGES][64];
    memset(runs, 0, sizeof runs);
    atomic_int seen_replaying = 0, seen_busy = 0;

    assert_int_equal(cge_stream_begin_capture(s, CGE_CAPTURE_THREAD_LOCAL), CGE_OK);
    for (int k = 0; k < STAGES; k++) {
        stage_args a = {buf[k], buf[k + 1], N, runs[k]};
        assert_int_equal(cge_launch(s, stage_kernel, block_counts[k], &a, sizeof a), CGE_OK);
        if (k == STAGES / 2) {
            probe_args p = {cpu_dev(dev), &seen_replaying, &seen_busy};
            assert_int_equal(cge_launch(s, probe_kernel, 1, &p, sizeof p), CGE_OK);
        }
    }
    cge_ri *ri = NULL;
    assert_int_equal(cge_stream_end_capture(s, &ri), CGE_OK);
    assert_non_null(ri);

    for (int r = 0; r < REPLAYS; r++) {
        for (int64_t i = 0; i < N; i++)
            buf[0][i] = (float)(i % 7) + (float)r;
        if (async) {
            assert_int_equal(cge_ri_execute_async(ri, s), CGE_OK);
            assert_int_equal(cge_stream_synchronize(s), CGE_OK);
        } else {
            assert_int_equal(cge_ri_execute(ri, -1), CGE_OK);
        }
        for (int64_t i = 0; i < N; i++) {
            /* x -> 2x + 1 STAGES times: (x + 1) * 2^STAGES - 1, exact in float here */
            float want = ((float)(i % 7) + (float)r + 1.0f) * (float)(1 << STAGES) - 1.0f;
            assert_true(buf[STAGES][i] == want);
        }
        /* The probe ran inside the replay, on a thread the pool counts. */
        assert_int_equal(atomic_load(&seen_replaying), 1);
        assert_true(atomic_load(&seen_busy) >= 1);
    }
    for (int k = 0; k < STAGES; k++)
        for (int64_t b = 0; b < block_counts[k]; b++)
            assert_int_equal(atomic_load(&runs[k][b]), REPLAYS);

    /* At rest: no replay counted, no thread counted busy (a leak here would
     * keep idle workers spinning). */
    cpu_device *d = cpu_dev(dev);
    assert_int_equal(atomic_load(&d->replays), 0);
    pthread_mutex_lock(&d->lock);
    int busy = d->busy;
    pthread_mutex_unlock(&d->lock);
    assert_int_equal(busy, 0);

    cge_ri_destroy(ri);
    cge_stream_destroy(s);
    cge_device_destroy(dev);
    for (int k = 0; k <= STAGES; k++)
        free(buf[k]);
}

static void test_inline_two_threads(void **state) { run_chain(2, false); }
static void test_inline_four_threads(void **state) { run_chain(4, false); }
static void test_inline_one_thread(void **state) { run_chain(1, false); }
static void test_async_two_threads(void **state) { run_chain(2, true); }
static void test_async_four_threads(void **state) { run_chain(4, true); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inline_two_threads),  cmocka_unit_test(test_inline_four_threads),
        cmocka_unit_test(test_inline_one_thread),   cmocka_unit_test(test_async_two_threads),
        cmocka_unit_test(test_async_four_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
