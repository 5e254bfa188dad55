/* The hazard guard: with checking on, writes into memory that a replay in
 * flight reads or writes (asynchronous copies and fills on other streams,
 * synchronous copies and fills, announced host writes) are refused, naming the
 * buffer and the RI; writes ordered after the replay, to other memory, or with
 * checking off pass. Also allocation names and CGE_CHECK_HAZARDS. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "rt_test.h"

enum { N = 1024 };

typedef struct add_args {
    const float *x, *y;
    float *z;
} add_args;

static void add_kernel(int64_t block, int64_t nblocks, void *args)
{
    const add_args *a = args;
    for (int64_t i = block; i < N; i += nblocks)
        a->z[i] = a->x[i] + a->y[i];
}

typedef struct env {
    cge_device *dev;
    cge_stream *s1, *s2;
    float *xh, *yh, *zh, *spare_h; /* pinned host */
    float *xd, *yd, *zd, *spare_d; /* device */
    cge_ri *ri;
    char ri_name[32]; /* "ri#<id>" */
} env;

static void capture_flow(env *e)
{
    const size_t bytes = N * sizeof(float);
    assert_int_equal(cge_stream_begin_capture(e->s1, CGE_CAPTURE_GLOBAL), CGE_OK);
    assert_int_equal(cge_memcpy_async(e->s1, e->xd, e->xh, bytes, CGE_MEMCPY_HOST_TO_DEVICE), CGE_OK);
    assert_int_equal(cge_memcpy_async(e->s1, e->yd, e->yh, bytes, CGE_MEMCPY_HOST_TO_DEVICE), CGE_OK);
    add_args a = {e->xd, e->yd, e->zd};
    assert_int_equal(cge_launch(e->s1, add_kernel, 4, &a, sizeof a), CGE_OK);
    assert_int_equal(cge_memcpy_async(e->s1, e->zh, e->zd, bytes, CGE_MEMCPY_DEVICE_TO_HOST), CGE_OK);
    assert_int_equal(cge_stream_end_capture(e->s1, &e->ri), CGE_OK);
    /* The RI's id, as messages name it, from its JSON dump. */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(cge_ri_dump_json(e->ri, f), CGE_OK);
    fclose(f);
    const char *at = strstr(text, "\"ri\": ");
    assert_non_null(at);
    snprintf(e->ri_name, sizeof e->ri_name, "ri#%lld", atoll(at + 6));
    free(text);
}

static int setup(void **state)
{
    env *e = calloc(1, sizeof *e);
    e->dev = rt_make_device(0);
    e->s1 = rt_make_stream(e->dev);
    e->s2 = rt_make_stream(e->dev);
    const size_t bytes = N * sizeof(float);
    float **host[] = {&e->xh, &e->yh, &e->zh, &e->spare_h};
    float **dev[] = {&e->xd, &e->yd, &e->zd, &e->spare_d};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(cge_mem_alloc_host(e->dev, bytes, (void **)host[i]), CGE_OK);
        assert_int_equal(cge_mem_alloc(e->dev, bytes, (void **)dev[i]), CGE_OK);
        memset(*host[i], 0, bytes);
    }
    assert_int_equal(cge_mem_set_name(e->dev, e->xh, "x_host"), CGE_OK);
    assert_int_equal(cge_mem_set_name(e->dev, e->zh, "z_host"), CGE_OK);
    assert_int_equal(cge_mem_set_name(e->dev, e->zd, "z_dev"), CGE_OK);
    capture_flow(e);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    env *e = *state;
    cge_ri_destroy(e->ri);
    cge_stream_destroy(e->s1);
    cge_stream_destroy(e->s2);
    cge_device_destroy(e->dev);
    free(e);
    return 0;
}

/* The hazard error names the buffer, the RI, and whether the replay reads or writes it. */
#define assert_hazard(call, buffer, access)                                                        \
    do {                                                                                           \
        assert_rt_error_msg(call, CGE_ERR_STATE, "hazard");                                        \
        assert_non_null(strstr(cge_last_error(), buffer));                                         \
        assert_non_null(strstr(cge_last_error(), e->ri_name));                                     \
        assert_non_null(strstr(cge_last_error(), access));                                         \
    } while (0)

static void test_hazards_detected(void **state)
{
    env *e = *state;
    assert_int_equal(cge_device_set_hazard_check(e->dev, true), CGE_OK);
    rt_gate gate;
    gate_init(&gate);
    assert_int_equal(cge_launch_host_func(e->s1, gate_fn, &gate), CGE_OK);
    assert_int_equal(cge_ri_execute_async(e->ri, e->s1), CGE_OK);

    /* Announced host writes into what the replay reads or writes. */
    assert_hazard(cge_mem_host_write(e->dev, e->xh + 10, 8), "'x_host'", "still reads");
    assert_hazard(cge_mem_host_write(e->dev, e->zh, 4), "'z_host'", "still writes");
    char yname[32];
    snprintf(yname, sizeof yname, "buffer %p", (void *)e->yh);
    assert_hazard(cge_mem_host_write(e->dev, e->yh + N - 1, 4), yname, "still reads");
    /* Overlapping the end of a buffer counts. */
    assert_hazard(cge_mem_host_write(e->dev, (char *)e->xh - 4, 8), "'x_host'", "reads");
    /* Asynchronous writes submitted on another stream. */
    assert_hazard(cge_memcpy_async(e->s2, e->xh, e->spare_h, 64, CGE_MEMCPY_HOST_TO_HOST), "'x_host'", "reads");
    assert_non_null(strstr(cge_last_error(), "cge_memcpy_async on stream"));
    assert_hazard(cge_memset_async(e->s2, e->zd, 0, 64), "'z_dev'", "writes");
    assert_hazard(cge_memcpy_async(e->s2, e->yd, e->spare_d, 64, CGE_MEMCPY_DEVICE_TO_DEVICE), "buffer", "writes");
    /* Synchronous writes. */
    assert_hazard(cge_memcpy(e->dev, e->xh, e->spare_h, 16, CGE_MEMCPY_HOST_TO_HOST), "'x_host'", "reads");
    assert_hazard(cge_memset(e->dev, e->yh, 0, 16), yname, "reads");

    /* Not hazards: reads of replay inputs, writes to other memory, and work
     * on the replaying stream (ordered after the replay). Nothing here waits
     * for s2: with one worker the gate holds it. */
    float *half = e->spare_h + N / 2;
    assert_int_equal(cge_mem_host_write(e->dev, e->spare_h, N * sizeof(float)), CGE_OK);
    assert_int_equal(cge_memcpy_async(e->s2, e->spare_h, e->yh, 64, CGE_MEMCPY_HOST_TO_HOST), CGE_OK);
    assert_int_equal(cge_memset_async(e->s2, e->spare_d, 0, 64), CGE_OK);
    assert_int_equal(cge_memset(e->dev, half, 1, 16), CGE_OK);
    assert_int_equal(cge_memcpy_async(e->s1, e->xh, half, 64, CGE_MEMCPY_HOST_TO_HOST), CGE_OK);

    gate_open(&gate);
    assert_int_equal(cge_stream_synchronize(e->s1), CGE_OK);
    assert_int_equal(cge_stream_synchronize(e->s2), CGE_OK);
    /* The replay finished: writing its inputs is fine now. */
    assert_int_equal(cge_mem_host_write(e->dev, e->xh, N * sizeof(float)), CGE_OK);
    assert_int_equal(cge_memcpy_async(e->s2, e->xh, e->spare_h, 64, CGE_MEMCPY_HOST_TO_HOST), CGE_OK);
    assert_int_equal(cge_memset(e->dev, e->yh, 0, 16), CGE_OK);
    assert_int_equal(cge_stream_synchronize(e->s2), CGE_OK);
    gate_fini(&gate);
}

/* Replays in flight on two streams: no stream is exempt. */
static void test_hazard_replays_on_two_streams(void **state)
{
    env *e = *state;
    assert_int_equal(cge_device_set_hazard_check(e->dev, true), CGE_OK);
    rt_gate gate;
    gate_init(&gate);
    assert_int_equal(cge_launch_host_func(e->s1, gate_fn, &gate), CGE_OK);
    assert_int_equal(cge_ri_execute_async(e->ri, e->s1), CGE_OK);
    assert_int_equal(cge_ri_execute_async(e->ri, e->s2), CGE_OK);
    assert_hazard(cge_memcpy_async(e->s1, e->xh, e->spare_h, 64, CGE_MEMCPY_HOST_TO_HOST), "'x_host'", "reads");
    assert_hazard(cge_memcpy_async(e->s2, e->xh, e->spare_h, 64, CGE_MEMCPY_HOST_TO_HOST), "'x_host'", "reads");
    gate_open(&gate);
    assert_int_equal(cge_device_synchronize(e->dev), CGE_OK);
    assert_int_equal(cge_mem_host_write(e->dev, e->xh, 4), CGE_OK);
    gate_fini(&gate);
}

/* A changed copy source moves the guarded range with it. */
static void test_hazard_follows_set_task(void **state)
{
    env *e = *state;
    assert_int_equal(cge_device_set_hazard_check(e->dev, true), CGE_OK);
    cge_task_params p;
    assert_int_equal(cge_ri_get_task(e->ri, 0, &p), CGE_OK);
    p.src = e->spare_h;
    assert_int_equal(cge_ri_set_task(e->ri, 0, &p), CGE_OK);
    rt_gate gate;
    gate_init(&gate);
    assert_int_equal(cge_launch_host_func(e->s1, gate_fn, &gate), CGE_OK);
    assert_int_equal(cge_ri_execute_async(e->ri, e->s1), CGE_OK);
    assert_int_equal(cge_mem_host_write(e->dev, e->xh, 4), CGE_OK);
    char name[32];
    snprintf(name, sizeof name, "buffer %p", (void *)e->spare_h);
    assert_hazard(cge_mem_host_write(e->dev, e->spare_h, 4), name, "reads");
    gate_open(&gate);
    assert_int_equal(cge_stream_synchronize(e->s1), CGE_OK);
    gate_fini(&gate);
}

/* With checking off nothing is refused (and the replay result is right). */
static void test_checking_off(void **state)
{
    env *e = *state;
    assert_int_equal(cge_device_set_hazard_check(e->dev, false), CGE_OK);
    for (int i = 0; i < N; i++)
        e->xh[i] = (float)i, e->yh[i] = 1.0f;
    rt_gate gate;
    gate_init(&gate);
    assert_int_equal(cge_launch_host_func(e->s1, gate_fn, &gate), CGE_OK);
    assert_int_equal(cge_ri_execute_async(e->ri, e->s1), CGE_OK);
    assert_int_equal(cge_mem_host_write(e->dev, e->xh, 4), CGE_OK);
    /* The replay has not started (gated), so this write is safe, but the
     * guard would have refused it. */
    assert_int_equal(cge_memset(e->dev, e->zh, 0, 4), CGE_OK);
    gate_open(&gate);
    assert_int_equal(cge_stream_synchronize(e->s1), CGE_OK);
    for (int i = 0; i < N; i++)
        assert_true(e->zh[i] == (float)i + 1.0f);
    gate_fini(&gate);
}

/* CGE_CHECK_HAZARDS=1 at device creation turns checking on. */
static void test_env_variable(void **state)
{
    setenv("CGE_CHECK_HAZARDS", "1", 1);
    env *e = NULL;
    setup((void **)&e);
    unsetenv("CGE_CHECK_HAZARDS");
    rt_gate gate;
    gate_init(&gate);
    assert_int_equal(cge_launch_host_func(e->s1, gate_fn, &gate), CGE_OK);
    assert_int_equal(cge_ri_execute_async(e->ri, e->s1), CGE_OK);
    assert_hazard(cge_mem_host_write(e->dev, e->xh, 4), "'x_host'", "reads");
    gate_open(&gate);
    assert_int_equal(cge_stream_synchronize(e->s1), CGE_OK);
    gate_fini(&gate);
    teardown((void **)&e);

    /* Without it, a new device does not check. */
    setup((void **)&e);
    gate_init(&gate);
    assert_int_equal(cge_launch_host_func(e->s1, gate_fn, &gate), CGE_OK);
    assert_int_equal(cge_ri_execute_async(e->ri, e->s1), CGE_OK);
    assert_int_equal(cge_mem_host_write(e->dev, e->xh, 4), CGE_OK);
    gate_open(&gate);
    assert_int_equal(cge_stream_synchronize(e->s1), CGE_OK);
    gate_fini(&gate);
    teardown((void **)&e);
}

static void test_names_and_arguments(void **state)
{
    env *e = *state;
    int local = 0;
    assert_rt_error_msg(cge_mem_set_name(e->dev, &local, "x"), CGE_ERR_NOT_FOUND, "not the start");
    assert_rt_error_msg(cge_mem_set_name(e->dev, (char *)e->xd + 4, "x"), CGE_ERR_NOT_FOUND, "not the start");
    assert_rt_error(cge_mem_set_name(NULL, e->xd, "x"), CGE_ERR_INVALID_ARG);
    assert_rt_error(cge_mem_set_name(e->dev, NULL, "x"), CGE_ERR_INVALID_ARG);
    assert_rt_error(cge_mem_host_write(NULL, e->xh, 4), CGE_ERR_INVALID_ARG);
    assert_rt_error(cge_mem_host_write(e->dev, NULL, 4), CGE_ERR_INVALID_ARG);
    assert_int_equal(cge_mem_host_write(e->dev, NULL, 0), CGE_OK);
    assert_rt_error(cge_device_set_hazard_check(NULL, true), CGE_ERR_INVALID_ARG);

    /* Renaming and unnaming (NULL) show in the messages. */
    assert_int_equal(cge_device_set_hazard_check(e->dev, true), CGE_OK);
    assert_int_equal(cge_mem_set_name(e->dev, e->xh, "inputs"), CGE_OK);
    assert_int_equal(cge_mem_set_name(e->dev, e->yh, "y_host"), CGE_OK);
    assert_int_equal(cge_mem_set_name(e->dev, e->yh, NULL), CGE_OK);
    rt_gate gate;
    gate_init(&gate);
    assert_int_equal(cge_launch_host_func(e->s1, gate_fn, &gate), CGE_OK);
    assert_int_equal(cge_ri_execute_async(e->ri, e->s1), CGE_OK);
    assert_hazard(cge_mem_host_write(e->dev, e->xh, 4), "'inputs'", "reads");
    assert_rt_error(cge_mem_host_write(e->dev, e->yh, 4), CGE_ERR_STATE);
    assert_null(strstr(cge_last_error(), "y_host"));
    gate_open(&gate);
    assert_int_equal(cge_stream_synchronize(e->s1), CGE_OK);
    gate_fini(&gate);

    /* A registered range can be named; unregistering forgets the name. */
    char *buf = malloc(256);
    assert_int_equal(cge_mem_register_host(e->dev, buf, 256), CGE_OK);
    assert_int_equal(cge_mem_set_name(e->dev, buf, "registered"), CGE_OK);
    assert_int_equal(cge_mem_unregister_host(e->dev, buf), CGE_OK);
    assert_rt_error(cge_mem_set_name(e->dev, buf, "again"), CGE_ERR_NOT_FOUND);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_hazards_detected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hazard_replays_on_two_streams, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hazard_follows_set_task, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checking_off, setup, teardown),
        cmocka_unit_test(test_env_variable),
        cmocka_unit_test_setup_teardown(test_names_and_arguments, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
