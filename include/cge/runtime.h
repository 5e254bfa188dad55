/* The device runtime: memory, in-order asynchronous streams, events, SPMD
 * kernel launch over a shared core pool, host callbacks, capture and replay,
 * hazard checking, immediate streams. It knows nothing of graphs. */
#ifndef CGE_RUNTIME_H
#define CGE_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cge/status.h"

/* The CPU device is built in; the device is a table of function pointers
 * inside (src/runtime/device.h) so another device can slot in. */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cge_device cge_device;
typedef struct cge_stream cge_stream;
typedef struct cge_event cge_event;

typedef struct cge_device_options {
    /* Compute threads in the core pool; 0 means $CGE_NUM_THREADS if set, else
     * the number of online cores. Never more than the cores: values above are
     * clamped. */
    int num_threads;
} cge_device_options;

/* The CPU device. Its core pool runs every stream's tasks: there are never more
 * compute threads than `num_threads`, however many streams or submitters. */
cge_status cge_device_create_cpu(const cge_device_options *opts, cge_device **out);
/* Waits for all work on all streams of the device, then releases it. Streams
 * and events of the device must be destroyed first. NULL is a no-op. */
void cge_device_destroy(cge_device *dev);
const char *cge_device_name(const cge_device *dev);   /* "cpu" */
int cge_device_num_threads(const cge_device *dev);
/* Blocks until every stream of the device is idle. */
cge_status cge_device_synchronize(cge_device *dev);

/* ---- memory ------------------------------------------------------------ */

/* Device memory, 64-byte aligned. bytes == 0 gives a valid unique pointer. */
cge_status cge_mem_alloc(cge_device *dev, size_t bytes, void **out);
cge_status cge_mem_free(cge_device *dev, void *ptr);          /* NULL is a no-op */
/* Host memory the device can copy to and from asynchronously ("pinned"). */
cge_status cge_mem_alloc_host(cge_device *dev, size_t bytes, void **out);
cge_status cge_mem_free_host(cge_device *dev, void *ptr);     /* NULL is a no-op */
/* Make caller-owned host memory usable by asynchronous copies, and undo it. */
cge_status cge_mem_register_host(cge_device *dev, void *ptr, size_t bytes);
cge_status cge_mem_unregister_host(cge_device *dev, void *ptr);

typedef enum cge_memcpy_kind {
    CGE_MEMCPY_HOST_TO_DEVICE = 0,
    CGE_MEMCPY_DEVICE_TO_HOST = 1,
    CGE_MEMCPY_DEVICE_TO_DEVICE = 2,
    CGE_MEMCPY_HOST_TO_HOST = 3
} cge_memcpy_kind;

/* Synchronous copy/fill: returns once the bytes are in place. */
cge_status cge_memcpy(cge_device *dev, void *dst, const void *src, size_t bytes,
                      cge_memcpy_kind kind);
cge_status cge_memset(cge_device *dev, void *dst, int value, size_t bytes);

/* ---- streams ----------------------------------------------------------- */

/* A stream is an in-order asynchronous queue: tasks run one after another in
 * submission order; tasks of different streams may run at the same time.
 * Any thread may submit to any stream; submissions to one stream from several
 * threads are serialised in the order the calls take the stream's lock. */
cge_status cge_stream_create(cge_device *dev, cge_stream **out);
/* Waits for the stream's pending work, then releases it. NULL is a no-op. */
void cge_stream_destroy(cge_stream *stream);
cge_device *cge_stream_device(const cge_stream *stream);
cge_status cge_stream_synchronize(cge_stream *stream);
/* *idle = true if every task submitted so far has finished. */
cge_status cge_stream_query(cge_stream *stream, bool *idle);

cge_status cge_memcpy_async(cge_stream *stream, void *dst, const void *src, size_t bytes,
                            cge_memcpy_kind kind);
cge_status cge_memset_async(cge_stream *stream, void *dst, int value, size_t bytes);

/* An SPMD kernel: called once per block, block_idx in [0, num_blocks), the
 * blocks spread over the core pool. `args` points at the runtime's copy of the
 * launch arguments, shared by all blocks of one launch. */
typedef void (*cge_kernel_fn)(int64_t block_idx, int64_t num_blocks, void *args);
#define CGE_LAUNCH_MAX_ARGS 4096
/* Enqueue `fn` with `num_blocks` >= 1 blocks. `args_size` bytes at `args` are
 * copied (at most CGE_LAUNCH_MAX_ARGS), so the caller's struct may go away. */
cge_status cge_launch(cge_stream *stream, cge_kernel_fn fn, int64_t num_blocks,
                      const void *args, size_t args_size);

/* Run fn(user) on the stream, in order with its other tasks. The callback
 * must not call stream/event synchronize on its own stream. */
typedef void (*cge_host_fn)(void *user);
cge_status cge_launch_host_func(cge_stream *stream, cge_host_fn fn, void *user);

/* Report a failure from inside a running kernel block or host callback (a
 * bad index found while reading data that only exists on the stream): the
 * first failure on the stream that runs the task is kept, and that stream's
 * next cge_stream_synchronize (or cge_ri_execute) returns it as a [kernel]
 * error and forgets it (a [runtime] one for CGE_ERR_CANCELLED and
 * CGE_ERR_TIMEOUT: a kernel that stopped at cge_cancel_check). Later failures
 * before then are dropped. Called outside a running task it does nothing.
 * Safe from any block. */
void cge_kernel_fail(cge_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- cancellation ------------------------------------------------------ */

/* A cancel token stops work that was enqueued under it, from any thread:
 * kernels and copies that have not started are skipped, a kernel's blocks
 * stop being handed out, and Loop and Scan check it before every iteration.
 * Event records and waits still happen (other streams are never left
 * waiting) and host callbacks still run. The stream that skipped work
 * reports it at its next synchronize (or cge_ri_execute) as a [runtime]
 * error, CGE_ERR_CANCELLED ("run cancelled") or, past the token's deadline,
 * CGE_ERR_TIMEOUT ("deadline of 50 ms exceeded"), and forgets it, as for
 * cge_kernel_fail. Work binds to a token through the enqueuing thread's
 * scope: everything a thread enqueues between cge_cancel_scope(t) and
 * cge_cancel_scope(previous) carries t, so a synchronous session run made
 * in the scope can be stopped, its replays and control flow included. */
typedef struct cge_cancel cge_cancel;
cge_status cge_cancel_create(cge_cancel **out);
/* After the work enqueued under it has finished. NULL is a no-op. */
void cge_cancel_destroy(cge_cancel *c);
/* Cancel now. Safe from any thread and from a signal handler. */
void cge_cancel_request(cge_cancel *c);
/* Cancel once `timeout_ms` have passed from now (< 0: no deadline). */
void cge_cancel_set_timeout(cge_cancel *c, double timeout_ms);
/* Clears the request and the deadline, for the token's next use. */
void cge_cancel_reset(cge_cancel *c);
/* Requested, or past its deadline. */
bool cge_cancel_requested(const cge_cancel *c);
/* Binds this thread's later enqueues to `c` (NULL: to none); returns the
 * token bound before, to restore. */
cge_cancel *cge_cancel_scope(cge_cancel *c);
/* For long-running kernels and host callbacks (Loop checks it per
 * iteration): CGE_OK, or the [runtime] error of the token of the task this
 * thread runs. */
cge_status cge_cancel_check(void);
/* While watched, SIGINT (Ctrl-C) requests `c` and then reaches the handler
 * that was installed before (Python's, which raises KeyboardInterrupt once
 * the call returns; the default one, which ends the process). One token at a
 * time: CGE_ERR_STATE while another is watched. For interactive front ends;
 * unwatch restores the previous handler. */
cge_status cge_cancel_watch_sigint(cge_cancel *c);
void cge_cancel_unwatch_sigint(void);

/* ---- events ------------------------------------------------------------ */

cge_status cge_event_create(cge_device *dev, cge_event **out);
/* Waits until the event's last recorded point has passed. NULL is a no-op. */
void cge_event_destroy(cge_event *event);
/* Capture the stream's current tail: the event completes when every task
 * submitted to `stream` before this call has finished. Re-recording replaces
 * the previous point. */
cge_status cge_event_record(cge_event *event, cge_stream *stream);
/* Later tasks of `stream` wait until `event`'s recorded point has completed.
 * Waiting on a never-recorded event is a no-op. */
cge_status cge_stream_wait_event(cge_stream *stream, cge_event *event);
/* *done = true if the recorded point has completed (or nothing was recorded). */
cge_status cge_event_query(cge_event *event, bool *done);
cge_status cge_event_synchronize(cge_event *event);
/* Milliseconds between the completion of two recorded events; both must have
 * completed. */
cge_status cge_event_elapsed_ms(const cge_event *start, const cge_event *end, float *ms);

/* ---- capture and replay ------------------------------------------------- */

/* A replay instance (RI): a recording of the tasks submitted to a stream (and
 * to the streams it forked to through events) between begin and end of a
 * capture. Tasks are recorded, not run; replaying submits the whole recording
 * in one step. Addresses and arguments are recorded as they were: new input
 * values go into the same buffers, after the previous replay has finished
 * reading them. */
typedef struct cge_ri cge_ri;

typedef enum cge_capture_mode {
    /* While any global capture is active, unsafe calls (synchronize, query,
     * synchronous copies, allocation, free) fail from every thread. */
    CGE_CAPTURE_GLOBAL = 0,
    /* Unsafe calls fail on the thread that began the capture. */
    CGE_CAPTURE_THREAD_LOCAL = 1,
    /* Only calls on the capturing streams themselves fail. */
    CGE_CAPTURE_RELAXED = 2
} cge_capture_mode;

typedef enum cge_capture_status {
    CGE_CAPTURE_NONE = 0,
    CGE_CAPTURE_ACTIVE = 1,
    CGE_CAPTURE_INVALIDATED = 2  /* a refused call broke it; end_capture gives no RI */
} cge_capture_status;

cge_status cge_stream_begin_capture(cge_stream *stream, cge_capture_mode mode);
/* Ends the capture begun on `stream`; every stream it forked to must have
 * joined back (an event recorded there and waited on here). On success *ri is
 * the recording; after an invalidation it is NULL and the error says why. */
cge_status cge_stream_end_capture(cge_stream *stream, cge_ri **ri);
cge_status cge_stream_capture_status(cge_stream *stream, cge_capture_status *status);

/* Submit the whole recording on `stream` (any stream of the device, as often
 * as wanted). Replays of one RI never overlap: a replay starts after the
 * previous one has finished. */
cge_status cge_ri_execute_async(cge_ri *ri, cge_stream *stream);
/* Replay and wait at most timeout_ms (< 0: no limit). CGE_ERR_TIMEOUT if
 * it has not finished by then (it still completes later). With no limit and
 * no replay of the RI in flight, the calling thread runs the replay itself
 * (the pool's workers still share multi-block kernels): no hand-off to a
 * worker and back. */
cge_status cge_ri_execute(cge_ri *ri, int64_t timeout_ms);
/* Waits for replays in flight, then releases the RI. NULL is a no-op. */
void cge_ri_destroy(cge_ri *ri);

typedef enum cge_task_kind {
    CGE_TASK_KERNEL = 0,
    CGE_TASK_MEMCPY = 1,
    CGE_TASK_MEMSET = 2,
    CGE_TASK_EVENT_RECORD = 3,
    CGE_TASK_EVENT_WAIT = 4,
    CGE_TASK_HOST_FUNC = 5
} cge_task_kind;

/* The parameters of a recorded task. Only the fields of its kind are used. */
typedef struct cge_task_params {
    cge_task_kind kind;
    int32_t stream_index;        /* which captured stream (0: the origin) */
    int32_t group;               /* task group id, -1 if none */
    cge_kernel_fn fn;            /* KERNEL */
    int64_t num_blocks;
    const void *args;            /* KERNEL: the RI's copy (get) / new bytes (set) */
    size_t args_size;
    void *dst;                   /* MEMCPY, MEMSET */
    const void *src;             /* MEMCPY */
    size_t bytes;
    cge_memcpy_kind copy_kind;
    int value;                   /* MEMSET */
    cge_host_fn host_fn;         /* HOST_FUNC */
    void *user;
} cge_task_params;

int32_t cge_ri_num_tasks(const cge_ri *ri);
cge_status cge_ri_get_task(const cge_ri *ri, int32_t index, cge_task_params *out);
/* Change a recorded task's parameters (kernel arguments and block count, copy
 * and fill addresses and sizes, host function argument). Its kind, stream,
 * group and kernel function must stay: a change of structure is an error and
 * leaves the task as it was. Not allowed while a replay is in flight
 * (CGE_ERR_STATE). */
cge_status cge_ri_set_task(cge_ri *ri, int32_t index, const cge_task_params *params);

/* Task groups: tasks submitted to a capturing stream between begin and end
 * form a group that can later be re-issued as a whole. */
cge_status cge_stream_begin_task_group(cge_stream *stream);
cge_status cge_stream_end_task_group(cge_stream *stream, int32_t *group_id);
/* Re-issue a group: between update_begin and update_end, tasks submitted to
 * `stream` are recorded as the group's new tasks (not run). update_end checks
 * that they have the group's structure (same count, kinds and kernel
 * functions) and swaps them in; otherwise it is an error and the RI keeps the
 * old tasks. */
cge_status cge_ri_update_begin(cge_ri *ri, int32_t group_id, cge_stream *stream);
cge_status cge_ri_update_end(cge_ri *ri);

/* JSON: tasks per stream with their parameters, events, dependencies. */
cge_status cge_ri_dump_json(const cge_ri *ri, FILE *f);

/* ---- hazard checking ----------------------------------------------------- */

/* With checking on (this call, or CGE_CHECK_HAZARDS=1 when the device is
 * created), a write into memory that a replay in flight still reads — an
 * asynchronous copy or fill on another stream, a synchronous copy or fill, or
 * a host write announced with cge_mem_host_write — is refused with a
 * [runtime] error naming the buffer and the RI. */
cge_status cge_device_set_hazard_check(cge_device *dev, bool on);
/* Name a device or host allocation for error messages ("x_host"). */
cge_status cge_mem_set_name(cge_device *dev, void *ptr, const char *name);
/* Announce that the host is about to write [ptr, ptr + bytes) directly:
 * a hazard error if a replay in flight reads any of it (with checking on),
 * otherwise CGE_OK. */
cge_status cge_mem_host_write(cge_device *dev, const void *ptr, size_t bytes);
/* Memory that replays of `ri` read (write false) or write through kernel
 * arguments, which the recording cannot see (they are opaque bytes): the
 * guard then refuses writes into it while a replay is in flight, as for the
 * recorded copies and fills. A session marks a bound run's caller buffers
 * so. Not allowed while a replay is in flight (CGE_ERR_STATE). */
cge_status cge_ri_track_range(cge_ri *ri, const void *ptr, size_t bytes, bool write);

/* ---- immediate streams --------------------------------------------------- */

/* A stream whose submissions run synchronously on the calling thread before
 * the submit call returns: copies and fills in place, host functions called,
 * kernels run block by block (multi-block kernels shared with idle workers of
 * the pool, as a replay does). For running work from inside a running task
 * (a host function executing a subgraph), where waiting on a queued stream
 * could wait for the very worker that waits. Synchronize returns at once
 * with any cge_kernel_fail reported by its tasks; events and capture are
 * refused on it ([runtime] CGE_ERR_UNSUPPORTED). Destroy as any stream. */
cge_status cge_stream_create_immediate(cge_device *dev, cge_stream **out);

/* A burst: the calling thread is about to submit many tasks to the immediate
 * stream `stream` back to back (a plan's steps). Until the matching end, the
 * device treats the thread as it treats a replay: idle workers keep polling
 * through the short gaps between its launches instead of sleeping and being
 * woken for each shared launch. Pairs nest; end on the thread that began.
 * A queued stream is refused ([runtime] CGE_ERR_INVALID_ARG). */
cge_status cge_stream_burst_begin(cge_stream *stream);
void cge_stream_burst_end(cge_stream *stream);

#ifdef __cplusplus
}
#endif
#endif
