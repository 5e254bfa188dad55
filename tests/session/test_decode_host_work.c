/* The host work of a decode step, counted: a run allocates nothing on the
 * heap, neither a replay of a seen signature nor (once the arena and the
 * shape program's buffers have room) a new length taken over in place; and
 * the outputs stay those of a fresh session at every length.
 *
 * The heap is counted by this executable's own malloc family (glibc's
 * __libc_* underneath), which the library's calls bind to. Under a
 * sanitizer, which has its own allocator, the counting tests skip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define COUNTING 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define COUNTING 0
#endif
#endif
#if !defined(COUNTING) && defined(__GLIBC__)
#define COUNTING 1
#endif
#ifndef COUNTING
#define COUNTING 0
#endif

static atomic_long allocations;

#if COUNTING
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

void *malloc(size_t n)
{
    atomic_fetch_add(&allocations, 1);
    return __libc_malloc(n);
}
void *calloc(size_t n, size_t m)
{
    atomic_fetch_add(&allocations, 1);
    return __libc_calloc(n, m);
}
void *realloc(void *p, size_t n)
{
    atomic_fetch_add(&allocations, 1);
    return __libc_realloc(p, n);
}
void free(void *p) { __libc_free(p); }
int posix_memalign(void **out, size_t align, size_t n)
{
    atomic_fetch_add(&allocations, 1);
    void *p = __libc_memalign(align, n);
    if (!p)
        return 12; /* ENOMEM */
    *out = p;
    return 0;
}
void *aligned_alloc(size_t align, size_t n)
{
    atomic_fetch_add(&allocations, 1);
    return __libc_memalign(align, n);
}
#endif

enum { D = 8, STEPS = 48, MAXL = STEPS + 2 };

static void add_node(cge_graph *g, const char *op, const char *name, const char **in, int ni,
                     const char **out, int no, cge_node **n)
{
    assert_int_equal(cge_graph_add_node(g, op, "", name, in, ni, out, no, n), CGE_OK);
}

/* past [1, L, 8] (symbolic "past", or `len` when > 0), x [1, 1, 8]:
 *   present = Concat(past, x Wk) on axis 1; y = Softmax(x present^T) present
 * the attention of a decode step over its growing cache. */
static cge_graph *build(int64_t len)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("decode_host", &g), CGE_OK);
    int64_t L = len > 0 ? len : cge_graph_dim_symbol(g, "past");
    cge_shape ps = CGE_SHAPE(1, L, D), xs = CGE_SHAPE(1, 1, D), ws = CGE_SHAPE(D, D);
    static float wk[D * D];
    for (int i = 0; i < D * D; i++)
        wk[i] = (float)((i * 5) % 11) * 0.04f - 0.2f;
    assert_int_equal(cge_graph_add_input(g, "past", CGE_F32, &ps), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "wk", CGE_F32, &ws, wk, sizeof wk), CGE_OK);
    static const int64_t perm[3] = {0, 2, 1};
    cge_node *n = NULL;
    const char *mk[] = {"x", "wk"}, *ok[] = {"k"};
    add_node(g, "MatMul", "proj_k", mk, 2, ok, 1, NULL);
    const char *ci[] = {"past", "k"}, *co[] = {"present"};
    add_node(g, "Concat", "cat", ci, 2, co, 1, &n);
    assert_int_equal(cge_node_set_int(n, "axis", 1), CGE_OK);
    const char *ti[] = {"present"}, *to[] = {"kt"};
    add_node(g, "Transpose", "kt", ti, 1, to, 1, &n);
    assert_int_equal(cge_node_set_ints(n, "perm", perm, 3), CGE_OK);
    const char *si[] = {"x", "kt"}, *so[] = {"scores"};
    add_node(g, "MatMul", "scores", si, 2, so, 1, NULL);
    const char *pi[] = {"scores"}, *po[] = {"probs"};
    add_node(g, "Softmax", "softmax", pi, 1, po, 1, &n);
    assert_int_equal(cge_node_set_int(n, "axis", -1), CGE_OK);
    const char *oi[] = {"probs", "present"}, *oo[] = {"y"};
    add_node(g, "MatMul", "attend", oi, 2, oo, 1, NULL);
    assert_int_equal(cge_graph_add_output(g, "present"), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    return g;
}

static cge_session *open_session(int64_t len)
{
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    cge_graph *g = build(len);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    cge_graph_destroy(g);
    assert_int_equal(cge_session_compile_graph(s, 1), CGE_OK);
    return s;
}

typedef struct outs {
    float present[MAXL * D], y[D];
} outs;

/* One run; the heap allocations it made. */
static long run(cge_session *s, int64_t L, const float *past, const float *x, outs *o)
{
    cge_tensor in[2] = {
        {.name = "past", .dtype = CGE_F32, .shape = CGE_SHAPE(1, L, D), .data = (void *)past,
         .bytes = sizeof(float) * (size_t)(L * D)},
        {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(1, 1, D), .data = (void *)x,
         .bytes = sizeof(float) * D}};
    cge_tensor out[2] = {{.name = "present", .data = o->present, .bytes = sizeof o->present},
                         {.name = "y", .data = o->y, .bytes = sizeof o->y}};
    long a0 = atomic_load(&allocations);
    cge_status st = cge_session_run_graph(s, 1, in, 2, out, 2);
    long a = atomic_load(&allocations) - a0;
    assert_int_equal(st, CGE_OK);
    assert_int_equal(out[0].shape.dims[1], L + 1);
    return a;
}

static void input_of(int64_t t, float *x)
{
    for (int j = 0; j < D; j++)
        x[j] = (float)((t * 3 + j * 5) % 17) * 0.0625f - 0.5f;
}

/* A seen signature's runs in the default mode (plan, capture, then
 * replays): past the capture, a run allocates nothing. */
static void test_a_replayed_step_allocates_nothing(void **state)
{
    (void)state;
    if (!COUNTING)
        skip();
    cge_session *s = open_session(0);
    static float past[MAXL * D];
    for (int i = 0; i < 5 * D; i++)
        past[i] = (float)(i % 7) * 0.1f;
    float x[D];
    input_of(1, x);
    static outs o;
    for (int r = 0; r < 3; r++)
        run(s, 5, past, x, &o);
    cge_run_mode mode = CGE_RUN_DEFAULT;
    assert_int_equal(cge_session_last_run_mode(s, 1, &mode), CGE_OK);
    assert_int_equal(mode, CGE_RUN_REPLAY);
    for (int r = 0; r < 10; r++)
        assert_int_equal(run(s, 5, past, x, &o), 0);
    cge_session_destroy(s);
}

/* A decode loop in the default mode: every step a new length, taken over
 * in place. Once the shape program's buffers and the arena's blocks have
 * room, the session, the shape program and the instance allocate nothing
 * in a step (the steps that plan the arena again may): what is left are
 * the kernels prepared again (the fused attention's state, which its
 * prepare allocates), at most one allocation each. A step runs the metas
 * of the steps the length reaches only, and its outputs are bit-equal to a
 * fresh session's for that length. */
static void test_a_new_length_step_allocates_nothing(void **state)
{
    (void)state;
    cge_session *s = open_session(0);
    static float past[MAXL * D];
    memset(past, 0, sizeof past);
    float x[D];
    int64_t quiet = 0, counted = 0;
    for (int64_t t = 0; t < STEPS; t++) {
        input_of(t, x);
        static outs o, w;
        cge_session_graph_stats before, after;
        assert_int_equal(cge_session_get_graph_stats(s, 1, &before), CGE_OK);
        long a = run(s, t, past, x, &o);
        assert_int_equal(cge_session_get_graph_stats(s, 1, &after), CGE_OK);
        if (t >= STEPS / 2 && after.arena_replans == before.arena_replans &&
            after.respecializations == before.respecializations + 1) {
            counted++;
            quiet += COUNTING && a <= after.kernel_prepares - before.kernel_prepares;
            /* Only the steps the length reaches (not proj_k). */
            assert_true(after.shape_metas - before.shape_metas < 6);
        }
        cge_session *r = open_session(t > 0 ? t : 0);
        run(r, t, past, x, &w);
        cge_session_destroy(r);
        if (memcmp(o.present, w.present, sizeof(float) * (size_t)((t + 1) * D)) ||
            memcmp(o.y, w.y, sizeof o.y))
            fail_msg("past length %lld: outputs differ from a fresh session's", (long long)t);
        memcpy(past, o.present, sizeof(float) * (size_t)((t + 1) * D));
    }
    assert_true(counted >= STEPS / 4);
    if (COUNTING)
        assert_int_equal(quiet, counted);
    cge_session_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_replayed_step_allocates_nothing),
        cmocka_unit_test(test_a_new_length_step_allocates_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
