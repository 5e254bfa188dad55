/* Cancel tokens: a request flag and a deadline that work enqueued under a
 * thread's scope carries, the checks the CPU device makes before each task
 * and each chunk of blocks, and the SIGINT watch for interactive front ends. */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/device.h"

struct cge_cancel {
    atomic_int requested;
    /* CLOCK_MONOTONIC nanoseconds; 0: no deadline. */
    _Atomic uint64_t deadline_ns;
    _Atomic double timeout_ms;    /* as given, for the message */
};

_Thread_local cge_cancel *rt_tl_cancel;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

cge_status cge_cancel_create(cge_cancel **out)
{
    if (!out)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_cancel_create: out is NULL");
    cge_cancel *c = calloc(1, sizeof *c);
    if (!c)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "cge_cancel_create: out of memory");
    atomic_init(&c->requested, 0);
    atomic_init(&c->deadline_ns, 0);
    atomic_init(&c->timeout_ms, 0.0);
    *out = c;
    return CGE_OK;
}

void cge_cancel_destroy(cge_cancel *c)
{
    free(c);
}

void cge_cancel_request(cge_cancel *c)
{
    if (c)
        atomic_store_explicit(&c->requested, 1, memory_order_relaxed);
}

void cge_cancel_set_timeout(cge_cancel *c, double timeout_ms)
{
    if (!c)
        return;
    if (!(timeout_ms >= 0)) { /* negative or NaN: no deadline */
        atomic_store(&c->deadline_ns, 0);
        return;
    }
    double ns = timeout_ms * 1e6;
    uint64_t d = ns > 1e18 ? UINT64_MAX : now_ns() + (uint64_t)ns;
    atomic_store(&c->timeout_ms, timeout_ms);
    atomic_store(&c->deadline_ns, d ? d : 1);
}

void cge_cancel_reset(cge_cancel *c)
{
    if (!c)
        return;
    atomic_store(&c->requested, 0);
    atomic_store(&c->deadline_ns, 0);
}

bool rt_cancel_due(const cge_cancel *c)
{
    if (!c)
        return false;
    if (atomic_load_explicit(&((cge_cancel *)c)->requested, memory_order_relaxed))
        return true;
    uint64_t d = atomic_load_explicit(&((cge_cancel *)c)->deadline_ns, memory_order_relaxed);
    return d && now_ns() >= d;
}

bool cge_cancel_requested(const cge_cancel *c) { return rt_cancel_due(c); }

cge_cancel *cge_cancel_scope(cge_cancel *c)
{
    cge_cancel *prev = rt_tl_cancel;
    rt_tl_cancel = c;
    return prev;
}

/* The status and words for work stopped by `c`. */
static cge_status why(const cge_cancel *c, char *buf, size_t size)
{
    if (atomic_load(&((cge_cancel *)c)->requested)) {
        snprintf(buf, size, "run cancelled (cge_cancel_request)");
        return CGE_ERR_CANCELLED;
    }
    snprintf(buf, size, "deadline of %g ms exceeded", atomic_load(&((cge_cancel *)c)->timeout_ms));
    return CGE_ERR_TIMEOUT;
}

void rt_cancel_report(const cge_cancel *c)
{
    cge_stream *s = rt_current_stream;
    if (!s || !c)
        return;
    char w[96];
    cge_status st = why(c, w, sizeof w);
    rt_stream_fail(s, CGE_LAYER_RUNTIME, st, "%s: the remaining work on stream %llu was skipped",
                   w, (unsigned long long)s->id);
}

cge_status cge_cancel_check(void)
{
    cge_cancel *c = rt_tl_cancel;
    if (!rt_cancel_due(c))
        return CGE_OK;
    char w[96];
    cge_status st = why(c, w, sizeof w);
    return cge_error(CGE_LAYER_RUNTIME, st, "%s", w);
}

/* ---- SIGINT --------------------------------------------------------------------- */

static _Atomic(cge_cancel *) sigint_token;
static struct sigaction sigint_prev;
static atomic_flag sigint_busy = ATOMIC_FLAG_INIT;
static atomic_bool sigint_watching;

static void on_sigint(int sig, siginfo_t *info, void *uc)
{
    cge_cancel *c = atomic_load(&sigint_token);
    if (c)
        atomic_store_explicit(&c->requested, 1, memory_order_relaxed);
    if (sigint_prev.sa_flags & SA_SIGINFO) {
        if (sigint_prev.sa_sigaction)
            sigint_prev.sa_sigaction(sig, info, uc);
    } else if (sigint_prev.sa_handler == SIG_DFL) {
        /* Nobody handles it: end the process as SIGINT does. */
        signal(sig, SIG_DFL);
        raise(sig);
    } else if (sigint_prev.sa_handler != SIG_IGN) {
        sigint_prev.sa_handler(sig);
    }
}

cge_status cge_cancel_watch_sigint(cge_cancel *c)
{
    if (!c)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_cancel_watch_sigint: token is NULL");
    if (atomic_flag_test_and_set(&sigint_busy))
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                         "cge_cancel_watch_sigint: another token is watched (one at a time)");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigint;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    atomic_store(&sigint_token, c);
    if (sigaction(SIGINT, &sa, &sigint_prev) != 0) {
        atomic_store(&sigint_token, NULL);
        atomic_flag_clear(&sigint_busy);
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                         "cge_cancel_watch_sigint: cannot install a SIGINT handler");
    }
    atomic_store(&sigint_watching, true);
    return CGE_OK;
}

void cge_cancel_unwatch_sigint(void)
{
    if (!atomic_load(&sigint_watching))
        return;
    sigaction(SIGINT, &sigint_prev, NULL);
    atomic_store(&sigint_token, NULL);
    atomic_store(&sigint_watching, false);
    atomic_flag_clear(&sigint_busy);
}
