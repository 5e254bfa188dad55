/* Helpers shared by the runtime tests: a gate that holds a stream until the
 * test opens it, and an assertion that an error names the runtime layer. */
#ifndef CGE_TESTS_RT_TEST_H
#define CGE_TESTS_RT_TEST_H

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "cge/runtime.h"

/* A call failed with `status`, and the message says "[runtime]" first. */
#define assert_rt_error(call, status)                                                              \
    do {                                                                                           \
        cge_clear_error();                                                                         \
        assert_int_equal((call), (status));                                                        \
        assert_int_equal(cge_last_error_layer(), CGE_LAYER_RUNTIME);                               \
        assert_true(strncmp(cge_last_error(), "[runtime] ", 10) == 0);                             \
    } while (0)

/* Same, and the message also contains `needle`. */
#define assert_rt_error_msg(call, status, needle)                                                  \
    do {                                                                                           \
        assert_rt_error(call, status);                                                             \
        assert_non_null(strstr(cge_last_error(), (needle)));                                       \
    } while (0)

/* A host task that blocks its stream until the test calls gate_open. */
typedef struct rt_gate {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    bool open;
    bool entered; /* the gate task has started */
} rt_gate;

static inline void gate_init(rt_gate *g)
{
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->open = false;
    g->entered = false;
}

static inline void gate_fini(rt_gate *g)
{
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->lock);
}

static inline void gate_fn(void *user)
{
    rt_gate *g = user;
    pthread_mutex_lock(&g->lock);
    g->entered = true;
    pthread_cond_broadcast(&g->cv);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

static inline void gate_open(rt_gate *g)
{
    pthread_mutex_lock(&g->lock);
    g->open = true;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->lock);
}

/* Blocks until the gate task is running on a worker. */
static inline void gate_wait_entered(rt_gate *g)
{
    pthread_mutex_lock(&g->lock);
    while (!g->entered)
        pthread_cond_wait(&g->cv, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

static inline cge_device *rt_make_device(int num_threads)
{
    cge_device_options opts = {.num_threads = num_threads};
    cge_device *dev = NULL;
    assert_int_equal(cge_device_create_cpu(&opts, &dev), CGE_OK);
    assert_non_null(dev);
    return dev;
}

static inline cge_stream *rt_make_stream(cge_device *dev)
{
    cge_stream *s = NULL;
    assert_int_equal(cge_stream_create(dev, &s), CGE_OK);
    assert_non_null(s);
    return s;
}

static inline cge_event *rt_make_event(cge_device *dev)
{
    cge_event *e = NULL;
    assert_int_equal(cge_event_create(dev, &e), CGE_OK);
    assert_non_null(e);
    return e;
}

#endif
