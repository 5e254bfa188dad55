/* Replay instances after capture: reading and changing recorded tasks
 * (kernel arguments and block counts, copy and fill parameters, host function
 * arguments), structure checks, task groups re-recorded through an update,
 * changes refused while replays are in flight, destroy and the timed execute
 * with replays in flight, and the JSON dump. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "rt_test.h"

enum { BLK = 64 };

typedef struct scale_args {
    const int32_t *in;
    int32_t *out;
    int32_t mul;
    int64_t n;
} scale_args;

/* out = in * mul; block b takes slices b, b + nblocks, ... */
static void scale_kernel(int64_t block, int64_t nblocks, void *args)
{
    const scale_args *p = args;
    for (int64_t lo = block * BLK; lo < p->n; lo += nblocks * BLK)
        for (int64_t i = lo; i < lo + BLK && i < p->n; i++)
            p->out[i] = p->in[i] * p->mul;
}

/* Counts the blocks it ran in `counts[0]` and the block count seen in counts[1]. */
static void count_kernel(int64_t block, int64_t nblocks, void *args)
{
    atomic_int_fast64_t *counts = *(atomic_int_fast64_t **)args;
    atomic_fetch_add(&counts[0], 1);
    atomic_store(&counts[1], nblocks);
}

static void other_kernel(int64_t block, int64_t nblocks, void *args) {}

static void add_host(void *user) { atomic_fetch_add((atomic_int *)user, 1); }
static void sub_host(void *user) { atomic_fetch_sub((atomic_int *)user, 1); }

typedef struct env {
    cge_device *dev;
    cge_stream *s;
    int32_t *a, *b, *c; /* device buffers of N */
    int32_t *h;         /* pinned host buffer of N */
} env;

enum { N = BLK * 5 + 3 };

static int setup(void **state)
{
    env *e = calloc(1, sizeof *e);
    e->dev = rt_make_device(0);
    e->s = rt_make_stream(e->dev);
    assert_int_equal(cge_mem_alloc(e->dev, N * 4, (void **)&e->a), CGE_OK);
    assert_int_equal(cge_mem_alloc(e->dev, N * 4, (void **)&e->b), CGE_OK);
    assert_int_equal(cge_mem_alloc(e->dev, N * 4, (void **)&e->c), CGE_OK);
    assert_int_equal(cge_mem_alloc_host(e->dev, N * 4, (void **)&e->h), CGE_OK);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    env *e = *state;
    cge_stream_destroy(e->s);
    cge_device_destroy(e->dev); /* frees the buffers */
    free(e);
    return 0;
}

/* Records: memset a, scale a->b (x3), copy b->c, host func, copy c->h. */
static cge_ri *capture_pipeline(env *e, atomic_int *host_counter)
{
    assert_int_equal(cge_stream_begin_capture(e->s, CGE_CAPTURE_GLOBAL), CGE_OK);
    assert_int_equal(cge_memset_async(e->s, e->a, 1, N * 4), CGE_OK);
    scale_args sa = {e->a, e->b, 3, N};
    assert_int_equal(cge_launch(e->s, scale_kernel, 2, &sa, sizeof sa), CGE_OK);
    assert_int_equal(cge_memcpy_async(e->s, e->c, e->b, N * 4, CGE_MEMCPY_DEVICE_TO_DEVICE), CGE_OK);
    assert_int_equal(cge_launch_host_func(e->s, add_host, host_counter), CGE_OK);
    assert_int_equal(cge_memcpy_async(e->s, e->h, e->c, N * 4, CGE_MEMCPY_DEVICE_TO_HOST), CGE_OK);
    cge_ri *ri = NULL;
    assert_int_equal(cge_stream_end_capture(e->s, &ri), CGE_OK);
    assert_int_equal(cge_ri_num_tasks(ri), 5);
    return ri;
}

static void test_get_task(void **state)
{
    env *e = *state;
    atomic_int hc = 0;
    cge_ri *ri = capture_pipeline(e, &hc);
    cge_task_params p;
    assert_int_equal(cge_ri_get_task(ri, 0, &p), CGE_OK);
    assert_int_equal(p.kind, CGE_TASK_MEMSET);
    assert_ptr_equal(p.dst, e->a);
    assert_int_equal(p.value, 1);
    assert_int_equal(p.bytes, N * 4);
    assert_int_equal(p.group, -1);
    assert_int_equal(p.stream_index, 0);
    assert_int_equal(cge_ri_get_task(ri, 1, &p), CGE_OK);
    assert_int_equal(p.kind, CGE_TASK_KERNEL);
    assert_true(p.fn == scale_kernel);
    assert_int_equal(p.num_blocks, 2);
    assert_int_equal(p.args_size, sizeof(scale_args));
    const scale_args *ra = p.args;
    assert_ptr_equal(ra->out, e->b);
    assert_int_equal(ra->mul, 3);
    assert_int_equal(cge_ri_get_task(ri, 2, &p), CGE_OK);
    assert_int_equal(p.kind, CGE_TASK_MEMCPY);
    assert_ptr_equal(p.dst, e->c);
    assert_ptr_equal(p.src, e->b);
    assert_int_equal(p.copy_kind, CGE_MEMCPY_DEVICE_TO_DEVICE);
    assert_int_equal(cge_ri_get_task(ri, 3, &p), CGE_OK);
    assert_int_equal(p.kind, CGE_TASK_HOST_FUNC);
    assert_true(p.host_fn == add_host);
    assert_ptr_equal(p.user, &hc);

    assert_rt_error_msg(cge_ri_get_task(ri, 5, &p), CGE_ERR_INVALID_ARG, "there is no task 5");
    assert_rt_error(cge_ri_get_task(ri, -1, &p), CGE_ERR_INVALID_ARG);
    assert_rt_error(cge_ri_get_task(NULL, 0, &p), CGE_ERR_INVALID_ARG);
    assert_rt_error(cge_ri_get_task(ri, 0, NULL), CGE_ERR_INVALID_ARG);

    assert_int_equal(cge_ri_execute(ri, -1), CGE_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(e->h[i], 0x01010101 * 3);
    assert_int_equal(atomic_load(&hc), 1);
    cge_ri_destroy(ri);
}

static void test_set_task(void **state)
{
    env *e = *state;
    atomic_int hc = 0, hc2 = 0;
    cge_ri *ri = capture_pipeline(e, &hc);
    cge_task_params p;

    /* Fill value and kernel arguments change; the replay follows. */
    assert_int_equal(cge_ri_get_task(ri, 0, &p), CGE_OK);
    p.value = 2;
    assert_int_equal(cge_ri_set_task(ri, 0, &p), CGE_OK);
    assert_int_equal(cge_ri_get_task(ri, 1, &p), CGE_OK);
    scale_args sa = *(const scale_args *)p.args;
    sa.mul = -5;
    p.args = &sa;
    p.num_blocks = 7;
    assert_int_equal(cge_ri_set_task(ri, 1, &p), CGE_OK);
    assert_int_equal(cge_ri_get_task(ri, 3, &p), CGE_OK);
    p.user = &hc2;
    assert_int_equal(cge_ri_set_task(ri, 3, &p), CGE_OK);
    assert_int_equal(cge_ri_execute(ri, -1), CGE_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(e->h[i], 0x02020202 * -5);
    assert_int_equal(atomic_load(&hc), 0);
    assert_int_equal(atomic_load(&hc2), 1);

    /* Setting a task to its own parameters (the RI's own argument copy) is fine. */
    assert_int_equal(cge_ri_get_task(ri, 1, &p), CGE_OK);
    assert_int_equal(cge_ri_set_task(ri, 1, &p), CGE_OK);
    assert_int_equal(cge_ri_get_task(ri, 1, &p), CGE_OK);
    assert_int_equal(((const scale_args *)p.args)->mul, -5);
    assert_int_equal(p.num_blocks, 7);

    /* Copy addresses and sizes: copy only the first half of b into c, and c to
     * the host as before. */
    memset(e->c, 0, N * 4);
    assert_int_equal(cge_ri_get_task(ri, 2, &p), CGE_OK);
    p.bytes = (N / 2) * 4;
    assert_int_equal(cge_ri_set_task(ri, 2, &p), CGE_OK);
    assert_int_equal(cge_ri_execute(ri, -1), CGE_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(e->h[i], i < N / 2 ? 0x02020202 * -5 : 0);

    /* Bigger arguments than recorded (up to the launch limit) are taken. */
    assert_int_equal(cge_ri_get_task(ri, 1, &p), CGE_OK);
    unsigned char big[512];
    memset(big, 0, sizeof big);
    memcpy(big, p.args, sizeof(scale_args));
    ((scale_args *)big)->mul = 4;
    p.args = big;
    p.args_size = sizeof big;
    assert_int_equal(cge_ri_set_task(ri, 1, &p), CGE_OK);
    assert_int_equal(cge_ri_execute(ri, -1), CGE_OK);
    assert_int_equal(e->h[0], 0x02020202 * 4);

    /* Structure changes and bad values are refused and leave the task as it was. */
    cge_task_params q;
    assert_int_equal(cge_ri_get_task(ri, 1, &q), CGE_OK);
    q.fn = other_kernel;
    assert_rt_error_msg(cge_ri_set_task(ri, 1, &q), CGE_ERR_INVALID_ARG, "structure");
    assert_int_equal(cge_ri_get_task(ri, 1, &q), CGE_OK);
    q.kind = CGE_TASK_MEMSET;
    assert_rt_error_msg(cge_ri_set_task(ri, 1, &q), CGE_ERR_INVALID_ARG, "structure");
    assert_int_equal(cge_ri_get_task(ri, 1, &q), CGE_OK);
    q.stream_index = 1;
    assert_rt_error(cge_ri_set_task(ri, 1, &q), CGE_ERR_INVALID_ARG);
    assert_int_equal(cge_ri_get_task(ri, 1, &q), CGE_OK);
    q.group = 0;
    assert_rt_error(cge_ri_set_task(ri, 1, &q), CGE_ERR_INVALID_ARG);
    assert_int_equal(cge_ri_get_task(ri, 1, &q), CGE_OK);
    q.num_blocks = 0;
    assert_rt_error_msg(cge_ri_set_task(ri, 1, &q), CGE_ERR_INVALID_ARG, "num_blocks");
    assert_int_equal(cge_ri_get_task(ri, 1, &q), CGE_OK);
    q.args_size = CGE_LAUNCH_MAX_ARGS + 1;
    assert_rt_error_msg(cge_ri_set_task(ri, 1, &q), CGE_ERR_INVALID_ARG, "CGE_LAUNCH_MAX_ARGS");
    assert_int_equal(cge_ri_get_task(ri, 3, &q), CGE_OK);
    q.host_fn = sub_host;
    assert_rt_error_msg(cge_ri_set_task(ri, 3, &q), CGE_ERR_INVALID_ARG, "host function");
    /* A host-side copy address must still be pinned. */
    int32_t *user = malloc(N * 4);
    assert_int_equal(cge_ri_get_task(ri, 4, &q), CGE_OK);
    q.dst = user;
    assert_rt_error_msg(cge_ri_set_task(ri, 4, &q), CGE_ERR_INVALID_ARG, "not pinned");
    assert_int_equal(cge_ri_get_task(ri, 4, &q), CGE_OK);
    assert_ptr_equal(q.dst, e->h);
    free(user);
    assert_int_equal(cge_ri_get_task(ri, 1, &q), CGE_OK);
    assert_int_equal(((const scale_args *)q.args)->mul, 4);
    assert_int_equal(q.args_size, sizeof big);
    assert_rt_error(cge_ri_set_task(ri, 9, &q), CGE_ERR_INVALID_ARG);
    assert_rt_error(cge_ri_set_task(ri, 1, NULL), CGE_ERR_INVALID_ARG);
    assert_rt_error(cge_ri_set_task(NULL, 1, &q), CGE_ERR_INVALID_ARG);
    cge_ri_destroy(ri);
}

/* Block counts: a 1-block kernel becomes a many-block one and back. */
static void test_set_block_count(void **state)
{
    env *e = *state;
    atomic_int_fast64_t counts[2];
    atomic_init(&counts[0], 0);
    atomic_init(&counts[1], 0);
    atomic_int_fast64_t *ptr = counts;
    assert_int_equal(cge_stream_begin_capture(e->s, CGE_CAPTURE_GLOBAL), CGE_OK);
    assert_int_equal(cge_launch(e->s, count_kernel, 1, &ptr, sizeof ptr), CGE_OK);
    cge_ri *ri = NULL;
    assert_int_equal(cge_stream_end_capture(e->s, &ri), CGE_OK);
    assert_int_equal(cge_ri_execute(ri, -1), CGE_OK);
    assert_int_equal(atomic_load(&counts[0]), 1);
    cge_task_params p;
    assert_int_equal(cge_ri_get_task(ri, 0, &p), CGE_OK);
    p.num_blocks = 1000;
    assert_int_equal(cge_ri_set_task(ri, 0, &p), CGE_OK);
    assert_int_equal(cge_ri_execute(ri, -1), CGE_OK);
    assert_int_equal(atomic_load(&counts[0]), 1001);
    assert_int_equal(atomic_load(&counts[1]), 1000);
    cge_ri_destroy(ri);
}

/* A change while a replay is in flight is refused (CGE_ERR_STATE). */
static void test_set_while_in_flight(void **state)
{
    env *e = *state;
    atomic_int hc = 0;
    cge_ri *ri = capture_pipeline(e, &hc);
    rt_gate gate;
    gate_init(&gate);
    assert_int_equal(cge_launch_host_func(e->s, gate_fn, &gate), CGE_OK);
    assert_int_equal(cge_ri_execute_async(ri, e->s), CGE_OK);
    cge_task_params p;
    assert_int_equal(cge_ri_get_task(ri, 0, &p), CGE_OK);
    p.value = 5;
    assert_rt_error_msg(cge_ri_set_task(ri, 0, &p), CGE_ERR_STATE, "in flight");
    /* The timed form gives up while the gate holds the previous replay... */
    assert_rt_error_msg(cge_ri_execute(ri, 0), CGE_ERR_TIMEOUT, "has not finished");
    assert_rt_error_msg(cge_ri_execute(ri, 20), CGE_ERR_TIMEOUT, "has not finished");
    gate_open(&gate);
    /* ...and the replays still complete. */
    assert_int_equal(cge_ri_execute(ri, -1), CGE_OK);
    assert_int_equal(atomic_load(&hc), 4);
    assert_int_equal(cge_ri_set_task(ri, 0, &p), CGE_OK);
    gate_fini(&gate);
    cge_ri_destroy(ri);
}

typedef struct destroy_job {
    cge_ri *ri;
    atomic_int *counter;
    int seen; /* the counter when destroy returned */
} destroy_job;

static void *destroy_thread(void *arg)
{
    destroy_job *j = arg;
    cge_ri_destroy(j->ri);
    j->seen = atomic_load(j->counter);
    return NULL;
}

/* Destroy waits for every replay in flight. */
static void test_destroy_with_replays_in_flight(void **state)
{
    env *e = *state;
    atomic_int hc = 0;
    cge_ri *ri = capture_pipeline(e, &hc);
    cge_stream *s2 = rt_make_stream(e->dev);
    rt_gate gate;
    gate_init(&gate);
    assert_int_equal(cge_launch_host_func(e->s, gate_fn, &gate), CGE_OK);
    for (int r = 0; r < 5; r++)
        assert_int_equal(cge_ri_execute_async(ri, r % 2 ? s2 : e->s), CGE_OK);
    destroy_job job = {ri, &hc, -1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, destroy_thread, &job), 0);
    gate_wait_entered(&gate);
    gate_open(&gate);
    pthread_join(th, NULL);
    assert_int_equal(job.seen, 5);
    assert_int_equal(cge_device_synchronize(e->dev), CGE_OK);
    gate_fini(&gate);
    cge_stream_destroy(s2);
}

/* ---- task groups ------------------------------------------------------------------ */

static void test_task_groups(void **state)
{
    env *e = *state;
    atomic_int hc = 0;
    int32_t g0 = -1, g1 = -1;
    assert_rt_error_msg(cge_stream_begin_task_group(e->s), CGE_ERR_STATE, "not capturing");
    assert_int_equal(cge_stream_begin_capture(e->s, CGE_CAPTURE_GLOBAL), CGE_OK);
    assert_rt_error_msg(cge_stream_end_task_group(e->s, &g0), CGE_ERR_STATE, "no task group open");
    assert_int_equal(cge_memset_async(e->s, e->a, 1, N * 4), CGE_OK);
    assert_int_equal(cge_stream_begin_task_group(e->s), CGE_OK);
    assert_rt_error_msg(cge_stream_begin_task_group(e->s), CGE_ERR_STATE, "do not nest");
    scale_args sa = {e->a, e->b, 2, N};
    assert_int_equal(cge_launch(e->s, scale_kernel, 3, &sa, sizeof sa), CGE_OK);
    assert_int_equal(cge_memcpy_async(e->s, e->h, e->b, N * 4, CGE_MEMCPY_DEVICE_TO_HOST), CGE_OK);
    assert_int_equal(cge_stream_end_task_group(e->s, &g0), CGE_OK);
    assert_int_equal(cge_stream_begin_task_group(e->s), CGE_OK);
    assert_int_equal(cge_launch_host_func(e->s, add_host, &hc), CGE_OK);
    assert_int_equal(cge_stream_end_task_group(e->s, &g1), CGE_OK);
    cge_ri *ri = NULL;
    assert_int_equal(cge_stream_end_capture(e->s, &ri), CGE_OK);
    assert_int_equal(g0, 0);
    assert_int_equal(g1, 1);
    cge_task_params p;
    assert_int_equal(cge_ri_get_task(ri, 1, &p), CGE_OK);
    assert_int_equal(p.group, 0);
    assert_int_equal(cge_ri_get_task(ri, 3, &p), CGE_OK);
    assert_int_equal(p.group, 1);
    assert_int_equal(cge_ri_execute(ri, -1), CGE_OK);
    assert_int_equal(e->h[N - 1], 0x01010101 * 2);

    /* Re-issue group 0 with other arguments and another destination: the
     * submissions are recorded, not run. */
    int32_t *h2 = NULL;
    assert_int_equal(cge_mem_alloc_host(e->dev, N * 4, (void **)&h2), CGE_OK);
    memset(h2, 0, N * 4);
    cge_stream *us = rt_make_stream(e->dev);
    assert_int_equal(cge_ri_update_begin(ri, g0, us), CGE_OK);
    assert_rt_error_msg(cge_ri_update_begin(ri, g1, e->s), CGE_ERR_STATE, "already re-recording");
    scale_args sb = {e->a, e->c, 7, N};
    assert_int_equal(cge_launch(us, scale_kernel, 5, &sb, sizeof sb), CGE_OK);
    assert_int_equal(cge_memcpy_async(us, h2, e->c, N * 4, CGE_MEMCPY_DEVICE_TO_HOST), CGE_OK);
    assert_int_equal(cge_stream_synchronize(us), CGE_OK);
    assert_int_equal(h2[0], 0); /* not run */
    assert_int_equal(cge_ri_update_end(ri), CGE_OK);
    assert_int_equal(cge_ri_execute(ri, -1), CGE_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(h2[i], 0x01010101 * 7);
    assert_int_equal(cge_ri_get_task(ri, 1, &p), CGE_OK);
    assert_int_equal(p.num_blocks, 5);
    assert_int_equal(p.group, 0);
    assert_int_equal(atomic_load(&hc), 2);
    /* The stream runs work again once the update ended. */
    assert_int_equal(cge_memset_async(us, h2, 0, 4), CGE_OK);
    assert_int_equal(cge_stream_synchronize(us), CGE_OK);
    assert_int_equal(h2[0], 0);

    /* A different structure is refused and the RI keeps its tasks. */
    assert_int_equal(cge_ri_update_begin(ri, g0, us), CGE_OK);
    assert_int_equal(cge_launch(us, scale_kernel, 5, &sb, sizeof sb), CGE_OK);
    assert_rt_error_msg(cge_ri_update_end(ri), CGE_ERR_INVALID_ARG, "has 2 tasks but 1 were submitted");
    assert_int_equal(cge_ri_update_begin(ri, g0, us), CGE_OK);
    assert_int_equal(cge_launch(us, other_kernel, 5, &sb, sizeof sb), CGE_OK);
    assert_int_equal(cge_memcpy_async(us, h2, e->c, N * 4, CGE_MEMCPY_DEVICE_TO_HOST), CGE_OK);
    assert_rt_error_msg(cge_ri_update_end(ri), CGE_ERR_INVALID_ARG, "different kernel");
    assert_int_equal(cge_ri_update_begin(ri, g0, us), CGE_OK);
    assert_int_equal(cge_memset_async(us, e->c, 0, 4), CGE_OK);
    assert_int_equal(cge_memcpy_async(us, h2, e->c, N * 4, CGE_MEMCPY_DEVICE_TO_HOST), CGE_OK);
    assert_rt_error_msg(cge_ri_update_end(ri), CGE_ERR_INVALID_ARG, "different kind");
    /* Event tasks cannot enter a group; unpinned copies neither. */
    cge_event *ev = rt_make_event(e->dev);
    assert_int_equal(cge_ri_update_begin(ri, g0, us), CGE_OK);
    assert_rt_error_msg(cge_event_record(ev, us), CGE_ERR_STATE, "task group holds");
    assert_rt_error_msg(cge_ri_update_end(ri), CGE_ERR_STATE, "failed");
    int32_t *user = malloc(N * 4);
    assert_int_equal(cge_ri_update_begin(ri, g0, us), CGE_OK);
    assert_int_equal(cge_launch(us, scale_kernel, 5, &sb, sizeof sb), CGE_OK);
    assert_rt_error_msg(cge_memcpy_async(us, user, e->c, N * 4, CGE_MEMCPY_DEVICE_TO_HOST), CGE_ERR_INVALID_ARG,
                        "not pinned");
    assert_rt_error(cge_ri_update_end(ri), CGE_ERR_STATE);
    free(user);
    assert_rt_error_msg(cge_ri_update_end(ri), CGE_ERR_STATE, "no update in progress");
    assert_rt_error_msg(cge_ri_update_begin(ri, 2, us), CGE_ERR_NOT_FOUND, "no group 2");
    /* Unchanged after all the refusals. */
    memset(h2, 0, N * 4);
    assert_int_equal(cge_ri_execute(ri, -1), CGE_OK);
    assert_int_equal(h2[N - 1], 0x01010101 * 7);

    /* An update in flight while a replay runs cannot be swapped in. */
    rt_gate gate;
    gate_init(&gate);
    assert_int_equal(cge_launch_host_func(e->s, gate_fn, &gate), CGE_OK);
    assert_int_equal(cge_ri_execute_async(ri, e->s), CGE_OK);
    assert_int_equal(cge_ri_update_begin(ri, g1, us), CGE_OK);
    assert_int_equal(cge_launch_host_func(us, add_host, &hc), CGE_OK);
    assert_rt_error_msg(cge_ri_update_end(ri), CGE_ERR_STATE, "in flight");
    gate_open(&gate);
    assert_int_equal(cge_stream_synchronize(e->s), CGE_OK);
    gate_fini(&gate);

    /* Destroying the RI or the stream in the middle of an update is safe. */
    assert_int_equal(cge_ri_update_begin(ri, g1, us), CGE_OK);
    cge_stream_destroy(us);
    assert_rt_error_msg(cge_ri_update_end(ri), CGE_ERR_STATE, "destroyed");
    us = rt_make_stream(e->dev);
    assert_int_equal(cge_ri_update_begin(ri, g1, us), CGE_OK);
    cge_ri_destroy(ri);
    assert_int_equal(cge_launch_host_func(us, add_host, &hc), CGE_OK);
    assert_int_equal(cge_stream_synchronize(us), CGE_OK);
    assert_int_equal(atomic_load(&hc), 5);

    cge_event_destroy(ev);
    cge_stream_destroy(us);
}

/* Event tasks inside a capture's group invalidate it; an open group at the
 * end is an error. */
static void test_group_rules(void **state)
{
    env *e = *state;
    cge_event *ev = rt_make_event(e->dev);
    cge_ri *ri = NULL;
    assert_int_equal(cge_stream_begin_capture(e->s, CGE_CAPTURE_GLOBAL), CGE_OK);
    assert_int_equal(cge_stream_begin_task_group(e->s), CGE_OK);
    assert_rt_error_msg(cge_event_record(ev, e->s), CGE_ERR_STATE, "task group holds");
    assert_rt_error(cge_stream_end_capture(e->s, &ri), CGE_ERR_STATE);
    assert_null(ri);

    assert_int_equal(cge_stream_begin_capture(e->s, CGE_CAPTURE_GLOBAL), CGE_OK);
    assert_int_equal(cge_stream_begin_task_group(e->s), CGE_OK);
    assert_int_equal(cge_memset_async(e->s, e->a, 0, 4), CGE_OK);
    assert_rt_error_msg(cge_stream_end_capture(e->s, &ri), CGE_ERR_STATE, "never ended");
    assert_null(ri);
    cge_event_destroy(ev);
}

/* ---- JSON dump ------------------------------------------------------------------ */

/* Balanced braces and brackets outside strings, no trailing commas. */
static void assert_json_shape(const char *s)
{
    int depth = 0;
    bool in_str = false;
    char last = 0;
    for (const char *c = s; *c; c++) {
        if (in_str) {
            if (*c == '"')
                in_str = false;
            continue;
        }
        if (*c == '"') {
            in_str = true;
        } else if (*c == '{' || *c == '[') {
            depth++;
        } else if (*c == '}' || *c == ']') {
            assert_true(last != ',');
            depth--;
            assert_true(depth >= 0);
        }
        if (*c != ' ' && *c != '\n')
            last = *c;
    }
    assert_false(in_str);
    assert_int_equal(depth, 0);
}

static void test_dump_json(void **state)
{
    env *e = *state;
    cge_stream *s2 = rt_make_stream(e->dev);
    cge_event *fork = rt_make_event(e->dev), *join = rt_make_event(e->dev);
    assert_int_equal(cge_stream_begin_capture(e->s, CGE_CAPTURE_GLOBAL), CGE_OK);
    assert_int_equal(cge_memset_async(e->s, e->a, 7, 16), CGE_OK);
    assert_int_equal(cge_event_record(fork, e->s), CGE_OK);
    assert_int_equal(cge_stream_wait_event(s2, fork), CGE_OK);
    assert_int_equal(cge_stream_begin_task_group(s2), CGE_OK);
    uint32_t args[2] = {0xdeadbeef, 0x01020304};
    assert_int_equal(cge_launch(s2, other_kernel, 3, args, sizeof args), CGE_OK);
    assert_int_equal(cge_stream_end_task_group(s2, NULL), CGE_OK);
    assert_int_equal(cge_event_record(join, s2), CGE_OK);
    assert_int_equal(cge_stream_wait_event(e->s, join), CGE_OK);
    assert_int_equal(cge_memcpy_async(e->s, e->h, e->a, 16, CGE_MEMCPY_DEVICE_TO_HOST), CGE_OK);
    cge_ri *ri = NULL;
    assert_int_equal(cge_stream_end_capture(e->s, &ri), CGE_OK);

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(cge_ri_dump_json(ri, f), CGE_OK);
    fclose(f);
    assert_json_shape(text);
    const char *keys[] = {"\"ri\":", "\"streams\":", "\"tasks\":", "\"events\":", "\"dependencies\":",
                          "\"groups\":", "\"kind\": \"kernel\"", "\"kind\": \"memset\"",
                          "\"kind\": \"memcpy\"", "\"kind\": \"event_record\"", "\"kind\": \"event_wait\"",
                          "\"num_blocks\": 3", "\"args_size\": 8", "\"args\": \"efbeadde04030201\"",
                          "\"value\": 7", "\"copy_kind\": \"device_to_host\"", "\"waits_for\": 1",
                          "\"from_task\": 1", "\"from_stream\": 0", "\"to_stream\": 1", "\"group\": 0"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (!strstr(text, keys[i]))
            fail_msg("JSON dump lacks %s:\n%s", keys[i], text);
    }
    char fn[40];
    snprintf(fn, sizeof fn, "\"fn\": \"%p\"", (void *)(uintptr_t)other_kernel);
    assert_non_null(strstr(text, fn));
    free(text);
    assert_rt_error(cge_ri_dump_json(NULL, stdout), CGE_ERR_INVALID_ARG);
    assert_rt_error(cge_ri_dump_json(ri, NULL), CGE_ERR_INVALID_ARG);

    /* The empty RI dumps as valid JSON too. */
    cge_ri *empty = NULL;
    assert_int_equal(cge_stream_begin_capture(e->s, CGE_CAPTURE_GLOBAL), CGE_OK);
    assert_int_equal(cge_stream_end_capture(e->s, &empty), CGE_OK);
    f = open_memstream(&text, &len);
    assert_int_equal(cge_ri_dump_json(empty, f), CGE_OK);
    fclose(f);
    assert_json_shape(text);
    free(text);
    cge_ri_destroy(empty);
    cge_ri_destroy(ri);
    cge_event_destroy(fork);
    cge_event_destroy(join);
    cge_stream_destroy(s2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_get_task, setup, teardown),
        cmocka_unit_test_setup_teardown(test_set_task, setup, teardown),
        cmocka_unit_test_setup_teardown(test_set_block_count, setup, teardown),
        cmocka_unit_test_setup_teardown(test_set_while_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_destroy_with_replays_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_task_groups, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dump_json, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
