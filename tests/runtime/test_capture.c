/* Capture and replay: single- and multi-stream recordings replayed with new
 * inputs (also on other streams than the capture's), fork/join through events,
 * replays of one RI serialised across streams, every call refused during a
 * capture (and the invalidation it causes), capture modes across threads,
 * pinned host memory in captured copies, and teardown while capturing. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "rt_test.h"

enum { BLK = 256 };

typedef struct axpy_args {
    const float *x, *y;
    float *z;
    float a;
    int64_t n;
} axpy_args;

/* z = a*x + y over one slice of BLK per block. */
static void axpy_kernel(int64_t block, int64_t nblocks, void *args)
{
    const axpy_args *p = args;
    int64_t lo = block * BLK, hi = lo + BLK < p->n ? lo + BLK : p->n;
    for (int64_t i = lo; i < hi; i++)
        p->z[i] = p->a * p->x[i] + p->y[i];
}

typedef struct counter_args {
    int64_t *value;
} counter_args;

/* Deliberately not atomic: two overlapping replays would race (TSan) and
 * could lose increments. */
static void bump_kernel(int64_t block, int64_t nblocks, void *args)
{
    counter_args *c = args;
    *c->value = *c->value + 1;
}

typedef struct env {
    cge_device *dev;
    cge_stream *s;
} env;

static int setup(void **state)
{
    env *e = calloc(1, sizeof *e);
    e->dev = rt_make_device(0);
    e->s = rt_make_stream(e->dev);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    env *e = *state;
    cge_stream_destroy(e->s);
    cge_device_destroy(e->dev);
    free(e);
    return 0;
}

static cge_capture_status cap_status(cge_stream *s)
{
    cge_capture_status st = CGE_CAPTURE_NONE;
    assert_int_equal(cge_stream_capture_status(s, &st), CGE_OK);
    return st;
}

/* ---- single stream ------------------------------------------------------------ */

/* The classic flow: H2D x, H2D y, a multi-block kernel, D2H z, captured once
 * and replayed with new values in the same host buffers; replays also go to a
 * stream that did not capture. */
static void test_single_stream_replay(void **state)
{
    env *e = *state;
    enum { N = BLK * 12 + 17 };
    const size_t bytes = N * sizeof(float);
    float *xh, *yh, *zh, *xd, *yd, *zd;
    assert_int_equal(cge_mem_alloc_host(e->dev, bytes, (void **)&xh), CGE_OK);
    assert_int_equal(cge_mem_alloc_host(e->dev, bytes, (void **)&yh), CGE_OK);
    assert_int_equal(cge_mem_alloc_host(e->dev, bytes, (void **)&zh), CGE_OK);
    assert_int_equal(cge_mem_alloc(e->dev, bytes, (void **)&xd), CGE_OK);
    assert_int_equal(cge_mem_alloc(e->dev, bytes, (void **)&yd), CGE_OK);
    assert_int_equal(cge_mem_alloc(e->dev, bytes, (void **)&zd), CGE_OK);
    for (int i = 0; i < N; i++)
        zh[i] = -1.0f;

    assert_int_equal(cap_status(e->s), CGE_CAPTURE_NONE);
    assert_int_equal(cge_stream_begin_capture(e->s, CGE_CAPTURE_GLOBAL), CGE_OK);
    assert_int_equal(cap_status(e->s), CGE_CAPTURE_ACTIVE);
    assert_int_equal(cge_memcpy_async(e->s, xd, xh, bytes, CGE_MEMCPY_HOST_TO_DEVICE), CGE_OK);
    assert_int_equal(cge_memcpy_async(e->s, yd, yh, bytes, CGE_MEMCPY_HOST_TO_DEVICE), CGE_OK);
    axpy_args a = {xd, yd, zd, 3.0f, N};
    assert_int_equal(cge_launch(e->s, axpy_kernel, (N + BLK - 1) / BLK, &a, sizeof a), CGE_OK);
    a.a = 1000.0f; /* the RI keeps its own copy of the arguments */
    assert_int_equal(cge_memcpy_async(e->s, zh, zd, bytes, CGE_MEMCPY_DEVICE_TO_HOST), CGE_OK);
    cge_ri *ri = NULL;
    assert_int_equal(cge_stream_end_capture(e->s, &ri), CGE_OK);
    assert_non_null(ri);
    assert_int_equal(cap_status(e->s), CGE_CAPTURE_NONE);
    assert_int_equal(cge_ri_num_tasks(ri), 4);

    /* Nothing ran during the capture. */
    assert_int_equal(cge_stream_synchronize(e->s), CGE_OK);
    assert_true(zh[0] == -1.0f);

    cge_stream *other = rt_make_stream(e->dev);
    for (int r = 0; r < 6; r++) {
        for (int i = 0; i < N; i++) {
            xh[i] = (float)(i % 97) + (float)r;
            yh[i] = (float)r * 0.5f - (float)(i % 5);
        }
        cge_stream *on = r % 2 ? other : e->s;
        assert_int_equal(cge_ri_execute_async(ri, on), CGE_OK);
        assert_int_equal(cge_stream_synchronize(on), CGE_OK);
        for (int i = 0; i < N; i++)
            assert_true(zh[i] == 3.0f * ((float)(i % 97) + (float)r) + ((float)r * 0.5f - (float)(i % 5)));
    }
    /* The blocking form, on the RI's own stream. */
    for (int i = 0; i < N; i++)
        xh[i] = 1.0f, yh[i] = 2.0f;
    assert_int_equal(cge_ri_execute(ri, -1), CGE_OK);
    for (int i = 0; i < N; i++)
        assert_true(zh[i] == 5.0f);

    cge_ri_destroy(ri);
    cge_ri_destroy(NULL);
    cge_stream_destroy(other);
    cge_mem_free(e->dev, xd);
    cge_mem_free(e->dev, yd);
    cge_mem_free(e->dev, zd);
    cge_mem_free_host(e->dev, xh);
    cge_mem_free_host(e->dev, yh);
    cge_mem_free_host(e->dev, zh);
}

/* An empty capture gives an RI that replays to nothing. */
static void test_empty_capture(void **state)
{
    env *e = *state;
    cge_ri *ri = NULL;
    assert_int_equal(cge_stream_begin_capture(e->s, CGE_CAPTURE_RELAXED), CGE_OK);
    assert_int_equal(cge_stream_end_capture(e->s, &ri), CGE_OK);
    assert_non_null(ri);
    assert_int_equal(cge_ri_num_tasks(ri), 0);
    assert_int_equal(cge_ri_execute_async(ri, e->s), CGE_OK);
    assert_int_equal(cge_ri_execute(ri, -1), CGE_OK);
    assert_int_equal(cge_stream_synchronize(e->s), CGE_OK);
    cge_ri_destroy(ri);
}

/* ---- several streams ----------------------------------------------------------- */

typedef struct step_args {
    const int64_t *in;
    int64_t *out;
    int64_t mul, add;
    int64_t n;
} step_args;

/* Any block count: block b takes slices b, b + nblocks, ... */
static void step_kernel(int64_t block, int64_t nblocks, void *args)
{
    const step_args *p = args;
    for (int64_t lo = block * BLK; lo < p->n; lo += nblocks * BLK) {
        int64_t hi = lo + BLK < p->n ? lo + BLK : p->n;
        for (int64_t i = lo; i < hi; i++)
            p->out[i] = p->in[i] * p->mul + p->add;
    }
}

typedef struct sum_args {
    const int64_t *a, *b;
    int64_t *out;
    int64_t n;
} sum_args;

static void sum_kernel(int64_t block, int64_t nblocks, void *args)
{
    const sum_args *p = args;
    int64_t lo = block * BLK, hi = lo + BLK < p->n ? lo + BLK : p->n;
    for (int64_t i = lo; i < hi; i++)
        p->out[i] = p->a[i] + p->b[i];
}

/* Fork/join: the origin copies the input, forks two branches to two other
 * streams through an event, each branch transforms it, and the origin joins
 * both and sums them. Replays with new inputs keep every dependency. */
static void test_fork_join(void **state)
{
    env *e = *state;
    enum { N = BLK * 6 };
    const size_t bytes = N * sizeof(int64_t);
    cge_stream *s2 = rt_make_stream(e->dev), *s3 = rt_make_stream(e->dev), *s4 = rt_make_stream(e->dev);
    cge_event *fork = rt_make_event(e->dev), *j2 = rt_make_event(e->dev), *j3 = rt_make_event(e->dev);
    int64_t *in_h, *out_h, *in_d, *b2, *b3, *sum;
    assert_int_equal(cge_mem_alloc_host(e->dev, bytes, (void **)&in_h), CGE_OK);
    assert_int_equal(cge_mem_alloc_host(e->dev, bytes, (void **)&out_h), CGE_OK);
    assert_int_equal(cge_mem_alloc(e->dev, bytes, (void **)&in_d), CGE_OK);
    assert_int_equal(cge_mem_alloc(e->dev, bytes, (void **)&b2), CGE_OK);
    assert_int_equal(cge_mem_alloc(e->dev, bytes, (void **)&b3), CGE_OK);
    assert_int_equal(cge_mem_alloc(e->dev, bytes, (void **)&sum), CGE_OK);

    assert_int_equal(cge_stream_begin_capture(e->s, CGE_CAPTURE_GLOBAL), CGE_OK);
    assert_int_equal(cge_memcpy_async(e->s, in_d, in_h, bytes, CGE_MEMCPY_HOST_TO_DEVICE), CGE_OK);
    assert_int_equal(cge_event_record(fork, e->s), CGE_OK);
    assert_int_equal(cap_status(s2), CGE_CAPTURE_NONE);
    assert_int_equal(cge_stream_wait_event(s2, fork), CGE_OK);
    assert_int_equal(cap_status(s2), CGE_CAPTURE_ACTIVE); /* joined */
    assert_int_equal(cge_stream_wait_event(s3, fork), CGE_OK);
    step_args a2 = {in_d, b2, 3, 1, N}, a3 = {in_d, b3, -2, 7, N};
    assert_int_equal(cge_launch(s2, step_kernel, N / BLK, &a2, sizeof a2), CGE_OK);
    assert_int_equal(cge_launch(s3, step_kernel, 1, &a3, sizeof a3), CGE_OK);
    a3.n = 0;
    assert_int_equal(cge_event_record(j2, s2), CGE_OK);
    assert_int_equal(cge_event_record(j3, s3), CGE_OK);
    assert_int_equal(cge_stream_wait_event(e->s, j2), CGE_OK);
    assert_int_equal(cge_stream_wait_event(e->s, j3), CGE_OK);
    sum_args sa = {b2, b3, sum, N};
    assert_int_equal(cge_launch(e->s, sum_kernel, N / BLK, &sa, sizeof sa), CGE_OK);
    assert_int_equal(cge_memcpy_async(e->s, out_h, sum, bytes, CGE_MEMCPY_DEVICE_TO_HOST), CGE_OK);
    /* A joined stream cannot end the capture. */
    cge_ri *ri = NULL;
    assert_rt_error_msg(cge_stream_end_capture(s2, &ri), CGE_ERR_STATE, "end it on stream");
    assert_int_equal(cge_stream_end_capture(e->s, &ri), CGE_OK);
    assert_non_null(ri);
    assert_int_equal(cap_status(s2), CGE_CAPTURE_NONE);
    assert_int_equal(cap_status(s3), CGE_CAPTURE_NONE);
    /* copy, record, 2 waits, 2 kernels, 2 records, 2 waits, kernel, copy */
    assert_int_equal(cge_ri_num_tasks(ri), 12);
    cge_task_params p;
    int streams_seen[3] = {0};
    for (int32_t i = 0; i < cge_ri_num_tasks(ri); i++) {
        assert_int_equal(cge_ri_get_task(ri, i, &p), CGE_OK);
        assert_true(p.stream_index >= 0 && p.stream_index < 3);
        streams_seen[p.stream_index]++;
    }
    assert_int_equal(streams_seen[0], 6);
    assert_int_equal(streams_seen[1], 3);
    assert_int_equal(streams_seen[2], 3);

    /* The events are usable outside again. */
    assert_int_equal(cge_event_synchronize(fork), CGE_OK);

    cge_stream *on[3] = {e->s, s4, s2};
    for (int r = 0; r < 6; r++) {
        for (int i = 0; i < N; i++)
            in_h[i] = i * (r + 1) - 50;
        assert_int_equal(cge_ri_execute_async(ri, on[r % 3]), CGE_OK);
        assert_int_equal(cge_stream_synchronize(on[r % 3]), CGE_OK);
        for (int i = 0; i < N; i++) {
            int64_t v = i * (r + 1) - 50;
            assert_int_equal(out_h[i], (v * 3 + 1) + (v * -2 + 7));
        }
    }
    cge_ri_destroy(ri);
    cge_event_destroy(fork);
    cge_event_destroy(j2);
    cge_event_destroy(j3);
    cge_stream_destroy(s2);
    cge_stream_destroy(s3);
    cge_stream_destroy(s4);
    cge_mem_free_host(e->dev, in_h);
    cge_mem_free_host(e->dev, out_h);
    cge_mem_free(e->dev, in_d);
    cge_mem_free(e->dev, b2);
    cge_mem_free(e->dev, b3);
    cge_mem_free(e->dev, sum);
}

/* A forked stream whose last work the origin never waits on: no RI. */
static void test_fork_not_joined(void **state)
{
    env *e = *state;
    cge_stream *s2 = rt_make_stream(e->dev);
    cge_event *fork = rt_make_event(e->dev), *j = rt_make_event(e->dev);
    int64_t v = 0;
    counter_args c = {&v};
    assert_int_equal(cge_stream_begin_capture(e->s, CGE_CAPTURE_GLOBAL), CGE_OK);
    assert_int_equal(cge_event_record(fork, e->s), CGE_OK);
    assert_int_equal(cge_stream_wait_event(s2, fork), CGE_OK);
    assert_int_equal(cge_event_record(j, s2), CGE_OK);
    assert_int_equal(cge_stream_wait_event(e->s, j), CGE_OK);
    /* Work after the join point is not joined. */
    assert_int_equal(cge_launch(s2, bump_kernel, 1, &c, sizeof c), CGE_OK);
    cge_ri *ri = (cge_ri *)&v;
    assert_rt_error_msg(cge_stream_end_capture(e->s, &ri), CGE_ERR_STATE, "has not joined back");
    assert_null(ri);
    assert_int_equal(cap_status(s2), CGE_CAPTURE_NONE);
    assert_int_equal(cap_status(e->s), CGE_CAPTURE_NONE);
    /* Both streams work normally again. */
    assert_int_equal(cge_launch(s2, bump_kernel, 1, &c, sizeof c), CGE_OK);
    assert_int_equal(cge_stream_synchronize(s2), CGE_OK);
    assert_int_equal(v, 1);

    /* Joined through a chain (s3 -> s2 -> origin) counts as joined. */
    cge_stream *s3 = rt_make_stream(e->dev);
    cge_event *j3 = rt_make_event(e->dev);
    assert_int_equal(cge_stream_begin_capture(e->s, CGE_CAPTURE_GLOBAL), CGE_OK);
    assert_int_equal(cge_event_record(fork, e->s), CGE_OK);
    assert_int_equal(cge_stream_wait_event(s2, fork), CGE_OK);
    assert_int_equal(cge_stream_wait_event(s3, fork), CGE_OK);
    assert_int_equal(cge_launch(s3, bump_kernel, 1, &c, sizeof c), CGE_OK);
    assert_int_equal(cge_event_record(j3, s3), CGE_OK);
    assert_int_equal(cge_stream_wait_event(s2, j3), CGE_OK);
    assert_int_equal(cge_launch(s2, bump_kernel, 1, &c, sizeof c), CGE_OK);
    assert_int_equal(cge_event_record(j, s2), CGE_OK);
    assert_int_equal(cge_stream_wait_event(e->s, j), CGE_OK);
    assert_int_equal(cge_stream_end_capture(e->s, &ri), CGE_OK);
    assert_non_null(ri);
    assert_int_equal(cge_ri_execute(ri, -1), CGE_OK);
    assert_int_equal(v, 3);
    cge_ri_destroy(ri);

    cge_event_destroy(fork);
    cge_event_destroy(j);
    cge_event_destroy(j3);
    cge_stream_destroy(s2);
    cge_stream_destroy(s3);
}

/* Replays of one RI never overlap, whichever streams they are submitted to:
 * the recorded kernel's unsynchronised increment counts every replay (and
 * TSan would see overlapping replays as a race). */
static void test_replays_serialised(void **state)
{
    env *e = *state;
    cge_stream *s[3] = {e->s, rt_make_stream(e->dev), rt_make_stream(e->dev)};
    int64_t v = 0;
    counter_args c = {&v};
    cge_stream *cap = rt_make_stream(e->dev);
    assert_int_equal(cge_stream_begin_capture(cap, CGE_CAPTURE_RELAXED), CGE_OK);
    for (int k = 0; k < 4; k++)
        assert_int_equal(cge_launch(cap, bump_kernel, 1, &c, sizeof c), CGE_OK);
    cge_ri *ri = NULL;
    assert_int_equal(cge_stream_end_capture(cap, &ri), CGE_OK);

    /* A gate holds the first replay: later replays on other streams must
     * still come after it, so all of them see the gate open. */
    rt_gate gate;
    gate_init(&gate);
    assert_int_equal(cge_launch_host_func(s[0], gate_fn, &gate), CGE_OK);
    for (int r = 0; r < 30; r++)
        assert_int_equal(cge_ri_execute_async(ri, s[r % 3]), CGE_OK);
    gate_wait_entered(&gate);
    bool idle = true;
    assert_int_equal(cge_stream_query(s[1], &idle), CGE_OK);
    assert_false(idle);
    gate_open(&gate);
    assert_int_equal(cge_device_synchronize(e->dev), CGE_OK);
    assert_int_equal(v, 30 * 4);
    gate_fini(&gate);
    cge_ri_destroy(ri);
    cge_stream_destroy(s[1]);
    cge_stream_destroy(s[2]);
    cge_stream_destroy(cap);
}

/* ---- refused calls ------------------------------------------------------------ */

static void begin_with_work(env *e, cge_capture_mode mode, int64_t *v)
{
    static _Thread_local counter_args c;
    c.value = v;
    assert_int_equal(cge_stream_begin_capture(e->s, mode), CGE_OK);
    assert_int_equal(cge_launch(e->s, bump_kernel, 1, &c, sizeof c), CGE_OK);
}

/* The capture is invalidated: further work is refused, end gives no RI and
 * says why, and the stream is usable again afterwards. */
static void expect_invalidated(env *e, const char *why)
{
    assert_int_equal(cap_status(e->s), CGE_CAPTURE_INVALIDATED);
    int64_t w = 0;
    counter_args c = {&w};
    assert_rt_error_msg(cge_launch(e->s, bump_kernel, 1, &c, sizeof c), CGE_ERR_STATE, "invalidated");
    cge_ri *ri = NULL;
    assert_rt_error_msg(cge_stream_end_capture(e->s, &ri), CGE_ERR_STATE, "invalidated");
    assert_non_null(strstr(cge_last_error(), why));
    assert_null(ri);
    assert_int_equal(cap_status(e->s), CGE_CAPTURE_NONE);
    assert_int_equal(cge_stream_synchronize(e->s), CGE_OK);
}

static void test_prohibited_calls(void **state)
{
    env *e = *state;
    int64_t v = 0;
    cge_stream *s2 = rt_make_stream(e->dev);
    cge_event *ev = rt_make_event(e->dev), *cev = rt_make_event(e->dev);
    void *mem = NULL, *host = NULL;
    assert_int_equal(cge_mem_alloc(e->dev, 64, &mem), CGE_OK);
    assert_int_equal(cge_mem_alloc_host(e->dev, 64, &host), CGE_OK);
    char buf[64];
    bool flag;

    begin_with_work(e, CGE_CAPTURE_GLOBAL, &v);
    assert_rt_error_msg(cge_stream_synchronize(e->s), CGE_ERR_STATE, "stream synchronize is not allowed");
    expect_invalidated(e, "stream synchronize");

    begin_with_work(e, CGE_CAPTURE_GLOBAL, &v);
    assert_rt_error_msg(cge_stream_query(e->s, &flag), CGE_ERR_STATE, "stream query is not allowed");
    expect_invalidated(e, "stream query");

    /* Another (not capturing) stream: refused in global mode. */
    begin_with_work(e, CGE_CAPTURE_GLOBAL, &v);
    assert_rt_error_msg(cge_stream_synchronize(s2), CGE_ERR_STATE, "global mode");
    expect_invalidated(e, "stream synchronize");

    begin_with_work(e, CGE_CAPTURE_GLOBAL, &v);
    assert_int_equal(cge_event_record(cev, e->s), CGE_OK);
    assert_rt_error_msg(cge_event_query(cev, &flag), CGE_ERR_STATE, "event query is not allowed");
    expect_invalidated(e, "event query");

    begin_with_work(e, CGE_CAPTURE_GLOBAL, &v);
    assert_int_equal(cge_event_record(cev, e->s), CGE_OK);
    assert_rt_error_msg(cge_event_synchronize(cev), CGE_ERR_STATE, "event synchronize is not allowed");
    expect_invalidated(e, "event synchronize");

    begin_with_work(e, CGE_CAPTURE_GLOBAL, &v);
    assert_rt_error_msg(cge_event_synchronize(ev), CGE_ERR_STATE, "not allowed");
    expect_invalidated(e, "event synchronize");

    begin_with_work(e, CGE_CAPTURE_GLOBAL, &v);
    assert_rt_error_msg(cge_device_synchronize(e->dev), CGE_ERR_STATE, "device synchronize is not allowed");
    expect_invalidated(e, "device synchronize");

    begin_with_work(e, CGE_CAPTURE_GLOBAL, &v);
    assert_rt_error_msg(cge_memcpy(e->dev, buf, host, 8, CGE_MEMCPY_HOST_TO_HOST), CGE_ERR_STATE,
                        "synchronous copy");
    expect_invalidated(e, "cge_memcpy");

    begin_with_work(e, CGE_CAPTURE_GLOBAL, &v);
    assert_rt_error_msg(cge_memset(e->dev, mem, 0, 8), CGE_ERR_STATE, "synchronous fill");
    expect_invalidated(e, "cge_memset");

    void *p = NULL;
    begin_with_work(e, CGE_CAPTURE_GLOBAL, &v);
    assert_rt_error_msg(cge_mem_alloc(e->dev, 64, &p), CGE_ERR_STATE, "cge_mem_alloc is not allowed");
    assert_null(p);
    expect_invalidated(e, "cge_mem_alloc");

    begin_with_work(e, CGE_CAPTURE_GLOBAL, &v);
    assert_rt_error_msg(cge_mem_free(e->dev, mem), CGE_ERR_STATE, "cge_mem_free is not allowed");
    expect_invalidated(e, "cge_mem_free");

    begin_with_work(e, CGE_CAPTURE_GLOBAL, &v);
    assert_rt_error_msg(cge_mem_alloc_host(e->dev, 64, &p), CGE_ERR_STATE, "not allowed");
    expect_invalidated(e, "cge_mem_alloc_host");

    begin_with_work(e, CGE_CAPTURE_GLOBAL, &v);
    assert_rt_error_msg(cge_mem_free_host(e->dev, host), CGE_ERR_STATE, "not allowed");
    expect_invalidated(e, "cge_mem_free_host");

    begin_with_work(e, CGE_CAPTURE_GLOBAL, &v);
    assert_rt_error_msg(cge_ri_execute_async((cge_ri *)NULL, e->s), CGE_ERR_INVALID_ARG, "ri is NULL");
    assert_int_equal(cap_status(e->s), CGE_CAPTURE_ACTIVE); /* argument errors do not invalidate */
    cge_ri *ri = NULL;
    assert_int_equal(cge_stream_end_capture(e->s, &ri), CGE_OK);
    /* Replaying into a capturing stream is refused too. */
    begin_with_work(e, CGE_CAPTURE_RELAXED, &v);
    assert_rt_error_msg(cge_ri_execute_async(ri, e->s), CGE_ERR_STATE, "while it is capturing");
    expect_invalidated(e, "cannot be replayed");
    cge_ri_destroy(ri);

    /* Nothing captured ran, and the memory is intact: refused calls did nothing. */
    assert_int_equal(v, 0);
    assert_int_equal(cge_mem_free(e->dev, mem), CGE_OK);
    assert_int_equal(cge_mem_free_host(e->dev, host), CGE_OK);
    cge_event_destroy(ev);
    cge_event_destroy(cev);
    cge_stream_destroy(s2);
}

/* Relaxed mode refuses only calls on the capturing streams themselves (and
 * their captured events, and the device-wide synchronize). */
static void test_relaxed_mode(void **state)
{
    env *e = *state;
    int64_t v = 0;
    cge_stream *s2 = rt_make_stream(e->dev);
    begin_with_work(e, CGE_CAPTURE_RELAXED, &v);
    void *p = NULL;
    assert_int_equal(cge_mem_alloc(e->dev, 64, &p), CGE_OK);
    char buf[8] = {0};
    assert_int_equal(cge_memset(e->dev, p, 1, 8), CGE_OK);
    assert_int_equal(cge_memcpy(e->dev, buf, p, 8, CGE_MEMCPY_DEVICE_TO_HOST), CGE_OK);
    assert_int_equal(buf[7], 1);
    assert_int_equal(cge_mem_free(e->dev, p), CGE_OK);
    assert_int_equal(cge_stream_synchronize(s2), CGE_OK);
    assert_int_equal(cap_status(e->s), CGE_CAPTURE_ACTIVE);
    cge_ri *ri = NULL;
    assert_int_equal(cge_stream_end_capture(e->s, &ri), CGE_OK);
    cge_ri_destroy(ri);

    begin_with_work(e, CGE_CAPTURE_RELAXED, &v);
    assert_rt_error_msg(cge_stream_synchronize(e->s), CGE_ERR_STATE, "capturing");
    expect_invalidated(e, "stream synchronize");
    cge_stream_destroy(s2);
}

typedef struct thread_call {
    cge_device *dev;
    cge_status st;
    char msg[512];
} thread_call;

static void *alloc_in_thread(void *arg)
{
    thread_call *t = arg;
    void *p = NULL;
    t->st = cge_mem_alloc(t->dev, 32, &p);
    snprintf(t->msg, sizeof t->msg, "%s", cge_last_error());
    if (t->st == CGE_OK)
        cge_mem_free(t->dev, p);
    return NULL;
}

static cge_status alloc_from_other_thread(cge_device *dev, char *msg, size_t cap)
{
    thread_call t = {.dev = dev};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, alloc_in_thread, &t), 0);
    pthread_join(th, NULL);
    snprintf(msg, cap, "%s", t.msg);
    return t.st;
}

/* Global mode refuses unsafe calls from every thread; thread-local only from
 * the thread that began the capture. */
static void test_modes_across_threads(void **state)
{
    env *e = *state;
    int64_t v = 0;
    char msg[512];
    begin_with_work(e, CGE_CAPTURE_GLOBAL, &v);
    assert_int_equal(alloc_from_other_thread(e->dev, msg, sizeof msg), CGE_ERR_STATE);
    assert_non_null(strstr(msg, "global mode"));
    expect_invalidated(e, "cge_mem_alloc");

    begin_with_work(e, CGE_CAPTURE_THREAD_LOCAL, &v);
    assert_int_equal(alloc_from_other_thread(e->dev, msg, sizeof msg), CGE_OK);
    assert_int_equal(cap_status(e->s), CGE_CAPTURE_ACTIVE);
    void *p = NULL;
    assert_rt_error_msg(cge_mem_alloc(e->dev, 16, &p), CGE_ERR_STATE, "thread-local mode");
    expect_invalidated(e, "cge_mem_alloc");

    /* After the capture ended, this thread may allocate again. */
    assert_int_equal(cge_mem_alloc(e->dev, 16, &p), CGE_OK);
    assert_int_equal(cge_mem_free(e->dev, p), CGE_OK);
    assert_int_equal(v, 0);
}

/* ---- recording rules ----------------------------------------------------------- */

static void test_pinned_host_memory(void **state)
{
    env *e = *state;
    enum { N = 256 };
    char *user = malloc(N), *pinned = NULL, *dev_buf = NULL;
    char *reg = malloc(N);
    assert_int_equal(cge_mem_alloc_host(e->dev, N, (void **)&pinned), CGE_OK);
    assert_int_equal(cge_mem_alloc(e->dev, N, (void **)&dev_buf), CGE_OK);
    memset(user, 7, N);

    /* Outside a capture, async copies from user memory are fine. */
    assert_int_equal(cge_memcpy_async(e->s, dev_buf, user, N, CGE_MEMCPY_HOST_TO_DEVICE), CGE_OK);
    assert_int_equal(cge_stream_synchronize(e->s), CGE_OK);
    assert_int_equal(dev_buf[N - 1], 7);

    char name[32];
    snprintf(name, sizeof name, "%p", (void *)user);
    assert_int_equal(cge_stream_begin_capture(e->s, CGE_CAPTURE_GLOBAL), CGE_OK);
    assert_rt_error_msg(cge_memcpy_async(e->s, dev_buf, user, N, CGE_MEMCPY_HOST_TO_DEVICE), CGE_ERR_INVALID_ARG,
                        "not pinned");
    assert_non_null(strstr(cge_last_error(), name));
    expect_invalidated(e, "not pinned");

    assert_int_equal(cge_stream_begin_capture(e->s, CGE_CAPTURE_GLOBAL), CGE_OK);
    assert_rt_error_msg(cge_memcpy_async(e->s, user, dev_buf, N, CGE_MEMCPY_DEVICE_TO_HOST), CGE_ERR_INVALID_ARG,
                        "destination");
    expect_invalidated(e, "not pinned");

    /* A partly pinned range is not pinned. */
    assert_int_equal(cge_stream_begin_capture(e->s, CGE_CAPTURE_GLOBAL), CGE_OK);
    assert_rt_error_msg(cge_memcpy_async(e->s, dev_buf, pinned + 1, N, CGE_MEMCPY_HOST_TO_DEVICE),
                        CGE_ERR_INVALID_ARG, "not pinned");
    expect_invalidated(e, "not pinned");

    /* Registered memory, allocated host memory and device-to-device copies pass. */
    assert_int_equal(cge_mem_register_host(e->dev, reg, N), CGE_OK);
    memset(reg, 9, N);
    assert_int_equal(cge_stream_begin_capture(e->s, CGE_CAPTURE_GLOBAL), CGE_OK);
    assert_int_equal(cge_memcpy_async(e->s, dev_buf, reg, N, CGE_MEMCPY_HOST_TO_DEVICE), CGE_OK);
    assert_int_equal(cge_memcpy_async(e->s, dev_buf + N / 2, dev_buf, N / 2, CGE_MEMCPY_DEVICE_TO_DEVICE), CGE_OK);
    assert_int_equal(cge_memcpy_async(e->s, pinned, dev_buf, N, CGE_MEMCPY_DEVICE_TO_HOST), CGE_OK);
    assert_int_equal(cge_memset_async(e->s, dev_buf, 0, N), CGE_OK);
    cge_ri *ri = NULL;
    assert_int_equal(cge_stream_end_capture(e->s, &ri), CGE_OK);
    assert_int_equal(cge_ri_execute(ri, -1), CGE_OK);
    assert_int_equal(pinned[0], 9);
    assert_int_equal(pinned[N - 1], 9);
    assert_int_equal(dev_buf[3], 0);
    cge_ri_destroy(ri);
    assert_int_equal(cge_mem_unregister_host(e->dev, reg), CGE_OK);
    cge_mem_free_host(e->dev, pinned);
    cge_mem_free(e->dev, dev_buf);
    free(user);
    free(reg);
}

/* Waiting on work recorded outside the capture is refused; waiting on a
 * never-recorded event records nothing. */
static void test_capture_event_rules(void **state)
{
    env *e = *state;
    cge_event *outside = rt_make_event(e->dev), *never = rt_make_event(e->dev);
    assert_int_equal(cge_event_record(outside, e->s), CGE_OK);
    assert_int_equal(cge_stream_synchronize(e->s), CGE_OK);

    assert_int_equal(cge_stream_begin_capture(e->s, CGE_CAPTURE_GLOBAL), CGE_OK);
    assert_int_equal(cge_stream_wait_event(e->s, never), CGE_OK);
    cge_ri *ri = NULL;
    assert_int_equal(cge_stream_end_capture(e->s, &ri), CGE_OK);
    assert_int_equal(cge_ri_num_tasks(ri), 0);
    cge_ri_destroy(ri);

    assert_int_equal(cge_stream_begin_capture(e->s, CGE_CAPTURE_GLOBAL), CGE_OK);
    assert_rt_error_msg(cge_stream_wait_event(e->s, outside), CGE_ERR_STATE, "recorded outside the capture");
    expect_invalidated(e, "outside the capture");

    /* Two captures cannot wait on each other. */
    cge_stream *s2 = rt_make_stream(e->dev);
    cge_event *ev = rt_make_event(e->dev);
    assert_int_equal(cge_stream_begin_capture(e->s, CGE_CAPTURE_RELAXED), CGE_OK);
    assert_int_equal(cge_stream_begin_capture(s2, CGE_CAPTURE_RELAXED), CGE_OK);
    assert_int_equal(cge_event_record(ev, e->s), CGE_OK);
    assert_rt_error_msg(cge_stream_wait_event(s2, ev), CGE_ERR_STATE, "cannot wait on another");
    assert_int_equal(cap_status(s2), CGE_CAPTURE_INVALIDATED);
    assert_int_equal(cap_status(e->s), CGE_CAPTURE_ACTIVE);
    assert_int_equal(cge_stream_end_capture(e->s, &ri), CGE_OK);
    cge_ri_destroy(ri);
    assert_rt_error(cge_stream_end_capture(s2, &ri), CGE_ERR_STATE);
    assert_null(ri);
    cge_event_destroy(ev);
    cge_stream_destroy(s2);
    cge_event_destroy(outside);
    cge_event_destroy(never);
}

static void test_capture_argument_errors(void **state)
{
    env *e = *state;
    cge_ri *ri = NULL;
    cge_capture_status cs;
    assert_rt_error_msg(cge_stream_begin_capture(NULL, CGE_CAPTURE_GLOBAL), CGE_ERR_INVALID_ARG, "stream is NULL");
    assert_rt_error_msg(cge_stream_begin_capture(e->s, (cge_capture_mode)7), CGE_ERR_INVALID_ARG, "mode");
    assert_rt_error_msg(cge_stream_end_capture(e->s, &ri), CGE_ERR_STATE, "not capturing");
    assert_rt_error_msg(cge_stream_end_capture(NULL, &ri), CGE_ERR_INVALID_ARG, "stream is NULL");
    assert_rt_error_msg(cge_stream_end_capture(e->s, NULL), CGE_ERR_INVALID_ARG, "ri is NULL");
    assert_rt_error(cge_stream_capture_status(NULL, &cs), CGE_ERR_INVALID_ARG);
    assert_rt_error(cge_stream_capture_status(e->s, NULL), CGE_ERR_INVALID_ARG);
    assert_int_equal(cge_stream_begin_capture(e->s, CGE_CAPTURE_THREAD_LOCAL), CGE_OK);
    assert_rt_error_msg(cge_stream_begin_capture(e->s, CGE_CAPTURE_GLOBAL), CGE_ERR_STATE, "already capturing");
    assert_int_equal(cge_stream_end_capture(e->s, &ri), CGE_OK);
    cge_ri_destroy(ri);
    assert_rt_error(cge_ri_execute(NULL, -1), CGE_ERR_INVALID_ARG);
    assert_rt_error(cge_ri_execute_async(NULL, e->s), CGE_ERR_INVALID_ARG);
    assert_int_equal(cge_ri_num_tasks(NULL), 0);
}

/* ---- teardown while capturing ---------------------------------------------------- */

static void test_destroy_while_capturing(void **state)
{
    int64_t v = 0;
    counter_args c = {&v};
    cge_device *dev = rt_make_device(0);
    cge_stream *s = rt_make_stream(dev), *s2 = rt_make_stream(dev), *s3 = rt_make_stream(dev);
    cge_event *ev = rt_make_event(dev), *j = rt_make_event(dev);

    /* The origin goes: the capture is dropped; the joined stream is free again. */
    assert_int_equal(cge_stream_begin_capture(s, CGE_CAPTURE_GLOBAL), CGE_OK);
    assert_int_equal(cge_event_record(ev, s), CGE_OK);
    assert_int_equal(cge_stream_wait_event(s2, ev), CGE_OK);
    assert_int_equal(cge_launch(s2, bump_kernel, 1, &c, sizeof c), CGE_OK);
    cge_stream_destroy(s);
    assert_int_equal(cap_status(s2), CGE_CAPTURE_NONE);
    assert_int_equal(cge_stream_synchronize(s2), CGE_OK); /* no global capture left */
    void *p = NULL;
    assert_int_equal(cge_mem_alloc(dev, 8, &p), CGE_OK);
    assert_int_equal(cge_event_query(ev, &(bool){false}), CGE_OK);

    /* A joined stream goes: the capture is invalidated. */
    s = rt_make_stream(dev);
    assert_int_equal(cge_stream_begin_capture(s, CGE_CAPTURE_RELAXED), CGE_OK);
    assert_int_equal(cge_event_record(ev, s), CGE_OK);
    assert_int_equal(cge_stream_wait_event(s2, ev), CGE_OK);
    assert_int_equal(cge_event_record(j, s2), CGE_OK);
    cge_stream_destroy(s2);
    assert_int_equal(cap_status(s), CGE_CAPTURE_INVALIDATED);
    cge_ri *ri = NULL;
    assert_rt_error_msg(cge_stream_end_capture(s, &ri), CGE_ERR_STATE, "was destroyed");
    assert_null(ri);

    /* A captured event goes: the capture carries on. */
    cge_event *tmp = rt_make_event(dev);
    assert_int_equal(cge_stream_begin_capture(s, CGE_CAPTURE_RELAXED), CGE_OK);
    assert_int_equal(cge_event_record(tmp, s), CGE_OK);
    cge_event_destroy(tmp);
    assert_int_equal(cge_launch(s, bump_kernel, 1, &c, sizeof c), CGE_OK);
    assert_int_equal(cge_stream_end_capture(s, &ri), CGE_OK);
    assert_int_equal(cge_ri_execute(ri, -1), CGE_OK);
    assert_int_equal(v, 1);
    /* The RI is left alive on purpose: the device releases it. */

    /* The device goes with a capture in progress (origin and a joined stream). */
    assert_int_equal(cge_stream_begin_capture(s, CGE_CAPTURE_GLOBAL), CGE_OK);
    assert_int_equal(cge_event_record(ev, s), CGE_OK);
    assert_int_equal(cge_stream_wait_event(s3, ev), CGE_OK);
    assert_int_equal(cge_launch(s3, bump_kernel, 1, &c, sizeof c), CGE_OK);
    cge_device_destroy(dev);
    assert_int_equal(v, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_single_stream_replay, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_capture, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fork_join, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fork_not_joined, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replays_serialised, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prohibited_calls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_relaxed_mode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_modes_across_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pinned_host_memory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_capture_event_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_capture_argument_errors, setup, teardown),
        cmocka_unit_test(test_destroy_while_capturing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
