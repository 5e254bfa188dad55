/* A first run at a new size takes no new memory for its tables: a symbolic
 * graph's later signatures (plans, instance steps, operands, binding index)
 * come from the device's warm memory that the compile faulted in, the arena
 * does not grow within the largest size seen, and every output is bit-equal
 * to a fresh session's at that size. And the warm store itself: blocks
 * recycled zeroed, reserved room handed out without new pages, a block
 * outliving its store's release. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"
#include "runtime/warm_memory.h"

enum { D = 16, MAXL = 32 };

static void add_node(cge_graph *g, const char *op, const char *name, const char **in, int ni,
                     const char *out)
{
    const char *o[] = {out};
    cge_node *n = NULL;
    assert_int_equal(cge_graph_add_node(g, op, "", name, in, ni, o, 1, &n), CGE_OK);
    if (!strcmp(op, "Softmax"))
        assert_int_equal(cge_node_set_int(n, "axis", -1), CGE_OK);
}

/* x [1, L, 16] (L symbolic): Softmax(Relu(x W1 + b) W2). */
static cge_graph *build(void)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("first_run", &g), CGE_OK);
    int64_t L = cge_graph_dim_symbol(g, "seq");
    cge_shape xs = CGE_SHAPE(1, L, D), ws = CGE_SHAPE(D, D), bs = CGE_SHAPE(D);
    static float w1[D * D], w2[D * D], b[D];
    for (int i = 0; i < D * D; i++) {
        w1[i] = (float)((i * 7) % 13) * 0.03f - 0.15f;
        w2[i] = (float)((i * 5) % 11) * 0.04f - 0.2f;
    }
    for (int i = 0; i < D; i++)
        b[i] = (float)(i % 3) * 0.1f - 0.1f;
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "w1", CGE_F32, &ws, w1, sizeof w1), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "w2", CGE_F32, &ws, w2, sizeof w2), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "b", CGE_F32, &bs, b, sizeof b), CGE_OK);
    const char *m1[] = {"x", "w1"}, *a1[] = {"h", "b"}, *r1[] = {"hb"}, *m2[] = {"r", "w2"},
               *s1[] = {"z"};
    add_node(g, "MatMul", "mm1", m1, 2, "h");
    add_node(g, "Add", "bias", a1, 2, "hb");
    add_node(g, "Relu", "relu", r1, 1, "r");
    add_node(g, "MatMul", "mm2", m2, 2, "z");
    add_node(g, "Softmax", "softmax", s1, 1, "y");
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    return g;
}

static void fill(float *x, int64_t len)
{
    for (int64_t i = 0; i < len * D; i++)
        x[i] = (float)(i % 7) * 0.5f - 1.0f;
}

static void run_at(cge_session *s, int64_t len, const float *x, float *y)
{
    cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(1, len, D),
                     .data = (void *)x, .bytes = sizeof(float) * (size_t)(len * D)};
    cge_tensor out = {.name = "y", .data = y, .bytes = sizeof(float) * MAXL * D};
    assert_int_equal(cge_session_run_graph(s, 1, &in, 1, &out, 1), CGE_OK);
}

static cge_session *session_for(cge_graph *g)
{
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(NULL, &s), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
    assert_int_equal(cge_session_compile_graph(s, 1), CGE_OK);
    return s;
}

/* The largest size first, then smaller new sizes: none maps memory, hands
 * out cold bytes or grows the arena, and each output equals a fresh
 * session's first run at that size, byte for byte. */
static void test_new_sizes_within_the_largest_take_no_new_memory(void **state)
{
    (void)state;
    cge_graph *g = build();
    cge_session *s = session_for(g);
    static float x[MAXL * D], y[MAXL * D], ref[MAXL * D];
    cge_session_graph_stats gs;
    assert_int_equal(cge_session_get_graph_stats(s, 1, &gs), CGE_OK);
    assert_true(gs.shape_program);

    fill(x, MAXL);
    run_at(s, MAXL, x, y);
    assert_int_equal(cge_session_get_graph_stats(s, 1, &gs), CGE_OK);
    int64_t grows = gs.arena_grows;
    size_t arena = gs.arena_bytes;
    cge__warm_stats w0, w1;
    const int64_t lens[] = {5, 9, 12, 17, 20, 31};
    for (size_t k = 0; k < sizeof lens / sizeof *lens; k++) {
        int64_t len = lens[k];
        fill(x, len);
        cge_session *fresh = session_for(g);
        run_at(fresh, len, x, ref);
        cge_session_destroy(fresh);

        cge__warm_stats before;
        cge__warm_get_stats(cge__device_warm(cge_session_device(s)), &before);
        memset(y, 0, sizeof y);
        run_at(s, len, x, y);
        cge__warm_get_stats(cge__device_warm(cge_session_device(s)), &w1);
        assert_memory_equal(y, ref, sizeof(float) * (size_t)(len * D));
        /* Its plan and instance tables were handed out from warm memory. */
        assert_true(w1.allocs > before.allocs);
        assert_int_equal(w1.chunks, before.chunks);
        assert_int_equal(w1.cold_bytes, before.cold_bytes);
        if (k == 0)
            w0 = before;
        assert_int_equal(cge_session_get_graph_stats(s, 1, &gs), CGE_OK);
        assert_int_equal(gs.arena_grows, grows);
        assert_int_equal(gs.arena_bytes, arena);
        /* A seen size again: bytes equal too, nothing handed out. */
        run_at(s, len, x, y);
        assert_memory_equal(y, ref, sizeof(float) * (size_t)(len * D));
    }
    assert_true(w1.live_bytes > w0.live_bytes);
    /* The graph's tables go back to the store with it. */
    assert_int_equal(cge_session_remove_graph(s, 1), CGE_OK);
    cge__warm_get_stats(cge__device_warm(cge_session_device(s)), &w1);
    assert_true(w1.live_bytes < w0.live_bytes);
    cge_session_destroy(s);
    cge_graph_destroy(g);
}

static void test_store_recycles_zeroed_blocks(void **state)
{
    (void)state;
    cge__warm *w = cge__warm_create();
    assert_non_null(w);
    unsigned char *a = cge__warm_calloc(w, 1000, 1);
    assert_non_null(a);
    assert_int_equal((uintptr_t)a % 64, 0);
    memset(a, 0xab, 1000);
    cge__warm_free(a);
    unsigned char *b = cge__warm_calloc(w, 990, 1);
    assert_ptr_equal(a, b);   /* same class: the freed block again */
    for (int i = 0; i < 990; i++)
        assert_int_equal(b[i], 0);
    cge__warm_stats st;
    cge__warm_get_stats(w, &st);
    assert_int_equal(st.allocs, 2);
    assert_int_equal(st.reused, 1);
    assert_int_equal(st.chunks, 1);
    /* Reserved room: the next blocks are warm, from no new mapping. */
    assert_int_equal(cge__warm_reserve(w, 1 << 20), CGE_OK);
    cge__warm_get_stats(w, &st);
    size_t cold = st.cold_bytes;
    int64_t chunks = st.chunks;
    assert_true(st.populated_bytes >= (size_t)1 << 20);
    void *many[64];
    for (int i = 0; i < 64; i++) {
        many[i] = cge__warm_calloc(w, 3000 + (size_t)i * 100, 1);
        assert_non_null(many[i]);
    }
    cge__warm_get_stats(w, &st);
    assert_int_equal(st.cold_bytes, cold);
    assert_int_equal(st.chunks, chunks);
    for (int i = 0; i < 64; i++)
        cge__warm_free(many[i]);
    /* Released with a block still out: the block stays usable, and the
     * store goes with it (ASan and valgrind see no leak or bad access). */
    cge__warm_release(w);
    memset(b, 1, 990);
    cge__warm_free(b);
    /* A NULL store allocates from the heap, freed the same way. */
    void *h = cge__warm_calloc(NULL, 10, 8);
    assert_non_null(h);
    cge__warm_free(h);
    assert_null(cge__warm_calloc(NULL, SIZE_MAX / 2, 4));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_sizes_within_the_largest_take_no_new_memory),
        cmocka_unit_test(test_store_recycles_zeroed_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
