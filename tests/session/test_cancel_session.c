/* Session runs under a cancel token (cge_cancel_scope around the run, no
 * session option needed): a request from another thread or a deadline stops
 * a long run in every mode with a [runtime] error, and the session's next
 * runs give the same results as before. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cge/cge.h"

enum { N = 256, CHAIN = 24 };

/* y = x @ w @ w ... (CHAIN MatMuls of [N, N]): a few hundred ms. */
static cge_graph *chain_graph(float *w)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("chain", &g), CGE_OK);
    cge_shape s = CGE_SHAPE(N, N);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &s), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "w", CGE_F32, &s, w, sizeof(float) * N * N),
                     CGE_OK);
    char prev[16] = "x", out[16];
    for (int k = 0; k < CHAIN; k++) {
        snprintf(out, sizeof out, k == CHAIN - 1 ? "y" : "h%d", k);
        const char *in[2] = {prev, "w"}, *o[1] = {out};
        assert_int_equal(cge_graph_add_node(g, "MatMul", "", out, in, 2, o, 1, NULL), CGE_OK);
        memcpy(prev, out, sizeof prev);
    }
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    return g;
}

typedef struct later {
    cge_cancel *c;
    int ms;
} later;

static void *request_later(void *p)
{
    later *l = p;
    usleep((useconds_t)l->ms * 1000);
    cge_cancel_request(l->c);
    return NULL;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static cge_status run(cge_session *s, cge_run_mode mode, const float *x, float *y)
{
    cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(N, N), .data = (void *)x,
                     .bytes = sizeof(float) * N * N};
    cge_tensor out = {.name = "y", .data = y, .bytes = sizeof(float) * N * N};
    cge_run_options o = {.mode = mode};
    return cge_session_run(s, 1, &in, 1, &out, 1, &o);
}

/* A session over chain_graph, its input and its uninterrupted result. */
typedef struct chain {
    float *w, *x, *ref, *y;
    cge_graph *g;
    cge_session *s;
    double full_ms;         /* one uninterrupted plan run */
} chain;

static void chain_open(chain *c)
{
    c->w = malloc(sizeof(float) * N * N);
    c->x = malloc(sizeof(float) * N * N);
    c->ref = malloc(sizeof(float) * N * N);
    c->y = malloc(sizeof(float) * N * N);
    for (int i = 0; i < N * N; i++) {
        c->w[i] = (float)((i * 7) % 13 - 6) / (6.0f * N);
        c->x[i] = (float)((i * 5) % 11 - 5);
    }
    c->g = chain_graph(c->w);
    c->s = NULL;
    assert_int_equal(cge_session_create(NULL, &c->s), CGE_OK);
    assert_int_equal(cge_session_add_graph(c->s, 1, c->g), CGE_OK);
    double t0 = now_ms();
    assert_int_equal(run(c->s, CGE_RUN_PLAN, c->x, c->ref), CGE_OK);
    c->full_ms = now_ms() - t0;
}

static void chain_close(chain *c)
{
    cge_session_destroy(c->s);
    cge_graph_destroy(c->g);
    free(c->w);
    free(c->x);
    free(c->ref);
    free(c->y);
}

static void test_cancel_and_deadline_in_every_mode(void **state)
{
    (void)state;
    chain ch;
    chain_open(&ch);
    cge_session *s = ch.s;
    float *x = ch.x, *ref = ch.ref, *y = ch.y;
    double full = ch.full_ms;
    cge_cancel *c = NULL;
    assert_int_equal(cge_cancel_create(&c), CGE_OK);
    static const cge_run_mode modes[3] = {CGE_RUN_PLAN, CGE_RUN_REPLAY, CGE_RUN_EAGER};
    for (int m = 0; m < 3; m++) {
        /* requested from another thread while the run is under way */
        cge_cancel_reset(c);
        cge_cancel_request(c);   /* already requested: nothing of it runs */
        cge_cancel *prev = cge_cancel_scope(c);
        cge_status st = run(s, modes[m], x, y);
        cge_cancel_scope(prev);
        assert_int_equal(st, CGE_ERR_CANCELLED);
        assert_int_equal(cge_last_error_layer(), CGE_LAYER_RUNTIME);
        if (!strstr(cge_last_error(), "run cancelled"))
            fail_msg("unexpected message: %s", cge_last_error());
        cge_cancel_reset(c);
        pthread_t th;
        later l = {c, (int)(full / 4) + 1};
        pthread_create(&th, NULL, request_later, &l);
        prev = cge_cancel_scope(c);
        st = run(s, modes[m], x, y);
        cge_cancel_scope(prev);
        pthread_join(th, NULL);
        /* a machine fast enough to finish first is no failure */
        if (st != CGE_OK) {
            assert_int_equal(st, CGE_ERR_CANCELLED);
            assert_int_equal(cge_last_error_layer(), CGE_LAYER_RUNTIME);
        }
        /* a deadline */
        cge_cancel_reset(c);
        cge_cancel_set_timeout(c, 1);
        usleep(2000);
        prev = cge_cancel_scope(c);
        st = run(s, modes[m], x, y);
        cge_cancel_scope(prev);
        assert_int_equal(st, CGE_ERR_TIMEOUT);
        if (!strstr(cge_last_error(), "deadline of 1 ms exceeded"))
            fail_msg("unexpected message: %s", cge_last_error());
        /* then the session runs as before, in this mode and in plan mode */
        memset(y, 0, sizeof(float) * N * N);
        assert_int_equal(run(s, modes[m], x, y), CGE_OK);
        assert_memory_equal(y, ref, sizeof(float) * N * N);
        memset(y, 0, sizeof(float) * N * N);
        assert_int_equal(run(s, CGE_RUN_PLAN, x, y), CGE_OK);
        assert_memory_equal(y, ref, sizeof(float) * N * N);
    }
    cge_cancel_destroy(c);
    chain_close(&ch);
}

/* cge_run_options.cancel binds the run to a token without a scope; a plan
 * run step by step names the step it stopped at. */
static void test_run_option_names_the_step(void **state)
{
    (void)state;
    chain ch;
    chain_open(&ch);
    cge_session *s = ch.s;
    float *x = ch.x, *ref = ch.ref, *y = ch.y;
    cge_cancel *c = NULL;
    assert_int_equal(cge_cancel_create(&c), CGE_OK);
    cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(N, N), .data = x,
                     .bytes = sizeof(float) * N * N};
    cge_tensor out = {.name = "y", .data = y, .bytes = sizeof(float) * N * N};
    cge_run_options o = {.mode = CGE_RUN_PLAN, .cancel = c};
    cge_cancel_request(c);
    assert_int_equal(cge_session_run(s, 1, &in, 1, &out, 1, &o), CGE_ERR_CANCELLED);
    if (!strstr(cge_last_error(), "[runtime] run cancelled") ||
        !strstr(cge_last_error(), "at step 0 of ") || !strstr(cge_last_error(), "MatMul"))
        fail_msg("unexpected message: %s", cge_last_error());
    /* The thread's scope is as it was: a run without the option runs. */
    assert_int_equal(run(s, CGE_RUN_PLAN, x, y), CGE_OK);
    cge_cancel_reset(c);
    cge_cancel_set_timeout(c, 1);
    usleep(2000);
    assert_int_equal(cge_session_run(s, 1, &in, 1, &out, 1, &o), CGE_ERR_TIMEOUT);
    if (!strstr(cge_last_error(), "deadline of 1 ms exceeded, at step "))
        fail_msg("unexpected message: %s", cge_last_error());
    cge_cancel_reset(c);
    memset(y, 0, sizeof(float) * N * N);
    assert_int_equal(cge_session_run(s, 1, &in, 1, &out, 1, &o), CGE_OK);
    assert_memory_equal(y, ref, sizeof(float) * N * N);
    cge_cancel_destroy(c);
    chain_close(&ch);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cancel_and_deadline_in_every_mode),
        cmocka_unit_test(test_run_option_names_the_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
