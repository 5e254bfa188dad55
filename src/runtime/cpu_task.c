/* Executing one CPU task (run_task) and recycling task nodes. Execution does
 * not depend on where the task came from, so captured lists can reuse it. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/cpu.h"

uint64_t cpu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A cancelled launch stops handing out chunks: whoever notices first takes
 * the rest of the blocks (so that every participant stops) and reports it. */
void cpu_run_blocks(cpu_task *t)
{
    cge_stream *outer = rt_current_stream;
    cge_cancel *outer_cancel = rt_tl_cancel;
    rt_current_stream = t->stream ? &t->stream->base : t->fail_stream;
    rt_tl_cancel = t->t.cancel;
    cge_kernel_fn fn = t->t.u.launch.fn;
    int64_t n = t->t.u.launch.num_blocks;
    int64_t chunk = t->chunk;
    void *args = (void *)t->t.u.launch.args;
    for (;;) {
        if (t->t.cancel && rt_cancel_due(t->t.cancel)) {
            if (atomic_exchange_explicit(&t->next_block, n, memory_order_relaxed) < n)
                rt_cancel_report(t->t.cancel);
            break;
        }
        int64_t b = atomic_fetch_add_explicit(&t->next_block, chunk, memory_order_relaxed);
        if (b >= n)
            break;
        int64_t end = n - b < chunk ? n : b + chunk;
        for (; b < end; b++)
            fn(b, n, args);
    }
    rt_current_stream = outer;
    rt_tl_cancel = outer_cancel;
}

/* Kernels and copies under a cancelled token are skipped (reported once per
 * stream: the first failure is the one kept); event tasks and host callbacks
 * always run, callbacks with the token bound so that what they run inside
 * (a replay, a Loop's body) stops too. */
void cpu_run_task(cpu_task *t)
{
    cge_stream *outer = rt_current_stream;
    cge_cancel *outer_cancel = rt_tl_cancel;
    if (t->stream)
        rt_current_stream = &t->stream->base;
    if (t->t.cancel)
        rt_tl_cancel = t->t.cancel;
    if ((t->t.kind == CGE_TASK_KERNEL || t->t.kind == CGE_TASK_MEMCPY ||
         t->t.kind == CGE_TASK_MEMSET) &&
        rt_cancel_due(rt_tl_cancel)) {
        rt_cancel_report(rt_tl_cancel);
        rt_current_stream = outer;
        rt_tl_cancel = outer_cancel;
        return;
    }
    switch (t->t.kind) {
    case CGE_TASK_KERNEL: {
        cge_kernel_fn fn = t->t.u.launch.fn;
        int64_t n = t->t.u.launch.num_blocks;
        void *args = (void *)t->t.u.launch.args;
        for (int64_t b = 0; b < n; b++)
            fn(b, n, args);
        break;
    }
    case CGE_TASK_MEMCPY:
        /* memmove: on the CPU device both sides are host memory, and callers
         * copying within one buffer should not meet undefined behaviour. */
        memmove(t->t.u.copy.dst, t->t.u.copy.src, t->t.u.copy.bytes);
        break;
    case CGE_TASK_MEMSET:
        memset(t->t.u.fill.dst, t->t.u.fill.value, t->t.u.fill.bytes);
        break;
    case CGE_TASK_HOST_FUNC:
        t->t.u.host.fn(t->t.u.host.user);
        break;
    case CGE_TASK_EVENT_RECORD:
        t->time_ns = cpu_now_ns();
        break;
    case CGE_TASK_EVENT_WAIT:
        /* The scheduler only lets a stream past a wait once it is satisfied. */
        break;
    }
    rt_current_stream = outer;
    rt_tl_cancel = outer_cancel;
}

cpu_task *cpu_task_get(cpu_device *d)
{
    cpu_task *t = d->free_tasks;
    if (t) {
        d->free_tasks = t->next;
        d->num_free_tasks--;
    } else {
        t = malloc(sizeof *t);
        if (!t)
            return NULL;
    }
    t->next = NULL;
    t->stream = NULL;
    t->fail_stream = NULL;
    t->gen = 0;
    t->time_ns = 0;
    atomic_init(&t->next_block, 0);
    t->chunk = 1;
    t->participants = 0;
    t->next_active = NULL;
    t->args_heap = NULL;
    return t;
}

void cpu_task_put(cpu_device *d, cpu_task *t)
{
    free(t->args_heap);
    t->args_heap = NULL;
    if (d->num_free_tasks < CPU_TASK_FREE_MAX) {
        t->next = d->free_tasks;
        d->free_tasks = t;
        d->num_free_tasks++;
    } else {
        free(t);
    }
}
