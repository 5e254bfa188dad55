/* Immediate streams: every submission has run when the submit call returns
 * (kernels with one or many blocks, copies, fills, host functions), also from
 * inside a task of a queued stream; failures are reported by synchronize;
 * events, capture and replay are refused. */
#include <stdatomic.h>

#include "rt_test.h"

typedef struct add_args {
    int *data;
    int64_t n;
    int add;
} add_args;

static void add_kernel(int64_t b, int64_t nb, void *p)
{
    add_args *a = p;
    for (int64_t i = b; i < a->n; i += nb)
        a->data[i] += a->add;
}

static void fail_kernel(int64_t b, int64_t nb, void *p)
{
    (void)p;
    if (b == nb - 1)
        cge_kernel_fail(CGE_ERR_SHAPE, "last block %lld failed", (long long)b);
}

static void set_flag(void *user) { atomic_store((atomic_int *)user, 1); }

static void run_immediate_work(cge_device *dev)
{
    cge_stream *s = NULL;
    assert_int_equal(cge_stream_create_immediate(dev, &s), CGE_OK);
    int data[1000], copy[1000];
    for (int i = 0; i < 1000; i++)
        data[i] = i;
    add_args one = {.data = data, .n = 1000, .add = 1};
    assert_int_equal(cge_launch(s, add_kernel, 1, &one, sizeof one), CGE_OK);
    assert_int_equal(data[999], 1000); /* ran before the launch returned */
    add_args many = {.data = data, .n = 1000, .add = 5};
    assert_int_equal(cge_launch(s, add_kernel, 64, &many, sizeof many), CGE_OK);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(data[i], i + 6);
    assert_int_equal(cge_memcpy_async(s, copy, data, sizeof data, CGE_MEMCPY_HOST_TO_HOST), CGE_OK);
    assert_int_equal(copy[500], 506);
    assert_int_equal(cge_memset_async(s, copy, 0, sizeof copy), CGE_OK);
    assert_int_equal(copy[999], 0);
    atomic_int flag = 0;
    assert_int_equal(cge_launch_host_func(s, set_flag, &flag), CGE_OK);
    assert_int_equal(atomic_load(&flag), 1);
    bool idle = false;
    assert_int_equal(cge_stream_query(s, &idle), CGE_OK);
    assert_true(idle);
    assert_int_equal(cge_stream_synchronize(s), CGE_OK);

    /* A failure inside is the immediate stream's, reported once. */
    assert_int_equal(cge_launch(s, fail_kernel, 8, NULL, 0), CGE_OK);
    cge_clear_error();
    assert_int_equal(cge_stream_synchronize(s), CGE_ERR_SHAPE);
    assert_int_equal(cge_last_error_layer(), CGE_LAYER_KERNEL);
    assert_non_null(strstr(cge_last_error(), "last block 7 failed"));
    assert_int_equal(cge_stream_synchronize(s), CGE_OK);
    cge_stream_destroy(s);
}

static void test_immediate_runs_at_once(void **state)
{
    (void)state;
    for (int threads = 1; threads <= 4; threads *= 2) {
        cge_device *dev = rt_make_device(threads);
        run_immediate_work(dev);
        cge_device_destroy(dev);
    }
}

/* From a host function of a queued stream: the nested work runs inline, and
 * its failures stay on the immediate stream, not the queued one. */
typedef struct nested {
    cge_device *dev;
    int data[256];
    cge_status fail_seen;
    atomic_int done;
} nested;

static void nested_host(void *user)
{
    nested *n = user;
    cge_stream *s = NULL;
    if (cge_stream_create_immediate(n->dev, &s) != CGE_OK)
        return;
    add_args a = {.data = n->data, .n = 256, .add = 3};
    for (int k = 0; k < 10; k++)
        cge_launch(s, add_kernel, 16, &a, sizeof a);
    cge_launch(s, fail_kernel, 4, NULL, 0);
    n->fail_seen = cge_stream_synchronize(s);
    cge_stream_destroy(s);
    atomic_store(&n->done, 1);
}

static void test_immediate_inside_task(void **state)
{
    (void)state;
    cge_device *dev = rt_make_device(2);
    cge_stream *q = rt_make_stream(dev);
    nested n = {.dev = dev};
    assert_int_equal(cge_launch_host_func(q, nested_host, &n), CGE_OK);
    assert_int_equal(cge_stream_synchronize(q), CGE_OK); /* the failure was not q's */
    assert_int_equal(atomic_load(&n.done), 1);
    assert_int_equal(n.fail_seen, CGE_ERR_SHAPE);
    for (int i = 0; i < 256; i++)
        assert_int_equal(n.data[i], 30);
    cge_stream_destroy(q);
    cge_device_destroy(dev);
}

static void test_immediate_refusals(void **state)
{
    (void)state;
    cge_device *dev = rt_make_device(2);
    cge_stream *s = NULL, *q = rt_make_stream(dev);
    assert_rt_error(cge_stream_create_immediate(NULL, &s), CGE_ERR_INVALID_ARG);
    assert_int_equal(cge_stream_create_immediate(dev, &s), CGE_OK);
    cge_event *e = NULL;
    assert_int_equal(cge_event_create(dev, &e), CGE_OK);
    assert_rt_error_msg(cge_event_record(e, s), CGE_ERR_UNSUPPORTED, "immediate");
    assert_int_equal(cge_event_record(e, q), CGE_OK);
    assert_rt_error_msg(cge_stream_wait_event(s, e), CGE_ERR_UNSUPPORTED, "immediate");
    assert_rt_error_msg(cge_stream_begin_capture(s, CGE_CAPTURE_RELAXED), CGE_ERR_UNSUPPORTED,
                        "immediate");
    /* A replay cannot go onto it either. */
    assert_int_equal(cge_stream_begin_capture(q, CGE_CAPTURE_RELAXED), CGE_OK);
    atomic_int flag = 0;
    assert_int_equal(cge_launch_host_func(q, set_flag, &flag), CGE_OK);
    cge_ri *ri = NULL;
    assert_int_equal(cge_stream_end_capture(q, &ri), CGE_OK);
    assert_rt_error_msg(cge_ri_execute_async(ri, s), CGE_ERR_UNSUPPORTED, "immediate");
    assert_int_equal(atomic_load(&flag), 0);
    cge_ri_destroy(ri);
    cge_event_destroy(e);
    cge_stream_destroy(s);
    cge_stream_destroy(q);
    cge_device_destroy(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_immediate_runs_at_once),
        cmocka_unit_test(test_immediate_inside_task),
        cmocka_unit_test(test_immediate_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
