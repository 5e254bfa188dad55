/* The device interface inside the runtime: a table of function pointers that a
 * device (the CPU one here, CUDA later) fills in, the task description every
 * device accepts, and the state all devices share (memory tracking). */
#ifndef CGE_RUNTIME_DEVICE_H
#define CGE_RUNTIME_DEVICE_H

#include <pthread.h>
#include <stdatomic.h>

#include "cge/runtime.h"
#include "runtime/mem_table.h"

/* Task kinds are the public cge_task_kind (runtime.h): CGE_TASK_KERNEL,
 * MEMCPY, MEMSET, HOST_FUNC, EVENT_RECORD (stamps the event when it runs) and
 * EVENT_WAIT (holds back the stream, never a thread). */

/* One unit of stream work as submitted. Pointers in it (launch args included)
 * belong to the submitter only for the duration of the submit call: a device
 * copies what it keeps. */
typedef struct cge__task {
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
    /* The token of the scope it was enqueued in (NULL: none); captured
     * tasks keep none, a replay runs under its own submitter's. */
    cge_cancel *cancel;
} cge__task;

/* What a device implements. The public functions in runtime.h validate their
 * arguments (NULL handles, sizes, device mismatch) and then call these, so an
 * op may assume well-formed input. Memory tracking is common code: alloc/free
 * here only obtain and release the bytes. */
typedef struct cge__device_ops {
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
    cge_status (*stream_submit)(cge_stream *stream, const cge__task *task);
    cge_status (*stream_synchronize)(cge_stream *stream);
    cge_status (*stream_query)(cge_stream *stream, bool *idle);

    cge_status (*event_create)(cge_device *dev, cge_event **out);
    /* Waits for the event's recorded point, then releases it. */
    void (*event_destroy)(cge_event *event);
    cge_status (*event_query)(cge_event *event, bool *done);
    cge_status (*event_synchronize)(cge_event *event);
    cge_status (*event_elapsed_ms)(const cge_event *start, const cge_event *end, float *ms);

    /* Replay: runs `n` recorded work tasks (KERNEL, MEMCPY, MEMSET, HOST_FUNC;
     * never event tasks) back to back on the calling thread, which is one of
     * the device's workers running a stream task. Multi-block kernels may be
     * shared with idle workers; it returns when all of them are done. */
    void (*run_tasks)(cge_device *dev, const cge__task *tasks, size_t n);
    /* Optional: the calling thread begins (true) or ends a burst of
     * immediate submissions (cge_stream_burst_begin). */
    void (*burst)(cge_device *dev, bool begin);
} cge__device_ops;

typedef struct rt_capture rt_capture;
typedef struct rt_update rt_update;
typedef struct rt_mem_name rt_mem_name;

/* The part of every device that common code reads; a device embeds it as its
 * first member. */
struct cge_device {
    const cge__device_ops *ops;
    int num_threads;
    pthread_mutex_t mem_lock; /* guards `mem` and `names` */
    cge__mem_table mem;
    rt_mem_name *names;       /* cge_mem_set_name, for hazard messages */
    size_t num_names, cap_names;
    struct cge__warm *warm;   /* warm host memory for new signatures' tables (warm_memory.h) */

    /* Capture state (capture.c). cap_lock guards the lists and every plain
     * capture field of streams and events; the counters let the common path
     * ask "is anything capturing?" with one relaxed load. */
    pthread_mutex_t cap_lock;
    rt_capture *captures;     /* begun and not yet ended (invalidated ones too) */
    cge_ri *ris;              /* live replay instances, released with the device */
    atomic_int num_captures;
    atomic_int global_captures;
    atomic_uint_fast64_t next_ri_id;

    /* Hazard checking (hazard.c): hz_lock guards the list of RIs with tracked
     * replays in flight and their hazard fields. */
    atomic_bool hazard_check;
    pthread_mutex_t hz_lock;
    cge_ri *hz_active;
};

/* Streams and events likewise open with these headers. */
struct cge_stream {
    cge_device *dev;
    uint64_t id; /* for messages: "stream 3"; never reused within a device */
    /* Nonzero while the stream captures or re-records a task group: every
     * submission then takes the slow path through capture.c. */
    atomic_int hooked;
    rt_capture *cap;          /* under dev->cap_lock */
    int32_t cap_index;        /* its stream index in `cap` */
    rt_update *update;        /* cge_ri_update_begin on this stream */
    /* The first cge_kernel_fail on this stream since its last synchronize:
     * claimed by a compare-and-swap on kfail_status, so one writer fills
     * the message; synchronize reads it after the stream's work is done. */
    atomic_int kfail_status;
    int kfail_layer;          /* CGE_LAYER_KERNEL, or RUNTIME for cancellation */
    char kfail_msg[512];
    /* cge_stream_create_immediate: every submission runs on the calling
     * thread before the submit call returns (set once, before any use). */
    bool immediate;
};

/* The stream whose task this thread is running (NULL outside tasks), so that
 * cge_kernel_fail knows where a failure belongs. Set by the device's workers. */
extern _Thread_local cge_stream *rt_current_stream;
/* Hand a failure recorded on `stream` to the caller as a [kernel] error (a
 * [runtime] one for cancellation) and clear it; CGE_OK if none. */
cge_status rt_stream_take_failure(cge_stream *stream);
/* Records the first failure on `stream` with its layer (cge_kernel_fail's
 * work); later ones are dropped. */
void rt_stream_fail(cge_stream *stream, cge_layer layer, cge_status status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The cancel token of the scope this thread enqueues in, and while a worker
 * runs a task, that task's (cancel.c). */
extern _Thread_local cge_cancel *rt_tl_cancel;
/* Whether work under `c` must stop: one relaxed load, and a clock read only
 * when the token has a deadline. */
bool rt_cancel_due(const cge_cancel *c);
/* Records on rt_current_stream that work under `c` was skipped. */
void rt_cancel_report(const cge_cancel *c);

struct cge_event {
    cge_device *dev;
    uint64_t id;
    /* Nonzero while the event's last record is a captured task: waits and
     * queries then go through capture.c. */
    atomic_int cap_marked;
    atomic_bool ever_recorded; /* recorded outside any capture at least once */
    rt_capture *cap;           /* under dev->cap_lock */
    int32_t cap_task;          /* the captured record task */
};

/* Set up and tear down the common part. rt_device_fini_base releases device
 * and host allocations the caller never freed (through dev->ops), so it runs
 * before the device's own state goes. */
cge_status rt_device_init_base(cge_device *dev, const cge__device_ops *ops, int num_threads);
void rt_device_fini_base(cge_device *dev);

/* True if [ptr, ptr + bytes) lies in one pinned (allocated or registered) host
 * range of `dev`. For asynchronous copies that insist on pinned memory. */
bool rt_mem_is_pinned(cge_device *dev, const void *ptr, size_t bytes);
/* True if `ptr` is the start of a live device allocation of `dev`. */
bool rt_mem_is_device_alloc(cge_device *dev, const void *ptr);

/* ---- capture and hazard hooks (capture.c, hazard.c) ---------------------
 * The public stream, event and memory functions call these; each has a fast
 * path of one or two relaxed loads when nothing captures or checks. */

/* Thread-local captures begun by this thread and not ended here: a hint, the
 * slow path confirms under cap_lock. */
extern _Thread_local int rt_tl_captures;

cge_status rt_capture_submit_slow(cge_stream *stream, const cge__task *task);
cge_status rt_unsafe_call_slow(cge_device *dev, const char *what);
cge_status rt_stream_unsafe_slow(cge_stream *stream, const char *what);
cge_status rt_event_unsafe_slow(cge_event *event, const char *what);
cge_status rt_device_unsafe_slow(cge_device *dev, const char *what);
cge_status rt_hazard_check_slow(cge_device *dev, uint64_t stream_id, const void *ptr, size_t bytes,
                                const char *what);
/* Called before a stream, event or device goes: ends what capture state
 * refers to it, so that nothing dangles. */
void rt_capture_stream_gone(cge_stream *stream);
void rt_capture_event_gone(cge_event *event);
void rt_capture_device_gone(cge_device *dev);
/* Drops the name of an allocation that is being freed (mem_lock held). */
void rt_mem_name_forget_locked(cge_device *dev, const void *base);
void rt_mem_names_free(cge_device *dev);

static inline cge_status rt_hazard_check(cge_device *dev, uint64_t stream_id, const void *ptr,
                                         size_t bytes, const char *what)
{
    if (!atomic_load_explicit(&dev->hazard_check, memory_order_relaxed))
        return CGE_OK;
    return rt_hazard_check_slow(dev, stream_id, ptr, bytes, what);
}

/* Every stream task goes through here: recorded while the stream captures,
 * checked for hazards while checking is on, otherwise straight to the device. */
cge_status rt_submit_immediate(cge_stream *stream, const cge__task *task);

static inline cge_status rt_submit(cge_stream *stream, const cge__task *task)
{
    if (stream->immediate)
        return rt_submit_immediate(stream, task);
    if (atomic_load_explicit(&stream->hooked, memory_order_acquire))
        return rt_capture_submit_slow(stream, task);
    if (task->kind == CGE_TASK_EVENT_RECORD || task->kind == CGE_TASK_EVENT_WAIT) {
        cge_event *e = task->u.event.event;
        if (atomic_load_explicit(&e->cap_marked, memory_order_acquire))
            return rt_capture_submit_slow(stream, task);
        if (task->kind == CGE_TASK_EVENT_RECORD &&
            !atomic_load_explicit(&e->ever_recorded, memory_order_relaxed))
            atomic_store_explicit(&e->ever_recorded, true, memory_order_relaxed);
    }
    if (atomic_load_explicit(&stream->dev->hazard_check, memory_order_relaxed) &&
        (task->kind == CGE_TASK_MEMCPY || task->kind == CGE_TASK_MEMSET))
        return rt_capture_submit_slow(stream, task);
    return stream->dev->ops->stream_submit(stream, task);
}

/* Calls that block or touch memory maps (synchronous copies, allocation) are
 * refused while a global capture, or a thread-local one of this thread, is
 * active on the device. */
static inline cge_status rt_unsafe_call(cge_device *dev, const char *what)
{
    if (atomic_load_explicit(&dev->global_captures, memory_order_relaxed) == 0 && rt_tl_captures == 0)
        return CGE_OK;
    return rt_unsafe_call_slow(dev, what);
}

/* Stream synchronize/query: refused on a capturing stream in every mode. */
static inline cge_status rt_stream_unsafe(cge_stream *stream, const char *what)
{
    if (atomic_load_explicit(&stream->hooked, memory_order_acquire))
        return rt_stream_unsafe_slow(stream, what);
    return rt_unsafe_call(stream->dev, what);
}

/* Event synchronize/query: refused on an event whose last record was captured. */
static inline cge_status rt_event_unsafe(cge_event *event, const char *what)
{
    if (atomic_load_explicit(&event->cap_marked, memory_order_acquire))
        return rt_event_unsafe_slow(event, what);
    return rt_unsafe_call(event->dev, what);
}

/* Device synchronize: refused while any stream of the device captures. */
static inline cge_status rt_device_unsafe(cge_device *dev, const char *what)
{
    if (atomic_load_explicit(&dev->num_captures, memory_order_relaxed))
        return rt_device_unsafe_slow(dev, what);
    return rt_unsafe_call(dev, what);
}

/* The core count the pool may use: the CPUs this process may run on. */
int rt_online_cores(void);
/* Threads for a pool from the options, $CGE_NUM_THREADS and the cores. */
cge_status rt_resolve_num_threads(const cge_device_options *opts, int *out);

#endif
