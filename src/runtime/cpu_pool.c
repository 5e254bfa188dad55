/* The CPU core pool: num_threads workers run the tasks of every stream, a
 * stream handed to one worker at a time (in-order queue), multi-block launches
 * shared out block by block. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cpu.h"

/* Event waits hold back a stream, never a thread. */

/* Idle workers poll for new work this long before sleeping: enough to catch a
 * submitter issuing launches back to back without a futex wake-up per task,
 * short enough not to burn a core. */
#define CPU_SPIN_NS 5000
/* While a replay runs, its next shared launch usually comes within the time
 * of a few single-block tasks: a worker that slept in between would cost the
 * replaying thread a futex wake-up and the launch its helper for the wake-up
 * latency (tens of microseconds on a loaded machine), on every launch. So an
 * idle worker with a core of its own spins this long instead, and so does a
 * replaying thread waiting for the helpers of a launch to leave. */
#define CPU_REPLAY_SPIN_NS 200000

/* The device whose worker this thread is (NULL on other threads): a replay
 * running on a host thread counts that thread as computing, one on a worker
 * is counted already. */
static _Thread_local const cpu_device *tl_worker_of;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Called about every microsecond of a poll that began at `start`: past the
 * short spin, a poller yields its core each time, so that on a machine busier
 * than the pool (other processes) a long spin hands the core to whoever has
 * work instead of competing with the replaying thread for it. */
static inline void cpu_spin_yield(uint64_t start, uint64_t now)
{
    if (now - start >= CPU_SPIN_NS)
        sched_yield();
}

static void note_work_locked(cpu_device *d, int wanted)
{
    atomic_fetch_add_explicit(&d->work_hint, 1, memory_order_relaxed);
    /* Spinning workers see work_hint (and re-check under the lock before they
     * sleep); only the rest of the wanted need a signal. */
    for (int i = d->spinning; i < wanted && i - d->spinning < d->idle; i++)
        pthread_cond_signal(&d->work_cv);
}

/* `wake`: signal a sleeping worker. A worker re-queueing the stream it just
 * served does not: it takes the next task itself. */
static void push_ready_locked(cpu_device *d, cpu_stream *s, bool wake)
{
    s->queued = true;
    s->next_ready = NULL;
    if (d->ready_tail)
        d->ready_tail->next_ready = s;
    else
        d->ready_head = s;
    d->ready_tail = s;
    note_work_locked(d, wake ? 1 : 0);
}

static cpu_stream *pop_ready_locked(cpu_device *d)
{
    cpu_stream *s = d->ready_head;
    if (s) {
        d->ready_head = s->next_ready;
        if (!d->ready_head)
            d->ready_tail = NULL;
        s->next_ready = NULL;
        s->queued = false;
    }
    return s;
}

static void advance_locked(cpu_device *d, cpu_stream *s, bool wake);

/* Streams blocked on `e` whose wait is now satisfied go on. */
static void wake_event_waiters_locked(cpu_device *d, cpu_event *e)
{
    cpu_stream **link = &e->waiters;
    cpu_stream *ready = NULL;
    while (*link) {
        cpu_stream *w = *link;
        if (w->head->gen <= e->completed_gen) {
            *link = w->next_blocked;
            w->blocked_on = NULL;
            w->next_blocked = ready;
            ready = w;
        } else {
            link = &w->next_blocked;
        }
    }
    /* Advance after unlinking: advancing may record events (and so reach this
     * function again) and must not meet a half-edited list. */
    while (ready) {
        cpu_stream *w = ready;
        ready = w->next_blocked;
        w->next_blocked = NULL;
        advance_locked(d, w, true);
    }
}

/* Pops the finished head of `s` and does the bookkeeping its kind needs. */
static void finish_head_locked(cpu_device *d, cpu_stream *s)
{
    cpu_task *t = s->head;
    s->head = t->next;
    if (!s->head)
        s->tail = NULL;
    s->completed++;
    d->outstanding--;
    atomic_fetch_add_explicit(&d->done_hint, 1, memory_order_relaxed);

    if (t->t.kind == CGE_TASK_EVENT_RECORD) {
        cpu_event *e = cpu_evt(t->t.u.event.event);
        /* An older record finishing late (on a slower stream) must not
         * replace the newer point. */
        if (t->gen > e->completed_gen) {
            e->completed_gen = t->gen;
            e->time_ns = t->time_ns;
            if (e->sync_waiters)
                pthread_cond_broadcast(&d->done_cv);
            if (e->waiters)
                wake_event_waiters_locked(d, e);
        }
        cpu_event_unref_locked(d, e);
    } else if (t->t.kind == CGE_TASK_EVENT_WAIT) {
        cpu_event_unref_locked(d, cpu_evt(t->t.u.event.event));
    }
    cpu_task_put(d, t);

    if (s->sync_waiters && s->completed >= s->wake_at) {
        s->wake_at = UINT64_MAX;
        pthread_cond_broadcast(&d->done_cv);
    }
    if (d->dev_sync_waiters && d->outstanding == 0)
        pthread_cond_broadcast(&d->done_cv);
}

/* Moves `s` on as far as it can go without a worker: satisfied waits and
 * event records complete here; the next real task puts the stream on the
 * ready list; an unsatisfied wait parks it on the event. */
static void advance_locked(cpu_device *d, cpu_stream *s, bool wake)
{
    while (s->head && !s->running && !s->blocked_on && !s->queued) {
        cpu_task *t = s->head;
        if (t->t.kind == CGE_TASK_EVENT_WAIT) {
            cpu_event *e = cpu_evt(t->t.u.event.event);
            if (e->completed_gen >= t->gen) {
                finish_head_locked(d, s);
                continue;
            }
            s->blocked_on = e;
            s->next_blocked = e->waiters;
            e->waiters = s;
            return;
        }
        if (t->t.kind == CGE_TASK_EVENT_RECORD) {
            cpu_run_task(t);
            finish_head_locked(d, s);
            continue;
        }
        push_ready_locked(d, s, wake);
        return;
    }
}

void cpu_enqueue_locked(cpu_device *d, cpu_stream *s, cpu_task *t)
{
    t->next = NULL;
    t->stream = s;
    if (s->tail)
        s->tail->next = t;
    else
        s->head = t;
    s->tail = t;
    s->submitted++;
    d->outstanding++;
    advance_locked(d, s, true);
}

/* A worker leaves a multi-block launch; the last one out completes it. */
static void leave_launch_locked(cpu_device *d, cpu_task *t)
{
    for (cpu_task **link = &d->active; *link; link = &(*link)->next_active) {
        if (*link == t) {
            *link = t->next_active;
            break;
        }
    }
    if (--t->participants > 0)
        return;
    cpu_stream *s = t->stream;
    if (!s) {
        /* A launch shared out by a replay: its owner waits (polling done_hint
         * first) for the last helper. */
        atomic_fetch_add_explicit(&d->done_hint, 1, memory_order_relaxed);
        pthread_cond_broadcast(&d->done_cv);
        return;
    }
    s->running = false;
    finish_head_locked(d, s);
    advance_locked(d, s, false);
}

/* Finds something for a worker to do, under the lock; false if nothing. */
static bool work_once_locked(cpu_device *d)
{
    while (d->active) {
        cpu_task *t = d->active;
        if (atomic_load_explicit(&t->next_block, memory_order_relaxed) >= t->t.u.launch.num_blocks) {
            d->active = t->next_active;
            continue;
        }
        t->participants++;
        d->busy++;
        pthread_mutex_unlock(&d->lock);
        cpu_run_blocks(t);
        pthread_mutex_lock(&d->lock);
        d->busy--;
        leave_launch_locked(d, t);
        return true;
    }
    cpu_stream *s = pop_ready_locked(d);
    if (!s)
        return false;
    cpu_task *t = s->head;
    s->running = true;
    d->busy++;
    if (t->t.kind == CGE_TASK_KERNEL && t->t.u.launch.num_blocks > 1) {
        atomic_store_explicit(&t->next_block, 0, memory_order_relaxed);
        /* Claim blocks in chunks when there are many, so that tiny blocks do
         * not all meet on one atomic; about 8 chunks per worker still balance
         * uneven blocks. */
        int64_t per = t->t.u.launch.num_blocks / ((int64_t)d->num_workers * 8);
        t->chunk = per > 1 ? per : 1;
        t->participants = 1;
        t->next_active = d->active;
        d->active = t;
        int64_t helpers = t->t.u.launch.num_blocks - 1;
        note_work_locked(d, helpers > d->num_workers ? d->num_workers : (int)helpers);
        pthread_mutex_unlock(&d->lock);
        cpu_run_blocks(t);
        pthread_mutex_lock(&d->lock);
        d->busy--;
        leave_launch_locked(d, t);
        return true;
    }
    pthread_mutex_unlock(&d->lock);
    cpu_run_task(t);
    pthread_mutex_lock(&d->lock);
    d->busy--;
    s->running = false;
    finish_head_locked(d, s);
    advance_locked(d, s, false);
    return true;
}

static void poll_done_locked(cpu_device *d, uint64_t spin_ns);

/* A multi-block launch inside a replay: shared with idle workers through the
 * active list exactly like a queued launch, except that no stream owns it; the
 * replaying worker takes blocks too and waits for the helpers to leave. */
static void run_shared_launch(cpu_device *d, const cge__task *task)
{
    int64_t n = task->u.launch.num_blocks;
    if (d->num_workers <= 1) {
        for (int64_t b = 0; b < n; b++)
            task->u.launch.fn(b, n, (void *)task->u.launch.args);
        return;
    }
    cpu_task t;
    t.t = *task;
    t.t.cancel = rt_tl_cancel; /* the replay's, not the capture's */
    t.stream = NULL;
    t.fail_stream = rt_current_stream;
    t.next = NULL;
    t.args_heap = NULL;
    atomic_init(&t.next_block, 0);
    int64_t per = n / ((int64_t)d->num_workers * 8);
    t.chunk = per > 1 ? per : 1;
    /* On a host thread: the OpenMP team its oneDNN calls use, if it has one
     * and its gate is open (cpu_team.c; CGE_OPENMP_TEAM=0: never). */
    if (tl_worker_of != d && cpu_team_run(d, &t))
        return;
    pthread_mutex_lock(&d->lock);
    t.participants = 1;
    t.next_active = d->active;
    d->active = &t;
    /* The replaying thread works too (a worker, or a host thread replaying
     * inline in cge_ri_execute): wake at most the other workers, so that no
     * more threads compute than the pool has. */
    int helpers = d->num_workers - 1;
    note_work_locked(d, n - 1 > helpers ? helpers : (int)(n - 1));
    pthread_mutex_unlock(&d->lock);
    cpu_run_blocks(&t);
    pthread_mutex_lock(&d->lock);
    leave_launch_locked(d, &t);
    /* The helpers are at their last blocks: poll for them before sleeping. */
    bool polled = false;
    while (t.participants > 0) {
        if (!polled) {
            polled = true;
            poll_done_locked(d, CPU_REPLAY_SPIN_NS);
            continue;
        }
        pthread_cond_wait(&d->done_cv, &d->lock);
    }
    pthread_mutex_unlock(&d->lock);
}

/* The device whose burst this thread is in (cpu_burst), and how deep. */
static _Thread_local const cpu_device *tl_burst_of;
static _Thread_local int tl_burst_depth;

/* A thread running task lists (a replay, or a burst of it) counts as one
 * replay, and a host thread as computing too: idle workers long-spin
 * through the gaps between its shared launches. */
static void replay_enter(cpu_device *d)
{
    atomic_fetch_add_explicit(&d->replays, 1, memory_order_relaxed);
    if (tl_worker_of != d) {
        pthread_mutex_lock(&d->lock);
        d->busy++;
        pthread_mutex_unlock(&d->lock);
    }
}

static void replay_leave(cpu_device *d)
{
    if (tl_worker_of != d) {
        pthread_mutex_lock(&d->lock);
        d->busy--;
        pthread_mutex_unlock(&d->lock);
    }
    atomic_fetch_sub_explicit(&d->replays, 1, memory_order_relaxed);
}

void cpu_burst(cge_device *dev, bool begin)
{
    cpu_device *d = cpu_dev(dev);
    if (tl_burst_of && tl_burst_of != d)
        return;   /* inside another device's burst: this one is not counted */
    if (begin) {
        if (tl_burst_depth++ == 0) {
            tl_burst_of = d;
            replay_enter(d);
        }
    } else if (tl_burst_of == d && --tl_burst_depth == 0) {
        replay_leave(d);
        tl_burst_of = NULL;
    }
}

void cpu_run_tasks(cge_device *dev, const cge__task *tasks, size_t n)
{
    cpu_device *d = cpu_dev(dev);
    bool counted = tl_burst_of != d;   /* a burst counts its thread already */
    if (counted)
        replay_enter(d);
    for (size_t i = 0; i < n; i++) {
        const cge__task *t = &tasks[i];
        /* Under the token of whoever replays (or submits to an immediate
         * stream): the rest of a cancelled list's work is skipped. */
        if (t->kind != CGE_TASK_HOST_FUNC && t->kind != CGE_TASK_EVENT_RECORD &&
            t->kind != CGE_TASK_EVENT_WAIT && rt_cancel_due(rt_tl_cancel)) {
            rt_cancel_report(rt_tl_cancel);
            continue;
        }
        switch (t->kind) {
        case CGE_TASK_KERNEL:
            if (t->u.launch.num_blocks == 1)
                t->u.launch.fn(0, 1, (void *)t->u.launch.args);
            else
                run_shared_launch(d, t);
            break;
        case CGE_TASK_MEMCPY:
            memmove(t->u.copy.dst, t->u.copy.src, t->u.copy.bytes);
            break;
        case CGE_TASK_MEMSET:
            memset(t->u.fill.dst, t->u.fill.value, t->u.fill.bytes);
            break;
        case CGE_TASK_HOST_FUNC:
            t->u.host.fn(t->u.host.user);
            break;
        case CGE_TASK_EVENT_RECORD:
        case CGE_TASK_EVENT_WAIT:
            break; /* dependencies are kept by the replay order */
        }
    }
    if (counted)
        replay_leave(d);
}

static void *worker_main(void *arg)
{
    cpu_device *d = arg;
    bool spun = false;
    tl_worker_of = d;
    pthread_mutex_lock(&d->lock);
    for (;;) {
        if (work_once_locked(d)) {
            spun = false;
            continue;
        }
        if (d->stopping)
            break;
        /* One spinner is enough to pick up the next task quickly; the others
         * sleep at once so that an idle pool costs nothing. */
        if (!spun && d->spinning == 0) {
            d->spinning++;
            uint64_t hint = atomic_load_explicit(&d->work_hint, memory_order_relaxed);
            /* During a replay the next shared launch comes soon: spin long
             * then, if that leaves a core to this worker. (Not for queued
             * plan steps: measured no faster there, and beside oneDNN's own
             * threads it costs the CNNs.) */
            bool long_spin = atomic_load_explicit(&d->replays, memory_order_relaxed) > 0 &&
                             d->busy < d->num_workers;
            pthread_mutex_unlock(&d->lock);
            uint64_t start = cpu_now_ns();
            uint64_t until = start + (long_spin ? CPU_REPLAY_SPIN_NS : CPU_SPIN_NS);
            for (unsigned i = 1;; i++) {
                if (atomic_load_explicit(&d->work_hint, memory_order_relaxed) != hint)
                    break;
                cpu_relax();
                if (i % 32 == 0) {
                    uint64_t now = cpu_now_ns();
                    /* A long spin ends with the replays that justified it. */
                    if (now >= until ||
                        (long_spin && now >= start + CPU_SPIN_NS &&
                         atomic_load_explicit(&d->replays, memory_order_relaxed) == 0))
                        break;
                    cpu_spin_yield(start, now);
                }
            }
            pthread_mutex_lock(&d->lock);
            d->spinning--;
            spun = true;
            continue;
        }
        d->idle++;
        pthread_cond_wait(&d->work_cv, &d->lock);
        d->idle--;
        spun = false;
    }
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

cge_status cpu_pool_start(cpu_device *d)
{
    d->workers = calloc((size_t)d->base.num_threads, sizeof *d->workers);
    if (!d->workers)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "device create: out of memory");
    for (int i = 0; i < d->base.num_threads; i++) {
        if (pthread_create(&d->workers[i], NULL, worker_main, d) != 0) {
            cpu_pool_stop(d);
            return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INTERNAL,
                             "device create: cannot start worker thread %d of %d", i,
                             d->base.num_threads);
        }
        d->num_workers++;
        char name[16]; /* the kernel's limit, NUL included */
        snprintf(name, sizeof name, "cge-cpu-%d", i % 10000);
        pthread_setname_np(d->workers[i], name);
    }
    return CGE_OK;
}

void cpu_pool_stop(cpu_device *d)
{
    pthread_mutex_lock(&d->lock);
    cpu_wait_device_locked(d);
    d->stopping = true;
    atomic_fetch_add_explicit(&d->work_hint, 1, memory_order_relaxed);
    pthread_cond_broadcast(&d->work_cv);
    pthread_mutex_unlock(&d->lock);
    for (int i = 0; i < d->num_workers; i++)
        pthread_join(d->workers[i], NULL);
    free(d->workers);
    d->workers = NULL;
    d->num_workers = 0;
}

/* Releases the lock and polls for a task (or a replay's helper) to finish,
 * for at most `spin_ns`: a host that synchronizes right after a short task
 * then returns without the two sleep/wake-up trips through the kernel. */
static void poll_done_locked(cpu_device *d, uint64_t spin_ns)
{
    uint64_t hint = atomic_load_explicit(&d->done_hint, memory_order_relaxed);
    pthread_mutex_unlock(&d->lock);
    uint64_t start = cpu_now_ns(), until = start + spin_ns;
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(&d->done_hint, memory_order_relaxed) != hint)
            break;
        cpu_relax();
        if (i % 32 == 0) {
            uint64_t now = cpu_now_ns();
            if (now >= until)
                break;
            cpu_spin_yield(start, now);
        }
    }
    pthread_mutex_lock(&d->lock);
}

void cpu_wait_stream_locked(cpu_device *d, cpu_stream *s, uint64_t target)
{
    bool polled = false;
    while (s->completed < target) {
        if (!polled) {
            polled = true;
            poll_done_locked(d, CPU_SPIN_NS);
            continue;
        }
        if (target < s->wake_at)
            s->wake_at = target;
        s->sync_waiters++;
        pthread_cond_wait(&d->done_cv, &d->lock);
        s->sync_waiters--;
    }
}

void cpu_wait_event_locked(cpu_device *d, cpu_event *e, uint64_t gen)
{
    while (e->completed_gen < gen) {
        e->sync_waiters++;
        pthread_cond_wait(&d->done_cv, &d->lock);
        e->sync_waiters--;
    }
}

void cpu_wait_device_locked(cpu_device *d)
{
    while (d->outstanding > 0) {
        d->dev_sync_waiters++;
        pthread_cond_wait(&d->done_cv, &d->lock);
        d->dev_sync_waiters--;
    }
}
