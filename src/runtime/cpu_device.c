/* The CPU device: its ops table, creation and teardown, and its memory
 * (device memory is plain 64-byte aligned host memory). */
#include <stdlib.h>
#include <string.h>

#include "runtime/cpu.h"

#define CPU_ALIGN 64

static cge_status cpu_alloc_aligned(const char *what, size_t bytes, void **out)
{
    /* Round up so that a 0-byte request still gets its own address. */
    size_t rounded = bytes == 0 ? CPU_ALIGN : (bytes + CPU_ALIGN - 1) & ~(size_t)(CPU_ALIGN - 1);
    void *p = NULL;
    if (rounded < bytes || posix_memalign(&p, CPU_ALIGN, rounded) != 0)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "%s: cannot allocate %zu bytes", what, bytes);
    *out = p;
    return CGE_OK;
}

static cge_status cpu_alloc(cge_device *dev, size_t bytes, void **out)
{
    return cpu_alloc_aligned("cge_mem_alloc", bytes, out);
}

static cge_status cpu_alloc_host(cge_device *dev, size_t bytes, void **out)
{
    return cpu_alloc_aligned("cge_mem_alloc_host", bytes, out);
}

static void cpu_free(cge_device *dev, void *ptr) { free(ptr); }

static cge_status cpu_memcpy(cge_device *dev, void *dst, const void *src, size_t bytes,
                             cge_memcpy_kind kind)
{
    memmove(dst, src, bytes);
    return CGE_OK;
}

static cge_status cpu_memset(cge_device *dev, void *dst, int value, size_t bytes)
{
    memset(dst, value, bytes);
    return CGE_OK;
}

static cge_status cpu_synchronize(cge_device *dev)
{
    cpu_device *d = cpu_dev(dev);
    pthread_mutex_lock(&d->lock);
    cpu_wait_device_locked(d);
    pthread_mutex_unlock(&d->lock);
    return CGE_OK;
}

static void cpu_release(cpu_device *d)
{
    /* Streams and events the caller left behind are idle by now (the pool
     * waited for all work), so they can simply go. */
    while (d->streams) {
        cpu_stream *s = d->streams;
        d->streams = s->next_all;
        free(s);
    }
    while (d->events) {
        cpu_event *e = d->events;
        d->events = e->next_all;
        free(e);
    }
    while (d->free_tasks) {
        cpu_task *t = d->free_tasks;
        d->free_tasks = t->next;
        free(t);
    }
    pthread_cond_destroy(&d->done_cv);
    pthread_cond_destroy(&d->work_cv);
    pthread_mutex_destroy(&d->lock);
    rt_device_fini_base(&d->base);
    free(d);
}

static void cpu_destroy(cge_device *dev)
{
    cpu_device *d = cpu_dev(dev);
    cpu_pool_stop(d);
    cpu_release(d);
}

static const cge__device_ops cpu_ops = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .synchronize = cpu_synchronize,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .alloc_host = cpu_alloc_host,
    .free_host = cpu_free,
    .register_host = NULL, /* host memory needs no pinning here */
    .unregister_host = NULL,
    .memcpy = cpu_memcpy,
    .memset = cpu_memset,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .stream_submit = cpu_stream_submit,
    .stream_synchronize = cpu_stream_synchronize,
    .stream_query = cpu_stream_query,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_query = cpu_event_query,
    .event_synchronize = cpu_event_synchronize,
    .event_elapsed_ms = cpu_event_elapsed_ms,
    .run_tasks = cpu_run_tasks,
    .burst = cpu_burst,
};

cge_status cge_device_create_cpu(const cge_device_options *opts, cge_device **out)
{
    if (!out)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_device_create_cpu: out is NULL");
    *out = NULL;
    int threads = 0;
    cge_status st = rt_resolve_num_threads(opts, &threads);
    if (st != CGE_OK)
        return st;

    cpu_device *d = calloc(1, sizeof *d);
    if (!d)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "cge_device_create_cpu: out of memory");
    st = rt_device_init_base(&d->base, &cpu_ops, threads);
    if (st != CGE_OK) {
        free(d);
        return st;
    }
    /* CLOCK_MONOTONIC for done_cv is not needed: waits have no timeout. */
    if (pthread_mutex_init(&d->lock, NULL) != 0 || pthread_cond_init(&d->work_cv, NULL) != 0 ||
        pthread_cond_init(&d->done_cv, NULL) != 0) {
        rt_device_fini_base(&d->base);
        free(d);
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INTERNAL,
                         "cge_device_create_cpu: cannot create the pool's mutex or condition variables");
    }
    atomic_init(&d->work_hint, 0);
    atomic_init(&d->done_hint, 0);
    atomic_init(&d->replays, 0);
    st = cpu_pool_start(d);
    if (st != CGE_OK) {
        cpu_release(d);
        return st;
    }
    *out = &d->base;
    return CGE_OK;
}
