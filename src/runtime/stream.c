/* Public stream API: argument checks, then each call becomes one cge__task
 * submitted through rt_submit, where capture and the hazard guard hook in. */
#include <stdarg.h>
#include <stdio.h>
#include "runtime/device.h"

cge_status cge_stream_create(cge_device *dev, cge_stream **out)
{
    if (!out)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_stream_create: out is NULL");
    *out = NULL;
    if (!dev)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_stream_create: device is NULL");
    return dev->ops->stream_create(dev, out);
}

cge_status cge_stream_create_immediate(cge_device *dev, cge_stream **out)
{
    cge_status st = cge_stream_create(dev, out);
    if (st == CGE_OK)
        (*out)->immediate = true;
    return st;
}

/* Runs one task of an immediate stream now. Failures reported inside belong
 * to this stream, not to the task (if any) that the calling thread runs. */
cge_status rt_submit_immediate(cge_stream *stream, const cge__task *task)
{
    if (task->kind == CGE_TASK_EVENT_RECORD || task->kind == CGE_TASK_EVENT_WAIT)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_UNSUPPORTED,
                         "stream %llu is immediate: events cannot be recorded or waited on it",
                         (unsigned long long)stream->id);
    if (task->kind == CGE_TASK_MEMCPY || task->kind == CGE_TASK_MEMSET) {
        const void *dst = task->kind == CGE_TASK_MEMCPY ? task->u.copy.dst : task->u.fill.dst;
        size_t bytes = task->kind == CGE_TASK_MEMCPY ? task->u.copy.bytes : task->u.fill.bytes;
        cge_status st = rt_hazard_check(stream->dev, stream->id, dst, bytes,
                                        task->kind == CGE_TASK_MEMCPY ? "immediate copy"
                                                                      : "immediate fill");
        if (st != CGE_OK)
            return st;
    }
    cge_stream *outer = rt_current_stream;
    rt_current_stream = stream;
    stream->dev->ops->run_tasks(stream->dev, task, 1);
    rt_current_stream = outer;
    return CGE_OK;
}

cge_status cge_stream_burst_begin(cge_stream *stream)
{
    if (!stream)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_stream_burst_begin: stream is NULL");
    if (!stream->immediate)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_stream_burst_begin: stream %llu is queued; a burst is of immediate "
                         "submissions",
                         (unsigned long long)stream->id);
    if (stream->dev->ops->burst)
        stream->dev->ops->burst(stream->dev, true);
    return CGE_OK;
}

void cge_stream_burst_end(cge_stream *stream)
{
    if (stream && stream->immediate && stream->dev->ops->burst)
        stream->dev->ops->burst(stream->dev, false);
}

void cge_stream_destroy(cge_stream *stream)
{
    if (!stream)
        return;
    rt_capture_stream_gone(stream);
    stream->dev->ops->stream_destroy(stream);
}

cge_device *cge_stream_device(const cge_stream *stream) { return stream ? stream->dev : NULL; }

cge_status cge_stream_synchronize(cge_stream *stream)
{
    if (!stream)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_stream_synchronize: stream is NULL");
    cge_status st = rt_stream_unsafe(stream, "stream synchronize");
    if (st != CGE_OK)
        return st;
    st = stream->dev->ops->stream_synchronize(stream);
    if (st != CGE_OK)
        return st;
    return rt_stream_take_failure(stream);
}

_Thread_local cge_stream *rt_current_stream;

static void stream_fail_v(cge_stream *s, cge_layer layer, cge_status status, const char *fmt,
                          va_list ap)
{
    if (!s || status == CGE_OK)
        return;
    int expected = 0;
    if (!atomic_compare_exchange_strong(&s->kfail_status, &expected, -1))
        return; /* an earlier failure is kept */
    s->kfail_layer = (int)layer;
    vsnprintf(s->kfail_msg, sizeof s->kfail_msg, fmt ? fmt : "kernel failed", ap);
    atomic_store(&s->kfail_status, (int)status);
}

void rt_stream_fail(cge_stream *stream, cge_layer layer, cge_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    stream_fail_v(stream, layer, status, fmt, ap);
    va_end(ap);
}

void cge_kernel_fail(cge_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    bool cancel = status == CGE_ERR_CANCELLED || status == CGE_ERR_TIMEOUT;
    stream_fail_v(rt_current_stream, cancel ? CGE_LAYER_RUNTIME : CGE_LAYER_KERNEL, status, fmt,
                  ap);
    va_end(ap);
}

cge_status rt_stream_take_failure(cge_stream *stream)
{
    int st = atomic_load(&stream->kfail_status);
    if (st == 0)
        return CGE_OK;
    cge_layer layer = st > 0 ? (cge_layer)stream->kfail_layer : CGE_LAYER_KERNEL;
    cge_error(layer, (cge_status)(st > 0 ? st : CGE_ERR_INTERNAL), "%s", stream->kfail_msg);
    atomic_store(&stream->kfail_status, 0);
    return (cge_status)(st > 0 ? st : CGE_ERR_INTERNAL);
}

cge_status cge_stream_query(cge_stream *stream, bool *idle)
{
    if (!stream)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_stream_query: stream is NULL");
    if (!idle)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_stream_query: idle is NULL");
    cge_status st = rt_stream_unsafe(stream, "stream query");
    if (st != CGE_OK)
        return st;
    return stream->dev->ops->stream_query(stream, idle);
}

/* Work tasks carry the enqueuing thread's cancel token (event tasks never
 * stop, so they need none). */
static cge_status submit(cge_stream *stream, cge__task *task)
{
    task->cancel = rt_tl_cancel;
    return rt_submit(stream, task);
}

cge_status cge_memcpy_async(cge_stream *stream, void *dst, const void *src, size_t bytes,
                            cge_memcpy_kind kind)
{
    if (!stream)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_memcpy_async: stream is NULL");
    if ((int)kind < CGE_MEMCPY_HOST_TO_DEVICE || (int)kind > CGE_MEMCPY_HOST_TO_HOST)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_memcpy_async: invalid copy kind %d on stream %llu", (int)kind,
                         (unsigned long long)stream->id);
    if (bytes == 0)
        return CGE_OK;
    if (!dst || !src)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_memcpy_async: %s is NULL for a copy of %zu bytes on stream %llu",
                         !dst ? "dst" : "src", bytes, (unsigned long long)stream->id);
    cge__task t = {.kind = CGE_TASK_MEMCPY};
    t.u.copy.dst = dst;
    t.u.copy.src = src;
    t.u.copy.bytes = bytes;
    t.u.copy.kind = kind;
    return submit(stream, &t);
}

cge_status cge_memset_async(cge_stream *stream, void *dst, int value, size_t bytes)
{
    if (!stream)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_memset_async: stream is NULL");
    if (bytes == 0)
        return CGE_OK;
    if (!dst)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_memset_async: dst is NULL for %zu bytes on stream %llu", bytes,
                         (unsigned long long)stream->id);
    cge__task t = {.kind = CGE_TASK_MEMSET};
    t.u.fill.dst = dst;
    t.u.fill.value = value;
    t.u.fill.bytes = bytes;
    return submit(stream, &t);
}

cge_status cge_launch(cge_stream *stream, cge_kernel_fn fn, int64_t num_blocks, const void *args,
                      size_t args_size)
{
    if (!stream)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_launch: stream is NULL");
    unsigned long long sid = (unsigned long long)stream->id;
    if (!fn)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_launch: kernel is NULL (stream %llu)",
                         sid);
    if (num_blocks < 1)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_launch: num_blocks is %lld; a launch needs at least 1 block (stream %llu)",
                         (long long)num_blocks, sid);
    if (args_size > CGE_LAUNCH_MAX_ARGS)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_launch: %zu bytes of arguments exceed CGE_LAUNCH_MAX_ARGS (%d) (stream %llu)",
                         args_size, CGE_LAUNCH_MAX_ARGS, sid);
    if (args_size && !args)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_launch: args is NULL but args_size is %zu (stream %llu)", args_size, sid);
    cge__task t = {.kind = CGE_TASK_KERNEL};
    t.u.launch.fn = fn;
    t.u.launch.num_blocks = num_blocks;
    t.u.launch.args = args;
    t.u.launch.args_size = args_size;
    return submit(stream, &t);
}

cge_status cge_launch_host_func(cge_stream *stream, cge_host_fn fn, void *user)
{
    if (!stream)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_launch_host_func: stream is NULL");
    if (!fn)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_launch_host_func: fn is NULL (stream %llu)", (unsigned long long)stream->id);
    cge__task t = {.kind = CGE_TASK_HOST_FUNC};
    t.u.host.fn = fn;
    t.u.host.user = user;
    return submit(stream, &t);
}
