/* Memory planning: both strategies on random and adversarial lifetimes, the
 * verifier (it must catch overlaps, out-of-arena blocks and unsafe in-place
 * writes), the lower bound, and plans: in-place chains, views sharing memory,
 * workspaces; sizes that overflow are refused before planning. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ct_util.h"

static uint32_t rng(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static size_t naive(const cge_mem_block *b, int32_t n)
{
    size_t s = 0;
    for (int32_t i = 0; i < n; i++)
        s += (b[i].bytes + 63) & ~(size_t)63;
    return s;
}

static void plan_and_check(cge_mem_block *b, int32_t n, cge_memplan_strategy strat, size_t *arena)
{
    assert_int_equal(cge_memplan_assign(b, n, 64, strat, arena), CGE_OK);
    if (cge_memplan_verify(b, n, *arena) != CGE_OK)
        fail_msg("%s", cge_last_error());
    for (int32_t i = 0; i < n; i++)
        assert_int_equal(b[i].offset % 64, 0);
    assert_true(*arena >= cge_memplan_lower_bound(b, n, 64));
    assert_true(*arena <= naive(b, n));
}

static void test_random_lifetimes(void **state)
{
    uint32_t seed = 99;
    for (int round = 0; round < 20; round++) {
        int32_t n = 1 + (int32_t)(rng(&seed) % 300);
        cge_mem_block *b = calloc((size_t)n, sizeof *b);
        for (int32_t i = 0; i < n; i++) {
            int32_t first = (int32_t)(rng(&seed) % 200) - 1;
            b[i] = (cge_mem_block){.bytes = 1 + rng(&seed) % 5000, .first = first,
                                   .last = first + (int32_t)(rng(&seed) % 30)};
        }
        size_t a1, a2, a3;
        plan_and_check(b, n, CGE_MEMPLAN_GREEDY_BY_SIZE, &a1);
        plan_and_check(b, n, CGE_MEMPLAN_LINEAR_SCAN, &a2);
        plan_and_check(b, n, CGE_MEMPLAN_AUTO, &a3);
        assert_int_equal(a3, a1 < a2 ? a1 : a2);
        free(b);
    }
}

/* The linear scan orders its events by counting when the steps span a
 * range about as long as the blocks (a plan's) and by sorting when they are
 * sparse: the same lifetimes spread 100 steps apart (every relative order
 * of allocations and frees kept) get the same offsets from both. */
static void test_linear_scan_dense_and_sparse_times(void **state)
{
    (void)state;
    uint32_t seed = 7;
    for (int round = 0; round < 10; round++) {
        int32_t n = 1 + (int32_t)(rng(&seed) % 250);
        cge_mem_block *dense = calloc((size_t)n, sizeof *dense);
        cge_mem_block *sparse = calloc((size_t)n, sizeof *sparse);
        for (int32_t i = 0; i < n; i++) {
            int32_t first = (int32_t)(rng(&seed) % 120) - 2, len = (int32_t)(rng(&seed) % 25);
            size_t bytes = rng(&seed) % 4 ? 1 + rng(&seed) % 5000 : 0;
            dense[i] = (cge_mem_block){.bytes = bytes, .first = first, .last = first + len};
            sparse[i] = (cge_mem_block){.bytes = bytes, .first = 100 * first,
                                        .last = 100 * (first + len)};
        }
        size_t a1, a2;
        plan_and_check(dense, n, CGE_MEMPLAN_LINEAR_SCAN, &a1);
        plan_and_check(sparse, n, CGE_MEMPLAN_LINEAR_SCAN, &a2);
        assert_int_equal(a1, a2);
        for (int32_t i = 0; i < n; i++)
            assert_int_equal(dense[i].offset, sparse[i].offset);
        free(dense);
        free(sparse);
    }
}

static void test_adversarial_lifetimes(void **state)
{
    /* Lifetimes that touch at one step must not share: the consumer at that
     * step reads one while writing the other. */
    cge_mem_block touch[2] = {{.bytes = 100, .first = 0, .last = 3}, {.bytes = 100, .first = 3, .last = 5}};
    size_t arena;
    plan_and_check(touch, 2, CGE_MEMPLAN_AUTO, &arena);
    assert_int_equal(arena, 256);
    /* Disjoint in time: one slot. */
    cge_mem_block apart[2] = {{.bytes = 100, .first = 0, .last = 2}, {.bytes = 100, .first = 3, .last = 5}};
    plan_and_check(apart, 2, CGE_MEMPLAN_AUTO, &arena);
    assert_int_equal(arena, 128);
    /* A chain: each tensor lives from its producer to its consumer. */
    cge_mem_block chain[50];
    for (int i = 0; i < 50; i++)
        chain[i] = (cge_mem_block){.bytes = 4096, .first = i, .last = i + 1};
    plan_and_check(chain, 50, CGE_MEMPLAN_AUTO, &arena);
    assert_int_equal(arena, 2 * 4096);
    /* Nested lifetimes, sizes growing inwards, and empty and input-like blocks. */
    cge_mem_block nest[12];
    for (int i = 0; i < 10; i++)
        nest[i] = (cge_mem_block){.bytes = (size_t)(i + 1) * 1000, .first = i, .last = 20 - i};
    nest[10] = (cge_mem_block){.bytes = 0, .first = 0, .last = 20};
    nest[11] = (cge_mem_block){.bytes = 64, .first = -1, .last = -1};
    plan_and_check(nest, 12, CGE_MEMPLAN_AUTO, &arena);
    assert_int_equal(arena, cge_memplan_lower_bound(nest, 12, 64));
    /* A fragmenting pattern: small long-lived blocks between large short ones. */
    cge_mem_block frag[40];
    for (int i = 0; i < 20; i++) {
        frag[2 * i] = (cge_mem_block){.bytes = 64, .first = i, .last = 40};
        frag[2 * i + 1] = (cge_mem_block){.bytes = 10000, .first = i, .last = i};
    }
    plan_and_check(frag, 40, CGE_MEMPLAN_GREEDY_BY_SIZE, &arena);
    plan_and_check(frag, 40, CGE_MEMPLAN_LINEAR_SCAN, &arena);
}

static void test_verifier_catches(void **state)
{
    cge_mem_block b[3] = {{.bytes = 128, .first = 0, .last = 4, .offset = 0},
                          {.bytes = 128, .first = 5, .last = 9, .offset = 0},
                          {.bytes = 128, .first = 2, .last = 6, .offset = 64}};
    /* Block 2 overlaps block 0 (steps 2-4) and block 1 (5-6) in bytes 64-127. */
    assert_int_equal(cge_memplan_verify(b, 3, 256), CGE_ERR_INTERNAL);
    assert_non_null(strstr(cge_last_error(), "overlap"));
    b[2].offset = 128;
    assert_int_equal(cge_memplan_verify(b, 3, 256), CGE_OK);
    assert_int_equal(cge_memplan_verify(b, 3, 255), CGE_ERR_INTERNAL);   /* past the arena */
    assert_non_null(strstr(cge_last_error(), "outside the arena"));
    /* Overlap hidden behind a non-neighbour: a big block below two small ones. */
    cge_mem_block c[3] = {{.bytes = 1000, .first = 0, .last = 9, .offset = 0},
                          {.bytes = 64, .first = 0, .last = 9, .offset = 1024},
                          {.bytes = 64, .first = 3, .last = 3, .offset = 512}};
    assert_int_equal(cge_memplan_verify(c, 3, 4096), CGE_ERR_INTERNAL);
    cge_mem_block bad = {.bytes = 1, .first = 3, .last = 2};
    size_t arena;
    assert_int_equal(cge_memplan_assign(&bad, 1, 64, CGE_MEMPLAN_AUTO, &arena), CGE_ERR_INVALID_ARG);
    cge_mem_block ok = {.bytes = 1, .first = 0, .last = 0};
    assert_int_equal(cge_memplan_assign(&ok, 1, 48, CGE_MEMPLAN_AUTO, &arena), CGE_ERR_INVALID_ARG);
}

static void test_lower_bound(void **state)
{
    cge_mem_block b[3] = {{.bytes = 100, .first = 0, .last = 1},
                          {.bytes = 200, .first = 1, .last = 2},
                          {.bytes = 300, .first = 2, .last = 3}};
    /* Step 1: 128 + 256; step 2: 256 + 320 (sizes rounded to 64). */
    assert_int_equal(cge_memplan_lower_bound(b, 3, 64), 576);
    assert_int_equal(cge_memplan_lower_bound(b, 3, 1), 500);
}

/* ---- plans ---------------------------------------------------------------------- */

static cge_plan *compile(const cge_graph *g, cge_opt_level lvl)
{
    cge_compile_options o = ct_opts(lvl);
    cge_plan *p = NULL;
    if (cge_compile(g, NULL, 0, &o, &p))
        fail_msg("compile: %s", cge_last_error());
    return p;
}

static void test_inplace_chain(void **state)
{
    cge_graph *g = ct_graph("chain");
    ct_input(g, "x", CGE_SHAPE(1024));
    const char *names[9] = {"x", "a", "b", "c", "d", "e", "f", "g", "y"};
    for (int i = 0; i < 8; i++)
        ct_node(g, i % 2 ? "Relu" : "Neg", names[i], NULL, names[i + 1]);
    ct_output(g, "y");
    cge_plan *p = compile(g, CGE_OPT_NONE);
    /* Every step after the first writes over its input: one buffer for the
     * chain, and one for x (never written in place: a bound run hands the
     * caller's input buffer to the kernels). */
    assert_int_equal(cge_plan_arena_bytes(p), 2 * 4096);
    assert_int_equal(cge_plan_verify(p), CGE_OK);
    const cge_plan_stats *s = cge_plan_get_stats(p);
    assert_true(s->naive_bytes >= 9 * 4096);
    cge_plan_destroy(p);
    /* x read again at the end: nothing may overwrite it. */
    ct_node(g, "Add", "y", "x", "z");
    ct_output(g, "z");
    p = compile(g, CGE_OPT_NONE);
    assert_int_equal(cge_plan_verify(p), CGE_OK);
    const cge_plan_value *x = &cge_plan_values(p)[cge_plan_input_value(p, 0)];
    for (int32_t v = 0; v < cge_plan_num_values(p); v++) {
        const cge_plan_value *pv = &cge_plan_values(p)[v];
        if (pv != x && pv->storage == CGE_STORAGE_ARENA)
            assert_true(pv->offset + pv->bytes <= x->offset || x->offset + x->bytes <= pv->offset);
    }
    cge_plan_destroy(p);
    ct_assert_equivalent(g, &(cge_compile_options){.opt_level = CGE_OPT_NONE, .num_streams = 2}, 0, 0.0);
    cge_graph_destroy(g);
}

static void test_views_share_memory(void **state)
{
    int64_t s[2] = {32, 32};
    cge_graph *g = ct_graph("views");
    ct_input(g, "x", CGE_SHAPE(1024));
    ct_const_i64(g, "s", s, 2);
    ct_node(g, "Exp", "x", NULL, "e");
    ct_node(g, "Reshape", "e", "s", "r");
    ct_node(g, "Softmax", "r", NULL, "y");
    ct_output(g, "y");
    cge_plan *p = compile(g, CGE_OPT_NONE);
    const cge_plan_value *e = &cge_plan_values(p)[cge_plan_find_value(p, "e")];
    const cge_plan_value *r = &cge_plan_values(p)[cge_plan_find_value(p, "r")];
    /* e is computed in place over x, and r is a view of e: all one memory. */
    assert_true(r->alias_of >= 0);
    assert_int_equal(r->offset, e->offset);
    assert_int_equal(r->storage, CGE_STORAGE_ARENA);
    assert_int_equal(cge_plan_verify(p), CGE_OK);
    cge_plan_destroy(p);
    ct_assert_equivalent(g, &(cge_compile_options){.opt_level = CGE_OPT_NONE}, 0, 0.0);
    cge_graph_destroy(g);
}

static void test_plan_verifier_catches_tampering(void **state)
{
    cge_graph *g = ct_graph("tamper");
    ct_input(g, "x", CGE_SHAPE(256));
    ct_input(g, "w", CGE_SHAPE(256));
    ct_node(g, "Mul", "x", "w", "a");
    ct_node(g, "Exp", "a", NULL, "b");
    ct_node(g, "Add", "b", "a", "c");
    ct_node(g, "Add", "c", "x", "y");
    ct_output(g, "y");
    cge_plan *p = compile(g, CGE_OPT_NONE);
    assert_int_equal(cge_plan_verify(p), CGE_OK);
    /* Move 'b' onto 'a' while both are live: the verifier must object. */
    cge_plan_value *vals = (cge_plan_value *)cge_plan_values(p);
    int32_t a = cge_plan_find_value(p, "a"), b = cge_plan_find_value(p, "b");
    size_t keep = vals[b].offset;
    vals[b].offset = vals[a].offset;
    assert_int_equal(cge_plan_verify(p), CGE_ERR_INTERNAL);
    vals[b].offset = keep;
    /* Pretend 'b' overwrote 'a' in place although 'a' is read later. */
    cge_plan_value saved[16];
    int32_t nv = cge_plan_num_values(p);
    assert_true(nv <= 16);
    memcpy(saved, vals, sizeof(cge_plan_value) * (size_t)nv);
    /* b and whatever shared b's memory now share a's, consistently. */
    for (int32_t v = 0; v < nv; v++)
        if (v == b || vals[v].alias_of == b) {
            vals[v].alias_of = a;
            vals[v].offset = vals[a].offset;
        }
    assert_int_equal(cge_plan_verify(p), CGE_ERR_INTERNAL);
    vals[a].last_step = cge_plan_num_steps(p);   /* lifetimes now cover every use */
    vals[a].first_step = -1;
    assert_int_equal(cge_plan_verify(p), CGE_ERR_INTERNAL);
    if (!strstr(cge_last_error(), "in place"))
        fail_msg("%s", cge_last_error());
    memcpy(vals, saved, sizeof(cge_plan_value) * (size_t)nv);
    assert_int_equal(cge_plan_verify(p), CGE_OK);
    cge_plan_destroy(p);
    cge_graph_destroy(g);
}

static void test_workspace_in_arena(void **state)
{
    /* B past what MatMul reads unpacked (64K floats): packed into a workspace */
    enum { D = 300 };
    float *w = malloc(sizeof(float) * D * D);
    for (int i = 0; i < D * D; i++)
        w[i] = (float)(i % 7) * 0.01f;
    cge_graph *g = ct_graph("ws");
    ct_input(g, "x", CGE_SHAPE(32, D));
    ct_const_f32(g, "w", CGE_SHAPE(D, D), w);
    ct_node(g, "MatMul", "x", "w", "h");
    ct_node(g, "MatMul", "h", "w", "y");
    ct_output(g, "y");
    cge_plan *p = compile(g, CGE_OPT_NONE);
    const cge_plan_step *s = cge_plan_steps(p);
    assert_true(s[0].workspace_bytes > 0);
    assert_true(s[0].workspace_offset + s[0].workspace_bytes <= cge_plan_arena_bytes(p));
    assert_int_equal(cge_plan_verify(p), CGE_OK);
    cge_plan_destroy(p);
    ct_assert_equivalent(g, &(cge_compile_options){.opt_level = CGE_OPT_NONE}, 0, 0.0);
    cge_graph_destroy(g);
    free(w);
}

/* [2^40, 2^40] float32 has 2^80 elements: meta refuses it as too large, naming
 * the node and the value (it reached the memory plan as an overflowed size,
 * "block 0 [0, +18446744073709551615) lies outside the arena"). */
static void test_overflowing_sizes_refused(void **state)
{
    static const struct {
        cge_shape s;
        const char *op;
    } cases[] = {
        {CGE_SHAPE((int64_t)1 << 40, (int64_t)1 << 40), "Relu"},
        {CGE_SHAPE((int64_t)1 << 31, (int64_t)1 << 31, 4), "Relu"},
        {CGE_SHAPE((int64_t)1 << 32, (int64_t)1 << 32, (int64_t)1 << 32), "Neg"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        cge_graph *g = ct_graph("huge");
        ct_input(g, "x", cases[c].s);
        ct_node(g, cases[c].op, "x", NULL, "y");
        ct_output(g, "y");
        cge_plan *p = NULL;
        cge_compile_options o = ct_opts(CGE_OPT_NONE);
        assert_int_equal(cge_compile(g, NULL, 0, &o, &p), CGE_ERR_SHAPE);
        assert_null(p);
        const char *msg = cge_last_error();
        if (!strstr(msg, "[meta]") || !strstr(msg, "input 0 ('x')") || !strstr(msg, "too large") ||
            !strstr(msg, cases[c].op))
            fail_msg("unexpected message: %s", msg);
        cge_graph_destroy(g);
    }
    /* the largest size described still compiles (2^54 float32 = 2^56 bytes) */
    cge_graph *g = ct_graph("largest");
    ct_input(g, "x", CGE_SHAPE((int64_t)1 << 27, (int64_t)1 << 27));
    ct_node(g, "Relu", "x", NULL, "y");
    ct_output(g, "y");
    cge_plan *p = NULL;
    cge_compile_options o = ct_opts(CGE_OPT_NONE);
    if (cge_compile(g, NULL, 0, &o, &p) != CGE_OK)
        fail_msg("%s", cge_last_error());
    cge_plan_destroy(p);
    cge_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_lifetimes),
        cmocka_unit_test(test_linear_scan_dense_and_sparse_times),
        cmocka_unit_test(test_adversarial_lifetimes),
        cmocka_unit_test(test_verifier_catches),
        cmocka_unit_test(test_lower_bound),
        cmocka_unit_test(test_inplace_chain),
        cmocka_unit_test(test_views_share_memory),
        cmocka_unit_test(test_plan_verifier_catches_tampering),
        cmocka_unit_test(test_workspace_in_arena),
        cmocka_unit_test(test_overflowing_sizes_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
