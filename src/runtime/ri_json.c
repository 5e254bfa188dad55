/* JSON dump of a replay instance: its streams with their tasks and
 * parameters, the events recorded in it, the dependency edges between
 * streams, and the task groups. Pointers are written as "0x..." strings. */
#include <inttypes.h>
#include <stdio.h>

#include "runtime/capture.h"

static const char *copy_kind_json(cge_memcpy_kind k)
{
    switch (k) {
    case CGE_MEMCPY_HOST_TO_DEVICE: return "host_to_device";
    case CGE_MEMCPY_DEVICE_TO_HOST: return "device_to_host";
    case CGE_MEMCPY_DEVICE_TO_DEVICE: return "device_to_device";
    case CGE_MEMCPY_HOST_TO_HOST: return "host_to_host";
    }
    return "unknown";
}

static void ptr_json(FILE *f, const char *key, const void *p)
{
    fprintf(f, ", \"%s\": \"0x%" PRIxPTR "\"", key, (uintptr_t)p);
}

static void task_json(FILE *f, const cge_ri *ri, int32_t i)
{
    const rt_ri_task *t = &ri->tasks[i];
    fprintf(f, "{\"index\": %d, \"kind\": \"%s\", \"stream\": %d, \"group\": %d", i,
            rt_task_kind_name(t->t.kind), t->stream_index, t->group);
    switch (t->t.kind) {
    case CGE_TASK_KERNEL: {
        ptr_json(f, "fn", (const void *)(uintptr_t)t->t.u.launch.fn);
        fprintf(f, ", \"num_blocks\": %" PRId64 ", \"args_size\": %zu, \"args\": \"", t->t.u.launch.num_blocks,
                t->t.u.launch.args_size);
        const unsigned char *a = t->t.u.launch.args;
        for (size_t k = 0; k < t->t.u.launch.args_size; k++)
            fprintf(f, "%02x", a[k]);
        fputc('"', f);
        break;
    }
    case CGE_TASK_MEMCPY:
        ptr_json(f, "dst", t->t.u.copy.dst);
        ptr_json(f, "src", t->t.u.copy.src);
        fprintf(f, ", \"bytes\": %zu, \"copy_kind\": \"%s\"", t->t.u.copy.bytes, copy_kind_json(t->t.u.copy.kind));
        break;
    case CGE_TASK_MEMSET:
        ptr_json(f, "dst", t->t.u.fill.dst);
        fprintf(f, ", \"value\": %d, \"bytes\": %zu", t->t.u.fill.value, t->t.u.fill.bytes);
        break;
    case CGE_TASK_HOST_FUNC:
        ptr_json(f, "fn", (const void *)(uintptr_t)t->t.u.host.fn);
        ptr_json(f, "user", t->t.u.host.user);
        break;
    case CGE_TASK_EVENT_RECORD:
        fprintf(f, ", \"event\": %" PRIu64, t->event_id);
        break;
    case CGE_TASK_EVENT_WAIT:
        fprintf(f, ", \"event\": %" PRIu64 ", \"waits_for\": %d", t->event_id, t->dep);
        break;
    }
    fputc('}', f);
}

cge_status cge_ri_dump_json(const cge_ri *ri, FILE *f)
{
    if (!ri)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_ri_dump_json: ri is NULL");
    if (!f)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_ri_dump_json: file is NULL");
    pthread_mutex_t *mu = (pthread_mutex_t *)&ri->mu;
    pthread_mutex_lock(mu);
    fprintf(f, "{\n  \"ri\": %" PRIu64 ",\n  \"num_tasks\": %d,\n  \"num_streams\": %d,\n  \"streams\": [", ri->id,
            ri->num_tasks, ri->num_streams);
    for (int32_t k = 0; k < ri->num_streams; k++) {
        fprintf(f, "%s\n    {\"index\": %d, \"stream_id\": %" PRIu64 ", \"tasks\": [", k ? "," : "", k,
                ri->stream_ids[k]);
        bool first = true;
        for (int32_t i = 0; i < ri->num_tasks; i++) {
            if (ri->tasks[i].stream_index != k)
                continue;
            fprintf(f, "%s\n      ", first ? "" : ",");
            task_json(f, ri, i);
            first = false;
        }
        fprintf(f, "%s]}", first ? "" : "\n    ");
    }
    fprintf(f, "%s],\n  \"events\": [", ri->num_streams ? "\n  " : "");
    bool first = true;
    for (int32_t i = 0; i < ri->num_tasks; i++) {
        const rt_ri_task *t = &ri->tasks[i];
        if (t->t.kind != CGE_TASK_EVENT_RECORD)
            continue;
        fprintf(f, "%s\n    {\"event\": %" PRIu64 ", \"record_task\": %d, \"stream\": %d}", first ? "" : ",",
                t->event_id, i, t->stream_index);
        first = false;
    }
    fprintf(f, "%s],\n  \"dependencies\": [", first ? "" : "\n  ");
    first = true;
    for (int32_t i = 0; i < ri->num_tasks; i++) {
        const rt_ri_task *t = &ri->tasks[i];
        if (t->t.kind != CGE_TASK_EVENT_WAIT || t->dep < 0)
            continue;
        fprintf(f,
                "%s\n    {\"from_task\": %d, \"from_stream\": %d, \"to_task\": %d, \"to_stream\": %d, "
                "\"event\": %" PRIu64 "}",
                first ? "" : ",", t->dep, ri->tasks[t->dep].stream_index, i, t->stream_index, t->event_id);
        first = false;
    }
    fprintf(f, "%s],\n  \"groups\": [", first ? "" : "\n  ");
    for (int32_t g = 0; g < ri->num_groups; g++) {
        fprintf(f, "%s\n    {\"group\": %d, \"tasks\": [", g ? "," : "", g);
        for (int32_t j = ri->group_off[g]; j < ri->group_off[g + 1]; j++)
            fprintf(f, "%s%d", j > ri->group_off[g] ? ", " : "", ri->group_tasks[j]);
        fputs("]}", f);
    }
    fprintf(f, "%s]\n}\n", ri->num_groups ? "\n  " : "");
    pthread_mutex_unlock(mu);
    if (ferror(f))
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_IO, "cge_ri_dump_json: writing ri#%" PRIu64 " failed", ri->id);
    return CGE_OK;
}
