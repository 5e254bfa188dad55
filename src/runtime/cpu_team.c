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
 * ThreadSanitizer (libgomp's barriers are not instrumented).
 *
 * Opt-in (CGE_OPENMP_TEAM=1): a team's region ends at a barrier that waits
 * for every team thread, also one that took no block, so on a loaded machine
 * a descheduled libgomp worker holds up every launch (audio_conv1d 17-26 ms
 * against the pool's 6.5-10 beside a sanitizer build), where the pool's
 * launch waits only for the helpers that joined it. On a quiet machine it is
 * the faster one (docs/runtime.md). */
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
    if (TEAM_UNDER_TSAN || !opt || strcmp(opt, "1") || !team_spins())
        return;
    *(void **)&team_parallel = dlsym(RTLD_DEFAULT, "GOMP_parallel");
}

static void team_body(void *arg)
{
    bool outer = tl_in_team;
    tl_in_team = true;
    cpu_run_blocks(arg);
    tl_in_team = outer;
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
    if (!team_available() || d->num_workers <= 1)
        return false;
    int free_team = 0;
    if (!atomic_compare_exchange_strong(&team_taken, &free_team, 1))
        return false;
    team_parallel(team_body, t, (unsigned)d->num_workers, 0);
    atomic_store(&team_taken, 0);
    return true;
}
