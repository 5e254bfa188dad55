/* Kernel launch: every block runs exactly once however many there are, the
 * arguments are the runtime's own copy, launches depend on each other in
 * stream order, and bad launches are refused with a [runtime] error. */
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "rt_test.h"

typedef struct count_args {
    atomic_int *hits;
    int64_t expect_blocks;
    atomic_int *bad; /* wrong num_blocks seen */
} count_args;

static void count_kernel(int64_t block, int64_t nblocks, void *args)
{
    count_args *a = args;
    if (nblocks != a->expect_blocks || block < 0 || block >= nblocks)
        atomic_fetch_add(a->bad, 1);
    else
        atomic_fetch_add_explicit(&a->hits[block], 1, memory_order_relaxed);
}

static void check_every_block_once(int threads, int64_t nblocks)
{
    cge_device *dev = rt_make_device(threads);
    cge_stream *s = rt_make_stream(dev);
    atomic_int *hits = calloc((size_t)nblocks, sizeof *hits);
    assert_non_null(hits);
    atomic_int bad = 0;
    count_args a = {hits, nblocks, &bad};
    assert_int_equal(cge_launch(s, count_kernel, nblocks, &a, sizeof a), CGE_OK);
    assert_int_equal(cge_stream_synchronize(s), CGE_OK);
    assert_int_equal(atomic_load(&bad), 0);
    for (int64_t b = 0; b < nblocks; b++)
        if (atomic_load(&hits[b]) != 1)
            fail_msg("block %lld ran %d times", (long long)b, atomic_load(&hits[b]));
    free(hits);
    cge_stream_destroy(s);
    cge_device_destroy(dev);
}

static void test_many_blocks_each_once(void **state) { check_every_block_once(0, 100000); }

static void test_many_blocks_one_thread(void **state) { check_every_block_once(1, 20000); }

static void test_single_block(void **state) { check_every_block_once(0, 1); }

/* ---- arguments ----------------------------------------------------------- */

typedef struct big_args {
    unsigned char bytes[CGE_LAUNCH_MAX_ARGS];
} big_args;

typedef struct arg_probe {
    int64_t value;
    double scale;
    int64_t *out;
} arg_probe;

static void probe_kernel(int64_t block, int64_t n, void *args)
{
    arg_probe *a = args;
    /* Launch arguments are suitably aligned for any scalar type. */
    int64_t misaligned = (int64_t)((uintptr_t)args % alignof(max_align_t));
    a->out[block] = misaligned ? -1 : (int64_t)((double)a->value * a->scale) + block;
}

static void big_kernel(int64_t block, int64_t n, void *args)
{
    big_args *a = args;
    int64_t *out = *(int64_t **)a->bytes;
    int64_t sum = 0;
    for (size_t i = sizeof(int64_t *); i < sizeof a->bytes; i++)
        sum += a->bytes[i];
    out[block] = sum;
}

static int64_t *g_null_args_seen;
static void null_args_probe(int64_t block, int64_t n, void *args) { g_null_args_seen[block] = args == NULL; }

static void test_args_are_copied(void **state)
{
    cge_device *dev = rt_make_device(0);
    cge_stream *s = rt_make_stream(dev);
    rt_gate gate;
    gate_init(&gate);
    int64_t out_small[4] = {0}, out_big[3] = {0};
    /* Hold the stream so that the launches run after the caller's structs
     * have changed: they must see the values at launch time. */
    assert_int_equal(cge_launch_host_func(s, gate_fn, &gate), CGE_OK);
    arg_probe p = {.value = 10, .scale = 2.5, .out = out_small};
    assert_int_equal(cge_launch(s, probe_kernel, 4, &p, sizeof p), CGE_OK);
    p.value = 999;
    p.out = NULL;

    big_args *big = calloc(1, sizeof *big);
    assert_non_null(big);
    int64_t *out_big_ptr = out_big;
    memcpy(big->bytes, &out_big_ptr, sizeof out_big_ptr);
    int64_t expect_sum = 0;
    for (size_t i = sizeof(int64_t *); i < sizeof big->bytes; i++) {
        big->bytes[i] = (unsigned char)(i * 31);
        expect_sum += big->bytes[i];
    }
    assert_int_equal(cge_launch(s, big_kernel, 3, big, sizeof *big), CGE_OK);
    memset(big->bytes + sizeof(int64_t *), 0, sizeof big->bytes - sizeof(int64_t *));

    int64_t seen_null[2] = {0, 0};
    g_null_args_seen = seen_null;
    assert_int_equal(cge_launch(s, null_args_probe, 2, NULL, 0), CGE_OK);
    /* args with args_size 0: nothing is copied, the kernel gets NULL. */
    assert_int_equal(cge_launch(s, null_args_probe, 2, &p, 0), CGE_OK);

    gate_open(&gate);
    assert_int_equal(cge_stream_synchronize(s), CGE_OK);
    for (int b = 0; b < 4; b++)
        assert_int_equal(out_small[b], 25 + b);
    for (int b = 0; b < 3; b++)
        assert_int_equal(out_big[b], expect_sum);
    assert_int_equal(seen_null[0], 1);
    assert_int_equal(seen_null[1], 1);
    free(big);
    gate_fini(&gate);
    cge_stream_destroy(s);
    cge_device_destroy(dev);
}

/* ---- data dependencies between launches ---------------------------------- */

typedef struct vec_args {
    const float *in;
    float *out;
    int64_t n;
    float add;
} vec_args;

/* Each block handles a slice of 64 elements. */
static void vec_add_kernel(int64_t block, int64_t nblocks, void *args)
{
    vec_args *a = args;
    int64_t lo = block * 64, hi = lo + 64 < a->n ? lo + 64 : a->n;
    for (int64_t i = lo; i < hi; i++)
        a->out[i] = a->in[i] + a->add;
}

/* Reads the whole input: wrong if any block of the previous launch is late. */
static void reverse_kernel(int64_t block, int64_t nblocks, void *args)
{
    vec_args *a = args;
    int64_t lo = block * 64, hi = lo + 64 < a->n ? lo + 64 : a->n;
    for (int64_t i = lo; i < hi; i++)
        a->out[i] = a->in[a->n - 1 - i];
}

static void run_chain(int threads)
{
    cge_device *dev = rt_make_device(threads);
    cge_stream *s = rt_make_stream(dev);
    enum { N = 64 * 300 + 17 };
    float *x = NULL, *y = NULL;
    assert_int_equal(cge_mem_alloc(dev, N * sizeof(float), (void **)&x), CGE_OK);
    assert_int_equal(cge_mem_alloc(dev, N * sizeof(float), (void **)&y), CGE_OK);
    assert_int_equal(cge_memset_async(s, x, 0, N * sizeof(float)), CGE_OK);
    int64_t nb = (N + 63) / 64;
    /* x -> y -> x ... ten times, alternating +1 and a reversal. */
    for (int step = 0; step < 10; step++) {
        vec_args a = {step % 2 ? y : x, step % 2 ? x : y, N, (float)step};
        assert_int_equal(cge_launch(s, step % 4 == 1 ? reverse_kernel : vec_add_kernel, nb, &a, sizeof a),
                         CGE_OK);
    }
    assert_int_equal(cge_stream_synchronize(s), CGE_OK);
    /* Reference on the host. */
    static float rx[N], ry[N];
    memset(rx, 0, sizeof rx);
    for (int step = 0; step < 10; step++) {
        float *in = step % 2 ? ry : rx, *out = step % 2 ? rx : ry;
        for (int i = 0; i < N; i++)
            out[i] = step % 4 == 1 ? in[N - 1 - i] : in[i] + (float)step;
    }
    assert_memory_equal(x, rx, sizeof rx);
    assert_memory_equal(y, ry, sizeof ry);
    cge_stream_destroy(s);
    cge_device_destroy(dev); /* also frees x and y */
}

static void test_dependent_launches(void **state) { run_chain(0); }
static void test_dependent_launches_one_thread(void **state) { run_chain(1); }

/* 10,000 trivial launches: each counted once, in order. */
typedef struct seq_args {
    int *next;
    int expect;
    int *bad;
} seq_args;

static void seq_kernel(int64_t block, int64_t n, void *args)
{
    seq_args *a = args;
    if (*a->next != a->expect)
        (*a->bad)++;
    *a->next = a->expect + 1;
}

static void test_many_small_launches(void **state)
{
    cge_device *dev = rt_make_device(0);
    cge_stream *s = rt_make_stream(dev);
    int next = 0, bad = 0;
    for (int i = 0; i < 10000; i++) {
        seq_args a = {&next, i, &bad};
        assert_int_equal(cge_launch(s, seq_kernel, 1, &a, sizeof a), CGE_OK);
    }
    assert_int_equal(cge_stream_synchronize(s), CGE_OK);
    assert_int_equal(next, 10000);
    assert_int_equal(bad, 0);
    cge_stream_destroy(s);
    cge_device_destroy(dev);
}

/* Several streams launching many-block kernels at once share the pool. */
static void test_parallel_streams_many_blocks(void **state)
{
    cge_device *dev = rt_make_device(0);
    enum { S = 4, NB = 5000 };
    cge_stream *s[S];
    atomic_int *hits[S];
    atomic_int bad = 0;
    for (int k = 0; k < S; k++) {
        s[k] = rt_make_stream(dev);
        hits[k] = calloc(NB, sizeof(atomic_int));
        assert_non_null(hits[k]);
    }
    for (int rep = 0; rep < 3; rep++)
        for (int k = 0; k < S; k++) {
            count_args a = {hits[k], NB, &bad};
            assert_int_equal(cge_launch(s[k], count_kernel, NB, &a, sizeof a), CGE_OK);
        }
    assert_int_equal(cge_device_synchronize(dev), CGE_OK);
    assert_int_equal(atomic_load(&bad), 0);
    for (int k = 0; k < S; k++) {
        for (int b = 0; b < NB; b++)
            assert_int_equal(atomic_load(&hits[k][b]), 3);
        free(hits[k]);
        cge_stream_destroy(s[k]);
    }
    cge_device_destroy(dev);
}

static void noop_kernel(int64_t block, int64_t n, void *args) {}

static void test_launch_errors(void **state)
{
    cge_device *dev = rt_make_device(1);
    cge_stream *s = rt_make_stream(dev);
    int x = 0;
    assert_rt_error_msg(cge_launch(NULL, noop_kernel, 1, &x, sizeof x), CGE_ERR_INVALID_ARG,
                        "stream is NULL");
    assert_rt_error_msg(cge_launch(s, NULL, 1, &x, sizeof x), CGE_ERR_INVALID_ARG, "kernel is NULL");
    assert_rt_error_msg(cge_launch(s, noop_kernel, 0, &x, sizeof x), CGE_ERR_INVALID_ARG, "num_blocks");
    assert_rt_error(cge_launch(s, noop_kernel, -5, &x, sizeof x), CGE_ERR_INVALID_ARG);
    assert_rt_error_msg(cge_launch(s, noop_kernel, 1, &x, CGE_LAUNCH_MAX_ARGS + 1), CGE_ERR_INVALID_ARG,
                        "CGE_LAUNCH_MAX_ARGS");
    assert_rt_error_msg(cge_launch(s, noop_kernel, 1, NULL, 8), CGE_ERR_INVALID_ARG, "args is NULL");
    /* Nothing was queued by the failed calls. */
    bool idle = false;
    assert_int_equal(cge_stream_query(s, &idle), CGE_OK);
    assert_true(idle);
    cge_stream_destroy(s);
    cge_device_destroy(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_blocks_each_once),
        cmocka_unit_test(test_many_blocks_one_thread),
        cmocka_unit_test(test_single_block),
        cmocka_unit_test(test_args_are_copied),
        cmocka_unit_test(test_dependent_launches),
        cmocka_unit_test(test_dependent_launches_one_thread),
        cmocka_unit_test(test_many_small_launches),
        cmocka_unit_test(test_parallel_streams_many_blocks),
        cmocka_unit_test(test_launch_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
