/* The device interface inside the runtime: a table of function pointers that a
 * device (the CPU one here, CUDA later) fills in, the task description every
 * device accepts, and the state all devices share (memory tracking). */
#ifndef CGE_RUNTIME_DEVICE_H
#define CGE_RUNTIME_DEVICE_H

#include <pthread.h>

#include "cge/runtime.h"
#include "runtime/mem_table.h"

/* Task kinds are the public cge_task_kind (runtime.h): CGE_TASK_KERNEL,
 * MEMCPY, MEMSET, HOST_FUNC, EVENT_RECORD (stamps the event when it runs) and
 * EVENT_WAIT (holds back the stream, never a thread). */

/* One unit of stream work as submitted. Pointers in it (launch args included)
 * belong to the submitter only for the duration of the submit call: a device
 * copies what it keeps. */
typedef struct cge_task {
    cge_task_kind kind;
    union {
        struct {
            cge_kernel_fn fn;
            int64_t num_blocks;
            const void *args;
            size_t args_size;
        } launch;
        struct {
            void *dst;
            const void *src;
            size_t bytes;
            cge_memcpy_kind kind;
        } copy;
        struct {
            void *dst;
            int value;
            size_t bytes;
        } fill;
        struct {
            cge_host_fn fn;
            void *user;
        } host;
        struct {
            cge_event *event;
        } event; /* RECORD and WAIT */
    } u;
} cge_task;

/* What a device implements. The public functions in runtime.h validate their
 * arguments (NULL handles, sizes, device mismatch) and then call these, so an
 * op may assume well-formed input. Memory tracking is common code: alloc/free
 * here only obtain and release the bytes. */
typedef struct cge_device_ops {
    const char *name;
    /* Waits for all work, releases streams and events that the caller left
     * behind, then the device itself. */
    void (*destroy)(cge_device *dev);
    cge_status (*synchronize)(cge_device *dev);

    cge_status (*alloc)(cge_device *dev, size_t bytes, void **out);
    void (*free)(cge_device *dev, void *ptr);
    cge_status (*alloc_host)(cge_device *dev, size_t bytes, void **out);
    void (*free_host)(cge_device *dev, void *ptr);
    /* Pin or unpin caller-owned memory; may be NULL when nothing is needed. */
    cge_status (*register_host)(cge_device *dev, void *ptr, size_t bytes);
    void (*unregister_host)(cge_device *dev, void *ptr);
    cge_status (*memcpy)(cge_device *dev, void *dst, const void *src, size_t bytes,
                         cge_memcpy_kind kind);
    cge_status (*memset)(cge_device *dev, void *dst, int value, size_t bytes);

    cge_status (*stream_create)(cge_device *dev, cge_stream **out);
    /* Waits for the stream's work, then releases it. */
    void (*stream_destroy)(cge_stream *stream);
    cge_status (*stream_submit)(cge_stream *stream, const cge_task *task);
    cge_status (*stream_synchronize)(cge_stream *stream);
    cge_status (*stream_query)(cge_stream *stream, bool *idle);

    cge_status (*event_create)(cge_device *dev, cge_event **out);
    /* Waits for the event's recorded point, then releases it. */
    void (*event_destroy)(cge_event *event);
    cge_status (*event_query)(cge_event *event, bool *done);
    cge_status (*event_synchronize)(cge_event *event);
    cge_status (*event_elapsed_ms)(const cge_event *start, const cge_event *end, float *ms);
} cge_device_ops;

/* The part of every device that common code reads; a device embeds it as its
 * first member. */
struct cge_device {
    const cge_device_ops *ops;
    int num_threads;
    pthread_mutex_t mem_lock; /* guards `mem` */
    cge_mem_table mem;
};

/* Streams and events likewise open with these headers. */
struct cge_stream {
    cge_device *dev;
    uint64_t id; /* for messages: "stream 3" */
};

struct cge_event {
    cge_device *dev;
    uint64_t id;
};

/* Set up and tear down the common part. rt_device_fini_base releases device
 * and host allocations the caller never freed (through dev->ops), so it runs
 * before the device's own state goes. */
cge_status rt_device_init_base(cge_device *dev, const cge_device_ops *ops, int num_threads);
void rt_device_fini_base(cge_device *dev);

/* True if [ptr, ptr + bytes) lies in one pinned (allocated or registered) host
 * range of `dev`. For asynchronous copies that insist on pinned memory. */
bool rt_mem_is_pinned(cge_device *dev, const void *ptr, size_t bytes);
/* True if `ptr` is the start of a live device allocation of `dev`. */
bool rt_mem_is_device_alloc(cge_device *dev, const void *ptr);

/* The core count the pool may use: the CPUs this process may run on. */
int rt_online_cores(void);
/* Threads for a pool from the options, $CGE_NUM_THREADS and the cores. */
cge_status rt_resolve_num_threads(const cge_device_options *opts, int *out);

#endif
