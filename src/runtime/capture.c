/* Stream capture: begin/end, recording of the tasks submitted to capturing
 * streams (and to streams that join through events), the refusal of unsafe
 * calls, task groups, and the recording of a group update. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/capture.h"

/* Device independent: it sits between the public stream API and
 * dev->ops->stream_submit. */

_Thread_local int rt_tl_captures;

static const char *mode_name(cge_capture_mode m)
{
    switch (m) {
    case CGE_CAPTURE_GLOBAL: return "global";
    case CGE_CAPTURE_THREAD_LOCAL: return "thread-local";
    case CGE_CAPTURE_RELAXED: return "relaxed";
    }
    return "unknown";
}

static const char *copy_kind_name(cge_memcpy_kind k)
{
    switch (k) {
    case CGE_MEMCPY_HOST_TO_DEVICE: return "host-to-device";
    case CGE_MEMCPY_DEVICE_TO_HOST: return "device-to-host";
    case CGE_MEMCPY_DEVICE_TO_DEVICE: return "device-to-device";
    case CGE_MEMCPY_HOST_TO_HOST: return "host-to-host";
    }
    return "unknown";
}

/* ---- task records --------------------------------------------------------- */

cge_status rt_task_copy_in(rt_ri_task *out, const cge__task *t)
{
    memset(out, 0, sizeof *out);
    out->t = *t;
    out->t.cancel = NULL; /* a replay runs under its submitter's token */
    out->group = -1;
    out->dep = -1;
    out->exec = -1;
    out->range = -1;
    if (t->kind == CGE_TASK_KERNEL) {
        size_t n = t->u.launch.args_size;
        out->t.u.launch.args = NULL;
        if (n) {
            void *a = malloc(n);
            if (!a)
                return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY,
                                 "capture: out of memory copying %zu bytes of kernel arguments", n);
            memcpy(a, t->u.launch.args, n);
            out->t.u.launch.args = a;
            out->args_cap = n;
        }
    } else if (t->kind == CGE_TASK_EVENT_RECORD || t->kind == CGE_TASK_EVENT_WAIT) {
        out->event_id = t->u.event.event->id;
        /* The event may go before the RI: the record keeps only its id. */
        out->t.u.event.event = NULL;
    }
    return CGE_OK;
}

void rt_task_free_args(rt_ri_task *t)
{
    if (t->t.kind == CGE_TASK_KERNEL) {
        free((void *)t->t.u.launch.args);
        t->t.u.launch.args = NULL;
        t->args_cap = 0;
    }
}

cge_status rt_check_copy_pinned(cge_device *dev, const void *dst, const void *src, size_t bytes,
                                cge_memcpy_kind kind, const char *what)
{
    /* Accelerators copy asynchronously only from page-locked host memory; the
     * CPU device follows the same rule so that recordings port. */
    bool src_host = kind == CGE_MEMCPY_HOST_TO_DEVICE || kind == CGE_MEMCPY_HOST_TO_HOST;
    bool dst_host = kind == CGE_MEMCPY_DEVICE_TO_HOST || kind == CGE_MEMCPY_HOST_TO_HOST;
    const void *bad = NULL;
    const char *side = NULL;
    if (src_host && !rt_mem_is_pinned(dev, src, bytes)) {
        bad = src;
        side = "source";
    } else if (dst_host && !rt_mem_is_pinned(dev, dst, bytes)) {
        bad = dst;
        side = "destination";
    }
    if (!bad)
        return CGE_OK;
    return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                     "%s: host %s %p (%zu bytes, %s) is not pinned: asynchronous copies in a "
                     "recording need host memory from cge_mem_alloc_host or cge_mem_register_host",
                     what, side, bad, bytes, copy_kind_name(kind));
}

/* ---- capture bookkeeping (all under cap_lock) ------------------------------ */

static void invalidate_locked(rt_capture *c, const char *fmt, ...)
{
    if (c->invalid)
        return;
    c->invalid = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->reason, sizeof c->reason, fmt, ap);
    va_end(ap);
}

static cge_status invalid_error_locked(const rt_capture *c, const cge_stream *s, const char *what)
{
    return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                     "%s on stream %llu: the capture begun on stream %llu was invalidated (%s); "
                     "end it with cge_stream_end_capture and capture again",
                     what, (unsigned long long)s->id, (unsigned long long)c->origin_id, c->reason);
}

/* Refuses `what` and invalidates `c`; the error says both. */
static cge_status refuse_locked(rt_capture *c, cge_status status, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    invalidate_locked(c, "%s", msg);
    return cge_error(CGE_LAYER_RUNTIME, status, "%s; the capture begun on stream %llu is invalidated",
                     msg, (unsigned long long)c->origin_id);
}

static rt_ri_task *append_task_locked(rt_capture *c)
{
    if (c->num_tasks == INT32_MAX)
        return NULL;
    if (c->num_tasks == c->cap_tasks) {
        int32_t cap = c->cap_tasks ? (c->cap_tasks > INT32_MAX / 2 ? INT32_MAX : c->cap_tasks * 2) : 64;
        rt_ri_task *v = realloc(c->tasks, (size_t)cap * sizeof *v);
        if (!v)
            return NULL;
        c->tasks = v;
        c->cap_tasks = cap;
    }
    return &c->tasks[c->num_tasks];
}

static bool add_stream_locked(rt_capture *c, cge_stream *s)
{
    if (c->num_streams == c->cap_streams) {
        int32_t cap = c->cap_streams ? c->cap_streams * 2 : 4;
        rt_cap_stream *v = realloc(c->streams, (size_t)cap * sizeof *v);
        if (!v)
            return false;
        c->streams = v;
        c->cap_streams = cap;
    }
    c->streams[c->num_streams] = (rt_cap_stream){.s = s, .id = s->id, .last_task = -1, .open_group = -1};
    s->cap = c;
    s->cap_index = c->num_streams++;
    atomic_store_explicit(&s->hooked, 1, memory_order_release);
    return true;
}

static bool mark_event_locked(rt_capture *c, cge_event *e, int32_t task)
{
    if (e->cap != c) {
        if (c->num_events == c->cap_events) {
            int32_t cap = c->cap_events ? c->cap_events * 2 : 8;
            cge_event **v = realloc(c->events, (size_t)cap * sizeof *v);
            if (!v)
                return false;
            c->events = v;
            c->cap_events = cap;
        }
        c->events[c->num_events++] = e;
    }
    e->cap = c;
    e->cap_task = task;
    atomic_store_explicit(&e->cap_marked, 1, memory_order_release);
    return true;
}

static void unmark_event_locked(cge_event *e)
{
    e->cap = NULL;
    e->cap_task = -1;
    atomic_store_explicit(&e->cap_marked, 0, memory_order_release);
}

/* Takes `c` off the device and its streams and events; the caller frees it. */
static void detach_locked(rt_capture *c)
{
    cge_device *dev = c->dev;
    for (rt_capture **link = &dev->captures; *link; link = &(*link)->next) {
        if (*link == c) {
            *link = c->next;
            break;
        }
    }
    for (int32_t i = 0; i < c->num_streams; i++) {
        cge_stream *s = c->streams[i].s;
        if (s && s->cap == c) {
            s->cap = NULL;
            atomic_store_explicit(&s->hooked, 0, memory_order_release);
        }
    }
    for (int32_t i = 0; i < c->num_events; i++)
        if (c->events[i] && c->events[i]->cap == c)
            unmark_event_locked(c->events[i]);
    atomic_fetch_sub_explicit(&dev->num_captures, 1, memory_order_relaxed);
    if (c->mode == CGE_CAPTURE_GLOBAL)
        atomic_fetch_sub_explicit(&dev->global_captures, 1, memory_order_relaxed);
    /* Ended on another thread, the owner's hint stays high: its next unsafe
     * call takes the slow path once more and finds nothing. */
    if (c->mode == CGE_CAPTURE_THREAD_LOCAL && pthread_equal(c->owner, pthread_self()) &&
        rt_tl_captures > 0)
        rt_tl_captures--;
}

static void capture_free(rt_capture *c)
{
    if (!c)
        return;
    for (int32_t i = 0; i < c->num_tasks; i++)
        rt_task_free_args(&c->tasks[i]);
    free(c->tasks);
    free(c->streams);
    free(c->events);
    free(c);
}

/* ---- recording ------------------------------------------------------------- */

static const char *submit_name(const cge__task *t)
{
    switch (t->kind) {
    case CGE_TASK_KERNEL: return "cge_launch";
    case CGE_TASK_MEMCPY: return "cge_memcpy_async";
    case CGE_TASK_MEMSET: return "cge_memset_async";
    case CGE_TASK_EVENT_RECORD: return "cge_event_record";
    case CGE_TASK_EVENT_WAIT: return "cge_stream_wait_event";
    case CGE_TASK_HOST_FUNC: return "cge_launch_host_func";
    }
    return "submit";
}

static cge_status record_locked(rt_capture *c, cge_stream *s, const cge__task *task)
{
    const char *what = submit_name(task);
    if (c->invalid)
        return invalid_error_locked(c, s, what);
    rt_cap_stream *cs = &c->streams[s->cap_index];
    int32_t dep = -1;
    cge_event *e = NULL;
    if (task->kind == CGE_TASK_EVENT_RECORD || task->kind == CGE_TASK_EVENT_WAIT) {
        e = task->u.event.event;
        if (cs->open_group >= 0)
            return refuse_locked(c, CGE_ERR_STATE,
                                 "%s on stream %llu inside task group %d: a task group holds "
                                 "kernels, copies, fills and host functions only",
                                 what, (unsigned long long)s->id, cs->open_group);
        if (task->kind == CGE_TASK_EVENT_WAIT) {
            if (e->cap == c) {
                dep = e->cap_task;
            } else if (e->cap) {
                return refuse_locked(c, CGE_ERR_STATE,
                                     "cge_stream_wait_event: stream %llu captures, and event %llu "
                                     "was last recorded in the capture begun on stream %llu; one "
                                     "capture cannot wait on another",
                                     (unsigned long long)s->id, (unsigned long long)e->id,
                                     (unsigned long long)e->cap->origin_id);
            } else if (atomic_load_explicit(&e->ever_recorded, memory_order_relaxed)) {
                return refuse_locked(c, CGE_ERR_STATE,
                                     "cge_stream_wait_event: stream %llu captures, and event %llu "
                                     "was last recorded outside the capture; a captured wait can "
                                     "only wait on work recorded in the same capture",
                                     (unsigned long long)s->id, (unsigned long long)e->id);
            } else {
                return CGE_OK; /* a never-recorded event: nothing to wait for */
            }
        }
    } else if (task->kind == CGE_TASK_MEMCPY) {
        char where[96];
        snprintf(where, sizeof where, "captured cge_memcpy_async on stream %llu", (unsigned long long)s->id);
        cge_status st = rt_check_copy_pinned(c->dev, task->u.copy.dst, task->u.copy.src, task->u.copy.bytes,
                                             task->u.copy.kind, where);
        if (st != CGE_OK) {
            invalidate_locked(c, "%s", cge_last_error() + 10);
            return cge_error(CGE_LAYER_RUNTIME, st, "%s; the capture begun on stream %llu is invalidated",
                             cge_last_error() + 10, (unsigned long long)c->origin_id);
        }
    }
    rt_ri_task *t = append_task_locked(c);
    cge_status st = t ? rt_task_copy_in(t, task)
                      : cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "%s: out of memory recording a task",
                                  what);
    if (st != CGE_OK) {
        invalidate_locked(c, "%s on stream %llu ran out of memory", what, (unsigned long long)s->id);
        return st;
    }
    int32_t idx = c->num_tasks;
    if (e && task->kind == CGE_TASK_EVENT_RECORD && !mark_event_locked(c, e, idx)) {
        rt_task_free_args(t);
        invalidate_locked(c, "cge_event_record on stream %llu ran out of memory", (unsigned long long)s->id);
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "cge_event_record: out of memory recording a task");
    }
    t->stream_index = s->cap_index;
    t->group = cs->open_group;
    t->dep = dep;
    c->num_tasks++;
    cs->last_task = idx;
    return CGE_OK;
}

static cge_status update_record_locked(rt_update *u, cge_stream *s, const cge__task *task)
{
    const char *what = submit_name(task);
    if (task->kind == CGE_TASK_EVENT_RECORD || task->kind == CGE_TASK_EVENT_WAIT) {
        u->failed = true;
        snprintf(u->reason, sizeof u->reason, "%s on stream %llu during the update: a task group holds "
                 "kernels, copies, fills and host functions only", what, (unsigned long long)s->id);
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE, "%s (ri#%llu group %d)", u->reason,
                         (unsigned long long)u->ri->id, u->group);
    }
    if (task->kind == CGE_TASK_MEMCPY) {
        char where[96];
        snprintf(where, sizeof where, "cge_memcpy_async updating ri#%llu on stream %llu",
                 (unsigned long long)u->ri->id, (unsigned long long)s->id);
        cge_status st = rt_check_copy_pinned(s->dev, task->u.copy.dst, task->u.copy.src, task->u.copy.bytes,
                                             task->u.copy.kind, where);
        if (st != CGE_OK) {
            u->failed = true;
            snprintf(u->reason, sizeof u->reason, "%s", cge_last_error() + 10);
            return st;
        }
    }
    if (u->num_tasks == u->cap_tasks) {
        int32_t cap = u->cap_tasks ? u->cap_tasks * 2 : 8;
        rt_ri_task *v = realloc(u->tasks, (size_t)cap * sizeof *v);
        if (!v) {
            u->failed = true;
            snprintf(u->reason, sizeof u->reason, "out of memory");
            return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "%s: out of memory recording an update", what);
        }
        u->tasks = v;
        u->cap_tasks = cap;
    }
    cge_status st = rt_task_copy_in(&u->tasks[u->num_tasks], task);
    if (st != CGE_OK) {
        u->failed = true;
        snprintf(u->reason, sizeof u->reason, "out of memory");
        return st;
    }
    u->num_tasks++;
    return CGE_OK;
}

cge_status rt_capture_submit_slow(cge_stream *stream, const cge__task *task)
{
    cge_device *dev = stream->dev;
    cge_status st = CGE_OK;
    pthread_mutex_lock(&dev->cap_lock);
    if (stream->update) {
        st = update_record_locked(stream->update, stream, task);
        pthread_mutex_unlock(&dev->cap_lock);
        return st;
    }
    if (stream->cap) {
        st = record_locked(stream->cap, stream, task);
        pthread_mutex_unlock(&dev->cap_lock);
        return st;
    }
    if (task->kind == CGE_TASK_EVENT_RECORD || task->kind == CGE_TASK_EVENT_WAIT) {
        cge_event *e = task->u.event.event;
        if (task->kind == CGE_TASK_EVENT_RECORD) {
            /* A record outside the capture moves the event out of it. */
            if (e->cap)
                unmark_event_locked(e);
            atomic_store_explicit(&e->ever_recorded, true, memory_order_relaxed);
        } else if (e->cap) {
            /* Waiting on a captured point: this stream joins the capture. */
            rt_capture *c = e->cap;
            if (c->invalid) {
                st = invalid_error_locked(c, stream, "cge_stream_wait_event");
            } else if (!add_stream_locked(c, stream)) {
                invalidate_locked(c, "out of memory joining stream %llu", (unsigned long long)stream->id);
                st = cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY,
                               "cge_stream_wait_event: out of memory joining stream %llu to a capture",
                               (unsigned long long)stream->id);
            } else {
                st = record_locked(c, stream, task);
            }
            pthread_mutex_unlock(&dev->cap_lock);
            return st;
        }
    }
    pthread_mutex_unlock(&dev->cap_lock);
    if (task->kind == CGE_TASK_MEMCPY)
        st = rt_hazard_check(dev, stream->id, task->u.copy.dst, task->u.copy.bytes, "cge_memcpy_async");
    else if (task->kind == CGE_TASK_MEMSET)
        st = rt_hazard_check(dev, stream->id, task->u.fill.dst, task->u.fill.bytes, "cge_memset_async");
    if (st != CGE_OK)
        return st;
    return dev->ops->stream_submit(stream, task);
}

/* ---- unsafe calls ----------------------------------------------------------- */

cge_status rt_unsafe_call_slow(cge_device *dev, const char *what)
{
    pthread_t self = pthread_self();
    bool hit = false;
    uint64_t origin = 0;
    cge_capture_mode mode = CGE_CAPTURE_GLOBAL;
    pthread_mutex_lock(&dev->cap_lock);
    for (rt_capture *c = dev->captures; c; c = c->next) {
        if (c->mode == CGE_CAPTURE_GLOBAL ||
            (c->mode == CGE_CAPTURE_THREAD_LOCAL && pthread_equal(c->owner, self))) {
            if (!hit) {
                hit = true;
                origin = c->origin_id;
                mode = c->mode;
            }
            invalidate_locked(c, "%s was called during the capture", what);
        }
    }
    pthread_mutex_unlock(&dev->cap_lock);
    if (!hit)
        return CGE_OK;
    return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                     "%s is not allowed while stream %llu is capturing (%s mode%s); the capture is "
                     "invalidated",
                     what, (unsigned long long)origin, mode_name(mode),
                     mode == CGE_CAPTURE_THREAD_LOCAL ? ", begun on this thread" : "");
}

cge_status rt_stream_unsafe_slow(cge_stream *stream, const char *what)
{
    cge_device *dev = stream->dev;
    pthread_mutex_lock(&dev->cap_lock);
    rt_capture *c = stream->cap;
    if (c) {
        uint64_t origin = c->origin_id;
        invalidate_locked(c, "%s was called on capturing stream %llu", what, (unsigned long long)stream->id);
        pthread_mutex_unlock(&dev->cap_lock);
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                         "%s is not allowed while stream %llu is capturing (capture begun on stream "
                         "%llu); the capture is invalidated",
                         what, (unsigned long long)stream->id, (unsigned long long)origin);
    }
    pthread_mutex_unlock(&dev->cap_lock);
    return rt_unsafe_call(dev, what);
}

cge_status rt_event_unsafe_slow(cge_event *event, const char *what)
{
    cge_device *dev = event->dev;
    pthread_mutex_lock(&dev->cap_lock);
    rt_capture *c = event->cap;
    if (c) {
        uint64_t origin = c->origin_id;
        invalidate_locked(c, "%s was called on event %llu, recorded in the capture", what,
                          (unsigned long long)event->id);
        pthread_mutex_unlock(&dev->cap_lock);
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                         "%s is not allowed on event %llu: its last record belongs to the capture "
                         "begun on stream %llu, which is now invalidated",
                         what, (unsigned long long)event->id, (unsigned long long)origin);
    }
    pthread_mutex_unlock(&dev->cap_lock);
    return rt_unsafe_call(dev, what);
}

cge_status rt_device_unsafe_slow(cge_device *dev, const char *what)
{
    pthread_mutex_lock(&dev->cap_lock);
    uint64_t origin = 0;
    for (rt_capture *c = dev->captures; c; c = c->next) {
        if (!origin)
            origin = c->origin_id;
        invalidate_locked(c, "%s was called during the capture", what);
    }
    pthread_mutex_unlock(&dev->cap_lock);
    if (!origin)
        return rt_unsafe_call(dev, what);
    return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                     "%s is not allowed while stream %llu is capturing; the capture is invalidated", what,
                     (unsigned long long)origin);
}

cge_status rt_capture_refuse_replay(cge_stream *stream, const cge_ri *ri)
{
    if (!atomic_load_explicit(&stream->hooked, memory_order_acquire))
        return CGE_OK;
    cge_device *dev = stream->dev;
    cge_status st = CGE_OK;
    pthread_mutex_lock(&dev->cap_lock);
    if (stream->cap) {
        st = refuse_locked(stream->cap, CGE_ERR_STATE,
                           "cge_ri_execute_async: ri#%llu cannot be replayed into stream %llu while it "
                           "is capturing",
                           (unsigned long long)ri->id, (unsigned long long)stream->id);
    } else if (stream->update) {
        st = cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                       "cge_ri_execute_async: stream %llu is re-recording task group %d of ri#%llu; end "
                       "the update first",
                       (unsigned long long)stream->id, stream->update->group,
                       (unsigned long long)stream->update->ri->id);
    }
    pthread_mutex_unlock(&dev->cap_lock);
    return st;
}

/* ---- begin / end / status --------------------------------------------------- */

cge_status cge_stream_begin_capture(cge_stream *stream, cge_capture_mode mode)
{
    if (!stream)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_stream_begin_capture: stream is NULL");
    if ((int)mode < CGE_CAPTURE_GLOBAL || (int)mode > CGE_CAPTURE_RELAXED)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_stream_begin_capture: invalid capture mode %d on stream %llu", (int)mode,
                         (unsigned long long)stream->id);
    if (stream->immediate)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_UNSUPPORTED,
                         "cge_stream_begin_capture: stream %llu is immediate; it runs work at once "
                         "and cannot record it", (unsigned long long)stream->id);
    cge_device *dev = stream->dev;
    rt_capture *c = calloc(1, sizeof *c);
    if (!c)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "cge_stream_begin_capture: out of memory");
    c->dev = dev;
    c->origin = stream;
    c->origin_id = stream->id;
    c->mode = mode;
    c->owner = pthread_self();
    pthread_mutex_lock(&dev->cap_lock);
    cge_status st = CGE_OK;
    if (stream->cap) {
        st = cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                       "cge_stream_begin_capture: stream %llu is already capturing (capture begun on "
                       "stream %llu)",
                       (unsigned long long)stream->id, (unsigned long long)stream->cap->origin_id);
    } else if (stream->update) {
        st = cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                       "cge_stream_begin_capture: stream %llu is re-recording a task group of ri#%llu",
                       (unsigned long long)stream->id, (unsigned long long)stream->update->ri->id);
    } else if (!add_stream_locked(c, stream)) {
        st = cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "cge_stream_begin_capture: out of memory");
    }
    if (st != CGE_OK) {
        pthread_mutex_unlock(&dev->cap_lock);
        capture_free(c);
        return st;
    }
    c->next = dev->captures;
    dev->captures = c;
    atomic_fetch_add_explicit(&dev->num_captures, 1, memory_order_relaxed);
    if (mode == CGE_CAPTURE_GLOBAL)
        atomic_fetch_add_explicit(&dev->global_captures, 1, memory_order_relaxed);
    else if (mode == CGE_CAPTURE_THREAD_LOCAL)
        rt_tl_captures++;
    pthread_mutex_unlock(&dev->cap_lock);
    return CGE_OK;
}

/* Every forked stream must have joined back: its last task must be an
 * ancestor of the origin's last task. Program order within a stream makes
 * "ancestor" a prefix, so one reach position per stream suffices. */
static cge_status check_joined(const rt_capture *c)
{
    int32_t n = c->num_streams;
    if (n <= 1)
        return CGE_OK;
    int32_t *reach = malloc((size_t)n * 2 * sizeof *reach);
    if (!reach)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "cge_stream_end_capture: out of memory");
    int32_t *stack = reach + n;
    int32_t top = 0;
    for (int32_t i = 0; i < n; i++)
        reach[i] = -1;
    /* reach[k]: the newest task of stream k known to precede the origin's end;
     * tasks are scanned newest first, stopping at what was scanned before. */
    int32_t *scanned = calloc((size_t)n, sizeof *scanned);
    if (!scanned) {
        free(reach);
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "cge_stream_end_capture: out of memory");
    }
    for (int32_t i = 0; i < n; i++)
        scanned[i] = -1;
    if (c->streams[0].last_task >= 0) {
        reach[0] = c->streams[0].last_task;
        stack[top++] = 0;
    }
    while (top > 0) {
        int32_t k = stack[--top];
        int32_t from = reach[k], stop = scanned[k];
        scanned[k] = from;
        for (int32_t i = from; i > stop; i--) {
            const rt_ri_task *t = &c->tasks[i];
            if (t->stream_index != k || t->t.kind != CGE_TASK_EVENT_WAIT || t->dep < 0)
                continue;
            int32_t j = c->tasks[t->dep].stream_index;
            if (t->dep > reach[j]) {
                bool queued = reach[j] > scanned[j];
                reach[j] = t->dep;
                if (!queued)
                    stack[top++] = j;
            }
        }
    }
    cge_status st = CGE_OK;
    for (int32_t k = 1; k < n && st == CGE_OK; k++) {
        int32_t last = c->streams[k].last_task;
        if (last >= 0 && reach[k] < last)
            st = cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                           "cge_stream_end_capture: stream %llu joined the capture begun on stream %llu "
                           "and has not joined back: record an event on stream %llu after its last "
                           "work and wait on it in stream %llu before ending the capture",
                           (unsigned long long)c->streams[k].id, (unsigned long long)c->origin_id,
                           (unsigned long long)c->streams[k].id, (unsigned long long)c->origin_id);
    }
    free(scanned);
    free(reach);
    return st;
}

cge_status cge_stream_end_capture(cge_stream *stream, cge_ri **ri)
{
    if (ri)
        *ri = NULL;
    if (!stream)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_stream_end_capture: stream is NULL");
    if (!ri)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_stream_end_capture: ri is NULL");
    cge_device *dev = stream->dev;
    pthread_mutex_lock(&dev->cap_lock);
    rt_capture *c = stream->cap;
    if (!c || c->origin != stream) {
        uint64_t origin = c ? c->origin_id : 0;
        pthread_mutex_unlock(&dev->cap_lock);
        if (!c)
            return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                             "cge_stream_end_capture: stream %llu is not capturing",
                             (unsigned long long)stream->id);
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                         "cge_stream_end_capture: stream %llu joined the capture begun on stream %llu; "
                         "end it on stream %llu",
                         (unsigned long long)stream->id, (unsigned long long)origin,
                         (unsigned long long)origin);
    }
    detach_locked(c);
    pthread_mutex_unlock(&dev->cap_lock);

    cge_status st = CGE_OK;
    if (c->invalid) {
        st = cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                       "cge_stream_end_capture: the capture on stream %llu was invalidated (%s); no RI "
                       "was made",
                       (unsigned long long)stream->id, c->reason);
    }
    for (int32_t k = 0; k < c->num_streams && st == CGE_OK; k++)
        if (c->streams[k].open_group >= 0)
            st = cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                           "cge_stream_end_capture: task group %d begun on stream %llu was never ended",
                           c->streams[k].open_group, (unsigned long long)c->streams[k].id);
    if (st == CGE_OK)
        st = check_joined(c);
    if (st == CGE_OK)
        st = rt_ri_from_capture(c, ri);
    capture_free(c);
    return st;
}

cge_status cge_stream_capture_status(cge_stream *stream, cge_capture_status *status)
{
    if (!stream)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_stream_capture_status: stream is NULL");
    if (!status)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_stream_capture_status: status is NULL");
    *status = CGE_CAPTURE_NONE;
    if (!atomic_load_explicit(&stream->hooked, memory_order_acquire))
        return CGE_OK;
    pthread_mutex_lock(&stream->dev->cap_lock);
    if (stream->cap)
        *status = stream->cap->invalid ? CGE_CAPTURE_INVALIDATED : CGE_CAPTURE_ACTIVE;
    pthread_mutex_unlock(&stream->dev->cap_lock);
    return CGE_OK;
}

/* ---- task groups ------------------------------------------------------------ */

cge_status cge_stream_begin_task_group(cge_stream *stream)
{
    if (!stream)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_stream_begin_task_group: stream is NULL");
    cge_device *dev = stream->dev;
    cge_status st = CGE_OK;
    pthread_mutex_lock(&dev->cap_lock);
    rt_capture *c = stream->cap;
    if (!c) {
        st = cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                       "cge_stream_begin_task_group: stream %llu is not capturing; task groups are "
                       "marked during a capture",
                       (unsigned long long)stream->id);
    } else if (c->invalid) {
        st = invalid_error_locked(c, stream, "cge_stream_begin_task_group");
    } else if (c->streams[stream->cap_index].open_group >= 0) {
        st = cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                       "cge_stream_begin_task_group: stream %llu already records task group %d; groups "
                       "do not nest",
                       (unsigned long long)stream->id, c->streams[stream->cap_index].open_group);
    } else {
        c->streams[stream->cap_index].open_group = c->num_groups++;
    }
    pthread_mutex_unlock(&dev->cap_lock);
    return st;
}

cge_status cge_stream_end_task_group(cge_stream *stream, int32_t *group_id)
{
    if (!stream)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_stream_end_task_group: stream is NULL");
    if (group_id)
        *group_id = -1;
    cge_device *dev = stream->dev;
    cge_status st = CGE_OK;
    pthread_mutex_lock(&dev->cap_lock);
    rt_capture *c = stream->cap;
    if (!c || c->streams[stream->cap_index].open_group < 0) {
        st = cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                       "cge_stream_end_task_group: stream %llu has no task group open",
                       (unsigned long long)stream->id);
    } else {
        if (group_id)
            *group_id = c->streams[stream->cap_index].open_group;
        c->streams[stream->cap_index].open_group = -1;
    }
    pthread_mutex_unlock(&dev->cap_lock);
    return st;
}

/* ---- group updates ------------------------------------------------------------ */

cge_status rt_update_attach(cge_stream *stream, rt_update *u)
{
    cge_device *dev = stream->dev;
    cge_status st = CGE_OK;
    pthread_mutex_lock(&dev->cap_lock);
    if (stream->cap)
        st = cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                       "cge_ri_update_begin: stream %llu is capturing; re-record a group on a stream "
                       "that is not",
                       (unsigned long long)stream->id);
    else if (stream->update)
        st = cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                       "cge_ri_update_begin: stream %llu already re-records task group %d of ri#%llu",
                       (unsigned long long)stream->id, stream->update->group,
                       (unsigned long long)stream->update->ri->id);
    else {
        stream->update = u;
        u->stream = stream;
        u->stream_id = stream->id;
        atomic_store_explicit(&stream->hooked, 1, memory_order_release);
    }
    pthread_mutex_unlock(&dev->cap_lock);
    return st;
}

void rt_update_detach(cge_device *dev, rt_update *u)
{
    pthread_mutex_lock(&dev->cap_lock);
    if (u->stream) {
        u->stream->update = NULL;
        atomic_store_explicit(&u->stream->hooked, 0, memory_order_release);
        u->stream = NULL;
    }
    pthread_mutex_unlock(&dev->cap_lock);
}

/* ---- teardown ------------------------------------------------------------------ */

void rt_capture_stream_gone(cge_stream *stream)
{
    if (!atomic_load_explicit(&stream->hooked, memory_order_acquire))
        return;
    cge_device *dev = stream->dev;
    rt_capture *discard = NULL;
    pthread_mutex_lock(&dev->cap_lock);
    if (stream->update) {
        rt_update *u = stream->update;
        u->stream = NULL;
        if (!u->failed) {
            u->failed = true;
            snprintf(u->reason, sizeof u->reason, "stream %llu was destroyed during the update",
                     (unsigned long long)stream->id);
        }
        stream->update = NULL;
    }
    rt_capture *c = stream->cap;
    if (c && c->origin == stream) {
        /* Without its origin the capture can never end: drop it. */
        detach_locked(c);
        discard = c;
    } else if (c) {
        invalidate_locked(c, "stream %llu, part of the capture, was destroyed", (unsigned long long)stream->id);
        c->streams[stream->cap_index].s = NULL;
        stream->cap = NULL;
    }
    atomic_store_explicit(&stream->hooked, 0, memory_order_release);
    pthread_mutex_unlock(&dev->cap_lock);
    capture_free(discard);
}

void rt_capture_event_gone(cge_event *event)
{
    if (!atomic_load_explicit(&event->cap_marked, memory_order_acquire))
        return;
    cge_device *dev = event->dev;
    pthread_mutex_lock(&dev->cap_lock);
    rt_capture *c = event->cap;
    if (c) {
        for (int32_t i = 0; i < c->num_events; i++)
            if (c->events[i] == event)
                c->events[i] = NULL;
        unmark_event_locked(event);
    }
    pthread_mutex_unlock(&dev->cap_lock);
}

void rt_capture_device_gone(cge_device *dev)
{
    for (;;) {
        pthread_mutex_lock(&dev->cap_lock);
        rt_capture *c = dev->captures;
        if (c)
            detach_locked(c);
        cge_ri *ri = c ? NULL : dev->ris;
        pthread_mutex_unlock(&dev->cap_lock);
        if (c) {
            capture_free(c);
            continue;
        }
        if (!ri)
            break;
        cge_ri_destroy(ri); /* unlinks it from dev->ris */
    }
}
