/* Multi-block launches from a host thread run on that thread's OpenMP team
 * when libgomp is in the process and spins between regions (cpu_team.c):
 * every block runs, on the caller and the team's workers and never on a cge
 * pool worker; a block's failure is the stream's; with CGE_OPENMP_TEAM=0, a
 * passive wait policy, or the gate closed by a late team thread, the pool
 * takes the launches. The settings are read once per process, so each
 * configuration runs in a child. The gate's policy is checked on its own,
 * with times given. */
#include <dlfcn.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rt_test.h"
#include "runtime/cpu.h"

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

/* After a late launch the pool takes the launches, then the team again once
 * the back-off (20 ms) is over: 10 * the first classification + the second. */
static int gate_closed_then_open(void)
{
    cpu_team_gate_note(cpu_team_process_gate(), (int64_t)cpu_now_ns(), true);
    int first = launch_and_classify();
    struct timespec pause = {0, 40 * 1000 * 1000};
    nanosleep(&pause, NULL);
    return 10 * first + launch_and_classify();
}

/* The child's classification with CGE_OPENMP_TEAM=`team` (NULL: unset) and
 * `var` set to `value` (NULL: none); with var "gate", gate_closed_then_open. */
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
        if (var && !strcmp(var, "gate"))
            _exit(gate_closed_then_open());
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
    assert_int_equal(in_child(NULL, NULL, NULL), 0); /* the default */
    assert_int_equal(in_child("1", NULL, NULL), 0);
    assert_int_equal(in_child(NULL, "GOMP_SPINCOUNT", "30000"), 0);
    assert_int_equal(in_child(NULL, "gate", NULL), 10); /* pool while closed, then team */
}

static void test_the_pool_takes_them_when_the_team_is_off_or_sleeps(void **state)
{
    (void)state;
    if (!have_libgomp())
        skip();
    assert_int_equal(in_child("0", NULL, NULL), 1);
    assert_int_equal(in_child(NULL, "OMP_WAIT_POLICY", "passive"), 1);
    assert_int_equal(in_child(NULL, "GOMP_SPINCOUNT", "0"), 1);
}

/* A region is late when a team thread arrived after the caller's last block
 * and the caller waited more than 0.2 ms; the gate closes for 20 ms, then
 * 40, 80 ... up to 1 s for late launches in a row, and each launch on time
 * halves the back-off (below 20 ms: none). */
static void test_the_gate_closes_after_a_late_team_thread(void **state)
{
    (void)state;
    const int64_t ms = 1000000;
    assert_false(cpu_team_late(10 * ms, 9 * ms, 30 * ms));    /* arrived before: imbalance */
    assert_false(cpu_team_late(10 * ms, 10 * ms + 1, 10 * ms + 150000)); /* short wait */
    assert_true(cpu_team_late(10 * ms, 12 * ms, 12 * ms + 5000));
    cpu_team_gate g;
    atomic_init(&g.closed_until_ns, 0);
    atomic_init(&g.backoff_ns, 0);
    atomic_init(&g.late, 0);
    assert_true(cpu_team_gate_open(&g, 1));
    cpu_team_gate_note(&g, 100 * ms, false);
    assert_true(cpu_team_gate_open(&g, 100 * ms));
    cpu_team_gate_note(&g, 100 * ms, true);
    assert_false(cpu_team_gate_open(&g, 119 * ms));
    assert_true(cpu_team_gate_open(&g, 120 * ms));
    cpu_team_gate_note(&g, 120 * ms, true); /* late again: 40 ms */
    assert_false(cpu_team_gate_open(&g, 159 * ms));
    assert_true(cpu_team_gate_open(&g, 160 * ms));
    for (int i = 0; i < 10; i++)
        cpu_team_gate_note(&g, 1000 * ms, true);
    assert_int_equal(atomic_load(&g.backoff_ns), 1000 * ms); /* capped */
    assert_false(cpu_team_gate_open(&g, 1999 * ms));
    assert_int_equal(atomic_load(&g.late), 12);
    cpu_team_gate_note(&g, 2000 * ms, false);
    assert_int_equal(atomic_load(&g.backoff_ns), 500 * ms);
    for (int i = 0; i < 5; i++)
        cpu_team_gate_note(&g, 2000 * ms, false);
    assert_int_equal(atomic_load(&g.backoff_ns), 0);
    cpu_team_gate_note(&g, 3000 * ms, true); /* from none: 20 ms again */
    assert_false(cpu_team_gate_open(&g, 3019 * ms));
    assert_true(cpu_team_gate_open(&g, 3020 * ms));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_launches_run_on_the_openmp_team),
        cmocka_unit_test(test_the_pool_takes_them_when_the_team_is_off_or_sleeps),
        cmocka_unit_test(test_the_gate_closes_after_a_late_team_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
