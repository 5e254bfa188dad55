/* Public event API: argument checks (NULL handles, events and streams of
 * different devices), then record and wait become stream tasks. */
#include "runtime/device.h"

cge_status cge_event_create(cge_device *dev, cge_event **out)
{
    if (!out)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_event_create: out is NULL");
    *out = NULL;
    if (!dev)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_event_create: device is NULL");
    return dev->ops->event_create(dev, out);
}

void cge_event_destroy(cge_event *event)
{
    if (!event)
        return;
    rt_capture_event_gone(event);
    event->dev->ops->event_destroy(event);
}

static cge_status check_pair(const char *fn, const cge_event *event, const cge_stream *stream)
{
    if (!event)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "%s: event is NULL", fn);
    if (!stream)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "%s: stream is NULL", fn);
    if (event->dev != stream->dev)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "%s: event %llu and stream %llu belong to different devices", fn,
                         (unsigned long long)event->id, (unsigned long long)stream->id);
    return CGE_OK;
}

cge_status cge_event_record(cge_event *event, cge_stream *stream)
{
    cge_status st = check_pair("cge_event_record", event, stream);
    if (st != CGE_OK)
        return st;
    cge__task t = {.kind = CGE_TASK_EVENT_RECORD};
    t.u.event.event = event;
    return rt_submit(stream, &t);
}

cge_status cge_stream_wait_event(cge_stream *stream, cge_event *event)
{
    cge_status st = check_pair("cge_stream_wait_event", event, stream);
    if (st != CGE_OK)
        return st;
    cge__task t = {.kind = CGE_TASK_EVENT_WAIT};
    t.u.event.event = event;
    return rt_submit(stream, &t);
}

cge_status cge_event_query(cge_event *event, bool *done)
{
    if (!event)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_event_query: event is NULL");
    if (!done)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_event_query: done is NULL");
    cge_status st = rt_event_unsafe(event, "event query");
    if (st != CGE_OK)
        return st;
    return event->dev->ops->event_query(event, done);
}

cge_status cge_event_synchronize(cge_event *event)
{
    if (!event)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_event_synchronize: event is NULL");
    cge_status st = rt_event_unsafe(event, "event synchronize");
    if (st != CGE_OK)
        return st;
    return event->dev->ops->event_synchronize(event);
}

cge_status cge_event_elapsed_ms(const cge_event *start, const cge_event *end, float *ms)
{
    if (!start || !end)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_event_elapsed_ms: %s event is NULL",
                         !start ? "start" : "end");
    if (!ms)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_event_elapsed_ms: ms is NULL");
    if (start->dev != end->dev)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_event_elapsed_ms: events %llu and %llu belong to different devices",
                         (unsigned long long)start->id, (unsigned long long)end->id);
    return start->dev->ops->event_elapsed_ms(start, end, ms);
}
