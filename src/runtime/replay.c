/* Replay instances: built from an ended capture, replayed as one stream task;
 * reading and changing recorded tasks; re-recording task groups. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/capture.h"

/* The replay task's worker runs the recorded work back to back
 * (dev->ops->run_tasks), and replays are serialised across streams through an
 * internal event. */

static bool is_work(cge_task_kind k) { return k != CGE_TASK_EVENT_RECORD && k != CGE_TASK_EVENT_WAIT; }

void rt_ri_fill_ranges(cge_ri *ri, int32_t i)
{
    const rt_ri_task *t = &ri->tasks[i];
    if (t->range < 0)
        return;
    rt_range *r = &ri->ranges[t->range];
    if (t->t.kind == CGE_TASK_MEMCPY) {
        r[0] = (rt_range){.ptr = t->t.u.copy.src, .bytes = t->t.u.copy.bytes, .write = false};
        r[1] = (rt_range){.ptr = t->t.u.copy.dst, .bytes = t->t.u.copy.bytes, .write = true};
    } else if (t->t.kind == CGE_TASK_MEMSET) {
        r[0] = (rt_range){.ptr = t->t.u.fill.dst, .bytes = t->t.u.fill.bytes, .write = true};
    }
}

static void ri_free(cge_ri *ri)
{
    for (int32_t i = 0; i < ri->num_tasks; i++)
        rt_task_free_args(&ri->tasks[i]);
    free(ri->tasks);
    free(ri->exec);
    free(ri->stream_ids);
    free(ri->group_off);
    free(ri->group_tasks);
    free(ri->ranges);
    free(ri);
}

static void update_free(rt_update *u)
{
    if (!u)
        return;
    for (int32_t i = 0; i < u->num_tasks; i++)
        rt_task_free_args(&u->tasks[i]);
    free(u->tasks);
    free(u);
}

cge_status rt_ri_from_capture(rt_capture *c, cge_ri **out)
{
    cge_device *dev = c->dev;
    cge_ri *ri = calloc(1, sizeof *ri);
    if (!ri)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "cge_stream_end_capture: out of memory");
    ri->dev = dev;
    /* The tasks move over, arguments included. */
    ri->tasks = c->tasks;
    ri->num_tasks = c->num_tasks;
    c->tasks = NULL;
    c->num_tasks = c->cap_tasks = 0;

    int32_t num_exec = 0, num_ranges = 0, num_grouped = 0;
    for (int32_t i = 0; i < ri->num_tasks; i++) {
        const rt_ri_task *t = &ri->tasks[i];
        num_exec += is_work(t->t.kind);
        num_ranges += t->t.kind == CGE_TASK_MEMCPY ? 2 : t->t.kind == CGE_TASK_MEMSET ? 1 : 0;
        num_grouped += t->group >= 0;
    }
    ri->num_streams = c->num_streams;
    ri->num_groups = c->num_groups;
    ri->stream_ids = malloc((size_t)(c->num_streams ? c->num_streams : 1) * sizeof *ri->stream_ids);
    ri->exec = malloc((size_t)(num_exec ? num_exec : 1) * sizeof *ri->exec);
    ri->ranges = malloc((size_t)(num_ranges ? num_ranges : 1) * sizeof *ri->ranges);
    ri->group_off = calloc((size_t)c->num_groups + 1, sizeof *ri->group_off);
    ri->group_tasks = malloc((size_t)(num_grouped ? num_grouped : 1) * sizeof *ri->group_tasks);
    if (!ri->stream_ids || !ri->exec || !ri->ranges || !ri->group_off || !ri->group_tasks) {
        ri_free(ri);
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "cge_stream_end_capture: out of memory");
    }
    for (int32_t k = 0; k < c->num_streams; k++)
        ri->stream_ids[k] = c->streams[k].id;

    /* Submission order is a topological order of the recording: a wait can
     * only name a record submitted before it. Replaying the work in that
     * order keeps every event dependency (and program order per stream). */
    for (int32_t i = 0; i < ri->num_tasks; i++) {
        rt_ri_task *t = &ri->tasks[i];
        if (is_work(t->t.kind)) {
            t->exec = ri->num_exec;
            ri->exec[ri->num_exec++] = t->t;
        }
        if (t->t.kind == CGE_TASK_MEMCPY || t->t.kind == CGE_TASK_MEMSET) {
            t->range = ri->num_ranges;
            ri->num_ranges += t->t.kind == CGE_TASK_MEMCPY ? 2 : 1;
            rt_ri_fill_ranges(ri, i);
        }
        if (t->group >= 0)
            ri->group_off[t->group + 1]++;
    }
    for (int32_t g = 0; g < ri->num_groups; g++)
        ri->group_off[g + 1] += ri->group_off[g];
    int32_t *fill = calloc((size_t)(ri->num_groups ? ri->num_groups : 1), sizeof *fill);
    if (!fill) {
        ri_free(ri);
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "cge_stream_end_capture: out of memory");
    }
    for (int32_t i = 0; i < ri->num_tasks; i++) {
        int32_t g = ri->tasks[i].group;
        if (g >= 0)
            ri->group_tasks[ri->group_off[g] + fill[g]++] = i;
    }
    free(fill);

    pthread_condattr_t ca;
    bool sync_ok = pthread_condattr_init(&ca) == 0;
    if (sync_ok) {
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        sync_ok = pthread_cond_init(&ri->cv, &ca) == 0;
        pthread_condattr_destroy(&ca);
    }
    if (sync_ok && pthread_mutex_init(&ri->mu, NULL) != 0) {
        pthread_cond_destroy(&ri->cv);
        sync_ok = false;
    }
    if (!sync_ok) {
        ri_free(ri);
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INTERNAL,
                         "cge_stream_end_capture: cannot create the RI's mutex or condition variable");
    }
    cge_status st = dev->ops->event_create(dev, &ri->done_ev);
    if (st != CGE_OK) {
        pthread_mutex_destroy(&ri->mu);
        pthread_cond_destroy(&ri->cv);
        ri_free(ri);
        return st;
    }
    ri->id = atomic_fetch_add_explicit(&dev->next_ri_id, 1, memory_order_relaxed) + 1;
    pthread_mutex_lock(&dev->cap_lock);
    ri->next_all = dev->ris;
    if (dev->ris)
        dev->ris->prev_all = ri;
    dev->ris = ri;
    pthread_mutex_unlock(&dev->cap_lock);
    *out = ri;
    return CGE_OK;
}

/* ---- replay ------------------------------------------------------------------ */

static void replay_finish(cge_ri *ri)
{
    pthread_mutex_lock(&ri->mu);
    ri->finished++;
    if (ri->waiters)
        pthread_cond_broadcast(&ri->cv);
    pthread_mutex_unlock(&ri->mu);
    /* ri may be gone from here on: cge_ri_destroy waits only for `finished`. */
}

static void replay_run(void *user)
{
    cge_ri *ri = user;
    ri->dev->ops->run_tasks(ri->dev, ri->exec, (size_t)ri->num_exec);
    replay_finish(ri);
}

/* Submitted instead of replay_run while hazard checking is on, so that the
 * plain replay never looks at the hazard lock. */
static void replay_run_tracked(void *user)
{
    cge_ri *ri = user;
    ri->dev->ops->run_tasks(ri->dev, ri->exec, (size_t)ri->num_exec);
    rt_hazard_replay_end(ri);
    replay_finish(ri);
}

static cge_status execute_locked(cge_ri *ri, cge_stream *stream, uint64_t *ticket)
{
    cge_device *dev = ri->dev;
    bool tracked = atomic_load_explicit(&dev->hazard_check, memory_order_relaxed);
    if (tracked)
        rt_hazard_replay_begin(ri, stream->id);
    cge_status st = CGE_OK;
    /* A replay on another stream than the previous one waits for it to end;
     * on the same stream, stream order already serialises them. */
    if (ri->last_stream_id != stream->id && ri->submitted > ri->finished) {
        cge__task w = {.kind = CGE_TASK_EVENT_WAIT};
        w.u.event.event = ri->done_ev;
        st = dev->ops->stream_submit(stream, &w);
    }
    if (st == CGE_OK) {
        cge__task h = {.kind = CGE_TASK_HOST_FUNC};
        h.u.host.fn = tracked ? replay_run_tracked : replay_run;
        h.u.host.user = ri;
        h.cancel = rt_tl_cancel; /* the replayed work stops with the submitter's token */
        st = dev->ops->stream_submit(stream, &h);
    }
    if (st != CGE_OK) {
        if (tracked)
            rt_hazard_replay_end(ri);
        return st;
    }
    ri->submitted++;
    ri->last_stream_id = stream->id;
    if (ticket)
        *ticket = ri->submitted;
    cge__task r = {.kind = CGE_TASK_EVENT_RECORD};
    r.u.event.event = ri->done_ev;
    st = dev->ops->stream_submit(stream, &r);
    if (st != CGE_OK) {
        /* The replay is queued but the next one on another stream could not
         * wait for it: keep later replays on this stream. */
        return cge_error(CGE_LAYER_RUNTIME, st,
                         "cge_ri_execute_async: ri#%llu was queued on stream %llu, but marking its end "
                         "failed (%s); replay it on this stream only until it has finished",
                         (unsigned long long)ri->id, (unsigned long long)stream->id, cge_last_error());
    }
    return CGE_OK;
}

cge_status cge_ri_execute_async(cge_ri *ri, cge_stream *stream)
{
    if (!ri)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_ri_execute_async: ri is NULL");
    if (!stream)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_ri_execute_async: stream is NULL");
    if (stream->dev != ri->dev)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_ri_execute_async: stream %llu and ri#%llu belong to different devices",
                         (unsigned long long)stream->id, (unsigned long long)ri->id);
    if (stream->immediate)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_UNSUPPORTED,
                         "cge_ri_execute_async: stream %llu is immediate; replays need a queued stream",
                         (unsigned long long)stream->id);
    cge_status st = rt_capture_refuse_replay(stream, ri);
    if (st != CGE_OK)
        return st;
    pthread_mutex_lock(&ri->mu);
    st = execute_locked(ri, stream, NULL);
    pthread_mutex_unlock(&ri->mu);
    return st;
}

cge_status cge_ri_execute(cge_ri *ri, int64_t timeout_ms)
{
    if (!ri)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_ri_execute: ri is NULL");
    cge_status st = rt_unsafe_call(ri->dev, "cge_ri_execute");
    if (st != CGE_OK)
        return st;
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    if (timeout_ms >= 0) {
        deadline.tv_sec += (time_t)(timeout_ms / 1000);
        deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&ri->mu);
    if (!ri->own_stream)
        st = ri->dev->ops->stream_create(ri->dev, &ri->own_stream);
    if (st == CGE_OK && timeout_ms < 0 && ri->submitted == ri->finished &&
        !atomic_load_explicit(&ri->dev->hazard_check, memory_order_relaxed)) {
        /* Nothing in flight: replay right here instead of handing the work to
         * a worker and sleeping until it is done — the caller would only
         * wait, and two thread hand-offs cost more than a short replay.
         * Holding ri->mu keeps other replays of this RI out meanwhile. */
        cge_stream *outer = rt_current_stream;
        rt_current_stream = ri->own_stream;
        ri->dev->ops->run_tasks(ri->dev, ri->exec, (size_t)ri->num_exec);
        rt_current_stream = outer;
        cge_stream *own = ri->own_stream;
        pthread_mutex_unlock(&ri->mu);
        return rt_stream_take_failure(own);
    }
    uint64_t ticket = 0;
    if (st == CGE_OK)
        st = execute_locked(ri, ri->own_stream, &ticket);
    if (st == CGE_OK) {
        ri->waiters++;
        while (ri->finished < ticket) {
            if (timeout_ms < 0) {
                pthread_cond_wait(&ri->cv, &ri->mu);
            } else if (pthread_cond_timedwait(&ri->cv, &ri->mu, &deadline) == ETIMEDOUT &&
                       ri->finished < ticket) {
                st = cge_error(CGE_LAYER_RUNTIME, CGE_ERR_TIMEOUT,
                               "cge_ri_execute: ri#%llu has not finished within %lld ms (it still "
                               "completes later)",
                               (unsigned long long)ri->id, (long long)timeout_ms);
                break;
            }
        }
        ri->waiters--;
    }
    cge_stream *own = ri->own_stream;
    pthread_mutex_unlock(&ri->mu);
    if (st == CGE_OK && own)
        st = rt_stream_take_failure(own);
    return st;
}

void cge_ri_destroy(cge_ri *ri)
{
    if (!ri)
        return;
    cge_device *dev = ri->dev;
    pthread_mutex_lock(&ri->mu);
    ri->waiters++;
    while (ri->finished < ri->submitted)
        pthread_cond_wait(&ri->cv, &ri->mu);
    ri->waiters--;
    rt_update *u = ri->update;
    ri->update = NULL;
    pthread_mutex_unlock(&ri->mu);
    if (u) {
        rt_update_detach(dev, u);
        update_free(u);
    }
    pthread_mutex_lock(&dev->cap_lock);
    if (ri->prev_all)
        ri->prev_all->next_all = ri->next_all;
    else
        dev->ris = ri->next_all;
    if (ri->next_all)
        ri->next_all->prev_all = ri->prev_all;
    pthread_mutex_unlock(&dev->cap_lock);
    /* Both wait for what is still queued on them (the record after the last
     * replay). */
    dev->ops->event_destroy(ri->done_ev);
    if (ri->own_stream)
        dev->ops->stream_destroy(ri->own_stream);
    pthread_cond_destroy(&ri->cv);
    pthread_mutex_destroy(&ri->mu);
    ri_free(ri);
}

/* ---- task parameters ----------------------------------------------------------- */

int32_t cge_ri_num_tasks(const cge_ri *ri) { return ri ? ri->num_tasks : 0; }

static void params_from_task(const rt_ri_task *t, cge_task_params *p)
{
    memset(p, 0, sizeof *p);
    p->kind = t->t.kind;
    p->stream_index = t->stream_index;
    p->group = t->group;
    switch (t->t.kind) {
    case CGE_TASK_KERNEL:
        p->fn = t->t.u.launch.fn;
        p->num_blocks = t->t.u.launch.num_blocks;
        p->args = t->t.u.launch.args;
        p->args_size = t->t.u.launch.args_size;
        break;
    case CGE_TASK_MEMCPY:
        p->dst = t->t.u.copy.dst;
        p->src = t->t.u.copy.src;
        p->bytes = t->t.u.copy.bytes;
        p->copy_kind = t->t.u.copy.kind;
        break;
    case CGE_TASK_MEMSET:
        p->dst = t->t.u.fill.dst;
        p->value = t->t.u.fill.value;
        p->bytes = t->t.u.fill.bytes;
        break;
    case CGE_TASK_HOST_FUNC:
        p->host_fn = t->t.u.host.fn;
        p->user = t->t.u.host.user;
        break;
    case CGE_TASK_EVENT_RECORD:
    case CGE_TASK_EVENT_WAIT:
        break;
    }
}

cge_status cge_ri_get_task(const cge_ri *ri, int32_t index, cge_task_params *out)
{
    if (!ri)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_ri_get_task: ri is NULL");
    if (!out)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_ri_get_task: out is NULL");
    if (index < 0 || index >= ri->num_tasks)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_ri_get_task: ri#%llu has %d tasks; there is no task %d",
                         (unsigned long long)ri->id, ri->num_tasks, index);
    /* The lock keeps an update swapping tasks in from tearing the read. */
    pthread_mutex_t *mu = (pthread_mutex_t *)&ri->mu;
    pthread_mutex_lock(mu);
    params_from_task(&ri->tasks[index], out);
    pthread_mutex_unlock(mu);
    return CGE_OK;
}

static cge_status in_flight_error(const cge_ri *ri, const char *what)
{
    return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                     "%s: ri#%llu has %llu replays in flight; wait for them before changing its tasks",
                     what, (unsigned long long)ri->id, (unsigned long long)(ri->submitted - ri->finished));
}

/* Checks a new parameter set against task `index`: same structure, valid values. */
static cge_status check_params(cge_ri *ri, int32_t index, const cge_task_params *p)
{
    const rt_ri_task *t = &ri->tasks[index];
    unsigned long long id = (unsigned long long)ri->id;
    if (p->kind != t->t.kind || p->stream_index != t->stream_index || p->group != t->group)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_ri_set_task: ri#%llu task %d is a %s on stream index %d in group %d; the "
                         "new parameters give a %s on stream index %d in group %d: the structure of a "
                         "recorded task cannot change (capture again)",
                         id, index, rt_task_kind_name(t->t.kind), t->stream_index, t->group,
                         rt_task_kind_name(p->kind), p->stream_index, p->group);
    switch (p->kind) {
    case CGE_TASK_KERNEL:
        if (p->fn != t->t.u.launch.fn)
            return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                             "cge_ri_set_task: ri#%llu task %d launches kernel %p; a different kernel "
                             "(%p) changes its structure (capture again)",
                             id, index, (void *)(uintptr_t)t->t.u.launch.fn, (void *)(uintptr_t)p->fn);
        if (p->num_blocks < 1)
            return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                             "cge_ri_set_task: ri#%llu task %d: num_blocks is %lld; a launch needs at "
                             "least 1 block",
                             id, index, (long long)p->num_blocks);
        if (p->args_size > CGE_LAUNCH_MAX_ARGS)
            return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                             "cge_ri_set_task: ri#%llu task %d: %zu bytes of arguments exceed "
                             "CGE_LAUNCH_MAX_ARGS (%d)",
                             id, index, p->args_size, CGE_LAUNCH_MAX_ARGS);
        if (p->args_size && !p->args)
            return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                             "cge_ri_set_task: ri#%llu task %d: args is NULL but args_size is %zu", id,
                             index, p->args_size);
        break;
    case CGE_TASK_MEMCPY: {
        if ((int)p->copy_kind < CGE_MEMCPY_HOST_TO_DEVICE || (int)p->copy_kind > CGE_MEMCPY_HOST_TO_HOST)
            return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                             "cge_ri_set_task: ri#%llu task %d: invalid copy kind %d", id, index,
                             (int)p->copy_kind);
        if (p->bytes && (!p->dst || !p->src))
            return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                             "cge_ri_set_task: ri#%llu task %d: %s is NULL for a copy of %zu bytes", id,
                             index, !p->dst ? "dst" : "src", p->bytes);
        char where[80];
        snprintf(where, sizeof where, "cge_ri_set_task: ri#%llu task %d", id, index);
        if (p->bytes)
            return rt_check_copy_pinned(ri->dev, p->dst, p->src, p->bytes, p->copy_kind, where);
        break;
    }
    case CGE_TASK_MEMSET:
        if (p->bytes && !p->dst)
            return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                             "cge_ri_set_task: ri#%llu task %d: dst is NULL for a fill of %zu bytes", id,
                             index, p->bytes);
        break;
    case CGE_TASK_HOST_FUNC:
        if (p->host_fn != t->t.u.host.fn)
            return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                             "cge_ri_set_task: ri#%llu task %d calls host function %p; a different "
                             "function (%p) changes its structure (capture again)",
                             id, index, (void *)(uintptr_t)t->t.u.host.fn, (void *)(uintptr_t)p->host_fn);
        break;
    case CGE_TASK_EVENT_RECORD:
    case CGE_TASK_EVENT_WAIT:
        break;
    }
    return CGE_OK;
}

/* Makes the replayed copy and the hazard ranges follow task `i`. */
static void task_changed(cge_ri *ri, int32_t i)
{
    const rt_ri_task *t = &ri->tasks[i];
    if (t->exec >= 0)
        ri->exec[t->exec] = t->t;
    rt_ri_fill_ranges(ri, i);
}

cge_status cge_ri_set_task(cge_ri *ri, int32_t index, const cge_task_params *params)
{
    if (!ri)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_ri_set_task: ri is NULL");
    if (!params)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_ri_set_task: params is NULL");
    if (index < 0 || index >= ri->num_tasks)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_ri_set_task: ri#%llu has %d tasks; there is no task %d",
                         (unsigned long long)ri->id, ri->num_tasks, index);
    pthread_mutex_lock(&ri->mu);
    cge_status st = ri->submitted != ri->finished ? in_flight_error(ri, "cge_ri_set_task")
                                                  : check_params(ri, index, params);
    rt_ri_task *t = &ri->tasks[index];
    if (st == CGE_OK && t->t.kind == CGE_TASK_KERNEL) {
        /* A fresh buffer even when the size allows reuse would cost an
         * allocation per call; reuse, but never copy from a buffer onto itself
         * partially (params->args may be the RI's own copy from get_task). */
        size_t n = params->args_size;
        if (n > t->args_cap) {
            void *a = malloc(n);
            if (!a) {
                st = cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY,
                               "cge_ri_set_task: out of memory for %zu bytes of arguments", n);
            } else {
                memcpy(a, params->args, n);
                free((void *)t->t.u.launch.args);
                t->t.u.launch.args = a;
                t->args_cap = n;
            }
        } else if (n && params->args != t->t.u.launch.args) {
            memmove((void *)t->t.u.launch.args, params->args, n);
        }
        if (st == CGE_OK) {
            t->t.u.launch.args_size = n;
            t->t.u.launch.num_blocks = params->num_blocks;
        }
    } else if (st == CGE_OK) {
        switch (t->t.kind) {
        case CGE_TASK_MEMCPY:
            t->t.u.copy.dst = params->dst;
            t->t.u.copy.src = params->src;
            t->t.u.copy.bytes = params->bytes;
            t->t.u.copy.kind = params->copy_kind;
            break;
        case CGE_TASK_MEMSET:
            t->t.u.fill.dst = params->dst;
            t->t.u.fill.value = params->value;
            t->t.u.fill.bytes = params->bytes;
            break;
        case CGE_TASK_HOST_FUNC:
            t->t.u.host.user = params->user;
            break;
        default:
            break;
        }
    }
    if (st == CGE_OK)
        task_changed(ri, index);
    pthread_mutex_unlock(&ri->mu);
    return st;
}

/* ---- task group updates ----------------------------------------------------------- */

cge_status cge_ri_update_begin(cge_ri *ri, int32_t group_id, cge_stream *stream)
{
    if (!ri)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_ri_update_begin: ri is NULL");
    if (!stream)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_ri_update_begin: stream is NULL");
    if (stream->dev != ri->dev)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_ri_update_begin: stream %llu and ri#%llu belong to different devices",
                         (unsigned long long)stream->id, (unsigned long long)ri->id);
    if (stream->immediate)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_UNSUPPORTED,
                         "cge_ri_update_begin: stream %llu is immediate; replays need a queued stream",
                         (unsigned long long)stream->id);
    if (group_id < 0 || group_id >= ri->num_groups)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NOT_FOUND,
                         "cge_ri_update_begin: ri#%llu has %d task groups; there is no group %d",
                         (unsigned long long)ri->id, ri->num_groups, group_id);
    rt_update *u = calloc(1, sizeof *u);
    if (!u)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "cge_ri_update_begin: out of memory");
    u->ri = ri;
    u->group = group_id;
    pthread_mutex_lock(&ri->mu);
    cge_status st = CGE_OK;
    if (ri->update)
        st = cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                       "cge_ri_update_begin: ri#%llu is already re-recording group %d; end that update "
                       "first",
                       (unsigned long long)ri->id, ri->update->group);
    else
        st = rt_update_attach(stream, u);
    if (st == CGE_OK)
        ri->update = u;
    pthread_mutex_unlock(&ri->mu);
    if (st != CGE_OK)
        free(u);
    return st;
}

/* The new tasks must match the group one for one: kind, kernel, host function. */
static cge_status check_update(const cge_ri *ri, const rt_update *u)
{
    unsigned long long id = (unsigned long long)ri->id;
    int32_t off = ri->group_off[u->group], n = ri->group_off[u->group + 1] - off;
    if (u->failed)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                         "cge_ri_update_end: the update of group %d of ri#%llu failed (%s); the RI keeps "
                         "its old tasks",
                         u->group, id, u->reason);
    if (u->num_tasks != n)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_ri_update_end: group %d of ri#%llu has %d tasks but %d were submitted; a "
                         "different task structure needs a new capture (the RI keeps its old tasks)",
                         u->group, id, n, u->num_tasks);
    for (int32_t i = 0; i < n; i++) {
        const rt_ri_task *old = &ri->tasks[ri->group_tasks[off + i]];
        const cge__task *nt = &u->tasks[i].t;
        const char *diff = NULL;
        if (nt->kind != old->t.kind)
            diff = "kind";
        else if (nt->kind == CGE_TASK_KERNEL && nt->u.launch.fn != old->t.u.launch.fn)
            diff = "kernel";
        else if (nt->kind == CGE_TASK_HOST_FUNC && nt->u.host.fn != old->t.u.host.fn)
            diff = "host function";
        if (diff)
            return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                             "cge_ri_update_end: task %d of group %d of ri#%llu (a %s) was re-issued as "
                             "a %s with a different %s; a different task structure needs a new capture "
                             "(the RI keeps its old tasks)",
                             i, u->group, id, rt_task_kind_name(old->t.kind), rt_task_kind_name(nt->kind),
                             diff);
    }
    return CGE_OK;
}

cge_status cge_ri_update_end(cge_ri *ri)
{
    if (!ri)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_ri_update_end: ri is NULL");
    pthread_mutex_lock(&ri->mu);
    rt_update *u = ri->update;
    if (!u) {
        pthread_mutex_unlock(&ri->mu);
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                         "cge_ri_update_end: ri#%llu has no update in progress (call cge_ri_update_begin)",
                         (unsigned long long)ri->id);
    }
    ri->update = NULL;
    rt_update_detach(ri->dev, u);
    cge_status st = check_update(ri, u);
    if (st == CGE_OK && ri->submitted != ri->finished)
        st = in_flight_error(ri, "cge_ri_update_end");
    if (st == CGE_OK) {
        int32_t off = ri->group_off[u->group];
        for (int32_t i = 0; i < u->num_tasks; i++) {
            int32_t idx = ri->group_tasks[off + i];
            rt_ri_task *old = &ri->tasks[idx];
            rt_task_free_args(old);
            old->t = u->tasks[i].t;
            old->args_cap = u->tasks[i].args_cap;
            /* Moved: the update no longer owns these arguments. */
            if (old->t.kind == CGE_TASK_KERNEL)
                u->tasks[i].t.u.launch.args = NULL;
            task_changed(ri, idx);
        }
    }
    pthread_mutex_unlock(&ri->mu);
    update_free(u);
    return st;
}
