/* Shared launches on the OpenMP team of the calling thread, when the process
 * has libgomp (Debian's oneDNN brings it).
 *
 * oneDNN runs its convolutions on an OpenMP team of the thread that calls it:
 * during a synchronous run that is the caller's thread, with one libgomp
 * worker per further core. After each parallel region those workers spin
 * (GOMP_SPINCOUNT polls) on the cores that cge's pool needs for the next
 * multi-block launch, so the pool's workers either wait for the spinning
 * threads' time slices or sleep and cost a futex wake-up each: on a VM whose
 * idle vCPUs halt, a wake-up is tens of microseconds, and a model that
 * alternates oneDNN convolutions with cge's own kernels (GroupNorm, GELU)
 * ran its cge kernels on one core. Giving those launches to the same team
 * keeps one set of compute threads for the whole run: the worker that spins
 * after a convolution takes the next launch's blocks at once.
 *
 * Used only for launches shared by a host thread (a synchronous run or a
 * replay on the caller's thread), one such thread at a time (a second caller
 * takes the pool: two teams would oversubscribe the cores), never inside a
 * team, and not where the team sleeps between regions (OMP_WAIT_POLICY
 * passive or GOMP_SPINCOUNT 0: a wake-up per launch), nor under
 * ThreadSanitizer (libgomp's barriers are not instrumented). On by default;
 * CGE_OPENMP_TEAM=0 turns it off.
 *
 * The gate. A team's region ends at a barrier that waits for every team
 * thread, also one that claimed no block, so on a loaded machine a
 * descheduled libgomp worker holds up every launch, where the pool's launch
 * waits only for the helpers that joined it (audio_conv1d beside one
 * busy-looping process: 18-22 ms with the team against 10.6 with the pool).
 * So each team launch notes whether the caller, its blocks done, waited for
 * a team thread that had not even started (arrived after the caller's last
 * block, and the wait longer than TEAM_LATE_NS: a time slice of another
 * process, not a block's imbalance). Such a launch closes the gate: the
 * pool takes the launches for a back-off that doubles with every late
 * launch after it reopens (TEAM_BACKOFF_MIN_NS .. TEAM_BACKOFF_MAX_NS) and
 * halves with every launch on time, so a quiet machine keeps the team and a
 * loaded one probes it a few times a second at most. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "runtime/cpu.h"

typedef void (*gomp_parallel_fn)(void (*fn)(void *), void *data, unsigned num_threads,
                                 unsigned flags);

static gomp_parallel_fn team_parallel;
static pthread_once_t team_once = PTHREAD_ONCE_INIT;
static atomic_int team_taken;
static _Thread_local bool tl_in_team;
static _Thread_local bool tl_team_caller; /* the host thread that started the region */
static cpu_team_gate team_gate;

#define TEAM_LATE_NS 200000LL          /* 0.2 ms */
#define TEAM_BACKOFF_MIN_NS 20000000LL /* 20 ms */
#define TEAM_BACKOFF_MAX_NS 1000000000LL

bool cpu_team_gate_open(const cpu_team_gate *g, int64_t now_ns)
{
    return now_ns >= atomic_load_explicit(&g->closed_until_ns, memory_order_relaxed);
}

void cpu_team_gate_note(cpu_team_gate *g, int64_t now_ns, bool late)
{
    int64_t b = atomic_load_explicit(&g->backoff_ns, memory_order_relaxed);
    if (late) {
        b = b < TEAM_BACKOFF_MIN_NS ? TEAM_BACKOFF_MIN_NS
            : 2 * b > TEAM_BACKOFF_MAX_NS ? TEAM_BACKOFF_MAX_NS : 2 * b;
        atomic_store_explicit(&g->closed_until_ns, now_ns + b, memory_order_relaxed);
        atomic_fetch_add_explicit(&g->late, 1, memory_order_relaxed);
    } else {
        b = b / 2 < TEAM_BACKOFF_MIN_NS ? 0 : b / 2;
    }
    atomic_store_explicit(&g->backoff_ns, b, memory_order_relaxed);
}

bool cpu_team_late(int64_t caller_done_ns, int64_t last_arrival_ns, int64_t end_ns)
{
    return last_arrival_ns > caller_done_ns && end_ns - caller_done_ns > TEAM_LATE_NS;
}

cpu_team_gate *cpu_team_process_gate(void)
{
    return &team_gate;
}

/* One region's launch and its timing (cpu_now_ns): when the caller's last
 * block was done, and when the last other team thread arrived. */
typedef struct team_region {
    cpu_task *t;
    int64_t caller_done;
    atomic_int_fast64_t last_arrival;
} team_region;

/* Whether the user's OpenMP settings leave the team spinning between regions. */
static bool team_spins(void)
{
    const char *policy = getenv("OMP_WAIT_POLICY");
    if (policy && !strcasecmp(policy, "passive"))
        return false;
    const char *count = getenv("GOMP_SPINCOUNT");
    if (count && *count) {
        char *end = NULL;
        unsigned long long n = strtoull(count, &end, 10);
        if (end != count && n == 0)
            return false;
    }
    return true;
}

#if defined(__SANITIZE_THREAD__)
#define TEAM_UNDER_TSAN 1
#else
#define TEAM_UNDER_TSAN 0
#endif

static void team_lookup(void)
{
    const char *opt = getenv("CGE_OPENMP_TEAM");
    if (TEAM_UNDER_TSAN || (opt && !strcmp(opt, "0")) || !team_spins())
        return;
    *(void **)&team_parallel = dlsym(RTLD_DEFAULT, "GOMP_parallel");
}

static void team_body(void *arg)
{
    team_region *r = arg;
    bool caller = tl_team_caller;
    if (!caller) {
        int64_t now = (int64_t)cpu_now_ns(), seen = atomic_load(&r->last_arrival);
        while (now > seen && !atomic_compare_exchange_weak(&r->last_arrival, &seen, now)) {
        }
    }
    bool outer = tl_in_team;
    tl_in_team = true;
    cpu_run_blocks(r->t);
    tl_in_team = outer;
    if (caller)
        r->caller_done = (int64_t)cpu_now_ns();
}

static bool team_available(void)
{
    pthread_once(&team_once, team_lookup);
    return team_parallel != NULL;
}

bool cpu_team_run(cpu_device *d, cpu_task *t)
{
    if (tl_in_team) {
        /* a launch from inside a team's block: this thread's share is its own */
        cpu_run_blocks(t);
        return true;
    }
    if (!team_available() || d->num_workers <= 1 ||
        !cpu_team_gate_open(&team_gate, (int64_t)cpu_now_ns()))
        return false;
    int free_team = 0;
    if (!atomic_compare_exchange_strong(&team_taken, &free_team, 1))
        return false;
    team_region r = {.t = t};
    atomic_init(&r.last_arrival, 0);
    tl_team_caller = true;
    team_parallel(team_body, &r, (unsigned)d->num_workers, 0);
    tl_team_caller = false;
    int64_t end = (int64_t)cpu_now_ns();
    /* the process's first region may start the team's threads: not a stall */
    static bool team_started;
    if (team_started)
        cpu_team_gate_note(&team_gate, end,
                           cpu_team_late(r.caller_done, atomic_load(&r.last_arrival), end));
    team_started = true;
    atomic_store(&team_taken, 0);
    return true;
}
