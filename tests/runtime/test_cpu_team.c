/* With CGE_OPENMP_TEAM=1, multi-block launches from a host thread run on that
 * thread's OpenMP team when libgomp is in the process and spins between
 * regions (cpu_team.c):
 * every block runs, on the caller and the team's workers and never on a cge
 * pool worker; a block's failure is the stream's; without the setting, or
 * with a passive wait policy, the pool takes the launches. The settings are
 * read once per process, so each configuration runs in a child. */
#include <dlfcn.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rt_test.h"

enum { BLOCKS = 64 };

typedef struct where_args {
    int hits[BLOCKS];
    atomic_int on_caller, on_pool, on_other;
    pthread_t caller;
} where_args;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* The caller's blocks wait until another thread has run one, so that the
 * second participant is always seen, whatever the scheduling: a launch that
 * no other thread joins gives up after 10 s (a hang guard, not a timing
 * check) and shows as such. */
static void where_kernel(int64_t b, int64_t nb, void *p)
{
    (void)nb;
    where_args *a = *(where_args **)p;
    a->hits[b]++;
    char name[32] = "";
    pthread_getname_np(pthread_self(), name, sizeof name);
    if (pthread_equal(pthread_self(), a->caller)) {
        atomic_fetch_add(&a->on_caller, 1);
        for (double t0 = now_s(); !atomic_load(&a->on_pool) && !atomic_load(&a->on_other) &&
                                  now_s() - t0 < 10.0;)
            sched_yield();
    } else if (!strncmp(name, "cge-cpu-", 8)) {
        atomic_fetch_add(&a->on_pool, 1);
    } else {
        atomic_fetch_add(&a->on_other, 1);
    }
}

static void fail_kernel(int64_t b, int64_t nb, void *p)
{
    (void)p;
    if (b == nb - 1)
        cge_kernel_fail(CGE_ERR_SHAPE, "block %lld of the team failed", (long long)b);
}

/* 0: blocks ran on the caller and the team, none on the pool; 1: on the pool;
 * 2: a block missing or run twice; 3: the failure lost; 4: setup failed;
 * 5: no thread but the caller ran a block. */
static int launch_and_classify(void)
{
    cge_device *dev = NULL;
    cge_device_options o = {.num_threads = 2};
    cge_stream *s = NULL;
    if (cge_device_create_cpu(&o, &dev) != CGE_OK ||
        cge_stream_create_immediate(dev, &s) != CGE_OK)
        return 4;
    where_args a = {.caller = pthread_self()};
    where_args *pa = &a;
    int rc = 0;
    for (int round = 0; round < 5; round++)
        if (cge_launch(s, where_kernel, BLOCKS, &pa, sizeof pa) != CGE_OK)
            return 4;
    for (int b = 0; b < BLOCKS; b++)
        if (a.hits[b] != 5)
            rc = 2;
    if (!rc)
        rc = atomic_load(&a.on_pool) > 0 ? 1 : atomic_load(&a.on_other) > 0 ? 0 : 5;
    cge_launch(s, fail_kernel, 8, NULL, 0);
    cge_clear_error();
    if (cge_stream_synchronize(s) != CGE_ERR_SHAPE || !strstr(cge_last_error(), "of the team"))
        rc = 3;
    cge_stream_destroy(s);
    cge_device_destroy(dev);
    return rc;
}

/* The child's classification with CGE_OPENMP_TEAM=`team` (NULL: unset) and
 * `var` set to `value` (NULL: none). */
static int in_child(const char *team, const char *var, const char *value)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        unsetenv("CGE_OPENMP_TEAM");
        unsetenv("OMP_WAIT_POLICY");
        unsetenv("GOMP_SPINCOUNT");
        if (team)
            setenv("CGE_OPENMP_TEAM", team, 1);
        if (var)
            setenv(var, value, 1);
        _exit(launch_and_classify());
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}

static bool have_libgomp(void)
{
    return dlopen("libgomp.so.1", RTLD_NOW | RTLD_GLOBAL) != NULL;
}

static void test_launches_run_on_the_openmp_team(void **state)
{
    (void)state;
#if defined(__SANITIZE_THREAD__)
    skip(); /* the team is off under ThreadSanitizer */
#endif
    if (!have_libgomp())
        skip();
    assert_int_equal(in_child("1", NULL, NULL), 0);
    assert_int_equal(in_child("1", "GOMP_SPINCOUNT", "30000"), 0);
}

static void test_the_pool_takes_them_when_the_team_is_off_or_sleeps(void **state)
{
    (void)state;
    if (!have_libgomp())
        skip();
    assert_int_equal(in_child(NULL, NULL, NULL), 1); /* the default: opt-in */
    assert_int_equal(in_child("0", NULL, NULL), 1);
    assert_int_equal(in_child("1", "OMP_WAIT_POLICY", "passive"), 1);
    assert_int_equal(in_child("1", "GOMP_SPINCOUNT", "0"), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_launches_run_on_the_openmp_team),
        cmocka_unit_test(test_the_pool_takes_them_when_the_team_is_off_or_sleeps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
