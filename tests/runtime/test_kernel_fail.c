/* Failures reported from inside running kernels (cge_kernel_fail): kept per
 * stream (the first one wins), returned by the next synchronize as a [kernel]
 * error and then forgotten; reported on the stream that runs a replay; a
 * no-op outside tasks. */
#include <stdatomic.h>
#include <stdio.h>

#include "rt_test.h"

typedef struct fail_args {
    int64_t bad_block;   /* -1: none */
    atomic_int *ran;
} fail_args;

static void maybe_fail(int64_t b, int64_t nb, void *p)
{
    fail_args *a = p;
    atomic_fetch_add(a->ran, 1);
    if (b == a->bad_block)
        cge_kernel_fail(CGE_ERR_SHAPE, "block %lld of %lld found a bad index", (long long)b,
                        (long long)nb);
}

static void assert_kernel_error(cge_status st, const char *needle)
{
    assert_int_equal(st, CGE_ERR_SHAPE);
    assert_int_equal(cge_last_error_layer(), CGE_LAYER_KERNEL);
    if (!strstr(cge_last_error(), needle))
        fail_msg("'%s' does not contain '%s'", cge_last_error(), needle);
}

static void run_on(int threads)
{
    cge_device *dev = rt_make_device(threads);
    cge_stream *s = rt_make_stream(dev), *other = rt_make_stream(dev);
    atomic_int ran = 0;
    fail_args bad = {.bad_block = 7, .ran = &ran}, good = {.bad_block = -1, .ran = &ran};

    assert_int_equal(cge_launch(s, maybe_fail, 100, &bad, sizeof bad), CGE_OK);
    assert_int_equal(cge_launch(s, maybe_fail, 1, &good, sizeof good), CGE_OK);
    assert_kernel_error(cge_stream_synchronize(s), "[kernel] block 7 of 100 found a bad index");
    assert_int_equal(atomic_load(&ran), 101); /* the rest of the work still ran */
    assert_int_equal(cge_stream_synchronize(s), CGE_OK); /* reported once */
    assert_int_equal(cge_stream_synchronize(other), CGE_OK); /* not another stream's */

    /* The first failure is kept; later ones before the synchronize are dropped. */
    fail_args first = {.bad_block = 0, .ran = &ran}, second = {.bad_block = 0, .ran = &ran};
    assert_int_equal(cge_launch(s, maybe_fail, 1, &first, sizeof first), CGE_OK);
    second.bad_block = 3;
    assert_int_equal(cge_launch(s, maybe_fail, 4, &second, sizeof second), CGE_OK);
    assert_kernel_error(cge_stream_synchronize(s), "block 0 of 1");

    /* A replay reports on the stream it runs on, however often it runs. */
    cge_ri *ri = NULL;
    assert_int_equal(cge_stream_begin_capture(s, CGE_CAPTURE_THREAD_LOCAL), CGE_OK);
    assert_int_equal(cge_launch(s, maybe_fail, 1, &good, sizeof good), CGE_OK);
    assert_int_equal(cge_launch(s, maybe_fail, 50, &bad, sizeof bad), CGE_OK);
    assert_int_equal(cge_stream_end_capture(s, &ri), CGE_OK);
    for (int rep = 0; rep < 3; rep++) {
        assert_int_equal(cge_ri_execute_async(ri, other), CGE_OK);
        assert_kernel_error(cge_stream_synchronize(other), "block 7 of 50");
        assert_int_equal(cge_stream_synchronize(s), CGE_OK);
    }
    assert_kernel_error(cge_ri_execute(ri, -1), "block 7 of 50");
    cge_ri_destroy(ri);

    /* Outside a task: nothing to report to, nothing happens. */
    cge_kernel_fail(CGE_ERR_SHAPE, "not in a kernel");
    assert_int_equal(cge_stream_synchronize(s), CGE_OK);

    cge_stream_destroy(s);
    cge_stream_destroy(other);
    cge_device_destroy(dev);
}

static void test_kernel_fail_two_workers(void **state)
{
    (void)state;
    run_on(2);
}

static void test_kernel_fail_one_worker(void **state)
{
    (void)state;
    run_on(1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_fail_two_workers),
        cmocka_unit_test(test_kernel_fail_one_worker),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
