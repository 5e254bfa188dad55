/* Internal to capture and replay: the captured task record, the capture in
 * progress, the replay instance (cge_ri) and a group re-recording. Shared by
 * capture.c, replay.c, hazard.c and ri_json.c. */
#ifndef CGE_RUNTIME_CAPTURE_H
#define CGE_RUNTIME_CAPTURE_H

#include "runtime/device.h"

/* One recorded task. Kernel arguments live in `t.u.launch.args`, owned here. */
typedef struct rt_ri_task {
    cge__task t;
    int32_t stream_index; /* index into the capture's streams; 0 is the origin */
    int32_t group;        /* task group, -1 if none */
    int32_t dep;          /* EVENT_WAIT: index of the record task it waits for */
    int32_t exec;         /* index in the RI's exec array; -1 for event tasks */
    int32_t range;        /* first hazard range of the task, -1 if none */
    uint64_t event_id;    /* EVENT_RECORD/WAIT: the event, for the dump */
    size_t args_cap;      /* KERNEL: bytes allocated at t.u.launch.args */
} rt_ri_task;

typedef struct rt_cap_stream {
    cge_stream *s;      /* NULL once the stream was destroyed */
    uint64_t id;
    int32_t last_task;  /* index of its newest task, -1 if none */
    int32_t open_group; /* task group being recorded, -1 if none */
} rt_cap_stream;

/* A capture between begin and end. Every field is under dev->cap_lock. */
struct rt_capture {
    cge_device *dev;
    rt_capture *next; /* dev->captures */
    cge_stream *origin;
    uint64_t origin_id;
    cge_capture_mode mode;
    pthread_t owner; /* the thread that began it */
    bool invalid;
    char reason[512];
    rt_cap_stream *streams;
    int32_t num_streams, cap_streams;
    rt_ri_task *tasks;
    int32_t num_tasks, cap_tasks;
    cge_event **events; /* events whose record it captured (NULL: destroyed since) */
    int32_t num_events, cap_events;
    int32_t num_groups;
};

/* A memory range a replay reads (copy sources) or writes (copy and fill
 * destinations): what the hazard guard compares writes against. */
typedef struct rt_range {
    const void *ptr;
    size_t bytes;
    bool write;
} rt_range;

/* Re-recording of one task group (cge_ri_update_begin/end). Fields other than
 * `ri` and `group` are under dev->cap_lock while the stream is hooked. */
struct rt_update {
    cge_ri *ri;
    int32_t group;
    cge_stream *stream; /* NULL once the stream was destroyed */
    uint64_t stream_id;
    rt_ri_task *tasks;
    int32_t num_tasks, cap_tasks;
    bool failed;
    char reason[512];
};

struct cge_ri {
    cge_device *dev;
    uint64_t id;                  /* "ri#3" */
    cge_ri *prev_all, *next_all;  /* dev->ris, under cap_lock */

    rt_ri_task *tasks;            /* in submission order: a valid topological order */
    int32_t num_tasks;
    cge__task *exec;               /* the work tasks as replayed, in that order */
    int32_t num_exec;
    uint64_t *stream_ids;         /* per captured stream index */
    int32_t num_streams;
    int32_t num_groups;
    int32_t *group_off;           /* group g's tasks: group_tasks[group_off[g] .. group_off[g+1]) */
    int32_t *group_tasks;
    rt_range *ranges;
    int32_t num_ranges;

    /* Replay state, under mu. Replays finish in submission order (they are
     * serialised), so two counters say what is in flight. */
    pthread_mutex_t mu;
    pthread_cond_t cv;            /* `finished` moved; waiters > 0 */
    int waiters;
    uint64_t submitted, finished;
    uint64_t last_stream_id;      /* stream of the newest replay; 0: none yet */
    cge_event *done_ev;           /* recorded after every replay: the next one on
                                     another stream waits on it */
    cge_stream *own_stream;       /* cge_ri_execute's, made on first use */
    rt_update *update;

    /* Hazard guard, under dev->hz_lock. */
    int hz_inflight;              /* tracked replays in flight */
    uint64_t hz_stream_id;        /* their stream if all on one, else 0 */
    cge_ri *hz_prev, *hz_next;    /* dev->hz_active */
};

/* A copy whose host side is not pinned is refused in a recording; the error
 * names the pointer. `what` says where ("captured cge_memcpy_async on stream 2"). */
cge_status rt_check_copy_pinned(cge_device *dev, const void *dst, const void *src, size_t bytes,
                                cge_memcpy_kind kind, const char *what);
/* Copies `t` into `out` with its own copy of the kernel arguments. */
cge_status rt_task_copy_in(rt_ri_task *out, const cge__task *t);
void rt_task_free_args(rt_ri_task *t);

/* replay.c: turns an ended capture into an RI (takes its tasks). */
cge_status rt_ri_from_capture(rt_capture *c, cge_ri **out);
/* Fills the hazard ranges of task `i` from its parameters. */
void rt_ri_fill_ranges(cge_ri *ri, int32_t i);

/* capture.c: refuses a replay into a capturing or updating stream. */
cge_status rt_capture_refuse_replay(cge_stream *stream, const cge_ri *ri);

/* capture.c: hooks `stream` so that its submissions re-record a group into
 * `u` (error if it captures or updates already), and undoes it. */
cge_status rt_update_attach(cge_stream *stream, rt_update *u);
void rt_update_detach(cge_device *dev, rt_update *u);

/* hazard.c: replay bookkeeping, under ri->mu. */
void rt_hazard_replay_begin(cge_ri *ri, uint64_t stream_id);
void rt_hazard_replay_end(cge_ri *ri);

static inline const char *rt_task_kind_name(cge_task_kind k)
{
    switch (k) {
    case CGE_TASK_KERNEL: return "kernel";
    case CGE_TASK_MEMCPY: return "memcpy";
    case CGE_TASK_MEMSET: return "memset";
    case CGE_TASK_EVENT_RECORD: return "event_record";
    case CGE_TASK_EVENT_WAIT: return "event_wait";
    case CGE_TASK_HOST_FUNC: return "host_func";
    }
    return "unknown";
}

#endif
