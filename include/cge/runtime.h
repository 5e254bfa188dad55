/* The device runtime: memory, in-order asynchronous streams, events, SPMD
 * kernel launch over a shared core pool, host callbacks. It knows nothing of
 * graphs. The CPU device is built in; the device is a table of function
 * pointers inside (src/runtime/device.h) so another device can slot in. */
#ifndef CGE_RUNTIME_H
#define CGE_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cge/status.h"

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

#ifdef __cplusplus
}
#endif
#endif
