/* The CPU device's internal state: queued task nodes, streams, events and the
 * core pool that runs every stream's tasks. One mutex per device guards all of
 * the scheduling state; the work itself runs outside it. */
#ifndef CGE_RUNTIME_CPU_H
#define CGE_RUNTIME_CPU_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>

#include "runtime/device.h"

/* Launch arguments up to this size live inside the task node, so a typical
 * launch costs no allocation once the node free list is warm. */
#define CPU_TASK_INLINE_ARGS 128
/* Task nodes kept for reuse per device. */
#define CPU_TASK_FREE_MAX 1024

typedef struct cpu_stream cpu_stream;
typedef struct cpu_event cpu_event;

/* A task as queued: plain data, executable by run_task wherever it came from
 * (a stream queue now; a captured list later). */
typedef struct cpu_task {
    struct cpu_task *next;   /* stream queue / free list */
    cge__task t;              /* t.u.launch.args points at args_inline or args_heap */
    cpu_stream *stream;
    cge_stream *fail_stream; /* where cge_kernel_fail reports when stream is NULL (replays) */
    uint64_t gen;            /* RECORD: event generation recorded; WAIT: generation awaited */
    uint64_t time_ns;        /* RECORD: CLOCK_MONOTONIC when it ran */
    /* Multi-block launch in flight: blocks are claimed through next_block by
     * every worker that joins; `participants` (under the device lock) counts
     * the workers still inside, and the last one out completes the task. */
    atomic_int_fast64_t next_block;
    int64_t chunk;           /* blocks claimed at a time */
    int participants;
    struct cpu_task *next_active;
    void *args_heap;
    alignas(max_align_t) unsigned char args_inline[CPU_TASK_INLINE_ARGS];
} cpu_task;

struct cpu_stream {
    cge_stream base;
    cpu_task *head, *tail;     /* pending tasks; the head may be running */
    uint64_t submitted;        /* tasks queued so far */
    uint64_t completed;        /* tasks finished so far (they finish in order) */
    bool running;              /* the head is on a worker */
    bool queued;               /* on the device's ready list */
    cpu_event *blocked_on;     /* the head is a WAIT on this event */
    cpu_stream *next_ready;
    cpu_stream *next_blocked;  /* in blocked_on's waiter list */
    int sync_waiters;          /* host threads in stream synchronize */
    uint64_t wake_at;          /* wake them once `completed` reaches this */
    cpu_stream *prev_all, *next_all;
};

struct cpu_event {
    cge_event base;
    uint64_t recorded_gen;   /* generation of the latest record call; 0: never */
    /* Newest generation whose record task has run. A wait for generation g
     * passes once completed_gen >= g: when an event is re-recorded on another
     * stream and the newer record finishes first, older points count as
     * passed too (the event follows its newest record). */
    uint64_t completed_gen;
    uint64_t time_ns;        /* completion time of completed_gen */
    int refs;                /* the handle plus every queued RECORD/WAIT task */
    int sync_waiters;
    cpu_stream *waiters;     /* streams whose head waits on this event */
    cpu_event *prev_all, *next_all;
};

typedef struct cpu_device {
    cge_device base;
    pthread_mutex_t lock;
    pthread_cond_t work_cv; /* idle workers */
    pthread_cond_t done_cv; /* host threads in a synchronize call */
    pthread_t *workers;
    int num_workers;
    int idle;               /* workers asleep on work_cv */
    int spinning;           /* workers polling work_hint before they sleep */
    /* Threads computing now: workers inside a task or a launch's blocks, plus
     * host threads replaying inline (cge_ri_execute). An idle worker spins
     * long only while that leaves it a core of its own. */
    int busy;
    /* Replays whose work is running (cpu_run_tasks), and threads in a burst
     * of immediate submissions (cpu_burst: a plan run inline): their shared
     * launches follow each other closely, so idle workers spin through the
     * gaps. */
    atomic_int replays;
    bool stopping;
    /* Bumped whenever work appears, so a spinning worker notices without the lock. */
    atomic_uint_fast64_t work_hint;
    /* Bumped whenever a task finishes, for a synchronizing host's short poll. */
    atomic_uint_fast64_t done_hint;

    cpu_stream *ready_head, *ready_tail;
    cpu_task *active;       /* multi-block launches with blocks left to claim */
    uint64_t outstanding;   /* tasks submitted and not yet finished, all streams */
    int dev_sync_waiters;

    cpu_task *free_tasks;
    int num_free_tasks;
    uint64_t next_stream_id, next_event_id;
    cpu_stream *streams;    /* every live stream, for device destroy */
    cpu_event *events;
} cpu_device;

static inline cpu_device *cpu_dev(cge_device *d) { return (cpu_device *)d; }
static inline cpu_stream *cpu_str(cge_stream *s) { return (cpu_stream *)s; }
static inline cpu_event *cpu_evt(cge_event *e) { return (cpu_event *)e; }

uint64_t cpu_now_ns(void);

/* cpu_task.c: the work of a task, without the lock. A launch runs all of its
 * blocks here (the pool spreads multi-block launches itself). */
void cpu_run_task(cpu_task *t);
/* Runs blocks of a multi-block launch until none is left to claim. */
void cpu_run_blocks(cpu_task *t);
/* Node allocation; both under the device lock (the free list is per device). */
cpu_task *cpu_task_get(cpu_device *d);
void cpu_task_put(cpu_device *d, cpu_task *t);

/* cpu_team.c: runs a multi-block launch on the calling thread's OpenMP team
 * where it can (not CGE_OPENMP_TEAM=0, libgomp in the process, spinning
 * between regions, the gate open): true when every block ran, false when the
 * pool must take it. */
bool cpu_team_run(cpu_device *d, cpu_task *t);
/* The team's gate (cpu_team.c): closed for a back-off after a launch whose
 * caller waited for a team thread that had not started. Times in ns. */
typedef struct cpu_team_gate {
    atomic_int_fast64_t closed_until_ns, backoff_ns, late;
} cpu_team_gate;
bool cpu_team_gate_open(const cpu_team_gate *g, int64_t now_ns);
void cpu_team_gate_note(cpu_team_gate *g, int64_t now_ns, bool late);
/* Whether a region was held up by a late team thread: one arrived after the
 * caller's blocks were done, and the caller waited past the threshold. */
bool cpu_team_late(int64_t caller_done_ns, int64_t last_arrival_ns, int64_t end_ns);
/* The process's gate (its `late` counts the late launches). */
cpu_team_gate *cpu_team_process_gate(void);

/* cpu_pool.c: workers and scheduling. All *_locked functions need d->lock. */
/* ops->run_tasks: a replay's work, on the worker that runs the replay task. */
void cpu_run_tasks(cge_device *dev, const cge__task *tasks, size_t n);
void cpu_burst(cge_device *dev, bool begin);
cge_status cpu_pool_start(cpu_device *d);
/* Waits for all work, then stops and joins the workers. */
void cpu_pool_stop(cpu_device *d);
/* Appends a filled node to its stream and schedules it. */
void cpu_enqueue_locked(cpu_device *d, cpu_stream *s, cpu_task *t);
/* Host-side waits on done_cv: until the stream has finished `target` tasks,
 * the event has completed generation `gen`, or no task is left anywhere. */
void cpu_wait_stream_locked(cpu_device *d, cpu_stream *s, uint64_t target);
void cpu_wait_event_locked(cpu_device *d, cpu_event *e, uint64_t gen);
void cpu_wait_device_locked(cpu_device *d);
/* Drops one reference; frees the event once its handle is gone and no queued
 * task refers to it. */
void cpu_event_unref_locked(cpu_device *d, cpu_event *e);

/* cpu_stream.c: stream and event operations of the ops table. */
cge_status cpu_stream_create(cge_device *dev, cge_stream **out);
void cpu_stream_destroy(cge_stream *stream);
cge_status cpu_stream_submit(cge_stream *stream, const cge__task *task);
cge_status cpu_stream_synchronize(cge_stream *stream);
cge_status cpu_stream_query(cge_stream *stream, bool *idle);
cge_status cpu_event_create(cge_device *dev, cge_event **out);
void cpu_event_destroy(cge_event *event);
cge_status cpu_event_query(cge_event *event, bool *done);
cge_status cpu_event_synchronize(cge_event *event);
cge_status cpu_event_elapsed_ms(const cge_event *start, const cge_event *end, float *ms);

#endif
