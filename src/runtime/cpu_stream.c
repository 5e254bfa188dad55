/* Streams and events of the CPU device: creation, submission (one lock, no
 * allocation for small launches once warm), synchronize and query. */
#include <stdlib.h>
#include <string.h>

#include "runtime/cpu.h"

static void stream_link_locked(cpu_device *d, cpu_stream *s)
{
    s->prev_all = NULL;
    s->next_all = d->streams;
    if (d->streams)
        d->streams->prev_all = s;
    d->streams = s;
}

static void stream_unlink_locked(cpu_device *d, cpu_stream *s)
{
    if (s->prev_all)
        s->prev_all->next_all = s->next_all;
    else
        d->streams = s->next_all;
    if (s->next_all)
        s->next_all->prev_all = s->prev_all;
}

cge_status cpu_stream_create(cge_device *dev, cge_stream **out)
{
    cpu_device *d = cpu_dev(dev);
    cpu_stream *s = calloc(1, sizeof *s);
    if (!s)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "cge_stream_create: out of memory");
    s->base.dev = dev;
    s->wake_at = UINT64_MAX;
    pthread_mutex_lock(&d->lock);
    s->base.id = ++d->next_stream_id;
    stream_link_locked(d, s);
    pthread_mutex_unlock(&d->lock);
    *out = &s->base;
    return CGE_OK;
}

void cpu_stream_destroy(cge_stream *stream)
{
    cpu_stream *s = cpu_str(stream);
    cpu_device *d = cpu_dev(stream->dev);
    pthread_mutex_lock(&d->lock);
    cpu_wait_stream_locked(d, s, s->submitted);
    stream_unlink_locked(d, s);
    pthread_mutex_unlock(&d->lock);
    free(s);
}

cge_status cpu_stream_submit(cge_stream *stream, const cge__task *task)
{
    cpu_stream *s = cpu_str(stream);
    cpu_device *d = cpu_dev(stream->dev);
    void *heap = NULL;
    size_t args_size = task->kind == CGE_TASK_KERNEL ? task->u.launch.args_size : 0;
    /* Large arguments are copied before taking the lock, to keep it short. */
    if (args_size > CPU_TASK_INLINE_ARGS) {
        heap = malloc(args_size);
        if (!heap)
            return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY,
                             "cge_launch: out of memory copying %zu bytes of arguments on stream %llu",
                             args_size, (unsigned long long)stream->id);
        memcpy(heap, task->u.launch.args, args_size);
    }

    pthread_mutex_lock(&d->lock);
    cpu_task *t = cpu_task_get(d);
    if (!t) {
        pthread_mutex_unlock(&d->lock);
        free(heap);
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "stream %llu: out of memory queueing a task",
                         (unsigned long long)stream->id);
    }
    t->t = *task;
    if (task->kind == CGE_TASK_KERNEL) {
        if (heap) {
            t->args_heap = heap;
            t->t.u.launch.args = heap;
        } else if (args_size) {
            memcpy(t->args_inline, task->u.launch.args, args_size);
            t->t.u.launch.args = t->args_inline;
        } else {
            t->t.u.launch.args = NULL;
        }
    } else if (task->kind == CGE_TASK_EVENT_RECORD || task->kind == CGE_TASK_EVENT_WAIT) {
        cpu_event *e = cpu_evt(task->u.event.event);
        if (task->kind == CGE_TASK_EVENT_RECORD) {
            t->gen = ++e->recorded_gen;
        } else {
            /* Waiting on a never-recorded or already-completed point costs nothing. */
            if (e->recorded_gen == 0 || e->completed_gen >= e->recorded_gen) {
                cpu_task_put(d, t);
                pthread_mutex_unlock(&d->lock);
                return CGE_OK;
            }
            t->gen = e->recorded_gen;
        }
        e->refs++;
    }
    cpu_enqueue_locked(d, s, t);
    pthread_mutex_unlock(&d->lock);
    return CGE_OK;
}

cge_status cpu_stream_synchronize(cge_stream *stream)
{
    cpu_stream *s = cpu_str(stream);
    cpu_device *d = cpu_dev(stream->dev);
    pthread_mutex_lock(&d->lock);
    cpu_wait_stream_locked(d, s, s->submitted);
    pthread_mutex_unlock(&d->lock);
    return CGE_OK;
}

cge_status cpu_stream_query(cge_stream *stream, bool *idle)
{
    cpu_stream *s = cpu_str(stream);
    cpu_device *d = cpu_dev(stream->dev);
    pthread_mutex_lock(&d->lock);
    *idle = s->completed == s->submitted;
    pthread_mutex_unlock(&d->lock);
    return CGE_OK;
}

cge_status cpu_event_create(cge_device *dev, cge_event **out)
{
    cpu_device *d = cpu_dev(dev);
    cpu_event *e = calloc(1, sizeof *e);
    if (!e)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "cge_event_create: out of memory");
    e->base.dev = dev;
    e->refs = 1;
    pthread_mutex_lock(&d->lock);
    e->base.id = ++d->next_event_id;
    e->next_all = d->events;
    if (d->events)
        d->events->prev_all = e;
    d->events = e;
    pthread_mutex_unlock(&d->lock);
    *out = &e->base;
    return CGE_OK;
}

void cpu_event_unref_locked(cpu_device *d, cpu_event *e)
{
    if (--e->refs > 0)
        return;
    if (e->prev_all)
        e->prev_all->next_all = e->next_all;
    else
        d->events = e->next_all;
    if (e->next_all)
        e->next_all->prev_all = e->prev_all;
    free(e);
}

void cpu_event_destroy(cge_event *event)
{
    cpu_event *e = cpu_evt(event);
    cpu_device *d = cpu_dev(event->dev);
    pthread_mutex_lock(&d->lock);
    cpu_wait_event_locked(d, e, e->recorded_gen);
    /* Tasks still queued that name the event (a wait not yet reached, an
     * older record on a slower stream) hold references: it goes with the
     * last of them. */
    cpu_event_unref_locked(d, e);
    pthread_mutex_unlock(&d->lock);
}

cge_status cpu_event_query(cge_event *event, bool *done)
{
    cpu_event *e = cpu_evt(event);
    cpu_device *d = cpu_dev(event->dev);
    pthread_mutex_lock(&d->lock);
    *done = e->completed_gen >= e->recorded_gen;
    pthread_mutex_unlock(&d->lock);
    return CGE_OK;
}

cge_status cpu_event_synchronize(cge_event *event)
{
    cpu_event *e = cpu_evt(event);
    cpu_device *d = cpu_dev(event->dev);
    pthread_mutex_lock(&d->lock);
    cpu_wait_event_locked(d, e, e->recorded_gen);
    pthread_mutex_unlock(&d->lock);
    return CGE_OK;
}

cge_status cpu_event_elapsed_ms(const cge_event *start, const cge_event *end, float *ms)
{
    const cpu_event *a = (const cpu_event *)start;
    const cpu_event *b = (const cpu_event *)end;
    cpu_device *d = cpu_dev(start->dev);
    const cpu_event *pending = NULL;
    pthread_mutex_lock(&d->lock);
    if (a->recorded_gen == 0 || a->completed_gen < a->recorded_gen)
        pending = a;
    else if (b->recorded_gen == 0 || b->completed_gen < b->recorded_gen)
        pending = b;
    uint64_t ta = a->time_ns, tb = b->time_ns;
    bool recorded = pending && pending->recorded_gen != 0;
    uint64_t pending_id = pending ? pending->base.id : 0;
    pthread_mutex_unlock(&d->lock);
    if (pending)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                         "cge_event_elapsed_ms: %s event %llu %s", pending == a ? "start" : "end",
                         (unsigned long long)pending_id,
                         recorded ? "has not completed yet" : "was never recorded");
    *ms = (float)((double)((int64_t)(tb - ta)) / 1e6);
    return CGE_OK;
}
